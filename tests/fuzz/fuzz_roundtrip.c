/* libFuzzer target for the writer against the strict reader: a random set of
 * tensors (names of any bytes, every dtype and an unknown one, shapes that
 * overflow, wrong byte counts, NULL pointers, metadata) is serialized by
 * pinio_save_header() or, when the input asks, written by pinio_save() into a
 * scratch folder; then
 *   - the writer accepts exactly what the format allows (an oracle written
 *     here from the format's rules, not from save.c): unique, valid UTF-8,
 *     NUL-free names other than "__metadata__", known dtypes, byte counts
 *     equal to dtype x shape in whole bytes, data where there are bytes,
 *     offsets within 64 bits, unique UTF-8 metadata keys;
 *   - what it accepts, the strict reader (pinio_st_parse / pinio_st_open with
 *     PINIO_ST_REJECT_UNKNOWN_FIELDS) reads back with every tensor's name,
 *     dtype, shape and offsets, every metadata entry, and (from the file) every
 *     tensor's bytes equal to what was given, each tensor naturally aligned,
 *     and the file's header byte for byte what pinio_save_header() builds;
 *   - what it refuses, it refuses with its errno in a one-line diagnostic and
 *     writes nothing: the folder holds no new file, and a file already at the
 *     target keeps its bytes.
 *
 * Input: byte 0 flags (bits 0 and 5: through a file too, one input in four
 * since files are slow; bit 1: a file already at the target; bits 2-3:
 * metadata entries; bit 4: names by strlen, name_len 0), byte 1 the tensor
 * count (% 9), then per tensor: dtype byte (% 23: 22 is unknown), a byte of
 * rank (bits 0-2, % 5) and faults (bit 3: nbytes off by one, bit 4: which
 * way; bit 5: NULL data; bit 6: NULL name; bit 7: dims as powers of two up
 * to 2^63), one byte per dim, a name (length byte % 24, then the bytes);
 * then per metadata entry a key and a value the same way; the rest is the
 * tensors' bytes (repeated as needed).
 * Run: scripts/fuzz roundtrip SECONDS. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pinio/save.h"
#include "pinio/safetensors.h"
#include "tests/common/helpers.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAXT 8
#define MAXM 3
#define MAXNAME 24
#define MAXRANK 4
/* Above this the tensors are described, not backed: header only. */
#define DATA_CAP (64u << 10)

#define CHECK(c)                  \
    do {                          \
        if (!(c))                 \
            __builtin_trap();     \
    } while (0)

static char dir[4096], target[4200];
static const uint8_t OLD[] = "an older file the writer must not touch when it refuses";

static void cleanup(void)
{
    t_rm_rf(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    /* libFuzzer leaves by _Exit on a finding, past atexit: the scripts pass
     * a folder of their own (PINIO_FUZZ_TMPDIR) and remove it whatever happens. */
    const char *base = getenv("PINIO_FUZZ_TMPDIR");
    if (t_tmpdir(base ? base : "/dev/shm", "fuzzrt", dir, sizeof(dir)) != 0 &&
        t_tmpdir("/var/tmp", "fuzzrt", dir, sizeof(dir)) != 0)
        abort();
    snprintf(target, sizeof(target), "%s/out.safetensors", dir);
    atexit(cleanup);
    return 0;
}

/* ------------------------------------------------------------ the input */

struct in {
    const uint8_t *p, *end;
};

static uint8_t byte(struct in *s)
{
    return s->p < s->end ? *s->p++ : 0;
}

static size_t take(struct in *s, uint8_t *out, size_t n)
{
    size_t k = (size_t)(s->end - s->p) < n ? (size_t)(s->end - s->p) : n;
    memcpy(out, s->p, k);
    s->p += k;
    return k;
}

/* ------------------------------------------------------------ the oracle */

/* RFC 3629 UTF-8: no overlong forms, no surrogates, nothing past U+10FFFF. */
static bool utf8_ok(const uint8_t *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        uint8_t c = s[i];
        size_t k;
        uint32_t cp, min;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xe0) == 0xc0) {
            k = 1, cp = c & 0x1f, min = 0x80;
        } else if ((c & 0xf0) == 0xe0) {
            k = 2, cp = c & 0x0f, min = 0x800;
        } else if ((c & 0xf8) == 0xf0) {
            k = 3, cp = c & 0x07, min = 0x10000;
        } else {
            return false;
        }
        if (n - i <= k)
            return false;
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xc0) != 0x80)
                return false;
            cp = cp << 6 | (s[i + j] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        i += k + 1;
    }
    return true;
}

