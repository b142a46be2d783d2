/* tools/bench_jobfile.c: fio job files read into pinio bench command lines.
 * The fixtures in tests/tools/jobs/ look like job files people keep; the
 * short inline ones pin one rule each (fio's size suffixes, defaults,
 * groups, errors with their line). */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_jobfile.h"
#include "tests/common/helpers.h"

static bench_jobfile jf;
static char err[512];
static char tmp[128];

static void teardown(void)
{
    bench_jobfile_free(&jf);
    if (tmp[0])
        unlink(tmp);
    tmp[0] = 0;
}

TestSuite(jobfile, .fini = teardown);

/* A job's argv as one line, for exact comparison. */
static const char *line(size_t job)
{
    static char buf[2048];
    size_t len = 0;
    cr_assert_lt(job, jf.njobs);
    const bench_job *j = &jf.jobs[job];
    cr_assert_null(j->argv[j->argc], "argv is NULL-terminated");
    for (int i = 0; i < j->argc; i++)
        len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%s", i ? " " : "", j->argv[i]);
    return buf;
}

static bool has_note(const char *needle)
{
    for (size_t i = 0; i < jf.nnotes; i++)
        if (strstr(jf.notes[i], needle))
            return true;
    return false;
}

static int parse_fixture(const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", JOBS_DIR, name);
    return bench_jobfile_parse(path, &jf, err, sizeof err);
}

/* Writes `text` to a fresh /dev/shm/pinio-RUN-jobfile-* file (removed by teardown) and parses it. */
static int parse_text(const char *text)
{
    cr_assert_eq(t_tmpname("/dev/shm", "jobfile", tmp, sizeof tmp), 0);
    int fd = mkstemp(tmp);
    cr_assert_geq(fd, 0);
    size_t n = strlen(text);
    cr_assert_eq(write(fd, text, n), (ssize_t)n);
    close(fd);
    return bench_jobfile_parse(tmp, &jf, err, sizeof err);
}

/* err, with the temporary file's name cut off: ":LINE: ..." */
static const char *where(void)
{
    size_t n = strlen(tmp);
    cr_assert(!strncmp(err, tmp, n), "error names the file: %s", err);
    return err + n;
}

Test(jobfile, sequential_read)
{
    cr_assert_eq(parse_fixture("seq-read.fio"), 0, "%s", err);
    cr_assert_eq(jf.njobs, 1);
    cr_assert_eq(jf.ngroups, 1);
    cr_assert_str_eq(jf.jobs[0].name, "seq-read");
    cr_assert_str_eq(line(0), "bench --file /var/tmp/pinio-jobfile-seq --rw read --bs 1048576 "
                              "--qd 16 --size 1073741824 --direct on --cache cold");
    cr_assert_eq(jf.nnotes, 0, "io_uring needs no note");
}

Test(jobfile, randrw_70_30_4k_qd32)
{
    cr_assert_eq(parse_fixture("randrw-70-30.fio"), 0, "%s", err);
    cr_assert_eq(jf.njobs, 1);
    cr_assert_str_eq(line(0), "bench --file /var/tmp/pinio-jobfile-rrw --rw randrw --rwmixread 70 "
                              "--bs 4096 --qd 32 --jobs 4 --jobs-share whole --size 4294967296 "
                              "--direct on --cache cold --time 30 --ramp-time 2 "
                              "--group-reporting --percentile-list 50:99:99.9");
    cr_assert(has_note("randrw-70-30.fio:3: ioengine=libaio: runs with io_uring"));
    cr_assert(has_note("randrw-70-30.fio:19: randrepeat: no effect"));
    cr_assert_eq(jf.nnotes, 2);
}

