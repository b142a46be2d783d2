/* pinio bench's latency split (slat, clat, lat), interval samples, the time
 * series callback and per-job results, through the C API on a small tmpfs
 * file. Checks that hold whatever the machine's speed (sums and orders, not
 * rates), so they run under sanitizers and valgrind too. */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pinio/bench.h"
#include "tests/common/helpers.h"

static char path[128];

static void setup(void)
{
    char run[17];
    cr_assert_eq(t_run(run, sizeof run), 0);
    snprintf(path, sizeof path, "/dev/shm/pinio-%s-bench-stats-%d", run, (int)getpid());
    unlink(path);
}

static void teardown(void)
{
    unlink(path);
}

TestSuite(bench_stats, .init = setup, .fini = teardown);

static void opts(pinio_bench_opts *o)
{
    pinio_bench_opts_default(o);
    o->path = path;
    o->direct = false;
    o->fixed = false;
    o->bs = 4096;
    o->qd = 8;
    o->size = 2 << 20;
}

static void check_split(const pinio_bench_lat *lat, const pinio_bench_lat *slat,
                        const pinio_bench_lat *clat)
{
    cr_assert(lat->count > 0);
    cr_assert_eq(slat->count, lat->count);
    cr_assert_eq(clat->count, lat->count);
    /* lat = slat + clat request by request, so the means add up */
    double sum = slat->mean_ns + clat->mean_ns;
    cr_assert(fabs(sum - lat->mean_ns) <= 1e-6 * lat->mean_ns + 1,
              "slat %.1f + clat %.1f != lat %.1f", slat->mean_ns, clat->mean_ns, lat->mean_ns);
    cr_assert(slat->max_ns <= lat->max_ns && clat->max_ns <= lat->max_ns);
    cr_assert(slat->min_ns <= lat->min_ns && clat->min_ns <= lat->min_ns);
}

Test(bench_stats, slat_clat_lat)
{
    pinio_bench_opts o;
    opts(&o);
    o.rw = PINIO_BENCH_RANDRW;
    o.batch = 4; /* some requests go with a plain submit call, some with the waiting one */
    pinio_bench_result r;
    pinio_diag d = {0};
    cr_assert_eq(pinio_bench_run(&o, &r, &d), 0, "%s", d.msg);
    check_split(&r.lat, &r.slat, &r.clat);
    check_split(&r.read.lat, &r.read.slat, &r.read.clat);
    check_split(&r.write.lat, &r.write.slat, &r.write.clat);
    /* a submission takes time: some request waited for its submit call */
    cr_assert(r.slat.max_ns > 0);
}

struct series {
    pinio_bench_interval rows[4096];
    size_t n;
};

static int on_interval(void *ctx, const pinio_bench_interval *iv)
{
    struct series *s = ctx;
    if (s->n < 4096)
        s->rows[s->n++] = *iv;
    return 0;
}

Test(bench_stats, intervals_and_jobs)
{
    struct series *s = calloc(1, sizeof *s);
    pinio_bench_result jr[2];
    pinio_bench_opts o;
    opts(&o);
    o.rw = PINIO_BENCH_RANDREAD;
    o.jobs = 2;
    o.time_s = 0.3;
    o.rate_iops = 3000; /* a bounded count, so valgrind keeps up */
    o.interval_ms = 50;
    o.interval_fn = on_interval;
    o.interval_ctx = s;
    o.job_results = jr;
    pinio_bench_result r;
    pinio_diag d = {0};
    cr_assert_eq(pinio_bench_run(&o, &r, &d), 0, "%s", d.msg);
    /* per-job results add up to the aggregate */
    cr_assert_eq(jr[0].bytes + jr[1].bytes, r.bytes);
    cr_assert_eq(jr[0].ios + jr[1].ios, r.ios);
    cr_assert_eq(jr[0].lat.count + jr[1].lat.count, r.lat.count);
    cr_assert(jr[0].bytes > 0 && jr[1].bytes > 0);
    /* rows: in time order, jobs 0 and 1 then the aggregate, reads only;
     * the aggregate rows' bytes add up to the run's */
    cr_assert(s->n >= 3 * 2, "%zu rows", s->n);
    double agg = 0, per_job = 0, last = 0;
    size_t k = 0;
    for (size_t i = 0; i < s->n; i++) {
        const pinio_bench_interval *v = &s->rows[i];
        cr_assert_eq(v->dir, 0);
        cr_assert(v->job >= -1 && v->job <= 1);
        cr_assert(v->time_ms >= last - 1e-9, "row %zu at %g after %g", i, v->time_ms, last);
        double span_s = (v->time_ms - 50.0 * (double)k) / 1e3;
        cr_assert(span_s > -1e-9 && span_s <= 0.050 + 1e-9, "span %g", span_s);
        if (v->job == -1) {
            agg += v->bytes_per_s * span_s;
            last = v->time_ms;
            k++;
            if (v->iops > 0)
                cr_assert(v->lat_p50_ns > 0 && v->lat_p99_ns >= v->lat_p50_ns);
        } else {
            per_job += v->bytes_per_s * span_s;
        }
    }
    cr_assert(fabs(agg - (double)r.bytes) < 1e-6 * (double)r.bytes + 1, "rows %.0f, run %llu",
              agg, (unsigned long long)r.bytes);
    cr_assert(fabs(per_job - (double)r.bytes) < 1e-6 * (double)r.bytes + 1);
    /* samples: full intervals only, one per 50 ms per job, summed over jobs.
     * How many depends on how far past --time the run went (a loaded
     * machine, valgrind), so they are counted against the rows: a job's rows
     * are its full intervals, ending at 50, 100, ... ms, then its last,
     * partial one (no sample: a sliver would skew them). Each job runs
     * --time at least, so 0.3 s gives it 6 full intervals or more. */
    size_t rows_of[2] = {0, 0};
    double end_of[2] = {0, 0};
    for (size_t i = 0; i < s->n; i++) {
        const pinio_bench_interval *v = &s->rows[i];
        if (v->job < 0)
            continue;
        size_t j = (size_t)v->job;
        if (rows_of[j]) /* the row before was a full one */
            cr_assert(fabs(end_of[j] - 50.0 * (double)rows_of[j]) < 1e-6,
                      "job %zu row %zu ends at %g ms", j, rows_of[j], end_of[j]);
        rows_of[j]++;
        end_of[j] = v->time_ms;
    }
    for (size_t j = 0; j < 2; j++) {
        cr_assert(rows_of[j] >= 6 + 1, "job %zu: %zu rows", j, rows_of[j]);
        cr_assert(end_of[j] <= 50.0 * (double)rows_of[j] + 1e-6, "job %zu: last row at %g ms",
                  j, end_of[j]);
        cr_assert_eq(jr[j].read.bw_samples.samples, rows_of[j] - 1, "job %zu: %llu samples, %zu rows",
                     j, (unsigned long long)jr[j].read.bw_samples.samples, rows_of[j]);
    }
    cr_assert_eq(r.read.bw_samples.samples, rows_of[0] + rows_of[1] - 2, "%llu samples",
                 (unsigned long long)r.read.bw_samples.samples);
    cr_assert(r.read.bw_samples.min <= r.read.bw_samples.mean &&
              r.read.bw_samples.mean <= r.read.bw_samples.max);
    cr_assert_eq(r.write.bw_samples.samples, 0);
    free(s);
}

