#!/usr/bin/env python3
"""Side-by-side benchmark: the same client workloads against librdkafka's mock cluster and
against our broker (in memory; and with --data-dir where it matters: the group and segment
logs synced per batch, the same with a 1000 ms flush interval, and the JSON offsets file), in
one run.

    bench.py [--broker PATH] [--mock-only] [--only NAME]... [--quick] [--json FILE]
             [--metrics-overhead | --record-overhead | --postgres | --postgres-cluster]

Workloads (each bounded in time; see interop/README.md, "Benchmark"):
  join8        8 confluent-kafka consumers (session.timeout.ms 6000, heartbeat.interval.ms 500)
               subscribe to one 8-partition topic: seconds until every one has a non-empty
               assignment (median of 3 runs, a fresh group each run). Target: ours >= 5x faster.
  kip848       Kafka's consumer group protocol (group.protocol=consumer, heartbeat interval 500 ms on
               both sides): seconds until 8 confluent-kafka consumers hold 8 of 64 partitions each;
               then a 9th joins: partitions revoked (7 is the least) and seconds until balanced.
  commits      2,000 synchronous commits from one confluent-kafka consumer: commits/s, p50, p99.
  throughput   produce then fetch 16,000 1 KiB records (confluent-kafka): MB/s each way (the mock keeps
               ~5 MB per partition, so 4 MB per partition stays under it).
  offsetcommit OffsetCommit round trips per second from 16 raw connections, one request in
               flight on each.
  memory       broker RSS (/proc/PID/status VmRSS) per idle connection and per Stable member;
               the member figure also split into RssAnon and RssFile (the program's code paged
               in by the group's first requests: once per process, on both sides). Heap per
               member: interop/lib/bench_member_mem.py --massif.
"""
import argparse
import asyncio
import json
import os
import socket
import statistics
import struct
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kproto  # noqa: E402
from harness import INTEROP, ROOT, Broker, python_exe, rss_kib  # noqa: E402

TOPICS = {"bench-join": 8, "bench-commit": 1, "bench-tput": 4, "bench-oc": 16, "bench-mem": 8, "bench-848": 64, "bench-txn": 4}
# The consumer group protocol's heartbeat interval on both sides (KIP-848 workload).
CONSUMER_HEARTBEAT_MS = 500


def now():
    return time.monotonic()


# ---------------------------------------------------------------------------------------------
# workloads: each takes the bootstrap address (and the broker, for RSS) and returns a dict


def join8(addr, broker, runs=3, consumers=8, timeout=60):
    from confluent_kafka import Consumer
    times = []
    for run in range(runs):
        group = "bench-join-%d-%d" % (os.getpid(), run)
        assigned = set()
        cs = []
        for i in range(consumers):
            c = Consumer({"bootstrap.servers": addr, "group.id": group, "session.timeout.ms": 6000,
                          "heartbeat.interval.ms": 500, "enable.auto.commit": False,
                          "auto.offset.reset": "earliest", "client.id": "bench-%d" % i})
            cs.append(c)

        def on_assign(i):
            def cb(c, parts):
                if parts:
                    assigned.add(i)
            return cb
        t0 = now()
        for i, c in enumerate(cs):
            c.subscribe(["bench-join"], on_assign=on_assign(i))
        deadline = t0 + timeout
        while len(assigned) < consumers and now() < deadline:
            for c in cs:
                c.poll(0)
            time.sleep(0.001)
        took = now() - t0
        done = len(assigned) == consumers
        for c in cs:
            c.close()
        if not done:
            return {"error": "only %d of %d consumers assigned after %d s" % (len(assigned), consumers, timeout)}
        times.append(took)
    return {"seconds": statistics.median(times), "runs": [round(t, 3) for t in times]}