Test(jobfile, stonewall_starts_a_group)
{
    cr_assert_eq(parse_fixture("stonewall.fio"), 0, "%s", err);
    cr_assert_eq(jf.njobs, 3);
    cr_assert_eq(jf.ngroups, 2);
    cr_assert_eq(jf.jobs[0].group, 0);
    cr_assert_eq(jf.jobs[1].group, 1, "stonewall: after the write");
    cr_assert_eq(jf.jobs[2].group, 1, "no stonewall: beside the job before it");
    cr_assert_str_eq(jf.jobs[1].name, "read");
    cr_assert_str_eq(line(0), "bench --file /var/tmp/pinio-jobfile-sw --rw write --bs 131072 "
                              "--qd 8 --size 268435456 --direct on --cache cold");
    cr_assert_str_eq(line(1), "bench --file /var/tmp/pinio-jobfile-sw --rw read --bs 131072 "
                              "--qd 8 --size 268435456 --direct on --cache cold --verify=crc32c");
}

Test(jobfile, global_then_job_override)
{
    cr_assert_eq(parse_fixture("override.fio"), 0, "%s", err);
    cr_assert_eq(jf.njobs, 3);
    cr_assert_str_eq(line(0), "bench --file /dev/shm/pinio-jobfile-a,/dev/shm/pinio-jobfile-b "
                              "--rw randread --bs 65536 --qd 4 --size 33554432 --direct on "
                              "--cache cold --rate 10485760");
    cr_assert_str_eq(line(1), "bench --file /dev/shm/pinio-jobfile-a,/dev/shm/pinio-jobfile-b "
                              "--rw randwrite --bs 8192 --qd 64 --size 33554432 --direct off "
                              "--cache cold --rate 10485760 --rate-iops 500 "
                              "--random-distribution zipf:1.2 --norandommap");
    /* a second [global] adds to the first for the jobs after it */
    cr_assert_str_eq(line(2), "bench --file /dev/shm/pinio-jobfile-a,/dev/shm/pinio-jobfile-b "
                              "--rw randread --bs 65536 --qd 2 --size 33554432 --direct on "
                              "--cache cold --rate 10485760");
    cr_assert_eq(jf.jobs[1].group, 0);
    cr_assert_eq(jf.jobs[2].group, 1, "wait_for_previous is stonewall");
}

Test(jobfile, unsupported_option_names_file_line_option)
{
    cr_assert_eq(parse_fixture("unsupported.fio"), -ENOTSUP);
    cr_assert_str_eq(err, JOBS_DIR "/unsupported.fio:9: option 'cpus_allowed' is not "
                          "supported by pinio bench");
    cr_assert_eq(jf.njobs, 0, "nothing is handed back on failure");
    cr_assert_null(jf.jobs);
}

Test(jobfile, bad_syntax_names_the_line)
{
    cr_assert_eq(parse_fixture("bad-syntax.fio"), -EINVAL);
    cr_assert_str_eq(err, JOBS_DIR "/bad-syntax.fio:4: expected a section header '[name]'");
}

Test(jobfile, missing_file)
{
    cr_assert_eq(bench_jobfile_parse("/dev/shm/pinio-jobfile-none.fio", &jf, err, sizeof err),
                 -ENOENT);
    cr_assert_str_eq(err, "/dev/shm/pinio-jobfile-none.fio: No such file or directory");
}

/* fio's compatibility mode (kb_base=1024, the default): k = 1024 but KiB = 1000. */
Test(jobfile, sizes_as_fio_reads_them)
{
    cr_assert_eq(parse_text("[a]\nfilename=f\nbs=4KiB\nsize=1G\noffset=0x1000\nio_size=2mb\n"), 0,
                 "%s", err);
    cr_assert_str_eq(line(0), "bench --file f --rw read --bs 4000 --qd 1 --size 1073741824 "
                              "--offset 4096 --io-size 2097152 --direct off --cache cold");
    teardown();
    cr_assert_eq(parse_text("[global]\nkb_base=1000\n[a]\nfilename=f\nbs=4k\nsize=1Gi\n"), 0,
                 "%s", err);
    cr_assert_str_eq(line(0), "bench --file f --rw read --bs 4000 --qd 1 --size 1073741824 "
                              "--direct off --cache cold");
    teardown();
    cr_assert_eq(parse_text("[a]\nfilename=f\nsize=50%\n"), -EINVAL);
    cr_assert_str_eq(where(), ":3: size=50%: not a size (fio suffixes k, m, g, t, p; "
                              "percentages are not supported)");
}

