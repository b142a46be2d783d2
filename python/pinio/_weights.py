"""pinio.weights_iterator: (name, tensor) pairs of a checkpoint, as the
engines take them (vLLM's model.load_weights, SGLang's iterators), read in
batches of about `batch_bytes`, each batch one pinio.open() of its exact
tensor names.

Why batches: pinio.open() holds the whole selection at once, and an engine
that copies each weight into its own parameter as it goes needs only the
tensors it has not copied yet. Each batch's memory is one allocation that
its tensors keep alive (they hold references on it, as every pinio tensor
does), so a batch is freed when its last tensor is dropped, and a
whole-model load holds about two batches (the one being consumed and the
one being read ahead) plus whatever the caller still keeps.

Why a plan first: the plan (_pinio.plan) reads headers only, so filters
and split rules decide what is read before any tensor byte is: the batches
name exactly the selected tensors (or slices) and nothing else."""
import errno
import threading

from . import Error, _as_paths, _filters, _how, _how_text, _pinio, _split_rules

# the default batch: large enough that each open() reads at depth, small
# enough that two of them are little next to a model
BATCH_BYTES = 256 << 20

# pinio.open() keywords a batch passes through unchanged
_OPEN_KEYS = ("backend", "cache", "direct", "memory", "map_private", "fill", "consumer",
              "max_overread", "round_bytes", "exchange", "allocator", "slot_size", "slots",
              "host_group")


def _check_progress(progress):
    """progress= checked at the call (the bar itself is drawn when reading starts)."""
    if progress is False or progress is None or callable(progress):
        return
    if progress is not True:
        raise TypeError(f"progress={progress!r}: True (a tqdm bar), False or a "
                        "callable(done_bytes, total_bytes)")
    try:
        import tqdm  # noqa: F401
    except ImportError:
        raise ValueError("progress=True draws a tqdm bar and tqdm is not installed: install "
                         "it, or pass a callable(done_bytes, total_bytes)") from None


def _progress_fn(progress, total):
    """progress= as a callable(done_bytes, total_bytes) and its closer."""
    if progress is False or progress is None:
        return None, None
    if callable(progress):
        return progress, None
    from tqdm import tqdm

    bar = tqdm(total=total, unit="B", unit_scale=True, desc="pinio: loading weights")
    state = {"done": 0}

    def step(done, _total):
        bar.update(done - state["done"])
        state["done"] = done

    return step, bar.close


