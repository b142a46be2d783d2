"""Issue 23/24 cases of the Python reader and writer: one handle reads one
file, a str filter is one pattern, save_file keeps what it replaces and
never writes what the reader refuses, lying sequences, FIFOs, numpy integer
indexes, killed saves, lazy safe_open under a memory limit."""
import errno
import json
import os
import signal
import stat
import struct
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from conftest import drop_cache
import torch

import pinio
from pinio import _pinio
from pinio.safetensors import SafetensorError, safe_open
from pinio.safetensors import numpy as stnp
from pinio.safetensors import torch as stpt

PY = sys.executable
ENV = dict(os.environ)


def run_py(code, *prefix, timeout=120):
    return subprocess.run(list(prefix) + [PY, "-c", code], capture_output=True, text=True,
                          env=ENV, timeout=timeout)


def test_one_handle_reads_the_file_it_opened(tmp):
    path = os.path.join(tmp, "m.safetensors")
    other = os.path.join(tmp, "other.safetensors")
    stnp.save_file({"a": np.ones(1024, np.float32), "b": np.ones(4, np.float32)}, path)
    stnp.save_file({"a": np.zeros(1024, np.float32), "b": np.zeros(4, np.float32)}, other,
                   metadata={"other": "1"})
    for fw in ("np", "pt"):
        with safe_open(path, fw) as f:
            os.replace(other, path)  # the path now names another file
            assert (np.asarray(f.get_tensor("a")) == 1).all(), fw
            assert (np.asarray(f.get_slice("b")[0:2]) == 1).all(), fw
            assert f.metadata() is None
            assert (np.asarray(f.get_tensors()["b"]) == 1).all(), fw
        os.replace(path, other)
        stnp.save_file({"a": np.ones(1024, np.float32), "b": np.ones(4, np.float32)}, path)


def test_a_str_filter_is_one_pattern_and_matching_nothing_is_an_error(tmp):
    path = os.path.join(tmp, "m.safetensors")
    stnp.save_file({"model.a": np.ones(3, np.float32), "model.b": np.ones(3, np.float32)},
                   path)
    w = pinio.load(path, filter="model.a", framework="np")
    assert list(w) == ["model.a"]
    assert sorted(pinio.load(path, filter=("model.a", "model.b"), framework="np")) == [
        "model.a", "model.b"]
    with pytest.raises(pinio.Error) as e:
        pinio.load(path, filter="nothing", framework="np")
    assert e.value.errno == errno.ENOENT and "no tensor matches" in str(e.value)
    assert path in str(e.value)
    with pytest.raises(pinio.Error, match="no tensor matches"):
        pinio.open(path, filter=["x", "y"])


