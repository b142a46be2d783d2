/*
 * The object source: s3:// inputs behind the plan, beside files.
 *
 *   resolve  s3://B/K.safetensors    one object
 *            s3://B/P/K.json         an index: fetched whole, parsed as a
 *                                    file's; its shards are s3://B/P/NAME
 *            s3://B/P/ (or a key that is neither)   ListObjectsV2 of the
 *                                    "folder": its index when present, else
 *                                    its *.safetensors, in key order
 *   open     one ranged GET of the first 64 KiB: the size (Content-
 *            Range's total), the version (its ETag, Last-Modified), the
 *            header's bytes (the rest, if longer, by one GET pinned to
 *            them) and the first tensors', validated by the same strict
 *            parser as a file's header, so the selection and the filters
 *            run before any data byte, exactly as for a file
 *   execute  each read claimed from the destination, cut into ranges of
 *            8-16 MiB on 8 MiB boundaries of the destination (a read never
 *            crosses a segment, so neither does a range), the ranges kept
 *            in flight at the client's concurrency as a stream (the next
 *            range submitted as soon as one ends), checked (status,
 *            Content-Range, length, version), each read landed, in claim
 *            order, as soon as its ranges and those of the reads before it
 *            are in
 *
 * Why the version is pinned from the first GET on: a replaced object must never
 * give bytes of two versions. Each request carries If-Match (or, from a
 * store that sends no ETag, If-Unmodified-Since), so a store answers 412
 * once the object changed, which is PINIO_ECHANGED; the client also
 * compares the ETag (or Last-Modified) and the total size of each answer,
 * for a store or proxy that ignores the condition. Where an answer carries
 * no validator to compare, or the store sent none at all (the size alone
 * pins it), the object is asked again after its reads: a version replaced
 * mid-load and still there is caught then. With nothing but the size,
 * --verify is refused (load.c): its digest could describe two versions.
 *
 * Why a stream and not batches: a batch (claim reads, fetch all their
 * ranges, land them) waits for its slowest range, and the requests in
 * flight drop to a few at every batch's end, each drop costing a
 * first-byte latency again; the stream keeps the concurrency busy for the
 * whole object. The reads claimed and not landed stay within the
 * destination's bounds (o->batch_reads, batch_max bytes): a stream's ring
 * has a slot for each. A destination whose callbacks wait for a thread
 * that rereads objects asks for batches (o->object_batches).
 *
 * Why other threads' rereads go through the executing thread: a client's
 * stream is one thread's, and batch calls refuse to run beside it. While
 * an execution streams, pinio__obj_pread() from another thread (the
 * hasher's gaps) queues its request and the executing thread sends it
 * between two of its own polls; from the executing thread itself (a sink
 * filling a gap from inside a callback) it is sent and waited for at once,
 * the stream's own completions kept for the executor. Both share the
 * load's connections and counters, as before.
 *
 * Why 8-16 MiB ranges: one request costs a round trip and, on S3, a
 * request's charge; at 8 MiB and 16 in flight the first-byte latency of a
 * remote store (tens of ms) is hidden behind the transfer of the others,
 * and a retried range costs at most 16 MiB again.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/load/plan_internal.h"

/* The first GET of an object, the one that opens it (no HEAD before it):
 * its size and version, its header's 8-byte length and, for all but huge
 * headers, the whole header (an entry is some 106 bytes for names like
 * model.layers.N.mlp.up_proj.weight: 64 KiB holds about 600 tensors'; a
 * longer header costs one GET more). Why not more: on a fresh connection TCP's
 * slow start sends about 14 KB in the first round trip, doubling each
 * one; 64 KiB arrives in three, 1 MiB would take seven, all before the
 * header can be parsed and the data GETs start. */
#define HEAD_FIRST ((uint64_t)64 << 10)

/* Ranges are cut on multiples of this in the destination, and a leftover
 * under it is merged into its neighbour: every range is 8-16 MiB but a
 * read's only one when the read is smaller. */
#define RANGE ((uint64_t)8 << 20)

/* A range tag with this bit is a reread's (served), else a plan read's. */
#define SERVED_TAG ((size_t)1 << (sizeof(size_t) * 8 - 1))

/* A reread queued by another thread for the executing one. */
typedef struct reread {
    const pinio__pfile *f;
    void *buf;
    uint64_t off, len;
    pinio_diag *diag;
    int rc;
    bool done, orphan;     /* orphan: the execution ended first; fetch it yourself */
    struct reread *next;
} reread;

