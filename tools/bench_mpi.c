/* `pinio bench --mpi`: the command line's MPI options, the collective run
 * (pinio_mpi_bench_run(), include/pinio/mpi.h) and rank 0's tables: the job,
 * its stonewall figures, per host and per rank. Every rank parses the
 * same command line; rank 0 alone prints (the others are hushed), and a
 * failure is the same on every rank. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pinio/mpi.h"
#include "bench_mpi.h"
#include "load_mpi.h"
#include "progress.h"
#include "stop.h"
#include "util.h"

static struct {
    bool on, verbose, clock_ping, own_mpi;
    pinio_mpi_bench_layout layout, used; /* --mpi=LAYOUT; the last run's */
    bool layout_set;
    int reorder;
    const char *lat_log;
    int hushed[2];
    int rank, n;
    pinio_mpi_bench_result res; /* the last run's, for bench_print_result() */
    pinio_bench_opts opts;      /* its options (the percentiles asked for) */
} M = {.hushed = {-1, -1}};

/* A value of --mpi=LAYOUT. */
static int parse_layout(const char *v)
{
    static const char *const names[] = {"same", "per-rank", "shared"};
    for (int i = 0; i < 3; i++)
        if (!strcmp(v, names[i])) {
            M.layout = (pinio_mpi_bench_layout)i;
            M.layout_set = true;
            return 0;
        }
    return cli_usage("bench", "--mpi=%s: the layout is same, per-rank or shared", v);
}

int bench_mpi_take_args(int *argc, char **argv)
{
    int out = 1;
    for (int i = 1; i < *argc; i++) {
        const char *a = argv[i];
        char *end;
        if (!strcmp(a, "--")) { /* operands from here on */
            while (i < *argc)
                argv[out++] = argv[i++];
            break;
        }
        if (!strcmp(a, "--mpi")) {
            M.on = true;
        } else if (!strncmp(a, "--mpi=", 6)) {
            M.on = true;
            if (parse_layout(a + 6))
                return 2;
        } else if (!strcmp(a, "--mpi-reorder")) {
            M.reorder = -1;
        } else if (!strncmp(a, "--mpi-reorder=", 14)) {
            long k = strtol(a + 14, &end, 10);
            if (!a[14] || *end || k < 0 || k > 1 << 24)
                return cli_usage("bench", "%s: a rank shift from 0 to 16777216", a);
            M.reorder = (int)k;
        } else if (!strcmp(a, "--mpi-clock-ping")) {
            M.clock_ping = true;
        } else if (!strcmp(a, "--mpi-lat-log") || !strncmp(a, "--mpi-lat-log=", 14)) {
            M.lat_log = a[13] == '=' ? a + 14 : i + 1 < *argc ? argv[++i] : NULL;
            if (!M.lat_log || !*M.lat_log)
                return cli_usage("bench", "--mpi-lat-log: no PREFIX");
        } else if (!strcmp(a, "--verbose") || !strcmp(a, "-v")) {
            M.verbose = true;
        } else {
            argv[out++] = argv[i];
        }
    }
    argv[out] = NULL;
    *argc = out;
    bool extra = M.reorder || M.clock_ping || M.lat_log || M.verbose;
    if (extra && !M.on)
        return cli_usage("bench", "--mpi-reorder, --mpi-clock-ping, --mpi-lat-log and --verbose go with "
                                  "--mpi");
    return 0;
}

bool bench_mpi_on(void)
{
    return M.on;
}

int bench_mpi_rank(void)
{
    return M.rank;
}

void bench_mpi_hush(int argc, char **argv)
{
    pinio_cli_load_mpi_hush(argc, argv, M.hushed); /* it looks for --mpi itself */
}

/* As `pinio load --mpi`'s agreement (cmd_load_mpi.c says why every rank
 * meets before any exits), with MPI kept up for the run. */
int bench_mpi_agree(int argc, char **argv, int rc)
{
    if (!M.on)
        return rc;
    int inited = 0, provided = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
            return cli_usage("bench", "--mpi: MPI_Init failed (run under mpiexec)");
        M.own_mpi = true;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &M.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &M.n);
    int mine = rc != 0 ? M.rank : M.n, first = M.n;
    MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (first == M.n)
        return 0;
    if (M.rank == 0 && rc == 0)
        cli_usage("bench", "rank %d of %d: its command line is a usage error (rank 0's is "
                  "not): every rank takes the same options", first, M.n);
    return 2;
}

