/**
 * @file plan.h
 * @brief pinio_plan: what a load reads, apart from where it lands.
 *
 * A plan is built without reading any tensor data: the inputs are resolved
 * (files, directories of shards, index files), every file is opened once
 * and its header read and validated through that descriptor, the selection
 * is applied (the index's allowlist, then the filters), and the wanted byte
 * ranges are laid out into aligned, merged reads. The plan keeps the
 * validated descriptors open: its execution reads through them, never by
 * opening a path again, so a file renamed over a path after its header was
 * validated is not the one read.
 *
 * Layout: reads start at file offsets and destination offsets that are
 * multiples of the plan's alignment (so O_DIRECT can read straight into a
 * destination laid out like the plan), are laid out back to back in
 * (file, offset) order, merge neighbouring ranges when the hole between
 * them is at most `merge_gap`, and never cross a multiple of `segment` in
 * the destination (one registered buffer, one staging slot). A tensor's
 * first byte lies at `dest_offset` of a destination laid out that way.
 *
 * Slices (pinio_plan_opts::slices, split): a selected tensor may be read as
 * a slice of it (torch.chunk's rank r of n along a dimension, or a box).
 * A dimension-0 slice is one byte range; another is equal runs, laid out
 * like any range (holes between them read through within max_overread)
 * and packed contiguous by pinio_plan_gather() once its reads have landed.
 * The plan's tensors then describe the slices (shape, bytes, offsets).
 *
 * Execution (pinio_plan_execute()) reads the plan's reads, or a sub-range
 * of them, into memory a destination chooses (#pinio_dest_ops): the
 * resident loader (load.h) claims its arena; a stream claims a staging
 * slot; an MPI rank executes its stripe.
 *
 * Threads: a plan is immutable once built except for the per-file
 * descriptors its execution uses; execute it from one thread at a time.
 * Accessors may be called from any thread.
 */
#ifndef PINIO_PLAN_H
#define PINIO_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinio/common.h"
#include "pinio/ring.h"
#include "pinio/safetensors.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Page-cache policy: how each file of a plan is read. */
typedef enum pinio_cache_policy {
    PINIO_CACHE_AUTO = 0, /**< buffered for files mostly (90 %) in the page cache, else O_DIRECT */
    PINIO_CACHE_COLD,     /**< O_DIRECT; pinio_plan_drop_cache() drops the cached pages first */
    PINIO_CACHE_HOT,      /**< buffered whatever the cache holds */
} pinio_cache_policy;

/**
 * How a tensor is sliced (#pinio_slice::kind).
 *
 * A slice keeps the tensor's rank and lies contiguous in the destination,
 * shaped like the slice, in row-major order (pinio_plan_tensor::shape is the
 * slice's shape). A slice along dimension 0 (or one whose leading dimensions
 * all have extent 1) is one contiguous byte range of the file; any other is
 * `runs` equal runs of bytes, read as the layout merges them (see
 * pinio_plan_opts::max_overread) and packed together by
 * pinio_plan_gather() once they have landed.
 */
typedef enum pinio_slice_kind {
    PINIO_SLICE_WHOLE = 0, /**< the whole tensor (as if not listed) */
    /** torch.chunk(t, world, dim)[rank]: chunks of ceil(size / world) along
     *  `dim`, the last one smaller. torch.chunk returns fewer than `world`
     *  chunks when the size is not a multiple (10 in 4: 3, 3, 3, 1; 10 in 6:
     *  five chunks of 2) or smaller than `world`; rank r then gets the empty
     *  slice at the end of the dimension (extent 0 along `dim`, the other
     *  dimensions whole), where torch.chunk(...)[r] would raise IndexError.
     *  A dimension of size 0 gives every rank an empty slice, as torch does. */
    PINIO_SLICE_CHUNK,
    /** Per dimension [start[d], stop[d]) for the first `ndim` dimensions,
     *  the later ones whole: Python's t[a:b, c:d] with steps of 1. */
    PINIO_SLICE_BOX,
} pinio_slice_kind;

/** One tensor's slice (pinio_plan_opts::slices). Strings and arrays are read
 *  during the call only. */
