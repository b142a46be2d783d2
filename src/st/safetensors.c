/* safetensors header parsing and validation. The rules, their order and their
 * names follow the reference implementation (safetensors' read_metadata and
 * Metadata::validate; see the table in include/pinio/safetensors.h), so a file
 * this parser accepts is one the reference accepts too. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pinio/safetensors.h"
#include "json_internal.h"
#include "src/st/clone.h"

/* ------------------------------------------------------------------ dtypes */

static const struct {
    const char *name;
    unsigned bits;
} dtypes[PINIO_DTYPE_COUNT] = {
    [PINIO_DTYPE_BOOL] = {"BOOL", 8},
    [PINIO_DTYPE_F4] = {"F4", 4},
    [PINIO_DTYPE_F6_E2M3] = {"F6_E2M3", 6},
    [PINIO_DTYPE_F6_E3M2] = {"F6_E3M2", 6},
    [PINIO_DTYPE_U8] = {"U8", 8},
    [PINIO_DTYPE_I8] = {"I8", 8},
    [PINIO_DTYPE_F8_E5M2] = {"F8_E5M2", 8},
    [PINIO_DTYPE_F8_E4M3] = {"F8_E4M3", 8},
    [PINIO_DTYPE_F8_E8M0] = {"F8_E8M0", 8},
    [PINIO_DTYPE_F8_E4M3FNUZ] = {"F8_E4M3FNUZ", 8},
    [PINIO_DTYPE_F8_E5M2FNUZ] = {"F8_E5M2FNUZ", 8},
    [PINIO_DTYPE_I16] = {"I16", 16},
    [PINIO_DTYPE_U16] = {"U16", 16},
    [PINIO_DTYPE_F16] = {"F16", 16},
    [PINIO_DTYPE_BF16] = {"BF16", 16},
    [PINIO_DTYPE_I32] = {"I32", 32},
    [PINIO_DTYPE_U32] = {"U32", 32},
    [PINIO_DTYPE_F32] = {"F32", 32},
    [PINIO_DTYPE_C64] = {"C64", 64},
    [PINIO_DTYPE_F64] = {"F64", 64},
    [PINIO_DTYPE_I64] = {"I64", 64},
    [PINIO_DTYPE_U64] = {"U64", 64},
};

const char *pinio_dtype_name(pinio_dtype dt)
{
    return (unsigned)dt < PINIO_DTYPE_COUNT ? dtypes[dt].name : "?";
}

unsigned pinio_dtype_bits(pinio_dtype dt)
{
    return (unsigned)dt < PINIO_DTYPE_COUNT ? dtypes[dt].bits : 0;
}

int pinio_dtype_from_name(const char *name, size_t len, pinio_dtype *out)
{
    /* The first byte first: called once per tensor of every header. */
    for (unsigned i = 0; i < PINIO_DTYPE_COUNT; i++) {
        if (len && dtypes[i].name[0] == name[0] && strlen(dtypes[i].name) == len &&
            memcmp(dtypes[i].name, name, len) == 0) {
            *out = (pinio_dtype)i;
            return 0;
        }
    }
    return -EINVAL;
}

/* ------------------------------------------------------------ structures */

struct st_tensor {
    pinio_st_tensor t; /* first: pinio_st_at() hands out &t */
    size_t name_off;   /* into strings, until pointers are fixed up */
    size_t dims_off;   /* into dims */
    size_t order;      /* position of the key in the header */
    size_t key_pos;    /* header byte of the key, for messages */
};

struct st_meta {
    pinio_st_kv kv;
    size_t key_off, val_off;
    size_t key_pos;
};

struct pinio_st {
    uint64_t header_len, file_size, data_size;
    struct st_tensor *tensors;
    size_t ntensors, cap_tensors;
    size_t *by_name; /* tensor indices sorted by name */
    uint64_t *dims;
    size_t ndims, cap_dims;
    char *strings;
    size_t nstrings, cap_strings;
    struct st_meta *meta;
    size_t nmeta, cap_meta;
};

/* ----------------------------------------------------------- diagnostics */

#define BUFNAME "<buffer>"

