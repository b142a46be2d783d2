/*
 * The resident loader's destination: one arena holding the pinned files'
 * reads back to back (modes.c lays them out; a read lands at
 * pinio__arena_at()), placed on a NUMA node, faulted in ahead of the reads
 * by a helper thread, its placement checked and its pages locked once they
 * hold the data. A kept arena (pinio_arena) is the same memory reused:
 * already faulted and locked, so a second load pays neither.
 *
 * Why neither prefaulted nor registered up front: faulting fresh anonymous
 * memory runs at about the speed of the disk here (0.6 s for 1 GiB on the
 * development VM), and registration faults every page before the first
 * read can start; a cold 1 GiB load took 1.19-1.34 s that way and 0.87 s
 * when the reads fault pages in as they go, a helper faulting ahead on
 * another CPU (PERFORMANCE.md).
 *
 * With register_arena the arena is cut into slabs that the engine
 * registers one by one (pinio_ring_register_region_lazy) at the first read
 * into each, while the reads before it are in flight: the helper has
 * faulted most of the slab by then, and the registration pins those pages
 * and faults the rest on the loader's thread, which otherwise only waits
 * for completions. Waiting for the helper to finish a slab before
 * registering it measured no faster, and left the first 64 MiB (the
 * engine's window) unregistered: a cold 1 GiB load took 0.48-0.85 s
 * (median 0.49) waiting, 0.48-0.60 s (0.50) registering at the first read,
 * 0.46-1.9 s (0.50) unregistered; 5 alternating runs, shared 2-CPU VM.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pinio/sys.h"
#include "src/base/mem.h"
#include "src/load/arena_internal.h"

/* Slabs registered one by one (register_arena): small enough that the
 * first reads wait little for the helper to fault a whole slab (16 MiB:
 * 4 requests of the default size, which start at multiples of it from the
 * arena's start, so few cross a slab boundary and go plain), few enough to
 * fit the engine's table of 1024 slots: 1/512 of a larger arena, up to the
 * kernel's 1 GiB per registered buffer. */
#define SLAB_MIN ((size_t)16 << 20)
#define SLAB_MAX ((size_t)1 << 30)
#define SLABS_MAX 512

struct pinio_arena {
    pinio_view view;        /* the memory; the arena's own reference */
    int node;
    bool node_verified;
    bool faulted;           /* every page was faulted in by an earlier load */
};

int pinio_arena_create(pinio_arena **out)
{
    if (!out)
        return -EINVAL;
    *out = calloc(1, sizeof(**out));
    if (!*out)
        return -ENOMEM;
    (*out)->node = -1;
    return 0;
}

void pinio_arena_release(pinio_arena *a)
{
    if (!a)
        return;
    pinio_view_release(&a->view);
    free(a);
}

size_t pinio_arena_size(const pinio_arena *a)
{
    return a ? a->view.len : 0;
}

/* The kept arena: reused when it is large enough, else its memory is
 * dropped (the caller's earlier checkpoints have let go of it) and fresh
 * memory allocated below. Returns 1 when reused. */
static int kept_take(pinio__arena *a, pinio_arena *k, uint64_t bytes, pinio_load_report *rep,
                     pinio_diag *diag)
{
    a->kept = k;
    rep->arena_kept = true;
    if (k->view.len && !pinio_view_is_unique(&k->view)) {
        pinio_diag_set(diag, -EBUSY,
                       "the kept arena is still in use: release the checkpoint and tensor "
                       "bytes of the previous load through it first");
        return -EBUSY;
    }
    if (k->view.len >= bytes) {
        a->view = pinio_view_clone(&k->view);
        rep->node = k->node;
        rep->node_verified = k->node_verified;
        return 1;
    }
    pinio_view_release(&k->view);
    k->faulted = false;
    rep->arena_grown = true;
    return 0;
}

