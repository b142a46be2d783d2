/* Google Cloud Storage: gs:// URLs, the configuration, and the requests.
 *
 * Why S3's signer builds GCS's requests: the XML API answers the S3
 * protocol for everything pinio sends (path-style HEAD and GET with Range,
 * If-Match, list-type=2), and an HMAC key signs the interoperable way,
 * AWS4-HMAC-SHA256 with the region "auto" and the service "s3" (Google's
 * "Signatures" and "Simple migration from Amazon S3" pages:
 * https://cloud.google.com/storage/docs/authentication/signatures). One
 * signer, already checked against botocore and the AWS vectors, cannot
 * drift from a second copy.
 *
 * Why the version pin is the ETag and not x-goog-generation: the client
 * pins S3 and Azure objects by If-Match on the ETag and checks the ETag of
 * every answer; the XML API honours If-Match on GET and HEAD, so a replaced
 * object is the same 412 / changed ETag, with no GCS-only path through the
 * client's checks. (An object rewritten with identical bytes keeps an MD5
 * ETag; it is then also the same bytes, so nothing mixes.) */
#include <errno.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "src/s3/client.h"
#include "src/s3/config_internal.h"
#include "src/s3/gcs.h"

#define GCS_DEFAULT_ENDPOINT "https://storage.googleapis.com"

struct pinio__gcs_cfg {
    /* A configuration of S3's shape for pinio__s3_sign(): GCS's endpoint,
     * path style, region "auto", the HMAC key as static credentials. */
    pinio__s3_cfg s3;
    pinio__gcs_sa *sa; /* a service account: requests go unsigned, with its bearer token */
    char auth_desc[320];
};

bool pinio__gcs_is_url(const char *s)
{
    return s && strncmp(s, "gs://", 5) == 0;
}

bool pinio__gcs_bucket(const char *bucket)
{
    return strncmp(bucket, "gs://", 5) == 0;
}

/* Google's rules, loosely: 3-222 of a-z 0-9 '-' '_' '.', a letter or digit
 * at each end. The store is the judge of the rest (63 per dotted part). */
static bool bucket_ok(const char *b, size_t n)
{
    if (n < 3 || n > 222)
        return false;
    for (size_t i = 0; i < n; i++) {
        char ch = b[i];
        bool alnum = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');
        if (!alnum && ((i == 0 || i == n - 1) || (ch != '-' && ch != '_' && ch != '.')))
            return false;
    }
    return true;
}

int pinio__gcs_url_split(const char *url, char **bucket, char **key, pinio_diag *diag)
{
    *bucket = *key = NULL;
    if (!pinio__gcs_is_url(url)) {
        pinio_diag_set(diag, -EINVAL, "%s: not a gs:// URL", url ? url : "(null)");
        return -EINVAL;
    }
    const char *b = url + 5;
    size_t bl = strcspn(b, "/");
    if (bucket_ok(b, bl))
        return pinio__s3_url_take(url, 5 + bl, b[bl] ? b + bl : NULL, bucket, key);
    pinio_diag_set_at(diag, -EINVAL, url, PINIO_DIAG_NO_OFFSET,
                      "not gs://BUCKET/OBJECT: the bucket name %s", bl ? "is not one Cloud "
                      "Storage allows (3-222 of a-z, 0-9, '-', '_', '.', a letter or digit at "
                      "each end)" : "is empty");
    return -EINVAL;
}

static const char *env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

static int bad(pinio_diag *diag, int rc, const char *var, const char *why)
{
    pinio_diag_set(diag, rc, "%s: %s", var, why);
    return rc;
}

/* STORAGE_EMULATOR_HOST, or the default: scheme, host[:port], endpoint. */
static int set_endpoint(pinio__s3_cfg *s, const char *v, pinio_diag *diag)
{
    const char *scheme = "http", *rest = v;
    if (strncmp(v, "https://", 8) == 0) {
        scheme = "https";
        rest = v + 8;
    } else if (strncmp(v, "http://", 7) == 0) {
        rest = v + 7;
    } else if (strstr(v, "://")) {
        return bad(diag, -EINVAL, "STORAGE_EMULATOR_HOST", "not http://HOST[:PORT], "
                   "https://HOST[:PORT] or HOST:PORT");
    }
    size_t hl = strcspn(rest, "/");
    bool ok = hl > 0 && (rest[hl] == '\0' || strcmp(rest + hl, "/") == 0);
    for (size_t i = 0; ok && i < hl; i++) {
        char ch = rest[i];
        ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
             ch == '.' || ch == '-' || ch == ':' || ch == '[' || ch == ']';
    }
    if (!ok)
        return bad(diag, -EINVAL, "STORAGE_EMULATOR_HOST", "not http://HOST[:PORT], "
                   "https://HOST[:PORT] or HOST:PORT (no path, user info or query)");
    s->scheme = strdup(scheme);
    s->host = strndup(rest, hl);
    if (!s->scheme || !s->host || asprintf(&s->endpoint, "%s://%s", scheme, s->host) < 0) {
        s->endpoint = NULL;
        return -ENOMEM;
    }
    for (char *p = s->host; *p; p++)
        if (*p >= 'A' && *p <= 'Z')
            *p = (char)(*p - 'A' + 'a');
    return 0;
}

