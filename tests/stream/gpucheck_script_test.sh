#!/bin/sh
# scripts/gpu-check, the first command run when a GPU is lent, on the build's
# binaries (NO_BUILD=1) through the test driver (PINIO_CUDA_LIB, set by
# meson): --help answers; with no driver, a driver that is the toolkit's
# stub (the test driver answering cuInit with CUDA_ERROR_STUB_LIBRARY) or
# no such device it stops before writing any checkpoint and says why; on
# the test driver every step passes (the bench matrix's rows for 1M and 4M,
# 16M skipped as larger than the 4M checkpoint, GPUDirect Storage said not
# measured) and the checkpoint is removed after.
# Usage: gpucheck_script_test.sh SOURCE_ROOT BUILD_ROOT
set -u
SRC=$1 BUILD=$2
DIR=$(mktemp -d /var/tmp/pinio-${PINIO_TEST_RUN:-p$$}-gpucheckscript-XXXXXX) || exit 1
trap 'rm -rf "$DIR"' EXIT
. "$(dirname "$0")/cli_helpers.sh"
mkdir "$DIR/ck"
GC="$SRC/scripts/gpu-check"
run() { env NO_BUILD=1 BUILD="$BUILD" DIR="$DIR/ck" "$@"; }

check 0 "--help" "$GC" --help
has "$DIR/out" "^usage: scripts/gpu-check \[SIZE\]" "--help prints the usage"
check 2 "an unknown option" "$GC" --bogus
no_checkpoint() { # no_checkpoint WHAT
    [ -z "$(ls "$DIR/ck")" ] || { echo "FAIL: $1: a checkpoint was written:"; ls -l "$DIR/ck"; fails=$((fails + 1)); }
}
check 1 "the toolkit's stub" run FAKE_CUDA_FAIL=stub "$GC" 4M
has "$DIR/out" "no usable CUDA driver: no CUDA driver installed: .* stub library" "names the stub"
has "$DIR/out" "== no checkpoint written: FAILED" "says it stopped first"
no_checkpoint "the stub"
check 1 "no driver" run PINIO_CUDA_LIB="$DIR/none/libcuda.so.1" "$GC" 4M
has "$DIR/out" "no usable CUDA driver: no CUDA driver: " "says there is no driver"
no_checkpoint "no driver"
check 1 "no such device" run DEVICE=3 "$GC" 4M
has "$DIR/out" "the driver answers with 1 device(s): no cuda:3" "names the missing device"
no_checkpoint "no such device"
check 0 "the whole check on the test driver" run "$GC" 4M
has "$DIR/out" "^== table: tests/stream/gpu_abi_test.sh cuda" "the table is checked"
has "$DIR/out" "verified on device: 4194304 of 4194304 bytes, ok" "every byte verified"
has "$DIR/out" "^== matrix: .*pinio bench .* --mem host|cuda:0" "the bench matrix"
has "$DIR/out" "^   1M  *[0-9.]* GB/s  *[0-9.]* GB/s  *[0-9.]* GB/s  *([0-9.]* GB/s  [0-9.]* GB/s  *[0-9]*%)$" "a 1M row"
has "$DIR/out" "^   4M  *[0-9.]* GB/s" "a 4M row"
has "$DIR/out" "^   16M: more than the checkpoint's [0-9]* bytes, skipped" "a block larger than the file"
has "$DIR/out" "storage->GPU direct (GPUDirect Storage, gdsio -x 0): not measured, needs cuFile" "what is not measured"
has "$DIR/out" "^== done in .* s: ok" "the verdict"
no_checkpoint "after the run (KEEP unset)"
[ $fails -eq 0 ] && echo "gpu-check: all checks passed"
exit $((fails > 0))
