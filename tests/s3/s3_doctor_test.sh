#!/bin/sh
# pinio doctor s3://BUCKET/KEY --json against s3rver: one object matching
# doc/json/doctor.schema.json that says what the text says (the credential
# source, the key id's last 4 characters, region, endpoint, addressing, the
# object's size and ETag, "reachable", exit 0); a missing object is
# "not_reachable" with the HEAD's error naming it (exit 1); a configured
# source that fails is the credentials' error naming it, nothing sent;
# --root refused; no secret in any output.
# usage: s3_doctor_test.sh PINIO SRC_ROOT
[ "${1:-}" = --help ] && { sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0; }
PINIO=$1
SRC=$2
. "$SRC/tests/s3/s3env.sh"
s3_scratch s3doctor || exit 1
s3_start || { s3_cleanup; exit 1; }
s3_bucket models || exit 1
"$PINIO" gen "$DIR/m.safetensors" --size 1M --seed 5 >/dev/null || exit 1
s3_put models m.safetensors "$DIR/m.safetensors" || exit 1
SIZE=$(stat -c %s "$DIR/m.safetensors")
URL=s3://models/m.safetensors

doctor_json 0 "reachable" "$URL"
json "reachable: what the text says" "j['path'] == '$URL' and j['store'] == 's3' and \
j['verdict'] == 'reachable' and j['credentials'] == {'source': 'environment', \
'key_id_last4': 'RVER', 'expires': None, 'error': None} and j['region'] == 'us-east-1' and \
j['endpoint'] == '$S3_URL' and j['addressing'] == 'auto' and \
j['object']['reachable'] and j['object']['size_bytes'] == $SIZE and \
j['object']['etag'].startswith('\"') and j['object']['error'] is None"
# The text report, for the same facts.
check 0 "text" "$PINIO" doctor "$URL"
has "$DIR/out" "^credentials  environment$" "text: the source"
has "$DIR/out" "^object HEAD  $SIZE bytes, ETag \"" "text: the HEAD"
cat "$DIR/out" >>"$DIR/all"

doctor_json 1 "a missing object" s3://models/none.safetensors
json "a missing object: named" "j['verdict'] == 'not_reachable' and \
not j['object']['reachable'] and j['object']['size_bytes'] is None and \
j['object']['error'].startswith('s3://models/none.safetensors: no such object') and \
j['credentials']['source'] == 'environment'"
doctor_json 1 "a name without an object" s3://models/
json "no object named: said" "j['verdict'] == 'not_reachable' and \
'name an object (s3://BUCKET/KEY)' in j['credentials']['error']"
doctor_json 1 "an https:// URL of no store" https://example.com/m.safetensors
json "no store's URL: said" "j['store'] is None and \
'not an object URL (s3://BUCKET/KEY, gs://BUCKET/OBJECT, az://' in j['credentials']['error']"

# A configured source that fails: its error, and nothing sent.
AWS_ACCESS_KEY_ID='' AWS_SECRET_ACCESS_KEY='' AWS_ROLE_ARN=arn:aws:iam::123456789012:role/x \
    AWS_WEB_IDENTITY_TOKEN_FILE="$DIR/none.token" doctor_json 1 "a failing web identity" "$URL"
json "a failing source: named" "j['verdict'] == 'not_reachable' and \
j['credentials']['source'] is None and 'AWS_WEB_IDENTITY_TOKEN_FILE' in j['credentials']['error'] \
and j['endpoint'] is None and not j['object']['reachable'] and j['object']['error'] is None"
check 2 "--root" "$PINIO" doctor "$URL" --root /
has "$DIR/err" "$URL: an object store's report takes no --root" "--root refused"

# The secret is S3RVER, the key id too: only its last 4 characters appear.
grep -q S3RVER "$DIR/all" && { echo "FAIL: a report holds the key id or the secret"; fails=$((fails + 1)); }
s3_cleanup
[ "$fails" -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "ok"
