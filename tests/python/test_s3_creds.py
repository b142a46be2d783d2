"""pinio.load() and safe_open() of s3:// with credentials the AWS chain fetches:
web identity (STS AssumeRoleWithWebIdentity) and the container endpoint, both
served by tests/s3/credserver.py on loopback handing out s3rver's keys; the
data requests are signed with them (keys s3rver does not know are refused);
a configured source that fails raises pinio.Error naming the source, never
unsigned requests. Skipped only where node or s3rver is not installed."""
import os
import subprocess

import numpy as np
import pytest

import pinio
from pinio.safetensors import safe_open
from pinio.safetensors.numpy import save_file

CREDSERVER = os.path.join(os.path.dirname(__file__), "..", "s3", "credserver.py")


@pytest.fixture
def cred(tmp):
    procs = []

    def start(*args):
        p = subprocess.Popen(["/usr/bin/python3", CREDSERVER, f"{tmp}/cred.log", *args],
                             stdout=subprocess.PIPE, text=True)
        procs.append(p)
        line = p.stdout.readline()
        assert line.startswith("port "), "credserver.py did not say its port"
        return f"http://127.0.0.1:{line.split()[1]}"

    yield start
    for p in procs:
        p.terminate()
        p.wait(timeout=30)


def _object(put, tmp):
    t = {"w": np.arange(1000, dtype=np.float32).reshape(10, 100), "b": np.arange(7, dtype=np.int16)}
    save_file(t, f"{tmp}/m.safetensors")
    with open(f"{tmp}/m.safetensors", "rb") as f:
        put("m.safetensors", f.read())
    return t


def _same(ck, t):
    assert sorted(ck) == sorted(t)
    for k, v in t.items():
        assert np.array_equal(ck[k], v) and ck[k].dtype == v.dtype, k


def _web_identity(monkeypatch, tmp, url):
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(k)
    with open(f"{tmp}/token", "w") as f:
        f.write("pinio-test-web-identity-token")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ENDPOINT_URL_STS", url)
    monkeypatch.setenv("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/py")
    monkeypatch.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", f"{tmp}/token")


def test_web_identity_loads_and_opens(s3, tmp, cred, monkeypatch):
    _, put = s3
    t = _object(put, tmp)
    _web_identity(monkeypatch, tmp, cred())
    _same(pinio.load("s3://models/m.safetensors", framework="np"), t)
    with safe_open("s3://models/m.safetensors", framework="np") as f:
        assert np.array_equal(f.get_tensor("w"), t["w"])
    with open(f"{tmp}/cred.log") as f:
        assert "Action=AssumeRoleWithWebIdentity RoleArn=arn:aws:iam::123456789012:role/py" in f.read()


def test_the_fetched_keys_sign_the_data(s3, tmp, cred, monkeypatch):
    _, put = s3
    _object(put, tmp)
    _web_identity(monkeypatch, tmp, cred("--keys", "AKIDUNKNOWN", "unknown"))
    with pytest.raises(pinio.Error) as e:
        pinio.load("s3://models/m.safetensors")
    assert "403" in str(e.value)


def test_container_credentials(s3, tmp, cred, monkeypatch):
    _, put = s3
    t = _object(put, tmp)
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(k)
    url = cred("--container-auth", "py-auth-NeverPrint")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", f"{url}/container/creds")
    monkeypatch.setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", "py-auth-NeverPrint")
    _same(pinio.load("s3://models/m.safetensors", framework="np"), t)
    with open(f"{tmp}/cred.log") as f:
        assert "GET /container/creds token=None auth=ok" in f.read()


def test_a_failing_source_raises_naming_it(s3, tmp, cred, monkeypatch):
    _, put = s3
    _object(put, tmp)
    _web_identity(monkeypatch, tmp, cred("--fail", "403", "InvalidIdentityToken"))
    with pytest.raises(pinio.Error) as e:
        pinio.load("s3://models/m.safetensors")
    msg = str(e.value)
    assert f"web identity (AWS_WEB_IDENTITY_TOKEN_FILE={tmp}/token)" in msg
    assert "InvalidIdentityToken" in msg
    assert "pinio-test-web-identity-token" not in msg and "NeverPrint" not in msg
