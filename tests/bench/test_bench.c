/* pinio_bench: option checks, exact byte counts, write-verify (and a
 * corrupted block caught through the PINIO_FAULTS hook), and the latency
 * histogram against percentiles computed directly from recorded samples. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/loop.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pinio/bench.h"
#include "src/bench/bench_internal.h"
#include "tests/common/limits.h"
#include "tests/common/helpers.h"

/* ---- histogram ----------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t rng_state = 88172645463325252ull;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Latency-like samples: mostly around 100 us, a long tail up to seconds,
 * and some tiny values (exact buckets). */
static uint64_t sample(unsigned i)
{
    switch (i % 4) {
    case 0: return rnd() % 200;
    case 1: return 90000 + rnd() % 20000;
    case 2: return 1000 + rnd() % 5000000;
    default: return (rnd() % 3000000000ull) >> (rnd() % 20);
    }
}

Test(hist, percentiles_within_bound_and_monotone)
{
    enum { N = 100000 };
    uint64_t *v = malloc(N * sizeof *v);
    pinio__hist *h = malloc(sizeof *h);
    cr_assert(v && h);
    pinio__hist_reset(h);
    for (unsigned i = 0; i < N; i++) {
        v[i] = sample(i);
        pinio__hist_record(h, v[i]);
    }
    qsort(v, N, sizeof *v, cmp_u64);
    static const double ps[] = {0.001, 1, 10, 25, 50, 75, 90, 95, 99, 99.9, 99.99, 100};
    uint64_t prev = 0;
    for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++) {
        double x = ps[k] / 100.0 * N;
        size_t rank = (size_t)x;
        if ((double)rank < x)
            rank++;
        if (rank < 1)
            rank = 1;
        uint64_t exact = v[rank - 1];
        uint64_t got = pinio__hist_percentile(h, ps[k]);
        /* Never below the true value, above it by less than 1/2^SUB_BITS. */
        cr_assert_geq(got, exact, "p%g: %llu < exact %llu", ps[k], (unsigned long long)got,
                      (unsigned long long)exact);
        cr_assert_leq((double)(got - exact), (double)exact / PINIO__HIST_SUB,
                      "p%g: %llu vs exact %llu beyond the bound", ps[k], (unsigned long long)got,
                      (unsigned long long)exact);
        cr_assert_geq(got, prev, "p%g not monotone", ps[k]);
        prev = got;
    }
    cr_assert_eq(pinio__hist_percentile(h, 100), v[N - 1]);
    cr_assert_eq(h->min, v[0]);
    free(v);
    free(h);
}

Test(hist, index_and_high_are_consistent)
{
    /* Every value lands in a bucket whose highest value is >= it and whose
     * predecessor's highest value is < it: buckets tile the range. */
    for (unsigned i = 0; i < 200000; i++) {
        uint64_t x = i < 100000 ? i : rnd() >> (rnd() % 64);
        unsigned b = pinio__hist_index(x);
        cr_assert_lt(b, PINIO__HIST_BUCKETS);
        cr_assert_geq(pinio__hist_high(b), x);
        if (b)
            cr_assert_lt(pinio__hist_high(b - 1), x, "x=%llu b=%u", (unsigned long long)x, b);
    }
    cr_assert_eq(pinio__hist_index(UINT64_MAX), PINIO__HIST_BUCKETS - 1);
    cr_assert_eq(pinio__hist_high(PINIO__HIST_BUCKETS - 1), UINT64_MAX);
}

Test(hist, merge_equals_single)
{
    pinio__hist *a = malloc(sizeof *a), *b = malloc(sizeof *b), *all = malloc(sizeof *all);
    pinio__hist_reset(a);
    pinio__hist_reset(b);
    pinio__hist_reset(all);
    for (unsigned i = 0; i < 5000; i++) {
        uint64_t x = sample(i);
        pinio__hist_record(i & 1 ? a : b, x);
        pinio__hist_record(all, x);
    }
    pinio__hist_merge(a, b);
    cr_assert_eq(memcmp(a->counts, all->counts, sizeof a->counts), 0);
    cr_assert_eq(a->total, all->total);
    cr_assert_eq(a->max, all->max);
    cr_assert_eq(pinio__hist_percentile(a, 99), pinio__hist_percentile(all, 99));
    free(a);
    free(b);
    free(all);
}

Test(hist, empty_is_zero)
{
    pinio__hist *h = malloc(sizeof *h);
    pinio__hist_reset(h);
    cr_assert_eq(pinio__hist_percentile(h, 50), 0);
    free(h);
}

/* ---- option checks --------------------------------------------------------- */

static pinio_bench_opts base(const char *path)
{
    pinio_bench_opts o;
    pinio_bench_opts_default(&o);
    o.path = path;
    return o;
}

