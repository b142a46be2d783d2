/* The S3 client: s3:// URLs, and requests through libcurl's multi interface
 * (HEAD, ranged GETs into caller memory at a bounded concurrency, whole
 * small objects, ListObjectsV2 or List Blobs), each signed by
 * pinio__s3_sign() (or, for an Azure container, pinio__az_sign()), each
 * response checked, transient failures retried with backoff. A library-
 * internal interface of the s3 layer, used by the loader (src/load/object.c).
 *
 * Errors: negative errno or PINIO_E* with the diag naming s3://BUCKET/KEY;
 * never a credential. -ENOENT (404), -EACCES (403), PINIO_ECHANGED (the
 * object's version moved since it was first seen: 412 on If-Match or
 * If-Unmodified-Since, another ETag or Last-Modified, another total in
 * Content-Range, a 416; always "object changed while loading (...)"),
 * -ECANCELED (the caller's stop request, pinio__s3_set_stop()), -EPROTO (a
 * response that does not match its request, after the retries, or a
 * response header over 64 KiB), -ETIMEDOUT / -ECONNRESET / -EIO (the
 * retries ran out on a network failure or a 5xx). Text of the store's (an
 * ETag, an error code, a Content-Range) reaches a message only through
 * pinio__s3_printable().
 *
 * Threads: the batch calls (pinio__s3_stat, _head, _get_ranges,
 * _get_object, _get_listing), _set_concurrency and _get_stats may come from
 * several threads at once: they take turns on the client's connections. A
 * stream (_submit, _poll, _pending, _drop) is one thread's. */
#ifndef PINIO_SRC_S3_CLIENT_H
#define PINIO_SRC_S3_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinio/common.h"

/* ---- url.c ------------------------------------------------------------ */

/* Whether `s` is an object URL: "s3://", or Azure's (pinio__az_is_url()). */
bool pinio__s3_is_url(const char *s);

/* Splits "s3://BUCKET[/KEY]" into malloc'ed bucket and key ("" when none);
 * an Azure URL as pinio__az_url_split() does.
 * -EINVAL naming the URL when the bucket is empty or not a bucket name
 * (letters, digits, '.', '-', '_'; at most 255). The key is kept as written. */
int pinio__s3_url_split(const char *url, char **bucket, char **key, pinio_diag *diag);

/* url.c's and azure_url.c's last step: the bucket, bl bytes at `b`, and the
 * key after `slash` ("" when NULL), malloc'ed. 0 or -ENOMEM (both NULL). */
int pinio__s3_url_take(const char *b, size_t bl, const char *slash, char **bucket, char **key);

/* The writers' one refusal of an object URL (pinio_save, pinio_gen_write,
 * the file sink): 0 when `path` is not an s3:// URL; else -ENOTSUP, the diag
 * naming it and saying what is supported. Without it "s3://b/k" is a local
 * relative path ("s3:" folder): "no such file or directory", or worse, a
 * local file written where an upload was meant. */
int pinio__s3_refuse_write(const char *path, pinio_diag *diag);

/* "s3://BUCKET/KEY", malloc'ed (NULL: out of memory); an Azure bucket
 * (pinio__az_bucket(): the URL's part up to the container) joins as
 * "BUCKET/KEY", giving back the URL it was split from. */
char *pinio__s3_url_join(const char *bucket, const char *key);

/* pinio__s3_url_join() into `buf` (cut at `cap`), for a message. Returns buf. */
const char *pinio__s3_url_format(char *buf, size_t cap, const char *bucket, const char *key);

/* ---- client.c --------------------------------------------------------- */

typedef struct pinio__s3 pinio__s3;

/* Tuning; zero fields take the defaults. */
typedef struct pinio__s3_opts {
    unsigned concurrency;      /* requests in flight at most: 16 */
    unsigned max_retries;      /* retries of one request: AWS_MAX_ATTEMPTS - 1, else 10 */
    double retry_seconds;      /* time one request may spend retrying, in all: 120 */
    double backoff_base;       /* first backoff ceiling in seconds, doubling: 0.1 */
    double backoff_max;        /* backoff ceiling, and Retry-After's cap: 20 */
    long connect_timeout_s;    /* 10 */
    long stall_timeout_s;      /* no byte for this long: the request failed, retried: 30 */
} pinio__s3_opts;

/* Counters, summed over the client's life. */
typedef struct pinio__s3_stats {
    uint64_t requests;         /* HTTP requests sent, retries included */
    uint64_t retries;          /* of those, retries */
    uint64_t throttled;        /* answers that asked to slow down (429, 503, SlowDown,
                                  ServerBusy), whether retried or not: resets and
                                  other failures are retries, never throttles */
    uint64_t bytes;            /* body bytes received into caller memory */
    uint64_t unconfirmed;      /* ranged 2xx answers that could not confirm the pinned
                                  version (no ETag, no Last-Modified to compare) */
    double retry_wait_s;       /* time spent waiting to retry */
} pinio__s3_stats;

