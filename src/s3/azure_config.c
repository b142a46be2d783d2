/* Azure credentials and endpoint, read the way the Azure SDKs and the az
 * CLI read them, so that a user's existing environment works unchanged:
 * a connection string first (it names the endpoint, which is how Azurite
 * and private endpoints are reached), then an account with its key or a
 * SAS token, then a workload identity (AKS: a projected service-account
 * token exchanged for a bearer token), else anonymous.
 *
 * Why a configured source that fails is an error and never a fall to the
 * next one: a half-written connection string or a token file that cannot
 * be read would otherwise become unsigned requests, and the user would
 * read "403" about credentials that were never sent.
 *
 * Why no value is ever quoted in a message: a connection string holds the
 * account key, a SAS token its signature, the token file and the token
 * endpoint's answer a bearer token; messages name the variable instead. */
#include <curl/curl.h>
#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "src/base/clock.h"
#include "src/s3/azure.h"
#include "src/s3/azure_internal.h"
#include "src/s3/fetch_internal.h"
#include "src/s3/jsonflat_internal.h"

/* Azurite's well-known development account (public, in every SDK's docs):
 * what UseDevelopmentStorage=true stands for. */
#define DEV_ACCOUNT "devstoreaccount1"
#define DEV_KEY "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
#define DEV_ENDPOINT "http://127.0.0.1:10000/devstoreaccount1"

/* A bearer token is fetched again this long before it expires. */
#define REFRESH_S 300.0

static void wipe_free(char *s)
{
    if (s) {
        OPENSSL_cleanse(s, strlen(s));
        free(s);
    }
}

void pinio__az_cfg_free(pinio__az_cfg *c)
{
    if (!c)
        return;
    free(c->account);
    if (c->key) {
        OPENSSL_cleanse(c->key, c->keylen);
        free(c->key);
    }
    wipe_free(c->sas);
    free(c->endpoint);
    free(c->shown);
    free(c->protocol);
    free(c->suffix);
    free(c->token_file);
    free(c->client_id);
    free(c->tenant);
    free(c->authority);
    wipe_free(c->bearer);
    free(c);
}

const char *pinio__az_cfg_endpoint(const pinio__az_cfg *c)
{
    return c->endpoint ? c->endpoint : c->shown;
}

const char *pinio__az_cfg_auth(const pinio__az_cfg *c)
{
    return c->auth_desc;
}

static int bad(pinio_diag *diag, const char *var, const char *why)
{
    pinio_diag_set(diag, -EINVAL, "%s: %s", var, why);
    return -EINVAL;
}

/* An endpoint as scheme://host[:port][/path], trailing '/' dropped; no
 * user info, query or fragment (a SAS belongs in its own field). */
static int take_endpoint(pinio__az_cfg *c, const char *v, size_t n, const char *var,
                         pinio_diag *diag)
{
    while (n && v[n - 1] == '/')
        n--;
    bool http = n > 7 && strncasecmp(v, "http://", 7) == 0;
    bool https = n > 8 && strncasecmp(v, "https://", 8) == 0;
    if (!http && !https)
        return bad(diag, var, "BlobEndpoint is not an http:// or https:// URL");
    for (size_t i = 0; i < n; i++)
        if (v[i] == '@' || v[i] == '?' || v[i] == '#' || (unsigned char)v[i] <= 0x20 ||
            (unsigned char)v[i] >= 0x7f)
            return bad(diag, var, "BlobEndpoint holds user info, a query, a fragment or "
                                  "characters a URL cannot");
    free(c->endpoint);
    if (!(c->endpoint = strndup(v, n)))
        return -ENOMEM;
    return 0;
}

static int set_str(char **dst, const char *v, size_t n)
{
    free(*dst);
    *dst = strndup(v, n);
    return *dst ? 0 : -ENOMEM;
}

