/* The safetensors writer. Byte-exact with the reference writer
 * (safetensors `prepare` + `serialize`): sort by dtype descending then name,
 * compact serde_json header, space padding to 8. Code that loads what it
 * saved (and the upstream test suite, which compares bytes) depends on that
 * exactness, so every formatting choice below mirrors serde_json's, not
 * what would be shorter in C.
 *
 * Durability follows the rename idiom (write a temporary file in the same
 * folder, fsync, rename, fsync the folder): rename(2) is atomic within a
 * file system, and the folder fsync makes the new name itself durable
 * (ext4/xfs do not promise it otherwise). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "pinio/save.h"
#include "src/base/clock.h"
#include "src/base/opts.h"
#include "src/base/stale.h"
#include "src/s3/client.h"
#include "src/st/json_internal.h"

#define META_KEY "__metadata__"
/* O_DIRECT wants file offset, length and memory aligned to the logical
 * block size; 4096 covers every block size up to a 4 KiB-sector device. */
#define DIO_ALIGN 4096u
/* Staging chunk: large enough that a write is a few device-sized requests,
 * small enough to lock (RLIMIT_MEMLOCK is often 8 MiB for a user). */
#define CHUNK (8u << 20)

void pinio_save_opts_init(pinio_save_opts *opts, size_t size)
{
    pinio_save_opts d;
    memset(&d, 0, sizeof(d));
    pinio__opts_init(opts, size, &d, sizeof(d));
}

/* ------------------------------------------------------------ the header */

struct buf {
    char *p;
    size_t len, cap;
    int err;
};

static void put(struct buf *b, const void *s, size_t n)
{
    if (b->err)
        return;
    if (b->cap - b->len < n) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap - b->len < n) {
            if (cap > SIZE_MAX / 2) {
                b->err = -ENOMEM;
                return;
            }
            cap *= 2;
        }
        char *q = realloc(b->p, cap);
        if (!q) {
            b->err = -ENOMEM;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

static void put_s(struct buf *b, const char *s)
{
    put(b, s, strlen(s));
}

static void put_u64(struct buf *b, uint64_t v)
{
    char tmp[24];
    int n = snprintf(tmp, sizeof(tmp), "%llu", (unsigned long long)v);
    put(b, tmp, (size_t)n);
}

/* A JSON string as serde_json writes it: `"` and `\` escaped, the short
 * escapes \b \f \n \r \t, other control characters as \u00xx (lowercase
 * hex); everything else (DEL, non-ASCII UTF-8, '/') verbatim. */
static void put_str(struct buf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    put(b, "\"", 1);
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char u[7];
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        default:
            if (c < 0x20) {
                memcpy(u, "\\u00", 4);
                u[4] = hex[c >> 4];
                u[5] = hex[c & 15];
                u[6] = '\0';
                esc = u;
            }
        }
        if (!esc)
            continue;
        put(b, s + run, i - run);
        put_s(b, esc);
        run = i + 1;
    }
    put(b, s + run, n - run);
    put(b, "\"", 1);
}

static size_t len_of(const char *s, size_t n)
{
    return n ? n : strlen(s);
}

struct sort_item {
    const pinio_save_tensor *t;
    size_t idx, name_len;
};

/* Names bytewise, a prefix first (Rust's String ordering). */
static int cmp_name(const void *pa, const void *pb)
{
    const struct sort_item *a = pa, *b = pb;
    size_t m = a->name_len < b->name_len ? a->name_len : b->name_len;
    int c = memcmp(a->t->name, b->t->name, m);
    if (c)
        return c;
    return a->name_len < b->name_len ? -1 : a->name_len > b->name_len;
}

/* The reference's order: dtype descending, then name ascending. */
static int cmp_item(const void *pa, const void *pb)
{
    const struct sort_item *a = pa, *b = pb;
    if (a->t->dtype != b->t->dtype)
        return a->t->dtype > b->t->dtype ? -1 : 1;
    return cmp_name(pa, pb);
}

static int bad_tensor(pinio_diag *diag, size_t i, const struct sort_item *it, const char *why)
{
    pinio_diag_set(diag, -EINVAL, "pinio_save: tensor %zu (\"%.*s\"): %s", i,
                   it && it->t->name ? (int)(it->name_len > 200 ? 200 : it->name_len) : 0,
                   it && it->t->name ? it->t->name : "", why);
    pinio_diag_set_index(diag, i);
    return -EINVAL;
}

