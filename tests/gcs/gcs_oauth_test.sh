#!/bin/sh
# gs:// with a service account (GOOGLE_APPLICATION_CREDENTIALS, a JSON key
# made here with openssl): tokenserver.py verifies the JWT's RS256
# signature with the account's public key and its claims before issuing a
# token, and gcsproxy.py (in front of s3rver) takes only requests that
# carry a token it issued. One exchange per load, the bearer on every
# request, byte-exact; short-lived tokens fetched again; a refusing token
# endpoint, an unreachable one, a bad key file and a key of another account
# named in one line; the GCE metadata server (GCE_METADATA_HOST: the same
# stand-in, Metadata-Flavor required) the same way, a configured one that
# refuses or does not answer named; pinio doctor names the account or the
# metadata server; neither the private key nor a token printed.
# usage: gcs_oauth_test.sh PINIO SRC_ROOT
[ "${1:-}" = --help ] && { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0; }
PINIO=$1
SRC=$2
. "$SRC/tests/s3/s3env.sh"
GP_PID="" TS_PID=""
srv_stop() {
    for p in $GP_PID $TS_PID; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    GP_PID="" TS_PID=""
}
s3_on_exit srv_stop
s3_test gcsoauth models
/usr/bin/python3 -c 'import cryptography' 2>/dev/null ||
    s3_skip "Python's cryptography module is not installed (Debian's python3-cryptography)"
command -v openssl >/dev/null 2>&1 || s3_skip "openssl is not installed"
unset GOOGLE_HMAC_ACCESS_ID GOOGLE_HMAC_SECRET GOOGLE_APPLICATION_CREDENTIALS STORAGE_EMULATOR_HOST \
    GCE_METADATA_HOST NO_GCE_CHECK
"$PINIO" gen "$DIR/m.safetensors" --size 20M --seed 5 >/dev/null || exit 1
SUM=$(sha256sum "$DIR/m.safetensors" | cut -d' ' -f1)
s3_put models m.safetensors "$DIR/m.safetensors" || exit 1
URL=gs://models/m.safetensors
EMAIL=pinio-test@pinio-tests.iam.gserviceaccount.com
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$DIR/key.pem" 2>/dev/null &&
    openssl pkey -in "$DIR/key.pem" -pubout -out "$DIR/pub.pem" || exit 1
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$DIR/other.pem" 2>/dev/null || exit 1

# sa_json FILE KEY TOKEN_URI: a service account key file as the console writes one.
sa_json() {
    /usr/bin/python3 - "$@" "$EMAIL" <<'PY' || exit 1
import json, sys
out, key, uri, email = sys.argv[1:]
json.dump({"type": "service_account", "project_id": "pinio-tests", "private_key_id": "k1",
           "private_key": open(key).read(), "client_email": email, "client_id": "1",
           "auth_uri": "https://accounts.google.com/o/oauth2/auth", "token_uri": uri,
           "universe_domain": "googleapis.com"}, open(out, "w"), indent=2)
PY
}
# servers ARGS...: (re)starts tokenserver.py ARGS and gcsproxy.py taking its
# tokens; writes $DIR/sa.json for them and points pinio at both.
servers() {
    srv_stop
    : >"$DIR/tokens"
    : >"$DIR/log"
    py_server_start token ../gcs/tokenserver.py "$DIR/pub.pem" "$EMAIL" "$DIR/tokens" "$DIR/log" "$@"
    TS_PID=$PY_PID TS_PORT=$PY_PORT
    py_server_start gcs ../gcs/gcsproxy.py "$S3_URL" "$DIR/log" --auth "bearer:$DIR/tokens"
    GP_PID=$PY_PID
    export STORAGE_EMULATOR_HOST="http://127.0.0.1:$PY_PORT"
    sa_json "$DIR/sa.json" "$DIR/key.pem" "http://127.0.0.1:$TS_PORT/token"
    export GOOGLE_APPLICATION_CREDENTIALS="$DIR/sa.json"
}
count() { grep -c "^$1" "$DIR/log"; }
# one_token KIND: one token fetched (KIND "token": a verified JWT exchange;
# "metadata": a GET with Metadata-Flavor), none refused, and every object
# request carrying an issued token.
one_token() {
    [ "$(count "$1 ok")" -eq 1 ] && [ "$(count "$1 bad")" -eq 0 ] ||
        { echo "FAIL: want 1 accepted $1 request:"; cat "$DIR/log"; fails=$((fails + 1)); }
    [ "$(count 'GET .* auth-ok')" -ge 2 ] && [ "$(count '.* auth-bad')" -eq 0 ] ||
        { echo "FAIL: $1: the requests did not all carry an issued token:"; cat "$DIR/log"; fails=$((fails + 1)); }
}
no_secret() {
    for t in $(cat "$DIR/tokens") "$(sed -n 2p "$DIR/key.pem")"; do
        grep -qF -- "$t" "$DIR/out" "$DIR/err" &&
            { echo "FAIL: $1 printed a token or the private key"; fails=$((fails + 1)); }
    done
}

