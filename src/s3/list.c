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

#include "src/s3/azure.h"
#include "src/s3/client.h"
#include "src/s3/config.h"
#include "src/s3/sign.h"
#include "src/s3/xml_internal.h"

int pinio__s3_list_parse(const char *xml, size_t len, pinio__s3_entry **out, size_t *n,
                         char **next)
{
    *next = NULL;
    const char *s = xml, *e = xml + len;
    size_t tl, tl2;
    if (!pinio__s3_xml_complete(s, e, "ListBucketResult"))
        return PINIO_EFORMAT;
    const char *t = pinio__s3_xml_element(s, e, "IsTruncated", &tl);
    if (!t || pinio__s3_xml_element(t + tl, e, "IsTruncated", &tl2))
        return PINIO_EFORMAT;
    bool truncated = tl == 4 && memcmp(t, "true", 4) == 0;
    if (!truncated && !(tl == 5 && memcmp(t, "false", 5) == 0))
        return PINIO_EFORMAT;
    size_t cap = *n;
    for (;;) {
        size_t bl;
        const char *b = pinio__s3_xml_element(s, e, "Contents", &bl);
        if (!b)
            break;
        const char *be = b + bl;
        size_t kl, zl;
        const char *k = pinio__s3_xml_element(b, be, "Key", &kl), *z = pinio__s3_xml_element(b, be, "Size", &zl);
        if (!k || !z)
            return PINIO_EFORMAT;
        int rc = pinio__s3_entry_add(out, n, &cap, k, kl, z, zl);
        if (rc < 0)
            return rc;
        s = be;
    }
    if (truncated) {
        t = pinio__s3_xml_element(xml, e, "NextContinuationToken", &tl);
        if (!t || !tl || !(*next = pinio__s3_xml_text(t, tl)))
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
    pinio__s3_url_format(url, sizeof(url), bucket, prefix);
    /* Azure's List Blobs pages the same way, with a marker for the token:
     * one loop, and one set of completeness checks, for both stores. */
    bool az = pinio__az_bucket(bucket);
    const char *op = az ? "List Blobs" : "ListObjectsV2";
    /* Every token followed so far: one given twice is a listing that loops. */
    char **seen = NULL, *token = NULL;
    size_t nseen = 0;
    int rc = 0;
    for (unsigned page = 0; rc == 0; page++) {
        pinio__s3_param q[5] = { { "list-type", "2" }, { "prefix", prefix }, { "delimiter", "/" },
                                 { "continuation-token", token } };
        size_t nq = token ? 4 : 3;
        if (az) {
            /* An empty prefix or marker is left out: the SDKs send none. */
            nq = 0;
            q[nq++] = (pinio__s3_param){ "restype", "container" };
            q[nq++] = (pinio__s3_param){ "comp", "list" };
            if (*prefix)
                q[nq++] = (pinio__s3_param){ "prefix", prefix };
            q[nq++] = (pinio__s3_param){ "delimiter", "/" };
            if (token)
                q[nq++] = (pinio__s3_param){ "marker", token };
        }
        char *body = NULL;
        size_t len = 0;
        rc = pinio__s3_get_listing(c, bucket, q, nq, &body, &len, diag);
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
        rc = (az ? pinio__az_list_parse : pinio__s3_list_parse)(body, len, out, n, &token);
        free(body);
        if (rc == PINIO_EFORMAT)
            pinio_diag_set_at(diag, rc, url, PINIO_DIAG_NO_OFFSET,
                              "the store's answer to %s (page %u) is not a complete "
                              "listing (cut short, or not well-formed XML)", op, page + 1);
        else if (rc == 0 && token && seen_before(seen, nseen, token)) {
            rc = -EPROTO;
            pinio_diag_set_at(diag, rc, url, PINIO_DIAG_NO_OFFSET,
                              "the store's %s gave on page %u a continuation token it "
                              "gave before: a listing that would never end, refused", op,
                              page + 1);
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
