/*
 * pinio_s3_probe_object(): what `pinio doctor s3://...` (gs://, az://)
 * reports. Built on the same client a load opens, so that what it says (the
 * credential source, the endpoint, whether the object answers) is what a
 * load meets.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pinio/sys.h"
#include "src/s3/azure.h"
#include "src/s3/client.h"
#include "src/s3/config.h"
#include "src/s3/gcs.h"

static void copy(char *dst, size_t cap, const char *s)
{
    snprintf(dst, cap, "%s", s ? s : "");
}

/* A gs:// or az:// object's credentials and endpoint, read by the store's
 * own configuration as the client reads it at its first request. Why a
 * load of its own and not the client's: the client reads it lazily, inside
 * its first request, so a failing source would be told apart from a
 * failing HEAD only by its message. The token exchanges (a service
 * account, a workload identity) still happen at the HEAD, as in a load. */
static int store_config(const char *bucket, pinio_s3_probe *out, pinio_diag *d)
{
    if (pinio__gcs_bucket(bucket)) {
        pinio__gcs_cfg *g = NULL;
        int rc = pinio__gcs_cfg_load(&g, d);
        if (rc == 0) {
            copy(out->source, sizeof(out->source), pinio__gcs_cfg_auth(g));
            copy(out->endpoint, sizeof(out->endpoint), pinio__gcs_cfg_endpoint(g));
            copy(out->region, sizeof(out->region), "auto");
        }
        pinio__gcs_cfg_free(g);
        return rc;
    }
    pinio__az_cfg *a = NULL;
    int rc = pinio__az_cfg_load(&a, d);
    if (rc == 0) {
        copy(out->source, sizeof(out->source), pinio__az_cfg_auth(a));
        const char *ep = pinio__az_cfg_endpoint(a);
        if (*ep || strncmp(bucket, "https://", 8) != 0)
            copy(out->endpoint, sizeof(out->endpoint), ep);
        else /* the account is the URL's: https://ACCOUNT.blob.core.windows.net/CONTAINER */
            snprintf(out->endpoint, sizeof(out->endpoint), "%.*s",
                     (int)(strrchr(bucket, '/') - bucket), bucket);
    }
    pinio__az_cfg_free(a);
    return rc;
}

int pinio_s3_probe_object(const char *url, pinio_s3_probe *out)
{
    if (!out)
        return -EINVAL;
    memset(out, 0, sizeof(*out));
    out->head_rc = -ECANCELED;
    char *bucket = NULL, *key = NULL;
    pinio_diag d = {0};
    int rc = url ? pinio__s3_url_split(url, &bucket, &key, &d) : -EINVAL;
    if (rc < 0 && url && !pinio__s3_is_url(url))
        pinio_diag_set(&d, rc, "%s: not an object URL (s3://BUCKET/KEY, gs://BUCKET/OBJECT, "
                       "az://CONTAINER/BLOB or https://ACCOUNT.blob.core.windows.net/CONTAINER/"
                       "BLOB)", url);
    if (rc == 0 && !*key) {
        rc = -EINVAL;
        pinio_diag_set(&d, rc, "%s: name an object (%s)", url,
                       pinio__gcs_bucket(bucket)  ? "gs://BUCKET/OBJECT"
                       : pinio__az_bucket(bucket) ? "az://CONTAINER/BLOB" : "s3://BUCKET/KEY");
    }
    if (rc < 0) {
        out->config_rc = rc;
        copy(out->config_msg, sizeof(out->config_msg), url ? d.msg : "no URL");
        free(bucket);
        free(key);
        return -EINVAL;
    }
    pinio__s3 *c = NULL;
    /* One retry at most: a doctor says what happens, it does not wait it out. */
    pinio__s3_opts o = {.max_retries = 1, .retry_seconds = 10, .connect_timeout_s = 5};
    rc = pinio__s3_open(&c, &o, &d);
    if (rc < 0) {
        out->config_rc = rc;
        copy(out->config_msg, sizeof(out->config_msg), d.msg);
    } else {
        const pinio__s3_cfg *cfg = pinio__s3_config(c);
        copy(out->source, sizeof(out->source), pinio__s3_cfg_source(cfg));
        pinio__s3_cfg_key_hint(cfg, out->key_hint);
        out->expires = (int64_t)pinio__s3_cfg_expiry(cfg);
        copy(out->region, sizeof(out->region), pinio__s3_cfg_region(cfg));
        copy(out->endpoint, sizeof(out->endpoint), pinio__s3_cfg_endpoint(cfg));
        copy(out->addressing, sizeof(out->addressing), pinio__s3_cfg_addressing(cfg));
        copy(out->cainfo, sizeof(out->cainfo), pinio__s3_cfg_cainfo(cfg));
        copy(out->capath, sizeof(out->capath), pinio__s3_cfg_capath(cfg));
        bool other = pinio__gcs_bucket(bucket) || pinio__az_bucket(bucket);
        if (other) {
            /* S3's keys, region and addressing are not what reaches this store. */
            memset(out->key_hint, 0, sizeof(out->key_hint));
            out->expires = 0;
            out->region[0] = '\0';
            copy(out->addressing, sizeof(out->addressing), "path");
            rc = store_config(bucket, out, &d);
            if (rc < 0) {
                out->config_rc = rc;
                copy(out->config_msg, sizeof(out->config_msg), d.msg);
                out->source[0] = '\0';
            }
        }
    }
    if (c && !out->config_rc) {
        pinio__s3_meta m;
        rc = pinio__s3_stat(c, bucket, key, &m, &d);
        out->head_rc = rc;
        if (rc < 0) {
            copy(out->head_msg, sizeof(out->head_msg), d.msg);
        } else {
            out->size = m.size;
            copy(out->etag, sizeof(out->etag), m.etag);
        }
    }
    pinio__s3_close(c);
    free(bucket);
    free(key);
    return out->config_rc ? out->config_rc : out->head_rc;
}
