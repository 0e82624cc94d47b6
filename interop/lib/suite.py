"""The scenario runner: one broker (ours or the mock) for the run, scenarios one at a time.

Each scenario is a function of a Ctx. It spawns client workers through the Ctx, waits with
bounded waits, and records failures with ctx.check()/ctx.fail(); an exception (a Timeout of a
wait included) fails it too. After each scenario every worker it started is stopped (stop
command, SIGTERM, SIGKILL), its events are written to the log folder, and the broker is checked
to still be running (restarted if not, so the rest of the run can go on).
"""
import json
import os
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections import defaultdict

import checker
from harness import INTEROP, ROOT, Broker, Proc, Timeout, node_exe, now, python_exe

SCENARIOS = []
# clients whose workers report no generation or member epoch (events carry gen null):
# @confluentinc/kafka-javascript's KafkaJS API exposes neither
NO_GENERATION = ("ckjs",)


# The consumer group protocol's (KIP-848) session and heartbeat: the broker's settings.
CONSUMER_SESSION_MS, CONSUMER_HEARTBEAT_MS = 6000, 500


class Scenario:
    def __init__(self, name, fn, topics, budget, mock_note, clients, own_broker):
        self.name, self.fn, self.topics, self.budget = name, fn, topics, budget
        self.mock_note, self.clients, self.own_broker = mock_note, clients, own_broker


def scenario(name, topics=None, budget=90, mock_note=None, clients=(), own_broker=False):
    """Register fn(ctx) as a scenario. topics: {name: partitions} the broker must have.
    mock_note: why it is expected to fail against librdkafka's mock cluster, if it is."""
    def deco(fn):
        SCENARIOS.append(Scenario(name, fn, dict(topics or {}), budget, mock_note, tuple(clients), own_broker))
        return fn
    return deco


class Failed(Exception):
    pass


class Abort(BaseException):
    """The run's deadline passed or the run was interrupted: no further scenario runs."""


