"""pinio: checkpoints into pinned, NUMA-local memory, tensors as zero-copy views.

    import pinio
    weights = pinio.load("model/", filter=["model.layers.0"])     # dict name -> torch.Tensor
    with pinio.open("model.safetensors", framework="np") as ck:  # a checkpoint object
        print(ck.metadata(), ck.report()["io_path"])
        w = ck["lm_head.weight"]
    with pinio.open("model/", device="cuda:0") as ck:            # through the CUDA sink
        w = ck["lm_head.weight"]
    split = {"*.o_proj.weight": 1, "*norm*": None, "*": 0}        # tensor parallel: rank 1
    part = pinio.load("model/", split=split, rank=1, world=4)     # of 4 reads its slices
    part = pinio.load("model/", split=split, process_group=pg)    # or the group reads once
    arena = pinio.Arena()                                         # pinned memory kept
    a = pinio.load("a.safetensors", arena=arena); del a           # across loads
    b = pinio.load("b.safetensors", arena=arena)                  # (no page faults)

Every tensor views the loaded memory through a small exporter object that
holds a pinio reference on it (the buffer protocol; numpy.frombuffer and
torch.frombuffer keep it alive), so the memory is freed when the last tensor
and the checkpoint are gone, in any order, and is never reused while a
tensor can see it. The GIL is released while pinio reads.

`pinio.safetensors` is the `safetensors` API over the same machinery: a
program that imports it instead of `safetensors` behaves the same.

Quantized checkpoints: FP8 (every F8 kind, F8_E8M0 scales included), F4 and
F6 tensors load, split and slice on any torch. Where torch has the dtype
(float8_*, float4_e2m1fn_x2) the tensor has it; where it does not (torch
1.13: none of them; F6: no torch at all) it is raw torch.uint8, and its
attributes pinio_dtype and pinio_shape give the dtype and logical shape.
Either way the last dimension counts bytes (F4 halved, as upstream's
float4_e2m1fn_x2; F6 3/4; a last dimension of partial bytes is ValueError).
A split or slice must cut on byte boundaries, else pinio.Error names the
tensor, its dtype and the cut (torch_layout()).
"""
import errno
import os as _os
import time as _time

from . import _pinio
from ._pinio import Arena, Error

__version__ = _pinio.version
__all__ = ["load", "load_to_device", "open", "weights_iterator", "Arena", "Checkpoint",
           "DeviceCheckpoint", "Error", "__version__"]

# safetensors dtype -> (numpy name, torch attribute, torch version that has it)
_DTYPES = {
    "BOOL": ("bool_", "bool", None),
    "U8": ("uint8", "uint8", None),
    "I8": ("int8", "int8", None),
    "I16": ("int16", "int16", None),
    "U16": ("uint16", "uint16", "2.3"),
    "F16": ("float16", "float16", None),
    "BF16": (None, "bfloat16", None),
    "I32": ("int32", "int32", None),
    "U32": ("uint32", "uint32", "2.3"),
    "F32": ("float32", "float32", None),
    "C64": ("complex64", "complex64", None),
    "F64": ("float64", "float64", None),
    "I64": ("int64", "int64", None),
    "U64": ("uint64", "uint64", "2.3"),
    "F8_E4M3": (None, "float8_e4m3fn", "2.1"),
    "F8_E5M2": (None, "float8_e5m2", "2.1"),
    "F8_E4M3FNUZ": (None, "float8_e4m3fnuz", "2.2"),
    "F8_E5M2FNUZ": (None, "float8_e5m2fnuz", "2.2"),
    "F8_E8M0": (None, "float8_e8m0fnu", "2.8"),
    "F4": (None, "float4_e2m1fn_x2", "2.8"),
}

# The quantized dtypes (FP8, MXFP4/MXFP6): a torch without their dtype gets
# their bytes as uint8 (see torch_layout); bits per element of the packed ones.
_PACKED_BITS = {"F4": 4, "F6_E2M3": 6, "F6_E3M2": 6}
_QUANTIZED = frozenset(("F8_E4M3", "F8_E5M2", "F8_E4M3FNUZ", "F8_E5M2FNUZ", "F8_E8M0",
                        *_PACKED_BITS))

FRAMEWORKS = {"pt": "pt", "torch": "pt", "pytorch": "pt", "np": "np", "numpy": "np"}


def numpy_dtype(st_dtype, name=""):
    """The numpy dtype of a safetensors dtype; TypeError when numpy has none
    (BF16, F8, F4, F6: numpy has no such types without ml_dtypes)."""
    import numpy

    np_name = _DTYPES.get(st_dtype, (None,))[0]
    if np_name is None:
        raise TypeError(
            f"tensor {name!r} is {st_dtype}, which numpy has no dtype for "
            "(numpy lacks bfloat16/float8/float4; load it with framework='pt')"
        )
    return numpy.dtype(getattr(numpy, np_name))


