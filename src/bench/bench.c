/* pinio_bench: the storage benchmark behind `pinio bench` (contract in
 * include/pinio/bench.h).
 *
 * Why liburing directly and not pinio_ring (the engine): the engine takes the
 * best rung of a fallback ladder and hides it behind a batch call; a
 * benchmark must run exactly what it was asked (or fail saying why), keep a
 * steady `qd` requests in flight and time each one. Writes live here too, for
 * the same reason: the engine is a loader and has no use for them, and one
 * loop serving both directions keeps reads and writes measured identically.
 * What is shared with the engine is shared for real, through its public API
 * where there is one: the setup ladder (pinio_ring_setup_uring()), the
 * setup-flag names (pinio_ring_flags_format()), the cache drop
 * (pinio_file_drop_cache()); the PINIO_FAULTS hook (uring/faults.h); and
 * the memory primitives of the pool (numa/prim.h), not libnuma. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <liburing.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "pinio/bench.h"
#include "pinio/ring.h"
#include "pinio/sys.h"
#include "src/base/opts.h"
#include "src/base/stale.h"
#include "src/bench/bench_internal.h"
#include "numa/prim.h"
#include "uring/faults.h"

#define MAX_BS (64ull << 20)
#define HUGE_ALIGN PINIO__PRIM_HUGE_SIZE
#define MAX_RETRIES 1000 /* EAGAIN/EINTR/EBUSY resubmissions per job before giving up */

/* io_uring's block discard command (Linux 6.12, <linux/blkdev.h>): newer
 * than bookworm's kernel headers. */
#ifndef BLOCK_URING_CMD_DISCARD
#define BLOCK_URING_CMD_DISCARD _IO(0x12, 0)
#endif

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

/* The workload writes (all or some of its requests). */
static bool is_write(pinio_bench_rw rw)
{
    return rw == PINIO_BENCH_WRITE || rw == PINIO_BENCH_RANDWRITE || rw == PINIO_BENCH_RW ||
           rw == PINIO_BENCH_RANDRW;
}

static bool is_mixed(pinio_bench_rw rw)
{
    return rw == PINIO_BENCH_RW || rw == PINIO_BENCH_RANDRW;
}

static bool is_rand(pinio_bench_rw rw)
{
    return rw == PINIO_BENCH_RANDREAD || rw == PINIO_BENCH_RANDWRITE || rw == PINIO_BENCH_RANDRW ||
           rw == PINIO_BENCH_RANDTRIM;
}

static bool is_trim(pinio_bench_rw rw)
{
    return rw == PINIO_BENCH_TRIM || rw == PINIO_BENCH_RANDTRIM;
}

/* The unit sizes are multiples of: bs, or the largest size of bssplit or
 * bsrange. */
static uint64_t unit_bs(const pinio_bench_opts *o)
{
    if (o->bsrange_max)
        return o->bsrange_max;
    uint64_t m = o->nbssplit ? 0 : o->bs;
    for (unsigned i = 0; o->bssplit && i < o->nbssplit; i++)
        m = o->bssplit[i].bs > m ? o->bssplit[i].bs : m;
    return m;
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
    return 0;
#undef BAD
}

/* ---- the target --------------------------------------------------------- */

/* Marks a file bench made, so that a later write run may reuse it without
 * --allow-file-overwrite (and a later run may remove it as a stale
 * temporary): best effort, file systems without user xattrs lose only that. */
#define BENCH_XATTR "user.pinio.bench"

static bool made_by_bench(const char *path)
{
    return getxattr(path, BENCH_XATTR, NULL, 0) >= 0; /* present, whatever its value */
}

static uint64_t now_ns(void);

/* Asks the progress callback whether to go on while the target is made,
 * about once a second as during the run: the CLI's Ctrl-C reaches the
 * library this way (the library installs no signal handlers), and the
 * partial file is removed. */
static int setup_cancelled(const pinio_bench_opts *o, uint64_t total, uint64_t t0,
                           const char *path, pinio_diag *diag)
{
    if (!o->progress)
        return 0;
    /* Setup, not the workload: the workload's bytes are still 0. */
    pinio_progress pg = { .done_bytes = 0, .total_bytes = total,
                          .elapsed_s = (double)(now_ns() - t0) / 1e9 };
    if (o->progress(o->progress_ctx, &pg) == 0)
        return 0;
    pinio_diag_set(diag, -ECANCELED, "bench: %s: stopped by the progress callback while it was "
                   "being created", path);
    return -ECANCELED;
}

static int fill_new_file(const pinio_bench_opts *o, int fd, uint64_t size, const char *path,
                         pinio_diag *diag)
{
    uint64_t seed = o->seed, t0 = now_ns(), next = t0 + 1000000000ull;
    /* Real data, not a sparse file: reading holes costs no I/O and would
     * flatter every figure. The verify pattern is as good as random here. */
    size_t chunk = 4u << 20;
    void *buf = malloc(chunk);
    if (!buf)
        return pinio_diag_set(diag, -ENOMEM, "bench: %s: no memory to fill it", path), -ENOMEM;
    for (uint64_t off = 0; off < size;) {
        size_t n = size - off < chunk ? (size_t)(size - off) : chunk;
        pinio__bench_pattern_fill(buf, n & ~(size_t)7, off, seed);
        ssize_t w = pwrite(fd, buf, n, (off_t)off);
        if (w <= 0) {
            int e = w < 0 ? -errno : -EIO;
            free(buf);
            return pinio_diag_set(diag, e, "bench: %s: filling at offset %llu: %s", path,
                                  (unsigned long long)off, pinio_strerror(e)),
                   e;
        }
        off += (uint64_t)w;
        int c = 0;
        if (o->progress && now_ns() >= next) {
            next += 1000000000ull;
            c = setup_cancelled(o, size, t0, path, diag);
        }
        if (c) {
            free(buf);
            return c;
        }
    }
    free(buf);
    if (fsync(fd))
        return pinio_diag_set(diag, -errno, "bench: %s: fsync: %s", path, pinio_strerror(-errno)),
               -errno;
    return 0;
}

/* Opens (creating when allowed) the target `p` and settles the size: `osize`
 * bytes of it (0: what it has). On success `*size` is the bytes the run
 * uses and `res->file_size` the target's size. */
static int prepare_target(const pinio_bench_opts *o, const char *p, uint64_t osize,
                          uint64_t *size, pinio_bench_file *res, int *hold, pinio_diag *diag)
{
    bool wr = is_write(o->rw) || is_trim(o->rw); /* destroys what is there */
    struct stat st;
    *size = osize;
    res->created = false;
    if (stat(p, &st)) {
        int e = -errno;
        if (e != -ENOENT || o->verify_only)
            return pinio_diag_set(diag, e, "bench: %s: %s", p, pinio_strerror(e)), e;
        uint64_t want = osize ? osize : (1ull << 30);
        want -= want % (unit_bs(o) * o->jobs);
        if (!want)
            return pinio_diag_set(diag, -EINVAL, "bench: %s: --size too small", p), -EINVAL;
        /* Made under a temporary name and renamed into place, so that an
         * interrupted run never leaves a partial file at the target's name
         * (which the next run would refuse, or worse, benchmark). */
        char *tmp = malloc(strlen(p) + 48);
        if (!tmp)
            return pinio_diag_set(diag, -ENOMEM, "bench: no memory"), -ENOMEM;
        sprintf(tmp, "%s.pinio-bench-%ld.tmp", p, (long)getpid());
        /* What an earlier run killed while filling left (src/base/stale.h). */
        pinio__remove_stale(p, ".pinio-bench-", ".tmp", BENCH_XATTR);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0) {
            e = -errno;
            pinio_diag_set(diag, e, "bench: %s: cannot create: %s", tmp, pinio_strerror(e));
            free(tmp);
            return e;
        }
        (void)pinio__stale_mark(fd, BENCH_XATTR);
        /* A write run writes every block itself; reserving the space keeps
         * the first pass from measuring block allocation in the kernel. */
        /* A mixed workload reads too: it needs real data like a read. */
        int rc = wr && !is_mixed(o->rw) && !is_trim(o->rw)
                     ? (posix_fallocate(fd, 0, (off_t)(o->offset + want)) ? -ENOSPC : 0)
                     : fill_new_file(o, fd, o->offset + want, p, diag);
        if (!rc && fsync(fd))
            rc = -errno;
        close(fd);
        /* RENAME_NOREPLACE: a file that appeared at the name meanwhile is
         * someone's, not ours to replace; link() does the same where the
         * file system lacks the flag. */
        if (!rc && renameat2(AT_FDCWD, tmp, AT_FDCWD, p, RENAME_NOREPLACE) != 0) {
            rc = -errno;
            if (rc == -EINVAL && link(tmp, p) == 0)
                rc = 0;
            else if (rc == -EINVAL)
                rc = -errno;
            if (rc)
                pinio_diag_set(diag, rc, "bench: %s: moving the new file into place: %s", p,
                               pinio_strerror(rc));
        }
        unlink(tmp); /* after a rename there is nothing left to remove */
        free(tmp);
        if (rc) {
            if (rc == -ENOSPC)
                pinio_diag_set(diag, rc, "bench: %s: no space for %llu bytes", p,
                               (unsigned long long)want);
            return rc;
        }
        res->created = true;
        res->size = o->offset + want;
        *size = want;
        return 0;
    }
    uint64_t fsize;
    if (S_ISREG(st.st_mode)) {
        fsize = (uint64_t)st.st_size;
        /* A write run destroys what the file holds: only an empty file, one
         * bench made, or an explicit yes. */
        if (wr && fsize && !o->allow_file_overwrite && !made_by_bench(p))
            return pinio_diag_set(diag, -EEXIST,
                                  "bench: %s holds %llu bytes that bench did not write: a %s "
                                  "run would destroy them; use a new path, or add "
                                  "--allow-file-overwrite to mean it",
                                  p, (unsigned long long)fsize, is_trim(o->rw) ? "trim" : "write"),
                   -EEXIST;
    } else if (S_ISBLK(st.st_mode)) {
        if (wr && !o->allow_device_overwrite)
            return pinio_diag_set(diag, -EPERM,
                                  "bench: %s is a block device: %s destroys its data; "
                                  "add --allow-device-overwrite to mean it",
                                  p, is_trim(o->rw) ? "trimming" : "writing"),
                   -EPERM;
        /* O_EXCL on a block device claims it: it fails with EBUSY while a
         * file system is mounted on it (or another program claimed it), and
         * while held, nobody can mount it under the run. Writes keep it. */
        int fd = open(p, O_RDONLY | O_CLOEXEC | (wr ? O_EXCL : 0));
        if (fd < 0) {
            int e = -errno;
            if (e == -EBUSY)
                return pinio_diag_set(diag, e,
                                      "bench: %s is in use (a mounted file system, or another "
                                      "program holds it exclusively): refusing to %s it",
                                      p, is_trim(o->rw) ? "trim" : "write to"),
                       e;
            return pinio_diag_set(diag, e, "bench: %s: %s", p, pinio_strerror(e)), e;
        }
        int rc = ioctl(fd, BLKGETSIZE64, &fsize) ? -errno : 0;
        if (wr && !rc)
            *hold = fd;
        else
            close(fd);
        if (rc)
            return pinio_diag_set(diag, rc, "bench: %s: BLKGETSIZE64: %s", p, pinio_strerror(rc)),
                   rc;
    } else {
        return pinio_diag_set(diag, -EPERM, "bench: %s is neither a regular file nor a block device",
                              p),
               -EPERM;
    }
    if (!*size) {
        uint64_t avail = fsize > o->offset ? fsize - o->offset : 0;
        *size = avail - avail % (unit_bs(o) * o->jobs);
        if (!*size)
            return pinio_diag_set(diag, -EINVAL,
                                  "bench: %s: %llu bytes is less than one block per job", p,
                                  (unsigned long long)fsize),
                   -EINVAL;
    } else if (o->offset + *size > fsize && !(is_write(o->rw) && S_ISREG(st.st_mode))) {
        return pinio_diag_set(diag, -EINVAL, "bench: %s has %llu bytes, --offset + --size ask "
                              "for %llu", p, (unsigned long long)fsize,
                              (unsigned long long)(o->offset + *size)),
               -EINVAL;
    }
    res->size = fsize > o->offset + *size ? fsize : o->offset + *size;
    return 0;
}

