/* pinio bench over several files (pinio_bench_opts::paths): the service
 * order of each file_service_type seen through trace_file, the size split
 * between files, verify naming the file a misplaced block came from, and
 * the per-file refusals that must stop a run before any file is written.
 * Small files in /dev/shm, buffered (tmpfs has no O_DIRECT); one run on
 * /var/tmp with O_DIRECT and a registered file table. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pinio/bench.h"
#include "tests/common/helpers.h"

#define BS 4096u
#define NB 64u /* blocks of each file */
#define NF 3u  /* files */
#define MAXREQ (4 * NF * NB)

struct trace {
    unsigned n;
    unsigned file[MAXREQ];
    uint64_t off[MAXREQ];
};

static void on_issue(void *ctx, unsigned job, unsigned file, bool write, uint64_t off,
                     uint64_t len)
{
    struct trace *t = ctx;
    (void)job, (void)write, (void)len;
    if (t->n < MAXREQ) {
        t->file[t->n] = file;
        t->off[t->n] = off;
    }
    t->n++;
}

static char dir[64], names[NF][96];
static const char *paths[NF];

static void setup(void)
{
    char run[17];
    cr_assert_eq(t_run(run, sizeof run), 0);
    snprintf(dir, sizeof dir, "/dev/shm/pinio-%s-bench-files-%d", run, (int)getpid());
    mkdir(dir, 0755);
    for (unsigned i = 0; i < NF; i++) {
        snprintf(names[i], sizeof names[i], "%s/f%u", dir, i);
        unlink(names[i]);
        paths[i] = names[i];
    }
}

static void teardown(void)
{
    for (unsigned i = 0; i < NF; i++)
        unlink(names[i]);
    rmdir(dir);
}

static void base_opts(pinio_bench_opts *o, struct trace *t, unsigned nfiles)
{
    pinio_bench_opts_default(o);
    o->paths = paths;
    o->npaths = nfiles;
    o->direct = false;
    o->fixed = false;
    o->bs = BS;
    o->qd = 4;
    o->size = (uint64_t)nfiles * NB * BS;
    o->trace_file = on_issue;
    o->trace_ctx = t;
}

static void run_ok(const pinio_bench_opts *o, pinio_bench_result *r)
{
    pinio_diag d = {0};
    int rc = pinio_bench_run(o, r, &d);
    cr_assert_eq(rc, 0, "%d %s", rc, d.msg);
}

/* Every file got each of its NB blocks exactly once. */
static void each_block_once(const struct trace *t, unsigned nfiles)
{
    static unsigned seen[NF][NB];
    memset(seen, 0, sizeof seen);
    cr_assert_eq(t->n, nfiles * NB);
    for (unsigned i = 0; i < t->n; i++) {
        cr_assert_lt(t->file[i], nfiles);
        cr_assert_lt(t->off[i] / BS, NB);
        seen[t->file[i]][t->off[i] / BS]++;
    }
    for (unsigned f = 0; f < nfiles; f++)
        for (unsigned b = 0; b < NB; b++)
            cr_assert_eq(seen[f][b], 1, "file %u block %u: %u times", f, b, seen[f][b]);
}

TestSuite(files, .init = setup, .fini = teardown);

Test(files, roundrobin_alternates)
{
    static struct trace t;
    pinio_bench_opts o;
    pinio_bench_result r;
    base_opts(&o, &t, NF);
    o.rw = PINIO_BENCH_RANDREAD; /* default service: roundrobin */
    pinio_bench_file out[NF];
    o.files_out = out;
    run_ok(&o, &r);
    each_block_once(&t, NF);
    for (unsigned i = 0; i < t.n; i++)
        cr_assert_eq(t.file[i], i % NF, "request %u went to file %u", i, t.file[i]);
    cr_assert_eq(r.bytes, (uint64_t)NF * NB * BS);
    /* --size is the total: each new file got its third */
    for (unsigned f = 0; f < NF; f++) {
        struct stat st;
        cr_assert_eq(stat(paths[f], &st), 0);
        cr_assert_eq((uint64_t)st.st_size, (uint64_t)NB * BS, "file %u", f);
        cr_assert(out[f].created);
        cr_assert_eq(out[f].used, (uint64_t)NB * BS);
        cr_assert_eq(out[f].size, (uint64_t)NB * BS);
    }
}

Test(files, roundrobin_n_switches_every_n)
{
    static struct trace t;
    pinio_bench_opts o;
    pinio_bench_result r;
    base_opts(&o, &t, 2);
    o.file_service_nr = 4;
    run_ok(&o, &r);
    each_block_once(&t, 2);
    for (unsigned i = 0; i < t.n; i++)
        cr_assert_eq(t.file[i], (i / 4) % 2, "request %u", i);
    /* sequential within each file: its own position */
    for (unsigned i = 0; i < 8; i++)
        cr_assert_eq(t.off[i], (uint64_t)(i % 4) * BS);
}