/* ---- the run ------------------------------------------------------------ */

/* Rank 0's live line: the job's bytes; --verbose adds every rank's. */
struct live {
    cli_progress pg;
    uint64_t *rank_bytes;
};

static int on_job_progress(void *ctx, const pinio_progress *p)
{
    struct live *l = ctx;
    cli_progress_update(&l->pg, p);
    if (M.verbose && l->rank_bytes) {
        char b[32];
        fprintf(stderr, "pinio bench: %.1f s:", p->elapsed_s);
        for (int r = 0; r < M.n; r++)
            fprintf(stderr, " rank %d %s%s", r, cli_human_bytes(b, sizeof b, l->rank_bytes[r]),
                    r + 1 < M.n ? "," : "\n");
    }
    return 0;
}

/* Every rank: Ctrl-C (mpiexec forwards it) stops the rank's run. */
static int on_rank_progress(void *ctx, const pinio_progress *p)
{
    (void)ctx;
    (void)p;
    return cli_stop_requested();
}

/* --mpi-lat-log PREFIX: this rank's lat histogram (issue to completion) as
 * PREFIX.RANK, "HIGH_NS COUNT" per non-empty bucket: what a reader merges to check the job's
 * percentiles (capped by the job's exact max, as pinio's are). */
static int write_lat_log(const uint64_t *h, pinio_diag *d)
{
    /* h: lat, slat, clat; the first is the one logged */
    char name[4096];
    snprintf(name, sizeof name, "%s.%d", M.lat_log, M.rank);
    FILE *f = fopen(name, "w");
    if (!f) {
        int e = -errno;
        pinio_diag_set_at(d, e, name, 0, "%s: %s", name, strerror(-e));
        return e;
    }
    for (unsigned i = 0; i < PINIO_BENCH_HIST_BUCKETS; i++)
        if (h[i])
            fprintf(f, "%" PRIu64 " %" PRIu64 "\n", pinio_bench_hist_high(i), h[i]);
    if (fclose(f)) {
        int e = -errno;
        pinio_diag_set_at(d, e, name, 0, "%s: %s", name, strerror(-e));
        return e;
    }
    return 0;
}

static void print_extra(FILE *out, jw *w);

int bench_mpi_run_one(struct cli *c, pinio_bench_opts *x, pinio_bench_result *r,
                      pinio_diag *d, bool quiet)
{
    pinio_mpi_bench_result_free(&M.res);
    memset(r, 0, sizeof *r);
    memset(d, 0, sizeof *d);
    pinio_mpi_bench_opts mo;
    pinio_mpi_bench_opts_default(&mo);
    bool named = false; /* a name with $rank or $host: file per process */
    for (unsigned i = 0; i < (x->npaths ? x->npaths : 1); i++) {
        const char *p = x->npaths ? x->paths[i] : x->path;
        named |= p && (strstr(p, "$rank") || strstr(p, "${rank}") || strstr(p, "$host") ||
                       strstr(p, "${host}"));
    }
    mo.layout = M.layout_set ? M.layout : named ? PINIO_MPI_BENCH_PER_RANK : PINIO_MPI_BENCH_SAME;
    M.used = mo.layout;
    mo.reorder = M.reorder;
    mo.clock_ping = M.clock_ping;
    struct live l = {.rank_bytes = calloc((size_t)M.n, sizeof(uint64_t))};
    uint64_t *hist = M.lat_log ? calloc(3 * PINIO_BENCH_HIST_BUCKETS, sizeof *hist) : NULL;
    if (!l.rank_bytes || (M.lat_log && !hist)) {
        free(l.rank_bytes);
        pinio_diag_set(d, -ENOMEM, "bench: out of memory");
        return -ENOMEM;
    }
    mo.rank_lat_hist = hist;
    cli_progress_start(&l.pg, "bench", CLI_PROGRESS_IOPS, quiet || M.rank != 0);
    if (M.rank == 0) {
        mo.progress = on_job_progress;
        mo.progress_ctx = &l;
        mo.live_rank_bytes = l.rank_bytes;
    }
    x->progress = on_rank_progress;
    x->progress_ctx = NULL;
    x->job_results = NULL;
    /* rank 0's asks every rank to keep its series; it gets the job's */
    x->interval_fn = c->log ? bench_on_interval : NULL;
    x->interval_ctx = c;
    int e = pinio_mpi_bench_run(MPI_COMM_WORLD, x, &mo, &M.res, d);
    cli_progress_end(&l.pg);
    free(l.rank_bytes);
    if (!e && hist) {
        /* Each rank's own file: a failure to write one is the job's. */
        pinio_diag mine = {0};
        int w = write_lat_log(hist, &mine);
        struct { int rc, rank; } in = {w, M.rank}, agreed;
        MPI_Allreduce(&in, &agreed, 1, MPI_2INT, MPI_MINLOC, MPI_COMM_WORLD);
        MPI_Bcast(&mine, (int)sizeof mine, MPI_BYTE, agreed.rank, MPI_COMM_WORLD);
        if (agreed.rc) {
            *d = mine;
            e = agreed.rc;
        }
    }
    free(hist);
    /* The caller reports a failure with x->path, which holds "$rank": the
     * failing rank's own file instead (d lives as long as x there). */
    if (e && d->path[0])
        x->path = d->path;
    if (!e && M.rank == 0)
        *r = M.res.job;
    M.opts = *x;
    c->group_reporting = true; /* rank 0's own jobs are not the job's */
    bench_set_extra(e || M.rank != 0 ? NULL : print_extra);
    return e;
}