servers
check 0 "load with a service account" "$PINIO" load "$URL" --sha256 "$SUM"
no_secret "a load"
one_token token
check 0 "info with a service account" "$PINIO" info "$URL" --json
check 0 "load gs://models/ (a listing)" "$PINIO" load gs://models/ --verify
# pinio doctor names the account whose token answered; the HEAD carried it.
check 0 "doctor with a service account" "$PINIO" doctor "$URL" --json
json "doctor: the account named" "j['verdict'] == 'reachable' and j['credentials']['source'] == \
\"service account $EMAIL's token (GOOGLE_APPLICATION_CREDENTIALS)\""
no_secret "doctor"

# A token that expires within the refresh margin (5 min) is fetched again
# before the next request, never used past its life.
servers --expires-in 120
check 0 "load with short-lived tokens" "$PINIO" load "$URL" --sha256 "$SUM"
[ "$(count 'token ok')" -ge 3 ] || { echo "FAIL: $(count token) exchanges for short-lived tokens, want one per request"; fails=$((fails + 1)); }

# Python reads the same way.
if [ "${PINIO_GCS_PYTHON:-1}" = 1 ]; then
    /usr/bin/python3 -c 'import sys, torch, pinio
from pinio.safetensors.torch import load_file
raw = lambda t: (t.dtype, tuple(t.shape), t.flatten().view(torch.uint8).numpy().tobytes())
want = {k: raw(v) for k, v in load_file(sys.argv[2]).items()}
assert {k: raw(v) for k, v in pinio.load(sys.argv[1], framework="pt").items()} == want' \
        "$URL" "$DIR/m.safetensors" >"$DIR/out" 2>"$DIR/err" ||
        { echo "FAIL: Python pinio.load with a service account:"; cat "$DIR/err"; fails=$((fails + 1)); }
fi

# Failures: one line naming the variable, the file and the endpoint; no
# object request goes out without a token.
servers --refuse
check 1 "a refusing token endpoint" "$PINIO" load "$URL"
has "$DIR/err" "GOOGLE_APPLICATION_CREDENTIALS: $DIR/sa.json: the token endpoint http://127.0.0.1:$TS_PORT/token answered HTTP 401 unauthorized_client" \
    "the refusal named"
[ "$(wc -l <"$DIR/err")" -eq 1 ] || { echo "FAIL: not one line:"; cat "$DIR/err"; fails=$((fails + 1)); }
[ "$(count GET)" -eq 0 ] && [ "$(count HEAD)" -eq 0 ] ||
    { echo "FAIL: object requests went out without a token:"; cat "$DIR/log"; fails=$((fails + 1)); }
no_secret "a refusal"
servers
sa_json "$DIR/sa.json" "$DIR/other.pem" "http://127.0.0.1:$TS_PORT/token"
check 1 "a key the account does not have" "$PINIO" load "$URL"
has "$DIR/err" "answered HTTP 400 invalid_grant" "the bad signature refused"
grep -q "token bad the RS256 signature does not verify" "$DIR/log" ||
    { echo "FAIL: the token server did not see a bad signature:"; cat "$DIR/log"; fails=$((fails + 1)); }
