"""What a torch.distributed group load selects, by name and by bytes (issue 37).

Tensor names are not patterns: a group load selects the tensors of its plan
by exact name, so a dotted child of an exchanged tensor (bitsandbytes'
`x.weight` and `x.weight.absmax`) keeps its own bytes, and a name holding
`[`, `*` or `?` travels like any other; a split rule equal to a tensor's
name matches it. The ranks agree on their files' bytes (size, header,
sampled blocks) before any byte moves: a per-node copy with the same header
and other weights is one error on every rank, naming the file and the
ranks. A NUL in a filter, a split pattern or a slice's name is refused,
never cut there. Groups of gloo processes on the CPU
(tp_worker.py), to the host and to the test driver's device
(PINIO_CUDA_LIB)."""
import os
import random

import pytest
import torch

import pinio
from pinio.safetensors.torch import save_file
from test_tp import LIB, needs_driver, run_group

DEV = dict(device="cuda:0", slot_size=64 << 10, slots=2)


def save(tmp, name, tensors):
    path = os.path.join(tmp, name)
    save_file(tensors, path)
    return path


def bnb(seed):
    """bitsandbytes' layout: a packed weight, its children by dotted name
    (one split, read by its rank; one whole), and a plain neighbour."""
    g = torch.Generator().manual_seed(seed)
    tensors = {
        "x.weight": torch.randint(0, 255, (96, 700), dtype=torch.uint8, generator=g),
        "x.weight.absmax": torch.randn(4096, 3, generator=g),
        "x.weight.quant_map": torch.randn(256, generator=g),
        "x.bias": torch.randn(700, generator=g),
    }
    dims = {"x.weight": None, "x.weight.absmax": 0, "x.weight.quant_map": None, "x.bias": 0}
    return tensors, dims


def globby(seed):
    """Names holding glob characters, whole and split, beside a name that
    one of them matches as a glob."""
    g = torch.Generator().manual_seed(seed)
    tensors = {
        "e[0].weight": torch.randn(64, 50, generator=g),   # split: a rule equal to its name
        "e[1].weight": torch.randn(40, 30, generator=g),   # whole: exchanged
        "e1.weight": torch.randn(17, generator=g),         # what "e[1].weight" globs
        "g*.weight": torch.randn(30, 20, generator=g),     # split along a strided dimension
        "q?.bias": torch.randn(33, generator=g),            # whole
        "plain.weight": torch.randn(48, 8, generator=g),
    }
    dims = {"e[0].weight": 0, "e[1].weight": None, "e1.weight": None, "g*.weight": 1,
            "q?.bias": None, "plain.weight": 0}
    return tensors, dims


def scen(path, dims, **kw):
    return dict(paths=[path], split=[(n, d) for n, d in dims.items() if d is not None],
                dims=dims, **kw)


def each_exchange(path, dims, **kw):
    return [scen(path, dims, **kw), scen(path, dims, exchange="group", round_bytes=1 << 12, **kw)]


def expect_torch_chunk(res, world, scenarios):
    for i, sc in enumerate(scenarios):
        for r in range(world):
            got = res[r][i]
            assert "error" not in got, (i, r, got)
            assert got["bad"] == [] and got["missing"] == [], (i, r, got)
            assert got["names"] == sorted(sc["dims"]), (i, r, got["names"])
            assert got["shm_left"] == [], (i, r, got["shm_left"])


def test_group_selects_by_exact_name(tmp):
    """Dotted children and glob characters in names, through shared memory
    and through the group, to the host: every rank gets torch.chunk."""
    p1 = save(tmp, "bnb.safetensors", bnb(1)[0])
    p2 = save(tmp, "globby.safetensors", globby(2)[0])
    scenarios = each_exchange(p1, bnb(1)[1]) + each_exchange(p2, globby(2)[1])
    for world in (2, 3):
        expect_torch_chunk(run_group(tmp, world, scenarios, f"names{world}"), world, scenarios)


