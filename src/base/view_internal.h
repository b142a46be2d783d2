/* White-box hooks of the view layer, private to base/ and its tests. The
 * interface other layers may use is src/base/view.h (included here so that
 * the files written against the older, single header keep building). */
#ifndef PINIO_SRC_VIEW_INTERNAL_H
#define PINIO_SRC_VIEW_INTERNAL_H

#include "pinio/view.h"
#include "src/base/view.h"

/** Current reference count behind `v` (0 for static and empty views). */
size_t pinio__view_refcount(const pinio_view *v);

#endif
