/* Google's V4 signing conformance vectors (tests/gcs/vectors/: see its
 * README for the source) against the signer gs:// uses with an HMAC key.
 *
 * Why only the canonical request and the string to sign: Google's vectors
 * are signed URLs made with a service account's RSA key
 * (GOOG4-RSA-SHA256), so their signatures cannot come from an HMAC key.
 * The steps before the signature are the same for both (Google's
 * "Signatures" page: one canonical request, one string to sign, only the
 * algorithm's name and the signing differ), and those are what a wrong
 * encoding, ordering or trimming would break. Each vector's query is
 * rebuilt as a signed URL's (X-Goog-Algorithm ... X-Goog-SignedHeaders,
 * then the vector's own parameters, raw: pinio encodes and sorts them), its
 * object name is encoded by pinio (pinio__s3_uri_encode(), as the client
 * does for every key), and its headers go in as given (pinio lower-cases,
 * trims, folds and sorts them). The string to sign is compared line by
 * line: the date, the scope and the canonical request's SHA-256 exactly,
 * the algorithm and the scope's last part as the HMAC form names them
 * (AWS4-HMAC-SHA256 ... aws4_request, the interoperable names pinio
 * sends). The HMAC itself is checked against AWS's suite in
 * tests/s3/test_vectors.c and against a second signer in gcsproxy.py. */
#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/evp.h>

#include "src/s3/sign.h"
#include "src/st/json_internal.h"

/* The signed URLs' account (their X-Goog-Credential's, as in each
 * expectedUrl): part of the query that is signed. */
#define SA_EMAIL "test-iam-credentials@dummy-project-id.iam.gserviceaccount.com"
#define MAXKV 16

typedef struct kv {
    char *k, *v;
} kv;

/* One signingV4Tests entry, the members this test uses. */
typedef struct vec {
    char *description, *bucket, *object, *method, *timestamp, *url, *creq, *sts;
    uint64_t expiration;
    kv headers[MAXKV], query[MAXKV];
    size_t nheaders, nquery;
} vec;

static char *decoded(const pinio__json_str *s)
{
    char *out = malloc(s->len + 1);
    cr_assert_not_null(out);
    pinio__json_str_decode(s, out);
    return out;
}

static char *str(pinio__json *j)
{
    pinio__json_str s;
    cr_assert_eq(pinio__json_string(j, &s), 0, "a string expected at %zu", j->pos);
    return decoded(&s);
}

static size_t object_of(pinio__json *j, kv *out)
{
    bool first = true;
    pinio__json_str key;
    size_t n = 0;
    cr_assert_eq(pinio__json_object_begin(j), 0);
    while (pinio__json_object_next(j, &first, &key) == 1) {
        cr_assert_lt(n, MAXKV);
        out[n].k = decoded(&key);
        out[n++].v = str(j);
    }
    return n;
}

static void vec_free(vec *v)
{
    char *s[] = {v->description, v->bucket, v->object, v->method, v->timestamp, v->url, v->creq,
                 v->sts};
    for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++)
        free(s[i]);
    for (size_t i = 0; i < v->nheaders; i++) {
        free(v->headers[i].k);
        free(v->headers[i].v);
    }
    for (size_t i = 0; i < v->nquery; i++) {
        free(v->query[i].k);
        free(v->query[i].v);
    }
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "%s", path);
    cr_assert_eq(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    cr_assert_gt(n, 0, "%s", path);
    rewind(f);
    char *buf = malloc((size_t)n);
    cr_assert_not_null(buf);
    cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n, "%s", path);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* "2019-02-01T09:00:00Z" -> "20190201T090000Z". */
static void amz_date(const char *ts, char out[17])
{
    cr_assert_eq(strlen(ts), 20, "timestamp %s", ts);
    snprintf(out, 17, "%.4s%.2s%.2sT%.2s%.2s%.2sZ", ts, ts + 5, ts + 8, ts + 11, ts + 14, ts + 17);
}

