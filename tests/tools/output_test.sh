#!/bin/sh
# Every pinio command fails (exit 1, one line "pinio CMD: writing the output:
# <reason>" on stderr) when its output cannot be written: stdout on /dev/full.
# A success that lost its output would be taken for a result by a script.
# usage: output_test.sh PINIO
set -u
PINIO=$1
[ -c /dev/full ] || { echo "SKIP: no /dev/full"; exit 77; }
DIR=$(mktemp -d "/var/tmp/pinio-${PINIO_TEST_RUN:-p$$}-out-XXXXXX") || exit 1
trap 'rm -rf "$DIR"' EXIT
fails=0
M=$DIR/m.safetensors
"$PINIO" gen "$M" --size 1M --tensors 4 --quiet || { echo "FAIL: gen"; exit 1; }

# full CMD ARGS...: the command on /dev/full exits 1 with the one-line reason.
full() {
    cmd=$1
    "$PINIO" "$@" >/dev/full 2>"$DIR/err"
    got=$?
    want="pinio $cmd: writing the output: No space left on device"
    [ "$cmd" = "--help" ] || [ "$cmd" = "--version" ] && want="pinio: writing the output: No space left on device"
    if [ $got -ne 1 ]; then
        echo "FAIL: pinio $* >/dev/full: exit $got, want 1"; fails=$((fails + 1))
    elif [ "$(wc -l <"$DIR/err")" -ne 1 ] || [ "$(cat "$DIR/err")" != "$want" ]; then
        echo "FAIL: pinio $* >/dev/full: stderr is not the one line '$want':"
        cat "$DIR/err"; fails=$((fails + 1))
    fi
}

full info "$M"
full info --json "$M"
full info --help
full gen "$DIR/g.safetensors" --size 64K
full gen --help
full load "$M"
full load --json "$M"
full load --device host --json "$M"
full stage "$M" "$DIR/staged"
full doctor "$DIR"
full doctor --json "$DIR"
full bench --json --file "$M" --size 32K --bs 32K
full bench --sweep bs=4K,32K --file "$M" --size 32K
full --help
full --version

# The same commands on a writable stdout succeed: the failures above are the
# output's, not the commands'.
"$PINIO" info --json "$M" >"$DIR/out" 2>"$DIR/err" || { echo "FAIL: info --json to a file"; cat "$DIR/err"; fails=$((fails + 1)); }
"$PINIO" load --json "$M" >"$DIR/out" 2>"$DIR/err" || { echo "FAIL: load --json to a file"; cat "$DIR/err"; fails=$((fails + 1)); }
"$PINIO" bench --json --file "$M" --size 32K --bs 32K >"$DIR/out" 2>"$DIR/err" || { echo "FAIL: bench --json to a file"; cat "$DIR/err"; fails=$((fails + 1)); }

[ $fails -eq 0 ] && echo "all output-error checks passed"
exit $((fails != 0))
