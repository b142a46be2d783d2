/*
 * Slices: which part of each selected tensor a plan reads (plan.h,
 * #pinio_slice), as byte ranges for the layout, and the packing of a
 * strided slice once it has landed.
 *
 * A slice is a box: per dimension [start, start + shape). In row-major
 * order its bytes are runs of equal length: the innermost dimension the box
 * does not cover whole (the "run dimension"), times every dimension inside
 * it, is one run; the dimensions outside it repeat the run. A box that
 * differs from the tensor only along dimension 0 (or whose outer
 * dimensions all have extent 1) is therefore one contiguous range, and
 * needs no packing: that is why tensor-parallel column splits cost nothing
 * beyond their bytes.
 *
 * Each run is a range of its own for the layout, which merges those whose
 * aligned extents touch and reads holes through only within the plan's
 * over-read budget; a run's destination offset is then wherever its read
 * put it, and pinio_plan_gather() moves the runs together in order.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/load/plan_internal.h"

/* The same name, given as a C string and as (bytes, length). */
static bool name_is(const char *s, const char *name, size_t len)
{
    return strlen(s) == len && memcmp(s, name, len) == 0;
}

/* torch.chunk(t, world, dim)[rank] along a dimension of `size`: chunks of
 * ceil(size / world), the last smaller; a rank past the last chunk gets the
 * empty range at the end (torch.chunk returns fewer chunks then). */
static void chunk_range(uint64_t size, uint32_t rank, uint32_t world, uint64_t *start,
                        uint64_t *len)
{
    uint64_t c = size / world + (size % world != 0);
    uint64_t a = (uint64_t)rank * c < size ? (uint64_t)rank * c : size;
    *start = a;
    *len = size - a < c ? size - a : c;
}

/* What one tensor's slice is, before it is checked against the tensor. */
typedef struct want {
    const char *what;       /* for the diagnostic: "split rule 'X=1'", "slice" */
    const pinio_slice *sl;  /* explicit slice, or NULL */
    const pinio_split_rule *rule;
} want;

static int bad(pinio_plan *p, const pinio_plan_tensor *t, pinio_diag *diag, const char *fmt, ...)
    PINIO_PRINTF(4, 5);

