/* pinio_bench's options: defaults, the names of the workloads, verify modes
 * and file services, and pinio_bench_check(). */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/opts.h"
#include "src/bench/job_internal.h"


void pinio_bench_opts_init(pinio_bench_opts *o, size_t size)
{
    pinio_bench_opts d;
    memset(&d, 0, sizeof(d));
    d.rw = PINIO_BENCH_READ;
    d.bs = 1u << 20;
    d.qd = 16;
    d.jobs = 1;
    d.direct = true;
    d.fixed = true;
    d.node = -1;
    d.seed = 1;
    pinio__opts_init(o, size, &d, sizeof(d));
}

static const char *const rw_names[] = {"read", "randread", "write", "randwrite", "rw", "randrw",
                                       "trim", "randtrim"};
#define NRW (sizeof rw_names / sizeof rw_names[0])

const char *pinio_bench_rw_name(pinio_bench_rw rw)
{
    return (unsigned)rw < NRW ? rw_names[rw] : "unknown";
}

int pinio_bench_rw_parse(const char *name, pinio_bench_rw *out)
{
    for (unsigned i = 0; name && i < NRW; i++)
        if (!strcmp(name, rw_names[i])) {
            *out = (pinio_bench_rw)i;
            return 0;
        }
    return -EINVAL;
}

static const char *const verify_names[] = {"pattern", "crc32c", "sha256"};
#define NVERIFY (sizeof verify_names / sizeof verify_names[0])

const char *pinio_bench_verify_mode_name(pinio_bench_verify_mode m)
{
    return (unsigned)m < NVERIFY ? verify_names[m] : "unknown";
}

int pinio_bench_verify_mode_parse(const char *name, pinio_bench_verify_mode *out)
{
    for (unsigned i = 0; name && i < NVERIFY; i++)
        if (!strcmp(name, verify_names[i])) {
            *out = (pinio_bench_verify_mode)i;
            return 0;
        }
    return -EINVAL;
}

static const char *const service_names[] = {"roundrobin", "sequential", "random"};
#define NSERVICE (sizeof service_names / sizeof service_names[0])

const char *pinio_bench_file_service_name(pinio_bench_file_service s)
{
    return (unsigned)s < NSERVICE ? service_names[s] : "unknown";
}

int pinio_bench_file_service_parse(const char *v, pinio_bench_file_service *out, unsigned *nr)
{
    for (unsigned i = 0; v && i < NSERVICE; i++) {
        size_t n = strlen(service_names[i]);
        if (strncmp(v, service_names[i], n) || (v[n] && v[n] != ':'))
            continue;
        unsigned long x = 0;
        if (v[n]) {
            /* fio's ":N", requests before switching; sequential switches
             * when a file's share is done, so a count means nothing there */
            char *end;
            errno = 0;
            x = strtoul(v + n + 1, &end, 10);
            if (i == PINIO_BENCH_FILE_SEQUENTIAL || !isdigit((unsigned char)v[n + 1]) || *end ||
                errno || !x || x > (1ul << 31))
                return -EINVAL;
        }
        *out = (pinio_bench_file_service)i;
        *nr = (unsigned)x;
        return 0;
    }
    return -EINVAL;
}

