#!/bin/sh
# `pinio bench --mpi` end to end under mpiexec with N ranks on this host
# (oversubscribed): file per process, one shared file split by rank with a
# read-after-write reordered to another rank's region (IOR -C), the same
# file for all, a job file with per-rank names; the combined figures are
# checked against the JSON's per-rank fields (bench_mpi_check.py: sums,
# last end - first start, stonewall, percentiles merged from the ranks'
# histograms), the time series merged on the common clock (--log-file:
# its bytes the job's exactly, in order, every rank in it). A rank that fails, on a missing directory or an injected
# EIO, fails the job with one message from rank 0 naming it, and no hang
# (meson's timeout). Small files: the arithmetic is the test, not speed.
# usage: cli_bench_mpi.sh PINIO N MPIEXEC [MPIEXEC ARGS...]
set -u
pinio=$1; n=$2; shift 2
here=$(cd "$(dirname "$0")" && pwd)
PY=/usr/bin/python3
fail() { echo "FAIL (n=$n): $*"; exit 1; }
dir=$(mktemp -d "/var/tmp/pinio-${PINIO_TEST_RUN:-p$$}-benchmpi-XXXXXX") || fail "mktemp"
trap 'rm -rf "$dir"' EXIT
last=$((n - 1))
check() {
  $PY "$here/../tools/json_validate.py" "$here/../../doc/json" bench "$1" ||
    fail "$1 does not match doc/json/bench.schema.json: $(cat "$1")"
  $PY "$here/bench_mpi_check.py" "$@" || fail "the JSON of $1 is wrong: $(cat "$1")"
}

# usage: per-rank names without --mpi would name one literal file
"$pinio" bench --file "$dir/f.\$rank" --size 1M >/dev/null 2>&1
[ $? -eq 2 ] || fail "\$rank without --mpi is not a usage error"
[ ! -e "$dir/f.\$rank" ] || fail "a file named f.\$rank was made"
"$pinio" bench --mpi-reorder=1 --file "$dir/x" --size 1M >/dev/null 2>&1
[ $? -eq 2 ] || fail "--mpi-reorder without --mpi is not a usage error"
"$@" -n "$n" "$pinio" bench --mpi=everywhere --file "$dir/x" >"$dir/out" 2>&1
[ $? -ne 0 ] && grep -q 'same, per-rank or shared' "$dir/out" ||
  fail "--mpi=everywhere is not a usage error said once: $(cat "$dir/out")"
[ "$(grep -c 'per-rank or shared' "$dir/out")" -eq 1 ] || fail "the usage error came from more than rank 0"

# $rank in a name under another layout would name one literal file
"$@" -n "$n" "$pinio" bench --mpi=same --file "$dir/f.\$rank" --size 1M >"$dir/out" 2>&1
[ $? -ne 0 ] && grep -q 'the per-rank layout, not same' "$dir/out" ||
  fail "--mpi=same with \$rank did not fail naming the layout: $(cat "$dir/out")"
[ ! -e "$dir/f.\$rank" ] || fail "a file named f.\$rank was made under --mpi=same"

# 1. file per process: each rank reads its own 2 MiB file (made first)
"$@" -n "$n" "$pinio" bench --mpi --file "$dir/f.\$rank" --size 2M --bs 64k --qd 4 --json \
  --percentile-list 25:99.5 --mpi-lat-log "$dir/lat" >"$dir/fpp.json" 2>"$dir/err" || fail "per-rank run: $(cat "$dir/err")"
check "$dir/fpp.json" "$n" 2097152 "$dir/lat"
for r in $(seq 0 "$last"); do
  [ "$(stat -c %s "$dir/f.$r")" -eq 2097152 ] || fail "rank $r's file f.$r was not made"
done
$PY - "$dir/fpp.json" "$dir" <<'EOF' || fail "per-rank names or layout: $(cat "$dir/fpp.json")"
import json, sys
j = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
assert j["mpi"]["layout"] == "per-rank", j["mpi"]
for r in j["ranks"]:
    assert r["file"] == "%s/f.%d" % (sys.argv[2], r["rank"]) and r["data_of"] == r["rank"], r
EOF

# 2. the same ranks' files again with the clocks measured by ping: the
# offsets and round trips are there, the arithmetic holds all the same
"$@" -n "$n" "$pinio" bench --mpi --file "$dir/f.\$rank" --size 2M --bs 64k --json \
  --mpi-clock-ping >"$dir/ping.json" 2>"$dir/err" || fail "--mpi-clock-ping: $(cat "$dir/err")"
