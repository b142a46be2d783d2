"""The cold rule of memory="auto" from Python (issue 40): the first-touch
figure comes from PINIO_FIRST_TOUCH_GBPS, which the binding reads and
passes to the library as an option, and report()["modes"] says which path ran and
why. The figures are given, so nothing depends on this machine's speed;
bytes checked either way, on disk and tmpfs."""
import os

import pytest
import torch

import pinio
from pinio.safetensors import torch as stpt


def cold_file(d):
    path = os.path.join(d, "m.safetensors")
    want = {"a": torch.arange(300_000, dtype=torch.float32),
            "b": torch.arange(70_000, dtype=torch.int64).reshape(700, 100),
            "c": torch.ones(3, 5, dtype=torch.bfloat16)}
    stpt.save_file(want, path)
    return path, want


def load_cold(path, **kw):
    ck = pinio.open(path, cache="cold", share="off", **kw)
    got = {k: v.clone() for k, v in ck.tensors().items()}
    return ck.report(), got


def same(got, want):
    assert sorted(got) == sorted(want)
    for k in want:
        assert torch.equal(got[k], want[k]), k


@pytest.mark.parametrize("touch,mode,why", [
    ("0.25", "files_mapped", "first touch 0.25 GB/s given < storage"),
    ("1000", "files_pinned", "first touch 1000.00 GB/s given >= storage")])
def test_the_first_touch_figure_decides_a_cold_file(anydir, monkeypatch, touch, mode, why):
    path, want = cold_file(anydir)
    monkeypatch.setenv("PINIO_FIRST_TOUCH_GBPS", touch)
    rep, got = load_cold(path)
    same(got, want)
    assert rep[mode] == 1, rep["modes"]
    assert why in rep["modes"], rep["modes"]
    if mode == "files_mapped":
        assert "page cache filled, mapped" in rep["modes"]
        assert rep["read_bytes"] == 0
    else:
        assert "O_DIRECT into the arena" in rep["modes"]


@pytest.mark.parametrize("bad", ["fast", "-1", "0", "nan", "1e999"])
def test_a_bad_figure_is_refused_by_name(tmp, monkeypatch, bad):
    path, _ = cold_file(tmp)
    monkeypatch.setenv("PINIO_FIRST_TOUCH_GBPS", bad)
    with pytest.raises(ValueError, match="PINIO_FIRST_TOUCH_GBPS wants a rate"):
        pinio.open(path, cache="cold")
