/**
 * @file bench.h
 * @brief pinio_bench: an io_uring storage benchmark (reads and writes) with
 *        fio's knobs, per-I/O latency percentiles and CPU cost per byte.
 *
 * A run starts `jobs` threads. Each owns one io_uring, one buffer area of
 * `qd` x `bs` bytes and one region of the target (job i gets bytes
 * [i * size/jobs, (i+1) * size/jobs)), and keeps `qd` requests in flight:
 * every completion is recorded in a latency histogram and its slot is
 * refilled at once (submitted when `batch` refills wait, and in any case
 * before the job sleeps for the next completion). Sequential workloads walk the region in order;
 * random ones visit every block of the region exactly once per pass, in a
 * seeded pseudo-random order (a multiplicative permutation), so that a
 * size-bounded random run moves exactly `size` bytes and a random write can
 * be verified.
 *
 * The benchmark drives liburing directly instead of pinio_ring: it must run
 * exactly the configuration it is asked for (a benchmark that silently fell
 * back to buffered I/O or a pread pool would report the wrong thing) and it
 * needs a steady state of `qd` requests with a timestamp per request, which
 * pinio_ring_read_bulk()'s batch contract does not expose. Its rings are set
 * up by the engine's own ladder (pinio_ring_setup_uring()), so the flags
 * measured are the flags the loader runs with.
 *
 * Safety: writes go only to a regular file that is missing (then created),
 * empty, made by bench, or allowed by pinio_bench_opts::allow_file_overwrite;
 * or, with pinio_bench_opts::allow_device_overwrite, to a block device that
 * nothing else holds exclusively (a mounted file system does): it is opened
 * with O_EXCL, held for the whole run, and refused with -EBUSY when in use.
 * A missing file is made under a temporary name (PATH.pinio-bench-PID.tmp)
 * and renamed into place when complete, so an interrupted run never leaves
 * a partial file at PATH (temporaries of PATH that a killed run left are
 * removed first: marked user.pinio.bench, their process gone, untouched for
 * a minute); a fill (reads) that lasts longer than a second calls the
 * progress callback about once a second too (done_bytes 0, total_bytes the
 * file's size, elapsed_s since the fill began; the run's own calls then
 * count from 0 again), which is how a program's signal handler stops it. Every option
 * is checked (pinio_bench_check()) before anything is opened or created.
 *
 * Fault injection: the `PINIO_FAULTS` grammar of ring.h applies to each job's
 * completions (counted per job); its `corrupt@N[xK]` flips one byte in the
 * buffer of the N-th completion of a read (a verify pass then fails with
 * -EBADMSG).
 *
 * Errors: negative errno codes; the optional `pinio_diag` names the file,
 * option or offset.
 */
#ifndef PINIO_BENCH_H
#define PINIO_BENCH_H

#include <stdbool.h>
#include <stdint.h>

#include "pinio/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The workload. */
typedef enum pinio_bench_rw {
    PINIO_BENCH_READ = 0,  /**< sequential reads */
    PINIO_BENCH_RANDREAD,  /**< random reads, each block once per pass */
    PINIO_BENCH_WRITE,     /**< sequential writes */
    PINIO_BENCH_RANDWRITE, /**< random writes, each block once per pass */
} pinio_bench_rw;

/** Options of a run. Start from pinio_bench_opts_default(). */
typedef struct pinio_bench_opts {
    size_t struct_size;    /**< sizeof(pinio_bench_opts), set by pinio_bench_opts_default() */
    const char *path;      /**< file or block device (required) */
    pinio_bench_rw rw;     /**< workload */
    uint64_t bs;           /**< bytes per request: a multiple of 512, 512 .. 64 MiB */
    unsigned qd;           /**< requests in flight per job: 1 .. 4096 */
    unsigned jobs;         /**< threads, one ring and one region each: 1 .. 256 */
    /** Bytes of the target to use, split evenly between jobs; a multiple of
     *  bs x jobs. 0 = the file's size (rounded down to bs x jobs), or 1 GiB
     *  for a file that does not exist yet. */
    uint64_t size;
    /** Seconds to run, looping over the region; 0 = one pass over `size`. */
    double time_s;
    bool direct;           /**< O_DIRECT (default true) */
    bool fixed;            /**< registered buffers, READ_FIXED/WRITE_FIXED (default true) */
    bool regfiles;         /**< registered file table */
    bool sqpoll;           /**< IORING_SETUP_SQPOLL */
    bool iopoll;           /**< IORING_SETUP_IOPOLL (needs O_DIRECT and NVMe poll queues) */
    int node;              /**< NUMA node for buffers and threads; -1 = none */
    bool cache_cold;       /**< drop the file's cached pages before the run */
    bool allow_device_overwrite; /**< permit writes to a block device */
    bool verify;           /**< write runs: write a pattern, then read it all back */
    uint64_t seed;         /**< random order and pattern seed */
    /** Fault specification (ring.h grammar); NULL = getenv("PINIO_FAULTS"). */
    const char *faults;
    /** Requests gathered before a submit call (fio's iodepth_batch_submit),
     *  1 .. 4096, capped at qd. 0 = auto: 1 for random workloads, qd for
     *  sequential ones. Gathering pays only when the block layer can merge
     *  what is gathered (adjacent sequential blocks under one plug); random
     *  blocks never merge, so gathering them only delays their start. */
    unsigned batch;
    /** Optional: called about once a second on the thread that called
     *  pinio_bench_run() with the bytes moved by all jobs (the workload, not
     *  setup or the verify pass); total_bytes is the region for a one-pass
     *  run, 0 for a time-based one (total_s set). Nonzero return: the jobs
     *  stop issuing and drain, and the run fails with -ECANCELED (removing a
     *  file it created). */
    pinio_progress_fn progress;
    void *progress_ctx;
    /** Permit a write workload on an existing non-empty regular file that
     *  bench did not make (bench marks its files with the user.pinio.bench
     *  extended attribute); without it such a run fails with -EEXIST. */
    bool allow_file_overwrite;
} pinio_bench_opts;

