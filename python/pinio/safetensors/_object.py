"""safe_open and load_file of an s3:// object (S3 and S3-compatible stores).

`safe_open("s3://BUCKET/KEY.safetensors", ...)` is a handle with the same
face as a file's (keys, offset_keys, metadata, get_tensor, get_slice,
get_tensors, prefetch, tensor_stream, context manager, device=); load_file
of such a URL loads the object in one engine run (pinio.load's path).

One handle, one object version. The header is fetched and validated at
open by the library's strict parser, through a plan that pins the object's
version (its ETag, or from a store that sends none its Last-Modified:
every request carries If-Match or If-Unmodified-Since and every answer's
validator and size are checked; an object that only its size pins is
asked again after each run of reads); every later read is one of that
plan's reads, so the bytes a handle serves all come from the object as it
was at open. An object replaced after open makes the next read raise
SafetensorError ("object changed while loading"), never a tensor of mixed
versions; bytes read before the change stay valid (they are of the opened
version).

Lazy, as a file's handle is: the open reads the header alone; get_tensor
reads the plan's reads (8 MiB each, 16 requests in flight) that cover the
tensor and, when keys are read in order, a read-ahead window after it
(16 MiB doubling to 256 MiB); get_tensors reads whatever is not read yet
in one engine run. The reads land at their offsets in one image of the
object (pinio._pinio.ObjectFile, a private anonymous mapping backed only
where bytes were read), which the handle keeps: no byte of the object is
read twice by one handle, whatever order its tensors are asked for in,
and every tensor is a zero-copy view of the image (the image lives while
any of them does). The price: the bytes a handle has read stay in memory
until the handle is closed and its tensors are gone (upstream's mapping
keeps them in the page cache, reclaimable; an object has no page cache).

Not for objects: arena= (pinned memory for a load of the whole file: use
load_file(url, arena=...)) and allocator= (device="cuda" copies each host
tensor to the device with .to()).
"""
import bisect as _bisect
import contextlib as _contextlib
import errno as _errno
import re as _re
import threading as _threading

import pinio as _pinio_pkg
from pinio import _pinio

from . import (_BACKENDS, SafetensorError, _device, _framework, _pinio_message, _prefetch,
               safe_open)

# Read-ahead of a handle read in order (bytes): the first window after a
# sequential read, and the most one window covers. The numbers of a file's
# handle: at 8 MiB a request and 16 in flight, 16 MiB is two requests and
# 256 MiB two rounds of 16.
_AHEAD_MIN = 16 << 20
_AHEAD_MAX = 256 << 20

_SUB_BYTE = ("F4", "F6_E2M3", "F6_E3M2")


def is_url(filename):
    """`filename` names an object (an s3://, gs:// or Azure URL, az:// or
    https://ACCOUNT.blob.core.windows.net/), not a file."""
    return isinstance(filename, str) and (
        filename.startswith(("s3://", "gs://", "az://")) or
        _re.match(r"https://[^./]+\.blob\.core\.windows\.net(/|$)", filename) is not None)


def _check_url(url):
    """safe_open and load_file read one object: a prefix or an index URL
    (a sharded checkpoint, which pinio.load takes) is refused by name."""
    key = url.partition("://")[2].partition("/")[2]
    if not key.endswith(".safetensors"):
        raise SafetensorError(
            f"{url}: safe_open and load_file read one object, s3://BUCKET/KEY.safetensors; "
            f"a prefix or an index URL (a sharded checkpoint) loads with pinio.load({url!r})")


def _error(url, e):
    """A pinio error about object `url` as the exception a file's handle
    raises for the same case: FileNotFoundError for a missing object or
    bucket (404), "Error while deserializing header" for an invalid
    header, SafetensorError otherwise; always naming the URL (the library
    names it in what it says about a request, not in a configuration
    error), never a credential (the library prints none)."""
    msg = _pinio_message(e)
    if url not in msg:
        msg = f"{url}: {msg}"
    if getattr(e, "pinio_error", "") == "PINIO_EFORMAT":
        return SafetensorError(f"Error while deserializing header: {msg}")
    if e.errno == _errno.ENOENT:
        return FileNotFoundError(msg)
    return SafetensorError(msg)


def load_whole(url, fw, *, backend="mmap", arena=None):
    """load_file of an object: {name: tensor} in file order, from one
    engine run (one plan: one object version), into pinned memory."""
    _check_url(url)
    try:
        raw = _pinio.load([url], backend=_BACKENDS[backend], arena=arena)
    except _pinio.Error as e:
        raise _error(url, e) from None
    ck = _pinio_pkg.Checkpoint(raw, fw)
    try:
        return ck.tensors()
    finally:
        ck.close()


