/* One small HTTP exchange for the credential sources (creds.c's STS, IMDS,
 * container endpoint; gcs_oauth.c's token endpoint and metadata server;
 * azure_config.c's workload-identity exchange): a fresh libcurl easy
 * handle, the answer's body kept up to a cap, no redirect followed. The
 * object client (client.c) has its own pooled handles; these exchanges
 * are a few per process, and a token must not ride a shared handle's
 * state. */
#ifndef PINIO_SRC_S3_FETCH_INTERNAL_H
#define PINIO_SRC_S3_FETCH_INTERNAL_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct pinio__s3_fetch_req {
    const char *url;
    /* NULL: POST when `body` is set, else GET. Given: that verb, with
     * `body` (an empty one when NULL and the verb is not GET). */
    const char *method;
    const char *body;              /* form or payload, NUL-terminated; NULL: none */
    struct curl_slist *headers;    /* NULL: none; stays the caller's */
    long connect_timeout_ms;       /* 0: libcurl's default */
    long timeout_ms;               /* 0: none */
    const char *cainfo, *capath;   /* NULL: libcurl's default trust store */
    size_t cap;                    /* the most body bytes kept */
} pinio__s3_fetch_req;

typedef struct pinio__s3_fetch_resp {
    long status; /* set when the exchange completed */
    char *body;  /* NUL-terminated; NULL when the answer had none */
    size_t len;
    bool big;    /* the answer passed `cap`: the transfer was stopped */
} pinio__s3_fetch_resp;

/* One exchange. Returns CURLE_OK with r->status set, or the transport's
 * failure, its text in `err` (libcurl's error buffer, else its code's
 * string; "out of memory" when no handle could be made). *r is reset first
 * and owns what it holds in either case: free it with
 * pinio__s3_fetch_resp_free. No message names the URL: the caller does,
 * without user info. */
CURLcode pinio__s3_fetch(const pinio__s3_fetch_req *q, pinio__s3_fetch_resp *r, char *err,
                         size_t errn);

/* Wipes the body (it may hold a token or a key) and frees it; *r reset. */
void pinio__s3_fetch_resp_free(pinio__s3_fetch_resp *r);

#endif
