"""Share groups (KIP-932) with confluent-kafka 2.16.1's ShareConsumer (librdkafka's share
consumer): several consumers read the same partitions, each record acquired by one of them;
explicit acknowledgement with RELEASE (delivered again, its delivery count grown) and REJECT
(never again). See interop/README.md.
"""
import json
import os
from collections import Counter, defaultdict

from harness import INTEROP, Proc, now, python_exe
from suite import scenario

MOCK_NOTE = "librdkafka's mock cluster serves no share group API"


def share_consumer(ctx, label, group, topic, bootstrap, mode="implicit"):
    spec = {"bootstrap": bootstrap, "group": group, "topic": topic, "label": label, "mode": mode}
    p = Proc(label, [python_exe(), os.path.join(INTEROP, "workers", "share_consumer.py"), json.dumps(spec)],
             os.path.join(ctx.dir, label + ".log"))
    p.client, p.role, p.label, p.group, p.spec = "confluent", "share", label, group, spec
    ctx.procs.append(p)
    return p


def got(p):
    """Every record `p` reported: (partition, offset, key, delivery count, what it did)."""
    return [tuple(r) for e in p.snapshot() if e["ev"] == "recs" for r in e["r"]]


def wait_fetching(ctx, control, labels, timeout):
    """Until every consumer's ShareFetch was answered once (its share-partitions exist: records
    produced from then on are delivered, share.auto.offset.reset being latest)."""
    deadline = now() + ctx.left(timeout)
    while now() < deadline:
        seen = {r["client_id"] for r in control.requests(since=0)["requests"] if r["api"] == "ShareFetch"}
        if set(labels) <= seen:
            return
        ctx.sleep(0.2)
    ctx.require(False, "not every share consumer fetched within %.0f s" % timeout)


def start(ctx, topic):
    from control import Control
    b = ctx.start_broker("broker", {topic: 2}, extra=["--control-listen", "127.0.0.1:0"])
    return b, Control(b.control(ctx.left(10)))


@scenario("share-group-confluent", topics={"sh": 2}, budget=120, own_broker=True, clients=("confluent",),
          mock_note=MOCK_NOTE)
def share_group_confluent(ctx):
    if ctx.mock:
        ctx.note(MOCK_NOTE)
        return
    topic, group, n, count = "sh", "sh-group", 4, 2000
    b, control = start(ctx, topic)
    try:
        members = [share_consumer(ctx, "sh-%d" % i, group, topic, b.address) for i in range(n)]
        wait_fetching(ctx, control, [p.label for p in members], 40)
        prod = ctx.producer("confluent", "producer", [topic], count, "sh", rate=400, bootstrap=b.address)
        ctx.wait_done(prod, 60)
        produced = {(k, part, off) for t, k, part, off in ctx.produced([prod])}
        ctx.require(len(produced) == count, "the producer acknowledged %d of %d records" % (len(produced), count))
        deadline = now() + ctx.left(40)
        while now() < deadline:
            keys = {r[2] for p in members for r in got(p)}
            if len(keys) >= count:
                break
            ctx.sleep(0.5)
        for p in members:
            ctx.stop(p)
        records = [r for p in members for r in got(p)]
        by_key = Counter(r[2] for r in records)
        per_member = {p.label: len(got(p)) for p in members}
        ctx.note("%d records delivered to %d consumers: %s" % (len(records), n, per_member))
        missing = {k for k, _, _ in produced} - set(by_key)
        ctx.check(not missing, "%d produced records never delivered, e.g. %s" % (len(missing), sorted(missing)[:5]))
        twice = {k: c for k, c in by_key.items() if c > 1}
        ctx.check(not twice, "records delivered more than once with no lock expired: %s" % dict(list(twice.items())[:5]))
        ctx.check(sum(1 for c in per_member.values() if c) >= 2,
                  "only one consumer got records: %s" % per_member)
        wrong = [r for r in records if (r[2], r[0], r[1]) not in produced]
        ctx.check(not wrong, "records delivered at another partition/offset than produced: %s" % wrong[:3])
    finally:
        control.close()


@scenario("share-group-explicit-confluent", topics={"shx": 2}, budget=120, own_broker=True, clients=("confluent",),
          mock_note=MOCK_NOTE)
def share_group_explicit_confluent(ctx):
    if ctx.mock:
        ctx.note(MOCK_NOTE)
        return
    topic, group, count = "shx", "shx-group", 400
    b, control = start(ctx, topic)
    try:
        members = [share_consumer(ctx, "shx-%d" % i, group, topic, b.address, mode="explicit") for i in range(2)]
        wait_fetching(ctx, control, [p.label for p in members], 40)
        prod = ctx.producer("confluent", "producer", [topic], count, "shx", rate=400, bootstrap=b.address)
        ctx.wait_done(prod, 60)
        produced = {(part, off): k for t, k, part, off in ctx.produced([prod])}
        # Done when every record accepted or rejected, and every released one delivered again.
        deadline = now() + ctx.left(40)
        while now() < deadline:
            records = [r for p in members for r in got(p)]
            final = {(r[0], r[1]) for r in records if r[4] in ("accept", "reject")}
            if len(final) >= count:
                break
            ctx.sleep(0.5)
        for p in members:
            ctx.stop(p)
        records = [r for p in members for r in got(p)]
        deliveries = defaultdict(list)
        for part, off, k, count_, did in records:
            deliveries[(part, off)].append((count_, did))
        ctx.note("%d deliveries of %d records: %s" % (len(records), len(deliveries),
                 Counter(did for r in records for did in [r[4]])))
        missing = set(produced) - set(deliveries)
        ctx.check(not missing, "%d records never delivered: %s" % (len(missing), sorted(missing)[:5]))
        for where, seen in sorted(deliveries.items()):
            part, off = where
            seen.sort()
            counts = [c for c, _ in seen]
            if off % 10 == 0:
                # released at its first delivery: delivered again with delivery count 2, accepted
                ok = len(seen) == 2 and counts == [1, 2] and seen[1][1] == "accept"
                ctx.check(ok, "released record %s: deliveries %s (want a release at 1, an accept at 2)"
                          % (where, seen))
            else:
                ok = len(seen) == 1 and counts == [1]
                ctx.check(ok, "record %s delivered %s (want once)" % (where, seen))
    finally:
        control.close()
