#!/bin/sh
# How an s3:// object is opened: one ranged GET of its first 64 KiB, no
# HEAD, counted request by request at the tests' proxy (faultproxy.py
# --stats: HEADs, GETs, each range asked). A load, an info and a stage send
# no HEAD, the first GET asks bytes 0-65535 and no byte is asked twice; an
# object smaller than that is one request in all; a header longer than it
# costs exactly one GET more (the rest of the header), byte-exact; an empty
# object is one GET and a one-line error naming it. The first GET's faults
# (503, a wrong Content-Range, a 200 with the whole object) are retried as
# any range's; an object replaced before the first GET loads whole as the
# new version, one replaced after it (before the rest of a long header, or
# before the data) is "object changed while loading".
# usage: s3_open_test.sh PINIO SRC_ROOT
[ "${1:-}" = --help ] && { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0; }
PINIO=$1
SRC=$2
. "$SRC/tests/s3/s3env.sh"
s3_test s3open models
UPSTREAM=$AWS_ENDPOINT_URL

"$PINIO" gen "$DIR/m.safetensors" --size 20M --seed 3 >/dev/null || exit 1
"$PINIO" gen "$DIR/other.safetensors" --size 20M --seed 4 >/dev/null || exit 1
"$PINIO" gen "$DIR/small.safetensors" --size 16K --seed 5 >/dev/null || exit 1
# 2000 tensors: a header of some 210 KB, past the first GET's 64 KiB.
"$PINIO" gen "$DIR/long.safetensors" --size 8M --tensors 2000 --seed 6 >/dev/null || exit 1
"$PINIO" gen "$DIR/long2.safetensors" --size 8M --tensors 2000 --seed 7 >/dev/null || exit 1
: >"$DIR/empty.safetensors"
for f in m small long empty; do
    s3_put models $f.safetensors "$DIR/$f.safetensors" || exit 1
done
sum() { sha256sum "$DIR/$1.safetensors" | cut -d' ' -f1; }
# The header's end: 8 + its length, as the file says it.
hend() {
    python3 -c "import struct,sys; print(8 + struct.unpack('<Q', open(sys.argv[1], 'rb').read(8))[0])" \
        "$DIR/$1.safetensors"
}

# No byte asked twice: the ranges, sorted, do not overlap.
DISJOINT="all(a[1] < b[0] for a, b in zip(sorted(s['ranges']), sorted(s['ranges'])[1:]))"

s3_proxy_start --stats "$DIR/stats.json"
check 0 "load" "$PINIO" load s3://models/m.safetensors --sha256 "$(sum m)" --json
json "load: verified" "j['verified']"
s3_proxy_counted "load: no HEAD, the first GET bytes 0-65535, one request per range" \
    "s['heads'] == 0 and s['ranges'][0] == [0, 65535] and s['gets'] == s['requests'] \
     == len(s['ranges']) == j['object_request_count'] and $DISJOINT"

s3_proxy_start --stats "$DIR/stats.json"
check 0 "info" "$PINIO" info s3://models/m.safetensors
s3_proxy_counted "info: one GET" "s['requests'] == s['gets'] == 1 and s['ranges'] == [[0, 65535]]"

s3_proxy_start --stats "$DIR/stats.json"
check 0 "stage" "$PINIO" stage s3://models/m.safetensors "$DIR/staged"
cmp -s "$DIR/m.safetensors" "$DIR/staged/m.safetensors" ||
    { echo "FAIL: the staged file differs"; fails=$((fails + 1)); }
s3_proxy_counted "stage: no HEAD, no byte twice" "s['heads'] == 0 and s['ranges'][0] == [0, 65535] and $DISJOINT"

s3_proxy_start --stats "$DIR/stats.json"
check 0 "an object under 64 KiB" "$PINIO" load s3://models/small.safetensors \
    --sha256 "$(sum small)" --json