void bench_mpi_end(void)
{
    pinio_mpi_bench_result_free(&M.res);
    bench_set_extra(NULL);
    if (!M.on)
        return;
    pinio_cli_load_mpi_unhush(M.hushed);
    M.hushed[0] = M.hushed[1] = -1;
    int fin = 0;
    MPI_Finalized(&fin);
    if (M.own_mpi && !fin)
        MPI_Finalize();
}

/* ---- rank 0's tables ------------------------------------------------------ */

static const char *layout_name(pinio_mpi_bench_layout l)
{
    return l == PINIO_MPI_BENCH_PER_RANK ? "per-rank" : l == PINIO_MPI_BENCH_SHARED ? "shared"
                                                                                      : "same";
}

/* One host's ranks together: bytes and the span of their runs. */
struct host_sum {
    const char *host;
    int ranks;
    uint64_t bytes;
    double start, end;
};

static size_t host_sums(const pinio_mpi_bench_result *m, struct host_sum *hs)
{
    size_t nh = 0;
    for (int r = 0; r < m->nranks; r++) {
        const pinio_mpi_bench_rank *k = &m->ranks[r];
        size_t h = 0;
        while (h < nh && strcmp(hs[h].host, k->host))
            h++;
        if (h == nh)
            hs[nh++] = (struct host_sum){k->host, 0, 0, k->start_s, k->end_s};
        hs[h].ranks++;
        hs[h].bytes += k->bytes;
        hs[h].start = k->start_s < hs[h].start ? k->start_s : hs[h].start;
        hs[h].end = k->end_s > hs[h].end ? k->end_s : hs[h].end;
    }
    return nh;
}

