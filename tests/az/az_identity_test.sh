#!/bin/sh
# az:// with a workload identity (AZURE_FEDERATED_TOKEN_FILE, AZURE_CLIENT_ID,
# AZURE_TENANT_ID, AZURE_AUTHORITY_HOST) against a loopback server of the
# tests' own (tokenserver.py: the token endpoint and a blob endpoint taking
# only its bearer tokens): the file's token is exchanged once and every blob
# request carries the bearer token, byte-exact; a token about to expire is
# fetched again; a refused exchange, an unreadable token file and a missing
# variable are one-line errors naming the source; neither the federated
# token nor a bearer token is ever printed. No Azurite needed.
# usage: az_identity_test.sh PINIO SRC_ROOT
[ "${1:-}" = --help ] && { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0; }
PINIO=$1
SRC=$2
. "$SRC/tests/az/azenv.sh"
az_scratch azid || exit 1
unset AZURE_STORAGE_CONNECTION_STRING AZURE_STORAGE_ACCOUNT AZURE_STORAGE_KEY AZURE_STORAGE_SAS_TOKEN
SRV_PID=""
trap '[ -n "$SRV_PID" ] && kill "$SRV_PID" 2>/dev/null; az_cleanup' EXIT
trap '[ -n "$SRV_PID" ] && kill "$SRV_PID" 2>/dev/null; az_cleanup; exit 1' INT TERM

"$PINIO" gen "$DIR/m.safetensors" --size 20M --seed 5 >/dev/null || exit 1
SUM=$(sha256sum "$DIR/m.safetensors" | cut -d' ' -f1)
printf 'pinio-federated-F3.%s\n' "$(head -c 24 /dev/urandom | base64 | tr '+/' '-_')" >"$DIR/sa-token"

# server ARGS...: (re)starts tokenserver.py; sets PORT.
server() {
    [ -n "$SRV_PID" ] && { kill "$SRV_PID" 2>/dev/null; wait "$SRV_PID" 2>/dev/null; }
    : >"$DIR/log"
    : >"$DIR/srv.port" # now: the job's own truncation may come after az_port's first read
    /usr/bin/python3 "$SRC/tests/az/tokenserver.py" "$DIR/sa-token" "$DIR/m.safetensors" \
        --log "$DIR/log" "$@" >"$DIR/srv.port" 2>"$DIR/srv.err" &
    SRV_PID=$!
    PORT=$(az_port "$DIR/srv.port" 's/^port \([0-9][0-9]*\)$/\1/p' "$SRV_PID") ||
        { echo "FAIL: tokenserver.py did not start:"; cat "$DIR/srv.err"; exit 1; }
    export AZURE_STORAGE_CONNECTION_STRING="BlobEndpoint=http://127.0.0.1:$PORT/acct"
    export AZURE_AUTHORITY_HOST="http://127.0.0.1:$PORT/"
    export AZURE_FEDERATED_TOKEN_FILE="$DIR/sa-token" AZURE_CLIENT_ID=test-client AZURE_TENANT_ID=test-tenant
}
count() { grep -c "^$1" "$DIR/log"; }
URL=az://models/m.safetensors

server
check 0 "load with a workload identity" "$PINIO" load "$URL" --sha256 "$SUM"
[ "$(count token)" -eq 1 ] || { echo "FAIL: $(count token) token exchanges, want 1"; fails=$((fails + 1)); }
[ "$(count 'blob .* auth-bad')" -eq 0 ] || { echo "FAIL: a blob request without the bearer token:"; cat "$DIR/log"; fails=$((fails + 1)); }
[ "$(count 'blob GET auth-ok')" -ge 2 ] || { echo "FAIL: the GETs did not carry the token:"; cat "$DIR/log"; fails=$((fails + 1)); }

# A token that expires within the refresh margin (5 min) is fetched again
# before the next request, never used past its life.
server --expires-in 120
check 0 "load with short-lived tokens" "$PINIO" load "$URL" --sha256 "$SUM"
[ "$(count token)" -ge 3 ] || { echo "FAIL: $(count token) token exchanges for short-lived tokens, want one per request"; fails=$((fails + 1)); }

# A refused exchange, an unreadable file, a missing variable: one line
# naming the source, never a fall to unsigned requests.
server
echo "another-token" >"$DIR/bad-token"
AZURE_FEDERATED_TOKEN_FILE="$DIR/bad-token" check 1 "a refused exchange" "$PINIO" load "$URL"
has "$DIR/err" "workload identity: the token endpoint http://127.0.0.1:$PORT/ answered HTTP 400 invalid_client (AZURE_FEDERATED_TOKEN_FILE" "the refusal named"
[ "$(wc -l <"$DIR/err")" -eq 1 ] || { echo "FAIL: the refusal is not one line:"; cat "$DIR/err"; fails=$((fails + 1)); }
[ "$(count blob)" -eq 0 ] || { echo "FAIL: blob requests went out without a token:"; cat "$DIR/log"; fails=$((fails + 1)); }
AZURE_FEDERATED_TOKEN_FILE="$DIR/none" check 1 "no token file" "$PINIO" load "$URL"
has "$DIR/err" "$DIR/none: AZURE_FEDERATED_TOKEN_FILE cannot be read: No such file or directory" "the missing file named"
check 1 "no AZURE_TENANT_ID" env -u AZURE_TENANT_ID "$PINIO" load "$URL"
has "$DIR/err" "AZURE_TENANT_ID: not set, and AZURE_FEDERATED_TOKEN_FILE is" "the missing variable named"

# Never a token in the output.
: >"$DIR/all"
for f in "$DIR/sa-token" "$DIR/bad-token"; do
    AZURE_FEDERATED_TOKEN_FILE=$f "$PINIO" load "$URL" --json >>"$DIR/all" 2>&1
    AZURE_FEDERATED_TOKEN_FILE=$f "$PINIO" load az://models/other/ >>"$DIR/all" 2>&1
done
if grep -q "pinio-federated-F3\|another-token\|tok-[0-9]" "$DIR/all"; then
    echo "FAIL: a token was printed:"; grep "pinio-federated-F3\|another-token\|tok-[0-9]" "$DIR/all"; fails=$((fails + 1))
fi

[ "$fails" -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "ok"
