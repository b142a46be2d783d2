#!/bin/sh
# pinio doctor gs://BUCKET/OBJECT against s3rver behind gcsproxy.py, as text
# and as --json (doc/json/doctor.schema.json): which credential source
# answered (anonymous, an HMAC key named by its access id's last 4
# characters), the endpoint (STORAGE_EMULATOR_HOST), the object's HEAD
# (size, ETag), exit 0; a missing object, a wrong secret (403 naming the
# key), half a key pair, a missing service account file and a bad endpoint
# each named, exit 1, and nothing sent for a configuration that failed;
# neither the secret nor the whole access id in any output.
# usage: gcs_doctor_test.sh PINIO SRC_ROOT
[ "${1:-}" = --help ] && { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0; }
PINIO=$1
SRC=$2
. "$SRC/tests/gcs/gcsenv.sh"
gcs_begin gcsdoctor
"$PINIO" gen "$DIR/m.safetensors" --size 1M --seed 5 >/dev/null || exit 1
s3_put models m.safetensors "$DIR/m.safetensors" || exit 1
SIZE=$(stat -c %s "$DIR/m.safetensors")
URL=gs://models/m.safetensors
ID=GOOG1EPINIODOCTORACCESSID00000000000000000000000000000000Q7ZD
SECRET="pinio-doctor-secret/$(head -c 18 /dev/urandom | base64 | tr '+/' 'xy')"

text() { # WANT WHAT ARGS...: pinio doctor ARGS as text
    check "$@"
    cat "$DIR/out" "$DIR/err" >>"$DIR/all"
}
# reachable WHAT SOURCE: the JSON of a reachable object, with SOURCE.
reachable() {
    json "$1: the source, the endpoint, the HEAD" "j['store'] == 'gcs' and \
j['verdict'] == 'reachable' and j['credentials'] == {'source': '''$2''', 'key_id_last4': None, \
'expires': None, 'error': None} and j['endpoint'] == '$STORAGE_EMULATOR_HOST' and \
j['region'] == 'auto' and j['addressing'] == 'path' and j['object']['reachable'] and \
j['object']['size_bytes'] == $SIZE and j['object']['etag'].startswith('\"')"
}

gcs_proxy anon
doctor_json 0 "anonymous" "$URL"
reachable "anonymous" "no credentials (anonymous)"
text 0 "anonymous, text" "$PINIO" doctor "$URL"
has "$DIR/out" "^credentials  no credentials (anonymous)$" "text: anonymous"
has "$DIR/out" "^endpoint     $STORAGE_EMULATOR_HOST (addressing path)$" "text: the endpoint"
has "$DIR/out" "^object HEAD  $SIZE bytes, ETag \"" "text: the HEAD"
has "$DIR/out" "^verdict      reachable$" "text: reachable"
has "$DIR/out" "^region       auto$" "text: the signing region"
grep -q "^key id" "$DIR/out" && { echo "FAIL: S3's key id in a gs:// report"; cat "$DIR/out"; fails=$((fails + 1)); }

gcs_proxy "hmac:$ID:$SECRET"
export GOOGLE_HMAC_ACCESS_ID=$ID GOOGLE_HMAC_SECRET=$SECRET
doctor_json 0 "an HMAC key" "$URL"
reachable "an HMAC key" "an HMAC key (GOOGLE_HMAC_ACCESS_ID ...Q7ZD)"
grep -q '^HEAD /models/m.safetensors auth-ok' "$DIR/gcs.log" ||
    { echo "FAIL: the HEAD was not signed with the key:"; cat "$DIR/gcs.log"; fails=$((fails + 1)); }
text 0 "an HMAC key, text" "$PINIO" doctor "$URL"
has "$DIR/out" "^credentials  an HMAC key (GOOGLE_HMAC_ACCESS_ID ...Q7ZD)$" "text: the key"

doctor_json 1 "a missing object" gs://models/none.safetensors
json "a missing object: named" "j['verdict'] == 'not_reachable' and \
j['object']['error'].startswith('gs://models/none.safetensors: no such object') and \
j['credentials']['source'].startswith('an HMAC key')"
GOOGLE_HMAC_SECRET=wrong-secret doctor_json 1 "a wrong secret" "$URL"
json "a wrong secret: the 403 names the key" "j['object']['error'].startswith('$URL: access \
denied (403) with an HMAC key (GOOGLE_HMAC_ACCESS_ID ...Q7ZD)')"
GOOGLE_HMAC_SECRET=wrong-secret text 1 "a wrong secret, text" "$PINIO" doctor "$URL"
has "$DIR/out" "^object HEAD  FAILED: $URL: access denied (403)" "text: the HEAD's failure"
has "$DIR/out" "^verdict      not reachable$" "text: not reachable"

# A configuration that fails: named, nothing sent.
: >"$DIR/gcs.log"
GOOGLE_HMAC_SECRET='' doctor_json 1 "half a key pair" "$URL"
json "half a key pair: named" "j['credentials']['source'] is None and \
j['credentials']['error'].startswith('GOOGLE_HMAC_SECRET: not set, but GOOGLE_HMAC_ACCESS_ID is') \
and j['endpoint'] is None and not j['object']['reachable']"
unset GOOGLE_HMAC_ACCESS_ID GOOGLE_HMAC_SECRET
GOOGLE_APPLICATION_CREDENTIALS="$DIR/sa.json" doctor_json 1 "a missing service account file" "$URL"
json "a missing key file: named" "'GOOGLE_APPLICATION_CREDENTIALS: cannot open $DIR/sa.json' in \
j['credentials']['error']"
GOOGLE_APPLICATION_CREDENTIALS="$DIR/sa.json" text 1 "a missing key file, text" "$PINIO" doctor "$URL"
has "$DIR/out" "^credentials  FAILED: GOOGLE_APPLICATION_CREDENTIALS: cannot open" "text: the source's failure"
STORAGE_EMULATOR_HOST="ftp://127.0.0.1:1" doctor_json 1 "a bad endpoint" "$URL"
json "a bad endpoint: named" "j['credentials']['error'].startswith('STORAGE_EMULATOR_HOST: not')"
[ -s "$DIR/gcs.log" ] && { echo "FAIL: requests went out for a failed configuration:"; cat "$DIR/gcs.log"; fails=$((fails + 1)); }
doctor_json 1 "a bucket without an object" gs://models/
json "no object: said" "'name an object (gs://BUCKET/OBJECT)' in j['credentials']['error']"

if grep -qF -- "$SECRET" "$DIR/all" || grep -qF -- "$ID" "$DIR/all"; then
    echo "FAIL: a report held the secret or the whole access id"; fails=$((fails + 1))
fi
gcs_cleanup
[ "$fails" -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "ok"
