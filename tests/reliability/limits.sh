#!/usr/bin/env bash
# limits.sh RELIA_LOAD PINIO NORING: loads under low limits and in odd
# environments. Each check is a real load of a generated checkpoint through
# relia_load (see relia_load.c for its verdicts: 0 correct, 1 failed
# cleanly naming the file, 3 wrong/unclean) with a timeout, or a `pinio gen`
# that must fail cleanly. Prints PASS/SKIP (with the reason)/FAIL per check
# and exits 1 if any check failed.
set -uo pipefail
relia=$1 pinio=$2 noring=$3
seed=4242
work=$(mktemp -d "/tmp/pinio-${PINIO_TEST_RUN:-p$$}-limits-XXXXXX")
shm=$(mktemp -d "/dev/shm/pinio-${PINIO_TEST_RUN:-p$$}-limits-XXXXXX")
mnt="" loopdev=""
cleanup() {
  [ -n "$mnt" ] && umount "$mnt" 2>/dev/null
  [ -n "$loopdev" ] && losetup -d "$loopdev" 2>/dev/null
  chmod -R u+rwx "$work" 2>/dev/null
  rm -rf "$work" "$shm"
}
trap cleanup EXIT
pass=0 fail=0 skip=0
ok()   { echo "PASS $1"; pass=$((pass + 1)); }
bad()  { echo "FAIL $1"; fail=$((fail + 1)); }
skp()  { echo "SKIP $1"; skip=$((skip + 1)); }

gen() { "$pinio" gen "$1" -q --size "${2:-4M}" --tensors 12 --seed $seed --dtypes BF16,F32,U8 "${@:3}"; }
# expect NAME correct|clean|either CMD...: runs CMD (a relia_load command line,
# possibly behind wrappers) with a timeout and checks the verdict.
expect() {
  local name=$1 want=$2; shift 2
  local out rc
  out=$(timeout 60 "$@" 2>&1); rc=$?
  case "$want/$rc" in
    correct/0|clean/1|either/0|either/1) ok "$name: ${out%%$'\n'*}" ;;
    *) bad "$name: expected $want, exit $rc: $(echo "$out" | head -c 1500)" ;;
  esac
}

gen "$work/m.safetensors" || { echo "limits: pinio gen failed"; exit 1; }
gen "$shm/m.safetensors" || { echo "limits: pinio gen on tmpfs failed"; exit 1; }
ck=$work/m.safetensors

# --- no CAP_IPC_LOCK, small RLIMIT_MEMLOCK: registration and mlock refused,
# the load must still be correct (unregistered reads, unlocked arena).
for ml in 65536 8388608; do
  expect "no CAP_IPC_LOCK, memlock $ml" correct \
    setpriv --bounding-set=-ipc_lock --inh-caps=-ipc_lock -- \
    prlimit --memlock="$ml" -- "$relia" --seed $seed --cache cold "$ck"
done
expect "no CAP_IPC_LOCK, memlock 64 KiB, pread backend" correct \
  setpriv --bounding-set=-ipc_lock --inh-caps=-ipc_lock -- \
  prlimit --memlock=65536 -- "$relia" --seed $seed --backend pread "$ck"

# --- io_uring blocked by seccomp: the pread pool takes over; forcing an
# io_uring backend must fail cleanly.
for e in EPERM ENOSYS; do
  "$noring" "$e" true; r=$?
  if [ $r -eq 77 ]; then skp "seccomp $e: cannot install a seccomp filter here"; continue; fi
  expect "io_uring blocked ($e)" correct "$noring" "$e" "$relia" --seed $seed --cache cold "$ck"
  expect "io_uring blocked ($e), --backend fixed" clean \
    "$noring" "$e" "$relia" --seed $seed --backend fixed --engine-error-ok "$ck"
done

# --- tmpfs: AUTO reads buffered. O_DIRECT on tmpfs is refused before Linux
# 6.6 and accepted since, so --direct on may load or fail cleanly.
for be in auto buffered pread fixed; do
  expect "tmpfs, backend $be" correct "$relia" --seed $seed --backend $be "$shm/m.safetensors"
done
expect "tmpfs, --direct on" either "$relia" --seed $seed --direct on "$shm/m.safetensors"

# --- a 4 KiB-sector loop device: O_DIRECT alignment of 4096, not 512.
if [ "$(id -u)" -ne 0 ]; then
  skp "4 KiB-sector loop device: needs root (losetup, mount)"
