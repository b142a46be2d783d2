/* Internal constructors shared by the controllers and pinio_bytes. */
#ifndef PINIO_SRC_CONTROLLER_INTERNAL_H
#define PINIO_SRC_CONTROLLER_INTERNAL_H

#include "pinio/controller.h"

/*
 * A shared controller in two steps, so that callers building several at once
 * (split) can allocate everything first and then initialize without any
 * failure path: pinio__shared_alloc() returns storage or NULL (ENOMEM);
 * pinio__shared_init() cannot fail and takes the reference `*src` held
 * (resetting `*src`); pinio__shared_discard() frees storage never initialized.
 */
pinio_controller *pinio__shared_alloc(void);
/* The seed's MAX_ALIGN (align_of::<u128>() on x86_64): the least alignment
 * a shared controller reports and detaches at. */
#define PINIO__SEED_MAX_ALIGN 16

void pinio__shared_init(pinio_controller *c, pinio_view *src, pinio_property prop, size_t align);
void pinio__shared_discard(pinio_controller *c);

/** The pinio_free_fn of pinio's aligned heap buffers: free(), nothing for len 0. */
void pinio__free_aligned(void *cookie, void *ptr, size_t len);

/** True when `align` is a power of two no larger than PINIO_MAX_ALIGN. */
static inline int pinio__align_ok(size_t align)
{
    return align && !(align & (align - 1)) && align <= PINIO_MAX_ALIGN;
}

#endif
