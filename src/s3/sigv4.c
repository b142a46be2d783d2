/*
 * AWS Signature Version 4 (AWS4-HMAC-SHA256), the bare algorithm with
 * libcrypto's HMAC-SHA256 and SHA-256: the canonical request, the string
 * to sign, the signing key and the signature (sign.h). No S3 and no
 * configuration here: S3 requests (sign.c) and STS calls (creds.c) both
 * sign through it, and it depends on neither.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "src/s3/sign.h"

static bool unreserved(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '.' || c == '_' || c == '~';
}

char *pinio__s3_uri_encode(const char *raw, size_t n, bool keep_slash)
{
    static const char hex[] = "0123456789ABCDEF";
    char *out = malloc(3 * n + 1), *o = out;
    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)raw[i];
        if (unreserved(c) || (keep_slash && c == '/')) {
            *o++ = (char)c;
        } else {
            *o++ = '%';
            *o++ = hex[c >> 4];
            *o++ = hex[c & 15];
        }
    }
    *o = '\0';
    return out;
}

static void hexify(const unsigned char *md, size_t n, char *out)
{
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 15];
    }
    out[2 * n] = '\0';
}

static int sha256_hex(const char *data, size_t n, char out[65])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned len = 0;
    if (!EVP_Digest(data, n, md, &len, EVP_sha256(), NULL) || len != 32)
        return -ENOMEM; /* libcrypto fails only when it cannot allocate */
    hexify(md, 32, out);
    return 0;
}

static int hmac(const unsigned char *key, size_t klen, const char *data, unsigned char out[32])
{
    unsigned len = 0;
    if (!HMAC(EVP_sha256(), key, (int)klen, (const unsigned char *)data, strlen(data), out, &len) ||
        len != 32)
        return -ENOMEM;
    return 0;
}

/* A header while canonicalising: lower-case name, value trimmed and its
 * blank runs folded to one space (botocore: ' '.join(value.split())). */
typedef struct hdr {
    char *name, *value;
    size_t order;
} hdr;

static int hdr_cmp(const void *a, const void *b)
{
    const hdr *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->order > y->order) - (x->order < y->order);
}

static bool blank(char c) { return c == ' ' || c == '\t' || c == '\f' || c == '\v'; }

static char *fold(const char *v)
{
    char *out = malloc(strlen(v) + 1), *o = out;
    if (!out)
        return NULL;
    for (const char *p = v; *p;) {
        while (blank(*p))
            p++;
        if (!*p)
            break;
        if (o != out)
            *o++ = ' ';
        while (*p && !blank(*p))
            *o++ = *p++;
    }
    *o = '\0';
    return out;
}

static bool token_char(unsigned char c)
{
    return unreserved(c) || (c && strchr("!#$%&'*+^`|", c));
}

typedef struct qpair {
    char *name, *value;
} qpair;

static int qpair_cmp(const void *a, const void *b)
{
    const qpair *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : strcmp(x->value, y->value);
}

/* The canonical query string: names and values encoded, sorted by name then value. */
static int canonical_query(const pinio__s3_param *q, size_t n, FILE *out)
{
    qpair *p = calloc(n ? n : 1, sizeof(*p));
    int rc = p ? 0 : -ENOMEM;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        p[i].name = pinio__s3_uri_encode(q[i].name, strlen(q[i].name), false);
        p[i].value = pinio__s3_uri_encode(q[i].value, strlen(q[i].value), false);
        if (!p[i].name || !p[i].value)
            rc = -ENOMEM;
    }
    if (rc == 0) {
        qsort(p, n, sizeof(*p), qpair_cmp);
        for (size_t i = 0; i < n; i++)
            fprintf(out, "%s%s=%s", i ? "&" : "", p[i].name, p[i].value);
    }
    for (size_t i = 0; p && i < n; i++) {
        free(p[i].name);
        free(p[i].value);
    }
    free(p);
    return rc;
}

static bool has_crlf(const char *s) { return strpbrk(s, "\r\n") != NULL; }

static int check_in(const pinio__sigv4_in *in, pinio_diag *diag)
{
    const char *missing = !in->method         ? "method"
                          : !in->path         ? "path"
                          : !in->payload_hash ? "payload_hash"
                          : !in->amz_date     ? "amz_date"
                          : !in->region       ? "region"
                          : !in->service      ? "service"
                          : !in->access_key   ? "access_key"
                          : !in->secret_key   ? "secret_key"
                          : (in->nquery && !in->query) || (in->nheaders && !in->headers) ? "a list"
                                                                                          : NULL;
    if (missing) {
        pinio_diag_set(diag, -EINVAL, "SigV4: no %s given", missing);
        return -EINVAL;
    }
    size_t dl = strlen(in->amz_date);
    if (dl != 16 || in->amz_date[8] != 'T' || in->amz_date[15] != 'Z') {
        pinio_diag_set(diag, -EINVAL, "SigV4: the date is not YYYYMMDDTHHMMSSZ");
        return -EINVAL;
    }
    for (size_t i = 0; i < in->nquery; i++)
        if (!in->query[i].name || !*in->query[i].name || !in->query[i].value) {
            pinio_diag_set(diag, -EINVAL, "SigV4: query parameter %zu has no name or no value", i);
            return -EINVAL;
        }
    for (size_t i = 0; i < in->nheaders; i++) {
        const char *nm = in->headers[i].name, *v = in->headers[i].value;
        bool ok = nm && *nm && v && !has_crlf(v);
        for (const char *p = nm; ok && *p; p++)
            ok = token_char((unsigned char)*p);
        if (!ok) {
            pinio_diag_set(diag, -EINVAL, "SigV4: header %zu has no valid name, or a line break "
                           "in its value", i);
            return -EINVAL;
        }
    }
    if (has_crlf(in->method) || has_crlf(in->path) || strchr(in->access_key, '/')) {
        pinio_diag_set(diag, -EINVAL, "SigV4: a line break in the method or path, or a '/' in "
                       "the access key id");
        return -EINVAL;
    }
    return 0;
}

