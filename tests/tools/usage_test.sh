#!/bin/sh
# Usage errors of every pinio command: exit 2, nothing on stdout (without
# --json; with it, the error object: json_schema_test.sh), and one line on
# stderr, "pinio CMD: <what>; see 'pinio CMD --help'" (not the whole help).
# usage: usage_test.sh PINIO
set -u
PINIO=$1
DIR=$(mktemp -d "/var/tmp/pinio-${PINIO_TEST_RUN:-p$$}-usage-XXXXXX") || exit 1
trap 'rm -rf "$DIR"' EXIT
fails=0

# usage CMD WHAT ARGS...: `pinio CMD ARGS...` is a usage error whose line names WHAT.
usage() {
    cmd=$1; what=$2; shift 2
    "$PINIO" "$cmd" "$@" >"$DIR/out" 2>"$DIR/err"
    got=$?
    line=$(cat "$DIR/err")
    if [ $got -ne 2 ]; then
        echo "FAIL: pinio $cmd $*: exit $got, want 2"; cat "$DIR/err"; fails=$((fails + 1))
    elif [ "$(wc -l <"$DIR/err")" -ne 1 ] || [ -s "$DIR/out" ]; then
        echo "FAIL: pinio $cmd $*: want one stderr line and no stdout:"; cat "$DIR/err" "$DIR/out"
        fails=$((fails + 1))
    else
        case $line in
        "pinio $cmd: "*"$what"*"; see 'pinio $cmd --help'") ;;
        *) echo "FAIL: pinio $cmd $*: '$line' is not 'pinio $cmd: ...$what...; see ...'"
           fails=$((fails + 1)) ;;
        esac
    fi
}

for cmd in info gen load stage doctor bench; do
    usage $cmd "unknown" --no-such-option x
done
usage info "one PATH" 
usage info "takes no value" --json=yes x
usage gen "--size is required" "$DIR/g.safetensors"
usage gen "wants a value" "$DIR/g.safetensors" --size
usage gen "--size wants a byte count above 0" "$DIR/g.safetensors" --size 0
usage gen "unknown dtype 'F33'" "$DIR/g.safetensors" --size 1K --dtypes F33
usage load "no checkpoint" 
usage load "wants a value" x --qd
usage load "--memory wants auto, pinned or mapped" x --memory nope
usage stage "SRC and DST" "$DIR/only-one"
usage stage "--cache wants" --cache x a b
usage doctor "one PATH at most" a b
usage bench "--sweep wants" --sweep
usage bench "bad value '5000' for --qd" --qd 5000 --file x
[ -e "$DIR/g.safetensors" ] && { echo "FAIL: a usage error wrote a file"; fails=$((fails + 1)); }

[ $fails -eq 0 ] && echo "all usage-error checks passed"
exit $((fails != 0))
