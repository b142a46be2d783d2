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
    enum pinio__s3_addressing addressing;
    bool anonymous;
    pinio__s3_creds *creds; /* NULL when anonymous */
    char *source;
    char *cainfo, *capath;  /* AWS_CA_BUNDLE etc.: CURLOPT_CAINFO / CAPATH, NULL: libcurl's */
};

#endif
