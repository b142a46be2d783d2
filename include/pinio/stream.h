/**
 * @file stream.h
 * @brief Streaming mode: a checkpoint through a bounded ring of registered
 *        staging slots into a sink (sink.h), whatever its size.
 *
 * The resident mode (load.h) reads a checkpoint into one arena as large as
 * the selection. A stream instead reads it through `slots` staging slots of
 * `slot_size` bytes each (default 4 x 32 MiB), carved from the pinned pool
 * on the files' NUMA node and registered with io_uring once (reads land by
 * READ_FIXED); the plan is built with its segment set to the slot size, so
 * no read crosses a slot. Reads are executed in file order; each landed
 * read goes to the sink, and a slot is read into again only after the sink
 * is done with it. Peak host memory is the ring, not the checkpoint.
 *
 * Threads: everything runs on the calling thread (the engine's own workers
 * aside); the sink is called from it.
 */
#ifndef PINIO_STREAM_H
#define PINIO_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinio/common.h"
#include "pinio/load.h"
#include "pinio/plan.h"
#include "pinio/sink.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Default staging slot size. */
#define PINIO_STREAM_SLOT_DEFAULT ((size_t)32 << 20)
/** Default number of staging slots. */
#define PINIO_STREAM_SLOTS_DEFAULT 4u

/**
 * Called by a verified stream once per input file, in plan order, with
 * its SHA-256 as 64 lowercase hex digits (`path` and `hex` valid during the
 * call only), after every digest matched what was expected.
 */
typedef void (*pinio_stream_sha256_fn)(void *ctx, size_t file, const char *path, const char *hex);

/** Options of pinio_stream(). Start from pinio_stream_opts_default(). */
typedef struct pinio_stream_opts {
    size_t struct_size;          /**< sizeof(pinio_stream_opts), set by the defaults function */
    /** Bytes per slot: a power of two, 64 KiB to 1 GiB; 0 = 32 MiB. */
    size_t slot_size;
    /** Slots in the ring, 2 to 1024; 0 = 4. */
    unsigned slots;
    /** Tensor selection, as pinio_plan_opts::filters. */
    const char *const *filters;
    size_t nfilters;
    int node;                    /**< PINIO_NODE_AUTO (default), PINIO_NODE_ANY, or a node */
    pinio_cache_policy cache;    /**< AUTO */
    pinio_direct_policy direct;  /**< O_DIRECT policy of the reads; AUTO */
    unsigned queue_depth;        /**< 0 = the engine's default */
    pinio_backend backend;       /**< force a rung of the engine's ladder (tests); AUTO */
    /** Optional: called after each batch of reads. */
    pinio_progress_fn progress;
    void *progress_ctx;
    /** Compute each input file's SHA-256 (the hub's LFS object id), with
     *  any sink: the bytes each read brought are hashed in their staging
     *  slot before the slot is reused (so a byte changed on the way in
     *  changes the digest); what no read brought (the header, unselected
     *  tensors of a filtered stream) is read again from the file. */
    bool verify;
    /** With verify: expected hex digests, one per input file in plan
     *  order (pinio_plan_file_at()); NULL entries leave a file unchecked.
     *  When nexpected is not 0 it must equal the number of files: otherwise
     *  #PINIO_EDIGESTS, naming both counts, before any data is read (as
     *  pinio_load_opts.expected_sha256). A mismatch fails the stream with
     *  PINIO_EFORMAT, "sha256 mismatch" and the file in `diag`, and the
     *  sink is closed as after any failure (nothing published). */
    const char *const *expected_sha256;
    size_t nexpected;
    /** Optional, with verify: receives each file's digest. */
    pinio_stream_sha256_fn sha256_fn;
    void *sha256_ctx;
    /** Tensor parallelism: slices and split rules, as pinio_plan_opts'
     *  fields of these names (plan.h): each sliced tensor reaches the sink
     *  as its slice, and only it. Its fragments (sink.h) count their offsets
     *  in the slice packed contiguous, shaped like the slice, so the GPU
     *  sinks land it contiguous at the tensor's address and the host sink's
     *  callback sees where each byte goes; a strided slice (any dimension
     *  but the first) arrives run by run, each run in as many fragments as
     *  reads hold it. The bytes read beyond the slices (alignment, holes
     *  read through within `max_overread`) are reported, never handed to
     *  the sink. The file sink, which copies files, refuses a sliced plan.
     *  With `verify`, each file's digest is still the whole file's: the
     *  bytes of the other ranks' slices, which no read brought, are read
     *  again from the file to hash them (verify_reread_bytes). */
    const pinio_slice *slices;
    size_t nslices;
    const pinio_split_rule *split;
    size_t nsplit;
    uint32_t rank;               /**< with `split`: this process's rank, below `world` */
    uint32_t world;              /**< with `split`: the number of ranks, at least 1 */
    double max_overread;         /**< as pinio_plan_opts::max_overread; 0 = 1/32 */
    /** The filters are exact tensor names (pinio_plan_opts::filters_exact). */
    bool filters_exact;
    /** Optional: polled during the waits of object (s3://) requests, see
     *  #pinio_stop_fn; nonzero stops the call with -ECANCELED. */
    pinio_stop_fn stop;
    void *stop_ctx;
} pinio_stream_opts;

/** Fills `*opts` with the defaults described field by field above. */
static inline void pinio_stream_opts_default(pinio_stream_opts *opts);

/**
 * What pinio_stream_opts_default() calls: fills the first `size` bytes of
 * `*opts` with the defaults (struct_size = `size`; fields past this
 * library's struct stay zero).
 */
