#!/usr/bin/env python3
"""One client process of the interop suite: a consumer or a producer of one Python client.

    pyclient.py --client {kafka-python,aiokafka,confluent} --role {consume,produce} --spec JSON

It writes one JSON object per line on stdout (flushed), each with "ev" and "t" (CLOCK_MONOTONIC
seconds, the same clock in every process of the machine), and reads commands on stdin:
"stop" (or end of input) ends it gracefully: a consumer closes (leaving its group unless it is
static), a producer stops producing and flushes. Diagnostics go to stderr.

Consumer events:
  started   {client, label, pid}
  assigned  {gen, mid, added, owned, proto?}   after the client's assign callback
  revoked   {gen, mid, removed, owned}         revoke callback (eager: everything; cooperative: the moved part)
  lost      {gen, mid, removed, owned}
  generation {gen, mid}                        the generation/member id the client holds changed
  recs      {gen, gen0, mid, r: [[topic, partition, offset, key]...], f?: full records}
            gen0/gen: the generation before/after the poll that returned the records
  commit    {gen, mid, t0, ok, err, offs: [[topic, partition, next offset]...]}
  uncommitted {gen, mid, offs: [[topic, partition, next offset]...]}
            records of partitions revoked (or lost) since their delivery: the worker does not
            commit them (see "Committing correctly" in interop/README.md); whoever holds the
            partition now reads them again from the group's committed offset
  closed    {}
Producer events:
  produced  {r: [[topic, key, partition, offset]...]}   acknowledged records
  done      {n}
Both: error {msg} (fatal ones end the process with exit code 1).

The generation each record is tagged with is the coordinator's generation as the client knows
it right after the poll that returned the record (see interop/README.md, "Generations").
"""
import argparse
import asyncio
import json
import os
import struct
import sys
import threading
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import records  # noqa: E402

_out_lock = threading.Lock()


def emit(ev, **kw):
    kw["ev"] = ev
    kw["t"] = time.monotonic()
    line = json.dumps(kw, separators=(",", ":"))
    with _out_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def log(msg):
    sys.stderr.write("[pyclient %d] %s\n" % (os.getpid(), msg))
    sys.stderr.flush()


stop = threading.Event()


def watch_stdin():
    for line in sys.stdin:
        if line.strip() == "stop":
            break
    stop.set()


def tp_list(tps):
    return sorted([tp[0], tp[1]] for tp in tps)


def ts_type_name(code, client):
    if client == "confluent":  # TIMESTAMP_NOT_AVAILABLE 0, CREATE_TIME 1, LOG_APPEND_TIME 2
        return {0: "none", 1: "create", 2: "append"}.get(code, str(code))
    return {0: "create", 1: "append", -1: "none", None: "none"}.get(code, str(code))


def parse_cgmd(blob):
    """librdkafka's serialized consumer group metadata ("CGMDv2:", int32 generation in host
    byte order, NUL-terminated group id, NUL-terminated member id, ...). Returns (gen, mid)."""
    if not isinstance(blob, (bytes, bytearray)) or not blob.startswith(b"CGMDv2:"):
        return None, None
    gen = struct.unpack("=i", blob[7:11])[0]
    rest = blob[11:]
    group_end = rest.find(b"\0")
    mid_end = rest.find(b"\0", group_end + 1)
    mid = rest[group_end + 1:mid_end].decode(errors="replace")
    return gen, mid


# ---------------------------------------------------------------------------------------------
# consumers: start(), poll() -> [(gen0, gen, [rec])], ident() -> (gen, mid), commit({(t, p): next}), close()
# rec = (topic, partition, offset, key bytes, value bytes, [(hk, hv)], timestamp, ts type, holding)
# holding = listener.holding((topic, partition)) taken when the record was delivered (see Listener)


class Listener:
    """Shared bookkeeping of the assign/revoke callbacks.

    `holding(tp)` names the member's current continuous holding of a partition: None when it
    does not hold tp, and a number that changes every time tp is assigned, revoked or lost.
    Each record carries the holding of its partition at delivery; the worker commits a record's
    offset only while that holding is still the current one. Kafka accepts a current member's
    commit of any partition (ClassicGroup.validateOffsetCommit checks member and generation,
    not ownership), so committing a record delivered before a revocation, after it, can move
    the group's committed offset backwards under the partition's next owner."""

    def __init__(self, consumer):
        self.consumer = consumer
        self.owned = set()
        self.changes = {}   # tp -> how many assign/revoke/lost callbacks named it

    def _changed(self, tps):
        for tp in tps:
            self.changes[tp] = self.changes.get(tp, 0) + 1

    def holding(self, tp):
        return self.changes.get(tp, 0) if tp in self.owned else None

    def assigned(self, tps, **extra):
        self.owned |= set(tps)
        self._changed(tps)
        gen, mid = self.consumer.ident()
        emit("assigned", gen=gen, mid=mid, added=tp_list(tps), owned=tp_list(self.owned), **extra)

    def revoked(self, tps, ev="revoked"):
        self.owned -= set(tps)
        self._changed(tps)
        gen, mid = self.consumer.ident()
        emit(ev, gen=gen, mid=mid, removed=tp_list(tps), owned=tp_list(self.owned))


