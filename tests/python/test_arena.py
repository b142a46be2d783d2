"""pinio.Arena: the C kept arena (load.h, pinio_arena_*) passed explicitly to
each load. Its contract: a load through an arena whose memory the previous
load's checkpoint or tensor bytes still hold fails with EBUSY, else the
memory is reused, never cleared. Every Python tensor holds such bytes (its
exporter), so a live tensor must make the next load raise, its bytes left
as they were; once every tensor is gone the memory is reused."""
import errno
import gc
import os
import threading

import numpy as np
import pytest
import torch

import pinio
from pinio.safetensors import SafetensorError, safe_open
from pinio.safetensors import torch as stpt


def weights(seed, n=4, rows=256):
    g = torch.Generator().manual_seed(seed)
    return {f"layer.{i}.w": torch.randn(rows, 1024, generator=g) for i in range(n)}


def save(tmp, name, tensors):
    p = os.path.join(tmp, name)
    stpt.save_file(tensors, p)
    return p


def same(got, want):
    assert list(got) == list(want)
    for k in want:
        assert torch.equal(got[k], want[k]), k


def test_reuse_after_the_tensors_are_gone(tmp):
    a_w, b_w = weights(1), weights(2)
    pa, pb = save(tmp, "a.safetensors", a_w), save(tmp, "b.safetensors", b_w)
    arena = pinio.Arena()
    assert arena.size == 0 and not arena.closed
    ck = pinio.open(pa, arena=arena)
    rep = ck.report()
    assert rep["arena_kept"] and rep["arena_grown"] and rep["files_pinned"] == 1, rep
    first = ck.buffer("layer.0.w").address
    same(ck.tensors(), a_w)
    size = arena.size
    assert size >= rep["bytes"] and size % (2 << 20) == 0
    ck.close()
    gc.collect()
    ck = pinio.open(pb, arena=arena)  # same size: the memory is reused, not grown
    rep = ck.report()
    assert rep["arena_kept"] and not rep["arena_grown"], rep
    assert ck.buffer("layer.0.w").address == first, "the same memory, reused"
    assert arena.size == size
    same(ck.tensors(), b_w)
    ck.close()


@pytest.mark.parametrize("holder", ["tensor", "view", "numpy", "checkpoint"])
def test_a_live_tensor_refuses_the_next_load(tmp, holder):
    a_w, b_w = weights(3), weights(4)
    pa, pb = save(tmp, "a.safetensors", a_w), save(tmp, "b.safetensors", b_w)
    arena = pinio.Arena()
    if holder == "checkpoint":  # the open checkpoint holds the arena too
        keep = pinio.open(pa, arena=arena)
        want = a_w["layer.2.w"].clone()
        look = lambda: keep["layer.2.w"]  # noqa: E731
    else:
        d = pinio.load(pa, arena=arena, framework="np" if holder == "numpy" else "pt")
        keep = d["layer.2.w"]
        if holder == "view":  # a slice of a tensor keeps its base alive
            keep = keep[10:20, 3:]
        want = torch.as_tensor(np.array(keep)) if holder == "numpy" else keep.clone()
        del d
        look = lambda: torch.as_tensor(np.array(keep)) if holder == "numpy" else keep  # noqa
    gc.collect()
    with pytest.raises(pinio.Error, match=r"loading .*b\.safetensors through a pinio\.Arena: "
                       r"tensors .* still alive") as e:
        pinio.load(pb, arena=arena)
    assert e.value.errno == errno.EBUSY
    assert torch.equal(look(), want), "the live tensor's bytes are unchanged"
    with pytest.raises(SafetensorError, match="still alive"):
        stpt.load_file(pb, arena=arena)
    assert torch.equal(look(), want)
    if holder == "checkpoint":
        keep.close()
    del keep, look
    gc.collect()
    same(pinio.load(pb, arena=arena), b_w)  # now it may be reused


def test_grows_for_a_larger_load_and_tensors_outlive_the_arena(tmp):
    small, big = weights(5, n=2), weights(6, n=6)
    ps, pbig = save(tmp, "s.safetensors", small), save(tmp, "b.safetensors", big)
    arena = pinio.Arena()
    same(pinio.load(ps, arena=arena), small)  # the dict is gone: nothing holds it
    size = arena.size
    ck = pinio.open(pbig, arena=arena)
    assert ck.report()["arena_grown"] and arena.size > size
    t = ck.tensors()
    ck.close()
    arena.close()  # the memory stays with the tensors still using it
    assert arena.closed and arena.size == 0
    gc.collect()
    same(t, big)
    with pytest.raises(ValueError, match="the arena is closed"):
        pinio.load(ps, arena=arena)


def test_load_file_keyword_and_nothing_process_global(tmp):
    a_w, b_w = weights(7), weights(8)
    pa, pb = save(tmp, "a.safetensors", a_w), save(tmp, "b.safetensors", b_w)
    one, two = pinio.Arena(), pinio.Arena()
    x = stpt.load_file(pa, arena=one)
    y = stpt.load_file(pb, arena=two)  # another arena: independent of the first
    z = stpt.load_file(pb)  # no arena: a fresh one, as always
    with safe_open(pa, "pt", arena=two) as f:  # two is held by y
        with pytest.raises(SafetensorError, match="still alive"):
            f.get_tensor("layer.0.w")
    same(x, a_w)
    same(y, b_w)
    same(z, b_w)
    del y
    gc.collect()
    with safe_open(pa, "pt", arena=two) as f:
        same({"layer.1.w": f.get_tensor("layer.1.w")}, {"layer.1.w": a_w["layer.1.w"]})


def test_argument_errors(tmp):
    p = save(tmp, "a.safetensors", weights(9, n=1))
    with pytest.raises(TypeError, match="arena must be a pinio.Arena, not dict"):
        pinio.load(p, arena={})
    with pytest.raises(ValueError, match="arena= is pinned host memory"):
        pinio.load(p, device="cuda:0", arena=pinio.Arena())
    with pytest.raises(SafetensorError, match="arena= is pinned host memory"):
        safe_open(p, "pt", device="cuda:0", arena=pinio.Arena())
    with pytest.raises(TypeError):
        pinio.Arena(1 << 20)
    with pinio.Arena() as a:
        pinio.load(p, arena=a)
    assert a.closed


def test_one_load_at_a_time_per_arena(tmp):
    """Two threads loading through one arena: the library's arena is not for
    concurrent loads, so the second is refused (or, if the first finished,
    refused as busy because the first's tensors are alive): never both."""
    p = save(tmp, "a.safetensors", weights(10, n=8))
    arena = pinio.Arena()
    results, errors = [], []
    start = threading.Barrier(2)

    def body():
        start.wait()
        try:
            results.append(pinio.load(p, arena=arena))
        except (RuntimeError, pinio.Error) as e:
            errors.append(e)

    th = [threading.Thread(target=body) for _ in range(2)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    assert len(results) == 1 and len(errors) == 1, (results, errors)
    assert "running" in str(errors[0]) or "still alive" in str(errors[0]), errors[0]

