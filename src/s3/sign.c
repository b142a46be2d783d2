/*
 * AWS Signature Version 4 (AWS4-HMAC-SHA256) for S3, following botocore's
 * S3SigV4Auth where the specification leaves a choice: the path is signed
 * as sent (S3 neither normalises nor encodes it twice), every header sent
 * is signed but User-Agent, Expect and X-Amzn-Trace-Id (which proxies
 * rewrite), and a request without a body signs the empty payload's hash.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "src/s3/config_internal.h"
#include "src/s3/sign.h"

/* The character classes the requests are checked with (sigv4.c has the
 * algorithm's own). */
static bool unreserved(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '.' || c == '_' || c == '~';
}

static bool token_char(unsigned char c)
{
    return unreserved(c) || (c && strchr("!#$%&'*+^`|", c));
}

static bool blank(char c) { return c == ' ' || c == '\t' || c == '\f' || c == '\v'; }

static bool has_crlf(const char *s) { return strpbrk(s, "\r\n") != NULL; }

/* ---- S3 requests ---- */

/* A bucket that can be the first label of a host name: 3-63 of a-z 0-9 '-',
 * starting and ending with a letter or digit (dots break the TLS wildcard). */
static bool dns_bucket(const char *b)
{
    size_t n = strlen(b);
    if (n < 3 || n > 63 || b[0] == '-' || b[n - 1] == '-')
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((b[i] >= 'a' && b[i] <= 'z') || (b[i] >= '0' && b[i] <= '9') || b[i] == '-'))
            return false;
    return true;
}

static bool valid_bucket(const char *b)
{
    size_t n = strlen(b);
    if (n < 1 || n > 255)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!unreserved((unsigned char)b[i]) || b[i] == '~')
            return false;
    return true;
}

/* The headers the signer sets itself: a caller's copy would be signed twice. */
static bool reserved_header(const char *name, size_t n)
{
    const char *own[] = {"host", "authorization", "x-amz-date", "x-amz-content-sha256",
                         "x-amz-security-token"};
    for (size_t i = 0; i < sizeof(own) / sizeof(*own); i++)
        if (strlen(own[i]) == n && strncasecmp(name, own[i], n) == 0)
            return true;
    return false;
}

/* Sent but not signed, as botocore does: proxies and SDK layers rewrite them. */
static bool unsigned_header(const char *name)
{
    return strcasecmp(name, "user-agent") == 0 || strcasecmp(name, "expect") == 0 ||
           strcasecmp(name, "x-amzn-trace-id") == 0;
}

void pinio__s3_req_free(pinio__s3_req *req)
{
    if (!req)
        return;
    for (size_t i = 0; i < req->nheaders; i++) {
        /* The Authorization line is harmless alone, but x-amz-security-token is a credential. */
        explicit_bzero(req->headers[i], strlen(req->headers[i]));
        free(req->headers[i]);
    }
    free(req->headers);
    if (req->url) /* an Azure SAS token rides in the query */
        explicit_bzero(req->url, strlen(req->url));
    free(req->url);
    memset(req, 0, sizeof(*req));
}

static int push_header(pinio__s3_req *r, const char *name, const char *value)
{
    char *line;
    if (asprintf(&line, "%s: %s", name, value) < 0)
        return -ENOMEM;
    r->headers[r->nheaders++] = line;
    return 0;
}

/* The URL of BUCKET/KEY?QUERY (query in the caller's order) into r->url,
 * the Host into *host, the signed path into *path. */
