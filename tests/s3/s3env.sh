# The S3 tests' server (sourced; POSIX sh): s3rver on 127.0.0.1 at a free
# port with a temporary data folder, stopped and removed on exit, failure
# and skip alike.
#
#   s3_test NAME [BUCKET]  a test's start: s3_scratch NAME, s3_start, BUCKET
#                   made; a failure there ends the test (exit 1, cleaned up)
#   s3_on_exit FUNC FUNC (a test's own stop function) runs when the test
#                   ends, before s3rver stops: on exit, failure, skip, signal
#   s3_start        starts it; exports AWS_ENDPOINT_URL and s3rver's fixed
#                   credentials (S3RVER / S3RVER: it checks signatures)
#   s3_bucket NAME  creates a bucket
#   s3_put BUCKET KEY FILE    uploads a file
#   s3_rm BUCKET KEY          deletes an object
#   s3_put_many BUCKET PREFIX N  uploads N empty objects PREFIXpad-00000 ...
#                   (one keep-alive connection: a listing of more than a page)
#   cred_start ARGS  starts credserver.py ARGS (the STS, container and IMDS
#                   endpoints) with its log in $DIR/cred.log; CRED_URL its URL
#   cred_stop       stops it (also run on exit)
#   s3_stop         stops it and removes its folder (also run on exit)
#   s3_scratch NAME the test's scratch folder DIR (removed with the server),
#                   fails=0 and tests/common/cli.sh's check/has/json
#
# s3rver comes from the npm registry: scripts/bootstrap installs it into
# build-deps/s3rver/ (git-ignored); PINIO_S3RVER names another one. Without
# node or s3rver the test skips (77), saying which is missing. The caller
# sets SRC (the source root) and may set PINIO_TEST_RUN.

S3_PID=""
S3_DATA=""
S3_PORT=""
S3_URL=""

s3_stop() {
    if [ -n "$S3_PID" ]; then
        kill "$S3_PID" 2>/dev/null
        wait "$S3_PID" 2>/dev/null
        S3_PID=""
    fi
    if [ -n "$S3_DATA" ]; then
        rm -rf "$S3_DATA" "$S3_DATA.log"
        S3_DATA=""
    fi
}

S3_ON_EXIT=""
s3_on_exit() { S3_ON_EXIT="$S3_ON_EXIT $1"; }

# The folder of the caller's scratch files, removed by s3_cleanup too.
s3_cleanup() {
    for _s3_f in $S3_ON_EXIT; do "$_s3_f"; done
    s3_proxy_stop
    cred_stop
    s3_stop
    [ -n "${S3_EXTRA_CLEAN:-}" ] && rm -rf $S3_EXTRA_CLEAN
    return 0
}

s3_scratch() {
    fails=0
    . "$SRC/tests/common/cli.sh"
    DIR=$(mktemp -d "${TMPDIR:-/tmp}/pinio-${PINIO_TEST_RUN:-p$$}-$1.XXXXXX") || return 1
    S3_EXTRA_CLEAN=$DIR
}

s3_skip() {
    echo "SKIP: $1"
    s3_cleanup
    exit 77
}

s3_find_server() {
    command -v node >/dev/null 2>&1 || command -v nodejs >/dev/null 2>&1 ||
        s3_skip "node is not installed (Debian's nodejs; scripts/bootstrap installs it)"
    S3RVER=${PINIO_S3RVER:-$SRC/build-deps/s3rver/node_modules/.bin/s3rver}
    if [ ! -x "$S3RVER" ]; then
        S3RVER=$(command -v s3rver 2>/dev/null || true)
        [ -n "$S3RVER" ] || s3_skip "s3rver is not installed (scripts/bootstrap installs it from the npm registry into build-deps/s3rver)"
    fi
}