Test(opts, defaults_are_valid_and_names_round_trip)
{
    pinio_bench_opts o = base("/nonexistent");
    cr_assert_eq(pinio_bench_check(&o, NULL), 0);
    cr_assert_eq(o.bs, 1u << 20);
    cr_assert(o.direct && o.fixed);
    for (int i = 0; i < 4; i++) {
        pinio_bench_rw rw;
        cr_assert_eq(pinio_bench_rw_parse(pinio_bench_rw_name((pinio_bench_rw)i), &rw), 0);
        cr_assert_eq((int)rw, i);
    }
    pinio_bench_rw rw;
    cr_assert_eq(pinio_bench_rw_parse("readwrite", &rw), -EINVAL);
    cr_assert_eq(pinio_bench_rw_parse(NULL, &rw), -EINVAL);
}

Test(opts, bad_values_name_the_option)
{
    struct {
        pinio_bench_opts o;
        const char *word;
    } cases[13];
    unsigned n = 0;
#define CASE(W, stmt)                         \
    do {                                      \
        cases[n].o = base("/nonexistent");    \
        pinio_bench_opts *o = &cases[n].o;    \
        stmt;                                 \
        cases[n++].word = W;                  \
    } while (0)
    CASE("--file", o->path = NULL);
    CASE("--bs", o->bs = 1000);
    CASE("--bs", o->bs = 256);
    CASE("--bs", o->bs = 128ull << 20);
    CASE("--qd", o->qd = 0);
    CASE("--qd", o->qd = 5000);
    CASE("--jobs", o->jobs = 0);
    CASE("--size", (o->size = 3 << 20, o->jobs = 2));
    CASE("--time", o->time_s = -1);
    CASE("--iopoll", (o->iopoll = true, o->direct = false));
    CASE("--verify", o->verify = true);
    CASE("--node", o->node = 100000);
    CASE("--batch", o->batch = 5000);
#undef CASE
    for (unsigned i = 0; i < n; i++) {
        pinio_diag d = {0};
        cr_assert_eq(pinio_bench_check(&cases[i].o, &d), -EINVAL, "case %u", i);
        cr_assert(strstr(d.msg, cases[i].word), "case %u: '%s' lacks %s", i, d.msg,
                  cases[i].word);
    }
}

Test(opts, bad_options_touch_nothing)
{
    char path[256];
    cr_assert_eq(t_tmpname("/tmp", "pbench-none", path, sizeof path), 0);
    int fd = mkstemp(path);
    close(fd);
    unlink(path); /* a name that does not exist */
    pinio_bench_opts o = base(path);
    o.rw = PINIO_BENCH_WRITE;
    o.bs = 1000;
    pinio_diag d = {0};
    pinio_bench_result r;
    cr_assert_eq(pinio_bench_run(&o, &r, &d), -EINVAL);
    struct stat st;
    cr_assert_eq(stat(path, &st), -1, "a rejected run created %s", path);
    o.bs = 4096;
    o.faults = "bogus@1";
    cr_assert_eq(pinio_bench_run(&o, &r, &d), -EINVAL);
    cr_assert_eq(stat(path, &st), -1, "a bad fault spec created %s", path);
}

Test(opts, writes_only_to_regular_files)
{
    pinio_bench_opts o = base("/dev/null");
    o.rw = PINIO_BENCH_WRITE;
    o.size = 1 << 20;
    pinio_diag d = {0};
    pinio_bench_result r;
    cr_assert_eq(pinio_bench_run(&o, &r, &d), -EPERM);
    cr_assert(strstr(d.msg, "/dev/null"), "%s", d.msg);
    o.path = "/tmp";
    cr_assert_eq(pinio_bench_run(&o, &r, &d), -EPERM);
}

Test(opts, missing_file_to_read_from_a_bad_dir)
{
    pinio_bench_opts o = base("/nonexistent-dir/x");
    pinio_diag d = {0};
    pinio_bench_result r;
    int rc = pinio_bench_run(&o, &r, &d);
    cr_assert_eq(rc, -ENOENT, "%d %s", rc, d.msg);
    cr_assert(strstr(d.msg, "/nonexistent-dir/x"));
}

/* ---- runs ----------------------------------------------------------------- */

static char *temp_name(const char *dir)
{
    char *p = malloc(256);
    cr_assert_eq(t_tmpname(dir, "pbench", p, 256), 0);
    int fd = mkstemp(p);
    cr_assert_geq(fd, 0);
    close(fd);
    unlink(p);
    return p;
}

