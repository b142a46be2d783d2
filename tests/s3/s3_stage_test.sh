#!/bin/sh
# pinio stage from s3:// (s3rver on loopback): what stage costs on top of
# the fetches, shown by counts rather than times. Its staging ring is not
# faulted in ahead of the first request: a 24 MiB object staged through the
# default object ring (8 MiB x 16) peaks under the ring in resident memory
# (faulted whole, the ring alone is 128 MiB resident before any GET). And
# a 256 MiB object peaks well under its size: the ring is reused, so the
# fresh pages stage zeroes are the ring's, not one per byte of the object.
# usage: s3_stage_test.sh PINIO SRC_ROOT
[ "${1:-}" = --help ] && { sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0; }
PINIO=$1
SRC=$2
. "$SRC/tests/s3/s3env.sh"
s3_test s3stage models

"$PINIO" gen "$DIR/m.safetensors" --size 24M --seed 5 >/dev/null || exit 1
s3_put models m.safetensors "$DIR/m.safetensors" || exit 1

# peak KIB CMD...: runs CMD as check does (stdout in $DIR/out, stderr in
# $DIR/err); its peak resident memory (the kernel's ru_maxrss, KiB) in
# $DIR/peak. Its exit status is CMD's.
peak() {
    /usr/bin/python3 -c '
import resource, subprocess, sys
with open(sys.argv[1] + "/out", "w") as o, open(sys.argv[1] + "/err", "w") as e:
    rc = subprocess.run(sys.argv[2:], stdout=o, stderr=e).returncode
with open(sys.argv[1] + "/peak", "w") as f:
    print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=f)
sys.exit(rc)' "$DIR" "$@"
}

peak "$PINIO" stage s3://models/m.safetensors "$DIR/staged" --json
st=$?
[ "$st" -eq 0 ] || { echo "FAIL: stage of the object: exit $st"; cat "$DIR/err"; fails=$((fails + 1)); }
cmp -s "$DIR/m.safetensors" "$DIR/staged/m.safetensors" ||
    { echo "FAIL: the staged file differs from the object"; fails=$((fails + 1)); }
json "the default object ring is 16 slots of 8 MiB" \
    "j['ring_bytes'] == 128 << 20 and j['slot_size_bytes'] == 8 << 20"
kib=$(cat "$DIR/peak")
# The object's 24 MiB, the program and its libraries (more under a
# sanitizer) stay below the ring; a ring faulted ahead is the ring alone.
[ "${kib:-0}" -gt 0 ] && [ "$kib" -lt $((128 << 10)) ] ||
    { echo "FAIL: stage of a 24 MiB object peaked at ${kib:-?} KiB resident, not under its 128 MiB ring: the ring was faulted in ahead of the reads"; fails=$((fails + 1)); }

# An object twice the ring: the ring goes round twice, and the peak stays
# near the ring (about 150 MiB) and under the object less 32 MiB (a ring
# as large as the object, as 32Mx8 was, peaks above the object).
"$PINIO" gen "$DIR/big.safetensors" --size 256M --tensors 64 --seed 6 >/dev/null || exit 1
s3_put models big.safetensors "$DIR/big.safetensors" || exit 1
rm -rf "$DIR/staged"
peak "$PINIO" stage s3://models/big.safetensors "$DIR/staged" --json
st=$?
[ "$st" -eq 0 ] || { echo "FAIL: stage of the 256 MiB object: exit $st"; cat "$DIR/err"; fails=$((fails + 1)); }
cmp -s "$DIR/big.safetensors" "$DIR/staged/big.safetensors" ||
    { echo "FAIL: the staged 256 MiB file differs from the object"; fails=$((fails + 1)); }
rm -rf "$DIR/staged" "$DIR/big.safetensors"
kib=$(cat "$DIR/peak")
[ "${kib:-0}" -gt 0 ] && [ "$kib" -lt $((224 << 10)) ] ||
    { echo "FAIL: stage of a 256 MiB object peaked at ${kib:-?} KiB resident, not under 224 MiB: its default ring was not reused (as large as the object?)"; fails=$((fails + 1)); }

s3_cleanup
[ "$fails" -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "ok"
