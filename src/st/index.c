/*
 * model.safetensors.index.json: the weight_map of a sharded checkpoint.
 *
 * The parser returns its own value (pinio_st_index) instead of writing into
 * a loader's input list, so that the loader, `pinio info` and the MPI and
 * Python front ends read an index the same way.
 *
 * Cost: an index names every tensor of a checkpoint, and some name 10^5 or
 * more. Every step is O(n log n) at worst: names and shard names are
 * appended to one buffer as they are read, shards are deduplicated by
 * sorting (first appearance keeps the number), and entries are sorted once
 * by name, which is also how a duplicate is found. An earlier version
 * searched the shard list linearly for every entry (seconds of CPU for 10^5
 * shards before any file was opened).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pinio/safetensors.h"
#include "src/st/json_internal.h"

struct pinio_st_index {
    char *path;
    pinio_st_index_entry *entries; /* sorted by name */
    size_t n;
    char **shards;                 /* joined paths, in first-appearance order */
    size_t nshards;
    char *names;                   /* every decoded tensor name, NUL-separated */
};

/* While parsing: offsets into growing buffers (pointers would move). */
typedef struct raw_entry {
    size_t name_off, name_len;
    size_t shard_off, shard_len; /* in the shard-name buffer */
    size_t shard;                /* filled after deduplication */
} raw_entry;

typedef struct buf {
    char *p;
    size_t len, cap;
} buf;

static int buf_reserve(buf *b, size_t more)
{
    if (b->cap - b->len > more)
        return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap - b->len <= more) {
        if (cap > SIZE_MAX / 2)
            return -ENOMEM;
        cap *= 2;
    }
    char *np = realloc(b->p, cap);
    if (!np)
        return -ENOMEM;
    b->p = np;
    b->cap = cap;
    return 0;
}

/* Appends a decoded JSON string plus a NUL; its offset goes to `*off`. */
static int buf_add(buf *b, const pinio__json_str *s, size_t *off)
{
    if (buf_reserve(b, s->len + 1) < 0)
        return -ENOMEM;
    *off = b->len;
    pinio__json_str_decode(s, b->p + b->len);
    b->len += s->len + 1;
    return 0;
}

static int cmp_bytes(const char *a, size_t al, const char *b, size_t bl)
{
    int c = memcmp(a, b, al < bl ? al : bl);
    if (c)
        return c;
    return al < bl ? -1 : al > bl;
}

/* qsort_r comparators over raw entries. */
static int cmp_name(const void *x, const void *y, void *names)
{
    const raw_entry *a = x, *b = y;
    const char *n = names;
    return cmp_bytes(n + a->name_off, a->name_len, n + b->name_off, b->name_len);
}

static int cmp_shard(const void *x, const void *y, void *ctx)
{
    const raw_entry *const *a = x, *const *b = y;
    const char *s = ctx;
    int c = cmp_bytes(s + (*a)->shard_off, (*a)->shard_len, s + (*b)->shard_off,
                      (*b)->shard_len);
    if (c)
        return c;
    return *a < *b ? -1 : *a > *b; /* entries are in document order: earlier first */
}

/* A shard must be a relative path inside the index's folder, judged per
 * '/'-separated component (a substring test would refuse "model..v2"): no
 * leading '/', no empty component ("a//b", "a/"), no ".." component, no NUL
 * (it would cut the name short when the file is opened). Returns NULL, or
 * what is wrong. Confinement against symlinks is the opener's job
 * (RESOLVE_BENEATH); this is the part a name alone decides. */
static const char *shard_name_problem(const char *s, size_t len)
{
    if (len == 0)
        return "is empty";
    if (memchr(s, '\0', len))
        return "contains a NUL byte";
    if (s[0] == '/')
        return "is an absolute path";
    for (size_t i = 0; i < len;) {
        size_t j = i;
        while (j < len && s[j] != '/')
            j++;
        if (j == i)
            return "has an empty path component";
        if (j - i == 2 && s[i] == '.' && s[i + 1] == '.')
            return "has a '..' component";
        i = j + 1;
        if (j + 1 == len)
            return "has an empty path component"; /* a trailing '/' */
    }
    return NULL;
}

