#!/bin/sh
# A bucket in another region (regionproxy.py in front of s3rver answers the
# wrong region's signature 301 with x-amz-bucket-region, as S3 does): the
# load is retried once in the bucket's region and byte-exact, that region
# remembered for every later request of the load; a store that redirects
# again, or refuses in the new region, is an error naming both regions.
# usage: s3_region_test.sh PINIO SRC_ROOT
[ "${1:-}" = --help ] && { sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0; }
PINIO=$1
SRC=$2
. "$SRC/tests/s3/s3env.sh"
s3_test s3region models
"$PINIO" gen "$DIR/one.safetensors" --size 4M --seed 9 >/dev/null || exit 1
s3_put models one.safetensors "$DIR/one.safetensors" || exit 1
SUM=$(sha256sum "$DIR/one.safetensors" | cut -d' ' -f1)
URL=s3://models/one.safetensors
RP_PID=""
trap '[ -n "$RP_PID" ] && kill "$RP_PID" 2>/dev/null; s3_cleanup' EXIT
rp_start() {
    [ -n "$RP_PID" ] && { kill "$RP_PID" 2>/dev/null; wait "$RP_PID" 2>/dev/null; }
    : >"$DIR/rp.log"
    py_server_start rp regionproxy.py "$S3_URL" "$DIR/rp.log" "$@"
    RP_PID=$PY_PID
    export AWS_ENDPOINT_URL="http://127.0.0.1:$PY_PORT"
}
export AWS_REGION=us-east-1

rp_start eu-west-1
check 0 "a bucket in eu-west-1" "$PINIO" load "$URL" --sha256 "$SUM"
has "$DIR/out" "sha256    $SUM  $URL" "redirected: byte-exact"
n=$(grep -c "us-east-1" "$DIR/rp.log")
[ "$n" -eq 1 ] || { echo "FAIL: want one request in us-east-1 (then the region remembered), saw $n:"; cat "$DIR/rp.log"; fails=$((fails + 1)); }
grep -q "^GET eu-west-1" "$DIR/rp.log" || { echo "FAIL: no GET in eu-west-1"; fails=$((fails + 1)); }

rp_start eu-west-1 --pingpong ap-south-1
check 1 "a store that redirects again" "$PINIO" load "$URL"
has "$DIR/err" "the store sends region eu-west-1 to region ap-south-1, where it sent us-east-1 before" "both redirects named"

rp_start eu-west-1 --deny
check 1 "refused in the bucket's region" "$PINIO" load "$URL"
has "$DIR/err" "access denied (403 AccessDenied) (in region eu-west-1, where the store redirected from us-east-1)" "both regions named"

[ "$fails" -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "ok"
