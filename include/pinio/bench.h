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
 * Trims (PINIO_BENCH_TRIM) destroy data too and follow the same rules.
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
 * Objects: a target "s3://BUCKET/KEY" (pinio_bench_opts::path) is an
 * object in S3 or an S3-compatible store, read with HTTP range GETs (the
 * loader's client: AWS configuration from the environment and ~/.aws, SigV4,
 * retries with backoff): each job keeps `qd` ranged GETs in flight on its
 * own connections, each request timed from its issue (signing included, the
 * slat) to the last byte of its body (retries included), into the same
 * histograms, intervals and result. Reads only: a write or trim workload is
 * refused (-EINVAL) before anything is sent, and bench never creates or
 * fills an object: it must exist, and its size (a HEAD) is the target's
 * size. Every response is checked (206, Content-Range, length) and the
 * object's ETag is pinned with If-Match (from a store that sends no ETag,
 * its Last-Modified with If-Unmodified-Since): an object replaced during
 * the run fails it with PINIO_ECHANGED; a missing bucket or key is -ENOENT naming
 * both. Options with no meaning for HTTP are refused: verify, verify_only,
 * several paths, sqpoll, iopoll, regfiles, cache_cold, rate, thinktime,
 * batch, PINIO_FAULTS (the network's faults are the real ones); direct and
 * fixed are ignored. The result's s3_* fields count the HTTP requests and
 * their retries.
 *
 * GPU destinations: with pinio_bench_opts::mem = "cuda:N" or "hip:N" each
 * read is copied on into device memory as it lands (storage -> host -> GPU,
 * pipelined); the result's gpu_* fields give each stage's time and the copy
 * alone for reference.
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
    PINIO_BENCH_RW,        /**< sequential, each request a read or a write (rwmixread) */
    PINIO_BENCH_RANDRW,    /**< random, each request a read or a write (rwmixread) */
    /** Sequential trims: each request deallocates its range. On a regular
     *  file a hole is punched (fallocate(2) FALLOC_FL_PUNCH_HOLE |
     *  FALLOC_FL_KEEP_SIZE, through IORING_OP_FALLOCATE; the size stays); on
     *  a block device (allow_device_overwrite) the range is discarded,
     *  through io_uring's block discard command where the kernel has it
     *  (Linux 6.12+, feature "discard_cmd"), else with BLKDISCARD from the
     *  job's thread, one synchronous call per request ("blkdiscard_sync":
     *  then qd is not what the device sees). Destroys data as a write does,
     *  under the same protections; a missing file is first created and
     *  filled as for reads. A target whose file system or device cannot
     *  deallocate fails with -EOPNOTSUPP before the run. No verify. */
    PINIO_BENCH_TRIM,
    PINIO_BENCH_RANDTRIM,  /**< random trims, each block once per pass */
} pinio_bench_rw;

/** Distribution of random offsets (pinio_bench_opts::dist). Every kind but
 *  UNIFORM draws each request independently (blocks repeat within a pass,
 *  as with norandommap); hot blocks are not scattered over the region as fio
 *  does: block 0 of a job's region is the hottest for ZIPF and PARETO, the
 *  middle one for NORMAL, so an offset histogram shows the law as named. */
typedef enum pinio_bench_dist {
    PINIO_BENCH_DIST_UNIFORM = 0, /**< the default: a permutation (random map) */
    PINIO_BENCH_DIST_ZIPF,        /**< P(rank k) ~ 1/k^theta; dist_param = theta > 0, != 1 */
    PINIO_BENCH_DIST_PARETO,      /**< fio's pareto:h, 0 < h < 1: block = (n-1) u^(log h / log(1-h)) */
    PINIO_BENCH_DIST_NORMAL,      /**< centred, sigma = dist_param per cent of the region */
    PINIO_BENCH_DIST_ZONED,       /**< zones: access per cent over size per cent, in order */
} pinio_bench_dist;

/** One zone of PINIO_BENCH_DIST_ZONED: `access_pct` of the requests fall,
 *  uniformly, in the next `size_pct` of the region. Both lists sum to 100. */
typedef struct pinio_bench_zone {
    double access_pct, size_pct;
} pinio_bench_zone;