def kip848(addr, broker, consumers=8, timeout=90):
    """Kafka's consumer group protocol (group.protocol=consumer): seconds until 8 consumers
    hold a balanced split of 64 partitions (8 each), then partitions revoked when a 9th
    joins (7 is the least a balanced split can move) and seconds until it is balanced again."""
    from confluent_kafka import Consumer
    group = "bench-848-%d-%d" % (os.getpid(), int(now() * 1000))
    owned, revoked = {}, [0]

    def mk(i):
        c = Consumer({"bootstrap.servers": addr, "group.id": group, "group.protocol": "consumer",
                      "enable.auto.commit": False, "auto.offset.reset": "earliest", "client.id": "b848-%d" % i})
        owned[i] = set()

        def on_assign(c_, parts):
            owned[i].update((p.topic, p.partition) for p in parts)

        def on_revoke(c_, parts):
            revoked[0] += len(parts)
            owned[i].difference_update((p.topic, p.partition) for p in parts)
        c.subscribe(["bench-848"], on_assign=on_assign, on_revoke=on_revoke)
        return c

    def balanced(cs, per):
        return all(len(owned[i]) in per for i in range(len(cs))) and sum(len(owned[i]) for i in range(len(cs))) == 64

    cs = [mk(i) for i in range(consumers)]
    t0 = now()
    deadline = t0 + timeout
    while not balanced(cs, (8,)) and now() < deadline:
        for c in cs:
            c.poll(0)
        time.sleep(0.001)
    first = now() - t0
    if not balanced(cs, (8,)):
        for c in cs:
            c.close()
        return {"error": "8 consumers not balanced after %d s: %s" % (timeout, sorted(len(v) for v in owned.values()))}
    # Let the first rebalances settle (late reconciliations still move partitions for a
    # moment after every member first holds 8), then count only what the 9th causes.
    settle_until = now() + 1.0
    while now() < settle_until:
        for c in cs:
            c.poll(0)
        time.sleep(0.001)
    revoked[0] = 0
    cs.append(mk(consumers))
    t1 = now()
    while not balanced(cs, (7, 8)) and now() < deadline:
        for c in cs:
            c.poll(0)
        time.sleep(0.001)
    second = now() - t1
    # Anything the 9th's rebalance still moves after the split is balanced counts too.
    settle_until = now() + 1.0
    while now() < settle_until:
        for c in cs:
            c.poll(0)
        time.sleep(0.001)
    ok = balanced(cs, (7, 8))
    moved = revoked[0]  # before the closes, which revoke everything
    for c in cs:
        c.close()
    if not ok:
        return {"error": "9 consumers not balanced: %s" % sorted(len(v) for v in owned.values())}
    return {"balanced_8_s": first, "ninth_rebalanced_s": second, "revoked_for_ninth": moved}


