/* The S3 client's pure parts (src/s3/): s3:// URLs, Content-Range, the
 * backoff's bounds, and ListObjectsV2 pages (entities, continuation,
 * malformed answers). The requests themselves are tested against a real
 * server (s3_cli_test.sh, s3_bench_test.sh) and through a fault proxy
 * (s3_faults_test.sh); the stream of ranged GETs is checked here for what
 * it does when a request fails. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "src/s3/client.h"

Test(s3_url, splits_bucket_and_key)
{
    char *b, *k;
    cr_assert_eq(pinio__s3_url_split("s3://models/llama/a b.safetensors", &b, &k, NULL), 0);
    cr_assert_str_eq(b, "models");
    cr_assert_str_eq(k, "llama/a b.safetensors");
    free(b);
    free(k);
    cr_assert_eq(pinio__s3_url_split("s3://models", &b, &k, NULL), 0);
    cr_assert_str_eq(k, "");
    free(b);
    free(k);
    char *u = pinio__s3_url_join("models", "x/y");
    cr_assert_str_eq(u, "s3://models/x/y");
    free(u);
}

Test(s3_url, refuses_what_is_no_bucket)
{
    const char *bad[] = { "s3://", "s3:///key", "s3://a b/key", "http://b/k", "s3://b?x/k" };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char *b = (char *)1, *k = (char *)1;
        pinio_diag d = { 0 };
        cr_assert_eq(pinio__s3_url_split(bad[i], &b, &k, &d), -EINVAL, "%s", bad[i]);
        cr_assert_null(b);
        cr_assert_null(k);
        cr_assert(strstr(d.msg, bad[i]) != NULL, "the diag names the URL: %s", d.msg);
    }
}

Test(s3_range, content_range)
{
    uint64_t a, b, t;
    cr_assert(pinio__s3_content_range("bytes 0-99/1000", &a, &b, &t));
    cr_assert(a == 0 && b == 99 && t == 1000);
    cr_assert(pinio__s3_content_range("bytes 5-5/*", &a, &b, &t));
    cr_assert(t == UINT64_MAX);
    const char *bad[] = { "bytes 9-5/10", "bytes 0-10/10", "bytes -5/10", "items 0-1/2",
                          "bytes 0-1/2 ", "bytes 0-1", "bytes 99999999999999999999-1/2" };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        cr_assert_not(pinio__s3_content_range(bad[i], &a, &b, &t), "%s", bad[i]);
}

/* Store-provided text for a message: no byte a terminal acts on, no line
 * break, cut with "..." within the buffer, whatever the store sent. */
Test(s3_printable, escapes_and_cuts_store_text)
{
    char out[32];
    const char esc[] = "\"\x1b[2J\x1b]0;x\x07\r\n\\\x9b\"";
    cr_assert_str_eq(pinio__s3_printable(out, sizeof(out), esc, sizeof(esc) - 1),
                     "\"\\x1b[2J\\x1b]0;x\\x07\\x0d\\x0a...");
    cr_assert_str_eq(pinio__s3_printable(out, sizeof(out), "\"abc\"", 5), "\"abc\"");
    char big[64];
    cr_assert_str_eq(pinio__s3_printable(big, sizeof(big), esc, sizeof(esc) - 1),
                     "\"\\x1b[2J\\x1b]0;x\\x07\\x0d\\x0a\\x5c\\x9b\"");
    const char nul[] = { 'a', '\0', 'b' };
    cr_assert_str_eq(pinio__s3_printable(out, sizeof(out), nul, 3), "a\\x00b");
    /* Exactly full, and one byte over: the cut never splits an escape. */
    cr_assert_str_eq(pinio__s3_printable(out, 4, "abc", 3), "abc");
    cr_assert_str_eq(pinio__s3_printable(out, 4, "abcd", 4), "...");
    cr_assert_str_eq(pinio__s3_printable(out, 9, "ab\x01" "cdefg", 8), "ab...");
    cr_assert_str_eq(pinio__s3_printable(out, 10, "ab\x01" "cdefg", 8), "ab\\x01...");
    cr_assert_str_eq(pinio__s3_printable(out, 1, "abc", 3), "");
    for (size_t cap = 1; cap < sizeof(out); cap++) {
        pinio__s3_printable(out, cap, esc, sizeof(esc) - 1);
        cr_assert_lt(strlen(out), cap);
        for (const char *p = out; *p; p++)
            cr_assert(*p >= 0x20 && *p < 0x7f, "cap %zu: byte %d", cap, *p);
    }
}

