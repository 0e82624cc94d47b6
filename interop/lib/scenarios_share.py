"""Share groups (KIP-932) with confluent-kafka 2.16.1's ShareConsumer (librdkafka's share
consumer): several consumers read the same partitions, each record acquired by one of them;
explicit acknowledgement with RELEASE (delivered again, its delivery count grown) and REJECT
(never again); eight consumers accepting 10,000 records; a consumer SIGKILLed holding records
(they come back after the lock duration); the delivery count limit (archived); a broker restart
on its data directory (nothing accepted delivered again). See interop/README.md.
"""
import json
import os
import time
from collections import Counter, defaultdict

from harness import INTEROP, Proc, now, python_exe
from suite import scenario

MOCK_NOTE = None
# librdkafka 2.16's mock serves share groups (ShareGroupHeartbeat, ShareFetch, ShareAcknowledge
# v1) but its assignor splits a topic's partitions over the members, one member per partition
# (rd_kafka_mock_sharegroup_assign_topic_partitions): a member beyond the partition count gets
# none, where Kafka's share assignor gives a partition to several members.
MOCK_ASSIGN_NOTE = ("the mock's share assignor gives each partition to one member at a time: of 8 members on "
                    "2 partitions only those that held one get records, 3 in the runs seen (Kafka's shares a "
                    "partition among members)")
MOCK_SIGKILL_NOTE = ("the mock's share assignor gives the only partition to one member: the killed holder "
                     "keeps it until its session runs out, so the second consumer is assigned nothing")
MOCK_RESTART_NOTE = "the mock keeps nothing across a restart (no data directory): not run against it"


def share_consumer(ctx, label, group, topic, bootstrap, mode="implicit", conf=None):
    spec = {"bootstrap": bootstrap, "group": group, "topic": topic, "label": label, "mode": mode}
    if conf:
        spec["conf"] = conf
    name, n = label, 1
    while any(q.name == name for q in ctx.procs):
        n += 1
        name = "%s.%d" % (label, n)
    p = Proc(name, [python_exe(), os.path.join(INTEROP, "workers", "share_consumer.py"), json.dumps(spec)],
             os.path.join(ctx.dir, name + ".log"))
    p.client, p.role, p.label, p.group, p.spec = "confluent", "share", label, group, spec
    ctx.procs.append(p)
    return p


def got(p):
    """Every record `p` reported: (partition, offset, key, delivery count, what it did)."""
    return [tuple(r) for e in p.snapshot() if e["ev"] == "recs" for r in e["r"]]


def wait_fetching(ctx, control, labels, timeout):
    """Until every consumer's ShareFetch was answered once (its share-partitions exist: records
    produced from then on are delivered, share.auto.offset.reset being latest). The mock keeps
    no record of requests: there, until each has started, and 3 s more."""
    deadline = now() + ctx.left(timeout)
    if ctx.mock:
        for label in labels:
            p = [q for q in ctx.procs if q.label == label][-1]
            ctx.wait_for(p, lambda e: e["ev"] == "started", timeout, "start")
        ctx.sleep(3)
        return
    while now() < deadline:
        seen = {r["client_id"] for r in control.requests(since=0)["requests"] if r["api"] == "ShareFetch"}
        if set(labels) <= seen:
            return
        ctx.sleep(0.2)
    ctx.require(False, "not every share consumer fetched within %.0f s" % timeout)


def start(ctx, topic, partitions=2, extra=(), name="broker", data_dir=None, listen=None):
    from control import Control
    b = ctx.start_broker(name, {topic: partitions}, data_dir=data_dir, listen=listen,
                         extra=["--control-listen", "127.0.0.1:0"] + list(extra))
    return b, Control(b.control(ctx.left(10)))


def acked(p):
    """Every acknowledgement the broker answered to `p`: (partition, offset, error or None, t)."""
    return [(part, off, e["err"], e["t"]) for e in p.snapshot() if e["ev"] == "acked"
            for part, offs in e["r"] for off in offs]