typedef struct pinio_slice {
    const char *name;          /**< the tensor's exact name; it must be selected */
    pinio_slice_kind kind;
    int dim;                   /**< CHUNK: the dimension; negative counts from the end (-1: last) */
    uint32_t rank, world;      /**< CHUNK: chunk `rank` of `world` (rank < world) */
    unsigned ndim;             /**< BOX: dimensions given, at most the tensor's rank */
    const uint64_t *start;     /**< BOX: `ndim` starts */
    const uint64_t *stop;      /**< BOX: `ndim` stops, start <= stop <= the dimension's size */
} pinio_slice;

/** #pinio_split_rule::dim value: the tensors the rule matches are read whole
 *  (replicated), e.g. norms before a catch-all rule. */
#define PINIO_SPLIT_WHOLE INT32_MIN

/** A split rule (pinio_plan_opts::split): sugar over #PINIO_SLICE_CHUNK. */
typedef struct pinio_split_rule {
    /** Matched as a filter (pinio_plan_opts::filters): a name it equals, a
     *  name it is a prefix of dotted components of, or, holding `*`, `?` or
     *  `[`, a name it matches as a glob (fnmatch). A rule equal to a
     *  tensor's name matches it whatever characters the name holds. */
    const char *pattern;
    /** The dimension to chunk (negative counts from the end), or #PINIO_SPLIT_WHOLE. */
    int dim;
} pinio_split_rule;

/** Options of pinio_plan_create(). Start from pinio_plan_opts_default(). */
typedef struct pinio_plan_opts {
    size_t struct_size;          /**< sizeof(pinio_plan_opts), set by the defaults function */
    /** Tensor selection, applied before any data I/O. A pattern matches the
     *  name it equals and the names it is a prefix of dotted components of
     *  ("model.layers.0" selects "model.layers.0.mlp.up_proj.weight"),
     *  character for character; one holding `*`, `?` or `[` also matches
     *  the names it matches as a glob (fnmatch: `*`, `?`, `[...]`), so a
     *  tensor named "h[0].w" is selected by its own name. A tensor is
     *  selected when any pattern matches; no patterns = all (see
     *  `filters_exact`). The strings are read during the call only. */
    const char *const *filters;
    size_t nfilters;
    pinio_cache_policy cache;    /**< AUTO */
    pinio_direct_policy direct;  /**< OFF makes every file buffered (hot); AUTO */
    /** Read alignment, a power of two: 0 = 4096 or the files' O_DIRECT
     *  alignment (statx) when that is larger. */
    uint64_t align;
    /** Holes up to this many bytes between wanted ranges are read through
     *  rather than skipped; 0 = 256 KiB. */
    uint64_t merge_gap;
    /** Reads never cross a multiple of this in the destination (a power of
     *  two >= align); 0 = 1 GiB, the kernel's limit for one registered
     *  buffer. A stream sets it to its slot size. */
    uint64_t segment;
    /** Per-tensor slices, by exact name; a name may be listed once, and must
     *  name a selected tensor (-ENOENT otherwise). They take precedence over
     *  the split rules. */
    const pinio_slice *slices;
    size_t nslices;
    /** Split rules: each selected tensor not in `slices` takes the first rule
     *  whose pattern matches its name and is read as
     *  torch.chunk(t, world, dim)[rank]; a tensor no rule matches is read
     *  whole. A rule's dimension out of range for a tensor it matches is
     *  -EINVAL naming the tensor. */
    const pinio_split_rule *split;
    size_t nsplit;
    uint32_t rank;             /**< with `split`: this process's rank, below `world` */
    uint32_t world;            /**< with `split`: the number of ranks, at least 1 */
    /** With `slices` or `split`: the bytes read beyond the slices through
     *  holes (the gaps between a slice's runs, and between ranges of
     *  different tensors, each at most `merge_gap`), as a fraction of the
     *  selected slices' bytes. Holes are read through smallest first while
     *  their sum stays within it, saving the most requests for the bytes
     *  spent; larger ones are skipped. The alignment of each read (O_DIRECT)
     *  is over-read too, and not capped. 0 = 1/32; negative: no hole is
     *  read through. Without slices the plan merges every hole up to
     *  `merge_gap`, as before. pinio_plan_get_slice_info() says what was
     *  over-read. */
    double max_overread;
    /** The filters are tensor names: a tensor is selected when its name
     *  equals one, never by a dotted prefix or a glob (a caller that holds
     *  the exact names another plan selected: "x.weight" then leaves out
     *  "x.weight.absmax"). False (default): patterns as `filters` says. */
    bool filters_exact;
    /** Optional: polled during the waits of object (s3://) requests (the
     *  listings, HEADs and header reads), see #pinio_stop_fn; nonzero stops
     *  the call with -ECANCELED. Not kept by the plan. */
    pinio_stop_fn stop;
    void *stop_ctx;
} pinio_plan_opts;

