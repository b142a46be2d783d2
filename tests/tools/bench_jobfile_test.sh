#!/usr/bin/env bash
# pinio bench JOB.fio: a two-group job file runs its groups in order (the
# second group's --verify-only reads what the first group's verify write left,
# which fails if they overlap), each section's result is printed under its
# name, each group's aggregate after its sections; an unsupported fio key is
# exit 2 naming FILE:LINE; several files (filename=a:b, directory + nrfiles)
# run, --size split between them. usage: bench_jobfile_test.sh PINIO JOBS_DIR
set -u
pinio=$1 jobs=$2
dir=$(mktemp -d "/var/tmp/pinio-${PINIO_TEST_RUN:-p$$}-jobcli-XXXXXX")
trap 'rm -rf "$dir"' EXIT
fail=0

cat >"$dir/two.fio" <<EOT
; group 0 writes with headers; group 1 checks them and reads another file
[global]
size=1m
bs=64k
iodepth=4
direct=0
randseed=7

[writer]
filename=$dir/a
rw=write
verify=pattern

[checker]
stonewall
filename=$dir/a
rw=read
verify_only=1

[other]
filename=$dir/b
rw=randread
bs=4k
EOT
"$pinio" bench "$dir/two.fio" >"$dir/out" 2>"$dir/err"
rc=$?
[ $rc = 0 ] || { echo "FAIL: two.fio exit $rc"; cat "$dir/err"; fail=1; }
# the order of the headers and group lines is the order things ran and were reported
got=$(grep -E '^(\[|group )' "$dir/out" | sed 's/:.*//')
want=$(printf '[writer] group 0\ngroup 0\n[checker] group 1\n[other] group 1\ngroup 1')
[ "$got" = "$want" ] || { echo "FAIL: two.fio sections/groups:"; echo "$got"; fail=1; }
grep -q 'verify: 1.00 MiB read back, all blocks match' "$dir/out" ||
    { echo "FAIL: group 1 did not verify what group 0 wrote"; cat "$dir/out"; fail=1; }
grep -q '^group 1: 2 jobs, 2.00 MiB' "$dir/out" ||
    { echo "FAIL: group 1 aggregate"; cat "$dir/out"; fail=1; }
# notes from the reader (verify=pattern's caveat) go to stderr
grep -q "two.fio:.*verify=pattern" "$dir/err" || { echo "FAIL: no note on stderr"; cat "$dir/err"; fail=1; }

# --job-file takes any name; terse: section lines, then the group's line
cp "$dir/two.fio" "$dir/two.job"
"$pinio" bench --job-file "$dir/two.job" --output-format terse --allow-file-overwrite \
    >"$dir/out" 2>"$dir/err" || { echo "FAIL: --job-file"; cat "$dir/err"; fail=1; }
got=$(cut -d';' -f1,4 "$dir/out" | tr '\n' ' ')
want='pinio-bench;write pinio-bench-group;1 pinio-bench;read pinio-bench;randread pinio-bench-group;2 '
[ "$got" = "$want" ] || { echo "FAIL: terse lines: $got"; fail=1; }

# an unsupported key: exit 2, FILE:LINE and the key, nothing run
"$pinio" bench "$jobs/unsupported.fio" >"$dir/out" 2>"$dir/err"
rc=$?
[ $rc = 2 ] && grep -q 'unsupported.fio:9: .*cpus_allowed' "$dir/err" && [ ! -s "$dir/out" ] ||
    { echo "FAIL: unsupported.fio exit $rc"; cat "$dir/err"; fail=1; }
# a file that does not exist: exit 1
"$pinio" bench "$dir/none.fio" >/dev/null 2>&1
[ $? = 1 ] || { echo "FAIL: a missing job file is not exit 1"; fail=1; }
# --file with a job file: exit 2
"$pinio" bench "$dir/two.fio" --file "$dir/a" >/dev/null 2>&1
[ $? = 2 ] || { echo "FAIL: --file with a job file is not exit 2"; fail=1; }
# several files, as fio writes them: filename=a:b (with a '\:' in a name),
# and directory + nrfiles (fio's JOBNAME.0.N names); --size split between them
cat >"$dir/tt.fio" <<EOT
[global]
size=1m
bs=64k
direct=0
[two]
filename=$dir/c:$dir/d\\:e
file_service_type=sequential
rw=write
verify=crc32c
[three]
stonewall
directory=$dir
nrfiles=3
size=3m
rw=randread
EOT
"$pinio" bench "$dir/tt.fio" --output-format json >"$dir/out" 2>"$dir/err"
rc=$?
[ $rc = 0 ] || { echo "FAIL: tt.fio exit $rc"; cat "$dir/err"; fail=1; }
for n in c:524288 'd\:e:524288' three.0.0:1048576 three.0.1:1048576 three.0.2:1048576; do
    name=${n%:*} name=${name//\\/} want=${n##*:}
    [ "$(stat -c %s "$dir/$name" 2>/dev/null)" = "$want" ] ||
        { echo "FAIL: tt.fio: $dir/$name is not $want bytes"; ls -l "$dir"; fail=1; }
done
python3 - "$dir/out" "$dir" <<'EOP' || fail=1
import json, sys
d = sys.argv[2]
objs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
runs = [o for o in objs if "job_name" in o]
two, three = runs
ok = ([f["path"] for f in two["files"]] == [d + "/c", d + "/d:e"]
      and two["file_service"] == "sequential" and two["verified_bytes"] == 1048576
      and all(f["used_bytes"] == 524288 for f in two["files"])
      and [f["path"] for f in three["files"]] == [d + "/three.0.%d" % i for i in range(3)]
      and three["bytes"] == 3 * 1048576 and all(f["used_bytes"] == 1048576 for f in three["files"]))
if not ok:
    print("FAIL: tt.fio results:", two.get("files"), three.get("files"), three.get("bytes"))
sys.exit(0 if ok else 1)
EOP
# an unsupported file service: exit 2 naming the option and its line
printf '[z]\nfilename=%s/c:%s/d\nfile_service_type=zipf:1.1\n' "$dir" "$dir" >"$dir/z.fio"
"$pinio" bench "$dir/z.fio" >/dev/null 2>"$dir/err"
rc=$?
[ $rc = 2 ] && grep -q "z.fio:3: file_service_type=zipf:1.1 is not supported" "$dir/err" ||
    { echo "FAIL: file_service_type=zipf exit $rc"; cat "$dir/err"; fail=1; }
# A job file is read whole and bounded: a FIFO nobody writes is an empty
# job file and a device is refused, both at once (no hang, no endless read).
mkfifo "$dir/fifo.fio"
ln -s /dev/zero "$dir/zero.fio"
for f in fifo.fio zero.fio; do
    timeout 20 "$pinio" bench "$dir/$f" >/dev/null 2>"$dir/err"
    rc=$?
    [ $rc = 2 ] && grep -q "$f: \(no job section\|not a regular file or a pipe\)" "$dir/err" ||
        { echo "FAIL: $f exit $rc"; cat "$dir/err"; fail=1; }
done
exit $fail