/** One entry of a block size split (fio's bssplit): `pct` per cent of the
 *  requests are `bs` bytes. The entries' pct sum to 100. */
typedef struct pinio_bench_bs_weight {
    uint64_t bs;
    unsigned pct;
} pinio_bench_bs_weight;

/** Called as each request is issued (pinio_bench_opts::trace), on the job's
 *  thread: `job` is its index, `write` its direction (true for a trim too:
 *  a trim run's requests are all trims). For tests and traces; it runs in
 *  the hot loop, so keep it short. */
typedef void (*pinio_bench_trace_fn)(void *ctx, unsigned job, bool write, uint64_t off,
                                     uint64_t len);

/** One interval of a time series (pinio_bench_opts::interval_fn): what one
 *  job (or all, job -1) moved in one direction during the interval. */
typedef struct pinio_bench_interval {
    double time_ms;      /**< end of the interval, ms since the jobs started */
    int job;             /**< job index, or -1 for the sum over all jobs */
    int dir;             /**< 0 read, 1 write, 2 trim */
    double bytes_per_s;  /**< bytes completed in the interval / its length */
    double iops;         /**< requests completed in the interval / its length */
    double lat_mean_ns;  /**< total latency (issue to completion) of those requests */
    uint64_t lat_p50_ns, lat_p99_ns;
    /** Added with pinio_mpi_bench_run()'s merged series: the bytes and
     *  requests completed in the interval, the counts behind bytes_per_s
     *  and iops (summed over the interval's rows, they are the run's). */
    uint64_t bytes, ios;
} pinio_bench_interval;

/** Called once per interval, job and direction of the workload, in time
 *  order, on the thread that called pinio_bench_run() while the jobs run
 *  (and for the last, partial interval after they ended). Nonzero return:
 *  no further calls (the run goes on). The library opens no file: the
 *  caller writes the log. */
typedef int (*pinio_bench_interval_fn)(void *ctx, const pinio_bench_interval *iv);

/** How verify blocks are checked (pinio_bench_opts::verify_mode). Every
 *  mode puts a header in front of each block (magic, offset, seed,
 *  generation), so that a block found at the wrong place names the offset it
 *  was written for; they differ in how the rest, the payload, is checked. */
typedef enum pinio_bench_verify_mode {
    /** The payload is a pattern derived from (offset, seed): a differing
     *  byte is named with its own offset. 32-byte header. */
    PINIO_BENCH_VERIFY_PATTERN = 0,
    /** CRC-32C (Castagnoli) of the payload, stored in the header (40
     *  bytes): a corrupted block is named, not the byte within it. */
    PINIO_BENCH_VERIFY_CRC32C,
    /** SHA-256 of the payload, stored in the header (64 bytes). */
    PINIO_BENCH_VERIFY_SHA256,
} pinio_bench_verify_mode;

/** How the requests of a job are spread over several files
 *  (pinio_bench_opts::file_service; fio's file_service_type). */
typedef enum pinio_bench_file_service {
    /** The next file after every `file_service_nr` requests (fio's default). */
    PINIO_BENCH_FILE_ROUNDROBIN = 0,
    /** Finish one file's share of a pass before moving on to the next. */
    PINIO_BENCH_FILE_SEQUENTIAL,
    /** A file drawn at random every `file_service_nr` requests, among
     *  those that have not had their share of the current pass. */
    PINIO_BENCH_FILE_RANDOM,
} pinio_bench_file_service;

/** Called as each request is issued (pinio_bench_opts::trace_file), as
 *  pinio_bench_trace_fn, with the index of the file it goes to in
 *  pinio_bench_opts::paths (0 for the one-file case). */
typedef void (*pinio_bench_trace_file_fn)(void *ctx, unsigned job, unsigned file, bool write,
                                          uint64_t off, uint64_t len);

/** What a run did with one of its files (pinio_bench_opts::files_out). */
typedef struct pinio_bench_file {
    uint64_t size;  /**< the file's size after preparation */
    uint64_t used;  /**< bytes of it the run uses, from pinio_bench_opts::offset */
    bool created;   /**< made (and, for reads, filled) by this run */
} pinio_bench_file;

