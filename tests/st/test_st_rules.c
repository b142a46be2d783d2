/* One test per validation rule of the safetensors parser (each with the
 * malformed files that the rule must catch), then the valid edge cases the
 * rules must not reject. Files are written to /tmp; a few also to /dev/shm. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

#include "pinio/safetensors.h"
#include "st_util.h"

/* Writes a file (header `json`, `data_len` data bytes), opens it with
 * pinio_st_open() and returns the result; `*st` gets the parse on success. */
static int open_image(const char *dir, const char *json, size_t jlen, uint64_t claimed,
                      size_t data_len, unsigned flags, pinio_diag *d, pinio_st **st,
                      char **path_out)
{
    size_t len;
    uint8_t *img = st_image(json, jlen, claimed, data_len, &len);
    char *path = st_write_tmp(dir, img, len);
    free(img);
    memset(d, 0x55, sizeof(*d));
    int r = pinio_st_open(st, path, flags, d);
    unlink(path);
    if (path_out)
        *path_out = path;
    else
        free(path);
    return r;
}

/* Expects rejection with PINIO_EFORMAT, the rule and detail in a one-line
 * message that names the file, and no result. */
static void reject_flags(const char *json, size_t data_len, unsigned flags, const char *rule,
                         const char *detail)
{
    pinio_diag d;
    pinio_st *st = (pinio_st *)1;
    char *path;
    int r = open_image("/tmp", json, strlen(json), UINT64_MAX, data_len, flags, &d, &st, &path);
    cr_assert_eq(r, PINIO_EFORMAT, "%s: got %d (%s) for %s", rule, r, d.msg, json);
    cr_assert_null(st);
    cr_assert_eq(d.code, PINIO_EFORMAT);
    cr_assert(strstr(d.msg, rule), "want rule %s, got: %s", rule, d.msg);
    cr_assert(strstr(d.msg, detail), "want '%s' in: %s", detail, d.msg);
    cr_assert(strstr(d.msg, path), "file not named: %s", d.msg);
    cr_assert_null(strchr(d.msg, '\n'));
    free(path);
}

static void reject(const char *json, size_t data_len, const char *rule, const char *detail)
{
    reject_flags(json, data_len, 0, rule, detail);
}

static pinio_st *accept_in(const char *dir, const char *json, size_t jlen, size_t data_len,
                           unsigned flags)
{
    pinio_diag d;
    pinio_st *st = NULL;
    int r = open_image(dir, json, jlen, UINT64_MAX, data_len, flags, &d, &st, NULL);
    cr_assert_eq(r, 0, "rejected (%d): %s\n%s", r, d.msg, json);
    cr_assert_not_null(st);
    cr_assert_eq(d.code, 0);
    return st;
}

static pinio_st *accept(const char *json, size_t data_len)
{
    return accept_in("/tmp", json, strlen(json), data_len, 0);
}

#define T1(name, dtype, shape, b, e) \
    "\"" name "\":{\"dtype\":\"" dtype "\",\"shape\":" shape ",\"data_offsets\":[" #b "," #e "]}"

/* ---------------------------------------------------------------- rules */

Test(st_rules, header_too_small)
{
    for (size_t n = 0; n < 8; n++) {
        uint8_t b[8] = {2, 0, 0, 0, 0, 0, 0, 0};
        char *path = st_write_tmp("/tmp", b, n);
        pinio_diag d;
        pinio_st *st;
        int r = pinio_st_open(&st, path, 0, &d);
        unlink(path);
        cr_assert_eq(r, PINIO_EFORMAT, "%zu-byte file", n);
        cr_assert(strstr(d.msg, "HeaderTooSmall"), "%s", d.msg);
        cr_assert(strstr(d.msg, path), "%s", d.msg);
        free(path);
    }
}

