/*
 * Shared controller: the seed's SharedBytesAllocationController over a
 * pinio_view, with three departures from upstream:
 * - a unique, writable view is written in place (upstream always copies);
 * - the private copy is itself a refcounted view, so split and duplicate
 *   after a copy-on-write share the copy instead of failing or dropping the
 *   mutation;
 * - the copy-on-write is guarded: concurrent memory()/memory_mut() callers
 *   see either the source or the finished copy, never a half-built one, and
 *   the copy happens once.
 *
 * State: slot[cur] is the live view. A copy-on-write builds the copy in the
 * other slot and publishes it by storing `cur` with release; readers load it
 * with acquire. The replaced view stays in its slot ("retired") because a
 * concurrent reader may still be using a pointer into it; it is released by
 * the next exclusive operation (split, duplicate, try_detach, destroy), which
 * by contract has no concurrent reader.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "pinio/controller.h"
#include "src/bytes/controller_internal.h"
#include "src/base/view.h"

typedef struct shared_ctrl {
    pinio_controller base;
    pinio_property prop; /* as given; NATIVE is reported once `copied` */
    size_t align;        /* alignment of the private copy */
    pthread_mutex_t cow_lock;
    atomic_uint cur;
    atomic_bool copied;
    pinio_view slot[2];
} shared_ctrl;

static shared_ctrl *sh(const pinio_controller *c)
{
    return (shared_ctrl *)c;
}

static pinio_view *live(shared_ctrl *s)
{
    return &s->slot[atomic_load_explicit(&s->cur, memory_order_acquire)];
}

static void drop_retired(shared_ctrl *s)
{
    pinio_view_release(&s->slot[1 - atomic_load_explicit(&s->cur, memory_order_relaxed)]);
}

static size_t shared_alloc_align(const pinio_controller *c)
{
    return sh(c)->align;
}

static pinio_property shared_property(const pinio_controller *c)
{
    shared_ctrl *s = sh(c);
    return atomic_load_explicit(&s->copied, memory_order_relaxed) ? PINIO_PROP_NATIVE : s->prop;
}

static size_t shared_capacity(const pinio_controller *c)
{
    return live(sh(c))->len;
}

static int shared_memory(pinio_controller *c, pinio_access mode, const uint8_t **ptr, size_t *size,
                         pinio_diag *diag)
{
    (void)mode; /* reads never copy */
    (void)diag;
    const pinio_view *v = live(sh(c));
    *ptr = v->ptr;
    *size = v->len;
    return 0;
}

static int shared_memory_mut(pinio_controller *c, pinio_access mode, uint8_t **ptr, size_t *size,
                             pinio_diag *diag)
{
    (void)diag;
    shared_ctrl *s = sh(c);
    /* Decide "in place or copy" under the lock, always: uniqueness can change
     * behind our back (another holder of the source releases it), and a
     * lock-free "unique, write in place" could then pick the source while a
     * concurrent caller publishes a copy, and that write would be lost. */
    pthread_mutex_lock(&s->cow_lock);
    unsigned idx = atomic_load_explicit(&s->cur, memory_order_relaxed);
    pinio_view *v = &s->slot[idx];
    uint8_t *p = v->len ? pinio_view_data_mut(v) : (uint8_t *)v->ptr;
    int rc = 0;
    if (!p && v->len) {
        pinio_view copy;
        if (mode == PINIO_ACCESS_ZERO_COPY)
            rc = PINIO_EWOULD_COPY;
        else
            rc = pinio_view_alloc(&copy, v->len, s->align);
        if (rc == 0) {
            p = (uint8_t *)copy.ptr;
            memcpy(p, v->ptr, v->len);
            pinio_view_release(&s->slot[1 - idx]); /* normally empty already */
            s->slot[1 - idx] = copy;
            atomic_store_explicit(&s->copied, true, memory_order_relaxed);
            atomic_store_explicit(&s->cur, 1 - idx, memory_order_release);
            v = &s->slot[1 - idx];
        }
    }
    pthread_mutex_unlock(&s->cow_lock);
    if (rc)
        return rc;
    *ptr = p;
    *size = v->len;
    return 0;
}

static int shared_split(pinio_controller *c, size_t offset, pinio_controller **left,
                        pinio_controller **right)
{
    shared_ctrl *s = sh(c);
    pinio_controller *l = pinio__shared_alloc();
    pinio_controller *r = pinio__shared_alloc();
    if (!l || !r) {
        pinio__shared_discard(l);
        pinio__shared_discard(r);
        return -ENOMEM;
    }
    drop_retired(s);
    pinio_view *v = live(s);
    pinio_view lv, rv;
    pinio_view_slice(v, 0, offset, &lv); /* offset <= len: checked by the dispatcher */
    pinio_view_slice(v, offset, v->len, &rv);
    pinio_property p = shared_property(c);
    pinio__shared_init(l, &lv, p, s->align);
    pinio__shared_init(r, &rv, p, s->align);
    *left = l;
    *right = r;
    return 0;
}

static int shared_duplicate(pinio_controller *c, pinio_controller **out)
{
    shared_ctrl *s = sh(c);
    pinio_controller *d = pinio__shared_alloc();
    if (!d)
        return -ENOMEM;
    drop_retired(s);
    pinio_view v = pinio_view_clone(live(s));
    pinio__shared_init(d, &v, shared_property(c), s->align);
    *out = d;
    return 0;
}

