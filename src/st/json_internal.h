/*
 * A small, strict, allocation-free JSON pull parser (RFC 8259), written for
 * safetensors headers and index files.
 *
 * Why not a DOM library: a safetensors header is up to 10^8 bytes, and all we
 * keep from it is a few fields per tensor. A pull parser walks the bytes once
 * and lets the caller store exactly what it needs (no token array, no tree),
 * so memory is proportional to the result, not to the JSON. It also lets the
 * caller see every key, which is how duplicate keys are detected (most DOM
 * libraries silently keep the first or the last).
 *
 * Strictness: no comments, no trailing commas, no leading zeros, no NaN or
 * Infinity, no raw control characters in strings, only the escapes of RFC
 * 8259, \u escapes must form valid Unicode scalar values (lone surrogates are
 * rejected, as serde_json does), nesting is limited to PINIO__JSON_MAX_DEPTH
 * (serde_json's recursion limit), and a number pinio__json_skip() passes
 * over must be finite as a double (serde_json's "number out of range"). The input must already be valid UTF-8
 * (check with pinio__utf8_check() first); the parser does not re-check it.
 *
 * Errors: every function returns 0 / 1 on success and PINIO_EFORMAT on the
 * first error. The first error is sticky: it is recorded in the parser
 * (err_off = byte offset into the buffer, err_what = static description) and
 * every later call fails without looking at the input.
 */
#ifndef PINIO_JSON_INTERNAL_H
#define PINIO_JSON_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* serde_json's remaining_depth starts at 128 and fails when it reaches 0,
 * so the 128th open container is refused: 127 is the deepest accepted. */
#define PINIO__JSON_MAX_DEPTH 127

typedef struct pinio__json {
    const char *buf;      /* start of the document */
    size_t len;           /* its length in bytes */
    size_t pos;           /* next byte to read */
    unsigned depth;       /* containers currently open */
    int err;              /* 0 or PINIO_EFORMAT (sticky) */
    size_t err_off;       /* where the first error was found */
    const char *err_what; /* static text describing it */
} pinio__json;

/** A string token as it appears in the input (between the quotes, undecoded). */
typedef struct pinio__json_str {
    const char *raw;    /* first byte after the opening quote */
    size_t raw_len;     /* bytes up to the closing quote */
    size_t len;         /* length once decoded (<= raw_len) */
    bool escaped;       /* contains backslash escapes */
} pinio__json_str;

/** The JSON value types, as told by the first byte of a value. */
enum pinio__json_type {
    PINIO__JSON_END = 0, /* end of input (or an error is pending) */
    PINIO__JSON_OBJECT,
    PINIO__JSON_ARRAY,
    PINIO__JSON_STRING,
    PINIO__JSON_NUMBER,
    PINIO__JSON_TRUE,
    PINIO__JSON_FALSE,
    PINIO__JSON_NULL,
    PINIO__JSON_INVALID, /* a byte that cannot start a value */
};

/** Starts parsing `len` bytes at `buf` (which must outlive the parser). */
void pinio__json_init(pinio__json *j, const char *buf, size_t len);

/** Records an error at `off` (kept only if it is the first); returns PINIO_EFORMAT. */
int pinio__json_fail(pinio__json *j, size_t off, const char *what);

/** Skips whitespace and tells the type of the next value, without consuming it. */
enum pinio__json_type pinio__json_peek(pinio__json *j);

/**
 * Object iteration. pinio__json_object_begin() consumes '{'. Then, with
 * `*first` set to true before the first call, pinio__json_object_next()
 * returns 1 after consuming a member's key and its ':' (the value is next),
 * or 0 after consuming the closing '}'.
 */
int pinio__json_object_begin(pinio__json *j);
int pinio__json_object_next(pinio__json *j, bool *first, pinio__json_str *key);

/** Array iteration, the same way: 1 = an element is next, 0 = ']' consumed. */
int pinio__json_array_begin(pinio__json *j);
int pinio__json_array_next(pinio__json *j, bool *first);

/** Consumes a string value. */
int pinio__json_string(pinio__json *j, pinio__json_str *out);

/**
 * Consumes a number that must be a non-negative integer fitting in 64 bits
 * (what serde_json accepts for `usize`: no sign, no fraction, no exponent).
 */
int pinio__json_u64(pinio__json *j, uint64_t *out);

/** Consumes `null`. */
int pinio__json_null(pinio__json *j);

/** Consumes and validates any value (nested up to the depth limit). */
int pinio__json_skip(pinio__json *j);

/** Requires that only whitespace remains. */
int pinio__json_finish(pinio__json *j);

/**
 * Decodes a string token into `dst`, which must hold `s->len + 1` bytes;
 * NUL-terminates it. The token was validated when it was read, so this cannot fail.
 */
void pinio__json_str_decode(const pinio__json_str *s, char *dst);

/** True when the decoded string equals the `n` bytes at `lit`. */
bool pinio__json_str_eq(const pinio__json_str *s, const char *lit, size_t n);

/** Where the string holds a NUL once decoded: the offset in `raw` of its
 *  "\u0000" escape (the only way JSON spells one), or SIZE_MAX. */
size_t pinio__json_str_nul(const pinio__json_str *s);

/**
 * Checks that `len` bytes are well-formed UTF-8 (no overlongs, no surrogates,
 * nothing above U+10FFFF). Returns true, or false with `*bad_off` set to the
 * offset of the first byte of the first bad sequence.
 */
bool pinio__utf8_check(const void *buf, size_t len, size_t *bad_off);

#endif /* PINIO_JSON_INTERNAL_H */