/* Drops "." components in place ("./a" and "a/./b" name "a" and "a/b"), so
 * that one file spelled two ways is one shard, opened once. Returns the new
 * length; a name of "." components only keeps its last one, which then is
 * not a regular file and is refused when opened. */
static size_t shard_name_normalize(char *s, size_t len)
{
    size_t w = 0;
    for (size_t i = 0; i < len;) {
        size_t j = i;
        while (j < len && s[j] != '/')
            j++;
        bool dot = j - i == 1 && s[i] == '.';
        if (!dot || (j == len && w == 0)) {
            if (w)
                s[w++] = '/';
            memmove(s + w, s + i, j - i);
            w += j - i;
        }
        i = j + 1;
    }
    s[w] = '\0';
    return w;
}

void pinio_st_index_free(pinio_st_index *ix)
{
    if (!ix)
        return;
    for (size_t i = 0; i < ix->nshards; i++)
        free(ix->shards[i]);
    free(ix->shards);
    free(ix->entries);
    free(ix->names);
    free(ix->path);
    free(ix);
}

static char *join(const char *dir, size_t dl, const char *name, size_t nl)
{
    char *p = malloc(dl + nl + 2);
    if (!p)
        return NULL;
    size_t k = 0;
    if (dl) {
        memcpy(p, dir, dl);
        p[dl] = '/';
        k = dl + 1;
    }
    memcpy(p + k, name, nl);
    p[k + nl] = '\0';
    return p;
}

/* Numbers shards in first-appearance order and builds their paths. */
static int number_shards(pinio_st_index *ix, raw_entry *raw, size_t n, const buf *sh)
{
    raw_entry **by = malloc(n * sizeof(*by));
    ix->shards = calloc(n, sizeof(*ix->shards));
    if (!by || !ix->shards) {
        free(by);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        by[i] = &raw[i];
    qsort_r(by, n, sizeof(*by), cmp_shard, sh->p);
    /* Runs of one shard name: the run's first entry (earliest in the
     * document) represents it. Mark each entry with its representative. */
    size_t *first = malloc(n * sizeof(*first));
    if (!first) {
        free(by);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        bool same = i && cmp_bytes(sh->p + by[i]->shard_off, by[i]->shard_len,
                                   sh->p + by[i - 1]->shard_off, by[i - 1]->shard_len) == 0;
        first[by[i] - raw] = same ? first[by[i - 1] - raw] : (size_t)(by[i] - raw);
    }
    free(by);
    /* In document order, an entry that represents itself opens a new shard. */
    const char *slash = strrchr(ix->path, '/');
    size_t dl = slash ? (size_t)(slash - ix->path) : 0;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (first[i] == i) {
            raw[i].shard = ix->nshards;
            ix->shards[ix->nshards] = join(ix->path, dl, sh->p + raw[i].shard_off,
                                           raw[i].shard_len);
            rc = ix->shards[ix->nshards] ? 0 : -ENOMEM;
            ix->nshards++;
        } else {
            raw[i].shard = raw[first[i]].shard;
        }
    }
    free(first);
    return rc;
}

