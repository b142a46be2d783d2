/* pinio bench's fio-style knobs, checked through the C API on a small file
 * in /dev/shm (buffered: tmpfs has no O_DIRECT): offset distributions
 * against their named law (through the trace callback), read/write mix and
 * block size split proportions. All seeded, so each run draws the same
 * requests; tolerances are far below what a missing feature would give. */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pinio/bench.h"
#include "tests/common/helpers.h"

#define BS 4096u
#define NB 1024u /* blocks of the region */

struct trace {
    uint64_t *count; /* per block */
    uint64_t n, writes, by_len[3];
};

static void on_issue(void *ctx, unsigned job, bool write, uint64_t off, uint64_t len)
{
    struct trace *t = ctx;
    (void)job;
    t->n++;
    t->writes += write;
    if (t->count && off / BS < NB)
        t->count[off / BS]++;
    t->by_len[len == 4096 ? 0 : len == 16384 ? 1 : 2]++;
}

static char path[128];

static void setup(void)
{
    char run[17];
    cr_assert_eq(t_run(run, sizeof run), 0);
    snprintf(path, sizeof path, "/dev/shm/pinio-%s-bench-feat-%d", run, (int)getpid());
    unlink(path);
}

static void teardown(void)
{
    unlink(path);
}

static void base_opts(pinio_bench_opts *o, struct trace *t)
{
    pinio_bench_opts_default(o);
    o->path = path;
    o->direct = false;
    o->fixed = false;
    o->bs = BS;
    o->qd = 8;
    o->size = (uint64_t)NB * BS;
    o->trace = on_issue;
    o->trace_ctx = t;
}

/* Largest distance between the empirical CDF of block indices and `cdf`. */
static double ks(const struct trace *t, double (*cdf)(double k, const void *arg), const void *arg)
{
    double acc = 0, worst = 0;
    for (unsigned k = 0; k < NB; k++) {
        acc += (double)t->count[k] / (double)t->n;
        double d = fabs(acc - cdf(k, arg));
        worst = d > worst ? d : worst;
    }
    return worst;
}

static double zipf_cdf(double k, const void *arg)
{
    double th = *(const double *)arg, h = 0, c = 0;
    for (unsigned i = 1; i <= NB; i++) {
        double p = pow(i, -th);
        h += p;
        if (i <= k + 1)
            c += p;
    }
    return c / h;
}

static double pareto_cdf(double k, const void *arg)
{
    double h = *(const double *)arg, e = log(h) / log(1 - h);
    double x = (k + 1) / (NB - 1);
    return x >= 1 ? 1 : pow(x, 1 / e);
}

static double normal_cdf(double k, const void *arg)
{
    double s = *(const double *)arg / 100 * NB, m = NB / 2.0;
    double lo = 0.5 * erfc(m / s / sqrt(2)), hi = 1 - lo;
    double c = 0.5 * erfc(-((k + 1) - m) / s / sqrt(2));
    return (c - lo) / (hi - lo);
}

static double uniform_cdf(double k, const void *arg)
{
    (void)arg;
    return (k + 1) / NB;
}

/* zones 60/10:30/20:10/70: piecewise linear */
static double zoned_cdf(double k, const void *arg)
{
    (void)arg;
    double x = (k + 1) / NB;
    if (x <= 0.1)
        return 0.6 * x / 0.1;
    if (x <= 0.3)
        return 0.6 + 0.3 * (x - 0.1) / 0.2;
    return 0.9 + 0.1 * (x - 0.3) / 0.7;
}

static double run_dist(pinio_bench_dist kind, double param, double (*cdf)(double, const void *))
{
    struct trace t = {0};
    t.count = calloc(NB, sizeof *t.count);
    pinio_bench_opts o;
    base_opts(&o, &t);
    o.rw = PINIO_BENCH_RANDREAD;
    o.loops = 16; /* 16384 draws */
    o.dist = kind;
    o.dist_param = param;
    static const pinio_bench_zone zones[] = {{60, 10}, {30, 20}, {10, 70}};
    if (kind == PINIO_BENCH_DIST_ZONED) {
        o.zones = zones;
        o.nzones = 3;
    }
    if (kind == PINIO_BENCH_DIST_UNIFORM)
        o.norandommap = true;
    pinio_bench_result r;
    pinio_diag d = {0};
    int rc = pinio_bench_run(&o, &r, &d);
    cr_assert_eq(rc, 0, "%s", d.msg);
    cr_assert_eq(t.n, 16u * NB);
    cr_assert_eq(r.ios, t.n);
    double k = ks(&t, cdf, &param);
    free(t.count);
    return k;
}

TestSuite(bench_features, .init = setup, .fini = teardown);

/* Kolmogorov-Smirnov distance of 16384 seeded draws: ~0.01 for the named
 * law; a uniform draw would be 0.3 to 0.6 away from each skewed one. */
