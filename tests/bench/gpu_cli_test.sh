#!/bin/sh
# pinio bench --mem cuda:N / hip:N as a user runs it, on the test drivers
# (PINIO_CUDA_LIB, PINIO_HIP_LIB set by meson): every block read back from
# the "device" and checked, the JSON valid against doc/json and its stage
# figures consistent by arithmetic (bytes equal per stage, bandwidth x
# seconds = bytes, the overlap's formula), the text naming each stage and
# what is not measured, a job file's mem=, and the refusals: no driver (the
# library tried named), cuda:N past the device count (N named), writes.
# usage: gpu_cli_test.sh PINIO SOURCE_ROOT
set -u
PINIO=$1 SRC=$2
[ -x /usr/bin/python3 ] || { echo "SKIP: no /usr/bin/python3"; exit 77; }
DIR=$(mktemp -d "/var/tmp/pinio-${PINIO_TEST_RUN:-p$$}-benchgpu-XXXXXX") || exit 1
trap 'rm -rf "$DIR"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
F=$DIR/f
# check WANT WHAT CMD...: exit status WANT, output in $DIR/out
check() {
    want=$1 what=$2; shift 2
    "$@" >"$DIR/out" 2>&1
    got=$?
    [ "$got" -eq "$want" ] || { fail "$what: exit $got, want $want"; cat "$DIR/out"; }
}
has() { grep -qF -- "$2" "$1" || { fail "$3: no '$2'"; cat "$1"; }; }

check 0 "the verify file" "$PINIO" bench --rw write --verify --size 4M --bs 128k --seed 5 "$F"

# JSON: valid, and its stages add up
for mem in cuda:0 hip:0; do
    "$PINIO" bench "$F" --verify-only --seed 5 --bs 128k --qd 2 --mem "$mem" --json \
        >"$DIR/$mem.json" 2>"$DIR/err" || { fail "$mem: exit $?"; cat "$DIR/err"; continue; }
    /usr/bin/python3 "$SRC/tests/tools/json_validate.py" "$SRC/doc/json" bench "$DIR/$mem.json" ||
        fail "$mem: the JSON does not match doc/json/bench.schema.json"
    /usr/bin/python3 - "$DIR/$mem.json" "$mem" <<'EOF' || fail "$mem: the figures do not add up"
import json, sys
d = json.load(open(sys.argv[1]))
g = d["gpu"]
bad = []
def want(cond, what):
    if not cond:
        bad.append(what)
n = 4 << 20
want(d["mem"] == sys.argv[2] and g["device"] == sys.argv[2], "device named")
want(d["read"]["bytes"] == n, "read bytes %d" % d["read"]["bytes"])
want(g["storage_to_host_bytes"] == n and g["host_to_device_bytes"] == n, "bytes per stage")
want(g["verified_bytes"] == n, "checked on the device: %d" % g["verified_bytes"])
def close(a, b):
    return abs(a - b) <= 1e-6 * max(abs(a), abs(b), 1) + 2
for st, b in (("storage_to_host", g["storage_to_host_bytes"]),
              ("host_to_device", g["host_to_device_bytes"])):
    want(g[st + "_s"] > 0 and close(g[st + "_bytes_per_s"] * g[st + "_s"], b),
         "%s: bandwidth x seconds = bytes" % st)
    want(g[st + "_s"] <= d["elapsed_s"] + 1e-9, "%s within the run" % st)
want(close(g["end_to_end_bytes_per_s"] * d["elapsed_s"], n), "end to end")
want(g["copy_alone_bytes_per_s"] > 0 and
     close(g["copy_alone_s"] * g["copy_alone_bytes_per_s"], n), "copy alone")
ov = min(1, max(0, 1 - g["copy_wait_s"] / g["copy_alone_s"]))
want(abs(g["overlap"] - ov) < 1e-6, "overlap %r, formula %r" % (g["overlap"], ov))
want("GPUDirect Storage" in g["gds"] and "not measured" in g["gds"], "gds note")
if bad:
    print("; ".join(bad))
    print(json.dumps(g, indent=1))
    sys.exit(1)
