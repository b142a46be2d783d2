"""Issue 37's cases of a lazy safe_open handle and its prefetch: a handle
reads only the file it opened, even while another thread closes it and a
new open takes its descriptor number."""
import os

import numpy as np
import pytest
import torch

from pinio import _pinio
from pinio.safetensors import SafetensorError, safe_open
from pinio.safetensors import torch as stpt


@pytest.fixture
def two_files(tmp):
    """Two files of the same layout: "w" zeros in one, ones in the other."""
    paths = []
    for name, fill in (("mine", 0.0), ("other", 1.0)):
        p = os.path.join(tmp, name + ".safetensors")
        stpt.save_file({"w": torch.full((6, 10), fill)}, p)
        paths.append(p)
    return paths


def close_and_reopen_in(monkeypatch, f, call, other):
    """Makes _pinio.`call` (a read or a load) first close the handle and open
    `other`, which takes the lowest descriptor number the close freed:
    what a close() and an open() in other threads do between the handle's
    check and its read. `call` "view": the handle's Source's view() (a
    read of its kept mapping). Returns the list the new descriptor lands in."""
    opened = []

    def race():
        if not opened:
            f.close()
            opened.append(os.open(other, os.O_RDONLY | os.O_CLOEXEC))

    if call == "view":
        src = f._src

        class Racing:
            def view(self, *args):
                race()
                return src.view(*args)

            def __getattr__(self, name):
                return getattr(src, name)

        monkeypatch.setattr(f, "_src", Racing())
        return opened
    real = getattr(_pinio, call)

    def racing(*args, **kw):
        race()
        return real(*args, **kw)

    monkeypatch.setattr(_pinio, call, racing)
    return opened


@pytest.mark.parametrize("framework,backend", [("pt", "mmap"), ("pt", "pread"), ("np", "mmap")])
@pytest.mark.parametrize("index", [slice(0, 4), 2, ...])
def test_a_slice_never_reads_a_descriptor_another_open_took(monkeypatch, two_files, framework,
                                                            backend, index):
    mine, other = two_files
    f = safe_open(mine, framework, backend=backend)
    s = f.get_slice("w")
    # backend mmap reads a whole tensor from the Source's kept mapping, rows by pread
    whole = backend == "mmap" and index is Ellipsis
    opened = close_and_reopen_in(monkeypatch, f, "view" if whole else "read", other)
    try:
        got = s[index]
    except SafetensorError as e:
        assert "closed" in str(e)  # a clean refusal, or ...
    else:
        assert not np.asarray(got).any(), "a slice holds another file's bytes"  # ... its own
    finally:
        for fd in opened:
            os.close(fd)
    assert opened, "the race was not run"


def test_metadata_never_reads_a_descriptor_another_open_took(monkeypatch, tmp):
    mine, other = os.path.join(tmp, "mine.safetensors"), os.path.join(tmp, "other.safetensors")
    stpt.save_file({"w": torch.zeros(4)}, mine)  # no __metadata__: metadata() is None
    stpt.save_file({"w": torch.zeros(4)}, other, metadata={})
    f = safe_open(mine, "pt")
    opened = close_and_reopen_in(monkeypatch, f, "read", other)
    try:
        assert f.metadata() is None
    except SafetensorError as e:
        assert "closed" in str(e)
    finally:
        for fd in opened:
            os.close(fd)


@pytest.mark.parametrize("call", ["get_tensor", "get_tensors", "prefetch"])
def test_a_load_the_handle_was_closed_under_fails_cleanly(monkeypatch, two_files, call):
    """A load whose handle another thread closed raises "File is closed",
    never an exception of the handle's internals (a closed Source's
    ValueError), never another file's bytes."""
    mine, other = two_files
    f = safe_open(mine, "pt")
    # get_tensor of a random key: a view of the Source's kept mapping
    opened = close_and_reopen_in(monkeypatch, f, "view" if call == "get_tensor" else "load",
                                 other)
    try:
        with pytest.raises(SafetensorError, match="File is closed"):
            getattr(f, call)(*(["w"] if call == "get_tensor" else []))
    finally:
        for fd in opened:
            os.close(fd)


