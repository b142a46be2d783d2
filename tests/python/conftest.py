"""Fixtures of the pinio Python tests: temporary folders under /var/tmp and
/dev/shm named pinio-RUN-py-* (RUN: the run's tag, as tests/common/helpers.h
names it; scripts/test fails on leftovers with its tag), removed after; and
s3, a fresh s3rver on loopback for the s3:// tests."""
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request

import pytest


def run_tag():
    """$PINIO_TEST_RUN (scripts/test's tag for this run) or one of this
    process's own, as t_run() in tests/common/helpers.c."""
    r = os.environ.get("PINIO_TEST_RUN", "")
    return r if 1 <= len(r) <= 16 and r.isascii() and r.isalnum() else "p%d" % os.getpid()


def _tmp(base):
    d = tempfile.mkdtemp(prefix="pinio-%s-py-" % run_tag(), dir=base)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def tmp():
    """A folder on a disk file system (O_DIRECT works there)."""
    yield from _tmp("/var/tmp")


@pytest.fixture
def shm():
    """A folder on tmpfs: its files are always in the page cache (hot)."""
    if not os.path.isdir("/dev/shm"):
        pytest.skip("/dev/shm missing")
    yield from _tmp("/dev/shm")


@pytest.fixture(params=["/var/tmp", "/dev/shm"])
def anydir(request):
    """Each test body once on /var/tmp and once on tmpfs."""
    if not os.path.isdir(request.param):
        pytest.skip(f"{request.param} missing")
    yield from _tmp(request.param)


def rchar():
    """Bytes this process has read through read()/pread() so far (/proc/self/io)."""
    with open("/proc/self/io") as f:
        for line in f:
            if line.startswith("rchar:"):
                return int(line.split()[1])
    raise RuntimeError("no rchar in /proc/self/io")


def drop_cache(path):
    """Drops `path`'s pages from the page cache (its next read is cold)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


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
