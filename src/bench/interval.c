/* pinio_bench's intervals: each job's bandwidth and IOPS samples, and the
 * time series (pinio_bench_opts::interval_fn) merged over the jobs. */
#include <stdlib.h>
#include <string.h>

#include "src/bench/job_internal.h"


/* ---- intervals: samples and the time series ----------------------------- */

static void sstat_add(sstat *x, double v)
{
    x->min = !x->n || v < x->min ? v : x->min;
    x->max = !x->n || v > x->max ? v : x->max;
    x->n++;
    x->sum += v;
    x->sumsq += v * v;
}

/* Whether the job's workload moves data in direction d. */
static bool dir_active(const job *j, int d)
{
    return j->dir == PASS_MIXED ? d < DIR_TRIM : j->dir == d;
}

/* Hands in interval k of job j (`span` ns of it covered) to the time series. */
static void iv_contribute(job *j, uint64_t k, uint64_t span, bool final)
{
    struct ivlog *L = j->gate->iv;
    struct gate *g = j->gate;
    pthread_mutex_lock(&g->mu);
    struct ivslot *S = &L->slot[k % IV_SLOTS];
    while (S->k != k && S->k != IV_FREE)
        pthread_cond_wait(&g->cv, &g->mu);
    if (S->k == IV_FREE) {
        S->k = k;
        S->span_ns = 0;
        S->final = false;
        for (int d = 0; d < NDIR; d++)
            pinio__hist_reset(&S->h[d]);
        memset(S->has, 0, NDIR * L->njobs * sizeof *S->has);
    }
    S->span_ns = span > S->span_ns ? span : S->span_ns;
    S->final |= final;
    double per_s = span ? 1e9 / (double)span : 0;
    for (int d = 0; d < NDIR; d++) {
        if (!dir_active(j, d))
            continue;
        const pinio__hist *h = &j->ihist[d];
        pinio_bench_interval *r = &S->rows[NDIR * j->idx + d];
        r->job = (int)j->idx;
        r->dir = d;
        r->time_ms = (double)(L->ramp_ns + k * L->len_ns + span) / 1e6;
        r->bytes = j->bytes[d] - j->iv_bytes0[d];
        r->ios = j->ios[d] - j->iv_ios0[d];
        r->bytes_per_s = (double)r->bytes * per_s;
        r->iops = (double)r->ios * per_s;
        r->lat_mean_ns = h->total ? h->sum / (double)h->total : 0;
        r->lat_p50_ns = pinio__hist_percentile(h, 50);
        r->lat_p99_ns = pinio__hist_percentile(h, 99);
        S->has[NDIR * j->idx + d] = true;
        pinio__hist_merge(&S->h[d], h);
    }
    L->job_k[j->idx] = k + 1;
    L->job_done[j->idx] = final;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

/* Closes the job's intervals that ended by `t`: a bandwidth and an IOPS
 * sample each, and the time series' rows. Once per interval, not per
 * request. */
void pinio__bench_iv_tick(job *j, uint64_t t)
{
    double per_s = 1e9 / (double)j->iv_len;
    while (t >= j->iv_next) {
        for (int d = 0; d < NDIR; d++)
            if (dir_active(j, d)) {
                sstat_add(&j->bw_s[d], (double)(j->bytes[d] - j->iv_bytes0[d]) * per_s);
                sstat_add(&j->iops_s[d], (double)(j->ios[d] - j->iv_ios0[d]) * per_s);
            }
        if (j->ihist) {
            iv_contribute(j, j->iv_k, j->iv_len, false);
            for (int d = 0; d < NDIR; d++)
                pinio__hist_reset(&j->ihist[d]);
        }
        for (int d = 0; d < NDIR; d++) {
            j->iv_bytes0[d] = j->bytes[d];
            j->iv_ios0[d] = j->ios[d];
        }
        j->iv_k++;
        j->iv_next += j->iv_len;
    }
}

/* The job's workload ended at `t`: its last, partial interval goes to the
 * time series (not to the samples: a sliver would skew them). */
void pinio__bench_iv_final(job *j, uint64_t t)
{
    if (!j->ihist)
        return;
    uint64_t begin = j->iv_next - j->iv_len;
    iv_contribute(j, j->iv_k, t > begin ? t - begin : 0, true);
}

/* Delivers the intervals every job handed in (or ended before), in order;
 * called with the gate's mutex held, which it drops around the callback.
 * `rows` has room for (jobs + 1) x NDIR rows. */
void pinio__bench_iv_deliver(const pinio_bench_opts *o, struct gate *g,
                             pinio_bench_interval *rows)
{
    struct ivlog *L = g->iv;
    for (;;) {
        struct ivslot *S = &L->slot[L->next % IV_SLOTS];
        bool ready = S->k == L->next;
        for (unsigned i = 0; ready && i < L->njobs; i++)
            ready = L->job_k[i] > L->next || L->job_done[i];
        if (!ready)
            return;
        size_t n = 0;
        double per_s = S->span_ns ? 1e9 / (double)S->span_ns : 0;
        for (int d = 0; d < NDIR; d++) {
            pinio_bench_interval sum = {.job = -1, .dir = d};
            bool any = false;
            for (unsigned i = 0; i < L->njobs; i++) {
                if (!S->has[NDIR * i + d])
                    continue;
                const pinio_bench_interval *r = &S->rows[NDIR * i + d];
                rows[n++] = *r;
                any = true;
                /* back to counts, then over the slot's span */
                double span_s = (r->time_ms - (double)(L->ramp_ns + S->k * L->len_ns) / 1e6) / 1e3;
                sum.bytes_per_s += r->bytes_per_s * span_s;
                sum.iops += r->iops * span_s;
                sum.bytes += r->bytes;
                sum.ios += r->ios;
            }
            if (!any)
                continue;
            sum.time_ms = (double)(L->ramp_ns + S->k * L->len_ns + S->span_ns) / 1e6;
            sum.bytes_per_s *= per_s;
            sum.iops *= per_s;
            sum.lat_mean_ns = S->h[d].total ? S->h[d].sum / (double)S->h[d].total : 0;
            sum.lat_p50_ns = pinio__hist_percentile(&S->h[d], 50);
            sum.lat_p99_ns = pinio__hist_percentile(&S->h[d], 99);
            rows[n++] = sum;
        }
        S->k = IV_FREE;
        L->next++;
        pthread_cond_broadcast(&g->cv); /* a job may wait for this slot */
        pthread_mutex_unlock(&g->mu);
        for (size_t i = 0; i < n && !L->quiet; i++)
            if (o->interval_fn(o->interval_ctx, &rows[i]))
                L->quiet = true;
        pthread_mutex_lock(&g->mu);
    }
}

void pinio__bench_iv_free(struct ivlog *L)
{
    if (!L)
        return;
    for (unsigned i = 0; i < IV_SLOTS; i++) {
        free(L->slot[i].rows);
        free(L->slot[i].has);
    }
    free(L->job_k);
    free(L->job_done);
    free(L);
}

struct ivlog *pinio__bench_iv_alloc(const pinio_bench_opts *o)
{
    struct ivlog *L = calloc(1, sizeof *L);
    if (!L)
        return NULL;
    L->njobs = o->jobs;
    L->len_ns = (uint64_t)(o->interval_ms ? o->interval_ms : 500) * 1000000ull;
    L->ramp_ns = (uint64_t)(o->ramp_time_s * 1e9);
    L->job_k = calloc(o->jobs, sizeof *L->job_k);
    L->job_done = calloc(o->jobs, sizeof *L->job_done);
    bool ok = L->job_k && L->job_done;
    for (unsigned i = 0; i < IV_SLOTS; i++) {
        L->slot[i].k = IV_FREE;
        L->slot[i].rows = calloc(NDIR * (size_t)o->jobs, sizeof *L->slot[i].rows);
        L->slot[i].has = calloc(NDIR * (size_t)o->jobs, sizeof *L->slot[i].has);
        ok = ok && L->slot[i].rows && L->slot[i].has;
    }
    if (!ok) {
        pinio__bench_iv_free(L);
        return NULL;
    }
    return L;
}
