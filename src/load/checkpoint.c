/*
 * A loaded checkpoint: the plan's validated headers (kept, not parsed
 * again: tensor names, shapes and `__metadata__` point into them), a tensor
 * table over the arena and the files' mappings, and the report.
 *
 * Ownership: the checkpoint holds one reference on the arena and one on
 * each mapping; every #pinio_bytes handed out holds another on the memory
 * it views, so each is freed with the last of them, in any order.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/view.h"
#include "src/load/load_internal.h"
#include "src/st/clone.h"

typedef struct cp_file {
    char *path;
    pinio_st *st;
    char sha_hex[65];
    bool hashed;
    pinio_memory_mode mode;
    char why[112];
    pinio_view map;          /* mapped: the mapping its tensors view; shared: its segment */
    bool map_pinned;         /* shared: the segment is locked */
} cp_file;

struct pinio_checkpoint {
    cp_file *files;
    size_t nfiles;
    pinio_tensor *tensors;
    size_t ntensors;
    size_t *by_name;         /* tensor indexes sorted by name */
    pinio_view arena;
    pinio_property property; /* of the arena's bytes */
    uint64_t *slice_dims;    /* the slices' start[] and shape[], taken from the plan */
    pinio_load_report report;
};

static int cmp_by_name(const void *a, const void *b, void *ctx)
{
    const pinio_tensor *t = ctx;
    return strcmp(t[*(const size_t *)a].name, t[*(const size_t *)b].name);
}

/* cp->by_name: the tensors in name order. The tensors of one file are in
 * its header's order, a subset of it, and its parser sorted every name
 * already: the selected ones are picked in that order, O(n), instead of
 * sorted again (a qsort of 20,000 names cost ~40 M instructions). Names
 * hold no NUL, so the parser's order (bytes, shorter first) is strcmp's.
 * `at`: room for one index per tensor of that header (NULL: sort). */
static void sort_by_name(pinio_checkpoint *cp, size_t *at)
{
    size_t n = cp->ntensors, m = 0;
    if (at) {
        const pinio_st *st = cp->files[0].st;
        size_t nst = pinio_st_count(st);
        for (size_t s = 0, k = 0; s < nst; s++) /* header position -> tensor index */
            at[s] = k < n && cp->tensors[k].name == pinio_st_at(st, s)->name ? k++ : SIZE_MAX;
        for (size_t r = 0; r < nst && m < n; r++) {
            size_t k = at[pinio__st_by_name(st, r)];
            if (k != SIZE_MAX)
                cp->by_name[m++] = k;
        }
    }
    if (m == n) /* else: not a subset in header order after all */
        return;
    for (size_t i = 0; i < n; i++)
        cp->by_name[i] = i;
    qsort_r(cp->by_name, n, sizeof(*cp->by_name), cmp_by_name, cp->tensors);
}

int pinio__checkpoint_build(pinio_checkpoint **out, pinio_plan *plan, const pinio_view *arena,
                            pinio__fmem *fm, const uint8_t *const *tensor_data,
                            char (*sha_hex)[65], pinio_load_report *rep)
{
    pinio_checkpoint *cp = calloc(1, sizeof(*cp));
    size_t n = plan->ntensors;
    size_t nst = plan->nfiles == 1 && n > 1 ? pinio_st_count(plan->files[0].st) : 0;
    size_t *at = NULL;
    if (!cp || !(cp->files = calloc(plan->nfiles ? plan->nfiles : 1, sizeof(*cp->files))) ||
        !(cp->tensors = calloc(n ? n : 1, sizeof(*cp->tensors))) ||
        !(cp->by_name = malloc((n ? n : 1) * sizeof(*cp->by_name))) ||
        (nst && !(at = malloc(nst * sizeof(*at))))) {
        if (cp) {
            free(cp->files);
            free(cp->tensors);
            free(cp->by_name);
        }
        free(cp);
        return -ENOMEM;
    }
    /* Steal the headers and paths: the plan is freed right after. */
    cp->nfiles = plan->nfiles;
    for (size_t i = 0; i < plan->nfiles; i++) {
        pinio__pfile *f = &plan->files[i];
        cp->files[i].path = f->path;
        cp->files[i].st = f->st;
        f->path = NULL;
        f->st = NULL;
        cp->files[i].mode = fm[i].mode;
        memcpy(cp->files[i].why, fm[i].why, sizeof(cp->files[i].why));
        cp->files[i].map = fm[i].map;
        cp->files[i].map_pinned = fm[i].map_pinned;
        fm[i].map = (pinio_view){ 0 };
        if (sha_hex) {
            memcpy(cp->files[i].sha_hex, sha_hex[i], sizeof(cp->files[i].sha_hex));
            cp->files[i].hashed = true;
        }
    }
    for (size_t i = 0; i < n; i++) {
        const pinio_plan_tensor *pt = &plan->tensors[i];
        pinio_tensor *t = &cp->tensors[i];
        *t = (pinio_tensor){ .name = pt->name, .dtype = pt->dtype, .rank = pt->rank,
                             .shape = pt->shape, .nbytes = pt->nbytes,
                             .data = tensor_data[i], .file = pt->file,
                             .file_offset = pt->file_offset, .sliced = pt->sliced,
                             .full_shape = pt->full_shape, .start = pt->start };
        t->align = pinio__addr_align(t->data);
        unsigned ebytes = pinio_dtype_bits(t->dtype) / 8;
        if (ebytes > 1 && t->align < ebytes && t->nbytes)
            rep->misaligned++;
    }
    cp->ntensors = n;
    sort_by_name(cp, at);
    free(at);
    cp->slice_dims = plan->slice_dims; /* the slices' shape and start point into it */
    plan->slice_dims = NULL;
    cp->arena = pinio_view_clone(arena);
    cp->property = rep->locked || rep->registered ? PINIO_PROP_PINNED : PINIO_PROP_NATIVE;
    cp->report = *rep;
    *out = cp;
    return 0;
}

