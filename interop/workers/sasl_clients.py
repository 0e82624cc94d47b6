#!/usr/bin/env python3
"""Authenticated clients against SASL and TLS listeners: confluent-kafka and kafka-python, each
producing, consuming in a group and committing, or refused. Prints one JSON object on stdout,
{case name: outcome} (the scenarios sasl-confluent-kafka-python and tls-confluent-kafka-python
check it).

    sasl_clients.py SPEC_JSON

SPEC: topic, user, password, ca (PEM, for TLS), and cases: a list of
  {"name", "client": "confluent"|"kafka-python"|"confluent-admin", "bootstrap",
   "protocol": SASL_PLAINTEXT|SASL_SSL|SSL, "mechanism" (SASL), "user", "password" (SASL; default
   spec's), "cert", "key" (a client certificate), "grantee" (confluent-admin: the ACL's principal)}

Each outcome is "ok" (produced, consumed that record in a group, committed it; for
confluent-admin: created an ACL and described it back) or the error.
The cases run side by side, one thread each.
"""
import json
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

from confluent_kafka import Consumer, Producer
from kafka import KafkaConsumer, KafkaProducer

spec = json.loads(sys.argv[1])
TOPIC, USER = spec["topic"], spec.get("user")


def confluent(case):
    conf = {"bootstrap.servers": case["bootstrap"], "security.protocol": case["protocol"]}
    if case["protocol"].startswith("SASL"):
        conf.update({"sasl.mechanism": case["mechanism"], "sasl.username": USER,
                     "sasl.password": case.get("password", spec.get("password"))})
    if case["protocol"].endswith("SSL"):
        conf["ssl.ca.location"] = spec["ca"]
        if case.get("cert"):
            conf.update({"ssl.certificate.location": case["cert"], "ssl.key.location": case["key"]})
    errors = []
    p = Producer(dict(conf, **{"message.timeout.ms": 5000, "error_cb": errors.append}))
    reports = []
    value = ("confluent-" + case["name"]).encode()
    p.produce(TOPIC, value, callback=lambda e, m: reports.append(e))
    p.flush(8)
    auth = [e for e in errors if e.name() in ("_AUTHENTICATION", "_SSL")]
    if auth:
        return "auth error: " + auth[0].str()
    if not reports or reports[0] is not None:
        return "produce: %s (errors: %s)" % (reports[0] if reports else "no delivery report",
                                             [e.str() for e in errors][:2])
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


def kafka_python(case):
    conf = dict(bootstrap_servers=case["bootstrap"], security_protocol=case["protocol"])
    if case["protocol"].startswith("SASL"):
        conf.update(sasl_mechanism=case["mechanism"], sasl_plain_username=USER,
                    sasl_plain_password=case.get("password", spec.get("password")))
    if case["protocol"].endswith("SSL"):
        conf["ssl_cafile"] = spec["ca"]
        if case.get("cert"):
            conf.update(ssl_certfile=case["cert"], ssl_keyfile=case["key"])
    value = ("kafka-python-" + case["name"]).encode()
    try:
        # a refused client waits bootstrap_timeout_ms (30 s by default) before it gives up
        p = KafkaProducer(request_timeout_ms=5000, max_block_ms=5000, bootstrap_timeout_ms=5000, **conf)
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


def confluent_admin(case):
    """confluent-kafka's AdminClient: creates an ACL (READ on the topic for the case's
    "grantee"; librdkafka sends CreateAcls to the controller the listener advertises), then
    describes it back: "ok", or the first error."""
    from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType,
                                       AdminClient, ResourcePatternType, ResourceType)
    conf = {"bootstrap.servers": case["bootstrap"], "security.protocol": case["protocol"]}
    if case["protocol"].startswith("SASL"):
        conf.update({"sasl.mechanism": case["mechanism"], "sasl.username": case.get("user", USER),
                     "sasl.password": case.get("password", spec.get("password"))})
    if case["protocol"].endswith("SSL"):
        conf["ssl.ca.location"] = spec["ca"]
        if case.get("cert"):
            conf.update({"ssl.certificate.location": case["cert"], "ssl.key.location": case["key"]})
    admin = AdminClient(conf)
    binding = AclBinding(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL, case["grantee"], "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
    try:
        for f in admin.create_acls([binding], request_timeout=10).values():
            f.result()
        found = admin.describe_acls(AclBindingFilter(ResourceType.TOPIC, TOPIC, ResourcePatternType.ANY,
                                                     case["grantee"], None, AclOperation.ANY,
                                                     AclPermissionType.ANY), request_timeout=10).result()
    except Exception as e:
        err = e.args[0] if e.args else e
        return err.name() if hasattr(err, "name") else "error: %s" % err
    return "ok" if binding in found else "not described: %s" % found


CLIENTS = {"confluent": confluent, "kafka-python": kafka_python, "confluent-admin": confluent_admin}


def run(case):
    start = time.time()
    outcome = CLIENTS[case["client"]](case)
    print("case %r took %.1f s: %s" % (case["name"], time.time() - start, outcome), file=sys.stderr, flush=True)
    return case["name"], outcome


# The cases are independent (each its own producer, group and record value), and a refused one
# spends its time waiting for a client timeout: run them side by side, not one after another.
with ThreadPoolExecutor(max_workers=len(spec["cases"]) or 1) as pool:
    outcomes = pool.map(run, spec["cases"])
    print(json.dumps(dict(outcomes)))
