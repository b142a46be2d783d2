#!/usr/bin/env bash
# pinio bench never loses a file to its own outputs or its overwrite guard,
# and says when its output was lost (issue 23 items 12, 18, 20):
#  - --output / --log-file naming the target (the name, a symlink, a hard
#    link, /proc/self/fd/N; in a job file too) are refused with exit 2 and
#    the target is untouched;
#  - a file bench made that later got other data is not bench's any more: a
#    write run refuses it (bench's own file is still reused);
#  - --output on a full device exits 1 with one line naming it;
#  - a job file's failures print the JSON error object with --json;
#  - --time says its range the same way for every value out of it.
# usage: bench_outputs_test.sh PINIO
set -u
pinio=$1
dir=$(mktemp -d /var/tmp/pinio-${PINIO_TEST_RUN:-p$$}-bench-out-XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail=0
f="$dir/data"
common=(--size 1M --bs 64k --direct=0)

# refused CODE DESC ARGS...: exit CODE, one stderr line, $f (if it exists)
# unchanged.
refused() {
    local want=$1 desc=$2; shift 2
    local before=""; [ -e "$f" ] && before=$(sha256sum <"$f")
    "$pinio" bench "$@" >"$dir/out" 2>"$dir/err"
    local rc=$?
    local after=""; [ -e "$f" ] && after=$(sha256sum <"$f")
    if [ $rc != "$want" ] || [ "$(wc -l <"$dir/err")" != 1 ]; then
        echo "FAIL: $desc -> rc $rc (want $want):"; cat "$dir/err"; fail=1
    elif [ "$before" != "$after" ]; then
        echo "FAIL: $desc changed $f"; fail=1
    else
        echo "ok: $desc: $(cat "$dir/err")"
    fi
}

# ---- outputs naming the target -------------------------------------------
"$pinio" bench --file "$f" "${common[@]}" >/dev/null 2>"$dir/err" ||
    { echo "FAIL: making the target"; cat "$dir/err"; exit 1; }
ln -s "$f" "$dir/link"
ln "$f" "$dir/hard"
for opt in --output --log-file; do
    refused 2 "$opt = the target" --file "$f" "${common[@]}" "$opt" "$f"
    refused 2 "$opt = a symlink to it" --file "$f" "${common[@]}" "$opt" "$dir/link"
    refused 2 "$opt = a hard link to it" --file "$f" "${common[@]}" "$opt" "$dir/hard"
    refused 2 "$opt = /proc/self/fd/N" --file "$f" "${common[@]}" "$opt" /proc/self/fd/3 3<"$f"
    refused 2 "$opt = the target by another spelling" --file "$f" "${common[@]}" "$opt" "$dir/./data"
    refused 2 "$opt = the second of two targets" --file "$dir/other,$f" "${common[@]}" "$opt" "$dir/hard"
    # a target bench is about to create: the same name
    refused 2 "$opt = a new target" --file "$dir/new" "${common[@]}" "$opt" "$dir/new"
    [ -e "$dir/new" ] && { echo "FAIL: $opt = a new target made it"; fail=1; rm -f "$dir/new"; }
    # a dangling symlink to where the target will be
    ln -s "$dir/new" "$dir/dangling"
    refused 2 "$opt = a dangling link to a new target" --file "$dir/new" "${common[@]}" "$opt" "$dir/dangling"
    rm -f "$dir/dangling" "$dir/new"
done
[ -e "$dir/other" ] && { echo "FAIL: a refused run made $dir/other"; fail=1; }
# a job file: --output naming a section's target, --log-file in the section
printf '[a]\nrw=read\nfilename=%s\nsize=1M\nbs=64k\ndirect=0\n' "$f" >"$dir/j.fio"
refused 2 "job file --output = a section's target" "$dir/j.fio" --output "$dir/link"
refused 2 "job file --log-file = a section's target" "$dir/j.fio" --log-file "$dir/hard"
# an output beside the target is fine
"$pinio" bench --file "$f" "${common[@]}" --output "$dir/o.txt" --log-file "$dir/l.csv" \
    >/dev/null 2>"$dir/err" || { echo "FAIL: outputs beside the target"; cat "$dir/err"; fail=1; }
grep -q "MB/s" "$dir/o.txt" && head -1 "$dir/l.csv" | grep -q '^time_ms,' ||
    { echo "FAIL: outputs beside the target are empty"; fail=1; }
rm -f "$dir/link" "$dir/hard" "$f"

# ---- the overwrite guard: bench's file, until someone else writes it -----
# (bench marks its files with a user xattr: without them it owns none)
touch "$dir/probe"
if ! /usr/bin/python3 -c 'import os,sys; os.setxattr(sys.argv[1], "user.pinio.probe", b"1")' "$dir/probe" 2>/dev/null; then
    echo "skip: the overwrite guard: $dir has no user xattrs"
else
"$pinio" bench --file "$f" --rw write "${common[@]}" >/dev/null 2>"$dir/err" ||
    { echo "FAIL: a write run making its file"; cat "$dir/err"; fail=1; }
"$pinio" bench --file "$f" --rw write "${common[@]}" >/dev/null 2>"$dir/err" ||
    { echo "FAIL: a write run reusing bench's own file"; cat "$dir/err"; fail=1; }
"$pinio" bench --file "$f" --rw write "${common[@]}" >/dev/null 2>"$dir/err" ||
    { echo "FAIL: a third write run on bench's own file"; cat "$dir/err"; fail=1; }
# real data written over it (same inode, the xattr kept): not bench's any more
printf 'the real data, written after bench made the file\n' >"$f"
refused 1 "write over a bench file that got other data" --file "$f" --rw write "${common[@]}"
grep -q "did not write" "$dir/err" || { echo "FAIL: the refusal does not say why"; fail=1; }
# --allow-file-overwrite still means it
"$pinio" bench --file "$f" --rw write "${common[@]}" --allow-file-overwrite >/dev/null 2>"$dir/err" ||
    { echo "FAIL: --allow-file-overwrite"; cat "$dir/err"; fail=1; }
rm -f "$f"
# the same size written in place, at another time (touch -d: a later write
# need not move mtime by more than the clock's tick, so the test sets it)
"$pinio" bench --file "$f" --rw write "${common[@]}" >/dev/null 2>&1
dd if=/dev/urandom of="$f" bs=4k count=1 conv=notrunc status=none
touch -m -d '2001-02-03 04:05:06' "$f"
refused 1 "write over a bench file rewritten in place" --file "$f" --rw write "${common[@]}"
rm -f "$f"
# a copy that kept the xattr is another file
"$pinio" bench --file "$f" --rw write "${common[@]}" >/dev/null 2>&1
if cp --preserve=xattr "$f" "$dir/copy" 2>/dev/null && /usr/bin/python3 -c 'import os,sys; os.getxattr(sys.argv[1], "user.pinio.bench")' "$dir/copy" 2>/dev/null; then
    cp "$dir/copy" "$dir/copy.orig"
    "$pinio" bench --file "$dir/copy" --rw write "${common[@]}" >/dev/null 2>"$dir/err"
    rc=$?
    [ $rc = 1 ] && cmp -s "$dir/copy" "$dir/copy.orig" ||
        { echo "FAIL: a copy of bench's file with its xattr was overwritten (rc $rc)"; fail=1; }
fi
rm -f "$f" "$dir/copy" "$dir/copy.orig"
fi
rm -f "$dir/probe"

# ---- --output on a full device ------------------------------------------
if [ -c /dev/full ]; then
    for extra in "" "--json" "--output-format terse" "--sweep qd=1,2"; do
        # shellcheck disable=SC2086
        "$pinio" bench --file "$f" "${common[@]}" $extra --output /dev/full >/dev/null 2>"$dir/err"
        rc=$?
        if [ $rc != 1 ] || ! grep -q "^pinio bench: --output /dev/full: .*No space left on device" "$dir/err"; then
            echo "FAIL: --output /dev/full $extra -> rc $rc:"; cat "$dir/err"; fail=1
        else
            echo "ok: --output /dev/full $extra: $(tail -1 "$dir/err")"
        fi
        rm -f "$f"
    done
fi

# ---- a job file's failures, in JSON -------------------------------------
json_error() { # CODE WANT_EXIT ARGS...: exit WANT_EXIT, stdout the error object with CODE
    local code=$1 want=$2; shift 2
    "$pinio" bench "$@" >"$dir/out" 2>"$dir/err"
    local rc=$?
    if [ $rc != "$want" ] || ! /usr/bin/python3 -c '
import json, sys
j = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
e = j["error"]
assert j["command"] == "bench" and e["code"] == int(sys.argv[2]) and e["message"], j
' "$dir/out" "$code"; then
        echo "FAIL: pinio bench $* -> rc $rc (want $want), stdout:"; cat "$dir/out"; cat "$dir/err"; fail=1
    else
        echo "ok: pinio bench $* -> $(cat "$dir/out")"
    fi
}
printf '[a]\nrw=read\nfilename=%s\nsize=1M\nnot_an_option=1\n' "$f" >"$dir/bad.fio"
json_error -22 2 "$dir/bad.fio" --json
json_error -22 2 "$dir/bad.fio" --output-format json
json_error -2 1 "$dir/missing.fio" --json
json_error -22 2 "$dir/j.fio" --json --file "$f"

# ---- --time: one range message ------------------------------------------
for t in 0 1e308 -1 0.0001 1e7 inf; do
    "$pinio" bench --file "$f" --time "$t" >/dev/null 2>"$dir/err"
    rc=$?
    grep -q -- "--time $t: must be between 0.001 and 1e6 seconds" "$dir/err" && [ $rc = 2 ] ||
        { echo "FAIL: --time $t -> rc $rc: $(cat "$dir/err")"; fail=1; }
done
"$pinio" bench --file "$f" --time abc >/dev/null 2>"$dir/err"
grep -q "bad value 'abc' for --time" "$dir/err" || { echo "FAIL: --time abc: $(cat "$dir/err")"; fail=1; }
[ -e "$f" ] && { echo "FAIL: a refused --time made the target"; fail=1; }

[ $fail = 0 ] && echo "pbench outputs: ok"
exit $fail
