/* pinio bench: an io_uring storage benchmark with fio's knobs
 * (pinio_bench_run(), include/pinio/bench.h). Every option is parsed and
 * checked before the target is opened, so a bad command line writes nothing.
 *
 * Read top-down: run_bench() parses the command line and runs either its
 * cells (one run, or a --sweep grid) or a job file's sections; each step
 * below it is a function of its own, in the order it runs. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "bench_cli.h"
#include "bench_jobfile.h"
#if PINIO_HAVE_MPI
#include "bench_mpi.h"
#endif
#include "cli.h"
#include "progress.h"
#include "stop.h"
#include "util.h"

/* The runs of a plain command line, between their steps. */
struct cells {
    unsigned reps;          /* --repeat, or 1 */
    size_t ncells;          /* bs x qd of the grid */
    struct cell_run *runs;  /* --repeat: every run's figures, for the table */
    FILE *out;              /* stdout, or --output */
    bool rows;              /* a row per run; false: the --repeat table at the end */
};

/* One section of a job file: its options and, after its run, the result. */
struct section {
    struct cli *c;
    pinio_bench_opts x;
    pinio_bench_result r;
    pinio_diag d;
    int e;
    char where[512];
    pthread_t th;
};

static int run_bench(int argc, char **argv);
static int run_cells(struct cli *c);
static int check_cells(struct cli *c);
static int open_cells(struct cli *c, struct cells *k);
static void print_sweep_head(const struct cli *c, const struct cells *k);
static int run_cell(struct cli *c, struct cells *k, unsigned rep, size_t i);
static int close_cells(struct cli *c, struct cells *k, int rc);
static int run_jobfile(struct cli *top, int argc, char **argv);
static int prepare_sections(const struct cli *top, const bench_jobfile *jf, struct section *sec,
                            int argc, char **argv);
static char **extra_args(const struct cli *top, int argc, char **argv, int *n);
static int run_group(const struct cli *top, const bench_jobfile *jf, struct section *sec,
                     unsigned g, FILE *out);
static void *section_main(void *arg);
static void free_sections(struct section *s, size_t n);
static int run_one(struct cli *c, pinio_bench_opts *x, pinio_bench_result *r, pinio_diag *d,
                   bool quiet);
static int on_progress(void *ctx, const pinio_progress *p);
static bool mpi_on(void);
static int check_mpi(const struct cli *c);

const struct pinio_cmd pinio_cmd_bench = {
    .name = "bench",
    .summary = "storage benchmark: io_uring reads/writes, latency percentiles, CPU per GB",
    .run = run_bench,
};

static int run_bench(int argc, char **argv)
{
    struct cli *c = calloc(1, sizeof *c);
    if (!c)
        return fprintf(stderr, "pinio bench: out of memory\n"), 1;
    pinio_bench_opts_default(&c->o);
#if PINIO_HAVE_MPI
    /* Under mpiexec every rank parses; rank 0 alone speaks, and a usage
     * error on any rank is every rank's (bench_mpi.h). */
    bench_mpi_hush(argc, argv);
    int rc = bench_mpi_take_args(&argc, argv);
#else
    int rc = 0;
    for (int i = 1; i < argc && !rc; i++)
        if (!strcmp(argv[i], "--mpi") || !strncmp(argv[i], "--mpi=", 6))
            rc = cli_usage("bench", "--mpi: this pinio was built without MPI (meson "
                                    "-Dmpi=enabled, with libopenmpi-dev)");
#endif
    if (!rc)
        rc = bench_parse_args(c, argc, argv);
    if (!rc)
        rc = check_mpi(c);
#if PINIO_HAVE_MPI
    if (rc != -1)
        rc = bench_mpi_agree(argc, argv, rc);
    if (!rc && bench_mpi_rank() != 0)
        c->output = c->log_file = NULL; /* rank 0 writes the job's result and series */
#endif
    if (rc == -1)
        rc = 0; /* --help */
    else if (!rc && c->job_file)
        rc = run_jobfile(c, argc, argv);
    else if (!rc)
        rc = run_cells(c);
    if (!rc)
        cli_flush(); /* a failure is reported once, by main.c */
#if PINIO_HAVE_MPI
    bench_mpi_end();
#endif
    free(c);
    return rc;
}

