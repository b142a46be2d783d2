#!/bin/sh
# pinio stage end to end: a file and a sharded checkpoint copied byte for
# byte (cmp) with --verify, --json parses, an existing target refused
# (exit 1, nothing replaced, no temporary left), --force replaces it,
# --sha256 and --sha256-file checked,
# usage errors exit 2, --help explains.
# Usage: stage_cli_test.sh PATH_TO_PINIO
set -u
PINIO=$1
DIR=$(mktemp -d "/var/tmp/pinio-${PINIO_TEST_RUN:-p$$}-stage-XXXXXX") || exit 1
trap 'rm -rf "$DIR"' EXIT
. "$(dirname "$0")/cli_helpers.sh"

check 0 "gen" "$PINIO" gen "$DIR/m.safetensors" --size 3M --tensors 9 --dtypes bf16,u8 --quiet
check 0 "stage a file" "$PINIO" stage "$DIR/m.safetensors" "$DIR/a" --verify --staging 64Kx2
same "$DIR/m.safetensors" "$DIR/a/m.safetensors"
has "$DIR/out" "verified" "the summary says verified"
SUM=$(sha256sum "$DIR/m.safetensors" | cut -d' ' -f1)
has "$DIR/out" "^sha256    $SUM  $DIR/m.safetensors" "--verify prints the source's SHA-256"
# An expected digest is checked; a byte flipped in flight fails it, and
# nothing is published.
check 0 "--sha256 right" "$PINIO" stage "$DIR/m.safetensors" "$DIR/s1" --sha256 "$SUM" --cache cold
check 1 "a byte flipped in flight" env PINIO_FAULTS=corrupt@2 "$PINIO" stage "$DIR/m.safetensors" \
    "$DIR/s2" --sha256 "$SUM" --cache cold --staging 64Kx2
has "$DIR/err" "sha256 mismatch" "the error says the digest differs"
has "$DIR/err" "m.safetensors" "the error names the file"
[ -z "$(ls -A "$DIR/s2")" ] || { echo "FAIL: left in $DIR/s2"; ls -A "$DIR/s2"; fails=$((fails + 1)); }
check 2 "bad --sha256" "$PINIO" stage "$DIR/m.safetensors" "$DIR/s3" --sha256 abc
# One digest per file: a surplus one is the command line's mistake (exit 2),
# and nothing is staged.
check 2 "two --sha256 for one file" "$PINIO" stage "$DIR/m.safetensors" "$DIR/s4" --sha256 "$SUM" \
    --sha256 "$SUM"
has "$DIR/err" "2 expected SHA-256 digests for 1 file.*(--sha256); see 'pinio stage --help'" "the usage error gives both counts"
[ ! -e "$DIR/s4" ] || { echo "FAIL: $DIR/s4 made and left"; fails=$((fails + 1)); }
[ "$(ls -A "$DIR/a" | wc -l)" -eq 1 ] || { echo "FAIL: extra files in $DIR/a"; ls -A "$DIR/a"; fails=$((fails + 1)); }

# The writes overlap the reads (issue 38): PINIO_FAULTS=stagewritehold holds
# the file sink's first write from a reused slot until a read lands that the
# stream fetched after handing that chunk over; a stream that waits for the
# write instead (reads and writes taking turns) fails the stage, saying so.
# (Rings of 512 KiB at most: the 3 MiB file goes round each several times.)
for st in 64Kx2 64Kx4 64Kx8; do
    check 0 "a write held, staging $st" env PINIO_FAULTS=stagewritehold "$PINIO" stage \
        "$DIR/m.safetensors" "$DIR/h$st" --staging "$st" --cache cold
    same "$DIR/m.safetensors" "$DIR/h$st/m.safetensors"
done
check 0 "a write held, --verify" env PINIO_FAULTS=stagewritehold "$PINIO" stage \
    "$DIR/m.safetensors" "$DIR/hv" --staging 64Kx4 --verify --cache cold
