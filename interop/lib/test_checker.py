"""The checker catches what it should, and only that:
    target/interop/venv/bin/python -m unittest discover -s interop/lib -p 'test_*.py'
"""
import unittest

import checker
from checker import Member


def recs(gen, rows, t=0.0, gen0=None, h=None):
    ev = {"ev": "recs", "gen": gen, "gen0": gen if gen0 is None else gen0, "t": t, "r": rows}
    if h is not None:
        ev["h"] = h
    return ev


def commit(t0, t1, offs, ok=True):
    return {"ev": "commit", "t0": t0, "t": t1, "ok": ok, "offs": offs}


def assigned(t, added):
    return {"ev": "assigned", "t": t, "added": added}


def revoked(t, removed, ev="revoked"):
    return {"ev": ev, "t": t, "removed": removed}


PRODUCED = [["t", "k-0", 0, 0], ["t", "k-1", 0, 1], ["t", "k-2", 1, 0]]


def kinds(violations):
    return sorted({v.split(":")[0] for v in violations})


class CheckerTest(unittest.TestCase):
    def test_clean_run(self):
        a = Member("a", 1, "x", "g", [recs(1, [["t", 0, 0, "k-0"], ["t", 0, 1, "k-1"]]),
                                      commit(1.0, 1.1, [["t", 0, 2]])])
        b = Member("b", 2, "x", "g", [recs(1, [["t", 1, 0, "k-2"]]), commit(1.0, 1.2, [["t", 1, 1]])])
        v, stats = checker.check(PRODUCED, [a, b])
        self.assertEqual(v, [])
        self.assertEqual(stats["consumed"], 3)

    def test_lost(self):
        a = Member("a", 1, "x", "g", [recs(1, [["t", 0, 0, "k-0"], ["t", 0, 1, "k-1"]])])
        self.assertEqual(kinds(checker.check(PRODUCED, [a])[0]), ["lost"])

    def test_moved(self):
        a = Member("a", 1, "x", "g", [recs(1, [["t", 0, 0, "k-0"], ["t", 0, 1, "k-1"], ["t", 1, 5, "k-2"]])])
        self.assertEqual(kinds(checker.check(PRODUCED, [a])[0]), ["moved"])

    def test_double_owner_same_generation(self):
        a = Member("a", 1, "x", "g", [recs(3, [["t", 0, 0, "k-0"], ["t", 0, 1, "k-1"]])])
        b = Member("b", 2, "x", "g", [recs(3, [["t", 0, 1, "k-1"]]), recs(3, [["t", 1, 0, "k-2"]])])
        self.assertEqual(kinds(checker.check(PRODUCED, [a, b])[0]), ["double-owner"])

    def test_redelivery_in_a_later_generation_is_allowed(self):
        a = Member("a", 1, "x", "g", [recs(3, [["t", 0, 0, "k-0"], ["t", 0, 1, "k-1"]])])
        b = Member("b", 2, "x", "g", [recs(4, [["t", 0, 1, "k-1"], ["t", 1, 0, "k-2"]])])
        v, stats = checker.check(PRODUCED, [a, b])
        self.assertEqual(v, [])
        self.assertEqual(stats["redelivered"], 1)

    def test_same_label_is_one_member(self):
        # a restarted static member: two processes, one label, one generation
        a1 = Member("a", 1, "x", "g", [recs(3, [["t", 0, 0, "k-0"], ["t", 0, 1, "k-1"]])])
        a2 = Member("a", 2, "x", "g", [recs(3, [["t", 0, 1, "k-1"], ["t", 1, 0, "k-2"]])])
        self.assertEqual(checker.check(PRODUCED, [a1, a2])[0], [])

    def test_ambiguous_generation_is_not_judged(self):
        a = Member("a", 1, "x", "g", [recs(3, [["t", 0, 0, "k-0"], ["t", 0, 1, "k-1"]])])
        b = Member("b", 2, "x", "g", [recs(3, [["t", 0, 1, "k-1"], ["t", 1, 0, "k-2"]], gen0=2)])
        v, stats = checker.check(PRODUCED, [a, b])
        self.assertEqual(v, [])
        self.assertEqual(stats["ambiguous_generation"], 2)

    def test_out_of_order_within_a_generation(self):
        a = Member("a", 1, "x", "g", [recs(1, [["t", 0, 1, "k-1"]]), recs(1, [["t", 0, 0, "k-0"]]),
                                      recs(1, [["t", 1, 0, "k-2"]])])
        self.assertEqual(kinds(checker.check(PRODUCED, [a])[0]), ["order"])

    def test_rewind_in_a_new_generation_is_allowed(self):
        a = Member("a", 1, "x", "g", [recs(1, [["t", 0, 0, "k-0"], ["t", 0, 1, "k-1"]]),
                                      recs(2, [["t", 0, 1, "k-1"]]), recs(2, [["t", 1, 0, "k-2"]])])
        self.assertEqual(checker.check(PRODUCED, [a])[0], [])

    def test_rewind_after_a_reassignment_within_a_generation_is_allowed(self):
        # a classic member of a consumer group asked to rejoin for partitions released to it
        # keeps its generation (its member epoch); EAGER, it revoked and was assigned t[0]
        # again, and reads again from the committed offset
        a = Member("a", 1, "x", "g", [recs(1, [["t", 0, 0, "k-0"], ["t", 0, 1, "k-1"]], h=[1, 1]),
                                      revoked(1.0, [["t", 0]]), assigned(1.1, [["t", 0], ["t", 1]]),
                                      recs(1, [["t", 0, 1, "k-1"], ["t", 1, 0, "k-2"]], h=[3, 1])])
        self.assertEqual(checker.check(PRODUCED, [a])[0], [])

    def test_out_of_order_within_a_holding(self):
        a = Member("a", 1, "x", "g", [recs(1, [["t", 0, 1, "k-1"]], h=[1]), recs(1, [["t", 0, 0, "k-0"]], h=[1]),
                                      recs(1, [["t", 1, 0, "k-2"]], h=[1])])
        v = checker.check(PRODUCED, [a])[0]
        self.assertEqual(kinds(v), ["order"])
        self.assertIn("(holding 1)", v[0])

    def test_decreasing_commit(self):
        a = Member("a", 1, "x", "g", [recs(1, [["t", 0, 0, "k-0"], ["t", 0, 1, "k-1"], ["t", 1, 0, "k-2"]]),
                                      commit(1.0, 1.1, [["t", 0, 2]])])
        b = Member("b", 2, "x", "g", [commit(2.0, 2.1, [["t", 0, 1]])])
        self.assertEqual(kinds(checker.check(PRODUCED, [a, b])[0]), ["decreasing"])

    def test_overlapping_commits_are_not_ordered(self):
        a = Member("a", 1, "x", "g", [recs(1, [["t", 0, 0, "k-0"], ["t", 0, 1, "k-1"], ["t", 1, 0, "k-2"]]),
                                      commit(1.0, 1.5, [["t", 0, 2]])])
        b = Member("b", 2, "x", "g", [commit(1.2, 1.3, [["t", 0, 1]])])
        self.assertEqual(checker.check(PRODUCED, [a, b])[0], [])

    def test_failed_commits_do_not_count(self):
        a = Member("a", 1, "x", "g", [recs(1, [["t", 0, 0, "k-0"], ["t", 0, 1, "k-1"], ["t", 1, 0, "k-2"]]),
                                      commit(1.0, 1.1, [["t", 0, 2]], ok=False)])
        b = Member("b", 2, "x", "g", [commit(2.0, 2.1, [["t", 0, 1]])])
        self.assertEqual(checker.check(PRODUCED, [a, b])[0], [])

    def test_commits_of_other_groups_are_separate(self):
        a = Member("a", 1, "x", "g1", [recs(1, [["t", 0, 0, "k-0"], ["t", 0, 1, "k-1"], ["t", 1, 0, "k-2"]]),
                                       commit(1.0, 1.1, [["t", 0, 2]])])
        b = Member("b", 2, "x", "g2", [commit(2.0, 2.1, [["t", 0, 1]])])
        self.assertEqual(checker.check(PRODUCED, [a, b])[0], [])

    # ---- held-twice: a partition held by two members at once

    def test_a_partition_held_by_two_members_at_once(self):
        a = Member("a", 1, "x", "g", [assigned(1.0, [["t", 0]]), revoked(3.0, [["t", 0]])])
        b = Member("b", 2, "x", "g", [assigned(2.0, [["t", 0]])])
        v, _ = checker.check([], [a, b])
        self.assertEqual(kinds(v), ["held-twice"])
        self.assertIn("t[0] held by a from 1.000 to 3.000 and by b from 2.000 to now", v[0])

    def test_a_handoff_after_the_revocation_is_clean(self):
        a = Member("a", 1, "x", "g", [assigned(1.0, [["t", 0], ["t", 1]]), revoked(2.0, [["t", 0]])])
        b = Member("b", 2, "x", "g", [assigned(2.5, [["t", 0]])])
        v, stats = checker.check([], [a, b])
        self.assertEqual(v, [])
        self.assertEqual(stats["holdings"], 3)

    def test_a_holding_ended_by_lost_is_not_judged(self):
        a = Member("a", 1, "x", "g", [assigned(1.0, [["t", 0]]), revoked(3.0, [["t", 0]], ev="lost")])
        b = Member("b", 2, "x", "g", [assigned(2.0, [["t", 0]])])
        v, stats = checker.check([], [a, b])
        self.assertEqual(v, [])
        self.assertEqual(stats["lost_holdings"], 1)

    def test_a_holding_ends_where_the_coordinator_fenced_its_member(self):
        a = Member("a", 1, "x", "g", [assigned(1.0, [["t", 0]])])
        b = Member("b", 2, "x", "g", [assigned(2.5, [["t", 0]])])
        v, stats = checker.check([], [a, b], fenced={("g", "a"): [0.5, 2.0]})
        self.assertEqual(v, [])
        self.assertEqual(stats["fenced_holdings"], 1)
        # fenced after the other member took the partition: still held twice
        self.assertEqual(kinds(checker.check([], [a, b], fenced={("g", "a"): [3.0]})[0]), ["held-twice"])
        # a fencing of another label, or in another group, ends nothing
        self.assertEqual(kinds(checker.check([], [a, b], fenced={("g", "c"): [2.0], ("g2", "a"): [2.0]})[0]),
                         ["held-twice"])

    def test_a_holding_ends_when_the_process_ends_or_closes(self):
        b = Member("b", 2, "x", "g", [assigned(2.5, [["t", 0]])])
        killed = Member("a", 1, "x", "g", [assigned(1.0, [["t", 0]])], ended_at=2.0)
        self.assertEqual(checker.check([], [killed, b])[0], [])
        closed = Member("a", 1, "x", "g", [assigned(1.0, [["t", 0]]), {"ev": "closed", "t": 2.0}])
        self.assertEqual(checker.check([], [closed, b])[0], [])
        running = Member("a", 1, "x", "g", [assigned(1.0, [["t", 0]])])
        self.assertEqual(kinds(checker.check([], [running, b])[0]), ["held-twice"])

    def test_one_label_or_two_groups_may_overlap(self):
        # a restarted static member: two processes of one label; and another group
        a1 = Member("a", 1, "x", "g", [assigned(1.0, [["t", 0]])])
        a2 = Member("a", 2, "x", "g", [assigned(2.0, [["t", 0]])])
        other = Member("c", 3, "x", "g2", [assigned(1.5, [["t", 0]])])
        self.assertEqual(checker.check([], [a1, a2, other])[0], [])

    def test_a_partition_assigned_again_while_held_keeps_its_holding(self):
        # an eager client's assignment lists what it kept: one holding, from the first
        a = Member("a", 1, "x", "g", [assigned(1.0, [["t", 0]]), assigned(2.0, [["t", 0]]),
                                      revoked(3.0, [["t", 0]])])
        b = Member("b", 2, "x", "g", [assigned(2.5, [["t", 0]])])
        self.assertEqual(kinds(checker.check([], [a, b])[0]), ["held-twice"])

    def test_fidelity(self):
        exp = {"key": "6b", "value": "76", "headers": [["h", "01"]], "timestamp": 5}
        good = {"ev": "recs", "gen": 1, "r": [["t", 0, 0, "k"]], "f": [["t", 0, 0, "6b", "76", [["h", "01"]], 5, "create"]]}
        bad = {"ev": "recs", "gen": 1, "r": [["t", 0, 1, "k"]], "f": [["t", 0, 1, "6b", "76", [["h", "02"]], 5, "append"]]}
        problems, n = checker.fidelity([Member("a", 1, "x", "g", [good, bad])], lambda t, k: exp)
        self.assertEqual(n, 2)
        self.assertEqual(len(problems), 2)  # the header, and the timestamp type


if __name__ == "__main__":
    unittest.main()