static bool mpi_on(void)
{
#if PINIO_HAVE_MPI
    return bench_mpi_on();
#else
    return false;
#endif
}

/* "$rank" and "$host" in a name are --mpi's (each rank its own file);
 * without it they would name one literal file. --mpi runs one collective
 * at a time: no grid. */
static int check_mpi(const struct cli *c)
{
    const char *const *p = c->o.npaths ? c->o.paths : &c->o.path;
    for (unsigned i = 0; !mpi_on() && i < (c->o.npaths ? c->o.npaths : 1); i++)
        if (p[i] && strchr(p[i], '$'))
            return bench_usage(c, "%s: $rank and $host in a name need --mpi (under mpiexec)",
                               p[i]);
    if (mpi_on() && (c->sweep || c->repeat))
        return bench_usage(c, "--mpi runs one job at a time: not with %s",
                           c->sweep ? "--sweep" : "--repeat");
    return 0;
}

/* ---- the command line's runs: one, or a --sweep grid --------------------- */

/* The runs of a plain command line: one, or the --sweep grid (--repeat
 * times: the cell order is reversed on every other repetition, so that a
 * drift over the sweep, a device warming up or a cache filling, falls on
 * every cell alike instead of on the last ones). */
static int run_cells(struct cli *c)
{
    struct cells k = {0};
    int rc = check_cells(c);
    if (rc || (rc = open_cells(c, &k)))
        return rc;
    cli_stop_install();
    print_sweep_head(c, &k);
    for (unsigned rep = 0; rep < k.reps && !rc; rep++)
        for (size_t i = 0; i < k.ncells && !rc; i++)
            rc = run_cell(c, &k, rep, i);
    return close_cells(c, &k, rc);
}

/* Checks every cell before running any: a bad one must not leave the
 * others half done (or a file created); nor may an output be a target. */
static int check_cells(struct cli *c)
{
    int rc = 0;
    for (unsigned a = 0; a < c->nbs; a++)
        for (unsigned q = 0; q < c->nqd; q++) {
            pinio_bench_opts x = c->o;
            x.bs = c->sweep_bs[a];
            x.qd = (unsigned)c->sweep_qd[q];
            if ((rc = bench_check_opts(c, &x, c->sweep_qd[q])))
                return rc;
        }
    return bench_check_outputs(c, c);
}

/* The --repeat table's storage, the sweep's run context, --output and
 * --log-file. Returns 0, or 1 after saying why (nothing left open). */
static int open_cells(struct cli *c, struct cells *k)
{
    k->reps = c->repeat ? c->repeat : 1;
    k->ncells = (size_t)c->nbs * c->nqd;
    k->out = stdout;
    /* With --repeat the table comes at the end (medians); rows otherwise. */
    k->rows = !(c->repeat && c->fmt == FMT_NORMAL);
    if (c->repeat && !(k->runs = calloc(k->ncells * k->reps, sizeof *k->runs))) {
        fprintf(stderr, "pinio bench: out of memory\n");
        return 1;
    }
    if (c->sweep)
        bench_fill_ctx(&c->ctx, c->o.path);
    if (c->output && !(k->out = fopen(c->output, "w"))) {
        cli_failf("bench", c->fmt == FMT_JSON, -errno, c->output, "--output %s: %s", c->output,
                  strerror(errno));
        free(k->runs);
        return 1;
    }
    c->log_by_rank = mpi_on();
    if (bench_open_log(c)) {
        if (k->out != stdout)
            fclose(k->out);
        free(k->runs);
        return 1;
    }
    return 0;
}

/* A sweep's table head, when its rows are printed as they come. */
static void print_sweep_head(const struct cli *c, const struct cells *k)
{
    if (c->sweep && c->fmt == FMT_NORMAL && k->rows)
        fprintf(k->out, "%-6s %9s %5s %10s %10s %9s %9s %9s %9s %8s\n", "rw", "bs", "qd",
                "MB/s", "IOPS", "p50_us", "p99_us", "p99.9_us", "s/GB", "sub/io");
}

