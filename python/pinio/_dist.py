"""Tensor-parallel loads over torch.distributed: the group reads the checkpoint once.

pinio.open(paths, split=rules, process_group=pg) / pinio.load(...) on every
rank of `pg`. What each rank ends with is exactly what
pinio.open(paths, split=rules, rank=r, world=n) gives it alone (each
tensor a rule matches is torch.chunk(t, n, dim)[r], the others whole), but
the group reads every selected byte once instead of once per rank:

- slices that are one contiguous byte range (a chunk along the first
  dimension, or along a later one when the leading dimensions have extent
  1) whose end blocks are a small share of them (_direct()), or runs of at
  least DIRECT_RUN_BYTES, are read by their own rank straight into its
  arena, as a single-process split load reads them: no exchange;
- the other tensors (replicated ones, strided slices of shorter runs,
  which would make every rank read nearly every block, and slices so
  small that the blocks at their ends, which the next rank reads too, are
  a large share of them) are read whole by one rank, the
  owner: contiguous stripes of them in plan order, balanced by bytes. The
  owner cuts each rank's slice (a replicated tensor: all of it) and the
  ranks exchange them with all_to_all_single over the group.

How the pieces travel (exchange=): when every rank is on one host (one
/dev/shm), through shared memory (_Board: the owner writes them once, the
others map them; "auto" chooses it, "shm" insists); across hosts, or with
exchange="group", through the process group: the owned tensors are read in
rounds of about `round_bytes`; each round's all_to_all_single is posted
asynchronously and runs while the next round is read (at most two in
flight, bounding the send buffers).

Agreement before any byte moves: every rank builds the plan (pinio's plan,
one per rank of the group, through _pinio.plan: the library cuts the
slices, not this module) and hashes what shapes it (the split rules, the
filter, the world size, each file's size and every tensor's dtype, shape,
offset and slices), and names each of its files as the MPI paths do
(size, SHA-256 of the header bytes, SHA-256 of 16 data blocks spread over
it: a node-local copy of the same shapes and other weights has the plan of
rank 0's file, not its bytes); the ranks all_gather (digest, error, files).
A rank that failed to plan, whose files are not rank 0's, or whose digest
differs from rank 0's, makes every rank raise the same pinio.Error, naming
the file and the ranks: nobody is left waiting in a collective. An
argument a rank refuses before it plans (pinio.open's checks, a rank= or
world= other than the group's) is agreed in the same all_gather (refuse()):
every rank raises that ValueError or TypeError. The tensors are then
selected by exact name (a name is no pattern: "x.weight" must not read
"x.weight.absmax", "h[0].w" must read itself). A
rank whose read fails later still takes part in every exchange (sending
zeros of the agreed sizes), and the status gathered at the end makes
every rank raise the same error.

To a device (device="cuda:N", open_group_device): the slices a rank reads
itself stream from the file to its device through the CUDA sink (as a
single-process device load streams them); the exchanged tensors are read by
their owners and exchanged as above (board or rounds), then each rank's
pieces are copied from host memory to its device through the same sink
(_pinio.copy_gpu: the sink fed from memory instead of reads), before the
outcome is agreed.

gloo (torch 1.13) has all_to_all_single (also asynchronous) and
all_gather, but not all_to_all over tensor lists: only the former is used.

An NCCL group (every GPU job's default) takes only device tensors, and
every message here is a host one: the agreements (all_gather_object of
pickled host bytes) and the exchange's host buffers. So the traffic of a
load over `pg` goes over its host group (host_group()): `pg` itself when
its backend takes host tensors (gloo, mpi), else the gloo group of the
same ranks the caller passes (host_group=; vLLM's GroupCoordinator.cpu_group
is one), else one pinio creates once per group and keeps for the process.
No device tensor crosses a group: a device load's pieces are exchanged in
host memory (board or rounds) and copied to each rank's own device
(open_group_device).
"""
import errno
import hashlib
import mmap
import os
import socket
import time

from . import _pinio
from ._pinio import Error

_ALIGN = 64  # each piece's offset in the exchange buffers: any dtype's view is aligned
ROUND_BYTES = 256 << 20
# a strided slice whose runs are at least this long is read by its own rank
# (its over-read: at most two alignment blocks a run, under 4 %)
DIRECT_RUN_BYTES = 256 << 10
# a slice of one range is read by its own rank when the blocks at its ends
# (O_DIRECT reads whole blocks, and the neighbouring ranks read them too)
# add at most this share of it, the library's own budget for over-read
# (plan.h, max_overread's default); a smaller slice is exchanged, read once
# by its owner with the tensor: small tensors' slices read each by its rank
# read the checkpoint up to twice
DIRECT_OVERREAD = 1 / 32
_BLOCK = 4096
# the staging slots of a device load's copies from host memory (slot_size=0)
COPY_SLOT_MIN, COPY_SLOT_MAX = 64 << 10, 8 << 20


def _group_rank_world(pg):
    """(rank, size) of this process in `pg`; raises when `pg` is no group
    this process is in (then there is nobody to agree with)."""
    import torch.distributed as dist

    r, n = dist.get_rank(pg), dist.get_world_size(pg)
    if not isinstance(r, int) or not 0 <= r < n:
        raise ValueError(f"process_group={pg!r}: this process is not in it (rank {r} of {n})")
    return r, n