sa_json "$DIR/sa.json" "$DIR/key.pem" "http://127.0.0.1:1/token"
check 1 "an unreachable token endpoint" "$PINIO" load "$URL"
has "$DIR/err" "GOOGLE_APPLICATION_CREDENTIALS: $DIR/sa.json: the token endpoint http://127.0.0.1:1/token: " \
    "the unreachable endpoint named"
echo '{"type": "authorized_user", "client_id": "x"}' >"$DIR/user.json"
GOOGLE_APPLICATION_CREDENTIALS="$DIR/user.json" check 1 "a user's credentials file" "$PINIO" load "$URL"
has "$DIR/err" "GOOGLE_APPLICATION_CREDENTIALS: $DIR/user.json: its \"type\" is not \"service_account\"" "another type named"
printf '{"type": "service_account", "client_email": "a@b", "private_key": "not a key"}' >"$DIR/bad.json"
GOOGLE_APPLICATION_CREDENTIALS="$DIR/bad.json" check 1 "a key file without a PEM key" "$PINIO" load "$URL"
has "$DIR/err" "$DIR/bad.json: its private_key is not a PEM RSA private key" "the bad key named"
printf '{"type": "service_account",' >"$DIR/cut.json"
GOOGLE_APPLICATION_CREDENTIALS="$DIR/cut.json" check 1 "a cut key file" "$PINIO" load "$URL"
has "$DIR/err" "$DIR/cut.json: not a JSON object" "the cut file named"
GOOGLE_APPLICATION_CREDENTIALS="$DIR/none.json" check 1 "a missing key file" "$PINIO" load "$URL"
has "$DIR/err" "GOOGLE_APPLICATION_CREDENTIALS: cannot open $DIR/none.json" "the missing file named"

# --- the GCE metadata server (GCE_METADATA_HOST: tokenserver.py's stand-in) ---
servers
unset GOOGLE_APPLICATION_CREDENTIALS
export GCE_METADATA_HOST="127.0.0.1:$TS_PORT"
check 0 "load with the metadata server's token" "$PINIO" load "$URL" --sha256 "$SUM"
no_secret "a metadata load"
one_token metadata
check 0 "doctor with the metadata server" "$PINIO" doctor "$URL"
has "$DIR/out" "^credentials  the GCE metadata server's token$" "doctor: the metadata server named"
no_secret "doctor"
servers --expires-in 120
unset GOOGLE_APPLICATION_CREDENTIALS
export GCE_METADATA_HOST="127.0.0.1:$TS_PORT"
check 0 "load with short-lived metadata tokens" "$PINIO" load "$URL" --sha256 "$SUM"
[ "$(count 'metadata ok')" -ge 3 ] || { echo "FAIL: $(count metadata) metadata requests for short-lived tokens"; fails=$((fails + 1)); }
servers --refuse
unset GOOGLE_APPLICATION_CREDENTIALS
GCE_METADATA_HOST="127.0.0.1:$TS_PORT" check 1 "a refusing metadata server" "$PINIO" load "$URL"
has "$DIR/err" "the GCE metadata server (GCE_METADATA_HOST): the token endpoint http://127.0.0.1:$TS_PORT/computeMetadata/v1/instance/service-accounts/default/token answered HTTP 403" \
    "the refusing metadata server named"
[ "$(count GET)" -eq 0 ] || { echo "FAIL: object requests went out without a token:"; cat "$DIR/log"; fails=$((fails + 1)); }
# A configured metadata host that does not answer is an error (one try),
# never a fall to anonymous requests.
GCE_METADATA_HOST=127.0.0.1:1 check 1 "an unreachable metadata server" "$PINIO" load "$URL"
has "$DIR/err" "the GCE metadata server (GCE_METADATA_HOST): the token endpoint http://127.0.0.1:1/" \
    "the unreachable metadata server named"
# NO_GCE_CHECK=True without a host: anonymous, which the proxy refuses.
NO_GCE_CHECK=True check 1 "NO_GCE_CHECK: anonymous" env -u GCE_METADATA_HOST "$PINIO" load "$URL"
has "$DIR/err" "access denied (403 AccessDenied) with no credentials (anonymous)" "anonymous named"

[ "$fails" -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "ok"