def deliveries_at(p):
    """Every record `p` reported, with the time it reported it: (partition, offset, key,
    delivery count, what it did, t)."""
    return [tuple(r) + (e["t"],) for e in p.snapshot() if e["ev"] == "recs" for r in e["r"]]


def errors_of(p):
    return [e["msg"] for e in p.snapshot() if e["ev"] == "error"]


def wait_until(ctx, cond, timeout, what):
    """Until cond() is true; a failed requirement (Failed) otherwise."""
    deadline = now() + ctx.left(timeout)
    while True:
        if cond():
            return
        if now() >= deadline:
            ctx.require(False, "%s: not within %.0f s" % (what, timeout))
        ctx.sleep(0.2)


def accepted_ok(members):
    """(partition, offset) -> how many times an acknowledgement of it was answered without
    error, over all `members` (their acknowledgements are ACCEPTs unless they released or
    rejected the record)."""
    did = {}
    for p in members:
        for part, off, _k, _c, what, _t in deliveries_at(p):
            did[(p.name, part, off)] = what
    out = Counter()
    for p in members:
        for part, off, err, _t in acked(p):
            if err is None and did.get((p.name, part, off), "accept") == "accept":
                out[(part, off)] += 1
    return out


def set_group_config(ctx, bootstrap, group, configs):
    """IncrementalAlterConfigs SET on the group (resource type GROUP) with confluent-kafka's
    AdminClient; the result's error, if any, fails the scenario."""
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(k, str(v), incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()])
    for _r, fut in admin.incremental_alter_configs([res]).items():
        fut.result(ctx.left(20))


@scenario("share-group-confluent", topics={"sh": 2}, budget=120, own_broker=True, clients=("confluent",),
          mock_note=MOCK_NOTE)
def share_group_confluent(ctx):
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


def check_clean(ctx, members):
    """No client error, no acknowledgement the broker answered with an error."""
    for p in members:
        errs = errors_of(p)
        ctx.check(not errs, "%s reported %d error(s), first: %s" % (p.label, len(errs), errs[:2]))
        bad = [(part, off, err) for part, off, err, _t in acked(p) if err is not None]
        ctx.check(not bad, "%s: %d acknowledgement(s) answered with an error, first: %s" % (p.label, len(bad), bad[:2]))


def share_errors(ctx, control, since=0):
    """The Share* requests the broker answered with an error code (its record)."""
    if ctx.mock:
        return Counter(), Counter()
    answer = control.requests(since=since)
    if answer["missed"]:
        ctx.note("the broker's record missed %d requests" % answer["missed"])
    reqs = [r for r in answer["requests"] if r["api"].startswith("Share")]
    apis = Counter(r["api"] for r in reqs)
    bad = Counter((r["api"], r["error_code"]) for r in reqs if r.get("error_code"))
    return apis, bad


@scenario("share-8-consumers-confluent", topics={"sh8": 2}, budget=150, own_broker=True, clients=("confluent",),
          mock_note=MOCK_ASSIGN_NOTE)