Test(s3_backoff, full_jitter_capped_and_retry_after_honoured)
{
    pinio__s3_opts o = { .backoff_base = 0.1, .backoff_max = 20 };
    cr_assert_float_eq(pinio__s3_backoff(&o, 0, -1, 0.999999), 0.1, 1e-3);
    cr_assert_float_eq(pinio__s3_backoff(&o, 3, -1, 0.5), 0.4, 1e-9);
    cr_assert_float_eq(pinio__s3_backoff(&o, 0, -1, 0.0), 0.0, 1e-9);
    cr_assert_float_eq(pinio__s3_backoff(&o, 40, -1, 0.999999), 20, 1e-3); /* capped */
    cr_assert_float_eq(pinio__s3_backoff(&o, 0, 3, 0.1), 3, 1e-9);     /* Retry-After wins */
    cr_assert_float_eq(pinio__s3_backoff(&o, 0, 3600, 0.1), 20, 1e-9); /* ... up to the cap */
}

static const char page1[] =
    "<?xml version=\"1.0\"?><ListBucketResult><Name>b</Name><Prefix>m/</Prefix>"
    "<IsTruncated>true</IsTruncated><NextContinuationToken>tok&amp;1</NextContinuationToken>"
    "<Contents><Key>m/a&amp;b &lt;1&gt; &#233;.safetensors</Key><Size>123</Size></Contents>"
    "<Contents><Key>m/model.safetensors.index.json</Key><ETag>&quot;x&quot;</ETag>"
    "<Size>18446744073709551615</Size></Contents>"
    "<CommonPrefixes><Prefix>m/sub/</Prefix></CommonPrefixes></ListBucketResult>";

Test(s3_list, parses_a_page_and_its_token)
{
    pinio__s3_entry *e = NULL;
    size_t n = 0;
    char *next = NULL;
    cr_assert_eq(pinio__s3_list_parse(page1, sizeof(page1) - 1, &e, &n, &next), 0);
    cr_assert_eq(n, 2);
    cr_assert_str_eq(e[0].key, "m/a&b <1> \xc3\xa9.safetensors");
    cr_assert_eq(e[0].size, 123);
    cr_assert_eq(e[1].size, UINT64_MAX);
    cr_assert_str_eq(next, "tok&1");
    free(next);
    static const char last[] = "<ListBucketResult><IsTruncated>false</IsTruncated>"
                               "<Contents><Key>m/z</Key><Size>0</Size></Contents></ListBucketResult>";
    cr_assert_eq(pinio__s3_list_parse(last, sizeof(last) - 1, &e, &n, &next), 0);
    cr_assert_eq(n, 3);
    cr_assert_null(next);
    /* What the stores write and a strict reading must still take: a prolog,
     * the S3 namespace, indentation, empty elements, a comment. */
    static const char pretty[] =
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">\n"
        "  <Name>b</Name>\n  <Prefix>m/</Prefix>\n  <StartAfter/>\n  <!-- a comment -->\n"
        "  <IsTruncated>false</IsTruncated>\n"
        "  <Contents>\n    <Key>m/p.safetensors</Key>\n    <Size>7</Size>\n"
        "    <Owner><ID></ID></Owner>\n  </Contents>\n"
        "</ListBucketResult>\n";
    cr_assert_eq(pinio__s3_list_parse(pretty, sizeof(pretty) - 1, &e, &n, &next), 0);
    cr_assert_eq(n, 4);
    cr_assert_str_eq(e[3].key, "m/p.safetensors");
    cr_assert_eq(e[3].size, 7);
    cr_assert_null(next);
    pinio__s3_entries_free(e, n);
}

/* Each of bad[0 .. n) is refused as a listing page, with nothing leaked. */
static void refuse_all(const char *const *bad, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        pinio__s3_entry *e = NULL;
        size_t k = 0;
        char *next = NULL;
        cr_expect_eq(pinio__s3_list_parse(bad[i], strlen(bad[i]), &e, &k, &next), PINIO_EFORMAT,
                     "%s", bad[i]);
        pinio__s3_entries_free(e, k);
        free(next);
    }
}

Test(s3_list, refuses_what_is_no_listing)
{
    const char *bad[] = {
        "<Error><Code>AccessDenied</Code></Error>",
        "<ListBucketResult><Contents><Key>k</Key></Contents></ListBucketResult>",
        "<ListBucketResult><Contents><Key>k</Key><Size>1x</Size></Contents></ListBucketResult>",
        "<ListBucketResult><Contents><Key>k&bogus;</Key><Size>1</Size></Contents></ListBucketResult>",
        "<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>",
    };
    refuse_all(bad, sizeof(bad) / sizeof(bad[0]));
}

