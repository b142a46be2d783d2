/*
 * pinio_mpi_bench_run(): pinio_bench_run() on every rank of a communicator,
 * one result for the job on rank 0 (IOR's aggregate, elbencho's first and
 * last finisher).
 *
 * Why the job's bandwidth is computed here and not summed from the ranks'
 * own figures: each rank's bytes/s is over its own run, and runs do not
 * line up (a rank starts late, another ends early), so a sum overstates
 * the job, which is exactly fio's multi-client mistake. The only honest
 * figure is total bytes over (last end - first start), which needs every
 * rank's start and end on one clock.
 *
 * The clock: CLOCK_MONOTONIC on each rank, put on rank 0's by an offset
 * measured with a ping exchange (Cristian's method, the least-delay round
 * of several). MPI_Wtime is not used even where MPI_WTIME_IS_GLOBAL says
 * it is synchronised: Open MPI and MPICH set that attribute false on
 * Linux, and where it is true its precision is the MPI's, not ours; the
 * run's own timestamps are CLOCK_MONOTONIC (bench's), so offsets of that
 * clock are what is needed. Ranks on rank 0's host share one kernel's
 * CLOCK_MONOTONIC: their offset is 0 exactly, not a measurement with an
 * error of half a round trip (unless clock_ping asks for it, for tests).
 *
 * Percentiles over the job are computed from the ranks' histograms summed
 * bucket by bucket (MPI_Reduce): averaging percentiles is wrong for every
 * distribution that is not the same on every rank.
 *
 * The time series: each rank's intervals start at its own run's start, so
 * the ranks' grids are offset from one another (by the barrier's skew at
 * least). A rank's interval is put on the common clock by its end and
 * counted whole in the job's interval where it ended, rather than split
 * between two by time: splitting would guess where within an interval the
 * bytes came, while the whole keeps every byte and request counted once,
 * so the job's series sums to the job's bytes exactly.
 *
 * This file uses the public pinio API only (scripts/check-layers).
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pinio/mpi.h"
#include "mpi_internal.h"

enum { TAG_PROGRESS = 4101, TAG_PING = 4102, TAG_STOP = 4103, PING_ROUNDS = 8, HOST_LEN = 64 };

/* What a rank sends rank 0 as it runs: its latest counts; done = 1 is the
 * last message (sent after its run, whatever its outcome, `rc` its code). */
typedef struct live_msg {
    uint64_t bytes, ops, done;
    int64_t rc;
} live_msg;

/* What a rank sends rank 0 after its run (MPI_BYTE: one build on every
 * rank, so one layout). */
typedef struct rank_rec {
    pinio_mpi_bench_rank r;
    double t_first, t_last; /* its own CLOCK_MONOTONIC */
    pinio_bench_lat slat, clat;
    uint64_t dir_bytes[3], dir_ios[3];
} rank_rec;

/* The three histograms of pinio_bench_opts::lat_hist. */
#define NHIST (3 * PINIO_BENCH_HIST_BUCKETS)

/* The options that must be rank 0's on every rank: what shapes the
 * workload and the layout. */
typedef struct agreed {
    int rw, layout, reorder, clock_ping, series;
    unsigned interval_ms;
    uint64_t bs, size, offset, io_size;
    unsigned qd, jobs, loops;
    double time_s;
} agreed;

typedef struct live {
    MPI_Comm comm;
    int rank, n;
    const pinio_bench_opts *user;    /* the caller's o: its progress runs on every rank */
    const pinio_mpi_bench_opts *mo;
    MPI_Request req;
    live_msg out;
    live_msg *last;                  /* rank 0: each rank's latest */
    int *done;                       /* rank 0: the ranks whose last message came */
    /* A rank that fails (or is stopped by its caller) while the others
     * run would leave them running to the end of a time-based job: rank 0
     * tells every rank to stop as soon as it hears of it. */
    bool failed_seen;                /* rank 0: a rank's last message carried a failure */
    int stop_sent;                   /* rank 0: the stop went out (broadcast after) */
    MPI_Request *stop_req;           /* rank 0: one per rank */
    int stop_one;                    /* the stop message's payload */
    bool stopped;                    /* this rank's run was stopped by the job's stop */
    uint64_t total_bytes;            /* the job's, for a one-pass run */
} live;

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void pinio_mpi_bench_opts_init(pinio_mpi_bench_opts *o, size_t size)
{
    if (!o || size < sizeof(size_t))
        return;
    memset(o, 0, size);
    o->struct_size = size;
}

void pinio_mpi_bench_result_free(pinio_mpi_bench_result *res)
{
    if (!res)
        return;
    free(res->ranks);
    free(res->lat_hist);
    res->ranks = NULL;
    res->lat_hist = NULL;
}

/* Rank 0: every other rank is told to stop (once; received by each, in
 * its progress callback or after its run, live_end()). */
static void send_stop(live *l)
{
    if (l->stop_sent)
        return;
    l->stop_sent = 1;
    l->stop_one = 1;
    for (int r = 1; r < l->n; r++)
        MPI_Isend(&l->stop_one, 1, MPI_INT, r, TAG_STOP, l->comm, &l->stop_req[r]);
}

/* Rank 0 takes in every message that has arrived; `until_done`: also
 * waits for each rank's last one, so that no send is left unmatched. */