static void run_ok(pinio_bench_opts *o, pinio_bench_result *r)
{
    pinio_diag d = {0};
    int rc = pinio_bench_run(o, r, &d);
    if (rc == -EINVAL && o->direct && strstr(d.msg, "O_DIRECT")) {
        unlink(o->path);
        cr_skip_test("O_DIRECT refused here: %s", d.msg);
    }
    cr_assert_eq(rc, 0, "%s %s bs=%llu qd=%u jobs=%u: %s", pinio_bench_rw_name(o->rw), o->path,
                 (unsigned long long)o->bs, o->qd, o->jobs, d.msg);
}

/* Every workload moves exactly `size` bytes, in size/bs requests, and the
 * histogram saw each of them. */
static bool kernel_at_least(unsigned major, unsigned minor)
{
    struct utsname u;
    unsigned a = 0, b = 0;
    if (uname(&u) || sscanf(u.release, "%u.%u", &a, &b) != 2)
        return false;
    return a > major || (a == major && b >= minor);
}

static void byte_counts(const char *dir, bool direct)
{
    char *p = temp_name(dir);
    static const pinio_bench_rw rws[] = {PINIO_BENCH_WRITE, PINIO_BENCH_READ,
                                         PINIO_BENCH_RANDWRITE, PINIO_BENCH_RANDREAD};
    for (unsigned k = 0; k < 4; k++)
        for (unsigned jobs = 1; jobs <= 3; jobs += 2) {
            pinio_bench_opts o = base(p);
            o.rw = rws[k];
            o.direct = direct;
            o.jobs = jobs;
            o.bs = 16384;
            o.qd = 4;
            o.size = 3ull * 16384 * 37;
            o.regfiles = k & 1;
            o.fixed = !(k & 2);
            pinio_bench_result r;
            run_ok(&o, &r);
            cr_assert_eq(r.bytes, o.size, "%s jobs=%u: %llu bytes", pinio_bench_rw_name(o.rw), jobs,
                         (unsigned long long)r.bytes);
            cr_assert_eq(r.ios, o.size / o.bs);
            cr_assert_gt(r.lat_max_ns, 0);
            cr_assert_leq(r.lat_p50_ns, r.lat_p99_ns);
            cr_assert_leq(r.lat_p99_ns, r.lat_max_ns);
            cr_assert(strstr(r.features, direct ? "o_direct" : "buffered"), "%s", r.features);
            cr_assert_eq(!!strstr(r.features, "fixed_bufs"), o.fixed, "%s", r.features);
            cr_assert_eq(!!strstr(r.features, "reg_files"), o.regfiles, "%s", r.features);
            /* the ring's fd registered (Linux 5.18): one file-table lookup
             * less per io_uring_enter */
            cr_assert(!!strstr(r.features, "reg_ring") || !kernel_at_least(5, 18), "%s",
                      r.features);
        }
    unlink(p);
    free(p);
}

Test(run, byte_counts_direct_on_disk) { byte_counts("/tmp", true); }
Test(run, byte_counts_buffered_on_tmpfs) { byte_counts("/dev/shm", false); }

Test(run, o_direct_on_tmpfs_is_one_clear_error)
{
    char *p = temp_name("/dev/shm");
    int fd = open(p, O_CREAT | O_WRONLY, 0600);
    cr_assert(ftruncate(fd, 1 << 20) == 0);
    close(fd);
    pinio_bench_opts o = base(p);
    pinio_diag d = {0};
    pinio_bench_result r;
    int rc = pinio_bench_run(&o, &r, &d);
    unlink(p);
    free(p);
    if (rc == 0)
        cr_skip_test("this tmpfs accepts O_DIRECT (Linux 6.6+)");
    cr_assert_eq(rc, -EINVAL, "%s", d.msg);
    cr_assert(strstr(d.msg, "--direct=0"), "%s", d.msg);
}

Test(run, read_of_missing_file_creates_real_data)
{
    char *p = temp_name("/tmp");
    pinio_bench_opts o = base(p);
    o.size = 4 << 20;
    o.bs = 65536;
    pinio_bench_result r;
    run_ok(&o, &r);
    cr_assert(r.created);
    cr_assert_eq(r.bytes, o.size);
    /* The content is the verify pattern, not zeros (a sparse file would read
     * without I/O). */
    int fd = open(p, O_RDONLY);
    static uint64_t buf[8192];
    cr_assert_eq(pread(fd, buf, sizeof buf, 1 << 20), (ssize_t)sizeof buf);
    close(fd);
    cr_assert_eq(pinio__bench_pattern_check(buf, sizeof buf, 1 << 20, o.seed), -1);
    unlink(p);
    free(p);
}

/* Buffered reads of a file just written (in the page cache) of a file
 * system with non-blocking buffered reads (ext4, /var/tmp here) complete
 * inside the submit call. So every wake finds all qd completions and the
 * submit-call count follows the batch exactly: one call per request at
 * batch 1, one per wake at batch qd. */
