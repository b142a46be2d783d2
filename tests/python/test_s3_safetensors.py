"""pinio.safetensors of s3:// objects (safe_open, torch's and numpy's load_file)
against s3rver on loopback (conftest's s3 fixture): every answer compared with
the same checkpoint opened from its local file; one object version per handle
(an object replaced after open raises, never mixed bytes); each byte read at
most once per handle; errors naming bucket and key, never a credential.
Skipped only where node or s3rver is not installed."""
import gc
import os
import subprocess
import sys
import threading

import numpy as np
import pytest
import torch

import pinio
from pinio.safetensors import SafetensorError, safe_open
from pinio.safetensors import numpy as st_np
from pinio.safetensors import torch as st_pt

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
URL = "s3://models/ck/model.safetensors"
SECRET = "pinio-test-secret-Zq7Wv"  # s3rver checks no signature: any secret signs
TOKEN = "pinio-test-token-Hm3Xk"


def _tensors(fw):
    """Several dtypes, a tensor over two of the plan's 8 MiB reads, 2-D
    tensors for slices, empty tensors and a scalar."""
    g = torch.Generator().manual_seed(7)
    t = {
        "big": torch.randn(3_000_000, generator=g),                 # 12 MB: two reads
        "w.f16": torch.randn(40, 30, generator=g).half(),
        "w.f64": torch.randn(17, 5, generator=g).double(),
        "i64": torch.arange(-50, 50, dtype=torch.int64),
        "i32": torch.arange(33, dtype=torch.int32).reshape(3, 11),
        "i16": torch.arange(7, dtype=torch.int16),
        "i8": torch.arange(-8, 8, dtype=torch.int8),
        "u8": torch.arange(200, dtype=torch.uint8).reshape(20, 10),
        "mask": torch.arange(12) % 3 == 0,
        "c64": torch.randn(6, generator=g).to(torch.complex64),
        "empty": torch.zeros(0),
        "empty.2d": torch.zeros(4, 0, dtype=torch.int32),
        "scalar": torch.tensor(3.25),
    }
    for i in range(24):  # small tensors after the big one, across the next read
        t[f"layers.{i}.weight"] = torch.randn(64, 40 + i, generator=g)
    if fw == "pt":
        t["w.bf16"] = torch.randn(9, 12, generator=g).to(torch.bfloat16)
    return t


def _equal(a, b):
    """Same type, dtype, shape and bytes."""
    if type(a) is not type(b) or a.dtype != b.dtype or tuple(a.shape) != tuple(b.shape):
        return False
    if isinstance(a, (np.ndarray, np.generic)):
        return a.tobytes() == b.tobytes()
    if not a.numel():
        return True
    return bytes(a.contiguous().flatten().view(torch.uint8).numpy()) == \
        bytes(b.contiguous().flatten().view(torch.uint8).numpy())


def _same(from_object, from_file):
    """from_object() answers as from_file() does: equal tensors, or the same
    exception with the same words."""
    try:
        want = from_file()
    except Exception as e:  # noqa: BLE001 (the object must raise it too)
        with pytest.raises(type(e)) as got:
            from_object()
        assert str(got.value) == str(e)
        return
    got = from_object()
    assert _equal(got, want), (got, want)


def _upload(put, path, key="ck/model.safetensors"):
    with open(path, "rb") as f:
        put(key, f.read())


@pytest.fixture(params=["pt", "np"])
def ck(request, s3, tmp, monkeypatch):
    """(framework, local path, its size) of a checkpoint uploaded to URL."""
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    fw = request.param
    path = f"{tmp}/model.safetensors"
    st_pt.save_file(_tensors(fw), path, metadata={"format": fw, "note": "s3"})
    _upload(s3[1], path)
    return fw, path, os.path.getsize(path)