json "an object under 64 KiB: verified" "j['verified']"
s3_proxy_counted "an object under 64 KiB: one request in all" \
    "s['requests'] == 1 and s['ranges'] == [[0, 65535]] and j['object_request_count'] == 1"

LONG_END=$(hend long)
[ "$LONG_END" -gt 65536 ] || { echo "FAIL: long.safetensors' header ends at $LONG_END, within 64 KiB"; fails=$((fails + 1)); }
s3_proxy_start --stats "$DIR/stats.json"
check 0 "a header past 64 KiB" "$PINIO" load s3://models/long.safetensors --sha256 "$(sum long)" --json
json "a header past 64 KiB: verified" "j['verified']"
s3_proxy_counted "a header past 64 KiB: one GET more, of the header's rest" \
    "s['heads'] == 0 and s['ranges'][:2] == [[0, 65535], [65536, $LONG_END - 1]] and \
     all(a >= $LONG_END for a, b in s['ranges'][2:]) and $DISJOINT and \
     s['requests'] == j['object_request_count']"

s3_proxy_start --stats "$DIR/stats.json"
check 1 "an empty object" "$PINIO" load s3://models/empty.safetensors
has "$DIR/err" "^pinio load: s3://models/empty.safetensors: HeaderTooSmall: the file is 0 bytes" "an empty object: named"
[ "$(wc -l <"$DIR/err")" -eq 1 ] || { echo "FAIL: an empty object: not one line:"; cat "$DIR/err"; fails=$((fails + 1)); }
s3_proxy_counted "an empty object: one GET" "s['requests'] == s['gets'] == 1"

# The first GET's faults: retried as any range's, then the right bytes.
while read -r fault n obj case_; do
    s3_proxy_start --stats "$DIR/stats.json" --fault "$fault" --skip 0 --count "$n"
    check 0 "first GET: $case_" "$PINIO" load s3://models/$obj.safetensors --sha256 "$(sum $obj)" --json
    json "first GET: $case_: verified, retried" "j['verified'] and j['object_retry_count'] >= $n"
    s3_proxy_counted "first GET: $case_: no HEAD" "s['heads'] == 0"
done <<'CASES'
503 2 m 503 SlowDown x2
badrange 1 m a wrong Content-Range
wholebody 1 m a 200 with the whole object
CASES
# A 200 with the whole of an object under 64 KiB is that object: no retry.
s3_proxy_start --stats "$DIR/stats.json" --fault wholebody --skip 0
check 0 "first GET: a 200 with the whole small object" "$PINIO" load s3://models/small.safetensors \
    --sha256 "$(sum small)" --json
json "first GET: a 200 with the whole small object: taken" "j['verified'] and j['object_retry_count'] == 0"

# Replaced before the first GET: that version, whole. After it: one error class.
CHANGED="object changed while loading (.*): its bytes would mix two versions"
s3_proxy_start --fault replace --skip 0 --replace-with "$DIR/other.safetensors"
check 0 "replaced before the first GET" "$PINIO" load s3://models/m.safetensors --sha256 "$(sum other)"
s3_put models m.safetensors "$DIR/m.safetensors" || exit 1
s3_proxy_start --fault replace --skip 1 --replace-with "$DIR/other.safetensors"
check 1 "replaced between the first GET and the data" "$PINIO" load s3://models/m.safetensors
has "$DIR/err" "s3://models/m.safetensors.*$CHANGED" "replaced before the data: one error class"
s3_proxy_start --fault replace --skip 1 --replace-with "$DIR/long2.safetensors"
check 1 "replaced before the header's rest" "$PINIO" load s3://models/long.safetensors
has "$DIR/err" "s3://models/long.safetensors.*$CHANGED" "replaced before the header's rest: one error class"
[ "$(wc -l <"$DIR/err")" -eq 1 ] || { echo "FAIL: replaced before the header's rest: not one line:"; cat "$DIR/err"; fails=$((fails + 1)); }

s3_proxy_stop
s3_cleanup
[ "$fails" -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "ok"
