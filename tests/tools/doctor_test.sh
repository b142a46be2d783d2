#!/usr/bin/env bash
# pinio doctor: --json is one parseable object carrying every fact, a
# verdict and reasons with advice; the block queue, hugepages and the
# memory cgroup (v1 and v2) are read from a fake /proc + /sys tree
# (--root), a partition and a dm device followed to their disk; polled I/O
# through PINIO_SYSFS_ROOT; degraded cases exit 1 with their reason
# (io_uring refused, registration refused, O_DIRECT refused, memlock
# lowered with prlimit); a missing path, a FIFO and a bad option are
# one-line errors. usage: doctor_test.sh PINIO
set -u
pinio=$1
dir=$(mktemp -d "/var/tmp/pinio-${PINIO_TEST_RUN:-p$$}-doctor-XXXXXX")
trap 'rm -rf "$dir"' EXIT
fail=0
FAIL() { echo "FAIL: $*"; fail=1; }

# json FILE PYTHON-ASSERTIONS: j is the parsed object.
json() {
    python3 - "$1" "$2" <<'PY' || { FAIL "$3"; cat "$1"; }
import json, sys
j = json.load(open(sys.argv[1]))
exec(sys.argv[2])
PY
}

"$pinio" doctor "$dir" --json >"$dir/j" 2>"$dir/err"; rc=$?
[ $rc = 0 ] || [ $rc = 1 ] || FAIL "doctor --json exit $rc"
json "$dir/j" '
for k in ("pinio_version", "schema", "command", "path", "verdict", "reasons", "notes", "kernel",
          "liburing_version", "file_system", "block_device", "io_uring", "engine", "memlock",
          "memory", "hugepages", "numa", "pool", "cachestat", "gpus"):
    assert k in j, f"missing {k}: {sorted(j)}"
assert j["command"] == "doctor" and j["path"] == sys.argv[1].rsplit("/", 1)[0], j["path"]
assert j["verdict"] in ("full_speed", "degraded")
assert (j["verdict"] == "degraded") == bool(j["reasons"]), j["reasons"]
for r in j["reasons"]:
    assert r["code"] and r["message"] and r["advice"], r
assert j["engine"]["queue_depth"] > 0 and j["engine"]["request_size_bytes"] >= 4096
m = j["memlock"]
for k in ("soft_bytes", "hard_bytes", "registrable_bytes"):
    assert m[k] == "unlimited" or isinstance(m[k], int), m
assert j["numa"]["nodes"] >= 1
assert j["file_system"]["type"], j["file_system"]
if j["io_uring"]["available"]:
    assert j["io_uring"]["opcodes"]["read"] in (True, False) and j["io_uring"]["setup_flags"]
assert not j["pool"]["allocated"] or j["pool"]["registered"] or j["pool"]["reason"], \
    "pool registered false needs a reason"
' "doctor --json facts"
"$pinio" doctor "$dir" >"$dir/t" 2>&1; rc=$?
[ $rc = 0 ] || [ $rc = 1 ] || FAIL "doctor text exit $rc"
for k in "file system" "block device" "io_uring" "opcodes" "engine defaults" \
         "memlock" "memory" "hugepages" "verdict"; do
    grep -q "^$k " "$dir/t" || FAIL "no '$k' line"
done
grep -q "liburing [0-9]" "$dir/t" || FAIL "no liburing version"

# ---- a fake /proc and /sys: the path's device is partition 1 of a disk.
dev=$(stat -c '%d' "$dir")
maj=$((dev >> 8 & 0xfff)) min=$(((dev & 0xff) | (dev >> 12 & 0xfff00)))
root=$dir/root
disk=$root/sys/devices/virtual/fake/fakedisk
mkdir -p "$disk/fakedisk1" "$disk/queue" "$disk/device" "$root/sys/dev/block" \
         "$root/sys/devices/system/node/node0" "$root/sys/kernel/mm/transparent_hugepage" \
         "$root/proc/self"