s3_start() {
    s3_find_server
    S3_DATA=$(mktemp -d "${TMPDIR:-/tmp}/pinio-${PINIO_TEST_RUN:-p$$}-s3rver.XXXXXX") || return 1
    trap 's3_cleanup' EXIT
    trap 's3_cleanup; exit 1' INT TERM
    # Port 0: the kernel picks a free one; s3rver says which on its first line.
    # The legacy provider: s3rver 3.7 makes its continuation tokens with DES,
    # which OpenSSL 3 (Node >= 17) has only there; without it every listing
    # past one page (1000 keys) is a 500, and pagination goes untested.
    # The log made here, not only by the background job's redirection,
    # which may come after the first read below (sed: can't read).
    : >"$S3_DATA.log"
    NODE_OPTIONS="${NODE_OPTIONS:+$NODE_OPTIONS }--openssl-legacy-provider" \
        "$S3RVER" -d "$S3_DATA" -a 127.0.0.1 -p 0 >"$S3_DATA.log" 2>&1 &
    S3_PID=$!
    i=0
    while [ $i -lt 300 ]; do
        S3_PORT=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9][0-9]*\).*/\1/p' "$S3_DATA.log" | head -n 1)
        [ -n "$S3_PORT" ] && break
        if ! kill -0 "$S3_PID" 2>/dev/null; then
            echo "FAIL: s3rver exited at start:"; cat "$S3_DATA.log"; S3_PID=""; return 1
        fi
        sleep 0.1; i=$((i + 1))
    done
    if [ -z "$S3_PORT" ]; then
        echo "FAIL: s3rver did not say its port in 30 s:"; cat "$S3_DATA.log"; return 1
    fi
    S3_URL="http://127.0.0.1:$S3_PORT" # the server itself, whatever pinio is pointed at
    export AWS_ENDPOINT_URL="$S3_URL"
    export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER AWS_REGION=us-east-1
    unset AWS_SESSION_TOKEN AWS_PROFILE AWS_ENDPOINT_URL_S3 AWS_DEFAULT_REGION \
        AWS_ROLE_ARN AWS_WEB_IDENTITY_TOKEN_FILE AWS_ROLE_SESSION_NAME AWS_ENDPOINT_URL_STS \
        AWS_CONTAINER_CREDENTIALS_RELATIVE_URI AWS_CONTAINER_CREDENTIALS_FULL_URI \
        AWS_CONTAINER_AUTHORIZATION_TOKEN AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE \
        AWS_EC2_METADATA_SERVICE_ENDPOINT AWS_CA_BUNDLE AWS_NO_SIGN_REQUEST
    # The machine's own instance metadata (on EC2) must not answer a test.
    export AWS_EC2_METADATA_DISABLED=true
    # No ~/.aws of the machine's user may change what the tests see.
    export AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null
    return 0
}

s3_test() {
    s3_scratch "$1" || exit 1
    s3_start || { s3_cleanup; exit 1; }
    [ -z "${2:-}" ] || s3_bucket "$2" || exit 1
}

s3_bucket() {
    code=$(curl -s -o /dev/null -w '%{http_code}' -X PUT "$S3_URL/$1")
    [ "$code" = 200 ] || { echo "FAIL: create bucket $1: HTTP $code"; return 1; }
}

s3_put() {
    code=$(curl -s -o /dev/null -w '%{http_code}' -T "$3" "$S3_URL/$1/$2")
    [ "$code" = 200 ] || { echo "FAIL: upload $3 to $1/$2: HTTP $code"; return 1; }
}

s3_rm() {
    curl -s -o /dev/null -X DELETE "$S3_URL/$1/$2"
}

s3_put_many() {
    /usr/bin/python3 - "$S3_URL" "$1" "$2" "$3" <<'PY' || { echo "FAIL: upload $3 objects to $1/$2"; return 1; }
import http.client, sys, urllib.parse
u = urllib.parse.urlparse(sys.argv[1])
c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
for i in range(int(sys.argv[4])):
    c.request("PUT", f"/{sys.argv[2]}/{sys.argv[3]}pad-{i:05d}", body=b"")
    r = c.getresponse()
    r.read()
    if r.status != 200:
        sys.exit(f"HTTP {r.status} for object {i}")
PY
}