def test_safe_open_answers_as_the_file(ck):
    fw, path, size = ck
    with safe_open(URL, framework=fw) as f, safe_open(path, framework=fw) as g:
        assert isinstance(f, safe_open)
        assert f.pinio_bytes_read == 0  # the header only: lazy
        assert f.keys() == g.keys() and f.offset_keys() == g.offset_keys()
        assert f.metadata() == g.metadata() == {"format": fw, "note": "s3"}
        f.get_tensor("i16")
        assert 0 < f.pinio_bytes_read <= 8 << 20 < size  # that tensor's read, not the object
        for k in f.keys():  # key order, not the object's: still each byte once
            assert _equal(f.get_tensor(k), g.get_tensor(k)), k
        once = f.pinio_bytes_read
        assert size - 4096 < once <= size + 4096
        got, want = f.get_tensors(), g.get_tensors()
        assert list(got) == list(want)
        for k in want:
            assert _equal(got[k], want[k]), k
        assert f.pinio_bytes_read == once  # nothing read again


def test_get_tensors_first_reads_the_object_once(ck):
    fw, path, size = ck
    with safe_open(URL, framework=fw) as f, safe_open(path, framework=fw) as g:
        got, want = f.get_tensors(), g.get_tensors()
        assert list(got) == list(want) and all(_equal(got[k], want[k]) for k in want)
        assert f.pinio_loads == 1 and size - 4096 < f.pinio_bytes_read <= size + 4096
        for k in f.keys():
            assert _equal(f.get_tensor(k), want[k]), k
        assert f.pinio_loads == 1


@pytest.mark.parametrize("backend", ["mmap", "pread"])
def test_get_slice_answers_as_the_file(ck, backend):
    fw, path, _ = ck
    idx = [slice(2, 5), (slice(None), slice(1, 3)), 1, -1, Ellipsis, (slice(3, 9), slice(0, 30, 2)),
           slice(0, 0), (2, slice(1, 4)), slice(5, 2), slice(1, 100), 100, (0, 0, 0), slice(None, None, 3)]
    with safe_open(URL, fw, backend=backend) as f, safe_open(path, fw, backend=backend) as g:
        for name in ("w.f16", "u8", "i32", "w.f64", "big", "empty", "empty.2d", "scalar", "mask"):
            s, t = f.get_slice(name), g.get_slice(name)
            assert s.get_shape() == t.get_shape() and s.get_dtype() == t.get_dtype()
            for ix in idx:
                _same(lambda: s[ix], lambda: t[ix])


def test_prefetch_then_reads_nothing(ck):
    fw, path, size = ck
    with safe_open(URL, fw) as f, safe_open(path, fw) as g:
        f.prefetch({"u8": slice(2, 6), "w.f64": None})
        read, loads = f.pinio_bytes_read, f.pinio_loads
        assert read > 0 and loads >= 1
        assert _equal(f.get_slice("u8")[2:6], g.get_slice("u8")[2:6])
        assert _equal(f.get_tensor("w.f64"), g.get_tensor("w.f64"))
        assert (f.pinio_bytes_read, f.pinio_loads) == (read, loads)
        f.prefetch()
        names = [n for n, _ in f.tensor_stream()]
        assert names == g.offset_keys()
        assert size - 4096 < f.pinio_bytes_read <= size + 4096
    with safe_open(URL, fw, prefetch=True) as f:  # 0.9's first form
        assert size - 4096 < f.pinio_bytes_read <= size + 4096


@pytest.mark.parametrize("backend", ["mmap", "pread"])
def test_load_file_torch_and_numpy(ck, backend):
    fw, path, _ = ck
    lf = st_pt.load_file if fw == "pt" else st_np.load_file
    got, want = lf(URL, backend=backend), lf(path, backend=backend)
    assert list(got) == list(want)
    for k in want:
        assert _equal(got[k], want[k]), k


def test_arena_loads_the_whole_object_through_load_file(ck):
    fw, path, _ = ck
    lf = st_pt.load_file if fw == "pt" else st_np.load_file
    if fw == "pt":
        arena = pinio.Arena()
        got = st_pt.load_file(URL, arena=arena)
        assert arena.size > 0
        want = lf(path)
        assert list(got) == list(want) and all(_equal(got[k], want[k]) for k in want)
    with pytest.raises(SafetensorError, match=r"load_file\(url, arena=") as e:
        safe_open(URL, fw, arena=pinio.Arena())
    assert URL in str(e.value)


