/* A test driver for botocore_check.py: signs one request with the
 * configuration the environment gives (pinio__s3_cfg_load) and prints what
 * an HTTP client would send, so a script can compare it with botocore's.
 *
 * usage: s3_sign_tool METHOD BUCKET KEY EPOCH [-q NAME VALUE]... [-H 'Name: value']...
 * An Azure BUCKET ("az://CONTAINER", "https://ACCOUNT.blob.core.windows.net/
 * CONTAINER") is signed by pinio__az_sign with the Azure configuration, for
 * tests/az/az_sdk_check.py.
 * prints: "URL <url>", then "H <header line>" per header; exit 0.
 * On a refused configuration or request: the diagnostic on stderr, exit 1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/s3/azure.h"
#include "src/s3/config.h"
#include "src/s3/sign.h"

/* The request as a client sends it, then freed. */
static void print_req(pinio__s3_req *r)
{
    printf("URL %s\n", r->url);
    for (size_t i = 0; i < r->nheaders; i++)
        printf("H %s\n", r->headers[i]);
    pinio__s3_req_free(r);
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: %s METHOD BUCKET KEY EPOCH [-q NAME VALUE]... [-H 'Name: value']...\n",
                argv[0]);
        return 2;
    }
    pinio__s3_param q[64];
    const char *h[64];
    size_t nq = 0, nh = 0;
    for (int i = 5; i < argc; i++) {
        if (strcmp(argv[i], "-q") == 0 && i + 2 < argc && nq < 64) {
            q[nq++] = (pinio__s3_param){argv[i + 1], argv[i + 2]};
            i += 2;
        } else if (strcmp(argv[i], "-H") == 0 && i + 1 < argc && nh < 64) {
            h[nh++] = argv[++i];
        } else {
            fprintf(stderr, "%s: bad argument '%s'\n", argv[0], argv[i]);
            return 2;
        }
    }
    pinio_diag d = {0};
    pinio__s3_req r;
    if (pinio__az_bucket(argv[2])) {
        pinio__az_cfg *az;
        int rc = pinio__az_cfg_load(&az, &d);
        if (rc == 0)
            rc = pinio__az_sign(az, argv[1], argv[2], argv[3], q, nq, h, nh,
                                (time_t)strtoll(argv[4], NULL, 10), &r, &d);
        pinio__az_cfg_free(az);
        if (rc < 0) {
            fprintf(stderr, "azure: %s\n", d.msg);
            return 1;
        }
        print_req(&r);
        return 0;
    }
    pinio__s3_cfg *cfg;
    int rc = pinio__s3_cfg_load(&cfg, &d);
    if (rc < 0) {
        fprintf(stderr, "config: %s\n", d.msg);
        return 1;
    }
    rc = pinio__s3_sign(cfg, argv[1], argv[2], argv[3], q, nq, h, nh, (time_t)strtoll(argv[4], NULL, 10),
                        &r, &d);
    if (rc < 0) {
        fprintf(stderr, "sign: %s\n", d.msg);
        pinio__s3_cfg_free(cfg);
        return 1;
    }
    print_req(&r);
    pinio__s3_cfg_free(cfg);
    return 0;
}
