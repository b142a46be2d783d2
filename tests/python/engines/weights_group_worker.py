"""One rank of test_weights.py's gloo group (not a test itself).

usage: weights_group_worker.py PATH RANK WORLD INITFILE OUT [BAD_RANK]

Iterates pinio.weights_iterator(PATH, split=..., process_group=pg) in small
batches and writes OUT (json): per tensor, whether this rank's tensor is
torch.chunk(full, world, dim)[rank] byte for byte (full from a plain
pinio.load of the file), and the iterator's report. BAD_RANK: that rank
alone passes a rank= other than its own; OUT then holds the error each
rank raised."""
import datetime
import json
import sys

import torch
import torch.distributed as dist

import pinio

SPLIT = {"*.q_proj.weight": 0, "*.down_proj.weight": 1, "*": None}


def main():
    path, rank, world, init, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), *sys.argv[4:6]
    bad = len(sys.argv) > 6 and int(sys.argv[6]) == rank
    dist.init_process_group("gloo", init_method="file://" + init, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=90))
    pg = dist.new_group(list(range(world)))
    full = pinio.load(path)
    res, seen = {}, []
    try:
        # cache="cold": a file just written is in the page cache, which a
        # load maps without reading (read_bytes 0 would prove nothing)
        it = pinio.weights_iterator(path, split=SPLIT, process_group=pg, batch_bytes=200_000,
                                    cache="cold", **({"rank": (rank + 1) % world} if bad else {}))
        items = list(it)
    except (ValueError, TypeError, pinio.Error) as e:
        dist.destroy_process_group()
        with open(out, "w") as f:
            json.dump({"error": str(e), "type": type(e).__name__}, f)
        return
    for name, t in items:
        dim = 0 if "q_proj" in name else 1 if "down_proj" in name else None
        ref = full[name] if dim is None else torch.chunk(full[name], world, dim)[rank]
        res[name] = bool(t.shape == ref.shape and torch.equal(t, ref))
        seen.append(name)
    dist.barrier()
    dist.destroy_process_group()
    with open(out, "w") as f:
        json.dump({"ok": res, "order": seen, "report": it.report()}, f)


if __name__ == "__main__":
    main()
