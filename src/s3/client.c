/*
 * The S3 client: requests through libcurl's multi interface.
 *
 *   pinio__s3_get_ranges()  n transfers, at most `concurrency` in flight on
 *       one multi handle (its connection cache keeps the connections alive
 *       between transfers: a range after the first costs no handshake);
 *       each transfer signed afresh per attempt (the signature carries the
 *       time), its response checked header by header as it arrives and as
 *       a whole when done, then accepted, retried later, or the end of the
 *       call.
 *   pinio__s3_submit() / pinio__s3_poll()  the same transfers one at a
 *       time, each reported as it completes (the benchmark keeps a steady
 *       number in flight and times each one). Both run on one queue and
 *       one turn of the loop (turn()): the checks, retries and connection
 *       reuse are the same code for either.
 *
 * Why every response is checked: a proxy or a store that answers a range
 * with another range, the whole object (200) or fewer bytes than it
 * announced would otherwise put the wrong bytes at the right offset, and
 * the header validated at plan time would describe bytes that are not
 * there. Content-Range must be exactly the range asked for, of the total
 * size first seen; the body exactly its length; the version the one pinned
 * (below).
 *
 * Why the version is pinned by what the store offers: an ETag when the
 * object's first GET (pinio__s3_first: the one that opens it, no HEAD
 * before it) or a HEAD gave one (If-Match on every request, and each
 * answer's ETag compared), else its Last-Modified (If-Unmodified-Since,
 * and each answer's compared), the size always (Content-Range's total). A store that
 * ignores the conditions and leaves the validator out of an answer cannot
 * be checked by that answer: it is counted (stats.unconfirmed), and the
 * caller asks again at the end (pinio__s3_stat) whether the object is
 * still the one first seen. Every way a replaced object shows (a 412, a new
 * ETag or date, another total, a 416) is one error, PINIO_ECHANGED, in one
 * message class ("object changed while loading"): which request notices
 * first is a race, and what the user reads must not depend on it.
 *
 * Why store-provided text is escaped (pinio__s3_printable): an ETag, a
 * Content-Range or an error code is the store's to choose; a terminal
 * escape or a line break in it must not reach the user's terminal or split
 * the one-line message.
 *
 * Retries (the AWS SDKs' "standard" mode, in spirit): 5xx, 408, 429, SlowDown /
 * RequestTimeout, timeouts, resets and short bodies are retried after a
 * full-jitter exponential backoff (a random wait under base * 2^attempt,
 * capped), at least the server's Retry-After; bounded in count and in time
 * per request. 403, 404, 412 and malformed requests are not retried: they
 * do not get better.
 *
 * Stopping: a stop request (pinio__s3_set_stop(), the caller's flag) is
 * polled before every turn of the loop, and no wait lasts more than 100 ms
 * while one is set, so a SIGTERM ends a retry storm at once instead of
 * after its backoff waits (up to retry_seconds, past a container's grace
 * period). The library installs no handler: the caller's reads its flag.
 *
 * Two dialects, one loop: a bucket that is an Azure container (az:// and
 * https://ACCOUNT.blob.core.windows.net/, see src/s3/azure.h) is signed by
 * pinio__az_sign() and ranged with x-ms-range; everything else about a
 * request (the checks, the version pin, the retries, the stop) is the same
 * code, so the two stores cannot drift apart in what they promise. A gs://
 * bucket (src/s3/gcs.h) is a third: S3's own protocol and signer on
 * Google's endpoint and credentials.
 *
 * Secrets: the signed header lines (Authorization, the session token) live
 * in the request only while it is in flight and are never formatted into a
 * message; libcurl's verbose output is never enabled.
 */
#include <curl/curl.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "src/base/clock.h"
#include "src/s3/azure.h"
#include "src/s3/client.h"
#include "src/s3/config_internal.h"
#include "src/s3/gcs.h"
#include "src/s3/sign.h"

/* A response's header block at most: S3's are a few hundred bytes (user
 * metadata is capped at 2 KiB); a store or proxy that sends more is refused
 * with that said, before libcurl's own limit turns it into "Out of
 * memory". */
#define HEADER_MAX ((size_t)64 << 10)

/* libcurl's own refusal of a header line too long for it. */
#if CURL_AT_LEAST_VERSION(8, 6, 0)
#define CURL_TOO_LARGE(cc) ((cc) == CURLE_OUT_OF_MEMORY || (cc) == CURLE_TOO_LARGE)
#else
#define CURL_TOO_LARGE(cc) ((cc) == CURLE_OUT_OF_MEMORY)
#endif

struct pinio__s3 {
    /* The batch calls of several threads (a load's reads, its hasher's
     * rereads) take turns on the one multi handle: its connections and its
     * concurrency are the load's, and its counters count every request. */
    pthread_mutex_t mu;
    pinio__s3_cfg *cfg;
    /* The other dialect: Azure Blob Storage, for a bucket that is an Azure
     * container (pinio__az_bucket()); its configuration is read at its
     * first request, so that an S3 user's load never depends on it. */
    pinio__az_cfg *az;
    pinio__gcs_cfg *gcs; /* Google Cloud Storage's (gs://), the same way */
    bool s3_used;
    pinio__s3_opts o;
    CURLM *multi;
    CURL **idle;               /* easy handles kept for reuse */
    size_t nidle;
    pinio__s3_stats st;
    uint64_t rng;              /* the jitter's xorshift state */
    /* The transfers submitted and not finished, oldest first: waiting (to
     * start, or to retry) or in flight; `active` of them in flight. */
    struct xfer **q;
    size_t nq, qcap, active;
    /* A stream's accepted requests, not yet polled. */
    pinio__s3_done *fin;
    size_t nfin, fincap;
    pinio_stop_fn stop;        /* the current call's stop request, or NULL */
    void *stop_ctx;
    /* Buckets the store said are in another region (x-amz-bucket-region),
     * remembered for the client's life: each request to them is signed
     * for, and sent to, that region. */
    struct bucket_region **regions;
    size_t nregions;
};

typedef struct bucket_region {
    char *bucket;
    pinio__s3_cfg view; /* cfg for the region, see pinio__s3_cfg_region_view() */
    char region[64], host[160];
} bucket_region;

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

/* curl_global_init once per process; libcurl >= 7.84 makes it thread-safe,
 * the once keeps older ones right too. Never cleaned up: another user of
 * libcurl in the process may still need it. */
