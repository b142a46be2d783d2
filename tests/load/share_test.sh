#!/bin/sh
# Node-local sharing (issue 40): independent processes loading the same file
# at once read it from storage once and all get every byte right; a process
# killed at each stage of a shared read, a file replaced during one, two
# files of one name, a full segment folder and a cgroup limit leave nothing
# wrong and nothing behind. No timing: each order of events is forced by the
# fault point of share_load (SHARE_TEST_AT, a stage and "wait" or "kill").
# First the default (a reader that is alone reads into private memory, and
# makes a segment only when another process asked for the file while it
# read), then the same machinery with PINIO_SHARE=eager (the segment at
# once), which the later sections use so that a process that comes after
# the reader finished still maps its segment.
# Usage: share_test.sh PINIO SHARE_LOAD
set -u
PINIO=$1
LOADER=$2
run=${PINIO_TEST_RUN:-p$$}
DIR=$(mktemp -d "/var/tmp/pinio-$run-share-XXXXXX") || exit 1
SEGS=$(mktemp -d "/dev/shm/pinio-$run-share-XXXXXX") || exit 1
CG=
cleanup() {
    [ -n "$CG" ] && rmdir "$CG" 2>/dev/null
    rm -rf "$DIR" "$SEGS"
}
trap cleanup EXIT
export PINIO_SHARE_DIR="$SEGS"
unset PINIO_SHARE SHARE_TEST_AT
fails=0
. "$(dirname "$0")/../common/cli.sh"
FAIL() { echo "FAIL: $*"; fails=$((fails + 1)); }

M=$DIR/m.safetensors
check 0 "gen" "$PINIO" gen "$M" --size 24M --tensors 12 --dtypes bf16,f32,u8 --seed 1 --quiet
# What one private load reads of it (alignment included): the unit below.
check 0 "a private load" "$LOADER" "$M" off
ONE=$(sed -n 's/^read_bytes=\([0-9]*\).*/\1/p' "$DIR/out")
[ "${ONE:-0}" -gt 0 ] || FAIL "a private load read nothing: $(cat "$DIR/out")"
has "$DIR/out" "share=private: sharing off (the share option)" "the option's refusal is said"
OFF_FLT=$(sed -n 's/.* minflt=\([0-9]*\).*/\1/p' "$DIR/out")