# Backends whose collectives take host (CPU) tensors: the group carries
# pinio's traffic itself. Any other (nccl, ucc, a custom one) needs a gloo
# group of the same ranks.
_HOST_BACKENDS = ("gloo", "mpi")
# id(pg) -> (pg, its gloo group): created once per group and process (pg
# is held, so its id is never another group's)
_HOST_GROUPS = {}


def _backend(pg):
    import torch.distributed as dist

    try:
        return str(dist.get_backend(pg)).lower()
    except Exception:  # noqa: BLE001 (an object torch does not know: no backend)
        return None


def _ranks(pg, what="process_group"):
    """The global ranks of `pg`, in its rank order."""
    import torch.distributed as dist

    try:
        return list(dist.get_process_group_ranks(pg))
    except Exception as e:  # noqa: BLE001 (an object torch does not know)
        raise ValueError(f"{what}={pg!r} is no process group of this job "
                         f"({type(e).__name__}: {e})") from None


def host_group(pg, given=None):
    """The group that carries a load's host traffic for process group `pg`
    (see the module's text): `given` (host_group=) when passed, checked to
    be of the same ranks in the same order; `pg` when its backend takes
    host tensors; else a gloo group of pg's ranks, created the first time
    and reused by every later load over `pg`. Creating it is collective:
    torch.distributed.new_group must be called by every rank of the job in
    the same order, which holds when `pg` is the whole job (every rank is
    in the load); for a group of part of the job, torch's
    use_local_synchronization (torch >= 2.1) lets pg's ranks alone create
    it, and older torch raises ValueError asking for host_group=. Every
    rank of `pg` decides alike (the same group, the same torch)."""
    import torch.distributed as dist

    if given is not None:
        if given is pg:
            return pg
        if _backend(given) not in _HOST_BACKENDS:
            raise ValueError(f"host_group={given!r}: its backend {_backend(given)!r} does not "
                             f"take host tensors (gloo or mpi)")
        if _ranks(given, "host_group") != _ranks(pg):
            raise ValueError(f"host_group= has the ranks {_ranks(given)} and process_group= "
                             f"{_ranks(pg)}: they must be the same ranks in the same order")
        return given
    backend = _backend(pg)
    if backend in _HOST_BACKENDS:
        return pg
    got = _HOST_GROUPS.get(id(pg))
    if got is not None and got[0] is pg:
        return got[1]
    import inspect

    ranks = _ranks(pg)
    kw = {}
    if len(ranks) < dist.get_world_size():
        if "use_local_synchronization" not in inspect.signature(dist.new_group).parameters:
            raise ValueError(
                f"process_group= is a {backend} group of {len(ranks)} of the job's "
                f"{dist.get_world_size()} ranks ({ranks}), whose collectives take device tensors "
                f"only; pinio's host traffic needs a gloo group of the same ranks, which this "
                f"torch ({_torch_version()}) can create only with every rank of the job: pass "
                f"host_group= (e.g. dist.new_group({ranks}, backend='gloo'), created on every "
                f"rank; vLLM's cpu_group)")
        kw["use_local_synchronization"] = True
    host = dist.new_group(ranks, backend="gloo", **kw)
    _HOST_GROUPS[id(pg)] = (pg, host)
    return host


def _torch_version():
    import torch

    return torch.__version__


def _check_rank_world(rank, world, r, n):
    """rank=/world= given with process_group= must be the group's own."""
    if (rank is not None and rank != r) or (world is not None and world != n):
        raise ValueError(f"rank={rank!r} world={world!r} differ from the process group's "
                         f"rank {r} of {n}")


# The argument errors (ValueError, TypeError) that every rank raises as the
# rank that found them did; any other failure to plan is a pinio.Error.
_ARG_ERRORS = {"ValueError": ValueError, "TypeError": TypeError}


def _plan_agreed(pg, n, digest, failure, ids=None):
    """The first agreement of a group load: every rank's (digest, failure,
    host, token, pid identity, file identities). `failure`: None, or (errno,
    why, kind) of this rank; `ids`: its _file_idents. A failure on any rank raises the same error on every rank
    (the lowest failing rank's): nobody goes on to wait in a collective the
    failed rank never reaches."""
    got = _agree(pg, n, (digest, failure, _host(), os.urandom(8).hex(), _ident(), ids))
    for k, g in enumerate(got):
        if g[1] is not None:
            code, why, kind = g[1]
            msg = f"process group load: rank {k} of {n} {why}"
            raise _ARG_ERRORS[kind](msg) if kind in _ARG_ERRORS else Error(code, msg)
    return got


def _plan_failure(e):
    """(errno, why, kind) of an exception raised before or while planning."""
    if isinstance(e, (ValueError, TypeError)):
        return errno.EINVAL, f"refused its arguments: {e}", type(e).__name__
    code, err = _failure(e, errno.EINVAL)
    return code, f"could not plan its load: {err}", None


def refuse(pg, e, host=None):
    """An argument error `e` found before a group load's agreement: every
    rank of `pg` raises it (each rank that calls this, and the others at
    their own agreement), over its host group (host_group(pg, host)).
    Raises `e` itself when `pg` is no usable group."""
    try:
        _, n = _group_rank_world(pg)
        hg = host_group(pg, host)
    except Exception:  # noqa: BLE001 (no group: this rank alone)
        raise e from None
    _plan_agreed(hg, n, None, _plan_failure(e))
    raise e  # not reached: the agreement raised it


