"""Tensor-parallel loads from Python (issue 26).

One process: pinio.open/load(paths, split=, rank=, world=) give each rank
torch.chunk(full, world, dim)[rank] byte for byte, as zero-copy views of the
arena, and read about the slice's bytes (the report and /proc/self/io).

A torch.distributed group (gloo on the CPU, 2-4 processes of tp_worker.py,
file:// rendezvous in the test's folder, every wait bounded): with
process_group= every rank ends with exactly its slices (random shapes,
dtypes and split rules, several exchange rounds), the group's reads sum to
at most 1.1x the selected data, and a rank whose split or files differ
makes every rank raise the same error, before anything is read, as does
a bad argument on one rank.

The same group to each rank's device (device="cuda:0", through the test
driver of PINIO_CUDA_LIB, in each process its own, with an allocator over
its memory): every rank's device bytes, read back by the driver, are
torch.chunk(full, world, dim)[rank]; the tensors every rank holds whole are
read once by the group (its reads sum to at most 1.1x the selected data,
also when nothing is split); a rank with another split, another destination
or no driver makes every rank raise the same error.
"""
import builtins
import errno
import json
import os
import random
import re
import subprocess
import sys
import time

import pytest
import torch

import pinio
from conftest import rchar
from pinio.safetensors.torch import save_file
from test_split import DTYPES, expected, random_tensor, raw

HERE = os.path.dirname(os.path.abspath(__file__))
LIB = os.environ.get("PINIO_CUDA_LIB")
needs_driver = pytest.mark.skipif(not LIB, reason="PINIO_CUDA_LIB (the test driver) is not set")
GROUP_TIMEOUT = 240  # seconds for a whole group of processes, on a loaded machine


def checkpoint(tmp, seed, n=6, big=False):
    """A file of random tensors and random per-tensor dims (None: whole)."""
    rng = random.Random(seed)
    torch.manual_seed(seed)
    tensors, dims = {}, {}
    for i in range(n):
        name = f"model.layers.{i}.weight"
        if big:  # large enough that alignment is a small share of the reads
            rows, cols = rng.randint(300, 700), rng.randint(200, 600)
            tensors[name] = torch.randn(rows, cols).to(rng.choice([torch.float32, torch.bfloat16]))
        else:
            tensors[name] = random_tensor(rng, rng.choice(DTYPES))
        r = tensors[name].dim()
        dims[name] = rng.choice([None] + list(range(-r, r)))
    tensors["model.norm.weight"] = torch.randn(33)
    dims["model.norm.weight"] = None
    if big:  # a row-parallel slice of long runs (>= 256 KiB at world <= 4): read by its rank
        tensors["model.wide.weight"] = torch.randn(3, 1 << 18)
        dims["model.wide.weight"] = 1
        # and a dim-0 one large enough (1 MiB a rank at world 4) that the
        # blocks at its ends are a small share of it: read by its rank too
        tensors["model.tall.weight"] = torch.randn(1 << 12, 256)
        dims["model.tall.weight"] = 0
    path = os.path.join(tmp, f"ckpt-{seed}.safetensors")
    save_file(tensors, path)
    return path, tensors, dims


def rules_of(dims):
    return [(n, d) for n, d in dims.items() if d is not None]


# ---------------------------------------------------------------- one process

@pytest.mark.parametrize("seed", range(6))
def test_each_rank_alone_is_torch_chunk(tmp, seed):
    path, tensors, dims = checkpoint(tmp, seed)
    world = random.Random(seed).randint(1, 8)
    for rank in range(world):
        with pinio.open(path, split=dict(rules_of(dims)), rank=rank, world=world) as ck:
            assert set(ck.keys()) == set(tensors)
            for name, full in tensors.items():
                d = dims[name]
                want = full if d is None else expected(full, world, rank, d)
                got = ck[name]
                assert got.dtype == full.dtype
                assert tuple(got.shape) == tuple(want.shape), (name, world, rank, d)
                assert raw(got) == raw(want), (name, world, rank, d)
                if got.numel():  # a view of the arena, not a copy
                    assert got.data_ptr() == ck.buffer(name).address


def test_split_forms_and_numpy(tmp):
    path, tensors, dims = checkpoint(tmp, 3, big=True)
    rules = rules_of(dims)
    as_str = [f"{n}={'whole' if d is None else d}" for n, d in rules]
    a = pinio.load(path, split=rules, rank=1, world=3)
    b = pinio.load(path, split=as_str, rank=1, world=3)
    with pinio.open(path, framework="np", split=dict(rules), rank=1, world=3) as c:
        for name in tensors:
            assert raw(a[name]) == raw(b[name])
            if a[name].dtype != torch.bfloat16:  # numpy has no bfloat16
                assert raw(a[name]) == c[name].tobytes()
                assert c[name].shape == tuple(a[name].shape)