struct pinio_bench_result;

/** Most percentiles a run reports besides the fixed ones (percentiles). */
#define PINIO_BENCH_MAX_PCT 16

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
     *  setup or the verify pass) and the requests they completed (done_ops,
     *  from which a caller shows IOPS); total_bytes is the region for a one-pass
     *  run, 0 for a time-based one (total_s set). Nonzero return: the jobs
     *  stop issuing and drain, and the run fails with -ECANCELED (removing a
     *  file it created). */
    pinio_progress_fn progress;
    void *progress_ctx;
    /** Permit a write workload on an existing non-empty regular file that
     *  bench did not make (bench marks its files with the user.pinio.bench
     *  extended attribute); without it such a run fails with -EEXIST. */
    bool allow_file_overwrite;

    /* Added with the fio-compatible knobs; zero means the default, as for
     * every field added later (src/base/opts.h). */
    /** PINIO_BENCH_RW/RANDRW: per cent of requests that read, 1 .. 99;
     *  0 = 50 (fio's default). All reads or all writes is read or write. */
    unsigned rwmixread;
    /** Start of the used area within the target (bytes, a multiple of 512):
     *  jobs split [offset, offset + size). */
    uint64_t offset;
    /** Bytes each run transfers over all jobs, looping over the region as
     *  needed (fio's io_size); 0 = `size`. A multiple of bs x jobs. Not with
     *  time_s. */
    uint64_t io_size;
    /** Passes over io_size (or size); 0 = 1. Not with time_s. */
    unsigned loops;
    /** Seconds run first and left out of every figure (fio's ramp_time):
     *  the counters restart when it ends. Needs time_s. */
    double ramp_time_s;
    /** Seconds each job waits after the start before its first request. */
    double startdelay_s;
    /** Per job: at most this many bytes per second (0 = unlimited), held by
     *  issuing request k no earlier than k x bs / rate after the job began. */
    uint64_t rate_bytes_per_s;
    /** Per job: at most this many requests per second (0 = unlimited). */
    uint64_t rate_iops;
    /** Random workloads: the offset distribution (default uniform). */
    pinio_bench_dist dist;
    /** ZIPF: theta; PARETO: h; NORMAL: sigma in per cent of the region. */
    double dist_param;
    /** ZONED: the zones, 1 .. 16 (borrowed for the call). */
    const pinio_bench_zone *zones;
    unsigned nzones;
    /** Random uniform offsets drawn independently for each request (blocks
     *  may repeat or be skipped) instead of each block once per pass. */
    bool norandommap;
    /** Block sizes by share of requests, 1 .. 16 entries (borrowed for the
     *  call); when set, `bs` is ignored and each request draws its size.
     *  A sequential run walks the region request after request; a random
     *  one draws offsets that are multiples of blockalign (implies
     *  norandommap). A pass ends when `size` bytes were issued. */
    const pinio_bench_bs_weight *bssplit;
    unsigned nbssplit;
    /** Random offsets with bssplit are multiples of this (0 = the smallest
     *  size of the split); a multiple of 512. */
    uint64_t blockalign;
    /** Optional: called as each request of the workload is issued. */
    pinio_bench_trace_fn trace;
    void *trace_ctx;
    /** Read workloads: check every block read against what a verify write
     *  run with the same seed, bs and region wrote (header and pattern), and
     *  fail with -EBADMSG naming the first block that differs and, when it
     *  holds another block's header, the offset that block was written for. */
    bool verify_only;
    /** Percentiles (0 < p <= 100) reported in pinio_bench_lat::pct_ns, in
     *  this order, at most PINIO_BENCH_MAX_PCT (borrowed for the call). */
    const double *percentiles;
    unsigned npercentiles;
    /** Length of the sampling interval of the bandwidth and IOPS samples
     *  (pinio_bench_dir::bw_samples) and of interval_fn, in ms; 0 = 500
     *  (fio's bw_avg_time / iops_avg_time). 1 .. 3600000. */
    unsigned interval_ms;
    /** Optional: the time series, one call per interval, job and direction. */
    pinio_bench_interval_fn interval_fn;
    void *interval_ctx;
    /** Optional: an array of `jobs` results the run fills with each job's
     *  own figures (as pinio_bench_result; features, batch and file fields
     *  as the aggregate's), whenever it fills the aggregate. */
    struct pinio_bench_result *job_results;
    /** Per job: after every `thinktime_blocks` completed requests (0 = 1),
     *  the job issues nothing for this many microseconds (fio's thinktime:
     *  an application that computes between I/Os); 0 = none. Requests in
     *  flight complete meanwhile. */
    uint64_t thinktime_us;
    unsigned thinktime_blocks;
    /** Random request sizes (fio's bsrange): when bsrange_max is set, each
     *  request draws a size uniformly from the multiples of the granule
     *  (blockalign, or 512) in [bsrange_min, bsrange_max], and `bs` is
     *  ignored; offsets as with bssplit (random ones multiples of the
     *  granule, implying norandommap). Not with bssplit. */
    uint64_t bsrange_min, bsrange_max;
    /** Each job covers the whole [offset, offset + size) instead of its
     *  1/jobs share (fio's numjobs: jobs are clones); `size` then need only
     *  be a multiple of bs, and a one-pass run moves jobs x size bytes. */
    bool jobs_whole;
    /** How verify and verify_only check a block (default the pattern). A
     *  verify_only run must name the mode the file was written with: a
     *  block written in another mode is reported as such. Set only with
     *  verify or verify_only. */
    pinio_bench_verify_mode verify_mode;

    /* Added with several files (fio's filename=a:b, directory + nrfiles). */
    /** Several targets, 1 .. 4096 (borrowed for the call); 0 = the one
     *  file `path`. When set, `path` must be NULL or paths[0]. Each file is
     *  opened and protected as the one file is (O_DIRECT, the overwrite and
     *  block device refusals): every check is made on every file before
     *  anything is created or written, and a refusal names the file.
     *
     *  How the other options map over the files: `size` is the job's total,
     *  divided equally between the files (fio's size; a multiple of bs x
     *  jobs x files), unless `filesize` is set; `offset` applies in every
     *  file; job i uses the same 1/jobs slice of every file (the whole of
     *  each with jobs_whole). Each file keeps its own order (sequential
     *  position, random permutation, distribution draws over the slice),
     *  and `file_service` picks the file of each request; one pass moves
     *  every file's share once. io_size, loops, time, ramp, rate and
     *  thinktime count requests and bytes over all files, as for one. A
     *  size of 0 takes the smallest existing file (from `offset`, rounded
     *  down to bs x jobs) from each file, so every file gets the same
     *  share; missing files are made with that size (or 1 GiB / files
     *  when none exists). */
    const char *const *paths;
    unsigned npaths;
    /** How the file of each request is picked (default roundrobin). */
    pinio_bench_file_service file_service;
    /** ROUNDROBIN, RANDOM: requests issued to a file before switching
     *  (fio's file_service_type=roundrobin:N); 0 = 1. */
    unsigned file_service_nr;
    /** Bytes used in each file (fio's filesize); 0 = size / files. With it,
     *  a set `size` is the default of io_size, as in fio. A multiple of bs
     *  x jobs. */
    uint64_t filesize;
    /** Optional: called as each request of the workload is issued, with
     *  the index of its file (trace_ctx is its context). */
    pinio_bench_trace_file_fn trace_file;
    /** Optional: an array of max(npaths, 1) entries the run fills with what
     *  it did with each file, whenever it fills the result. */
    pinio_bench_file *files_out;

    /* Added with GPU destinations (issue 41). */
    /** Where the reads go (fio's mem=): NULL or "host", host memory (the
     *  default); "cuda:N" or "hip:N", on into the memory of GPU N. Each job
     *  then reads into two staging buffers per request slot, registered
     *  with io_uring first and then with the driver (cuMemHostRegister),
     *  and as each read lands copies it (cuMemcpyHtoDAsync on the job's own
     *  stream) into a device buffer of its own; the slot's next read goes
     *  into the other buffer, so a read overlaps the copy of the one before
     *  (storage -> host -> GPU pipelined, gdsio -x 2's path); a buffer is
     *  read into again only after its copy completed. The driver is loaded
     *  at run time as the CUDA and HIP sinks load it (libcuda.so.1 or
     *  PINIO_CUDA_LIB; libamdhip64.so or PINIO_HIP_LIB). Reads only: a
     *  write, mixed or trim workload with a GPU is refused (-EINVAL; device
     *  -> host -> storage is not measured), as is an "s3://" target. No
     *  driver, or no device N, fails with -ENODEV before any file is made,
     *  naming the library tried or N and the device count. Storage -> GPU
     *  directly (GPUDirect Storage, gdsio -x 0) needs cuFile and is not
     *  measured. With verify_only each block is also read back from device
     *  memory (cuMemcpyDtoH) once its copy completed and checked there: a
     *  block that reached host memory intact and the device changed fails
     *  with -EBADMSG naming its offset. */
    const char *mem;
    /* Added with pinio_mpi_bench_run() (pinio/mpi.h). */
    /** Optional: an array of 3 x #PINIO_BENCH_HIST_BUCKETS counters the
     *  run fills, whenever it fills the result, with its latency histograms
     *  over every direction: lat (issue to completion), then slat, then
     *  clat (what pinio_bench_result::lat, slat and clat are computed
     *  from). Bucket i counts the requests whose latency falls in
     *  (pinio_bench_hist_high(i - 1), pinio_bench_hist_high(i)]: the
     *  histograms of several runs add up bucket by bucket, and
     *  pinio_bench_hist_percentile() of the sum is the percentile over
     *  every run's requests. */
    uint64_t *lat_hist;
} pinio_bench_opts;

