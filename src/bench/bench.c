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
 * (pinio_file_drop_cache()); the PINIO_FAULTS hook (src/uring/faults.h); and
 * the memory primitives of the pool (src/numa/prim.h), not libnuma. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <liburing.h>
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
#include "src/numa/prim.h"
#include "src/uring/faults.h"

#define MAX_BS (64ull << 20)
#define HUGE_ALIGN PINIO__PRIM_HUGE_SIZE
#define MAX_RETRIES 1000 /* EAGAIN/EINTR/EBUSY resubmissions per job before giving up */

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

static const char *const rw_names[] = {"read", "randread", "write", "randwrite"};

const char *pinio_bench_rw_name(pinio_bench_rw rw)
{
    return (unsigned)rw < 4 ? rw_names[rw] : "unknown";
}

int pinio_bench_rw_parse(const char *name, pinio_bench_rw *out)
{
    for (unsigned i = 0; name && i < 4; i++)
        if (!strcmp(name, rw_names[i])) {
            *out = (pinio_bench_rw)i;
            return 0;
        }
    return -EINVAL;
}

static bool is_write(pinio_bench_rw rw)
{
    return rw == PINIO_BENCH_WRITE || rw == PINIO_BENCH_RANDWRITE;
}

static bool is_rand(pinio_bench_rw rw)
{
    return rw == PINIO_BENCH_RANDREAD || rw == PINIO_BENCH_RANDWRITE;
}

int pinio_bench_check(const pinio_bench_opts *o, pinio_diag *diag)
{
#define BAD(...) return pinio_diag_set(diag, -EINVAL, __VA_ARGS__), -EINVAL
    if (!o)
        BAD("bench: no options");
    if (!o->path || !*o->path)
        BAD("bench: no target: --file PATH is required");
    if ((unsigned)o->rw > PINIO_BENCH_RANDWRITE)
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
    if (o->size % (o->bs * o->jobs))
        BAD("bench: --size %llu is not a multiple of bs x jobs (%llu)",
            (unsigned long long)o->size, (unsigned long long)(o->bs * o->jobs));
    /* A run shorter than a millisecond ends before its first completion and
     * would report success with nothing moved (--time 1e-300). */
    if (!(o->time_s == 0.0 || (o->time_s >= 1e-3 && o->time_s <= 1e6)))
        BAD("bench: --time must be 0 (one pass) or between 0.001 and 1e6 seconds");
    if (o->iopoll && !o->direct)
        BAD("bench: --iopoll needs O_DIRECT (drop --direct=0)");
    if (o->verify && !is_write(o->rw))
        BAD("bench: --verify applies to write workloads (write, randwrite)");
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

/* Opens (creating when allowed) the target and settles the size. On
 * success `*size` is the bytes the run uses and `*fsize` the target's size. */
static int prepare_target(const pinio_bench_opts *o, uint64_t *size, pinio_bench_result *res,
                          int *hold, pinio_diag *diag)
{
    const char *p = o->path;
    bool wr = is_write(o->rw);
    struct stat st;
    *size = o->size;
    res->created = false;
    if (stat(p, &st)) {
        int e = -errno;
        if (e != -ENOENT)
            return pinio_diag_set(diag, e, "bench: %s: %s", p, pinio_strerror(e)), e;
        uint64_t want = o->size ? o->size : (1ull << 30);
        want -= want % (o->bs * o->jobs);
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
        int rc = wr ? (posix_fallocate(fd, 0, (off_t)want) ? -ENOSPC : 0)
                    : fill_new_file(o, fd, want, p, diag);
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
        res->file_size = want;
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
                                  "bench: %s holds %llu bytes that bench did not write: a write "
                                  "run would destroy them; use a new path, or add "
                                  "--allow-file-overwrite to mean it",
                                  p, (unsigned long long)fsize),
                   -EEXIST;
    } else if (S_ISBLK(st.st_mode)) {
        if (wr && !o->allow_device_overwrite)
            return pinio_diag_set(diag, -EPERM,
                                  "bench: %s is a block device: writing destroys its data; "
                                  "add --allow-device-overwrite to mean it",
                                  p),
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
                                      "program holds it exclusively): refusing to write to it",
                                      p),
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
        *size = fsize - fsize % (o->bs * o->jobs);
        if (!*size)
            return pinio_diag_set(diag, -EINVAL,
                                  "bench: %s: %llu bytes is less than one block per job", p,
                                  (unsigned long long)fsize),
                   -EINVAL;
    } else if (*size > fsize && !(wr && S_ISREG(st.st_mode))) {
        return pinio_diag_set(diag, -EINVAL, "bench: %s has %llu bytes, --size asks for %llu", p,
                              (unsigned long long)fsize, (unsigned long long)*size),
               -EINVAL;
    }
    res->file_size = fsize > *size ? fsize : *size;
    return 0;
}

