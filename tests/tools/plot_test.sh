#!/usr/bin/env bash
# scripts/plot on synthetic inputs: a --sweep with --repeat rows (error bars,
# run context stamped), the same without context keys, a --log-file CSV and
# JSONL time series; PNG and SVG. Checks a non-empty image, the stamp and axis
# texts in the SVG, and that bad input fails with one line.
# usage: plot_test.sh PATH/TO/scripts/plot          (77: gnuplot absent)
set -uo pipefail
plot=${1:?usage: plot_test.sh scripts/plot}
command -v gnuplot >/dev/null || { echo "SKIP: gnuplot not installed"; exit 77; }
tmp=$(mktemp -d "/dev/shm/pinio-${PINIO_TEST_RUN:-p$$}-plot-test-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fails=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
is_png() { [ -s "$1" ] && [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]; }

# A 2x2 sweep, 3 repeats per cell, with the context keys a run may carry.
python3 - "$tmp/sweep.jsonl" <<'PY'
import json, sys
with open(sys.argv[1], "w") as f:
    for bs in (4096, 1048576):
        for qd in (1, 16):
            for rep in range(3):
                mbs = (bs / 4096) * qd * 10 * (1 + 0.1 * rep)
                f.write(json.dumps({"pinio_version": "0.1.0", "schema": 2, "command": "bench",
                    "rw": "randread" if bs == 4096 else "read", "bs_bytes": bs, "qd": qd,
                    "jobs": 2, "direct": True, "fixed": True, "time_limit_s": 3, "repeat": rep,
                    "device": "vdb", "fs": "xfs", "kernel": "6.1.0-test", "date": "2024-05-01",
                    "bw_mb_per_s": mbs, "iops": mbs * 1e6 / bs,
                    "lat_ns": {"p50": 1000 * qd * (bs // 4096), "p99": 5000 * qd}}) + "\n")
    f.write('{"pinio_version":"0.1.0","schema":2,"command":"bench","error":"ignored"}\n')
PY
if "$plot" "$tmp/sweep.jsonl" "$tmp/sweep.svg" >"$tmp/out" 2>&1 && [ -s "$tmp/sweep.svg" ]; then
    ok "sweep to SVG"
    for want in "device vdb" "fs xfs" "direct on" "fixed on" "jobs 2" "per cell 3 s" \
                "kernel 6.1.0-test" "pinio 0.1.0" "date 2024-05-01" "3 repeats: median, bars min..max" \
                "MB/s (10^6 bytes/s)" "IOPS" "p99 dashed" "randread bs=4k" "read bs=1M"; do
        grep -qF -- "$want" "$tmp/sweep.svg" && ok "SVG says '$want'" || bad "SVG lacks '$want'"
    done
else
    bad "sweep to SVG: $(cat "$tmp/out")"
fi
"$plot" "$tmp/sweep.jsonl" "$tmp/sweep.png" >"$tmp/out" 2>&1 && is_png "$tmp/sweep.png" &&
    ok "sweep to PNG" || bad "sweep to PNG: $(cat "$tmp/out")"

# Older rows without any context key, from stdin: still a plot, stamped with the day.
printf '%s\n' '{"tool":"pinio","rw":"read","bs":65536,"qd":4,"bytes_per_s":5e8}' \
    '{"tool":"pinio","rw":"read","bs":65536,"qd":8,"bytes_per_s":7e8}' |
    "$plot" - "$tmp/old.svg" >"$tmp/out" 2>&1 && grep -qF "plotted $(date +%F)" "$tmp/old.svg" &&
    ok "context keys absent" || bad "context keys absent: $(cat "$tmp/out")"

# A --log-file CSV: two jobs and the aggregate (job -1), reads and writes.
{
    echo "time_ms,job,dir,bw_bytes_per_s,iops,lat_mean_ns,lat_p50_ns,lat_p99_ns"
    for t in 500 1000 1500 2000; do
        for job in -1 0 1; do
            for dir in read write; do
                echo "$t,$job,$dir,$((100000000 + t * 1000)),$((24000 + t)),90000,80000,400000"
            done
        done
    done
} >"$tmp/log.csv"
if "$plot" "$tmp/log.csv" "$tmp/log.svg" >"$tmp/out" 2>&1; then
    ok "CSV log to SVG"
    for want in "all jobs read" "job 1 write" "time, s" "latency, microseconds"; do
        grep -qF -- "$want" "$tmp/log.svg" && ok "log SVG says '$want'" || bad "log SVG lacks '$want'"
    done
else
    bad "CSV log to SVG: $(cat "$tmp/out")"
fi
"$plot" "$tmp/log.csv" >"$tmp/out" 2>&1 && is_png "$tmp/log.png" &&
    ok "CSV log to the default OUT (log.png)" || bad "CSV log to PNG: $(cat "$tmp/out")"

# A --sweep's log: cells 1..3 (the third a repetition of the first), each
# from time 0, one line per cell of the aggregate, titled by bs and qd.
{
    echo "time_ms,job,dir,bw_bytes_per_s,iops,lat_mean_ns,lat_p50_ns,lat_p99_ns,cell,bs_bytes,qd"
    for cell in "1,4096,1" "2,1048576,16" "3,4096,1"; do
        for t in 500 1000; do
            for job in -1 0; do
                echo "$t,$job,read,100000000,24000,90000,80000,400000,$cell"
            done
        done
    done
} >"$tmp/slog.csv"
if "$plot" "$tmp/slog.csv" "$tmp/slog.svg" >"$tmp/out" 2>&1; then
    grep -qF "3 series" "$tmp/out" && ok "sweep log: one series per cell" ||
        bad "sweep log series: $(cat "$tmp/out")"
    for want in "4k qd 1 #1" "4k qd 1 #2" "1M qd 16"; do
        grep -qF -- "$want" "$tmp/slog.svg" && ok "sweep log SVG says '$want'" ||
            bad "sweep log SVG lacks '$want'"
    done
    grep -qF "job 0" "$tmp/slog.svg" && bad "sweep log SVG draws per-job lines" ||
        ok "sweep log SVG: the aggregate only"
else
    bad "sweep CSV log to SVG: $(cat "$tmp/out")"
fi

# The same log as JSONL.
python3 - "$tmp/log.csv" "$tmp/log.jsonl" <<'PY'
import csv, json, sys
with open(sys.argv[2], "w") as f:
    for r in csv.DictReader(open(sys.argv[1])):
        r = {k: (v if k == "dir" else int(v)) for k, v in r.items()}
        f.write(json.dumps(r) + "\n")
PY
"$plot" "$tmp/log.jsonl" "$tmp/logj.png" >"$tmp/out" 2>&1 && is_png "$tmp/logj.png" &&
    ok "JSONL log to PNG" || bad "JSONL log to PNG: $(cat "$tmp/out")"

# Bad input: no image, non-zero exit, one line naming the problem.
echo '{"command":"info"}' >"$tmp/none.jsonl"
! "$plot" "$tmp/none.jsonl" "$tmp/none.png" 2>"$tmp/err" && [ ! -e "$tmp/none.png" ] &&
    grep -q "no pinio bench results" "$tmp/err" && ok "no results refused" ||
    bad "no results: $(cat "$tmp/err")"
printf 'time_ms,job,dir\n1,0,read\n' >"$tmp/short.csv"
! "$plot" "$tmp/short.csv" "$tmp/short.png" 2>"$tmp/err" &&
    grep -q "header lacks bw_bytes_per_s" "$tmp/err" && ok "short log header refused" ||
    bad "short header: $(cat "$tmp/err")"

echo "$fails failed"
[ "$fails" = 0 ]
