/*
 * Selection: which tensors of the validated headers a plan reads. The
 * index is a per-shard allowlist (a tensor a shard holds but the index does
 * not map is ignored and counted), the filters come next, and a name may be
 * loaded from one file only. All of it before any tensor byte is read.
 *
 * Names are carried with their length: a header may hold two names that
 * differ only after a NUL byte, and cutting them at the NUL would merge
 * them.
 *
 * A pattern is first a literal (the name, or a prefix of dotted components
 * of it), then, when it holds `*`, `?` or `[`, a glob too: a tensor whose
 * name holds those characters ("h[0].w", bitsandbytes' and GGUF-converted
 * names) is selected, and split, by its own name, which fnmatch alone would
 * read as a class. Callers that hold exact names (a process group's
 * exchange, a stream of the tensors another step planned) ask for exact
 * selection: no prefix, no glob, so that "x.weight" never drags in
 * "x.weight.absmax", which some other step owns.
 */
#include <errno.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "src/load/plan_internal.h"

static int cmp_bytes(const char *a, size_t al, const char *b, size_t bl)
{
    int c = memcmp(a, b, al < bl ? al : bl);
    if (c)
        return c;
    return al < bl ? -1 : al > bl;
}

bool pinio__filter_match(const char *const *filters, size_t n, const char *name, size_t len)
{
    if (n == 0)
        return true;
    /* A pattern is a C string: it can only match a name without NUL. */
    if (strlen(name) != len)
        return false;
    for (size_t i = 0; i < n; i++) {
        const char *f = filters[i];
        size_t fl = strlen(f);
        /* exact, or a prefix ending at a component boundary */
        if (strncmp(name, f, fl) == 0 &&
            (name[fl] == '\0' || name[fl] == '.' || (fl && f[fl - 1] == '.')))
            return true;
        if (strpbrk(f, "*?[") && fnmatch(f, name, 0) == 0)
            return true;
    }
    return false;
}


static int cmp_str(const void *x, const void *y)
{
    return strcmp(*(const char *const *)x, *(const char *const *)y);
}

int pinio__filters_prepare(pinio__filters *fs, const char *const *filters, size_t n, bool exact)
{
    *fs = (pinio__filters){ .n = n, .exact = exact };
    if (n == 0)
        return 0;
    fs->lit = malloc(n * sizeof(*fs->lit));
    fs->glob = malloc(n * sizeof(*fs->glob));
    if (!fs->lit || !fs->glob) {
        pinio__filters_free(fs);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        if (!exact && strpbrk(filters[i], "*?["))
            fs->glob[fs->nglob++] = filters[i];
        size_t len = strlen(filters[i]);
        if (len < 256)
            fs->lens[len / 64] |= (uint64_t)1 << (len % 64);
        else
            fs->long_lit = true;
        fs->lit[fs->nlit++] = filters[i];
    }
    qsort(fs->lit, fs->nlit, sizeof(*fs->lit), cmp_str);
    return 0;
}

void pinio__filters_free(pinio__filters *fs)
{
    free(fs->lit);
    free(fs->glob);
    *fs = (pinio__filters){ 0 };
}

/* Is the first `len` bytes of `name` one of the literal filters? A length
 * no literal filter has is answered without a search: a name's dotted
 * prefixes are looked up for every name of a file, and a window's exact
 * names (safe_open) are rarely the length of a prefix. */
static bool lit_has(const pinio__filters *fs, const char *name, size_t len)
{
    if (len < 256 ? !(fs->lens[len / 64] & ((uint64_t)1 << (len % 64))) : !fs->long_lit)
        return false;
    size_t lo = 0, hi = fs->nlit;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = cmp_bytes(name, len, fs->lit[mid], strlen(fs->lit[mid]));
        if (c == 0)
            return true;
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return false;
}

/* The same answer as pinio__filter_match() over the same filters (exact
 * ones: the lookup of the name alone). Every filter is a literal too,
 * which matches a name it equals, a prefix of it that ends just
 * before a '.', or one that ends with the '.' itself: so the name and its
 * dotted prefixes are looked up, a few binary searches, instead of every
 * filter compared with every name. safe_open's read-ahead windows pass one
 * exact name per tensor: matched linearly, a window of a 20,000-tensor file
 * cost N x M comparisons, 40 s of CPU for the whole file. */
