#!/usr/bin/env bash
# smoke.sh FUZZER SEED_DIR SECONDS: runs a libFuzzer target for a few seconds
# over a scratch copy of the committed seeds (libFuzzer writes new inputs into
# its corpus directory; the source tree must stay untouched). Passes when the
# fuzzer exits 0: every seed and every mutation ran without a crash, leak,
# sanitizer report or timeout.
set -euo pipefail
fuzzer=$1 seeds=$2 secs=$3
work=$(mktemp -d "/tmp/pinio-${PINIO_TEST_RUN:-p$$}-fuzz-smoke-XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir "$work/corpus" "$work/artifacts"
export PINIO_FUZZ_TMPDIR=$work   # scratch files of a target (plan), gone with $work
cp "$seeds"/* "$work/corpus/"
"$fuzzer" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=4096 \
  -artifact_prefix="$work/artifacts/" -print_final_stats=1 "$work/corpus" 2>"$work/log" || {
  tail -n 60 "$work/log"
  for a in "$work"/artifacts/*; do [ -e "$a" ] && { echo "crash input $a:"; od -c "$a" | head -n 20; }; done
  exit 1
}
grep -E 'stat::number_of_executed_units|cov:' "$work/log" | tail -n 2