@needs_driver
def test_group_to_device_selects_by_exact_name(tmp):
    """The same to each rank's device: the copy of the exchanged tensors
    from host memory leaves the slices a rank streamed itself as they are
    (it zeroed `x.weight.absmax`, a dotted child of the exchanged
    `x.weight`)."""
    p1 = save(tmp, "bnb.safetensors", bnb(3)[0])
    p2 = save(tmp, "globby.safetensors", globby(4)[0])
    scenarios = each_exchange(p1, bnb(3)[1], **DEV) + each_exchange(p2, globby(4)[1], **DEV)
    res = run_group(tmp, 2, scenarios, "dnames", env={"PINIO_CUDA_LIB": LIB})
    expect_torch_chunk(res, 2, scenarios)


@pytest.mark.parametrize("world", [2, 3])
def test_a_rule_equal_to_a_name_matches_it(tmp, world):
    """One process: a split rule or a filter equal to a tensor's name
    matches it whatever characters it holds (fnmatch alone read "e[0].weight"
    as "e0.weight" and left the tensor whole on every rank)."""
    tensors, dims = globby(6)
    path = save(tmp, "globby.safetensors", tensors)
    rules = [(n, d) for n, d in dims.items() if d is not None]
    for rank in range(world):
        got = pinio.load(path, split=rules, rank=rank, world=world)
        for n, t in tensors.items():
            want = t if dims[n] is None else torch.chunk(t, world, dims[n])[rank]
            assert torch.equal(got[n], want), (n, rank)
    for name in ("e[1].weight", "q?.bias", "g*.weight"):
        assert name in pinio.load(path, filter=name)


def test_group_failure_while_writing_the_board_is_agreed(tmp):
    """A failure while an owner writes its shared-memory file (a bug, a
    full /dev/shm) is one error on every rank, and the file is removed."""
    tensors, dims = bnb(5)
    path = save(tmp, "bnb.safetensors", tensors)
    scenarios = [scen(path, dims, exchange="shm", fail_board_of=[0]), scen(path, dims)]
    res = run_group(tmp, 2, scenarios, "board")
    e0, e1 = res[0][0], res[1][0]
    assert "error" in e0 and e0 == e1, (e0, e1)
    assert "rank 0 of 2 failed to fill the exchange: KeyError: 'an injected failure'" in e0["error"], e0
    for r in range(2):
        assert res[r][0]["shm_left"] == [], res[r][0]
    for r in range(2):
        assert res[r][1].get("bad") == [], res[r][1]


def copies(tmp, seed, flip=None):
    """Rank 0's file and a copy with the same header: other weights, or,
    with `flip`, one byte changed at that offset of the data."""
    rng = random.Random(seed)
    g = torch.Generator().manual_seed(seed)
    tensors = {f"model.layers.{i}.weight": torch.randn(rng.randint(40, 90), 64, generator=g)
               for i in range(4)}
    dims = {n: rng.choice([None, 0, 1]) for n in tensors}
    a = save(tmp, f"a{seed}.safetensors", tensors)
    if flip is None:
        b = save(tmp, f"b{seed}.safetensors", {n: t + 1 for n, t in tensors.items()})
    else:
        with open(a, "rb") as f:
            data = bytearray(f.read())
        off = (8 + int.from_bytes(data[:8], "little")) + flip
        data[off] ^= 0xFF
        b = os.path.join(tmp, f"b{seed}.safetensors")
        with open(b, "wb") as f:
            f.write(data)
    with open(a, "rb") as f, open(b, "rb") as h:
        ha, hb = f.read(4096), h.read(4096)
        n = 8 + int.from_bytes(ha[:8], "little")
        assert ha[:n] == hb[:n]  # the same header: the plans agree
    return a, b, dims


