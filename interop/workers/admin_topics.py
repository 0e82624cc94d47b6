#!/usr/bin/env python3
"""confluent-kafka's AdminClient on topics: creates, describes, alters, grows and deletes
them, and prints one JSON object on stdout (the scenario admin-topics-confluent checks it).

    admin_topics.py SPEC_JSON      (bootstrap, prefix)

Each admin call's outcome is "ok" or the error's name (e.g. "TOPIC_ALREADY_EXISTS"); configs
are reported as {name: [value, source name]}.
"""
import json
import sys

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   ConfigSource, NewPartitions, NewTopic, ResourceType)

TIMEOUT = 15
WATCHED = ("retention.ms", "cleanup.policy", "max.message.bytes", "segment.bytes",
           "min.insync.replicas", "retention.bytes", "compression.type")


def outcomes(futures):
    out = {}
    for key, f in futures.items():
        name = key if isinstance(key, str) else key.name
        try:
            f.result(TIMEOUT)
            out[name] = "ok"
        except KafkaException as e:
            out[name] = e.args[0].name()
    return out


def describe(admin, resource):
    configs = admin.describe_configs([resource])[resource].result(TIMEOUT)
    return {k: [e.value, source_name(e.source)] for k, e in configs.items()}


def source_name(source):
    try:
        return ConfigSource(source).name
    except ValueError:
        return str(source)


def partitions(admin, topic):
    t = admin.list_topics(topic=topic, timeout=TIMEOUT).topics[topic]
    return None if t.error is not None else len(t.partitions)


def main():
    spec = json.loads(sys.argv[1])
    bootstrap, p = spec["bootstrap"], spec["prefix"]
    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "interop-admin-topics"})
    out = {}
    main_t, dflt, dry = p + "-orders", p + "-default", p + "-dry"
    out["create"] = outcomes(admin.create_topics([
        NewTopic(main_t, 3, 1, config={"retention.ms": "60000", "cleanup.policy": "compact"}),
        NewTopic(dflt, -1, -1),
        NewTopic(p + " bad name", 1, 1),
        NewTopic(p + "-rf3", 1, 3),
        NewTopic(p + "-badcfg", 1, 1, config={"no.such.config": "1"}),
    ], operation_timeout=TIMEOUT))
    out["create_again"] = outcomes(admin.create_topics([NewTopic(main_t, 3, 1)]))
    out["validate_only"] = outcomes(admin.create_topics([NewTopic(dry, 2, 1)], validate_only=True))
    out["partitions"] = {t: partitions(admin, t) for t in (main_t, dflt, dry, p + "-rf3")}

    cluster = admin.describe_cluster().result(TIMEOUT)
    out["cluster"] = {"id": cluster.cluster_id, "controller": cluster.controller.id,
                      "nodes": [n.id for n in cluster.nodes]}

    topic_res = ConfigResource(ResourceType.TOPIC, main_t)
    full = describe(admin, topic_res)
    out["configs"] = {k: full.get(k) for k in WATCHED}
    out["default_configs"] = {k: describe(admin, ConfigResource(ResourceType.TOPIC, dflt)).get(k) for k in WATCHED}
    broker = describe(admin, ConfigResource(ResourceType.BROKER, "0"))
    out["broker_configs"] = {k: broker.get(k) for k in ("num.partitions", "message.max.bytes", "min.insync.replicas")}

    out["alter"] = outcomes(admin.incremental_alter_configs([ConfigResource(
        ResourceType.TOPIC, main_t, incremental_configs=[
            ConfigEntry("retention.ms", "120000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("cleanup.policy", None, incremental_operation=AlterConfigOpType.DELETE)])]))
    out["alter_append"] = outcomes(admin.incremental_alter_configs([ConfigResource(
        ResourceType.TOPIC, main_t, incremental_configs=[
            ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND)])]))
    out["alter_unknown"] = outcomes(admin.incremental_alter_configs([ConfigResource(
        ResourceType.TOPIC, main_t, incremental_configs=[
            ConfigEntry("no.such.config", "1", incremental_operation=AlterConfigOpType.SET)])]))
    after = describe(admin, topic_res)
    out["configs_after_alter"] = {k: after.get(k) for k in ("retention.ms", "cleanup.policy")}

    out["grow"] = outcomes(admin.create_partitions([NewPartitions(main_t, 5)]))
    out["shrink"] = outcomes(admin.create_partitions([NewPartitions(main_t, 2)]))
    out["grow_missing"] = outcomes(admin.create_partitions([NewPartitions(p + "-missing", 2)]))
    out["partitions_after_grow"] = partitions(admin, main_t)

    # A record in a new partition, and a group's commit of it: the deletion must remove both.
    prod = Producer({"bootstrap.servers": bootstrap})
    delivered = []
    # Keyed: the topic is compacted, and a compacted topic refuses records without a key.
    prod.produce(main_t, key=b"k", value=b"x", partition=4,
                 on_delivery=lambda err, m: delivered.append(err is None and m.offset()))
    prod.flush(TIMEOUT)
    out["produced_to_new_partition"] = delivered
    group = p + "-group"
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition(main_t, 4, 1)], asynchronous=False)
    out["committed_before_delete"] = [tp.offset for tp in consumer.committed([TopicPartition(main_t, 4)], timeout=TIMEOUT)]
    consumer.close()

    out["delete"] = outcomes(admin.delete_topics([main_t, p + "-never"], operation_timeout=TIMEOUT))
    out["partitions_after_delete"] = partitions(admin, main_t)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    out["committed_after_delete"] = [tp.offset for tp in consumer.committed([TopicPartition(main_t, 4)], timeout=TIMEOUT)]
    consumer.close()
    out["delete_default"] = outcomes(admin.delete_topics([dflt], operation_timeout=TIMEOUT))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