def test_save_file_keeps_the_mode_and_writes_through_a_symlink(tmp):
    path = os.path.join(tmp, "m.safetensors")
    link = os.path.join(tmp, "link.safetensors")
    with open(path, "wb") as f:
        f.write(b"old")
    os.chmod(path, 0o600)
    stpt.save_file({"a": torch.ones(3)}, path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    os.symlink("m.safetensors", link)
    stpt.save_file({"a": torch.zeros(5)}, link)
    assert os.path.islink(link)
    assert stpt.load_file(path)["a"].shape == (5,)
    assert sorted(os.listdir(tmp)) == ["link.safetensors", "m.safetensors"]


def test_save_file_refuses_a_read_only_file_without_dac_override(tmp):
    """Root keeps CAP_DAC_OVERRIDE (and may write a 0444 file, as it may
    with upstream); without it a 0444 file is refused: PermissionError."""
    path = os.path.join(tmp, "ro.safetensors")
    stpt.save_file({"a": torch.ones(2)}, path)
    before = open(path, "rb").read()
    os.chmod(path, 0o444)
    code = ("import torch, pinio.safetensors.torch as st\n"
            f"try:\n    st.save_file({{'a': torch.zeros(9)}}, {path!r})\n"
            "except PermissionError as e:\n    print('PermissionError', e)\n"
            "else:\n    print('replaced')\n")
    if os.geteuid() == 0:
        r = run_py(code, "setpriv", "--inh-caps=-dac_override,-dac_read_search",
                   "--bounding-set=-dac_override,-dac_read_search")
    else:
        r = run_py(code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("PermissionError") and "ro.safetensors" in r.stdout, r.stdout
    assert open(path, "rb").read() == before
    assert os.listdir(tmp) == ["ro.safetensors"]


def test_save_file_refuses_what_the_reader_refuses(tmp):
    path = os.path.join(tmp, "m.safetensors")
    stpt.save_file({"good": torch.ones(2)}, path)
    before = open(path, "rb").read()
    with pytest.raises(SafetensorError, match="NUL"):
        stpt.save_file({"a\0b": torch.ones(2)}, path)
    with pytest.raises(SafetensorError, match="limit"):
        stpt.save_file({"a": torch.ones(2)}, path, metadata={"k": "x" * 100_000_001})
    assert open(path, "rb").read() == before
    assert os.listdir(tmp) == ["m.safetensors"]


class LyingShape:
    """A shape whose len() says 1 but which yields many dimensions."""

    def __len__(self):
        return 1

    def __getitem__(self, i):
        if i >= 100000:
            raise IndexError
        return 1

    def __iter__(self):
        return iter([1] * 100000)


def test_a_lying_len_gets_an_error_not_an_overflow():
    # In a child: before the fix this wrote 800 KB past an 8-byte array.
    code = ("import sys; sys.path[:0] = %r\n" % sys.path[:3] +
            "from pinio import _pinio\n"
            "from test_reliability import LyingShape\n"
            "import ctypes\n"
            "b = ctypes.create_string_buffer(8)\n"
            "for fn in (lambda s: _pinio.serialize(s), lambda s: _pinio.save('/dev/null/x', s)):\n"
            "    try:\n"
            "        fn([('a', 'U8', LyingShape(), ctypes.addressof(b), 1)])\n"
            "    except ValueError as e:\n"
            "        print('ValueError', e)\n")
    r = subprocess.run([PY, "-c", code], capture_output=True, text=True, env=ENV,
                       cwd=os.path.dirname(__file__), timeout=60)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    assert r.stdout.count("ValueError") == 2 and "len() is 1" in r.stdout, r.stdout


def test_a_fifo_is_refused_without_blocking(tmp):
    fifo = os.path.join(tmp, "f.safetensors")
    os.mkfifo(fifo)
    code = ("from pinio.safetensors import safe_open, SafetensorError\n"
            "from pinio.safetensors import torch as st\n"
            f"for fn in (lambda: safe_open({fifo!r}, 'pt'), lambda: st.load_file({fifo!r})):\n"
            "    try:\n        fn()\n"
            "    except SafetensorError as e:\n        print('refused', e)\n"
            "import pinio\n"
            f"try:\n    pinio.load({fifo!r})\n"
            "except pinio.Error as e:\n    print('refused', e)\n")
    r = run_py(code, timeout=60)  # before the fix: blocked forever in open()
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("refused") == 3 and "FIFO" in r.stdout and fifo in r.stdout, r.stdout


def test_numpy_integers_index_a_slice(tmp):
    path = os.path.join(tmp, "m.safetensors")
    stnp.save_file({"a": np.arange(12, dtype=np.float32).reshape(4, 3)}, path)
    for fw in ("pt", "np"):
        with safe_open(path, fw) as f:
            s = f.get_slice("a")
            assert np.asarray(s[np.int64(1)]).tolist() == [3, 4, 5], fw
            assert np.asarray(s[np.int32(-1), np.int64(0)]).tolist() == 9, fw
            assert np.asarray(s[np.int64(1):np.int64(3)]).tolist() == [[3, 4, 5], [6, 7, 8]]
    with safe_open(path, "pt", backend="pread") as f:
        assert f.get_slice("a")[np.uint8(2)].tolist() == [6, 7, 8]


def test_empty_metadata_is_an_empty_dict(tmp):
    path = os.path.join(tmp, "m.safetensors")
    hdr = json.dumps({"__metadata__": {}, "a": {"dtype": "U8", "shape": [2],
                                                "data_offsets": [0, 2]}}).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hdr)) + hdr + b"\x01\x02")
    with safe_open(path, "np") as f:
        assert f.metadata() == {}


