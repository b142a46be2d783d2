/* The one strict reader of the flat JSON objects the credential sources
 * read: AWS's container endpoint, IMDS and credential_process answers
 * (creds.c), a Google service-account key file and token answer
 * (gcs_oauth.c), Microsoft Entra's token answer (azure_config.c). */
#ifndef PINIO_SRC_S3_JSONFLAT_INTERNAL_H
#define PINIO_SRC_S3_JSONFLAT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

typedef struct pinio__s3_jfield {
    const char *name; /* in: the member wanted */
    char *val;        /* out: its value, malloc'ed, NUL-free; NULL when absent */
    bool str;         /* out: a string (decoded), else a number's or literal's text */
} pinio__s3_jfield;

enum {
    /* Nested objects and arrays allowed as the values of members not
     * wanted (checked, then passed over; at most 64 deep). Without it a
     * nested value is "not JSON". */
    PINIO__S3_JFLAT_NESTED = 1,
    /* \uXXXX only below 0x80; without it any BMP code point but the
     * surrogates, written as UTF-8. */
    PINIO__S3_JFLAT_ASCII = 2,
};

/* Reads [s, s+n) as exactly one JSON object, white space around it, and
 * fills f[i].val for each member named f[i].name. A string never holds a
 * NUL (\u0000 is refused); a member wanted twice is refused. NULL on
 * success; else why, a constant: "not a JSON object" (it does not start
 * with '{'), "not JSON (more after the object)", "not JSON", or "out of
 * memory"; then every f[i].val is NULL. The vals are the caller's on
 * success: free them with pinio__s3_jflat_clear (they may be secrets). */
const char *pinio__s3_jflat(const char *s, size_t n, pinio__s3_jfield *f, size_t nf,
                            unsigned flags);

/* Wipes and frees every f[i].val, setting it NULL. */
void pinio__s3_jflat_clear(pinio__s3_jfield *f, size_t nf);

#endif