int pinio_st_index_parse(pinio_st_index **out, const void *data, size_t len, const char *path,
                         pinio_diag *diag)
{
    if (out)
        *out = NULL;
    if (!out || (!data && len))
        return -EINVAL;
    if (!path)
        path = "<buffer>";
    if (len > PINIO_ST_INDEX_MAX) {
        pinio_diag_set_at(diag, PINIO_EFORMAT, path, PINIO_DIAG_NO_OFFSET,
                          "index file too large (%zu bytes, limit %u)", len, PINIO_ST_INDEX_MAX);
        return PINIO_EFORMAT;
    }
    const char *text = data;
    size_t bad = 0;
    if (!pinio__utf8_check(text, len, &bad)) {
        pinio_diag_set_at(diag, PINIO_EFORMAT, path, bad, "index: invalid UTF-8 at byte %zu", bad);
        return PINIO_EFORMAT;
    }
    pinio_st_index *ix = calloc(1, sizeof(*ix));
    if (!ix || !(ix->path = strdup(path))) {
        free(ix);
        return -ENOMEM;
    }
    buf names = { 0 }, sh = { 0 };
    raw_entry *raw = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;

    pinio__json j;
    pinio__json_init(&j, text, len);
    bool first = true, have_map = false;
    pinio__json_str key;
    if (pinio__json_peek(&j) != PINIO__JSON_OBJECT) {
        pinio__json_fail(&j, j.pos, "top level is not an object");
        goto json_err;
    }
    pinio__json_object_begin(&j);
    while ((rc = pinio__json_object_next(&j, &first, &key)) == 1) {
        if (!pinio__json_str_eq(&key, "weight_map", 10)) {
            if (pinio__json_skip(&j) < 0)
                goto json_err;
            continue;
        }
        if (have_map) {
            pinio__json_fail(&j, j.pos, "duplicate key weight_map");
            goto json_err;
        }
        have_map = true;
        if (pinio__json_peek(&j) != PINIO__JSON_OBJECT) {
            pinio__json_fail(&j, j.pos, "weight_map is not an object");
            goto json_err;
        }
        pinio__json_object_begin(&j);
        bool mfirst = true;
        pinio__json_str name, shard;
        while ((rc = pinio__json_object_next(&j, &mfirst, &name)) == 1) {
            size_t at = j.pos;
            if (pinio__json_peek(&j) != PINIO__JSON_STRING) {
                pinio__json_fail(&j, at, "weight_map value is not a string");
                goto json_err;
            }
            /* The header parser's rule: no NUL in tensor names. */
            size_t nul = pinio__json_str_nul(&name);
            if (nul != SIZE_MAX) {
                pinio__json_fail(&j, (size_t)(name.raw - text) + nul,
                                 "tensor name contains a NUL (\\u0000)");
                goto json_err;
            }
            if (pinio__json_string(&j, &shard) < 0)
                goto json_err;
            if (n == cap) {
                cap = cap ? cap * 2 : 256;
                raw_entry *nr = realloc(raw, cap * sizeof(*nr));
                if (!nr) {
                    rc = -ENOMEM;
                    goto out;
                }
                raw = nr;
            }
            raw_entry *e = &raw[n];
            if (buf_add(&names, &name, &e->name_off) < 0 || buf_add(&sh, &shard, &e->shard_off) < 0) {
                rc = -ENOMEM;
                goto out;
            }
            e->name_len = name.len;
            const char *why = shard_name_problem(sh.p + e->shard_off, shard.len);
            if (why) {
                pinio_diag_set_at(diag, PINIO_EFORMAT, path, at,
                                  "index: tensor '%s' maps to shard '%s', which %s (a shard must "
                                  "be a relative path inside the index's folder)",
                                  names.p + e->name_off, sh.p + e->shard_off, why);
                rc = PINIO_EFORMAT;
                goto out;
            }
            e->shard_len = shard_name_normalize(sh.p + e->shard_off, shard.len);
            n++;
        }
        if (rc < 0)
            goto json_err;
    }
    if (rc < 0 || pinio__json_finish(&j) < 0)
        goto json_err;
    if (!have_map) {
        pinio_diag_set_at(diag, PINIO_EFORMAT, path, PINIO_DIAG_NO_OFFSET, "index: no weight_map");
        rc = PINIO_EFORMAT;
        goto out;
    }
    if (n == 0) {
        /* Loading nothing and calling it success would hide a broken index. */
        pinio_diag_set_at(diag, PINIO_EFORMAT, path, PINIO_DIAG_NO_OFFSET,
                          "index: weight_map is empty");
        rc = PINIO_EFORMAT;
        goto out;
    }
    if ((rc = number_shards(ix, raw, n, &sh)) < 0)
        goto out;
    qsort_r(raw, n, sizeof(*raw), cmp_name, names.p);
    for (size_t i = 1; i < n; i++)
        if (cmp_name(&raw[i - 1], &raw[i], names.p) == 0) {
            pinio_diag_set_at(diag, PINIO_EFORMAT, path, PINIO_DIAG_NO_OFFSET,
                              "index: DuplicateKey: tensor '%s' listed twice in weight_map",
                              names.p + raw[i].name_off);
            rc = PINIO_EFORMAT;
            goto out;
        }
    ix->entries = malloc(n * sizeof(*ix->entries));
    if (!ix->entries) {
        rc = -ENOMEM;
        goto out;
    }
    ix->names = names.p;
    names.p = NULL;
    for (size_t i = 0; i < n; i++)
        ix->entries[i] = (pinio_st_index_entry){ .name = ix->names + raw[i].name_off,
                                                 .name_len = raw[i].name_len,
                                                 .shard = raw[i].shard };
    ix->n = n;
    rc = 0;
    goto out;
json_err:
    pinio_diag_set_at(diag, PINIO_EFORMAT, path, j.err_off, "index: invalid JSON at byte %zu: %s",
                      j.err_off, j.err_what ? j.err_what : "syntax error");
    rc = PINIO_EFORMAT;
out:
    free(raw);
    free(names.p);
    free(sh.p);
    if (rc < 0)
        pinio_st_index_free(ix);
    else
        *out = ix;
    return rc;
}

