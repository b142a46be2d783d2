/* pinio_bench trim and randtrim on regular files: the holes are exactly
 * where the trace says requests went (SEEK_DATA/SEEK_HOLE, and the bytes:
 * zero there, untouched elsewhere), on ext4 (/var/tmp) and tmpfs (/dev/shm);
 * randtrim's random map trims each block once; the write protections; a
 * file system that cannot punch holes (the trimnotsup fault) named before
 * the run. Block devices: tests/bench/test_bench.c (loop devices). */
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

#define FILE_LEN (4u << 20)
#define BS 65536u
#define NBLK (FILE_LEN / BS)

/* What the test made, removed by .fini also when an assertion ended it. */
static char made[300];

static void remove_made(void)
{
    if (made[0])
        t_rm_rf(made);
}

/* Per block of the file: how many requests the trace saw cover it. */
typedef struct trace {
    unsigned hits[NBLK];
    unsigned requests, bad; /* bad: not block-aligned, or not a trim */
} trace;

static void on_trace(void *ctx, unsigned job, bool write, uint64_t off, uint64_t len)
{
    trace *t = ctx;
    (void)job;
    t->requests++;
    if (!write || off % BS || len % BS || off + len > FILE_LEN) {
        t->bad++;
        return;
    }
    for (uint64_t b = off / BS; b < (off + len) / BS; b++)
        t->hits[b]++;
}

static pinio_bench_opts trim_opts(const char *path, const char *dir, pinio_bench_rw rw, trace *t)
{
    pinio_bench_opts o;
    pinio_bench_opts_default(&o);
    o.path = path;
    o.rw = rw;
    o.bs = BS;
    o.qd = 4;
    o.faults = "";
    o.direct = strcmp(dir, "/dev/shm") != 0; /* tmpfs refuses O_DIRECT */
    o.trace = t ? on_trace : NULL;
    o.trace_ctx = t;
    return o;
}

/* Whether byte range [off, off + len) of fd is all hole (true) or all data
 * (false) by SEEK_DATA/SEEK_HOLE; fails the test when it is mixed. */
static bool range_is_hole(int fd, uint64_t off, uint64_t len)
{
    off_t d = lseek(fd, (off_t)off, SEEK_DATA);
    if (d < 0 || (uint64_t)d >= off + len) /* ENXIO: no data up to the end */
        return true;
    cr_assert_eq((uint64_t)d, off, "data begins at %lld inside the block at %llu", (long long)d,
                 (unsigned long long)off);
    off_t h = lseek(fd, (off_t)off, SEEK_HOLE);
    cr_assert((uint64_t)h >= off + len, "a hole at %lld inside the data block at %llu",
              (long long)h, (unsigned long long)off);
    return false;
}

/* Each block of `path` (made with pattern `seed`): a hole reading zeros
 * where the trace covered it, the pattern where it did not. */
static void check_blocks(const char *path, const trace *t, uint64_t seed)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    cr_assert_geq(fd, 0);
    struct stat st;
    cr_assert_eq(fstat(fd, &st), 0);
    cr_assert_eq((uint64_t)st.st_size, FILE_LEN, "trim changed the size: %lld",
                 (long long)st.st_size);
    unsigned char *buf = malloc(BS);
    cr_assert(buf);
    for (unsigned b = 0; b < NBLK; b++) {
        uint64_t off = (uint64_t)b * BS;
        bool hole = range_is_hole(fd, off, BS);
        cr_assert_eq(pread(fd, buf, BS, (off_t)off), (ssize_t)BS);
        if (t->hits[b]) {
            cr_assert(hole, "block %u was trimmed but holds data", b);
            for (unsigned i = 0; i < BS; i++)
                cr_assert_eq(buf[i], 0, "block %u byte %u reads %u after the trim", b, i, buf[i]);
        } else {
            cr_assert(!hole, "block %u was not trimmed but is a hole", b);
            size_t bad = 0;
            cr_assert(t_pattern_check(buf, BS, seed, off, &bad),
                      "block %u changed at byte %zu though no trim covered it", b, bad);
        }
    }
    free(buf);
    close(fd);
}