static int fail(pinio_diag *d, int code, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(pinio_diag *d, int code, const char *path, const char *fmt, ...)
{
    if (d) {
        d->code = code;
        int n = snprintf(d->msg, sizeof(d->msg), "%s: ", path ? path : BUFNAME);
        if (n < 0 || (size_t)n >= sizeof(d->msg))
            n = 0;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(d->msg + n, sizeof(d->msg) - (size_t)n, fmt, ap);
        va_end(ap);
        /* One line, whatever a name or path contained. */
        for (char *p = d->msg; *p; p++)
            if (*p == '\n' || *p == '\r')
                *p = ' ';
        /* The file in its own field, so that no caller parses the message
         * for it (the byte, where there is one, is in the message). */
        snprintf(d->path, sizeof(d->path), "%s", path ? path : "");
        d->offset = PINIO_DIAG_NO_OFFSET;
        d->index = PINIO_DIAG_NO_INDEX;
    }
    return code;
}

/* A tensor name made safe for a one-line message: control bytes become '?',
 * and long names are cut (the offset in the message still locates it). */
static const char *show(char out[100], const char *s, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n && k < 80; i++)
        out[k++] = (unsigned char)s[i] < 0x20 ? '?' : s[i];
    if (k < n) {
        memcpy(out + k, "...", 3);
        k += 3;
    }
    out[k] = '\0';
    return out;
}

/* ------------------------------------------------------------ allocation */

/* Grows `*p` to hold `need` elements. Growth is driven by what the parser has
 * actually read, never by a size the file claims. */
static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : 16;
    while (n < need) {
        if (n > SIZE_MAX / 2 / elem)
            return -ENOMEM;
        n *= 2;
    }
    void *q = realloc(*p, n * elem);
    if (!q)
        return -ENOMEM;
    *p = q;
    *cap = n;
    return 0;
}

/* Copies a decoded string into the arena; returns its offset through *off. */
static int add_string(pinio_st *st, const pinio__json_str *s, size_t *off)
{
    int r = grow((void **)&st->strings, &st->cap_strings, st->nstrings + s->len + 1, 1);
    if (r)
        return r;
    pinio__json_str_decode(s, st->strings + st->nstrings);
    *off = st->nstrings;
    st->nstrings += s->len + 1;
    return 0;
}

void pinio_st_free(pinio_st *st)
{
    if (!st)
        return;
    free(st->tensors);
    free(st->by_name);
    free(st->dims);
    free(st->strings);
    free(st->meta);
    free(st);
}

/* ------------------------------------------------------------ rules 1-3 */

int pinio_st_header_len(const void *prefix, uint64_t file_size, const char *path,
                        uint64_t *header_len, pinio_diag *diag)
{
    if (file_size < 8)
        return fail(diag, PINIO_EFORMAT, path,
                    "HeaderTooSmall: the file is %llu bytes, shorter than the 8-byte header length",
                    (unsigned long long)file_size);
    const uint8_t *b = prefix;
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | b[i]; /* little-endian whatever the host */
    if (n > PINIO_ST_HEADER_MAX)
        return fail(diag, PINIO_EFORMAT, path,
                    "HeaderTooLarge: header length %llu at byte 0 exceeds the limit of %u bytes",
                    (unsigned long long)n, PINIO_ST_HEADER_MAX);
    if (n > file_size - 8)
        return fail(diag, PINIO_EFORMAT, path,
                    "InvalidHeaderLength: header length %llu at byte 0 runs past the end of "
                    "the %llu-byte file",
                    (unsigned long long)n, (unsigned long long)file_size);
    *header_len = n;
    if (diag)
        diag->code = 0;
    return 0;
}

/* ------------------------------------------------------------- rule 5 */

struct parse_ctx {
    pinio_st *st;
    pinio__json j;
    const char *path;
    unsigned flags;
    pinio_diag *diag;
    const char *cur_tensor; /* arena offset valid only while parsing a tensor */
    size_t cur_len;
    size_t cur_key_off;
    bool in_tensor;
};

/* Reports the JSON parser's recorded error, naming the tensor it was in. */
static int json_error(struct parse_ctx *c)
{
    char nm[100];
    size_t off = c->j.err_off;
    if (c->in_tensor)
        return fail(c->diag, PINIO_EFORMAT, c->path,
                    "InvalidHeaderDeserialization: %s in tensor '%s' at header byte %zu "
                    "(file offset %zu)",
                    c->j.err_what,
                    show(nm, c->st->strings + c->cur_key_off, c->cur_len), off, off + 8);
    return fail(c->diag, PINIO_EFORMAT, c->path,
                "InvalidHeaderDeserialization: %s at header byte %zu (file offset %zu)",
                c->j.err_what, off, off + 8);
}

/* A shape error about the current tensor (the JSON itself was fine). */
static int tensor_error(struct parse_ctx *c, size_t pos, const char *what, const char *extra)
{
    char nm[100];
    return fail(c->diag, PINIO_EFORMAT, c->path,
                "InvalidHeaderDeserialization: tensor '%s': %s%s at header byte %zu",
                show(nm, c->st->strings + c->cur_key_off, c->cur_len), what, extra, pos);
}

