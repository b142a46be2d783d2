/* The st layer's copy of a parsed header, for the layers below it: a plan
 * derived from another (src/load/plan.c) gets headers of its own without
 * reading or parsing them again. */
#ifndef PINIO_SRC_ST_CLONE_H
#define PINIO_SRC_ST_CLONE_H

#include "pinio/safetensors.h"

/* A copy of `st` that owns its memory (pinio_st_free() it) and answers every
 * accessor as `st` does; `st` may be freed first. 0 or -ENOMEM (`*out` NULL). */
int pinio__st_clone(pinio_st **out, const pinio_st *st);

#endif
