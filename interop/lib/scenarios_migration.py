"""Kafka 4's online migration between the classic and the consumer group protocol (KIP-848,
group.consumer.migration.policy, issue 49): the rolling upgrade of a live group, one member at
a time restarted with group.protocol=consumer under a steady producer, and its rollback.
Judged by the checker: no partition held twice at once, no committed record lost or read
twice past its commit, offsets never going back."""

from scenarios import check_final_commits, parts
from suite import scenario

TOPIC, GROUP = "mig", "mig"
ROLL_GAP_S = 3.0


def _classic(ctx, label):
    return ctx.consumer("confluent", label, GROUP, [TOPIC], session_ms=10000, heartbeat_ms=500)


def _modern(ctx, label):
    return ctx.consumer("confluent", label, GROUP, [TOPIC], group_protocol="consumer")


@scenario("migration-rolling-upgrade-and-rollback", topics={TOPIC: 8}, budget=240, clients=("confluent",),
          mock_note="librdkafka's mock cluster does not convert a group between the protocols")
def rolling_upgrade_and_rollback(ctx):
    all_parts = parts({TOPIC: 8})
    prod = ctx.producer("confluent", "producer", [TOPIC], 9000, "mig", rate=300)
    classic = [_classic(ctx, "mig-%d" % i) for i in range(4)]
    gen = ctx.wait_stable(classic, all_parts, 40)
    ctx.note("classic group stable (generation %s): %s" % (gen, {p.label: ctx.owned(p) for p in classic}))
    everyone = list(classic)

    # The rolling upgrade: each classic member closes and comes back with group.protocol=consumer.
    modern = []
    for i, old in enumerate(classic):
        ctx.stop(old)
        new = _modern(ctx, "mig-%d-consumer" % i)
        modern.append(new)
        everyone.append(new)
        ctx.wait_assigned(new, 40)
        ctx.sleep(ROLL_GAP_S)
    ctx.wait_stable(modern, all_parts, 40, same_generation=False)
    ctx.note("upgraded (consumer protocol): %s" % {p.label: ctx.owned(p) for p in modern})

    # The rollback: each member goes back to the classic protocol, one at a time.
    back = []
    for i, old in enumerate(modern):
        ctx.stop(old)
        new = _classic(ctx, "mig-%d-classic" % i)
        back.append(new)
        everyone.append(new)
        ctx.wait_assigned(new, 40)
        ctx.sleep(ROLL_GAP_S)
    gen = ctx.wait_stable(back, all_parts, 40)
    ctx.note("rolled back (classic, generation %s): %s" % (gen, {p.label: ctx.owned(p) for p in back}))

    ctx.wait_done(prod, 90)
    ctx.wait_consumed(everyone, [(t, k) for t, k, _, _ in ctx.produced([prod])], 90)
    for p in back:
        ctx.stop(p)
    check_final_commits(ctx, everyone, GROUP)
    ctx.run_checker(everyone, [prod])


@scenario("migration-mixed-kafka-python-and-consumer-protocol", topics={"migx": 6}, budget=180,
          clients=("kafka-python", "confluent"),
          mock_note="librdkafka's mock cluster does not convert a group between the protocols")
def mixed_kafka_python_and_consumer_protocol(ctx):
    """kafka-python speaks the classic protocol only: its members stay classic members of the
    consumer-protocol group that two confluent-kafka members (group.protocol=consumer) make of
    their group, and all four read one topic for a minute under a steady producer."""
    topic, group = "migx", "migx"
    all_parts = parts({topic: 6})
    prod = ctx.producer("confluent", "producer", [topic], 6000, "migx", rate=100)
    classic = [ctx.consumer("kafka-python", "migx-kp-%d" % i, group, [topic], session_ms=10000, heartbeat_ms=500)
               for i in range(2)]
    ctx.wait_stable(classic, all_parts, 40)
    modern = [_modern_in(ctx, "migx-cf-%d" % i, group, topic) for i in range(2)]
    everyone = classic + modern
    ctx.wait_stable(everyone, all_parts, 60, same_generation=False)
    ctx.note("mixed group stable: %s" % {p.label: ctx.owned(p) for p in everyone})
    # confluent-kafka's AdminClient describes the mixed group with ConsumerGroupDescribe:
    # a consumer-protocol group with all four members, classic ones included.
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": ctx.bootstrap})
    described = admin.describe_consumer_groups([group])[group].result(timeout=ctx.left(30))
    kind = getattr(described.type, "name", str(described.type))
    ctx.note("described: type %s, %d members" % (kind, len(described.members)))
    ctx.check(kind == "CONSUMER", "the mixed group is described as a %s group" % kind)
    ctx.check(len(described.members) == 4, "the mixed group is described with %d members: %s"
              % (len(described.members), [m.client_id for m in described.members]))
    ctx.wait_done(prod, 90)
    ctx.wait_consumed(everyone, [(t, k) for t, k, _, _ in ctx.produced([prod])], 60)
    for p in everyone:
        ctx.stop(p)
    check_final_commits(ctx, everyone, group)
    ctx.run_checker(everyone, [prod])


def _modern_in(ctx, label, group, topic):
    return ctx.consumer("confluent", label, group, [topic], group_protocol="consumer")
