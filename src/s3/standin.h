/* TEMPORARY stand-in for helper s3sign's src/s3/config.h and sign.h (the
 * interface of /work/wt/S3-API.md), anonymous requests only: deleted when
 * s3sign's branch is merged. */
#ifndef PINIO_SRC_S3_STANDIN_H
#define PINIO_SRC_S3_STANDIN_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "pinio/common.h"

typedef struct pinio__s3_cfg pinio__s3_cfg;
int pinio__s3_cfg_load(pinio__s3_cfg **out, pinio_diag *diag);
void pinio__s3_cfg_free(pinio__s3_cfg *cfg);
const char *pinio__s3_cfg_region(const pinio__s3_cfg *cfg);
const char *pinio__s3_cfg_endpoint(const pinio__s3_cfg *cfg);
bool pinio__s3_cfg_anonymous(const pinio__s3_cfg *cfg);

typedef struct pinio__s3_req {
    char *url;
    char **headers;
    size_t nheaders;
} pinio__s3_req;

typedef struct pinio__s3_param {
    const char *name, *value;
} pinio__s3_param;

int pinio__s3_sign(const pinio__s3_cfg *cfg, const char *method, const char *bucket,
                   const char *key, const pinio__s3_param *query, size_t nquery,
                   const char *const *extra_headers, size_t nextra, time_t now,
                   pinio__s3_req *out, pinio_diag *diag);
void pinio__s3_req_free(pinio__s3_req *req);

#endif