def test_first_rule_wins_and_whole(tmp):
    path = os.path.join(tmp, "m.safetensors")
    w = torch.arange(64 * 8, dtype=torch.float32).reshape(64, 8)
    save_file({"a.weight": w, "a.norm": torch.ones(64), "b.weight": w + 1}, path)
    got = pinio.load(path, split={"*.norm": "whole", "a.*": 1, "*": 0}, rank=1, world=2)
    assert torch.equal(got["a.norm"], torch.ones(64))
    assert torch.equal(got["a.weight"], w[:, 4:])
    assert torch.equal(got["b.weight"], (w + 1)[32:])


def test_split_with_verify_and_arena(tmp):
    import hashlib

    path = os.path.join(tmp, "m.safetensors")
    w = torch.randn(64, 96)
    save_file({"w": w}, path)
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    with pinio.open(path, split={"w": 1}, rank=2, world=3, verify=True) as ck:
        assert ck.report()["sha256"] == [digest]  # the whole file's, from a slice's load
        assert torch.equal(ck["w"], w[:, 64:])
    arena = pinio.Arena()
    got = pinio.load(path, split={"w": 0}, rank=0, world=2, arena=arena)
    assert torch.equal(got["w"], w[:32])


def test_dim0_split_reads_about_its_slice(tmp):
    """A first-dimension split reads its slice, counted by the report and
    by the kernel, within alignment (one 4 KiB block at each end). Pinned
    and through the engine's pread rung, so that rchar counts the reads
    (a mapped hot file reads nothing; io_uring's reads are not in rchar)."""
    path = os.path.join(tmp, "rows.safetensors")
    w = torch.randn(4096, 512)  # 8 MiB
    save_file({"w": w}, path)
    for rank in range(4):
        k0 = rchar()
        with pinio.open(path, split={"w": 0}, rank=rank, world=4, memory="pinned",
                        backend="pread") as ck:
            read = ck.report()["read_bytes"]
            assert torch.equal(ck["w"], w[rank * 1024:(rank + 1) * 1024])
        want = w.numel() * 4 // 4
        assert want <= read <= want * 1.02 + 2 * 4096, read
        assert rchar() - k0 <= want * 1.02 + 3 * 4096 + (1 << 16)  # headers too


@pytest.mark.parametrize("kw,err", [
    (dict(split={"w": 0}), "rank= and world="),
    (dict(split={"w": 0}, rank=2, world=2), "0 <= rank < world"),
    (dict(rank=0, world=2), "need split="),
    (dict(split={"w": "two"}, rank=0, world=2), "not an int or 'whole'"),
    (dict(split=["w"], rank=0, world=2), "PATTERN=DIM"),
    (dict(split={"w": 0}, process_group=object(), device="cuda", framework="np"),
     "needs framework='pt'"),
    (dict(process_group=object(), device="cuda:0", memory="pinned"), "chooses host memory"),
    (dict(process_group=object(), device="cuda:0", arena=object()), "does not take"),
    (dict(process_group=object(), allocator=lambda *a: None), "GPU device only"),
    (dict(process_group=object(), slot_size=1 << 20), "GPU device load only"),
    (dict(round_bytes=1 << 20), "process_group"),
    (dict(process_group=object(), verify=True), "does not take"),
    (dict(exchange="shm"), "process_group"),
])
def test_bad_split_arguments(tmp, kw, err):
    path = os.path.join(tmp, "m.safetensors")
    save_file({"w": torch.zeros(4, 4)}, path)
    with pytest.raises(ValueError, match=err):
        pinio.load(path, **kw)


