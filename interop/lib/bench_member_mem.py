#!/usr/bin/env python3
"""Memory per Stable member of a confluent-kafka group, measured on the broker alone.

interop/bench's `memory` workload measures RSS per Stable member *after* 200 idle
connections were opened and closed in the same process, so the members reuse what those
connections freed; this script measures the members on their own (`--idle 0`, the
default) or after the same idle phase (`--idle 200`), as often as asked, and can run the
broker under valgrind's massif to read the heap itself at the two moments (a detailed
snapshot through vgdb before the members and once they are Stable).

    target/interop/venv/bin/python interop/lib/bench_member_mem.py --broker /tmp/broker --runs 3
    ... --members 64 --env MALLOC_ARENA_MAX=2
    ... --massif target/interop/massif        # heap bytes per member; ms_print the .out files
    ... --warm-members 16                     # a group joins and leaves first (code paged in)
    ... --mock                                # librdkafka's mock cluster, the same way

Each run prints one JSON line; the last line is the medians.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kproto  # noqa: E402
from harness import ROOT, Broker, rss_kib  # noqa: E402

TOPICS = {"bench-mem": 8}


def now():
    return time.monotonic()


def status_kib(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return None


def sockets(pid):
    n = 0
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            n += os.readlink("/proc/%d/fd/%s" % (pid, fd)).startswith("socket:")
        except OSError:
            pass
    return n


def massif_snapshot(pid, path):
    """A detailed massif snapshot of the running broker written to `path`; the heap total
    (useful + extra bytes) of that snapshot."""
    subprocess.run(["vgdb", "--pid=%d" % pid, "detailed_snapshot", path], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
    heap = extra = 0
    with open(path) as f:
        for line in f:
            if line.startswith("mem_heap_B="):
                heap = int(line.split("=")[1])
            elif line.startswith("mem_heap_extra_B="):
                extra = int(line.split("=")[1])
    return heap, extra


def group_stable(a, address, group, members, out):
    """`members` confluent-kafka consumers in `group`, polled until every one is assigned,
    then for --hold seconds."""
    from confluent_kafka import Consumer
    cs = [Consumer({"bootstrap.servers": address, "group.id": group, "session.timeout.ms": 10000,
                    "heartbeat.interval.ms": 1000, "enable.auto.commit": False})
          for _ in range(members)]
    assigned = set()
    for i, c in enumerate(cs):
        c.subscribe(["bench-mem"], on_assign=(lambda i: lambda c_, ps: assigned.add(i))(i))
    deadline = now() + a.timeout
    while len(assigned) < members and now() < deadline:
        for c in cs:
            c.poll(0)
        time.sleep(0.002)
    if len(assigned) < members:
        out["error"] = "%s: only %d of %d members assigned" % (group, len(assigned), members)
    t_end = now() + a.hold
    while now() < t_end:
        for c in cs:
            c.poll(0)
        time.sleep(0.01)
    return cs


def one_run(a, run, outdir):
    env = dict(os.environ)
    for kv in a.env:
        k, v = kv.split("=", 1)
        env[k] = v
    args = ["--listen", "127.0.0.1:0", "--group-initial-rebalance-delay-ms", "0",
            "--group-min-session-timeout-ms", "1000"] + a.broker_arg
    for t, n in TOPICS.items():
        args += ["--topic", "%s:%d" % (t, n)]
    cmd = [a.broker]
    if a.mock:
        cmd = [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "mockcluster.py"),
               "--api-versions-like-broker"]
    if a.massif:
        cmd = ["valgrind", "--tool=massif", "--vgdb=yes", "--threshold=0.1",
               "--massif-out-file=%s/massif.%d.out" % (outdir, run)] + cmd
    b = Broker(cmd, args, os.path.join(outdir, "broker.%d.log" % run), env=env)
    b.start(120 if a.massif else 30)
    pid = b.pid
    host, port = kproto.split_hostport(b.address)
    out = {"run": run, "members": a.members, "idle": a.idle}
    cs = []
    try:
        warm = kproto.Conn(host, port, timeout=30)
        warm.api_versions()
        warm.close()
        time.sleep(a.settle)
        if a.idle:
            socks = []
            for _ in range(a.idle):
                c = kproto.Conn(host, port, timeout=30)
                c.api_versions()
                socks.append(c)
            time.sleep(0.5)
            for c in socks:
                c.close()
            time.sleep(1.0)
        base = rss_kib(pid)
        out["rss_base_KiB"] = base
        out["sockets_base"] = sockets(pid)
        if a.warm_members:
            # A group joined, Stable, and closed before the measure: the broker's code for a
            # group's requests is paged in (RssFile) before the baseline.
            ws = group_stable(a, b.address, "bench-mem-warm-%d-%d" % (os.getpid(), run), a.warm_members, out)
            for c in ws:
                c.close()
            time.sleep(a.settle)
            base = rss_kib(pid)
            out["rss_base_KiB"] = base
        anon0, file0 = status_kib(pid, "RssAnon"), status_kib(pid, "RssFile")
        if a.massif:
            out["heap_base_B"], out["heap_extra_base_B"] = massif_snapshot(pid, "%s/base.%d.ms" % (outdir, run))
        cs = group_stable(a, b.address, "bench-mem-%d-%d" % (os.getpid(), run), a.members, out)
        after = rss_kib(pid)
        out["rss_stable_KiB"] = after
        out["sockets_stable"] = sockets(pid)
        out["per_member_rss_KiB"] = round((after - base) / a.members, 2)
        out["per_member_anon_KiB"] = round((status_kib(pid, "RssAnon") - anon0) / a.members, 2)
        out["per_member_file_KiB"] = round((status_kib(pid, "RssFile") - file0) / a.members, 2)
        if a.massif:
            h, e = massif_snapshot(pid, "%s/stable.%d.ms" % (outdir, run))
            out["heap_stable_B"], out["heap_extra_stable_B"] = h, e
            out["per_member_heap_B"] = round((h - out["heap_base_B"]) / a.members)
            out["per_member_heap_extra_B"] = round((e - out["heap_extra_base_B"]) / a.members)
        out["threads"] = status_kib(pid, "Threads")
    finally:
        for c in cs:
            c.close()
        b.stop(30)
        b.proc.close_log()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--broker", default=os.path.join(ROOT, "target", "release", "broker"))
    ap.add_argument("--mock", action="store_true", help="librdkafka's mock cluster instead (interop/lib/mockcluster.py)")
    ap.add_argument("--broker-arg", action="append", default=[], help="one more argument for the broker")
    ap.add_argument("--members", type=int, default=16)
    ap.add_argument("--idle", type=int, default=0,
                    help="idle connections opened and closed before the members (interop/bench: 200)")
    ap.add_argument("--warm-members", type=int, default=0,
                    help="a group of this many consumers joins and leaves before the baseline")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--env", action="append", default=[], help="KEY=VALUE for the broker")
    ap.add_argument("--massif", metavar="DIR", help="run the broker under massif; snapshots in DIR")
    ap.add_argument("--settle", type=float, default=0.5, help="seconds after the warm-up connection")
    ap.add_argument("--hold", type=float, default=1.0, help="seconds of polls once every member is assigned")
    ap.add_argument("--timeout", type=float, default=120)
    a = ap.parse_args()
    outdir = a.massif or tempfile.mkdtemp(prefix="member-mem-")
    os.makedirs(outdir, exist_ok=True)
    runs = []
    for r in range(a.runs):
        o = one_run(a, r, outdir)
        runs.append(o)
        print(json.dumps(o), flush=True)
    keys = [k for k in runs[0] if k.startswith("per_member")]
    print(json.dumps({"broker": "mock" if a.mock else a.broker, "env": a.env, "members": a.members, "idle": a.idle,
                      "medians": {k: statistics.median(o[k] for o in runs if k in o) for k in keys},
                      "runs": {k: [o.get(k) for o in runs] for k in keys}}), flush=True)


if __name__ == "__main__":
    main()