static void curl_init(void)
{
    curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static void opts_fill(pinio__s3_opts *o, const pinio__s3_opts *in)
{
    memset(o, 0, sizeof(*o));
    if (in)
        *o = *in;
    if (!o->concurrency)
        o->concurrency = 16;
    if (!o->max_retries)
        o->max_retries = 10;
    if (!(o->retry_seconds > 0))
        o->retry_seconds = 120;
    if (!(o->backoff_base > 0))
        o->backoff_base = 0.1;
    if (!(o->backoff_max > 0))
        o->backoff_max = 20;
    if (!o->connect_timeout_s)
        o->connect_timeout_s = 10;
    if (!o->stall_timeout_s)
        o->stall_timeout_s = 30;
}

int pinio__s3_open(pinio__s3 **out, const pinio__s3_opts *opts, pinio_diag *diag)
{
    *out = NULL;
    pthread_once(&curl_once, curl_init);
    if (curl_init_rc != CURLE_OK) {
        pinio_diag_set(diag, -EIO, "libcurl failed to initialise: %s",
                       curl_easy_strerror(curl_init_rc));
        return -EIO;
    }
    pinio__s3 *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    pthread_mutex_init(&c->mu, NULL);
    opts_fill(&c->o, opts);
    /* The AWS tools' own knob for the attempts of one request (the first
     * and its retries), read as botocore reads it. */
    const char *ma = getenv("AWS_MAX_ATTEMPTS");
    char *end = NULL;
    long attempts = ma && *ma ? strtol(ma, &end, 10) : 0;
    if ((!opts || !opts->max_retries) && ma && *ma && *end == '\0' && attempts >= 1 &&
        attempts <= 100)
        c->o.max_retries = (unsigned)attempts - 1;
    int rc = pinio__s3_cfg_load(&c->cfg, diag);
    if (rc < 0) {
        pthread_mutex_destroy(&c->mu);
        free(c);
        return rc;
    }
    c->idle = calloc(c->o.concurrency, sizeof(*c->idle));
    c->multi = curl_multi_init();
    if (!c->idle || !c->multi) {
        pinio__s3_close(c);
        return -ENOMEM;
    }
    /* One connection per request in flight, and as many kept alive between
     * calls: the plan's header reads warm the connections the data uses. */
    curl_multi_setopt(c->multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)c->o.concurrency);
    curl_multi_setopt(c->multi, CURLMOPT_MAXCONNECTS, (long)c->o.concurrency);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    c->rng = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ (uintptr_t)c ^ 0x9e3779b97f4a7c15ull;
    *out = c;
    return 0;
}

static void queue_drop(pinio__s3 *c);

void pinio__s3_close(pinio__s3 *c)
{
    if (!c)
        return;
    if (c->multi)
        queue_drop(c);
    free(c->q);
    free(c->fin);
    for (size_t i = 0; i < c->nidle; i++)
        curl_easy_cleanup(c->idle[i]);
    free(c->idle);
    if (c->multi)
        curl_multi_cleanup(c->multi);
    for (size_t i = 0; i < c->nregions; i++) {
        free(c->regions[i]->bucket);
        free(c->regions[i]);
    }
    free(c->regions);
    pinio__s3_cfg_free(c->cfg);
    pinio__az_cfg_free(c->az);
    pinio__gcs_cfg_free(c->gcs);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

int pinio__s3_set_concurrency(pinio__s3 *c, unsigned n)
{
    if (!n)
        return 0;
    pthread_mutex_lock(&c->mu);
    int rc = 0;
    if (n != c->o.concurrency) {
        while (c->nidle > n)
            curl_easy_cleanup(c->idle[--c->nidle]);
        CURL **ni = realloc(c->idle, n * sizeof(*ni));
        if (!ni) {
            rc = -ENOMEM;
        } else {
            c->idle = ni;
            c->o.concurrency = n;
            curl_multi_setopt(c->multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)n);
            curl_multi_setopt(c->multi, CURLMOPT_MAXCONNECTS, (long)n);
        }
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

void pinio__s3_set_stop(pinio__s3 *c, pinio_stop_fn stop, void *ctx)
{
    c->stop = stop;
    c->stop_ctx = ctx;
}

/* -ECANCELED when the caller asked to stop (diag filled), else 0. */
static int stop_check(pinio__s3 *c, pinio_diag *diag)
{
    if (!c->stop || !c->stop(c->stop_ctx))
        return 0;
    pinio_diag_set(diag, -ECANCELED, "s3: requests to %s stopped at the caller's request",
                   pinio__s3_endpoint(c));
    return -ECANCELED;
}

void pinio__s3_get_stats(const pinio__s3 *c, pinio__s3_stats *out)
{
    pthread_mutex_lock((pthread_mutex_t *)&c->mu);
    *out = c->st;
    pthread_mutex_unlock((pthread_mutex_t *)&c->mu);
}

const char *pinio__s3_printable(char *out, size_t cap, const char *in, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    if (!cap)
        return out;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)in[i];
        total += ch >= 0x20 && ch < 0x7f && ch != '\\' ? 1 : 4;
    }
    /* All of it when it fits, else what fits before a "..." that says so. */
    size_t limit = total < cap ? total : cap >= 4 ? cap - 4 : 0, o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)in[i];
        bool plain = ch >= 0x20 && ch < 0x7f && ch != '\\';
        if (o + (plain ? 1 : 4) > limit)
            break;
        if (plain) {
            out[o++] = (char)ch;
        } else {
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = hex[ch >> 4];
            out[o++] = hex[ch & 15];
        }
    }
    if (total >= cap && cap >= 4) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = '\0';
    return out;
}

bool pinio__s3_plain(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f || (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f))
            return false;
    return true;
}

const char *pinio__s3_endpoint(const pinio__s3 *c)
{
    if (c->gcs && !c->az && !c->s3_used)
        return pinio__gcs_cfg_endpoint(c->gcs);
    return c->az && !c->s3_used ? pinio__az_cfg_endpoint(c->az) : pinio__s3_cfg_endpoint(c->cfg);
}

const pinio__s3_cfg *pinio__s3_config(const pinio__s3 *c)
{
    return c->cfg;
}

double pinio__s3_backoff(const pinio__s3_opts *o, unsigned attempt, double retry_after, double u)
{
    double cap = o->backoff_base * ldexp(1.0, (int)(attempt < 30 ? attempt : 30));
    if (cap > o->backoff_max)
        cap = o->backoff_max;
    double w = u * cap;
    if (retry_after > w)
        w = retry_after < o->backoff_max ? retry_after : o->backoff_max;
    return w;
}

static double uniform(pinio__s3 *c)
{
    uint64_t x = c->rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    c->rng = x;
    return (double)(x >> 11) * (1.0 / 9007199254740992.0);
}

static bool parse_u64(const char *s, const char **end, uint64_t *v)
{
    uint64_t r = 0;
    const char *p = s;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (r > (UINT64_MAX - 9) / 10)
            return false;
        r = r * 10 + (uint64_t)(*p - '0');
    }
    if (p == s)
        return false;
    *v = r;
    *end = p;
    return true;
}

bool pinio__s3_content_range(const char *v, uint64_t *a, uint64_t *b, uint64_t *total)
{
    const char *p;
    if (strncasecmp(v, "bytes ", 6) != 0)
        return false;
    if (!parse_u64(v + 6, &p, a) || *p != '-' || !parse_u64(p + 1, &p, b) || *p != '/' || *b < *a)
        return false;
    if (p[1] == '*' && p[2] == '\0') {
        *total = UINT64_MAX;
        return true;
    }
    return parse_u64(p + 1, &p, total) && *p == '\0' && *b < *total;
}