/* Checks tensor `it` (nbytes against dtype × shape, with the reference's
 * overflow and sub-byte rules). */
static int check_tensor(const struct sort_item *it, pinio_diag *diag)
{
    const pinio_save_tensor *t = it->t;
    size_t i = it->idx;
    if (!t->name)
        return bad_tensor(diag, i, NULL, "NULL name");
    if (it->name_len == strlen(META_KEY) && !memcmp(t->name, META_KEY, it->name_len))
        return bad_tensor(diag, i, it, "the name is reserved for the metadata");
    size_t bad;
    if (!pinio__utf8_check(t->name, it->name_len, &bad))
        return bad_tensor(diag, i, it, "the name is not valid UTF-8");
    /* The reader refuses a NUL in a name (loaders pass names as C strings). */
    if (memchr(t->name, '\0', it->name_len))
        return bad_tensor(diag, i, it, "the name contains a NUL byte, which readers refuse");
    if ((unsigned)t->dtype >= PINIO_DTYPE_COUNT)
        return bad_tensor(diag, i, it, "unknown dtype");
    if (t->rank && !t->shape)
        return bad_tensor(diag, i, it, "NULL shape");
    uint64_t nelems = 1;
    for (unsigned d = 0; d < t->rank; d++)
        if (__builtin_mul_overflow(nelems, t->shape[d], &nelems))
            return bad_tensor(diag, i, it, "element count overflows 64 bits");
    uint64_t nbits;
    if (__builtin_mul_overflow(nelems, (uint64_t)pinio_dtype_bits(t->dtype), &nbits))
        return bad_tensor(diag, i, it, "bit count overflows 64 bits");
    if (nbits % 8)
        return bad_tensor(diag, i, it, "a sub-byte dtype must fill whole bytes");
    if (nbits / 8 != t->nbytes) {
        char why[96];
        snprintf(why, sizeof(why), "nbytes %llu but dtype x shape gives %llu",
                 (unsigned long long)t->nbytes, (unsigned long long)(nbits / 8));
        return bad_tensor(diag, i, it, why);
    }
    if (t->nbytes && !t->data)
        return bad_tensor(diag, i, it, "NULL data");
    return 0;
}

static int check_metadata(const pinio_save_opts *o, pinio_diag *diag)
{
    for (size_t i = 0; i < o->nmetadata; i++) {
        const pinio_st_kv *kv = &o->metadata[i];
        size_t bad;
        if (!kv->key || !kv->value ||
            !pinio__utf8_check(kv->key, len_of(kv->key, kv->key_len), &bad) ||
            !pinio__utf8_check(kv->value, len_of(kv->value, kv->value_len), &bad)) {
            pinio_diag_set(diag, -EINVAL, "pinio_save: metadata entry %zu: NULL or not UTF-8", i);
            pinio_diag_set_index(diag, i);
            return -EINVAL;
        }
        /* Quadratic, but metadata holds a handful of entries. */
        size_t kl = len_of(kv->key, kv->key_len);
        for (size_t j = 0; j < i; j++) {
            const pinio_st_kv *p = &o->metadata[j];
            if (len_of(p->key, p->key_len) == kl && !memcmp(p->key, kv->key, kl)) {
                pinio_diag_set(diag, -EINVAL, "pinio_save: metadata key \"%.*s\" given twice",
                               (int)(kl > 200 ? 200 : kl), kv->key);
                pinio_diag_set_index(diag, i);
                return -EINVAL;
            }
        }
    }
    return 0;
}

