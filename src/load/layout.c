/* The read layout of a plan; its rules are in layout_internal.h. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "src/load/layout_internal.h"

/* (file, offset) order; qsort_r keeps the comparison reentrant. */
static int cmp_idx(const void *a, const void *b, void *base)
{
    const pinio__range *rs = base;
    const pinio__range *x = &rs[*(const size_t *)a], *y = &rs[*(const size_t *)b];
    if (x->file != y->file)
        return x->file < y->file ? -1 : 1;
    if (x->off != y->off)
        return x->off < y->off ? -1 : 1;
    return 0;
}

static bool is_pow2(uint64_t v)
{
    return v && !(v & (v - 1));
}

/* (size, position) order of the candidate holes, for the budget. */
typedef struct hole {
    uint64_t len;
    size_t k;                 /* the sorted range it precedes */
} hole;

static int cmp_hole(const void *a, const void *b)
{
    const hole *x = a, *y = b;
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    return x->k < y->k ? -1 : x->k > y->k;
}

/* Which holes a capped layout reads through: per sorted range k, whether
 * the hole before it is read. The hole before a range is measured from
 * the furthest aligned end of the ranges before it in the same file, which
 * is where the read before it ends whatever was merged. */
static int choose_holes(const pinio__range *ranges, const size_t *order, size_t n,
                        uint64_t align, uint64_t merge_gap, uint64_t budget, bool *through)
{
    const uint64_t mask = align - 1;
    hole *h = malloc((n ? n : 1) * sizeof(*h));
    if (!h)
        return -ENOMEM;
    size_t nh = 0;
    bool have = false;
    uint32_t file = 0;
    uint64_t end = 0;
    for (size_t k = 0; k < n; k++) {
        const pinio__range *r = &ranges[order[k]];
        through[k] = false;
        if (r->len == 0)
            continue;
        uint64_t start = r->off & ~mask, e = (r->off + r->len + mask) & ~mask;
        if (have && r->file == file) {
            if (start > end && start - end <= merge_gap)
                h[nh++] = (hole){ .len = start - end, .k = k };
            if (e > end)
                end = e;
        } else {
            end = e;
        }
        have = true;
        file = r->file;
    }
    qsort(h, nh, sizeof(*h), cmp_hole);
    uint64_t spent = 0;
    for (size_t i = 0; i < nh && h[i].len <= budget - spent; i++) {
        spent += h[i].len;
        through[h[i].k] = true;
    }
    free(h);
    return 0;
}

int pinio__layout_build(const pinio__range *ranges, size_t n, uint64_t align, uint64_t merge_gap,
                        uint64_t seg, pinio__layout *out)
{
    return pinio__layout_build_capped(ranges, n, align, merge_gap, seg, UINT64_MAX, out);
}

