"""One rank of test_tp.py's torch.distributed groups (not a test itself).

usage: tp_worker.py SCENARIOS RANK WORLD INITFILE OUT

Joins a gloo group (init_method file://INITFILE), runs every scenario of
the SCENARIOS json (each: paths, split rules, framework, round_bytes, and
optionally this rank's own split, paths or other arguments, to make the
ranks disagree)
through pinio.load(..., process_group=pg), and writes OUT (json): per
scenario, either the error pinio raised or, per tensor, whether this rank's
slice equals torch.chunk(full, world, dim)[rank] byte for byte (the whole
tensor for a tensor read whole), with the load's report; either way the
exchange files of this rank still in /dev/shm (shm_left). Faults:
fail_read_of (ranks whose reads fail), fail_board_of (ranks that fail
while writing their exchange file).

A scenario with "device": loads to cuda:0 through the test driver
(PINIO_CUDA_LIB, tests/stream/fake_cuda.c: this process's own instance),
into an allocator over the driver's memory (test_cuda.py's FakeGpu), and
compares what cuMemcpyDtoH reads back from each tensor's device memory;
the driver's counters (copies from unregistered memory, out of bounds,
without a context, registrations or streams left) come back too.
"""
import ctypes
import datetime
import json
import os
import sys

import torch
import torch.distributed as dist

import pinio
from pinio import _dist
from pinio.safetensors.torch import load_file


def raw(t):
    t = t.contiguous()
    if t.dtype == torch.bool:
        t = t.to(torch.uint8)
    return t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""


def expected(full, world, rank, dim):
    if dim is None:
        return full
    chunks = torch.chunk(full, world, dim)
    if rank < len(chunks):
        return chunks[rank]
    d = dim % full.dim()
    return full.narrow(d, full.shape[d], 0)


_GPU = []  # the test driver and its allocator, made at the first device scenario


def gpu():
    if not _GPU:
        from test_cuda import FakeGpu

        _GPU.append(FakeGpu(os.environ["PINIO_CUDA_LIB"]))
    return _GPU[0]


def read_back(g, t):
    """A device tensor's bytes as the driver reads them back (cuMemcpyDtoH),
    as a CPU tensor of its dtype and shape."""
    out = torch.empty(t.shape, dtype=t.dtype)
    n = t.numel() * t.element_size()
    if n:
        assert t.data_ptr() in g.ptrs, "a tensor outside the allocator's device memory"
        assert g.lib.cuMemcpyDtoH_v2(ctypes.c_void_p(out.data_ptr()),
                                     ctypes.c_ulonglong(t.data_ptr()), ctypes.c_size_t(n)) == 0
    return out


CLEAN = ("unregistered", "overwritten", "out_of_bounds", "no_context")


def run(sc, rank, world, pg):
    split = [tuple(r) for r in sc.get("split_of", {}).get(rank, sc["split"])]
    paths = sc.get("paths_of", {}).get(rank, sc["paths"])
    real_load = _dist._load
    if rank in sc.get("fail_read_of", []):  # this rank's reads fail after the agreement
        def failing(*a, **k):
            raise pinio.Error(5, f"rank {rank}: an injected read failure")
        _dist._load = failing
    real_piece = _dist._piece
    if rank in sc.get("fail_board_of", []):  # fails while it writes its exchange file
        def failing_piece(*a, **k):
            raise KeyError("an injected failure")
        _dist._piece = failing_piece
    kw, before = {}, None
    device = sc.get("device_of", {}).get(rank, sc.get("device"))
    if device:  # the test driver's allocator, also where pinio's driver fails to load
        g = gpu()
        kw = dict(device=device, allocator=g.alloc, slot_size=sc.get("slot_size", 0),
                  slots=sc.get("slots", 0))
        before = g.stats()
    real_lib = os.environ.get("PINIO_CUDA_LIB")
    if rank in sc.get("no_driver_of", []):
        os.environ["PINIO_CUDA_LIB"] = os.path.join(os.path.dirname(paths[0]),
                                                    "no-libcuda.so.1")
    args = dict(framework=sc.get("framework", "pt"), split=split, process_group=pg,
                filter=sc.get("filter"), round_bytes=sc.get("round_bytes"),
                exchange=sc.get("exchange", "auto"), **kw)
    args.update(sc.get("args_of", {}).get(rank, {}))  # this rank's own (bad) arguments
    try:
        ck = pinio.open(paths, **args)
    except pinio.Error as e:
        return {"error": e.strerror, "errno": e.errno, "shm_left": shm_left()}
    except (ValueError, TypeError) as e:
        return {"error": str(e), "type": type(e).__name__}
    finally:
        _dist._load = real_load
        _dist._piece = real_piece
        if real_lib is not None:
            os.environ["PINIO_CUDA_LIB"] = real_lib
    got = ck.tensors()
    driver = None
    if device:
        g = gpu()
        got = {n: read_back(g, t) for n, t in got.items()}
        s = g.stats()
        driver = {k: s[k] - before[k] for k in CLEAN + ("copies", "d2h_copies")}
        driver.update(registered_live=s["registered_live"], streams_live=s["streams_live"],
                      device=ck.device)
    full = {}
    for p in sc["paths"]:
        full.update(load_file(p))
    bad = []
    for name, t in got.items():
        dim = sc["dims"].get(name)
        want = expected(full[name], world, rank, dim)
        t = torch.as_tensor(t) if not isinstance(t, torch.Tensor) else t
        if tuple(t.shape) != tuple(want.shape) or raw(t) != raw(want):
            bad.append([name, list(t.shape), list(want.shape), dim])
    missing = sorted(set(sc["dims"]) - set(got))
    rep = ck.report()
    ck.close()
    return {"bad": bad, "missing": missing, "report": rep, "names": sorted(got), "driver": driver,
            "shm_left": shm_left()}


def shm_left():
    """The exchange files this rank made that are still there."""
    ns, pid = _dist._ident()
    mine = f"pinio-tp-{ns}-{pid}-"
    return sorted(n for n in os.listdir("/dev/shm") if n.startswith(mine))


def main():
    scen, rank, world, init, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), \
        sys.argv[4], sys.argv[5]
    with open(scen) as f:
        scenarios = json.load(f)
    for sc in scenarios:  # json keys are strings
        for key in ("split_of", "paths_of", "device_of", "args_of"):
            sc[key] = {int(k): v for k, v in sc.get(key, {}).items()}
    wait = float(os.environ.get("TP_GROUP_TIMEOUT", "90"))  # a collective's longest wait
    dist.init_process_group("gloo", init_method="file://" + init, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=wait))
    pg = dist.new_group(list(range(world)))  # a group other than WORLD, as loaders pass
    res = [run(sc, rank, world, pg) for sc in scenarios]
    dist.barrier()
    dist.destroy_process_group()
    if _GPU:  # every device tensor is gone: nothing may be left behind
        _GPU[0].close()
        s = _GPU[0].stats()
        res.append({"driver_end": {k: s[k] for k in ("allocs_live", "registered_live",
                                                       "streams_live", "ctx_retained")}})
    with open(out, "w") as f:
        json.dump(res, f)


if __name__ == "__main__":
    main()
