/*
 * Native controller: aligned heap memory (cubecl's NativeAllocationController).
 *
 * Capacity 0 owns nothing: its pointer is the alignment itself, a non-NULL
 * aligned address that is never dereferenced nor freed (the seed's dangling
 * pointer), so callers need no NULL special case.
 */
#include <errno.h>
#include <stdalign.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "pinio/controller.h"
#include "src/bytes/controller_internal.h"

typedef struct native_ctrl {
    pinio_controller base;
    uint8_t *ptr;
    size_t cap;
    size_t align;
} native_ctrl;

static native_ctrl *nat(const pinio_controller *c)
{
    return (native_ctrl *)c;
}

static uint8_t *dangling(size_t align)
{
    return (uint8_t *)(uintptr_t)align;
}

static int alloc_aligned(uint8_t **out, size_t size, size_t align)
{
    void *p = NULL;
    /* posix_memalign wants a multiple of sizeof(void *). */
    if (posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size) != 0)
        return -ENOMEM;
    *out = p;
    return 0;
}

static size_t native_alloc_align(const pinio_controller *c)
{
    return nat(c)->align;
}

static pinio_property native_property(const pinio_controller *c)
{
    (void)c;
    return PINIO_PROP_NATIVE;
}

static size_t native_capacity(const pinio_controller *c)
{
    return nat(c)->cap;
}

static int native_memory(pinio_controller *c, pinio_access mode, const uint8_t **ptr, size_t *size,
                         pinio_diag *diag)
{
    (void)mode;
    (void)diag;
    *ptr = nat(c)->ptr;
    *size = nat(c)->cap;
    return 0;
}

static int native_memory_mut(pinio_controller *c, pinio_access mode, uint8_t **ptr, size_t *size,
                             pinio_diag *diag)
{
    (void)mode;
    (void)diag;
    *ptr = nat(c)->ptr;
    *size = nat(c)->cap;
    return 0;
}

/* Zero-copy split: the buffer becomes one refcounted view whose two halves
 * are shared controllers (property NATIVE, same alignment); the buffer is
 * freed when both are gone. Halves are not unique, so writing one
 * copies-on-write: the view cannot tell that they do not overlap. */
static int native_split(pinio_controller *c, size_t offset, pinio_controller **left,
                        pinio_controller **right)
{
    native_ctrl *n = nat(c);
    pinio_controller *l = pinio__shared_alloc();
    pinio_controller *r = pinio__shared_alloc();
    pinio_view whole = pinio_view_static(n->ptr, 0);
    int rc = (l && r) ? 0 : -ENOMEM;
    if (!rc && n->cap)
        rc = pinio_view_wrap(&whole, n->ptr, n->cap, pinio__free_aligned, NULL, 0);
    if (rc) {
        pinio__shared_discard(l);
        pinio__shared_discard(r);
        return rc;
    }
    pinio_view lv, rv;
    /* Cannot fail: offset <= cap was checked by the dispatcher. */
    pinio_view_slice(&whole, 0, offset, &lv);
    pinio_view_slice(&whole, offset, whole.len, &rv);
    pinio_view_release(&whole);
    pinio__shared_init(l, &lv, PINIO_PROP_NATIVE, n->align);
    pinio__shared_init(r, &rv, PINIO_PROP_NATIVE, n->align);
    n->ptr = dangling(n->align);
    n->cap = 0;
    *left = l;
    *right = r;
    return 0;
}

static int native_copy_into(pinio_controller *c, size_t offset, void *dst, size_t len,
                            pinio_diag *diag)
{
    (void)diag;
    memcpy(dst, nat(c)->ptr + offset, len);
    return 0;
}

static int native_grow(pinio_controller *c, size_t size, size_t align)
{
    native_ctrl *n = nat(c);
    /* Data never becomes less aligned. */
    size_t new_align = align > n->align ? align : n->align;
    if (new_align > PINIO_MAX_ALIGN)
        return -EINVAL;
    if (size <= n->cap && new_align == n->align)
        return 0;
    size_t new_cap = size > n->cap ? size : n->cap;
    uint8_t *p;
    if (n->cap && new_align <= alignof(max_align_t)) {
        /* realloc keeps malloc's alignment (alignof(max_align_t)), which is
         * all this buffer needs; it may extend in place. posix_memalign
         * memory may be given to realloc (POSIX). */
        p = realloc(n->ptr, new_cap);
        if (!p)
            return -ENOMEM;
    } else {
        /* No aligned realloc exists: allocate and copy. */
        int rc = alloc_aligned(&p, new_cap, new_align);
        if (rc)
            return rc;
        if (n->cap) {
            memcpy(p, n->ptr, n->cap);
            free(n->ptr);
        }
    }
    n->ptr = p;
    n->cap = new_cap;
    n->align = new_align;
    return 0;
}

static int native_try_detach(pinio_controller *c, pinio_access mode, pinio_detached *out,
                             pinio_diag *diag)
{
    (void)mode;
    (void)diag;
    native_ctrl *n = nat(c);
    *out = (pinio_detached){
        .ptr = n->ptr,
        .len = 0,
        .size = n->cap,
        .align = n->align,
        .free_fn = pinio__free_aligned,
        .cookie = NULL,
    };
    n->ptr = dangling(n->align);
    n->cap = 0;
    return 0;
}

static void native_destroy(pinio_controller *c)
{
    native_ctrl *n = nat(c);
    if (n->cap)
        free(n->ptr);
    free(n);
}

static const pinio_controller_ops native_ops = {
    .size = sizeof(pinio_controller_ops),
    .alloc_align = native_alloc_align,
    .property = native_property,
    .capacity = native_capacity,
    .memory = native_memory,
    .memory_mut = native_memory_mut,
    .split = native_split,
    .duplicate = NULL, /* cloning native memory deep-copies (pinio_bytes_clone) */
    .copy_into = native_copy_into,
    .grow = native_grow,
    .try_detach = native_try_detach,
    .destroy = native_destroy,
    .view = NULL, /* sharing would need the buffer refcounted: views copy */
};

int pinio_controller_native_new(pinio_controller **out, size_t capacity, size_t align)
{
    if (!out)
        return -EINVAL;
    if (align == 0)
        align = PINIO_DEFAULT_ALIGN;
    if (!pinio__align_ok(align))
        return -EINVAL;
    native_ctrl *n = malloc(sizeof(*n));
    if (!n)
        return -ENOMEM;
    n->base.ops = &native_ops;
    n->cap = capacity;
    n->align = align;
    n->ptr = dangling(align);
    if (capacity && alloc_aligned(&n->ptr, capacity, align)) {
        free(n);
        return -ENOMEM;
    }
    *out = &n->base;
    return 0;
}