# -- get_slice's indexing: None and Ellipsis as torch and numpy index, on
# every path (torch over the mapping, the narrowing path of numpy and of
# backend="pread", and a prefetched tensor or slice)

INDICES = [None, (None, 1), ..., (..., 2), (1, ...), (None, slice(0, 2)), (..., None),
           (slice(1, 3), None, 2), (None, ..., None), (2, ..., slice(3, 7)), ()]


def _ids(i):
    return repr(i).replace(" ", "")


@pytest.fixture
def w_file(tmp):
    p = os.path.join(tmp, "w.safetensors")
    w = torch.arange(60, dtype=torch.float32).reshape(6, 10)
    stpt.save_file({"w": w, "s": torch.tensor(7.0)}, p)
    return p, w


@pytest.mark.parametrize("framework", ["pt", "np"])
@pytest.mark.parametrize("backend", ["mmap", "pread"])
@pytest.mark.parametrize("prefetched", ["no", "whole", "plan"])
@pytest.mark.parametrize("index", INDICES, ids=_ids)
def test_none_and_ellipsis_index_as_torch_does(w_file, framework, backend, prefetched, index):
    path, w = w_file
    want = w.numpy()[index]
    with safe_open(path, framework, backend=backend) as f:
        if prefetched == "whole":
            f.prefetch(["w"])
        elif prefetched == "plan":
            f.prefetch({"w": index})
        got = f.get_slice("w")[index]
        again = f.get_slice("w")[index]
    for g in (got, again):
        assert list(g.shape) == list(want.shape), (index, list(g.shape))
        np.testing.assert_array_equal(np.asarray(g), want)


@pytest.mark.parametrize("framework", ["pt", "np"])
@pytest.mark.parametrize("backend", ["mmap", "pread"])
@pytest.mark.parametrize("prefetched", ["no", "whole"])
def test_a_scalar_and_negative_steps_on_every_path(w_file, framework, backend, prefetched):
    path, w = w_file
    with safe_open(path, framework, backend=backend) as f:
        if prefetched == "whole":
            f.prefetch()
        for index in (..., (), None, (None, ...)):
            got = f.get_slice("s")[index]
            want = np.float32(7.0)[index] if index is not None else np.array(7.0)[None]
            assert list(got.shape) == list(np.shape(want)), index
            assert float(np.asarray(got).reshape(-1)[0]) == 7.0
        # torch refuses a negative step (ValueError), upstream's narrowing
        # too (SafetensorError here): never a silently forward slice
        for index in (slice(None, None, -1), (slice(None), slice(None, None, -2))):
            with pytest.raises((ValueError, SafetensorError), match="step"):
                f.get_slice("w")[index]


# -- framework="np": every read is the caller's own array, as upstream's
# copies are (an edit never shows in the next read)

NP_READS = {
    "get_tensor": lambda f: f.get_tensor("w"),
    "slice rows": lambda f: f.get_slice("w")[0:2],
    "slice ...": lambda f: f.get_slice("w")[...],
    "scalar": lambda f: f.get_slice("s")[...],
    "scalar get_tensor": lambda f: f.get_tensor("s"),
    "get_tensors": lambda f: f.get_tensors()["w"],
    "tensor_stream": lambda f: dict(f.tensor_stream())["w"],
}