/* The canonical headers block and the signed-headers list. */
static int canonical_headers(const pinio__sigv4_in *in, FILE *out, char **signed_headers)
{
    size_t n = in->nheaders;
    hdr *h = calloc(n ? n : 1, sizeof(*h));
    int rc = h ? 0 : -ENOMEM;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        h[i].name = strdup(in->headers[i].name);
        h[i].value = fold(in->headers[i].value);
        h[i].order = i;
        if (!h[i].name || !h[i].value)
            rc = -ENOMEM;
        for (char *p = h[i].name; p && *p; p++)
            *p = (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
    }
    char *sh = NULL;
    size_t shlen = 0;
    FILE *shf = rc == 0 ? open_memstream(&sh, &shlen) : NULL;
    if (rc == 0 && !shf)
        rc = -ENOMEM;
    if (rc == 0) {
        /* Sorted by name, a repeated name's values joined with ',' in the order given. */
        qsort(h, n, sizeof(*h), hdr_cmp);
        for (size_t i = 0; i < n; i++) {
            bool first = i == 0 || strcmp(h[i].name, h[i - 1].name) != 0;
            bool last = i + 1 == n || strcmp(h[i].name, h[i + 1].name) != 0;
            if (first) {
                fprintf(out, "%s:", h[i].name);
                fprintf(shf, "%s%s", i ? ";" : "", h[i].name);
            }
            fprintf(out, "%s%s", first ? "" : ",", h[i].value);
            if (last)
                fputc('\n', out);
        }
    }
    if (shf && fclose(shf) != 0 && rc == 0)
        rc = -ENOMEM;
    if (rc == 0)
        *signed_headers = sh;
    else
        free(sh);
    for (size_t i = 0; h && i < n; i++) {
        free(h[i].name);
        free(h[i].value);
    }
    free(h);
    return rc;
}

static int signing_key(const pinio__sigv4_in *in, unsigned char key[32])
{
    size_t sl = strlen(in->secret_key);
    unsigned char *k0 = malloc(sl + 5);
    unsigned char a[32], b[32];
    char date[9];
    int rc = k0 ? 0 : -ENOMEM;
    memcpy(date, in->amz_date, 8);
    date[8] = '\0';
    if (rc == 0) {
        memcpy(k0, "AWS4", 4);
        memcpy(k0 + 4, in->secret_key, sl);
        rc = hmac(k0, sl + 4, date, a);
        OPENSSL_cleanse(k0, sl + 4);
        free(k0);
    }
    if (rc == 0)
        rc = hmac(a, 32, in->region, b);
    if (rc == 0)
        rc = hmac(b, 32, in->service, a);
    if (rc == 0)
        rc = hmac(a, 32, "aws4_request", key);
    OPENSSL_cleanse(a, sizeof(a));
    OPENSSL_cleanse(b, sizeof(b));
    return rc;
}

void pinio__sigv4_out_free(pinio__sigv4_out *out)
{
    if (!out)
        return;
    free(out->canonical_request);
    free(out->string_to_sign);
    free(out->signed_headers);
    free(out->authorization);
    memset(out, 0, sizeof(*out));
}

int pinio__sigv4(const pinio__sigv4_in *in, pinio__sigv4_out *out, pinio_diag *diag)
{
    memset(out, 0, sizeof(*out));
    int rc = check_in(in, diag);
    if (rc < 0)
        return rc;
    char *creq = NULL, *sts = NULL;
    size_t creq_len = 0, sts_len = 0;
    FILE *f = open_memstream(&creq, &creq_len);
    if (!f)
        goto nomem;
    fprintf(f, "%s\n%s\n", in->method, in->path);
    rc = canonical_query(in->query, in->nquery, f);
    if (rc == 0) {
        fputc('\n', f);
        rc = canonical_headers(in, f, &out->signed_headers);
    }
    if (rc == 0)
        fprintf(f, "\n%s\n%s", out->signed_headers, in->payload_hash);
    if (fclose(f) != 0 || rc < 0)
        goto nomem;
    out->canonical_request = creq;
    creq = NULL;

    char hash[65];
    if (sha256_hex(out->canonical_request, creq_len, hash) < 0)
        goto nomem;
    if (!(f = open_memstream(&sts, &sts_len)))
        goto nomem;
    fprintf(f, "AWS4-HMAC-SHA256\n%s\n%.8s/%s/%s/aws4_request\n%s", in->amz_date, in->amz_date,
            in->region, in->service, hash);
    if (fclose(f) != 0)
        goto nomem;
    out->string_to_sign = sts;
    sts = NULL;

    unsigned char key[32], sig[32];
    rc = signing_key(in, key);
    if (rc == 0)
        rc = hmac(key, 32, out->string_to_sign, sig);
    OPENSSL_cleanse(key, sizeof(key));
    if (rc < 0)
        goto nomem;
    hexify(sig, 32, out->signature);
    if (asprintf(&out->authorization,
                 "AWS4-HMAC-SHA256 Credential=%s/%.8s/%s/%s/aws4_request, SignedHeaders=%s, "
                 "Signature=%s",
                 in->access_key, in->amz_date, in->region, in->service, out->signed_headers,
                 out->signature) < 0) {
        out->authorization = NULL;
        goto nomem;
    }
    return 0;

nomem:
    free(creq);
    free(sts);
    pinio__sigv4_out_free(out);
    pinio_diag_set(diag, -ENOMEM, "SigV4: out of memory");
    return -ENOMEM;
}
