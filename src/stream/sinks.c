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

/* Where tensor `i`'s bytes end in its file: past its last run (a strided
 * slice's runs lie apart, its nbytes packed). An empty slice has no bytes,
 * and its file_offset may lie past its tensor (the start of an empty box
 * counted in the tensor's strides): it ends where its tensor begins, which
 * keeps the tensors in file order for the search below. */
static uint64_t bytes_end(const pinio_plan *p, size_t i, const pinio_plan_tensor *t)
{
    if (!t->nbytes)
        return t->full_offset;
    if (t->runs <= 1)
        return t->file_offset + t->nbytes;
    return pinio_plan_run_offset(p, i, t->runs - 1) + t->run_bytes;
}

/* True when tensor `i` ends after file byte `off` of file `file`, or lies in
 * a later file: the predicate of the binary search below. Slices keep the
 * order: each lies inside its tensor, and tensors do not overlap. */
static bool ends_after(const pinio_plan *p, size_t i, uint32_t file, uint64_t off)
{
    const pinio_plan_tensor *t = pinio_plan_tensor_at(p, i);
    return t->file > file || (t->file == file && bytes_end(p, i, t) > off);
}

/* The first run of strided tensor `i` that ends after file byte `off`
 * (t->runs when none does). */
static uint64_t run_after(const pinio_plan *p, size_t i, const pinio_plan_tensor *t, uint64_t off)
{
    uint64_t lo = 0, hi = t->runs;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (pinio_plan_run_offset(p, i, mid) + t->run_bytes > off)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/*
 * The cursor is 1 + the chunk byte where the walk goes on: a fragment is a
 * tensor's bytes in the chunk or, for a strided slice, one run's (or the
 * part of it a read holds: a run may be cut by a slot's end), with its
 * offset in the packed slice. A sink that writes each fragment at its
 * tensor's place + offset thus gets the slice contiguous, and the holes
 * between the runs (read through, over-read) are never handed out.
 */
bool pinio_sink_next_fragment(const pinio_plan *p, const pinio_sink_chunk *c, size_t *cursor,
                              pinio_sink_fragment *f)
{
    if (!p || !c || !cursor || !f)
        return false;
    pinio_plan_info pi;
    pinio_plan_get_info(p, &pi);
    uint64_t at = c->file_offset + (*cursor ? *cursor - 1 : 0);
    uint64_t end = c->file_offset + c->len;
    /* Tensors are in (file, offset) order, as reads are: the first one
     * that ends after `at`. */
    size_t lo = 0, hi = pi.tensors;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ends_after(p, mid, c->file, at))
            hi = mid;
        else
            lo = mid + 1;
    }
    for (size_t i = lo; i < pi.tensors && at < end; i++) {
        const pinio_plan_tensor *t = pinio_plan_tensor_at(p, i);
        if (t->file != c->file)
            break;
        if (!t->nbytes)
            continue; /* nothing to hand over, and no place in the file to go by */
        if (t->file_offset >= end)
            break;
        uint64_t k = t->runs > 1 ? run_after(p, i, t, at) : 0;
        if (t->runs > 1 && k == t->runs)
            continue;
        uint64_t from = t->runs > 1 ? pinio_plan_run_offset(p, i, k) : t->file_offset;
        uint64_t len = t->runs > 1 ? t->run_bytes : t->nbytes;
        if (from >= end)
            break; /* the next run lies past the chunk, and so do later tensors */
        uint64_t a = from > at ? from : at;
        uint64_t b = from + len < end ? from + len : end;
        if (b <= a)
            continue; /* a tensor that ended before `at` */
        *f = (pinio_sink_fragment){ .tensor = i, .t = t, .offset = k * t->run_bytes + (a - from),
                                    .data = c->data + (a - c->file_offset),
                                    .len = (size_t)(b - a) };
        *cursor = (size_t)(b - c->file_offset) + 1;
        return true;
    }
    *cursor = (size_t)c->len + 1;
    return false;
}
