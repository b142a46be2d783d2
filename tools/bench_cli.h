/* What the files of `pinio bench` share (tools/):
 *
 *   cmd_bench.c     the command: one run, a --sweep grid, a job file's sections
 *   bench_args.c    the command line (and a job section's) into struct cli
 *   bench_output.c  the results: normal, JSON and terse; --repeat tables, groups
 *   bench_log.c     --log-file, the time series
 *   bench_jobfile.c fio job files into command lines
 */
#ifndef PINIO_CLI_BENCH_CLI_H
#define PINIO_CLI_BENCH_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "pinio/pinio.h"
#include "jw.h"


#define MAX_SWEEP 32
#define MAX_FILES 4096 /* pinio_bench_opts::paths */

/* What a sweep's rows say about where they ran, so that scripts/plot can
 * stamp a plot with it (its keys: device, fs, kernel, date) and rows of
 * different machines or days are not mistaken for one run. */
struct run_ctx {
    int repeat;       /* the repetition of the cell, or -1: no "repeat" key */
    char device[64];  /* the target's block device, or the mount's source */
    char fs[32];      /* its file system type; empty for a block device */
    char kernel[65];  /* uname -r */
    char date[32];    /* start of the sweep, UTC, ISO 8601 */
};

enum fmt { FMT_NORMAL, FMT_JSON, FMT_TERSE };

/* --engine: unset (the target's), io_uring, or HTTP range GETs (s3://). */
enum engine { ENGINE_AUTO, ENGINE_URING, ENGINE_S3 };

/* What a command line asks for beyond pinio_bench_opts, and the storage
 * the options borrow. */
struct cli {
    pinio_bench_opts o;
    /* A job file's section: "FILE: job 'NAME'", said before every usage
     * error, since its options came from the file, not the command line. */
    const char *where;
    const char *job_file;
    const char *job_name; /* the section's name in the results, or NULL */
    unsigned group;
    enum fmt fmt;
    enum engine engine;
    const char *output;
    bool sweep;
    bool verify_named; /* --verify=MODE: with --verify-only, the mode only */
    unsigned repeat;   /* --repeat: runs of each sweep cell (0: once, no key) */
    struct run_ctx ctx; /* a sweep's run context, for its JSON rows */
    bool group_reporting;
    const char *log_file;
    FILE *log;
    int log_errno;     /* the first failed write to the log */
    bool log_jsonl;
    bool log_by_rank;  /* --mpi: rank 0's merged series, a row per rank (set by cmd_bench.c) */
    pinio_bench_result per_job[256];
    uint64_t sweep_bs[MAX_SWEEP], sweep_qd[MAX_SWEEP];
    unsigned nbs, nqd;
    pinio_bench_bs_weight split[16];
    pinio_bench_zone zones[16];
    double pcts[PINIO_BENCH_MAX_PCT];
    /* Several files: --file's list (or the operand) as given, --directory
     * and --nrfiles, and the names settle_files() made of them. */
    const char *file_arg;
    const char *directory;
    unsigned nrfiles;
    char names[1 << 16];
    const char *paths[MAX_FILES];
    pinio_bench_file files_out[MAX_FILES];
    /* --log-file of a --sweep: the cell being run (its number from 1 in the
     * order run, over --repeat too, and its bs and qd), on every row, since
     * each cell's time starts again at 0. */
    unsigned log_cell, log_qd;
    uint64_t log_bs;
};

/* The figures of one run a --repeat table keeps. */
struct cell_run {
    double mbs, iops, p50, p99, p999, cpu, sub;
    bool done;
};

/* A group's aggregate as fio sums a group: bytes and requests added, the
 * time the longest section's (so MB/s is what the group moved per second
 * of its run), latency mean weighted by requests, min and max over all.
 * Percentiles do not add up from the sections' and are left out. */
struct group_sum {
    unsigned sections;
    uint64_t bytes, ios, lat_min, lat_max;
    double seconds, lat_sum_ns;
    bool partial;
};

/* ---- bench_args.c ------------------------------------------------------ */


/* A usage error (exit status 2), prefixed with the job section it came from. */
int bench_usage(const struct cli *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int bench_parse_args(struct cli *c, int argc, char **argv);
int bench_check_opts(const struct cli *c, const pinio_bench_opts *x, uint64_t qd);
/* The target of `t` that the file `name` is (the name, a link to it,
 * /proc/self/fd/N: one inode; or the name a new target will take), or NULL. */
const char *bench_target_named(const struct cli *t, const char *name);
/* c's --output and --log-file when either is a target of `t` (c itself, or
 * another section of its job file): a usage error, so that bench never
 * truncates what it is about to measure. 0, or 2 after saying so. */
int bench_check_outputs(const struct cli *c, const struct cli *t);

/* ---- bench_output.c ---------------------------------------------------- */

void bench_print_result(FILE *out, const struct cli *c, const pinio_bench_opts *o,
                        const pinio_bench_result *r);
void bench_report_error(const struct cli *c, int e, const pinio_diag *d, const char *path);
void bench_fill_ctx(struct run_ctx *x, const char *path);
void bench_print_repeat_table(FILE *out, const struct cli *c, const struct cell_run *runs,
                              unsigned reps);
void bench_group_add(struct group_sum *g, const pinio_bench_result *r);
void bench_print_group(FILE *out, enum fmt fmt, unsigned group, const struct group_sum *g);
/* Called at the end of each result printed (jw NULL: text), to add keys or
 * lines (bench_mpi.c's job tables); NULL: none. */
typedef void (*bench_extra_fn)(FILE *out, jw *w);
void bench_set_extra(bench_extra_fn fn);
/* A latency object of the JSON result (doc/json/bench.md's lat_ns) under `key`. */
void bench_json_lat(jw *w, const char *key, const pinio_bench_lat *l, const pinio_bench_opts *o);
/* Flushes a row of results: stdout through cli_flush(), --output keeping
 * its first write error for bench_close_output(). */
void bench_flush(FILE *out);
/* Closes --output (`out`, named `name`; stdout is left open): 0, or 1 when a
 * write or the close failed, said on stderr (and in JSON with --json)
 * unless `quiet`. */
int bench_close_output(FILE *out, const struct cli *c, const char *name, bool quiet);

/* ---- bench_log.c ------------------------------------------------------- */

int bench_open_log(struct cli *c);
int bench_close_log(struct cli *c, bool quiet);
int bench_on_interval(void *ctx, const pinio_bench_interval *v);

#endif