def torch_dtype(st_dtype, name=""):
    """The torch dtype of a safetensors dtype; AttributeError (as upstream) when
    this torch lacks it (torch 1.13: U16/U32/U64, every F8, F4; F6 has none
    in any torch). The quantized ones are loaded all the same: torch_layout."""
    import torch

    entry = _DTYPES.get(st_dtype)
    if entry is None:
        raise TypeError(f"tensor {name!r}: dtype {st_dtype} is not understood")
    dt = getattr(torch, entry[1], None)
    if dt is None:
        raise AttributeError(
            f"tensor {name!r} is {st_dtype}: torch {torch.__version__} has no "
            f"torch.{entry[1]} (it needs torch >= {entry[2]})"
        )
    return dt


def torch_layout(st_dtype, shape, name=""):
    """(torch dtype, torch shape, raw) of a tensor of `st_dtype` and logical
    `shape`. The quantized dtypes (every F8 kind, F4, F6_E2M3, F6_E3M2)
    always load: with their torch dtype where this torch has one, else as
    raw bytes (torch.uint8, raw True). Either way the last dimension counts
    bytes, as upstream's float4_e2m1fn_x2 does for F4 (two values a byte):
    an F8 tensor keeps its shape, an F4 one's last dimension is halved, an
    F6 one's is 3/4 of it; a last dimension that is not whole bytes raises
    ValueError (upstream's F4 rule). Other dtypes: torch_dtype()'s."""
    import torch

    shape = tuple(shape)
    if st_dtype not in _QUANTIZED:
        return torch_dtype(st_dtype, name), shape, False
    entry = _DTYPES.get(st_dtype)
    dt = getattr(torch, entry[1], None) if entry else None
    bits = _PACKED_BITS.get(st_dtype)
    if bits:
        if not shape or shape[-1] * bits % 8:
            raise ValueError(
                f"tensor {name!r} is {st_dtype} of shape {list(shape)}: torch holds its "
                f"elements packed, the last dimension in bytes, and {shape[-1] if shape else 1}"
                f" elements of {bits} bits are not whole bytes (read its bytes with "
                f"pinio.open(...).buffer(name))")
        shape = shape[:-1] + (shape[-1] * bits // 8,)
    return (dt, shape, False) if dt is not None else (torch.uint8, shape, True)


def _mark_raw(t, st_dtype, shape):
    """A raw tensor of a quantized dtype carries its logical dtype and shape."""
    t.pinio_dtype = st_dtype
    t.pinio_shape = tuple(shape)
    return t


def tensor_from_buffer(buf, st_dtype, shape, framework, name=""):
    """A numpy array or torch tensor viewing `buf` (an exporter, or None for
    zero bytes) without a copy; the tensor keeps `buf` alive. torch: the
    quantized dtypes as torch_layout() says; a raw one (this torch lacks
    its dtype) has attributes pinio_dtype (e.g. "F8_E4M3") and pinio_shape
    (its logical shape, in elements)."""
    shape = tuple(shape)
    if framework == "np":
        import numpy

        dt = numpy_dtype(st_dtype, name)
        if buf is None or len(buf) == 0:
            return numpy.zeros(shape, dtype=dt)
        return numpy.frombuffer(buf, dtype=dt).reshape(shape)
    import torch

    dt, tshape, raw = torch_layout(st_dtype, shape, name)
    if buf is None or len(buf) == 0:
        t = torch.zeros(tshape, dtype=dt)
    else:
        t = torch.frombuffer(buf, dtype=dt).reshape(tshape)
    return _mark_raw(t, st_dtype, shape) if raw else t


# safetensors dtype -> torch dtype, for the per-tensor paths, filled as they
# make tensors (None: torch.frombuffer); torch is imported only when used.
_PT_DTYPES = {}


def _torch_frombuffer():
    import torch

    return torch.frombuffer


def _tensor_of(raw, i, name, dt, shape, nbytes, framework):
    """Tensor `i` of the raw checkpoint `raw` (its name, dtype, shape and
    bytes given): the per-key path of Checkpoint and safe_open. At 20,000
    tensors, the imports and lookups of tensor_from_buffer cost about as
    much as the tensor itself: torch dtypes are looked up once."""
    if nbytes and framework == "pt":
        tdt = _PT_DTYPES.get(dt)
        if tdt is not None:
            return _PT_DTYPES[None](raw.buffer(i), dtype=tdt).reshape(shape)
    elif not len(raw):
        raw.info(i)  # closed: raises, as for a tensor with bytes
    t = tensor_from_buffer(raw.buffer(i) if nbytes else None, dt, shape, framework, name)
    if framework == "pt" and dt not in _QUANTIZED:  # other shapes, or raw: never cached
        _PT_DTYPES[dt] = t.dtype
        _PT_DTYPES[None] = _torch_frombuffer()
    return t


def _filters(filter):
    """The filter argument as a list of patterns (None: all tensors). A str
    is one pattern, not one per letter."""
    if filter is None:
        return None
    if isinstance(filter, str):
        return [filter]
    if isinstance(filter, bytes):
        raise TypeError("filter: a str or a list of str, not bytes")
    pats = list(filter)
    for p in pats:
        if not isinstance(p, str):
            raise TypeError(f"filter: each pattern is a str, not {type(p).__name__}")
    return pats or None


def _check_selected(filters, selected, files, paths):
    """A selection that matches nothing is an error, as `pinio load --filter` says."""
    if filters and selected == 0:
        raise Error(errno.ENOENT,
                    f"no tensor matches filter {filters!r} in {', '.join(map(str, paths))} "
                    f"({files} file{'' if files == 1 else 's'})")


def _split_rules(split):
    """split= as [(pattern, dim or None)]: a mapping {pattern: dim} (in its
    order: the first matching rule wins), pairs, or "PATTERN=DIM" strings as
    `pinio load --split` takes them. dim: an int (negative counts from the
    end), or None / "whole" for tensors read whole (replicated)."""
    if split is None:
        return None
    if isinstance(split, str):
        split = [split]
    items = split.items() if hasattr(split, "items") else split
    rules = []
    for item in items:
        if isinstance(item, str):
            pat, eq, dim = item.rpartition("=")
            if not eq or not pat:
                raise ValueError(f"split rule {item!r}: PATTERN=DIM (DIM an int or 'whole')")
        else:
            try:
                pat, dim = item
            except (TypeError, ValueError):
                raise TypeError(f"split: {item!r} is not a (pattern, dim) pair") from None
        if not isinstance(pat, str):
            raise TypeError(f"split: the pattern {pat!r} is not a str")
        if dim is None or dim == "whole":
            dim = None
        elif isinstance(dim, str):
            try:
                dim = int(dim)
            except ValueError:
                raise ValueError(f"split rule {pat!r}: dim {dim!r} is not an int or "
                                 "'whole'") from None
        elif isinstance(dim, bool) or not isinstance(dim, int):
            raise TypeError(f"split rule {pat!r}: dim {dim!r} is not an int or None")
        rules.append((pat, dim))
    return rules


def _as_paths(paths):
    if isinstance(paths, (str, bytes, _os.PathLike)):
        return [_os.fspath(paths)]
    return [_os.fspath(p) for p in paths]


class Checkpoint:
    """A loaded checkpoint: name -> tensor, metadata, the load's report.

    Tensors are created on access and stay valid after close() (they hold
    their own reference on the memory)."""

    device = "cpu"

    def __init__(self, raw, framework="pt", t_call=None):
        self._raw = raw
        # time to ready: the caller's clock at its call (perf_counter), and
        # when every tensor object was made (tensors())
        self._t_call, self._t_ready = t_call, None
        self._framework = FRAMEWORKS.get(framework)
        if self._framework is None:
            raise ValueError(f"framework {framework} is invalid (pt or np)")
        # kept for tensors(), which would otherwise ask raw.info() again;
        # made in one call (one per row cost about as much as the row)
        self._rows = raw.rows() if len(raw) else []
        self._order = [t[0] for t in self._rows]
        self._index = {n: i for i, n in enumerate(self._order)}
        self._t_built = _time.perf_counter()

    def keys(self):
        """Tensor names, sorted."""
        return sorted(self._index)

    def offset_keys(self):
        """Tensor names in file order."""
        return list(self._order)

    def __len__(self):
        return len(self._order)

    def __contains__(self, name):
        return name in self._index

    def __iter__(self):
        return iter(self.keys())

    def info(self, name):
        """(dtype, shape, nbytes, file, file_offset) of a tensor."""
        _, dt, shape, nbytes, f, off = self._raw.info(self._index[name])
        return dt, list(shape), nbytes, f, off

    def buffer(self, name):
        """The exporter object of a tensor's bytes (buffer protocol)."""
        return self._raw.buffer(self._index[name])

    def __getitem__(self, name):
        return self._tensor(self._index[name])

    def _tensor(self, i):
        """Tensor `i` (file order), from the rows kept at construction (a
        second info() per tensor cost about as much as the tensor)."""
        name, dt, shape, nbytes, _, _ = self._rows[i]
        return _tensor_of(self._raw, i, name, dt, shape, nbytes, self._framework)

    def tensors(self):
        """Every tensor, in file order."""
        if self._framework != "pt":
            out = {n: self[n] for n in self._order}
            self._t_ready = _time.perf_counter()
            return out
        # self[n] per tensor, unrolled: at 20,000 tensors the name lookup,
        # the dtype lookup and the import in each call cost about as much
        # as torch.frombuffer itself (callgrind: see the commit)
        import torch

        raw, frombuffer, dtypes, out = self._raw, torch.frombuffer, {}, {}
        if self._rows and not len(raw):
            raw.info(0)  # closed: raises as self[n] does
        for i, (name, dt, shape, nbytes, _, _) in enumerate(self._rows):
            tdt = dtypes.get(dt)
            if tdt is None or not nbytes:
                out[name] = tensor_from_buffer(raw.buffer(i) if nbytes else None, dt, shape,
                                               "pt", name)
                if dt not in _QUANTIZED:  # other shapes, or raw: always tensor_from_buffer
                    dtypes[dt] = torch_dtype(dt, name)
                continue
            out[name] = frombuffer(raw.buffer(i), dtype=tdt).reshape(shape)
        self._t_ready = _time.perf_counter()
        return out

    def metadata(self, file=0):
        """The `__metadata__` of input file `file` (dict), or None."""
        return self._raw.metadata(file)

    def files(self):
        return self._raw.files()

    def report(self):
        """What the load did (bytes, seconds, I/O path and why, memory).
        ready_seconds: the time to ready, from the call of pinio.open()
        (or load()) until every tensor was usable: the library's load and,
        once tensors() has run, the tensor objects it made (the library's
        own figure when the checkpoint did not come from pinio.open())."""
        rep = self._raw.report()
        if self._t_call is not None:
            end = self._t_ready if self._t_ready is not None else self._t_built
            rep["ready_seconds"] = end - self._t_call
        return rep

    def close(self):
        """Drops the checkpoint's reference; tensors keep theirs."""
        self._raw.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


class DeviceCheckpoint(Checkpoint):
    """A checkpoint streamed to a CUDA device (pinio.open(..., device="cuda:N")):
    the same face as Checkpoint, over tensors the allocator gave (torch's
    by default) that the CUDA sink filled; every copy had completed when it
    was made. There is no host memory behind them: buffer() raises."""

    def __init__(self, tensors, infos, report):
        self._tensors = tensors
        self._infos = infos
        self._report = report
        self._framework = "pt"
        self.device = report["device_name"]
        self._order = list(tensors)  # plan order: files in order, tensors by offset
        self._index = {n: i for i, n in enumerate(self._order)}

    def tensors(self):
        return {n: self[n] for n in self._order}

    def _open(self):
        if self._tensors is None:
            raise ValueError("the checkpoint is closed")
        return self._tensors

    def info(self, name):
        dt, shape, nbytes, f, off = self._infos[name]
        return dt, list(shape), nbytes, f, off

    def buffer(self, name):
        raise TypeError(f"tensor {name!r} is on {self.device}: it has no host buffer")

    def __getitem__(self, name):
        return self._open()[name]

    def metadata(self, file=0):
        if not 0 <= file < len(self._report["metadata"]):
            raise IndexError("file index out of range")
        md = self._report["metadata"][file]
        return None if md is None else dict(md)

    def files(self):
        return list(self._report["paths"])

    def report(self):
        """What the stream did (bytes, seconds, I/O path, copies, sha256 when
        verified); ready_seconds: the time to ready, from the call of
        pinio.open() (or load()) until it returned with every copy done."""
        return dict(self._report)

    def close(self):
        """Drops the checkpoint's tensors; those already taken stay valid."""
        self._tensors = None


def cuda_index(device):
    """The ordinal N of a CUDA device ("cuda", "cuda:N", an int N, a
    torch.device), or None for the CPU ("cpu", None). ValueError otherwise."""
    if device is None:
        return None
    if isinstance(device, int) and not isinstance(device, bool):
        if device < 0:
            raise ValueError(f"device {device} is invalid")
        return device
    d = str(device)  # torch.device prints as "cuda:0"
    if d == "cpu":
        return None
    kind, colon, idx = d.partition(":")
    if kind == "cuda" and (not colon or idx.isdigit()):
        return int(idx) if colon else 0
    raise ValueError(f"device {d!r} is invalid: pinio loads to 'cpu' or 'cuda[:N]'")


def _torch_allocator(device):
    """torch.empty on `device`; a clear error when this torch has no CUDA."""
    import torch

    if not torch.cuda.is_available():
        what = ("a CPU-only build" if torch.version.cuda is None
                else "no CUDA device or driver visible to it")
        raise Error(errno.ENODEV,
                    f"device={device!r} needs torch with CUDA: torch {torch.__version__} is "
                    f"{what} (torch.cuda.is_available() is False); load to 'cpu', or pass "
                    "allocator= to place the tensors in memory of your own")

    def alloc(shape, dtype, dev):
        return torch.empty(shape, dtype=dtype, device=dev)

    def ready(dev):
        # The caching allocator hands back memory that kernels queued on
        # torch's stream may still use; pinio copies on a stream of its own.
        torch.cuda.current_stream(dev).synchronize()

    return alloc, ready


def _placer(device, allocator, tensors, infos):
    """The `place` of _pinio.stream_gpu: allocates each tensor of the plan
    with `allocator(shape, dtype, device)` into `tensors` (name -> tensor),
    records (dtype, shape, nbytes, file, file_offset) in `infos`, and returns
    their device addresses."""
    ready = None
    if allocator is None:
        allocator, ready = _torch_allocator(device)

    def place(specs):
        ptrs = []
        for name, dt, shape, nbytes, file, offset in specs:
            tdt, tshape, raw = torch_layout(dt, shape, name)
            infos[name] = (dt, list(shape), nbytes, file, offset)
            t = allocator(tshape, tdt, device)
            have = t.numel() * t.element_size() if hasattr(t, "numel") else None
            if have is not None and have < nbytes:
                raise ValueError(f"allocator: tensor {name!r} got {have} bytes, needs {nbytes}")
            if hasattr(t, "is_contiguous") and not t.is_contiguous():
                raise ValueError(f"allocator: tensor {name!r} is not contiguous")
            tensors[name] = _mark_raw(t, dt, shape) if raw else t
            ptrs.append(int(t.data_ptr()) if nbytes else 0)
        if ready is not None:
            ready(device)
        return ptrs

    return place


def _stream(paths, filter, device, allocator, verify=False, expected_sha256=None,
            backend="auto", cache="auto", direct="auto", slot_size=0, slots=0, split=None,
            rank=None, world=None, max_overread=0.0, exact=False):
    """({name: tensor} in file order, {name: info}, report) of one stream to
    a CUDA device (see load_to_device); `split` as [(pattern, dim or None)]
    with `rank` and `world` streams the rank's slices; `exact`: `filter` is
    a list of tensor names (no dotted prefix, no glob)."""
    n = cuda_index(device)
    if n is None:
        raise ValueError("load_to_device: device must be a CUDA device")
    device = f"cuda:{n}"
    tensors, infos = {}, {}
    place = _placer(device, allocator, tensors, infos)
    filters = _filters(filter)
    paths = _as_paths(paths)
    sliced = {} if split is None else dict(split=split, rank=rank, world=world,
                                            max_overread=max_overread)
    report = _pinio.stream_gpu(paths, place, "cuda", n, filters=filters, backend=backend,
                               cache=cache, direct=direct, slot_size=slot_size, slots=slots,
                               verify=verify, expected_sha256=expected_sha256, exact=exact,
                               **sliced)
    report["device_name"] = device
    _check_selected(filters, len(tensors), report["files"], paths)
    return tensors, infos, report


def load_to_device(paths, filter=None, device="cuda", *, allocator=None, verify=False,
                   expected_sha256=None, backend="auto", cache="auto", direct="auto",
                   slot_size=0, slots=0, split=None, rank=None, world=None, max_overread=0.0):
    """Streams the selected tensors of `paths` to a CUDA device through
    pinio's CUDA sink: torch allocates each tensor, pinio copies into it
    from pinned staging slots, and every copy has completed when this
    returns. Returns ({name: tensor} in file order, the stream's report).

    allocator(shape, dtype, device) -> tensor-like with data_ptr() (and, if
    it has them, numel()/element_size() and is_contiguous(), checked): where
    each tensor goes, instead of torch.empty(shape, dtype=dtype,
    device=device). Its memory must be device memory of the CUDA driver
    (libcuda.so.1, or PINIO_CUDA_LIB), 256-byte aligned, with nothing
    pending on it. The tests pass one over the test driver's memory.

    verify=True: each input file's SHA-256 (the hub's LFS object id) is
    computed from the bytes as they land in the staging slots, before they
    are copied to the device (a byte changed on the way in changes it);
    what no read brought (headers, unselected tensors) is read again from
    the file. report["sha256"] lists them (file order, report["paths"]).
    expected_sha256=[hex or None per file]: checked too (verify implied); a
    mismatch raises pinio.Error naming the file, and no tensor is returned.

    split=[(pattern, dim or None)] (first match wins; None or no rule: the
    tensor whole) with rank= and world=: each matched tensor arrives as
    torch.chunk(tensor, world, dim)[rank] (the empty slice at the end of
    the dimension for a rank past the last chunk), contiguous and shaped
    like the slice: only its bytes are read and copied, a slice along
    another dimension than the first run by run (holes between the runs
    read through within max_overread of the slices' bytes, 0 = 1/32, and
    never copied). report["split"] says what was sliced and over-read;
    verify still hashes each whole file (the other ranks' bytes read
    again). report["ready_seconds"]: from this call until it returned."""
    t_call = _time.perf_counter()
    split = _split_rules(split)
    if split is not None:
        if isinstance(rank, bool) or isinstance(world, bool) or not isinstance(rank, int) \
                or not isinstance(world, int) or world < 1 or not 0 <= rank < world:
            raise ValueError(f"split= needs rank= and world=, ints with 0 <= rank < world: "
                             f"rank={rank!r} world={world!r}")
    elif rank is not None or world is not None:
        raise ValueError("rank=/world= need split= (the rules that slice the tensors)")
    tensors, _, report = _stream(paths, filter, device, allocator, verify, expected_sha256,
                                 backend, cache, direct, slot_size, slots, split, rank, world,
                                 max_overread)
    report["ready_seconds"] = _time.perf_counter() - t_call
    return tensors, report


def _open_args(framework, device, allocator, memory, arena, slot_size, slots, fill, consumer,
               split, verify, expected_sha256, process_group, round_bytes, exchange, backend,
               cache, direct, host_group=None):
    """open()'s checks of its arguments that go together: (split rules,
    whether the load goes to a GPU); ValueError or TypeError otherwise.
    The I/O policy strings are judged here, before a group's agreement, by
    the parsers the load itself uses (a rank that owns no tensor reads
    nothing and would never judge its own)."""
    _pinio.check_io(backend=backend, cache=cache, direct=direct, memory=memory, fill=fill,
                    consumer=consumer)
    rules = _split_rules(split)
    on_device = cuda_index(device) is not None
    if process_group is not None and (arena is not None or verify or
                                      expected_sha256 is not None):
        raise ValueError("process_group= does not take arena=, verify= or expected_sha256=")
    if (round_bytes is not None or exchange != "auto") and process_group is None:
        raise ValueError("round_bytes= and exchange= shape the exchange of a process_group= load")
    if host_group is not None and process_group is None:
        raise ValueError("host_group= carries the host traffic of a process_group= load")
    if on_device:
        if FRAMEWORKS.get(framework) != "pt":
            raise ValueError(f"device {device!r} needs framework='pt'")
        if arena is not None:
            raise ValueError(f"arena= is pinned host memory for a CPU load: device={device!r} "
                             "streams through a staging ring of its own")
        if memory != "auto":
            raise ValueError(f"memory={memory!r} chooses host memory: device={device!r} streams "
                             "through a staging ring")
        if consumer != "host":
            raise ValueError(f"consumer={consumer!r} chooses host memory: device={device!r} "
                             "streams through a staging ring")
        if fill != "auto":
            raise ValueError(f"fill={fill!r} fills the page cache for mapped host memory: "
                             f"device={device!r} streams through a staging ring")
    elif allocator is not None:
        raise ValueError("allocator= places tensors on a GPU device only")
    elif slot_size or slots:
        raise ValueError("slot_size=/slots= size the staging ring of a GPU device load only")
    return rules, on_device


def open(paths, framework="pt", *, filter=None, device="cpu", allocator=None, backend="auto",
         cache="auto", direct="auto", verify=False, expected_sha256=None, memory="auto",
         map_private=True, arena=None, slot_size=0, slots=0, fill="auto", consumer="host",
         split=None, rank=None, world=None, process_group=None, max_overread=0.0,
         round_bytes=None, exchange="auto", share="auto", host_group=None):
    """Loads `paths` (files, shard folders, index files; s3:// URLs of an
    object, a prefix or an index: README's Object storage) and returns a Checkpoint.

    filter: a name, dotted prefix or glob, or a list of them (None: all); a
    pattern equal to a tensor's name matches it, even one holding *, ? or [
    (so does a split rule); a NUL in a pattern raises ValueError; a
    filter that selects no tensor raises pinio.Error (ENOENT). backend: auto,
    fixed_direct, direct, buffered or pread (a rung of the engine's ladder).
    cache: auto (buffered when the page cache holds the file), cold, hot.
    memory: "auto" (default: files in the page cache mapped, the others read
    into one pinned arena with O_DIRECT, or mapped with their page cache
    filled where the kernel's first touch of fresh memory, measured or
    given by PINIO_FIRST_TOUCH_GBPS in GB/s, is slower than the storage:
    the library's rule, load.h; report()["modes"] says which and why),
    "pinned" or "mapped". Mappings are private (copy-on-write, as upstream
    maps a file), so every tensor is writable and a write is never seen by
    the file or another load. map_private=False maps shared and read-only
    (no copy-on-write bookkeeping): such tensors are exported read-only
    (numpy refuses writes; torch warns that the buffer is not writable, and
    a write to such a torch tensor kills the process with SIGSEGV).
    fill: how a cold file that is mapped reaches the page cache: "ahead"
    (readahead at depth, then the mapping is populated), "fault" (the
    populate's own readahead) or "auto" (default: ahead on network and FUSE
    file systems, where each request waits; fault on local ones).
    verify=True: each file's SHA-256, report()["sha256"]; expected_sha256=
    [hex or None per input file, as resolved]: checked too, a mismatch
    raises pinio.Error naming the file.
    consumer: "host" (default: CPU code reads the tensors) or "dma" (a
    device copies them, as a GPU upload does: memory "auto" then reads
    every file into pinned memory, which the driver can DMA from).
    share: "auto" (default) or "off": node-local sharing of pinned files
    (load.h): processes of this machine loading the same file at once read
    it once, the others mapping the reader's memory (/dev/shm), as mmap
    loaders share the page cache; "off" (or PINIO_SHARE=0 in the
    environment) reads privately. report()["share"] says which ran for each
    file and why ("line"), and report()["read_bytes"] what this process read.
    arena: a pinio.Arena whose pinned memory this load reuses (every file
    is then read pinned). The previous load's tensors through the same
    arena must all be gone (and its checkpoint closed): otherwise this
    raises pinio.Error (errno EBUSY) and their bytes stay as they are.

    device="cuda" or "cuda:N" (framework pt): the tensors stream through
    pinio's CUDA sink into memory `allocator` gives (torch.empty on the
    device by default; see load_to_device()), staged through `slots`
    pinned slots of `slot_size` bytes; returns a DeviceCheckpoint. memory,
    map_private and arena are host-memory options and are refused there.
    split={pattern: dim} with rank= and world= (tensor parallelism): each
    tensor a rule matches (the first rule, in the mapping's order) is read
    as torch.chunk(tensor, world, dim)[rank] (past torch.chunk's last chunk:
    the empty slice at the end of the dimension); dim None or "whole" reads
    the matched tensors whole, as every tensor no rule matches. Only the
    slice's bytes are read (a slice along another dimension than the first
    is read in runs, holes up to max_overread of the slices' bytes read
    through, 0 = 1/32); each tensor is a zero-copy view shaped like its
    slice; report()["read_bytes"] is what this process read.
    process_group=pg (torch.distributed; rank and world are the group's):
    the group reads the checkpoint once, each tensor's bytes read by one
    rank, and exchanges the slices over the group so that every rank ends
    with exactly its own (pinio._dist). Every rank of the group must call
    it, with the same paths, filter and split; a rank whose plan differs
    makes every rank raise the same pinio.Error before any byte moves, and
    an argument one rank gets wrong (split=, device=, filter=, exchange=,
    backend=, cache=, direct=, memory=, rank=/world= other than the
    group's) makes every rank raise the same
    ValueError or TypeError, never a rank left waiting for the others.
    With device="cuda[:N]" (framework pt; allocator=, slot_size=, slots= as
    above) each rank gets a DeviceCheckpoint on its device: the slices it
    reads itself (as above) stream from the file through the CUDA sink, and
    the exchanged tensors (those every rank holds whole, slices of short
    runs) are read once by their owner, exchanged, and copied from host
    memory to each rank's device through the same sink;
    report()["read_bytes"] is what this rank read. A failure on any rank
    after the agreement (a read, the CUDA driver, the allocator) makes every
    rank raise the same pinio.Error.
    exchange (process_group): how the slices travel: "shm" through shared
    memory (/dev/shm: every rank on one host; the owner writes each piece
    once, the others map it; a /dev/shm without room for it makes every
    rank raise the same pinio.Error, ENOSPC), "group" through the process group
    (all_to_all_single), "auto" (default) shm when the group shares a host.
    round_bytes (exchange through the group): the tensors exchanged are read
    and sent in rounds of about this many bytes (None: 256 MiB), each
    round's exchange running while the next round is read; it bounds the
    send buffers.
    host_group (process_group): the group that carries the load's host
    traffic (the agreements and the exchange of host buffers), a gloo
    group of the same ranks in the same order (vLLM's cpu_group). None
    (default): process_group itself when its backend takes host tensors
    (gloo, mpi); for an NCCL one, a gloo group of its ranks that pinio
    creates on first use (a collective of the whole job: every rank of
    the job must be in the load, or torch >= 2.1; otherwise ValueError
    asking for host_group=) and reuses for every later load over it.
    Raises pinio.Error (an OSError naming the file, offset or tensor).

    report()["ready_seconds"], on every path: the time to ready, from this
    call until every tensor is usable (see Checkpoint.report())."""
    t_call = _time.perf_counter()
    if share not in ("auto", "off"):
        raise ValueError(f"share={share!r} is invalid (auto, off)")
    try:
        rules, on_device = _open_args(framework, device, allocator, memory, arena, slot_size,
                                      slots, fill, consumer, split, verify, expected_sha256,
                                      process_group, round_bytes, exchange, backend, cache,
                                      direct, host_group)
    except (ValueError, TypeError) as e:
        if process_group is None:
            raise
        from . import _dist

        _dist.refuse(process_group, e, host_group)  # every rank of the group raises it
    if process_group is not None:
        from . import _dist

        if on_device:
            ck = _dist.open_group_device(paths, rules, process_group, device,
                                         allocator=allocator, rank=rank, world=world,
                                         filter=filter, backend=backend, cache=cache,
                                         direct=direct, max_overread=max_overread,
                                         round_bytes=round_bytes, exchange=exchange,
                                         slot_size=slot_size, slots=slots,
                                         host_group=host_group)
        else:
            ck = _dist.open_group(paths, framework, rules, process_group, rank=rank,
                                  world=world, filter=filter, backend=backend, cache=cache,
                                  direct=direct, memory=memory, max_overread=max_overread,
                                  round_bytes=round_bytes, exchange=exchange,
                                  host_group=host_group)
        return _ready(t_call, ck)
    if rules is not None or rank is not None or world is not None:
        if rules is None:
            raise ValueError("rank=/world= need split= (the rules that slice the tensors)")
        if rank is None or world is None:
            raise ValueError("split= needs rank= and world= (or process_group=)")
        if isinstance(rank, bool) or isinstance(world, bool) or not isinstance(rank, int) \
                or not isinstance(world, int) or world < 1 or not 0 <= rank < world:
            raise ValueError(f"rank={rank!r} world={world!r}: ints with 0 <= rank < world")
    if on_device:
        tensors, infos, report = _stream(paths, filter, device, allocator, verify,
                                         expected_sha256, backend, cache, direct, slot_size,
                                         slots, rules, rank, world, max_overread)
        return _ready(t_call, DeviceCheckpoint(tensors, infos, report))
    filters = _filters(filter)
    paths = _as_paths(paths)
    sliced = {} if rules is None else dict(split=rules, rank=rank, world=world,
                                            max_overread=max_overread)
    raw = _pinio.load(paths, filters=filters, backend=backend, cache=cache, direct=direct,
                      verify=verify, memory=memory, map_private=map_private, arena=arena,
                      expected_sha256=expected_sha256, fill=fill, consumer=consumer,
                      share=share, **sliced)
    try:
        rep = raw.report()
        _check_selected(filters, rep["tensors"], rep["files"], paths)
    except Error:
        raw.close()
        raise
    return Checkpoint(raw, framework, t_call)


def _ready(t_call, ck):
    """`ck`, a checkpoint whose tensors were usable when it was returned (a
    device's copies done, a group's exchange over), its report's
    ready_seconds set: from `t_call` until now."""
    ck._report["ready_seconds"] = _time.perf_counter() - t_call
    return ck


def _how(rep):
    """How the bytes of a load's report reached this process, a subset of
    "read" (it read some from storage), "shared" (another process's read
    mapped, or a group's exchange) and "mapped" (the page cache mapped in
    place): what the engine plugins' log lines say."""
    how = set()
    if rep.get("read_bytes"):
        how.add("read")
    if (rep.get("share") or {}).get("files_shared") or rep.get("received_bytes"):
        how.add("shared")
    if rep.get("files_mapped"):
        how.add("mapped")
    return how


def _how_text(how):
    """A set of _how()'s words as one: "read", "read+mapped", ... ("" for none)."""
    return "+".join(h for h in ("read", "shared", "mapped") if h in how)


def load(paths, filter=None, device="cpu", framework="pt", *, allocator=None, **kw):
    """Loads `paths` and returns {name: tensor} (torch by default, or numpy).

    Takes open()'s keywords. device="cuda" or "cuda:N": through pinio's CUDA
    sink into tensors torch allocates (or `allocator`: see load_to_device()).
    split=, rank=, world=: this rank's slices; with process_group= the group
    reads the checkpoint once and exchanges them, to the CPU or to each
    rank's device="cuda:N" (see open()).
    arena=pinio.Arena(): pinned memory kept across loads (see open())."""
    ck = open(paths, framework, filter=filter, device=device, allocator=allocator, **kw)
    try:
        return ck.tensors()
    finally:
        ck.close()
# Last: _weights builds on open() and the helpers above.
from ._weights import weights_iterator  # noqa: E402
