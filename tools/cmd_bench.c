/* pinio bench: an io_uring storage benchmark with fio's knobs
 * (pinio_bench_run(), include/pinio/bench.h). Every option is parsed and
 * checked before the target is opened, so a bad command line writes nothing. */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pinio/pinio.h"
#include "cli.h"
#include "stop.h"
#include "util.h"

#define MAX_SWEEP 32

static void usage(FILE *out)
{
    fprintf(out,
            "usage: pinio bench --file PATH [options]\n"
            "  --rw read|randread|write|randwrite   workload (default read)\n"
            "  --bs SIZE        bytes per request, multiple of 512 (default 1M)\n"
            "  --qd N           requests in flight per job (default 16)\n"
            "  --jobs N         threads, one ring and one file region each (default 1)\n"
            "  --size SIZE      bytes to use, split between jobs (default: the file, or 1G new)\n"
            "  --time SECONDS   run this long, looping over the region\n"
            "  --direct[=0|1]   O_DIRECT (default 1)\n"
            "  --fixed[=0|1]    registered buffers (default 1)\n"
            "  --regfiles       registered file table\n"
            "  --batch N|auto   requests gathered per submit call (default auto: 1 for\n"
            "                   random workloads, which cannot merge, qd for sequential)\n"
            "  --sqpoll         kernel submission thread (its CPU is not in the figures)\n"
            "  --iopoll         polled completions (needs NVMe poll queues)\n"
            "  --node N         NUMA node for buffers and threads\n"
            "  --cache cold     drop the file's cached pages first\n"
            "  --verify         write runs: write a pattern, read it back, compare\n"
            "  --allow-device-overwrite   permit writes to a block device (one in use,\n"
            "                   e.g. mounted, is refused all the same)\n"
            "  --allow-file-overwrite     permit writes to an existing file holding data\n"
            "                   that bench did not write (default: refused)\n"
            "  --seed N         random order and pattern seed (default 1)\n"
            "  --json           one JSON object per run\n"
            "  --sweep bs=4k,64k,1m qd=1,4,16,64   run the grid, print a table\n"
            "A read of a missing file creates it first, filled with real data, under a\n"
            "temporary name renamed into place when complete; Ctrl-C or SIGTERM stops\n"
            "the run and removes a file it was making.\n");
}

/* --name=value or --name value; returns the value or NULL (usage error). */
static const char *value_of(int argc, char **argv, int *i, const char *arg, const char *name)
{
    size_t n = strlen(name);
    if (strncmp(arg, name, n))
        return NULL;
    if (arg[n] == '=')
        return arg + n + 1;
    if (arg[n] == 0 && *i + 1 < argc)
        return argv[++*i];
    return NULL;
}