class Ctx:
    def __init__(self, suite, sc):
        self.suite, self.sc, self.name = suite, sc, sc.name
        self.dir = os.path.join(suite.logdir, sc.name)
        os.makedirs(self.dir, exist_ok=True)
        self.procs, self.failures, self.notes, self.brokers = [], [], [], []
        self.t0 = now()
        self.deadline = self.t0 + sc.budget * suite.budget_scale
        self.mock = suite.mock

    # ---- time
    def left(self, timeout):
        left = self.deadline - now()
        if left <= 0:
            raise Timeout("scenario budget of %.0f s used up" % (self.sc.budget * self.suite.budget_scale))
        return min(timeout, left)

    def sleep(self, seconds):
        time.sleep(self.left(seconds))

    # ---- outcome
    def check(self, cond, msg):
        if not cond:
            self.failures.append(msg)
        return bool(cond)

    def fail(self, msg):
        self.failures.append(msg)

    def require(self, cond, msg):
        if not cond:
            raise Failed(msg)

    def note(self, msg):
        self.notes.append(msg)

    # ---- brokers
    @property
    def bootstrap(self):
        return self.suite.broker.address

    def start_broker(self, name, topics, data_dir=None, extra=(), expect_listen=True, timeout=30, listen=None):
        """A broker of this scenario's own (the restart scenarios), same binary as the suite's;
        `listen` HOST:PORT to come back on a previous broker's address."""
        args = self.suite.broker_args(topics, data_dir, listen) + list(extra)
        b = Broker(self.suite.broker_cmd, args, os.path.join(self.dir, name + ".log"), name=name,
                   env=self.suite.broker_env())
        self.brokers.append(b)
        if expect_listen:
            b.start(self.left(timeout))
        else:
            b.proc = Proc(name, b.cmd + b.args, b.log_path, env=b.env, json_events=False)
        return b

    # ---- workers
    def spec(self, **kw):
        base = {"bootstrap": kw.pop("bootstrap", None) or self.bootstrap}
        if self.mock:
            # kafka-python 3 opens with ApiVersions v4; the mock's UNSUPPORTED_VERSION answer is
            # not in v0 format, so kafka-python is told the version instead (README, mock notes)
            base["kafka_python_api_version"] = [2, 3]
        base.update(kw)
        return base

    def spawn(self, client, role, label, **kw):
        spec = self.spec(label=label, **kw)
        if client == "kafkajs":
            cmd = [node_exe(), os.path.join(INTEROP, "workers", "jsclient.js"), "--role", role, "--spec", json.dumps(spec)]
        elif client == "ckjs":
            cmd = [node_exe(), os.path.join(INTEROP, "workers", "ckjsclient.js"), "--role", role, "--spec", json.dumps(spec)]
        else:
            cmd = [python_exe(), os.path.join(INTEROP, "workers", "pyclient.py"), "--client", client,
                   "--role", role, "--spec", json.dumps(spec)]
        env = dict(os.environ)
        env.setdefault("INTEROP_NODE_MODULES", self.suite.node_modules)
        env.setdefault("INTEROP_CKJS_MODULES", self.suite.ckjs_modules)
        name = label
        n = 1
        while any(q.name == name for q in self.procs):   # a restarted worker keeps its label
            n += 1
            name = "%s.%d" % (label, n)
        p = Proc(name, cmd, os.path.join(self.dir, name + ".log"), env=env)
        p.client, p.role, p.label, p.group, p.spec = client, role, label, spec.get("group"), spec
        self.procs.append(p)
        return p

    def consumer(self, client, label, group, topics, **kw):
        return self.spawn(client, "consume", label, group=group, topics=list(topics), **kw)

    def producer(self, client, label, topics, count, prefix, **kw):
        return self.spawn(client, "produce", label, topics=list(topics), count=count, prefix=prefix, **kw)

    def wait_for(self, proc, pred, timeout, what="event", start=0):
        return proc.wait_for(pred, self.left(timeout), what, start)

    def wait_started(self, proc, timeout=30):
        return self.wait_for(proc, lambda e: e["ev"] == "started", timeout, "start")

    def wait_assigned(self, proc, timeout=30, nonempty=True, start=0):
        return self.wait_for(proc, lambda e: e["ev"] == "assigned" and (e["owned"] or not nonempty),
                             timeout, "assignment", start)

    def wait_done(self, producer, timeout=60):
        return self.wait_for(producer, lambda e: e["ev"] == "done", timeout, "end of production")

    def stop(self, proc, timeout=20, may_hang=None):
        """Graceful stop; checks that the worker closed and exited 0. may_hang, a reason (or a
        function giving one or None once the worker is stopped), excuses a consumer whose close
        hangs (it is then stopped after the timeout) and says so."""
        code = proc.stop(self.left(timeout))
        errors = [e["msg"] for e in proc.snapshot() if e["ev"] == "error"]
        self.check(not errors, "%s reported %d client error(s), first: %s" % (proc.label, len(errors), errors[:1]))
        closed = any(e["ev"] == "closed" for e in proc.snapshot())
        may_hang = may_hang() if callable(may_hang) else may_hang
        if may_hang and not (closed and code == 0):
            self.note("%s did not close (exit %s), excused: %s" % (proc.label, code, may_hang))
            return code
        if proc.role == "consume":
            self.check(any(e["ev"] == "closed" for e in proc.snapshot()), "%s did not close cleanly (exit %s)" % (proc.label, code))
        self.check(code == 0, "%s exited with %s" % (proc.label, code))
        return code

    # ---- observations
    @staticmethod
    def owned(proc):
        """The partitions the worker holds now, by its callbacks."""
        owned = []
        for e in proc.snapshot():
            if e["ev"] in ("assigned", "revoked", "lost"):
                owned = e["owned"]
        return sorted(tuple(x) for x in owned)

    @staticmethod
    def current_generation(proc):
        """The generation the worker last reported holding (assign callback or generation event)."""
        gen = None
        for e in proc.snapshot():
            if e["ev"] in ("assigned", "generation"):
                gen = e["gen"]
        return gen

    @staticmethod
    def last_assignment(proc):
        last = None
        for e in proc.snapshot():
            if e["ev"] == "assigned":
                last = e
        return last

    def consumed_keys(self, procs):
        out = set()
        for p in procs:
            for e in p.snapshot():
                if e["ev"] == "recs":
                    out.update((t, k) for t, _, _, k in e["r"])
        return out

    def produced(self, producers):
        return [r for p in producers for e in p.snapshot() if e["ev"] == "produced" for r in e["r"]]

    def wait_consumed(self, consumers, expected, timeout, what="every produced record"):
        """Until the consumers (together) have read every (topic, key) in expected."""
        expected = set(expected)
        deadline = now() + self.left(timeout)
        seen = set()
        while True:
            seen = self.consumed_keys(consumers) & expected
            if len(seen) == len(expected):
                return
            if now() >= deadline:
                raise Timeout("%d of %d records consumed after %.0f s (waiting for %s)"
                              % (len(seen), len(expected), timeout, what))
            for p in consumers:
                if not p.alive() and p.killed_at is None and p.p.returncode not in (0, None):
                    raise Timeout("%s exited with %s while consuming" % (p.label, p.p.returncode))
            time.sleep(0.1)

    def wait_commits_reported(self, consumers, timeout=10):
        """Until each consumer has reported what it did with the last batch it read (a `commit`
        or `uncommitted` event after its last `recs`): its commit may still be in flight when
        the records are seen."""
        deadline = now() + self.left(timeout)
        while True:
            pending = []
            for p in consumers:
                last = None
                for e in p.snapshot():
                    if e["ev"] == "recs":
                        last = "recs"
                    elif e["ev"] in ("commit", "uncommitted"):
                        last = e["ev"]
                if last == "recs":
                    pending.append(p.label)
            if not pending:
                return
            if now() >= deadline:
                raise Timeout("%s did not report a commit of their last batch within %.0f s" % (pending, timeout))
            time.sleep(0.05)

    def wait_stable(self, consumers, partitions, timeout=40, same_generation=True):
        """Until the latest assignments of all consumers are of one generation, disjoint and
        cover `partitions`. Returns that generation. With `same_generation=False` (the
        consumer group protocol, where each member has its own epoch) any epochs will do."""
        partitions = sorted(tuple(p) for p in partitions)
        deadline = now() + self.left(timeout)
        while True:
            lasts = [self.last_assignment(p) for p in consumers]
            gens = [self.current_generation(p) for p in consumers]
            if not same_generation and all(lasts):
                # each member has its own epoch; a client that reports none (NO_GENERATION)
                # is judged by its assignment alone
                known = [g for p, g in zip(consumers, gens) if p.client not in NO_GENERATION]
                if all(g is not None and g >= 0 for g in known):
                    flat = sorted(x for p in consumers for x in self.owned(p))
                    if flat == partitions:
                        return max(known) if known else None
            elif all(lasts) and len(set(gens)) == 1 and gens[0] is not None and gens[0] >= 0:
                flat = sorted(x for p in consumers for x in self.owned(p))
                if flat == partitions:
                    return gens[0]
            if now() >= deadline:
                raise Timeout("group not stable after %.0f s: %s" % (timeout, [
                    (p.label, g, self.owned(p)) for p, g in zip(consumers, gens)]))
            time.sleep(0.1)

    def members(self, consumers):
        return [checker.Member(p.label, p.pid, p.client, p.group, p.snapshot(),
                               ended_at=p.killed_at if p.killed_at is not None else p.exited_at)
                for p in consumers]

    def run_checker(self, consumers, producers=(), produced=None, fenced=None):
        produced = self.produced(producers) if produced is None else produced
        violations, stats = checker.check(produced, self.members(consumers), fenced=fenced)
        for v in violations:
            self.fail("checker: " + v)
        self.note("checker: %s" % ", ".join("%s=%s" % kv for kv in sorted(stats.items())))
        return violations, stats

    # ---- end
    def cleanup(self):
        for p in self.procs:
            if p.alive():
                p.stop(5)
        for p in self.procs:
            p.join_reader(2)
            with open(os.path.join(self.dir, p.name + ".events.jsonl"), "w") as f:
                for e in p.snapshot():
                    f.write(json.dumps(e) + "\n")
            p.close_log()
        for b in self.brokers:
            if b.proc and b.proc.alive():
                b.stop(10)
            if b.proc:
                b.proc.close_log()


