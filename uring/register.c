/* Memory registration (liburing's register.c): the sorted region table
 * behind dst -> slot lookup, the sparse buffer table's slots, lazy regions
 * registered from the read loop, unregistration from any thread, the pool
 * registrar.
 *
 * Why lazy regions: registration pins every page of a region, faulting in
 * the ones not present; for a fresh arena that is the whole cost of
 * faulting it, paid before the first read when done up front (a cold
 * 256 MiB load: 0.88 s against 0.17 s unregistered). A reserved region is
 * registered by the read loop at its first read once the caller says its
 * pages are in (a helper faulting ahead), while the reads of the regions
 * before it are in flight: registering faulted pages only pins them
 * (4 ms for 2 GiB of huge pages), so the load costs about max(read,
 * fault), not their sum. */
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

static int update_slot(pinio_ring *r, unsigned slot, void *addr, size_t len)
{
    if (addr && r->faults && r->faults->regnomem)
        return -ENOMEM;
    struct iovec iov = {addr, len};
    __u64 tag = 0;
    int ret = io_uring_register_buffers_update_tag(&r->ring, slot, &iov, &tag, 1);
    return ret < 0 ? ret : 0;
}

/* A pending region's turn: registered when its pages are ready; a refusal
 * is final for this region (its reads stay plain) and kept in reg_error. */
static void register_pending(pinio_ring *r, pinio__region *g)
{
    if (g->ready && !g->ready(g->ready_ctx, (void *)g->addr, g->len))
        return;
    int ret = update_slot(r, (unsigned)g->slot, (void *)g->addr, g->len);
    if (ret < 0) {
        g->state = PINIO__REG_REFUSED;
        r->reg_error = ret;
        return;
    }
    g->state = PINIO__REG_KERNEL;
    r->nkernel++;
}

int pinio__ring_slot_of(pinio_ring *r, const void *p, size_t n)
{
    uintptr_t a = (uintptr_t)p;
    int slot = -1;
    pthread_mutex_lock(&r->mu);
    int i = region_floor(r, a);
    /* READ_FIXED must stay inside one registered iovec (validate_fixed_range). */
    if (i >= 0 && a - r->regions[i].addr + n <= r->regions[i].len) {
        pinio__region *g = &r->regions[i];
        if (g->state == PINIO__REG_PENDING)
            register_pending(r, g);
        if (g->state == PINIO__REG_KERNEL)
            slot = g->slot;
    }
    pthread_mutex_unlock(&r->mu);
    return slot;
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

/* Takes a slot and a place in the lookup; registers with the kernel now
 * unless `lazy`. */
static int add_region(pinio_ring *r, void *addr, size_t len, bool lazy,
                      pinio_region_ready_fn ready, void *ctx, int *slot)
{
    if (!addr || !len || len > PINIO__REG_MAX_LEN)
        return -EINVAL;
    if (!r->bufs_registered) /* no table: a kernel before 5.19, or the pread rung */
        return -EOPNOTSUPP;
    if (r->backend != PINIO_BACKEND_FIXED_DIRECT)
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
    ret = lazy ? 0 : update_slot(r, s, addr, len);
    if (ret < 0) {
        r->reg_error = ret;
        goto out;
    }
    r->slot_used[s] = 1;
    r->nkernel += !lazy;
    memmove(&r->regions[at + 2], &r->regions[at + 1],
            (r->nregions - (unsigned)(at + 1)) * sizeof *r->regions);
    r->regions[at + 1] = (pinio__region){ a, len, (int)s,
                                          lazy ? PINIO__REG_PENDING : PINIO__REG_KERNEL, ready,
                                          ctx };
    r->nregions++;
    *slot = (int)s;
out:
    pthread_mutex_unlock(&r->mu);
    return ret;
}

int pinio_ring_register_region(pinio_ring *r, void *addr, size_t len, int *slot)
{
    return add_region(r, addr, len, false, NULL, NULL, slot);
}

int pinio_ring_register_region_lazy(pinio_ring *r, void *addr, size_t len,
                                    pinio_region_ready_fn ready, void *ctx, int *slot)
{
    return add_region(r, addr, len, true, ready, ctx, slot);
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
    bool in_kernel = r->regions[i].state == PINIO__REG_KERNEL;
    memmove(&r->regions[i], &r->regions[i + 1], (r->nregions - i - 1) * sizeof *r->regions);
    r->nregions--;
    r->nkernel -= in_kernel;
    int ret = 0;
    if (!in_kernel) {
        r->slot_used[slot] = 0; /* the kernel slot was never filled */
    } else if (pthread_equal(pthread_self(), r->owner)) {
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
