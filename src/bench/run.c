/* pinio_bench_run(): the storage benchmark behind `pinio bench` (contract in
 * include/pinio/bench.h): checks the options, prepares the target, starts
 * the jobs behind a gate, watches them and sums up what they measured. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/base/opts.h"
#include "src/bench/job_internal.h"


static uint64_t gcd(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Calls the progress callback about once a second and delivers the time
 * series until every job's workload pass ended; returns true when the
 * callback asked to stop (the jobs then stop issuing, drain and skip the
 * verify pass). */
static bool watch(const pinio_bench_opts *o, job *jobs, unsigned n, uint64_t total,
                  struct gate *g, pinio_bench_interval *rows)
{
    uint64_t start = now_ns(), next_tick = start + 1000000000ull;
    pthread_mutex_lock(&g->mu);
    while (g->finished < n) {
        if (g->iv)
            pinio__bench_iv_deliver(o, g, rows);
        if (g->finished >= n)
            break;
        /* The condition variable waits on CLOCK_REALTIME; a clock step
         * only shifts one tick. Jobs wake it as they hand in intervals. */
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 1;
        pthread_cond_timedwait(&g->cv, &g->mu, &until);
        if (!o->progress || atomic_load(&g->cancel) || now_ns() < next_tick)
            continue;
        next_tick = now_ns() + 1000000000ull;
        pthread_mutex_unlock(&g->mu);
        uint64_t bytes = 0, ios = 0;
        for (unsigned i = 0; i < n; i++) {
            bytes += atomic_load_explicit(&jobs[i].live_bytes, memory_order_relaxed);
            ios += atomic_load_explicit(&jobs[i].live_ios, memory_order_relaxed);
        }
        double secs = (double)(now_ns() - start) * 1e-9;
        pinio_progress pg = { .done_bytes = bytes, .done_ops = ios, .elapsed_s = secs,
                              .total_s = o->time_s,
                              .total_bytes = o->time_s > 0 ? 0 : total };
        if (o->progress(o->progress_ctx, &pg))
            atomic_store(&g->cancel, true);
        pthread_mutex_lock(&g->mu);
    }
    if (g->iv)
        pinio__bench_iv_deliver(o, g, rows); /* the last, partial intervals */
    pthread_mutex_unlock(&g->mu);
    return atomic_load(&g->cancel);
}

/* Starts the jobs, opens the gate once all are set up, and sums what they
 * measured. */