/* --flag or --flag=0|1 */
static int flag_of(const char *arg, const char *name, bool *out)
{
    size_t n = strlen(name);
    if (strncmp(arg, name, n))
        return 0;
    if (arg[n] == 0)
        *out = true;
    else if (!strcmp(arg + n, "=1"))
        *out = true;
    else if (!strcmp(arg + n, "=0"))
        *out = false;
    else
        return 0;
    return 1;
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

static void print_json(const pinio_bench_opts *o, const pinio_bench_result *r)
{
    printf("{\"tool\":\"pinio\",\"file\":");
    cli_json_str(o->path, strlen(o->path));
    printf(",\"rw\":\"%s\",\"bs\":%llu,\"qd\":%u,\"jobs\":%u,\"direct\":%s,\"fixed\":%s,"
           "\"regfiles\":%s,\"sqpoll\":%s,\"iopoll\":%s,\"node\":%d,\"cache\":\"%s\","
           "\"time_s\":%.3f,\"verify\":%s,\"batch\":%u,",
           pinio_bench_rw_name(o->rw), (unsigned long long)o->bs, o->qd, o->jobs,
           o->direct ? "true" : "false", o->fixed ? "true" : "false",
           o->regfiles ? "true" : "false", o->sqpoll ? "true" : "false",
           o->iopoll ? "true" : "false", o->node, o->cache_cold ? "cold" : "keep", o->time_s,
           o->verify ? "true" : "false", r->batch);
    printf("\"bytes\":%llu,\"ios\":%llu,\"seconds\":%.6f,\"bytes_per_s\":%.1f,\"mb_s\":%.2f,"
           "\"iops\":%.1f,",
           (unsigned long long)r->bytes, (unsigned long long)r->ios, r->seconds, r->bytes_per_s,
           r->bytes_per_s / 1e6, r->iops);
    printf("\"lat_ns\":{\"min\":%llu,\"mean\":%.0f,\"p50\":%llu,\"p90\":%llu,\"p99\":%llu,"
           "\"p99.9\":%llu,\"max\":%llu},",
           (unsigned long long)r->lat_min_ns, r->lat_mean_ns, (unsigned long long)r->lat_p50_ns,
           (unsigned long long)r->lat_p90_ns, (unsigned long long)r->lat_p99_ns,
           (unsigned long long)r->lat_p999_ns, (unsigned long long)r->lat_max_ns);
    printf("\"cpu_user_s\":%.6f,\"cpu_sys_s\":%.6f,\"cpu_s_per_gb\":%.6f,"
           "\"submits_per_io\":%.4f,\"verified_bytes\":%llu,\"created\":%s,\"features\":\"%s\"}\n",
           r->cpu_user_s, r->cpu_sys_s, r->cpu_s_per_gb, r->submits_per_io,
           (unsigned long long)r->verified_bytes, r->created ? "true" : "false", r->features);
}

/* A status line on a terminal, about once a second: a 60 s run is not
 * silent. Cleared before the results are printed. */
struct status {
    double time_s;
    bool tty;
    bool shown;
};

/* Always installed: it is also how SIGINT/SIGTERM stop a run (stop.h). */
static int on_progress(void *ctx, const pinio_progress *p)
{
    struct status *st = ctx;
    if (cli_stop_requested())
        return 1;
    if (!st->tty)
        return 0;
    uint64_t bytes = p->done_bytes;
    double seconds = p->elapsed_s;
    char b[32], of[32] = "";
    if (st->time_s > 0)
        snprintf(of, sizeof of, " of %g s", st->time_s);
    fprintf(stderr, "\r  %6.1f s%s  %10s  %9.1f MB/s   ", seconds, of,
            cli_human_bytes(b, sizeof b, bytes), seconds > 0 ? (double)bytes / seconds / 1e6 : 0.0);
    st->shown = true;
    return 0;
}

static void print_text(const pinio_bench_opts *o, const pinio_bench_result *r)
{
    char b[32], s[32];
    printf("pinio bench: %s bs=%s qd=%u batch=%u jobs=%u %s [%s]%s\n",
           pinio_bench_rw_name(o->rw), cli_human_bytes(b, sizeof b, o->bs), o->qd, r->batch,
           o->jobs, o->path, r->features,
           r->created ? " (created)" : "");
    printf("  %s in %.3f s: %.1f MB/s, %.0f IOPS\n", cli_human_bytes(s, sizeof s, r->bytes),
           r->seconds, r->bytes_per_s / 1e6, r->iops);
    printf("  latency us: min %.1f  p50 %.1f  p90 %.1f  p99 %.1f  p99.9 %.1f  max %.1f\n",
           (double)r->lat_min_ns / 1e3, (double)r->lat_p50_ns / 1e3, (double)r->lat_p90_ns / 1e3,
           (double)r->lat_p99_ns / 1e3, (double)r->lat_p999_ns / 1e3,
           (double)r->lat_max_ns / 1e3);
    printf("  CPU %.4f s/GB (user %.3f s, sys %.3f s), %.3f submit calls per I/O\n",
           r->cpu_s_per_gb, r->cpu_user_s, r->cpu_sys_s, r->submits_per_io);
    if (o->verify)
        printf("  verify: %s read back, all blocks match\n",
               cli_human_bytes(s, sizeof s, r->verified_bytes));
}

static int run_bench(int argc, char **argv)
{
    pinio_bench_opts o;
    pinio_bench_opts_default(&o);
    bool json = false, sweep = false;
    uint64_t sweep_bs[MAX_SWEEP], sweep_qd[MAX_SWEEP];
    unsigned nbs = 0, nqd = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        bool b;
        int rc = 0;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--json")) {
            json = true;
        } else if ((v = value_of(argc, argv, &i, a, "--file"))) {
            o.path = v;
        } else if ((v = value_of(argc, argv, &i, a, "--rw"))) {
            rc = pinio_bench_rw_parse(v, &o.rw);
        } else if ((v = value_of(argc, argv, &i, a, "--bs"))) {
            rc = cli_parse_size(v, &o.bs);
        } else if ((v = value_of(argc, argv, &i, a, "--qd"))) {
            rc = parse_bounded(v, 4096, &o.qd);
        } else if ((v = value_of(argc, argv, &i, a, "--jobs"))) {
            rc = parse_bounded(v, 256, &o.jobs);
        } else if ((v = value_of(argc, argv, &i, a, "--size"))) {
            rc = cli_parse_size(v, &o.size);
        } else if ((v = value_of(argc, argv, &i, a, "--time"))) {
            char *e;
            o.time_s = strtod(v, &e);
            if (*e == 's')
                e++;
            rc = (e == v || *e || !(o.time_s >= 1e-3) || !isfinite(o.time_s)) ? -EINVAL : 0;
        } else if ((v = value_of(argc, argv, &i, a, "--batch"))) {
            if (!strcmp(v, "auto"))
                o.batch = 0;
            else if (!(rc = parse_bounded(v, 4096, &o.batch)) && !o.batch)
                rc = -EINVAL; /* 0 is spelled "auto" */
        } else if ((v = value_of(argc, argv, &i, a, "--node"))) {
            unsigned node = 0;
            if (!strcmp(v, "-1")) /* the default: no node, spelled as it is shown */
                o.node = -1;
            else if (!(rc = parse_bounded(v, 4095, &node)))
                o.node = (int)node;
        } else if ((v = value_of(argc, argv, &i, a, "--seed"))) {
            rc = cli_parse_u64(v, &o.seed);
        } else if ((v = value_of(argc, argv, &i, a, "--cache"))) {
            if (!strcmp(v, "cold"))
                o.cache_cold = true;
            else if (!strcmp(v, "keep") || !strcmp(v, "warm"))
                o.cache_cold = false;
            else
                rc = -EINVAL;
        } else if (flag_of(a, "--direct", &b)) {
            o.direct = b;
        } else if (flag_of(a, "--fixed", &b)) {
            o.fixed = b;
        } else if (flag_of(a, "--regfiles", &b)) {
            o.regfiles = b;
        } else if (flag_of(a, "--sqpoll", &b)) {
            o.sqpoll = b;
        } else if (flag_of(a, "--iopoll", &b)) {
            o.iopoll = b;
        } else if (flag_of(a, "--verify", &b)) {
            o.verify = b;
        } else if (!strcmp(a, "--allow-device-overwrite")) {
            o.allow_device_overwrite = true;
        } else if (!strcmp(a, "--allow-file-overwrite")) {
            o.allow_file_overwrite = true;
        } else if (!strcmp(a, "--sweep")) {
            sweep = true;
            for (; i + 1 < argc && (!strncmp(argv[i + 1], "bs=", 3) ||
                                    !strncmp(argv[i + 1], "qd=", 3));
                 i++) {
                bool is_bs = argv[i + 1][0] == 'b';
                rc = parse_list(argv[i + 1] + 3, is_bs ? sweep_bs : sweep_qd, is_bs ? &nbs : &nqd,
                                is_bs);
                if (rc) {
                    a = argv[i + 1];
                    break;
                }
            }
            if (!rc && !nbs && !nqd) {
                cli_usage("bench", "--sweep wants bs=LIST and/or qd=LIST");
                return 2;
            }
        } else if (!o.path && a[0] != '-') {
            o.path = a;
        } else {
            cli_usage("bench", "unknown option '%s'", a);
            return 2;
        }
        if (rc) {
            cli_usage("bench", "bad value in '%s'%s%s", a,
                    i < argc && argv[i] != a ? " " : "", i < argc && argv[i] != a ? argv[i] : "");
            return 2;
        }
    }
    if (!nbs)
        sweep_bs[nbs++] = o.bs;
    if (!nqd)
        sweep_qd[nqd++] = o.qd;
    /* Check every cell before running any: a bad one must not leave the
     * others half done (or a file created). */
    pinio_diag d = {0};
    for (unsigned a = 0; a < nbs; a++)
        for (unsigned q = 0; q < nqd; q++) {
            pinio_bench_opts c = o;
            c.bs = sweep_bs[a];
            c.qd = (unsigned)sweep_qd[q];
            if (sweep_qd[q] > 4096 || pinio_bench_check(&c, &d)) {
                /* the library's message starts "bench: ", the command's name */
                const char *m = d.msg[0] ? d.msg : "bench: --qd: must be between 1 and 4096";
                return cli_usage("bench", "%s", strncmp(m, "bench: ", 7) ? m : m + 7);
            }
        }
    cli_stop_install();
    if (sweep && !json)
        printf("%-6s %9s %5s %10s %10s %9s %9s %9s %9s %8s\n", "rw", "bs", "qd", "MB/s", "IOPS",
               "p50_us", "p99_us", "p99.9_us", "s/GB", "sub/io");
    for (unsigned a = 0; a < nbs; a++)
        for (unsigned q = 0; q < nqd; q++) {
            pinio_bench_opts c = o;
            c.bs = sweep_bs[a];
            c.qd = (unsigned)sweep_qd[q];
            pinio_bench_result r;
            memset(&d, 0, sizeof d);
            struct status st = {.time_s = c.time_s, .tty = !json && isatty(STDERR_FILENO)};
            c.progress = on_progress;
            c.progress_ctx = &st;
            int rc = pinio_bench_run(&c, &r, &d);
            if (st.shown)
                fprintf(stderr, "\r%*s\r", 64, "");
            if (rc == -ECANCELED)
                cli_stop_reraise(); /* the library removed what it was making */
            if (rc) {
                fprintf(stderr, "pinio %s\n", d.msg[0] ? d.msg : pinio_strerror(rc));
                return 1;
            }
            if (json) {
                print_json(&c, &r);
            } else if (sweep) {
                char b[32];
                printf("%-6s %9s %5u %10.1f %10.0f %9.1f %9.1f %9.1f %9.4f %8.3f\n",
                       pinio_bench_rw_name(c.rw), cli_human_bytes(b, sizeof b, c.bs), c.qd,
                       r.bytes_per_s / 1e6, r.iops, (double)r.lat_p50_ns / 1e3,
                       (double)r.lat_p99_ns / 1e3, (double)r.lat_p999_ns / 1e3, r.cpu_s_per_gb,
                       r.submits_per_io);
            } else {
                print_text(&c, &r);
            }
            cli_flush(); /* a failure is reported once, by main.c */
        }
    return 0;
}

const struct pinio_cmd pinio_cmd_bench = {
    .name = "bench",
    .summary = "storage benchmark: io_uring reads/writes, latency percentiles, CPU per GB",
    .run = run_bench,
};