class KafkaPythonConsumer:
    def __init__(self, spec):
        self.spec = spec

    def start(self):
        import kafka
        from kafka.consumer.subscription_state import ConsumerRebalanceListener
        from kafka.coordinator.assignors.range import RangePartitionAssignor
        from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
        from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
        from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
        strategies = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor,
                      "sticky": StickyPartitionAssignor, "cooperative-sticky": CooperativeStickyAssignor}
        s = self.spec
        conf = dict(bootstrap_servers=s["bootstrap"], group_id=s["group"], client_id=s.get("label", "interop"),
                    auto_offset_reset="earliest", enable_auto_commit=False,
                    session_timeout_ms=s.get("session_ms", 10000),
                    heartbeat_interval_ms=s.get("heartbeat_ms", 1000),
                    partition_assignment_strategy=[strategies[s.get("strategy", "range")]],
                    max_poll_records=s.get("max_poll_records", 500))
        if s.get("instance_id"):
            conf["group_instance_id"] = s["instance_id"]
        if s.get("kafka_python_api_version"):
            conf["api_version"] = tuple(s["kafka_python_api_version"])
        self.c = kafka.KafkaConsumer(**conf)
        lst = self.listener = Listener(self)

        class L(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked):
                lst.revoked([(tp.topic, tp.partition) for tp in revoked])

            def on_partitions_assigned(self, assigned):
                lst.assigned([(tp.topic, tp.partition) for tp in assigned])

            def on_partitions_lost(self, lost):
                lst.revoked([(tp.topic, tp.partition) for tp in lost], ev="lost")

        self.c.subscribe(s["topics"], listener=L())
        # kafka-python 3.0.12 can strand a member that rejoins because, as leader, it assigned
        # before it had the topics' metadata (its first join does not wait for it): load the
        # metadata before the first join (interop/README.md, "kafka-python 3.0.12: a rejoin
        # finished in the background")
        for t in s["topics"]:
            self.c.partitions_for_topic(t)

    def ident(self):
        m = self.c.group_metadata()
        return m.generation_id, m.member_id

    def poll(self):
        """KafkaConsumer.poll() rejoins the group (coordinator.poll) before it fetches, in the
        caller's thread, and drops fetched records of partitions no longer assigned: the records
        it returns belong to the generation current when it returns."""
        out = []
        for tp, msgs in self.c.poll(timeout_ms=200).items():
            holding = self.listener.holding((tp.topic, tp.partition))
            for m in msgs:
                out.append((m.topic, m.partition, m.offset, m.key, m.value, list(m.headers or []),
                            m.timestamp, ts_type_name(m.timestamp_type, "kafka-python"), holding))
        gen = self.ident()[0]
        return [(gen, gen, out)] if out else []

    def commit(self, offs):
        from kafka.structs import OffsetAndMetadata, TopicPartition
        self.c.commit({TopicPartition(t, p): OffsetAndMetadata(o, "", -1) for (t, p), o in offs.items()})

    def close(self):
        self.c.close(autocommit=False)


