/* pinio bench's time knobs: the ramp is left out of the figures, a rate
 * limit holds, think time pauses. Each check holds whatever the machine's
 * load: the limits are checked from their side that the code guarantees
 * (request k is issued no earlier than the run's start + k / rate; after
 * every thinktime_blocks completions nothing is issued for thinktime), on
 * the issue times the trace callback stamps, against the clock read before
 * the run began. How close a run comes to its rate depends on the machine:
 * a speed, measured by bench/, not asserted here. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pinio/bench.h"
#include "tests/common/helpers.h"

static char path[128];

static void setup(void)
{
    char run[17];
    cr_assert_eq(t_run(run, sizeof run), 0);
    snprintf(path, sizeof path, "/dev/shm/pinio-%s-bench-time-%d", run, (int)getpid());
    unlink(path);
}

static void teardown(void)
{
    unlink(path);
}

TestSuite(bench_timing, .init = setup, .fini = teardown);

/* What the trace saw: per job, requests and bytes issued so far, and the
 * first request issued too early (checked on the job's thread, asserted
 * after the run). */
struct trace {
    uint64_t start;             /* CLOCK_MONOTONIC ns, read before the run */
    double ns_per_io, ns_per_byte; /* the limits, per job (0: none) */
    uint64_t n[2], bytes[2];
    uint64_t *at;               /* issue times of job 0, when kept */
    size_t cap, after;          /* ... room; and issued at or after `from` */
    uint64_t from;
    char early[160];
};

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void on_issue(void *ctx, unsigned job, bool write, uint64_t off, uint64_t len)
{
    (void)write, (void)off;
    struct trace *t = ctx;
    uint64_t now = mono_ns(), k = t->n[job], b = t->bytes[job];
    /* The limiter's promise: request k (b bytes before it) goes no earlier
     * than its pass's start + max(k x ns_per_io, b x ns_per_byte), and the
     * pass starts after `start`. */
    double a = (double)k * t->ns_per_io, c = (double)b * t->ns_per_byte;
    uint64_t due = t->start + (uint64_t)(a > c ? a : c);
    if (now < due && !t->early[0])
        snprintf(t->early, sizeof t->early, "job %u request %llu issued %llu ns before its time",
                 job, (unsigned long long)k, (unsigned long long)(due - now));
    if (job == 0 && t->at && k < t->cap)
        t->at[k] = now;
    if (now >= t->from)
        t->after++;
    t->n[job]++;
    t->bytes[job] += len;
}

static void trace_start(struct trace *t, pinio_bench_opts *o)
{
    memset(t, 0, sizeof *t);
    t->ns_per_io = o->rate_iops ? 1e9 / (double)o->rate_iops : 0;
    t->ns_per_byte = o->rate_bytes_per_s ? 1e9 / (double)o->rate_bytes_per_s : 0;
    o->trace = on_issue;
    o->trace_ctx = t;
    t->start = mono_ns();
}

static void opts(pinio_bench_opts *o)
{
    pinio_bench_opts_default(o);
    o->path = path;
    o->direct = false;
    o->fixed = false;
    o->bs = 4096;
    o->qd = 4;
    o->size = 4 << 20;
}

Test(bench_timing, ramp_excluded)
{
    pinio_bench_opts o;
    opts(&o);
    o.rw = PINIO_BENCH_RANDREAD;
    o.time_s = 0.4;
    o.ramp_time_s = 0.4;
    o.rate_iops = 5000; /* the ramp issues requests all along */
    struct trace t;
    trace_start(&t, &o);
    t.from = t.start + (uint64_t)(o.ramp_time_s * 1e9);
    pinio_bench_result r;
    pinio_diag d = {0};
    cr_assert_eq(pinio_bench_run(&o, &r, &d), 0, "%s", d.msg);
    double wall = (double)(mono_ns() - t.start) / 1e9;
    cr_assert_str_empty(t.early, "%s", t.early);
    /* The clock starts when the ramp is over: at least ramp_time after the
     * run began. */
    cr_assert(r.seconds >= 0 && r.seconds <= wall - o.ramp_time_s + 1e-6,
              "measured %g s of %g s with a %g s ramp: the ramp included?", r.seconds, wall,
              o.ramp_time_s);
    /* What is counted completed after the ramp's end: issued then, or one
     * of the qd requests in flight at that moment. The ramp's end is no
     * earlier than `from`, so a request issued before `from` and done by
     * then is in no figure (the ramp's share, however much the machine
     * let it issue). */
    cr_assert(r.ios <= t.after + o.qd, "counted %llu of %llu requests, %zu after the ramp",
              (unsigned long long)r.ios, (unsigned long long)t.n[0], t.after);
    cr_assert_eq(r.bytes, r.ios * o.bs);
}