Test(st_rules, header_too_large)
{
    /* Claims far beyond the cap must be refused from the 8 bytes alone,
     * before anything is allocated (2^63 would fail malloc otherwise). */
    const uint64_t claims[] = {PINIO_ST_HEADER_MAX + 1ull, 1ull << 63, UINT64_MAX - 1};
    for (size_t i = 0; i < 3; i++) {
        pinio_diag d;
        pinio_st *st;
        int r = open_image("/tmp", "{}", 2, claims[i], 0, 0, &d, &st, NULL);
        cr_assert_eq(r, PINIO_EFORMAT);
        cr_assert(strstr(d.msg, "HeaderTooLarge"), "%s", d.msg);
        cr_assert(strstr(d.msg, "byte 0"), "%s", d.msg);
    }
    /* Exactly at the cap is not too large; it then runs past this small file. */
    pinio_diag d;
    pinio_st *st;
    int r = open_image("/tmp", "{}", 2, PINIO_ST_HEADER_MAX, 0, 0, &d, &st, NULL);
    cr_assert_eq(r, PINIO_EFORMAT);
    cr_assert(strstr(d.msg, "InvalidHeaderLength"), "%s", d.msg);
}

Test(st_rules, invalid_header_length)
{
    pinio_diag d;
    pinio_st *st;
    /* N = 3 but only 2 header bytes follow. */
    int r = open_image("/tmp", "{}", 2, 3, 0, 0, &d, &st, NULL);
    cr_assert_eq(r, PINIO_EFORMAT);
    cr_assert(strstr(d.msg, "InvalidHeaderLength"), "%s", d.msg);
    cr_assert(strstr(d.msg, "10-byte file"), "%s", d.msg);
    /* The same from the buffer API: the rule uses the file size given. */
    uint8_t hdr[10] = {3, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
    r = pinio_st_parse(&st, hdr, sizeof(hdr), sizeof(hdr), "mem", 0, &d);
    cr_assert_eq(r, PINIO_EFORMAT);
    cr_assert(strstr(d.msg, "mem: InvalidHeaderLength"), "%s", d.msg);
    /* pinio_st_header_len alone. */
    uint64_t n = 7;
    cr_assert_eq(pinio_st_header_len(hdr, 11, NULL, &n, &d), 0);
    cr_assert_eq(n, 3);
}

Test(st_rules, invalid_utf8)
{
    static const struct {
        const char *json;
        const char *at;
    } cases[] = {
        {"{\"a\xff\":1}", "header byte 3 "},           /* never valid */
        {"{\"a\xc0\xaf\":1}", "header byte 3 "},       /* overlong '/' */
        {"{\"ab\xed\xa0\x80\":1}", "header byte 4 "},  /* UTF-16 surrogate */
        {"{\"a\xf4\x90\x80\x80\":1}", "header byte 3 "}, /* above U+10FFFF */
        {"{\"a\xe2\x82\":1}", "header byte 3 "},        /* truncated sequence */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        reject(cases[i].json, 0, "InvalidHeader:", cases[i].at);
}

Test(st_rules, json_syntax)
{
    reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],}}", 4,
           "InvalidHeaderDeserialization", "trailing comma");
    reject("{\"a\":{\"dtype\":\"F32\" \"shape\":[1]}}", 4, "InvalidHeaderDeserialization",
           "expected ',' or '}'");
    reject("{} x", 0, "InvalidHeaderDeserialization", "trailing characters");
    reject("{", 0, "InvalidHeaderDeserialization", "header byte 1");
    reject("", 0, "InvalidHeaderDeserialization", "not a JSON object");
    reject("{/*c*/}", 0, "InvalidHeaderDeserialization", "expected a string key");
    reject("{\"a\\x\":1}", 0, "InvalidHeaderDeserialization", "invalid escape");
}

Test(st_rules, json_not_an_object)
{
    reject("[]", 0, "InvalidHeaderDeserialization", "not a JSON object");
    reject("\"x\"", 0, "InvalidHeaderDeserialization", "not a JSON object");
    reject("{\"a\":[1]}", 0, "InvalidHeaderDeserialization", "tensor 'a': entry is not an object");
    reject("{\"a\":null}", 0, "InvalidHeaderDeserialization", "tensor 'a': entry is not an object");
}

Test(st_rules, json_missing_and_duplicate_fields)
{
    reject("{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, "InvalidHeaderDeserialization",
           "tensor 'w': missing field 'shape'");
    reject("{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "InvalidHeaderDeserialization",
           "missing field 'dtype'");
    reject("{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "InvalidHeaderDeserialization",
           "missing field 'data_offsets'");
    reject("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4,
           "InvalidHeaderDeserialization", "duplicate field 'dtype'");
}

