"""The hot paths of issue 27, held to what they must not lose: load_file in
one engine run with one header parse (and safe_open's errors), a per-key
read of a cached file in two engine runs with the same tensors as a whole
load, and the report's time to ready. No timing is asserted: the counts are
of calls and engine runs."""
import os

import numpy as np
import pytest
from conftest import drop_cache
import torch

import pinio
import pinio.safetensors as st
import pinio.safetensors.numpy as stnp
import pinio.safetensors.torch as stpt
from pinio import _pinio
from pinio.safetensors import SafetensorError, safe_open


def mixed(n=12):
    """Tensors of several dtypes and ranks, an empty one among them."""
    g = torch.Generator().manual_seed(3)
    out = {}
    for i in range(n):
        dt = (torch.float32, torch.bfloat16, torch.int64, torch.uint8)[i % 4]
        out[f"layer.{i}.w"] = (torch.randn(3, 5, generator=g) * 100).to(dt)
    out["empty"] = torch.zeros(0, 4)
    out["flag"] = torch.tensor([True, False, True])
    return out


def raw_bytes(t):
    return t.contiguous().view(-1).view(torch.uint8).tolist() if t.numel() else []


def same(a, b):
    assert list(a) == list(b)  # file order, both
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
        assert raw_bytes(a[k]) == raw_bytes(b[k]), k


@pytest.fixture
def header_calls(monkeypatch):
    """Counts the header reads of pinio.safetensors (its own parse)."""
    calls = []
    real = _pinio.header

    def counting(*a):
        calls.append(a)
        return real(*a)

    monkeypatch.setattr(_pinio, "header", counting)
    return calls


@pytest.fixture
def header_parses(monkeypatch):
    """Counts what parses a header in pinio.safetensors: _pinio.header(),
    a _pinio.Source (a handle's file, validated once) and a _pinio.load()
    by path (its plan reads the header); a load through a Source parses
    none."""
    calls = []
    real_header, real_source, real_load = _pinio.header, _pinio.Source, _pinio.load

    def header(*a):
        calls.append(("header", a))
        return real_header(*a)

    def source(*a):
        calls.append(("Source", a))
        return real_source(*a)

    def load(paths, *a, **kw):
        if paths is not None:
            calls.append(("load", paths))
        return real_load(paths, *a, **kw)

    monkeypatch.setattr(_pinio, "header", header)
    monkeypatch.setattr(_pinio, "Source", source)
    monkeypatch.setattr(_pinio, "load", load)
    return calls


def test_load_file_reads_the_header_once(anydir, header_calls):
    path = os.path.join(anydir, "m.safetensors")
    stpt.save_file(mixed(), path)
    with safe_open(path, "pt") as f:
        want = f.get_tensors()
    header_calls.clear()
    same(stpt.load_file(path), want)
    same(stpt.load_file(path, backend="pread"), want)
    with pinio.Arena() as arena:
        got = stpt.load_file(path, arena=arena)
        same(got, want)
        del got
    # the plan's parse is the only one: no header() of safe_open's before it
    assert header_calls == []
    np_path = os.path.join(anydir, "np.safetensors")
    stnp.save_file({"b": np.arange(6, dtype=np.int64).reshape(2, 3), "a": np.ones(3, np.uint8)},
                   np_path)
    header_calls.clear()
    np_got = stnp.load_file(np_path)
    assert header_calls == []
    assert list(np_got) == ["b", "a"] and np_got["b"].tolist() == [[0, 1, 2], [3, 4, 5]]


def test_load_file_errors_are_safe_open_s(tmp, header_calls):
    """A bad header or a file shorter than its header: load_file raises what
    safe_open raises (its header read then runs, on the failure path only)."""
    good = os.path.join(tmp, "good.safetensors")
    stnp.save_file({"a": np.arange(4096, dtype=np.int64)}, good)
    with open(good, "rb") as f:
        data = f.read()
    cases = {"short.safetensors": data[:-100], "garbage.safetensors": b"\x10" + b"\0" * 7 + b"x" * 16,
             "tiny.safetensors": b"abc"}
    for name, body in cases.items():
        p = os.path.join(tmp, name)
        with open(p, "wb") as f:
            f.write(body)
        with pytest.raises(SafetensorError) as want:
            safe_open(p, "pt")
        for load in (stpt.load_file, stnp.load_file):
            with pytest.raises(SafetensorError) as got:
                load(p)
            assert str(got.value) == str(want.value), name
            assert str(got.value).startswith("Error while deserializing header: "), name
    with pytest.raises(FileNotFoundError):
        stpt.load_file(os.path.join(tmp, "missing.safetensors"))
    with pytest.raises(SafetensorError, match="backend nope is invalid"):
        stpt.load_file(good, backend="nope")
    with pytest.raises(SafetensorError, match="framework"):
        st._load_whole(good, "tf")