static int parse_metadata(struct parse_ctx *c)
{
    pinio_st *st = c->st;
    pinio__json *j = &c->j;
    int r;
    if (pinio__json_peek(j) == PINIO__JSON_NULL) /* Option<HashMap>: null is None */
        return pinio__json_null(j) ? json_error(c) : 0;
    if (pinio__json_peek(j) != PINIO__JSON_OBJECT)
        return fail(c->diag, PINIO_EFORMAT, c->path,
                    "InvalidHeaderDeserialization: __metadata__ is not an object at header "
                    "byte %zu",
                    j->pos);
    if (pinio__json_object_begin(j))
        return json_error(c);
    bool first = true;
    pinio__json_str k, v;
    while ((r = pinio__json_object_next(j, &first, &k)) == 1) {
        size_t key_pos = (size_t)(k.raw - j->buf) - 1;
        if (pinio__json_peek(j) != PINIO__JSON_STRING) {
            if (j->err)
                return json_error(c);
            char nm[100];
            return fail(c->diag, PINIO_EFORMAT, c->path,
                        "InvalidHeaderDeserialization: __metadata__ value of key '%s' is not a "
                        "string at header byte %zu",
                        show(nm, k.raw, k.raw_len), j->pos);
        }
        if (pinio__json_string(j, &v))
            return json_error(c);
        if ((r = grow((void **)&st->meta, &st->cap_meta, st->nmeta + 1, sizeof(*st->meta))))
            return r;
        struct st_meta *m = &st->meta[st->nmeta];
        if ((r = add_string(st, &k, &m->key_off)) || (r = add_string(st, &v, &m->val_off)))
            return r;
        m->kv.key_len = k.len;
        m->kv.value_len = v.len;
        m->key_pos = key_pos;
        st->nmeta++;
    }
    return r < 0 ? json_error(c) : 0;
}

enum { F_DTYPE = 1, F_SHAPE = 2, F_OFFSETS = 4 };

static int parse_tensor(struct parse_ctx *c, struct st_tensor *t)
{
    pinio_st *st = c->st;
    pinio__json *j = &c->j;
    int r;
    if (pinio__json_peek(j) != PINIO__JSON_OBJECT) {
        if (j->err)
            return json_error(c);
        return tensor_error(c, j->pos, "entry is not an object", "");
    }
    if (pinio__json_object_begin(j))
        return json_error(c);
    unsigned seen = 0;
    bool first = true;
    pinio__json_str k;
    while ((r = pinio__json_object_next(j, &first, &k)) == 1) {
        size_t kpos = (size_t)(k.raw - j->buf) - 1;
        unsigned f = pinio__json_str_eq(&k, "dtype", 5)          ? F_DTYPE
                     : pinio__json_str_eq(&k, "shape", 5)        ? F_SHAPE
                     : pinio__json_str_eq(&k, "data_offsets", 12) ? F_OFFSETS
                                                                  : 0;
        if (!f) {
            if (c->flags & PINIO_ST_REJECT_UNKNOWN_FIELDS) {
                char nm[100], extra[110];
                snprintf(extra, sizeof(extra), " '%s'", show(nm, k.raw, k.raw_len));
                return tensor_error(c, kpos, "unknown field", extra);
            }
            if (pinio__json_skip(j))
                return json_error(c);
            continue;
        }
        if (seen & f) /* serde's derive rejects a repeated field too */
            return tensor_error(c, kpos, "duplicate field",
                                f == F_DTYPE ? " 'dtype'" : f == F_SHAPE ? " 'shape'"
                                                                        : " 'data_offsets'");
        seen |= f;
        if (f == F_DTYPE) {
            pinio__json_str v;
            size_t vpos = j->pos;
            if (pinio__json_peek(j) != PINIO__JSON_STRING)
                return j->err ? json_error(c) : tensor_error(c, j->pos, "dtype is not a string", "");
            if (pinio__json_string(j, &v))
                return json_error(c);
            /* serde decodes escapes before matching the name, so do we. */
            char dbuf[16];
            pinio_dtype dt;
            if (v.len >= sizeof(dbuf))
                dbuf[0] = '\0';
            else
                pinio__json_str_decode(&v, dbuf);
            if (v.len >= sizeof(dbuf) || pinio_dtype_from_name(dbuf, v.len, &dt)) {
                char nm[100], extra[110];
                snprintf(extra, sizeof(extra), " '%s'", show(nm, v.raw, v.raw_len));
                return tensor_error(c, vpos, "unknown dtype", extra);
            }
            t->t.dtype = dt;
        } else if (f == F_SHAPE) {
            if (pinio__json_peek(j) != PINIO__JSON_ARRAY)
                return j->err ? json_error(c) : tensor_error(c, j->pos, "shape is not an array", "");
            if (pinio__json_array_begin(j))
                return json_error(c);
            t->dims_off = st->ndims;
            bool afirst = true;
            unsigned rank = 0;
            while ((r = pinio__json_array_next(j, &afirst)) == 1) {
                uint64_t d;
                if (pinio__json_u64(j, &d))
                    return json_error(c);
                if ((r = grow((void **)&st->dims, &st->cap_dims, st->ndims + 1, sizeof(uint64_t))))
                    return r;
                st->dims[st->ndims++] = d;
                rank++;
            }
            if (r < 0)
                return json_error(c);
            t->t.rank = rank;
        } else {
            if (pinio__json_peek(j) != PINIO__JSON_ARRAY)
                return j->err ? json_error(c)
                              : tensor_error(c, j->pos, "data_offsets is not an array", "");
            size_t apos = j->pos;
            if (pinio__json_array_begin(j))
                return json_error(c);
            bool afirst = true;
            uint64_t v[2];
            unsigned n = 0;
            while ((r = pinio__json_array_next(j, &afirst)) == 1) {
                if (n == 2)
                    return tensor_error(c, apos, "data_offsets is not a pair", " (more than 2)");
                if (pinio__json_u64(j, &v[n++]))
                    return json_error(c);
            }
            if (r < 0)
                return json_error(c);
            if (n != 2)
                return tensor_error(c, apos, "data_offsets is not a pair", " (fewer than 2)");
            t->t.begin = v[0];
            t->t.end = v[1];
        }
    }
    if (r < 0)
        return json_error(c);
    if (seen != (F_DTYPE | F_SHAPE | F_OFFSETS))
        return tensor_error(c, t->key_pos, "missing field",
                            !(seen & F_DTYPE)   ? " 'dtype'"
                            : !(seen & F_SHAPE) ? " 'shape'"
                                                : " 'data_offsets'");
    return 0;
}

