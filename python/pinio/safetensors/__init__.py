"""The `safetensors` API over pinio: replace `safetensors` by
`pinio.safetensors` in the imports and the program behaves the same.

What differs from upstream, and why:
- safe_open reads lazily, as upstream's mapping does: get_tensor() reads
  that tensor (plus a bounded read-ahead window when keys are read in
  order), get_tensors() the whole file in one engine run; a file in the
  page cache is mapped private (copy-on-write, as upstream maps it), a
  cold one read into pinned memory with O_DIRECT; tensors are zero-copy
  views either way. A key read out of order (and get_slice(k)[...]) is a
  view of one private mapping of the whole file the handle keeps, the
  file checked unchanged before it is handed out (its pages fault in at
  the first touch, as upstream's do): no engine run per key. get_slice() reads only the rows it needs (upstream's
  mmap touches only those pages; its pread backend reads the whole tensor).
- A FIFO, device or folder is refused at safe_open (upstream's open of a
  FIFO waits for a writer forever).
- A handle reads the file it opened and validated, through its descriptor:
  a file renamed over or unlinked after safe_open is still read as it was,
  and one rewritten in place (another size or modification time) makes the
  next read raise SafetensorError "file changed since its header was
  validated" (upstream's mapping shows the new bytes under the old header,
  or dies of SIGBUS when the file shrank).
- numpy arrays from load_file are zero-copy views of memory of their
  own; a safe_open handle's (get_tensor, get_slice, get_tensors,
  tensor_stream) are copies, as upstream's are: each read is the caller's
  own writable array, and an edit of one never shows in the next read.
  (torch tensors of a handle are views, as upstream's views of its one
  private mapping: an edit shows in the next get_tensor of that tensor.)
- frameworks: pt and np only (tf, flax, mlx, paddle raise SafetensorError);
  devices: cpu and cuda[:N] (musa, npu, xpu, xla, mlu, hpu, mps: SafetensorError).
  cuda goes through pinio's CUDA sink (torch.empty on the device, filled
  from pinned staging, synchronised) where upstream copies into a pinned
  CPU tensor and calls .to(device); with a CPU-only torch the error is
  pinio's SafetensorError naming what is missing at the first get_tensor
  (upstream: torch's AssertionError "Torch not compiled with CUDA enabled").
  get_slice on cuda streams the whole tensor once per slice object and
  indexes it on the device (upstream: rows on the CPU, then .to(device)).
- get_slice on the numpy (and pread) path honours slice steps; upstream
  silently ignores them. It takes an Ellipsis (full slices) and None (a new
  axis) as torch and numpy index, on every path, a prefetched tensor's
  included; upstream's narrowing raises TypeError for both.
- Metadata keys are written in the dict's order (upstream's is a hash map's).
- prefetch(plan) (0.9) works on every device and backend (upstream's needs
  backend="pread", framework pt and CUDA). As upstream's engine, the handle
  lets go of a prefetch's memory once each of its tensors was handed out
  (the caller's tensors keep it, and are served again while the caller
  holds them; a tensor dropped is read again).
- safe_open and load_file take an s3:// object, s3://BUCKET/KEY.safetensors
  (upstream: local files only); see pinio.safetensors._object.
"""
import bisect as _bisect
import contextlib as _contextlib
import errno as _errno
import operator as _operator
import os as _os
import stat as _stat
import threading as _threading

import pinio as _pinio_pkg
from pinio import _pinio

from . import _prefetch

__version__ = "0.9.0"  # the upstream API level this module follows (0.9: prefetch(plan))

__all__ = [
    "SafetensorError", "TensorSpec", "safe_open", "serialize", "serialize_file", "deserialize",
    "__version__",
]


class SafetensorError(Exception):
    """Upstream's exception type, for every error upstream raises it for."""


SafetensorError.__module__ = "pinio.safetensors"

_UPSTREAM_FRAMEWORKS = {"tf", "tensorflow", "jax", "flax", "mlx", "paddle"}
_DEVICE_KINDS = ("cuda", "musa", "npu", "xpu", "xla", "mlu", "hpu", "mps")
_BACKENDS = {"mmap": "auto", "pread": "pread"}

# TensorSpec dtype names (numpy/torch style) -> safetensors codes
_SPEC_DTYPES = {
    "bool": "BOOL", "int8": "I8", "uint8": "U8", "int16": "I16", "uint16": "U16",
    "int32": "I32", "uint32": "U32", "int64": "I64", "uint64": "U64", "float16": "F16",
    "float32": "F32", "float64": "F64", "bfloat16": "BF16", "float8_e4m3fn": "F8_E4M3",
    "float8_e4m3fnuz": "F8_E4M3FNUZ", "float8_e5m2": "F8_E5M2", "float8_e5m2fnuz": "F8_E5M2FNUZ",
    "float8_e8m0fnu": "F8_E8M0", "float4_e2m1fn_x2": "F4", "complex64": "C64",
}


def _framework(framework):
    fw = _pinio_pkg.FRAMEWORKS.get(framework)
    if fw is None:
        if framework in _UPSTREAM_FRAMEWORKS:
            raise SafetensorError(f"framework {framework} is not supported by pinio.safetensors")
        raise SafetensorError(f"framework {framework} is invalid")
    return fw


def _device(device, fw):
    if isinstance(device, int) and not isinstance(device, bool):
        device = f"cuda:{device}"
    elif not isinstance(device, str):
        device = str(device)  # torch.device
    kind, colon, idx = device.partition(":")
    valid = device == "cpu" or (kind in _DEVICE_KINDS and (not colon or idx.isdigit()))
    if not valid:
        raise SafetensorError(f"device {device} is invalid")
    if device == "cpu":
        return device
    if fw != "pt":
        raise SafetensorError(f"Device {device} is not supported for framework {fw}")
    if kind != "cuda":
        raise SafetensorError(f"device {device}: pinio.safetensors loads to cpu and cuda only")
    return f"cuda:{idx or 0}"


