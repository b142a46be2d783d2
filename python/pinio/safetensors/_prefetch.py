"""safe_open.prefetch(plan): upstream safetensors' prefetch API (0.9, PR #848
on the prefetch engine of #827/#828) over pinio's slice plans.

prefetch(plan=None) declares once, ahead of time, what the handle will be
asked for, and reads it in one engine run: plan None prefetches every
tensor whole; a mapping {name: index} prefetches, per tensor, the slice
`index` selects, `index` being what get_slice(name)[index] takes (an int,
a slice, a tuple of them, Ellipsis; None or ... for the whole tensor); an
iterable of names prefetches them whole. After it:

- get_slice(name)[index] with the plan's index returns the prefetched slice
  (a zero-copy view of the engine's memory), reading nothing;
- any index into a tensor prefetched whole reads nothing either (the rows
  come from the prefetched tensor), nor does get_tensor(name);
- other slices, and tensors not in the plan, are read as without a plan.

Memory, as upstream's engine: the handle holds a prefetched tensor until
it is handed out. Once every tensor of one prefetch was handed out (or
prefetched again by a later plan), the handle lets go of that run's memory:
it is then the caller's tensors' alone, and freed when the caller drops
them; until then the handle still serves them, without a read, to a
caller who holds them. So a loop that prefetches a layer, uses it and
drops it holds about one layer, however many it runs through
(pinio_prefetch_bytes: what the handle holds now).

A slice is read as a box: one byte range for a first-dimension slice,
strided runs otherwise (holes read through within 1/32 of the slices'
bytes). An index that is not a box (steps, lists, None) prefetches that
tensor whole. tensor_stream() yields (name, tensor) of the prefetched
tensors, in file order (prefetching everything first when nothing was).
device cuda: the prefetched tensors are read into pinned host memory and
copied to the device once.
"""
import operator as _operator
import threading as _threading
import weakref as _weakref


def box(index, shape):
    """(starts, stops, squeeze) of `index` on a tensor of `shape` when it
    selects a box (ints, slices of step 1, a trailing Ellipsis), else None.
    squeeze: the dimensions an int index removes."""
    from . import _as_int, _expand  # get_slice's own notions of an index

    if index is None:  # a plan's None: the whole tensor
        return _whole_box(shape)
    try:
        items = _expand(index, len(shape))
    except IndexError:
        return None
    if len(items) > len(shape):
        return None
    starts, stops, squeeze = [], [], []
    for d, it in enumerate(items):
        n = shape[d]
        if isinstance(it, slice):
            if it.step not in (None, 1):
                return None
            try:
                bounds = [None if v is None else _operator.index(v) for v in (it.start, it.stop)]
            except TypeError:
                return None
            if any(v is not None and not -n <= v <= n for v in bounds):
                return None  # clamped by torch, refused by upstream's narrowing: not a box
            a, b, _ = slice(*bounds).indices(n)
            starts.append(a)
            stops.append(max(a, b))
        elif _as_int(it) is not None:
            i = _as_int(it)
            i = i + n if i < 0 else i
            if not 0 <= i < n:
                return None
            starts.append(i)
            stops.append(i + 1)
            squeeze.append(d)
        else:
            return None
    starts += [0] * (len(shape) - len(items))
    stops += list(shape[len(items):])
    return tuple(starts), tuple(stops), tuple(squeeze)


def _whole_box(shape):
    return (0,) * len(shape), tuple(shape), ()


class _Run:
    """One prefetch's engine run: its checkpoint (None on a device: the host
    copy is closed once placed), its bytes, and the names not handed out yet."""

    __slots__ = ("ck", "nbytes", "names", "pending")

    def __init__(self, ck, nbytes, names):
        self.ck, self.nbytes, self.names, self.pending = ck, nbytes, list(names), set(names)


