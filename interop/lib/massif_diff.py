#!/usr/bin/env python3
"""Heap growth by allocation site between two massif snapshots (e.g. the detailed snapshots
bench_member_mem.py --massif takes before the members and once they are Stable).

    python3 interop/lib/massif_diff.py BASE.ms STABLE.ms [--per N] [--top 15]

A site is the allocation's first frame in our crates (broker::, coordinator_core::, ...)
or, when there is none, its first frame outside the allocator; bytes are the snapshot's
leaves summed under it (massif's tree, below --threshold lumped as "below threshold")."""
import argparse
import re
from collections import defaultdict

OURS = ("broker::", "coordinator_core::", "consumer_groups", "partition_log::", "offset_store::",
        "kafka_protocol::", "assignor::", "<broker::", "<coordinator_core::", "<partition_log::")
SKIP = ("__rdl_", "__rust_", "alloc::", "<alloc::", "hashbrown::", "RawVec", "malloc", "realloc",
        "calloc", "core::ptr", "<core::", "core::", "bytes::", "<bytes::", "std::", "<std::")
LINE = re.compile(r"^( *)n(\d+): (\d+) (.*)$")


def fn_of(text):
    # "0x10F7AA6: __rustc::__rdl_alloc (in /tmp/b)" -> "__rustc::__rdl_alloc"
    m = re.match(r"(0x[0-9A-Fa-f]+: )?(.*?)( \(in .*\)| \([^()]*:\d+\))?$", text)
    return m.group(2) if m else text


def leaves(path):
    """(stack of function names, bytes) for every leaf of the snapshot's heap tree."""
    out = []
    stack = []
    with open(path) as f:
        lines = f.read().splitlines()
    for line in lines:
        m = LINE.match(line)
        if not m:
            continue
        depth = len(m.group(1))
        nchild, size, text = int(m.group(2)), int(m.group(3)), m.group(4)
        del stack[depth:]
        stack.append(fn_of(text))
        if nchild == 0 and depth > 0:
            out.append((list(stack[1:]), size))
    return out


def site(frames):
    for f in frames:
        if f.startswith(OURS) or "broker::" in f[:40]:
            return f
    for f in frames:
        if not f.startswith(SKIP) and "below massif's threshold" not in f:
            return f
    return frames[0] if frames else "?"


def by_site(path, detail):
    d = defaultdict(int)
    for frames, size in leaves(path):
        s = site(frames)
        if detail:
            first = next((f for f in frames if not f.startswith(SKIP)), "?")
            if first != s:
                s = "%s  <- %s" % (first, s)
        d[s] += size
    return d


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("base")
    ap.add_argument("after")
    ap.add_argument("--per", type=int, default=1, help="divide by this (members)")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--detail", action="store_true", help="also show the first non-allocator frame")
    a = ap.parse_args()
    b, s = by_site(a.base, a.detail), by_site(a.after, a.detail)
    diff = {k: s.get(k, 0) - b.get(k, 0) for k in set(b) | set(s)}
    total = sum(diff.values())
    print("growth %d B (%.0f B per %d)" % (total, total / a.per, a.per))
    for k, v in sorted(diff.items(), key=lambda kv: -abs(kv[1]))[:a.top]:
        print("%9d B  %7.0f B/each  %s" % (v, v / a.per, k[:200]))


if __name__ == "__main__":
    main()
