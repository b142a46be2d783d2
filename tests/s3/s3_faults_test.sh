#!/bin/sh
# s3:// loads through a fault proxy of the tests' own (faultproxy.py) between
# pinio and s3rver: latency per request, 503 SlowDown with Retry-After, a
# reset mid-body, a short body, a wrong Content-Range, a 200 with the whole
# object, 403, 412, an object replaced mid-load (by one of the same size or
# another, from a store that sends ETags, only Last-Modified, or neither),
# escapes in an ETag, huge response headers, one range held back while the
# others must go on. Each case: the bytes are the
# local file's (--sha256) after retries that the JSON counts, or the load
# fails with the right one-line error; a failed stage leaves nothing behind.
# A replaced object is one error class whichever request sees it first. A
# --verify load's rereads share the load's connections and are counted.
# SIGTERM ends a stage's retry storm at once.
# usage: s3_faults_test.sh PINIO SRC_ROOT
[ "${1:-}" = --help ] && { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0; }
PINIO=$1
SRC=$2
. "$SRC/tests/s3/s3env.sh"
s3_test s3faults models
UPSTREAM=$AWS_ENDPOINT_URL

# 20 MiB: the data goes as two ranges and more, so a fault hits one of many.
"$PINIO" gen "$DIR/m.safetensors" --size 20M --seed 3 >/dev/null || exit 1
"$PINIO" gen "$DIR/other.safetensors" --size 20M --seed 4 >/dev/null || exit 1
[ "$(stat -c %s "$DIR/m.safetensors")" = "$(stat -c %s "$DIR/other.safetensors")" ] ||
    { echo "FAIL: the replacement must have the same size"; exit 1; }
"$PINIO" gen "$DIR/short.safetensors" --size 12M --seed 4 >/dev/null || exit 1
SUM=$(sha256sum "$DIR/m.safetensors" | cut -d' ' -f1)
URL=s3://models/m.safetensors

# proxy ARGS...: (re)starts the proxy in front of s3rver; pinio talks to it.
proxy() {
    s3_put models m.safetensors "$DIR/m.safetensors" || exit 1 # the original, again
    s3_proxy_start "$@"
}

# ok_with_retries WHAT MIN: the load gave the right bytes after >= MIN retries.
ok_with_retries() {
    check 0 "$1" "$PINIO" load "$URL" --sha256 "$SUM" --json
    json "$1: retries counted" "j['verified'] and j['object_retry_count'] >= $2"
}

proxy --latency 20
ok_with_retries "20 ms per request" 0
# pinio opens its 16 connections at once: the proxy's listen queue must take
# them all (a listening socket's Send-Q is its backlog), or the SYNs past it
# are dropped and retried a second later, and every load through the proxy
# measures that second.
if command -v ss >/dev/null 2>&1; then
    backlog=$(ss -Hltn "sport = :${AWS_ENDPOINT_URL##*:}" | awk '{ print $3 }')
    [ "${backlog:-0}" -ge 16 ] ||
        { echo "FAIL: the proxy's listen backlog is ${backlog:-unknown}, under pinio's 16 connections"; fails=$((fails + 1)); }
fi
proxy --fault 503 --count 3
ok_with_retries "503 SlowDown x3, Retry-After: 1" 3
proxy --fault reset --count 2
ok_with_retries "a reset mid-body x2" 2
proxy --fault short --count 2
ok_with_retries "a short body x2" 2
proxy --fault badrange --count 2
ok_with_retries "a wrong Content-Range x2" 2
proxy --fault wholebody --count 1
ok_with_retries "200 with the whole object" 1

# Faults that last: bounded retries, then one line naming the object.
proxy --fault badrange --count 0
AWS_MAX_ATTEMPTS=3 check 1 "a wrong Content-Range every time" "$PINIO" load "$URL" --sha256 "$SUM"
has "$DIR/err" "s3://models/m.safetensors.*after 3 attempts.*Content-Range" "the last wrong range named"
[ "$(wc -l <"$DIR/err")" -eq 1 ] || { echo "FAIL: not one line:"; cat "$DIR/err"; fails=$((fails + 1)); }
proxy --fault 503 --count 0
AWS_MAX_ATTEMPTS=2 check 1 "503 every time" "$PINIO" load "$URL"
has "$DIR/err" "s3://models/m.safetensors.*after 2 attempts.*503 SlowDown" "the retries ran out"
proxy --fault 403
check 1 "403 on the data" "$PINIO" load "$URL"
has "$DIR/err" "s3://models/m.safetensors.*access denied (403 AccessDenied)" "403 names bucket and key"

