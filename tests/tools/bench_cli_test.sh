#!/usr/bin/env bash
# pinio bench from the command line: usage errors exit 2 with one line and
# create nothing; --json emits one parseable object per run; --sweep prints
# one table row per cell. usage: bench_cli_test.sh PINIO
set -u
pinio=$1
dir=$(mktemp -d "/var/tmp/pinio-${PINIO_TEST_RUN:-p$$}-bench-cli-XXXXXX")
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
bad 2 --file "$f" --log-interval 0
bad 2 --file "$f" --bogus
bad 2 --file "$f" --size 3M --jobs 2
bad 2 --file "$f" --sweep bs=4k,0
bad 2 --file "$f" --sweep qd=1,5000
bad 2 --file "$f" --direct=2
bad 2 --file "$f" --batch 0
bad 2 --file "$f" --direct maybe
bad 2 --file
bad 2 --file "$f" --rw randrw --rwmixread 100
bad 2 --file "$f" --rw read --rwmixread 50
bad 2 --file "$f" --bssplit 4k/50:64k/40
bad 2 --file "$f" --rw randread --random-distribution zipf:0
bad 2 --file "$f" --rw read --random-distribution zipf:1.2
bad 2 --file "$f" --ramp-time 1
bad 2 --file "$f" --output-format xml
bad 2 --file "$f" --verify=sha256
bad 2 --file "$f" --rw write --verify=md5
bad 2 --file "$f" --rw write --verify=crc32c --verify-only
bad 2 --file "$f" --rw write --verify-only
bad 2 --file "$f" --percentile-list 50:101
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
assert 0 < l["min"] <= l["p50"] <= l["p90"] <= l["p99"] <= l["p99_9"] <= l["max"], l
assert j["command"] == "bench" and j["schema"] >= 2 and "pinio_version" in j, j
assert j["read"]["ios"] == 128 and j["write"]["ios"] == 0 and j["partial"] is False, j
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
# Abbreviations and the new spellings: --iodep (--iodepth), --direct off.
# (--fil is ambiguous since --filesize and --file-service-type.)
"$pinio" bench --file "$f" --size 8M --bs 64k --direct off --iodep 2 --output-format terse >"$dir/t1" 2>"$dir/err" || { echo "FAIL: abbreviated options"; cat "$dir/err"; fail=1; }
# terse: one line, 50 ;-separated fields (version 3), documented in doc/json/bench.md
python3 - "$dir/t1" <<'PY' || fail=1
import sys
lines = open(sys.argv[1]).read().splitlines()
assert len(lines) == 1, lines
f = lines[0].split(";")
assert len(f) == 50 and f[0] == "pinio-bench" and f[1] == "3" and f[3] == "read", f
assert int(f[7]) == 8 << 20 and int(f[8]) == 128 and int(f[13]) == 128 and f[34] == "0", f
assert f[35] == "-1" and float(f[36]) + float(f[38]) > 0, f
PY
# Several jobs: each job's line (or section, or JSON entry) beside the
# aggregate; --group-reporting leaves the aggregate only, as fio.
"$pinio" bench --file "$f" --size 8M --bs 64k --direct off --jobs 2 --output-format terse >"$dir/t2" 2>"$dir/err" || { echo "FAIL: terse jobs"; cat "$dir/err"; fail=1; }
"$pinio" bench --file "$f" --size 8M --bs 64k --direct off --jobs 2 --output-format terse --group-reporting >"$dir/t3" 2>"$dir/err" || { echo "FAIL: terse group"; cat "$dir/err"; fail=1; }
"$pinio" bench --file "$f" --size 8M --bs 64k --direct off --jobs 2 --json >"$dir/j4" 2>"$dir/err" || { echo "FAIL: json jobs"; cat "$dir/err"; fail=1; }
"$pinio" bench --file "$f" --size 8M --bs 64k --direct off --jobs 2 >"$dir/t4" 2>"$dir/err" || { echo "FAIL: text jobs"; cat "$dir/err"; fail=1; }
"$pinio" bench --file "$f" --size 8M --bs 64k --direct off --jobs 2 --group-reporting >"$dir/t5" 2>"$dir/err" || { echo "FAIL: text group"; cat "$dir/err"; fail=1; }
python3 - "$dir" <<'PY' || fail=1
import json, sys
d = sys.argv[1]
t2 = [l.split(";") for l in open(d + "/t2").read().splitlines()]
assert [l[35] for l in t2] == ["0", "1", "-1"], t2
assert int(t2[0][7]) + int(t2[1][7]) == int(t2[2][7]) == 8 << 20, t2
t3 = [l.split(";") for l in open(d + "/t3").read().splitlines()]
assert [l[35] for l in t3] == ["-1"], t3
j = json.load(open(d + "/j4"))
assert j["jobs"] == 2 and [x["job"] for x in j["job_results"]] == [0, 1], j
assert sum(x["bytes"] for x in j["job_results"]) == j["bytes"], j
for k in ("lat_ns", "slat_ns", "clat_ns"):
    assert j[k]["count"] == j["ios"] and j["read"][k]["count"] == j["ios"], (k, j)