/* The account key, base64 as the portal shows it. */
static int take_key(pinio__az_cfg *c, const char *v, size_t n, const char *var,
                    pinio_diag *diag)
{
    if (!n || n % 4 || n > 1024)
        return bad(diag, var, "the account key is not base64");
    unsigned char *k = malloc(n);
    if (!k)
        return -ENOMEM;
    int len = EVP_DecodeBlock(k, (const unsigned char *)v, (int)n);
    if (len < 0) {
        free(k);
        return bad(diag, var, "the account key is not base64");
    }
    for (size_t i = n; i > n - 2 && v[i - 1] == '='; i--)
        len--;
    if (c->key) {
        OPENSSL_cleanse(c->key, c->keylen);
        free(c->key);
    }
    c->key = k;
    c->keylen = (size_t)len;
    return 0;
}

static int take_sas(pinio__az_cfg *c, const char *v, size_t n, const char *var,
                    pinio_diag *diag)
{
    if (n && *v == '?') {
        v++;
        n--;
    }
    if (!n)
        return bad(diag, var, "the SAS token is empty");
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)v[i] <= 0x20 || (unsigned char)v[i] >= 0x7f || v[i] == '#')
            return bad(diag, var, "the SAS token holds characters a URL query cannot");
    wipe_free(c->sas);
    c->sas = strndup(v, n);
    return c->sas ? 0 : -ENOMEM;
}

/* AZURE_STORAGE_CONNECTION_STRING: "Name=value;Name=value", names in any
 * case, a value running to the next ';' (a key's '=' padding included). */
static int parse_connection_string(pinio__az_cfg *c, const char *cs, pinio_diag *diag)
{
    static const char var[] = "AZURE_STORAGE_CONNECTION_STRING";
    int rc = 0;
    bool dev = false;
    for (const char *p = cs; rc == 0 && p;) {
        const char *end = strchr(p, ';'), *next = end ? end + 1 : NULL;
        size_t len = end ? (size_t)(end - p) : strlen(p);
        while (len && (*p == ' ' || *p == '\t')) {
            p++;
            len--;
        }
        while (len && (p[len - 1] == ' ' || p[len - 1] == '\t'))
            len--;
        p = len ? p : NULL;
        const char *eq = p ? memchr(p, '=', len) : NULL;
        if (p && !eq)
            return bad(diag, var, "a part without '=' (the form is Name=value;Name=value)");
        size_t nl = eq ? (size_t)(eq - p) : 0, vl = eq ? len - nl - 1 : 0;
        const char *v = eq ? eq + 1 : NULL;
#define NAME(s) (nl == sizeof(s) - 1 && strncasecmp(p, s, nl) == 0)
        if (!p)
            ;
        else if (NAME("AccountName"))
            rc = set_str(&c->account, v, vl);
        else if (NAME("AccountKey"))
            rc = take_key(c, v, vl, var, diag);
        else if (NAME("SharedAccessSignature"))
            rc = take_sas(c, v, vl, var, diag);
        else if (NAME("BlobEndpoint"))
            rc = take_endpoint(c, v, vl, var, diag);
        else if (NAME("DefaultEndpointsProtocol"))
            rc = set_str(&c->protocol, v, vl);
        else if (NAME("EndpointSuffix"))
            rc = set_str(&c->suffix, v, vl);
        else if (NAME("UseDevelopmentStorage"))
            dev = vl == 4 && strncasecmp(v, "true", 4) == 0;
        /* Other services' endpoints (Queue, Table, File) are not ours. */
#undef NAME
        p = next;
    }
    if (rc < 0)
        return rc;
    if (dev) {
        if ((rc = set_str(&c->account, DEV_ACCOUNT, strlen(DEV_ACCOUNT))) < 0 ||
            (!c->key && (rc = take_key(c, DEV_KEY, strlen(DEV_KEY), var, diag)) < 0) ||
            (!c->endpoint && (rc = take_endpoint(c, DEV_ENDPOINT, strlen(DEV_ENDPOINT), var,
                                                 diag)) < 0))
            return rc;
    }
    if (c->key && !c->account)
        return bad(diag, var, "AccountKey without AccountName");
    if (c->protocol && strcasecmp(c->protocol, "https") != 0 && strcasecmp(c->protocol, "http"))
        return bad(diag, var, "DefaultEndpointsProtocol is neither https nor http");
    return 0;
}

