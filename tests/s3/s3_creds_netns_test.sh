#!/bin/sh
# AWS_CONTAINER_CREDENTIALS_RELATIVE_URI for real: its address is fixed
# (http://169.254.170.2), so the test runs in a network namespace of its
# own (unshare -n, or -rn without root) where loopback carries
# 169.254.170.2, credserver.py listens there on port 80 and s3rver on
# 127.0.0.1. `pinio load` is byte-exact with the keys fetched there (the
# request seen at the path given), botocore resolves the same keys in the
# same namespace, nothing listening there is an error naming the variable,
# and no token is printed. Skips (77), saying why, where unshare or ip may
# not make that namespace.
# usage: s3_creds_netns_test.sh PINIO SRC_ROOT
[ "${1:-}" = --help ] && { sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0; }
PINIO=$1
SRC=$2
ECS=169.254.170.2
netns_setup() { ip link set lo up && ip addr add "$ECS/32" dev lo; }
if [ "${3:-}" != --in-netns ]; then
    for tool in unshare ip; do
        command -v $tool >/dev/null 2>&1 ||
            { echo "SKIP: $tool is not installed (util-linux, iproute2)"; exit 77; }
    done
    # Root makes the namespace itself; anyone else through a user namespace.
    for how in "-n" "-rn"; do
        if unshare $how sh -c "ip link set lo up && ip addr add $ECS/32 dev lo" >/dev/null 2>&1; then
            exec unshare $how "$0" "$PINIO" "$SRC" --in-netns
        fi
    done
    echo "SKIP: this machine lets neither 'unshare -n' nor 'unshare -rn' make a network" \
        "namespace with $ECS on its loopback (no privilege or user namespaces)"
    exit 77
fi
netns_setup || { echo "FAIL: cannot put $ECS on the namespace's loopback"; exit 1; }
. "$SRC/tests/s3/s3env.sh"
s3_test s3credsns models
"$PINIO" gen "$DIR/one.safetensors" --size 4M --seed 5 >/dev/null || exit 1
s3_put models one.safetensors "$DIR/one.safetensors" || exit 1
SUM=$(sha256sum "$DIR/one.safetensors" | cut -d' ' -f1)
URL=s3://models/one.safetensors
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY
REL=/v2/credentials/pinio-task-0123
export AWS_CONTAINER_CREDENTIALS_RELATIVE_URI=$REL

cred_start --listen "$ECS:80"
check 0 "relative URI: load" "$PINIO" load "$URL" --sha256 "$SUM"
has "$DIR/out" "sha256    $SUM  $URL" "relative URI: byte-exact"
has "$DIR/cred.log" "^GET $REL " "relative URI: the credentials asked at $ECS$REL"
check 0 "relative URI: doctor" "$PINIO" doctor "$URL"
has "$DIR/out" "^credentials  container credentials (AWS_CONTAINER_CREDENTIALS_RELATIVE_URI=$REL)$" "doctor: the source"
grep -q NeverPrint "$DIR/out" "$DIR/err" && { echo "FAIL: a token printed"; fails=$((fails + 1)); }
hash16() { printf %s "$1" | sha256sum | cut -c1-16; }
got=$(/usr/bin/python3 "$SRC/tests/s3/botocore_check.py" --creds 2>&1)
if [ $? -eq 77 ]; then
    echo "note: botocore not installed, not cross-checked"
else
    want="container-role S3RVER $(hash16 S3RVER) $(hash16 pinio-test-session-NeverPrint)"
    [ "$got" = "$want" ] || { echo "FAIL: botocore resolves '$got', want '$want'"; fails=$((fails + 1)); }
fi
cred_stop
check 1 "relative URI, nothing listening" "$PINIO" load "$URL"
has "$DIR/err" "container credentials (AWS_CONTAINER_CREDENTIALS_RELATIVE_URI=$REL): " "nothing listening: the error names the source"

[ "$fails" -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "ok"
