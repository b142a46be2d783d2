/*
 * pinio_bytes: one controller plus a logical length (cubecl's Bytes).
 *
 * The handle does the bookkeeping every controller would otherwise repeat:
 * bounds against the logical length (never computing len - offset before
 * the check), the copying fallbacks when a controller cannot split, share or
 * grow, and the zero-copy mode that turns each of those fallbacks into
 * PINIO_EWOULD_COPY. Thread-safety of data()/data_mut() comes from the
 * controllers (their materialization and copy-on-write guards); the handle
 * itself is only read by those calls.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pinio/bytes.h"
#include "src/bytes/controller_internal.h"

struct pinio_bytes {
    pinio_controller *ctrl;
    size_t len;
};

static int has_memory(const pinio_controller *c)
{
    const pinio_controller_ops *o = c->ops;
    return o && o->size >= offsetof(pinio_controller_ops, memory) + sizeof(o->memory) && o->memory;
}

/* The alignment for native memory that replaces b's: the same, when valid. */
static size_t native_align(const pinio_bytes *b)
{
    size_t a = pinio_controller_alloc_align(b->ctrl);
    return pinio__align_ok(a) ? a : PINIO_DEFAULT_ALIGN;
}

static int wrap(pinio_bytes **out, pinio_controller *ctrl, size_t len)
{
    pinio_bytes *b = malloc(sizeof(*b));
    if (!b)
        return -ENOMEM;
    b->ctrl = ctrl;
    b->len = len;
    *out = b;
    return 0;
}

/* A native controller and its writable memory. */
static int new_native(size_t cap, size_t align, pinio_controller **out, uint8_t **mem)
{
    int rc = pinio_controller_native_new(out, cap, align);
    size_t size;
    if (rc == 0) /* native memory_mut never fails */
        pinio_controller_memory_mut(*out, PINIO_ACCESS_COPY, mem, &size, NULL);
    return rc;
}

/* New native memory holding `len` bytes of `src` read from `offset`,
 * without materializing `src`. */
static int copy_to_native(pinio_controller *src, size_t offset, size_t len, size_t cap,
                          size_t align, pinio_controller **out, pinio_diag *diag)
{
    pinio_controller *n;
    uint8_t *p;
    int rc = new_native(cap, align, &n, &p);
    if (rc)
        return rc;
    rc = pinio_controller_copy_into(src, offset, p, len, diag);
    if (rc) {
        pinio_controller_destroy(n);
        return rc;
    }
    *out = n;
    return 0;
}

int pinio_bytes_from_controller(pinio_bytes **out, pinio_controller *ctrl, size_t len)
{
    if (!out || !ctrl || !has_memory(ctrl))
        return -EINVAL;
    if (len > pinio_controller_capacity(ctrl))
        return -ERANGE;
    return wrap(out, ctrl, len);
}

int pinio_bytes_from_view(pinio_bytes **out, pinio_view *view, pinio_property property)
{
    if (!out || !view)
        return -EINVAL;
    size_t len = view->len;
    pinio_bytes *b = malloc(sizeof(*b));
    if (!b)
        return -ENOMEM;
    int rc = pinio_controller_shared_new(&b->ctrl, view, property);
    if (rc) {
        free(b);
        return rc;
    }
    b->len = len;
    *out = b;
    return 0;
}

int pinio_bytes_from_file(pinio_bytes **out, pinio_file *file, uint64_t offset, size_t len,
                          pinio_diag *diag)
{
    if (!out)
        return -EINVAL;
    pinio_controller *c;
    int rc = pinio_controller_file_new(&c, file, offset, len, diag);
    if (rc)
        return rc;
    rc = wrap(out, c, len);
    if (rc)
        pinio_controller_destroy(c);
    return rc;
}

/* Native bytes holding a copy of `data`, or zeros when `data` is NULL. */
static int from_bytes(pinio_bytes **out, const void *data, size_t len, size_t align)
{
    if (!out)
        return -EINVAL;
    pinio_controller *c;
    uint8_t *p;
    int rc = new_native(len, align, &c, &p);
    if (rc)
        return rc;
    if (len) {
        if (data)
            memcpy(p, data, len);
        else
            memset(p, 0, len);
    }
    rc = wrap(out, c, len);
    if (rc)
        pinio_controller_destroy(c);
    return rc;
}

int pinio_bytes_from_data(pinio_bytes **out, const void *data, size_t len, size_t align)
{
    if (!data && len)
        return -EINVAL;
    return from_bytes(out, data, len, align);
}

int pinio_bytes_alloc(pinio_bytes **out, size_t len, size_t align)
{
    return from_bytes(out, NULL, len, align);
}

