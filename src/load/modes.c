/*
 * Memory modes: for each file of a plan, pinned (read into the arena) or
 * mapped (its page cache mapped, tensors viewing it), decided before any
 * data I/O, and the arena layout of the pinned ones.
 *
 * Why hot files are mapped by default: a file in the page cache is already
 * in RAM; reading it into a fresh arena pays a page fault and a kernel
 * zeroing per page plus a copy, while a populated mapping pays page-table
 * work only (load.h states the measured figures). Why cold files are not,
 * as a rule: O_DIRECT into the arena reads at the storage's speed once,
 * where mapping would first fill the page cache (the same read) and keep
 * the pages reclaimable rather than locked. The exception is measured,
 * not assumed: where the kernel faults and zeroes fresh memory slower
 * than the storage reads (touch.c), the arena's page faults set the pace,
 * and filling the page cache, which zeroes nothing, is the faster path.
 *
 * The arena holds the pinned files' reads back to back: a file's reads are
 * consecutive in the plan's destination, so each file keeps its internal
 * layout (and the plan's alignment) shifted by a multiple of the alignment.
 */
#include <stdio.h>
#include <string.h>

#include "src/load/coop_internal.h"
#include "src/load/touch_internal.h"

/* Tensors of file `f` whose file offset is not a multiple of `align`: a
 * mapping places file offset x at an address congruent to x modulo the
 * page size, so these cannot be aligned without a copy. */
static size_t misaligned_in_file(const pinio_plan *plan, uint32_t f, uint64_t align)
{
    size_t n = 0;
    for (size_t i = 0; align > 1 && i < plan->ntensors; i++) {
        const pinio_plan_tensor *t = &plan->tensors[i];
        n += t->file == f && t->nbytes && (t->file_offset & (align - 1));
    }
    return n;
}

/* Slices of file `f`; `strided`: those made of several runs, which a
 * mapping cannot put together and the arena can (pinio_plan_gather()). */
static size_t slices_in_file(const pinio_plan *plan, uint32_t f, bool strided)
{
    size_t n = 0;
    for (size_t i = 0; i < plan->ntensors; i++)
        n += plan->tensors[i].file == f && plan->tensors[i].sliced &&
             (!strided || plan->tensors[i].runs > 1);
    return n;
}

/* Bytes of the selected tensors of file `f`, and the file range they span. */
static uint64_t selected_bytes(const pinio_plan *plan, uint32_t f, uint64_t *span)
{
    uint64_t n = 0, lo = UINT64_MAX, hi = 0;
    for (size_t i = 0; i < plan->ntensors; i++) {
        const pinio_plan_tensor *t = &plan->tensors[i];
        if (t->file != f || !t->nbytes)
            continue;
        n += t->nbytes;
        lo = t->file_offset < lo ? t->file_offset : lo;
        hi = t->file_offset + t->nbytes > hi ? t->file_offset + t->nbytes : hi;
    }
    *span = hi > lo ? hi - lo : 0;
    return n;
}

/* What keeps a cold file off the mapped path whatever the rates say
 * (NULL: nothing). Each of these is a reason the arena was asked for, or
 * a mapping would read or hold what the arena does not. */
static const char *cold_needs_arena(const pinio_plan *plan, uint32_t f, const pinio_load_opts *o,
                                    size_t mis, size_t sliced)
{
    uint64_t span, sel = selected_bytes(plan, f, &span);
    if (mis)
        return "tensors not aligned as asked in the file";
    if (sliced)
        return "slices: a mapping would read every page between them";
    if (o->verify)
        return "verify hashes the reads as they land";
    if (o->node >= 0)
        return "a NUMA node was asked for";
    if (o->register_arena)
        return "register_arena";
    /* The populate reads every page of the span: holes of unselected
     * tensors would be read from storage for nothing. */
    if (sel < span - span / 8)
        return "the selection leaves gaps a mapping would read";
    return NULL;
}

