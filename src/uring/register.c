/* Memory registration (liburing's register.c): the sorted region table
 * behind dst -> slot lookup, the sparse buffer table's slots, unregistration
 * from any thread, the pool registrar. */
#include <errno.h>
#include <string.h>
#include <sys/uio.h>

#include "ring_internal.h"

/* Index of the last region with addr <= p, or -1. */
static int region_floor(const pinio_ring *r, uintptr_t p)
{
    int lo = 0, hi = (int)r->nregions - 1, best = -1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (r->regions[mid].addr <= p) {
            best = mid;
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    return best;
}

int pinio__ring_slot_of(pinio_ring *r, const void *p, size_t n)
{
    uintptr_t a = (uintptr_t)p;
    int slot = -1;
    pthread_mutex_lock(&r->mu);
    int i = region_floor(r, a);
    /* READ_FIXED must stay inside one registered iovec (validate_fixed_range). */
    if (i >= 0 && a - r->regions[i].addr + n <= r->regions[i].len)
        slot = r->regions[i].slot;
    pthread_mutex_unlock(&r->mu);
    return slot;
}

static int update_slot(pinio_ring *r, unsigned slot, void *addr, size_t len)
{
    struct iovec iov = {addr, len};
    __u64 tag = 0;
    int ret = io_uring_register_buffers_update_tag(&r->ring, slot, &iov, &tag, 1);
    return ret < 0 ? ret : 0;
}

void pinio__ring_drain_deferred(pinio_ring *r)
{
    if (!r->ndeferred)
        return;
    pthread_mutex_lock(&r->mu);
    for (unsigned i = 0; i < r->ndeferred; i++) {
        /* An empty iovec clears the slot; the kernel drops its pin once the
         * last request that uses the old buffer has completed. */
        (void)update_slot(r, (unsigned)r->deferred[i], NULL, 0);
        r->slot_used[r->deferred[i]] = 0;
    }
    r->ndeferred = 0;
    pthread_mutex_unlock(&r->mu);
}

int pinio_ring_register_region(pinio_ring *r, void *addr, size_t len, int *slot)
{
    if (!addr || !len || len > PINIO__REG_MAX_LEN)
        return -EINVAL;
    if (!r->bufs_registered || r->backend != PINIO_BACKEND_FIXED_DIRECT)
        return r->reg_error ? r->reg_error : -EOPNOTSUPP;
    pinio__ring_drain_deferred(r);
    uintptr_t a = (uintptr_t)addr;
    pthread_mutex_lock(&r->mu);
    int ret = 0;
    int at = region_floor(r, a); /* insert after `at` */
    unsigned s = 0;
    if ((at >= 0 && r->regions[at].addr + r->regions[at].len > a) ||
        (at + 1 < (int)r->nregions && a + len > r->regions[at + 1].addr)) {
        ret = -EINVAL;
        goto out;
    }
    while (s < PINIO__BUF_TABLE && r->slot_used[s])
        s++;
    if (s == PINIO__BUF_TABLE) {
        ret = -ENOSPC;
        goto out;
    }
    ret = r->faults && r->faults->regnomem ? -ENOMEM : update_slot(r, s, addr, len);
    if (ret < 0) {
        r->reg_error = ret;
        goto out;
    }
    r->slot_used[s] = 1;
    memmove(&r->regions[at + 2], &r->regions[at + 1],
            (r->nregions - (unsigned)(at + 1)) * sizeof *r->regions);
    r->regions[at + 1] = (pinio__region){a, len, (int)s};
    r->nregions++;
    *slot = (int)s;
out:
    pthread_mutex_unlock(&r->mu);
    return ret;
}

int pinio_ring_unregister_region(pinio_ring *r, int slot)
{
    pthread_mutex_lock(&r->mu);
    unsigned i = 0;
    while (i < r->nregions && r->regions[i].slot != slot)
        i++;
    if (i == r->nregions) {
        pthread_mutex_unlock(&r->mu);
        return -ENOENT;
    }
    /* Out of the lookup first: from now on no read uses this slot, even if
     * the memory is unmapped and the address reused at once. */
    memmove(&r->regions[i], &r->regions[i + 1], (r->nregions - i - 1) * sizeof *r->regions);
    r->nregions--;
    int ret = 0;
    if (pthread_equal(pthread_self(), r->owner)) {
        ret = update_slot(r, (unsigned)slot, NULL, 0);
        r->slot_used[slot] = 0;
    } else {
        r->deferred[r->ndeferred++] = slot; /* slot stays taken until drained */
    }
    pthread_mutex_unlock(&r->mu);
    return ret;
}

static int registrar_reg(void *ctx, void *addr, size_t len, int *slot)
{
    return pinio_ring_register_region(ctx, addr, len, slot);
}

static void registrar_unreg(void *ctx, int slot)
{
    (void)pinio_ring_unregister_region(ctx, slot);
}

pinio_pool_registrar pinio_ring_registrar(pinio_ring *r)
{
    return (pinio_pool_registrar){.ctx = r, .reg = registrar_reg, .unreg = registrar_unreg};
}
