#!/bin/sh
# `pinio load --mpi` end to end under mpiexec: --help, a usage error, and a
# node-local load in 2 simulated nodes whose JSON report (rank 0) must say
# one copy read from storage by the job, 2 nodes, one shared copy each;
# --progress through mpiexec's pipe.
# usage: cli_load_mpi.sh PINIO MPIEXEC [MPIEXEC ARGS...]
set -u
pinio=$1; shift
fail() { echo "FAIL: $*"; exit 1; }
"$pinio" load --mpi node --help | grep -q -- '--node-ranks' || fail "--help does not explain --node-ranks"
"$pinio" load --mpi nodes x >/dev/null 2>&1; [ $? -eq 2 ] || fail "--mpi nodes is not a usage error (exit 2)"
"$pinio" load --mpi replicate --node-ranks 2 x >/dev/null 2>&1; [ $? -eq 2 ] || fail "--node-ranks without --mpi node is not a usage error"
dir=$(mktemp -d "/var/tmp/pinio-${PINIO_TEST_RUN:-p$$}-mpicli-XXXXXX") || fail "mktemp"
trap 'rm -rf "$dir"' EXIT
"$pinio" gen "$dir/m.safetensors" --size 4194304 --tensors 8 >/dev/null || fail "pinio gen"
out=$("$@" -n 2 "$pinio" load --mpi node --node-ranks 1 --cache cold --json "$dir/m.safetensors") ||
  fail "pinio load --mpi node failed: $out"
echo "$out"
echo "$out" | python3 -c '
import json, sys
j = json.loads(sys.stdin.read().strip().splitlines()[-1])
assert j["policy"] == "node" and j["rank_count"] == 2 and j["node_count"] == 2, j
assert j["job_read_bytes"] == j["plan_read_bytes"] == sum(r["read_bytes"] for r in j["ranks"]), j
assert j["node_bytes"] >= 4194304, j
assert [r["node"] for r in j["ranks"]] == [0, 1] and all(r["local_rank"] == 0 for r in j["ranks"]), j
assert all(r["bytes"] == 4194304 for r in j["ranks"]), j
' || fail "the JSON report is wrong"
# --progress: rank 0 draws the job's reads to 100 % through mpiexec's pipe,
# and only rank 0; without it a pipe gets no progress line.
"$@" -n 2 "$pinio" load --mpi replicate --cache cold --progress "$dir/m.safetensors" \
  >/dev/null 2>"$dir/err" || fail "pinio load --mpi --progress failed: $(cat "$dir/err")"
tr '\r' '\n' <"$dir/err" | grep -q '^load --mpi \[=*\] 100%' ||
  fail "no progress line to 100 %: $(cat "$dir/err")"
# the job's bytes (every rank's reads: one copy, 4 MiB and the header), not
# rank 0's half
tr '\r' '\n' <"$dir/err" | grep -q '100%  4.20 / 4.20 MB' ||
  fail "the progress line does not count the job's reads: $(cat "$dir/err")"
"$@" -n 2 "$pinio" load --mpi replicate --cache cold "$dir/m.safetensors" >/dev/null 2>"$dir/err" ||
  fail "pinio load --mpi failed: $(cat "$dir/err")"
[ ! -s "$dir/err" ] || fail "a progress line without --progress into a pipe: $(cat "$dir/err")"
echo "PASS"
