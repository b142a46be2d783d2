"""az:// (Azurite) and gs:// (tests/gcs/gcsproxy.py over s3rver) from Python
and through each engine plugin's entry point (issue 38): pinio.load,
pinio.open, weights_iterator, safe_open and both load_files; the
transformers and diffusers patches against their stand-ins; vLLM's load
format and SGLang's iterators found through the installed distribution's
entry points (engines/pipvenv.py) against theirs. Every tensor compared
byte for byte with the same checkpoint's local file, an object, a prefix
and an index URL alike; a missing object, a bad URL and a missing
credential raise naming the URL.

Azurite checks SharedKey signatures as Azure does; gcsproxy.py checks each
request's HMAC signature (the XML API's interoperable signing) before it
forwards it to s3rver. Skipped only where node, Azurite, s3rver or the
Azure SDK (Debian's python3-azure, the uploads) is not installed."""
import collections
import json
import os
import re
import shutil
import subprocess
import tempfile
import time

import numpy as np
import pytest
import torch

import pinio
from conftest import ROOT, run_tag
from engines.pipvenv import venv  # noqa: F401 (a fixture)
from pinio.safetensors import SafetensorError, safe_open
from pinio.safetensors import torch as st_pt
from test_engine_hf import check_transformers_load, engines, shards  # noqa: F401 (a fixture)
import test_engine_sglang
import test_engine_vllm
from test_engine_sglang import model  # noqa: F401 (a fixture)

AZ_ACCOUNT = "devstoreaccount1"
AZ_KEY = ("Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/"
          "KBHBeksoGMGw==")  # Azurite's well-known account key
GS_ID = "GOOG1EPINIOTESTACCESSID0000000000000000000000000000000007Q2"
GS_SECRET = "pinio-test-secret/objstores-Vq3"

# scheme: "az" or "gs"; put(key, bytes) into container/bucket "models";
# env: the variables a child process needs to reach it the same way
# log: gcsproxy.py's log of each request's check (None for Azurite)
Store = collections.namedtuple("Store", "scheme put env log")


def _started(proc, log, pattern, what):
    """The port `proc` wrote to `log` (matching `pattern`) within 60 s."""
    for _ in range(600):
        log.seek(0)
        m = re.search(pattern, log.read())
        if m:
            return m.group(1)
        assert proc.poll() is None, f"{what} exited at start: {log.read()}"
        time.sleep(0.1)
    pytest.fail(f"{what} did not say its port in 60 s")


def _stop(proc):
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _clear(monkeypatch):
    """No store's variables from the caller's environment: only the test's own."""
    for k in list(os.environ):
        if k.startswith(("AZURE_", "GOOGLE_")) or k in ("STORAGE_EMULATOR_HOST",
                                                         "GCE_METADATA_HOST"):
            monkeypatch.delenv(k)
    # the machine's own metadata server (on GCE) must not answer a test
    monkeypatch.setenv("NO_GCE_CHECK", "True")


