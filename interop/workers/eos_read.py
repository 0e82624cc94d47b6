#!/usr/bin/env python3
"""Reads a whole topic from the beginning with one isolation level and prints one JSON object:
{"records": [[key hex, value hex], ...], "ends": {partition: end offset}}.

    eos_read.py SPEC_JSON     (bootstrap, topic, partitions, isolation: read_committed|read_uncommitted)

It reads every partition by assignment (no group) until each position reaches the partition's
high watermark, or nothing arrived for 3 s (the last batch of a partition may be a commit or
abort marker, which the position need not pass), bounded by 30 s.
"""
import json
import sys
import time

from confluent_kafka import Consumer, TopicPartition

spec = json.loads(sys.argv[1])
c = Consumer({"bootstrap.servers": spec["bootstrap"], "group.id": "eos-reader-unused",
              "enable.auto.commit": False, "isolation.level": spec["isolation"]})
parts = [TopicPartition(spec["topic"], p, 0) for p in range(spec["partitions"])]
c.assign(parts)
ends = {}
for p in range(spec["partitions"]):
    _, high = c.get_watermark_offsets(TopicPartition(spec["topic"], p), timeout=10, cached=False)
    ends[p] = high
out, done, deadline = [], set(), time.time() + 30
positions = {p: 0 for p in ends}
last_record = time.time()
while len(done) < len(ends) and time.time() < deadline and time.time() - last_record < 3:
    for m in c.consume(num_messages=500, timeout=0.5):
        if m.error() is None:
            last_record = time.time()
            out.append([(m.key() or b"").hex(), (m.value() or b"").hex()])
            positions[m.partition()] = m.offset() + 1
    for tp in c.position(parts):
        # The position passes control records and aborted records as well.
        if tp.offset >= 0:
            positions[tp.partition] = max(positions[tp.partition], tp.offset)
    for p, end in ends.items():
        if positions[p] >= end:
            done.add(p)
c.close()
print(json.dumps({"records": out, "ends": ends, "positions": positions}))
