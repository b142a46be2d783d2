/* Google Cloud Storage behind the object client (src/s3/client.c): gs://
 * URLs, the XML API at https://storage.googleapis.com (path style), and
 * the credentials it takes. Library-internal.
 *
 * How a GCS object travels the loader unchanged: as Azure's do
 * (src/s3/azure.h), pinio__s3_url_split() gives a gs:// URL a "bucket"
 * that keeps its scheme ("gs://BUCKET") and the object name as the key, so
 * every (bucket, key) join gives the user's URL back and tells the client
 * the dialect. The XML API is S3's protocol for what pinio asks (HEAD,
 * ranged GET with Range, If-Match on the ETag, ListObjectsV2's
 * list-type=2 and its ListBucketResult), so a request is built by S3's own
 * signer (pinio__s3_sign()) on a configuration of GCS's: its endpoint, path
 * style, the signing region "auto".
 *
 * No function here prints; no message or diagnostic holds a secret. */
#ifndef PINIO_SRC_S3_GCS_H
#define PINIO_SRC_S3_GCS_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "pinio/common.h"
#include "src/s3/sign.h"

/* Whether `s` is a gs:// URL. */
bool pinio__gcs_is_url(const char *s);

/* Whether a bucket from pinio__s3_url_split() is a GCS bucket ("gs://NAME"). */
bool pinio__gcs_bucket(const char *bucket);

/* Splits "gs://BUCKET/OBJECT" into the bucket ("gs://BUCKET") and the
 * object name ("" when none), both malloc'ed. -EINVAL naming the URL for
 * an empty or malformed bucket name (3-222 of a-z 0-9 '-' '_' '.', a
 * letter or digit at each end); on failure both are NULL. */
int pinio__gcs_url_split(const char *url, char **bucket, char **key, pinio_diag *diag);

typedef struct pinio__gcs_cfg pinio__gcs_cfg;

/**
 * Reads the GCS configuration from the environment. The endpoint:
 * STORAGE_EMULATOR_HOST ("http://HOST:PORT", or "HOST:PORT" meaning http,
 * as Google's client libraries read it), else https://storage.googleapis.com.
 * The credentials, first found wins:
 *   GOOGLE_HMAC_ACCESS_ID with GOOGLE_HMAC_SECRET: an HMAC key (the XML
 *     API's interoperable signing: AWS4-HMAC-SHA256, region "auto");
 *   GOOGLE_APPLICATION_CREDENTIALS: a service account's JSON key file
 *     (pinio__gcs_sa_load()), its OAuth2 access token sent as
 *     "Authorization: Bearer" (pinio__gcs_sa_token());
 *   the GCE metadata server (GCE_METADATA_HOST, default
 *     metadata.google.internal; NO_GCE_CHECK=True skips it, as Google's
 *     libraries read it): its token when it answers within a second;
 *   else anonymous (public buckets).
 * A half HMAC pair is -EINVAL naming the missing variable; a malformed
 * endpoint is -EINVAL naming STORAGE_EMULATOR_HOST (never a value that may
 * hold a secret); a key file that cannot be read or used is
 * pinio__gcs_sa_load()'s error, naming GOOGLE_APPLICATION_CREDENTIALS.
 * @param out receives it (free with pinio__gcs_cfg_free()); NULL on failure.
 */
int pinio__gcs_cfg_load(pinio__gcs_cfg **out, pinio_diag *diag);

/** Frees a configuration, its secrets wiped first. NULL-safe. */
void pinio__gcs_cfg_free(pinio__gcs_cfg *cfg);

/** The endpoint, scheme://host[:port]; owned by cfg, no secret. */
const char *pinio__gcs_cfg_endpoint(const pinio__gcs_cfg *cfg);

/** How requests are authorised, for a message: "an HMAC key
 *  (GOOGLE_HMAC_ACCESS_ID ...1234)", "service account EMAIL's token
 *  (GOOGLE_APPLICATION_CREDENTIALS)" or "no credentials (anonymous)". Owned
 *  by cfg; never the secret, at most the access id's last 4 characters. */