static void batch_run(pinio_bench_rw rw, unsigned batch, pinio_bench_result *r)
{
    char *p = temp_name("/var/tmp");
    pinio_bench_opts o = base(p);
    o.rw = rw;
    o.direct = false;
    o.size = 4 << 20;
    o.bs = 4096;
    o.qd = 16;
    o.batch = batch;
    run_ok(&o, r);
    cr_assert_eq(r->bytes, o.size);
    unlink(p);
    free(p);
}

Test(run, batch_resolves_and_sets_submit_calls)
{
    pinio_bench_result r;
    batch_run(PINIO_BENCH_READ, 0, &r);
    cr_assert_eq(r.batch, 16, "auto for sequential is qd, got %u", r.batch);
    cr_assert_lt(r.submits_per_io, 0.5, "batch 16: %.3f submit calls per I/O", r.submits_per_io);
    batch_run(PINIO_BENCH_RANDREAD, 0, &r);
    cr_assert_eq(r.batch, 1, "auto for random is 1, got %u", r.batch);
    cr_assert_geq(r.submits_per_io, 0.9, "batch 1: %.3f submit calls per I/O", r.submits_per_io);
    batch_run(PINIO_BENCH_READ, 1, &r);
    cr_assert_eq(r.batch, 1);
    cr_assert_geq(r.submits_per_io, 0.9, "batch 1: %.3f submit calls per I/O", r.submits_per_io);
    batch_run(PINIO_BENCH_RANDREAD, 64, &r);
    cr_assert_eq(r.batch, 16, "a batch above qd is capped at qd, got %u", r.batch);
    cr_assert_lt(r.submits_per_io, 0.5);
}

/* A refill submitted while a wake's completions are handled can complete
 * before the loop ends (here always: inside its submit call); it must be
 * timed at a later wake, never against the wake it was submitted in
 * (latency 0). Without the loop's bound every run here recorded a 0. */
Test(run, refills_are_never_timed_against_their_own_wake)
{
    pinio_bench_result r;
    batch_run(PINIO_BENCH_RANDREAD, 1, &r);
    cr_assert_gt(r.lat_min_ns, 0, "a request was recorded with latency 0");
}

/* SQPOLL: the kernel thread submits; every byte still moves, and a
 * random run's one-by-one refills cost no system call each. */
Test(run, sqpoll_moves_every_byte)
{
    static const pinio_bench_rw rws[] = {PINIO_BENCH_READ, PINIO_BENCH_RANDREAD,
                                         PINIO_BENCH_RANDWRITE};
    for (unsigned k = 0; k < 3; k++) {
        char *p = temp_name("/var/tmp");
        pinio_bench_opts o = base(p);
        o.rw = rws[k];
        o.sqpoll = true;
        o.regfiles = k == 1;
        o.size = 2 << 20;
        o.bs = 4096;
        o.qd = 8;
        o.verify = rws[k] == PINIO_BENCH_RANDWRITE;
        pinio_bench_result r;
        pinio_diag d = {0};
        int rc = pinio_bench_run(&o, &r, &d);
        unlink(p);
        free(p);
        if (rc == -EPERM && strstr(d.msg, "--sqpoll"))
            cr_skip_test("SQPOLL not permitted here: %s", d.msg);
        cr_assert_eq(rc, 0, "%s: %s", pinio_bench_rw_name(o.rw), d.msg);
        cr_assert_eq(r.bytes, o.size);
        cr_assert_eq(r.ios, o.size / o.bs);
        cr_assert(strstr(r.features, "sqpoll"), "%s", r.features);
        if (o.verify)
            cr_assert_eq(r.verified_bytes, o.size);
    }
}

/* IOPOLL needs polled hardware queues. Where the device has them the run
 * moves every byte; where it has not (virtio, most VMs) the run is one
 * clear error that says what --iopoll needs, never a hang. */
Test(run, iopoll_works_or_says_what_it_needs)
{
    char *p = temp_name("/var/tmp");
    pinio_bench_opts o = base(p);
    o.rw = PINIO_BENCH_RANDREAD;
    o.iopoll = true;
    o.size = 1 << 20;
    o.bs = 4096;
    o.qd = 4;
    pinio_bench_result r;
    pinio_diag d = {0};
    int rc = pinio_bench_run(&o, &r, &d);
    unlink(p);
    free(p);
    if (rc == 0) {
        cr_assert_eq(r.bytes, o.size);
        cr_assert(strstr(r.features, "iopoll"), "%s", r.features);
    } else {
        cr_assert(strstr(d.msg, "--iopoll"), "%d: %s", rc, d.msg);
        cr_assert(rc == -EOPNOTSUPP || rc == -EINVAL, "%d: %s", rc, d.msg);
    }
}