/* An execution streaming a client's ranges (registered while it runs). */
typedef struct live {
    pinio__s3 *s3;
    pthread_t owner;
    const pinio_plan *plan;
    reread *queue;                /* under g_mu */
    struct live *next;            /* under g_mu */
    /* The owner's alone: */
    pinio__s3_done *early;        /* own completions polled while serving */
    size_t nearly, capearly;
    bool recheck_all;             /* a reread's answer could not confirm its version */
    int failed;                   /* the stream failed while serving a reread */
    pinio_diag fail_diag;
} live;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static live *g_live;     /* under g_mu */
static unsigned g_batch; /* batch calls of pinio__obj_pread() under way, under g_mu */

static bool ends_with(const char *s, const char *suffix)
{
    size_t sl = strlen(s), xl = strlen(suffix);
    return sl >= xl && strcmp(s + sl - xl, suffix) == 0;
}

static int use_index(pinio__inputs *in, const char *bucket, const char *key, pinio_diag *diag)
{
    char *url = pinio__s3_url_join(bucket, key);
    if (!url)
        return -ENOMEM;
    if (in->index) {
        pinio_diag_set_at(diag, -EINVAL, url, PINIO_DIAG_NO_OFFSET,
                          "only one index file per load (already %s)",
                          pinio_st_index_path(in->index));
        free(url);
        return -EINVAL;
    }
    char *body = NULL;
    size_t len = 0;
    int rc = pinio__s3_get_object(in->s3, bucket, key, PINIO_ST_INDEX_MAX, &body, &len, NULL, diag);
    if (rc == -EFBIG)
        pinio_diag_set_at(diag, PINIO_EFORMAT, url, PINIO_DIAG_NO_OFFSET,
                          "index larger than %u bytes: refused", PINIO_ST_INDEX_MAX);
    if (rc == -EFBIG)
        rc = PINIO_EFORMAT;
    if (rc == 0)
        rc = pinio_st_index_parse(&in->index, body, len, url, diag);
    /* The shard names are the store's text: each becomes an object's URL,
     * which every later message and report names as is. */
    for (size_t i = 0; rc == 0 && i < pinio_st_index_shard_count(in->index); i++) {
        const char *sh = pinio_st_index_shard(in->index, i);
        if (!pinio__s3_plain(sh)) {
            char esc[256];
            rc = PINIO_EFORMAT;
            pinio_diag_set_at(diag, rc, url, PINIO_DIAG_NO_OFFSET,
                              "the index names the shard '%s', which holds control characters "
                              "(shown as \\xNN): refused",
                              pinio__s3_printable(esc, sizeof(esc), sh, strlen(sh)));
            pinio_st_index_free(in->index);
            in->index = NULL;
        }
    }
    if (rc == 0) {
        in->index_image = body;
        in->index_len = len;
    } else {
        free(body);
    }
    free(url);
    return rc;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The "folder" `prefix` (empty or ending in '/'): its index, else its
 * shards. */
static int scan_prefix(pinio__inputs *in, const char *bucket, const char *prefix, char ***out,
                       size_t *nout, pinio_diag *diag)
{
    pinio__s3_entry *e = NULL;
    size_t n = 0;
    int rc = pinio__s3_list(in->s3, bucket, prefix, &e, &n, diag);
    if (rc < 0)
        return rc;
    size_t pl = strlen(prefix);
    const char *index = NULL;
    char **names = calloc(n ? n : 1, sizeof(*names));
    size_t k = 0;
    const char *odd = NULL; /* a key taken that holds control characters */
    for (size_t i = 0; names && i < n; i++) {
        const char *rel = e[i].key + (strncmp(e[i].key, prefix, pl) == 0 ? pl : 0);
        bool take = strcmp(rel, "model.safetensors.index.json") == 0 ||
                    (ends_with(rel, ".safetensors") && !strchr(rel, '/'));
        if (take && !odd && !pinio__s3_plain(e[i].key))
            odd = e[i].key;
        if (strcmp(rel, "model.safetensors.index.json") == 0)
            index = e[i].key;
        else if (take)
            names[k++] = e[i].key;
    }
    if (!names)
        rc = -ENOMEM;
    else if (odd) {
        /* The key is the store's text and would be the object's name in
         * every later message and report: refused here, shown escaped. */
        char *url = pinio__s3_url_join(bucket, prefix), esc[512];
        rc = PINIO_EFORMAT;
        pinio_diag_set_at(diag, rc, url ? url : bucket, PINIO_DIAG_NO_OFFSET,
                          "the listing names the object '%s', whose key holds control "
                          "characters (shown as \\xNN): refused",
                          pinio__s3_printable(esc, sizeof(esc), odd, strlen(odd)));
        free(url);
    }
    else if (index)
        rc = use_index(in, bucket, index, diag);
    else if (!k) {
        char *url = pinio__s3_url_join(bucket, prefix);
        pinio_diag_set_at(diag, -ENOENT, url ? url : bucket, PINIO_DIAG_NO_OFFSET,
                          "no *.safetensors objects and no model.safetensors.index.json "
                          "under this prefix");
        free(url);
        rc = -ENOENT;
    } else {
        /* The keys become their URLs in place: the caller's list. */
        qsort(names, k, sizeof(*names), cmp_str);
        for (size_t i = 0; i < k; i++)
            if (!(names[i] = pinio__s3_url_join(bucket, names[i])))
                rc = -ENOMEM;
        if (rc == 0) {
            *out = names;
            *nout = k;
            names = NULL;
        } else {
            for (size_t i = 0; i < k; i++)
                free(names[i]);
        }
    }
    free(names);
    pinio__s3_entries_free(e, n);
    return rc;
}

int pinio__obj_resolve(pinio__inputs *in, const char *url, char ***out, size_t *nout,
                       pinio_diag *diag)
{
    *out = NULL;
    *nout = 0;
    char *bucket, *key;
    int rc = pinio__s3_url_split(url, &bucket, &key, diag);
    if (rc < 0)
        return rc;
    if (!in->s3 && (rc = pinio__s3_open(&in->s3, NULL, diag)) == 0)
        pinio__s3_set_stop(in->s3, in->stop, in->stop_ctx);
    if (rc == 0) {
        size_t kl = strlen(key);
        if (ends_with(key, ".safetensors")) {
            char *u = pinio__s3_url_join(bucket, key);
            *out = u ? malloc(sizeof(**out)) : NULL;
            if (*out) {
                (*out)[0] = u;
                *nout = 1;
            } else {
                free(u);
                rc = -ENOMEM;
            }
        }
        else if (ends_with(key, ".json"))
            rc = use_index(in, bucket, key, diag);
        else if (kl == 0 || key[kl - 1] == '/')
            rc = scan_prefix(in, bucket, key, out, nout, diag);
        else {
            char *pre = malloc(kl + 2);
            if (!pre)
                rc = -ENOMEM;
            else {
                memcpy(pre, key, kl);
                memcpy(pre + kl, "/", 2);
                rc = scan_prefix(in, bucket, pre, out, nout, diag);
                free(pre);
            }
        }
    }
    free(bucket);
    free(key);
    return rc;
}

/* Bytes [off, off + len) of the object into dst, pinned to its version, in
 * ranges of at most RANGE fetched at once (at the client's concurrency). */
static int fetch(pinio__s3 *s3, const pinio__pfile *f, void *dst, uint64_t off, uint64_t len,
                 pinio_diag *diag)
{
    pinio__s3_range one[8], *r = one;
    size_t n = (size_t)((len + RANGE - 1) / RANGE);
    if (n > sizeof(one) / sizeof(*one) && !(r = calloc(n, sizeof(*r))))
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        uint64_t o = (uint64_t)i * RANGE;
        r[i] = (pinio__s3_range){ .bucket = f->bucket, .key = f->key, .etag = f->ver.etag,
                                  .last_modified = f->ver.last_modified, .size = f->pub.size,
                                  .off = off + o, .len = len - o < RANGE ? len - o : RANGE,
                                  .dst = (uint8_t *)dst + o };
    }
    int rc = pinio__s3_get_ranges(s3, r, n, diag);
    if (r != one)
        free(r);
    return rc;
}

