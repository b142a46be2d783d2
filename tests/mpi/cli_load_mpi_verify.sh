#!/bin/sh
# `pinio load --mpi --verify/--sha256/--sha256-file` under mpiexec with N ranks, for every
# policy: a clean load's digests are the files' (sha256sum) in the text and
# the JSON report; a wrong --sha256 and a byte flipped in one rank's reads
# (PINIO_FAULTS corrupt@ on the last rank) are one "sha256 mismatch" line
# from rank 0 and exit 1; a rank given a stale copy (same size, other data)
# or a missing file, or other --filter than the others, is one line naming
# that rank; a usage error is one line and exit 2 (one on another rank
# alone too: rank 0 names it); a --filter that selects nothing is refused
# under every policy; --progress draws the
# job's progress to 100 %. The hang guard is timeout(1), never a timing.
# usage: cli_load_mpi_verify.sh PINIO N MPIEXEC [MPIEXEC ARGS...]
set -u
pinio=$1; n=$2; shift 2
fails=0
DIR=$(mktemp -d /var/tmp/pinio-${PINIO_TEST_RUN:-p$$}-mpicliv-XXXXXX) || { echo "FAIL: mktemp"; exit 1; }
trap 'rm -rf "$DIR"' EXIT
. "$(dirname "$0")/../common/cli.sh"
last=$((n - 1))

# on the last rank: PINIO_FAULTS=$VFAULTS and @P@ as $VPATH; elsewhere @P@ as
# $P0. The launcher's rank variable: Open MPI's, else Hydra's PMI_RANK.
cat >"$DIR/wrap.sh" <<'EOF'
#!/bin/sh
r=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}
p=$P0
if [ "$r" = "$LAST" ]; then
    p=${VPATH:-$P0}
    [ -n "${VFAULTS:-}" ] && export PINIO_FAULTS="$VFAULTS"
fi
cmd=$1; shift
for a; do
    shift
    if [ "$a" = "@P@" ]; then set -- "$@" "$p"; else set -- "$@" "$a"; fi
done
exec "$cmd" "$@"
EOF
chmod +x "$DIR/wrap.sh"
export LAST=$last

# run WANT DESCRIPTION PINIO-LOAD-ARGS...: under mpiexec, through the wrapper
run() {
    want=$1; what=$2; shift 2
    check "$want" "$what (n=$n)" timeout 100 "$@"
}
mpi() { echo "$MPIEXEC" -n "$n" "$DIR/wrap.sh" "$pinio" load; }
MPIEXEC="$*"

# pinio's own lines on stderr (mpiexec's banners are not pinio's): exactly one
one_line() {
    c=$(grep -c '^pinio load' "$DIR/err")
    [ "$c" -eq 1 ] || { echo "FAIL: $1 (n=$n): $c lines from pinio, want 1:"; cat "$DIR/err"; fails=$((fails + 1)); }
}

"$pinio" gen "$DIR/m.safetensors" --size 6M --tensors 12 >/dev/null || exit 1
"$pinio" gen "$DIR/ck" --size 6M --tensors 12 --shards 3 >/dev/null || exit 1
sum=$(sha256sum "$DIR/m.safetensors" | cut -d' ' -f1)
wrong=0000000000000000000000000000000000000000000000000000000000000000
export P0="$DIR/m.safetensors"

for pol in replicate shard node; do
    unset VPATH VFAULTS
    run 0 "--mpi $pol --verify" $(mpi) --mpi $pol --cache cold --verify @P@
    has "$DIR/out" "^sha256    $sum  $DIR/m.safetensors" "--mpi $pol --verify prints the file's digest"
    run 0 "--mpi $pol --verify --json (3 shards)" $(mpi) --mpi $pol --json --verify "$DIR/ck"
    /usr/bin/python3 - "$DIR/out" >"$DIR/shas" <<'EOF' || { echo "FAIL: --mpi $pol --json digests (n=$n)"; fails=$((fails + 1)); }
import hashlib, json, os, sys
j = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
assert j["verified"] is True and j["verify_s"] >= 0, j
files = j["files"]
assert len(files) == 3, files
for f in files:
    assert f["sha256"] == hashlib.sha256(open(f["path"], "rb").read()).hexdigest(), f
# every byte of the files hashed once by the job: as read, or read again
total = sum(os.path.getsize(f["path"]) for f in files)
assert j["verify_landed_bytes"] + j["verify_reread_bytes"] == total, j
assert sum(r["verify_landed_bytes"] for r in j["ranks"]) == j["verify_landed_bytes"], j
print(" ".join("--sha256 " + f["sha256"] for f in files))  # resolution order
EOF
    run 0 "--mpi $pol --sha256 x3 (3 shards)" $(mpi) --mpi $pol $(cat "$DIR/shas") "$DIR/ck"
    (cd "$DIR/ck" && sha256sum *.safetensors) >"$DIR/SUMS"
    run 0 "--mpi $pol --sha256-file SUMS (3 shards)" $(mpi) --mpi $pol --sha256-file "$DIR/SUMS" "$DIR/ck"
    sed '1s/^./f/; 1s/^ff/0f/' "$DIR/SUMS" >"$DIR/BADSUMS"
    run 1 "--mpi $pol --sha256-file with a wrong digest" $(mpi) --mpi $pol --sha256-file "$DIR/BADSUMS" "$DIR/ck"
    has "$DIR/err" "sha256 mismatch: expected " "--mpi $pol --sha256-file: the mismatch names the file"
    one_line "--mpi $pol --sha256-file with a wrong digest"
    head -n 2 "$DIR/SUMS" >"$DIR/SHORTSUMS"
    run 1 "--mpi $pol --sha256-file lacking a shard" $(mpi) --mpi $pol --sha256-file "$DIR/SHORTSUMS" "$DIR/ck"
    has "$DIR/err" "has no line for it" "--mpi $pol --sha256-file: the shard it lacks is named"
    one_line "--mpi $pol --sha256-file lacking a shard"
    run 1 "--mpi $pol --sha256 WRONG" $(mpi) --mpi $pol --sha256 $wrong @P@
    has "$DIR/err" "m.safetensors: sha256 mismatch: expected $wrong, got $sum" "--mpi $pol: the mismatch names the file"
    one_line "--mpi $pol --sha256 WRONG"
    export VFAULTS=corrupt@1x1000000
    run 1 "--mpi $pol: a byte flipped in rank $last's reads" $(mpi) --mpi $pol --cache cold --sha256 "$sum" @P@
    has "$DIR/err" "sha256 mismatch: expected $sum, got " "--mpi $pol: the flipped byte fails the job"
    one_line "--mpi $pol: a flipped byte"
    unset VFAULTS
