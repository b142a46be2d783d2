#!/usr/bin/env bash
# pinio doctor names the mount that holds PATH and gives the advice for
# its file system (issue 40): NFS (rsize, nconnect, actimeo), Lustre
# (stripes), CephFS (rasize), FUSE (its daemon), from a fake
# /proc/self/mountinfo (--root), a mount point with an escaped space;
# tmpfs and the local disk for real get no network advice; a real FUSE
# mount of bench/slowfs ($SLOWFS) names its daemon, skipped (said) where
# /dev/fuse cannot be used. usage: doctor_fs_test.sh PINIO
set -u
pinio=$1
DIR=$(mktemp -d "/var/tmp/pinio-${PINIO_TEST_RUN:-p$$}-doctorfs-XXXXXX")
shm=$(mktemp -d "/dev/shm/pinio-${PINIO_TEST_RUN:-p$$}-doctorfs-XXXXXX")
fs_pid=
cleanup() {
    if [ -n "$fs_pid" ]; then
        fusermount3 -u "$DIR/mnt" 2>/dev/null || kill "$fs_pid"
        wait "$fs_pid" 2>/dev/null
    fi
    rm -rf "$DIR" "$shm"
}
trap cleanup EXIT
fails=0
. "$(dirname "$0")/../common/cli.sh"

data="$DIR/a b"
mkdir -p "$data" "$DIR/root/proc/self"
esc=$(printf '%s' "$data" | sed 's/ /\\040/g')
# mountinfo LINE: the fake mountinfo with / and LINE for the data folder.
mountinfo() {
    printf '22 1 253:1 / / rw,relatime shared:1 - ext4 /dev/vda rw\n%s\n' "$1" \
        >"$DIR/root/proc/self/mountinfo"
}
# codes: the notes' codes of $DIR/out (doctor --json), one line.
codes() {
    python3 -c 'import json,sys; print(" ".join(n["code"] for n in json.load(open(sys.argv[1]))["notes"]))' "$DIR/out"
}
doctor() { "$pinio" doctor "$data" --root "$DIR/root" "$@"; }

mountinfo "40 22 0:50 / $esc rw,relatime shared:9 - nfs4 srv:/export rw,vers=4.2,rsize=65536,proto=tcp"
"$pinio" doctor "$data" --root "$DIR/root" >"$DIR/out" 2>"$DIR/err"
has "$DIR/out" "^mount  *nfs4 from srv:/export on $data (rsize 65536, proto tcp, vers 4.2)" "nfs mount line"
has "$DIR/out" "mount with nconnect=8" "nfs: nconnect advice"
check 0 "nfs --json" doctor --json
c=$(codes)
for k in nfs_rsize_small nfs_nconnect nfs_actimeo network_file_system; do
    case " $c " in *" $k "*) ;; *) echo "FAIL: nfs: no note $k in: $c"; fails=$((fails + 1)) ;; esac
done

mountinfo "40 22 0:50 / $esc rw - nfs srv:/x rw,vers=3,rsize=1048576,nconnect=8,actimeo=600"
check 0 "tuned nfs --json" doctor --json
[ "$(codes)" = network_file_system ] || { echo "FAIL: tuned nfs notes: $(codes)"; fails=$((fails + 1)); }

mountinfo "40 22 0:50 / $esc rw - lustre 10.0.0.1@tcp:/fs rw,flock"
check 0 "lustre --json" doctor --json
has "$DIR/out" "lfs setstripe -c -1" "lustre: stripe advice"

mountinfo "40 22 0:50 / $esc rw - ceph 10.0.0.1:6789:/ rw,name=u,rasize=8388608"
check 0 "ceph --json" doctor --json
has "$DIR/out" '"ceph_rasize"' "ceph: rasize advice"

mountinfo "40 22 0:50 / $esc rw,nosuid - fuse.sshfs u@h:/models rw,user_id=0"
check 0 "sshfs" doctor
has "$DIR/out" "^mount  *fuse.sshfs from u@h:/models on $data" "fuse mount line"
has "$DIR/out" "served by 'sshfs'" "fuse: the daemon named"
has "$DIR/out" "O_DIRECT may be refused" "fuse: O_DIRECT advice"

# For real: tmpfs and the local disk, no network advice.
check 0 "tmpfs --json" "$pinio" doctor "$shm" --json
case " $(codes) " in *network*|*nfs*|*fuse*) echo "FAIL: tmpfs notes: $(codes)"; fails=$((fails + 1)) ;; esac
check 0 "tmpfs" "$pinio" doctor "$shm"
has "$DIR/out" "^mount  *tmpfs from " "tmpfs mount line"
"$pinio" doctor "$DIR" >"$DIR/out" 2>"$DIR/err"
has "$DIR/out" "^mount  *$(stat -f -c %T "$DIR" | sed 's/ext2\/ext3/ext/')" "local disk mount line"
if grep -q "note network_file_system" "$DIR/out"; then echo "FAIL: local disk advised as network"; fails=$((fails + 1)); fi

# For real: a FUSE mount of slowfs.
if [ -z "${SLOWFS:-}" ] || [ ! -x "$SLOWFS" ]; then
    echo "SKIP (FUSE part): no bench/slowfs built (libfuse3-dev missing)"
elif ! [ -r /dev/fuse ] || ! [ -w /dev/fuse ]; then
    echo "SKIP (FUSE part): /dev/fuse is not usable here"
else
    mkdir "$DIR/back" "$DIR/mnt"
    SLOWFS_DELAY_US=0 "$SLOWFS" "$DIR/back" "$DIR/mnt" -f 2>/dev/null & fs_pid=$!
    for _ in $(seq 100); do
        [ "$(stat -f -c %t "$DIR/mnt")" = 65735546 ] && break
        kill -0 "$fs_pid" 2>/dev/null || break
        sleep 0.05
    done
    if [ "$(stat -f -c %t "$DIR/mnt")" != 65735546 ]; then
        echo "SKIP (FUSE part): slowfs could not mount (no FUSE permission in this container?)"
        fs_pid=
    else
        check 0 "fuse for real" "$pinio" doctor "$DIR/mnt"
        has "$DIR/out" "^file system  *fuse" "fuse: statfs kind"
        has "$DIR/out" "^mount  *fuse.slowfs " "fuse: mount line names fuse.slowfs"
        has "$DIR/out" "served by 'slowfs'" "fuse: the daemon named"
        has "$DIR/out" "note network_file_system" "fuse: network advice"
    fi
fi
[ "$fails" = 0 ] || exit 1
echo ok
