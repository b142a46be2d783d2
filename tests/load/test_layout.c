/* The load planner: layout invariants checked on hand-made and random inputs,
 * and a simulated execution proving every wanted byte lands where promised. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "src/load/layout_internal.h"

static uint8_t byte_at(uint32_t file, uint64_t off)
{
    uint64_t x = (off + 1) * 0x9e3779b97f4a7c15ull ^ ((uint64_t)file << 40);
    x ^= x >> 29;
    return (uint8_t)(x * 0xbf58476d1ce4e5b9ull >> 56);
}

/* Checks the invariants and simulates the reads into an arena. */
static void check_plan(const pinio__range *r, size_t n, uint64_t align, uint64_t gap, uint64_t seg,
                       const pinio__layout *p)
{
    uint64_t total = 0;
    for (size_t i = 0; i < p->nreads; i++) {
        const pinio_plan_read *rd = &p->reads[i];
        cr_assert_eq(rd->offset % align, 0);
        cr_assert_eq(rd->len % align, 0);
        cr_assert_eq(rd->dest_offset % align, 0);
        cr_assert_gt(rd->len, 0);
        cr_assert_leq(rd->need, rd->len);
        cr_assert_eq(rd->dest_offset / seg, (rd->dest_offset + rd->len - 1) / seg, "read %zu crosses a segment", i);
        cr_assert_eq(rd->dest_offset, total, "reads are back to back");
        total += rd->len;
    }
    cr_assert_eq(total, p->dest_size);
    uint8_t *arena = p->dest_size ? malloc(p->dest_size) : NULL;
    for (size_t i = 0; i < p->nreads; i++)
        for (uint64_t j = 0; j < p->reads[i].len; j++)
            arena[p->reads[i].dest_offset + j] = byte_at(p->reads[i].file, p->reads[i].offset + j);
    for (size_t i = 0; i < n; i++) {
        uint64_t a = p->range_dest_off[i];
        cr_assert_leq(a + r[i].len, p->dest_size);
        for (uint64_t j = 0; j < r[i].len; j++)
            cr_assert_eq(arena[a + j], byte_at(r[i].file, r[i].off + j), "range %zu byte %llu", i,
                         (unsigned long long)j);
        /* the last byte of every range lies within some read's `need` */
        if (r[i].len) {
            uint64_t last = a + r[i].len - 1;
            bool covered = false;
            for (size_t k = 0; k < p->nreads; k++)
                if (last >= p->reads[k].dest_offset && last < p->reads[k].dest_offset + p->reads[k].need)
                    covered = true;
            cr_assert(covered, "range %zu's last byte is not in any read's need", i);
        }
    }
    (void)gap;
    free(arena);
}

Test(plan, empty_input)
{
    pinio__layout p;
    cr_assert_eq(pinio__layout_build(NULL, 0, 4096, 0, 1u << 30, &p), 0);
    cr_assert_eq(p.nreads, 0);
    cr_assert_eq(p.dest_size, 0);
    pinio__layout_free(&p);
}

Test(plan, bad_parameters)
{
    pinio__range r = { 0, 0, 10 };
    pinio__layout p;
    cr_assert_eq(pinio__layout_build(&r, 1, 3000, 0, 1u << 30, &p), -EINVAL);
    cr_assert_eq(pinio__layout_build(&r, 1, 4096, 0, 1000, &p), -EINVAL);
    cr_assert_eq(pinio__layout_build(&r, 1, 8192, 0, 4096, &p), -EINVAL);
    cr_assert_eq(pinio__layout_build(NULL, 1, 4096, 0, 1u << 30, &p), -EINVAL);
    pinio__range big = { 0, UINT64_MAX - 10, 100 };
    cr_assert_eq(pinio__layout_build(&big, 1, 4096, 0, 1u << 30, &p), -EOVERFLOW);
    cr_assert_null(p.reads);
}

Test(plan, unaligned_range_is_widened)
{
    pinio__range r = { 0, 5000, 3000 };
    pinio__layout p;
    cr_assert_eq(pinio__layout_build(&r, 1, 4096, 0, 1u << 30, &p), 0);
    cr_assert_eq(p.nreads, 1);
    cr_assert_eq(p.reads[0].offset, 4096);
    cr_assert_eq(p.reads[0].len, 4096);
    cr_assert_eq(p.reads[0].need, 8000 - 4096);
    cr_assert_eq(p.range_dest_off[0], 5000 - 4096);
    cr_assert_eq(p.wanted_bytes, 3000);
    check_plan(&r, 1, 4096, 0, 1u << 30, &p);
    pinio__layout_free(&p);
}

Test(plan, small_gap_merged_large_gap_skipped)
{
    pinio__range r[] = { { 0, 0, 4096 }, { 0, 8192, 4096 }, { 0, 1u << 20, 100 } };
    pinio__layout p;
    cr_assert_eq(pinio__layout_build(r, 3, 4096, 4096, 1u << 30, &p), 0);
    cr_assert_eq(p.nreads, 2, "one hole of 4 KiB merged, the 1 MiB hole skipped");
    cr_assert_eq(p.reads[0].len, 12288);
    cr_assert_eq(p.reads[1].offset, 1u << 20);
    check_plan(r, 3, 4096, 4096, 1u << 30, &p);
    pinio__layout_free(&p);
    cr_assert_eq(pinio__layout_build(r, 3, 4096, 0, 1u << 30, &p), 0);
    cr_assert_eq(p.nreads, 3, "no merging across any hole with merge_gap 0");
    pinio__layout_free(&p);
}