class AIOKafkaConsumer:
    def __init__(self, spec):
        self.spec = spec
        self.loop = asyncio.new_event_loop()

    def run(self, coro):
        return self.loop.run_until_complete(coro)

    def start(self):
        from aiokafka import AIOKafkaConsumer as C
        from aiokafka.abc import ConsumerRebalanceListener
        from aiokafka.coordinator.assignors.range import RangePartitionAssignor
        from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
        from aiokafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
        strategies = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor,
                      "sticky": StickyPartitionAssignor}
        s = self.spec
        conf = dict(bootstrap_servers=s["bootstrap"], group_id=s["group"], client_id=s.get("label", "interop"),
                    auto_offset_reset="earliest", enable_auto_commit=False,
                    session_timeout_ms=s.get("session_ms", 10000),
                    heartbeat_interval_ms=s.get("heartbeat_ms", 1000),
                    partition_assignment_strategy=(strategies[s.get("strategy", "range")],),
                    max_poll_records=s.get("max_poll_records", 500))
        if s.get("instance_id"):
            conf["group_instance_id"] = s["instance_id"]
        lst = self.listener = Listener(self)

        class L(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked):
                lst.revoked([(tp.topic, tp.partition) for tp in revoked])

            def on_partitions_assigned(self, assigned):
                lst.assigned([(tp.topic, tp.partition) for tp in assigned])

        async def go():
            self.c = C(**conf)
            await self.c.start()  # subscribing before start() would make start() wait for an assignment
            self.c.subscribe(s["topics"], listener=L())
        self.run(go())

    def ident(self):
        co = self.c._coordinator  # internal: aiokafka exposes no public generation
        return co.generation, co.member_id

    def poll(self):
        """The coordinator runs as a task beside getmany(): a rebalance may complete while it
        waits, so a batch whose generation changed meanwhile is ambiguous (gen0 != gen)."""
        out = []
        gen0 = self.ident()[0]
        batches = self.run(self.c.getmany(timeout_ms=200))
        gen = self.ident()[0]
        for tp, msgs in batches.items():
            # getmany() returns only records of the assignment active when it returns (the
            # fetcher drops the others), and the callbacks run inside it: the holding now is
            # the one they were delivered under
            holding = self.listener.holding((tp.topic, tp.partition))
            for m in msgs:
                out.append((m.topic, m.partition, m.offset, m.key, m.value, list(m.headers or []),
                            m.timestamp, ts_type_name(m.timestamp_type, "aiokafka"), holding))
        return [(gen0, gen, out)] if out else []

    def commit(self, offs):
        from aiokafka.structs import TopicPartition
        self.run(self.c.commit({TopicPartition(t, p): o for (t, p), o in offs.items()}))

    def close(self):
        self.run(self.c.stop())


class ConfluentConsumer:
    def __init__(self, spec):
        self.spec = spec

    def start(self):
        import confluent_kafka
        s = self.spec
        conf = {"bootstrap.servers": s["bootstrap"], "group.id": s["group"], "client.id": s.get("label", "interop"),
                "auto.offset.reset": "earliest", "enable.auto.commit": False}
        if s.get("group_protocol") == "consumer":
            # KIP-848: the broker sets the session and heartbeat and assigns; librdkafka
            # refuses the classic protocol's settings with it.
            conf["group.protocol"] = "consumer"
            if s.get("remote_assignor"):
                conf["group.remote.assignor"] = s["remote_assignor"]
        else:
            conf.update({"session.timeout.ms": s.get("session_ms", 10000),
                         "heartbeat.interval.ms": s.get("heartbeat_ms", 1000),
                         "partition.assignment.strategy": s.get("strategy", "range")})
        if s.get("instance_id"):
            conf["group.instance.id"] = s["instance_id"]
        conf.update(s.get("extra_conf", {}))
        if os.environ.get("INTEROP_RDKAFKA_DEBUG"):
            # librdkafka's own trace (for example "cgrp,protocol") into the worker's log
            conf["debug"] = os.environ["INTEROP_RDKAFKA_DEBUG"]
        self.c = confluent_kafka.Consumer(conf, logger=None)
        lst = self.listener = Listener(self)

        def on_assign(c, parts):
            lst.assigned([(p.topic, p.partition) for p in parts])

        def on_revoke(c, parts):
            lst.revoked([(p.topic, p.partition) for p in parts])

        def on_lost(c, parts):
            lst.revoked([(p.topic, p.partition) for p in parts], ev="lost")

        self.c.subscribe(s["topics"], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)

    def ident(self):
        try:
            gen, mid = parse_cgmd(self.c.consumer_group_metadata())
        except Exception:  # not joined yet
            gen, mid = None, None
        return gen, (mid or self.c.memberid())

    def poll(self):
        """One message per rd_kafka_consumer_poll(), so that a rebalance callback served inside
        a call separates the messages before it from those after it: each message is tagged
        with the generation read right before and right after its own poll. The messages of
        up to 0.2 s are returned together, so a rebalance can fall between a message's
        delivery and its commit: the holding each carries lets run_consumer leave it out."""
        groups = []
        deadline = time.monotonic() + 0.2
        n = 0
        while n < 500:
            gen0 = self.ident()[0]
            m = self.c.poll(max(0.0, deadline - time.monotonic()))
            if m is None:
                break
            gen = self.ident()[0]
            if m.error():
                emit("error", msg="consume: %s" % m.error(), fatal=False)
                continue
            ts_type, ts = m.timestamp()
            # the callbacks served inside this poll ran before it returned the message, and
            # librdkafka drops messages fetched under an assignment older than the current one
            # (op version barrier), so the holding right after the poll is the message's
            rec = (m.topic(), m.partition(), m.offset(), m.key(), m.value(), list(m.headers() or []),
                   ts, ts_type_name(ts_type, "confluent"), self.listener.holding((m.topic(), m.partition())))
            if groups and groups[-1][0] == gen0 and groups[-1][1] == gen:
                groups[-1][2].append(rec)
            else:
                groups.append((gen0, gen, [rec]))
            n += 1
        return groups

    def commit(self, offs):
        from confluent_kafka import TopicPartition
        res = self.c.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offs.items()], asynchronous=False)
        bad = [str(tp.error) for tp in (res or []) if tp.error]
        if bad:
            raise RuntimeError("; ".join(bad))

    def close(self):
        self.c.close()


