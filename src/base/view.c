/*
 * pinio_view: refcounted byte views.
 *
 * Design (after tokio's Bytes and dav1d's Dav1dRef): the handle carries
 * {ptr, len} so slicing is O(1) arithmetic on the handle; the shared state is
 * one pinio_ref per allocation holding an atomic count and how to free.
 * Static and empty views carry no ref at all, so splitting at 0 or at len
 * never touches a counter and an empty result never pins memory.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "pinio/view.h"
#include "src/base/view.h"
#include "src/base/view_internal.h"

struct pinio_ref {
    atomic_size_t count;
    void *base;
    size_t size;
    pinio_free_fn free_cb;
    void *cookie;
    unsigned flags;
    size_t align; /* the allocation's alignment when pinio allocated it, else 0 */
};

/* Beyond this the count is certainly corrupt (a leak loop or a double
 * release); tokio aborts at the same bound. The library may not print or
 * exit, but continuing would risk a use-after-free, so trap. */
#define PINIO_REF_MAX (SIZE_MAX / 2)

static void ref_retain(pinio_ref *r)
{
    /* Relaxed is enough to increment: the caller already holds a reference,
     * so the memory cannot be freed concurrently (Boost/tokio argument). */
    size_t old = atomic_fetch_add_explicit(&r->count, 1, memory_order_relaxed);
    if (old >= PINIO_REF_MAX)
        __builtin_trap();
}

static void ref_release(pinio_ref *r)
{
    /* Release on the decrement publishes this thread's writes; the acquire
     * load before freeing makes every other thread's writes visible to the
     * free callback. An acquire load of the (now 0) count rather than an
     * acquire fence: same ordering, and ThreadSanitizer does not model
     * fences (GCC rejects them under -fsanitize=thread), like Rust's Arc. */
    if (atomic_fetch_sub_explicit(&r->count, 1, memory_order_release) != 1)
        return;
    (void)atomic_load_explicit(&r->count, memory_order_acquire);
    if (r->free_cb)
        r->free_cb(r->cookie, r->base, r->size);
    free(r);
}

pinio_view pinio_view_static(const void *ptr, size_t len)
{
    return (pinio_view){ .ptr = ptr, .len = len, .ref = NULL };
}

int pinio_view_wrap(pinio_view *out, void *ptr, size_t len, pinio_free_fn free_cb, void *cookie,
                    unsigned flags)
{
    if (!out || (!ptr && len))
        return -EINVAL;
    if (len == 0) {
        /* An empty view holds no reference, so the memory is done with now. */
        if (free_cb)
            free_cb(cookie, ptr, len);
        *out = (pinio_view){ .ptr = ptr, .len = 0, .ref = NULL };
        return 0;
    }
    pinio_ref *r = malloc(sizeof(*r));
    if (!r)
        return -ENOMEM;
    atomic_init(&r->count, 1);
    r->base = ptr;
    r->size = len;
    r->free_cb = free_cb;
    r->cookie = cookie;
    r->flags = flags;
    r->align = 0;
    *out = (pinio_view){ .ptr = ptr, .len = len, .ref = r };
    return 0;
}

static void free_heap(void *cookie, void *ptr, size_t len)
{
    (void)cookie;
    (void)len;
    free(ptr);
}

int pinio_view_alloc(pinio_view *out, size_t len, size_t align)
{
    if (!out)
        return -EINVAL;
    if (align == 0)
        align = 16;
    if (align & (align - 1))
        return -EINVAL;
    if (align < sizeof(void *))
        align = sizeof(void *);
    if (len == 0) {
        /* No allocation: an aligned, non-NULL address that is never dereferenced. */
        *out = (pinio_view){ .ptr = (const uint8_t *)(uintptr_t)align, .len = 0, .ref = NULL };
        return 0;
    }
    void *p = NULL;
    if (posix_memalign(&p, align, len) != 0)
        return -ENOMEM;
    int rc = pinio_view_wrap(out, p, len, free_heap, NULL, 0);
    if (rc < 0) {
        free(p);
        return rc;
    }
    out->ref->align = align;
    return 0;
}

int pinio_view_copy(pinio_view *out, const void *src, size_t len)
{
    if (!out || (!src && len))
        return -EINVAL;
    pinio_view v;
    int rc = pinio_view_alloc(&v, len, 16);
    if (rc < 0)
        return rc;
    if (len)
        memcpy((void *)v.ptr, src, len);
    *out = v;
    return 0;
}

/* A sub-view of v: empty results keep the address but drop the reference. */
static pinio_view subview(const pinio_view *v, size_t start, size_t end, bool take_ref)
{
    pinio_view r = { .ptr = v->ptr ? v->ptr + start : v->ptr, .len = end - start, .ref = NULL };
    if (r.len && v->ref) {
        r.ref = v->ref;
        if (take_ref)
            ref_retain(v->ref);
    }
    return r;
}