/* ---- one transfer ------------------------------------------------------ */

enum { X_WAIT, X_ACTIVE, X_DONE };

typedef struct xfer {
    /* the request */
    const char *method;         /* "GET" or "HEAD" */
    const char *bucket, *key;
    const pinio__s3_param *query;
    size_t nquery;
    const char *etag;           /* If-Match, NULL: none */
    const char *lm;             /* without etag: If-Unmodified-Since, NULL: none */
    bool ranged;
    bool first;                 /* ranged, the object's first GET: nothing pinned, the
                                   answer gives the size (pinio__s3_first) */
    uint64_t off, len, size;    /* ranged: the range and the object's size */
    uint8_t *dst;               /* ranged: len bytes */
    size_t max;                 /* whole body: at most this many bytes */
    size_t tag;
    bool owned;                 /* a stream's: the client frees it */
    /* the whole body (not ranged), malloc'ed */
    char *body;
    size_t blen, bcap;
    /* the response of the current attempt */
    long status;
    uint64_t got, clen;
    bool have_clen, have_cr, overflow;
    bool hdr_big, hdr_end;      /* the header block: over HEADER_MAX, complete */
    size_t hdr_bytes;
    char cr[96];
    char etag_got[128];         /* "" also when unusable (too long, not printable) */
    char etag_raw[160];         /* as sent, cut: what a message shows, escaped */
    char lm_got[64];
    char bregion[64];           /* x-amz-bucket-region, "" when none (or unusable) */
    char redirected[64];        /* the region a redirect came from, "" when none */
    double retry_after;
    char err[512];              /* an error response's body, the start of it */
    char ms_code[64];           /* x-ms-error-code: Azure's, a HEAD's only word */
    size_t errlen;
    /* the attempts */
    unsigned attempts;
    double t_first, not_before;
    int state;
    CURL *h;
    struct curl_slist *hl;
    pinio__s3_req req;
} xfer;

static void trim(const char **s, size_t *n)
{
    while (*n && (**s == ' ' || **s == '\t')) {
        (*s)++;
        (*n)--;
    }
    while (*n && ((*s)[*n - 1] == '\r' || (*s)[*n - 1] == '\n' || (*s)[*n - 1] == ' '))
        (*n)--;
}

static void copy_val(char *dst, size_t cap, const char *v, size_t n)
{
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, v, n);
    dst[n] = '\0';
}

static void response_reset(xfer *x)
{
    x->status = 0;
    x->got = x->clen = 0;
    x->have_clen = x->have_cr = x->overflow = false;
    x->hdr_big = x->hdr_end = false;
    x->hdr_bytes = 0;
    x->cr[0] = x->etag_got[0] = x->etag_raw[0] = x->lm_got[0] = x->ms_code[0] =
        x->bregion[0] = '\0';
    x->retry_after = -1;
    x->errlen = 0;
    x->err[0] = '\0';
    x->blen = 0;
}

/* A validator as sent: visible ASCII (and spaces inside, for a date),
 * whole. One that is cut or holds other bytes cannot be sent back in a
 * condition nor compared, so it is taken as absent. */
static void copy_validator(char *dst, size_t cap, const char *v, size_t n, bool spaces)
{
    dst[0] = '\0';
    if (n >= cap)
        return;
    for (size_t i = 0; i < n; i++)
        if (!((v[i] > 0x20 && v[i] < 0x7f) || (spaces && v[i] == ' ')))
            return;
    copy_val(dst, cap, v, n);
}

static size_t on_header(char *p, size_t sz, size_t nm, void *ud)
{
    xfer *x = ud;
    size_t n = sz * nm;
    const char *s = p;
    if (n >= 5 && strncmp(s, "HTTP/", 5) == 0) {
        /* A new response (after a 100 Continue, say): forget the last. */
        response_reset(x);
        const char *sp = memchr(s, ' ', n);
        if (sp)
            x->status = strtol(sp + 1, NULL, 10);
        x->hdr_bytes = n;
        return n;
    }
    x->hdr_bytes += n;
    if (x->hdr_bytes > HEADER_MAX) {
        x->hdr_big = true;
        return 0; /* stops the transfer: CURLE_WRITE_ERROR */
    }
    if (n <= 2 && (s[0] == '\r' || s[0] == '\n'))
        x->hdr_end = true;
    const char *colon = memchr(s, ':', n);
    if (!colon)
        return n;
    size_t kl = (size_t)(colon - s), vl = n - kl - 1;
    const char *v = colon + 1;
    trim(&v, &vl);
#define IS(name) (kl == sizeof(name) - 1 && strncasecmp(s, name, kl) == 0)
    if (IS("content-range")) {
        copy_val(x->cr, sizeof(x->cr), v, vl);
        x->have_cr = true;
    } else if (IS("content-length")) {
        char tmp[32];
        const char *e;
        copy_val(tmp, sizeof(tmp), v, vl);
        x->have_clen = parse_u64(tmp, &e, &x->clen) && *e == '\0';
    } else if (IS("etag")) {
        copy_validator(x->etag_got, sizeof(x->etag_got), v, vl, false);
        copy_val(x->etag_raw, sizeof(x->etag_raw), v, vl);
    } else if (IS("x-ms-error-code")) {
        copy_val(x->ms_code, sizeof(x->ms_code), v, vl);
    } else if (IS("last-modified")) {
        copy_validator(x->lm_got, sizeof(x->lm_got), v, vl, true);
    } else if (IS("x-amz-bucket-region")) {
        copy_validator(x->bregion, sizeof(x->bregion), v, vl, false);
    } else if (IS("retry-after")) {
        /* Seconds only; an HTTP date is taken as "soon" (the backoff). */
        char tmp[32];
        copy_val(tmp, sizeof(tmp), v, vl);
        char *e;
        double r = strtod(tmp, &e);
        if (e != tmp && *e == '\0' && r >= 0)
            x->retry_after = r;
    }
#undef IS
    return n;
}

static size_t on_body(char *p, size_t sz, size_t nm, void *ud)
{
    xfer *x = ud;
    size_t n = sz * nm;
    if (x->status < 200 || x->status > 299) {
        size_t k = sizeof(x->err) - 1 - x->errlen;
        if (k > n)
            k = n;
        memcpy(x->err + x->errlen, p, k);
        x->errlen += k;
        x->err[x->errlen] = '\0';
        return n;
    }
    if (x->ranged) {
        if (x->got + n > x->len) {
            x->overflow = true;
            return 0; /* stops the transfer: CURLE_WRITE_ERROR */
        }
        memcpy(x->dst + x->got, p, n);
        x->got += n;
        return n;
    }
    if (x->blen + n > x->max) {
        x->overflow = true;
        return 0;
    }
    if (x->blen + n + 1 > x->bcap) {
        size_t cap = x->bcap ? x->bcap : 64 << 10;
        while (cap < x->blen + n + 1)
            cap *= 2;
        char *nb = realloc(x->body, cap);
        if (!nb)
            return 0;
        x->body = nb;
        x->bcap = cap;
    }
    memcpy(x->body + x->blen, p, n);
    x->blen += n;
    x->body[x->blen] = '\0';
    x->got = x->blen;
    return n;
}