/* Prepares every file of the run (prepare_target() each): first those that
 * exist, which creates and writes nothing, so that a refused one (data
 * bench did not write, a block device) stops the run before any other file
 * is made; then the missing ones, with the size the others settled. On
 * success `*size` is the bytes used in each file; on failure `out[i].created`
 * says which files it made (the caller removes them). `out` and `hold` have
 * `n` entries. */
static int pinio__bench_prepare_files(const pinio_bench_opts *o, const char *const *paths,
                                      unsigned n, uint64_t *size, pinio_bench_file *out,
                                      int *hold, pinio_diag *diag)
{
    /* The part of each file: fio's size / files, or filesize. */
    uint64_t want = o->filesize ? o->filesize : o->size / n, got;
    int rc = 0;
    bool *exists = calloc(n, sizeof *exists);
    if (!exists)
        return pinio_diag_set(diag, -ENOMEM, "bench: no memory"), -ENOMEM;
    for (unsigned i = 0; i < n; i++) {
        struct stat st;
        exists[i] = stat(paths[i], &st) == 0 || errno != ENOENT;
    }
    /* Size 0: the smallest of the existing files, so that every file has
     * the same share (the order within a file is one permutation). */
    uint64_t least = 0;
    for (unsigned i = 0; i < n && !rc; i++) {
        if (!exists[i])
            continue;
        rc = prepare_target(o, paths[i], want, &got, &out[i], &hold[i], diag);
        if (!rc && !want)
            least = least && least < got ? least : got;
    }
    if (!want && least)
        want = least;
    else if (!want) /* nothing exists: 1 GiB in all, as for one new file */
        want = (1ull << 30) / n;
    for (unsigned i = 0; i < n && !rc; i++)
        if (!exists[i])
            rc = prepare_target(o, paths[i], want, &got, &out[i], &hold[i], diag);
    free(exists);
    if (rc)
        return rc;
    for (unsigned i = 0; i < n; i++)
        out[i].used = want;
    *size = want;
    return 0;
}

/* Without CAP_IPC_LOCK the kernel charges registered buffers to
 * RLIMIT_MEMLOCK. Checked before the target is created or filled: a run
 * that cannot have its buffers must not first write gigabytes. The bound
 * is the least the registration can cost (qd x bs per job, 4 KiB pages);
 * with huge pages it costs up to the 2 MiB-rounded area, and a run in
 * between fails at registration instead (and removes what it created). */
static int pinio__bench_check_memlock(const pinio_bench_opts *o, pinio_diag *diag)
{
    pinio_sysinfo si;
    if (!o->fixed || is_trim(o->rw) || pinio_sys_probe(&si) || si.registrable == PINIO_UNLIMITED)
        return 0;
    uint64_t need = (uint64_t)o->jobs * o->qd * o->bs;
    if (need <= si.registrable)
        return 0;
    return pinio_diag_set(diag, -ENOMEM,
                          "bench: %s: --fixed registers %llu bytes of buffers (jobs x qd x bs) "
                          "but RLIMIT_MEMLOCK leaves %llu (raise ulimit -l, lower --qd or --bs, "
                          "or use --fixed=0)",
                          o->path, (unsigned long long)need, (unsigned long long)si.registrable),
           -ENOMEM;
}

/* The offset and length alignment O_DIRECT needs on `fd`: the logical block
 * size of a block device, statx's dio_offset_align for a file (Linux 6.1+);
 * 0 when unknown. */
static unsigned dio_align(int fd)
{
    struct stat st;
    if (fstat(fd, &st))
        return 0;
    if (S_ISBLK(st.st_mode)) {
        int ss = 0;
        return ioctl(fd, BLKSSZGET, &ss) == 0 && ss > 0 ? (unsigned)ss : 0;
    }
#if defined(STATX_DIOALIGN) && !defined(PINIO_NO_STATX_DIO_FIELDS)
    struct statx sx;
    if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 && (sx.stx_mask & STATX_DIOALIGN))
        return sx.stx_dio_offset_align;
#endif
    return 0;
}

/* Directions: the index of every per-direction array (and a slot's `wr`). */
#define DIR_TRIM 2
#define NDIR 3
/* job::dir of a mixed pass, which draws read or write per request. */
#define PASS_MIXED 3
static const char *const dir_names[NDIR] = {"read", "write", "trim"};

/* How a trim workload deallocates (run_jobs() probes it before the run). */
enum trim_how {
    TRIM_NONE = 0,
    TRIM_PUNCH,   /* regular file: IORING_OP_FALLOCATE, PUNCH_HOLE | KEEP_SIZE */
    TRIM_CMD,     /* block device: io_uring's BLOCK_URING_CMD_DISCARD (6.12+) */
    TRIM_IOCTL,   /* block device on an older kernel: BLKDISCARD, then a NOP */
};

/* ---- trim: how, probed before the run ----------------------------------- */

/* Whether the kernel has io_uring's block discard command (Linux 6.12),
 * asked with a zero-length discard, which deallocates nothing: a kernel
 * with it refuses the length (-EINVAL, after the command was found); one
 * without it has no uring_cmd for block devices (-EOPNOTSUPP) or no
 * IORING_OP_URING_CMD at all (5.19-, hence the opcode probe first, as its
 * -EINVAL would read like the answer of a kernel that has it). */
static bool discard_cmd_works(int fd)
{
    struct io_uring r;
    if (io_uring_queue_init(2, &r, 0))
        return false;
    bool ok = false;
    struct io_uring_probe *p = io_uring_get_probe_ring(&r);
    struct io_uring_sqe *sqe = io_uring_get_sqe(&r);
    if (p && sqe && io_uring_opcode_supported(p, IORING_OP_URING_CMD)) {
        io_uring_prep_rw(IORING_OP_URING_CMD, sqe, fd, NULL, 0, 0);
        sqe->cmd_op = BLOCK_URING_CMD_DISCARD;
        struct io_uring_cqe *cqe;
        if (io_uring_submit_and_wait(&r, 1) == 1 && !io_uring_peek_cqe(&r, &cqe)) {
            ok = cqe->res == -EINVAL || cqe->res == 0;
            io_uring_cqe_seen(&r, cqe);
        }
    }
    if (p)
        io_uring_free_probe(p);
    io_uring_queue_exit(&r);
    return ok;
}

/* Finds how a trim workload deallocates on `fd` (opened for writing), so
 * that a target that cannot is named once, before the run, instead of in
 * the first request's error. The probes destroy nothing: a hole punched
 * past the end of the file (KEEP_SIZE: the file does not grow), a
 * zero-length BLKDISCARD (which the kernel checks for discard support
 * before it refuses the length). */
static int pinio__bench_trim_probe(const char *path, int fd, const pinio__faults *f,
                                   enum trim_how *how, pinio_diag *diag)
{
    struct stat st;
    if (fstat(fd, &st))
        return pinio_diag_set(diag, -errno, "bench: %s: %s", path, pinio_strerror(-errno)),
               -errno;
    bool reg = S_ISREG(st.st_mode);
    int rc;
    if (f && f->trimnotsup)
        rc = -EOPNOTSUPP;
    else if (reg)
        rc = fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                       (st.st_size + 4095) & ~(off_t)4095, 4096) ? -errno : 0;
    else
        rc = ioctl(fd, BLKDISCARD, (uint64_t[2]){0, 0}) ? -errno : 0;
    if (!reg && rc == -EINVAL)
        rc = 0; /* discard is supported; the zero length was refused */
    if (rc == -EOPNOTSUPP)
        return pinio_diag_set(diag, rc,
                              reg ? "bench: %s: the file system does not support punching holes "
                                    "(fallocate PUNCH_HOLE), so trim cannot run"
                                  : "bench: %s: the device does not support discard, so trim "
                                    "cannot run",
                              path),
               rc;
    if (rc)
        return pinio_diag_set(diag, rc, "bench: %s: probing %s: %s", path,
                              reg ? "hole punching" : "discard", pinio_strerror(rc)),
               rc;
    *how = reg ? TRIM_PUNCH
               : !(f && f->nodiscardcmd) && discard_cmd_works(fd) ? TRIM_CMD : TRIM_IOCTL;
    return 0;
}

