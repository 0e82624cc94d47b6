#!/usr/bin/env python3
"""The `groups` tool and kafka-python's KafkaAdminClient on the same broker must agree.

Scenario `admin-tool-kafka-python`: two kafka-python consumers (threads of this process) hold
a Stable group on a 3-partition topic; then the tool's JSON output (--list, --describe
--state, --members, --describe) is compared with what KafkaAdminClient says (list_groups,
describe_groups, list_group_offsets, list_partition_offsets). Both refuse to reset the
Stable group. After the consumers close: the group is Empty for both; a reset by the tool is
what the admin client reads, a reset by the admin client is what the tool reads (and the
tool's clamping of --shift-by agrees with the admin client's clamping); offsets deleted by
one are gone for the other; the group deleted by the tool is Dead for the admin client.

Two ways to run it:

* Alone (needs kafka-python 3 and the two binaries):

      python interop/lib/scenarios_admin_tool.py [--broker target/release/broker]
                                             [--groups target/release/groups]
                                             [--bootstrap HOST:PORT]

  It starts the broker on a free loopback port (unless --bootstrap is given), runs the
  scenario, stops the broker, and prints `N passed, M failed` as its last line.

* In the real-client suite (interop/lib/cli.py imports it after `scenarios`): it
  registers itself with `suite.scenario`, uses the suite's broker (`ctx.bootstrap`), its
  bounded waits (`ctx.left`) and its checks (`ctx.check`). The tool is
  `$INTEROP_GROUPS`, or `target/release/groups`, which `cargo build --release -p consumer-groups-broker`
  (run by interop/run) already builds.

Every wait is bounded (consumers' polls, the tool's --timeout, subprocess timeouts) and
only loopback addresses are used when it starts its own broker.
"""
import json
import os
import subprocess
import sys
import threading
import time

TOPIC = "tool"
PARTITIONS = 3
GROUP = "tool-group"
RECORDS = 300
NAME = "admin-tool-kafka-python"
HERE = os.path.dirname(os.path.abspath(__file__))


def _root():
    d = HERE
    for _ in range(4):
        if os.path.exists(os.path.join(d, "Cargo.toml")):
            return d
        d = os.path.dirname(d)
    return os.getcwd()


ROOT = _root()


class Env:
    """What the scenario needs from its runner: checks, notes and a time budget."""

    def __init__(self, bootstrap, groups_exe, budget, check, note):
        self.bootstrap, self.groups_exe = bootstrap, groups_exe
        self.deadline = time.monotonic() + budget
        self.check, self.note = check, note

    def left(self, timeout):
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the scenario's time budget is used up")
        return min(timeout, left)


# ---------------------------------------------------------------------------------------
# the tool and the admin client, side by side

def tool(env, *args, expect=0):
    """Runs the tool with --output json; returns (exit code, [objects], stderr)."""
    cmd = [env.groups_exe, "--bootstrap-server", env.bootstrap, "--output", "json", *args]
    r = subprocess.run(cmd, capture_output=True, timeout=env.left(30), text=True)
    rows = [json.loads(line) for line in r.stdout.splitlines() if line.strip()]
    if expect is not None and r.returncode != expect:
        raise AssertionError("%s: exit %d (expected %d): %s" % (" ".join(args), r.returncode, expect, r.stderr.strip()))
    return r.returncode, rows, r.stderr


def get(d, *keys, default=None):
    for k in keys:
        if isinstance(d, dict) and k in d:
            return d[k]
        if hasattr(d, k):
            return getattr(d, k)
    return default


def assignment_of(a):
    """[(topic, partition)] of a decoded ConsumerProtocolAssignment (dict or object)."""
    if a is None or isinstance(a, (bytes, bytearray)):
        return []
    out = []
    for tp in get(a, "assigned_partitions", "assignment", default=[]) or []:
        if isinstance(tp, (list, tuple)):
            topic, partitions = tp[0], tp[1]
        else:
            topic, partitions = get(tp, "topic"), get(tp, "partitions", default=[])
        out.extend((topic, p) for p in partitions)
    return sorted(out)


