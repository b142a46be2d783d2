/*
 * The report's text lines: what the plan decided per file, in one line a
 * person reads (the JSON carries the numbers).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "src/load/load_internal.h"

void pinio__appendf(char *buf, size_t size, const char *fmt, ...)
{
    size_t used = strnlen(buf, size);
    if (used + 1 >= size)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + used, size - used, fmt, ap);
    va_end(ap);
}

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

void pinio__report_plan(const pinio_plan *plan, pinio_load_report *rep)
{
    pinio_plan_info pi;
    pinio_plan_get_info(plan, &pi);
    rep->files = pi.files;
    rep->tensors = pi.tensors;
    rep->skipped = pi.skipped;
    rep->unindexed = pi.unindexed;
    rep->bytes = pi.bytes;
    rep->arena_bytes = pi.dest_bytes;
    pinio_plan_slice_info si;
    pinio_plan_get_slice_info(plan, &si);
    rep->sliced = si.sliced;
    rep->strided = si.strided;
    rep->full_bytes = si.full_bytes;
    rep->overread_bytes = si.overread_bytes;
    rep->hole_bytes = si.hole_bytes;
}

/* What happened to one file's pages, as the line says it. A mapped file
 * is never read by the engine: a cold one has its page cache filled by a
 * readahead at depth or by the populate's fault readahead (fill.c), so
 * "O_DIRECT" would be false. */
static void cache_what(char *buf, size_t size, const pinio_plan_file *f, const pinio__fmem *m)
{
    if (f->object)
        pinio__appendf(buf, size, "no page cache");
    else if (m->mode != PINIO_MEMORY_MAPPED)
        pinio__appendf(buf, size, "%s", f->hot ? "buffered" : "O_DIRECT");
    else if (f->hot)
        pinio__appendf(buf, size, "mapped, already in the page cache");
    else if (m->fill.ahead)
        pinio__appendf(buf, size, "mapped, page cache filled by readahead at depth (%s)",
                       m->fill.why);
    else
        pinio__appendf(buf, size, "mapped, page cache filled by the mapping's readahead (%s)",
                       m->fill.why);
}

void pinio__report_cache(const pinio_plan *plan, const pinio__fmem *fm, pinio_load_report *rep)
{
    rep->cache[0] = '\0';
    rep->files_filled = 0;
    rep->files_filled_ahead = 0;
    for (size_t i = 0; i < plan->nfiles; i++) {
        bool filled = fm[i].mode == PINIO_MEMORY_MAPPED && !plan->files[i].pub.hot;
        rep->files_filled += filled;
        rep->files_filled_ahead += filled && fm[i].fill.ahead;
    }
    if (plan->nfiles <= 2) {
        for (size_t i = 0; i < plan->nfiles; i++) {
            const pinio_plan_file *f = &plan->files[i].pub;
            pinio__appendf(rep->cache, sizeof(rep->cache), "%s%s: ", i ? "; " : "",
                           base_name(f->path));
            cache_what(rep->cache, sizeof(rep->cache), f, &fm[i]);
            pinio__appendf(rep->cache, sizeof(rep->cache), "%s%s", *f->cache_why ? ", " : "",
                           f->cache_why);
        }
        return;
    }
    /* Many shards: one line with the counts and one reason, not a truncated
     * list of files. */
    size_t n[4] = { 0 }; /* O_DIRECT, buffered, mapped cold, mapped hot */
    size_t objects = 0;
    const char *first = plan->files[0].pub.cache_why;
    bool mixed = false;
    for (size_t i = 0; i < plan->nfiles; i++)
        objects += plan->files[i].pub.object;
    if (objects == plan->nfiles) {
        pinio__appendf(rep->cache, sizeof(rep->cache), "%zu objects: no page cache; %s",
                       objects, first);
        return;
    }
    for (size_t i = 0; i < plan->nfiles; i++) {
        bool hot = plan->files[i].pub.hot;
        if (plan->files[i].pub.object)
            continue;
        n[(fm[i].mode == PINIO_MEMORY_MAPPED ? 2 : 0) + hot]++;
        mixed = mixed || strcmp(plan->files[i].pub.cache_why, first) != 0;
    }
    pinio__appendf(rep->cache, sizeof(rep->cache),
                   "%zu files: %zu O_DIRECT, %zu buffered, %zu mapped already in "
                   "the page cache, %zu mapped with the page cache filled by readahead "
                   "(%zu of them at depth), %zu objects%s%s",
                   plan->nfiles, n[0], n[1], n[3], n[2], rep->files_filled_ahead, objects,
                   mixed ? "; reasons differ, e.g. " : "; ", first);
}
