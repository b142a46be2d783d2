"""Split loads against torch.chunk: the C path (tests/load/split_dump.c:
pinio_load with split rules, every loaded tensor saved as it landed) gives
each rank torch.chunk(full, world, dim)[rank] byte for byte, for random
shapes, dtypes, dimensions (negative too) and world sizes 1-8; a rank past
torch.chunk's last chunk gets the empty slice at the end of the dimension;
tensors no rule matches, or a 'whole' rule, come whole."""
import os
import random
import subprocess

import pytest
import torch

from pinio.safetensors.torch import load_file, save_file

DUMP = os.environ.get("PINIO_SPLIT_DUMP")
DTYPES = [torch.bool, torch.uint8, torch.int16, torch.bfloat16, torch.float16, torch.float32,
          torch.float64, torch.int64]


def raw(t):
    """The tensor's bytes, row-major (bfloat16 and bool included)."""
    t = t.contiguous()
    if t.dtype == torch.bool:
        t = t.to(torch.uint8)
    return t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""


def random_tensor(rng, dtype):
    rank = rng.randint(1, 4)
    shape = [rng.randint(0, 9) for _ in range(rank)]
    if rng.random() < 0.4:
        shape[rng.randrange(rank)] = rng.randint(50, 700)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, dtype=torch.uint8).to(torch.bool)
    if dtype.is_floating_point:
        return torch.randn(shape).to(dtype)
    return torch.randint(0, 100, shape, dtype=dtype)


def expected(full, world, rank, dim):
    chunks = torch.chunk(full, world, dim)
    if rank < len(chunks):
        return chunks[rank]
    # torch.chunk returned fewer chunks: the empty slice at the end
    d = dim % full.dim()
    return full.narrow(d, full.shape[d], 0)


@pytest.fixture(scope="module")
def dump():
    if not DUMP:
        pytest.skip("PINIO_SPLIT_DUMP is not set: run through meson test")
    return DUMP


@pytest.mark.parametrize("seed", range(12))
def test_every_rank_is_torch_chunk(dump, tmp, seed):
    rng = random.Random(seed)
    torch.manual_seed(seed)
    tensors, dims = {}, {}
    for i in range(rng.randint(2, 7)):
        name = f"model.layers.{i}.weight"
        tensors[name] = random_tensor(rng, rng.choice(DTYPES))
        r = tensors[name].dim()
        dims[name] = rng.choice([None, "whole"] + list(range(-r, r)))
    tensors["model.norm"] = torch.randn(33)
    path = os.path.join(tmp, "full.safetensors")
    save_file(tensors, path)
    rules = [f"{n}={d}" for n, d in dims.items() if d is not None]
    world = rng.randint(1, 8)
    for rank in range(world):
        out = os.path.join(tmp, f"rank{rank}.safetensors")
        subprocess.run([dump, out, str(rank), str(world), path] + rules, check=True)
        got = load_file(out)
        assert set(got) == set(tensors)
        for name, full in tensors.items():
            d = dims.get(name)
            want = full if d in (None, "whole") else expected(full, world, rank, d)
            assert got[name].dtype == full.dtype
            assert tuple(got[name].shape) == tuple(want.shape), (name, world, rank, d)
            assert raw(got[name]) == raw(want), (name, str(full.dtype), world, rank, d)
        os.unlink(out)


def test_dim_out_of_range_names_the_tensor(dump, tmp):
    path = os.path.join(tmp, "m.safetensors")
    save_file({"a.weight": torch.zeros(4, 4), "b.bias": torch.zeros(4)}, path)
    p = subprocess.run([dump, os.path.join(tmp, "o.safetensors"), "0", "2", path, "*=1"],
                       capture_output=True, text=True)
    assert p.returncode == 1
    assert "tensor 'b.bias'" in p.stderr and "dimension 1" in p.stderr