int pinio_bench_check(const pinio_bench_opts *o, pinio_diag *diag)
{
#define BAD(...) return pinio_diag_set(diag, -EINVAL, __VA_ARGS__), -EINVAL
    if (!o)
        BAD("bench: no options");
    if (o->npaths) {
        if (!o->paths || o->npaths > 4096)
            BAD("bench: 1 to 4096 files");
        for (unsigned i = 0; i < o->npaths; i++)
            if (!o->paths[i] || !*o->paths[i])
                BAD("bench: file %u of %u has no name", i + 1, o->npaths);
            else if (o->npaths > 1 && pinio__s3_is_url(o->paths[i]))
                BAD("bench: %s: an object is benchmarked alone, not in a list of files",
                    o->paths[i]);
        if (o->path && strcmp(o->path, o->paths[0]))
            BAD("bench: path %s and paths[0] %s: set one of them", o->path, o->paths[0]);
    } else if (!o->path || !*o->path) {
        BAD("bench: no target: --file PATH is required");
    }
    if ((unsigned)o->file_service >= NSERVICE || o->file_service_nr > (1u << 31))
        BAD("bench: --file-service-type: roundrobin[:N], sequential or random[:N]");
    if (o->file_service_nr && o->file_service == PINIO_BENCH_FILE_SEQUENTIAL)
        BAD("bench: --file-service-type sequential finishes a file's share before the next: "
            "no :N");
    if ((unsigned)o->rw > PINIO_BENCH_RANDTRIM)
        BAD("bench: unknown workload %d", (int)o->rw);
    if (o->bs < 512 || o->bs > MAX_BS || o->bs % 512)
        BAD("bench: --bs %llu: must be a multiple of 512 between 512 and 64 MiB",
            (unsigned long long)o->bs);
    if (o->qd < 1 || o->qd > 4096)
        BAD("bench: --qd %u: must be between 1 and 4096", o->qd);
    if (o->batch > 4096)
        BAD("bench: --batch %u: must be between 0 (auto) and 4096", o->batch);
    if (o->jobs < 1 || o->jobs > 256)
        BAD("bench: --jobs %u: must be between 1 and 256", o->jobs);
    /* jobs_whole: every job walks the whole area, which need only hold whole blocks */
    uint64_t share = o->jobs_whole ? 1 : o->jobs;
    /* Several files: `size` is the total, each file its equal part. */
    uint64_t nfiles = o->npaths ? o->npaths : 1;
    if (o->filesize % (unit_bs(o) * share))
        BAD("bench: --filesize %llu is not a multiple of bs%s (%llu)",
            (unsigned long long)o->filesize, o->jobs_whole ? "" : " x jobs",
            (unsigned long long)(unit_bs(o) * share));
    if (!o->filesize && o->size % (unit_bs(o) * share * nfiles))
        BAD("bench: --size %llu is not a multiple of bs%s%s (%llu)", (unsigned long long)o->size,
            o->jobs_whole ? "" : " x jobs", nfiles > 1 ? " x files" : "",
            (unsigned long long)(unit_bs(o) * share * nfiles));
    /* A run shorter than a millisecond ends before its first completion and
     * would report success with nothing moved (--time 1e-300). */
    if (!(o->time_s == 0.0 || (o->time_s >= 1e-3 && o->time_s <= 1e6)))
        BAD("bench: --time must be 0 (one pass) or between 0.001 and 1e6 seconds");
    if (o->iopoll && !o->direct)
        BAD("bench: --iopoll needs O_DIRECT (drop --direct=0)");
    /* An IOPOLL ring takes only pollable reads and writes: each fallocate or
     * discard command would fail with a bare "invalid argument". */
    if (o->iopoll && is_trim(o->rw))
        BAD("bench: --iopoll polls reads and writes: not with a trim workload");
    if (o->verify && is_trim(o->rw))
        BAD("bench: --verify does not apply to trim workloads: a trimmed range holds no data "
            "to check");
    if (o->verify && !is_write(o->rw))
        BAD("bench: --verify applies to write workloads (write, randwrite)");
    if (o->rwmixread > 99)
        BAD("bench: --rwmixread %u: must be between 1 and 99 (all reads or all writes is "
            "--rw read or write)", o->rwmixread);
    if (o->rwmixread && !is_mixed(o->rw))
        BAD("bench: --rwmixread applies to mixed workloads (rw, randrw)");
    if (o->offset % 512)
        BAD("bench: --offset %llu: must be a multiple of 512", (unsigned long long)o->offset);
    if (o->io_size % (unit_bs(o) * o->jobs))
        BAD("bench: --io-size %llu is not a multiple of bs x jobs (%llu)",
            (unsigned long long)o->io_size, (unsigned long long)(unit_bs(o) * o->jobs));
    if (o->filesize && o->size % (unit_bs(o) * o->jobs))
        BAD("bench: --size %llu with --filesize is the bytes to transfer (fio's io_size): not "
            "a multiple of bs x jobs (%llu)", (unsigned long long)o->size,
            (unsigned long long)(unit_bs(o) * o->jobs));
    if ((o->io_size || o->loops > 1) && o->time_s > 0)
        BAD("bench: --io-size and --loops bound a run by bytes: not with --time");
    if (!(o->ramp_time_s == 0.0 || (o->ramp_time_s > 0 && o->ramp_time_s <= 1e6)))
        BAD("bench: --ramp-time must be between 0 and 1e6 seconds");
    if (o->ramp_time_s > 0 && !(o->time_s > 0))
        BAD("bench: --ramp-time needs --time (the ramp runs first, then --time is measured)");
    if (!(o->startdelay_s == 0.0 || (o->startdelay_s > 0 && o->startdelay_s <= 1e6)))
        BAD("bench: --startdelay must be between 0 and 1e6 seconds");
    if (o->dist != PINIO_BENCH_DIST_UNIFORM || o->norandommap) {
        if (!is_rand(o->rw))
            BAD("bench: --random-distribution and --norandommap apply to random workloads");
        pinio__dist d;
        const char *why = "";
        if (pinio__dist_init(&d, o, 1000, 1, &why))
            BAD("bench: --random-distribution: %s", why);
    }
    if (o->nbssplit) {
        unsigned sum = 0;
        if (!o->bssplit || o->nbssplit > 16)
            BAD("bench: --bssplit: 1 to 16 sizes");
        for (unsigned i = 0; i < o->nbssplit; i++) {
            uint64_t b = o->bssplit[i].bs;
            if (b < 512 || b > MAX_BS || b % 512)
                BAD("bench: --bssplit: size %llu must be a multiple of 512 between 512 and "
                    "64 MiB", (unsigned long long)b);
            sum += o->bssplit[i].pct;
        }
        if (sum != 100)
            BAD("bench: --bssplit: the shares sum to %u, not 100", sum);
        if (o->blockalign % 512 || o->blockalign > MAX_BS)
            BAD("bench: --blockalign %llu: must be a multiple of 512 up to 64 MiB",
                (unsigned long long)o->blockalign);
    } else if (o->bsrange_max || o->bsrange_min) {
        uint64_t g = o->blockalign ? o->blockalign : 512;
        if (o->blockalign % 512 || o->blockalign > MAX_BS)
            BAD("bench: --blockalign %llu: must be a multiple of 512 up to 64 MiB",
                (unsigned long long)o->blockalign);
        if (!o->bsrange_min || o->bsrange_min > o->bsrange_max || o->bsrange_max > MAX_BS ||
            o->bsrange_min % g || o->bsrange_max % g)
            BAD("bench: --bsrange %llu-%llu: want A-B, A <= B, both multiples of %llu (the "
                "--blockalign or 512) up to 64 MiB", (unsigned long long)o->bsrange_min,
                (unsigned long long)o->bsrange_max, (unsigned long long)g);
    } else if (o->blockalign) {
        BAD("bench: --blockalign applies to --bssplit and --bsrange runs (without them, "
            "offsets are multiples of --bs)");
    }
    if (o->nbssplit && (o->bsrange_max || o->bsrange_min))
        BAD("bench: --bssplit and --bsrange both set the request sizes: one of them");
    if (o->thinktime_us > 3600000000ull)
        BAD("bench: --thinktime %llu us: at most an hour", (unsigned long long)o->thinktime_us);
    if (o->thinktime_blocks && !o->thinktime_us)
        BAD("bench: --thinktime-blocks needs --thinktime");
    if (o->jobs_whole && o->jobs > 1 && o->verify)
        BAD("bench: --verify with --jobs-share whole: jobs would write the same blocks, and "
            "no block's last writer is known");
    if ((o->verify || o->verify_only) &&
        (o->nbssplit || o->bsrange_max || o->norandommap || o->dist != PINIO_BENCH_DIST_UNIFORM))
        BAD("bench: --verify checks each block once: not with --bssplit, --bsrange, --norandommap or "
            "--random-distribution");
    if (o->verify && is_mixed(o->rw))
        BAD("bench: --verify applies to write workloads (write, randwrite), not mixed ones");
    if ((unsigned)o->verify_mode >= NVERIFY)
        BAD("bench: verify mode %d: pattern, crc32c or sha256", (int)o->verify_mode);
    if (o->verify_mode != PINIO_BENCH_VERIFY_PATTERN && !o->verify && !o->verify_only)
        BAD("bench: a verify mode (%s) needs --verify or --verify-only",
            pinio_bench_verify_mode_name(o->verify_mode));
    if (o->verify_only && is_trim(o->rw))
        BAD("bench: --verify-only reads what a --verify run wrote: not with a trim workload, "
            "which reads nothing");
    if (o->verify_only && (is_write(o->rw) || o->verify))
        BAD("bench: --verify-only checks what is there: a read workload (read, randread), "
            "without --verify");
    if (o->npercentiles > PINIO_BENCH_MAX_PCT || (o->npercentiles && !o->percentiles))
        BAD("bench: --percentile-list: at most %d percentiles", PINIO_BENCH_MAX_PCT);
    for (unsigned i = 0; i < o->npercentiles; i++)
        if (!(o->percentiles[i] > 0 && o->percentiles[i] <= 100))
            BAD("bench: --percentile-list: %g is not above 0 and at most 100",
                o->percentiles[i]);
    if (o->interval_ms > 3600000)
        BAD("bench: --log-interval %u ms: at most an hour (3600000)", o->interval_ms);
    if (o->node < -1)
        BAD("bench: --node %d: must be a node number", o->node);
    if (o->node >= 0 && !pinio__prim_node_exists(o->node))
        BAD("bench: --node %d: no such NUMA node on this machine", o->node);
    bool hip;
    int dev, gpu = pinio__bench_mem_parse(o->mem, &hip, &dev);
    if (gpu < 0)
        BAD("bench: --mem %s: not a destination (host, cuda:N or hip:N, N from 0)", o->mem);
    /* Writes would need device -> host -> storage, a path gdsio measures
     * with its own modes; rather than a figure that means something else,
     * a refusal that says so. */
    if (gpu && o->rw != PINIO_BENCH_READ && o->rw != PINIO_BENCH_RANDREAD)
        BAD("bench: --mem %s: GPU memory is a destination of reads only (read, randread: "
            "storage -> host -> GPU); --rw %s would need GPU -> host -> storage, which is not "
            "measured", o->mem, pinio_bench_rw_name(o->rw));
    if (gpu && pinio__bench_is_s3(o))
        BAD("bench: --mem %s: an object target (%s) reads into host memory only", o->mem,
            o->path);
    if (pinio__bench_is_s3(o))
        return pinio__bench_s3_check(o, diag);
    return 0;
#undef BAD
}

