/*
 * The object source: s3:// inputs behind the plan, beside files.
 *
 *   resolve  s3://B/K.safetensors    one object
 *            s3://B/P/K.json         an index: fetched whole, parsed as a
 *                                    file's; its shards are s3://B/P/NAME
 *            s3://B/P/ (or a key that is neither)   ListObjectsV2 of the
 *                                    "folder": its index when present, else
 *                                    its *.safetensors, in key order
 *   open     HEAD (size, ETag, Last-Modified), then the header's bytes by
 *            ranged GETs pinned to them, validated by the same strict
 *            parser as a file's header, so the selection and the filters
 *            run before any data byte, exactly as for a file
 *   execute  each read claimed from the destination, cut into ranges of
 *            8-16 MiB on 8 MiB boundaries of the destination (a read never
 *            crosses a segment, so neither does a range), the ranges of a
 *            batch fetched at the client's concurrency, checked (status,
 *            Content-Range, length, version), then the reads landed in order
 *
 * Why the version is pinned from the HEAD on: a replaced object must never
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
 * Why 8-16 MiB ranges: one request costs a round trip and, on S3, a
 * request's charge; at 8 MiB and 16 in flight the first-byte latency of a
 * remote store (tens of ms) is hidden behind the transfer of the others,
 * and a retried range costs at most 16 MiB again.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/load/plan_internal.h"

/* The first GET of an object: its header's 8-byte length and, for all but
 * huge headers, the whole header in the same request. */
#define HEAD_FIRST ((uint64_t)256 << 10)

/* Ranges are cut on multiples of this in the destination, and a leftover
 * under it is merged into its neighbour: every range is 8-16 MiB but a
 * read's only one when the read is smaller. */
#define RANGE ((uint64_t)8 << 20)

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