static int parse_json(struct parse_ctx *c)
{
    pinio_st *st = c->st;
    pinio__json *j = &c->j;
    int r;
    if (pinio__json_peek(j) != PINIO__JSON_OBJECT) {
        if (j->err)
            return json_error(c);
        return fail(c->diag, PINIO_EFORMAT, c->path,
                    "InvalidHeaderDeserialization: the header is not a JSON object "
                    "(header byte %zu)",
                    j->pos);
    }
    if (pinio__json_object_begin(j))
        return json_error(c);
    bool first = true, have_meta = false;
    pinio__json_str k;
    while ((r = pinio__json_object_next(j, &first, &k)) == 1) {
        size_t kpos = (size_t)(k.raw - j->buf) - 1;
        if (pinio__json_str_eq(&k, "__metadata__", 12)) {
            if (have_meta)
                return fail(c->diag, PINIO_EFORMAT, c->path,
                            "DuplicateKey: __metadata__ appears twice (header byte %zu)", kpos);
            have_meta = true;
            if ((r = parse_metadata(c)))
                return r;
            continue;
        }
        if ((r = grow((void **)&st->tensors, &st->cap_tensors, st->ntensors + 1,
                      sizeof(*st->tensors))))
            return r;
        /* One rule for every path: a name with a NUL is refused here, so
         * that the loader, the CLI and the bindings may pass names as C
         * strings (they would cut "a\u0000b" to "a"). */
        size_t nul = pinio__json_str_nul(&k);
        if (nul != SIZE_MAX) {
            char nm[100];
            size_t at = (size_t)(k.raw - j->buf) + nul;
            return fail(c->diag, PINIO_EFORMAT, c->path,
                        "InvalidHeaderDeserialization: tensor name '%s' contains a NUL "
                        "(\\u0000 at header byte %zu, file offset %zu)",
                        show(nm, k.raw, k.raw_len), at, at + 8);
        }
        struct st_tensor *t = &st->tensors[st->ntensors];
        memset(t, 0, sizeof(*t));
        if ((r = add_string(st, &k, &t->name_off)))
            return r;
        t->t.name_len = k.len;
        t->order = st->ntensors;
        t->key_pos = kpos;
        t->dims_off = st->ndims;
        c->in_tensor = true;
        c->cur_key_off = t->name_off;
        c->cur_len = k.len;
        if ((r = parse_tensor(c, t)))
            return r;
        c->in_tensor = false;
        st->ntensors++;
    }
    if (r < 0 || pinio__json_finish(j))
        return json_error(c);
    return 0;
}

