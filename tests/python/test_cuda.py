"""device="cuda" without a GPU: pinio's CUDA sink through the test driver
(tests/stream/fake_cuda.c, a libcuda.so.1 whose device memory is host
memory, loaded through PINIO_CUDA_LIB), with an allocator that hands out
CPU torch tensors over that driver's own cuMemAlloc memory, so the sink's
copies land where the tensors can be read back.

What the driver checks on every call (its counters are read here): copies
come from registered host memory and go inside a device allocation, every
call has a current context, no source is overwritten while its copy is
pending, and nothing (registration, stream, context) is left behind. Its
copies are asynchronous on a worker thread and delayed (FAKE_CUDA_DELAY_US)
over memory cuMemAlloc poisoned with 0xA5, so a load that returned before
its copies completed would show poisoned bytes."""
import ctypes
import errno
import hashlib
import json
import os

import pytest
import torch

import pinio
from pinio.safetensors import SafetensorError, safe_open
from pinio.safetensors import torch as stpt

LIB = os.environ.get("PINIO_CUDA_LIB")
pytestmark = pytest.mark.skipif(not LIB, reason="PINIO_CUDA_LIB (the test driver) is not set")

DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.float16, torch.bfloat16,
          torch.int32, torch.float32, torch.complex64, torch.float64, torch.int64]
STATS = ["copies", "unregistered", "overwritten", "out_of_bounds", "no_context",
         "registered_live", "allocs_live", "ctx_retained", "streams_live", "d2h_copies",
         "d2h_bytes", "dropped"]  # fake_stats of tests/stream/fake_cuda.h, in its order


class FakeStats(ctypes.Structure):
    _fields_ = [(n, ctypes.c_ulong) for n in STATS]


class FakeGpu:
    """The test driver, opened by the path the sink opens (the same loaded
    instance), and an allocator over its device memory."""

    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        self.ctx = ctypes.c_void_p()
        assert self.lib.cuInit(0) == 0
        assert self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(self.ctx), 0) == 0
        assert self.lib.cuCtxPushCurrent_v2(self.ctx) == 0  # cuMemAlloc needs a context
        self.ptrs = []
        self.calls = []

    def alloc(self, shape, dtype, device):
        """allocator=: a CPU tensor over cuMemAlloc memory (0xA5 poisoned)."""
        self.calls.append((tuple(shape), dtype, device))
        n = torch.empty(shape, dtype=dtype).numel() * torch.empty((), dtype=dtype).element_size()
        if n == 0:
            return torch.empty(shape, dtype=dtype)
        p = ctypes.c_ulonglong()
        assert self.lib.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(n)) == 0
        self.ptrs.append(p.value)
        mem = (ctypes.c_uint8 * n).from_address(p.value)
        return torch.frombuffer(mem, dtype=dtype).reshape(shape)

    def stats(self):
        s = FakeStats()
        self.lib.fake_cuda_stats(ctypes.byref(s))
        return {n: getattr(s, n) for n in STATS}

    def close(self):
        for p in self.ptrs:
            self.lib.cuMemFree_v2(ctypes.c_ulonglong(p))
        self.lib.cuCtxPopCurrent_v2(None)
        self.lib.cuDevicePrimaryCtxRelease_v2(0)


@pytest.fixture
def gpu(monkeypatch):
    # Each copy waits 2 ms on the driver's worker: a return before the copies
    # completed would leave poisoned bytes to find.
    monkeypatch.setenv("FAKE_CUDA_DELAY_US", "2000")
    monkeypatch.delenv("FAKE_CUDA_FAIL", raising=False)
    g = FakeGpu(LIB)
    yield g
    g.close()
    s = g.stats()
    assert s["allocs_live"] == 0 and s["registered_live"] == 0 and s["streams_live"] == 0, s
    assert s["ctx_retained"] == 0, s