@pytest.mark.parametrize("device", [False, pytest.param(True, marks=needs_driver)])
def test_group_refuses_copies_that_differ(tmp, device):
    """Ranks reading per-node copies with the same header but other
    weights (or one changed block) never get a splice of both: every rank
    raises the same error naming the file and the ranks, before any byte
    moves; equal copies load."""
    kw = DEV if device else {}
    a, b, dims = copies(tmp, 1)
    a2, b2, dims2 = copies(tmp, 2, flip=0)  # the first data byte: a sampled block
    a3, b3, dims3 = copies(tmp, 3)
    same = os.path.join(tmp, "same.safetensors")
    with open(a3, "rb") as f, open(same, "wb") as h:
        h.write(f.read())
    scenarios = [
        scen(a, dims, paths_of={1: [b], 2: [b]}, **kw),
        scen(a2, dims2, paths_of={2: [b2]}, fail_read_of=[0, 1, 2], **kw),
        scen(a3, dims3, paths_of={1: [same]}, **kw),  # a copy of the same bytes
    ]
    res = run_group(tmp, 3, scenarios, "copies" + ("d" if device else ""))
    for i, (path, other, ranks) in enumerate([(a, b, "ranks 1, 2"), (a2, b2, "rank 2")]):
        errs = [res[r][i] for r in range(3)]
        assert "error" in errs[0] and all(e == errs[0] for e in errs), errs
        msg = errs[0]["error"]
        assert path in msg and other in msg and f"{ranks} of 3" in msg, msg
        assert "differ" in msg and "no rank read anything" in msg, msg
    for r in range(3):
        assert res[r][2].get("bad") == [], res[r][2]


@pytest.mark.parametrize("how", ["filter", "split", "split_str", "slices"])
def test_nul_in_a_pattern_is_refused(tmp, how):
    """A NUL would end the C string there: "model.layers.0\\0x" would select
    (or split) every tensor under model.layers.0. Refused, naming it."""
    g = torch.Generator().manual_seed(7)
    tensors = {"model.layers.0.weight": torch.randn(8, 4, generator=g),
               "model.layers.1.weight": torch.randn(8, 4, generator=g)}
    path = save(tmp, "nul.safetensors", tensors)
    bad = "model.layers.0\0x"
    with pytest.raises(ValueError, match=r"NUL"):
        if how == "filter":
            pinio.load(path, filter=[bad])
        elif how == "split":
            pinio.load(path, split={bad: 0}, rank=0, world=2)
        elif how == "split_str":
            pinio.load(path, split=[bad + "=0"], rank=0, world=2)
        else:
            pinio._pinio.plan([path], slices=[(bad, [0], [1])])
    with pytest.raises(ValueError, match=r"NUL"):
        pinio._pinio.plan([path], filters=[bad])
    # a digest that holds 64 hex digits and then a NUL is not that digest
    digest = pinio.open(path, verify=True).report()["sha256"][0]
    with pytest.raises(ValueError, match=r"expected_sha256 digest .* holds a NUL"):
        pinio.load(path, expected_sha256=[digest + "\0" + "0" * 8])


@needs_driver
def test_nul_in_a_device_split_pattern_is_refused(tmp):
    from test_cuda import FakeGpu

    path = save(tmp, "nul.safetensors", {"model.layers.0.weight": torch.randn(8, 4)})
    g = FakeGpu(LIB)
    try:
        for kw in (dict(split={"model.layers.0\0x": 0}, rank=0, world=2),
                   dict(filter="model.layers.0\0x")):
            with pytest.raises(ValueError, match="NUL"):
                pinio.load(path, device="cuda:0", allocator=g.alloc, **kw)
        with pytest.raises(ValueError, match="NUL"):
            pinio._pinio.copy_gpu([path], pinio._placer("cuda:0", g.alloc, {}, {}), {}, "cuda",
                                  0, split=[("model.layers.0\0x", 0)], rank=0, world=2)
    finally:
        g.close()
