/* Internal helpers of the view layer, for the library and its white-box tests. */
#ifndef PINIO_SRC_VIEW_INTERNAL_H
#define PINIO_SRC_VIEW_INTERNAL_H

#include "pinio/view.h"

/** Current reference count behind `v` (0 for static and empty views). */
size_t pinio__view_refcount(const pinio_view *v);

#endif
