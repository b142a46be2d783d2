/*
 * pinio_s3_probe_object(): what `pinio doctor s3://...` reports. Built on
 * the same client a load opens, so that what it says (the credential
 * source, the endpoint, whether the object answers) is what a load meets.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pinio/sys.h"
#include "src/s3/client.h"
#include "src/s3/config.h"

static void copy(char *dst, size_t cap, const char *s)
{
    snprintf(dst, cap, "%s", s ? s : "");
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
    if (rc == 0 && !*key) {
        rc = -EINVAL;
        pinio_diag_set(&d, rc, "%s: name an object (s3://BUCKET/KEY)", url);
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
