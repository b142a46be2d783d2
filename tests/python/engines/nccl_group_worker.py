"""One rank of test_weights.py's NCCL-group cases (not a test itself).

usage: nccl_group_worker.py PATH RANK WORLD INITFILE OUT CASE

There is no NCCL here (no GPU, and torch 1.13's Debian build has none), so
the "NCCL" group is a gloo group that says it is one: dist.get_backend
reports "nccl" for it, and every collective given it raises as NCCL
raises for host tensors. Whatever pinio sends must then go over another
group; the test checks which (every new_group pinio makes is counted and
its ranks recorded) and that each rank's tensors are its exact slices.
What this does not exercise: NCCL itself, device tensors, and torch's
creation of a gloo group beside a real NCCL one.

CASE "world": the NCCL group spans the job; pinio.open (exchange through
the group and through shared memory), pinio.load and a weights_iterator
of several batches, then a rank=/world= refusal by rank 1 alone.
CASE "sub": two NCCL groups of half the job each (world 4): without
host_group= every rank is refused (torch 1.13 cannot make a gloo group of
part of the job alone); with host_group= (gloo groups of the same ranks,
as vLLM's cpu_group) the loads run, and pinio makes no group."""
import datetime
import json
import sys

import torch
import torch.distributed as dist

import pinio

SPLIT = {"*.q_proj.weight": 0, "*.down_proj.weight": 1, "*": None}


class NotForHost(RuntimeError):
    pass


def nccl_standin(fakes):
    """dist patched so that the groups `fakes` behave as NCCL groups do for
    pinio's purposes: backend "nccl", and no collective of host tensors."""
    real_backend = dist.get_backend

    def get_backend(group=None):
        return "nccl" if any(group is f for f in fakes) else real_backend(group)

    dist.get_backend = get_backend
    for name in ("all_gather_object", "all_to_all_single", "all_gather", "broadcast",
                 "all_reduce", "barrier", "gather_object", "broadcast_object_list"):
        real = getattr(dist, name)

        def refused(*a, _real=real, _name=name, **kw):
            if any(kw.get("group") is f for f in fakes) or any(x is f for x in a for f in fakes):
                raise NotForHost(f"{_name} over the NCCL stand-in group: NCCL takes device "
                                 f"tensors only")
            return _real(*a, **kw)

        setattr(dist, name, refused)


def count_new_groups(made):
    real = dist.new_group

    def new_group(ranks=None, *a, **kw):
        g = real(ranks, *a, **kw)
        made.append({"ranks": list(ranks), "backend": kw.get("backend")})
        return g

    dist.new_group = new_group


def check(full, got, rank, world):
    """{name: whether got[name] is this rank's exact slice of full[name]}."""
    res = {}
    for name, ref in full.items():
        dim = 0 if "q_proj" in name else 1 if "down_proj" in name else None
        ref = ref if dim is None else torch.chunk(ref, world, dim)[rank]
        t = got.get(name)
        res[name] = bool(t is not None and t.shape == ref.shape and torch.equal(t, ref))
    return res


def loads(path, pg, rank, world, full, host=None):
    kw = {} if host is None else {"host_group": host}
    out = {}
    with pinio.open(path, split=SPLIT, process_group=pg, exchange="group", cache="cold",
                    round_bytes=100_000, **kw) as ck:
        out["open_group"] = check(full, ck.tensors(), rank, world)
        out["open_group_report"] = ck.report()
    out["load_shm"] = check(full, pinio.load(path, split=SPLIT, process_group=pg, **kw),
                            rank, world)
    it = pinio.weights_iterator(path, split=SPLIT, process_group=pg, batch_bytes=200_000,
                                cache="cold", **kw)
    out["iterator"] = check(full, dict(it), rank, world)
    out["iterator_report"] = it.report()
    return out


def main():
    path, rank, world, init, out, case = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), \
        *sys.argv[4:7]
    dist.init_process_group("gloo", init_method="file://" + init, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=90))
    full = pinio.load(path)
    res = {}
    if case == "world":
        pg = dist.new_group(list(range(world)))
        nccl_standin([pg])
        made = []
        count_new_groups(made)
        res.update(loads(path, pg, rank, world, full))
        try:
            pinio.load(path, split=SPLIT, process_group=pg, **({"rank": 0} if rank == 1 else {}))
        except ValueError as e:
            res["refused"] = str(e)
        res["made"] = made
    else:
        halves = [list(range(world // 2)), list(range(world // 2, world))]
        fakes = [dist.new_group(h) for h in halves]
        hosts = [dist.new_group(h, backend="gloo") for h in halves]
        mine = rank * 2 // world
        pg, host = fakes[mine], hosts[mine]
        nccl_standin(fakes)
        made = []
        count_new_groups(made)
        r, n = dist.get_rank(pg), dist.get_world_size(pg)
        try:
            pinio.load(path, split=SPLIT, process_group=pg)
        except ValueError as e:
            res["refused"] = str(e)
        try:
            pinio.weights_iterator(path, split=SPLIT, process_group=pg)
        except ValueError as e:
            res["refused_iterator"] = str(e)
        res.update(loads(path, pg, r, n, full, host))
        res["made"] = made
    dist.barrier()
    dist.destroy_process_group()
    with open(out, "w") as f:
        json.dump(res, f)


if __name__ == "__main__":
    main()
