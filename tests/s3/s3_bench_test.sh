#!/bin/sh
# pinio bench on an object (s3://BUCKET/KEY) against s3rver on loopback:
# read and randread at two depths, one job and two, and from a job file:
# the JSON matches doc/json/bench.schema.json, moves exactly the object's
# bytes in size/bs requests, with ordered percentiles; through the fault
# proxy, 503 SlowDown, resets, short bodies and wrong ranges are retried,
# counted, and the run succeeds; an object replaced mid-run (pinned by its
# ETag or Last-Modified, or by its size alone or by answers without a
# validator: checked again after the run, as a load does) fails as
# changed, and the JSON says what pinned it; writes and trims are refused
# before anything is sent; a missing object or bucket is named; no
# credential appears in any output.
# usage: s3_bench_test.sh PINIO SRC_ROOT
[ "${1:-}" = --help ] && { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0; }
PINIO=$1
SRC=$2
. "$SRC/tests/s3/s3env.sh"
s3_test s3bench bench
UPSTREAM=$AWS_ENDPOINT_URL
SIZE=$((16 << 20))
BS=$((1 << 20))
head -c $SIZE /dev/urandom >"$DIR/obj" || exit 1
head -c $SIZE /dev/urandom >"$DIR/other" || exit 1
s3_put bench obj "$DIR/obj" || exit 1
URL=s3://bench/obj

# valid WHAT: $DIR/out is one JSON object matching the bench schema.
valid() {
    /usr/bin/python3 "$SRC/tests/tools/json_validate.py" "$SRC/doc/json" bench "$DIR/out" ||
        { echo "FAIL: $1: the JSON does not match the schema"; fails=$((fails + 1)); }
}
# moved WHAT JOBS: the whole object in SIZE/BS ranged GETs, no retry, the
# percentiles ordered, the object's own size and the features of HTTP.
moved() {
    json "$1: bytes, requests, percentiles" "j['bytes'] == $SIZE and j['ios'] == $SIZE // $BS \
and j['read']['bytes'] == $SIZE and j['write']['ios'] == 0 and j['s3']['requests'] == $SIZE // $BS \
and j['s3']['retries'] == 0 and j['s3']['object_size_bytes'] == $SIZE and j['s3']['etag'] \
and j['s3']['endpoint'] == '$UPSTREAM' and j['files'][0]['size_bytes'] == $SIZE \
and j['s3']['object_pinned_by'] == 'etag' \
and not j['created'] and 's3_range_get' in j['features'] and j['jobs'] == $2 \
and j['lat_ns']['count'] == $SIZE // $BS and 0 < j['lat_ns']['min'] <= j['lat_ns']['p50'] \
<= j['lat_ns']['p90'] <= j['lat_ns']['p99'] <= j['lat_ns']['p99_9'] <= j['lat_ns']['max'] \
and j['clat_ns']['count'] == j['slat_ns']['count'] == $SIZE // $BS"
}

# --- read and randread at two depths, one job and two --------------------
for rw in read randread; do
    for qd in 1 8; do
        check 0 "bench $rw --qd $qd" "$PINIO" bench "$URL" --rw $rw --bs 1M --qd $qd --json
        valid "bench $rw --qd $qd"
        moved "bench $rw --qd $qd" 1
        json "bench $rw --qd $qd: the workload as asked" "j['rw'] == '$rw' and j['qd'] == $qd"
    done
done
check 0 "bench --jobs 2 --engine s3" "$PINIO" bench --engine s3 --file "$URL" --rw randread \
    --bs 1M --qd 4 --jobs 2 --json --percentile-list 50:99.9
valid "two jobs"
moved "two jobs" 2
json "two jobs: each its half" "[x['bytes'] for x in j['job_results']] == [$SIZE // 2] * 2 \
and j['lat_ns']['percentiles']['p99_9'] == j['lat_ns']['p99_9']"
check 0 "bench, text" "$PINIO" bench "$URL" --bs 4M --qd 2
has "$DIR/out" "object: 16.00 MiB from $UPSTREAM, ETag \".*\", pinned by etag; 4 HTTP requests, 0 retries" \
    "the text names the object, its requests and retries"
cat >"$DIR/job.fio" <<EOF
[global]
ioengine=s3
bs=1m
iodepth=4
[ranged]
filename=$URL
rw=randread
EOF
check 0 "a job file: ioengine=s3, filename=s3://" "$PINIO" bench "$DIR/job.fio" --json
head -n 1 "$DIR/out" >"$DIR/out1" && mv "$DIR/out1" "$DIR/out"
valid "the job file's section"
moved "the job file's section" 1
json "the job file's depth" "j['qd'] == 4 and j['job_name'] == 'ranged'"