def value(dt, shape, seed):
    g = torch.Generator().manual_seed(seed)
    if dt == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if not dt.is_floating_point and not dt.is_complex:
        return torch.randint(-100, 100, shape, generator=g).to(dt)
    if dt.is_complex:
        return torch.randn(shape, generator=g, dtype=dt)
    return torch.randn(shape, generator=g).to(dt)


def raw(t):
    """A tensor's bytes (any dtype), for byte-exact comparisons."""
    t = t.contiguous()
    if t.numel() == 0:
        return b""
    return bytes(t.reshape(-1).view(torch.uint8).numpy()) if t.dtype != torch.bool else \
        bytes(t.reshape(-1).to(torch.uint8).numpy())


def expect_same(got, want):
    assert sorted(got) == sorted(want)
    for k, v in want.items():
        assert got[k].dtype == v.dtype and tuple(got[k].shape) == tuple(v.shape), k
        assert raw(got[k]) == raw(v), k


def expect_clean_copies(g, before):
    s = g.stats()
    for k in ("unregistered", "overwritten", "out_of_bounds", "no_context"):
        assert s[k] == before[k], (k, s)
    assert s["registered_live"] == 0 and s["streams_live"] == 0, s
    return s["copies"] - before["copies"]


def every_dtype(seed=3):
    t = {f"t_{str(dt).split('.')[-1]}": value(dt, (37, 29), seed) for dt in DTYPES}
    t["empty"] = torch.zeros((0, 4))
    t["scalar"] = torch.tensor(2.5, dtype=torch.float64)
    t["big"] = value(torch.float32, (300, 1000), seed)  # 1.2 MB: spans several 64 KiB slots
    return t


def test_every_dtype_every_byte_synchronised(gpu, tmp):
    tensors = every_dtype()
    path = os.path.join(tmp, "m.safetensors")
    stpt.save_file(tensors, path)
    before = gpu.stats()
    got, rep = pinio.load_to_device(path, device="cuda:0", allocator=gpu.alloc,
                                    slot_size=64 << 10, slots=4)
    expect_same(got, tensors)  # read at once: every delayed copy had landed
    copies = expect_clean_copies(gpu, before)
    assert copies == rep["copies"] and copies >= len(tensors) - 1, (copies, rep)
    assert rep["tensors"] == len(tensors) and rep["slots_registered"] >= 1, rep
    # time to ready: the call until it returned, every copy done
    assert rep["ready_seconds"] >= rep["seconds"] >= 0, rep
    assert rep["ready_seconds"] >= rep["io_seconds"], rep
    # the tensors are the allocator's: nothing was copied on the way out
    assert len(gpu.calls) == len(tensors)
    assert all(d == "cuda:0" for _, _, d in gpu.calls)
    ptrs = set(gpu.ptrs)
    for k, v in got.items():
        assert v.numel() == 0 or v.data_ptr() in ptrs, k
    # pinio.load gives the same dict
    expect_same(pinio.load(path, device="cuda", allocator=gpu.alloc), tensors)


