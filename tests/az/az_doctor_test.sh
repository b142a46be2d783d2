#!/bin/sh
# pinio doctor az://CONTAINER/BLOB against Azurite, as text and as --json
# (doc/json/doctor.schema.json): which credential source answered
# (SharedKey from the connection string or AZURE_STORAGE_ACCOUNT + _KEY, a
# SAS token), the endpoint, the blob's HEAD (size, ETag), exit 0; a missing
# blob, a wrong key (403 naming the method), a half-configured workload
# identity and a malformed connection string each named, exit 1; the
# https://ACCOUNT.blob.core.windows.net form is the same report; neither the
# account key nor the SAS appears in any output.
# usage: az_doctor_test.sh PINIO SRC_ROOT
[ "${1:-}" = --help ] && { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0; }
PINIO=$1
SRC=$2
. "$SRC/tests/az/azenv.sh"
az_begin azdoctor
"$PINIO" gen "$DIR/m.safetensors" --size 1M --seed 5 >/dev/null || exit 1
az_tool put models m.safetensors "$DIR/m.safetensors" || exit 1
SIZE=$(stat -c %s "$DIR/m.safetensors")
URL=az://models/m.safetensors

# reachable WHAT SOURCE: the JSON of a reachable blob, with SOURCE.
reachable() {
    json "$1: the source, the endpoint, the HEAD" "j['store'] == 'azure' and \
j['verdict'] == 'reachable' and j['credentials'] == {'source': '''$2''', 'key_id_last4': None, \
'expires': None, 'error': None} and j['endpoint'] == '$AZ_ENDPOINT' and \
j['addressing'] == 'path' and j['region'] is None and j['object']['reachable'] and \
j['object']['size_bytes'] == $SIZE and j['object']['etag'] and j['object']['error'] is None"
}

doctor_json 0 "a connection string" "$URL"
reachable "a connection string" "SharedKey of account $AZ_ACCOUNT (AZURE_STORAGE_CONNECTION_STRING)"
check 0 "text" "$PINIO" doctor "$URL"
cat "$DIR/out" >>"$DIR/all"
has "$DIR/out" "^credentials  SharedKey of account $AZ_ACCOUNT (AZURE_STORAGE_CONNECTION_STRING)$" "text: the source"
has "$DIR/out" "^endpoint     $AZ_ENDPOINT (addressing path)$" "text: the endpoint"
has "$DIR/out" "^object HEAD  $SIZE bytes, ETag " "text: the HEAD"
has "$DIR/out" "^verdict      reachable$" "text: reachable"
grep -q "^region\|^key id" "$DIR/out" && { echo "FAIL: S3's region or key id in an az:// report"; cat "$DIR/out"; fails=$((fails + 1)); }

# The https:// form goes to the configured endpoint of its account, as a load does.
doctor_json 0 "the https:// form" "https://$AZ_ACCOUNT.blob.core.windows.net/models/m.safetensors"
reachable "the https:// form" "SharedKey of account $AZ_ACCOUNT (AZURE_STORAGE_CONNECTION_STRING)"
AZURE_STORAGE_CONNECTION_STRING="BlobEndpoint=$AZ_ENDPOINT" AZURE_STORAGE_ACCOUNT=$AZ_ACCOUNT \
    AZURE_STORAGE_KEY=$AZ_KEY doctor_json 0 "account and key" "$URL"
reachable "account and key" "SharedKey of account $AZ_ACCOUNT (AZURE_STORAGE_ACCOUNT and AZURE_STORAGE_KEY)"
SAS=$(az_tool sas models) || exit 1
AZURE_STORAGE_CONNECTION_STRING="BlobEndpoint=$AZ_ENDPOINT" AZURE_STORAGE_SAS_TOKEN="?$SAS" \
    doctor_json 0 "a SAS token" "$URL"
reachable "a SAS token" "a SAS token (AZURE_STORAGE_SAS_TOKEN)"

doctor_json 1 "a missing blob" az://models/none.safetensors
json "a missing blob: named" "j['verdict'] == 'not_reachable' and \
j['object']['error'].startswith('az://models/none.safetensors: no such ')"
AZURE_STORAGE_CONNECTION_STRING="AccountName=$AZ_ACCOUNT;AccountKey=$(printf 'wrong-key' | base64);BlobEndpoint=$AZ_ENDPOINT" \
    doctor_json 1 "a wrong key" "$URL"
json "a wrong key: the 403 names the method" "j['object']['error'].startswith('$URL: access \
denied (403') and 'SharedKey of account $AZ_ACCOUNT' in j['object']['error']"
AZURE_STORAGE_CONNECTION_STRING='' AZURE_FEDERATED_TOKEN_FILE="$DIR/token" AZURE_CLIENT_ID=c \
    doctor_json 1 "half a workload identity" "$URL"
json "half a workload identity: named" "j['credentials']['source'] is None and \
'AZURE_TENANT_ID: not set' in j['credentials']['error'] and not j['object']['reachable']"
AZURE_STORAGE_CONNECTION_STRING='AccountName' doctor_json 1 "a malformed connection string" "$URL"
json "a malformed connection string: named" "'AZURE_STORAGE_CONNECTION_STRING' in \
j['credentials']['error'] and j['credentials']['source'] is None"
doctor_json 1 "a container without a blob" az://models/
json "no blob: said" "'name an object (az://CONTAINER/BLOB)' in j['credentials']['error']"

if grep -qF -- "$AZ_KEY" "$DIR/all" || grep -qF -- "$SAS" "$DIR/all" ||
    grep -qF -- "sig=" "$DIR/all"; then
    echo "FAIL: a report held the account key or the SAS"; fails=$((fails + 1))
fi
[ "$fails" -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "ok"
