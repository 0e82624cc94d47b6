"""The scenarios. Each names the topics it needs (created at broker start with --topic), uses
its own topics and group ids, and records failures on its Ctx. See interop/README.md for what
each one checks and why.
"""
import json
import os
import random
import re
import select
import signal
import socket
import struct
import subprocess
import time

import assigncmp
import checker
import kproto
import records
from harness import INTEROP, ROOT, Timeout, node_exe, now, python_exe
from suite import Failed, scenario

PY_CLIENTS = ("kafka-python", "aiokafka", "confluent")
ALL_CLIENTS = PY_CLIENTS + ("kafkajs",)
TS_BASE = 1_700_000_000_000

# Known differences of librdkafka's mock cluster (interop/README.md, "The mock")
MOCK_REBALANCE_DELAY = ("the mock completes a rebalance of a non-empty group only after session.timeout.ms - 1 s, "
                        "even when every member rejoined at once (partitions move ~5 s after a close, ~11 s after SIGKILL)")
MOCK_STATIC = ("the mock treats a static member that rejoins (JoinGroup with its group.instance.id and no member id) "
               "as a new member and rebalances; Kafka swaps the member id and answers with the current generation "
               "and assignment, without a rebalance")
MOCK_LATE_SYNC = ("the mock answers a follower's SyncGroup that arrives after the leader's with INVALID_REQUEST "
                  "(Kafka answers it with the assignment); kafka-python, aiokafka and kafkajs report it as an error")


def parts(topics):
    return sorted((t, p) for t, n in topics.items() for p in range(n))


def expected_record(prefix, ts_base=TS_BASE):
    def exp(topic, key):
        i = records.index_of(key)
        return {"key": records.key(prefix, i).encode().hex(), "value": records.value(prefix, i).hex(),
                "headers": [[k, v.hex()] for k, v in records.headers(i)], "timestamp": records.timestamp(ts_base, i)}
    return exp


def end_offsets(consumers):
    """{(topic, partition): last consumed offset + 1} over what the consumers read."""
    out = {}
    for p in consumers:
        for e in p.snapshot():
            if e["ev"] == "recs":
                for t, part, o, _ in e["r"]:
                    out[(t, part)] = max(out.get((t, part), 0), o + 1)
    return out


def check_final_commits(ctx, consumers, group, skip=()):
    """Every partition read was committed up to its end (the consumers commit after each batch),
    but those in skip (noted)."""
    ends = end_offsets(consumers)
    commits = {(t, p): o for (g, t, p), o in checker.final_commits(ctx.members(consumers)).items() if g == group}
    if skip:
        ctx.note("not judged for their last commits: %s" % sorted(skip))
    missing = {tp: (o, commits.get(tp)) for tp, o in ends.items() if commits.get(tp) != o and tp not in skip}
    ctx.check(not missing, "group %s: last commits differ from the ends read, {partition: (end, committed)}: %s"
              % (group, missing))
    return commits


def fetch_committed(ctx, group, partitions, bootstrap=None):
    """Committed offsets through a raw OffsetFetch v1 to the coordinator: {(t, p): offset}."""
    host, port = kproto.split_hostport(bootstrap or ctx.bootstrap)
    c = kproto.Conn(host, port, timeout=ctx.left(10))
    try:
        err, _node, chost, cport = c.find_coordinator(group)
        if err:
            raise Failed("FindCoordinator(%s) error %d" % (group, err))
        if (chost, cport) != (host, port):
            c.close()
            c = kproto.Conn(chost, cport, timeout=ctx.left(10))
        got = c.offset_fetch(group, partitions)
    finally:
        c.close()
    bad = {tp: e for tp, (o, e) in got.items() if e}
    if bad:
        raise Failed("OffsetFetch(%s) errors %s" % (group, bad))
    return {tp: o for tp, (o, e) in got.items()}


# -------------------------------------------------------------------------------------------
# 0. the checker itself: it catches each kind of violation, and passes what is allowed

@scenario("checker-self-test", budget=30)
def checker_self_test(ctx):
    import unittest
    import test_checker
    result = unittest.TestResult()
    unittest.defaultTestLoader.loadTestsFromModule(test_checker).run(result)
    for test, tb in result.failures + result.errors:
        ctx.fail("%s: %s" % (test.id(), tb.strip().splitlines()[-1]))
    ctx.check(result.testsRun >= 10, "only %d checker tests ran" % result.testsRun)
    ctx.note("%d checker tests" % result.testsRun)


# -------------------------------------------------------------------------------------------
# 1. round trip: 1,000 keyed records with headers, every field checked, commits honoured

def roundtrip(client):
    topic = "rt-%s" % client
    group = "rt-%s" % client

    @scenario("roundtrip-%s" % client, topics={topic: 4}, budget=90, clients=(client,))
    def run(ctx):
        prefix = "rt-" + client
        prod = ctx.producer(client, "producer", [topic], 1000, prefix, ts_base=TS_BASE)
        ctx.wait_done(prod, 60)
        produced = ctx.produced([prod])
        ctx.require(len(produced) == 1000, "producer acknowledged %d of 1000 records" % len(produced))
        c1 = ctx.consumer(client, "consumer-1", group, [topic], full=True)
        ctx.wait_consumed([c1], [(t, k) for t, k, _, _ in produced], 60)
        ctx.stop(c1)
        problems, n = checker.fidelity(ctx.members([c1]), expected_record(prefix))
        for p in problems:
            ctx.fail("fidelity: " + p)
        ctx.check(n >= 1000, "only %d full records compared" % n)
        commits = check_final_commits(ctx, [c1], group)
        ctx.check(len(commits) == 4, "commits for %d of 4 partitions" % len(commits))
        # a new member of the group starts at the committed offsets: it reads only what comes after
        sentinel = ctx.producer(client, "producer-sentinel", [topic], 1, prefix, start=1000, ts_base=TS_BASE)
        ctx.wait_done(sentinel, 30)
        c2 = ctx.consumer(client, "consumer-2", group, [topic], full=True)
        ctx.wait_consumed([c2], [(topic, records.key(prefix, 1000))], 40, "the record produced after the commit")
        ctx.sleep(1.0)
        ctx.stop(c2)
        read = sorted(k for e in c2.snapshot() if e["ev"] == "recs" for _, _, _, k in e["r"])
        ctx.check(read == [records.key(prefix, 1000)],
                  "the new member read %d records (%s...), expected only the one produced after the commit"
                  % (len(read), read[:3]))
        ctx.run_checker([c1, c2], [prod, sentinel])
    return run


for _c in ALL_CLIENTS:
    roundtrip(_c)


# -------------------------------------------------------------------------------------------
# 2. a mixed group: kafka-python + aiokafka + confluent-kafka, roundrobin and range

def mixed(strategy):
    ta, tb = "mixed-%s-a" % strategy, "mixed-%s-b" % strategy
    topics = {ta: 5, tb: 3}
    group = "mixed-%s" % strategy

    @scenario("mixed-group-%s" % strategy, topics=topics, budget=120, clients=PY_CLIENTS,
              mock_note=MOCK_LATE_SYNC)
    def run(ctx):
        labels = {"kafka-python": "kp", "aiokafka": "aio", "confluent": "rdk"}
        consumers = [ctx.consumer(c, labels[c], group, [ta, tb], strategy=strategy, session_ms=10000,
                                  heartbeat_ms=500) for c in PY_CLIENTS]
        ctx.wait_assigned(consumers[0], 40)
        prod = ctx.producer("confluent", "producer", [ta, tb], 3000, "mx-" + strategy, rate=800)
        ctx.wait_done(prod, 60)
        produced = ctx.produced([prod])
        ctx.require(len(produced) == 3000, "producer acknowledged %d of 3000 records" % len(produced))
        ctx.wait_consumed(consumers, [(t, k) for t, k, _, _ in produced], 60)
        gen = ctx.wait_stable(consumers, parts(topics), 30)
        ctx.note("stable in generation %s: %s" % (gen, {p.label: ctx.owned(p) for p in consumers}))
        protos = {p.label: [e.get("proto") for e in p.snapshot() if e["ev"] == "assigned"] for p in consumers}
        status, detail = assigncmp.compare(strategy, topics, [ta, tb], [p.snapshot() for p in consumers])
        ctx.note("assignor comparison (%s): %s: %s" % (strategy, status, detail))
        ctx.check(status != "different", "the leader's %s assignment differs from the project's: %s" % (strategy, detail))
        for p in consumers:
            ctx.stop(p)
        check_final_commits(ctx, consumers, group)
        ctx.run_checker(consumers, [prod])
        del protos
    return run


mixed("roundrobin")
mixed("range")


# -------------------------------------------------------------------------------------------
# 3. kafkajs: two kafkajs consumers (its strategy is named RoundRobinAssigner)

@scenario("kafkajs-group", topics={"kjs": 6}, budget=90, clients=("kafkajs",),
          mock_note=MOCK_LATE_SYNC)
def kafkajs_group(ctx):
    topic, group = "kjs", "kjs"
    a = ctx.consumer("kafkajs", "kjs-a", group, [topic], session_ms=10000, heartbeat_ms=500)
    ctx.wait_assigned(a, 40)
    prod = ctx.producer("kafkajs", "producer", [topic], 1500, "kjs", rate=500)
    ctx.sleep(1.0)
    b = ctx.consumer("kafkajs", "kjs-b", group, [topic], session_ms=10000, heartbeat_ms=500)
    ctx.wait_done(prod, 60)
    produced = ctx.produced([prod])
    ctx.require(len(produced) == 1500, "producer acknowledged %d of 1500 records" % len(produced))
    ctx.wait_consumed([a, b], [(t, k) for t, k, _, _ in produced], 60)
    gen = ctx.wait_stable([a, b], parts({topic: 6}), 30)
    ctx.check(all(ctx.owned(p) for p in (a, b)), "a member of the stable group holds nothing: %s"
              % {p.label: ctx.owned(p) for p in (a, b)})
    protos = {e.get("proto") for p in (a, b) for e in p.snapshot() if e["ev"] == "assigned"}
    ctx.check(protos == {"RoundRobinAssigner"}, "protocol chosen: %s" % protos)
    status, detail = assigncmp.compare("roundrobin", {topic: 6}, [topic], [p.snapshot() for p in (a, b)])
    ctx.note("generation %s; assignor comparison (kafkajs RoundRobinAssigner vs roundrobin): %s: %s" % (gen, status, detail))
    ctx.check(status != "different", "kafkajs's RoundRobinAssigner differs from the project's roundrobin: %s" % detail)
    ctx.stop(a)
    ctx.stop(b)
    check_final_commits(ctx, [a, b], group)
    ctx.run_checker([a, b], [prod])


# -------------------------------------------------------------------------------------------
# 4. failure detection: SIGKILL -> partitions move after the session timeout;
#    graceful close -> they move at once

SESSION_MS, HEARTBEAT_MS = 6000, 500


def failover(client):
    topic = "fo-%s" % client
    group = "fo-%s" % client

    @scenario("kill-and-close-%s" % client, topics={topic: 4}, budget=120, clients=(client,),
              mock_note=MOCK_REBALANCE_DELAY + "; " + MOCK_LATE_SYNC)
    def run(ctx):
        kw = dict(session_ms=SESSION_MS, heartbeat_ms=HEARTBEAT_MS)
        all_parts = parts({topic: 4})
        prod = ctx.producer("confluent", "producer", [topic], 3500, "fo-" + client, rate=250)
        b = ctx.consumer(client, "member-b", group, [topic], **kw)
        ctx.wait_assigned(b, 40)
        a = ctx.consumer(client, "member-a", group, [topic], **kw)
        ctx.wait_stable([a, b], all_parts, 40)
        ctx.require(ctx.owned(a), "member-a got no partition")
        ctx.sleep(1.0)
        # SIGKILL: nobody tells the coordinator; the session timeout must pass first
        mark = len(b.snapshot())
        a.kill()
        t_kill = a.killed_at
        ev = ctx.wait_for(b, lambda e: e["ev"] == "assigned" and sorted(map(tuple, e["owned"])) == all_parts,
                          SESSION_MS / 1000 + 15, "the killed member's partitions", start=mark)
        moved = ev["t"] - t_kill
        ctx.note("after SIGKILL the partitions moved in %.2f s (session timeout %.1f s)" % (moved, SESSION_MS / 1000))
        ctx.check(moved >= (SESSION_MS - 2 * HEARTBEAT_MS) / 1000,
                  "partitions moved %.2f s after SIGKILL: before the session timeout (%.1f s) could expire"
                  % (moved, SESSION_MS / 1000))
        ctx.check(moved <= SESSION_MS / 1000 + 4.0,
                  "partitions moved %.2f s after SIGKILL: more than 4 s past the session timeout" % moved)
        # a graceful close (LeaveGroup): the partitions move at once
        c = ctx.consumer(client, "member-c", group, [topic], **kw)
        ctx.wait_stable([b, c], all_parts, 40)
        ctx.require(ctx.owned(c), "member-c got no partition")
        ctx.sleep(1.0)
        mark = len(b.snapshot())
        t_close = now()
        ctx.stop(c)
        ev = ctx.wait_for(b, lambda e: e["ev"] == "assigned" and sorted(map(tuple, e["owned"])) == all_parts,
                          SESSION_MS / 1000 + 15, "the closed member's partitions", start=mark)
        moved = ev["t"] - t_close
        ctx.note("after a graceful close the partitions moved in %.2f s" % moved)
        ctx.check(moved < min(3.0, SESSION_MS / 2000),
                  "partitions moved %.2f s after a graceful close; expected well under the session timeout "
                  "(%.1f s): did the member leave the group?" % (moved, SESSION_MS / 1000))
        ctx.wait_done(prod, 60)
        produced = ctx.produced([prod])
        ctx.wait_consumed([a, b, c], [(t, k) for t, k, _, _ in produced], 40)
        ctx.stop(b)
        ctx.run_checker([a, b, c], [prod])
    return run


