/* Deterministic synthetic checkpoints. The content generator is counter-based
 * (block b of a tensor is splitmix64's output number b for the stream keyed by
 * hash(name) ^ seed), so any byte range is computed directly: readers verify
 * in any order, writers never keep a copy. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "pinio/gen.h"
#include "src/base/clock.h"
#include "src/base/opts.h"
#include "src/base/stale.h"
#include "src/s3/client.h"

/* ------------------------------------------------------------ generator */

#define GOLDEN 0x9E3779B97F4A7C15ull

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t stream_key(uint64_t seed, const char *name)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a 64 */
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 0x100000001b3ull;
    return h ^ seed;
}

/* splitmix64's b-th output: state = key + (b + 1) * GOLDEN. */
static uint64_t block(uint64_t key, uint64_t b)
{
    return mix64(key + (b + 1) * GOLDEN);
}

static void store_le64(uint8_t *d, uint64_t w)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(d, &w, 8);
#else
    for (int i = 0; i < 8; i++)
        d[i] = (uint8_t)(w >> (8 * i));
#endif
}

void pinio_gen_fill(uint64_t seed, const char *name, uint64_t offset, void *buf, size_t len)
{
    uint64_t key = stream_key(seed, name);
    uint8_t *d = buf;
    /* A partial first block, whole blocks, a partial last block. */
    if (offset % 8 && len) {
        uint8_t tmp[8];
        store_le64(tmp, block(key, offset / 8));
        size_t k = 8 - (size_t)(offset % 8);
        if (k > len)
            k = len;
        memcpy(d, tmp + offset % 8, k);
        d += k;
        offset += k;
        len -= k;
    }
    uint64_t b = offset / 8;
    for (; len >= 8; len -= 8, d += 8)
        store_le64(d, block(key, b++));
    if (len) {
        uint8_t tmp[8];
        store_le64(tmp, block(key, b));
        memcpy(d, tmp, len);
    }
}

bool pinio_gen_verify(uint64_t seed, const char *name, uint64_t offset, const void *buf,
                      size_t len, uint64_t *first_bad)
{
    uint8_t want[4096];
    const uint8_t *p = buf;
    while (len) {
        size_t n = len < sizeof(want) ? len : sizeof(want);
        pinio_gen_fill(seed, name, offset, want, n);
        if (memcmp(want, p, n) != 0) {
            size_t i = 0;
            while (want[i] == p[i])
                i++;
            if (first_bad)
                *first_bad = offset + i;
            return false;
        }
        p += n;
        offset += n;
        len -= n;
    }
    return true;
}

/* ------------------------------------------------------------- the plan */

void pinio_gen_opts_init(pinio_gen_opts *opts, size_t size)
{
    pinio_gen_opts d;
    memset(&d, 0, sizeof(d));
    pinio__opts_init(opts, size, &d, sizeof(d));
}

int pinio_gen_shard_name(char *buf, size_t cap, unsigned i, unsigned k)
{
    int n = snprintf(buf, cap, "model-%05u-of-%05u.safetensors", i, k);
    return n < 0 || (size_t)n >= cap ? -ERANGE : 0;
}