/** Fills `*opts` with the defaults described field by field above. */
static inline void pinio_plan_opts_default(pinio_plan_opts *opts);

/**
 * What pinio_plan_opts_default() calls: fills the first `size` bytes of `*opts`
 * with the defaults (struct_size = `size`; fields past this library's
 * struct stay zero). Inline callers pass their header's sizeof, so a
 * program built against an older, smaller struct is never written past.
 */
PINIO_API void pinio_plan_opts_init(pinio_plan_opts *opts, size_t size);

static inline void pinio_plan_opts_default(pinio_plan_opts *opts)
{
    pinio_plan_opts_init(opts, sizeof(*opts));
}

/** A plan. Opaque. */
typedef struct pinio_plan pinio_plan;

/** One input file of a plan; pointers valid while the plan lives. */
typedef struct pinio_plan_file {
    const char *path;          /**< as resolved (a shard's path joins the index's folder) */
    uint64_t size;             /**< file size the header was validated against */
    const pinio_st *header;    /**< the validated header (tensors, `__metadata__`) */
    bool hot;                  /**< read through the page cache (see `cache_why`) */
    const char *cache_why;     /**< why: "97% in page cache (cachestat)", "--cache hot", ... */
    int fd;                    /**< the descriptor the header was validated through, owned by
                                    the plan: read it with pread (or dup it), never close it.
                                    Whatever the path names now, this is the validated file.
                                    -1 for an object (`object`). */
    /** An object of an S3 store (`path` is s3://BUCKET/KEY): no descriptor;
     *  its bytes are read with pinio_plan_file_read(), every request pinned
     *  to the version (ETag) the header was validated from. */
    bool object;
} pinio_plan_file;

/**
 * Reads bytes [off, off + len) of input file `i` of the plan (fewer at its
 * end): pread(2) on its validated descriptor, or for an object ranged GETs
 * of the validated version, on the plan's connections; any thread may call
 * it (while pinio_plan_execute() streams the plan's objects, the executing
 * thread sends the requests, between its destination callbacks: see
 * pinio_exec_opts::object_batches). For bytes the plan's reads do not
 * bring (a header, unselected tensors).
 * @return the bytes read (0 at or past the end); -ERANGE for a bad `i`;
 *         #PINIO_ECHANGED when the object changed; the read's or the
 *         request's error (`diag` names the file and offset).
 */
PINIO_API int64_t pinio_plan_file_read(const pinio_plan *p, size_t i, void *buf, size_t len,
                                       uint64_t off, pinio_diag *diag);

/** One selected tensor; pointers valid while the plan lives. */
typedef struct pinio_plan_tensor {
    const char *name;          /**< NUL-terminated (may hold NUL: use name_len) */
    size_t name_len;
    pinio_dtype dtype;
    unsigned rank;
    const uint64_t *shape;     /**< `rank` dims */
    uint64_t nbytes;
    uint32_t file;             /**< index for pinio_plan_file_at() */
    uint64_t file_offset;      /**< absolute offset in that file */
    uint64_t dest_offset;      /**< offset of its first byte in a destination laid out as the plan */
    /* The slice (pinio_plan_opts::slices and split). For a tensor read whole,
     * `sliced` is false, `full_shape` is `shape`, `start` NULL, `full_*` equal
     * the fields above and `runs` is 1 (0 when it has no bytes). For a slice,
     * `shape`, `nbytes`, `file_offset` (its first byte) and `dest_offset`
     * are the slice's. */
    bool sliced;               /**< read as a slice of the tensor */
    const uint64_t *full_shape; /**< the tensor's shape in the file (`rank` dims) */
    const uint64_t *start;     /**< sliced: per dimension, its first index (stop = start + shape) */
    uint64_t full_offset;      /**< the whole tensor's absolute file offset */
    uint64_t full_nbytes;      /**< the whole tensor's bytes */
    /** Runs of contiguous file bytes the slice is made of: 0 when empty, 1
     *  when contiguous (the slice is [file_offset, file_offset + nbytes)).
     *  More than 1: the runs land where the layout put them, apart, and
     *  pinio_plan_gather() packs them from `dest_offset` on. */
    uint64_t runs;
    uint64_t run_bytes;        /**< bytes of each run (nbytes = runs * run_bytes) */
} pinio_plan_tensor;

