#!/usr/bin/env python3
"""A stale commit through confluent-kafka's transactions (KIP-447 with the consumer group
protocol): a consumer's group metadata taken before its member epoch moved on is refused.

    stale_commit.py SPEC_JSON      (bootstrap, topic, group, txn_id)

Consumer a (group.protocol=consumer) joins; its group metadata is kept (librdkafka's
generation there is the member epoch). Consumer b joins: the group epoch moves on and a
reconciles to a new member epoch. A transactional producer then commits offsets into the
group with a's old metadata (Kafka 4: STALE_MEMBER_EPOCH, the transaction must abort), then
with its current metadata (committed). Prints one JSON object of outcomes on stdout.
"""
import json
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from pyclient import parse_cgmd  # noqa: E402

TIMEOUT = 20


def consumer(spec, label):
    c = Consumer({"bootstrap.servers": spec["bootstrap"], "group.id": spec["group"], "client.id": label,
                  "group.protocol": "consumer", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"}, logger=None)
    c.subscribe([spec["topic"]])
    return c


def epoch(c):
    return parse_cgmd(c.consumer_group_metadata())[0]


def poll_until(consumers, done, what):
    deadline = time.monotonic() + TIMEOUT
    while not done():
        if time.monotonic() > deadline:
            raise SystemExit("%s: not within %d s" % (what, TIMEOUT))
        for c in consumers:
            c.poll(0.05)


def committed(c, tp):
    return c.committed([TopicPartition(tp.topic, tp.partition)], TIMEOUT)[0].offset


def commit_in_txn(producer, tp, offset, cgmd):
    """The outcome of one transaction that only commits `offset`: "ok" or the error's name."""
    producer.begin_transaction()
    try:
        producer.send_offsets_to_transaction([TopicPartition(tp.topic, tp.partition, offset)], cgmd, TIMEOUT)
        producer.commit_transaction(TIMEOUT)
        return "ok", None
    except KafkaException as e:
        err = e.args[0]
        if err.txn_requires_abort():
            producer.abort_transaction(TIMEOUT)
        return err.name(), err.txn_requires_abort()


def main():
    spec = json.loads(sys.argv[1])
    out = {}
    tp = TopicPartition(spec["topic"], 0)
    a = consumer(spec, "stale-a")
    poll_until([a], lambda: (epoch(a) or 0) > 0 and a.assignment(), "a joins")
    old_cgmd, old_epoch = a.consumer_group_metadata(), epoch(a)
    b = consumer(spec, "stale-b")
    poll_until([a, b], lambda: epoch(a) > old_epoch and (epoch(b) or 0) > 0 and b.assignment(),
               "a's member epoch moves on once b joins")
    out["epoch_moved"] = epoch(a) > old_epoch
    out["committed_before"] = committed(a, tp)
    producer = Producer({"bootstrap.servers": spec["bootstrap"], "transactional.id": spec["txn_id"]},
                        logger=None)
    producer.init_transactions(TIMEOUT)
    out["stale"], out["stale_requires_abort"] = commit_in_txn(producer, tp, 7, old_cgmd)
    out["committed_after_stale"] = committed(a, tp)
    out["current"], _ = commit_in_txn(producer, tp, 7, a.consumer_group_metadata())
    out["committed_after_current"] = committed(a, tp)
    producer.flush(TIMEOUT)
    for c in (a, b):
        c.close()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
