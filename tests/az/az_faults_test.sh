#!/bin/sh
# az:// loads through the tests' fault proxy (tests/s3/faultproxy.py) between
# pinio and Azurite, the S3 path's fault rules for Azure: 503 ServerBusy with
# Retry-After, a reset mid-body, a short body and a wrong Content-Range are
# retried (counted) and give the right bytes; lasting ones end after the
# bounded retries in one line naming the blob; a 403 names the auth method;
# a blob replaced mid-load is "object changed while loading" (If-Match on
# its ETag); a blob is opened by one GET of its first 64 KiB, no HEAD
# (a small blob, a long header, an empty blob, a blob replaced before and
# after it); a List Blobs page cut short is refused naming the prefix;
# SIGTERM ends a stage's retry storm at once.
# usage: az_faults_test.sh PINIO SRC_ROOT
[ "${1:-}" = --help ] && { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0; }
PINIO=$1
SRC=$2
. "$SRC/tests/az/azenv.sh"
az_begin azfaults

# 20 MiB: the data goes as two ranges and more, so a fault hits one of many.
"$PINIO" gen "$DIR/m.safetensors" --size 20M --seed 3 >/dev/null || exit 1
"$PINIO" gen "$DIR/other.safetensors" --size 20M --seed 4 >/dev/null || exit 1
SUM=$(sha256sum "$DIR/m.safetensors" | cut -d' ' -f1)
URL=az://models/m.safetensors
one_line() {
    [ "$(wc -l <"$1")" -eq 1 ] || { echo "FAIL: $2: not one line:"; cat "$1"; fails=$((fails + 1)); }
}
az_tool put models flat/a.safetensors "$DIR/m.safetensors" || exit 1
az_tool put models flat/b.safetensors "$DIR/other.safetensors" || exit 1

proxy() {
    az_tool put models m.safetensors "$DIR/m.safetensors" || exit 1 # the original, again
    az_proxy_start "$@"
}

# Passing faults: the right bytes, each fault retried and counted.
while read -r fault n what; do
    proxy --fault "$fault" --count "$n"
    check 0 "$what x$n" "$PINIO" load "$URL" --sha256 "$SUM" --json
    json "$what x$n: the bytes verified, the retries counted" \
        "j['verified'] and j['object_retry_count'] >= $n"
done <<'CASES'
503 3 503 ServerBusy with Retry-After: 1
reset 2 a reset mid-body
short 2 a short body
badrange 2 a wrong Content-Range
CASES

# Faults that last: bounded retries (AWS_MAX_ATTEMPTS, the client's one
# knob for both stores), then one line naming the blob.
while read -r fault attempts want; do
    proxy --fault "$fault" --count 0
    AWS_MAX_ATTEMPTS=$attempts check 1 "$fault every time" "$PINIO" load "$URL" --sha256 "$SUM"
    has "$DIR/err" "$URL.*after $attempts attempts.*$want" "$fault: the retries ran out, said"
    one_line "$DIR/err" "$fault every time"
done <<'CASES'
badrange 3 Content-Range
503 2 503 ServerBusy
CASES
proxy --fault 403
check 1 "403 on the data" "$PINIO" load "$URL"
has "$DIR/err" "$URL: access denied (403 AccessDenied) with SharedKey of account $AZ_ACCOUNT" "403 names the blob and the method"

# One version per load: a blob replaced mid-load fails, never mixed bytes.
proxy --fault replace --replace-with "$DIR/other.safetensors"
check 1 "a blob replaced mid-load" "$PINIO" load "$URL" --sha256 "$SUM"
has "$DIR/err" "$URL.*object changed while loading (.*): its bytes would mix two versions" "the change named"
one_line "$DIR/err" "a blob replaced mid-load"
proxy --fault replace --replace-with "$DIR/other.safetensors"
check 1 "stage: the blob replaced mid-stage" "$PINIO" stage "$URL" "$DIR/staged"
has "$DIR/err" "object changed while loading" "stage: the change named"
[ ! -e "$DIR/staged" ] || [ -z "$(ls -A "$DIR/staged")" ] || { echo "FAIL: a failed stage left files"; ls -A "$DIR/staged"; fails=$((fails + 1)); }

# A blob is opened by one x-ms-range GET of its first 64 KiB, no HEAD
# (counted at the proxy); under 64 KiB, that is the whole load; a header
# past it costs one GET more, of its rest; an empty blob is one GET and a
# one-line error naming it; a blob replaced before the first GET loads whole
# as the new one, after it (before the header's rest) is a change.
"$PINIO" gen "$DIR/small.safetensors" --size 16K --seed 5 >/dev/null || exit 1
"$PINIO" gen "$DIR/long.safetensors" --size 8M --tensors 2000 --seed 6 >/dev/null || exit 1
"$PINIO" gen "$DIR/long2.safetensors" --size 8M --tensors 2000 --seed 7 >/dev/null || exit 1
: >"$DIR/empty.safetensors"
for f in small long empty; do az_tool put models $f.safetensors "$DIR/$f.safetensors" || exit 1; done
LONG_END=$(python3 -c "import struct,sys; print(8 + struct.unpack('<Q', open(sys.argv[1], 'rb').read(8))[0])" \
    "$DIR/long.safetensors")