/* The first answer carried neither an ETag nor a Last-Modified: a store
 * whose GETs send no validator may still send one to a HEAD, and a pin the
 * size alone would miss a replacement of the same size. Asked, and when
 * it gives one, the first bytes are fetched again pinned by it: the bytes
 * first fetched could be of the version before the HEAD's. Costs what the
 * HEAD and header GET cost before; only such a store pays it. */
static int repin(pinio__s3 *s3, pinio__pfile *f, uint8_t *buf, uint64_t have, pinio_diag *diag)
{
    pinio__s3_meta m;
    int rc = pinio__s3_stat(s3, f->bucket, f->key, &m, diag);
    if (rc == 0)
        rc = pinio__s3_same(f->path, &f->ver, &m, diag);
    if (rc < 0 || strcmp(pinio__s3_pinned_by(&m), "size") == 0)
        return rc;
    f->ver = m;
    return have ? fetch(s3, f, buf, 0, have, diag) : 0;
}

int pinio__obj_open(pinio__s3 *s3, pinio__pfile *f, const void *header, size_t header_len,
                    pinio_diag *diag)
{
    f->fd = -1;
    f->pub.object = true;
    f->pub.fd = -1;
    f->s3 = s3;
    int rc = pinio__s3_url_split(f->path, &f->bucket, &f->key, diag);
    if (rc < 0)
        return rc;
    if (header) {
        /* The caller has the header: a HEAD for the size and the version
         * costs what a first GET would, and brings no bytes to throw away. */
        if ((rc = pinio__s3_stat(s3, f->bucket, f->key, &f->ver, diag)) < 0)
            return rc;
        f->pub.size = f->id.size = f->ver.size;
        rc = pinio_st_parse(&f->st, header, header_len, f->ver.size, f->path, 0, diag);
    } else {
        uint8_t *buf = malloc(HEAD_FIRST);
        if (!buf)
            return -ENOMEM;
        uint64_t have = 0;
        rc = pinio__s3_first(s3, f->bucket, f->key, buf, HEAD_FIRST, &f->ver, &have, diag);
        f->pub.size = f->id.size = f->ver.size;
        /* An empty object (a 416 carries no validator) is refused below. */
        if (rc == 0 && f->ver.size && strcmp(pinio__s3_pinned_by(&f->ver), "size") == 0)
            rc = repin(s3, f, buf, have, diag);
        uint64_t size = f->ver.size;
        if (rc == 0 && have >= 8) {
            uint64_t n = 0;
            for (int i = 7; i >= 0; i--)
                n = n << 8 | buf[i];
            /* A length past the object or the cap is the parser's to
             * refuse, with the same words as for a file. Else the rest of
             * a header longer than the first GET: one GET more, pinned. */
            if (n <= PINIO_ST_HEADER_MAX && 8 + n <= size && 8 + n > have) {
                uint8_t *nb = realloc(buf, 8 + n);
                if (!nb)
                    rc = -ENOMEM;
                else {
                    buf = nb;
                    rc = fetch(s3, f, buf + have, have, 8 + n - have, diag);
                    have = 8 + n;
                }
            }
        }
        if (rc == 0)
            rc = pinio_st_parse(&f->st, buf, (size_t)have, size, f->path, 0, diag);
        /* Kept: the hash and stage read the header's bytes again, and the
         * plan's reads the first tensors' bytes that came with it; they
         * are these (the same version), without another request. */
        f->prefix = buf;
        f->prefix_len = rc == 0 ? have : 0;
    }
    if (rc < 0)
        return rc;
    f->pub.path = f->path;
    f->pub.header = f->st;
    f->pub.cache_why = f->why;
    snprintf(f->why, sizeof(f->why), "object storage: HTTP range reads, pinned by %s",
             pinio__s3_pinned_by(&f->ver));
    return 0;
}

