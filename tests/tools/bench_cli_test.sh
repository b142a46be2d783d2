#!/usr/bin/env bash
# pinio bench from the command line: usage errors exit 2 with one line and
# create nothing; --json emits one parseable object per run; --sweep prints
# one table row per cell. usage: bench_cli_test.sh PINIO
set -u
pinio=$1
dir=$(mktemp -d /tmp/pbench-cli-XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail=0
f="$dir/data"

bad() { # expected exit, args...
    local want=$1; shift
    "$pinio" bench "$@" >"$dir/out" 2>"$dir/err"
    local rc=$?
    local lines; lines=$(wc -l <"$dir/err")
    if [ "$rc" != "$want" ] || [ "$lines" != 1 ] || [ -e "$f" ]; then
        echo "FAIL: pinio bench $* -> rc $rc (want $want), $lines stderr lines, file $( [ -e "$f" ] && echo created || echo absent)"
        cat "$dir/err"; fail=1
    fi
}
bad 2 --file "$f" --bs 1000
bad 2 --file "$f" --bs 4x
bad 2 --file "$f" --qd 0
bad 2 --file "$f" --qd 99999
bad 2 --file "$f" --rw readwrite
bad 2 --file "$f" --time -1
bad 2 --file "$f" --time 1e-300
bad 2 --file "$f" --cache hot
bad 2 --file "$f" --verify
bad 2 --file "$f" --bogus
bad 2 --file "$f" --size 3M --jobs 2
bad 2 --file "$f" --sweep bs=4k,0
bad 2 --file "$f" --sweep qd=1,5000
bad 2 --file "$f" --direct=2
bad 2 --file "$f" --batch 0
bad 2 --file "$f" --batch 5000
bad 2 --file "$f" --batch lots
bad 2 --file "$f" --node 4095
bad 2
bad 1 --file /nonexistent-dir/x
# -1 is the default --node (no node): accepted as written (exit 1: no file).
bad 1 --file /nonexistent-dir/x --node -1
bad 1 --file /dev/null --rw write --size 1M

# SIGTERM while a missing file is filled: the run stops, removes its
# temporary and dies of the signal; nothing is left at the target's name.
g="$dir/sig"
"$pinio" bench --file "$g" --size 4G --direct=0 >/dev/null 2>"$dir/err" &
pid=$!
for _ in $(seq 200); do ls "$dir"/sig.pinio-bench-*.tmp >/dev/null 2>&1 && break; sleep 0.02; done
kill -TERM $pid; wait $pid; rc=$?
[ $rc = 143 ] || { echo "FAIL: bench after SIGTERM exit $rc, want 143"; cat "$dir/err"; fail=1; }
left=$(ls "$dir" | grep '^sig')
[ -z "$left" ] || { echo "FAIL: SIGTERM left $left"; fail=1; }
# SIGKILL cannot be handled: the partial file stays under its temporary
# name, never at the target's.
"$pinio" bench --file "$g" --size 4G --direct=0 >/dev/null 2>&1 &
pid=$!
for _ in $(seq 200); do ls "$dir"/sig.pinio-bench-*.tmp >/dev/null 2>&1 && break; sleep 0.02; done
kill -KILL $pid; wait $pid 2>/dev/null
[ -e "$g" ] && { echo "FAIL: SIGKILL left a partial file at the target's name"; fail=1; }
rm -f "$dir"/sig.pinio-bench-*.tmp

# A temporary a killed run left (marked, dead pid, old): removed by the next
# run that makes the same file; an unmarked one stays.
dead=$(sh -c 'echo $$')
for m in 1 0; do
    t="$dir/sig.pinio-bench-$((dead + 1000000 * (1 - m))).tmp"
    : >"$t"
    python3 -c 'import os,sys,time; p=sys.argv[1]; m=sys.argv[2]=="1"; m and os.setxattr(p,"user.pinio.bench",b"boot=%s pidns=%d" % (open("/proc/sys/kernel/random/boot_id").read().strip().encode(), os.stat("/proc/self/ns/pid").st_ino)); t=time.time()-3600; os.utime(p,(t,t))' "$t" $m
done
"$pinio" bench --file "$g" --size 1M --bs 64k --direct=0 >/dev/null 2>"$dir/err" || { echo "FAIL: bench next to a stale temporary"; cat "$dir/err"; fail=1; }
[ -e "$dir/sig.pinio-bench-$dead.tmp" ] && { echo "FAIL: bench's stale temporary stayed"; fail=1; }
[ -e "$dir/sig.pinio-bench-$((dead + 1000000)).tmp" ] || { echo "FAIL: an unmarked temporary was removed"; fail=1; }
rm -f "$g" "$dir"/sig.pinio-bench-*.tmp

# A write run on a file holding data bench did not write: refused, and the
# data stays; with --allow-file-overwrite it runs.
head -c 1048576 /dev/urandom >"$dir/precious"
cp "$dir/precious" "$dir/precious.orig"
"$pinio" bench --file "$dir/precious" --rw write --direct=0 --size 1M --bs 64k >/dev/null 2>"$dir/err"; rc=$?
[ $rc = 1 ] && grep -q "allow-file-overwrite" "$dir/err" || { echo "FAIL: write over data -> rc $rc"; cat "$dir/err"; fail=1; }
cmp -s "$dir/precious" "$dir/precious.orig" || { echo "FAIL: the refused write changed the file"; fail=1; }
"$pinio" bench --file "$dir/precious" --rw write --direct=0 --size 1M --bs 64k --allow-file-overwrite >/dev/null 2>"$dir/err" || { echo "FAIL: --allow-file-overwrite refused"; cat "$dir/err"; fail=1; }
rm -f "$dir/precious" "$dir/precious.orig"

# A JSON run (creating the file) and a sweep, both parseable.
"$pinio" bench --file "$f" --size 8M --bs 64k --qd 4 --json >"$dir/j1" 2>"$dir/err" || { echo "FAIL: json run"; cat "$dir/err"; fail=1; }
python3 -m json.tool "$dir/j1" >/dev/null || { echo "FAIL: not JSON:"; cat "$dir/j1"; fail=1; }
python3 - "$dir/j1" <<'PY' || fail=1
import json, sys
j = json.load(open(sys.argv[1]))
assert j["bytes"] == 8 << 20 and j["ios"] == 128 and j["created"] is True, j
assert j["batch"] == 4, j  # auto: qd for a sequential read
l = j["lat_ns"]
assert 0 < l["min"] <= l["p50"] <= l["p90"] <= l["p99"] <= l["p99.9"] <= l["max"], l
PY
"$pinio" bench --file "$f" --size 8M --sweep bs=4k,64k qd=1,8 --json >"$dir/j2" 2>"$dir/err" || { echo "FAIL: json sweep"; cat "$dir/err"; fail=1; }
[ "$(wc -l <"$dir/j2")" = 4 ] || { echo "FAIL: sweep json rows"; cat "$dir/j2"; fail=1; }
while read -r line; do echo "$line" | python3 -m json.tool >/dev/null || { echo "FAIL: bad line $line"; fail=1; }; done <"$dir/j2"
"$pinio" bench --file "$f" --size 8M --rw randwrite --verify --sweep bs=4k,64k qd=2,16 >"$dir/t" 2>"$dir/err" || { echo "FAIL: table sweep"; cat "$dir/err"; fail=1; }
[ "$(grep -c randwrite "$dir/t")" = 4 ] || { echo "FAIL: table rows"; cat "$dir/t"; fail=1; }
"$pinio" bench --file "$f" --size 8M --rw write --bs 1m --verify >"$dir/t" 2>&1 && grep -q "all blocks match" "$dir/t" || { echo "FAIL: verify text"; cat "$dir/t"; fail=1; }
# --node 0 exists on every Linux machine: buffers and the job thread go there.
"$pinio" bench --file "$f" --size 8M --bs 64k --node 0 --json >"$dir/j3" 2>"$dir/err" || { echo "FAIL: --node 0"; cat "$dir/err"; fail=1; }
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert j["node"] == 0 and j["bytes"] == 8 << 20, j' "$dir/j3" || fail=1
[ $fail = 0 ] && echo "pbench cli: ok"
exit $fail