static int bad(pinio_plan *p, const pinio_plan_tensor *t, pinio_diag *diag, const char *fmt, ...)
{
    char msg[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    pinio_diag_set_at(diag, -EINVAL, p->files[t->file].path, PINIO_DIAG_NO_OFFSET,
                      "tensor '%s' (%u dimensions): %s", t->name, t->rank, msg);
    return -EINVAL;
}

/* The run dimension of a box: the innermost one it does not cover whole. */
static unsigned run_dim(unsigned r, const uint64_t *start, const uint64_t *len,
                        const uint64_t *full)
{
    unsigned j = 0;
    for (unsigned d = 0; d < r; d++)
        if (start[d] || len[d] != full[d])
            j = d;
    return j;
}

/* A box of a tensor whose elements are packed below a byte (F4, F6) is read
 * as byte ranges, so every run must start and end on a byte boundary: the
 * rule of upstream's slice.rs (MisalignedSlice), which checks the run
 * dimension's start and stop and each index of the dimensions outside it.
 * Only bit offsets modulo 8 matter, so they are computed modulo 8 (no
 * product of a huge shape can overflow). 0, or -EINVAL naming the cut. */
static int byte_cut(pinio_plan *p, const pinio_plan_tensor *t, const want *w,
                    const uint64_t *start, const uint64_t *len, pinio_diag *diag)
{
    unsigned bits = pinio_dtype_bits(t->dtype);
    if (bits % 8 == 0)
        return 0;
    unsigned j = run_dim(t->rank, start, len, t->shape);
    uint64_t span = bits % 8; /* bits of one index of dimension d, modulo 8 */
    for (unsigned d = t->rank; d-- > 0; span = span * (t->shape[d] % 8) % 8) {
        /* The first index whose run starts (or, at j, ends) inside a byte. */
        uint64_t a = start[d] % 8, at;
        if (d > j || len[d] == 0 || (d < j && len[d] > 1 && span == 0))
            continue;
        if (a * span % 8)
            at = start[d];
        else if (d == j && (a + len[d] % 8) * span % 8)
            at = start[d] + len[d];
        else if (d < j && len[d] > 1)
            at = start[d] + 1;
        else
            continue;
        return bad(p, t, diag,
                   "%s cuts %s (%u bits an element) inside a byte: dimension %u at index %llu "
                   "is not on a byte boundary",
                   w->what, pinio_dtype_name(t->dtype), bits, d, (unsigned long long)at);
    }
    return 0;
}

/* The box of tensor `t` under `w` into start[], len[] (t->rank each).
 * Returns 1 when it is the whole tensor, 0 for a slice, -EINVAL. */
static int box_of(pinio_plan *p, const pinio_plan_tensor *t, const want *w, uint32_t rank,
                  uint32_t world, uint64_t *start, uint64_t *len, pinio_diag *diag)
{
    for (unsigned d = 0; d < t->rank; d++) {
        start[d] = 0;
        len[d] = t->shape[d];
    }
    pinio_slice_kind kind = w->sl ? w->sl->kind : PINIO_SLICE_CHUNK;
    int dim = w->sl ? w->sl->dim : w->rule->dim;
    if (kind == PINIO_SLICE_WHOLE || (!w->sl && dim == PINIO_SPLIT_WHOLE))
        return 1;
    if (w->sl) {
        rank = w->sl->rank;
        world = w->sl->world;
    }
    if (kind == PINIO_SLICE_CHUNK) {
        long long d = dim < 0 ? (long long)dim + t->rank : dim;
        if (d < 0 || d >= (long long)t->rank)
            return bad(p, t, diag, "%s asks for dimension %d", w->what, dim);
        chunk_range(t->shape[d], rank, world, &start[d], &len[d]);
    } else {
        const pinio_slice *sl = w->sl;
        if (sl->ndim > t->rank)
            return bad(p, t, diag, "%s gives %u dimensions", w->what, sl->ndim);
        for (unsigned d = 0; d < sl->ndim; d++) {
            if (sl->start[d] > sl->stop[d] || sl->stop[d] > t->shape[d])
                return bad(p, t, diag, "%s is out of bounds in dimension %u", w->what, d);
            start[d] = sl->start[d];
            len[d] = sl->stop[d] - sl->start[d];
        }
    }
    bool whole = true;
    for (unsigned d = 0; d < t->rank; d++)
        whole = whole && !start[d] && len[d] == t->shape[d];
    if (whole)
        return 1;
    return byte_cut(p, t, w, start, len, diag);
}

/* Applies the box in `dims` (start[] then shape[], rank each, which the
 * tensor points into from now on) to `t`: shape, nbytes, file_offset, runs. */
static void apply(pinio_plan_tensor *t, const uint64_t *dims)
{
    unsigned r = t->rank;
    const uint64_t *start = dims, *len = dims + r;
    t->sliced = true;
    t->start = dims;
    t->shape = dims + r;
    /* In bits, so that packed dtypes come out right; byte_cut() made every
     * run start and end on a byte. */
    uint64_t e = pinio_dtype_bits(t->dtype), elems = 1;
    for (unsigned d = 0; d < r; d++)
        elems *= len[d];
    t->nbytes = elems * e / 8;
    unsigned j = run_dim(r, start, len, t->full_shape);
    uint64_t off = 0, stride = e, run = e;
    for (unsigned d = r; d-- > 0;) {
        if (d <= j)
            off += start[d] * stride;
        if (d >= j)
            run *= len[d];
        stride *= t->full_shape[d];
    }
    t->file_offset = t->full_offset + off / 8;
    t->run_bytes = t->nbytes ? run / 8 : 0;
    t->runs = t->nbytes ? t->nbytes / t->run_bytes : 0;
}

/* File offset of run `k` of a sliced tensor with more than one run. */
static uint64_t run_offset(const pinio_plan_tensor *t, uint64_t k)
{
    unsigned r = t->rank, j = run_dim(r, t->start, t->shape, t->full_shape);
    uint64_t off = 0, stride = pinio_dtype_bits(t->dtype); /* bits, as in apply() */
    for (unsigned d = r; d-- > 0;) {
        if (d < j) {
            off += (t->start[d] + k % t->shape[d]) * stride;
            k /= t->shape[d];
        } else if (d == j) {
            off += t->start[d] * stride;
        }
        stride *= t->full_shape[d];
    }
    return t->full_offset + off / 8;
}

/* Checks the explicit slices: each names one selected tensor, once. */
static int check_slices(pinio_plan *p, const pinio_plan_opts *o, const bool *used,
                        pinio_diag *diag)
{
    for (size_t i = 0; i < o->nslices; i++) {
        for (size_t k = 0; k < i; k++)
            if (strcmp(o->slices[i].name, o->slices[k].name) == 0) {
                pinio_diag_set(diag, -EINVAL, "tensor '%s' is given two slices",
                               o->slices[i].name);
                return -EINVAL;
            }
        if (!used[i]) {
            pinio_diag_set_at(diag, -ENOENT, p->nfiles ? p->files[0].path : "",
                              PINIO_DIAG_NO_OFFSET, "a slice names tensor '%s', which is %s",
                              o->slices[i].name,
                              p->nfiles > 1 ? "not selected in any file" : "not selected");
            return -ENOENT;
        }
    }
    return 0;
}

int pinio__slice_resolve(pinio_plan *p, const pinio_plan_opts *o, pinio_diag *diag)
{
    size_t dims = 0;
    memset(&p->sinfo, 0, sizeof(p->sinfo));
    p->sinfo.struct_size = sizeof(p->sinfo);
    for (size_t i = 0; i < p->ntensors; i++) {
        pinio_plan_tensor *t = &p->tensors[i];
        t->sliced = false;
        t->full_shape = t->shape;
        t->start = NULL;
        t->full_offset = t->file_offset;
        t->full_nbytes = t->nbytes;
        t->runs = t->nbytes ? 1 : 0;
        t->run_bytes = t->nbytes;
        p->sinfo.full_bytes += t->nbytes;
        dims += 2 * (size_t)t->rank;
    }
    p->sinfo.bytes = p->info.bytes;
    p->slicing = o->nslices || o->nsplit;
    if (!p->slicing)
        return 0;
    bool *used = calloc(o->nslices ? o->nslices : 1, sizeof(*used));
    p->slice_dims = malloc((dims ? dims : 1) * sizeof(*p->slice_dims));
    if (!used || !p->slice_dims) {
        free(used);
        return -ENOMEM;
    }
    uint64_t *at = p->slice_dims, bytes = 0;
    int rc = 0;
    for (size_t i = 0; i < p->ntensors && rc == 0; i++) {
        pinio_plan_tensor *t = &p->tensors[i];
        char what[96];
        want w = { .what = what };
        for (size_t k = 0; k < o->nslices && !w.sl; k++)
            if (name_is(o->slices[k].name, t->name, t->name_len)) {
                w.sl = &o->slices[k];
                used[k] = true;
                snprintf(what, sizeof(what), "its slice");
            }
        for (size_t k = 0; k < o->nsplit && !w.sl && !w.rule; k++)
            if (pinio__filter_match(&o->split[k].pattern, 1, t->name, t->name_len)) {
                w.rule = &o->split[k];
                snprintf(what, sizeof(what), "split rule '%.60s=%d'", w.rule->pattern,
                         w.rule->dim);
            }
        if (w.sl || w.rule) {
            uint64_t *start = at, *len = at + t->rank;
            rc = box_of(p, t, &w, o->rank, o->world, start, len, diag);
            if (rc == 0) {
                apply(t, at);
                at += 2 * (size_t)t->rank;
                p->sinfo.sliced++;
                p->sinfo.strided += t->runs > 1;
                p->sinfo.empty += t->nbytes == 0;
                p->sinfo.runs += t->runs > 1 ? t->runs : 0;
            }
            rc = rc < 0 ? rc : 0;
        }
        bytes += t->nbytes;
    }
    if (rc == 0)
        rc = check_slices(p, o, used, diag);
    free(used);
    p->info.bytes = p->sinfo.bytes = bytes;
    return rc;
}

int pinio__slice_ranges(pinio_plan *p, pinio__range **out, size_t *n)
{
    size_t count = 0;
    for (size_t i = 0; i < p->ntensors; i++)
        count += p->tensors[i].runs > 1 ? (size_t)p->tensors[i].runs : 1;
    pinio__range *r = malloc((count ? count : 1) * sizeof(*r));
    p->first_range = malloc((p->ntensors ? p->ntensors : 1) * sizeof(*p->first_range));
    if (!r || !p->first_range) {
        free(r);
        return -ENOMEM;
    }
    size_t m = 0;
    for (size_t i = 0; i < p->ntensors; i++) {
        const pinio_plan_tensor *t = &p->tensors[i];
        p->first_range[i] = m;
        if (t->runs <= 1) {
            r[m++] = (pinio__range){ .file = t->file, .off = t->file_offset, .len = t->nbytes };
            continue;
        }
        for (uint64_t k = 0; k < t->runs; k++)
            r[m++] = (pinio__range){ .file = t->file, .off = run_offset(t, k),
                                     .len = t->run_bytes };
    }
    *out = r;
    *n = m;
    return 0;
}

int pinio_plan_gather(const pinio_plan *p, size_t i, void *mem)
{
    if (!p || i >= p->ntensors)
        return -ERANGE;
    const pinio_plan_tensor *t = &p->tensors[i];
    if (t->runs <= 1)
        return 0;
    if (!mem)
        return -EINVAL;
    const uint64_t *dest = p->layout.range_dest_off + p->first_range[i];
    uint8_t *m = mem;
    size_t rb = (size_t)t->run_bytes;
    /* Run k landed at or after k * run_bytes (runs are apart in the file
     * and land in file order), so moving them in order never overwrites a
     * run not yet moved. */
    for (uint64_t k = 1; k < t->runs; k++)
        memmove(m + k * rb, m + (dest[k] - dest[0]), rb);
    return 0;
}

uint64_t pinio_plan_run_offset(const pinio_plan *p, size_t i, uint64_t k)
{
    if (!p || i >= p->ntensors || k >= p->tensors[i].runs)
        return UINT64_MAX;
    const pinio_plan_tensor *t = &p->tensors[i];
    return t->runs == 1 ? t->file_offset : run_offset(t, k);
}

void pinio_plan_get_slice_info_sized(const pinio_plan *p, pinio_plan_slice_info *out,
                                     size_t size)
{
    if (!out || size < sizeof(out->struct_size))
        return;
    pinio_plan_slice_info s = { 0 };
    if (p)
        s = p->sinfo;
    size_t n = size < sizeof(s) ? size : sizeof(s);
    s.struct_size = n;
    memcpy(out, &s, n);
    if (size > n)
        memset((char *)out + n, 0, size - n);
}
