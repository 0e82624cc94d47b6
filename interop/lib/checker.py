"""The checker: runs over what producers acknowledged and what consumers recorded.

Input
  produced: iterable of [topic, key, partition|None, offset|None] (acknowledged records)
  members:  list of Member (label, pid, client, group, events, ended_at) — one per consumer
            process. The label names the logical member: a static member restarted keeps its
            label. ended_at is when the process ended (was SIGKILLed, or exited), None while it
            runs; it is on the events' clock (CLOCK_MONOTONIC, shared by every process).

Violations (each a string):
  lost         a produced record that no member consumed
  moved        a record consumed at another (partition, offset) than the producer was told
  decreasing   a committed offset that decreases: commit B was sent after commit A completed,
               for the same group and partition, with a smaller offset
  double-owner a record consumed by two members (labels) that both tagged it with the same
               generation, i.e. both held its partition in that generation
  order        one process consumed records of one partition out of order within one generation
               and one holding of that partition. A recs event may carry h, each record's
               holding as the worker's Listener numbered it (a number that changes at every
               assign, revoke or lost callback naming the partition): a member may be revoked
               and assigned a partition again without a new generation, and then reads again
               from the committed offset. Kafka's classic member of a consumer group keeps its
               member epoch, the generation its JoinGroup answer gives, when partitions it
               waited for are released (CurrentAssignmentBuilder, UNRELEASED_PARTITIONS), yet
               its heartbeat asks it to rejoin (classicGroupHeartbeatToConsumerGroup), and an
               EAGER librdkafka member revokes all its partitions before it rejoins
               (rd_kafka_cgrp_revoke_all_rejoin). Records without h are judged by generation.
  held-twice   a partition held by two members (labels) of one group at once, from each member's
               assign and revoke callbacks in order: a holding runs from the "assigned" event that
               added the partition to the "revoked" event that removed it, or else to the
               process's "closed" event, or else to its end (ended_at; still held if it runs).
               A holding ended by "lost" (the member learned it had been fenced: Kafka gives the
               partition to another while a fenced member may still believe it holds it) is not
               judged; such holdings are counted in the stats (lost_holdings).
               A holding the coordinator ended by fencing its member (fenced: the member's
               session expired) ends there for this rule, whether or not the member heard of
               it: a client that stops reaching its coordinator may keep its assignment long
               after Kafka gave the partitions to others (seen with librdkafka 2.16 and
               group.protocol=consumer: a commit stuck at a paused coordinator leaves it looping
               on "marking the coordinator dead", sending no heartbeat, never told it was
               fenced). Such holdings are counted in the stats (fenced_holdings).

Fencings (optional)
  fenced:   {(group, label): [time, ...]} when the coordinator removed a member of that label
            because its session expired, on the events' clock (from the brokers' logs).

Records whose generation changed during the poll that returned them (gen0 != gen) are not
used for the double-owner rule (their generation is ambiguous); they are counted in the stats.
"""
from collections import defaultdict


class Member:
    def __init__(self, label, pid, client, group, events, ended_at=None):
        self.label, self.pid, self.client, self.group, self.events = label, pid, client, group, events
        self.ended_at = ended_at


INF = float("inf")


def holdings(m):
    """[(topic, partition, start, end, how)] of one process, from its callbacks in order; how is
    the event that ended the holding ("revoked", "lost", "closed", "end")."""
    held, out = {}, []
    for ev in m.events:
        kind = ev.get("ev")
        if kind == "assigned":
            for t, p in ev.get("added", []):
                held.setdefault((t, p), ev["t"])
        elif kind in ("revoked", "lost"):
            for t, p in ev.get("removed", []):
                if (t, p) in held:
                    out.append((t, p, held.pop((t, p)), ev["t"], kind))
        elif kind == "closed":
            out.extend((t, p, start, ev["t"], "closed") for (t, p), start in held.items())
            held = {}
    end = INF if m.ended_at is None else m.ended_at
    out.extend((t, p, start, end, "end") for (t, p), start in held.items())
    return out


def consumed_records(members):
    """Yield (member, gen, gen0, topic, partition, offset, key, holding) in each member's
    order; holding is None when the event carries none (h)."""
    for m in members:
        for ev in m.events:
            if ev.get("ev") == "recs":
                hs = ev.get("h") or [None] * len(ev["r"])
                for (t, p, o, k), h in zip(ev["r"], hs):
                    yield m, ev.get("gen"), ev.get("gen0", ev.get("gen")), t, p, o, k, h