pinio_view pinio_view_clone(const pinio_view *v)
{
    return subview(v, 0, v->len, true);
}

int pinio_view_slice(const pinio_view *v, size_t start, size_t end, pinio_view *out)
{
    if (!v || !out)
        return -EINVAL;
    if (start > end || end > v->len)
        return -ERANGE;
    *out = subview(v, start, end, true);
    return 0;
}

/* Split v at `at` into lo = [0, at) and hi = [at, len), moving v's single
 * reference so that each non-empty half owns exactly one. */
static void split_at(pinio_view *v, size_t at, pinio_view *lo, pinio_view *hi)
{
    pinio_view orig = *v;
    bool lo_ref = at > 0 && orig.ref;
    bool hi_ref = at < orig.len && orig.ref;
    *lo = subview(&orig, 0, at, false);
    *hi = subview(&orig, at, orig.len, false);
    if (lo_ref && hi_ref)
        ref_retain(orig.ref);
    /* When both halves are empty only if len == 0, and then orig.ref is NULL. */
}

int pinio_view_split_to(pinio_view *v, size_t at, pinio_view *head)
{
    if (!v || !head)
        return -EINVAL;
    if (at > v->len)
        return -ERANGE;
    pinio_view lo, hi;
    split_at(v, at, &lo, &hi);
    *head = lo;
    *v = hi;
    return 0;
}

int pinio_view_split_off(pinio_view *v, size_t at, pinio_view *tail)
{
    if (!v || !tail)
        return -EINVAL;
    if (at > v->len)
        return -ERANGE;
    pinio_view lo, hi;
    split_at(v, at, &lo, &hi);
    *tail = hi;
    *v = lo;
    return 0;
}

void pinio_view_release(pinio_view *v)
{
    if (!v)
        return;
    if (v->ref)
        ref_release(v->ref);
    v->ref = NULL;
    v->len = 0;
}

bool pinio_view_is_unique(const pinio_view *v)
{
    /* Acquire pairs with the release decrement of other holders, so that once
     * we see 1 their last writes are visible before we mutate in place. */
    return v && v->ref && atomic_load_explicit(&v->ref->count, memory_order_acquire) == 1;
}

uint8_t *pinio_view_data_mut(pinio_view *v)
{
    if (!pinio_view_is_unique(v) || (v->ref->flags & PINIO_VIEW_READONLY))
        return NULL;
    return (uint8_t *)v->ptr;
}

bool pinio_view_equal(const pinio_view *a, const pinio_view *b)
{
    if (a->len != b->len)
        return false;
    return a->len == 0 || a->ptr == b->ptr || memcmp(a->ptr, b->ptr, a->len) == 0;
}

size_t pinio__view_refcount(const pinio_view *v)
{
    return v->ref ? atomic_load_explicit(&v->ref->count, memory_order_acquire) : 0;
}

size_t pinio__addr_align(const void *p)
{
    uintptr_t a = (uintptr_t)p;
    size_t al = a ? (size_t)(a & (~a + 1)) : 4096;
    return al > 4096 ? 4096 : al;
}

size_t pinio__view_alloc_align(const pinio_view *v, size_t most)
{
    if (v->ref && v->ref->align)
        return v->ref->align;
    /* Adopted memory states no alignment: what its address has is all that
     * is true of it (malloc's 16, not a promise of 64 it never made). */
    size_t a = pinio__addr_align(v->ref ? v->ref->base : v->ptr);
    return a < most ? a : most;
}

int pinio__view_detach(pinio_view *v, size_t align, pinio_detached *d)
{
    if (!pinio_view_data_mut(v))
        return -EBUSY;
    pinio_ref *r = v->ref;
    if (v->ptr != r->base || v->len != r->size)
        return -EBUSY;
    /* The address, not r->align, decides: adopted memory records no
     * alignment, and pinio's own may be better aligned than it asked for. */
    if ((uintptr_t)r->base & (align - 1))
        return -EBUSY;
    /* Unique: nobody else can retain or release r concurrently (retaining
     * needs a reference), so it can be dismantled without atomics. The
     * acquire load in is_unique already ordered the other holders' writes. */
    *d = (pinio_detached){
        .ptr = r->base,
        .len = 0,
        .size = r->size,
        .align = r->align > align ? r->align : align,
        .free_fn = r->free_cb ? r->free_cb : pinio__free_nothing,
        .cookie = r->cookie,
    };
    free(r);
    *v = (pinio_view){ .ptr = v->ptr, .len = 0, .ref = NULL };
    return 0;
}

void pinio_detached_free(pinio_detached *d)
{
    if (!d || !d->free_fn)
        return;
    d->free_fn(d->cookie, d->ptr, d->size);
    *d = (pinio_detached){ 0 };
}

void pinio__free_nothing(void *cookie, void *ptr, size_t len)
{
    (void)cookie;
    (void)ptr;
    (void)len;
}