/* Run `i` of repetition `rep`: its row (or its figures for the table).
 * Returns 0, or 1 after reporting its failure; Ctrl-C ends the process
 * here, after printing what completed. */
static int run_cell(struct cli *c, struct cells *k, unsigned rep, size_t i)
{
    size_t cell = rep % 2 ? k->ncells - 1 - i : i;
    unsigned a = (unsigned)(cell / c->nqd), q = (unsigned)(cell % c->nqd);
    pinio_bench_opts x = c->o;
    x.bs = c->sweep_bs[a];
    x.qd = (unsigned)c->sweep_qd[q];
    c->ctx.repeat = c->repeat ? (int)rep : -1;
    c->log_cell = (unsigned)(rep * k->ncells + i + 1);
    c->log_bs = x.bs;
    c->log_qd = x.qd;
    pinio_bench_result r;
    pinio_diag d;
    int e = run_one(c, &x, &r, &d, c->fmt != FMT_NORMAL);
    if (e == -ECANCELED) {
        /* Ctrl-C: what completed is still a result (fio prints it
         * too); then die of the signal, status 128 + its number. */
        if (r.partial && k->rows)
            bench_print_result(k->out, c, &x, &r);
        if (k->runs && !k->rows)
            bench_print_repeat_table(k->out, c, k->runs, k->reps);
        if (k->out != stdout)
            fclose(k->out);
        bench_close_log(c, true);
        cli_stop_reraise(); /* the library removed what it was making */
    }
    if (e) {
        bench_report_error(c, e, &d, x.path);
        return 1;
    }
    if (k->runs)
        k->runs[(size_t)rep * k->ncells + cell] = (struct cell_run){
            r.bytes_per_s / 1e6, r.iops, (double)r.lat_p50_ns / 1e3,
            (double)r.lat_p99_ns / 1e3, (double)r.lat_p999_ns / 1e3, r.cpu_s_per_gb,
            r.submits_per_io, true};
    if (k->rows)
        bench_print_result(k->out, c, &x, &r);
    return 0;
}

/* The --repeat table, then --output and --log-file closed; returns `rc`,
 * or 1 when closing failed. */
static int close_cells(struct cli *c, struct cells *k, int rc)
{
    if (k->runs && !k->rows) {
        bench_print_repeat_table(k->out, c, k->runs, k->reps);
        if (k->out == stdout)
            cli_flush();
    }
    free(k->runs);
    if (bench_close_output(k->out, c, c->output, rc != 0) && !rc)
        rc = 1;
    if (bench_close_log(c, rc != 0) && !rc)
        rc = 1;
    return rc;
}

/* ---- a job file's sections ------------------------------------------------ */

/* `pinio bench FILE.fio`: each group's sections at once, one thread each
 * (each a pinio_bench_run() with its own jobs), the groups in order; each
 * section's result, then the group's aggregate. */
static int run_jobfile(struct cli *top, int argc, char **argv)
{
    if (top->o.path || top->file_arg || top->directory || top->nrfiles || top->sweep)
        return bench_usage(top, "a job file names its own files: no %s with it",
                           top->sweep ? "--sweep" : "--file, PATH, --directory or --nrfiles");
    bench_jobfile jf = {0};
    char err[1024];
    int e = bench_jobfile_parse(top->job_file, &jf, err, sizeof err);
    if (e) {
        /* What the file says is wrong is a usage error (in JSON, as every
         * usage error: EINVAL); reading it is not. */
        bool usage = e == -ENOTSUP || e == -EINVAL;
        cli_failf("bench", top->fmt == FMT_JSON, usage ? -EINVAL : e, top->job_file, "%s", err);
        return usage ? 2 : 1;
    }
    for (size_t i = 0; i < jf.nnotes; i++)
        fprintf(stderr, "pinio bench: note: %s\n", jf.notes[i]);
    struct section *sec = calloc(jf.njobs, sizeof *sec);
    int rc = sec ? prepare_sections(top, &jf, sec, argc, argv)
                 : (fprintf(stderr, "pinio bench: out of memory\n"), 1);
    FILE *out = stdout;
    if (!rc && top->output && !(out = fopen(top->output, "w")))
        rc = cli_failf("bench", top->fmt == FMT_JSON, -errno, top->output, "--output %s: %s",
                       top->output, strerror(errno));
    for (size_t i = 0; i < jf.njobs && !rc; i++) {
        sec[i].c->log_by_rank = mpi_on();
        rc = bench_open_log(sec[i].c);
    }
    if (!rc)
        cli_stop_install();
    for (unsigned g = 0; g < jf.ngroups && !rc; g++)
        rc = run_group(top, &jf, sec, g, out);
    if (bench_close_output(out, top, top->output, rc != 0) && !rc)
        rc = 1;
    for (size_t i = 0; sec && i < jf.njobs; i++)
        if (sec[i].c && bench_close_log(sec[i].c, rc != 0) && !rc)
            rc = 1;
    free_sections(sec, jf.njobs);
    bench_jobfile_free(&jf);
    return rc;
}