static int run_jobs(const pinio_bench_opts *o, const char *spec, uint64_t size,
                    const char *const *paths, unsigned nfiles, const pinio__bench_obj *obj,
                    pinio__bench_gpu *gpu, pinio_bench_result *res, pinio_diag *diag)
{
    int rc = 0;
    bool wr = is_write(o->rw) || is_trim(o->rw);
    int flags = (wr ? O_RDWR : O_RDONLY) | (o->direct ? O_DIRECT : 0) | O_CLOEXEC;
    job *jobs = calloc(o->jobs, sizeof *jobs);
    if (!jobs)
        return pinio_diag_set(diag, -ENOMEM, "bench: no memory for %u jobs", o->jobs), -ENOMEM;
    struct gate gate = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    atomic_init(&gate.cancel, false);
    pinio_bench_interval *iv_rows = NULL;
    if (o->interval_fn) {
        gate.iv = pinio__bench_iv_alloc(o);
        iv_rows = calloc(NDIR * ((size_t)o->jobs + 1), sizeof *iv_rows);
        if (!gate.iv || !iv_rows) {
            pinio__bench_iv_free(gate.iv);
            free(iv_rows);
            free(jobs);
            return pinio_diag_set(diag, -ENOMEM, "bench: no memory for the time series"),
                   -ENOMEM;
        }
    }
    uint64_t per_job = o->jobs_whole ? size : size / o->jobs;
    for (unsigned i = 0; i < o->jobs; i++) {
        job *j = &jobs[i];
        j->o = o;
        j->idx = i;
        j->gate = &gate;
        j->fd = -1;
        j->fds = &j->fd;
        j->obj = obj;
        j->gpu_run = gpu;
        j->nfiles = nfiles;
        j->paths = paths;
        j->multi = nfiles > 1 || o->trace_file;
        if ((j->multi && !(j->fs = calloc(nfiles, sizeof *j->fs))) ||
            (nfiles > 1 && !(j->fds = malloc(nfiles * sizeof *j->fds)))) {
            j->fds = j->fds ? j->fds : &j->fd;
            rc = -ENOMEM;
            pinio_diag_set(diag, rc, "bench: no memory for %u files", nfiles);
            continue;
        }
        for (unsigned f = 0; f < nfiles; f++)
            j->fds[f] = -1;
        atomic_init(&j->live_bytes, 0);
        atomic_init(&j->live_ios, 0);
        j->base = o->offset + (o->jobs_whole ? 0 : per_job * i);
        j->region = per_job;
        j->maxbs = unit_bs(o);
        j->batch = obj ? 1 /* each HTTP request leaves on its own */
                   : o->batch ? (o->batch < o->qd ? o->batch : o->qd) : is_rand(o->rw) ? 1 : o->qd;
        j->nblocks = per_job / o->bs;
        if (!j->nblocks) /* bssplit: sizes apart from bs, which only names the order */
            j->nblocks = 1;
        /* A multiplier coprime with nblocks makes i -> i*mul+add (mod n) a
         * permutation: every block once per pass, no bitmap. */
        j->perm_add = (o->seed * 0x9e3779b97f4a7c15ull + i) % j->nblocks;
        j->perm_mul = (j->nblocks * 5 / 8 + 0x2545f491ull * (o->seed | 1)) % j->nblocks;
        while (j->nblocks > 1 && (!j->perm_mul || gcd(j->perm_mul, j->nblocks) != 1))
            j->perm_mul = (j->perm_mul + 1) % j->nblocks;
        for (int d = 0; d < NDIR; d++) {
            pinio__hist_reset(&j->hist[d]);
            pinio__hist_reset(&j->slat[d]);
            pinio__hist_reset(&j->clat[d]);
        }
        /* Each job its own streams, so that jobs do not walk in step. */
        j->rng = o->seed * 0xd1b54a32d192ed03ull + 2 * i + 1;
        uint64_t align = o->blockalign ? o->blockalign : o->bs;
        for (unsigned k = 0; !o->blockalign && k < o->nbssplit; k++)
            align = k == 0 || o->bssplit[k].bs < align ? o->bssplit[k].bs : align;
        if (o->bsrange_max && !o->blockalign)
            align = 512;
        const char *why = "";
        (void)pinio__dist_init(&j->dist, o, o->nbssplit || o->bsrange_max ? per_job / align
                                                                           : j->nblocks,
                               o->seed * 0x9e3779b97f4a7c15ull + 2 * i, &why); /* checked */
        j->ns_per_io = o->rate_iops ? 1e9 / (double)o->rate_iops : 0;
        j->ns_per_byte = o->rate_bytes_per_s ? 1e9 / (double)o->rate_bytes_per_s : 0;
        j->think_ns = o->thinktime_us * 1000;
        j->think_blocks = o->thinktime_blocks ? o->thinktime_blocks : 1;
    }
    for (unsigned i = 0; i < o->jobs && !rc; i++) {
        job *j = &jobs[i];
        for (unsigned f = 0; f < nfiles && !rc && !obj; f++)
            rc = pinio__bench_open_file(o, paths[f], flags, i == 0, &j->fds[f], diag);
        if (rc)
            break;
        rc = pinio__faults_parse(spec, &j->faults, diag);
        /* Every file of the set, once: one way to trim for all of them. */
        for (unsigned f = 0; !rc && i == 0 && is_trim(o->rw) && f < nfiles; f++) {
            enum trim_how how = TRIM_PUNCH;
            rc = pinio__bench_trim_probe(paths[f], j->fds[f], j->faults, &how, diag);
            if (!rc && f && how != j->trim_how) {
                rc = -EINVAL;
                pinio_diag_set(diag, rc, "bench: %s: a trim over regular files and block "
                               "devices at once is not supported (%s is the other kind)",
                               paths[f], paths[0]);
            }
            j->trim_how = how;
        }
        j->trim_how = jobs[0].trim_how;
    }
    /* Only a thread that exists is counted: the gate below waits for
     * `started` arrivals, so counting a failed pthread_create() (EAGAIN under
     * RLIMIT_NPROC) would wait for a job that never runs. */
    unsigned started = 0;
    while (!rc && started < o->jobs) {
        int e = pthread_create(&jobs[started].th, NULL, pinio__bench_job_main, &jobs[started]);
        if (e) {
            rc = -e;
            pinio_diag_set(diag, rc, "bench: cannot start job thread %u of %u: %s%s", started,
                           o->jobs, pinio_strerror(rc),
                           e == EAGAIN ? " (the process or user thread limit, RLIMIT_NPROC: "
                                         "ulimit -u, or fewer --jobs)"
                                       : "");
            break;
        }
        started++;
    }
    pthread_mutex_lock(&gate.mu);
    while (gate.ready < started)
        pthread_cond_wait(&gate.cv, &gate.mu);
    for (unsigned i = 0; i < started && !rc; i++)
        if (jobs[i].err) {
            rc = jobs[i].err;
            if (diag)
                *diag = jobs[i].diag;
        }
    gate.state = rc ? -1 : 1;
    gate.t0_ns = now_ns();
    pthread_cond_broadcast(&gate.cv);
    pthread_mutex_unlock(&gate.mu);
    if (!rc && (o->progress || gate.iv) && watch(o, jobs, started, (o->jobs_whole ? size * o->jobs : size) * nfiles, &gate, iv_rows)) {
        rc = -ECANCELED;
        pinio_diag_set(diag, rc, "bench: %s: stopped by the progress callback", o->path);
    }
    for (unsigned i = 0; i < started; i++)
        pthread_join(jobs[i].th, NULL);

    /* A stop asked by the progress callback still reports what completed
     * (the CLI prints it on Ctrl-C); any other failure reports nothing. */
    bool report = !rc || (rc == -ECANCELED && started == o->jobs);
    pinio__hist *h = report ? calloc(SUM_HISTS, sizeof *h) : NULL;
    if (report && !h) {
        rc = -ENOMEM;
        pinio_diag_set(diag, rc, "bench: no memory for the histogram");
        report = false;
    }
    for (unsigned i = 0; report && i < o->jobs; i++)
        if (jobs[i].err && !rc) {
            rc = jobs[i].err;
            if (diag)
                *diag = jobs[i].diag;
        }
    if (obj && !rc) {
        uint64_t unconfirmed = 0;
        for (unsigned i = 0; i < o->jobs; i++)
            unconfirmed += jobs[i].s3st.unconfirmed;
        rc = pinio__bench_s3_recheck(o, obj, unconfirmed, diag);
    }
    if (report) {
        pinio__bench_summarize(o, jobs, o->jobs, res, h);
        res->t_series_s = (double)gate.t0_ns * 1e-9;
        for (int k = 0; o->lat_hist && k < 3; k++) /* lat, slat, clat over every direction */
            memcpy(o->lat_hist + k * PINIO__HIST_BUCKETS, h[(NDIR + 1) * k + NDIR].counts,
                   sizeof h[0].counts);
        res->partial = rc == -ECANCELED;
        for (unsigned i = 0; o->job_results && i < o->jobs; i++) {
            pinio_bench_result *jr = &o->job_results[i];
            memset(jr, 0, sizeof *jr);
            pinio__bench_summarize(o, &jobs[i], 1, jr, h);
            jr->partial = res->partial;
            jr->file_size = res->file_size;
            jr->created = res->created;
        }
        free(h);
    }
    pinio__bench_iv_free(gate.iv);
    free(iv_rows);
    for (unsigned i = 0; i < o->jobs; i++)
        pinio__bench_job_teardown(&jobs[i]);
    free(jobs);
    return rc;
}

