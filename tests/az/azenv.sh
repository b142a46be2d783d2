# The Azure tests' server (sourced; POSIX sh): Azurite's blob service on
# 127.0.0.1 at a free port with a temporary data folder, stopped and removed
# on exit, failure and skip alike. Azurite checks SharedKey and SAS
# signatures as Azure does.
#
#   az_begin NAME    az_scratch NAME, az_start and a container "models"
#   az_scratch NAME  the test's scratch folder DIR, fails=0, cli.sh's helpers
#   az_start         starts Azurite; sets AZ_ENDPOINT (its blob endpoint,
#                    http://127.0.0.1:PORT/devstoreaccount1) and AZ_CS (a
#                    connection string with the well-known account and key),
#                    exports AZURE_STORAGE_CONNECTION_STRING=$AZ_CS and clears
#                    the other AZURE_* variables
#   az_tool ARGS...  tests/az/az_tool.py against it (containers, uploads with
#                    the Azure SDK, SAS tokens)
#   az_stop          stops it and removes its folder (also run on exit)
#   az_proxy_start ARGS...  the fault proxy between pinio and Azurite
#
# Azurite comes from the npm registry: scripts/bootstrap installs it into
# build-deps/azurite/ (git-ignored); PINIO_AZURITE names another one. Without
# node, Azurite or the Azure SDK (Debian's python3-azure) the test skips
# (77), saying which is missing. The caller sets SRC (the source root).

. "$SRC/tests/s3/s3env.sh" # s3_scratch, s3_skip, s3_cleanup, s3_proxy_start

AZ_PID=""
AZ_DATA=""
AZ_ACCOUNT=devstoreaccount1
AZ_KEY='Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=='

az_stop() {
    [ -n "$AZ_PID" ] && { kill "$AZ_PID" 2>/dev/null; wait "$AZ_PID" 2>/dev/null; }
    [ -n "$AZ_DATA" ] && rm -rf "$AZ_DATA" "$AZ_DATA.log"
    AZ_PID="" AZ_DATA=""
}

az_cleanup() {
    s3_proxy_stop
    az_stop
    s3_cleanup
}

az_scratch() {
    s3_scratch "$1" || return 1
    trap 'az_cleanup' EXIT
    trap 'az_cleanup; exit 1' INT TERM
}

az_skip() {
    az_stop
    s3_skip "$1"
}

# az_port FILE SED PID: the port PID writes into FILE (SED prints it), once
# it has, within 60 s; fails when PID exits first or the time runs out.
az_port() {
    n=0
    until p=$(sed -n "$2" "$1" | head -n 1); [ -n "$p" ]; do
        kill -0 "$3" 2>/dev/null && [ $n -lt 600 ] || return 1
        n=$((n + 1))
        sleep 0.1
    done
    echo "$p"
}

# az_begin NAME: az_scratch NAME, az_start, and a container "models".
az_begin() {
    az_scratch "$1" || exit 1
    az_start || exit 1
    az_tool container models || exit 1
}

az_start() {
    command -v node >/dev/null 2>&1 ||
        az_skip "node is not installed (Debian's nodejs; scripts/bootstrap installs it)"
    AZURITE=${PINIO_AZURITE:-$SRC/build-deps/azurite/node_modules/.bin/azurite-blob}
    [ -x "$AZURITE" ] || AZURITE=$(command -v azurite-blob 2>/dev/null || true)
    [ -n "$AZURITE" ] || az_skip "Azurite is not installed (scripts/bootstrap installs it from the npm registry into build-deps/azurite)"
    /usr/bin/python3 -c 'import azure.storage.blob' 2>/dev/null ||
        az_skip "the Azure SDK for Python is not installed (Debian's python3-azure; scripts/bootstrap installs it)"
    AZ_DATA=$(mktemp -d "${TMPDIR:-/tmp}/pinio-${PINIO_TEST_RUN:-p$$}-azurite.XXXXXX") || return 1
    # Port 0: the kernel picks a free one; Azurite says which.
    "$AZURITE" --blobHost 127.0.0.1 --blobPort 0 --location "$AZ_DATA" --silent \
        --skipApiVersionCheck --disableTelemetry >"$AZ_DATA.log" 2>&1 &
    AZ_PID=$!
    port=$(az_port "$AZ_DATA.log" 's|.*listens on http://127\.0\.0\.1:\([0-9][0-9]*\).*|\1|p' "$AZ_PID") ||
        { echo "FAIL: Azurite did not start:"; cat "$AZ_DATA.log"; return 1; }
    AZ_PORT=$port
    AZ_ENDPOINT="http://127.0.0.1:$port/$AZ_ACCOUNT"
    export AZ_CS="DefaultEndpointsProtocol=http;AccountName=$AZ_ACCOUNT;AccountKey=$AZ_KEY;BlobEndpoint=$AZ_ENDPOINT;"
    unset AZURE_STORAGE_ACCOUNT AZURE_STORAGE_KEY AZURE_STORAGE_SAS_TOKEN AZURE_FEDERATED_TOKEN_FILE \
        AZURE_CLIENT_ID AZURE_TENANT_ID AZURE_AUTHORITY_HOST
    export AZURE_STORAGE_CONNECTION_STRING="$AZ_CS"
    return 0
}

az_tool() {
    /usr/bin/python3 "$SRC/tests/az/az_tool.py" "$@"
}

# The tests' fault proxy (tests/s3/faultproxy.py) in front of Azurite:
# az_proxy_start ARGS... (re)starts it with ARGS (s3_proxy_start) and points
# pinio's connection string at it; AZ_CS, for the uploads, stays on Azurite.
az_proxy_start() {
    UPSTREAM="http://127.0.0.1:$AZ_PORT"
    s3_proxy_start "$@"
    export AZURE_STORAGE_CONNECTION_STRING="AccountName=$AZ_ACCOUNT;AccountKey=$AZ_KEY;BlobEndpoint=$AWS_ENDPOINT_URL/$AZ_ACCOUNT"
}
