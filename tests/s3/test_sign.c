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