int pinio_st_index_open(pinio_st_index **out, const char *path, pinio_diag *diag)
{
    if (out)
        *out = NULL;
    if (!out || !path)
        return -EINVAL;
    /* O_NONBLOCK: a FIFO named like an index must not block the open. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        int e = -errno;
        pinio_diag_set_at(diag, e, path, PINIO_DIAG_NO_OFFSET, "cannot open: %s", pinio_strerror(e));
        return e;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        pinio_diag_set_at(diag, -EINVAL, path, PINIO_DIAG_NO_OFFSET, "not a regular file");
        return -EINVAL;
    }
    if ((uint64_t)st.st_size > PINIO_ST_INDEX_MAX) {
        close(fd);
        pinio_diag_set_at(diag, PINIO_EFORMAT, path, PINIO_DIAG_NO_OFFSET,
                          "index file too large (%lld bytes, limit %u)", (long long)st.st_size,
                          PINIO_ST_INDEX_MAX);
        return PINIO_EFORMAT;
    }
    size_t sz = (size_t)st.st_size;
    char *b = malloc(sz + 1);
    if (!b) {
        close(fd);
        return -ENOMEM;
    }
    size_t got = 0;
    while (got < sz) {
        ssize_t r = pread(fd, b + got, sz - got, (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            int e = r < 0 ? -errno : PINIO_ECHANGED;
            pinio_diag_set_at(diag, e, path, got, "read failed at offset %zu: %s", got,
                              pinio_strerror(e));
            free(b);
            close(fd);
            return e;
        }
        got += (size_t)r;
    }
    close(fd);
    b[sz] = '\0'; /* the parser never reads it; ASan still sees a read past len */
    int rc = pinio_st_index_parse(out, b, sz, path, diag);
    free(b);
    return rc;
}

const char *pinio_st_index_path(const pinio_st_index *ix)
{
    return ix->path;
}

size_t pinio_st_index_count(const pinio_st_index *ix)
{
    return ix ? ix->n : 0;
}

const pinio_st_index_entry *pinio_st_index_at(const pinio_st_index *ix, size_t i)
{
    return ix && i < ix->n ? &ix->entries[i] : NULL;
}

const pinio_st_index_entry *pinio_st_index_find(const pinio_st_index *ix, const char *name,
                                                size_t len)
{
    if (!ix || !name)
        return NULL;
    size_t lo = 0, hi = ix->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const pinio_st_index_entry *e = &ix->entries[mid];
        int c = cmp_bytes(e->name, e->name_len, name, len);
        if (c == 0)
            return e;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

size_t pinio_st_index_shard_count(const pinio_st_index *ix)
{
    return ix ? ix->nshards : 0;
}

const char *pinio_st_index_shard(const pinio_st_index *ix, size_t i)
{
    return ix && i < ix->nshards ? ix->shards[i] : NULL;
}