def _free_memory():
    """Bytes of memory free now (0 when the system does not say)."""
    try:
        return _os.sysconf("SC_AVPHYS_PAGES") * _os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return 0


def _pinio_message(e):
    return e.strerror if isinstance(e, OSError) and e.strerror else str(e)


# Read-ahead of a safe_open handle read in order: the first window after a
# sequential read, and the most one window covers (bytes).
_AHEAD_MIN = 16 << 20
_AHEAD_MAX = 256 << 20
# ... and when the last window was mapped (the file is in the page cache):
# the next one covers this much at once. A window costs a header parse and
# a selection over every tensor of the file, whatever its size (at 20,000
# tensors, 9 windows were half of a per-key read of every tensor); a
# mapping reads nothing and pins nothing, and upstream maps the whole file.
# Such a window is loaded mapped whatever the page cache holds by then: a
# file evicted between two windows would otherwise be read into up to
# 8 GiB of pinned memory by a handle whose user asked for one tensor at a
# time (mapped, its pages are the page cache's, reclaimable).
_AHEAD_MAPPED = 8 << 30


def _open_regular(path):
    """A descriptor of `path`, the one file a handle reads from then on.
    O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused
    after, as every non-regular file is)."""
    try:
        fd = _os.open(path, _os.O_RDONLY | _os.O_CLOEXEC | _os.O_NONBLOCK)
    except OSError:
        # upstream: any File::open failure, with this text
        raise FileNotFoundError(f"No such file or directory: {path}") from None
    mode = _os.fstat(fd).st_mode
    if not _stat.S_ISREG(mode):
        _os.close(fd)
        kind = ("a directory" if _stat.S_ISDIR(mode) else "a FIFO" if _stat.S_ISFIFO(mode)
                else "a socket" if _stat.S_ISSOCK(mode) else "a device")
        raise SafetensorError(f"Error while deserializing header: {path} is {kind}, not a "
                              "regular file")
    return fd


class _File:
    """A handle's open file: its descriptor, which close() gives back to the
    system only once no read is using it. A read holds the file (use())
    from before it names the descriptor until it is done: a descriptor
    number closed under a read in flight would be the next open()'s, in
    any thread, and the read would return that file's bytes."""

    __slots__ = ("fd", "byfd", "_users", "_closing", "_lock")

    def __init__(self, fd):
        self.fd = fd
        # /proc/self/fd/N opens the very file this descriptor is (without
        # /proc the path is used, and the library checks the file did not
        # change under it)
        self.byfd = _os.path.exists(f"/proc/self/fd/{fd}")
        self._users = 0
        self._closing = False
        self._lock = _threading.Lock()

    @_contextlib.contextmanager
    def use(self):
        """The descriptor, held open until the block ends; SafetensorError
        "File is closed" once close() was called."""
        with self._lock:
            if self._closing:
                raise SafetensorError("File is closed")
            self._users += 1
        try:
            yield self.fd
        finally:
            with self._lock:
                self._users -= 1
                self._release()

    def close(self):
        with self._lock:
            self._closing = True
            self._release()

    def _release(self):
        if self._closing and not self._users and self.fd >= 0:
            _os.close(self.fd)
            self.fd = -1