static int build_url(const pinio__s3_cfg *c, const char *bucket, const char *key, bool virt,
                     const pinio__s3_param *q, size_t nq, pinio__s3_req *r, char **host, char **path)
{
    char *ekey = pinio__s3_uri_encode(key, strlen(key), true);
    if (!ekey)
        return -ENOMEM;
    int n;
    if (virt) {
        n = asprintf(host, "%s.%s", bucket, c->host);
        if (n >= 0 && (n = asprintf(path, "%s/%s", c->base_path, ekey)) < 0)
            *path = NULL;
    } else {
        n = asprintf(host, "%s", c->host);
        /* botocore's path-style bucket-level URL is "/BUCKET", no slash after. */
        if (n >= 0 && (n = asprintf(path, "%s/%s%s%s", c->base_path, bucket, *key ? "/" : "",
                                    ekey)) < 0)
            *path = NULL;
    }
    free(ekey);
    if (n < 0)
        return -ENOMEM;
    char *url = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&url, &len);
    if (!f)
        return -ENOMEM;
    fprintf(f, "%s://%s%s", c->scheme, *host, *path);
    int rc = 0;
    for (size_t i = 0; i < nq && rc == 0; i++) {
        char *en = pinio__s3_uri_encode(q[i].name, strlen(q[i].name), false);
        char *ev = pinio__s3_uri_encode(q[i].value, strlen(q[i].value), false);
        if (en && ev)
            fprintf(f, "%c%s=%s", i ? '&' : '?', en, ev);
        else
            rc = -ENOMEM;
        free(en);
        free(ev);
    }
    if (fclose(f) != 0 || rc < 0) {
        free(url);
        return -ENOMEM;
    }
    r->url = url;
    return 0;
}

static int s3_fail(pinio__s3_req *out, int rc, const char *bucket, const char *key,
                   pinio_diag *diag, const char *why)
{
    pinio__s3_req_free(out);
    pinio_diag_set(diag, rc, "s3://%s/%s: %s", bucket ? bucket : "?", key ? key : "", why);
    return rc;
}