int pinio__obj_recheck(const pinio__pfile *f, pinio_diag *diag)
{
    pinio__s3_meta now;
    int rc = pinio__s3_stat(f->s3, f->bucket, f->key, &now, diag);
    return rc < 0 ? rc : pinio__s3_same(f->path, &f->ver, &now, diag);
}

/* Weakest first: the report says what the load can promise. */
static int pin_rank(const char *by)
{
    return strcmp(by, "size") == 0 ? 0 : strcmp(by, "last-modified") == 0 ? 1 : 2;
}

const char *pinio__obj_pinned_by(const pinio_plan *p)
{
    const char *by = "";
    for (size_t i = 0; i < p->nfiles; i++) {
        const char *b = p->files[i].pub.object ? pinio__s3_pinned_by(&p->files[i].ver) : NULL;
        if (b && (!*by || pin_rank(b) < pin_rank(by)))
            by = b;
    }
    return by;
}

static live *live_of(const pinio__s3 *s3)
{
    live *l = g_live;
    while (l && l->s3 != s3)
        l = l->next;
    return l;
}

/* On the owner's thread: the bytes sent on its stream and waited for, its
 * own completions meanwhile kept in l->early. A failure drops the stream:
 * the execution fails with it (l->failed). */
static int serve(live *l, const pinio__pfile *f, void *buf, uint64_t off, uint64_t len,
                 pinio_diag *diag)
{
    if (l->failed) {
        if (diag)
            *diag = l->fail_diag;
        return l->failed;
    }
    size_t left = 0;
    int rc = 0;
    for (uint64_t o = 0; rc == 0 && o < len; o += RANGE, left++) {
        pinio__s3_range r = { .bucket = f->bucket, .key = f->key, .etag = f->ver.etag,
                              .last_modified = f->ver.last_modified, .size = f->pub.size,
                              .off = off + o, .len = len - o < RANGE ? len - o : RANGE,
                              .dst = (uint8_t *)buf + o, .tag = SERVED_TAG };
        rc = pinio__s3_submit(l->s3, &r, diag);
    }
    pinio__s3_stats a, b;
    pinio__s3_get_stats(l->s3, &a);
    while (rc == 0 && left) {
        pinio__s3_done d[32];
        size_t n = 0;
        rc = pinio__s3_poll(l->s3, 1, d, 32, &n, diag);
        for (size_t k = 0; rc == 0 && k < n; k++) {
            if (d[k].tag == SERVED_TAG) {
                left--;
                continue;
            }
            if (l->nearly == l->capearly) {
                size_t c = l->capearly ? l->capearly * 2 : 64;
                pinio__s3_done *ne = realloc(l->early, c * sizeof(*ne));
                if (!ne) {
                    rc = -ENOMEM;
                    break;
                }
                l->early = ne;
                l->capearly = c;
            }
            l->early[l->nearly++] = d[k];
        }
    }
    pinio__s3_get_stats(l->s3, &b);
    if (b.unconfirmed > a.unconfirmed)
        l->recheck_all = true;
    if (rc < 0) {
        pinio__s3_drop(l->s3);
        l->failed = rc;
        if (diag)
            l->fail_diag = *diag;
        else
            pinio_diag_set(&l->fail_diag, rc, "%s: a reread failed: %s", f->path,
                           pinio_strerror(rc));
    }
    return rc;
}