int pinio__arena_create(pinio__arena *a, const pinio_plan *plan, const pinio__fmem *fm,
                        uint64_t bytes, const pinio_load_opts *opts, pinio_load_report *rep,
                        pinio_diag *diag)
{
    memset(a, 0, sizeof(*a));
    a->files = fm;
    a->used = (size_t)bytes;
    rep->node = -1;
    rep->arena_bytes = 0;
    if (!bytes)
        return 0; /* every file mapped, or nothing to read */
    size_t size = (size_t)bytes;
    if (opts->arena) {
        int rc = kept_take(a, opts->arena, bytes, rep, diag);
        if (rc < 0)
            return rc;
        if (rc == 1)
            goto ready;
        /* Grown to what this load needs, in whole huge pages. */
        size = (size + ((size_t)2 << 20) - 1) & ~(((size_t)2 << 20) - 1);
    }
    /* An arena larger than the memory left would be faulted in until the
     * OOM killer chose a process (perhaps another one): say so first. */
    int mrc = pinio__mem_check(size, "the arena",
                               "select fewer tensors (--filter), stream them (--device), or map "
                               "hot files (--memory mapped)",
                               diag);
    if (mrc < 0)
        return mrc;
    pinio_pool_opts po;
    pinio_pool_opts_default(&po);
    po.prefault = false;
    if (opts->node >= 0) {
        po.placement = PINIO_POOL_NODE;
        po.node = opts->node;
    } else if (opts->node == PINIO_NODE_AUTO && plan->nfiles &&
               !pinio_plan_file_at(plan, 0)->object) { /* an object comes by the NIC */
        po.placement = PINIO_POOL_FILE_NODE;
        po.file = pinio_plan_file_at(plan, 0)->path;
    }
    int rc = pinio_pool_create(&a->pool, &po, diag);
    if (rc < 0)
        return rc;
    rc = pinio_pool_alloc_contig(a->pool, size, &a->view, NULL);
    if (rc < 0) {
        pinio_diag_set(diag, rc, "cannot allocate a %zu-byte arena: %s", size,
                       pinio_strerror(rc));
        pinio_pool_destroy(a->pool);
        a->pool = NULL;
        return rc;
    }
    pinio_pool_stats ps;
    pinio_pool_get_stats(a->pool, &ps);
    rep->node = ps.node;
    if (a->kept) {
        a->kept->view = pinio_view_clone(&a->view);
        a->kept->node = ps.node;
    }
ready:
    rep->arena_bytes = a->view.len;
    a->base = (uint8_t *)a->view.ptr;
    if (opts->register_arena) {
        size_t slab = (a->used / SLABS_MAX + ((size_t)2 << 20) - 1) & ~(((size_t)2 << 20) - 1);
        slab = slab < SLAB_MIN ? SLAB_MIN : slab > SLAB_MAX ? SLAB_MAX : slab;
        a->nregions = (a->used + slab - 1) / slab;
        a->regions = calloc(a->nregions, sizeof(*a->regions));
        if (!a->regions) {
            pinio__arena_close(a);
            return -ENOMEM;
        }
        for (size_t i = 0; i < a->nregions; i++) {
            size_t off = i * slab;
            a->regions[i] = (pinio_mem_region){ .addr = a->base + off,
                                                .len = a->used - off < slab ? a->used - off
                                                                            : slab };
        }
    }
    /* A kept arena's pages stay faulted in (and locked) between loads:
     * that is what keeping it buys. */
    if (!a->kept || !a->kept->faulted)
        pinio__faulter_start(&a->faulter, a->base, a->used);
    return 0;
}

static int arena_claim(void *ctx, size_t i, const pinio_plan_read *r, void **mem)
{
    (void)i;
    *mem = pinio__arena_at(ctx, r);
    return 0;
}

static int arena_landed(void *ctx, size_t i, const pinio_plan_read *r, void *mem)
{
    (void)i;
    (void)mem;
    pinio__arena *a = ctx;
    if (a->verify)
        pinio__verify_landed(a->verify, r);
    return 0;
}

const pinio_dest_ops pinio__arena_dest = {
    .size = sizeof(pinio_dest_ops),
    .claim = arena_claim,
    .landed = arena_landed,
};

static int cmp_addr(const void *x, const void *y, void *ctx)
{
    const uint8_t *const *d = ctx;
    const uint8_t *p = d[*(const size_t *)x], *q = d[*(const size_t *)y];
    return p < q ? -1 : p > q;
}

/* Each tensor moves up to the next multiple of `align` at or past both its
 * old address and the end of the tensor before it, so the moves are done
 * back to front: a tensor only ever lands on bytes already moved away or
 * on slack, and the arena holds `align` bytes of slack per tensor. */