def _direct(row):
    """Whether a rank's slice (its plan row) is read by the rank itself:
    runs of at least DIRECT_RUN_BYTES, or one range whose blocks at its
    ends are at most DIRECT_OVERREAD of it (an empty one reads nothing)."""
    nbytes, off, runs = row[3], row[5], row[10]
    if runs > 1:
        return nbytes // runs >= DIRECT_RUN_BYTES
    if not nbytes:
        return True
    extent = -(-(off + nbytes) // _BLOCK) * _BLOCK - off // _BLOCK * _BLOCK
    return extent - nbytes <= nbytes * DIRECT_OVERREAD


class _Tensor:
    """One selected tensor of the group's plan, with every rank's slice."""

    __slots__ = ("name", "dtype", "full_shape", "full_nbytes", "file", "offset", "boxes",
                 "nbytes", "contiguous", "sliced", "owner")

    def __init__(self, rows):
        # rows: this tensor's row of each rank's plan (_pinio.plan)
        name, dtype, _, _, file, _, full_shape, full_offset, full_nbytes, _, _ = rows[0]
        self.name, self.dtype, self.file, self.offset = name, dtype, file, full_offset
        self.full_shape, self.full_nbytes = tuple(full_shape), full_nbytes
        # a rank whose chunk is the whole tensor has no slice in its plan,
        # the others do (a dimension of 1 in 2: rank 1's chunk is empty)
        self.sliced = any(r[9] is not None for r in rows)
        # per rank: (start, stop) per dimension
        self.boxes = [tuple((s, s + e) for s, e in zip(r[9] or (0,) * len(r[2]), r[2]))
                      for r in rows]
        self.nbytes = [r[3] for r in rows]
        # read by its own rank: one range, or runs long enough that the
        # alignment at their ends is a small share (row-parallel slices of
        # wide tensors); shorter runs would have each rank read nearly
        # every block of the tensor
        self.contiguous = self.sliced and all(_direct(r) for r in rows)
        self.owner = None

    def key(self):
        return (self.name, self.dtype, self.full_shape, self.full_nbytes, self.file, self.offset,
                self.sliced, tuple(self.boxes))


def _plan(paths, filters, rules, world, max_overread, how=()):
    """(files [(path, size, metadata)], [_Tensor] in plan order, digest) of
    the group; `how` is hashed too."""
    plans = [_pinio.plan(paths, filters, rules, k, world, None, max_overread)
             for k in range(world)]
    files = plans[0][0]
    tensors = [_Tensor(rows) for rows in zip(*(p[1] for p in plans))]
    h = hashlib.sha256()
    h.update(repr((rules, filters, world, max_overread, tuple(how), [f[1] for f in files],
                   [t.key() for t in tensors])).encode())
    return files, tensors, h.hexdigest()


def _file_idents(paths):
    """Each input file as the ranks compare it, as the MPI paths do
    (mpi/mpi_verify.c): (path, size, SHA-256 of the header bytes, SHA-256
    of 16 data blocks spread over the file). A rank may read a node-local
    copy: the plan, made from the headers, cannot tell a stale copy of the
    same shapes from rank 0's file; its blocks can."""
    return [(path, size, hashlib.sha256(head).hexdigest(), hashlib.sha256(blocks).hexdigest())
            for path, size, head, blocks in _pinio.idents(paths)]


def _same_files(n, ids):
    """Raises, on every rank alike (`ids`: every rank's _file_idents), when
    a rank's files are not rank 0's: the first file that differs, why, and
    every rank whose copy differs (a splice of two copies' bytes is never
    handed out)."""
    if any(len(i) != len(ids[0]) for i in ids):
        return  # other files: the plans differ, which is said next
    for f, (path, size, head, blocks) in enumerate(ids[0]):
        odd = [k for k in range(1, n) if ids[k][f][1:] != (size, head, blocks)]
        if not odd:
            continue
        why = ("size" if any(ids[k][f][1] != size for k in odd) else
               "header (SHA-256 of its bytes)" if any(ids[k][f][2] != head for k in odd) else
               "data (SHA-256 of 16 blocks spread over the file)")
        theirs = ", ".join(f"{ids[k][f][0]} on rank {k}" if ids[k][f][0] != path else
                           f"the same path on rank {k}" for k in odd)
        raise Error(errno.EIO, f"process group load: {path}: its {why} differs on "
                    f"rank{'s' if len(odd) > 1 else ''} {', '.join(map(str, odd))} of {n} from "
                    f"rank 0's file ({theirs}): a stale or different copy; no rank read "
                    f"anything")


def _assign_owners(ex, world):
    """Owners of the exchanged tensors `ex` (returned): contiguous stripes in
    plan order, balanced by bytes (a tensor goes to the rank whose share
    holds its middle)."""
    total = sum(t.full_nbytes for t in ex) or 1
    done = 0
    for t in ex:
        mid = done + t.full_nbytes / 2
        t.owner = min(world - 1, int(mid * world // total))
        done += t.full_nbytes
    return ex


def _rounds(ex, round_bytes):
    """The exchanged tensors cut into rounds of about `round_bytes` (plan order)."""
    out, cur, size = [], [], 0
    for t in ex:
        cur.append(t)
        size += t.full_nbytes
        if size >= round_bytes:
            out.append(cur)
            cur, size = [], 0
    if cur:
        out.append(cur)
    return out


def _failure(e, default):
    """(errno, message) of an exception, as the other ranks are told it."""
    if isinstance(e, OSError) and e.strerror:  # pinio.Error: the library's diagnostic
        return e.errno or default, e.strerror
    return default, f"{type(e).__name__}: {e}"


def _agree(pg, world, payload):
    import torch.distributed as dist

    got = [None] * world
    dist.all_gather_object(got, payload, group=pg)
    return got


def _pad(n):
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


def _elem(np, t):
    """A numpy type as wide as one element of `t` (its bytes, whatever its
    dtype: copies then move whole elements, never byte by byte), or None
    for a tensor without elements or read whole."""
    numel = 1
    for d in t.full_shape:
        numel *= d
    if not t.sliced or numel == 0:
        return None
    size = t.full_nbytes // numel
    return {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}.get(size) or np.dtype(f"V{size}")


def _packed(t):
    """(dim, bits of one index of it) of a sliced tensor whose elements are
    packed below a byte (F4, F6), else None. Its slices are chunks along
    `dim` whose every run starts and ends on a byte (the library refused
    any other), so the tensor is cut as bytes: rows of the dimensions
    before `dim`, each that many bytes."""
    from . import _PACKED_BITS

    bits = _PACKED_BITS.get(t.dtype)
    if bits is None or not t.sliced or not t.full_nbytes:
        return None
    full = tuple((0, n) for n in t.full_shape)
    dim = next((d for box in t.boxes for d, ab in enumerate(box) if ab != full[d]), 0)
    for n in t.full_shape[dim + 1:]:
        bits *= n
    return dim, bits


def _byte_view(np, buf, t):
    """The whole tensor `t` in `buf`: shaped full_shape in elements of its
    width when sliced (a packed one: rows of bytes, _packed()), else flat
    bytes."""
    pk = _packed(t)
    if pk is not None:
        outer = 1
        for n in t.full_shape[:pk[0]]:
            outer *= n
        return np.frombuffer(buf, dtype=np.uint8).reshape(outer, -1)
    el = _elem(np, t)
    if el is None:
        return np.frombuffer(buf, dtype=np.uint8)
    return np.frombuffer(buf, dtype=el).reshape(t.full_shape)


def _piece(t, whole, k):
    """Rank k's slice of `t` from `whole` (its byte view): an array, maybe a view."""
    if not t.sliced:
        return whole
    pk = _packed(t)
    if pk is not None:
        a, b = t.boxes[k][pk[0]]
        return whole[:, a * pk[1] // 8:b * pk[1] // 8]
    return whole[tuple(slice(a, b) for a, b in t.boxes[k])]


class _Round:
    """One round's exchange: what this rank sends and receives."""

    def __init__(self, np, tensors, me, world):
        self.tensors = tensors
        self.send_sizes = [0] * world
        self.recv_sizes = [0] * world
        self.recv_at = {}      # name -> (offset, nbytes) in the receive buffer
        send_at = []           # (tensor, k, offset)
        soff = roff = 0
        for k in range(world):  # the buffers are laid out by peer, tensors in plan order
            s0, r0 = soff, roff
            if k != me:
                for t in tensors:
                    if t.owner == me:
                        send_at.append((t, k, soff))
                        soff += _pad(t.nbytes[k] if t.sliced else t.full_nbytes)
                    elif t.owner == k:
                        nb = t.nbytes[me] if t.sliced else t.full_nbytes
                        self.recv_at[t.name] = (roff, nb)
                        roff += _pad(nb)
            self.send_sizes[k] = soff - s0
            self.recv_sizes[k] = roff - r0
        self.send_at = send_at
        self.send = np.zeros(soff, dtype=np.uint8)
        self.recv = np.empty(roff, dtype=np.uint8)
        self.work = None

    def fill(self, np, ck, index):
        """Copies this rank's owned tensors' pieces from checkpoint `ck`."""
        views = {}
        for t, k, off in self.send_at:
            whole = views.get(t.name)
            if whole is None:
                whole = views[t.name] = _byte_view(np, ck.buffer(index[t.name]), t)
            p = _piece(t, whole, k)
            if p.size:
                dst = self.send[off:off + p.nbytes].view(p.dtype)
                dst.reshape(p.shape)[...] = p

    def post(self, pg):
        import torch
        import torch.distributed as dist

        self.work = dist.all_to_all_single(torch.from_numpy(self.recv), torch.from_numpy(self.send),
                                           self.recv_sizes, self.send_sizes, group=pg,
                                           async_op=True)

    def wait(self):
        if self.work is not None:
            self.work.wait()
            self.work = None
        self.send = None


def _host():
    """What ranks share when they share /dev/shm: the host (boot) and the
    very tmpfs (containers of one host may each have their own)."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
        st = os.stat("/dev/shm")
        return (socket.gethostname(), boot, st.st_dev, st.st_ino)
    except OSError:
        return (socket.gethostname(), os.getpid())  # unknown: never equal to another rank's


# A file of the exchange a killed rank left (SIGKILL, OOM) holds tmpfs
# memory until reboot. Its name carries its writer's pid namespace and pid,
# so the next group load on the host removes it once provably abandoned:
# same pid namespace, that pid dead, untouched for a minute (the rule of
# every temporary pinio makes, src/base/stale.c).
STALE_AFTER_S = 60


def _ident():
    """(pid namespace, pid): who writes this rank's exchange file."""
    try:
        ns = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        ns = 0
    return ns, os.getpid()


def _sweep_stale(now=None):
    """Removes exchange files of dead writers of this pid namespace;
    returns how many."""
    ns, _ = _ident()
    if not ns:
        return 0
    prefix = f"pinio-tp-{ns}-"
    now = time.time() if now is None else now
    gone = 0
    try:
        names = os.listdir("/dev/shm")
    except OSError:
        return 0
    for name in names:
        if not name.startswith(prefix):
            continue
        pid = name[len(prefix):].partition("-")[0]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
            continue  # alive (or alive as someone else's: left alone)
        except ProcessLookupError:
            pass
        except (PermissionError, OverflowError):
            continue
        path = os.path.join("/dev/shm", name)
        try:
            if now - os.lstat(path).st_mtime < STALE_AFTER_S:
                continue
            os.unlink(path)
            gone += 1
        except OSError:
            pass
    return gone


class _Board:
    """The exchange of a group on one host: each owner writes every other
    rank's pieces of its tensors into a file of its own under /dev/shm (one
    copy); once every rank is past the outcome's agreement, each maps the
    owners' files private and its tensors are views of them (no second
    copy, nothing through the process group); once every rank has mapped
    them, each owner removes its file (the mappings stay)."""

    def __init__(self, np, ex, me, n, token, idents):
        self.me, self.n, self.token, self.idents = me, n, token, idents
        self.owned = [t for t in ex if t.owner == me]
        self.layout = {}  # owner -> [(tensor, dest, offset, nbytes)]
        self.size = [0] * n
        for t in ex:
            at = self.layout.setdefault(t.owner, [])
            for k in range(n):
                if k != t.owner:
                    nb = t.nbytes[k] if t.sliced else t.full_nbytes
                    at.append((t, k, self.size[t.owner], nb))
                    self.size[t.owner] += _pad(nb)
        self.sent = sum(nb for _, _, _, nb in self.layout.get(me, []))
        self.received = sum(nb for s, at in self.layout.items() if s != me
                            for _, k, _, nb in at if k == me)
        self.created = False

    def _path(self, owner):
        ns, pid = self.idents[owner]
        return f"/dev/shm/pinio-tp-{ns}-{pid}-{self.token}-{owner}"

    def write(self, np, ck, index):
        if not self.size[self.me]:
            return
        _sweep_stale()
        path, size = self._path(self.me), self.size[self.me]
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        self.created = True
        try:
            # the pages reserved before a byte is written: a store through
            # the mapping past what the tmpfs has left (Docker's /dev/shm is
            # 64 MiB) is SIGBUS, which kills the owner and leaves the others
            # waiting; a reservation that fails is an error the group agrees on
            try:
                os.posix_fallocate(fd, 0, size)
            except OSError as e:
                self.remove()
                raise Error(e.errno, self._no_room(e, size)) from None
            mm = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        try:
            dst = np.frombuffer(mm, dtype=np.uint8)
            views = {}
            for t, k, off, nb in self.layout[self.me]:
                whole = views.get(t.name)
                if whole is None:
                    whole = views[t.name] = _byte_view(np, ck.buffer(index[t.name]), t)
                p = _piece(t, whole, k)
                if nb:
                    dst[off:off + nb].view(p.dtype).reshape(p.shape)[...] = p
        finally:
            # the mapping closes only once no view of it is left, also when
            # a piece failed (else BufferError hides the failure)
            dst = views = None
            mm.close()

    def _no_room(self, e, size):
        try:
            st = os.statvfs(os.path.dirname(self._path(self.me)))
            free = f"{st.f_bavail * st.f_frsize} free"
        except OSError:
            free = "free space unknown"
        return (f"{self._path(self.me)}: cannot reserve the shared-memory exchange's {size} bytes "
                f"({free}): {os.strerror(e.errno) if e.errno else e}; a larger /dev/shm "
                f"(docker run --shm-size) or exchange='group' avoids it")

    def read(self, np):
        """{name: this rank's bytes of it} from the owners' files."""
        out = {}
        for s, at in self.layout.items():
            mine = [(t, off, nb) for t, k, off, nb in at if k == self.me and nb]
            if s == self.me or not mine:
                continue
            fd = os.open(self._path(s), os.O_RDONLY | os.O_CLOEXEC)
            try:  # private: the tensors are writable, as every pinio tensor, never shared
                mm = mmap.mmap(fd, self.size[s], access=mmap.ACCESS_COPY)
            finally:
                os.close(fd)
            a = np.frombuffer(mm, dtype=np.uint8)
            for t, off, nb in mine:
                out[t.name] = a[off:off + nb]
        return out

    def remove(self):
        if self.created:
            self.created = False
            try:
                os.unlink(self._path(self.me))
            except FileNotFoundError:
                pass


def _load(paths, names, slices, opts):
    """A raw checkpoint of the tensors `names` (slices: [(name, starts,
    stops)]), or None. By exact name: as patterns, "x.weight" would read
    "x.weight.absmax" too (some other step's), and a name holding `[`
    would select what it globs instead of itself."""
    if not names:
        return None
    return _pinio.load(paths, filters=names, slices=slices or None, exact=True, **opts)


class GroupCheckpoint:
    """What pinio.open(..., process_group=pg) returns: this rank's tensors
    (zero-copy views of the arena or of the exchange's receive buffers),
    the same face as pinio.Checkpoint."""

    device = "cpu"

    def __init__(self, tensors, infos, files, report, metadata, framework):
        self._tensors = tensors  # name -> the buffer of its bytes (None: no bytes)
        self._framework = framework
        self._infos = infos
        self._files = files
        self._report = report
        self._metadata = metadata
        self._order = list(tensors)

    def _open(self):
        if self._tensors is None:
            raise ValueError("the checkpoint is closed")
        return self._tensors

    def keys(self):
        return sorted(self._open())

    def offset_keys(self):
        return list(self._order)

    def __len__(self):
        return len(self._order) if self._tensors is not None else 0

    def __contains__(self, name):
        return name in self._open()

    def __iter__(self):
        return iter(self.keys())

    def __getitem__(self, name):
        """The tensor, made on access as pinio.Checkpoint makes it (a dtype
        the framework lacks raises here, not at the load)."""
        from . import tensor_from_buffer

        buf = self._open()[name]
        dt, shape, _, _, _ = self._infos[name]
        return tensor_from_buffer(buf, dt, shape, self._framework, name)

    def tensors(self):
        self._open()
        return {n: self[n] for n in self._order}

    def info(self, name):
        """(dtype, shape, nbytes, file, file_offset of the whole tensor) of this rank's slice."""
        self._open()
        dt, shape, nbytes, f, off = self._infos[name]
        return dt, list(shape), nbytes, f, off

    def buffer(self, name):
        raise TypeError(f"tensor {name!r}: a process-group load's tensors have no exporter "
                        "of their own (use the tensor)")

    def metadata(self, file=0):
        if not 0 <= file < len(self._metadata):
            raise IndexError("file index out of range")
        md = self._metadata[file]
        return None if md is None else dict(md)

    def files(self):
        return list(self._files)

    def report(self):
        """What this rank did: read_bytes (this rank's reads), bytes (its
        slices), group_read_bytes and group_bytes (the whole group's reads,
        and the selected tensors' bytes: one copy of the data), sent_bytes,
        received_bytes, rounds, seconds."""
        return dict(self._report)

    def close(self):
        self._tensors = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


class _Group:
    """The steps every process-group load shares, whatever the destination:
    the plan agreed by every rank, this rank's reads of the tensors it owns
    for the group and their exchange (through /dev/shm or the group), and
    the outcome agreed at the end. `dest` ("cpu", "cuda"): hashed with the
    plan, as the exchange's options, since ranks that differ in them would
    take different steps. After it: `ex`, the exchanged tensors (owners
    assigned), and `direct`, the slices each rank reads itself."""

    def __init__(self, pg, paths, filter, rules, rank, world, max_overread, exchange,
                 round_bytes, dest, host=None):
        from . import _as_paths, _filters

        self.me, self.n = me, n = _group_rank_world(pg)
        # every collective below carries host memory: over the host group
        # (`pg` itself unless its backend takes device tensors only). Its
        # refusal is raised here alone: there is no group to agree over,
        # and every rank that passes the same groups finds the same.
        self.pg = host_group(pg, host)
        self.t0 = time.monotonic()
        self.rules = rules = [] if rules is None else rules  # none: every tensor replicated
        # every check of this rank's arguments before the agreement, whose
        # failure every rank raises
        failure = digest = filters = ids = None
        try:
            if exchange not in ("auto", "shm", "group"):
                raise ValueError(f"exchange={exchange!r} is invalid (auto, shm or group)")
            _check_rank_world(rank, world, me, n)
            self.paths = paths = _as_paths(paths)
            filters = _filters(filter)
            self.round_bytes = ROUND_BYTES if round_bytes is None else max(1, int(round_bytes))
            self.files, self.tensors, digest = _plan(paths, filters, rules, n, max_overread,
                                                     (exchange, self.round_bytes, dest))
            ids = _file_idents(paths)
        except (OSError, ValueError, TypeError) as e:
            failure = _plan_failure(e)
        got = _plan_agreed(self.pg, n, digest, failure, ids)
        _same_files(n, [g[5] for g in got])
        differ = [k for k, g in enumerate(got) if g[0] != got[0][0]]
        if differ:
            raise Error(errno.EINVAL,
                        f"process group load: the plan of rank{'s' if len(differ) > 1 else ''} "
                        f"{', '.join(map(str, differ))} differs from rank 0's (split rules, "
                        f"filter, the group's size, the checkpoint's files, the destination or "
                        f"the exchange's options are not the same on every rank); no rank read "
                        f"anything")
        if filters and not self.tensors:
            raise Error(errno.ENOENT, f"no tensor matches filter {filters!r} in {', '.join(paths)}")
        one_host = all(g[2] == got[0][2] for g in got)
        if exchange == "shm" and not one_host:
            raise Error(errno.EINVAL, "process group load: exchange='shm' needs every rank on "
                        "one host (one /dev/shm); the group spans several")
        self.shm = exchange == "shm" or (exchange == "auto" and one_host and n > 1)
        self.token, self.idents = got[0][3], [tuple(g[4]) for g in got]
        self.failure = None    # (errno, "failed to ...: why") of this rank
        self.read_bytes, self.io_seconds = 0, 0.0
        self.keep, self.out_raw, self.pending = [], {}, []
        self.board = self.rounds = None
        self.ex = _assign_owners([t for t in self.tensors if not t.contiguous], n)
        self.direct = [t for t in self.tensors if t.contiguous]

    def add_reads(self, raw_report):
        self.read_bytes += raw_report["read_bytes"]
        self.io_seconds += raw_report["io_seconds"]

    def fail(self, e, what):
        code, msg = _failure(e, errno.EIO)
        self.failure = (code, f"{what}: {msg}")

    def start_exchange(self, np, opts):
        """Reads this rank's exchanged tensors whole and starts the exchange
        of every rank's pieces of them."""
        me, n, ex, paths = self.me, self.n, self.ex, self.paths
        self.rounds = [] if self.shm else _rounds(ex, self.round_bytes)
        if self.shm:
            self.board = _Board(np, ex, me, n, self.token, self.idents)

        def read_owned(owned, sink):
            what = "failed to read"
            try:
                raw = _load(paths, [t.name for t in owned], None, opts)
                self.keep.append(raw)
                self.add_reads(raw.report())
                index = {raw.info(i)[0]: i for i in range(len(raw))}
                what = "failed to fill the exchange"
                sink(np, raw, index)
                for t in owned:
                    self.out_raw[t.name] = (raw, index[t.name])
            except Exception as e:  # noqa: BLE001 (any: the others must hear of it)
                self.fail(e, what)

        if self.board is not None and self.board.owned:
            read_owned(self.board.owned, self.board.write)
        for group in self.rounds:
            rd = _Round(np, group, me, n)
            owned = [t for t in group if t.owner == me]
            if self.failure is None and owned:
                read_owned(owned, rd.fill)
            rd.post(self.pg)  # a failed rank sends its zeros: nobody waits for it
            self.pending.append(rd)
            if len(self.pending) > 2:
                self.pending[-3].wait()

    def finish(self, np, after=None, what="failed"):
        """Waits for the exchange and agrees on the outcome; returns
        ({name: this rank's bytes of it received}, the group's read bytes).
        `after(received)`: this rank's last step, run once the boards are
        complete; whatever it raises is agreed on too ("rank k of n
        {what}: ..."), so that every rank raises the same error."""
        pg, n = self.pg, self.n
        for rd in self.pending:
            rd.wait()
        try:
            got = _agree(pg, n, (self.failure, self.read_bytes))
            for k, (f, _) in enumerate(got):
                if f is not None:
                    raise Error(f[0], f"process group load: rank {k} of {n} {f[1]}")
            group_read = sum(rb for _, rb in got)
            recv_of = {}
            for rd in self.pending:
                for name, (off, length) in rd.recv_at.items():
                    recv_of[name] = rd.recv[off:off + length]
            if self.board is not None or after is not None:
                failure = None
                try:
                    if self.board is not None:
                        recv_of.update(self.board.read(np))
                except OSError as e:
                    code, msg = _failure(e, errno.EIO)
                    failure = (code, f"could not map the shared memory of the exchange: {msg}")
                if failure is None and after is not None:
                    try:
                        after(recv_of)
                    except Exception as e:  # noqa: BLE001 (any: the others must hear of it)
                        code, msg = _failure(e, errno.EIO)
                        failure = (code, f"{what}: {msg}")
                # every rank has mapped the boards
                for k, f in enumerate(_agree(pg, n, failure)):
                    if f is not None:
                        raise Error(f[0], f"process group load: rank {k} of {n} {f[1]}")
        finally:
            if self.board is not None:
                self.board.remove()
        return recv_of, group_read

    def report(self, tensors, mine, group_read):
        board = self.board
        return {
            "files": len(self.files), "tensors": len(tensors), "bytes": mine,
            "read_bytes": self.read_bytes, "io_seconds": self.io_seconds,
            "seconds": time.monotonic() - self.t0, "group_read_bytes": group_read,
            "group_bytes": sum(t.full_nbytes for t in self.tensors),
            "sent_bytes": sum(sum(rd.send_sizes) for rd in self.pending)
            + (board.sent if board else 0),
            "received_bytes": sum(sum(rd.recv_sizes) for rd in self.pending)
            + (board.received if board else 0),
            "rounds": len(self.rounds), "rank": self.me, "world": self.n,
            "exchange": "shm" if self.shm else "group",
            "shm_files": [board._path(k) for k in range(self.n)] if board else None,  # removed
            "exchanged_tensors": len(self.ex), "direct_tensors": len(self.direct),
        }

    def close(self):
        for raw in self.keep:
            raw.close()  # the tensors hold their own references


def open_group(paths, framework, rules, pg, *, rank=None, world=None, filter=None,
               backend="auto", cache="auto", direct="auto", memory="auto", max_overread=0.0,
               round_bytes=None, exchange="auto", host_group=None):
    """pinio.open(..., process_group=pg): see the module's text."""
    import numpy as np

    from . import FRAMEWORKS

    fw = FRAMEWORKS.get(framework)
    if fw is None:
        refuse(pg, ValueError(f"framework {framework!r} is invalid (pt or np)"), host_group)

    # 1. the plan, agreed by every rank before any byte moves
    g = _Group(pg, paths, filter, rules, rank, world, max_overread, exchange, round_bytes, "cpu",
               host_group)
    me, tensors, direct_ts = g.me, g.tensors, g.direct

    # 2. reads and exchanges, pipelined
    opts = dict(backend=backend, cache=cache, direct=direct, memory=memory,
                max_overread=max_overread)
    g.start_exchange(np, opts)
    raw_direct = None
    if g.failure is None and direct_ts:
        try:
            slices = [(t.name, [a for a, _ in t.boxes[me]], [b for _, b in t.boxes[me]])
                      for t in direct_ts]
            raw_direct = _load(g.paths, [t.name for t in direct_ts], slices, opts)
            g.add_reads(raw_direct.report())
        except Exception as e:  # noqa: BLE001 (any: the others must hear of it)
            g.fail(e, "failed to read")

    # 3. the outcome, agreed (the boards are complete once every rank is past it)
    recv_of, group_read = g.finish(np)

    # 4. this rank's tensors, in plan order
    out, infos = {}, {}
    direct_index = {} if raw_direct is None else {raw_direct.info(i)[0]: i
                                                 for i in range(len(raw_direct))}
    mine = 0
    for t in tensors:
        b = t.boxes[me]
        shape = [hi - lo for lo, hi in b] if t.sliced else list(t.full_shape)
        nb = t.nbytes[me] if t.sliced else t.full_nbytes
        mine += nb
        infos[t.name] = (t.dtype, shape, nb, t.file, t.offset)
        if t.contiguous:
            i = direct_index[t.name]
            buf = raw_direct.buffer(i) if nb else None
        elif t.owner == me:
            raw, i = g.out_raw[t.name]
            if t.sliced:
                whole = _byte_view(np, raw.buffer(i), t)
                buf = np.ascontiguousarray(_piece(t, whole, me)).reshape(-1).view(np.uint8) \
                    if nb else None
            else:
                buf = raw.buffer(i) if nb else None
        else:
            buf = recv_of[t.name] if nb else None
        out[t.name] = buf
    g.close()
    if raw_direct is not None:
        raw_direct.close()
    report = g.report(out, mine, group_read)
    files = g.files
    return GroupCheckpoint(out, infos, [f[0] for f in files], report, [f[2] for f in files], fw)


def open_group_device(paths, rules, pg, device, *, allocator=None, rank=None, world=None,
                      filter=None, backend="auto", cache="auto", direct="auto",
                      max_overread=0.0, round_bytes=None, exchange="auto", slot_size=0, slots=0,
                      host_group=None):
    """pinio.open(..., process_group=pg, device="cuda:N"): a DeviceCheckpoint
    of this rank's tensors on its device. The tensors a host group load has
    each rank read itself (slices of one range, or of long runs) stream
    from the file to the device through pinio's CUDA sink, as
    pinio.open(..., split=, rank=, world=, device=) streams them; the others
    (read whole by every rank, and slices of short runs) are read once, by
    one owner each, exchanged as a host load exchanges them, and copied
    from host memory to every rank's device through the same sink
    (_pinio.copy_gpu)."""
    import numpy as np

    from . import DeviceCheckpoint, _placer, _stream, cuda_index

    ordinal = cuda_index(device)
    dev = f"cuda:{ordinal}"

    # 1. the plan, agreed (the destination kind too: a rank loading to its
    # CPU takes other steps than one loading to its GPU)
    g = _Group(pg, paths, filter, rules, rank, world, max_overread, exchange, round_bytes, "cuda",
               host_group)
    me, n, tensors, ex, direct_ts = g.me, g.n, g.tensors, g.ex, g.direct
    paths, rules = g.paths, g.rules

    # 2. the exchanged tensors read by their owners and sent; meanwhile
    # this rank's own slices stream from the file to its device
    opts = dict(backend=backend, cache=cache, direct=direct, memory="auto",
                max_overread=max_overread)
    g.start_exchange(np, opts)
    placed, infos, srep = {}, {}, {}
    if g.failure is None and direct_ts:
        try:
            placed, infos, srep = _stream(paths, [t.name for t in direct_ts], dev,
                                          allocator, backend=backend, cache=cache, direct=direct,
                                          slot_size=slot_size, slots=slots, split=rules, rank=me,
                                          world=n, max_overread=max_overread, exact=True)
            g.add_reads(srep)
        except Exception as e:  # noqa: BLE001 (any: the others must hear of it)
            g.fail(e, f"failed to stream its slices to {dev}")

    # 3. the exchanged tensors copied from host memory to the device, and
    # the outcome agreed
    crep = {}

    def to_device(received):
        if not ex:
            return
        sources = {}
        for t in ex:
            if not (t.nbytes[me] if t.sliced else t.full_nbytes):
                continue
            if t.owner != me:
                sources[t.name] = received[t.name]
                continue
            raw, i = g.out_raw[t.name]
            if t.sliced:  # its piece, packed as the sink lands a slice
                whole = _byte_view(np, raw.buffer(i), t)
                sources[t.name] = np.ascontiguousarray(_piece(t, whole, me)).reshape(-1) \
                    .view(np.uint8)
            else:
                sources[t.name] = raw.buffer(i)
        size, total = slot_size, sum(memoryview(b).nbytes for b in sources.values())
        if not size:  # the sink registers each slot it uses: no larger than the bytes need
            size = COPY_SLOT_MIN
            while size < min(total, COPY_SLOT_MAX):
                size <<= 1
        crep.update(_pinio.copy_gpu(paths, _placer(dev, allocator, placed, infos), sources,
                                    "cuda", ordinal, filters=[t.name for t in ex], exact=True,
                                    slot_size=size, slots=slots, split=rules, rank=me, world=n))

    try:
        _, group_read = g.finish(np, to_device, f"failed to copy the exchanged tensors to {dev}")
    finally:
        g.close()

    # 4. this rank's tensors, in plan order
    out = {t.name: placed[t.name] for t in tensors}
    rep = g.report(out, sum(infos[t.name][2] for t in tensors), group_read)
    files = g.files
    rep.update(device_name=dev, paths=[f[0] for f in files], metadata=[f[2] for f in files],
               copies=srep.get("copies", 0) + crep.get("copies", 0),
               h2d_seconds=srep.get("h2d_seconds", 0.0) + crep.get("h2d_seconds", 0.0),
               split=srep.get("split"), io_path=srep.get("io_path"),
               stream_read_bytes=srep.get("read_bytes", 0), sha256=[None] * len(files),
               verified=False)
    return DeviceCheckpoint(out, {t.name: infos[t.name] for t in tensors}, rep)