Test(jobfile, fio_defaults_are_written_out)
{
    /* no filename: fio's jobname.0.N; fio's defaults bs 4k, qd 1, buffered, invalidate */
    cr_assert_eq(parse_text("[j]\ninvalidate=0\n"), 0, "%s", err);
    cr_assert_str_eq(line(0), "bench --file j.0.0 --rw read --bs 4096 --qd 1 --direct off");
    cr_assert(has_note(":1: job 'j' has no filename: uses j.0.0 as fio would"));
    teardown();
    cr_assert_eq(parse_text("[j]\ndirectory=/dev/shm\nnrfiles=3\nbuffered=0\n"), 0, "%s", err);
    cr_assert_str_eq(line(0), "bench --file /dev/shm/j.0.0,/dev/shm/j.0.1,/dev/shm/j.0.2 "
                              "--rw read --bs 4096 --qd 1 --direct on --cache cold");
}

/* Several files: filename=a:b with fio's "\\:" escape, file_service_type
 * and filesize mapped; a service fio has and bench lacks names its line. */
Test(jobfile, several_files_and_their_service)
{
    cr_assert_eq(parse_text("[j]\nfilename=/x/a:/x/b\\:c\nfile_service_type=random:8\n"
                            "filesize=1m\nbuffered=1\n"), 0, "%s", err);
    cr_assert_str_eq(line(0), "bench --file /x/a,/x/b:c --file-service-type random:8 "
                              "--filesize 1048576 --rw read --bs 4096 --qd 1 --direct off "
                              "--cache cold");
    teardown();
    cr_assert_eq(parse_text("[j]\nfilename=a:b\nfile_service_type=sequential\n"), 0, "%s", err);
    cr_assert(strstr(line(0), " --file-service-type sequential "), "%s", line(0));
    teardown();
    cr_assert_eq(parse_text("[j]\nfilename=a:b\nfile_service_type=zipf:1.2\n"), -ENOTSUP);
    cr_assert(!strncmp(where(), ":3: file_service_type=zipf:1.2 is not supported", 47), "%s",
              where());
    teardown();
    cr_assert_eq(parse_text("[j]\nfilename=a:b\nfile_service_type=sequential:4\n"), -ENOTSUP);
    cr_assert(strstr(where(), ":3: file_service_type=sequential:4"), "%s", where());
    teardown();
    cr_assert_eq(parse_text("[j]\nfilename=a:b\nfile_service_type=roundrobin:0\n"), -EINVAL);
    cr_assert(strstr(where(), ":3: file_service_type=roundrobin:0: wants a count"), "%s",
              where());
}

/* An object: filename=s3://B/K is one name (its ':' no list's, a later
 * ':' still one), ioengine=s3 or http the object engine; an object has no
 * pages to drop, so fio's invalidate default adds no --cache cold. */
Test(jobfile, an_object_target)
{
    cr_assert_eq(parse_text("[j]\nfilename=s3://bkt/dir/m.safetensors\nbs=4m\n"), 0, "%s", err);
    cr_assert_str_eq(line(0), "bench --file s3://bkt/dir/m.safetensors --rw read --bs 4194304 "
                              "--qd 1 --direct off");
    teardown();
    cr_assert_eq(parse_text("[j]\nioengine=http\nfilename=s3://b/k:/x/f\niodepth=8\n"), 0,
                 "%s", err);
    cr_assert_str_eq(line(0), "bench --engine s3 --file s3://b/k,/x/f --rw read --bs 4096 "
                              "--qd 8 --direct off");
    teardown();
    cr_assert_eq(parse_text("[j]\nioengine=s3\nfilename=f\n"), 0, "%s", err);
    cr_assert_str_eq(line(0), "bench --engine s3 --file f --rw read --bs 4096 --qd 1 "
                              "--direct off");
}

