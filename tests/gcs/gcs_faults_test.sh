#!/bin/sh
# gs:// under faults: pinio -> gcsproxy.py (the Google-side check of each
# request's HMAC signature) -> the tests' fault proxy (tests/s3/faultproxy.py)
# -> s3rver. Resets mid-body, short bodies, wrong Content-Range answers and
# a 200 with the whole object are retried (counted) and give the right
# bytes; Cloud Storage's throttling answers (429 with Retry-After and no
# error code, 503 with Retry-After) are retried, counted as throttled, and
# each waited at least its Retry-After (the waits pinio reckons, not a
# clock); lasting faults end after the bounded retries in one line naming
# the object; a 403 names the HMAC key by its last characters; an object
# replaced mid-load (a new ETag, another size, a 412 on If-Match, no ETag)
# is one error class naming the object, never mixed bytes, and a failed
# stage leaves nothing; SIGTERM ends a stage's retry storm at once (counted
# in requests, not seconds); neither the secret nor the whole access id
# appears in any output.
# usage: gcs_faults_test.sh PINIO SRC_ROOT
[ "${1:-}" = --help ] && { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0; }
PINIO=$1
SRC=$2
. "$SRC/tests/gcs/gcsenv.sh"
gcs_begin gcsfaults
UPSTREAM=$S3_URL

# 20 MiB: the data goes as two ranges and more, so a fault hits one of many.
"$PINIO" gen "$DIR/m.safetensors" --size 20M --seed 3 >/dev/null || exit 1
"$PINIO" gen "$DIR/other.safetensors" --size 20M --seed 4 >/dev/null || exit 1
"$PINIO" gen "$DIR/short.safetensors" --size 12M --seed 4 >/dev/null || exit 1
SUM=$(sha256sum "$DIR/m.safetensors" | cut -d' ' -f1)
URL=gs://models/m.safetensors
ID=GOOG1EPINIOFAULTSACCESSID000000000000000000000000000000009XK4
SECRET="pinio-faults-secret/$(head -c 18 /dev/urandom | base64 | tr '+/' 'xy')"
export GOOGLE_HMAC_ACCESS_ID=$ID GOOGLE_HMAC_SECRET=$SECRET

# proxy ARGS...: the original object again, faultproxy.py ARGS in front of
# s3rver, gcsproxy.py (checking the HMAC signature) in front of that, and
# pinio pointed at gcsproxy.py. The faults land behind the signature check,
# so a range the fault proxy changes cannot break a signature.
proxy() {
    s3_put models m.safetensors "$DIR/m.safetensors" || exit 1
    s3_proxy_start "$@"
    gcs_proxy "hmac:$ID:$SECRET" "$AWS_ENDPOINT_URL"
}
# run WANT WHAT CMD...: check(), every output kept for the secret check at the end.
run() {
    check "$@"
    cat "$DIR/out" "$DIR/err" >>"$DIR/all"
}
one_line() {
    [ "$(wc -l <"$DIR/err")" -eq 1 ] || { echo "FAIL: $1: not one line:"; cat "$DIR/err"; fails=$((fails + 1)); }
}
signed() { # WHAT: every request reached the proxy signed with the key
    if grep -q auth-bad "$DIR/gcs.log" || ! grep -q '^GET .* auth-ok' "$DIR/gcs.log"; then
        echo "FAIL: $1: requests gcsproxy.py refused, or none:"; cat "$DIR/gcs.log"; fails=$((fails + 1))
    fi
}

# Faults that heal: the right bytes, each fault retried and counted, every
# retry signed again.
while read -r fault n desc; do
    proxy --fault "$fault" --count "$n"
    run 0 "$desc x$n" "$PINIO" load "$URL" --sha256 "$SUM" --json
    json "$desc x$n: the bytes verified, the retries counted" \
        "j['verified'] and j['object_retry_count'] >= $n"
    signed "$desc"
done <<'CASES'
reset 2 a reset mid-body
short 2 a short body (the response cut)
badrange 2 a wrong Content-Range
wholebody 1 a 200 with the whole object
503 3 503 with Retry-After: 1
429 3 429 with Retry-After: 1
408 2 408 Request Timeout
CASES

# Throttling, Cloud Storage's way: 429 (the status alone, no error code)
# and 503, each with Retry-After: 2. Counted as throttled, and every retry
# waited at least that long: what pinio's backoff reckoned, from its JSON,
# not a clock.
for st in 429 503; do
    proxy --fault "$st" --count 3 --retry-after 2
    run 0 "$st x3, Retry-After: 2" "$PINIO" bench "$URL" --rw read --bs 1M --qd 4 --json
    json "$st x3: throttled, retried, each wait at least Retry-After" "j['s3']['retries'] == 3 \
and j['s3']['throttled'] == 3 and j['s3']['retry_wait_s'] >= 3 * 2"
done

