#!/bin/sh
# s3:// listings (ListObjectsV2) against s3rver: a prefix of more than one
# page (1000 keys) loads and stages byte-exact with the shards of both
# pages.
# usage: s3_list_test.sh PINIO SRC_ROOT
[ "${1:-}" = --help ] && { sed -n '2,4p' "$0" | sed 's/^# \{0,1\}//'; exit 0; }
PINIO=$1
SRC=$2
. "$SRC/tests/s3/s3env.sh"
s3_scratch s3list || exit 1
s3_start || { s3_cleanup; exit 1; }
s3_bucket models || exit 1

sha() { sha256sum "$1" | cut -d' ' -f1; }

"$PINIO" gen "$DIR/sh" --size 6M --shards 2 --seed 11 >/dev/null || exit 1
A=$DIR/sh/model-00001-of-00002.safetensors
Z=$DIR/sh/model-00002-of-00002.safetensors

# --- two pages: a.safetensors on the first, zz.safetensors on the second ----
s3_put models big/a.safetensors "$A" || exit 1
s3_put models big/zz.safetensors "$Z" || exit 1
s3_put_many models big/ 1100 || exit 1
printf '%s  a.safetensors\n%s  zz.safetensors\n' "$(sha "$A")" "$(sha "$Z")" >"$DIR/sums"
check 0 "load a prefix of two listing pages" "$PINIO" load s3://models/big/ --sha256-file "$DIR/sums"
has "$DIR/out" "from 2 files" "both pages' shards"
check 0 "stage a prefix of two listing pages" "$PINIO" stage s3://models/big/ "$DIR/staged"
cmp -s "$A" "$DIR/staged/a.safetensors" && cmp -s "$Z" "$DIR/staged/zz.safetensors" ||
    { echo "FAIL: staged shards differ"; ls -la "$DIR/staged"; fails=$((fails + 1)); }

s3_cleanup
[ "$fails" -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "ok"