static void live_drain(live *l, bool until_done)
{
    for (;;) {
        int flag = 0;
        MPI_Status st;
        if (until_done) {
            int pending = 0;
            for (int r = 1; r < l->n; r++)
                pending += !l->done[r];
            if (!pending)
                return;
            MPI_Probe(MPI_ANY_SOURCE, TAG_PROGRESS, l->comm, &st);
            flag = 1;
        } else if (MPI_Iprobe(MPI_ANY_SOURCE, TAG_PROGRESS, l->comm, &flag, &st) != MPI_SUCCESS ||
                   !flag) {
            return;
        }
        live_msg m;
        if (MPI_Recv(&m, (int)sizeof m, MPI_BYTE, st.MPI_SOURCE, TAG_PROGRESS, l->comm,
                     MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return;
        if (st.MPI_SOURCE > 0 && st.MPI_SOURCE < l->n) {
            if (m.done)
                l->done[st.MPI_SOURCE] = 1;
            else
                l->last[st.MPI_SOURCE] = m;
            l->failed_seen |= m.done && m.rc;
            if (until_done && l->failed_seen)
                send_stop(l); /* rank 0's run is over: the others' may not be */
        }
    }
}

/* Every rank: the caller's own callback (how a CLI's Ctrl-C stops a rank),
 * then its counts to rank 0, one message in flight at most (a slow rank 0
 * skips updates instead of queueing them); rank 0 shows the job's. */
static int live_progress(void *ctx, const pinio_progress *p)
{
    live *l = ctx;
    int stop = l->user->progress ? l->user->progress(l->user->progress_ctx, p) : 0;
    if (l->rank != 0) {
        int told = 0;
        MPI_Iprobe(0, TAG_STOP, l->comm, &told, MPI_STATUS_IGNORE);
        if (told) {
            MPI_Recv(&l->stop_one, 1, MPI_INT, 0, TAG_STOP, l->comm, MPI_STATUS_IGNORE);
            l->stopped = true;
            return 1;
        }
        int free_slot = 1;
        if (l->req != MPI_REQUEST_NULL)
            MPI_Test(&l->req, &free_slot, MPI_STATUS_IGNORE);
        if (free_slot) {
            l->out = (live_msg){p->done_bytes, p->done_ops, 0, 0};
            MPI_Isend(&l->out, (int)sizeof l->out, MPI_BYTE, 0, TAG_PROGRESS, l->comm, &l->req);
        }
        return stop;
    }
    live_drain(l, false);
    l->last[0] = (live_msg){p->done_bytes, p->done_ops, 0, 0};
    if (l->failed_seen) { /* another rank failed: the job stops, rank 0 too */
        send_stop(l);
        l->stopped = true;
        return 1;
    }
    if (!l->mo->progress)
        return stop;
    pinio_progress all = *p;
    all.done_bytes = all.done_ops = 0;
    for (int r = 0; r < l->n; r++) {
        all.done_bytes += l->last[r].bytes;
        all.done_ops += l->last[r].ops;
        if (l->mo->live_rank_bytes)
            l->mo->live_rank_bytes[r] = l->last[r].bytes;
    }
    all.total_bytes = p->total_bytes ? l->total_bytes : 0;
    if (all.total_bytes && all.done_bytes > all.total_bytes)
        all.total_bytes = all.done_bytes;
    return l->mo->progress(l->mo->progress_ctx, &all) || stop;
}

/* After the run, on every rank whatever its outcome (`rc`): the last
 * message, then rank 0 takes every rank's and, when it stopped the job,
 * every rank takes its stop: nothing is left in flight. A failure of rank
 * 0's own stops the others before it waits for them. */
static void live_end(live *l, int rc)
{
    if (l->rank != 0) {
        if (l->req != MPI_REQUEST_NULL)
            MPI_Wait(&l->req, MPI_STATUS_IGNORE);
        l->out = (live_msg){0, 0, 1, l->stopped ? 0 : rc};
        MPI_Send(&l->out, (int)sizeof l->out, MPI_BYTE, 0, TAG_PROGRESS, l->comm);
    } else {
        if (rc && !l->stopped)
            send_stop(l);
        live_drain(l, true);
        for (int r = 1; l->stop_sent && r < l->n; r++)
            MPI_Wait(&l->stop_req[r], MPI_STATUS_IGNORE);
    }
    MPI_Bcast(&l->stop_sent, 1, MPI_INT, 0, l->comm);
    if (l->rank != 0 && l->stop_sent && !l->stopped)
        MPI_Recv(&l->stop_one, 1, MPI_INT, 0, TAG_STOP, l->comm, MPI_STATUS_IGNORE);
}

/* The code a rank brings to the agreement: a run stopped because another
 * rank failed is no failure of its own (-ECANCELED would otherwise sort
 * before the real one), unless no rank failed otherwise. */
static int own_code(job *j, const live *l, int rc)
{
    int real = rc && !(l->stopped && rc == -ECANCELED), any = 0;
    MPI_Allreduce(&real, &any, 1, MPI_INT, MPI_MAX, j->comm);
    return any && !real ? 0 : rc;
}

/* "$rank"/"${rank}" and "$host"/"${host}" in `in` replaced. 0, -ENAMETOOLONG,
 * or -EINVAL for another "$NAME" (a typo must not name a file "$rnak"). */
static int substitute(const char *in, int rank, const char *host, char *out, size_t cap,
                      pinio_diag *d)
{
    size_t n = 0;
    for (const char *p = in; *p;) {
        char num[16];
        const char *val = NULL;
        size_t skip = 0;
        if (*p == '$') {
            static const char *const keys[] = {"rank", "host", "{rank}", "{host}"};
            for (int k = 0; k < 4 && !val; k++)
                if (!strncmp(p + 1, keys[k], strlen(keys[k]))) {
                    skip = 1 + strlen(keys[k]);
                    snprintf(num, sizeof num, "%d", rank);
                    val = k % 2 ? host : num;
                }
            if (!val) {
                pinio_diag_set(d, -EINVAL, "bench: %s: unknown variable at '%s' (only $rank "
                                           "and $host)", in, p);
                return -EINVAL;
            }
        }
        size_t len = val ? strlen(val) : 1;
        if (n + len >= cap) {
            pinio_diag_set(d, -ENAMETOOLONG, "bench: %s: too long with $rank and $host "
                                             "replaced", in);
            return -ENAMETOOLONG;
        }
        memcpy(out + n, val ? val : p, len);
        n += len;
        p += val ? skip : 1;
    }
    out[n] = '\0';
    return 0;
}

static bool is_write_only(pinio_bench_rw rw)
{
    return rw == PINIO_BENCH_WRITE || rw == PINIO_BENCH_RANDWRITE;
}

static bool is_object(const char *p)
{
    return p && !strncmp(p, "s3://", 5);
}

/* Reads (and trims) of a missing file make it inside pinio_bench_run(),
 * which would put one rank's fill into the job's time while the others
 * run: the file is made first, by one short run, so the barrier starts
 * every rank on its workload. SAME and SHARED: one file, rank 0 makes it. */
static int prepare(const pinio_bench_opts *x, const pinio_mpi_bench_opts *mo, uint64_t base,
                   int rank, int n, pinio_diag *d)
{
    bool one_file = mo->layout != PINIO_MPI_BENCH_PER_RANK;
    bool writes = x->rw != PINIO_BENCH_READ && x->rw != PINIO_BENCH_RANDREAD;
    /* Writers of one file: a missing one would be made by each under its
     * own temporary name, and each rank's check that the file is bench's
     * would see the others' writes as a change. Rank 0 alone checks (and
     * makes) it, with a short write run; the ranks then write with
     * allow_file_overwrite (pinio_mpi_bench_run()). */
    if (is_object(x->path) || (one_file && rank != 0) ||
        (is_write_only(x->rw) && !one_file))
        return 0;
    const char *const *paths = x->npaths ? x->paths : &x->path;
    unsigned np = x->npaths ? x->npaths : 1;
    bool missing = false;
    struct stat st;
    for (unsigned i = 0; i < np; i++)
        missing |= stat(paths[i], &st) != 0 && errno == ENOENT;
    if (!missing && !(one_file && writes))
        return 0;
    pinio_bench_opts p = *x;
    p.time_s = p.ramp_time_s = p.startdelay_s = 0;
    p.loops = 0;
    p.rate_bytes_per_s = p.rate_iops = p.thinktime_us = 0;
    /* the caller's callbacks and outputs are the job's, not this pass's */
    p.progress = NULL, p.interval_fn = NULL, p.trace = NULL, p.trace_file = NULL;
    p.job_results = NULL, p.files_out = NULL, p.lat_hist = NULL;
    p.verify_only = p.verify = false;
    p.faults = "";
    if (mo->layout == PINIO_MPI_BENCH_SHARED) {
        p.offset = base; /* the whole file: every rank's share */
        p.size *= (uint64_t)n;
    }
    if (writes && !is_write_only(x->rw) && missing)
        p.rw = PINIO_BENCH_READ; /* made and filled, as the run itself would */
    else if (writes)
        p.rw = PINIO_BENCH_WRITE;
    /* One request per job moves little; bssplit and bsrange draw their
     * sizes, and a missing file written is made only whole. */
    p.io_size = p.bssplit || p.bsrange_max || (p.rw == PINIO_BENCH_WRITE && missing)
                    ? 0
                    : p.bs * p.jobs * (p.npaths ? p.npaths : 1);
    pinio_bench_result r;
    return pinio_bench_run(&p, &r, d);
}

/* Rank 0 and rank r: PING_ROUNDS round trips; r's offset from the one with
 * the least delay (Cristian): the reply was stamped within the round trip,
 * so the offset's error is at most half of it. */
static int clock_offsets(job *j, const bool *ping, int64_t *off, uint64_t *rtt)
{
    for (int r = 1; r < j->n; r++) {
        if (!ping[r])
            continue;
        for (int k = 0; k < PING_ROUNDS; k++) {
            uint64_t t;
            if (j->rank == 0) {
                uint64_t a = mono_ns(), b;
                if (MPI_Send(&a, 1, MPI_UINT64_T, r, TAG_PING, j->comm) != MPI_SUCCESS ||
                    MPI_Recv(&b, 1, MPI_UINT64_T, r, TAG_PING, j->comm, MPI_STATUS_IGNORE) !=
                        MPI_SUCCESS)
                    return pinio_diag_set(&j->local, -EPROTO, "bench: clock ping with rank %d "
                                                              "failed", r), -EPROTO;
                uint64_t c = mono_ns();
                if (k == 0 || c - a < rtt[r]) {
                    rtt[r] = c - a;
                    off[r] = (int64_t)(b - a) - (int64_t)((c - a) / 2);
                }
            } else if (j->rank == r) {
                if (MPI_Recv(&t, 1, MPI_UINT64_T, 0, TAG_PING, j->comm, MPI_STATUS_IGNORE) !=
                        MPI_SUCCESS ||
                    (t = mono_ns(), MPI_Send(&t, 1, MPI_UINT64_T, 0, TAG_PING, j->comm)) !=
                        MPI_SUCCESS)
                    return pinio_diag_set(&j->local, -EPROTO, "bench: clock ping with rank 0 "
                                                              "failed"), -EPROTO;
            }
        }
    }
    return 0;
}

/* This rank's options: its targets (layout, reorder) in `names`. */
static int place(job *j, const pinio_bench_opts *o, const pinio_mpi_bench_opts *mo,
                 const char *hosts, int data_of, pinio_bench_opts *x, char (*names)[256],
                 const char **paths)
{
    *x = *o;
    x->job_results = NULL;
    if (mo->layout == PINIO_MPI_BENCH_SHARED) {
        if (!o->size)
            return pinio_diag_set(&j->local, -EINVAL, "bench: a shared target split by rank "
                                                      "needs --size (each rank's share)"),
                   -EINVAL;
        x->offset = o->offset + (uint64_t)data_of * o->size;
    }
    unsigned np = o->npaths ? o->npaths : 1;
    for (unsigned i = 0; mo->layout != PINIO_MPI_BENCH_PER_RANK && i < np; i++) {
        const char *in = o->npaths ? o->paths[i] : o->path;
        if (in && (strstr(in, "$rank") || strstr(in, "${rank}") || strstr(in, "$host") ||
                   strstr(in, "${host}")))
            return pinio_diag_set(&j->local, -EINVAL, "bench: %s: $rank and $host name each "
                                  "rank's own file: the per-rank layout, not %s", in,
                                  mo->layout == PINIO_MPI_BENCH_SAME ? "same" : "shared"),
                   -EINVAL;
    }
    if (mo->layout != PINIO_MPI_BENCH_PER_RANK)
        return 0;
    for (unsigned i = 0; i < np; i++) {
        const char *in = o->npaths ? o->paths[i] : o->path;
        int e = substitute(in ? in : "", data_of, hosts + (size_t)data_of * HOST_LEN, names[i],
                           256, &j->local);
        if (e)
            return e;
        paths[i] = names[i];
    }
    if (o->npaths)
        x->paths = paths;
    x->path = paths[0];
    return 0;
}

/* One latency (h: 0 lat, 1 slat, 2 clat) over every rank's requests:
 * percentiles from the summed histogram, min and max over the ranks', the
 * mean and the standard deviation pooled exactly from each rank's count,
 * mean and standard deviation. */
static void merge_lat(const rank_rec *rec, int n, int h, const uint64_t *hist,
                      const pinio_bench_opts *o, pinio_bench_lat *l)
{
    memset(l, 0, sizeof *l);
    l->min_ns = UINT64_MAX;
    double sum = 0, sumsq = 0;
    for (int r = 0; r < n; r++) {
        const pinio_bench_lat *k = h == 0 ? &rec[r].r.lat : h == 1 ? &rec[r].slat : &rec[r].clat;
        double c = (double)k->count;
        l->count += k->count;
        if (k->count && k->min_ns < l->min_ns)
            l->min_ns = k->min_ns;
        if (k->max_ns > l->max_ns)
            l->max_ns = k->max_ns;
        sum += k->mean_ns * c;
        sumsq += (c > 1 ? (c - 1) * k->stdev_ns * k->stdev_ns : 0) + c * k->mean_ns * k->mean_ns;
    }
    if (!l->count) {
        l->min_ns = 0;
        return;
    }
    double nn = (double)l->count, mean = sum / nn;
    double var = l->count > 1 ? (sumsq - nn * mean * mean) / (nn - 1) : 0;
    l->mean_ns = mean;
    l->stdev_ns = var > 0 ? sqrt(var) : 0;
    l->p50_ns = pinio_bench_hist_percentile(hist, l->max_ns, 50);
    l->p90_ns = pinio_bench_hist_percentile(hist, l->max_ns, 90);
    l->p99_ns = pinio_bench_hist_percentile(hist, l->max_ns, 99);
    l->p999_ns = pinio_bench_hist_percentile(hist, l->max_ns, 99.9);
    for (unsigned i = 0; i < o->npercentiles && i < PINIO_BENCH_MAX_PCT; i++)
        l->pct_ns[i] = pinio_bench_hist_percentile(hist, l->max_ns, o->percentiles[i]);
}

/* The job's figures from every rank's record, on rank 0. */
static void combine(const rank_rec *rec, int n, const int64_t *off, const uint64_t *rtt,
                    const uint64_t *hist, const pinio_bench_opts *o, pinio_mpi_bench_result *res)
{
    pinio_bench_result *t = &res->job;
    double first = INFINITY, last = -INFINITY, first_end = INFINITY;
    double user = 0, sys = 0;
    for (int r = 0; r < n; r++) {
        double sh = (double)off[r] * 1e-9;
        double s = rec[r].t_first - sh, e = rec[r].t_last - sh;
        first = s < first ? s : first;
        last = e > last ? e : last;
        first_end = e < first_end ? e : first_end;
    }
    t->bytes = t->ios = 0;
    t->s3_requests = t->s3_retries = t->s3_throttled = 0;
    t->s3_retry_wait_s = 0;
    pinio_bench_dir *dirs[3] = {&t->read, &t->write, &t->trim};
    for (int d = 0; d < 3; d++)
        memset(dirs[d], 0, sizeof *dirs[d]);
    for (int r = 0; r < n; r++) {
        pinio_mpi_bench_rank *k = &res->ranks[r];
        *k = rec[r].r;
        double sh = (double)off[r] * 1e-9;
        k->start_s = rec[r].t_first - sh - first;
        k->end_s = rec[r].t_last - sh - first;
        k->clock_offset_s = sh;
        k->clock_rtt_s = (double)rtt[r] * 1e-9;
        double secs = rec[r].t_last - rec[r].t_first;
        k->bytes_per_s = secs > 0 ? (double)k->bytes / secs : 0;
        k->iops = secs > 0 ? (double)k->ios / secs : 0;
        t->bytes += k->bytes;
        t->ios += k->ios;
        t->s3_requests += k->s3_requests;
        t->s3_retries += k->s3_retries;
        t->s3_throttled += k->s3_throttled;
        for (int d = 0; d < 3; d++) {
            dirs[d]->bytes += rec[r].dir_bytes[d];
            dirs[d]->ios += rec[r].dir_ios[d];
        }
        user += k->cpu_user_s;
        sys += k->cpu_sys_s;
        res->sum_rank_bytes_per_s += k->bytes_per_s;
    }
    t->t_first_s = first;
    t->t_last_s = last;
    t->seconds = last - first;
    double per_s = t->seconds > 0 ? 1 / t->seconds : 0;
    t->bytes_per_s = (double)t->bytes * per_s;
    t->iops = (double)t->ios * per_s;
    for (int d = 0; d < 3; d++) {
        dirs[d]->bytes_per_s = (double)dirs[d]->bytes * per_s;
        dirs[d]->iops = (double)dirs[d]->ios * per_s;
    }
    t->cpu_user_s = user;
    t->cpu_sys_s = sys;
    t->cpu_s_per_gb = t->bytes ? (user + sys) / ((double)t->bytes / 1e9) : 0;
    /* Latencies over every rank's requests: the summed histograms. */
    pinio_bench_lat *outs[3] = {&t->lat, &t->slat, &t->clat};
    for (int h = 0; h < 3; h++)
        merge_lat(rec, n, h, hist + (size_t)h * PINIO_BENCH_HIST_BUCKETS, o, outs[h]);
    const pinio_bench_lat *all = &t->lat; /* the fields of schema 1, the same figures */
    t->lat_min_ns = all->min_ns, t->lat_max_ns = all->max_ns, t->lat_mean_ns = all->mean_ns;
    t->lat_p50_ns = all->p50_ns, t->lat_p90_ns = all->p90_ns;
    t->lat_p99_ns = all->p99_ns, t->lat_p999_ns = all->p999_ns;
    /* A direction's latencies are the merged ones when it is the only
     * direction; a mixed workload's are not merged per direction (the
     * histograms come back over every direction), so they are left empty
     * rather than rank 0's. */
    for (int d = 0; d < 3; d++) {
        memset(&dirs[d]->lat, 0, sizeof dirs[d]->lat);
        memset(&dirs[d]->slat, 0, sizeof dirs[d]->slat);
        memset(&dirs[d]->clat, 0, sizeof dirs[d]->clat);
        memset(&dirs[d]->bw_samples, 0, sizeof dirs[d]->bw_samples);
        memset(&dirs[d]->iops_samples, 0, sizeof dirs[d]->iops_samples);
        if (dirs[d]->ios == t->ios && t->ios) {
            dirs[d]->lat = t->lat;
            dirs[d]->slat = t->slat;
            dirs[d]->clat = t->clat;
        }
    }
    /* Stonewall: every rank's bytes when the first rank ended, at its own
     * mean rate (a rank's run is not sampled finer than its totals). */
    res->first_done_s = first_end - first;
    res->last_done_s = t->seconds;
    double at = 0;
    for (int r = 0; r < n; r++) {
        const pinio_mpi_bench_rank *k = &res->ranks[r];
        double len = k->end_s - k->start_s, upto = res->first_done_s - k->start_s;
        double frac = len <= 0 || upto >= len ? 1 : upto <= 0 ? 0 : upto / len;
        at += (double)k->bytes * frac;
    }
    res->first_done_bytes_per_s = res->first_done_s > 0 ? at / res->first_done_s : 0;
}

/* The record this rank sends rank 0. */
static void record(const pinio_bench_result *r, const pinio_bench_opts *x, int rank, int data_of,
                   const char *host, rank_rec *out)
{
    memset(out, 0, sizeof *out);
    pinio_mpi_bench_rank *k = &out->r;
    k->rank = rank;
    k->data_of = data_of;
    snprintf(k->host, sizeof k->host, "%s", host);
    snprintf(k->path, sizeof k->path, "%s", x->path ? x->path : "");
    k->offset = x->offset;
    k->bytes = r->bytes;
    k->ios = r->ios;
    k->cpu_user_s = r->cpu_user_s;
    k->cpu_sys_s = r->cpu_sys_s;
    k->lat = r->lat;
    k->s3_requests = r->s3_requests;
    k->s3_retries = r->s3_retries;
    k->s3_throttled = r->s3_throttled;
    k->created = r->created;
    out->t_first = r->t_first_s;
    out->t_last = r->t_last_s;
    out->slat = r->slat;
    out->clat = r->clat;
    const pinio_bench_dir *dirs[3] = {&r->read, &r->write, &r->trim};
    for (int d = 0; d < 3; d++) {
        out->dir_bytes[d] = dirs[d]->bytes;
        out->dir_ios[d] = dirs[d]->ios;
    }
}

/* Rank 0's options against this rank's: one mismatch named. */
static int agree_opts(job *j, const pinio_bench_opts *o, const pinio_mpi_bench_opts *mo,
                      bool *series)
{
    agreed me = {(int)o->rw, (int)mo->layout, mo->reorder, mo->clock_ping,
                 o->interval_fn != NULL, o->interval_ms ? o->interval_ms : 500,
                 o->bs, o->size, o->offset, o->io_size, o->qd, o->jobs, o->loops, o->time_s};
    agreed r0 = me;
    int e = MPI_Bcast(&r0, (int)sizeof r0, MPI_BYTE, 0, j->comm);
    if (e != MPI_SUCCESS)
        return pinio__mpi_fail(j, e, "MPI_Bcast (options)");
    /* rank 0 alone asks for the series; the others only keep theirs */
    *series = r0.series != 0;
    const char *what = r0.rw != me.rw ? "the workload (--rw)"
                       : r0.layout != me.layout || r0.reorder != me.reorder ||
                               r0.clock_ping != me.clock_ping
                           ? "--mpi's layout or --mpi-reorder"
                       : r0.bs != me.bs ? "--bs"
                       : r0.size != me.size ? "--size"
                       : r0.offset != me.offset ? "--offset"
                       : r0.io_size != me.io_size || r0.loops != me.loops ? "--io-size or --loops"
                       : r0.qd != me.qd ? "--qd"
                       : r0.jobs != me.jobs ? "--jobs"
                       : r0.series && r0.interval_ms != me.interval_ms ? "--log-interval"
                       : memcmp(&r0.time_s, &me.time_s, sizeof me.time_s) ? "--time"
                                                                          : NULL;
    if (what)
        return pinio_diag_set(&j->local, -EINVAL, "bench: %s differs from rank 0's: every "
                                                  "rank runs the same job", what), -EINVAL;
    return 0;
}

/* ---- the time series, merged on the common clock ---------------------- */

/* A rank's intervals: the sums over its jobs (job -1), as its run hands
 * them in. */
typedef struct series {
    pinio_bench_interval *row;
    size_t n, cap;
    bool nomem;
} series;

static int keep_interval(void *ctx, const pinio_bench_interval *iv)
{
    series *s = ctx;
    if (iv->job != -1)
        return 0;
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        pinio_bench_interval *nr = realloc(s->row, cap * sizeof *nr);
        if (!nr) {
            s->nomem = true;
            return 1;
        }
        s->row = nr;
        s->cap = cap;
    }
    s->row[s->n++] = *iv;
    return 0;
}

/* A rank's row on rank 0, with the job's interval it falls in. */
typedef struct mrow {
    uint64_t bin;
    pinio_bench_interval v;
} mrow;

static int mrow_cmp(const void *pa, const void *pb)
{
    const mrow *a = pa, *b = pb;
    if (a->bin != b->bin)
        return a->bin < b->bin ? -1 : 1;
    if (a->v.dir != b->v.dir)
        return a->v.dir - b->v.dir;
    if (a->v.job != b->v.job)
        return a->v.job - b->v.job;
    return a->v.time_ms < b->v.time_ms ? -1 : a->v.time_ms > b->v.time_ms;
}

/* Rank 0: the rows sorted, each group of (job interval, direction) handed
 * to the caller rank by rank, then its sum (see pinio_mpi_bench_run()). */
static void emit_series(mrow *m, size_t total, double len_ms, double tmax,
                        const pinio_bench_opts *o)
{
    qsort(m, total, sizeof *m, mrow_cmp);
    bool quiet = false;
    for (size_t i = 0; i < total && !quiet;) {
        pinio_bench_interval sum = {.job = -1, .dir = m[i].v.dir};
        double lat = 0;
        size_t k = i;
        for (; k < total && m[k].bin == m[i].bin && m[k].v.dir == m[i].v.dir; k++) {
            sum.bytes += m[k].v.bytes;
            sum.ios += m[k].v.ios;
            lat += m[k].v.lat_mean_ns * (double)m[k].v.ios;
            if (!quiet && o->interval_fn(o->interval_ctx, &m[k].v))
                quiet = true;
        }
        double end = (double)m[i].bin * len_ms;
        sum.time_ms = end < tmax ? end : tmax;
        double span_ms = sum.time_ms - (double)(m[i].bin - 1) * len_ms;
        double per_s = span_ms > 0 ? 1e3 / span_ms : 0;
        sum.bytes_per_s = (double)sum.bytes * per_s;
        sum.iops = (double)sum.ios * per_s;
        sum.lat_mean_ns = sum.ios ? lat / (double)sum.ios : 0;
        if (!quiet && o->interval_fn(o->interval_ctx, &sum))
            quiet = true;
        i = k;
    }
}

/* Collective: every rank's series to rank 0, put on the common clock (its
 * run's origin, less its clock offset and the job's first start) and
 * merged there. `origin_s`: this rank's series' origin on its own clock. */
static int merge_series(job *j, series *s, double origin_s, const int64_t *off,
                        unsigned interval_ms, const pinio_bench_opts *o,
                        const pinio_mpi_bench_result *res)
{
    int rc = 0;
    if (s->n > (size_t)INT_MAX / sizeof *s->row)
        rc = -EOVERFLOW, pinio_diag_set(&j->local, rc, "bench: %zu intervals in the time "
                                        "series: more than MPI counts; a longer --log-interval",
                                        s->n);
    for (size_t i = 0; i < s->n; i++)
        s->row[i].time_ms += origin_s * 1e3; /* on this rank's clock, as rank 0 can shift it */
    int mine = rc ? 0 : (int)(s->n * sizeof *s->row);
    int *count = NULL, *displ = NULL;
    if (j->rank == 0 && (!(count = calloc((size_t)j->n, sizeof *count)) ||
                         !(displ = calloc((size_t)j->n, sizeof *displ))))
        rc = -ENOMEM, pinio_diag_set(&j->local, rc, "bench: no memory for the time series");
    pinio_bench_interval *all = NULL;
    mrow *m = NULL;
    size_t total = 0;
    if ((rc = pinio__mpi_agree(j, rc)))
        goto out;
    int e = MPI_Gather(&mine, 1, MPI_INT, count, 1, MPI_INT, 0, j->comm);
    if (e != MPI_SUCCESS)
        rc = pinio__mpi_fail(j, e, "MPI_Gather (time series sizes)");
    for (int r = 0; !rc && j->rank == 0 && r < j->n; r++) {
        displ[r] = (int)(total * sizeof *all);
        total += (size_t)count[r] / sizeof *all;
        if (total > (size_t)INT_MAX / sizeof *all)
            rc = -EOVERFLOW, pinio_diag_set(&j->local, rc, "bench: the ranks' time series "
                                            "exceed MPI counts; a longer --log-interval");
    }
    if (!rc && j->rank == 0 && total &&
        (!(all = malloc(total * sizeof *all)) || !(m = malloc(total * sizeof *m))))
        rc = -ENOMEM, pinio_diag_set(&j->local, rc, "bench: no memory for %zu intervals", total);
    if ((rc = pinio__mpi_agree(j, rc)))
        goto out;
    e = MPI_Gatherv(s->row, mine, MPI_BYTE, all, count, displ, MPI_BYTE, 0, j->comm);
    rc = e == MPI_SUCCESS ? 0 : pinio__mpi_fail(j, e, "MPI_Gatherv (time series)");
    if ((rc = pinio__mpi_agree(j, rc)) || j->rank != 0)
        goto out;
    double len_ms = (double)interval_ms, tmax = res->job.seconds * 1e3;
    size_t i = 0;
    for (int r = 0; r < j->n; r++)
        for (int q = 0; q < count[r] / (int)sizeof *all; q++, i++) {
            mrow *x = &m[i];
            x->v = all[i];
            x->v.job = r;
            double t = x->v.time_ms - (double)off[r] * 1e-6 - res->job.t_first_s * 1e3;
            x->v.time_ms = t > 0 ? t : 0;
            double b = ceil(x->v.time_ms / len_ms);
            x->bin = b >= 1 ? (uint64_t)b : 1;
            tmax = x->v.time_ms > tmax ? x->v.time_ms : tmax;
        }
    emit_series(m, total, len_ms, tmax, o);
out:
    free(count);
    free(displ);
    free(all);
    free(m);
    return rc;
}

/* Everything after the run: the last progress messages, the agreement,
 * then the records and the histograms to rank 0. */
static int gather(job *j, live *l, int rc, const pinio_bench_result *r, const pinio_bench_opts *x,
                  int data_of, const char *hosts, const uint64_t *hist, const int64_t *off,
                  const uint64_t *rtt, pinio_mpi_bench_result *res)
{
    live_end(l, rc);
    if ((rc = pinio__mpi_agree(j, own_code(j, l, rc))))
        return rc;
    rank_rec mine, *all = NULL;
    record(r, x, j->rank, data_of, hosts + (size_t)j->rank * HOST_LEN, &mine);
    uint64_t *sum = NULL;
    if (j->rank == 0) {
        all = calloc((size_t)j->n, sizeof *all);
        res->ranks = calloc((size_t)j->n, sizeof *res->ranks);
        sum = res->lat_hist = calloc(NHIST, sizeof *sum);
    }
    rc = j->rank == 0 && (!all || !res->ranks || !sum) ? -ENOMEM : 0;
    if (rc)
        pinio_diag_set(&j->local, rc, "bench: no memory for %d ranks' results", j->n);
    if ((rc = pinio__mpi_agree(j, rc))) {
        free(all);
        return rc;
    }
    int e = MPI_Gather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE, 0,
                       j->comm);
    if (e == MPI_SUCCESS)
        e = MPI_Reduce(hist, sum, NHIST, MPI_UINT64_T, MPI_SUM, 0, j->comm);
    rc = e == MPI_SUCCESS ? 0 : pinio__mpi_fail(j, e, "MPI_Gather/MPI_Reduce (results)");
    if (!rc && j->rank == 0)
        combine(all, j->n, off, rtt, sum, x, res);
    free(all);
    return pinio__mpi_agree(j, rc);
}

