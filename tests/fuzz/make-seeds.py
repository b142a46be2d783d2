#!/usr/bin/env python3
"""Writes the fuzz seed corpora: tests/fuzz/seeds/{header,index,plan,roundtrip,jobfile}/.

One hand-made seed per validation rule (safetensors.h's table, the index
parser's checks, the writer's refusals, the job-file parser's mapping and
errors, with tests/tools/jobs/*.fio), plus small checkpoints written by `pinio gen` when a
pinio binary is given. Every seed is tiny (< 1 KiB) so they are committed.
Usage: make-seeds.py [PINIO]   (run from the repository root)
"""
import json, os, struct, subprocess, sys, tempfile

top = os.path.dirname(os.path.abspath(__file__))
hdir, idir = os.path.join(top, "seeds", "header"), os.path.join(top, "seeds", "index")
os.makedirs(hdir, exist_ok=True)
os.makedirs(idir, exist_ok=True)


def st(header, data=b"", pad=True, n=None):
    h = header if isinstance(header, bytes) else json.dumps(header, separators=(",", ":")).encode()
    if pad:
        h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h) if n is None else n) + h + data


def t(dtype, shape, b, e):
    return {"dtype": dtype, "shape": shape, "data_offsets": [b, e]}


header = {
    "valid": st({"__metadata__": {"format": "pt"}, "a": t("F32", [2], 0, 8),
                 "b": t("BF16", [1, 2], 8, 12)}, bytes(12)),
    "valid_subbyte": st({"x": t("F4", [4], 0, 2), "y": t("F8_E4M3", [2], 2, 4)}, bytes(4)),
    "valid_empty": st({}),
    "HeaderTooSmall": b"\x08\x00\x00",
    "HeaderTooLarge": struct.pack("<Q", 100000001) + b"{}",
    "InvalidHeaderLength": st({"a": t("U8", [1], 0, 1)}, b"\x01", n=4096),
    "InvalidHeader": st(b'{"\xff\xfe":1}'),
    "InvalidHeaderDeserialization": st(b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4}'),
    "Deser_top_array": st(b"[1,2]"),
    "Deser_unknown_dtype": st({"a": t("F33", [1], 0, 4)}, bytes(4)),
    "Deser_negative_dim": st({"a": t("F32", [-1], 0, 4)}, bytes(4)),
    "Deser_offsets_triple": st({"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1, 2]}}, b"\0"),
    "Deser_metadata_not_string": st({"__metadata__": {"k": 1}}),
    "Deser_missing_field": st({"a": {"dtype": "U8", "data_offsets": [0, 1]}}, b"\0"),
    "Deser_unknown_field": st({"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1], "z": 0}}, b"\0"),
    "Deser_escapes": st(b'{"\\u00e9\\n\\ud83d\\ude00":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', b"\0"),
    "Deser_big_int": st(b'{"a":{"dtype":"U8","shape":[18446744073709551616],"data_offsets":[0,1]}}', b"\0"),
    "DuplicateKey": st(b'{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},'
                       b'"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}', b"\0\0"),
    "InvalidOffset_gap": st({"a": t("U8", [1], 0, 1), "b": t("U8", [1], 2, 3)}, bytes(3)),
    "InvalidOffset_overlap": st({"a": t("U8", [2], 0, 2), "b": t("U8", [2], 1, 3)}, bytes(3)),
    "InvalidOffset_reversed": st({"a": t("U8", [0], 1, 0)}, b"\0"),
    "ValidationOverflow": st({"a": t("F64", [4294967296, 4294967296], 0, 8)}, bytes(8)),
    "MisalignedSlice": st({"a": t("F4", [3], 0, 2)}, bytes(2)),
    "TensorInvalidInfo": st({"a": t("F32", [3], 0, 8)}, bytes(8)),
    "MetadataIncompleteBuffer": st({"a": t("U8", [4], 0, 4)}, bytes(2)),
    "Metadata_trailing": st({"a": t("U8", [1], 0, 1)}, bytes(5)),
    # Parity boundaries with serde_json: 127 levels in all is the deepest
    # accepted (top object + entry + 125 arrays), 128 is refused; a number of
    # an ignored field must be finite as a double; a NUL in a name is refused.
    "Deser_depth_127": st(b'{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"z":'
                          + b"[" * 125 + b"]" * 125 + b"}}", b"\0"),
    "Deser_depth_128": st(b'{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"z":'
                          + b"[" * 126 + b"]" * 126 + b"}}", b"\0"),
    "Deser_num_max": st(b'{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],'
                        b'"z":[1.7976931348623157e308,1e-400,0e999]}}', b"\0"),
    "Deser_num_1e400": st(b'{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"z":1e400}}', b"\0"),
    "Deser_num_400_digits": st(b'{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"z":'
                               + b"9" * 400 + b"}}", b"\0"),
    "Deser_nul_name": st(b'{"a\\u0000b":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', b"\0"),
    "Deser_entry_array": st(b'{"a":["U8",[1],[0,1]]}', b"\0"),
    "Deser_dtype_enum": st(b'{"a":{"dtype":{"U8":null},"shape":[1],"data_offsets":[0,1]}}', b"\0"),
}

idx = lambda wm, **kw: json.dumps(dict(kw, weight_map=wm)).encode()
index = {
    "valid": idx({"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors",
                  "c": "model-00001-of-00002.safetensors"}, metadata={"total_size": 12}),
    "empty_map": idx({}),
    "valid_extra_keys": b'{"x":[1,{"y":null}],"weight_map":{"a":"s.safetensors"},"z":true}',
    "no_weight_map": b'{"metadata":{}}',
    "top_not_object": b'["weight_map"]',
    "map_not_object": b'{"weight_map":[]}',
    "value_not_string": b'{"weight_map":{"a":1}}',
    "duplicate_weight_map": b'{"weight_map":{},"weight_map":{}}',
    "duplicate_tensor": b'{"weight_map":{"a":"s.safetensors","a":"t.safetensors"}}',
    "absolute_shard": b'{"weight_map":{"a":"/etc/passwd"}}',
    "dotdot_shard": b'{"weight_map":{"a":"../s.safetensors"}}',
    "nul_in_shard": b'{"weight_map":{"a":"s\\u0000.safetensors"}}',
    "invalid_utf8": b'{"weight_map":{"\xc3\x28":"s.safetensors"}}',
    "truncated": b'{"weight_map":{"a":"s.safe',
    "trailing_garbage": b'{"weight_map":{}} x',
    "escapes": b'{"weight_map":{"\\u00e9\\t\\"q\\"":"d\\/s.safetensors"}}',
    "dotdot_in_name": b'{"weight_map":{"a":"model..v2.safetensors","b":"./model..v2.safetensors"}}',
    "empty_component": b'{"weight_map":{"a":"d//s.safetensors"}}',
    "nul_in_name": b'{"weight_map":{"a\\u0000b":"s.safetensors"}}',
}


# Plan seeds (tests/fuzz/fuzz_plan.c): a 16-byte option prefix, then header
# images (8-byte N + JSON, no data: the file is sized from the prefix), the
# index when asked, and one more filter pattern when asked, split by SEP.
SEP = b"\xff\xfe\xfd\xfc"


def plan(files, nf=None, index=None, cache=0, direct_off=False, pattern=None, mib=False,
         align=0, seg=0, gap=0, fmask=0):
    """files: [(header dict or bytes, data size)]; align/seg are the nibbles."""
    nf = len(files) if nf is None else nf
    p0 = (nf - 1) | (4 if index is not None else 0) | cache << 3 | (32 if direct_off else 0) \
        | (64 if pattern is not None else 0) | (128 if mib else 0)
    pre = bytes([p0, align | seg << 4, gap, fmask])
    for _, dsize in files:
        pre += dsize.to_bytes(3, "little")
    pre += bytes(16 - len(pre))
    blobs = [st(h) for h, _ in files]
    if index is not None:
        blobs.append(index if isinstance(index, bytes) else json.dumps({"weight_map": index}).encode())
    if pattern is not None:
        blobs.append(pattern)
    return pre + SEP.join(blobs)


def layers(n, size, dtype="U8", start=0):
    h, off = {}, 0
    for i in range(n):
        for part in ("weight", "bias"):
            h["model.layers.%d.mlp.%s" % (start + i, part)] = t(dtype, [size], off, off + size)
            off += size
    return h, off


L2, L2n = layers(2, 3000)
BIG, BIGn = layers(1, 3 << 20)
MIS = {"a": t("U8", [3], 0, 3), "b": t("F32", [5], 3, 23), "x1": t("BF16", [0], 23, 23),
       "c": t("U8", [4097], 23, 4120)}
S0, S0n = layers(1, 5000)
S1, S1n = layers(1, 7000, start=1)
S2 = {"model.layers.2.mlp.weight": t("U8", [100], 0, 100), "extra": t("U8", [10], 100, 110)}
IX = {k: "s0.safetensors" for k in S0} | {k: "s1.safetensors" for k in S1} \
    | {"model.layers.2.mlp.weight": "s2.safetensors"}
plans = {
    "one_file": plan([({"__metadata__": {"format": "pt"}, "a": t("F32", [2], 0, 8),
                        "b": t("BF16", [1, 2], 8, 12)}, 12)]),
    "empty_header": plan([({}, 0)]),
    "split_at_segment": plan([(L2, L2n)], align=13, seg=1),
    "misaligned_align1": plan([(MIS, 4120)], align=1, gap=1),
    "filters": plan([(L2, L2n)], fmask=0b00001100, cache=2),
    "pattern": plan([(L2, L2n)], pattern=b"model.layers.1*", fmask=1),
    "big_mib": plan([(BIG, 6)], mib=True, seg=2, align=13),
    "index_three": plan([(S0, S0n), (S1, S1n), (S2, 110)], index=IX, cache=1),
    "index_shard_lacks_tensor": plan([(S1, S1n), (S0, S0n)],
                                     index={k: v for k, v in IX.items() if "2" not in k}),
    "index_order": plan([(S0, S0n), (S1, S1n)],
                        index={k: IX[k] for k in sorted(IX, key=lambda k: IX[k] != "s1.safetensors")
                               if "2" not in k}),
    "two_files_dup": plan([(L2, L2n), (L2, L2n)]),
    "size_mismatch": plan([(L2, L2n + 1)]),
    "segment_below_align": plan([(L2, L2n)], align=15, seg=1),
    "direct_off_gap": plan([(S2, 110), (MIS, 4120)], direct_off=True, gap=200),
}
pdir = os.path.join(top, "seeds", "plan")
os.makedirs(pdir, exist_ok=True)


# Round-trip seeds (tests/fuzz/fuzz_roundtrip.c): flags, count, then per
# tensor dtype, rank|faults, dims, name; then metadata; then the data bytes.
DT = {n: i for i, n in enumerate(
    "BOOL F4 F6_E2M3 F6_E3M2 U8 I8 F8_E5M2 F8_E4M3 F8_E8M0 F8_E4M3FNUZ F8_E5M2FNUZ "
    "I16 U16 F16 BF16 I32 U32 F32 C64 F64 I64 U64 UNKNOWN".split())}
OFF_UP, OFF_DOWN, NULL_DATA, NULL_NAME, BIG = 8, 8 | 16, 32, 64, 128


def rt(tensors, meta=(), file=True, planted=False, by_strlen=False, data=b"\x5a\xa5\x01"):
    """tensors: [(dtype, dims, name[, faults])]; dims as the target reads
    them (v % 8, or with BIG: 2^(v & 63)); meta: [(key, value)]."""
    out = bytes([(33 if file else 0) | (2 if planted else 0) | len(meta) << 2
                 | (16 if by_strlen else 0), len(tensors)])
    for dtype, dims, name, *faults in tensors:
        out += bytes([DT[dtype], len(dims) | (faults[0] if faults else 0), *dims, len(name)]) + name
    for k, v in meta:
        out += bytes([len(k)]) + k + bytes([len(v)]) + v
    return out + data


roundtrip = {
    "valid_mixed": rt([("F32", [2, 3], b"model.w"), ("BF16", [5], b"model.b"), ("U8", [7], b"a"),
                       ("F64", [1], b"z"), ("F4", [4], b"q4"), ("BOOL", [3], b"mask")],
                      meta=[(b"format", b"pt"), (b"\xc3\xa9\"\\", b"\n\t\x01")]),
    "valid_empty": rt([]),
    "valid_empty_header_only": rt([], file=False),
    "scalar_and_zero": rt([("I64", [], b"step"), ("F16", [0, 3], b"empty"), ("U8", [0], b"e2")]),
    "every_dtype": rt([(n, [2], n.encode()) for n in list(DT)[:8]]),
    "every_dtype_2": rt([(n, [2], n.encode()) for n in list(DT)[8:16]]),
    "every_dtype_3": rt([(n, [2], n.encode()) for n in list(DT)[16:22]]),
    "escaped_names": rt([("U8", [1], b'q"uote'), ("U8", [1], b"back\\slash"),
                         ("U8", [1], b"ctl\x01\x1f\x7f"), ("U8", [1], b"\xf0\x9f\x98\x80/")]),
    "subbyte_half": rt([("F4", [3], b"half")]),
    "subbyte_f6_ok": rt([("F6_E2M3", [4], b"six")]),
    "nbytes_over": rt([("F32", [2], b"a", OFF_UP)]),
    "nbytes_under": rt([("F32", [2], b"a", OFF_DOWN)]),
    "null_data": rt([("U8", [3], b"a", NULL_DATA)]),
    "null_data_empty_ok": rt([("U8", [0], b"a", NULL_DATA)]),
    "null_name": rt([("U8", [3], b"a", NULL_NAME)]),
    "reserved_name": rt([("U8", [1], b"__metadata__")]),
    "invalid_utf8_name": rt([("U8", [1], b"\xc3\x28")]),
    "surrogate_name": rt([("U8", [1], b"\xed\xa0\x80")]),
    "nul_in_name": rt([("U8", [1], b"a\x00b")]),
    "nul_in_name_by_strlen": rt([("U8", [1], b"a\x00b"), ("U8", [1], b"c")], by_strlen=True),
    "empty_name": rt([("U8", [1], b"")]),
    "unknown_dtype": rt([("UNKNOWN", [1], b"a")]),
    "duplicate_neighbours": rt([("U8", [1], b"a"), ("U8", [2], b"a")]),
    "duplicate_across_dtypes": rt([("U8", [1], b"a"), ("I16", [1], b"b"), ("F32", [1], b"a")]),
    "dims_overflow": rt([("U8", [63, 63], b"huge", BIG)], file=False),
    "bits_overflow": rt([("F64", [62], b"huge", BIG)], file=False),
    "offsets_overflow": rt([("U8", [63], b"a", BIG), ("U8", [63], b"b", BIG)], file=False),
    "big_header_only": rt([("U8", [40], b"a", BIG), ("BF16", [20, 3], b"b", BIG)], file=False),
    "meta_duplicate_key": rt([("U8", [1], b"a")], meta=[(b"k", b"1"), (b"k", b"2")]),
    "meta_invalid_utf8": rt([("U8", [1], b"a")], meta=[(b"k", b"\xff")]),
    "meta_nul": rt([("U8", [1], b"a")], meta=[(b"k\x00", b"v\x00w")]),
    "meta_empty": rt([("U8", [1], b"a")], meta=[(b"", b"")]),
    "planted_replaced": rt([("U8", [5], b"a")], planted=True),
    "planted_refused": rt([("U8", [5], b"a", OFF_UP)], planted=True),
}
rdir = os.path.join(top, "seeds", "roundtrip")

# Job-file seeds (tests/fuzz/fuzz_jobfile.c): the test fixtures, then one
# file per mapping rule and per error the parser names.
jobs_dir = os.path.join(top, "..", "tools", "jobs")
jobfile = {name: open(os.path.join(jobs_dir, name), "rb").read()
           for name in sorted(os.listdir(jobs_dir)) if name.endswith(".fio")}
jobfile.update({
    "sizes": b"[a]\nfilename=f\nbs=4KiB\nsize=1G\noffset=0x1000\nio_size=2mb\n",
    "kb_base": b"[global]\nkb_base=1000\n[a]\nfilename=f\nbs=4k\nsize=1Gi\n",
    "percent_size": b"[a]\nfilename=f\nsize=50%\n",
    "directory_nrfiles": b"[j]\ndirectory=/dev/shm\nnrfiles=3\nbuffered=0\ninvalidate=0\n",
    "file_service": b"[j]\nfilename=/x/a:/x/b\\:c\nfile_service_type=random:8\n",
    "bssplit": b"[j]\nfilename=f\nbssplit=4k/50:1k/:32k/\nbs=1m\n",
    "bssplit_rw": b"[j]\nfilename=f\nbssplit=4k/:8k/:16k/,4k/:8k/:16k/\n",
    "bsrange": b"[j]\nfilename=f\nbsrange=1k-16k\nblockalign=4k\nbs=4k,4k\n",
    "times": b"[j]\nfilename=f\nruntime=1m\ntime_based=1\nstartdelay=500ms\nramp_time=2s\nthinktime=10\n",
    "engine_sync": b"[j]\nfilename=f\nioengine=psync\niodepth=32\nfixedbufs\nregisterfiles=1\nhipri=0\n",
    "verify": b"[j]\nfilename=f\nrw=rw\nrwmixwrite=30\nverify=crc32c-intel\nverify_only\nrandseed=7\n",
    "logs": b"[a]\nfilename=f\n[b]\nfilename=f\nwrite_lat_log=lat\nwrite_bw_log\nlog_avg_msec=500\n",
    "groups": b"[global]\nfilename=f\nstonewall\n[a]\n[b]\nnew_group\n[c]\nwait_for_previous\n",
    "rate_dist": b"[j]\nfilename=f\nrate=10m,5m\nrate_iops=100\nrandom_distribution=zipf:1.2\nnorandommap\n",
    "notes": b"[j]\nname=x\ndescription=y\nthread\nrandrepeat=0\nclat_percentiles=1\nlat_percentiles=1\n",
    "before_section": b"bs=4k\n[j]\n",
    "only_global": b"; only globals\n[global]\nbs=4k\n",
    "bad_key": b"[j]\n  = 4\n",
    "empty_value": b"[j]\nbs=\n",
    "variable": b"[j]\nsize=${SIZE}\n",
    "include": b"include other.fio\n[j]\n",
    "bad_bool": b"[j]\ndirect=yes\n",
    "bad_section": b"[j\n",
    "nul_byte": b"[j]\nbs=4k\x00\n",
    "unsupported": b"[j]\nioengine=null\n",
})
jdir = os.path.join(top, "seeds", "jobfile")

for d, seeds in ((hdir, header), (idir, index), (pdir, plans), (rdir, roundtrip), (jdir, jobfile)):
    os.makedirs(d, exist_ok=True)
    for name, blob in seeds.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(blob)

if len(sys.argv) > 1:
    with tempfile.TemporaryDirectory() as tmp:
        runs = [("gen_mixed", ["--size", "256", "--tensors", "5", "--dtypes", "BF16,F32,F8_E4M3,F4,I64"]),
                ("gen_one", ["--size", "64", "--tensors", "1"])]
        for name, args in runs:
            out = os.path.join(tmp, name + ".safetensors")
            subprocess.run([sys.argv[1], "gen", out, "-q", *args], check=True)
            with open(out, "rb") as f:
                blob = f.read()
            with open(os.path.join(hdir, name), "wb") as f:
                f.write(blob)
        out = os.path.join(tmp, "sharded")
        subprocess.run([sys.argv[1], "gen", out, "-q", "--size", "256", "--tensors", "6", "--shards", "3"],
                       check=True)
        with open(os.path.join(out, "model.safetensors.index.json"), "rb") as f:
            blob = f.read()
        with open(os.path.join(idir, "gen_sharded"), "wb") as f:
            f.write(blob)
print("seeds:", len(os.listdir(hdir)), "header,", len(os.listdir(idir)), "index,",
      len(os.listdir(pdir)), "plan,", len(os.listdir(rdir)), "roundtrip,", len(os.listdir(jdir)),
      "jobfile")