/* Sorts and checks the tensors; on success `*items` (caller frees) is in write order. */
static int prepare(const pinio_save_tensor *ts, size_t n, const pinio_save_opts *o,
                   struct sort_item **items, pinio_diag *diag)
{
    int r = check_metadata(o, diag);
    if (r)
        return r;
    struct sort_item *it = calloc(n ? n : 1, sizeof(*it));
    if (!it)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        it[i] = (struct sort_item){ &ts[i], i, ts[i].name ? len_of(ts[i].name, ts[i].name_len) : 0 };
        r = check_tensor(&it[i], diag);
        if (r) {
            free(it);
            return r;
        }
    }
    /* Duplicates are neighbours in name order only: the write order sorts
     * by dtype first, so "a" as F32 and "a" as I8 lie apart in it. */
    qsort(it, n, sizeof(*it), cmp_name);
    for (size_t i = 1; i < n; i++)
        if (it[i].name_len == it[i - 1].name_len &&
            !memcmp(it[i].t->name, it[i - 1].t->name, it[i].name_len)) {
            size_t later = it[i].idx > it[i - 1].idx ? i : i - 1;
            r = bad_tensor(diag, it[later].idx, &it[later], "the name is given twice");
            free(it);
            return r;
        }
    qsort(it, n, sizeof(*it), cmp_item);
    *items = it;
    return 0;
}

static int build_header(const struct sort_item *it, size_t n, const pinio_save_opts *o,
                        struct buf *h, pinio_diag *diag)
{
    put(h, "\0\0\0\0\0\0\0\0{", 9); /* the length prefix, patched below */
    bool first = true;
    if (o->nmetadata) {
        put_s(h, "\"" META_KEY "\":{");
        for (size_t i = 0; i < o->nmetadata; i++) {
            const pinio_st_kv *kv = &o->metadata[i];
            if (i)
                put(h, ",", 1);
            put_str(h, kv->key, len_of(kv->key, kv->key_len));
            put(h, ":", 1);
            put_str(h, kv->value, len_of(kv->value, kv->value_len));
        }
        put(h, "}", 1);
        first = false;
    }
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        const pinio_save_tensor *t = it[i].t;
        if (!first)
            put(h, ",", 1);
        first = false;
        put_str(h, t->name, it[i].name_len);
        put_s(h, ":{\"dtype\":\"");
        put_s(h, pinio_dtype_name(t->dtype));
        put_s(h, "\",\"shape\":[");
        for (unsigned d = 0; d < t->rank; d++) {
            if (d)
                put(h, ",", 1);
            put_u64(h, t->shape[d]);
        }
        put_s(h, "],\"data_offsets\":[");
        put_u64(h, off);
        put(h, ",", 1);
        uint64_t end;
        if (__builtin_add_overflow(off, t->nbytes, &end)) {
            pinio_diag_set(diag, -EOVERFLOW, "pinio_save: data offsets overflow 64 bits");
            return -EOVERFLOW;
        }
        put_u64(h, end);
        put_s(h, "]}");
        off = end;
    }
    put(h, "}", 1);
    while (!h->err && (h->len - 8) % 8)
        put(h, " ", 1);
    if (h->err) {
        pinio_diag_set(diag, h->err, "pinio_save: out of memory for the header");
        return h->err;
    }
    uint64_t nlen = h->len - 8;
    for (int i = 0; i < 8; i++)
        h->p[i] = (char)(uint8_t)(nlen >> (8 * i));
    return 0;
}

/* Every rule the reader enforces holds before a byte is written: the
 * header just built goes through the reader's own parser (the strict one a
 * load uses), so a file pinio_save writes is never one pinio refuses to
 * read, and a new reader rule needs no second copy here. The length limit
 * is checked first for a message that says what to shrink. */
static int check_readable(const struct sort_item *it, size_t n, const struct buf *h,
                          pinio_diag *diag)
{
    uint64_t hlen = h->len - 8;
    if (hlen > PINIO_ST_HEADER_MAX) {
        pinio_diag_set(diag, -EFBIG,
                       "pinio_save: the header would be %llu bytes, over the format's limit of "
                       "%u (readers refuse it): fewer tensors, shorter names or less metadata",
                       (unsigned long long)hlen, PINIO_ST_HEADER_MAX);
        return -EFBIG;
    }
    uint64_t size = h->len;
    for (size_t i = 0; i < n; i++)
        size += it[i].t->nbytes; /* no overflow: build_header checked the offsets */
    pinio_st *st = NULL;
    pinio_diag rd;
    int r = pinio_st_parse(&st, h->p, h->len, size, "the header", 0, &rd);
    pinio_st_free(st);
    if (r == -ENOMEM) {
        pinio_diag_set(diag, r, "pinio_save: out of memory checking the header");
    } else if (r) {
        pinio_diag_set(diag, -EINVAL, "pinio_save: the reader would refuse this file: %s",
                       rd.msg);
        r = -EINVAL;
    }
    return r;
}