int pinio_bench_run(const pinio_bench_opts *uo, pinio_bench_result *res, pinio_diag *diag)
{
    pinio_bench_opts oc;
    pinio_bench_opts_default(&oc);
    int rc = uo ? pinio__opts_copy(&oc, sizeof oc, uo, "pinio_bench options", diag) : -EINVAL;
    if (!uo)
        pinio_diag_set(diag, rc, "bench: no options");
    if (rc)
        return rc;
    const pinio_bench_opts *o = &oc;
    rc = pinio_bench_check(o, diag);
    if (rc)
        return rc;
    bool s3 = pinio__bench_is_s3(o); /* its refusals are pinio_bench_check()'s */
    /* Several files: `path` names the first, for the messages that name
     * the run's target; with filesize, a size set is the bytes to move
     * (fio: "size becomes merely the default for io_size"). */
    if (oc.npaths)
        oc.path = oc.paths[0];
    if (oc.filesize && oc.size && !oc.io_size && !(oc.time_s > 0))
        oc.io_size = oc.size;
    /* 0 means fio's default, 50: drawn as "below 0" it made every request
     * of a default --rw randrw a write. */
    if (is_mixed(oc.rw) && !oc.rwmixread)
        oc.rwmixread = 50;
    memset(res, 0, sizeof *res);
    pinio__faults *probe = NULL;
    const char *spec = o->faults ? o->faults : getenv("PINIO_FAULTS");
    rc = pinio__faults_parse(spec, &probe, diag); /* bad specs fail before any file is touched */
    free(probe);
    if (rc)
        return rc;
    if (!s3 && (rc = pinio__bench_check_memlock(o, diag)))
        return rc;
    /* The GPU before the target: no driver or device costs no file made. */
    pinio__bench_gpu *gpu = NULL;
    if ((rc = pinio__bench_gpu_open(o, &gpu, diag)))
        return rc;
    uint64_t size = 0;
    /* One file is the list of one: `path`. */
    const char *const *paths = oc.npaths ? oc.paths : &oc.path;
    unsigned n = oc.npaths ? oc.npaths : 1;
    pinio_bench_file *files = calloc(n, sizeof *files);
    int *hold = malloc(n * sizeof *hold);
    pinio__bench_own *own = calloc(n, sizeof *own);
    if (!files || !hold || !own) {
        free(files);
        free(hold);
        free(own);
        pinio__bench_gpu_close(gpu);
        return pinio_diag_set(diag, -ENOMEM, "bench: no memory for %u files", n), -ENOMEM;
    }
    for (unsigned i = 0; i < n; i++)
        hold[i] = -1;
    /* An object: its HEAD settles the size, and nothing is made. */
    pinio__bench_obj obj = {0};
    size = s3 ? o->size : 0;
    rc = s3 ? pinio__bench_s3_prepare(o, &obj, &size, files, diag)
            : pinio__bench_prepare_files(o, paths, n, &size, files, hold, own, diag);
    for (unsigned i = 0; i < n; i++)
        res->created |= files[i].created;
    res->file_size = files[0].size;
    if (!rc)
        rc = run_jobs(o, spec, size, paths, n, s3 ? &obj : NULL, gpu, res, diag);
    pinio__bench_gpu_close(gpu);
    if (s3 && (!rc || res->partial)) {
        snprintf(res->s3_endpoint, sizeof res->s3_endpoint, "%s", obj.endpoint);
        snprintf(res->s3_etag, sizeof res->s3_etag, "%s", obj.etag);
        snprintf(res->s3_pinned_by, sizeof res->s3_pinned_by, "%s",
                 pinio__bench_s3_pinned_by(&obj));
    }
    pinio__bench_s3_obj_free(&obj);
    /* The files bench wrote are still bench's: what it wrote is what their
     * state now says (also after a failed or stopped run). */
    if (is_write(o->rw) || is_trim(o->rw))
        pinio__bench_record_files(paths, n, own);
    for (unsigned i = 0; i < n; i++) {
        if (hold[i] >= 0)
            close(hold[i]);
        if (rc && files[i].created)
            unlink(paths[i]); /* a failed run leaves behind nothing it made */
    }
    if (o->files_out && (!rc || res->partial))
        memcpy(o->files_out, files, n * sizeof *files);
    free(files);
    free(hold);
    free(own);
    return rc;
}