Test(files, sequential_finishes_one_file_first)
{
    static struct trace t;
    pinio_bench_opts o;
    pinio_bench_result r;
    base_opts(&o, &t, NF);
    o.rw = PINIO_BENCH_RANDREAD;
    o.file_service = PINIO_BENCH_FILE_SEQUENTIAL;
    run_ok(&o, &r);
    each_block_once(&t, NF);
    for (unsigned i = 0; i < t.n; i++)
        cr_assert_eq(t.file[i], i / NB, "request %u went to file %u", i, t.file[i]);
}

Test(files, random_visits_every_file_mixed)
{
    static struct trace t;
    pinio_bench_opts o;
    pinio_bench_result r;
    base_opts(&o, &t, NF);
    o.file_service = PINIO_BENCH_FILE_RANDOM;
    run_ok(&o, &r);
    each_block_once(&t, NF); /* each file its share, no more */
    /* neither roundrobin nor sequential: the first third touches every file
     * and some request repeats its predecessor's file */
    unsigned hit[NF] = {0}, repeats = 0;
    for (unsigned i = 0; i < NB; i++)
        hit[t.file[i]]++;
    for (unsigned i = 1; i < t.n; i++)
        repeats += t.file[i] == t.file[i - 1];
    for (unsigned f = 0; f < NF; f++)
        cr_assert_gt(hit[f], NB / 8, "file %u: %u of the first %u", f, hit[f], NB);
    cr_assert_gt(repeats, 0u);
}

/* --loops 3: three passes, each over every file in the service order. */
Test(files, loops_keep_the_service_order)
{
    static struct trace t;
    pinio_bench_opts o;
    pinio_bench_result r;
    base_opts(&o, &t, 2);
    o.loops = 3;
    run_ok(&o, &r);
    cr_assert_eq(t.n, 3 * 2 * NB);
    cr_assert_eq(r.bytes, 3ull * 2 * NB * BS);
    for (unsigned i = 0; i < t.n; i++) {
        cr_assert_eq(t.file[i], i % 2);
        cr_assert_eq(t.off[i], (uint64_t)((i / 2) % NB) * BS, "request %u", i);
    }
}

/* Existing files of different sizes and no --size: each file gives the
 * smallest one's size (documented in bench.h), so the shares are equal. */
Test(files, different_sizes_use_the_smallest)
{
    static struct trace t;
    pinio_bench_opts o;
    pinio_bench_result r;
    static uint8_t buf[2 * NB * BS];
    memset(buf, 0x5a, sizeof buf);
    for (unsigned f = 0; f < 2; f++) {
        int fd = open(paths[f], O_WRONLY | O_CREAT | O_TRUNC, 0644);
        cr_assert_geq(fd, 0);
        size_t len = f ? sizeof buf : sizeof buf / 2;
        cr_assert_eq(write(fd, buf, len), (ssize_t)len);
        close(fd);
    }
    base_opts(&o, &t, 2);
    o.size = 0;
    pinio_bench_file out[2];
    o.files_out = out;
    run_ok(&o, &r);
    each_block_once(&t, 2);
    cr_assert_eq(out[0].used, (uint64_t)NB * BS);
    cr_assert_eq(out[1].used, (uint64_t)NB * BS);
    cr_assert_eq(out[1].size, 2ull * NB * BS);
    cr_assert(!out[0].created && !out[1].created);
    /* with --filesize, the size of each file is asked for */
    base_opts(&o, &t, 2);
    t.n = 0;
    o.size = 0;
    o.filesize = 2ull * NB * BS;
    pinio_diag d = {0};
    cr_assert_eq(pinio_bench_run(&o, &r, &d), -EINVAL);
    cr_assert(strstr(d.msg, paths[0]), "%s", d.msg);
}

Test(files, filesize_and_size_as_io_size)
{
    static struct trace t;
    pinio_bench_opts o;
    pinio_bench_result r;
    base_opts(&o, &t, 2);
    o.filesize = (uint64_t)NB * BS;
    o.size = (uint64_t)NB * BS; /* with filesize: bytes to move, half a pass */
    run_ok(&o, &r);
    cr_assert_eq(t.n, NB);
    struct stat st;
    cr_assert_eq(stat(paths[1], &st), 0);
    cr_assert_eq((uint64_t)st.st_size, (uint64_t)NB * BS);
}

static void write_verified(unsigned nfiles, pinio_bench_rw rw, pinio_bench_verify_mode m)
{
    static struct trace t;
    pinio_bench_opts o;
    pinio_bench_result r;
    base_opts(&o, &t, nfiles);
    o.rw = rw;
    o.verify = true;
    o.verify_mode = m;
    o.jobs = 2;
    run_ok(&o, &r);
    cr_assert_eq(r.verified_bytes, (uint64_t)nfiles * NB * BS);
}

