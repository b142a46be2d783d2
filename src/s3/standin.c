/* TEMPORARY stand-in for helper s3sign's config.c and sign.c: endpoint and
 * region from the environment, path-style, anonymous. Deleted at merge. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/s3/standin.h"

struct pinio__s3_cfg {
    char endpoint[512];
    char region[64];
};

int pinio__s3_cfg_load(pinio__s3_cfg **out, pinio_diag *diag)
{
    (void)diag;
    pinio__s3_cfg *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    const char *r = getenv("AWS_REGION");
    if (!r || !*r)
        r = getenv("AWS_DEFAULT_REGION");
    snprintf(c->region, sizeof(c->region), "%s", r && *r ? r : "us-east-1");
    const char *e = getenv("AWS_ENDPOINT_URL_S3");
    if (!e || !*e)
        e = getenv("AWS_ENDPOINT_URL");
    if (e && *e)
        snprintf(c->endpoint, sizeof(c->endpoint), "%s", e);
    else
        snprintf(c->endpoint, sizeof(c->endpoint), "https://s3.%s.amazonaws.com", c->region);
    size_t n = strlen(c->endpoint);
    while (n && c->endpoint[n - 1] == '/')
        c->endpoint[--n] = '\0';
    *out = c;
    return 0;
}

void pinio__s3_cfg_free(pinio__s3_cfg *cfg) { free(cfg); }
const char *pinio__s3_cfg_region(const pinio__s3_cfg *cfg) { return cfg->region; }
const char *pinio__s3_cfg_endpoint(const pinio__s3_cfg *cfg) { return cfg->endpoint; }
bool pinio__s3_cfg_anonymous(const pinio__s3_cfg *cfg) { (void)cfg; return true; }

static size_t enc(char *o, const char *s, bool slash)
{
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
            *p == '-' || *p == '_' || *p == '.' || *p == '~' || (slash && *p == '/')) {
            if (o)
                o[n] = (char)*p;
            n++;
        } else {
            if (o)
                sprintf(o + n, "%%%02X", *p);
            n += 3;
        }
    }
    return n;
}

int pinio__s3_sign(const pinio__s3_cfg *cfg, const char *method, const char *bucket,
                   const char *key, const pinio__s3_param *query, size_t nquery,
                   const char *const *extra_headers, size_t nextra, time_t now,
                   pinio__s3_req *out, pinio_diag *diag)
{
    (void)method;
    (void)now;
    (void)diag;
    memset(out, 0, sizeof(*out));
    size_t len = strlen(cfg->endpoint) + 2 + enc(NULL, bucket, false) + enc(NULL, key, true) + 2;
    for (size_t i = 0; i < nquery; i++)
        len += enc(NULL, query[i].name, false) + enc(NULL, query[i].value, false) + 2;
    char *u = malloc(len);
    char **h = calloc(nextra + 1, sizeof(*h));
    if (!u || !h) {
        free(u);
        free(h);
        return -ENOMEM;
    }
    size_t n = (size_t)sprintf(u, "%s/", cfg->endpoint);
    n += enc(u + n, bucket, false);
    u[n++] = '/';
    n += enc(u + n, key, true);
    for (size_t i = 0; i < nquery; i++) {
        u[n++] = i ? '&' : '?';
        n += enc(u + n, query[i].name, false);
        u[n++] = '=';
        n += enc(u + n, query[i].value, false);
    }
    u[n] = '\0';
    for (size_t i = 0; i < nextra; i++)
        if (!(h[i] = strdup(extra_headers[i]))) {
            out->url = u;
            out->headers = h;
            out->nheaders = i;
            pinio__s3_req_free(out);
            return -ENOMEM;
        }
    out->url = u;
    out->headers = h;
    out->nheaders = nextra;
    return 0;
}

void pinio__s3_req_free(pinio__s3_req *req)
{
    if (!req)
        return;
    for (size_t i = 0; i < req->nheaders; i++)
        free(req->headers[i]);
    free(req->headers);
    free(req->url);
    memset(req, 0, sizeof(*req));
}