touch "$disk/fakedisk1/partition"
ln -s "../../devices/virtual/fake/fakedisk/fakedisk1" "$root/sys/dev/block/$maj:$min"
q=$disk/queue
echo "mq-deadline kyber [none]" >"$q/scheduler"; echo 1023 >"$q/nr_requests"
echo 512 >"$q/max_sectors_kb"; echo 2048 >"$q/max_hw_sectors_kb"
echo 4096 >"$q/logical_block_size"; echo 8192 >"$q/physical_block_size"
echo 96 >"$q/read_ahead_kb"; echo 1 >"$q/rotational"; echo 0 >"$q/io_poll"
echo "FAKE DISK 9000   " >"$disk/device/model"
echo "always madvise [never]" >"$root/sys/kernel/mm/transparent_hugepage/enabled"
echo "always defer [defer+madvise] madvise never" >"$root/sys/kernel/mm/transparent_hugepage/defrag"
printf 'MemTotal: 1000 kB\nMemAvailable: 777 kB\nHugePages_Total: 64\nHugePages_Free: 60\nHugepagesize: 2048 kB\n' >"$root/proc/meminfo"
# cgroup v2: a 3 GiB limit on the process's cgroup.
echo "0::/job" >"$root/proc/self/cgroup"
mkdir -p "$root/sys/fs/cgroup/job"
echo $((3 << 30)) >"$root/sys/fs/cgroup/job/memory.max"; echo $((1 << 30)) >"$root/sys/fs/cgroup/job/memory.current"
"$pinio" doctor "$dir" --root "$root" --json >"$dir/f" 2>"$dir/err"
json "$dir/f" '
b = j["block_device"]
assert b["device"] == "fakedisk1" and b["disk"] == "fakedisk" and b["members"] == 0, b
assert b["scheduler"] == "none" and b["nr_requests"] == 1023 and b["max_sectors_kb"] == 512, b
assert b["max_hw_sectors_kb"] == 2048 and b["logical_block_size_bytes"] == 4096, b
assert b["physical_block_size_bytes"] == 8192 and b["read_ahead_kb"] == 96, b
assert b["rotational"] is True and b["polled_io"] is False and b["model"] == "FAKE DISK 9000", b
h = j["hugepages"]
assert h == {"total": 64, "free": 60, "page_bytes": 2 << 20, "thp_enabled": "never",
             "thp_defrag": "defer+madvise"}, h
m = j["memory"]
assert m["mem_available_bytes"] == 777 * 1024 and m["cgroup_limit_bytes"] == 3 << 30, m
assert m["cgroup_available_bytes"] == 2 << 30 and m["bound_by"] == "MemAvailable", m
codes = [n["code"] for n in j["notes"]]
assert "thp_off" in codes and "rotational" in codes and "requests_split" in codes, codes
' "fake root: queue of the partition's disk, hugepages, cgroup v2"

# cgroup v1, and a dm device over the fake disk's partition: followed to the disk.
echo "5:memory:/job" >"$root/proc/self/cgroup"
mkdir -p "$root/sys/fs/cgroup/memory/job"
echo $((2 << 30)) >"$root/sys/fs/cgroup/memory/job/memory.limit_in_bytes"
echo 0 >"$root/sys/fs/cgroup/memory/job/memory.usage_in_bytes"
mkdir -p "$root/sys/devices/virtual/block/dm-0/slaves" "$root/sys/devices/virtual/block/dm-0/queue"
echo none >"$root/sys/devices/virtual/block/dm-0/queue/scheduler"
ln -s "../../../fake/fakedisk/fakedisk1" "$root/sys/devices/virtual/block/dm-0/slaves/fakedisk1"
ln -s "../../../fake/fakedisk" "$root/sys/devices/virtual/block/dm-0/slaves/zdisk"
rm "$root/sys/dev/block/$maj:$min"
ln -s "../../devices/virtual/block/dm-0" "$root/sys/dev/block/$maj:$min"
"$pinio" doctor "$dir" --root "$root" --json >"$dir/f" 2>"$dir/err"
json "$dir/f" '
b = j["block_device"]
assert b["device"] == "dm-0" and b["disk"] == "fakedisk" and b["members"] == 2, b
assert b["scheduler"] == "none" and b["nr_requests"] == 1023, b
m = j["memory"]
assert m["cgroup_limit_bytes"] == 2 << 30 and m["cgroup_available_bytes"] == 2 << 30, m
' "fake root: dm followed to its member disk, cgroup v1"
"$pinio" doctor "$dir" --root "$root" >"$dir/t" 2>&1
grep -q "^block device  *fakedisk (under dm-0, first of its members): 'FAKE DISK 9000'" "$dir/t" ||
    { FAIL "text names the disk under dm-0"; cat "$dir/t"; }