static int verify_only(unsigned nfiles, pinio_bench_verify_mode m, pinio_diag *d)
{
    static struct trace t;
    pinio_bench_opts o;
    pinio_bench_result r;
    base_opts(&o, &t, nfiles);
    o.verify_only = true;
    o.verify_mode = m;
    o.jobs = 2;
    return pinio_bench_run(&o, &r, d);
}

/* Block 5 of file 0 copied over block 5 of file 1: the same offset, so only
 * the file tells them apart; the message names both files and the offset. */
Test(files, verify_names_a_block_from_another_file)
{
    for (int m = 0; m < 3; m++) {
        write_verified(2, m == 1 ? PINIO_BENCH_WRITE : PINIO_BENCH_RANDWRITE,
                       (pinio_bench_verify_mode)m);
        pinio_diag d = {0};
        cr_assert_eq(verify_only(2, (pinio_bench_verify_mode)m, &d), 0, "%s", d.msg);
        static uint8_t blk[BS];
        int a = open(paths[0], O_RDONLY), b = open(paths[1], O_WRONLY);
        cr_assert(a >= 0 && b >= 0);
        cr_assert_eq(pread(a, blk, BS, 5 * BS), (ssize_t)BS);
        cr_assert_eq(pwrite(b, blk, BS, 5 * BS), (ssize_t)BS);
        close(a);
        close(b);
        cr_assert_eq(verify_only(2, (pinio_bench_verify_mode)m, &d), -EBADMSG);
        char want[256];
        snprintf(want, sizeof want, "bench: %s: verify: the block at offset %u holds the block "
                 "written for %s at offset %u", paths[1], 5 * BS, paths[0], 5 * BS);
        cr_assert(strstr(d.msg, want), "mode %d: %s", m, d.msg);
        unlink(paths[0]);
        unlink(paths[1]);
    }
}

/* A corrupted byte in the second file: named by that file and its offset. */
Test(files, verify_names_the_corrupt_file)
{
    write_verified(NF, PINIO_BENCH_WRITE, PINIO_BENCH_VERIFY_PATTERN);
    int fd = open(paths[2], O_RDWR);
    cr_assert_geq(fd, 0);
    uint8_t x;
    cr_assert_eq(pread(fd, &x, 1, 7 * BS + 100), 1);
    x ^= 0x40;
    cr_assert_eq(pwrite(fd, &x, 1, 7 * BS + 100), 1);
    close(fd);
    pinio_diag d = {0};
    cr_assert_eq(verify_only(NF, PINIO_BENCH_VERIFY_PATTERN, &d), -EBADMSG);
    char want[256];
    snprintf(want, sizeof want, "bench: %s: verify: the block at offset %u ", paths[2], 7 * BS);
    cr_assert(strstr(d.msg, want), "%s", d.msg);
}

static uint64_t file_sum(const char *p)
{
    uint64_t h = 1469598103934665603ull;
    FILE *f = fopen(p, "rb");
    cr_assert(f, "%s", p);
    for (int c; (c = fgetc(f)) != EOF;)
        h = (h ^ (uint64_t)c) * 1099511628211ull;
    fclose(f);
    return h;
}

/* A write run over [bench's own file, a missing file, a file of foreign
 * data]: refused naming the foreign file; the missing one is not made and
 * bench's own is not written. */
Test(files, foreign_data_in_one_file_stops_all)
{
    static struct trace t;
    pinio_bench_opts o;
    pinio_bench_result r;
    base_opts(&o, &t, 1);
    run_ok(&o, &r); /* file 0: made by bench (a read run fills it) */
    uint64_t before = file_sum(paths[0]);
    FILE *f = fopen(paths[2], "w");
    cr_assert(f);
    fputs("precious", f);
    fclose(f);
    base_opts(&o, &t, NF);
    o.rw = PINIO_BENCH_WRITE;
    t.n = 0;
    pinio_diag d = {0};
    cr_assert_eq(pinio_bench_run(&o, &r, &d), -EEXIST);
    cr_assert(strstr(d.msg, paths[2]) && strstr(d.msg, "did not write"), "%s", d.msg);
    cr_assert_eq(t.n, 0u);
    cr_assert_eq(access(paths[1], F_OK), -1, "the missing file was made");
    cr_assert_eq(file_sum(paths[0]), before, "bench's own file was written");
    /* a directory among the files: refused by name, nothing made */
    unlink(paths[2]);
    cr_assert_eq(mkdir(paths[2], 0755), 0);
    cr_assert_eq(pinio_bench_run(&o, &r, &d), -EPERM);
    cr_assert(strstr(d.msg, paths[2]) && strstr(d.msg, "neither a regular file"), "%s", d.msg);
    cr_assert_eq(access(paths[1], F_OK), -1);
    rmdir(paths[2]);
    /* a file that cannot be made (no such directory) in a read run: the
     * files made before it are removed again */
    unlink(paths[0]);
    static char bad[128];
    snprintf(bad, sizeof bad, "%s/no-such-dir/f", dir);
    const char *with_bad[2] = {paths[0], bad};
    base_opts(&o, &t, 2);
    o.paths = with_bad;
    cr_assert_eq(pinio_bench_run(&o, &r, &d), -ENOENT);
    cr_assert(strstr(d.msg, "no-such-dir"), "%s", d.msg);
    cr_assert_eq(access(paths[0], F_OK), -1, "a file made for the failed run is left");
}

