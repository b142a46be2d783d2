/* The strict JSON pull parser on its own: what it must reject (RFC 8259 and
 * serde_json's limits) and what it must decode. */
#include <string.h>

#include <criterion/criterion.h>

#include "pinio/common.h"
#include "src/st/json_internal.h"

/* Validates a whole document by skipping its single value. */
static int check(const char *doc)
{
    pinio__json j;
    pinio__json_init(&j, doc, strlen(doc));
    int r = pinio__json_skip(&j);
    if (!r)
        r = pinio__json_finish(&j);
    return r;
}

Test(json, accepts_valid)
{
    const char *ok[] = {
        "{}", "[]", " {\"a\" : [1, -2.5e+3, 0, 0.0, 1E9, true, false, null, \"\"]} ",
        "\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u0041\\ud83d\\ude00\"", "-0", "123456789012345678901234567890",
        "{\"a\":{\"b\":{\"c\":[[[]]]}}}", "\"\xc3\xa9\"",
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
        cr_assert_eq(check(ok[i]), 0, "rejected %s", ok[i]);
}

Test(json, rejects_invalid)
{
    const char *bad[] = {
        "", "{", "}", "[1,]", "{\"a\":1,}", "[,1]", "{,}", "{\"a\" 1}", "{\"a\":}", "{1:2}",
        "[01]", "[1.]", "[.5]", "[1e]", "[+1]", "[-]", "[NaN]", "[Infinity]", "[tru]", "[nul]",
        "\"abc", "\"a\x01\"", "\"\\x\"", "\"\\u12\"", "\"\\u12G4\"", "\"\\ud800\"",
        "\"\\udc00\"", "\"\\ud800\\u0041\"", "{}{}", "[1] 2", "/* c */ {}", "{'a':1}", "[1 2]",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        cr_assert_eq(check(bad[i]), PINIO_EFORMAT, "accepted %s", bad[i]);
}

Test(json, depth_limit)
{
    char doc[600];
    for (int depth = 127; depth <= 129; depth++) {
        memset(doc, '[', (size_t)depth);
        memset(doc + depth, ']', (size_t)depth);
        doc[2 * depth] = '\0';
        int r = check(doc);
        if (depth <= PINIO__JSON_MAX_DEPTH)
            cr_assert_eq(r, 0, "depth %d", depth);
        else
            cr_assert_eq(r, PINIO_EFORMAT, "depth %d", depth);
    }
}

Test(json, u64_bounds)
{
    const struct {
        const char *doc;
        int r;
        uint64_t v;
    } cases[] = {
        {"0", 0, 0},
        {"18446744073709551615", 0, UINT64_MAX},
        {"18446744073709551616", PINIO_EFORMAT, 0},
        {"99999999999999999999", PINIO_EFORMAT, 0},
        {"-1", PINIO_EFORMAT, 0},
        {"-0", PINIO_EFORMAT, 0},
        {"1.0", PINIO_EFORMAT, 0},
        {"1e2", PINIO_EFORMAT, 0},
        {"\"1\"", PINIO_EFORMAT, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        pinio__json j;
        pinio__json_init(&j, cases[i].doc, strlen(cases[i].doc));
        uint64_t v = 0;
        int r = pinio__json_u64(&j, &v);
        cr_assert_eq(r, cases[i].r, "%s", cases[i].doc);
        if (!r)
            cr_assert_eq(v, cases[i].v, "%s", cases[i].doc);
    }
}

Test(json, string_decode_and_error_position)
{
    const char *doc = "\"a\\u00e9\\n\\ud83d\\ude00/\\/\"";
    pinio__json j;
    pinio__json_init(&j, doc, strlen(doc));
    pinio__json_str s;
    cr_assert_eq(pinio__json_string(&j, &s), 0);
    char out[32];
    cr_assert_eq(s.len, 1 + 2 + 1 + 4 + 2);
    pinio__json_str_decode(&s, out);
    cr_assert_str_eq(out, "a\xc3\xa9\n\xf0\x9f\x98\x80//");
    cr_assert(pinio__json_str_eq(&s, "a\xc3\xa9\n\xf0\x9f\x98\x80//", 10));
    cr_assert(!pinio__json_str_eq(&s, "a", 1));

    /* The first error sticks, with its offset. */
    const char *bad = "[1, 2,, 3]";
    pinio__json_init(&j, bad, strlen(bad));
    cr_assert_eq(pinio__json_skip(&j), PINIO_EFORMAT);
    cr_assert_eq(j.err_off, 6);
    cr_assert_eq(pinio__json_finish(&j), PINIO_EFORMAT);
    cr_assert_eq(j.err_off, 6);
}

Test(json, utf8_check)
{
    size_t off = 99;
    cr_assert(pinio__utf8_check("plain ascii that is longer than eight", 37, &off));
    cr_assert(pinio__utf8_check("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf", 13, &off));
    const struct {
        const char *s;
        size_t len, at;
    } bad[] = {
        {"abcdefgh\x80", 9, 8},         /* lone continuation after the fast path */
        {"\xc1\xbf", 2, 0},             /* overlong 2-byte */
        {"\xe0\x9f\xbf", 3, 0},         /* overlong 3-byte */
        {"\xf0\x8f\xbf\xbf", 4, 0},     /* overlong 4-byte */
        {"a\xed\xb0\x80", 4, 1},        /* surrogate */
        {"\xf5\x80\x80\x80", 4, 0},     /* beyond U+10FFFF */
        {"ab\xe2\x82", 4, 2},           /* truncated at the end */
        {"\xe2\x28\xa1", 3, 0},         /* bad continuation */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cr_assert(!pinio__utf8_check(bad[i].s, bad[i].len, &off), "case %zu", i);
        cr_assert_eq(off, bad[i].at, "case %zu", i);
    }
}