/* Without CAP_IPC_LOCK the kernel charges registered buffers to
 * RLIMIT_MEMLOCK. Checked before the target is created or filled: a run
 * that cannot have its buffers must not first write gigabytes. The bound
 * is the least the registration can cost (qd x bs per job, 4 KiB pages);
 * with huge pages it costs up to the 2 MiB-rounded area, and a run in
 * between fails at registration instead (and removes what it created). */
static int check_memlock(const pinio_bench_opts *o, pinio_diag *diag)
{
    pinio_sysinfo si;
    if (!o->fixed || pinio_sys_probe(&si) || si.registrable == PINIO_UNLIMITED)
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

/* ---- one job ------------------------------------------------------------ */

typedef struct slot {
    uint64_t off;  /* file offset of the block */
    uint64_t t0;   /* submission time, ns */
    uint32_t done; /* bytes completed so far (short transfers resubmit the rest) */
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
};

typedef struct job {
    const pinio_bench_opts *o;
    unsigned idx;
    int fd;
    uint64_t base, nblocks;     /* region: [base, base + nblocks * bs) */
    uint64_t perm_mul, perm_add; /* random order: block = (i * mul + add) % nblocks */
    struct gate *gate;
    pthread_t th;
    struct io_uring ring;
    bool have_ring;
    unsigned setup_flags;
    bool fixed, regfiles;
    unsigned batch; /* refills gathered per submit call (resolved, 1 .. qd) */
    uint8_t *area;
    size_t area_len;
    slot *slots;
    pinio__faults *faults;
    pinio__hist hist;
    uint64_t ios, bytes, submits, retries, verified, issued;
    _Atomic uint64_t live_bytes; /* `bytes`, published once per wake for progress */
    double t_start, t_end, cpu_user, cpu_sys;
    int err;
    pinio_diag diag;
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
    j->area_len = ((size_t)o->qd * o->bs + HUGE_ALIGN - 1) & ~(size_t)(HUGE_ALIGN - 1);
    j->area = pinio__prim_map(j->area_len, HUGE_ALIGN, false);
    if (!j->slots || !j->area)
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
    if (o->fixed) {
        struct iovec *iov = calloc(o->qd, sizeof *iov);
        if (!iov)
            return job_fail(j, -ENOMEM, "iovecs", "");
        for (unsigned i = 0; i < o->qd; i++) {
            iov[i].iov_base = j->area + (size_t)i * o->bs;
            iov[i].iov_len = o->bs;
        }
        rc = j->faults && j->faults->regnomem ? -ENOMEM : io_uring_register_buffers(&j->ring, iov, o->qd);
        free(iov);
        if (rc)
            return job_fail(j, rc, "registering the buffers (--fixed)",
                            " (RLIMIT_MEMLOCK? raise ulimit -l or use --fixed=0)");
        j->fixed = true;
    }
    if (o->regfiles) {
        rc = io_uring_register_files(&j->ring, &j->fd, 1);
        if (rc)
            return job_fail(j, rc, "registering the file (--regfiles)", "");
        j->regfiles = true;
    }
    return 0;
}

static void job_prep(job *j, unsigned s, bool wr, bool pattern, uint64_t t)
{
    const pinio_bench_opts *o = j->o;
    slot *sl = &j->slots[s];
    uint8_t *buf = j->area + (size_t)s * o->bs + sl->done;
    unsigned len = (unsigned)(o->bs - sl->done);
    uint64_t off = sl->off + sl->done;
    if (wr && pattern)
        pinio__bench_pattern_fill(buf, len, off, o->seed);
    struct io_uring_sqe *sqe = io_uring_get_sqe(&j->ring);
    while (!sqe) { /* SQPOLL: the kernel thread has not consumed the SQ yet */
        io_uring_submit(&j->ring);
        j->submits++;
        io_uring_sqring_wait(&j->ring);
        sqe = io_uring_get_sqe(&j->ring);
    }
    int fd = j->regfiles ? 0 : j->fd;
    if (j->fixed) {
        if (wr)
            io_uring_prep_write_fixed(sqe, fd, buf, len, off, (int)s);
        else
            io_uring_prep_read_fixed(sqe, fd, buf, len, off, (int)s);
    } else {
        if (wr)
            io_uring_prep_write(sqe, fd, buf, len, off);
        else
            io_uring_prep_read(sqe, fd, buf, len, off);
    }
    if (j->regfiles)
        sqe->flags |= IOSQE_FIXED_FILE;
    io_uring_sqe_set_data64(sqe, s);
    if (!sl->done)
        sl->t0 = t;
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
        j->submits++;
    }
}