/* ---- one job ------------------------------------------------------------ */

typedef struct slot {
    uint64_t off;  /* file offset of the request */
    uint64_t t0;   /* issue time (prepared), ns */
    uint64_t ts;   /* submission time (the submit call that carried it), ns */
    uint64_t idx;  /* issue index within the pass (verify: the block's generation) */
    uint32_t len;  /* bytes of the request (bs, or drawn from bssplit) */
    uint32_t done; /* bytes completed so far (short transfers resubmit the rest) */
    uint8_t wr;    /* direction: 0 read, 1 write, DIR_TRIM (a bool before trims) */
    uint16_t file; /* index of its file (several files; 0 otherwise) */
    int32_t sync_res; /* TRIM_IOCTL: what BLKDISCARD returned (0 or -errno) */
} slot;

/* Start gate: jobs set up (ring, buffers, registration) off the clock, then
 * wait here; the caller opens it once every started job arrived, or aborts
 * it when one failed or a thread could not be created. */
struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned ready;
    unsigned finished; /* jobs whose workload pass ended */
    int state;         /* 0 wait, 1 go, -1 abort */
    atomic_bool cancel; /* the progress callback asked to stop */
    uint64_t t0_ns;     /* when the gate opened: the time series' origin */
    struct ivlog *iv;   /* the time series, when interval_fn is set */
};

/* The time series (pinio_bench_opts::interval_fn). Each job closes its
 * intervals itself, once per interval and off the per-request path, and
 * hands each one in here under the gate's mutex: its rows and its latency
 * histogram merged into the interval's slot. The caller's thread (watch())
 * delivers an interval once every job handed it in or ended, in order, and
 * calls the callback outside the lock. A job that runs IV_SLOTS intervals
 * ahead of the slowest job waits for a slot: only a stalled device does
 * that, and then the log is what is behind, not the measurement. */
#define IV_SLOTS 8
#define IV_FREE UINT64_MAX

struct ivslot {
    uint64_t k;       /* interval held, IV_FREE when free */
    uint64_t span_ns; /* longest part of the interval a job covered */
    bool final;       /* a job's last, partial interval is in it */
    pinio__hist h[NDIR]; /* latency, merged over the jobs, per direction */
    pinio_bench_interval *rows; /* jobs x NDIR */
    bool *has;                  /* rows filled */
};

struct ivlog {
    uint64_t len_ns, ramp_ns;
    unsigned njobs;
    uint64_t next;     /* the next interval to deliver */
    uint64_t *job_k;   /* per job: intervals handed in so far */
    bool *job_done;    /* per job: handed in its last one */
    bool quiet;        /* the callback asked for no more calls */
    struct ivslot slot[IV_SLOTS];
};

/* Running statistics over interval samples (pinio_bench_samples). */
typedef struct sstat {
    uint64_t n;
    double min, max, sum, sumsq;
} sstat;

/* Several files: what each file's own order has reached. */
typedef struct fstate {
    uint64_t issued;    /* requests of the pass to this file: its order's index */
    uint64_t bytes;     /* bytes of the pass to this file */
    uint64_t seq_pos;   /* fancy_next()'s walk in this file */
    uint64_t wr_issued; /* requests the write pass issued to it (verify) */
    uint64_t quota;     /* the read-back pass: blocks to read back from it */
} fstate;