Test(st_rules, json_unknown_dtype)
{
    reject("{" T1("w", "F7", "[1]", 0, 1) "}", 1, "InvalidHeaderDeserialization",
           "tensor 'w': unknown dtype 'F7'");
    /* Names are case-sensitive, as in the reference. */
    reject("{" T1("w", "f32", "[1]", 0, 4) "}", 4, "InvalidHeaderDeserialization",
           "unknown dtype 'f32'");
    reject("{\"w\":{\"dtype\":32,\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
           "InvalidHeaderDeserialization", "dtype is not a string");
}

Test(st_rules, json_bad_dims)
{
    reject("{" T1("w", "F32", "[-1]", 0, 4) "}", 4, "InvalidHeaderDeserialization",
           "non-negative integer in tensor 'w'");
    reject("{" T1("w", "F32", "[1.0]", 0, 4) "}", 4, "InvalidHeaderDeserialization",
           "non-negative integer");
    reject("{" T1("w", "F32", "[1e0]", 0, 4) "}", 4, "InvalidHeaderDeserialization",
           "non-negative integer");
    reject("{" T1("w", "F32", "[\"1\"]", 0, 4) "}", 4, "InvalidHeaderDeserialization",
           "non-negative integer");
    reject("{" T1("w", "F32", "[18446744073709551616]", 0, 4) "}", 4,
           "InvalidHeaderDeserialization", "does not fit in 64 bits");
    reject("{" T1("w", "F32", "[01]", 0, 4) "}", 4, "InvalidHeaderDeserialization",
           "leading zero");
    reject("{" T1("w", "F32", "4", 0, 4) "}", 4, "InvalidHeaderDeserialization",
           "shape is not an array");
}

Test(st_rules, json_bad_offsets)
{
    reject("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 4,
           "InvalidHeaderDeserialization", "data_offsets is not a pair");
    reject("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4]}}", 4,
           "InvalidHeaderDeserialization", "data_offsets is not a pair");
    reject("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,-4]}}", 4,
           "InvalidHeaderDeserialization", "non-negative integer");
    reject("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":{}}}", 4,
           "InvalidHeaderDeserialization", "data_offsets is not an array");
}

Test(st_rules, json_bad_metadata)
{
    reject("{\"__metadata__\":{\"a\":1}}", 0, "InvalidHeaderDeserialization",
           "__metadata__ value of key 'a' is not a string");
    reject("{\"__metadata__\":{\"a\":{\"b\":\"c\"}}}", 0, "InvalidHeaderDeserialization",
           "not a string");
    reject("{\"__metadata__\":[\"a\"]}", 0, "InvalidHeaderDeserialization",
           "__metadata__ is not an object");
    reject("{\"__metadata__\":\"x\"}", 0, "InvalidHeaderDeserialization",
           "__metadata__ is not an object");
}

Test(st_rules, json_unknown_field_strict)
{
    const char *j = "{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"x\":[{}]}}";
    /* Ignored by default (the reference ignores it) ... */
    pinio_st_free(accept(j, 1));
    /* ... rejected on request (the schema's additionalProperties: false). */
    reject_flags(j, 1, PINIO_ST_REJECT_UNKNOWN_FIELDS, "InvalidHeaderDeserialization",
                 "tensor 'w': unknown field 'x'");
}

/* A tensor entry whose unknown field "x" holds `k` nested arrays: with the
 * top-level object and the entry, the document nests k + 2 deep. */
static char *deep_entry(int k)
{
    char *j = malloc(4096);
    cr_assert_not_null(j);
    size_t n = (size_t)sprintf(j, "{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"x\":");
    for (int i = 0; i < k; i++)
        j[n++] = '[';
    for (int i = 0; i < k; i++)
        j[n++] = ']';
    strcpy(j + n, "}}");
    return j;
}

