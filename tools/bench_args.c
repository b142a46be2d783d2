/* `pinio bench`'s command line (and a job section's, which the job file
 * reader writes as one) into struct cli, and its checks: every option is
 * parsed and checked before the target is opened. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench_cli.h"
#include "util.h"


static void usage(FILE *out)
{
    fprintf(out,
            "usage: pinio bench --file PATH [options]     (or: pinio bench PATH [options])\n"
            "       pinio bench s3://BUCKET/KEY [options] (an object: HTTP range GETs)\n"
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
            "  --engine uring|s3   io_uring on a file or device (default), or HTTP range\n"
            "                   GETs on an s3://BUCKET/KEY object (the default for such a\n"
            "                   target): --qd ranged GETs in flight per job, each checked\n"
            "                   (206, Content-Range, length) and pinned to the object's\n"
            "                   ETag; retries counted. Reads only (read, randread); the\n"
            "                   object must exist. AWS_* variables and ~/.aws as for load\n"
            "  --direct auto|on|off  O_DIRECT (default on; auto is on; 0|1 as before)\n"
            "  --fixed[=0|1]    registered buffers (default 1)\n"
            "  --regfiles       registered file table\n"
            "  --batch N|auto   requests gathered per submit call (default auto: 1 for\n"
            "                   random workloads, which cannot merge, qd for sequential)\n"
            "  --sqpoll         kernel submission thread (its CPU is not in the figures)\n"
            "  --iopoll         polled completions (needs NVMe poll queues)\n"
            "  --node N         NUMA node for buffers and threads\n"
            "  --cache cold     drop the file's cached pages first\n"
            "  --mem host|cuda:N|hip:N   where reads land (default host): on a GPU, each\n"
            "                   read is copied on from pinned staging into device memory\n"
            "                   (storage -> CPU -> GPU, pipelined); reads only. Reports\n"
            "                   each stage, the overlap and the CPU -> GPU copy alone;\n"
            "                   storage -> GPU direct (GPUDirect Storage) needs cuFile,\n"
            "                   not measured\n"
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
            "                   ends in .jsonl; with --sweep also cell,bs_bytes,qd; with\n"
            "                   --mpi written by rank 0 at the end, the job's series on one\n"
            "                   clock: rank in place of job, a row per rank as its interval\n"
            "                   ends and their sum (rank -1) per interval, also bytes,ios\n"
            "MPI (under mpiexec; a pinio built with MPI)\n"
            "  --mpi[=same|per-rank|shared]  every rank runs the job, rank 0 prints one\n"
            "                   result: bytes over last end - first start on one clock,\n"
            "                   stonewall, per host and per rank, merged percentiles;\n"
            "                   per-rank: $rank and $host in names (the default when a name\n"
            "                   has them); shared: rank r uses [offset + r*size, +size)\n"
            "  --mpi-reorder[=K] IOR -C: each rank uses rank r+K's file or slice (default\n"
            "                   K: the ranks of rank 0's host)\n"
            "  --mpi-clock-ping measure clock offsets on rank 0's host too (a test)\n"
            "  --mpi-lat-log PREFIX  each rank's latency histogram to PREFIX.RANK\n"
            "  -v, --verbose    with --mpi: every rank's bytes so far, on stderr\n"
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

enum {
    O_FILE = 256, O_RW, O_MIX, O_BS, O_BSSPLIT, O_ALIGN, O_QD, O_JOBS, O_SIZE, O_OFFSET,
    O_IOSIZE, O_LOOPS, O_TIME, O_RAMP, O_DELAY, O_RATE, O_RATEIOPS, O_DIST, O_NOMAP, O_DIRECT,
    O_FIXED, O_REGFILES, O_SQPOLL, O_IOPOLL, O_BATCH, O_NODE, O_CACHE, O_VERIFY, O_VONLY,
    O_DEVOK, O_FILEOK, O_SEED, O_JSON, O_OUTPUT, O_FORMAT, O_PCT, O_SWEEP, O_REPEAT, O_GROUP, O_LOGINT,
    O_LOGFILE, O_JOBFILE, O_THINK, O_THINKBLK, O_BSRANGE, O_SHARE,
};

/* Several files: their own range, so that the list above grows apart. */
enum { O_DIRECTORY = 512, O_NRFILES, O_FSERVICE, O_FILESIZE };
enum { O_ENGINE = 768 };
enum { O_MEM = 1100 }; /* GPU destinations (issue 41) */

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
    {"engine", required_argument, NULL, O_ENGINE},
    {"mem", required_argument, NULL, O_MEM},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

