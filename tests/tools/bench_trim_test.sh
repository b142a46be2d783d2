#!/usr/bin/env bash
# pinio bench --rw trim|randtrim from the command line: the trim direction
# in JSON, terse and the --log-file time series; holes left (st_blocks);
# usage errors (verify) exit 2 and create nothing; a file system that cannot
# punch holes (PINIO_FAULTS=trimnotsup) exits 1 with the reason; a job file
# with rw=randtrim runs. usage: bench_trim_test.sh PINIO
set -u
pinio=$1
dir=$(mktemp -d "/var/tmp/pinio-${PINIO_TEST_RUN:-p$$}-bench-trim-XXXXXX")
trap 'rm -rf "$dir"' EXIT
fail=0
f="$dir/data"

# --verify has nothing to check in a trimmed range: usage error, no file.
for v in --verify --verify-only; do
    "$pinio" bench --file "$f" --rw trim --size 1M $v >"$dir/out" 2>"$dir/err"
    rc=$?
    if [ $rc != 2 ] || [ "$(wc -l <"$dir/err")" != 1 ] || [ -e "$f" ]; then
        echo "FAIL: --rw trim $v: rc $rc (want 2)"; cat "$dir/err"; fail=1
    fi
    grep -q -- "$v.* trim workload" "$dir/err" ||
        { echo "FAIL: the $v usage error does not say it is the trim workload"; cat "$dir/err"; fail=1; }
done

# Several files: each probed, each trimmed whole (no data block left in any).
"$pinio" bench --file "$dir/m1,$dir/m2" --rw trim --size 2M --bs 64k --qd 4 >"$dir/out" 2>"$dir/err" ||
    { echo "FAIL: trim over two files"; cat "$dir/err"; fail=1; }
for m in m1 m2; do
    [ -f "$dir/$m" ] && [ "$(stat -c %b "$dir/$m")" = 0 ] ||
        { echo "FAIL: $m not trimmed whole: $(stat -c '%s bytes, %b blocks' "$dir/$m")"; fail=1; }
done
PINIO_FAULTS=trimnotsup "$pinio" bench --file "$dir/m1,$dir/m2" --rw trim --size 2M --bs 64k \
    >"$dir/out" 2>"$dir/err"
[ $? = 1 ] && grep -q "m1: the file system does not support punching holes" "$dir/err" ||
    { echo "FAIL: trimnotsup over two files"; cat "$dir/err"; fail=1; }

# A missing file: created and filled, then every block trimmed once.
"$pinio" bench --file "$f" --rw randtrim --size 4M --bs 64k --qd 4 --json >"$dir/j" 2>"$dir/err" ||
    { echo "FAIL: randtrim --json"; cat "$dir/err"; fail=1; }
python3 - "$dir/j" "$f" <<'PY' || fail=1
import json, os, sys
j = json.load(open(sys.argv[1]))
assert j["rw"] == "randtrim" and j["created"], j
t = j["trim"]
assert t["ios"] == 64 and t["bytes"] == 4 << 20 and t["lat_ns"]["count"] == 64, t
assert j["read"]["ios"] == 0 and j["write"]["ios"] == 0 and j["bytes"] == 4 << 20, j
assert "punch_hole" in j["features"], j["features"]
st = os.stat(sys.argv[2])
assert st.st_size == 4 << 20 and st.st_blocks == 0, (st.st_size, st.st_blocks)
PY

# terse (version 3): fields 40-49 are the trims'.
"$pinio" bench --file "$f" --rw trim --size 4M --bs 1m --output-format terse >"$dir/t" 2>"$dir/err" ||
    { echo "FAIL: trim terse"; cat "$dir/err"; fail=1; }
python3 - "$dir/t" <<'PY' || fail=1
import sys
f = open(sys.argv[1]).read().splitlines()[0].split(";")
assert len(f) == 50 and f[1] == "3" and f[3] == "trim", f
assert int(f[40]) == 4 << 20 and int(f[41]) == 4 and int(f[12]) == 0 and int(f[22]) == 0, f
PY

# The time series names the direction trim; text shows the trim samples.
"$pinio" bench --file "$f" --rw trim --size 4M --bs 64k --time 0.3 --log-interval 50 \
    --log-file "$dir/log.csv" >"$dir/txt" 2>"$dir/err" || { echo "FAIL: trim --log-file"; cat "$dir/err"; fail=1; }
grep -q '^[0-9.]*,-1,trim,' "$dir/log.csv" || { echo "FAIL: no trim rows"; head "$dir/log.csv"; fail=1; }
grep -q ',read,\|,write,' "$dir/log.csv" && { echo "FAIL: read/write rows in a trim log"; fail=1; }
grep -q "trim samples:" "$dir/txt" || { echo "FAIL: no trim samples in the text"; cat "$dir/txt"; fail=1; }

# A file system that cannot punch holes: exit 1, the file named, the reason.
PINIO_FAULTS=trimnotsup "$pinio" bench --file "$f" --rw trim --size 4M --bs 64k >"$dir/out" 2>"$dir/err"
rc=$?
[ $rc = 1 ] && grep -q "$f: the file system does not support punching holes, so trim cannot run\|$f: the file system does not support punching holes (fallocate PUNCH_HOLE), so trim cannot run" "$dir/err" ||
    { echo "FAIL: trimnotsup: rc $rc"; cat "$dir/err"; fail=1; }

# A fio job file with rw=randtrim runs as is.
cat >"$dir/t.fio" <<EOF
[trimjob]
filename=$dir/jobdata
rw=randtrim
bs=64k
size=2m
iodepth=4
EOF
"$pinio" bench "$dir/t.fio" --json >"$dir/jf" 2>"$dir/err" || { echo "FAIL: rw=randtrim job file"; cat "$dir/err"; fail=1; }
python3 -c 'import json,sys; j=json.loads(open(sys.argv[1]).readline()); assert j["rw"] == "randtrim" and j["trim"]["ios"] == 32, j' "$dir/jf" || fail=1

[ $fail = 0 ] && echo "bench trim CLI: ok"
exit $fail
