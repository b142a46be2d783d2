/* pinio bench: an io_uring storage benchmark with fio's knobs
 * (pinio_bench_run(), include/pinio/bench.h). Every option is parsed and
 * checked before the target is opened, so a bad command line writes nothing. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <getopt.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pinio/pinio.h"
#include "bench_jobfile.h"
#include "cli.h"
#include "jw.h"
#include "progress.h"
#include "stop.h"
#include "util.h"

#define MAX_SWEEP 32
#define MAX_FILES 4096 /* pinio_bench_opts::paths */

static void usage(FILE *out)
{
    fprintf(out,
            "usage: pinio bench --file PATH [options]     (or: pinio bench PATH [options])\n"
            "       pinio bench JOB.fio [options]         (or: --job-file F: any name)\n"
            "workload\n"
            "  --rw read|randread|write|randwrite|rw|randrw   (default read)\n"
            "  --rw trim|randtrim   deallocate each request's range: a hole punched in a\n"
            "                   file, a discard on a block device (destroys data, as a write)\n"
            "  --rwmixread N    rw/randrw: per cent of requests that read, 1..99 (default 50)\n"
            "  --bs SIZE        bytes per request, multiple of 512 (default 1M)\n"
            "  --bssplit SPLIT  sizes by share of requests, e.g. 4k/50:64k/30:1m/20\n"
            "  --blockalign SIZE  random offsets with --bssplit: multiples of this\n"
            "  --qd N           requests in flight per job (default 16; also --iodepth)\n"
            "  --jobs N         threads, one ring and one file region each (default 1)\n"
            "  --jobs-share split|whole   split: each job its 1/N of the area (default);\n"
            "                   whole: each job over the whole area (fio's numjobs)\n"
            "  --bsrange A-B    random request sizes in A..B (multiples of --blockalign or 512)\n"
            "  --random-distribution random|zipf:T|pareto:H|normal:SIGMA%%|zoned:A/S:A/S...\n"
            "  --norandommap    random offsets drawn independently (default: each block once)\n"
            "where and how much\n"
            "  --file A,B,...   several files (also --filename; fio's a:b): --size is the\n"
            "                   total, split equally between them; each job uses its slice\n"
            "                   of every file; each file keeps its own order\n"
            "  --directory D    the files' folder: D/A for each --file name, or with\n"
            "  --nrfiles N      N files D/bench.0.0 .. D/bench.0.N-1 (fio's names; a job\n"
            "                   file's section names them after itself)\n"
            "  --file-service-type roundrobin[:N]|sequential|random[:N]\n"
            "                   the file of each request: the next one every N (default\n"
            "                   roundrobin:1), one file's share after the other, or a\n"
            "                   random one every N\n"
            "  --filesize SIZE  bytes of each file (a --size given is then the bytes to move)\n"
            "                   (existing files of different sizes without --size or\n"
            "                   --filesize: the smallest one's size from each)\n"
            "  --size SIZE      bytes to use, split between jobs (default: the file, or 1G new)\n"
            "  --offset SIZE    start of the used area in the target\n"
            "  --io-size SIZE   bytes to transfer (all jobs), looping over the area\n"
            "  --loops N        passes (default 1)\n"
            "time\n"
            "  --time SECONDS   run this long, looping over the area (also --runtime)\n"
            "  --ramp-time S    run this long first, left out of every figure (needs --time)\n"
            "  --startdelay S   each job waits this long before its first request\n"
            "  --rate SIZE      per job: at most SIZE bytes per second\n"
            "  --rate-iops N    per job: at most N requests per second\n"
            "  --thinktime USEC per job: issue nothing for USEC after each completion\n"
            "  --thinktime-blocks N   ... after every N completions instead (default 1)\n"
            "engine\n"
            "  --direct auto|on|off  O_DIRECT (default on; auto is on; 0|1 as before)\n"
            "  --fixed[=0|1]    registered buffers (default 1)\n"
            "  --regfiles       registered file table\n"
            "  --batch N|auto   requests gathered per submit call (default auto: 1 for\n"
            "                   random workloads, which cannot merge, qd for sequential)\n"
            "  --sqpoll         kernel submission thread (its CPU is not in the figures)\n"
            "  --iopoll         polled completions (needs NVMe poll queues)\n"
            "  --node N         NUMA node for buffers and threads\n"
            "  --cache cold     drop the file's cached pages first\n"
            "checking\n"
            "  --verify[=pattern|crc32c|sha256]  write runs: blocks carry a header\n"
            "                   (offset, seed, generation) and a pattern (default), or the\n"
            "                   payload's CRC-32C or SHA-256; read back and compare\n"
            "  --verify-only    read runs: check what a --verify run left, naming a\n"
            "                   misplaced block's offset (with --verify=MODE: that mode)\n"
            "  --seed N         random order and pattern seed (default 1)\n"
            "  --allow-device-overwrite   permit writes to a block device (one in use,\n"
            "                   e.g. mounted, is refused all the same)\n"
            "  --allow-file-overwrite     permit writes to an existing file holding data\n"
            "                   that bench did not write (default: refused)\n"
            "output\n"
            "  --output-format normal|json|terse   (--json = json; doc/json/bench.md)\n"
            "  --output FILE    write the results there instead of stdout\n"
            "  --percentile-list P:P:...   latency percentiles to report besides the fixed ones\n"
            "  --sweep bs=4k,64k,1m qd=1,4,16,64   run the grid, print a table\n"
            "  --repeat N       run each sweep cell N times (1 .. 100), the order reversed\n"
            "                   every other time; one row per run (\"repeat\": k), the\n"
            "                   table shows the median MB/s and its min..max\n"
            "  --group-reporting   several jobs: the aggregate only (default: each job too)\n"
            "  --log-interval MS   sampling interval of bw/IOPS samples and of --log-file\n"
            "                   (default 500)\n"
            "job files\n"
            "  --job-file F     run fio job file F ([global], job sections, stonewall): each\n"
            "                   group's sections at once, the groups in order; per section\n"
            "                   results, then the group's. An operand ending in .fio is one\n"
            "                   too. Other options given apply to every section\n"
            "  --log-file F     per-interval log: CSV (time_ms,job,dir,bw_bytes_per_s,iops,\n"
            "                   lat_mean_ns,lat_p50_ns,lat_p99_ns; job -1 = all), JSONL if F\n"
            "                   ends in .jsonl; with --sweep also cell,bs_bytes,qd\n"
            "A read of a missing file creates it first, filled with real data, under a\n"
            "temporary name renamed into place when complete. Ctrl-C or SIGTERM stops\n"
            "the run: the result so far is printed (marked partial), a file being made\n"
            "is removed, and the command dies of the signal (exit status 130 for Ctrl-C).\n"
            "Latency is reported as fio does: slat (issue to submission), clat (submission\n"
            "to completion), lat (issue to completion).\n"
            "Not supported yet: fio's trimwrite; zipf/pareto/normal --file-service-type.\n");
}

/* A 0|1 value of a flag given as --flag or --flag=0|1 (optional_argument). */
static int parse_flag(const char *v, bool *out)
{
    if (!v || !strcmp(v, "1") || !strcmp(v, "on"))
        *out = true;
    else if (!strcmp(v, "0") || !strcmp(v, "off"))
        *out = false;
    else
        return -EINVAL;
    return 0;
}

/* An unsigned option value no larger than `max`. */
static int parse_bounded(const char *v, uint64_t max, unsigned *out)
{
    uint64_t x;
    int rc = cli_parse_u64(v, &x);
    if (rc)
        return rc;
    if (x > max)
        return -EINVAL;
    *out = (unsigned)x;
    return 0;
}

/* Seconds, with an optional "s": finite, >= 0. */
static int parse_seconds(const char *v, double *out)
{
    char *e;
    double x = strtod(v, &e);
    if (e != v && *e == 's')
        e++;
    if (e == v || *e || !(x >= 0) || !isfinite(x))
        return -EINVAL;
    *out = x;
    return 0;
}