static int set_credentials(pinio__gcs_cfg *g, pinio_diag *diag)
{
    const char *id = env("GOOGLE_HMAC_ACCESS_ID"), *secret = env("GOOGLE_HMAC_SECRET");
    if (id || secret) {
        if (!id || !secret)
            return bad(diag, -EINVAL, id ? "GOOGLE_HMAC_SECRET" : "GOOGLE_HMAC_ACCESS_ID",
                       id ? "not set, but GOOGLE_HMAC_ACCESS_ID is: an HMAC key needs both"
                          : "not set, but GOOGLE_HMAC_SECRET is: an HMAC key needs both");
        size_t n = strlen(id);
        snprintf(g->auth_desc, sizeof(g->auth_desc), "an HMAC key (GOOGLE_HMAC_ACCESS_ID ...%s)",
                 id + (n > 4 ? n - 4 : 0));
        pinio__s3_creds_spec spec = { .kind = PINIO__S3_CREDS_STATIC,
                                      .source = "GOOGLE_HMAC_ACCESS_ID/GOOGLE_HMAC_SECRET",
                                      .access_key = id, .secret_key = secret };
        g->s3.source = strdup("GOOGLE_HMAC_ACCESS_ID");
        if (!g->s3.source)
            return -ENOMEM;
        return pinio__s3_creds_open(&g->s3.creds, &spec, diag);
    }
    g->s3.anonymous = true;
    const char *file = env("GOOGLE_APPLICATION_CREDENTIALS");
    if (file) {
        int rc = pinio__gcs_sa_load(file, &g->sa, diag);
        if (rc < 0)
            return rc;
        snprintf(g->auth_desc, sizeof(g->auth_desc), "service account %s's token "
                 "(GOOGLE_APPLICATION_CREDENTIALS)", pinio__gcs_sa_email(g->sa));
    } else {
        const char *mh = env("GCE_METADATA_HOST"), *skip = env("NO_GCE_CHECK");
        int rc = skip && strcasecmp(skip, "true") == 0 && !mh ? 1
                 : pinio__gcs_metadata(mh ? mh : "metadata.google.internal", mh != NULL,
                                       time(NULL), &g->sa, diag);
        if (rc < 0)
            return rc;
        snprintf(g->auth_desc, sizeof(g->auth_desc), "%s", rc == 0 ? "the GCE metadata "
                 "server's token" : "no credentials (anonymous)");
    }
    g->s3.source = strdup(file ? "GOOGLE_APPLICATION_CREDENTIALS" : g->sa ? "GCE metadata"
                                                                           : "none");
    return g->s3.source ? 0 : -ENOMEM;
}

int pinio__gcs_cfg_load(pinio__gcs_cfg **out, pinio_diag *diag)
{
    *out = NULL;
    pinio__gcs_cfg *g = calloc(1, sizeof(*g));
    if (!g)
        return -ENOMEM;
    const char *emu = env("STORAGE_EMULATOR_HOST");
    g->s3.addressing = PINIO__S3_ADDR_PATH;
    g->s3.region = strdup("auto");
    g->s3.base_path = strdup("");
    int rc = g->s3.region && g->s3.base_path ? 0 : -ENOMEM;
    if (rc == 0)
        rc = set_endpoint(&g->s3, emu ? emu : GCS_DEFAULT_ENDPOINT, diag);
    if (rc == 0)
        rc = set_credentials(g, diag);
    if (rc < 0) {
        if (rc == -ENOMEM)
            pinio_diag_set(diag, rc, "reading the Cloud Storage configuration: out of memory");
        pinio__gcs_cfg_free(g);
        return rc;
    }
    *out = g;
    return 0;
}

void pinio__gcs_cfg_free(pinio__gcs_cfg *g)
{
    if (!g)
        return;
    free(g->s3.region);
    free(g->s3.endpoint);
    free(g->s3.scheme);
    free(g->s3.host);
    free(g->s3.base_path);
    pinio__s3_creds_free(g->s3.creds);
    pinio__gcs_sa_free(g->sa);
    free(g->s3.source);
    OPENSSL_cleanse(g, sizeof(*g));
    free(g);
}

const char *pinio__gcs_cfg_endpoint(const pinio__gcs_cfg *g) { return g->s3.endpoint; }
const char *pinio__gcs_cfg_auth(const pinio__gcs_cfg *g) { return g->auth_desc; }

int pinio__gcs_sign(pinio__gcs_cfg *g, const char *method, const char *bucket, const char *key,
                    const pinio__s3_param *query, size_t nquery, const char *const *extra,
                    size_t nextra, time_t now, pinio__s3_req *out, pinio_diag *diag)
{
    const char *token = NULL;
    int rc = g->sa ? pinio__gcs_sa_token(g->sa, now, &token, diag) : 0;
    if (rc < 0) {
        memset(out, 0, sizeof(*out));
        return rc;
    }
    rc = pinio__s3_sign(&g->s3, method, bucket + 5, key, query, nquery, extra, nextra, now,
                        out, diag);
    if (rc == 0 && token) {
        /* The bearer token is no signature: a line after the unsigned request's own. */
        char **nh = realloc(out->headers, (out->nheaders + 1) * sizeof(*nh));
        if (nh)
            out->headers = nh;
        if (!nh || asprintf(&nh[out->nheaders], "Authorization: Bearer %s", token) < 0) {
            pinio__s3_req_free(out);
            return -ENOMEM;
        }
        out->nheaders++;
    }
    if (rc < 0 && diag) {
        /* The signer names s3://BUCKET/KEY; the user gave gs://. */
        char *u;
        if (asprintf(&u, "%s/%s", bucket, key) >= 0) {
            pinio_diag_relabel(diag, u);
            free(u);
        }
    }
    return rc;
}
