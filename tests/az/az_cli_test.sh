#!/bin/sh
# pinio load / info / stage of az:// against Azurite on loopback (it checks
# SharedKey and SAS signatures as Azure does): a blob, an index with its
# shards and a prefix listing load byte-exact (--sha256) with SharedKey from
# a connection string, from AZURE_STORAGE_ACCOUNT + AZURE_STORAGE_KEY, from
# UseDevelopmentStorage=true, and with SAS tokens; the
# https://ACCOUNT.blob.core.windows.net/ form goes to the configured
# endpoint; Python's pinio.load and safe_open read az://; a missing blob or
# container, a wrong key, a bad SAS and a bad URL fail in one line naming
# the URL (and the auth method for a 403); no key, SAS signature or
# connection string is ever printed.
# usage: az_cli_test.sh PINIO SRC_ROOT
[ "${1:-}" = --help ] && { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0; }
PINIO=$1
SRC=$2
. "$SRC/tests/az/azenv.sh"
az_begin azcli

sha() { sha256sum "$1" | cut -d' ' -f1; }
one_line() {
    [ "$(wc -l <"$1")" -eq 1 ] || { echo "FAIL: $2: not one line:"; cat "$1"; fails=$((fails + 1)); }
}

"$PINIO" gen "$DIR/one.safetensors" --size 24M --seed 7 >/dev/null || exit 1
"$PINIO" gen "$DIR/sh" --size 18M --shards 3 --seed 8 >/dev/null || exit 1
az_tool put models one/model.safetensors "$DIR/one.safetensors" || exit 1
for f in "$DIR"/sh/*; do az_tool put models "sharded/$(basename "$f")" "$f" || exit 1; done
az_tool put models "flat/a b.safetensors" "$DIR/sh/model-00001-of-00003.safetensors" || exit 1
az_tool put models flat/b.safetensors "$DIR/sh/model-00002-of-00003.safetensors" || exit 1
az_tool put models flat/sub/c.safetensors "$DIR/sh/model-00003-of-00003.safetensors" || exit 1
(cd "$DIR/sh" && sha256sum model-0000*.safetensors) >"$DIR/sums"
ONE=az://models/one/model.safetensors

# every_source WHAT: one blob, an index, a prefix with and without an index,
# byte-exact, with the credentials the environment now holds.
every_source() {
    check 0 "$1: load a blob --sha256" "$PINIO" load "$ONE" --sha256 "$(sha "$DIR/one.safetensors")"
    has "$DIR/out" "sha256    $(sha "$DIR/one.safetensors")  $ONE" "$1: the blob's digest"
    has "$DIR/out" "HTTP range GETs from $AZ_ENDPOINT, .*versions pinned by ETag" \
        "$1: the I/O path names the endpoint and the ETag pin"
    for src in sharded/ sharded sharded/model.safetensors.index.json; do
        check 0 "$1: load az://models/$src" "$PINIO" load "az://models/$src" \
            --sha256-file "$DIR/sums" --json
        json "$1: $src: 3 blobs" "j['file_count'] == 3 and j['object_file_count'] == 3"
    done
    check 0 "$1: load a prefix without an index" "$PINIO" load az://models/flat/ --verify
    has "$DIR/out" "from 2 files" "$1: flat/: its two blobs, not its subfolder's"
    for b in "a b:1" "b:2"; do
        has "$DIR/out" "$(sha "$DIR/sh/model-0000${b#*:}-of-00003.safetensors")  az://models/flat/${b%:*}.safetensors" \
            "$1: flat/${b%:*}"
    done
}

# --- SharedKey: a connection string, then the account's variables ------------
every_source "connection string"
export AZURE_STORAGE_CONNECTION_STRING="BlobEndpoint=$AZ_ENDPOINT"
export AZURE_STORAGE_ACCOUNT=$AZ_ACCOUNT AZURE_STORAGE_KEY=$AZ_KEY
every_source "AZURE_STORAGE_ACCOUNT + AZURE_STORAGE_KEY"
unset AZURE_STORAGE_ACCOUNT AZURE_STORAGE_KEY
# Azurite's well-known account and key (the endpoint kept at the free port).
export AZURE_STORAGE_CONNECTION_STRING="UseDevelopmentStorage=true;BlobEndpoint=$AZ_ENDPOINT"
check 0 "UseDevelopmentStorage=true" "$PINIO" load "$ONE" --sha256 "$(sha "$DIR/one.safetensors")"

# --- SAS: in a connection string, and AZURE_STORAGE_SAS_TOKEN -----------------
SAS=$(az_tool sas models) || exit 1
export AZURE_STORAGE_CONNECTION_STRING="BlobEndpoint=$AZ_ENDPOINT;SharedAccessSignature=$SAS"
every_source "SAS in a connection string"
export AZURE_STORAGE_CONNECTION_STRING="BlobEndpoint=$AZ_ENDPOINT"
export AZURE_STORAGE_SAS_TOKEN="?$SAS"
every_source "AZURE_STORAGE_SAS_TOKEN"
unset AZURE_STORAGE_SAS_TOKEN
export AZURE_STORAGE_CONNECTION_STRING="$AZ_CS"

# --- stage and info ---------------------------------------------------------
check 0 "stage a prefix" "$PINIO" stage az://models/sharded/ "$DIR/staged" --verify --json
json "stage's default ring is s3://'s" "j['slot_count'] == 16 and j['slot_size_bytes'] == 8 << 20"
(cd "$DIR/staged" && sha256sum -c --quiet "$DIR/sums") >"$DIR/cmp" 2>&1 ||
    { echo "FAIL: stage: the staged shards differ:"; cat "$DIR/cmp"; fails=$((fails + 1)); }
check 0 "info an index URL" "$PINIO" info az://models/sharded/model.safetensors.index.json --json
json "info's index" "j['index']['shard_count'] == 3 and j['file_count'] == 3"

# --- the https:// form: the account's blob endpoint, here the configured one ---
HTTPS=https://$AZ_ACCOUNT.blob.core.windows.net/models/one/model.safetensors
check 0 "load the https:// form" "$PINIO" load "$HTTPS" --sha256 "$(sha "$DIR/one.safetensors")"
has "$DIR/out" "$(sha "$DIR/one.safetensors")  $HTTPS" "the https:// URL kept as written"
check 1 "the https:// form of another account" "$PINIO" load \
    https://otheraccount.blob.core.windows.net/models/one/model.safetensors
one_line "$DIR/err" "another account"
has "$DIR/err" "https://otheraccount.blob.core.windows.net/models/one/model.safetensors: .*account is not $AZ_ACCOUNT" \
    "another account named"

# --- Python: pinio.load and safe_open of az:// --------------------------------
if [ "${PINIO_AZ_PYTHON:-1}" != 1 ]; then
    echo "note: the Python part is not run in this build (no extension, or a sanitizer build)"
elif ! /usr/bin/python3 - "$ONE" "$DIR/one.safetensors" <<'PY'; then
import sys
import torch
import pinio
from pinio.safetensors import safe_open
from pinio.safetensors.torch import load_file
def same(a, b):  # bytewise: a generated BF16 may hold NaNs
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(
        a.flatten().view(torch.uint8), b.flatten().view(torch.uint8))
url, local = sys.argv[1:]
want = load_file(local)
ck = pinio.load(url, framework="pt")
assert sorted(ck) == sorted(want)
for k, v in want.items():
    assert same(ck[k], v), k
with safe_open(url, "pt") as f:
    k = sorted(f.keys())[0]
    assert same(f.get_tensor(k), want[k])
try:
    pinio.load("az://models/none.safetensors")
    raise SystemExit("a missing blob loaded")
except pinio.Error as e:
    assert "az://models/none.safetensors: no such object (404 BlobNotFound)" in str(e), str(e)
PY
    echo "FAIL: Python's pinio.load / safe_open of az://"; fails=$((fails + 1))
fi

# --- missing things, refusals: one line naming the URL -------------------------
check 1 "a missing blob" "$PINIO" load az://models/none.safetensors
one_line "$DIR/err" "a missing blob"
has "$DIR/err" "az://models/none.safetensors: no such object (404 BlobNotFound)" "the missing blob named"
check 1 "a missing container" "$PINIO" load az://nocontainer/x.safetensors
one_line "$DIR/err" "a missing container"
has "$DIR/err" "az://nocontainer/x.safetensors: no such container (404 ContainerNotFound)" "the missing container named"
check 1 "a missing container's prefix" "$PINIO" load az://nocontainer/p/
has "$DIR/err" "az://nocontainer/p/: no such container" "the listing's container named"
check 1 "an empty prefix" "$PINIO" load az://models/nothing-here/
has "$DIR/err" "az://models/nothing-here/: no \*.safetensors objects" "an empty prefix named"
check 1 "a bad container name" "$PINIO" load "az://Bad_Name/x.safetensors"
one_line "$DIR/err" "a bad URL"
has "$DIR/err" "az://Bad_Name/x.safetensors: not az://CONTAINER/BLOB" "the bad URL named"
check 1 "az:// without an account" env -u AZURE_STORAGE_CONNECTION_STRING "$PINIO" load "$ONE"
has "$DIR/err" "$ONE: az:// needs a storage account" "no account: said"

check 1 "gen to az://" "$PINIO" gen az://models/new.safetensors --size 1M
has "$DIR/err" "az://models/new.safetensors: writing to Azure Blob Storage is not supported" "a write refused"
[ ! -e "az:" ] || { echo "FAIL: gen wrote a local az: folder"; fails=$((fails + 1)); }

# --- a wrong key, a bad SAS: 403 naming the method, never the secret ----------
WRONG=$(printf 'pinio-wrong-key-K9-%064d' 0 | base64 -w0)
export AZURE_STORAGE_CONNECTION_STRING="AccountName=$AZ_ACCOUNT;AccountKey=$WRONG;BlobEndpoint=$AZ_ENDPOINT"
check 1 "a wrong key" "$PINIO" load "$ONE"
one_line "$DIR/err" "a wrong key"
has "$DIR/err" "$ONE: access denied (403 AuthorizationFailure) with SharedKey of account $AZ_ACCOUNT (AZURE_STORAGE_CONNECTION_STRING)" \
    "the wrong key's 403 names the method"
BADSAS=$(az_tool badsas models) || exit 1
export AZURE_STORAGE_CONNECTION_STRING="BlobEndpoint=$AZ_ENDPOINT;SharedAccessSignature=$BADSAS"
check 1 "a bad SAS" "$PINIO" load "$ONE"
has "$DIR/err" "$ONE: access denied (403 AuthorizationFailure) with a SAS token (AZURE_STORAGE_CONNECTION_STRING)" \
    "the bad SAS's 403 names the method"
export AZURE_STORAGE_CONNECTION_STRING="AccountName=$AZ_ACCOUNT;AccountKey=not base64!;BlobEndpoint=$AZ_ENDPOINT"
check 1 "a malformed key" "$PINIO" load "$ONE"
has "$DIR/err" "AZURE_STORAGE_CONNECTION_STRING: the account key is not base64" "a malformed key named"

# --- no secret in any output ----------------------------------------------------
SIG=$(printf '%s' "$SAS" | sed -n 's/.*sig=\([^&]*\).*/\1/p')
: >"$DIR/all"
for cs in "$AZ_CS" "AccountName=$AZ_ACCOUNT;AccountKey=$WRONG;BlobEndpoint=$AZ_ENDPOINT" \
          "BlobEndpoint=$AZ_ENDPOINT;SharedAccessSignature=$SAS" \
          "BlobEndpoint=$AZ_ENDPOINT;SharedAccessSignature=$BADSAS"; do
    for a in "load $ONE --json" "load az://models/none.safetensors" "info az://models/sharded/ --json" \
             "load az://nocontainer/p/"; do
        # shellcheck disable=SC2086
        AZURE_STORAGE_CONNECTION_STRING="$cs" "$PINIO" $a >>"$DIR/all" 2>&1
    done
done
for secret in "$AZ_KEY" "$WRONG" "$SIG" "$(printf '%s' "$SIG" | sed 's/%2B/+/g; s/%2F/\//g; s/%3D/=/g')"; do
    if grep -qF -- "$secret" "$DIR/all"; then
        echo "FAIL: a secret was printed:"; grep -F -- "$secret" "$DIR/all"; fails=$((fails + 1))
    fi
done

az_cleanup
[ "$fails" -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "ok"