CONSUMERS = {"kafka-python": KafkaPythonConsumer, "aiokafka": AIOKafkaConsumer, "confluent": ConfluentConsumer}


def run_consumer(client, spec):
    c = CONSUMERS[client](spec)
    emit("started", client=client, label=spec.get("label"), pid=os.getpid())
    c.start()
    full = spec.get("full", False)
    do_commit = spec.get("commit", True)
    errors = 0
    last_ident = None
    while not stop.is_set():
        ident = c.ident()
        if ident != last_ident:
            # not every client calls its assign callback in every generation (kafka-python's
            # cooperative protocol does not when nothing is added): report the change itself
            emit("generation", gen=ident[0], mid=ident[1])
            last_ident = ident
        try:
            batches = c.poll()
        except Exception as e:
            # reported (the scenario fails on it) but not fatal: a client may recover by
            # rejoining, and the rest of the scenario still tells what else went wrong
            errors += 1
            emit("error", msg="poll: %s: %s" % (type(e).__name__, e), fatal=errors > 50)
            if errors > 50:
                raise
            time.sleep(0.2)
            continue
        for gen0, gen, recs in batches:
            mid = c.ident()[1]
            # h: each record's holding (Listener), so that the checker's "order" rule can tell
            # a rewind within one holding from a re-read after its partition was revoked and
            # assigned again within one generation
            ev = {"gen": gen, "gen0": gen0, "mid": mid,
                  "r": [[r[0], r[1], r[2], (r[3] or b"").decode("utf-8", "replace")] for r in recs],
                  "h": [r[8] for r in recs]}
            if full:
                ev["f"] = [[r[0], r[1], r[2], None if r[3] is None else r[3].hex(),
                            None if r[4] is None else r[4].hex(),
                            [[hk, None if hv is None else bytes(hv).hex()] for hk, hv in r[5]], r[6], r[7]]
                           for r in recs]
            emit("recs", **ev)
            if do_commit:
                # commit only what was delivered under the holding still current (Listener)
                offs, stale = {}, {}
                for r in recs:
                    tp = (r[0], r[1])
                    into = offs if r[8] is not None and r[8] == c.listener.holding(tp) else stale
                    into[tp] = max(into.get(tp, 0), r[2] + 1)
                if stale:
                    emit("uncommitted", gen=gen, mid=mid, offs=sorted([t, p, o] for (t, p), o in stale.items()))
                if not offs:
                    continue
                t0 = time.monotonic()
                try:
                    c.commit(offs)
                    ok, err = True, None
                except Exception as e:  # a commit refused by a rebalance is expected, not fatal
                    ok, err = False, "%s: %s" % (type(e).__name__, e)
                emit("commit", gen=gen, mid=mid, t0=t0, ok=ok, err=err,
                     offs=sorted([t, p, o] for (t, p), o in offs.items()))
    emit("closing")
    c.close()
    emit("closed")


# ---------------------------------------------------------------------------------------------
# producers


def produce_plan(spec):
    """(topic, i) pairs, in order, and the pacing: records per second (0: as fast as possible)."""
    topics = spec["topics"]
    start = spec.get("start", 0)
    return [(records.topic_of(topics, i), i) for i in range(start, start + spec["count"])], spec.get("rate", 0)


def record_of(spec, i):
    p = spec["prefix"]
    if spec.get("value_size"):
        v = (records.value(p, i) + b"." * spec["value_size"])[:spec["value_size"]]
    else:
        v = records.value(p, i)
    return records.key(p, i).encode(), v, records.headers(i), records.timestamp(spec.get("ts_base", 1_700_000_000_000), i)


