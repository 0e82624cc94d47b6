#!/usr/bin/env python3
"""Transactions held open across a broker's replacement (the postgres-broker-replaced scenario).

Two confluent-kafka transactional producers each open a transaction and flush records into it;
the worker prints {"ev": "open"} and waits for one line on stdin (the scenario kills the broker
and starts a fresh process on the same database meanwhile). Then the first commits its
transaction, the second aborts its own, and the first runs one more transaction from begin to
commit on the new process. A read_committed consumer then reads the topic from the start.
Prints one JSON object: what each step raised (null when it passed) and the values read.

    txn_across.py SPEC_JSON      (bootstrap, topic, prefix)
"""
import json
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition

TIMEOUT = 30


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def step(out, name, fn):
    try:
        fn()
        out[name] = None
    except Exception as e:  # KafkaException: the step's error, reported, not raised
        out[name] = str(e)


def main():
    spec = json.loads(sys.argv[1])
    bootstrap, topic, p = spec["bootstrap"], spec["topic"], spec["prefix"]
    conf = {"bootstrap.servers": bootstrap, "transaction.timeout.ms": 120000,
            "message.timeout.ms": 60000}
    keep = Producer(dict(conf, **{"transactional.id": p + "-keep"}))
    drop = Producer(dict(conf, **{"transactional.id": p + "-drop"}))
    for prod, tag in ((keep, "kept"), (drop, "dropped")):
        prod.init_transactions(TIMEOUT)
        prod.begin_transaction()
        for i in range(5):
            prod.produce(topic, value=b"%s-%d" % (tag.encode(), i), partition=i % 2)
        prod.flush(TIMEOUT)
    emit({"ev": "open"})
    sys.stdin.readline()  # the broker was replaced meanwhile

    out = {}
    step(out, "commit_across", lambda: keep.commit_transaction(TIMEOUT))
    step(out, "abort_across", lambda: drop.abort_transaction(TIMEOUT))

    def after():
        keep.begin_transaction()
        for i in range(5):
            keep.produce(topic, value=b"after-%d" % i, partition=i % 2)
        keep.commit_transaction(TIMEOUT)
    step(out, "transaction_after", after)

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": p + "-reader",
                  "isolation.level": "read_committed", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, 0, 0), TopicPartition(topic, 1, 0)])
    seen = []
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline and len([v for v in seen if v.startswith("after-")]) < 5:
        m = c.poll(0.5)
        if m is None or m.error():
            continue
        seen.append(m.value().decode())
    c.close()
    out["read_committed"] = sorted(seen)
    for prod in (keep, drop):
        prod.flush(5)
    emit(out)


if __name__ == "__main__":
    main()
