#!/bin/sh
# s3:// as a destination: pinio reads objects and never writes them. gen and
# stage to s3://, and doctor --root of s3://, fail saying so (never "no such file or
# directory"), and write nothing even where a local "s3:" folder would take
# the path (cwd holding s3:/b/). Needs no server.
# usage: s3_write_test.sh PINIO SRC_ROOT
[ "${1:-}" = --help ] && { sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; exit 0; }
PINIO=$1
SRC=$2
case $PINIO in /*) ;; *) PINIO=$PWD/$PINIO ;; esac # the tests run from another folder
fails=0
DIR=$(mktemp -d "${TMPDIR:-/tmp}/pinio-${PINIO_TEST_RUN:-p$$}-s3write.XXXXXX") || exit 1
trap 'rm -rf "$DIR"' EXIT
. "$SRC/tests/common/cli.sh"
mkdir -p "$DIR/cwd/s3:/b"
"$PINIO" gen "$DIR/m.safetensors" --size 1M --seed 5 >/dev/null || exit 1
cd "$DIR/cwd" || exit 1

check 1 "gen to s3://" "$PINIO" gen s3://b/x.safetensors --size 1M
has "$DIR/err" "s3://b/x.safetensors: writing to s3:// is not supported" "gen says what is supported"
check 2 "stage to s3://" "$PINIO" stage "$DIR/m.safetensors" s3://b/p/
has "$DIR/err" "s3://b/p/: writing to s3:// is not supported: stage copies from s3://" "stage says what is supported"
check 2 "doctor --root of s3://" "$PINIO" doctor s3://b/k --root /
has "$DIR/err" "s3://b/k: an object store's report takes no --root" "doctor says what it does"
if [ -n "$(ls -A "$DIR/cwd/s3:/b")" ] || [ "$(ls -A "$DIR/cwd")" != "s3:" ]; then
    echo "FAIL: a local file written for an s3:// URL:"; find "$DIR/cwd"; fails=$((fails + 1))
fi
if grep -q "No such file or directory\|no such file or directory" "$DIR/err"; then
    echo "FAIL: ENOENT for an s3:// URL"; fails=$((fails + 1))
fi

[ "$fails" -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "ok"