def commits(addr, broker, n=2000, timeout=120):
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": addr, "group.id": "bench-commit-%d-%d" % (os.getpid(), int(now() * 1000)),
                  "session.timeout.ms": 6000, "heartbeat.interval.ms": 500, "enable.auto.commit": False})
    got = []
    c.subscribe(["bench-commit"], on_assign=lambda c_, ps: got.extend(ps))
    deadline = now() + 30
    while not got and now() < deadline:
        c.poll(0.1)
    if not got:
        c.close()
        return {"error": "no assignment within 30 s"}
    lat = []
    t_start = now()
    errors = 0
    for i in range(n):
        t0 = now()
        try:
            res = c.commit(offsets=[TopicPartition("bench-commit", 0, i + 1)], asynchronous=False)
            if any(tp.error for tp in res or []):
                errors += 1
        except Exception:
            errors += 1
        lat.append(now() - t0)
        if now() - t_start > timeout:
            break
    total = now() - t_start
    stored = c.committed([TopicPartition("bench-commit", 0)], timeout=10)[0].offset
    c.close()
    lat.sort()
    out = {"commits_per_s": len(lat) / total, "p50_ms": lat[len(lat) // 2] * 1000,
           "p99_ms": lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000, "n": len(lat), "errors": errors,
           "committed_after": stored}
    if stored != len(lat):
        out["error"] = "committed offset read back as %s after %d commits" % (stored, len(lat))
    return out


def throughput(addr, broker, n=16000, size=1024, timeout=120):
    from confluent_kafka import Consumer, Producer, TopicPartition
    p = Producer({"bootstrap.servers": addr, "linger.ms": 5, "acks": "all", "batch.size": 1 << 20,
                  "queue.buffering.max.messages": 200000})
    value = b"v" * size
    failed = []
    t0 = now()
    for i in range(n):
        while True:
            try:
                p.produce("bench-tput", value=value, key=b"%08d" % i, partition=i % 4,
                          on_delivery=lambda err, m: err and failed.append(err))
                break
            except BufferError:
                p.poll(0.01)
        if i % 1000 == 0:
            p.poll(0)
    left = p.flush(timeout)
    t_prod = now() - t0
    if left or failed:
        return {"error": "%d undelivered, %d failed" % (left, len(failed))}
    c = Consumer({"bootstrap.servers": addr, "group.id": "bench-tput-reader", "enable.auto.commit": False,
                  "fetch.max.bytes": 50 << 20, "max.partition.fetch.bytes": 10 << 20})
    from confluent_kafka import OFFSET_BEGINNING
    c.assign([TopicPartition("bench-tput", part, OFFSET_BEGINNING) for part in range(4)])
    got, nbytes = 0, 0
    t0 = now()
    t_first = None
    deadline = t0 + timeout
    while got < n and now() < deadline:
        for m in c.consume(num_messages=10000, timeout=0.5):
            if not m.error():
                if t_first is None:
                    t_first = now()
                got += 1
                nbytes += len(m.value())
    t_end = now()
    c.close()
    mb = n * size / 1e6
    # from the first record received: the offset lookups before it are not fetch throughput
    t_fetch = t_end - (t_first or t0)
    out = {"produce_MBps": mb / t_prod, "fetch_MBps": nbytes / 1e6 / t_fetch if t_fetch > 0 else 0.0,
           "fetch_first_record_s": (t_first or t_end) - t0, "records": n}
    if got < n:
        out["error"] = "fetched %d of %d" % (got, n)
    return out


def offsetcommit(addr, broker, conns=16, seconds=3.0):
    host, port = kproto.split_hostport(addr.split(",")[0])

    def request(corr, group):
        body = kproto._str(group) + struct.pack(">i", -1) + kproto._str("") + struct.pack(">q", -1)
        body += struct.pack(">i", 1) + kproto._str("bench-oc") + struct.pack(">i", 1)
        body += struct.pack(">iq", corr % 16, corr) + kproto._str("")
        hdr = struct.pack(">hhi", kproto.OFFSET_COMMIT, 2, corr) + kproto._str("bench")
        msg = hdr + body
        return struct.pack(">i", len(msg)) + msg

    def coordinator(group):
        """The group's coordinator (the bootstrap broker itself, unless several brokers share
        the groups out)."""
        c = kproto.Conn(host, port, timeout=10)
        try:
            err, _node, chost, cport = c.find_coordinator(group)
        finally:
            c.close()
        if err:
            raise RuntimeError("FindCoordinator(%s): error %d" % (group, err))
        return chost, cport

    async def one(i, stop_at, counts, errors):
        group = "bench-oc-%d" % i
        r, w = await asyncio.open_connection(*coordinator(group))
        corr = 0
        try:
            while now() < stop_at:
                corr += 1
                w.write(request(corr, group))
                size = struct.unpack(">i", await r.readexactly(4))[0]
                resp = await r.readexactly(size)
                # correlation, topics[1], name, partitions[1], partition, error
                err = struct.unpack(">h", resp[-2:])[0]
                if err:
                    errors[0] += 1
                counts[i] += 1
        finally:
            w.close()

    async def main():
        counts, errors = [0] * conns, [0]
        t0 = now()
        await asyncio.wait_for(asyncio.gather(*(one(i, t0 + seconds, counts, errors) for i in range(conns))),
                               seconds + 30)
        return sum(counts) / (now() - t0), errors[0]
    rate, errors = asyncio.run(main())
    return {"round_trips_per_s": rate, "connections": conns, "errors": errors}


def memory(addr, broker, idle=200, members=16, timeout=90):
    if broker is None or broker.pid is None:
        return {"error": "no broker process"}
    from confluent_kafka import Consumer
    host, port = kproto.split_hostport(addr)
    # One connection served and closed first, on both sides: what the first connection
    # brings (a worker thread's allocator arena and stack pages, lazily built tables) is
    # paid once per process, not per connection.
    warm = kproto.Conn(host, port, timeout=10)
    warm.api_versions()
    warm.close()
    time.sleep(0.5)
    base = rss_kib(broker.pid)
    socks = []
    for _ in range(idle):
        c = kproto.Conn(host, port, timeout=10)
        c.api_versions()
        socks.append(c)
    time.sleep(0.5)
    after_conns = rss_kib(broker.pid)
    for c in socks:
        c.close()
    time.sleep(1.0)
    base2 = rss_kib(broker.pid)
    anon2, file2 = rss_split_kib(broker.pid)
    group = "bench-mem-%d" % os.getpid()
    cs = [Consumer({"bootstrap.servers": addr, "group.id": group, "session.timeout.ms": 10000,
                    "heartbeat.interval.ms": 1000, "enable.auto.commit": False}) for _ in range(members)]
    assigned = set()
    for i, c in enumerate(cs):
        c.subscribe(["bench-mem"], on_assign=(lambda i: lambda c_, ps: assigned.add(i))(i))
    deadline = now() + timeout
    while len(assigned) < members and now() < deadline:
        for c in cs:
            c.poll(0)
        time.sleep(0.002)
    stable = len(assigned) == members
    t_end = now() + 1.0
    while now() < t_end:
        for c in cs:
            c.poll(0)
        time.sleep(0.01)
    after_members = rss_kib(broker.pid)
    anon3, file3 = rss_split_kib(broker.pid)
    for c in cs:
        c.close()
    out = {"rss_base_KiB": base, "per_idle_connection_KiB": (after_conns - base) / idle,
           "per_stable_member_KiB": (after_members - base2) / members, "members": members,
           # the same growth split: anonymous memory (heap, stacks), and pages of the program's
           # files (its code, paged in the first time a group's requests run it: once, not per
           # member; BENCHMARKS.md, "2026-12-07: per Stable member, profiled")
           "per_stable_member_anon_KiB": (anon3 - anon2) / members,
           "per_stable_member_file_KiB": (file3 - file2) / members,
           "idle_connections": idle}
    if not stable:
        out["error"] = "only %d of %d members assigned" % (len(assigned), members)
    return out


def rss_split_kib(pid):
    """(RssAnon, RssFile) of the process, KiB."""
    got = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(("RssAnon:", "RssFile:")):
                got[line.split(":")[0]] = int(line.split()[1])
    return got.get("RssAnon"), got.get("RssFile")


def txn(addr, broker, n=500, per=10, timeout=120):
    """One transactional producer: n transactions of `per` 1 KiB records each (begin, produce,
    commit); transactions/s and the commit_transaction latency (the call, flush included)."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": addr, "transactional.id": "bench-txn-%d-%d" % (os.getpid(), int(now() * 1000)),
                  "linger.ms": 0})
    p.init_transactions(30)
    value = b"v" * 1024
    lat = []
    t_start = now()
    errors = 0
    for i in range(n):
        p.begin_transaction()
        for j in range(per):
            p.produce("bench-txn", value, key=b"%d" % j)
        t0 = now()
        try:
            p.commit_transaction(30)
        except Exception:
            errors += 1
            p.abort_transaction(30)
        lat.append(now() - t0)
        if now() - t_start > timeout:
            break
    total = now() - t_start
    lat.sort()
    return {"txn_per_s": len(lat) / total, "commit_p50_ms": lat[len(lat) // 2] * 1000,
            "commit_p99_ms": lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000, "n": len(lat), "errors": errors}


def restart1m(addr, broker, groups=1000, partitions=1000, conns=8, timeout=600):
    """`groups` x `partitions` committed offsets (1,000,000 by default: one OffsetCommit of every
    partition per group, from `conns` connections), then the broker stopped (SIGTERM) and started
    again on the same storage: the time from the new process's start to its first correct
    OffsetFetch (the last group's offsets, all of them)."""
    host, port = kproto.split_hostport(addr)
    topic = "bench-1m"
    c = kproto.Conn(host, port, timeout=60)
    err, msg = c.create_topics({topic: partitions})[topic]
    c.close()
    if err:
        return {"error": "CreateTopics: %d %s" % (err, msg)}

    def request(corr, group):
        body = kproto._str(group) + struct.pack(">i", -1) + kproto._str("") + struct.pack(">q", -1)
        body += struct.pack(">i", 1) + kproto._str(topic) + struct.pack(">i", partitions)
        body += b"".join(struct.pack(">iq", p, corr * 1000 + p) + kproto._str("") for p in range(partitions))
        hdr = struct.pack(">hhi", kproto.OFFSET_COMMIT, 2, corr) + kproto._str("bench")
        msg = hdr + body
        return struct.pack(">i", len(msg)) + msg

    async def one(i, errors):
        r, w = await asyncio.open_connection(host, port)
        try:
            for g in range(i, groups, conns):
                w.write(request(g + 1, "bench-1m-%d" % g))
                size = struct.unpack(">i", await r.readexactly(4))[0]
                resp = await r.readexactly(size)
                # correlation, topics[1], name, partitions[n]: (partition, error) pairs (v2)
                at = 4 + 4 + 2 + len(topic) + 4
                pairs = [struct.unpack(">ih", resp[k:k + 6]) for k in range(at, len(resp), 6)]
                errors[0] += sum(1 for _, e in pairs if e) + (partitions - len(pairs))
        finally:
            w.close()

    async def commit_all():
        errors = [0]
        await asyncio.wait_for(asyncio.gather(*(one(i, errors) for i in range(conns))), timeout)
        return errors[0]
    t0 = now()
    errors = asyncio.run(commit_all())
    commit_s = now() - t0
    code, _, killed = broker.stop(60)
    last = groups - 1
    want = {(topic, p): (last + 1) * 1000 + p for p in range(partitions)}
    args = [a if a != addr else "127.0.0.1:0" for a in broker.args]
    again = Broker(broker.cmd, args, broker.log_path + ".restart", name=broker.name + "-restart")
    t1 = now()
    again.start(timeout)
    try:
        h, p = kproto.split_hostport(again.address)
        while True:
            try:
                c = kproto.Conn(h, p, timeout=60)
                got = c.offset_fetch("bench-1m-%d" % last, list(want))
                c.close()
                if {tp: o for tp, (o, e) in got.items()} == want:
                    break
            except OSError:
                pass
            if now() - t1 > timeout:
                return {"error": "no correct OffsetFetch within %ds of the restart" % timeout}
            time.sleep(0.05)
        restart_s = now() - t1
    finally:
        again.stop(60)
    return {"offsets": groups * partitions, "commit_s": commit_s, "commit_errors": errors,
            "stopped_cleanly": code == 0 and not killed, "restart_to_fetch_s": restart_s}


class Cluster:
    """Several of our brokers over one PostgreSQL database (`--postgres-cluster`): `address`
    is the bootstrap list of all of them."""

    def __init__(self, cmd, url, nodes, logdir, lease):
        self.cmd, self.url, self.logdir, self.lease = cmd, url, logdir, lease
        self.brokers = {}
        for n in range(1, nodes + 1):
            self.start(n)

    def start(self, node):
        args = broker_args(None, None, self.url) + ["--node-id", str(node)] + self.lease
        self.brokers[node] = start("pg-node-%d" % node, self.cmd, args, self.logdir)

    @property
    def address(self):
        return ",".join(b.address for b in self.brokers.values())

    pid = None  # the memory workload measures one process

    def stop(self, timeout=15):
        for b in self.brokers.values():
            b.stop(timeout)
            b.proc.close_log()


def coordinator_node(address, group):
    host, port = kproto.split_hostport(address)
    c = kproto.Conn(host, port, timeout=5)
    try:
        err, node, _h, _p = c.find_coordinator(group)
    finally:
        c.close()
    return err, node


def failover(addr, cluster, kills=20, timeout=30):
    """SIGKILL the coordinator of a group `kills` times: seconds from the kill until another
    live broker names itself the group's coordinator and answers OffsetFetch for it without
    error (the killed node is started again after each round, on a new port)."""
    if not isinstance(cluster, Cluster):
        return {"error": "failover needs --postgres-cluster"}
    group = "bench-failover"
    took = []
    for _ in range(kills):
        deadline = now() + timeout
        while True:
            answers = {coordinator_node(b.address, group) for b in cluster.brokers.values()}
            if len(answers) == 1 and next(iter(answers))[0] == 0:
                break
            if now() > deadline:
                return {"error": "the brokers did not agree on a coordinator: %s" % answers, "kills": len(took)}
            time.sleep(0.1)
        node = next(iter(answers))[1]
        victim = cluster.brokers.pop(node)
        victim.proc.kill()
        victim.proc.p.wait(10)
        victim.proc.close_log()
        t0 = now()
        served = False
        while not served:
            if now() - t0 > timeout:
                return {"error": "no survivor served the group within %d s" % timeout, "kills": len(took)}
            for b in cluster.brokers.values():
                try:
                    err, by = coordinator_node(b.address, group)
                    if err == 0 and by != node and by in cluster.brokers:
                        host, port = kproto.split_hostport(cluster.brokers[by].address)
                        c = kproto.Conn(host, port, timeout=5)
                        try:
                            got = c.offset_fetch(group, [("bench-tput", 0)])
                        finally:
                            c.close()
                        served = all(not e for _o, e in got.values())
                except OSError:
                    pass
                if served:
                    break
            if not served:
                time.sleep(0.02)
        took.append(now() - t0)
        cluster.start(node)
    took.sort()
    return {"failover_median_s": took[len(took) // 2], "failover_max_s": took[-1], "kills": len(took)}


WORKLOADS = [("join8", join8), ("kip848", kip848), ("commits", commits), ("throughput", throughput),
             ("offsetcommit", offsetcommit), ("memory", memory), ("txn", txn), ("restart1m", restart1m),
             ("failover", failover)]


# ---------------------------------------------------------------------------------------------


class Scraper:
    """Fetches /metrics and the page of groups from HOST:PORT every 0.2 s (a scraper and a
    reader, far more often than Prometheus's default 15 s) until stopped; counts the answers."""

    def __init__(self, address):
        import threading
        self.address, self.done, self.count = address, threading.Event(), 0
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        import urllib.request
        while not self.done.wait(0.2):
            for path in ("/metrics", "/"):
                try:
                    with urllib.request.urlopen("http://%s%s" % (self.address, path), timeout=5) as r:
                        r.read()
                    self.count += 1
                except OSError:
                    pass

    def stop(self):
        self.done.set()
        self.thread.join(10)
        return self.count


def start(kind, cmd, args, logdir):
    b = Broker(cmd, args, os.path.join(logdir, kind + ".log"), name=kind)
    b.start(30)
    return b


# Our broker's data-dir variants: the flags beside --data-dir.
STORES = {"log": [], "flush": ["--offsets-flush-interval-ms", "1000", "--log-flush-interval-ms", "1000"],
          "json": ["--offsets-store", "json"]}


def broker_args(data_dir=None, store=None, postgres=None):
    args = ["--listen", "127.0.0.1:0", "--group-initial-rebalance-delay-ms", "0",
            "--group-min-session-timeout-ms", "1000",
            "--group-consumer-heartbeat-interval-ms", str(CONSUMER_HEARTBEAT_MS)]
    if postgres:
        args += ["--postgres", postgres]
    elif data_dir:
        args += ["--data-dir", data_dir] + STORES[store]
    for t, n in TOPICS.items():
        args += ["--topic", "%s:%d" % (t, n)]
    return args


def fmt(v, unit=""):
    if v is None:
        return "-"
    if isinstance(v, float):
        return ("%.3g" % v if v < 100 else "%.0f" % v) + unit
    return str(v) + unit


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--broker", default=os.environ.get("INTEROP_BROKER") or os.path.join(ROOT, "target", "release", "broker"))
    ap.add_argument("--mock-only", action="store_true")
    ap.add_argument("--only", action="append", default=[], help="workload name (repeatable)")
    ap.add_argument("--quick", action="store_true", help="smaller counts (a smoke run)")
    ap.add_argument("--json", default=os.path.join(ROOT, "target", "interop", "bench.json"))
    ap.add_argument("--postgres", action="store_true",
                    help="our broker with --postgres (a throwaway PostgreSQL with its durable defaults, a fresh "
                         "database per workload) beside --data-dir, instead of the mock and the other stores")
    ap.add_argument("--postgres-cluster", action="store_true",
                    help="one broker with --postgres against three over one database (a throwaway "
                         "PostgreSQL, a fresh database per workload; leases of 3 s, heartbeats every 0.5 s), "
                         "with the failover workload (20 SIGKILLs of a group's coordinator)")
    ap.add_argument("--record-overhead", action="store_true",
                    help="our in-memory broker as it starts by default (the record of the last "
                         "10,000 requests kept for the test kit) against --requests-recorded 0, "
                         "side by side")
    ap.add_argument("--metrics-overhead", action="store_true",
                    help="our in-memory broker without --metrics-listen against the same with it, "
                         "/metrics and the page of groups fetched every second meanwhile, side by "
                         "side (the commit, produce and OffsetCommit workloads; medians of --rounds)")
    ap.add_argument("--metrics-data-dir", action="store_true",
                    help="with --metrics-overhead: both sides with --data-dir, so that the log's "
                         "fsyncs are timed into their histogram on the metrics side")
    ap.add_argument("--rounds", type=int, default=1,
                    help="with --metrics-overhead: run both sides this many times, in alternating "
                         "order (without then with, with then without, ...); the table shows medians")
    a = ap.parse_args()

    logdir = os.path.join(ROOT, "target", "interop", "bench-logs")
    os.makedirs(logdir, exist_ok=True)
    have_ours = not a.mock_only and os.path.isfile(a.broker) and os.access(a.broker, os.X_OK)
    targets = [("mock", [python_exe(), os.path.join(INTEROP, "lib", "mockcluster.py"), "--api-versions-like-broker"], None)]
    if have_ours:
        targets.append(("ours", [a.broker], None))
        for store in STORES:
            targets.append(("ours-" + store, [a.broker], store))
    elif not a.mock_only:
        print("bench: no broker binary at %s; measuring the mock only" % a.broker)

    if a.record_overhead and have_ours:
        targets = [("ours", [a.broker], None), ("ours-norecord", [a.broker], "norecord")]
    if a.metrics_overhead and have_ours:
        pair = [("ours", [a.broker], None), ("ours-metrics", [a.broker], "metrics")]
        if a.metrics_data_dir:
            pair = [("ours-log", [a.broker], "log"), ("ours-log-metrics", [a.broker], "log-metrics")]
        targets = []
        for r in range(max(1, a.rounds)):
            targets += pair if r % 2 == 0 else pair[::-1]
    pg = None
    if a.postgres and have_ours:
        import pgtemp
        pg = pgtemp.TempPostgres(os.path.join(logdir, "postgres.log"), durable=True)
        targets = [("ours-log", [a.broker], "log"), ("ours-pg", [a.broker], "pg")]
    lease = ["--broker-session-timeout-ms", "3000", "--broker-heartbeat-interval-ms", "500"]
    if a.postgres_cluster and have_ours:
        import pgtemp
        pg = pgtemp.TempPostgres(os.path.join(logdir, "postgres.log"), durable=True)
        targets = [("ours-pg", [a.broker], "pg"), ("ours-pg3", [a.broker], "pg3")]
        a.postgres = True
    selected = [(n, f) for n, f in WORKLOADS if not a.only or n in a.only]
    if a.metrics_overhead and not a.only:
        selected = [(n, f) for n, f in selected if n in ("commits", "throughput", "offsetcommit")]
    if not a.postgres_cluster:
        selected = [(n, f) for n, f in selected if n != "failover"]
    else:
        selected = [(n, f) for n, f in selected if n in ("commits", "throughput", "offsetcommit", "failover")]
    quick = {"join8": dict(runs=1), "commits": dict(n=300), "throughput": dict(n=5000),
             "offsetcommit": dict(seconds=1.0), "memory": dict(idle=50, members=4),
             "txn": dict(n=50), "restart1m": dict(groups=100, partitions=100)} if a.quick else {}
    if a.postgres:
        # the figure: durable commits from 64 connections
        quick = dict(quick, offsetcommit=dict(quick.get("offsetcommit", {}), conns=64))
    # the data directory only matters where offsets or records are written
    data_dir_workloads = {"commits", "offsetcommit", "throughput", "txn", "restart1m"}
    results = {}
    for kind, cmd, store in targets:
        for name, fn in selected:
            if store and name not in data_dir_workloads and not a.postgres and store not in ("metrics", "log-metrics"):
                continue
            if name == "restart1m" and not store:
                continue  # nothing to restart on: the mock and the memory broker keep nothing
            with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
                # a fresh broker (and data directory) per workload: one workload's state does
                # not weigh on the next
                url = None
                if store in ("pg", "pg3"):
                    url = pg.create_database("bench_%s_%s_%d" % (name, store, os.getpid()))
                if name == "failover" and store != "pg3":
                    continue
                if store == "pg3":
                    b = Cluster(cmd, url, 3, logdir, lease)
                    time.sleep(1.5)  # the three share the slots out (two heartbeats)
                elif store == "pg" and a.postgres_cluster:
                    b = start(kind, cmd, broker_args(None, None, url) + lease, logdir)
                elif store == "norecord":
                    b = start(kind, cmd, broker_args() + ["--requests-recorded", "0"], logdir)
                elif store in ("metrics", "log-metrics"):
                    base = broker_args(tmp, "log") if store == "log-metrics" else broker_args()
                    b = start(kind, cmd, base + ["--metrics-listen", "127.0.0.1:0"], logdir)
                    b.scraper = Scraper(b.metrics())
                else:
                    b = start(kind, cmd, broker_args(tmp if store else None, store, url), logdir)
                try:
                    t0 = now()
                    r = fn(b.address, b, **quick.get(name, {}))
                    r["wall_s"] = round(now() - t0, 2)
                except Exception as e:
                    r = {"error": "%s: %s" % (type(e).__name__, e)}
                finally:
                    scraper = getattr(b, "scraper", None)
                    if scraper:
                        r["scrapes"] = scraper.stop()
                    b.stop(15)
                    if not isinstance(b, Cluster):
                        b.proc.close_log()
                if a.metrics_overhead:
                    results.setdefault(name, {}).setdefault(kind + "-runs", []).append(r)
                    runs = results[name][kind + "-runs"]
                    r = {k: statistics.median([x[k] for x in runs if isinstance(x.get(k), (int, float))])
                         for k in r if all(isinstance(x.get(k), (int, float)) for x in runs)}
                results.setdefault(name, {})[kind] = r
                print("%-12s %-9s %s" % (name, kind, json.dumps({k: (round(v, 3) if isinstance(v, float) else v)
                                                                 for k, v in r.items()})), flush=True)

    if pg:
        pg.stop()
    # side by side
    rows = [("join8", "seconds", "join 8 consumers (s)", "lower"),
            ("kip848", "balanced_8_s", "KIP-848: 8 balanced on 64 (s)", "lower"),
            ("kip848", "revoked_for_ninth", "KIP-848: revoked for a 9th", "lower"),
            ("kip848", "ninth_rebalanced_s", "KIP-848: 9th balanced (s)", "lower"),
            ("commits", "commits_per_s", "sync commits/s", "higher"),
            ("commits", "p50_ms", "commit p50 (ms)", "lower"),
            ("commits", "p99_ms", "commit p99 (ms)", "lower"),
            ("throughput", "produce_MBps", "produce MB/s (1 KiB)", "higher"),
            ("throughput", "fetch_MBps", "fetch MB/s (1 KiB)", "higher"),
            ("offsetcommit", "round_trips_per_s", "OffsetCommit rt/s, %d conns" % (64 if a.postgres else 16), "higher"),
            ("txn", "txn_per_s", "transactions/s (10 x 1 KiB)", "higher"),
            ("restart1m", "commit_s", "commit 1M offsets (s)", "lower"),
            ("restart1m", "restart_to_fetch_s", "restart to OffsetFetch, 1M (s)", "lower"),
            ("txn", "commit_p50_ms", "commit_transaction p50 (ms)", "lower"),
            ("txn", "commit_p99_ms", "commit_transaction p99 (ms)", "lower"),
            ("memory", "per_idle_connection_KiB", "RSS per idle connection (KiB)", "lower"),
            ("memory", "per_stable_member_KiB", "RSS per Stable member (KiB)", "lower"),
            ("memory", "per_stable_member_anon_KiB", "  of which anonymous (KiB)", "lower"),
            ("memory", "per_stable_member_file_KiB", "  of which code paged in (KiB)", "lower")]
    print()
    kinds = ("mock", "ours", "ours-log", "ours-flush", "ours-json")
    if a.postgres:
        kinds = ("ours-log", "ours-pg")
    if a.record_overhead:
        kinds = ("ours", "ours-norecord")
    if a.metrics_overhead:
        kinds = ("ours-log", "ours-log-metrics") if a.metrics_data_dir else ("ours", "ours-metrics")
    if a.postgres_cluster:
        kinds = ("ours-pg", "ours-pg3")
        rows += [("failover", "failover_median_s", "failover median (s), 20 kills", "lower"),
                 ("failover", "failover_max_s", "failover max (s), 20 kills", "lower")]
    if a.metrics_overhead or a.record_overhead:
        print("%-32s" % "workload" + "".join("%18s" % k for k in kinds) + "%16s" % "ratio")
    else:
        print("%-32s" % "workload" + "".join("%12s" % k for k in kinds)
              + ("%16s" % ("3 vs 1" if a.postgres_cluster else "pg vs log") if a.postgres
                 else "%16s%16s" % ("ours vs mock", "flush vs mock")))
    for wl, key, label, better in rows:
        if wl not in results:
            continue
        vals = {k: results[wl].get(k, {}).get(key) for k in kinds}

        def ratio(o, m=vals.get("mock")):
            if isinstance(m, (int, float)) and isinstance(o, (int, float)) and m and o:
                x = (m / o) if better == "lower" else (o / m)
                return "%.2fx %s" % (x, "better" if x >= 1 else "worse")
            return "-"
        if a.postgres_cluster:
            print("%-32s" % label + "".join("%12s" % fmt(vals[k]) for k in kinds)
                  + "%16s" % ratio(vals["ours-pg3"], vals["ours-pg"]))
            continue
        if a.postgres:
            print("%-32s" % label + "".join("%12s" % fmt(vals[k]) for k in kinds)
                  + "%16s" % ratio(vals["ours-pg"], vals["ours-log"]))
            continue
        if a.metrics_overhead or a.record_overhead:
            print("%-32s" % label + "".join("%18s" % fmt(vals[k]) for k in kinds)
                  + "%16s" % ratio(vals[kinds[1]], vals[kinds[0]]))
            continue
        print("%-32s" % label + "".join("%12s" % fmt(vals[k]) for k in kinds)
              + "%16s%16s" % (ratio(vals["ours"]), ratio(vals["ours-flush"])))
    j8 = results.get("join8", {})
    if "seconds" in j8.get("mock", {}) and "seconds" in j8.get("ours", {}):
        x = j8["mock"]["seconds"] / j8["ours"]["seconds"]
        print("\njoin8 target (ours >= 5x faster than the mock): %s (%.1fx)" % ("met" if x >= 5 else "NOT met", x))
    errors = ["%s/%s: %s" % (wl, k, r["error"]) for wl, rs in results.items() for k, r in rs.items() if "error" in r]
    for e in errors:
        print("error: " + e)
    os.makedirs(os.path.dirname(a.json), exist_ok=True)
    with open(a.json, "w") as f:
        json.dump(results, f, indent=2, sort_keys=True)
    print("results: %s" % a.json)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
