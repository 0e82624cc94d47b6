"""Exactly-once: a consume-transform-produce application (interop/workers/eos_app.py,
confluent-kafka's transactions with send_offsets_to_transaction) over 10,000 input records,
SIGKILLed at random moments and restarted, and raced by a second instance with the same
transactional id. A read_committed reader of the output must see every input's output exactly
once, and the group's committed offsets must be the input's ends. See interop/README.md.
"""
import json
import os
import random
import subprocess

import records
from harness import INTEROP, Proc, Timeout, now, python_exe
from scenarios import expecter, fetch_committed, run_worker
from suite import Failed, scenario

IN, OUT, PARTS, COUNT = "eos-in", "eos-out", 4, 10_000
GROUP, TXN_ID, PREFIX = "eos-app", "eos-app-txn", "eos"


def app(ctx, label):
    spec = {"bootstrap": ctx.bootstrap, "input": IN, "output": OUT, "group": GROUP,
            "txn_id": TXN_ID, "label": label}
    name, n = label, 1
    while any(q.name == name for q in ctx.procs):
        n += 1
        name = "%s.%d" % (label, n)
    p = Proc(name, [python_exe(), os.path.join(INTEROP, "workers", "eos_app.py"), json.dumps(spec)],
             os.path.join(ctx.dir, name + ".log"))
    p.client, p.role, p.label, p.group, p.spec = "confluent", "eos", label, GROUP, spec
    ctx.procs.append(p)
    return p


def commits_of(p):
    return sum(1 for e in p.snapshot() if e.get("ev") == "txn" and e.get("outcome") == "commit")


def read(ctx, isolation):
    spec = {"bootstrap": ctx.bootstrap, "topic": OUT, "partitions": PARTS, "isolation": isolation}
    r = subprocess.run([python_exe(), os.path.join(INTEROP, "workers", "eos_read.py"), json.dumps(spec)],
                       capture_output=True, timeout=ctx.left(60))
    with open(os.path.join(ctx.dir, "eos_read.%s.log" % isolation), "ab") as f:
        f.write(r.stderr)
    if r.returncode != 0:
        raise Failed("the %s reader failed (exit %d): %s" % (isolation, r.returncode,
                     r.stderr.decode(errors="replace").strip().splitlines()[-1:]))
    return json.loads(r.stdout)


@scenario("exactly-once-confluent", topics={IN: PARTS, OUT: PARTS}, budget=180, clients=("confluent",),
          mock_note="librdkafka's mock does not fence: an instance keeps committing transactions after a second "
                    "one with the same transactional id initialised (InitProducerId bumped the epoch)")