struct tensor {
    char name[MAXNAME + 1];
    size_t len; /* the name's bytes as the writer reads them */
    uint64_t shape[MAXRANK];
    pinio_save_tensor t;
};

/* Whether the format allows tensor `x`: the element count and the bit
 * count fit 64 bits, the bits fill whole bytes, and nbytes is that. */
static bool tensor_ok(const struct tensor *x)
{
    const pinio_save_tensor *t = &x->t;
    if (!t->name || (x->len == 12 && !memcmp(t->name, "__metadata__", 12)))
        return false;
    if (memchr(t->name, 0, x->len) || !utf8_ok((const uint8_t *)t->name, x->len))
        return false;
    if ((unsigned)t->dtype >= PINIO_DTYPE_COUNT)
        return false;
    uint64_t elems = 1, bits;
    for (unsigned d = 0; d < t->rank; d++)
        if (__builtin_mul_overflow(elems, t->shape[d], &elems))
            return false;
    if (__builtin_mul_overflow(elems, (uint64_t)pinio_dtype_bits(t->dtype), &bits))
        return false;
    if (bits % 8 || bits / 8 != t->nbytes)
        return false;
    return !(t->nbytes && !t->data);
}

static bool same_bytes(const char *a, size_t al, const char *b, size_t bl)
{
    return al == bl && !memcmp(a, b, al);
}

/* ------------------------------------------------------------ the checks */

/* The folder holds nothing but the planted older file, with its bytes. */
static void check_nothing_written(bool planted)
{
    DIR *d = opendir(dir);
    CHECK(d != NULL);
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        CHECK(planted && !strcmp(e->d_name, "out.safetensors"));
        n++;
    }
    closedir(d);
    CHECK(n == (planted ? 1u : 0u));
    if (planted) {
        uint8_t buf[sizeof(OLD) + 1];
        int fd = open(target, O_RDONLY | O_CLOEXEC);
        CHECK(fd >= 0);
        ssize_t k = read(fd, buf, sizeof(buf));
        close(fd);
        CHECK(k == (ssize_t)sizeof(OLD) && !memcmp(buf, OLD, sizeof(OLD)));
    }
}

static void check_refusal(int rc, const pinio_diag *d)
{
    CHECK(rc == -EINVAL || rc == -EOVERFLOW);
    CHECK(d->code == rc && d->msg[0] && !strchr(d->msg, '\n'));
}

/* The reader's view `st` of what was written matches the tensors and the
 * metadata; `image` (the whole file) is checked byte for byte when given. */
static void check_parsed(const pinio_st *st, const struct tensor *ts, size_t n,
                         const pinio_st_kv *meta, size_t nmeta, uint64_t total,
                         const uint8_t *image)
{
    CHECK(pinio_st_count(st) == n && pinio_st_data_size(st) == total);
    CHECK(pinio_st_data_offset(st) % 8 == 0);
    for (size_t i = 0; i < n; i++) {
        const struct tensor *x = &ts[i];
        const pinio_st_tensor *r = pinio_st_find(st, x->t.name, x->len);
        CHECK(r && same_bytes(r->name, r->name_len, x->t.name, x->len));
        CHECK(r->dtype == x->t.dtype && r->rank == x->t.rank && r->nbytes == x->t.nbytes);
        for (unsigned d = 0; d < r->rank; d++)
            CHECK(r->shape[d] == x->t.shape[d]);
        unsigned bits = pinio_dtype_bits(r->dtype);
        uint64_t natural = bits < 8 ? 1 : bits / 8 > 8 ? 8 : bits / 8;
        CHECK(r->file_offset % natural == 0);
        if (image && r->nbytes)
            CHECK(!memcmp(image + r->file_offset, x->t.data, r->nbytes));
    }
    CHECK(pinio_st_metadata_count(st) == nmeta);
    for (size_t i = 0; i < nmeta; i++) {
        const pinio_st_kv *kv = pinio_st_metadata_at(st, i);
        CHECK(kv && same_bytes(kv->key, kv->key_len, meta[i].key, meta[i].key_len));
        CHECK(same_bytes(kv->value, kv->value_len, meta[i].value, meta[i].value_len));
    }
}