/* The endpoint for account `a` when none is configured. */
static char *default_endpoint(const pinio__az_cfg *c, const char *a, size_t al)
{
    char *u;
    if (asprintf(&u, "%s://%.*s.blob.%s", c->protocol ? c->protocol : "https", (int)al, a,
                 c->suffix ? c->suffix : "core.windows.net") < 0)
        return NULL;
    for (char *p = u; *p && *p != ':'; p++)
        *p = (char)(*p | 0x20);
    return u;
}

static const char *env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

int pinio__az_cfg_load(pinio__az_cfg **out, pinio_diag *diag)
{
    *out = NULL;
    pinio__az_cfg *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    int rc = 0;
    const char *cs = env("AZURE_STORAGE_CONNECTION_STRING");
    const char *from = NULL;
    if (cs) {
        rc = parse_connection_string(c, cs, diag);
        from = "AZURE_STORAGE_CONNECTION_STRING";
    }
    const char *acct = env("AZURE_STORAGE_ACCOUNT");
    if (rc == 0 && !c->key && !c->sas && acct && !c->account)
        rc = set_str(&c->account, acct, strlen(acct));
    if (rc == 0 && !c->key && !c->sas) {
        const char *k = env("AZURE_STORAGE_KEY"), *sas = env("AZURE_STORAGE_SAS_TOKEN");
        if (k && !c->account)
            rc = bad(diag, "AZURE_STORAGE_KEY", "set without AZURE_STORAGE_ACCOUNT (the key's "
                                                "account)");
        else if (k) {
            rc = take_key(c, k, strlen(k), "AZURE_STORAGE_KEY", diag);
            from = "AZURE_STORAGE_ACCOUNT and AZURE_STORAGE_KEY";
        } else if (sas) {
            rc = take_sas(c, sas, strlen(sas), "AZURE_STORAGE_SAS_TOKEN", diag);
            from = "AZURE_STORAGE_SAS_TOKEN";
        }
    }
    if (rc == 0 && !c->key && !c->sas) {
        const char *tf = env("AZURE_FEDERATED_TOKEN_FILE"), *id = env("AZURE_CLIENT_ID"),
                   *tenant = env("AZURE_TENANT_ID");
        if (tf && (!id || !tenant))
            rc = bad(diag, id ? "AZURE_TENANT_ID" : "AZURE_CLIENT_ID",
                     "not set, and AZURE_FEDERATED_TOKEN_FILE is (workload identity needs "
                     "AZURE_CLIENT_ID and AZURE_TENANT_ID with it)");
        else if (tf) {
            const char *ah = env("AZURE_AUTHORITY_HOST");
            c->token_file = strdup(tf);
            c->client_id = strdup(id);
            c->tenant = strdup(tenant);
            c->authority = strdup(ah ? ah : "https://login.microsoftonline.com/");
            rc = c->token_file && c->client_id && c->tenant && c->authority ? 0 : -ENOMEM;
            from = "AZURE_FEDERATED_TOKEN_FILE";
        }
    }
    if (rc == 0 && c->account && !c->endpoint)
        rc = (c->shown = default_endpoint(c, c->account, strlen(c->account))) ? 0 : -ENOMEM;
    if (rc == 0) {
        c->auth = c->key ? AZ_KEY : c->sas ? AZ_SAS : c->token_file ? AZ_BEARER : AZ_ANON;
        switch (c->auth) {
        case AZ_KEY:
            snprintf(c->auth_desc, sizeof(c->auth_desc), "SharedKey of account %.40s (%s)",
                     c->account, from);
            break;
        case AZ_SAS:
            snprintf(c->auth_desc, sizeof(c->auth_desc), "a SAS token (%s)", from);
            break;
        case AZ_BEARER:
            snprintf(c->auth_desc, sizeof(c->auth_desc), "a workload identity bearer token "
                     "(AZURE_FEDERATED_TOKEN_FILE, AZURE_CLIENT_ID, AZURE_TENANT_ID)");
            break;
        default:
            snprintf(c->auth_desc, sizeof(c->auth_desc), "no credentials (anonymous: none of "
                     "AZURE_STORAGE_CONNECTION_STRING's keys, AZURE_STORAGE_KEY, "
                     "AZURE_STORAGE_SAS_TOKEN, AZURE_FEDERATED_TOKEN_FILE)");
        }
    }
    if (rc < 0) {
        pinio__az_cfg_free(c);
        return rc;
    }
    *out = c;
    return 0;
}

