/* The resident loader's destination (arena.c): the arena the pinned files
 * are read into. Its own header, below load.c: load.c drives the arena, the
 * arena knows nothing of pinio_load(); what it needs of the other stages
 * (where each file lands, the hasher fed as reads land) is theirs, in
 * load_internal.h. */
#ifndef PINIO_SRC_LOAD_ARENA_INTERNAL_H
#define PINIO_SRC_LOAD_ARENA_INTERNAL_H

#include "src/load/load_internal.h"

/* ---- arena.c ---------------------------------------------------------- */

typedef struct pinio__arena {
    pinio_pool *pool;       /* when the memory was allocated for this load */
    pinio_view view;        /* the arena (a reference of its own) */
    uint8_t *base;
    size_t used;            /* bytes the pinned files need */
    pinio_arena *kept;      /* the caller's kept arena, or NULL */
    const pinio__fmem *files; /* per plan file: where its reads land */
    pinio_mem_region *regions; /* register_arena: the arena in slabs */
    size_t nregions;
    size_t nregistered;     /* slabs the engine registered by the end of the reads */
    pinio__faulter faulter;
    struct pinio__verify *verify; /* fed as reads land; NULL without --verify */
} pinio__arena;

/* Provides `bytes` of arena for `plan`'s pinned files (laid out in `fm`):
 * the kept arena `opts->arena` when given (grown when too small; -EBUSY
 * while an earlier checkpoint holds it), else fresh memory on the node
 * `opts` asks for (AUTO: the first file's device). Starts faulting it in
 * ahead of the reads when it is fresh. Fills rep->arena_bytes, node,
 * arena_kept, arena_grown. */
int pinio__arena_create(pinio__arena *a, const pinio_plan *plan, const pinio__fmem *fm,
                        uint64_t bytes, const pinio_load_opts *opts, pinio_load_report *rep,
                        pinio_diag *diag);

/* Where plan read `r` lands in the arena. */
static inline uint8_t *pinio__arena_at(const pinio__arena *a, const pinio_plan_read *r)
{
    const pinio__fmem *f = &a->files[r->file];
    return a->base + f->arena_off + (r->dest_offset - f->dest_lo);
}

/* The destination: a read lands at pinio__arena_at(). */
extern const pinio_dest_ops pinio__arena_dest;

/* After the reads: moves the tensors of pinned files whose address misses
 * `align` (tensor_data[i], updated), back to front within the arena's slack.
 * Fills rep->realigned, realigned_bytes, realign_seconds. 0 or -ENOMEM. */
int pinio__arena_realign(pinio__arena *a, const pinio_plan *plan, uint64_t align,
                         const uint8_t **tensor_data, pinio_load_report *rep);

/* After the reads: stops the faulter, checks placement, locks the arena
 * (when RLIMIT_MEMLOCK allows). Fills rep->node_verified, locked, memory. */
void pinio__arena_settle(pinio__arena *a, pinio_load_report *rep);

/* Releases the engine-side state (the pool) and the arena's reference on
 * the memory (the checkpoint holds its own). */
void pinio__arena_close(pinio__arena *a);

#endif