@pytest.fixture
def az(monkeypatch):
    """Azurite's blob service on loopback with container "models";
    AZURE_STORAGE_CONNECTION_STRING set to its well-known account."""
    if not (shutil.which("node") or shutil.which("nodejs")):
        pytest.skip("node is not installed (Debian's nodejs; scripts/bootstrap installs it)")
    exe = os.environ.get("PINIO_AZURITE") or os.path.join(
        ROOT, "build-deps", "azurite", "node_modules", ".bin", "azurite-blob")
    if not os.access(exe, os.X_OK):
        exe = shutil.which("azurite-blob")
    if not exe:
        pytest.skip("Azurite is not installed (scripts/bootstrap installs it from the npm "
                    "registry into build-deps/azurite)")
    try:
        from azure.storage.blob import BlobServiceClient
    except ImportError:
        pytest.skip("the Azure SDK for Python is not installed (Debian's python3-azure; "
                    "scripts/bootstrap installs it)")
    data = tempfile.mkdtemp(prefix="pinio-%s-py-azurite-" % run_tag(), dir="/tmp")
    log = open(data + ".log", "w+")
    proc = subprocess.Popen([exe, "--blobHost", "127.0.0.1", "--blobPort", "0", "--location",
                             data, "--silent", "--skipApiVersionCheck", "--disableTelemetry"],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        port = _started(proc, log, r"listens on http://127\.0\.0\.1:(\d+)", "Azurite")
        cs = (f"DefaultEndpointsProtocol=http;AccountName={AZ_ACCOUNT};AccountKey={AZ_KEY};"
              f"BlobEndpoint=http://127.0.0.1:{port}/{AZ_ACCOUNT};")
        _clear(monkeypatch)
        monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", cs)
        models = BlobServiceClient.from_connection_string(cs).create_container("models")

        def put(key, body):
            models.upload_blob(key, body, overwrite=True)

        yield Store("az", put, {"AZURE_STORAGE_CONNECTION_STRING": cs}, None)
    finally:
        _stop(proc)
        log.close()
        os.unlink(data + ".log")
        shutil.rmtree(data, ignore_errors=True)


@pytest.fixture
def gs(s3, monkeypatch):
    """The tests' Cloud Storage endpoint: tests/gcs/gcsproxy.py checking an
    HMAC key's signatures in front of conftest's s3rver (bucket "models");
    STORAGE_EMULATOR_HOST and the key set."""
    ep, put = s3
    log = tempfile.NamedTemporaryFile("w+", prefix="pinio-%s-py-gcs-" % run_tag(),
                                      suffix=".log", dir="/tmp")
    proc = subprocess.Popen(["/usr/bin/python3", os.path.join(ROOT, "tests/gcs/gcsproxy.py"), ep,
                             log.name, "--auth", f"hmac:{GS_ID}:{GS_SECRET}"],
                            stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("port "), f"gcsproxy.py did not start: {line!r}"
        env = {"STORAGE_EMULATOR_HOST": f"http://127.0.0.1:{line.split()[1]}",
               "GOOGLE_HMAC_ACCESS_ID": GS_ID, "GOOGLE_HMAC_SECRET": GS_SECRET,
               "NO_GCE_CHECK": "True"}
        _clear(monkeypatch)
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        yield Store("gs", put, env, log.name)
    finally:
        _stop(proc)
        log.close()


def _signed(store):
    """Every request gcsproxy.py saw carried the key's signature (Azurite
    refuses a bad SharedKey signature itself)."""
    if store.log:
        with open(store.log) as f:
            seen = f.read()
        assert re.search(r"^GET .* auth-ok", seen, re.M) and "auth-bad" not in seen, seen


@pytest.fixture(params=["az", "gs"])
def store(request):
    return request.getfixturevalue(request.param)


def _upload(store, folder, prefix):
    """Every file of `folder` put under `prefix`/; the URL of that prefix."""
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), "rb") as f:
            store.put(f"{prefix}/{name}", f.read())
    return f"{store.scheme}://models/{prefix}/"


def _tensors():
    """Several dtypes, one tensor over two of the plan's 8 MiB reads, a
    2-D tensor for slices, an empty one and a scalar."""
    g = torch.Generator().manual_seed(38)
    t = {"big": torch.randn(3_000_000, generator=g),
         "w.bf16": torch.randn(9, 12, generator=g).to(torch.bfloat16),
         "w.f16": torch.randn(40, 30, generator=g).half(),
         "i64": torch.arange(-50, 50, dtype=torch.int64),
         "u8": torch.arange(200, dtype=torch.uint8).reshape(20, 10),
         "mask": torch.arange(12) % 3 == 0,
         "empty": torch.zeros(0),
         "scalar": torch.tensor(3.25)}
    for i in range(8):
        t[f"layers.{i}.weight"] = torch.randn(64, 40 + i, generator=g)
    return t


def _raw(t):
    """dtype, shape and bytes of a tensor or array."""
    if isinstance(t, np.ndarray):
        return str(t.dtype), t.shape, t.tobytes()
    return t.dtype, tuple(t.shape), t.contiguous().flatten().view(torch.uint8).numpy().tobytes()


def _same(got, want):
    assert list(got) == list(want) or sorted(got) == sorted(want)
    for k in want:
        assert _raw(got[k]) == _raw(want[k]), k