int pinio_mpi_bench_run(MPI_Comm comm, const pinio_bench_opts *uo,
                        const pinio_mpi_bench_opts *umo, pinio_mpi_bench_result *res,
                        pinio_diag *diag)
{
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (!inited || finalized || !uo || !res) {
        pinio_diag_set(diag, -EINVAL, "pinio_mpi_bench_run: %s",
                       !inited || finalized ? "MPI is not initialised (or finalized)"
                                            : "no options or no result");
        return -EINVAL;
    }
    memset(res, 0, sizeof *res);
    pinio_bench_opts o;
    pinio_bench_opts_default(&o);
    size_t on = uo->struct_size < sizeof o ? uo->struct_size : sizeof o;
    if (on >= sizeof(size_t))
        memcpy(&o, uo, on);
    o.struct_size = sizeof o;
    pinio_mpi_bench_opts mo;
    pinio_mpi_bench_opts_default(&mo);
    if (umo) {
        size_t n = umo->struct_size < sizeof mo ? umo->struct_size : sizeof mo;
        if (n >= sizeof(size_t))
            memcpy(&mo, umo, n);
        mo.struct_size = sizeof mo;
    }
    job j = {.diag = diag};
    int e = MPI_Comm_dup(comm, &j.comm);
    if (e != MPI_SUCCESS) {
        pinio_diag_set(diag, -EPROTO, "pinio_mpi_bench_run: MPI_Comm_dup failed");
        return -EPROTO;
    }
    MPI_Comm_rank(j.comm, &j.rank);
    MPI_Comm_size(j.comm, &j.n);
    res->nranks = j.n;
    int rc = 0;
    char *hosts = calloc((size_t)j.n, HOST_LEN);
    int64_t *off = calloc((size_t)j.n, sizeof *off);
    uint64_t *rtt = calloc((size_t)j.n, sizeof *rtt);
    bool *ping = calloc((size_t)j.n, sizeof *ping);
    uint64_t *hist = calloc(NHIST, sizeof *hist);
    unsigned np = o.npaths ? o.npaths : 1;
    char (*names)[256] = calloc(np, sizeof *names);
    const char **paths = calloc(np, sizeof *paths);
    live l = {.comm = j.comm, .rank = j.rank, .n = j.n, .user = &o, .mo = &mo,
              .req = MPI_REQUEST_NULL};
    l.last = calloc((size_t)j.n, sizeof *l.last);
    l.done = calloc((size_t)j.n, sizeof *l.done);
    l.stop_req = calloc((size_t)j.n, sizeof *l.stop_req);
    if (!hosts || !off || !rtt || !ping || !hist || !names || !paths || !l.last || !l.done ||
        !l.stop_req)
        rc = -ENOMEM, pinio_diag_set(&j.local, rc, "bench: no memory for %d ranks", j.n);
    bool want_series = false;
    series ser = {0};
    char host[HOST_LEN] = "";
    if (gethostname(host, sizeof host - 1))
        snprintf(host, sizeof host, "unknown");
    if (!(rc = pinio__mpi_agree(&j, rc))) {
        e = MPI_Allgather(host, HOST_LEN, MPI_CHAR, hosts, HOST_LEN, MPI_CHAR, j.comm);
        rc = e == MPI_SUCCESS ? agree_opts(&j, &o, &mo, &want_series)
                              : pinio__mpi_fail(&j, e, "MPI_Allgather (host names)");
        rc = pinio__mpi_agree(&j, rc);
    }
    pinio_bench_opts x = o;
    pinio_bench_result r;
    memset(&r, 0, sizeof r);
    int data_of = j.rank;
    if (!rc) {
        int on0 = 0;
        for (int q = 0; q < j.n; q++) {
            bool same = !strncmp(hosts + (size_t)q * HOST_LEN, hosts, HOST_LEN);
            on0 += same;
            ping[q] = q > 0 && (mo.clock_ping || !same);
        }
        int k = mo.reorder < 0 ? on0 : mo.reorder;
        data_of = (int)(((long)j.rank + k % j.n + j.n) % j.n);
        res->nhosts = 0;
        for (int q = 0; q < j.n; q++) {
            bool seen = false;
            for (int p = 0; p < q && !seen; p++)
                seen = !strncmp(hosts + (size_t)q * HOST_LEN, hosts + (size_t)p * HOST_LEN,
                                HOST_LEN);
            res->nhosts += !seen;
        }
        bool any_ping = false;
        for (int q = 0; q < j.n; q++)
            any_ping |= ping[q];
        snprintf(res->clock, sizeof res->clock, "%s", any_ping ? "monotonic+ping" : "monotonic");
        rc = place(&j, &o, &mo, hosts, data_of, &x, names, paths);
        if (!rc)
            rc = pinio_bench_check(&x, &j.local);
        rc = pinio__mpi_agree(&j, rc);
    }
    if (!rc)
        rc = pinio__mpi_agree(&j, prepare(&x, &mo, o.offset, j.rank, j.n, &j.local));
    if (!rc && mo.layout != PINIO_MPI_BENCH_PER_RANK && x.rw != PINIO_BENCH_READ &&
        x.rw != PINIO_BENCH_RANDREAD)
        x.allow_file_overwrite = true; /* rank 0's prepare() checked the file: see there */
    if (!rc)
        rc = pinio__mpi_agree(&j, clock_offsets(&j, ping, off, rtt));
    if (!rc) {
        /* The job's one-pass total, for rank 0's progress line. */
        uint64_t each = x.io_size ? x.io_size : x.size;
        l.total_bytes = each * (x.loops ? x.loops : 1) * (uint64_t)j.n *
                        (x.jobs_whole ? x.jobs : 1);
        x.progress = live_progress;
        x.progress_ctx = &l;
        x.lat_hist = hist;
        x.job_results = NULL;
        x.interval_fn = want_series ? keep_interval : NULL;
        x.interval_ctx = &ser;
        e = MPI_Barrier(j.comm);
        rc = e == MPI_SUCCESS ? pinio_bench_run(&x, &r, &j.local)
                              : pinio__mpi_fail(&j, e, "MPI_Barrier (start)");
        if (!rc && ser.nomem)
            rc = -ENOMEM, pinio_diag_set(&j.local, rc, "bench: no memory for the time series");
        /* bench names its file in the message only; the job's error must
         * name the failing rank's own file to rank 0, which does not know it */
        if (rc && !j.local.path[0] && x.path) {
            snprintf(j.local.path, sizeof j.local.path, "%s", x.path);
            size_t pl = strlen(x.path);
            /* "bench: PATH: why" as "PATH: why", which the agreement puts
             * as "PATH: rank R of N: why" (the path said once) */
            if (!strncmp(j.local.msg, "bench: ", 7) && !strncmp(j.local.msg + 7, x.path, pl) &&
                !strncmp(j.local.msg + 7 + pl, ": ", 2))
                memmove(j.local.msg, j.local.msg + 7, strlen(j.local.msg + 7) + 1);
        }
        rc = gather(&j, &l, rc, &r, &x, data_of, hosts, hist, off, rtt, res);
        if (!rc && want_series)
            rc = merge_series(&j, &ser, r.t_series_s, off, x.interval_ms ? x.interval_ms : 500,
                              &o, res);
    }
    free(ser.row);
    if (!rc && mo.rank_lat_hist)
        memcpy(mo.rank_lat_hist, hist, NHIST * sizeof *hist);
    if (!rc && j.rank == 0) {
        /* The fields the ranks do not add up: rank 0's. */
        snprintf(res->job.features, sizeof res->job.features, "%s", r.features);
        res->job.batch = r.batch;
        res->job.file_size = r.file_size;
        res->job.created = r.created;
        res->job.submits_per_io = r.submits_per_io;
        snprintf(res->job.s3_endpoint, sizeof res->job.s3_endpoint, "%s", r.s3_endpoint);
        snprintf(res->job.s3_etag, sizeof res->job.s3_etag, "%s", r.s3_etag);
        snprintf(res->job.s3_pinned_by, sizeof res->job.s3_pinned_by, "%s", r.s3_pinned_by);
    }
    if (rc)
        pinio_mpi_bench_result_free(res);
    free(hosts);
    free(off);
    free(rtt);
    free(ping);
    free(hist);
    free(names);
    free(paths);
    free(l.last);
    free(l.done);
    free(l.stop_req);
    MPI_Comm_free(&j.comm);
    return rc;
}