class Suite:
    def __init__(self, mock, broker_bin, logdir, mock_native_versions=False, budget_scale=1.0, verbose=False):
        self.mock = mock
        self.logdir = logdir
        self.verbose = verbose
        self.budget_scale = budget_scale
        self.node_modules = os.environ.get("INTEROP_NODE_MODULES",
                                           os.path.join(ROOT, "target", "interop", "node", "node_modules"))
        self.ckjs_modules = os.environ.get("INTEROP_CKJS_MODULES",
                                           os.path.join(ROOT, "target", "interop", "node-ckjs", "node_modules"))
        if mock:
            self.broker_cmd = [python_exe(), os.path.join(INTEROP, "lib", "mockcluster.py")]
            if not mock_native_versions:
                self.broker_cmd.append("--api-versions-like-broker")
        else:
            self.broker_cmd = [broker_bin]
        self.broker = None
        self.tmp = tempfile.mkdtemp(prefix="interop-")

    def broker_env(self):
        env = dict(os.environ)
        env.setdefault("RUST_LOG", "info")
        return env

    def broker_args(self, topics, data_dir, listen=None):
        args = ["--listen", listen or "127.0.0.1:0", "--group-initial-rebalance-delay-ms", "0",
                "--group-min-session-timeout-ms", "1000", "--max-frame-bytes", str(16 * 1024 * 1024),
                "--group-consumer-session-timeout-ms", str(CONSUMER_SESSION_MS),
                "--group-consumer-heartbeat-interval-ms", str(CONSUMER_HEARTBEAT_MS)]
        if data_dir:
            args += ["--data-dir", data_dir]
        for t, n in sorted(topics.items()):
            args += ["--topic", "%s:%d" % (t, n)]
        return args

    def start_broker(self, topics):
        data_dir = os.path.join(self.tmp, "data")
        os.makedirs(data_dir, exist_ok=True)
        self.broker = Broker(self.broker_cmd, self.broker_args(topics, data_dir),
                             os.path.join(self.logdir, "broker.log"), env=self.broker_env())
        self.broker.start(30)
        return self.broker.address

    def run(self, selected):
        topics = {}
        for sc in selected:
            if not sc.own_broker:
                topics.update(sc.topics)
        out = sys.stdout
        kind = "librdkafka mock cluster" if self.mock else "broker %s" % self.broker_cmd[0]
        print("interop: %d scenario(s) against the %s; logs in %s" % (len(selected), kind, self.logdir), file=out, flush=True)
        results = []
        try:
            self.start_broker(topics)
        except Exception as e:
            print("FAIL  broker start: %s" % e, file=out)
            print("%d passed, %d failed" % (0, len(selected) + 1), file=out)
            return 1
        print("broker listening on %s (pid %d)" % (self.broker.address, self.broker.pid), file=out, flush=True)
        aborted = None
        for sc in selected:
            if aborted:
                results.append((sc, False))
                print("FAIL  %s (not run: %s)" % (sc.name, aborted), file=out, flush=True)
                continue
            ctx = Ctx(self, sc)
            err = None
            try:
                try:
                    sc.fn(ctx)
                except (Timeout, Failed) as e:
                    err = str(e)
                except Exception as e:
                    err = "%s: %s\n%s" % (type(e).__name__, e, traceback.format_exc())
                finally:
                    ctx.cleanup()
            except (Abort, KeyboardInterrupt) as e:
                aborted = str(e) or type(e).__name__
                err = "aborted: %s" % aborted
                ctx.cleanup()
            if err:
                ctx.failures.append(err)
            if self.broker.proc.p.poll() is not None and not aborted:
                ctx.failures.append("the broker exited (code %s) during this scenario" % self.broker.proc.p.returncode)
                try:
                    self.start_broker(topics)
                    ctx.notes.append("broker restarted for the next scenarios, on %s" % self.broker.address)
                except Exception as e:  # the rest will fail quickly
                    ctx.notes.append("broker restart failed: %s" % e)
            ok = not ctx.failures
            results.append((sc, ok))
            took = now() - ctx.t0
            print("%s  %s (%.1f s)" % ("PASS" if ok else "FAIL", sc.name, took), file=out, flush=True)
            for f in ctx.failures:
                for i, line in enumerate(f.rstrip().splitlines()):
                    print(("      - " if i == 0 else "        ") + line, file=out)
            if self.mock and not ok and sc.mock_note:
                print("      (known mock difference: %s)" % sc.mock_note, file=out)
            if self.verbose or not ok:
                for n in ctx.notes:
                    print("      . " + n, file=out)
            out.flush()
        # the suite's broker: SIGTERM must stop it with exit code 0
        code, took, killed = self.broker.stop(15)
        self.broker.proc.close_log()
        ok = code == 0 and not killed
        print("%s  broker-sigterm (exit %s after %.1f s%s)" % ("PASS" if ok else "FAIL", code, took,
                                                               ", killed" if killed else ""), file=out)
        passed = sum(1 for _, ok_ in results if ok_) + (1 if ok else 0)
        failed = len(results) + 1 - passed
        shutil.rmtree(self.tmp, ignore_errors=True)
        print("%d passed, %d failed" % (passed, failed), file=out, flush=True)
        return 0 if failed == 0 else 1
