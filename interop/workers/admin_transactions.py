#!/usr/bin/env python3
"""kafka-python's transaction admin (ListTransactions, DescribeTransactions, DescribeProducers,
the calls kafka-transactions.sh makes) on a transaction confluent-kafka holds open, then on the
same transaction committed. Prints one JSON object on stdout (the scenario
admin-transactions-kafka-python checks it).

    admin_transactions.py SPEC_JSON      (bootstrap, prefix)
"""
import json
import sys
import time

from confluent_kafka import Producer
from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kafka.structs import TopicPartition

TIMEOUT = 15


def listing(admin, tid, **kw):
    rows = [r for rows in admin.list_transactions(**kw).values() for r in rows]
    return [[r.state.value, r.producer_id] for r in rows if r.transactional_id == tid]


def main():
    spec = json.loads(sys.argv[1])
    bootstrap, p = spec["bootstrap"], spec["prefix"]
    topic, tid = p + "-out", p + "-txn"
    out = {}
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="interop-txn-admin",
                             request_timeout_ms=TIMEOUT * 1000)
    admin.create_topics([NewTopic(topic, 2, 1)])
    prod = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid,
                     "transaction.timeout.ms": 60000})
    prod.init_transactions(TIMEOUT)
    prod.begin_transaction()
    for i in range(3):
        prod.produce(topic, value=b"v%d" % i, partition=1)
    prod.flush(TIMEOUT)

    desc = admin.describe_transactions([tid])[tid]
    out["open"] = {"state": desc.state.value, "epoch": desc.producer_epoch,
                   "timeout_ms": desc.transaction_timeout_ms,
                   "started": desc.transaction_start_time_ms > 0,
                   "partitions": sorted([tp.topic, tp.partition] for tp in desc.topic_partitions)}
    pid = desc.producer_id
    out["listed_open"] = listing(admin, tid) == [["Ongoing", pid]]
    out["listed_by_state"] = listing(admin, tid, state_filters=["Ongoing"]) == [["Ongoing", pid]]
    out["listed_other_state"] = listing(admin, tid, state_filters=["CompleteCommit"])
    out["listed_by_producer"] = listing(admin, tid, producer_id_filters=[pid]) == [["Ongoing", pid]]
    out["listed_by_duration"] = listing(admin, tid, duration_filter_ms=3_600_000)
    tp = TopicPartition(topic, 1)
    producers = admin.describe_producers([tp])[tp].active_producers
    out["producers_open"] = [[s.producer_id == pid, s.last_sequence, s.current_transaction_start_offset]
                             for s in producers]

    prod.commit_transaction(TIMEOUT)
    desc = admin.describe_transactions([tid])[tid]
    out["committed"] = {"state": desc.state.value, "partitions": len(desc.topic_partitions)}
    out["listed_committed"] = listing(admin, tid) == [["CompleteCommit", pid]]
    producers = admin.describe_producers([tp])[tp].active_producers
    out["producers_committed"] = [[s.producer_id == pid, s.current_transaction_start_offset]
                                  for s in producers]
    try:
        admin.describe_transactions([p + "-never"])
        out["unknown"] = "ok"
    except Exception as e:  # kafka-python raises the error code's class
        out["unknown"] = type(e).__name__
    admin.close()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