bool pinio__filters_match(const pinio__filters *fs, const char *name, size_t len)
{
    if (fs->n == 0)
        return true;
    if (strlen(name) != len)
        return false;
    for (size_t i = 0; i < fs->nglob; i++)
        if (fnmatch(fs->glob[i], name, 0) == 0)
            return true;
    if (fs->nlit == 0)
        return false;
    if (lit_has(fs, name, len))
        return true;
    if (fs->exact)
        return false;
    for (size_t k = 0; k < len; k++)
        if (name[k] == '.' && (lit_has(fs, name, k) || lit_has(fs, name, k + 1)))
            return true;
    return false;
}

static int cmp_tensor_name(const void *x, const void *y, void *ctx)
{
    const pinio_plan_tensor *ts = ctx;
    const pinio_plan_tensor *a = &ts[*(const size_t *)x], *b = &ts[*(const size_t *)y];
    return cmp_bytes(a->name, a->name_len, b->name, b->name_len);
}

int pinio__select(pinio_plan *p, const char *const *filters, size_t nfilters, bool exact,
                  pinio_diag *diag)
{
    size_t total = 0;
    for (size_t i = 0; i < p->nfiles; i++)
        total += pinio_st_count(p->files[i].st);
    size_t nidx = pinio_st_index_count(p->index);
    bool *found = nidx ? calloc(nidx, sizeof(*found)) : NULL;
    p->tensors = calloc(total ? total : 1, sizeof(*p->tensors));
    if (!p->tensors || (nidx && !found)) {
        free(found);
        return -ENOMEM;
    }
    pinio__filters fs;
    if (pinio__filters_prepare(&fs, filters, nfilters, exact) < 0) {
        free(found);
        return -ENOMEM;
    }
    size_t n = 0;
    for (size_t i = 0; i < p->nfiles; i++) {
        const pinio_st *st = p->files[i].st;
        for (size_t k = 0; k < pinio_st_count(st); k++) {
            const pinio_st_tensor *t = pinio_st_at(st, k);
            if (p->index) {
                const pinio_st_index_entry *e = pinio_st_index_find(p->index, t->name, t->name_len);
                if (!e || e->shard != i) {
                    p->info.unindexed++;
                    continue;
                }
                found[e - pinio_st_index_at(p->index, 0)] = true;
            }
            if (!pinio__filters_match(&fs, t->name, t->name_len)) {
                p->info.skipped++;
                continue;
            }
            p->tensors[n++] = (pinio_plan_tensor){
                .name = t->name, .name_len = t->name_len, .dtype = t->dtype, .rank = t->rank,
                .shape = t->shape, .nbytes = t->nbytes, .file = (uint32_t)i,
                .file_offset = t->file_offset };
            p->info.bytes += t->nbytes;
        }
    }
    pinio__filters_free(&fs);
    p->ntensors = n;
    int rc = 0;
    for (size_t i = 0; i < nidx && rc == 0; i++)
        if (!found[i]) {
            const pinio_st_index_entry *e = pinio_st_index_at(p->index, i);
            pinio_diag_set_at(diag, -ENOENT, pinio_st_index_path(p->index), PINIO_DIAG_NO_OFFSET,
                              "tensor '%s' is mapped to %s, which does not contain it", e->name,
                              pinio_st_index_shard(p->index, e->shard));
            rc = -ENOENT;
        }
    free(found);
    /* One file's names are distinct already: its parser refuses a name
     * twice (DuplicateKey). The sort below is for names across files. */
    if (rc < 0 || n < 2 || p->nfiles < 2)
        return rc;
    size_t *order = malloc(n * sizeof(*order));
    if (!order)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        order[i] = i;
    qsort_r(order, n, sizeof(*order), cmp_tensor_name, p->tensors);
    for (size_t i = 1; i < n && rc == 0; i++) {
        const pinio_plan_tensor *a = &p->tensors[order[i - 1]], *b = &p->tensors[order[i]];
        if (cmp_bytes(a->name, a->name_len, b->name, b->name_len) == 0) {
            pinio_diag_set(diag, -EEXIST, "tensor '%s' is in both %s and %s", a->name,
                           p->files[a->file].path, p->files[b->file].path);
            rc = -EEXIST;
        }
    }
    free(order);
    return rc;
}
