/*
 * A sink fed from memory instead of reads (pinio_stream_from_memory()):
 * for bytes that are already in host memory, e.g. the slices a tensor-
 * parallel rank received from the others, and that should reach a device
 * through the same sink (and the same registered, double-buffered copies)
 * a stream would use.
 *
 * Why the bytes are laid out "as a read would have landed them" rather
 * than handed over per tensor: a sink's contract is the chunk of one plan
 * read (sink.h), and the GPU sinks walk a chunk's fragments with
 * pinio_sink_next_fragment(), which knows where each slice's runs lie in
 * the file. Rebuilding each read's slot from the tensors' packed bytes
 * keeps one code path in every sink, strided slices included.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pinio/stream.h"
#include "src/stream/ring_internal.h"

/* A plan tensor by where its bytes lie in the files: the order of the
 * plan's reads, so that one pass over the reads visits each tensor once.
 * `end`: past its last byte in the file (its last run's, for a slice). */
typedef struct at {
    uint64_t file, offset, end;
    size_t i;
} at;

static int at_cmp(const void *a, const void *b)
{
    const at *x = a, *y = b;
    if (x->file != y->file)
        return x->file < y->file ? -1 : 1;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* The part of [from, from + len) (file offsets; its bytes at `src`) that
 * falls in [a, b), copied to `slot` (whose first byte is file offset a). */
static void put_range(uint8_t *slot, uint64_t a, uint64_t b, uint64_t from, uint64_t len,
                      const uint8_t *src)
{
    uint64_t s = from > a ? from : a, e = from + len < b ? from + len : b;
    if (s < e)
        memcpy(slot + (s - a), src + (s - from), (size_t)(e - s));
}

typedef struct feed {
    const pinio_plan *plan;
    const void *const *src;
    at *order;
    size_t n;
    size_t lo;                 /* first tensor (in order) not wholly before the last read */
} feed;

/* File bytes [r->offset, r->offset + r->need) into `slot` as the read
 * would have brought them: each tensor's bytes at their file offsets, a
 * slice's runs back where they lie, zeros elsewhere (alignment, holes,
 * headers, a tensor given no bytes). Reads come in plan order, which is
 * (file, offset) order (plan.h), so the scan only moves forward. */
static void fill_slot(feed *f, const pinio_plan_read *r, uint8_t *slot)
{
    uint64_t a = r->offset, b = r->offset + r->need;
    memset(slot, 0, (size_t)r->need);
    for (; f->lo < f->n; f->lo++) {
        const at *t = &f->order[f->lo];
        if (t->file > r->file || (t->file == r->file && t->end > a))
            break;
    }
    for (size_t k = f->lo; k < f->n && f->order[k].file == r->file && f->order[k].offset < b;
         k++) {
        size_t i = f->order[k].i;
        const pinio_plan_tensor *t = pinio_plan_tensor_at(f->plan, i);
        const uint8_t *src = f->src[i];
        if (!src)
            continue;
        if (t->runs <= 1) {
            put_range(slot, a, b, t->file_offset, t->nbytes, src);
            continue;
        }
        /* the first run that ends past `a` (runs lie in increasing order) */
        uint64_t lo = 0, hi = t->runs;
        while (lo < hi) {
            uint64_t mid = lo + (hi - lo) / 2;
            if (pinio_plan_run_offset(f->plan, i, mid) + t->run_bytes <= a)
                lo = mid + 1;
            else
                hi = mid;
        }
        for (uint64_t q = lo; q < t->runs; q++) {
            uint64_t off = pinio_plan_run_offset(f->plan, i, q);
            if (off >= b)
                break;
            put_range(slot, a, b, off, t->run_bytes, src + q * t->run_bytes);
        }
    }
}

/* Checks the arguments; 0 or -EINVAL naming what is wrong. */
static int check(const pinio_plan *plan, size_t nsrc, size_t slot_size, unsigned nslots,
                 const pinio_sink *sink, const pinio_plan_info *pi, pinio_diag *diag)
{
    if (!sink || !sink->open || !sink->chunk) {
        pinio_diag_set(diag, -EINVAL, "stream from memory: no sink");
        return -EINVAL;
    }
    int rc = pinio__ring_check(slot_size, nslots, "stream from memory", diag);
    if (rc < 0)
        return rc;
    if (nsrc != pi->tensors) {
        pinio_diag_set(diag, -EINVAL,
                       "stream from memory: %zu sources for a plan of %zu tensors", nsrc,
                       pi->tensors);
        return -EINVAL;
    }
    for (size_t i = 0; i < pi->reads; i++) {
        const pinio_plan_read *r = pinio_plan_read_at(plan, i);
        if (r->need > slot_size) {
            pinio_diag_set(diag, -EINVAL,
                           "stream from memory: plan read %zu is %llu bytes, more than a slot "
                           "(%zu): build the plan with its segment at most the slot size",
                           i, (unsigned long long)r->need, slot_size);
            return -EINVAL;
        }
    }
    return 0;
}

int pinio_stream_from_memory(const pinio_plan *plan, const void *const *src, size_t nsrc,
                             size_t slot_size, unsigned nslots, const pinio_sink *sink,
                             const void *cfg, pinio_diag *diag)
{
    if (!plan || (nsrc && !src)) {
        pinio_diag_set(diag, -EINVAL, "stream from memory: no plan or no sources");
        return -EINVAL;
    }
    pinio_plan_info pi;
    pinio_plan_get_info(plan, &pi);
    int rc = check(plan, nsrc, slot_size, nslots, sink, &pi, diag);
    if (rc < 0)
        return rc;
    feed f = {.plan = plan, .src = src, .n = pi.tensors};
    f.order = calloc(f.n ? f.n : 1, sizeof(*f.order));
    void *priv = calloc(1, sink->priv_size ? sink->priv_size : 1);
    uint8_t **slots = calloc(nslots, sizeof(*slots));
    pinio_view *views = calloc(nslots, sizeof(*views));
    pinio_pool *pool = NULL;
    int node = -1;
    rc = f.order && priv && slots && views ? 0 : -ENOMEM;
    if (rc < 0)
        pinio_diag_set(diag, rc, "stream from memory: out of memory");
    /* The ring as a stream's (ring.c), on the node the sink asks for (a
     * GPU's: its DMA reads the slots), each slot aligned as far as its size
     * allows (2 MiB at most). */
    pinio_pool_opts po;
    pinio_pool_opts_default(&po);
    int want = sink->prefer_node ? sink->prefer_node(cfg) : -1;
    if (want >= 0) {
        po.placement = PINIO_POOL_NODE;
        po.node = want;
    }
    size_t align = slot_size < PINIO_POOL_ALIGN_MAX ? slot_size : PINIO_POOL_ALIGN_MAX;
    if (rc == 0)
        rc = pinio__ring_create(&pool, views, slots, slot_size, nslots, align, &po,
                                "stream from memory", "choose fewer or smaller slots", &node,
                                diag);
    for (size_t i = 0; rc == 0 && i < f.n; i++) {
        const pinio_plan_tensor *t = pinio_plan_tensor_at(plan, i);
        uint64_t end = t->runs > 1 ? pinio_plan_run_offset(plan, i, t->runs - 1) + t->run_bytes
                                   : t->file_offset + t->nbytes;
        f.order[i] = (at){.file = t->file, .offset = t->file_offset, .end = end, .i = i};
    }
    if (rc == 0)
        qsort(f.order, f.n, sizeof(*f.order), at_cmp);
    pinio_sink_setup su = {.plan = plan, .slots = slots, .nslots = nslots,
                           .slot_size = slot_size, .node = node};
    bool opened = false;
    if (rc == 0) {
        rc = sink->open(priv, cfg, &su, diag);
        opened = rc == 0;
    }
    size_t used = 0;
    for (size_t i = 0; opened && rc == 0 && i < pi.reads; i++) {
        unsigned s = (unsigned)(i % nslots);
        if (i >= nslots && sink->slot_wait && (rc = sink->slot_wait(priv, s, diag)) < 0)
            break;
        const pinio_plan_read *r = pinio_plan_read_at(plan, i);
        fill_slot(&f, r, slots[s]);
        pinio_sink_chunk c = {.read = i, .r = r, .file = r->file, .file_offset = r->offset,
                              .data = slots[s], .len = (size_t)r->need, .slot = s};
        used = i + 1 < nslots ? i + 1 : nslots;
        rc = sink->chunk(priv, &c, diag);
    }
    /* Whatever happened: no copy may still read a slot once it is freed. */
    for (size_t s = 0; opened && sink->slot_wait && s < used; s++) {
        int w = sink->slot_wait(priv, (unsigned)s, diag);
        rc = rc ? rc : w;
    }
    if (opened && rc == 0 && sink->finish)
        rc = sink->finish(priv, diag);
    if (opened && sink->close)
        sink->close(priv, rc == 0);
    pinio__ring_free(pool, views, views ? nslots : 0);
    free(views);
    free(slots);
    free(priv);
    free(f.order);
    return rc;
}