/** One aligned read of a plan. */
typedef struct pinio_plan_read {
    uint32_t file;             /**< index for pinio_plan_file_at() */
    uint64_t offset;           /**< file offset, a multiple of the plan's alignment */
    uint64_t len;              /**< bytes, a multiple of the alignment; may run past EOF */
    uint64_t need;             /**< bytes from `offset` that must arrive (to the last wanted byte) */
    uint64_t dest_offset;      /**< destination offset, a multiple of the alignment */
} pinio_plan_read;

/** What a plan holds, in numbers. */
typedef struct pinio_plan_info {
    size_t files;              /**< input files (shards) */
    size_t tensors;            /**< tensors selected */
    size_t skipped;            /**< tensors not selected by the filters */
    size_t unindexed;          /**< tensors of a shard that the index does not map (ignored) */
    size_t files_hot;          /**< files the cache policy reads buffered */
    uint64_t bytes;            /**< selected tensor bytes (of their slices, when sliced) */
    uint64_t read_bytes;       /**< bytes the reads cover (alignment and merged holes included) */
    uint64_t dest_bytes;       /**< size of a destination laid out as the plan */
    uint64_t align;            /**< the reads' alignment */
    size_t reads;              /**< number of reads */
    const char *index_path;    /**< the index file used, or NULL */
} pinio_plan_info;

/**
 * Builds a plan; reads headers, no tensor data.
 *
 * Inputs: `.safetensors` files, directories (their
 * `model.safetensors.index.json` when present, else every `*.safetensors`
 * in them, sorted) and index files. The index's weight_map is an allowlist
 * per shard: a tensor present in a shard but absent from the map is ignored
 * (counted as unindexed); a shard or tensor the map names but that is
 * missing is an error; the same tensor in two shards is an error. At most
 * one index per plan.
 *
 * Under #PINIO_CACHE_AUTO the residency of each file's data section is
 * measured now (cachestat(2), mincore as fallback).
 *
 * @param out   on success the caller owns the plan (pinio_plan_free()), which
 *              holds one descriptor per file. On failure `*out` is NULL and
 *              nothing is left allocated or open.
 * @param opts  NULL = defaults; read during the call only.
 * @param diag  optional; names the file and the offset or tensor. For an
 *              error about one input file, `diag->index` is its index in the
 *              resolved file list.
 * Slices (`opts->slices`, `opts->split`) are resolved per tensor after the
 * selection, before the layout: a slice out of the tensor's bounds or a
 * dimension out of range is -EINVAL naming the tensor and its file. A
 * tensor whose dtype packs elements below a byte (F4, F6) is sliced as
 * upstream safetensors slices it: each run of the slice must start and end
 * on a byte boundary (the run dimension's start and stop, and every index
 * taken of a dimension outside it); a cut inside a byte is -EINVAL naming
 * the tensor, its file, its dtype, the dimension and the index.
 *
 * @return 0; #PINIO_EFORMAT (invalid header or index), -ENOENT (missing file,
 *         shard, or a tensor the index maps to a shard lacking it, or a slice
 *         naming no selected tensor), -EEXIST (a tensor in two shards),
 *         -EINVAL (bad options, no inputs, not a regular file, two index
 *         files, a bad slice or split rule), -ECANCELED (the stop request,
 *         while objects are listed or opened), -ENOMEM, or open's errno.
 */
PINIO_API int pinio_plan_create(pinio_plan **out, const char *const *paths, size_t npaths,
                                const pinio_plan_opts *opts, pinio_diag *diag);

/** One input file of pinio_plan_create_from_headers(). */
typedef struct pinio_plan_header {
    const char *path;          /**< the `.safetensors` file; opened for its identity and data */
    /** The file's first `len` bytes as another process read them: the 8-byte
     *  length N and the JSON header (`len` >= 8 + N). */
    const void *bytes;
    size_t len;
} pinio_plan_header;

