#!/bin/sh
# `pinio load --mpi tp` under mpiexec with N ranks: the JSON report says
# each rank's slices and storage reads, the group's reads one copy of the
# selected tensors (at most 1.1 times their bytes) and the slices adding up
# to them; --verify's digest is sha256sum's; a rule's dimension out of
# range is one line from rank 0 naming the tensor, exit 1; the last rank
# with another --split or --world is one line naming that rank, exit 1 on
# every rank, never a hang (timeout(1) is the guard, never a timing);
# usage errors are one line and exit 2.
# usage: cli_load_mpi_tp.sh PINIO N MPIEXEC [MPIEXEC ARGS...]
set -u
pinio=$1; n=$2; shift 2
fails=0
DIR=$(mktemp -d /var/tmp/pinio-${PINIO_TEST_RUN:-p$$}-mpiclitp-XXXXXX) || { echo "FAIL: mktemp"; exit 1; }
trap 'rm -rf "$DIR"' EXIT
. "$(dirname "$0")/../common/cli.sh"
last=$((n - 1))
MPIEXEC="$*"

# The last rank's arguments: each @A@ becomes $VARG there (when set), $A0
# elsewhere. The launcher's rank: Open MPI's variable, else Hydra's.
# Each rank's device arena is written to dump.RANK by the CUDA test driver
# (FAKE_CUDA_DUMP); FAIL_LAST makes the driver fail that way on the last
# rank alone.
cat >"$DIR/wrap.sh" <<'EOF'
#!/bin/sh
r=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}
v=$A0
[ "$r" = "$LAST" ] && v=${VARG:-$A0}
export FAKE_CUDA_DUMP="$DUMPS.$r"
[ "$r" = "$LAST" ] && [ -n "${FAIL_LAST:-}" ] && export FAKE_CUDA_FAIL="$FAIL_LAST"
cmd=$1; shift
for a; do
    shift
    if [ "$a" = "@A@" ]; then set -- "$@" "$v"; else set -- "$@" "$a"; fi
done
exec "$cmd" "$@"
EOF
chmod +x "$DIR/wrap.sh"
export LAST=$last A0= DUMPS="$DIR/dump"

run() {
    want=$1; what=$2; shift 2
    check "$want" "$what (n=$n)" timeout 100 $MPIEXEC -n "$n" "$DIR/wrap.sh" "$pinio" load "$@"
}
one_line() {
    c=$(grep -c '^pinio load' "$DIR/err")
    [ "$c" -eq 1 ] || { echo "FAIL: $1 (n=$n): $c lines from pinio, want 1:"; cat "$DIR/err"; fails=$((fails + 1)); }
}

"$pinio" gen "$DIR/m.safetensors" --size 6M --tensors 12 >/dev/null || exit 1
M="$DIR/m.safetensors"

"$pinio" load --mpi tp --help | grep -q -- '--split PATTERN=DIM' || { echo "FAIL: --mpi tp --help lacks --split"; fails=$((fails + 1)); }