static CURL *handle_take(pinio__s3 *c)
{
    if (c->nidle)
        return c->idle[--c->nidle];
    return curl_easy_init();
}

static void handle_give(pinio__s3 *c, CURL *h)
{
    if (c->nidle < c->o.concurrency) {
        curl_easy_reset(h);
        c->idle[c->nidle++] = h;
    } else {
        curl_easy_cleanup(h);
    }
}

/* Drops what an attempt held: the handle, the header list, the signed
 * request (its lines hold the credentials). */
static void attempt_end(pinio__s3 *c, xfer *x)
{
    if (x->h) {
        curl_multi_remove_handle(c->multi, x->h);
        handle_give(c, x->h);
        x->h = NULL;
    }
    curl_slist_free_all(x->hl);
    x->hl = NULL;
    pinio__s3_req_free(&x->req);
}

static const pinio__s3_cfg *cfg_for(const pinio__s3 *c, const char *bucket)
{
    for (size_t i = 0; i < c->nregions; i++)
        if (strcmp(c->regions[i]->bucket, bucket) == 0)
            return &c->regions[i]->view;
    return c->cfg;
}

/* Remembers that `bucket` is in `region`: 0, or -EINVAL (not a region
 * name: the store's word is not trusted into a host name) / -ENOMEM. */
static int remember_region(pinio__s3 *c, const char *bucket, const char *region)
{
    bucket_region *b = NULL;
    for (size_t i = 0; i < c->nregions && !b; i++)
        if (strcmp(c->regions[i]->bucket, bucket) == 0)
            b = c->regions[i];
    if (!b) {
        bucket_region **nr = realloc(c->regions, (c->nregions + 1) * sizeof(*nr));
        if (!nr)
            return -ENOMEM;
        c->regions = nr;
        if (!(b = calloc(1, sizeof(*b))) || !(b->bucket = strdup(bucket))) {
            free(b);
            return -ENOMEM;
        }
        nr[c->nregions++] = b;
    }
    return pinio__s3_cfg_region_view(c->cfg, region, &b->view, b->region, b->host);
}

/* The request of the transfer's dialect: S3's SigV4, or Azure's (its
 * configuration read at the first Azure request). */
static int sign(pinio__s3 *c, xfer *x, const char *const *extra, size_t nextra,
                pinio_diag *diag)
{
    if (pinio__gcs_bucket(x->bucket)) {
        int rc = c->gcs ? 0 : pinio__gcs_cfg_load(&c->gcs, diag);
        return rc < 0 ? rc : pinio__gcs_sign(c->gcs, x->method, x->bucket, x->key, x->query,
                                             x->nquery, extra, nextra, time(NULL), &x->req, diag);
    }
    if (!pinio__az_bucket(x->bucket)) {
        c->s3_used = true;
        return pinio__s3_sign(cfg_for(c, x->bucket), x->method, x->bucket, x->key, x->query,
                              x->nquery, extra, nextra, time(NULL), &x->req, diag);
    }
    int rc = c->az ? 0 : pinio__az_cfg_load(&c->az, diag);
    if (rc == 0)
        rc = pinio__az_sign(c->az, x->method, x->bucket, x->key, x->query, x->nquery, extra,
                            nextra, time(NULL), &x->req, diag);
    return rc;
}

static int start(pinio__s3 *c, xfer *x, pinio_diag *diag)
{
    char range[80], ifm[160];
    const char *extra[2];
    size_t nextra = 0;
    if (x->ranged) {
        /* Azure's x-ms-range: its Range is limited to 4 MiB ranges on old
         * service versions; x-ms-range never is. */
        snprintf(range, sizeof(range), "%s: bytes=%llu-%llu",
                 pinio__az_bucket(x->bucket) ? "x-ms-range" : "Range",
                 (unsigned long long)x->off, (unsigned long long)(x->off + x->len - 1));
        extra[nextra++] = range;
    }
    if (x->etag && *x->etag) {
        snprintf(ifm, sizeof(ifm), "If-Match: %s", x->etag);
        extra[nextra++] = ifm;
    } else if (x->lm && *x->lm) {
        snprintf(ifm, sizeof(ifm), "If-Unmodified-Since: %s", x->lm);
        extra[nextra++] = ifm;
    }
    int rc = sign(c, x, extra, nextra, diag);
    if (rc < 0)
        return rc;
    for (size_t i = 0; i < x->req.nheaders; i++) {
        struct curl_slist *l = curl_slist_append(x->hl, x->req.headers[i]);
        if (!l)
            return -ENOMEM;
        x->hl = l;
    }
    /* curl adds "Accept: * / *" by default; an empty value removes it. */
    struct curl_slist *l = curl_slist_append(x->hl, "Accept:");
    if (!l)
        return -ENOMEM;
    x->hl = l;
    CURL *h = x->h = handle_take(c);
    if (!h)
        return -ENOMEM;
    curl_easy_setopt(h, CURLOPT_URL, x->req.url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, x->hl);
    curl_easy_setopt(h, CURLOPT_PRIVATE, x);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
    if (strcmp(x->method, "HEAD") == 0)
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_PATH_AS_IS, 1L); /* the signer's path is the one sent */
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, c->o.connect_timeout_s);
    /* A stalled connection (a store that stops sending mid-body) is a
     * failure to retry, not a hang: under 1 byte/s for stall_timeout_s. */
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, c->o.stall_timeout_s);
    curl_easy_setopt(h, CURLOPT_BUFFERSIZE, 256L << 10);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    /* AWS_CA_BUNDLE, SSL_CERT_FILE/DIR (config.h); verification stays on. */
    if (pinio__s3_cfg_cainfo(c->cfg))
        curl_easy_setopt(h, CURLOPT_CAINFO, pinio__s3_cfg_cainfo(c->cfg));
    if (pinio__s3_cfg_capath(c->cfg))
        curl_easy_setopt(h, CURLOPT_CAPATH, pinio__s3_cfg_capath(c->cfg));
    response_reset(x);
    if (!x->attempts++)
        x->t_first = pinio__now_s();
    c->st.requests++;
    if (curl_multi_add_handle(c->multi, h) != CURLM_OK)
        return -ENOMEM;
    x->state = X_ACTIVE;
    return 0;
}

/* The <Code> of an S3 or Azure error body, else Azure's x-ms-error-code
 * header, into `out` ("" when none). */
static void error_code(const xfer *x, char *out, size_t cap)
{
    out[0] = '\0';
    const char *a = strstr(x->err, "<Code>");
    const char *b = a ? strstr(a, "</Code>") : NULL;
    if (!a || !b) {
        pinio__s3_printable(out, cap, x->ms_code, strlen(x->ms_code));
        return;
    }
    a += 6;
    pinio__s3_printable(out, cap, a, (size_t)(b - a)); /* a store's word, in our message */
}

