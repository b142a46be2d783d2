/* s3:// URLs: "s3://BUCKET/KEY" as the AWS CLI writes them. The key is taken
 * as written (S3 keys are arbitrary UTF-8; "a//b" is a key of its own), the
 * signer encodes it. Azure's URLs (azure_url.c) and gs:// (gcs.c) split
 * here too, into a bucket that keeps its scheme, so that joining gives the
 * URL back. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/s3/azure.h"
#include "src/s3/client.h"
#include "src/s3/gcs.h"

bool pinio__s3_is_url(const char *s)
{
    return s && (strncmp(s, "s3://", 5) == 0 || pinio__az_is_url(s) || pinio__gcs_is_url(s));
}

int pinio__s3_refuse_write(const char *path, pinio_diag *diag)
{
    if (!pinio__s3_is_url(path))
        return 0;
    pinio_diag_set_at(diag, -ENOTSUP, path, PINIO_DIAG_NO_OFFSET,
                      "writing to %s is not supported (pinio reads %s objects: load, "
                      "info, stage and bench take them as sources); write to a local path and "
                      "upload it with the store's own tools",
                      pinio__az_is_url(path)    ? "Azure Blob Storage"
                      : pinio__gcs_is_url(path) ? "Google Cloud Storage" : "s3://",
                      pinio__az_is_url(path)    ? "Azure"
                      : pinio__gcs_is_url(path) ? "gs://" : "s3://");
    return -ENOTSUP;
}

/* Bucket names as S3 and the S3-compatible stores accept them: 3-63 of
 * [a-z0-9.-] today; legacy us-east-1 buckets also have upper case and '_'
 * (up to 255), which are let through: the store is the judge, the check
 * only keeps a URL with a stray character from becoming a request. */
static bool bucket_ok(const char *b, size_t n)
{
    if (n < 1 || n > 255)
        return false;
    for (size_t i = 0; i < n; i++) {
        char ch = b[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '.' || ch == '-' || ch == '_'))
            return false;
    }
    return true;
}

int pinio__s3_url_split(const char *url, char **bucket, char **key, pinio_diag *diag)
{
    *bucket = *key = NULL;
    if (pinio__az_is_url(url))
        return pinio__az_url_split(url, bucket, key, diag);
    if (pinio__gcs_is_url(url))
        return pinio__gcs_url_split(url, bucket, key, diag);
    if (!pinio__s3_is_url(url)) {
        pinio_diag_set(diag, -EINVAL, "%s: not an s3:// URL", url ? url : "(null)");
        return -EINVAL;
    }
    const char *b = url + 5, *slash = strchr(b, '/');
    size_t bl = slash ? (size_t)(slash - b) : strlen(b);
    if (!bucket_ok(b, bl)) {
        pinio_diag_set_at(diag, -EINVAL, url, PINIO_DIAG_NO_OFFSET,
                          "not s3://BUCKET/KEY: the bucket name %s", bl ? "has a character "
                          "S3 does not allow (letters, digits, '.', '-', '_')" : "is empty");
        return -EINVAL;
    }
    return pinio__s3_url_take(b, bl, slash, bucket, key);
}


char *pinio__s3_url_join(const char *bucket, const char *key)
{
    if (pinio__az_bucket(bucket) || pinio__gcs_bucket(bucket)) {
        char *u;
        return asprintf(&u, "%s/%s", bucket, key) < 0 ? NULL : u;
    }
    size_t bl = strlen(bucket), kl = strlen(key);
    char *u = malloc(5 + bl + 1 + kl + 1);
    if (!u)
        return NULL;
    memcpy(u, "s3://", 5);
    memcpy(u + 5, bucket, bl);
    u[5 + bl] = '/';
    memcpy(u + 6 + bl, key, kl + 1);
    return u;
}

const char *pinio__s3_url_format(char *buf, size_t cap, const char *bucket, const char *key)
{
    snprintf(buf, cap, pinio__az_bucket(bucket) || pinio__gcs_bucket(bucket) ? "%s/%s" : "s3://%s/%s", bucket, key);
    return buf;
}