Test(jobfile, bssplit_blanks_filled_as_fio_does)
{
    cr_assert_eq(parse_text("[j]\nfilename=f\nbssplit=4k/50:1k/:32k/\nbs=1m\n"), 0, "%s", err);
    cr_assert_str_eq(line(0), "bench --file f --rw read --bssplit 4096/50:1024/25:32768/25 "
                              "--qd 1 --direct off --cache cold");
    teardown();
    cr_assert_eq(parse_text("[j]\nfilename=f\nbssplit=4k/:8k/:16k/,4k/:8k/:16k/\n"), 0, "%s",
                 err);
    cr_assert_str_eq(line(0), "bench --file f --rw read --bssplit 4096/33:8192/33:16384/34 "
                              "--qd 1 --direct off --cache cold");
    teardown();
    cr_assert_eq(parse_text("[j]\nfilename=f\nbssplit=4k/60:8k/60\n"), -EINVAL);
    cr_assert_str_eq(where(), ":3: bssplit=4k/60:8k/60: the percentages must add up to 100");
    teardown();
    cr_assert_eq(parse_text("[j]\nfilename=f\nbsrange=1k-16k\nblockalign=4k\n"), 0, "%s", err);
    cr_assert_str_eq(line(0), "bench --file f --rw read --bsrange 1024-16384 --blockalign 4096 "
                              "--qd 1 --direct off --cache cold");
}

Test(jobfile, per_direction_values_must_agree)
{
    cr_assert_eq(parse_text("[j]\nfilename=f\nbs=4k,4k\n"), 0, "%s", err);
    teardown();
    cr_assert_eq(parse_text("[j]\nfilename=f\n\nbs=4k,64k\n"), -ENOTSUP);
    cr_assert_str_eq(where(), ":4: bs=4k,64k: separate read,write values are not supported "
                              "by pinio bench");
}

Test(jobfile, times)
{
    cr_assert_eq(parse_text("[j]\nfilename=f\nruntime=1m\ntime_based=1\nstartdelay=500ms\n"
                            "thinktime=2ms\n"), 0, "%s", err);
    cr_assert_str_eq(line(0), "bench --file f --rw read --bs 4096 --qd 1 --direct off "
                              "--cache cold --time 60 --startdelay 0.5 --thinktime 2000");
    cr_assert_eq(jf.nnotes, 0);
    teardown();
    /* runtime alone: pinio's --time loops; said so */
    cr_assert_eq(parse_text("[j]\nfilename=f\nruntime=10\n"), 0, "%s", err);
    cr_assert(has_note(":3: runtime without time_based"));
    teardown();
    cr_assert_eq(parse_text("[global]\ntime_based\n[j]\nfilename=f\n"), -EINVAL);
    cr_assert_str_eq(where(), ":2: time_based needs runtime");
}

Test(jobfile, engines)
{
    cr_assert_eq(parse_text("[j]\nfilename=f\nioengine=psync\niodepth=32\n"), 0, "%s", err);
    cr_assert_str_eq(line(0), "bench --file f --rw read --bs 4096 --qd 1 --direct off "
                              "--cache cold");
    cr_assert(has_note(":3: ioengine=psync: runs with io_uring"));
    cr_assert(has_note(":4: iodepth=32: synchronous engines run one I/O at a time"));
    teardown();
    cr_assert_eq(parse_text("[j]\nfilename=f\nioengine=null\n"), -ENOTSUP);
    cr_assert_str_eq(where(), ":3: ioengine=null is not supported by pinio bench "
                              "(it runs io_uring)");
    teardown();
    cr_assert_eq(parse_text("[j]\nfilename=f\nfixedbufs\nregisterfiles=1\nhipri=0\n"), 0, "%s",
                 err);
    cr_assert_str_eq(line(0), "bench --file f --rw read --bs 4096 --qd 1 --direct off "
                              "--cache cold --fixed=1 --regfiles");
}