proxy --stats "$DIR/stats.json"
check 0 "counted" "$PINIO" load "$URL" --sha256 "$SUM" --json
s3_proxy_counted "a load: no HEAD, the first GET bytes 0-65535, every request the report's" \
    "s['heads'] == 0 and s['ranges'][0] == [0, 65535] and s['requests'] == s['gets'] == \
     j['object_request_count']"
proxy --stats "$DIR/stats.json"
check 0 "a blob under 64 KiB" "$PINIO" load az://models/small.safetensors --json \
    --sha256 "$(sha256sum "$DIR/small.safetensors" | cut -d' ' -f1)"
s3_proxy_counted "a blob under 64 KiB: one request" "s['requests'] == 1 and j['object_request_count'] == 1"
proxy --stats "$DIR/stats.json"
check 0 "a header past 64 KiB" "$PINIO" load az://models/long.safetensors --json \
    --sha256 "$(sha256sum "$DIR/long.safetensors" | cut -d' ' -f1)"
s3_proxy_counted "a header past 64 KiB: one GET more, of its rest" \
    "s['heads'] == 0 and s['ranges'][:2] == [[0, 65535], [65536, $LONG_END - 1]] and \
     all(a >= $LONG_END for a, b in s['ranges'][2:])"
proxy --stats "$DIR/stats.json"
check 1 "an empty blob" "$PINIO" load az://models/empty.safetensors
has "$DIR/err" "az://models/empty.safetensors.*the file is 0 bytes" "an empty blob: named"
one_line "$DIR/err" "an empty blob"
s3_proxy_counted "an empty blob: one GET" "s['requests'] == s['gets'] == 1"
proxy --fault replace --skip 0 --replace-with "$DIR/other.safetensors"
check 0 "replaced before the first GET" "$PINIO" load "$URL" \
    --sha256 "$(sha256sum "$DIR/other.safetensors" | cut -d' ' -f1)"
az_tool put models long.safetensors "$DIR/long.safetensors" || exit 1
az_proxy_start --fault replace --skip 1 --replace-with "$DIR/long2.safetensors"
check 1 "replaced before the header's rest" "$PINIO" load az://models/long.safetensors
has "$DIR/err" "az://models/long.safetensors.*object changed while loading (" "the header's rest pinned"
one_line "$DIR/err" "replaced before the header's rest"

# A listing page cut short is refused, never read as the last page.
proxy --fault listcut
check 1 "a List Blobs page cut short" "$PINIO" load az://models/flat/
has "$DIR/err" "az://models/flat/: the store's answer to List Blobs (page 1) is not a complete listing" "the cut page refused"

# A stop ends a retry storm at once: SIGTERM to stage while every ranged GET
# of the data answers 503 with Retry-After: 1 (100 attempts allowed). Judged
# by the requests, not the clock: after the signal no more than the ranges
# then in flight (16 at most) reach the proxy, where the storm would go on
# for a hundred more rounds.
proxy --fault 503 --count 0
AWS_MAX_ATTEMPTS=100 "$PINIO" stage "$URL" "$DIR/staged-stop" >"$DIR/out" 2>"$DIR/err" &
STAGE=$!
i=0 # the storm has begun once the proxy injected two faults
while [ $i -lt 600 ] && [ "$(grep -c '^fault 503' "$DIR/proxy.err")" -lt 2 ]; do sleep 0.1; i=$((i + 1)); done
before=$(grep -c '^fault 503' "$DIR/proxy.err")
kill -TERM "$STAGE"
wait "$STAGE"
st=$?
after=$(grep -c '^fault 503' "$DIR/proxy.err")
[ "$st" -eq 143 ] || { echo "FAIL: stage stopped by SIGTERM: exit $st, want 143 (the signal)"; cat "$DIR/err"; fails=$((fails + 1)); }
[ $((after - before)) -le 16 ] || { echo "FAIL: $((after - before)) requests after SIGTERM: the retries went on"; fails=$((fails + 1)); }
if [ -e "$DIR/staged-stop" ] && [ -n "$(ls -A "$DIR/staged-stop")" ]; then
    echo "FAIL: a stopped stage left files:"; ls -A "$DIR/staged-stop"; fails=$((fails + 1))
fi

az_cleanup
[ "$fails" -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "ok"
