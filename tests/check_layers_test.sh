#!/usr/bin/env bash
# scripts/check-layers must fail when a lower layer reaches up, not only pass
# on the real tree: each case plants one violation in a copy of the tree.
set -euo pipefail
src=$1
check=$src/scripts/check-layers
work=$(mktemp -d "/tmp/pinio-${PINIO_TEST_RUN:-p$$}-layers-XXXXXX")
trap 'rm -rf "$work"' EXIT
cp -r "$src/include" "$src/src" "$src/numa" "$src/uring" "$src/tools" "$work/"
mkdir -p "$work/scripts" "$work/tests" "$work/python" "$work/mpi" "$work/bench"
"$check" "$work" >/dev/null || { echo "FAIL: the untouched copy is not clean"; "$check" "$work"; exit 1; }

fails=0
# expect FILE LINE PATTERN: planting LINE in FILE must fail with PATTERN in the output.
expect() {
  local file=$1 line=$2 pattern=$3 out
  cp "$work/$file" "$work/$file.orig"
  printf '%s\n' "$line" >>"$work/$file"
  if out=$("$check" "$work" 2>&1); then
    echo "FAIL: $file with '$line' passed"; fails=$((fails + 1))
  elif ! grep -q -- "$pattern" <<<"$out"; then
    echo "FAIL: $file with '$line' said: $out"; fails=$((fails + 1))
  else
    echo "ok: $file + $line -> $(grep -m1 -- "$pattern" <<<"$out")"
  fi
  mv "$work/$file.orig" "$work/$file"
}
expect numa/pool.c '#include "uring/ring_internal.h"' 'uring is below numa'
expect numa/prim.c '#include "src/load/plan_internal.h"' 'load is below numa'
expect uring/ring.c '#include "pinio/load.h"' 'load is below uring'
expect uring/read.c '#include "numa/numa_internal.h"' 'private to the numa'
expect src/base/error.c '#include "numa/prim.h"' 'numa is below base'
expect src/io/fileio.c '#include <numa.h>' 'libnuma belongs to numa/ only'
expect src/load/plan.c '#include <curl/curl.h>' 'belong to src/s3/ only'
expect src/st/json.c '#include <openssl/hmac.h>' 'belong to src/s3/ only'
expect src/s3/sign.c '#include "src/st/json_internal.h"' 'st is below s3'
expect src/io/fileio.c '#include "src/s3/sign.h"' 's3 is below io'
expect tools/main.c '#include "uring/ring_internal.h"' 'uses public headers only'
expect include/pinio/ring.h '#include "pinio/load.h"' 'load is below uring'
[ $fails -eq 0 ] || exit 1
