#!/usr/bin/env bash
# pinio doctor: --json is one parseable object with every fact and sane
# values; the text form has one line per fact; polled I/O is read from the
# path's disk (through a partition) in a fake sysfs tree, both ways; a
# missing path and a bad option are one-line errors. usage: doctor_test.sh PINIO
set -u
pinio=$1
dir=$(mktemp -d /tmp/doctor-test-XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail=0

"$pinio" doctor "$dir" --json >"$dir/j" 2>"$dir/err" || { echo "FAIL: doctor --json exit $?"; cat "$dir/err"; fail=1; }
python3 - "$dir/j" "$dir" <<'PY' || fail=1
import json, sys
j = json.load(open(sys.argv[1]))
for k in ("pinio", "kernel", "io_uring", "memlock_limit", "cap_ipc_lock", "registrable",
          "numa_nodes", "path", "path_node", "o_direct", "polled_io", "thp", "cachestat"):
    assert k in j, f"missing {k}: {sorted(j)}"
assert j["path"] == sys.argv[2], j["path"]
assert j["numa_nodes"] >= 1, j["numa_nodes"]
assert j["polled_io"] in (True, False, None), j["polled_io"]
assert j["polled_io"] is not False or "polled_io_advice" in j, "a no needs its advice"
PY
"$pinio" doctor "$dir" >"$dir/t" 2>&1 || { echo "FAIL: doctor text"; fail=1; }
grep -q "^polled_io " "$dir/t" || { echo "FAIL: no polled_io line"; cat "$dir/t"; fail=1; }

# A fake sysfs: the path's device is partition 1 of a disk whose queue says
# io_poll 1, then 0.
dev=$(stat -c '%d' "$dir")
maj=$((dev >> 8 & 0xfff)) min=$(((dev & 0xff) | (dev >> 12 & 0xfff00)))
root="$dir/sys"
mkdir -p "$root/devices/virtual/fake/fakedisk/fakedisk1" "$root/devices/virtual/fake/fakedisk/queue" \
         "$root/dev/block" "$root/devices/system/node/node0"
touch "$root/devices/virtual/fake/fakedisk/fakedisk1/partition"
ln -s "../../devices/virtual/fake/fakedisk/fakedisk1" "$root/dev/block/$maj:$min"
for v in 1 0; do
    echo $v >"$root/devices/virtual/fake/fakedisk/queue/io_poll"
    PINIO_SYSFS_ROOT=$root "$pinio" doctor "$dir" --json >"$dir/f" 2>"$dir/err" || { echo "FAIL: fake sysfs"; cat "$dir/err"; fail=1; }
    python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); want=sys.argv[2]=="1"; assert j["polled_io"] is want, j["polled_io"]' "$dir/f" $v || { echo "FAIL: io_poll $v read as $(grep -o '"polled_io":[a-z]*' "$dir/f")"; fail=1; }
done

"$pinio" doctor /nonexistent-dir-xyz >"$dir/o" 2>"$dir/err"; rc=$?
[ $rc != 0 ] && [ "$(wc -l <"$dir/err")" = 1 ] || { echo "FAIL: missing path -> rc $rc"; cat "$dir/err"; fail=1; }
# A FIFO: opening it to probe O_DIRECT used to wait for a writer forever.
mkfifo "$dir/fifo"
timeout 20 "$pinio" doctor "$dir/fifo" >"$dir/o" 2>"$dir/err"; rc=$?
[ $rc = 1 ] && grep -q "not a regular file" "$dir/err" || { echo "FAIL: FIFO -> rc $rc"; cat "$dir/err"; fail=1; }
"$pinio" doctor --bogus >"$dir/o" 2>"$dir/err"; rc=$?
[ $rc = 2 ] || { echo "FAIL: bad option -> rc $rc"; cat "$dir/err"; fail=1; }

[ $fail = 0 ] && echo "doctor: ok"
exit $fail