static void sha256_hex(const char *s, char out[65])
{
    unsigned char md[32];
    unsigned len = 0;
    cr_assert(EVP_Digest(s, strlen(s), md, &len, EVP_sha256(), NULL));
    for (unsigned i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
}

static int checked, refused;

/* RFC 9110's token: what an HTTP header's name may hold. */
static bool http_token(const char *s)
{
    for (; *s; s++)
        if (!strchr("!#$%&'*+-.^_`|~", *s) && !(*s >= '0' && *s <= '9') &&
            !(*s >= 'a' && *s <= 'z') && !(*s >= 'A' && *s <= 'Z'))
            return false;
    return true;
}

static void check(const vec *v)
{
    /* The path as sent (the URL's) and the Host as the vector signs it
     * (its canonical request's "host:" line). Where they come from is
     * endpoint choice, not signing: Google's libraries sign Host without a
     * port (localhost:8080 signed as "localhost"), while pinio signs the
     * Host it sends, port and all, as SigV4 wants and gcsproxy.py checks.
     * The path must be the object's name as pinio encodes it, under the
     * bucket or not (virtual-hosted, bucket-bound). */
    const char *us = strstr(v->url, "://");
    cr_assert_not_null(us, "%s: url", v->description);
    us += 3 + strcspn(us + 3, "/?");
    char *path = strndup(us, strcspn(us, "?"));
    const char *hs = strstr(v->creq, "\nhost:");
    cr_assert_not_null(hs, "%s: no host in the canonical request", v->description);
    hs += 6;
    char *host = strndup(hs, strcspn(hs, "\n"));
    char *enc = v->object ? pinio__s3_uri_encode(v->object, strlen(v->object), true) : strdup("");
    char *under = NULL, *bare = NULL;
    cr_assert(asprintf(&under, "/%s%s%s", v->bucket, *enc ? "/" : "", enc) > 0);
    cr_assert(asprintf(&bare, "/%s", enc) > 0);
    cr_expect(strcmp(path, under) == 0 || strcmp(path, bare) == 0,
              "%s: the URL's path %s is neither %s nor %s", v->description, path, under, bare);
    /* One vector contradicts itself: "Universe domain with virtual hosted
     * style" has /test-bucket/test-object in its canonical request, but
     * its string to sign (and its URL) are of /test-object. Its canonical
     * request is compared with that path, the URL's; should Google fix
     * the file, this says so. */
    char *creq = strdup(v->creq);
    if (strcmp(v->description, "Universe domain with virtual hosted style") == 0) {
        char h[65], *p2 = strchr(creq, '\n') + 1;
        sha256_hex(v->creq, h);
        cr_expect(!strstr(v->sts, h), "%s: no longer contradicts itself", v->description);
        cr_assert(strncmp(p2, under, strlen(under)) == 0 && p2[strlen(under)] == '\n');
        memmove(p2 + strlen(path), p2 + strlen(under), strlen(p2 + strlen(under)) + 1);
        memcpy(p2, path, strlen(path));
    }

    char date[17], cred[256];
    amz_date(v->timestamp, date);
    snprintf(cred, sizeof(cred), SA_EMAIL "/%.8s/auto/storage/goog4_request", date);
    char expires[24];
    snprintf(expires, sizeof(expires), "%" PRIu64, v->expiration);

    pinio__sigv4_header h[MAXKV + 1];
    size_t nh = 0;
    h[nh++] = (pinio__sigv4_header){"host", host};
    const char *payload = "UNSIGNED-PAYLOAD";
    for (size_t i = 0; i < v->nheaders; i++) {
        h[nh++] = (pinio__sigv4_header){v->headers[i].k, v->headers[i].v};
        if (strcasecmp(v->headers[i].k, "X-Goog-Content-SHA256") == 0)
            payload = v->headers[i].v;
    }
    pinio__s3_param q[MAXKV + 5] = {
        {"X-Goog-Algorithm", "GOOG4-RSA-SHA256"}, {"X-Goog-Credential", cred},
        {"X-Goog-Date", date}, {"X-Goog-Expires", expires}, {"X-Goog-SignedHeaders", ""},
    };
    size_t nq = 5;
    for (size_t i = 0; i < v->nquery; i++)
        q[nq++] = (pinio__s3_param){v->query[i].k, v->query[i].v};
    pinio__sigv4_in in = {
        .method = v->method, .path = path, .query = q, .nquery = nq, .headers = h,
        .nheaders = nh, .payload_hash = payload, .amz_date = date, .region = "auto",
        .service = "storage", .access_key = "GOOG1EXAMPLE", .secret_key = "not-used-here",
    };
    pinio__sigv4_out out;
    pinio_diag d = {0};
    /* A header name no HTTP request can carry ("header/name/with/slash"):
     * pinio refuses to sign it rather than sign what it cannot send. */
    bool bad_name = false;
    for (size_t i = 0; i < v->nheaders; i++)
        bad_name |= !http_token(v->headers[i].k);
    if (bad_name) {
        cr_expect_eq(pinio__sigv4(&in, &out, &d), -EINVAL, "%s: a header name that is no HTTP "
                     "token was signed", v->description);
        cr_expect(strstr(d.msg, "no valid name"), "%s: %s", v->description, d.msg);
        refused++;
        goto done;
    }
    /* A signed URL signs the list of its signed headers: pinio's own list
     * (from a first pass) goes in the query of the second. */
    cr_assert_eq(pinio__sigv4(&in, &out, &d), 0, "%s: %s", v->description, d.msg);
    char *signed_headers = strdup(out.signed_headers);
    pinio__sigv4_out_free(&out);
    q[4].value = signed_headers;
    cr_assert_eq(pinio__sigv4(&in, &out, &d), 0, "%s: %s", v->description, d.msg);
    cr_expect_str_eq(out.canonical_request, creq, "%s: canonical request", v->description);

    char *want = strdup(v->sts), *got = strdup(out.string_to_sign);
    char *ws = NULL, *gs = NULL;
    const char *wl[4], *gl[4];
    for (int i = 0; i < 4; i++) {
        wl[i] = strtok_r(i ? NULL : want, "\n", &ws);
        gl[i] = strtok_r(i ? NULL : got, "\n", &gs);
        cr_assert(wl[i] && gl[i], "%s: string to sign: line %d missing", v->description, i + 1);
    }
    cr_expect_str_eq(wl[0], "GOOG4-RSA-SHA256", "%s", v->description);
    cr_expect_str_eq(gl[0], "AWS4-HMAC-SHA256", "%s", v->description);
    cr_expect_str_eq(gl[1], wl[1], "%s: string to sign: the date", v->description);
    char scope[128];
    snprintf(scope, sizeof(scope), "%.8s/auto/storage/goog4_request", date);
    cr_expect_str_eq(wl[2], scope, "%s", v->description);
    snprintf(scope, sizeof(scope), "%.8s/auto/storage/aws4_request", date);
    cr_expect_str_eq(gl[2], scope, "%s: string to sign: the scope", v->description);
    cr_expect_str_eq(gl[3], wl[3], "%s: string to sign: the canonical request's SHA-256",
                     v->description);
    checked++;
    free(want);
    free(got);
    free(signed_headers);
    pinio__sigv4_out_free(&out);
done:
    free(creq);
    free(host);
    free(path);
    free(enc);
    free(under);
    free(bare);
}

Test(gcs_v4_vectors, every_signing_case)
{
    size_t len = 0;
    char *buf = slurp(GCS_VECTORS "/v4_signatures.json", &len);
    pinio__json j;
    pinio__json_init(&j, buf, len);
    bool first = true, efirst;
    pinio__json_str key;
    cr_assert_eq(pinio__json_object_begin(&j), 0);
    while (pinio__json_object_next(&j, &first, &key) == 1) {
        if (!pinio__json_str_eq(&key, "signingV4Tests", 14)) {
            /* postPolicyV4Tests: HTML form policies, which pinio never signs. */
            cr_assert_eq(pinio__json_skip(&j), 0);
            continue;
        }
        cr_assert_eq(pinio__json_array_begin(&j), 0);
        bool afirst = true;
        while (pinio__json_array_next(&j, &afirst) == 1) {
            vec v = {0};
            efirst = true;
            cr_assert_eq(pinio__json_object_begin(&j), 0);
            while (pinio__json_object_next(&j, &efirst, &key) == 1) {
                char **s = NULL;
#define M(name, field) else if (pinio__json_str_eq(&key, name, strlen(name))) s = &v.field;
                if (0) {}
                M("description", description) M("bucket", bucket) M("object", object)
                M("method", method) M("timestamp", timestamp) M("expectedUrl", url)
                M("expectedCanonicalRequest", creq) M("expectedStringToSign", sts)
#undef M
                if (s)
                    *s = str(&j);
                else if (pinio__json_str_eq(&key, "expiration", 10))
                    cr_assert_eq(pinio__json_u64(&j, &v.expiration), 0);
                else if (pinio__json_str_eq(&key, "headers", 7))
                    v.nheaders = object_of(&j, v.headers);
                else if (pinio__json_str_eq(&key, "queryParameters", 15))
                    v.nquery = object_of(&j, v.query);
                else
                    cr_assert_eq(pinio__json_skip(&j), 0); /* scheme, urlStyle, hostnames */
            }
            cr_assert(v.description && v.bucket && v.method && v.timestamp && v.url && v.creq &&
                      v.sts, "a vector without one of its members, before offset %zu", j.pos);
            check(&v);
            vec_free(&v);
        }
    }
    cr_assert_eq(pinio__json_finish(&j), 0, "%s at %zu", j.err_what ? j.err_what : "", j.err_off);
    /* Every case of the file, none skipped unnoticed. */
    cr_expect_eq(checked, 28, "%d signing cases checked", checked);
    cr_expect_eq(refused, 1, "%d signing cases refused", refused);
    free(buf);
}
