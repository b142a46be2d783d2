/* tools/jw.c: the CLI's one JSON writer. Exact bytes for the escapes that
 * matter (invalid UTF-8, controls, C1), numbers JSON cannot spell, misuse. */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jw.h"
#include "pinio/pinio.h"

static char *buf;
static size_t len;
static FILE *mem;
static jw w;

static void setup(void)
{
    mem = open_memstream(&buf, &len);
    cr_assert_not_null(mem);
    jw_init(&w, mem);
}

static void teardown(void)
{
    fclose(mem);
    free(buf);
}

TestSuite(jw, .init = setup, .fini = teardown);

static const char *done(int want_rc)
{
    cr_assert_eq(jw_finish(&w), want_rc);
    return buf;
}

Test(jw, strings_escape_every_byte_that_json_or_a_terminal_minds)
{
    const char s[] = "q\"b\\n\nt\tc\x01" "del\x7f" "c1\xc2\x85" "e\xc3\xa9" "bad\xff" "cut\xe2\x82";
    jw_arr(&w);
    jw_strn(&w, s, sizeof s - 1);
    jw_arr_end(&w);
    cr_assert_str_eq(done(0), "[\"q\\\"b\\\\n\\nt\\tc\\u0001del\\u007fc1\\u0085e\xc3\xa9"
                              "bad\\ufffdcut\\ufffd\\ufffd\"]\n");
}

Test(jw, rejects_overlongs_and_surrogates)
{
    jw_arr(&w);
    jw_str(&w, "\xc0\xaf");         /* overlong '/' */
    jw_str(&w, "\xed\xa0\x80");     /* U+D800 */
    jw_str(&w, "\xf0\x9f\x98\x80"); /* U+1F600 is fine */
    jw_arr_end(&w);
    cr_assert_str_eq(done(0), "[\"\\ufffd\\ufffd\",\"\\ufffd\\ufffd\\ufffd\",\"\xf0\x9f\x98\x80\"]\n");
}

Test(jw, objects_arrays_and_numbers)
{
    jw_obj(&w);
    jw_ku64(&w, "size_bytes", 18446744073709551615ull);
    jw_ki64(&w, "offset", -3);
    jw_kf64(&w, "time_s", 0.25);
    jw_kf64(&w, "nan_s", NAN);
    jw_kf64(&w, "inf_s", INFINITY);
    jw_kbool(&w, "ok", true);
    jw_kstr(&w, "none", NULL);
    jw_key(&w, "list");
    jw_arr(&w);
    jw_u64(&w, 1);
    jw_obj(&w);
    jw_obj_end(&w);
    jw_arr(&w);
    jw_arr_end(&w);
    jw_arr_end(&w);
    jw_obj_end(&w);
    cr_assert_str_eq(done(0), "{\"size_bytes\":18446744073709551615,\"offset\":-3,"
                              "\"time_s\":0.25,\"nan_s\":null,\"inf_s\":null,\"ok\":true,"
                              "\"none\":null,\"list\":[1,{},[]]}\n");
}

Test(jw, begin_writes_the_fixed_keys)
{
    jw_begin(&w, "info");
    jw_obj_end(&w);
    char want[128];
    snprintf(want, sizeof want, "{\"pinio_version\":\"%s\",\"schema\":%d,\"command\":\"info\"}\n",
             pinio_version(), JW_SCHEMA);
    cr_assert_str_eq(done(0), want);
}

Test(jw, misuse_is_reported_not_hidden)
{
    jw_obj(&w);
    jw_key(&w, "a");
    done(-EPROTO);
}

Test(jw, unbalanced_is_reported)
{
    jw_arr(&w);
    done(-EPROTO);
}

Test(jw, too_deep_is_reported)
{
    for (int i = 0; i < JW_MAX_DEPTH + 2; i++)
        jw_arr(&w);
    for (int i = 0; i < JW_MAX_DEPTH + 2; i++)
        jw_arr_end(&w);
    done(-EPROTO);
}

Test(jw, a_full_stream_is_an_error)
{
    FILE *full = fopen("/dev/full", "w");
    cr_assert_not_null(full);
    jw f;
    jw_init(&f, full);
    jw_obj(&f);
    jw_obj_end(&f);
    cr_assert_lt(jw_finish(&f), 0);
    fclose(full);
}
