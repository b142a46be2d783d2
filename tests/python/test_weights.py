"""pinio.weights_iterator (issue 39, the core the engine plugins share):
(name, tensor) pairs of files, shard folders, hub repo ids and s3:// URLs,
byte for byte; filters and split rules decide what is read before any
tensor byte is (the reads' bytes, not timing); a yielded tensor stays
valid while referenced; and a caller that copies as it goes holds a
bounded amount of pinned memory (VmLck of this process, sampled at every
tensor: the measure is shown to see held memory by a caller that keeps
everything); a gloo group of 2 and 4 processes (engines/weights_group_worker.py)
gets exactly each rank's slices and reads the checkpoint about once."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import pinio
from conftest import drop_cache
from pinio.safetensors.numpy import save_file
from test_hub import hub_tree

MIB = 1 << 20


def vmlck():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmLck:"):
                return int(line.split()[1]) * 1024
    return 0


def model(folder, layers=4, shards=2, cols=256):
    """A sharded HF-style checkpoint with its index: {name: array}."""
    rng = np.random.default_rng(7)
    want, wm = {}, {}
    per = (layers + shards - 1) // shards
    for s in range(shards):
        part = {}
        for i in range(s * per, min(layers, (s + 1) * per)):
            p = f"model.layers.{i}."
            part[p + "self_attn.q_proj.weight"] = rng.standard_normal((64, cols)).astype(np.float32)
            part[p + "mlp.down_proj.weight"] = rng.standard_normal((cols, 96)).astype(np.float32)
            part[p + "input_layernorm.weight"] = np.arange(cols, dtype=np.float16)
        if s == 0:
            part["model.embed_tokens.weight"] = rng.integers(-9, 9, (100, cols)).astype(np.int32)
        name = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        save_file(part, os.path.join(folder, name))
        want.update(part)
        wm.update({k: name for k in part})
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": wm}, f)
    return want


def test_a_shard_folder_byte_for_byte_in_batches(tmp):
    want = model(tmp)
    it = pinio.weights_iterator(tmp, batch_bytes=100_000)
    got = {}
    for name, t in it:
        assert isinstance(t, torch.Tensor) and name not in got
        got[name] = t
    assert sorted(got) == sorted(want)
    for k, v in want.items():
        assert np.array_equal(got[k].numpy(), v), k
    rep = it.report()
    assert rep["batches"] > 4 and rep["batches_read"] == rep["batches"]
    assert isinstance(rep["io_seconds"], float) and rep["io_seconds"] >= 0
    # how the bytes came: the page cache mapped in place, or read (cold)
    for kw, how in (({"memory": "mapped"}, "mapped"), ({"cache": "cold"}, "read")):
        again = pinio.weights_iterator(tmp, batch_bytes=100_000, **kw)
        assert (sum(1 for _ in again), again.report()["how"]) == (len(want), how), kw
    assert rep["yielded_bytes"] == rep["bytes"] == sum(v.nbytes for v in want.values())
    # one file, and the whole selection in one batch, say the same
    one = dict(pinio.weights_iterator(os.path.join(tmp, "model-00002-of-00002.safetensors")))
    assert sorted(one) == sorted(k for k in want
                                 if k.startswith("model.layers.") and int(k.split(".")[2]) >= 2)


def test_filter_and_split_are_planned_before_any_byte_is_read(tmp):
    want = model(tmp, layers=4, cols=1024)
    total = sum(v.nbytes for v in want.values())
    it = pinio.weights_iterator(tmp, filter="model.layers.1", batch_bytes=MIB)
    got = dict(it)
    assert sorted(got) == sorted(k for k in want if k.startswith("model.layers.1."))
    sel = sum(want[k].nbytes for k in got)
    # the selected bytes and alignment at their ends (4 KiB blocks), not the files
    assert sel <= it.report()["read_bytes"] <= sel + 2 * 4096 * 2 * len(got), it.report()
    split = {"*.q_proj.weight": 0, "*.down_proj.weight": 1, "*": None}
    it = pinio.weights_iterator(tmp, split=split, rank=1, world=4, filter="model.layers",
                                batch_bytes=MIB)
    got = dict(it)
    share = whole_down = 0
    for k, t in got.items():
        dim = 0 if "q_proj" in k else 1 if "down_proj" in k else None
        ref = torch.from_numpy(want[k])
        ref = ref if dim is None else torch.chunk(ref, 4, dim)[1]
        assert t.shape == ref.shape and torch.equal(t, ref), k
        if dim == 1:  # runs of 96 bytes: the holes between them are read through
            whole_down += want[k].nbytes
        else:
            share += ref.numel() * ref.element_size()
    # q_proj: a quarter of its rows; reading them whole would add 768 KiB
    assert it.report()["read_bytes"] < share * 1.1 + whole_down + 64 * 1024, (it.report(), share)
    assert it.report()["read_bytes"] < total * 0.7


def test_a_yielded_tensor_stays_valid_while_referenced(tmp):
    want = model(tmp)
    kept = []
    with pinio.weights_iterator(tmp, batch_bytes=50_000) as it:
        for i, (name, t) in enumerate(it):
            if i % 3 == 0:
                kept.append((name, t))  # as a layerwise loader keeps a layer's tensors
            del t
            # later batches are read into fresh memory, never over a kept one
            for n, k in kept:
                assert np.array_equal(k.numpy(), want[n]), (n, name)
    assert len(kept) > 3


def test_copying_as_it_goes_holds_a_bounded_amount_of_pinned_memory(tmp):
    rng = np.random.default_rng(3)
    want = {f"model.layers.{i}.weight": rng.standard_normal((MIB // 4,)).astype(np.float32)
            for i in range(24)}  # 24 MiB
    path = os.path.join(tmp, "m.safetensors")
    save_file(want, path)
    dst = {k: torch.empty(v.shape, dtype=torch.float32) for k, v in want.items()}

    def run(keep):
        drop_cache(path)
        base, peak, held = vmlck(), 0, []
        for name, t in pinio.weights_iterator(path, memory="pinned", batch_bytes=2 * MIB):
            peak = max(peak, vmlck() - base)
            dst[name].copy_(t)
            if keep:
                held.append(t)
            del t
        held.clear()
        return peak, vmlck() - base

    kept_peak, kept_after = run(keep=True)
    if kept_peak < 16 * MIB:
        pytest.skip(f"pinned memory is not counted in VmLck here ({kept_peak} bytes seen)")
    peak, after = run(keep=False)
    # this batch and the one read ahead (2 MiB each) and slack for alignment,
    # not the 24 MiB a caller that keeps everything holds
    assert peak <= 5 * MIB, (peak, kept_peak)
    assert after == 0 and kept_after == 0  # every batch freed with its last tensor
    for k, v in want.items():
        assert np.array_equal(dst[k].numpy(), v), k


def test_close_early_frees_what_was_read_ahead(tmp):
    want = model(tmp)
    fds = len(os.listdir("/proc/self/fd"))
    base = vmlck()
    it = pinio.weights_iterator(tmp, batch_bytes=50_000, memory="pinned")
    name, t = next(it)
    it.close()
    assert np.array_equal(t.numpy(), want[name])
    with pytest.raises(StopIteration):
        next(it)
    del t
    assert vmlck() == base
    assert len(os.listdir("/proc/self/fd")) == fds


def test_progress_is_called_with_the_bytes_done(tmp):
    want = model(tmp)
    seen = []
    for _ in pinio.weights_iterator(tmp, batch_bytes=100_000,
                                    progress=lambda d, n: seen.append((d, n))):
        pass
    total = sum(v.nbytes for v in want.values())
    assert seen and seen[-1] == (total, total)
    assert all(a[0] < b[0] for a, b in zip(seen, seen[1:]))
    with pytest.raises(TypeError, match="progress"):
        pinio.weights_iterator(tmp, progress="yes")


def test_bad_input_names_the_file_and_the_argument(tmp):
    model(tmp)
    missing = os.path.join(tmp, "nope.safetensors")
    with pytest.raises(pinio.Error, match="nope.safetensors"):
        pinio.weights_iterator(missing)
    with pytest.raises(pinio.Error, match="no tensor matches filter"):
        pinio.weights_iterator(tmp, filter="decoder.")
    with pytest.raises(TypeError, match="unknown keyword.*verify"):
        pinio.weights_iterator(tmp, verify=True)
    with pytest.raises(ValueError, match="rank="):
        pinio.weights_iterator(tmp, split={"*": 0}, rank=2, world=2)
    with pytest.raises(ValueError, match="split="):
        pinio.weights_iterator(tmp, rank=0, world=2)
    with pytest.raises(ValueError, match="batch_bytes"):
        pinio.weights_iterator(tmp, batch_bytes=0)
    # a shard cut short after its header: the data it promises is not there
    bad = os.path.join(tmp, "cut.safetensors")
    save_file({"w": np.ones(4096, np.float32)}, bad)
    os.truncate(bad, os.path.getsize(bad) - 100)
    with pytest.raises(pinio.Error, match="cut.safetensors"):
        list(pinio.weights_iterator(bad))


def test_a_hub_repo_id_from_the_cache(tmp, monkeypatch):
    root = os.path.join(tmp, "hub")
    _, want = hub_tree(root)
    for var in ("HF_HOME", "HUGGINGFACE_HUB_CACHE", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", root)
    got = {k: t.numpy() for k, t in pinio.weights_iterator("org/tiny", batch_bytes=64)}
    assert sorted(got) == sorted(want)
    for k, v in want.items():
        assert np.array_equal(got[k], v), k


def test_an_s3_prefix(s3, tmp):
    _, put = s3
    want = model(tmp, layers=2, shards=2)
    for name in os.listdir(tmp):
        with open(os.path.join(tmp, name), "rb") as f:
            put("m/" + name, f.read())
    got = {k: t.numpy() for k, t in pinio.weights_iterator("s3://models/m/", batch_bytes=100_000)}
    assert sorted(got) == sorted(want)
    for k, v in want.items():
        assert np.array_equal(got[k], v), k


def run_group(tmp, path, world, *extra, worker="weights_group_worker.py"):
    """Every rank's OUT of `worker` (engines/) in a gloo group."""
    init = os.path.join(tmp, "group.init")
    outs = [os.path.join(tmp, f"rank{r}.json") for r in range(world)]
    worker = os.path.join(os.path.dirname(os.path.abspath(__file__)), "engines", worker)
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    procs = [subprocess.Popen([sys.executable, worker, path, str(r), str(world), init, outs[r],
                               *extra],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True) for r in range(world)]
    try:
        logs = [p.communicate(timeout=240)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
    assert all(p.returncode == 0 for p in procs), logs
    res = []
    for o in outs:
        with open(o) as f:
            res.append(json.load(f))
    return res


def group_once(tmp, world, **shape):
    """A one-shard model(**shape) through the gloo group of run_group:
    every rank's exact slices, in the same order; (results, the group's
    read bytes, the checkpoint's tensor bytes)."""
    want = model(tmp, shards=1, **shape)
    res = run_group(tmp, os.path.join(tmp, "model-00001-of-00001.safetensors"), world)
    for r in res:
        assert sorted(r["ok"]) == sorted(want) and all(r["ok"].values()), r["ok"]
        assert r["order"] == res[0]["order"]
    return (res, sum(r["report"]["read_bytes"] for r in res),
            sum(v.nbytes for v in want.values()))


@pytest.mark.parametrize("world", [2, 4])
def test_a_gloo_group_reads_the_checkpoint_once(tmp, world):
    """Each batch a group load: every rank gets exactly its slices, in the
    same order, and the ranks' reads sum to about the checkpoint once."""
    res, read, total = group_once(tmp, world, layers=4, cols=512)
    assert all(r["report"]["batches"] > 2 for r in res)
    # every byte once (a rank's slices whole, the rest exchanged), not
    # world times: a floor too, so that a load that read nothing fails
    assert total <= read <= 1.1 * total + world * 64 * 1024, (read, total)


@pytest.mark.parametrize("world", [2, 4])
def test_small_slices_are_read_once_not_by_every_rank(tmp, world):
    """A checkpoint of small tensors (q_proj 8 KiB, split by rows into
    slices of 2-4 KiB): a rank reading its own slice reads the 4 KiB blocks
    at its ends, which hold the next ranks' slices too, so each rank would
    read nearly every block of it; the group exchanges such slices instead
    (read once, whole, by one rank), and still reads the checkpoint once."""
    _, read, total = group_once(tmp, world, layers=16, cols=32)
    assert total <= read <= 1.1 * total, (read, total)


def test_one_rank_s_bad_argument_is_every_rank_s_error(tmp):
    """Issue 37 item 9's rule for the iterator: rank 1 alone passes a rank=
    other than its own; both ranks raise the same ValueError at once, rather
    than rank 0 waiting in its first batch's collective for the timeout."""
    model(tmp, layers=1, shards=1, cols=64)
    path = os.path.join(tmp, "model-00001-of-00001.safetensors")
    res = run_group(tmp, path, 2, "1")
    for r in res:
        assert r.get("type") == "ValueError", res
        assert "rank 1 of 2 refused its arguments" in r["error"], res
        assert r["error"] == res[0]["error"], res


def test_a_tqdm_bar_is_drawn_only_while_reading(tmp, monkeypatch):
    """progress=True: no bar for an iterator never read, and the bar of one
    stopped early is closed (a recording stand-in of tqdm.tqdm)."""
    import types

    bars = []

    class Bar:
        def __init__(self, total=None, **kw):
            self.total, self.n, self.closed = total, 0, False
            bars.append(self)

        def update(self, n):
            self.n += n

        def close(self):
            self.closed = True

    monkeypatch.setitem(sys.modules, "tqdm", types.SimpleNamespace(tqdm=Bar))
    want = model(tmp)
    pinio.weights_iterator(tmp, progress=True).close()
    assert bars == []
    it = pinio.weights_iterator(tmp, progress=True, batch_bytes=100_000)
    next(it)
    it.close()
    assert len(bars) == 1 and bars[0].closed and bars[0].n < bars[0].total
    list(pinio.weights_iterator(tmp, progress=True))
    total = sum(v.nbytes for v in want.values())
    assert bars[1].closed and bars[1].n == bars[1].total == total
    monkeypatch.setitem(sys.modules, "tqdm", None)  # not installed
    with pytest.raises(ValueError, match="tqdm is not installed"):
        pinio.weights_iterator(tmp, progress=True)


def run_nccl(tmp, world, case):
    """The checkpoint and every rank's OUT of engines/nccl_group_worker.py (its CASE)."""
    want = model(tmp, layers=4, shards=1, cols=512)
    path = os.path.join(tmp, "model-00001-of-00001.safetensors")
    return want, run_group(tmp, path, world, case, worker="nccl_group_worker.py")


def exact_slices(r, want, keys=("open_group", "load_shm", "iterator")):
    for k in keys:
        assert sorted(r[k]) == sorted(want) and all(r[k].values()), (k, r[k])


@pytest.mark.parametrize("world", [2, 4])
def test_an_nccl_group_s_host_traffic_goes_over_one_gloo_group(tmp, world):
    """A process group that is NCCL (a gloo group standing in: its backend
    says "nccl" and it refuses every collective of host tensors, as NCCL
    does; engines/nccl_group_worker.py): pinio.open (exchange through the
    group, in rounds), pinio.load (shared memory) and a weights_iterator
    of several batches each give every rank exactly its slices, over one
    gloo group of the same ranks that pinio made once for them all; one
    rank's bad argument is still every rank's error. Not exercised here:
    NCCL itself and device tensors (no GPU)."""
    want, res = run_nccl(tmp, world, "world")
    total = sum(v.nbytes for v in want.values())
    for r in res:
        exact_slices(r, want)
        # one group for the three loads and the refusal, of the whole job
        assert r["made"] == [{"ranks": list(range(world)), "backend": "gloo"}], r["made"]
        assert r["open_group_report"]["exchange"] == "group"
        assert r["open_group_report"]["rounds"] > 1
        assert r["iterator_report"]["batches"] > 2
        assert "rank 1 of %d refused its arguments" % world in r["refused"], r
        assert r["refused"] == res[0]["refused"]
    read = sum(r["iterator_report"]["read_bytes"] for r in res)
    assert total <= read <= 1.1 * total + world * 64 * 1024, (read, total)


def test_an_nccl_group_of_part_of_the_job_takes_host_group(tmp):
    """Two NCCL groups of half a job of 4 each: torch 1.13 cannot make a
    gloo group of part of a job alone (new_group is a collective of the
    whole job), so without host_group= every rank is refused, naming
    host_group= (never left waiting); with host_group= (a gloo group of the
    same ranks, as vLLM's cpu_group) every rank gets its exact slices and
    pinio makes no group."""
    want, res = run_nccl(tmp, 4, "sub")
    for r in res:
        for k in ("refused", "refused_iterator"):
            assert "pass host_group=" in r.get(k, ""), r
            assert "nccl group of 2 of the job's 4 ranks" in r[k], r
        exact_slices(r, want)
        assert r["made"] == [], r["made"]