/* A sequential trim of the middle half of a file: holes exactly there. */
static void middle_half(const char *dir)
{
    char path[256];
    uint64_t seed = 11;
    cr_assert_eq(t_tmpfile(dir, "trim", NULL, FILE_LEN, seed, path, sizeof path), 0);
    snprintf(made, sizeof made, "%s", path);
    trace t = {0};
    pinio_bench_opts o = trim_opts(path, dir, PINIO_BENCH_TRIM, &t);
    o.offset = FILE_LEN / 4;
    o.size = FILE_LEN / 2;
    o.allow_file_overwrite = true; /* t_tmpfile's file holds data bench did not write */
    pinio_diag d = {0};
    pinio_bench_result r;
    int rc = pinio_bench_run(&o, &r, &d);
    if (rc == 0)
        check_blocks(path, &t, seed);
    unlink(path);
    cr_assert_eq(rc, 0, "%s: %s", dir, d.msg);
    cr_assert_eq(t.bad, 0);
    cr_assert_eq(t.requests, NBLK / 2);
    for (unsigned b = 0; b < NBLK; b++)
        cr_assert_eq(t.hits[b], b >= NBLK / 4 && b < 3 * NBLK / 4, "block %u: %u requests", b,
                     t.hits[b]);
    cr_assert_eq(r.trim.ios, NBLK / 2);
    cr_assert_eq(r.trim.bytes, FILE_LEN / 2);
    cr_assert_eq(r.bytes, FILE_LEN / 2);
    cr_assert_eq(r.ios, NBLK / 2);
    cr_assert_eq(r.read.ios + r.write.ios, 0);
    cr_assert_eq(r.trim.lat.count, NBLK / 2);
    cr_assert_eq(r.trim.clat.count, NBLK / 2);
    cr_assert_eq(r.lat.count, NBLK / 2, "the all-directions latency counts the trims");
    cr_assert(r.trim.iops > 0 && r.trim.bytes_per_s > 0);
    cr_assert(strstr(r.features, "punch_hole"), "%s", r.features);
    cr_assert(!strstr(r.features, "fixed_bufs"), "trims register no buffers: %s", r.features);
}

Test(trim, ext4_holes_exactly_where_the_trace_went, .fini = remove_made)
{
    middle_half("/var/tmp");
}

Test(trim, tmpfs_holes_exactly_where_the_trace_went, .fini = remove_made)
{
    middle_half("/dev/shm");
}

/* randtrim over the whole of a missing file: created and filled first,
 * then every block trimmed exactly once (the random map), in a shuffled
 * order; the file is left all hole at its size. */
static void randtrim_whole(const char *dir)
{
    char tdir[256], path[300];
    cr_assert_eq(t_tmpdir(dir, "randtrim", tdir, sizeof tdir), 0);
    snprintf(made, sizeof made, "%s", tdir);
    snprintf(path, sizeof path, "%s/f", tdir);
    trace t = {0};
    pinio_bench_opts o = trim_opts(path, dir, PINIO_BENCH_RANDTRIM, &t);
    o.size = FILE_LEN;
    o.seed = 5;
    /* the order the trace saw: sequential would be 0, 1, 2, ... */
    pinio_diag d = {0};
    pinio_bench_result r;
    int rc = pinio_bench_run(&o, &r, &d);
    struct stat st = {0};
    int sr = stat(path, &st);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    bool all_hole = fd >= 0 && lseek(fd, 0, SEEK_DATA) < 0 && errno == ENXIO;
    if (fd >= 0)
        close(fd);
    t_rm_rf(tdir);
    cr_assert_eq(rc, 0, "%s: %s", dir, d.msg);
    cr_assert(r.created);
    cr_assert_eq(sr, 0);
    cr_assert_eq((uint64_t)st.st_size, FILE_LEN);
    cr_assert(all_hole, "%s: data left after trimming every block", dir);
    cr_assert_eq(st.st_blocks, 0, "%s: %lld blocks allocated after trimming every block", dir,
                 (long long)st.st_blocks);
    cr_assert_eq(t.bad, 0);
    cr_assert_eq(t.requests, NBLK);
    for (unsigned b = 0; b < NBLK; b++)
        cr_assert_eq(t.hits[b], 1, "block %u trimmed %u times in one pass", b, t.hits[b]);
    cr_assert_eq(r.trim.ios, NBLK);
}

Test(trim, randtrim_trims_every_block_once_ext4, .fini = remove_made)
{
    randtrim_whole("/var/tmp");
}

Test(trim, randtrim_trims_every_block_once_tmpfs, .fini = remove_made)
{
    randtrim_whole("/dev/shm");
}

/* The order of randtrim is not the sequential one (or the map could be
 * the identity and the test above would not tell). */
static uint64_t first_offs[8];
static unsigned nfirst;
static void on_first(void *ctx, unsigned job, bool write, uint64_t off, uint64_t len)
{
    (void)ctx, (void)job, (void)write, (void)len;
    if (nfirst < 8)
        first_offs[nfirst++] = off;
}

Test(trim, randtrim_order_is_shuffled, .fini = remove_made)
{
    char path[256];
    cr_assert_eq(t_tmpfile("/dev/shm", "randtrim", NULL, FILE_LEN, 3, path, sizeof path), 0);
    snprintf(made, sizeof made, "%s", path);
    pinio_bench_opts o = trim_opts(path, "/dev/shm", PINIO_BENCH_RANDTRIM, NULL);
    o.trace = on_first;
    o.allow_file_overwrite = true;
    o.qd = 1;
    pinio_diag d = {0};
    pinio_bench_result r;
    int rc = pinio_bench_run(&o, &r, &d);
    unlink(path);
    cr_assert_eq(rc, 0, "%s", d.msg);
    unsigned in_order = 0;
    for (unsigned i = 0; i + 1 < nfirst; i++)
        in_order += first_offs[i + 1] == first_offs[i] + BS;
    cr_assert_eq(nfirst, 8);
    cr_assert_lt(in_order, 7, "randtrim issued its first blocks in sequence");
}

