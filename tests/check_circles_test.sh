#!/usr/bin/env bash
# scripts/check-circles must fail when files of a folder call each other in a
# circle, of two files or more, not only pass on the real tree: each case
# plants one call in a copy.
set -euo pipefail
src=$1
check=$src/scripts/check-circles
work=$(mktemp -d /tmp/pinio-${PINIO_TEST_RUN:-p$$}-circles-XXXXXX)
trap 'rm -rf "$work"' EXIT
cp -r "$src/src" "$src/numa" "$src/uring" "$src/tools" "$work/"
"$check" "$work" >/dev/null || { echo "FAIL: the untouched copy is not clean"; "$check" "$work"; exit 1; }

fails=0
# plant FILE LINE: appends LINE to FILE in the copy; the check's answer is
# kept in $out and its status in $st; the file is restored after.
plant() {
  cp "$work/$1" "$work/$1.orig"
  printf '%s\n' "$2" >>"$work/$1"
  st=0
  out=$("$check" "$work" 2>&1) || st=$?
  mv "$work/$1.orig" "$work/$1"
}
# expect FILE LINE PATTERN: planting LINE must fail, naming PATTERN.
expect() {
  plant "$1" "$2"
  if [ $st -eq 0 ]; then
    echo "FAIL: $1 with '$2' passed"; fails=$((fails + 1))
  elif ! grep -q -- "$3" <<<"$out"; then
    echo "FAIL: $1 with '$2' said: $out"; fails=$((fails + 1))
  else
    echo "ok: $1 + $2 -> $(grep -m1 -- "$3" <<<"$out")"
  fi
}
# accept FILE LINE: planting LINE is no circle (a comment, a string, a prototype).
accept() {
  plant "$1" "$2"
  if [ $st -ne 0 ]; then
    echo "FAIL: $1 with '$2' failed: $out"; fails=$((fails + 1))
  else
    echo "ok: $1 + $2 -> clean"
  fi
}
# jw.c is below util.c (util.c writes JSON errors with jw_error())
expect tools/jw.c 'static int planted(void) { uint64_t v; return cli_parse_u64("1", &v); }' \
  'jw.c and util.c use each other'
# ring.c is below rfile.c (rfile.c checks the thread with pinio__ring_check_thread())
expect uring/ring.c 'static int planted(pinio_ring *r) { pinio_ring_file *f; return pinio_ring_file_open(r, "x", &f, NULL); }' \
  'rfile.c and ring.c use each other'
# arena.c is below load.c
expect src/load/arena.c 'static void planted(void) { pinio_load_opts_init(NULL, 0); }' \
  'arena.c and load.c use each other'
# A circle of three (issue 37): job.c uses gpu.c (pinio__bench_gpu_landed),
# gpu.c uses options.c (pinio__bench_mem_parse); options.c calling job.c
# closes it, though no two of the three use each other (verify.c closes
# another such circle through options.c; the first found is named).
expect src/bench/options.c 'static bool planted(job *j, slot *sl) { return pinio__bench_next_io(j, sl, 0); }' \
  'a circle of 3: gpu.c -> options.c -> job.c -> gpu.c'
# Another three, found from its first file: hist.c calling s3.c, which
# uses job.c, which uses hist.c.
expect src/bench/hist.c 'static void planted(void) { pinio__bench_s3_obj_free(NULL); }' \
  'a circle of 3: hist.c -> s3.c -> job.c -> hist.c'
accept tools/jw.c '/* cli_parse_u64() is util.c'"'"'s */'
accept tools/jw.c 'static const char *planted = "cli_parse_u64(";'
[ $fails -eq 0 ] || exit 1
