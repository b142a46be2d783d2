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
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "pinio/ring.h"
#include "src/bench/job_internal.h"

static const char *const dir_names[NDIR] = {"read", "write", "trim"};

/* ---- one job ------------------------------------------------------------ */

static void thread_cpu(double *user, double *sys)
{
    struct rusage ru;
    getrusage(RUSAGE_THREAD, &ru);
    *user = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6;
    *sys = (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
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
    unsigned nbuf = o->qd * (j->gpu_run ? 2 : 1); /* a GPU: two per slot (gpu.c) */
    j->area_len = ((size_t)nbuf * j->maxbs + HUGE_ALIGN - 1) & ~(size_t)(HUGE_ALIGN - 1);
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
    if (j->obj) /* HTTP: a client instead of a ring, nothing to register */
        return j->obj->setup(j);

    rc = job_ring(j);
    if (rc)
        return rc;
    if (o->fixed && !is_trim(o->rw)) { /* trims move no data: no buffers to register */
        struct iovec *iov = calloc(nbuf, sizeof *iov);
        if (!iov)
            return job_fail(j, -ENOMEM, "iovecs", "");
        for (unsigned i = 0; i < nbuf; i++) {
            iov[i].iov_base = j->area + (size_t)i * j->maxbs;
            iov[i].iov_len = j->maxbs;
        }
        rc = j->faults && j->faults->regnomem ? -ENOMEM : io_uring_register_buffers(&j->ring, iov, nbuf);
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
    return j->gpu_run ? pinio__bench_gpu_job_setup(j) : 0;
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
    unsigned bi = pinio__bench_buf(j, s);
    uint8_t *buf = j->area + (size_t)bi * j->maxbs;
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
            io_uring_prep_write_fixed(sqe, fd, buf, len, off, (int)bi);
        else
            io_uring_prep_read_fixed(sqe, fd, buf, len, off, (int)bi);
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

/* next_io() for the object pass (s3.c), which has no ring to keep hot. */
bool pinio__bench_next_io(job *j, slot *sl, uint64_t limit)
{
    return next_io(j, sl, limit);
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
void pinio__bench_ramp_over(job *j, uint64_t t)
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
    pinio__bench_gpu_ramp(j);
    j->t_start_ns = t;
    thread_cpu(&j->cpu_u0, &j->cpu_s0);
    j->ramp_end = 0;
}

/* What each wake of a pass does first, at `t`: the ramp's end and the
 * interval's (when the pass records); true when the pass must stop issuing
 * (the deadline passed, or the progress callback asked to stop). */
bool pinio__bench_wake(job *j, uint64_t t, uint64_t deadline, bool record)
{
    bool stop = (deadline && t >= deadline) ||
                atomic_load_explicit(&j->gate->cancel, memory_order_relaxed);
    if (j->ramp_end && t >= j->ramp_end)
        pinio__bench_ramp_over(j, t);
    if (record && t >= j->iv_next)
        pinio__bench_iv_tick(j, t);
    return stop;
}

/* Times the request of `sl`, complete at `t`, and counts it. */
void pinio__bench_record(job *j, const slot *sl, uint64_t t)
{
    /* t0 <= ts <= t: ts was taken between the prepare and this wake; a zero
     * ts (never submitted?) cannot happen, but would only show as a zero
     * clat, never as a wrap. */
    uint64_t ts = sl->ts >= sl->t0 && sl->ts <= t ? sl->ts : sl->t0;
    pinio__hist_record(&j->hist[sl->wr], t - sl->t0);
    pinio__hist_record(&j->slat[sl->wr], ts - sl->t0);
    pinio__hist_record(&j->clat[sl->wr], t - ts);
    if (j->ihist)
        pinio__hist_record(&j->ihist[sl->wr], t - sl->t0);
    j->ios[sl->wr]++;
    j->bytes[sl->wr] += sl->len;
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
        stop |= pinio__bench_wake(j, t, deadline, record);
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
            uint8_t *buf = j->area + (size_t)pinio__bench_buf(j, s) * j->maxbs;
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
            if (rec)
                pinio__bench_record(j, sl, t);
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
            if (j->gpu && pinio__bench_gpu_landed(j, s, check, rec))
                stop = true;
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
    if (j->gpu) /* the last copies are part of the pass: its time ends with them */
        (void)pinio__bench_gpu_drain(j);
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
    if (j->obj)
        (void)j->obj->pass(j, limit, deadline);
    else
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

void *pinio__bench_job_main(void *arg)
{
    job *j = arg;
    job_body(j);
    pinio__bench_gpu_job_end(j); /* its device state is this thread's */
    /* The registered ring index belongs to this thread's io_uring context:
     * io_uring_queue_exit() on the caller's thread (pinio__bench_job_teardown()) would
     * drop whatever that thread registered at the same index. */
    if (j->reg_ring)
        (void)io_uring_unregister_ring_fd(&j->ring);
    return NULL;
}

void pinio__bench_job_teardown(job *j)
{
    if (j->have_ring)
        io_uring_queue_exit(&j->ring);
    if (j->obj)
        j->obj->teardown(j);
    pinio__bench_gpu_job_free(j);
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