def paced(plan, rate, chunk=50):
    t_start = time.monotonic()
    for n in range(0, len(plan), chunk):
        if stop.is_set():
            return
        if rate:
            due = t_start + n / rate
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        yield plan[n:n + chunk]


def run_producer(client, spec):
    emit("started", client=client, label=spec.get("label"), pid=os.getpid())
    plan, rate = produce_plan(spec)
    comp = spec.get("compression")
    acked = []
    if client == "confluent":
        import confluent_kafka
        conf = {"bootstrap.servers": spec["bootstrap"], "linger.ms": spec.get("linger_ms", 5),
                "client.id": spec.get("label", "interop"), "acks": "all"}
        if comp:
            conf["compression.type"] = comp
        conf.update(spec.get("extra_conf", {}))
        p = confluent_kafka.Producer(conf)
        errors = []

        def on_delivery(err, m):
            if err:
                errors.append(str(err))
            else:
                acked.append([m.topic(), m.key().decode(), m.partition(), m.offset()])

        for chunk in paced(plan, rate):
            for topic, i in chunk:
                k, v, h, ts = record_of(spec, i)
                while True:
                    try:
                        p.produce(topic, key=k, value=v, headers=h, timestamp=ts, on_delivery=on_delivery)
                        break
                    except BufferError:
                        p.poll(0.05)
            p.poll(0)
            if acked:
                emit("produced", r=acked[:])
                del acked[:]
        left = p.flush(30)
        if acked:
            emit("produced", r=acked[:])
        if errors or left:
            emit("error", msg="delivery failed: %s; %d undelivered" % (errors[:3], left), fatal=True)
            return 1
    elif client == "kafka-python":
        import kafka
        conf = dict(bootstrap_servers=spec["bootstrap"], linger_ms=spec.get("linger_ms", 5),
                    client_id=spec.get("label", "interop"))
        if comp:
            conf["compression_type"] = comp
        if spec.get("kafka_python_api_version"):
            conf["api_version"] = tuple(spec["kafka_python_api_version"])
        conf.update(spec.get("extra_conf", {}))
        p = kafka.KafkaProducer(**conf)
        for chunk in paced(plan, rate):
            futs = []
            for topic, i in chunk:
                k, v, h, ts = record_of(spec, i)
                futs.append((topic, k, p.send(topic, key=k, value=v, headers=h, timestamp_ms=ts)))
            p.flush(timeout=30)
            emit("produced", r=[[t, k.decode(), md.partition, md.offset] for t, k, md in
                                ((t, k, f.get(timeout=30)) for t, k, f in futs)])
        p.close(timeout=10)
    elif client == "aiokafka":
        from aiokafka import AIOKafkaProducer

        async def go():
            conf = dict(bootstrap_servers=spec["bootstrap"], linger_ms=spec.get("linger_ms", 5),
                        client_id=spec.get("label", "interop"))
            if comp:
                conf["compression_type"] = comp
            conf.update(spec.get("extra_conf", {}))
            p = AIOKafkaProducer(**conf)
            await p.start()
            try:
                # pacing sleeps only between chunks, after every send of a chunk was acknowledged
                for chunk in paced(plan, rate):
                    futs = []
                    for topic, i in chunk:
                        k, v, h, ts = record_of(spec, i)
                        futs.append((topic, k, await p.send(topic, key=k, value=v, headers=h, timestamp_ms=ts)))
                    mds = await asyncio.wait_for(asyncio.gather(*(f for _, _, f in futs)), 30)
                    emit("produced", r=[[t, k.decode(), md.partition, md.offset] for (t, k, _), md in zip(futs, mds)])
                    await asyncio.sleep(0)
            finally:
                await p.stop()
        asyncio.run(go())
    else:
        raise SystemExit("unknown client " + client)
    emit("done", n=len(plan))
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--client", required=True, choices=sorted(CONSUMERS))
    ap.add_argument("--role", required=True, choices=["consume", "produce"])
    ap.add_argument("--spec", required=True)
    a = ap.parse_args()
    spec = json.loads(a.spec)
    threading.Thread(target=watch_stdin, daemon=True).start()
    try:
        if a.role == "consume":
            run_consumer(a.client, spec)
            return 0
        return run_producer(a.client, spec)
    except Exception as e:
        emit("error", msg="%s: %s" % (type(e).__name__, e), fatal=True)
        traceback.print_exc()
        return 1


if __name__ == "__main__":
    sys.exit(main())