# Faults that last: bounded retries, then one line naming the object. A
# reset reads as curl's partial file, reset by peer or receive failure,
# whichever the RST meets first (the recv, or the body's length check).
while read -r fault attempts msg; do
    proxy --fault "$fault" --count 0
    AWS_MAX_ATTEMPTS=$attempts run 1 "$fault every time" "$PINIO" load "$URL" --sha256 "$SUM"
    has "$DIR/err" "$URL.*after $attempts attempts.*$msg" "$fault: the retries ran out, said"
    one_line "$fault every time"
done <<'CASES'
badrange 3 Content-Range
reset 2 partial file\|reset by peer\|receiving data
503 2 HTTP 503 SlowDown
429 2 HTTP 429
CASES
proxy --fault 403
run 1 "403 on the data" "$PINIO" load "$URL"
has "$DIR/err" "$URL: access denied (403 AccessDenied) with an HMAC key (GOOGLE_HMAC_ACCESS_ID ...9XK4)" \
    "403 names the object and the key by its last characters"
one_line "403 on the data"

# One object version per load: the ETag of the first answer pinned with
# If-Match, every answer's checked. Whichever request sees the change
# first, one error class, one line, naming the object.
CHANGED="$URL.*object changed while loading (.*): its bytes would mix two versions"
while IFS='|' read -r what_ args; do
    # shellcheck disable=SC2086 # ARGS: the proxy's arguments, split
    proxy $args
    run 1 "$what_" "$PINIO" load "$URL"
    has "$DIR/err" "$CHANGED" "$what_: one error class"
    one_line "$what_"
done <<CASES
replaced by the same size|--fault replace --replace-with $DIR/other.safetensors
replaced by a shorter one|--fault replace --replace-with $DIR/short.safetensors
412 on If-Match|--fault 412
no ETag: Last-Modified pins it|--fault replace --replace-with $DIR/other.safetensors --strip etag
no validator in the GETs: checked after the reads|--fault replace --replace-with $DIR/other.safetensors --strip etag,last-modified --strip-from get
CASES
proxy --fault replace --replace-with "$DIR/other.safetensors"
run 1 "stage: the object replaced mid-stage" "$PINIO" stage "$URL" "$DIR/staged"
has "$DIR/err" "$CHANGED" "stage refuses the mixed object"
if [ -e "$DIR/staged" ] && [ -n "$(ls -A "$DIR/staged")" ]; then
    echo "FAIL: a failed stage left files:"; ls -A "$DIR/staged"; fails=$((fails + 1))
fi
proxy
run 0 "pinned by the ETag" "$PINIO" load "$URL" --json
json "pinned by the ETag: said" "j['object_pinned_by'] == 'etag'"

# A stop ends a retry storm at once: SIGTERM to stage while every ranged
# GET is a 503 with Retry-After: 1 (100 attempts allowed), from the
# header's (--skip 0) or from the data's (--skip 1). Not timed: pinio dies
# of the signal, leaves nothing, and the proxy sees no more than the
# requests that were in flight (16 at most) after it; retries that went on
# would be one a second per range until the 100 ran out.
for skip in 0 1; do
    proxy --fault 503 --skip $skip --count 0
    AWS_MAX_ATTEMPTS=100 "$PINIO" stage "$URL" "$DIR/staged-stop" >"$DIR/out" 2>"$DIR/err" &
    STAGE=$!
    s3_proxy_wait 503 2 # the storm has begun
    before=$(s3_proxy_faults 503)
    kill -TERM "$STAGE"
    wait "$STAGE"
    st=$?
    cat "$DIR/out" "$DIR/err" >>"$DIR/all"
    # What pinio sent before it died has been answered by now, or never will be.
    gcs_proxy_stop
    s3_proxy_stop
    after=$(($(s3_proxy_faults 503) - before))
    [ "$st" -eq 143 ] || { echo "FAIL: stage (--skip $skip) stopped by SIGTERM: exit $st, want 143"; cat "$DIR/err"; fails=$((fails + 1)); }
    [ "$after" -le 16 ] || { echo "FAIL: stage (--skip $skip) went on retrying after SIGTERM: $after more 503s"; fails=$((fails + 1)); }
    if [ -e "$DIR/staged-stop" ] && [ -n "$(ls -A "$DIR/staged-stop")" ]; then
        echo "FAIL: a stopped stage left files:"; ls -A "$DIR/staged-stop"; fails=$((fails + 1))
    fi
done

# No secret printed, anywhere: every output above, and the servers' own.
if grep -qF -- "$SECRET" "$DIR/all" || grep -qF -- "$ID" "$DIR/all"; then
    echo "FAIL: an output held the secret or the whole access id:"
    grep -nF -e "$SECRET" -e "$ID" "$DIR/all" | head -5; fails=$((fails + 1))
fi

gcs_cleanup
[ "$fails" -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "ok"
