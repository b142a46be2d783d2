/* Azure requests: the URL (endpoint, container, blob), x-ms-date and
 * x-ms-version, and the authorisation: SharedKey (HMAC-SHA256 of the Blob
 * service's string to sign with the account key), a SAS token's query, a
 * bearer token, or nothing.
 *
 * Why the string to sign is built from the finished request (its header
 * lines and its URL) and not from the pieces that made them: what Azure
 * checks is what went on the wire, so signing that, exactly as the SDKs'
 * SharedKey policy does, leaves no room for the URL and the signature to
 * disagree on an encoding; and the tests compare it, request by request,
 * with the SDK's own.
 *
 * Why the date is formatted by hand: strftime's day and month names follow
 * the process's LC_TIME, which the application, not the library, chooses;
 * Azure wants the English ones. */
#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "src/s3/azure.h"
#include "src/s3/azure_internal.h"

/* RFC 1123 in GMT, C-locale names. */
static bool http_date(time_t now, char out[40])
{
    static const char *const day[] = { "Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat" };
    static const char *const mon[] = { "Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                       "Jul", "Aug", "Sep", "Oct", "Nov", "Dec" };
    struct tm tm;
    if (!gmtime_r(&now, &tm) || tm.tm_year + 1900 < 1970 || tm.tm_year + 1900 > 9999)
        return false;
    snprintf(out, 40, "%s, %02d %s %04d %02d:%02d:%02d GMT", day[tm.tm_wday], tm.tm_mday,
             mon[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
    return true;
}

static int hexval(char ch)
{
    return ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
         : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
}

/* %XX decoded (and '+' kept: Azure's own decoding keeps it). */
static char *pct_decode(const char *s, size_t n)
{
    char *o = malloc(n + 1);
    size_t w = 0;
    for (size_t i = 0; o && i < n; i++) {
        int a, b;
        if (s[i] == '%' && i + 2 < n &&
            (a = hexval(s[i + 1])) >= 0 && (b = hexval(s[i + 2])) >= 0) {
            o[w++] = (char)(a << 4 | b);
            i += 2;
        } else {
            o[w++] = s[i];
        }
    }
    if (o)
        o[w] = '\0';
    return o;
}

typedef struct kv {
    char *name, *value;
} kv;

static int kv_cmp(const void *a, const void *b)
{
    return strcmp(((const kv *)a)->name, ((const kv *)b)->name);
}

static void kv_free(kv *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++) {
        free(v[i].name);
        free(v[i].value);
    }
    free(v);
}

/* The value of header `name` among the lines, "" when absent. */
static const char *header_value(const char *const *h, size_t n, const char *name)
{
    size_t nl = strlen(name);
    for (size_t i = 0; i < n; i++)
        if (strncasecmp(h[i], name, nl) == 0 && h[i][nl] == ':') {
            const char *v = h[i] + nl + 1;
            while (*v == ' ')
                v++;
            return v;
        }
    return "";
}

char *pinio__az_string_to_sign(const char *method, const char *const *headers, size_t nheaders,
                               const char *url, const char *account)
{
    static const char *const std[] = { "Content-Encoding", "Content-Language", "Content-Length",
                                       "Content-MD5", "Content-Type", "Date",
                                       "If-Modified-Since", "If-Match", "If-None-Match",
                                       "If-Unmodified-Since", "Range" };
    char *out = NULL;
    size_t outlen = 0;
    FILE *f = open_memstream(&out, &outlen);
    if (!f)
        return NULL;
    kv *xs = calloc(nheaders ? nheaders : 1, sizeof(*xs)), *qs = NULL;
    size_t nx = 0, nqs = 0;
    bool ok = xs != NULL;
    fprintf(f, "%s\n", method);
    for (size_t i = 0; i < sizeof(std) / sizeof(*std); i++) {
        const char *v = header_value(headers, nheaders, std[i]);
        /* Version 2015-02-21 on: a zero Content-Length is signed as empty. */
        fprintf(f, "%s\n", strcmp(std[i], "Content-Length") == 0 && strcmp(v, "0") == 0 ? "" : v);
    }
    for (size_t i = 0; ok && i < nheaders; i++) {
        const char *colon = strchr(headers[i], ':');
        if (!colon || strncasecmp(headers[i], "x-ms-", 5) != 0)
            continue;
        const char *v = colon + 1;
        while (*v == ' ')
            v++;
        char *name = strndup(headers[i], (size_t)(colon - headers[i]));
        for (char *p = name; p && *p; p++)
            *p = (char)(*p >= 'A' && *p <= 'Z' ? *p | 0x20 : *p);
        xs[nx] = (kv){ name, strdup(v) };
        ok = xs[nx].name && xs[nx++].value;
    }
    if (ok)
        qsort(xs, nx, sizeof(*xs), kv_cmp);
    for (size_t i = 0; ok && i < nx; i++)
        fprintf(f, "%s:%s\n", xs[i].name, xs[i].value);
    /* The canonicalized resource: "/ACCOUNT" and the URL's path as sent. */
    const char *hs = strstr(url, "://"), *path = hs ? strchr(hs + 3, '/') : NULL;
    const char *q = path ? strchr(path, '?') : NULL;
    size_t pl = path ? (q ? (size_t)(q - path) : strlen(path)) : 0;
    fprintf(f, "/%s%.*s", account, (int)pl, path ? path : "");
    if (!path)
        fputc('/', f);
    for (const char *p = q ? q + 1 : NULL; ok && p && *p;) {
        const char *amp = strchr(p, '&'), *end = amp ? amp : p + strlen(p);
        const char *eq = memchr(p, '=', (size_t)(end - p));
        kv *nq = realloc(qs, (nqs + 1) * sizeof(*nq));
        ok = nq != NULL;
        if (!ok)
            break;
        qs = nq;
        qs[nqs].name = pct_decode(p, (size_t)((eq ? eq : end) - p));
        qs[nqs].value = eq ? pct_decode(eq + 1, (size_t)(end - eq - 1)) : strdup("");
        ok = qs[nqs].name && qs[nqs].value;
        for (char *c = qs[nqs].name; c && *c; c++)
            *c = (char)(*c >= 'A' && *c <= 'Z' ? *c | 0x20 : *c);
        nqs++;
        p = amp ? amp + 1 : NULL;
    }
    if (ok && nqs) /* none: qs is NULL, which qsort may not take */
        qsort(qs, nqs, sizeof(*qs), kv_cmp);
    /* A name given twice is one line, its values joined by ','. */
    for (size_t i = 0; ok && i < nqs; i++) {
        if (i && strcmp(qs[i].name, qs[i - 1].name) == 0)
            fprintf(f, ",%s", qs[i].value);
        else
            fprintf(f, "\n%s:%s", qs[i].name, qs[i].value);
    }
    kv_free(xs, nx);
    kv_free(qs, nqs);
    if (fclose(f) != 0 || !ok) {
        free(out);
        return NULL;
    }
    return out;
}

static int push(pinio__s3_req *r, char *line)
{
    if (!line)
        return -ENOMEM;
    r->headers[r->nheaders++] = line;
    return 0;
}

static char *line_of(const char *name, const char *value)
{
    char *l;
    return asprintf(&l, "%s: %s", name, value) < 0 ? NULL : l;
}

static int az_fail(pinio__s3_req *out, int rc, const char *bucket, const char *key,
                   pinio_diag *diag, const char *why)
{
    pinio__s3_req_free(out);
    if (why) {
        char url[1200];
        pinio_diag_set_at(diag, rc, pinio__s3_url_format(url, sizeof(url), bucket, key),
                          PINIO_DIAG_NO_OFFSET, "%s", why);
    }
    return rc;
}

/* The URL: endpoint/container[/blob]?query[&sas]. */
static char *build_url(const char *endpoint, const char *container, size_t cl, const char *key,
                       const pinio__s3_param *query, size_t nquery, const char *sas)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    if (!f)
        return NULL;
    char *ek = pinio__s3_uri_encode(key, strlen(key), true);
    bool ok = ek != NULL;
    fprintf(f, "%s/%.*s%s%s", endpoint, (int)cl, container, *key ? "/" : "", ek ? ek : "");
    free(ek);
    for (size_t i = 0; ok && i < nquery; i++) {
        char *n = pinio__s3_uri_encode(query[i].name, strlen(query[i].name), false);
        char *v = pinio__s3_uri_encode(query[i].value, strlen(query[i].value), false);
        ok = n && v;
        if (ok)
            fprintf(f, "%c%s=%s", i ? '&' : '?', n, v);
        free(n);
        free(v);
    }
    if (ok && sas)
        fprintf(f, "%c%s", nquery ? '&' : '?', sas);
    if (fclose(f) != 0 || !ok) {
        if (out)
            OPENSSL_cleanse(out, len);
        free(out);
        return NULL;
    }
    return out;
}

static bool header_ok(const char *line)
{
    size_t nl = strcspn(line, ":");
    if (!nl || line[nl] != ':' || strpbrk(line, "\r\n"))
        return false;
    return !(strncasecmp(line, "Authorization:", 14) == 0 || strncasecmp(line, "x-ms-date:", 10) == 0 ||
             strncasecmp(line, "x-ms-version:", 13) == 0);
}

int pinio__az_sign(pinio__az_cfg *cfg, const char *method, const char *bucket, const char *key,
                   const pinio__s3_param *query, size_t nquery, const char *const *extra_headers,
                   size_t nextra, time_t now, pinio__s3_req *out, pinio_diag *diag)
{
    memset(out, 0, sizeof(*out));
    /* The account and container the bucket names: az://C uses the
     * configured account; https://A.blob.core.windows.net/C names its own. */
    const char *account = cfg->account, *container;
    size_t al = account ? strlen(account) : 0;
    if (strncmp(bucket, "az://", 5) == 0) {
        container = bucket + 5;
        if (!account && !cfg->endpoint)
            return az_fail(out, -EINVAL, bucket, key, diag,
                           "az:// needs a storage account: set AZURE_STORAGE_CONNECTION_STRING "
                           "or AZURE_STORAGE_ACCOUNT, or write "
                           "https://ACCOUNT.blob.core.windows.net/CONTAINER/BLOB");
    } else {
        const char *a = bucket + 8, *dot = strchr(a, '.'), *slash = strchr(a, '/');
        if (!dot || !slash)
            return az_fail(out, -EINVAL, bucket, key, diag, "not an Azure URL");
        container = slash + 1;
        if (account && (al != (size_t)(dot - a) || strncmp(account, a, al) != 0)) {
            char why[200];
            snprintf(why, sizeof(why), "the URL's storage account is not %.40s, the one the "
                     "credentials are for (%s)", account, cfg->auth == AZ_ANON ?
                     "AZURE_STORAGE_ACCOUNT" : "AZURE_STORAGE_CONNECTION_STRING or "
                     "AZURE_STORAGE_ACCOUNT");
            return az_fail(out, -EINVAL, bucket, key, diag, why);
        }
        account = a;
        al = (size_t)(dot - a);
    }
    for (size_t i = 0; i < nextra; i++)
        if (!header_ok(extra_headers[i]))
            return az_fail(out, -EINVAL, bucket, key, diag, "an extra header is not one "
                           "\"Name: value\" line, or one the signer sets itself");
    char date[40];
    if (!http_date(now, date))
        return az_fail(out, -EINVAL, bucket, key, diag,
                       "the signing time is outside the years 1970-9999");
    if (cfg->auth == AZ_BEARER) {
        int rc = pinio__az_bearer(cfg, diag);
        if (rc < 0)
            return az_fail(out, rc, bucket, key, diag, NULL);
    }
    char *endpoint = account ? pinio__az_endpoint_for(cfg, account, al) : strdup(cfg->endpoint);
    char *acct = account ? strndup(account, al) : NULL;
    out->headers = calloc(nextra + 3, sizeof(*out->headers));
    int rc = endpoint && out->headers && (acct || !account) ? 0 : -ENOMEM;
    if (rc == 0 && !(out->url = build_url(endpoint, container, strlen(container), key, query,
                                          nquery, cfg->auth == AZ_SAS ? cfg->sas : NULL)))
        rc = -ENOMEM;
    if (rc == 0)
        rc = push(out, line_of("x-ms-date", date));
    if (rc == 0)
        rc = push(out, line_of("x-ms-version", PINIO__AZ_VERSION));
    for (size_t i = 0; rc == 0 && i < nextra; i++)
        rc = push(out, strdup(extra_headers[i]));
    if (rc == 0 && cfg->auth == AZ_BEARER) {
        char *l;
        rc = push(out, asprintf(&l, "Authorization: Bearer %s", cfg->bearer) < 0 ? NULL : l);
    } else if (rc == 0 && cfg->auth == AZ_KEY) {
        char *sts = pinio__az_string_to_sign(method, (const char *const *)out->headers,
                                             out->nheaders, out->url, acct);
        unsigned char mac[EVP_MAX_MD_SIZE];
        unsigned int ml = 0;
        char b64[EVP_MAX_MD_SIZE * 2], *l = NULL;
        if (!sts || !HMAC(EVP_sha256(), cfg->key, (int)cfg->keylen, (const unsigned char *)sts,
                          strlen(sts), mac, &ml))
            rc = -ENOMEM;
        if (rc == 0) {
            EVP_EncodeBlock((unsigned char *)b64, mac, (int)ml);
            rc = push(out, asprintf(&l, "Authorization: SharedKey %s:%s", acct, b64) < 0 ? NULL
                                                                                      : l);
        }
        OPENSSL_cleanse(mac, sizeof(mac));
        free(sts);
    }
    free(endpoint);
    free(acct);
    if (rc < 0)
        return az_fail(out, rc, bucket, key, diag, "out of memory");
    return 0;
}
