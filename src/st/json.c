/* Strict JSON pull parser; see json_internal.h for the contract and why it
 * exists. Every function checks the sticky error first, so callers may chain
 * calls and test the result once. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pinio/common.h"
#include "json_internal.h"

void pinio__json_init(pinio__json *j, const char *buf, size_t len)
{
    memset(j, 0, sizeof(*j));
    j->buf = buf;
    j->len = len;
}

int pinio__json_fail(pinio__json *j, size_t off, const char *what)
{
    if (!j->err) {
        j->err = PINIO_EFORMAT;
        j->err_off = off;
        j->err_what = what;
    }
    return PINIO_EFORMAT;
}

static void skip_ws(pinio__json *j)
{
    while (j->pos < j->len) {
        char c = j->buf[j->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
            break;
        j->pos++;
    }
}

enum pinio__json_type pinio__json_peek(pinio__json *j)
{
    if (j->err)
        return PINIO__JSON_END;
    skip_ws(j);
    if (j->pos >= j->len)
        return PINIO__JSON_END;
    switch (j->buf[j->pos]) {
    case '{':
        return PINIO__JSON_OBJECT;
    case '[':
        return PINIO__JSON_ARRAY;
    case '"':
        return PINIO__JSON_STRING;
    case 't':
        return PINIO__JSON_TRUE;
    case 'f':
        return PINIO__JSON_FALSE;
    case 'n':
        return PINIO__JSON_NULL;
    case '-':
    case '0': case '1': case '2': case '3': case '4':
    case '5': case '6': case '7': case '8': case '9':
        return PINIO__JSON_NUMBER;
    default:
        return PINIO__JSON_INVALID;
    }
}

/* Consumes `c` after optional whitespace. */
static int expect(pinio__json *j, char c, const char *what)
{
    if (j->err)
        return j->err;
    skip_ws(j);
    if (j->pos >= j->len || j->buf[j->pos] != c)
        return pinio__json_fail(j, j->pos, what);
    j->pos++;
    return 0;
}

static int open_container(pinio__json *j, char c, const char *what)
{
    int r = expect(j, c, what);
    if (r)
        return r;
    /* The bound keeps pinio__json_skip()'s recursion (and any caller's)
     * shallow; serde_json, the reference parser, stops at the same depth. */
    if (++j->depth > PINIO__JSON_MAX_DEPTH)
        return pinio__json_fail(j, j->pos - 1, "nesting deeper than 127 levels");
    return 0;
}

int pinio__json_object_begin(pinio__json *j)
{
    return open_container(j, '{', "expected an object");
}

int pinio__json_array_begin(pinio__json *j)
{
    return open_container(j, '[', "expected an array");
}

/* Shared by objects and arrays: after the opening bracket, either the closing
 * one (only if nothing came before: no trailing comma) or a ',' separator. */
static int container_next(pinio__json *j, bool *first, char close, const char *what)
{
    if (j->err)
        return j->err;
    skip_ws(j);
    if (j->pos < j->len && j->buf[j->pos] == close) {
        /* Empty container, or the end after an element; a closer right
         * after a comma never gets here (see below). */
        j->pos++;
        j->depth--;
        return 0;
    }
    if (!*first) {
        if (j->pos >= j->len || j->buf[j->pos] != ',')
            return pinio__json_fail(j, j->pos, what);
        j->pos++;
        skip_ws(j);
        /* "[1,]" and "{"a":1,}": a comma must be followed by a value. */
        if (j->pos < j->len && j->buf[j->pos] == close)
            return pinio__json_fail(j, j->pos, "trailing comma");
    }
    *first = false;
    return 1;
}

int pinio__json_object_next(pinio__json *j, bool *first, pinio__json_str *key)
{
    int r = container_next(j, first, '}', "expected ',' or '}' after an object member");
    if (r <= 0)
        return r;
    if (pinio__json_peek(j) != PINIO__JSON_STRING)
        return pinio__json_fail(j, j->pos, "expected a string key");
    if ((r = pinio__json_string(j, key)))
        return r;
    if ((r = expect(j, ':', "expected ':' after an object key")))
        return r;
    return 1;
}

int pinio__json_array_next(pinio__json *j, bool *first)
{
    return container_next(j, first, ']', "expected ',' or ']' after an array element");
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Reads the 4 hex digits after "\u" at `p`; -1 if they are not hex. */
static long hex4(const char *p)
{
    long v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(p[i]);
        if (h < 0)
            return -1;
        v = v * 16 + h;
    }
    return v;
}

