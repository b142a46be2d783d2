#!/bin/sh
# `pinio bench --mpi` on an object (s3://) against s3rver on loopback, N
# ranks: each rank reads its 1 MiB of the object (--mpi=shared) with ranged
# GETs at depth 4; the job's bytes and HTTP requests are the ranks' sums;
# through the fault proxy, 503 SlowDown answers are retried, counted as
# retries and as throttles on the ranks that got them and in the job's
# total, and every byte still comes; a reset is a retry, never a throttle.
# usage: cli_bench_mpi_s3.sh PINIO SRC_ROOT N MPIEXEC [MPIEXEC ARGS...]
PINIO=$1
SRC=$2
n=$3
shift 3
. "$SRC/tests/s3/s3env.sh"
s3_scratch s3benchmpi || exit 1
s3_start || { s3_cleanup; exit 1; }
trap 's3_proxy_stop; s3_cleanup' EXIT
s3_bucket bench || exit 1
UPSTREAM=$AWS_ENDPOINT_URL
MIB=1048576
head -c $((n * MIB)) /dev/urandom >"$DIR/obj" || exit 1
s3_put bench obj "$DIR/obj" || exit 1
run() {
    "$@" -n "$n" "$PINIO" bench --mpi=shared s3://bench/obj --size 1M --bs 256k --qd 4 --json \
        >"$DIR/out" 2>"$DIR/err" ||
        { echo "FAIL: $1: $(cat "$DIR/err" "$DIR/out")"; exit 1; }
    /usr/bin/python3 "$SRC/tests/tools/json_validate.py" "$SRC/doc/json" bench "$DIR/out" ||
        { echo "FAIL: the JSON does not match the schema"; exit 1; }
    /usr/bin/python3 "$SRC/tests/mpi/bench_mpi_check.py" "$DIR/out" "$n" $MIB ||
        { echo "FAIL: the job's figures: $(cat "$DIR/out")"; exit 1; }
}
sums() { # RETRIES THROTTLED: the job's requests, retries, throttles: the ranks' sums
    /usr/bin/python3 - "$DIR/out" "$n" "$1" "$2" <<'EOF'
import json, sys
j = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
n, retries, throttled = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
ranks = j["ranks"]
assert j["s3"]["requests"] == sum(r["s3_requests"] for r in ranks) == 4 * n + retries, j["s3"]
assert j["s3"]["retries"] == sum(r["s3_retries"] for r in ranks) == retries, j["s3"]
assert j["s3"]["throttled"] == sum(r["s3_throttled"] for r in ranks) == throttled, j["s3"]
for r in ranks:
    assert r["s3_requests"] == 4 + r["s3_retries"], r
    # the only faults of a run are all throttles or none is
    assert r["s3_throttled"] == (r["s3_retries"] if throttled else 0), r
    assert r["offset_bytes"] == r["rank"] * 1048576 and r["bytes"] == 1048576, r
EOF
}
run "$@"
sums 0 0 || { echo "FAIL: no faults: $(cat "$DIR/out")"; exit 1; }
s3_proxy_start --fault 503 --count 2
run "$@"
sums 2 2 || { echo "FAIL: 503 SlowDown x2: $(cat "$DIR/out")"; exit 1; }
s3_proxy_start --fault reset --count 1
run "$@"
sums 1 0 || { echo "FAIL: a reset: $(cat "$DIR/out")"; exit 1; }
echo "ok: pinio bench --mpi s3://, n=$n"
