"""The checker catches what it should, and only that:
    target/interop/venv/bin/python -m unittest discover -s interop/lib -p 'test_*.py'
"""
import unittest

import checker
from checker import Member


def recs(gen, rows, t=0.0, gen0=None):
    return {"ev": "recs", "gen": gen, "gen0": gen if gen0 is None else gen0, "t": t, "r": rows}


def commit(t0, t1, offs, ok=True):
    return {"ev": "commit", "t0": t0, "t": t1, "ok": ok, "offs": offs}


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

    def test_fidelity(self):
        exp = {"key": "6b", "value": "76", "headers": [["h", "01"]], "timestamp": 5}
        good = {"ev": "recs", "gen": 1, "r": [["t", 0, 0, "k"]], "f": [["t", 0, 0, "6b", "76", [["h", "01"]], 5, "create"]]}
        bad = {"ev": "recs", "gen": 1, "r": [["t", 0, 1, "k"]], "f": [["t", 0, 1, "6b", "76", [["h", "02"]], 5, "append"]]}
        problems, n = checker.fidelity([Member("a", 1, "x", "g", [good, bad])], lambda t, k: exp)
        self.assertEqual(n, 2)
        self.assertEqual(len(problems), 2)  # the header, and the timestamp type


if __name__ == "__main__":
    unittest.main()