int pinio__s3_sign(const pinio__s3_cfg *cfg, const char *method, const char *bucket,
                   const char *key, const pinio__s3_param *query, size_t nquery,
                   const char *const *extra_headers, size_t nextra, time_t now,
                   pinio__s3_req *out, pinio_diag *diag)
{
    memset(out, 0, sizeof(*out));
    if (!cfg || !method || !bucket || !key || (nquery && !query) || (nextra && !extra_headers))
        return s3_fail(out, -EINVAL, bucket, key, diag, "a request needs a configuration, "
                       "a method, a bucket and a key");
    bool ok = *method != '\0';
    for (const char *p = method; *p; p++)
        ok = ok && *p >= 'A' && *p <= 'Z';
    if (!ok)
        return s3_fail(out, -EINVAL, bucket, key, diag, "the method is not an upper-case word");
    if (!valid_bucket(bucket))
        return s3_fail(out, -EINVAL, bucket, key, diag,
                       "not a bucket name (1-255 of letters, digits, '.', '-', '_')");
    for (size_t i = 0; i < nquery; i++)
        if (!query[i].name || !*query[i].name || !query[i].value)
            return s3_fail(out, -EINVAL, bucket, key, diag, "a query parameter without a name "
                           "or a value");
    bool dns = dns_bucket(bucket);
    if (cfg->addressing == PINIO__S3_ADDR_VIRTUAL && !dns)
        return s3_fail(out, -EINVAL, bucket, key, diag, "virtual-hosted addressing needs a "
                       "bucket name that is a DNS label (a-z, 0-9, '-', no dots)");
    bool virt = cfg->addressing == PINIO__S3_ADDR_VIRTUAL ||
                (cfg->addressing == PINIO__S3_ADDR_AUTO && cfg->aws_host && dns);

    /* Host, x-amz-content-sha256, x-amz-date, x-amz-security-token, the extras, Authorization. */
    pinio__sigv4_header *sh = calloc(nextra + 4, sizeof(*sh));
    char **names = calloc(nextra ? nextra : 1, sizeof(*names));
    out->headers = calloc(nextra + 5, sizeof(*out->headers));
    char *host = NULL, *path = NULL;
    size_t nsigned = 0;
    int rc = sh && names && out->headers ? 0 : -ENOMEM;
    /* A copy of the keys as they are now: another thread may refresh them. */
    pinio__s3_keys keys = {0};
    if (rc == 0 && !cfg->anonymous && (rc = pinio__s3_cfg_keys(cfg, now, &keys, diag)) < 0) {
        free(sh);
        free(names);
        pinio__s3_req_free(out);
        return rc;
    }
    const char *why = "out of memory";
    for (size_t i = 0; rc == 0 && i < nextra; i++) {
        const char *line = extra_headers[i];
        size_t nl = line ? strcspn(line, ":") : 0;
        bool good = line && nl && line[nl] == ':' && !has_crlf(line);
        for (size_t k = 0; good && k < nl; k++)
            good = token_char((unsigned char)line[k]);
        if (!good) {
            rc = -EINVAL;
            why = "an extra header is not one \"Name: value\" line";
        } else if (reserved_header(line, nl)) {
            rc = -EINVAL;
            why = "an extra header is one the signer sets itself";
        } else if (!(names[i] = strndup(line, nl))) {
            rc = -ENOMEM;
        }
    }
    if (rc == 0)
        rc = build_url(cfg, bucket, key, virt, query, nquery, out, &host, &path);

    char amz_date[32];
    struct tm tm;
    if (rc == 0 && (!gmtime_r(&now, &tm) || tm.tm_year + 1900 > 9999 || tm.tm_year + 1900 < 1970)) {
        rc = -EINVAL;
        why = "the signing time is outside the years 1970-9999";
    }
    if (rc == 0) {
        strftime(amz_date, sizeof(amz_date), "%Y%m%dT%H%M%SZ", &tm);
        rc = push_header(out, "Host", host);
        sh[nsigned++] = (pinio__sigv4_header){"host", host};
    }
    if (rc == 0 && !cfg->anonymous) {
        sh[nsigned++] = (pinio__sigv4_header){"x-amz-content-sha256", PINIO__S3_EMPTY_SHA256};
        sh[nsigned++] = (pinio__sigv4_header){"x-amz-date", amz_date};
        rc = push_header(out, "x-amz-content-sha256", PINIO__S3_EMPTY_SHA256);
        if (rc == 0)
            rc = push_header(out, "x-amz-date", amz_date);
        if (rc == 0 && keys.session_token) {
            sh[nsigned++] = (pinio__sigv4_header){"x-amz-security-token", keys.session_token};
            rc = push_header(out, "x-amz-security-token", keys.session_token);
        }
    }
    for (size_t i = 0; rc == 0 && i < nextra; i++) {
        const char *v = extra_headers[i] + strlen(names[i]) + 1;
        while (blank(*v))
            v++;
        size_t vl = strlen(v);
        while (vl && blank(v[vl - 1]))
            vl--;
        char *line;
        if (asprintf(&line, "%s: %.*s", names[i], (int)vl, v) < 0) {
            rc = -ENOMEM;
            break;
        }
        out->headers[out->nheaders++] = line;
        if (!unsigned_header(names[i]))
            sh[nsigned++] = (pinio__sigv4_header){names[i], line + strlen(names[i]) + 2};
    }
    if (rc == 0 && !cfg->anonymous) {
        pinio__sigv4_in in = {
            .method = method, .path = path, .query = query, .nquery = nquery,
            .headers = sh, .nheaders = nsigned, .payload_hash = PINIO__S3_EMPTY_SHA256,
            .amz_date = amz_date, .region = cfg->region, .service = "s3",
            .access_key = keys.access_key, .secret_key = keys.secret_key,
        };
        pinio__sigv4_out sig;
        rc = pinio__sigv4(&in, &sig, NULL);
        if (rc == 0) {
            rc = push_header(out, "Authorization", sig.authorization);
            pinio__sigv4_out_free(&sig);
        } else if (rc == -EINVAL) {
            why = "the credentials cannot go into a header";
        }
    }
    pinio__s3_keys_clear(&keys);
    for (size_t i = 0; names && i < nextra; i++)
        free(names[i]);
    free(names);
    free(sh);
    free(host);
    free(path);
    if (rc < 0)
        return s3_fail(out, rc, bucket, key, diag, why);
    return 0;
}
