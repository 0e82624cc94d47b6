"""Faults from the control port met by real clients (issue 44, item 4): kafka-python, kafkajs
and confluent-kafka consumers meet a heartbeat answered REBALANCE_IN_PROGRESS, a kick, a slow Fetch, a dropped
connection at OffsetCommit, a paused coordinator and a commit refused with
GROUP_AUTHORIZATION_FAILED; confluent-kafka and kafka-python consumers meet records deleted
below their committed offset. Each step asserts what the application did (its callbacks, its
member id and generation, its commits and their errors, what it read) and, against our broker,
what the broker received (the control port's record of requests).

The same scenarios run against librdkafka's mock cluster (`interop/run --mock`), whose
`mockcluster.py --control-listen` speaks the same protocol for the faults the mock has; a step
whose fault the mock lacks (answered UNSUPPORTED) is skipped with a note, and so are the
assertions that read the broker's record. See interop/README.md, "Faults met by real clients".
"""
import re

from control import Control, ControlError
from harness import now
from scenarios import check_final_commits, member_id_of
from suite import scenario

SESSION_MS, HEARTBEAT_MS = 6000, 500
REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID, COORDINATOR_NOT_AVAILABLE = 27, 25, 15
GROUP_AUTHORIZATION_FAILED, MEMBER_ID_REQUIRED = 30, 79
FETCH_LATENCY_MS, PAUSE_S = 300, 3.0


class Faults:
    """The control port of the scenario's broker (ours or the mock's), and its record."""

    def __init__(self, ctx, address):
        self.ctx = ctx
        self.control = Control(address)

    def close(self):
        self.control.close()

    def set(self, step, op, **fields):
        """Sets a fault: the answer, or None when the mock lacks it (the step is skipped, noted)."""
        try:
            return self.control.call(op=op, **fields)
        except ControlError as e:
            if self.ctx.mock and e.code == "UNSUPPORTED":
                self.ctx.note("mock: step `%s` skipped, the mock has no `%s`: %s" % (step, op, e.message))
                return None
            raise

    def next(self):
        """The record's next sequence number (None against the mock: it keeps no record)."""
        if self.ctx.mock:
            return None
        return self.control.requests(since=0)["next"]

    def seen(self, since, client_id=None, api=None):
        """The recorded requests from `since` (of that client id, of that API), or None against
        the mock."""
        if since is None:
            return None
        answer = self.control.requests(since=since)
        self.ctx.check(not answer["missed"], "the record missed %d requests" % answer["missed"])
        return [r for r in answer["requests"]
                if (client_id is None or r["client_id"] == client_id) and (api is None or r["api"] == api)]


def events_after(proc, mark, kinds):
    return [e for e in proc.snapshot()[mark:] if e["ev"] in kinds]


def produce_step(ctx, boot, topic, prefix, count, rate=200):
    """A producer of `count` records for one step; returns it (its keys are waited for)."""
    return ctx.producer("confluent", "prod-" + prefix, [topic], count, prefix, rate=rate, bootstrap=boot)


def read_step(ctx, consumer, prod, timeout=60):
    """Until the consumer read every record `prod` produced."""
    ctx.wait_done(prod, timeout)
    ctx.wait_consumed([consumer], [(t, k) for t, k, _, _ in ctx.produced([prod])], timeout,
                      "the records of %s" % prod.label)


def finish(ctx, proc, timeout=30):
    """Stops a worker: it must have reported no client error (a commit refused is a `commit`
    event, not an error), close and exit 0."""
    code = proc.stop(ctx.left(timeout))
    errors = [e["msg"] for e in proc.snapshot() if e["ev"] == "error"]
    ctx.check(not errors, "%s reported %d client error(s), first: %s" % (proc.label, len(errors), errors[:1]))
    if proc.role == "consume":
        ctx.check(any(e["ev"] == "closed" for e in proc.snapshot()), "%s did not close (exit %s)" % (proc.label, code))
    ctx.check(code == 0, "%s exited with %s" % (proc.label, code))


