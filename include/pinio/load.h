/**
 * @file load.h
 * @brief pinio_load: a safetensors checkpoint into pinned, NUMA-local memory,
 *        with every tensor a zero-copy view.
 *
 * Inputs: one `.safetensors` file, a directory (its
 * `model.safetensors.index.json` when present, else every `*.safetensors` in
 * it), or an index file. The index's `weight_map` is an allowlist per shard:
 * a tensor present in a shard but absent from the map is ignored (counted in
 * pinio_load_report::unindexed); a shard or tensor the map names but that is
 * missing is an error; the same tensor in two shards is an error.
 *
 * A load (resident mode) is a plan (plan.h: headers validated, tensors
 * selected before any data I/O, reads laid out) executed into one arena:
 * the arena is allocated on the chosen NUMA node and laid out as the plan,
 * read through the io_uring engine (O_DIRECT for files not in the page
 * cache, buffered for files that are) while a helper thread faults it in
 * ahead of the reads; every wanted byte is checked to have arrived, the
 * placement verified, the arena locked in RAM (mlock, when RLIMIT_MEMLOCK
 * allows), and tensors handed out as views of it. Peak memory is the
 * selected bytes plus alignment padding and small merged holes.
 *
 * The arena is read-only: tensors are `const` views, and a #pinio_bytes
 * taken from a checkpoint copies on its first mutable access (the
 * checkpoint keeps its own reference), so no write ever reaches the arena
 * or another holder's tensor.
 *
 * Lifetime: the arena is freed when the checkpoint and every tensor
 * #pinio_bytes taken from it have been released, in any order. Tensor
 * pointers obtained with pinio_tensor_data() live as long as the checkpoint.
 *
 * Threads: a loaded checkpoint is immutable; its accessors may be called from
 * any thread. Tensor bytes taken from it follow bytes.h's rules.
 */
#ifndef PINIO_LOAD_H
#define PINIO_LOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinio/bytes.h"
#include "pinio/common.h"
#include "pinio/plan.h"
#include "pinio/ring.h"
#include "pinio/safetensors.h"

