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

#define NAME_MAX_LEN 80

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

static int make_plan(const pinio_gen_opts *o, struct gen_tensor **out, size_t *count)
{
    size_t n = o->tensors;
    if (!n) {
        uint64_t auto_n = o->size / (8u << 20);
        n = auto_n < 1 ? 1 : auto_n > 4096 ? 4096 : (size_t)auto_n;
    }
    for (size_t k = 0; k < o->ndtypes; k++)
        if ((unsigned)o->dtypes[k] >= PINIO_DTYPE_COUNT)
            return -EINVAL;
    struct gen_tensor *ts = calloc(n, sizeof(*ts));
    if (!ts)
        return -ENOMEM;
    uint64_t per = o->size / n, used = 0;
    for (size_t i = 0; i < n; i++) {
        ts[i].dtype = o->dtypes && o->ndtypes ? o->dtypes[i % o->ndtypes] : PINIO_DTYPE_BF16;
        /* The last tensor takes the remainder of the division. */
        plan_tensor(&ts[i], i, i + 1 == n ? o->size - used : per);
        used += ts[i].nbytes;
    }
    *out = ts;
    *count = n;
    return 0;
}

/* ------------------------------------------------------------- writing */

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

/* The JSON header of a file holding tensors ts[0..n), padded; refused (and
 * freed) when a reader would refuse it. */
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

/* Writes one .safetensors file holding tensors ts[0..n). */
static int write_file(const char *path, const struct gen_tensor *ts, size_t n,
                      const pinio_gen_opts *o, struct progress *pg, uint8_t *buf,
                      uint64_t *file_bytes, pinio_diag *diag)
{
    struct text h;
    int hr = header_text(path, ts, n, o, &h, diag);
    if (hr < 0)
        return hr;
    char *tmp = malloc(strlen(path) + 16);
    if (!tmp) {
        free(h.p);
        return fail(diag, -ENOMEM, "%s: out of memory", path);
    }
    sprintf(tmp, "%s.tmp%ld", path, (long)getpid());
    /* What an earlier gen killed while writing left (src/base/stale.h). */
    pinio__remove_stale(path, ".tmp", "", GEN_XATTR);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        int e = -errno;
        free(h.p);
        fail(diag, e, "%s: create: %s", tmp, pinio_strerror(e));
        free(tmp);
        return e;
    }
    (void)pinio__stale_mark(fd, GEN_XATTR); /* marks it as ours; best effort */
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
    if (close(fd) < 0 && !r) { /* NFS and friends report write errors at close */
        r = -errno;
        fail(diag, r, "%s: close: %s", tmp, pinio_strerror(r));
    }
    if (!r && rename(tmp, path) < 0) {
        r = -errno;
        fail(diag, r, "%s: rename to %s: %s", tmp, path, pinio_strerror(r));
    }
    if (r)
        unlink(tmp);
    else
        *file_bytes += w.off;
    free(tmp);
    return r;
}

/* The index of shards ts[0..n) over k files; refused (and freed) when a
 * reader would refuse it. */
static int index_text(const char *dir, const struct gen_tensor *ts, size_t n, unsigned k,
                      uint64_t total, struct text *out, pinio_diag *diag)
{
    struct text t = {0};
    text_add(&t, "{\n  \"metadata\": {\n    \"total_size\": %llu\n  },\n  \"weight_map\": {",
             (unsigned long long)total);
    for (size_t i = 0; i < n; i++) {
        char shard[64];
        pinio_gen_shard_name(shard, sizeof(shard), (unsigned)(i * k / n) + 1, k);
        text_add(&t, "%s\n    \"%s\": \"%s\"", i ? "," : "", ts[i].name, shard);
    }
    text_add(&t, "\n  }\n}\n");
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

/* Writes the index text `t` into `dir`; frees it. */
static int write_index(const char *dir, struct text *t, pinio_diag *diag)
{
    char *path = malloc(strlen(dir) + sizeof(PINIO_GEN_INDEX_NAME) + 2);
    if (!path) {
        free(t->p);
        return fail(diag, -ENOMEM, "%s: out of memory for the index", dir);
    }
    sprintf(path, "%s/%s", dir, PINIO_GEN_INDEX_NAME);
    int r = 0;
    FILE *f = fopen(path, "we");
    if (!f) {
        r = -errno;
        fail(diag, r, "%s: create: %s", path, pinio_strerror(r));
    } else {
        size_t wrote = fwrite(t->p, 1, t->len, f);
        int e = wrote == t->len ? 0 : errno ? -errno : -EIO;
        if (fclose(f) != 0 && !e)
            e = errno ? -errno : -EIO;
        if (e) {
            r = e;
            fail(diag, r, "%s: write: %s", path, pinio_strerror(r));
        }
    }
    free(t->p);
    free(path);
    return r;
}

/* Shard s of k holds tensors [lo, hi): the same split as the index. */
static void shard_range(unsigned s, size_t n, unsigned k, size_t *lo, size_t *hi)
{
    *lo = (size_t)(((uint64_t)s * n + k - 1) / k);
    *hi = (size_t)(((uint64_t)(s + 1) * n + k - 1) / k);
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
    unsigned k = o->shards ? o->shards : 1;
    if (k > 99999)
        return fail(diag, -EINVAL, "%s: at most 99999 shards", out);
    struct gen_tensor *ts;
    size_t n;
    int r = make_plan(o, &ts, &n);
    if (r)
        return fail(diag, r, "%s: %s", out, r == -EINVAL ? "invalid dtype" : "out of memory");
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
        r = write_file(out, ts, n, o, &pg, buf, &file_bytes, diag);
    } else {
        /* Whatever a reader would refuse (an index or a shard header over
         * the limits) is refused before the folder or any shard is made:
         * a refused gen leaves nothing. The shard headers are built twice
         * for that, which costs little next to writing their data. */
        struct text ix = {0};
        r = index_text(out, ts, n, k, pg.total, &ix, diag);
        for (unsigned s = 0; s < k && !r; s++) {
            size_t lo, hi;
            shard_range(s, n, k, &lo, &hi);
            struct text h;
            if ((r = header_text(out, ts + lo, hi - lo, o, &h, diag)) == 0)
                free(h.p);
        }
        if (!r && mkdir(out, 0755) < 0 && errno != EEXIST) {
            r = -errno;
            fail(diag, r, "%s: mkdir: %s", out, pinio_strerror(r));
        }
        char *path = r ? NULL : malloc(strlen(out) + 64);
        if (!r && !path)
            r = fail(diag, -ENOMEM, "%s: out of memory", out);
        for (unsigned s = 0; s < k && !r; s++) {
            size_t lo, hi;
            shard_range(s, n, k, &lo, &hi);
            int m = sprintf(path, "%s/", out);
            pinio_gen_shard_name(path + m, 64 - 1, s + 1, k);
            r = write_file(path, ts + lo, hi - lo, o, &pg, buf, &file_bytes, diag);
        }
        free(path);
        if (!r)
            r = write_index(out, &ix, diag);
        else
            free(ix.p);
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