/* The owner's: serves the rereads other threads queued. */
static void serve_queue(live *l)
{
    pthread_mutex_lock(&g_mu);
    reread *q = l->queue;
    l->queue = NULL;
    pthread_mutex_unlock(&g_mu);
    for (reread *x = q, *nx; x; x = nx) {
        nx = x->next;
        int rc = serve(l, x->f, x->buf, x->off, x->len, x->diag);
        pthread_mutex_lock(&g_mu);
        x->rc = rc;
        x->done = true;
        pthread_cond_broadcast(&g_cv);
        pthread_mutex_unlock(&g_mu);
    }
}

int64_t pinio__obj_pread(const pinio__pfile *f, void *buf, size_t len, uint64_t off,
                         pinio_diag *diag)
{
    if (off >= f->pub.size || !len)
        return 0;
    if (len > f->pub.size - off)
        len = (size_t)(f->pub.size - off);
    if (off + len <= f->prefix_len) {
        memcpy(buf, f->prefix + off, len);
        return (int64_t)len;
    }
    pthread_mutex_lock(&g_mu);
    live *l = live_of(f->s3);
    if (l && pthread_equal(l->owner, pthread_self())) {
        /* From inside one of the execution's own callbacks. */
        pthread_mutex_unlock(&g_mu);
        int rc = serve(l, f, buf, off, len, diag);
        return rc < 0 ? rc : (int64_t)len;
    }
    if (l) {
        reread x = { .f = f, .buf = buf, .off = off, .len = len, .diag = diag };
        x.next = l->queue;
        l->queue = &x;
        while (!x.done && !x.orphan)
            pthread_cond_wait(&g_cv, &g_mu);
        if (x.done) {
            pthread_mutex_unlock(&g_mu);
            return x.rc < 0 ? x.rc : (int64_t)len;
        }
    }
    g_batch++;
    pthread_mutex_unlock(&g_mu);
    /* A reread can come after the load's own check (the hasher's): when
     * its answers could not confirm the version, the object is asked
     * again now (another thread's unconfirmed answer costs a HEAD more). */
    pinio__s3_stats a, b;
    pinio__s3_get_stats(f->s3, &a);
    int rc = fetch(f->s3, f, buf, off, len, diag);
    pinio__s3_get_stats(f->s3, &b);
    if (rc == 0 && b.unconfirmed > a.unconfirmed)
        rc = pinio__obj_recheck(f, diag);
    pthread_mutex_lock(&g_mu);
    g_batch--;
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
    return rc < 0 ? rc : (int64_t)len;
}

/* The ranges of read `r` (of plan read index `ri`) landing at `mem`, the
 * object `f`'s bytes clamped to its end, appended to (*v, *n, *cap). */