def test_every_key_of_a_cached_file_in_two_engine_runs(shm, header_parses):
    """Reading each key in order of a file in the page cache (tmpfs: always
    there): the first key alone (a view), a first window (16 MiB, mapped:
    a view says nothing of the rest of the file, test_partial.py), then the
    rest of the file in one mapped window. Windows of 16 MiB doubling (what
    a pinned, cold file gets) took four runs here."""
    path = os.path.join(shm, "m.safetensors")
    tensors = {f"t{i:02d}": np.full(1 << 20, i, np.uint8) for i in range(40)}
    tensors["z.empty"] = np.zeros(0, np.float32)
    stnp.save_file(tensors, path)
    whole = pinio.load(path, framework="np")
    header_parses.clear()
    for fw in ("np", "pt"):
        with safe_open(path, fw) as f:
            got = {k: f.get_tensor(k) for k in f.keys()}
            assert f.pinio_loads == 3, f.pinio_loads
            assert f.pinio_bytes_read == 0  # mapped: nothing read by the engine
        assert sorted(got) == sorted(whole)
        for k, v in whole.items():
            g = got[k] if fw == "np" else got[k].numpy()
            assert g.dtype == v.dtype and g.shape == v.shape and (g == v).all(), k
    # in file order too, and a random access after: still the tensor asked for
    with safe_open(path, "pt") as f:
        for k in f.offset_keys():
            assert f.get_tensor(k).shape == whole[k].shape
        assert f.pinio_loads <= 3
        assert int(f.get_tensor("t05")[0]) == 5
    # one per safe_open, none per window (each window parsed it again)
    assert [c[0] for c in header_parses] == ["Source"] * 3, header_parses


def test_a_handle_parses_the_header_once_whatever_it_reads(anydir, header_parses):
    """Random accesses (a window each), slices, every tensor, a prefetch,
    on a cold and a cached file: the header parsed at safe_open only."""
    path = os.path.join(anydir, "m.safetensors")
    tensors = mixed(24)
    stpt.save_file(tensors, path)
    keys = sorted(tensors)
    order = keys[::-1] + keys[::3]  # backwards: no read-ahead, a window per key
    for fw in ("pt", "np"):
        header_parses.clear()
        with safe_open(path, fw) as f:
            for k in order:
                if fw == "np" and tensors[k].dtype == torch.bfloat16:
                    continue
                got = f.get_tensor(k)
                want = tensors[k] if fw == "pt" else tensors[k].numpy()
                assert raw_bytes(torch.as_tensor(got)) == raw_bytes(torch.as_tensor(want)), k
            assert f.pinio_loads >= 3  # windows, each once a header parse
            assert f.get_slice("layer.4.w")[1:3].tolist() == tensors["layer.4.w"][1:3].tolist()
            if fw == "pt":
                every = f.get_tensors()
                assert sorted(every) == keys
                for k in keys:
                    assert raw_bytes(every[k]) == raw_bytes(tensors[k]), k
                f.prefetch({"layer.1.w": slice(0, 2)})
                assert f.get_slice("layer.1.w")[0:2].tolist() == tensors["layer.1.w"][:2].tolist()
        assert [c[0] for c in header_parses] == ["Source"], header_parses


def test_a_handle_refuses_its_file_rewritten_in_place(tmp):
    """The header a handle validated no longer describes a file rewritten
    in place (another size): a later read raises, naming the path, where a
    window used to read the new file's bytes under the old header's names."""
    path = os.path.join(tmp, "m.safetensors")
    stnp.save_file({"a": np.ones(1024, np.float32), "b": np.ones(8, np.float32)}, path)
    newer = stnp.save({"a": np.zeros(4096, np.float32), "b": np.zeros(8, np.float32)})
    with safe_open(path, "np") as f:
        with open(path, "r+b") as fh:  # the same file (inode), new bytes
            fh.write(newer)
        with pytest.raises(SafetensorError, match="changed") as e:
            f.get_tensor("a")
        assert path in str(e.value) and "/proc/self/fd" not in str(e.value)


def test_a_file_evicted_between_windows_is_mapped_not_pinned(tmp):
    """The big window that follows a mapped one is loaded mapped even when
    the file left the page cache in between: read pinned, a handle asked
    for one tensor at a time would pin up to 8 GiB at once."""
    path = os.path.join(tmp, "m.safetensors")  # /var/tmp: the cache can be dropped
    tensors = {f"t{i:02d}": np.full(1 << 20, i, np.uint8) for i in range(24)}
    stnp.save_file(tensors, path)
    with open(path, "rb") as fh:
        fh.read()  # in the page cache: the first window is mapped
    with safe_open(path, "np") as f:
        keys = f.keys()
        assert (f.get_tensor(keys[0]) == 0).all()  # a view
        assert (f.get_tensor(keys[1]) == 1).all()  # the first window: 16 MiB, mapped
        assert f._window.report()["files_mapped"] == 1
        drop_cache(path)
        for i, k in enumerate(keys[2:], 2):
            assert (f.get_tensor(k) == i).all(), k
        rep = f._window.report()
        assert rep["files_mapped"] == 1, rep["io_path"]
        assert f.pinio_loads == 3


