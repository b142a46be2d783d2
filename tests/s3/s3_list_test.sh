#!/bin/sh
# s3:// listings (ListObjectsV2) against s3rver, and through faultproxy.py:
# a prefix of more than one page (1000 keys) loads and stages byte-exact
# with the shards of both pages; a page cut short, and a listing whose
# continuation tokens cycle, fail in one line naming bucket and prefix
# (never a load of fewer shards, never a loop); a failed listing names the
# prefix, not only the bucket; a listed key or an index object's shard name
# holding control characters is refused, shown escaped.
# usage: s3_list_test.sh PINIO SRC_ROOT
[ "${1:-}" = --help ] && { sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0; }
PINIO=$1
SRC=$2
. "$SRC/tests/s3/s3env.sh"
s3_test s3list models
UPSTREAM=$AWS_ENDPOINT_URL

sha() { sha256sum "$1" | cut -d' ' -f1; }
one_line() {
    [ "$(wc -l <"$1")" -eq 1 ] || { echo "FAIL: $2: not one line:"; cat "$1"; fails=$((fails + 1)); }
}

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

# --- a failed listing names bucket and prefix ------------------------------
check 1 "a missing bucket's prefix" "$PINIO" load s3://nobucket/deep/prefix/
one_line "$DIR/err" "a missing bucket's prefix"
has "$DIR/err" "s3://nobucket/deep/prefix/: " "the prefix named"

# --- a page cut short: an error, never one shard of two ----------------------
s3_put models two/a.safetensors "$A" || exit 1
s3_put models two/b.safetensors "$Z" || exit 1
s3_proxy_start --fault listcut
check 1 "a listing page cut short" "$PINIO" load s3://models/two/
one_line "$DIR/err" "a listing page cut short"
has "$DIR/err" "s3://models/two/: .*not a complete listing" "the cut page refused, bucket and prefix named"

# --- a listing that never ends: refused at the repeated token ---------------
s3_proxy_start --fault listloop
check 1 "continuation tokens t1, t2, t1" timeout 60 "$PINIO" load s3://models/two/
one_line "$DIR/err" "a looping listing"
has "$DIR/err" "s3://models/two/: .*continuation token it gave before" "the loop refused"

# --- store text in names: a key or shard name with terminal escapes --------
# (issue 37 item 17's class) refused in one line, the name shown escaped,
# no raw control byte on the terminal
no_ctl() {
    if LC_ALL=C grep -q -e "$(printf '[\001-\010\016-\037\177]')" \
            -e "$(printf '\302[\200-\237]')" "$DIR/out" "$DIR/err"; then
        echo "FAIL: $1: a raw control byte reached the output:"; od -c "$DIR/err" | head; fails=$((fails + 1))
    fi
}
s3_proxy_start --fault listesc
check 1 "a listed key holding a terminal escape" "$PINIO" load s3://models/two/
one_line "$DIR/err" "a listed key holding a terminal escape"
no_ctl "a listed key holding a terminal escape"
has "$DIR/err" 's3://models/two/: .*two/\\x1b\]0;pwned\\x07a.safetensors.*control characters' \
    "the key refused, escaped"
s3_proxy_stop
export AWS_ENDPOINT_URL=$UPSTREAM
printf '{"weight_map": {"w": "\\u001b[2Jx.safetensors", "v": "\\u009bx.safetensors"}}' >"$DIR/esc.json"
s3_put models esc/model.safetensors.index.json "$DIR/esc.json" || exit 1
check 1 "an index object naming a shard with a terminal escape" "$PINIO" load s3://models/esc/
one_line "$DIR/err" "an index's shard with a terminal escape"
no_ctl "an index's shard with a terminal escape"
has "$DIR/err" 'index.json: .*shard .*esc/\\x1b\[2Jx.safetensors.*control characters' \
    "the shard refused, escaped"

s3_cleanup
[ "$fails" -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "ok"
