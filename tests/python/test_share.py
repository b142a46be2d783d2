"""Node-local sharing from Python (issue 40): processes that load one file
at once read it from storage once, every tensor right; share="off" and
PINIO_SHARE=0 read privately; report()["share"] says which ran."""
import hashlib
import json
import os
import subprocess
import sys

import pytest

import pinio

CHILD = r"""
import hashlib, json, sys
import pinio
ck = pinio.open(sys.argv[1], framework="np", memory="pinned", share=sys.argv[2])
sums = {n: hashlib.sha256(t.tobytes()).hexdigest() for n, t in ck.tensors().items()}
r = ck.report()
print(json.dumps({"read_bytes": r["read_bytes"], "share": r["share"], "sums": sums}), flush=True)
sys.stdin.readline()  # held until every child has loaded: they overlap on a busy machine too
ck.close()
"""


def _gen(path, seed):
    import numpy as np
    from pinio.safetensors.numpy import save_file

    rng = np.random.default_rng(seed)
    save_file({f"t{i}": rng.integers(0, 255, size=(1 << 20) + 17 * i, dtype=np.uint8)
               for i in range(6)}, path)


def _children(path, n, share, env):
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, path, share], env=env,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
             for _ in range(n)]
    lines = [p.stdout.readline() for p in procs]
    for p, line in zip(procs, lines):
        o, e = p.communicate("\n", timeout=300)
        assert p.returncode == 0 and line, e
    return [json.loads(line) for line in lines]


@pytest.fixture
def segs(shm):
    env = dict(os.environ, PINIO_SHARE_DIR=shm)
    env.pop("PINIO_SHARE", None)
    yield shm, env
    assert os.listdir(shm) == [], "segments left behind"


def _ref(path):
    ck = pinio.open(path, framework="np", memory="pinned", share="off")
    try:
        sums = {n: hashlib.sha256(t.tobytes()).hexdigest() for n, t in ck.tensors().items()}
        r = ck.report()
        assert r["share"]["line"] == "private: sharing off (the share option)"
        return sums, r["read_bytes"]
    finally:
        ck.close()


def _at_once(tmp, env, seed, n, share):
    """n children loading one new file at once, every tensor checked against
    a private load; their outputs and what the private load read."""
    path = os.path.join(tmp, "m%d.safetensors" % seed)
    _gen(path, seed)
    sums, one = _ref(path)
    got = _children(path, n, share, env)
    assert all(g["sums"] == sums for g in got)
    return got, one


def test_alone_reads_privately(tmp, segs):
    """A load that is alone reads into private memory (the default: a
    segment is made only for a process that asks while it reads), and
    says so; nothing is left behind (the fixture)."""
    got, one = _at_once(tmp, segs[1], 8, 1, "auto")
    assert got[0]["read_bytes"] == one
    assert got[0]["share"]["line"].startswith("read here alone: no other process asked")
    assert got[0]["share"]["files_read_here"] == 0


def test_three_at_once_read_once(tmp, segs):
    # PINIO_SHARE=eager: the reader makes its segment at once, so that a
    # child that starts after it finished still maps it (the children
    # overlap only once loaded, held on stdin; tests/load/share_test.sh
    # forces the default's order with its fault point).
    got, one = _at_once(tmp, dict(segs[1], PINIO_SHARE="eager"), 5, 3, "auto")
    assert sum(g["read_bytes"] for g in got) == one
    assert sorted(g["share"]["files_read_here"] for g in got) == [0, 0, 1]
    assert sum(g["share"]["files_shared"] for g in got) == 2


def test_off_reads_privately(tmp, segs):
    got, one = _at_once(tmp, segs[1], 6, 2, "off")
    assert sum(g["read_bytes"] for g in got) == 2 * one
    got, one = _at_once(tmp, dict(segs[1], PINIO_SHARE="0"), 7, 2, "auto")
    assert sum(g["read_bytes"] for g in got) == 2 * one
    assert all(g["share"]["line"] == "private: sharing off (PINIO_SHARE=0)" for g in got)


def test_bad_share_value(tmp):
    with pytest.raises(ValueError, match="share='sometimes' is invalid"):
        pinio.open(os.path.join(tmp, "none.safetensors"), share="sometimes")