# -------------------------------------------------------------------------------------------
# group faults, one consumer of a client against each fault

# What each client does where the clients differ (seen in these runs; README's table)
CLIENT_NOTES = {
    "kafka-python": {
        # KafkaConsumer.commit() raises GroupAuthorizationFailedError(group) (coordinator/consumer.py)
        "commit_error": r"GroupAuthorizationFailed",
    },
    "kafkajs": {
        "commit_error": r"(?i)not authorized to access group|GROUP_AUTHORIZATION_FAILED",
    },
    "confluent": {
        # commit(asynchronous=False) returns the partitions with their error (the worker raises it)
        "commit_error": r"GROUP_AUTHORIZATION_FAILED|Group authorization failed",
        # librdkafka 2.16: a synchronous commit refused COORDINATOR_NOT_AVAILABLE is retried while
        # the coordinator's connection is still coming up, fails "Broker transport failure", marks
        # the coordinator dead again, every 0.5 s, and no heartbeat goes out: the session expires
        # (in about half the runs here, and against the mock too) and the member rejoins. It warns SESSTMOUT.
        "pause_expiry": r"\|SESSTMOUT\|",
    },
}


def slowest(commits):
    """The longest a commit took (s), or 0."""
    return max((e["t"] - e["t0"] for e in commits), default=0.0)


