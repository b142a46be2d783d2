/* A service account's OAuth2 access token for gs:// (RFC 7523's JWT bearer
 * grant, as Google's client libraries make it): the JSON key file named by
 * GOOGLE_APPLICATION_CREDENTIALS, a JWT signed RS256 with its private key
 * (libcrypto's EVP_DigestSign), exchanged at its token_uri for a bearer
 * token, fetched again five minutes before it expires.
 *
 * The key file and the token answer are flat objects of strings and
 * numbers, read by src/s3/'s own reader (jsonflat.c: src/s3/ sits below
 * src/st/'s parser).
 *
 * Secrets: the private key, the JWT and the access token are wiped when
 * freed and never formatted into a message; a message names the variable,
 * the file and the token endpoint, and the endpoint's own error code. */
#include <curl/curl.h>
#include <errno.h>
#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/s3/fetch_internal.h"
#include "src/s3/gcs.h"
#include "src/s3/jsonflat_internal.h"

#define SA_FILE_MAX ((size_t)64 << 10)
#define SA_SCOPE "https://www.googleapis.com/auth/devstorage.read_only"
#define SA_REFRESH_S 300

struct pinio__gcs_sa {
    char *path, *email, *key_pem, *token_uri;
    /* Names the source in messages: "GOOGLE_APPLICATION_CREDENTIALS: PATH"
     * or "the GCE metadata server ..."; no secret. */
    char *label;
    bool metadata; /* token_uri is the metadata server's: a GET, no JWT */
    char *token;
    time_t expiry;
};

static void wipe_free(char *s)
{
    if (s) {
        OPENSSL_cleanse(s, strlen(s));
        free(s);
    }
}

void pinio__gcs_sa_free(pinio__gcs_sa *sa)
{
    if (!sa)
        return;
    free(sa->path);
    free(sa->label);
    free(sa->email);
    wipe_free(sa->key_pem);
    free(sa->token_uri);
    wipe_free(sa->token);
    free(sa);
}

/* ---- a flat JSON object's string and number members --------------------- */

/* For each member named in names[] (at most 4), its value (a string, or a
 * number's or literal's text) into vals[] (malloc'ed). false: not one flat
 * JSON object of strings, numbers, booleans and nulls; nothing nested (no
 * key file or token answer has it). */
static bool jobject(const char *text, size_t len, const char *const *names, char **vals,
                    size_t n)
{
    pinio__s3_jfield f[4] = {{0}};
    for (size_t i = 0; i < n && i < 4; i++)
        f[i].name = names[i];
    if (n > 4 || pinio__s3_jflat(text, len, f, n, 0))
        return false;
    for (size_t i = 0; i < n; i++)
        vals[i] = f[i].val;
    return true;
}

/* ---- the key file -------------------------------------------------------- */

PINIO_PRINTF(3, 4)
static int sa_fail(pinio_diag *diag, int rc, const char *fmt, ...)
{
    char why[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    pinio_diag_set(diag, rc, "GOOGLE_APPLICATION_CREDENTIALS: %s", why);
    return rc;
}

int pinio__gcs_sa_load(const char *path, pinio__gcs_sa **out, pinio_diag *diag)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return sa_fail(diag, -errno, "cannot open %s: %s", path, strerror(errno));
    char *text = malloc(SA_FILE_MAX + 1);
    size_t len = text ? fread(text, 1, SA_FILE_MAX + 1, f) : 0;
    bool err = ferror(f);
    fclose(f);
    if (!text)
        return -ENOMEM;
    static const char *const names[] = { "type", "client_email", "private_key", "token_uri" };
    char *v[4] = {0};
    int rc = 0;
    if (err || len > SA_FILE_MAX)
        rc = sa_fail(diag, err ? -EIO : -EFBIG, "%s: %s", path,
                     err ? "read failed" : "larger than 64 KiB, not a service account key");
    else if (!jobject(text, len, names, v, 4))
        rc = sa_fail(diag, PINIO_EFORMAT, "%s: not a JSON object of strings (a service account "
                     "key file)", path);
    else if (!v[0] || strcmp(v[0], "service_account") != 0)
        rc = sa_fail(diag, -ENOTSUP, "%s: its \"type\" is not \"service_account\" (other "
                     "application default credentials are not supported for gs://)", path);
    else if (!v[1] || !v[2] || !*v[1] || !*v[2])
        rc = sa_fail(diag, -EINVAL, "%s: no %s", path, !v[1] || !*v[1] ? "client_email"
                     : "private_key");
    else if (v[3] && strncmp(v[3], "https://", 8) != 0 && strncmp(v[3], "http://", 7) != 0)
        rc = sa_fail(diag, -EINVAL, "%s: its token_uri is not an http(s):// URL", path);
    OPENSSL_cleanse(text, len);
    free(text);
    pinio__gcs_sa *sa = rc == 0 ? calloc(1, sizeof(*sa)) : NULL;
    if (sa) {
        sa->path = strdup(path);
        if (asprintf(&sa->label, "GOOGLE_APPLICATION_CREDENTIALS: %s", path) < 0)
            sa->label = NULL;
        sa->email = v[1];
        sa->key_pem = v[2];
        sa->token_uri = v[3] ? v[3] : strdup("https://oauth2.googleapis.com/token");
        v[1] = v[2] = v[3] = NULL;
    }
    free(v[0]);
    free(v[1]);
    wipe_free(v[2]);
    free(v[3]);
    if (rc == 0 && (!sa || !sa->path || !sa->label || !sa->token_uri)) {
        pinio__gcs_sa_free(sa);
        return -ENOMEM;
    }
    if (rc < 0)
        return rc;
    *out = sa;
    return 0;
}

