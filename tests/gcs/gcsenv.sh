# The gs:// tests' endpoint (sourced; POSIX sh): s3rver (tests/s3/s3env.sh)
# behind gcsproxy.py, which checks each request's Google-side authorisation.
#
#   gcs_begin NAME   s3_scratch NAME, s3rver started with a bucket "models",
#                    the GOOGLE_* and STORAGE_EMULATOR_HOST variables
#                    cleared, NO_GCE_CHECK=True (a test on a GCE machine must
#                    not get its metadata server's token); every server
#                    stopped and the scratch folder removed on exit
#   gcs_proxy AUTH [UPSTREAM]  (re)starts gcsproxy.py checking AUTH (anon,
#                    hmac:ID:SECRET, bearer:FILE) in front of UPSTREAM
#                    (default s3rver), its log $DIR/gcs.log emptied, and
#                    points STORAGE_EMULATOR_HOST at it
#   gcs_proxy_stop   stops it
#
# The caller sets SRC (the source root).

. "$SRC/tests/s3/s3env.sh"

GP_PID=""
gcs_proxy_stop() {
    [ -n "$GP_PID" ] && { kill "$GP_PID" 2>/dev/null; wait "$GP_PID" 2>/dev/null; }
    GP_PID=""
}

gcs_cleanup() { s3_cleanup; }

gcs_begin() {
    s3_on_exit gcs_proxy_stop
    s3_test "$1" models
    unset GOOGLE_HMAC_ACCESS_ID GOOGLE_HMAC_SECRET GOOGLE_APPLICATION_CREDENTIALS \
        STORAGE_EMULATOR_HOST GCE_METADATA_HOST
    export NO_GCE_CHECK=True
}

gcs_proxy() {
    gcs_proxy_stop
    : >"$DIR/gcs.log"
    py_server_start gcs ../gcs/gcsproxy.py "${2:-$S3_URL}" "$DIR/gcs.log" --auth "$1"
    GP_PID=$PY_PID
    export STORAGE_EMULATOR_HOST="http://127.0.0.1:$PY_PORT"
}
