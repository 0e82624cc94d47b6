#!/usr/bin/env python3
"""ACLs judged by real clients (the scenario acls-confluent-kafka-python): on a SASL_PLAINTEXT
broker with --authorizer and the super user admin, alice without ACLs cannot consume in a group
nor commit (GROUP_AUTHORIZATION_FAILED, the committed offset unchanged); admin adds ACLs with
confluent-kafka's AdminClient and alice's group then consumes and commits; kafka-python's
KafkaAdminClient describes and deletes them and alice is refused again; SCRAM users are added,
described and deleted with AlterUserScramCredentials / DescribeUserScramCredentials. Prints
one JSON object.

    acl_clients.py SPEC_JSON      (bootstrap, topic, group)
"""
import json
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType,
                                   AdminClient, ResourcePatternType, ResourceType)

spec = json.loads(sys.argv[1])
BOOT, TOPIC, GROUP = spec["bootstrap"], spec["topic"], spec["group"]
out = {}


def conf(user):
    return {"bootstrap.servers": BOOT, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": user, "sasl.password": user + "-pw"}


def committed(user="admin"):
    c = Consumer(dict(conf(user), **{"group.id": GROUP, "enable.auto.commit": False}))
    try:
        return c.committed([TopicPartition(TOPIC, 0)], timeout=10)[0].offset
    finally:
        c.close()


def commit(user, offset):
    """A plain commit (assign, no subscription) of `offset` on partition 0: "ok" or the error.
    Without DESCRIBE on the group FindCoordinator is refused (GROUP_AUTHORIZATION_FAILED, as
    Kafka's KafkaApis answers it) and librdkafka's commit waits for a coordinator until it
    gives up with _WAIT_COORD after session.timeout.ms: 6 s here, not the default 45."""
    c = Consumer(dict(conf(user), **{"group.id": GROUP, "enable.auto.commit": False,
                                     "session.timeout.ms": 6000}))
    try:
        c.commit(offsets=[TopicPartition(TOPIC, 0, offset)], asynchronous=False)
        return "ok"
    except KafkaException as e:
        return e.args[0].name()
    finally:
        c.close()


def consume(user, want):
    """Subscribes in the group and reads until `want` records or an error; commits what it read."""
    errors = []
    c = Consumer(dict(conf(user), **{"group.id": GROUP, "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                     "error_cb": lambda e: errors.append(e.name())}))
    c.subscribe([TOPIC])
    got, deadline, last = 0, time.time() + 20, None
    try:
        while got < want and time.time() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                errors.append(m.error().name())
                if m.error().name() in ("GROUP_AUTHORIZATION_FAILED", "TOPIC_AUTHORIZATION_FAILED"):
                    break
                continue
            got, last = got + 1, m
        if last is not None:
            c.commit(message=last, asynchronous=False)
    finally:
        c.close()
    return {"records": got, "errors": sorted(set(errors))}


p = Producer(conf("admin"))
for i in range(10):
    p.produce(TOPIC, ("acl-%d" % i).encode(), partition=0)
p.flush(10)
out["admin_commit"] = commit("admin", 5)
out["alice_consume_without_acl"] = consume("alice", 5)
out["alice_commit_without_acl"] = commit("alice", 0)
out["committed_after_refusals"] = committed()

admin = AdminClient(conf("admin"))
bindings = [AclBinding(ResourceType.GROUP, GROUP, ResourcePatternType.LITERAL, "User:alice", "*",
                       AclOperation.READ, AclPermissionType.ALLOW),
            AclBinding(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL, "User:alice", "*",
                       AclOperation.READ, AclPermissionType.ALLOW)]
created = admin.create_acls(bindings)
out["create_acls"] = [("ok" if f.exception(10) is None else str(f.exception())) for f in created.values()]
alice_admin = AdminClient(conf("alice"))
try:
    alice_admin.create_acls(bindings)[bindings[0]].result(10)
    out["alice_create_acls"] = "ok"
except KafkaException as e:
    out["alice_create_acls"] = e.args[0].name()
out["alice_consume_with_acl"] = consume("alice", 5)
out["committed_after_alice"] = committed()
described = admin.describe_acls(AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                                 AclOperation.ANY, AclPermissionType.ANY)).result(10)
out["described"] = sorted("%s:%s:%s:%s" % (b.restype.name, b.name, b.principal, b.operation.name) for b in described)

# kafka-python's admin client deletes the group's ACL
from kafka.admin import (ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType, KafkaAdminClient,
                         ResourcePatternFilter)
from kafka.admin import ResourceType as KResourceType

kadmin = KafkaAdminClient(bootstrap_servers=BOOT, security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                          sasl_plain_username="admin", sasl_plain_password="admin-pw")
acls, error = kadmin.describe_acls(ACLFilter(principal=None, host="*", operation=ACLOperation.ANY,
                                             permission_type=ACLPermissionType.ANY,
                                             resource_pattern=ResourcePatternFilter(KResourceType.ANY, None,
                                                                                    ACLResourcePatternType.ANY)))
out["kafka_python_described"] = len(acls)
result = kadmin.delete_acls([ACLFilter(principal="User:alice", host="*", operation=ACLOperation.ANY,
                                       permission_type=ACLPermissionType.ANY,
                                       resource_pattern=ResourcePatternFilter(KResourceType.GROUP, GROUP,
                                                                              ACLResourcePatternType.LITERAL))])
out["kafka_python_deleted"] = sum(len(matches) for _, matches, _ in result)
kadmin.close()
out["alice_commit_after_delete"] = commit("alice", 0)
out["committed_at_end"] = committed()

# SCRAM users managed at run time with confluent-kafka's AdminClient (the super user): carol is
# added with SCRAM-SHA-256 (librdkafka sends the salted password), logs in with it, and is
# described; then deleted, and her login is refused.
from confluent_kafka.admin import (ScramCredentialInfo, ScramMechanism, UserScramCredentialDeletion,
                                   UserScramCredentialUpsertion)


def scram_login(user, password):
    c = AdminClient({"bootstrap.servers": BOOT, "security.protocol": "SASL_PLAINTEXT",
                     "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": user, "sasl.password": password})
    try:
        c.list_topics(timeout=8)
        return "ok"
    except KafkaException as e:
        return e.args[0].name()


upserted = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
    "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), b"carol-pw")])
out["scram_upsert"] = [("ok" if f.exception(10) is None else str(f.exception())) for f in upserted.values()]
out["scram_login_carol"] = scram_login("carol", "carol-pw")
described = admin.describe_user_scram_credentials(["carol"])["carol"].result(10)
out["scram_described_carol"] = [(i.mechanism.name, i.iterations) for i in described.scram_credential_infos]
deleted = admin.alter_user_scram_credentials([UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_256)])
out["scram_delete"] = [("ok" if f.exception(10) is None else str(f.exception())) for f in deleted.values()]
out["scram_login_after_delete"] = scram_login("carol", "carol-pw")
print(json.dumps(out))