class Prefetched:
    """What one handle prefetched: name -> [box, tensor shaped like the box
    (None once only weakly held), weak reference to it, its run]."""

    def __init__(self):
        self.tensors = {}
        self.runs = []
        self._lock = _threading.Lock()  # threads sharing a handle let go of a run once

    def close(self):
        for run in self.runs:
            if run.ck is not None:
                run.ck.close()  # tensors handed out keep their own references
        self.runs = []
        self.tensors = {}

    def held_bytes(self):
        """Bytes of the runs the handle still holds for a first handout."""
        return sum(run.nbytes for run in self.runs)

    def add(self, ck, nbytes, placed):
        """A new run: `placed` {name: (box, tensor)}; a name prefetched
        again leaves the run that held it."""
        run = _Run(ck, nbytes, placed)
        self.runs.append(run)
        for n, (b, t) in placed.items():
            old = self.tensors.get(n)
            self.tensors[n] = [b, t, None, run]
            if old is not None:
                self._leave(old[3], n)

    def _get(self, name):
        """(box, tensor, run) of `name`, the tensor alive, or None; a tensor
        handed out and since dropped by the caller is forgotten."""
        e = self.tensors.get(name)
        if e is None:
            return None
        t = e[1] if e[1] is not None else e[2]()
        if t is None:
            with self._lock:
                if self.tensors.get(name) is e:  # not a newer prefetch's
                    del self.tensors[name]
            return None
        return e[0], t, e[3]

    def _leave(self, run, name):
        """`name` no longer needs `run`'s memory held: when no name does,
        the run's checkpoint is closed and its tensors are held weakly
        (what the caller keeps, the handle still serves)."""
        with self._lock:
            run.pending.discard(name)
            if run.pending or run not in self.runs:
                return
            self.runs.remove(run)
        if run.ck is not None:
            run.ck.close()
            run.ck = None
        for n in run.names:
            e = self.tensors.get(n)
            if e is not None and e[3] is run and e[1] is not None:
                e[2], e[1] = _weakref.ref(e[1]), None

    def whole(self, name, shape):
        got = self._get(name)
        if got is None or got[0] != _whole_box(shape):
            return None
        self._leave(got[2], name)
        return got[1]

    def live(self):
        """Whether any prefetched tensor is still there to be served."""
        return any(self._get(n) is not None for n in list(self.tensors))

    def stream(self, name):
        """The prefetched tensor of `name` as tensor_stream yields it, or None."""
        got = self._get(name)
        if got is not None:
            self._leave(got[2], name)
            return got[1]
        return None

    def lookup(self, name, index, shape):
        """The prefetched tensor `index` selects, or None. A None in `index`
        is a new axis, as get_slice's indexing makes it (a plan's None, the
        whole tensor, is prefetch's word only)."""
        from . import _expand, _with_new_axes

        got = self._get(name)
        if got is None:
            return None
        try:
            items = _expand(index, len(shape))
            dims = tuple(it for it in items if it is not None)
            b = box(dims, shape)
        except (TypeError, ValueError, IndexError):
            return None
        if b is None or b[:2] != got[0][:2]:
            return None
        t = got[1]
        self._leave(got[2], name)
        if b[2]:  # int indices drop their dimension, as indexing does
            t = t[tuple(0 if d in b[2] else slice(None) for d in range(len(shape)))]
        if len(dims) != len(items):
            t = t[_with_new_axes(items)]
        return t


def wanted_of(plan, order):
    """{name: index or None} of a prefetch plan (None: every name of `order`)."""
    if plan is None:
        return {n: None for n in order}
    if hasattr(plan, "items"):
        return dict(plan.items())
    if isinstance(plan, str):
        return {plan: None}
    return {n: None for n in plan}


def prefetch(f, plan):
    """safe_open.prefetch's body: one engine run of the plan's slices."""
    import pinio as pinio_pkg
    from pinio import _pinio

    from . import _BACKENDS

    f._check()
    wanted = wanted_of(plan, f._order)
    boxes, slices = {}, []
    for name, index in wanted.items():
        _, dtype, shape, _, _ = f._entry(name)  # SafetensorError for a name not in the file
        b = box(index, list(shape))
        if b is None or dtype in ("F4", "F6_E2M3", "F6_E3M2"):
            b = _whole_box(shape)  # not a box, or elements below a byte: the whole tensor
        boxes[name] = b
        if b[:2] != _whole_box(shape)[:2]:
            slices.append((name, list(b[0]), list(b[1])))
    if not boxes:
        return
    names = [n for n in f._order if n in boxes]  # file order
    try:
        raw = f._load_raw(filters=[f._filter_for(n) for n in names],
                          slices=slices or None, backend=_BACKENDS[f._backend],
                          memory="pinned" if f._device != "cpu" else "auto")
    except (_pinio.Error, ValueError) as e:  # ValueError: a Source closed meanwhile
        raise f._error(e) from None
    rep = raw.report()
    f.pinio_bytes_read += rep["read_bytes"]
    f._how |= pinio_pkg._how(rep)
    f.pinio_loads += 1
    ck = pinio_pkg.Checkpoint(raw, f._fw)
    try:
        place = _placer(f) if f._device != "cpu" else None
        placed = {}
        for n in names:
            t = ck[n]
            placed[n] = (boxes[n], t if place is None else place(n, t))
    except BaseException:
        ck.close()
        raise
    if place is not None:  # on the device now: the pinned host copy is done with
        ck.close()
        ck = None
    f._prefetched.add(ck, rep["bytes"], placed)


def _placer(f):
    """place(name, host tensor) -> the tensor on the handle's device, in
    memory from its allocator= (else torch.empty there), as its get_tensor
    places them; a torch without CUDA is pinio's SafetensorError."""
    import pinio as pinio_pkg
    from pinio import _pinio

    from . import SafetensorError

    alloc = f._allocator
    if alloc is None:
        try:
            alloc, _ = pinio_pkg._torch_allocator(f._device)
        except _pinio.Error as e:
            raise f._error(e) from None

    def place(name, t):
        d = alloc(tuple(t.shape), t.dtype, f._device)
        if tuple(d.shape) != tuple(t.shape) or d.dtype != t.dtype:
            raise SafetensorError(f"allocator: tensor {name!r} got {d.dtype} {list(d.shape)}, "
                                  f"needs {t.dtype} {list(t.shape)}")
        d.copy_(t)  # from pinned memory: synchronous, done when copy_ returns
        return d

    return place


def tensor_stream(f):
    """safe_open.tensor_stream's body."""
    f._check()
    if not f._prefetched.live():
        prefetch(f, None)
    for n in list(f._order):
        t = f._prefetched.stream(n)
        if t is not None:
            yield n, f._own(t)