# Polled I/O through PINIO_SYSFS_ROOT (the library's own redirection), both ways.
for v in 1 0; do
    echo $v >"$q/io_poll"
    PINIO_SYSFS_ROOT=$root/sys "$pinio" doctor "$dir" --json >"$dir/f" 2>"$dir/err"
    json "$dir/f" "assert j['block_device']['polled_io'] is ($v == 1)" "io_poll $v"
done

# ---- degraded: exit 1, the reason and its advice in text and JSON.
degraded() { # NAME CODE CMD...
    local name=$1 code=$2; shift 2
    "$@" "$pinio" doctor "$dir" --json >"$dir/d" 2>"$dir/err"; local rc=$?
    [ $rc = 1 ] || FAIL "$name: exit $rc, want 1"
    json "$dir/d" "
assert j['verdict'] == 'degraded', j['verdict']
r = [r for r in j['reasons'] if r['code'] == '$code']
assert r and r[0]['advice'], j['reasons']" "$name: reason $code"
    "$@" "$pinio" doctor "$dir" >"$dir/t" 2>"$dir/err"; rc=$?
    [ $rc = 1 ] && grep -q "^verdict  *degraded" "$dir/t" && grep -q "reason $code: " "$dir/t" &&
        grep -q "^    -> " "$dir/t" || { FAIL "$name: text, exit $rc"; cat "$dir/t"; }
}
degraded "io_uring refused" io_uring_unavailable env PINIO_FAULTS=setupnosys
degraded "registration refused" memory_not_registered env PINIO_FAULTS=regnomem
degraded "O_DIRECT refused" o_direct_refused env PINIO_FAULTS=dioinval
# A low RLIMIT_MEMLOCK matters only without CAP_IPC_LOCK: drop it when root.
if [ "$(id -u)" = 0 ]; then
    if setpriv --bounding-set=-ipc_lock --inh-caps=-ipc_lock true 2>/dev/null; then
        degraded "memlock 64 KiB" memory_not_registered \
            setpriv --bounding-set=-ipc_lock --inh-caps=-ipc_lock -- prlimit --memlock=65536 --
    else
        echo "note: cannot drop CAP_IPC_LOCK here; memlock case not run"
    fi
elif grep -q '"cap_ipc_lock":false' "$dir/j"; then
    degraded "memlock 64 KiB" memory_not_registered prlimit --memlock=65536 --
fi
# tmpfs: nothing to drop, a note, not a reason.
if [ -d /dev/shm ] && [ -w /dev/shm ]; then
    "$pinio" doctor /dev/shm --json >"$dir/s" 2>"$dir/err"
    json "$dir/s" '
assert j["file_system"]["type"] == "tmpfs" and j["file_system"]["reads"] == "page_cache", j["file_system"]
assert "page_cache_is_storage" in [n["code"] for n in j["notes"]], j["notes"]
assert "o_direct_refused" not in [r["code"] for r in j["reasons"]], j["reasons"]' "tmpfs note"
fi

"$pinio" doctor /nonexistent-dir-xyz >"$dir/o" 2>"$dir/err"; rc=$?
[ $rc = 1 ] && [ "$(wc -l <"$dir/err")" = 1 ] || { FAIL "missing path -> rc $rc"; cat "$dir/err"; }
"$pinio" doctor /nonexistent-dir-xyz --json >"$dir/o" 2>"$dir/err"; rc=$?
[ $rc = 1 ] || FAIL "missing path --json -> rc $rc"
json "$dir/o" 'assert j["error"]["name"] == "ENOENT" and j["error"]["file"] == "/nonexistent-dir-xyz", j' "missing path JSON error"
# A FIFO: opening it to probe O_DIRECT used to wait for a writer forever.
mkfifo "$dir/fifo"
timeout 20 "$pinio" doctor "$dir/fifo" >"$dir/o" 2>"$dir/err"; rc=$?
[ $rc = 1 ] && grep -q "not a regular file" "$dir/err" || { FAIL "FIFO -> rc $rc"; cat "$dir/err"; }
"$pinio" doctor --bogus >"$dir/o" 2>"$dir/err"; rc=$?
[ $rc = 2 ] || { FAIL "bad option -> rc $rc"; cat "$dir/err"; }

[ $fail = 0 ] && echo "doctor: ok"
exit $fail
