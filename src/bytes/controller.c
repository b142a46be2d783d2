/*
 * Controller dispatch: bounds checks that every controller would otherwise
 * repeat, and the documented default of each NULL (or not yet known) entry.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pinio/controller.h"
#include "src/bytes/controller_internal.h"

/* An entry exists when the implementer's table is long enough to hold it
 * (ops->size, so older, shorter tables keep working) and it is non-NULL. */
#define HAS(c, f)                                                                  \
    ((c)->ops->size >= offsetof(pinio_controller_ops, f) + sizeof((c)->ops->f) && \
     (c)->ops->f != NULL)

const char *pinio_property_name(pinio_property p)
{
    switch (p) {
    case PINIO_PROP_NATIVE:
        return "native";
    case PINIO_PROP_FILE:
        return "file";
    case PINIO_PROP_PINNED:
        return "pinned";
    case PINIO_PROP_OTHER:
        return "other";
    case PINIO_PROP_DEVICE:
        return "device";
    }
    return "unknown";
}

void pinio__free_aligned(void *cookie, void *ptr, size_t len)
{
    (void)cookie;
    if (len)
        free(ptr);
}

size_t pinio_controller_alloc_align(const pinio_controller *c)
{
    return HAS(c, alloc_align) ? c->ops->alloc_align(c) : 1;
}

pinio_property pinio_controller_property(const pinio_controller *c)
{
    return HAS(c, property) ? c->ops->property(c) : PINIO_PROP_OTHER;
}

int pinio_controller_memory(pinio_controller *c, pinio_access mode, const uint8_t **ptr,
                            size_t *size, pinio_diag *diag)
{
    if (!HAS(c, memory))
        return -ENOTSUP;
    return c->ops->memory(c, mode, ptr, size, diag);
}

size_t pinio_controller_capacity(const pinio_controller *c)
{
    if (HAS(c, capacity))
        return c->ops->capacity(c);
    /* The default may only look, never read a file: zero-copy mode. */
    const uint8_t *p;
    size_t size;
    if (pinio_controller_memory((pinio_controller *)c, PINIO_ACCESS_ZERO_COPY, &p, &size, NULL))
        return 0;
    return size;
}

int pinio_controller_memory_mut(pinio_controller *c, pinio_access mode, uint8_t **ptr,
                                size_t *size, pinio_diag *diag)
{
    if (!HAS(c, memory_mut))
        return -ENOTSUP;
    return c->ops->memory_mut(c, mode, ptr, size, diag);
}

int pinio_controller_split(pinio_controller *c, size_t offset, pinio_controller **left,
                           pinio_controller **right)
{
    if (!left || !right)
        return -EINVAL;
    if (!HAS(c, split))
        return -ENOTSUP;
    if (offset > pinio_controller_capacity(c))
        return -ERANGE;
    return c->ops->split(c, offset, left, right);
}

int pinio_controller_duplicate(pinio_controller *c, pinio_controller **out)
{
    if (!out)
        return -EINVAL;
    if (!HAS(c, duplicate))
        return -ENOTSUP;
    return c->ops->duplicate(c, out);
}

int pinio_controller_view(pinio_controller *c, size_t start, size_t end, pinio_controller **out)
{
    if (!out)
        return -EINVAL;
    if (start > end || end > pinio_controller_capacity(c))
        return -ERANGE;
    if (!HAS(c, view))
        return -ENOTSUP;
    return c->ops->view(c, start, end, out);
}

int pinio_controller_copy_into(pinio_controller *c, size_t offset, void *dst, size_t len,
                               pinio_diag *diag)
{
    size_t cap = pinio_controller_capacity(c);
    /* Never compute cap - offset before knowing offset <= cap. */
    if (offset > cap || len > cap - offset)
        return -ERANGE;
    if (len == 0)
        return 0;
    if (!dst)
        return -EINVAL;
    if (HAS(c, copy_into))
        return c->ops->copy_into(c, offset, dst, len, diag);
    const uint8_t *p;
    size_t size;
    int rc = pinio_controller_memory(c, PINIO_ACCESS_COPY, &p, &size, diag);
    if (rc < 0)
        return rc;
    if (offset > size || len > size - offset)
        return -ERANGE;
    memcpy(dst, p + offset, len);
    return 0;
}

int pinio_controller_grow(pinio_controller *c, size_t size, size_t align)
{
    if (!align || (align & (align - 1)))
        return -EINVAL;
    if (!HAS(c, grow))
        return -ENOTSUP;
    return c->ops->grow(c, size, align);
}

int pinio_controller_try_detach(pinio_controller *c, pinio_access mode, pinio_detached *out,
                                pinio_diag *diag)
{
    if (!out)
        return -EINVAL;
    if (!HAS(c, try_detach))
        return -ENOTSUP;
    return c->ops->try_detach(c, mode, out, diag);
}

void pinio_controller_destroy(pinio_controller *c)
{
    if (c && HAS(c, destroy))
        c->ops->destroy(c);
}