static void print_json_extra(jw *w, const pinio_mpi_bench_result *m, const struct host_sum *hs,
                             size_t nh, const pinio_bench_opts *o)
{
    jw_key(w, "mpi");
    jw_obj(w);
    jw_kstr(w, "layout", layout_name(M.used));
    jw_ki64(w, "reorder", M.reorder);
    jw_ku64(w, "rank_count", (uint64_t)m->nranks);
    jw_ku64(w, "host_count", (uint64_t)m->nhosts);
    jw_kstr(w, "clock", m->clock);
    jw_kf64(w, "first_done_s", m->first_done_s);
    jw_kf64(w, "last_done_s", m->last_done_s);
    jw_kf64(w, "first_done_bw_mb_per_s", m->first_done_bytes_per_s / 1e6);
    jw_kf64(w, "sum_rank_bw_mb_per_s", m->sum_rank_bytes_per_s / 1e6);
    jw_obj_end(w);
    jw_key(w, "hosts");
    jw_arr(w);
    for (size_t h = 0; h < nh; h++) {
        double s = hs[h].end - hs[h].start;
        jw_obj(w);
        jw_kstr(w, "host", hs[h].host);
        jw_ku64(w, "rank_count", (uint64_t)hs[h].ranks);
        jw_ku64(w, "bytes", hs[h].bytes);
        jw_kf64(w, "start_s", hs[h].start);
        jw_kf64(w, "end_s", hs[h].end);
        jw_kf64(w, "bw_mb_per_s", s > 0 ? (double)hs[h].bytes / s / 1e6 : 0);
        jw_obj_end(w);
    }
    jw_arr_end(w);
    jw_key(w, "ranks");
    jw_arr(w);
    for (int r = 0; r < m->nranks; r++) {
        const pinio_mpi_bench_rank *k = &m->ranks[r];
        jw_obj(w);
        jw_ki64(w, "rank", k->rank);
        jw_kstr(w, "host", k->host);
        jw_kstr(w, "file", k->path);
        jw_ku64(w, "offset_bytes", k->offset);
        jw_ki64(w, "data_of", k->data_of);
        jw_kbool(w, "created", k->created);
        jw_ku64(w, "bytes", k->bytes);
        jw_ku64(w, "ios", k->ios);
        jw_kf64(w, "start_s", k->start_s);
        jw_kf64(w, "end_s", k->end_s);
        jw_kf64(w, "bw_mb_per_s", k->bytes_per_s / 1e6);
        jw_kf64(w, "iops", k->iops);
        jw_kf64(w, "cpu_user_s", k->cpu_user_s);
        jw_kf64(w, "cpu_sys_s", k->cpu_sys_s);
        bench_json_lat(w, "lat_ns", &k->lat, o);
        jw_ku64(w, "s3_requests", k->s3_requests);
        jw_ku64(w, "s3_retries", k->s3_retries);
        jw_ku64(w, "s3_throttled", k->s3_throttled);
        jw_kf64(w, "clock_offset_s", k->clock_offset_s);
        jw_kf64(w, "clock_rtt_s", k->clock_rtt_s);
        jw_obj_end(w);
    }
    jw_arr_end(w);
}

static void print_extra(FILE *out, jw *w)
{
    const pinio_mpi_bench_result *m = &M.res;
    if (!m->ranks)
        return;
    struct host_sum *hs = calloc((size_t)m->nranks, sizeof *hs);
    if (!hs)
        return;
    size_t nh = host_sums(m, hs);
    if (w) {
        print_json_extra(w, m, hs, nh, &M.opts);
        free(hs);
        return;
    }
    const pinio_bench_result *t = &m->job;
    fprintf(out, "  mpi: %d ranks on %d host(s), %s, clock %s; the figures above are the "
            "job's: its bytes over first start to last end\n", m->nranks, m->nhosts,
            layout_name(M.used), m->clock);
    fprintf(out, "  stonewall: first rank done at %.3f s (the job at %.1f MB/s until then), "
            "last at %.3f s (%.1f MB/s); the ranks' own MB/s summed: %.1f\n",
            m->first_done_s, m->first_done_bytes_per_s / 1e6, m->last_done_s,
            t->bytes_per_s / 1e6, m->sum_rank_bytes_per_s / 1e6);
    char b[32];
    fprintf(out, "  %-24s %5s %10s %9s %9s\n", "host", "ranks", "bytes", "end s", "MB/s");
    for (size_t h = 0; h < nh; h++) {
        double s = hs[h].end - hs[h].start;
        fprintf(out, "  %-24.24s %5d %10s %9.3f %9.1f\n", hs[h].host, hs[h].ranks,
                cli_human_bytes(b, sizeof b, hs[h].bytes), hs[h].end,
                s > 0 ? (double)hs[h].bytes / s / 1e6 : 0);
    }
    fprintf(out, "  %4s %-16s %4s %10s %8s %8s %9s %9s %8s %8s %s\n", "rank", "host", "data",
            "bytes", "start s", "end s", "MB/s", "IOPS", "p50 us", "p99 us", "file");
    for (int r = 0; r < m->nranks; r++) {
        const pinio_mpi_bench_rank *k = &m->ranks[r];
        fprintf(out, "  %4d %-16.16s %4d %10s %8.3f %8.3f %9.1f %9.0f %8.1f %8.1f %s",
                k->rank, k->host, k->data_of, cli_human_bytes(b, sizeof b, k->bytes), k->start_s,
                k->end_s, k->bytes_per_s / 1e6, k->iops, (double)k->lat.p50_ns / 1e3,
                (double)k->lat.p99_ns / 1e3, k->path);
        if (k->s3_requests)
            fprintf(out, " (%" PRIu64 " requests, %" PRIu64 " retries, %" PRIu64 " throttled)",
                    k->s3_requests, k->s3_retries, k->s3_throttled);
        fputc('\n', out);
    }
    free(hs);
}
