#!/bin/sh
# One version everywhere: `pinio --version` (the library's pinio_version(),
# PINIO_VERSION_STRING of version.h) must print meson's project version, which
# meson.build already checked against version.h's numbers at configure time.
# usage: check_version.sh PINIO VERSION
out=$("$1" --version) || { echo "FAIL: $1 --version exits $?"; exit 1; }
if [ "$out" != "pinio $2" ]; then
  echo "FAIL: pinio --version says '$out', meson's project version is $2"
  exit 1
fi
echo "pinio --version: $out"