# One version per load: a replaced object is never mixed bytes. Which
# request sees the change first (a new ETag or Last-Modified, another size,
# a 412, a 416, or the check after the reads) is a race: each is the one
# class, one line, whatever the store sends to pin the version.
CHANGED="s3://models/m.safetensors.*object changed while loading (.*): its bytes would mix two versions"
one_line() {
    [ "$(wc -l <"$DIR/err")" -eq 1 ] || { echo "FAIL: $1: not one line:"; cat "$DIR/err"; fails=$((fails + 1)); }
}
changed() { # CASE PROXY-ARGS...: the load fails as a replaced object
    case_=$1; shift
    proxy "$@"
    check 1 "$case_" "$PINIO" load "$URL"
    has "$DIR/err" "$CHANGED" "$case_: one error class"
    one_line "$case_"
}
changed "replaced by the same size" --fault replace --replace-with "$DIR/other.safetensors"
changed "replaced by a shorter one" --fault replace --replace-with "$DIR/short.safetensors"
changed "412 on If-Match" --fault 412
changed "no ETag: Last-Modified pins it" --fault replace --replace-with "$DIR/other.safetensors" \
    --strip etag
changed "no ETag, a shorter one" --fault replace --replace-with "$DIR/short.safetensors" --strip etag
changed "no validator in the GETs: checked after the reads" --fault replace \
    --replace-with "$DIR/other.safetensors" --strip etag,last-modified --strip-from get
changed "no validator at all, a shorter one" --fault replace --replace-with "$DIR/short.safetensors" \
    --strip etag,last-modified
changed "an ETag with terminal escapes" --fault escetag
if grep -q "$(printf '\033')" "$DIR/err" || ! grep -qF '\x1b[2J' "$DIR/err"; then
    echo "FAIL: the store's ETag reached the message unescaped:"; cat -v "$DIR/err"; fails=$((fails + 1))
fi
proxy --fault replace --replace-with "$DIR/other.safetensors"
check 1 "stage: the object replaced mid-stage" "$PINIO" stage "$URL" "$DIR/staged"
has "$DIR/err" "$CHANGED" "stage refuses the mixed object"
if [ -e "$DIR/staged" ] && [ -n "$(ls -A "$DIR/staged")" ]; then
    echo "FAIL: a failed stage left files:"; ls -A "$DIR/staged"; fails=$((fails + 1))
fi

# What pinned the version, said in the report; nothing but the size: --verify refused.
pinned() { # BY PROXY-ARGS... (check() owns $want and $what)
    by=$1; shift
    proxy "$@"
    check 0 "pinned by $by" "$PINIO" load "$URL" --json
    json "pinned by $by: said" "j['object_pinned_by'] == '$by' and '$by' in j['io_path'].lower()"
}
pinned etag
pinned last-modified --strip etag
pinned size --strip etag,last-modified
check 1 "--verify with nothing to pin the version" "$PINIO" load "$URL" --verify
has "$DIR/err" "s3://models/m.safetensors.*--verify refused: .*neither an ETag nor a Last-Modified" \
    "--verify refused"
one_line "--verify refused"

# A response header past any S3 store's: refused as such, naming the endpoint.
for f in bigheader manyheaders; do
    proxy --fault $f
    check 1 "$f" "$PINIO" load "$URL"
    has "$DIR/err" "s3://models/m.safetensors.*response header larger than .* from http://127.0.0.1:" \
        "$f: said"
    one_line "$f"
done

# --verify of a filtered load reads the unselected 35 MiB again: on the
# load's connections (--qd 2: two at most) and counted, request by request.
"$PINIO" gen "$DIR/big.safetensors" --size 40M --seed 5 --tensors 8 >/dev/null || exit 1
s3_put models big.safetensors "$DIR/big.safetensors" || exit 1
BIGSUM=$(sha256sum "$DIR/big.safetensors" | cut -d' ' -f1)
proxy --stats "$DIR/stats.json"
check 0 "--verify of a filtered load" "$PINIO" load s3://models/big.safetensors --qd 2 --json \
    --filter model.layers.0.input_layernorm.weight --verify --sha256 "$BIGSUM"