int pinio__bench_mem_parse(const char *mem, bool *hip, int *n)
{
    if (!mem || !*mem || !strcmp(mem, "host") || !strcmp(mem, "malloc"))
        return 0;
    const char *num = !strncmp(mem, "cuda:", 5) ? mem + 5 : !strncmp(mem, "hip:", 4) ? mem + 4
                                                                                      : NULL;
    char *end;
    if (!num || *num < '0' || *num > '9')
        return -EINVAL;
    unsigned long v = strtoul(num, &end, 10);
    if (*end || v > 1023)
        return -EINVAL;
    *hip = num == mem + 4;
    *n = (int)v;
    return 1;
}

bool pinio__bench_is_s3(const pinio_bench_opts *o)
{
    return o->path && pinio__s3_is_url(o->path);
}

int pinio__bench_s3_check(const pinio_bench_opts *o, pinio_diag *diag)
{
#define NO(cond, ...)                                                                              \
    do {                                                                                           \
        if (cond)                                                                                  \
            return pinio_diag_set(diag, -EINVAL, __VA_ARGS__), -EINVAL;                            \
    } while (0)
    const char *p = o->path;
    NO(is_write(o->rw) || is_trim(o->rw),
       "bench: %s: an object is only read (--rw read or randread): %s would change it, and "
       "bench never writes to a store", p, pinio_bench_rw_name(o->rw));
    NO(o->npaths > 1, "bench: %s: one object per run, not a list of targets", p);
    NO(o->verify || o->verify_only,
       "bench: %s: --verify and --verify-only check blocks a --verify write run left, which "
       "an object never holds (every range is checked by its Content-Range and length, and "
       "the object pinned by its ETag)", p);
    NO(o->sqpoll || o->iopoll || o->regfiles,
       "bench: %s: --sqpoll, --iopoll and --regfiles are io_uring's: an object is read over "
       "HTTP", p);
    NO(o->cache_cold, "bench: %s: --cache cold drops a local file's pages: not an object's", p);
    NO(o->batch, "bench: %s: --batch gathers io_uring submissions: each HTTP request leaves on "
       "its own", p);
    NO(o->rate_bytes_per_s || o->rate_iops || o->thinktime_us,
       "bench: %s: --rate, --rate-iops and --thinktime are not supported for objects", p);
    const char *spec = o->faults ? o->faults : getenv("PINIO_FAULTS");
    NO(spec && *spec, "bench: %s: PINIO_FAULTS injects io_uring completion faults: an object "
       "run has none (a fault proxy in front of the store gives the network's)", p);
    return 0;
#undef NO
}
