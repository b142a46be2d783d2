"""Memory modes from Python: every tensor is writable, as upstream's (a
private mapping there): pinned ones, and mapped ones (hot files, the
library's auto rule) mapped private, copy-on-write, so a write reaches
neither the file nor another load. A shared read-only mapping
(map_private=False) is exported read-only: nothing hands out a writable
view of memory whose first write is SIGSEGV."""
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import pinio
from pinio.safetensors import torch as stpt


def hot_file(d):
    path = os.path.join(d, "m.safetensors")
    stpt.save_file({"a": torch.arange(4096, dtype=torch.float32), "b": torch.ones(3, 5)}, path)
    with open(path, "rb") as f:  # in the page cache: what the auto rule maps
        f.read()
    return path


def test_hot_file_tensors_are_writable(tmp):
    # In a child: before the fix this write killed the interpreter (SIGSEGV).
    path = hot_file(tmp)
    code = f"""
import pinio, pinio.safetensors.torch as st
from pinio.safetensors import safe_open
d = st.load_file({path!r})
d["a"].add_(1)
with safe_open({path!r}, "np") as f:
    x = f.get_tensor("b"); x[0, 0] = 7
l = pinio.load({path!r})
l["b"].mul_(2)
print(float(d["a"][0]), x[0, 0], float(l["b"][0, 0]))
"""
    env = dict(os.environ)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert p.returncode == 0, (p.returncode, p.stderr[-2000:])
    assert p.stdout.split() == ["1.0", "7.0", "2.0"]
    # and the file is unchanged: the writes went to pinned memory
    assert float(stpt.load_file(path)["a"][0]) == 0.0


def test_hot_files_are_mapped_private(tmp):
    path = hot_file(tmp)
    ck = pinio.open(path, "np")  # the default: auto, private mappings
    rep = ck.report()
    assert rep["files_mapped"] == 1 and "copy-on-write" in rep["modes"], rep
    a = ck["a"]
    assert a.flags.writeable and not ck.buffer("a").readonly
    other = pinio.open(path, "np")
    a[0] = 42  # zero copy, yet the write is this load's alone
    assert other["a"][0] == 0
    ck.close()
    other.close()
    np.testing.assert_array_equal(pinio.load(path, framework="np")["a"],
                                  np.arange(4096, dtype=np.float32))


def test_shared_mapping_is_read_only(tmp):
    path = hot_file(tmp)
    ck = pinio.open(path, "np", memory="mapped", map_private=False)
    rep = ck.report()
    assert rep["files_mapped"] == 1 and rep["files_pinned"] == 0, rep
    assert ck.buffer("a").readonly and not ck.buffer("a").pinned
    a = ck["a"]
    assert not a.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        a[0] = 1
    with pytest.raises(TypeError):  # a writable view is refused, not handed out
        memoryview(ck.buffer("a")).cast("B")[0] = 1
    np.testing.assert_array_equal(a, np.arange(4096, dtype=np.float32))
    ck.close()
    pinned = pinio.open(path, "np", memory="pinned")
    assert pinned.report()["files_pinned"] == 1 and not pinned.buffer("a").readonly
    assert pinned.buffer("a").pinned and pinned["a"].flags.writeable
    pinned.close()
    with pytest.raises(ValueError, match="memory nope is invalid"):
        pinio.open(path, memory="nope")


def test_fill_chooses_how_a_cold_mapped_file_is_read_in(tmp):
    path = hot_file(tmp)
    want = {"ahead": "filled by readahead at depth", "fault": "filled by the mapping's readahead"}
    for fill, says in want.items():
        ck = pinio.open(path, "np", memory="mapped", cache="cold", fill=fill)
        rep = ck.report()
        assert rep["files_mapped"] == 1 and says in rep["cache"], (fill, rep["cache"])
        np.testing.assert_array_equal(ck["a"], np.arange(4096, dtype=np.float32))
        ck.close()
    with pytest.raises(ValueError, match="fill sometimes is invalid"):
        pinio.open(path, memory="mapped", fill="sometimes")
    with pytest.raises(ValueError, match="fill='ahead'"):
        pinio.open(path, device="cuda", fill="ahead")