/** Fills `*o` with the defaults: read, bs 1 MiB, qd 16, 1 job, direct, fixed, node -1, seed 1. */
static inline void pinio_bench_opts_default(pinio_bench_opts *opts);

/**
 * What pinio_bench_opts_default() calls: fills the first `size` bytes of `*opts`
 * with the defaults (struct_size = `size`; fields past this library's
 * struct stay zero). Inline callers pass their header's sizeof, so a
 * program built against an older, smaller struct is never written past.
 */
PINIO_API void pinio_bench_opts_init(pinio_bench_opts *opts, size_t size);

static inline void pinio_bench_opts_default(pinio_bench_opts *opts)
{
    pinio_bench_opts_init(opts, sizeof(*opts));
}

/** Name of a workload ("read", "randread", "write", "randwrite"). */
PINIO_API const char *pinio_bench_rw_name(pinio_bench_rw rw);

/** Parses a workload name. @return 0 and `*out`, or -EINVAL. */
PINIO_API int pinio_bench_rw_parse(const char *name, pinio_bench_rw *out);

/** What a run measured. All latencies are nanoseconds, submission to completion. */
typedef struct pinio_bench_result {
    uint64_t bytes;          /**< bytes moved by the workload (not the verify pass) */
    uint64_t ios;            /**< completed requests */
    double seconds;          /**< wall time, first submission to last completion */
    double bytes_per_s;      /**< bytes / seconds */
    double iops;             /**< ios / seconds */
    uint64_t lat_min_ns, lat_p50_ns, lat_p90_ns, lat_p99_ns, lat_p999_ns, lat_max_ns;
    double lat_mean_ns;
    double cpu_user_s;       /**< process user CPU during the run (all jobs) */
    double cpu_sys_s;        /**< process system CPU during the run (not the SQPOLL thread) */
    double cpu_s_per_gb;     /**< (user + sys) / (bytes / 1e9) */
    double submits_per_io;   /**< io_uring_submit* calls per completed request */
    uint64_t verified_bytes; /**< bytes read back and compared (verify) */
    uint64_t file_size;      /**< size of the target after preparation */
    bool created;            /**< the file was created (and, for reads, filled) by this run */
    /** Ring features in force, comma-separated (e.g.
     *  "single_issuer,defer_taskrun,fixed_bufs,reg_files,o_direct"). */
    char features[160];
    unsigned batch;          /**< requests gathered per submit call in force (auto resolved) */
} pinio_bench_result;

/**
 * Checks options without touching the file system: bs, qd, jobs, size and
 * time ranges and combinations (iopoll without direct, verify of a read
 * workload, a size that is not a multiple of bs x jobs, ...).
 * @return 0, or -EINVAL with `diag` naming the option.
 */
PINIO_API int pinio_bench_check(const pinio_bench_opts *o, pinio_diag *diag);

/**
 * Runs one benchmark. Reads of a missing file first create it and fill it
 * with `size` bytes of pseudo-random data (so that reads do real I/O: a
 * sparse file reads as zeros without touching the device).
 *
 * @param res on success filled; on failure its content is unspecified.
 * @return 0; -EINVAL (options, pinio_bench_check()); -ENOENT/-EACCES/...
 *         (opening the target); -EPERM (a write to a block device without
 *         allow_device_overwrite, or to something that is neither a regular
 *         file nor a block device); -EBUSY (a write to a block device in
 *         use); -EEXIST (a write to a file holding data bench did not write); -ENOMEM (buffers, or their registration:
 *         RLIMIT_MEMLOCK, checked before the target is created when the
 *         buffers certainly cannot fit); -ENOSYS (io_uring unavailable); an
 *         I/O error of a request; -EBADMSG (verify found a block that
 *         differs); -ECANCELED (the progress callback). `diag` says which,
 *         with the path and offset. No thread or ring outlives the call, and
 *         a failed run removes a file it created.
 */
PINIO_API int pinio_bench_run(const pinio_bench_opts *o, pinio_bench_result *res,
                              pinio_diag *diag);

#ifdef __cplusplus
}
#endif

#endif /* PINIO_BENCH_H */