/* The unprivileged side of the next test; returns 0 or which check failed. */
static int memlock_child(const char *p, const char *q)
{
    static const pinio_bench_rw rws[] = {PINIO_BENCH_READ, PINIO_BENCH_WRITE};
    for (unsigned k = 0; k < 2; k++) {
        pinio_bench_opts o = base(p);
        o.rw = rws[k];
        o.size = 8 << 20;
        pinio_bench_result r;
        pinio_diag d = {0};
        if (pinio_bench_run(&o, &r, &d) != -ENOMEM)
            return 20 + (int)k;
        /* The up-front check names what the buffers need (16 x 1 MiB);
         * the registration's own error could only come after the fill. */
        if (!strstr(d.msg, "RLIMIT_MEMLOCK") || !strstr(d.msg, "--fixed=0") ||
            !strstr(d.msg, p) || !strstr(d.msg, "16777216"))
            return 22;
        if (access(p, F_OK) == 0)
            return 23;
        o.path = q; /* an existing file: untouched */
        o.size = 1 << 20;
        if (pinio_bench_run(&o, &r, &d) != -ENOMEM)
            return 24;
        o.path = p;
        o.bs = 4096;
        o.qd = 1;
        o.size = 1 << 20;
        int rc = pinio_bench_run(&o, &r, &d);
        if (rc != 0 && access(p, F_OK) == 0)
            return 25;
        unlink(p);
    }
    return 0;
}

/* A user without CAP_IPC_LOCK and a 64 KiB memlock limit: registered
 * buffers cannot fit. Each run is one -ENOMEM naming the limit and the way
 * out, before anything is created (a read of a missing file would fill it
 * first) and without touching an existing file. Then the gray zone: 4 KiB
 * of buffers fit the limit, but their 2 MiB huge page does not, so the
 * registration itself fails after the file was made; the file goes too. */
Test(run, too_little_memlock_writes_nothing)
{
    char *p = temp_name("/var/tmp");
    char *q = temp_name("/var/tmp");
    int fd = open(q, O_CREAT | O_WRONLY, 0600);
    cr_assert(fd >= 0 && ftruncate(fd, 1 << 20) == 0);
    close(fd);
    pid_t pid = t_fork_unprivileged(65536);
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        int code = memlock_child(p, q);
        free(p); /* the child is leak-checked too (valgrind) */
        free(q);
        _exit(code);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    struct stat sb;
    cr_assert_eq(stat(q, &sb), 0);
    cr_assert_eq(sb.st_size, 1 << 20, "the existing file changed size");
    unlink(q);
    unlink(p);
    free(p);
    free(q);
    cr_assert(WIFEXITED(st));
    if (WEXITSTATUS(st) == 12)
        cr_skip_test("cannot drop capabilities here");
    cr_assert_eq(WEXITSTATUS(st), 0, "child check %d failed", WEXITSTATUS(st));
}

/* A job thread that cannot be created (EAGAIN under RLIMIT_NPROC) fails the
 * run with that error after the jobs that did start were released and
 * joined; it used to be counted as started, so the run waited forever for
 * it at the start gate (the child's alarm turns that into SIGALRM here). */
static int nproc_child(const char *path)
{
    alarm(30);
    pinio_bench_opts o = base(path);
    o.direct = false;
    o.fixed = false;
    o.jobs = 3;
    o.bs = 4096;
    o.qd = 2;
    o.size = 3 * 4096 * 4;
    pinio_diag d = {0};
    pinio_bench_result r;
    int rc = pinio_bench_run(&o, &r, &d);
    if (rc != -EAGAIN)
        return 20;
    if (!strstr(d.msg, "cannot start job thread 1 of 3") || !strstr(d.msg, "RLIMIT_NPROC"))
        return 21;
    return 0;
}

Test(run, thread_creation_failure_unwinds)
{
    char *p = temp_name("/dev/shm");
    int fd = open(p, O_CREAT | O_WRONLY, 0644);
    cr_assert(fd >= 0 && ftruncate(fd, 3 * 4096 * 4) == 0);
    close(fd);
    /* The child and one job thread fit; the second job thread does not. */
    pid_t pid = t_fork_nproc(2);
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        int code = nproc_child(p);
        free(p);
        _exit(code);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    unlink(p);
    free(p);
    cr_assert(!WIFSIGNALED(st), "the run hung or crashed (signal %d)", WTERMSIG(st));
    cr_assert(WIFEXITED(st));
    if (WEXITSTATUS(st) == 13 || WEXITSTATUS(st) == 14)
        cr_skip_test("cannot lower RLIMIT_NPROC here (step %d)", WEXITSTATUS(st));
    cr_assert_eq(WEXITSTATUS(st), 0, "child check %d failed", WEXITSTATUS(st));
}

/* A loop device over `file`, detached when `*lfd` is closed (autoclear).
 * Returns 0, or a negative errno (no loop driver, not root). */
