/* SigV4 for S3 (src/s3/sign.c): the signed requests of the AWS S3
 * documentation's examples, and the request's shape (URL, headers) for the
 * addressing styles and the inputs the signer must refuse. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "src/s3/config.h"
#include "src/s3/sign.h"
#include "tests/s3/s3_env.h"

/* 20130524T000000Z, the time of the S3 documentation's examples. */
#define DOC_TIME ((time_t)1369353600)

static void doc_env(void)
{
    s3_env_clear();
    setenv("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", 1);
    setenv("AWS_REGION", "us-east-1", 1);
    /* The examples use the global endpoint, virtual-hosted. */
    setenv("AWS_ENDPOINT_URL", "https://s3.amazonaws.com", 1);
}

static pinio__s3_cfg *load_cfg(void)
{
    pinio__s3_cfg *cfg = NULL;
    pinio_diag d = {0};
    int rc = pinio__s3_cfg_load(&cfg, &d);
    cr_assert_eq(rc, 0, "cfg_load: %d %s", rc, d.msg);
    return cfg;
}

static const char *header(const pinio__s3_req *r, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < r->nheaders; i++)
        if (strncasecmp(r->headers[i], name, n) == 0 && r->headers[i][n] == ':')
            return r->headers[i] + n + 2;
    return NULL;
}