cp "$DIR/out" "$DIR/load.json"
json "the rereads came" "j['verified'] and j['verify_reread_bytes'] > 30 << 20"
python3 -c "
import json, sys
j, s = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert j['object_request_count'] == s['requests'], ('requests', j['object_request_count'], s)
assert s['connections'] <= 2, ('connections', s)
" "$DIR/load.json" "$DIR/stats.json" ||
    { echo "FAIL: the report's requests are the proxy's, on 2 connections at most"; fails=$((fails + 1)); }
# The same rereads from a store whose GETs carry no validator, the object
# replaced before the first of them (the third ranged GET): the rereads
# cannot confirm the version, so it is asked again, and the load fails.
"$PINIO" gen "$DIR/big2.safetensors" --size 40M --seed 6 --tensors 8 >/dev/null || exit 1
s3_put models big.safetensors "$DIR/big.safetensors" || exit 1
proxy --fault replace --skip 2 --replace-with "$DIR/big2.safetensors" --strip etag,last-modified \
    --strip-from get
check 1 "--verify's rereads of a replaced object" "$PINIO" load s3://models/big.safetensors \
    --qd 2 --filter model.layers.0.input_layernorm.weight --verify
has "$DIR/err" "s3://models/big.safetensors.*object changed while loading (" "the rereads' change"
one_line "--verify's rereads of a replaced object"

# Stage through faults that heal: identical file.
proxy --fault reset --count 1
check 0 "stage through a reset" "$PINIO" stage "$URL" "$DIR/staged2" --verify
cmp -s "$DIR/m.safetensors" "$DIR/staged2/m.safetensors" || { echo "FAIL: staged file differs"; fails=$((fails + 1)); }

# Ranges stay in flight across what were batch ends: one data range held
# back by the proxy, stage (1 MiB slots, 32 of them) goes on fetching the
# reads after it. The proxy lets the range go once the object has seen 28
# ranged GETs, or gives up after 120 s; a batch (16 reads of 1 MiB, after
# the header's GET) could never get past 17 while one of its ranges was
# out, unless pinio gave the held range up as stalled (30 s) and asked for
# it again, which the proxy counts. A count of requests, not a time.
s3_put models big.safetensors "$DIR/big.safetensors" || exit 1
proxy --fault hold --hold-until 28
check 0 "stage with one range held" "$PINIO" stage s3://models/big.safetensors "$DIR/staged-held" \
    --staging 1Mx32
grep -q "^hold released after [0-9]*, asked again 0 times" "$DIR/proxy.err" ||
    { echo "FAIL: the other ranges stopped while one was held:"; grep "^hold" "$DIR/proxy.err"; fails=$((fails + 1)); }
cmp -s "$DIR/big.safetensors" "$DIR/staged-held/big.safetensors" ||
    { echo "FAIL: the file staged with a range held differs"; fails=$((fails + 1)); }

# A stop ends a retry storm at once: SIGTERM to stage while every ranged GET
# is a 503 with Retry-After: 1 (100 attempts: its 120 s retry budget), from
# the header's (--skip 0: the plan's) or from the data's (--skip 1). It dies
# of the signal well within that budget (the bound is loose on purpose: a
# busy machine), its temporaries gone.
for skip in 0 1; do
    proxy --fault 503 --skip $skip --count 0
    AWS_MAX_ATTEMPTS=100 "$PINIO" stage "$URL" "$DIR/staged-stop" >"$DIR/out" 2>"$DIR/err" &
    STAGE=$!
    i=0 # the storm has begun once the proxy injected two faults
    while [ $i -lt 600 ] && [ "$(grep -c '^fault 503' "$DIR/proxy.err")" -lt 2 ]; do
        sleep 0.1; i=$((i + 1))
    done
    t0=$(date +%s)
    kill -TERM "$STAGE"
    wait "$STAGE"
    st=$?
    took=$(($(date +%s) - t0))
    [ "$st" -eq 143 ] || { echo "FAIL: stage (--skip $skip) stopped by SIGTERM: exit $st, want 143 (the signal)"; cat "$DIR/err"; fails=$((fails + 1)); }
    [ "$took" -lt 30 ] || { echo "FAIL: stage (--skip $skip) took $took s to stop on SIGTERM (its retries: up to 120 s)"; fails=$((fails + 1)); }
    if [ -e "$DIR/staged-stop" ] && [ -n "$(ls -A "$DIR/staged-stop")" ]; then
        echo "FAIL: a stopped stage left files:"; ls -A "$DIR/staged-stop"; fails=$((fails + 1))
    fi
done

s3_proxy_stop
s3_cleanup
[ "$fails" -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "ok"
