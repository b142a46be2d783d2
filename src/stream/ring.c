/* The staging ring (ring_internal.h). */
#include <errno.h>
#include <stdio.h>

#include "src/base/mem.h"
#include "src/stream/ring_internal.h"

int pinio__ring_check(size_t slot_size, unsigned slots, const char *who, pinio_diag *diag)
{
    if (slot_size < PINIO__RING_SLOT_MIN || slot_size > PINIO__RING_SLOT_MAX ||
        (slot_size & (slot_size - 1))) {
        pinio_diag_set(diag, -EINVAL, "%s: slot size %zu is not a power of two from 64 KiB to 1 GiB",
                       who, slot_size);
        return -EINVAL;
    }
    if (slots < 2 || slots > PINIO__RING_SLOTS_MAX) {
        pinio_diag_set(diag, -EINVAL, "%s: %u slots; the ring takes 2 to %u", who, slots,
                       PINIO__RING_SLOTS_MAX);
        return -EINVAL;
    }
    return 0;
}

int pinio__ring_create(pinio_pool **pool, pinio_view *views, uint8_t **bases, size_t slot_size,
                       unsigned slots, size_t align, pinio_pool_opts *po, const char *who,
                       const char *advice, int *node, pinio_diag *diag)
{
    size_t ring = (size_t)slots * slot_size;
    po->slab_size = ring < PINIO__RING_SLOT_MAX ? ring : PINIO__RING_SLOT_MAX;
    /* The slots are pinned and faulted in: a ring larger than the memory
     * left is refused as the resident load's arena is, not OOM-killed. */
    char what[96];
    snprintf(what, sizeof(what), "the staging ring (%u slots of %zu bytes)", slots, slot_size);
    int rc = pinio__mem_check(ring, what, advice, diag);
    if (rc < 0)
        return rc;
    if ((rc = pinio_pool_create(pool, po, diag)) < 0)
        return rc;
    for (unsigned i = 0; i < slots; i++) {
        pinio_pool_region_info info;
        rc = pinio_pool_alloc(*pool, slot_size, align, &views[i], &info);
        if (rc < 0) {
            pinio_diag_set(diag, rc, "%s: cannot allocate staging slot %u of %zu bytes: %s", who,
                           i, slot_size, pinio_strerror(rc));
            return rc;
        }
        bases[i] = info.data;
    }
    pinio_pool_stats st;
    pinio_pool_get_stats(*pool, &st);
    *node = st.node;
    return 0;
}

void pinio__ring_free(pinio_pool *pool, pinio_view *views, unsigned slots)
{
    for (unsigned i = 0; views && i < slots; i++)
        pinio_view_release(&views[i]);
    pinio_pool_destroy(pool);
}
