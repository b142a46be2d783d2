#!/bin/sh
# Every --json output of info, load (resident, --device host, --mpi),
# stage, gen, doctor and bench, successes and failures, on odd file names (a quote, a newline, a
# \xff byte): one line of valid UTF-8 JSON matching doc/json/CMD.schema.json
# (error.schema.json for a failure, which must also exit 1, or 2 for a usage
# error); a load's or stage's ready_s in order (json_ready.py).
# usage: json_schema_test.sh PINIO SCHEMA_DIR
set -u
PINIO=$1
SDIR=$2
HERE=$(dirname "$0")
[ -x /usr/bin/python3 ] || { echo "SKIP: no /usr/bin/python3"; exit 77; }
/usr/bin/python3 -c 'import jsonschema' 2>/dev/null ||
    { echo "FAIL: python3-jsonschema is missing (scripts/bootstrap installs it)"; exit 1; }
DIR=$(mktemp -d "/var/tmp/pinio-${PINIO_TEST_RUN:-p$$}-json-XXXXXX") || exit 1
trap 'rm -rf "$DIR"' EXIT
fails=0
n=0

# valid WANT_STATUS CMD ARGS...: `pinio CMD ARGS... --json` exits WANT and
# its stdout validates (a failure: against the error schema).
valid() {
    want=$1; cmd=$2; shift 2
    n=$((n + 1))
    "$PINIO" "$cmd" "$@" --json >"$DIR/out.$n" 2>"$DIR/err"
    got=$?
    if [ "$got" -ne "$want" ]; then
        echo "FAIL: pinio $cmd $* --json: exit $got, want $want"; cat "$DIR/err"
        fails=$((fails + 1))
    elif ! /usr/bin/python3 "$HERE/json_validate.py" "$SDIR" "$cmd" "$DIR/out.$n"; then
        echo "FAIL: pinio $cmd $* --json: output does not match the schema:"
        head -c 2000 "$DIR/out.$n"; echo
        fails=$((fails + 1))
    elif [ "$want" -ne 0 ] && ! grep -q '"error":{' "$DIR/out.$n"; then
        echo "FAIL: pinio $cmd $* --json: a failure without an error object"
        fails=$((fails + 1))
    elif [ "$want" -eq 0 ] && { [ "$cmd" = load ] || [ "$cmd" = stage ]; } &&
        ! /usr/bin/python3 "$HERE/json_ready.py" "$DIR/out.$n"; then
        echo "FAIL: pinio $cmd $* --json: ready_s out of order"
        fails=$((fails + 1))
    fi
}

ODD=$DIR/$(printf 'o"d\nd\377.safetensors')
M=$DIR/m.safetensors
"$PINIO" gen "$M" --size 256K --tensors 4 --quiet || { echo "FAIL: gen"; exit 1; }
"$PINIO" gen "$ODD" --size 256K --tensors 4 --quiet || { echo "FAIL: gen odd"; exit 1; }
"$PINIO" gen "$DIR/sh" --size 128K --tensors 5 --shards 2 --quiet || { echo "FAIL: gen sh"; exit 1; }
cp "$M" "$DIR/bad.safetensors" && printf x >>"$DIR/bad.safetensors"

# usage errors (exit 2) answer in JSON too, wherever --json stands
valid 2 load x --memory nope
valid 2 info --no-such-option "$M"
valid 2 bench --qd 5000 --file "$DIR/b"
valid 0 info "$ODD"
valid 0 info "$DIR/sh/model.safetensors.index.json"
valid 1 info "$DIR/bad.safetensors"
valid 1 info "$DIR/none.safetensors"
# the error names the file and, for a format error, the offset
grep -q '"file":".*bad.safetensors","offset":[0-9]' "$DIR/out.$n" 2>/dev/null ||
    grep -q '"file":".*none.safetensors"' "$DIR/out.$n" ||
    { echo "FAIL: info's error object does not name the file"; cat "$DIR/out.$n"; fails=$((fails + 1)); }

