/* Azure URLs: az://CONTAINER/BLOB (the form vLLM, SGLang and the Run:ai
 * streamer route), and https://ACCOUNT.blob.core.windows.net/CONTAINER/BLOB
 * (the portal's and the SDKs' own). The blob name is taken as written, the
 * signer encodes it.
 *
 * Why the bucket keeps the scheme (and the account of the https:// form):
 * the loader, the benchmark and the index resolution pass (bucket, key)
 * pairs around and join them back into the URL they print; a bucket that
 * is the URL's container part makes every such join give the user's URL
 * back, and tells the client which store and which account a request is
 * for, with no field added anywhere on the way. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "src/s3/azure.h"

#define AZ_HOST_SUFFIX ".blob.core.windows.net"

/* The account of "https://ACCOUNT.blob.core.windows.net/...": its length,
 * 0 when `s` is not that form. */
static size_t https_account(const char *s)
{
    if (!s || strncmp(s, "https://", 8) != 0)
        return 0;
    const char *a = s + 8, *dot = strchr(a, '.');
    size_t sl = strlen(AZ_HOST_SUFFIX);
    if (!dot || strncmp(dot, AZ_HOST_SUFFIX, sl) != 0 || (dot[sl] != '/' && dot[sl] != '\0'))
        return 0;
    return (size_t)(dot - a);
}

bool pinio__az_is_url(const char *s)
{
    return s && (strncmp(s, "az://", 5) == 0 || https_account(s) > 0);
}

bool pinio__az_bucket(const char *bucket)
{
    return strncmp(bucket, "az://", 5) == 0 || strncmp(bucket, "https://", 8) == 0;
}

/* Azure's rules: 3-63 of a-z 0-9 '-' (no "--", none at the ends), or
 * the special $root and $web. */
static bool container_ok(const char *c, size_t n)
{
    if ((n == 5 && memcmp(c, "$root", 5) == 0) || (n == 4 && memcmp(c, "$web", 4) == 0))
        return true;
    if (n < 3 || n > 63 || c[0] == '-' || c[n - 1] == '-')
        return false;
    for (size_t i = 0; i < n; i++) {
        char ch = c[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-') ||
            (ch == '-' && c[i + 1] == '-'))
            return false;
    }
    return true;
}

static bool account_ok(const char *a, size_t n)
{
    if (n < 3 || n > 24)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((a[i] >= 'a' && a[i] <= 'z') || (a[i] >= '0' && a[i] <= '9')))
            return false;
    return true;
}

int pinio__az_url_split(const char *url, char **bucket, char **key, pinio_diag *diag)
{
    *bucket = *key = NULL;
    size_t al = https_account(url);
    const char *c;
    if (al) {
        if (!account_ok(url + 8, al)) {
            pinio_diag_set_at(diag, -EINVAL, url, PINIO_DIAG_NO_OFFSET,
                              "not https://ACCOUNT.blob.core.windows.net/CONTAINER/BLOB: the "
                              "account name is not 3-24 of a-z and 0-9");
            return -EINVAL;
        }
        c = url + 8 + al + strlen(AZ_HOST_SUFFIX);
        c += *c == '/';
    } else if (strncmp(url, "az://", 5) == 0) {
        c = url + 5;
    } else {
        pinio_diag_set(diag, -EINVAL, "%s: not an Azure URL", url);
        return -EINVAL;
    }
    const char *slash = strchr(c, '/');
    size_t cl = slash ? (size_t)(slash - c) : strlen(c);
    if (!container_ok(c, cl)) {
        pinio_diag_set_at(diag, -EINVAL, url, PINIO_DIAG_NO_OFFSET,
                          "not %s/CONTAINER/BLOB: the container name %s",
                          al ? "https://ACCOUNT.blob.core.windows.net" : "az:/",
                          cl ? "is not one Azure allows (3-63 of a-z, 0-9 and single '-' "
                               "inside, or $root)" : "is empty");
        return -EINVAL;
    }
    return pinio__s3_url_take(url, (size_t)(c - url) + cl, slash, bucket, key);
}

/* url.c's too: it calls into this file, never the other way. */
int pinio__s3_url_take(const char *b, size_t bl, const char *slash, char **bucket, char **key)
{
    *bucket = strndup(b, bl);
    *key = strdup(slash ? slash + 1 : "");
    if (!*bucket || !*key) {
        free(*bucket);
        free(*key);
        *bucket = *key = NULL;
        return -ENOMEM;
    }
    return 0;
}
