#!/usr/bin/env python3
"""A compacted topic as its users meet it: kafka-python creates a topic with
cleanup.policy=compact, writes many values per key (and a tombstone), then rolls the segment
with records of keys of their own; kafka-python and confluent-kafka read the partition from the
beginning until each key is down to its latest value (a confluent-kafka transactional
producer adds an aborted and a committed transaction: the aborted record must go) (the broker's cleaner runs every
--log-cleaner-backoff-ms). Prints one JSON object on stdout (the scenario
compacted-topic-kafka-python checks it).

    compacted_topic.py SPEC_JSON      (bootstrap, prefix, keys, values_per_key, fillers, seconds)
"""
import json
import sys
import time

from confluent_kafka import Consumer, Producer
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic
from kafka.structs import TopicPartition

TIMEOUT = 15


def read_kafka_python(bootstrap, topic, end):
    """Every record of partition 0 below `end`: (offset, key, value or None)."""
    c = KafkaConsumer(bootstrap_servers=bootstrap, client_id="interop-compact-kp",
                      enable_auto_commit=False, auto_offset_reset="earliest",
                      consumer_timeout_ms=3000)
    tp = TopicPartition(topic, 0)
    c.assign([tp])
    c.seek_to_beginning(tp)
    out = []
    deadline = time.time() + TIMEOUT
    while time.time() < deadline:
        for tp_, records in c.poll(timeout_ms=500).items():
            for r in records:
                out.append((r.offset, r.key.decode(), None if r.value is None else r.value.decode()))
        if c.position(tp) >= end:
            break
    c.close()
    return [r for r in out if r[0] < end]


def read_confluent(bootstrap, topic, end):
    from confluent_kafka import TopicPartition as CTP
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "interop-compact-ck",
                  "client.id": "interop-compact-ck", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    c.assign([CTP(topic, 0, 0)])
    out = []
    deadline = time.time() + TIMEOUT
    while time.time() < deadline:
        m = c.poll(0.5)
        if m is None:
            if out and out[-1][0] >= end - 1:
                break
            continue
        if m.error():
            continue
        out.append((m.offset(), m.key().decode(), None if m.value() is None else m.value().decode()))
        if m.offset() >= end - 1:
            break
    c.close()
    return [r for r in out if r[0] < end]


def main():
    spec = json.loads(sys.argv[1])
    bootstrap, p = spec["bootstrap"], spec["prefix"]
    topic = p + "-compacted"
    keys, per_key, fillers = spec["keys"], spec["values_per_key"], spec["fillers"]
    out = {}
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="interop-compact-admin",
                             request_timeout_ms=TIMEOUT * 1000)
    admin.create_topics([NewTopic(topic, 1, 1, topic_configs={"cleanup.policy": "compact"})])
    admin.close()
    prod = KafkaProducer(bootstrap_servers=bootstrap, client_id="interop-compact-producer",
                         acks="all", linger_ms=5)
    latest = {}
    written = 0
    for v in range(per_key):
        for k in range(keys):
            key = "key-%03d" % k
            value = "value-%03d-%04d-%s" % (k, v, "x" * 64)
            if k == 0 and v == per_key - 1:
                value = None        # the last write of key-000 deletes it
            md = prod.send(topic, key=key.encode(),
                           value=None if value is None else value.encode(), partition=0).get(TIMEOUT)
            latest[key] = (md.offset, key, value)
            written += 1
    prod.flush(TIMEOUT)
    # Two transactions of confluent-kafka: an aborted one over key-001 (its record must go),
    # a committed one over key-002 (its record is key-002's latest).
    txp = Producer({"bootstrap.servers": bootstrap, "transactional.id": p + "-txn",
                    "client.id": "interop-compact-txn"})
    txp.init_transactions(TIMEOUT)
    txp.begin_transaction()
    txp.produce(topic, key=b"key-001", value=b"aborted", partition=0)
    txp.flush(TIMEOUT)
    txp.abort_transaction(TIMEOUT)
    txp.begin_transaction()
    committed = {}

    def delivered(err, msg):
        if err is None:
            committed["offset"] = msg.offset()

    txp.produce(topic, key=b"key-002", value=b"committed", partition=0, on_delivery=delivered)
    txp.commit_transaction(TIMEOUT)
    latest["key-002"] = (committed["offset"], "key-002", "committed")
    end = None
    for i in range(fillers):
        md = prod.send(topic, key=b"filler-%05d" % i, value=b"f" * 200, partition=0).get(TIMEOUT)
        if end is None:
            end = md.offset
    prod.flush(TIMEOUT)
    prod.close()
    out["written"] = written

    expected = sorted(latest.values())
    deadline = time.time() + spec["seconds"]
    got_kp = []
    polls = 0
    while time.time() < deadline:
        polls += 1
        got_kp = read_kafka_python(bootstrap, topic, end)
        if len(got_kp) <= len(expected):
            break
        time.sleep(0.5)
    out["kafka_python_polls"] = polls
    out["kafka_python_records"] = len(got_kp)
    out["kafka_python_latest_only"] = sorted(got_kp) == expected
    got_ck = read_confluent(bootstrap, topic, end)
    out["confluent_records"] = len(got_ck)
    out["confluent_latest_only"] = sorted(got_ck) == expected
    out["tombstone_kept"] = any(r[1] == "key-000" and r[2] is None for r in got_kp)
    out["aborted_gone"] = not any(r[2] == "aborted" for r in got_kp)
    out["committed_latest"] = any(r[1] == "key-002" and r[2] == "committed" for r in got_kp)
    out["expected_records"] = len(expected)
    if sorted(got_kp) != expected:
        sys.stderr.write("kafka-python read %s\nexpected %s\n" % (sorted(got_kp)[:10], expected[:10]))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