Test(bench_timing, rate_iops_held)
{
    pinio_bench_opts o;
    opts(&o);
    o.rw = PINIO_BENCH_RANDREAD;
    o.time_s = 1;
    o.rate_iops = 2000;
    struct trace t;
    trace_start(&t, &o);
    pinio_bench_result r;
    pinio_diag d = {0};
    cr_assert_eq(pinio_bench_run(&o, &r, &d), 0, "%s", d.msg);
    cr_assert_str_empty(t.early, "%s", t.early);
    cr_assert(t.n[0] > 0 && r.ios == t.n[0], "%llu counted, %llu issued",
              (unsigned long long)r.ios, (unsigned long long)t.n[0]);
    /* So the run's figure is at most the rate, over its own seconds plus
     * the time between the call and the first request. */
    double wall = (double)(mono_ns() - t.start) / 1e9;
    cr_assert((double)r.ios <= 2000 * wall + 1, "%llu requests in %g s", (unsigned long long)r.ios,
              wall);
}

Test(bench_timing, rate_bytes_held_per_job)
{
    pinio_bench_opts o;
    opts(&o);
    o.time_s = 1;
    o.jobs = 2;
    o.bs = 16384;
    o.rate_bytes_per_s = 8 << 20; /* per job: 16 MiB/s in all */
    struct trace t;
    trace_start(&t, &o);
    pinio_bench_result r;
    pinio_diag d = {0};
    cr_assert_eq(pinio_bench_run(&o, &r, &d), 0, "%s", d.msg);
    cr_assert_str_empty(t.early, "%s", t.early);
    cr_assert(t.bytes[0] > 0 && t.bytes[1] > 0, "both jobs issue");
    cr_assert_eq(r.bytes, t.bytes[0] + t.bytes[1]);
}

/* --thinktime: after every thinktime_blocks completions, nothing is issued
 * for thinktime. With qd 1 and one block, request k+1 waits for request k's
 * completion and then the pause: issues are 2 ms apart or more. With qd 4
 * and 4 blocks, request 4m+3 needs the slot of completion 4m (m >= 1), which
 * came after request 4m-1 was issued and started a pause: those two are
 * 2 ms apart or more. */
Test(bench_timing, thinktime_pauses)
{
    static uint64_t at[4096];
    pinio_bench_opts o;
    opts(&o);
    o.rw = PINIO_BENCH_RANDREAD;
    o.time_s = 0.3;
    o.qd = 1;
    o.thinktime_us = 2000;
    struct trace t;
    trace_start(&t, &o);
    t.at = at;
    t.cap = 4096;
    pinio_bench_result r;
    pinio_diag d = {0};
    cr_assert_eq(pinio_bench_run(&o, &r, &d), 0, "%s", d.msg);
    size_t n = t.n[0] < t.cap ? t.n[0] : t.cap;
    cr_assert(n >= 1, "%zu requests", n);
    for (size_t k = 1; k < n; k++)
        cr_assert_geq(at[k] - at[k - 1], 2000000, "qd 1: request %zu %llu ns after the one before",
                      k, (unsigned long long)(at[k] - at[k - 1]));

    o.qd = 4;
    o.thinktime_blocks = 4;
    trace_start(&t, &o);
    t.at = at;
    t.cap = 4096;
    cr_assert_eq(pinio_bench_run(&o, &r, &d), 0, "%s", d.msg);
    n = t.n[0] < t.cap ? t.n[0] : t.cap;
    cr_assert(n >= 4, "%zu requests: qd 4 issues 4 at once", n);
    for (size_t k = 3; k + 4 < n; k += 4)
        cr_assert_geq(at[k + 4] - at[k], 2000000, "qd 4: request %zu %llu ns after request %zu",
                      k + 4, (unsigned long long)(at[k + 4] - at[k]), k);
}