Test(jobfile, mixes_verify_and_logs)
{
    cr_assert_eq(parse_text("[j]\nfilename=f\nrw=rw\nrwmixwrite=30\nverify=crc32c-intel\n"
                            "verify_only\nrandseed=7\nwrite_bw_log=mylog\nlog_avg_msec=250\n"),
                 0, "%s", err);
    cr_assert_str_eq(line(0), "bench --file f --rw rw --rwmixread 70 --bs 4096 --qd 1 "
                              "--direct off --cache cold --verify=crc32c --verify-only --seed 7 "
                              "--log-interval 250 --log-file mylog.1.csv");
    teardown();
    cr_assert_eq(parse_text("[j]\nfilename=f\nrw=write\nverify=md5\n"), -ENOTSUP);
    cr_assert_str_eq(where(), ":4: verify=md5 is not supported by pinio bench "
                              "(pattern, crc32c, sha256)");
    teardown();
    /* a bare write_lat_log: the job's name; no log_avg_msec: 1 s, said so */
    cr_assert_eq(parse_text("[a]\nfilename=f\n[b]\nfilename=f\nwrite_lat_log\n"), 0, "%s", err);
    cr_assert_str_eq(line(1), "bench --file f --rw read --bs 4096 --qd 1 --direct off "
                              "--cache cold --log-interval 1000 --log-file b.2.csv");
    cr_assert(has_note(":5: write_lat_log: fio logs every I/O without log_avg_msec"));
}

Test(jobfile, global_stonewall_serialises_every_job)
{
    cr_assert_eq(parse_text("[global]\nfilename=f\nstonewall\n[a]\n[b]\n[c]\n"), 0, "%s", err);
    cr_assert_eq(jf.njobs, 3);
    cr_assert_eq(jf.ngroups, 3);
    cr_assert_eq(jf.jobs[2].group, 2);
}

Test(jobfile, filenames_and_distributions)
{
    cr_assert_eq(parse_text("[j]\nfilename=/dev/shm/a\\:b:/dev/shm/c\nrw=randread\n"
                            "random_distribution=gauss:5\nname=renamed\n"), 0, "%s", err);
    cr_assert_str_eq(jf.jobs[0].name, "renamed");
    cr_assert_str_eq(line(0), "bench --file /dev/shm/a:b,/dev/shm/c --rw randread --bs 4096 "
                              "--qd 1 --direct off --cache cold --random-distribution normal:5");
    teardown();
    cr_assert_eq(parse_text("[j]\nfilename=f\nrandom_distribution=zipf:1.2:0.25\n"), -ENOTSUP);
    cr_assert_str_eq(where(), ":3: random_distribution=zipf:1.2:0.25: a centre (second value) "
                              "is not supported by pinio bench");
}

Test(jobfile, syntax_errors)
{
    cr_assert_eq(parse_text("bs=4k\n[j]\n"), -EINVAL);
    cr_assert_str_eq(where(), ":1: option 'bs' before the first [section]");
    teardown();
    cr_assert_eq(parse_text("; only globals\n[global]\nbs=4k\n"), -EINVAL);
    cr_assert_str_eq(where(), ": no job section (only [global] or nothing)");
    teardown();
    cr_assert_eq(parse_text("[j]\n  = 4\n"), -EINVAL);
    cr_assert_str_eq(where(), ":2: expected 'key=value', a flag or '[section]'");
    teardown();
    cr_assert_eq(parse_text("[j]\nbs=\n"), -EINVAL);
    cr_assert_str_eq(where(), ":2: option 'bs' needs a value");
    teardown();
    cr_assert_eq(parse_text("[j]\nsize=${SIZE}\n"), -ENOTSUP);
    cr_assert_str_eq(where(), ":2: size=${SIZE}: $VARIABLES are not supported by pinio bench");
    teardown();
    cr_assert_eq(parse_text("[j]\ndirect=yes\n"), -EINVAL);
    cr_assert_str_eq(where(), ":2: direct=yes: wants 0 or 1");
}