done

if [ "$n" -gt 1 ]; then
    # a stale copy on the last rank: the same header and size, other data
    /usr/bin/python3 - "$DIR/m.safetensors" "$DIR/stale.safetensors" <<'EOF'
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
h = 8 + struct.unpack("<Q", b[:8])[0]
b[h:] = bytes(x ^ 0xFF for x in b[h:])
open(sys.argv[2], "wb").write(b)
EOF
    for pol in replicate shard node; do
        export VPATH="$DIR/stale.safetensors"
        run 1 "--mpi $pol: a stale copy on rank $last" $(mpi) --mpi $pol @P@
        has "$DIR/err" "^pinio load: $DIR/stale.safetensors: rank $last of $n: its data differs from rank 0's file" \
            "--mpi $pol: the stale copy is named with its rank"
        one_line "--mpi $pol: a stale copy"
        export VPATH="$DIR/none.safetensors"
        run 1 "--mpi $pol: no file on rank $last" $(mpi) --mpi $pol @P@
        has "$DIR/err" "none.safetensors: rank $last of $n: " "--mpi $pol: the missing file is named with its rank"
        one_line "--mpi $pol: a missing file"
    done
    unset VPATH
    # other filters on the last rank: @P@ stands for the filter there
    export VPATH=model.layers.1 P0=model.layers.0
    run 1 "--mpi replicate: other --filter on rank $last" $(mpi) --mpi replicate --filter @P@ "$DIR/m.safetensors"
    has "$DIR/err" "rank $last of $n: its filters (--filter) differ from rank 0's" "other filters are named"
    one_line "other filters"
    export VPATH=no.such.tensor
    run 1 "--mpi node: a selection of nothing on rank $last" $(mpi) --mpi node --filter @P@ "$DIR/m.safetensors"
    one_line "a selection of nothing"
    export P0="$DIR/m.safetensors"
    unset VPATH
fi

# a selection of nothing on every rank (issue 37 item 16): under every
# policy the single process's message, one line, exit 1 on every rank
for pol in replicate shard node tp; do
    rule=; [ "$pol" = tp ] && rule="--split w=0"
    run 1 "--mpi $pol --filter zzz" $(mpi) --mpi $pol $rule --filter zzz @P@
    has "$DIR/err" "^pinio load: no tensor matches --filter 'zzz' (12 tensors in 1 file)" \
        "--mpi $pol: a selection of nothing is refused"
    one_line "--mpi $pol --filter zzz"
done
run 1 "--mpi shard --shard-filter zzz" $(mpi) --mpi shard --shard-filter zzz @P@
has "$DIR/err" "^pinio load: no tensor matches --shard-filter 'zzz'" \
    "--mpi shard: a shard selection of nothing on every rank is refused"
one_line "--mpi shard --shard-filter zzz"

# usage errors: one line (rank 0's), exit 2
run 2 "--qd 0 under mpiexec" $(mpi) --mpi replicate --qd 0 @P@
one_line "a usage error"
run 2 "--filter with --shard-filter" $(mpi) --mpi shard --filter a --shard-filter b @P@
has "$DIR/err" "--filter with --shard-filter" "--filter with --shard-filter is refused"
one_line "--filter with --shard-filter"
if [ "$n" -gt 1 ]; then
    # a usage error on the last rank alone (its own --qd, through the
    # wrapper): every rank exits 2 and rank 0 names that rank
    export P0=4 VPATH=0
    run 2 "--qd 0 on rank $last alone" $(mpi) --mpi replicate --qd @P@ "$DIR/m.safetensors"
    has "$DIR/err" "rank $last of $n: its command line is a usage error" \
        "a usage error on rank $last alone is named by rank 0"
    one_line "a usage error on rank $last alone"
    export P0="$DIR/m.safetensors"
    unset VPATH
fi

# --progress: rank 0 draws the job's reads to 100 %, one line
run 0 "--progress" $(mpi) --mpi replicate --cache cold --progress @P@
tr '\r' '\n' <"$DIR/err" | grep -q '^load --mpi \[=*\] 100%' || { echo "FAIL: no progress line to 100 % (n=$n):"; cat "$DIR/err"; fails=$((fails + 1)); }

[ "$fails" -eq 0 ] && echo "PASS (n=$n)" || echo "$fails failed (n=$n)"
[ "$fails" -eq 0 ]