class WeightsIterator:
    """The iterator weights_iterator() returns: (name, tensor) in plan order
    (files in order, tensors by offset). close() (or the end of a with
    block) stops it early and frees what it read ahead; tensors already
    yielded stay valid. report() says what it read so far."""

    def __init__(self, paths, device, filter, split, rank, world, process_group, progress,
                 batch_bytes, read_ahead, framework, open_kw):
        try:
            self._init(paths, device, filter, split, rank, world, process_group, progress,
                       batch_bytes, read_ahead, framework, open_kw)
        except (OSError, ValueError, TypeError) as e:
            if process_group is None:
                raise
            # One rank's refusal is every rank's (issue 37 item 9): the
            # others meet it in the agreement of their first batch's load.
            from ._dist import refuse

            refuse(process_group, e, open_kw.get("host_group"))

    def _init(self, paths, device, filter, split, rank, world, process_group, progress,
              batch_bytes, read_ahead, framework, open_kw):
        bad = sorted(set(open_kw) - set(_OPEN_KEYS))
        if bad:
            raise TypeError(f"weights_iterator: unknown keyword{'s' if len(bad) > 1 else ''} "
                            f"{', '.join(bad)} (it takes {', '.join(_OPEN_KEYS)} besides its own)")
        if isinstance(batch_bytes, bool) or not isinstance(batch_bytes, int) or batch_bytes < 1:
            raise ValueError(f"batch_bytes={batch_bytes!r}: a positive int")
        self._paths = _as_paths(paths)
        self._filters = _filters(filter)
        self._rules = _split_rules(split)
        self._pg = process_group
        self._device = "cpu" if device is None else device
        self._framework = framework
        self._kw = dict(open_kw)
        if open_kw.get("host_group") is not None and process_group is None:
            raise ValueError("host_group= carries the host traffic of a process_group= load")
        if process_group is not None:
            from ._dist import _check_rank_world, _group_rank_world, host_group

            r, n = _group_rank_world(process_group)
            _check_rank_world(rank, world, r, n)
            # an NCCL group's gloo group, resolved (made, once) at the call
            # and named to every batch's load
            self._kw["host_group"] = host_group(process_group, open_kw.get("host_group"))
            rank, world = r, n
        elif self._rules is not None:
            if isinstance(rank, bool) or isinstance(world, bool) or not isinstance(rank, int) \
                    or not isinstance(world, int) or world < 1 or not 0 <= rank < world:
                raise ValueError(f"split= needs rank= and world=, ints with 0 <= rank < world "
                                 f"(or process_group=): rank={rank!r} world={world!r}")
        elif rank is not None or world is not None:
            raise ValueError("rank=/world= need split= (the rules that slice the tensors)")
        self._rank, self._world = rank, world
        # headers only: what is selected, and each tensor's bytes
        if self._rules is not None:
            files, rows, _ = _pinio.plan(self._paths, self._filters, self._rules, rank, world,
                                         None, float(open_kw.get("max_overread", 0.0)))
        else:
            files, rows, _ = _pinio.plan(self._paths, self._filters)
        if self._filters and not rows:
            raise Error(errno.ENOENT,
                        f"no tensor matches filter {self._filters!r} in "
                        f"{', '.join(self._paths)} ({len(files)} file"
                        f"{'' if len(files) == 1 else 's'})")
        self._files = [f[0] for f in files]
        # each tensor's dtype and whole shape (row: ..., full_shape at 6)
        self._headers = {r[0]: (r[1], tuple(r[6])) for r in rows}
        # a group's ranks must cut the same batches: by whole tensors, which
        # every rank's plan agrees on (a rank's slice sizes differ)
        size = 8 if process_group is not None else 3
        self._batches, cur, cur_bytes = [], [], 0
        for r in rows:
            if cur and cur_bytes + r[size] > batch_bytes:
                self._batches.append(cur)
                cur, cur_bytes = [], 0
            cur.append(r)
            cur_bytes += r[size]
        if cur:
            self._batches.append(cur)
        self.total_bytes = sum(r[3] for r in rows)
        self.tensors = len(rows)
        self._read_bytes = 0
        self._io_seconds = 0.0
        self._how = set()  # pinio._how() of the batches' loads
        self._done_bytes = 0
        self._batches_read = 0
        # read ahead in a thread (pinio releases the GIL while it reads);
        # never for a group, whose loads are collectives that must be
        # issued in the same order as the caller's own
        self._read_ahead = bool(read_ahead) and process_group is None
        _check_progress(progress)
        self._progress_arg = progress
        self._gen = self._run()

    def _open(self, batch):
        """The checkpoint of one batch: its files only, its names exactly."""
        from . import open as pinio_open

        fidx = sorted({r[4] for r in batch})
        kw = dict(self._kw)
        if self._rules is not None:
            kw.update(split=self._rules, rank=self._rank, world=self._world)
        if self._pg is not None:
            kw.update(process_group=self._pg)
        return pinio_open([self._files[i] for i in fidx], self._framework,
                        filter=[r[0] for r in batch], device=self._device, **kw)

    def _run(self):
        pending = None  # (thread, box) of the batch read ahead
        progress, progress_close = _progress_fn(self._progress_arg, self.total_bytes)
        try:
            for k, batch in enumerate(self._batches):
                if pending is not None:
                    thread, box = pending
                    thread.join()
                    pending = None
                    if "error" in box:
                        raise box["error"]
                    ck = box["ck"]
                else:
                    ck = self._open(batch)
                try:
                    if self._read_ahead and k + 1 < len(self._batches):
                        box = {}
                        nxt = self._batches[k + 1]

                        def ahead(box=box, nxt=nxt):
                            try:
                                box["ck"] = self._open(nxt)
                            except BaseException as e:  # re-raised in the caller's thread
                                box["error"] = e

                        thread = threading.Thread(target=ahead, name="pinio-weights",
                                                  daemon=True)
                        thread.start()
                        pending = (thread, box)
                    rep = ck.report()
                    self._read_bytes += rep.get("read_bytes", 0)
                    self._io_seconds += rep.get("io_seconds", 0.0)
                    self._how |= _how(rep)
                    self._batches_read += 1
                    # the tensors hold their own references: the checkpoint
                    # is closed before the first is handed out, so the batch's
                    # memory goes with its last tensor
                    tensors = ck.tensors()
                finally:
                    ck.close()
                names = [r[0] for r in batch]
                for r in batch:
                    if r[0] not in tensors:
                        raise Error(errno.EIO, f"tensor {r[0]!r} of {self._files[r[4]]} "
                                    f"(offset {r[5]}) was planned but not loaded")
                for name in names:
                    t = tensors.pop(name)
                    yield name, t
                    del t
                self._done_bytes += sum(r[3] for r in batch)
                del tensors
                if progress is not None:
                    progress(self._done_bytes, self.total_bytes)
        finally:
            if pending is not None:
                thread, box = pending
                thread.join()
                if "ck" in box:
                    box["ck"].close()
            if progress_close is not None:
                progress_close()

    def __iter__(self):
        return self

    def __next__(self):
        return next(self._gen)

    def close(self):
        """Stops early: the batch read ahead is waited for and freed."""
        self._gen.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def files(self):
        """The input files, resolved (shard folders, indexes, repo ids)."""
        return list(self._files)

    def headers(self):
        """{name: (dtype, shape of the whole tensor)} of the selected
        tensors, from the headers (no tensor byte read)."""
        return dict(self._headers)

    def report(self):
        """What was read so far: batches, bytes read, bytes handed out,
        io_seconds (the batches' reads), how (the bytes came: "read",
        "shared", "mapped", joined by "+" in that order; "" before any)."""
        return {"files": len(self._files), "tensors": self.tensors, "batches": len(self._batches),
                "batches_read": self._batches_read, "bytes": self.total_bytes,
                "read_bytes": self._read_bytes, "yielded_bytes": self._done_bytes,
                "io_seconds": self._io_seconds,
                "how": _how_text(self._how)}