/* "Example: GET Object" of the S3 SigV4 header-auth documentation. */
Test(s3_sign, doc_get_object_with_range)
{
    doc_env();
    pinio__s3_cfg *cfg = load_cfg();
    const char *extra[] = {"Range: bytes=0-9"};
    pinio__s3_req r;
    pinio_diag d = {0};
    cr_assert_eq(pinio__s3_sign(cfg, "GET", "examplebucket", "test.txt", NULL, 0, extra, 1,
                                DOC_TIME, &r, &d), 0, "%s", d.msg);
    cr_expect_str_eq(r.url, "https://examplebucket.s3.amazonaws.com/test.txt");
    cr_expect_str_eq(header(&r, "Host"), "examplebucket.s3.amazonaws.com");
    cr_expect_str_eq(header(&r, "Range"), "bytes=0-9");
    cr_expect_str_eq(header(&r, "x-amz-date"), "20130524T000000Z");
    cr_expect_str_eq(header(&r, "x-amz-content-sha256"), PINIO__S3_EMPTY_SHA256);
    cr_expect_str_eq(header(&r, "Authorization"),
                     "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/"
                     "aws4_request, SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
                     "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
    cr_expect_eq(r.nheaders, 5);
    pinio__s3_req_free(&r);
    cr_expect_null(r.url);
    pinio__s3_cfg_free(cfg);
}

static void sign_ok(const pinio__s3_cfg *cfg, const char *method, const char *bucket,
                    const char *key, const pinio__s3_param *q, size_t nq,
                    const char *const *extra, size_t nextra, pinio__s3_req *r)
{
    pinio_diag d = {0};
    int rc = pinio__s3_sign(cfg, method, bucket, key, q, nq, extra, nextra, DOC_TIME, r, &d);
    cr_assert_eq(rc, 0, "sign: %d %s", rc, d.msg);
}

static const char *signature(const pinio__s3_req *r)
{
    const char *a = header(r, "Authorization");
    cr_assert_not_null(a);
    const char *s = strstr(a, "Signature=");
    cr_assert_not_null(s);
    return s + strlen("Signature=");
}

/* "Example: GET Bucket Lifecycle": a parameter without a value is signed "lifecycle=". */
Test(s3_sign, doc_get_bucket_lifecycle)
{
    doc_env();
    pinio__s3_cfg *cfg = load_cfg();
    pinio__s3_param q[] = {{"lifecycle", ""}};
    pinio__s3_req r;
    sign_ok(cfg, "GET", "examplebucket", "", q, 1, NULL, 0, &r);
    cr_expect_str_eq(r.url, "https://examplebucket.s3.amazonaws.com/?lifecycle=");
    cr_expect_str_eq(signature(&r), "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543");
    pinio__s3_req_free(&r);
    pinio__s3_cfg_free(cfg);
}

/* "Example: Get Bucket (List Objects)": parameters in the URL in the caller's
 * order, signed sorted. */
Test(s3_sign, doc_list_objects)
{
    doc_env();
    pinio__s3_cfg *cfg = load_cfg();
    pinio__s3_param q[] = {{"prefix", "J"}, {"max-keys", "2"}};
    pinio__s3_req r;
    sign_ok(cfg, "GET", "examplebucket", "", q, 2, NULL, 0, &r);
    cr_expect_str_eq(r.url, "https://examplebucket.s3.amazonaws.com/?prefix=J&max-keys=2");
    cr_expect_str_eq(signature(&r), "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
    pinio__s3_req_free(&r);
    pinio__s3_cfg_free(cfg);
}

/* A custom endpoint (an S3-compatible store) gets path-style addressing,
 * keeps its port in URL and Host, and the key is encoded once, '/' kept. */
Test(s3_sign, custom_endpoint_is_path_style_and_keys_are_encoded)
{
    s3_env_clear();
    setenv("AWS_ACCESS_KEY_ID", "AKID", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "SECRET", 1);
    setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000/", 1);
    pinio__s3_cfg *cfg = load_cfg();
    cr_expect_str_eq(pinio__s3_cfg_endpoint(cfg), "http://127.0.0.1:9000");
    pinio__s3_req r;
    sign_ok(cfg, "HEAD", "models", "dir/a b+c=d&e~f%g\xc3\xa9.safetensors", NULL, 0, NULL, 0, &r);
    cr_expect_str_eq(r.url, "http://127.0.0.1:9000/models/dir/a%20b%2Bc%3Dd%26e~f%25g%C3%A9.safetensors");
    cr_expect_str_eq(header(&r, "Host"), "127.0.0.1:9000");
    cr_expect(strstr(header(&r, "Authorization"), "Credential=AKID/20130524/us-east-1/s3/aws4_request, "
                     "SignedHeaders=host;x-amz-content-sha256;x-amz-date, "));
    pinio__s3_req_free(&r);
    /* Bucket-level: "/bucket", no slash after it (botocore's path-style ListObjectsV2). */
    pinio__s3_param q[] = {{"list-type", "2"}, {"prefix", "a b/"}};
    sign_ok(cfg, "GET", "models", "", q, 2, NULL, 0, &r);
    cr_expect_str_eq(r.url, "http://127.0.0.1:9000/models?list-type=2&prefix=a%20b%2F");
    pinio__s3_req_free(&r);
    pinio__s3_cfg_free(cfg);
}

Test(s3_sign, addressing_follows_bucket_and_style)
{
    s3_env_clear();
    setenv("AWS_REGION", "eu-west-1", 1);
    setenv("AWS_NO_SIGN_REQUEST", "true", 1);
    pinio__s3_cfg *cfg = load_cfg();
    pinio__s3_req r;
    sign_ok(cfg, "GET", "bucket", "k", NULL, 0, NULL, 0, &r);
    cr_expect_str_eq(r.url, "https://bucket.s3.eu-west-1.amazonaws.com/k");
    pinio__s3_req_free(&r);
    /* A dotted bucket would break the TLS wildcard: path-style. */
    sign_ok(cfg, "GET", "my.bucket", "k", NULL, 0, NULL, 0, &r);
    cr_expect_str_eq(r.url, "https://s3.eu-west-1.amazonaws.com/my.bucket/k");
    pinio__s3_req_free(&r);
    sign_ok(cfg, "GET", "Upper_Case", "k", NULL, 0, NULL, 0, &r);
    cr_expect_str_eq(r.url, "https://s3.eu-west-1.amazonaws.com/Upper_Case/k");
    pinio__s3_req_free(&r);
    pinio__s3_cfg_free(cfg);

    setenv("PINIO_S3_ADDRESSING", "path", 1);
    cfg = load_cfg();
    sign_ok(cfg, "GET", "bucket", "k", NULL, 0, NULL, 0, &r);
    cr_expect_str_eq(r.url, "https://s3.eu-west-1.amazonaws.com/bucket/k");
    pinio__s3_req_free(&r);
    pinio__s3_cfg_free(cfg);

    setenv("PINIO_S3_ADDRESSING", "virtual", 1);
    setenv("AWS_ENDPOINT_URL", "http://minio.local:9000", 1);
    cfg = load_cfg();
    sign_ok(cfg, "GET", "bucket", "k", NULL, 0, NULL, 0, &r);
    cr_expect_str_eq(r.url, "http://bucket.minio.local:9000/k");
    pinio__s3_req_free(&r);
    pinio_diag d = {0};
    cr_expect_eq(pinio__s3_sign(cfg, "GET", "my.bucket", "k", NULL, 0, NULL, 0, DOC_TIME, &r, &d),
                 -EINVAL);
    cr_expect(strstr(d.msg, "s3://my.bucket/k") && strstr(d.msg, "DNS"), "%s", d.msg);
    cr_expect_null(r.url);
    pinio__s3_cfg_free(cfg);
}

/* Anonymous requests carry Host and the caller's headers only, as botocore's unsigned ones. */
Test(s3_sign, anonymous_request_has_no_signature_headers)
{
    s3_env_clear();
    setenv("AWS_NO_SIGN_REQUEST", "true", 1);
    pinio__s3_cfg *cfg = load_cfg();
    cr_expect(pinio__s3_cfg_anonymous(cfg));
    const char *extra[] = {"Range:  bytes=0-7  "};
    pinio__s3_req r;
    sign_ok(cfg, "GET", "public", "a", NULL, 0, extra, 1, &r);
    cr_expect_eq(r.nheaders, 2);
    cr_expect_str_eq(r.headers[0], "Host: public.s3.us-east-1.amazonaws.com");
    cr_expect_str_eq(r.headers[1], "Range: bytes=0-7");
    cr_expect_null(header(&r, "Authorization"));
    cr_expect_null(header(&r, "x-amz-date"));
    pinio__s3_req_free(&r);
    pinio__s3_cfg_free(cfg);
}

/* A session token is sent and signed; User-Agent is sent but not signed (botocore). */
Test(s3_sign, session_token_signed_user_agent_not)
{
    doc_env();
    setenv("AWS_SESSION_TOKEN", "TOKEN/with+chars==", 1);
    pinio__s3_cfg *cfg = load_cfg();
    const char *extra[] = {"User-Agent: pinio", "If-Match: \"0123abcd\""};
    pinio__s3_req r;
    sign_ok(cfg, "GET", "examplebucket", "test.txt", NULL, 0, extra, 2, &r);
    cr_expect_str_eq(header(&r, "x-amz-security-token"), "TOKEN/with+chars==");
    cr_expect_str_eq(header(&r, "User-Agent"), "pinio");
    cr_expect(strstr(header(&r, "Authorization"),
                     "SignedHeaders=host;if-match;x-amz-content-sha256;x-amz-date;x-amz-security-token, "),
              "%s", header(&r, "Authorization"));
    const char *last = "Authorization: AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/"
                       "us-east-1/s3/aws4_request, SignedHeaders=host;if-match;x-amz-content-sha256;"
                       "x-amz-date;x-amz-security-token, Signature=";
    cr_expect(strncmp(r.headers[r.nheaders - 1], last, strlen(last)) == 0,
              "Authorization comes last: %s", r.headers[r.nheaders - 1]);
    pinio__s3_req_free(&r);
    pinio__s3_cfg_free(cfg);
}

Test(s3_sign, refuses_bad_requests)
{
    doc_env();
    pinio__s3_cfg *cfg = load_cfg();
    pinio__s3_req r;
    pinio_diag d;
    const char *crlf[] = {"Range: bytes=0-1\r\nX-Evil: 1"};
    const char *own[] = {"authorization: AWS4-HMAC-SHA256 forged"};
    const char *noname[] = {": value"};
    const char *nocolon[] = {"Range bytes=0-1"};
    pinio__s3_param emptyname[] = {{"", "v"}};
    struct { const char *method, *bucket; const char *const *extra; const pinio__s3_param *q;
             time_t t; } bad[] = {
        {"get", "b", NULL, NULL, DOC_TIME},
        {"GET", "a/b", NULL, NULL, DOC_TIME},
        {"GET", "", NULL, NULL, DOC_TIME},
        {"GET", "b", crlf, NULL, DOC_TIME},
        {"GET", "b", own, NULL, DOC_TIME},
        {"GET", "b", noname, NULL, DOC_TIME},
        {"GET", "b", nocolon, NULL, DOC_TIME},
        {"GET", "b", NULL, emptyname, DOC_TIME},
        {"GET", "b", NULL, NULL, (time_t)-1000},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        memset(&d, 0, sizeof(d));
        int rc = pinio__s3_sign(cfg, bad[i].method, bad[i].bucket, "key", bad[i].q, bad[i].q ? 1 : 0,
                                bad[i].extra, bad[i].extra ? 1 : 0, bad[i].t, &r, &d);
        cr_expect_eq(rc, -EINVAL, "case %zu: %d", i, rc);
        cr_expect_eq(d.code, -EINVAL, "case %zu", i);
        cr_expect(strstr(d.msg, "/key: "), "case %zu names bucket and key: %s", i, d.msg);
        cr_expect(!strstr(d.msg, "wJalrXUtnFEMI"), "case %zu: a secret in %s", i, d.msg);
        cr_expect_null(r.url, "case %zu owns nothing", i);
        cr_expect_eq(r.nheaders, 0);
    }
    pinio__s3_cfg_free(cfg);
}