def test_per_key_tensors_match_the_whole_load(anydir):
    path = os.path.join(anydir, "m.safetensors")
    stpt.save_file(mixed(40), path)
    whole = stpt.load_file(path)
    with safe_open(path, "pt") as f:
        got = {k: f.get_tensor(k) for k in f.offset_keys()}
    same(got, whole)
    assert got["layer.0.w"].tolist() == whole["layer.0.w"].tolist()  # valid after close


def test_a_checkpoint_item_after_close_raises(tmp):
    path = os.path.join(tmp, "m.safetensors")
    stpt.save_file(mixed(4), path)
    ck = pinio.open(path)
    t = ck["layer.0.w"]
    ck.close()
    for name in ("layer.0.w", "empty"):
        with pytest.raises(ValueError, match="closed"):
            ck[name]
    assert t.shape == (3, 5)


def test_report_says_the_time_to_ready(anydir):
    path = os.path.join(anydir, "m.safetensors")
    stpt.save_file(mixed(), path)
    for memory in ("auto", "pinned", "mapped"):
        with pinio.open(path, memory=memory) as ck:
            lib = ck._raw.report()["ready_seconds"]
            assert lib > 0 and lib >= ck._raw.report()["seconds"]
            before = ck.report()["ready_seconds"]  # the load and the checkpoint object
            assert before >= lib
            ck.tensors()
            after = ck.report()["ready_seconds"]  # ... and every tensor object
            assert after >= before


def test_consumer_dma_reads_a_cached_file_pinned(shm):
    """consumer="dma" (what a GPU upload needs): memory "auto" pins every
    file, even one in the page cache that "host" maps."""
    path = os.path.join(shm, "m.safetensors")
    stpt.save_file(mixed(), path)
    want = stpt.load_file(path)
    for consumer, pinned in (("host", 0), ("dma", 1)):
        with pinio.open(path, consumer=consumer) as ck:
            assert ck.report()["files_pinned"] == pinned, consumer
            same(ck.tensors(), want)
    got = pinio.load(path, consumer="dma")
    assert got["layer.2.w"].tolist() == want["layer.2.w"].tolist()
    with pytest.raises(ValueError, match="consumer nope is invalid"):
        pinio.load(path, consumer="nope")


def test_a_cold_handle_read_in_scattered_key_order_reads_the_file_once(tmp):
    """Names whose key order is not their file order (the writer puts the
    F32 tensors before the U8 ones, as upstream's does: key order goes back
    and forth between the halves): a cold handle read key by key reads the
    file in two engine runs (the first tensor, then the whole file), every
    byte once, instead of windows of one small read per tensor."""
    path = os.path.join(tmp, "m.safetensors")
    n = 200
    tensors = {f"t{i}": np.full(64 << 10, i % 251, np.float32) if i % 2 else
               np.full(256 << 10, i % 251, np.uint8) for i in range(n)}
    data = sum(v.nbytes for v in tensors.values())
    stnp.save_file(tensors, path)
    names = list(_pinio.header(path)[0])
    assert [t[0] for t in names] != sorted(tensors)  # file order is not key order
    for order in ("key", "file"):
        drop_cache(path)
        with safe_open(path, "np") as f:
            keys = f.keys() if order == "key" else f.offset_keys()
            for k in keys:
                assert (f.get_tensor(k) == int(k[1:]) % 251).all(), k
            if order == "key":
                assert f.pinio_loads == 2, f.pinio_loads
                assert f.pinio_bytes_read <= data + (1 << 20), f.pinio_bytes_read
            else:  # file order: windows that are one run of the file each
                assert f.pinio_loads >= 3, f.pinio_loads
    # two neighbouring keys of a file 16 times their window: that window, not the file
    big = {f"t{i}": np.full(64 << 10, i % 251, np.float32) if i % 2 else
           np.full(256 << 10, i % 251, np.uint8) for i in range(16 * 64 * 2)}
    stnp.save_file(big, path)
    drop_cache(path)
    with safe_open(path, "np") as f:
        keys = f.keys()
        for k in keys[:2]:
            assert (f.get_tensor(k) == int(k[1:]) % 251).all(), k
        assert f.pinio_bytes_read <= (17 << 20), f.pinio_bytes_read