/** Buckets of one histogram of pinio_bench_opts::lat_hist: log-linear, 128 per power of
 *  two, so a bucket's highest value overstates any value in it by less
 *  than 1/128. */
#define PINIO_BENCH_HIST_BUCKETS 7424

/** The highest value (ns) bucket `i` of pinio_bench_opts::lat_hist holds;
 *  UINT64_MAX for i out of range. */
PINIO_API uint64_t pinio_bench_hist_high(unsigned i);

/** The value at percentile `p` (0 < p <= 100) of a histogram of
 *  #PINIO_BENCH_HIST_BUCKETS counters: the highest value of the bucket
 *  holding the sample of rank ceil(p/100 x total), capped by `max` (the
 *  exact largest sample), as pinio_bench_result's percentiles are; 0 for
 *  an empty histogram. */
PINIO_API uint64_t pinio_bench_hist_percentile(const uint64_t *counts, uint64_t max, double p);

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

/** Name of a workload ("read", "randread", "write", "randwrite", "rw", "randrw",
 *  "trim", "randtrim"). */
PINIO_API const char *pinio_bench_rw_name(pinio_bench_rw rw);

/** Parses a workload name. @return 0 and `*out`, or -EINVAL. */
PINIO_API int pinio_bench_rw_parse(const char *name, pinio_bench_rw *out);