/* 4k/50:64k/30:1m/20 */
static int parse_bssplit(const char *s, pinio_bench_bs_weight *w, unsigned *n)
{
    char buf[512];
    if (strlen(s) >= sizeof buf)
        return -EINVAL;
    strcpy(buf, s);
    *n = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ":", &save); tok;
         tok = strtok_r(NULL, ":", &save)) {
        char *slash = strchr(tok, '/');
        uint64_t pct;
        if (*n == 16 || !slash)
            return -EINVAL;
        *slash = 0;
        if (cli_parse_size(tok, &w[*n].bs) || cli_parse_u64(slash + 1, &pct) || pct > 100)
            return -EINVAL;
        w[(*n)++].pct = (unsigned)pct;
    }
    return *n ? 0 : -EINVAL;
}

/* random|zipf:T|pareto:H|normal:S|zoned:A/S:A/S... */
static int parse_dist(const char *s, pinio_bench_opts *o, pinio_bench_zone *z)
{
    static const char *const names[] = {"random", "zipf", "pareto", "normal", "zoned"};
    size_t len = strcspn(s, ":");
    for (unsigned k = 0; k < 5; k++) {
        if (strlen(names[k]) != len || strncmp(s, names[k], len))
            continue;
        o->dist = (pinio_bench_dist)k;
        const char *v = s[len] ? s + len + 1 : NULL;
        if (k == 0)
            return v ? -EINVAL : 0;
        if (!v)
            return -EINVAL;
        if (k != PINIO_BENCH_DIST_ZONED) {
            char *e;
            o->dist_param = strtod(v, &e);
            return e == v || *e ? -EINVAL : 0;
        }
        o->nzones = 0;
        while (*v) {
            char *e;
            if (o->nzones == 16)
                return -EINVAL;
            z[o->nzones].access_pct = strtod(v, &e);
            if (e == v || *e != '/')
                return -EINVAL;
            v = e + 1;
            z[o->nzones].size_pct = strtod(v, &e);
            if (e == v || (*e && *e != ':'))
                return -EINVAL;
            o->nzones++;
            v = *e ? e + 1 : e;
        }
        o->zones = z;
        return o->nzones ? 0 : -EINVAL;
    }
    return -EINVAL;
}

/* 50:99:99.9 */
static int parse_pcts(const char *s, double *p, unsigned *n)
{
    *n = 0;
    while (*s) {
        char *e;
        if (*n == PINIO_BENCH_MAX_PCT)
            return -EINVAL;
        p[*n] = strtod(s, &e);
        if (e == s || (*e && *e != ':') || !(p[*n] > 0 && p[*n] <= 100))
            return -EINVAL;
        (*n)++;
        s = *e ? e + 1 : e;
    }
    return *n ? 0 : -EINVAL;
}

static int parse_list(const char *s, uint64_t *vals, unsigned *n, bool sizes)
{
    char buf[512];
    if (strlen(s) >= sizeof buf)
        return -EINVAL;
    strcpy(buf, s);
    *n = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        if (*n == MAX_SWEEP)
            return -EINVAL;
        if ((sizes ? cli_parse_size(tok, &vals[*n]) : cli_parse_u64(tok, &vals[*n])) ||
            !vals[*n])
            return -EINVAL;
        (*n)++;
    }
    return *n ? 0 : -EINVAL;
}

/* p99.9 -> "p99_9": JSON keys are identifiers in most consumers. */
static void pct_key(char *k, size_t cap, double p)
{
    snprintf(k, cap, "p%g", p);
    for (char *c = k; *c; c++)
        *c = *c == '.' ? '_' : *c;
}

static void json_lat(jw *w, const char *key, const pinio_bench_lat *l, const pinio_bench_opts *o)
{
    jw_key(w, key);
    jw_obj(w);
    jw_ku64(w, "count", l->count);
    jw_ku64(w, "min", l->min_ns);
    jw_kf64(w, "mean", l->mean_ns);
    jw_kf64(w, "stdev", l->stdev_ns);
    jw_ku64(w, "p50", l->p50_ns);
    jw_ku64(w, "p90", l->p90_ns);
    jw_ku64(w, "p99", l->p99_ns);
    jw_ku64(w, "p99_9", l->p999_ns);
    jw_ku64(w, "max", l->max_ns);
    /* --percentile-list apart: it may repeat a fixed key (p50) */
    jw_key(w, "percentiles");
    jw_obj(w);
    for (unsigned i = 0; i < o->npercentiles; i++) {
        char k[32];
        pct_key(k, sizeof k, o->percentiles[i]);
        jw_ku64(w, k, l->pct_ns[i]);
    }
    jw_obj_end(w);
    jw_obj_end(w);
}

static void json_samples(jw *w, const char *key, const pinio_bench_samples *s)
{
    jw_key(w, key);
    jw_obj(w);
    jw_ku64(w, "samples", s->samples);
    jw_kf64(w, "min", s->min);
    jw_kf64(w, "max", s->max);
    jw_kf64(w, "mean", s->mean);
    jw_kf64(w, "stdev", s->stdev);
    jw_obj_end(w);
}

static void json_dir(jw *w, const char *key, const pinio_bench_dir *d, const pinio_bench_opts *o)
{
    jw_key(w, key);
    jw_obj(w);
    jw_ku64(w, "bytes", d->bytes);
    jw_ku64(w, "ios", d->ios);
    jw_kf64(w, "bw_mb_per_s", d->bytes_per_s / 1e6);
    jw_kf64(w, "iops", d->iops);
    json_lat(w, "lat_ns", &d->lat, o);
    json_lat(w, "slat_ns", &d->slat, o);
    json_lat(w, "clat_ns", &d->clat, o);
    json_samples(w, "bw_samples_bytes_per_s", &d->bw_samples);
    json_samples(w, "iops_samples", &d->iops_samples);
    jw_obj_end(w);
}

/* The figures of one result: the aggregate's, or one job's. */
static void json_figures(jw *w, const pinio_bench_opts *o, const pinio_bench_result *r)
{
    jw_ku64(w, "bytes", r->bytes);
    jw_ku64(w, "ios", r->ios);
    jw_kf64(w, "elapsed_s", r->seconds);
    jw_kf64(w, "bw_mb_per_s", r->bytes_per_s / 1e6);
    jw_kf64(w, "iops", r->iops);
    json_lat(w, "lat_ns", &r->lat, o);
    json_lat(w, "slat_ns", &r->slat, o);
    json_lat(w, "clat_ns", &r->clat, o);
    json_dir(w, "read", &r->read, o);
    json_dir(w, "write", &r->write, o);
    json_dir(w, "trim", &r->trim, o);
    jw_kf64(w, "cpu_user_s", r->cpu_user_s);
    jw_kf64(w, "cpu_sys_s", r->cpu_sys_s);
    jw_kf64(w, "cpu_s_per_gb", r->cpu_s_per_gb);
    jw_kf64(w, "submits_per_io", r->submits_per_io);
    jw_ku64(w, "verify_submits", r->verify_submits);
    jw_ku64(w, "verified_bytes", r->verified_bytes);
}

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

/* The run's files (files_out, filled by the run): "files" always, the
 * service order only when there are several. */
static void json_files(jw *w, const pinio_bench_opts *o)
{
    unsigned n = o->npaths ? o->npaths : 1;
    if (!o->files_out)
        return;
    if (o->npaths > 1) {
        jw_kstr(w, "file_service", pinio_bench_file_service_name(o->file_service));
        jw_ku64(w, "file_service_nr", o->file_service_nr ? o->file_service_nr : 1);
    }
    jw_key(w, "files");
    jw_arr(w);
    for (unsigned i = 0; i < n; i++) {
        jw_obj(w);
        jw_kstr(w, "path", o->npaths ? o->paths[i] : o->path);
        jw_ku64(w, "size_bytes", o->files_out[i].size);
        jw_ku64(w, "used_bytes", o->files_out[i].used);
        jw_kbool(w, "created", o->files_out[i].created);
        jw_obj_end(w);
    }
    jw_arr_end(w);
}