def group_faults(ctx, client):
    topic, group = "gfx-" + client, "gfx-group-" + client
    all_parts = sorted((topic, p) for p in range(4))
    b = ctx.start_broker("broker", {topic: 4}, extra=["--control-listen", "127.0.0.1:0"])
    boot = b.address
    faults = Faults(ctx, b.control(ctx.left(10)))
    notes = CLIENT_NOTES[client]
    producers = []
    try:
        label = "gfx-" + client
        a = ctx.consumer(client, label, group, [topic], session_ms=SESSION_MS, heartbeat_ms=HEARTBEAT_MS,
                         bootstrap=boot)
        producers.append(produce_step(ctx, boot, topic, "fx0", 200))
        ctx.wait_stable([a], all_parts, 60)
        read_step(ctx, a, producers[-1])

        # 1. a heartbeat answered REBALANCE_IN_PROGRESS: the member rejoins (revokes, is assigned
        #    again, in a new generation: a lone member's JoinGroup makes a new one)
        gen0 = ctx.current_generation(a)
        mark, since, t0 = len(a.snapshot()), faults.next(), now()
        faults.set("heartbeat REBALANCE_IN_PROGRESS", "fail", api="Heartbeat", error=REBALANCE_IN_PROGRESS, count=1)
        back = ctx.wait_for(a, lambda e: e["ev"] == "assigned" and e["owned"], 60,
                            "an assignment after the heartbeat's REBALANCE_IN_PROGRESS", start=mark)
        gave = events_after(a, mark, ("revoked", "lost"))
        ctx.note("1. heartbeat 27: %s callback(s) then assigned after %.2f s, generation %s -> %s"
                 % ([e["ev"] for e in gave], back["t"] - t0, gen0, back["gen"]))
        ctx.check(gave and gave[0]["t"] <= back["t"], "1. no revoke before the new assignment: %s" % gave)
        ctx.check(back["gen"] is not None and gen0 is not None and back["gen"] > gen0,
                  "1. the rejoin did not make a new generation: %s -> %s" % (gen0, back["gen"]))
        seen = faults.seen(since, client_id=label)
        if seen is not None:
            hb = [(r["api"], r["outcome"], r["error_code"]) for r in seen if r["api"] in ("Heartbeat", "JoinGroup")]
            ctx.note("1. %s's Heartbeat/JoinGroup after the fault: %s" % (label, hb[:6]))
            ctx.check(("Heartbeat", "failed", REBALANCE_IN_PROGRESS) in hb, "1. no failed Heartbeat in the record")
            ctx.check(any(x[0] == "JoinGroup" for x in hb), "1. no JoinGroup after the failed Heartbeat")
        producers.append(produce_step(ctx, boot, topic, "fx1", 200))
        read_step(ctx, a, producers[-1])

        # 1b. a rebalance started by the control port (as when a member's metadata changes): the
        #     member's next heartbeat is REBALANCE_IN_PROGRESS and it rejoins, same member id
        gen0, mid0 = ctx.current_generation(a), member_id_of(a)
        mark, since, t0 = len(a.snapshot()), faults.next(), now()
        if faults.set("rebalance", "rebalance", group=group) is not None:
            back = ctx.wait_for(a, lambda e: e["ev"] == "assigned" and e["owned"] and e["t"] > t0, 60,
                                "an assignment after the rebalance", start=mark)
            gave = events_after(a, mark, ("revoked", "lost"))
            ctx.note("1b. rebalance: %s callback(s), assigned after %.2f s, generation %s -> %s"
                     % ([e["ev"] for e in gave], back["t"] - t0, gen0, back["gen"]))
            ctx.check(back["gen"] is not None and gen0 is not None and back["gen"] > gen0,
                      "1b. the rebalance made no new generation: %s -> %s" % (gen0, back["gen"]))
            ctx.check(back.get("mid") == mid0, "1b. the member id changed: %s -> %s" % (mid0, back.get("mid")))
            codes = [(r["api"], r["error_code"]) for r in faults.seen(since, client_id=label)
                     if r["api"] in ("Heartbeat", "JoinGroup", "OffsetCommit")]
            ctx.note("1b. %s's Heartbeat/JoinGroup/OffsetCommit after it: %s" % (label, codes[:6]))
            ctx.check(any(c == REBALANCE_IN_PROGRESS for _, c in codes),
                      "1b. no REBALANCE_IN_PROGRESS answered to %s: %s" % (label, codes[:6]))

        # 2. a kick: the next heartbeat is UNKNOWN_MEMBER_ID, the member joins again as a new one
        old_mid = member_id_of(a)
        ctx.require(old_mid, "%s reported no member id" % label)
        mark, since, t0 = len(a.snapshot()), faults.next(), now()
        if faults.set("kick", "kick", group=group, member=old_mid) is not None:
            back = ctx.wait_for(a, lambda e: e["ev"] == "assigned" and e["owned"], 60,
                                "an assignment after the kick", start=mark)
            gave = events_after(a, mark, ("revoked", "lost"))
            ctx.note("2. kick: %s callback(s), assigned again after %.2f s as %s (was %s), generation %s"
                     % ([e["ev"] for e in gave], back["t"] - t0, back.get("mid"), old_mid, back["gen"]))
            ctx.check(back.get("mid") and back["mid"] != old_mid,
                      "2. rejoined with member id %s, before the kick %s" % (back.get("mid"), old_mid))
            seen = faults.seen(since, client_id=label)
            codes = [(r["api"], r["error_code"]) for r in seen if r["group_id"] == group]
            ctx.note("2. %s's group requests after the kick: %s" % (label, codes[:8]))
            ctx.check((("Heartbeat", UNKNOWN_MEMBER_ID) in codes) or any(x[0] == "OffsetCommit" for x in codes),
                      "2. neither a Heartbeat UNKNOWN_MEMBER_ID nor an OffsetCommit after the kick: %s" % codes)
            ctx.check(("JoinGroup", MEMBER_ID_REQUIRED) in codes,
                      "2. did not join again without a member id (JoinGroup MEMBER_ID_REQUIRED): %s" % codes)
            producers.append(produce_step(ctx, boot, topic, "fx2", 200))
            read_step(ctx, a, producers[-1])

        # 3. Fetch delayed 300 ms: consumption goes on, each Fetch at least 300 ms apart
        mark, since, t0 = len(a.snapshot()), faults.next(), now()
        faults.set("fetch latency", "latency", api="Fetch", ms=FETCH_LATENCY_MS)
        producers.append(produce_step(ctx, boot, topic, "fx3", 400, rate=100))
        read_step(ctx, a, producers[-1])
        t1, until = now(), faults.next()
        faults.set("fetch latency", "latency", api="Fetch", ms=0)
        fetches = faults.seen(since, client_id=label, api="Fetch")
        if fetches is not None:
            fetches = [r for r in fetches if r["seq"] < until]
            bound = (t1 - t0) / (FETCH_LATENCY_MS / 1000.0) + 3
            ctx.note("3. Fetch +%d ms: 400 records read in %.2f s, %d Fetch requests (at most %.0f can be "
                     "served one after the other)" % (FETCH_LATENCY_MS, t1 - t0, len(fetches), bound))
            ctx.check(fetches and len(fetches) <= bound,
                      "3. %d Fetch requests in %.2f s: more than a %d ms latency allows"
                      % (len(fetches), t1 - t0, FETCH_LATENCY_MS))
        else:
            ctx.note("3. RTT %d ms (every API): 400 records read in %.2f s" % (FETCH_LATENCY_MS, t1 - t0))

        # 4. the connection dropped at the next OffsetCommit: the client reconnects and its
        #    commits reach the end of what it read
        mark, since, t0 = len(a.snapshot()), faults.next(), now()
        faults.set("drop OffsetCommit", "drop", api="OffsetCommit", count=1)
        producers.append(produce_step(ctx, boot, topic, "fx4", 200))
        read_step(ctx, a, producers[-1])
        ctx.wait_commits_reported([a], 30)
        commits = events_after(a, mark, ("commit",))
        failed = [e["err"] for e in commits if not e["ok"]]
        ctx.note("4. drop at OffsetCommit: %d commits after it (the slowest %.2f s), %d failed as the "
                 "application saw them %s" % (len(commits), slowest(commits), len(failed), failed[:2]))
        ctx.check(commits and commits[-1]["ok"], "4. the last commit after the drop failed: %s" % commits[-1:])
        seen = faults.seen(since, client_id=label, api="OffsetCommit")
        if seen is not None:
            ctx.check(any(r["outcome"] == "dropped" for r in seen), "4. no OffsetCommit was dropped: %s"
                      % [(r["outcome"], r["error_code"]) for r in seen[:4]])
        check_final_commits(ctx, [a], group)

        # 5. the coordinator paused for 3 s (under the 6 s session): COORDINATOR_NOT_AVAILABLE
        #    meanwhile, and after the resume the member reads on in the same generation
        gen = ctx.current_generation(a)
        mark, since, t0 = len(a.snapshot()), faults.next(), now()
        if faults.set("pause", "pause", group=group) is not None:
            prod = produce_step(ctx, boot, topic, "fx5", 300, rate=100)
            producers.append(prod)
            ctx.sleep(PAUSE_S)
            faults.set("pause", "resume", group=group)
            t_resume = now()
            read_step(ctx, a, prod)
            ctx.wait_commits_reported([a], 30)
            moved = events_after(a, mark, ("revoked", "lost", "assigned"))
            commits = events_after(a, mark, ("commit",))
            failed = [e["err"] for e in commits if not e["ok"]]
            ctx.note("5. paused %.1f s: %d commits (the slowest %.2f s), %d failed as the application saw "
                     "them %s; the last record read %.2f s after the resume"
                     % (PAUSE_S, len(commits), slowest(commits), len(failed), failed[:2],
                        max(e["t"] for e in a.snapshot()[mark:] if e["ev"] == "recs") - t_resume))
            expiry = None
            if (moved or ctx.current_generation(a) != gen) and notes.get("pause_expiry"):
                with open(a.log_path, errors="replace") as f:
                    expiry = next((line.strip() for line in f if re.search(notes["pause_expiry"], line)), None)
            if expiry:
                ctx.note("5. excused, the client's own session timeout after the resume (%s -> %s, %s): %s"
                         % (gen, ctx.current_generation(a), [e["ev"] for e in moved], expiry[:240]))
            else:
                ctx.check(not moved, "5. the pause made the member rebalance: %s" % [e["ev"] for e in moved])
                ctx.check(ctx.current_generation(a) == gen, "5. the generation changed: %s -> %s"
                          % (gen, ctx.current_generation(a)))
            seen = faults.seen(since, client_id=label)
            if seen is not None:
                refused = sorted({r["api"] for r in seen if r["outcome"] == "failed"
                                  and r["error_code"] == COORDINATOR_NOT_AVAILABLE})
                ctx.note("5. answered COORDINATOR_NOT_AVAILABLE: %s" % refused)
                ctx.check(refused, "5. no request met the paused coordinator")
            check_final_commits(ctx, [a], group)

        # 6. an OffsetCommit refused with GROUP_AUTHORIZATION_FAILED: the application sees it
        mark, since, t0 = len(a.snapshot()), faults.next(), now()
        faults.set("commit GROUP_AUTHORIZATION_FAILED", "fail", api="OffsetCommit",
                   error=GROUP_AUTHORIZATION_FAILED, count=1)
        producers.append(produce_step(ctx, boot, topic, "fx6", 200))
        bad = ctx.wait_for(a, lambda e: e["ev"] == "commit" and not e["ok"], 60,
                           "a commit refused with GROUP_AUTHORIZATION_FAILED", start=mark)
        ctx.note("6. the application's commit failed %.2f s after the fault: %s" % (bad["t"] - t0, bad["err"]))
        ctx.check(re.search(notes["commit_error"], bad["err"] or ""),
                  "6. the commit failed with another error: %s" % bad["err"])
        read_step(ctx, a, producers[-1])
        ctx.wait_commits_reported([a], 30)
        after = [e for e in events_after(a, mark, ("commit",)) if e["t"] > bad["t"]]
        ctx.check(after and all(e["ok"] for e in after), "6. commits after the refused one: %s"
                  % [(e["ok"], e["err"]) for e in after[:3]])
        check_final_commits(ctx, [a], group)

        finish(ctx, a)
        for p in producers:
            finish(ctx, p)
        ctx.run_checker([a], producers)
    finally:
        faults.close()


