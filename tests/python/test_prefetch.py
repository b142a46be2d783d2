"""safe_open.prefetch(plan), upstream safetensors 0.9's API (PR #848):
a plan {name: index} is read in one engine run; get_slice(name)[index]
with the plan's index then returns the prefetched slice without another
read (the handle's byte count and the kernel's rchar stay put), as does
any index into a tensor prefetched whole, and get_tensor of one. Results
equal indexing the whole tensor, for torch and numpy, both backends."""
import os

import numpy as np
import pytest
import torch

from conftest import rchar
from pinio.safetensors import SafetensorError, safe_open
from pinio.safetensors.torch import load_file, save_file


def kernel_reads(fn):
    """(fn(), bytes the process read meanwhile): rchar around it, less what
    reading /proc/self/io itself counts (a few bytes of slack: its numbers
    grow digits)."""
    c0 = rchar()
    c1 = rchar()
    out = fn()
    c2 = rchar()
    return out, max(0, (c2 - c1) - (c1 - c0) - 8)


@pytest.fixture
def model(anydir):
    torch.manual_seed(0)
    tensors = {
        "embed.weight": torch.randn(512, 64),
        "layers.0.q.weight": torch.randn(256, 128),  # column parallel: dim 0
        "layers.0.o.weight": torch.randn(128, 256),  # row parallel: dim 1
        "layers.0.norm.weight": torch.randn(128),    # replicated
        "layers.0.bias": torch.arange(96, dtype=torch.int64).reshape(3, 32),
        "scale": torch.tensor(2.5),
    }
    path = os.path.join(anydir, "model.safetensors")
    save_file(tensors, path)
    return path, tensors


def tp_plan(rank, world):
    q, o = 256 // world, 256 // world
    return {
        "layers.0.q.weight": slice(rank * q, (rank + 1) * q),
        "layers.0.o.weight": (slice(None), slice(rank * o, (rank + 1) * o)),
        "layers.0.norm.weight": None,
        "layers.0.bias": (1, ...),
        "scale": ...,
    }


@pytest.mark.parametrize("backend", ["mmap", "pread"])
@pytest.mark.parametrize("rank", [0, 3])
def test_get_slice_after_prefetch_reads_nothing(model, backend, rank):
    path, tensors = model
    plan = tp_plan(rank, 4)
    with safe_open(path, framework="pt", device="cpu", backend=backend) as f:
        f.prefetch(plan)
        assert f.pinio_loads == 1  # the whole plan in one engine run
        # never more than the plan's tensors whole (a row-parallel slice of
        # 256-byte runs 1 KiB apart reads its 4 KiB blocks whole)
        assert f.pinio_bytes_read <= sum(tensors[n].numel() * tensors[n].element_size()
                                         for n in plan) + 5 * 8192
        before = f.pinio_bytes_read
        (got, whole), read = kernel_reads(lambda: (
            {n: f.get_slice(n)[i if i is not None else ...] for n, i in plan.items()},
            f.get_tensor("layers.0.norm.weight")))
        assert f.pinio_bytes_read == before and read == 0  # no read at all
        assert f.pinio_loads == 1
    for n, i in plan.items():
        want = tensors[n][i if i is not None else ...]
        assert got[n].shape == want.shape, n
        assert torch.equal(got[n], want), n
    assert torch.equal(whole, tensors["layers.0.norm.weight"])


def test_whole_prefetch_serves_any_index_and_tensor_stream(model):
    path, tensors = model
    with safe_open(path, "pt") as f:
        f.prefetch()
        n0 = f.pinio_bytes_read
        (a, b, c, d, streamed), read = kernel_reads(lambda: (
            f.get_slice("embed.weight")[10:20, 3], f.get_slice("embed.weight")[::7],
            f.get_tensor("scale"), f.get_slice("scale")[...], list(f.tensor_stream())))
        assert f.pinio_bytes_read == n0 and read == 0
        assert torch.equal(a, tensors["embed.weight"][10:20, 3])
        assert torch.equal(b, tensors["embed.weight"][::7])
        assert torch.equal(c, tensors["scale"]) and torch.equal(d, tensors["scale"])
        assert [n for n, _ in streamed] == f.offset_keys()
        for n, t in streamed:
            assert torch.equal(t, tensors[n])


def test_numpy_and_pread_narrowing_from_a_whole_prefetch(model):
    path, tensors = model
    with safe_open(path, "np", backend="pread") as f:
        f.prefetch(["layers.0.o.weight"])
        n0 = f.pinio_bytes_read
        got = f.get_slice("layers.0.o.weight")[5:9, 100:140]
        assert f.pinio_bytes_read == n0
        np.testing.assert_array_equal(got, tensors["layers.0.o.weight"].numpy()[5:9, 100:140])
        with pytest.raises(SafetensorError, match="out of bounds"):  # upstream's rules still
            f.get_slice("layers.0.o.weight")[0:200]


def test_slices_outside_the_plan_are_read(model):
    path, tensors = model
    with safe_open(path, "pt", backend="pread") as f:
        f.prefetch({"layers.0.q.weight": slice(0, 64)})
        n0 = f.pinio_bytes_read
        assert n0 <= 64 * 128 * 4 + 2 * 4096  # a first-dimension slice: its rows
        other = f.get_slice("layers.0.q.weight")[64:128]  # another slice: read
        assert f.pinio_bytes_read == n0 + 64 * 128 * 4
        assert torch.equal(other, tensors["layers.0.q.weight"][64:128])
        assert torch.equal(f.get_tensor("layers.0.q.weight"), tensors["layers.0.q.weight"])
        assert torch.equal(f.get_slice("layers.0.q.weight")[0:64],
                           tensors["layers.0.q.weight"][0:64])


def test_steps_prefetch_the_whole_tensor(model):
    path, tensors = model
    with safe_open(path, "pt") as f:
        f.prefetch({"embed.weight": slice(0, 512, 2)})
        n0 = f.pinio_bytes_read
        assert torch.equal(f.get_slice("embed.weight")[0:512:2], tensors["embed.weight"][::2])
        assert f.pinio_bytes_read == n0


def test_prefetch_at_open_and_unknown_names(model):
    path, tensors = model
    with safe_open(path, "pt", prefetch=True) as f:
        n0 = f.pinio_bytes_read
        assert all(torch.equal(f.get_tensor(n), t) for n, t in tensors.items())
        assert f.pinio_bytes_read == n0
        with pytest.raises(SafetensorError, match="does not contain tensor nope"):
            f.prefetch({"nope": slice(0, 1)})
    with pytest.raises(SafetensorError, match="closed"):
        f.prefetch()


def test_prefetched_tensors_outlive_the_handle(model):
    path, tensors = model
    with safe_open(path, "pt") as f:
        f.prefetch(tp_plan(1, 2))
        t = f.get_slice("layers.0.o.weight")[:, 128:256]
    assert torch.equal(t, tensors["layers.0.o.weight"][:, 128:]) and torch.equal(
        load_file(path)["layers.0.o.weight"][:, 128:], t)