for _c in ALL_CLIENTS:
    failover(_c)


# -------------------------------------------------------------------------------------------
# 5. static membership: a restart within the session timeout causes no rebalance

def static_restart(client):
    topic = "st-%s" % client
    group = "st-%s" % client

    @scenario("static-member-restart-%s" % client, topics={topic: 4}, budget=90, clients=(client,),
              mock_note=MOCK_STATIC)
    def run(ctx):
        kw = dict(session_ms=10000, heartbeat_ms=500)
        all_parts = parts({topic: 4})
        prod = ctx.producer("confluent", "producer", [topic], 3000, "st-" + client, rate=250)
        a = ctx.consumer(client, "static-a", group, [topic], instance_id="static-a", **kw)
        ctx.wait_assigned(a, 40)
        b = ctx.consumer(client, "static-b", group, [topic], instance_id="static-b", **kw)
        gen = ctx.wait_stable([a, b], all_parts, 40)
        before = ctx.owned(a)
        ctx.sleep(1.0)
        mark_b = len(b.snapshot())
        ctx.stop(a)   # a static member does not send LeaveGroup
        a2 = ctx.consumer(client, "static-a", group, [topic], instance_id="static-a", **kw)
        ev = ctx.wait_assigned(a2, 30)
        ctx.check(ev["gen"] == gen, "the restarted static member got generation %s, expected %s (no rebalance)"
                  % (ev["gen"], gen))
        ctx.check(sorted(map(tuple, ev["owned"])) == before, "the restarted static member got %s, before it had %s"
                  % (ev["owned"], before))
        ctx.sleep(2.0)
        moved = [e for e in b.snapshot()[mark_b:] if e["ev"] in ("assigned", "revoked", "lost")]
        ctx.check(not moved, "the other member saw a rebalance during the restart: %s"
                  % [(e["ev"], e["gen"], e.get("owned")) for e in moved])
        ctx.wait_done(prod, 60)
        ctx.wait_consumed([a, a2, b], [(t, k) for t, k, _, _ in ctx.produced([prod])], 40)
        ctx.stop(a2)
        ctx.stop(b)
        # a and a2 are one logical member (same label): the checker treats them as one
        ctx.run_checker([a, a2, b], [prod])
    return run


for _c in PY_CLIENTS:
    static_restart(_c)


# -------------------------------------------------------------------------------------------
# 6. cooperative-sticky: the first member keeps its retained partitions throughout

def cooperative(client):
    topic = "coop-%s" % client
    group = "coop-%s" % client

    @scenario("cooperative-sticky-%s" % client, topics={topic: 8}, budget=90, clients=(client,),
              mock_note=None if client == "confluent" else MOCK_LATE_SYNC)
    def run(ctx):
        kw = dict(session_ms=10000, heartbeat_ms=500, strategy="cooperative-sticky")
        all_parts = parts({topic: 8})
        prod = ctx.producer("confluent", "producer", [topic], 3000, "coop-" + client, rate=300)
        a = ctx.consumer(client, "coop-a", group, [topic], **kw)
        ctx.wait_for(a, lambda e: e["ev"] == "assigned" and len(e["owned"]) == 8, 40, "all 8 partitions")
        ctx.sleep(1.0)
        mark = len(a.snapshot())
        t_join = now()
        b = ctx.consumer(client, "coop-b", group, [topic], **kw)
        ctx.wait_stable([a, b], all_parts, 40)
        ctx.sleep(1.0)
        ev_a = a.snapshot()[mark:]
        owned_seen = [len(e["owned"]) for e in ev_a if e["ev"] in ("assigned", "revoked", "lost")]
        revoked = sorted(tuple(x) for e in ev_a if e["ev"] == "revoked" for x in e["removed"])
        lost = [e for e in ev_a if e["ev"] == "lost"]
        ctx.check(not lost, "member a lost partitions: %s" % lost)
        ctx.check(owned_seen and min(owned_seen) > 0,
                  "member a's assignment went through %s partitions: a full revocation" % owned_seen)
        ctx.check(len(revoked) == 4 and set(revoked) == set(ctx.owned(b)),
                  "member a gave up %s; member b holds %s (expected exactly the 4 moved)" % (revoked, ctx.owned(b)))
        retained = set(ctx.owned(a))
        ctx.check(len(retained) == 4, "member a retains %s" % sorted(retained))
        # the retained partitions were consumed while b joined (the stream never stopped for them)
        t_b = min([e["t"] for e in b.snapshot() if e["ev"] == "assigned" and e["owned"]] or [now()])
        during = [r for e in ev_a if e["ev"] == "recs" and t_join <= e["t"] <= t_b
                  for r in e["r"] if (r[0], r[1]) in retained]
        ctx.note("member a read %d records of its retained partitions between b's start and b's assignment (%.2f s)"
                 % (len(during), t_b - t_join))
        ctx.wait_done(prod, 60)
        ctx.wait_consumed([a, b], [(t, k) for t, k, _, _ in ctx.produced([prod])], 40)
        ctx.stop(b)
        ctx.stop(a)
        ctx.run_checker([a, b], [prod])
    return run


for _c in ("confluent", "kafka-python"):
    cooperative(_c)


# -------------------------------------------------------------------------------------------
# 7. broker restart on the same data dir: committed offsets survive

@scenario("restart-keeps-offsets", topics={"rs": 4}, budget=120, own_broker=True,
          mock_note="the mock has no --data-dir: nothing survives it, and it does not lock a directory")
def restart_keeps_offsets(ctx):
    topics = {"rs": 4}
    data_dir = os.path.join(ctx.suite.tmp, "restart-data")
    os.makedirs(data_dir, exist_ok=True)
    b1 = ctx.start_broker("broker-1", topics, data_dir)
    prod = ctx.producer("confluent", "producer", ["rs"], 400, "rs", bootstrap=b1.address)
    ctx.wait_done(prod, 60)
    c = ctx.consumer("confluent", "consumer", "rs-group", ["rs"], bootstrap=b1.address)
    ctx.wait_consumed([c], [(t, k) for t, k, _, _ in ctx.produced([prod])], 60)
    ctx.stop(c)
    # a second group's offsets committed directly ("simple" commit, no membership)
    host, port = kproto.split_hostport(b1.address)
    conn = kproto.Conn(host, port, timeout=ctx.left(10))
    errs = conn.offset_commit("rs-simple", {("rs", 0): 7, ("rs", 3): 11})
    conn.close()
    ctx.check(not any(errs.values()), "simple OffsetCommit errors: %s" % errs)
    tps = parts(topics)
    before = {g: fetch_committed(ctx, g, tps, b1.address) for g in ("rs-group", "rs-simple")}
    ctx.check(all(before["rs-group"][tp] >= 0 for tp in tps), "offsets before restart: %s" % before["rs-group"])
    ctx.check(before["rs-simple"][("rs", 0)] == 7 and before["rs-simple"][("rs", 3)] == 11,
              "simple commit read back as %s" % before["rs-simple"])
    # a second broker on the same data dir is refused
    b2 = ctx.start_broker("broker-2-same-dir", topics, data_dir, expect_listen=False)
    try:
        code = b2.proc.p.wait(ctx.left(15))
    except subprocess.TimeoutExpired:
        code = None
    ctx.check(code not in (None, 0), "a second broker on the same --data-dir was not refused (exit %s)" % code)
    if code is None:
        b2.stop(5)
    # SIGTERM: exit 0
    code, took, killed = b1.stop(15)
    ctx.check(code == 0 and not killed, "broker-1 on SIGTERM: exit %s after %.1f s%s" % (code, took, " (killed)" if killed else ""))
    b3 = ctx.start_broker("broker-3", topics, data_dir)
    after = {g: fetch_committed(ctx, g, tps, b3.address) for g in ("rs-group", "rs-simple")}
    ctx.check(after == before, "committed offsets before the restart %s, after %s" % (before, after))
    code, took, killed = b3.stop(15)
    ctx.check(code == 0 and not killed, "broker-3 on SIGTERM: exit %s" % code)


# -------------------------------------------------------------------------------------------
# 7b. a group of three clients carries on through broker restarts (SIGTERM, then SIGKILL) on the
#     same data dir: no revocation, the same partitions, commits continue, no record lost

@scenario("restart-keeps-groups", topics={"rg": 6}, budget=180, own_broker=True, clients=PY_CLIENTS,
          mock_note="the mock has no --data-dir: a restarted mock knows neither the group nor its records")
def restart_keeps_groups(ctx):
    topics = {"rg": 6}
    group = "rg-group"
    all_parts = parts(topics)
    data_dir = os.path.join(ctx.suite.tmp, "restart-groups-data")
    os.makedirs(data_dir, exist_ok=True)
    broker = ctx.start_broker("rg-broker-1", topics, data_dir)
    address = broker.address
    kw = dict(session_ms=10000, heartbeat_ms=500, bootstrap=address)
    labels = {"kafka-python": "kp", "aiokafka": "aio", "confluent": "rdk"}
    consumers = [ctx.consumer(c, labels[c], group, ["rg"], **kw) for c in PY_CLIENTS]
    prods = [ctx.producer("confluent", "producer-0", ["rg"], 600, "rg-0", rate=600, bootstrap=address)]
    ctx.wait_done(prods[0], 60)
    ctx.wait_consumed(consumers, [(t, k) for t, k, _, _ in ctx.produced(prods)], 60)
    gen = ctx.wait_stable(consumers, all_parts, 40)
    owned = {p.label: ctx.owned(p) for p in consumers}
    ctx.note("stable in generation %s: %s" % (gen, owned))
    for i, how in enumerate(("SIGTERM", "SIGKILL"), start=1):
        ctx.sleep(1.0)
        marks = {p.label: len(p.snapshot()) for p in consumers}
        committed = fetch_committed(ctx, group, all_parts, address)
        if how == "SIGTERM":
            code, took, killed = broker.stop(15)
            ctx.check(code == 0 and not killed, "the broker on SIGTERM: exit %s%s" % (code, " (killed)" if killed else ""))
        else:
            broker.proc.kill()
            broker.proc.p.wait(ctx.left(15))
        t_down = now()
        broker = ctx.start_broker("rg-broker-%d" % (i + 1), topics, data_dir, listen=address)
        ctx.note("%s: the broker listened again after %.2f s" % (how, now() - t_down))
        after = fetch_committed(ctx, group, all_parts, address)
        ctx.check(after == committed, "%s: committed offsets %s before the restart, %s after" % (how, committed, after))
        prod = ctx.producer("confluent", "producer-%d" % i, ["rg"], 600, "rg-%d" % i, start=600 * i, rate=600,
                            bootstrap=address)
        prods.append(prod)
        ctx.wait_done(prod, 60)
        ctx.wait_consumed(consumers, [(t, k) for t, k, _, _ in ctx.produced([prod])], 60)
        for p in consumers:
            moved = [e for e in p.snapshot()[marks[p.label]:] if e["ev"] in ("assigned", "revoked", "lost")]
            ctx.check(not moved, "%s: member %s saw a rebalance across the restart: %s"
                      % (how, p.label, [(e["ev"], e.get("gen"), e.get("owned")) for e in moved]))
            ctx.check(ctx.owned(p) == owned[p.label], "%s: member %s owns %s, before it owned %s"
                      % (how, p.label, ctx.owned(p), owned[p.label]))
        later = fetch_committed(ctx, group, all_parts, address)
        ctx.check(any(later[tp] > after[tp] for tp in all_parts),
                  "%s: no commit advanced after the restart: %s" % (how, later))
    for p in consumers:
        ctx.stop(p)
    check_final_commits(ctx, consumers, group)
    ctx.run_checker(consumers, prods)
    code, took, killed = broker.stop(15)
    ctx.check(code == 0 and not killed, "the last broker on SIGTERM: exit %s" % code)


# -------------------------------------------------------------------------------------------
# 7b'. --postgres: the broker keeps nothing on its own disk. SIGKILLed under a group of three
#      clients and a producer, it is replaced by a fresh process with nothing but the database
#      URL (no data directory, nothing shared with the first but the address clients know);
#      the group carries on without a rebalance, no record or commit lost

@scenario("postgres-broker-replaced", topics={"pgr": 6, "pgt": 2}, budget=150, own_broker=True, clients=PY_CLIENTS,
          mock_note="the mock keeps no state outside its process")