assert "bw_samples_bytes_per_s" in j["read"] and "iops_samples" in j["read"], j
t4, t5 = open(d + "/t4").read(), open(d + "/t5").read()
assert "job 0:" in t4 and "job 1:" in t4 and "all jobs:" in t4 and "slat us" in t4, t4
assert "job 0:" not in t5 and "clat us" in t5, t5
PY
# --log-file: CSV with the header scripts/plot reads, or JSONL, one row per
# interval, job (-1: all) and direction.
"$pinio" bench --file "$f" --size 8M --bs 4k --direct off --rw randrw --jobs 2 --time 0.35 --log-interval 100 --log-file "$dir/log.csv" >/dev/null 2>"$dir/err" || { echo "FAIL: --log-file csv"; cat "$dir/err"; fail=1; }
"$pinio" bench --file "$f" --size 8M --bs 4k --direct off --time 0.25 --log-interval 100 --log-file "$dir/log.jsonl" >/dev/null 2>"$dir/err" || { echo "FAIL: --log-file jsonl"; cat "$dir/err"; fail=1; }
python3 - "$dir" <<'PY' || fail=1
import csv, json, sys
d = sys.argv[1]
rows = list(csv.DictReader(open(d + "/log.csv")))
hdr = open(d + "/log.csv").readline().strip()
assert hdr == "time_ms,job,dir,bw_bytes_per_s,iops,lat_mean_ns,lat_p50_ns,lat_p99_ns", hdr
assert {(r["job"], r["dir"]) for r in rows} == {(j, k) for j in ("0", "1", "-1") for k in ("read", "write")}, rows
assert len(rows) >= 3 * 6, len(rows)
assert float(rows[0]["time_ms"]) == 100.0, rows[0]
js = [json.loads(l) for l in open(d + "/log.jsonl")]
assert js and set(js[0]) == set(hdr.split(",")) and {r["dir"] for r in js} == {"read"}, js
PY
# --log-file with --sweep: every cell's time starts at 0, so each row names
# its cell (number in the order run, over --repeat too), bs and qd.
"$pinio" bench --file "$f" --size 8M --direct off --time 0.25 --sweep bs=4k,64k qd=1,2 --repeat 2 --log-interval 100 --log-file "$dir/slog.csv" >/dev/null 2>"$dir/err" || { echo "FAIL: --sweep --log-file csv"; cat "$dir/err"; fail=1; }
"$pinio" bench --file "$f" --size 8M --direct off --time 0.25 --sweep qd=1,2 --log-interval 100 --log-file "$dir/slog.jsonl" >/dev/null 2>"$dir/err" || { echo "FAIL: --sweep --log-file jsonl"; cat "$dir/err"; fail=1; }
python3 - "$dir" <<'PY' || fail=1
import csv, json, sys
d = sys.argv[1]
hdr = open(d + "/slog.csv").readline().strip()
assert hdr == "time_ms,job,dir,bw_bytes_per_s,iops,lat_mean_ns,lat_p50_ns,lat_p99_ns,cell,bs_bytes,qd", hdr
rows = list(csv.DictReader(open(d + "/slog.csv")))
cells = {}
for r in rows:
    cells.setdefault(int(r["cell"]), set()).add((int(r["bs_bytes"]), int(r["qd"])))