/* The object changed: one error and one message class whichever check saw
 * it (see the top of the file), `detail` saying what this answer showed. */
PINIO_PRINTF(4, 5)
static int changed(pinio_diag *diag, const char *url, uint64_t at, const char *fmt, ...)
{
    char detail[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof(detail), fmt, ap);
    va_end(ap);
    pinio_diag_set_at(diag, PINIO_ECHANGED, url, at,
                      "object changed while loading (%s): its bytes would mix two versions",
                      detail);
    return PINIO_ECHANGED;
}

/* Validator `what` reads `got` now and read `was`: the change, both shown
 * escaped. */
static int moved(pinio_diag *diag, const char *url, uint64_t at, const char *what,
                 const char *got, const char *was)
{
    char a[160], b[160];
    return changed(diag, url, at, "%s %s, was %s", what,
                   pinio__s3_printable(a, sizeof(a), got, strlen(got)),
                   pinio__s3_printable(b, sizeof(b), was, strlen(was)));
}

/* A 2xx answer against the pinned version: the ETag when both have one,
 * else the Last-Modified when both have one; neither: it cannot say, and is
 * counted for the caller's check at the end. */
static int version_check(pinio__s3 *c, const xfer *x, const char *url, uint64_t at,
                         pinio_diag *diag)
{
    bool pe = x->etag && *x->etag, pl = x->lm && *x->lm;
    /* An ETag that cannot be the pinned one (another, or unusable) is a
     * change; its absence says nothing. */
    if (pe && x->etag_raw[0] && strcmp(x->etag_got, x->etag) != 0)
        return moved(diag, url, at, "ETag", x->etag_raw, x->etag);
    if (pe && x->etag_raw[0])
        return 0;
    if (pl && x->lm_got[0] && strcmp(x->lm_got, x->lm) != 0)
        return moved(diag, url, at, "Last-Modified", x->lm_got, x->lm);
    if (pl && x->lm_got[0])
        return 0;
    if (x->ranged && !x->first)
        c->st.unconfirmed++;
    return 0;
}

/* A 2xx to an object's first GET (bytes 0 to len - 1, nothing pinned):
 * 0 with x->size its size, or 1 (retry, `why` said). A 200 is the whole
 * object, taken when it fits in the range asked (a store that ignores
 * Range on a small object); a larger one overflowed the range and was
 * retried before this. A 206 must start at 0, end where the object or the
 * range does, and say the total, which becomes the size every later
 * answer is held to. */
static int judge_first(xfer *x, long st, char *why, size_t wn)
{
    unsigned long long last = (unsigned long long)(x->len - 1);
    if (st == 200 && x->have_clen && x->clen != x->got) {
        snprintf(why, wn, "a short body: %llu of %llu bytes", (unsigned long long)x->got,
                 (unsigned long long)x->clen);
        return 1;
    }
    if (st == 200) {
        x->size = x->got;
        return 0;
    }
    uint64_t a, b, total;
    char crp[128];
    pinio__s3_printable(crp, sizeof(crp), x->cr, strlen(x->cr));
    if (st != 206 || !x->have_cr || !pinio__s3_content_range(x->cr, &a, &b, &total) ||
        total == UINT64_MAX) {
        snprintf(why, wn, "a %ld answer to bytes 0-%llu %s%s", st, last,
                 !x->have_cr ? "without Content-Range" : "with the Content-Range ",
                 x->have_cr ? crp : "");
        return 1;
    }
    uint64_t want = total < x->len ? total : x->len;
    if (a != 0 || b != want - 1) {
        snprintf(why, wn, "Content-Range %s answers bytes 0-%llu", crp, last);
        return 1;
    }
    if (x->got != want) {
        snprintf(why, wn, "a short body: %llu of %llu bytes", (unsigned long long)x->got,
                 (unsigned long long)want);
        return 1;
    }
    x->size = total;
    return 0;
}

/* Whether an answer to the first GET says the object is empty. Bytes 0 on
 * are past the end of an empty object only (RFC 9110): a 416, unless its
 * Content-Range gives another total. s3rver answers a 206 of "bytes
 * 0-0/0" instead, announcing a byte it never sends: a total of 0 with no
 * byte is the same answer. Its opener refuses the object of 0 bytes as a
 * file's header parser would, naming it. */
static bool says_empty(const xfer *x)
{
    const char *sl = x->have_cr ? strrchr(x->cr, '/') : NULL;
    bool zero = sl && strcmp(sl, "/0") == 0;
    return x->status == 416 ? !x->have_cr || zero : x->status == 206 && zero && !x->got;
}

/* What the finished attempt means: 0 accepted; 1 retry; < 0 the error
 * (diag filled). `why` gets the reason of a retry. */
