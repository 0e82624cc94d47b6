"""Compare the assignment a client's group leader computed with the project's assignor.

The project's `assign` tool (crates/labs/src/bin/assign.rs) reads
  {"strategy": "range", "topics": {"t": 5}, "members": {"<member id>": {"topics": ["t"]}}}
on stdin and prints {"<member id>": [{"topic": "t", "partition": 0}, ...], ...}.

Where it is: $INTEROP_ASSIGN, else target/release/assign (built by interop/run with
`cargo build --release -p labs --bin assign --locked`). Without it the comparison is skipped
and says so.
"""
import json
import os
import subprocess

from harness import ROOT


def assign_binary():
    path = os.environ.get("INTEROP_ASSIGN") or os.path.join(ROOT, "target", "release", "assign")
    return path if os.path.isfile(path) and os.access(path, os.X_OK) else None


def project_assignment(strategy, topics, members, binary=None):
    """members: {member id: [topics]}. Returns {member id: [(topic, partition), ...]} or raises."""
    binary = binary or assign_binary()
    req = {"strategy": strategy, "topics": topics,
           "members": {mid: {"topics": sorted(ts)} for mid, ts in sorted(members.items())}}
    r = subprocess.run([binary], input=json.dumps(req).encode(), capture_output=True, timeout=30)
    if r.returncode != 0:
        raise RuntimeError("assign failed (%d): %s" % (r.returncode, r.stderr.decode().strip()))
    out = json.loads(r.stdout)
    return {mid: sorted((p["topic"], p["partition"]) for p in ps) for mid, ps in out.items()}


def final_generation(members_events):
    """From each live member's events, its last full assignment: {member id: (gen, [(t, p)])}.
    Only eager protocols: an "assigned" event carries the member's whole assignment."""
    out = {}
    for events in members_events:
        last = None
        for ev in events:
            if ev.get("ev") == "assigned":
                last = ev
        if last is not None:
            out[last["mid"]] = (last["gen"], sorted(tuple(tp) for tp in last["owned"]))
    return out


def compare(strategy, topics, subscriptions, members_events):
    """subscriptions: topics every member subscribed to. Returns (status, detail):
    ("skipped", why) | ("same", detail) | ("different", detail)."""
    binary = assign_binary()
    if binary is None:
        return "skipped", "no assign binary (set INTEROP_ASSIGN or build target/release/assign)"
    final = final_generation(members_events)
    gens = {g for g, _ in final.values()}
    if len(gens) != 1:
        return "different", "members ended in different generations: %s" % sorted(
            (mid, g) for mid, (g, _) in final.items())
    observed = {mid: parts for mid, (_, parts) in final.items()}
    expected = project_assignment(strategy, topics, {mid: subscriptions for mid in observed}, binary)
    if expected == observed:
        return "same", "generation %s, %d members" % (gens.pop(), len(observed))
    return "different", "observed %s, project's %s would assign %s" % (observed, strategy, expected)