static int cut(const pinio__pfile *f, const pinio_plan_read *r, size_t ri, uint8_t *mem,
               pinio__s3_range **v, size_t *n, size_t *cap)
{
    uint64_t end = r->offset + r->len, pos = r->offset;
    if (end > f->pub.size)
        end = f->pub.size;
    /* Bytes the first GET brought (the same version): copied, not asked
     * again; a read within them needs no request at all. */
    if (pos < f->prefix_len) {
        uint64_t k = (end < f->prefix_len ? end : f->prefix_len) - pos;
        memcpy(mem, f->prefix + pos, (size_t)k);
        pos += k;
    }
    while (pos < end) {
        uint64_t dpos = r->dest_offset + (pos - r->offset);
        uint64_t next = pos + (RANGE - dpos % RANGE);
        if (next - pos < RANGE) /* a partial first range takes the next one along */
            next += RANGE;
        if (next >= end || end - next < RANGE / 2)
            next = end - pos <= 2 * RANGE ? end : next;
        if (next > end)
            next = end;
        if (*n == *cap) {
            size_t c = *cap ? *cap * 2 : 64;
            pinio__s3_range *nv = realloc(*v, c * sizeof(*nv));
            if (!nv)
                return -ENOMEM;
            *v = nv;
            *cap = c;
        }
        (*v)[(*n)++] = (pinio__s3_range){ .bucket = f->bucket, .key = f->key,
                                          .etag = f->ver.etag,
                                          .last_modified = f->ver.last_modified,
                                          .size = f->pub.size, .off = pos, .len = next - pos,
                                          .dst = mem + (pos - r->offset), .tag = ri };
        pos = next;
    }
    return 0;
}

/* What both ways of executing share. */
typedef struct exec_ctx {
    pinio_plan *p;
    size_t a, b;
    const pinio_dest_ops *ops;
    void *ctx;
    const pinio_exec_opts *o;
    uint64_t batch_max, *done, total;
    double t0;
    bool *seen, *recheck;
    uint64_t ops_done;         /* ranges fetched, for the progress callback */
    uint64_t pg_at;            /* *done at the last progress call */
    pinio_diag *diag;
} exec_ctx;

static int claim(exec_ctx *e, size_t i, void **m)
{
    int rc = e->ops->claim(e->ctx, i, &e->p->layout.reads[i], m);
    if (rc < 0 && e->diag && e->diag->code == 0)
        pinio_diag_set(e->diag, rc, "the destination refused read %zu: %s", i,
                       pinio_strerror(rc));
    if (rc == 0)
        e->seen[e->p->layout.reads[i].file] = true;
    return rc;
}

static int land(exec_ctx *e, size_t i, void *m)
{
    const pinio_plan_read *r = &e->p->layout.reads[i];
    *e->done += r->len;
    int rc = e->ops->landed ? e->ops->landed(e->ctx, i, r, m) : 0;
    if (rc < 0 && e->diag && e->diag->code == 0)
        pinio_diag_set(e->diag, rc, "the destination failed read %zu: %s", i, pinio_strerror(rc));
    return rc;
}

/* The progress callback: after `now` (a batch, the end), else once per
 * batch_max bytes landed (each read's when the batches are not bounded by
 * bytes: a stream's). */
static int progress(exec_ctx *e, bool now)
{
    uint64_t step = e->batch_max == UINT64_MAX ? 0 : e->batch_max;
    if (!e->o->progress || *e->done == e->pg_at || (!now && *e->done - e->pg_at < step))
        return 0;
    e->pg_at = *e->done;
    pinio_progress pg = { .done_bytes = *e->done, .total_bytes = e->total,
                          .done_ops = e->ops_done, .elapsed_s = pinio__now_s() - e->t0 };
    if (e->o->progress(e->o->progress_ctx, &pg)) {
        pinio_diag_set(e->diag, -ECANCELED, "load canceled by the progress callback");
        return -ECANCELED;
    }
    return 0;
}

/* Batches: claim reads up to the limits, fetch all their ranges, land. */
static int run_batches(exec_ctx *e)
{
    pinio_plan *p = e->p;
    const pinio_plan_read *reads = p->layout.reads;
    size_t *batch = calloc(e->b > e->a ? e->b - e->a : 1, sizeof(*batch));
    void **mem = calloc(e->b > e->a ? e->b - e->a : 1, sizeof(*mem));
    pinio__s3_range *v = NULL;
    size_t nv = 0, cap = 0;
    int rc = batch && mem ? 0 : -ENOMEM;
    for (size_t i = e->a; i < e->b && rc == 0;) {
        size_t nb = 0;
        uint64_t bytes = 0;
        nv = 0;
        for (; i < e->b && rc == 0; i++) {
            const pinio_plan_read *r = &reads[i];
            const pinio__pfile *f = &p->files[r->file];
            if (!f->pub.object)
                continue;
            if (nb && (bytes >= e->batch_max || (e->o->batch_reads && nb >= e->o->batch_reads)))
                break;
            void *m = NULL;
            if ((rc = claim(e, i, &m)) < 0)
                break;
            batch[nb] = i;
            mem[nb++] = m;
            bytes += r->len;
            rc = cut(f, r, i, m, &v, &nv, &cap);
        }
        /* A failing range's diag->index is its tag: the plan read. */
        pinio__s3_stats u0, u1;
        pinio__s3_get_stats(p->s3, &u0);
        if (rc == 0)
            rc = pinio__s3_get_ranges(p->s3, v, nv, e->diag);
        pinio__s3_get_stats(p->s3, &u1);
        for (size_t k = 0; rc == 0 && u1.unconfirmed > u0.unconfirmed && k < nb; k++)
            e->recheck[reads[batch[k]].file] = true;
        e->ops_done += nv;
        for (size_t k = 0; rc == 0 && k < nb; k++)
            rc = land(e, batch[k], mem[k]);
        if (rc == 0)
            rc = progress(e, true);
    }
    free(v);
    free(batch);
    free(mem);
    return rc;
}