static int loop_attach(const char *file, unsigned block, char *dev, size_t n, int *lfd)
{
    for (int tries = 0; tries < 8; tries++) { /* another program may take the same number */
        int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
        if (ctl < 0)
            return -errno;
        int no = ioctl(ctl, LOOP_CTL_GET_FREE);
        int e = errno;
        close(ctl);
        if (no < 0)
            return -e;
        snprintf(dev, n, "/dev/loop%d", no);
        int fd = open(dev, O_RDWR | O_CLOEXEC);
        if (fd < 0)
            return -errno;
        int ffd = open(file, O_RDWR | O_CLOEXEC);
        if (ffd < 0) {
            e = errno;
            close(fd);
            return -e;
        }
        int rc = ioctl(fd, LOOP_SET_FD, ffd);
        e = errno;
        close(ffd);
        if (rc == 0) {
            struct loop_info64 li;
            memset(&li, 0, sizeof li);
            li.lo_flags = LO_FLAGS_AUTOCLEAR;
            ioctl(fd, LOOP_SET_STATUS64, &li);
            if (block && ioctl(fd, LOOP_SET_BLOCK_SIZE, (unsigned long)block) != 0) {
                e = errno;
                close(fd);
                return -e;
            }
            *lfd = fd;
            return 0;
        }
        close(fd);
        if (e != EBUSY)
            return -e;
    }
    return -EBUSY;
}

/* A loop device of `block`-byte logical blocks (0: the default) over a new
 * 1 MiB file of zeros, whose path is returned; skips the test where loop
 * devices cannot be made. */
static char *loop_over_new_file(unsigned block, char *dev, size_t n, int *lfd)
{
    char *p = temp_name("/var/tmp");
    int fd = open(p, O_CREAT | O_RDWR, 0600);
    cr_assert(fd >= 0 && ftruncate(fd, 1 << 20) == 0);
    close(fd);
    int rc = loop_attach(p, block, dev, n, lfd);
    if (rc) {
        unlink(p);
        free(p);
        cr_skip_test("no loop device here: %s", strerror(-rc));
    }
    return p;
}

/* --allow-device-overwrite on a device in use: a mounted file system holds
 * its device exclusively, as this test's O_EXCL descriptor does; the write
 * is refused and the device keeps its bytes. Released, the same run works. */
Test(run, device_in_use_is_not_written)
{
    char dev[64];
    int lfd = -1;
    char *p = loop_over_new_file(0, dev, sizeof dev, &lfd);
    int holder = open(dev, O_RDONLY | O_EXCL | O_CLOEXEC);
    cr_assert_geq(holder, 0, "%s: %s", dev, strerror(errno));
    pinio_bench_opts o = base(dev);
    o.rw = PINIO_BENCH_WRITE;
    o.allow_device_overwrite = true;
    o.direct = false;
    o.fixed = false;
    o.bs = 65536;
    o.qd = 2;
    o.size = 1 << 20;
    pinio_diag d = {0};
    pinio_bench_result r;
    int rc = pinio_bench_run(&o, &r, &d);
    close(holder);
    struct stat sb;
    bool zero = true;
    static unsigned char buf[1 << 20];
    int fd = open(p, O_RDONLY);
    if (fd >= 0 && read(fd, buf, sizeof buf) == (ssize_t)sizeof buf)
        for (size_t i = 0; i < sizeof buf; i++)
            zero = zero && !buf[i];
    if (fd >= 0)
        close(fd);
    int rc2 = rc == -EBUSY ? pinio_bench_run(&o, &r, &d) : -1;
    close(lfd); /* autoclear detaches the device */
    cr_assert_eq(stat(p, &sb), 0);
    unlink(p);
    free(p);
    cr_assert_eq(rc, -EBUSY, "%d: %s", rc, d.msg);
    cr_assert(zero, "the device in use was written");
    cr_assert_eq(rc2, 0, "once released: %s", d.msg);
}

/* --bs 512 with O_DIRECT on a device of 4096-byte logical blocks: one error
 * that gives the block size, before any request (each would fail with a
 * bare "invalid argument"). */
Test(run, direct_bs_below_the_device_block_says_its_size)
{
    char dev[64];
    int lfd = -1;
    char *p = loop_over_new_file(4096, dev, sizeof dev, &lfd);
    pinio_bench_opts o = base(dev);
    o.fixed = false;
    o.bs = 512;
    o.qd = 2;
    o.size = 65536;
    pinio_diag d = {0};
    pinio_bench_result r;
    int rc = pinio_bench_run(&o, &r, &d);
    close(lfd);
    unlink(p);
    free(p);
    cr_assert_eq(rc, -EINVAL, "%d: %s", rc, d.msg);
    cr_assert(strstr(d.msg, "--bs 512") && strstr(d.msg, "4096-byte block"), "%s", d.msg);
}