int bench_usage(const struct cli *c, const char *fmt, ...)
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
    case O_TIME: {
        /* Every number out of the range gets the range, 0 and 1e308 alike
         * (0 is the library's "one pass", which is --time left out here). */
        char *end;
        double t = strtod(v, &end);
        bool number = end != v && (!*end || !strcmp(end, "s"));
        if (number && !(t >= 1e-3 && t <= 1e6))
            return bench_usage(c, "--time %s: must be between 0.001 and 1e6 seconds (leave "
                               "--time out for one pass over the region)", v);
        rc = parse_seconds(v, &o->time_s);
        break;
    }
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
    case O_ENGINE:
        if (!strcmp(v, "uring") || !strcmp(v, "io_uring"))
            c->engine = ENGINE_URING;
        else if (!strcmp(v, "s3"))
            c->engine = ENGINE_S3;
        else
            rc = -EINVAL;
        break;
    case O_MEM: o->mem = v; break; /* checked by pinio_bench_check() */
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
int bench_parse_args(struct cli *c, int argc, char **argv)
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
    /* The engine follows the target; one named must match it. */
    bool s3 = c->o.path && !strncmp(c->o.path, "s3://", 5);
    if (c->engine == ENGINE_S3 && c->o.path && !s3)
        return bench_usage(c, "--engine s3 reads an object: the target must be s3://BUCKET/KEY, "
                           "not %s", c->o.path);
    if (c->engine == ENGINE_URING && s3)
        return bench_usage(c, "--engine uring reads files and devices: %s is an object "
                           "(--engine s3)", c->o.path);
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
int bench_check_opts(const struct cli *c, const pinio_bench_opts *x, uint64_t qd)
{
    pinio_diag d = {0};
    if (qd <= 4096 && !pinio_bench_check(x, &d))
        return 0;
    /* the library's message starts "bench: ", the command's name */
    const char *m = d.msg[0] ? d.msg : "bench: --qd: must be between 1 and 4096";
    return bench_usage(c, "%s", strncmp(m, "bench: ", 7) ? m : m + 7);
}

/* The name `p` resolves to, into out[PATH_MAX]: the symlinks of its last
 * component followed (a dangling one too: opening it for writing would
 * create what it names), then the folder's real path and the last name.
 * false when the folder does not resolve (nothing can be created there). */
static bool resolve_name(const char *p, char *out)
{
    char cur[PATH_MAX], link[PATH_MAX];
    if (snprintf(cur, sizeof cur, "%s", p) >= (int)sizeof cur)
        return false;
    for (int hops = 0; hops < 40; hops++) {
        ssize_t n = readlink(cur, link, sizeof link - 1);
        if (n < 0)
            break;
        link[n] = 0;
        if (link[0] != '/') { /* relative to the link's folder */
            char *slash = strrchr(cur, '/');
            size_t keep = slash ? (size_t)(slash - cur) + 1 : 0;
            if (keep + (size_t)n >= sizeof cur)
                return false;
            memmove(cur + keep, link, (size_t)n + 1);
        } else {
            memcpy(cur, link, (size_t)n + 1);
        }
    }
    if (realpath(cur, out))
        return true;
    char *slash = strrchr(cur, '/');
    const char *base = slash ? slash + 1 : cur;
    char folder[PATH_MAX];
    if (slash == cur)
        snprintf(folder, sizeof folder, "/");
    else if (slash)
        snprintf(folder, sizeof folder, "%.*s", (int)(slash - cur), cur);
    else
        snprintf(folder, sizeof folder, ".");
    char real[PATH_MAX];
    if (!*base || !realpath(folder, real) ||
        snprintf(out, PATH_MAX, "%s/%s", strcmp(real, "/") ? real : "", base) >= PATH_MAX)
        return false;
    return true;
}

/* Whether `a` and `b` are one file: the same inode when both exist (a hard
 * link, a symlink, /proc/self/fd/N), else the same resolved name (a target
 * bench is about to create). */
static bool same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    if (stat(a, &sa) == 0 && stat(b, &sb) == 0)
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    char ra[PATH_MAX], rb[PATH_MAX];
    return resolve_name(a, ra) && resolve_name(b, rb) && !strcmp(ra, rb);
}

const char *bench_target_named(const struct cli *t, const char *name)
{
    const pinio_bench_opts *o = &t->o;
    unsigned n = o->npaths > 1 ? o->npaths : o->path ? 1 : 0;
    for (unsigned i = 0; name && i < n; i++) {
        const char *p = o->npaths > 1 ? o->paths[i] : o->path;
        if (same_file(name, p))
            return p;
    }
    return NULL;
}

int bench_check_outputs(const struct cli *c, const struct cli *t)
{
    const char *p;
    if ((p = bench_target_named(t, c->output)))
        return bench_usage(c, "--output %s is the target %s: refusing to overwrite it with the "
                           "results", c->output, p);
    if ((p = bench_target_named(t, c->log_file)))
        return bench_usage(c, "--log-file %s is the target %s: refusing to overwrite it with the "
                           "time series", c->log_file, p);
    return 0;
}
