#!/bin/sh
# pinio gen + pinio info end to end: exit codes (0 valid, 1 invalid, 2 usage),
# the --json output, and the one-line error on stderr.
# Usage: st_cli_test.sh PATH_TO_PINIO
set -u
PINIO=$1
DIR=$(mktemp -d "/tmp/pinio-${PINIO_TEST_RUN:-p$$}-cli-XXXXXX") || exit 1
trap 'rm -rf "$DIR"' EXIT
fails=0
. "$(dirname "$0")/../common/cli.sh"

check 0 "gen single" "$PINIO" gen "$DIR/m.safetensors" --size 1M --tensors 10 \
    --dtypes bf16,F32,F8_E4M3,F4 --seed 7 --quiet
check 0 "info" "$PINIO" info "$DIR/m.safetensors"
has "$DIR/out" "tensors:  10" "info lists the tensors"
has "$DIR/out" "pinio_gen_seed = 7" "info shows the metadata"
has "$DIR/out" "model.layers.0.self_attn.q_proj.weight  F32" "info shows name and dtype"
check 0 "info --json" "$PINIO" info --json "$DIR/m.safetensors"
has "$DIR/out" '"valid":true' "json valid"
has "$DIR/out" '"dtype":"F4","bits":4' "json dtype"
has "$DIR/out" '"alignment_bytes":' "json alignment"
if command -v python3 >/dev/null 2>&1; then
    if ! python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert len(d["files"][0]["tensors"]) == d["tensor_count"] == 10' "$DIR/out"; then
        echo "FAIL: info --json is not valid JSON with 10 tensors"; fails=$((fails + 1))
    fi
fi

check 0 "gen sharded" "$PINIO" gen "$DIR/sh" --size 64K --tensors 5 --shards 2 --quiet
has "$DIR/sh/model.safetensors.index.json" '"weight_map"' "index written"
check 0 "info shard" "$PINIO" info --json "$DIR/sh/model-00002-of-00002.safetensors"

# An invalid file: one extra byte at the end (MetadataIncompleteBuffer).
cp "$DIR/m.safetensors" "$DIR/bad.safetensors" && printf x >>"$DIR/bad.safetensors"
check 1 "info on an invalid file" "$PINIO" info "$DIR/bad.safetensors"
has "$DIR/err" "MetadataIncompleteBuffer" "the rule is named"
has "$DIR/err" "bad.safetensors" "the file is named"
[ "$(wc -l <"$DIR/err")" -eq 1 ] || { echo "FAIL: error is not one line"; fails=$((fails + 1)); }
check 1 "info --json on an invalid file" "$PINIO" info --json "$DIR/bad.safetensors"
has "$DIR/out" '"error":{"code":' "json invalid: an error object"
check 1 "info on a missing file" "$PINIO" info "$DIR/none.safetensors"

# Usage errors.
check 2 "info without a path" "$PINIO" info
check 2 "info with a bad option" "$PINIO" info --nope "$DIR/m.safetensors"
check 2 "gen without --size" "$PINIO" gen "$DIR/x.safetensors"
check 2 "gen with a bad size" "$PINIO" gen "$DIR/x.safetensors" --size 12Q
check 2 "gen with a bad dtype" "$PINIO" gen "$DIR/x.safetensors" --size 1K --dtypes F33
check 0 "gen with a KiB size" "$PINIO" gen "$DIR/k.safetensors" --size 2KiB --tensors 2 -q
check 0 "info on it" "$PINIO" info --json "$DIR/k.safetensors"
has "$DIR/out" '"data_size_bytes":2048' "2KiB is 2048 bytes"
check 0 "gen --help" "$PINIO" gen --help
has "$DIR/out" "--shards K" "gen help"
check 0 "info --help" "$PINIO" info --help
check 2 "gen with an empty --dtypes" "$PINIO" gen "$DIR/x.safetensors" --size 1K --dtypes ""
has "$DIR/err" "dtypes" "an empty --dtypes says why"
# A header over 10^8 bytes: refused before anything is written (the parser
# would refuse it as HeaderTooLarge).
check 2 "gen with a too large header" "$PINIO" gen "$DIR/big.safetensors" --size 2200000 --tensors 1100000 -q
has "$DIR/err" "over the format's limit" "a too large header says why"
[ -e "$DIR/big.safetensors" ] && { echo "FAIL: a too large header was written"; fails=$((fails + 1)); }
ls "$DIR" | grep -q "tmp" && { echo "FAIL: a temporary file was left"; fails=$((fails + 1)); }
# An index over the parser's limit (10^8 bytes) with shard headers under it:
# refused before the folder or any shard is written.
check 2 "gen with a too large index" "$PINIO" gen "$DIR/bigix" --size 3000000 --tensors 1500000 \
    --shards 2 -q