@pytest.fixture
def ck(store, tmp):
    """(store, local file, its object's URL, {name: tensor} from the local
    file, shard folder, the shards' prefix URL) uploaded to `store`."""
    local = os.path.join(tmp, "model.safetensors")
    st_pt.save_file(_tensors(), local, metadata={"format": "pt"})
    with open(local, "rb") as f:
        store.put("one/model.safetensors", f.read())
    sh = os.path.join(tmp, "sh")
    os.mkdir(sh)
    want = st_pt.load_file(local)
    names = sorted(want)
    wm = {}
    for s, part in enumerate((names[::2], names[1::2])):
        f = f"model-{s + 1:05d}-of-00002.safetensors"
        st_pt.save_file({k: want[k] for k in part}, os.path.join(sh, f))
        wm.update({k: f for k in part})
    with open(os.path.join(sh, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": wm}, f)
    prefix = _upload(store, sh, "sh")
    return store, local, f"{store.scheme}://models/one/model.safetensors", want, sh, prefix


def test_load_open_and_weights_iterator(ck):
    store, local, url, want, _, prefix = ck
    for src in (url, prefix, prefix + "model.safetensors.index.json"):
        _same(pinio.load(src, framework="pt"), want)
        with pinio.open(src, framework="pt") as h:
            _same({k: h[k] for k in h.keys()}, want)
        with pinio.weights_iterator(src, batch_bytes=1 << 20) as it:
            _same(dict(it), want)
    _signed(store)
    got = pinio.load(prefix, framework="np", filter="layers.*")
    assert sorted(got) == sorted(k for k in want if k.startswith("layers."))
    for k in got:
        assert got[k].tobytes() == _raw(want[k])[2] and got[k].shape == want[k].shape, k


def test_safe_open_and_load_file(ck):
    store, local, url, want, _, _ = ck
    with safe_open(url, framework="pt") as f, safe_open(local, framework="pt") as g:
        assert f.keys() == g.keys() and f.metadata() == g.metadata() == {"format": "pt"}
        for k in f.keys():
            assert _raw(f.get_tensor(k)) == _raw(g.get_tensor(k)), k
        assert _raw(f.get_slice("u8")[3:7, 2:5]) == _raw(g.get_slice("u8")[3:7, 2:5])
    _same(st_pt.load_file(url), want)
    with safe_open(url, framework="np") as f:  # numpy has no bfloat16
        for k in set(want) - {"w.bf16"}:
            assert f.get_tensor(k).tobytes() == _raw(want[k])[2], k
    _signed(store)


def test_transformers_and_diffusers_patches(store, engines, tmp):
    pt, pd = engines
    folder = os.path.join(tmp, "hf")
    os.mkdir(folder)
    files, want = shards(folder)
    prefix = _upload(store, folder, "hf")
    urls = [prefix + os.path.basename(f) for f in files]
    import transformers.modeling_utils as mu

    with pt.patch():
        check_transformers_load(mu, urls, want)
    import diffusers.models.model_loading_utils as mlu

    with pd.patch():
        for mmap in (False, True):  # pinned (pinio.load) and load_file
            got = {}
            for u in urls:
                got.update(mlu.load_state_dict(u, disable_mmap=mmap))
            assert sorted(got) == sorted(want)
            for k, v in want.items():
                assert got[k].numpy().tobytes() == v.tobytes() and got[k].shape == v.shape, k
        with pytest.raises(FileNotFoundError) as e:
            mlu.load_state_dict(prefix + "none.safetensors")
        assert prefix + "none.safetensors" in str(e.value)
    _signed(store)


def test_vllm_load_format(store, venv, tmp):
    folder = os.path.join(tmp, "toy")
    ref = test_engine_vllm.checkpoint(folder)
    url = _upload(store, folder, "toy")
    test_engine_vllm.exact(test_engine_vllm.drive(venv, ref, model=url, world=2,
                                                  env=store.env), 2)
    out = test_engine_vllm.drive(venv, ref, model=url + "model.safetensors.index.json",
                                 env=store.env)
    test_engine_vllm.exact(out, 1)
    # a revision (vLLM's --revision) is the hub's: an object URL has none
    test_engine_vllm.exact(test_engine_vllm.drive(venv, ref, model=url, revision="main",
                                                  env=store.env), 1)
    nothing = f"{store.scheme}://models/nothing/"
    out = test_engine_vllm.drive(venv, ref, model=nothing, env=store.env)
    assert nothing in out.get("error", ""), out
    _signed(store)


def test_sglang_iterators(store, venv, model):
    files, ref, names = model
    for f in files:
        with open(f, "rb") as g:
            store.put("sg/" + os.path.basename(f), g.read())
    urls = [f"{store.scheme}://models/sg/{os.path.basename(f)}" for f in files]
    out = test_engine_sglang.drive(venv, ref, files=urls, env=store.env)
    for mode in ("buffered", "prefetch"):
        run = out["runs"][mode]
        assert (run["names"], run["mismatches"]) == (names, []), run
    _signed(store)


@pytest.mark.parametrize("call", ["load", "safe_open"])
def test_errors_name_the_url(store, monkeypatch, call):
    def attempt(url):
        with pytest.raises((pinio.Error, SafetensorError, FileNotFoundError)) as e:
            if call == "load":
                pinio.load(url)
            else:
                with safe_open(url, framework="pt"):
                    pass
        return str(e.value)

    s = store.scheme
    none = f"{s}://models/none.safetensors"
    assert none in attempt(none)
    for bad in (f"{s}://A/m.safetensors", f"{s}:///m.safetensors"):
        assert bad in attempt(bad)
    store.put("cred/m.safetensors", b"any bytes: never read")
    url = f"{s}://models/cred/m.safetensors"
    for k in store.env:  # no credential: anonymous, refused
        if k not in ("STORAGE_EMULATOR_HOST", "NO_GCE_CHECK"):
            monkeypatch.delenv(k)
    if s == "az":  # the endpoint kept, the key left out
        monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", re.sub(
            r"AccountKey=[^;]*;", "", store.env["AZURE_STORAGE_CONNECTION_STRING"]))
    msg = attempt(url)
    assert url in msg and "403" in msg, msg
    assert AZ_KEY not in msg and GS_SECRET not in msg
