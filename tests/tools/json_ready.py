#!/usr/bin/python3
"""json_ready.py FILE: the time to ready of one successful `pinio load` or
`pinio stage --json` output (doc/json/SCHEMA.md "Time to ready") keeps its
ordering invariants: ready_s >= elapsed_s >= 0 and ready_s >= io_s; under
--mpi the same per rank, and the job's ready_s is its last rank's.
Values are never compared with a time: only with each other.
Exit 0, or 1 naming the key and the values."""
import json
import sys

path = sys.argv[1]
doc = json.loads(open(path, "rb").read())
bad = []


def check(where, o):
    r = o.get("ready_s")
    if not isinstance(r, (int, float)) or isinstance(r, bool):
        bad.append(f"{where}ready_s is {r!r}, want a number")
        return
    if r < 0:
        bad.append(f"{where}ready_s {r} < 0")
    for k in ("elapsed_s", "io_s"):
        if k in o and r < o[k]:
            bad.append(f"{where}ready_s {r} < {k} {o[k]}")


if "error" not in doc:
    check("", doc)
    ranks = doc.get("ranks")
    if ranks is not None:
        for o in ranks:
            check(f"ranks[{o.get('rank')}].", o)
        last = max((o.get("ready_s", 0) for o in ranks), default=0)
        if doc.get("ready_s") != last:
            bad.append(f"ready_s {doc.get('ready_s')} is not the last rank's ({last})")
if bad:
    sys.exit(f"{path}: " + "; ".join(bad))