class safe_open:
    """safe_open(filename, framework, device="cpu", *, backend="mmap", allocator=None, arena=None)

    A context manager (it works without `with` too) over one safetensors
    file: keys(), offset_keys(), metadata(), get_tensor(), get_tensors(),
    get_slice(). `backend="pread"` reads through the engine's pread rung.

    One handle reads one file: the one opened and validated here, through
    its descriptor, whatever the path names later. close() from another
    thread gives the descriptor back once the reads in flight are done
    (they return this file's bytes); a read after it raises
    SafetensorError "File is closed".

    Lazy, as upstream's mapping is: get_tensor() reads that tensor's bytes
    (and, when the keys are read in order, a read-ahead window of the next
    ones in that order, 16 MiB doubling to 256 MiB, each window one engine
    run), so a few tensors of a file larger than memory cost about their
    own bytes. Once a handle read in key order has read an eighth of the
    file, a window whose tensors lie spread over the file (names that
    sort apart from their places) reads the whole file in one run
    instead, when it fits in half the free memory: one small read per
    tensor is what such a window would cost, and key order reaches every
    byte anyway. get_tensors() reads the whole file in one engine run.

    device="cuda[:N]" (framework pt): tensors stream through pinio's CUDA
    sink into tensors torch allocates, synchronised before they are
    returned; get_tensors() is one stream, get_tensor() one per call.
    allocator (pinio's own keyword, pinio.load_to_device()) replaces
    torch.empty for that.

    arena (pinio's own keyword, device cpu): a pinio.Arena whose pinned
    memory the load reuses: the whole file is then read at the first
    get_tensor(), into it; a load while tensors of the arena's previous
    load are alive raises SafetensorError (nothing is overwritten).

    prefetch(plan) (upstream 0.9): declares the tensors and slices the
    handle will be asked for and reads them in one engine run; get_slice
    with the plan's index, and get_tensor of a tensor prefetched whole,
    then read nothing (see pinio.safetensors._prefetch). prefetch=True
    prefetches every tensor at open (0.9's first form of the API)."""

    def __new__(cls, filename, *args, **kwargs):
        from . import _object

        if _object.is_url(filename):  # an object: the subclass that reads one
            cls = _object.object_class(cls)
        return super().__new__(cls)

    def __init__(self, filename, framework, device="cpu", *, backend="mmap", allocator=None,
                 arena=None, prefetch=False):
        self._closed = True
        self._file = None
        self._fw = _framework(framework)
        self._device = _device(device, self._fw)
        if allocator is not None and self._device == "cpu":
            raise SafetensorError("allocator= places tensors on a cuda device only")
        self._allocator = allocator
        if arena is not None and self._device != "cpu":
            raise SafetensorError(f"arena= is pinned host memory: device {self._device} streams "
                                  "through a staging ring of its own")
        self._arena = arena
        if backend not in _BACKENDS:
            raise SafetensorError(f"backend {backend} is invalid (mmap or pread)")
        self._backend = backend
        self._path = _os.fspath(filename)
        self._file = _File(_open_regular(self._path))
        # Every later read names the file by its descriptor, held open by
        # the read (_File.use): the kernel opens the very file this handle
        # validated.
        self._fdpath = self._fdpath_of(self._file.fd)
        try:
            # The file opened and its header validated once: every later
            # load of it (windows, get_tensors, prefetch) is derived from
            # this one, with no header read or parsed again (three parses
            # were a third of a per-key read at 20,000 tensors).
            self._src = _pinio.Source(self._fdpath)
            tensors, self._metadata, self._data_offset, _ = self._src.header()
        except _pinio.Error as e:
            self._file.close()
            msg = _pinio_message(e).replace(self._fdpath, self._path)
            raise SafetensorError(f"Error while deserializing header: {msg}") from None
        self._info = {t[0]: t for t in tensors}  # name -> (name, dtype, shape, begin, end)
        self._data_bytes = max((t[4] for t in tensors), default=0)
        self._order = [t[0] for t in tensors]
        self._sorted = sorted(self._info)
        self._at = {"key": {n: i for i, n in enumerate(self._sorted)},
                    "offset": {n: i for i, n in enumerate(self._order)}}
        # the two orders' places, for _successor: a loop over _at's items
        # cost ~5 us of a random get_tensor's ~30 us (hot, 20,000 tensors)
        self._at_key, self._at_offset = self._at["key"], self._at["offset"]
        self._ckpt = None        # the whole file (arena=)
        self._window = None      # the read-ahead window's checkpoint
        self._last = None        # the name get_tensor() read last
        self._ahead = 0          # the next window's size (bytes)
        self._mapped = False     # the last window was mapped, not read
        # Random accesses and slices (backend mmap) are views of the Source's
        # kept private mapping of the whole file (False once it could not be
        # made: windows then, as backend pread has)
        self._kept = backend == "mmap"
        # threads share a handle: one window at a time; close() takes it too
        # (reentrant: a close from inside a load, an allocator's, waits for none)
        self._lock = _threading.RLock()
        self._closed = False
        #: bytes this object read from the file (headers excepted), and the
        #: engine runs and views of the kept mapping that read them: what
        #: tests count
        self.pinio_bytes_read = 0
        self.pinio_loads = 0
        self._how = set()  # how its bytes came (pinio._how's words): pinio_how
        self._prefetched = _prefetch.Prefetched()
        if prefetch:
            self.prefetch()

    # -- context manager
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def _fdpath_of(self, fd):
        """The path by which the library opens this handle's file while a
        read holds `fd`."""
        return f"/proc/self/fd/{fd}" if self._file.byfd else self._path

    def close(self):
        self._closed = True  # first: a read starting now is refused, not begun
        self._file.close()  # after the reads in flight
        self._src.close()  # likewise (a load through it holds it)
        with self._lock:  # a tensor being made from the window is made first
            for ck in (self._ckpt, self._window):
                if ck is not None:
                    ck.close()  # tensors handed out keep their own references
            self._ckpt = self._window = None
        self._prefetched.close()

    def __del__(self):
        f = getattr(self, "_file", None)
        if f is not None:
            f.close()

    def _check(self):
        if self._closed:
            raise SafetensorError("File is closed")

    def _entry(self, name):
        self._check()
        t = self._info.get(name)
        if t is None:
            raise SafetensorError(f"File does not contain tensor {name}")
        return t

    def _own(self, t):
        """What a read hands out: for numpy, the caller's own copy (upstream
        copies every numpy read; the handle hands the same memory out again,
        from its window, arena or prefetch); torch tensors as they are."""
        return t.copy() if self._fw == "np" else t

    def _error(self, e):
        """A pinio error as upstream's type, naming the path, not the
        descriptor; any error of a handle another thread closed meanwhile
        (its Source refuses a load: ValueError) is "File is closed"."""
        if self._closed:
            return SafetensorError("File is closed")
        if not isinstance(e, _pinio.Error):
            return e
        return SafetensorError(_pinio_message(e).replace(self._fdpath, self._path))

    # -- upstream's methods
    def keys(self):
        self._check()
        return list(self._sorted)

    def offset_keys(self):
        self._check()
        return list(self._order)

    def metadata(self):
        self._check()
        if self._metadata is None:
            # None when the header has no __metadata__; {} when it has an
            # empty one (upstream's two answers; pinio's parser counts both 0).
            return {} if self._has_empty_metadata() else None
        return dict(self._metadata)

    def _has_empty_metadata(self):
        import json

        with self._file.use() as fd:
            n = int.from_bytes(bytes(_pinio.read(fd, 0, 8)), "little")
            header = json.loads(bytes(_pinio.read(fd, 8, n)))
        return header.get("__metadata__") == {}

    def _load(self, names=None, memory="auto"):
        """A Checkpoint of `names` (None: all), read in one engine run."""
        return _pinio_pkg.Checkpoint(self._load_counted(names, memory), self._fw)

    def _load_counted(self, names, memory):
        """The raw checkpoint of `names` (None: all), one engine run, counted."""
        filters = None if names is None else [self._filter_for(n) for n in names]
        if self._arena is not None:
            memory = "auto"  # an arena is pinned memory: every file read into it
        try:
            # hot files mapped private, as upstream maps them (writable,
            # copy-on-write), cold ones read pinned with O_DIRECT
            raw = self._load_raw(filters=filters, backend=_BACKENDS[self._backend],
                                 arena=self._arena, memory=memory)
        except (_pinio.Error, ValueError) as e:
            raise self._error(e) from None
        rep = raw.report()
        self.pinio_bytes_read += rep["read_bytes"]
        self._how |= _pinio_pkg._how(rep)
        self._mapped = rep["files_mapped"] > 0
        self.pinio_loads += 1
        return raw

    def _load_raw(self, **kw):
        """_pinio.load of this handle's file, without reading its header again."""
        return _pinio.load(None, source=self._src, **kw)

    def _checkpoint(self):
        if self._ckpt is None:
            self._ckpt = self._load()
        return self._ckpt

    def _successor(self, name, last):
        """The order ("key" or "offset") in which `name` follows `last`, the
        tensor read before it, or None (a random access)."""
        if last is not None:
            at = self._at_key
            if at[name] == at[last] + 1:
                return "key"
            at = self._at_offset
            if at[name] == at[last] + 1:
                return "offset"
        return None

    def _from_window(self, name, entry):
        """`name` (its header row `entry`) read lazily: from the read-ahead
        window, else a new window from `name` on (just `name` after a
        random access). The hot path is inline: at 20,000 tensors each
        Python call on it cost ~1 % of a per-key read of every tensor."""
        with self._lock:
            last, self._last = self._last, name
            w = self._window
            if w is not None:
                i = w.index.get(name)
                if i is not None:  # one lookup, then the tensor
                    tdt = _PT_DTYPES.get(entry[1]) if self._fw == "pt" else None
                    if tdt is not None and entry[4] > entry[3]:  # _tensor_of's first case
                        return _PT_DTYPES[None](w.raw.buffer(i), dtype=tdt).reshape(entry[2])
                    return self._own(_tensor_of(w.raw, i, name, entry[1], entry[2],
                                                entry[4] - entry[3], self._fw))
            if not self._kept or self._successor(name, last) is not None:
                return self._own(self._new_window(name, entry, last))
        # A random access: a view of the kept mapping, outside the lock, so
        # threads bring their tensors in side by side. An engine run per
        # such key (a window of one tensor) cost 4.5 ms at 20,000 tensors
        # (0.03x a plain mmap loader hot, reading every 50th key).
        t = self._view_tensor(name, entry)
        if t is False:  # no mapping to be had: a window, as before
            with self._lock:
                return self._own(self._new_window(name, entry, last))
        return t

    def _view_tensor(self, name, entry):
        """The tensor `name` (its header row `entry`) as a view of the kept
        mapping, or False when the file cannot be mapped."""
        buf = self._view(entry[3], entry[4] - entry[3]) if entry[4] > entry[3] else None
        if buf is False:
            return False
        tdt = _PT_DTYPES.get(entry[1]) if self._fw == "pt" else None
        if tdt is not None and buf is not None:
            return _PT_DTYPES[None](buf, dtype=tdt).reshape(entry[2])
        t = _pinio_pkg.tensor_from_buffer(buf, entry[1], entry[2], self._fw, name)
        if buf is not None and self._fw == "pt" and entry[1] not in _pinio_pkg._QUANTIZED:
            _PT_DTYPES[entry[1]] = t.dtype  # as _tensor_of caches them: looked up once
            _PT_DTYPES[None] = _pinio_pkg._torch_frombuffer()
        return self._own(t)

    def _view(self, offset, length):
        """Bytes [offset, offset + length) of the data section, zero-copy
        over the kept private mapping (as upstream's tensors are views of
        its mapping), the file checked against the validated one; False
        when the file cannot be mapped (an address-space limit below its
        size): the caller reads it another way."""
        self._check()
        try:
            buf, resident = self._src.view(self._data_offset + offset, length)
        except ValueError:  # the Source closed meanwhile
            raise SafetensorError("File is closed") from None
        except _pinio.Error as e:
            if e.errno in (_errno.ENOMEM, _errno.EINVAL, _errno.ENODEV, _errno.EOVERFLOW) and \
                    getattr(e, "pinio_error", "") != "ECHANGED":
                self._kept = False
                return False
            raise self._error(e) from None
        # as a mapped window, the page cache's bytes are not counted as read;
        # but a view says nothing of the rest of the file, so it leaves the
        # next window's size and memory to the engine's run of it: the
        # header's read-ahead makes a cold file's first tensors resident,
        # and taking that for a hot file mapped the whole file at the next
        # key in file order and populated it from the disk (20,000 tensors,
        # every 2nd key in key order, cold: twice the bytes asked for read,
        # 0.33x a plain mmap handle)
        self._how.add("mapped" if resident else "read")
        if not resident:
            self.pinio_bytes_read += length
        self.pinio_loads += 1
        return buf

    def _new_window(self, name, entry, last):
        order = self._successor(name, last)
        if order is None:
            self._ahead, order = 0, "key"
        elif self._mapped:
            self._ahead = max(2 * self._ahead, _AHEAD_MAPPED)
        else:
            self._ahead = min(max(2 * self._ahead, _AHEAD_MIN), _AHEAD_MAX)
        if self._mapped and self._data_bytes <= self._ahead:
            want = None  # the whole file: no filter to build, none to match
        else:
            want = self._window_names(name, order)
            if not self._mapped and order == "key" and self._scanning() and \
                    self._scattered(want) and self._data_bytes <= _free_memory() // 2:
                want = None  # read once, in one run, what key order reaches anyway
        if self._window is not None:
            self._window.close()  # its tensors keep their own references
            self._window = None
        hot = self._resident(want)
        raw = self._load_counted(want, "mapped" if self._ahead > _AHEAD_MAX else "auto")
        if hot is False:
            # mapped but read in from the disk (the engine maps a cold file
            # where the first touch of fresh memory is the slower path): not
            # the hot file whose next window may map it all, populating
            # every byte, the unasked ones too
            self._mapped = False
        # The whole file: its tensors are the header's, in its order (the
        # handle's offset index); else the window's own names.
        whole = want is None and len(raw) == len(self._order)
        w = _Window(raw, self._at["offset"] if whole else raw.index())
        i = w.index.get(name)
        if i is None:  # cannot happen to a validated descriptor; never a wrong tensor
            w.close()
            raise SafetensorError(f"File does not contain tensor {name}")
        self._window = w
        return _tensor_of(raw, i, name, entry[1], entry[2], entry[4] - entry[3], self._fw)

    def _resident(self, names):
        """Whether the file bytes `names` span (None: all of them) are all in
        the page cache now, before a window reads them; None when that is
        not known (no kept mapping to ask, or nothing to span)."""
        if not self._kept:
            return None
        if names is None:
            lo, hi = 0, self._data_bytes
        else:
            ents = [self._info[n] for n in names]
            lo, hi = min(e[3] for e in ents), max(e[4] for e in ents)
        if hi <= lo:
            return None
        try:
            return self._src.view(self._data_offset + lo, hi - lo)[1]
        except (ValueError, _pinio.Error):  # closed, changed: the load says so
            return None

    def _window_names(self, name, order):
        """`name` and the names after it in `order`, up to the window's size."""
        names = self._sorted if order == "key" else self._order
        i = self._at[order][name]
        want, size = [name], self._nbytes(name)
        for n in names[i + 1:]:
            size += self._nbytes(n)
            if size > self._ahead:
                break
            want.append(n)
        return want

    def _scanning(self):
        """The handle is reading its file through, not a few tensors: what it
        read and the next window reach an eighth of the file's data (a
        handle asked for two neighbouring keys of a large file reads their
        window, not the file)."""
        return 8 * (self.pinio_bytes_read + self._ahead) >= self._data_bytes

    def _scattered(self, names):
        """The window `names` (key order) lies spread over the file: their
        bytes are under half the file range they span. Read as asked, such
        a window is one small read per tensor (a 2 GiB file of 20,000
        tensors whose names sort apart from their places took 2.5 s cold
        in 16-256 MiB windows, 0.8 s read whole); and a handle read in key
        order reads every such range by the end anyway."""
        if len(names) < 2:
            return False
        ents = [self._info[n] for n in names]
        span = max(e[4] for e in ents) - min(e[3] for e in ents)
        return 2 * sum(e[4] - e[3] for e in ents) < span

    def _filter_for(self, name):
        """The filter selecting `name` alone. A name no other name extends
        with a '.' is its own filter: the library matches plain names by
        lookup, where a glob costs an fnmatch per tensor per pattern (a
        window of thousands of names in a 20,000-tensor file took 18 s)."""
        child = name + "."
        i = _bisect.bisect_left(self._sorted, child)
        extended = i < len(self._sorted) and self._sorted[i].startswith(child)
        if extended or name.endswith(".") or any(c in "*?[" for c in name):
            return _exact_pattern(name)
        return name

    def _nbytes(self, name):
        t = self._info[name]
        return t[4] - t[3]

    def _to_device(self, names=None):
        """{name: tensor} of `names` (None: all) streamed to the device."""
        filters = None if names is None else [self._filter_for(n) for n in names]
        try:
            with self._file.use() as fd:
                tensors, rep = _pinio_pkg.load_to_device(
                    [self._fdpath_of(fd)], filters, self._device, allocator=self._allocator,
                    backend=_BACKENDS[self._backend])
        except _pinio.Error as e:
            raise self._error(e) from None
        self.pinio_bytes_read += rep["read_bytes"]
        self._how |= _pinio_pkg._how(rep)
        return tensors

    def prefetch(self, plan=None):
        """Reads, in one engine run, what `plan` declares (None: every tensor
        whole; {name: index}: the slice get_slice(name)[index] selects;
        names: those tensors whole); see pinio.safetensors._prefetch."""
        _prefetch.prefetch(self, plan)

    def tensor_stream(self):
        """(name, tensor) of every prefetched tensor, in file order
        (prefetching every tensor first when nothing was)."""
        return _prefetch.tensor_stream(self)

    @property
    def pinio_how(self):
        """How the bytes this handle handed out came (pinio's own): "read"
        (from the file), "shared", "mapped" (the page cache mapped in
        place), joined by "+"; "" before any read."""
        # an object's handle (_object) reads every byte it hands out
        return _pinio_pkg._how_text(getattr(self, "_how", {"read"}))

    @property
    def pinio_prefetch_bytes(self):
        """Bytes of prefetched tensors this handle holds until they are
        handed out (see pinio.safetensors._prefetch): what tests count."""
        return self._prefetched.held_bytes()

    def get_tensor(self, name):
        entry = None if self._closed else self._info.get(name)
        if entry is None:
            entry = self._entry(name)  # raises: closed, or no such tensor
        if self._prefetched.tensors:
            t = self._prefetched.whole(name, self._info[name][2])
            if t is not None:
                return self._own(t)
        if self._device != "cpu":
            t = self._to_device([name]).get(name)
            if t is None:
                raise SafetensorError(f"File does not contain tensor {name}")
            return t
        if self._arena is not None:
            return self._own(self._checkpoint()[name])
        return self._from_window(name, entry)

    def get_tensors(self):
        self._check()
        if self._device != "cpu":
            d = self._to_device()
            return {n: d[n] for n in self._order if n in d}
        if self._arena is not None:
            ck = self._checkpoint()
            return {n: self._own(ck[n]) for n in self._order}
        ck = self._load()
        try:
            return ck.tensors()  # the whole file: every name, in file order
        finally:
            ck.close()

    def get_slice(self, name):
        return _Slice(self, self._entry(name))

    def _read(self, offset, length, whole=False):
        """Bytes [offset, offset + length) of the data section (GIL released):
        of a `whole` tensor, a view of the kept mapping (backend mmap), else
        a pread of their own."""
        if whole and self._kept and self._device == "cpu":
            buf = self._view(offset, length)
            if buf is not False:
                return buf
        self._check()
        with self._file.use() as fd:
            buf = _pinio.read(fd, self._data_offset + offset, length)
        self.pinio_bytes_read += length
        self._how.add("read")
        return buf


