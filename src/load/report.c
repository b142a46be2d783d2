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
    rep->cache[0] = '\0';
    if (pi.files <= 2) {
        for (size_t i = 0; i < pi.files; i++) {
            const pinio_plan_file *f = pinio_plan_file_at(plan, i);
            pinio__appendf(rep->cache, sizeof(rep->cache), "%s%s: %s%s%s", i ? "; " : "",
                           base_name(f->path), f->hot ? "buffered" : "O_DIRECT",
                           *f->cache_why ? ", " : "", f->cache_why);
        }
        return;
    }
    /* Many shards: one line with the counts and one reason, not a truncated
     * list of files. */
    const char *first = pinio_plan_file_at(plan, 0)->cache_why;
    bool mixed = false;
    for (size_t i = 1; i < pi.files && !mixed; i++)
        mixed = strcmp(pinio_plan_file_at(plan, i)->cache_why, first) != 0;
    pinio__appendf(rep->cache, sizeof(rep->cache), "%zu files: %zu buffered, %zu O_DIRECT%s%s",
                   pi.files, pi.files_hot, pi.files - pi.files_hot,
                   mixed ? "; reasons differ, e.g. " : "; ", first);
}