same "$DIR/m.safetensors" "$DIR/hv/m.safetensors"

# A write that fails on the writer's thread (a 1 MiB file size limit, its
# SIGXFSZ ignored: EFBIG) fails the stage naming the temporary and the
# offset, and nothing is left.
if command -v prlimit >/dev/null 2>&1; then
    check 1 "a write fails (EFBIG)" sh -c 'trap "" XFSZ; exec prlimit --fsize=1048576 "$@"' sh \
        "$PINIO" stage "$DIR/m.safetensors" "$DIR/fz" --staging 64Kx4 --json
    has "$DIR/out" '"name":"EFBIG".*pinio-stage-[0-9]*-m.safetensors: file sink: write' \
        "the error names the temporary"
    has "$DIR/out" '"offset":1048576' "the error names the offset"
    [ ! -e "$DIR/fz" ] || { echo "FAIL: a failed write left $DIR/fz"; ls -A "$DIR/fz"; fails=$((fails + 1)); }
fi

check 0 "gen sharded" "$PINIO" gen "$DIR/sh" --size 2M --tensors 12 --shards 3 --quiet
check 0 "stage shards --json" "$PINIO" stage "$DIR/sh" "$DIR/b" --json --verify --cache cold
for f in "$DIR"/sh/*; do same "$f" "$DIR/b/$(basename "$f")"; done
if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["file_count"] == 3 and d["verified"] and d["copies_verified"] and len(d["digests"]) == 3, d' "$DIR/out" ||
        { echo "FAIL: stage --json"; cat "$DIR/out"; fails=$((fails + 1)); }
fi

# --sha256-file: sha256sum's list (reversed: matched by name, not place)
# checks every shard; a wrong line fails with nothing staged; a shard the
# list lacks stops the stage before the target is made.
(cd "$DIR/sh" && sha256sum ./*.safetensors | sort -r) >"$DIR/SUMS"
check 0 "stage shards --sha256-file" "$PINIO" stage "$DIR/sh" "$DIR/f1" --sha256-file "$DIR/SUMS"
for f in "$DIR"/sh/*; do same "$f" "$DIR/f1/$(basename "$f")"; done
has "$DIR/out" "verified" "--sha256-file verifies"
[ "$(grep -c '^sha256 ' "$DIR/out")" -eq 3 ] || { echo "FAIL: not 3 digests printed"; cat "$DIR/out"; fails=$((fails + 1)); }
sed '2s/^./0/;2s/^00/11/' "$DIR/SUMS" >"$DIR/BAD"
check 1 "a wrong digest in --sha256-file" "$PINIO" stage "$DIR/sh" "$DIR/f2" --sha256-file "$DIR/BAD"
has "$DIR/err" "sha256 mismatch" "the error says the digest differs"
[ ! -e "$DIR/f2" ] || [ -z "$(ls -A "$DIR/f2")" ] || { echo "FAIL: left in $DIR/f2"; ls -A "$DIR/f2"; fails=$((fails + 1)); }
sed 1d "$DIR/SUMS" >"$DIR/SHORT"
check 1 "a shard --sha256-file lacks" "$PINIO" stage "$DIR/sh" "$DIR/f3" --sha256-file "$DIR/SHORT"
has "$DIR/err" "pinio stage: .*--sha256-file .*SHORT has no line for it" "the error names the shard and the list"
[ ! -e "$DIR/f3" ] || { echo "FAIL: $DIR/f3 made for a stage that could not start"; fails=$((fails + 1)); }
check 2 "--sha256 with --sha256-file" "$PINIO" stage "$DIR/sh" "$DIR/f4" --sha256-file "$DIR/SUMS" --sha256 "$SUM"
check 1 "a missing --sha256-file" "$PINIO" stage "$DIR/sh" "$DIR/f5" --sha256-file "$DIR/NOPE"
has "$DIR/err" "NOPE" "the error names the list"
# The list is a small text file or a pipe: a FIFO nobody writes to is an
# empty list (not a hang), a device is refused (not read without end), a
# pipe (sha256sum ... | pinio stage ... --sha256-file /dev/stdin) is read; two lines that give one file
# different digests are an error, not the first one's verdict.
mkfifo "$DIR/FIFO"
check 1 "a FIFO nobody writes as --sha256-file" timeout 10 "$PINIO" stage "$DIR/sh" "$DIR/f6" --sha256-file "$DIR/FIFO"
has "$DIR/err" "FIFO: empty" "the error says the list is empty"
check 1 "a device as --sha256-file" timeout 10 "$PINIO" stage "$DIR/sh" "$DIR/f7" --sha256-file /dev/zero
has "$DIR/err" "/dev/zero: not a regular file or a pipe" "the error says what it is"
check 0 "a pipe as --sha256-file" sh -c 'cat "$1" | "$2" stage "$3" "$4" --sha256-file /dev/stdin' \
    _ "$DIR/SUMS" "$PINIO" "$DIR/sh" "$DIR/f8"
sha256sum "$DIR"/sh/*.safetensors >"$DIR/FULL"
(cat "$DIR/FULL"; sed '1s/^./0/;1s/^00/11/' "$DIR/FULL") >"$DIR/TWICE"
check 1 "two digests for one shard" "$PINIO" stage "$DIR/sh" "$DIR/f9" --sha256-file "$DIR/TWICE"
has "$DIR/err" "TWICE gives it 2 different digests" "the error names the file and the list"
cat "$DIR/FULL" "$DIR/FULL" >"$DIR/SAME"
check 0 "one line twice" "$PINIO" stage "$DIR/sh" "$DIR/f10" --sha256-file "$DIR/SAME"
[ ! -e "$DIR/f9" ] || { echo "FAIL: $DIR/f9 made for a stage that could not start"; fails=$((fails + 1)); }

echo "keep" >"$DIR/c.txt"
mkdir "$DIR/c" && cp "$DIR/c.txt" "$DIR/c/m.safetensors"
check 1 "existing target" "$PINIO" stage "$DIR/m.safetensors" "$DIR/c"
has "$DIR/err" "target exists" "the error says why"
same "$DIR/c.txt" "$DIR/c/m.safetensors"
[ "$(ls -A "$DIR/c" | wc -l)" -eq 1 ] || { echo "FAIL: temporary left in $DIR/c"; ls -A "$DIR/c"; fails=$((fails + 1)); }
check 0 "--force" "$PINIO" stage "$DIR/m.safetensors" "$DIR/c" --force -q
same "$DIR/m.safetensors" "$DIR/c/m.safetensors"

# --- Publication (issue 23) -------------------------------------------------
nothing_left() { # nothing_left DIR DESCRIPTION: no temporary or set-aside file
    left=$(ls -A "$1" | grep '^\.pinio-stage')
    [ -z "$left" ] || { echo "FAIL: $2: left in $1: $left"; fails=$((fails + 1)); }
}
# The old checkpoint staged into p and kept as p.ref; the new one differs.
check 0 "gen old shards" "$PINIO" gen "$DIR/old" --size 1M --tensors 12 --shards 3 --seed 7 -q
check 0 "stage old" "$PINIO" stage "$DIR/old" "$DIR/p" -q
cp -r "$DIR/p" "$DIR/p.ref"
still_old() { # still_old DESCRIPTION: every file of p as it was
    for f in "$DIR"/p.ref/*; do
        cmp -s "$f" "$DIR/p/$(basename "$f")" ||
            { echo "FAIL: $1: $(basename "$f") replaced or damaged"; fails=$((fails + 1)); }
    done
    [ "$(ls "$DIR/p" | wc -l)" -eq "$(ls "$DIR/p.ref" | wc -l)" ] ||
        { echo "FAIL: $1: files added to p"; ls -A "$DIR/p"; fails=$((fails + 1)); }
}
# A copy that fails its read back is never published: the old files stay.
check 1 "a copy damaged on disk, --verify" env PINIO_FAULTS=stagecorrupt@1 "$PINIO" stage \
    "$DIR/sh" "$DIR/p" --force --verify
has "$DIR/err" "verification failed" "the error says the read back differs"
has "$DIR/err" "model-00001-of-00003.safetensors" "the error names the file"
still_old "failed --verify"
nothing_left "$DIR/p" "failed --verify"
# A rename that fails half way puts the old files back: never a mix of old
# and new shards, or new shards under the old index. With --force, 8
# renames: 4 old files set aside (the index first), 4 new ones put in
# place (the index last).
for n in 1 2 3 4 5 6 7 8; do
    check 1 "rename $n of 8 fails" env PINIO_FAULTS=stagerename@$n "$PINIO" stage "$DIR/sh" \
        "$DIR/p" --force
    has "$DIR/err" "input/output error" "rename $n: the error says why"
    still_old "rename $n of 8 failed"
    nothing_left "$DIR/p" "rename $n of 8 failed"
done
check 0 "--force after the failures" "$PINIO" stage "$DIR/sh" "$DIR/p" --force --verify -q
for f in "$DIR"/sh/*; do same "$f" "$DIR/p/$(basename "$f")"; done
nothing_left "$DIR/p" "--force"
# The index is protected as the shards are: an existing one needs --force.
mkdir "$DIR/q" && echo keep >"$DIR/q/model.safetensors.index.json"
check 1 "an existing index" "$PINIO" stage "$DIR/sh" "$DIR/q"
has "$DIR/err" "model.safetensors.index.json.*target exists" "the error names the index"
[ "$(cat "$DIR/q/model.safetensors.index.json")" = keep ] ||
    { echo "FAIL: the index was replaced without --force"; fails=$((fails + 1)); }
[ "$(ls -A "$DIR/q" | wc -l)" -eq 1 ] || { echo "FAIL: files left in q"; ls -A "$DIR/q"; fails=$((fails + 1)); }
# A symlink planted where the index's temporary goes (the name with the
# pid, and the one without) is never followed.
mkdir "$DIR/r" && echo victim >"$DIR/victim"
check 1 "a planted symlink" sh -c 'ln -s "$1/victim" "$1/r/.pinio-stage-model.safetensors.index.json"
    ln -s "$1/victim" "$1/r/.pinio-stage-$$-model.safetensors.index.json"
    exec "$2" stage "$1/sh" "$1/r"' sh "$DIR" "$PINIO"
[ "$(cat "$DIR/victim")" = victim ] || { echo "FAIL: the planted symlink was followed"; fails=$((fails + 1)); }
has "$DIR/err" "\.pinio-stage-" "the error names the temporary"
[ "$(find "$DIR/r" -type l | wc -l)" -eq 2 ] && [ "$(ls -A "$DIR/r" | wc -l)" -eq 2 ] ||
    { echo "FAIL: the planted links were touched, or files left"; ls -lA "$DIR/r"; fails=$((fails + 1)); }
rm -rf "$DIR/r"

# Temporaries a killed stage left: removed by the next stage into the same
# folder when provably abandoned (src/base/stale.h: this boot and PID
# namespace, a dead pid, untouched for a minute); others stay.
dead=$(sh -c 'echo $$')
mkdir "$DIR/k"
mk() { # mk NAME MARK(none|here) AGE_SECONDS
    head -c 65536 /dev/zero >"$DIR/k/$1"
    python3 - "$DIR/k/$1" "$2" "$3" <<'PY'
import os, sys, time
p, mark, age = sys.argv[1], sys.argv[2], int(sys.argv[3])
boot = open("/proc/sys/kernel/random/boot_id").read().strip()
ns = os.stat("/proc/self/ns/pid").st_ino
if mark != "none":
    os.setxattr(p, "user.pinio.stage", b"boot=%s pidns=%d" % (boot.encode(), ns))
t = time.time() - age
os.utime(p, (t, t))
PY
}
mk ".pinio-stage-$dead-m.safetensors" here 3600
mk ".pinio-stage-$((dead + 1000000))-m.safetensors" none 3600
mk ".pinio-stage-$((dead + 2000000))-m.safetensors" here 0
check 0 "stage next to stale temporaries" "$PINIO" stage "$DIR/m.safetensors" "$DIR/k" -q
[ -e "$DIR/k/.pinio-stage-$dead-m.safetensors" ] &&
    { echo "FAIL: a stale temporary of stage stayed"; fails=$((fails + 1)); }
for keep in $((dead + 1000000)) $((dead + 2000000)); do
    [ -e "$DIR/k/.pinio-stage-$keep-m.safetensors" ] ||
        { echo "FAIL: .pinio-stage-$keep-m.safetensors was removed"; fails=$((fails + 1)); }
done

# SIGTERM during a stage: its temporaries go, nothing is published, and it
# dies of the signal. The source is one sparse 4 GiB tensor read through
# a ring of two 64 KiB slots: far from done when the signal comes.
python3 - "$DIR/big.safetensors" <<'PY'
import json, struct, sys
n = 4 << 30
h = json.dumps({"t": {"dtype": "U8", "shape": [n], "data_offsets": [0, n]}}).encode()
h += b" " * (-len(h) % 8)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h)
    f.truncate(8 + len(h) + n)
PY
mkdir "$DIR/sig"
"$PINIO" stage "$DIR/big.safetensors" "$DIR/sig" --staging 64Kx2 -q 2>"$DIR/err" &
pid=$!
for _ in $(seq 500); do ls -A "$DIR/sig" | grep -q . && break; sleep 0.02; done
kill -TERM $pid; wait $pid; rc=$?
[ $rc = 143 ] || { echo "FAIL: stage after SIGTERM exit $rc, want 143"; cat "$DIR/err"; fails=$((fails + 1)); }
[ -z "$(ls -A "$DIR/sig")" ] || { echo "FAIL: SIGTERM left $(ls -A "$DIR/sig")"; fails=$((fails + 1)); }
rm -rf "$DIR/big.safetensors" "$DIR/sig"

# Many shards under a small soft limit on descriptors: stage raises it to
# the hard limit, as load does.
hard=$(ulimit -Hn)
if [ "$hard" = unlimited ] || [ "$hard" -ge 1024 ]; then
    check 0 "gen 300 shards" "$PINIO" gen "$DIR/many" --size 2M --tensors 300 --shards 300 -q
    check 0 "stage 300 shards, soft nofile 64" prlimit --nofile=64:"$hard" "$PINIO" stage \
        "$DIR/many" "$DIR/many.out" --verify -q
    check 0 "the 300-shard copy loads" "$PINIO" load "$DIR/many.out" --quiet
    # Two descriptors per shard (the plan's, the copy's), --verify included:
    # 300 shards fit under a hard limit of 700, as they do for load.
    check 0 "load 300 shards, nofile 700" prlimit --nofile=700:700 "$PINIO" load "$DIR/many" --quiet
    check 0 "stage 300 shards --verify, nofile 700" prlimit --nofile=700:700 "$PINIO" stage \
        "$DIR/many" "$DIR/many.out2" --verify -q
else
    echo "skip: 300 shards under a soft limit of 64: the hard limit ($hard) is too low"
fi
rm -rf "$DIR/many" "$DIR/many.out"
# Shards in a subfolder of the index's folder keep their place: the copied
# index names them where they land.
mkdir -p "$DIR/nest/sub"
for f in "$DIR"/sh/*.safetensors; do cp "$f" "$DIR/nest/sub/"; done
sed 's/"model-0/"sub\/model-0/' "$DIR/sh/model.safetensors.index.json" >"$DIR/nest/model.safetensors.index.json"
check 0 "the nested source loads" "$PINIO" load "$DIR/nest" --quiet
check 0 "stage nested shards" "$PINIO" stage "$DIR/nest" "$DIR/nest.out" --verify -q
check 0 "the nested copy loads" "$PINIO" load "$DIR/nest.out" --quiet
for f in "$DIR"/sh/*.safetensors; do same "$f" "$DIR/nest.out/sub/$(basename "$f")"; done
# A source named by a descriptor keeps the file's own name.
check 0 "stage /proc/self/fd/N" sh -c 'exec "$1" stage /proc/self/fd/5 "$2/fd.out" -q 5<"$2/m.safetensors"' \
    sh "$PINIO" "$DIR"
same "$DIR/m.safetensors" "$DIR/fd.out/m.safetensors"

# A ring larger than the memory left is refused, as the resident load's
# arena is, instead of being OOM-killed: in a memory cgroup of 256 MiB, a
# ring of 512 MiB.
cg_mem=$(awk -F: '$2 == "memory" { print $3 }' /proc/self/cgroup)
CG=/sys/fs/cgroup/memory$cg_mem/pinio-stage-$$
if [ -n "$cg_mem" ] && mkdir "$CG" 2>/dev/null; then
    echo $((256 << 20)) >"$CG/memory.limit_in_bytes"
    check 1 "a ring larger than the memory" sh -c 'echo $$ >"$1/cgroup.procs" &&
        exec "$2" stage "$3/m.safetensors" "$3/big" --staging 64Mx8' sh "$CG" "$PINIO" "$DIR"
    has "$DIR/err" "staging ring (8 slots of 67108864 bytes) needs 536870912 bytes but only" \
        "the error says the ring does not fit"
    [ ! -e "$DIR/big" ] || { echo "FAIL: $DIR/big made and left"; fails=$((fails + 1)); }
    rmdir "$CG" || echo "note: $CG could not be removed"
else
    echo "skip: a ring larger than the memory: no memory cgroup (v1) to make a child in"
fi

# O_DIRECT refused by the file system (PINIO_FAULTS=dioinval: at the first
# read, as FUSE and some network file systems do): the summary says the
# reads went buffered, and why; with --direct on, the error names the
# user's path, not the /proc/self/fd/N the engine opened.
check 0 "O_DIRECT refused" env PINIO_FAULTS=dioinval "$PINIO" stage "$DIR/m.safetensors" "$DIR/dio" \
    --cache cold
has "$DIR/out" "^io path   buffered .*O_DIRECT refused" "the summary says what ran"
grep -q "O_DIRECT io_uring" "$DIR/out" && { echo "FAIL: the summary claims O_DIRECT"; cat "$DIR/out"; fails=$((fails + 1)); }
check 1 "O_DIRECT refused, --direct on" env PINIO_FAULTS=dioinval "$PINIO" stage "$DIR/m.safetensors" \
    "$DIR/dio2" --cache cold --direct on
has "$DIR/err" "$DIR/m.safetensors" "the error names the source"
grep -q "/proc/self/fd" "$DIR/err" && { echo "FAIL: the error names a descriptor"; cat "$DIR/err"; fails=$((fails + 1)); }

check 1 "missing source" "$PINIO" stage "$DIR/nope.safetensors" "$DIR/d"
has "$DIR/err" "nope.safetensors" "the error names the file"
check 2 "no DST" "$PINIO" stage "$DIR/m.safetensors"
check 2 "bad --staging" "$PINIO" stage "$DIR/m.safetensors" "$DIR/e" --staging 3Mx4
check 2 "bad --direct" "$PINIO" stage "$DIR/m.safetensors" "$DIR/e" --direct maybe
check 0 "--help" "$PINIO" stage --help
has "$DIR/out" "renamed into place, the index last" "help explains the publication"
has "$DIR/out" "rename that" "help says what a failed rename does"
has "$DIR/out" "SIGTERM" "help says what a signal does"

[ $fails -eq 0 ] && echo "stage_cli: all checks passed"
exit $((fails > 0))
