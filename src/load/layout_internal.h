/*
 * The read layout of a plan: from the byte ranges a load wants to the
 * aligned reads that fill one destination (the resident loader's arena).
 * Pure computation (no I/O), so it is tested exhaustively.
 *
 * Layout rule: every read starts at a file offset aligned to `align` and at
 * an arena offset aligned to `align`, and reads are laid out back to back in
 * (file, offset) order. O_DIRECT can then read straight into the arena with
 * no bounce buffer, and a wanted range lands at
 *     arena + read.dest_offset + (range.off - read.off).
 * Neighbouring ranges are merged into one read when the hole between them is
 * at most `merge_gap` bytes: reading a small hole costs less than another
 * request, while a large hole (a filtered-out tensor) is skipped.
 * Reads never cross a multiple of `seg` in the arena, so each lies inside one
 * registered buffer (io_uring caps a registered buffer at 1 GiB).
 *
 * With a hole budget (a plan of slices), holes are read through smallest
 * first, each at most `merge_gap`, while their sum stays within the budget:
 * a tensor-parallel rank's ranges are separated by the other ranks' slices,
 * and reading those through wholesale would read the checkpoint N times.
 * Ranges whose aligned extents touch or overlap always merge (no hole).
 */
#ifndef PINIO_SRC_LOAD_LAYOUT_INTERNAL_H
#define PINIO_SRC_LOAD_LAYOUT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "pinio/plan.h"

/** A wanted byte range of one file (absolute offsets). */
typedef struct pinio__range {
    uint32_t file;
    uint64_t off;
    uint64_t len;
} pinio__range;

/** The layout of the reads; the reads are the public #pinio_plan_read. */
typedef struct pinio__layout {
    pinio_plan_read *reads;
    size_t nreads;
    uint64_t *range_dest_off; /**< per input range: destination offset of its first byte */
    uint64_t dest_size;       /**< total destination bytes, a multiple of align */
    uint64_t wanted_bytes;    /**< sum of the input ranges' lengths */
    uint64_t hole_bytes;      /**< holes read through (between aligned extents merged) */
} pinio__layout;

/**
 * Lays the ranges out. `align` and `seg` must be powers of two with
 * seg >= align; ranges may come in any order and may overlap or repeat
 * (each is placed).
 * @return 0; -EINVAL for bad parameters; -EOVERFLOW when an offset + length
 *         overflows; -ENOMEM. On failure `*out` is zeroed and owns nothing.
 */
int pinio__layout_build(const pinio__range *ranges, size_t n, uint64_t align, uint64_t merge_gap,
                        uint64_t seg, pinio__layout *out);

/** As pinio__layout_build(), the holes read through capped at `hole_budget`
 *  bytes in all (UINT64_MAX: no cap, pinio__layout_build()). */
int pinio__layout_build_capped(const pinio__range *ranges, size_t n, uint64_t align,
                               uint64_t merge_gap, uint64_t seg, uint64_t hole_budget,
                               pinio__layout *out);

/** Frees what pinio__layout_build() allocated; safe on a zeroed layout. */
void pinio__layout_free(pinio__layout *p);

#endif
