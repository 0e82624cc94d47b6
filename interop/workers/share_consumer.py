#!/usr/bin/env python3
"""A confluent-kafka ShareConsumer (KIP-932, librdkafka's share consumer) for the share-group
scenarios: subscribes, polls until "stop" on stdin, and reports every record it got and every
acknowledgement the broker answered.

    share_consumer.py SPEC_JSON

SPEC: bootstrap, group, topic, label, mode, and optionally conf (further librdkafka settings).
Modes:
  implicit  every record accepted at the next poll (librdkafka's default acknowledgement mode)
  explicit  the record with offset % 10 == 0 released at its first delivery (delivery count 1),
            offset % 10 == 1 rejected, every other one accepted
  accept    explicit mode, every record ACCEPTed (then commit_sync)
  release   explicit mode, every record RELEASEd at every delivery (then commit_sync)
  hold      explicit mode, never acknowledges: after the first poll that returned records it
            polls no more (its records stay acquired until their lock runs out or it is killed)
  hold-odd  as hold, but the records at even offsets of that poll are ACCEPTed (commit_sync):
            the odd ones stay acquired, each between two acknowledged ones
Events, one JSON object per line on stdout: started, recs (a list of [partition, offset, key,
delivery count, what it did]), acked (the acknowledgement commit callback: a list of
[partition, [offsets]] and err, None when the broker accepted them), error (a record's error
or a poll/commit that raised), closed.
"""
import json
import sys
import threading
import time

from confluent_kafka import AcknowledgeType, KafkaException, ShareConsumer

spec = json.loads(sys.argv[1])
stop = threading.Event()
MODES = ("implicit", "explicit", "accept", "release", "hold", "hold-odd")


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


def on_acked(offsets, exc):
    r = [[tp.partition, sorted(offs)] for tp, offs in offsets.items()]
    emit("acked", r=r, err=str(exc) if exc is not None else None)


def decide(mode, m):
    """What the worker does with the record: (name, AcknowledgeType or None)."""
    if mode == "accept":
        return "accept", AcknowledgeType.ACCEPT
    if mode == "release":
        return "release", AcknowledgeType.RELEASE
    if mode == "hold":
        return "hold", None
    if mode == "hold-odd":
        if m.offset() % 2 == 0:
            return "accept", AcknowledgeType.ACCEPT
        return "hold", None
    # explicit: the pattern of share-group-explicit-confluent
    if m.offset() % 10 == 0 and m.delivery_count() == 1:
        return "release", AcknowledgeType.RELEASE
    if m.offset() % 10 == 1:
        return "reject", AcknowledgeType.REJECT
    return "accept", AcknowledgeType.ACCEPT


def main():
    threading.Thread(target=watch_stdin, daemon=True).start()
    mode = spec.get("mode", "implicit")
    if mode not in MODES:
        emit("error", msg="unknown mode %r" % mode, fatal=True)
        return 2
    implicit = mode == "implicit"
    conf = {
        "bootstrap.servers": spec["bootstrap"], "group.id": spec["group"],
        "client.id": spec["label"],
        "share.acknowledgement.mode": "implicit" if implicit else "explicit",
    }
    conf.update(spec.get("conf") or {})
    consumer = ShareConsumer(conf)
    consumer.set_acknowledgement_commit_callback(on_acked)
    consumer.subscribe([spec["topic"]])
    emit("started")
    holding = False
    while not stop.is_set():
        if holding:
            stop.wait(0.2)
            continue
        try:
            msgs = consumer.poll(0.5) or []
        except KafkaException as e:
            emit("error", msg="poll: %s" % e, retriable=e.args[0].retriable() if e.args else None)
            time.sleep(0.2)
            continue
        out = []
        for m in msgs:
            if m.error():
                emit("error", msg=str(m.error()))
                continue
            key = m.key().decode() if m.key() else None
            did = "accept"
            if not implicit:
                did, ack = decide(mode, m)
                if ack is not None:
                    consumer.acknowledge(m, ack)
            out.append([m.partition(), m.offset(), key, m.delivery_count(), did])
        if out:
            emit("recs", r=out)
        if mode.startswith("hold") and out:
            holding = True
        if mode != "hold" and not implicit and out:
            try:
                consumer.commit_sync(10)
            except KafkaException as e:
                emit("error", msg="commit_sync: %s" % e, retriable=e.args[0].retriable() if e.args else None)
    if not holding:
        consumer.close()
    emit("closed")


if __name__ == "__main__":
    sys.exit(main())