/* A read claimed and not landed: its ranges not yet in. */
typedef struct oread {
    size_t i;
    void *mem;
    size_t left;
} oread;

/* The window's read of plan read `i`, or NULL. */
static oread *find(oread *w, size_t head, size_t n, size_t i)
{
    for (size_t k = head; k < n; k++)
        if (w[k].i == i)
            return &w[k];
    return NULL;
}

/* A stream: ranges submitted as others end, each read landed in order as
 * soon as it is in (see the banner). Runs with `l` registered. */
static int run_stream(exec_ctx *e, live *l, unsigned conc)
{
    pinio_plan *p = e->p;
    const pinio_plan_read *reads = p->layout.reads;
    oread *w = NULL;                 /* the window: [head, nw) claimed, not landed */
    size_t head = 0, nw = 0, wcap = 0;
    pinio__s3_range *v = NULL;       /* the last claimed read's ranges, [vs, nv) to submit */
    size_t vs = 0, nv = 0, vcap = 0;
    uint64_t out_bytes = 0;          /* of the window's reads */
    size_t inflight = 0, next = e->a;
    int rc = 0;
    for (;;) {
        /* Fill: the next ranges, claiming reads while the bounds allow. */
        while (rc == 0 && inflight < conc) {
            if (vs < nv) {
                rc = pinio__s3_submit(p->s3, &v[vs++], e->diag);
                inflight++;
                continue;
            }
            while (next < e->b && !p->files[reads[next].file].pub.object)
                next++;
            size_t nout = nw - head;
            if (next >= e->b || (nout && (out_bytes >= e->batch_max ||
                                          (e->o->batch_reads && nout >= e->o->batch_reads))))
                break;
            const pinio_plan_read *r = &reads[next];
            void *m = NULL;
            if ((rc = claim(e, next, &m)) < 0 || (rc = l->failed) < 0)
                break;
            if (nw == wcap) {
                if (head > wcap / 2) { /* landed ones leave the front */
                    memmove(w, w + head, (nw - head) * sizeof(*w));
                    nw -= head;
                    head = 0;
                } else {
                    size_t c = wcap ? wcap * 2 : 64;
                    oread *nwp = realloc(w, c * sizeof(*nwp));
                    if (!nwp) {
                        rc = -ENOMEM;
                        break;
                    }
                    w = nwp;
                    wcap = c;
                }
            }
            nv = vs = 0;
            rc = cut(&p->files[r->file], r, next, m, &v, &nv, &vcap);
            w[nw++] = (oread){ .i = next, .mem = m, .left = nv };
            out_bytes += r->len;
            next++;
        }
        /* Land: the oldest reads that are in, in claim order. */
        while (rc == 0 && head < nw && w[head].left == 0) {
            out_bytes -= reads[w[head].i].len;
            rc = land(e, w[head].i, w[head].mem);
            head++;
            if (rc == 0)
                rc = l->failed;
            if (rc == 0)
                rc = progress(e, false);
        }
        if (rc < 0 || (head == nw && next >= e->b))
            break;
        if (head == nw && !inflight) /* nothing claimed, nothing to wait for */
            continue;
        serve_queue(l);
        if ((rc = l->failed) < 0)
            break;
        /* Wait: completions kept while serving first, then the stream's. */
        pinio__s3_done d[64];
        size_t n = 0;
        pinio__s3_stats u0, u1;
        pinio__s3_get_stats(p->s3, &u0);
        if (l->nearly) {
            n = l->nearly < 64 ? l->nearly : 64;
            memcpy(d, l->early, n * sizeof(*d));
            memmove(l->early, l->early + n, (l->nearly - n) * sizeof(*d));
            l->nearly -= n;
        } else if (inflight) {
            /* Not forever: another thread's reread waits for the next turn. */
            rc = pinio__s3_poll(p->s3, 0.05, d, 64, &n, e->diag);
        }
        pinio__s3_get_stats(p->s3, &u1);
        for (size_t k = 0; rc == 0 && k < n; k++) {
            oread *x = find(w, head, nw, d[k].tag);
            inflight--;
            e->ops_done++;
            if (x)
                x->left--;
            /* An answer that could not confirm the version: its object is
             * asked again after the reads. */
            if (u1.unconfirmed > u0.unconfirmed && x)
                e->recheck[reads[x->i].file] = true;
        }
    }
    if (rc < 0 && pinio__s3_pending(p->s3))
        pinio__s3_drop(p->s3);
    if (rc < 0 && l->failed && e->diag && e->diag->code == 0)
        *e->diag = l->fail_diag;
    free(v);
    free(w);
    return rc;
}

