/* The credential sources' one HTTP exchange (see fetch_internal.h). Why
 * not client.c's handles: those are pooled per connection and tuned for
 * ranged object reads; a credential exchange is a one-off whose body is a
 * secret, so it gets a handle of its own, freed at once, and its body is
 * wiped before it is freed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/s3/fetch_internal.h"

typedef struct sink {
    pinio__s3_fetch_resp *r;
    size_t cap;
} sink;

/* Returning short stops the transfer (CURLE_WRITE_ERROR): an answer over
 * the cap is no credential answer, and nothing past it is kept. */
static size_t on_body(char *p, size_t sz, size_t nm, void *ud)
{
    sink *s = ud;
    pinio__s3_fetch_resp *r = s->r;
    size_t n = sz * nm;
    if (r->len + n > s->cap) {
        r->big = true;
        return 0;
    }
    char *nb = realloc(r->body, r->len + n + 1);
    if (!nb)
        return 0;
    memcpy(nb + r->len, p, n);
    r->len += n;
    nb[r->len] = '\0';
    r->body = nb;
    return n;
}

void pinio__s3_fetch_resp_free(pinio__s3_fetch_resp *r)
{
    if (r->body) {
        explicit_bzero(r->body, r->len);
        free(r->body);
    }
    memset(r, 0, sizeof(*r));
}

CURLcode pinio__s3_fetch(const pinio__s3_fetch_req *q, pinio__s3_fetch_resp *r, char *err,
                         size_t errn)
{
    memset(r, 0, sizeof(*r));
    CURL *h = curl_easy_init();
    if (!h) {
        snprintf(err, errn, "out of memory");
        return CURLE_OUT_OF_MEMORY;
    }
    sink s = {r, q->cap};
    const char *body = q->body;
    char ebuf[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(h, CURLOPT_URL, q->url);
    if (q->method) {
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, q->method);
        if (strcmp(q->method, "GET") != 0 && !body)
            body = "";
    }
    if (body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, q->headers);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &s);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, ebuf);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    /* A credentials endpoint that redirects is not one to send a token to. */
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    if (q->connect_timeout_ms > 0)
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, q->connect_timeout_ms);
    if (q->timeout_ms > 0)
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, q->timeout_ms);
    if (q->cainfo)
        curl_easy_setopt(h, CURLOPT_CAINFO, q->cainfo);
    if (q->capath)
        curl_easy_setopt(h, CURLOPT_CAPATH, q->capath);
    CURLcode cc = curl_easy_perform(h);
    if (cc == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
    else
        snprintf(err, errn, "%s", ebuf[0] ? ebuf : curl_easy_strerror(cc));
    curl_easy_cleanup(h);
    return cc;
}
