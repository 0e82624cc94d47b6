#!/usr/bin/env python3
"""SASL over SASL_PLAINTEXT with real clients: confluent-kafka with PLAIN and SCRAM-SHA-256,
kafka-python with SCRAM-SHA-512, each producing, consuming in a group and committing with the
right password, and refused with a wrong one. Prints one JSON object on stdout (the scenario
sasl-confluent-kafka-python checks it).

    sasl_clients.py SPEC_JSON      (bootstrap, topic, user, password)

Each outcome is "ok" (produced, consumed that record in a group, committed it) or the error.
"""
import json
import sys
import time
import uuid

from confluent_kafka import Consumer, Producer
from kafka import KafkaConsumer, KafkaProducer

spec = json.loads(sys.argv[1])
BOOT, TOPIC, USER, PASSWORD = spec["bootstrap"], spec["topic"], spec["user"], spec["password"]


def confluent(mechanism, password):
    conf = {"bootstrap.servers": BOOT, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism, "sasl.username": USER, "sasl.password": password}
    errors = []
    p = Producer(dict(conf, **{"message.timeout.ms": 5000, "error_cb": errors.append}))
    reports = []
    value = ("confluent-" + mechanism).encode()
    p.produce(TOPIC, value, callback=lambda e, m: reports.append(e))
    p.flush(8)
    auth = [e for e in errors if e.name() == "_AUTHENTICATION"]
    if auth:
        return "auth error: " + auth[0].str()
    if not reports or reports[0] is not None:
        return "produce: %s" % (reports[0] if reports else "no delivery report")
    c = Consumer(dict(conf, **{"group.id": "sasl-" + uuid.uuid4().hex[:8], "auto.offset.reset": "earliest",
                               "enable.auto.commit": False}))
    c.subscribe([TOPIC])
    deadline, got = time.time() + 20, None
    while got is None and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None and m.value() == value:
            got = m
    if got is None:
        c.close()
        return "consume: the record did not arrive"
    c.commit(message=got, asynchronous=False)
    c.close()
    return "ok"


def kafka_python(mechanism, password):
    conf = dict(bootstrap_servers=BOOT, security_protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism,
                sasl_plain_username=USER, sasl_plain_password=password)
    value = ("kafka-python-" + mechanism).encode()
    try:
        p = KafkaProducer(request_timeout_ms=5000, max_block_ms=5000, **conf)
        p.send(TOPIC, value).get(timeout=10)
        p.close()
        c = KafkaConsumer(TOPIC, group_id="sasl-" + uuid.uuid4().hex[:8], auto_offset_reset="earliest",
                          enable_auto_commit=False, consumer_timeout_ms=15000, **conf)
        got = next((m for m in c if m.value == value), None)
        if got is None:
            c.close()
            return "consume: the record did not arrive"
        c.commit()
        c.close()
        return "ok"
    except Exception as e:  # kafka-python reports a refused login as a bootstrap timeout
        return "error: %s" % type(e).__name__


out = {
    "confluent PLAIN": confluent("PLAIN", PASSWORD),
    "confluent SCRAM-SHA-256": confluent("SCRAM-SHA-256", PASSWORD),
    "kafka-python SCRAM-SHA-512": kafka_python("SCRAM-SHA-512", PASSWORD),
    "confluent PLAIN wrong password": confluent("PLAIN", PASSWORD + "x"),
    "confluent SCRAM-SHA-256 wrong password": confluent("SCRAM-SHA-256", PASSWORD + "x"),
    "kafka-python SCRAM-SHA-512 wrong password": kafka_python("SCRAM-SHA-512", PASSWORD + "x"),
}
print(json.dumps(out))