int pinio__obj_execute(pinio_plan *p, size_t a, size_t b, const pinio_dest_ops *ops, void *ctx,
                       const pinio_exec_opts *o, uint64_t batch_max, uint64_t *done,
                       uint64_t total, double t0, pinio_exec_report *rep, char *line,
                       size_t line_size, pinio_diag *diag)
{
    bool *seen = calloc(p->nfiles ? p->nfiles : 1, sizeof(*seen));
    /* Per file: an answer could not confirm its version (then asked again). */
    bool *recheck = calloc(p->nfiles ? p->nfiles : 1, sizeof(*recheck));
    pinio__s3_stats s0;
    pinio__s3_get_stats(p->s3, &s0);
    int rc = seen && recheck ? 0 : -ENOMEM;
    unsigned conc = o->object_concurrency ? o->object_concurrency : 16;
    if (rc == 0)
        rc = pinio__s3_set_concurrency(p->s3, conc);
    pinio__s3_set_stop(p->s3, o->stop, o->stop_ctx);
    exec_ctx e = { .p = p, .a = a, .b = b, .ops = ops, .ctx = ctx, .o = o,
                   .batch_max = batch_max ? batch_max : UINT64_MAX, .done = done,
                   .total = total, .t0 = t0, .seen = seen, .recheck = recheck,
                   .pg_at = *done, .diag = diag };
    if (rc == 0 && o->object_batches) {
        rc = run_batches(&e);
    } else if (rc == 0) {
        live l = { .s3 = p->s3, .owner = pthread_self(), .plan = p };
        /* Registered once no other thread's batch call is under way on a
         * client: from now on they come to this thread. */
        pthread_mutex_lock(&g_mu);
        while (g_batch)
            pthread_cond_wait(&g_cv, &g_mu);
        l.next = g_live;
        g_live = &l;
        pthread_mutex_unlock(&g_mu);
        rc = run_stream(&e, &l, conc);
        serve_queue(&l); /* those queued meanwhile, unless it failed */
        pthread_mutex_lock(&g_mu);
        for (live **pl = &g_live; *pl; pl = &(*pl)->next)
            if (*pl == &l) {
                *pl = l.next;
                break;
            }
        for (reread *x = l.queue; x; x = x->next)
            x->orphan = true; /* the failure's: fetched by their own threads */
        pthread_cond_broadcast(&g_cv);
        pthread_mutex_unlock(&g_mu);
        for (size_t f = 0; l.recheck_all && f < p->nfiles; f++)
            recheck[f] = p->files[f].pub.object;
        free(l.early);
    }
    if (rc == 0)
        rc = progress(&e, true);
    /* Once its reads are done, an object that nothing pinned answer by
     * answer must still be the version its header came from. */
    for (size_t f = 0; rc == 0 && f < p->nfiles; f++)
        if (recheck[f] ||
            (seen[f] && strcmp(pinio__s3_pinned_by(&p->files[f].ver), "size") == 0))
            rc = pinio__obj_recheck(&p->files[f], diag);
    pinio__s3_set_stop(p->s3, NULL, NULL);
    pinio__s3_stats s1;
    pinio__s3_get_stats(p->s3, &s1);
    for (size_t f = 0; seen && f < p->nfiles; f++)
        rep->files_object += seen[f];
    rep->object_requests += s1.requests - s0.requests;
    rep->object_retries += s1.retries - s0.retries;
    const char *by = pinio__obj_pinned_by(p);
    snprintf(line, line_size, "HTTP range GETs from %s, %u in flight at most, ranges of 8-16 MiB "
             "(%llu requests, %llu retried), versions pinned by %s", pinio__s3_endpoint(p->s3),
             conc, (unsigned long long)(s1.requests - s0.requests),
             (unsigned long long)(s1.retries - s0.retries),
             strcmp(by, "etag") == 0 ? "ETag" : strcmp(by, "last-modified") == 0
                 ? "Last-Modified and size" : "size alone (checked again after the reads)");
    free(seen);
    free(recheck);
    return rc;
}
