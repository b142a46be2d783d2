#!/bin/sh
# gs:// (Google Cloud Storage's XML API) against s3rver behind gcsproxy.py,
# a stand-in of the tests' own that checks each request's Google-side
# authorisation before forwarding it: anonymous requests carry no
# signature, HMAC-keyed ones (GOOGLE_HMAC_ACCESS_ID / GOOGLE_HMAC_SECRET)
# carry an AWS4-HMAC-SHA256 signature over DATE/auto/s3 that the proxy
# recomputes. An object, an index and its shards, a prefix, info and stage
# byte-exact through STORAGE_EMULATOR_HOST; Python's pinio.load and
# safe_open; a missing object, a wrong secret, half a key pair, a missing
# GOOGLE_APPLICATION_CREDENTIALS file and bad URLs named; no secret printed.
# usage: gcs_cli_test.sh PINIO SRC_ROOT
[ "${1:-}" = --help ] && { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0; }
PINIO=$1
SRC=$2
. "$SRC/tests/gcs/gcsenv.sh"
gcs_begin gcs

sha() { sha256sum "$1" | cut -d' ' -f1; }
"$PINIO" gen "$DIR/one.safetensors" --size 20M --seed 7 >/dev/null || exit 1
"$PINIO" gen "$DIR/sh" --size 12M --shards 3 --seed 8 >/dev/null || exit 1
s3_put models one/model.safetensors "$DIR/one.safetensors" || exit 1
for f in "$DIR"/sh/*; do s3_put models "sharded/$(basename "$f")" "$f" || exit 1; done
(cd "$DIR/sh" && sha256sum model-0000*.safetensors) >"$DIR/sums"
ONE=gs://models/one/model.safetensors
ID=GOOG1EPINIOTESTACCESSID0000000000000000000000000000000007Q2
SECRET="pinio-test-secret/$(head -c 18 /dev/urandom | base64 | tr '+/' 'xy')"

# all_ok WHAT: every request the proxy saw passed its check, and there were some GETs.
all_ok() {
    if grep -q auth-bad "$DIR/gcs.log" || ! grep -q '^GET .* auth-ok' "$DIR/gcs.log"; then
        echo "FAIL: $1: requests the proxy refused, or none:"; cat "$DIR/gcs.log"; fails=$((fails + 1))
    fi
}
# every_source WHAT: one object, an index, its prefix; info and stage.
every_source() {
    check 0 "$1: load an object --sha256" "$PINIO" load "$ONE" --sha256 "$(sha "$DIR/one.safetensors")"
    has "$DIR/out" "sha256    $(sha "$DIR/one.safetensors")  $ONE" "$1: the object's digest"
    has "$DIR/out" "HTTP range GETs from $STORAGE_EMULATOR_HOST, .*versions pinned by ETag" \
        "$1: the I/O path names the endpoint and the ETag pin"
    for src in sharded/ sharded/model.safetensors.index.json; do
        check 0 "$1: load gs://models/$src" "$PINIO" load "gs://models/$src" \
            --sha256-file "$DIR/sums" --json
        json "$1: $src: 3 objects" "j['file_count'] == 3 and j['object_file_count'] == 3"
    done
    check 0 "$1: info an index URL" "$PINIO" info gs://models/sharded/model.safetensors.index.json --json
    json "$1: info's index" "j['index']['shard_count'] == 3 and j['file_count'] == 3"
    rm -rf "$DIR/staged"
    check 0 "$1: stage a prefix" "$PINIO" stage gs://models/sharded/ "$DIR/staged" --verify --json
    json "$1: stage's default ring is s3://'s" "j['slot_count'] == 16 and j['slot_size_bytes'] == 8 << 20"
    (cd "$DIR/staged" && sha256sum -c --quiet "$DIR/sums") >"$DIR/cmp" 2>&1 ||
        { echo "FAIL: $1: the staged shards differ:"; cat "$DIR/cmp"; fails=$((fails + 1)); }
    all_ok "$1"
}

# --- anonymous (a public bucket) --------------------------------------------
gcs_proxy anon
every_source anonymous
# An object is opened by its first GET, no HEAD: each request of a load is
# one of the report's, every one a GET; an object under 64 KiB, one in all.
"$PINIO" gen "$DIR/small.safetensors" --size 16K --seed 9 >/dev/null || exit 1
s3_put models small.safetensors "$DIR/small.safetensors" || exit 1
for obj in "$ONE" gs://models/small.safetensors; do
    : >"$DIR/gcs.log"
    check 0 "$obj: counted" "$PINIO" load "$obj" --json
    json "$obj: every request a GET at the proxy, no HEAD" "j['object_request_count'] == \
        $(grep -c '^GET ' "$DIR/gcs.log") == $(wc -l <"$DIR/gcs.log") >= 1"
done
json "an object under 64 KiB: one request" "j['object_request_count'] == 1"

# --- an HMAC key --------------------------------------------------------------
gcs_proxy "hmac:$ID:$SECRET"
export GOOGLE_HMAC_ACCESS_ID=$ID GOOGLE_HMAC_SECRET=$SECRET
every_source "HMAC key"
# A process on a GCE machine or with a service account file set keeps the
# HMAC key: first found wins.
GOOGLE_APPLICATION_CREDENTIALS=/nonexistent check 0 "HMAC before a service account" \
    "$PINIO" load "$ONE" --sha256 "$(sha "$DIR/one.safetensors")"

# --- Python: pinio.load and safe_open of gs:// ---------------------------------
if [ "${PINIO_GCS_PYTHON:-1}" != 1 ]; then
    echo "note: the Python part is not run in this build (no extension, or a sanitizer build)"
elif ! /usr/bin/python3 - "$ONE" "$DIR/one.safetensors" <<'PY'; then
import sys
import torch
import pinio
from pinio.safetensors import safe_open
from pinio.safetensors.torch import load_file
def raw(t):  # dtype, shape and bytes: a generated BF16 may hold NaNs
    return t.dtype, tuple(t.shape), t.flatten().view(torch.uint8).numpy().tobytes()
url, local = sys.argv[1:]
want = {k: raw(v) for k, v in load_file(local).items()}
assert {k: raw(v) for k, v in pinio.load(url, framework="pt").items()} == want, "load differs"
with safe_open(url, "pt") as f:
    assert {k: raw(f.get_tensor(k)) for k in f.keys()} == want, "safe_open differs"
try:
    pinio.load("gs://models/none.safetensors")
    raise SystemExit("a missing object loaded")
except pinio.Error as e:
    assert "gs://models/none.safetensors" in str(e) and "no such object" in str(e), str(e)
PY
    echo "FAIL: Python's pinio.load / safe_open of gs://"; fails=$((fails + 1))
fi
all_ok "Python"

# --- errors, each one line naming the URL or the variable ----------------------
one_line() {
    [ "$(wc -l <"$1")" -eq 1 ] || { echo "FAIL: $2: not one line:"; cat "$1"; fails=$((fails + 1)); }
}
check 1 "a missing object" "$PINIO" load gs://models/none.safetensors
has "$DIR/err" "gs://models/none.safetensors: no such object" "the missing object named"
one_line "$DIR/err" "a missing object"
check 1 "a missing bucket" "$PINIO" load gs://nobucket/m.safetensors
# The first GET's 404 has the store's code (a HEAD's had none).
has "$DIR/err" "gs://nobucket/m.safetensors: no such bucket (404 NoSuchBucket)" "the missing bucket named"
GOOGLE_HMAC_SECRET=wrong-secret check 1 "a wrong secret" "$PINIO" load "$ONE"
has "$DIR/err" "$ONE: access denied (403 AccessDenied) with an HMAC key (GOOGLE_HMAC_ACCESS_ID ...07Q2)" \
    "the refusal names the key by its last characters"
grep -q 'auth-bad signature mismatch' "$DIR/gcs.log" ||
    { echo "FAIL: the proxy did not see a bad signature:"; cat "$DIR/gcs.log"; fails=$((fails + 1)); }
env -u GOOGLE_HMAC_SECRET "$PINIO" load "$ONE" >"$DIR/out" 2>"$DIR/err" &&
    { echo "FAIL: half a key pair loaded"; fails=$((fails + 1)); }
has "$DIR/err" "GOOGLE_HMAC_SECRET: not set, but GOOGLE_HMAC_ACCESS_ID is" "half a key pair named"
unset GOOGLE_HMAC_ACCESS_ID GOOGLE_HMAC_SECRET
: >"$DIR/gcs.log"
GOOGLE_APPLICATION_CREDENTIALS="$DIR/sa.json" check 1 "a missing service account file" \
    "$PINIO" load "$ONE"
has "$DIR/err" "GOOGLE_APPLICATION_CREDENTIALS: cannot open $DIR/sa.json" \
    "a failing source refused, never a fall to anonymous"
[ -s "$DIR/gcs.log" ] && { echo "FAIL: requests went out for a failing source:"; cat "$DIR/gcs.log"; fails=$((fails + 1)); }
STORAGE_EMULATOR_HOST="ftp://127.0.0.1:1" check 1 "a bad emulator host" "$PINIO" load "$ONE"
has "$DIR/err" "STORAGE_EMULATOR_HOST: not http://HOST\[:PORT\]" "the bad endpoint named"
for u in gs://A/m.safetensors gs:///m.safetensors gs://-ab/m.safetensors; do
    check 1 "bad URL $u" "$PINIO" load "$u"
    has "$DIR/err" "$u: not gs://BUCKET/OBJECT: the bucket name" "bad URL $u named"
done
check 1 "gs:// as a destination" "$PINIO" gen gs://models/new.safetensors --size 1M
has "$DIR/err" "gs://models/new.safetensors: writing to Google Cloud Storage is not supported" "writes refused"
[ -e gs: ] && { echo "FAIL: a local gs: folder was made"; rm -rf gs:; fails=$((fails + 1)); }

# --- no secret printed, anywhere -------------------------------------------------
gcs_proxy "hmac:$ID:$SECRET"
export GOOGLE_HMAC_ACCESS_ID=$ID GOOGLE_HMAC_SECRET=$SECRET
for a in "load $ONE --json" "load gs://models/none.safetensors" "info gs://models/sharded/ --json"; do
    # shellcheck disable=SC2086
    "$PINIO" $a >"$DIR/out" 2>"$DIR/err"
    if grep -qF -- "$SECRET" "$DIR/out" "$DIR/err" || grep -qF -- "$ID" "$DIR/out" "$DIR/err"; then
        echo "FAIL: pinio $a printed the secret or the whole access id"; fails=$((fails + 1))
    fi
done
GOOGLE_HMAC_SECRET=wrong "$PINIO" load "$ONE" --json >"$DIR/out" 2>"$DIR/err"
grep -qF -- "$ID" "$DIR/out" "$DIR/err" && { echo "FAIL: a refusal printed the access id"; fails=$((fails + 1)); }

[ "$fails" -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "ok"