/* One pass: `limit` requests (0 = until `deadline`, ns). `check` compares
 * each completed block with the pattern (verify); `record` times it. */
static int job_pass(job *j, bool wr, bool check, bool record, uint64_t limit, uint64_t deadline)
{
    const pinio_bench_opts *o = j->o;
    uint64_t issued = 0, retries = 0;
    unsigned inflight = 0;
    bool stop = false;
    uint64_t t = now_ns();
    for (unsigned s = 0; s < o->qd && (limit ? issued < limit : t < deadline); s++) {
        j->slots[s].off = j->base + block_of(j, issued++) * o->bs;
        j->slots[s].done = 0;
        job_prep(j, s, wr, o->verify, t);
        inflight++;
    }
    while (inflight) {
        int rc = io_uring_submit_and_wait(&j->ring, 1);
        j->submits++;
        if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
            job_fail(j, rc, "io_uring_submit_and_wait", "");
            break; /* the ring is torn down with the requests in it */
        }
        t = now_ns();
        if ((deadline && t >= deadline) ||
            atomic_load_explicit(&j->gate->cancel, memory_order_relaxed))
            stop = true;
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
            int res = cqe->res;
            if (j->faults)
                res = pinio__faults_completion_buf(j->faults, res,
                                                   wr ? NULL : j->area + (size_t)s * o->bs + sl->done,
                                                   o->bs - sl->done);
            if ((res == -EAGAIN || res == -EINTR || res == -EBUSY) && retries < MAX_RETRIES) {
                retries++;
                job_prep(j, s, wr, o->verify, t);
                job_kick(j, seen < avail);
                continue;
            }
            if (res <= 0) {
                int e = res < 0 ? res : -EIO;
                if (!j->err) {
                    j->err = e;
                    /* IOPOLL rings accept any file, but each request to a
                     * device without polled queues fails with EOPNOTSUPP. */
                    pinio_diag_set(&j->diag, e, "bench: %s: %s at offset %llu: %s%s", o->path,
                                   res ? (wr ? "write" : "read") : "unexpected end of file",
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
            if (sl->done < o->bs) {
                /* Short transfer: the rest, same slot. O_DIRECT needs the
                 * offset, length and address aligned, so restart from the
                 * last 4 KiB boundary (the bytes redone are the same bytes). */
                if (o->direct)
                    sl->done &= ~(uint32_t)4095;
                retries++;
                job_prep(j, s, wr, o->verify, t);
                job_kick(j, seen < avail);
                continue;
            }
            if (record) {
                pinio__hist_record(&j->hist, t - sl->t0);
                j->ios++;
                j->bytes += o->bs;
            }
            if (check) {
                long bad = pinio__bench_pattern_check(j->area + (size_t)s * o->bs, o->bs, sl->off,
                                                      o->seed);
                if (bad >= 0 && !j->err) {
                    j->err = -EBADMSG;
                    pinio_diag_set(&j->diag, -EBADMSG,
                                   "bench: %s: verify: the block at offset %llu differs from "
                                   "what was written (first at byte %llu)",
                                   o->path, (unsigned long long)sl->off,
                                   (unsigned long long)(sl->off + (uint64_t)bad));
                    stop = true;
                }
                j->verified += o->bs;
            }
            if (!stop && (limit ? issued < limit : true)) {
                sl->off = j->base + block_of(j, issued++) * o->bs;
                sl->done = 0;
                job_prep(j, s, wr, o->verify, t);
                job_kick(j, seen < avail);
            } else {
                inflight--;
            }
        }
        io_uring_cq_advance(&j->ring, seen);
        if (record)
            atomic_store_explicit(&j->live_bytes, j->bytes, memory_order_relaxed);
    }
    j->retries += retries;
    if (!check)
        j->issued = issued;
    return j->err;
}

static void *job_main(void *arg)
{
    job *j = arg;
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
        return NULL;
    bool wr = is_write(o->rw);
    uint64_t limit = o->time_s > 0 ? 0 : j->nblocks;
    double u0, s0;
    thread_cpu(&u0, &s0);
    uint64_t t0 = now_ns();
    uint64_t deadline = o->time_s > 0 ? t0 + (uint64_t)(o->time_s * 1e9) : 0;
    job_pass(j, wr, false, true, limit, deadline);
    uint64_t t1 = now_ns();
    double u1, s1;
    thread_cpu(&u1, &s1);
    j->t_start = (double)t0 * 1e-9;
    j->t_end = (double)t1 * 1e-9;
    j->cpu_user = u1 - u0;
    j->cpu_sys = s1 - s0;
    pthread_mutex_lock(&g->mu);
    g->finished++;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    if (!j->err && o->verify && !atomic_load(&g->cancel)) {
        /* Every block the pass issued completed (the pass drains), so what
         * was written is exactly the first `issued` blocks of the order. */
        uint64_t n = j->issued < j->nblocks ? j->issued : j->nblocks;
        job_pass(j, false, true, false, n, 0);
    }
    return NULL;
}

static void job_teardown(job *j)
{
    if (j->have_ring)
        io_uring_queue_exit(&j->ring);
    pinio__prim_unmap(j->area, j->area_len);
    free(j->slots);
    free(j->faults);
    if (j->fd >= 0)
        close(j->fd);
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
    ADD(o->direct ? "o_direct" : "buffered");
#undef ADD
}

/* Calls the progress callback about once a second until every job's
 * workload pass ended; returns true when the callback asked to stop (the
 * jobs then stop issuing, drain and skip the verify pass). */
static bool watch(const pinio_bench_opts *o, job *jobs, unsigned n, uint64_t total,
                  struct gate *g)
{
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    pthread_mutex_lock(&g->mu);
    while (g->finished < n && !atomic_load(&g->cancel)) {
        /* The condition variable waits on CLOCK_REALTIME; a clock step
         * only shifts one tick. */
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 1;
        if (pthread_cond_timedwait(&g->cv, &g->mu, &until) != ETIMEDOUT)
            continue;
        pthread_mutex_unlock(&g->mu);
        uint64_t bytes = 0;
        for (unsigned i = 0; i < n; i++)
            bytes += atomic_load_explicit(&jobs[i].live_bytes, memory_order_relaxed);
        clock_gettime(CLOCK_MONOTONIC, &now);
        double secs = (double)(now.tv_sec - start.tv_sec) + (double)(now.tv_nsec - start.tv_nsec) * 1e-9;
        pinio_progress pg = { .done_bytes = bytes, .elapsed_s = secs, .total_s = o->time_s,
                              .total_bytes = o->time_s > 0 ? 0 : total };
        if (o->progress(o->progress_ctx, &pg))
            atomic_store(&g->cancel, true);
        pthread_mutex_lock(&g->mu);
    }
    pthread_mutex_unlock(&g->mu);
    return atomic_load(&g->cancel);
}

/* Starts the jobs, opens the gate once all are set up, and sums what they
 * measured. */
static int run_jobs(const pinio_bench_opts *o, const char *spec, uint64_t size,
                    pinio_bench_result *res, pinio_diag *diag)
{
    int rc = 0;
    bool wr = is_write(o->rw);
    int flags = (wr ? O_RDWR : O_RDONLY) | (o->direct ? O_DIRECT : 0) | O_CLOEXEC;
    job *jobs = calloc(o->jobs, sizeof *jobs);
    if (!jobs)
        return pinio_diag_set(diag, -ENOMEM, "bench: no memory for %u jobs", o->jobs), -ENOMEM;
    struct gate gate = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    atomic_init(&gate.cancel, false);
    uint64_t per_job = size / o->jobs;
    for (unsigned i = 0; i < o->jobs; i++) {
        job *j = &jobs[i];
        j->o = o;
        j->idx = i;
        j->gate = &gate;
        j->fd = -1;
        atomic_init(&j->live_bytes, 0);
        j->base = per_job * i;
        j->batch = o->batch ? (o->batch < o->qd ? o->batch : o->qd) : is_rand(o->rw) ? 1 : o->qd;
        j->nblocks = per_job / o->bs;
        /* A multiplier coprime with nblocks makes i -> i*mul+add (mod n) a
         * permutation: every block once per pass, no bitmap. */
        j->perm_add = (o->seed * 0x9e3779b97f4a7c15ull + i) % j->nblocks;
        j->perm_mul = (j->nblocks * 5 / 8 + 0x2545f491ull * (o->seed | 1)) % j->nblocks;
        while (j->nblocks > 1 && (!j->perm_mul || gcd(j->perm_mul, j->nblocks) != 1))
            j->perm_mul = (j->perm_mul + 1) % j->nblocks;
        pinio__hist_reset(&j->hist);
    }
    for (unsigned i = 0; i < o->jobs && !rc; i++) {
        job *j = &jobs[i];
        j->fd = open(o->path, flags);
        if (j->fd < 0) {
            rc = -errno;
            pinio_diag_set(diag, rc, "bench: %s: open%s: %s%s", o->path,
                           o->direct ? " with O_DIRECT" : "", pinio_strerror(rc),
                           rc == -EINVAL && o->direct
                               ? " (the file system refuses O_DIRECT, e.g. tmpfs: use --direct=0)"
                               : "");
            break;
        }
        /* Said before any request, with the number: each request would
         * fail with a bare "invalid argument" instead. */
        unsigned align = i == 0 && o->direct ? dio_align(j->fd) : 0;
        if (align > 1 && o->bs % align) {
            rc = -EINVAL;
            pinio_diag_set(diag, rc,
                           "bench: %s: --bs %llu is not a multiple of the %u-byte block that "
                           "O_DIRECT needs here (use --bs %u or a multiple, or --direct=0)",
                           o->path, (unsigned long long)o->bs, align, align);
            break;
        }
        if (i == 0 && o->cache_cold && (rc = pinio_file_drop_cache(j->fd))) {
            pinio_diag_set(diag, rc, "bench: %s: dropping its cached pages: %s", o->path,
                           pinio_strerror(rc));
            break;
        }
        rc = pinio__faults_parse(spec, &j->faults, diag);
    }
    /* Only a thread that exists is counted: the gate below waits for
     * `started` arrivals, so counting a failed pthread_create() (EAGAIN under
     * RLIMIT_NPROC) would wait for a job that never runs. */
    unsigned started = 0;
    while (!rc && started < o->jobs) {
        int e = pthread_create(&jobs[started].th, NULL, job_main, &jobs[started]);
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
    pthread_cond_broadcast(&gate.cv);
    pthread_mutex_unlock(&gate.mu);
    if (!rc && o->progress && watch(o, jobs, started, size, &gate)) {
        rc = -ECANCELED;
        pinio_diag_set(diag, rc, "bench: %s: stopped by the progress callback", o->path);
    }
    for (unsigned i = 0; i < started; i++)
        pthread_join(jobs[i].th, NULL);

    pinio__hist *h = rc ? NULL : malloc(sizeof *h);
    if (!rc && !h) {
        rc = -ENOMEM;
        pinio_diag_set(diag, rc, "bench: no memory for the histogram");
    }
    if (!rc) {
        pinio__hist_reset(h);
        double t0 = jobs[0].t_start, t1 = jobs[0].t_end, user = 0, sys = 0;
        uint64_t submits = 0;
        for (unsigned i = 0; i < o->jobs; i++) {
            job *j = &jobs[i];
            if (j->err && !rc) {
                rc = j->err;
                if (diag)
                    *diag = j->diag;
            }
            pinio__hist_merge(h, &j->hist);
            res->bytes += j->bytes;
            res->ios += j->ios;
            res->verified_bytes += j->verified;
            submits += j->submits;
            user += j->cpu_user;
            sys += j->cpu_sys;
            t0 = j->t_start < t0 ? j->t_start : t0;
            t1 = j->t_end > t1 ? j->t_end : t1;
        }
        res->seconds = t1 - t0;
        res->bytes_per_s = res->seconds > 0 ? (double)res->bytes / res->seconds : 0;
        res->iops = res->seconds > 0 ? (double)res->ios / res->seconds : 0;
        res->lat_min_ns = h->total ? h->min : 0;
        res->lat_p50_ns = pinio__hist_percentile(h, 50);
        res->lat_p90_ns = pinio__hist_percentile(h, 90);
        res->lat_p99_ns = pinio__hist_percentile(h, 99);
        res->lat_p999_ns = pinio__hist_percentile(h, 99.9);
        res->lat_max_ns = h->max;
        res->lat_mean_ns = h->total ? h->sum / (double)h->total : 0;
        res->cpu_user_s = user;
        res->cpu_sys_s = sys;
        res->cpu_s_per_gb = res->bytes ? (user + sys) / ((double)res->bytes / 1e9) : 0;
        res->submits_per_io = res->ios ? (double)submits / (double)res->ios : 0;
        features(o, &jobs[0], res->features, sizeof res->features);
        res->batch = jobs[0].batch;
        free(h);
    }
    for (unsigned i = 0; i < o->jobs; i++)
        job_teardown(&jobs[i]);
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
    memset(res, 0, sizeof *res);
    pinio__faults *probe = NULL;
    const char *spec = o->faults ? o->faults : getenv("PINIO_FAULTS");
    rc = pinio__faults_parse(spec, &probe, diag); /* bad specs fail before any file is touched */
    free(probe);
    if (rc)
        return rc;
    if ((rc = check_memlock(o, diag)))
        return rc;
    uint64_t size;
    int hold = -1;
    rc = prepare_target(o, &size, res, &hold, diag);
    if (!rc)
        rc = run_jobs(o, spec, size, res, diag);
    if (hold >= 0)
        close(hold);
    if (rc && res->created)
        unlink(o->path); /* a failed run leaves behind nothing it made */
    return rc;
}
