"""Fixtures of the pinio Python tests: temporary folders under /var/tmp and
/dev/shm named pinio-RUN-py-* (RUN: the run's tag, as tests/common/helpers.h
names it; scripts/test fails on leftovers with its tag), removed after."""
import os
import shutil
import tempfile

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
