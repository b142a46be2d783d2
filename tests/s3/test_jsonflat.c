/* src/s3/jsonflat.c, the credential sources' one flat-object JSON reader:
 * the strictest of the three readers it replaced where they differed (a
 * member wanted twice, anything after the object, \u0000, a surrogate, a
 * number or literal off JSON's grammar: refused), the callers' deliberate
 * differences as flags (nested values, non-ASCII escapes), and on every
 * refusal no value left behind. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "src/s3/jsonflat_internal.h"

static const char *read2(const char *text, unsigned flags, pinio__s3_jfield *f)
{
    f[0] = (pinio__s3_jfield){.name = "a"};
    f[1] = (pinio__s3_jfield){.name = "b"};
    const char *why = pinio__s3_jflat(text, strlen(text), f, 2, flags);
    if (why)
        cr_expect(!f[0].val && !f[1].val, "a value left after \"%s\" on %s", why, text);
    return why;
}

Test(s3_jsonflat, members_decoded_and_typed)
{
    pinio__s3_jfield f[2];
    cr_assert_null(read2(" {\"x\": [1, {\"y\": null}], \"a\": \"s\\/\\u00e9\\n\", \"b\": -1.5e+3}\n",
                         PINIO__S3_JFLAT_NESTED, f));
    cr_expect_str_eq(f[0].val, "s/\xc3\xa9\n");
    cr_expect(f[0].str);
    cr_expect_str_eq(f[1].val, "-1.5e+3");
    cr_expect(!f[1].str);
    pinio__s3_jflat_clear(f, 2);
    cr_expect(!f[0].val && !f[1].val);
    cr_assert_null(read2("{}", 0, f));
    cr_expect(!f[0].val && !f[1].val);
    cr_assert_null(read2("{\"b\": true, \"c\": null}", 0, f));
    cr_expect_str_eq(f[1].val, "true");
    pinio__s3_jflat_clear(f, 2);
}

Test(s3_jsonflat, the_strictest_of_the_three)
{
    static const struct {
        const char *text, *why;
    } bad[] = {
        {"", "not a JSON object"},
        {"[1]", "not a JSON object"},
        {"{\"a\": \"1\", \"a\": \"2\"}", "not JSON"},
        {"{\"a\": \"1\"} {", "not JSON (more after the object)"},
        {"{\"a\": \"1\"}x", "not JSON (more after the object)"},
        {"{\"a\": \"x\\u0000\"}", "not JSON"},
        {"{\"a\": \"\\ud800\\udc00\"}", "not JSON"},
        {"{\"a\": \"\\u00g1\"}", "not JSON"},
        {"{\"a\": \"\\x\"}", "not JSON"},
        {"{\"a\": \"tab\there\"}", "not JSON"},
        {"{\"a\": \"open}", "not JSON"},
        {"{\"b\": tru}", "not JSON"},
        {"{\"b\": 01}", "not JSON"},
        {"{\"b\": +1}", "not JSON"},
        {"{\"b\": 1.}", "not JSON"},
        {"{\"b\": 1e}", "not JSON"},
        {"{\"b\": -}", "not JSON"},
        {"{\"c\": 1,}", "not JSON"},
        {"{\"c\" 1}", "not JSON"},
        {"{\"a\": \"1\"", "not JSON"},
    };
    pinio__s3_jfield f[2];
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        const char *why = read2(bad[i].text, PINIO__S3_JFLAT_NESTED, f);
        cr_expect(why && strcmp(why, bad[i].why) == 0, "%s: %s", bad[i].text, why ? why : "taken");
    }
}

Test(s3_jsonflat, flags_nested_and_ascii)
{
    pinio__s3_jfield f[2];
    const char *nested = "{\"error_codes\": [7000215], \"a\": \"t\"}";
    cr_expect_str_eq(read2(nested, 0, f), "not JSON");
    cr_assert_null(read2(nested, PINIO__S3_JFLAT_NESTED, f));
    pinio__s3_jflat_clear(f, 2);
    /* 63 arrays deep is taken, 64 is not (creds.c's reader's bound). */
    char deep[200];
    for (int n = 63; n <= 64; n++) {
        int w = snprintf(deep, sizeof(deep), "{\"c\": %.*s1", n, "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
                         "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[");
        snprintf(deep + w, sizeof(deep) - (size_t)w, "%.*s}", n, "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]"
                 "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]");
        const char *why = read2(deep, PINIO__S3_JFLAT_NESTED, f);
        cr_expect(n == 63 ? !why : why && !strcmp(why, "not JSON"), "%d deep: %s", n, why);
    }
    const char *wide = "{\"a\": \"\\u00e9\"}";
    cr_expect_str_eq(read2(wide, PINIO__S3_JFLAT_ASCII, f), "not JSON");
    cr_assert_null(read2("{\"a\": \"\\u0041\"}", PINIO__S3_JFLAT_ASCII, f));
    cr_expect_str_eq(f[0].val, "A");
    pinio__s3_jflat_clear(f, 2);
    cr_assert_null(read2(wide, 0, f));
    cr_expect_str_eq(f[0].val, "\xc3\xa9");
    pinio__s3_jflat_clear(f, 2);
}