static int judge(pinio__s3 *c, xfer *x, CURLcode cc, char *why, size_t wn, pinio_diag *diag)
{
    char url[1200];
    pinio__s3_url_format(url, sizeof(url), x->bucket, x->key);
    uint64_t at = x->ranged ? x->off : PINIO_DIAG_NO_OFFSET;
    char code[64];
    error_code(x, code, sizeof(code));
    /* Ours past HEADER_MAX; libcurl's own limit on one line, before our
     * callback sees it, reads "Out of memory" (7.x) or "too large" (8.x). */
    if (x->hdr_big || (cc != CURLE_OK && !x->hdr_end && CURL_TOO_LARGE(cc))) {
        if (x->hdr_big)
            pinio_diag_set_at(diag, -EPROTO, url, at,
                              "response header larger than %zu bytes from %s: refused (%s)",
                              HEADER_MAX, pinio__s3_endpoint(c), x->method);
        else
            pinio_diag_set_at(diag, -EPROTO, url, at,
                              "response header larger than libcurl accepts from %s: "
                              "refused (%s)", pinio__s3_endpoint(c), x->method);
        return -EPROTO;
    }
    if (x->first && says_empty(x)) {
        x->size = 0;
        return 0;
    }
    if (cc != CURLE_OK) {
        if (x->overflow && x->ranged) {
            snprintf(why, wn, "the response to bytes %llu-%llu is longer than the range",
                     (unsigned long long)x->off, (unsigned long long)(x->off + x->len - 1));
            return 1;
        }
        if (x->overflow) {
            pinio_diag_set_at(diag, -EFBIG, url, at, "larger than %zu bytes: refused", x->max);
            return -EFBIG;
        }
        switch (cc) {
        case CURLE_OPERATION_TIMEDOUT:
        case CURLE_RECV_ERROR:
        case CURLE_SEND_ERROR:
        case CURLE_COULDNT_CONNECT:
        case CURLE_PARTIAL_FILE:
        case CURLE_GOT_NOTHING:
        case CURLE_HTTP2:
        case CURLE_HTTP2_STREAM:
        case CURLE_SSL_CONNECT_ERROR:
            snprintf(why, wn, "%s", curl_easy_strerror(cc));
            return 1;
        default:
            pinio_diag_set_at(diag, -EIO, url, at, "%s (%s)", curl_easy_strerror(cc),
                              x->method);
            return -EIO;
        }
    }
    long st = x->status;
    /* A bucket in another region (S3's 301 PermanentRedirect, 400
     * AuthorizationHeaderMalformed, 307 while DNS settles; a HEAD says it
     * in the header alone): retried once in the region the store names,
     * remembered for the bucket, as botocore's S3RegionRedirector does. */
    const char *used = pinio__s3_cfg_region(cfg_for(c, x->bucket));
    if ((st == 301 || st == 307 || st == 400) && x->bregion[0] && strcmp(x->bregion, used) != 0) {
        if (x->redirected[0]) {
            pinio_diag_set_at(diag, -EIO, url, at, "%s failed: HTTP %ld%s%s: the store sends "
                              "region %s to region %s, where it sent %s before", x->method, st,
                              code[0] ? " " : "", code, used, x->bregion, x->redirected);
            return -EIO;
        }
        snprintf(x->redirected, sizeof(x->redirected), "%s", used);
        if (remember_region(c, x->bucket, x->bregion) < 0) {
            pinio_diag_set_at(diag, -EPROTO, url, at, "HTTP %ld: the store names region '%s' "
                              "for the bucket, which is no region name", st, x->bregion);
            return -EPROTO;
        }
        snprintf(why, wn, "HTTP %ld: the bucket is in %s, not %s", st, x->bregion, used);
        return 1;
    }
    char where[160] = "";
    if (x->redirected[0])
        snprintf(where, sizeof(where), " (in region %s, where the store redirected from %s)",
                 used, x->redirected);
    if (st >= 200 && st <= 299) {
        int v = version_check(c, x, url, at, diag);
        if (v < 0 || !x->ranged)
            return v;
        if (x->first)
            return judge_first(x, st, why, wn);
        uint64_t a, b, total;
        char crp[128];
        pinio__s3_printable(crp, sizeof(crp), x->cr, strlen(x->cr));
        if (st != 206 || !x->have_cr || !pinio__s3_content_range(x->cr, &a, &b, &total)) {
            snprintf(why, wn, "a %ld answer to bytes %llu-%llu %s", st,
                     (unsigned long long)x->off, (unsigned long long)(x->off + x->len - 1),
                     x->have_cr ? "with an unreadable Content-Range" : "without Content-Range");
            return 1;
        }
        if (total != UINT64_MAX && total != x->size)
            return changed(diag, url, at, "%llu bytes, was %llu", (unsigned long long)total,
                           (unsigned long long)x->size);
        if (a != x->off || b != x->off + x->len - 1) {
            snprintf(why, wn, "Content-Range %s answers bytes %llu-%llu", crp,
                     (unsigned long long)x->off, (unsigned long long)(x->off + x->len - 1));
            return 1;
        }
        if (x->got != x->len) {
            snprintf(why, wn, "a short body: %llu of %llu bytes", (unsigned long long)x->got,
                     (unsigned long long)x->len);
            return 1;
        }
        return 0;
    }
    if (st == 412 || st == 304) {
        char e[160];
        const char *pin = x->etag && *x->etag ? x->etag : x->lm ? x->lm : "?";
        return changed(diag, url, at, "HTTP %ld: its %s is no longer %s", st,
                       x->etag && *x->etag ? "ETag" : "Last-Modified",
                       pinio__s3_printable(e, sizeof(e), pin, strlen(pin)));
    }
    if (st == 416 && x->first) {
        char crp[128];
        snprintf(why, wn, "HTTP 416 to bytes 0-%llu with the Content-Range %s",
                 (unsigned long long)(x->len - 1),
                 pinio__s3_printable(crp, sizeof(crp), x->cr, strlen(x->cr)));
        return 1;
    }
    if (st == 416)
        return changed(diag, url, at, "HTTP 416: bytes %llu-%llu are past its end now",
                       (unsigned long long)x->off, (unsigned long long)(x->off + x->len - 1));
    /* 408: a store that timed the request out (Cloud Storage lists it
     * among the answers to retry); it says nothing about the object. */
    if (st == 408 || st == 429 || st >= 500 || strcmp(code, "SlowDown") == 0 ||
        strcmp(code, "RequestTimeout") == 0 || strcmp(code, "InternalError") == 0 ||
        strcmp(code, "ServerBusy") == 0 || strcmp(code, "OperationTimedOut") == 0) {
        /* Counted apart: a store pushing back wants fewer requests in
         * flight, a reset or a 500 does not say so. */
        if (st == 429 || st == 503 || strcmp(code, "SlowDown") == 0 ||
            strcmp(code, "ServerBusy") == 0)
            c->st.throttled++;
        snprintf(why, wn, "HTTP %ld%s%s", st, code[0] ? " " : "", code);
        return 1;
    }
    if (st == 404) {
        bool bucket = strcmp(code, "NoSuchBucket") == 0;
        bool container = strcmp(code, "ContainerNotFound") == 0;
        /* A HEAD's 404 has no body to tell a missing bucket from a key. */
        pinio_diag_set_at(diag, -ENOENT, url, PINIO_DIAG_NO_OFFSET, "%s (404%s%s)",
                          bucket ? "no such bucket" : container ? "no such container"
                          : code[0] ? "no such object" : "no such object or bucket",
                          code[0] ? " " : "", code);
        return -ENOENT;
    }
    if (st == 403 && (pinio__az_bucket(x->bucket) || pinio__gcs_bucket(x->bucket))) {
        bool az = pinio__az_bucket(x->bucket);
        pinio_diag_set_at(diag, -EACCES, url, PINIO_DIAG_NO_OFFSET,
                          "access denied (403%s%s) with %s: check the credentials and the "
                          "%s's access", code[0] ? " " : "", code,
                          az ? pinio__az_cfg_auth(c->az) : pinio__gcs_cfg_auth(c->gcs),
                          az ? "container" : "bucket");
        return -EACCES;
    }
    if (st == 403) {
        pinio_diag_set_at(diag, -EACCES, url, PINIO_DIAG_NO_OFFSET,
                          "access denied (403%s%s)%s: check the credentials, the region and "
                          "the bucket's policy",
                          code[0] ? " " : "", code, where);
        return -EACCES;
    }
    pinio_diag_set_at(diag, -EIO, url, at, "%s failed: HTTP %ld%s%s%s", x->method, st,
                      code[0] ? " " : "", code, where);
    return -EIO;
}

/* The retry after `why`, or the end: -ETIMEDOUT / -EIO when the retries
 * ran out (in count or in time). */
static int retry_or_fail(pinio__s3 *c, xfer *x, const char *why, pinio_diag *diag)
{
    double now = pinio__now_s();
    double w = pinio__s3_backoff(&c->o, x->attempts - 1, x->retry_after, uniform(c));
    if (x->attempts > c->o.max_retries || now + w - x->t_first > c->o.retry_seconds) {
        char url[1200];
        pinio__s3_url_format(url, sizeof(url), x->bucket, x->key);
        bool slow = strstr(why, "timed out") || strstr(why, "Timeout");
        int rc = slow ? -ETIMEDOUT : -EIO;
        pinio_diag_set_at(diag, rc, url, x->ranged ? x->off : PINIO_DIAG_NO_OFFSET,
                          "%s failed after %u attempts in %.1f s: %s", x->method, x->attempts,
                          now - x->t_first, why);
        return rc;
    }
    c->st.retries++;
    c->st.retry_wait_s += w;
    x->not_before = now + w;
    x->state = X_WAIT;
    return 0;
}