assert sorted(cells) == list(range(1, 9)), sorted(cells)
assert all(len(v) == 1 for v in cells.values()), cells
order = [next(iter(cells[k])) for k in range(1, 9)]
grid = [(b, q) for b in (4096, 65536) for q in (1, 2)]
assert order == grid + grid[::-1], order  # the second repetition reversed
first = {}
for r in rows:  # each cell's time restarts: its first row is the first interval
    first.setdefault(r["cell"], float(r["time_ms"]))
assert set(first.values()) == {100.0}, first
js = [json.loads(l) for l in open(d + "/slog.jsonl")]
assert {(r["cell"], r["bs_bytes"], r["qd"]) for r in js} == {(1, 1 << 20, 1), (2, 1 << 20, 2)}, js
PY
# --output FILE: the result goes there, stdout stays empty.
"$pinio" bench --file "$f" --size 8M --bs 64k --json --output "$dir/o.json" >"$dir/so" 2>"$dir/err" || { echo "FAIL: --output"; cat "$dir/err"; fail=1; }
[ -s "$dir/so" ] && { echo "FAIL: --output also wrote stdout"; fail=1; }
python3 -m json.tool "$dir/o.json" >/dev/null || { echo "FAIL: --output not JSON"; fail=1; }

# --verify submits: the read-back pass is counted apart (it was counted
# against the write pass's I/Os, doubling submits_per_io).
"$pinio" bench --file "$dir/v" --rw write --size 4M --bs 4k --qd 4 --verify --json >"$dir/vj" 2>"$dir/err" || { echo "FAIL: verify json"; cat "$dir/err"; fail=1; }
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert j["ios"]==1024 and j["submits_per_io"] <= 1.01 and j["verify_submits"] >= 256, j' "$dir/vj" || fail=1
# Each verify mode: a misplaced block (blocks 3 and 7 swapped on disk) is
# named by the offset its header was written for, and a flipped payload
# byte (block 5, byte 1000) by its own offset, by --verify-only in the mode
# the file was written with; a run in another mode says which mode it found.
for m in pattern crc32c sha256; do
    rm -f "$dir/v"
    "$pinio" bench --file "$dir/v" --rw randwrite --size 1M --bs 4k --qd 4 --verify=$m --json >"$dir/vj" 2>"$dir/err" || { echo "FAIL: --verify=$m write"; cat "$dir/err"; fail=1; continue; }
    python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert j["verify_mode"]==sys.argv[2] and j["verified_bytes"]==1<<20, j' "$dir/vj" $m || { echo "FAIL: --verify=$m json"; fail=1; }
    "$pinio" bench --file "$dir/v" --bs 4k --verify-only --verify=$m >"$dir/t" 2>"$dir/err" && grep -q "all blocks match" "$dir/t" || { echo "FAIL: --verify-only=$m of an intact file"; cat "$dir/err"; fail=1; }
    other=$([ $m = sha256 ] && echo crc32c || echo sha256)
    "$pinio" bench --file "$dir/v" --bs 4k --qd 1 --verify-only --verify=$other >"$dir/t" 2>"$dir/err"
    grep -q "offset 0 was written with --verify=$m, not $other" "$dir/err" || { echo "FAIL: $m file checked as $other"; cat "$dir/err"; fail=1; }
    python3 - "$dir/v" <<'PY2'
import sys
p, bs = sys.argv[1], 4096
with open(p, "r+b") as f:
    f.seek(3 * bs); a = f.read(bs); f.seek(7 * bs); b = f.read(bs)
    f.seek(3 * bs); f.write(b); f.seek(7 * bs); f.write(a)