/* The keys are documented in doc/json/bench.md. */
static void print_json(FILE *out, const pinio_bench_opts *o, const pinio_bench_result *r,
                       const pinio_bench_result *per_job, const char *job_name, unsigned group,
                       const struct run_ctx *ctx)
{
    jw w;
    jw_init(&w, out);
    jw_begin(&w, "bench");
    if (ctx) {
        if (ctx->repeat >= 0)
            jw_ku64(&w, "repeat", (uint64_t)ctx->repeat);
        if (ctx->device[0])
            jw_kstr(&w, "device", ctx->device);
        if (ctx->fs[0])
            jw_kstr(&w, "fs", ctx->fs);
        jw_kstr(&w, "kernel", ctx->kernel);
        jw_kstr(&w, "date", ctx->date);
    }
    if (job_name) { /* a job file's section */
        jw_kstr(&w, "job_name", job_name);
        jw_ku64(&w, "group", group);
    }
    jw_kstr(&w, "file", o->path);
    json_files(&w, o);
    jw_kstr(&w, "rw", pinio_bench_rw_name(o->rw));
    if (o->rw == PINIO_BENCH_RW || o->rw == PINIO_BENCH_RANDRW)
        jw_ku64(&w, "rwmixread", o->rwmixread ? o->rwmixread : 50);
    jw_ku64(&w, "bs_bytes", o->bs);
    jw_ku64(&w, "qd", o->qd);
    jw_ku64(&w, "jobs", o->jobs);
    jw_kbool(&w, "direct", o->direct);
    jw_kbool(&w, "fixed", o->fixed);
    jw_kbool(&w, "regfiles", o->regfiles);
    jw_kbool(&w, "sqpoll", o->sqpoll);
    jw_kbool(&w, "iopoll", o->iopoll);
    jw_ki64(&w, "node", o->node);
    jw_kstr(&w, "cache", o->cache_cold ? "cold" : "keep");
    jw_kf64(&w, "time_limit_s", o->time_s);
    jw_kf64(&w, "ramp_time_s", o->ramp_time_s);
    jw_ku64(&w, "offset_bytes", o->offset);
    jw_kbool(&w, "verify", o->verify);
    jw_kbool(&w, "verify_only", o->verify_only);
    if (o->verify || o->verify_only)
        jw_kstr(&w, "verify_mode", pinio_bench_verify_mode_name(o->verify_mode));
    jw_ku64(&w, "batch", r->batch);
    jw_kbool(&w, "partial", r->partial);
    jw_ku64(&w, "interval_ms", o->interval_ms ? o->interval_ms : 500);
    json_figures(&w, o, r);
    /* "jobs" is the count (schema 2), so the per-job figures are apart */
    if (per_job) {
        jw_key(&w, "job_results");
        jw_arr(&w);
        for (unsigned i = 0; i < o->jobs; i++) {
            jw_obj(&w);
            jw_ku64(&w, "job", i);
            json_figures(&w, o, &per_job[i]);
            jw_obj_end(&w);
        }
        jw_arr_end(&w);
    }
    jw_ku64(&w, "file_size_bytes", r->file_size);
    jw_kbool(&w, "created", r->created);
    jw_key(&w, "features");
    jw_arr(&w);
    char f[sizeof r->features];
    strcpy(f, r->features);
    for (char *save = NULL, *t = strtok_r(f, ",", &save); t; t = strtok_r(NULL, ",", &save))
        jw_str(&w, t);
    jw_arr_end(&w);
    jw_obj_end(&w);
    jw_finish(&w);
}

/* One ;-separated line per run and, before it, one per job (fields in
 * doc/json/bench.md, "terse"): what a shell script cuts with `cut -d';'`.
 * Version 2: version 1's 35 fields, then the job (-1: all) and slat/clat;
 * version 3: then the trims' ten, as fio's terse v3 has a trim group. */
/* One direction's ten terse fields. */
static void terse_dir(FILE *out, const pinio_bench_dir *d)
{
    fprintf(out, ";%llu;%llu;%.3f;%.1f;%.0f;%.0f;%llu;%llu;%llu;%llu",
            (unsigned long long)d->bytes, (unsigned long long)d->ios, d->bytes_per_s / 1e6,
            d->iops, d->lat.mean_ns, d->lat.stdev_ns, (unsigned long long)d->lat.p50_ns,
            (unsigned long long)d->lat.p99_ns, (unsigned long long)d->lat.p999_ns,
            (unsigned long long)d->lat.max_ns);
}

