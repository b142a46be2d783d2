"""Quantized checkpoints from Python (issue 39): FP8 (every F8 kind, the
F8_E8M0 scales included) and the packed dtypes (F4, F6_E2M3, F6_E3M2).

Whole loads (pinio.load, pinio.safetensors.torch.load_file and load,
safe_open) give each tensor's bytes exactly, against a numpy reference of
the raw bytes written; where this torch lacks the dtype (torch 1.13: all of
them) the tensor is torch.uint8 with the last dimension in bytes and carries
pinio_dtype and pinio_shape. Splits by rows and by columns at world 2 and 4
(split=, rank=, world=; a gloo group of 2 and 4 processes with
process_group=) give each rank the byte range of its chunk; a cut inside a
byte is refused naming the tensor, the dtype and the cut (the plan; and
get_slice on the narrowing path, as upstream's MisalignedSlice).
"""
import os

import numpy as np
import pytest
import torch

import pinio
from pinio import _pinio
from pinio.safetensors import SafetensorError, safe_open
from pinio.safetensors import torch as stpt
from test_tp import run_group, scenario

BITS = {"F8_E4M3": 8, "F8_E5M2": 8, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8, "F8_E8M0": 8,
        "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6}
TORCH = {"F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2", "F8_E4M3FNUZ": "float8_e4m3fnuz",
         "F8_E5M2FNUZ": "float8_e5m2fnuz", "F8_E8M0": "float8_e8m0fnu", "F4": "float4_e2m1fn_x2"}
# name -> (dtype, logical shape): every chunk of 2 and 4 along either dimension is whole bytes
SPEC = {
    "w.fp4": ("F4", (8, 64)),
    "w.fp6a": ("F6_E2M3", (8, 48)),
    "w.fp6b": ("F6_E3M2", (4, 16)),
    "w.fp8": ("F8_E4M3", (8, 12)),
    "w.fp8b": ("F8_E5M2", (4, 8)),
    "w.fnuz_a": ("F8_E4M3FNUZ", (4, 4)),
    "w.fnuz_b": ("F8_E5M2FNUZ", (8, 4)),
    "w.scales": ("F8_E8M0", (8, 4)),
}


def nbytes(code, shape):
    return int(np.prod(shape)) * BITS[code] // 8


def write(path, spec, seed=0):
    """`spec` written through the library's writer; {name: bytes (numpy uint8)}."""
    rng = np.random.default_rng(seed)
    ref = {n: rng.integers(0, 256, nbytes(c, s), dtype=np.uint8) for n, (c, s) in spec.items()}
    _pinio.save(path, [(n, c, list(s), ref[n].ctypes.data, ref[n].nbytes)
                       for n, (c, s) in spec.items()], None)
    return ref


def byte_shape(code, shape):
    return tuple(shape[:-1]) + (shape[-1] * BITS[code] // 8,)


def as_bytes(t):
    """A tensor's bytes as numpy uint8 (raw already, or viewed as bytes)."""
    t = t.contiguous()
    if t.dtype != torch.uint8:
        t = t.view(torch.uint8)
    return t.reshape(-1).numpy()


def check(t, name, code, shape, want, where):
    """`t` is tensor `name` (`code`, logical `shape`) with bytes `want`."""
    assert tuple(t.shape) == byte_shape(code, shape), (where, name, t.shape)
    np.testing.assert_array_equal(as_bytes(t), want.reshape(-1), err_msg=f"{where}: {name}")
    native = getattr(torch, TORCH.get(code, "-"), None)
    if native is None:  # torch 1.13: raw bytes, the logical dtype and shape beside
        assert t.dtype == torch.uint8 and t.pinio_dtype == code, (where, name)
        assert t.pinio_shape == tuple(shape), (where, name, t.pinio_shape)
    else:
        assert t.dtype == native


def chunk(code, shape, ref, world, rank, dim):
    """Rank `rank`'s chunk (torch.chunk's rule on the logical elements) of the
    tensor with bytes `ref`: (logical shape, bytes), cut from a numpy view."""
    n = shape[dim]
    c = -(-n // world)
    a = min(rank * c, n)
    b = min(a + c, n)
    inner = BITS[code]
    for s in shape[dim + 1:]:
        inner *= s
    outer = int(np.prod(shape[:dim]))
    rows = ref.reshape(outer, -1)
    assert a * inner % 8 == 0 and b * inner % 8 == 0  # the test's cuts are on bytes
    part = rows[:, a * inner // 8:b * inner // 8]
    return shape[:dim] + (b - a,) + shape[dim + 1:], np.ascontiguousarray(part)


def test_whole_loads_are_the_bytes(tmp):
    path = os.path.join(tmp, "q.safetensors")
    ref = write(path, SPEC)
    for where, got in [("pinio.load", pinio.load(path)),
                       ("load_file", stpt.load_file(path)),
                       ("load_file pread", stpt.load_file(path, backend="pread")),
                       ("load(bytes)", stpt.load(open(path, "rb").read()))]:
        assert sorted(got) == sorted(SPEC)
        for name, (code, shape) in SPEC.items():
            check(got[name], name, code, shape, ref[name], where)
    with safe_open(path, "pt") as f:
        for name, (code, shape) in SPEC.items():
            check(f.get_tensor(name), name, code, shape, ref[name], "get_tensor")
            assert f.get_slice(name).get_dtype() == code
            assert f.get_slice(name).get_shape() == list(shape)
    with pinio.open(path) as ck:
        assert ck.info("w.fp4")[:2] == ("F4", [8, 64])


@pytest.mark.parametrize("world", [2, 4])
@pytest.mark.parametrize("dim", [0, -1])
def test_rows_and_columns_split_on_byte_boundaries(tmp, world, dim):
    path = os.path.join(tmp, "q.safetensors")
    ref = write(path, SPEC, seed=world)
    for rank in range(world):
        got = pinio.load(path, split={"*": dim}, rank=rank, world=world)
        for name, (code, shape) in SPEC.items():
            d = dim % len(shape)
            lshape, want = chunk(code, shape, ref[name], world, rank, d)
            check(got[name], name, code, lshape, want, f"rank {rank} of {world}, dim {dim}")


def test_get_slice_rows_and_byte_aligned_columns(tmp):
    path = os.path.join(tmp, "q.safetensors")
    ref = write(path, SPEC, seed=7)
    rows = ref["w.fp4"].reshape(8, 32)
    with safe_open(path, "pt") as f:  # torch's indexing of the byte layout, as upstream's x2
        t = f.get_slice("w.fp4")[2:6]
        check(t, "w.fp4", "F4", (4, 64), rows[2:6], "get_slice rows")
    with safe_open(path, "pt", backend="pread") as f:  # upstream's narrowing: elements
        t = f.get_slice("w.fp4")[1:3, 16:48]
        check(t, "w.fp4", "F4", (2, 32), rows[1:3, 8:24], "narrowed")
        t = f.get_slice("w.fp6a")[:, 4:8]  # 4 F6 elements: 3 bytes from byte 3
        check(t, "w.fp6a", "F6_E2M3", (8, 4), ref["w.fp6a"].reshape(8, 36)[:, 3:6], "F6")
        with pytest.raises(SafetensorError, match=r"MisalignedSlice: tensor 'w.fp4' is F4 .*"
                           r"\[:, 1:4\] cuts its last dimension at element 1, inside a byte"):
            f.get_slice("w.fp4")[:, 1:4]
        with pytest.raises(SafetensorError, match=r"'w.fp6b' is F6_E3M2 .*element 2 alone"):
            f.get_slice("w.fp6b")[0, 2]


def test_cut_inside_a_byte_is_refused(tmp):
    path = os.path.join(tmp, "odd.safetensors")
    ref = write(path, {"odd": ("F4", (4, 6)), "f6": ("F6_E3M2", (4, 12))})
    # 6 F4 columns in chunks of 3 (world 2): 12 bits, the cut inside a byte
    with pytest.raises(pinio.Error, match=r"tensor 'odd' .*F4 \(4 bits an element\) inside a "
                       r"byte: dimension 1 at index 3"):
        pinio.load(path, split={"odd": 1}, rank=1, world=2, filter="odd")
    with pytest.raises(pinio.Error, match=r"'f6' .*F6_E3M2 .*dimension 1 at index 3"):
        pinio.load(path, split={"f6": 1}, rank=0, world=4, filter="f6")
    got = pinio.load(path, split={"*": 0}, rank=1, world=2)  # rows: whole bytes
    check(got["odd"], "odd", "F4", (2, 6), ref["odd"].reshape(4, 3)[2:], "rows")


def test_last_dimension_not_whole_bytes_is_a_clear_error(tmp):
    path = os.path.join(tmp, "odd.safetensors")
    write(path, {"x": ("F4", (4, 3))})  # 12-bit rows: no byte layout for torch
    with pytest.raises(ValueError, match=r"tensor 'x' is F4 of shape \[4, 3\].*not whole bytes"):
        pinio.load(path)
    with pinio.open(path) as ck:  # its bytes are still there
        assert len(ck.buffer("x")) == 6


@pytest.mark.parametrize("world", [2, 4])
def test_group_gets_its_chunks(tmp, world):
    path = os.path.join(tmp, "g.safetensors")
    write(path, SPEC, seed=10 + world)
    dims = {n: (0 if i % 2 else -1) for i, n in enumerate(SPEC)}
    scenarios = [scenario(path, dims), scenario(path, dims, exchange="group",
                                                round_bytes=1 << 8)]
    res = run_group(tmp, world, scenarios, f"q{world}")
    for i in range(len(scenarios)):
        for r in range(world):
            got = res[r][i]
            assert "error" not in got, (i, r, got)
            assert got["bad"] == [] and got["missing"] == [], (i, r, got)
        total = sum(nbytes(c, s) for c, s in SPEC.values())
        assert res[0][i]["report"]["group_bytes"] == total