check "$dir/ping.json" "$n" 2097152
$PY - "$dir/ping.json" "$n" <<'EOF' || fail "clock: $(cat "$dir/ping.json")"
import json, sys
j = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
n = int(sys.argv[2])
assert j["mpi"]["clock"] == ("monotonic+ping" if n > 1 else "monotonic"), j["mpi"]
assert all((r["clock_rtt_s"] > 0) == (r["rank"] > 0) for r in j["ranks"]), j["ranks"]
EOF

# 2b. the time series merged on the common clock (--log-file: rank 0's,
# one file): the sum rows' bytes and requests are the job's exactly, each
# rank's rows its own bytes, in order, within its run on the common clock;
# each sum row closes the rank rows before it; every rank is in it
"$@" -n "$n" "$pinio" bench --mpi --file "$dir/f.\$rank" --size 2M --bs 64k --qd 2 --json \
  --log-interval 2 --log-file "$dir/series.csv" >"$dir/series.json" 2>"$dir/err" ||
  fail "--log-file: $(cat "$dir/err")"
check "$dir/series.json" "$n" 2097152
$PY - "$dir/series.json" "$dir/series.csv" "$n" <<'EOF' || fail "the merged series: $(cat "$dir/series.csv")"
import csv, json, sys
j = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
n = int(sys.argv[3])
with open(sys.argv[2]) as f:
    head = f.readline().strip()
    rows = list(csv.DictReader(f, fieldnames=head.split(",")))
assert head == ("time_ms,rank,dir,bw_bytes_per_s,iops,lat_mean_ns,lat_p50_ns,lat_p99_ns,"
                "bytes,ios"), head
assert all(r["dir"] == "read" for r in rows), rows
sums = [r for r in rows if r["rank"] == "-1"]
per = [r for r in rows if r["rank"] != "-1"]
assert sum(int(r["bytes"]) for r in sums) == j["bytes"] == sum(int(r["bytes"]) for r in per), j
assert sum(int(r["ios"]) for r in sums) == j["ios"] == sum(int(r["ios"]) for r in per), j
for k in j["ranks"]:
    mine = [r for r in per if int(r["rank"]) == k["rank"]]
    assert sum(int(r["bytes"]) for r in mine) == k["bytes"], (k, mine)
    t = [float(r["time_ms"]) for r in mine]
    assert t == sorted(t), t
    # printed to 0.001 ms: a row with bytes ends after the rank's first issue, the
    # last at its end or after; its first interval began before its first issue
    # (it may hold none), so it ends within 2 ms (--log-interval) of it
    busy = [float(r["time_ms"]) for r in mine if int(r["bytes"])]
    assert busy[0] >= k["start_s"] * 1e3 - 0.001 and t[-1] >= k["end_s"] * 1e3 - 0.001, (k, t)
    assert t[0] <= k["start_s"] * 1e3 + 2 + 0.001, (k, t)
assert sorted({int(r["rank"]) for r in per}) == list(range(n)), per
group, last = [], 0.0
for r in rows:
    if r["rank"] != "-1":
        group.append(r)
        continue
    t = float(r["time_ms"])
    assert t >= last and group, (r, last, group)
    assert all(float(g["time_ms"]) <= t for g in group), (r, group)
    assert int(r["bytes"]) == sum(int(g["bytes"]) for g in group), (r, group)
    assert int(r["lat_p50_ns"]) == 0 and int(r["lat_p99_ns"]) == 0, r
    group, last = [], t
assert not group and abs(last - j["elapsed_s"] * 1e3) <= 0.001 or last > j["elapsed_s"] * 1e3, (last, j)
EOF

# 3. shared file: rank r writes [r MiB, r+1 MiB) with the verify pattern,
# then reads rank r+1's region (--mpi-reorder=1) and checks every block
"$@" -n "$n" "$pinio" bench --mpi=shared --file "$dir/shared" --rw write --verify --size 1M \
  --bs 64k --json >"$dir/w.json" 2>"$dir/err" || fail "shared write: $(cat "$dir/err")"
check "$dir/w.json" "$n" 1048576
[ "$(stat -c %s "$dir/shared")" -eq $((n * 1048576)) ] || fail "the shared file is not n MiB"
"$@" -n "$n" "$pinio" bench --mpi=shared --mpi-reorder=1 --file "$dir/shared" --rw read \
  --verify-only --size 1M --bs 64k --json >"$dir/r.json" 2>"$dir/err" ||
  fail "shared read of another rank's region: $(cat "$dir/err")"