/** Name of a verify mode ("pattern", "crc32c", "sha256"). */
PINIO_API const char *pinio_bench_verify_mode_name(pinio_bench_verify_mode m);

/** Parses a verify mode name. @return 0 and `*out`, or -EINVAL. */
PINIO_API int pinio_bench_verify_mode_parse(const char *name, pinio_bench_verify_mode *out);

/** Name of a file service ("roundrobin", "sequential", "random"). */
PINIO_API const char *pinio_bench_file_service_name(pinio_bench_file_service s);

/** Parses fio's file_service_type value: "roundrobin", "sequential" or
 *  "random", the first and last optionally followed by ":N" (requests
 *  before switching, 1 .. 2^31). @return 0 with `*out` and `*nr` (0 when
 *  not given), or -EINVAL. */
PINIO_API int pinio_bench_file_service_parse(const char *value, pinio_bench_file_service *out,
                                             unsigned *nr);

/** A latency distribution, nanoseconds. Which latency depends on where it
 *  is found: `lat` (issue to completion), `slat` or `clat`. */
typedef struct pinio_bench_lat {
    uint64_t count;          /**< requests timed */
    uint64_t min_ns, p50_ns, p90_ns, p99_ns, p999_ns, max_ns;
    double mean_ns, stdev_ns;
    /** At pinio_bench_opts::percentiles, in their order (the rest 0). */
    uint64_t pct_ns[PINIO_BENCH_MAX_PCT];
} pinio_bench_lat;