Test(run, time_based_run_loops_and_stops)
{
    char *p = temp_name("/tmp");
    pinio_bench_opts o = base(p);
    o.size = 1 << 20;
    o.bs = 4096;
    o.rw = PINIO_BENCH_RANDREAD;
    o.time_s = 0.3;
    pinio_bench_result r;
    run_ok(&o, &r);
    cr_assert_gt(r.bytes, 0);
    cr_assert_eq(r.bytes % 4096, 0);
    cr_assert_geq(r.seconds, 0.3);
    cr_assert_lt(r.seconds, 30.0);
    unlink(p);
    free(p);
}

static void verify_run(const char *dir, bool direct, pinio_bench_rw rw, const char *faults,
                       int want)
{
    char *p = temp_name(dir);
    pinio_bench_opts o = base(p);
    o.rw = rw;
    o.direct = direct;
    o.verify = true;
    o.bs = 8192;
    o.qd = 8;
    o.jobs = 2;
    o.size = 2 * 8192 * 64;
    o.faults = faults;
    pinio_bench_result r;
    pinio_diag d = {0};
    int rc = pinio_bench_run(&o, &r, &d);
    if (rc == -EINVAL && strstr(d.msg, "O_DIRECT")) {
        unlink(p);
        free(p);
        cr_skip_test("O_DIRECT refused: %s", d.msg);
    }
    cr_assert_eq(rc, want, "%s %s: %d %s", pinio_bench_rw_name(rw), faults ? faults : "", rc,
                 d.msg);
    if (want == 0) {
        cr_assert_eq(r.verified_bytes, o.size);
    } else {
        cr_assert(strstr(d.msg, "verify") && strstr(d.msg, "offset"), "%s", d.msg);
    }
    unlink(p);
    free(p);
}

Test(verify, clean_write_verifies)
{
    verify_run("/tmp", true, PINIO_BENCH_WRITE, "", 0);
    verify_run("/tmp", true, PINIO_BENCH_RANDWRITE, "", 0);
    verify_run("/dev/shm", false, PINIO_BENCH_RANDWRITE, "", 0);
}

Test(verify, corrupted_block_is_caught)
{
    /* Each job writes 64 blocks (completions 1..64 of its ring), then reads
     * them back: completion 70 is the 6th block read back. */
    verify_run("/tmp", true, PINIO_BENCH_WRITE, "corrupt@70", -EBADMSG);
    verify_run("/dev/shm", false, PINIO_BENCH_RANDWRITE, "corrupt@65", -EBADMSG);
    /* The same rule inside the write pass corrupts nothing (writes have no
     * read buffer): the hook must not cause false alarms. */
    verify_run("/tmp", true, PINIO_BENCH_WRITE, "corrupt@3", 0);
}

Test(verify, io_error_and_retries)
{
    /* An injected EIO fails the run naming the offset; EAGAIN and short
     * completions are retried and the run still verifies. */
    char *p = temp_name("/tmp");
    pinio_bench_opts o = base(p);
    o.rw = PINIO_BENCH_WRITE;
    o.bs = 8192;
    o.size = 8192 * 32;
    o.verify = true;
    o.faults = "eagain@2x3,short@9,short@40";
    pinio_bench_result r;
    run_ok(&o, &r);
    cr_assert_eq(r.verified_bytes, o.size);
    cr_assert_eq(r.bytes, o.size);
    o.faults = "eio@5";
    pinio_diag d = {0};
    cr_assert_eq(pinio_bench_run(&o, &r, &d), -EIO);
    cr_assert(strstr(d.msg, "offset"), "%s", d.msg);
    unlink(p);
    free(p);
}

/* CRC-32C's check value (RFC 3720 appendix B.4 and every CRC catalogue):
 * a wrong polynomial, reflection or final xor each change it. Fed in two
 * pieces, it must continue from the first. */
Test(verify, crc32c_vector)
{
    cr_assert_eq(pinio__crc32c(0, "123456789", 9), 0xE3069283u);
    cr_assert_eq(pinio__crc32c(pinio__crc32c(0, "1234", 4), "56789", 5), 0xE3069283u);
    cr_assert_eq(pinio__crc32c(0, "", 0), 0u);
}

/* Each verify mode: an intact block passes; a flipped payload byte is
 * caught and located; a block written for another offset names it; a block
 * of another mode is recognised as a bench block of that mode. */