static void print_terse(FILE *out, const pinio_bench_opts *o, const pinio_bench_result *r, int job)
{
    fprintf(out, "pinio-bench;3;%s;%s;%llu;%u;%u;%llu;%llu;%.6f;%.3f;%.1f", pinio_version(),
            pinio_bench_rw_name(o->rw), (unsigned long long)o->bs, o->qd, o->jobs,
            (unsigned long long)r->bytes, (unsigned long long)r->ios, r->seconds,
            r->bytes_per_s / 1e6, r->iops);
    terse_dir(out, &r->read);
    terse_dir(out, &r->write);
    fprintf(out, ";%.6f;%.4f;%d;%d;%.0f;%llu;%.0f;%llu", r->cpu_s_per_gb, r->submits_per_io,
            r->partial ? 1 : 0, job, r->slat.mean_ns, (unsigned long long)r->slat.p99_ns,
            r->clat.mean_ns, (unsigned long long)r->clat.p99_ns);
    terse_dir(out, &r->trim);
    fputc('\n', out);
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

static void text_dir(FILE *out, const char *name, const pinio_bench_dir *d)
{
    char s[32];
    fprintf(out, "  %s: %s, %.1f MB/s, %.0f IOPS; latency us: mean %.1f stdev %.1f  p50 %.1f  "
            "p99 %.1f  p99.9 %.1f  max %.1f\n",
            name, cli_human_bytes(s, sizeof s, d->bytes), d->bytes_per_s / 1e6, d->iops,
            d->lat.mean_ns / 1e3, d->lat.stdev_ns / 1e3, (double)d->lat.p50_ns / 1e3,
            (double)d->lat.p99_ns / 1e3, (double)d->lat.p999_ns / 1e3,
            (double)d->lat.max_ns / 1e3);
}

static void text_lat(FILE *out, const char *name, const pinio_bench_lat *l)
{
    fprintf(out, "  %s us: min %.1f  mean %.1f  stdev %.1f  p50 %.1f  p99 %.1f  max %.1f\n", name,
            (double)l->min_ns / 1e3, l->mean_ns / 1e3, l->stdev_ns / 1e3,
            (double)l->p50_ns / 1e3, (double)l->p99_ns / 1e3, (double)l->max_ns / 1e3);
}

static void text_samples(FILE *out, const pinio_bench_dir *d, const char *name)
{
    const pinio_bench_samples *b = &d->bw_samples, *i = &d->iops_samples;
    if (!b->samples)
        return;
    fprintf(out, "  %s samples: %llu, MB/s min %.1f max %.1f mean %.1f stdev %.1f; IOPS min "
            "%.0f max %.0f mean %.0f stdev %.0f\n", name, (unsigned long long)b->samples,
            b->min / 1e6, b->max / 1e6, b->mean / 1e6, b->stdev / 1e6, i->min, i->max, i->mean,
            i->stdev);
}

static void text_figures(FILE *out, const pinio_bench_opts *o, const pinio_bench_result *r);

/* Several files: one line each, after the service order. */
static void text_files(FILE *out, const pinio_bench_opts *o)
{
    char u[32], sz[32];
    if (o->npaths < 2 || !o->files_out)
        return;
    fprintf(out, "  files, %s", pinio_bench_file_service_name(o->file_service));
    if (o->file_service_nr > 1)
        fprintf(out, ":%u", o->file_service_nr);
    fprintf(out, ":\n");
    for (unsigned i = 0; i < o->npaths; i++)
        fprintf(out, "  %s: %s used of %s%s\n", o->paths[i],
                cli_human_bytes(u, sizeof u, o->files_out[i].used),
                cli_human_bytes(sz, sizeof sz, o->files_out[i].size),
                o->files_out[i].created ? " (created)" : "");
}

static void print_text(FILE *out, const pinio_bench_opts *o, const pinio_bench_result *r,
                       const pinio_bench_result *per_job)
{
    char b[80], b2[32];
    cli_human_bytes(b, sizeof b, o->bsrange_max ? o->bsrange_min : o->bs);
    if (o->bsrange_max) /* the range, not the bs it ignores */
        snprintf(b + strlen(b), sizeof b - strlen(b), "-%s",
                 cli_human_bytes(b2, sizeof b2, o->bsrange_max));
    char nf[32];
    snprintf(nf, sizeof nf, "%u files", o->npaths);
    fprintf(out, "pinio bench: %s bs=%s qd=%u batch=%u jobs=%u %s [%s]%s%s\n",
            pinio_bench_rw_name(o->rw), b, o->qd, r->batch,
            o->jobs, o->npaths > 1 ? nf : o->path, r->features, r->created ? " (created)" : "",
            r->partial ? " (stopped: partial result)" : "");
    text_files(out, o);
    for (unsigned i = 0; per_job && i < o->jobs; i++) {
        fprintf(out, "job %u:\n", i);
        text_figures(out, o, &per_job[i]);
    }
    if (per_job)
        fprintf(out, "all jobs:\n");
    text_figures(out, o, r);
}

static void text_figures(FILE *out, const pinio_bench_opts *o, const pinio_bench_result *r)
{
    char s[32];
    fprintf(out, "  %s in %.3f s: %.1f MB/s (10^6 B/s), %.0f IOPS\n",
            cli_human_bytes(s, sizeof s, r->bytes), r->seconds, r->bytes_per_s / 1e6, r->iops);
    fprintf(out, "  latency us: min %.1f  mean %.1f  stdev %.1f  p50 %.1f  p90 %.1f  p99 %.1f  "
            "p99.9 %.1f  max %.1f\n",
            (double)r->lat_min_ns / 1e3, r->lat.mean_ns / 1e3, r->lat.stdev_ns / 1e3,
            (double)r->lat_p50_ns / 1e3, (double)r->lat_p90_ns / 1e3,
            (double)r->lat_p99_ns / 1e3, (double)r->lat_p999_ns / 1e3,
            (double)r->lat_max_ns / 1e3);
    if (o->npercentiles) {
        fprintf(out, "  percentiles us:");
        for (unsigned i = 0; i < o->npercentiles; i++)
            fprintf(out, "  p%g %.1f", o->percentiles[i], (double)r->lat.pct_ns[i] / 1e3);
        fprintf(out, "\n");
    }
    text_lat(out, "slat", &r->slat);
    text_lat(out, "clat", &r->clat);
    if (r->read.ios && r->write.ios) {
        text_dir(out, "read ", &r->read);
        text_dir(out, "write", &r->write);
    }
    text_samples(out, &r->read, "read");
    text_samples(out, &r->write, "write");
    text_samples(out, &r->trim, "trim");
    fprintf(out, "  CPU %.4f s/GB (user %.3f s, sys %.3f s), %.3f submit calls per I/O\n",
            r->cpu_s_per_gb, r->cpu_user_s, r->cpu_sys_s, r->submits_per_io);
    if (o->verify || o->verify_only)
        fprintf(out, "  verify: %s read back, all blocks match\n",
                cli_human_bytes(s, sizeof s, r->verified_bytes));
}

enum fmt { FMT_NORMAL, FMT_JSON, FMT_TERSE };

enum {
    O_FILE = 256, O_RW, O_MIX, O_BS, O_BSSPLIT, O_ALIGN, O_QD, O_JOBS, O_SIZE, O_OFFSET,
    O_IOSIZE, O_LOOPS, O_TIME, O_RAMP, O_DELAY, O_RATE, O_RATEIOPS, O_DIST, O_NOMAP, O_DIRECT,
    O_FIXED, O_REGFILES, O_SQPOLL, O_IOPOLL, O_BATCH, O_NODE, O_CACHE, O_VERIFY, O_VONLY,
    O_DEVOK, O_FILEOK, O_SEED, O_JSON, O_OUTPUT, O_FORMAT, O_PCT, O_SWEEP, O_REPEAT, O_GROUP, O_LOGINT,
    O_LOGFILE, O_JOBFILE, O_THINK, O_THINKBLK, O_BSRANGE, O_SHARE,
};

/* Several files: their own range, so that the list above grows apart. */
enum { O_DIRECTORY = 512, O_NRFILES, O_FSERVICE, O_FILESIZE };

static const struct option longopts[] = {
    {"file", required_argument, NULL, O_FILE},
    {"filename", required_argument, NULL, O_FILE},
    {"directory", required_argument, NULL, O_DIRECTORY},
    {"nrfiles", required_argument, NULL, O_NRFILES},
    {"file-service-type", required_argument, NULL, O_FSERVICE},
    {"filesize", required_argument, NULL, O_FILESIZE},
    {"rw", required_argument, NULL, O_RW},
    {"rwmixread", required_argument, NULL, O_MIX},
    {"bs", required_argument, NULL, O_BS},
    {"bssplit", required_argument, NULL, O_BSSPLIT},
    {"blockalign", required_argument, NULL, O_ALIGN},
    {"qd", required_argument, NULL, O_QD},
    {"iodepth", required_argument, NULL, O_QD},
    {"jobs", required_argument, NULL, O_JOBS},
    {"numjobs", required_argument, NULL, O_JOBS},
    {"size", required_argument, NULL, O_SIZE},
    {"offset", required_argument, NULL, O_OFFSET},
    {"io-size", required_argument, NULL, O_IOSIZE},
    {"loops", required_argument, NULL, O_LOOPS},
    {"time", required_argument, NULL, O_TIME},
    {"runtime", required_argument, NULL, O_TIME},
    {"ramp-time", required_argument, NULL, O_RAMP},
    {"startdelay", required_argument, NULL, O_DELAY},
    {"rate", required_argument, NULL, O_RATE},
    {"rate-iops", required_argument, NULL, O_RATEIOPS},
    {"random-distribution", required_argument, NULL, O_DIST},
    {"norandommap", no_argument, NULL, O_NOMAP},
    {"direct", required_argument, NULL, O_DIRECT},
    {"fixed", optional_argument, NULL, O_FIXED},
    {"regfiles", optional_argument, NULL, O_REGFILES},
    {"sqpoll", optional_argument, NULL, O_SQPOLL},
    {"iopoll", optional_argument, NULL, O_IOPOLL},
    {"batch", required_argument, NULL, O_BATCH},
    {"node", required_argument, NULL, O_NODE},
    {"cache", required_argument, NULL, O_CACHE},
    {"verify", optional_argument, NULL, O_VERIFY},
    {"verify-only", no_argument, NULL, O_VONLY},
    {"allow-device-overwrite", no_argument, NULL, O_DEVOK},
    {"allow-file-overwrite", no_argument, NULL, O_FILEOK},
    {"seed", required_argument, NULL, O_SEED},
    {"json", no_argument, NULL, O_JSON},
    {"output", required_argument, NULL, O_OUTPUT},
    {"output-format", required_argument, NULL, O_FORMAT},
    {"percentile-list", required_argument, NULL, O_PCT},
    {"sweep", no_argument, NULL, O_SWEEP},
    {"repeat", required_argument, NULL, O_REPEAT},
    {"group-reporting", no_argument, NULL, O_GROUP},
    {"log-interval", required_argument, NULL, O_LOGINT},
    {"log-file", required_argument, NULL, O_LOGFILE},
    {"job-file", required_argument, NULL, O_JOBFILE},
    {"thinktime", required_argument, NULL, O_THINK},
    {"thinktime-blocks", required_argument, NULL, O_THINKBLK},
    {"bsrange", required_argument, NULL, O_BSRANGE},
    {"jobs-share", required_argument, NULL, O_SHARE},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

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
    const char *output;
    bool sweep;
    bool verify_named; /* --verify=MODE: with --verify-only, the mode only */
    unsigned repeat;   /* --repeat: runs of each sweep cell (0: once, no key) */
    struct run_ctx ctx; /* a sweep's run context, for its JSON rows */
    bool group_reporting;
    const char *log_file;
    FILE *log;
    bool log_jsonl;
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

/* A usage error (exit status 2), prefixed with the job section it came from. */
static int bench_usage(const struct cli *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int bench_usage(const struct cli *c, const char *fmt, ...)
{
    char m[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    return cli_usage("bench", "%s%s%s", c->where ? c->where : "", c->where ? ": " : "", m);
}

/* Parses one option; returns 0, or the usage exit status (2) after saying why. */
static int parse_opt(struct cli *c, int opt, const char *v)
{
    pinio_bench_opts *o = &c->o;
    const char *name = NULL;
    for (const struct option *l = longopts; l->name && !name; l++)
        if (l->val == opt)
            name = l->name;
    int rc = 0;
    bool b = false; /* read even when parse_flag() refused the value */
    switch (opt) {
    case O_FILE: c->file_arg = v; break; /* a list: settle_files() */
    case O_DIRECTORY: c->directory = v; break;
    case O_NRFILES: rc = parse_bounded(v, MAX_FILES, &c->nrfiles); rc = rc || !c->nrfiles ? -EINVAL : 0; break;
    case O_FSERVICE: rc = pinio_bench_file_service_parse(v, &o->file_service, &o->file_service_nr); break;
    case O_FILESIZE: rc = cli_parse_size(v, &o->filesize); break;
    case O_RW: rc = pinio_bench_rw_parse(v, &o->rw); break;
    case O_MIX: rc = parse_bounded(v, 99, &o->rwmixread); rc = rc || !o->rwmixread ? -EINVAL : 0; break;
    case O_BS: rc = cli_parse_size(v, &o->bs); break;
    case O_BSSPLIT:
        rc = parse_bssplit(v, c->split, &o->nbssplit);
        o->bssplit = c->split;
        break;
    case O_ALIGN: rc = cli_parse_size(v, &o->blockalign); break;
    case O_QD: rc = parse_bounded(v, 4096, &o->qd); break;
    case O_JOBS: rc = parse_bounded(v, 256, &o->jobs); break;
    case O_SIZE: rc = cli_parse_size(v, &o->size); break;
    case O_OFFSET: rc = cli_parse_size(v, &o->offset); break;
    case O_IOSIZE: rc = cli_parse_size(v, &o->io_size); break;
    case O_LOOPS: rc = parse_bounded(v, 1000000, &o->loops); rc = rc || !o->loops ? -EINVAL : 0; break;
    case O_TIME:
        rc = parse_seconds(v, &o->time_s);
        rc = rc || o->time_s < 1e-3 ? -EINVAL : 0;
        break;
    case O_RAMP: rc = parse_seconds(v, &o->ramp_time_s); break;
    case O_DELAY: rc = parse_seconds(v, &o->startdelay_s); break;
    case O_RATE: rc = cli_parse_size(v, &o->rate_bytes_per_s); break;
    case O_RATEIOPS: rc = cli_parse_u64(v, &o->rate_iops); break;
    case O_DIST: rc = parse_dist(v, o, c->zones); break;
    case O_NOMAP: o->norandommap = true; break;
    case O_DIRECT: {
        /* bench measures storage: auto is on; 0|1 as before */
        pinio_direct_policy d;
        if (!strcmp(v, "1") || !strcmp(v, "0"))
            o->direct = v[0] == '1';
        else if (!(rc = cli_parse_direct(v, &d)))
            o->direct = d != PINIO_DIRECT_OFF;
        break;
    }
    case O_FIXED: rc = parse_flag(v, &o->fixed); break;
    case O_REGFILES: rc = parse_flag(v, &o->regfiles); break;
    case O_SQPOLL: rc = parse_flag(v, &o->sqpoll); break;
    case O_IOPOLL: rc = parse_flag(v, &o->iopoll); break;
    case O_BATCH:
        if (!strcmp(v, "auto"))
            o->batch = 0;
        else if (!(rc = parse_bounded(v, 4096, &o->batch)) && !o->batch)
            rc = -EINVAL; /* 0 is spelled "auto" */
        break;
    case O_NODE: {
        unsigned node = 0;
        if (!strcmp(v, "-1")) /* the default: no node, spelled as it is shown */
            o->node = -1;
        else if (!(rc = parse_bounded(v, 4095, &node)))
            o->node = (int)node;
        break;
    }
    case O_CACHE:
        if (!strcmp(v, "cold"))
            o->cache_cold = true;
        else if (!strcmp(v, "keep") || !strcmp(v, "warm"))
            o->cache_cold = false;
        else
            rc = -EINVAL;
        break;
    case O_VERIFY:
        /* A mode name also says how --verify-only checks (fio's
         * verify=crc32c with verify_only): bench_parse_args() drops the write
         * pass then. 0|1 as before. */
        if (v && !pinio_bench_verify_mode_parse(v, &o->verify_mode))
            o->verify = true, c->verify_named = true;
        else
            rc = parse_flag(v, &b), o->verify = b;
        break;
    case O_VONLY: o->verify_only = true; break;
    case O_DEVOK: o->allow_device_overwrite = true; break;
    case O_FILEOK: o->allow_file_overwrite = true; break;
    case O_SEED: rc = cli_parse_u64(v, &o->seed); break;
    case O_JSON: c->fmt = FMT_JSON; break;
    case O_OUTPUT: c->output = v; break;
    case O_FORMAT:
        if (!strcmp(v, "normal"))
            c->fmt = FMT_NORMAL;
        else if (!strcmp(v, "json"))
            c->fmt = FMT_JSON;
        else if (!strcmp(v, "terse"))
            c->fmt = FMT_TERSE;
        else
            rc = -EINVAL;
        break;
    case O_PCT:
        rc = parse_pcts(v, c->pcts, &o->npercentiles);
        o->percentiles = c->pcts;
        break;
    case O_SWEEP: c->sweep = true; break;
    case O_REPEAT: rc = parse_bounded(v, 100, &c->repeat); rc = rc ? rc : c->repeat ? 0 : -EINVAL; break;
    case O_GROUP: c->group_reporting = true; break;
    case O_LOGINT: rc = parse_bounded(v, 3600000, &o->interval_ms); rc = rc || !o->interval_ms ? -EINVAL : 0; break;
    case O_LOGFILE: c->log_file = v; break;
    case O_THINK: rc = cli_parse_u64(v, &o->thinktime_us); break;
    case O_THINKBLK:
        rc = parse_bounded(v, 1u << 30, &o->thinktime_blocks);
        rc = rc || !o->thinktime_blocks ? -EINVAL : 0;
        break;
    case O_BSRANGE: {
        char a[64];
        const char *dash = strchr(v, '-');
        size_t n = dash ? (size_t)(dash - v) : 0;
        if (!dash || n >= sizeof a || (memcpy(a, v, n), a[n] = 0, cli_parse_size(a, &o->bsrange_min)) ||
            cli_parse_size(dash + 1, &o->bsrange_max))
            rc = -EINVAL;
        break;
    }
    case O_SHARE:
        if (!strcmp(v, "split") || !strcmp(v, "whole"))
            o->jobs_whole = v[0] == 'w';
        else
            rc = -EINVAL;
        break;
    case O_JOBFILE:
        if (c->where) /* the reader never writes it; said for completeness */
            return bench_usage(c, "--job-file inside a job file");
        c->job_file = v;
        break;
    }
    if (rc)
        return bench_usage(c, "bad value '%s' for --%s", v ? v : "", name ? name : "?");
    return 0;
}

/* Operands: the target (or the old positional PATH), a job file (a name
 * ending in .fio: the rule is on the name alone, so that `pinio bench x`
 * never changes meaning with what happens to exist), and --sweep's lists. */
static int parse_operand(struct cli *c, const char *a)
{
    if (c->sweep && (!strncmp(a, "bs=", 3) || !strncmp(a, "qd=", 3))) {
        bool is_bs = a[0] == 'b';
        if (parse_list(a + 3, is_bs ? c->sweep_bs : c->sweep_qd, is_bs ? &c->nbs : &c->nqd, is_bs))
            return bench_usage(c, "bad value in '%s'", a);
        return 0;
    }
    size_t n = strlen(a);
    if (!c->where && !c->job_file && n > 4 && !strcmp(a + n - 4, ".fio")) {
        c->job_file = a;
        return 0;
    }
    if (!c->o.path && !c->file_arg) {
        c->file_arg = a;
        return 0;
    }
    return bench_usage(c, "unexpected argument '%s'", a);
}

/* Appends "DIR/name" (DIR when --directory is set) to the names; 0 or -1
 * when they do not fit. */
static int add_file(struct cli *c, size_t *used, const char *name, size_t len)
{
    pinio_bench_opts *o = &c->o;
    char *at = c->names + *used;
    size_t room = sizeof c->names - *used;
    int n = c->directory ? snprintf(at, room, "%s/%.*s", c->directory, (int)len, name)
                         : snprintf(at, room, "%.*s", (int)len, name);
    if (n < 0 || (size_t)n >= room || o->npaths >= MAX_FILES)
        return -1;
    c->paths[o->npaths++] = at;
    *used += (size_t)n + 1;
    return 0;
}

/* The files of the run, as fio names them: --file a,b,c (each under
 * --directory when given), or --nrfiles N in --directory (or the current
 * one) named JOBNAME.0.FILENUM, the job's name being its job file
 * section's or "bench" (fio's JOBNUM is 0: bench's --jobs share one set of
 * files). One file stays pinio_bench_opts::path; several fill paths, with
 * path the first (what the messages and the "file" key name). */
static int settle_files(struct cli *c)
{
    pinio_bench_opts *o = &c->o;
    size_t used = 0;
    o->npaths = 0;
    if (c->file_arg && c->nrfiles)
        return bench_usage(c, "--nrfiles names its files (%s.0.N): not with --file",
                           c->job_name ? c->job_name : "bench");
    if (c->file_arg) {
        for (const char *p = c->file_arg;;) {
            size_t len = strcspn(p, ",");
            if (!len)
                return bench_usage(c, "--file %s: an empty name in the list", c->file_arg);
            if (add_file(c, &used, p, len))
                return bench_usage(c, "--file: more than %d files or too long names", MAX_FILES);
            if (!p[len])
                break;
            p += len + 1;
        }
    } else if (c->nrfiles || c->directory) {
        const char *job = c->job_name ? c->job_name : "bench";
        for (unsigned i = 0; i < (c->nrfiles ? c->nrfiles : 1); i++) {
            char name[512];
            int n = snprintf(name, sizeof name, "%s.0.%u", job, i);
            if (n < 0 || (size_t)n >= sizeof name || add_file(c, &used, name, (size_t)n))
                return bench_usage(c, "--nrfiles: the names are too long");
        }
    } else {
        return 0; /* no target: pinio_bench_check() says so */
    }
    o->path = c->paths[0];
    o->paths = o->npaths > 1 ? c->paths : NULL;
    o->npaths = o->npaths > 1 ? o->npaths : 0;
    o->files_out = c->files_out;
    return 0;
}

/* Parses a command line (the user's, or a job section's) into `c`, which
 * starts from the defaults. Returns 0, 2 after a usage error, or -1 after
 * printing --help. getopt keeps state between calls: optind = 0 makes glibc
 * start afresh, as every section's argv needs. */
static int bench_parse_args(struct cli *c, int argc, char **argv)
{
    int rc = 0, opt;
    optind = 0;
    opterr = 0;
    while (!rc && (opt = getopt_long(argc, argv, "-:h", longopts, NULL)) != -1) {
        if (opt == 'h') {
            usage(stdout);
            return -1;
        } else if (opt == 1) {
            rc = parse_operand(c, optarg);
        } else if ((opt == '?' || opt == ':') && c->where) {
            /* the job file reader wrote an option this bench lacks */
            const char *arg = optind > 0 ? argv[optind - 1] : "?";
            rc = bench_usage(c, "%s '%s'", opt == ':' ? "no value for" :
                             "pinio bench does not support", arg);
        } else if (opt == '?' || opt == ':') {
            rc = cli_getopt_error("bench", opt, argv);
        } else {
            rc = parse_opt(c, opt, optarg);
        }
    }
    if (!rc && !c->job_file)
        rc = settle_files(c);
    if (rc)
        return rc;
    if (c->o.verify_only && c->verify_named)
        c->o.verify = false;
    if (c->sweep && !c->nbs && !c->nqd)
        return bench_usage(c, "--sweep wants bs=LIST and/or qd=LIST");
    if (c->repeat && !c->sweep)
        return bench_usage(c, "--repeat repeats the cells of a --sweep");
    if (!c->nbs)
        c->sweep_bs[c->nbs++] = c->o.bs;
    if (!c->nqd)
        c->sweep_qd[c->nqd++] = c->o.qd;
    return 0;
}

/* pinio_bench_check() as a usage error (exit 2). */
static int bench_check_opts(const struct cli *c, const pinio_bench_opts *x, uint64_t qd)
{
    pinio_diag d = {0};
    if (qd <= 4096 && !pinio_bench_check(x, &d))
        return 0;
    /* the library's message starts "bench: ", the command's name */
    const char *m = d.msg[0] ? d.msg : "bench: --qd: must be between 1 and 4096";
    return bench_usage(c, "%s", strncmp(m, "bench: ", 7) ? m : m + 7);
}

/* The --log-file row of one interval (the format scripts/plot reads). */
static int bench_on_interval(void *ctx, const pinio_bench_interval *v)
{
    struct cli *c = ctx;
    static const char *const dirs[] = {"read", "write", "trim"};
    const char *dir = v->dir >= 0 && v->dir < 3 ? dirs[v->dir] : "?";
    if (c->log_jsonl)
        fprintf(c->log, "{\"time_ms\":%.3f,\"job\":%d,\"dir\":\"%s\",\"bw_bytes_per_s\":%.1f,"
                "\"iops\":%.1f,\"lat_mean_ns\":%.1f,\"lat_p50_ns\":%llu,\"lat_p99_ns\":%llu",
                v->time_ms, v->job, dir, v->bytes_per_s, v->iops, v->lat_mean_ns,
                (unsigned long long)v->lat_p50_ns, (unsigned long long)v->lat_p99_ns);
    else
        fprintf(c->log, "%.3f,%d,%s,%.1f,%.1f,%.1f,%llu,%llu", v->time_ms, v->job, dir,
                v->bytes_per_s, v->iops, v->lat_mean_ns, (unsigned long long)v->lat_p50_ns,
                (unsigned long long)v->lat_p99_ns);
    if (c->sweep)
        fprintf(c->log, c->log_jsonl ? ",\"cell\":%u,\"bs_bytes\":%llu,\"qd\":%u" : ",%u,%llu,%u",
                c->log_cell, (unsigned long long)c->log_bs, c->log_qd);
    fputs(c->log_jsonl ? "}\n" : "\n", c->log);
    return 0;
}

static void bench_print_result(FILE *out, const struct cli *c, const pinio_bench_opts *o,
                          const pinio_bench_result *r)
{
    /* fio's group_reporting: off, each job beside the aggregate */
    const pinio_bench_result *pj = o->jobs > 1 && !c->group_reporting ? c->per_job : NULL;
    if (c->fmt == FMT_JSON) {
        print_json(out, o, r, pj, c->job_name, c->group, c->sweep ? &c->ctx : NULL);
    } else if (c->fmt == FMT_TERSE) {
        for (unsigned i = 0; pj && i < o->jobs; i++)
            print_terse(out, o, &pj[i], (int)i);
        print_terse(out, o, r, -1);
    } else if (c->sweep) {
        char b[32];
        fprintf(out, "%-6s %9s %5u %10.1f %10.0f %9.1f %9.1f %9.1f %9.4f %8.3f%s\n",
                pinio_bench_rw_name(o->rw), cli_human_bytes(b, sizeof b, o->bs), o->qd,
                r->bytes_per_s / 1e6, r->iops, (double)r->lat_p50_ns / 1e3,
                (double)r->lat_p99_ns / 1e3, (double)r->lat_p999_ns / 1e3, r->cpu_s_per_gb,
                r->submits_per_io, r->partial ? " partial" : "");
    } else {
        print_text(out, o, r, pj);
    }
    /* A row at a time, so a long sweep shows its progress; stdout through
     * cli_flush(), which keeps a failed write's errno for main's report. */
    if (out == stdout)
        cli_flush();
    else
        fflush(out);
}

/* Opens --log-file: CSV with its header line, or JSONL when the name ends
 * in .jsonl. Returns 0, or 1 after saying why. */
static int bench_open_log(struct cli *c)
{
    if (!c->log_file)
        return 0;
    size_t n = strlen(c->log_file);
    c->log_jsonl = n >= 6 && !strcmp(c->log_file + n - 6, ".jsonl");
    if (!(c->log = fopen(c->log_file, "w"))) {
        fprintf(stderr, "pinio bench: --log-file %s: %s\n", c->log_file, strerror(errno));
        return 1;
    }
    if (!c->log_jsonl)
        fprintf(c->log, "time_ms,job,dir,bw_bytes_per_s,iops,lat_mean_ns,lat_p50_ns,"
                "lat_p99_ns%s\n", c->sweep ? ",cell,bs_bytes,qd" : "");
    return 0;
}

/* Closes --log-file; 1 after saying why when its last writes failed. */
static int bench_close_log(struct cli *c, bool quiet)
{
    if (!c->log)
        return 0;
    int e = fclose(c->log);
    c->log = NULL;
    if (e && !quiet)
        fprintf(stderr, "pinio bench: --log-file %s: %s\n", c->log_file, strerror(errno));
    return e ? 1 : 0;
}

/* One pinio_bench_run() of `x` with the command's callbacks: Ctrl-C through
 * the progress callback, a status line on a terminal unless `quiet`, per-job
 * figures, the --log-file time series. */
static int run_one(struct cli *c, pinio_bench_opts *x, pinio_bench_result *r, pinio_diag *d,
                   bool quiet)
{
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

/* A failed run: one stderr line (and the JSON error object with --json). */
static void bench_report_error(const struct cli *c, int e, const pinio_diag *d, const char *path)
{
    const char *m = d->msg[0] ? d->msg : pinio_strerror(e);
    if (c->fmt == FMT_JSON)
        jw_error("bench", e, m, path, -1);
    if (!strncmp(m, "bench: ", 7))
        m += 7;
    fprintf(stderr, "pinio bench: %s%s%s\n", c->where ? c->where : "", c->where ? ": " : "", m);
}

/* The device and file system holding `path` (or, for a file not made yet,
 * its folder), from /proc/self/mountinfo: the mount whose st_dev it is.
 * A block device target is the device itself, with no file system. Best
 * effort: what cannot be found stays empty (the key is left out). */
static void bench_fill_ctx(struct run_ctx *x, const char *path)
{
    struct stat st;
    struct utsname u;
    time_t now = time(NULL);
    struct tm tm;
    memset(x, 0, sizeof *x);
    x->repeat = -1;
    if (!uname(&u))
        snprintf(x->kernel, sizeof x->kernel, "%s", u.release);
    if (gmtime_r(&now, &tm))
        strftime(x->date, sizeof x->date, "%Y-%m-%dT%H:%M:%SZ", &tm);
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    if (stat(path, &st)) {
        char *slash = strrchr(dir, '/');
        if (slash == dir)
            slash[1] = 0;
        else if (slash)
            *slash = 0;
        else
            snprintf(dir, sizeof dir, ".");
        if (stat(dir, &st))
            return;
    }
    if (S_ISBLK(st.st_mode)) {
        const char *base = strrchr(path, '/');
        snprintf(x->device, sizeof x->device, "%s", base ? base + 1 : path);
        return;
    }
    FILE *f = fopen("/proc/self/mountinfo", "r");
    if (!f)
        return;
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        unsigned maj, min;
        char fstype[64], source[256];
        const char *dash = strstr(line, " - ");
        if (sscanf(line, "%*s %*s %u:%u", &maj, &min) != 2 || !dash ||
            sscanf(dash + 3, "%63s %255s", fstype, source) != 2)
            continue;
        if (makedev(maj, min) != st.st_dev)
            continue;
        /* the last match: a later mount over the same device wins, as the
         * kernel resolves it */
        const char *dev = strncmp(source, "/dev/", 5) ? source : source + 5;
        snprintf(x->device, sizeof x->device, "%.63s", dev);
        snprintf(x->fs, sizeof x->fs, "%.31s", fstype);
    }
    fclose(f);
}

/* The figures of one run a --repeat table keeps. */
struct cell_run {
    double mbs, iops, p50, p99, p999, cpu, sub;
    bool done;
};

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of the `n` values at v[0], v[stride], ... (sorted in `tmp`). */
static double median_of(const struct cell_run *v, size_t n, size_t field, double *tmp)
{
    for (size_t i = 0; i < n; i++)
        tmp[i] = *(const double *)((const char *)&v[i] + field);
    qsort(tmp, n, sizeof *tmp, cmp_double);
    return n % 2 ? tmp[n / 2] : (tmp[n / 2 - 1] + tmp[n / 2]) / 2;
}

/* The --repeat table: per cell the median of each figure over its runs,
 * and the spread of MB/s (min..max), so noise shows beside the value. */
static void bench_print_repeat_table(FILE *out, const struct cli *c, const struct cell_run *runs,
                               unsigned reps)
{
    double tmp[100];
    struct cell_run v[100];
    fprintf(out, "%-6s %9s %5s %10s %21s %10s %9s %9s %9s %9s %8s\n", "rw", "bs", "qd",
            "MB/s", "MB/s min..max", "IOPS", "p50_us", "p99_us", "p99.9_us", "s/GB", "sub/io");
    for (unsigned a = 0; a < c->nbs; a++)
        for (unsigned q = 0; q < c->nqd; q++) {
            size_t n = 0;
            double lo = HUGE_VAL, hi = -HUGE_VAL;
            for (unsigned k = 0; k < reps; k++) {
                const struct cell_run *r = &runs[((size_t)k * c->nbs + a) * c->nqd + q];
                if (!r->done)
                    continue;
                v[n++] = *r;
                lo = r->mbs < lo ? r->mbs : lo;
                hi = r->mbs > hi ? r->mbs : hi;
            }
            if (!n)
                continue;
            char b[32], spread[48];
            snprintf(spread, sizeof spread, "%.1f..%.1f", lo, hi);
#define MED(f) median_of(v, n, offsetof(struct cell_run, f), tmp)
            fprintf(out, "%-6s %9s %5u %10.1f %21s %10.0f %9.1f %9.1f %9.1f %9.4f %8.3f\n",
                    pinio_bench_rw_name(c->o.rw), cli_human_bytes(b, sizeof b, c->sweep_bs[a]),
                    (unsigned)c->sweep_qd[q], MED(mbs), spread, MED(iops), MED(p50), MED(p99),
                    MED(p999), MED(cpu), MED(sub));
#undef MED
        }
}

/* The runs of a plain command line: one, or the --sweep grid (--repeat
 * times: the cell order is reversed on every other repetition, so that a
 * drift over the sweep, a device warming up or a cache filling, falls on
 * every cell alike instead of on the last ones). */
static int run_cells(struct cli *c)
{
    int rc = 0;
    unsigned reps = c->repeat ? c->repeat : 1;
    size_t ncells = (size_t)c->nbs * c->nqd;
    /* Check every cell before running any: a bad one must not leave the
     * others half done (or a file created). */
    for (unsigned a = 0; a < c->nbs; a++)
        for (unsigned q = 0; q < c->nqd; q++) {
            pinio_bench_opts x = c->o;
            x.bs = c->sweep_bs[a];
            x.qd = (unsigned)c->sweep_qd[q];
            if ((rc = bench_check_opts(c, &x, c->sweep_qd[q])))
                return rc;
        }
    struct cell_run *runs = NULL;
    if (c->repeat && !(runs = calloc(ncells * reps, sizeof *runs))) {
        fprintf(stderr, "pinio bench: out of memory\n");
        return 1;
    }
    if (c->sweep)
        bench_fill_ctx(&c->ctx, c->o.path);
    FILE *out = stdout;
    if (c->output && !(out = fopen(c->output, "w"))) {
        fprintf(stderr, "pinio bench: --output %s: %s\n", c->output, strerror(errno));
        free(runs);
        return 1;
    }
    if (bench_open_log(c)) {
        if (out != stdout)
            fclose(out);
        free(runs);
        return 1;
    }
    cli_stop_install();
    /* With --repeat the table comes at the end (medians); rows otherwise. */
    bool rows = !(c->repeat && c->fmt == FMT_NORMAL);
    if (c->sweep && c->fmt == FMT_NORMAL && rows)
        fprintf(out, "%-6s %9s %5s %10s %10s %9s %9s %9s %9s %8s\n", "rw", "bs", "qd", "MB/s",
                "IOPS", "p50_us", "p99_us", "p99.9_us", "s/GB", "sub/io");
    for (unsigned k = 0; k < reps && !rc; k++)
        for (size_t i = 0; i < ncells && !rc; i++) {
            size_t cell = k % 2 ? ncells - 1 - i : i;
            unsigned a = (unsigned)(cell / c->nqd), q = (unsigned)(cell % c->nqd);
            pinio_bench_opts x = c->o;
            x.bs = c->sweep_bs[a];
            x.qd = (unsigned)c->sweep_qd[q];
            c->ctx.repeat = c->repeat ? (int)k : -1;
            c->log_cell = (unsigned)(k * ncells + i + 1);
            c->log_bs = x.bs;
            c->log_qd = x.qd;
            pinio_bench_result r;
            pinio_diag d;
            int e = run_one(c, &x, &r, &d, c->fmt != FMT_NORMAL);
            if (e == -ECANCELED) {
                /* Ctrl-C: what completed is still a result (fio prints it
                 * too); then die of the signal, status 128 + its number. */
                if (r.partial && rows)
                    bench_print_result(out, c, &x, &r);
                if (runs && !rows)
                    bench_print_repeat_table(out, c, runs, reps);
                if (out != stdout)
                    fclose(out);
                bench_close_log(c, true);
                cli_stop_reraise(); /* the library removed what it was making */
            }
            if (e) {
                bench_report_error(c, e, &d, x.path);
                rc = 1;
                break;
            }
            if (runs)
                runs[(size_t)k * ncells + cell] = (struct cell_run){
                    r.bytes_per_s / 1e6, r.iops, (double)r.lat_p50_ns / 1e3,
                    (double)r.lat_p99_ns / 1e3, (double)r.lat_p999_ns / 1e3, r.cpu_s_per_gb,
                    r.submits_per_io, true};
            if (rows)
                bench_print_result(out, c, &x, &r);
        }
    if (runs && !rows) {
        bench_print_repeat_table(out, c, runs, reps);
        if (out == stdout)
            cli_flush();
    }
    free(runs);
    if (out != stdout && fclose(out) && !rc) {
        fprintf(stderr, "pinio bench: --output %s: %s\n", c->output, strerror(errno));
        rc = 1;
    }
    if (bench_close_log(c, rc != 0) && !rc)
        rc = 1;
    return rc;
}

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

static void *section_main(void *arg)
{
    struct section *s = arg;
    s->e = run_one(s->c, &s->x, &s->r, &s->d, true);
    return NULL;
}

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

static void bench_group_add(struct group_sum *g, const pinio_bench_result *r)
{
    if (!g->sections++ || r->lat_min_ns < g->lat_min)
        g->lat_min = r->lat_min_ns;
    g->lat_max = r->lat_max_ns > g->lat_max ? r->lat_max_ns : g->lat_max;
    g->bytes += r->bytes;
    g->ios += r->ios;
    g->seconds = r->seconds > g->seconds ? r->seconds : g->seconds;
    g->lat_sum_ns += r->lat.mean_ns * (double)r->ios;
    g->partial |= r->partial;
}

static void bench_print_group(FILE *out, enum fmt fmt, unsigned group, const struct group_sum *g)
{
    double bw = g->seconds > 0 ? (double)g->bytes / g->seconds : 0;
    double iops = g->seconds > 0 ? (double)g->ios / g->seconds : 0;
    double mean = g->ios ? g->lat_sum_ns / (double)g->ios : 0;
    if (fmt == FMT_JSON) {
        jw w;
        jw_init(&w, out);
        jw_begin(&w, "bench");
        jw_ku64(&w, "group", group);
        jw_key(&w, "group_result");
        jw_obj(&w);
        jw_ku64(&w, "sections", g->sections);
        jw_ku64(&w, "bytes", g->bytes);
        jw_ku64(&w, "ios", g->ios);
        jw_kf64(&w, "elapsed_s", g->seconds);
        jw_kf64(&w, "bw_mb_per_s", bw / 1e6);
        jw_kf64(&w, "iops", iops);
        jw_ku64(&w, "lat_min_ns", g->lat_min);
        jw_kf64(&w, "lat_mean_ns", mean);
        jw_ku64(&w, "lat_max_ns", g->lat_max);
        jw_kbool(&w, "partial", g->partial);
        jw_obj_end(&w);
        jw_obj_end(&w);
        jw_finish(&w);
    } else if (fmt == FMT_TERSE) {
        fprintf(out, "pinio-bench-group;3;%u;%u;%llu;%llu;%.6f;%.3f;%.1f;%llu;%.0f;%llu;%d\n",
                group, g->sections, (unsigned long long)g->bytes, (unsigned long long)g->ios,
                g->seconds, bw / 1e6, iops, (unsigned long long)g->lat_min, mean,
                (unsigned long long)g->lat_max, g->partial ? 1 : 0);
    } else {
        char b[32];
        fprintf(out, "group %u: %u job%s, %s in %.3f s: %.1f MB/s (10^6 B/s), %.0f IOPS; "
                "latency us: min %.1f  mean %.1f  max %.1f%s\n", group, g->sections,
                g->sections == 1 ? "" : "s", cli_human_bytes(b, sizeof b, g->bytes), g->seconds,
                bw / 1e6, iops, (double)g->lat_min / 1e3, mean / 1e3, (double)g->lat_max / 1e3,
                g->partial ? " (partial)" : "");
    }
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

static void free_sections(struct section *s, size_t n)
{
    for (size_t i = 0; s && i < n; i++)
        free(s[i].c);
    free(s);
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
            rc = bench_check_opts(s->c, &s->c->o, s->c->o.qd);
        s->x = s->c->o;
    }
    free(extra);
    return rc == -1 ? 2 : rc; /* --help after a job file is no help */
}

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
        /* what the file says is wrong is a usage error; reading it is not */
        fprintf(stderr, "pinio bench: %s\n", err);
        return e == -ENOTSUP || e == -EINVAL ? 2 : 1;
    }
    for (size_t i = 0; i < jf.nnotes; i++)
        fprintf(stderr, "pinio bench: note: %s\n", jf.notes[i]);
    struct section *sec = calloc(jf.njobs, sizeof *sec);
    int rc = sec ? prepare_sections(top, &jf, sec, argc, argv)
                 : (fprintf(stderr, "pinio bench: out of memory\n"), 1);
    FILE *out = stdout;
    if (!rc && top->output && !(out = fopen(top->output, "w"))) {
        fprintf(stderr, "pinio bench: --output %s: %s\n", top->output, strerror(errno));
        rc = 1;
    }
    for (size_t i = 0; i < jf.njobs && !rc; i++)
        rc = bench_open_log(sec[i].c);
    if (!rc)
        cli_stop_install();
    for (unsigned g = 0; g < jf.ngroups && !rc; g++) {
        size_t started = 0;
        for (size_t i = 0; i < jf.njobs; i++) {
            if (jf.jobs[i].group != g)
                continue;
            if ((e = pthread_create(&sec[i].th, NULL, section_main, &sec[i]))) {
                fprintf(stderr, "pinio bench: %s: thread: %s\n", sec[i].where, strerror(e));
                rc = 1;
                break;
            }
            started = i + 1;
        }
        bool stopped = false;
        struct group_sum sum = {0};
        for (size_t i = 0; i < started; i++) {
            if (jf.jobs[i].group != g)
                continue;
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
                fprintf(out, "[%s] group %u\n", jf.jobs[i].name, g);
            bench_print_result(out, s->c, &s->x, &s->r);
            bench_group_add(&sum, &s->r);
        }
        if (sum.sections) {
            bench_print_group(out, top->fmt, g, &sum);
            if (out == stdout)
                cli_flush();
            else
                fflush(out);
        }
        if (stopped) {
            /* Ctrl-C: the partial results are out; die of the signal */
            if (out != stdout)
                fclose(out);
            for (size_t i = 0; i < jf.njobs; i++)
                bench_close_log(sec[i].c, true);
            cli_stop_reraise();
        }
    }
    if (out != stdout && out && fclose(out) && !rc) {
        fprintf(stderr, "pinio bench: --output %s: %s\n", top->output, strerror(errno));
        rc = 1;
    }
    for (size_t i = 0; sec && i < jf.njobs; i++)
        if (sec[i].c && bench_close_log(sec[i].c, rc != 0) && !rc)
            rc = 1;
    free_sections(sec, jf.njobs);
    bench_jobfile_free(&jf);
    return rc;
}

static int run_bench(int argc, char **argv)
{
    struct cli *c = calloc(1, sizeof *c);
    if (!c)
        return fprintf(stderr, "pinio bench: out of memory\n"), 1;
    pinio_bench_opts_default(&c->o);
    int rc = bench_parse_args(c, argc, argv);
    if (rc == -1)
        rc = 0; /* --help */
    else if (!rc && c->job_file)
        rc = run_jobfile(c, argc, argv);
    else if (!rc)
        rc = run_cells(c);
    if (!rc)
        cli_flush(); /* a failure is reported once, by main.c */
    free(c);
    return rc;
}

const struct pinio_cmd pinio_cmd_bench = {
    .name = "bench",
    .summary = "storage benchmark: io_uring reads/writes, latency percentiles, CPU per GB",
    .run = run_bench,
};
