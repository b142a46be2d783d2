/* pinio bench's time knobs: the ramp is left out of the figures and a rate
 * limit holds. Wall-clock checks: in suite 'timing', which scripts/test runs
 * in the plain stage only (sanitizers and valgrind slow the job thread
 * enough to miss a rate for reasons that are not the code's). Tolerances fit
 * a shared 2-core VM: a rate is only ever held down, so a miss is the
 * limiter's (too fast) or a machine too slow for 2,000 tmpfs reads a second. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <unistd.h>

#include "pinio/bench.h"

static char path[64];

static void setup(void)
{
    snprintf(path, sizeof path, "/dev/shm/pinio-bench-time-%d", (int)getpid());
    unlink(path);
}

static void teardown(void)
{
    unlink(path);
}

TestSuite(bench_timing, .init = setup, .fini = teardown);

static void on_issue(void *ctx, unsigned job, bool write, uint64_t off, uint64_t len)
{
    (void)job, (void)write, (void)off;
    *(uint64_t *)ctx += len;
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
    uint64_t issued = 0;
    pinio_bench_opts o;
    opts(&o);
    o.rw = PINIO_BENCH_RANDREAD;
    o.time_s = 0.4;
    o.ramp_time_s = 0.4;
    o.rate_iops = 5000; /* an even pace, so the bytes of each part compare */
    o.trace = on_issue;
    o.trace_ctx = &issued;
    pinio_bench_result r;
    pinio_diag d = {0};
    cr_assert_eq(pinio_bench_run(&o, &r, &d), 0, "%s", d.msg);
    cr_assert(r.seconds > 0.35 && r.seconds < 0.6, "measured %g s, the ramp included?", r.seconds);
    cr_assert(r.bytes < issued * 0.7, "counted %llu of %llu issued bytes",
              (unsigned long long)r.bytes, (unsigned long long)issued);
    cr_assert(fabs(r.iops - 5000) < 250, "iops %g after the ramp", r.iops);
}

Test(bench_timing, rate_iops_held)
{
    pinio_bench_opts o;
    opts(&o);
    o.rw = PINIO_BENCH_RANDREAD;
    o.time_s = 1;
    o.rate_iops = 2000;
    pinio_bench_result r;
    pinio_diag d = {0};
    cr_assert_eq(pinio_bench_run(&o, &r, &d), 0, "%s", d.msg);
    cr_assert(fabs(r.iops - 2000) < 2000 * 0.03, "iops %g for --rate-iops 2000", r.iops);
}

Test(bench_timing, rate_bytes_held_per_job)
{
    pinio_bench_opts o;
    opts(&o);
    o.time_s = 1;
    o.jobs = 2;
    o.bs = 16384;
    o.rate_bytes_per_s = 8 << 20; /* per job: 16 MiB/s in all */
    pinio_bench_result r;
    pinio_diag d = {0};
    cr_assert_eq(pinio_bench_run(&o, &r, &d), 0, "%s", d.msg);
    double want = 2.0 * (8 << 20);
    cr_assert(fabs(r.bytes_per_s - want) < want * 0.03, "%g B/s for 2 x 8 MiB/s", r.bytes_per_s);
}

/* --thinktime: qd 1 and 2 ms after each completion caps a job at 500 IOPS
 * (a tmpfs read takes microseconds, so it lands close below); after every
 * 4 completions at qd 4, at 2,000. Without the pause the same run does
 * tens of thousands. */
Test(bench_timing, thinktime_lowers_iops)
{
    pinio_bench_opts o;
    opts(&o);
    o.rw = PINIO_BENCH_RANDREAD;
    o.time_s = 0.5;
    o.qd = 1;
    o.thinktime_us = 2000;
    pinio_bench_result r;
    pinio_diag d = {0};
    cr_assert_eq(pinio_bench_run(&o, &r, &d), 0, "%s", d.msg);
    cr_assert(r.iops <= 500 * 1.02 && r.iops >= 500 * 0.6, "iops %g for 2 ms think", r.iops);
    o.qd = 4;
    o.thinktime_blocks = 4;
    cr_assert_eq(pinio_bench_run(&o, &r, &d), 0, "%s", d.msg);
    cr_assert(r.iops <= 2000 * 1.02 && r.iops >= 2000 * 0.5, "iops %g for 2 ms think / 4",
              r.iops);
    o.thinktime_us = 0;
    o.thinktime_blocks = 0;
    cr_assert_eq(pinio_bench_run(&o, &r, &d), 0, "%s", d.msg);
    cr_assert(r.iops > 5000, "iops %g without think time", r.iops);
}
