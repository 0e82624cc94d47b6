#!/usr/bin/env python3
"""Share groups (KIP-932) measured against the broker (issue 51, item 5), in one run:

  throughput  N records (100-byte values) produced once to a 4-partition topic; then, for each
              run, 1, 4 and 16 confluent-kafka 2.16.1 ShareConsumers (implicit acknowledgement,
              a fresh share group with share.auto.offset.reset=earliest) and, beside them, a
              classic group of 1, 4 and 16 confluent-kafka Consumers (a fresh group,
              auto.offset.reset=earliest, a synchronous commit after each batch of up to 500)
              read the whole topic. Every consumer joins first (the classic ones with their
              partitions paused), then all are told to go. Records/s = N / (the last
              acknowledgement answered, or the last commit, minus the first record received),
              over all the group's consumers. Median of the runs.
  memory      broker RSS (/proc/PID/status VmRSS) before and after M records are acquired and
              held (explicit acknowledgement, never acknowledged, the lock 60 s): KiB and bytes
              per in-flight record; once with the producer's batching (records acquired a batch
              at a time) and once with one record per batch.

    bench_share.py [--broker PATH] [--records N] [--runs 3] [--mem-records M] [--json FILE]

Workers are this file run with --worker SPEC (one process per consumer). See BENCHMARKS.md,
"Share groups".
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import INTEROP, ROOT, Broker, Proc, python_exe, rss_kib  # noqa: E402

TOPIC = "bench-share"
# the memory measurements: topic prefix, what, one record per producer batch, the holder's mode
MEMORY = (("bench-mem", "batched", False, "hold"), ("bench-mem1", "one per batch", True, "hold"),
          ("bench-odd", "batched, odd offsets held", False, "hold-odd"),
          ("bench-acc", "batched, all accepted: the control, none in flight", False, "accept"))
MEM_ROUNDS = 3
VALUE = b"v" * 100


# ---------------------------------------------------------------------------------------------
# the worker: one consumer, events on stdout, "stop" on stdin


def worker(spec):
    """Joins, then waits for "go" on stdin before reading (share: before its first poll;
    classic: its partitions paused until then), reads until "stop"."""
    stop, go = threading.Event(), threading.Event()

    def watch():
        for line in sys.stdin:
            if line.strip() == "go":
                go.set()
            elif line.strip() == "stop":
                break
        stop.set()
    threading.Thread(target=watch, daemon=True).start()

    def emit(ev, **kw):
        kw["ev"], kw["t"] = ev, time.time()
        sys.stdout.write(json.dumps(kw) + "\n")
        sys.stdout.flush()
    counts = {"got": 0, "acked": 0, "errors": 0}
    if spec["kind"] == "share":
        from confluent_kafka import ShareConsumer

        def on_acked(offsets, exc):
            if exc is None:
                counts["acked"] += sum(len(o) for o in offsets.values())
            else:
                counts["errors"] += 1
        c = ShareConsumer({"bootstrap.servers": spec["bootstrap"], "group.id": spec["group"],
                           "client.id": spec["label"], "share.acknowledgement.mode": "implicit"})
        c.set_acknowledgement_commit_callback(on_acked)
        c.subscribe([spec["topic"]])
        emit("started")
        go.wait()
        while not stop.is_set():
            before = dict(counts)
            msgs = c.poll(0.2) or []
            n = sum(1 for m in msgs if not m.error())
            counts["got"] += n
            if n and before["got"] == 0:
                emit("first")
            if counts != before:
                emit("n", **counts)
        c.close()
    else:
        from confluent_kafka import Consumer

        def on_assign(consumer, partitions):
            consumer.assign(partitions)
            if not go.is_set():
                consumer.pause(partitions)
            emit("assigned", n=len(partitions))

        def on_revoke(consumer, partitions):
            emit("revoked", n=len(partitions))
        c = Consumer({"bootstrap.servers": spec["bootstrap"], "group.id": spec["group"],
                      "client.id": spec["label"], "auto.offset.reset": "earliest",
                      "enable.auto.commit": False, "session.timeout.ms": 6000,
                      "heartbeat.interval.ms": 500})
        c.subscribe([spec["topic"]], on_assign=on_assign, on_revoke=on_revoke)
        emit("started")
        resumed = False
        while not stop.is_set():
            if go.is_set() and not resumed:
                c.resume(c.assignment())
                resumed = True
            msgs = c.consume(500, 0.2)
            n = sum(1 for m in msgs if not m.error())
            if n:
                if counts["got"] == 0:
                    emit("first")
                counts["got"] += n
                try:
                    c.commit(asynchronous=False)
                    counts["acked"] += n
                except Exception:
                    counts["errors"] += 1
                emit("n", **counts)
        c.close()
    emit("closed")
    return 0


# ---------------------------------------------------------------------------------------------
# the parent


def set_group_config(bootstrap, group, configs):
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(k, str(v), incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()])
    for _r, fut in admin.incremental_alter_configs([res]).items():
        fut.result(20)


def produce(bootstrap, topic, count, one_per_batch=False):
    from confluent_kafka import Producer
    conf = {"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"}
    if one_per_batch:
        conf.update({"linger.ms": 0, "batch.num.messages": 1})
    p = Producer(conf)
    for i in range(count):
        while True:
            try:
                p.produce(topic, key=b"k%d" % i, value=VALUE)
                break
            except BufferError:
                p.poll(0.05)
        if i % 1000 == 0:
            p.poll(0)
    left = p.flush(60)
    if left:
        raise SystemExit("bench_share: %d records not delivered to %s" % (left, topic))


def spawn(logdir, spec):
    cmd = [python_exe(), os.path.abspath(__file__), "--worker", json.dumps(spec)]
    return Proc(spec["label"], cmd, os.path.join(logdir, spec["label"] + ".log"))


def classic_ready(procs):
    """Every member has been assigned, the assignments cover the 4 partitions, none revoked since."""
    total = 0
    for p in procs:
        last = None
        for e in p.snapshot():
            if e["ev"] in ("assigned", "revoked"):
                last = e
        if last is None or last["ev"] != "assigned":
            return False
        total += last["n"]
    return total == 4


def read_group(bootstrap, logdir, kind, consumers, records, run, timeout=180):
    """One group of `consumers` reading the whole topic: a dict of figures."""
    group = "bench-%s-%d-%d-%d" % (kind, consumers, run, os.getpid())
    if kind == "share":
        set_group_config(bootstrap, group, {"share.auto.offset.reset": "earliest"})
    t0 = time.time()
    procs = [spawn(logdir, {"kind": kind, "bootstrap": bootstrap, "group": group, "topic": TOPIC,
                            "label": "%s-%d" % (group, i)}) for i in range(consumers)]
    deadline = time.monotonic() + timeout
    last = {}
    done_at = go_at = None
    try:
        # joined: classic, a stable assignment; share, started and 3 s more (heartbeats every 1 s)
        for p in procs:
            p.wait_for(lambda e: e["ev"] == "started", 60, "start")
        if kind == "share":
            time.sleep(3)
        else:
            settled = None
            while time.monotonic() < deadline:
                if classic_ready(procs):
                    settled = settled or time.monotonic()
                    if time.monotonic() - settled > 1.0:
                        break
                else:
                    settled = None
                time.sleep(0.05)
        go_at = time.time()
        for p in procs:
            p.send("go")
        while time.monotonic() < deadline:
            for p in procs:
                for e in p.snapshot():
                    if e["ev"] == "n":
                        last[p.name] = e
            acked = sum(e["acked"] for e in last.values())
            if acked >= records:
                done_at = max(e["t"] for e in last.values())
                break
            time.sleep(0.05)
    finally:
        for p in procs:
            p.send("stop")
        for p in procs:
            p.stop(20)
            p.close_log()
    got = sum(e["got"] for e in last.values())
    acked = sum(e["acked"] for e in last.values())
    errors = sum(e["errors"] for e in last.values())
    with_records = sum(1 for p in procs if any(e["ev"] == "first" for e in p.snapshot()))
    out = {"kind": kind, "consumers": consumers, "run": run, "got": got, "acked": acked, "errors": errors,
           "with_records": with_records, "join": (go_at - t0) if go_at else None}
    if done_at is None:
        out["timeout"] = True
        return out
    firsts = [e["t"] for p in procs for e in p.snapshot() if e["ev"] == "first"]
    out["first_after_go"] = min(firsts) - go_at
    out["seconds"] = done_at - min(firsts)
    out["rate"] = records / out["seconds"]
    return out


def rss_now(broker, samples=3):
    vals = []
    for _ in range(samples):
        vals.append(rss_kib(broker.pid))
        time.sleep(0.3)
    return statistics.median(vals)


def share_proc(bootstrap, logdir, group, topic, label, mode, conf=None):
    spec = {"bootstrap": bootstrap, "group": group, "topic": topic, "label": label, "mode": mode, "conf": conf or {}}
    return Proc(label, [python_exe(), os.path.join(INTEROP, "workers", "share_consumer.py"), json.dumps(spec)],
                os.path.join(logdir, label + ".log"))


def recs_of(procs):
    return sum(len(e["r"]) for q in procs for e in q.snapshot() if e["ev"] == "recs")


def held_by(procs):
    return sum(1 for p in procs for e in p.snapshot() if e["ev"] == "recs" for r in e["r"] if r[4] == "hold")


def accepted_by(procs):
    return sum(len(o) for p in procs for e in p.snapshot() if e["ev"] == "acked" and not e["err"] for _, o in e["r"])


def hold(bootstrap, broker, logdir, topic, count, mode):
    """RSS before and after `count` records of `topic` are acquired and held by one consumer
    (explicit acknowledgement, one poll of up to `count` records, never acknowledged; with
    hold-odd the even offsets of that poll accepted, the odd ones held). mode accept is the
    control: one consumer fetches as many records the same way and accepts them all."""
    group = "bench-mem-%s-%d" % (topic, os.getpid())
    set_group_config(bootstrap, group, {"share.auto.offset.reset": "earliest",
                                        "share.partition.max.record.locks": 30000,
                                        "share.record.lock.duration.ms": 60000})
    time.sleep(1.0)
    before = rss_now(broker)
    p = share_proc(bootstrap, logdir, group, topic, group + "-h", mode, {"max.poll.records": count})
    n = 0
    try:
        p.wait_for(lambda e: e["ev"] == "recs", 30, "records")
        if mode != "hold":
            p.wait_for(lambda e: e["ev"] == "acked", 30, "acknowledgements answered")
        if mode == "accept":
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and accepted_by([p]) < count:
                time.sleep(0.1)
            n = accepted_by([p])
        else:
            n = held_by([p])
    except Exception as e:
        print("bench_share: %s: %s" % (topic, e), flush=True)
    time.sleep(1.0)
    after = rss_now(broker)
    return [p], {"topic": topic, "mode": mode, "held": n, "rss_before_kib": before, "rss_after_kib": after,
                 "bytes_per_record": (after - before) * 1024.0 / n if n else None}


def memory(bootstrap, broker, logdir, prefix, count, label, mode, one_per_batch, rounds):
    """`rounds` holds of `count` records, each of its own topic and group, one after the other
    (the holders kept): the first pays for the allocator's growth on the fetch path (answers,
    buffers), the later ones show the in-flight state; their median is the figure."""
    out, procs = [], []
    for r in range(rounds):
        topic = "%s-%d" % (prefix, r)
        produce(bootstrap, topic, count, one_per_batch=one_per_batch)
        ps, m = hold(bootstrap, broker, logdir, topic, count, mode)
        procs += ps
        m["label"], m["round"] = label, r + 1
        print("memory %s" % json.dumps(m), flush=True)
        out.append(m)
    for p in procs:
        p.kill()
        p.close_log()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--broker", default=os.environ.get("INTEROP_BROKER") or os.path.join(ROOT, "target", "release", "broker"))
    ap.add_argument("--records", type=int, default=200000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--consumers", default="1,4,16")
    ap.add_argument("--mem-records", type=int, default=100000)
    ap.add_argument("--json")
    a = ap.parse_args()
    if a.worker:
        return worker(json.loads(a.worker))
    logdir = tempfile.mkdtemp(prefix="bench-share-")
    args = ["--listen", "127.0.0.1:0", "--group-share-partition-max-record-locks", "30000",
            "--group-initial-rebalance-delay-ms", "0", "--group-min-session-timeout-ms", "1000",
            "--group-share-heartbeat-interval-ms", "1000"]
    for t in [TOPIC] + ["%s-%d" % (m[0], r) for m in MEMORY for r in range(MEM_ROUNDS)]:
        args += ["--topic", "%s:4" % t]
    broker = Broker([a.broker], args, os.path.join(logdir, "broker.log"))
    boot = broker.start(30)
    print("bench_share: broker %s on %s (pid %d), logs in %s" % (a.broker, boot, broker.pid, logdir), flush=True)
    results = {"records": a.records, "runs": [], "memory": []}
    try:
        t = time.time()
        produce(boot, TOPIC, a.records)
        print("produced %d records to %s in %.1f s" % (a.records, TOPIC, time.time() - t), flush=True)
        sizes = [int(x) for x in a.consumers.split(",")]
        for run in range(a.runs):
            for kind in ("share", "classic"):
                for n in sizes:
                    r = read_group(boot, logdir, kind, n, a.records, run)
                    results["runs"].append(r)
                    print("run %d %-7s x%-2d %s" % (run + 1, kind, n, json.dumps({k: (round(v, 2) if isinstance(v, float) else v)
                                                                                   for k, v in r.items() if k not in ("kind", "consumers", "run")})), flush=True)
        for prefix, label, one, mode in MEMORY:
            results["memory"] += memory(boot, broker, logdir, prefix, a.mem_records, label, mode, one, MEM_ROUNDS)
    finally:
        code, took, killed = broker.stop(15)
        broker.proc.close_log()
    print()
    print("| consumers | share: records/s (median of %d) | share: consumers that got records | classic: records/s | classic: consumers that got records |" % a.runs)
    print("| --- | --- | --- | --- | --- |")
    for n in sizes:
        row = ["%d" % n]
        for kind in ("share", "classic"):
            rs = [r for r in results["runs"] if r["kind"] == kind and r["consumers"] == n]
            rates = [r["rate"] for r in rs if "rate" in r]
            med = statistics.median(rates) if len(rates) == len(rs) else None
            row.append(("%.0f (%s)" % (med, ", ".join("%.0f" % x for x in rates))) if med else "timeout in %d of %d" % (len(rs) - len(rates), len(rs)))
            row.append("/".join(str(r["with_records"]) for r in rs))
        print("| " + " | ".join(row) + " |")
    print()
    print("| in flight | bytes per in-flight record, rounds 1, 2, 3 | RSS (KiB) before and after each round | figure (median of rounds 2-3) |")
    print("| --- | --- | --- | --- |")
    for _prefix, label, _one, _mode in MEMORY:
        ms = [m for m in results["memory"] if m["label"] == label]
        per = [m["bytes_per_record"] for m in ms]
        later = [x for x in per[1:] if x is not None]
        print("| %s records (%s) | %s | %s | %s |" % (
            "/".join(str(m["held"]) for m in ms), label,
            ", ".join("%.0f" % x if x is not None else "-" for x in per),
            "; ".join("%d→%d" % (m["rss_before_kib"], m["rss_after_kib"]) for m in ms),
            "%.0f" % statistics.median(later) if later else "-"))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