static int copy_opts(pinio_save_opts *oc, const pinio_save_opts *uo, pinio_diag *diag)
{
    pinio_save_opts_default(oc);
    return pinio__opts_copy(oc, sizeof(*oc), uo, "pinio_save options", diag);
}

/* Checks and sorts the tensors and builds the header: on success `*items`
 * (write order) and `h` are the caller's to free; on failure nothing is left. */
static int layout(const pinio_save_tensor *ts, size_t n, const pinio_save_opts *o,
                  struct sort_item **items, struct buf *h, pinio_diag *diag)
{
    int r = prepare(ts, n, o, items, diag);
    if (r)
        return r;
    *h = (struct buf){0};
    r = build_header(*items, n, o, h, diag);
    if (!r)
        r = check_readable(*items, n, h, diag);
    if (r) {
        free(*items);
        free(h->p);
    }
    return r;
}

int pinio_save_header(const pinio_save_tensor *ts, size_t n, const pinio_save_opts *uo,
                      size_t *order, uint8_t **out, size_t *out_len, pinio_diag *diag)
{
    if ((!ts && n) || !out || !out_len) {
        pinio_diag_set(diag, -EINVAL, "pinio_save_header: NULL argument");
        return -EINVAL;
    }
    pinio_save_opts o;
    int r = copy_opts(&o, uo, diag);
    if (r)
        return r;
    struct sort_item *it;
    struct buf h;
    r = layout(ts, n, &o, &it, &h, diag);
    if (r)
        return r;
    if (order)
        for (size_t i = 0; i < n; i++)
            order[i] = it[i].idx;
    *out = (uint8_t *)h.p;
    *out_len = h.len;
    free(it);
    return 0;
}

/* ------------------------------------------------------------ the file */

struct out {
    int fd;
    const char *tmp;
    bool direct;
    uint8_t *stage; /* CHUNK bytes, page-aligned (O_DIRECT path only) */
    size_t used;
    uint64_t off;   /* file offset of stage[0] / of the next buffered write */
    const pinio_save_opts *o;
    uint64_t done, total;
    double t0;
    pinio_diag *diag;
    char why[128];
};

static int write_all(struct out *w, const uint8_t *p, size_t n, uint64_t off)
{
    while (n) {
        ssize_t k = pwrite(w->fd, p, n, (off_t)off);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (k == 0)
            return -EIO;
        p += k;
        n -= (size_t)k;
        off += (uint64_t)k;
    }
    return 0;
}

static int io_fail(struct out *w, int e, uint64_t off, const char *what)
{
    pinio_diag_set_at(w->diag, e, w->tmp, off, "%s at offset %llu: %s", what,
                      (unsigned long long)off, pinio_strerror(e));
    return e;
}

/* Writes the staged bytes (all but an unaligned tail, unless `last`). The
 * first O_DIRECT write is the real probe: some file systems accept the flag
 * at fcntl and refuse the I/O (EINVAL); then the rest goes buffered. */
static int flush_stage(struct out *w, bool last)
{
    size_t n = last ? w->used : w->used / DIO_ALIGN * DIO_ALIGN;
    if (!n)
        return 0;
    size_t wlen = n;
    if (w->direct && last && n % DIO_ALIGN) {
        /* O_DIRECT writes whole blocks: zero-pad, ftruncate back at the end. */
        wlen = (n + DIO_ALIGN - 1) / DIO_ALIGN * DIO_ALIGN;
        memset(w->stage + n, 0, wlen - n);
    }
    int r = write_all(w, w->stage, wlen, w->off);
    if (r == -EINVAL && w->direct) {
        int fl = fcntl(w->fd, F_GETFL);
        if (fl >= 0 && fcntl(w->fd, F_SETFL, fl & ~O_DIRECT) == 0) {
            w->direct = false;
            snprintf(w->why, sizeof(w->why), "buffered: O_DIRECT refused at write (EINVAL)");
            wlen = n;
            r = write_all(w, w->stage, wlen, w->off);
        }
    }
    if (r)
        return io_fail(w, r, w->off, "write");
    memmove(w->stage, w->stage + n, w->used - n);
    w->used -= n;
    w->off += n;
    return 0;
}