valid 0 load "$M"
valid 0 load "$ODD" --verify --cache cold
valid 0 load "$DIR/sh" --memory mapped
valid 0 load "$M" --device host --verify
valid 0 load "$M" --split '*norm*=whole' --split '*=-1' --rank 1 --world 3
valid 0 load "$M" --device host --split '*norm*=whole' --split '*=-1' --rank 1 --world 3
valid 1 load "$M" --split '*=5' --world 2
valid 1 load "$M" --filter no.such.tensor
valid 1 load "$DIR/none.safetensors"
valid 1 load "$DIR/bad.safetensors" --device host
valid 1 load "$DIR/sh/model.safetensors.index.json" "$M"
if "$PINIO" load --mpi replicate --help >/dev/null 2>&1; then
    # LeakSanitizer reports Open MPI's own allocations at MPI_Finalize (why
    # scripts/test keeps suite mpi out of the ASan stage): not ours to judge.
    ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
    export ASAN_OPTIONS
    valid 0 load --mpi replicate "$ODD"
    valid 0 load --mpi shard "$ODD" --verify
    valid 1 load --mpi replicate "$ODD" --sha256 0000000000000000000000000000000000000000000000000000000000000000
    valid 1 load --mpi replicate "$DIR/none.safetensors"
    valid 0 load --mpi tp "$ODD" --split "*=0" --verify
    valid 1 load --mpi tp "$ODD" --split "*=9"
    if [ -n "${PINIO_CUDA_LIB:-}" ]; then # the CUDA test driver
        valid 0 load --mpi tp "$ODD" --split "*=0" --device cuda:0
        export FAKE_CUDA_FAIL=alloc
        valid 1 load --mpi tp "$ODD" --split "*=0" --device cuda:local
        unset FAKE_CUDA_FAIL
    fi
fi

valid 0 stage "$ODD" "$DIR/st" --verify
valid 1 stage "$ODD" "$DIR/st"
valid 0 stage "$DIR/sh" "$DIR/st2"

valid 0 gen "$DIR/g.safetensors" --size 64K
valid 0 gen "$DIR/g2" --hidden 64 --layers 2 --shards 2
valid 1 gen "$DIR/none/dir/g.safetensors" --size 64K

# doctor: exit 0 (full speed) or 1 (degraded: a verdict, not an error
# object) depending on the machine; either way the report matches.
for p in "$DIR" /dev/shm; do
    n=$((n + 1))
    "$PINIO" doctor "$p" --json >"$DIR/out.$n" 2>"$DIR/err"
    got=$?
    if [ "$got" -gt 1 ] || grep -q '"error":{' "$DIR/out.$n"; then
        echo "FAIL: pinio doctor $p --json: exit $got"; cat "$DIR/err" "$DIR/out.$n"
        fails=$((fails + 1))
    elif ! /usr/bin/python3 "$HERE/json_validate.py" "$SDIR" doctor "$DIR/out.$n"; then
        echo "FAIL: pinio doctor $p --json: output does not match the schema"
        fails=$((fails + 1))
    fi
done
valid 1 doctor "$DIR/none"
# bench: one run, several jobs (job_results), a mixed workload with a
# percentile list, and failures (a missing file to verify, a bad option).
B=$DIR/bench.dat
valid 0 bench --file "$B" --size 1M --bs 64k --direct off
valid 0 bench --file "$B" --size 1M --bs 4k --direct off --jobs 2 --rw randread
valid 0 bench --file "$DIR/bench2.dat" --size 1M --bs 4k --direct off --rw randrw --percentile-list 50:99.9
valid 1 bench --file "$DIR/missing.dat" --bs 4k --verify-only --direct off
# a trim run: the trim direction and rw name (and its clear error, exit 1)
valid 0 bench --file "$DIR/bench-trim.dat" --size 1M --bs 64k --direct off --rw randtrim --jobs 2
PINIO_FAULTS=trimnotsup valid 1 bench --file "$DIR/bench-trim.dat" --size 1M --bs 64k --direct off --rw trim
# several files: files[] and the service order, --file's list and --nrfiles
valid 0 bench --file "$DIR/bf1.dat,$DIR/bf2.dat" --size 1M --bs 4k --direct off --file-service-type random:2
valid 0 bench --directory "$DIR" --nrfiles 3 --size 3M --bs 64k --direct off --rw write
# a job file: one object per section (job_name, group), one per group
# (group_result), each line held to the schema
printf '[w]\nfilename=%s\nsize=1m\nbs=64k\nrw=write\n[r]\nstonewall\nfilename=%s\nsize=1m\n' \
    "$DIR/bench3.dat" "$DIR/bench3.dat" >"$DIR/two.fio"
n=$((n + 1))
if ! "$PINIO" bench "$DIR/two.fio" --json >"$DIR/jobs.$n" 2>"$DIR/err" ||
    [ "$(grep -c '"group_result"' "$DIR/jobs.$n")" != 2 ] ||
    [ "$(grep -c '"job_name"' "$DIR/jobs.$n")" != 2 ]; then
    echo "FAIL: pinio bench two.fio --json"; cat "$DIR/err" "$DIR/jobs.$n"
    fails=$((fails + 1))
fi
k=0
while IFS= read -r line; do
    k=$((k + 1))
    printf '%s\n' "$line" >"$DIR/out.$n.$k"
    /usr/bin/python3 "$HERE/json_validate.py" "$SDIR" bench "$DIR/out.$n.$k" ||
        { echo "FAIL: pinio bench two.fio --json: line $k"; fails=$((fails + 1)); }
done <"$DIR/jobs.$n"

[ $fails -eq 0 ] && echo "all $n JSON outputs match their schemas"
exit $((fails != 0))