def share_8_consumers_confluent(ctx):
    """Eight share consumers (implicit acknowledgement) on a 2-partition topic: 10,000 records,
    each accepted exactly once (the acknowledgement commit callback), every consumer gets some,
    and a ninth consumer of the group started afterwards gets none of them back."""
    topic, group, n, count = "sh8", "sh8-group", 8, 10000
    b, control = start(ctx, topic)
    try:
        members = [share_consumer(ctx, "sh8-%d" % i, group, topic, b.address) for i in range(n)]
        wait_fetching(ctx, control, [p.label for p in members], 40)
        t0 = now()
        prod = ctx.producer("confluent", "producer", [topic], count, "sh8", rate=2500, bootstrap=b.address)
        ctx.wait_done(prod, 60)
        produced = {(part, off): k for t, k, part, off in ctx.produced([prod])}
        ctx.require(len(produced) == count, "the producer acknowledged %d of %d records" % (len(produced), count))
        wait_until(ctx, lambda: set(produced) <= set(accepted_ok(members)), 60,
                   "every record accepted (acknowledgement answered)")
        took = now() - t0
        for p in members:
            ctx.stop(p)
        check_clean(ctx, members)
        records = [r for p in members for r in got(p)]
        per_member = {p.label: len(got(p)) for p in members}
        ctx.note("%d records produced and accepted in %.1f s by %d consumers: %s" % (count, took, n, per_member))
        by_where = Counter((r[0], r[1]) for r in records)
        twice = {w: c for w, c in by_where.items() if c > 1}
        ctx.check(not twice, "%d records delivered more than once (no lock ran out), e.g. %s"
                  % (len(twice), sorted(twice.items())[:5]))
        ok = accepted_ok(members)
        missing = set(produced) - set(ok)
        ctx.check(not missing, "%d records never accepted, e.g. %s" % (len(missing), sorted(missing)[:5]))
        many = {w: c for w, c in ok.items() if c > 1}
        ctx.check(not many, "%d records accepted more than once, e.g. %s" % (len(many), sorted(many.items())[:5]))
        extra = set(ok) - set(produced)
        ctx.check(not extra, "acknowledgements of offsets never produced: %s" % sorted(extra)[:5])
        wrong = [r for r in records if produced.get((r[0], r[1])) != r[2]]
        ctx.check(not wrong, "records delivered with another key than produced there: %s" % wrong[:3])
        ctx.check(all(per_member.values()), "a consumer got no record: %s" % per_member)
        counts = Counter(r[3] for r in records)
        ctx.check(set(counts) == {1}, "delivery counts other than 1: %s" % dict(counts))
        # nothing comes back: a fresh member of the group gets none of these records
        late = share_consumer(ctx, "sh8-late", group, topic, b.address)
        wait_fetching(ctx, control, [late.label], 30)
        ctx.sleep(3)
        ctx.stop(late)
        ctx.check(not got(late), "a consumer started after every record was accepted got %d of them: %s"
                  % (len(got(late)), got(late)[:3]))
        apis, bad = share_errors(ctx, control)
        if not ctx.mock:
            ctx.note("Share* requests recorded: %s; answered with an error: %s" % (dict(apis), dict(bad)))
    finally:
        control.close()


LOCK_MS = 2000


@scenario("share-sigkill-confluent", topics={"shk": 1}, budget=120, own_broker=True, clients=("confluent",),
          mock_note=MOCK_SIGKILL_NOTE)
