"""pinio.load() of s3:// inputs against s3rver on loopback (tests/s3/s3env.sh's
server, started by conftest's s3 fixture): an object, a prefix with an index, an index URL, a
filter; bytes equal to the local file's; a missing key raises naming it.
Skipped only where node or s3rver is not installed."""
import numpy as np
import pytest

import pinio
from pinio.safetensors.numpy import load_file, save_file


def _tensors(seed):
    r = np.random.default_rng(seed)
    return {f"layer.{i}.weight": r.standard_normal((64, 33 + i)).astype(np.float32)
            for i in range(6)} | {"norm": np.arange(7, dtype=np.int16)}


def test_load_an_object_and_a_sharded_prefix(s3, tmp):
    ep, put = s3
    one = _tensors(1)
    save_file(one, f"{tmp}/one.safetensors", metadata={"format": "np"})
    with open(f"{tmp}/one.safetensors", "rb") as f:
        put("one/model.safetensors", f.read())
    ck = pinio.load("s3://models/one/model.safetensors", framework="np")
    assert sorted(ck) == sorted(one)
    for k, v in one.items():
        assert np.array_equal(ck[k], v) and ck[k].dtype == v.dtype
    # Two shards and their index: by prefix and by the index's URL.
    a = {k: v for k, v in one.items() if k.startswith("layer.")}
    b = {"norm": one["norm"]}
    save_file(a, f"{tmp}/a.safetensors")
    save_file(b, f"{tmp}/b.safetensors")
    wm = {k: "a.safetensors" for k in a} | {"norm": "b.safetensors"}
    import json
    put("sh/model.safetensors.index.json", json.dumps({"weight_map": wm}).encode())
    for n in ("a", "b"):
        with open(f"{tmp}/{n}.safetensors", "rb") as f:
            put(f"sh/{n}.safetensors", f.read())
    for src in ("s3://models/sh/", "s3://models/sh/model.safetensors.index.json"):
        ck = pinio.load(src, framework="np")
        assert sorted(ck) == sorted(one), src
        for k, v in one.items():
            assert np.array_equal(ck[k], v), (src, k)
    ck = pinio.load("s3://models/sh/", framework="np", filter="norm")
    assert list(ck) == ["norm"]
    assert np.array_equal(load_file(f"{tmp}/b.safetensors")["norm"], ck["norm"])


def test_a_missing_key_names_bucket_and_key(s3):
    with pytest.raises(pinio.Error) as e:
        pinio.load("s3://models/none.safetensors")
    assert "s3://models/none.safetensors" in str(e.value)
    assert "S3RVER" not in str(e.value)


def test_save_file_to_s3_is_refused(tmp, monkeypatch):
    """pinio reads s3:// and never writes it: save_file says so, and writes
    nothing even where a local "s3:" folder would take the path."""
    from pinio.safetensors import SafetensorError
    os_ = __import__("os")
    os_.makedirs(f"{tmp}/s3:/b")
    monkeypatch.chdir(tmp)
    with pytest.raises(SafetensorError) as e:
        save_file(_tensors(2), "s3://b/x.safetensors")
    assert "s3://b/x.safetensors: writing to s3:// is not supported" in str(e.value)
    assert os_.listdir(f"{tmp}/s3:/b") == []
