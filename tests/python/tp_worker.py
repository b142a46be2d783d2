"""One rank of test_tp.py's torch.distributed groups (not a test itself).

usage: tp_worker.py SCENARIOS RANK WORLD INITFILE OUT

Joins a gloo group (init_method file://INITFILE), runs every scenario of
the SCENARIOS json (each: paths, split rules, framework, round_bytes, and
optionally this rank's own split or paths, to make the ranks disagree)
through pinio.load(..., process_group=pg), and writes OUT (json): per
scenario, either the error pinio raised or, per tensor, whether this rank's
slice equals torch.chunk(full, world, dim)[rank] byte for byte (the whole
tensor for a tensor read whole), with the load's report.
"""
import datetime
import json
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


def run(sc, rank, world, pg):
    split = [tuple(r) for r in sc.get("split_of", {}).get(rank, sc["split"])]
    paths = sc.get("paths_of", {}).get(rank, sc["paths"])
    real_load = _dist._load
    if rank in sc.get("fail_read_of", []):  # this rank's reads fail after the agreement
        def failing(*a, **k):
            raise pinio.Error(5, f"rank {rank}: an injected read failure")
        _dist._load = failing
    try:
        ck = pinio.open(paths, sc.get("framework", "pt"), split=split, process_group=pg,
                        filter=sc.get("filter"), round_bytes=sc.get("round_bytes"),
                        exchange=sc.get("exchange", "auto"))
    except pinio.Error as e:
        return {"error": e.strerror, "errno": e.errno}
    finally:
        _dist._load = real_load
    got = ck.tensors()
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
    return {"bad": bad, "missing": missing, "report": rep, "names": sorted(got)}


def main():
    scen, rank, world, init, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), \
        sys.argv[4], sys.argv[5]
    with open(scen) as f:
        scenarios = json.load(f)
    for sc in scenarios:  # json keys are strings
        for key in ("split_of", "paths_of"):
            sc[key] = {int(k): v for k, v in sc.get(key, {}).items()}
    dist.init_process_group("gloo", init_method="file://" + init, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=90))
    pg = dist.new_group(list(range(world)))  # a group other than WORLD, as loaders pass
    res = [run(sc, rank, world, pg) for sc in scenarios]
    dist.barrier()
    dist.destroy_process_group()
    with open(out, "w") as f:
        json.dump(res, f)


if __name__ == "__main__":
    main()