def share_sigkill_confluent(ctx):
    """A consumer (explicit acknowledgement) acquires records and never acknowledges them; it is
    SIGKILLed; another consumer of the group gets them once their 2 s lock has run out, with
    delivery count 2, and accepts them, beside 100 records produced after the kill (delivery
    count 1). One partition: the share assignor gives it to both
    members (with two partitions each member would get one, and the dead member's partition
    would wait for its 45 s session to run out, in Kafka as here)."""
    topic, group, count = "shk", "shk-group", 200
    b, control = start(ctx, topic, partitions=1, extra=["--group-share-record-lock-duration-ms", str(LOCK_MS),
                                          "--group-share-min-record-lock-duration-ms", "1000"])
    try:
        holder = share_consumer(ctx, "shk-holder", group, topic, b.address, mode="hold")
        wait_fetching(ctx, control, [holder.label], 40)
        prod = ctx.producer("confluent", "producer", [topic], count, "shk", bootstrap=b.address)
        ctx.wait_done(prod, 60)
        produced = {(part, off): k for t, k, part, off in ctx.produced([prod])}
        ctx.wait_for(holder, lambda e: e["ev"] == "recs", 30, "records acquired by the holder")
        held = deliveries_at(holder)
        held_at = min(r[5] for r in held)
        held_set = {(r[0], r[1]) for r in held}
        holder.kill()
        killed_at = time.time()
        ctx.note("the holder acquired %d records, SIGKILLed %.2f s later" % (len(held_set), killed_at - held_at))
        taker = share_consumer(ctx, "shk-taker", group, topic, b.address, mode="accept")
        wait_fetching(ctx, control, [taker.label], 30)
        prod2 = ctx.producer("confluent", "producer-2", [topic], 100, "shk2", bootstrap=b.address)
        ctx.wait_done(prod2, 60)
        produced.update({(part, off): k for t, k, part, off in ctx.produced([prod2])})
        wait_until(ctx, lambda: set(produced) <= set(accepted_ok([taker])), 30,
                   "every record accepted by the second consumer")
        ctx.stop(taker)
        check_clean(ctx, [taker])
        recs = deliveries_at(taker)
        by_where = defaultdict(list)
        for part, off, k, c, did, t in recs:
            by_where[(part, off)].append((c, t, k))
        back = [min(t for _c, t, _k in by_where[w]) for w in held_set if w in by_where]
        if back:
            ctx.note("the held records reached the second consumer %.2f-%.2f s after the holder acquired "
                     "them (lock %d ms), %.2f s after the SIGKILL"
                     % (min(back) - held_at, max(back) - held_at, LOCK_MS, min(back) - killed_at))
        for w in sorted(held_set):
            seen = by_where.get(w, [])
            ctx.check(len(seen) == 1 and seen[0][0] == 2,
                      "held record %s: delivered to the second consumer as %s (want once, delivery count 2)"
                      % (w, [(c, k) for c, _t, k in seen]))
        for w in sorted(set(produced) - held_set):
            seen = by_where.get(w, [])
            ctx.check(len(seen) == 1 and seen[0][0] == 1,
                      "record %s (never acquired before): delivered as %s (want once, delivery count 1)"
                      % (w, [(c, k) for c, _t, k in seen]))
        early = [w for w in held_set if by_where.get(w) and min(t for _c, t, _k in by_where[w]) < killed_at]
        ctx.check(not early, "%d held records delivered to another consumer before the holder was killed: %s"
                  % (len(early), sorted(early)[:5]))
        late = [w for w in held_set if by_where.get(w) and
                min(t for _c, t, _k in by_where[w]) > held_at + LOCK_MS / 1000.0 + 10]
        ctx.check(not late, "%d held records came back more than 10 s after their lock ran out" % len(late))
        wrong = [(w, s[0][2]) for w, s in by_where.items() if produced.get(w) != s[0][2]]
        ctx.check(not wrong, "records delivered with another key than produced there: %s" % wrong[:3])
        ctx.check(len(held_set) > 0, "the holder acquired nothing")
    finally:
        control.close()


@scenario("share-delivery-limit-confluent", topics={"shd": 2}, budget=120, own_broker=True, clients=("confluent",),
          mock_note=MOCK_NOTE)
