#!/usr/bin/env python3
"""Command line of the suite (interop/run calls it with the venv's Python).

    cli.py [--mock] [--broker PATH] [-k PATTERN]... [--list] [-v] [--logdir DIR]
           [--deadline SECONDS] [--mock-native-versions]
"""
import argparse
import fnmatch
import os
import shutil
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import scenarios  # noqa: E402,F401  (registers the scenarios)
import scenarios_admin_tool  # noqa: E402,F401  (the groups tool against kafka-python's admin client)
import scenarios_compaction  # noqa: E402,F401  (a compacted topic: many values per key, the latest read back)
import scenarios_eos  # noqa: E402,F401  (exactly-once: a transactional consume-transform-produce application)
import scenarios_faults  # noqa: E402,F401  (control-port faults met by kafka-python, kafkajs; delete_records)
import scenarios_migration  # noqa: E402,F401  (a rolling upgrade classic -> group.protocol=consumer, and back)
import scenarios_page  # noqa: E402,F401  (the page of groups in headless Chromium)
import scenarios_share  # noqa: E402,F401  (share groups: confluent-kafka's ShareConsumer)
from harness import ROOT  # noqa: E402
from suite import SCENARIOS, Abort, Suite  # noqa: E402


def main():
    ap = argparse.ArgumentParser(prog="interop/run", description="Real Kafka clients against the broker.")
    ap.add_argument("--mock", action="store_true", default=os.environ.get("INTEROP_MOCK") == "1",
                    help="run against librdkafka's mock cluster instead of the broker (or INTEROP_MOCK=1)")
    ap.add_argument("--mock-native-versions", action="store_true",
                    help="with --mock: keep the mock's own API version ranges instead of the broker's")
    ap.add_argument("--broker", default=os.environ.get("INTEROP_BROKER") or os.path.join(ROOT, "target", "release", "broker"),
                    help="broker binary (default: $INTEROP_BROKER or target/release/broker)")
    ap.add_argument("-k", dest="patterns", action="append", default=[],
                    help="run the scenarios whose name contains this text or matches this glob (repeatable)")
    ap.add_argument("--list", action="store_true", help="list the scenarios and exit")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every scenario's notes (timings, stats)")
    ap.add_argument("--logdir", default=os.path.join(ROOT, "target", "interop", "logs"))
    ap.add_argument("--deadline", type=float, default=float(os.environ.get("INTEROP_DEADLINE", "900")),
                    help="hard limit for the whole run in seconds (default 900)")
    ap.add_argument("--budget-scale", type=float, default=float(os.environ.get("INTEROP_BUDGET_SCALE", "1")),
                    help="multiply every scenario's time budget (slow machines)")
    a = ap.parse_args()

    selected = [s for s in SCENARIOS
                if not a.patterns or any(p in s.name or fnmatch.fnmatch(s.name, p) for p in a.patterns)]
    if a.list:
        for s in SCENARIOS:
            print("%-36s %s" % (s.name, ("mock: " + s.mock_note) if s.mock_note else ""))
        return 0
    if not selected:
        print("no scenario matches %s" % a.patterns)
        print("0 passed, 1 failed")
        return 1
    if not a.mock and not (os.path.isfile(a.broker) and os.access(a.broker, os.X_OK)):
        print("no broker binary at %s (build it, set INTEROP_BROKER, or use --mock)" % a.broker)
        print("0 passed, 1 failed")
        return 1

    logdir = os.path.join(a.logdir, time.strftime("%Y%m%d-%H%M%S") + "-%d" % os.getpid() + ("-mock" if a.mock else ""))
    os.makedirs(logdir, exist_ok=True)
    latest = os.path.join(a.logdir, "latest")
    try:
        if os.path.islink(latest) or os.path.exists(latest):
            os.remove(latest)
        os.symlink(os.path.basename(logdir), latest)
    except OSError:
        pass
    # keep the last 5 runs' logs
    runs = sorted(d for d in os.listdir(a.logdir) if d[:1].isdigit())
    for old in runs[:-5]:
        shutil.rmtree(os.path.join(a.logdir, old), ignore_errors=True)

    def abort(why):
        def handler(*_):
            raise Abort(why)
        return handler
    signal.signal(signal.SIGALRM, abort("the run's deadline of %.0f s passed" % a.deadline))
    signal.signal(signal.SIGTERM, abort("terminated"))
    signal.alarm(int(a.deadline))
    suite = Suite(a.mock, os.path.abspath(a.broker), logdir, mock_native_versions=a.mock_native_versions,
                  budget_scale=a.budget_scale, verbose=a.verbose)
    return suite.run(selected)


if __name__ == "__main__":
    sys.exit(main())