has "$DIR/err" "an index of .* bytes is over pinio's limit" "a too large index says why"
[ -e "$DIR/bigix" ] && { echo "FAIL: shards written before the index was refused:"; ls -l "$DIR/bigix"; fails=$((fails + 1)); }
# Names with C1 controls and DEL: escaped in text output, not sent raw.
printf '{"a\\u009bb\\u007fc":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}' >"$DIR/h.json"
python3 - "$DIR/h.json" "$DIR/c1.safetensors" <<'PY'
import struct, sys
h = open(sys.argv[1], "rb").read()
h += b" " * (-len(h) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(h)) + h + b"\0")
PY
check 0 "info on C1 names" "$PINIO" info "$DIR/c1.safetensors"
has "$DIR/out" 'a\\u009bb\\x7fc' "C1 and DEL escaped"
if LC_ALL=C grep -q "$(printf '\302\233')" "$DIR/out" || LC_ALL=C grep -q "$(printf '\177')" "$DIR/out"; then
    echo "FAIL: info printed a raw control character"; fails=$((fails + 1))
fi
# SIGTERM during gen: the temporary file goes, and gen dies of the signal.
"$PINIO" gen "$DIR/sig.safetensors" --size 8G -q 2>"$DIR/err" &
pid=$!
for _ in $(seq 200); do ls "$DIR"/sig.safetensors.tmp* >/dev/null 2>&1 && break; sleep 0.02; done
kill -TERM $pid; wait $pid; rc=$?
[ $rc = 143 ] || { echo "FAIL: gen after SIGTERM exit $rc, want 143"; cat "$DIR/err"; fails=$((fails + 1)); }
left=$(ls "$DIR" | grep '^sig')
[ -z "$left" ] || { echo "FAIL: SIGTERM left $left"; fails=$((fails + 1)); }
# Temporaries a killed gen left: removed by the next gen when provably its
# own (the mark of this boot and PID namespace, a dead pid, untouched for a
# minute); others stay, among them one marked in another PID namespace
# (its pid means nothing here) and one of an older pinio's mark.
dead=$(sh -c 'echo $$')
mk() { # mk NAME MARK(none|here|otherns|old) AGE_SECONDS
    : >"$DIR/$1"
    python3 - "$DIR/$1" "$2" "$3" <<'PY'
import os, sys, time
p, mark, age = sys.argv[1], sys.argv[2], int(sys.argv[3])
boot = open("/proc/sys/kernel/random/boot_id").read().strip()
ns = os.stat("/proc/self/ns/pid").st_ino + (mark == "otherns")
if mark != "none":
    os.setxattr(p, "user.pinio.gen", b"1" if mark == "old" else b"boot=%s pidns=%d" % (boot.encode(), ns))
t = time.time() - age
os.utime(p, (t, t))
PY
}
mk "st.safetensors.tmp$dead" here 3600
mk "st.safetensors.tmp$((dead + 1000000))" none 3600
mk "st.safetensors.tmp$$" here 3600
mk "st.safetensors.tmp$((dead + 2000000))" here 0
mk "st.safetensors.tmp$((dead + 3000000))" otherns 3600
mk "st.safetensors.tmp$((dead + 4000000))" old 3600
check 0 "gen next to stale temporaries" "$PINIO" gen "$DIR/st.safetensors" --size 1K -q
[ -e "$DIR/st.safetensors.tmp$dead" ] && { echo "FAIL: a stale temporary of gen stayed"; fails=$((fails + 1)); }
for keep in "tmp$((dead + 1000000))" "tmp$$" "tmp$((dead + 2000000))" "tmp$((dead + 3000000))" \
    "tmp$((dead + 4000000))"; do
    [ -e "$DIR/st.safetensors.$keep" ] || { echo "FAIL: st.safetensors.$keep was removed"; fails=$((fails + 1)); }
done
check 1 "gen into a missing directory" "$PINIO" gen "$DIR/no/such/x.safetensors" --size 1K
# A FIFO named like a checkpoint: open() would wait for a writer forever
# (timeout's 124 fails the check); refused as not a regular file.
mkfifo "$DIR/fifo.safetensors"
check 1 "info on a FIFO" timeout 20 "$PINIO" info "$DIR/fifo.safetensors"
has "$DIR/err" "not a regular file" "info on a FIFO says why"

# pinio load with filters that select nothing fails and names the patterns;
# one that selects something still loads.
check 1 "load, no tensor matches" "$PINIO" load "$DIR/m.safetensors" --filter nope --filter 'x.*'
has "$DIR/err" "no tensor matches --filter 'nope', 'x.\*'" "the patterns are named"
[ "$(wc -l <"$DIR/err")" -eq 1 ] || { echo "FAIL: no-match error is not one line"; fails=$((fails + 1)); }
check 0 "load, a filter matches" "$PINIO" load --quiet "$DIR/m.safetensors" --filter nope \
    --filter model.layers.0

if [ "$fails" -ne 0 ]; then
    echo "$fails check(s) failed"
    exit 1
fi
echo "cli: all checks passed"
