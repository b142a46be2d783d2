# Shell helpers for the tests that drive the pinio command (sourced; POSIX sh).
# The caller sets DIR (a scratch directory) and fails=0 first.

# check WANT_STATUS DESCRIPTION CMD...: runs CMD with stdout in $DIR/out and
# stderr in $DIR/err; counts a failure when its exit status is not WANT.
check() {
    want=$1; what=$2; shift 2
    "$@" >"$DIR/out" 2>"$DIR/err"
    got=$?
    if [ "$got" -ne "$want" ]; then
        echo "FAIL: $what: exit $got, want $want"; cat "$DIR/err"; fails=$((fails + 1))
    fi
}

# has FILE PATTERN DESCRIPTION: counts a failure when FILE lacks PATTERN.
has() {
    if ! grep -q -- "$2" "$1"; then
        echo "FAIL: $3: '$2' not in $1:"; cat "$1"; fails=$((fails + 1))
    fi
}

# json DESCRIPTION PYTHON-ASSERTION: counts a failure unless the assertion
# (a Python expression on j, $DIR/out parsed as JSON) holds.
json() {
    if ! python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert $2, j" "$DIR/out"; then
        echo "FAIL: $1"; fails=$((fails + 1))
    fi
}