class ObjectOpen(safe_open):
    """safe_open of an s3:// object (see the module's docstring); safe_open
    makes one for an s3:// URL. Its own: the open, the reads, metadata's
    header bytes; keys, offset_keys, get_slice, the context manager are
    safe_open's."""

    _kept = False  # no mapping of an object: a whole slice is read as any other

    def __init__(self, filename, framework, device="cpu", *, backend="mmap", allocator=None,
                 arena=None, prefetch=False):
        self._closed = True
        self._fw = _framework(framework)
        self._device = _device(device, self._fw)
        if allocator is not None:
            raise SafetensorError("allocator= places tensors on a cuda device only" if
                                  self._device == "cpu" else
                                  f"{filename}: allocator= is for files; an object's tensors "
                                  f"reach {self._device} by .to()")
        if arena is not None:
            raise SafetensorError(f"{filename}: arena= is for files; load an object into an "
                                  "arena with load_file(url, arena=...)")
        if backend not in _BACKENDS:
            raise SafetensorError(f"backend {backend} is invalid (mmap or pread)")
        self._backend = backend
        self._url = filename
        _check_url(filename)
        try:
            self._obj = _pinio.ObjectFile(filename)
            tensors, self._metadata, self._data_offset, _ = self._obj.header()
            reads = self._obj.reads()
        except _pinio.Error as e:
            raise _error(filename, e) from None
        self._info = {t[0]: t for t in tensors}  # name -> (name, dtype, shape, begin, end)
        self._order = [t[0] for t in tensors]
        self._sorted = sorted(self._info)
        self._at = ({n: i for i, n in enumerate(self._order)},
                    {n: i for i, n in enumerate(self._sorted)})
        self._starts = [r[0] for r in reads]
        self._ends = [r[0] + r[1] for r in reads]
        self._done = bytearray(len(reads))  # 1: read i is in the image
        self._image = memoryview(self._obj)  # tensors are slices of it
        self._last = None
        self._ahead = 0
        self._lock = _threading.Lock()  # threads share a handle: one read at a time
        self._prefetched = _prefetch.Prefetched()  # stays empty: the image serves (get_slice)
        self._planned = []  # prefetch's names, file order (tensor_stream)
        self._closed = False
        #: bytes this handle read from the object (the header excepted), the
        #: engine runs and the HTTP requests that read them: what tests count
        self.pinio_bytes_read = 0
        self.pinio_loads = 0
        self.pinio_requests = 0
        if prefetch:
            self.prefetch()

    def close(self):
        with self._lock:  # after a read another thread runs
            if not self._closed:
                self._obj.close()  # the plan and its connections; tensors keep the image
                self._image = None
            self._closed = True

    def _has_empty_metadata(self):
        """metadata()'s question (an empty __metadata__, or none?), from the
        header's bytes kept at open: no request."""
        import json

        with self._locked():  # close() frees the plan this reads from (GIL released)
            n = int.from_bytes(self._obj.read(0, 8), "little")
            return json.loads(self._obj.read(8, n)).get("__metadata__") == {}

    def get_tensor(self, name):
        t = self._entry(name)
        with self._locked():
            last, self._last = self._last, name
            if self._follows(name, last):
                self._ahead = min(max(2 * self._ahead, _AHEAD_MIN), _AHEAD_MAX)
            else:
                self._ahead = 0
            return self._own(self._place(self._host(t, self._ahead), name))

    def get_tensors(self):
        self._check()
        with self._locked():
            self._fetch(0, len(self._done))
            return {n: self._own(self._place(self._host(self._info[n]), n)) for n in self._order}

    def prefetch(self, plan=None):
        """Reads, in as few engine runs as the plan's ranges allow, the
        tensors `plan` names (None: all; {name: index}: the rows of the
        first dimension `index` selects, or the whole tensor; names:
        those tensors whole), so that get_tensor and get_slice of them
        read nothing more."""
        self._check()
        wanted = _prefetch.wanted_of(plan, self._order)
        spans = [self._span(self._entry(n), index) for n, index in wanted.items()]
        with self._locked():
            need = bytearray(len(self._done))
            for a, z in spans:
                if z > a:
                    i, j = self._reads_of(a, z)
                    need[i:j] = b"\1" * (j - i)
            self._fetch_marked(need)
        self._planned = [n for n in self._order if n in wanted or n in self._planned]

    def tensor_stream(self):
        """(name, tensor) of every prefetched tensor, in file order
        (prefetching every tensor first when nothing was)."""
        self._check()
        if not self._planned:
            self.prefetch()
        for n in list(self._planned):
            yield n, self.get_tensor(n)

    # -- get_slice's reads (_Slice)
    def _read(self, offset, length, whole=False):
        """Bytes [offset, offset + length) of the data section, a view of the
        image, whatever `whole` (a whole tensor's bytes) says."""
        self._check()
        a = self._data_offset + offset
        with self._locked():
            if length:
                self._fetch(*self._reads_of(a, a + length))
            return self._image[a:a + length]

    # -- the image
    @_contextlib.contextmanager
    def _locked(self):
        """The handle's lock, the handle still open (another thread may
        have closed it while this one waited)."""
        with self._lock:
            self._check()
            yield

    def _follows(self, name, last):
        """`name` comes right after `last` in file or in key order."""
        return last is not None and any(at[name] == at[last] + 1 for at in self._at)

    def _span(self, entry, index):
        """Absolute [begin, end) of the bytes get_slice(name)[index] needs:
        the rows of a box's first dimension, else the whole tensor."""
        _, dtype, shape, begin, end = entry
        a, z = self._data_offset + begin, self._data_offset + end
        b = None if index is None or not shape or dtype in _SUB_BYTE else \
            _prefetch.box(index, list(shape))
        if b is not None and shape[0]:
            row = (end - begin) // shape[0]
            return a + b[0][0] * row, a + b[1][0] * row
        return a, z

    def _reads_of(self, a, z):
        """[i, j): the reads covering absolute bytes [a, z), z > a."""
        return _bisect.bisect_right(self._ends, a), _bisect.bisect_left(self._starts, z)

    def _host(self, entry, ahead=0):
        """The tensor of `entry` in host memory, its reads (and `ahead`
        bytes after it) fetched first where they were not."""
        name, dtype, shape, begin, end = entry
        if end == begin:
            return _pinio_pkg.tensor_from_buffer(None, dtype, shape, self._fw, name)
        a, z = self._data_offset + begin, self._data_offset + end
        i, j = self._reads_of(a, max(z, a + ahead))
        self._fetch(i, j)
        return _pinio_pkg.tensor_from_buffer(self._image[a:z], dtype, shape, self._fw, name)

    def _place(self, t, name):
        if self._device == "cpu":
            return t
        try:
            return t.to(self._device)
        except (AssertionError, RuntimeError) as e:  # a torch without CUDA, or no such device
            raise SafetensorError(f"{self._url}: tensor {name} to {self._device}: {e}") from None

    def _fetch(self, i, j):
        """Reads [i, j) of the plan into the image, those not read yet."""
        need = bytearray(len(self._done))
        need[i:j] = b"\1" * (j - i)
        self._fetch_marked(need)

    def _fetch_marked(self, need):
        """Every read marked in `need` and not read yet, each run of them
        one engine run. A failed run leaves its reads unmarked: they are
        read again (of the same version) if asked for, never served."""
        i, n = 0, len(need)
        while i < n:
            if not need[i] or self._done[i]:
                i += 1
                continue
            j = i
            while j < n and need[j] and not self._done[j]:
                j += 1
            try:
                rep = self._obj.execute(i, j - i)
            except _pinio.Error as e:
                raise _error(self._url, e) from None
            self._done[i:j] = b"\1" * (j - i)
            self.pinio_bytes_read += rep["read_bytes"]
            self.pinio_requests += rep["requests"]
            self.pinio_loads += 1
            i = j


def object_class(cls):
    """The class safe_open makes for an object URL when asked for `cls`:
    ObjectOpen for safe_open itself; for a subclass of it (transformers'
    patch makes one that overrides get_slice) a class deriving from both,
    made once per subclass. Why not ObjectOpen there: Python runs __init__
    only on an instance of the class asked for, so a plain ObjectOpen came
    back uninitialised, and without the subclass's overrides."""
    if issubclass(cls, ObjectOpen):
        return cls
    if cls is safe_open:
        return ObjectOpen
    # kept on the subclass itself, not in a table here: a patch undone
    # drops its class, and this one with it
    both = cls.__dict__.get("_pinio_object_class")
    if both is None:
        both = type(cls.__name__, (cls, ObjectOpen), {"__module__": cls.__module__,
                                                     "__qualname__": cls.__qualname__})
        cls._pinio_object_class = both
    return both
