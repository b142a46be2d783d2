#!/bin/sh
# pinio stage from s3:// (s3rver on loopback): what stage costs on top of
# the fetches, shown by counts rather than times. Its staging ring is not
# faulted in ahead of the first request: a 24 MiB object staged through the
# default s3:// ring (256 MiB) peaks well under the ring in resident memory
# (faulted whole, the ring alone is 256 MiB resident before any GET).
# usage: s3_stage_test.sh PINIO SRC_ROOT
[ "${1:-}" = --help ] && { sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0; }
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
json "the default s3:// ring is 256 MiB" "j['ring_bytes'] == 256 << 20"
kib=$(cat "$DIR/peak")
# Half the ring: the object's 24 MiB, the program and its libraries (more
# under a sanitizer) stay far below; a ring faulted ahead is above alone.
[ "${kib:-0}" -gt 0 ] && [ "$kib" -lt $((128 << 10)) ] ||
    { echo "FAIL: stage of a 24 MiB object peaked at ${kib:-?} KiB resident, not under half its 256 MiB ring: the ring was faulted in ahead of the reads"; fails=$((fails + 1)); }

s3_cleanup
[ "$fails" -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "ok"