Test(st_rules, json_depth_limit)
{
    /* An ignored field may hold any JSON, but not nested without bound:
     * serde_json refuses the 128th level, so 127 is the deepest accepted. */
    char *j = deep_entry(125);
    pinio_st_free(accept(j, 1));
    free(j);
    j = deep_entry(126);
    reject(j, 1, "InvalidHeaderDeserialization", "nesting deeper than 127");
    free(j);
    j = deep_entry(200);
    reject(j, 1, "InvalidHeaderDeserialization", "nesting deeper than 127");
    free(j);
}

/* serde_json parses every number of an ignored field and refuses one beyond
 * a double ("number out of range"); underflow is 0.0 there, and accepted. */
Test(st_rules, numbers_out_of_range_in_unknown_fields)
{
    static const char *ok[] = {
        "1e308", "-1e308", "1.7976931348623157e308", "17976931348623157e292", "1e-400", "0e999999",
        "0.000e400", "123456789012345678901234567890", "-0.5", "1.7976931348623158e308",
    };
    static const char *bad[] = {
        "1e400", "-1e400", "1e309", "1.7976931348623159e308", "1.8e308", "0.1e310",
        "1e99999999999999999999",
    };
    char j[1024];
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        snprintf(j, sizeof j, "{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"x\":[%s]}}", ok[i]);
        pinio_st_free(accept(j, 1));
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(j, sizeof j, "{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"x\":{\"y\":%s}}}", bad[i]);
        reject(j, 1, "InvalidHeaderDeserialization", "number out of range");
    }
    /* An integer of 309 digits is below DBL_MAX's 1.79e308 only up to 1797...;
     * 400 digits is out of range, 300 is not. */
    char big[600];
    for (int digits = 300; digits <= 400; digits += 100) {
        memset(big, '9', (size_t)digits);
        big[digits] = '\0';
        snprintf(j, sizeof j, "{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"x\":%s}}", big);
        if (digits == 300)
            pinio_st_free(accept(j, 1));
        else
            reject(j, 1, "InvalidHeaderDeserialization", "number out of range");
    }
}

/* Stricter than the reference, documented in safetensors.h: an entry as an
 * array, a dtype as an enum object, a NUL in a tensor name. */
