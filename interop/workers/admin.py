#!/usr/bin/env python3
"""kafka-python's KafkaAdminClient on one group: prints one JSON object on stdout.

    admin.py SPEC_JSON      (bootstrap, group, kafka_python_api_version?)

{"groups": [[group id, protocol type], ...],
 "describe": {"state", "protocol_type", "protocol", "members": [{"member_id", "client_id",
              "client_host", "group_instance_id", "assignment": [[topic, partition], ...]}]},
 "offsets": [[topic, partition, offset], ...]}

kafka-python 3 calls these list_groups / describe_groups / list_group_offsets; the 2.x names
(list_consumer_groups, describe_consumer_groups, list_consumer_group_offsets) are used where
they exist.
"""
import json
import sys


def pick(obj, *names):
    for n in names:
        if hasattr(obj, n):
            return getattr(obj, n)
    raise AttributeError("none of %s on %s" % (names, type(obj).__name__))


def get(d, *keys, default=None):
    for k in keys:
        if isinstance(d, dict) and k in d:
            return d[k]
        if hasattr(d, k):
            return getattr(d, k)
    return default


def assignment_of(a):
    """[[topic, partition], ...] from a decoded ConsumerProtocolAssignment (object or dict)."""
    if a is None or isinstance(a, (bytes, bytearray)):
        return []
    tps = get(a, "assigned_partitions", "assignment", default=[]) or []
    out = []
    for tp in tps:
        if isinstance(tp, (list, tuple)):
            topic, partitions = tp[0], tp[1]
        else:
            topic, partitions = get(tp, "topic"), get(tp, "partitions", default=[])
        out.extend([topic, p] for p in partitions)
    return sorted(out)


def main():
    spec = json.loads(sys.argv[1])
    from kafka import KafkaAdminClient
    conf = dict(bootstrap_servers=spec["bootstrap"], client_id="interop-admin", request_timeout_ms=15000)
    if spec.get("kafka_python_api_version"):
        conf["api_version"] = tuple(spec["kafka_python_api_version"])
    admin = KafkaAdminClient(**conf)
    group = spec["group"]
    try:
        listed = pick(admin, "list_consumer_groups", "list_groups")()
        groups = []
        for g in listed:
            if isinstance(g, (list, tuple)):
                groups.append([g[0], g[1]])
            else:
                groups.append([get(g, "group_id"), get(g, "protocol_type")])
        print("list: %r" % (listed,), file=sys.stderr)

        described = pick(admin, "describe_consumer_groups", "describe_groups")([group])
        print("describe: %r" % (described,), file=sys.stderr)
        d = described[group] if isinstance(described, dict) else described[0]
        members = []
        for m in get(d, "members", default=[]) or []:
            members.append({"member_id": get(m, "member_id"), "client_id": get(m, "client_id"),
                            "client_host": get(m, "client_host"), "group_instance_id": get(m, "group_instance_id"),
                            "assignment": assignment_of(get(m, "member_assignment"))})
        describe = {"state": get(d, "group_state", "state"), "protocol_type": get(d, "protocol_type"),
                    "protocol": get(d, "protocol_data", "protocol"), "members": members,
                    "error": get(d, "error")}

        if hasattr(admin, "list_consumer_group_offsets"):
            offs = admin.list_consumer_group_offsets(group)
        else:
            offs = admin.list_group_offsets({group: None})[group]
        print("offsets: %r" % (offs,), file=sys.stderr)
        offsets = sorted([tp.topic, tp.partition, om.offset] for tp, om in offs.items())
    finally:
        admin.close()
    print(json.dumps({"groups": groups, "describe": describe, "offsets": offsets}))


if __name__ == "__main__":
    main()