def weights_iterator(paths, *, device=None, filter=None, split=None, rank=None, world=None,
                     process_group=None, progress=False, batch_bytes=BATCH_BYTES,
                     read_ahead=True, framework="pt", **open_kw):
    """(name, tensor) pairs of `paths` (files, shard folders, index files,
    hub repo ids ORG/NAME[@REV] from the cache, s3:// URLs: as pinio.open),
    for an engine that copies each weight as it goes (vLLM's
    model.load_weights(weights_iterator(...))).

    The selection (filter=, split= with rank=/world= or process_group=) is
    planned from the headers before any tensor byte is read; then the
    tensors are read in batches of about `batch_bytes` (a tensor larger
    than that is a batch of its own), the next batch read ahead in a thread
    while the caller consumes this one (read_ahead=False: not; never under
    process_group=). Each yielded tensor stays valid and unchanged as long
    as it is referenced; a batch's memory is freed when its last tensor is
    dropped, so a caller that copies and drops holds about two batches.

    device: None or "cpu" (host tensors), or "cuda[:N]" (pinio.open's
    device load, each batch streamed to the device). process_group=pg: each
    batch is a group load (the group reads it once, pinio.open's
    process_group=): every rank must iterate to the end, or close(), in
    step; an NCCL group's host traffic goes over a gloo group of its ranks
    (host_group=, or one pinio creates once: pinio.open's host_group=).
    progress: a callable(done_bytes, total_bytes) called after each
    batch, or True for a tqdm bar. Other keywords go to pinio.open()
    (backend, cache, direct, memory, max_overread, exchange, ...); unknown
    ones raise TypeError.

    Returns a WeightsIterator (an iterator; close() stops it early and
    frees what was read ahead). Raises pinio.Error naming the file, offset
    or tensor, at the call for what the plan finds (a missing file, a bad
    header, a filter that selects nothing) and from next() for a read."""
    return WeightsIterator(paths, device, filter, split, rank, world, process_group, progress,
                           batch_bytes, read_ahead, framework, open_kw)
