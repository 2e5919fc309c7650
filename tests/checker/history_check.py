#!/usr/bin/env python3
"""Checks a history of calls on versioned registers with compare-and-set.

Each key (an offer) is a register whose version starts at 1 (the create) and grows by one with
every committed write. The fault tests (tests/e2e/netfault.e2etest.cpp) record every call a
client made, one JSON object per line:

  {"process": 3, "op": "write", "key": "o1", "start": 1200, "end": 1250,
   "args": {"expected_version": 4}, "answer": "ok", "version": 5}

- op: "write" (a create or an update; args.expected_version when it was a compare-and-set),
  "read", or "final_read" (a read made after every other call ended and the faults healed).
- start, end: the client's monotonic clock, any unit, the same for every process; end is null
  when the call got no answer at all.
- answer: "ok" (acknowledged; version is what the call was answered), "fail" (refused for
  sure: nothing applied, e.g. a version mismatch or UNAVAILABLE "safe to retry"), "unknown"
  (a deadline, a broken connection: it may or may not have applied, even later).

Verdicts, per key (the Knossos / Porcupine idea, narrowed to this register):
  lost-write     the final read shows a version older than an acknowledged write's
  stale-read     a read returned a version older than one acknowledged (to a write or a read)
                 by a call that ended before the read started
  stale-write    a write was acknowledged a version not newer than one acknowledged by a call
                 that ended before the write started
  duplicate      two writes acknowledged with the same version
  cas            a compare-and-set acknowledged with a version other than expected + 1
  gap            versions up to the newest seen that no acknowledged write holds, more of them
                 than writes left without an answer (a refused write that applied, or a version
                 skipped)
  no-final-read  a key with acknowledged writes and no final read

`--known KIND[,KIND...]`: violations of these kinds are printed as known ones and do not make
the verdict INVALID (a defect found and written down, not yet fixed: the fault test says which
and why); any other kind still does.

Exit status: 0 valid (or only known violations), 1 violations found (each printed on a line),
2 the input or the arguments are wrong (the line and what is wrong). Python 3 standard library
only.
"""

import json
import sys
from collections import defaultdict

OPS = ("write", "read", "final_read")
KINDS = ("lost-write", "stale-read", "stale-write", "duplicate", "cas", "gap", "no-final-read")
ANSWERS = ("ok", "fail", "unknown")


class BadHistory(Exception):
    pass


def parse(lines):
    calls = []
    for number, line in enumerate(lines, 1):
        line = line.strip()
        if not line:
            continue
        try:
            c = json.loads(line)
        except json.JSONDecodeError as e:
            raise BadHistory("line %d: not JSON: %s" % (number, e))
        if not isinstance(c, dict):
            raise BadHistory("line %d: not an object" % number)
        for field in ("process", "op", "key", "start", "answer"):
            if field not in c:
                raise BadHistory("line %d: no `%s`" % (number, field))
        if c["op"] not in OPS:
            raise BadHistory("line %d: `op` is %r, not one of %s" % (number, c["op"], OPS))
        if c["answer"] not in ANSWERS:
            raise BadHistory(
                "line %d: `answer` is %r, not one of %s" % (number, c["answer"], ANSWERS))
        if c["answer"] == "ok" and not isinstance(c.get("version"), int):
            raise BadHistory("line %d: an `ok` answer needs an integer `version`" % number)
        if c["answer"] == "ok" and c.get("end") is None:
            raise BadHistory("line %d: an `ok` answer needs `end`" % number)
        if c.get("end") is not None and c["end"] < c["start"]:
            raise BadHistory("line %d: `end` before `start`" % number)
        c["args"] = c.get("args") or {}
        c["line"] = number
        calls.append(c)
    return calls


def describe(c):
    return "%s by process %s [%s..%s] line %d" % (
        c["op"], c["process"], c["start"], c.get("end"), c["line"])


