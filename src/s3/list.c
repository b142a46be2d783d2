/* ListObjectsV2: the objects directly under a prefix, every page followed.
 *
 * The response is XML; only a few elements matter (Contents/Key,
 * Contents/Size, IsTruncated, NextContinuationToken), so they are found by
 * their tags rather than by an XML library: S3 and the compatible stores
 * write them without attributes or CDATA, and a page that lacks them is
 * refused, never half-read. Keys come XML-escaped (&amp; ...); they are
 * decoded.
 *
 * Why a page is checked whole before any of it is used: a body ended early
 * (a connection closed mid-page, a proxy that cut it) still holds complete
 * <Contents> elements, and a missing <IsTruncated> read as "false" would
 * make it the last page, the shards past the cut silently gone. So a page
 * is taken only when it is well-formed XML (tags nested and closed, the
 * root <ListBucketResult> closed, nothing after it) and says IsTruncated
 * once, as true or false. And a listing ends: a continuation token the
 * store already gave is refused (botocore stops there too), where
 * following it would list forever. */
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

static bool is_space(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n';
}

/* Past a comment or processing instruction at `p` ("<!--" or "<?"), or NULL
 * when it is not closed. */
static const char *skip_misc(const char *p, const char *e)
{
    bool comment = e - p >= 4 && memcmp(p, "<!--", 4) == 0;
    const char *end = comment ? "-->" : "?>";
    const char *q = memmem(p + 2, (size_t)(e - p - 2), end, strlen(end));
    return q ? q + strlen(end) : NULL;
}

/* Whether [s, e) is one complete XML document whose root element is
 * <ListBucketResult>: every tag closed in order, the root closed, nothing
 * but white space, comments and processing instructions around it. No
 * DTD or CDATA (no store writes them in a listing). */
static bool well_formed(const char *s, const char *e)
{
    enum { DEPTH = 32 };
    const char *name[DEPTH];
    size_t nlen[DEPTH], depth = 0;
    bool root_done = false, root_seen = false;
    for (const char *p = s; p < e;) {
        if (*p != '<') {
            if (depth == 0 && !is_space(*p))
                return false; /* text outside the root */
            p++;
            continue;
        }
        if (e - p >= 2 && (p[1] == '?' || (e - p >= 4 && memcmp(p, "<!--", 4) == 0))) {
            if (!(p = skip_misc(p, e)))
                return false;
            continue;
        }
        bool closing = e - p >= 2 && p[1] == '/';
        const char *a = p + (closing ? 2 : 1), *b = a;
        while (b < e && !is_space(*b) && *b != '>' && *b != '/')
            b++;
        /* the tag's end, past attributes (a quoted value may hold '>') */
        const char *q = b;
        char quote = 0;
        while (q < e && (quote || *q != '>')) {
            if (quote ? *q == quote : *q == '"' || *q == '\'')
                quote = quote ? 0 : *q;
            q++;
        }
        if (q >= e || b == a || *a == '!')
            return false;
        bool empty = !closing && q[-1] == '/';
        if (closing) {
            for (const char *r = b; r < q; r++)
                if (!is_space(*r))
                    return false;
            if (!depth || nlen[depth - 1] != (size_t)(b - a) || memcmp(name[depth - 1], a, nlen[depth - 1]))
                return false;
            if (--depth == 0)
                root_done = true;
        } else {
            if (depth == 0) {
                if (root_seen || (size_t)(b - a) != 16 || memcmp(a, "ListBucketResult", 16))
                    return false;
                root_seen = true;
                root_done = empty;
            }
            if (!empty) {
                if (depth == DEPTH)
                    return false;
                name[depth] = a;
                nlen[depth++] = (size_t)(b - a);
            }
        }
        p = q + 1;
    }
    return root_done && depth == 0;
}

int pinio__s3_list_parse(const char *xml, size_t len, pinio__s3_entry **out, size_t *n,
                         char **next)
{
    *next = NULL;
    const char *s = xml, *e = xml + len;
    size_t tl, tl2;
    if (!well_formed(s, e))
        return PINIO_EFORMAT;
    const char *t = element(s, e, "IsTruncated", &tl);
    if (!t || element(t + tl, e, "IsTruncated", &tl2))
        return PINIO_EFORMAT;
    bool truncated = tl == 4 && memcmp(t, "true", 4) == 0;
    if (!truncated && !(tl == 5 && memcmp(t, "false", 5) == 0))
        return PINIO_EFORMAT;
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

/* Whether `token` is one of seen[0 .. n). */
static bool seen_before(char *const *seen, size_t n, const char *token)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(seen[i], token) == 0)
            return true;
    return false;
}

int pinio__s3_list(pinio__s3 *c, const char *bucket, const char *prefix, pinio__s3_entry **out,
                   size_t *n, pinio_diag *diag)
{
    *out = NULL;
    *n = 0;
    char url[1200];
    snprintf(url, sizeof(url), "s3://%s/%s", bucket, prefix);
    /* Every token followed so far: one given twice is a listing that loops. */
    char **seen = NULL, *token = NULL;
    size_t nseen = 0;
    int rc = 0;
    for (unsigned page = 0; rc == 0; page++) {
        pinio__s3_param q[4] = { { "list-type", "2" }, { "prefix", prefix }, { "delimiter", "/" },
                                 { "continuation-token", token } };
        char *body = NULL;
        size_t len = 0;
        rc = pinio__s3_get_listing(c, bucket, q, token ? 4 : 3, &body, &len, diag);
        if (rc < 0) {
            /* The request is the bucket's; the listing the user asked for
             * is of the prefix too: the message names both. */
            pinio_diag_relabel(diag, url);
            break;
        }
        if (token) {
            char **ns = realloc(seen, (nseen + 1) * sizeof(*ns));
            if (!ns) {
                free(body);
                rc = -ENOMEM;
                break;
            }
            seen = ns;
            seen[nseen++] = token;
            token = NULL;
        }
        rc = pinio__s3_list_parse(body, len, out, n, &token);
        free(body);
        if (rc == PINIO_EFORMAT)
            pinio_diag_set_at(diag, rc, url, PINIO_DIAG_NO_OFFSET,
                              "the store's answer to ListObjectsV2 (page %u) is not a complete "
                              "listing (cut short, or not well-formed XML)", page + 1);
        else if (rc == 0 && token && seen_before(seen, nseen, token)) {
            rc = -EPROTO;
            pinio_diag_set_at(diag, rc, url, PINIO_DIAG_NO_OFFSET,
                              "the store's ListObjectsV2 gave on page %u a continuation token it "
                              "gave before: a listing that would never end, refused", page + 1);
        }
        if (rc < 0 || !token)
            break;
    }
    free(token);
    for (size_t i = 0; i < nseen; i++)
        free(seen[i]);
    free(seen);
    if (rc < 0) {
        pinio__s3_entries_free(*out, *n);
        *out = NULL;
        *n = 0;
    }
    return rc;
}
