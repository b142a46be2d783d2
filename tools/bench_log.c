/* `pinio bench --log-file`: the time series, a row per job and direction
 * per interval, as CSV or JSONL (the format scripts/plot reads). Under
 * --mpi, rank 0 writes the job's series after the run, a row per rank and
 * interval and their sum (rank -1), with the counts behind the rates: a
 * reader checks the bytes against the job's without rounding rates. */
#include <errno.h>
#include <string.h>

#include "bench_cli.h"
#include "util.h"


/* The --log-file row of one interval (the format scripts/plot reads). */
int bench_on_interval(void *ctx, const pinio_bench_interval *v)
{
    struct cli *c = ctx;
    static const char *const dirs[] = {"read", "write", "trim"};
    const char *dir = v->dir >= 0 && v->dir < 3 ? dirs[v->dir] : "?";
    bool ranks = c->log_by_rank;
    if (c->log_jsonl)
        fprintf(c->log, "{\"time_ms\":%.3f,\"%s\":%d,\"dir\":\"%s\",\"bw_bytes_per_s\":%.1f,"
                "\"iops\":%.1f,\"lat_mean_ns\":%.1f,\"lat_p50_ns\":%llu,\"lat_p99_ns\":%llu",
                v->time_ms, ranks ? "rank" : "job", v->job, dir, v->bytes_per_s, v->iops,
                v->lat_mean_ns, (unsigned long long)v->lat_p50_ns,
                (unsigned long long)v->lat_p99_ns);
    else
        fprintf(c->log, "%.3f,%d,%s,%.1f,%.1f,%.1f,%llu,%llu", v->time_ms, v->job, dir,
                v->bytes_per_s, v->iops, v->lat_mean_ns, (unsigned long long)v->lat_p50_ns,
                (unsigned long long)v->lat_p99_ns);
    if (c->sweep)
        fprintf(c->log, c->log_jsonl ? ",\"cell\":%u,\"bs_bytes\":%llu,\"qd\":%u" : ",%u,%llu,%u",
                c->log_cell, (unsigned long long)c->log_bs, c->log_qd);
    if (ranks)
        fprintf(c->log, c->log_jsonl ? ",\"bytes\":%llu,\"ios\":%llu" : ",%llu,%llu",
                (unsigned long long)v->bytes, (unsigned long long)v->ios);
    fputs(c->log_jsonl ? "}\n" : "\n", c->log);
    /* stdio keeps only a flag: the reason, while errno still has it */
    if (ferror(c->log) && !c->log_errno)
        c->log_errno = errno ? errno : EIO;
    return 0;
}

/* Opens --log-file: CSV with its header line, or JSONL when the name ends
 * in .jsonl. Returns 0, or 1 after saying why. */
int bench_open_log(struct cli *c)
{
    if (!c->log_file)
        return 0;
    size_t n = strlen(c->log_file);
    c->log_jsonl = n >= 6 && !strcmp(c->log_file + n - 6, ".jsonl");
    if (!(c->log = fopen(c->log_file, "w")))
        return cli_failf("bench", c->fmt == FMT_JSON, -errno, c->log_file, "--log-file %s: %s",
                         c->log_file, strerror(errno));
    c->log_errno = 0;
    /* A row out as its interval ends: `tail -f` (or a test) follows a long
     * run as it goes, and a run killed mid-way keeps what it measured. */
    setvbuf(c->log, NULL, _IOLBF, 0);
    if (!c->log_jsonl)
        fprintf(c->log, "time_ms,%s,dir,bw_bytes_per_s,iops,lat_mean_ns,lat_p50_ns,"
                "lat_p99_ns%s%s\n", c->log_by_rank ? "rank" : "job",
                c->sweep ? ",cell,bs_bytes,qd" : "", c->log_by_rank ? ",bytes,ios" : "");
    return 0;
}

/* Closes --log-file; 1 after saying why when its last writes failed. */
int bench_close_log(struct cli *c, bool quiet)
{
    if (!c->log)
        return 0;
    bool lost = ferror(c->log) != 0;
    int e = fclose(c->log) ? errno : 0;
    c->log = NULL;
    if (!lost && !e)
        return 0;
    e = c->log_errno ? c->log_errno : e ? e : EIO;
    if (!quiet)
        cli_failf("bench", c->fmt == FMT_JSON, -e, c->log_file, "--log-file %s: %s", c->log_file,
                  strerror(e));
    return 1;
}