Test(bench_stats, interval_range)
{
    pinio_bench_opts o;
    opts(&o);
    o.interval_ms = 3600001;
    pinio_diag d = {0};
    cr_assert_eq(pinio_bench_check(&o, &d), -EINVAL);
    cr_assert(strstr(d.msg, "--log-interval"), "%s", d.msg);
}

/* lat_hist: the histograms the result's lat, slat and clat come from (what
 * pinio_mpi_bench_run() sums over ranks): every request counted once in
 * each, the percentiles of the counts the result's own, and the run's
 * clock span its seconds. */
Test(bench_stats, lat_hist_out)
{
    pinio_bench_opts o;
    opts(&o);
    o.rw = PINIO_BENCH_RANDRW;
    static const double pcts[] = {25, 99.5};
    o.percentiles = pcts;
    o.npercentiles = 2;
    uint64_t *h = calloc(3 * PINIO_BENCH_HIST_BUCKETS, sizeof *h);
    cr_assert(h);
    o.lat_hist = h;
    pinio_bench_result r;
    pinio_diag d = {0};
    cr_assert_eq(pinio_bench_run(&o, &r, &d), 0, "%s", d.msg);
    const pinio_bench_lat *lats[3] = {&r.lat, &r.slat, &r.clat};
    for (int k = 0; k < 3; k++) {
        const uint64_t *c = h + (size_t)k * PINIO_BENCH_HIST_BUCKETS;
        const pinio_bench_lat *l = lats[k];
        uint64_t total = 0, lo = UINT64_MAX, hi = 0;
        for (unsigned i = 0; i < PINIO_BENCH_HIST_BUCKETS; i++) {
            total += c[i];
            if (c[i] && lo == UINT64_MAX)
                lo = i;
            if (c[i])
                hi = i;
        }
        cr_assert_eq(total, r.ios, "histogram %d: %llu requests of %llu", k,
                     (unsigned long long)total, (unsigned long long)r.ios);
        /* the exact min and max fall in the first and last buckets used */
        cr_assert(l->min_ns <= pinio_bench_hist_high((unsigned)lo));
        cr_assert(lo == 0 || l->min_ns > pinio_bench_hist_high((unsigned)lo - 1));
        cr_assert(l->max_ns <= pinio_bench_hist_high((unsigned)hi));
        cr_assert(hi == 0 || l->max_ns > pinio_bench_hist_high((unsigned)hi - 1));
        cr_assert_eq(pinio_bench_hist_percentile(c, l->max_ns, 50), l->p50_ns);
        cr_assert_eq(pinio_bench_hist_percentile(c, l->max_ns, 90), l->p90_ns);
        cr_assert_eq(pinio_bench_hist_percentile(c, l->max_ns, 99), l->p99_ns);
        cr_assert_eq(pinio_bench_hist_percentile(c, l->max_ns, 99.9), l->p999_ns);
        cr_assert_eq(pinio_bench_hist_percentile(c, l->max_ns, 25), l->pct_ns[0]);
        cr_assert_eq(pinio_bench_hist_percentile(c, l->max_ns, 99.5), l->pct_ns[1]);
        cr_assert_eq(pinio_bench_hist_percentile(c, l->max_ns, 100), l->max_ns);
    }
    cr_assert_eq(pinio_bench_hist_percentile(NULL, 5, 50), 0);
    cr_assert_eq(pinio_bench_hist_high(PINIO_BENCH_HIST_BUCKETS), UINT64_MAX);
    cr_assert_eq(pinio_bench_hist_high(0), 0);
    cr_assert_eq(pinio_bench_hist_high(PINIO_BENCH_HIST_BUCKETS - 1), UINT64_MAX);
    /* the span the seconds are, on CLOCK_MONOTONIC */
    cr_assert(r.t_first_s > 0 && r.t_last_s >= r.t_first_s);
    cr_assert_eq(r.t_last_s - r.t_first_s, r.seconds);
    free(h);
}