def test_ints_into_c_are_never_cut(tmp):
    """Every int that crosses into C is range-checked, never cut to its C
    type (issue 37 item 7a): world=2**32 + 1 was world 1 (each rank read
    every tensor whole), rank=2**32 rank 0, a negative offset a huge one."""
    from pinio import _pinio

    path = os.path.join(tmp, "m.safetensors")
    save_file({"w": torch.arange(16.0).reshape(4, 4)}, path)
    out = "is out of range: an int from 0 to"
    calls = [
        (lambda: pinio.load(path, split={"w": 0}, rank=0, world=2 ** 32 + 1),
         f"world=4294967297 {out} 4294967295"),
        (lambda: pinio.load(path, split={"w": 0}, rank=2 ** 32, world=2 ** 32 + 1),
         "rank=4294967296"),
        (lambda: _pinio.load([path], split=[("w", 0)], rank=0, world=2 ** 64), "world="),
        (lambda: _pinio.load([path], split=[("w", 0)], rank=-1, world=2), f"rank=-1 {out}"),
        (lambda: _pinio.plan([path], None, [("w", 0)], 0, 2 ** 32 + 2), "world=4294967298"),
        (lambda: _pinio.plan([path], None, [("w", 0)], 2 ** 40, 2), "rank=1099511627776"),
        (lambda: _pinio.stream_gpu([path], lambda s: [], slots=2 ** 32 + 2), "slots="),
        (lambda: _pinio.stream_gpu([path], lambda s: [], slot_size=-1), "slot_size=-1"),
        (lambda: _pinio.stream_gpu([path], lambda s: [], split=[("w", 0)], rank=0,
                                   world=2 ** 32 + 1), "world="),
        (lambda: _pinio.copy_gpu([path], lambda s: [], {}, split=[("w", 0)], rank=0,
                                 world=2 ** 32 + 1), "world="),
        (lambda: _pinio.copy_gpu([path], lambda s: [], {}, slots=-2), "slots=-2"),
    ]
    for call, err in calls:
        with pytest.raises(ValueError, match=re.escape(err)):
            call()
    with builtins.open(path, "rb") as f:
        fd = f.fileno()
        assert bytes(_pinio.read(fd, 0, 8)) == f.read(8)
        for off, length, err in [(-1, 8, "offset=-1"), (2 ** 63, 8, "offset="),
                                 (0, -1, "length=-1"), (0, 2 ** 64, "length=")]:
            with pytest.raises(ValueError, match=re.escape(err)):
                _pinio.read(fd, off, length)
    with pytest.raises(TypeError, match="rank=1.0: an int"):
        _pinio.plan([path], None, [("w", 0)], 1.0, 2)


def test_dimension_out_of_range_names_the_tensor(tmp):
    path = os.path.join(tmp, "m.safetensors")
    save_file({"a.weight": torch.zeros(4, 4), "b.bias": torch.zeros(4)}, path)
    with pytest.raises(pinio.Error, match=r"tensor 'b.bias'.*dimension 1"):
        pinio.load(path, split={"*": 1}, rank=0, world=2)


# ------------------------------------------------------- torch.distributed

