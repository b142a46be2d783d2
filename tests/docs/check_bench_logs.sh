#!/bin/sh
# doc/bench-logs.md and `pinio bench --help` describe every --log-file
# format pinio bench writes: a plain run's, a --sweep's and an --mpi job's
# (this pinio built with MPI; a singleton job, no mpiexec needed). The
# header line a real run writes must be in doc/bench-logs.md as a line of
# its own, and its columns past the fixed eight (and the one that stands
# in for `job`) must be named in --help's --log-file text.
# usage: check_bench_logs.sh PINIO DOC
set -u
PINIO=$1
DOC=$2
DIR=$(mktemp -d "/var/tmp/pinio-${PINIO_TEST_RUN:-p$$}-benchlogs-XXXXXX") || exit 1
trap 'rm -rf "$DIR"' EXIT
fails=0
# Open MPI refuses root without these (a singleton job: this process alone)
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM
"$PINIO" bench --help >"$DIR/help" 2>&1 || { echo "FAIL: pinio bench --help"; exit 1; }
# --log-file's paragraph of the help: from its line to the next option
awk '/^  --log-file /{on=1; print; next} on && /^  (--|-[a-z],)/{exit} on && /^[^ ]/{exit} on' \
    "$DIR/help" | tr -s ' \n' '  ' >"$DIR/logfile"

# header KIND ARGS...: the log of `pinio bench ARGS --log-file`, checked.
header() {
    kind=$1; shift
    if ! "$PINIO" bench --file "$DIR/b.dat" --size 1M --bs 64k --direct off \
        --log-interval 50 --log-file "$DIR/$kind.csv" "$@" >"$DIR/out" 2>&1; then
        echo "FAIL: pinio bench $* --log-file: exit $?"; cat "$DIR/out"; fails=$((fails + 1))
        return
    fi
    h=$(head -n 1 "$DIR/$kind.csv")
    grep -Fxq -- "$h" "$DOC" ||
        { echo "FAIL: $kind: header line '$h' is not in $DOC"; fails=$((fails + 1)); }
    stand_in=$(echo "$h" | cut -d, -f2)
    extra=$(echo "$h" | cut -d, -f9-)
    grep -q -- "$stand_in" "$DIR/logfile" ||
        { echo "FAIL: $kind: --help's --log-file does not name column $stand_in"; fails=$((fails + 1)); }
    [ -z "$extra" ] || grep -Fq -- "$extra" "$DIR/logfile" ||
        { echo "FAIL: $kind: --help's --log-file does not name columns $extra"; fails=$((fails + 1)); }
    [ "$kind" = plain ] || grep -Fq -- "--$kind" "$DIR/logfile" ||
        { echo "FAIL: $kind: --help's --log-file does not say what --$kind changes"; fails=$((fails + 1)); }
}

header plain
header sweep --sweep bs=4k,64k qd=1
if "$PINIO" bench --mpi --file "$DIR/b.dat" --size 64k --bs 64k --direct off >/dev/null 2>&1; then
    header mpi --mpi
else
    echo "note: this pinio has no --mpi (built without MPI): its log not checked"
fi
[ $fails -eq 0 ] && echo "every bench --log-file format is in $DOC and --help"
exit $((fails != 0))