Test(st_rules, documented_rejections)
{
    reject("{\"w\":[\"U8\",[1],[0,1]]}", 1, "InvalidHeaderDeserialization", "tensor 'w'");
    reject("{\"w\":{\"dtype\":{\"U8\":null},\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
           "InvalidHeaderDeserialization", "tensor 'w'");
    /* "a\u0000b" would load as "a"; its escape starts at header byte 3. */
    reject("{\"a\\u0000b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
           "InvalidHeaderDeserialization", "contains a NUL (\\u0000 at header byte 3, file offset 11)");
    /* An escaped backslash followed by the text u0000 is no NUL. */
    pinio_st *st = accept("{\"a\\\\u0000\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1);
    cr_assert_str_eq(pinio_st_at(st, 0)->name, "a\\u0000");
    pinio_st_free(st);
}

Test(st_rules, duplicate_tensor_name)
{
    /* serde would keep the last entry; the orphan range hides behind it here
     * because both have the same offsets, so only a duplicate check catches it. */
    reject("{" T1("w", "U8", "[1]", 0, 1) "," T1("w", "U8", "[1]", 0, 1) "}", 1, "DuplicateKey",
           "tensor 'w' appears twice");
    /* Equal after decoding escapes. */
    reject("{" T1("w", "U8", "[1]", 0, 1) "," T1("\\u0077", "U8", "[1]", 1, 2) "}", 2,
           "DuplicateKey", "tensor 'w'");
}

Test(st_rules, duplicate_metadata)
{
    reject("{\"__metadata__\":{\"k\":\"a\",\"k\":\"b\"}}", 0, "DuplicateKey",
           "__metadata__ key 'k' appears twice");
    reject("{\"__metadata__\":{},\"__metadata__\":{}}", 0, "DuplicateKey",
           "__metadata__ appears twice");
}

Test(st_rules, invalid_offset)
{
    /* gap at the start, gap between, overlap, END < BEGIN, duplicated range */
    reject("{" T1("a", "U8", "[1]", 1, 2) "}", 2, "InvalidOffset", "tensor 'a' data_offsets [1, 2]: a gap");
    reject("{" T1("a", "U8", "[1]", 0, 1) "," T1("b", "U8", "[1]", 2, 3) "}", 3, "InvalidOffset",
           "tensor 'b'");
    reject("{" T1("a", "U8", "[2]", 0, 2) "," T1("b", "U8", "[2]", 1, 3) "}", 3, "InvalidOffset",
           "overlaps");
    reject("{" T1("a", "U8", "[1]", 0, 1) "," T1("b", "U8", "[0]", 1, 0) "}", 1, "InvalidOffset",
           "tensor 'b'");
    reject("{" T1("a", "U8", "[2]", 0, 2) "," T1("b", "U8", "[2]", 0, 2) "}", 2, "InvalidOffset",
           "overlaps");
}

Test(st_rules, validation_overflow)
{
    /* element count: 2^32 * 2^32 wraps */
    reject("{" T1("a", "U8", "[4294967296,4294967296]", 0, 0) "}", 0, "ValidationOverflow",
           "tensor 'a' shape [4294967296, 4294967296]: element count");
    /* bit count: 2^62 elements * 32 bits */
    reject("{" T1("a", "F32", "[4611686018427387904]", 0, 0) "}", 0, "ValidationOverflow",
           "bit count");
}

Test(st_rules, misaligned_slice)
{
    reject("{" T1("a", "F4", "[3]", 0, 1) "}", 1, "MisalignedSlice", "tensor 'a' F4 shape [3] is 12 bits");
    reject("{" T1("a", "F6_E2M3", "[2]", 0, 1) "}", 1, "MisalignedSlice", "12 bits");
    reject("{" T1("a", "F6_E3M2", "[1,3]", 0, 2) "}", 2, "MisalignedSlice", "18 bits");
}

Test(st_rules, tensor_invalid_info)
{
    reject("{" T1("a", "F32", "[2]", 0, 4) "}", 4, "TensorInvalidInfo",
           "tensor 'a' F32 shape [2] is 8 bytes but data_offsets [0, 4] span 4");
    reject("{" T1("a", "BF16", "[]", 0, 4) "}", 4, "TensorInvalidInfo", "shape [] is 2 bytes");
    reject("{" T1("a", "F4", "[4]", 0, 1) "}", 1, "TensorInvalidInfo", "is 2 bytes");
}

Test(st_rules, metadata_incomplete_buffer)
{
    const char *j = "{" T1("a", "U8", "[4]", 0, 4) "}";
    reject(j, 5, "MetadataIncompleteBuffer", "trailing bytes");
    reject(j, 3, "MetadataIncompleteBuffer", "truncated");
    reject("{}", 1, "MetadataIncompleteBuffer", "trailing bytes");
    /* The lenient flag accepts trailing bytes, never a truncation. */
    pinio_st *st = accept_in("/tmp", j, strlen(j), 5, PINIO_ST_ALLOW_TRAILING_BYTES);
    cr_assert_eq(pinio_st_data_size(st), 4);
    pinio_st_free(st);
    reject_flags(j, 3, PINIO_ST_ALLOW_TRAILING_BYTES, "MetadataIncompleteBuffer", "truncated");
    /* A data end near 2^64 must not wrap around to the file size: sixteen
     * U8 tensors tile [0, 2^64 - 1), each valid on its own. */
    char big[2048];
    size_t n = (size_t)snprintf(big, sizeof(big), "{");
    for (unsigned i = 0; i < 16; i++) {
        uint64_t b = (uint64_t)i << 60, e = i == 15 ? UINT64_MAX : b + (1ull << 60);
        n += (size_t)snprintf(big + n, sizeof(big) - n,
                              "%s\"t%u\":{\"dtype\":\"U8\",\"shape\":[%llu],\"data_offsets\":[%llu,%llu]}",
                              i ? "," : "", i, (unsigned long long)(e - b), (unsigned long long)b,
                              (unsigned long long)e);
    }
    snprintf(big + n, sizeof(big) - n, "}");
    reject(big, 0, "MetadataIncompleteBuffer", "truncated");
}

/* ---------------------------------------------------------- valid files */

Test(st_valid, empty_and_whitespace)
{
    pinio_st *st = accept("{}", 0);
    cr_assert_eq(pinio_st_count(st), 0);
    cr_assert_eq(pinio_st_data_size(st), 0);
    cr_assert_eq(pinio_st_header_size(st), 2);
    cr_assert_eq(pinio_st_data_offset(st), 10);
    cr_assert_eq(pinio_st_file_size(st), 10);
    cr_assert_null(pinio_st_at(st, 0));
    cr_assert_null(pinio_st_find(st, "a", 1));
    pinio_st_free(st);

    const char *j = " \t\n\r{" T1("a", "U8", "[2]", 0, 2) "}        \n";
    st = accept(j, 2);
    cr_assert_eq(pinio_st_count(st), 1);
    cr_assert_eq(pinio_st_header_size(st), strlen(j));
    cr_assert_eq(pinio_st_at(st, 0)->file_offset, 8 + strlen(j));
    pinio_st_free(st);
}

Test(st_valid, zero_sized_scalars_and_order)
{
    /* Keys out of offset order; two empty tensors share offset 4 with the
     * start of 'c'; a scalar; file order must be by (begin, end, key order). */
    const char *j = "{" T1("c", "F32", "[]", 4, 8) "," T1("z1", "F16", "[0,7]", 4, 4) ","
                    T1("a", "F32", "[1]", 0, 4) "," T1("z0", "I64", "[3,0]", 4, 4) ","
                    T1("e", "U8", "[0]", 8, 8) "}";
    pinio_st *st = accept(j, 8);
    cr_assert_eq(pinio_st_count(st), 5);
    const char *want[] = {"a", "z1", "z0", "c", "e"};
    for (size_t i = 0; i < 5; i++) {
        const pinio_st_tensor *t = pinio_st_at(st, i);
        cr_assert_str_eq(t->name, want[i]);
        cr_assert_eq(pinio_st_position(st, t), i);
        cr_assert_eq(pinio_st_find(st, want[i], strlen(want[i])), t);
    }
    const pinio_st_tensor *c = pinio_st_find(st, "c", 1);
    cr_assert_eq(c->rank, 0);
    cr_assert_eq(c->nelems, 1);
    cr_assert_eq(c->nbytes, 4);
    cr_assert_not_null(c->shape);
    const pinio_st_tensor *z = pinio_st_find(st, "z1", 2);
    cr_assert_eq(z->rank, 2);
    cr_assert_eq(z->shape[0], 0);
    cr_assert_eq(z->shape[1], 7);
    cr_assert_eq(z->nbytes, 0);
    cr_assert_eq(z->nelems, 0);
    cr_assert_eq(pinio_st_data_size(st), 8);
    pinio_st_free(st);
}

Test(st_valid, every_dtype)
{
    char j[4096];
    size_t n = 0;
    uint64_t off = 0;
    n += (size_t)snprintf(j + n, sizeof(j) - n, "{");
    for (unsigned d = 0; d < PINIO_DTYPE_COUNT; d++) {
        unsigned bits = pinio_dtype_bits((pinio_dtype)d);
        cr_assert(bits == 4 || bits == 6 || bits % 8 == 0, "%u", bits);
        uint64_t nbytes = 4 * bits / 8; /* 4 elements: whole bytes for every dtype */
        n += (size_t)snprintf(j + n, sizeof(j) - n,
                              "%s\"t%u\":{\"dtype\":\"%s\",\"shape\":[2,2],\"data_offsets\":[%llu,%llu]}",
                              d ? "," : "", d, pinio_dtype_name((pinio_dtype)d),
                              (unsigned long long)off, (unsigned long long)(off + nbytes));
        off += nbytes;
    }
    snprintf(j + n, sizeof(j) - n, "}");
    pinio_st *st = accept(j, off);
    cr_assert_eq(pinio_st_count(st), PINIO_DTYPE_COUNT);
    for (unsigned d = 0; d < PINIO_DTYPE_COUNT; d++) {
        const pinio_st_tensor *t = pinio_st_at(st, d);
        cr_assert_eq(t->dtype, (pinio_dtype)d);
        cr_assert_eq(t->nbytes, 4 * pinio_dtype_bits(t->dtype) / 8);
        pinio_dtype back;
        const char *nm = pinio_dtype_name(t->dtype);
        cr_assert_eq(pinio_dtype_from_name(nm, strlen(nm), &back), 0);
        cr_assert_eq(back, t->dtype);
    }
    cr_assert_eq(pinio_dtype_bits(PINIO_DTYPE_F4), 4);
    cr_assert_eq(pinio_dtype_bits(PINIO_DTYPE_F6_E3M2), 6);
    cr_assert_eq(pinio_dtype_bits(PINIO_DTYPE_C64), 64);
    cr_assert_eq(pinio_dtype_bits(PINIO_DTYPE_COUNT), 0);
    cr_assert_str_eq(pinio_dtype_name(PINIO_DTYPE_F8_E4M3FNUZ), "F8_E4M3FNUZ");
    pinio_dtype x = PINIO_DTYPE_U8;
    cr_assert_eq(pinio_dtype_from_name("F3", 2, &x), -EINVAL);
    cr_assert_eq(x, PINIO_DTYPE_U8);
    pinio_st_free(st);
}

Test(st_valid, metadata_and_escapes)
{
    const char *j = "{\"__metadata__\":{\"format\":\"pt\",\"caf\\u00e9\":\"a\\nb\\\"\\ud83d\\ude00\"},"
                    T1("\\u00e9t\\u00e9/x", "U8", "[1]", 0, 1) ",\"w\\u0001z\":"
                    "{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}";
    pinio_st *st = accept(j, 2);
    cr_assert_eq(pinio_st_metadata_count(st), 2);
    cr_assert_str_eq(pinio_st_metadata_get(st, "format"), "pt");
    cr_assert_str_eq(pinio_st_metadata_get(st, "caf\xc3\xa9"), "a\nb\"\xf0\x9f\x98\x80");
    cr_assert_null(pinio_st_metadata_get(st, "nope"));
    const pinio_st_kv *kv = pinio_st_metadata_at(st, 1);
    cr_assert_eq(kv->key_len, 5);
    cr_assert_eq(kv->value_len, 8);
    cr_assert_null(pinio_st_metadata_at(st, 2));
    cr_assert_not_null(pinio_st_find(st, "\xc3\xa9t\xc3\xa9/x", 7));
    /* An escaped control character (a NUL is refused: documented_rejections). */
    const pinio_st_tensor *t = pinio_st_find(st, "w\x01z", 3);
    cr_assert_not_null(t);
    cr_assert_eq(t->name_len, 3);
    cr_assert_null(pinio_st_find(st, "w", 1));
    pinio_st_free(st);

    /* __metadata__: null means none, as serde's Option does. */
    st = accept("{\"__metadata__\":null}", 0);
    cr_assert_eq(pinio_st_metadata_count(st), 0);
    pinio_st_free(st);
}

Test(st_valid, alignment_reported)
{
    /* The header is padded so that data starts at file offset 4096; the F32
     * tensor at data byte 2 then sits at 4098, only 2-aligned. */
    const char *j = "{" T1("a", "U8", "[2]", 0, 2) "," T1("b", "F32", "[2]", 2, 10) "}";
    size_t jl = strlen(j), n = 4096 - 8;
    char *big = malloc(n);
    cr_assert_not_null(big);
    memcpy(big, j, jl);
    memset(big + jl, ' ', n - jl);
    pinio_st *st = accept_in("/tmp", big, n, 10, 0);
    cr_assert_eq(pinio_st_data_offset(st), 4096);
    cr_assert_eq(pinio_st_at(st, 0)->file_offset, 4096);
    cr_assert_eq(pinio_st_at(st, 0)->align, 4096);
    cr_assert_eq(pinio_st_at(st, 1)->file_offset, 4098);
    cr_assert_eq(pinio_st_at(st, 1)->align, 2);
    pinio_st_free(st);
    free(big);
}

Test(st_valid, tmpfs_and_buffer_api)
{
    const char *j = "{" T1("a", "U8", "[3]", 0, 3) "}";
    pinio_st *st = accept_in("/dev/shm", j, strlen(j), 3, 0);
    cr_assert_eq(pinio_st_count(st), 1);
    pinio_st_free(st);

    size_t len;
    uint8_t *img = st_image(j, strlen(j), UINT64_MAX, 3, &len);
    pinio_diag d;
    /* The header alone is enough when the file size is given. */
    cr_assert_eq(pinio_st_parse(&st, img, 8 + strlen(j), len, "x", 0, &d), 0, "%s", d.msg);
    cr_assert_eq(pinio_st_at(st, 0)->nbytes, 3);
    pinio_st_free(st);
    /* A buffer shorter than the header it announces is a caller error. */
    cr_assert_eq(pinio_st_parse(&st, img, 8 + strlen(j) - 1, len, "x", 0, &d), -EINVAL);
    cr_assert_null(st);
    cr_assert_eq(pinio_st_parse(&st, img, 4, len, "x", 0, NULL), -EINVAL);
    free(img);
}

Test(st_valid, io_errors)
{
    pinio_diag d;
    pinio_st *st;
    cr_assert_eq(pinio_st_open(&st, "/nonexistent/pinio.safetensors", 0, &d), -ENOENT);
    cr_assert(strstr(d.msg, "/nonexistent/pinio.safetensors"), "%s", d.msg);
    cr_assert_null(st);
    cr_assert_eq(pinio_st_open(&st, "/tmp", 0, &d), -EISDIR);
    cr_assert_eq(pinio_st_open(&st, "/dev/null", 0, NULL), -EINVAL);

    /* pinio_st_read_fd reads with pread: the caller's file offset is kept. */
    const char *j = "{" T1("a", "U8", "[1]", 0, 1) "}";
    size_t len;
    uint8_t *img = st_image(j, strlen(j), UINT64_MAX, 1, &len);
    char *path = st_write_tmp("/tmp", img, len);
    int fd = open(path, O_RDONLY);
    cr_assert(fd >= 0);
    cr_assert_eq(lseek(fd, 5, SEEK_SET), 5);
    cr_assert_eq(pinio_st_read_fd(&st, fd, path, 0, &d), 0, "%s", d.msg);
    cr_assert_eq(lseek(fd, 0, SEEK_CUR), 5);
    cr_assert_eq(pinio_st_count(st), 1);
    pinio_st_free(st);
    close(fd);
    unlink(path);
    free(path);
    free(img);
}

Test(st_valid, hundred_thousand_tensors)
{
    /* 100k tensors, keys in reverse offset order, parsed from memory; every
     * name must be found and file order must be by offset. */
    const size_t n = 100000;
    size_t cap = n * 96 + 16, len = 0;
    char *j = malloc(cap);
    cr_assert_not_null(j);
    j[len++] = '{';
    for (size_t i = n; i-- > 0;)
        len += (size_t)snprintf(j + len, cap - len,
                                "%s\"model.layers.%zu.w\":{\"dtype\":\"F32\",\"shape\":[1],"
                                "\"data_offsets\":[%zu,%zu]}",
                                i == n - 1 ? "" : ",", i, 4 * i, 4 * i + 4);
    j[len++] = '}';
    uint8_t *img = malloc(len + 8);
    for (int i = 0; i < 8; i++)
        img[i] = (uint8_t)((uint64_t)len >> (8 * i));
    memcpy(img + 8, j, len);
    pinio_st *st;
    pinio_diag d;
    cr_assert_eq(pinio_st_parse(&st, img, len + 8, len + 8 + 4 * n, "big", 0, &d), 0, "%s", d.msg);
    cr_assert_eq(pinio_st_count(st), n);
    char name[64];
    for (size_t i = 0; i < n; i++) {
        int k = snprintf(name, sizeof(name), "model.layers.%zu.w", i);
        const pinio_st_tensor *t = pinio_st_find(st, name, (size_t)k);
        cr_assert_not_null(t, "%s", name);
        cr_assert_eq(t->begin, 4 * i);
        cr_assert_eq(pinio_st_at(st, i), t);
    }
    pinio_st_free(st);
    free(img);
    free(j);
}
