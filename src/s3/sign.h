/*
 * AWS Signature Version 4 for S3, with libcrypto's HMAC-SHA256 and SHA-256
 * (no dependence on one libcurl version's signer), and the request it
 * signs: URL and header lines ready for an HTTP client.
 *
 * Library-internal (not installed). No function here prints; no message or
 * diagnostic contains a secret key.
 */
#ifndef PINIO_SRC_S3_SIGN_H
#define PINIO_SRC_S3_SIGN_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "pinio/common.h"
#include "src/s3/config.h"

/** The hex SHA-256 of an empty payload, what botocore's S3 signer sends as
 *  x-amz-content-sha256 for a request without a body. */
#define PINIO__S3_EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

/** One request, ready for an HTTP client. */
typedef struct pinio__s3_req {
    /** scheme://host[:port]/path?query: path and query URI-encoded as
     *  SigV4 signs them. The path is sent as is: an HTTP client must not
     *  normalise it (libcurl: CURLOPT_PATH_AS_IS), since S3 keys may hold
     *  "//", "./" and "../". */
    char *url;
    /** "Name: value" lines: Host, then (when signed) x-amz-content-sha256,
     *  x-amz-date, x-amz-security-token (with a session token), the extra
     *  headers in the order given, and Authorization last. An anonymous
     *  request carries Host and the extra headers only, as botocore's
     *  unsigned requests do. */
    char **headers;
    size_t nheaders;
} pinio__s3_req;

/** A query parameter, raw (unencoded): the signer encodes it. */
typedef struct pinio__s3_param {
    const char *name, *value;
} pinio__s3_param;

/**
 * Builds and signs (SigV4, service "s3", the empty-payload hash: these
 * requests have no body, and that is what botocore signs for them) a
 * request for BUCKET/KEY.
 *
 * Addressing: path-style (scheme://host/BUCKET/KEY) when the configuration
 * says "path", or under "auto" when the endpoint is not an amazonaws.com
 * host or the bucket is not a DNS label (3-63 of a-z 0-9 '-', no dots: a
 * dotted bucket breaks the TLS wildcard); virtual-hosted
 * (scheme://BUCKET.host/KEY) otherwise. "virtual" with a bucket that is no
 * DNS label is -EINVAL.
 *
 * @param method "GET", "HEAD", ... (upper case letters only).
 * @param bucket the bucket name: 1-255 of A-Z a-z 0-9 . - _ (what S3, legacy
 *        us-east-1 names included, allows).
 * @param key the object key, raw (any bytes but NUL; "" for a bucket-level
 *        request such as ListObjectsV2).
 * @param query parameters in the order they go in the URL (the canonical
 *        request sorts them); names non-empty, values may be "".
 * @param extra_headers "Name: value" lines ("Range: bytes=0-7",
 *        "If-Match: \"etag\""); no CR or LF, and none of the headers the
 *        signer sets (Host, Authorization, x-amz-date,
 *        x-amz-content-sha256, x-amz-security-token).
 * @param now the signing time.
 * @param out filled on success (free with pinio__s3_req_free()); zeroed on
 *        failure, when it owns nothing.
 * The keys are the configuration's at `now` (pinio__s3_cfg_keys()): keys
 * about to expire are fetched again first, so this may block on the
 * credential source; safe from several threads sharing one `cfg`.
 *
 * @return 0; -EINVAL (bad bucket, method, header, parameter, a time before
 *         1970 or after 9999) or -ENOMEM, with `diag` ("s3://BUCKET/KEY: why")
 *         naming the bucket and key, never a credential; or the credential
 *         source's failure to refresh, `diag` naming the source (creds.h).
 */
int pinio__s3_sign(const pinio__s3_cfg *cfg, const char *method, const char *bucket,
                   const char *key, const pinio__s3_param *query, size_t nquery,
                   const char *const *extra_headers, size_t nextra, time_t now,
                   pinio__s3_req *out, pinio_diag *diag);

/** Frees what a request owns and zeroes it. NULL-safe; a zeroed request is fine. */
void pinio__s3_req_free(pinio__s3_req *req);

/* ---- The bare algorithm, each step exposed for the AWS test vectors ---- */

/** A header as the bare signer takes it: name in any case, value raw
 *  (the signer trims it and folds runs of blanks, as SigV4 wants). */
typedef struct pinio__sigv4_header {
    const char *name, *value;
} pinio__sigv4_header;

/** What SigV4 signs. Every header given is signed (list Host among them). */
typedef struct pinio__sigv4_in {
    const char *method;
    /** The canonical URI exactly as signed (already URI-encoded; S3 signs
     *  the path as sent: no normalisation, no second encoding). */
    const char *path;
    const pinio__s3_param *query; /**< raw; encoded and sorted by the signer */
    size_t nquery;
    const pinio__sigv4_header *headers;
    size_t nheaders;
    const char *payload_hash; /**< hex SHA-256 of the body, or "UNSIGNED-PAYLOAD" */
    const char *amz_date;     /**< "YYYYMMDDTHHMMSSZ" */
    const char *region, *service;
    const char *access_key, *secret_key;
} pinio__sigv4_in;

/** Each step of a signature; every string owned by the struct. */
typedef struct pinio__sigv4_out {
    char *canonical_request;
    char *string_to_sign;
    char *signed_headers;   /**< "host;x-amz-date" */
    char signature[65];     /**< lower-case hex */
    char *authorization;    /**< the Authorization header's value */
} pinio__sigv4_out;

/**
 * Signs `in` (AWS4-HMAC-SHA256).
 * @param out filled on success (free with pinio__sigv4_out_free()); zeroed
 *        on failure.
 * @return 0; -EINVAL (a missing field, a header name that is empty or has
 *         a blank or colon, a value with CR/LF, a bad amz_date) or -ENOMEM.
 */
int pinio__sigv4(const pinio__sigv4_in *in, pinio__sigv4_out *out, pinio_diag *diag);

/** Frees a signature's strings and zeroes it. NULL-safe. */
void pinio__sigv4_out_free(pinio__sigv4_out *out);

/**
 * URI-encodes `n` bytes of `raw` the SigV4 way: A-Z a-z 0-9 - . _ ~ stay,
 * '/' stays when `keep_slash`, every other byte becomes %XX (upper-case hex).
 * @return a new string (caller frees), or NULL when out of memory.
 */
char *pinio__s3_uri_encode(const char *raw, size_t n, bool keep_slash);

#endif