static void plant_old(void)
{
    int fd = open(target, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    CHECK(fd >= 0 && write(fd, OLD, sizeof(OLD)) == (ssize_t)sizeof(OLD));
    close(fd);
}

static uint8_t *read_file(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    CHECK(fd >= 0);
    struct stat sb;
    CHECK(fstat(fd, &sb) == 0);
    uint8_t *b = malloc((size_t)sb.st_size + 1);
    CHECK(b != NULL);
    CHECK(read(fd, b, (size_t)sb.st_size) == sb.st_size);
    close(fd);
    *len = (size_t)sb.st_size;
    return b;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct in s = { data, data + size };
    uint8_t flags = byte(&s);
    size_t n = byte(&s) % (MAXT + 1), nmeta = (flags >> 2 & 3) % (MAXM + 1);
    bool by_strlen = flags & 16;

    static struct tensor ts[MAXT];
    pinio_save_tensor arg[MAXT];
    bool ok = true;
    unsigned __int128 total = 0;
    for (size_t i = 0; i < n; i++) {
        struct tensor *x = &ts[i];
        memset(x, 0, sizeof(*x));
        uint8_t dt = byte(&s) % (PINIO_DTYPE_COUNT + 1), f = byte(&s);
        x->t.dtype = (pinio_dtype)dt;
        x->t.rank = (f & 7) % (MAXRANK + 1);
        for (unsigned d = 0; d < x->t.rank; d++) {
            uint8_t v = byte(&s);
            x->shape[d] = f & 128 ? (uint64_t)1 << (v & 63) : v % 8;
        }
        x->t.shape = x->shape;
        size_t nl = take(&s, (uint8_t *)x->name, byte(&s) % (MAXNAME + 1));
        x->len = by_strlen ? strlen(x->name) : nl;
        x->t.name = f & 64 ? NULL : x->name;
        x->t.name_len = by_strlen ? 0 : nl;
        /* The byte count dtype x shape gives, saturated: the writer must
         * refuse what overflows, so any value will do there. */
        unsigned __int128 bits = pinio_dtype_bits(x->t.dtype);
        for (unsigned d = 0; d < x->t.rank; d++)
            bits = bits > ((unsigned __int128)1 << 100) ? bits : bits * x->shape[d];
        uint64_t nb = bits / 8 > UINT64_MAX ? UINT64_MAX : (uint64_t)(bits / 8);
        if (f & 8)
            nb += f & 16 ? 1 : (uint64_t)-1;
        x->t.nbytes = nb;
        x->t.data = f & 32 ? NULL : (const void *)x; /* backed below when small */
        ok = ok && tensor_ok(x);
        total += nb;
    }
    for (size_t i = 0; ok && i < n; i++)
        for (size_t j = 0; j < i; j++)
            if (same_bytes(ts[i].t.name, ts[i].len, ts[j].t.name, ts[j].len))
                ok = false;
    if (total > UINT64_MAX)
        ok = false;

    static char keys[MAXM][MAXNAME + 1], vals[MAXM][MAXNAME + 1];
    pinio_st_kv meta[MAXM];
    for (size_t i = 0; i < nmeta; i++) {
        memset(keys[i], 0, sizeof(keys[i]));
        memset(vals[i], 0, sizeof(vals[i]));
        size_t kl = take(&s, (uint8_t *)keys[i], byte(&s) % (MAXNAME + 1));
        size_t vl = take(&s, (uint8_t *)vals[i], byte(&s) % (MAXNAME + 1));
        /* An empty key or value is written by strlen (0): the empty string. */
        meta[i] = (pinio_st_kv){ keys[i], kl, vals[i], vl };
        size_t ke = kl ? kl : strlen(keys[i]), ve = vl ? vl : strlen(vals[i]);
        meta[i].key_len = ke;
        meta[i].value_len = ve;
        ok = ok && utf8_ok((const uint8_t *)keys[i], ke) && utf8_ok((const uint8_t *)vals[i], ve);
        for (size_t j = 0; j < i; j++)
            if (same_bytes(keys[i], ke, keys[j], meta[j].key_len))
                ok = false;
    }

    /* Back the tensors with bytes of the input when they are small. */
    bool backed = total <= DATA_CAP;
    uint8_t *pool = NULL;
    if (backed) {
        size_t rest = (size_t)(s.end - s.p), at = 0;
        pool = malloc((size_t)total + 1);
        CHECK(pool != NULL);
        for (size_t k = 0; k < (size_t)total; k++)
            pool[k] = rest ? s.p[k % rest] : (uint8_t)(k * 131 + 7);
        for (size_t i = 0; i < n; i++) {
            if (ts[i].t.data)
                ts[i].t.data = pool + at;
            at += (size_t)ts[i].t.nbytes;
        }
    }
    for (size_t i = 0; i < n; i++)
        arg[i] = ts[i].t;

    pinio_save_opts o;
    pinio_save_opts_default(&o);
    o.metadata = nmeta ? meta : NULL;
    o.nmetadata = nmeta;
    o.no_sync = true;

    size_t order[MAXT + 1];
    uint8_t *h = (uint8_t *)&o; /* must be left alone on failure */
    size_t hlen = 0;
    pinio_diag d = { 0 };
    int rc = pinio_save_header(arg, n, &o, order, &h, &hlen, &d);
    CHECK((rc == 0) == ok);
    if (rc) {
        check_refusal(rc, &d);
        CHECK(h == (uint8_t *)&o);
    } else {
        /* The data section follows `order`, back to back. */
        pinio_st *st = NULL;
        uint64_t file_size = hlen + (uint64_t)total;
        CHECK(pinio_st_parse(&st, h, hlen, file_size, "rt", PINIO_ST_REJECT_UNKNOWN_FIELDS, &d) == 0);
        check_parsed(st, ts, n, meta, nmeta, (uint64_t)total, NULL);
        uint64_t off = 0;
        for (size_t k = 0; k < n; k++) {
            CHECK(order[k] < n);
            const pinio_st_tensor *r = pinio_st_find(st, ts[order[k]].t.name, ts[order[k]].len);
            CHECK(r->begin == off);
            off += r->nbytes;
        }
        pinio_st_free(st);
    }

    if ((flags & 1) && (flags & 32) && backed) {
        bool planted = flags & 2;
        if (planted)
            plant_old();
        pinio_save_result res;
        pinio_diag fd = { 0 };
        int frc = pinio_save(target, arg, n, &o, &res, &fd);
        CHECK(frc == rc);
        if (frc) {
            check_refusal(frc, &fd);
            check_nothing_written(planted);
        } else {
            size_t flen;
            uint8_t *img = read_file(target, &flen);
            CHECK(flen == hlen + (size_t)total && res.file_bytes == flen);
            CHECK(!memcmp(img, h, hlen));
            pinio_st *st = NULL;
            CHECK(pinio_st_open(&st, target, PINIO_ST_REJECT_UNKNOWN_FIELDS, &fd) == 0);
            check_parsed(st, ts, n, meta, nmeta, (uint64_t)total, img);
            pinio_st_free(st);
            free(img);
        }
        unlink(target);
    }
    if (rc == 0)
        free(h);
    free(pool);
    return 0;
}