# empty WHAT: the segment folder holds nothing.
empty() {
    left=$(ls -A "$SEGS")
    [ -z "$left" ] || { FAIL "$1: left behind in $SEGS: $left"; rm -f "$SEGS"/*; }
}

# field NAME OUTFILE: a number from share_load's first line.
field() { sed -n "s/.* *$1=\([0-9]*\).*/\1/p; s/^$1=\([0-9]*\).*/\1/p" "$2" | head -n1; }

# until_reached FILE PID: waits for the fault point's FILE.reached while
# PID lives (no timing: the stage is reached or the process ends).
until_reached() { while [ ! -e "$1.reached" ] && kill -0 "$2" 2>/dev/null; do sleep 0.05; done; }
# until_asked LOG PID: waits until PID's SHARE_TEST_LOG says it asked the
# file's reader for it ("wanting"), or PID ends.
until_asked() { while ! grep -qx wanting "$1" 2>/dev/null && kill -0 "$2" 2>/dev/null; do sleep 0.05; done; }

# together N FILE WHAT [asked]: N loaders of FILE at once; all must succeed
# with every byte right; prints the bytes they read from storage in total.
# Each holds its checkpoint until all have loaded (SHARE_TEST_HOLD), so that
# a late starter on a busy machine still finds the others' segment (with
# PINIO_SHARE=eager). "asked": the one that claims the file is held there
# until each other one has asked it for the file, the order "at once" means
# for a reader that reads alone first, forced whatever the machine's load.
together() {
    n=$1 file=$2 what=$3 i=1 pids=
    rm -f "$DIR"/hold* "$DIR"/go* "$DIR"/t*.out "$DIR"/w*.log
    while [ "$i" -le "$n" ]; do
        if [ "${4:-}" = asked ]; then
            SHARE_TEST_AT="claimed:wait:$DIR/go" SHARE_TEST_LOG="$DIR/w$i.log" \
                SHARE_TEST_HOLD="$DIR/hold$i" "$LOADER" "$file" >"$DIR/t$i.out" 2>"$DIR/t$i.err" &
        else
            SHARE_TEST_HOLD="$DIR/hold$i" "$LOADER" "$file" >"$DIR/t$i.out" 2>"$DIR/t$i.err" &
        fi
        pids="$pids $!"
        i=$((i + 1))
    done
    if [ "${4:-}" = asked ]; then
        while :; do
            asked=$(grep -lx wanting "$DIR"/w*.log 2>/dev/null | wc -l)
            [ -e "$DIR/go.reached" ] && [ "$asked" -ge $((n - 1)) ] && break
            alive=0
            for p in $pids; do kill -0 "$p" 2>/dev/null && alive=$((alive + 1)); done
            [ "$alive" -eq "$n" ] || break
            sleep 0.05
        done
        touch "$DIR/go"
    fi
    i=1
    for p in $pids; do
        while [ ! -e "$DIR/hold$i.reached" ] && kill -0 "$p" 2>/dev/null; do sleep 0.05; done
        i=$((i + 1))
    done
    i=1
    while [ "$i" -le "$n" ]; do touch "$DIR/hold$i"; i=$((i + 1)); done
    i=1 total=0
    for p in $pids; do
        wait "$p"
        rc=$?
        [ "$rc" -eq 0 ] || { FAIL "$what: loader $i exit $rc"; cat "$DIR/t$i.err" >&2; }
        total=$((total + $(field read_bytes "$DIR/t$i.out")))
        i=$((i + 1))
    done
    echo "$total"
}

# --- alone first (the default). A process that is alone reads into private
# memory (huge pages), not into a segment of 4 KiB shmem pages: its page
# faults are a private load's, not one per page (OFF_FLT: the private load
# above; a segment adds a fault per 4 KiB page, ONE / 4096), it says so, and
# leaves nothing behind.
check 0 "alone" "$LOADER" "$M"
has "$DIR/out" "share=read here alone: no other process asked for it" "a lone load says it read alone"
has "$DIR/out" "read_bytes=$ONE shared=0 read_here=0 share_bytes=0 " "a lone load reads the file once, into no segment"
has "$DIR/out" "memory=.*bytes in memory of their own, read alone" "a lone load's memory is said"
flt=$(field minflt "$DIR/out")
[ "${flt:-999999999}" -lt $((OFF_FLT + ONE / 4096 / 4)) ] ||
    FAIL "a lone load faulted $flt pages, a private load $OFF_FLT (a segment: + $((ONE / 4096)))"
empty "alone"

# 2, 3 and 4 at once, the first held at its claim until the others asked it
# for the file: it reads alone, then copies into a segment for them (one
# read in all, every byte right), and says so.
for n in 2 3 4; do
    got=$(together "$n" "$M" "$n at once, alone first" asked)
    [ "$got" = "$ONE" ] || FAIL "$n at once, alone first, read $got bytes, one load reads $ONE"
    [ "$(grep -l "share=read here, for the node's other loads (asked for while it read alone)" "$DIR"/t*.out | wc -l)" = 1 ] ||
        FAIL "$n at once, alone first: not one reader that published: $(cat "$DIR"/t*.out)"
    [ "$(grep -l "read_bytes=0 shared=1" "$DIR"/t*.out | wc -l)" = $((n - 1)) ] ||
        FAIL "$n at once, alone first: not $((n - 1)) sharers: $(cat "$DIR"/t*.out)"
    empty "$n at once, alone first"
done

# A reader killed while it reads alone, once it was asked (allocated: while
# it copies into the segment), and once the segment is complete, while two
# others ask for the file: one of them reads it and publishes it to the
# other, or both map the complete segment; nothing left behind.
for stage in reading allocated complete; do
    rm -f "$DIR"/go* "$DIR"/w*.log "$DIR"/hold*
    SHARE_TEST_AT="claimed:wait:$DIR/go0,$stage:wait:$DIR/go" "$LOADER" "$M" >"$DIR/a.out" 2>&1 &
    a=$!
    until_reached "$DIR/go0" "$a"
    SHARE_TEST_LOG="$DIR/wb.log" SHARE_TEST_HOLD="$DIR/holdb" "$LOADER" "$M" >"$DIR/b.out" 2>&1 &
    b=$!
    SHARE_TEST_LOG="$DIR/wc.log" SHARE_TEST_HOLD="$DIR/holdc" "$LOADER" "$M" >"$DIR/c.out" 2>&1 &
    c=$!
    until_asked "$DIR/wb.log" "$b"
    until_asked "$DIR/wc.log" "$c"
    touch "$DIR/go0"
    until_reached "$DIR/go" "$a"
    [ -e "$DIR/go.reached" ] || FAIL "alone first, $stage: the reader never reached it: $(cat "$DIR/a.out")"
    kill -9 "$a"
    wait "$a"
    until_reached "$DIR/holdb" "$b"
    until_reached "$DIR/holdc" "$c"
    touch "$DIR/holdb" "$DIR/holdc"
    wait "$b" || FAIL "alone first, $stage: the second loader failed: $(cat "$DIR/b.out")"
    wait "$c" || FAIL "alone first, $stage: the third loader failed: $(cat "$DIR/c.out")"
    got=$(( $(field read_bytes "$DIR/b.out") + $(field read_bytes "$DIR/c.out") ))
    want=$ONE
    [ "$stage" = complete ] && want=0
    [ "$got" = "$want" ] || FAIL "alone first, $stage: the survivors read $got bytes, want $want"
    empty "alone first, reader killed at $stage"
done

# A lone reader killed: its claim (a header) is swept by the next load.
SHARE_TEST_AT="reading:kill" "$LOADER" "$M" >/dev/null 2>&1
[ -n "$(ls -A "$SEGS")" ] || FAIL "the killed lone reader left no claim to sweep"
O=$DIR/other.safetensors
check 0 "gen other" "$PINIO" gen "$O" --size 1M --tensors 3 --seed 7 --quiet
check 0 "a load of another file" "$LOADER" "$O"
empty "a lone reader's claim swept"

# The rest: the segment made at once (PINIO_SHARE=eager).
export PINIO_SHARE=eager

# --- 2, 3 and 4 processes at once: one read in all, on ext4 and on tmpfs.
for n in 2 3 4; do
    got=$(together "$n" "$M" "$n at once")
    [ "$got" = "$ONE" ] || FAIL "$n at once read $got bytes from storage, one load reads $ONE"
    grep -q "read_here=1" "$DIR"/t*.out || FAIL "$n at once: none read for the others"
    empty "$n at once"
done
T=$SEGS.file
mkdir "$T" && cp "$M" "$T/m.safetensors"
got=$(together 3 "$T/m.safetensors" "3 at once on tmpfs")
[ "$got" = "$ONE" ] || FAIL "3 at once on tmpfs read $got bytes, one load reads $ONE"
rm -rf "$T"
empty "tmpfs"

# --- the opt-outs: each process reads for itself.
got=$(PINIO_SHARE=0 together 2 "$M" "PINIO_SHARE=0")
[ "$got" = "$((2 * ONE))" ] || FAIL "PINIO_SHARE=0: read $got bytes, want 2 x $ONE"
has "$DIR/t1.out" "share=private: sharing off (PINIO_SHARE=0)" "PINIO_SHARE=0 is said"
check 0 "--no-share" "$PINIO" load "$M" --memory pinned --no-share --json
json "--no-share: the JSON says so" "j['share'].startswith('private: sharing off') and j['shared_file_count'] == 0 and j['read_bytes'] > 0"
check 0 "--share=auto" "$PINIO" load "$M" --memory pinned --share=auto --json
json "--share=auto read here" "j['share_read_file_count'] == 1 and j['share_bytes'] > 0"
check 0 "--filter" "$PINIO" load "$M" --memory pinned --filter model.layers.0 --json
json "a part of the file is read privately" "j['share'].startswith('private: a part of the file selected') and j['share_bytes'] == 0"
check 2 "--share=bad" "$PINIO" load "$M" --share=bad
has "$DIR/err" "auto or off" "a bad --share value is named"
empty "the CLI"

# --- a reader killed at each stage while two others wait for it: they take
# over (one reads, one shares), or find the finished segment (no read).
for stage in claimed allocated reading complete; do
    rm -f "$DIR/go" "$DIR/go.reached"
    SHARE_TEST_AT="$stage:wait:$DIR/go" "$LOADER" "$M" >"$DIR/a.out" 2>&1 &
    a=$!
    while [ ! -e "$DIR/go.reached" ] && kill -0 "$a" 2>/dev/null; do sleep 0.05; done
    [ -e "$DIR/go.reached" ] || FAIL "$stage: the reader never reached the stage: $(cat "$DIR/a.out")"
    rm -f "$DIR"/hold*
    SHARE_TEST_HOLD="$DIR/holdb" "$LOADER" "$M" >"$DIR/b.out" 2>&1 &
    b=$!
    SHARE_TEST_HOLD="$DIR/holdc" "$LOADER" "$M" >"$DIR/c.out" 2>&1 &
    c=$!
    kill -9 "$a"
    wait "$a"
    # Both loaded before either lets go (see together()).
    while [ ! -e "$DIR/holdb.reached" ] && kill -0 "$b" 2>/dev/null; do sleep 0.05; done
    while [ ! -e "$DIR/holdc.reached" ] && kill -0 "$c" 2>/dev/null; do sleep 0.05; done
    touch "$DIR/holdb" "$DIR/holdc"
    wait "$b" || FAIL "$stage: the second loader failed: $(cat "$DIR/b.out")"
    wait "$c" || FAIL "$stage: the third loader failed: $(cat "$DIR/c.out")"
    got=$(( $(field read_bytes "$DIR/b.out") + $(field read_bytes "$DIR/c.out") ))
    want=$ONE
    [ "$stage" = complete ] && want=0 # the dead reader's segment was whole and marked
    [ "$got" = "$want" ] || FAIL "$stage: the survivors read $got bytes, want $want"
    empty "reader killed at $stage"
done

# --- a loader that comes while the reader reads maps the segment then and
# populates it behind the reader (so that it is ready as soon as the reader
# is), yet takes its bytes only once complete: every byte right, and said.
# Then the same with the reader killed after the loader mapped it: the
# loader's mapping goes with the takeover, it reads the file itself; and a
# loader that mapped a dead reader's segment while a third process took it
# over and read it again maps the new one, every byte right.
# seg_locked PID OUT: where OUT's memory line says the segment is locked,
# every page of PID's mapping of it is present and locked (smaps: Rss =
# Size, and Locked, the locked pages' proportional share, = Pss).
seg_locked() {
    grep -q "memory=.*segments of their own.*locked in RAM" "$2" || return 0
    got=$(awk -v d="$SEGS/$PREFIX" 'index($0, d) { m = 1; next }
        /^[0-9a-f]+-[0-9a-f]+ / { m = 0 }
        m && /^Size:/ { s += $2 } m && /^Rss:/ { r += $2 }
        m && /^Pss:/ { p += $2 } m && /^Locked:/ { l += $2 }
        END { print (s > 0 && r == s && l == p) ? "locked" : \
              "Size " s " Rss " r " Pss " p " Locked " l " (kB)" }' "/proc/$1/smaps")
    [ "$got" = locked ] || FAIL "process $1's segment is said locked, smaps: $got"
}
PREFIX=pinio-share-
# early_pair [hold]: a reader ($a) stopped at its first read, and a loader
# ($b) stopped once it mapped the reader's segment early; with "hold" both
# keep their checkpoint once loaded, until $DIR/holda and $DIR/holdb exist.
# The reader's stop is bounded: a loader that never maps early fails here.
early_pair() {
    rm -f "$DIR"/go* "$DIR"/early* "$DIR"/hold*
    ha= hb=
    [ "${1:-}" = hold ] && ha=$DIR/holda hb=$DIR/holdb
    SHARE_TEST_HOLD=$ha SHARE_TEST_AT="reading:wait:$DIR/go" "$LOADER" "$M" >"$DIR/a.out" 2>&1 &
    a=$!
    until_reached "$DIR/go" "$a"
    SHARE_TEST_HOLD=$hb SHARE_TEST_AT="early:wait:$DIR/early" "$LOADER" "$M" >"$DIR/b.out" 2>&1 &
    b=$!
    until_reached "$DIR/early" "$b"
    [ -e "$DIR/early.reached" ] || FAIL "a loader waiting for a reader never mapped its segment early: $(cat "$DIR/b.out")"
}
early_pair hold
touch "$DIR/early" "$DIR/go"
until_reached "$DIR/holda" "$a"
until_reached "$DIR/holdb" "$b"
seg_locked "$a" "$DIR/a.out"
seg_locked "$b" "$DIR/b.out"
touch "$DIR/holda" "$DIR/holdb"
wait "$a" || FAIL "the reader mapped early by another: $(cat "$DIR/a.out")"
wait "$b" || FAIL "the loader that mapped early: $(cat "$DIR/b.out")"
has "$DIR/b.out" "share=shared: read by process [0-9]*, mapped while it read" "the early mapping is said"
[ "$(field read_bytes "$DIR/b.out")" = 0 ] || FAIL "the loader that mapped early read $(field read_bytes "$DIR/b.out")"
empty "mapped early"

early_pair
kill -9 "$a"
wait "$a"
touch "$DIR/early"
wait "$b" || FAIL "mapped early, then the reader killed: $(cat "$DIR/b.out")"
has "$DIR/b.out" "share=read here" "the early mapper of a killed reader takes over"
[ "$(field read_bytes "$DIR/b.out")" = "$ONE" ] || FAIL "the early mapper's takeover read $(field read_bytes "$DIR/b.out")"
empty "mapped early, reader killed"

early_pair
kill -9 "$a"
wait "$a"
SHARE_TEST_HOLD="$DIR/holdc" "$LOADER" "$M" >"$DIR/c.out" 2>&1 &
c=$!
until_reached "$DIR/holdc" "$c"
touch "$DIR/early"
wait "$b" || FAIL "mapped early, the segment read again by a third: $(cat "$DIR/b.out")"
touch "$DIR/holdc"
wait "$c" || FAIL "the third loader that took over: $(cat "$DIR/c.out")"
has "$DIR/c.out" "share=read here" "the third loader took over"
has "$DIR/b.out" "share=shared: read by process $c" "the early mapper maps the new reader's segment"
[ "$(field read_bytes "$DIR/b.out")" = 0 ] || FAIL "the early mapper read $(field read_bytes "$DIR/b.out") after a takeover"
empty "mapped early, taken over by a third"

# --- the reader's reads fail (PINIO_FAULTS, the engine's fault point):
# its load fails naming the offset, its segment is removed, and a loader
# waiting for it reads the file itself.
rm -f "$DIR/go" "$DIR/go.reached"
PINIO_FAULTS=eio@2 SHARE_TEST_AT="allocated:wait:$DIR/go" "$LOADER" "$M" >"$DIR/a.out" 2>&1 &
a=$!
while [ ! -e "$DIR/go.reached" ] && kill -0 "$a" 2>/dev/null; do sleep 0.05; done
"$LOADER" "$M" >"$DIR/b.out" 2>&1 &
b=$!
touch "$DIR/go"
wait "$a"
rc=$?
[ "$rc" -eq 1 ] || FAIL "a reader whose reads fail: exit $rc, want 1: $(cat "$DIR/a.out")"
grep -q "offset" "$DIR/a.out" || FAIL "the failed read's offset is not named: $(cat "$DIR/a.out")"
wait "$b" || FAIL "the loader waiting on a failed reader: $(cat "$DIR/b.out")"
[ "$(field read_bytes "$DIR/b.out")" = "$ONE" ] || FAIL "the loader after a failed reader read $(field read_bytes "$DIR/b.out")"
empty "reader's reads failed"

# --- a sharer killed while it maps, after the reader died with its segment
# complete: a later load maps it still, and the last user removes it.
SHARE_TEST_AT="complete:kill" "$LOADER" "$M" >/dev/null 2>&1
SHARE_TEST_AT="joining:kill" "$LOADER" "$M" >/dev/null 2>&1
[ -n "$(ls -A "$SEGS")" ] || FAIL "the killed reader's complete segment is gone already"
check 0 "after a killed sharer" "$LOADER" "$M"
has "$DIR/out" "read_bytes=0 shared=1" "the complete segment of a dead reader is mapped"
empty "sharer killed while mapping"

# --- every user killed: the next load of any file removes the stale segment.
SHARE_TEST_AT="reading:kill" "$LOADER" "$M" >/dev/null 2>&1
SHARE_TEST_AT="complete:kill" "$LOADER" "$M" >/dev/null 2>&1
[ -n "$(ls -A "$SEGS")" ] || FAIL "the killed reader left no segment to sweep"
check 0 "a load of another file" "$LOADER" "$O"
empty "stale segment swept"

# --- the file replaced (renamed over) while its reader reads: a load
# opened after it reads the new file itself; the reader fails naming it.
check 0 "gen new" "$PINIO" gen "$DIR/new.safetensors" --size 24M --tensors 12 --dtypes bf16,f32,u8 --seed 2 --quiet
rm -f "$DIR/go" "$DIR/go.reached"
SHARE_TEST_AT="reading:wait:$DIR/go" "$LOADER" "$M" >"$DIR/a.out" 2>&1 &
a=$!
while [ ! -e "$DIR/go.reached" ] && kill -0 "$a" 2>/dev/null; do sleep 0.05; done
mv "$DIR/new.safetensors" "$M"
check 0 "a load after the replacement" "$LOADER" "$M"
has "$DIR/out" "share=read here" "the replaced file is read, not shared"
[ "$(field read_bytes "$DIR/out")" = "$ONE" ] || FAIL "the new file's load read $(field read_bytes "$DIR/out")"
touch "$DIR/go"
wait "$a"
rc=$?
[ "$rc" -eq 1 ] || FAIL "the reader of the replaced file: exit $rc, want 1: $(cat "$DIR/a.out")"
grep -q "changed" "$DIR/a.out" || FAIL "the reader's error does not say the file changed: $(cat "$DIR/a.out")"
empty "file replaced"

# --- two files of one name, same size and modification time, other bytes:
# never shared (only the inode tells them apart).
mkdir "$DIR/d1" "$DIR/d2"
check 0 "gen d1" "$PINIO" gen "$DIR/d1/m.safetensors" --size 8M --tensors 4 --seed 3 --quiet
check 0 "gen d2" "$PINIO" gen "$DIR/d2/m.safetensors" --size 8M --tensors 4 --seed 4 --quiet
touch -r "$DIR/d1/m.safetensors" "$DIR/d2/m.safetensors"
rm -f "$DIR/go" "$DIR/go.reached"
SHARE_TEST_AT="complete:wait:$DIR/go" "$LOADER" "$DIR/d1/m.safetensors" >"$DIR/a.out" 2>&1 &
a=$!
while [ ! -e "$DIR/go.reached" ] && kill -0 "$a" 2>/dev/null; do sleep 0.05; done
check 0 "the other file of that name" "$LOADER" "$DIR/d2/m.safetensors"
has "$DIR/out" "share=read here" "a file of the same name and size is read, not shared"
touch "$DIR/go"
wait "$a" || FAIL "the first file's load: $(cat "$DIR/a.out")"
empty "same name"

# --- a full segment folder: a tmpfs of 8 MiB (unshare -m, root) cannot
# hold the 24 MiB segment: a private read, said, and nothing left.
if unshare -m true 2>/dev/null; then
    unshare -m sh -c 'mount -t tmpfs -o size=8M tmpfs "$1" && PINIO_SHARE_DIR="$1" "$2" "$3"; s=$?; ls -A "$1" >&2; exit $s' \
        sh "$SEGS" "$LOADER" "$M" >"$DIR/out" 2>"$DIR/err"
    rc=$?
    [ "$rc" -eq 0 ] || FAIL "full segment folder: exit $rc: $(cat "$DIR/err")"
    has "$DIR/out" "share=private: $SEGS has [0-9]* bytes free, the segment needs" "the full folder is said"
    [ ! -s "$DIR/err" ] || FAIL "full segment folder: left behind: $(cat "$DIR/err")"
else
    echo "SKIP: full segment folder: unshare -m needs root"
fi

# --- a memory cgroup limit below the file: refused before a byte is
# written, by name, never SIGBUS or the OOM killer; a file that fits shares.
# cgroup v2 where its memory controller is on, else v1's memory hierarchy
# (the library reads either); a child of this process's own cgroup.
limit_file=
if grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
    parent=/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/self/cgroup)
    limit_file=memory.max
elif [ -d /sys/fs/cgroup/memory ]; then
    parent=/sys/fs/cgroup/memory$(sed -n 's/^[0-9]*:memory://p' /proc/self/cgroup)
    limit_file=memory.limit_in_bytes
fi
if [ -n "$limit_file" ] && mkdir "$parent/pinio-$run-share-$$" 2>/dev/null; then
    CG=$parent/pinio-$run-share-$$
    echo $((20 << 20)) >"$CG/$limit_file"
    sh -c 'echo $$ >"$1/cgroup.procs" && exec "$2" "$3"' sh "$CG" "$LOADER" "$M" >"$DIR/out" 2>"$DIR/err"
    rc=$?
    [ "$rc" -eq 1 ] || FAIL "cgroup limit: exit $rc, want 1: $(cat "$DIR/out" "$DIR/err")"
    has "$DIR/err" "needs [0-9]* bytes but only [0-9]* are available (cgroup v[12] memory" "the cgroup limit is named"
    sh -c 'echo $$ >"$1/cgroup.procs" && exec "$2" "$3"' sh "$CG" "$LOADER" "$O" >"$DIR/out" 2>"$DIR/err"
    rc=$?
    [ "$rc" -eq 0 ] || FAIL "cgroup limit, a small file: exit $rc: $(cat "$DIR/err")"
    has "$DIR/out" "share=read here" "a file within the limit is shared"
    rmdir "$CG" && CG=
    empty "cgroup limit"
else
    echo "SKIP: cgroup limit: no writable memory cgroup (v2 controller or v1 hierarchy) here"
fi

[ "$fails" -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "ok"