Test(plan, files_are_never_merged_and_order_is_free)
{
    pinio__range r[] = { { 1, 0, 10 }, { 0, 4096, 10 }, { 0, 0, 10 } };
    pinio__layout p;
    cr_assert_eq(pinio__layout_build(r, 3, 4096, 1u << 20, 1u << 30, &p), 0);
    cr_assert_eq(p.nreads, 2);
    cr_assert_eq(p.reads[0].file, 0);
    cr_assert_eq(p.reads[1].file, 1);
    check_plan(r, 3, 4096, 1u << 20, 1u << 30, &p);
    pinio__layout_free(&p);
}

Test(plan, zero_length_and_overlapping_ranges)
{
    pinio__range r[] = { { 0, 100, 0 }, { 0, 0, 8192 }, { 0, 4000, 200 }, { 0, 4000, 200 }, { 0, 9000, 0 } };
    pinio__layout p;
    cr_assert_eq(pinio__layout_build(r, 5, 4096, 0, 1u << 30, &p), 0);
    cr_assert_eq(p.nreads, 1);
    check_plan(r, 5, 4096, 0, 1u << 30, &p);
    pinio__layout_free(&p);
}

Test(plan, reads_split_at_segments)
{
    /* 40 KiB range with 16 KiB segments: 3 reads, none crossing. */
    pinio__range r = { 0, 1000, 40000 };
    pinio__layout p;
    cr_assert_eq(pinio__layout_build(&r, 1, 4096, 0, 16384, &p), 0);
    cr_assert_eq(p.nreads, 3);
    check_plan(&r, 1, 4096, 0, 16384, &p);
    pinio__layout_free(&p);
}

/* Random ranges, alignments, segments and gaps; with `capped`, a random
 * hole budget too, never exceeded. */
static void random_layouts(unsigned seed, bool capped)
{
    srand(seed);
    for (int iter = 0; iter < 300; iter++) {
        size_t n = (size_t)(rand() % 40);
        pinio__range r[40];
        for (size_t i = 0; i < n; i++)
            r[i] = (pinio__range){ (uint32_t)(rand() % 3), (uint64_t)(rand() % 200000),
                                   (uint64_t)(rand() % 5 == 0 ? 0 : rand() % 30000) };
        uint64_t align = 512u << (rand() % 4);
        uint64_t seg = align << (rand() % 6);
        uint64_t gap = (uint64_t)(rand() % 3) * 8192;
        uint64_t budget = capped ? (uint64_t)(rand() % 4) * 6000 : UINT64_MAX;
        pinio__layout p;
        cr_assert_eq(pinio__layout_build_capped(r, n, align, gap, seg, budget, &p), 0);
        if (capped)
            cr_assert_leq(p.hole_bytes, budget);
        check_plan(r, n, align, gap, seg, &p);
        pinio__layout_free(&p);
    }
}

Test(plan, random_layouts)
{
    random_layouts(1234, false);
}

/* A hole budget: holes are read through smallest first while they fit,
 * touching extents merge whatever the budget, and the layout keeps every
 * invariant; the hole bytes it reports are the holes it read. */
Test(plan, capped_holes_smallest_first)
{
    /* holes between aligned extents: 8 KiB, 4 KiB, 12 KiB; then two ranges
     * in one page (no hole) */
    pinio__range r[] = { { 0, 0, 4096 },      { 0, 12288, 4096 }, { 0, 20480, 4096 },
                         { 0, 36864, 4096 },  { 0, 41000, 10 },   { 0, 41100, 10 } };
    pinio__layout p;
    cr_assert_eq(pinio__layout_build_capped(r, 6, 4096, 1u << 20, 1u << 30, 0, &p), 0);
    cr_assert_eq(p.nreads, 4, "budget 0: only touching extents merge");
    cr_assert_eq(p.hole_bytes, 0);
    check_plan(r, 6, 4096, 0, 1u << 30, &p);
    pinio__layout_free(&p);
    cr_assert_eq(pinio__layout_build_capped(r, 6, 4096, 1u << 20, 1u << 30, 4096 + 8191, &p), 0);
    cr_assert_eq(p.nreads, 3, "the 4 KiB hole fits, the 8 KiB one no longer does");
    cr_assert_eq(p.hole_bytes, 4096);
    check_plan(r, 6, 4096, 0, 1u << 30, &p);
    pinio__layout_free(&p);
    cr_assert_eq(pinio__layout_build_capped(r, 6, 4096, 1u << 20, 1u << 30, 12288, &p), 0);
    cr_assert_eq(p.nreads, 2);
    cr_assert_eq(p.hole_bytes, 12288);
    pinio__layout_free(&p);
    cr_assert_eq(pinio__layout_build_capped(r, 6, 4096, 8192, 1u << 30, 1u << 30, &p), 0);
    cr_assert_eq(p.nreads, 2, "a hole over merge_gap is skipped whatever the budget");
    pinio__layout_free(&p);
    cr_assert_eq(pinio__layout_build(r, 6, 4096, 1u << 20, 1u << 30, &p), 0);
    cr_assert_eq(p.nreads, 1);
    cr_assert_eq(p.hole_bytes, 24576);
    pinio__layout_free(&p);
}

Test(plan, random_capped_layouts)
{
    random_layouts(4321, true);
}
