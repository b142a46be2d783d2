/* What the files of pinio_bench share (src/bench/): the job, its slots and
 * the start gate, the time series' log, and the calls across the files:
 *
 *   options.c   the options: defaults, names, pinio_bench_check()
 *   target.c    the target: made or reused, the overwrite guard, the trim probe
 *   job.c       one job: its ring and buffers, the I/O loop, the passes
 *   interval.c  the time series and the interval samples
 *   stats.c     the summary: what the jobs measured, summed into the result
 *   verify.c    verify blocks (pattern, header, sums) and the mismatch report
 *   s3.c        an object target: its HEAD, and the pass of HTTP range GETs
 *   gpu.c       a GPU destination: reads copied on into device memory
 *   run.c       pinio_bench_run(): prepare, start the jobs, watch, sum up
 *
 * Not installed; tests use bench_internal.h only. */
#ifndef PINIO_SRC_BENCH_JOB_INTERNAL_H
#define PINIO_SRC_BENCH_JOB_INTERNAL_H

#include <liburing.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "pinio/bench.h"
#include "src/bench/bench_internal.h"
#include "numa/prim.h"
#include "src/s3/client.h"
#include "uring/faults.h"


#define MAX_BS (64ull << 20)
#define HUGE_ALIGN PINIO__PRIM_HUGE_SIZE
#define MAX_RETRIES 1000 /* EAGAIN/EINTR/EBUSY resubmissions per job before giving up */

/* io_uring's block discard command (Linux 6.12, <linux/blkdev.h>): newer
 * than bookworm's kernel headers. */
#ifndef BLOCK_URING_CMD_DISCARD
#define BLOCK_URING_CMD_DISCARD _IO(0x12, 0)
#endif

/* The workload writes (all or some of its requests). */
static inline bool is_write(pinio_bench_rw rw)
{
    return rw == PINIO_BENCH_WRITE || rw == PINIO_BENCH_RANDWRITE || rw == PINIO_BENCH_RW ||
           rw == PINIO_BENCH_RANDRW;
}

static inline bool is_mixed(pinio_bench_rw rw)
{
    return rw == PINIO_BENCH_RW || rw == PINIO_BENCH_RANDRW;
}

static inline bool is_rand(pinio_bench_rw rw)
{
    return rw == PINIO_BENCH_RANDREAD || rw == PINIO_BENCH_RANDWRITE || rw == PINIO_BENCH_RANDRW ||
           rw == PINIO_BENCH_RANDTRIM;
}

static inline bool is_trim(pinio_bench_rw rw)
{
    return rw == PINIO_BENCH_TRIM || rw == PINIO_BENCH_RANDTRIM;
}

/* The unit sizes are multiples of: bs, or the largest size of bssplit or
 * bsrange. */
static inline uint64_t unit_bs(const pinio_bench_opts *o)
{
    if (o->bsrange_max)
        return o->bsrange_max;
    uint64_t m = o->nbssplit ? 0 : o->bs;
    for (unsigned i = 0; o->bssplit && i < o->nbssplit; i++)
        m = o->bssplit[i].bs > m ? o->bssplit[i].bs : m;
    return m;
}

/* Directions: the index of every per-direction array (and a slot's `wr`). */
#define DIR_TRIM 2
#define NDIR 3
/* job::dir of a mixed pass, which draws read or write per request. */
#define PASS_MIXED 3

/* How a trim workload deallocates (run_jobs() probes it before the run). */
enum trim_how {
    TRIM_NONE = 0,
    TRIM_PUNCH,   /* regular file: IORING_OP_FALLOCATE, PUNCH_HOLE | KEEP_SIZE */
    TRIM_CMD,     /* block device: io_uring's BLOCK_URING_CMD_DISCARD (6.12+) */
    TRIM_IOCTL,   /* block device on an older kernel: BLKDISCARD, then a NOP */
};

typedef struct slot {
    uint64_t off;  /* file offset of the request */
    uint64_t t0;   /* issue time (prepared), ns */
    uint64_t ts;   /* submission time (the submit call that carried it), ns */
    uint64_t idx;  /* issue index within the pass (verify: the block's generation) */
    uint32_t len;  /* bytes of the request (bs, or drawn from bssplit) */
    uint32_t done; /* bytes completed so far (short transfers resubmit the rest) */
    uint8_t wr;    /* direction: 0 read, 1 write, DIR_TRIM (a bool before trims) */
    uint8_t half;  /* --mem GPU: which of the slot's two staging buffers (gpu.c) */
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

struct job;

/* An object target (s3.c): what its HEAD said, shared by the jobs, and the
 * engine that reads it. The job loop reaches the engine through these
 * hooks, not by name: s3.c drives its requests with the loop's own
 * next_io()/record()/wake(), and two files calling each other would be one
 * module in two pieces. */
typedef struct pinio__bench_obj {
    char *bucket, *key;
    char etag[128];        /* pinned: If-Match on every range */
    char last_modified[64]; /* without an ETag: If-Unmodified-Since on every range */
    uint64_t size;
    char endpoint[256];
    int (*setup)(struct job *j);    /* the job's client (job_setup()) */
    int (*pass)(struct job *j, uint64_t limit, uint64_t deadline);
    void (*teardown)(struct job *j); /* also after a failed or no setup */
} pinio__bench_obj;

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
    /* An object target: the object, this job's client (its own connections,
     * qd of them) and its completions; the client's counters at the end. */
    const pinio__bench_obj *obj;
    pinio__s3 *s3;
    pinio__s3_done *s3done;
    pinio__s3_stats s3st;
    /* A GPU destination (gpu.c): the run's driver and device, and this
     * job's stream, events and device buffers; NULL for host memory. */
    struct pinio__bench_gpu *gpu_run;
    struct pinio__bench_gpu_job *gpu;
} job;