const char *pinio__gcs_cfg_auth(const pinio__gcs_cfg *cfg);

/**
 * Builds one request for object `key` of `bucket` (a pinio__gcs_bucket()),
 * key "" for a bucket-level request (the listing): pinio__s3_sign()'s
 * request, path style at the endpoint, signed with the HMAC key or not at
 * all, or unsigned with "Authorization: Bearer" of the service account's
 * token last (fetched first when there is none or it expires within five
 * minutes: a blocking request; the client calls this under its lock).
 * Parameters and return as pinio__s3_sign()'s, the message naming the
 * gs:// URL; or the token exchange's error.
 */
int pinio__gcs_sign(pinio__gcs_cfg *cfg, const char *method, const char *bucket, const char *key,
                    const pinio__s3_param *query, size_t nquery, const char *const *extra_headers,
                    size_t nextra, time_t now, pinio__s3_req *out, pinio_diag *diag);

/* ---- gcs_oauth.c: a service account's token ---------------------------- */

typedef struct pinio__gcs_sa pinio__gcs_sa;

/**
 * Reads a service account's JSON key file ("type": "service_account",
 * client_email, private_key, token_uri; the last defaults to
 * https://oauth2.googleapis.com/token). Nothing is sent yet.
 * @param out receives it (pinio__gcs_sa_free()); NULL on failure.
 * @return 0; -errno (cannot open), -EFBIG (over 64 KiB), PINIO_EFORMAT
 *         (not a flat JSON object), -ENOTSUP (another "type"), -EINVAL (a
 *         member missing, a token_uri not http(s)), -ENOMEM; each message
 *         naming GOOGLE_APPLICATION_CREDENTIALS and the file, never the key.
 */
int pinio__gcs_sa_load(const char *path, pinio__gcs_sa **out, pinio_diag *diag);

/** Frees it, the key and the token wiped first. NULL-safe. */
void pinio__gcs_sa_free(pinio__gcs_sa *sa);

/** The account's client_email; owned by sa. */
const char *pinio__gcs_sa_email(const pinio__gcs_sa *sa);

/**
 * The access token to send at `now`: the one held while it lives five more
 * minutes, else a new one: a JWT ({"alg":"RS256","typ":"JWT"}; iss the
 * client_email, scope devstorage.read_only, aud the token_uri, iat now, exp
 * an hour on) signed with the private key, exchanged at the token_uri
 * (grant_type jwt-bearer). Not thread-safe: the caller serialises.
 * @param token receives the token, owned by sa until the next call.
 * @return 0; -EINVAL (no RSA key in the file), -EIO (unreachable), -EACCES
 *         (the endpoint refused: its HTTP status and error code named),
 *         -EPROTO (an answer without a token), -ENOMEM; the message names
 *         GOOGLE_APPLICATION_CREDENTIALS, the file and the endpoint.
 */
int pinio__gcs_sa_token(pinio__gcs_sa *sa, time_t now, const char **token, pinio_diag *diag);

/**
 * The GCE metadata server's token for the VM's default service account:
 * GET http://HOST/computeMetadata/v1/instance/service-accounts/default/token
 * with Metadata-Flavor: Google, one try, a one-second connect timeout; then
 * pinio__gcs_sa_token() fetches it again the same way before it expires.
 * @param host host[:port] (GCE_METADATA_HOST, else metadata.google.internal).
 * @param configured whether the user named it: then no answer is an error.
 * @param out receives it (pinio__gcs_sa_free()); NULL unless 0.
 * @return 0; 1 when not configured and nothing answered (not on GCE: the
 *         chain goes on); else pinio__gcs_sa_token()'s errors, the message
 *         naming the metadata server.
 */
int pinio__gcs_metadata(const char *host, bool configured, time_t now, pinio__gcs_sa **out,
                        pinio_diag *diag);

#endif