const char *pinio__gcs_sa_email(const pinio__gcs_sa *sa) { return sa->email; }

/* ---- the JWT and the exchange -------------------------------------------- */

/* base64url without padding, appended to a malloc'ed string. */
static char *b64url(const unsigned char *in, size_t n)
{
    char *o = malloc(4 * ((n + 2) / 3) + 1);
    if (!o)
        return NULL;
    int w = EVP_EncodeBlock((unsigned char *)o, in, (int)n);
    while (w > 0 && o[w - 1] == '=')
        w--;
    o[w] = '\0';
    for (char *p = o; *p; p++)
        *p = *p == '+' ? '-' : *p == '/' ? '_' : *p;
    return o;
}

/* header.claims.signature, RS256 with the key file's private key. */
static int jwt_make(const pinio__gcs_sa *sa, time_t now, char **out, pinio_diag *diag)
{
    *out = NULL;
    static const char hdr[] = "{\"alg\":\"RS256\",\"typ\":\"JWT\"}";
    char *claims = NULL, *h = NULL, *c = NULL, *input = NULL, *sig64 = NULL;
    unsigned char *sig = NULL;
    size_t siglen = 0;
    int rc = -ENOMEM;
    if (asprintf(&claims, "{\"iss\":\"%s\",\"scope\":\"%s\",\"aud\":\"%s\",\"iat\":%lld,"
                 "\"exp\":%lld}", sa->email, SA_SCOPE, sa->token_uri, (long long)now,
                 (long long)now + 3600) < 0)
        return -ENOMEM;
    h = b64url((const unsigned char *)hdr, strlen(hdr));
    c = b64url((const unsigned char *)claims, strlen(claims));
    if (h && c && asprintf(&input, "%s.%s", h, c) < 0)
        input = NULL;
    BIO *bio = input ? BIO_new_mem_buf(sa->key_pem, -1) : NULL;
    EVP_PKEY *pk = bio ? PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL) : NULL;
    EVP_MD_CTX *md = pk ? EVP_MD_CTX_new() : NULL;
    if (input && bio && (!pk || EVP_PKEY_get_base_id(pk) != EVP_PKEY_RSA)) {
        rc = sa_fail(diag, -EINVAL, "%s: its private_key is not a PEM RSA private key",
                     sa->path);
    } else if (md && EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, pk) == 1 &&
               EVP_DigestSign(md, NULL, &siglen, (const unsigned char *)input,
                              strlen(input)) == 1 &&
               (sig = malloc(siglen)) &&
               EVP_DigestSign(md, sig, &siglen, (const unsigned char *)input,
                              strlen(input)) == 1 &&
               (sig64 = b64url(sig, siglen)) && asprintf(out, "%s.%s", input, sig64) >= 0) {
        rc = 0;
    } else if (md) {
        *out = NULL;
        rc = sa_fail(diag, -EIO, "%s: signing the token request (RS256) failed", sa->path);
    }
    EVP_MD_CTX_free(md);
    EVP_PKEY_free(pk);
    BIO_free(bio);
    free(claims);
    free(h);
    free(c);
    free(input);
    free(sig);
    free(sig64);
    return rc;
}

/* One exchange of a fresh JWT for an access token, or one GET of the
 * metadata server's. 1: the metadata server did not answer at all and
 * `probe` (not on GCE: the chain goes on). */