/**
 * Builds a plan from header bytes the caller supplies (an MPI job's rank 0
 * read them once and broadcast them), so that every process lays out the
 * same reads without reading a header itself. Each file is still opened
 * (its data is read through that descriptor); the bytes are validated as
 * pinio_plan_create() validates a header it read, against the size of the
 * file opened, so a file whose length differs from the one the bytes came
 * from is refused. Nothing is resolved: `files` are files, in plan order.
 *
 * Equal inputs and options give equal layouts (reads, dest offsets) in
 * every process, provided `opts->align` is set: with align 0 the alignment
 * follows the files' O_DIRECT alignment and this process's cache policy.
 *
 * @param files  `nfiles` >= 1 files; read during the call only.
 * @param index  optional: the image of the `model.safetensors.index.json`
 *               the files are the shards of (`index_len` bytes, parsed as if
 *               read from `index_path`, which then is required). `files` must
 *               then be its shards in its order (pinio_st_index_shard()),
 *               else -EINVAL; its weight_map is the allowlist, as in
 *               pinio_plan_create().
 * @param out, opts, diag  as pinio_plan_create().
 * @return as pinio_plan_create().
 */
PINIO_API int pinio_plan_create_from_headers(pinio_plan **out, const pinio_plan_header *files,
                                             size_t nfiles, const void *index, size_t index_len,
                                             const char *index_path, const pinio_plan_opts *opts,
                                             pinio_diag *diag);

/**
 * Builds a plan over the files `base` opened and validated, with another
 * selection: each file's descriptor is duplicated and its validated header
 * copied, so no path is opened and no header read or parsed again (a
 * safe_open handle plans each lazy read of its file this way, for the cost
 * of the selection). Then, as pinio_plan_create(): the selection, slices
 * and split rules of `opts`, the cache policy (residency measured now) and
 * the layout.
 *
 * The files are the ones `base` validated, whatever their paths name now.
 * Each one's identity is taken again: its size and modification time must
 * still be the ones `base` validated (#PINIO_ECHANGED otherwise: rewritten,
 * its header may no longer describe it). Its status change time may have
 * moved (renamed over or unlinked: its bytes are the same); the new plan's
 * execution checks against the identity taken now.
 *
 * @param out   on success the caller owns the plan (pinio_plan_free()): it
 *              holds descriptors and headers of its own, so `base` may be
 *              freed first. On failure `*out` is NULL and nothing is left
 *              allocated or open.
 * @param base  read during the call only, never changed: any thread may
 *              derive from it.
 * @param opts  NULL = defaults; read during the call only.
 * @return 0; -ENOTSUP for a `base` with an index (its allowlist is not
 *         carried over) or with objects (s3://: no descriptor to share);
 *         #PINIO_ECHANGED; -EMFILE; -ENOMEM; otherwise as pinio_plan_create()
 *         after its headers are read (-ENOENT, -EINVAL for the selection,
 *         slices and split rules).
 */
PINIO_API int pinio_plan_derive(pinio_plan **out, const pinio_plan *base,
                                const pinio_plan_opts *opts, pinio_diag *diag);

/** What the slices of a plan cost (pinio_plan_get_slice_info()). Grows like
 *  the options structs: fields are only added at the end. */
typedef struct pinio_plan_slice_info {
    size_t struct_size;        /**< bytes the library filled (the smaller of both sizeofs) */
    size_t sliced;             /**< tensors read as a slice (not whole) */
    size_t strided;            /**< of those, slices of more than one run (packed after the reads) */
    size_t empty;              /**< of those, empty slices (a rank past torch.chunk's last chunk) */
    uint64_t runs;             /**< runs of the strided slices, in all */
    uint64_t full_bytes;       /**< bytes of the selected tensors whole */
    uint64_t bytes;            /**< bytes of their slices (pinio_plan_info::bytes) */
    uint64_t read_bytes;       /**< bytes the reads cover (pinio_plan_info::read_bytes) */
    uint64_t overread_bytes;   /**< read_bytes - bytes: alignment and holes read through */
    uint64_t hole_bytes;       /**< of those, holes read through (within max_overread) */
    uint64_t hole_budget;      /**< the cap on hole_bytes; UINT64_MAX without slices */
} pinio_plan_slice_info;