def test_tensors_outlive_the_handle_and_threads_share_it(ck):
    fw, path, size = ck
    want = safe_open(path, fw).get_tensors()
    f = safe_open(URL, fw)
    keys = f.keys()
    out, errors = {}, []

    def worker(i):
        try:
            for k in keys[i:] + keys[:i]:
                out[(i, k)] = f.get_tensor(k)
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    th = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    assert not errors
    assert f.pinio_bytes_read <= size + 4096  # four threads, still each byte once
    f.close()
    with pytest.raises(SafetensorError, match="File is closed"):
        f.get_tensor("i8")
    f = None  # the handle gone: the tensors keep the image
    gc.collect()
    for (_, k), t in out.items():  # views of the image, alive after close
        assert _equal(t, want[k]), k


def test_device_cuda_as_for_files(ck):
    fw, path, _ = ck
    if torch.cuda.is_available() and fw == "pt":
        with safe_open(URL, "pt", device="cuda:0") as f, safe_open(path, "pt") as g:
            t = f.get_tensor("w.bf16")
            assert t.device.type == "cuda" and torch.equal(t.cpu(), g.get_tensor("w.bf16"))
        return
    # framework np refuses the device at open; a CPU-only torch raises one
    # SafetensorError naming CUDA at the first get
    def get(src, device):
        with safe_open(src, fw, device=device) as f:
            return f.get_tensor("i8")

    assert _equal(get(URL, "cpu"), get(path, "cpu"))
    with pytest.raises(SafetensorError, match="CUDA|cuda"):
        get(URL, "cuda:0")
    with pytest.raises(SafetensorError, match="CUDA|cuda"):
        get(path, "cuda:0")


def test_object_replaced_after_open_raises(s3, tmp, monkeypatch):
    """Same size, other bytes: every read after the change raises; bytes read
    before it stay those of the version opened."""
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    a = {"x": torch.arange(4_000_000, dtype=torch.float32), "y": torch.ones(3)}
    b = {"x": -a["x"], "y": torch.zeros(3)}
    st_pt.save_file(a, f"{tmp}/a.safetensors")
    st_pt.save_file(b, f"{tmp}/b.safetensors")
    assert os.path.getsize(f"{tmp}/a.safetensors") == os.path.getsize(f"{tmp}/b.safetensors")
    _upload(s3[1], f"{tmp}/a.safetensors")
    f = safe_open(URL, "pt")
    g = safe_open(URL, "np")
    h = safe_open(URL, "pt")
    y = h.get_tensor("y")  # read before the change
    _upload(s3[1], f"{tmp}/b.safetensors")
    for call in (lambda: f.get_tensor("x"), lambda: f.get_slice("x")[10:20],
                 lambda: f.get_tensors(), lambda: g.get_tensor("y")):
        with pytest.raises(SafetensorError, match="changed") as e:
            call()
        assert URL in str(e.value) and SECRET not in str(e.value)
    assert torch.equal(y, a["y"]) and torch.equal(h.get_tensor("y"), a["y"])


def test_object_replaced_by_a_longer_one_raises(s3, tmp, monkeypatch):
    """Past the 64 KiB its opening GET brought: a tensor read asks the store
    again (one within them is that GET's bytes, the version opened)."""
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    st_pt.save_file({"x": torch.ones(50000)}, f"{tmp}/a.safetensors")
    st_pt.save_file({"x": torch.ones(90000), "z": torch.ones(2)}, f"{tmp}/b.safetensors")
    _upload(s3[1], f"{tmp}/a.safetensors")
    with safe_open(URL, "pt") as f:
        _upload(s3[1], f"{tmp}/b.safetensors")
        with pytest.raises(SafetensorError, match="changed"):
            f.get_tensor("x")