def share_delivery_limit_confluent(ctx):
    """share.delivery.count.limit=2 on the group (IncrementalAlterConfigs): a consumer RELEASEs
    every record at every delivery; each is delivered exactly twice (counts 1, 2) and then
    archived: not delivered again to it, nor to another consumer that then accepts what comes."""
    topic, group, count, limit = "shd", "shd-group", 40, 2
    # the mock has no IncrementalAlterConfigs: its share groups' limit is set at its start
    b, control = start(ctx, topic, extra=["--group-share-delivery-count-limit", str(limit)] if ctx.mock else ())
    try:
        if not ctx.mock:
            set_group_config(ctx, b.address, group, {"share.delivery.count.limit": limit})
        rel = share_consumer(ctx, "shd-release", group, topic, b.address, mode="release")
        wait_fetching(ctx, control, [rel.label], 40)
        prod = ctx.producer("confluent", "producer", [topic], count, "shd", bootstrap=b.address)
        ctx.wait_done(prod, 60)
        produced = {(part, off): k for t, k, part, off in ctx.produced([prod])}

        def seen_twice():
            c = Counter((r[0], r[1]) for r in got(rel))
            return all(c[w] >= limit for w in produced)
        wait_until(ctx, seen_twice, 30, "every record delivered %d times" % limit)
        ctx.sleep(3)   # the releasing consumer polls on: nothing more may come
        ctx.stop(rel)
        # a second consumer, accepting: it gets the records produced now, none of the archived
        acc = share_consumer(ctx, "shd-accept", group, topic, b.address, mode="accept")
        wait_fetching(ctx, control, [acc.label], 30)
        prod2 = ctx.producer("confluent", "producer-2", [topic], 20, "shdm", bootstrap=b.address)
        ctx.wait_done(prod2, 60)
        markers = {(part, off): k for t, k, part, off in ctx.produced([prod2])}
        wait_until(ctx, lambda: set(markers) <= set(accepted_ok([acc])), 30, "the later records accepted")
        ctx.sleep(1)
        ctx.stop(acc)
        check_clean(ctx, [rel, acc])
        by_where = defaultdict(list)
        for part, off, k, c, did, t in deliveries_at(rel):
            by_where[(part, off)].append((c, did))
        for w in sorted(produced):
            seen = sorted(by_where.get(w, []))
            ctx.check(seen == [(1, "release"), (2, "release")],
                      "record %s: deliveries %s (want counts 1 and 2, then archived)" % (w, seen))
        again = [r for r in got(acc) if (r[0], r[1]) in produced]
        ctx.check(not again, "%d archived records delivered to the second consumer: %s" % (len(again), again[:3]))
        ctx.check(set(markers) <= {(r[0], r[1]) for r in got(acc)}, "the later records did not all reach the second consumer")
        ctx.note("%d records delivered %d times each, then archived; %d later records accepted by the second consumer"
                 % (len(produced), limit, len(markers)))
    finally:
        control.close()


@scenario("share-restart-confluent", topics={"shr": 1}, budget=180, own_broker=True, clients=("confluent",),
          mock_note=MOCK_RESTART_NOTE)
