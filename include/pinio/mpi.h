/**
 * @file mpi.h
 * @brief pinio over MPI: a job reads each checkpoint byte once and shares it.
 *
 * Installed, with libpinio_mpi and pinio-mpi.pc, only by a build with
 * `-Dmpi=enabled` (or `auto` where MPI is found): programs without MPI
 * never see `<mpi.h>`.
 *
 * One call, pinio_mpi_load(), collective over a communicator:
 *
 *   0. the ranks agree on the arguments that shape the job (policy and its
 *      options, `filters`, whether each rank has `shard_filters`, the split
 *      rules and the world of #PINIO_MPI_TP, verify and the expected
 *      digests): a rank whose differ fails the job, before any
 *      file is read, naming that rank and the argument;
 *   1. every rank resolves its own `paths` (which may name a node-local
 *      copy), reads its headers and builds its plan from them, with rank
 *      0's alignment; each rank then names each of its files by size, the
 *      SHA-256 of its header bytes and the SHA-256 of 16 data blocks spread
 *      over it (read through the descriptor its data will come from), and
 *      every rank's names are compared with rank 0's, and then the plans
 *      (all but #PINIO_MPI_SHARD with `shard_filters`, whose plans are the
 *      ranks' own): a rank with another file, a stale or torn copy, a
 *      missing file or a different plan fails the job before any data byte
 *      is read (#PINIO_ECHANGED or -EINVAL, naming the rank and its file).
 *      A copy that differs only between the sampled blocks is caught by
 *      `verify` with `expected_sha256`;
 *   2. each rank reads its part through the io_uring O_DIRECT engine
 *      (pinio_plan_execute() with first_read/nreads):
 *      - #PINIO_MPI_REPLICATE: the plan's reads are cut into one contiguous,
 *        aligned stripe per rank, balanced by bytes; the stripes are then
 *        exchanged in place, so every rank holds every byte;
 *      - #PINIO_MPI_SHARD: each rank reads and keeps only its own tensors
 *        (its own filters, or a contiguous split of the plan by bytes that
 *        never cuts a tensor); nothing is exchanged;
 *      - #PINIO_MPI_NODE: one copy per node, in shared memory pinio owns
 *        (a memfd mapped by every rank of the node, locked when
 *        RLIMIT_MEMLOCK allows): the plan is cut into one stripe per node,
 *        each node's stripe into one per local rank; the ranks read their
 *        stripes into the node's copy, then the node leaders (local rank 0)
 *        exchange the node stripes as replicate does, between nodes only;
 *   3. with `verify`: each file's SHA-256 over the bytes as the ranks read
 *      them, before any exchange: the file is hashed in file order by the
 *      ranks that read its bytes, each hashing its own bytes where they
 *      landed and handing the hash state (112 bytes) to the next reader;
 *      bytes no rank read (the header, unselected tensors) are read again
 *      by the rank then holding the state, from its own file. SHA-256 is
 *      sequential, so a file costs one core hashing it, spread over its
 *      readers; files proceed in parallel. Every rank learns every digest
 *      and the same verdict;
 *   5. #PINIO_MPI_TP: the stripes are cut from the plan of the selected
 *      tensors whole (one copy, as under replicate) and read into a
 *      staging area laid out as that plan (only the rank's own stripe is
 *      touched); each rank also builds its own plan with the split rules
 *      (its slices: shapes, offsets), and the ranks share each slice's
 *      place in its tensor (a few numbers per tensor and rank). The
 *      staging area is then exchanged: on one node
 *      (#PINIO_MPI_EXCHANGE_SHARED) the staging area is the node's shared
 *      memory and each rank takes its slices from it; across nodes
 *      (#PINIO_MPI_EXCHANGE_ALLTOALLV) in rounds of the layout
 *      (`bcast_piece`), each one MPI_Ialltoallv packed while the previous
 *      one travels: rank r sends rank q exactly the bytes of q's slices
 *      (and of the tensors held whole) that lie in r's stripe, and q
 *      unpacks them into its slices, packed contiguous as
 *      pinio_plan_gather() would; a rank's own bytes are copied locally.
 *      The staging area is released before the call returns (shared: it
 *      stays mapped where slices are views of it). With
 *      `verify` the files are hashed from the staging area as under
 *      replicate. pinio_mpi_plan() is the rank's own plan (its tensors
 *      describe its slices). To put them on the rank's GPU, build the plan
 *      again with the same filters, rules, rank and world and its segment
 *      at most a staging slot, and hand pinio_stream_from_memory()
 *      (stream.h) each tensor's bytes (pinio_mpi_tensor_view(), matched by
 *      name) with #pinio_sink_cuda: what `pinio load --mpi tp --device`
 *      does (tools/load_mpi_device.c);
 *   4. after each phase the ranks agree on one status (an Allreduce): a rank
 *      that fails never leaves another waiting in the next collective, and
 *      every rank returns the same code and the same diagnostic, naming the
 *      failing rank, file and offset.
 *
 * MPI contract: the caller initialised MPI (pinio never calls MPI_Init or
 * MPI_Finalize) with at least MPI_THREAD_FUNNELED, and calls pinio_mpi_load()
 * from the thread that drives MPI; the engine's own threads never call MPI.
 * The communicator is duplicated for the call (its messages cannot match the
 * caller's) and the duplicate returns errors (MPI_ERRORS_RETURN) rather than
 * aborting the job; it is freed before the call returns. The result is local:
 * releasing it is not collective.
 */
