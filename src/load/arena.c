/*
 * The resident loader's destination: one arena, laid out as the plan
 * (a read lands at arena + dest_offset), placed on a NUMA node, faulted in
 * ahead of the reads by a helper thread, its placement checked and its
 * pages locked once they hold the data.
 *
 * Why neither prefaulted nor registered up front: faulting fresh anonymous
 * memory runs at about the speed of the disk here (0.6 s for 1 GiB on the
 * development VM), and registration faults every page before the first
 * read can start; a cold 1 GiB load took 1.19-1.34 s that way and 0.87 s
 * when the reads fault pages in as they go, a helper faulting ahead on
 * another CPU (PERFORMANCE.md).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pinio/sys.h"
#include "src/load/load_internal.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

/* Chunks the helper faults at a time: two huge pages. */
#define FAULT_CHUNK ((size_t)4 << 20)

/* MADV_POPULATE_WRITE faults pages in without writing to them, so it is
 * safe while reads land in the same pages (a touch loop would not be: it
 * could overwrite bytes a read already placed). Kernels without it answer
 * EINVAL and the reads fault the pages themselves. */
static void *fault_ahead(void *arg)
{
    pinio__faulter *f = arg;
    for (size_t off = 0; off < f->len; off += FAULT_CHUNK) {
        if (atomic_load_explicit(&f->stop, memory_order_relaxed))
            break;
        size_t n = f->len - off < FAULT_CHUNK ? f->len - off : FAULT_CHUNK;
        if (madvise(f->base + off, n, MADV_POPULATE_WRITE) != 0)
            break;
    }
    return NULL;
}

static void faulter_start(pinio__faulter *f, uint8_t *base, size_t len)
{
    f->base = base;
    f->len = len;
    atomic_init(&f->stop, false);
    /* Below a few chunks a thread costs more than it saves; without a
     * second CPU the two would only take turns. */
    if (len < 4 * FAULT_CHUNK || sysconf(_SC_NPROCESSORS_ONLN) < 2)
        return;
    f->running = pthread_create(&f->thread, NULL, fault_ahead, f) == 0;
}

static void faulter_stop(pinio__faulter *f)
{
    if (!f->running)
        return;
    atomic_store_explicit(&f->stop, true, memory_order_relaxed);
    pthread_join(f->thread, NULL);
    f->running = false;
}

int pinio__arena_create(pinio__arena *a, const pinio_plan *plan, const pinio_load_opts *opts,
                        pinio_load_report *rep, pinio_diag *diag)
{
    memset(a, 0, sizeof(*a));
    pinio_plan_info pi;
    pinio_plan_get_info(plan, &pi);
    pinio_pool_opts po;
    pinio_pool_opts_default(&po);
    po.prefault = false;
    if (opts->node >= 0) {
        po.placement = PINIO_POOL_NODE;
        po.node = opts->node;
    } else if (opts->node == PINIO_NODE_AUTO && pi.files) {
        po.placement = PINIO_POOL_FILE_NODE;
        po.file = pinio_plan_file_at(plan, 0)->path;
    }
    int rc = pinio_pool_create(&a->pool, &po, diag);
    if (rc < 0)
        return rc;
    rc = pinio_pool_alloc_contig(a->pool, (size_t)pi.dest_bytes, &a->view, NULL);
    if (rc < 0) {
        pinio_diag_set(diag, rc, "cannot allocate a %llu-byte arena: %s",
                       (unsigned long long)pi.dest_bytes, pinio_strerror(rc));
        pinio_pool_destroy(a->pool);
        a->pool = NULL;
        return rc;
    }
    pinio_pool_stats ps;
    pinio_pool_get_stats(a->pool, &ps);
    rep->node = ps.node;
    rep->arena_bytes = pi.dest_bytes;
    a->base = (uint8_t *)a->view.ptr;
    faulter_start(&a->faulter, a->base, a->view.len);
    return 0;
}

static int arena_claim(void *ctx, size_t i, const pinio_plan_read *r, void **mem)
{
    (void)i;
    pinio__arena *a = ctx;
    *mem = a->base + r->dest_offset;
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

void pinio__arena_settle(pinio__arena *a, pinio_load_report *rep)
{
    faulter_stop(&a->faulter);
    if (!a->view.len) {
        snprintf(rep->memory, sizeof(rep->memory), "no arena (nothing to read)");
        return;
    }
    /* Placement is checked now that the pages exist, then the pages are
     * locked so that they stay put for the checkpoint's life (and for a
     * later cuMemHostRegister) -- when the memlock budget allows it. */
    pinio_pool_region_info vi;
    if (pinio_pool_verify_range(a->pool, a->view.ptr, a->view.len, &vi) == 0)
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
    pinio__appendf(rep->memory, sizeof(rep->memory), ", %s",
                   rep->registered ? "registered with io_uring"
                                   : "not registered with io_uring");
}

void pinio__arena_close(pinio__arena *a, bool keep_view)
{
    faulter_stop(&a->faulter);
    if (a->pool) {
        /* The pool must forget any ring before the ring goes; the slabs live
         * on in the arena's view. */
        pinio_pool_unregister(a->pool);
        pinio_pool_destroy(a->pool);
        a->pool = NULL;
    }
    if (!keep_view)
        pinio_view_release(&a->view);
}
