/*
 * The configuration's fields, private to src/s3/ (the signer reads the
 * keys; no other layer ever sees them) and to the s3 unit tests.
 */
#ifndef PINIO_SRC_S3_CONFIG_INTERNAL_H
#define PINIO_SRC_S3_CONFIG_INTERNAL_H

#include <stdbool.h>

#include "src/s3/config.h"
#include "src/s3/creds.h"

enum pinio__s3_addressing {
    PINIO__S3_ADDR_AUTO,
    PINIO__S3_ADDR_PATH,
    PINIO__S3_ADDR_VIRTUAL,
};

struct pinio__s3_cfg {
    char *region;
    char *endpoint;  /* scheme://host[:port], for messages and the accessor */
    char *scheme;    /* "http" or "https" */
    char *host;      /* host[:port], lower case, the default port dropped */
    char *base_path; /* "" or "/prefix" (an endpoint behind a path), no trailing '/' */
    bool aws_host;   /* an amazonaws.com(.cn) host: virtual-hosted works there */
    bool default_endpoint; /* built from the region: another region, another host */
    bool fips, dualstack;
    enum pinio__s3_addressing addressing;
    bool anonymous;
    pinio__s3_creds *creds; /* NULL when anonymous */
    char *source;
    char *cainfo, *capath;  /* AWS_CA_BUNDLE etc.: CURLOPT_CAINFO / CAPATH, NULL: libcurl's */
};

/**
 * A view of `cfg` for another region (a bucket's, after a redirect): the
 * signing region, and the host when the endpoint was built from the region
 * (a configured endpoint stays). `view` shares cfg's other fields (the
 * credentials included): it must not be freed, nor outlive cfg or the
 * buffers. 0, or -EINVAL for a region that is no region name.
 */
int pinio__s3_cfg_region_view(const pinio__s3_cfg *cfg, const char *region, pinio__s3_cfg *view,
                              char region_buf[64], char host_buf[160]);

#endif
