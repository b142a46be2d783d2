"""Issue 40: a subset of the keys of a file of many tensors through
safe_open (every n-th key, in key order, shuffled, from a thread pool as
transformers v5 materialises get_slice per key). A key that does not follow
the one before is a view of the handle's one kept private mapping of the
file, not an engine run of its own (4.5 ms a key at 20,000 tensors: 0.03x
a plain mmap loader hot). Counted, never timed."""
import os
import random
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch

from conftest import drop_cache
from pinio import _pinio
from pinio.safetensors import SafetensorError, safe_open
from pinio.safetensors import numpy as stnp

N = 600  # tensors of 1,000 to 4,000 bytes: what a per-key engine run dominates


def many(path):
    tensors = {f"model.layers.{i // 2}.w{i % 2}": np.full(250 + i % 751, i, np.float32)
               for i in range(N)}
    stnp.save_file(tensors, path)
    return tensors


def count_loads(monkeypatch):
    """The engine runs of the test's handles, counted."""
    real, runs = _pinio.load, []

    def counted(*args, **kw):
        runs.append(1)
        return real(*args, **kw)

    monkeypatch.setattr(_pinio, "load", counted)
    return runs


def picks(keys, order):
    keys = keys[::3]
    if order != "key":
        random.Random(7).shuffle(keys)
    return keys


def value_of(name):
    layer, w = name.split(".")[2:]
    return 2 * int(layer) + int(w[1])


@pytest.mark.parametrize("cold", [False, True])
@pytest.mark.parametrize("order", ["key", "shuffled", "threads"])
@pytest.mark.parametrize("framework", ["pt", "np"])
def test_every_third_key_reads_no_engine_run_per_key(monkeypatch, tmp, cold, order, framework):
    path = os.path.join(tmp, "m.safetensors")
    tensors = many(path)
    if cold:
        drop_cache(path)
    runs = count_loads(monkeypatch)
    with safe_open(path, framework) as f:
        keys = picks(f.keys(), order)

        def get(k):
            # the pool as transformers v5 runs it (get_slice(k)[...]), and get_tensor
            t = f.get_slice(k)[...] if order == "threads" and value_of(k) % 2 else \
                f.get_tensor(k)
            return k, np.array(t)

        if order == "threads":
            with ThreadPoolExecutor(8) as ex:
                got = dict(ex.map(get, keys))
        else:
            got = dict(map(get, keys))
        asked = sum(tensors[k].nbytes for k in keys)
        # the bytes asked for (a page around each, cold), never the file
        assert f.pinio_bytes_read <= asked + len(keys) * 8192, (f.pinio_bytes_read, asked)
    assert len(runs) <= 1, f"{len(runs)} engine runs for {len(keys)} keys"
    for k in keys:
        assert got[k].shape == tensors[k].shape and (got[k] == value_of(k)).all(), k


def disk_read_bytes():
    """Bytes this process had read from storage (/proc/self/io), or None."""
    try:
        with open("/proc/self/io") as f:
            return int(next(line for line in f if line.startswith("read_bytes:")).split()[1])
    except (OSError, StopIteration):
        return None


@pytest.mark.parametrize("touch", ["0.25", "1000"])  # the engine maps a cold file, or pins it
def test_a_resident_first_tensor_does_not_map_a_cold_file_whole(tmp, monkeypatch, touch):
    """Every 2nd key in key order is the file's own order here (save_file
    puts the F32 w0 tensors, by name, before the F16 w1 ones), so after the
    first key each is the next in file order: read-ahead windows. The file
    is cold but its first tensor is in the page cache (as the header's
    read-ahead leaves it): that view must not make the handle take the
    file for hot and map it whole, populating every byte from the disk
    (the w1 half no key asks for). Counted: the windows' tensors and the
    bytes this process read from storage. And a window the engine mapped
    cold (a slow first touch: PINIO_FIRST_TOUCH_GBPS, test_firsttouch.py)
    is not a hot file either."""
    monkeypatch.setenv("PINIO_FIRST_TOUCH_GBPS", touch)
    path = os.path.join(tmp, "m.safetensors")
    n = 384  # 48 MiB of w0 (the keys asked for), 48 MiB of w1
    stnp.save_file({f"model.layers.{i // 2}.w{i % 2}":
                    np.full(32768 * (1 + i % 2), i, np.float32 if i % 2 == 0 else np.float16)
                    for i in range(2 * n)}, path)
    drop_cache(path)
    with safe_open(path, "pt") as f:
        keys = f.keys()[::2]
        assert keys == f.offset_keys()[:n]  # the premise: key order is file order here
        begin, end = f._info[keys[0]][3:5]
        fd = os.open(path, os.O_RDONLY)  # the first tensor alone brought in
        try:
            os.pread(fd, end - begin, f._data_offset + begin)
        finally:
            os.close(fd)
        before = disk_read_bytes()
        got = [f.get_tensor(k) for k in keys]
        read = None if before is None else disk_read_bytes() - before
        # windows, never the whole file (pinned or mapped, as the engine
        # chooses for a cold file on this machine)
        assert f._window is not None and len(f._window.index) < 2 * n
    asked = sum(t.numel() * t.element_size() for t in got)
    assert asked == n * 32768 * 4
    if read is not None:  # the whole file is 2x; a mapped window's fill reads on past its end
        assert read <= 1.5 * asked, (read, asked)
    for k, t in zip(keys, got):
        assert bool((t == value_of(k)).all()), k