def postgres_broker_replaced(ctx):
    import pgtemp
    topics = {"pgr": 6, "pgt": 2}
    group = "pgr-group"
    all_parts = parts({"pgr": 6})
    try:
        pg = pgtemp.TempPostgres(os.path.join(ctx.dir, "postgres.log"), timeout=ctx.left(60))
    except pgtemp.PgUnavailable as e:
        raise Failed("PostgreSQL is needed: %s" % e)
    try:
        url = pg.create_database("interop")
        # A SIGKILLed broker's lease must run out before its replacement takes the node id
        # and the coordinator slots over: 3 s here (Kafka's default, 9 s, would only make
        # the scenario wait longer).
        lease = ["--broker-session-timeout-ms", "3000", "--broker-heartbeat-interval-ms", "500"]
        broker = ctx.start_broker("pgr-broker-1", topics, extra=["--postgres", url] + lease)
        # The replacement comes back on the address the clients know (a service address or a
        # DNS name in production). On another port, kafka-python and aiokafka never reach it:
        # they do not go back to their bootstrap list once they know the cluster (tried here:
        # both lost their sessions), while librdkafka does.
        first = spare = bootstrap = broker.address
        kw = dict(session_ms=10000, heartbeat_ms=500, bootstrap=bootstrap)
        labels = {"kafka-python": "kp", "aiokafka": "aio", "confluent": "rdk"}
        consumers = [ctx.consumer(c, labels[c], group, ["pgr"], **kw) for c in PY_CLIENTS]
        prods = [ctx.producer("confluent", "producer-0", ["pgr"], 600, "pgr-0", rate=600, bootstrap=bootstrap)]
        ctx.wait_done(prods[0], 60)
        ctx.wait_consumed(consumers, [(t, k) for t, k, _, _ in ctx.produced(prods)], 60)
        gen = ctx.wait_stable(consumers, all_parts, 40)
        owned = {p.label: ctx.owned(p) for p in consumers}
        ctx.note("stable in generation %s: %s" % (gen, owned))
        ctx.sleep(1.0)
        marks = {p.label: len(p.snapshot()) for p in consumers}
        committed = fetch_committed(ctx, group, all_parts, first)
        # two transactions open when the broker dies: one committed, one aborted by their
        # producers after the replacement (Kafka's coordinator after a move loads them Ongoing)
        txn = TxnAcross(ctx, bootstrap, "pgt", "pgt")
        broker.proc.kill()
        broker.proc.p.wait(ctx.left(15))
        t_down = now()
        broker = ctx.start_broker("pgr-broker-2", topics, listen=spare, extra=["--postgres", url] + lease)
        ctx.note("SIGKILL: a fresh process on the same database listened after %.2f s" % (now() - t_down))
        after = fetch_committed(ctx, group, all_parts, spare)
        ctx.check(after == committed, "committed offsets %s before the replacement, %s after" % (committed, after))
        out = txn.finish()
        for key in ("commit_across", "abort_across", "transaction_after"):
            ctx.check(out.get(key) is None, "%s after the replacement failed: %s" % (key, out.get(key)))
        want = sorted(["kept-%d" % i for i in range(5)] + ["after-%d" % i for i in range(5)])
        ctx.check(out.get("read_committed") == want, "a read_committed consumer read %s, expected %s"
                  % (out.get("read_committed"), want))
        prod = ctx.producer("confluent", "producer-1", ["pgr"], 600, "pgr-1", start=600, rate=600, bootstrap=spare)
        prods.append(prod)
        ctx.wait_done(prod, 60)
        ctx.wait_consumed(consumers, [(t, k) for t, k, _, _ in ctx.produced([prod])], 90)
        for p in consumers:
            moved = [e for e in p.snapshot()[marks[p.label]:] if e["ev"] in ("assigned", "revoked", "lost")]
            ctx.check(not moved, "member %s saw a rebalance across the replacement: %s"
                      % (p.label, [(e["ev"], e.get("gen"), e.get("owned")) for e in moved]))
            ctx.check(ctx.owned(p) == owned[p.label], "member %s owns %s, before it owned %s"
                      % (p.label, ctx.owned(p), owned[p.label]))
        later = fetch_committed(ctx, group, all_parts, spare)
        ctx.check(any(later[tp] > after[tp] for tp in all_parts),
                  "no commit advanced after the replacement: %s" % later)
        for p in consumers:
            ctx.stop(p)
        check_final_commits(ctx, consumers, group)
        ctx.run_checker(consumers, prods)
        code, took, killed = broker.stop(15)
        ctx.check(code == 0 and not killed, "the replacement broker on SIGTERM: exit %s" % code)
    finally:
        pg.stop()