def check_key(key, calls):
    """Violations of one key's calls, as (kind, message)."""
    out = []
    acked = [c for c in calls if c["answer"] == "ok"]
    writes_ok = [c for c in acked if c["op"] == "write"]
    writes_unknown = [c for c in calls if c["op"] == "write" and c["answer"] == "unknown"]
    finals = [c for c in acked if c["op"] == "final_read"]

    by_version = defaultdict(list)
    for w in writes_ok:
        by_version[w["version"]].append(w)
        expected = w["args"].get("expected_version")
        if expected is not None and w["version"] != expected + 1:
            out.append(("cas", "key %s: %s expected version %d, acknowledged %d" % (
                key, describe(w), expected, w["version"])))
    for v, ws in sorted(by_version.items()):
        if len(ws) > 1:
            out.append(("duplicate", "key %s: version %d acknowledged to %d writes: %s" % (
                key, v, len(ws), "; ".join(describe(w) for w in ws))))

    # Real-time order: a call that starts after another ended sees its version or a later one.
    by_end = sorted(acked, key=lambda c: c["end"])
    for c in acked:
        if c["op"] == "final_read":
            continue
        newest = None
        for before in by_end:
            if before["end"] >= c["start"]:
                break
            if newest is None or before["version"] > newest["version"]:
                newest = before
        if newest is None:
            continue
        if c["op"] == "read" and c["version"] < newest["version"]:
            out.append(("stale-read", "key %s: %s returned version %d, but %s had been "
                        "answered version %d before it started" % (
                            key, describe(c), c["version"], describe(newest),
                            newest["version"])))
        if c["op"] == "write" and c["version"] <= newest["version"]:
            out.append(("stale-write", "key %s: %s was acknowledged version %d, but %s had "
                        "been answered version %d before it started" % (
                            key, describe(c), c["version"], describe(newest),
                            newest["version"])))

    newest_write = max((w["version"] for w in writes_ok), default=None)
    if newest_write is not None and not finals:
        out.append(("no-final-read", "key %s: writes acknowledged up to version %d, no final "
                    "read" % (key, newest_write)))
    for f in finals:
        if newest_write is not None and f["version"] < newest_write:
            out.append(("lost-write", "key %s: %s shows version %d, but version %d was "
                        "acknowledged" % (key, describe(f), f["version"], newest_write)))

    seen = max((c["version"] for c in acked), default=0)
    missing = [v for v in range(1, seen + 1) if v not in by_version]
    if len(missing) > len(writes_unknown):
        out.append(("gap", "key %s: versions %s (up to %d seen) held by no acknowledged write, "
                    "only %d write(s) got no answer" % (
                        key, ",".join(map(str, missing)), seen, len(writes_unknown))))
    return out


def check(calls):
    by_key = defaultdict(list)
    for c in calls:
        by_key[c["key"]].append(c)
    out = []
    for key in sorted(by_key):
        out.extend(check_key(key, by_key[key]))
    return out


def summary(calls):
    counts = defaultdict(int)
    for c in calls:
        counts["%s %s" % (c["op"], c["answer"])] += 1
    keys = len({c["key"] for c in calls})
    return "%d calls on %d keys (%s)" % (
        len(calls), keys, ", ".join("%s: %d" % kv for kv in sorted(counts.items())))


USAGE = ("usage: history_check.py [--known KIND[,KIND...]] HISTORY.jsonl  (the module's doc "
         "has the format; kinds: %s)" % ", ".join(KINDS))


def main(argv):
    args = argv[1:]
    if args in (["-h"], ["--help"]):
        print(USAGE)
        return 0
    known = set()
    if len(args) == 3 and args[0] == "--known":
        known = set(args[1].split(","))
        args = args[2:]
        wrong = sorted(known - set(KINDS))
        if wrong:
            print("history_check: --known: %s is not a kind (%s)" % (
                ", ".join(wrong), ", ".join(KINDS)), file=sys.stderr)
            return 2
    if len(args) != 1:
        print(USAGE, file=sys.stderr)
        return 2
    try:
        with open(args[0]) as f:
            calls = parse(f)
    except (OSError, BadHistory) as e:
        print("history_check: %s: %s" % (args[0], e), file=sys.stderr)
        return 2
    violations = check(calls)
    print("history: " + summary(calls))
    counted = 0
    for kind, message in violations:
        if kind in known:
            print("known violation %s: %s" % (kind, message))
        else:
            counted += 1
            print("violation %s: %s" % (kind, message))
    known_counts = defaultdict(int)
    for kind, _ in violations:
        if kind in known:
            known_counts[kind] += 1
    known_text = ", ".join("%s: %d" % kv for kv in sorted(known_counts.items()))
    if counted:
        verdict = "INVALID (%d violations)" % counted
    else:
        verdict = "VALID"
    if known_text:
        verdict += " (known violations, not counted: %s)" % known_text
    print("verdict: " + verdict)
    return 0 if not counted else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
