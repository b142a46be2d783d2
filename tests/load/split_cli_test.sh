#!/bin/sh
# pinio load --split PATTERN=DIM --rank R --world N end to end: the slices in
# the summary and --json (every rank's slice bytes add up to the whole
# tensors; a dimension-0 split reads its slices and a few percent more),
# and the usage errors (exit 2) and load errors (exit 1) naming the tensor.
# Usage: split_cli_test.sh PATH_TO_PINIO
set -u
PINIO=$1
DIR=$(mktemp -d /var/tmp/pinio-${PINIO_TEST_RUN:-p$$}-splitcli-XXXXXX) || exit 1
trap 'rm -rf "$DIR"' EXIT
fails=0
. "$(dirname "$0")/../common/cli.sh"

M=$DIR/m.safetensors
check 0 "gen" "$PINIO" gen "$M" --size 8M --tensors 9 --dtypes bf16,f32,u8 --quiet
check 0 "--help" "$PINIO" load --help
has "$DIR/out" "--split PATTERN=DIM" "--help explains --split"
has "$DIR/out" "torch.chunk(tensor, WORLD, DIM)\[RANK\]" "--help says the slice is torch.chunk's"
has "$DIR/out" "--rank R" "--help explains --rank"
has "$DIR/out" "--world N" "--help explains --world"
has "$DIR/out" "--max-overread F" "--help explains --max-overread"

check 0 "--split text" "$PINIO" load "$M" --split '*=0' --rank 1 --world 2
has "$DIR/out" "split     rank 1 of 2: 9 tensors sliced" "the summary reports the split"

# Every rank's slices add up to the whole checkpoint, for dimension 0 and
# for the last dimension (strided slices, packed in the arena).
for spec in "0 4" "-1 3"; do
    set -- $spec
    total=0
    r=0
    while [ $r -lt "$2" ]; do
        check 0 "--split '*=$1' rank $r of $2" "$PINIO" load "$M" --split "*=$1" --rank $r \
            --world "$2" --cache cold --json
        json "rank $r of $2 along $1: slices reported" \
            "j['split']['rank'] == $r and j['split']['world'] == $2 and j['split']['rules'] == [{'pattern': '*', 'dim': $1}] and j['split']['full_bytes'] == 8388608 and j['overread_bytes'] >= 0 and all(t['stop'][-1] >= t['start'][-1] for t in j['split']['tensors'])"
        b=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['bytes'])" "$DIR/out")
        total=$((total + b))
        r=$((r + 1))
    done
    if [ "$total" -ne 8388608 ]; then
        echo "FAIL: the $2 ranks' slices along $1 hold $total bytes, not the 8388608 of the file"
        fails=$((fails + 1))
    fi
done

# Dimension 0, cold and pinned: the reads cover the slices and little more.
check 0 "dim 0 reads" "$PINIO" load "$M" --split '*=0' --rank 2 --world 4 --cache cold \
    --memory pinned --json
json "a dimension-0 split reads within 3% of its slices" \
    "j['read_bytes'] >= j['bytes'] and j['read_bytes'] <= j['bytes'] * 1.03 and j['split']['strided_tensor_count'] == 0 and j['split']['sliced_tensor_count'] == 9"
# A 'whole' rule before the catch-all keeps the norms whole.
check 0 "whole rule" "$PINIO" load "$M" --split '*norm*=whole' --split '*=0' --rank 0 --world 2 --json
json "norms whole, the rest sliced" \
    "j['split']['sliced_tensor_count'] == 7 and j['split']['rules'][0]['dim'] is None and not any('norm' in t['name'] for t in j['split']['tensors'])"
check 0 "--max-overread 0" "$PINIO" load "$M" --split '*=0' --rank 0 --world 8 --max-overread 0 --json
json "no hole read through" "j['split']['hole_bytes'] == 0"
check 0 "--max-overread 5%" "$PINIO" load "$M" --split '*=0' --world 2 --max-overread 5% --json

# --verify hashes the whole file while only the slices are kept, strided
# ones packed after the hash.
check 0 "--verify" "$PINIO" load "$M" --split '*=-1' --rank 1 --world 3 --cache cold --verify --json
sum=$(sha256sum "$M" | cut -d' ' -f1)
json "the digest is the file's" "j['verified'] and j['files'][0]['sha256'] == '$sum'"

# A dimension a tensor lacks: a load error naming the tensor.
check 1 "dim out of range" "$PINIO" load "$M" --split '*=3' --world 2
has "$DIR/err" "tensor 'model.layers.0" "the error names the tensor"
has "$DIR/err" "asks for dimension 3" "the error names the dimension"
check 1 "dim out of range --json" "$PINIO" load "$M" --split '*=-4' --world 2 --json
json "the JSON error names the tensor" "\"tensor 'model.layers.0\" in j['error']['message']"

# Usage errors.
check 2 "rank >= world" "$PINIO" load "$M" --split '*=0' --rank 2 --world 2
has "$DIR/err" "--rank 2 is not below --world 2" "the usage error explains"
check 2 "world 0" "$PINIO" load "$M" --split '*=0' --world 0
has "$DIR/err" "--world wants at least 1" "the usage error explains"
check 2 "rank without world" "$PINIO" load "$M" --split '*=0' --rank 1
has "$DIR/err" "--rank 1 is not below --world 1" "--world defaults to 1"
check 2 "--rank without --split" "$PINIO" load "$M" --rank 0 --world 2
has "$DIR/err" "--rank goes with --split" "the usage error explains"
check 2 "--world without --split" "$PINIO" load "$M" --world 2
has "$DIR/err" "--world goes with --split" "the usage error explains"
check 2 "no =" "$PINIO" load "$M" --split 'model'
has "$DIR/err" "--split wants PATTERN=DIM" "the usage error explains"
check 2 "bad dim" "$PINIO" load "$M" --split '*=x'
check 2 "empty pattern" "$PINIO" load "$M" --split '=0'
check 2 "bad rank" "$PINIO" load "$M" --split '*=0' --rank -1 --world 2
check 2 "bad overread" "$PINIO" load "$M" --split '*=0' --max-overread much
has "$DIR/err" "--max-overread wants a fraction" "the usage error explains"
# Streaming takes --split (tests/stream/load_device_split_test.sh checks the bytes).
check 0 "--split --device" "$PINIO" load "$M" --split '*=0' --device host --world 2
has "$DIR/out" "^split     rank 0 of 2: 9 tensors sliced" "the stream reports the split"

[ $fails -eq 0 ] && echo "split_cli: all checks passed"
[ $fails -eq 0 ]