int pinio__obj_open(pinio__s3 *s3, pinio__pfile *f, const void *header, size_t header_len,
                    pinio_diag *diag)
{
    f->fd = -1;
    f->pub.object = true;
    f->pub.fd = -1;
    f->s3 = s3;
    int rc = pinio__s3_url_split(f->path, &f->bucket, &f->key, diag);
    if (rc == 0)
        rc = pinio__s3_stat(s3, f->bucket, f->key, &f->ver, diag);
    if (rc < 0)
        return rc;
    uint64_t size = f->ver.size;
    f->pub.size = size;
    f->id.size = size;
    if (header) {
        rc = pinio_st_parse(&f->st, header, header_len, size, f->path, 0, diag);
    } else {
        uint64_t first = size < HEAD_FIRST ? size : HEAD_FIRST;
        uint8_t *buf = malloc(first ? first : 1);
        if (!buf)
            return -ENOMEM;
        rc = first ? fetch(s3, f, buf, 0, first, diag) : 0;
        uint64_t have = first;
        if (rc == 0 && first >= 8) {
            uint64_t n = 0;
            for (int i = 7; i >= 0; i--)
                n = n << 8 | buf[i];
            /* A length past the object or the cap is the parser's to
             * refuse, with the same words as for a file. */
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
        /* Kept: the hash and stage read the header's bytes again, and they
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
    /* A reread can come after the load's own check (the hasher's): when
     * its answers could not confirm the version, the object is asked
     * again now (another thread's unconfirmed answer costs a HEAD more). */
    pinio__s3_stats a, b;
    pinio__s3_get_stats(f->s3, &a);
    int rc = fetch(f->s3, f, buf, off, len, diag);
    pinio__s3_get_stats(f->s3, &b);
    if (rc == 0 && b.unconfirmed > a.unconfirmed)
        rc = pinio__obj_recheck(f, diag);
    return rc < 0 ? rc : (int64_t)len;
}

/* The ranges of read `r` (of plan read index `ri`) landing at `mem`, the
 * object `f`'s bytes clamped to its end, appended to (*v, *n, *cap). */
static int cut(const pinio__pfile *f, const pinio_plan_read *r, size_t ri, uint8_t *mem,
               pinio__s3_range **v, size_t *n, size_t *cap)
{
    uint64_t end = r->offset + r->len;
    if (end > f->pub.size)
        end = f->pub.size;
    for (uint64_t pos = r->offset; pos < end;) {
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

int pinio__obj_execute(pinio_plan *p, size_t a, size_t b, const pinio_dest_ops *ops, void *ctx,
                       const pinio_exec_opts *o, uint64_t batch_max, uint64_t *done,
                       uint64_t total, double t0, pinio_exec_report *rep, char *line,
                       size_t line_size, pinio_diag *diag)
{
    const pinio_plan_read *reads = p->layout.reads;
    size_t *batch = calloc(b > a ? b - a : 1, sizeof(*batch));
    void **mem = calloc(b > a ? b - a : 1, sizeof(*mem));
    bool *seen = calloc(p->nfiles ? p->nfiles : 1, sizeof(*seen));
    /* Per file: read in a batch with an unconfirmed answer (then asked again). */
    bool *recheck = calloc(p->nfiles ? p->nfiles : 1, sizeof(*recheck));
    pinio__s3_range *v = NULL;
    size_t nv = 0, cap = 0;
    pinio__s3_stats s0;
    pinio__s3_get_stats(p->s3, &s0);
    int rc = batch && mem && seen && recheck ? 0 : -ENOMEM;
    unsigned conc = o->object_concurrency ? o->object_concurrency : 16;
    if (rc == 0)
        rc = pinio__s3_set_concurrency(p->s3, conc);
    pinio__s3_set_stop(p->s3, o->stop, o->stop_ctx);
    for (size_t i = a; i < b && rc == 0;) {
        size_t nb = 0;
        uint64_t bytes = 0;
        nv = 0;
        /* A batch: claim reads up to the limits, cutting each into ranges. */
        for (; i < b && rc == 0; i++) {
            const pinio_plan_read *r = &reads[i];
            const pinio__pfile *f = &p->files[r->file];
            if (!f->pub.object)
                continue;
            if (nb && (bytes >= batch_max || (o->batch_reads && nb >= o->batch_reads)))
                break;
            void *m = NULL;
            rc = ops->claim(ctx, i, r, &m);
            if (rc < 0) {
                if (diag && diag->code == 0)
                    pinio_diag_set(diag, rc, "the destination refused read %zu: %s", i,
                                   pinio_strerror(rc));
                break;
            }
            seen[r->file] = true;
            batch[nb] = i;
            mem[nb++] = m;
            bytes += r->len;
            rc = cut(f, r, i, m, &v, &nv, &cap);
        }
        /* A failing range's diag->index is its tag: the plan read. */
        pinio__s3_stats u0, u1;
        pinio__s3_get_stats(p->s3, &u0);
        if (rc == 0)
            rc = pinio__s3_get_ranges(p->s3, v, nv, diag);
        pinio__s3_get_stats(p->s3, &u1);
        for (size_t k = 0; rc == 0 && u1.unconfirmed > u0.unconfirmed && k < nb; k++)
            recheck[reads[batch[k]].file] = true;
        for (size_t k = 0; rc == 0 && k < nb; k++) {
            *done += reads[batch[k]].len;
            if (ops->landed) {
                rc = ops->landed(ctx, batch[k], &reads[batch[k]], mem[k]);
                if (rc < 0 && diag && diag->code == 0)
                    pinio_diag_set(diag, rc, "the destination failed read %zu: %s", batch[k],
                                   pinio_strerror(rc));
            }
        }
        if (rc == 0 && nb && o->progress) {
            pinio_progress pg = { .done_bytes = *done, .total_bytes = total, .done_ops = nv,
                                  .elapsed_s = pinio__now_s() - t0 };
            if (o->progress(o->progress_ctx, &pg)) {
                rc = -ECANCELED;
                pinio_diag_set(diag, rc, "load canceled by the progress callback");
            }
        }
    }
    /* Once its reads are done, an object that nothing pinned answer by
     * answer must still be the version its header came from. */
    for (size_t f = 0; rc == 0 && f < p->nfiles; f++)
        if (seen[f] && (recheck[f] || strcmp(pinio__s3_pinned_by(&p->files[f].ver), "size") == 0))
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
    free(v);
    free(batch);
    free(mem);
    free(seen);
    free(recheck);
    return rc;
}