check "$dir/r.json" "$n" 1048576
$PY - "$dir/r.json" "$n" <<'EOF' || fail "reorder: $(cat "$dir/r.json")"
import json, sys
j = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
n = int(sys.argv[2])
assert j["mpi"]["layout"] == "shared" and j["mpi"]["reorder"] == 1, j["mpi"]
for r in j["ranks"]:
    assert r["data_of"] == (r["rank"] + 1) % n, r
    assert r["offset_bytes"] == r["data_of"] * 1048576, r
EOF

# 4. the same file for every rank: n times its bytes
"$@" -n "$n" "$pinio" bench --mpi=same --file "$dir/f.0" --size 1M --bs 64k --json \
  >"$dir/same.json" 2>"$dir/err" || fail "same-file run: $(cat "$dir/err")"
check "$dir/same.json" "$n" 1048576

# 5. a job file with per-rank names: each section a collective of its own
cat >"$dir/job.fio" <<EOF
[global]
bs=64k
size=1M
[reads]
rw=randread
filename=$dir/j.\$rank
[writes]
rw=write
filename=$dir/jw.\${rank}
EOF
"$@" -n "$n" "$pinio" bench --mpi "$dir/job.fio" --json >"$dir/job.json" 2>"$dir/err" ||
  fail "job file: $(cat "$dir/err")"
for r in $(seq 0 "$last"); do
  [ -e "$dir/j.$r" ] && [ -e "$dir/jw.$r" ] || fail "rank $r's job file targets are missing"
done
grep '"job_name":"reads"' "$dir/job.json" >"$dir/job1.json" || fail "no reads section: $(cat "$dir/job.json")"
check "$dir/job1.json" "$n" 1048576
grep '"job_name":"writes"' "$dir/job.json" >"$dir/job2.json" || fail "no writes section"
check "$dir/job2.json" "$n" 1048576

# 6. a rank whose directory is missing: one error naming it, from rank 0
mkdir "$dir/d"
for r in $(seq 0 $((last - 1))); do mkdir "$dir/d/$r"; done
"$@" -n "$n" "$pinio" bench --mpi --file "$dir/d/\$rank/f" --size 1M --bs 64k \
  >"$dir/out" 2>"$dir/err"
[ $? -ne 0 ] || fail "a rank's missing directory did not fail the job"
grep "rank $last of $n: " "$dir/err" | grep -q "$dir/d/$last/f" ||
  fail "the error does not name rank $last and its file: $(cat "$dir/err")"
[ "$(grep -c "rank $last of $n" "$dir/err")" -eq 1 ] || fail "not one message: $(cat "$dir/err")"

# 7. an EIO injected on one rank's 3rd completion: the job fails on every
# rank with that rank's error, said once, in JSON too. One pass with the
# last rank failing; then runs of --time 1000, where the other ranks must
# be stopped, not left to run out their time (meson's timeout of 200 s is
# the check), and the job's error is still the failing rank's, not the
# others' stop: the last rank failing (rank 0 stops the others from its
# progress) and rank 0 (it stops them before it waits for them)
for spec in "$last:" "$last:--time 1000" "0:--time 1000"; do
  bad=${spec%%:*} timed=${spec#*:}
  "$@" -n "$n" sh -c 'r=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}
    [ "$r" = "$1" ] && export PINIO_FAULTS=eio@3
    shift; exec "$@"' sh "$bad" "$pinio" bench --mpi --file "$dir/f.\$rank" --size 2M --bs 64k \
    $timed --json >"$dir/out" 2>"$dir/err"
  [ $? -ne 0 ] || fail "an injected EIO on rank $bad ($timed) did not fail the job"
  $PY - "$dir/out" "$bad" "$n" "$dir/f.$bad" <<'EOF' ||
import json, sys
lines = [l for l in open(sys.argv[1]).read().splitlines() if l.strip()]
assert len(lines) == 1, lines
e = json.loads(lines[0])["error"]
# eio@3 fails the third read to complete: 16 are in flight at once (the
# default --qd), and they complete in whatever order the device answers
# (seen: 65536 in one run of MPICH's stage, 131072 in most), so the
# offset is one of the first 16 blocks of 64 KiB or the two sent when the
# first two completed: never past the 18th.
pre = "%s: rank %s of %s: read at offset " % (sys.argv[4], sys.argv[2], sys.argv[3])
tail = ": input/output error"
m = e["message"]
assert m.startswith(pre) and m.endswith(tail), e
off = m[len(pre):-len(tail)]
assert off.isdigit() and int(off) % 65536 == 0 and int(off) < 18 * 65536, e
assert e["file"] == sys.argv[4] and e["code"] == -5, e
EOF
    fail "the EIO on rank $bad ($timed): $(cat "$dir/out" "$dir/err")"
done
echo "ok: pinio bench --mpi, n=$n"
