/*
 * The built-in sinks' table (dav1d's muxers[] habit: one const struct per
 * file, listed here), and the walk from a landed read to the tensor
 * fragments it holds, which every tensor-placing sink needs.
 */
#include <string.h>

#include "pinio/sink.h"

static const pinio_sink *const sinks[] = {
    &pinio_sink_host,
    &pinio_sink_file,
    &pinio_sink_cuda,
    &pinio_sink_hip,
};

const pinio_sink *pinio_sink_at(size_t i)
{
    return i < sizeof(sinks) / sizeof(sinks[0]) ? sinks[i] : NULL;
}

const pinio_sink *pinio_sink_find(const char *name)
{
    for (size_t i = 0; name && pinio_sink_at(i); i++)
        if (strcmp(pinio_sink_at(i)->name, name) == 0)
            return pinio_sink_at(i);
    return NULL;
}

/* True when tensor t ends after file byte `off` of file `file`, or lies in
 * a later file: the predicate of the binary search below. */
static bool ends_after(const pinio_plan_tensor *t, uint32_t file, uint64_t off)
{
    return t->file > file || (t->file == file && t->file_offset + t->nbytes > off);
}

bool pinio_sink_next_fragment(const pinio_plan *p, const pinio_sink_chunk *c, size_t *cursor,
                              pinio_sink_fragment *f)
{
    if (!p || !c || !cursor || !f)
        return false;
    pinio_plan_info pi;
    pinio_plan_get_info(p, &pi);
    size_t i = *cursor;
    if (i == 0) {
        /* Tensors are in (file, offset) order, as reads are: the first
         * one that ends inside or after the chunk. */
        size_t lo = 0, hi = pi.tensors;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (ends_after(pinio_plan_tensor_at(p, mid), c->file, c->file_offset))
                hi = mid;
            else
                lo = mid + 1;
        }
        i = lo;
    } else {
        i--; /* the cursor is the next tensor's index + 1 */
    }
    uint64_t end = c->file_offset + c->len;
    for (; i < pi.tensors; i++) {
        const pinio_plan_tensor *t = pinio_plan_tensor_at(p, i);
        if (t->file != c->file || t->file_offset >= end)
            break;
        uint64_t lo = t->file_offset > c->file_offset ? t->file_offset : c->file_offset;
        uint64_t tend = t->file_offset + t->nbytes;
        uint64_t hi = tend < end ? tend : end;
        if (hi <= lo)
            continue; /* empty tensor, or one that ended before the chunk */
        *f = (pinio_sink_fragment){ .tensor = i, .t = t, .offset = lo - t->file_offset,
                                    .data = c->data + (lo - c->file_offset),
                                    .len = (size_t)(hi - lo) };
        *cursor = i + 2;
        return true;
    }
    *cursor = i + 1;
    return false;
}
