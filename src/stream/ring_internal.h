/* The staging ring (ring.c) that both a stream (stream.c) and a copy from
 * memory (feed.c) hand their sink: the slot limits, and the slots carved
 * from one pinned pool. */
#ifndef PINIO_SRC_STREAM_RING_INTERNAL_H
#define PINIO_SRC_STREAM_RING_INTERNAL_H

#include "pinio/pool.h"

#define PINIO__RING_SLOT_MIN ((size_t)64 << 10)
#define PINIO__RING_SLOT_MAX PINIO_POOL_SLAB_MAX
#define PINIO__RING_SLOTS_MAX 1024u

/* `slots` slots of `slot_size` bytes within the limits above: 0, or
 * -EINVAL with `diag` "WHO: ..." naming the bad one. */
int pinio__ring_check(size_t slot_size, unsigned slots, const char *who, pinio_diag *diag);

/* The ring: refused with -ENOMEM before anything is faulted in when it
 * would not fit the memory left (`advice` says what to change), else one
 * pool placed as `po` says (its slab size is set here) and a region of
 * `slot_size` bytes aligned to `align` (0: the pool's default) per slot,
 * `views[i]` owning it and `bases[i]` its first byte; `*node` the pool's
 * node. On failure what was made is left for pinio__ring_free(). */
int pinio__ring_create(pinio_pool **pool, pinio_view *views, uint8_t **bases, size_t slot_size,
                       unsigned slots, size_t align, pinio_pool_opts *po, const char *who,
                       const char *advice, int *node, pinio_diag *diag);

/* Releases what pinio__ring_create() made, all or part (NULL pool, zeroed
 * views: nothing). */
void pinio__ring_free(pinio_pool *pool, pinio_view *views, unsigned slots);

#endif
