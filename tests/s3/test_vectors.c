/* The bare SigV4 algorithm (pinio__sigv4) against the AWS test-suite
 * vectors in tests/s3/vectors/: canonical request, string to sign and
 * Authorization, each compared byte for byte (see vectors/README for
 * where each vector came from and which are left out). */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "src/s3/sign.h"

/* The file's bytes, NUL-terminated; NULL when it does not exist. */
static char *slurp(const char *name, const char *ext)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s.%s", S3_VECTORS, name, ext);
    FILE *f = fopen(path, "rb");
    if (!f) {
        cr_assert_eq(errno, ENOENT, "%s: %s", path, strerror(errno));
        return NULL;
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    cr_assert_not_null(m);
    int c;
    while ((c = fgetc(f)) != EOF)
        fputc(c, m);
    fclose(f);
    fclose(m);
    return buf;
}

static void sha256_hex(const char *data, size_t n, char out[65])
{
    unsigned char md[32];
    unsigned len = 0;
    cr_assert(EVP_Digest(data, n, md, &len, EVP_sha256(), NULL));
    for (unsigned i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
}

#define MAXH 16

static void check_vector(const char *name)
{
    char *req = slurp(name, "req");
    cr_assert_not_null(req, "%s.req is missing", name);
    char *creq = slurp(name, "creq"), *sts = slurp(name, "sts"), *authz = slurp(name, "authz");
    char *token = slurp(name, "token");
    cr_assert_not_null(authz, "%s.authz is missing", name);

    /* "METHOD TARGET HTTP/1.1": the target may hold a space (get-space). */
    char *blank = strstr(req, "\n\n");
    const char *body = "";
    if (blank) {
        *blank = '\0';
        body = blank + 2;
    }
    char *save = NULL, *line = strtok_r(req, "\n", &save);
    char *sp = strchr(line, ' '), *ver = strstr(line, " HTTP/1.1");
    cr_assert(sp && ver && ver > sp, "%s: bad request line", name);
    *sp = '\0';
    *ver = '\0';
    const char *method = line;
    char *target = sp + 1, *qs = strchr(target, '?');
    if (qs)
        *qs++ = '\0';
    char *path = pinio__s3_uri_encode(target, strlen(target), true);

    pinio__s3_param q[MAXH];
    size_t nq = 0;
    char *qsave = NULL;
    for (char *p = qs ? strtok_r(qs, "&", &qsave) : NULL; p; p = strtok_r(NULL, "&", &qsave)) {
        char *eq = strchr(p, '=');
        cr_assert_lt(nq, MAXH);
        if (eq)
            *eq = '\0';
        q[nq++] = (pinio__s3_param){p, eq ? eq + 1 : ""};
    }
    pinio__sigv4_header h[MAXH];
    size_t nh = 0;
    while ((line = strtok_r(NULL, "\n", &save))) {
        char *colon = strchr(line, ':');
        cr_assert_not_null(colon, "%s: header line without ':'", name);
        *colon = '\0';
        cr_assert_lt(nh, MAXH);
        h[nh++] = (pinio__sigv4_header){line, colon + 1};
    }
    if (token)
        h[nh++] = (pinio__sigv4_header){"X-Amz-Security-Token", token};
    char payload[65];
    sha256_hex(body, strlen(body), payload);

    pinio__sigv4_in in = {
        .method = method, .path = path, .query = q, .nquery = nq, .headers = h, .nheaders = nh,
        .payload_hash = payload, .amz_date = "20150830T123600Z", .region = "us-east-1",
        .service = "service", .access_key = "AKIDEXAMPLE",
        .secret_key = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
    };
    pinio__sigv4_out out;
    pinio_diag d = {0};
    cr_assert_eq(pinio__sigv4(&in, &out, &d), 0, "%s: %s", name, d.msg);
    if (creq)
        cr_expect_str_eq(out.canonical_request, creq, "%s: canonical request", name);
    if (sts)
        cr_expect_str_eq(out.string_to_sign, sts, "%s: string to sign", name);
    cr_expect_str_eq(out.authorization, authz, "%s: Authorization", name);
    pinio__sigv4_out_free(&out);
    free(path);
    free(req);
    free(creq);
    free(sts);
    free(authz);
    free(token);
}

#define VECTOR(id, name) \
    Test(sigv4_suite, id) { check_vector(name); }

VECTOR(get_vanilla, "get-vanilla")
VECTOR(get_vanilla_empty_query_key, "get-vanilla-empty-query-key")
VECTOR(get_vanilla_query_order_key, "get-vanilla-query-order-key")
VECTOR(get_vanilla_query_order_key_case, "get-vanilla-query-order-key-case")
VECTOR(get_vanilla_query_order_value, "get-vanilla-query-order-value")
VECTOR(get_vanilla_query_unreserved, "get-vanilla-query-unreserved")
VECTOR(get_vanilla_utf8_query, "get-vanilla-utf8-query")
VECTOR(get_unreserved, "get-unreserved")
VECTOR(get_utf8, "get-utf8")
VECTOR(get_space, "get-space")
VECTOR(get_header_key_duplicate, "get-header-key-duplicate")
VECTOR(get_header_value_order, "get-header-value-order")
VECTOR(get_header_value_trim, "get-header-value-trim")
VECTOR(get_vanilla_with_session_token, "get-vanilla-with-session-token")
VECTOR(post_vanilla, "post-vanilla")
VECTOR(post_vanilla_query, "post-vanilla-query")
VECTOR(post_header_key_sort, "post-header-key-sort")
VECTOR(post_header_value_case, "post-header-value-case")
VECTOR(post_sts_header_before, "post-sts-header-before")
VECTOR(post_x_www_form_urlencoded, "post-x-www-form-urlencoded")
VECTOR(post_x_www_form_urlencoded_parameters, "post-x-www-form-urlencoded-parameters")

/* Each step must be able to fail: one byte off in the secret changes the signature only. */
Test(sigv4_suite, wrong_secret_changes_only_the_signature)
{
    pinio__sigv4_header h[] = {{"Host", "example.amazonaws.com"}, {"X-Amz-Date", "20150830T123600Z"}};
    pinio__sigv4_in in = {
        .method = "GET", .path = "/", .headers = h, .nheaders = 2,
        .payload_hash = PINIO__S3_EMPTY_SHA256, .amz_date = "20150830T123600Z",
        .region = "us-east-1", .service = "service", .access_key = "AKIDEXAMPLE",
        .secret_key = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEX",
    };
    pinio__sigv4_out out;
    cr_assert_eq(pinio__sigv4(&in, &out, NULL), 0);
    cr_expect_str_eq(out.signed_headers, "host;x-amz-date");
    cr_expect(strstr(out.string_to_sign, "bb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63"));
    cr_expect_str_neq(out.signature, "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
    pinio__sigv4_out_free(&out);
}

Test(sigv4_suite, refuses_bad_input)
{
    pinio__sigv4_header good[] = {{"Host", "example.amazonaws.com"}};
    pinio__sigv4_header crlf[] = {{"Host", "a\r\nX-Evil: 1"}};
    pinio__sigv4_header badname[] = {{"Bad Name", "v"}};
    pinio__sigv4_in base = {
        .method = "GET", .path = "/", .headers = good, .nheaders = 1,
        .payload_hash = PINIO__S3_EMPTY_SHA256, .amz_date = "20150830T123600Z",
        .region = "us-east-1", .service = "service", .access_key = "AKIDEXAMPLE",
        .secret_key = "secret",
    };
    pinio__sigv4_out out;
    pinio_diag d = {0};
    pinio__sigv4_in in = base;
    in.amz_date = "2015-08-30";
    cr_expect_eq(pinio__sigv4(&in, &out, &d), -EINVAL);
    cr_expect_null(out.authorization);
    in = base;
    in.headers = crlf;
    cr_expect_eq(pinio__sigv4(&in, &out, &d), -EINVAL);
    in = base;
    in.headers = badname;
    cr_expect_eq(pinio__sigv4(&in, &out, &d), -EINVAL);
    in = base;
    in.secret_key = NULL;
    cr_expect_eq(pinio__sigv4(&in, &out, &d), -EINVAL);
    cr_expect(strstr(d.msg, "secret_key"), "%s", d.msg);
}