_tensor_of = _pinio_pkg._tensor_of
_PT_DTYPES = _pinio_pkg._PT_DTYPES  # the same dict: torch dtypes, and frombuffer at None


class _Window:
    """A read-ahead window of safe_open: the raw checkpoint of one engine
    run and {name: index} of its tensors. Its tensors are made from the
    handle's header, so no per-tensor row is built (at 20,000 tensors, the
    rows of the window covering the whole file cost more than a tenth of a
    per-key read of every tensor)."""

    __slots__ = ("raw", "index")

    def __init__(self, raw, index):
        self.raw = raw
        self.index = index

    def report(self):
        return self.raw.report()

    def close(self):
        self.raw.close()  # tensors handed out keep their own references


def _load_whole(filename, framework, *, backend="mmap", arena=None, report=None):
    """load_file's CPU path: {name: tensor} of the whole file, in file order,
    as safe_open(...).get_tensors() returns it, from one engine run whose
    plan parses the header once (safe_open's own parse then the load's was
    a third of load_file's instructions at 20,000 tensors). The errors are
    safe_open's: the same checks first, and a failed load names the header
    when the header is what failed. `report`, a dict: filled with the load's
    report (pinio.Checkpoint.report(), the tensors made)."""
    fw = _framework(framework)
    if backend not in _BACKENDS:
        raise SafetensorError(f"backend {backend} is invalid (mmap or pread)")
    from . import _object

    if _object.is_url(filename):  # an s3:// object: one engine run of its own
        return _object.load_whole(filename, fw, backend=backend, arena=arena)
    path = _os.fspath(filename)
    fd = _open_regular(path)
    try:
        fdpath = f"/proc/self/fd/{fd}"
        if not _os.path.exists(fdpath):
            fdpath = path
        try:
            raw = _pinio.load([fdpath], backend=_BACKENDS[backend], arena=arena)
        except _pinio.Error as e:
            try:  # the header alone: upstream's message when it is at fault
                _pinio.header(fd, path)
            except _pinio.Error as he:
                raise SafetensorError("Error while deserializing header: "
                                      f"{_pinio_message(he)}") from None
            raise SafetensorError(_pinio_message(e).replace(fdpath, path)) from None
    finally:
        _os.close(fd)
    ck = _pinio_pkg.Checkpoint(raw, fw)
    try:
        out = ck.tensors()
        if report is not None:
            report.update(ck.report())
        return out
    finally:
        ck.close()