def run_group(tmp, world, scenarios, tag, env=None):
    """Runs tp_worker.py as ranks 0..world-1; returns each rank's results."""
    scen = os.path.join(tmp, f"{tag}.json")
    with open(scen, "w") as f:
        json.dump(scenarios, f)
    init = os.path.join(tmp, f"{tag}.init")
    outs = [os.path.join(tmp, f"{tag}.{r}.out") for r in range(world)]
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1", **(env or {}))
    procs = [subprocess.Popen([sys.executable, os.path.join(HERE, "tp_worker.py"), scen, str(r),
                               str(world), init, outs[r]], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for r in range(world)]
    logs = []
    try:
        for p in procs:
            logs.append(p.communicate(timeout=GROUP_TIMEOUT)[0])
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
        for p in procs:
            p.communicate()
        pytest.fail(f"the group of {world} did not finish in {GROUP_TIMEOUT} s (a hang)")
    for r, p in enumerate(procs):
        assert p.returncode == 0, f"rank {r} exited {p.returncode}:\n{logs[r]}"
    res = []
    for o in outs:
        with open(o) as f:
            res.append(json.load(f))
    return res


def scenario(path, dims, **kw):
    return dict(paths=[path], split=rules_of(dims), dims=dims, **kw)


@pytest.mark.parametrize("world", [2, 3, 4])
def test_group_gets_torch_chunk_and_reads_once(tmp, world):
    small_path, small, small_dims = checkpoint(tmp, 100 + world, n=8)
    big_path, big, big_dims = checkpoint(tmp, 200 + world, n=8, big=True)
    big_dims["model.layers.0.weight"] = 1  # a strided slice and a dim-0 one, at least
    big_dims["model.layers.1.weight"] = 0
    scenarios = [  # shared memory (one host), then through the process group
        scenario(small_path, small_dims),
        scenario(small_path, small_dims, exchange="group", round_bytes=1 << 10),  # many rounds
        scenario(big_path, big_dims),
        scenario(big_path, big_dims, exchange="group", round_bytes=1 << 20),
    ]
    res = run_group(tmp, world, scenarios, f"g{world}")
    for i, sc in enumerate(scenarios):
        for r in range(world):
            got = res[r][i]
            assert "error" not in got, (i, r, got)
            assert got["bad"] == [] and got["missing"] == [], (i, r, got)
            assert got["names"] == sorted(sc["dims"])
        reps = [res[r][i]["report"] for r in range(world)]
        # time to ready: from each rank's call, so past its load's own time
        assert all(rep["ready_seconds"] >= rep["seconds"] >= 0 for rep in reps), reps
        group_read = sum(rep["read_bytes"] for rep in reps)
        assert all(rep["group_read_bytes"] == group_read for rep in reps)
        if sc["paths"][0] == big_path:
            data = sum(t.numel() * t.element_size() for t in big.values())
            assert reps[0]["group_bytes"] == data
            assert group_read <= 1.1 * data, (world, group_read, data)
            # the wide tensor's runs and the dim-0 slices are read by their ranks
            assert reps[0]["direct_tensors"] >= 2 and reps[0]["exchanged_tensors"] >= 1
    rounds = [res[r][1]["report"]["rounds"] for r in range(world)]
    assert min(rounds) > 1  # the pipelined path ran
    assert [res[r][i]["report"]["exchange"] for i in range(4) for r in range(world)] == \
        ["shm"] * world + ["group"] * world + ["shm"] * world + ["group"] * world
    boards = {tuple(res[r][i]["report"]["shm_files"]) for i in (0, 2) for r in range(world)}
    assert len(boards) == 2 and all(len(b) == world for b in boards)  # one per load, agreed
    leftovers = [f for b in boards for f in b if os.path.exists(f)]
    assert not leftovers  # every owner removed its file


def test_exchange_files_of_dead_ranks_are_swept(tmp):
    """A rank killed mid-exchange leaves its /dev/shm file: the next load
    on the host removes it once its writer is dead and it is a minute old,
    and never a live writer's or a fresh one."""
    from pinio import _dist
    ns, _ = _dist._ident()
    if not ns:
        pytest.skip("no /proc/self/ns/pid: pid namespaces unknown here")
    dead = subprocess.Popen(["true"])
    dead.wait()  # a pid that was, and is no more
    tag = os.environ.get("PINIO_TEST_RUN", f"p{os.getpid()}")
    made = {
        "dead_old": (f"/dev/shm/pinio-tp-{ns}-{dead.pid}-{tag}a-0", 3600, True),
        "dead_new": (f"/dev/shm/pinio-tp-{ns}-{dead.pid}-{tag}b-0", 0, False),
        "alive_old": (f"/dev/shm/pinio-tp-{ns}-{os.getpid()}-{tag}c-0", 3600, False),
        "other_ns": (f"/dev/shm/pinio-tp-{ns + 1}-{dead.pid}-{tag}d-0", 3600, False),
    }
    try:
        for path, age, _ in made.values():
            with open(path, "wb") as f:
                f.write(b"x" * 4096)
            t = time.time() - age
            os.utime(path, (t, t))
        _dist._sweep_stale()
        for what, (path, _, goes) in made.items():
            assert os.path.exists(path) != goes, what
    finally:
        for path, _, _ in made.values():
            if os.path.exists(path):
                os.unlink(path)


def test_small_dev_shm_is_one_error_and_leaves_nothing(tmp):
    """A /dev/shm too small for the exchange (Docker's is 64 MiB): the owner
    reserves its file's pages before it writes, so every rank raises the
    same error naming the file, the bytes needed and free, and nothing is
    left in /dev/shm (issue 37 item 8; the owner died of SIGBUS and left
    its file). A 1 MiB tmpfs over /dev/shm in a mount namespace of the
    group's own (unshare -m, root): skipped where it cannot be made."""
    import shutil

    unshare = shutil.which("unshare")
    if not unshare or subprocess.run([unshare, "-m", "sh", "-c",
                                      "mount -t tmpfs -o size=1m pinio-test /dev/shm"],
                                     capture_output=True).returncode != 0:
        pytest.skip("cannot mount a small tmpfs over /dev/shm in a mount namespace of its own "
                    "(unshare -m and mount need root)")
    path = os.path.join(tmp, "m.safetensors")
    save_file({"a.weight": torch.arange(1 << 20, dtype=torch.float32),  # 4 MiB whole: exchanged
               "b.weight": torch.ones(8, 8)}, path)
    sc = os.path.join(tmp, "shm.json")
    with open(sc, "w") as f:
        json.dump([dict(paths=[path], split=[], dims={"a.weight": None, "b.weight": None},
                        exchange="shm"),
                   dict(paths=[path], split=[], dims={"a.weight": None, "b.weight": None},
                        exchange="group")], f)
    outs = [os.path.join(tmp, f"shm.{r}.out") for r in range(2)]
    worker = [sys.executable, os.path.join(HERE, "tp_worker.py"), sc]
    init = os.path.join(tmp, "shm.init")
    script = ("mount -t tmpfs -o size=1m pinio-test /dev/shm || exit 77\n"
              '"$@" 0 2 "$INIT" "$OUT0" & a=$!\n'
              '"$@" 1 2 "$INIT" "$OUT1" & b=$!\n'
              'wait $a; ra=$?; wait $b; rb=$?\n'
              'ls -A /dev/shm >"$LEFT"\n'
              'echo "ranks exited $ra $rb"; [ $ra -eq 0 ] && [ $rb -eq 0 ]\n')
    left = os.path.join(tmp, "shm.left")
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1", TP_GROUP_TIMEOUT="60",
               INIT=init, OUT0=outs[0], OUT1=outs[1], LEFT=left)
    try:
        p = subprocess.run([unshare, "-m", "sh", "-c", script, "sh"] + worker, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=GROUP_TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the group did not finish in {GROUP_TIMEOUT} s (a hang)")
    if p.returncode == 77:
        pytest.skip(f"cannot mount a small tmpfs over /dev/shm: {p.stdout}")
    assert p.returncode == 0, p.stdout
    res = []
    for o in outs:
        with open(o) as f:
            res.append(json.load(f))
    e0, e1 = res[0][0], res[1][0]
    assert "error" in e0 and e0 == e1, (e0, e1)
    assert e0["errno"] == errno.ENOSPC, e0
    assert re.search(r"rank \d of 2 failed to fill the exchange: /dev/shm/pinio-tp-\S+: cannot "
                     r"reserve the shared-memory exchange's \d+ bytes \(\d+ free\)", e0["error"]), e0
    for r in range(2):  # the exchange through the group still works there
        assert res[r][1].get("bad") == [] and res[r][1]["report"]["exchange"] == "group"
    with open(left) as f:
        assert f.read().split() == []  # nothing left in /dev/shm


def test_group_disagreement_is_one_error_on_every_rank(tmp):
    path, _, dims = checkpoint(tmp, 7, n=4, big=True)
    rules = rules_of(dims) or [("model.layers.0.weight", 0)]
    other = [(n, None) for n, _ in rules]  # rank 1 wants them whole
    scenarios = [
        dict(paths=[path], split=rules, dims=dims, split_of={1: other}),
        dict(paths=[path], split=rules, dims=dims,
             paths_of={1: [os.path.join(tmp, "missing.safetensors")]}),
        scenario(path, dims, fail_read_of=[1]),  # a read failing after the agreement,
        scenario(path, dims, fail_read_of=[1], exchange="group"),  # either exchange
        scenario(path, dims),  # and the group still works after them
    ]
    res = run_group(tmp, 2, scenarios, "disagree")
    e0, e1 = res[0][0], res[1][0]
    assert "error" in e0 and e0 == e1, (e0, e1)
    assert "plan of rank 1 differs from rank 0's" in e0["error"]
    m0, m1 = res[0][1], res[1][1]
    assert "error" in m0 and m0 == m1
    assert "rank 1 of 2 could not plan" in m0["error"] and "missing.safetensors" in m0["error"]
    for i in (2, 3):
        f0, f1 = res[0][i], res[1][i]
        assert "error" in f0 and f0 == f1, (f0, f1)
        assert "rank 1 of 2 failed to read: rank 1: an injected read failure" in f0["error"]
    for r in range(2):
        assert res[r][4].get("bad") == [], res[r][4]


BAD_ARGS = [  # (one rank's own argument, the error every rank raises)
    ({"exchange": "bogus"}, "ValueError", "exchange='bogus' is invalid"),
    ({"rank": 2 ** 32}, "ValueError", "rank=4294967296 world=None differ"),
    ({"world": 2 ** 32 + 2}, "ValueError", "world=4294967298 differ"),
    ({"rank": -1}, "ValueError", "rank=-1 world=None differ"),
    ({"split": "no-equals-sign"}, "ValueError", "split rule 'no-equals-sign': PATTERN=DIM"),
    ({"split": [["w", "x"]]}, "ValueError", "dim 'x' is not an int"),
    ({"device": "tpu:0"}, "ValueError", "device 'tpu:0' is invalid"),
    ({"filter": 5}, "TypeError", "not iterable"),
    ({"filter": [5]}, "TypeError", "each pattern is a str, not int"),
    ({"verify": True}, "ValueError", "does not take arena=, verify="),
    ({"framework": "jax"}, "ValueError", "framework 'jax' is invalid"),
    ({"round_bytes": "many"}, "ValueError", "invalid literal"),
    # I/O policies: one rank's bad string, found before the agreement too
    # (rank 1 owns no tensor of a one-file checkpoint read by rank 0 alone)
    ({"backend": "bogus"}, "ValueError", "backend bogus is invalid"),
    ({"cache": "warm"}, "ValueError", "cache warm is invalid"),
    ({"direct": "maybe"}, "ValueError", "direct maybe is invalid"),
    ({"memory": "gpu"}, "ValueError", "memory gpu is invalid"),
]


def test_group_bad_argument_on_one_rank_is_one_error_on_every_rank(tmp):
    """An argument only the last rank gets wrong is found before the plan's
    agreement: every rank reaches it and raises the same error (issue 37
    item 9), of the class a single process raises. A short group timeout:
    a rank left waiting fails the test (a timeout error, not the same
    error on both ranks) instead of hanging."""
    path, _, dims = checkpoint(tmp, 9, n=3)
    scenarios = [scenario(path, dims, args_of={1: bad}) for bad, _, _ in BAD_ARGS]
    scenarios.append(scenario(path, dims))  # and the group still works after them
    res = run_group(tmp, 2, scenarios, "badarg", env={"TP_GROUP_TIMEOUT": "60"})
    for i, (bad, kind, what) in enumerate(BAD_ARGS):
        e0, e1 = res[0][i], res[1][i]
        assert "error" in e0 and e0 == e1, (bad, e0, e1)
        assert e0.get("type") == kind, (bad, e0)
        assert e0["error"].startswith("process group load: rank 1 of 2 refused its arguments: "), \
            (bad, e0)
        assert what in e0["error"], (bad, e0)
    for r in range(2):
        assert res[r][-1].get("bad") == [], res[r][-1]


def test_group_of_one_in_process(tmp):
    """A group of one (this process): the exchange's degenerate case, with
    numpy tensors and the report's numbers."""
    import datetime

    import torch.distributed as dist

    path, tensors, dims = checkpoint(tmp, 11, big=True)
    dist.init_process_group("gloo", init_method="file://" + os.path.join(tmp, "init1"), rank=0,
                            world_size=1, timeout=datetime.timedelta(seconds=60))
    try:
        with pinio.open(path, "np", split=rules_of(dims), process_group=dist.group.WORLD,
                        round_bytes=1 << 16) as ck:
            rep = ck.report()
            for name, full in tensors.items():
                if full.dtype != torch.bfloat16:
                    assert ck[name].tobytes() == raw(full)
            assert rep["world"] == 1 and rep["sent_bytes"] == 0 == rep["received_bytes"]
            assert rep["group_read_bytes"] == rep["read_bytes"]
            assert rep["group_bytes"] == sum(t.numel() * t.element_size() for t in tensors.values())
        part = pinio.load(path, split=rules_of(dims), process_group=dist.group.WORLD,
                          filter="model.layers.1")
        assert list(part) == ["model.layers.1.weight"]
        assert raw(part["model.layers.1.weight"]) == raw(tensors["model.layers.1.weight"])
        with pytest.raises(pinio.Error, match="no tensor matches filter"):
            pinio.load(path, split=rules_of(dims), process_group=dist.group.WORLD, filter="nope")
        with pytest.raises(ValueError, match="differ from the process group's"):
            pinio.load(path, split=rules_of(dims), rank=1, process_group=dist.group.WORLD)
    finally:
        dist.destroy_process_group()


# ------------------------------------------------- torch.distributed to devices

def expect_clean_driver(res, world, scenarios):
    """The test driver saw every copy from registered memory, inside an
    allocation, with a context, and nothing was left behind."""
    for r in range(world):
        for i in range(len(scenarios)):
            d = res[r][i].get("driver")
            if d is None:
                continue
            assert all(d[k] == 0 for k in ("unregistered", "overwritten", "out_of_bounds",
                                           "no_context")), (r, i, d)
            assert d["registered_live"] == 0 and d["streams_live"] == 0, (r, i, d)
        end = res[r][-1]["driver_end"]
        assert end == dict(allocs_live=0, registered_live=0, streams_live=0, ctx_retained=0), end


@needs_driver
@pytest.mark.parametrize("world", [2, 3, 4])
def test_group_to_device_gets_torch_chunk_and_reads_once(tmp, world):
    small_path, small, small_dims = checkpoint(tmp, 300 + world, n=8)
    big_path, big, big_dims = checkpoint(tmp, 400 + world, n=8, big=True)
    big_dims["model.layers.0.weight"] = 1  # a strided slice, a dim-0 one, one read whole
    big_dims["model.layers.1.weight"] = 0
    big_dims["model.layers.2.weight"] = None  # two exchanged tensors over 64 KiB at least
    big_dims["model.layers.3.weight"] = None
    whole_dims = {n: None for n in big_dims}  # nothing split: every rank holds all of it
    dev = dict(device="cuda:0", slot_size=64 << 10, slots=2)  # tensors cross slots
    scenarios = [
        scenario(small_path, small_dims, **dev),
        scenario(small_path, small_dims, exchange="group", round_bytes=1 << 10, **dev),
        scenario(big_path, big_dims, **dev),
        scenario(big_path, big_dims, exchange="group", round_bytes=1 << 16, **dev),
        scenario(big_path, whole_dims, **dev),
        scenario(big_path, big_dims, filter=["model.layers.2", "model.norm"], **dev),
    ]
    res = run_group(tmp, world, scenarios, f"d{world}", env={"FAKE_CUDA_DELAY_US": "50"})
    data = sum(t.numel() * t.element_size() for t in big.values())
    for i, sc in enumerate(scenarios):
        want = sorted(n for n in sc["dims"] if i != 5 or n in ("model.layers.2.weight",
                                                                 "model.norm.weight"))
        for r in range(world):
            got = res[r][i]
            assert "error" not in got, (i, r, got)
            assert got["bad"] == [], (i, r, got["bad"])
            assert got["names"] == want, (i, r)
            assert got["driver"]["device"] == "cuda:0" and got["report"]["device_name"] == "cuda:0"
            assert got["driver"]["d2h_copies"] >= 1  # the bytes compared came from the driver
        reps = [res[r][i]["report"] for r in range(world)]
        assert all(rep["ready_seconds"] >= rep["seconds"] >= 0 for rep in reps), reps
        group_read = sum(rep["read_bytes"] for rep in reps)
        assert all(rep["group_read_bytes"] == group_read for rep in reps)
        if i in (2, 3, 4):  # one copy of the data, whoever holds what
            assert reps[0]["group_bytes"] == data
            assert group_read <= 1.1 * data, (i, world, group_read, data)
        if i == 4:  # all of it on every rank: each rank read about its share only
            assert all(rep["bytes"] == data for rep in reps)
            assert max(rep["read_bytes"] for rep in reps) < 0.9 * data, reps
    assert [res[r][i]["report"]["exchange"] for i in (0, 1) for r in range(world)] == \
        ["shm"] * world + ["group"] * world
    assert min(res[r][3]["report"]["rounds"] for r in range(world)) > 1  # pipelined
    expect_clean_driver(res, world, scenarios)


@needs_driver
def test_group_to_device_disagreement_is_one_error_on_every_rank(tmp):
    path, _, dims = checkpoint(tmp, 17, n=4, big=True)
    dims.update({"model.layers.0.weight": 0, "model.layers.1.weight": None,  # rank 0 owns
                 "model.layers.2.weight": None, "model.layers.3.weight": 1})  # layers.1
    rules = rules_of(dims)
    other = [(n, None) for n, _ in rules]  # rank 1 wants them whole
    dev = dict(device="cuda:0")
    scenarios = [
        scenario(path, dims, split_of={1: other}, **dev),
        scenario(path, dims, device_of={1: None}, **dev),  # rank 1 to its CPU
        scenario(path, dims, no_driver_of=[1], **dev),  # rank 1's driver does not load
        scenario(path, {n: None for n in dims}, no_driver_of=[1], **dev),  # nothing streamed
        scenario(path, dims, fail_read_of=[0], **dev),  # an owner's read fails
        scenario(path, dims, **dev),  # and the group still works after them
    ]
    res = run_group(tmp, 2, scenarios, "ddisagree")
    for i in range(5):
        e0, e1 = res[0][i], res[1][i]
        assert "error" in e0 and e0 == e1, (i, e0, e1)
    for i in (0, 1):
        assert "plan of rank 1 differs from rank 0's" in res[0][i]["error"]
    assert "rank 1 of 2 failed to stream its slices to cuda:0: no CUDA driver" in \
        res[0][2]["error"] and "no-libcuda.so.1" in res[0][2]["error"]
    assert "rank 1 of 2 failed to copy the exchanged tensors to cuda:0: no CUDA driver" in \
        res[0][3]["error"]
    assert "rank 0 of 2 failed to read: rank 0: an injected read failure" in res[0][4]["error"]
    for r in range(2):
        assert res[r][5].get("bad") == [], res[r][5]
    expect_clean_driver(res, 2, scenarios)


@needs_driver
def test_group_of_one_to_device_in_process(tmp, monkeypatch):
    """A group of one (this process) to the test driver: the tensors held
    whole come through the host copy, the slices through the stream; the
    allocator's failure is the load's error."""
    import datetime

    import torch.distributed as dist
    from test_cuda import FakeGpu, expect_clean_copies, raw as draw

    monkeypatch.setenv("FAKE_CUDA_DELAY_US", "200")
    path, tensors, dims = checkpoint(tmp, 13, big=True)
    g = FakeGpu(LIB)
    dist.init_process_group("gloo", init_method="file://" + os.path.join(tmp, "init1"), rank=0,
                            world_size=1, timeout=datetime.timedelta(seconds=60))
    try:
        before = g.stats()
        with pinio.open(path, split=rules_of(dims), process_group=dist.group.WORLD,
                        device="cuda:0", allocator=g.alloc, slot_size=64 << 10) as ck:
            assert isinstance(ck, pinio.DeviceCheckpoint) and ck.device == "cuda:0"
            assert sorted(ck.offset_keys()) == sorted(tensors)
            for name, full in tensors.items():
                assert draw(ck[name]) == draw(full), name
            rep = ck.report()
            assert rep["world"] == 1 and rep["bytes"] == rep["group_bytes"]
            assert rep["copies"] >= len(tensors) - 1
        expect_clean_copies(g, before)

        def refuse(shape, dtype, device):
            raise MemoryError("no room on the device")

        with pytest.raises(pinio.Error, match="rank 0 of 1 failed to copy the exchanged "
                           "tensors to cuda:0: MemoryError: no room on the device"):
            pinio.load(path, split=[], process_group=dist.group.WORLD, device="cuda:0",
                       allocator=refuse)
    finally:
        dist.destroy_process_group()
        g.close()


@needs_driver
def test_copy_gpu_lands_host_bytes_as_the_stream_would(tmp, monkeypatch):
    """_pinio.copy_gpu, what a device group load copies exchanged tensors
    with: over two shards, each rank's slices (strided ones of short runs,
    runs across 64 KiB slots) given packed in host memory land on the
    device shaped and ordered as a stream lands them; a tensor given no
    bytes is zeros; a source of the wrong size is refused before any copy."""
    from test_cuda import FakeGpu, expect_clean_copies, value
    from test_cuda import raw as draw

    monkeypatch.setenv("FAKE_CUDA_DELAY_US", "20")
    rng = random.Random(26)
    a = {f"model.layers.{i}.mlp.weight": value(rng.choice([torch.float32, torch.bfloat16,
                                                            torch.int8]),
                                               (rng.randint(1, 40), rng.randint(1, 3000)), i)
         for i in range(4)}
    b = {"model.norm.weight": value(torch.float32, (77,), 9),
         "model.layers.4.o_proj.weight": value(torch.float16, (300, 70), 10)}
    save_file(a, os.path.join(tmp, "model-00001-of-00002.safetensors"))
    save_file(b, os.path.join(tmp, "model-00002-of-00002.safetensors"))
    full = {**a, **b}
    rules = [("*norm*", None), ("*o_proj*", 1), ("*", -1)]
    dims = {n: None if "norm" in n else 1 if "o_proj" in n else -1 for n in full}
    g = FakeGpu(LIB)
    try:
        for world in (1, 2, 3, 4):
            for rank in {rng.randrange(world), world - 1}:
                want = {n: full[n] if dims[n] is None else expected(full[n], world, rank, dims[n])
                        for n in full}
                sources = {n: draw(w) for n, w in want.items() if w.numel()}
                del sources["model.layers.1.mlp.weight"]  # zeros
                before = g.stats()
                placed, infos = {}, {}
                rep = pinio._pinio.copy_gpu([tmp], pinio._placer("cuda:0", g.alloc, placed, infos),
                                            sources, "cuda", 0, slot_size=64 << 10, slots=2,
                                            split=rules, rank=rank, world=world)
                assert sorted(placed) == sorted(full) and rep["tensors"] == len(full)
                for n, w in want.items():
                    assert tuple(placed[n].shape) == tuple(w.shape), (n, world, rank)
                    ok = draw(w) if n in sources else bytes(len(draw(w)))
                    assert draw(placed[n]) == ok, (n, world, rank)
                expect_clean_copies(g, before)
        with pytest.raises(ValueError, match="tensor 'model.norm.weight': 4 bytes given, it "
                           "has 308"):
            pinio._pinio.copy_gpu([tmp], pinio._placer("cuda:0", g.alloc, {}, {}),
                                  {"model.norm.weight": b"1234"}, "cuda", 0)
    finally:
        g.close()