def test_missing_object_or_bucket_names_them(s3, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_SESSION_TOKEN", TOKEN)
    for url in ("s3://models/none.safetensors", "s3://nobucket/ck/model.safetensors"):
        for call in (lambda: safe_open(url, "pt"), lambda: st_pt.load_file(url),
                     lambda: st_np.load_file(url)):
            # as for a missing file: FileNotFoundError, with the store's answer
            with pytest.raises(FileNotFoundError, match="404") as e:
                call()
            assert url in str(e.value)
            assert SECRET not in str(e.value) and TOKEN not in str(e.value)


def test_a_missing_tensor_is_the_files_error(ck):
    fw, _, _ = ck
    with safe_open(URL, fw) as f:
        with pytest.raises(SafetensorError, match="File does not contain tensor nope"):
            f.get_tensor("nope")
        with pytest.raises(SafetensorError, match="File does not contain tensor nope"):
            f.get_slice("nope")


def test_prefix_and_index_urls_are_refused(s3, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    for url in ("s3://models/ck/", "s3://models/ck", "s3://models/ck/model.safetensors.index.json"):
        for call in (lambda: safe_open(url, "pt"), lambda: st_pt.load_file(url),
                     lambda: st_np.load_file(url)):
            with pytest.raises(SafetensorError, match="pinio.load") as e:
                call()
            assert url in str(e.value)


def test_bad_url_and_missing_secret(s3, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    for url in ("s3://bad bucket/m.safetensors", "s3:///m.safetensors"):
        with pytest.raises(SafetensorError, match="bucket name") as e:
            safe_open(url, "pt")
        assert url in str(e.value)
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    monkeypatch.setenv("AWS_SESSION_TOKEN", TOKEN)
    for call in (lambda: safe_open(URL, "np"), lambda: st_np.load_file(URL)):
        with pytest.raises(SafetensorError, match="AWS_SECRET_ACCESS_KEY is not") as e:
            call()
        assert URL in str(e.value) and TOKEN not in str(e.value)


def test_an_invalid_header_is_the_files_error(s3, tmp, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    head = b'{"x": {"dtype": "F32", "shape": [2]}}'  # no data_offsets
    head += b" " * (-len(head) % 8)
    bad = len(head).to_bytes(8, "little") + head + bytes(8)
    with open(f"{tmp}/bad.safetensors", "wb") as f:
        f.write(bad)
    _upload(s3[1], f"{tmp}/bad.safetensors")
    with pytest.raises(SafetensorError, match="^Error while deserializing header") as local:
        safe_open(f"{tmp}/bad.safetensors", "pt")
    assert "data_offsets" in str(local.value)
    for call in (lambda: safe_open(URL, "pt"), lambda: st_pt.load_file(URL),
                 lambda: st_np.load_file(URL)):
        with pytest.raises(SafetensorError) as e:
            call()
        # the same parser's words, the URL for the path
        assert str(e.value) == str(local.value).replace(f"{tmp}/bad.safetensors", URL)


@pytest.fixture
def proxy_403(s3, monkeypatch):
    """Starts tests/s3/faultproxy.py in front of s3rver answering 403 to
    every ranged GET after the first `skip` of each key; returns start(skip)."""
    procs = []

    def start(skip):
        p = subprocess.Popen([sys.executable, f"{ROOT}/tests/s3/faultproxy.py", s3[0],
                              "--fault", "403", "--count", "0", "--skip", str(skip)],
                             stdout=subprocess.PIPE, text=True)
        procs.append(p)
        line = p.stdout.readline()
        assert line.startswith("port "), line
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{line.split()[1]}")

    yield start
    for p in procs:
        p.terminate()
        p.wait(timeout=30)
        p.stdout.close()


def test_access_denied_names_the_object_never_the_secret(ck, proxy_403):
    fw, _, _ = ck
    proxy_403(1)  # the header's GET passes, the data's are refused
    with safe_open(URL, fw) as f:
        with pytest.raises(SafetensorError, match=r"access denied \(403") as e:
            f.get_tensor("big")
        assert URL in str(e.value) and SECRET not in str(e.value)
    proxy_403(0)  # the header's GET refused: at open
    for call in (lambda: safe_open(URL, fw), lambda: st_np.load_file(URL)):
        with pytest.raises(SafetensorError, match=r"access denied \(403") as e:
            call()
        assert URL in str(e.value) and SECRET not in str(e.value)
