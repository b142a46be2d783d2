/* The Azure configuration's fields, private to azure_config.c and
 * azure_sign.c (the signer reads the key; no other layer sees it). */
#ifndef PINIO_SRC_S3_AZURE_INTERNAL_H
#define PINIO_SRC_S3_AZURE_INTERNAL_H

#include <stddef.h>

#include "src/s3/azure.h"

enum pinio__az_auth { AZ_ANON, AZ_KEY, AZ_SAS, AZ_BEARER };

struct pinio__az_cfg {
    enum pinio__az_auth auth;
    char *account;              /* NULL: none configured (the https:// form names one) */
    unsigned char *key;         /* the decoded account key, keylen bytes; NULL: none */
    size_t keylen;
    char *sas;                  /* the SAS query, without '?'; NULL: none */
    char *endpoint;             /* the connection string's, NULL: the account's default */
    char *shown;                /* the default endpoint of `account`, for messages */
    char *protocol, *suffix;    /* the connection string's, for the default endpoint */
    char *token_file, *client_id, *tenant, *authority; /* workload identity */
    char *bearer;               /* its token, NULL until fetched */
    double bearer_expiry;       /* pinio__now_s() */
    char auth_desc[320];
};

/* The endpoint requests for `account` (al bytes) go to, malloc'ed. */
char *pinio__az_endpoint_for(const pinio__az_cfg *c, const char *account, size_t al);

/* Makes sure a workload identity's bearer token is there and lives five
 * minutes more: fetched (again) from the token endpoint when not. */
int pinio__az_bearer(pinio__az_cfg *c, pinio_diag *diag);

#endif
