#!/bin/sh
# az:// loads through the tests' fault proxy (tests/s3/faultproxy.py) between
# pinio and Azurite, the S3 path's fault rules for Azure: 503 ServerBusy with
# Retry-After, a reset mid-body, a short body and a wrong Content-Range are
# retried (counted) and give the right bytes; lasting ones end after the
# bounded retries in one line naming the blob; a 403 names the auth method;
# a blob replaced mid-load is "object changed while loading" (If-Match on
# its ETag); a List Blobs page cut short is refused naming the prefix;
# SIGTERM ends a stage's retry storm at once.
# usage: az_faults_test.sh PINIO SRC_ROOT
[ "${1:-}" = --help ] && { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0; }
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
