#!/bin/sh
# TLS trust for an https:// endpoint with a private CA (a self-signed
# certificate made by openssl at test time; tlsrelay.py in front of s3rver):
# refused without the certificate (failing closed, naming the endpoint's
# TLS failure), byte-exact with it given as AWS_CA_BUNDLE, the profile's
# ca_bundle, SSL_CERT_FILE or SSL_CERT_DIR; a bundle that is not there named.
# usage: s3_tls_test.sh PINIO SRC_ROOT
[ "${1:-}" = --help ] && { sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0; }
PINIO=$1
SRC=$2
. "$SRC/tests/s3/s3env.sh"
s3_test s3tls models
command -v openssl >/dev/null 2>&1 || s3_skip "openssl is not installed (Debian's openssl)"
"$PINIO" gen "$DIR/one.safetensors" --size 2M --seed 5 >/dev/null || exit 1
s3_put models one.safetensors "$DIR/one.safetensors" || exit 1
SUM=$(sha256sum "$DIR/one.safetensors" | cut -d' ' -f1)
URL=s3://models/one.safetensors
mkdir "$DIR/certs"
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 \
    -addext subjectAltName=IP:127.0.0.1 -keyout "$DIR/key.pem" -out "$DIR/certs/ca.pem" \
    >/dev/null 2>&1 || { echo "FAIL: openssl could not make a certificate"; exit 1; }
openssl rehash "$DIR/certs" >/dev/null 2>&1 || { echo "FAIL: openssl rehash"; exit 1; }

RELAY_PID=""
trap '[ -n "$RELAY_PID" ] && kill "$RELAY_PID" 2>/dev/null; s3_cleanup' EXIT
py_server_start relay tlsrelay.py "$DIR/certs/ca.pem" "$DIR/key.pem" "$S3_PORT"
RELAY_PID=$PY_PID
export AWS_ENDPOINT_URL="https://127.0.0.1:$PY_PORT"

load_ok() {
    check 0 "$1: load" "$PINIO" load "$URL" --sha256 "$SUM"
    has "$DIR/out" "sha256    $SUM  $URL" "$1: byte-exact"
}
check 1 "no CA: refused" "$PINIO" load "$URL"
has "$DIR/err" "s3://models/one.safetensors" "no CA: the object named"
grep -qi -e certificate -e SSL "$DIR/err" || { echo "FAIL: no CA: the TLS failure not said:"; cat "$DIR/err"; fails=$((fails + 1)); }
AWS_CA_BUNDLE=$DIR/certs/ca.pem load_ok "AWS_CA_BUNDLE"
SSL_CERT_FILE=$DIR/certs/ca.pem load_ok "SSL_CERT_FILE"
SSL_CERT_DIR=$DIR/certs load_ok "SSL_CERT_DIR"
printf '[default]\nca_bundle = %s\n' "$DIR/certs/ca.pem" >"$DIR/config"
AWS_CONFIG_FILE=$DIR/config load_ok "the profile's ca_bundle"
check 1 "a missing AWS_CA_BUNDLE" env AWS_CA_BUNDLE="$DIR/nope.pem" "$PINIO" load "$URL"
has "$DIR/err" "AWS_CA_BUNDLE: no such certificate file" "a missing bundle named"

[ "$fails" -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "ok"
