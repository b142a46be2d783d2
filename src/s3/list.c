/* ListObjectsV2: the objects directly under a prefix, every page followed.
 *
 * The response is XML; only a few elements matter (Contents/Key,
 * Contents/Size, IsTruncated, NextContinuationToken), so they are found by
 * their tags rather than by an XML library: S3 and the compatible stores
 * write them without attributes or CDATA, and a page that lacks them is
 * refused, never half-read. Keys come XML-escaped (&amp; ...); they are
 * decoded. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/s3/client.h"
#include "src/s3/config.h"
#include "src/s3/sign.h"

/* The text of the first <tag>...</tag> in [s, e), or NULL. */
static const char *element(const char *s, const char *e, const char *tag, size_t *len)
{
    char open[64], close[64];
    int ol = snprintf(open, sizeof(open), "<%s>", tag);
    int cl = snprintf(close, sizeof(close), "</%s>", tag);
    const char *a = memmem(s, (size_t)(e - s), open, (size_t)ol);
    if (!a)
        return NULL;
    a += ol;
    const char *b = memmem(a, (size_t)(e - a), close, (size_t)cl);
    if (!b)
        return NULL;
    *len = (size_t)(b - a);
    return a;
}

static int put_utf8(char *o, unsigned long cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xc0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xe0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        o[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    o[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* XML text to a malloc'ed string; NULL on a bad entity or out of memory. */
static char *unescape(const char *s, size_t n)
{
    char *o = malloc(n + 1);
    size_t w = 0;
    for (size_t i = 0; o && i < n;) {
        if (s[i] != '&') {
            o[w++] = s[i++];
            continue;
        }
        const char *semi = memchr(s + i, ';', n - i);
        size_t el = semi ? (size_t)(semi - (s + i)) + 1 : 0;
        static const struct { const char *name; char ch; } ents[] = {
            { "&amp;", '&' }, { "&lt;", '<' }, { "&gt;", '>' }, { "&quot;", '"' }, { "&apos;", '\'' } };
        bool ok = false;
        for (size_t k = 0; el && k < sizeof(ents) / sizeof(ents[0]); k++)
            if (strlen(ents[k].name) == el && memcmp(s + i, ents[k].name, el) == 0) {
                o[w++] = ents[k].ch;
                ok = true;
            }
        if (!ok && el > 3 && s[i + 1] == '#') {
            char *end;
            bool hex = s[i + 2] == 'x';
            unsigned long cp = strtoul(s + i + (hex ? 3 : 2), &end, hex ? 16 : 10);
            if (end == semi && cp > 0 && cp <= 0x10ffff && el <= 12) {
                w += (size_t)put_utf8(o + w, cp); /* at most 4 bytes for >= 4 read */
                ok = true;
            }
        }
        if (!ok) {
            free(o);
            return NULL;
        }
        i += el;
    }
    if (o)
        o[w] = '\0';
    return o;
}

void pinio__s3_entries_free(pinio__s3_entry *e, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(e[i].key);
    free(e);
}

int pinio__s3_list_parse(const char *xml, size_t len, pinio__s3_entry **out, size_t *n,
                         char **next)
{
    *next = NULL;
    const char *s = xml, *e = xml + len;
    size_t tl;
    if (!memmem(s, len, "<ListBucketResult", 17))
        return PINIO_EFORMAT;
    const char *t = element(s, e, "IsTruncated", &tl);
    bool truncated = t && tl == 4 && memcmp(t, "true", 4) == 0;
    size_t cap = *n;
    for (;;) {
        size_t bl;
        const char *b = element(s, e, "Contents", &bl);
        if (!b)
            break;
        const char *be = b + bl;
        size_t kl, zl;
        const char *k = element(b, be, "Key", &kl), *z = element(b, be, "Size", &zl);
        if (!k || !z || zl == 0 || zl > 20)
            return PINIO_EFORMAT;
        uint64_t size = 0;
        for (size_t i = 0; i < zl; i++) {
            if (z[i] < '0' || z[i] > '9')
                return PINIO_EFORMAT;
            size = size * 10 + (uint64_t)(z[i] - '0');
        }
        if (*n == cap) {
            cap = cap ? cap * 2 : 64;
            pinio__s3_entry *ne = realloc(*out, cap * sizeof(*ne));
            if (!ne)
                return -ENOMEM;
            *out = ne;
        }
        char *key = unescape(k, kl);
        if (!key)
            return PINIO_EFORMAT;
        (*out)[(*n)++] = (pinio__s3_entry){ .key = key, .size = size };
        s = be;
    }
    if (truncated) {
        t = element(xml, e, "NextContinuationToken", &tl);
        if (!t || !tl || !(*next = unescape(t, tl)))
            return PINIO_EFORMAT;
    }
    return 0;
}

int pinio__s3_list(pinio__s3 *c, const char *bucket, const char *prefix, pinio__s3_entry **out,
                   size_t *n, pinio_diag *diag)
{
    *out = NULL;
    *n = 0;
    char *token = NULL;
    int rc = 0;
    for (unsigned page = 0; rc == 0; page++) {
        pinio__s3_param q[4] = { { "list-type", "2" }, { "prefix", prefix }, { "delimiter", "/" },
                                 { "continuation-token", token } };
        char *body = NULL;
        size_t len = 0;
        rc = pinio__s3_get_listing(c, bucket, q, token ? 4 : 3, &body, &len, diag);
        if (rc < 0)
            break;
        free(token);
        token = NULL;
        rc = pinio__s3_list_parse(body, len, out, n, &token);
        free(body);
        if (rc == PINIO_EFORMAT) {
            char url[1200];
            snprintf(url, sizeof(url), "s3://%s/%s", bucket, prefix);
            pinio_diag_set_at(diag, rc, url, PINIO_DIAG_NO_OFFSET,
                              "the store's answer to ListObjectsV2 (page %u) is not a listing",
                              page + 1);
        }
        if (rc < 0 || !token)
            break;
    }
    free(token);
    if (rc < 0) {
        pinio__s3_entries_free(*out, *n);
        *out = NULL;
        *n = 0;
    }
    return rc;
}