/* Parses and checks every section before anything runs: a bad one must not
 * leave the sections before it done and a file created. */
static int prepare_sections(const struct cli *top, const bench_jobfile *jf, struct section *sec,
                            int argc, char **argv)
{
    int nextra, rc = 0;
    char **extra = extra_args(top, argc, argv, &nextra);
    if (!extra)
        return fprintf(stderr, "pinio bench: out of memory\n"), 1;
    for (size_t i = 0; i < jf->njobs && !rc; i++) {
        const bench_job *j = &jf->jobs[i];
        struct section *s = &sec[i];
        char **v = calloc((size_t)(j->argc + nextra) + 1, sizeof *v);
        if (!v || !(s->c = calloc(1, sizeof *s->c))) {
            free(v);
            fprintf(stderr, "pinio bench: out of memory\n");
            rc = 1;
            break;
        }
        memcpy(v, j->argv, (size_t)j->argc * sizeof *v);
        memcpy(v + j->argc, extra, (size_t)nextra * sizeof *v);
        snprintf(s->where, sizeof s->where, "%s: job '%s'", top->job_file, j->name);
        pinio_bench_opts_default(&s->c->o);
        s->c->where = s->where;
        s->c->job_name = j->name;
        s->c->group = j->group;
        rc = bench_parse_args(s->c, j->argc + nextra, v);
        free(v);
        if (!rc && (s->c->sweep || s->c->repeat || s->c->nbs > 1 || s->c->nqd > 1))
            rc = bench_usage(s->c, "--sweep does not go with a job file");
        if (!rc)
            rc = check_mpi(s->c);
#if PINIO_HAVE_MPI
        if (!rc && bench_mpi_rank() != 0)
            s->c->log_file = NULL; /* rank 0 writes each section's series */
#endif
        if (!rc)
            rc = bench_check_opts(s->c, &s->c->o, s->c->o.qd);
        s->x = s->c->o;
    }
    free(extra);
    /* No output may be a target of any section: sections run at once. */
    for (size_t i = 0; i < jf->njobs && !rc; i++)
        for (size_t k = 0; k < jf->njobs && !rc; k++) {
            const char *p = bench_target_named(sec[k].c, top->output);
            rc = p ? bench_usage(top, "--output %s is the target %s of job '%s': refusing to "
                                 "overwrite it with the results", top->output, p,
                                 jf->jobs[k].name)
                   : bench_check_outputs(sec[i].c, sec[k].c);
        }
    return rc == -1 ? 2 : rc; /* --help after a job file is no help */
}

/* The command line's options besides the job file itself: they apply to
 * every section, after the section's own (--allow-file-overwrite, --time 5
 * to shorten a long job, --output-format). getopt ran in order ('-' in the
 * optstring), so argv is as the user wrote it. */