/* Trims destroy data: a file holding data bench did not write is refused
 * (and left whole) unless allow_file_overwrite; a block device unless
 * allow_device_overwrite, before it is opened. */
Test(trim, refused_like_a_write, .fini = remove_made)
{
    char path[256];
    cr_assert_eq(t_tmpfile("/var/tmp", "trimno", NULL, FILE_LEN, 4, path, sizeof path), 0);
    snprintf(made, sizeof made, "%s", path);
    pinio_bench_opts o = trim_opts(path, "/var/tmp", PINIO_BENCH_TRIM, NULL);
    pinio_diag d = {0};
    pinio_bench_result r;
    int rc = pinio_bench_run(&o, &r, &d);
    trace none = {0};
    check_blocks(path, &none, 4);
    unlink(path);
    cr_assert_eq(rc, -EEXIST, "%d: %s", rc, d.msg);
    cr_assert(strstr(d.msg, path) && strstr(d.msg, "a trim run would destroy them") &&
              strstr(d.msg, "--allow-file-overwrite"), "%s", d.msg);

    struct stat st;
    const char *dev = "/dev/loop0";
    if (stat(dev, &st) == 0 && S_ISBLK(st.st_mode)) {
        o.path = dev;
        rc = pinio_bench_run(&o, &r, &d);
        cr_assert_eq(rc, -EPERM, "%d: %s", rc, d.msg);
        cr_assert(strstr(d.msg, "trimming destroys its data") &&
                  strstr(d.msg, "--allow-device-overwrite"), "%s", d.msg);
    }
}

/* Verify has nothing to check in a trimmed range, and IOPOLL rings take no
 * fallocate or discard: usage errors. */
Test(trim, verify_and_iopoll_refused, .fini = remove_made)
{
    pinio_bench_opts o = trim_opts("/var/tmp/pinio-never", "/var/tmp", PINIO_BENCH_RANDTRIM, NULL);
    pinio_diag d = {0};
    o.verify = true;
    cr_assert_eq(pinio_bench_check(&o, &d), -EINVAL);
    cr_assert(strstr(d.msg, "--verify") && strstr(d.msg, "trim"), "%s", d.msg);
    o.verify = false;
    o.verify_only = true;
    cr_assert_eq(pinio_bench_check(&o, &d), -EINVAL);
    cr_assert(strstr(d.msg, "--verify-only"), "%s", d.msg);
    o.verify_only = false;
    o.iopoll = true;
    cr_assert_eq(pinio_bench_check(&o, &d), -EINVAL);
    cr_assert(strstr(d.msg, "--iopoll") && strstr(d.msg, "trim"), "%s", d.msg);
    o.iopoll = false;
    cr_assert_eq(pinio_bench_check(&o, &d), 0, "%s", d.msg);
    pinio_bench_rw rw;
    cr_assert_eq(pinio_bench_rw_parse("randtrim", &rw), 0);
    cr_assert_eq(rw, PINIO_BENCH_RANDTRIM);
    cr_assert_str_eq(pinio_bench_rw_name(PINIO_BENCH_TRIM), "trim");
}

/* A file system that cannot punch holes (simulated: trimnotsup) is named
 * before any request, and a file the run made for it is removed; an
 * existing file keeps its bytes. */
Test(trim, unsupported_file_system_is_named_before_the_run, .fini = remove_made)
{
    char tdir[256], path[300];
    cr_assert_eq(t_tmpdir("/var/tmp", "trimnotsup", tdir, sizeof tdir), 0);
    snprintf(made, sizeof made, "%s", tdir);
    snprintf(path, sizeof path, "%s/f", tdir);
    trace t = {0};
    pinio_bench_opts o = trim_opts(path, "/var/tmp", PINIO_BENCH_TRIM, &t);
    o.size = FILE_LEN;
    o.faults = "trimnotsup";
    pinio_diag d = {0};
    pinio_bench_result r;
    int rc = pinio_bench_run(&o, &r, &d);
    bool left = access(path, F_OK) == 0;
    t_rm_rf(tdir);
    cr_assert_eq(rc, -EOPNOTSUPP, "%d: %s", rc, d.msg);
    char want[400];
    snprintf(want, sizeof want, "bench: %s: the file system does not support punching holes", path);
    cr_assert(strstr(d.msg, want) && strstr(d.msg, "so trim cannot run"), "%s", d.msg);
    cr_assert_eq(t.requests, 0, "a request was issued before the probe failed");
    cr_assert(!left, "the file made for the run was left behind");
}