static int progress(struct out *w)
{
    if (!w->o->progress)
        return 0;
    pinio_progress p = { .done_bytes = w->done, .total_bytes = w->total,
                         .elapsed_s = pinio__now_s() - w->t0 };
    if (w->o->progress(w->o->progress_ctx, &p) == 0)
        return 0;
    pinio_diag_set(w->diag, -ECANCELED, "pinio_save: stopped by the progress callback");
    return -ECANCELED;
}

/* Appends `n` bytes: copied into the aligned stage (O_DIRECT), or written
 * straight from the caller's memory (buffered: a copy would buy nothing). */
static int emit(struct out *w, const uint8_t *p, uint64_t n, bool counts)
{
    while (n) {
        if (!w->direct) {
            int r = flush_stage(w, true); /* a stage left over from a refused O_DIRECT */
            if (r)
                return r;
            size_t k = n > (1u << 30) ? (1u << 30) : (size_t)n;
            r = write_all(w, p, k, w->off);
            if (r)
                return io_fail(w, r, w->off, "write");
            w->off += k;
            p += k;
            n -= k;
            if (counts) {
                w->done += k;
                if ((r = progress(w)))
                    return r;
            }
            continue;
        }
        size_t k = CHUNK - w->used;
        if (k > n)
            k = (size_t)n;
        memcpy(w->stage + w->used, p, k);
        w->used += k;
        p += k;
        n -= k;
        if (counts)
            w->done += k;
        if (w->used == CHUNK) {
            int r = flush_stage(w, false);
            if (!r && counts)
                r = progress(w);
            if (r)
                return r;
        }
    }
    return 0;
}

/* The mark of the writer's temporaries (src/base/stale.h), and their
 * names: `DIR/.NAME.pinio-save-PID.tmp` beside the file they become. */
#define SAVE_XATTR "user.pinio.save"
#define TMP_INFIX ".pinio-save-"
#define TMP_SUFFIX ".tmp"

/* The file a save replaces, and what of it the new file keeps. */
struct target {
    char *path;   /* where the bytes go: `path`, or the file a symlink names */
    bool exists;
    struct stat st;
};

/* Resolves `path` before anything is written. A symlink is written
 * through, as open(2) for writing (and so the reference writer) would: the
 * link stays a link and the file it names gets the new bytes, renamed into
 * place beside that file. An existing file must be a regular file the
 * caller may write: a read-only one is refused with EACCES (the reference
 * writer's open fails so for a non-root user; root may write it there and
 * here). */
static int resolve_target(const char *path, struct target *t, pinio_diag *diag)
{
    memset(t, 0, sizeof(*t));
    int e = 0;
    if (lstat(path, &t->st) < 0) {
        e = -errno;
        if (e != -ENOENT) {
            pinio_diag_set_at(diag, e, path, PINIO_DIAG_NO_OFFSET, "lstat: %s",
                              pinio_strerror(e));
            return e;
        }
        t->path = strdup(path);
        return t->path ? 0 : -ENOMEM;
    }
    if (S_ISLNK(t->st.st_mode)) {
        t->path = realpath(path, NULL);
        if (!t->path || stat(t->path, &t->st) < 0) {
            e = -errno;
            pinio_diag_set_at(diag, e, path, PINIO_DIAG_NO_OFFSET,
                              "a symlink whose file cannot be resolved (%s): pinio_save writes "
                              "through a link to an existing file only",
                              pinio_strerror(e));
            free(t->path);
            t->path = NULL;
            return e;
        }
    } else if (!(t->path = strdup(path))) {
        return -ENOMEM;
    }
    if (!S_ISREG(t->st.st_mode)) {
        e = S_ISDIR(t->st.st_mode) ? -EISDIR : -EINVAL;
        pinio_diag_set_at(diag, e, t->path, PINIO_DIAG_NO_OFFSET,
                          "not a regular file: pinio_save replaces regular files only");
    } else if (faccessat(AT_FDCWD, t->path, W_OK, AT_EACCESS) < 0) {
        e = -errno;
        pinio_diag_set_at(diag, e, t->path, PINIO_DIAG_NO_OFFSET,
                          "%s (mode %04o): pinio_save replaces only a file the caller may write",
                          e == -EACCES ? "read-only" : pinio_strerror(e),
                          (unsigned)(t->st.st_mode & 07777));
    }
    if (e) {
        free(t->path);
        t->path = NULL;
        return e;
    }
    t->exists = true;
    return 0;
}