/* Like duplicate, a slice of the live view: after a copy-on-write that is
 * the private copy, so the view sees the mutation. */
static int shared_view(pinio_controller *c, size_t start, size_t end, pinio_controller **out)
{
    shared_ctrl *s = sh(c);
    pinio_controller *d = pinio__shared_alloc();
    if (!d)
        return -ENOMEM;
    drop_retired(s);
    pinio_view v;
    pinio_view_slice(live(s), start, end, &v); /* in range: checked by the dispatcher */
    pinio__shared_init(d, &v, shared_property(c), s->align);
    *out = d;
    return 0;
}

static int shared_copy_into(pinio_controller *c, size_t offset, void *dst, size_t len,
                            pinio_diag *diag)
{
    (void)diag;
    memcpy(dst, live(sh(c))->ptr + offset, len);
    return 0;
}

static int shared_try_detach(pinio_controller *c, pinio_access mode, pinio_detached *out,
                             pinio_diag *diag)
{
    (void)diag;
    shared_ctrl *s = sh(c);
    drop_retired(s);
    pinio_view *v = live(s);
    /* Whole, unique, writable allocation that already has the promised
     * alignment (alloc_align): hand it over as it is. Anything less aligned
     * is copied, or a receiver trusting `out->align` (SIMD loads, O_DIRECT)
     * would fault or fail on it. */
    if (pinio__view_detach(v, s->align, out) == 0)
        return 0;
    if (mode == PINIO_ACCESS_ZERO_COPY)
        return PINIO_EWOULD_COPY;
    void *p = NULL;
    size_t al = s->align < sizeof(void *) ? sizeof(void *) : s->align;
    if (v->len && posix_memalign(&p, al, v->len) != 0)
        return -ENOMEM;
    if (v->len)
        memcpy(p, v->ptr, v->len);
    *out = (pinio_detached){
        .ptr = v->len ? p : (void *)(uintptr_t)al,
        .len = 0,
        .size = v->len,
        .align = al,
        .free_fn = pinio__free_aligned,
        .cookie = NULL,
    };
    pinio_view_release(v);
    return 0;
}

static void shared_destroy(pinio_controller *c)
{
    shared_ctrl *s = sh(c);
    pinio_view_release(&s->slot[0]);
    pinio_view_release(&s->slot[1]);
    pthread_mutex_destroy(&s->cow_lock);
    free(s);
}

static const pinio_controller_ops shared_ops = {
    .size = sizeof(pinio_controller_ops),
    .alloc_align = shared_alloc_align,
    .property = shared_property,
    .capacity = shared_capacity,
    .memory = shared_memory,
    .memory_mut = shared_memory_mut,
    .split = shared_split,
    .duplicate = shared_duplicate,
    .copy_into = shared_copy_into,
    .grow = NULL, /* unsupported: pinio_bytes_extend moves to native memory */
    .try_detach = shared_try_detach,
    .destroy = shared_destroy,
    .view = shared_view,
};

pinio_controller *pinio__shared_alloc(void)
{
    return malloc(sizeof(shared_ctrl));
}

void pinio__shared_discard(pinio_controller *c)
{
    free(c);
}

void pinio__shared_init(pinio_controller *c, pinio_view *src, pinio_property prop, size_t align)
{
    shared_ctrl *s = sh(c);
    s->base.ops = &shared_ops;
    s->prop = prop;
    /* The seed's promise is MAX_ALIGN (align_of::<u128>(), 16) for what
     * try_detach hands back, whatever the source: a static array or an
     * adopted buffer that happens to sit at 8, or a native split created
     * 1-aligned, must not pass its small alignment on to the copy, since
     * how the compiler places an array would then decide the contract.
     * Every constructor (new, split, duplicate, view, the file and native
     * controllers' halves) comes through here. */
    s->align = align > PINIO__SEED_MAX_ALIGN ? align : PINIO__SEED_MAX_ALIGN;
    pthread_mutex_init(&s->cow_lock, NULL); /* cannot fail for default attributes on Linux */
    atomic_init(&s->cur, 0);
    atomic_init(&s->copied, false);
    s->slot[0] = *src;
    s->slot[1] = pinio_view_static(NULL, 0);
    *src = (pinio_view){ .ptr = src->ptr, .len = 0, .ref = NULL };
}

int pinio_controller_shared_new(pinio_controller **out, pinio_view *src, pinio_property property)
{
    /* DEVICE promises a lazy read-back from a GPU; a view is host memory,
     * readable now, and calling it DEVICE would make a backend skip the
     * upload it needs. */
    if (!out || !src || (unsigned)property > PINIO_PROP_OTHER)
        return -EINVAL;
    pinio_controller *c = pinio__shared_alloc();
    if (!c)
        return -ENOMEM;
    /* alloc_align is the allocation's own alignment (for adopted memory,
     * its address's, at most PINIO_DEFAULT_ALIGN so that copies stay
     * small): a promise of more than the memory keeps would make
     * try_detach(ZERO_COPY) of a unique adopted buffer always refuse. */
    pinio__shared_init(c, src, property, pinio__view_alloc_align(src, PINIO_DEFAULT_ALIGN));
    *out = c;
    return 0;
}