# The tests' fault proxy (faultproxy.py) in front of s3rver. s3_proxy_start
# ARGS... (re)starts it with ARGS and points pinio at it (AWS_ENDPOINT_URL);
# UPSTREAM is s3rver's endpoint. s3_proxy_stop stops it (callers trap it).
PROXY_PID=""
s3_proxy_stop() {
    [ -n "$PROXY_PID" ] && { kill "$PROXY_PID" 2>/dev/null; wait "$PROXY_PID" 2>/dev/null; }
    PROXY_PID=""
}
s3_proxy_start() {
    s3_proxy_stop
    py_server_start proxy faultproxy.py "$UPSTREAM" "$@"
    PROXY_PID=$PY_PID
    export AWS_ENDPOINT_URL="http://127.0.0.1:$PY_PORT"
}
# s3_proxy_counted WHAT PY: the counts of a proxy started with --stats
# "$DIR/stats.json" (s: requests, heads, gets, ranges as [[a, b], ...] in
# arrival order) and the report in $DIR/out (j, parsed as JSON; None when
# it is none) pass the Python assertion PY; else a failure counted, both shown.
s3_proxy_counted() {
    python3 - "$DIR/stats.json" "$DIR/out" "$2" <<'PY' || { echo "FAIL: $1"; fails=$((fails + 1)); }
import json, sys
s = json.load(open(sys.argv[1]))
s["ranges"] = [[int(x) for x in r.split("-")] for r in s["ranges"]]
try:
    j = json.load(open(sys.argv[2]))
except ValueError:
    j = None
ok = eval(sys.argv[3])
if not ok:
    print("proxy:", s, file=sys.stderr)
    print("report:", j if j is None else {k: v for k, v in j.items() if "object" in k},
          file=sys.stderr)
sys.exit(0 if ok else 1)
PY
}
# s3_proxy_faults KIND: how many faults of KIND the proxy has injected so
# far; s3_proxy_wait KIND N waits (60 s at most) until it has N.
s3_proxy_faults() { grep -c "^fault $1 " "$DIR/proxy.err"; }
s3_proxy_wait() {
    n_=0
    while [ $n_ -lt 600 ] && [ "$(s3_proxy_faults "$1")" -lt "$2" ]; do
        sleep 0.1; n_=$((n_ + 1))
    done
}

# py_server_start NAME SCRIPT ARGS...: starts tests/s3/SCRIPT ARGS in the
# background, its stdout in $DIR/NAME.port ("port N" first), and waits for
# the port: PY_PID and PY_PORT. Fails the test when it says none.
py_server_start() {
    name=$1 script=$2
    shift 2
    # Emptied here, not only by the background job's redirection, which may
    # run after the first read below: a restart would read the port of the
    # server it just killed.
    : >"$DIR/$name.port"
    /usr/bin/python3 "$SRC/tests/s3/$script" "$@" >"$DIR/$name.port" 2>"$DIR/$name.err" &
    PY_PID=$!
    i=0 PY_PORT=""
    while [ $i -lt 300 ] && [ -z "$PY_PORT" ] && kill -0 "$PY_PID" 2>/dev/null; do
        sleep 0.1; i=$((i + 1))
        PY_PORT=$(sed -n 's/^port \([0-9][0-9]*\)$/\1/p' "$DIR/$name.port")
    done
    if [ -z "$PY_PORT" ]; then
        kill -0 "$PY_PID" 2>/dev/null && alive="still running" || alive="exited"
        echo "FAIL: $script did not say its port in $((i / 10)) s ($*; $alive):"
        cat "$DIR/$name.err" "$DIR/$name.port"; exit 1
    fi
}

# The tests' credential endpoints (credserver.py): cred_start ARGS...
# (re)starts it with ARGS, its request log emptied; CRED_URL is its URL.
CRED_PID=""
cred_stop() {
    [ -n "$CRED_PID" ] && { kill "$CRED_PID" 2>/dev/null; wait "$CRED_PID" 2>/dev/null; }
    CRED_PID=""
}
cred_start() {
    cred_stop
    : >"$DIR/cred.log"
    py_server_start cred credserver.py "$DIR/cred.log" "$@"
    CRED_PID=$PY_PID
    CRED_URL="http://127.0.0.1:$PY_PORT"
}

# doctor_json WANT WHAT ARGS...: `$PINIO doctor ARGS --json` as check() runs
# it, its output checked against doc/json/doctor.schema.json, and every
# output kept in $DIR/all (for a test's look for secrets).
doctor_json() {
    want_=$1 what_=$2
    shift 2
    check "$want_" "$what_" "$PINIO" doctor "$@" --json
    /usr/bin/python3 "$SRC/tests/tools/json_validate.py" "$SRC/doc/json" doctor "$DIR/out" ||
        { echo "FAIL: $what_: not the schema's"; fails=$((fails + 1)); }
    cat "$DIR/out" "$DIR/err" >>"$DIR/all"
}
