/*
 * The view layer's interface for the layers above base/ (not installed):
 * what a controller or a loader needs to know about a view's allocation
 * beyond the public pinio_view API. White-box test hooks stay in
 * view_internal.h, private to base/.
 */
#ifndef PINIO_SRC_BASE_VIEW_H
#define PINIO_SRC_BASE_VIEW_H

#include <stddef.h>

#include "pinio/view.h"

/**
 * Takes the memory out of `v` without freeing it, when `v` is the unique,
 * writable owner of a whole allocation whose start is aligned to `align` (a
 * power of two: the alignment the receiver was promised). On success `*d`
 * receives the buffer and the free function + cookie given when it was
 * adopted (or free() for pinio_view_alloc memory), `d->align` is the larger
 * of `align` and the alignment pinio allocated it with, `d->len` is 0, the
 * reference object is freed and `*v` becomes an empty view. -EBUSY otherwise
 * (`*v`, `*d` untouched).
 */
int pinio__view_detach(pinio_view *v, size_t align, pinio_detached *d);

/** The alignment of the allocation `v` lies in, as alloc_align reports it:
 *  the one pinio allocated it with (pinio_view_alloc), else, for adopted
 *  memory (pinio_view_wrap) and views without a reference, the alignment
 *  its start address really has, at most `most` (a power of two). */
size_t pinio__view_alloc_align(const pinio_view *v, size_t most);

/** Largest power of two dividing the address `p`, capped at 4096 (4096 for
 *  NULL): the alignment memory is known to have when nobody said. */
size_t pinio__addr_align(const void *p);

/** A pinio_free_fn that does nothing (static or empty memory). */
void pinio__free_nothing(void *cookie, void *ptr, size_t len);

#endif
