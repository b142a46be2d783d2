/**
 * @file pool.h
 * @brief The pinned pool: NUMA-placed, optionally io_uring-registered memory
 *        handed out as refcounted #pinio_view regions.
 *
 * A pool owns slabs. A slab is one anonymous mapping of at most
 * #PINIO_POOL_SLAB_MAX bytes (1 GiB: the kernel's limit for one registered
 * buffer), prepared in the only order that keeps placement true once pages
 * are pinned (pinned pages can no longer migrate):
 *
 *   mmap (anonymous, 2 MiB aligned) -> mbind to the node -> MADV_HUGEPAGE
 *   (optional) -> prefault (optional) -> register through the registrar
 *   (optional; this also faults and pins every page) -> verify the node of
 *   sampled pages with move_pages(2) and record the result.
 *
 * Regions are bump-allocated inside the current slab; a region never crosses
 * a slab, so one region is at most #PINIO_POOL_SLAB_MAX bytes; a caller that
 * needs more in one piece asks pinio_pool_alloc_contig(), which lays adjacent
 * dedicated slabs side by side in one virtual range. Each region is a #pinio_view
 * holding a reference on its slab. A slab is unregistered and unmapped when
 * its last reference is gone: the pool's own (held while the slab is the one
 * being filled, dropped when it is full or the pool is destroyed) or any
 * region's. Releasing regions before or after pinio_pool_destroy() is equally
 * valid.
 *
 * Registration is best effort: if the slab does not fit the memlock budget
 * (`registrable` of pinio_sys_probe(): RLIMIT_MEMLOCK minus what the process
 * already has locked or pinned, unlimited with CAP_IPC_LOCK) or the
 * registrar fails, the slab stays usable but unregistered, and the reason is
 * recorded (pinio_pool_get_stats()). The budget is an upper bound: the kernel
 * charges registrations per user across processes, so `reg` can still fail
 * with -ENOMEM, which is handled the same way.
 *
 * Threads: pinio_pool_alloc(), pinio_pool_query(), pinio_pool_get_stats() and
 * pinio_pool_unregister() may be called concurrently on one pool (one mutex).
 * Regions may be released from any thread, also after the pool is destroyed.
 */
#ifndef PINIO_POOL_H
#define PINIO_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinio/common.h"
#include "pinio/numa.h"
#include "pinio/view.h"

struct pinio_bytes;

