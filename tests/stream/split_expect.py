"""The expectation of tests/stream/load_device_split_test.sh, computed from
the file's bytes alone (numpy), not by pinio:

  split_expect.py gen OUT SEED
      writes a random safetensors file: model-like names (norms, o_proj,
      up_proj, embeddings) of random shapes and dtypes, one with rows longer
      than a 64 KiB staging slot, one with a dimension shorter than 8.
  split_expect.py bytes FILE RANK WORLD RULE...
      prints the bytes of the rank's slices (RULE: PATTERN=DIM, DIM an
      integer or 'whole'; the first matching rule wins, no rule: whole).
  split_expect.py device FILE DUMP JSON RANK WORLD RULE...
      checks DUMP, the device arena the CUDA sink filled and the test driver
      wrote out when it was freed (FAKE_CUDA_DUMP): every tensor in file
      order at the next multiple of 256 bytes, each equal to
      torch.chunk(tensor, WORLD, DIM)[RANK] (the empty slice at the end of
      the dimension for a rank past the last chunk); and JSON, the load's
      --json: the slices' bytes, the split, the over-read adding up. Prints
      the slices' bytes; exit 1 naming the first thing that differs.
  split_expect.py arena FILE DUMP RANK WORLD RULE...
      the same check of DUMP alone (an MPI rank's arena, whose report is
      the job's)."""
import fnmatch
import json
import struct
import sys

import numpy as np

ESIZE = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "I16": 2, "F16": 2, "BF16": 2,
         "I32": 4, "F32": 4, "I64": 8, "F64": 8, "C64": 8}


def gen(out, seed):
    rng = np.random.default_rng(seed)
    dts = list(ESIZE)
    tensors = []
    for layer in range(2):
        p = f"model.layers.{layer}."
        h = int(rng.integers(3, 40))
        tensors += [
            (p + "input_layernorm.weight", "BF16", [h]),
            (p + "self_attn.o_proj.weight", str(rng.choice(dts)), [h, int(rng.integers(1, 300))]),
            (p + "mlp.up_proj.weight", str(rng.choice(dts)),
             [int(rng.integers(1, 9)), int(rng.integers(1, 5)), int(rng.integers(1, 200))]),
        ]
    tensors += [("model.embed_tokens.weight", "F32", [5, int(rng.integers(17000, 40000))]),
                ("model.short.weight", "U8", [int(rng.integers(1, 7)), 1000])]
    header, blobs, off = {}, [], 0
    for name, dt, shape in tensors:
        n = ESIZE[dt] * int(np.prod(shape))
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + n]}
        blobs.append(rng.integers(0, 256, n, dtype=np.uint8).tobytes())
        off += n
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(out, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def tensors_of(path):
    """(name, dtype, shape, bytes) in file order."""
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    base = 8 + n
    out = [(k, v["dtype"], v["shape"], raw[base + v["data_offsets"][0]:base + v["data_offsets"][1]])
           for k, v in header.items()]
    return sorted(out, key=lambda t: header[t[0]]["data_offsets"])


def dim_of(name, rules):
    for r in rules:
        pat, d = r.rsplit("=", 1)
        if fnmatch.fnmatchcase(name, pat) or name == pat or name.startswith(pat + "."):
            return None if d == "whole" else int(d)
    return None


def chunk(dt, shape, data, dim, rank, world):
    """torch.chunk(t, world, dim)[rank] as bytes, from the element view."""
    a = np.frombuffer(data, dtype=np.uint8).reshape(list(shape) + [ESIZE[dt]])
    if dim is None:
        return data
    d = dim + len(shape) if dim < 0 else dim
    size = shape[d]
    c = -(-size // world)
    start = min(rank * c, size)
    stop = min(start + c, size)
    idx = [slice(None)] * a.ndim
    idx[d] = slice(start, stop)
    return np.ascontiguousarray(a[tuple(idx)]).tobytes()


def slices(path, rank, world, rules):
    return [(name, chunk(dt, shape, data, dim_of(name, rules), rank, world))
            for name, dt, shape, data in tensors_of(path)]


def main(argv):
    if argv[1] == "gen":
        gen(argv[2], int(argv[3]))
        return 0
    if argv[1] == "bytes":
        print(sum(len(b) for _, b in slices(argv[2], int(argv[3]), int(argv[4]), argv[5:])))
        return 0
    if argv[1] == "arena":  # arena CKPT DUMP RANK WORLD RULES...: the dump alone
        rank, world = int(argv[4]), int(argv[5])
        return check_arena(argv[3], slices(argv[2], rank, world, argv[6:]), rank, world)
    path, dump, rank, world, rules = argv[2], argv[3], int(argv[5]), int(argv[6]), argv[7:]
    want = slices(path, rank, world, rules)
    total = sum(len(b) for _, b in want)
    with open(argv[4]) as f:
        j = json.load(f)
    s = j["split"]
    if (j["bytes"] != total or s["rank"] != rank or s["world"] != world
            or j["read_bytes"] != j["bytes"] + j["overread_bytes"]
            or s["hole_bytes"] > j["overread_bytes"]
            or s["strided_tensor_count"] > s["sliced_tensor_count"]):
        print(f"--json does not add up (the slices hold {total} bytes): {j}")
        return 1
    return check_arena(dump, want, rank, world)


def check_arena(dump, want, rank, world):
    """The arena the test driver wrote out holds each slice, in order, each
    at a 256-byte aligned offset, and nothing past them; prints their
    bytes."""
    total = sum(len(b) for _, b in want)
    try:
        with open(dump, "rb") as f:
            arena = f.read()
    except FileNotFoundError:
        arena = b""
    off = 0
    for name, b in want:
        off = -(-off // 256) * 256
        got = arena[off:off + len(b)]
        if got != b:
            print(f"{name}: {len(got)} bytes at arena offset {off} differ from its chunk "
                  f"({len(b)} bytes, rank {rank} of {world})")
            return 1
        off += len(b)
    if len(arena) != off and not (off == 0 and not arena):
        print(f"the arena holds {len(arena)} bytes, the slices end at {off}")
        return 1
    print(total)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