Test(bench_features, zipf_shape)
{
    double k = run_dist(PINIO_BENCH_DIST_ZIPF, 1.2, zipf_cdf);
    cr_assert_lt(k, 0.02, "zipf:1.2 KS distance %g", k);
}

Test(bench_features, pareto_shape)
{
    double k = run_dist(PINIO_BENCH_DIST_PARETO, 0.3, pareto_cdf);
    cr_assert_lt(k, 0.02, "pareto:0.3 KS distance %g", k);
}

Test(bench_features, normal_shape)
{
    double k = run_dist(PINIO_BENCH_DIST_NORMAL, 10, normal_cdf);
    cr_assert_lt(k, 0.02, "normal:10%% KS distance %g", k);
}

Test(bench_features, zoned_shape)
{
    double k = run_dist(PINIO_BENCH_DIST_ZONED, 0, zoned_cdf);
    cr_assert_lt(k, 0.02, "zoned KS distance %g", k);
}

Test(bench_features, norandommap_uniform_with_repeats)
{
    struct trace t = {0};
    t.count = calloc(NB, sizeof *t.count);
    pinio_bench_opts o;
    base_opts(&o, &t);
    o.rw = PINIO_BENCH_RANDREAD;
    o.norandommap = true;
    pinio_bench_result r;
    pinio_diag d = {0};
    cr_assert_eq(pinio_bench_run(&o, &r, &d), 0, "%s", d.msg);
    unsigned untouched = 0;
    for (unsigned k = 0; k < NB; k++)
        untouched += !t.count[k];
    /* n draws over n blocks leave ~1/e untouched; the random map none */
    cr_assert(untouched > NB / 4 && untouched < NB / 2, "untouched %u", untouched);
    double unused = 0;
    cr_assert_lt(ks(&t, uniform_cdf, &unused), 0.05);
    free(t.count);
}

Test(bench_features, default_random_map_each_block_once)
{
    struct trace t = {0};
    t.count = calloc(NB, sizeof *t.count);
    pinio_bench_opts o;
    base_opts(&o, &t);
    o.rw = PINIO_BENCH_RANDREAD;
    pinio_bench_result r;
    pinio_diag d = {0};
    cr_assert_eq(pinio_bench_run(&o, &r, &d), 0, "%s", d.msg);
    for (unsigned k = 0; k < NB; k++)
        cr_assert_eq(t.count[k], 1, "block %u issued %llu times", k, (unsigned long long)t.count[k]);
    free(t.count);
}

Test(bench_features, mixed_rw_proportions)
{
    struct trace t = {0};
    pinio_bench_opts o;
    base_opts(&o, &t);
    o.rw = PINIO_BENCH_RANDRW;
    o.rwmixread = 70;
    o.loops = 4;
    pinio_bench_result r;
    pinio_diag d = {0};
    cr_assert_eq(pinio_bench_run(&o, &r, &d), 0, "%s", d.msg);
    cr_assert_eq(r.ios, 4u * NB);
    cr_assert_eq(r.read.ios + r.write.ios, r.ios);
    cr_assert_eq(r.write.ios, t.writes);
    double share = (double)r.read.ios / (double)r.ios;
    cr_assert(fabs(share - 0.70) < 0.03, "read share %g", share);
    cr_assert_eq(r.read.bytes, r.read.ios * BS);
    cr_assert_eq(r.read.lat.count, r.read.ios);
    cr_assert_eq(r.write.lat.count, r.write.ios);
}

Test(bench_features, bssplit_proportions)
{
    struct trace t = {0};
    pinio_bench_opts o;
    base_opts(&o, &t);
    static const pinio_bench_bs_weight split[] = {{4096, 50}, {16384, 30}, {65536, 20}};
    o.bssplit = split;
    o.nbssplit = 3;
    o.loops = 20;
    pinio_bench_result r;
    pinio_diag d = {0};
    cr_assert_eq(pinio_bench_run(&o, &r, &d), 0, "%s", d.msg);
    cr_assert_eq(r.ios, t.n);
    cr_assert_geq(r.bytes, 20ull * NB * BS);
    double want[3] = {0.5, 0.3, 0.2};
    for (int i = 0; i < 3; i++) {
        double share = (double)t.by_len[i] / (double)t.n;
        cr_assert(fabs(share - want[i]) < 0.03, "size %d share %g of %llu", i, share,
                  (unsigned long long)t.n);
    }
}