static size_t utf8_len(unsigned long cp)
{
    return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
}

int pinio__json_string(pinio__json *j, pinio__json_str *out)
{
    int r = expect(j, '"', "expected a string");
    if (r)
        return r;
    const char *b = j->buf;
    size_t start = j->pos, i = start, n = j->len, dec = 0;
    bool escaped = false;
    for (;;) {
        if (i >= n)
            return pinio__json_fail(j, start - 1, "unterminated string");
        unsigned char c = (unsigned char)b[i];
        if (c == '"')
            break;
        if (c < 0x20)
            return pinio__json_fail(j, i, "raw control character in a string");
        if (c != '\\') {
            i++;
            dec++;
            continue;
        }
        escaped = true;
        if (i + 1 >= n)
            return pinio__json_fail(j, i, "unterminated escape");
        switch (b[i + 1]) {
        case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
            i += 2;
            dec++;
            continue;
        case 'u':
            break;
        default:
            return pinio__json_fail(j, i, "invalid escape");
        }
        long cp = i + 6 <= n ? hex4(b + i + 2) : -1;
        if (cp < 0)
            return pinio__json_fail(j, i, "invalid \\u escape");
        if (cp >= 0xDC00 && cp <= 0xDFFF)
            return pinio__json_fail(j, i, "lone low surrogate in \\u escape");
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            long lo = i + 12 <= n && b[i + 6] == '\\' && b[i + 7] == 'u' ? hex4(b + i + 8) : -1;
            if (lo < 0xDC00 || lo > 0xDFFF)
                return pinio__json_fail(j, i, "lone high surrogate in \\u escape");
            i += 12;
            dec += 4;
            continue;
        }
        i += 6;
        dec += utf8_len((unsigned long)cp);
    }
    out->raw = b + start;
    out->raw_len = i - start;
    out->len = dec;
    out->escaped = escaped;
    j->pos = i + 1;
    return 0;
}