def admin_view(admin, group):
    """What kafka-python's admin client says of the group."""
    from kafka import TopicPartition
    from kafka.admin import OffsetSpec
    listed = {(get(g, "group_id"), get(g, "protocol_type")) for g in admin.list_groups()}
    d = admin.describe_groups([group])[group]
    members = {get(m, "member_id"): (get(m, "client_id"), get(m, "client_host"),
                                     assignment_of(get(m, "member_assignment")))
               for m in get(d, "members", default=[]) or []}
    offsets = admin.list_group_offsets({group: None}).get(group, {})
    committed = {(tp.topic, tp.partition): om.offset for tp, om in offsets.items()}
    tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    ends = {(tp.topic, tp.partition): o.offset for tp, o in admin.list_partition_offsets(
        {tp: OffsetSpec.LATEST for tp in tps}).items()}
    starts = {(tp.topic, tp.partition): o.offset for tp, o in admin.list_partition_offsets(
        {tp: OffsetSpec.EARLIEST for tp in tps}).items()}
    return {"listed": listed, "state": get(d, "group_state"), "protocol": get(d, "protocol_data"),
            "members": members, "committed": committed, "ends": ends, "starts": starts}


def tool_view(env, group):
    _, listed, _ = tool(env, "--list")
    _, state, _ = tool(env, "--describe", "--group", group, "--state")
    _, members, _ = tool(env, "--describe", "--group", group, "--members")
    _, rows, _ = tool(env, "--describe", "--group", group)
    return {
        "listed": {(g["group"], g["protocol_type"]) for g in listed},
        "state": state[0]["state"],
        "protocol": state[0]["assignment_strategy"] or "",
        "member_count": state[0]["members"],
        "members": {m["consumer_id"]: (m["client_id"], m["host"],
                                       sorted((a["topic"], a["partition"]) for a in m["assignment"]))
                    for m in members},
        "committed": {(r["topic"], r["partition"]): r["current_offset"] for r in rows
                      if r["current_offset"] is not None},
        "ends": {(r["topic"], r["partition"]): r["log_end_offset"] for r in rows},
        "lags": {(r["topic"], r["partition"]): r["lag"] for r in rows},
        "owners": {(r["topic"], r["partition"]): r["consumer_id"] for r in rows},
    }


def compare(env, phase, t, a):
    c = env.check
    c(t["listed"] == a["listed"], "%s: --list %s, list_groups %s" % (phase, sorted(t["listed"]), sorted(a["listed"])))
    c(t["state"] == a["state"], "%s: state %s / %s" % (phase, t["state"], a["state"]))
    c(t["protocol"] == (a["protocol"] or ""), "%s: strategy %r / %r" % (phase, t["protocol"], a["protocol"]))
    c(t["member_count"] == len(a["members"]), "%s: %d / %d members" % (phase, t["member_count"], len(a["members"])))
    c(t["members"] == a["members"], "%s: members %s / %s" % (phase, t["members"], a["members"]))
    c(t["committed"] == a["committed"], "%s: committed %s / %s" % (phase, t["committed"], a["committed"]))
    c(all(t["ends"][tp] == a["ends"][tp] for tp in t["ends"]), "%s: log ends %s / %s" % (phase, t["ends"], a["ends"]))
    lags = {tp: a["ends"][tp] - o for tp, o in a["committed"].items()}
    c(all(t["lags"].get(tp) == lag for tp, lag in lags.items()), "%s: lags %s / %s" % (phase, t["lags"], lags))
    owners = {tp: mid for mid, (_, _, parts) in a["members"].items() for tp in parts}
    c(all(t["owners"].get(tp) == mid for tp, mid in owners.items()), "%s: owners %s / %s" % (phase, t["owners"], owners))


# ---------------------------------------------------------------------------------------
# the scenario

class Consumer(threading.Thread):
    """A kafka-python consumer polling in its own thread until told to stop, committing
    after each batch. Its polls keep it in the group (a rebalance needs them)."""

    def __init__(self, env, label):
        super().__init__(daemon=True)
        from kafka import KafkaConsumer
        self.consumer = KafkaConsumer(
            bootstrap_servers=env.bootstrap, group_id=GROUP, client_id=label,
            auto_offset_reset="earliest", enable_auto_commit=False,
            session_timeout_ms=10000, heartbeat_interval_ms=500, max_poll_records=50)
        self.consumer.subscribe([TOPIC])
        # kafka-python 3.0.12 can strand a member that rejoins because, as leader, it assigned
        # before it had the topic's metadata: load the metadata before the first join
        # (interop/README.md, "kafka-python 3.0.12: a rejoin finished in the background")
        self.consumer.partitions_for_topic(TOPIC)
        self.stop_event, self.read, self.error = threading.Event(), 0, None

    def run(self):
        try:
            while not self.stop_event.is_set():
                batch = self.consumer.poll(timeout_ms=200)
                n = sum(len(v) for v in batch.values())
                if n:
                    self.consumer.commit()
                    self.read += n
        except Exception as e:  # reported by the scenario
            self.error = e
        finally:
            self.consumer.close()