/** Statistics over per-interval samples (pinio_bench_opts::interval_ms):
 *  complete intervals after the ramp only. For the aggregate of several
 *  jobs min, max and mean are the sums of the jobs' and stdev the root of
 *  the summed variances, as fio's group statistics sum them. */
typedef struct pinio_bench_samples {
    uint64_t samples;
    double min, max, mean, stdev;
} pinio_bench_samples;

/** What one direction (reads, writes or trims) of a run measured.
 *
 *  The three latencies are fio's: a request is issued when it is prepared
 *  (put in the submission queue), submitted when the io_uring_enter() call
 *  that carried it returned, complete when its completion was reaped. slat
 *  = issue to submission, clat = submission to completion, lat = issue to
 *  completion (slat + clat). One difference: bench submits the refills of a
 *  wake with the call that also waits for the next completion (one system
 *  call where fio makes two), and that call returns only after a
 *  completion; for the requests it carried, submission is taken as the
 *  call's entry, so their kernel-side submission work counts in clat. */
typedef struct pinio_bench_dir {
    uint64_t bytes, ios;
    double bytes_per_s, iops; /**< over the run's seconds */
    pinio_bench_lat lat;      /**< issue to completion */
    pinio_bench_lat slat;     /**< issue to submission */
    pinio_bench_lat clat;     /**< submission to completion */
    pinio_bench_samples bw_samples;   /**< bytes per second per interval */
    pinio_bench_samples iops_samples; /**< requests per second per interval */
} pinio_bench_dir;

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
    uint64_t file_size;      /**< size of the target (the first file) after preparation */
    bool created;            /**< a file was created (and, for reads, filled) by this run */
    /** Ring features in force, comma-separated (e.g.
     *  "single_issuer,defer_taskrun,fixed_bufs,reg_files,o_direct"). */
    char features[160];
    unsigned batch;          /**< requests gathered per submit call in force (auto resolved) */
    /* Added later, at the end. */
    pinio_bench_dir read;    /**< the reads of the workload */
    pinio_bench_dir write;   /**< the writes of the workload */
    pinio_bench_lat lat;     /**< both directions, issue to completion (lat_*_ns above) */
    /** io_uring_submit* calls of the verify read-back pass: not in
     *  submits_per_io, which is the workload's cost per workload request. */
    uint64_t verify_submits;
    /** The run was stopped by the progress callback (-ECANCELED) after the
     *  workload began: the figures cover what completed until then. */
    bool partial;
    pinio_bench_lat slat;    /**< both directions, issue to submission */
    pinio_bench_lat clat;    /**< both directions, submission to completion */
    /** The trims of a trim workload: `bytes` is what was deallocated (also
     *  in the totals above, as fio counts trim bytes); bw and IOPS as for
     *  the other directions. Zero for other workloads. */
    pinio_bench_dir trim;
    /* Added with object targets ("s3://BUCKET/KEY"); zero for files. */
    uint64_t s3_requests;    /**< HTTP requests sent, retries included (all jobs, ramp included) */
    uint64_t s3_retries;     /**< of those, retries (5xx, 429/SlowDown, resets, short bodies) */
    double s3_retry_wait_s;  /**< seconds the jobs waited before their retries, summed */
    char s3_endpoint[256];   /**< where the requests went (scheme://host[:port]); never a secret */
    char s3_etag[128];       /**< the object's ETag, as pinned (quotes kept) */
    /** What pinned the object's version, as a load's report says it: "etag"
     *  (If-Match, each answer's ETag compared), "last-modified" (no ETag
     *  from the store), "size" (neither). Where only the size pins it, or
     *  an answer carried no validator, the object is asked again after the
     *  run, which fails with #PINIO_ECHANGED when it moved. */
    char s3_pinned_by[16];
    /* Added with GPU destinations (pinio_bench_opts::mem); zero for host
     * memory. Each stage's bandwidth is gpu_bytes over its seconds. */
    char gpu_mem[16];          /**< the destination, "cuda:0", "hip:1"; empty for host */
    char gpu_name[96];         /**< the device's name, as its driver says it */
    uint64_t gpu_bytes;        /**< bytes copied host -> device (the reads' bytes) */
    /** Storage -> host: the jobs' time less their waits for copies (the
     *  longest job's), i.e. what the reads took. */
    double gpu_read_s;
    /** Host -> device: first copy issued to last copy seen complete. */
    double gpu_h2d_s;
    /** Copy time not hidden: the mean over jobs of the time a job waited
     *  for a copy (a buffer to read into again, and the last copies after
     *  its reads). */
    double gpu_wait_s;
    /** The CPU -> GPU copy alone, as reference: pinned host -> device,
     *  no storage, measured in the same run before the jobs start (one
     *  staging buffer copied over and over, best of 3), bytes per second. */
    double gpu_copy_alone_bytes_per_s;
    /** Of the copy time (gpu_bytes / gpu_copy_alone_bytes_per_s), the part
     *  hidden behind reads: 1 - gpu_wait_s / that time, clamped to [0, 1]. */
    double gpu_overlap;
    uint64_t gpu_verified_bytes; /**< verify_only: bytes read back from the device and checked */
    /* Added with pinio_mpi_bench_run(). */
    /** CLOCK_MONOTONIC (seconds) of the first request's issue and the last
     *  completion: `seconds` is their difference. */
    double t_first_s, t_last_s;
    /* Added with throttle counts. */
    /** Object targets: answers asking to slow down (HTTP 429, 503,
     *  SlowDown, ServerBusy), retried or not; a subset of the answers
     *  behind s3_retries, never a reset or another failure. */
    uint64_t s3_throttled;
    /** CLOCK_MONOTONIC (seconds) of the time series' origin: the
     *  intervals' time_ms counts from it (the jobs' start). */
    double t_series_s;
} pinio_bench_result;