# auto (one machine: the node's shared memory), then the MPI rounds
for x in auto alltoallv; do
named=$x; [ "$x" = auto ] && named=shared
for rule in '*=0' '*=-1' '*proj.weight=1'; do
    export A0="$rule"
    run 0 "--mpi tp --split $rule --exchange $x --json" --mpi tp --split @A@ --exchange $x --cache cold --json "$M"
    json "--mpi tp --split $rule --exchange $x: the report" "j['policy'] == 'tp' and j['exchange'] == '$named' \
and j['rank_count'] == $n and j['split']['world'] == $n \
and j['split']['rules'][0]['pattern'] == '$rule'.rsplit('=', 1)[0] \
and j['job_read_bytes'] == sum(r['read_bytes'] for r in j['ranks']) == j['plan_read_bytes'] \
and j['job_read_bytes'] * 10 <= j['split']['full_bytes'] * 11 \
and j['job_read_bytes'] >= j['split']['full_bytes'] \
and sum(r['received_bytes'] for r in j['ranks']) == sum(r['sent_bytes'] for r in j['ranks'])"
done
done
export A0='*=0'
run 0 "--mpi tp --exchange shared" --mpi tp --split @A@ --exchange shared "$M"
has "$DIR/out" "taken from the node's shared memory" "--exchange shared says where the slices came from"
# every tensor chunked: the ranks' slices add up to the tensors once
export A0='*=0'
run 0 "--mpi tp --split '*=0' --json" --mpi tp --split @A@ --json "$M"
json "--mpi tp: the slices add up to one copy" "sum(r['bytes'] for r in j['ranks']) == j['split']['full_bytes'] \
and all(r['tensor_count'] == 12 for r in j['ranks']) \
and all(r['sliced_tensor_count'] == (12 if $n > 1 else 0) for r in j['ranks'])"
# the norms (3 x 512 KiB) held whole by every rank, the rest chunked
export A0='*norm.weight=whole'
run 0 "--mpi tp, a rule that keeps tensors whole" --mpi tp --split @A@ --split '*=1' --json "$M"
json "--mpi tp: tensors held whole by every rank" "sum(r['bytes'] for r in j['ranks']) == \
j['split']['full_bytes'] + ($n - 1) * 3 * 524288 and j['split']['rules'][0]['dim'] is None \
and j['split']['rules'][1]['dim'] == 1"

sum=$(sha256sum "$M" | cut -d' ' -f1)
export A0='*=0'
run 0 "--mpi tp --verify" --mpi tp --split @A@ --verify "$M"
has "$DIR/out" "^sha256    $sum  $M" "--mpi tp --verify prints the file's digest"

# a dimension out of range: rank 0's line names the tensor
export A0='*=3'
run 1 "--mpi tp --split '*=3'" --mpi tp --split @A@ "$M"
has "$DIR/err" "^pinio load: $M: rank 0 of $n: tensor '.*split rule '\*=3' asks for dimension 3" \
    "--split '*=3' names the tensor"
one_line "--split '*=3'"

if [ "$n" -gt 1 ]; then
    export A0='*=0' VARG='*=1'
    run 1 "another --split on rank $last" --mpi tp --split @A@ "$M"
    has "$DIR/err" "rank $last of $n: its split rules or world (--split, --world) differ from rank 0's" \
        "another --split is named with its rank"
    one_line "another --split"
    export A0=$n VARG=$((n + 1))
    run 1 "another --world on rank $last" --mpi tp --split '*=0' --world @A@ "$M"
    has "$DIR/err" "rank $last of $n: pinio_mpi_load: world $((n + 1)) is not the communicator's $n ranks" \
        "another --world is named with its rank"
    one_line "another --world"
    # --device on one rank alone: found before anything is read, never a
    # rank waiting in another collective
    export A0=--cache=auto VARG=--device=cuda:0
    run 1 "--device on rank $last alone" --mpi tp --split '*=0' @A@ "$M"
    has "$DIR/err" "rank $last of $n: has --device where rank 0 has none" "--device on one rank is named"
    one_line "--device on one rank"
fi

