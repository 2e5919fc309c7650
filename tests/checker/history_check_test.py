"""history_check.py on hand-made histories, good and bad (ctest: checker.history, unit tier)."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import history_check  # noqa: E402

CHECKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "history_check.py")


def call(process, op, start, end, answer="ok", version=None, key="o1", expected=None):
    c = {"process": process, "op": op, "key": key, "start": start, "end": end,
         "answer": answer, "args": {}}
    if version is not None:
        c["version"] = version
    if expected is not None:
        c["args"]["expected_version"] = expected
    return c


def kinds(calls):
    lines = [json.dumps(c) for c in calls]
    return sorted({kind for kind, _ in history_check.check(history_check.parse(lines))})


# A good history: two writers with compare-and-set on one key, overlapping reads, a refused
# write, a write that got no answer and applied (version 4), a final read.
GOOD = [
    call(0, "write", 0, 10, version=1),                          # the create
    call(1, "write", 20, 30, version=2, expected=1),
    call(2, "write", 25, 35, answer="fail", expected=1),         # lost the race: refused
    call(3, "read", 26, 40, version=1),                          # overlaps the write: either
    call(2, "read", 36, 45, version=2),
    call(1, "write", 50, None, answer="unknown", expected=2),    # no answer, applied (3)
    call(2, "write", 60, 70, version=4, expected=3),
    call(3, "read", 75, 80, version=4),
    call(0, "final_read", 100, 110, version=4),
]


class GoodHistories(unittest.TestCase):
    def test_valid(self):
        self.assertEqual(kinds(GOOD), [])

    def test_concurrent_read_may_see_either_version(self):
        h = [call(0, "write", 0, 10, version=1),
             call(1, "write", 20, 40, version=2, expected=1),
             call(2, "read", 30, 35, version=2),   # sees the write in flight
             call(3, "read", 31, 50, version=1),   # overlaps both: allowed by this checker
             call(0, "final_read", 60, 61, version=2)]
        self.assertEqual(kinds(h), [])

    def test_unanswered_write_that_never_applied(self):
        h = [call(0, "write", 0, 10, version=1),
             call(1, "write", 20, None, answer="unknown", expected=1),
             call(0, "final_read", 60, 61, version=1)]
        self.assertEqual(kinds(h), [])

    def test_keys_are_separate(self):
        h = [call(0, "write", 0, 10, version=1, key="a"),
             call(0, "write", 20, 30, version=2, key="a", expected=1),
             call(1, "write", 0, 10, version=1, key="b"),
             call(1, "read", 40, 41, version=1, key="b"),
             call(0, "final_read", 50, 51, version=2, key="a"),
             call(0, "final_read", 50, 51, version=1, key="b")]
        self.assertEqual(kinds(h), [])


class BadHistories(unittest.TestCase):
    def test_lost_write(self):
        h = GOOD[:-1] + [call(0, "final_read", 100, 110, version=2)]
        self.assertIn("lost-write", kinds(h))

    def test_no_final_read(self):
        self.assertEqual(kinds(GOOD[:-1]), ["no-final-read"])

    def test_stale_read(self):
        h = GOOD + [call(4, "read", 90, 95, version=2)]  # version 4 was acknowledged at 70
        self.assertEqual(kinds(h), ["stale-read"])

    def test_stale_read_after_a_read(self):
        h = [call(0, "write", 0, 10, version=1),
             call(1, "write", 20, 100, version=2, expected=1),
             call(2, "read", 30, 40, version=2),    # saw the write in flight
             call(3, "read", 50, 60, version=1),    # started after that read ended: stale
             call(0, "final_read", 200, 201, version=2)]
        self.assertEqual(kinds(h), ["stale-read"])

    def test_stale_write(self):
        h = [call(0, "write", 0, 10, version=1),
             call(1, "write", 20, 30, version=2),
             call(2, "write", 40, 50, version=2),   # upsert answered an old version
             call(0, "final_read", 60, 61, version=2)]
        self.assertEqual(kinds(h), ["duplicate", "stale-write"])

    def test_duplicate_version(self):
        h = [call(0, "write", 0, 10, version=1),
             call(1, "write", 20, 40, version=2, expected=1),
             call(2, "write", 21, 41, version=2, expected=1),  # two compare-and-sets won
             call(0, "final_read", 60, 61, version=2)]
        self.assertEqual(kinds(h), ["duplicate"])

    def test_cas_answered_another_version(self):
        h = [call(0, "write", 0, 10, version=1),
             call(1, "write", 20, 30, version=3, expected=1),
             call(2, "write", 15, None, answer="unknown"),
             call(0, "final_read", 60, 61, version=3)]
        self.assertEqual(kinds(h), ["cas"])

    def test_gap_from_a_refused_write_that_applied(self):
        h = [call(0, "write", 0, 10, version=1),
             call(1, "write", 20, 30, answer="fail", expected=1),  # said refused, applied
             call(2, "write", 40, 50, version=3, expected=2),
             call(0, "final_read", 60, 61, version=3)]
        self.assertEqual(kinds(h), ["gap"])

    def test_gap_seen_by_a_read_only(self):
        h = [call(0, "write", 0, 10, version=1),
             call(1, "read", 20, 30, version=2),   # a version no write explains
             call(0, "final_read", 60, 61, version=2)]
        self.assertEqual(kinds(h), ["gap"])

    def test_one_unknown_explains_one_gap_not_two(self):
        h = [call(0, "write", 0, 10, version=1),
             call(1, "write", 20, None, answer="unknown", expected=1),
             call(2, "write", 40, 50, version=4, expected=3),
             call(0, "final_read", 60, 61, version=4)]
        self.assertEqual(kinds(h), ["gap"])


class Input(unittest.TestCase):
    def test_refuses_what_is_not_a_history(self):
        for text, says in [
            ("{not json", "not JSON"),
            ('{"op": "write", "key": "k", "start": 0, "answer": "ok"}', "no `process`"),
            ('{"process": 1, "op": "cas", "key": "k", "start": 0, "answer": "ok"}', "`op`"),
            ('{"process": 1, "op": "read", "key": "k", "start": 0, "end": 1, "answer": "ok"}',
             "integer `version`"),
            ('{"process": 1, "op": "read", "key": "k", "start": 5, "end": 1, "answer": "fail"}',
             "`end` before `start`"),
        ]:
            with self.assertRaises(history_check.BadHistory) as e:
                history_check.parse([text])
            self.assertIn(says, str(e.exception))
            self.assertIn("line 1", str(e.exception))

    def run_checker(self, calls, options=()):
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
            for c in calls:
                f.write(json.dumps(c) + "\n")
        try:
            return subprocess.run([sys.executable, CHECKER] + list(options) + [f.name],
                                  capture_output=True, text=True)
        finally:
            os.unlink(f.name)

    def test_command_line_verdicts(self):
        good = self.run_checker(GOOD)
        self.assertEqual(good.returncode, 0, good.stdout + good.stderr)
        self.assertIn("verdict: VALID", good.stdout)
        self.assertIn("9 calls on 1 keys", good.stdout)
        bad = self.run_checker(GOOD + [call(4, "read", 90, 95, version=2)])
        self.assertEqual(bad.returncode, 1)
        self.assertIn("violation stale-read: key o1", bad.stdout)
        self.assertIn("verdict: INVALID (1 violations)", bad.stdout)

    def test_known_kinds_are_listed_not_counted(self):
        stale = GOOD + [call(4, "read", 90, 95, version=2)]
        r = self.run_checker(stale, ["--known", "stale-read"])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("known violation stale-read: key o1", r.stdout)
        self.assertIn("verdict: VALID (known violations, not counted: stale-read: 1)", r.stdout)
        # Another kind still counts.
        lost = stale[:-2] + [call(0, "final_read", 100, 110, version=2), stale[-1]]
        r = self.run_checker(lost, ["--known", "stale-read"])
        self.assertEqual(r.returncode, 1)
        self.assertIn("violation lost-write", r.stdout)
        self.assertIn("verdict: INVALID (1 violations) (known violations, not counted: "
                      "stale-read: 1)", r.stdout)
        r = self.run_checker(GOOD, ["--known", "stale-reads"])
        self.assertEqual(r.returncode, 2)
        self.assertIn("stale-reads is not a kind", r.stderr)

    def test_command_line_bad_input(self):
        r = subprocess.run([sys.executable, CHECKER, "/nonexistent/history.jsonl"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("/nonexistent/history.jsonl", r.stderr)


if __name__ == "__main__":
    unittest.main()