def _safe_open_handle(f, framework, device="cpu", *, backend="mmap", allocator=None):
    """safe_open over an open file object (anything with .name), reopened by
    name as upstream does."""
    return safe_open(f.name, framework, device, backend=backend, allocator=allocator)


def _exact_pattern(name):
    """A pinio filter selecting `name` alone: a pattern without glob
    characters also selects dotted children ("a.b" selects "a.b.c"), so
    the name is made a glob matching itself (fnmatch, backslash escapes)."""
    toks = ["\\" + c if c in "*?[]\\" else c for c in name]
    if not any(c in "*?[" for c in name):  # not a glob yet: bracket one ordinary character
        for i, c in enumerate(name):
            if c.isalnum() or c in "._-/":
                toks[i] = f"[{c}]"
                break
        else:  # nothing to bracket: the plain name (dotted children, if any,
            return name  # are streamed too and dropped by the caller)
    return "".join(toks)


def _as_int(x):
    """`x` as an int when it is an integer index (int, numpy integers,
    anything with __index__ that is not an array or tensor: upstream's
    extraction accepts them), else None. bool is not an index."""
    if isinstance(x, bool) or hasattr(x, "ndim") and not _numbers_integral(x):
        return None
    if isinstance(x, int):
        return x
    if hasattr(type(x), "__index__"):
        return _operator.index(x)
    return None