def exactly_once(ctx):
    rng = random.Random(int(os.environ.get("INTEROP_SEED", "0")) or None)
    # The input streams in while the application runs (about 30 s), so that every instance,
    # the fenced one included, always has records to transform.
    prod = ctx.producer("confluent", "producer", [IN], COUNT, PREFIX, rate=COUNT // 30)

    # Kill and restart the application at random moments, each time after it committed at
    # least one transaction (so each instance makes progress); once, start a second instance
    # with the same transactional id while the first runs: one of the two must be fenced.
    current = app(ctx, "app")
    ctx.wait_for(current, lambda e: e.get("ev") == "ready", 60, "the application ready")
    kills, fenced = 0, 0
    for round_ in range(4):
        base = commits_of(current)
        ctx.wait_for(current, lambda e: e.get("ev") == "txn" and e.get("outcome") == "commit"
                     and commits_of(current) > base, 60, "a committed transaction")
        ctx.sleep(rng.uniform(0.05, 1.5))
        if round_ == 2:
            rival = app(ctx, "rival")
            ctx.wait_for(rival, lambda e: e.get("ev") in ("ready", "fenced"), 60, "the rival ready")
            # The rival's InitProducerId fenced the running instance: it must say so and end.
            try:
                ev = ctx.wait_for(current, lambda e: e.get("ev") == "fenced", 30, "the first instance fenced")
                ctx.note("fenced by the rival: %s" % ev.get("msg"))
                fenced += 1
                current.p.wait(30)
            except Timeout as e:
                ctx.fail("two instances with one transactional id: %s" % e)
                current.kill()
            current = rival
            continue
        current.kill()
        kills += 1
        current = app(ctx, "app")
        ctx.wait_for(current, lambda e: e.get("ev") == "ready", 60, "the restarted application ready")

    ctx.wait_done(prod, 90)
    produced = ctx.produced([prod])
    ctx.require(len(produced) == COUNT, "producer acknowledged %d of %d records" % (len(produced), COUNT))
    # Let the last instance finish the input: the group's commits reach every partition's end.
    ends = {}
    for _t, _k, part, off in produced:
        ends[(IN, part)] = max(ends.get((IN, part), 0), off + 1)
    deadline = now() + ctx.left(90)
    committed = {}
    while now() < deadline:
        committed = fetch_committed(ctx, GROUP, sorted(ends))
        if all(committed.get(tp) == end for tp, end in ends.items()):
            break
        ctx.sleep(0.5)
    ctx.check(committed == ends, "the group's committed offsets %s are not the input's ends %s" % (committed, ends))
    ctx.stop(current, 30)

    got = read(ctx, "read_committed")
    seen = {}
    for k, v in got["records"]:
        key = bytes.fromhex(k).decode(errors="replace")
        seen.setdefault(key, []).append(bytes.fromhex(v))
    missing = [records.key(PREFIX, i) for i in range(COUNT) if records.key(PREFIX, i) not in seen]
    twice = {k: len(vs) for k, vs in seen.items() if len(vs) > 1}
    wrong = [k for k, vs in seen.items() if k.startswith(PREFIX + "-")
             and vs[0] != b"out:" + records.value(PREFIX, records.index_of(k))]
    extra = [k for k in seen if not k.startswith(PREFIX + "-")]
    ctx.check(not missing, "%d inputs have no committed output, e.g. %s" % (len(missing), missing[:5]))
    ctx.check(not twice, "%d inputs have their output twice or more, e.g. %s" % (len(twice), list(twice.items())[:5]))
    ctx.check(not wrong and not extra, "outputs with a wrong value %s or an unknown key %s" % (wrong[:5], extra[:5]))
    uncommitted = read(ctx, "read_uncommitted")
    aborted = len(uncommitted["records"]) - len(got["records"])
    ctx.check(aborted >= 0, "read_uncommitted saw fewer records (%d) than read_committed (%d)"
              % (len(uncommitted["records"]), len(got["records"])))
    ctx.check(kills == 3 and fenced == 1, "kills %d (3 planned), fenced instances %d (1 planned)" % (kills, fenced))
    ctx.note("%d kills, %d fenced instance, %d committed outputs, %d records of aborted transactions "
             "visible to read_uncommitted only" % (kills, fenced, len(got["records"]), aborted))


# -------------------------------------------------------------------------------------------
# 12d. kafka-python's transaction admin (what kafka-transactions.sh calls) on a live transaction

@scenario("admin-transactions-kafka-python", budget=60,
          mock_note="the mock serves neither DescribeTransactions nor ListTransactions")
def admin_transactions(ctx):
    spec = ctx.spec(prefix="atx")
    out = run_worker(ctx, [python_exe(), os.path.join(INTEROP, "workers", "admin_transactions.py"), json.dumps(spec)],
                     "admin_transactions", "transaction admin", 45)
    expect = expecter(ctx, out)

    expect("open", {"state": "Ongoing", "epoch": 0, "timeout_ms": 60000, "started": True,
                    "partitions": [["atx-out", 1]]})
    expect("listed_open", True)
    expect("listed_by_state", True)
    expect("listed_other_state", [])
    expect("listed_by_producer", True)
    expect("listed_by_duration", [])        # open for less than an hour
    expect("producers_open", [[True, 2, 0]])   # sequences 0..2, the transaction from offset 0
    expect("committed", {"state": "CompleteCommit", "partitions": 0})
    expect("listed_committed", True)
    expect("producers_committed", [[True, -1]])
    expect("unknown", "TransactionalIdNotFoundError")