unset VARG
# --device: each rank's slices and whole tensors on its GPU (the CUDA test
# driver), packed as split_expect.py computes them from the file; the job
# still reads one copy; cuda:local spreads the ranks over the devices; a
# rank whose driver fails fails the job, named, on every rank.
if [ -n "${PINIO_CUDA_LIB:-}" ] && /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
    EXP="$(dirname "$0")/../stream/split_expect.py"
    /usr/bin/python3 "$EXP" gen "$DIR/r.safetensors" 3 || exit 1
    R="$DIR/r.safetensors"
    for x in shared alltoallv; do
        set -- '*norm*=whole' '*o_proj*=1' '*=0'
        [ $x = alltoallv ] && set -- '*up_proj*=1' '*embed*=1' '*=-1'
        export A0=$1
        rm -f "$DIR"/dump.*
        run 0 "--mpi tp --device cuda:0 --exchange $x" --mpi tp --split @A@ --split "$2" \
            --split "$3" --exchange $x --device cuda:0 --staging 64Kx2 --json "$R"
        json "--device cuda:0 --exchange $x: the report" "j['device'] == 'cuda' \
and all(r['device']['index'] == 0 and r['device']['bytes'] == r['bytes'] \
and r['device']['tensor_count'] == r['tensor_count'] for r in j['ranks']) \
and j['job_read_bytes'] == j['plan_read_bytes']"
        r=0
        while [ $r -lt "$n" ]; do
            /usr/bin/python3 "$EXP" arena "$R" "$DIR/dump.$r" $r "$n" "$@" >"$DIR/why" ||
                { echo "FAIL: --device cuda:0 --exchange $x, rank $r: $(cat "$DIR/why")"; fails=$((fails + 1)); }
            r=$((r + 1))
        done
    done
    export A0='*=0' FAKE_CUDA_DEVICES=2
    run 0 "--mpi tp --device cuda:local" --mpi tp --split @A@ --device cuda:local --json "$R"
    json "--device cuda:local: rank r on device r % 2" "j['device'] == 'cuda' and \
[r['device']['index'] for r in j['ranks']] == [k % 2 for k in range($n)]"
    run 0 "--mpi tp --device cuda:local (text)" --mpi tp --split @A@ --device cuda:local "$R"
    has "$DIR/out" "^  device: each rank's tensors from its memory to its GPU" "the text report's device lines"
    has "$DIR/out" "^     $last  cuda:$((last % 2)) (" "the last rank's device line"
    unset FAKE_CUDA_DEVICES
    if [ -n "${PINIO_HIP_LIB:-}" ]; then # the same test driver under HIP's names
        run 0 "--mpi tp --device hip:0" --mpi tp --split @A@ --device hip:0 --json "$R"
        json "--device hip:0: the report" "j['device'] == 'hip' and \
all(r['device']['index'] == 0 and r['device']['bytes'] == r['bytes'] for r in j['ranks'])"
    fi
    export FAIL_LAST=alloc
    run 1 "--device with the last rank's allocation failing" --mpi tp --split @A@ --device cuda:0 "$R"
    has "$DIR/err" "rank $last of $n: to the device: " "a failed device copy names its rank"
    one_line "a failed device copy"
    unset FAIL_LAST
    run 2 "--mpi tp --device host" --mpi tp --split '*=0' --device host "$R"
    has "$DIR/err" "--device host with --mpi tp: the slices are in host memory already" "--device host is refused"
    one_line "--mpi tp --device host"
    run 2 "--mpi replicate --device cuda:0" --mpi replicate --device cuda:0 "$R"
    has "$DIR/err" "--device with --mpi goes with --mpi tp" "--device with another policy is refused"
else
    echo "note: no PINIO_CUDA_LIB or numpy: --mpi tp --device not checked here"
fi

# usage errors: one line (rank 0's), exit 2
run 2 "--mpi tp without --split" --mpi tp "$M"
has "$DIR/err" "--mpi tp wants at least one --split" "--mpi tp without --split is refused"
one_line "--mpi tp without --split"
run 2 "--mpi tp --rank" --mpi tp --split '*=0' --rank 0 "$M"
has "$DIR/err" "--rank is not supported with --mpi" "--rank is refused with --mpi tp"
run 2 "--mpi tp --exchange" --mpi tp --split '*=0' --exchange bcast "$M"
has "$DIR/err" "--exchange with --mpi tp is auto, shared or alltoallv" "--mpi tp --exchange bcast is refused"
one_line "--mpi tp --exchange"
run 2 "--exchange shared with --mpi replicate" --mpi replicate --exchange shared "$M"
has "$DIR/err" "--exchange shared goes with --mpi tp" "--exchange shared is refused with --mpi replicate"
run 2 "--split with --mpi replicate" --mpi replicate --split '*=0' "$M"
has "$DIR/err" "--split is not supported with --mpi" "--split is refused with --mpi replicate"

[ "$fails" -eq 0 ] && echo "PASS (n=$n)" || echo "$fails failed (n=$n)"
[ "$fails" -eq 0 ]
