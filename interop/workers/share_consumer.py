#!/usr/bin/env python3
"""A confluent-kafka ShareConsumer (KIP-932, librdkafka's share consumer) for the share-group
scenarios: subscribes, polls until "stop" on stdin, and reports every record it got.

    share_consumer.py SPEC_JSON

SPEC: bootstrap, group, topic, label, and mode: "implicit" (every record accepted at the next
poll, librdkafka's default) or "explicit" (the record with offset % 10 == 0 is released the
at its first delivery (delivery count 1), offset % 10 == 1 rejected, every other one accepted).
Events, one JSON object per line on stdout: started, recs (a list of [partition, offset,
key, delivery count, what it did]), error, closed.
"""
import json
import sys
import threading
import time

from confluent_kafka import AcknowledgeType, ShareConsumer

spec = json.loads(sys.argv[1])
stop = threading.Event()


def emit(ev, **kw):
    kw["ev"] = ev
    kw["t"] = time.time()
    sys.stdout.write(json.dumps(kw) + "\n")
    sys.stdout.flush()


def watch_stdin():
    for line in sys.stdin:
        if line.strip() == "stop":
            break
    stop.set()


def main():
    threading.Thread(target=watch_stdin, daemon=True).start()
    explicit = spec.get("mode") == "explicit"
    consumer = ShareConsumer({
        "bootstrap.servers": spec["bootstrap"], "group.id": spec["group"],
        "client.id": spec["label"],
        "share.acknowledgement.mode": "explicit" if explicit else "implicit",
    })
    consumer.subscribe([spec["topic"]])
    emit("started")
    while not stop.is_set():
        msgs = consumer.poll(0.5) or []
        out = []
        for m in msgs:
            if m.error():
                emit("error", msg=str(m.error()))
                continue
            key = m.key().decode() if m.key() else None
            did = "accept"
            if explicit:
                if m.offset() % 10 == 0 and m.delivery_count() == 1:
                    did = "release"
                    consumer.acknowledge(m, AcknowledgeType.RELEASE)
                elif m.offset() % 10 == 1:
                    did = "reject"
                    consumer.acknowledge(m, AcknowledgeType.REJECT)
                else:
                    consumer.acknowledge(m, AcknowledgeType.ACCEPT)
            out.append([m.partition(), m.offset(), key, m.delivery_count(), did])
        if out:
            emit("recs", r=out)
        if explicit and msgs:
            consumer.commit_sync(10)
    consumer.close()
    emit("closed")


if __name__ == "__main__":
    main()