#ifdef __cplusplus
extern "C" {
#endif

/** `node` value: the NUMA node of the files' block device (else the caller's node). */
#define PINIO_NODE_AUTO (-2)
/** `node` value: no placement (any node). */
#define PINIO_NODE_ANY (-1)

/** Options of pinio_load(). Start from pinio_load_opts_default(). */
typedef struct pinio_load_opts {
    size_t struct_size;          /**< sizeof(pinio_load_opts), set by the defaults function */
    /** Tensor selection, applied before any data I/O. Each pattern is an exact
     *  name, a prefix of dotted components ("model.layers.0" selects
     *  "model.layers.0.mlp.up_proj.weight"), or a glob (fnmatch: `*`, `?`, `[...]`).
     *  A tensor is selected when any pattern matches; no patterns = all. */
    const char *const *filters;
    size_t nfilters;
    int node;                    /**< PINIO_NODE_AUTO (default), PINIO_NODE_ANY, or a node */
    unsigned queue_depth;        /**< 0 = the engine's default */
    size_t request_size;         /**< 0 = the engine's default */
    pinio_direct_policy direct;  /**< O_DIRECT policy (AUTO: where the file system allows) */
    pinio_backend backend;       /**< force a rung of the engine's ladder (tests); AUTO */
    pinio_cache_policy cache;    /**< AUTO by default */
    bool verify;                 /**< compute each file's SHA-256 (the hub's LFS object id) */
    /** With verify: expected lowercase hex digests, one per input file in
     *  resolution order (NULL entries or a NULL array: nothing to compare). */
    const char *const *expected_sha256;
    size_t nexpected;
    /** Optional: called after each batch of reads (1/16 of the load, 16 MiB to
     *  1 GiB), bytes counted as read from storage; see #pinio_progress_fn. */
    pinio_progress_fn progress;
    void *progress_ctx;
    uint8_t reserved[64];        /**< zero */
} pinio_load_opts;

/** Fills `*opts` with the defaults described field by field above. */
static inline void pinio_load_opts_default(pinio_load_opts *opts);

/**
 * What pinio_load_opts_default() calls: fills the first `size` bytes of `*opts`
 * with the defaults (struct_size = `size`; fields past this library's
 * struct stay zero). Inline callers pass their header's sizeof, so a
 * program built against an older, smaller struct is never written past.
 */
PINIO_API void pinio_load_opts_init(pinio_load_opts *opts, size_t size);

static inline void pinio_load_opts_default(pinio_load_opts *opts)
{
    pinio_load_opts_init(opts, sizeof(*opts));
}

/** A loaded checkpoint. Opaque. */
typedef struct pinio_checkpoint pinio_checkpoint;

/** One tensor of a loaded checkpoint; pointers valid while the checkpoint lives. */
typedef struct pinio_tensor {
    const char *name;
    pinio_dtype dtype;
    unsigned rank;
    const uint64_t *shape;
    uint64_t nbytes;
    const uint8_t *data;   /**< in the pinned arena; valid while the checkpoint lives */
    unsigned file;         /**< index of the file it came from (pinio_checkpoint_file()) */
    uint64_t file_offset;  /**< absolute offset in that file */
    uint64_t align;        /**< largest power of two dividing `data`'s address, capped at 4096 */
} pinio_tensor;

/** What a load did, for reports and `--json`. */
typedef struct pinio_load_report {
    size_t files;              /**< input files (shards) */
    size_t tensors;            /**< tensors selected and loaded */
    size_t skipped;            /**< tensors not selected by the filters */
    size_t unindexed;          /**< tensors of a shard that the index does not map (ignored) */
    size_t misaligned;         /**< loaded tensors whose data is not aligned to their element size */
    uint64_t bytes;            /**< tensor bytes loaded */
    uint64_t read_bytes;       /**< bytes read from storage (alignment and merged holes included) */
    uint64_t arena_bytes;      /**< pinned arena size */
    double seconds;            /**< wall time of the whole load (verification included,
                                    PINIO_CACHE_COLD's page dropping excluded) */
    double drop_seconds;       /**< time PINIO_CACHE_COLD spent dropping cached pages
                                    (writeback of dirty pages first) */
    double verify_seconds;     /**< time SHA-256 added after the last read (part of `seconds`);
                                    hashing runs alongside the reads on a second CPU */
    double io_seconds;         /**< wall time of the data reads */
    size_t files_direct;       /**< files read with O_DIRECT */
    size_t files_buffered;     /**< files read through the page cache */
    pinio_backend backend;     /**< the rung the data reads used: FIXED_DIRECT only when reads
                                    went to io_uring-registered memory (READ_FIXED) */
    bool locked;               /**< the arena is locked in RAM (mlock) for the checkpoint's life */
    bool registered;           /**< the arena was registered with io_uring for the reads
                                    (reads landed by READ_FIXED) */
    int node;                  /**< NUMA node the arena was placed on (-1: none) */
    bool node_verified;        /**< placement checked page by page after pinning */
    bool verified;             /**< SHA-256 computed (and matched, when expected) */
    uint64_t verify_landed_bytes; /**< bytes the digests took from the arena: what the reads
                                       brought, hashed where it landed */
    uint64_t verify_reread_bytes; /**< bytes the digests read again from the validated files:
                                       headers, unselected tensors, alignment tails */
    char io_path[256];         /**< one line: the I/O path that ran and why */
    char cache[256];           /**< one line: per-file cache decisions and why */
    char memory[256];          /**< one line: whether the arena is locked and registered, and
                                    why not */
    unsigned setup_flags;      /**< io_uring setup flags in force for the data reads */
    uint64_t fixed_ops;        /**< reads issued as READ_FIXED (into registered memory) */
    uint64_t plain_ops;        /**< reads issued as plain READ / pread */
} pinio_load_report;

/**
 * Loads a checkpoint.
 *
 * @param paths   `npaths` inputs (files, directories, index files).
 * @param opts    NULL = defaults; read during the call only.
 * @param out     on success the caller owns the checkpoint (pinio_checkpoint_release()).
 *                On failure `*out` is NULL and nothing is left allocated or open:
 *                no tensor is ever handed out from a failed load.
 * @param diag    optional; one line naming the file and the offset or tensor.
 * @return 0; PINIO_EFORMAT (invalid header or index), PINIO_ECHANGED (a file
 *         shorter or different than its header said when read), -ENOENT
 *         (missing file, shard or tensor), -EEXIST (a tensor in two shards),
 *         -EINVAL (bad options), -ECANCELED (progress callback), -EIO, -ENOMEM,
 *         PINIO_EFORMAT with "sha256 mismatch" when verification fails.
 */
PINIO_API int pinio_load(const char *const *paths, size_t npaths, const pinio_load_opts *opts,
                         pinio_checkpoint **out, pinio_diag *diag);

/** Releases the caller's reference; the arena lives on while tensor bytes hold it. NULL is a no-op. */
PINIO_API void pinio_checkpoint_release(pinio_checkpoint *cp);

/** Number of loaded tensors. */
PINIO_API size_t pinio_checkpoint_count(const pinio_checkpoint *cp);

/** Tensor `i` in file order (files in resolution order); NULL when out of range. */
PINIO_API const pinio_tensor *pinio_checkpoint_tensor(const pinio_checkpoint *cp, size_t i);

/** Tensor by exact name; NULL when not loaded. O(log n). */
PINIO_API const pinio_tensor *pinio_checkpoint_find(const pinio_checkpoint *cp, const char *name);

/** Number of input files, and the path of file `i` (NULL when out of range). */
PINIO_API size_t pinio_checkpoint_file_count(const pinio_checkpoint *cp);
PINIO_API const char *pinio_checkpoint_file(const pinio_checkpoint *cp, size_t i);

/** The SHA-256 of file `i` as 64 hex digits, when the load verified; else NULL. */
PINIO_API const char *pinio_checkpoint_sha256(const pinio_checkpoint *cp, size_t i);

/** What the load did. */
PINIO_API void pinio_checkpoint_report(const pinio_checkpoint *cp, pinio_load_report *out);

/**
 * The validated header of file `i` (tensors, `__metadata__`), kept from the
 * load: nothing is parsed again. NULL when out of range. Valid while the
 * checkpoint lives.
 */
PINIO_API const pinio_st *pinio_checkpoint_header(const pinio_checkpoint *cp, size_t i);

/**
 * The `__metadata__` value of `key` (NUL-terminated): the first file (in
 * resolution order) whose header has it. NULL when no file has it. Valid
 * while the checkpoint lives. Per-file metadata: pinio_checkpoint_header().
 */
PINIO_API const char *pinio_checkpoint_metadata(const pinio_checkpoint *cp, const char *key);

/**
 * The bytes of tensor `i` as a #pinio_bytes viewing the arena without a
 * copy (it holds its own reference on the arena, so it may outlive the
 * checkpoint). Its property says where the bytes live: PINIO_PROP_PINNED
 * when the arena is locked or registered (a GPU backend may DMA from it
 * directly), PINIO_PROP_NATIVE otherwise (pageable memory). The arena is
 * read-only: a mutable access copies first.
 * @return 0 with `*out` owned by the caller (pinio_bytes_free()); -EINVAL
 *         (NULL argument), -ERANGE for a bad index, -ENOMEM. On failure
 *         `*out` is untouched and no reference is taken.
 */
PINIO_API int pinio_checkpoint_tensor_bytes(const pinio_checkpoint *cp, size_t i,
                                            pinio_bytes **out);

/**
 * As pinio_checkpoint_tensor_bytes(), by exact tensor name.
 * @return 0; -ENOENT when no loaded tensor has that name; as above.
 */
PINIO_API int pinio_checkpoint_get_bytes(const pinio_checkpoint *cp, const char *name,
                                         pinio_bytes **out);

#ifdef __cplusplus
}
#endif

#endif /* PINIO_LOAD_H */