int pinio__arena_realign(pinio__arena *a, const pinio_plan *plan, uint64_t align,
                         const uint8_t **tensor_data, pinio_load_report *rep)
{
    if (align <= 1 || !a->used)
        return 0;
    pinio__faulter_stop(&a->faulter);
    double t0 = pinio__now_s();
    size_t *idx = malloc((plan->ntensors ? plan->ntensors : 1) * sizeof(*idx));
    size_t *to = malloc((plan->ntensors ? plan->ntensors : 1) * sizeof(*to));
    if (!idx || !to) {
        free(idx);
        free(to);
        return -ENOMEM;
    }
    size_t n = 0;
    for (size_t i = 0; i < plan->ntensors; i++) {
        if (a->files[plan->tensors[i].file].mode != PINIO_MEMORY_PINNED ||
            a->files[plan->tensors[i].file].coop) /* shared: in its segment, never moved */
            continue;
        if (plan->tensors[i].nbytes)
            idx[n++] = i;
        else
            tensor_data[i] = a->base; /* empty: any aligned address */
    }
    qsort_r(idx, n, sizeof(*idx), cmp_addr, tensor_data);
    size_t end = 0;
    for (size_t k = 0; k < n; k++) {
        size_t old = (size_t)(tensor_data[idx[k]] - a->base);
        size_t at = old > end ? old : end;
        to[k] = (at + (size_t)align - 1) & ~((size_t)align - 1);
        end = to[k] + (size_t)plan->tensors[idx[k]].nbytes;
    }
    for (size_t k = n; k-- > 0;) {
        uint8_t *from = (uint8_t *)tensor_data[idx[k]];
        if (a->base + to[k] == from)
            continue;
        memmove(a->base + to[k], from, (size_t)plan->tensors[idx[k]].nbytes);
        tensor_data[idx[k]] = a->base + to[k];
        rep->realigned++;
        rep->realigned_bytes += plan->tensors[idx[k]].nbytes;
    }
    free(idx);
    free(to);
    rep->realign_seconds = pinio__now_s() - t0;
    return 0;
}

void pinio__arena_settle(pinio__arena *a, pinio_load_report *rep)
{
    pinio__faulter_stop(&a->faulter);
    if (!a->view.len) {
        snprintf(rep->memory, sizeof(rep->memory), "no arena (%s)",
                 rep->share_bytes || rep->read_bytes
                                     ? "every file read is in memory of its own (see share)"
                 : rep->files_mapped ? "every file mapped"
                                     : "nothing to read");
        return;
    }
    /* Placement is checked now that the pages exist, then the pages are
     * locked so that they stay put for the checkpoint's life (and for a
     * later cuMemHostRegister) -- when the memlock budget allows it. A
     * reused kept arena was checked when it was allocated. */
    pinio_pool_region_info vi;
    if (a->pool && pinio_pool_verify_range(a->pool, a->view.ptr, a->view.len, &vi) == 0)
        rep->node_verified = vi.verify == PINIO_POOL_VERIFY_OK;
    pinio_sysinfo si;
    pinio_sys_probe(&si);
    if (si.registrable != PINIO_UNLIMITED && si.registrable < a->view.len) {
        snprintf(rep->memory, sizeof(rep->memory),
                 "not locked: the arena exceeds what RLIMIT_MEMLOCK still allows (%llu bytes); "
                 "raise it with ulimit -l or grant CAP_IPC_LOCK",
                 (unsigned long long)si.registrable);
    } else if (mlock(a->view.ptr, a->view.len) == 0) {
        rep->locked = true;
        snprintf(rep->memory, sizeof(rep->memory), "locked in RAM (mlock)");
    } else {
        int e = -errno;
        snprintf(rep->memory, sizeof(rep->memory), "not locked: mlock failed: %s",
                 pinio_strerror(e));
    }
    if (rep->registered)
        pinio__appendf(rep->memory, sizeof(rep->memory),
                       ", registered with io_uring slab by slab as the reads reached it "
                       "(register_arena: %zu of %zu slabs)",
                       a->nregistered, a->nregions);
    else
        pinio__appendf(rep->memory, sizeof(rep->memory), ", %s",
                       a->nregions ? "not registered with io_uring: asked for, but no read went "
                                     "by READ_FIXED (hot files read buffered, or the engine "
                                     "refused)"
                                   : "not registered with io_uring (the default: registering "
                                     "slab by slab measured no faster than O_DIRECT into huge "
                                     "pages; --register asks for it)");
    if (a->kept) {
        pinio__appendf(rep->memory, sizeof(rep->memory), ", kept arena %s",
                       rep->arena_grown ? "allocated for this load" : "reused");
        a->kept->faulted = true;
        a->kept->node_verified = rep->node_verified;
    }
}

void pinio__arena_close(pinio__arena *a)
{
    pinio__faulter_stop(&a->faulter);
    if (a->pool) {
        /* The pool must forget any ring before the ring goes; the slabs live
         * on in the arena's view. */
        pinio_pool_unregister(a->pool);
        pinio_pool_destroy(a->pool);
        a->pool = NULL;
    }
    pinio_view_release(&a->view);
    free(a->regions);
    a->regions = NULL;
    a->nregions = 0;
}