static size_t put_utf8(char *d, unsigned long cp)
{
    if (cp < 0x80) {
        d[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        d[0] = (char)(0xC0 | (cp >> 6));
        d[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        d[0] = (char)(0xE0 | (cp >> 12));
        d[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        d[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    d[0] = (char)(0xF0 | (cp >> 18));
    d[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    d[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    d[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

void pinio__json_str_decode(const pinio__json_str *s, char *dst)
{
    if (!s->escaped) {
        memcpy(dst, s->raw, s->raw_len);
        dst[s->raw_len] = '\0';
        return;
    }
    const char *p = s->raw, *e = s->raw + s->raw_len;
    char *d = dst;
    while (p < e) {
        if (*p != '\\') {
            *d++ = *p++;
            continue;
        }
        char c = p[1];
        p += 2;
        switch (c) {
        case 'b': *d++ = '\b'; break;
        case 'f': *d++ = '\f'; break;
        case 'n': *d++ = '\n'; break;
        case 'r': *d++ = '\r'; break;
        case 't': *d++ = '\t'; break;
        case 'u': {
            unsigned long cp = (unsigned long)hex4(p);
            p += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF) { /* validated: a low surrogate follows */
                unsigned long lo = (unsigned long)hex4(p + 2);
                p += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            d += put_utf8(d, cp);
            break;
        }
        default: *d++ = c; break; /* '"', '\\', '/' */
        }
    }
    *d = '\0';
}

bool pinio__json_str_eq(const pinio__json_str *s, const char *lit, size_t n)
{
    if (s->len != n)
        return false;
    if (!s->escaped)
        return memcmp(s->raw, lit, n) == 0;
    /* Rare (keys are almost never escaped): decode on the stack when small. */
    char tmp[64];
    if (n >= sizeof(tmp))
        return false; /* no literal we compare against is that long */
    pinio__json_str_decode(s, tmp);
    return memcmp(tmp, lit, n) == 0;
}

size_t pinio__json_str_nul(const pinio__json_str *s)
{
    if (!s->escaped)
        return SIZE_MAX;
    for (size_t i = 0; i + 1 < s->raw_len; i++) {
        if (s->raw[i] != '\\')
            continue;
        if (s->raw[i + 1] == 'u' && i + 6 <= s->raw_len && memcmp(s->raw + i + 2, "0000", 4) == 0)
            return i;
        i++; /* the escaped character: "\\u0000" is a backslash, then text */
    }
    return SIZE_MAX;
}

/* Scans a number per RFC 8259 and reports its parts; consumes it. */
static int scan_number(pinio__json *j, bool *neg, bool *integral, size_t *start, size_t *end)
{
    const char *b = j->buf;
    size_t i = j->pos, n = j->len;
    *start = i;
    *neg = i < n && b[i] == '-';
    if (*neg)
        i++;
    if (i >= n || b[i] < '0' || b[i] > '9')
        return pinio__json_fail(j, *start, "invalid number");
    if (b[i] == '0') {
        i++;
        if (i < n && b[i] >= '0' && b[i] <= '9')
            return pinio__json_fail(j, *start, "number with a leading zero");
    } else {
        while (i < n && b[i] >= '0' && b[i] <= '9')
            i++;
    }
    *end = i; /* end of the integer part */
    *integral = true;
    if (i < n && b[i] == '.') {
        *integral = false;
        i++;
        if (i >= n || b[i] < '0' || b[i] > '9')
            return pinio__json_fail(j, *start, "invalid number (no digit after '.')");
        while (i < n && b[i] >= '0' && b[i] <= '9')
            i++;
    }
    if (i < n && (b[i] == 'e' || b[i] == 'E')) {
        *integral = false;
        i++;
        if (i < n && (b[i] == '+' || b[i] == '-'))
            i++;
        if (i >= n || b[i] < '0' || b[i] > '9')
            return pinio__json_fail(j, *start, "invalid number (no digit in exponent)");
        while (i < n && b[i] >= '0' && b[i] <= '9')
            i++;
    }
    j->pos = i;
    return 0;
}

int pinio__json_u64(pinio__json *j, uint64_t *out)
{
    if (pinio__json_peek(j) != PINIO__JSON_NUMBER)
        return pinio__json_fail(j, j->pos, "expected a non-negative integer");
    bool neg, integral;
    size_t s, e;
    int r = scan_number(j, &neg, &integral, &s, &e);
    if (r)
        return r;
    if (neg || !integral)
        return pinio__json_fail(j, s, "expected a non-negative integer");
    uint64_t v = 0;
    bool small = e - s < 20; /* 19 digits at most: below 10^19 < 2^64, no division per digit */
    for (size_t i = s; i < e; i++) {
        unsigned d = (unsigned)(j->buf[i] - '0');
        if (!small && v > (UINT64_MAX - d) / 10)
            return pinio__json_fail(j, s, "integer does not fit in 64 bits");
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

/* Whether the number text b[s, e) (valid per scan_number) is finite as an
 * IEEE double. serde_json, the reference, parses every number it does not
 * keep as u64/i64 into an f64 and rejects one that overflows ("number out
 * of range"), also inside fields it then ignores: 1e400, -1e400, or an
 * integer of 400 digits. Underflow (1e-400) is 0.0 there, and fine.
 * The decimal exponent of the first significant digit decides all but the
 * last decade; that one is left to strtod() on a bounded copy (767
 * significant digits decide any double's rounding; a sticky '1' stands for
 * whatever was cut). */
static bool number_is_finite(const char *b, size_t s, size_t e)
{
    size_t i = s;
    if (b[i] == '-')
        i++;
    int64_t point = 0; /* digits before the '.', after leading zeros */
    int64_t lead = 0;  /* zeros after the '.' before the first significant digit */
    bool seen = false, frac = false;
    size_t first = 0;
    for (; i < e && b[i] != 'e' && b[i] != 'E'; i++) {
        if (b[i] == '.') {
            frac = true;
            continue;
        }
        if (!seen && b[i] == '0') {
            if (frac)
                lead++;
            continue;
        }
        if (!seen) {
            seen = true;
            first = i;
        }
        if (!frac)
            point++;
    }
    if (!seen)
        return true; /* zero, whatever the exponent */
    int64_t exp = 0;
    if (i < e) { /* 'e' */
        i++;
        bool eneg = b[i] == '-';
        if (b[i] == '+' || b[i] == '-')
            i++;
        for (; i < e; i++)
            if (exp < 100000000)
                exp = exp * 10 + (b[i] - '0');
        if (eneg)
            exp = -exp;
    }
    /* value = 0.d1d2... x 10^mag */
    int64_t mag = (point ? point : -lead) + exp;
    if (mag <= 308)
        return true;
    if (mag > 309)
        return false;
    char tmp[800];
    size_t k = 0;
    bool cut = false;
    tmp[k++] = '.';
    for (i = first; i < e && b[i] != 'e' && b[i] != 'E'; i++) {
        if (b[i] == '.')
            continue;
        if (k < 780)
            tmp[k++] = b[i];
        else if (b[i] != '0')
            cut = true;
    }
    if (cut)
        tmp[k++] = '1';
    snprintf(tmp + k, sizeof(tmp) - k, "e309");
    return isfinite(strtod(tmp, NULL));
}

static int literal(pinio__json *j, const char *lit, size_t n)
{
    if (j->len - j->pos < n || memcmp(j->buf + j->pos, lit, n) != 0)
        return pinio__json_fail(j, j->pos, "invalid literal");
    j->pos += n;
    return 0;
}

int pinio__json_null(pinio__json *j)
{
    if (pinio__json_peek(j) != PINIO__JSON_NULL)
        return pinio__json_fail(j, j->pos, "expected null");
    return literal(j, "null", 4);
}

int pinio__json_skip(pinio__json *j)
{
    pinio__json_str s;
    bool first = true, neg, integral;
    size_t a, b;
    int r;
    switch (pinio__json_peek(j)) {
    case PINIO__JSON_OBJECT:
        if ((r = pinio__json_object_begin(j)))
            return r;
        while ((r = pinio__json_object_next(j, &first, &s)) == 1)
            if ((r = pinio__json_skip(j)))
                return r;
        return r;
    case PINIO__JSON_ARRAY:
        if ((r = pinio__json_array_begin(j)))
            return r;
        while ((r = pinio__json_array_next(j, &first)) == 1)
            if ((r = pinio__json_skip(j)))
                return r;
        return r;
    case PINIO__JSON_STRING:
        return pinio__json_string(j, &s);
    case PINIO__JSON_NUMBER:
        if ((r = scan_number(j, &neg, &integral, &a, &b)))
            return r;
        if (!number_is_finite(j->buf, a, j->pos))
            return pinio__json_fail(j, a, "number out of range (beyond a 64-bit float)");
        return 0;
    case PINIO__JSON_TRUE:
        return literal(j, "true", 4);
    case PINIO__JSON_FALSE:
        return literal(j, "false", 5);
    case PINIO__JSON_NULL:
        return literal(j, "null", 4);
    case PINIO__JSON_END:
        return j->err ? j->err : pinio__json_fail(j, j->pos, "unexpected end of input");
    default:
        return pinio__json_fail(j, j->pos, "invalid value");
    }
}

int pinio__json_finish(pinio__json *j)
{
    if (j->err)
        return j->err;
    skip_ws(j);
    if (j->pos != j->len)
        return pinio__json_fail(j, j->pos, "trailing characters after the JSON value");
    return 0;
}

bool pinio__utf8_check(const void *buf, size_t len, size_t *bad_off)
{
    const unsigned char *s = buf;
    size_t i = 0;
    while (i < len) {
        /* ASCII fast path, 8 bytes at a time: headers are almost all ASCII. */
        while (i + 8 <= len) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (w & 0x8080808080808080ull)
                break;
            i += 8;
        }
        if (i >= len)
            break;
        unsigned char c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t need;
        unsigned char lo = 0x80, hi = 0xBF; /* allowed range of the 2nd byte */
        if (c >= 0xC2 && c <= 0xDF) {
            need = 1;
        } else if (c >= 0xE0 && c <= 0xEF) {
            need = 2;
            if (c == 0xE0)
                lo = 0xA0; /* overlong */
            else if (c == 0xED)
                hi = 0x9F; /* UTF-16 surrogates */
        } else if (c >= 0xF0 && c <= 0xF4) {
            need = 3;
            if (c == 0xF0)
                lo = 0x90; /* overlong */
            else if (c == 0xF4)
                hi = 0x8F; /* above U+10FFFF */
        } else {
            goto bad;
        }
        if (len - i <= need)
            goto bad;
        if (s[i + 1] < lo || s[i + 1] > hi)
            goto bad;
        for (size_t k = 2; k <= need; k++)
            if ((s[i + k] & 0xC0) != 0x80)
                goto bad;
        i += need + 1;
    }
    return true;
bad:
    if (bad_off)
        *bad_off = i;
    return false;
}
