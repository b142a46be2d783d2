#!/bin/sh
# The CLI on what a user has on disk: a Hugging Face hub cache tree (every
# snapshot file a link into blobs/, the index too, refs/main) loaded, shown
# and staged by folder, by index and by repo id (ORG/NAME and a bare NAME
# such as gpt2), bytes checked against
# sha256sum's list matched by name (--sha256-file); a link out of the model's
# folder refused, and a --local-dir linked into the cache loaded only under
# PINIO_LINK_ROOTS; `pinio info DIR` as `pinio load DIR`.
# Usage: hub_cli_test.sh PATH_TO_PINIO
set -u
PINIO=$(cd "$(dirname "$1")" && pwd)/$(basename "$1") # absolute: one check runs elsewhere
DIR=$(mktemp -d /var/tmp/pinio-${PINIO_TEST_RUN:-p$$}-hubcli-XXXXXX) || exit 1
trap 'rm -rf "$DIR"' EXIT
fails=0
. "$(dirname "$0")/../common/cli.sh"
for v in HF_HUB_CACHE HUGGINGFACE_HUB_CACHE HF_HOME XDG_CACHE_HOME; do unset "$v"; done

# The checkpoint, its digests as sha256sum prints them (in reverse order:
# matched by name, not position), then the hub layout around it.
check 0 "gen" "$PINIO" gen "$DIR/src" --size 3M --tensors 12 --shards 3 --dtypes f32 --seed 5 --quiet
(cd "$DIR/src" && sha256sum ./*.safetensors | sort -r) >"$DIR/SUMS"
C=0123456789abcdef0123456789abcdef01234567
MODEL=$DIR/hub/models--org--tiny
SNAP=$MODEL/snapshots/$C
mkdir -p "$MODEL/blobs" "$MODEL/refs" "$SNAP"
for f in "$DIR"/src/*; do
    b=$(sha256sum "$f" | cut -c1-64)
    mv "$f" "$MODEL/blobs/$b"
    ln -s "../../blobs/$b" "$SNAP/$(basename "$f")"
done
printf %s "$C" >"$MODEL/refs/main"
export HF_HUB_CACHE="$DIR/hub"

for input in "$SNAP" "$SNAP/model.safetensors.index.json" org/tiny org/tiny@main "org/tiny@$C"; do
    check 0 "load $input" "$PINIO" load --memory pinned --sha256-file "$DIR/SUMS" "$input"
    has "$DIR/out" "loaded    12 tensors, 0.003 GB from 3 files" "load $input: every shard"
    has "$DIR/out" "^verify" "load $input: verified against SUMS"
    check 0 "info $input" "$PINIO" info "$input"
    has "$DIR/out" "^index: .*12 tensors in 3 shards" "info $input: the index and its shards"
done
check 0 "load through HF_HOME" env -u HF_HUB_CACHE HF_HOME="$DIR" "$PINIO" load org/tiny
check 0 "info --json org/tiny" "$PINIO" info --json org/tiny
has "$DIR/out" '"kind":"index"' "info --json of a repo id names its index"

# A canonical model without an org (gpt2): CACHE/models--NAME. The same
# bare name with no cached model is a missing file, said as one.
mkdir -p "$DIR/hub/models--tiny2/snapshots" "$DIR/hub/models--tiny2/refs"
ln -s "$SNAP" "$DIR/hub/models--tiny2/snapshots/$C"
printf %s "$C" >"$DIR/hub/models--tiny2/refs/main"
for input in tiny2 tiny2@main "tiny2@$C"; do
    check 0 "load $input (no org)" "$PINIO" load --sha256-file "$DIR/SUMS" "$input"
    has "$DIR/out" "loaded    12 tensors, 0.003 GB from 3 files" "load $input: every shard"
done
check 0 "info tiny2" "$PINIO" info tiny2
has "$DIR/out" "^index: .*12 tensors in 3 shards" "info tiny2: the index and its shards"
check 1 "a bare name neither a file nor cached" "$PINIO" load nope.safetensors
has "$DIR/err" "load: nope.safetensors: no such file or directory$" "a missing bare name is a missing file"
check 1 "a repo id not in the cache" "$PINIO" load org/nope
has "$DIR/err" "org/nope: No such file or directory, nor a model in the Hugging Face hub cache" \
    "a missing repo id says where it looked"
check 1 "an unknown revision" "$PINIO" load org/tiny@dev
has "$DIR/err" "revision 'dev' is neither a ref" "an unknown revision says so"

# stage copies the bytes, not the links.
check 0 "stage org/tiny" "$PINIO" stage org/tiny "$DIR/staged" --verify
for f in "$DIR"/staged/*; do
    if [ -L "$f" ] || [ ! -f "$f" ] || ! cmp -s "$f" "$SNAP/$(basename "$f")"; then
        echo "FAIL: stage left $f a link or other bytes"; ls -l "$DIR/staged"; fails=$((fails + 1))
    fi
done
[ "$(ls "$DIR/staged" | wc -l)" -eq 4 ] || { echo "FAIL: stage: not 3 shards and the index"; fails=$((fails + 1)); }

# --sha256-file: a wrong digest, a missing line, two lines of one name, a
# line of another shape, and with --sha256.
sed '1s/^./0/' "$DIR/SUMS" >"$DIR/BAD"
check 1 "a wrong digest in SUMS" "$PINIO" load --sha256-file "$DIR/BAD" org/tiny
has "$DIR/err" "sha256 mismatch" "a wrong digest is a mismatch"
sed 1d "$DIR/SUMS" >"$DIR/SHORT"
check 1 "a file SUMS lacks" "$PINIO" load --sha256-file "$DIR/SHORT" org/tiny
has "$DIR/err" "has no line for it" "a file SUMS lacks is named"
{ sha256sum "$SNAP"/*.safetensors; sed -n '1s|  \./|  other/|p' "$DIR/SUMS"; } >"$DIR/TWICE"
check 0 "SUMS naming the shards by path" "$PINIO" load --sha256-file "$DIR/TWICE" org/tiny
check 1 "a name two lines share, no path match" \
    sh -c 'cd "$1/hub" && "$2" load --sha256-file "$1/TWICE" models--org--tiny/snapshots/*' - \
    "$DIR" "$PINIO"
has "$DIR/err" "has 2 lines named" "two lines of one name are refused"
{ cat "$DIR/SUMS"; echo "not a digest line"; } >"$DIR/JUNK"
check 1 "a malformed SUMS" "$PINIO" load --sha256-file "$DIR/JUNK" org/tiny
has "$DIR/err" "line 4 is not sha256sum's" "a malformed line is named"
check 2 "--sha256 with --sha256-file" "$PINIO" load --sha256-file "$DIR/SUMS" \
    --sha256 "$(head -c 64 "$DIR/SUMS")" org/tiny
(cd "$DIR/hub" && sha256sum --tag "$SNAP"/*.safetensors) >"$DIR/TAG"
check 0 "sha256sum --tag output" "$PINIO" load --sha256-file "$DIR/TAG" "$SNAP"

# A --local-dir download by huggingface_hub 0.17-0.22: the index a copy, the
# shards links into the cache's blobs. Refused, saying how to allow it;
# loaded under PINIO_LINK_ROOTS (pinio load --help says so).
mkdir "$DIR/local"
cp "$SNAP/model.safetensors.index.json" "$DIR/local/"
for f in "$SNAP"/*.safetensors; do ln -s "$(readlink -f "$f")" "$DIR/local/$(basename "$f")"; done
check 1 "load of a --local-dir linked into the cache" "$PINIO" load "$DIR/local"
has "$DIR/err" "PINIO_LINK_ROOTS" "the refusal names the allowance"
check 0 "the same under PINIO_LINK_ROOTS" env PINIO_LINK_ROOTS="$DIR/hub" "$PINIO" load \
    --sha256-file "$DIR/SUMS" "$DIR/local"
has "$DIR/out" "loaded    12 tensors, 0.003 GB from 3 files" "the allowed --local-dir loads"
check 0 "load --help" "$PINIO" load --help
has "$DIR/out" "PINIO_LINK_ROOTS" "load --help documents the allowance"
rm -rf "$DIR/local"

# A link out of the model's folder: refused by load, info and stage.
S2=$SNAP/model-00002-of-00003.safetensors
mv "$(readlink -f "$S2")" "$DIR/outside.safetensors"
ln -sf "../../../../outside.safetensors" "$S2"
for cmd in load info; do
    check 1 "$cmd: a link out of the model folder" "$PINIO" "$cmd" org/tiny
    has "$DIR/err" "resolves outside the hub model's folder .*models--org--tiny" \
        "$cmd: the escape is refused and says where links must stay"
done
check 1 "stage: a link out of the model folder" "$PINIO" stage org/tiny "$DIR/staged2"
has "$DIR/err" "outside the hub model's folder" "stage: the escape is refused"

# pinio info DIR: what pinio load DIR reads (no index: every *.safetensors).
check 0 "gen two shards" "$PINIO" gen "$DIR/plain" --size 1M --tensors 5 --shards 2 --quiet
rm -f "$DIR/plain/model.safetensors.index.json"
check 0 "info DIR" "$PINIO" info "$DIR/plain"
has "$DIR/out" "file:     $DIR/plain/model-00001-of-00002.safetensors" "info DIR shows the first file"
has "$DIR/out" "file:     $DIR/plain/model-00002-of-00002.safetensors" "info DIR shows the second file"
check 0 "info --json DIR" "$PINIO" info --json "$DIR/plain"
has "$DIR/out" '"file_count":2' "info --json DIR counts both files"
check 1 "info of an empty folder" "$PINIO" info "$DIR/staged2"
check 1 "info of a missing path" "$PINIO" info "$DIR/nothing"
has "$DIR/err" "o such file or directory" "info of a missing path says so"

[ "$fails" -eq 0 ] && echo "all hub cache CLI checks passed"
exit $((fails > 0))
