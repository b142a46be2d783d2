#!/bin/sh
# Node-local sharing of s3:// objects (issue 40) against s3rver, through
# faultproxy.py, whose stats count the GET body bytes the store sent: three
# processes loading one object at once get every byte right and the store
# sends its data once (each process still fetches the header it plans
# from: exact counts below); an object replaced between two loads (another
# ETag) is fetched again, never shared, with the new bytes; a store that
# sends no ETag loads privately, said; nothing is left in the segment folder.
# usage: s3_share_test.sh PINIO SRC_ROOT SHARE_LOAD
[ "${1:-}" = --help ] && { sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0; }
PINIO=$1
SRC=$2
LOADER=$3
. "$SRC/tests/s3/s3env.sh"
s3_scratch s3share || exit 1
s3_start || { s3_cleanup; exit 1; }
SEGS=$(mktemp -d "/dev/shm/pinio-${PINIO_TEST_RUN:-p$$}-s3share-XXXXXX") || exit 1
S3_EXTRA_CLEAN="$DIR $SEGS"
trap 's3_proxy_stop; s3_cleanup' EXIT
export PINIO_SHARE_DIR="$SEGS"
unset PINIO_SHARE SHARE_TEST_AT SHARE_TEST_HOLD
# The segment made at once: the second load below starts once the first has
# finished (a reader alone by default reads privately and makes none).
export PINIO_SHARE=eager
s3_bucket models || exit 1
UPSTREAM=$AWS_ENDPOINT_URL
URL=s3://models/m.safetensors

"$PINIO" gen "$DIR/m.safetensors" --size 24M --tensors 12 --seed 1 >/dev/null || exit 1
"$PINIO" gen "$DIR/new.safetensors" --size 24M --tensors 12 --seed 2 >/dev/null || exit 1
[ "$(stat -c %s "$DIR/m.safetensors")" = "$(stat -c %s "$DIR/new.safetensors")" ] ||
    { echo "FAIL: the replacement must have the same size"; exit 1; }
s3_put models m.safetensors "$DIR/m.safetensors" || exit 1
s3_proxy_start --stats "$DIR/stats.json"

# sent: the GET body bytes the store sent so far.
sent() { /usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["get_bytes"])' "$DIR/stats.json" 2>/dev/null || echo 0; }
empty() {
    left=$(ls -A "$SEGS")
    [ -z "$left" ] || { echo "FAIL: $1: left behind in $SEGS: $left"; fails=$((fails + 1)); rm -f "$SEGS"/*; }
}
# until_reached FILE PID: waits for share_load's FILE.reached while PID lives.
until_reached() { while [ ! -e "$1.reached" ] && kill -0 "$2" 2>/dev/null; do sleep 0.05; done; }

# One private load: what the store sends for it (header and data).
b0=$(sent)
check 0 "a private load" "$LOADER" "$URL" off
has "$DIR/out" "share=private: sharing off" "the private load says so"
ONE=$(($(sent) - b0))
[ "$ONE" -gt 24000000 ] || { echo "FAIL: a private load fetched $ONE bytes"; fails=$((fails + 1)); }

# A load that finds the object's segment complete: what it fetches is the
# header alone (HDR), the part every process plans from.
rm -f "$DIR"/hold*
SHARE_TEST_HOLD="$DIR/holda" "$LOADER" "$URL" >"$DIR/a.out" 2>&1 &
a=$!
until_reached "$DIR/holda" "$a"
has "$DIR/a.out" "share=read here" "the first load reads for the others"
b0=$(sent)
check 0 "a load of a complete segment" "$LOADER" "$URL"
has "$DIR/out" "read_bytes=0 shared=1" "the second load maps the segment"
HDR=$(($(sent) - b0))
[ "$HDR" -gt 0 ] && [ "$HDR" -lt $((ONE / 10)) ] ||
    { echo "FAIL: a sharer fetched $HDR bytes, the header's part of $ONE"; fails=$((fails + 1)); }

# --- the object replaced while the first load holds its segment: the next
# load fetches it whole, reads the new bytes (share_load checks them against
# seed 2) and shares nothing with the old.
s3_put models m.safetensors "$DIR/new.safetensors" || exit 1
b0=$(sent)
check 0 "a load of the replaced object" "$LOADER" "$URL"
has "$DIR/out" "share=read here" "the replaced object is read, not shared"
got=$(($(sent) - b0))
[ "$got" = "$ONE" ] || { echo "FAIL: the replaced object's load fetched $got bytes, want $ONE"; fails=$((fails + 1)); }
touch "$DIR/holda"
wait "$a" || { echo "FAIL: the first load: $(cat "$DIR/a.out")"; fails=$((fails + 1)); }
empty "replaced"

# --- three at once: the data once, the header three times, every byte right
# (each holds its checkpoint until all have loaded: a late starter on a busy
# machine still finds the others' segment).
rm -f "$DIR"/hold*
b0=$(sent)
pids=
for i in 1 2 3; do
    SHARE_TEST_HOLD="$DIR/hold$i" "$LOADER" "$URL" >"$DIR/t$i.out" 2>&1 &
    pids="$pids $!"
done
i=1
for p in $pids; do until_reached "$DIR/hold$i" "$p"; i=$((i + 1)); done
touch "$DIR/hold1" "$DIR/hold2" "$DIR/hold3"
i=1
for p in $pids; do
    wait "$p" || { echo "FAIL: loader $i of 3: $(cat "$DIR/t$i.out")"; fails=$((fails + 1)); }
    i=$((i + 1))
done
got=$(($(sent) - b0))
[ "$got" = "$((ONE + 2 * HDR))" ] ||
    { echo "FAIL: 3 at once fetched $got bytes, want $ONE + 2 x $HDR"; fails=$((fails + 1)); }
[ "$(grep -l "share=read here" "$DIR"/t?.out | wc -l)" = 1 ] ||
    { echo "FAIL: 3 at once: not exactly one reader:"; cat "$DIR"/t?.out; fails=$((fails + 1)); }
empty "3 at once"

# --- a store that sends no ETag: nothing names the version, so no segment.
s3_proxy_start --strip etag
check 0 "a load without an ETag" "$LOADER" "$URL"
has "$DIR/out" "share=private: an object the store sent no ETag for" "no ETag is said"
empty "no ETag"

s3_proxy_stop
[ "$fails" -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "ok"