@pytest.mark.parametrize("backend", ["mmap", "pread"])
@pytest.mark.parametrize("how", ["lazy", "prefetch", "plan", "arena"])
@pytest.mark.parametrize("read", list(NP_READS))
def test_numpy_reads_are_the_callers_own(w_file, backend, how, read):
    import pinio

    if how == "plan" and read == "tensor_stream":
        pytest.skip("the plan's slices streamed and dropped: a second stream reads every "
                    "tensor whole (nothing is prefetched any more)")
    path, w = w_file
    get = NP_READS[read]
    kw = {"arena": pinio.Arena()} if how == "arena" else {}
    with safe_open(path, "np", backend=backend, **kw) as f:
        if how == "prefetch":
            f.prefetch()
        elif how == "plan":
            f.prefetch({"w": (slice(0, 2),), "s": None})
        a = get(f)
        want = np.array(a)
        a[...] = -1  # the caller's edit
        b = get(f)
        np.testing.assert_array_equal(b, want)
        assert b.flags.writeable  # as upstream's
    np.testing.assert_array_equal(want, w.numpy() if want.shape == (6, 10) else want)


# -- prefetch's memory: a prefetched tensor is the handle's until it was
# handed out (or prefetched again); then the caller's alone, freed when
# the caller drops it. A layer-by-layer loop holds about one layer.

LAYER = (256, 4096)  # 4 MiB of float32


def rss_kb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def mappings_of(path):
    with open("/proc/self/maps") as f:
        return sum(1 for line in f if line.rstrip().endswith(path))


@pytest.mark.parametrize("where", ["hot", "cold"])
def test_a_prefetch_loop_runs_in_bounded_memory(request, where):
    from conftest import drop_cache

    d = request.getfixturevalue("shm" if where == "hot" else "tmp")
    path = os.path.join(d, "layers.safetensors")
    stpt.save_file({f"l{i:02}.{k}": torch.full(LAYER, float(i)) for i in range(20)
                    for k in ("w", "b")}, path)
    layer = LAYER[0] * LAYER[1] * 4
    with safe_open(path, "pt") as f:
        rss0 = None
        for i in range(20):
            if where == "cold":
                drop_cache(path)  # read into pinned memory, not mapped
            f.prefetch({f"l{i:02}.w": None, f"l{i:02}.b": slice(0, 2)})
            w, b = f.get_tensor(f"l{i:02}.w"), f.get_slice(f"l{i:02}.b")[0:2]
            assert float(w[0, 0]) == i and float(b[1, 5]) == i
            del w, b  # the layer used: its memory is nobody's now
            # the handle keeps no run whose every tensor was handed out
            assert f.pinio_prefetch_bytes == 0, i
            assert mappings_of(path) <= 1, i  # hot: each run maps the file
            rss0 = rss_kb() if i == 1 else rss0
        assert rss_kb() - rss0 < 4 * layer // 1024, "20 layers' memory held"
        # prefetched again before it was handed out: the older run is released
        for _ in range(20):
            f.prefetch(["l00.w"])
            assert f.pinio_prefetch_bytes == layer and mappings_of(path) <= 1
        assert rss_kb() - rss0 < 4 * layer // 1024, "replaced runs held"
        assert float(f.get_tensor("l00.w")[3, 3]) == 0 and f.pinio_prefetch_bytes == 0
    assert mappings_of(path) == 0


def test_threads_handing_out_one_prefetch_let_it_go_once(tmp):
    import threading

    path = os.path.join(tmp, "m.safetensors")
    tensors = {f"t{i:02}": torch.full((64, 64), float(i)) for i in range(32)}
    stpt.save_file(tensors, path)
    with safe_open(path, "pt") as f:
        for _ in range(5):
            f.prefetch()
            got, errors = {}, []

            def work(names):
                try:
                    for n in names:
                        got[n] = f.get_tensor(n)
                except Exception as e:  # noqa: BLE001 (reported below)
                    errors.append(e)
            threads = [threading.Thread(target=work, args=(list(tensors)[k::4],))
                       for k in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert not errors, errors
            assert all(torch.equal(got[n], tensors[n]) for n in tensors)
            assert f.pinio_prefetch_bytes == 0