/* Reads the configuration (pinio__s3_cfg_load) and sets up curl. `opts`
 * NULL: defaults. On failure `*out` is NULL. */
int pinio__s3_open(pinio__s3 **out, const pinio__s3_opts *opts, pinio_diag *diag);
void pinio__s3_close(pinio__s3 *c);
/* Requests in flight at most from now on (>= 1). 0 or -ENOMEM. */
int pinio__s3_set_concurrency(pinio__s3 *c, unsigned n);
void pinio__s3_get_stats(const pinio__s3 *c, pinio__s3_stats *out);
/* The stop request of the call now running (NULL: none), polled before each
 * turn of the request loop and at least every 100 ms while it waits (for
 * the network or a retry's backoff): nonzero ends the call's requests with
 * -ECANCELED. Whoever sets it for a call clears it before returning: `ctx`
 * lives only as long as that call. */
void pinio__s3_set_stop(pinio__s3 *c, pinio_stop_fn stop, void *ctx);
/* The endpoint requests go to (scheme://host[:port]); never a secret. */
const char *pinio__s3_endpoint(const pinio__s3 *c);
/* The configuration the client read (owned by it), for a status report. */
const struct pinio__s3_cfg *pinio__s3_config(const pinio__s3 *c);

/* What identifies an object's version, from its first GET or a HEAD: its
 * size, and its
 * ETag (quotes kept, as If-Match wants it) and Last-Modified as sent, each
 * "" when the store sent none or one that cannot be sent back (cut at the
 * buffer, or bytes other than visible ASCII). */
typedef struct pinio__s3_meta {
    uint64_t size;
    char etag[128];
    char last_modified[64];
} pinio__s3_meta;

/* HEAD of the object into *m (zeroed on failure). */
int pinio__s3_stat(pinio__s3 *c, const char *bucket, const char *key, pinio__s3_meta *m,
                   pinio_diag *diag);

/* The GET that opens an object: bytes [0, max) (max >= 1) into dst,
 * nothing pinned yet, and what pins its version from then on into *m: the
 * size from Content-Range's total (from the body of a 200, a store that
 * sent the whole object because it fits in `max`), the ETag and
 * Last-Modified of that answer ("" when it had none). `*got` is the bytes
 * landed: min(max, size). An empty object (a 416 to bytes 0 on, or an
 * answer whose Content-Range total is 0) is size 0, got 0, for the caller
 * to refuse as a file of 0 bytes. A 206 of another
 * range, or without a total, a 200 larger than `max`, or a short body is
 * retried, as a ranged GET's. Why not a HEAD and then a GET: a round trip
 * less before any byte of data, and the header's bytes come with it.
 * On failure *m is zeroed, *got 0, dst's bytes undefined. */
int pinio__s3_first(pinio__s3 *c, const char *bucket, const char *key, void *dst,
                    uint64_t max, pinio__s3_meta *m, uint64_t *got, pinio_diag *diag);

/* HEAD: the object's size and ETag (pinio__s3_stat's). */
int pinio__s3_head(pinio__s3 *c, const char *bucket, const char *key, uint64_t *size,
                   char etag[128], pinio_diag *diag);

/* What pins the version `m` describes, as the report says it: "etag",
 * "last-modified" (and the size), or "size" alone (nothing else to check). */
const char *pinio__s3_pinned_by(const pinio__s3_meta *m);

/* 0 when `now` (a later HEAD of object `url`) can be the version `was`:
 * the same size, and the same ETag and Last-Modified where both have one.
 * Else PINIO_ECHANGED, the diag in the client's one message class. */
int pinio__s3_same(const char *url, const pinio__s3_meta *was, const pinio__s3_meta *now,
                   pinio_diag *diag);

/* Store-provided text `in` (n bytes) for a message, into `out` (cap bytes,
 * NUL-terminated): bytes outside printable ASCII, and '\', as \xNN, cut
 * with "..." when it does not fit. Returns `out`. */
const char *pinio__s3_printable(char *out, size_t cap, const char *in, size_t n);

/* Whether store-provided text `s` (UTF-8, NUL-terminated) holds no control
 * character (C0, DEL, or C1 as UTF-8 U+0080..U+009F: terminal commands) and
 * may become a name the loader prints as is (an object's key from a
 * listing, a shard name from an index object). */
bool pinio__s3_plain(const char *s);

/* One ranged GET: [off, off + len) of the object into dst. The object must
 * still have ETag `etag` (If-Match; each answer's ETag compared) or, with
 * no ETag, Last-Modified `last_modified` (If-Unmodified-Since; compared
 * likewise), and total size `size`. NULL or "": not pinned by it. */
