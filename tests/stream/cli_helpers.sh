# Helpers of the tests/stream CLI scripts, sourced after DIR is made:
# check runs a command and compares its exit status, has greps a file,
# same compares two files; each failure is printed and counted in $fails.
fails=0
check() { # check WANT_STATUS DESCRIPTION CMD...
    want=$1; what=$2; shift 2
    "$@" >"$DIR/out" 2>"$DIR/err"
    got=$?
    if [ "$got" -ne "$want" ]; then
        echo "FAIL: $what: exit $got, want $want"; cat "$DIR/out" "$DIR/err"; fails=$((fails + 1))
    fi
}
has() { # has FILE PATTERN DESCRIPTION
    if ! grep -q -- "$2" "$1"; then
        echo "FAIL: $3: '$2' not in $1:"; cat "$1"; fails=$((fails + 1))
    fi
}
same() { # same A B
    if ! cmp -s "$1" "$2"; then echo "FAIL: $2 differs from $1"; fails=$((fails + 1)); fi
}