def check(produced, members, limit=20, fenced=None):
    violations = []
    fenced = fenced or {}
    stats = defaultdict(int)

    def add(kind, msg):
        stats["violations." + kind] += 1
        if stats["violations." + kind] <= limit:
            violations.append("%s: %s" % (kind, msg))

    # where each record was consumed, by whom, in which generation
    seen_at = defaultdict(set)         # (topic, key) -> {(partition, offset)}
    owners = defaultdict(set)          # (group, topic, key) -> {(label, gen)}
    last_offset = {}                   # (pid, topic, partition, gen, holding) -> last offset
    for m, gen, gen0, t, p, o, k, h in consumed_records(members):
        stats["consumed"] += 1
        seen_at[(t, k)].add((p, o))
        if gen is None or gen < 0 or gen0 != gen:
            stats["ambiguous_generation"] += 1
        else:
            owners[(m.group, t, k)].add((m.label, gen))
        key = (m.pid, t, p, gen, h)
        prev = last_offset.get(key)
        if prev is not None and o <= prev:
            add("order", "%s (pid %d) read %s[%d] offset %d after offset %d in generation %s%s"
                % (m.label, m.pid, t, p, o, prev, gen, "" if h is None else " (holding %s)" % h))
        last_offset[key] = o

    produced = list(produced)
    stats["produced"] = len(produced)
    for t, k, p, o in produced:
        at = seen_at.get((t, k))
        if not at:
            add("lost", "record %s/%s (partition %s, offset %s) was never consumed" % (t, k, p, o))
        elif p is not None and o is not None and at != {(p, o)}:
            add("moved", "record %s/%s produced at %s:%s, consumed at %s" % (t, k, p, o, sorted(at)))
        elif len(at) > 1:
            add("moved", "record %s/%s consumed at several positions %s" % (t, k, sorted(at)))

    for (g, t, k), who in owners.items():
        by_gen = defaultdict(set)
        for label, gen in who:
            by_gen[gen].add(label)
        for gen, labels in by_gen.items():
            if len(labels) > 1:
                add("double-owner", "record %s/%s consumed in generation %s of group %s by %s"
                    % (t, k, gen, g, sorted(labels)))
        if len(who) > 1:
            stats["redelivered"] += 1

    # committed offsets never decrease
    commits = defaultdict(list)   # (group, topic, partition) -> [(t0, t1, offset, label)]
    for m in members:
        for ev in m.events:
            if ev.get("ev") == "commit" and ev.get("ok"):
                for t, p, o in ev["offs"]:
                    commits[(m.group, t, p)].append((ev["t0"], ev["t"], o, m.label))
    for (g, t, p), cs in commits.items():
        stats["commits"] += len(cs)
        done = sorted(cs, key=lambda c: c[1])       # by completion
        sent = sorted(cs, key=lambda c: c[0])       # by sending
        i, best = 0, None
        for t0, _t1, o, label in sent:
            while i < len(done) and done[i][1] < t0:
                if best is None or done[i][2] > best[2]:
                    best = done[i]
                i += 1
            if best is not None and o < best[2]:
                add("decreasing", "group %s %s[%d]: %s committed %d after %s's commit of %d had completed"
                    % (g, t, p, label, o, best[3], best[2]))

    # no partition held by two members of one group at once
    by_partition = defaultdict(list)   # (group, topic, partition) -> [(start, end, label)]
    for m in members:
        for t, p, start, end, how in holdings(m):
            stats["holdings"] += 1
            if how == "lost":
                stats["lost_holdings"] += 1
                continue
            cut = [f for f in fenced.get((m.group, m.label), ()) if start <= f < end]
            if cut:
                end = min(cut)
                stats["fenced_holdings"] += 1
            by_partition[(m.group, t, p)].append((start, end, m.label))
    for (g, t, p), hs in by_partition.items():
        hs.sort()
        for i, (s1, e1, l1) in enumerate(hs):
            for s2, e2, l2 in hs[i + 1:]:
                if s2 >= e1:
                    break
                if l1 != l2:
                    add("held-twice", "group %s %s[%d] held by %s from %.3f to %s and by %s from %.3f to %s"
                        % (g, t, p, l1, s1, "now" if e1 == INF else "%.3f" % e1,
                           l2, s2, "now" if e2 == INF else "%.3f" % e2))
    return violations, dict(stats)


def final_commits(members):
    """{(group, topic, partition): highest successfully committed offset}."""
    out = {}
    for m in members:
        for ev in m.events:
            if ev.get("ev") == "commit" and ev.get("ok"):
                for t, p, o in ev["offs"]:
                    k = (m.group, t, p)
                    out[k] = max(out.get(k, -1), o)
    return out


def fidelity(members, expected, limit=10):
    """Compare every field of full records ("f") with expected(topic, key) -> dict of key,
    value, headers (hex), timestamp. Returns (problems, number of records compared)."""
    problems, n = [], 0
    for m in members:
        for ev in m.events:
            if ev.get("ev") != "recs" or "f" not in ev:
                continue
            for t, p, o, khex, vhex, hdrs, ts, ts_type in ev["f"]:
                n += 1
                key = bytes.fromhex(khex).decode() if khex else None
                exp = expected(t, key)
                got = {"key": khex, "value": vhex, "headers": [list(h) for h in hdrs], "timestamp": ts}
                want = {"key": exp["key"], "value": exp["value"], "headers": exp["headers"], "timestamp": exp["timestamp"]}
                if got != want:
                    diff = {f: (got[f], want[f]) for f in got if got[f] != want[f]}
                    if len(problems) < limit:
                        problems.append("%s read %s[%d]@%d with %s (got, expected)" % (m.label, t, p, o, diff))
                if ts_type not in (None, "create"):
                    if len(problems) < limit:
                        problems.append("%s read %s[%d]@%d with timestamp type %s, expected create time"
                                        % (m.label, t, p, o, ts_type))
    return problems, n
