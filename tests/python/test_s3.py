"""pinio.load() of s3:// inputs against s3rver on loopback (tests/s3/s3env.sh's
server, started here): an object, a prefix with an index, an index URL, a
filter; bytes equal to the local file's; a missing key raises naming it.
Skipped only where node or s3rver is not installed."""
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request

import numpy as np
import pytest

import pinio
from conftest import run_tag
from pinio.safetensors.numpy import load_file, save_file

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def _s3rver():
    if not (shutil.which("node") or shutil.which("nodejs")):
        pytest.skip("node is not installed (Debian's nodejs; scripts/bootstrap installs it)")
    exe = os.environ.get("PINIO_S3RVER") or os.path.join(ROOT, "build-deps", "s3rver",
                                                          "node_modules", ".bin", "s3rver")
    if not os.access(exe, os.X_OK):
        exe = shutil.which("s3rver")
    if not exe:
        pytest.skip("s3rver is not installed (scripts/bootstrap installs it into build-deps/s3rver)")
    return exe


def _put(url, data):
    req = urllib.request.Request(url, data=data, method="PUT")
    with urllib.request.urlopen(req, timeout=60) as r:
        assert r.status == 200


@pytest.fixture
def s3(monkeypatch):
    """(endpoint, put(key, bytes)) of a fresh s3rver with bucket "models"."""
    exe = _s3rver()
    data = tempfile.mkdtemp(prefix="pinio-%s-py-s3rver-" % run_tag(), dir="/tmp")
    log = open(data + ".log", "w+")
    proc = subprocess.Popen([exe, "-d", data, "-a", "127.0.0.1", "-p", "0"], stdout=log,
                            stderr=subprocess.STDOUT)
    try:
        port = None
        for _ in range(300):
            log.seek(0)
            m = re.search(r"listening on 127\.0\.0\.1:(\d+)", log.read())
            if m:
                port = m.group(1)
                break
            assert proc.poll() is None, "s3rver exited at start"
            time.sleep(0.1)
        assert port, "s3rver did not say its port in 30 s"
        ep = f"http://127.0.0.1:{port}"
        for k in [k for k in os.environ if k.startswith("AWS_")]:
            monkeypatch.delenv(k)
        monkeypatch.setenv("AWS_ENDPOINT_URL", ep)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "S3RVER")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "S3RVER")
        monkeypatch.setenv("AWS_REGION", "us-east-1")
        monkeypatch.setenv("AWS_CONFIG_FILE", "/dev/null")
        monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
        _put(f"{ep}/models", b"")
        yield ep, lambda key, body: _put(f"{ep}/models/{key}", body)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
        os.unlink(data + ".log")
        shutil.rmtree(data, ignore_errors=True)


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