/* ---- the queue: every transfer submitted and not finished ------------- */

static int queue_push(pinio__s3 *c, xfer *x, pinio_diag *diag)
{
    if (c->nq == c->qcap) {
        size_t cap = c->qcap ? c->qcap * 2 : 64;
        xfer **nq = realloc(c->q, cap * sizeof(*nq));
        if (!nq) {
            pinio_diag_set(diag, -ENOMEM, "s3: no memory for %zu requests", cap);
            return -ENOMEM;
        }
        c->q = nq;
        c->qcap = cap;
    }
    x->state = X_WAIT;
    c->q[c->nq++] = x;
    return 0;
}

/* Ends every transfer of the queue (the ones in flight are cut off) and
 * forgets the completions not yet polled: after a failure, nothing of the
 * queue is reported. */
static void queue_drop(pinio__s3 *c)
{
    for (size_t i = 0; i < c->nq; i++) {
        xfer *x = c->q[i];
        if (x->state == X_ACTIVE || x->h)
            attempt_end(c, x);
        x->state = X_DONE;
        if (x->owned)
            free(x);
    }
    c->nq = 0;
    c->active = 0;
    c->nfin = 0;
}

/* An accepted transfer is done: one of the stream's is recorded for
 * pinio__s3_poll() (and freed as it leaves the queue); a batch's stays
 * with its caller. */
static int accept_xfer(pinio__s3 *c, xfer *x, pinio_diag *diag)
{
    x->state = X_DONE;
    if (x->ranged)
        c->st.bytes += x->got;
    if (!x->owned)
        return 0;
    if (c->nfin == c->fincap) {
        size_t cap = c->fincap ? c->fincap * 2 : 64;
        pinio__s3_done *nf = realloc(c->fin, cap * sizeof(*nf));
        if (!nf) {
            pinio_diag_set(diag, -ENOMEM, "s3: no memory for %zu completions", cap);
            return -ENOMEM;
        }
        c->fin = nf;
        c->fincap = cap;
    }
    c->fin[c->nfin++] = (pinio__s3_done){ .tag = x->tag, .attempts = x->attempts };
    return 0;
}

/* One turn of the transfer loop: starts the waiting transfers whose time
 * has come (oldest first, up to the concurrency), lets curl move, and
 * judges every attempt that ended: accepted, retried later, or the failure
 * returned (diag filled, its index the transfer's tag). When none was
 * accepted it then waits, at most `wait_ms`, for the network or the next
 * retry's time. Returns the transfers accepted, or the failure. */
static int turn(pinio__s3 *c, double wait_ms, pinio_diag *diag)
{
    double now = pinio__now_s(), wake = HUGE_VAL;
    for (size_t i = 0; i < c->nq && c->active < c->o.concurrency; i++) {
        xfer *x = c->q[i];
        if (x->state != X_WAIT)
            continue;
        if (x->not_before <= now) {
            int rc = start(c, x, diag);
            if (rc < 0) {
                pinio_diag_set_index(diag, x->tag);
                return rc;
            }
            c->active++;
        } else if (x->not_before < wake) {
            wake = x->not_before;
        }
    }
    int running = 0;
    if (curl_multi_perform(c->multi, &running) != CURLM_OK) {
        pinio_diag_set(diag, -EIO, "libcurl's multi interface failed");
        return -EIO;
    }
    int accepted = 0, rc = 0;
    bool ended = false;
    CURLMsg *m;
    int left;
    while (rc == 0 && (m = curl_multi_info_read(c->multi, &left))) {
        if (m->msg != CURLMSG_DONE)
            continue;
        xfer *t = NULL;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&t);
        CURLcode cc = m->data.result;
        attempt_end(c, t);
        c->active--;
        char why[256] = "";
        int v = judge(c, t, cc, why, sizeof(why), diag);
        if (v == 1)
            v = retry_or_fail(c, t, why, diag);
        if (v == 0 && t->state == X_ACTIVE) {
            ended = true;
            v = accept_xfer(c, t, diag);
            accepted++;
        }
        if (v < 0) {
            pinio_diag_set_index(diag, t->tag);
            rc = v;
        }
    }
    if (rc < 0)
        return rc;
    if (ended) { /* the accepted ones leave the queue, in order */
        size_t k = 0;
        for (size_t i = 0; i < c->nq; i++) {
            xfer *x = c->q[i];
            if (x->state != X_DONE)
                c->q[k++] = x;
            else if (x->owned)
                free(x);
        }
        c->nq = k;
    }
    if (accepted || !(wait_ms > 0) || !c->nq)
        return accepted;
    double ms = c->stop && wait_ms > 100 ? 100 : wait_ms;
    if (wake != HUGE_VAL) {
        double d = (wake - pinio__now_s()) * 1000;
        ms = d < 0 ? 0 : d < ms ? d : ms;
    }
    if (c->active)
        curl_multi_poll(c->multi, NULL, 0, (int)ms, NULL);
    else if (ms > 0) {
        struct timespec ts = { .tv_sec = (time_t)(ms / 1000),
                               .tv_nsec = (long)fmod(ms, 1000) * 1000000L };
        nanosleep(&ts, NULL);
    }
    return 0;
}

/* Runs the transfers x[0 .. n) (the caller's) to the end of all of them,
 * or of the first failure. A stream's requests must not be pending: the
 * two would share the concurrency and the failure. */
static int run_locked(pinio__s3 *c, xfer *x, size_t n, pinio_diag *diag)
{
    if (c->nq) {
        pinio_diag_set(diag, -EBUSY, "s3: %zu streamed requests still pending", c->nq);
        return -EBUSY;
    }
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++)
        rc = queue_push(c, &x[i], diag);
    for (size_t done = 0; !rc && done < n;) {
        int k = stop_check(c, diag);
        if (k == 0)
            k = turn(c, 500, diag);
        if (k < 0)
            rc = k;
        else
            done += (size_t)k;
    }
    queue_drop(c);
    return rc;
}

