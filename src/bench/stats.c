/* pinio_bench's summary: what the jobs measured, summed into the result
 * (latency percentiles, interval samples, CPU, the features in use). */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "pinio/ring.h"
#include "src/bench/job_internal.h"


static void features(const pinio_bench_opts *o, const job *j, char *out, size_t cap)
{
    /* The setup flags a reader of a benchmark cares about, named by the
     * engine's one table, in this field's style: lower case, comma-joined. */
    const unsigned shown = IORING_SETUP_SQPOLL | IORING_SETUP_IOPOLL |
                           IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN |
                           IORING_SETUP_COOP_TASKRUN;
    char flags[160] = "";
    if (j->setup_flags & shown)
        pinio_ring_flags_format(j->setup_flags & shown, flags, sizeof flags);
    for (char *c = flags; *c; c++)
        *c = *c == '|' ? ',' : (char)tolower((unsigned char)*c);
    size_t n = 0;
    out[0] = 0;
#define ADD(s) n += (size_t)snprintf(out + n, n < cap ? cap - n : 0, "%s%s", n ? "," : "", s)
    if (j->obj) { /* no ring, no file: what every request of an object run is */
        ADD("s3_range_get");
        ADD("if_match");
        return;
    }
    if (flags[0])
        ADD(flags);
    if (j->fixed)
        ADD("fixed_bufs");
    if (j->regfiles)
        ADD("reg_files");
    if (j->reg_ring)
        ADD("reg_ring");
    ADD(o->direct ? "o_direct" : "buffered");
    if (j->trim_how)
        ADD(j->trim_how == TRIM_PUNCH ? "punch_hole"
            : j->trim_how == TRIM_CMD ? "discard_cmd"
                                      : "blkdiscard_sync");
#undef ADD
}

static void fill_lat(pinio_bench_lat *l, const pinio__hist *h, const pinio_bench_opts *o)
{
    memset(l, 0, sizeof *l);
    if (!h->total)
        return;
    l->count = h->total;
    l->min_ns = h->min;
    l->p50_ns = pinio__hist_percentile(h, 50);
    l->p90_ns = pinio__hist_percentile(h, 90);
    l->p99_ns = pinio__hist_percentile(h, 99);
    l->p999_ns = pinio__hist_percentile(h, 99.9);
    l->max_ns = h->max;
    l->mean_ns = h->sum / (double)h->total;
    l->stdev_ns = pinio__hist_stdev(h);
    for (unsigned i = 0; i < o->npercentiles; i++)
        l->pct_ns[i] = pinio__hist_percentile(h, o->percentiles[i]);
}

static void fill_samples(pinio_bench_samples *out, const sstat *x)
{
    /* Summed over jobs, as fio's group statistics sum bw and iops. */
    if (!x->n)
        return;
    double mean = x->sum / (double)x->n;
    double var = x->n > 1 ? (x->sumsq - (double)x->n * mean * mean) / (double)(x->n - 1) : 0;
    out->samples += x->n;
    out->min += x->min;
    out->max += x->max;
    out->mean += mean;
    out->stdev = sqrt(out->stdev * out->stdev + (var > 0 ? var : 0));
}

/* What jobs[0 .. n) measured, summed into `res` (zeroed by the caller);
 * `h` is scratch for SUM_HISTS histograms. */
void pinio__bench_summarize(const pinio_bench_opts *o, job *jobs, unsigned n,
                            pinio_bench_result *res, pinio__hist *h)
{
    /* h: lat, slat, clat, each for reads, writes, trims and all (index NDIR) */
    for (int d = 0; d < SUM_HISTS; d++)
        pinio__hist_reset(&h[d]);
    double t0 = jobs[0].t_start, t1 = jobs[0].t_end, user = 0, sys = 0;
    uint64_t submits = 0;
    pinio_bench_dir *dirs[NDIR] = {&res->read, &res->write, &res->trim};
    for (unsigned i = 0; i < n; i++) {
        job *j = &jobs[i];
        for (int d = 0; d < NDIR; d++) {
            const pinio__hist *src[3] = {&j->hist[d], &j->slat[d], &j->clat[d]};
            for (int k = 0; k < 3; k++) {
                pinio__hist_merge(&h[(NDIR + 1) * k + d], src[k]);
                pinio__hist_merge(&h[(NDIR + 1) * k + NDIR], src[k]);
            }
            dirs[d]->bytes += j->bytes[d];
            dirs[d]->ios += j->ios[d];
            fill_samples(&dirs[d]->bw_samples, &j->bw_s[d]);
            fill_samples(&dirs[d]->iops_samples, &j->iops_s[d]);
        }
        res->verified_bytes += j->verified;
        submits += j->submits;
        res->verify_submits += j->verify_submits;
        res->s3_requests += j->s3st.requests;
        res->s3_retries += j->s3st.retries;
        res->s3_throttled += j->s3st.throttled;
        res->s3_retry_wait_s += j->s3st.retry_wait_s;
        user += j->cpu_user;
        sys += j->cpu_sys;
        t0 = j->t_start < t0 ? j->t_start : t0;
        t1 = j->t_end > t1 ? j->t_end : t1;
    }
    res->bytes = res->read.bytes + res->write.bytes + res->trim.bytes;
    res->ios = res->read.ios + res->write.ios + res->trim.ios;
    res->seconds = t1 - t0;
    res->t_first_s = t0;
    res->t_last_s = t1;
    double per_s = res->seconds > 0 ? 1 / res->seconds : 0;
    res->bytes_per_s = (double)res->bytes * per_s;
    res->iops = (double)res->ios * per_s;
    for (int d = 0; d < NDIR; d++) {
        dirs[d]->bytes_per_s = (double)dirs[d]->bytes * per_s;
        dirs[d]->iops = (double)dirs[d]->ios * per_s;
        fill_lat(&dirs[d]->lat, &h[d], o);
        fill_lat(&dirs[d]->slat, &h[(NDIR + 1) + d], o);
        fill_lat(&dirs[d]->clat, &h[2 * (NDIR + 1) + d], o);
    }
    fill_lat(&res->lat, &h[NDIR], o);
    fill_lat(&res->slat, &h[(NDIR + 1) + NDIR], o);
    fill_lat(&res->clat, &h[2 * (NDIR + 1) + NDIR], o);
    res->lat_min_ns = res->lat.min_ns;
    res->lat_p50_ns = res->lat.p50_ns;
    res->lat_p90_ns = res->lat.p90_ns;
    res->lat_p99_ns = res->lat.p99_ns;
    res->lat_p999_ns = res->lat.p999_ns;
    res->lat_max_ns = res->lat.max_ns;
    res->lat_mean_ns = res->lat.mean_ns;
    res->cpu_user_s = user;
    res->cpu_sys_s = sys;
    res->cpu_s_per_gb = res->bytes ? (user + sys) / ((double)res->bytes / 1e9) : 0;
    res->submits_per_io = res->ios ? (double)submits / (double)res->ios : 0;
    features(o, &jobs[0], res->features, sizeof res->features);
    res->batch = jobs[0].batch;
    pinio__bench_gpu_summarize(jobs, n, res);
}