def test_a_killed_save_leaves_a_temporary_a_later_save_removes(tmp):
    path = os.path.join(tmp, "m.safetensors")
    # Killed mid-write by SIGXFSZ at a 1 MiB file-size limit.
    code = ("import signal, resource, numpy as np\n"
            "signal.signal(signal.SIGXFSZ, signal.SIG_DFL)\n"
            "resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))\n"
            "from pinio.safetensors import numpy as st\n"
            f"st.save_file({{'a': np.ones(4 << 20, np.uint8)}}, {path!r})\n")
    r = run_py(code)
    assert r.returncode == -signal.SIGXFSZ, (r.returncode, r.stderr)
    left = [n for n in os.listdir(tmp) if n != "m.safetensors"]
    assert len(left) == 1 and not os.path.exists(path), left
    old = time.time() - 3600  # a minute untouched: stale (src/base/stale.h)
    os.utime(os.path.join(tmp, left[0]), (old, old))
    stnp.save_file({"a": np.ones(3, np.uint8)}, path)
    assert os.listdir(tmp) == ["m.safetensors"]


def cold_file(path, tensors):
    """Saves `tensors` and drops the file from the page cache."""
    stnp.save_file(tensors, path)
    drop_cache(path)


def test_safe_open_reads_about_the_tensors_it_is_asked_for(tmp):
    path = os.path.join(tmp, "m.safetensors")
    cold_file(path, {f"t{i:02d}": np.full(1 << 20, i, np.uint8) for i in range(32)})
    with safe_open(path, "np") as f:
        t = f.get_tensor("t07")
        assert (t == 7).all()
        # the tensor's own MiB (alignment aside), not the file's 32
        assert f.pinio_bytes_read <= 2 << 20, f.pinio_bytes_read
    with safe_open(path, "np") as f:
        for k in f.keys():  # in key order: read-ahead windows, a few engine runs
            assert (f.get_tensor(k) == int(k[1:])).all()
        assert f.pinio_loads <= 4, f.pinio_loads


def test_safe_open_of_a_file_larger_than_the_memory_allowed(tmp):
    """A 256 GiB sparse file under a 4 GiB address-space limit: get_tensor
    of its small tensor reads that tensor alone."""
    path = os.path.join(tmp, "big.safetensors")
    huge = 256 << 30
    hdr = json.dumps({"tiny": {"dtype": "U8", "shape": [8], "data_offsets": [0, 8]},
                      "huge": {"dtype": "U8", "shape": [huge], "data_offsets": [8, 8 + huge]}})
    hdr = hdr.encode() + b" " * (-len(hdr) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hdr)) + hdr + bytes(range(1, 9)))
        f.truncate(8 + len(hdr) + 8 + huge)
    code = ("from pinio.safetensors import safe_open\n"
            f"with safe_open({path!r}, 'np') as f:\n"
            "    print(f.get_tensor('tiny').tolist(), f.pinio_bytes_read)\n"
            "    try:\n        f.get_tensors()\n"
            "    except Exception as e:\n        print(type(e).__name__, e)\n")
    r = run_py(code, "prlimit", f"--as={4 << 30}")
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.splitlines()
    assert lines[0].startswith("[1, 2, 3, 4, 5, 6, 7, 8]"), r.stdout
    # The whole file cannot fit: an error that speaks Python, not CLI flags.
    assert lines[1].startswith("SafetensorError") and "--" not in lines[1], r.stdout


def test_threads_sharing_a_lazy_handle_get_their_tensors(tmp):
    path = os.path.join(tmp, "m.safetensors")
    cold_file(path, {f"t{i:02d}": np.full(1 << 16, i, np.uint8) for i in range(32)})
    bad = []
    with safe_open(path, "np") as f:
        def work(k0):
            for k in f.keys()[k0::4]:  # each thread in key order, interleaved with the others
                if not (f.get_tensor(k) == int(k[1:])).all():
                    bad.append(k)
        ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    assert not bad