/* A cold file under AUTO, nothing else deciding: mapped with its page
 * cache filled when fresh memory takes its first touch slower than the
 * storage reads (touch.c says why that is the pace of O_DIRECT into a
 * fresh arena), else O_DIRECT into the arena. The mapped pages are
 * the node's page cache, so other processes loading the file share them
 * without coop.c. */
static pinio_memory_mode decide_cold(const pinio_plan *plan, uint32_t f, const pinio_load_opts *o,
                                     size_t mis, size_t sliced, char *why, size_t wsize)
{
    const pinio_plan_file *pf = &plan->files[f].pub;
    const char *cw = pf->cache_why && pf->cache_why[0] ? pf->cache_why : "not in page cache";
    const char *no = cold_needs_arena(plan, f, o, mis, sliced);
    pinio_plan_info pi;
    pinio__rates r;
    pinio_plan_get_info(plan, &pi); /* the probe's threshold is the load's, not a shard's */
    if (no) { /* the cache line says how cold: room here for the reason */
        snprintf(why, wsize, "cold: O_DIRECT into the arena (%s)", no);
        return PINIO_MEMORY_PINNED;
    }
    if (!pinio__rates_get(o, pi.bytes, &r)) {
        snprintf(why, wsize, "cold (%s): O_DIRECT into the arena", cw);
        return PINIO_MEMORY_PINNED;
    }
    bool slow = r.touch_gbps < r.storage_gbps;
    snprintf(why, wsize, "cold: first touch %.2f GB/s %s %s storage ~%.2f GB/s %s: %s",
             r.touch_gbps, r.touch_from, slow ? "<" : ">=", r.storage_gbps, r.storage_from,
             slow ? "page cache filled, mapped" : "O_DIRECT into the arena");
    return slow ? PINIO_MEMORY_MAPPED : PINIO_MEMORY_PINNED;
}

static pinio_memory_mode decide(const pinio_plan *plan, uint32_t f, const pinio_load_opts *o,
                                char *why, size_t wsize)
{
    const pinio_plan_file *pf = &plan->files[f].pub;
    if (pf->object) {
        snprintf(why, wsize, "an object: range GETs into the arena (nothing to map)");
        return PINIO_MEMORY_PINNED;
    }
    size_t mis = misaligned_in_file(plan, f, o->tensor_align);
    size_t strided = slices_in_file(plan, f, true);
    if (strided && o->memory != PINIO_MEMORY_PINNED) {
        snprintf(why, wsize, "%s%zu slices not along dimension 0, packed in the arena",
                 o->memory == PINIO_MEMORY_MAPPED ? "--memory mapped, but " : "", strided);
        return PINIO_MEMORY_PINNED;
    }
    /* The populate of a mapping reads every page between the first and the
     * last slice of a cold file: the other ranks' slices too. */
    size_t sliced = slices_in_file(plan, f, false);
    if (sliced && !pf->hot && o->memory == PINIO_MEMORY_MAPPED) {
        snprintf(why, wsize, "--memory mapped, but %zu slices of a cold file: mapping would "
                 "read every page between them", sliced);
        return PINIO_MEMORY_PINNED;
    }
    switch (o->memory) {
    case PINIO_MEMORY_PINNED:
        snprintf(why, wsize, "--memory pinned");
        return PINIO_MEMORY_PINNED;
    case PINIO_MEMORY_MAPPED:
        if (mis) {
            snprintf(why, wsize, "--memory mapped, but %zu tensors are not %llu-aligned in the file",
                     mis, (unsigned long long)o->tensor_align);
            return PINIO_MEMORY_PINNED;
        }
        snprintf(why, wsize, "--memory mapped%s", pf->hot ? "" : "; cold");
        return PINIO_MEMORY_MAPPED;
    default:
        break;
    }
    if (o->consumer == PINIO_CONSUMER_DMA) {
        snprintf(why, wsize, "a DMA consumer waits: locked memory it can DMA from");
        return PINIO_MEMORY_PINNED;
    }
    if (o->arena) {
        snprintf(why, wsize, "a kept arena was given");
        return PINIO_MEMORY_PINNED;
    }
    if (o->backend != PINIO_BACKEND_AUTO) {
        snprintf(why, wsize, "backend %s forced: reads asked for",
                 pinio_backend_name(o->backend));
        return PINIO_MEMORY_PINNED;
    }
    if (!pf->hot)
        return decide_cold(plan, f, o, mis, sliced, why, wsize);
    if (mis) {
        snprintf(why, wsize, "hot, but %zu tensors are not %llu-aligned in the file", mis,
                 (unsigned long long)o->tensor_align);
        return PINIO_MEMORY_PINNED;
    }
    snprintf(why, wsize, "hot (%s)", pf->cache_why && pf->cache_why[0] ? pf->cache_why : "cached");
    return PINIO_MEMORY_MAPPED;
}

