/*
 * Pool regions as #pinio_bytes (pinio_pool_alloc_bytes): the seed's staging
 * use of PINNED memory, filled in place, then handed on.
 *
 * Why not the shared controller over the region's view: a region's view
 * shares its refcount with the slab (the pool and every other region of the
 * slab hold it), so "the only holder" could never be seen and every write
 * would copy. Regions never overlap, so what decides whether a write may go
 * in place is who else holds *this region*: the controllers made from one
 * allocation by duplicate, view or split share one count; while it is 1 a
 * write goes in place, else it copies into private heap memory first (which
 * is NATIVE from then on, as the seed's shared controller reports).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "pinio/bytes.h"
#include "pinio/pool.h"

typedef struct holders {
    atomic_size_t n;
} holders;

typedef struct region_ctrl {
    pinio_controller base;
    pinio_view v;       /* the region (one slab reference) or, after a copy, heap */
    holders *h;         /* controllers over this region's bytes */
    bool copied;
} region_ctrl;

static const pinio_controller_ops region_ops;

static holders *holders_new(void)
{
    holders *h = malloc(sizeof(*h));
    if (h)
        atomic_init(&h->n, 1);
    return h;
}

static void holders_drop(holders *h)
{
    if (h && atomic_fetch_sub(&h->n, 1) == 1)
        free(h);
}

/* A controller over `v` (taken), joining `h` (one more holder) or, with h
 * NULL, holding its bytes alone. */
static int region_new(pinio_view *v, holders *h, bool copied, pinio_controller **out)
{
    region_ctrl *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    if (h) {
        atomic_fetch_add(&h->n, 1);
    } else if (!(h = holders_new())) {
        free(c);
        return -ENOMEM;
    }
    c->base.ops = &region_ops;
    c->v = *v;
    *v = (pinio_view){ 0 };
    c->h = h;
    c->copied = copied;
    *out = &c->base;
    return 0;
}

static size_t region_align(const pinio_controller *c)
{
    (void)c;
    return PINIO_POOL_ALIGN_DEFAULT;
}

static pinio_property region_property(const pinio_controller *c)
{
    return ((const region_ctrl *)c)->copied ? PINIO_PROP_NATIVE : PINIO_PROP_PINNED;
}

static size_t region_capacity(const pinio_controller *c)
{
    return ((const region_ctrl *)c)->v.len;
}

static int region_memory(pinio_controller *c, pinio_access mode, const uint8_t **ptr,
                         size_t *size, pinio_diag *diag)
{
    (void)mode;
    (void)diag;
    region_ctrl *r = (region_ctrl *)c;
    *ptr = r->v.ptr;
    *size = r->v.len;
    return 0;
}

static int region_memory_mut(pinio_controller *c, pinio_access mode, uint8_t **ptr, size_t *size,
                             pinio_diag *diag)
{
    region_ctrl *r = (region_ctrl *)c;
    if (atomic_load(&r->h->n) > 1) {
        if (mode == PINIO_ACCESS_ZERO_COPY)
            return PINIO_EWOULD_COPY;
        pinio_view copy;
        holders *h = holders_new();
        int rc = h ? pinio_view_copy(&copy, r->v.ptr, r->v.len) : -ENOMEM;
        if (rc < 0) {
            free(h);
            pinio_diag_set(diag, rc, "pinned bytes: copy before a write: %s", pinio_strerror(rc));
            return rc;
        }
        pinio_view_release(&r->v);
        holders_drop(r->h);
        r->v = copy;
        r->h = h;
        r->copied = true;
    }
    /* Regions never overlap and the pool hands each out once: the bytes are
     * this holder's to write (pool.h: pinio_pool_region_info.data). */
    *ptr = (uint8_t *)(uintptr_t)r->v.ptr;
    *size = r->v.len;
    return 0;
}

static int region_duplicate(pinio_controller *c, pinio_controller **out)
{
    region_ctrl *r = (region_ctrl *)c;
    pinio_view v = pinio_view_clone(&r->v);
    int rc = region_new(&v, r->h, r->copied, out);
    if (rc < 0)
        pinio_view_release(&v);
    return rc;
}

static int region_view(pinio_controller *c, size_t start, size_t end, pinio_controller **out)
{
    region_ctrl *r = (region_ctrl *)c;
    pinio_view v;
    int rc = pinio_view_slice(&r->v, start, end, &v);
    if (rc == 0 && (rc = region_new(&v, r->h, r->copied, out)) < 0)
        pinio_view_release(&v);
    return rc;
}

static int region_split(pinio_controller *c, size_t offset, pinio_controller **left,
                        pinio_controller **right)
{
    region_ctrl *r = (region_ctrl *)c;
    if (offset > r->v.len)
        return -ERANGE;
    /* The halves do not overlap: held alone, each is its own holder; shared,
     * they stay with the others. */
    bool alone = atomic_load(&r->h->n) == 1;
    pinio_view a, b;
    int rc = pinio_view_slice(&r->v, 0, offset, &a);
    if (rc < 0)
        return rc;
    if ((rc = pinio_view_slice(&r->v, offset, r->v.len, &b)) < 0) {
        pinio_view_release(&a);
        return rc;
    }
    if ((rc = region_new(&a, alone ? NULL : r->h, r->copied, left)) < 0) {
        pinio_view_release(&a);
        pinio_view_release(&b);
        return rc;
    }
    if ((rc = region_new(&b, alone ? NULL : r->h, r->copied, right)) < 0) {
        pinio_view_release(&b);
        pinio_controller_destroy(*left);
        return rc;
    }
    return 0;
}

static void region_destroy(pinio_controller *c)
{
    region_ctrl *r = (region_ctrl *)c;
    pinio_view_release(&r->v);
    holders_drop(r->h);
    free(r);
}

static const pinio_controller_ops region_ops = {
    .size = sizeof(pinio_controller_ops),
    .alloc_align = region_align,
    .property = region_property,
    .capacity = region_capacity,
    .memory = region_memory,
    .memory_mut = region_memory_mut,
    .split = region_split,
    .duplicate = region_duplicate,
    .destroy = region_destroy,
    .view = region_view,
};

int pinio_pool_alloc_bytes(pinio_pool *p, size_t len, size_t align, pinio_bytes **out)
{
    if (!p || !out)
        return -EINVAL;
    pinio_view v;
    int rc = pinio_pool_alloc(p, len, align, &v, NULL);
    if (rc < 0)
        return rc;
    pinio_controller *c = NULL;
    if ((rc = region_new(&v, NULL, false, &c)) < 0) {
        pinio_view_release(&v);
        return rc;
    }
    if ((rc = pinio_bytes_from_controller(out, c, len)) < 0)
        pinio_controller_destroy(c);
    return rc;
}
