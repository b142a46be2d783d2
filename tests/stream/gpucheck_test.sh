#!/bin/sh
# bench/gpucheck (what scripts/gpu-check runs on a GPU) through the test
# driver: every byte verified on the "device" with the right seed (exit 0),
# streamed from the file and copied from host memory,
# caught with a wrong one (exit 1), one clear line without a driver.
# Usage: gpucheck_test.sh PATH_TO_PINIO PATH_TO_GPUCHECK   (PINIO_CUDA_LIB set by meson)
set -u
PINIO=$1 GPUCHECK=$2
DIR=$(mktemp -d "/var/tmp/pinio-${PINIO_TEST_RUN:-p$$}-gpucheck-XXXXXX") || exit 1
trap 'rm -rf "$DIR"' EXIT
fails=0
"$PINIO" gen "$DIR/m.safetensors" --size 6M --tensors 20 --seed 11 --quiet || exit 1
"$GPUCHECK" "$DIR/m.safetensors" 11 0 1 4 >"$DIR/out" 2>&1 ||
    { echo "FAIL: gpucheck"; cat "$DIR/out"; fails=$((fails + 1)); }
grep -q "verified on device: 6291456 of 6291456 bytes, ok" "$DIR/out" ||
    { echo "FAIL: not every byte verified"; cat "$DIR/out"; fails=$((fails + 1)); }
grep -q "^from host memory: 0.006 GB of 20 tensors in " "$DIR/out" ||
    { echo "FAIL: no copy from host memory"; cat "$DIR/out"; fails=$((fails + 1)); }
[ "$(grep -c "verified on device: 6291456 of 6291456 bytes, ok" "$DIR/out")" -eq 2 ] ||
    { echo "FAIL: the copy from host memory not verified"; cat "$DIR/out"; fails=$((fails + 1)); }
grep -q "pinned cuMemcpyHtoD of 4 MiB" "$DIR/out" ||
    { echo "FAIL: no pinned reference"; cat "$DIR/out"; fails=$((fails + 1)); }
if "$GPUCHECK" "$DIR/m.safetensors" 12 0 1 4 >"$DIR/out" 2>&1; then
    echo "FAIL: a wrong seed passed"; fails=$((fails + 1))
fi
grep -q "FAILED" "$DIR/out" || { echo "FAIL: no FAILED line"; cat "$DIR/out"; fails=$((fails + 1)); }
if PINIO_CUDA_LIB="$DIR/none.so" "$GPUCHECK" "$DIR/m.safetensors" 11 >"$DIR/out" 2>&1; then
    echo "FAIL: passed without a driver"; fails=$((fails + 1))
fi
grep -q "no CUDA driver: " "$DIR/out" || { echo "FAIL: no clear line"; cat "$DIR/out"; fails=$((fails + 1)); }
[ $fails -eq 0 ] && echo "gpucheck: all checks passed"
exit $((fails > 0))
