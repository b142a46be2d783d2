#!/usr/bin/env python3
"""Counts test cases from meson's testlog.json files.

A Criterion executable reports one line per test case ([PASS], [FAIL], [SKIP])
when run with CRITERION_VERBOSITY_LEVEL=1; each counts as one case. So does
each verdict line of `pytest -v` (NAME::case PASSED|FAILED|SKIPPED|ERROR|
XFAIL|XPASS; XFAIL counts as passed, ERROR as failed). Any other
test executable counts as one case with meson's verdict (exit 77 = skipped).
A Criterion executable that meson marks failed with no [FAIL] line (a crash at
exit, a sanitizer report, a timeout) adds one failure so it is never hidden.

usage: testcount.py LABEL testlog.json [LABEL testlog.json ...]
Prints one line per log, then 'N passed, N failed[, N skipped]' last.
"""
import json
import os
import re
import sys

CASE = re.compile(r"^\[(PASS|FAIL|SKIP)\] (\S+::\S+?):?(?:\s|$)", re.M)
PYTEST = re.compile(r"^(\S+::\S+) (PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS)\b", re.M)
PYTEST_KIND = {"PASSED": "PASS", "XFAIL": "PASS", "SKIPPED": "SKIP", "FAILED": "FAIL",
               "ERROR": "FAIL", "XPASS": "FAIL"}


def count(path):
    passed = failed = skipped = 0
    failures = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            t = json.loads(line)
            out = (t.get("stdout") or "") + "\n" + (t.get("stderr") or "")
            verdict = t.get("result", "")
            cases = CASE.findall(out) + [(PYTEST_KIND[k], n) for n, k in PYTEST.findall(out)]
            if cases:
                n_fail = 0
                for kind, name in cases:
                    if kind == "PASS":
                        passed += 1
                    elif kind == "SKIP":
                        skipped += 1
                    else:
                        n_fail += 1
                        failures.append(t["name"] + ": " + name)
                if verdict not in ("OK", "EXPECTEDFAIL") and n_fail == 0:
                    n_fail = 1
                    failures.append(t["name"] + ": " + verdict)
                failed += n_fail
            elif verdict == "OK":
                passed += 1
            elif verdict == "SKIP":
                skipped += 1
            else:
                failed += 1
                failures.append(t["name"] + ": " + verdict)
    return passed, failed, skipped, failures


def main(argv):
    total = [0, 0, 0]
    for label, path in zip(argv[1::2], argv[2::2]):
        p, f, s, failures = count(path)
        total[0] += p
        total[1] += f
        total[2] += s
        print(f"{label}: {p} passed, {f} failed, {s} skipped")
        for name in failures:
            print(f"  failed: {name}")
    broken = int(os.environ.get("PINIO_BROKEN_STAGES", "0"))
    if broken:
        print(f"stages that did not run (build or setup failure): {broken}")
        total[1] += broken
    left = os.environ.get("PINIO_LEFTOVERS")  # scripts/test's check, when it ran
    if left == "1":
        print("leftovers: 0 passed, 1 failed (temporary files the tests left behind, listed above)")
        total[1] += 1
    elif left == "0":
        print("leftovers: 1 passed, 0 failed")
        total[0] += 1
    line = f"{total[0]} passed, {total[1]} failed"
    if total[2]:
        line += f", {total[2]} skipped"
    print(line)
    return 1 if total[1] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