static int run(pinio__s3 *c, xfer *x, size_t n, pinio_diag *diag)
{
    pthread_mutex_lock(&c->mu);
    int rc = run_locked(c, x, n, diag);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

int pinio__s3_get_ranges(pinio__s3 *c, pinio__s3_range *r, size_t n, pinio_diag *diag)
{
    if (!n)
        return 0;
    xfer *x = calloc(n, sizeof(*x));
    if (!x)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        x[i] = (xfer){ .method = "GET", .bucket = r[i].bucket, .key = r[i].key,
                       .etag = r[i].etag, .lm = r[i].last_modified, .ranged = true,
                       .off = r[i].off, .len = r[i].len,
                       .size = r[i].size, .dst = r[i].dst, .tag = r[i].tag };
    int rc = run(c, x, n, diag);
    free(x);
    return rc;
}

/* ---- a stream of ranged GETs ------------------------------------------ */

int pinio__s3_submit(pinio__s3 *c, const pinio__s3_range *r, pinio_diag *diag)
{
    xfer *x = calloc(1, sizeof(*x));
    if (!x) {
        pinio_diag_set(diag, -ENOMEM, "s3: no memory for a request");
        return -ENOMEM;
    }
    *x = (xfer){ .method = "GET", .bucket = r->bucket, .key = r->key, .etag = r->etag,
                 .lm = r->last_modified, .ranged = true, .off = r->off, .len = r->len,
                 .size = r->size, .dst = r->dst, .tag = r->tag, .owned = true };
    int rc = queue_push(c, x, diag);
    if (rc < 0) {
        free(x);
        return rc;
    }
    /* Started now when a slot is free, so that the request leaves with
     * the submission the caller times (curl sends it at the next poll). */
    if (c->active < c->o.concurrency) {
        rc = start(c, x, diag);
        if (rc < 0) {
            pinio_diag_set_index(diag, x->tag);
            queue_drop(c);
            return rc;
        }
        c->active++;
    }
    return 0;
}

int pinio__s3_poll(pinio__s3 *c, double timeout_s, pinio__s3_done *out, size_t max, size_t *n,
                   pinio_diag *diag)
{
    *n = 0;
    double end = pinio__now_s() + (timeout_s > 0 ? timeout_s : 0);
    while (!c->nfin && c->nq) {
        double left = (end - pinio__now_s()) * 1000;
        int rc = stop_check(c, diag);
        if (rc == 0)
            rc = turn(c, left > 0 ? left : 0, diag);
        if (rc < 0) {
            queue_drop(c);
            return rc;
        }
        if (!rc && !(left > 0))
            break;
    }
    size_t k = c->nfin < max ? c->nfin : max;
    if (k) { /* none yet: c->fin may still be NULL */
        memcpy(out, c->fin, k * sizeof(*out));
        memmove(c->fin, c->fin + k, (c->nfin - k) * sizeof(*c->fin));
        c->nfin -= k;
    }
    *n = k;
    return 0;
}

size_t pinio__s3_pending(const pinio__s3 *c)
{
    return c->nq + c->nfin;
}

void pinio__s3_drop(pinio__s3 *c)
{
    queue_drop(c);
}

int pinio__s3_stat(pinio__s3 *c, const char *bucket, const char *key, pinio__s3_meta *m,
                   pinio_diag *diag)
{
    memset(m, 0, sizeof(*m));
    xfer x = { .method = "HEAD", .bucket = bucket, .key = key };
    int rc = run(c, &x, 1, diag);
    if (rc == 0 && !x.have_clen) {
        char url[1200];
        pinio__s3_url_format(url, sizeof(url), bucket, key);
        pinio_diag_set_at(diag, -EPROTO, url, PINIO_DIAG_NO_OFFSET,
                          "HEAD answered without Content-Length");
        rc = -EPROTO;
    }
    if (rc == 0) {
        m->size = x.clen;
        snprintf(m->etag, sizeof(m->etag), "%s", x.etag_got);
        snprintf(m->last_modified, sizeof(m->last_modified), "%s", x.lm_got);
    }
    return rc;
}

int pinio__s3_first(pinio__s3 *c, const char *bucket, const char *key, void *dst,
                    uint64_t max, pinio__s3_meta *m, uint64_t *got, pinio_diag *diag)
{
    memset(m, 0, sizeof(*m));
    *got = 0;
    xfer x = { .method = "GET", .bucket = bucket, .key = key, .ranged = true, .first = true,
               .off = 0, .len = max, .dst = dst };
    if (!max) {
        pinio_diag_set(diag, -EINVAL, "s3: the first GET of %s/%s asks for no bytes", bucket, key);
        return -EINVAL;
    }
    int rc = run(c, &x, 1, diag);
    if (rc == 0) {
        m->size = x.size;
        *got = x.got;
        snprintf(m->etag, sizeof(m->etag), "%s", x.etag_got);
        snprintf(m->last_modified, sizeof(m->last_modified), "%s", x.lm_got);
    }
    return rc;
}

int pinio__s3_head(pinio__s3 *c, const char *bucket, const char *key, uint64_t *size,
                   char etag[128], pinio_diag *diag)
{
    pinio__s3_meta m;
    int rc = pinio__s3_stat(c, bucket, key, &m, diag);
    if (rc == 0) {
        *size = m.size;
        snprintf(etag, 128, "%s", m.etag);
    }
    return rc;
}

const char *pinio__s3_pinned_by(const pinio__s3_meta *m)
{
    return m->etag[0] ? "etag" : m->last_modified[0] ? "last-modified" : "size";
}

int pinio__s3_same(const char *url, const pinio__s3_meta *was, const pinio__s3_meta *now,
                   pinio_diag *diag)
{
    if (now->size != was->size)
        return changed(diag, url, PINIO_DIAG_NO_OFFSET, "%llu bytes, was %llu",
                       (unsigned long long)now->size, (unsigned long long)was->size);
    if (was->etag[0] && now->etag[0] && strcmp(was->etag, now->etag) != 0)
        return moved(diag, url, PINIO_DIAG_NO_OFFSET, "ETag", now->etag, was->etag);
    if (was->last_modified[0] && now->last_modified[0] &&
        strcmp(was->last_modified, now->last_modified) != 0)
        return moved(diag, url, PINIO_DIAG_NO_OFFSET, "Last-Modified", now->last_modified,
                     was->last_modified);
    return 0;
}

/* A whole-body GET (an index, a listing page). */
static int get_body(pinio__s3 *c, const char *bucket, const char *key,
                    const pinio__s3_param *q, size_t nq, size_t max, char **out, size_t *len,
                    char etag[128], pinio_diag *diag)
{
    xfer x = { .method = "GET", .bucket = bucket, .key = key, .query = q, .nquery = nq,
               .max = max };
    int rc = run(c, &x, 1, diag);
    if (rc == 0 && !x.body)
        x.body = calloc(1, 1);
    if (rc == 0 && !x.body)
        rc = -ENOMEM;
    if (rc < 0) {
        free(x.body);
        return rc;
    }
    *out = x.body;
    *len = x.blen;
    if (etag)
        snprintf(etag, 128, "%s", x.etag_got);
    return 0;
}

int pinio__s3_get_object(pinio__s3 *c, const char *bucket, const char *key, size_t max,
                         char **out, size_t *len, char etag[128], pinio_diag *diag)
{
    return get_body(c, bucket, key, NULL, 0, max, out, len, etag, diag);
}

int pinio__s3_get_listing(pinio__s3 *c, const char *bucket, const pinio__s3_param *q, size_t nq,
                          char **out, size_t *len, pinio_diag *diag)
{
    return get_body(c, bucket, "", q, nq, (size_t)64 << 20, out, len, NULL, diag);
}