PY2
    "$pinio" bench --file "$dir/v" --bs 4k --qd 1 --verify-only --verify=$m >"$dir/t" 2>"$dir/err"; rc=$?
    [ $rc = 1 ] && grep -q "offset 12288 holds the block written for offset 28672" "$dir/err" || { echo "FAIL: --verify=$m: verify-only of a swapped block -> rc $rc"; cat "$dir/err"; fail=1; }
    python3 - "$dir/v" <<'PY2'
import sys
p, bs = sys.argv[1], 4096
with open(p, "r+b") as f:
    f.seek(3 * bs); a = f.read(bs); f.seek(7 * bs); b = f.read(bs)
    f.seek(3 * bs); f.write(b); f.seek(7 * bs); f.write(a)
    f.seek(5 * bs + 1000); c = f.read(1); f.seek(5 * bs + 1000); f.write(bytes([c[0] ^ 0x10]))
PY2
    "$pinio" bench --file "$dir/v" --bs 4k --qd 1 --verify-only --verify=$m >"$dir/t" 2>"$dir/err"; rc=$?
    [ $rc = 1 ] && grep -q "offset 20480 .*byte.* 21480)" "$dir/err" || { echo "FAIL: --verify=$m: a flipped byte -> rc $rc"; cat "$dir/err"; fail=1; }
    [ $m = pattern ] || grep -q "fails its $m checksum" "$dir/err" || { echo "FAIL: --verify=$m: not the checksum"; cat "$dir/err"; fail=1; }
done
# Before the swap was made, a verify-only pass of an intact file passes.
"$pinio" bench --file "$dir/v2" --rw randwrite --size 1M --bs 4k --verify >/dev/null 2>&1 && "$pinio" bench --file "$dir/v2" --rw randread --bs 4k --verify-only >"$dir/t" 2>"$dir/err" && grep -q "all blocks match" "$dir/t" || { echo "FAIL: verify-only of an intact file"; cat "$dir/err"; fail=1; }
rm -f "$dir/v" "$dir/v2"

# --repeat: each cell N times, one JSON row per run with "repeat" k, the
# second repetition in reverse cell order, rows stamped with the run
# context scripts/plot reads; the table shows the median and min..max.
"$pinio" bench --file "$f" --size 4M --sweep bs=4k,8k qd=1 --repeat 3 --time 0.1 --json >"$dir/rj" 2>"$dir/err" || { echo "FAIL: --repeat json"; cat "$dir/err"; fail=1; }
python3 - "$dir/rj" <<'PY' || { echo "FAIL: --repeat rows"; cat "$dir/rj"; fail=1; }
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 6, len(rows)
assert [r["repeat"] for r in rows] == [0, 0, 1, 1, 2, 2], rows
assert [r["bs_bytes"] for r in rows] == [4096, 8192, 8192, 4096, 4096, 8192]
for r in rows:
    assert r["kernel"] and r["date"].endswith("Z") and r["fs"] and r["device"], r
PY
"$pinio" bench --file "$f" --size 4M --sweep bs=4k,8k qd=1 --repeat 3 --time 0.1 >"$dir/t" 2>"$dir/err" || { echo "FAIL: --repeat table"; cat "$dir/err"; fail=1; }
grep -q "MB/s min..max" "$dir/t" && [ "$(grep -cE '^read +[48].00 KiB +1 +[0-9.]+ +[0-9.]+\.\.[0-9.]+ ' "$dir/t")" = 2 ] || { echo "FAIL: --repeat table spread"; cat "$dir/t"; fail=1; }
rm -f "$f"
bad 2 --file "$f" --repeat 3
bad 2 --file "$f" --sweep bs=4k --repeat 0

# Ctrl-C during a timed run: the result so far is printed (partial), then
# the command dies of SIGINT (130). A background job has SIGINT ignored;
# python restores the default before exec so that the test can send it.
# The signal goes once the run is measuring (its --log-file has a row with
# I/O done: rows go out as their interval ends), not after a sleep that a
# busy machine outlasts (the signal then met python before its exec, was
# ignored, and the run went its full time).
python3 -c 'import signal,os,sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp(sys.argv[1], sys.argv[1:])' \
    "$pinio" bench --file "$f" --size 8M --bs 4k --qd 1 --direct=0 --time 600 --json \
    --log-file "$dir/iv.csv" --log-interval 100 >"$dir/p" 2>"$dir/err" &