static int exchange(pinio__gcs_sa *sa, time_t now, bool probe, pinio_diag *diag)
{
    char *jwt = NULL, *form = NULL;
    int rc = sa->metadata ? 0 : jwt_make(sa, now, &jwt, diag);
    if (rc < 0)
        return rc;
    if (!sa->metadata &&
        asprintf(&form, "grant_type=urn%%3Aietf%%3Aparams%%3Aoauth%%3Agrant-type%%3Ajwt-bearer"
                 "&assertion=%s", jwt) < 0)
        form = NULL;
    wipe_free(jwt);
    struct curl_slist *hl = sa->metadata ? curl_slist_append(NULL, "Metadata-Flavor: Google")
                                         : NULL;
    if (!(form || sa->metadata) || (sa->metadata && !hl)) {
        wipe_free(form);
        return -ENOMEM;
    }
    /* The metadata server is on the host's own link: a machine where it
     * does not answer within a second is not on GCE (one try, as Google's
     * libraries' ping). */
    pinio__s3_fetch_req q = {
        .url = sa->token_uri,
        .body = form,
        .headers = hl,
        .connect_timeout_ms = sa->metadata ? 1000L : 10000L,
        .timeout_ms = sa->metadata ? 5000L : 30000L,
        .cap = SA_FILE_MAX,
    };
    pinio__s3_fetch_resp b;
    char ferr[CURL_ERROR_SIZE];
    CURLcode cc = pinio__s3_fetch(&q, &b, ferr, sizeof(ferr));
    long st = b.status;
    curl_slist_free_all(hl);
    wipe_free(form);
    if (cc == CURLE_OUT_OF_MEMORY) {
        pinio__s3_fetch_resp_free(&b);
        return -ENOMEM;
    }
    if (probe && (cc == CURLE_COULDNT_RESOLVE_HOST || cc == CURLE_COULDNT_CONNECT ||
                  cc == CURLE_OPERATION_TIMEDOUT)) {
        pinio__s3_fetch_resp_free(&b);
        return 1;
    }
    static const char *const names[] = { "access_token", "expires_in", "error" };
    char *v[3] = {0};
    bool parsed = cc == CURLE_OK && b.body && jobject(b.body, b.len, names, v, 3);
    long long expires = v[1] ? strtoll(v[1], NULL, 10) : 0;
    /* The endpoint's error code (invalid_grant, ...) goes into our message:
     * its own characters only, anything else shown as '?'. */
    char code[64] = "";
    for (size_t i = 0; v[2] && v[2][i] && i + 1 < sizeof(code); i++) {
        char ch = v[2][i];
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || ch == '_' || ch == '-' || ch == '.';
        code[i] = ok ? ch : '?';
        code[i + 1] = '\0';
    }
    rc = 0;
    if (cc != CURLE_OK)
        pinio_diag_set(diag, rc = -EIO, "%s: the token endpoint %s: %s", sa->label,
                       sa->token_uri, b.big ? "an answer larger than 64 KiB"
                                            : curl_easy_strerror(cc));
    else if (st != 200)
        pinio_diag_set(diag, rc = -EACCES, "%s: the token endpoint %s answered HTTP %ld%s%s",
                       sa->label, sa->token_uri, st, code[0] ? " " : "", code);
    else if (!parsed || !v[0] || !*v[0] || strpbrk(v[0], "\r\n") || expires <= 0)
        pinio_diag_set(diag, rc = -EPROTO, "%s: the token endpoint %s answered without an "
                       "access_token and a positive expires_in", sa->label, sa->token_uri);
    if (rc == 0) {
        wipe_free(sa->token);
        sa->token = v[0];
        v[0] = NULL;
        sa->expiry = now + (time_t)expires;
    }
    wipe_free(v[0]);
    free(v[1]);
    free(v[2]);
    pinio__s3_fetch_resp_free(&b);
    return rc;
}

int pinio__gcs_sa_token(pinio__gcs_sa *sa, time_t now, const char **token, pinio_diag *diag)
{
    *token = NULL;
    if (!sa->token || sa->expiry - now < SA_REFRESH_S) {
        int rc = exchange(sa, now, false, diag);
        if (rc < 0)
            return rc;
    }
    *token = sa->token;
    return 0;
}

int pinio__gcs_metadata(const char *host, bool configured, time_t now, pinio__gcs_sa **out,
                        pinio_diag *diag)
{
    *out = NULL;
    pinio__gcs_sa *sa = calloc(1, sizeof(*sa));
    if (!sa)
        return -ENOMEM;
    sa->metadata = true;
    if (asprintf(&sa->token_uri, "http://%s/computeMetadata/v1/instance/service-accounts/"
                 "default/token", host) < 0 ||
        asprintf(&sa->label, "the GCE metadata server%s", configured ? " (GCE_METADATA_HOST)"
                                                                     : "") < 0 ||
        !(sa->email = strdup("default"))) {
        pinio__gcs_sa_free(sa);
        return -ENOMEM;
    }
    int rc = exchange(sa, now, !configured, diag);
    if (rc != 0) {
        pinio__gcs_sa_free(sa);
        return rc;
    }
    *out = sa;
    return 0;
}