@scenario("group-faults-kafka-python", topics={"gfx-kafka-python": 4}, budget=240, own_broker=True,
          clients=("kafka-python",))
def group_faults_kafka_python(ctx):
    group_faults(ctx, "kafka-python")


@scenario("group-faults-confluent-steps", topics={"gfx-confluent": 4}, budget=240, own_broker=True,
          clients=("confluent",))
def group_faults_confluent_steps(ctx):
    group_faults(ctx, "confluent")


@scenario("group-faults-kafkajs", topics={"gfx-kafkajs": 4}, budget=240, own_broker=True, clients=("kafkajs",))
def group_faults_kafkajs(ctx):
    group_faults(ctx, "kafkajs")


# -------------------------------------------------------------------------------------------
# records deleted below a group's committed offset: the consumer resets as auto.offset.reset says

def delete_records(ctx, client):
    topic, group = "gfd-" + client, "gfd-group-" + client
    b = ctx.start_broker("broker", {topic: 1}, extra=["--control-listen", "127.0.0.1:0"])
    boot = b.address
    faults = Faults(ctx, b.control(ctx.left(10)))
    try:
        kw = dict(session_ms=SESSION_MS, heartbeat_ms=HEARTBEAT_MS, bootstrap=boot)
        first = produce_step(ctx, boot, topic, "dr0", 200)
        a = ctx.consumer(client, "gfd-a", group, [topic], **kw)
        read_step(ctx, a, first)
        ctx.wait_commits_reported([a], 30)
        finish(ctx, a)
        committed = check_final_commits(ctx, [a], group).get((topic, 0))
        ctx.require(committed == 200, "the first consumer's last commit is %s, not 200" % committed)
        second = produce_step(ctx, boot, topic, "dr1", 200)
        ctx.wait_done(second, 60)
        # offsets 200..399 now; delete below 300, above the committed 200
        answer = faults.set("delete_records", "delete_records", topic=topic, partition=0, before=300)
        if answer is None:
            return
        ctx.check(answer["log_start"] == {"0": 300}, "log start after delete_records: %s" % answer["log_start"])
        since, t0 = faults.next(), now()
        a2 = ctx.consumer(client, "gfd-b", group, [topic], **kw)
        kept = [(t, k) for t, k, _, o in ctx.produced([second]) if o is None or o >= 300]
        ctx.wait_consumed([a2], kept, 60, "the records left above the new log start")
        offsets = [o for e in a2.snapshot() if e["ev"] == "recs" for _, _, o, _ in e["r"]]
        ctx.note("the second member read %d records, offsets %d..%d, %.2f s after it started"
                 % (len(offsets), min(offsets), max(offsets), now() - t0))
        ctx.check(min(offsets) == 300, "the second member resumed at offset %d, not at the new log start 300"
                  % min(offsets))
        ctx.check(not [o for o in offsets if o < 300], "records below the log start were read: %s"
                  % sorted(o for o in offsets if o < 300)[:5])
        seen = faults.seen(since, client_id="gfd-b")
        if seen is not None:
            apis = [(r["api"], r["error_code"]) for r in seen
                    if r["api"] in ("OffsetFetch", "ListOffsets", "Fetch")]
            lo = [x for x in apis if x[0] == "ListOffsets"]
            ctx.note("gfd-b's OffsetFetch/ListOffsets/first Fetches: %s" % apis[:6])
            if client == "kafka-python":
                # kafka-python resets through ListOffsets (earliest) after the Fetch's error
                ctx.check(lo, "gfd-b sent no ListOffsets: it did not reset its position")
        if client == "confluent":
            # librdkafka resets to the log start offset the Fetch answer carried ("cached BEGINNING
            # offset", rd_kafka_offset_reset): no ListOffsets; it logs the reset as a warning
            with open(a2.log_path, errors="replace") as f:
                resets = [line.strip() for line in f if "Offset reset" in line or "offset reset" in line]
            ctx.note("gfd-b's log: %s" % (resets[:1] or "no offset reset line"))
            ctx.check(any("300" in line and "OFFSET_OUT_OF_RANGE" in line.upper().replace(" ", "_") for line in resets),
                      "gfd-b's log has no offset reset to 300 for OFFSET_OUT_OF_RANGE: %s" % resets[:2])
        ctx.wait_commits_reported([a2], 30)
        finish(ctx, a2)
        commits = check_final_commits(ctx, [a2], group)
        ctx.check(commits.get((topic, 0)) == 400, "the last commit is %s, not 400" % commits.get((topic, 0)))
        # the records deleted (200..299) were never read: the checker is given the others
        produced = [r for r in ctx.produced([first, second]) if r[3] is None or not (200 <= r[3] < 300)]
        ctx.run_checker([a, a2], produced=produced)
    finally:
        faults.close()


@scenario("delete-records-confluent", topics={"gfd-confluent": 1}, budget=150, own_broker=True,
          clients=("confluent",))
def delete_records_confluent(ctx):
    delete_records(ctx, "confluent")


@scenario("delete-records-kafka-python", topics={"gfd-kafka-python": 1}, budget=150, own_broker=True,
          clients=("kafka-python",))
def delete_records_kafka_python(ctx):
    delete_records(ctx, "kafka-python")



@scenario("delete-records-kafkajs", topics={"gfd-kafkajs": 1}, budget=150, own_broker=True,
          clients=("kafkajs",))
def delete_records_kafkajs(ctx):
    delete_records(ctx, "kafkajs")