PINIO_API void pinio_stream_opts_init(pinio_stream_opts *opts, size_t size);

static inline void pinio_stream_opts_default(pinio_stream_opts *opts)
{
    pinio_stream_opts_init(opts, sizeof(*opts));
}

/** What a stream did. */
typedef struct pinio_stream_report {
    size_t files;              /**< input files */
    size_t tensors;            /**< tensors selected */
    uint64_t bytes;            /**< selected tensor bytes */
    uint64_t read_bytes;       /**< bytes read from storage */
    size_t reads;              /**< plan reads (each fits one slot) */
    unsigned slots;            /**< the ring */
    size_t slot_size;
    uint64_t ring_bytes;       /**< slots x slot_size: the staging memory */
    bool registered;           /**< reads landed in the slots by READ_FIXED */
    int node;                  /**< NUMA node of the slots (-1: none) */
    size_t slot_waits;         /**< times a read waited for the sink to free a slot */
    double seconds;            /**< wall time, plan to sink finish */
    double io_seconds;         /**< wall time of the reads (sink work in between included) */
    double sink_seconds;       /**< time spent in the sink's chunk/slot_wait/finish */
    char io_path[256];         /**< one line: the I/O path that ran and why */
    bool verified;             /**< SHA-256 computed (and matched, when expected) */
    double verify_seconds;     /**< time spent hashing and re-reading (part of `seconds`) */
    uint64_t verify_landed_bytes; /**< bytes hashed in the staging slots, as they landed */
    uint64_t verify_reread_bytes; /**< bytes no read brought, read again from the files */
    /** What the slices cost (plan.h; all zero but the byte counts without
     *  split or slices): `strided` slices were handed to the sink run by
     *  run; `overread_bytes` (alignment and holes read through) were read
     *  and never handed to the sink: `bytes` + `overread_bytes` =
     *  `read_bytes`. */
    pinio_plan_slice_info slices;
} pinio_stream_report;

/**
 * Streams the selected tensors of `paths` (files, directories, index
 * files, as pinio_plan_create()) through the staging ring into `sink`.
 *
 * @param sink  the sink table (e.g. &pinio_sink_host); `cfg` its config.
 * @param rep   optional, filled on success.
 * @param diag  optional; names the file and offset, or the sink's failure.
 * @return 0; -EINVAL (bad options or arguments, a bad slice or split rule
 *         naming the tensor, a sliced plan to the file sink), -ENOENT (a
 *         slice naming no selected tensor), PINIO_EDIGESTS (with verify,
 *         expected digests not one per file), -ENOMEM (the ring), the
 *         plan's and the engine's errors, or the sink's code. After a
 *         failure the sink has been closed with `ok` false; nothing is left
 *         allocated.
 */
PINIO_API int pinio_stream(const char *const *paths, size_t npaths, const pinio_stream_opts *opts,
                           const pinio_sink *sink, const void *cfg, pinio_stream_report *rep,
                           pinio_diag *diag);

/**
 * A sink fed from host memory instead of reads: what a stream would hand
 * `sink` for `plan`, with each read's bytes taken from `src` rather than
 * the files. For bytes already in memory that should reach a device
 * through the same sink: a tensor-parallel rank's slices after an MPI or
 * process-group exchange (pinio_mpi_load() with #PINIO_MPI_TP), copied to
 * its GPU with #pinio_sink_cuda.
 *
 * The sink is opened on `plan`, then each plan read, in plan order, is laid
 * out in a slot of a ring of `nslots` slots of `slot_size` bytes (the
 * call's own, from the pinned pool as a stream's ring: on the node the
 * sink's prefer_node asks for, a GPU's, each slot aligned to its size up
 * to 2 MiB) as the read would have landed it:
 * each tensor's bytes at their file offsets, a slice's runs where they lie
 * in the file, zeros in between; handed over as the chunk of that read
 * (sink.h; a slot is filled again only after the sink's slot_wait), then
 * finished and closed as pinio_stream() does. The files are never read:
 * the plan's headers are all it needs.
 *
 * @param plan   the tensors and reads; every read at most `slot_size`
 *               bytes (a plan built with pinio_plan_opts::segment <=
 *               `slot_size`). Read during the call only.
 * @param src    `nsrc` pointers, one per plan tensor (pinio_plan_tensor_at()
 *               order): its bytes, pinio_plan_tensor::nbytes of them, a
 *               slice packed contiguous as pinio_plan_gather() packs it; a
 *               NULL entry sends zeros. Read during the call only.
 * @param nsrc   must be the plan's tensor count.
 * @param slot_size  a power of two, 64 KiB to 1 GiB.
 * @param nslots 2 to 1024.
 * @param sink   the sink table; `cfg` its config (e.g. a
 *               #pinio_sink_gpu_cfg, whose arena goes to its `out`).
 * @param diag   optional; names the failure.
 * @return 0, with the sink finished and closed; -EINVAL (bad arguments, a
 *         read larger than a slot, naming it), -ENOMEM (the ring, or a ring
 *         larger than the memory left, as pinio_stream() refuses it), or the
 *         sink's code. After a failure the sink has been closed with `ok`
 *         false (when it had opened) and nothing is left allocated.
 */
PINIO_API int pinio_stream_from_memory(const pinio_plan *plan, const void *const *src,
                                       size_t nsrc, size_t slot_size, unsigned nslots,
                                       const pinio_sink *sink, const void *cfg,
                                       pinio_diag *diag);

#ifdef __cplusplus
}
#endif

#endif /* PINIO_STREAM_H */