/**
 * Fills the first `size` bytes of `*out` with what the plan's slices cost
 * (all zero but the byte counts for a plan without slices); `out->struct_size`
 * set to the bytes filled. A `size` below sizeof(size_t) writes nothing.
 */
PINIO_API void pinio_plan_get_slice_info_sized(const pinio_plan *p, pinio_plan_slice_info *out,
                                               size_t size);

/** pinio_plan_get_slice_info_sized() with the caller's sizeof. */
static inline void pinio_plan_get_slice_info(const pinio_plan *p, pinio_plan_slice_info *out)
{
    pinio_plan_get_slice_info_sized(p, out, sizeof(*out));
}

/**
 * Packs tensor `i`'s slice once its reads have landed: `mem` is where the
 * tensor's `dest_offset` lies in a destination laid out as the plan (its
 * reads landed there, at their dest offsets relative to it); the slice's
 * runs are moved, in order, so that the slice lies contiguous from `mem`,
 * shaped like the slice. Each run moves to a lower address or stays, so the
 * packing is done in place; bytes of the destination past the packed slice,
 * up to the tensor's last run, are left as they were. A no-op for a tensor
 * of at most one run. Call it once per execution.
 * @return 0; -ERANGE when `i` is out of range; -EINVAL for a NULL `mem`
 *         with bytes to move.
 */
PINIO_API int pinio_plan_gather(const pinio_plan *p, size_t i, void *mem);

/**
 * File offset of run `k` of tensor `i`: its bytes are
 * [offset, offset + run_bytes) of the tensor's file (pinio_plan_tensor::runs,
 * pinio_plan_tensor::run_bytes). Runs lie in increasing file order, run `k` of a slice
 * holding its bytes [k * run_bytes, (k + 1) * run_bytes). For a tensor of
 * one run it is `file_offset`. For a consumer that takes the file's bytes
 * as they land (a stream's sink) and places each run itself.
 * @return the offset; UINT64_MAX when `i` or `k` is out of range.
 */
PINIO_API uint64_t pinio_plan_run_offset(const pinio_plan *p, size_t i, uint64_t k);

/** Closes the plan's descriptors and frees it. NULL is a no-op. */
PINIO_API void pinio_plan_free(pinio_plan *p);

/** Fills `*out` with the plan's numbers. */
PINIO_API void pinio_plan_get_info(const pinio_plan *p, pinio_plan_info *out);

/** The index the plan's files are the shards of (valid while the plan
 *  lives), or NULL: the one parsed at plan time, also for an index that was
 *  an object (s3://), which no path reaches again. */
PINIO_API const pinio_st_index *pinio_plan_get_index(const pinio_plan *p);

/**
 * The bytes of the plan's index as they were parsed, when no path reaches
 * them again (an index that was an object): `*bytes` valid while the plan
 * lives. @return 0; -ENOENT for a plan without an index or whose index is a
 * file (read it from pinio_plan_info::index_path).
 */
PINIO_API int pinio_plan_get_index_image(const pinio_plan *p, const void **bytes, size_t *len);

/** Input file `i` in resolution order; NULL when out of range. */
PINIO_API const pinio_plan_file *pinio_plan_file_at(const pinio_plan *p, size_t i);

/** Selected tensor `i` (file order, files in resolution order); NULL when out of range. */
PINIO_API const pinio_plan_tensor *pinio_plan_tensor_at(const pinio_plan *p, size_t i);

/** Read `i` ((file, offset) order); NULL when out of range. */
PINIO_API const pinio_plan_read *pinio_plan_read_at(const pinio_plan *p, size_t i);

/**
 * Drops the page-cache pages of every file of the plan (writing dirty ones
 * back first), so that the reads measure the storage: what
 * #PINIO_CACHE_COLD means. Uses the plan's descriptors. `seconds`
 * (optional) receives the time it took.
 * @return 0, or the first file's error (`diag` names it).
 */
PINIO_API int pinio_plan_drop_cache(pinio_plan *p, double *seconds, pinio_diag *diag);

/**
 * A destination decides where each read lands and what happens once it has
 * landed. Both callbacks run on the executing thread, in read order.
 */