/* Creates the temporary of `t->path` after removing the stale ones a
 * killed writer left (stale.h: marked, of a process that is gone, a minute
 * untouched), O_EXCL | O_NOFOLLOW so that nothing planted under the name
 * (a symlink, a file) is ever followed or truncated; mode 0666 so the umask
 * applies as it would to open(path, O_CREAT). A file it replaces passes on
 * its permission bits (set-id bits aside, as a write would clear them) and,
 * where the caller may set them (root), its owner and group. */
static int create_tmp(const struct target *t, char **tmp_out, pinio_diag *diag)
{
    const char *slash = strrchr(t->path, '/');
    size_t dlen = slash ? (size_t)(slash - t->path) + 1 : 0;
    size_t cap = strlen(t->path) + 64;
    char *tmp = malloc(cap), *dotted = malloc(cap);
    if (!tmp || !dotted) {
        free(tmp);
        free(dotted);
        pinio_diag_set_at(diag, -ENOMEM, t->path, PINIO_DIAG_NO_OFFSET, "out of memory");
        return -ENOMEM;
    }
    snprintf(dotted, cap, "%.*s.%s", (int)dlen, t->path, t->path + dlen);
    pinio__remove_stale(dotted, TMP_INFIX, TMP_SUFFIX, SAVE_XATTR);
    snprintf(tmp, cap, "%s" TMP_INFIX "%ld" TMP_SUFFIX, dotted, (long)getpid());
    free(dotted);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0) {
        int e = -errno;
        if (e == -EEXIST)
            pinio_diag_set_at(diag, e, t->path, PINIO_DIAG_NO_OFFSET,
                              "the temporary %s exists (another save of this file in this "
                              "process, or not pinio's): left alone, nothing written",
                              tmp);
        else
            pinio_diag_set_at(diag, e, t->path, PINIO_DIAG_NO_OFFSET, "create %s: %s", tmp,
                              pinio_strerror(e));
        free(tmp);
        return e;
    }
    (void)pinio__stale_mark(fd, SAVE_XATTR); /* best effort: unmarked is never removed */
    if (t->exists) {
        if (t->st.st_uid != geteuid() || t->st.st_gid != getegid())
            (void)fchown(fd, t->st.st_uid, t->st.st_gid); /* EPERM: the caller's, as documented */
        if (fchmod(fd, t->st.st_mode & 01777) < 0) {
            int e = -errno;
            pinio_diag_set_at(diag, e, tmp, PINIO_DIAG_NO_OFFSET, "fchmod: %s",
                              pinio_strerror(e));
            close(fd);
            unlink(tmp);
            free(tmp);
            return e;
        }
    }
    *tmp_out = tmp;
    return fd;
}

static int sync_dir(const char *path, pinio_diag *diag)
{
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    if (!dir)
        return -ENOMEM;
    int r = 0;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || fsync(fd) < 0) {
        r = -errno;
        pinio_diag_set_at(diag, r, dir, PINIO_DIAG_NO_OFFSET, "fsync of the folder: %s",
                          pinio_strerror(r));
    }
    if (fd >= 0)
        close(fd);
    free(dir);
    return r;
}