Test(verify, block_modes_catch_flip_and_misplace)
{
    static uint64_t w[4096 / 8], v[4096 / 8];
    uint8_t *b = (uint8_t *)w;
    pinio__block_found f;
    for (int m = 0; m < 3; m++) {
        pinio__bench_block_fill(w, sizeof w, 8192, 5, 2, m);
        cr_assert_eq(pinio__bench_block_check(w, sizeof w, 8192, 5, m, &f), 0, "mode %d", m);
        cr_assert_eq(f.gen, 2);
        b[1000] ^= 0x10;
        cr_assert_eq(pinio__bench_block_check(w, sizeof w, 8192, 5, m, &f), -1);
        cr_assert_eq(f.bad_at, 1000, "mode %d: bad_at %ld", m, f.bad_at);
        cr_assert_eq(f.sum_bad, m != 0);
        b[1000] ^= 0x10;
        pinio__bench_block_fill(v, sizeof v, 4096, 5, 0, m);
        cr_assert_eq(pinio__bench_block_check(v, sizeof v, 8192, 5, m, &f), -1);
        cr_assert(f.has_header);
        cr_assert_eq(f.off, 4096);
        cr_assert_eq(pinio__bench_block_check(w, sizeof w, 8192, 5, (m + 1) % 3, &f), -1);
        cr_assert_eq(f.mode, m);
    }
    /* The stored checksum itself hit (payload intact): still a failure. */
    pinio__bench_block_fill(w, sizeof w, 0, 1, 0, PINIO_BENCH_VERIFY_SHA256);
    b[40] ^= 1;
    cr_assert_eq(pinio__bench_block_check(w, sizeof w, 0, 1, PINIO_BENCH_VERIFY_SHA256, &f), -1);
    cr_assert(f.sum_bad);
}

/* trim on a block device (a loop device, whose discards punch holes in its
 * backing file, where they can be seen): the discarded range, and only it,
 * becomes a hole; through io_uring's discard command where the kernel has
 * it, and through BLKDISCARD when it does not (the nodiscardcmd fault). */
static void loop_trim_once(const char *dev, const char *p, const char *faults, const char *how)
{
    static unsigned char buf[1 << 20];
    memset(buf, 0xa5, sizeof buf);
    int fd = open(p, O_WRONLY);
    cr_assert(fd >= 0 && pwrite(fd, buf, sizeof buf, 0) == (ssize_t)sizeof buf && fsync(fd) == 0);
    close(fd);
    pinio_bench_opts o = base(dev);
    o.rw = PINIO_BENCH_TRIM;
    o.allow_device_overwrite = true;
    o.bs = 65536;
    o.qd = 4;
    o.offset = 256 << 10;
    o.size = 512 << 10;
    o.faults = faults;
    pinio_diag d = {0};
    pinio_bench_result r;
    int rc = pinio_bench_run(&o, &r, &d);
    cr_assert_eq(rc, 0, "%s: %s", faults, d.msg);
    cr_assert(strstr(r.features, how), "%s: features %s, want %s", faults, r.features, how);
    cr_assert_eq(r.trim.ios, 8);
    cr_assert_eq(r.trim.bytes, 512 << 10);
    fd = open(p, O_RDONLY);
    cr_assert_geq(fd, 0);
    off_t hole = lseek(fd, 0, SEEK_HOLE), data = lseek(fd, hole, SEEK_DATA);
    cr_assert_eq(pread(fd, buf, sizeof buf, 0), (ssize_t)sizeof buf);
    close(fd);
    cr_assert_eq(hole, 256 << 10, "%s: the first hole at %lld", faults, (long long)hole);
    cr_assert_eq(data, 768 << 10, "%s: data again at %lld", faults, (long long)data);
    for (size_t i = 0; i < sizeof buf; i++)
        cr_assert_eq(buf[i], i >= (256u << 10) && i < (768u << 10) ? 0 : 0xa5,
                     "%s: byte %zu is %u", faults, i, buf[i]);
}

Test(run, trim_discards_a_block_device)
{
    char dev[64];
    int lfd = -1;
    char *p = loop_over_new_file(0, dev, sizeof dev, &lfd);
    int hfd = open(dev, O_RDONLY);
    char q[128];
    struct stat sb;
    cr_assert(hfd >= 0 && fstat(hfd, &sb) == 0);
    close(hfd);
    snprintf(q, sizeof q, "/sys/dev/block/%u:%u/queue/discard_max_bytes", major(sb.st_rdev),
             minor(sb.st_rdev));
    FILE *f = fopen(q, "r");
    unsigned long long maxd = 0;
    if (f && fscanf(f, "%llu", &maxd) != 1)
        maxd = 0;
    if (f)
        fclose(f);
    if (!maxd) {
        close(lfd);
        unlink(p);
        free(p);
        cr_skip_test("%s does not discard here", dev);
    }
    loop_trim_once(dev, p, "", "discard_"); /* discard_cmd, or blkdiscard_sync before 6.12 */
    loop_trim_once(dev, p, "nodiscardcmd", "blkdiscard_sync");
    close(lfd);
    unlink(p);
    free(p);
}
