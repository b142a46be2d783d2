"""Tensor-parallel slices streamed to a CUDA device (pinio.load_to_device(...,
split=, rank=, world=)) without a GPU: through the test driver and its
allocator (test_cuda.py's gpu fixture). Every rank's tensor equals
torch.chunk(tensor, world, dim)[rank] byte for byte and in shape, for random
shapes and dtypes, world sizes 1-8, dimension 0, 1 and the last, norms kept
whole, on 64 KiB slots (runs that cross slots); the allocator is asked for
the slices' shapes; the report's over-read adds up; verify hashes the whole
file; bad arguments raise clearly."""
import hashlib
import os
import random

import pytest
import torch

import pinio
from pinio.safetensors import torch as stpt
from test_cuda import DTYPES, LIB, expect_clean_copies, gpu, raw, value  # noqa: F401 (fixture)

pytestmark = pytest.mark.skipif(not LIB, reason="PINIO_CUDA_LIB (the test driver) is not set")


def chunk(t, dim, rank, world):
    """torch.chunk(t, world, dim)[rank], or the empty slice at the end of
    the dimension for a rank past torch.chunk's last chunk."""
    parts = torch.chunk(t, world, dim)
    if rank < len(parts):
        return parts[rank]
    d = dim % t.dim()
    return t.narrow(d, t.shape[d], 0)


def dim_of(name, rules):
    for pat, d in rules:
        if (pat.startswith("*") and pat.endswith("*") and pat[1:-1] in name) or pat == "*":
            return d
    return None


def random_checkpoint(rng, path):
    tensors = {}
    for i in range(rng.randint(3, 7)):
        dt = rng.choice([d for d in DTYPES if d != torch.complex64])
        kind = rng.choice(["input_layernorm", "self_attn.o_proj", "mlp.up_proj"])
        # o_proj is split along dimension 1: two dimensions at least
        shape = tuple(rng.randint(1, 12) for _ in range(rng.randint(2 if "o_" in kind else 1, 3)))
        if rng.random() < 0.3:  # rows longer than a 64 KiB slot: runs across slots
            shape = shape[:-1] + (rng.randint(9000, 20000),)
        tensors[f"model.layers.{i}.{kind}.weight"] = value(dt, shape, i)
    stpt.save_file(tensors, path)
    return tensors


RULES = [[("*norm*", None), ("*o_proj*", 1), ("*", 0)], [("*norm*", None), ("*", -1)]]


def test_every_rank_gets_its_chunk(gpu, tmp, monkeypatch):
    monkeypatch.setenv("FAKE_CUDA_DELAY_US", "20")  # strided slices copy run by run
    rng = random.Random(26)
    path = os.path.join(tmp, "m.safetensors")
    for _ in range(2):
        tensors = random_checkpoint(rng, path)
        for world in range(1, 9):
            for rank in {rng.randrange(world), world - 1}:
                rules = rng.choice(RULES)
                before = gpu.stats()
                calls = len(gpu.calls)
                got, rep = pinio.load_to_device(path, device="cuda:0", allocator=gpu.alloc,
                                                slot_size=64 << 10, slots=2, split=rules,
                                                rank=rank, world=world)
                want = {}
                for n, t in tensors.items():
                    d = dim_of(n, rules)
                    want[n] = t if d is None else chunk(t, d, rank, world)
                assert sorted(got) == sorted(want)
                for n, w in want.items():
                    what = (n, w.dtype, tuple(tensors[n].shape), rules, rank, world)
                    assert tuple(got[n].shape) == tuple(w.shape), what
                    assert raw(got[n]) == raw(w), what
                assert [c[0] for c in gpu.calls[calls:]] == [tuple(w.shape) for w in
                                                              (want[n] for n in got)]
                expect_clean_copies(gpu, before)
                s = rep["split"]
                assert rep["bytes"] == sum(len(raw(w)) for w in want.values()), rep
                assert rep["read_bytes"] == rep["bytes"] + s["overread_bytes"], rep
                assert s["hole_bytes"] <= s["overread_bytes"] and s["strided"] <= s["sliced"]


