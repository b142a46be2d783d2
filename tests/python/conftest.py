"""Fixtures of the pinio Python tests: temporary folders under /var/tmp and
/dev/shm named pinio-py-* (scripts/test fails on leftovers), removed after."""
import os
import shutil
import tempfile

import pytest


def _tmp(base):
    d = tempfile.mkdtemp(prefix="pinio-py-", dir=base)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def tmp():
    """A folder on a disk file system (O_DIRECT works there)."""
    yield from _tmp("/var/tmp")


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
