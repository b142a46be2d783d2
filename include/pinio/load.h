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
 * read through the engine (O_DIRECT io_uring reads for files not in the
 * page cache; for files that are, buffered reads on pread threads, which
 * copy out of the page cache on every CPU at once) while a helper thread
 * faults it in ahead of the reads; every wanted byte is checked to have arrived, the
 * placement verified, the arena locked in RAM (mlock, when RLIMIT_MEMLOCK
 * allows), and tensors handed out as views of it. Peak memory is the
 * selected bytes plus alignment padding and small merged holes.
 *
 * The arena is read-only: tensors are `const` views, and a #pinio_bytes
 * taken from a checkpoint copies on its first mutable access (the
 * checkpoint keeps its own reference), so no write ever reaches the arena
 * or another holder's tensor.
 *
 * Memory modes (#pinio_memory_mode): each file's tensors live either in
 * the arena (pinned) or in a read-only shared mapping of the file (mapped:
 * the page cache itself, zero copies); AUTO chooses per file.
 *
 * Lifetime: the arena, and each file mapping, is freed when the checkpoint
 * and every tensor #pinio_bytes taken from it have been released, in any
 * order. Tensor pointers (pinio_tensor::data, from pinio_checkpoint_tensor()
 * or pinio_checkpoint_find()) live as long as the checkpoint. A mapped file's tensors stay valid after the file is
 * renamed or unlinked (the mapping holds the inode).
 *
 * Mapped files and truncation: a file truncated (or otherwise changed) after
 * its header was validated and before its mapping is checked fails the load
 * with #PINIO_ECHANGED; the library never touches a mapped byte itself
 * (verification reads through the descriptor), so it never takes a SIGBUS.
 * A file truncated *after* the load cuts its pages out of the mapping: a
 * user touching a mapped tensor past the new end of file gets SIGBUS, as
 * with any file mapping. A file that may be truncated or rewritten in place
 * while its tensors are used must be loaded #PINIO_MEMORY_PINNED.
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

/**
 * Where a load puts each file's tensors (pinio_load_opts::memory).
 *
 * The rule of #PINIO_MEMORY_AUTO, per file:
 * - **mapped** when the plan reads the file through the page cache (hot:
 *   at least 90 % of its data section cached, or `cache` HOT): mapping a
 *   cached file costs page-table work only (a hot 256 MiB file: 0.020-0.036 s
 *   mapped against 0.24-3.2 s read into a fresh arena, 5 alternating runs
 *   on a shared 2-CPU VM), and the tensors then are the page cache itself;
 * - **mapped** too when the file is cold and the kernel's work of a first
 *   touch of fresh memory (the fault and the zeroing of each page) is
 *   slower than the storage (pinio_load_opts::first_touch_gbps against
 *   storage_gbps, measured or given): O_DIRECT into a fresh arena pays
 *   it for every page, filling the page cache does not. The host's
 *   backing of a VM's page is not part of the figure: the page cache
 *   pays it too, at the first read of a mapped tensor (on the development
 *   VM a first touch measured 0.24-0.94 GB/s with it and 10-23 GB/s
 *   without, so auto reads cold files O_DIRECT there). Not when something
 *   below asks for pinned memory, nor with `verify`, a NUMA `node`,
 *   `register_arena`, slices, or a selection that leaves more than an
 *   eighth of the file's mapped range unread;
 * - **pinned** when the file is cold otherwise (O_DIRECT into the arena runs at the
 *   storage's speed, with no page cache filled and no copy), when a DMA
 *   consumer waits (`consumer` #PINIO_CONSUMER_DMA: a GPU upload needs
 *   pinned memory, and from a mapping it would be staged through pinned
 *   memory, one more copy), when a kept
 *   arena is given (`arena`: the caller keeps memory to reuse), when a
 *   `backend` is forced (a test of the read path asked for reads), or when
 *   `tensor_align` asks for an alignment the file's tensor offsets do not
 *   have (a mapping cannot move a tensor).
 * The report says which mode each file got and why
 * (pinio_load_report::modes, pinio_checkpoint_file_memory()).
 */
typedef enum pinio_memory_mode {
    PINIO_MEMORY_AUTO = 0, /**< per file, by the rule above */
    /** Read into one NUMA-placed arena (O_DIRECT for cold files), locked in
     *  RAM: tensors are PINIO_PROP_PINNED views a DMA engine can use. */
    PINIO_MEMORY_PINNED,
    /** The file is mapped read-only and shared, its pages populated; tensors
     *  are PINIO_PROP_FILE views of the page cache (no copy), the mapping
     *  freed with the last of them. A cold file's pages are read in by the
     *  populate, on network and FUSE file systems after a readahead at
     *  depth (#pinio_mapped_fill). A file whose tensors
     *  miss `tensor_align` is read pinned instead (reported). */
    PINIO_MEMORY_MAPPED,
} pinio_memory_mode;

/**
 * How a cold mapped file's page cache is filled (pinio_load_opts::mapped_fill).
 *
 * The populate of the mapping reads a cold file in by its fault readahead,
 * one readahead window in flight at a time: at the storage's speed on a
 * local disk, but one request's latency per window on storage where each
 * request waits (a network or FUSE file system). There the file is first
 * read ahead at depth: readahead(2) over the mapped range, one call per
 * readahead window of the file's device, which such file systems serve
 * asynchronously with many requests in flight; the populate then finds the
 * pages. Nothing is copied, and no mapped byte is read by the fill, so a
 * file truncated since its header was validated still fails the load with
 * #PINIO_ECHANGED, never a SIGBUS.
 *
 * The rule of #PINIO_FILL_AUTO: read ahead on FUSE (and virtiofs), NFS,
 * CIFS/SMB, CephFS, Lustre, GPFS, BeeGFS, OrangeFS, 9p and AFS (statfs(2)
 * f_type), the populate alone elsewhere. Measured (cold file mapped, then
 * every byte touched; Linux 6.18, shared 2-CPU VM; doc/measurements.md):
 * on a FUSE file system answering each read after 500 us (bench/slowfs),
 * reading ahead ran 3.9x the populate alone (1.28 against 0.33 GB/s; a
 * whole pinio load against mmap faulting: 2.9x, median of 5 on a busy VM); on
 * ext4 over a virtio disk it lost at both of the disk's read_ahead_kb
 * values tried (8192: 0.89-1.24 against 1.70-1.80 GB/s; 128: 0.60-0.81
 * against 0.62-0.94), because the populate alone builds large folios and
 * already reads at the disk's speed.
 *
 * The report's `cache` line says which ran for each file
 * (pinio_load_report::files_filled_ahead counts the files read ahead).
 */
typedef enum pinio_mapped_fill {
    PINIO_FILL_AUTO = 0, /**< by the file system, as above (the default) */
    PINIO_FILL_AHEAD,    /**< always read ahead at depth, then populate */
    PINIO_FILL_FAULT,    /**< never: the populate's fault readahead alone */
} pinio_mapped_fill;

/**
 * Who uses the loaded tensors (pinio_load_opts::consumer): part of
 * #PINIO_MEMORY_AUTO's rule.
 */
typedef enum pinio_consumer {
    PINIO_CONSUMER_HOST = 0, /**< CPU code reads the tensors in place (the default) */
    /** A device copies them by DMA (a GPU upload): AUTO chooses pinned for
     *  every file, locked memory the driver can DMA from directly. */
    PINIO_CONSUMER_DMA,
} pinio_consumer;

/**
 * A kept arena: pinned memory a caller reuses across loads (a server
 * swapping models, a job reloading weights), so that the second load pays
 * no page faults. Empty when created; a load through it (pinio_load_opts::arena)
 * grows it only when its pinned files need more than it holds, to exactly
 * what they need (rounded up to 2 MiB). Its NUMA node is the one of the
 * load that last grew it.
 *
 * One checkpoint at a time: a load through an arena whose memory a
 * checkpoint or a tensor #pinio_bytes from an earlier load still holds fails
 * with -EBUSY (release them first); the memory is then reused, never
 * cleared. Not for concurrent loads.
 */
typedef struct pinio_arena pinio_arena;

/**
 * Creates an empty kept arena.
 * @return 0 with `*out` owned by the caller (pinio_arena_release()); -EINVAL
 *         (NULL `out`), -ENOMEM (`*out` NULL).
 */
PINIO_API int pinio_arena_create(pinio_arena **out);

/**
 * Releases the caller's arena: its memory is freed now, or with the last
 * checkpoint or tensor bytes still holding it. NULL is a no-op.
 */
PINIO_API void pinio_arena_release(pinio_arena *a);

/** Bytes of memory the arena holds now (0 before its first load). */
PINIO_API size_t pinio_arena_size(const pinio_arena *a);

/**
 * Node-local sharing (pinio_load_opts::share): processes on one node that
 * load the same local file, or the same version of an s3:// object, at the
 * same time read it from storage once.
 *
 * A file is shared when it is read pinned and nothing asks for private
 * memory (no kept `arena`, `register_arena`, `verify`, forced `backend`,
 * `node` (a segment is not NUMA-placed), slices, `tensor_align` its
 * tensors miss), every tensor of the file is selected (a filter or a
 * safe_open read of a part is private), its reads cover one contiguous
 * range. Sharing keys on the file's identity: a local file's device, inode,
 * size and modification time in ns; an object's endpoint, bucket, key, ETag
 * (the version its range GETs are pinned to) and size, an object the store
 * sends no ETag for loading privately. The first process to claim it reads
 * it (the normal engine: O_DIRECT for a cold file, range GETs for an object)
 * into a segment in `/dev/shm` (PINIO_SHARE_DIR overrides the folder), found
 * by the others through its name, which is the file's identity: another
 * file at the same path, the same path rewritten, or an object replaced, has
 * another name and never shares. The others wait for the reader and map the
 * segment: their tensors view the same memory (mlock'ed within
 * RLIMIT_MEMLOCK, then #PINIO_PROP_PINNED), and they read nothing. A process
 * that comes while the segment is read maps it then and populates and locks
 * its pages behind the reader, so that it is ready moments after the reader
 * (the report's `share` line says "mapped while it read"); it takes no byte
 * of it before the completion marker, as below.
 *
 * Safety: a fcntl OFD lock on the segment's first byte is held while it is
 * claimed, allocated and read, and released by the kernel when the holder
 * dies; a completion marker is written only after every read landed and the
 * file was checked unchanged, so a sharer never maps a partial segment (one
 * left by a killed reader is taken over and read again). Each user holds a
 * shared lock on the second byte; the last to let go removes the segment,
 * and a segment whose users all died is removed by the next load that looks.
 * The segment's size is checked against the folder's free space and the
 * memory (cgroup v2 memory.max - memory.current, MemAvailable) before it is
 * allocated with posix_fallocate, so a full `/dev/shm` is a private read,
 * never a SIGBUS. Whatever the reason a file loads privately, the report's
 * `share` line says it.
 *
 * A reader that is alone reads into memory of its own (huge pages) and
 * makes the segment only when another process asks for the file while it
 * reads, copying its bytes there once: a lone load costs what a private one
 * does, and a process that starts after a lone reader finished reads the
 * file itself (its report's `share` line says "read here alone").
 *
 * The environment variable PINIO_SHARE=0 (or off) turns sharing off for
 * every load of the process, as #PINIO_SHARE_OFF does for one;
 * PINIO_SHARE=eager makes every reader's segment at once (processes started
 * apart, each after the last finished, then read once).
 */
typedef enum pinio_share_policy {
    PINIO_SHARE_AUTO = 0, /**< share where the rule above allows (the default) */
    PINIO_SHARE_OFF,      /**< every file read privately */
} pinio_share_policy;

/** The steps of a shared read, as pinio_load_opts::share_hook sees them. */
typedef enum pinio_share_stage {
    PINIO_SHARE_CLAIMED = 1, /**< this process reads the file for the others: the lock is held,
                                  the segment not yet allocated */
    PINIO_SHARE_ALLOCATED,   /**< the segment is allocated, nothing read (or copied) into it */
    PINIO_SHARE_READING,     /**< the first read landed (in private memory while the reader is
                                  alone, see #pinio_share_policy) */
    PINIO_SHARE_COMPLETE,    /**< every byte read and checked, the marker written, the lock still
                                  held */
    PINIO_SHARE_JOINING,     /**< another process's complete segment found, lock held, not yet
                                  mapped */
    PINIO_SHARE_EARLY,       /**< another process's segment, still being read, mapped by this
                                  one and its first pages populated (its bytes are used only
                                  once it is complete) */
    PINIO_SHARE_WANTING,     /**< another process holds the file's claim: this one has asked it
                                  for a segment and waits */
} pinio_share_stage;

/** Called at each #pinio_share_stage of a file (`path`) on the loading
 *  thread: tests stop or kill the process there. */
typedef void (*pinio_share_hook_fn)(void *ctx, const char *path, pinio_share_stage stage);

/** Options of pinio_load(). Start from pinio_load_opts_default(). */
typedef struct pinio_load_opts {
    size_t struct_size;          /**< sizeof(pinio_load_opts), set by the defaults function */
    /** Tensor selection, applied before any data I/O: patterns as
     *  pinio_plan_opts::filters (a name, a prefix of dotted components
     *  ("model.layers.0" selects "model.layers.0.mlp.up_proj.weight"), or a
     *  glob (fnmatch: `*`, `?`, `[...]`); a pattern equal to a tensor's name
     *  matches it). A tensor is selected when any pattern matches; no
     *  patterns = all. */
    const char *const *filters;
    size_t nfilters;
    int node;                    /**< PINIO_NODE_AUTO (default), PINIO_NODE_ANY, or a node */
    unsigned queue_depth;        /**< 0 = the engine's default */
    size_t request_size;         /**< 0 = the engine's default */
    pinio_direct_policy direct;  /**< O_DIRECT policy (AUTO: where the file system allows) */
    pinio_backend backend;       /**< force a rung of the engine's ladder (tests); AUTO */
    pinio_cache_policy cache;    /**< AUTO by default */
    bool verify;                 /**< compute each file's SHA-256 (the hub's LFS object id) */
    /** With verify: expected hex digests, one per input file in resolution
     *  order (a directory or index counts one per shard); NULL entries skip a
     *  file. When nexpected is not 0 it must equal the number of files:
     *  otherwise #PINIO_EDIGESTS, naming both counts, before any data is read (a
     *  surplus or missing digest would check a file against another's). */
    const char *const *expected_sha256;
    size_t nexpected;
    /** Optional: called after each batch of reads (1/16 of the load, 16 MiB to
     *  1 GiB), bytes counted as read from storage; see #pinio_progress_fn. */
    pinio_progress_fn progress;
    void *progress_ctx;
    pinio_memory_mode memory;    /**< AUTO (see #pinio_memory_mode for the rule) */
    /** Mapped files: also lock their pages in RAM (mlock, within
     *  RLIMIT_MEMLOCK; the report says when it was refused). */
    bool lock_mapped;
    /** Pinned files: register the arena with io_uring, so that O_DIRECT
     *  reads land by READ_FIXED. The arena is cut into slabs (16 MiB, or
     *  1/512 of a larger arena, at most 1 GiB) that the engine registers
     *  one by one at the first read into each, while the reads before it
     *  are in flight and a helper thread faults the arena ahead of them
     *  (pinio_exec_opts::regions_lazy). Off by default: it measured no
     *  faster than plain O_DIRECT into the arena's huge pages (a cold
     *  1 GiB load: 0.48 s (0.47-0.52) registered against 0.47 s
     *  (0.45-0.50) plain, whole process, CPU 0.13 against 0.12 s; medians
     *  of 7 alternating runs, shared 2-CPU VM, kernel 6.18). Where the
     *  kernel has no sparse buffer table (before 5.19) or refuses the
     *  registration (RLIMIT_MEMLOCK), reads go plain. The report's
     *  `memory` and `io_path` lines say which ran and why. */
    bool register_arena;
    /** Every tensor's first byte at an address that is a multiple of this
     *  (a power of two, at most 4096); 0 = as the file places it (a tensor
     *  keeps its file offset modulo 4096). Pinned files: tensors whose file
     *  offset is not aligned are moved once within the arena after the
     *  reads (pinio_load_report::realigned_bytes: the cost; the reads are
     *  unchanged), the arena holding `align` more bytes per tensor. */
    uint64_t tensor_align;
    /** Optional: a kept arena for the pinned files (pinio_arena_create());
     *  borrowed for the call. NULL: a fresh arena, freed with the checkpoint. */
    pinio_arena *arena;
    /** Who uses the tensors: HOST (default) or DMA, which makes
     *  #PINIO_MEMORY_AUTO choose pinned (see its rule). */
    pinio_consumer consumer;
    /** Mapped files: map them private (copy-on-write) and writable instead
     *  of shared and read-only, as the `safetensors` package maps a file, so
     *  a caller may write to a tensor: the write copies that page for this
     *  mapping only; the file, the page cache and other loads never see it.
     *  The pages are populated read-only first, so nothing is copied until
     *  written. For bindings whose tensors are writable (Python's).
     *  `lock_mapped` is then ignored (reported): the kernel locks a
     *  writable private mapping by copying every page. */
    bool map_private;
    /** Mapped files not in the page cache: how their pages are read in, a
     *  #pinio_mapped_fill value (AUTO: read ahead at depth on network and
     *  FUSE file systems; see its rule). */
    uint8_t mapped_fill;
    uint8_t reserved[34];        /**< zero */
    /** Slices (plan.h, #pinio_slice): per tensor by exact name; see
     *  pinio_plan_opts::slices. Each loaded tensor is then the slice,
     *  contiguous and shaped like it (pinio_tensor::shape), aligned like any
     *  tensor. A file holding a slice of more than one run (not along
     *  dimension 0) is read pinned whatever `memory` asks, since its runs
     *  are packed together after the reads (pinio_load_report::modes says
     *  so); contiguous slices can be mapped, but a cold file holding
     *  slices is read pinned even under #PINIO_MEMORY_MAPPED (the populate
     *  would read every page between its slices, other ranks' included). */
    const pinio_slice *slices;
    size_t nslices;
    /** Split rules `{pattern: dim}`, first match wins, unmatched tensors whole:
     *  each matched tensor is torch.chunk(t, world, dim)[rank] (plan.h,
     *  pinio_plan_opts::split). world >= 1 and rank < world, else -EINVAL. */
    const pinio_split_rule *split;
    size_t nsplit;
    uint32_t rank;
    uint32_t world;
    /** With slices: the cap on holes read through, pinio_plan_opts::max_overread
     *  (0 = 1/32 of the slices' bytes; negative: none). */
    double max_overread;
    /** Object inputs (s3://): HTTP range requests in flight at most; 0 =
     *  `queue_depth` when set, else 16. */
    unsigned object_concurrency;
    /** The filters are exact tensor names (pinio_plan_opts::filters_exact). */
    bool filters_exact;
    /** Optional: polled during the waits of object (s3://) requests, see
     *  #pinio_stop_fn; nonzero stops the call with -ECANCELED. */
    pinio_stop_fn stop;
    void *stop_ctx;
    /** Node-local sharing, a #pinio_share_policy value (AUTO: see its rule;
     *  the environment's PINIO_SHARE=0 turns it off too). */
    uint8_t share;
    /** Optional: called at each step of a shared read (tests); NULL = none. */
    pinio_share_hook_fn share_hook;
    void *share_hook_ctx;
    /** #PINIO_MEMORY_AUTO's rule for a cold file compares these two (see
     *  #pinio_memory_mode). The kernel's work of a first touch of fresh
     *  memory, GB/s: 0 = measured, once per process (up to 8 MiB advised
     *  for huge pages, as the arena is, faulted in, dropped and faulted
     *  in again, the second time timed; 40 ms at most; run the first
     *  time a cold file of a load of 256 MiB or more is decided, smaller
     *  loads keep O_DIRECT until then); > 0:
     *  this figure, for tests and callers that know their machine (the
     *  CLI and the Python binding take PINIO_FIRST_TOUCH_GBPS). Negative
     *  or not finite: -EINVAL. */
    double first_touch_gbps;
    /** The storage's expected read rate, GB/s: 0 = the last cold read of
     *  64 MiB or more this process measured (a mapped fill or an O_DIRECT
     *  read), else 1.7 assumed (a local SSD's order); > 0: this figure.
     *  Negative or not finite: -EINVAL. */
    double storage_gbps;
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
    const uint8_t *data;   /**< in the pinned arena or the file's mapping (see
                                pinio_checkpoint_file_memory()); valid while the checkpoint lives */
    unsigned file;         /**< index of the file it came from (pinio_checkpoint_file()) */
    uint64_t file_offset;  /**< absolute offset in that file */
    uint64_t align;        /**< largest power of two dividing `data`'s address, capped at 4096 */
    /** Loaded as a slice (pinio_load_opts::slices, split): `shape` and
     *  `nbytes` are the slice's, `file_offset` its first byte in the file. */
    bool sliced;
    const uint64_t *full_shape; /**< the tensor's shape in the file (`rank` dims) */
    const uint64_t *start;     /**< sliced: per dimension, the slice's first index; else NULL */
} pinio_tensor;

/**
 * What a load did, for reports and `--json`. Grows like the options
 * structs (src/base/opts.h): fields are only ever added at the end, and
 * pinio_checkpoint_report() writes no more than the caller's sizeof, so a
 * program built against an older, smaller struct is never written past.
 */
typedef struct pinio_load_report {
    /** Bytes the library filled: the smaller of the caller's sizeof and the
     *  library's (fields past it are the caller's own, untouched). */
    size_t struct_size;
    size_t files;              /**< input files (shards) */
    size_t tensors;            /**< tensors selected and loaded */
    size_t skipped;            /**< tensors not selected by the filters */
    size_t unindexed;          /**< tensors of a shard that the index does not map (ignored) */
    size_t misaligned;         /**< loaded tensors whose data is not aligned to their element size */
    uint64_t bytes;            /**< tensor bytes loaded (of their slices, when sliced) */
    uint64_t read_bytes;       /**< bytes read from storage (alignment and merged holes included) */
    uint64_t arena_bytes;      /**< pinned arena size */
    double seconds;            /**< wall time of the whole load (verification included,
                                    PINIO_CACHE_COLD's page dropping excluded) */
    double drop_seconds;       /**< time PINIO_CACHE_COLD spent dropping cached pages
                                    (writeback of dirty pages first) */
    double verify_seconds;     /**< time SHA-256 added after the last read (part of `seconds`);
                                    hashing runs alongside the reads on a second CPU */
    double io_seconds;         /**< wall time of the data reads */
    size_t files_direct;       /**< files read with O_DIRECT (a mapped file is not read) */
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
    char cache[256];           /**< one line: per file, what happened to its pages (O_DIRECT,
                                    buffered, mapped from the page cache, or mapped with the
                                    page cache filled by readahead) and why */
    char memory[256];          /**< one line: whether the arena is locked and registered, and
                                    why not */
    unsigned setup_flags;      /**< io_uring setup flags in force for the data reads */
    uint64_t fixed_ops;        /**< reads issued as READ_FIXED (into registered memory) */
    uint64_t plain_ops;        /**< reads issued as plain READ / pread */
    size_t files_pinned;       /**< files read into the arena (#PINIO_MEMORY_PINNED) */
    size_t files_mapped;       /**< files whose tensors view their mapping (#PINIO_MEMORY_MAPPED) */
    uint64_t mapped_bytes;     /**< bytes of the files' mappings */
    double fill_seconds;       /**< mapped files not in the page cache: time mapping them,
                                    their pages read in (part of `seconds`) */
    size_t realigned;          /**< tensors moved in the arena to meet `tensor_align` */
    uint64_t realigned_bytes;  /**< their bytes (one memmove each) */
    double realign_seconds;    /**< time the moves took (part of `seconds`) */
    bool arena_kept;           /**< the arena is a kept #pinio_arena */
    bool arena_grown;          /**< ... and it had to grow (or was empty) for this load */
    char modes[256];           /**< one line: the memory mode of each file and why */
    size_t files_filled;       /**< mapped files that were not in the page cache: their pages
                                    read in by the load (`cache` says how) */
    size_t files_filled_ahead; /**< of those, files read ahead at depth before the populate
                                    (#pinio_mapped_fill); the others by the populate's own
                                    fault readahead */
    size_t sliced;             /**< tensors loaded as a slice (`bytes` counts the slices) */
    size_t strided;            /**< of those, slices packed from several runs after the reads */
    uint64_t full_bytes;       /**< bytes of the selected tensors whole */
    uint64_t overread_bytes;   /**< bytes the plan's reads cover beyond the loaded bytes:
                                    alignment and holes read through (`read_bytes` - `bytes`
                                    when every file is pinned) */
    uint64_t hole_bytes;       /**< of those, holes read through (within max_overread) */
    size_t files_object;       /**< object files (s3://) read by HTTP range GETs into the arena */
    uint64_t object_requests;  /**< their HTTP requests (headers and data), retries included */
    uint64_t object_retries;   /**< of those, retries (5xx, 429/SlowDown, resets, timeouts,
                                    short or mismatched responses), each after a backoff */
    /** What pinned the objects' versions, the weakest of them: "etag" (If-Match, each
     *  answer's ETag compared), "last-modified" (the store sent no ETag: If-Unmodified-Since,
     *  each answer's Last-Modified compared), "size" (the store sent neither: only the size
     *  is checked, once more after the reads, and #pinio_load_opts.verify is refused
     *  with -EPROTO naming the object); "" without objects. An object whose answers
     *  lacked the validator is also asked again after its reads. */
    char object_pinned_by[16];
    /** Time to ready: wall time from the pinio_load() call until it returned
     *  the checkpoint, when every tensor is usable in place (pinned bytes
     *  read and settled, mapped pages populated and checked) and what only
     *  the load needed is released; PINIO_CACHE_COLD's page dropping
     *  excluded. `seconds` ends when the checkpoint is built, so this is
     *  the figure to compare with a loader whose tensors are usable on
     *  return. A binding that makes an object per tensor adds that time on
     *  top (Python's report()["ready_seconds"]). */
    double ready_seconds;
    /** Node-local sharing (#pinio_share_policy): files whose bytes another
     *  process read, this one mapping its segment (no read of its own). */
    size_t files_shared;
    size_t files_share_read;   /**< files this process read into a segment others may map */
    uint64_t share_bytes;      /**< bytes of the segments mapped, of both kinds */
    /** One line: per file, read here for sharing, shared (read by another
     *  process), or read privately and why. */
    char share[256];
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
 *         shorter or different than its header said when read or mapped), -ENOENT
 *         (missing file, shard or tensor), -EEXIST (a tensor in two shards),
 *         -EINVAL (bad options: a memory mode, a consumer, a mapped_fill, a tensor_align not a
 *         power of two up to 4096), -EBUSY (the kept `arena` still held by an earlier
 *         load's checkpoint or tensors), -ECANCELED (progress callback or stop), -EIO,
 *         -ENOMEM, a mapping's errno,
 *         PINIO_EFORMAT with "sha256 mismatch" when verification fails,
 *         PINIO_EDIGESTS (expected digests not one per file).
 */
PINIO_API int pinio_load(const char *const *paths, size_t npaths, const pinio_load_opts *opts,
                         pinio_checkpoint **out, pinio_diag *diag);

/**
 * pinio_load() of files already opened and validated: the load's plan is
 * pinio_plan_derive(`base`, the selection, slices and cache policy of
 * `opts`), so no path is opened and no header read or parsed again; the
 * rest is pinio_load(). A reader that validated a file once (a safe_open
 * handle) loads each part of it this way.
 *
 * @param base  read during the call only (see pinio_plan_derive()).
 * @param opts, out, diag  as pinio_load().
 * @return as pinio_load(), and pinio_plan_derive()'s errors (-ENOTSUP,
 *         #PINIO_ECHANGED for a file rewritten since `base` validated it).
 */
PINIO_API int pinio_load_derived(const pinio_plan *base, const pinio_load_opts *opts,
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

/**
 * The memory mode file `i` was loaded in (#PINIO_MEMORY_PINNED or
 * #PINIO_MEMORY_MAPPED; AUTO when out of range), and in `*why` (optional;
 * valid while the checkpoint lives) the reason, e.g. "hot (97% in page
 * cache (cachestat))".
 */
PINIO_API pinio_memory_mode pinio_checkpoint_file_memory(const pinio_checkpoint *cp, size_t i,
                                                         const char **why);

/** The SHA-256 of file `i` as 64 hex digits, when the load verified; else NULL. */
PINIO_API const char *pinio_checkpoint_sha256(const pinio_checkpoint *cp, size_t i);

/**
 * What pinio_checkpoint_report() calls: writes the first `size` bytes of
 * the report (at most the library's sizeof; a larger struct's tail is
 * zeroed), `out->struct_size` set to the bytes that hold the library's
 * fields. A `size` below sizeof(size_t) writes nothing.
 */
PINIO_API void pinio_checkpoint_report_sized(const pinio_checkpoint *cp, pinio_load_report *out,
                                             size_t size);

/** What the load did, into the caller's struct as its header sized it. */
static inline void pinio_checkpoint_report(const pinio_checkpoint *cp, pinio_load_report *out)
{
    pinio_checkpoint_report_sized(cp, out, sizeof(*out));
}

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
 * The bytes of tensor `i` as a #pinio_bytes viewing the arena or the
 * file's mapping without a copy (it holds its own reference on that memory,
 * so it may outlive the checkpoint). Its property says where the bytes
 * live: PINIO_PROP_PINNED when the arena is locked or registered (a GPU
 * backend may DMA from it directly), PINIO_PROP_FILE for a mapped file (the
 * page cache: a GPU backend stages it through pinned memory),
 * PINIO_PROP_NATIVE otherwise (pageable memory). The memory is read-only:
 * a mutable access copies first.
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