def test_verify_hashes_the_whole_file(gpu, tmp):
    path = os.path.join(tmp, "m.safetensors")
    stpt.save_file({"a.weight": value(torch.float32, (9, 5000), 1),
                    "b.weight": value(torch.bfloat16, (40, 3, 7), 2)}, path)
    with open(path, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    got, rep = pinio.load_to_device(path, device="cuda:0", allocator=gpu.alloc,
                                    split={"*": 1}, rank=1, world=3, verify=True,
                                    slot_size=64 << 10, slots=2)
    assert rep["sha256"] == [sha] and rep["verify_reread_bytes"] > 0, rep
    assert tuple(got["a.weight"].shape) == (9, 1667) and tuple(got["b.weight"].shape) == (40, 1, 7)
    with pytest.raises(pinio.Error, match="sha256 mismatch"):
        pinio.load_to_device(path, device="cuda:0", allocator=gpu.alloc, split={"*": 0},
                             rank=0, world=2, expected_sha256=["0" * 64])


def test_bad_split_arguments(gpu, tmp):
    path = os.path.join(tmp, "m.safetensors")
    stpt.save_file({"a.weight": value(torch.float32, (4, 6), 1)}, path)
    with pytest.raises(ValueError, match="rank=/world= need split="):
        pinio.load_to_device(path, device="cuda:0", allocator=gpu.alloc, rank=0, world=2)
    with pytest.raises(ValueError, match="0 <= rank < world"):
        pinio.load_to_device(path, device="cuda:0", allocator=gpu.alloc, split={"*": 0},
                             rank=2, world=2)
    with pytest.raises(pinio.Error, match="tensor 'a.weight'.*dimension 2"):
        pinio.load_to_device(path, device="cuda:0", allocator=gpu.alloc, split={"*": 2},
                             rank=0, world=2)
    with pytest.raises(ValueError, match="split rule '\\*': dim 'x' is not an int or 'whole'"):
        pinio.load_to_device(path, device="cuda:0", allocator=gpu.alloc, split=[("*", "x")],
                             rank=0, world=2)
    assert gpu.stats()["allocs_live"] == 0


def test_open_and_load_stream_the_slices(gpu, tmp):
    """pinio.open()/load() with device="cuda:N" and split= take the same
    path as load_to_device: a DeviceCheckpoint of the rank's slices, rules
    in any form split= takes (a mapping, "P=D" strings)."""
    path = os.path.join(tmp, "m.safetensors")
    tensors = {"a.norm": value(torch.float32, (6,), 1), "a.o_proj": value(torch.bfloat16, (5, 7), 2),
               "a.up": value(torch.int32, (9, 3), 3)}
    stpt.save_file(tensors, path)
    for rules in ({"*norm*": None, "*o_proj*": 1, "*": 0}, ["*norm*=whole", "*o_proj*=1", "*=0"]):
        for rank in range(3):
            ck = pinio.open(path, device="cuda:0", allocator=gpu.alloc, split=rules, rank=rank,
                            world=3)
            got = {n: ck[n] for n in ck.keys()}
            assert ck.report()["split"], ck.report().keys()
            want = {"a.norm": tensors["a.norm"], "a.o_proj": chunk(tensors["a.o_proj"], 1, rank, 3),
                    "a.up": chunk(tensors["a.up"], 0, rank, 3)}
            assert sorted(got) == sorted(want)
            for n, w in want.items():
                assert tuple(got[n].shape) == tuple(w.shape), (n, rank)
                assert raw(got[n]) == raw(w), (n, rank)
            del got, ck
            flat = pinio.load(path, device="cuda:0", allocator=gpu.alloc, split=rules, rank=rank,
                              world=3)
            assert raw(flat["a.up"]) == raw(want["a.up"])
            del flat
