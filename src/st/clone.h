/* What the st layer gives the layers above it beyond the public header: a
 * copy of a parsed header (a plan derived from another, src/load/plan.c,
 * gets headers of its own without reading or parsing them again), and the
 * order of its names (a checkpoint's name index, src/load/checkpoint.c,
 * without sorting them again). */
#ifndef PINIO_SRC_ST_CLONE_H
#define PINIO_SRC_ST_CLONE_H

#include "pinio/safetensors.h"

/* A copy of `st` that owns its memory (pinio_st_free() it) and answers every
 * accessor as `st` does; `st` may be freed first. 0 or -ENOMEM (`*out` NULL). */
int pinio__st_clone(pinio_st **out, const pinio_st *st);

/* The position (pinio_st_at) of the `k`-th tensor in name order (bytes
 * compared, shorter first): the order the parser sorted them in. */
size_t pinio__st_by_name(const pinio_st *st, size_t k);

#endif