void pinio_bytes_free(pinio_bytes *b)
{
    if (!b)
        return;
    pinio_controller_destroy(b->ctrl);
    free(b);
}

size_t pinio_bytes_len(const pinio_bytes *b)
{
    return b->len;
}

size_t pinio_bytes_capacity(const pinio_bytes *b)
{
    return pinio_controller_capacity(b->ctrl);
}

size_t pinio_bytes_align(const pinio_bytes *b)
{
    return pinio_controller_alloc_align(b->ctrl);
}

pinio_property pinio_bytes_property(const pinio_bytes *b)
{
    return pinio_controller_property(b->ctrl);
}

pinio_controller *pinio_bytes_controller(pinio_bytes *b)
{
    return b->ctrl;
}

int pinio_bytes_data(pinio_bytes *b, pinio_access mode, const uint8_t **out, pinio_diag *diag)
{
    if (!b || !out)
        return -EINVAL;
    const uint8_t *p;
    size_t size;
    int rc = pinio_controller_memory(b->ctrl, mode, &p, &size, diag);
    if (rc == 0)
        *out = p;
    return rc;
}

int pinio_bytes_data_mut(pinio_bytes *b, pinio_access mode, uint8_t **out, pinio_diag *diag)
{
    if (!b || !out)
        return -EINVAL;
    uint8_t *p;
    size_t size;
    int rc = pinio_controller_memory_mut(b->ctrl, mode, &p, &size, diag);
    if (rc == 0)
        *out = p;
    return rc;
}

int pinio_bytes_read(pinio_bytes *b, size_t offset, void *dst, size_t len, pinio_diag *diag)
{
    if (!b)
        return -EINVAL;
    if (offset > b->len || len > b->len - offset)
        return -ERANGE;
    return pinio_controller_copy_into(b->ctrl, offset, dst, len, diag);
}

int pinio_bytes_split(pinio_bytes *b, size_t offset, pinio_access mode, pinio_bytes **right,
                      pinio_diag *diag)
{
    if (!b || !right)
        return -EINVAL;
    if (offset > b->len)
        return -ERANGE;
    pinio_bytes *r = malloc(sizeof(*r));
    if (!r)
        return -ENOMEM;
    r->len = b->len - offset;
    pinio_controller *lc, *rc_ctrl;
    int rc = pinio_controller_split(b->ctrl, offset, &lc, &rc_ctrl);
    if (rc == 0) {
        pinio_controller_destroy(b->ctrl);
        b->ctrl = lc;
    } else if (rc == -ENOTSUP) {
        /* Copying fallback: the left part keeps the controller (shortened),
         * only the right part is copied. */
        rc = mode == PINIO_ACCESS_ZERO_COPY ? PINIO_EWOULD_COPY
                                            : copy_to_native(b->ctrl, offset, r->len, r->len,
                                                             native_align(b), &rc_ctrl, diag);
    }
    if (rc) {
        free(r);
        return rc;
    }
    r->ctrl = rc_ctrl;
    b->len = offset;
    *right = r;
    return 0;
}

/* The end of clone and view: `rc` and `c` are the outcome of sharing
 * logical bytes [start, end) of b; a controller that cannot share (-ENOTSUP)
 * gets them copied into native memory with its alignment instead. */
static int share_or_copy(pinio_bytes *b, int rc, pinio_controller *c, size_t start, size_t end,
                         pinio_access mode, pinio_bytes **out, pinio_diag *diag)
{
    size_t n = end - start;
    if (rc == -ENOTSUP) {
        rc = mode == PINIO_ACCESS_ZERO_COPY
                 ? PINIO_EWOULD_COPY
                 : copy_to_native(b->ctrl, start, n, n, native_align(b), &c, diag);
    }
    if (rc)
        return rc;
    rc = wrap(out, c, n);
    if (rc)
        pinio_controller_destroy(c);
    return rc;
}

int pinio_bytes_clone(pinio_bytes *b, pinio_access mode, pinio_bytes **out, pinio_diag *diag)
{
    if (!b || !out)
        return -EINVAL;
    pinio_controller *c = NULL;
    int rc = pinio_controller_duplicate(b->ctrl, &c);
    return share_or_copy(b, rc, c, 0, b->len, mode, out, diag);
}

int pinio_bytes_view(pinio_bytes *b, size_t start, size_t end, pinio_access mode,
                     pinio_bytes **out, pinio_diag *diag)
{
    if (!b || !out)
        return -EINVAL;
    /* Against the logical length, not the capacity the controller checks:
     * bytes past len are not initialized. */
    if (start > end || end > b->len)
        return -ERANGE;
    pinio_controller *c = NULL;
    int rc = pinio_controller_view(b->ctrl, start, end, &c);
    return share_or_copy(b, rc, c, start, end, mode, out, diag);
}