/* The staging buffer of slot s: with a GPU two per slot, s and s + qd,
 * used in turn (gpu.c); one otherwise. */
static inline unsigned pinio__bench_buf(const job *j, unsigned s)
{
    return s + (j->slots[s].half ? j->o->qd : 0);
}

static inline uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
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

/* lat, slat and clat, each per direction and for all of them */
#define SUM_HISTS (3 * (NDIR + 1))

/* ---- target.c ---------------------------------------------------------- */

/* A target bench may write again without --allow-file-overwrite: one it
 * made, or one whose recorded state still matches (target.c); its inode, so
 * that the state recorded after the run is the same file's. */
typedef struct pinio__bench_own {
    bool owned;
    uint64_t dev, ino;
} pinio__bench_own;

int pinio__bench_prepare_files(const pinio_bench_opts *o, const char *const *paths, unsigned n,
                               uint64_t *size, pinio_bench_file *out, int *hold,
                               pinio__bench_own *own, pinio_diag *diag);
/* After a run that wrote: records each owned file's state as bench's. */
void pinio__bench_record_files(const char *const *paths, unsigned n,
                               const pinio__bench_own *own);
int pinio__bench_check_memlock(const pinio_bench_opts *o, pinio_diag *diag);
int pinio__bench_trim_probe(const char *path, int fd, const pinio__faults *f, enum trim_how *how,
                            pinio_diag *diag);
int pinio__bench_open_file(const pinio_bench_opts *o, const char *p, int flags, bool first,
                           int *fd, pinio_diag *diag);

/* ---- job.c ------------------------------------------------------------- */

void *pinio__bench_job_main(void *arg);
void pinio__bench_job_teardown(job *j);

bool pinio__bench_next_io(job *j, slot *sl, uint64_t limit);
void pinio__bench_ramp_over(job *j, uint64_t t);
bool pinio__bench_wake(job *j, uint64_t t, uint64_t deadline, bool record);
void pinio__bench_record(job *j, const slot *sl, uint64_t t);

/* ---- options.c (an object's) ------------------------------------------- */

/* Whether the run's target is an object ("s3://"). */
bool pinio__bench_is_s3(const pinio_bench_opts *o);
/* What pinio_bench_opts::mem names: 1 a GPU ("cuda:N", "hip:N": `*hip`,
 * `*n`), 0 host memory (NULL, "host", "malloc"), -EINVAL neither. */
int pinio__bench_mem_parse(const char *mem, bool *hip, int *n);
/* The options an object run refuses, before anything is sent. */
int pinio__bench_s3_check(const pinio_bench_opts *o, pinio_diag *diag);

/* ---- s3.c ---------------------------------------------------------------- */

/* The object's HEAD: its size and ETag, and the bytes the run uses
 * (`*size`, settled as a file's), into `obj` with its engine's hooks
 * (freed by _obj_free). */
int pinio__bench_s3_prepare(const pinio_bench_opts *o, pinio__bench_obj *obj, uint64_t *size,
                            pinio_bench_file *file, pinio_diag *diag);
void pinio__bench_s3_obj_free(pinio__bench_obj *obj);
/* What pins the object's version: "etag", "last-modified" or "size". */
const char *pinio__bench_s3_pinned_by(const pinio__bench_obj *obj);
/* After a completed run: the object asked again when `unconfirmed` answers
 * (summed over the jobs) carried no validator or only its size pins it;
 * PINIO_ECHANGED when it moved. 0 when nothing needs asking. */
int pinio__bench_s3_recheck(const pinio_bench_opts *o, const pinio__bench_obj *obj,
                            uint64_t unconfirmed, pinio_diag *diag);

/* ---- interval.c -------------------------------------------------------- */

void pinio__bench_iv_tick(job *j, uint64_t t);
void pinio__bench_iv_final(job *j, uint64_t t);
void pinio__bench_iv_deliver(const pinio_bench_opts *o, struct gate *g, pinio_bench_interval *rows);
struct ivlog *pinio__bench_iv_alloc(const pinio_bench_opts *o);
void pinio__bench_iv_free(struct ivlog *L);

/* ---- stats.c ----------------------------------------------------------- */

void pinio__bench_summarize(const pinio_bench_opts *o, job *jobs, unsigned n,
                            pinio_bench_result *res, pinio__hist *h);

/* ---- gpu.c ------------------------------------------------------------- */

typedef struct pinio__bench_gpu pinio__bench_gpu;
typedef struct pinio__bench_gpu_job pinio__bench_gpu_job;
/* The driver, the device and the copy alone; `*out` NULL for host memory. */
int pinio__bench_gpu_open(const pinio_bench_opts *o, pinio__bench_gpu **out, pinio_diag *diag);
void pinio__bench_gpu_close(pinio__bench_gpu *g);
/* On the job's thread, after its buffers are registered with io_uring;
 * job_end on the same thread after its passes, job_free at teardown. */
int pinio__bench_gpu_job_setup(job *j);
void pinio__bench_gpu_job_end(job *j);
void pinio__bench_gpu_job_free(job *j);
/* Slot s's read is complete in its buffer: copied on, the slot flipped to
 * its other buffer, which is settled first. Then, the pass's end: every
 * copy waited for. */
int pinio__bench_gpu_landed(job *j, unsigned s, bool check, bool rec);
int pinio__bench_gpu_drain(job *j);
void pinio__bench_gpu_ramp(job *j);
void pinio__bench_gpu_summarize(const job *jobs, unsigned n, pinio_bench_result *res);

/* ---- verify.c ---------------------------------------------------------- */

void pinio__bench_verify_fail(job *j, const slot *sl, const pinio__block_found *f, bool gen_known,
                              uint64_t gen);

#endif