def share_restart_confluent(ctx):
    """A broker on a data directory: a holder acquires records and is SIGKILLed, two consumers
    accept the rest and 500 more; the broker is stopped (SIGTERM) and started again on the same
    directory and port; the consumers carry on: the held records are delivered again (before their
    30 s lock would have run out), nothing accepted before the restart is delivered again, 500
    records produced after it are accepted, every record accepted exactly once."""
    if ctx.mock:
        ctx.note(MOCK_RESTART_NOTE)
        return
    topic, group = "shr", "shr-group"
    data_dir = os.path.join(ctx.suite.tmp, "share-restart-data")
    os.makedirs(data_dir, exist_ok=True)
    b, control = start(ctx, topic, partitions=1, name="broker-1", data_dir=data_dir)
    control2 = None
    try:
        holder = share_consumer(ctx, "shr-holder", group, topic, b.address, mode="hold")
        wait_fetching(ctx, control, [holder.label], 40)
        prod0 = ctx.producer("confluent", "producer-0", [topic], 100, "shr0", bootstrap=b.address)
        ctx.wait_done(prod0, 60)
        ctx.wait_for(holder, lambda e: e["ev"] == "recs", 30, "records acquired by the holder")
        held = {(r[0], r[1]) for r in got(holder)}
        holder.kill()
        members = [share_consumer(ctx, "shr-%d" % i, group, topic, b.address, mode="accept") for i in range(2)]
        wait_fetching(ctx, control, [p.label for p in members], 40)
        prod1 = ctx.producer("confluent", "producer-1", [topic], 500, "shr1", rate=500, bootstrap=b.address)
        ctx.wait_done(prod1, 60)
        before = {(part, off): k for t, k, part, off in ctx.produced([prod0, prod1])}
        first = set(before) - held
        wait_until(ctx, lambda: first <= set(accepted_ok(members)), 40,
                   "the records not held accepted before the restart")
        # the broker stopped and started again on the same directory and port
        control.close()
        code, took, killed = b.stop(15)
        ctx.check(code == 0 and not killed, "broker-1: SIGTERM gave exit %s after %.1f s%s"
                  % (code, took, " (killed)" if killed else ""))
        restart_at = time.time()
        b2, control2 = start(ctx, topic, partitions=1, name="broker-2", data_dir=data_dir, listen=b.address)
        ctx.note("broker-1 stopped in %.1f s; broker-2 listening on %s" % (took, b2.address))
        prod2 = ctx.producer("confluent", "producer-2", [topic], 500, "shr2", rate=500, bootstrap=b2.address)
        ctx.wait_done(prod2, 60)
        produced = {(part, off): k for t, k, part, off in ctx.produced([prod0, prod1, prod2])}
        ctx.check(len(produced) == 1100, "the producers acknowledged %d of 1100 records" % len(produced))
        # A consumer whose client failed fatally (librdkafka: ShareGroupHeartbeat answered
        # GROUP_ID_NOT_FOUND, the group forgotten) is replaced by a new one, which bootstraps
        # again, so that the share-partitions' durability is judged all the same.
        replaced = []
        deadline = now() + ctx.left(60)
        while not set(produced) <= set(accepted_ok(members)):
            for p in list(members):
                fatal = [e for e in errors_of(p) if "FATAL" in e]
                if fatal and p not in replaced:
                    replaced.append(p)
                    p.stop(10)
                    members.append(share_consumer(ctx, p.label, group, topic, b2.address, mode="accept"))
            ctx.require(now() < deadline, "every record accepted after the restart: not within 60 s")
            ctx.sleep(0.2)
        ctx.sleep(1)
        for p in members:
            if p not in replaced:
                ctx.stop(p)
        errs = [(p.label, e) for p in members for e in errors_of(p)]
        if errs:
            ctx.note("client errors: %d, first: %s" % (len(errs), errs[:2]))
        fatal = sorted({e for p in replaced for e in errors_of(p) if "FATAL" in e})
        ctx.check(not replaced, "%d consumers did not survive the restart (replaced by new ones to go on): %s"
                  % (len(replaced), fatal[:2]))
        ok = accepted_ok(members)
        missing = set(produced) - set(ok)
        ctx.check(not missing, "%d records never accepted, e.g. %s" % (len(missing), sorted(missing)[:5]))
        many = {w: c for w, c in ok.items() if c > 1}
        ctx.check(not many, "%d records accepted more than once, e.g. %s" % (len(many), sorted(many.items())[:5]))
        # accepted (the broker answered) before the restart -> never delivered after it
        accepted_before = {}
        for p in members:
            for part, off, err, t in acked(p):
                if err is None and t < restart_at:
                    accepted_before.setdefault((part, off), t)
        recs = [r for p in members for r in deliveries_at(p)]
        again = [r for r in recs if (r[0], r[1]) in accepted_before and r[5] > accepted_before[(r[0], r[1])]]
        ctx.check(not again, "%d records accepted before the restart delivered again after it, e.g. %s"
                  % (len(again), [r[:5] for r in again[:3]]))
        wrong = [r[:5] for r in recs if produced.get((r[0], r[1])) != r[2]]
        ctx.check(not wrong, "%d records delivered with another key than produced there (records lost?), e.g. %s"
                  % (len(wrong), wrong[:3]))
        back = [r for r in recs if (r[0], r[1]) in held]
        back_where = {(r[0], r[1]) for r in back}
        ctx.check(held <= back_where, "%d of %d records held at the restart never delivered again"
                  % (len(held - back_where), len(held)))
        if back:
            ctx.note("%d held records delivered again %.1f-%.1f s after the restart, delivery counts %s"
                     % (len(back_where), min(r[5] for r in back) - restart_at, max(r[5] for r in back) - restart_at,
                        dict(Counter(r[3] for r in back))))
        ctx.note("accepted before the restart: %d; after: %d; per consumer: %s"
                 % (len(accepted_before), len(set(ok) - set(accepted_before)),
                    {p.name: len(got(p)) for p in members}))
        ctx.check(len(accepted_before) > 0, "nothing accepted before the restart")
    finally:
        control.close()
        if control2:
            control2.close()