static void set_direct(struct out *w, pinio_direct_policy policy)
{
    if (policy == PINIO_DIRECT_OFF) {
        snprintf(w->why, sizeof(w->why), "buffered: O_DIRECT off by option");
        return;
    }
    w->stage = mmap(NULL, CHUNK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (w->stage == MAP_FAILED) {
        w->stage = NULL;
        snprintf(w->why, sizeof(w->why), "buffered: no memory for the staging buffer");
        return;
    }
    /* Locked so the kernel's DMA never waits on a page fault; best effort. */
    bool locked = mlock(w->stage, CHUNK) == 0;
    int fl = fcntl(w->fd, F_GETFL);
    if (fl >= 0 && fcntl(w->fd, F_SETFL, fl | O_DIRECT) == 0) {
        w->direct = true;
        snprintf(w->why, sizeof(w->why), "O_DIRECT from a %s 8 MiB staging buffer",
                 locked ? "locked" : "pageable (mlock refused)");
    } else {
        snprintf(w->why, sizeof(w->why), "buffered: O_DIRECT refused by the file system (%s)",
                 pinio_err_name(-errno));
    }
}

int pinio_save(const char *path, const pinio_save_tensor *ts, size_t n,
               const pinio_save_opts *uo, pinio_save_result *res, pinio_diag *diag)
{
    if (!path || (!ts && n)) {
        pinio_diag_set(diag, -EINVAL, "pinio_save: NULL argument");
        return -EINVAL;
    }
    double t0 = pinio__now_s();
    pinio_save_opts o;
    int r = pinio__s3_refuse_write(path, diag);
    if (r == 0)
        r = copy_opts(&o, uo, diag);
    if (r)
        return r;
    if (o.direct == PINIO_DIRECT_ON) {
        /* ON would have to fail when the file system refuses; the writer
         * always has a correct fallback, so it takes only AUTO and OFF. */
        pinio_diag_set(diag, -EINVAL, "pinio_save: direct must be AUTO or OFF");
        return -EINVAL;
    }
    struct sort_item *it;
    struct buf h;
    r = layout(ts, n, &o, &it, &h, diag);
    if (r)
        return r;
    struct target tg;
    char *tmp = NULL;
    r = resolve_target(path, &tg, diag);
    int fd = r ? r : create_tmp(&tg, &tmp, diag);
    if (fd < 0) {
        free(tg.path);
        free(it);
        free(h.p);
        return fd;
    }
    struct out w = { .fd = fd, .tmp = tmp, .o = &o, .t0 = t0, .diag = diag };
    for (size_t i = 0; i < n; i++)
        w.total += it[i].t->nbytes;
    set_direct(&w, o.direct);
    r = emit(&w, (const uint8_t *)h.p, h.len, false);
    for (size_t i = 0; i < n && !r; i++)
        r = emit(&w, it[i].t->data, it[i].t->nbytes, true);
    if (!r)
        r = flush_stage(&w, true);
    uint64_t size = (uint64_t)h.len + w.total;
    if (!r && w.direct && ftruncate(fd, (off_t)size) < 0)
        r = io_fail(&w, -errno, size, "ftruncate");
    if (!r && !o.no_sync && fsync(fd) < 0)
        r = io_fail(&w, -errno, size, "fsync");
    if (close(fd) < 0 && !r) /* NFS and friends report write errors at close */
        r = io_fail(&w, -errno, size, "close");
    if (!r && rename(tmp, tg.path) < 0) {
        r = -errno;
        pinio_diag_set_at(diag, r, tg.path, PINIO_DIAG_NO_OFFSET, "rename from %s: %s", tmp,
                          pinio_strerror(r));
    }
    if (r) {
        unlink(tmp);
    } else {
        /* The mark says "a temporary" (kept until the rename, so a writer
         * killed before it leaves one a later save removes): the file it
         * became carries none. */
        (void)lremovexattr(tg.path, SAVE_XATTR);
        if (!o.no_sync)
            r = sync_dir(tg.path, diag);
    }
    if (!r && o.progress) /* the final call: nothing is left to stop */
        (void)o.progress(o.progress_ctx, &(pinio_progress){ .done_bytes = w.total,
                         .total_bytes = w.total, .elapsed_s = pinio__now_s() - t0 });
    if (!r && res) {
        memset(res, 0, sizeof(*res));
        res->file_bytes = size;
        res->header_bytes = h.len - 8;
        res->data_bytes = w.total;
        res->direct = w.direct;
        res->seconds = pinio__now_s() - t0;
        snprintf(res->io_path, sizeof(res->io_path), "%s", w.why);
    }
    if (w.stage)
        munmap(w.stage, CHUNK);
    free(tmp);
    free(tg.path);
    free(it);
    free(h.p);
    return r;
}