#ifndef PINIO_MPI_H
#define PINIO_MPI_H

#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinio/bench.h"
#include "pinio/common.h"
#include "pinio/plan.h"
#include "pinio/view.h"

#ifdef __cplusplus
extern "C" {
#endif

/** What each rank ends up holding. */
typedef enum pinio_mpi_policy {
    PINIO_MPI_REPLICATE = 0, /**< every byte on every rank; each byte read once per job */
    PINIO_MPI_SHARD,         /**< each rank its own tensors; each byte read once, no exchange */
    /** every byte on every rank, one copy per node in shared memory: the
     *  tensors of every local rank are views of the same pages; each byte
     *  read once per job, exchanged between node leaders only */
    PINIO_MPI_NODE,
    /** Tensor parallelism: each rank ends with its own slice of every
     *  tensor the split rules match (torch.chunk(t, world, dim)[rank], as
     *  pinio_plan_opts::split) and every other selected tensor whole; the
     *  job reads each selected byte once and moves each byte only to the
     *  ranks that hold it (see step 5 of pinio_mpi_load()). */
    PINIO_MPI_TP,
} pinio_mpi_policy;

/** How #PINIO_MPI_REPLICATE exchanges the stripes. */
typedef enum pinio_mpi_exchange {
    /** ALLGATHERV: bench/mpi_load found the two equal within their spread
     *  (one machine, 2 and 4 ranks), and one collective leaves the algorithm
     *  to the MPI library, which picks it by size and topology. */
    PINIO_MPI_EXCHANGE_AUTO = 0,
    /** One MPI_Allgatherv in place, counts in units of the plan's alignment
     *  (a contiguous datatype), so no count reaches INT_MAX below 8 TiB. */
    PINIO_MPI_EXCHANGE_ALLGATHERV,
    /** Each stripe broadcast by its reader in pieces (MPI_Ibcast, a few in
     *  flight), which lets large stripes pipeline across the ranks. */
    PINIO_MPI_EXCHANGE_BCAST,
    /** #PINIO_MPI_TP's exchange across nodes (and only TP's: AUTO picks it
     *  there when the ranks span several nodes): rounds of MPI_Ialltoallv,
     *  each rank's bytes to the ranks that hold them. */
    PINIO_MPI_EXCHANGE_ALLTOALLV,
    /** #PINIO_MPI_TP with every rank on one node (AUTO picks it there): the
     *  staging area is one shared memory of the node (a memfd, as
     *  #PINIO_MPI_NODE's copy), each rank reading its stripe into it; then
     *  each rank maps it privately and its slices that are one run of it
     *  (tensors held whole, chunks along the first dimension, when aligned
     *  as their tensor) are views of those pages, the others copied out of
     *  it. No bytes travel through MPI. A rank's memory then maps the node's
     *  copy, freed when the last rank's last view is released; writes are
     *  private to the rank (copy on write). Given for a job over several
     *  nodes: -EINVAL. */
    PINIO_MPI_EXCHANGE_SHARED,
} pinio_mpi_exchange;

/** Options of pinio_mpi_load(). Start from pinio_mpi_opts_default(). */
typedef struct pinio_mpi_opts {
    size_t struct_size;          /**< sizeof(pinio_mpi_opts), set by the defaults function */
    pinio_mpi_policy policy;     /**< REPLICATE */
    pinio_mpi_exchange exchange; /**< AUTO */
    /** The job's selection (pinio_plan_opts::filters); must be the same on
     *  every rank. Read during the call only. */
    const char *const *filters;
    size_t nfilters;
    /** #PINIO_MPI_SHARD only: this rank's own tensors (same grammar), used
     *  instead of `filters` (both together: -EINVAL, a rank's selection is
     *  its shard filters alone); may differ per rank, and ranks should not
     *  overlap (an overlap is read by each). Without them (0 on every rank)
     *  the job's plan is split into contiguous, byte-balanced runs of reads
     *  that never cut a tensor: rank r gets run r (possibly none). */
    const char *const *shard_filters;
    size_t nshard_filters;
    pinio_cache_policy cache;    /**< AUTO (decided per rank: each rank's page cache) */
    pinio_direct_policy direct;  /**< AUTO */
    pinio_backend backend;       /**< AUTO */
    unsigned queue_depth;        /**< 0 = the engine's default */
    size_t request_size;         /**< 0 = the engine's default */
    /** #PINIO_MPI_EXCHANGE_BCAST: bytes per broadcast piece; 0 = 16 MiB.
     *  #PINIO_MPI_TP: bytes of the plan's layout per exchange round (capped
     *  so that a round's counts stay below INT_MAX); 0 = 16 MiB, less past
     *  17 ranks (a round's send buffer is up to n - 1 times it). */
    uint64_t bcast_piece;
    /** #PINIO_MPI_NODE: what a node is. 0: the ranks that share memory
     *  (MPI_Comm_split_type MPI_COMM_TYPE_SHARED). k > 0: each run of k
     *  consecutive local ranks of such a node counts as a node of its own
     *  (its own copy, its leader in the exchange): a multi-node job
     *  simulated on one machine, for tests and benchmarks. Same on every
     *  rank. */
    int node_ranks;
    /** Optional: called on this rank, from the calling thread, during the
     *  reads, not during the exchange (see #pinio_progress_fn). On rank 0
     *  it follows the job: done_bytes and total_bytes count every rank's
     *  reads (each other rank reports to rank 0 after each batch of its
     *  reads, at most one small message in flight, and once at their end;
     *  rank 0 takes them in during its reads and waits for the last ones
     *  after them), the last call with done == total. On another rank: its
     *  own reads. May differ per rank (a CLI sets it on rank 0 only).
     *  Returning nonzero stops this rank's reads (rank 0: its own, or the
     *  job once they are over): every rank then returns -ECANCELED, the
     *  diagnostic naming this rank. */
    pinio_progress_fn progress;
    void *progress_ctx;
    /** Compute each input file's SHA-256 (the hub's LFS object id) over the
     *  bytes as the ranks read them (step 3 above); pinio_mpi_sha256() hands
     *  them out on every rank. Same on every rank. false. */
    bool verify;
    /** With verify: expected hex digests, one per input file in resolution
     *  order (NULL entries skip a file); when nexpected is not 0 it must
     *  equal the number of files, else #PINIO_EDIGESTS before any data is
     *  read. A mismatch fails the job on every rank with #PINIO_EFORMAT and
     *  the same "PATH: sha256 mismatch: expected X, got Y" (rank 0's path),
     *  the file's index in `diag->index`. Same on every rank (agreed in
     *  step 0); read during the call only. */
    const char *const *expected_sha256;
    size_t nexpected;
    /** #PINIO_MPI_TP only (-EINVAL under another policy): the split rules
     *  (pinio_plan_opts::split: the first match wins, unmatched tensors are
     *  held whole by every rank; no rules: every tensor whole on every
     *  rank). Same on every rank (agreed in step 0); read during the call
     *  only. A rank's slice of a matched tensor is chunk `rank` of `world`
     *  of the communicator. */
    const pinio_split_rule *split;
    size_t nsplit;
    /** #PINIO_MPI_TP: the number of chunks, which must be the communicator's
     *  size (a check on the caller's own count; -EINVAL otherwise); 0 = the
     *  communicator's size. Same on every rank. */
    uint32_t world;
} pinio_mpi_opts;

/** Fills `*opts` with the defaults described field by field above. */
static inline void pinio_mpi_opts_default(pinio_mpi_opts *opts);

/** What pinio_mpi_opts_default() calls: the first `size` bytes get the
 *  defaults (struct_size = `size`), so an older, smaller struct is never
 *  written past. */
PINIO_API void pinio_mpi_opts_init(pinio_mpi_opts *opts, size_t size);

static inline void pinio_mpi_opts_default(pinio_mpi_opts *opts)
{
    pinio_mpi_opts_init(opts, sizeof(*opts));
}

/** What one rank did (times in seconds on this rank). */
typedef struct pinio_mpi_report {
    int rank, nranks;
    pinio_mpi_policy policy;
    pinio_mpi_exchange exchange;  /**< the one used (never AUTO) */
    size_t tensors;               /**< tensors this rank holds */
    uint64_t bytes;               /**< tensor bytes this rank holds */
    uint64_t read_bytes;          /**< bytes this rank read from storage (its reads' lengths;
                                       header bytes on rank 0 not counted) */
    uint64_t job_read_bytes;      /**< every rank's read_bytes together */
    uint64_t plan_read_bytes;     /**< what the whole plan covers (one copy) */
    uint64_t received_bytes;      /**< bytes this rank received in the exchange */
    uint64_t header_bytes;        /**< header and index bytes this rank read */
    size_t first_read, nreads;    /**< this rank's reads of the plan */
    double plan_seconds;          /**< headers broadcast and plan built */
    double io_seconds;            /**< this rank's reads */
    double exchange_seconds;      /**< the exchange (0 without one) */
    double seconds;               /**< the whole call on this rank */
    double max_seconds;           /**< the whole call on the slowest rank */
    char io_path[256];            /**< the engine's I/O path line on this rank */
    /* #PINIO_MPI_NODE (else node = rank, nodes = nranks, local_rank 0,
     * local_ranks 1, node_bytes 0, locked false): */
    int node, nodes;              /**< this rank's node (its leader's index) and the node count */
    int local_rank, local_ranks;  /**< this rank within its node */
    uint64_t node_bytes;          /**< the node's shared copy (the memfd's size, once per node) */
    bool locked;                  /**< the node's copy is locked in RAM (mlock by its leader) */
    /* verify (else false and 0): */
    bool verified;                /**< every file's SHA-256 computed (and matched, when expected) */
    double verify_seconds;        /**< the hash chain and the verdict, on this rank */
    uint64_t verify_landed_bytes; /**< bytes this rank hashed where its reads landed */
    uint64_t verify_reread_bytes; /**< bytes this rank read again to hash (header, gaps) */
    /* #PINIO_MPI_TP (else 0): */
    uint32_t world;               /**< the chunks per split tensor (the ranks) */
    size_t sliced;                /**< tensors this rank holds as a slice (not whole) */
    uint64_t full_bytes;          /**< the selected tensors' bytes whole (what every rank
                                       holds under replicate) */
    uint64_t sent_bytes;          /**< bytes this rank sent to other ranks in the exchange */
    size_t rounds;                /**< exchange rounds */
} pinio_mpi_report;

/** A rank's loaded tensors. Opaque; local to the rank. */
typedef struct pinio_mpi_checkpoint pinio_mpi_checkpoint;

/**
 * Collective over `comm`: loads `paths` (as pinio_plan_create() resolves
 * them, on each rank) under `opts`' policy. Every rank must call it with
 * the same files (the same bytes: a path of its own may name a copy), the
 * same `filters`, policy and verify options; a rank that differs fails the
 * job on every rank (step 0 and 1 above), never a hang or wrong bytes.
 *
 * @param out   on success this rank owns the result (pinio_mpi_release()).
 *              On failure `*out` is NULL and nothing stays allocated, on
 *              every rank.
 * @param rep   optional, filled on success.
 * @param diag  optional; on failure the same on every rank: "rank R of N: "
 *              and the failing rank's own message, with its file and offset
 *              in `path` / `offset` and `index` its own (plan file or read).
 * @return 0, or the same negative code on every rank: the failing rank's
 *         (the lowest code, then the lowest rank, when several fail):
 *         -EINVAL (MPI not initialised, bad options, arguments or a plan
 *         that differ from rank 0's, `filters` and `shard_filters` both
 *         given under #PINIO_MPI_SHARD, split rules outside #PINIO_MPI_TP,
 *         a `world` that is not the communicator's size, a split rule's
 *         dimension out of range for a tensor it matches: the plan's
 *         message naming the tensor), #PINIO_ECHANGED (a rank's file is
 *         not rank 0's: size, header or sampled data), #PINIO_EDIGESTS,
 *         #PINIO_EFORMAT (a sha256 mismatch), a plan's or the
 *         engine's errors, -ENOMEM, -EOVERFLOW (a plan past 8 TiB at 4 KiB
 *         alignment), -EPROTO (an MPI call failed; the message has MPI's);
 *         #PINIO_MPI_NODE: the errors of memfd_create/ftruncate/mmap on a
 *         leader, of opening the leader's /proc/PID/fd/N on another local
 *         rank (-EACCES where /proc hides other processes).
 *
 * #PINIO_MPI_NODE memory: each local rank maps the node's copy; it is freed
 * when the last rank's last view and checkpoint are released. It is
 * writable through pinio_view_data_mut(): a write shows on every local rank.
 */
PINIO_API int pinio_mpi_load(MPI_Comm comm, const char *const *paths, size_t npaths,
                             const pinio_mpi_opts *opts, pinio_mpi_checkpoint **out,
                             pinio_mpi_report *rep, pinio_diag *diag);

/** Frees this rank's result (not collective). Views handed out stay valid. NULL is a no-op. */
PINIO_API void pinio_mpi_release(pinio_mpi_checkpoint *cp);

/** Tensors this rank holds. */
PINIO_API size_t pinio_mpi_count(const pinio_mpi_checkpoint *cp);

/** Held tensor `i` (plan order); NULL when out of range. Valid while `cp` lives.
 *  #PINIO_MPI_TP: this rank's slice of plan tensor `i` (pinio_plan_tensor's
 *  slice fields), its `dest_offset` the slice's place in this rank's memory
 *  (slices packed back to back, each 64-byte aligned). */
PINIO_API const pinio_plan_tensor *pinio_mpi_tensor(const pinio_mpi_checkpoint *cp, size_t i);

/**
 * A view of held tensor `i`'s bytes (zero-copy: one more reference on the
 * rank's memory, which lives until the last view and the checkpoint are
 * released). @return 0, or -ERANGE.
 */
PINIO_API int pinio_mpi_tensor_view(const pinio_mpi_checkpoint *cp, size_t i, pinio_view *out);

/** The plan every rank built (file list, headers, reads); valid while `cp` lives. */
PINIO_API const pinio_plan *pinio_mpi_plan(const pinio_mpi_checkpoint *cp);

/** The SHA-256 of plan file `i` as 64 hex digits, the same on every rank,
 *  when the load verified; else NULL. Valid while `cp` lives. */
PINIO_API const char *pinio_mpi_sha256(const pinio_mpi_checkpoint *cp, size_t i);

/** Storage bytes read by rank `r` (every rank knows every rank's); 0 when out of range. */
PINIO_API uint64_t pinio_mpi_rank_read_bytes(const pinio_mpi_checkpoint *cp, int r);

/** "replicate", "shard", "node", "tp"; NULL for an unknown value. */
PINIO_API const char *pinio_mpi_policy_name(pinio_mpi_policy p);

/** "auto", "allgatherv", "bcast", "alltoallv", "shared"; NULL for an unknown value. */
PINIO_API const char *pinio_mpi_exchange_name(pinio_mpi_exchange x);

/* ---- pinio_mpi_bench_run(): pinio_bench across the ranks of a job -------- */

/** How the ranks of pinio_mpi_bench_run() share the target (IOR's modes). */
typedef enum pinio_mpi_bench_layout {
    /** Every rank uses the target as given, the same bytes (cache and
     *  contention studies). */
    PINIO_MPI_BENCH_SAME = 0,
    /** File per process: "$rank" and "$host" in each path are replaced by
     *  the rank's index and host name ("${rank}" and "${host}" too). */
    PINIO_MPI_BENCH_PER_RANK,
    /** One target split by rank (IOR's shared file): rank r uses
     *  [offset + r x size, offset + (r + 1) x size) of it; `size` must be
     *  set (each rank's share). */
    PINIO_MPI_BENCH_SHARED,
} pinio_mpi_bench_layout;

/** Options of pinio_mpi_bench_run() beyond the run's own. Start from
 *  pinio_mpi_bench_opts_default(). */
typedef struct pinio_mpi_bench_opts {
    size_t struct_size;             /**< set by pinio_mpi_bench_opts_default() */
    pinio_mpi_bench_layout layout;  /**< SAME */
    /** IOR's -C (task reordering): rank r takes the files (PER_RANK: "$rank"
     *  and "$host" of rank r + k) or the region (SHARED) of rank (r + k) mod
     *  n, so that a read after a write never finds its own page cache. k =
     *  `reorder`; -1: the number of ranks on rank 0's host (the next host's
     *  ranks, as IOR's default); 0: none. */
    int reorder;
    /** Measure every rank's clock offset with the ping exchange, even on
     *  rank 0's host (where CLOCK_MONOTONIC is one clock and the offset is
     *  taken as 0 otherwise). For tests. */
    bool clock_ping;
    /** Optional, on rank 0: called about once a second with the whole job's
     *  bytes and requests (every rank's latest counts, sent to rank 0 as
     *  they come); total_bytes the job's for a one-pass run. Nonzero return
     *  stops rank 0's run (-ECANCELED on every rank). Other ranks' progress
     *  fields are ignored. */
    pinio_progress_fn progress;
    void *progress_ctx;
    /** Optional, on rank 0: an array of the communicator's size the job
     *  keeps each rank's latest done bytes in, updated before each progress
     *  call (per-rank detail). */
    uint64_t *live_rank_bytes;
    /** Optional, on any rank: 3 x #PINIO_BENCH_HIST_BUCKETS counters filled
     *  with this rank's own latency histograms (as pinio_bench_opts::lat_hist)
     *  when the job succeeds: what rank 0's merged one is the sum of. */
    uint64_t *rank_lat_hist;
} pinio_mpi_bench_opts;

/** Fills `*o` with the defaults noted above. */
static inline void pinio_mpi_bench_opts_default(pinio_mpi_bench_opts *o);

/** What pinio_mpi_bench_opts_default() calls (first `size` bytes). */
PINIO_API void pinio_mpi_bench_opts_init(pinio_mpi_bench_opts *o, size_t size);

static inline void pinio_mpi_bench_opts_default(pinio_mpi_bench_opts *o)
{
    pinio_mpi_bench_opts_init(o, sizeof(*o));
}

/** What one rank of pinio_mpi_bench_run() did. Times are seconds on the
 *  common clock (rank 0's CLOCK_MONOTONIC), counted from the job's first
 *  start: the earliest first issue of any rank. */
typedef struct pinio_mpi_bench_rank {
    int rank;
    char host[64];
    char path[256];          /**< its (first) target, names substituted */
    uint64_t offset;         /**< where its region of the target starts */
    int data_of;             /**< the rank whose file or region it used (reorder) */
    uint64_t bytes, ios;
    double start_s, end_s;   /**< its first issue and last completion */
    double bytes_per_s, iops; /**< over its own end_s - start_s */
    double cpu_user_s, cpu_sys_s;
    pinio_bench_lat lat;     /**< its own latencies (percentiles of its requests) */
    uint64_t s3_requests, s3_retries; /**< object targets: HTTP requests and retries
                                           (5xx and 429/SlowDown answers, resets) */
    double clock_offset_s;   /**< its CLOCK_MONOTONIC minus rank 0's */
    double clock_rtt_s;      /**< the round trip the offset was measured over (0: not measured) */
    bool created;            /**< its run made (and filled) its file */
    /** Object targets: its answers asking to slow down (429, 503,
     *  SlowDown, ServerBusy), as pinio_bench_result::s3_throttled. */
    uint64_t s3_throttled;
} pinio_mpi_bench_rank;

/** The job's result, on rank 0 (other ranks: `nranks` and the agreed
 *  code only, `ranks` NULL). */
typedef struct pinio_mpi_bench_result {
    /** The job as one run, in pinio_bench_result's fields: bytes, ios,
     *  cpu and s3 counters summed over the ranks; seconds = last end -
     *  first start on the common clock, bytes_per_s and iops over it;
     *  latencies (every percentile, min, max, mean, stdev) over all ranks'
     *  requests, from their histograms summed bucket by bucket; features,
     *  batch and file fields rank 0's; t_first_s and t_last_s on rank 0's
     *  clock. read, write and trim: bytes, ios and rates summed; a
     *  direction's lat is the merged one when it is the workload's only
     *  direction, else empty (the histograms come back over every
     *  direction), and so are its slat and clat; its interval samples are
     *  empty. */
    pinio_bench_result job;
    int nranks, nhosts;
    /** Stonewall figures: when the first and the last rank finished, s
     *  after the first start (last_done_s is job.seconds), and the job's
     *  bytes per second until the first finished (every rank's bytes at
     *  that time, taken at its own mean rate over its run). */
    double first_done_s, last_done_s;
    double first_done_bytes_per_s;
    /** The ranks' own bandwidths summed, as users sum fio outputs: never
     *  below job.bytes_per_s (each rank's run lies within the job's). */
    double sum_rank_bytes_per_s;
    /** How the clocks were put on one: "monotonic" (one host: one kernel's
     *  CLOCK_MONOTONIC) or "monotonic+ping" (offsets measured). */
    char clock[24];
    /** Rank 0: the merged latency histograms over every rank's requests,
     *  as pinio_bench_opts::lat_hist (lat, slat, clat: 3 x
     *  #PINIO_BENCH_HIST_BUCKETS counters). */
    uint64_t *lat_hist;
    /** Rank 0: nranks entries in rank order. */
    pinio_mpi_bench_rank *ranks;
} pinio_mpi_bench_result;

/**
 * Collective over `comm`: every rank runs pinio_bench_run() with `o` (its
 * targets placed by `mo->layout` and `mo->reorder`), all starting after one
 * barrier, and rank 0 gets one result for the job. `o`'s callbacks are the
 * caller's on each rank (progress: see `mo->progress`); `o->lat_hist` and
 * `o->job_results` are ignored. A read of a missing file creates it, as
 * pinio_bench_run() does, before the barrier.
 *
 * The time series: when rank 0's `o->interval_fn` is set, every rank keeps
 * its run's intervals (the sums over its jobs; `o->interval_ms` must be
 * rank 0's), and after a successful job rank 0's interval_fn alone is
 * called (not live; other ranks' never) with the job's series on the
 * common clock, time_ms counted from the job's first start: for each
 * interval of the job's grid (every `interval_ms`, the last one cut at the
 * last end) and direction, in time order, one row per rank whose own
 * interval ended within it (`job` = the rank; its time_ms its own end put
 * on the common clock; its own figures), then the sum over them (`job` =
 * -1; bytes and ios summed, rates over the grid interval, lat_mean_ns
 * weighted by ios, lat_p50_ns and lat_p99_ns 0: percentiles of different
 * ranks' intervals do not merge). The sum rows' bytes add up to the job's
 * bytes exactly. A nonzero return stops the calls.
 *
 * The common clock: each rank's run start and end (CLOCK_MONOTONIC) are
 * put on rank 0's clock by offsets measured with a ping exchange (the
 * round trip with the least delay of 8; the offset's error is at most half
 * of it), except for ranks on rank 0's host, whose clock is rank 0's.
 *
 * A rank whose run fails (or whose caller's progress callback stops it)
 * stops the job: rank 0 hears of it through the progress messages and
 * tells every rank to stop (the others' runs end with -ECANCELED, which
 * the agreement does not count against the failure), so a time-based job
 * does not run out its time around one failed rank.
 *
 * @param res   on success filled (rank 0: everything; others: nranks);
 *              release with pinio_mpi_bench_result_free(), also after a
 *              failure (then nothing is held).
 * @param diag  optional; on failure the same on every rank: "rank R of N: "
 *              and the failing rank's message (its file, offset).
 * @return 0, or the same negative code on every rank: the failing rank's
 *         (lowest code, then lowest rank): pinio_bench_run()'s codes,
 *         -EINVAL (MPI not initialised, options that differ from rank 0's,
 *         SHARED without size), -ENOMEM (also for the time series' rows),
 *         -EPROTO (an MPI call failed).
 */
PINIO_API int pinio_mpi_bench_run(MPI_Comm comm, const pinio_bench_opts *o,
                                  const pinio_mpi_bench_opts *mo, pinio_mpi_bench_result *res,
                                  pinio_diag *diag);

/** Frees what a result holds (ranks, lat_hist) and zeroes them. NULL: no-op. */
PINIO_API void pinio_mpi_bench_result_free(pinio_mpi_bench_result *res);

#ifdef __cplusplus
}
#endif

#endif /* PINIO_MPI_H */