uint64_t pinio__modes_decide(const pinio_plan *plan, const pinio_load_opts *o, pinio__fmem *fm)
{
    for (size_t f = 0; f < plan->nfiles; f++) {
        memset(&fm[f], 0, sizeof(fm[f]));
        fm[f].mode = decide(plan, (uint32_t)f, o, fm[f].why, sizeof(fm[f].why));
        if (fm[f].mode == PINIO_MEMORY_MAPPED && !plan->files[f].pub.hot)
            pinio__fill_decide(plan->files[f].fd, (pinio_mapped_fill)o->mapped_fill, &fm[f].fill);
    }
    pinio__coop_select(plan, o, fm); /* shared files leave the arena */
    for (size_t i = 0; i < plan->layout.nreads; i++) {
        const pinio_plan_read *r = &plan->layout.reads[i];
        pinio__fmem *m = &fm[r->file];
        if (!m->has_reads || r->dest_offset < m->dest_lo)
            m->dest_lo = r->dest_offset;
        if (!m->has_reads || r->dest_offset + r->len > m->dest_hi)
            m->dest_hi = r->dest_offset + r->len;
        m->has_reads = true;
    }
    uint64_t bytes = 0;
    size_t pinned_tensors = 0;
    for (size_t f = 0; f < plan->nfiles; f++)
        if (fm[f].mode == PINIO_MEMORY_PINNED && fm[f].has_reads && !fm[f].coop) {
            fm[f].arena_off = bytes;
            bytes += fm[f].dest_hi - fm[f].dest_lo;
        }
    for (size_t i = 0; i < plan->ntensors; i++)
        pinned_tensors += fm[plan->tensors[i].file].mode == PINIO_MEMORY_PINNED &&
                          !fm[plan->tensors[i].file].coop;
    /* Room for moving each tensor up to the next multiple of the alignment. */
    if (bytes && o->tensor_align > 1)
        bytes += (uint64_t)pinned_tensors * o->tensor_align;
    return (bytes + 4095) & ~(uint64_t)4095;
}

void pinio__modes_report(const pinio_plan *plan, const pinio__fmem *fm, pinio_load_report *rep)
{
    rep->modes[0] = '\0';
    bool same = true;
    for (size_t f = 0; f < plan->nfiles; f++) {
        if (fm[f].mode == PINIO_MEMORY_MAPPED)
            rep->files_mapped++;
        else
            rep->files_pinned++;
        same = same && fm[f].mode == fm[0].mode && strcmp(fm[f].why, fm[0].why) == 0;
    }
    if (plan->nfiles > 1 && same) {
        snprintf(rep->modes, sizeof(rep->modes), "all %zu files %s: %s", plan->nfiles,
                 fm[0].mode == PINIO_MEMORY_MAPPED ? "mapped" : "pinned", fm[0].why);
        return;
    }
    for (size_t f = 0; f < plan->nfiles; f++)
        pinio__appendf(rep->modes, sizeof(rep->modes), "%sfile %zu %s: %s", f ? "; " : "", f,
                       fm[f].mode == PINIO_MEMORY_MAPPED ? "mapped" : "pinned", fm[f].why);
}