def test_sharded_with_index_and_filters(gpu, tmp):
    a = {f"model.layers.{i}.w": value(torch.float16, (64, 33), i) for i in range(4)}
    b = {f"model.layers.{i}.w": value(torch.bfloat16, (17, 64), i) for i in range(4, 7)}
    stpt.save_file(a, os.path.join(tmp, "model-00001-of-00002.safetensors"))
    stpt.save_file(b, os.path.join(tmp, "model-00002-of-00002.safetensors"))
    wm = {k: "model-00001-of-00002.safetensors" for k in a}
    wm.update({k: "model-00002-of-00002.safetensors" for k in b})
    with open(os.path.join(tmp, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": wm}, f)
    before = gpu.stats()
    got = pinio.load(tmp, device="cuda:0", allocator=gpu.alloc)
    expect_same(got, {**a, **b})
    sel = pinio.load(tmp, filter=["model.layers.1", "model.layers.5"], device=0,
                     allocator=gpu.alloc)
    expect_same(sel, {k: v for k, v in {**a, **b}.items() if k.split(".")[2] in "15"})
    expect_clean_copies(gpu, before)


def test_safe_open_on_cuda_takes_the_sink(gpu, tmp):
    tensors = {"a": value(torch.float32, (10, 6), 1), "a.b": value(torch.int32, (4, 3), 2),
               "w*[x]": value(torch.bfloat16, (5, 8), 3), "s": torch.tensor(7, dtype=torch.int64)}
    path = os.path.join(tmp, "m.safetensors")
    stpt.save_file(tensors, path, metadata={"k": "v"})
    with safe_open(path, "pt", device="cuda:0", allocator=gpu.alloc) as f:
        assert f.keys() == sorted(tensors) and f.metadata() == {"k": "v"}
        for name in tensors:
            n = len(gpu.calls)
            expect_same({name: f.get_tensor(name)}, {name: tensors[name]})
            assert len(gpu.calls) == n + 1, "one tensor streamed, not its dotted children"
        expect_same(f.get_tensors(), tensors)
        # slices: torch indexing over the tensor on the device
        sl = f.get_slice("a")
        assert sl.get_shape() == [10, 6] and sl.get_dtype() == "F32"
        for idx in [(slice(2, 5),), (slice(None), slice(1, 4)), (3,), (slice(1, 9, 3), 2),
                    (slice(-3, None),)]:
            assert raw(sl[idx]) == raw(tensors["a"][idx]), idx
    # the pread backend: upstream's narrowing rules, then the device tensor
    with safe_open(path, "pt", device="cuda:0", backend="pread", allocator=gpu.alloc) as f:
        sl = f.get_slice("a")
        assert raw(sl[2:5, 1:3]) == raw(tensors["a"][2:5, 1:3])
        with pytest.raises(SafetensorError, match="index 19 out of bounds"):
            sl[:20]
    assert raw(stpt.load_file(path, device="cuda:0", allocator=gpu.alloc)["a.b"]) == \
        raw(tensors["a.b"])


def test_allocator_failures_are_clear(gpu, tmp):
    path = os.path.join(tmp, "m.safetensors")
    stpt.save_file({"x": value(torch.float32, (64, 64), 1), "y": value(torch.float32, (8,), 2)},
                   path)

    def refuses(shape, dtype, device):
        raise MemoryError("test allocator: out of device memory")
    with pytest.raises(MemoryError, match="out of device memory"):
        pinio.load(path, device="cuda", allocator=refuses)

    def misaligned(shape, dtype, device):
        t = gpu.alloc((shape[0] + 64,) + tuple(shape[1:]), dtype, device)
        return t.reshape(-1)[2:2 + torch.Size(shape).numel()].reshape(shape)
    with pytest.raises(pinio.Error, match="not aligned to 256") as e:
        pinio.load(path, device="cuda", allocator=misaligned)
    assert e.value.errno == errno.EINVAL

    def small(shape, dtype, device):
        return gpu.alloc((1,), dtype, device)
    with pytest.raises(ValueError, match="'x' got 4 bytes, needs 16384"):
        pinio.load(path, device="cuda", allocator=small)
    s = gpu.stats()
    assert s["registered_live"] == 0 and s["streams_live"] == 0 and s["no_context"] == 0, s


def test_driver_failures_name_the_call(gpu, tmp, monkeypatch):
    path = os.path.join(tmp, "m.safetensors")
    stpt.save_file({"x": value(torch.float32, (64, 64), 1), "y": value(torch.float32, (8,), 2)},
                   path)
    # the driver counts copies over the process: fail the second of this load
    monkeypatch.setenv("FAKE_CUDA_FAIL", f"copy:{gpu.stats()['copies'] + 2}")
    with pytest.raises(pinio.Error, match=r"copying tensor 'y' .*cuMemcpyHtoDAsync"):
        pinio.load(path, device="cuda", allocator=gpu.alloc)
    monkeypatch.delenv("FAKE_CUDA_FAIL")
    with pytest.raises(pinio.Error, match="no device cuda:3") as e:
        pinio.load(path, device="cuda:3", allocator=gpu.alloc)
    assert e.value.errno == errno.ENODEV
    s = gpu.stats()
    assert s["registered_live"] == 0 and s["streams_live"] == 0, s


@pytest.mark.skipif(hasattr(torch, "uint16"), reason="this torch has uint16")
def test_dtype_this_torch_lacks(gpu, tmp):
    import numpy as np
    from pinio.safetensors import numpy as stnp
    path = os.path.join(tmp, "u16.safetensors")
    stnp.save_file({"u": np.arange(6, dtype=np.uint16)}, path)
    with pytest.raises(AttributeError, match=r"'u' is U16: torch .* has no torch.uint16"):
        pinio.load(path, device="cuda", allocator=gpu.alloc)
    s = gpu.stats()
    assert s["registered_live"] == 0 and s["streams_live"] == 0, s


def test_no_driver_is_a_clear_error(tmp, monkeypatch):
    path = os.path.join(tmp, "m.safetensors")
    stpt.save_file({"x": torch.ones(4)}, path)
    monkeypatch.setenv("PINIO_CUDA_LIB", os.path.join(tmp, "no-libcuda.so.1"))
    with pytest.raises(pinio.Error, match="no CUDA driver: .*no-libcuda.so.1") as e:
        pinio.load(path, device="cuda:0", allocator=lambda s, d, dev: torch.empty(s, dtype=d))
    assert e.value.errno == errno.ENODEV
    with safe_open(path, "pt", device="cuda:0",
                   allocator=lambda s, d, dev: torch.empty(s, dtype=d)) as f:
        with pytest.raises(SafetensorError, match="no CUDA driver"):
            f.get_tensor("x")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this torch has CUDA")
def test_cpu_only_torch_is_a_clear_error(tmp):
    path = os.path.join(tmp, "m.safetensors")
    stpt.save_file({"x": torch.ones(4)}, path)
    with pytest.raises(pinio.Error, match=r"needs torch with CUDA: torch .* is a CPU-only build"):
        pinio.load(path, device="cuda")
    with safe_open(path, "pt", device="cuda:0") as f:  # as upstream: the device is checked
        with pytest.raises(SafetensorError, match="torch.cuda.is_available"):  # at first use
            f.get_tensor("x")
    with pytest.raises(SafetensorError, match="needs torch with CUDA"):
        stpt.load_file(path, device="cuda:0")


def test_device_argument_errors(tmp):
    path = os.path.join(tmp, "m.safetensors")
    stpt.save_file({"x": torch.ones(4)}, path)
    with pytest.raises(ValueError, match="device 'cuda:x' is invalid"):
        pinio.load(path, device="cuda:x")
    with pytest.raises(ValueError, match="framework='pt'"):
        pinio.load(path, device="cuda", framework="np")
    with pytest.raises(ValueError, match="GPU device only"):
        pinio.load(path, allocator=lambda *a: None)
    with pytest.raises(ValueError, match="memory='pinned' chooses host memory"):
        pinio.open(path, device="cuda:0", memory="pinned")
    with pytest.raises(ValueError, match="staging ring of a GPU device load only"):
        pinio.open(path, slots=4)
    with pytest.raises(SafetensorError, match="Device cuda:0 is not supported for framework np"):
        safe_open(path, "np", device="cuda:0")
    with pytest.raises(SafetensorError, match="device cuda:a is invalid"):
        safe_open(path, "pt", device="cuda:a")
    with pytest.raises(SafetensorError, match="cpu and cuda only"):
        safe_open(path, "pt", device="mps")


def sharded(tmp):
    """Two shards and their index, with metadata: {name: tensor}."""
    a = {f"model.layers.{i}.w": value(torch.float32, (64, 40), i) for i in range(3)}
    b = {f"model.layers.{i}.w": value(torch.int16, (33, 64), i) for i in range(3, 5)}
    stpt.save_file(a, os.path.join(tmp, "model-00001-of-00002.safetensors"),
                   metadata={"format": "pt", "shard": "1"})
    stpt.save_file(b, os.path.join(tmp, "model-00002-of-00002.safetensors"),
                   metadata={"format": "pt", "shard": "2"})
    wm = {k: "model-00001-of-00002.safetensors" for k in a}
    wm.update({k: "model-00002-of-00002.safetensors" for k in b})
    with open(os.path.join(tmp, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": wm}, f)
    return {**a, **b}


def test_open_on_cuda_is_a_checkpoint(gpu, tmp):
    """pinio.open(device=...): the CUDA sink's tensors behind the Checkpoint face."""
    want = sharded(tmp)
    before = gpu.stats()
    with pinio.open(tmp, device="cuda:0", allocator=gpu.alloc, slot_size=64 << 10,
                    slots=2) as ck:
        assert isinstance(ck, pinio.Checkpoint) and ck.device == "cuda:0"
        assert ck.keys() == sorted(want) and len(ck) == len(want) and "model.layers.4.w" in ck
        assert ck.offset_keys() == list(want)  # file order, shard by shard
        expect_same(ck.tensors(), want)
        assert ck["model.layers.0.w"].data_ptr() in set(gpu.ptrs)  # the allocator's memory
        assert [os.path.basename(f) for f in ck.files()] == \
            ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
        assert ck.metadata() == {"format": "pt", "shard": "1"}
        assert ck.metadata(1) == {"format": "pt", "shard": "2"}
        dt, shape, nbytes, f, off = ck.info("model.layers.3.w")
        assert (dt, shape, nbytes, f) == ("I16", [33, 64], 33 * 64 * 2, 1) and off > 8
        rep = ck.report()
        assert rep["tensors"] == len(want) and rep["files"] == 2 and not rep["verified"], rep
        assert rep["ready_seconds"] >= rep["seconds"] >= 0, rep
        assert rep["sha256"] == [None, None]
        with pytest.raises(TypeError, match="'model.layers.0.w' is on cuda:0: it has no host"):
            ck.buffer("model.layers.0.w")
        with pytest.raises(IndexError):
            ck.metadata(2)
        kept = ck["model.layers.1.w"]
    with pytest.raises(ValueError, match="the checkpoint is closed"):
        ck["model.layers.1.w"]
    expect_same({"k": kept}, {"k": want["model.layers.1.w"]})  # taken tensors stay valid
    expect_clean_copies(gpu, before)
    sel = pinio.open(tmp, filter=["model.layers.4"], device=0, allocator=gpu.alloc)
    assert sel.keys() == ["model.layers.4.w"] and sel.metadata(0)["shard"] == "1"
    with pytest.raises(ValueError, match="framework='pt'"):
        pinio.open(tmp, "np", device="cuda:0", allocator=gpu.alloc)


def test_verify_on_cuda(gpu, tmp):
    """verify=True with a device: each file hashed as its bytes land in the
    staging slots; the digests are the files' own; a wrong expected digest
    fails the load, naming the file, and no tensor is handed out."""
    want = sharded(tmp)
    shards = sorted(f for f in os.listdir(tmp) if f.endswith(".safetensors"))
    digests = []
    for f in shards:
        with open(os.path.join(tmp, f), "rb") as fh:
            digests.append(hashlib.sha256(fh.read()).hexdigest())
    before = gpu.stats()
    with pinio.open(tmp, device="cuda:0", allocator=gpu.alloc, verify=True,
                    slot_size=64 << 10) as ck:
        rep = ck.report()
        assert rep["verified"] and rep["sha256"] == digests, rep
        assert rep["verify_landed_bytes"] >= rep["bytes"], rep  # hashed where they landed
        expect_same(ck.tensors(), want)
    # a filtered stream: what no read brought is read again for the digest
    t, rep = pinio.load_to_device(tmp, ["model.layers.0"], device="cuda:0",
                                  allocator=gpu.alloc, verify=True)
    assert rep["sha256"] == digests and rep["verify_reread_bytes"] > 0, rep
    assert list(t) == ["model.layers.0.w"]
    got = pinio.load(tmp, device="cuda:0", allocator=gpu.alloc, expected_sha256=digests)
    expect_same(got, want)
    n = len(gpu.calls)
    bad = [digests[0], "0" * 64]
    with pytest.raises(pinio.Error, match=r"model-00002-of-00002\.safetensors: sha256 mismatch"):
        pinio.load(tmp, device="cuda:0", allocator=gpu.alloc, expected_sha256=bad)
    assert len(gpu.calls) == n + len(want)  # placed, filled, then refused: nothing returned
    expect_clean_copies(gpu, before)


def test_every_copy_waited_for_before_the_stream_is_destroyed(gpu, tmp, monkeypatch):
    """FAKE_CUDA_DROP_PENDING_AT_DESTROY=1: the test driver drops the copies
    still pending when a stream is destroyed (a real cuStreamDestroy returns
    at once and the device finishes later) instead of completing them, so a
    load returning before its copies completed shows poisoned bytes here.
    The drop is shown to fire first. Checked to fail: with the stream's final
    drain of every slot (run_sink() in src/stream/stream.c) and the sink's
    two cuStreamSynchronize calls (src/stream/gpu.c) removed, this test fails
    and every other test of this file still passes."""
    monkeypatch.setenv("FAKE_CUDA_DROP_PENDING_AT_DESTROY", "1")
    lib = gpu.lib
    assert lib.cuInit(0) == 0  # the driver reads its environment here
    dst = gpu.alloc((4096,), torch.uint8, "cuda:0")
    src = (ctypes.c_uint8 * 4096)(*([0x11] * 4096))
    s = ctypes.c_void_p()
    assert lib.cuMemHostRegister_v2(src, ctypes.c_size_t(4096), 1) == 0
    assert lib.cuStreamCreate(ctypes.byref(s), 1) == 0
    dropped = gpu.stats()["dropped"]
    assert lib.cuMemcpyHtoDAsync_v2(ctypes.c_ulonglong(dst.data_ptr()), src,
                                    ctypes.c_size_t(4096), s) == 0
    lib.cuStreamDestroy_v2(s)  # no cuStreamSynchronize
    assert gpu.stats()["dropped"] == dropped + 1
    assert int(dst[0]) == 0xA5, "the dropped copy never landed"
    lib.cuMemHostUnregister(src)

    tensors = every_dtype(seed=9)
    path = os.path.join(tmp, "m.safetensors")
    stpt.save_file(tensors, path)
    before = gpu.stats()
    with pinio.open(path, device="cuda:0", allocator=gpu.alloc, slot_size=64 << 10,
                    slots=2) as ck:
        expect_same(ck.tensors(), tensors)
    assert gpu.stats()["dropped"] == dropped + 1, "no copy of the load was left pending"
    assert expect_clean_copies(gpu, before) >= len(tensors) - 1


def test_prefetch_on_a_device_handle_takes_its_allocator(gpu, tmp):
    """Issue 37 item 15: prefetch placed its tensors with .to(device),
    never through allocator= (and a CPU-only torch's AssertionError)."""
    tensors = {"a": value(torch.float32, (10, 6), 1), "b": value(torch.int32, (4, 3), 2)}
    path = os.path.join(tmp, "m.safetensors")
    stpt.save_file(tensors, path)
    with safe_open(path, "pt", device="cuda:0", allocator=gpu.alloc) as f:
        n = len(gpu.calls)
        f.prefetch({"a": slice(2, 5), "b": None})
        assert [c[0] for c in gpu.calls[n:]] == [(3, 6), (4, 3)]  # the plan's, allocator's
        n0 = f.pinio_bytes_read
        assert raw(f.get_slice("a")[2:5]) == raw(tensors["a"][2:5])
        assert raw(f.get_tensor("b")) == raw(tensors["b"])
        assert f.pinio_bytes_read == n0
        assert f.pinio_prefetch_bytes == 0  # item 11: handed out, the handle holds none