def wait_until(env, what, pred, timeout):
    deadline = time.monotonic() + env.left(timeout)
    while not pred():
        if time.monotonic() >= deadline:
            raise TimeoutError("waited %.0f s for %s" % (timeout, what))
        time.sleep(0.1)


def produce(env, count, start):
    from kafka import KafkaProducer
    p = KafkaProducer(bootstrap_servers=env.bootstrap, client_id="tool-producer")
    for i in range(start, start + count):
        p.send(TOPIC, key=b"k%d" % i, value=b"v%d" % i, partition=i % PARTITIONS)
    p.flush(timeout=env.left(30))
    p.close()


def run(env):
    from kafka import KafkaAdminClient, TopicPartition
    from kafka.admin import OffsetSpec
    from kafka.structs import OffsetAndMetadata

    produce(env, RECORDS, 0)
    consumers = [Consumer(env, "tool-consumer-%d" % i) for i in (1, 2)]
    for c in consumers:
        c.start()
    admin = KafkaAdminClient(bootstrap_servers=env.bootstrap, client_id="tool-admin",
                             request_timeout_ms=15000)
    try:
        # Stable with both members, everything read and committed.
        def settled():
            a = admin_view(admin, GROUP)
            return (a["state"] == "Stable" and len(a["members"]) == 2
                    and sum(a["committed"].values()) == RECORDS)
        wait_until(env, "a Stable group of two that committed every record", settled, 60)
        compare(env, "stable", tool_view(env, GROUP), admin_view(admin, GROUP))

        # Both refuse to reset a group with members; nothing changes.
        before = admin_view(admin, GROUP)["committed"]
        code, _, err = tool(env, "--reset-offsets", "--group", GROUP, "--all-topics", "--to-earliest",
                            "--execute", expect=None)
        env.check(code == 1 and "Assignments can only be reset if the group '%s' is inactive, but the current "
                  "state is Stable." % GROUP in err, "tool reset of a Stable group: exit %d, %s" % (code, err.strip()))
        errors = admin.alter_group_offsets(GROUP, {TopicPartition(TOPIC, 0): OffsetAndMetadata(0, "", -1)})
        env.check(any(getattr(e, "errno", 0) != 0 for e in errors.values()),
                  "alter_group_offsets of a Stable group was accepted: %s" % errors)
        env.check(admin_view(admin, GROUP)["committed"] == before, "a refused reset changed the offsets")

        for c in consumers:
            c.stop_event.set()
        for c in consumers:
            c.join(env.left(30))
            env.check(not c.is_alive() and c.error is None, "%s: %s" % (c.consumer.config["client_id"], c.error))
        wait_until(env, "an Empty group", lambda: admin_view(admin, GROUP)["state"] == "Empty", 30)
        produce(env, 30, RECORDS)  # lag: 10 per partition
        compare(env, "empty", tool_view(env, GROUP), admin_view(admin, GROUP))

        # The tool resets, the admin client reads it.
        tool(env, "--reset-offsets", "--group", GROUP, "--topic", TOPIC, "--to-earliest", "--execute")
        a = admin_view(admin, GROUP)
        env.check(a["committed"] == a["starts"], "after the tool's --to-earliest: %s, log starts %s" % (a["committed"], a["starts"]))
        # The admin client resets, the tool reads it.
        specs = {TopicPartition(TOPIC, p): 5 + p for p in range(PARTITIONS)}
        admin.reset_group_offsets(GROUP, specs)
        t = tool_view(env, GROUP)
        env.check(t["committed"] == {(TOPIC, p): 5 + p for p in range(PARTITIONS)}, "after reset_group_offsets: %s" % t["committed"])
        # Both clamp to the log end: the tool's dry run of a huge shift, the admin client's
        # reset to a huge offset.
        _, planned, _ = tool(env, "--reset-offsets", "--group", GROUP, "--all-topics", "--shift-by", "1000000")
        admin.reset_group_offsets(GROUP, {TopicPartition(TOPIC, p): 1000000 for p in range(PARTITIONS)})
        a = admin_view(admin, GROUP)
        env.check({(r["topic"], r["partition"]): r["new_offset"] for r in planned} == a["committed"] == a["ends"],
                  "clamping: tool planned %s, admin client committed %s, log ends %s" % (planned, a["committed"], a["ends"]))
        env.check(all(not r["executed"] for r in planned), "a dry run says it executed")

        # Offsets deleted by one are gone for the other.
        tool(env, "--delete-offsets", "--group", GROUP, "--topic", "%s:0" % TOPIC)
        env.check((TOPIC, 0) not in admin_view(admin, GROUP)["committed"], "the tool's --delete-offsets is not seen")
        admin.delete_group_offsets(GROUP, [TopicPartition(TOPIC, 1)])
        t = tool_view(env, GROUP)
        env.check(set(t["committed"]) == {(TOPIC, 2)}, "after delete_group_offsets the tool reads %s" % t["committed"])
        compare(env, "after deletions", t, admin_view(admin, GROUP))

        # The tool deletes the group: the admin client no longer lists it, and describes it Dead.
        tool(env, "--delete", "--group", GROUP)
        a = admin.describe_groups([GROUP])[GROUP]
        env.check(get(a, "group_state") == "Dead", "after --delete: %s" % get(a, "group_state"))
        env.check(GROUP not in {get(g, "group_id") for g in admin.list_groups()}, "after --delete it is listed")
        code, _, err = tool(env, "--describe", "--group", GROUP, expect=None)
        env.check(code == 1 and "GROUP_ID_NOT_FOUND" in err, "describe after delete: %d %s" % (code, err.strip()))
    finally:
        for c in consumers:
            c.stop_event.set()
        admin.close()