# --- faults through the proxy ---------------------------------------------
# proxy ARGS...: (re)starts the proxy in front of s3rver; pinio talks to it.
proxy() {
    s3_put bench obj "$DIR/obj" || exit 1 # the original, again
    s3_proxy_start "$@"
}
proxy --fault 503 --count 3
check 0 "503 SlowDown x3" "$PINIO" bench "$URL" --rw randread --bs 1M --qd 4 --json
valid "503 SlowDown x3"
json "503 SlowDown x3: retried, counted, every byte" "j['bytes'] == $SIZE and \
j['ios'] == $SIZE // $BS and j['s3']['retries'] == 3 and \
j['s3']['requests'] == $SIZE // $BS + 3 and j['s3']['retry_wait_s'] >= 3"
for f in reset short badrange; do
    proxy --fault $f --count 2
    check 0 "$f x2" "$PINIO" bench "$URL" --rw read --bs 1M --qd 4 --json
    json "$f x2: retried, counted, every byte" "j['bytes'] == $SIZE and \
j['ios'] == $SIZE // $BS and j['s3']['retries'] == 2"
done
# Replaced mid-run, from a store that sends ETags and from one that sends
# only Last-Modified: the same one-line error.
for strip in "" "--strip etag"; do
    proxy --fault replace --replace-with "$DIR/other" $strip
    check 1 "the object replaced mid-run $strip" "$PINIO" bench "$URL" --bs 1M --qd 1
    has "$DIR/err" "s3://bench/obj.*object changed while loading" "a replaced object fails the run $strip"
    [ "$(wc -l <"$DIR/err")" -eq 1 ] || { echo "FAIL: not one line:"; cat "$DIR/err"; fails=$((fails + 1)); }
done
# The load's rule: answers without a validator (the HEAD's ETag pins it,
# the GETs carry none) confirm nothing, so a replacement of the same size
# is caught by a HEAD after the run; an object only its size pins is asked
# again after the run (the proxy counts the HEAD), and the JSON says what
# pinned it.
proxy --fault replace --replace-with "$DIR/other" --strip etag,last-modified --strip-from get
check 1 "replaced mid-run, the GETs without a validator" "$PINIO" bench "$URL" --bs 1M --qd 1
has "$DIR/err" "s3://bench/obj.*object changed while loading" "caught by the HEAD after the run"
[ "$(wc -l <"$DIR/err")" -eq 1 ] || { echo "FAIL: not one line:"; cat "$DIR/err"; fails=$((fails + 1)); }
proxy --strip etag,last-modified --stats "$DIR/stats"
check 0 "an object only its size pins" "$PINIO" bench "$URL" --bs 1M --qd 2 --json
valid "an object only its size pins"
json "pinned by its size" "j['s3']['object_pinned_by'] == 'size' and j['s3']['etag'] == '' \
and j['bytes'] == $SIZE"
/usr/bin/python3 -c "import json,sys; s=json.load(open(sys.argv[1])); \
assert s['requests'] == $SIZE // $BS + 2, s" "$DIR/stats" ||
    { echo "FAIL: size alone: not one HEAD before the run and one after it"; fails=$((fails + 1)); }
proxy --strip etag
check 0 "an object its Last-Modified pins" "$PINIO" bench "$URL" --bs 1M --qd 2 --json
json "pinned by Last-Modified" "j['s3']['object_pinned_by'] == 'last-modified'"
s3_proxy_stop
export AWS_ENDPOINT_URL="$UPSTREAM"
s3_put bench obj "$DIR/obj" || exit 1

# --- refusals before anything is sent: nothing listens at port 1 -----------
for rw in write randwrite rw randrw trim randtrim; do
    AWS_ENDPOINT_URL=http://127.0.0.1:1 check 2 "--rw $rw on an object" "$PINIO" bench "$URL" --rw $rw
    has "$DIR/err" "s3://bench/obj: an object is only read" "--rw $rw refused as such"
done
AWS_ENDPOINT_URL=http://127.0.0.1:1 check 2 "--verify-only on an object" "$PINIO" bench "$URL" --verify-only
has "$DIR/err" "verify" "--verify-only refused"
check 2 "--engine s3 on a file" "$PINIO" bench --engine s3 "$DIR/obj"
has "$DIR/err" "--engine s3 reads an object" "--engine s3 wants s3://"
check 2 "--engine uring on an object" "$PINIO" bench --engine uring "$URL"
has "$DIR/err" "is an object" "--engine uring refuses s3://"
check 2 "an object among files" "$PINIO" bench --file "$DIR/obj,$URL"
has "$DIR/err" "an object is benchmarked alone" "s3:// in a list refused"
check 1 "a prefix, not an object" "$PINIO" bench s3://bench/dir/
has "$DIR/err" "names a prefix, not an object" "a prefix refused"

# --- missing object or bucket, named ---------------------------------------
check 1 "a missing object" "$PINIO" bench s3://bench/nothing --json
valid "a missing object's error object"
json "a missing object: ENOENT naming it" "j['error']['name'] == 'ENOENT' and \
'no such object' in j['error']['message'] and j['error']['file'] == 's3://bench/nothing'"
has "$DIR/err" "s3://bench/nothing: no such object: bucket 'bench' has no key 'nothing'" "the key named"
check 1 "a missing bucket" "$PINIO" bench s3://nobucket/obj
has "$DIR/err" "s3://nobucket/obj: no such bucket 'nobucket'" "the bucket named"

# --- no credential in any output ------------------------------------------
: >"$DIR/all"
for a in "$URL --json" "$URL" "s3://nobucket/obj --json" "$URL --rw write"; do
    # shellcheck disable=SC2086
    AWS_SECRET_ACCESS_KEY=pinio-test-secret-K9 AWS_SESSION_TOKEN=pinio-test-token-T7 \
        "$PINIO" bench $a >>"$DIR/all" 2>&1
done
"$PINIO" bench "$URL" --json >>"$DIR/all" 2>&1
if grep -q "pinio-test-secret-K9\|pinio-test-token-T7\|$AWS_SECRET_ACCESS_KEY" "$DIR/all"; then
    echo "FAIL: a credential was printed:"; cat "$DIR/all"; fails=$((fails + 1))
fi

s3_proxy_stop
s3_cleanup
[ "$fails" -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "ok"
