/* The credential sources' flat-object JSON reader (see
 * jsonflat_internal.h). Why not src/st/'s JSON parser: src/s3/ sits below
 * src/st/ in the layers (tests/check_layers_test.sh, the `layers` and
 * `circles` lint tests), and these answers need none of its depth: one
 * object, a few string or number members.
 *
 * Strict where the three readers it replaces differed: the number and
 * literal grammar exactly JSON's, nothing after the object, no NUL and no
 * surrogate from \u, a wanted member given twice refused (which one a
 * server meant is not ours to guess). What the callers differ in on
 * purpose is a flag: nested values (AWS's and Entra's answers carry some,
 * a key file none) and non-ASCII escapes (Entra's tokens and error codes
 * have none; an AWS secret may). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "src/s3/jsonflat_internal.h"

#define DEPTH_MAX 64

typedef struct rd {
    const char *p, *end;
    unsigned flags;
    bool oom;
} rd;

static void ws(rd *r)
{
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
        r->p++;
}

static int hex(char ch)
{
    return ch >= '0' && ch <= '9'   ? ch - '0'
           : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
           : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                    : -1;
}

static void wipe_free(char *s, size_t n)
{
    if (s) {
        explicit_bzero(s, n);
        free(s);
    }
}

/* A string at r->p, decoded into *out (malloc'ed) when out, else checked
 * and passed over. */
static bool string(rd *r, char **out)
{
    if (r->p >= r->end || *r->p != '"')
        return false;
    const char *q = r->p + 1;
    /* Decoded is never longer than the text: \uXXXX (6) gives at most 3. */
    size_t cap = (size_t)(r->end - q) + 1, w = 0;
    char *o = out ? malloc(cap) : NULL;
    if (out && !o) {
        r->oom = true;
        return false;
    }
    bool ok = false;
    while (q < r->end) {
        unsigned char ch = (unsigned char)*q++;
        if (ch == '"') {
            ok = true;
            break;
        }
        if (ch < 0x20)
            break;
        if (ch != '\\') {
            if (o)
                o[w++] = (char)ch;
            continue;
        }
        if (q >= r->end)
            break;
        char e = *q++;
        static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
        const char *k = e ? strchr(from, e) : NULL;
        if (k) {
            if (o)
                o[w++] = to[k - from];
            continue;
        }
        if (e != 'u' || r->end - q < 4)
            break;
        unsigned v = 0;
        int i = 0;
        for (; i < 4 && hex(q[i]) >= 0; i++)
            v = v << 4 | (unsigned)hex(q[i]);
        if (i < 4 || v == 0 || (v >= 0xd800 && v < 0xe000) ||
            (v >= 0x80 && (r->flags & PINIO__S3_JFLAT_ASCII)))
            break;
        q += 4;
        if (!o)
            continue;
        if (v < 0x80) {
            o[w++] = (char)v;
        } else if (v < 0x800) {
            o[w++] = (char)(0xc0 | v >> 6);
            o[w++] = (char)(0x80 | (v & 0x3f));
        } else {
            o[w++] = (char)(0xe0 | v >> 12);
            o[w++] = (char)(0x80 | (v >> 6 & 0x3f));
            o[w++] = (char)(0x80 | (v & 0x3f));
        }
    }
    if (!ok) {
        wipe_free(o, w);
        return false;
    }
    r->p = q;
    if (o) {
        o[w] = '\0';
        *out = o;
    }
    return true;
}

static bool digits(rd *r)
{
    const char *a = r->p;
    while (r->p < r->end && *r->p >= '0' && *r->p <= '9')
        r->p++;
    return r->p > a;
}