/**
 * Checks options without touching the file system: bs, qd, jobs, size and
 * time ranges and combinations (iopoll without direct, verify of a read
 * workload, a size that is not a multiple of bs x jobs, ...); for an
 * "s3://" target also what an object refuses (writes, trims, verify, the
 * io_uring options: see the file comment), before any request is sent.
 * @return 0, or -EINVAL with `diag` naming the option.
 */
PINIO_API int pinio_bench_check(const pinio_bench_opts *o, pinio_diag *diag);

/**
 * Runs one benchmark. Reads of a missing file first create it and fill it
 * with `size` bytes of pseudo-random data (so that reads do real I/O: a
 * sparse file reads as zeros without touching the device).
 *
 * @param res on success filled; on -ECANCELED after the workload began,
 *        filled with what completed until then and `partial` set (zeroed
 *        when the stop came before); on other failures unspecified.
 * @return 0; -EINVAL (options, pinio_bench_check()); -ENOENT/-EACCES/...
 *         (opening the target); -EPERM (a write to a block device without
 *         allow_device_overwrite, or to something that is neither a regular
 *         file nor a block device); -EBUSY (a write to a block device in
 *         use); -EEXIST (a write to a file holding data bench did not write);
 *         -EOPNOTSUPP (a trim workload on a file system that cannot punch
 *         holes, or a device without discard); -ENOMEM (buffers, or their registration:
 *         RLIMIT_MEMLOCK, checked before the target is created when the
 *         buffers certainly cannot fit); -ENOSYS (io_uring unavailable); an
 *         I/O error of a request; -EBADMSG (verify found a block that
 *         differs, in host or, with `mem`, device memory); -ENODEV (`mem`:
 *         no GPU driver, or no such device); the driver's failure of a
 *         copy as -EIO/-ENOMEM naming the call; -ECANCELED (the progress callback). `diag` says which,
 *         with the path and offset. No thread or ring outlives the call, and
 *         a failed run removes every file it created.
 */
PINIO_API int pinio_bench_run(const pinio_bench_opts *o, pinio_bench_result *res,
                              pinio_diag *diag);

#ifdef __cplusplus
}
#endif

#endif /* PINIO_BENCH_H */