int pinio__layout_build_capped(const pinio__range *ranges, size_t n, uint64_t align,
                               uint64_t merge_gap, uint64_t seg, uint64_t hole_budget,
                               pinio__layout *out)
{
    memset(out, 0, sizeof(*out));
    if (!is_pow2(align) || !is_pow2(seg) || seg < align || (n && !ranges))
        return -EINVAL;
    for (size_t i = 0; i < n; i++) {
        if (ranges[i].off > UINT64_MAX - ranges[i].len ||
            ranges[i].off + ranges[i].len > UINT64_MAX - align)
            return -EOVERFLOW;
        out->wanted_bytes += ranges[i].len;
    }

    size_t *order = malloc((n ? n : 1) * sizeof(*order));
    out->range_dest_off = calloc(n ? n : 1, sizeof(*out->range_dest_off));
    /* Upper bound on reads: one per range, plus one per segment crossing. */
    size_t cap = n + 1;
    out->reads = malloc(cap * sizeof(*out->reads));
    if (!order || !out->range_dest_off || !out->reads) {
        free(order);
        pinio__layout_free(out);
        return -ENOMEM;
    }
    bool sorted = true;
    for (size_t i = 0; i < n; i++) {
        order[i] = i;
        sorted = sorted && (i == 0 || cmp_idx(&order[i - 1], &order[i], (void *)ranges) <= 0);
    }
    /* A plan's ranges come in (file, offset) order already, mostly: the
     * check costs one comparison per range, the sort ~14 at 20,000. */
    if (!sorted)
        qsort_r(order, n, sizeof(*order), cmp_idx, (void *)ranges);
    bool *through = NULL;
    if (hole_budget != UINT64_MAX) {
        through = malloc((n ? n : 1) * sizeof(*through));
        int rc = through ? choose_holes(ranges, order, n, align, merge_gap, hole_budget, through)
                         : -ENOMEM;
        if (rc < 0) {
            free(through);
            free(order);
            pinio__layout_free(out);
            return rc;
        }
    }

    const uint64_t mask = align - 1;
    uint64_t arena = 0;
    pinio_plan_read *cur = NULL;
    for (size_t k = 0; k < n; k++) {
        const pinio__range *r = &ranges[order[k]];
        uint64_t start = r->off & ~mask;
        uint64_t end = (r->off + r->len + mask) & ~mask;
        if (r->len == 0) {
            /* Nothing to read: place it inside the current read when it falls
             * there, else at the arena end (a valid, empty address). */
            if (cur && cur->file == r->file && r->off >= cur->offset && r->off <= cur->offset + cur->len)
                out->range_dest_off[order[k]] = cur->dest_offset + (r->off - cur->offset);
            else
                out->range_dest_off[order[k]] = arena;
            continue;
        }
        bool merge = cur && cur->file == r->file &&
                     (through ? start <= cur->offset + cur->len || through[k]
                              : start <= cur->offset + cur->len + merge_gap);
        if (merge) {
            uint64_t cur_end = cur->offset + cur->len;
            if (start > cur_end)
                out->hole_bytes += start - cur_end;
            if (end > cur_end) {
                arena += end - cur_end;
                cur->len = end - cur->offset;
            }
            if (r->off + r->len - cur->offset > cur->need)
                cur->need = r->off + r->len - cur->offset;
        } else {
            cur = &out->reads[out->nreads++];
            *cur = (pinio_plan_read){ .file = r->file, .offset = start, .len = end - start,
                                  .need = r->off + r->len - start, .dest_offset = arena };
            arena += end - start;
        }
        out->range_dest_off[order[k]] = cur->dest_offset + (r->off - cur->offset);
    }
    free(order);
    free(through);
    out->dest_size = arena;

    /* Split reads at arena segment boundaries (aligned, since seg >= align). */
    size_t extra = 0;
    for (size_t i = 0; i < out->nreads; i++) {
        const pinio_plan_read *rd = &out->reads[i];
        extra += (size_t)(((rd->dest_offset + rd->len - 1) / seg) - (rd->dest_offset / seg));
    }
    if (extra) {
        pinio_plan_read *split = malloc((out->nreads + extra) * sizeof(*split));
        if (!split) {
            pinio__layout_free(out);
            return -ENOMEM;
        }
        size_t m = 0;
        for (size_t i = 0; i < out->nreads; i++) {
            pinio_plan_read rd = out->reads[i];
            while (rd.len) {
                uint64_t room = seg - (rd.dest_offset % seg);
                uint64_t take = rd.len < room ? rd.len : room;
                pinio_plan_read piece = rd;
                piece.len = take;
                piece.need = rd.need < take ? rd.need : take;
                split[m++] = piece;
                rd.offset += take;
                rd.dest_offset += take;
                rd.len -= take;
                rd.need = rd.need > take ? rd.need - take : 0;
            }
        }
        free(out->reads);
        out->reads = split;
        out->nreads = m;
    }
    return 0;
}

void pinio__layout_free(pinio__layout *p)
{
    free(p->reads);
    free(p->range_dest_off);
    memset(p, 0, sizeof(*p));
}