#ifdef __cplusplus
extern "C" {
#endif

/** Largest slab, and so largest region: the kernel's per-buffer registration limit. */
#define PINIO_POOL_SLAB_MAX ((size_t)1 << 30)

/** Default slab size (a larger single request gets a slab of its own size). */
#define PINIO_POOL_SLAB_DEFAULT ((size_t)64 << 20)

/** Region alignment when the caller passes 0: the usual O_DIRECT requirement. */
#define PINIO_POOL_ALIGN_DEFAULT ((size_t)4096)

/** Largest region alignment (slabs start on a 2 MiB boundary). */
#define PINIO_POOL_ALIGN_MAX ((size_t)2 << 20)

/**
 * How a pool registers slabs with an I/O engine, without numa/ depending on
 * it (uring/ provides one for a ring).
 *
 * `reg` registers [addr, addr+len) and stores an engine-specific id (for
 * io_uring, the fixed-buffer index) in `*slot`; it returns 0 or a negative
 * errno (-ENOMEM and -EPERM are the expected "over the memlock limit"
 * answers). `unreg` undoes one successful `reg`; it cannot fail.
 *
 * Lifetime: `ctx` must stay valid until every slab registered through it is
 * unregistered: call pinio_pool_unregister() before tearing the engine down
 * (regions may well outlive the ring). `unreg` runs on the thread that drops
 * a slab's last reference, or in pinio_pool_unregister(), with the pool's
 * mutex held: it must not call back into the pool.
 */
typedef struct pinio_pool_registrar {
    void *ctx;
    /** register [addr, addr+len) with a ring; on success store an id in *slot */
    int (*reg)(void *ctx, void *addr, size_t len, int *slot);
    void (*unreg)(void *ctx, int slot);
} pinio_pool_registrar;

/** Where a pool places its memory. */
typedef enum pinio_pool_placement {
    PINIO_POOL_ANY = 0,   /**< no policy: pages land where first touched */
    PINIO_POOL_NODE,      /**< #pinio_pool_opts.node */
    PINIO_POOL_FILE_NODE, /**< the node of #pinio_pool_opts.file's block device */
    PINIO_POOL_LOCAL,     /**< the node of the thread calling pinio_pool_create() */
} pinio_pool_placement;

/** Options for pinio_pool_create(); fill with pinio_pool_opts_default() first. */
typedef struct pinio_pool_opts {
    size_t struct_size; /**< sizeof(pinio_pool_opts), set by pinio_pool_opts_default() */
    pinio_pool_placement placement; /**< default PINIO_POOL_ANY */
    int node;                       /**< for PINIO_POOL_NODE */
    /**
     * For PINIO_POOL_FILE_NODE: a path whose device decides the node. When
     * the node is unknown (tmpfs, VM without proximity info), the pool falls
     * back to the creating thread's node and says so in the stats. Not kept.
     */
    const char *file;
    /** Topology for FILE_NODE/LOCAL (NULL: the default sysfs root). Not kept. */
    const pinio_topo *topo;
    /** Slab size, rounded up to 2 MiB and capped at PINIO_POOL_SLAB_MAX. 0: default. */
    size_t slab_size;
    /**
     * false (default): MPOL_PREFERRED, the kernel falls back to other nodes
     * when the node is full or has no memory (the verification then reports
     * it). true: MPOL_BIND, which can end in the OOM killer when the node is
     * full.
     */
    bool strict;
    bool huge_pages; /**< MADV_HUGEPAGE on each slab (default true) */
    /**
     * Touch every page at slab creation (default true). Registration faults
     * pages in anyway; without either, pages appear on first use and the
     * placement check reports "not present".
     */
    bool prefault;
    /** Copied; NULL `reg` (the default) means slabs are never registered. */
    pinio_pool_registrar registrar;
} pinio_pool_opts;

/** Sets every field to its default (see the field docs), struct_size included. */
static inline void pinio_pool_opts_default(pinio_pool_opts *opts);

/**
 * What pinio_pool_opts_default() calls: fills the first `size` bytes of `*opts`
 * with the defaults (struct_size = `size`; fields past this library's
 * struct stay zero). Inline callers pass their header's sizeof, so a
 * program built against an older, smaller struct is never written past.
 */
PINIO_API void pinio_pool_opts_init(pinio_pool_opts *opts, size_t size);

static inline void pinio_pool_opts_default(pinio_pool_opts *opts)
{
    pinio_pool_opts_init(opts, sizeof(*opts));
}

/** Why a slab is or is not registered. */
typedef enum pinio_pool_reg_state {
    PINIO_POOL_REG_OK = 0,        /**< registered; `slot` is valid */
    PINIO_POOL_REG_NONE,          /**< the pool has no registrar (or it was dropped) */
    PINIO_POOL_REG_OVER_MEMLOCK,  /**< not attempted: the slab exceeds the memlock budget */
    PINIO_POOL_REG_FAILED,        /**< the registrar returned an error (`reg_error`) */
} pinio_pool_reg_state;

/** Result of the placement check on sampled pages of a slab. */
typedef enum pinio_pool_verify {
    PINIO_POOL_VERIFY_NOT_ASKED = 0, /**< PINIO_POOL_ANY: no node to check against */
    PINIO_POOL_VERIFY_OK,            /**< every sampled page is on the wanted node */
    PINIO_POOL_VERIFY_MISPLACED,     /**< some sampled page is on another node */
    PINIO_POOL_VERIFY_NOT_PRESENT,   /**< pages not faulted in yet (no prefault, no registration) */
    PINIO_POOL_VERIFY_UNAVAILABLE,   /**< move_pages(2) failed (e.g. ENOSYS, seccomp) */
} pinio_pool_verify;

/** What pinio_pool_query() reports about the slab under a region. */
typedef struct pinio_pool_region_info {
    /**
     * Writable pointer to the region's (or queried range's) first byte, i.e.
     * slab_base + offset. pinio_view_data_mut()
     * refuses pool regions because their slab reference is shared with other
     * regions; regions never overlap, so the holder of a region may write it.
     */
    uint8_t *data;
    void *slab_base;             /**< start of the slab (the registered buffer) */
    size_t slab_size;            /**< its length */
    size_t offset;               /**< the region's offset inside the slab */
    pinio_pool_reg_state reg;    /**< registered? (READ_FIXED when PINIO_POOL_REG_OK) */
    int slot;                    /**< registrar's id when registered, else -1 */
    int reg_error;               /**< registrar's error for PINIO_POOL_REG_FAILED, else 0 */
    int node;                    /**< node asked for, or PINIO_NODE_UNKNOWN for ANY */
    pinio_pool_verify verify;    /**< result of the placement check */
    int found_node;              /**< node of the first sampled page, -1 if none */
    bool huge_pages;             /**< MADV_HUGEPAGE was applied */
} pinio_pool_region_info;

/** Counters and the latest reasons, from pinio_pool_get_stats(). */
typedef struct pinio_pool_stats {
    size_t slabs;              /**< live slabs (the pool's and those kept by regions) */
    size_t slabs_registered;   /**< of which registered */
    uint64_t bytes_mapped;     /**< bytes of live slabs */
    uint64_t bytes_registered; /**< bytes of live registered slabs */
    uint64_t bytes_handed_out; /**< region bytes given out so far (cumulative) */
    size_t slabs_created;      /**< cumulative */
    size_t slabs_fallback;     /**< cumulative: slabs left unregistered with a registrar present */
    size_t slabs_misplaced;    /**< cumulative: PINIO_POOL_VERIFY_MISPLACED */
    int node;                  /**< resolved node, PINIO_NODE_UNKNOWN for ANY */
    char placement[256];       /**< how the node was chosen, one line */
    /** Why the latest slab was not registered ("" if every slab was); one line
     *  naming the limit and how to raise it. */
    char fallback_reason[512];
} pinio_pool_stats;

/** Opaque pool handle. */
typedef struct pinio_pool pinio_pool;

/**
 * Creates a pool; no memory is mapped until the first pinio_pool_alloc().
 *
 * @param opts NULL for the defaults.
 * @param diag optional; names the option or the file on failure.
 * @return 0 with `*out` owning the pool (pinio_pool_destroy()); on failure
 *         `*out` is untouched: -EINVAL (NULL out, struct_size not from
 *         pinio_pool_opts_default(), bad
 *         placement, node < 0 or not below the system's node count, FILE_NODE
 *         without file, registrar with only one of reg/unreg), a negative errno
 *         from stat(2) of `file`, -ENOMEM.
 */
PINIO_API int pinio_pool_create(pinio_pool **out, const pinio_pool_opts *opts,
                                pinio_diag *diag);

/**
 * Drops the caller's handle and the pool's reference on its current slab.
 * Slabs still referenced by regions stay mapped (and registered) until their
 * last region is released. NULL is allowed.
 */
PINIO_API void pinio_pool_destroy(pinio_pool *pool);

/**
 * Hands out `len` bytes aligned to `align` (0: #PINIO_POOL_ALIGN_DEFAULT).
 *
 * The bytes are zero when their slab was freshly mapped and unspecified in
 * general: a region never reuses bytes of another region, but the caller
 * should not rely on their content.
 *
 * @param[out] out on success a view owning one reference on the slab;
 *        untouched on failure. len 0 gives an empty view with no reference.
 *        The bytes are the caller's to write: through `info->data`, or by
 *        casting away the const of `out->ptr` (see pinio_pool_region_info.data).
 * @param[out] info optional: the slab's state, as pinio_pool_query() reports.
 * @return 0; -EINVAL (len > PINIO_POOL_SLAB_MAX, align not a power of two or
 *         above PINIO_POOL_ALIGN_MAX); -ENOMEM (mmap/mbind failed; nothing
 *         is leaked).
 */
PINIO_API int pinio_pool_alloc(pinio_pool *pool, size_t len, size_t align, pinio_view *out,
                               pinio_pool_region_info *info);

/**
 * pinio_pool_alloc() handed out as #pinio_bytes of property
 * #PINIO_PROP_PINNED, the seed's staging use: the caller fills the pinned
 * memory in place (pinio_bytes_data_mut() is zero-copy while these bytes
 * are the only holder, e.g. pinio_bytes_read() of a FILE window straight
 * into it), then hands it on (a clone shares it; a later write through
 * either copies first).
 * @param[out] out on success the caller owns the bytes (pinio_bytes_free());
 *        they hold one reference on the slab, so they may outlive the pool.
 *        Untouched on failure.
 * @return 0; as pinio_pool_alloc(); -EINVAL for a NULL pool or out.
 */
PINIO_API int pinio_pool_alloc_bytes(pinio_pool *pool, size_t len, size_t align,
                                     struct pinio_bytes **out);

/**
 * Describes the slab that holds [addr, addr+len): registered or not, slot,
 * node, placement check. Only slabs that are still alive can be found.
 * @return 0; -ENOENT when the range is not inside one live slab of this pool;
 *         -EINVAL for NULL arguments.
 */
PINIO_API int pinio_pool_query(pinio_pool *pool, const void *addr, size_t len,
                               pinio_pool_region_info *info);

/**
 * Hands out `len` bytes (4096-aligned) as one contiguous virtual range, where
 * `len` may exceed #PINIO_POOL_SLAB_MAX. Up to #PINIO_POOL_SLAB_MAX this is
 * pinio_pool_alloc(pool, len, 0, out, info). Above it, the range is made of
 * adjacent dedicated slabs of at most #PINIO_POOL_SLAB_MAX bytes each, the
 * first starting at the range, every one placed, registered and verified as
 * any slab is (each is a registered buffer of its own: the kernel's limit is
 * per buffer). So a read that does not cross a multiple of
 * #PINIO_POOL_SLAB_MAX counted from the range's start lies inside one
 * registered buffer.
 *
 * @param pool the pool; not NULL.
 * @param len bytes wanted; 0 gives an empty view with no reference.
 * @param[out] out on success a view owning one reference on every slab of the
 *        range; releasing it (any thread, before or after
 *        pinio_pool_destroy()) frees them all. Untouched on failure, when
 *        nothing stays mapped or referenced.
 * @param[out] info optional: the first slab's state as pinio_pool_query()
 *        reports it, except that `reg` is #PINIO_POOL_REG_OK only when every
 *        slab of the range is registered (else, for a range above
 *        #PINIO_POOL_SLAB_MAX, #PINIO_POOL_REG_OVER_MEMLOCK). Unspecified on
 *        failure.
 * @return 0; -EINVAL (NULL pool or out); -ENOMEM (mmap/mbind/populate
 *         failed, or no memory for the bookkeeping).
 */
PINIO_API int pinio_pool_alloc_contig(pinio_pool *pool, size_t len, pinio_view *out,
                                      pinio_pool_region_info *info);

/**
 * Re-checks where the pages of [addr, addr+len) are: re-runs the placement
 * check (move_pages(2) on sampled pages) on the part of every live slab of
 * this pool that overlaps the range. For memory that was not faulted in when
 * its slab was created (prefault off, no registrar): check it again once the
 * data is in.
 *
 * @param pool the pool; not NULL.
 * @param addr first byte; must lie in a live slab of this pool.
 * @param len bytes from `addr` (may span several slabs, e.g. a range of
 *        pinio_pool_alloc_contig()).
 * @param[out] info on success: the slab holding `addr` as pinio_pool_query()
 *        reports it (its `found_node` from this check), with `verify` the
 *        worst result over the range: #PINIO_POOL_VERIFY_OK only when every
 *        slab part is. Unspecified on failure. Nothing is owned by the caller.
 * @return 0; -ENOENT (no live slab of this pool holds `addr`); -EINVAL (NULL
 *         pool, addr or info). A misplaced part also counts in
 *         pinio_pool_stats::slabs_misplaced.
 */
PINIO_API int pinio_pool_verify_range(pinio_pool *pool, const void *addr, size_t len,
                                      pinio_pool_region_info *info);

/**
 * Unregisters every live registered slab now (their memory stays valid and
 * readable by existing regions) and forgets the registrar: later slabs are
 * not registered. Call it before the engine behind the registrar goes away.
 * Afterwards pinio_pool_query() reports PINIO_POOL_REG_NONE for those slabs.
 */
PINIO_API void pinio_pool_unregister(pinio_pool *pool);

/** Fills `out` with the pool's counters. `pool` and `out` must not be NULL. */
PINIO_API void pinio_pool_get_stats(pinio_pool *pool, pinio_pool_stats *out);

/** A short name for a verification result ("ok", "misplaced", ...). */
PINIO_API const char *pinio_pool_verify_name(pinio_pool_verify v);

#ifdef __cplusplus
}
#endif

#endif /* PINIO_POOL_H */
