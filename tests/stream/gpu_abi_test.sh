#!/bin/sh
# The GPU driver table (src/stream/gpu_dl.h) against the real driver
# artifacts that exist without a GPU (issue 29):
#   cuda  the toolkit's cuda.h: gpu_abi.c, compiled here beside it, asserts
#         every constant, type and prototype and that each symbol is the
#         versioned name cuda.h maps to; its stub lib64/stubs/libcuda.so:
#         every symbol resolves, cuInit answers CUDA_ERROR_STUB_LIBRARY;
#         with PINIO_CUDA_LIB=the stub, pinio load --device cuda:0 and
#         pinio doctor say it is the toolkit's stub and no driver is installed;
#         the installed driver (libcuda.so.1, or PINIO_CUDA_LIB), if any:
#         every symbol resolves in it too.
#   hip   Debian's libamdhip64 (libamdhip64.so.5): every symbol resolves;
#         without a GPU, pinio load --device hip:0 gives one "no HIP device"
#         line (exit 1, no crash, no hang) and pinio doctor says the same.
# Compiled at test time, so that the build never needs the toolkit; skipped
# (77) with the reason where the toolkit or the runtime is absent. CUDA is
# found by CUDA_HOME, /usr/local/cuda, or nvcc on PATH.
# Usage: gpu_abi_test.sh cuda|hip SOURCE_ROOT PATH_TO_PINIO CC [CC_ARGS...]
set -u
API=$1 SRC=$2 PINIO=$3
shift 3
[ $# -gt 0 ] || set -- cc
DIR=$(mktemp -d /var/tmp/pinio-${PINIO_TEST_RUN:-p$$}-gpuabi-XXXXXX) || exit 1
trap 'rm -rf "$DIR"' EXIT
. "$(dirname "$0")/cli_helpers.sh"
# Each pinio run is bounded: a driver that hangs without a GPU is a failure.
T="timeout -k 5 120"

cuda_root() {
    for c in "${CUDA_HOME:-}" /usr/local/cuda; do
        [ -n "$c" ] && [ -f "$c/include/cuda.h" ] && { echo "$c"; return; }
    done
    nvcc=$(command -v nvcc 2>/dev/null) || return
    c=$(dirname "$(dirname "$(readlink -f "$nvcc")")")
    [ -f "$c/include/cuda.h" ] && echo "$c"
}

if [ "$API" = cuda ]; then
    CUDA=$(cuda_root)
    if [ -z "$CUDA" ]; then
        echo "SKIP: no CUDA toolkit (no include/cuda.h under CUDA_HOME='${CUDA_HOME:-}'," \
             "/usr/local/cuda, or beside nvcc on PATH)"
        exit 77
    fi
    STUB=
    for s in "$CUDA"/lib64/stubs/libcuda.so "$CUDA"/lib/stubs/libcuda.so \
             "$CUDA"/targets/*/lib/stubs/libcuda.so; do
        [ -f "$s" ] && { STUB=$s; break; }
    done
    echo "toolkit $CUDA, stub ${STUB:-(none)}"
    if ! "$@" -std=c11 -Wall -Wextra -DPINIO_WITH_CUDA_H -I"$SRC" -I"$SRC/include" \
            -I"$CUDA/include" -o "$DIR/gpu_abi" "$SRC/tests/stream/gpu_abi.c" -ldl \
            >"$DIR/cc" 2>&1; then
        echo "FAIL: gpu_dl.h does not hold against $CUDA/include/cuda.h:"
        grep -E "error|assert" "$DIR/cc" | head -20
        exit 1
    fi
    [ -s "$DIR/cc" ] && cat "$DIR/cc"
    echo "compile-time checks against $CUDA/include/cuda.h passed"
    if [ -z "$STUB" ]; then
        echo "SKIP: $CUDA has cuda.h but no stubs/libcuda.so (compile-time checks passed)"
        exit 77
    fi
    check 0 "every symbol in the stub" "$DIR/gpu_abi" cuda "$STUB" stub
    [ "$got" -ne 0 ] || cat "$DIR/out"
    CK=$DIR/m.safetensors
    check 0 "gen" "$PINIO" gen "$CK" --size 1M --tensors 4 --quiet
    check 1 "load --device cuda:0 on the stub" env PINIO_CUDA_LIB="$STUB" $T "$PINIO" load \
        --device cuda:0 "$CK"
    has "$DIR/err" "^pinio load: no CUDA driver installed: $STUB is the CUDA toolkit's stub" \
        "load says it is the toolkit's stub and no driver is installed"
    [ "$(wc -l <"$DIR/err")" -eq 1 ] || { echo "FAIL: more than one line"; fails=$((fails + 1)); }
    cat "$DIR/err"
    env PINIO_CUDA_LIB="$STUB" $T "$PINIO" doctor "$DIR" >"$DIR/out" 2>"$DIR/err"
    [ $? -le 1 ] || { echo "FAIL: doctor on the stub: exit"; cat "$DIR/err"; fails=$((fails + 1)); }
    has "$DIR/out" "^cuda  *no: no CUDA driver installed: $STUB is the CUDA toolkit's stub" \
        "doctor says it is the toolkit's stub"
    # The installed driver, where there is one (a GPU machine; PINIO_CUDA_LIB
    # names another): every name resolves in it too.
    DRV=${PINIO_CUDA_LIB:-libcuda.so.1}
    "$DIR/gpu_abi" cuda "$DRV" >"$DIR/out" 2>&1
    case $? in
    0) cat "$DIR/out" ;;
    3) echo "no installed CUDA driver ($(cat "$DIR/out")): checked against the toolkit only" ;;
    *) echo "FAIL: the installed driver $DRV:"; cat "$DIR/out"; fails=$((fails + 1)) ;;
    esac
    [ $fails -eq 0 ] && echo "gpu_abi cuda: all checks passed"
    exit $((fails > 0))
fi

[ "$API" = hip ] || { echo "usage: gpu_abi_test.sh cuda|hip SOURCE_ROOT PINIO CC..."; exit 2; }
# The runtime pinio would open, in its order (src/stream/gpu_dl.c).
HIP=
for l in libamdhip64.so libamdhip64.so.7 libamdhip64.so.6 libamdhip64.so.5; do
    HIP=$(ldconfig -p 2>/dev/null | awk -v l="$l" '$1 == l { print $NF; exit }')
    [ -n "$HIP" ] && break
done
if [ -z "$HIP" ]; then
    echo "SKIP: no HIP runtime (libamdhip64.so[.7/.6/.5] not in the ld.so cache;" \
         "Debian: libamdhip64-5)"
    exit 77
fi
echo "HIP runtime $HIP"
if ! "$@" -std=c11 -Wall -Wextra -I"$SRC" -I"$SRC/include" -o "$DIR/gpu_abi" \
        "$SRC/tests/stream/gpu_abi.c" -ldl >"$DIR/cc" 2>&1; then
    echo "FAIL: gpu_abi.c does not compile:"; cat "$DIR/cc"; exit 1
fi
check 0 "every symbol in $HIP, hipInit and hipGetDeviceCount" $T "$DIR/gpu_abi" hip "$HIP"
[ "$got" -ne 0 ] || cat "$DIR/out"
if [ -e /dev/kfd ]; then
    echo "SKIP: /dev/kfd exists (an AMD GPU may be here): the no-device answers are not checked"
    [ $fails -eq 0 ] || exit 1
    exit 77
fi
CK=$DIR/m.safetensors
check 0 "gen" "$PINIO" gen "$CK" --size 1M --tensors 4 --quiet
check 1 "load --device hip:0 without a GPU" env PINIO_HIP_LIB="$HIP" $T "$PINIO" load \
    --device hip:0 "$CK"
has "$DIR/err" "^pinio load: no HIP device: " "one clear line: no device"
has "$DIR/err" "hipInit answered .*; no /dev/kfd" "the answer and the reason: no /dev/kfd"
[ "$(wc -l <"$DIR/err")" -eq 1 ] || { echo "FAIL: more than one line"; fails=$((fails + 1)); }
cat "$DIR/err"
# doctor finds the runtime by its own search, as a user runs it (without
# LD_LIBRARY_PATH: meson puts the test driver's folder there, and the test
# driver is a libamdhip64.so too).
env -u PINIO_HIP_LIB -u LD_LIBRARY_PATH $T "$PINIO" doctor "$DIR" >"$DIR/out" 2>"$DIR/err"
[ $? -le 1 ] || { echo "FAIL: doctor with HIP, no GPU: exit"; cat "$DIR/err"; fails=$((fails + 1)); }
has "$DIR/out" "^hip  *no: no HIP device: " "doctor says there is no HIP device"
[ $fails -eq 0 ] && echo "gpu_abi hip: all checks passed"
exit $((fails > 0))