pid=$!
while kill -0 $pid 2>/dev/null && ! awk -F, 'NR > 1 && $5 > 0 { ok = 1 } END { exit !ok }' "$dir/iv.csv" 2>/dev/null; do
    sleep 0.1
done
kill -INT $pid; wait $pid; rc=$?
[ $rc = 130 ] || { echo "FAIL: bench after SIGINT exit $rc, want 130"; cat "$dir/err"; fail=1; }
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert j["partial"] is True and j["ios"] > 0 and j["elapsed_s"] < 599, j' "$dir/p" || { echo "FAIL: partial result"; cat "$dir/p"; fail=1; }
rm -f "$dir/iv.csv"

# Several files. Usage errors create none of them.
g2="$dir/second"
bad 2 --file "$f,,$g2"
bad 2 --file "$f,$g2" --nrfiles 2
bad 2 --file "$f,$g2" --file-service-type zipf
bad 2 --file "$f,$g2" --file-service-type sequential:2
bad 2 --file "$f,$g2" --size 12k --bs 8k
[ -e "$g2" ] && { echo "FAIL: a usage error made $g2"; fail=1; }
# --file a,b: --size split, the text names every file and the service order
"$pinio" bench --file "$f,$g2" --size 2M --bs 64k --direct=0 --file-service-type random:4 \
    >"$dir/t" 2>"$dir/err" || { echo "FAIL: two files"; cat "$dir/err"; fail=1; }
for x in "$f" "$g2"; do
    [ "$(stat -c %s "$x" 2>/dev/null)" = 1048576 ] || { echo "FAIL: $x is not 1 MiB"; fail=1; }
    grep -qF "  $x: 1.00 MiB used of 1.00 MiB (created)" "$dir/t" || { echo "FAIL: $x not named"; cat "$dir/t"; fail=1; }
done
grep -q "^pinio bench: read .* 2 files \[" "$dir/t" && grep -q "^  files, random:4:" "$dir/t" &&
    grep -q "2.00 MiB in" "$dir/t" || { echo "FAIL: two files text"; cat "$dir/t"; fail=1; }
# one file holding data bench did not write: refused by name (exit 1), the
# missing one is not made and bench's own files are not written
head -c 65536 /dev/urandom >"$dir/foreign"
cp "$f" "$dir/f.orig"
"$pinio" bench --file "$f,$dir/new,$dir/foreign" --rw write --size 192k --bs 64k --direct=0 \
    >/dev/null 2>"$dir/err"; rc=$?
[ $rc = 1 ] && grep -q "foreign holds 65536 bytes that bench did not write" "$dir/err" ||
    { echo "FAIL: foreign file among several -> rc $rc"; cat "$dir/err"; fail=1; }
[ -e "$dir/new" ] && { echo "FAIL: the refused run made a file"; fail=1; }
cmp -s "$f" "$dir/f.orig" || { echo "FAIL: the refused run wrote $f"; fail=1; }
rm -f "$f" "$g2" "$dir/foreign" "$dir/f.orig"
# --directory D --nrfiles N: fio's names, bench.0.0 .. bench.0.N-1
mkdir "$dir/d"
"$pinio" bench --directory "$dir/d" --nrfiles 3 --size 3M --bs 64k --direct=0 --rw write \
    >"$dir/t" 2>"$dir/err" || { echo "FAIL: --nrfiles"; cat "$dir/err"; fail=1; }
[ "$(ls "$dir/d" | tr '\n' ' ')" = "bench.0.0 bench.0.1 bench.0.2 " ] ||
    { echo "FAIL: --nrfiles names: $(ls "$dir/d")"; fail=1; }
rm -rf "$dir/d"

[ $fail = 0 ] && echo "pbench cli: ok"
exit $fail
