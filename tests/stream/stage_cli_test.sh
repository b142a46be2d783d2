#!/bin/sh
# pinio stage end to end: a file and a sharded checkpoint copied byte for
# byte (cmp) with --verify, --json parses, an existing target refused
# (exit 1, nothing replaced, no temporary left), --force replaces it,
# usage errors exit 2, --help explains.
# Usage: stage_cli_test.sh PATH_TO_PINIO
set -u
PINIO=$1
DIR=$(mktemp -d "/var/tmp/pinio-${PINIO_TEST_RUN:-p$$}-stage-XXXXXX") || exit 1
trap 'rm -rf "$DIR"' EXIT
. "$(dirname "$0")/cli_helpers.sh"

check 0 "gen" "$PINIO" gen "$DIR/m.safetensors" --size 3M --tensors 9 --dtypes bf16,u8 --quiet
check 0 "stage a file" "$PINIO" stage "$DIR/m.safetensors" "$DIR/a" --verify --staging 64Kx2
same "$DIR/m.safetensors" "$DIR/a/m.safetensors"
has "$DIR/out" "verified" "the summary says verified"
SUM=$(sha256sum "$DIR/m.safetensors" | cut -d' ' -f1)
has "$DIR/out" "^sha256    $SUM  $DIR/m.safetensors" "--verify prints the source's SHA-256"
# An expected digest is checked; a byte flipped in flight fails it, and
# nothing is published.
check 0 "--sha256 right" "$PINIO" stage "$DIR/m.safetensors" "$DIR/s1" --sha256 "$SUM" --cache cold
check 1 "a byte flipped in flight" env PINIO_FAULTS=corrupt@2 "$PINIO" stage "$DIR/m.safetensors" \
    "$DIR/s2" --sha256 "$SUM" --cache cold --staging 64Kx2
has "$DIR/err" "sha256 mismatch" "the error says the digest differs"
has "$DIR/err" "m.safetensors" "the error names the file"
[ -z "$(ls -A "$DIR/s2")" ] || { echo "FAIL: left in $DIR/s2"; ls -A "$DIR/s2"; fails=$((fails + 1)); }
check 2 "bad --sha256" "$PINIO" stage "$DIR/m.safetensors" "$DIR/s3" --sha256 abc
# One digest per file: a surplus one is the command line's mistake (exit 2),
# and nothing is staged.
check 2 "two --sha256 for one file" "$PINIO" stage "$DIR/m.safetensors" "$DIR/s4" --sha256 "$SUM" \
    --sha256 "$SUM"
has "$DIR/err" "2 expected SHA-256 digests for 1 file.*(--sha256); see 'pinio stage --help'" "the usage error gives both counts"
[ ! -e "$DIR/s4" ] || { echo "FAIL: $DIR/s4 made and left"; fails=$((fails + 1)); }
[ "$(ls -A "$DIR/a" | wc -l)" -eq 1 ] || { echo "FAIL: extra files in $DIR/a"; ls -A "$DIR/a"; fails=$((fails + 1)); }

check 0 "gen sharded" "$PINIO" gen "$DIR/sh" --size 2M --tensors 12 --shards 3 --quiet
check 0 "stage shards --json" "$PINIO" stage "$DIR/sh" "$DIR/b" --json --verify --cache cold
for f in "$DIR"/sh/*; do same "$f" "$DIR/b/$(basename "$f")"; done
if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["file_count"] == 3 and d["verified"] and d["copies_verified"] and len(d["digests"]) == 3, d' "$DIR/out" ||
        { echo "FAIL: stage --json"; cat "$DIR/out"; fails=$((fails + 1)); }
fi

echo "keep" >"$DIR/c.txt"
mkdir "$DIR/c" && cp "$DIR/c.txt" "$DIR/c/m.safetensors"
check 1 "existing target" "$PINIO" stage "$DIR/m.safetensors" "$DIR/c"
has "$DIR/err" "target exists" "the error says why"
same "$DIR/c.txt" "$DIR/c/m.safetensors"
[ "$(ls -A "$DIR/c" | wc -l)" -eq 1 ] || { echo "FAIL: temporary left in $DIR/c"; ls -A "$DIR/c"; fails=$((fails + 1)); }
check 0 "--force" "$PINIO" stage "$DIR/m.safetensors" "$DIR/c" --force -q
same "$DIR/m.safetensors" "$DIR/c/m.safetensors"

check 1 "missing source" "$PINIO" stage "$DIR/nope.safetensors" "$DIR/d"
has "$DIR/err" "nope.safetensors" "the error names the file"
check 2 "no DST" "$PINIO" stage "$DIR/m.safetensors"
check 2 "bad --staging" "$PINIO" stage "$DIR/m.safetensors" "$DIR/e" --staging 3Mx4
check 2 "bad --direct" "$PINIO" stage "$DIR/m.safetensors" "$DIR/e" --direct maybe
check 0 "--help" "$PINIO" stage --help
has "$DIR/out" "renamed into place" "help explains the publication"

[ $fails -eq 0 ] && echo "stage_cli: all checks passed"
exit $((fails > 0))