int pinio_bytes_copy_into(pinio_bytes *src, pinio_bytes *dst, pinio_access mode,
                          pinio_diag *diag)
{
    if (!src || !dst || src == dst)
        return -EINVAL;
    if (src->len < dst->len)
        return -ERANGE;
    if (dst->len == 0)
        return 0;
    uint8_t *p;
    int rc = pinio_bytes_data_mut(dst, mode, &p, diag);
    if (rc)
        return rc;
    return pinio_controller_copy_into(src->ctrl, 0, p, dst->len, diag);
}

/* Replaces b's controller by native memory of capacity `cap` holding its
 * logical bytes (read without materializing). b is unchanged on failure. */
static int move_to_native(pinio_bytes *b, size_t cap, pinio_diag *diag)
{
    pinio_controller *moved;
    int rc = copy_to_native(b->ctrl, 0, b->len, cap, native_align(b), &moved, diag);
    if (rc)
        return rc;
    pinio_controller_destroy(b->ctrl);
    b->ctrl = moved;
    return 0;
}

int pinio_bytes_extend(pinio_bytes *b, const void *data, size_t n, pinio_access mode,
                       pinio_diag *diag)
{
    if (!b)
        return -EINVAL;
    if (n == 0)
        return 0; /* nothing to write: no copy-on-write, no move */
    if (!data)
        return -EINVAL;
    if (n > SIZE_MAX - b->len)
        return -EOVERFLOW;
    size_t need = b->len + n;
    size_t cap = pinio_controller_capacity(b->ctrl);
    size_t align = native_align(b);
    size_t new_cap = cap;
    int rc = 0;
    if (need > cap) {
        new_cap = cap > SIZE_MAX / 2 ? need : (2 * cap > need ? 2 * cap : need);
        if (new_cap < align)
            new_cap = align;
        /* Round up to the alignment (upstream forgets, see seed-semantics §7). */
        if (new_cap > SIZE_MAX - (align - 1))
            return -EOVERFLOW;
        new_cap = (new_cap + align - 1) & ~(align - 1);
        rc = pinio_controller_grow(b->ctrl, new_cap, align);
        if (rc == -ENOTSUP)
            rc = mode == PINIO_ACCESS_ZERO_COPY ? PINIO_EWOULD_COPY
                                                : move_to_native(b, new_cap, diag);
        if (rc)
            return rc;
    }
    uint8_t *p;
    size_t size;
    rc = pinio_controller_memory_mut(b->ctrl, mode, &p, &size, diag);
    if (rc == -ENOTSUP) {
        /* Read-only memory: the appended bytes need a writable home. */
        if (mode == PINIO_ACCESS_ZERO_COPY)
            return PINIO_EWOULD_COPY;
        rc = move_to_native(b, new_cap, diag);
        if (rc == 0)
            rc = pinio_controller_memory_mut(b->ctrl, mode, &p, &size, diag);
    }
    if (rc)
        return rc;
    memcpy(p + b->len, data, n);
    b->len = need;
    return 0;
}

int pinio_bytes_try_detach(pinio_bytes *b, pinio_access mode, pinio_detached *out,
                           pinio_diag *diag)
{
    if (!b || !out)
        return -EINVAL;
    pinio_detached d;
    int rc = pinio_controller_try_detach(b->ctrl, mode, &d, diag);
    if (rc == -ENOTSUP && mode == PINIO_ACCESS_COPY) {
        pinio_controller *n;
        rc = copy_to_native(b->ctrl, 0, b->len, b->len, native_align(b), &n, diag);
        if (rc == 0) {
            rc = pinio_controller_try_detach(n, mode, &d, diag); /* native: always */
            pinio_controller_destroy(n);
        }
    }
    if (rc)
        return rc;
    d.len = b->len;
    *out = d;
    pinio_bytes_free(b);
    return 0;
}

int pinio_bytes_equal(pinio_bytes *a, pinio_bytes *b, pinio_diag *diag)
{
    if (!a || !b)
        return -EINVAL;
    if (a->len != b->len)
        return 0;
    if (a == b || a->len == 0)
        return 1;
    const uint8_t *pa, *pb;
    int rc = pinio_bytes_data(a, PINIO_ACCESS_COPY, &pa, diag);
    if (rc == 0)
        rc = pinio_bytes_data(b, PINIO_ACCESS_COPY, &pb, diag);
    if (rc)
        return rc;
    return memcmp(pa, pb, a->len) == 0;
}