else
  img=$work/loop.img
  truncate -s 64M "$img"
  if ! loopdev=$(losetup --find --show --sector-size 4096 "$img" 2>"$work/losetup.err"); then
    loopdev=""
    skp "4 KiB-sector loop device: losetup refused: $(head -c 200 "$work/losetup.err")"
  elif ! mkfs.ext4 -q -b 4096 "$loopdev" >/dev/null 2>&1; then
    skp "4 KiB-sector loop device: mkfs.ext4 failed on $loopdev"
  else
    mkdir -p "$work/mnt"
    if mount "$loopdev" "$work/mnt" 2>"$work/mount.err"; then
      mnt=$work/mnt
      gen "$mnt/m.safetensors"
      echo "     (logical sector size $(blockdev --getss "$loopdev"))"
      for be in auto fixed direct; do
        expect "4 KiB sectors, backend $be" correct \
          "$relia" --seed $seed --backend $be --cache cold --direct on "$mnt/m.safetensors"
      done
    else
      skp "4 KiB-sector loop device: mount refused: $(head -c 200 "$work/mount.err")"
    fi
  fi
fi

# --- the file changes underneath a load (after its header was validated).
cp "$ck" "$work/t.safetensors"
expect "file truncated underneath the load" clean \
  "$relia" --seed $seed --change truncate "$work/t.safetensors"
cp "$ck" "$work/a.safetensors"
expect "file appended underneath the load" clean \
  "$relia" --seed $seed --change append "$work/a.safetensors"
# ... and before it: a truncated or extended file is refused by the header rules.
head -c 100000 "$ck" >"$work/short.safetensors"
expect "truncated file" clean "$relia" --seed $seed "$work/short.safetensors"
cp "$ck" "$work/long.safetensors"; echo trailing >>"$work/long.safetensors"
expect "file with trailing bytes" clean "$relia" --seed $seed "$work/long.safetensors"

# --- not a checkpoint: an empty directory, a FIFO (must not block), /dev/null.
mkdir "$work/empty"
expect "empty directory" clean "$relia" --seed $seed "$work/empty"
mkfifo "$work/fifo.safetensors"
expect "FIFO as a checkpoint" clean "$relia" --seed $seed "$work/fifo.safetensors"
mkfifo "$work/fifo.json"
expect "FIFO as an index file" clean "$relia" --seed $seed "$work/fifo.json"
expect "character device" clean "$relia" --seed $seed /dev/null
expect "missing file" clean "$relia" --seed $seed "$work/nonexistent.safetensors"

# --- no read permission, as an unprivileged user (root reads anything).
nobody=65534
cp "$relia" "$work/relia_load"   # reachable by that user whatever the build dir's modes
chmod 755 "$work" "$work/relia_load"
cp "$ck" "$work/secret.safetensors"; chmod 000 "$work/secret.safetensors"
if setpriv --reuid=$nobody --regid=$nobody --clear-groups -- true 2>/dev/null; then
  expect "no read permission (uid $nobody)" clean \
    setpriv --reuid=$nobody --regid=$nobody --clear-groups -- \
    "$work/relia_load" --seed $seed "$work/secret.safetensors"
  chmod 644 "$work/secret.safetensors"
  expect "readable by uid $nobody (control)" correct \
    setpriv --reuid=$nobody --regid=$nobody --clear-groups -- \
    "$work/relia_load" --seed $seed "$work/secret.safetensors"
else
  skp "no read permission: cannot switch to uid $nobody here"
fi

# --- disk full on pinio gen: RLIMIT_FSIZE (EFBIG; SIGXFSZ is ignored here
# and the ignored disposition crosses exec), then a 1 MiB tmpfs (ENOSPC).
fullcheck() { # fullcheck NAME DIR
  local out rc
  out=$(timeout 60 "${@:3}" 2>&1); rc=$?
  local left
  left=$(find "$2" -name '*.tmp*' -o -name '.*safetensors*' | grep -v '^$' | head -n 3)
  if [ $rc -eq 1 ] && [[ $out == *"$2"* ]] && [ -z "$left" ]; then
    ok "$1: ${out%%$'\n'*}"
  else
    bad "$1: exit $rc, leftovers '$left': $out"
  fi
}
mkdir "$work/full"
trap '' XFSZ
fullcheck "pinio gen past RLIMIT_FSIZE" "$work/full" \
  prlimit --fsize=1048576 -- "$pinio" gen "$work/full/m.safetensors" -q --size 8M
trap - XFSZ
mkdir "$work/tiny"
if [ "$(id -u)" -eq 0 ] && mount -t tmpfs -o size=1m tmpfs "$work/tiny" 2>/dev/null; then
  mnt2=$work/tiny
  fullcheck "pinio gen on a full 1 MiB tmpfs" "$work/tiny" \
    "$pinio" gen "$work/tiny/m.safetensors" -q --size 8M
  umount "$mnt2"
else
  skp "pinio gen on a full tmpfs: cannot mount a tmpfs here (needs root / CAP_SYS_ADMIN)"
fi

echo "limits: $pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