/* A page cut short (a connection that ended the body early, a proxy that
 * truncated it) must never read as the last page: the listing would lose
 * the shards past the cut. Only a complete, well-formed page with its
 * IsTruncated is one. */
Test(s3_list, refuses_a_page_cut_short_or_malformed)
{
    const char *bad[] = {
        /* cut after the first object: no IsTruncated, no closing tag */
        "<ListBucketResult><Name>b</Name><Contents><Key>m/a.safetensors</Key><Size>1</Size>"
        "</Contents>",
        /* IsTruncated said false, then the body ended */
        "<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>m/a.safetensors</Key>"
        "<Size>1</Size></Contents>",
        "<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>m/a.safetensors</Key>"
        "<Size>1</Size></Contents><Contents><Key>m/b.safe",
        "<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult",
        /* complete, but no IsTruncated (S3 always sends it), or not a boolean */
        "<ListBucketResult><Contents><Key>k</Key><Size>1</Size></Contents></ListBucketResult>",
        "<ListBucketResult><IsTruncated>maybe</IsTruncated></ListBucketResult>",
        "<ListBucketResult><IsTruncated>false</IsTruncated><IsTruncated>true</IsTruncated>"
        "</ListBucketResult>",
        /* not well-formed: crossed tags, text or a second element past the root */
        "<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>k<Size>1</Key></Size>"
        "</Contents></ListBucketResult>",
        "<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult><Contents>"
        "<Key>k</Key><Size>1</Size></Contents>",
        "<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>x",
        "<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>k</Key>"
        "<Size>1</Size></Contents></Contents></ListBucketResult>",
        "<ListBucketResult><IsTruncated>false</IsTruncated><!-- cut",
        "<?xml version=\"1.0\"",
        "",
    };
    refuse_all(bad, sizeof(bad) / sizeof(bad[0]));
}

/* The stream's bookkeeping, with nothing listening (port 1 refuses at once)
 * and one attempt per request: a failure ends the whole stream, names the
 * range, leaves nothing pending, and the batch calls, refused while the
 * stream was pending, work again after. */
Test(s3_stream, a_failure_drops_the_stream_and_names_the_range)
{
    setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1", 1);
    setenv("AWS_MAX_ATTEMPTS", "1", 1);
    setenv("AWS_REGION", "us-east-1", 1);
    setenv("AWS_CONFIG_FILE", "/dev/null", 1);
    setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null", 1);
    unsetenv("AWS_ENDPOINT_URL_S3");
    unsetenv("AWS_PROFILE");
    pinio__s3 *c = NULL;
    pinio_diag d = {0};
    pinio__s3_opts so = {.concurrency = 2};
    cr_assert_eq(pinio__s3_open(&c, &so, &d), 0, "%s", d.msg);
    static uint8_t buf[3][16];
    for (size_t i = 0; i < 3; i++) {
        pinio__s3_range r = {.bucket = "bkt", .key = "obj", .etag = "\"e\"", .size = 48,
                             .off = 16 * i, .len = 16, .dst = buf[i], .tag = 10 + i};
        cr_assert_eq(pinio__s3_submit(c, &r, &d), 0, "%s", d.msg);
    }
    cr_assert_eq(pinio__s3_pending(c), 3);
    pinio__s3_range one = {.bucket = "bkt", .key = "obj", .etag = "\"e\"", .size = 48,
                           .len = 16, .dst = buf[0]};
    cr_assert_eq(pinio__s3_get_ranges(c, &one, 1, &d), -EBUSY);
    pinio__s3_done out[3];
    size_t n = 99;
    int rc = pinio__s3_poll(c, 60, out, 3, &n, &d);
    cr_assert_eq(rc, -EIO, "%d: %s", rc, d.msg);
    cr_assert_eq(n, 0);
    cr_assert(d.index >= 10 && d.index <= 12, "index %zu", d.index);
    cr_assert(strstr(d.msg, "s3://bkt/obj") && strstr(d.msg, "after 1 attempts"), "%s", d.msg);
    cr_assert_eq(pinio__s3_pending(c), 0);
    n = 99;
    cr_assert_eq(pinio__s3_poll(c, 60, out, 3, &n, &d), 0);
    cr_assert_eq(n, 0);
    cr_assert_eq(pinio__s3_get_ranges(c, &one, 1, &d), -EIO, "%s", d.msg);
    pinio__s3_close(c);
}
