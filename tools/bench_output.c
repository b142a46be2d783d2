/* `pinio bench`'s results: the normal text, JSON (doc/json/SCHEMA.md) and
 * terse rows of a run, a --repeat table of medians, a job file group's sum,
 * and the run context a sweep's rows carry. */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <time.h>

#include "bench_cli.h"
#include "util.h"


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

void bench_json_lat(jw *w, const char *key, const pinio_bench_lat *l, const pinio_bench_opts *o)
{
    json_lat(w, key, l, o);
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

/* --mpi's keys and lines after a run's own (bench_mpi.c); NULL otherwise. */
static bench_extra_fn extra_fn;

void bench_set_extra(bench_extra_fn fn)
{
    extra_fn = fn;
}

/* The keys are documented in doc/json/bench.md. */
/* What gdsio's -x 0 measures and bench cannot: said wherever GPU figures are. */
static const char gds_note[] = "storage -> GPU direct (GPUDirect Storage, gdsio -x 0) needs "
                               "cuFile: not measured";

/* A GPU destination's stages (--mem): each stage's bytes, seconds and
 * bytes per second, the overlap and the copy alone. */
static void json_gpu(jw *w, const pinio_bench_result *r)
{
    if (!r->gpu_mem[0])
        return;
    double copy_s = r->gpu_copy_alone_bytes_per_s > 0
                        ? (double)r->gpu_bytes / r->gpu_copy_alone_bytes_per_s : 0;
    jw_key(w, "gpu");
    jw_obj(w);
    jw_kstr(w, "device", r->gpu_mem);
    jw_kstr(w, "name", r->gpu_name);
    jw_kstr(w, "path", "storage -> host -> device, pipelined");
    jw_ku64(w, "storage_to_host_bytes", r->read.bytes);
    jw_kf64(w, "storage_to_host_s", r->gpu_read_s);
    jw_kf64(w, "storage_to_host_bytes_per_s",
            r->gpu_read_s > 0 ? (double)r->read.bytes / r->gpu_read_s : 0);
    jw_ku64(w, "host_to_device_bytes", r->gpu_bytes);
    jw_kf64(w, "host_to_device_s", r->gpu_h2d_s);
    jw_kf64(w, "host_to_device_bytes_per_s",
            r->gpu_h2d_s > 0 ? (double)r->gpu_bytes / r->gpu_h2d_s : 0);
    jw_kf64(w, "end_to_end_bytes_per_s", r->seconds > 0 ? (double)r->gpu_bytes / r->seconds : 0);
    jw_kf64(w, "copy_alone_bytes_per_s", r->gpu_copy_alone_bytes_per_s);
    jw_kf64(w, "copy_alone_s", copy_s);
    jw_kf64(w, "copy_wait_s", r->gpu_wait_s);
    jw_kf64(w, "overlap", r->gpu_overlap);
    jw_ku64(w, "verified_bytes", r->gpu_verified_bytes);
    jw_kstr(w, "gds", gds_note);
    jw_obj_end(w);
}

static void text_gpu(FILE *out, const pinio_bench_result *r)
{
    char s[32];
    if (!r->gpu_mem[0])
        return;
    double copy_s = r->gpu_copy_alone_bytes_per_s > 0
                        ? (double)r->gpu_bytes / r->gpu_copy_alone_bytes_per_s : 0;
    fprintf(out, "  %s (%s): storage -> host -> device, pipelined, %s\n", r->gpu_mem,
            r->gpu_name, cli_human_bytes(s, sizeof s, r->gpu_bytes));
    fprintf(out, "    storage -> host   %.1f MB/s (%.3f s of reads)\n",
            r->gpu_read_s > 0 ? (double)r->read.bytes / r->gpu_read_s / 1e6 : 0, r->gpu_read_s);
    fprintf(out, "    host -> device    %.1f MB/s (%.3f s, first copy to last)\n",
            r->gpu_h2d_s > 0 ? (double)r->gpu_bytes / r->gpu_h2d_s / 1e6 : 0, r->gpu_h2d_s);
    fprintf(out, "    end to end        %.1f MB/s\n",
            r->seconds > 0 ? (double)r->gpu_bytes / r->seconds / 1e6 : 0);
    fprintf(out, "    overlap           %.0f%% of the copy time hidden behind reads (waited "
            "%.3f s of %.3f s)\n", r->gpu_overlap * 100, r->gpu_wait_s, copy_s);
    fprintf(out, "    CPU -> GPU alone  %.1f MB/s (pinned host -> device, no storage)\n",
            r->gpu_copy_alone_bytes_per_s / 1e6);
    if (r->gpu_verified_bytes)
        fprintf(out, "    verify: %s read back from the device, all blocks match\n",
                cli_human_bytes(s, sizeof s, r->gpu_verified_bytes));
    fprintf(out, "    %s\n", gds_note);
}

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
    /* an object's requests are HTTP: neither option applies */
    jw_kbool(&w, "direct", o->direct && !r->s3_endpoint[0]);
    jw_kbool(&w, "fixed", o->fixed && !r->s3_endpoint[0]);
    jw_kbool(&w, "regfiles", o->regfiles);
    jw_kbool(&w, "sqpoll", o->sqpoll);
    jw_kbool(&w, "iopoll", o->iopoll);
    jw_ki64(&w, "node", o->node);
    jw_kstr(&w, "cache", o->cache_cold ? "cold" : "keep");
    jw_kstr(&w, "mem", r->gpu_mem[0] ? r->gpu_mem : "host");
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
    if (r->s3_endpoint[0]) { /* an object's run */
        jw_key(&w, "s3");
        jw_obj(&w);
        jw_kstr(&w, "endpoint", r->s3_endpoint);
        jw_kstr(&w, "etag", r->s3_etag);
        jw_kstr(&w, "object_pinned_by", r->s3_pinned_by);
        jw_ku64(&w, "object_size_bytes", r->file_size);
        jw_ku64(&w, "requests", r->s3_requests);
        jw_ku64(&w, "retries", r->s3_retries);
        jw_ku64(&w, "throttled", r->s3_throttled);
        jw_kf64(&w, "retry_wait_s", r->s3_retry_wait_s);
        jw_obj_end(&w);
    }
    json_gpu(&w, r);
    jw_key(&w, "features");
    jw_arr(&w);
    char f[sizeof r->features];
    strcpy(f, r->features);
    for (char *save = NULL, *t = strtok_r(f, ",", &save); t; t = strtok_r(NULL, ",", &save))
        jw_str(&w, t);
    jw_arr_end(&w);
    if (extra_fn)
        extra_fn(out, &w);
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
    if (r->s3_endpoint[0])
        fprintf(out, "  object: %s from %s, ETag %s, pinned by %s; %llu HTTP requests, %llu "
                "retries (%.1f s waited), %llu throttled\n",
                cli_human_bytes(b2, sizeof b2, r->file_size), r->s3_endpoint, r->s3_etag,
                r->s3_pinned_by, (unsigned long long)r->s3_requests,
                (unsigned long long)r->s3_retries, r->s3_retry_wait_s,
                (unsigned long long)r->s3_throttled);
    text_gpu(out, r);
    for (unsigned i = 0; per_job && i < o->jobs; i++) {
        fprintf(out, "job %u:\n", i);
        text_figures(out, o, &per_job[i]);
    }
    if (per_job)
        fprintf(out, "all jobs:\n");
    text_figures(out, o, r);
    if (extra_fn)
        extra_fn(out, NULL);
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

void bench_print_result(FILE *out, const struct cli *c, const pinio_bench_opts *o,
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
    /* A row at a time, so a long sweep shows its progress. */
    bench_flush(out);
}

/* The first failed write to --output, which stdio keeps as a flag only. */
static int output_errno;

void bench_flush(FILE *out)
{
    /* stdout through cli_flush(), which keeps a failed write's errno for
     * main's report; --output's for bench_close_output() */
    if (out == stdout)
        cli_flush();
    else if ((fflush(out) != 0 || ferror(out)) && !output_errno)
        output_errno = errno ? errno : EIO; /* a JSON row's flush failed in jw_finish() */
}

int bench_close_output(FILE *out, const struct cli *c, const char *name, bool quiet)
{
    if (!out || out == stdout)
        return 0;
    bool lost = ferror(out) != 0;
    int e = fclose(out) ? errno : 0;
    if (!lost && !e)
        return 0;
    e = output_errno ? output_errno : e ? e : EIO;
    if (!quiet)
        cli_failf("bench", c->fmt == FMT_JSON, -e, name, "--output %s: %s", name, strerror(e));
    return 1;
}

/* A failed run: one stderr line (and the JSON error object with --json). */
void bench_report_error(const struct cli *c, int e, const pinio_diag *d, const char *path)
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
void bench_fill_ctx(struct run_ctx *x, const char *path)
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
void bench_print_repeat_table(FILE *out, const struct cli *c, const struct cell_run *runs,
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

void bench_group_add(struct group_sum *g, const pinio_bench_result *r)
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

void bench_print_group(FILE *out, enum fmt fmt, unsigned group, const struct group_sum *g)
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
