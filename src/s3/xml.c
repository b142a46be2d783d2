/* The XML steps of a listing page (xml_internal.h), for ListObjectsV2
 * (list.c) and List Blobs (azure_list.c): elements found by their tags,
 * entities decoded, a page checked whole before any of it is used (see
 * list.c's top for why). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/s3/xml_internal.h"

const char *pinio__s3_xml_element(const char *s, const char *e, const char *tag, size_t *len)
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

char *pinio__s3_xml_text(const char *s, size_t n)
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

bool pinio__s3_xml_complete(const char *s, const char *e, const char *root)
{
    size_t rootlen = strlen(root);
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
                if (root_seen || (size_t)(b - a) != rootlen || memcmp(a, root, rootlen))
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

int pinio__s3_entry_add(pinio__s3_entry **out, size_t *n, size_t *cap, const char *xml_key,
                        size_t len, const char *xml_size, size_t zl)
{
    if (zl == 0 || zl > 20)
        return PINIO_EFORMAT;
    uint64_t size = 0;
    for (size_t i = 0; i < zl; i++) {
        if (xml_size[i] < '0' || xml_size[i] > '9')
            return PINIO_EFORMAT;
        size = size * 10 + (uint64_t)(xml_size[i] - '0');
    }
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 64;
        pinio__s3_entry *ne = realloc(*out, c * sizeof(*ne));
        if (!ne)
            return -ENOMEM;
        *out = ne;
        *cap = c;
    }
    char *key = pinio__s3_xml_text(xml_key, len);
    if (!key)
        return PINIO_EFORMAT;
    (*out)[(*n)++] = (pinio__s3_entry){ .key = key, .size = size };
    return 0;
}