static int fail(pinio_diag *d, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(pinio_diag *d, int code, const char *fmt, ...)
{
    if (d) {
        d->code = code;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(d->msg, sizeof(d->msg), fmt, ap);
        va_end(ap);
    }
    return code;
}

#define NAME_MAX_LEN 80
/* Bounds that keep every product in 64 bits and every header under the
 * format's 100 MB (a layer is 9 entries of about 100 header bytes). */
#define MAX_DIM (1u << 20)
#define MAX_LAYERS 100000u

struct gen_tensor {
    char name[NAME_MAX_LEN];
    pinio_dtype dtype;
    unsigned rank;
    uint64_t shape[2];
    uint64_t nbytes;
};

/* The per-layer tensors of a Llama-style decoder, in checkpoint order. */
static const char *const layer_parts[] = {
    "input_layernorm.weight", "self_attn.q_proj.weight", "self_attn.k_proj.weight",
    "self_attn.v_proj.weight", "self_attn.o_proj.weight", "post_attention_layernorm.weight",
    "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight",
};
#define NPARTS (sizeof(layer_parts) / sizeof(layer_parts[0]))

/* Bytes and elements of the smallest whole-byte group of `bits`-bit elements:
 * 1 element for 8/16/32/64 bits, 2 for F4 (1 byte), 4 for F6 (3 bytes). */
static void unit_of(unsigned bits, uint64_t *ubytes, uint64_t *uelems)
{
    unsigned g = bits % 8 == 0 ? 8 : bits % 4 == 0 ? 4 : 2; /* gcd(bits, 8) */
    *uelems = 8 / g;
    *ubytes = bits / g;
}

/* A tensor of the count layout: `target` bytes, named after position i. */
static void plan_tensor(struct gen_tensor *t, size_t i, uint64_t target)
{
    const char *part = layer_parts[i % NPARTS];
    snprintf(t->name, sizeof(t->name), "model.layers.%zu.%s", i / NPARTS, part);
    uint64_t ub, ue;
    unit_of(pinio_dtype_bits(t->dtype), &ub, &ue);
    uint64_t units = target / ub;
    uint64_t nelems = units * ue;
    t->nbytes = units * ub;
    /* Norms are vectors; projections are matrices with a power-of-two row
     * width when the element count allows one. */
    uint64_t cols = nelems & (~nelems + 1); /* largest power of two dividing it */
    if (cols > 4096)
        cols = 4096;
    if (strstr(part, "norm") || nelems == 0 || cols < 8) {
        t->rank = 1;
        t->shape[0] = nelems;
    } else {
        t->rank = 2;
        t->shape[0] = nelems / cols;
        t->shape[1] = cols;
    }
}

/* ---------------------------------------------------- the transformer */

/* What a dimension left at 0 becomes, Llama's rules scaled down for small
 * models: grouped-query attention with 4 query heads per KV head from 1024
 * up (Llama 3 8B: 4096 -> 1024), the SwiGLU width 8/3 of hidden rounded up
 * to 256 (Llama 2 7B: 4096 -> 11008; to 8 below 256), and a 32000-token
 * vocabulary from 1024 up (32 tokens per hidden unit below, so that a small
 * --size is not all embedding). */
static unsigned kv_of(unsigned h) { return h >= 1024 ? h / 4 : h; }
static unsigned vocab_of(unsigned h) { return h >= 1024 ? 32000u : 32u * h; }
static unsigned inter_of(unsigned h)
{
    uint64_t q = h >= 256 ? 256 : 8, v = ((uint64_t)h * 8 / 3 + q - 1) / q * q;
    return v > UINT32_MAX ? UINT32_MAX : (unsigned)v;
}

static void model_fill(pinio_gen_model *m, unsigned h, unsigned layers, const pinio_gen_opts *o)
{
    *m = (pinio_gen_model){ .hidden = h, .layers = layers,
                            .intermediate = o->intermediate ? o->intermediate : inter_of(h),
                            .vocab = o->vocab ? o->vocab : vocab_of(h), .kv_dim = kv_of(h) };
}

static size_t model_count(const pinio_gen_model *m)
{
    return 3 + (size_t)m->layers * NPARTS; /* embed_tokens, the layers, norm, lm_head */
}

static pinio_dtype dtype_at(const pinio_gen_opts *o, size_t i)
{
    return o->dtypes && o->ndtypes ? o->dtypes[i % o->ndtypes] : PINIO_DTYPE_BF16;
}

/* Shape of tensor i of the model in state-dict order (PyTorch's Linear
 * stores its weight as [out_features, in_features]); its name if `name`. */
static unsigned model_shape(const pinio_gen_model *m, size_t i, uint64_t shape[2], char *name,
                            size_t cap)
{
    size_t n = model_count(m);
    uint64_t rows = m->hidden, cols = m->hidden;
    const char *part = NULL;
    if (i == 0 || i == n - 1)
        rows = m->vocab;
    else if (i != n - 2)
        part = layer_parts[(i - 1) % NPARTS];
    if (name) {
        if (part)
            snprintf(name, cap, "model.layers.%zu.%s", (i - 1) / NPARTS, part);
        else
            snprintf(name, cap, "%s", i == 0 ? "model.embed_tokens.weight" :
                                      i == n - 1 ? "lm_head.weight" : "model.norm.weight");
    }
    if (i == n - 2 || (part && strstr(part, "norm"))) {
        shape[0] = m->hidden;
        return 1;
    }
    if (part && (strstr(part, "k_proj") || strstr(part, "v_proj")))
        rows = m->kv_dim;
    else if (part && (strstr(part, "gate_proj") || strstr(part, "up_proj")))
        rows = m->intermediate;
    else if (part && strstr(part, "down_proj"))
        cols = m->intermediate;
    shape[0] = rows;
    shape[1] = cols;
    return 2;
}

/* Bytes of a tensor of `rank` dims: every dimension is a multiple of 8 (the
 * hidden size is), so sub-byte dtypes always fill whole bytes. */
static uint64_t shape_bytes(unsigned rank, const uint64_t shape[2], pinio_dtype dt)
{
    uint64_t e = rank == 1 ? shape[0] : shape[0] * shape[1];
    return e * pinio_dtype_bits(dt) / 8;
}

static void model_tensor(const pinio_gen_model *m, const pinio_gen_opts *o, size_t i,
                         struct gen_tensor *t)
{
    t->dtype = dtype_at(o, i);
    t->rank = model_shape(m, i, t->shape, t->name, sizeof(t->name));
    t->nbytes = shape_bytes(t->rank, t->shape, t->dtype);
}

static uint64_t model_bytes(const pinio_gen_model *m, const pinio_gen_opts *o)
{
    uint64_t sum = 0, shape[2];
    for (size_t i = 0, n = model_count(m); i < n; i++) {
        unsigned rank = model_shape(m, i, shape, NULL, 0);
        sum += shape_bytes(rank, shape, dtype_at(o, i));
    }
    return sum;
}

/* The most layers of width h whose model fits in o->size, at least `min`;
 * 0 when even `min` does not fit. */
static unsigned layers_for(unsigned h, unsigned min, const pinio_gen_opts *o)
{
    pinio_gen_model m;
    model_fill(&m, h, min, o);
    if (model_bytes(&m, o) > o->size)
        return 0;
    unsigned lo = min, hi = MAX_LAYERS; /* lo fits; find the last that does */
    while (lo < hi) {
        unsigned mid = lo + (hi - lo + 1) / 2;
        model_fill(&m, h, mid, o);
        if (model_bytes(&m, o) <= o->size)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* Hidden widths tried, widest first, when --hidden is not given. */
static const unsigned widths[] = { 8192, 5120, 4096, 3072, 2048, 1536, 1024, 768,
                                   512, 256, 128, 64, 32, 16, 8 };

int pinio_gen_model_of(const pinio_gen_opts *uo, pinio_gen_model *out, pinio_diag *diag)
{
    pinio_gen_opts oc;
    pinio_gen_opts_default(&oc);
    int rc = pinio__opts_copy(&oc, sizeof oc, uo, "pinio_gen options", diag);
    if (rc < 0)
        return rc;
    const pinio_gen_opts *o = &oc;
    if (!out)
        return fail(diag, -EINVAL, "no model output");
    if (o->tensors)
        return fail(diag, -EINVAL,
                    "a tensor count and a transformer shape exclude each other");
    if (o->hidden % 8 || o->hidden > MAX_DIM || o->intermediate > MAX_DIM ||
        o->vocab > MAX_DIM * 16 || o->layers > MAX_LAYERS)
        return fail(diag, -EINVAL,
                    "hidden %u, intermediate %u, vocab %u, layers %u: hidden must be a "
                    "multiple of 8 up to %u, intermediate up to %u, vocab up to %u, layers up "
                    "to %u",
                    o->hidden, o->intermediate, o->vocab, o->layers, MAX_DIM, MAX_DIM,
                    MAX_DIM * 16, MAX_LAYERS);
    pinio_gen_model m;
    if (o->hidden && o->layers) {
        model_fill(&m, o->hidden, o->layers, o);
        uint64_t b = model_bytes(&m, o);
        if (o->size && b > o->size)
            return fail(diag, -EINVAL,
                        "hidden %u x %u layers is %llu bytes, over the size of %llu",
                        o->hidden, o->layers, (unsigned long long)b, (unsigned long long)o->size);
    } else if (o->hidden) {
        unsigned l = layers_for(o->hidden, 1, o);
        model_fill(&m, o->hidden, l ? l : 1, o);
    } else {
        /* The widest model that is still deep enough to look like one: a
         * layer per 128 hidden units (4096 -> 32, Llama 2 7B) unless the
         * layer count is given. Nothing fits: the smallest model. */
        model_fill(&m, 8, o->layers ? o->layers : 1, o);
        for (size_t i = 0; i < sizeof(widths) / sizeof(widths[0]); i++) {
            unsigned h = widths[i];
            unsigned want = o->layers ? o->layers : h / 128 ? h / 128 : 1;
            unsigned l = layers_for(h, want, o);
            if (l) {
                model_fill(&m, h, o->layers ? o->layers : l, o);
                break;
            }
        }
    }
    *out = m;
    return 0;
}

/* The reference writer's order inside a file (save.c: `prepare`): dtype
 * descending in the enum's order, then name, bytewise. The widest dtype
 * comes first, so with a data section starting 8-aligned every tensor is
 * naturally aligned, as in files written by safetensors itself. */
static int ref_order(const void *pa, const void *pb)
{
    const struct gen_tensor *a = pa, *b = pb;
    if (a->dtype != b->dtype)
        return a->dtype > b->dtype ? -1 : 1;
    return strcmp(a->name, b->name);
}

static int make_plan(const pinio_gen_opts *o, struct gen_tensor **out, size_t *count,
                     pinio_diag *diag)
{
    for (size_t k = 0; k < o->ndtypes; k++)
        if ((unsigned)o->dtypes[k] >= PINIO_DTYPE_COUNT)
            return fail(diag, -EINVAL, "gen: invalid dtype %d", (int)o->dtypes[k]);
    size_t n = o->tensors;
    pinio_gen_model m;
    if (!n) {
        int rc = pinio_gen_model_of(o, &m, diag);
        if (rc < 0)
            return rc;
        n = model_count(&m);
    }
    struct gen_tensor *ts = calloc(n, sizeof(*ts));
    if (!ts)
        return fail(diag, -ENOMEM, "gen: out of memory");
    if (!o->tensors) {
        for (size_t i = 0; i < n; i++)
            model_tensor(&m, o, i, &ts[i]);
    } else {
        uint64_t per = o->size / n, used = 0, unit = 0;
        bool empty = false;
        for (size_t i = 0; i < n; i++) {
            ts[i].dtype = dtype_at(o, i);
            /* The last tensor takes the remainder of the division. */
            plan_tensor(&ts[i], i, i + 1 == n ? o->size - used : per);
            used += ts[i].nbytes;
            uint64_t ub, ue;
            unit_of(pinio_dtype_bits(ts[i].dtype), &ub, &ue);
            unit = ub > unit ? ub : unit;
            empty |= ts[i].nbytes == 0;
        }
        /* Size 0 asks for empty tensors; any other size asked for data, and
         * a file of "4 tensors, 0 data bytes" would pass for what was
         * wanted. One unit of the widest dtype each is enough. */
        if (o->size && empty) {
            free(ts);
            return fail(diag, -EINVAL,
                        "gen: size %llu leaves some of %zu tensors without an element: "
                        "at least %llu bytes are needed (%llu per tensor)",
                        (unsigned long long)o->size, n, (unsigned long long)(unit * n),
                        (unsigned long long)unit);
        }
    }
    *out = ts;
    *count = n;
    return 0;
}

/* ------------------------------------------------------------- writing */

/* A growable text buffer for the JSON headers (a few hundred bytes per tensor). */
struct text {
    char *p;
    size_t len, cap;
    int err;
};

static void text_add(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void text_add(struct text *t, const char *fmt, ...)
{
    if (t->err)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->p ? t->p + t->len : NULL, t->p ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            t->err = -EINVAL;
            return;
        }
        if (t->p && (size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = t->cap ? t->cap * 2 : 4096;
        while (cap < t->len + (size_t)n + 1)
            cap *= 2;
        char *q = realloc(t->p, cap);
        if (!q) {
            t->err = -ENOMEM;
            return;
        }
        t->p = q;
        t->cap = cap;
    }
}

struct writer {
    int fd;
    const char *path;
    uint8_t *buf;
    size_t used, cap;
    uint64_t off; /* file offset of buf[0] */
    pinio_diag *diag;
};

static int flush(struct writer *w)
{
    size_t done = 0;
    while (done < w->used) {
        ssize_t k = write(w->fd, w->buf + done, w->used - done);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            int e = -errno;
            return fail(w->diag, e, "%s: write at offset %llu: %s", w->path,
                        (unsigned long long)(w->off + done), pinio_strerror(e));
        }
        done += (size_t)k;
    }
    w->off += done;
    w->used = 0;
    return 0;
}

static int put(struct writer *w, const void *p, size_t n)
{
    const uint8_t *s = p;
    while (n) {
        size_t k = w->cap - w->used < n ? w->cap - w->used : n;
        memcpy(w->buf + w->used, s, k);
        w->used += k;
        s += k;
        n -= k;
        if (w->used == w->cap) {
            int r = flush(w);
            if (r)
                return r;
        }
    }
    return 0;
}

#define CHUNK (4u << 20)

struct progress {
    const pinio_gen_opts *o;
    uint64_t done, total;
    double t0;
};

/* Reports progress; -ECANCELED when the callback asks to stop. */
static int report(const struct progress *pg, pinio_diag *diag)
{
    if (!pg->o->progress)
        return 0;
    pinio_progress p = { .done_bytes = pg->done, .total_bytes = pg->total,
                         .elapsed_s = pinio__now_s() - pg->t0 };
    if (pg->o->progress(pg->o->progress_ctx, &p) == 0)
        return 0;
    pinio_diag_set(diag, -ECANCELED, "gen: stopped by the progress callback");
    return -ECANCELED;
}

/* The mark of gen's temporaries, by which a later run knows them. */
#define GEN_XATTR "user.pinio.gen"

/* Creates the temporary of `path` (PATH.tmpPID, marked as gen's) after
 * removing what an earlier gen killed while writing left there
 * (src/base/stale.h). @return the descriptor with `*tmp` malloc'ed, or
 * -errno with the diag set. */
static int open_temp(const char *path, char **tmp, pinio_diag *diag)
{
    *tmp = malloc(strlen(path) + 32);
    if (!*tmp)
        return fail(diag, -ENOMEM, "%s: out of memory", path);
    sprintf(*tmp, "%s.tmp%ld", path, (long)getpid());
    pinio__remove_stale(path, ".tmp", "", GEN_XATTR);
    /* O_EXCL: a name planted there (a symlink above all: the pid in the
     * name is no secret) fails the write, never redirects it. */
    int fd = open(*tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
        int e = -errno;
        fail(diag, e, "%s: create: %s%s", *tmp, pinio_strerror(e),
             e == -EEXIST ? " (something already has the temporary's name)" : "");
        free(*tmp);
        *tmp = NULL;
        return e;
    }
    (void)pinio__stale_mark(fd, GEN_XATTR); /* marks it as ours; best effort */
    return fd;
}

/* Makes the temporary `tmp` (open as `fd`, written with result `r`) appear
 * as `path`, or removes it when anything failed. fsync before the rename:
 * without it a crash after the rename can leave the new name on a file
 * whose blocks never reached the disk (ext4's auto_da_alloc covers only
 * some cases, xfs none), and a loader would then read zeros or garbage
 * under a name that promises a complete checkpoint. The folder is synced
 * after, so that the name itself is durable too. Frees `tmp`. */
static int publish(int fd, char *tmp, const char *path, int r, pinio_diag *diag)
{
    const char *step = NULL;
    if (!r && fsync(fd) < 0)
        r = -errno, step = "fsync";
    if (close(fd) < 0 && !r) /* NFS and friends report write errors at close */
        r = -errno, step = "close";
    if (!r && rename(tmp, path) < 0)
        r = -errno, step = "rename";
    if (step)
        fail(diag, r, "%s: %s%s%s: %s", tmp, step, *step == 'r' ? " to " : "",
             *step == 'r' ? path : "", pinio_strerror(r));
    if (r) {
        unlink(tmp);
    } else {
        char *slash = strrchr(tmp, '/');
        if (slash)
            *slash = '\0';
        int dfd = open(slash ? (slash == tmp ? "/" : tmp) : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            (void)fsync(dfd); /* best effort: some file systems refuse it on folders */
            close(dfd);
        }
    }
    free(tmp);
    return r;
}

/* The JSON header of a file holding tensors ts[0..n), padded; refused
 * (nothing left to free) when a reader would refuse it. */
static int header_text(const char *path, const struct gen_tensor *ts, size_t n,
                       const pinio_gen_opts *o, struct text *out, pinio_diag *diag)
{
    struct text h = {0};
    text_add(&h, "{\"__metadata__\":{\"format\":\"pt\",\"" PINIO_GEN_SEED_KEY "\":\"%llu\"}",
             (unsigned long long)o->seed);
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        text_add(&h, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", ts[i].name,
                 pinio_dtype_name(ts[i].dtype));
        for (unsigned d = 0; d < ts[i].rank; d++)
            text_add(&h, "%s%llu", d ? "," : "", (unsigned long long)ts[i].shape[d]);
        text_add(&h, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                 (unsigned long long)(off + ts[i].nbytes));
        off += ts[i].nbytes;
    }
    text_add(&h, "}");
    /* Space padding to a multiple of 8, as the reference writer does, so the
     * data section starts 8-aligned in the file. */
    while (!h.err && h.len % 8)
        text_add(&h, " ");
    if (h.err) {
        free(h.p);
        return fail(diag, h.err, "%s: out of memory for the header", path);
    }
    /* Write nothing a reader would refuse (HeaderTooLarge). */
    if (h.len > PINIO_ST_HEADER_MAX) {
        free(h.p);
        return fail(diag, -EINVAL,
                    "%s: a header of %zu bytes is over the format's limit of %u: fewer tensors "
                    "per file (--tensors, or more --shards)",
                    path, h.len, (unsigned)PINIO_ST_HEADER_MAX);
    }
    *out = h;
    return 0;
}

/* Writes one .safetensors file holding tensors ts[0..n) behind the header
 * text `h` (built by header_text() for them; always freed). */
static int write_file(const char *path, const struct gen_tensor *ts, size_t n, struct text h,
                      const pinio_gen_opts *o, struct progress *pg, uint8_t *buf,
                      uint64_t *file_bytes, pinio_diag *diag)
{
    char *tmp;
    int fd = open_temp(path, &tmp, diag);
    if (fd < 0) {
        free(h.p);
        return fd;
    }
    struct writer w = {.fd = fd, .path = tmp, .buf = buf, .cap = CHUNK, .diag = diag};
    uint8_t len8[8];
    for (int i = 0; i < 8; i++)
        len8[i] = (uint8_t)((uint64_t)h.len >> (8 * i));
    int r = put(&w, len8, 8);
    if (!r)
        r = put(&w, h.p, h.len);
    free(h.p);
    /* Tensor bytes are generated straight into the write buffer. */
    for (size_t i = 0; i < n && !r; i++) {
        for (uint64_t t = 0; t < ts[i].nbytes && !r;) {
            size_t k = w.cap - w.used;
            if (k > ts[i].nbytes - t)
                k = (size_t)(ts[i].nbytes - t);
            pinio_gen_fill(o->seed, ts[i].name, t, w.buf + w.used, k);
            w.used += k;
            t += k;
            pg->done += k;
            if (w.used == w.cap) {
                r = flush(&w);
                if (!r)
                    r = report(pg, diag);
            }
        }
    }
    if (!r)
        r = flush(&w);
    r = publish(fd, tmp, path, r, diag);
    if (!r)
        *file_bytes += w.off;
    return r;
}

struct index_entry {
    const char *name;
    unsigned shard;
};

static int by_name(const void *pa, const void *pb)
{
    return strcmp(((const struct index_entry *)pa)->name, ((const struct index_entry *)pb)->name);
}

/* The index as transformers writes it: weight_map sorted by name. Tensor i
 * of `ts` lies in shard i * k / n (the split pinio_gen_write() uses).
 * Refused (nothing left to free) when pinio would refuse to read it. */
static int index_text(const char *dir, const struct gen_tensor *ts, size_t n, unsigned k,
                      uint64_t total, struct text *out, pinio_diag *diag)
{
    struct index_entry *e = malloc((n ? n : 1) * sizeof(*e));
    if (!e)
        return fail(diag, -ENOMEM, "%s: out of memory for the index", dir);
    for (size_t i = 0; i < n; i++)
        e[i] = (struct index_entry){ ts[i].name, (unsigned)((uint64_t)i * k / n) + 1 };
    qsort(e, n, sizeof(*e), by_name);
    struct text t = {0};
    text_add(&t, "{\n  \"metadata\": {\n    \"total_size\": %llu\n  },\n  \"weight_map\": {",
             (unsigned long long)total);
    for (size_t i = 0; i < n; i++) {
        char shard[64];
        pinio_gen_shard_name(shard, sizeof(shard), e[i].shard, k);
        text_add(&t, "%s\n    \"%s\": \"%s\"", i ? "," : "", e[i].name, shard);
    }
    text_add(&t, "\n  }\n}\n");
    free(e);
    if (!t.err && t.len > PINIO_ST_INDEX_MAX) {
        free(t.p);
        return fail(diag, -EINVAL,
                    "%s: an index of %zu bytes is over pinio's limit of %u: fewer --tensors",
                    dir, t.len, (unsigned)PINIO_ST_INDEX_MAX);
    }
    if (t.err) {
        free(t.p);
        return fail(diag, -ENOMEM, "%s: out of memory for the index", dir);
    }
    *out = t;
    return 0;
}

/* Writes the index text `t` (built by index_text(); always freed). */
static int write_index(const char *dir, struct text t, uint8_t *buf, pinio_diag *diag)
{
    char *path = malloc(strlen(dir) + sizeof(PINIO_GEN_INDEX_NAME) + 2);
    if (!path) {
        free(t.p);
        return fail(diag, -ENOMEM, "%s: out of memory for the index", dir);
    }
    sprintf(path, "%s/%s", dir, PINIO_GEN_INDEX_NAME);
    char *tmp;
    int fd = open_temp(path, &tmp, diag);
    int r = fd < 0 ? fd : 0;
    if (!r) {
        struct writer w = {.fd = fd, .path = tmp, .buf = buf, .cap = CHUNK, .diag = diag};
        r = put(&w, t.p, t.len);
        if (!r)
            r = flush(&w);
        r = publish(fd, tmp, path, r, diag);
    }
    free(t.p);
    free(path);
    return r;
}

int pinio_gen_write(const char *out, const pinio_gen_opts *uo, pinio_gen_result *res,
                    pinio_diag *diag)
{
    pinio_gen_opts oc;
    pinio_gen_opts_default(&oc);
    int crc = pinio__opts_copy(&oc, sizeof oc, uo, "pinio_gen options", diag);
    if (crc < 0)
        return crc;
    const pinio_gen_opts *o = &oc;
    if ((crc = pinio__s3_refuse_write(out, diag)) < 0)
        return crc;
    unsigned k = o->shards ? o->shards : 1;
    if (k > 99999)
        return fail(diag, -EINVAL, "%s: at most 99999 shards", out);
    struct gen_tensor *ts = NULL;
    size_t n = 0;
    int r = make_plan(o, &ts, &n, diag);
    if (r)
        return r;
    uint8_t *buf = malloc(CHUNK);
    if (!buf) {
        free(ts);
        return fail(diag, -ENOMEM, "%s: out of memory", out);
    }
    struct progress pg = {.o = o, .t0 = pinio__now_s()};
    for (size_t i = 0; i < n; i++)
        pg.total += ts[i].nbytes;
    uint64_t file_bytes = 0;
    if (k == 1) {
        qsort(ts, n, sizeof(*ts), ref_order);
        struct text h;
        r = header_text(out, ts, n, o, &h, diag);
        if (!r)
            r = write_file(out, ts, n, h, o, &pg, buf, &file_bytes, diag);
    } else {
        /* Shard s holds tensors [s*n/k, (s+1)*n/k): the same split as the
         * index. Every header and the index are built and checked before
         * anything is created, so a layout a reader would refuse leaves
         * nothing behind (not k-1 shards and no index); the checked
         * headers are kept for writing. */
        struct text *hs = calloc(k, sizeof(*hs));
        if (!hs)
            r = fail(diag, -ENOMEM, "%s: out of memory", out);
        for (unsigned s = 0; s < k && !r; s++) {
            size_t lo = (size_t)(((uint64_t)s * n + k - 1) / k);
            size_t hi = (size_t)(((uint64_t)(s + 1) * n + k - 1) / k);
            qsort(ts + lo, hi - lo, sizeof(*ts), ref_order);
            r = header_text(out, ts + lo, hi - lo, o, &hs[s], diag);
        }
        struct text t = {0};
        if (!r)
            r = index_text(out, ts, n, k, pg.total, &t, diag);
        if (!r && mkdir(out, 0755) < 0 && errno != EEXIST) {
            r = -errno;
            fail(diag, r, "%s: mkdir: %s", out, pinio_strerror(r));
        }
        char *path = r ? NULL : malloc(strlen(out) + 64);
        if (!r && !path)
            r = fail(diag, -ENOMEM, "%s: out of memory", out);
        for (unsigned s = 0; s < k && !r; s++) {
            size_t lo = (size_t)(((uint64_t)s * n + k - 1) / k);
            size_t hi = (size_t)(((uint64_t)(s + 1) * n + k - 1) / k);
            int m = sprintf(path, "%s/", out);
            pinio_gen_shard_name(path + m, 64 - 1, s + 1, k);
            r = write_file(path, ts + lo, hi - lo, hs[s], o, &pg, buf, &file_bytes, diag);
            hs[s].p = NULL; /* write_file() freed it */
        }
        for (unsigned s = 0; hs && s < k; s++)
            free(hs[s].p);
        free(hs);
        free(path);
        if (!r) {
            r = write_index(out, t, buf, diag);
            t.p = NULL;
        }
        free(t.p);
    }
    if (!r && o->progress) /* the final call: nothing is left to stop */
        (void)o->progress(o->progress_ctx, &(pinio_progress){ .done_bytes = pg.done,
                          .total_bytes = pg.total, .elapsed_s = pinio__now_s() - pg.t0 });
    if (!r && res)
        *res = (pinio_gen_result){pg.total, file_bytes, n, k};
    if (!r && diag) {
        diag->code = 0;
        diag->msg[0] = '\0';
    }
    free(buf);
    free(ts);
    return r;
}