char *pinio__az_endpoint_for(const pinio__az_cfg *c, const char *account, size_t al)
{
    if (c->endpoint)
        return strdup(c->endpoint);
    return default_endpoint(c, account, al);
}

/* ---- workload identity: the client-assertion token exchange ----------- */

/* The file's token, whole, trailing white space dropped; NULL with the
 * diag filled. Read again at each exchange: the kubelet rotates it. */
static char *read_token_file(const char *path, pinio_diag *diag)
{
    FILE *f = fopen(path, "re");
    if (!f) {
        int e = errno;
        pinio_diag_set_at(diag, -e, path, PINIO_DIAG_NO_OFFSET, "AZURE_FEDERATED_TOKEN_FILE "
                          "cannot be read: %s", strerror(e));
        return NULL;
    }
    char *t = malloc(64 << 10);
    size_t n = t ? fread(t, 1, (64 << 10) - 1, f) : 0;
    fclose(f);
    if (!t)
        return NULL;
    while (n && (t[n - 1] == '\n' || t[n - 1] == '\r' || t[n - 1] == ' '))
        n--;
    t[n] = '\0';
    if (!n) {
        free(t);
        pinio_diag_set_at(diag, -EINVAL, path, PINIO_DIAG_NO_OFFSET,
                          "AZURE_FEDERATED_TOKEN_FILE is empty");
        return NULL;
    }
    return t;
}

/* access_token and expires_in of the token endpoint's JSON answer (one
 * flat object; Entra's error answers nest an error_codes array, passed
 * over); the "error" code, when it sent one, into `err` (letters, digits
 * and '_' only: the store's word, shown). src/s3/'s own reader
 * (jsonflat.c): the layers' rule keeps src/s3/ below the safetensors
 * parser. Its \uXXXX is ASCII only: no token or error code holds more. */