class TxnAcross:
    """interop/workers/txn_across.py: two transactions opened (and their records flushed) before
    the constructor returns; finish() lets the worker commit one, abort the other and read back."""

    def __init__(self, ctx, bootstrap, topic, prefix):
        spec = {"bootstrap": bootstrap, "topic": topic, "prefix": prefix}
        self.ctx = ctx
        self.log = open(os.path.join(ctx.dir, "txn_across.log"), "ab")
        self.p = subprocess.Popen([python_exe(), os.path.join(INTEROP, "workers", "txn_across.py"), json.dumps(spec)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log)
        ready, _, _ = select.select([self.p.stdout], [], [], ctx.left(45))
        line = self.p.stdout.readline() if ready else b""
        if not line.strip():
            self.p.kill()
            raise Failed("the transactional producers did not open their transactions (txn_across.log)")

    def finish(self):
        try:
            stdout, _ = self.p.communicate(b"go\n", timeout=self.ctx.left(90))
        except subprocess.TimeoutExpired:
            self.p.kill()
            raise Failed("the transactional producers did not finish (txn_across.log)")
        finally:
            self.log.close()
        if self.p.returncode != 0:
            raise Failed("txn_across.py exited with %s (txn_across.log)" % self.p.returncode)
        out = json.loads(stdout.decode().strip().splitlines()[-1])
        self.ctx.note("transactions across the replacement: %s" % out)
        return out


# -------------------------------------------------------------------------------------------
# 7b''. --postgres with three brokers: the groups' coordinators and the partitions' leaders
#       are shared out over them; four confluent-kafka consumers read what a producer sends
#       through the partitions' leaders; the group's coordinator is SIGKILLed mid-stream and
#       a survivor carries the group on: no record lost, no commit going back, no partition
#       with two owners in one generation (classic) or epoch (consumer protocol)

def coordinator_at(ctx, address, group):
    """FindCoordinator v0 at one broker: (error, node id, "HOST:PORT")."""
    host, port = kproto.split_hostport(address)
    c = kproto.Conn(host, port, timeout=ctx.left(10))
    try:
        err, node, chost, cport = c.find_coordinator(group)
    finally:
        c.close()
    return err, node, "%s:%d" % (chost, cport)


SESSION_EXPIRED = re.compile(r'^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+)Z .*member removed from the consumer group '
                             r'group="([^"]*)" member="([^"]*)" .*why="session expired"')


def session_expiries(ctx, brokers, consumers):
    """{(group, label): [time, ...]} when a broker's coordinator removed a member of that label
    because its session expired, read from the brokers' logs (UTC wall clock) and put on the
    events' clock (CLOCK_MONOTONIC)."""
    import datetime
    label_of = {}
    for m in ctx.members(consumers):
        for ev in m.events:
            if ev.get("mid"):
                label_of[ev["mid"]] = m.label
    to_mono = time.time() - now()
    out = {}
    for b in brokers:
        with open(b.log_path, errors="replace") as f:
            for line in f:
                hit = SESSION_EXPIRED.match(line)
                if not hit or hit.group(3) not in label_of:
                    continue
                wall = datetime.datetime.strptime(hit.group(1)[:26], "%Y-%m-%dT%H:%M:%S.%f")
                t = wall.replace(tzinfo=datetime.timezone.utc).timestamp() - to_mono
                out.setdefault((hit.group(2), label_of[hit.group(3)]), []).append(t)
    return out


def three_brokers(ctx, protocol):
    import pgtemp
    topic, group = "p3%s" % protocol[:3], "p3-%s" % protocol
    topics = {topic: 12}
    all_parts = parts(topics)
    try:
        pg = pgtemp.TempPostgres(os.path.join(ctx.dir, "postgres.log"), timeout=ctx.left(60))
    except pgtemp.PgUnavailable as e:
        raise Failed("PostgreSQL is needed: %s" % e)
    try:
        url = pg.create_database("three")
        lease = ["--broker-session-timeout-ms", "3000", "--broker-heartbeat-interval-ms", "500"]
        brokers = {n: ctx.start_broker("p3-broker-%d" % n, topics,
                                       extra=["--postgres", url, "--node-id", str(n)] + lease)
                   for n in (1, 2, 3)}
        bootstrap = ",".join(b.address for b in brokers.values())
        def agreed():
            """The coordinator every broker names, once they agree (slots move while the
            brokers share them out: a new broker gets its share within two heartbeats)."""
            deadline = now() + 20
            while True:
                answers = {coordinator_at(ctx, b.address, group)[:2] for b in brokers.values()}
                if len(answers) == 1 and next(iter(answers))[0] == 0:
                    return next(iter(answers))[1]
                if now() > deadline:
                    raise Failed("the brokers never agreed on the coordinator of %s: %s" % (group, answers))
                ctx.sleep(0.2)

        def committed(address):
            """fetch_committed, again while the group's slot moves between live brokers (for up to
            a heartbeat interval between one's release and the other's claim no broker owns it:
            COORDINATOR_NOT_AVAILABLE, or NOT_COORDINATOR from a broker that has not seen the
            move yet)."""
            deadline = now() + 20
            while True:
                try:
                    return fetch_committed(ctx, group, all_parts, address)
                except Failed:
                    if now() > deadline:
                        raise
                ctx.sleep(0.1)

        ctx.sleep(1.5)
        ctx.note("the three brokers agree: node %d coordinates %s" % (agreed(), group))
        if protocol == "consumer":
            kw = dict(group_protocol="consumer", bootstrap=bootstrap)
        else:
            kw = dict(session_ms=10000, heartbeat_ms=500, bootstrap=bootstrap)
        consumers = [ctx.consumer("confluent", "p3-%d" % i, group, [topic], **kw) for i in range(4)]
        prod = ctx.producer("confluent", "producer", [topic], 5000, "p3", rate=400, bootstrap=bootstrap)
        gen = ctx.wait_stable(consumers, all_parts, 40, same_generation=(protocol == "classic"))
        ctx.note("stable (%s %s): %s" % ("generation" if protocol == "classic" else "epoch", gen,
                                         {p.label: ctx.owned(p) for p in consumers}))
        ctx.sleep(1.0)
        before = committed(bootstrap.split(",")[0])
        node = agreed()
        victim = brokers.pop(node)
        every_broker = [victim] + list(brokers.values())
        victim.proc.kill()
        victim.proc.p.wait(ctx.left(15))
        t_down = now()
        survivor = next(iter(brokers.values())).address
        while True:
            err, moved_to, _ = coordinator_at(ctx, survivor, group)
            if err == 0 and moved_to != node:
                break
            if now() - t_down > 20:
                raise Failed("no survivor took %s over within 20 s (last answer: error %d, node %d)"
                             % (group, err, moved_to))
            ctx.sleep(0.05)
        ctx.note("SIGKILL of node %d: node %d coordinates %s after %.2f s (lease 3 s)"
                 % (node, moved_to, group, now() - t_down))
        after = committed(survivor)
        back = {tp: (before[tp], after[tp]) for tp in all_parts if after[tp] < before[tp]}
        ctx.check(not back, "committed offsets went back across the move: %s" % back)
        ctx.wait_done(prod, 90)
        ctx.wait_consumed(consumers, [(t, k) for t, k, _, _ in ctx.produced([prod])], 90)

        # The zombie: the group's coordinator is paused (SIGSTOP) past its lease while a
        # producer and the group go on; the other broker takes the group over; the paused one
        # is resumed with whatever the clients had sent it. Nothing it writes may land: the
        # committed offsets the database holds at the end are the consumers' last commits.
        node = agreed()
        zombie = brokers[node]
        os.kill(zombie.pid, signal.SIGSTOP)
        t_stop = now()
        try:
            live = [b.address for n, b in brokers.items() if n != node]
            prod2 = ctx.producer("confluent", "producer-2", [topic], 1200, "p3z", rate=400,
                                 bootstrap=",".join(live))
            while True:
                err, moved_to, _ = coordinator_at(ctx, live[0], group)
                if err == 0 and moved_to != node:
                    break
                if now() - t_stop > 20:
                    raise Failed("no broker took %s over from the paused one within 20 s" % group)
                ctx.sleep(0.05)
            ctx.note("SIGSTOP of node %d: node %d coordinates %s after %.2f s"
                     % (node, moved_to, group, now() - t_stop))
            ctx.sleep(2.0)
        finally:
            os.kill(zombie.pid, signal.SIGCONT)
        ctx.wait_done(prod2, 90)
        ctx.wait_consumed(consumers, [(t, k) for t, k, _, _ in ctx.produced([prod2])], 90)
        # A member the coordinator fenced (its session expired) that never heard of it: with
        # group.protocol=consumer, librdkafka 2.16 whose commit was in flight at the paused
        # broker may lose count of it when the coordinator moves: it then loops on "marking the
        # coordinator dead", sends no heartbeat again, never learns it was fenced, and its close
        # waits for that commit. Kafka's coordinator meets the same client (interop/README.md).
        # Such a member is excused its close, and the commits of what it still held (its
        # commits cannot reach the coordinator); its holdings end at the fencing (checker.py).
        def unheard(p):
            times = session_expiries(ctx, every_broker, [p]).get((group, p.label), [])
            return bool(times) and not any(e["ev"] == "lost" and e["t"] >= min(times) for e in p.snapshot())

        def left_held():
            """What the members that never heard of their fencing still hold."""
            stuck = [m for m, p in zip(ctx.members(consumers), consumers) if unheard(p)]
            return {(t, part) for m in stuck for t, part, _s, _e, how in checker.holdings(m)
                    if how in ("closed", "end")}

        # Every record was read; the group settles before it stops: the commits reach the ends
        # read (a member told it was fenced read again from the last commit), but for what a
        # member that never heard still holds. Bounded: the final check says what is missing.
        ends, deadline = end_offsets(consumers), now() + 30
        while now() < deadline:
            at = committed(live[0])
            skip = left_held()
            if all(at.get(tp, -1) >= o for tp, o in ends.items() if tp not in skip):
                break
            ctx.sleep(0.5)
        for p in consumers:
            ctx.stop(p, may_hang=lambda p=p: "its session expired at the coordinator and it never heard"
                     if unheard(p) else None)
        fenced = session_expiries(ctx, every_broker, consumers)
        if fenced:
            ctx.note("sessions expired at the coordinator: %s" % sorted(fenced))
        commits = check_final_commits(ctx, consumers, group, skip=left_held())
        held = committed(live[0])
        differ = {tp: (commits.get(tp), held[tp]) for tp in all_parts if held[tp] != commits.get(tp, -1)}
        ctx.check(not differ, "the database holds other offsets than the consumers' last commits "
                  "(a commit of the resumed broker landed?), {partition: (last commit, held)}: %s" % differ)
        # A member whose session expired at the coordinator holds nothing from then on, in
        # Kafka's eyes, whether or not its client heard (see checker.py: librdkafka with
        # group.protocol=consumer may never hear, after a commit stuck at the paused broker).
        ctx.run_checker(consumers, [prod, prod2], fenced=fenced)
        for name, b in brokers.items():
            code, took, killed = b.stop(15)
            ctx.check(code == 0 and not killed, "node %d on SIGTERM: exit %s" % (name, code))
    finally:
        pg.stop()


@scenario("postgres-three-brokers-classic", budget=150, own_broker=True, clients=("confluent",),
          mock_note="the mock keeps no state outside its process")
def postgres_three_brokers_classic(ctx):
    three_brokers(ctx, "classic")


@scenario("postgres-three-brokers-consumer", budget=150, own_broker=True, clients=("confluent",),
          mock_note="the mock keeps no state outside its process")
def postgres_three_brokers_consumer(ctx):
    three_brokers(ctx, "consumer")


# -------------------------------------------------------------------------------------------
# 7b'. group faults from the control port (issue 44): a member kicked out of its group rejoins
#      and consumes again; a paused coordinator (COORDINATOR_NOT_AVAILABLE) loses nothing

def member_id_of(proc):
    """The member id the worker last reported (its `generation`/`assigned` events)."""
    mids = [e["mid"] for e in proc.snapshot() if e.get("mid")]
    return mids[-1] if mids else None


@scenario("group-faults-confluent", topics={"gf": 4}, budget=150, own_broker=True, clients=("confluent",),
          mock_note="the mock has no kick; a paused coordinator is its rd_kafka_mock_coordinator_set to a "
                    "broker that is down")
def group_faults_confluent(ctx):
    from control import Control
    if ctx.mock:
        ctx.note("the mock has no kick and keeps no record of requests: group-faults-confluent-steps "
                 "meets its faults with confluent-kafka")
        return
    topic, group = "gf", "gf-group"
    all_parts = parts({topic: 4})
    b = ctx.start_broker("broker", {topic: 4}, extra=["--control-listen", "127.0.0.1:0"])
    control = Control(b.control(ctx.left(10)))
    try:
        kw = dict(session_ms=10000, heartbeat_ms=500, bootstrap=b.address)
        prod = ctx.producer("confluent", "producer", [topic], 4000, "gf", rate=150, bootstrap=b.address)
        a = ctx.consumer("confluent", "gf-a", group, [topic], **kw)
        c = ctx.consumer("confluent", "gf-b", group, [topic], **kw)
        ctx.wait_stable([a, c], all_parts, 40)
        ctx.require(ctx.owned(a) and ctx.owned(c), "both members hold partitions: %s, %s"
                    % (ctx.owned(a), ctx.owned(c)))
        ctx.sleep(1.0)
        # 1. kick a: its next heartbeat is UNKNOWN_MEMBER_ID; it gives up its partitions (lost or
        #    revoked), joins again with a new member id, is assigned and consumes again
        old_mid = member_id_of(a)
        ctx.require(old_mid, "member a reported no member id")
        mark = len(a.snapshot())
        seen_from = control.requests(since=0)["next"]
        t_kick = now()
        control.kick(group, old_mid)
        gave_up = ctx.wait_for(a, lambda e: e["ev"] in ("lost", "revoked"), 20,
                               "a lost/revoked callback after the kick", start=mark)
        back = ctx.wait_for(a, lambda e: e["ev"] == "assigned" and e["owned"], 30,
                            "a new assignment after the kick", start=mark)
        ctx.note("kicked: a's %s callback %.2f s after the kick, assigned again (%s) after %.2f s"
                 % (gave_up["ev"], gave_up["t"] - t_kick, back["owned"], back["t"] - t_kick))
        ctx.check(back.get("mid") and back["mid"] != old_mid,
                  "a rejoined with member id %s, before the kick %s" % (back.get("mid"), old_mid))
        # the kicked member's next group request meets UNKNOWN_MEMBER_ID (its Heartbeat, or its
        # OffsetCommit, per partition, when that comes first: the record keeps top-level codes
        # only) and it joins again as a new member (JoinGroup without a member id: 79)
        seen = [(r["api"], r["error_code"]) for r in control.requests(since=seen_from)["requests"]
                if r["group_id"] == group and r["client_id"] == "gf-a"]
        ctx.note("gf-a's group requests after the kick: %s" % seen[:8])
        ctx.check(("JoinGroup", 79) in seen, "gf-a did not join again as a new member after the kick: %s" % seen)
        ctx.wait_stable([a, c], all_parts, 40)
        ctx.wait_for(a, lambda e: e["ev"] == "recs" and e["t"] > back["t"], 30, "records read after the rejoin",
                     start=mark)
        # 2. pause the group's coordinator for 3 s (under the 10 s session): the clients meet
        #    COORDINATOR_NOT_AVAILABLE, and after the resume the group goes on as it was
        ctx.sleep(1.0)
        gen = ctx.wait_stable([a, c], all_parts, 10)
        marks = {p.label: len(p.snapshot()) for p in (a, c)}
        seen_from = control.requests(since=0)["next"]
        ctx.check(control.pause(group), "the coordinator was already paused")
        ctx.sleep(3.0)
        ctx.check(control.resume(group), "the coordinator was not paused")
        t_resume = now()
        refused = [r for r in control.requests(since=seen_from)["requests"]
                   if r["group_id"] == group and r["outcome"] == "failed" and r["error_code"] == 15]
        ctx.note("paused 3 s: %d requests answered COORDINATOR_NOT_AVAILABLE (%s)"
                 % (len(refused), sorted({r["api"] for r in refused})))
        ctx.check(refused, "no request of %s met the paused coordinator" % group)
        for p in (a, c):
            ctx.wait_for(p, lambda e: e["ev"] == "recs" and e["t"] > t_resume, 30,
                         "%s reads after the resume" % p.label, start=marks[p.label])
        ctx.check(ctx.wait_stable([a, c], all_parts, 10) == gen,
                  "the pause changed the generation: before %s" % gen)
        ctx.wait_done(prod, 60)
        ctx.wait_consumed([a, c], [(t, k) for t, k, _, _ in ctx.produced([prod])], 60)
        ctx.stop(a)
        ctx.stop(c)
        ctx.run_checker([a, c], [prod])
    finally:
        control.close()


# -------------------------------------------------------------------------------------------
# 7b''. a manual clock (issue 44): a SIGKILLed member keeps its session while real time runs
#       past it, and loses it the moment the test advances the broker's clock; the survivor
#       then takes its partitions, with each client

def manual_clock(client):
    topic = group = "mc-%s" % client

    @scenario("manual-clock-%s" % client, topics={topic: 4}, budget=120, own_broker=True, clients=(client,),
              mock_note="the mock has no clock a test moves: its sessions run on real time")
    def run(ctx):
        from control import Control
        if ctx.mock:
            ctx.note("the mock has no clock a test moves: nothing to run against it")
            return
        all_parts = parts({topic: 4})
        b = ctx.start_broker("broker", {topic: 4}, extra=["--control-listen", "127.0.0.1:0", "--manual-clock"])
        control = Control(b.control(ctx.left(10)))
        try:
            kw = dict(session_ms=SESSION_MS, heartbeat_ms=HEARTBEAT_MS, bootstrap=b.address)
            prod = ctx.producer("confluent", "producer", [topic], 2000, "mc-" + client, rate=200,
                                bootstrap=b.address)
            s = ctx.consumer(client, "member-s", group, [topic], **kw)
            ctx.wait_assigned(s, 40)
            k = ctx.consumer(client, "member-k", group, [topic], **kw)
            ctx.wait_stable([s, k], all_parts, 40)
            ctx.require(ctx.owned(k), "member-k got no partition")
            ctx.sleep(1.0)
            killed = member_id_of(k)
            mark = len(s.snapshot())
            k.kill()
            # Real time runs twice past the session: the broker's clock did not move, so
            # nothing expires and the survivor's assignment stays as it was.
            ctx.sleep(2 * SESSION_MS / 1000)
            moved = [e["ev"] for e in s.snapshot()[mark:] if e["ev"] in ("assigned", "revoked", "lost")]
            ctx.check(not moved, "the survivor saw %s while the clock stood still: a session expired "
                                 "on real time" % moved)
            # Every session was last renewed at the same (frozen) instant: move to just short of
            # it, let the survivor heartbeat on the new time, then past the killed one's deadline.
            first = control.advance_clock(SESSION_MS - 1000)
            ctx.check(not first["expired"], "expired short of the session: %s" % first["expired"])
            ctx.sleep(2.0)
            t_advance = now()
            second = control.advance_clock(1001)
            expired = [(e["group"], e["member"]) for e in second["expired"]]
            ctx.note("advance_clock(%d) then (1001): expired %s" % (SESSION_MS - 1000, expired))
            ctx.check([g for g, _ in expired] == [group],
                      "one member of %s expired at the killed member's deadline: %s" % (group, expired))
            ctx.check(killed is None or (group, killed) in expired,
                      "the expired member is not the killed one (%s): %s" % (killed, expired))
            ev = ctx.wait_for(s, lambda e: e["ev"] == "assigned" and sorted(map(tuple, e["owned"])) == all_parts,
                              30, "the killed member's partitions", start=mark)
            ctx.note("the survivor held every partition %.2f s after the advance" % (ev["t"] - t_advance))
            ctx.wait_done(prod, 60)
            ctx.wait_consumed([s, k], [(t, key) for t, key, _, _ in ctx.produced([prod])], 60)
            ctx.stop(s)
            ctx.run_checker([s, k], [prod])
        finally:
            control.close()
    return run


for _c in ("confluent", "kafka-python", "kafkajs"):
    manual_clock(_c)


# -------------------------------------------------------------------------------------------
# 7c. Kafka's consumer group protocol (KIP-848, group.protocol=consumer) with confluent-kafka:
#     the broker assigns; a balanced split, a member that closes, a fourth that joins

@scenario("consumer-protocol-group", topics={"kip848": 12}, budget=120, clients=("confluent",),
          mock_note="the mock serves ConsumerGroupHeartbeat with its own 'simple range' assignment")
def consumer_protocol_group(ctx):
    topic, group = "kip848", "kip848"
    all_parts = parts({topic: 12})
    kw = dict(group_protocol="consumer")
    members = [ctx.consumer("confluent", "k848-%d" % i, group, [topic], **kw) for i in range(3)]
    prod = ctx.producer("confluent", "producer", [topic], 3000, "k848", rate=600)
    gen = ctx.wait_stable(members, all_parts, 40, same_generation=False)
    sizes = sorted(len(ctx.owned(p)) for p in members)
    ctx.note("stable (epoch %s): %s" % (gen, {p.label: ctx.owned(p) for p in members}))
    ctx.check(sizes == [4, 4, 4], "the uniform assignor split 12 partitions over 3 members as %s" % sizes)
    # a fourth member: only the partitions that move are revoked (3, the least for 4 x 3)
    marks = {p.label: len(p.snapshot()) for p in members}
    d = ctx.consumer("confluent", "k848-3", group, [topic], **kw)
    ctx.wait_stable(members + [d], all_parts, 40, same_generation=False)
    revoked = sum(len(e["removed"]) for p in members for e in p.snapshot()[marks[p.label]:] if e["ev"] == "revoked")
    sizes = sorted(len(ctx.owned(p)) for p in members + [d])
    ctx.note("a fourth member joined: %d partitions revoked, split %s" % (revoked, sizes))
    ctx.check(sizes == [3, 3, 3, 3], "after the fourth joined the split is %s" % sizes)
    ctx.check(revoked == 3, "%d partitions were revoked for the fourth member; 3 is what must move" % revoked)
    # a member that closes: its partitions move well under the session timeout
    mark = {p.label: len(p.snapshot()) for p in members[1:] + [d]}
    t_close = now()
    ctx.stop(members[0])
    rest = members[1:] + [d]
    ctx.wait_stable(rest, all_parts, 30, same_generation=False)
    moved = now() - t_close
    ctx.note("after a close the partitions moved in %.2f s (session timeout %.1f s)" % (moved, 6.0))
    ctx.check(moved < 4.0, "partitions moved %.2f s after a close: did the member leave?" % moved)
    ctx.wait_done(prod, 60)
    ctx.wait_consumed(members + [d], [(t, k) for t, k, _, _ in ctx.produced([prod])], 60)
    del mark
    for p in rest:
        ctx.stop(p)
    check_final_commits(ctx, members + [d], group)
    ctx.run_checker(members + [d], [prod])


# -------------------------------------------------------------------------------------------
# 7d. the consumer group protocol: a SIGKILLed member's partitions move after the session
#     timeout; a static member restarted takes its partitions back, the others revoke nothing;
#     members with different subscriptions

@scenario("consumer-protocol-failover", topics={"k848a": 4, "k848b": 2}, budget=120, clients=("confluent",),
          mock_note="the mock's consumer protocol has its own session timeout and assignment")
def consumer_protocol_failover(ctx):
    from suite import CONSUMER_SESSION_MS
    group = "k848-failover"
    both = parts({"k848a": 4, "k848b": 2})
    kw = dict(group_protocol="consumer")
    # different subscriptions: a and b read k848a only, c reads both
    a = ctx.consumer("confluent", "k848f-a", group, ["k848a"], instance_id="static-a", **kw)
    b = ctx.consumer("confluent", "k848f-b", group, ["k848a"], **kw)
    c = ctx.consumer("confluent", "k848f-c", group, ["k848a", "k848b"], **kw)
    prod = ctx.producer("confluent", "producer", ["k848a", "k848b"], 2000, "k848f", rate=400)
    ctx.wait_stable([a, b, c], both, 40, same_generation=False)
    owned = {p.label: ctx.owned(p) for p in (a, b, c)}
    ctx.note("stable: %s" % owned)
    ctx.check(not any(t == "k848b" for p in (a, b) for t, _ in ctx.owned(p)),
              "a member not subscribed to k848b owns some of it: %s" % owned)
    ctx.check(set(ctx.owned(c)) >= {("k848b", 0), ("k848b", 1)},
              "k848b is c's alone (the only subscriber), c owns %s" % ctx.owned(c))
    # a static member closes and comes back within the session: the same partitions, and the
    # others revoke nothing
    ctx.sleep(1.0)
    marks = {p.label: len(p.snapshot()) for p in (b, c)}
    before_a = ctx.owned(a)
    ctx.stop(a)
    a2 = ctx.consumer("confluent", "k848f-a", group, ["k848a"], instance_id="static-a", **kw)
    ctx.wait_stable([a2, b, c], both, 30, same_generation=False)
    ctx.check(ctx.owned(a2) == before_a, "the restarted static member got %s, before it had %s"
              % (ctx.owned(a2), before_a))
    for p in (b, c):
        moved = [e for e in p.snapshot()[marks[p.label]:] if e["ev"] in ("revoked", "lost")]
        ctx.check(not moved, "%s revoked partitions while the static member restarted: %s" % (p.label, moved))
    # SIGKILL: nobody tells the coordinator; the partitions move once the session expires
    ctx.sleep(1.0)
    mark = len(c.snapshot())
    b.kill()
    t_kill = b.killed_at
    ev = ctx.wait_for(c, lambda e: e["ev"] == "assigned", CONSUMER_SESSION_MS / 1000 + 15,
                      "the killed member's partitions", start=mark)
    ctx.wait_stable([a2, c], both, CONSUMER_SESSION_MS / 1000 + 15, same_generation=False)
    moved = ev["t"] - t_kill
    ctx.note("after SIGKILL the partitions moved in %.2f s (session timeout %.1f s)" % (moved, CONSUMER_SESSION_MS / 1000))
    ctx.check(moved >= (CONSUMER_SESSION_MS - 1000) / 1000,
              "partitions moved %.2f s after SIGKILL, before the session could expire" % moved)
    ctx.wait_done(prod, 60)
    ctx.wait_consumed([a, a2, b, c], [(t, k) for t, k, _, _ in ctx.produced([prod])], 60)
    for p in (a2, c):
        ctx.stop(p)
    ctx.run_checker([a, a2, b, c], [prod])


# -------------------------------------------------------------------------------------------
# 7e. the consumer group protocol: a regular-expression subscription (SubscribedTopicRegex)
#     picks up a topic created later; a topic it does not match stays out

@scenario("consumer-protocol-regex", topics={"k848r-a": 3, "k848x": 2}, budget=90, clients=("confluent",),
          mock_note="the mock serves the regex subscription but closes the connection on CreateTopics v2, "
                    "so no topic can be created later")
def consumer_protocol_regex(ctx):
    group = "k848-regex"
    kw = dict(group_protocol="consumer")
    # librdkafka reads a topic starting with ^ as a regular expression, and with
    # group.protocol=consumer sends it to the coordinator as SubscribedTopicRegex.
    members = [ctx.consumer("confluent", "k848r-%d" % i, group, ["^k848r-.*"], **kw) for i in range(2)]
    first = parts({"k848r-a": 3})
    ctx.wait_stable(members, first, 40, same_generation=False)
    ctx.note("stable on the matching topic: %s" % {p.label: ctx.owned(p) for p in members})
    host, port = kproto.split_hostport(ctx.bootstrap)
    conn = kproto.Conn(host, port, timeout=ctx.left(10))
    try:
        created = conn.create_topics({"k848r-b": 2, "k848y": 1})
    finally:
        conn.close()
    ctx.check(all(err == 0 for err, _ in created.values()), "CreateTopics: %s" % created)
    t_created = now()
    both = parts({"k848r-a": 3, "k848r-b": 2})
    # Matched again within 10 s (Kafka's REGEX_BATCH_REFRESH_INTERVAL_MS), then a heartbeat.
    ctx.wait_stable(members, both, 40, same_generation=False)
    ctx.note("the topic created later joined the subscription %.2f s after it was created: %s"
             % (now() - t_created, {p.label: ctx.owned(p) for p in members}))
    prod = ctx.producer("confluent", "producer", ["k848r-a", "k848r-b"], 1000, "k848r", rate=500)
    ctx.wait_done(prod, 60)
    ctx.wait_consumed(members, [(t, k) for t, k, _, _ in ctx.produced([prod])], 60)
    held = {t for p in members for t, _ in ctx.owned(p)}
    ctx.check(held == {"k848r-a", "k848r-b"}, "the members hold %s; k848x and k848y do not match" % sorted(held))
    for p in members:
        ctx.stop(p)
    check_final_commits(ctx, members, group)
    ctx.run_checker(members, [prod])


# -------------------------------------------------------------------------------------------
# 7f. the consumer group protocol: a stale commit refused. A transactional commit with group
#     metadata from before the member's epoch moved on is STALE_MEMBER_EPOCH and lands nothing
#     (Kafka 4's ConsumerGroup.validateOffsetCommit); with the current metadata it lands.

@scenario("consumer-protocol-stale-commit", topics={"k848s": 4}, budget=60, clients=("confluent",),
          mock_note="the mock's TxnOffsetCommit accepts a stale member epoch, and its committed "
                    "transactional offsets are not read back")
def consumer_protocol_stale_commit(ctx):
    spec = ctx.spec(topic="k848s", group="k848-stale", txn_id="k848-stale-txn")
    out = run_worker(ctx, [python_exe(), os.path.join(INTEROP, "workers", "stale_commit.py"), json.dumps(spec)],
                     "stale_commit", "stale commit", 50)
    expect = expecter(ctx, out)
    expect("epoch_moved", True)
    expect("stale", "STALE_MEMBER_EPOCH")
    expect("stale_requires_abort", True)
    expect("committed_after_stale", out.get("committed_before"))
    expect("current", "ok")
    expect("committed_after_current", 7)


# -------------------------------------------------------------------------------------------
# 7g. the consumer group protocol with @confluentinc/kafka-javascript (its KafkaJS API,
#     librdkafka inside) in one group with confluent-kafka: a balanced split, a member that
#     joins late takes only what must move, a member that closes hands its partitions on

@scenario("consumer-protocol-ckjs", topics={"k848j": 8}, budget=120, clients=("ckjs", "confluent"),
          mock_note="the mock's 'simple range' assignment moves 3 partitions to a third member of 8, "
                    "where 2 must move")
def consumer_protocol_ckjs(ctx):
    topic, group = "k848j", "k848-ckjs"
    all_parts = parts({topic: 8})
    kw = dict(group_protocol="consumer")
    a = ctx.consumer("ckjs", "k848j-a", group, [topic], **kw)
    b = ctx.consumer("ckjs", "k848j-b", group, [topic], **kw)
    prod = ctx.producer("confluent", "producer", [topic], 2400, "k848j", rate=500)
    ctx.wait_stable([a, b], all_parts, 40, same_generation=False)
    sizes = sorted(len(ctx.owned(p)) for p in (a, b))
    ctx.note("stable: %s" % {p.label: ctx.owned(p) for p in (a, b)})
    ctx.check(sizes == [4, 4], "8 partitions over 2 @confluentinc/kafka-javascript members split as %s" % sizes)
    # a confluent-kafka member joins: 2 of the 8 must move to it, and nothing else is revoked
    marks = {p.label: len(p.snapshot()) for p in (a, b)}
    c = ctx.consumer("confluent", "k848j-c", group, [topic], **kw)
    ctx.wait_stable([a, b, c], all_parts, 40, same_generation=False)
    revoked = sum(len(e["removed"]) for p in (a, b) for e in p.snapshot()[marks[p.label]:] if e["ev"] == "revoked")
    sizes = sorted(len(ctx.owned(p)) for p in (a, b, c))
    ctx.note("a confluent-kafka member joined: %d partitions revoked, split %s" % (revoked, sizes))
    ctx.check(sizes == [2, 3, 3], "after the third joined the split is %s" % sizes)
    ctx.check(revoked == 2, "%d partitions were revoked for the third member; 2 is what must move" % revoked)
    # a @confluentinc/kafka-javascript member closes: its partitions move well under the session
    t_close = now()
    ctx.stop(a)
    ctx.wait_stable([b, c], all_parts, 30, same_generation=False)
    moved = now() - t_close
    ctx.note("after a close the partitions moved in %.2f s" % moved)
    ctx.check(moved < 4.0, "partitions moved %.2f s after a close: did the member leave?" % moved)
    ctx.check(sorted(len(ctx.owned(p)) for p in (b, c)) == [4, 4],
              "after the close the split is %s" % {p.label: ctx.owned(p) for p in (b, c)})
    ctx.wait_done(prod, 60)
    ctx.wait_consumed([a, b, c], [(t, k) for t, k, _, _ in ctx.produced([prod])], 60)
    for p in (b, c):
        ctx.stop(p)
    check_final_commits(ctx, [a, b, c], group)
    ctx.run_checker([a, b, c], [prod])


# -------------------------------------------------------------------------------------------
# 8. kafka-python's admin client: list and describe groups, their committed offsets

@scenario("admin-kafka-python", topics={"adm": 4}, budget=90,
          mock_note="the mock implements neither ListGroups nor DescribeGroups")
def admin(ctx):
    topic, group = "adm", "adm-group"
    prod = ctx.producer("confluent", "producer", [topic], 400, "adm")
    ctx.wait_done(prod, 60)
    cs = [ctx.consumer("kafka-python", "adm-%d" % i, group, [topic], session_ms=10000, heartbeat_ms=500)
          for i in (1, 2)]
    ctx.wait_consumed(cs, [(t, k) for t, k, _, _ in ctx.produced([prod])], 60)
    ctx.wait_stable(cs, parts({topic: 4}), 30)
    # the consumers are still running (the admin client needs a Stable group): the commit of
    # the last batch may still be in flight when its records are seen
    ctx.wait_commits_reported(cs, 10)
    commits = check_final_commits(ctx, cs, group)
    out = run_admin(ctx, group)
    ctx.check(any(g == group for g, _ in out["groups"]), "list_consumer_groups: %s" % out["groups"])
    d = out["describe"]
    ctx.check(d.get("state") == "Stable", "describe_consumer_groups state: %s" % d.get("state"))
    ctx.check(d.get("protocol_type") == "consumer" and d.get("protocol") == "range",
              "protocol type/name: %s/%s" % (d.get("protocol_type"), d.get("protocol")))
    mids = {p.label: ctx.last_assignment(p)["mid"] for p in cs}
    described = {m["member_id"]: sorted(map(tuple, m["assignment"])) for m in d.get("members", [])}
    ctx.check(set(described) == set(mids.values()), "described members %s, consumers are %s" % (sorted(described), mids))
    for p in cs:
        mid = mids[p.label]
        if mid in described:
            ctx.check(described[mid] == ctx.owned(p), "%s: described assignment %s, consumer holds %s"
                      % (p.label, described[mid], ctx.owned(p)))
    offsets = {(t, p): o for t, p, o in out["offsets"]}
    ctx.check(offsets == commits, "list_consumer_group_offsets %s, consumers committed %s" % (offsets, commits))
    for p in cs:
        ctx.stop(p)
    out = run_admin(ctx, group)
    ctx.check(out["describe"].get("state") == "Empty", "after both closed, state %s" % out["describe"].get("state"))
    ctx.check({(t, p): o for t, p, o in out["offsets"]} == commits, "offsets after close: %s" % out["offsets"])
    ctx.run_checker(cs, [prod])


def run_admin(ctx, group):
    spec = ctx.spec(group=group)
    r = subprocess.run([python_exe(), os.path.join(INTEROP, "workers", "admin.py"), json.dumps(spec)],
                       capture_output=True, timeout=ctx.left(60))
    with open(os.path.join(ctx.dir, "admin.log"), "ab") as f:
        f.write(r.stderr)
    if r.returncode != 0:
        raise Failed("admin client failed (exit %d): %s" % (r.returncode, r.stderr.decode(errors="replace").strip().splitlines()[-1:]))
    return json.loads(r.stdout)


# -------------------------------------------------------------------------------------------
# 9. garbage and oversized frames next to a consuming group

@scenario("bad-frames", topics={"bad": 4}, budget=90,
          mock_note="the mock has no --max-frame-bytes: it waits for the body of a frame just over 16 MiB")
def bad_frames(ctx):
    topic, group = "bad", "bad-group"
    kw = dict(session_ms=10000, heartbeat_ms=500)
    prod = ctx.producer("confluent", "producer", [topic], 2500, "bad", rate=300)
    cs = [ctx.consumer("confluent", "bad-%d" % i, group, [topic], **kw) for i in (1, 2)]
    gen = ctx.wait_stable(cs, parts({topic: 4}), 40)
    marks = [len(p.snapshot()) for p in cs]
    host, port = kproto.split_hostport(ctx.bootstrap)
    rnd = random.Random(7)
    cases = [
        ("unknown api key", struct.pack(">i", 64) + struct.pack(">hhi", 0x7ABC, 0, 1) + bytes(rnd.getrandbits(8) for _ in range(56))),
        ("random bytes", struct.pack(">i", 200) + bytes(rnd.getrandbits(8) for _ in range(200))),
        ("ApiVersions whose client id runs past the frame",
         struct.pack(">i", 14) + struct.pack(">hhi", 18, 0, 1) + struct.pack(">h", 500) + b"abcd"),
        ("frame one byte over --max-frame-bytes (16 MiB + 1 declared)", struct.pack(">i", (16 << 20) + 1) + b"\0" * 64),
        ("oversized frame (1 GiB declared)", struct.pack(">i", 1 << 30) + b"\0" * 64),
        ("negative frame size", struct.pack(">i", -5) + b"\0" * 16),
    ]
    for what, data in cases:
        s = socket.create_connection((host, port), timeout=ctx.left(10))
        closed, how = False, "open"
        try:
            s.sendall(data)
            s.settimeout(ctx.left(5))
            deadline = now() + 5
            while now() < deadline:
                chunk = s.recv(65536)
                if not chunk:
                    closed, how = True, "closed (EOF)"
                    break
                how = "answered %d bytes and stayed open" % len(chunk)
        except socket.timeout:
            how = "still open after 5 s"
        except ConnectionError as e:
            closed, how = True, "closed (%s)" % type(e).__name__
        finally:
            s.close()
        ctx.note("%s: %s" % (what, how))
        ctx.check(closed, "%s: the broker did not close the connection (%s)" % (what, how))
    # the broker still serves
    c = kproto.Conn(host, port, timeout=ctx.left(10))
    try:
        av = c.api_versions()
        ctx.check(18 in av, "ApiVersions after the bad frames: %s" % av)
    finally:
        c.close()
    ctx.sleep(1.5)
    moved = [(p.label, e["ev"]) for p, m in zip(cs, marks) for e in p.snapshot()[m:]
             if e["ev"] in ("assigned", "revoked", "lost")]
    ctx.check(not moved, "the group rebalanced during the bad frames: %s" % moved)
    ctx.wait_done(prod, 60)
    ctx.wait_consumed(cs, [(t, k) for t, k, _, _ in ctx.produced([prod])], 40)
    ctx.check(ctx.wait_stable(cs, parts({topic: 4}), 5) == gen, "the generation changed")
    for p in cs:
        ctx.stop(p)
    ctx.run_checker(cs, [prod])


# -------------------------------------------------------------------------------------------
# 10. compressed batches: every codec in, read back by every Python client

CODECS = ("gzip", "snappy", "lz4", "zstd")


@scenario("compression", topics={"comp-" + c: 2 for c in CODECS}, budget=120)
def compression(ctx):
    producers = []
    for codec in CODECS:
        producers.append(ctx.producer("confluent", "producer-rdk-" + codec, ["comp-" + codec], 300,
                                      "comp-rdk-" + codec, compression=codec, ts_base=TS_BASE))
    producers.append(ctx.producer("kafka-python", "producer-kp-gzip", ["comp-gzip"], 300, "comp-kp-gzip",
                                  compression="gzip", ts_base=TS_BASE))
    producers.append(ctx.producer("kafkajs", "producer-kjs-gzip", ["comp-gzip"], 300, "comp-kjs-gzip",
                                  compression="gzip", ts_base=TS_BASE))
    for p in producers:
        ctx.wait_done(p, 60)
    produced = ctx.produced(producers)
    ctx.require(len(produced) == 300 * len(producers), "acknowledged %d records" % len(produced))
    readers = {"confluent": list(CODECS), "kafka-python": list(CODECS), "aiokafka": list(CODECS), "kafkajs": ["gzip"]}
    consumers = []
    for client, codecs in readers.items():
        consumers.append(ctx.consumer(client, "reader-" + client, "comp-" + client, ["comp-" + c for c in codecs],
                                      full=True))
    for p, (client, codecs) in zip(consumers, readers.items()):
        want = [(t, k) for t, k, _, _ in produced if t in ["comp-" + c for c in codecs]]
        ctx.wait_consumed([p], want, 60, "%s reading %s" % (client, codecs))
    for p in consumers:
        ctx.stop(p)
    for p in consumers:
        problems, n = checker.fidelity(ctx.members([p]), lambda t, k: expected_record(k.rsplit("-", 1)[0])(t, k))
        for pr in problems:
            ctx.fail("fidelity: " + pr)
    for p, (client, codecs) in zip(consumers, readers.items()):
        want = [r for r in produced if r[0] in ["comp-" + c for c in codecs]]
        v, _ = checker.check(want, ctx.members([p]))
        for x in v:
            ctx.fail("checker (%s): %s" % (client, x))


# -------------------------------------------------------------------------------------------
# 11. Kafka's classic group rules that librdkafka's mock does not follow, checked with the
#     requests the clients send (JoinGroup v5, SyncGroup v3, Heartbeat v1, OffsetCommit v2)

MOCK_GROUP_RULES = ("the mock never answers MEMBER_ID_REQUIRED, refuses commits while a rebalance is pending "
                    "(REBALANCE_IN_PROGRESS) and answers a follower's SyncGroup after the leader's with INVALID_REQUEST")


@scenario("group-rules-raw", topics={"rules": 2}, budget=60, mock_note=MOCK_GROUP_RULES)
def group_rules_raw(ctx):
    """Kafka (GroupMetadataManager.classicGroupJoinNewDynamicMember, ClassicGroup.validateOffsetCommit,
    GroupMetadataManager.classicGroupSyncToClassicGroup):
    a dynamic member's first JoinGroup (v4+) gets MEMBER_ID_REQUIRED with its member id
    (<client id>-<uuid>) and nothing changes in the group; a current member's commit is
    accepted while the group is PreparingRebalance; a follower that syncs after the leader
    (group already Stable) gets its assignment."""
    topic, group = "rules", "rules-group"
    host, port = kproto.split_hostport(ctx.bootstrap)
    a = kproto.Conn(host, port, timeout=ctx.left(15), client_id="rules-a")
    b = kproto.Conn(host, port, timeout=ctx.left(15), client_id="rules-b")
    kw = dict(session_ms=6000, topics=(topic,))
    try:
        # 1. MEMBER_ID_REQUIRED for a dynamic member's first JoinGroup v5
        r = a.join(group, **kw)
        ctx.note("a's first JoinGroup: error %s, generation %s, member id %r" % (r["error"], r["generation"], r["member"]))
        ctx.check(r["error"] == 79 and r["generation"] == -1 and (r["member"] or "").startswith("rules-a-"),
                  "a's first JoinGroup v5 (no member id): error %s, generation %s, member id %r; Kafka answers "
                  "MEMBER_ID_REQUIRED (79), generation -1, member id <client id>-<uuid>" % (r["error"], r["generation"], r["member"]))
        if r["error"] == 79:
            r = a.join(group, r["member"], **kw)
        ctx.require(r["error"] == 0 and r["leader"] == r["member"],
                    "a's JoinGroup: error %s, leader %r, member %r" % (r["error"], r["leader"], r["member"]))
        a_id, gen = r["member"], r["generation"]
        err, got = a.sync(group, gen, a_id, {a_id: [(topic, 0), (topic, 1)]})
        ctx.require(err == 0 and got == [(topic, 0), (topic, 1)], "a's SyncGroup: error %s, assignment %s" % (err, got))

        # 2. b joins: the group prepares a rebalance; a, still in generation `gen`, commits.
        #    a's heartbeat says when the group is preparing; b's answer is read when it comes
        #    (Kafka: MEMBER_ID_REQUIRED at once, then b's second JoinGroup waits for the barrier)
        b.send_join(group, **kw)
        b_first = None  # the answer to b's first JoinGroup, once read
        hb = None
        deadline = now() + ctx.left(15)
        while now() < deadline:
            if b_first is None and select.select([b.sock], [], [], 0)[0]:
                b_first = b.join_result()
                if b_first["error"] == 79:
                    b.send_join(group, b_first["member"], **kw)  # now b waits for the barrier
            hb = a.heartbeat(group, gen, a_id)
            if hb != 0:
                break
            time.sleep(0.05)
        ctx.require(hb == 27, "a's heartbeat after b joined: error %s, expected REBALANCE_IN_PROGRESS (27)" % hb)
        errs = a.offset_commit(group, {(topic, 0): 5, (topic, 1): 7}, generation=gen, member=a_id)
        ctx.note("a's commit in generation %s while PreparingRebalance: %s" % (gen, errs))
        ctx.check(set(errs.values()) == {0}, "a's commit in generation %s while the group prepares a rebalance: errors %s; "
                  "Kafka accepts it (ClassicGroup.validateOffsetCommit refuses only CompletingRebalance)" % (gen, errs))

        # 3. a rejoins: the barrier completes; the leader syncs first, then the follower
        ra = a.join(group, a_id, **kw)
        ctx.require(ra["error"] == 0, "a's rejoin: error %s" % ra["error"])
        rb = b.join_result(timeout=ctx.left(15))
        if b_first is None:  # b's first JoinGroup was not answered before the barrier
            b_first = rb
        ctx.check(b_first["error"] == 79 and b_first is not rb,
                  "b's first JoinGroup v5 in a Stable group: error %s%s; Kafka answers MEMBER_ID_REQUIRED (79) at once"
                  % (b_first["error"], ", answered only at the barrier" if b_first is rb else ""))
        ctx.require(rb["error"] == 0 and rb["generation"] == ra["generation"],
                    "b's JoinGroup: error %s, generation %s (a's %s)" % (rb["error"], rb["generation"], ra["generation"]))
        leader, gen2 = ra["leader"], ra["generation"]
        ctx.require(leader in (a_id, rb["member"]), "leader %r is neither member" % leader)
        first, second = (a, b) if leader == a_id else (b, a)
        ids = {a: a_id, b: rb["member"]}
        plan = {ids[first]: [(topic, 0)], ids[second]: [(topic, 1)]}
        err, got = first.sync(group, gen2, ids[first], plan)
        ctx.require(err == 0 and got == [(topic, 0)], "the leader's SyncGroup: error %s, assignment %s" % (err, got))
        err, got = second.sync(group, gen2, ids[second])
        ctx.note("the follower's SyncGroup after the leader's: error %s, assignment %s" % (err, got))
        ctx.check(err == 0 and got == [(topic, 1)], "the follower's SyncGroup after the leader's (group Stable): error %s, "
                  "assignment %s; Kafka answers it with the assignment the leader gave, %s" % (err, got, [(topic, 1)]))
    finally:
        a.close()
        b.close()


# -------------------------------------------------------------------------------------------
# One-shot workers: a process that prints one JSON object of outcomes

def run_worker(ctx, cmd, name, what, seconds, env=None):
    """Runs `cmd` (its stderr into NAME.log), fails the scenario if it fails, and returns the
    JSON object it printed, noted in the scenario's notes."""
    r = subprocess.run(cmd, capture_output=True, timeout=ctx.left(seconds), env=env)
    with open(os.path.join(ctx.dir, name + ".log"), "ab") as f:
        f.write(r.stderr)
    if r.returncode != 0:
        raise Failed("%s failed (exit %d): %s"
                     % (what, r.returncode, r.stderr.decode(errors="replace").strip().splitlines()[-1:]))
    out = json.loads(r.stdout)
    ctx.note("%s outcomes: %s" % (what, out))
    return out


def expecter(ctx, out):
    """expect(key, want): checks that outcome `key` is `want`."""
    def expect(key, want):
        ctx.check(out.get(key) == want, "%s: %s, expected %s" % (key, out.get(key), want))
    return expect


# -------------------------------------------------------------------------------------------
# 12b. kafkajs's admin client on topics, records and groups

@scenario("admin-kafkajs", budget=60,
          mock_note="the mock serves neither DeleteRecords nor configs as Kafka does")
def admin_kafkajs(ctx):
    spec = ctx.spec(prefix="akj")
    env = dict(os.environ)
    env.setdefault("INTEROP_NODE_MODULES", ctx.suite.node_modules)
    out = run_worker(ctx, [node_exe(), os.path.join(INTEROP, "workers", "admin_kafkajs.js"), json.dumps(spec)],
                     "admin_kafkajs", "kafkajs admin", 45, env=env)
    expect = expecter(ctx, out)

    # kafkajs answers createTopics with whether it created the topic (an existing one: false).
    expect("create", True)
    expect("create_again", False)
    expect("validate_only", True)
    expect("list_has_main", True)
    expect("list_has_dry", False)
    expect("metadata", [[0, 0, [0]], [1, 0, [0]], [2, 0, [0]]])
    expect("cluster", {"clusterId": "consumer-groups-broker", "controller": 0, "brokers": [0]})
    expect("configs", {"retention.ms": ["60000", False], "cleanup.policy": ["delete", True]})
    expect("configs_after_alter", {"retention.ms": ["604800000", True], "cleanup.policy": ["compact", False]})
    expect("alter_unknown", "INVALID_CONFIG")
    expect("grow", "ok")
    expect("shrink", "INVALID_PARTITIONS")
    expect("offsets", ["0", "10"])
    expect("delete_records", "ok")
    expect("offsets_after_delete", ["4", "10"])
    expect("delete_records_too_far", "OFFSET_OUT_OF_RANGE")
    expect("set_offsets", "ok")
    expect("group_offsets", ["7"])
    expect("groups_listed", True)
    expect("describe_group", [["akj-group", "Empty"]])
    expect("delete_group", [["akj-group", 0]])
    expect("delete", "ok")
    expect("list_after_delete", False)


# -------------------------------------------------------------------------------------------
# 12c. Debian's sarama (1.22.1): ClusterAdmin, offset manager, sync producer

@scenario("admin-sarama", budget=60,
          mock_note="the mock serves neither DeleteRecords nor CreateTopics v2 as Kafka does")
def admin_sarama(ctx):
    exe = os.path.join(os.environ.get("INTEROP_HOME", os.path.join(ROOT, "target", "interop")), "sarama-admin")
    if not os.path.exists(exe):
        raise Failed("%s is not built: interop/install builds it with Debian's golang-go and "
                     "golang-github-shopify-sarama-dev (apt-get install golang-go "
                     "golang-github-shopify-sarama-dev; .ci/run installs them)" % exe)
    out = run_worker(ctx, [exe, ctx.bootstrap, "sar"], "sarama_admin", "sarama-admin", 45)
    expect = expecter(ctx, out)

    def expect_error(key, text):
        ctx.check(isinstance(out.get(key), str) and text in out[key],
                  "%s: %s, expected an error with %r" % (key, out.get(key), text))

    expect("create", "ok")
    expect_error("create_again", "Topic with this name already exists")
    expect_error("create_rf3", "Replication-factor is invalid")
    expect("validate_only", "ok")
    expect("describe_topics", {"sar-orders": [0, 0, 0],
                               "sar-dry": "kafka server: Request was for a topic or partition that does not exist on this broker."})
    # Metadata v0 (what sarama's DescribeCluster sends) has no controller: sarama reports -1.
    expect("cluster", {"brokers": [0], "controller": -1})
    expect("alter", "ok")
    expect("grow", "ok")
    expect_error("shrink", "Number of partitions is invalid")
    expect("last_offset", 9)
    expect("delete_records", "ok")
    expect("oldest", 4)
    expect("commit", "ok")
    expect("group_listed", "")     # a group made by a commit alone has no protocol type, as in Kafka
    expect("describe_group", ["sar-group", "Empty"])
    expect("group_offsets", 7)
    expect("delete", "ok")
    # ListTopics sends DescribeConfigs v0, which Kafka 4 removed too (KIP-896): the broker
    # closes the connection and logs it once (README, "old clients").
    expect("list_topics", "EOF")


# -------------------------------------------------------------------------------------------
# 12. confluent-kafka's AdminClient on topics: create, describe, alter, grow, delete

@scenario("admin-topics-confluent", budget=90,
          mock_note="against the mock (librdkafka 2.16) the AdminClient's first create_topics does not "
                    "complete within 15 s")
def admin_topics(ctx):
    spec = ctx.spec(prefix="adt")
    out = run_worker(ctx, [python_exe(), os.path.join(INTEROP, "workers", "admin_topics.py"), json.dumps(spec)],
                     "admin_topics", "admin client", 60)
    expect = expecter(ctx, out)

    expect("create", {"adt-orders": "ok", "adt-default": "ok", "adt bad name": "TOPIC_EXCEPTION",
                      "adt-rf3": "INVALID_REPLICATION_FACTOR", "adt-badcfg": "INVALID_CONFIG"})
    expect("create_again", {"adt-orders": "TOPIC_ALREADY_EXISTS"})
    expect("validate_only", {"adt-dry": "ok"})
    default_count = int(out["broker_configs"]["num.partitions"][0])
    expect("partitions", {"adt-orders": 3, "adt-default": default_count, "adt-dry": None, "adt-rf3": None})
    expect("cluster", {"id": "consumer-groups-broker", "controller": 0, "nodes": [0]})
    defaults = {"retention.ms": "604800000", "cleanup.policy": "delete", "max.message.bytes": "1048588",
                "segment.bytes": "1073741824", "min.insync.replicas": "1", "retention.bytes": "-1",
                "compression.type": "producer"}
    # Kafka 4.1+ holds min.insync.replicas at the cluster level (KIP-966, eligible leader
    # replicas): a topic without its own reports it as a dynamic cluster default.
    sources = {k: "DYNAMIC_DEFAULT_BROKER_CONFIG" if k == "min.insync.replicas" else "DEFAULT_CONFIG"
               for k in defaults}
    expect("default_configs", {k: [v, sources[k]] for k, v in defaults.items()})
    expect("configs", dict({k: [v, sources[k]] for k, v in defaults.items()},
                           **{"retention.ms": ["60000", "DYNAMIC_TOPIC_CONFIG"],
                              "cleanup.policy": ["compact", "DYNAMIC_TOPIC_CONFIG"]}))
    ctx.check(out["broker_configs"]["num.partitions"][1] == "STATIC_BROKER_CONFIG",
              "the broker's num.partitions: %s" % out["broker_configs"]["num.partitions"])
    ctx.check(out["broker_configs"]["min.insync.replicas"] == ["1", "DYNAMIC_DEFAULT_BROKER_CONFIG"],
              "the broker's min.insync.replicas: %s" % out["broker_configs"]["min.insync.replicas"])
    expect("alter", {"adt-orders": "ok"})
    expect("alter_append", {"adt-orders": "ok"})
    expect("alter_unknown", {"adt-orders": "INVALID_CONFIG"})
    expect("configs_after_alter", {"retention.ms": ["120000", "DYNAMIC_TOPIC_CONFIG"],
                                   "cleanup.policy": ["delete,compact", "DYNAMIC_TOPIC_CONFIG"]})
    expect("grow", {"adt-orders": "ok"})
    expect("shrink", {"adt-orders": "INVALID_PARTITIONS"})
    expect("grow_missing", {"adt-missing": "UNKNOWN_TOPIC_OR_PART"})
    expect("partitions_after_grow", 5)
    expect("produced_to_new_partition", [0])
    expect("committed_before_delete", [1])
    expect("delete", {"adt-orders": "ok", "adt-never": "UNKNOWN_TOPIC_OR_PART"})
    expect("partitions_after_delete", None)
    expect("committed_after_delete", [-1001])  # librdkafka's OFFSET_INVALID: no committed offset
    expect("delete_default", {"adt-default": "ok"})


# -------------------------------------------------------------------------------------------
# 13. SASL on a SASL_PLAINTEXT listener: confluent-kafka (PLAIN, SCRAM-SHA-256) and kafka-python
#     (SCRAM-SHA-512) with the right password and with a wrong one

@scenario("sasl-confluent-kafka-python", topics={"sasl": 2}, budget=120, own_broker=True,
          mock_note="the mock's listener is PLAINTEXT and knows none of these users")
def sasl_clients(ctx):
    users = users_file(ctx)
    b = ctx.start_broker("broker-sasl", {"sasl": 2}, listen="SASL_PLAINTEXT://127.0.0.1:0",
                         extra=["--users", users])
    sasl = dict(bootstrap=b.address, protocol="SASL_PLAINTEXT")
    out = run_auth_clients(ctx, b, {"topic": "sasl", "user": "alice", "password": "alice-secret", "cases": [
        dict(sasl, name="confluent PLAIN", client="confluent", mechanism="PLAIN"),
        dict(sasl, name="confluent SCRAM-SHA-256", client="confluent", mechanism="SCRAM-SHA-256"),
        dict(sasl, name="kafka-python SCRAM-SHA-512", client="kafka-python", mechanism="SCRAM-SHA-512"),
        dict(sasl, name="confluent PLAIN wrong password", client="confluent", mechanism="PLAIN",
             password="alice-secretx"),
        dict(sasl, name="confluent SCRAM-SHA-256 wrong password", client="confluent",
             mechanism="SCRAM-SHA-256", password="alice-secretx"),
        dict(sasl, name="kafka-python SCRAM-SHA-512 wrong password", client="kafka-python",
             mechanism="SCRAM-SHA-512", password="alice-secretx"),
    ]})
    for key in ("confluent PLAIN", "confluent SCRAM-SHA-256", "kafka-python SCRAM-SHA-512"):
        ctx.check(out.get(key) == "ok", "%s: %s" % (key, out.get(key)))
    for key, says in (("confluent PLAIN wrong password", "Invalid username or password"),
                      ("confluent SCRAM-SHA-256 wrong password", "invalid credentials with SASL mechanism SCRAM-SHA-256")):
        ctx.check(out.get(key, "").startswith("auth error") and says in out.get(key, ""),
                  "%s: %s" % (key, out.get(key)))
    ctx.check(out.get("kafka-python SCRAM-SHA-512 wrong password", "ok") != "ok",
              "kafka-python with a wrong password: %s" % out.get("kafka-python SCRAM-SHA-512 wrong password"))
    with open(b.log_path, errors="replace") as f:
        log = f.read()
    ctx.check("alice-secret" not in log, "the broker's log holds the password")
    ctx.check('user="alice" mechanism="SCRAM-SHA-512"' in log and "authentication failed" in log,
              "the failed logins are not logged with the user name")


def users_file(ctx):
    """The SASL users file of the SASL scenarios (mode 600, as the broker demands)."""
    users = os.path.join(ctx.dir, "users.txt")
    fd = os.open(users, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("# interop\nalice:alice-secret\n")
    return users


def run_auth_clients(ctx, broker, spec):
    """Runs workers/sasl_clients.py with `spec`, stops `broker` (exit 0 required) and returns
    the outcomes, {case: "ok" or the error}."""
    r = subprocess.run([python_exe(), os.path.join(INTEROP, "workers", "sasl_clients.py"), json.dumps(spec)],
                       capture_output=True, timeout=ctx.left(100))
    with open(os.path.join(ctx.dir, "sasl_clients.log"), "ab") as f:
        f.write(r.stderr)
    code, _, killed = broker.stop(15)
    ctx.check(code == 0 and not killed, "%s on SIGTERM: exit %s" % (broker.name, code))
    if r.returncode != 0:
        raise Failed("the clients failed (exit %d): %s"
                     % (r.returncode, r.stderr.decode(errors="replace").strip().splitlines()[-1:]))
    out = json.loads(r.stdout)
    ctx.note("outcomes: %s" % out)
    return out


def make_pki(ctx):
    """A certificate authority, a server certificate for localhost and 127.0.0.1, and a client
    certificate (subject O=interop, CN=interop-client), made with the openssl command (EC
    P-256 keys, PKCS#8 PEM). Returns the directory."""
    d = os.path.join(ctx.dir, "pki")
    os.makedirs(d, exist_ok=True)

    def openssl(*args):
        r = subprocess.run(["openssl"] + list(args), cwd=d, capture_output=True, timeout=ctx.left(20))
        if r.returncode != 0:
            raise Failed("openssl %s failed: %s" % (args[0], r.stderr.decode(errors="replace").strip()[-300:]))

    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=interop-ca")
    for name, subject, ext in (("server", "/CN=localhost", "subjectAltName=DNS:localhost,IP:127.0.0.1\n"
                                                          "extendedKeyUsage=serverAuth\n"),
                               ("client", "/O=interop/CN=interop-client", "extendedKeyUsage=clientAuth\n")):
        with open(os.path.join(d, name + ".ext"), "w") as f:
            f.write(ext)
        openssl("req", *ec, "-keyout", name + ".key", "-out", name + ".csr", "-subj", subject)
        openssl("x509", "-req", "-in", name + ".csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                "-out", name + ".pem", "-days", "2", "-extfile", name + ".ext")
    return d


# -------------------------------------------------------------------------------------------
# 13b. TLS: SCRAM-SHA-256 over SASL_SSL (confluent-kafka, kafka-python), and an SSL listener
#      that requires client certificates and names the principal by the certificate's subject

@scenario("tls-confluent-kafka-python", topics={"tls": 2}, budget=150, own_broker=True,
          mock_note="the mock's listener is PLAINTEXT")
def tls_clients(ctx):
    pki = make_pki(ctx)

    def at(name):
        return os.path.join(pki, name)

    tls = ["--ssl-certificate", at("server.pem"), "--ssl-key", at("server.key")]
    # SASL_SSL beside a PLAINTEXT listener: each advertises itself
    a = ctx.start_broker("broker-sasl-ssl", {"tls": 2}, listen="SASL_SSL://127.0.0.1:0",
                         extra=["--users", users_file(ctx), "--listen", "127.0.0.1:0"] + tls)
    plain = a.listener("PLAINTEXT")
    sasl = dict(bootstrap=a.address, protocol="SASL_SSL", mechanism="SCRAM-SHA-256")
    out = run_auth_clients(ctx, a, {"topic": "tls", "user": "alice", "password": "alice-secret",
                                    "ca": at("ca.pem"), "cases": [
        dict(sasl, name="confluent SCRAM-SHA-256 over SASL_SSL", client="confluent"),
        dict(sasl, name="kafka-python SCRAM-SHA-256 over SASL_SSL", client="kafka-python"),
        dict(sasl, name="confluent wrong password", client="confluent", password="wrong"),
        dict(sasl, name="kafka-python wrong password", client="kafka-python", password="wrong"),
        dict(name="confluent PLAINTEXT listener beside it", client="confluent", bootstrap=plain,
             protocol="PLAINTEXT"),
    ]})
    for key in ("confluent SCRAM-SHA-256 over SASL_SSL", "kafka-python SCRAM-SHA-256 over SASL_SSL",
                "confluent PLAINTEXT listener beside it"):
        ctx.check(out.get(key) == "ok", "%s: %s" % (key, out.get(key)))
    ctx.check("invalid credentials with SASL mechanism SCRAM-SHA-256" in out.get("confluent wrong password", ""),
              "confluent with a wrong password over SASL_SSL: %s" % out.get("confluent wrong password"))
    ctx.check(out.get("kafka-python wrong password", "ok") != "ok",
              "kafka-python with a wrong password over SASL_SSL: %s" % out.get("kafka-python wrong password"))
    # SSL with client certificates of the authority
    b = ctx.start_broker("broker-ssl", {"tls": 2}, listen="SSL://127.0.0.1:0",
                         extra=tls + ["--ssl-client-ca", at("ca.pem")])
    ssl = dict(bootstrap=b.address, protocol="SSL")
    cert = dict(cert=at("client.pem"), key=at("client.key"))
    out = run_auth_clients(ctx, b, {"topic": "tls", "ca": at("ca.pem"), "cases": [
        dict(ssl, name="confluent client certificate", client="confluent", **cert),
        dict(ssl, name="kafka-python client certificate", client="kafka-python", **cert),
        dict(ssl, name="confluent without a certificate", client="confluent"),
        dict(ssl, name="kafka-python without a certificate", client="kafka-python"),
    ]})
    for key in ("confluent client certificate", "kafka-python client certificate"):
        ctx.check(out.get(key) == "ok", "%s: %s" % (key, out.get(key)))
    for key in ("confluent without a certificate", "kafka-python without a certificate"):
        ctx.check(out.get(key, "ok") != "ok", "%s: %s" % (key, out.get(key)))
    with open(b.log_path, errors="replace") as f:
        log = f.read()
    ctx.check('principal="User:CN=interop-client,O=interop"' in log,
              "no connection of the client certificate's principal User:CN=interop-client,O=interop in the log")
    ctx.check("TLS handshake failed" in log, "the refused handshakes are not logged")


# -------------------------------------------------------------------------------------------
# 13b'. Three listeners in one broker, as Kafka runs them: SCRAM over SASL_SSL without a client
#       certificate beside mutual TLS on SSL (--ssl-client-ca asks SSL clients only), PLAIN over
#       SASL_PLAINTEXT, and the admin client's controller-bound ACL calls on SSL

@scenario("listeners-confluent-kafka-python", topics={"lst": 2}, budget=120, own_broker=True,
          mock_note="the mock's listener is PLAINTEXT")
def three_listeners(ctx):
    pki = make_pki(ctx)

    def at(name):
        return os.path.join(pki, name)

    users = os.path.join(ctx.dir, "listener-users.txt")
    fd = os.open(users, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("alice:alice-secret\nbob:bob-secret\n")
    b = ctx.start_broker("broker-listeners", {"lst": 2}, listen="SASL_SSL://127.0.0.1:0",
                         extra=["--listen", "SASL_PLAINTEXT://127.0.0.1:0", "--listen", "SSL://127.0.0.1:0",
                                "--users", users, "--ssl-certificate", at("server.pem"),
                                "--ssl-key", at("server.key"), "--ssl-client-ca", at("ca.pem"),
                                "--authorizer", "--super-users",
                                "User:alice;User:CN=interop-client,O=interop"])
    sasl_ssl = dict(bootstrap=b.address, protocol="SASL_SSL")
    sasl_plain = dict(bootstrap=b.listener("SASL_PLAINTEXT"), protocol="SASL_PLAINTEXT")
    ssl = dict(bootstrap=b.listener("SSL"), protocol="SSL")
    cert = dict(cert=at("client.pem"), key=at("client.key"))
    out = run_auth_clients(ctx, b, {"topic": "lst", "user": "alice", "password": "alice-secret",
                                    "ca": at("ca.pem"), "cases": [
        dict(sasl_ssl, name="confluent SCRAM-SHA-512 over SASL_SSL without a certificate",
             client="confluent", mechanism="SCRAM-SHA-512"),
        dict(sasl_ssl, name="kafka-python SCRAM-SHA-256 over SASL_SSL without a certificate",
             client="kafka-python", mechanism="SCRAM-SHA-256"),
        dict(sasl_plain, name="kafka-python PLAIN over SASL_PLAINTEXT", client="kafka-python",
             mechanism="PLAIN"),
        dict(ssl, name="confluent client certificate over SSL", client="confluent", **cert),
        dict(ssl, name="confluent without a certificate over SSL", client="confluent"),
        dict(ssl, name="confluent-admin ACLs over SSL as a certificate super user", client="confluent-admin",
             grantee="User:bob", **cert),
        dict(sasl_ssl, name="confluent-admin ACLs over SASL_SSL as alice", client="confluent-admin",
             mechanism="SCRAM-SHA-256", grantee="User:carol"),
        dict(sasl_plain, name="confluent-admin ACLs over SASL_PLAINTEXT as bob", client="confluent-admin",
             mechanism="PLAIN", user="bob", password="bob-secret", grantee="User:bob"),
    ]})
    for key in ("confluent SCRAM-SHA-512 over SASL_SSL without a certificate",
                "kafka-python SCRAM-SHA-256 over SASL_SSL without a certificate",
                "kafka-python PLAIN over SASL_PLAINTEXT", "confluent client certificate over SSL",
                "confluent-admin ACLs over SSL as a certificate super user",
                "confluent-admin ACLs over SASL_SSL as alice"):
        ctx.check(out.get(key) == "ok", "%s: %s" % (key, out.get(key)))
    ctx.check(out.get("confluent without a certificate over SSL", "ok") != "ok",
              "an SSL client without a certificate: %s" % out.get("confluent without a certificate over SSL"))
    ctx.check(out.get("confluent-admin ACLs over SASL_PLAINTEXT as bob") == "CLUSTER_AUTHORIZATION_FAILED",
              "bob (no super user) creating ACLs: %s" % out.get("confluent-admin ACLs over SASL_PLAINTEXT as bob"))
    with open(b.log_path, errors="replace") as f:
        log = f.read()
    for protocol, auth in (("SASL_SSL", "none"), ("SASL_PLAINTEXT", "none"), ("SSL", "required")):
        ctx.check('protocol="%s"' % protocol in log and re.search(
            r'listener protocol="%s" .*client_auth="%s"' % (protocol, auth), log) is not None,
                  "the start line of the %s listener does not say client_auth=%s" % (protocol, auth))


# -------------------------------------------------------------------------------------------
# 13c. ACLs (--authorizer): a principal without READ on a group is refused and changes nothing;
#      ACLs added with confluent-kafka's AdminClient let it in; kafka-python's deletes them

@scenario("acls-confluent-kafka-python", topics={"acl": 1}, budget=120, own_broker=True,
          mock_note="the mock has no authorizer")
def acl_clients(ctx):
    users = os.path.join(ctx.dir, "acl-users.txt")
    fd = os.open(users, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("admin:admin-pw\nalice:alice-pw\n")
    b = ctx.start_broker("broker-acl", {"acl": 1}, listen="SASL_PLAINTEXT://127.0.0.1:0",
                         extra=["--users", users, "--authorizer", "--super-users", "User:admin"])
    spec = {"bootstrap": b.address, "topic": "acl", "group": "acl-g"}
    r = subprocess.run([python_exe(), os.path.join(INTEROP, "workers", "acl_clients.py"), json.dumps(spec)],
                       capture_output=True, timeout=ctx.left(100))
    with open(os.path.join(ctx.dir, "acl_clients.log"), "ab") as f:
        f.write(r.stderr)
    code, _, killed = b.stop(15)
    ctx.check(code == 0 and not killed, "the ACL broker on SIGTERM: exit %s" % code)
    if r.returncode != 0:
        raise Failed("the ACL clients failed (exit %d): %s"
                     % (r.returncode, r.stderr.decode(errors="replace").strip().splitlines()[-1:]))
    out = json.loads(r.stdout)
    ctx.note("outcomes: %s" % out)
    expect = expecter(ctx, out)
    expect("admin_commit", "ok")
    ctx.check(out["alice_consume_without_acl"]["records"] == 0
              and "GROUP_AUTHORIZATION_FAILED" in out["alice_consume_without_acl"]["errors"],
              "alice's group without an ACL: %s" % out["alice_consume_without_acl"])
    # FindCoordinator is refused first (DESCRIBE on the group), so librdkafka's commit ends
    # waiting for a coordinator; the wire test shows OffsetCommit's own refusal
    ctx.check(out.get("alice_commit_without_acl") in ("GROUP_AUTHORIZATION_FAILED", "_WAIT_COORD"),
              "alice_commit_without_acl: %s" % out.get("alice_commit_without_acl"))
    expect("committed_after_refusals", 5)
    expect("create_acls", ["ok", "ok"])
    expect("alice_create_acls", "CLUSTER_AUTHORIZATION_FAILED")
    ctx.check(out["alice_consume_with_acl"] == {"records": 5, "errors": []},
              "alice's group with the ACLs: %s" % out["alice_consume_with_acl"])
    expect("committed_after_alice", 10)
    expect("described", ["GROUP:acl-g:User:alice:READ", "TOPIC:acl:User:alice:READ"])
    expect("kafka_python_described", 2)
    expect("kafka_python_deleted", 1)
    # FindCoordinator is refused first (DESCRIBE on the group), so librdkafka's commit ends
    # waiting for a coordinator; the wire test shows OffsetCommit's own refusal
    ctx.check(out.get("alice_commit_after_delete") in ("GROUP_AUTHORIZATION_FAILED", "_WAIT_COORD"),
              "alice_commit_after_delete: %s" % out.get("alice_commit_after_delete"))
    expect("committed_at_end", 10)
    expect("scram_upsert", ["ok"])
    expect("scram_login_carol", "ok")
    expect("scram_described_carol", [["SCRAM_SHA_256", 8192]])
    expect("scram_delete", ["ok"])
    ctx.check(out.get("scram_login_after_delete") != "ok",
              "carol logged in after her credential was deleted: %s" % out.get("scram_login_after_delete"))
