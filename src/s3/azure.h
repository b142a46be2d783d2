/* Azure Blob Storage behind the object client (src/s3/client.c): az:// and
 * https://ACCOUNT.blob.core.windows.net/ URLs, the configuration the Azure
 * SDKs and CLI read (connection strings, account keys, SAS tokens, workload
 * identity), SharedKey signing and List Blobs. Library-internal.
 *
 * How an Azure object travels the loader unchanged: pinio__s3_url_split()
 * gives for an Azure URL a "bucket" that is the URL's container part, with
 * its scheme ("az://CONTAINER" or "https://ACCOUNT.blob.core.windows.net/
 * CONTAINER"), and the blob name as the key; pinio__s3_url_join() puts them
 * back. The client tells the dialect by the bucket (pinio__az_bucket()) and
 * signs, ranges and lists each request the store's way; every check,
 * retry, version pin and stop request is the S3 path's own.
 *
 * No function here prints; no message or diagnostic holds an account key,
 * a SAS token's signature or a bearer token. */
#ifndef PINIO_SRC_S3_AZURE_H
#define PINIO_SRC_S3_AZURE_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "pinio/common.h"
#include "src/s3/client.h"
#include "src/s3/sign.h"

/* The x-ms-version every request sends: Bearer tokens need 2017-11-09 or
 * later; this one Azurite and the public service both speak. */
#define PINIO__AZ_VERSION "2021-08-06"

/* ---- azure_url.c ------------------------------------------------------ */

/* Whether `s` is an Azure URL: "az://" or "https://ACCOUNT.blob.core.windows.net/". */
bool pinio__az_is_url(const char *s);

/* Whether a bucket from pinio__s3_url_split() is an Azure container. */
bool pinio__az_bucket(const char *bucket);

/* Splits an Azure URL into the bucket ("az://CONTAINER" or
 * "https://ACCOUNT.blob.core.windows.net/CONTAINER") and the blob name (""
 * when none), both malloc'ed. -EINVAL naming the URL for an empty or
 * malformed container (3-63 of a-z 0-9 '-', or "$root") or account
 * (3-24 of a-z 0-9); on failure both are NULL. */
int pinio__az_url_split(const char *url, char **bucket, char **key, pinio_diag *diag);

/* ---- azure_config.c --------------------------------------------------- */

typedef struct pinio__az_cfg pinio__az_cfg;

/**
 * Reads the Azure configuration from the environment, first found wins for
 * the credentials:
 *   AZURE_STORAGE_CONNECTION_STRING: AccountName, AccountKey,
 *     SharedAccessSignature, BlobEndpoint, DefaultEndpointsProtocol,
 *     EndpointSuffix, UseDevelopmentStorage=true (Azurite's well-known
 *     account at http://127.0.0.1:10000/devstoreaccount1); its endpoint
 *     holds even when it carries no credentials;
 *   AZURE_STORAGE_ACCOUNT with AZURE_STORAGE_KEY (SharedKey) or
 *     AZURE_STORAGE_SAS_TOKEN (SAS);
 *   AZURE_FEDERATED_TOKEN_FILE with AZURE_CLIENT_ID and AZURE_TENANT_ID
 *     (workload identity: the file's token exchanged at
 *     AZURE_AUTHORITY_HOST, default https://login.microsoftonline.com/, for
 *     a bearer token, fetched on the first request and again before it
 *     expires);
 *   else anonymous (public containers).
 * The endpoint: the connection string's, else https://ACCOUNT.blob.
 * core.windows.net. A malformed value is -EINVAL naming the variable (never
 * its value: it may hold a key); a half-configured workload identity is
 * -EINVAL naming the missing variable.
 * @param out receives it (free with pinio__az_cfg_free()); NULL on failure.
 */
int pinio__az_cfg_load(pinio__az_cfg **out, pinio_diag *diag);

/** Frees a configuration, its secrets wiped first. NULL-safe. */
void pinio__az_cfg_free(pinio__az_cfg *cfg);

/** The endpoint ("http://127.0.0.1:10000/devstoreaccount1", or
 *  "https://ACCOUNT.blob.core.windows.net"; "" before an account is known);
 *  owned by cfg, no secret. */
const char *pinio__az_cfg_endpoint(const pinio__az_cfg *cfg);

/** How requests are authorised, for a message: "SharedKey of account A
 *  (AZURE_STORAGE_CONNECTION_STRING)", "a SAS token (AZURE_STORAGE_SAS_TOKEN)",
 *  "a workload identity bearer token (AZURE_FEDERATED_TOKEN_FILE ...)" or
 *  "no credentials (anonymous)". Owned by cfg; no secret. */
const char *pinio__az_cfg_auth(const pinio__az_cfg *cfg);

/**
 * Builds one request for blob `key` of container `bucket` (a
 * pinio__az_bucket()), key "" for a container-level request (List Blobs):
 * the URL (the endpoint, the container, the blob name URI-encoded with '/'
 * kept, the query, a SAS token's parameters after it) and the header lines
 * x-ms-date, x-ms-version, the extras in order, and Authorization
 * (SharedKey or Bearer; none with a SAS or anonymous). A workload identity
 * fetches its bearer token here when it has none or it expires within five
 * minutes (a blocking request; the client calls this under its lock).
 * @param extra_headers "Name: value" lines; x-ms-* ones are signed as
 *        canonicalized headers, If-Match / If-Unmodified-Since in their
 *        places of the string to sign.
 * @param out filled on success (pinio__s3_req_free()); zeroed on failure.
 * @return 0; -EINVAL naming the URL (no account for az://, the https://
 *         form's account other than the configured one, a bad header);
 *         the token exchange's error; -ENOMEM.
 */
int pinio__az_sign(pinio__az_cfg *cfg, const char *method, const char *bucket, const char *key,
                   const pinio__s3_param *query, size_t nquery, const char *const *extra_headers,
                   size_t nextra, time_t now, pinio__s3_req *out, pinio_diag *diag);

/**
 * SharedKey's string to sign for the Blob service (version 2009-09-19 and
 * later), from the request's method, its header lines ("Name: value") and
 * its URL, for account `account`: the twelve standard headers' values in
 * order (Content-Length empty when 0), the x-ms-* headers lower-cased and
 * sorted, and the canonicalized resource "/ACCOUNT/PATH" with each query
 * parameter (lower-cased name, decoded value) sorted. malloc'ed, NULL when
 * out of memory. Exposed for the tests.
 */
char *pinio__az_string_to_sign(const char *method, const char *const *headers, size_t nheaders,
                               const char *url, const char *account);

/* ---- azure_list.c (the loop over pages is pinio__s3_list()'s) ---------- */

/* Parses one List Blobs page, appending to (*out, *n); `*next` receives the
 * NextMarker (malloc'ed) or NULL on the last page. PINIO_EFORMAT on a page
 * that is not one: not well-formed XML rooted at <EnumerationResults> and
 * closed, or without exactly one NextMarker element. */
int pinio__az_list_parse(const char *xml, size_t len, pinio__s3_entry **out, size_t *n,
                         char **next);

#endif