static char **extra_args(const struct cli *top, int argc, char **argv, int *n)
{
    char **v = calloc((size_t)argc + 1, sizeof *v);
    *n = 0;
    for (int i = 1; v && i < argc; i++) {
        if (argv[i] == top->job_file)
            continue;
        if (!strncmp(argv[i], "--job-file", 10) && (!argv[i][10] || argv[i][10] == '='))
            continue; /* its value, when apart, is skipped above */
        v[(*n)++] = argv[i];
    }
    return v;
}

/* Group `g`: its sections at once, their results in order, then the
 * group's aggregate. Returns 0, or 1 when a section failed; Ctrl-C ends
 * the process here, after printing what completed. */
static int run_group(const struct cli *top, const bench_jobfile *jf, struct section *sec,
                     unsigned g, FILE *out)
{
    int rc = 0, e;
    size_t started = 0;
    for (size_t i = 0; i < jf->njobs; i++) {
        if (jf->jobs[i].group != g)
            continue;
        /* --mpi: each section is a collective of its own, run in turn below */
        if (!mpi_on() && (e = pthread_create(&sec[i].th, NULL, section_main, &sec[i]))) {
            rc = cli_failf("bench", top->fmt == FMT_JSON, -e, NULL, "%s: thread: %s",
                           sec[i].where, strerror(e));
            break;
        }
        started = i + 1;
    }
    bool stopped = false;
    struct group_sum sum = {0};
    for (size_t i = 0; i < started; i++) {
        if (jf->jobs[i].group != g)
            continue;
        if (mpi_on())
            section_main(&sec[i]);
        else
            pthread_join(sec[i].th, NULL);
        struct section *s = &sec[i];
        if (s->e == -ECANCELED) {
            stopped = true;
            if (!s->r.partial)
                continue;
        } else if (s->e) {
            bench_report_error(s->c, s->e, &s->d, s->x.path);
            rc = 1;
            continue;
        }
        if (s->c->fmt == FMT_NORMAL)
            fprintf(out, "[%s] group %u\n", jf->jobs[i].name, g);
        bench_print_result(out, s->c, &s->x, &s->r);
        bench_group_add(&sum, &s->r);
    }
    if (sum.sections) {
        bench_print_group(out, top->fmt, g, &sum);
        bench_flush(out);
    }
    if (stopped) {
        /* Ctrl-C: the partial results are out; die of the signal */
        if (out != stdout)
            fclose(out);
        for (size_t i = 0; i < jf->njobs; i++)
            bench_close_log(sec[i].c, true);
        cli_stop_reraise();
    }
    return rc;
}

static void *section_main(void *arg)
{
    struct section *s = arg;
    s->e = run_one(s->c, &s->x, &s->r, &s->d, true);
    return NULL;
}

static void free_sections(struct section *s, size_t n)
{
    for (size_t i = 0; s && i < n; i++)
        free(s[i].c);
    free(s);
}

/* ---- one run ----------------------------------------------------------------- */

/* One pinio_bench_run() of `x` with the command's callbacks: Ctrl-C through
 * the progress callback, a status line on a terminal unless `quiet`, per-job
 * figures, the --log-file time series. */
static int run_one(struct cli *c, pinio_bench_opts *x, pinio_bench_result *r, pinio_diag *d,
                   bool quiet)
{
#if PINIO_HAVE_MPI
    if (bench_mpi_on())
        return bench_mpi_run_one(c, x, r, d, quiet);
#endif
    cli_progress pg;
    cli_progress_start(&pg, "bench", CLI_PROGRESS_IOPS, quiet);
    x->progress = on_progress;
    x->progress_ctx = &pg;
    x->job_results = c->per_job;
    if (c->log) {
        x->interval_fn = bench_on_interval;
        x->interval_ctx = c;
    }
    memset(d, 0, sizeof *d);
    int e = pinio_bench_run(x, r, d);
    x->progress_ctx = NULL; /* &pg dies here */
    cli_progress_end(&pg);
    return e;
}

/* Always installed: it is also how SIGINT/SIGTERM stop a run (stop.h).
 * ctx: the progress line (drawn about once a second, as the library calls). */
static int on_progress(void *ctx, const pinio_progress *p)
{
    if (cli_stop_requested())
        return 1;
    cli_progress_update(ctx, p);
    return 0;
}