typedef struct pinio_dest_ops {
    /** sizeof(pinio_dest_ops) as the destination was compiled: entries past
     *  it are treated as NULL, so the table can grow. */
    size_t size;
    /**
     * Memory for read `i`: `r->len` writable bytes at `*mem`, which must stay
     * valid until the read has landed. O_DIRECT reads land straight in it
     * when it is aligned to the plan's alignment (else through a staging
     * copy). May block to apply back-pressure. Return 0 or a negative code,
     * which stops the execution with that code. Required.
     */
    int (*claim)(void *ctx, size_t i, const pinio_plan_read *r, void **mem);
    /**
     * Read `i` has landed: `mem[0, r->need)` holds the file's bytes (at end
     * of file a read may be shorter than `len`, never shorter than `need`:
     * that is #PINIO_ECHANGED). Return 0 or a negative code to stop.
     * Optional.
     */
    int (*landed)(void *ctx, size_t i, const pinio_plan_read *r, void *mem);
} pinio_dest_ops;

/** A memory range to register with the engine for an execution. */
typedef struct pinio_mem_region {
    void *addr;
    size_t len;                /**< at most 1 GiB (the kernel's per-buffer limit) */
} pinio_mem_region;

/** The order in which an execution issues the pieces of each read. */
typedef enum pinio_read_order {
    /** PINIO_READ_ORDER in the environment ("staggered" or "sequential"),
     *  else STAGGERED. */
    PINIO_READ_ORDER_AUTO = 0,
    /** Every read from its first byte on: every reader of a shared file
     *  asks for the same region at the same time. */
    PINIO_READ_ORDER_SEQUENTIAL,
    /** Each read's 16 MiB pieces rotated: reader `stagger_rank` of
     *  `stagger_ranks` starts at piece rank * n / ranks and wraps around, so
     *  readers of shared storage spread over the file instead of queueing
     *  on one region (vLLM #39030, SGLang #26937). The bytes and the order
     *  of `claim` and `landed` are the same; only the reads' order changes.
     *  pinio_load() also takes a checkpoint's files in turn from its own
     *  on: file pid mod nfiles first (each file's reads still in order),
     *  for the files it reads for the node's shared copy, and for its
     *  private reads on network and FUSE file systems. */
    PINIO_READ_ORDER_STAGGERED,
} pinio_read_order;

/** Options of pinio_plan_execute(). Start from pinio_exec_opts_default(). */
typedef struct pinio_exec_opts {
    size_t struct_size;        /**< sizeof(pinio_exec_opts), set by the defaults function */
    unsigned queue_depth;      /**< 0 = the engine's default */
    size_t request_size;       /**< 0 = the engine's default */
    pinio_direct_policy direct; /**< O_DIRECT policy for the plan's cold files; AUTO */
    pinio_backend backend;     /**< force a rung of the engine's ladder (tests); AUTO */
    /** Reads are handed to the engine in batches of at most this many bytes
     *  (each batch: claim every read, read them all, then `landed` for each).
     *  0 = one batch, unless a progress callback is set: then 1/16 of the
     *  bytes, 16 MiB to 1 GiB. */
    uint64_t batch_bytes;
    /** At most this many reads per batch (a stream sets its free slots);
     *  0 = no limit. */
    size_t batch_reads;
    /** Execute only reads [first_read, first_read + nreads) (an MPI stripe);
     *  nreads 0 = all reads from first_read on. */
    size_t first_read;
    size_t nreads;
    /** Memory the destination hands out, registered with the engine for this
     *  execution (best effort: a refused registration leaves plain reads). */
    const pinio_mem_region *regions;
    size_t nregions;
    /** Optional: called after each batch, bytes counted as read. */
    pinio_progress_fn progress;
    void *progress_ctx;
    /** With `regions`: register each region at the first read into it,
     *  while the reads before it are in flight (pinio_ring_register_region_lazy()),
     *  not all of them before the first read. A destination faulted in as it
     *  is read (a helper thread ahead of the reads) is then pinned slab by
     *  slab instead of faulted whole by the registration up front. */
    bool regions_lazy;
    /** Object files (s3://): HTTP requests in flight at most; 0 = 16. */
    unsigned object_concurrency;
    /** Optional: polled during the waits of object (s3://) requests, see
     *  #pinio_stop_fn; nonzero stops the call with -ECANCELED. */
    pinio_stop_fn stop;
    void *stop_ctx;
    /** Order of each read's pieces (see #pinio_read_order); AUTO. An unknown
     *  PINIO_READ_ORDER value is -EINVAL, named in the diagnostic. */
    pinio_read_order read_order;
    /** Staggered order: this reader's place, rank `stagger_rank` of
     *  `stagger_ranks` (a group's rank and size). `stagger_ranks` 0: an
     *  independent process, whose pid picks the starting piece. */
    uint32_t stagger_rank;
    uint32_t stagger_ranks;
    /** Object files (s3://): fetch in batches as above (claim a batch, fetch
     *  all its ranges, then land it) instead of landing each read as its
     *  ranges complete while the next ranges are already in flight. For a
     *  destination whose callbacks wait for another thread that reads the
     *  plan's objects again (pinio_plan_file_read()): that thread's reads
     *  are served by the executing thread between its callbacks, so such a
     *  wait would never end. false = streamed. */
    bool object_batches;
} pinio_exec_opts;