def _numbers_integral(x):
    import numbers

    return isinstance(x, numbers.Integral)


def _index_items(index):
    if not isinstance(index, tuple):
        index = (index,)
    return index


def _expand(index, ndim):
    """`index` as a tuple in which its Ellipsis (one at most, as torch and
    numpy allow) is replaced by a full slice of each dimension it stands
    for; None stays where it is (a new axis of the result)."""
    items = _index_items(index)
    at = [i for i, it in enumerate(items) if it is Ellipsis]
    if not at:
        return items
    if len(at) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = sum(1 for it in items if it is not None and it is not Ellipsis)
    return items[:at[0]] + (slice(None),) * max(0, ndim - used) + items[at[0] + 1:]


def _with_new_axes(items):
    """The index that puts the None axes of `items` into the result of
    `items` without them (an int's dimension is gone from that result)."""
    return tuple(None if it is None else slice(None) for it in items
                 if it is None or _as_int(it) is None)


_FULL = slice(None)  # x[:], as x[...] of a tensor of one dimension or more: all of it


class _Slice:
    """get_slice()'s object: get_shape(), get_dtype(), and [] reading only
    the rows of the first dimension that the index covers."""

    def __init__(self, f, entry):
        self._f = f
        self._name, self._dtype, shape, self._begin, self._end = entry
        self._shape = list(shape)
        self._dev = None  # the whole tensor on the device (device != "cpu")

    def get_shape(self):
        return list(self._shape)

    def get_dtype(self):
        return self._dtype

    def __len__(self):
        if not self._shape:
            raise TypeError("len() of a 0-d tensor")
        return self._shape[0]

    def _rows(self, lo, hi):
        """A tensor of rows [lo, hi) of the first dimension, read alone."""
        shape = [hi - lo] + self._shape[1:]
        nbytes = self._end - self._begin
        if self._f._prefetched.tensors:  # rows of a tensor prefetched whole: no read
            w = self._f._prefetched.whole(self._name, self._shape)
            if w is not None:
                return w[lo:hi] if self._shape else w
        if not self._shape or self._shape[0] == 0:
            lo, hi, row = 0, 0, 0
        else:
            row = nbytes // self._shape[0]
        if self._f._device != "cpu":  # the tensor streams to the device whole, once
            return self._on_device()[lo:hi]
        length = (hi - lo) * row
        # the whole tensor (transformers v5 materialises each key as
        # get_slice(k)[...]): a view of the kept mapping, as get_tensor's;
        # some rows: a pread of exactly their bytes
        whole = length == nbytes
        buf = self._f._read(self._begin + lo * row, length, whole) if length else None
        return _pinio_pkg.tensor_from_buffer(buf, self._dtype, shape, self._f._fw, self._name)

    def _on_device(self):
        if self._dev is None:
            self._dev = self._f.get_tensor(self._name)
        return self._dev

    def _sub_byte(self):
        return self._dtype in _pinio_pkg._PACKED_BITS

    def _mark(self, t):
        """A raw (uint8) tensor of a quantized dtype: its logical dtype and
        shape as attributes, as tensor_from_buffer gives them (indexing
        makes a new tensor without them). The last dimension counts bytes."""
        if self._f._fw == "pt" and self._dtype in _pinio_pkg._QUANTIZED and \
                str(t.dtype) == "torch.uint8" and t.dim():
            bits = _pinio_pkg._PACKED_BITS.get(self._dtype, 8)
            _pinio_pkg._mark_raw(t, self._dtype, tuple(t.shape[:-1]) + (t.shape[-1] * 8 // bits,))
        return t

    def _packed_pick(self, pick, disp):
        """The last dimension's index of a packed (F4, F6) tensor, in
        elements as upstream's narrowing takes it, as bytes of the torch
        layout (whose last dimension counts bytes); a cut inside a byte
        raises upstream's MisalignedSlice naming the tensor, its dtype and
        the cut (an int index takes one element: always inside a byte)."""
        bits = _pinio_pkg._PACKED_BITS[self._dtype]
        if isinstance(pick, int):
            return self._misaligned(disp, f"element {pick} alone")
        if pick.step not in (None, 1):
            return self._misaligned(disp, f"every {pick.step}th element")
        for at in (pick.start, pick.stop):
            if at * bits % 8:
                return self._misaligned(disp, f"element {at}")
        return slice(pick.start * bits // 8, pick.stop * bits // 8)

    def _misaligned(self, disp, what):
        raise SafetensorError(
            f"MisalignedSlice: tensor {self._name!r} is {self._dtype} of shape {self._shape} "
            f"({_pinio_pkg._PACKED_BITS[self._dtype]} bits an element): the slicing {disp} cuts "
            f"its last dimension at {what}, inside a byte; a cut must land on a byte boundary")

    def __getitem__(self, index):
        f = self._f
        f._check()
        # The whole tensor, as transformers v5 materialises every key
        # (get_slice(k)[...]) from a thread pool: straight to get_tensor's
        # view of the kept mapping. _torch_getitem's index handling on the
        # way cost ~10 us a key, a third of the key's time hot at 20,000
        # tensors, and it held the GIL the pool's threads wait for.
        if (index is Ellipsis or (type(index) is slice and index == _FULL)) and f._kept and \
                f._fw == "pt" and f._backend == "mmap" and f._device == "cpu" and \
                self._shape and not f._prefetched.tensors and self._end > self._begin and \
                self._dtype not in _pinio_pkg._QUANTIZED:
            t = f._view_tensor(self._name, f._info[self._name])
            if t is not False:
                return t
        if self._f._prefetched.tensors:  # the plan's slice: no read
            t = self._f._prefetched.lookup(self._name, index, self._shape)
            if t is not None:
                return self._f._own(t)
        if self._f._fw == "pt" and self._f._backend == "mmap":
            return self._mark(self._torch_getitem(index))
        return self._mark(self._narrow_getitem(index))

    # torch over the default backend: torch's own indexing semantics (as
    # upstream, which indexes a view of the mapping).
    def _torch_getitem(self, index):
        if not self._shape:
            return self._scalar()[index]
        items = _expand(index, len(self._shape))
        # the first dimension's index: after the new axes (None) before it
        p = next((d for d, it in enumerate(items) if it is not None), None)
        # a packed dtype's rows are whole bytes from 2 dimensions on (torch
        # holds its last dimension in bytes); a 1-D one is read whole
        if (self._sub_byte() and len(self._shape) < 2) or p is None or not all(
                it is None or isinstance(it, slice) or _as_int(it) is not None for it in items):
            return self._whole()[index]  # lists, tensors, masks: torch's on all rows
        first, before, rest = items[p], items[:p], items[p + 1:]
        n = self._shape[0]
        if _as_int(first) is not None:
            first = _as_int(first)
            i = first + n if first < 0 else first
            if not 0 <= i < n:
                raise IndexError(f"index {first} is out of bounds for dimension 0 with size {n}")
            return self._rows(i, i + 1)[before + (0,) + rest]
        if first.step is not None and first.step <= 0:
            raise ValueError("step must be greater than zero")  # torch's rule
        r = range(*first.indices(n))
        if len(r) == 0:
            return self._rows(0, 0)[before + (slice(None),) + rest]
        rows = self._rows(r[0], r[-1] + 1)
        return rows[before + (slice(None, None, r.step),) + rest]

    def _whole(self):
        return self._rows(0, self._shape[0]) if self._shape else self._scalar()

    def _scalar(self):
        if self._f._prefetched.tensors:
            w = self._f._prefetched.whole(self._name, self._shape)
            if w is not None:
                return w
        if self._f._device != "cpu":
            return self._on_device()
        buf = self._f._read(self._begin, self._end - self._begin, True)
        return _pinio_pkg.tensor_from_buffer(buf, self._dtype, [], self._f._fw, self._name)

    # numpy (and the pread backend): upstream's Rust narrowing rules and messages.
    # Beyond upstream, whose narrowing refuses them with a TypeError: an
    # Ellipsis stands for full slices, None adds an axis, as torch and numpy
    # index (transformers v5 materialises every slice with [...]).
    def _narrow_getitem(self, index):
        items = _expand(index, len(self._shape))
        dims = [it for it in items if it is not None]
        if len(dims) > len(self._shape):
            raise SafetensorError("more slicing indexes than dimensions in tensor")
        ranges, shows, picks = [], [], []
        for d, it in enumerate(dims):
            n = self._shape[d]
            if isinstance(it, list):
                if it:
                    raise SafetensorError("Non empty lists are not implemented")
                ranges.append((0, 0, 1))
                shows.append("0:0")
                picks.append(slice(0, 0))
            elif _as_int(it) is not None:
                it = _as_int(it)
                i = it + n if it < 0 else it
                if i < 0:
                    raise SafetensorError(f"Invalid index {it} for dimension {d} of size {n}")
                ranges.append((i, i + 1, 1))
                shows.append(str(i))
                picks.append(i)
            elif isinstance(it, slice):
                it = slice(*(None if v is None else _operator.index(v)
                             for v in (it.start, it.stop, it.step)))
                for b in (it.start, it.stop):
                    if b is not None and b < 0:
                        raise OverflowError("can't convert negative int to unsigned")
                start = 0 if it.start is None else it.start
                stop = n if it.stop is None else it.stop
                step = 1 if it.step is None else it.step
                if step <= 0:
                    raise SafetensorError(f"slice step must be positive, got {step}")
                shows.append(f"{'' if it.start is None else it.start}:"
                             f"{'' if it.stop is None else it.stop}")
                ranges.append((start, stop, step))
                picks.append(slice(start, stop, step))
            else:
                raise TypeError(f"index {it!r}: ints, slices, [], None and ... only")
        disp = "[" + ", ".join(shows) + "]"
        for d, (start, stop, _) in enumerate(ranges):
            n = self._shape[d]
            if stop > n or (start >= n and stop > start) or (start > stop):
                bad = stop - 1 if stop > n else start
                raise SafetensorError(
                    f"Error during slicing {disp} with shape {self._shape}: index {bad} out of "
                    f"bounds for tensor dimension #{d} of size {n}")
        if not self._shape:  # every item is None: one axis of 1 each
            t = self._f._own(self._scalar())
            return t.reshape([1] * len(items)) if items else t
        if self._sub_byte() and len(ranges) == len(self._shape):
            picks[-1] = self._packed_pick(picks[-1], disp)
        if not ranges or (self._sub_byte() and len(self._shape) < 2):
            lo, hi = 0, self._shape[0]
        else:
            lo, hi = ranges[0][0], max(ranges[0][0], ranges[0][1])
        rows = self._rows(lo, hi)
        if picks:
            p0 = picks[0]
            picks[0] = p0 - lo if isinstance(p0, int) else slice(p0.start - lo, p0.stop - lo,
                                                                   p0.step)
        it = iter(picks)
        out = rows[tuple(None if x is None else next(it) for x in items)]
        return out.copy() if self._f._fw == "np" else out.clone()


class TensorSpec:
    """TensorSpec(*, dtype, shape, data_ptr, data_len): a tensor to serialize,
    given as raw memory the caller keeps alive (upstream 0.8)."""

    __slots__ = ("dtype", "shape", "data_ptr", "data_len", "_code")

    def __init__(self, *, dtype, shape, data_ptr, data_len):
        code = _SPEC_DTYPES.get(dtype)
        if code is None:
            raise SafetensorError(f"dtype {dtype} is not understood")
        shape = [int(x) for x in shape]
        if code == "F4" and shape:  # torch's x2 packing: the header holds the logical count
            shape[-1] *= 2
        self.dtype, self.shape, self._code = dtype, shape, code
        self.data_ptr, self.data_len = int(data_ptr), int(data_len)

    def __repr__(self):
        return (f"TensorSpec(dtype={self.dtype!r}, shape={self.shape}, "
                f"data_ptr={self.data_ptr:#x}, data_len={self.data_len})")


def _specs(tensor_dict):
    if not isinstance(tensor_dict, dict):
        raise TypeError(f"expected a dict of str to TensorSpec, got {type(tensor_dict).__name__}")
    specs = []
    for k, v in tensor_dict.items():
        if not isinstance(k, str):
            raise TypeError(f"tensor names must be str, got {type(k).__name__}")
        if not isinstance(v, TensorSpec):
            raise TypeError(f"tensor {k!r}: expected a TensorSpec, got {type(v).__name__}")
        specs.append((k, v._code, v.shape, v.data_ptr, v.data_len))
    return specs


def _metadata(metadata):
    if metadata is None:
        return None
    if not isinstance(metadata, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
        raise TypeError("metadata must be a dict of str to str")
    return metadata


def serialize(tensor_dict, metadata=None):
    """The bytes of a safetensors file holding `tensor_dict` (TensorSpecs)."""
    try:
        return _pinio.serialize(_specs(tensor_dict), _metadata(metadata))
    except _pinio.Error as e:
        raise SafetensorError(_pinio_message(e)) from None


def serialize_file(tensor_dict, filename, metadata=None):
    """Writes the same bytes to `filename`: a temporary file, fsync, rename
    (a reader of the old file never sees it truncated); O_DIRECT where the
    file system allows; the GIL released throughout. A file it replaces
    keeps its mode; a read-only one raises PermissionError (for a user who
    may not write it, as upstream); a symlink is written through (the link
    stays); a file pinio would refuse to read (a NUL in a name, a header
    over 100 MB) raises SafetensorError before anything is written, as
    does an s3:// filename (pinio reads objects, never writes them); a
    temporary a killed save left is removed by a later save (pinio_save,
    save.h)."""
    filename = _os.fspath(filename)
    try:
        _pinio.save(filename, _specs(tensor_dict), _metadata(metadata))
    except _pinio.Error as e:
        if e.errno in (_errno.EACCES, _errno.EPERM):  # a read-only file: as upstream
            raise PermissionError(e.errno, _pinio_message(e), filename) from None
        raise SafetensorError(_pinio_message(e)) from None


def deserialize(data):
    """[(name, {"shape", "dtype", "data": bytearray})] in file order (a copy)."""
    data = bytes(data)
    try:
        tensors, _, data_offset, _ = _pinio.parse(data)
    except _pinio.Error as e:
        raise SafetensorError(f"Error while deserializing header: {_pinio_message(e)}") from None
    return [(name, {"shape": list(shape), "dtype": dt,
                    "data": bytearray(data[data_offset + b:data_offset + e])})
            for name, dt, shape, b, e in tensors]