void pinio_checkpoint_release(pinio_checkpoint *cp)
{
    if (!cp)
        return;
    for (size_t i = 0; i < cp->nfiles; i++) {
        free(cp->files[i].path);
        pinio_st_free(cp->files[i].st);
        pinio_view_release(&cp->files[i].map);
    }
    free(cp->files);
    free(cp->tensors);
    free(cp->by_name);
    free(cp->slice_dims);
    pinio_view_release(&cp->arena);
    free(cp);
}

size_t pinio_checkpoint_count(const pinio_checkpoint *cp)
{
    return cp ? cp->ntensors : 0;
}

const pinio_tensor *pinio_checkpoint_tensor(const pinio_checkpoint *cp, size_t i)
{
    return cp && i < cp->ntensors ? &cp->tensors[i] : NULL;
}

static size_t find_index(const pinio_checkpoint *cp, const char *name)
{
    size_t lo = 0, hi = cp->ntensors;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(cp->tensors[cp->by_name[mid]].name, name);
        if (c == 0)
            return cp->by_name[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return SIZE_MAX;
}

const pinio_tensor *pinio_checkpoint_find(const pinio_checkpoint *cp, const char *name)
{
    if (!cp || !name)
        return NULL;
    size_t i = find_index(cp, name);
    return i == SIZE_MAX ? NULL : &cp->tensors[i];
}

size_t pinio_checkpoint_file_count(const pinio_checkpoint *cp)
{
    return cp ? cp->nfiles : 0;
}

const char *pinio_checkpoint_file(const pinio_checkpoint *cp, size_t i)
{
    return cp && i < cp->nfiles ? cp->files[i].path : NULL;
}

const char *pinio_checkpoint_sha256(const pinio_checkpoint *cp, size_t i)
{
    return cp && i < cp->nfiles && cp->files[i].hashed ? cp->files[i].sha_hex : NULL;
}

const pinio_st *pinio_checkpoint_header(const pinio_checkpoint *cp, size_t i)
{
    return cp && i < cp->nfiles ? cp->files[i].st : NULL;
}

const char *pinio_checkpoint_metadata(const pinio_checkpoint *cp, const char *key)
{
    for (size_t i = 0; cp && key && i < cp->nfiles; i++) {
        const char *v = pinio_st_metadata_get(cp->files[i].st, key);
        if (v)
            return v;
    }
    return NULL;
}

void pinio__checkpoint_ready(pinio_checkpoint *cp, double seconds)
{
    cp->report.ready_seconds = seconds;
}

/* The options' growth rule, for an output: an older caller's smaller
 * struct gets its prefix, a newer caller's larger one zeros past ours. */
void pinio_checkpoint_report_sized(const pinio_checkpoint *cp, pinio_load_report *out,
                                   size_t size)
{
    if (!out || size < sizeof(out->struct_size))
        return;
    size_t n = size < sizeof(cp->report) ? size : sizeof(cp->report);
    memcpy(out, &cp->report, n);
    if (size > n)
        memset((char *)out + n, 0, size - n);
    out->struct_size = n;
}

pinio_memory_mode pinio_checkpoint_file_memory(const pinio_checkpoint *cp, size_t i,
                                               const char **why)
{
    if (!cp || i >= cp->nfiles)
        return PINIO_MEMORY_AUTO;
    if (why)
        *why = cp->files[i].why;
    return cp->files[i].mode;
}

int pinio_checkpoint_tensor_bytes(const pinio_checkpoint *cp, size_t i, pinio_bytes **out)
{
    if (!cp || !out)
        return -EINVAL;
    if (i >= cp->ntensors)
        return -ERANGE;
    const pinio_tensor *t = &cp->tensors[i];
    const cp_file *f = &cp->files[t->file];
    bool mapped = f->mode == PINIO_MEMORY_MAPPED;
    bool own = mapped || f->map.len; /* a pinned file's own memory: shared (coop.c) */
    const pinio_view *mem = own ? &f->map : &cp->arena;
    size_t start = t->nbytes ? (size_t)(t->data - mem->ptr) : 0;
    pinio_view v;
    int rc = pinio_view_slice(mem, start, start + (size_t)t->nbytes, &v);
    if (rc < 0)
        return rc;
    rc = pinio_bytes_from_view(out, &v, mapped       ? PINIO_PROP_FILE
                                        : !own         ? cp->property
                                        : f->map_pinned ? PINIO_PROP_PINNED
                                                       : PINIO_PROP_NATIVE);
    if (rc < 0)
        pinio_view_release(&v);
    return rc;
}

int pinio_checkpoint_get_bytes(const pinio_checkpoint *cp, const char *name, pinio_bytes **out)
{
    if (!cp || !name || !out)
        return -EINVAL;
    size_t i = find_index(cp, name);
    return i == SIZE_MAX ? -ENOENT : pinio_checkpoint_tensor_bytes(cp, i, out);
}