typedef struct job {
    const pinio_bench_opts *o;
    unsigned idx;
    int fd;
    /* The files: fds[nfiles] (&fd for one file) and their names. */
    int *fds;
    unsigned nfiles;
    const char *const *paths;
    /* next_io_files() picks the file of each request: with several files,
     * or with trace_file set. */
    bool multi;
    fstate *fs;
    unsigned fcur, fleft; /* random service: the file drawn and its requests left */
    bool readback;        /* the pass reads back fs[].quota blocks of each file */
    uint64_t base, nblocks;     /* region: [base, base + nblocks * bs) */
    uint64_t region;            /* bytes of the region */
    uint64_t perm_mul, perm_add; /* random order: block = (i * mul + add) % nblocks */
    uint64_t maxbs;             /* bytes per slot: bs, or the largest of bssplit */
    struct gate *gate;
    pthread_t th;
    struct io_uring ring;
    bool have_ring;
    bool reg_ring; /* the ring's fd was registered in the job thread's context */
    unsigned setup_flags;
    bool fixed, regfiles;
    unsigned batch; /* refills gathered per submit call (resolved, 1 .. qd) */
    uint8_t *area;
    size_t area_len;
    slot *slots;
    pinio__faults *faults;
    /* The pass being run (job_pass()): what the next request is. */
    int dir;        /* 0 reads, 1 writes, DIR_TRIM, PASS_MIXED: drawn per request (rwmixread) */
    enum trim_how trim_how;
    bool fancy;     /* offsets or sizes not from the plain order (fancy_next()) */
    bool header;    /* writes carry the verify block header and pattern */
    pinio_bench_trace_fn trace; /* the workload pass only */
    pinio_bench_trace_file_fn trace_file; /* likewise */
    uint64_t issued, issued_bytes, seq_pos;
    pinio__dist dist;
    uint64_t rng;   /* direction and size draws */
    /* Rate limit: request k (bytes b before it) is issued no earlier than
     * t_rate0 + max(k x ns_per_io, b x ns_per_byte). */
    double ns_per_io, ns_per_byte;
    uint64_t t_rate0;
    /* Think time: after every think_blocks completions, nothing is issued
     * before think_until (ns), through the same parking as the rate. */
    uint64_t think_ns, think_until;
    unsigned think_blocks, think_count;
    unsigned *idle; /* slots waiting for their issue time */
    unsigned nidle;
    uint64_t ramp_end; /* ns; 0 once the ramp is over (or without one) */
    pinio__hist hist[NDIR]; /* reads, writes, trims: lat (issue to completion) */
    pinio__hist slat[NDIR], clat[NDIR]; /* issue to submission, submission to completion */
    /* Issued since the last submit call: their submission time is the
     * call's (fio's slat for io_uring). */
    unsigned *pend;
    unsigned npend;
    /* Intervals: bandwidth and IOPS samples, and the time series. */
    uint64_t iv_len, iv_next, iv_k; /* ns, end of the current one, its index */
    uint64_t iv_bytes0[NDIR], iv_ios0[NDIR]; /* counters when it began */
    sstat bw_s[NDIR], iops_s[NDIR];
    pinio__hist *ihist; /* [NDIR], the current interval's latencies (time series only) */
    uint64_t ios[NDIR], bytes[NDIR], submits, retries, verified;
    uint64_t verify_submits; /* the read-back pass's, apart: not the workload's cost */
    uint64_t wr_issued; /* requests the write pass issued (what verify reads back) */
    _Atomic uint64_t live_bytes; /* bytes, published once per wake for progress */
    uint64_t t_start_ns;
    double cpu_u0, cpu_s0;
    double t_start, t_end, cpu_user, cpu_sys;
    int err;
    pinio_diag diag;
    _Atomic uint64_t live_ios; /* requests, published with live_bytes (done_ops) */
} job;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void thread_cpu(double *user, double *sys)
{
    struct rusage ru;
    getrusage(RUSAGE_THREAD, &ru);
    *user = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6;
    *sys = (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

static uint64_t gcd(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static uint64_t block_of(const job *j, uint64_t i)
{
    i %= j->nblocks;
    if (!is_rand(j->o->rw))
        return i;
    return (uint64_t)(((unsigned __int128)i * j->perm_mul + j->perm_add) % j->nblocks);
}

/* Records the job's first error: "bench: PATH: WHAT: strerror HINT". */
static int job_fail(job *j, int code, const char *what, const char *hint)
{
    if (!j->err) {
        j->err = code;
        pinio_diag_set(&j->diag, code, "bench: %s: %s: %s%s", j->o->path, what,
                       pinio_strerror(code), hint);
    }
    return code;
}

/* Verify blocks of file f are written for the offset off + f x 2^48: the
 * header then names the file a block was meant for as well as its offset,
 * so that a block copied into another file at the same offset is caught
 * (the pattern differs too). File 0 keeps the plain offset, so a one-file
 * run reads back what it always wrote. */
#define FILE_TAG_SHIFT 48

static inline uint64_t tagged_off(const slot *sl)
{
    return sl->off + ((uint64_t)sl->file << FILE_TAG_SHIFT);
}

/* Sets up the ring with the flags asked for, on the engine's ladder
 * (pinio_ring_setup_uring()): without SQPOLL it takes the cheapest completion
 * mode the kernel has (DEFER_TASKRUN runs completion work only when we wait,
 * in our own context; COOP_TASKRUN at least avoids IPIs), which is what
 * fio's defaults do not do: part of the CPU difference. */
static int job_ring(job *j)
{
    const pinio_bench_opts *o = j->o;
    unsigned want = (o->sqpoll ? PINIO_RING_SQPOLL : 0u) | (o->iopoll ? PINIO_RING_IOPOLL : 0u);
    int rc = pinio_ring_setup_uring(&j->ring, o->qd, want, &j->setup_flags);
    if (!rc) {
        j->have_ring = true;
        /* Every io_uring_enter() otherwise looks the ring up in the file
         * table and drops it again (fget/fput: 0.4 us of a 4 KiB qd 1
         * read's ~30 us of CPU on this VM, one enter per I/O); a registered
         * ring index skips both (Linux 5.18). The index lives in this
         * thread's io_uring context, so the job thread registers it here
         * and drops it itself (pinio__bench_job_main()). Refused (older kernel): the
         * plain fd, nothing else changes. */
        j->reg_ring = io_uring_register_ring_fd(&j->ring) == 1;
        return 0;
    }
    return job_fail(j, rc, "io_uring_setup",
                    o->sqpoll   ? " (with --sqpoll)"
                    : o->iopoll ? " (with --iopoll)"
                    : rc == -ENOSYS || rc == -EPERM ? " (io_uring is disabled here)"
                    /* Before Linux 5.12 rings are charged to RLIMIT_MEMLOCK.
                     * No fallback (the loader has one): a benchmark that ran
                     * on a pread pool would report another engine's figures. */
                    : rc == -ENOMEM ? " (before Linux 5.12 io_uring rings count against "
                                      "RLIMIT_MEMLOCK: raise ulimit -l; bench measures io_uring "
                                      "only, so it does not fall back as load does)"
                                    : "");
}

static int job_setup(job *j)
{
    const pinio_bench_opts *o = j->o;
    int rc;
    if (o->node >= 0 && (rc = pinio__prim_run_on_node(o->node)))
        return job_fail(j, rc, "--node: cannot run there", "");
    j->slots = calloc(o->qd, sizeof *j->slots);
    j->idle = calloc(o->qd, sizeof *j->idle);
    j->pend = calloc(o->qd, sizeof *j->pend);
    if (o->interval_fn && !(j->ihist = malloc(NDIR * sizeof *j->ihist)))
        return job_fail(j, -ENOMEM, "the interval histograms", "");
    for (int d = 0; j->ihist && d < NDIR; d++)
        pinio__hist_reset(&j->ihist[d]);
    j->area_len = ((size_t)o->qd * j->maxbs + HUGE_ALIGN - 1) & ~(size_t)(HUGE_ALIGN - 1);
    j->area = pinio__prim_map(j->area_len, HUGE_ALIGN, false);
    if (!j->slots || !j->idle || !j->pend || !j->area)
        return job_fail(j, -ENOMEM, "buffers of qd x bs bytes", " (lower --qd or --bs)");
    /* Placed as the loader's pool places its slabs, in the same order (the
     * policy before the first touch). A refused bind (seccomp, CONFIG_NUMA=n)
     * leaves the buffers wherever they land, as libnuma's
     * numa_tonode_memory() did. Huge pages: a registered 4 MiB request is 2
     * segments instead of 1024 (see bench/readbench.c). */
    if (o->node >= 0)
        (void)pinio__prim_bind(j->area, j->area_len, o->node, true);
    (void)pinio__prim_huge(j->area, j->area_len);
    /* Touch everything now, off the clock; write data is fixed unless the
     * pattern has to follow the offset (verify). */
    pinio__bench_pattern_fill(j->area, j->area_len, (uint64_t)j->idx << 40, o->seed + 7);

    rc = job_ring(j);
    if (rc)
        return rc;
    if (o->fixed && !is_trim(o->rw)) { /* trims move no data: no buffers to register */
        struct iovec *iov = calloc(o->qd, sizeof *iov);
        if (!iov)
            return job_fail(j, -ENOMEM, "iovecs", "");
        for (unsigned i = 0; i < o->qd; i++) {
            iov[i].iov_base = j->area + (size_t)i * j->maxbs;
            iov[i].iov_len = j->maxbs;
        }
        rc = j->faults && j->faults->regnomem ? -ENOMEM : io_uring_register_buffers(&j->ring, iov, o->qd);
        free(iov);
        if (rc)
            return job_fail(j, rc, "registering the buffers (--fixed)",
                            " (RLIMIT_MEMLOCK? raise ulimit -l or use --fixed=0)");
        j->fixed = true;
    }
    if (o->regfiles) {
        rc = io_uring_register_files(&j->ring, j->fds, j->nfiles);
        if (rc)
            return job_fail(j, rc, "registering the file (--regfiles)", "");
        j->regfiles = true;
    }
    return 0;
}

/* The requests issued since the last submit call were submitted at `t`. A
 * slot prepared twice before a submit (a retry) is listed twice: the later
 * time wins, which is the same time. */
static inline void submitted(job *j, uint64_t t)
{
    for (unsigned i = 0; i < j->npend; i++)
        j->slots[j->pend[i]].ts = t;
    j->npend = 0;
}

/* Prepares a trim of [off, off + len) (run_jobs() chose how). BLKDISCARD
 * has no io_uring form before Linux 6.12: it runs here, synchronously (its
 * time counts as slat), and a NOP carries its result through the ring, so
 * that completion, timing and accounting stay the one path of every request. */
static void trim_prep(job *j, slot *sl, struct io_uring_sqe *sqe, int fd, uint64_t off,
                      unsigned len)
{
    if (j->trim_how == TRIM_PUNCH) {
        io_uring_prep_fallocate(sqe, fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, len);
    } else if (j->trim_how == TRIM_CMD) {
        /* liburing 2.8's io_uring_prep_cmd_discard(), which bookworm's 2.3 lacks */
        io_uring_prep_rw(IORING_OP_URING_CMD, sqe, fd, NULL, 0, 0);
        sqe->cmd_op = BLOCK_URING_CMD_DISCARD;
        sqe->addr = off;
        sqe->addr3 = len;
    } else {
        uint64_t range[2] = {off, len};
        sl->sync_res = ioctl(j->fds[sl->file], BLKDISCARD, range) ? -errno : 0;
        io_uring_prep_nop(sqe);
    }
}

/* A trim completes with 0, not a byte count: counted as the whole range. */
static int trim_res(const job *j, const slot *sl, int res)
{
    if (res == 0 && j->trim_how == TRIM_IOCTL)
        res = sl->sync_res;
    return res == 0 ? (int)(sl->len - sl->done) : res;
}

static void job_prep(job *j, unsigned s, uint64_t t)
{
    slot *sl = &j->slots[s];
    uint8_t *buf = j->area + (size_t)s * j->maxbs;
    /* The whole block at its first submission only: a resubmitted rest
     * still holds it. */
    if (sl->wr && j->header && !sl->done)
        pinio__bench_block_fill(buf, sl->len, tagged_off(sl), j->o->seed, sl->idx / j->nblocks,
                                (int)j->o->verify_mode);
    buf += sl->done;
    unsigned len = sl->len - sl->done;
    uint64_t off = sl->off + sl->done;
    struct io_uring_sqe *sqe = io_uring_get_sqe(&j->ring);
    while (!sqe) { /* SQPOLL: the kernel thread has not consumed the SQ yet */
        io_uring_submit(&j->ring);
        submitted(j, now_ns());
        j->submits++;
        io_uring_sqring_wait(&j->ring);
        sqe = io_uring_get_sqe(&j->ring);
    }
    int fd = j->regfiles ? (int)sl->file : j->fds[sl->file];
    if (sl->wr == DIR_TRIM) {
        trim_prep(j, sl, sqe, fd, off, len);
    } else if (j->fixed) {
        if (sl->wr)
            io_uring_prep_write_fixed(sqe, fd, buf, len, off, (int)s);
        else
            io_uring_prep_read_fixed(sqe, fd, buf, len, off, (int)s);
    } else {
        if (sl->wr)
            io_uring_prep_write(sqe, fd, buf, len, off);
        else
            io_uring_prep_read(sqe, fd, buf, len, off);
    }
    if (j->regfiles)
        sqe->flags |= IOSQE_FIXED_FILE;
    io_uring_sqe_set_data64(sqe, s);
    if (!sl->done) {
        sl->t0 = t;
        j->pend[j->npend++] = s;
    }
}


/* The next request of a pass that is not the plain order: a size drawn from
 * bssplit, an offset walked (sequential) or drawn from the distribution. */
static void fancy_next(job *j, slot *sl)
{
    const pinio_bench_opts *o = j->o;
    uint64_t len = o->bs;
    if (o->bsrange_max) {
        uint64_t g = o->blockalign ? o->blockalign : 512;
        len = o->bsrange_min +
              pinio__rng_below(&j->rng, (o->bsrange_max - o->bsrange_min) / g + 1) * g;
    } else if (o->nbssplit) {
        uint64_t u = pinio__rng_below(&j->rng, 100);
        unsigned i = 0;
        for (unsigned acc = o->bssplit[0].pct; u >= acc && i + 1 < o->nbssplit;)
            acc += o->bssplit[++i].pct;
        len = o->bssplit[i].bs;
    }
    sl->len = (uint32_t)len;
    if (!is_rand(o->rw)) {
        if (j->seq_pos + len > j->region)
            j->seq_pos = 0;
        sl->off = j->base + j->seq_pos;
        j->seq_pos += len;
        return;
    }
    uint64_t align = o->nbssplit || o->bsrange_max ? j->dist.n ? j->region / j->dist.n : o->bs
                                                   : o->bs;
    uint64_t off = pinio__dist_next(&j->dist) * align;
    if (off + len > j->region) /* a large request near the end: the last that fits */
        off = (j->region - len) / align * align;
    sl->off = j->base + off;
}

/* Fills slot `sl` with the next request of the pass; false once it issued
 * `limit` bytes (0: no limit, the deadline ends the pass). The plain order
 * (fixed bs, permutation or sequence) is the common case and stays a
 * multiply and a modulo. */
static bool next_io_files(job *j, slot *sl, uint64_t limit);

static inline bool next_io(job *j, slot *sl, uint64_t limit)
{
    if (j->multi)
        return next_io_files(j, sl, limit);
    if (limit && j->issued_bytes >= limit)
        return false;
    if (!j->fancy) {
        sl->off = j->base + block_of(j, j->issued) * j->o->bs;
        sl->len = (uint32_t)j->o->bs;
    } else {
        fancy_next(j, sl);
    }
    sl->wr = j->dir == PASS_MIXED ? pinio__rng_below(&j->rng, 100) >= j->o->rwmixread : j->dir;
    sl->done = 0;
    sl->idx = j->issued++;
    j->issued_bytes += sl->len;
    if (j->trace)
        j->trace(j->o->trace_ctx, j->idx, sl->wr, sl->off, sl->len);
    return true;
}

/* ---- several files ------------------------------------------------------ */

/* Whether file f still has part of its share of the current pass: every
 * file gets its nblocks blocks (its region's bytes with drawn sizes) once
 * per pass of the job, whatever the service order; the read-back pass, its
 * quota of blocks. */
static bool file_has_share(const job *j, unsigned f)
{
    const fstate *F = &j->fs[f];
    if (j->readback)
        return F->issued < F->quota;
    if (j->fancy)
        return F->bytes < (j->issued_bytes / (j->region * j->nfiles) + 1) * j->region;
    return F->issued < (j->issued / (j->nblocks * j->nfiles) + 1) * j->nblocks;
}

/* The file of the next request (fio's file_service_type). A pure function
 * of the job's counters for roundrobin and sequential, so that a trace
 * shows the order the header documents; a file whose share is done is
 * passed over (some file always has a share left: the shares sum to the
 * pass). */
static unsigned pick_file(job *j)
{
    const pinio_bench_opts *o = j->o;
    unsigned n = j->nfiles, nr = o->file_service_nr ? o->file_service_nr : 1, f;
    if (n == 1)
        return 0;
    if (j->readback || o->file_service == PINIO_BENCH_FILE_SEQUENTIAL) {
        f = j->readback ? 0
            : (unsigned)((j->fancy ? j->issued_bytes / j->region : j->issued / j->nblocks) % n);
    } else if (o->file_service == PINIO_BENCH_FILE_RANDOM) {
        if (!j->fleft || !file_has_share(j, j->fcur)) {
            j->fcur = (unsigned)pinio__rng_below(&j->rng, n);
            j->fleft = nr;
        }
        j->fleft--;
        f = j->fcur;
    } else {
        f = (unsigned)((j->issued / nr) % n);
    }
    for (unsigned k = 0; k < n && !file_has_share(j, f); k++)
        f = (f + 1) % n;
    if (o->file_service == PINIO_BENCH_FILE_RANDOM)
        j->fcur = f;
    return f;
}

/* next_io() with several files: the file first, then the next request of
 * that file's own order (its index, its sequential walk). */
static bool next_io_files(job *j, slot *sl, uint64_t limit)
{
    if (limit && j->issued_bytes >= limit)
        return false;
    unsigned f = pick_file(j);
    fstate *F = &j->fs[f];
    if (!j->fancy) {
        sl->off = j->base + block_of(j, F->issued) * j->o->bs;
        sl->len = (uint32_t)j->o->bs;
    } else {
        j->seq_pos = F->seq_pos; /* fancy_next() walks this file's position */
        fancy_next(j, sl);
        F->seq_pos = j->seq_pos;
    }
    sl->file = (uint16_t)f;
    sl->wr = j->dir == PASS_MIXED ? pinio__rng_below(&j->rng, 100) >= j->o->rwmixread : j->dir;
    sl->done = 0;
    sl->idx = F->issued++; /* the block's generation is its file's pass */
    F->bytes += sl->len;
    j->issued++;
    j->issued_bytes += sl->len;
    if (j->trace)
        j->trace(j->o->trace_ctx, j->idx, sl->wr, sl->off, sl->len);
    if (j->trace_file)
        j->trace_file(j->o->trace_ctx, j->idx, f, sl->wr, sl->off, sl->len);
    return true;
}

/* A pass starts: every file's order from its beginning. */
static void files_reset(job *j)
{
    for (unsigned f = 0; f < j->nfiles; f++)
        j->fs[f].issued = j->fs[f].bytes = j->fs[f].seq_pos = 0;
    j->fleft = 0;
}

/* After a verify write pass: each file's blocks to read back (what its
 * order wrote, each block once); returns their sum. */
static uint64_t files_readback(job *j)
{
    uint64_t n = 0;
    for (unsigned f = 0; f < j->nfiles; f++) {
        fstate *F = &j->fs[f];
        F->wr_issued = F->issued;
        F->quota = F->issued < j->nblocks ? F->issued : j->nblocks;
        n += F->quota;
    }
    j->readback = true;
    return n;
}

/* When the rate limit lets the next request go (ns). */
static uint64_t due_ns(const job *j)
{
    double a = (double)j->issued * j->ns_per_io, b = (double)j->issued_bytes * j->ns_per_byte;
    uint64_t due = j->t_rate0 + (uint64_t)(a > b ? a : b);
    return due > j->think_until ? due : j->think_until;
}

/* The ramp is over: what it measured is dropped, and the clock and the CPU
 * counters start now. */
static void ramp_over(job *j, uint64_t t)
{
    for (int d = 0; d < NDIR; d++) {
        pinio__hist_reset(&j->hist[d]);
        pinio__hist_reset(&j->slat[d]);
        pinio__hist_reset(&j->clat[d]);
        if (j->ihist)
            pinio__hist_reset(&j->ihist[d]);
        j->ios[d] = j->bytes[d] = 0;
        j->iv_bytes0[d] = j->iv_ios0[d] = 0;
    }
    j->submits = 0;
    j->t_start_ns = t;
    thread_cpu(&j->cpu_u0, &j->cpu_s0);
    j->ramp_end = 0;
}

/* ---- intervals: samples and the time series ----------------------------- */

static void sstat_add(sstat *x, double v)
{
    x->min = !x->n || v < x->min ? v : x->min;
    x->max = !x->n || v > x->max ? v : x->max;
    x->n++;
    x->sum += v;
    x->sumsq += v * v;
}

/* Whether the job's workload moves data in direction d. */
static bool dir_active(const job *j, int d)
{
    return j->dir == PASS_MIXED ? d < DIR_TRIM : j->dir == d;
}

/* Hands in interval k of job j (`span` ns of it covered) to the time series. */
static void iv_contribute(job *j, uint64_t k, uint64_t span, bool final)
{
    struct ivlog *L = j->gate->iv;
    struct gate *g = j->gate;
    pthread_mutex_lock(&g->mu);
    struct ivslot *S = &L->slot[k % IV_SLOTS];
    while (S->k != k && S->k != IV_FREE)
        pthread_cond_wait(&g->cv, &g->mu);
    if (S->k == IV_FREE) {
        S->k = k;
        S->span_ns = 0;
        S->final = false;
        for (int d = 0; d < NDIR; d++)
            pinio__hist_reset(&S->h[d]);
        memset(S->has, 0, NDIR * L->njobs * sizeof *S->has);
    }
    S->span_ns = span > S->span_ns ? span : S->span_ns;
    S->final |= final;
    double per_s = span ? 1e9 / (double)span : 0;
    for (int d = 0; d < NDIR; d++) {
        if (!dir_active(j, d))
            continue;
        const pinio__hist *h = &j->ihist[d];
        pinio_bench_interval *r = &S->rows[NDIR * j->idx + d];
        r->job = (int)j->idx;
        r->dir = d;
        r->time_ms = (double)(L->ramp_ns + k * L->len_ns + span) / 1e6;
        r->bytes_per_s = (double)(j->bytes[d] - j->iv_bytes0[d]) * per_s;
        r->iops = (double)(j->ios[d] - j->iv_ios0[d]) * per_s;
        r->lat_mean_ns = h->total ? h->sum / (double)h->total : 0;
        r->lat_p50_ns = pinio__hist_percentile(h, 50);
        r->lat_p99_ns = pinio__hist_percentile(h, 99);
        S->has[NDIR * j->idx + d] = true;
        pinio__hist_merge(&S->h[d], h);
    }
    L->job_k[j->idx] = k + 1;
    L->job_done[j->idx] = final;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

/* Closes the job's intervals that ended by `t`: a bandwidth and an IOPS
 * sample each, and the time series' rows. Once per interval, not per
 * request. */
static void pinio__bench_iv_tick(job *j, uint64_t t)
{
    double per_s = 1e9 / (double)j->iv_len;
    while (t >= j->iv_next) {
        for (int d = 0; d < NDIR; d++)
            if (dir_active(j, d)) {
                sstat_add(&j->bw_s[d], (double)(j->bytes[d] - j->iv_bytes0[d]) * per_s);
                sstat_add(&j->iops_s[d], (double)(j->ios[d] - j->iv_ios0[d]) * per_s);
            }
        if (j->ihist) {
            iv_contribute(j, j->iv_k, j->iv_len, false);
            for (int d = 0; d < NDIR; d++)
                pinio__hist_reset(&j->ihist[d]);
        }
        for (int d = 0; d < NDIR; d++) {
            j->iv_bytes0[d] = j->bytes[d];
            j->iv_ios0[d] = j->ios[d];
        }
        j->iv_k++;
        j->iv_next += j->iv_len;
    }
}

/* The job's workload ended at `t`: its last, partial interval goes to the
 * time series (not to the samples: a sliver would skew them). */
static void pinio__bench_iv_final(job *j, uint64_t t)
{
    if (!j->ihist)
        return;
    uint64_t begin = j->iv_next - j->iv_len;
    iv_contribute(j, j->iv_k, t > begin ? t - begin : 0, true);
}

/* Submits the refills gathered so far once `batch` of them wait and more
 * completions of this wake are still to be handled; the last refills go
 * with the call that waits, which saves one system call per wake.
 *
 * Why a batch of 1 for random reads (this VM's virtio disk, 4 KiB qd 16,
 * 4 alternating runs): submitting every refill of a wake in one call
 * reached 56k IOPS, submitting each as it is made 66k, fio (which submits
 * each) 68k. Random blocks cannot merge, so holding them for one call only
 * delays their start. Sequential blocks do merge under the call's plug:
 * 4 KiB sequential qd 16 moved 580 MB/s gathered and 300 MB/s one by one.
 * A failed submit here is not lost: the requests stay in the SQ and the
 * next io_uring_submit_and_wait() reports the error. */
static void job_kick(job *j, bool more)
{
    if (more && io_uring_sq_ready(&j->ring) >= j->batch) {
        io_uring_submit(&j->ring);
        submitted(j, now_ns());
        j->submits++;
    }
}

/* Reports a verify mismatch of the block in slot `s`, naming what is there
 * instead when the block holds another block's header. */
static void pinio__bench_verify_fail(job *j, const slot *sl, const pinio__block_found *f,
                                     bool gen_known, uint64_t gen)
{
    const pinio_bench_opts *o = j->o;
    const char *path = j->paths[sl->file]; /* the file the block was read from */
    unsigned long long at = (unsigned long long)sl->off;
    j->err = -EBADMSG;
    uint64_t tag_mask = (1ull << FILE_TAG_SHIFT) - 1, from = f->off >> FILE_TAG_SHIFT;
    if (f->has_header && f->off != tagged_off(sl) && from != sl->file && from < j->nfiles)
        pinio_diag_set(&j->diag, -EBADMSG,
                       "bench: %s: verify: the block at offset %llu holds the block written for "
                       "%s at offset %llu (misplaced from another file)", path, at,
                       j->paths[from], (unsigned long long)(f->off & tag_mask));
    else if (f->has_header && f->off != tagged_off(sl))
        pinio_diag_set(&j->diag, -EBADMSG,
                       "bench: %s: verify: the block at offset %llu holds the block written for "
                       "offset %llu (misplaced)", path, at, (unsigned long long)(f->off & tag_mask));
    else if (f->has_header && f->seed != o->seed)
        pinio_diag_set(&j->diag, -EBADMSG,
                       "bench: %s: verify: the block at offset %llu was written with seed %llu, "
                       "not %llu", path, at, (unsigned long long)f->seed,
                       (unsigned long long)o->seed);
    else if (f->has_header && f->mode != (int)o->verify_mode)
        pinio_diag_set(&j->diag, -EBADMSG,
                       "bench: %s: verify: the block at offset %llu was written with --verify=%s, "
                       "not %s", path, at,
                       pinio_bench_verify_mode_name((pinio_bench_verify_mode)f->mode),
                       pinio_bench_verify_mode_name(o->verify_mode));
    else if (f->sum_bad)
        pinio_diag_set(&j->diag, -EBADMSG,
                       "bench: %s: verify: the block at offset %llu fails its %s checksum "
                       "(first differing byte at offset %llu)", path, at,
                       pinio_bench_verify_mode_name(o->verify_mode),
                       (unsigned long long)(sl->off + (uint64_t)f->bad_at));
    else if (f->bad_at < 0 && gen_known)
        pinio_diag_set(&j->diag, -EBADMSG,
                       "bench: %s: verify: the block at offset %llu is stale: generation %llu, "
                       "the last write was generation %llu", path, at,
                       (unsigned long long)f->gen, (unsigned long long)gen);
    else
        pinio_diag_set(&j->diag, -EBADMSG,
                       "bench: %s: verify: the block at offset %llu differs from what was "
                       "written (first at byte %llu)%s", path, at,
                       (unsigned long long)(sl->off + (uint64_t)(f->bad_at > 0 ? f->bad_at : 0)),
                       f->has_header ? "" : "; it has no bench block header");
}

/* Issues the slots parked by the rate limit whose time has come; true when
 * the pass has nothing more to issue (they are dropped then). */
static bool issue_due(job *j, uint64_t limit, bool stop, unsigned *inflight)
{
    uint64_t t = now_ns();
    while (j->nidle && !stop && due_ns(j) <= t) {
        unsigned s = j->idle[j->nidle - 1];
        if (!next_io(j, &j->slots[s], limit))
            break;
        j->nidle--;
        job_prep(j, s, t);
        (*inflight)++;
    }
    bool done = stop || (limit && j->issued_bytes >= limit);
    if (done)
        j->nidle = 0;
    return done;
}

/* Waits for a completion or, with slots parked by the rate limit, for the
 * next one's issue time, whichever comes first. */
static int job_wait(job *j, unsigned inflight)
{
    j->submits++;
    /* This call submits and waits: it returns after a completion, so the
     * time it was entered stands for the submission (bench.h). */
    if (j->npend)
        submitted(j, now_ns());
    if (!j->nidle)
        return io_uring_submit_and_wait(&j->ring, 1);
    uint64_t t = now_ns(), due = due_ns(j);
    uint64_t wait = due > t ? due - t : 0;
    if (!inflight) {
        io_uring_submit(&j->ring);
        struct timespec ts = {(time_t)(wait / 1000000000u), (long)(wait % 1000000000u)};
        nanosleep(&ts, NULL);
        return 0;
    }
    struct __kernel_timespec kts = {(long long)(wait / 1000000000u),
                                    (long long)(wait % 1000000000u)};
    struct io_uring_cqe *cqe;
    int rc = io_uring_submit_and_wait_timeout(&j->ring, &cqe, 1, &kts, NULL);
    return rc == -ETIME ? 0 : rc;
}

/* One pass: requests until `limit` bytes were issued (0 = until `deadline`,
 * ns). `check` compares each completed block with what verify wrote;
 * `record` times it. */
static int job_pass(job *j, bool check, bool record, uint64_t limit, uint64_t deadline)
{
    const pinio_bench_opts *o = j->o;
    uint64_t retries = 0;
    unsigned inflight = 0;
    bool stop = false, rated = j->ns_per_io > 0 || j->ns_per_byte > 0 || j->think_ns > 0;
    uint64_t t = now_ns();
    j->issued = j->issued_bytes = j->seq_pos = 0;
    if (j->multi)
        files_reset(j);
    j->nidle = 0;
    j->t_rate0 = t;
    for (unsigned s = 0; s < o->qd && (limit || t < deadline); s++) {
        if (rated && due_ns(j) > t) {
            j->idle[j->nidle++] = s;
            continue;
        }
        if (!next_io(j, &j->slots[s], limit))
            break;
        job_prep(j, s, t);
        inflight++;
    }
    while (inflight || j->nidle) {
        int rc = job_wait(j, inflight);
        if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
            job_fail(j, rc, "io_uring_submit_and_wait", "");
            break; /* the ring is torn down with the requests in it */
        }
        t = now_ns();
        if ((deadline && t >= deadline) ||
            atomic_load_explicit(&j->gate->cancel, memory_order_relaxed))
            stop = true;
        if (j->ramp_end && t >= j->ramp_end)
            ramp_over(j, t);
        if (record && t >= j->iv_next)
            pinio__bench_iv_tick(j, t);
        bool rec = record && !j->ramp_end;
        struct io_uring_cqe *cqe;
        unsigned head, seen = 0, avail = io_uring_cq_ready(&j->ring);
        io_uring_for_each_cqe(&j->ring, head, cqe)
        {
            /* Only what was there at the wake: a refill submitted below
             * may complete while this loop runs, and timing it against
             * this wake's `t` would record a latency that is too short. */
            if (seen == avail)
                break;
            seen++;
            unsigned s = (unsigned)io_uring_cqe_get_data64(cqe);
            slot *sl = &j->slots[s];
            uint8_t *buf = j->area + (size_t)s * j->maxbs;
            int res = cqe->res;
            if (sl->wr == DIR_TRIM)
                res = trim_res(j, sl, res);
            if (j->faults)
                res = pinio__faults_completion_buf(j->faults, res, sl->wr ? NULL : buf + sl->done,
                                                   sl->len - sl->done);
            if ((res == -EAGAIN || res == -EINTR || res == -EBUSY) && retries < MAX_RETRIES) {
                retries++;
                job_prep(j, s, t);
                job_kick(j, seen < avail);
                continue;
            }
            if (res <= 0) {
                int e = res < 0 ? res : -EIO;
                if (!j->err) {
                    j->err = e;
                    /* IOPOLL rings accept any file, but each request to a
                     * device without polled queues fails with EOPNOTSUPP. */
                    pinio_diag_set(&j->diag, e, "bench: %s: %s at offset %llu: %s%s",
                                   j->paths[sl->file],
                                   res ? dir_names[sl->wr] : "unexpected end of file",
                                   (unsigned long long)(sl->off + sl->done), pinio_strerror(e),
                                   e == -EOPNOTSUPP && o->iopoll
                                       ? " (--iopoll needs a device with polled queues, e.g. "
                                         "NVMe with nvme.poll_queues > 0)"
                                       : "");
                }
                stop = true;
                inflight--;
                continue;
            }
            sl->done += (uint32_t)res;
            if (sl->done < sl->len) {
                /* Short transfer: the rest, same slot. O_DIRECT needs the
                 * offset, length and address aligned, so restart from the
                 * last 4 KiB boundary (the bytes redone are the same bytes). */
                if (o->direct)
                    sl->done &= ~(uint32_t)4095;
                retries++;
                job_prep(j, s, t);
                job_kick(j, seen < avail);
                continue;
            }
            if (rec) {
                /* t0 <= ts <= t: ts was taken between the prepare and this
                 * wake; a zero ts (never submitted?) cannot happen, but
                 * would only show as a zero clat, never as a wrap. */
                uint64_t ts = sl->ts >= sl->t0 && sl->ts <= t ? sl->ts : sl->t0;
                pinio__hist_record(&j->hist[sl->wr], t - sl->t0);
                pinio__hist_record(&j->slat[sl->wr], ts - sl->t0);
                pinio__hist_record(&j->clat[sl->wr], t - ts);
                if (j->ihist)
                    pinio__hist_record(&j->ihist[sl->wr], t - sl->t0);
                j->ios[sl->wr]++;
                j->bytes[sl->wr] += sl->len;
            }
            if (check) {
                pinio__block_found f;
                /* After a write pass, the generation of the last write of
                 * this block is known: an older one is a lost write. */
                bool gen_known = !o->verify_only;
                uint64_t wi = j->multi ? j->fs[sl->file].wr_issued : j->wr_issued;
                uint64_t gen = gen_known ? (wi - 1 - sl->idx) / j->nblocks : 0;
                bool bad = pinio__bench_block_check(buf, sl->len, tagged_off(sl), o->seed,
                                                    (int)o->verify_mode, &f) != 0 ||
                           (gen_known && f.has_header && f.gen != gen);
                if (bad && !j->err) {
                    pinio__bench_verify_fail(j, sl, &f, gen_known, gen);
                    stop = true;
                }
                j->verified += sl->len;
            }
            if (j->think_ns && ++j->think_count >= j->think_blocks) {
                j->think_count = 0;
                j->think_until = t + j->think_ns;
            }
            if (stop || !(limit || t < deadline)) {
                inflight--;
            } else if (rated && due_ns(j) > t) {
                j->idle[j->nidle++] = s;
                inflight--;
            } else if (next_io(j, sl, limit)) {
                job_prep(j, s, t);
                job_kick(j, seen < avail);
            } else {
                inflight--;
            }
        }
        io_uring_cq_advance(&j->ring, seen);
        if (rec) {
            atomic_store_explicit(&j->live_bytes, j->bytes[0] + j->bytes[1] + j->bytes[DIR_TRIM],
                                  memory_order_relaxed);
            atomic_store_explicit(&j->live_ios, j->ios[0] + j->ios[1] + j->ios[DIR_TRIM],
                                  memory_order_relaxed);
        }
        if (j->nidle)
            issue_due(j, limit, stop, &inflight);
    }
    j->retries += retries;
    return j->err;
}

static void job_body(job *j)
{
    const pinio_bench_opts *o = j->o;
    job_setup(j);
    struct gate *g = j->gate;
    pthread_mutex_lock(&g->mu);
    g->ready++;
    pthread_cond_broadcast(&g->cv);
    while (!g->state)
        pthread_cond_wait(&g->cv, &g->mu);
    int state = g->state;
    pthread_mutex_unlock(&g->mu);
    if (j->err || state < 0)
        return;
    if (o->startdelay_s > 0) {
        uint64_t ns = (uint64_t)(o->startdelay_s * 1e9);
        struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
        while (nanosleep(&ts, &ts) && errno == EINTR)
            ;
    }
    /* Bytes per job: the region, or io_size's share, times loops. */
    uint64_t pass = o->io_size ? o->io_size / o->jobs : j->region;
    uint64_t limit = o->time_s > 0 ? 0 : pass * (o->loops ? o->loops : 1);
    thread_cpu(&j->cpu_u0, &j->cpu_s0);
    uint64_t t0 = now_ns();
    j->t_start_ns = t0;
    j->ramp_end = o->ramp_time_s > 0 ? t0 + (uint64_t)(o->ramp_time_s * 1e9) : 0;
    uint64_t deadline = o->time_s > 0 ? t0 + (uint64_t)((o->ramp_time_s + o->time_s) * 1e9) : 0;
    j->dir = is_mixed(o->rw) ? PASS_MIXED : is_trim(o->rw) ? DIR_TRIM : is_write(o->rw);
    /* Intervals count from the gate's opening, so that the jobs' intervals
     * line up in the time series. */
    j->iv_len = (uint64_t)(o->interval_ms ? o->interval_ms : 500) * 1000000ull;
    j->iv_next = g->t0_ns + (uint64_t)(o->ramp_time_s * 1e9) + j->iv_len;
    j->fancy = o->nbssplit || o->bsrange_max || o->norandommap || o->dist != PINIO_BENCH_DIST_UNIFORM;
    j->header = o->verify;
    j->trace = o->trace;
    j->trace_file = o->trace_file;
    if (j->multi && !o->time_s && !o->io_size) /* a pass is every file's share */
        limit *= j->nfiles;
    job_pass(j, o->verify_only, true, limit, deadline);
    uint64_t t1 = now_ns();
    double u1, s1;
    thread_cpu(&u1, &s1);
    j->t_start = (double)j->t_start_ns * 1e-9;
    j->t_end = (double)t1 * 1e-9;
    j->cpu_user = u1 - j->cpu_u0;
    j->cpu_sys = s1 - j->cpu_s0;
    if (t1 >= j->iv_next)
        pinio__bench_iv_tick(j, t1);
    pinio__bench_iv_final(j, t1);
    pthread_mutex_lock(&g->mu);
    g->finished++;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    if (!j->err && o->verify && !atomic_load(&g->cancel)) {
        /* Every block the pass issued completed (the pass drains), so what
         * was written is exactly the first `issued` blocks of the order.
         * Its submits are counted apart: submits_per_io is the workload's
         * cost per workload I/O, and the read-back pass has I/Os of its own
         * that `ios` does not count (counted together, 1,024 writes showed
         * 1.975 submits per I/O instead of 0.987). */
        j->wr_issued = j->issued;
        uint64_t n = j->issued < j->nblocks ? j->issued : j->nblocks;
        uint64_t before = j->submits;
        j->dir = 0;
        j->header = false;
        j->trace = NULL;
        j->trace_file = NULL;
        if (j->multi)
            n = files_readback(j);
        j->ns_per_io = j->ns_per_byte = 0;
        j->think_ns = j->think_until = 0;
        job_pass(j, true, false, n * o->bs, 0);
        j->verify_submits = j->submits - before;
        j->submits = before;
    }
}

static void *pinio__bench_job_main(void *arg)
{
    job *j = arg;
    job_body(j);
    /* The registered ring index belongs to this thread's io_uring context:
     * io_uring_queue_exit() on the caller's thread (pinio__bench_job_teardown()) would
     * drop whatever that thread registered at the same index. */
    if (j->reg_ring)
        (void)io_uring_unregister_ring_fd(&j->ring);
    return NULL;
}

static void pinio__bench_job_teardown(job *j)
{
    if (j->have_ring)
        io_uring_queue_exit(&j->ring);
    pinio__prim_unmap(j->area, j->area_len);
    free(j->slots);
    free(j->idle);
    free(j->pend);
    free(j->ihist);
    free(j->faults);
    for (unsigned f = 0; j->fds && f < j->nfiles; f++)
        if (j->fds[f] >= 0)
            close(j->fds[f]);
    if (j->fds != &j->fd)
        free(j->fds);
    free(j->fs);
}

static void features(const pinio_bench_opts *o, const job *j, char *out, size_t cap)
{
    /* The setup flags a reader of a benchmark cares about, named by the
     * engine's one table, in this field's style: lower case, comma-joined. */
    const unsigned shown = IORING_SETUP_SQPOLL | IORING_SETUP_IOPOLL |
                           IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN |
                           IORING_SETUP_COOP_TASKRUN;
    char flags[160] = "";
    if (j->setup_flags & shown)
        pinio_ring_flags_format(j->setup_flags & shown, flags, sizeof flags);
    for (char *c = flags; *c; c++)
        *c = *c == '|' ? ',' : (char)tolower((unsigned char)*c);
    size_t n = 0;
    out[0] = 0;
#define ADD(s) n += (size_t)snprintf(out + n, n < cap ? cap - n : 0, "%s%s", n ? "," : "", s)
    if (flags[0])
        ADD(flags);
    if (j->fixed)
        ADD("fixed_bufs");
    if (j->regfiles)
        ADD("reg_files");
    if (j->reg_ring)
        ADD("reg_ring");
    ADD(o->direct ? "o_direct" : "buffered");
    if (j->trim_how)
        ADD(j->trim_how == TRIM_PUNCH ? "punch_hole"
            : j->trim_how == TRIM_CMD ? "discard_cmd"
                                      : "blkdiscard_sync");
#undef ADD
}

/* Delivers the intervals every job handed in (or ended before), in order;
 * called with the gate's mutex held, which it drops around the callback.
 * `rows` has room for (jobs + 1) x NDIR rows. */
static void pinio__bench_iv_deliver(const pinio_bench_opts *o, struct gate *g,
                                    pinio_bench_interval *rows)
{
    struct ivlog *L = g->iv;
    for (;;) {
        struct ivslot *S = &L->slot[L->next % IV_SLOTS];
        bool ready = S->k == L->next;
        for (unsigned i = 0; ready && i < L->njobs; i++)
            ready = L->job_k[i] > L->next || L->job_done[i];
        if (!ready)
            return;
        size_t n = 0;
        double per_s = S->span_ns ? 1e9 / (double)S->span_ns : 0;
        for (int d = 0; d < NDIR; d++) {
            pinio_bench_interval sum = {.job = -1, .dir = d};
            bool any = false;
            for (unsigned i = 0; i < L->njobs; i++) {
                if (!S->has[NDIR * i + d])
                    continue;
                const pinio_bench_interval *r = &S->rows[NDIR * i + d];
                rows[n++] = *r;
                any = true;
                /* back to counts, then over the slot's span */
                double span_s = (r->time_ms - (double)(L->ramp_ns + S->k * L->len_ns) / 1e6) / 1e3;
                sum.bytes_per_s += r->bytes_per_s * span_s;
                sum.iops += r->iops * span_s;
            }
            if (!any)
                continue;
            sum.time_ms = (double)(L->ramp_ns + S->k * L->len_ns + S->span_ns) / 1e6;
            sum.bytes_per_s *= per_s;
            sum.iops *= per_s;
            sum.lat_mean_ns = S->h[d].total ? S->h[d].sum / (double)S->h[d].total : 0;
            sum.lat_p50_ns = pinio__hist_percentile(&S->h[d], 50);
            sum.lat_p99_ns = pinio__hist_percentile(&S->h[d], 99);
            rows[n++] = sum;
        }
        S->k = IV_FREE;
        L->next++;
        pthread_cond_broadcast(&g->cv); /* a job may wait for this slot */
        pthread_mutex_unlock(&g->mu);
        for (size_t i = 0; i < n && !L->quiet; i++)
            if (o->interval_fn(o->interval_ctx, &rows[i]))
                L->quiet = true;
        pthread_mutex_lock(&g->mu);
    }
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

static void pinio__bench_iv_free(struct ivlog *L)
{
    if (!L)
        return;
    for (unsigned i = 0; i < IV_SLOTS; i++) {
        free(L->slot[i].rows);
        free(L->slot[i].has);
    }
    free(L->job_k);
    free(L->job_done);
    free(L);
}

static struct ivlog *pinio__bench_iv_alloc(const pinio_bench_opts *o)
{
    struct ivlog *L = calloc(1, sizeof *L);
    if (!L)
        return NULL;
    L->njobs = o->jobs;
    L->len_ns = (uint64_t)(o->interval_ms ? o->interval_ms : 500) * 1000000ull;
    L->ramp_ns = (uint64_t)(o->ramp_time_s * 1e9);
    L->job_k = calloc(o->jobs, sizeof *L->job_k);
    L->job_done = calloc(o->jobs, sizeof *L->job_done);
    bool ok = L->job_k && L->job_done;
    for (unsigned i = 0; i < IV_SLOTS; i++) {
        L->slot[i].k = IV_FREE;
        L->slot[i].rows = calloc(NDIR * (size_t)o->jobs, sizeof *L->slot[i].rows);
        L->slot[i].has = calloc(NDIR * (size_t)o->jobs, sizeof *L->slot[i].has);
        ok = ok && L->slot[i].rows && L->slot[i].has;
    }
    if (!ok) {
        pinio__bench_iv_free(L);
        return NULL;
    }
    return L;
}

static void fill_lat(pinio_bench_lat *l, const pinio__hist *h, const pinio_bench_opts *o)
{
    memset(l, 0, sizeof *l);
    if (!h->total)
        return;
    l->count = h->total;
    l->min_ns = h->min;
    l->p50_ns = pinio__hist_percentile(h, 50);
    l->p90_ns = pinio__hist_percentile(h, 90);
    l->p99_ns = pinio__hist_percentile(h, 99);
    l->p999_ns = pinio__hist_percentile(h, 99.9);
    l->max_ns = h->max;
    l->mean_ns = h->sum / (double)h->total;
    l->stdev_ns = pinio__hist_stdev(h);
    for (unsigned i = 0; i < o->npercentiles; i++)
        l->pct_ns[i] = pinio__hist_percentile(h, o->percentiles[i]);
}

static void fill_samples(pinio_bench_samples *out, const sstat *x)
{
    /* Summed over jobs, as fio's group statistics sum bw and iops. */
    if (!x->n)
        return;
    double mean = x->sum / (double)x->n;
    double var = x->n > 1 ? (x->sumsq - (double)x->n * mean * mean) / (double)(x->n - 1) : 0;
    out->samples += x->n;
    out->min += x->min;
    out->max += x->max;
    out->mean += mean;
    out->stdev = sqrt(out->stdev * out->stdev + (var > 0 ? var : 0));
}

/* lat, slat and clat, each per direction and for all of them */
#define SUM_HISTS (3 * (NDIR + 1))

/* What jobs[0 .. n) measured, summed into `res` (zeroed by the caller);
 * `h` is scratch for SUM_HISTS histograms. */
static void pinio__bench_summarize(const pinio_bench_opts *o, job *jobs, unsigned n,
                                   pinio_bench_result *res, pinio__hist *h)
{
    /* h: lat, slat, clat, each for reads, writes, trims and all (index NDIR) */
    for (int d = 0; d < SUM_HISTS; d++)
        pinio__hist_reset(&h[d]);
    double t0 = jobs[0].t_start, t1 = jobs[0].t_end, user = 0, sys = 0;
    uint64_t submits = 0;
    pinio_bench_dir *dirs[NDIR] = {&res->read, &res->write, &res->trim};
    for (unsigned i = 0; i < n; i++) {
        job *j = &jobs[i];
        for (int d = 0; d < NDIR; d++) {
            const pinio__hist *src[3] = {&j->hist[d], &j->slat[d], &j->clat[d]};
            for (int k = 0; k < 3; k++) {
                pinio__hist_merge(&h[(NDIR + 1) * k + d], src[k]);
                pinio__hist_merge(&h[(NDIR + 1) * k + NDIR], src[k]);
            }
            dirs[d]->bytes += j->bytes[d];
            dirs[d]->ios += j->ios[d];
            fill_samples(&dirs[d]->bw_samples, &j->bw_s[d]);
            fill_samples(&dirs[d]->iops_samples, &j->iops_s[d]);
        }
        res->verified_bytes += j->verified;
        submits += j->submits;
        res->verify_submits += j->verify_submits;
        user += j->cpu_user;
        sys += j->cpu_sys;
        t0 = j->t_start < t0 ? j->t_start : t0;
        t1 = j->t_end > t1 ? j->t_end : t1;
    }
    res->bytes = res->read.bytes + res->write.bytes + res->trim.bytes;
    res->ios = res->read.ios + res->write.ios + res->trim.ios;
    res->seconds = t1 - t0;
    double per_s = res->seconds > 0 ? 1 / res->seconds : 0;
    res->bytes_per_s = (double)res->bytes * per_s;
    res->iops = (double)res->ios * per_s;
    for (int d = 0; d < NDIR; d++) {
        dirs[d]->bytes_per_s = (double)dirs[d]->bytes * per_s;
        dirs[d]->iops = (double)dirs[d]->ios * per_s;
        fill_lat(&dirs[d]->lat, &h[d], o);
        fill_lat(&dirs[d]->slat, &h[(NDIR + 1) + d], o);
        fill_lat(&dirs[d]->clat, &h[2 * (NDIR + 1) + d], o);
    }
    fill_lat(&res->lat, &h[NDIR], o);
    fill_lat(&res->slat, &h[(NDIR + 1) + NDIR], o);
    fill_lat(&res->clat, &h[2 * (NDIR + 1) + NDIR], o);
    res->lat_min_ns = res->lat.min_ns;
    res->lat_p50_ns = res->lat.p50_ns;
    res->lat_p90_ns = res->lat.p90_ns;
    res->lat_p99_ns = res->lat.p99_ns;
    res->lat_p999_ns = res->lat.p999_ns;
    res->lat_max_ns = res->lat.max_ns;
    res->lat_mean_ns = res->lat.mean_ns;
    res->cpu_user_s = user;
    res->cpu_sys_s = sys;
    res->cpu_s_per_gb = res->bytes ? (user + sys) / ((double)res->bytes / 1e9) : 0;
    res->submits_per_io = res->ios ? (double)submits / (double)res->ios : 0;
    features(o, &jobs[0], res->features, sizeof res->features);
    res->batch = jobs[0].batch;
}

/* Opens one file of the run for a job, as the target is opened: `first`
 * (the first job's open) also checks the O_DIRECT alignment and drops the
 * cached pages. */
static int pinio__bench_open_file(const pinio_bench_opts *o, const char *p, int flags, bool first,
                                  int *fd, pinio_diag *diag)
{
    int rc = 0;
    *fd = open(p, flags);
    if (*fd < 0) {
        rc = -errno;
        pinio_diag_set(diag, rc, "bench: %s: open%s: %s%s", p, o->direct ? " with O_DIRECT" : "",
                       pinio_strerror(rc),
                       rc == -EINVAL && o->direct
                           ? " (the file system refuses O_DIRECT, e.g. tmpfs: use --direct=0)"
                           : "");
        return rc;
    }
    /* Said before any request, with the number: each request would fail
     * with a bare "invalid argument" instead. */
    unsigned align = first && o->direct ? dio_align(*fd) : 0;
    if (align > 1 && o->bs % align) {
        rc = -EINVAL;
        pinio_diag_set(diag, rc,
                       "bench: %s: --bs %llu is not a multiple of the %u-byte block that "
                       "O_DIRECT needs here (use --bs %u or a multiple, or --direct=0)",
                       p, (unsigned long long)o->bs, align, align);
        return rc;
    }
    if (first && o->cache_cold && (rc = pinio_file_drop_cache(*fd)))
        pinio_diag_set(diag, rc, "bench: %s: dropping its cached pages: %s", p,
                       pinio_strerror(rc));
    return rc;
}

/* Starts the jobs, opens the gate once all are set up, and sums what they
 * measured. */
static int run_jobs(const pinio_bench_opts *o, const char *spec, uint64_t size,
                    const char *const *paths, unsigned nfiles, pinio_bench_result *res,
                    pinio_diag *diag)
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
        j->batch = o->batch ? (o->batch < o->qd ? o->batch : o->qd) : is_rand(o->rw) ? 1 : o->qd;
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
        for (unsigned f = 0; f < nfiles && !rc; f++)
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
    if (report) {
        pinio__bench_summarize(o, jobs, o->jobs, res, h);
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
    if ((rc = pinio__bench_check_memlock(o, diag)))
        return rc;
    uint64_t size = 0;
    /* One file is the list of one: `path`. */
    const char *const *paths = oc.npaths ? oc.paths : &oc.path;
    unsigned n = oc.npaths ? oc.npaths : 1;
    pinio_bench_file *files = calloc(n, sizeof *files);
    int *hold = malloc(n * sizeof *hold);
    if (!files || !hold) {
        free(files);
        free(hold);
        return pinio_diag_set(diag, -ENOMEM, "bench: no memory for %u files", n), -ENOMEM;
    }
    for (unsigned i = 0; i < n; i++)
        hold[i] = -1;
    rc = pinio__bench_prepare_files(o, paths, n, &size, files, hold, diag);
    for (unsigned i = 0; i < n; i++)
        res->created |= files[i].created;
    res->file_size = files[0].size;
    if (!rc)
        rc = run_jobs(o, spec, size, paths, n, res, diag);
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
    return rc;
}