Test(files, check_rejects_what_does_not_split)
{
    static struct trace t;
    pinio_bench_opts o;
    pinio_diag d = {0};
    base_opts(&o, &t, NF);
    o.size = (uint64_t)NB * BS; /* not a multiple of bs x files */
    cr_assert_eq(pinio_bench_check(&o, &d), -EINVAL);
    cr_assert(strstr(d.msg, "x files"), "%s", d.msg);
    base_opts(&o, &t, NF);
    o.path = "/dev/shm/pinio-other";
    cr_assert_eq(pinio_bench_check(&o, &d), -EINVAL);
    o.path = paths[0]; /* the same first file: fine */
    cr_assert_eq(pinio_bench_check(&o, &d), 0, "%s", d.msg);
    o.file_service = PINIO_BENCH_FILE_SEQUENTIAL;
    o.file_service_nr = 2;
    cr_assert_eq(pinio_bench_check(&o, &d), -EINVAL);
    const char *holes[2] = {paths[0], ""};
    base_opts(&o, &t, 2);
    o.paths = holes;
    cr_assert_eq(pinio_bench_check(&o, &d), -EINVAL);
    cr_assert(strstr(d.msg, "file 2 of 2"), "%s", d.msg);

    pinio_bench_file_service s;
    unsigned nr;
    cr_assert_eq(pinio_bench_file_service_parse("roundrobin", &s, &nr), 0);
    cr_assert(s == PINIO_BENCH_FILE_ROUNDROBIN && nr == 0);
    cr_assert_eq(pinio_bench_file_service_parse("random:8", &s, &nr), 0);
    cr_assert(s == PINIO_BENCH_FILE_RANDOM && nr == 8);
    cr_assert_eq(pinio_bench_file_service_parse("sequential", &s, &nr), 0);
    cr_assert_eq(s, PINIO_BENCH_FILE_SEQUENTIAL);
    cr_assert_eq(pinio_bench_file_service_parse("sequential:2", &s, &nr), -EINVAL);
    cr_assert_eq(pinio_bench_file_service_parse("roundrobin:", &s, &nr), -EINVAL);
    cr_assert_eq(pinio_bench_file_service_parse("roundrobin:0", &s, &nr), -EINVAL);
    cr_assert_eq(pinio_bench_file_service_parse("zipf", &s, &nr), -EINVAL);
    cr_assert_eq(pinio_bench_file_service_parse("randomly", &s, &nr), -EINVAL);
    cr_assert_str_eq(pinio_bench_file_service_name(PINIO_BENCH_FILE_RANDOM), "random");
}

/* O_DIRECT on a disk file system, registered buffers and a registered file
 * table holding every file: the fixed-file index is the request's file. */
Test(files, direct_regfiles_write_verify)
{
    char d0[64], n0[96], n1[96], run[17];
    cr_assert_eq(t_run(run, sizeof run), 0);
    snprintf(d0, sizeof d0, "/var/tmp/pinio-%s-bench-files-%d", run, (int)getpid());
    mkdir(d0, 0755);
    snprintf(n0, sizeof n0, "%s/a", d0);
    snprintf(n1, sizeof n1, "%s/b", d0);
    const char *two[2] = {n0, n1};
    static struct trace t;
    pinio_bench_opts o;
    pinio_bench_result r;
    base_opts(&o, &t, 2);
    o.paths = two;
    o.direct = true;
    o.fixed = true;
    o.regfiles = true;
    o.rw = PINIO_BENCH_RANDWRITE;
    o.verify = true;
    pinio_diag d = {0};
    int rc = pinio_bench_run(&o, &r, &d);
    unlink(n0);
    unlink(n1);
    rmdir(d0);
    if (rc == -EINVAL && strstr(d.msg, "O_DIRECT"))
        cr_skip_test("O_DIRECT refused: %s", d.msg);
    cr_assert_eq(rc, 0, "%s", d.msg);
    cr_assert(strstr(r.features, "reg_files"), "%s", r.features);
    cr_assert_eq(r.verified_bytes, 2ull * NB * BS);
    each_block_once(&t, 2);
}