/** Fills `*opts` with the defaults described field by field above. */
static inline void pinio_exec_opts_default(pinio_exec_opts *opts);

/**
 * What pinio_exec_opts_default() calls: fills the first `size` bytes of `*opts`
 * with the defaults (struct_size = `size`; fields past this library's
 * struct stay zero). Inline callers pass their header's sizeof, so a
 * program built against an older, smaller struct is never written past.
 */
PINIO_API void pinio_exec_opts_init(pinio_exec_opts *opts, size_t size);

static inline void pinio_exec_opts_default(pinio_exec_opts *opts)
{
    pinio_exec_opts_init(opts, sizeof(*opts));
}

/** What an execution did. */
typedef struct pinio_exec_report {
    uint64_t read_bytes;       /**< bytes read from storage (the executed reads' lengths) */
    double io_seconds;         /**< wall time of the reads */
    size_t files_direct;       /**< files read with O_DIRECT */
    size_t files_buffered;     /**< files read through the page cache */
    pinio_backend backend;     /**< the rung the reads used: FIXED_DIRECT only when the
                                    destination's `regions` were registered and reads went
                                    to them by READ_FIXED */
    unsigned setup_flags;      /**< io_uring setup flags in force (pinio_ring_flags_format()) */
    uint64_t fixed_ops;        /**< reads issued as READ_FIXED (registered memory, the
                                    engine's own bounce buffer included) */
    uint64_t plain_ops;        /**< reads issued as plain READ / pread */
    size_t regions_registered; /**< of the `regions` given, how many the engine registered
                                    (`regions_lazy`: how many the reads reached and the
                                    kernel accepted) */
    char io_path[256];         /**< one line: the I/O path that ran and why */
    size_t files_object;       /**< object files (s3://) read by HTTP range GETs */
    uint64_t object_requests;  /**< their HTTP requests, retries included */
    uint64_t object_retries;   /**< of those, retries (5xx, 429/SlowDown, resets, timeouts,
                                    short or mismatched responses) */
} pinio_exec_report;

/**
 * Reads the plan's reads (or `opts`' sub-range) into the destination,
 * through the engine: O_DIRECT for the plan's cold files, buffered for its
 * hot ones, each through the descriptor the plan validated. Checks that
 * every read delivered its `need` bytes and, at the end, that no file
 * changed since its header was validated (size, modification and status
 * change times, inode: #PINIO_ECHANGED otherwise; a rewrite that keeps all
 * of them, e.g. within one timestamp tick, stays undetectable without
 * --verify). A file renamed over the path, or removed and created anew
 * there, is not read (the validated descriptor is), but unlinking the
 * validated file moves its status change time: #PINIO_ECHANGED too, the
 * diagnostic saying the path now names another file (or none), so that no
 * caller takes the old checkpoint for the one the path names now.
 *
 * @param rep   optional, filled on success.
 * @param diag  optional; names the file and offset (`diag->index` is the
 *              failing read's index in the plan).
 * @return 0; #PINIO_ECHANGED, -ECANCELED (progress callback or stop), -EINVAL (bad
 *         options or ops, a sub-range past the plan), the engine's errors,
 *         or a destination callback's code. After a failure the destination
 *         may hold partial data in any read it claimed.
 */
PINIO_API int pinio_plan_execute(pinio_plan *p, const pinio_dest_ops *ops, void *ctx,
                                 const pinio_exec_opts *opts, pinio_exec_report *rep,
                                 pinio_diag *diag);

#ifdef __cplusplus
}
#endif

#endif /* PINIO_PLAN_H */