Test(bench_features, offset_and_io_size)
{
    struct trace t = {0};
    t.count = calloc(NB, sizeof *t.count);
    pinio_bench_opts o;
    base_opts(&o, &t);
    o.size = 256 * BS;
    o.offset = 512 * BS;
    o.io_size = 512 * BS; /* twice the area */
    pinio_bench_result r;
    pinio_diag d = {0};
    /* a file of NB blocks first */
    pinio_bench_opts mk = o;
    mk.offset = 0;
    mk.io_size = 0;
    mk.size = (uint64_t)NB * BS;
    mk.trace = NULL;
    cr_assert_eq(pinio_bench_run(&mk, &r, &d), 0, "%s", d.msg);
    cr_assert_eq(pinio_bench_run(&o, &r, &d), 0, "%s", d.msg);
    cr_assert_eq(r.bytes, 512u * BS);
    for (unsigned k = 0; k < NB; k++)
        cr_assert_eq(t.count[k], k >= 512 && k < 768 ? 2u : 0u, "block %u", k);
    free(t.count);
}

/* Sizes and per-job offsets, for --bsrange and --jobs-share. */
struct spread {
    uint64_t n, min_len, max_len, sum_len, odd; /* odd: a size or offset off the granule */
    uint64_t lens[129];                          /* by len / 512 */
    uint64_t job_min[4], job_max[4], job_bytes[4];
};

static void on_spread(void *ctx, unsigned job, bool write, uint64_t off, uint64_t len)
{
    struct spread *s = ctx;
    (void)write;
    if (!s->n++ || len < s->min_len)
        s->min_len = len;
    s->max_len = len > s->max_len ? len : s->max_len;
    s->sum_len += len;
    s->odd += len % 4096 != 0 || off % 4096 != 0;
    if (len / 512 < 129)
        s->lens[len / 512]++;
    if (job < 4) {
        if (!s->job_bytes[job] || off < s->job_min[job])
            s->job_min[job] = off;
        if (off + len > s->job_max[job])
            s->job_max[job] = off + len;
        s->job_bytes[job] += len;
    }
}

Test(bench_features, bsrange_sizes_within_and_spread)
{
    struct spread s = {0};
    pinio_bench_opts o;
    base_opts(&o, NULL);
    o.trace = on_spread;
    o.trace_ctx = &s;
    o.rw = PINIO_BENCH_RANDREAD;
    o.bsrange_min = 4096;
    o.bsrange_max = 65536;
    o.blockalign = 4096;
    o.loops = 4;
    pinio_bench_result r;
    pinio_diag d = {0};
    cr_assert_eq(pinio_bench_run(&o, &r, &d), 0, "%s", d.msg);
    cr_assert_eq(r.ios, s.n);
    cr_assert(s.min_len >= 4096 && s.max_len <= 65536, "sizes %llu..%llu",
              (unsigned long long)s.min_len, (unsigned long long)s.max_len);
    cr_assert_eq(s.odd, 0, "%llu requests off the 4 KiB granule", (unsigned long long)s.odd);
    /* all 16 sizes drawn, evenly: mean 34 KiB */
    unsigned sizes = 0;
    for (unsigned k = 0; k < 129; k++)
        sizes += s.lens[k] > 0;
    cr_assert_eq(sizes, 16);
    double mean = (double)s.sum_len / (double)s.n;
    cr_assert(fabs(mean - 34816) < 34816 * 0.06, "mean size %g of %llu", mean,
              (unsigned long long)s.n);
    /* bs and the granule: a bad range is refused before anything runs */
    o.bsrange_min = 6144;
    cr_assert_eq(pinio_bench_check(&o, &d), -EINVAL);
    o.bsrange_min = 65536 * 2;
    cr_assert_eq(pinio_bench_check(&o, &d), -EINVAL);
}

Test(bench_features, jobs_share_whole_spans_the_region)
{
    struct spread s = {0};
    pinio_bench_opts o;
    base_opts(&o, NULL);
    o.trace = on_spread;
    o.trace_ctx = &s;
    o.jobs = 4;
    o.size = 64 * BS; /* not a multiple of bs x jobs x 16: fine when whole */
    o.jobs_whole = true;
    pinio_bench_result r;
    pinio_diag d = {0};
    cr_assert_eq(pinio_bench_run(&o, &r, &d), 0, "%s", d.msg);
    cr_assert_eq(r.bytes, 4 * o.size);
    for (unsigned j = 0; j < 4; j++) {
        cr_assert_eq(s.job_min[j], 0, "job %u starts at %llu", j,
                     (unsigned long long)s.job_min[j]);
        cr_assert_eq(s.job_max[j], o.size, "job %u ends at %llu", j,
                     (unsigned long long)s.job_max[j]);
        cr_assert_eq(s.job_bytes[j], o.size);
    }
    /* split (the default): job j its quarter */
    memset(&s, 0, sizeof s);
    o.jobs_whole = false;
    cr_assert_eq(pinio_bench_run(&o, &r, &d), 0, "%s", d.msg);
    for (unsigned j = 0; j < 4; j++)
        cr_assert(s.job_min[j] == j * o.size / 4 && s.job_max[j] == (j + 1) * o.size / 4,
                  "job %u: %llu..%llu", j, (unsigned long long)s.job_min[j],
                  (unsigned long long)s.job_max[j]);
}