static int parse_token(const char *s, size_t n, char **tok, uint64_t *expires, char *err,
                       size_t errcap)
{
    pinio__s3_jfield f[] = {{"access_token"}, {"expires_in"}, {"error"}};
    *tok = NULL;
    *expires = 3600;
    err[0] = '\0';
    if (pinio__s3_jflat(s, n, f, 3, PINIO__S3_JFLAT_NESTED | PINIO__S3_JFLAT_ASCII))
        return PINIO_EFORMAT;
    int rc = 0;
    size_t k = 0;
    for (const char *q = f[2].str ? f[2].val : ""; *q && k + 1 < errcap; q++)
        if ((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') ||
            (*q >= '0' && *q <= '9') || *q == '_')
            err[k++] = *q;
    err[k] = '\0';
    /* expires_in: whole seconds, under 2^40; a string one is not read. */
    if (f[1].val && !f[1].str) {
        uint64_t v = 0;
        const char *q = f[1].val;
        for (; *q >= '0' && *q <= '9' && v < (1ull << 40); q++)
            v = v * 10 + (uint64_t)(*q - '0');
        if (*q)
            rc = PINIO_EFORMAT;
        *expires = v;
    }
    if (rc == 0 && f[0].str) {
        *tok = f[0].val;
        f[0].val = NULL;
    }
    pinio__s3_jflat_clear(f, 3);
    return rc;
}

int pinio__az_bearer(pinio__az_cfg *c, pinio_diag *diag)
{
    if (c->bearer && pinio__now_s() < c->bearer_expiry - REFRESH_S)
        return 0;
    char *assertion = read_token_file(c->token_file, diag);
    if (!assertion)
        return diag && diag->code ? diag->code : -ENOMEM;
    size_t al = strlen(c->authority);
    char *url = NULL, *form = NULL;
    char *ea = curl_easy_escape(NULL, assertion, 0), *ei = curl_easy_escape(NULL, c->client_id, 0);
    int rc = ea && ei ? 0 : -ENOMEM;
    if (rc == 0 &&
        (asprintf(&url, "%s%s%s/oauth2/v2.0/token", c->authority,
                  al && c->authority[al - 1] == '/' ? "" : "/", c->tenant) < 0 ||
         asprintf(&form, "client_assertion=%s&client_assertion_type=urn%%3Aietf%%3Aparams%%3A"
                  "oauth%%3Aclient-assertion-type%%3Ajwt-bearer&client_id=%s&grant_type="
                  "client_credentials&scope=https%%3A%%2F%%2Fstorage.azure.com%%2F.default",
                  ea, ei) < 0))
        rc = -ENOMEM;
    if (ea) {
        OPENSSL_cleanse(ea, strlen(ea));
        curl_free(ea);
    }
    curl_free(ei);
    OPENSSL_cleanse(assertion, strlen(assertion));
    free(assertion);
    pinio__s3_fetch_resp b = { 0 };
    CURLcode cc = CURLE_OK;
    if (rc == 0) {
        pinio__s3_fetch_req q = { .url = url, .body = form, .timeout_ms = 30000L,
                                  .cap = (size_t)64 << 10 };
        char ferr[CURL_ERROR_SIZE];
        cc = pinio__s3_fetch(&q, &b, ferr, sizeof(ferr));
        if (cc == CURLE_OUT_OF_MEMORY)
            rc = -ENOMEM;
    }
    long status = b.status;
    /* The authority is the user's configuration, no secret: the message
     * names it; the answer's body (it may echo the assertion) is not. */
    char *tok = NULL, err[96] = "";
    uint64_t exp = 0;
    if (rc == 0 && cc != CURLE_OK) {
        rc = -EIO;
        pinio_diag_set(diag, rc, "workload identity: the token request to %s failed: %s",
                       c->authority, curl_easy_strerror(cc));
    } else if (rc == 0) {
        int pr = b.body ? parse_token(b.body, b.len, &tok, &exp, err, sizeof(err)) : PINIO_EFORMAT;
        if (status != 200 || pr < 0 || !tok) {
            rc = status == 400 || status == 401 || status == 403 ? -EACCES : -EIO;
            pinio_diag_set(diag, rc, "workload identity: the token endpoint %s answered HTTP "
                           "%ld%s%s%s (AZURE_FEDERATED_TOKEN_FILE, AZURE_CLIENT_ID, "
                           "AZURE_TENANT_ID)", c->authority, status,
                           err[0] ? " " : "", err,
                           status == 200 ? " without an access_token" : "");
        }
    }
    if (rc == 0) {
        wipe_free(c->bearer);
        c->bearer = tok;
        c->bearer_expiry = pinio__now_s() + (double)exp;
        tok = NULL;
    }
    wipe_free(tok);
    pinio__s3_fetch_resp_free(&b);
    if (form) {
        OPENSSL_cleanse(form, strlen(form));
        free(form);
    }
    free(url);
    return rc;
}
