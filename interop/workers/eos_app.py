#!/usr/bin/env python3
"""A consume-transform-produce application with confluent-kafka's transactions: reads the input
topic in a consumer group (read_committed), and for each input record produces one output
record (same key, value "out:" + input value) in a transaction that also commits the group's
offsets (send_offsets_to_transaction), 1-50 input records per transaction.

    eos_app.py SPEC_JSON     (bootstrap, input, output, group, txn_id, label)

Prints JSON events on stdout: {"ev": "ready"} once its first transaction can begin,
{"ev": "txn", "n": N, "outcome": "commit"|"abort", "parts": {...}} per transaction,
{"ev": "fenced", "msg": ...} when another instance with the same transactional id fenced it
(then it exits 3), {"ev": "error", "msg": ..., "fatal": true} on anything else fatal. Stops
on "stop" on stdin (after the transaction in hand). SIGKILL is what the scenario uses on it.
"""
import json
import random
import sys
import threading
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

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
    consumer = Consumer({
        "bootstrap.servers": spec["bootstrap"], "group.id": spec["group"],
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
        "isolation.level": "read_committed", "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 500, "client.id": spec["label"],
    })
    producer = Producer({
        "bootstrap.servers": spec["bootstrap"], "transactional.id": spec["txn_id"],
        "transaction.timeout.ms": 30000, "client.id": spec["label"], "linger.ms": 5,
    })
    producer.init_transactions(30)
    consumer.subscribe([spec["input"]])
    emit("ready")
    rng = random.Random()
    n = 0
    while not stop.is_set():
        msgs = consumer.consume(num_messages=rng.randint(1, 50), timeout=0.5)
        msgs = [m for m in msgs if m.error() is None]
        if not msgs:
            continue
        producer.begin_transaction()
        try:
            for m in msgs:
                producer.produce(spec["output"], key=m.key(), value=b"out:" + (m.value() or b""))
            # The next offsets of the partitions read: the group's position.
            positions = consumer.position(consumer.assignment())
            producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
            producer.commit_transaction(30)
            n += 1
            emit("txn", n=n, outcome="commit", records=len(msgs),
                 parts={"%s/%d" % (tp.topic, tp.partition): tp.offset for tp in positions if tp.offset >= 0})
        except KafkaException as e:
            err = e.args[0]
            if err.txn_requires_abort():
                producer.abort_transaction(30)
                n += 1
                emit("txn", n=n, outcome="abort", msg=err.str())
                # Back to the committed offsets: what the aborted transaction read is read again.
                committed = consumer.committed(consumer.assignment(), 30)
                for tp in committed:
                    consumer.seek(tp if tp.offset >= 0 else TopicPartition(tp.topic, tp.partition, 0))
                continue
            if err.code() == KafkaError._FENCED or err.fatal() or "fenced" in err.str().lower():
                emit("fenced", msg=err.str())
                sys.exit(3)
            raise
    try:
        consumer.close()
    except KafkaException:
        pass


try:
    main()
except KafkaException as e:
    err = e.args[0]
    if err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH):
        emit("fenced", msg=err.str())
        sys.exit(3)
    emit("error", msg=str(err), fatal=True)
    sys.exit(1)
