"""A compacted topic (cleanup.policy=compact) written by kafka-python with many values per key
and a tombstone, read back by kafka-python and confluent-kafka once the broker's cleaner has
left only each key's latest value (interop/workers/compacted_topic.py). See interop/README.md.
"""
import json
import os

from harness import INTEROP, python_exe
from scenarios import expecter, run_worker
from suite import scenario

KEYS, PER_KEY, FILLERS = 20, 25, 120


@scenario("compacted-topic-kafka-python", budget=90, own_broker=True, clients=("kafka-python", "confluent"),
          mock_note="the mock does not compact topics")
def compacted_topic(ctx):
    data_dir = os.path.join(ctx.suite.tmp, "compacted-topic-data")
    os.makedirs(data_dir, exist_ok=True)
    # Small segments and a quick cleaner, so that the 500 writes fill closed segments and are
    # compacted within the scenario.
    compacted(ctx, data_dir, ["--log-segment-bytes", "16384"], "cpt")


@scenario("compacted-topic-in-memory-kafka-python", budget=90, own_broker=True,
          clients=("kafka-python", "confluent"), mock_note="the mock does not compact topics")
def compacted_topic_in_memory(ctx):
    # Without a data directory the log has no segments: everything below the last stable
    # offset is compactable.
    compacted(ctx, None, [], "cpm")


def compacted(ctx, data_dir, extra, prefix):
    b = ctx.start_broker("broker", {}, data_dir=data_dir,
                         extra=extra + ["--log-cleaner-backoff-ms", "200"])
    spec = ctx.spec(bootstrap=b.address, prefix=prefix, keys=KEYS, values_per_key=PER_KEY,
                    fillers=FILLERS, seconds=40)
    out = run_worker(ctx, [python_exe(), os.path.join(INTEROP, "workers", "compacted_topic.py"), json.dumps(spec)],
                     "compacted_topic", "compacted topic", 75)
    expect = expecter(ctx, out)
    expect("written", KEYS * PER_KEY)
    expect("expected_records", KEYS)
    expect("kafka_python_records", KEYS)
    expect("kafka_python_latest_only", True)
    expect("confluent_records", KEYS)
    expect("confluent_latest_only", True)
    expect("tombstone_kept", True)
    expect("aborted_gone", True)
    expect("committed_latest", True)
    with open(b.log_path, errors="replace") as f:
        passes = sum(1 for line in f if "log compacted" in line and prefix + "-compacted" in line)
    ctx.note("%d compaction passes logged by the broker" % passes)
    ctx.check(passes >= 1, "the broker logged no compaction of %s-compacted" % prefix)