/* -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
static bool number(rd *r)
{
    if (r->p < r->end && *r->p == '-')
        r->p++;
    if (r->p < r->end && *r->p == '0')
        r->p++;
    else if (r->p >= r->end || *r->p < '1' || *r->p > '9' || !digits(r))
        return false;
    if (r->p < r->end && *r->p == '.' && (r->p++, !digits(r)))
        return false;
    if (r->p < r->end && (*r->p == 'e' || *r->p == 'E')) {
        r->p++;
        if (r->p < r->end && (*r->p == '+' || *r->p == '-'))
            r->p++;
        if (!digits(r))
            return false;
    }
    return true;
}

/* Any value but a string's decoding: checked and passed over. */
static bool value(rd *r, int depth)
{
    ws(r);
    if (r->p >= r->end)
        return false;
    char c = *r->p;
    if (c == '"')
        return string(r, NULL);
    if (c == '{' || c == '[') {
        if (!(r->flags & PINIO__S3_JFLAT_NESTED) || depth >= DEPTH_MAX)
            return false;
        char close = c == '{' ? '}' : ']';
        r->p++;
        ws(r);
        if (r->p < r->end && *r->p == close) {
            r->p++;
            return true;
        }
        for (;;) {
            if (c == '{') {
                ws(r);
                if (!string(r, NULL))
                    return false;
                ws(r);
                if (r->p >= r->end || *r->p++ != ':')
                    return false;
            }
            if (!value(r, depth + 1))
                return false;
            ws(r);
            if (r->p < r->end && *r->p == ',') {
                r->p++;
                continue;
            }
            return r->p < r->end && *r->p++ == close;
        }
    }
    static const char *const lit[] = {"true", "false", "null"};
    for (size_t i = 0; i < 3; i++) {
        size_t l = strlen(lit[i]);
        if ((size_t)(r->end - r->p) >= l && memcmp(r->p, lit[i], l) == 0) {
            r->p += l;
            return true;
        }
    }
    return number(r);
}

/* One member's value into f (string decoded; else its text). */
static bool member(rd *r, pinio__s3_jfield *f)
{
    if (f->val)
        return false; /* given twice */
    if (r->p < r->end && *r->p == '"') {
        if (!string(r, &f->val))
            return false;
        f->str = true;
        return true;
    }
    const char *a = r->p;
    if (!value(r, 1))
        return false;
    f->val = strndup(a, (size_t)(r->p - a));
    f->str = false;
    r->oom = !f->val;
    return f->val != NULL;
}

void pinio__s3_jflat_clear(pinio__s3_jfield *f, size_t nf)
{
    for (size_t i = 0; i < nf; i++) {
        if (f[i].val)
            wipe_free(f[i].val, strlen(f[i].val));
        f[i].val = NULL;
        f[i].str = false;
    }
}

const char *pinio__s3_jflat(const char *s, size_t n, pinio__s3_jfield *f, size_t nf,
                            unsigned flags)
{
    rd r = {s, s + n, flags, false};
    for (size_t i = 0; i < nf; i++) {
        f[i].val = NULL;
        f[i].str = false;
    }
    const char *why = NULL;
    ws(&r);
    if (r.p >= r.end || *r.p != '{')
        return "not a JSON object";
    r.p++;
    ws(&r);
    bool empty = r.p < r.end && *r.p == '}';
    if (empty)
        r.p++;
    while (!empty) {
        char *key = NULL;
        ws(&r);
        if (!string(&r, &key)) {
            why = "not JSON";
            break;
        }
        ws(&r);
        pinio__s3_jfield *want = NULL;
        for (size_t i = 0; i < nf && !want; i++)
            if (strcmp(key, f[i].name) == 0)
                want = &f[i];
        free(key);
        if (r.p >= r.end || *r.p++ != ':') {
            why = "not JSON";
            break;
        }
        ws(&r);
        if (!(want ? member(&r, want) : value(&r, 1))) {
            why = "not JSON";
            break;
        }
        ws(&r);
        if (r.p < r.end && *r.p == ',') {
            r.p++;
            continue;
        }
        if (r.p >= r.end || *r.p++ != '}')
            why = "not JSON";
        break;
    }
    ws(&r);
    if (!why && r.p != r.end)
        why = "not JSON (more after the object)";
    if (r.oom)
        why = "out of memory";
    if (why)
        pinio__s3_jflat_clear(f, nf);
    return why;
}