def test_random_keys_are_views_of_one_mapping_that_outlive_the_handle(tmp):
    """Two keys read out of order: views into one private mapping, as far
    apart as their bytes in the file, writable (a write is the writer's
    copy of the page: the file keeps its bytes), alive after close()."""
    path = os.path.join(tmp, "m.safetensors")
    many(path)
    with safe_open(path, "pt") as f:
        keys = f.keys()
        a, b = keys[40], keys[7]
        ta, tb = f.get_tensor(a), f.get_tensor(b)
        info = {t[0]: t for t in _pinio.header(path)[0]}
        assert tb.data_ptr() - ta.data_ptr() == info[b][3] - info[a][3]
        assert f.pinio_loads == 2  # a view each, no window
        ta[0] = -1.0
    assert float(ta[0]) == -1.0 and bool((ta[1:] == value_of(a)).all())
    assert bool((tb == value_of(b)).all())
    with safe_open(path, "pt") as f:
        assert bool((f.get_tensor(a) == value_of(a)).all())  # the file unchanged


@pytest.mark.parametrize("order", ["shuffled", "threads"])
def test_hot_keys_ask_the_page_cache_once_a_chunk(tmp, order):
    """A hot file's random keys (and get_slice(k)[...] from a pool): the
    residency of the kept mapping is asked once per 2 MiB chunk of the
    file, not once per key (a mincore a key was half of a view's syscalls
    where the mmap handle makes none). The file check stays one fstat a
    key: a file changed between two keys fails the second
    (test_a_view_of_a_file_changed_under_the_handle_raises). Counted by
    the Source, never timed."""
    path = os.path.join(tmp, "m.safetensors")
    tensors = many(path)
    with open(path, "rb") as fh:  # hot: every page in the page cache
        fh.read()
    chunks = -(-os.path.getsize(path) // (2 << 20))
    with safe_open(path, "pt") as f:
        keys = picks(f.keys(), "shuffled")
        if order == "threads":
            with ThreadPoolExecutor(8) as ex:
                got = dict(ex.map(lambda k: (k, f.get_slice(k)[...]), keys))
        else:
            got = {k: f.get_tensor(k) for k in keys}
        st = f._src.stats()
        assert f.pinio_bytes_read == 0 and f.pinio_how == "mapped"
    assert st["views"] == len(keys) and st["fstat"] == len(keys), st
    assert st["mincore"] <= 2 * chunks, (st, chunks)  # the key's own, then its chunk's
    for k in keys:
        assert bool((got[k] == value_of(k)).all()) and list(got[k].shape) == \
            list(tensors[k].shape), k


def test_a_resident_key_does_not_make_its_cold_chunk_hot(tmp):
    """One tensor resident in an otherwise cold chunk: its view is resident,
    the chunk is not taken for hot, and a cold key in the same chunk still
    counts its bytes as read (pinio_bytes_read: the bytes the handle found
    absent from the page cache)."""
    path = os.path.join(tmp, "m.safetensors")
    many(path)
    assert os.path.getsize(path) < 2 << 20  # one chunk
    drop_cache(path)
    with safe_open(path, "np") as f:
        by_offset = f.offset_keys()
        first, last = by_offset[1], by_offset[-1]  # ~1.5 MiB apart
        begin, end = f._info[first][3:5]
        fd = os.open(path, os.O_RDONLY)
        try:  # that tensor alone brought in: no read-ahead on this descriptor
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
            os.pread(fd, end - begin, f._data_offset + begin)
        finally:
            os.close(fd)
        assert (f.get_tensor(first) == value_of(first)).all()
        assert f.pinio_bytes_read == 0  # found resident
        assert (f.get_tensor(last) == value_of(last)).all()
        n = f._info[last][4] - f._info[last][3]
        assert f.pinio_bytes_read == n, (f.pinio_bytes_read, n)  # found absent: read
        assert f._src.stats()["mincore"] == 3  # first's own and its chunk's, last's own


def test_a_whole_slice_is_a_view_without_the_index_handling(monkeypatch, tmp):
    """get_slice(k)[...] and [:] of a whole tensor (transformers v5's pool)
    are get_tensor's view of the kept mapping, straight: no engine run, no
    pass through the general index handling (a third of a key's time hot
    at 20,000 tensors); the bytes exact, the tensors alive after close()."""
    path = os.path.join(tmp, "m.safetensors")
    tensors = many(path)
    runs = count_loads(monkeypatch)
    from pinio.safetensors import _Slice

    def general(*args):
        raise AssertionError("a whole slice went through _torch_getitem")

    monkeypatch.setattr(_Slice, "_torch_getitem", general)
    with safe_open(path, "pt") as f:
        keys = picks(f.keys(), "shuffled")
        info = {t[0]: t for t in _pinio.header(path)[0]}
        got = {k: f.get_slice(k)[...] if i % 2 else f.get_slice(k)[:] for i, k in enumerate(keys)}
        a, b = keys[0], keys[1]
        assert got[b].data_ptr() - got[a].data_ptr() == info[b][3] - info[a][3]
        assert f.pinio_loads == len(keys)  # a view each
    assert not runs
    for k in keys:
        assert got[k].shape == tensors[k].shape and (got[k].numpy() == value_of(k)).all(), k


@pytest.mark.parametrize("framework", ["np", "pt"])
@pytest.mark.parametrize("how", ["truncated", "rewritten"])
def test_a_view_of_a_file_changed_under_the_handle_raises(tmp, how, framework):
    """The file shrank (or was rewritten in place) after the handle mapped
    it: the next random key raises SafetensorError naming the path and
    the change, never SIGBUS, never the new bytes under the old header."""
    path = os.path.join(tmp, "m.safetensors")
    many(path)
    with safe_open(path, framework) as f:
        keys = f.keys()
        assert (np.asarray(f.get_tensor(keys[5])) == value_of(keys[5])).all()  # mapped now
        if how == "truncated":
            os.truncate(path, os.path.getsize(path) // 2)
        else:
            with open(path, "r+b") as fh:
                fh.seek(os.path.getsize(path) - 8)
                fh.write(b"\0" * 8)
            st = os.stat(path)
            os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
        last = max(keys, key=lambda k: value_of(k))  # the last bytes of the file
        with pytest.raises(SafetensorError, match="changed") as e:
            f.get_tensor(last)
        assert path in str(e.value) and "/proc/self/fd" not in str(e.value)
        for index in (Ellipsis, slice(None)):
            with pytest.raises(SafetensorError, match="changed") as e:
                f.get_slice(last)[index]
            assert path in str(e.value)


def test_an_unmappable_file_is_read_by_windows(monkeypatch, tmp):
    """A Source that cannot map its file (an address-space limit, a kernel
    without MADV_POPULATE_READ): random keys are read as before, by
    engine runs, and the right bytes come back."""
    path = os.path.join(tmp, "m.safetensors")
    many(path)
    with safe_open(path, "np") as f:
        src = f._src

        class NoMap:
            def view(self, *args):
                raise _pinio.Error(12, "cannot map: Cannot allocate memory")

            def __getattr__(self, name):
                return getattr(src, name)

        monkeypatch.setattr(f, "_src", NoMap())
        real, runs = _pinio.load, []

        def load(*args, source=None, **kw):  # the engine gets the real Source
            runs.append(1)
            return real(*args, source=src if isinstance(source, NoMap) else source, **kw)

        monkeypatch.setattr(_pinio, "load", load)
        keys = picks(f.keys(), "shuffled")[:5]
        for k in keys:
            assert (f.get_tensor(k) == value_of(k)).all(), k
        assert len(runs) == len(keys)
        assert f._kept is False