# ---------------------------------------------------------------------------------------
# in the suite

try:
    from suite import scenario as _register  # interop/lib/suite.py, when run by interop/run
except ImportError:
    _register = None

if _register is not None:
    @_register(NAME, topics={TOPIC: PARTITIONS}, budget=120, clients=("kafka-python",),
               mock_note="the mock implements neither ListGroups nor DescribeGroups (nor DeleteGroups)")
    def _suite_scenario(ctx):
        exe = os.environ.get("INTEROP_GROUPS") or os.path.join(ROOT, "target", "release", "groups")
        ctx.require(os.path.exists(exe), "the groups tool is not built: %s" % exe)
        env = Env(ctx.bootstrap, exe, ctx.deadline - time.monotonic(), ctx.check, ctx.note)
        env.left = ctx.left
        run(env)


# ---------------------------------------------------------------------------------------
# alone

def _start_broker(exe):
    p = subprocess.Popen([exe, "--listen", "127.0.0.1:0", "--group-initial-rebalance-delay-ms", "0",
                          "--group-min-session-timeout-ms", "1000", "--topic", "%s:%d" % (TOPIC, PARTITIONS)],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    result = {}

    def read():
        result["line"] = p.stdout.readline()
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(30)
    line = result.get("line", "")
    if not line.startswith("listening on "):
        p.kill()
        raise RuntimeError("the broker printed %r instead of its listening line" % line)
    return p, line[len("listening on "):].strip()


def main():
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--broker", default=os.path.join(ROOT, "target", "release", "broker"))
    ap.add_argument("--groups", default=os.environ.get("INTEROP_GROUPS") or os.path.join(ROOT, "target", "release", "groups"))
    ap.add_argument("--bootstrap", help="use this broker instead of starting one (it needs topic %s:%d)" % (TOPIC, PARTITIONS))
    ap.add_argument("--budget", type=float, default=120)
    args = ap.parse_args()
    failures = []
    broker = None
    try:
        if args.bootstrap:
            bootstrap = args.bootstrap
        else:
            broker, bootstrap = _start_broker(args.broker)
        env = Env(bootstrap, args.groups, args.budget,
                  lambda cond, msg: cond or failures.append(msg), lambda msg: print(msg, file=sys.stderr))
        run(env)
    except Exception as e:
        failures.append("%s: %s" % (type(e).__name__, e))
    finally:
        if broker is not None:
            broker.terminate()
            try:
                broker.wait(15)
            except subprocess.TimeoutExpired:
                broker.kill()
    for f in failures:
        print("FAIL %s: %s" % (NAME, f))
    passed = 0 if failures else 1
    print("%d passed, %d failed" % (passed, 1 - passed))
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
