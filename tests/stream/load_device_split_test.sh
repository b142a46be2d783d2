#!/bin/sh
# pinio load --split ... --device: slices streamed to a device. Random
# checkpoints (split_expect.py gen: random shapes and dtypes, rows longer
# than a slot), world sizes 1-8, a random rank and the last, rules along
# dimension 0, dimension 1 (strided: run by run) and the last, norms kept
# whole, 64 KiB slots: through the CUDA test driver, which writes the arena
# out when it is freed (FAKE_CUDA_DUMP), every tensor equals its chunk
# computed from the file's bytes by split_expect.py; the host sink is handed
# exactly the slices' bytes; --json carries the split and the over-read;
# --verify still checks the whole file; a bad rule fails naming the tensor.
# Usage: load_device_split_test.sh PATH_TO_PINIO
set -u
PINIO=$1
HERE=$(dirname "$0")
PY=/usr/bin/python3
$PY -c 'import numpy' 2>/dev/null || { echo "SKIP: /usr/bin/python3 has no numpy"; exit 77; }
DIR=$(mktemp -d "/var/tmp/pinio-${PINIO_TEST_RUN:-p$$}-devsplit-XXXXXX") || exit 1
trap 'rm -rf "$DIR"' EXIT
. "$HERE/cli_helpers.sh"

rand() { # rand N: a number below N, from the test's own sequence
    seq_state=$(( (seq_state * 1103515245 + 12345) % 2147483648 ))
    echo $(( seq_state / 65536 % $1 ))
}
seq_state=26

CK=$DIR/m.safetensors
for seed in 1 2; do
    check 0 "gen $seed" $PY "$HERE/split_expect.py" gen "$CK" "$seed"
    for world in 1 2 3 4 5 6 7 8; do
        host=1
        for rank in $(rand "$world") $((world - 1)); do
            case $(rand 3) in
                0) set -- '*norm*=whole' '*o_proj*=1' '*=0' ;;
                1) set -- '*norm*=whole' '*=-1' ;;
                *) set -- '*up_proj*=1' '*embed*=1' '*short*=0' ;;
            esac
            rules="$*"
            args=""
            for r in "$@"; do args="$args --split $r"; done
            tc="seed $seed, rank $rank of $world, $rules"
            rm -f "$DIR/dump"
            # shellcheck disable=SC2086 # the rules hold no blanks
            check 0 "cuda: $tc" env FAKE_CUDA_DUMP="$DIR/dump" "$PINIO" load "$CK" \
                --device cuda:0 --staging 64Kx2 $args --rank "$rank" --world "$world" --json
            cp "$DIR/out" "$DIR/json"
            if ! $PY "$HERE/split_expect.py" device "$CK" "$DIR/dump" "$DIR/json" "$rank" \
                "$world" "$@" >"$DIR/why"; then
                echo "FAIL: cuda: $tc: $(cat "$DIR/why")"; fails=$((fails + 1))
                continue
            fi
            wantb=$(cat "$DIR/why")
            [ $host -eq 1 ] || continue # the host sink: one rank per world
            host=0
            # The host sink: handed the slices' bytes, nothing over-read.
            # shellcheck disable=SC2086
            check 0 "host: $tc" "$PINIO" load "$CK" --device host --staging 64Kx3 $args \
                --rank "$rank" --world "$world"
            has "$DIR/out" "^host      $wantb bytes in" "host: $tc: the slices' bytes, no more"
            has "$DIR/out" "^split     rank $rank of $world: " "host: $tc: the split line"
        done
    done
done

# --verify: the whole file's digest, the other ranks' slices read again.
SUM=$(sha256sum "$CK" | cut -d' ' -f1)
check 0 "--sha256 with a split" "$PINIO" load "$CK" --device cuda:0 --staging 64Kx2 \
    --split '*=0' --rank 1 --world 3 --sha256 "$SUM" --max-overread 0 --json
$PY -c '
import json, sys
j = json.load(open(sys.argv[1]))
assert j["verified"] and j["digests"][0]["sha256"] == sys.argv[2], j
assert j["verify_reread_bytes"] > 0, j' "$DIR/out" "$SUM" ||
    { echo "FAIL: --sha256 with a split"; cat "$DIR/out"; fails=$((fails + 1)); }
check 1 "a wrong digest with a split" "$PINIO" load "$CK" --device host --split '*embed*=1' --split '*=0' \
    --world 2 --sha256 "$(echo "$SUM" | tr 0-9a-f 1-9a-f0)"
has "$DIR/err" "sha256 mismatch" "the error says the digest differs"

# Errors: a dimension a tensor lacks (exit 1, the tensor named), usage (2).
check 1 "dim out of range" "$PINIO" load "$CK" --device cuda:0 --split '*=3' --world 2
has "$DIR/err" "tensor 'model.layers.0.input_layernorm.weight'" "the error names the tensor"
has "$DIR/err" "asks for dimension 3" "the error names the dimension"
[ "$(wc -l <"$DIR/err")" -eq 1 ] || { echo "FAIL: more than one line:"; cat "$DIR/err"; fails=$((fails + 1)); }
check 2 "rank >= world" "$PINIO" load "$CK" --device host --split '*=0' --rank 4 --world 4
has "$DIR/err" "--rank 4 is not below --world 4" "the usage error explains"

[ $fails -eq 0 ] && echo "load_device_split: all checks passed"
exit $((fails > 0))