typedef struct pinio__s3_range {
    const char *bucket, *key, *etag, *last_modified;
    uint64_t size;             /* the object's size as first seen */
    uint64_t off, len;         /* len >= 1, off + len <= size */
    void *dst;
    size_t tag;                /* the caller's: diag->index of a failure */
} pinio__s3_range;

/* Runs the ranges at the client's concurrency; each lands whole or the call
 * fails (a retried range is fetched again from its start). On failure the
 * ranges' memory may hold partial data; diag->index is the failing range's
 * tag. */
int pinio__s3_get_ranges(pinio__s3 *c, pinio__s3_range *r, size_t n, pinio_diag *diag);

/* A stream of ranged GETs, for a steady state of requests in flight (the
 * benchmark's): each range is submitted on its own and reported as it
 * completes, with the same checks, If-Match and retries as
 * pinio__s3_get_ranges() (a retried range is fetched again from its start,
 * its latency running on). The batch calls above and a stream do not mix:
 * with a stream's requests pending they fail with -EBUSY. */
typedef struct pinio__s3_done {
    size_t tag;                /* the range's */
    unsigned attempts;         /* 1 + its retries */
} pinio__s3_done;

/* Queues one range (copied; its bucket, key, etag and dst must stay valid
 * until it is reported or the stream dropped) and starts it at once when
 * fewer than the concurrency are in flight, else as soon as one ends.
 * -ENOMEM, or a failure to sign (the stream is then dropped). */
int pinio__s3_submit(pinio__s3 *c, const pinio__s3_range *r, pinio_diag *diag);

/* Waits up to `timeout_s` for completed ranges (none pending: returns at
 * once) and moves up to `max` of them into `out`, oldest first; `*n` says
 * how many (0: the time ran out). On the first failure of any range of the
 * stream (diag->index its tag) every pending range is dropped, none is
 * reported, and the failure is returned. */
int pinio__s3_poll(pinio__s3 *c, double timeout_s, pinio__s3_done *out, size_t max, size_t *n,
                   pinio_diag *diag);

/* Ranges submitted and not yet reported by pinio__s3_poll(). */
size_t pinio__s3_pending(const pinio__s3 *c);

/* Ends every range of the stream (those in flight are cut off), reporting
 * none of them. */
void pinio__s3_drop(pinio__s3 *c);

/* GET of a whole object of at most `max` bytes into a malloc'ed buffer
 * (NUL-terminated beyond *len). With `etag` non-NULL it receives the ETag. */
int pinio__s3_get_object(pinio__s3 *c, const char *bucket, const char *key, size_t max,
                         char **out, size_t *len, char etag[128], pinio_diag *diag);

/* A bucket-level GET with query parameters (a ListObjectsV2 page) into a
 * malloc'ed body of at most 64 MiB. */
typedef struct pinio__s3_param pinio__s3_param;
int pinio__s3_get_listing(pinio__s3 *c, const char *bucket, const pinio__s3_param *q, size_t nq,
                          char **out, size_t *len, pinio_diag *diag);

/* ---- list.c ----------------------------------------------------------- */

/* One object of a listing. */
typedef struct pinio__s3_entry {
    char *key;
    uint64_t size;
} pinio__s3_entry;

/* ListObjectsV2 of `prefix` with delimiter '/' (the objects directly under
 * the "folder", as a directory listing), every page followed. Keys in the
 * store's order (UTF-8 binary, as S3 sorts). Every failure names
 * s3://BUCKET/PREFIX: the request's errors; PINIO_EFORMAT for a page that
 * is not a complete, well-formed listing (cut short included); -EPROTO for
 * a continuation token given twice (a listing that would not end). On
 * failure `*out` is NULL and `*n` 0. */
int pinio__s3_list(pinio__s3 *c, const char *bucket, const char *prefix, pinio__s3_entry **out,
                   size_t *n, pinio_diag *diag);
void pinio__s3_entries_free(pinio__s3_entry *e, size_t n);

/* list.c, for the tests: parses one ListObjectsV2 response page, appending
 * to (*out, *n); `*next` receives the continuation token (malloc'ed) or
 * NULL on the last page. PINIO_EFORMAT on a response that is not one: not
 * well-formed XML rooted at <ListBucketResult> and closed, or without
 * exactly one IsTruncated of true or false. */
int pinio__s3_list_parse(const char *xml, size_t len, pinio__s3_entry **out, size_t *n,
                         char **next);

/* client.c, for the tests: the backoff before retry `attempt` (0-based),
 * full jitter under min(max, base * 2^attempt), `u` uniform in [0, 1). A
 * Retry-After of `retry_after` seconds (< 0: none) is waited at least, up
 * to `max`. */
double pinio__s3_backoff(const pinio__s3_opts *o, unsigned attempt, double retry_after, double u);

/* client.c, for the tests: parses "bytes A-B/TOTAL" ("*" total: UINT64_MAX). */
bool pinio__s3_content_range(const char *v, uint64_t *a, uint64_t *b, uint64_t *total);

#endif