EOF
done

# text: each stage, the reference, the device check, what is not measured
check 0 "text" "$PINIO" bench "$F" --verify-only --seed 5 --bs 128k --mem cuda:0
has "$DIR/out" "cuda:0 (pinio test driver device 0): storage -> host -> device, pipelined, 4.00 MiB" "text"
has "$DIR/out" "storage -> host " "text"
has "$DIR/out" "host -> device " "text"
has "$DIR/out" "% of the copy time hidden behind reads" "text"
has "$DIR/out" "CPU -> GPU alone " "text"
has "$DIR/out" "verify: 4.00 MiB read back from the device, all blocks match" "text"
has "$DIR/out" "storage -> GPU direct (GPUDirect Storage, gdsio -x 0) needs cuFile: not measured" "text"

# a copy that lands changed is caught on the device, named by offset
check 1 "a changed copy" env FAKE_CUDA_FAIL=flip:2 "$PINIO" bench "$F" --verify-only --seed 5 \
    --bs 128k --qd 1 --mem cuda:0
has "$DIR/out" "verify on cuda:0: the block at offset 131072 (131072 bytes) differs in device memory" "flip"

# a job file's mem= (fio's key; iomem= its alias)
cat >"$DIR/g.fio" <<EOF
[global]
filename=$F
bs=128k
randseed=5
verify_only=1
[togpu]
rw=read
mem=cuda:0
[host]
rw=read
iomem=malloc
EOF
check 0 "job file" "$PINIO" bench "$DIR/g.fio" --json
/usr/bin/python3 - "$DIR/out" <<'EOF' || fail "job file: mem= not applied"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
by = {r.get("job_name"): r for r in rows if "job_name" in r}
ok = by["togpu"]["mem"] == "cuda:0" and by["togpu"]["gpu"]["verified_bytes"] == 4 << 20 \
    and by["host"]["mem"] == "host" and "gpu" not in by["host"]
sys.exit(0 if ok else 1)
EOF
printf '[x]\nfilename=%s\nmem=shmhuge\n' "$F" >"$DIR/bad.fio"
check 2 "job file mem=shmhuge" "$PINIO" bench "$DIR/bad.fio"
has "$DIR/out" "mem=shmhuge is not supported by pinio bench (malloc, cuda:N, hip:N)" "mem=shmhuge"

# refusals, each before any file is made
check 1 "no driver" env PINIO_CUDA_LIB="$DIR/none/libcuda.so.1" "$PINIO" bench "$DIR/new" --mem cuda:0
has "$DIR/out" "--mem cuda:0: no CUDA driver: $DIR/none/libcuda.so.1" "no driver"
[ ! -e "$DIR/new" ] || fail "no driver: the target was made"
check 1 "no such device" "$PINIO" bench "$DIR/new" --mem cuda:4
has "$DIR/out" "no such device: the CUDA driver has 1 device (cuda:0 to cuda:0), no cuda:4" "cuda:4"
[ ! -e "$DIR/new" ] || fail "no such device: the target was made"
check 1 "no such device, JSON" "$PINIO" bench "$DIR/new" --mem hip:2 --json
has "$DIR/out" '"error":{' "JSON error object"
has "$DIR/out" "no hip:2" "hip:2"
check 2 "a write" "$PINIO" bench "$DIR/new" --rw randwrite --mem cuda:0
has "$DIR/out" "GPU memory is a destination of reads only" "writes"
check 2 "a bad name" "$PINIO" bench "$DIR/new" --mem gpu:0
has "$DIR/out" "--mem gpu:0: not a destination (host, cuda:N or hip:N" "gpu:0"
[ $fails -eq 0 ] && echo "bench --mem: all checks passed"
exit $((fails > 0))