/* ---------------------------------------------------- duplicates, rule 6 */

static int cmp_offsets(const void *a, const void *b)
{
    const struct st_tensor *x = a, *y = b;
    if (x->t.begin != y->t.begin)
        return x->t.begin < y->t.begin ? -1 : 1;
    if (x->t.end != y->t.end)
        return x->t.end < y->t.end ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

static int cmp_bytes(const char *a, size_t na, const char *b, size_t nb)
{
    int r = memcmp(a, b, na < nb ? na : nb);
    return r ? r : (na > nb) - (na < nb);
}

/* qsort has no context argument in C11; the strings and tensors are reached
 * through the index's own element type instead. */
struct name_ref {
    const char *name;
    size_t len;
    size_t idx;
};

static int cmp_name_ref(const void *a, const void *b)
{
    const struct name_ref *x = a, *y = b;
    return cmp_bytes(x->name, x->len, y->name, y->len);
}

static int build_name_index(struct parse_ctx *c)
{
    pinio_st *st = c->st;
    size_t n = st->ntensors;
    struct name_ref *refs = malloc((n ? n : 1) * sizeof(*refs));
    st->by_name = malloc((n ? n : 1) * sizeof(size_t));
    if (!refs || !st->by_name) {
        free(refs);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        refs[i] = (struct name_ref){st->strings + st->tensors[i].name_off,
                                    st->tensors[i].t.name_len, i};
    /* Sorting guarantees O(n log n) even for adversarial names, where a hash
     * table could be driven into quadratic collisions by a crafted header. */
    qsort(refs, n, sizeof(*refs), cmp_name_ref);
    for (size_t i = 0; i < n; i++) {
        if (i && cmp_name_ref(&refs[i - 1], &refs[i]) == 0) {
            const struct st_tensor *t = &st->tensors[refs[i].idx];
            const struct st_tensor *u = &st->tensors[refs[i - 1].idx];
            size_t later = t->key_pos > u->key_pos ? t->key_pos : u->key_pos;
            char nm[100];
            show(nm, refs[i].name, refs[i].len);
            free(refs);
            return fail(c->diag, PINIO_EFORMAT, c->path,
                        "DuplicateKey: tensor '%s' appears twice (second at header byte %zu)", nm,
                        later);
        }
        st->by_name[i] = refs[i].idx;
    }
    free(refs);
    return 0;
}

static int cmp_meta(const void *a, const void *b)
{
    const struct st_meta *x = *(const struct st_meta *const *)a;
    const struct st_meta *y = *(const struct st_meta *const *)b;
    return cmp_bytes(x->kv.key, x->kv.key_len, y->kv.key, y->kv.key_len);
}

static int check_meta_duplicates(struct parse_ctx *c)
{
    pinio_st *st = c->st;
    if (st->nmeta < 2)
        return 0;
    const struct st_meta **v = malloc(st->nmeta * sizeof(*v));
    if (!v)
        return -ENOMEM;
    for (size_t i = 0; i < st->nmeta; i++)
        v[i] = &st->meta[i];
    qsort(v, st->nmeta, sizeof(*v), cmp_meta);
    int r = 0;
    for (size_t i = 1; i < st->nmeta && !r; i++) {
        if (cmp_meta(&v[i - 1], &v[i]) == 0) {
            char nm[100];
            size_t later = v[i]->key_pos > v[i - 1]->key_pos ? v[i]->key_pos : v[i - 1]->key_pos;
            r = fail(c->diag, PINIO_EFORMAT, c->path,
                     "DuplicateKey: __metadata__ key '%s' appears twice (second at header byte "
                     "%zu)",
                     show(nm, v[i]->kv.key, v[i]->kv.key_len), later);
        }
    }
    free(v);
    return r;
}

static void format_shape(char *out, size_t cap, const pinio_st_tensor *t)
{
    size_t k = (size_t)snprintf(out, cap, "[");
    for (unsigned i = 0; i < t->rank && k < cap; i++)
        k += (size_t)snprintf(out + k, cap - k, "%s%llu", i ? ", " : "",
                              (unsigned long long)t->shape[i]);
    if (k < cap)
        snprintf(out + k, cap - k, "]");
}

/* Rule 6: with the tensors sorted by (begin, end), the data section must be
 * tiled exactly, and each tensor's span must match dtype × shape. */
static int check_tiling(struct parse_ctx *c)
{
    pinio_st *st = c->st;
    uint64_t cursor = 0;
    char nm[100], shp[96];
    for (size_t i = 0; i < st->ntensors; i++) {
        pinio_st_tensor *t = &st->tensors[i].t;
        const char *name = t->name;
        if (t->begin != cursor || t->end < t->begin) {
            const char *why = t->end < t->begin   ? "end before begin"
                              : t->begin > cursor ? "a gap before it"
                                                  : "it overlaps the previous tensor";
            return fail(c->diag, PINIO_EFORMAT, c->path,
                        "InvalidOffset: tensor '%s' data_offsets [%llu, %llu]: %s (expected to "
                        "begin at data byte %llu)",
                        show(nm, name, t->name_len), (unsigned long long)t->begin,
                        (unsigned long long)t->end, why, (unsigned long long)cursor);
        }
        cursor = t->end;
        uint64_t nelems = 1, nbits;
        for (unsigned d = 0; d < t->rank; d++) {
            if (__builtin_mul_overflow(nelems, t->shape[d], &nelems)) {
                format_shape(shp, sizeof(shp), t);
                return fail(c->diag, PINIO_EFORMAT, c->path,
                            "ValidationOverflow: tensor '%s' shape %s: element count overflows "
                            "64 bits",
                            show(nm, name, t->name_len), shp);
            }
        }
        if (__builtin_mul_overflow(nelems, (uint64_t)pinio_dtype_bits(t->dtype), &nbits)) {
            format_shape(shp, sizeof(shp), t);
            return fail(c->diag, PINIO_EFORMAT, c->path,
                        "ValidationOverflow: tensor '%s' %s shape %s: bit count overflows 64 bits",
                        show(nm, name, t->name_len), pinio_dtype_name(t->dtype), shp);
        }
        if (nbits % 8) {
            format_shape(shp, sizeof(shp), t);
            return fail(c->diag, PINIO_EFORMAT, c->path,
                        "MisalignedSlice: tensor '%s' %s shape %s is %llu bits, not a whole "
                        "number of bytes",
                        show(nm, name, t->name_len), pinio_dtype_name(t->dtype), shp,
                        (unsigned long long)nbits);
        }
        if (nbits / 8 != t->end - t->begin) {
            format_shape(shp, sizeof(shp), t);
            return fail(c->diag, PINIO_EFORMAT, c->path,
                        "TensorInvalidInfo: tensor '%s' %s shape %s is %llu bytes but "
                        "data_offsets [%llu, %llu] span %llu",
                        show(nm, name, t->name_len), pinio_dtype_name(t->dtype), shp,
                        (unsigned long long)(nbits / 8), (unsigned long long)t->begin,
                        (unsigned long long)t->end, (unsigned long long)(t->end - t->begin));
        }
        t->nelems = nelems;
        t->nbytes = t->end - t->begin;
    }
    st->data_size = cursor;
    return 0;
}

/* Pointers into the arenas are set only now: the arenas moved while growing. */
static void fix_pointers(pinio_st *st)
{
    static const uint64_t no_dims[1];
    uint64_t data_off = 8 + st->header_len;
    for (size_t i = 0; i < st->ntensors; i++) {
        struct st_tensor *t = &st->tensors[i];
        t->t.name = st->strings + t->name_off;
        t->t.shape = t->t.rank ? st->dims + t->dims_off : no_dims;
        t->t.file_offset = data_off + t->t.begin;
        uint64_t a = t->t.file_offset & (~t->t.file_offset + 1); /* lowest set bit */
        t->t.align = a && a < 4096 ? a : 4096;
    }
    for (size_t i = 0; i < st->nmeta; i++) {
        st->meta[i].kv.key = st->strings + st->meta[i].key_off;
        st->meta[i].kv.value = st->strings + st->meta[i].val_off;
    }
}

int pinio_st_parse(pinio_st **out, const void *buf, size_t len, uint64_t file_size,
                   const char *path, unsigned flags, pinio_diag *diag)
{
    *out = NULL;
    uint8_t prefix[8] = {0};
    if (len)
        memcpy(prefix, buf, len < 8 ? len : 8);
    if (len < 8 && file_size >= 8)
        return fail(diag, -EINVAL, path, "buffer of %zu bytes holds no header length", len);
    uint64_t n;
    int r = pinio_st_header_len(prefix, file_size, path, &n, diag);
    if (r)
        return r;
    if (len - 8 < n)
        return fail(diag, -EINVAL, path,
                    "buffer of %zu bytes is shorter than the %llu-byte header it announces", len,
                    (unsigned long long)(n + 8));
    const char *hdr = (const char *)buf + 8;
    size_t bad;
    if (!pinio__utf8_check(hdr, (size_t)n, &bad))
        return fail(diag, PINIO_EFORMAT, path,
                    "InvalidHeader: the header is not valid UTF-8 at header byte %zu (file "
                    "offset %zu)",
                    bad, bad + 8);

    pinio_st *st = calloc(1, sizeof(*st));
    if (!st)
        return fail(diag, -ENOMEM, path, "out of memory");
    st->header_len = n;
    st->file_size = file_size;
    struct parse_ctx c = {.st = st, .path = path, .flags = flags, .diag = diag};
    pinio__json_init(&c.j, hdr, (size_t)n);
    if ((r = parse_json(&c)))
        goto out;
    /* The arenas are final now: pointers into them stay valid (sorting moves
     * the tensor records, pointers and all). */
    fix_pointers(st);
    if ((r = check_meta_duplicates(&c)))
        goto out;
    /* Sort first so the name index refers to final positions. A header
     * whose entries are in data order already (pinio's writer, many
     * others) is checked in one pass instead of sorted. */
    bool in_order = true;
    for (size_t i = 1; i < st->ntensors && in_order; i++)
        in_order = cmp_offsets(&st->tensors[i - 1], &st->tensors[i]) <= 0;
    if (!in_order)
        qsort(st->tensors, st->ntensors, sizeof(*st->tensors), cmp_offsets);
    if ((r = build_name_index(&c)) || (r = check_tiling(&c)))
        goto out;
    /* Rule 7: the data section ends exactly at the end of the file. Checked
     * addition: a huge claimed end must not wrap around to the file size. */
    uint64_t data_end;
    bool ovf = __builtin_add_overflow(8 + n, st->data_size, &data_end);
    bool ok = !ovf && (data_end == file_size ||
                       ((flags & PINIO_ST_ALLOW_TRAILING_BYTES) && data_end < file_size));
    if (!ok) {
        r = fail(diag, PINIO_EFORMAT, path,
                 "MetadataIncompleteBuffer: tensor data ends at file offset %s%llu but the file "
                 "is %llu bytes (%s)",
                 ovf ? "beyond 2^64+" : "", (unsigned long long)(ovf ? 0 : data_end),
                 (unsigned long long)file_size,
                 !ovf && data_end < file_size ? "trailing bytes" : "truncated file");
        goto out;
    }
    if (diag) {
        diag->code = 0;
        diag->msg[0] = '\0';
    }
    *out = st;
    return 0;
out:
    if (r == -ENOMEM)
        fail(diag, r, path, "out of memory while parsing the header");
    pinio_st_free(st);
    return r;
}

/* The copy owns arrays of its own (exact sizes): the tensor records, name
 * index and metadata move as they are, and the pointers into the strings
 * and dims are set anew, as after a parse. */
int pinio__st_clone(pinio_st **out, const pinio_st *st)
{
    *out = NULL;
    pinio_st *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    *c = *st;
    c->tensors = NULL;
    c->by_name = NULL;
    c->dims = NULL;
    c->strings = NULL;
    c->meta = NULL;
    size_t n = st->ntensors ? st->ntensors : 1;
    c->tensors = malloc(n * sizeof(*c->tensors));
    c->by_name = malloc(n * sizeof(*c->by_name));
    c->dims = malloc((st->ndims ? st->ndims : 1) * sizeof(*c->dims));
    c->strings = malloc(st->nstrings ? st->nstrings : 1);
    c->meta = malloc((st->nmeta ? st->nmeta : 1) * sizeof(*c->meta));
    if (!c->tensors || !c->by_name || !c->dims || !c->strings || !c->meta) {
        pinio_st_free(c);
        return -ENOMEM;
    }
    if (st->ntensors) {
        memcpy(c->tensors, st->tensors, st->ntensors * sizeof(*c->tensors));
        memcpy(c->by_name, st->by_name, st->ntensors * sizeof(*c->by_name));
    }
    if (st->ndims)
        memcpy(c->dims, st->dims, st->ndims * sizeof(*c->dims));
    if (st->nstrings)
        memcpy(c->strings, st->strings, st->nstrings);
    if (st->nmeta)
        memcpy(c->meta, st->meta, st->nmeta * sizeof(*c->meta));
    c->cap_tensors = st->ntensors;
    c->cap_dims = st->ndims;
    c->cap_strings = st->nstrings;
    c->cap_meta = st->nmeta;
    fix_pointers(c);
    *out = c;
    return 0;
}

/* ------------------------------------------------------------- file I/O */

static int pread_full(int fd, void *buf, size_t len, uint64_t off, size_t *got)
{
    size_t done = 0;
    while (done < len) {
        ssize_t k = pread(fd, (char *)buf + done, len - done, (off_t)(off + done));
        if (k < 0) {
            if (errno == EINTR)
                continue;
            *got = done;
            return -errno;
        }
        if (k == 0)
            break;
        done += (size_t)k;
    }
    *got = done;
    return 0;
}

int pinio_st_read_fd(pinio_st **out, int fd, const char *path, unsigned flags, pinio_diag *diag)
{
    *out = NULL;
    struct stat sb;
    if (fstat(fd, &sb) < 0) {
        int e = -errno;
        return fail(diag, e, path, "fstat: %s", pinio_strerror(e));
    }
    if (S_ISDIR(sb.st_mode))
        return fail(diag, -EISDIR, path, "is a directory, not a safetensors file");
    if (!S_ISREG(sb.st_mode))
        return fail(diag, -EINVAL, path, "not a regular file");
    uint64_t size = (uint64_t)sb.st_size;
    uint8_t prefix[8] = {0};
    size_t got;
    int r = pread_full(fd, prefix, size < 8 ? (size_t)size : 8, 0, &got);
    if (r)
        return fail(diag, r, path, "read of the header length: %s", pinio_strerror(r));
    uint64_t n;
    if ((r = pinio_st_header_len(prefix, size, path, &n, diag)))
        return r;
    /* N is now known to be <= 10^8 and within the file: safe to allocate. */
    uint8_t *buf = malloc((size_t)n + 8);
    if (!buf)
        return fail(diag, -ENOMEM, path, "out of memory for a %llu-byte header",
                    (unsigned long long)n);
    memcpy(buf, prefix, 8);
    r = pread_full(fd, buf + 8, (size_t)n, 8, &got);
    if (r) {
        free(buf);
        return fail(diag, r, path, "read of the header: %s", pinio_strerror(r));
    }
    if (got != n) {
        free(buf);
        return fail(diag, PINIO_ECHANGED, path,
                    "file shrank while reading the header (%zu of %llu bytes)", got,
                    (unsigned long long)n);
    }
    r = pinio_st_parse(out, buf, (size_t)n + 8, size, path, flags, diag);
    free(buf);
    return r;
}

int pinio_st_open(pinio_st **out, const char *path, unsigned flags, pinio_diag *diag)
{
    *out = NULL;
    /* O_NONBLOCK: a FIFO's open() would wait for a writer forever;
     * pinio_st_read_fd() then refuses it as not a regular file. The flag
     * changes nothing for a regular file's reads. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        int e = -errno;
        return fail(diag, e, path, "open: %s", pinio_strerror(e));
    }
    int r = pinio_st_read_fd(out, fd, path, flags, diag);
    close(fd);
    return r;
}

/* ------------------------------------------------------------ accessors */

size_t pinio_st_count(const pinio_st *st)
{
    return st->ntensors;
}

const pinio_st_tensor *pinio_st_at(const pinio_st *st, size_t i)
{
    return i < st->ntensors ? &st->tensors[i].t : NULL;
}

const pinio_st_tensor *pinio_st_find(const pinio_st *st, const char *name, size_t len)
{
    size_t lo = 0, hi = st->ntensors;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const pinio_st_tensor *t = &st->tensors[st->by_name[mid]].t;
        int c = cmp_bytes(t->name, t->name_len, name, len);
        if (c == 0)
            return t;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

size_t pinio__st_by_name(const pinio_st *st, size_t k)
{
    return st->by_name[k];
}

size_t pinio_st_position(const pinio_st *st, const pinio_st_tensor *t)
{
    return (size_t)((const struct st_tensor *)(const void *)t - st->tensors);
}

size_t pinio_st_metadata_count(const pinio_st *st)
{
    return st->nmeta;
}

const pinio_st_kv *pinio_st_metadata_at(const pinio_st *st, size_t i)
{
    return i < st->nmeta ? &st->meta[i].kv : NULL;
}

const char *pinio_st_metadata_get(const pinio_st *st, const char *key)
{
    size_t n = strlen(key);
    for (size_t i = 0; i < st->nmeta; i++)
        if (st->meta[i].kv.key_len == n && memcmp(st->meta[i].kv.key, key, n) == 0)
            return st->meta[i].kv.value;
    return NULL;
}

uint64_t pinio_st_header_size(const pinio_st *st)
{
    return st->header_len;
}

uint64_t pinio_st_data_offset(const pinio_st *st)
{
    return 8 + st->header_len;
}

uint64_t pinio_st_data_size(const pinio_st *st)
{
    return st->data_size;
}

uint64_t pinio_st_file_size(const pinio_st *st)
{
    return st->file_size;
}
