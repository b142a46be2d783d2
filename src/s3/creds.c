/*
 * The fetched credential sources (see creds.h), after botocore 1.29's
 * credentials.py and utils.py (Debian's python3-botocore).
 *
 * Why a blocking libcurl easy handle of its own: a fetch happens at
 * configuration time or, for a refresh, while a request is being signed;
 * the transfers waiting meanwhile are the same load's, and botocore blocks
 * them the same way. Its connections are not the data's.
 *
 * Why IMDS gives up after one try of one second: botocore's defaults
 * (metadata_service_timeout 1, num_attempts 1), so that a machine that is
 * not on EC2 starts within about a second. A token PUT that is answered
 * 403/404/405 falls back to IMDSv1 as botocore does; one that times out or
 * cannot connect means "no instance metadata here", not a failure.
 */
#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "src/s3/creds.h"
#include "src/s3/fetch_internal.h"
#include "src/s3/jsonflat_internal.h"
#include "src/s3/sign.h"

extern char **environ;

/* botocore's RefreshableCredentials windows. */
#define ADVISORY_S (15 * 60)
#define MANDATORY_S (10 * 60)
/* botocore's SSOTokenProvider._REFRESH_WINDOW. */
#define SSO_REFRESH_S (15 * 60)
/* What any of these answers may hold: a few KiB. */
#define BODY_MAX ((size_t)64 << 10)

struct pinio__s3_creds {
    pthread_mutex_t mu;
    enum pinio__s3_creds_kind kind;
    char *source;
    char *command, *role_arn, *session_name, *external_id, *token_file;
    char *sts_url, *sts_region, *url, *auth_token, *auth_token_file, *cainfo, *capath;
    char *sso_role, *sso_account, *sso_cache_dir, *sso_key;
    char *sso_oidc_url, *sso_start_url, *sso_region;
    unsigned duration_s;
    pinio__s3_creds *base;
    char *ak, *sk, *tok;
    time_t expiry; /* 0: never */
    unsigned fetches;
};

static void wipe(char **s)
{
    if (*s) {
        explicit_bzero(*s, strlen(*s));
        free(*s);
        *s = NULL;
    }
}

void pinio__s3_keys_clear(pinio__s3_keys *k)
{
    if (!k)
        return;
    wipe(&k->access_key);
    wipe(&k->secret_key);
    wipe(&k->session_token);
}

/* Another program's or server's text in our one-line message: visible
 * ASCII kept, every other byte as \xHH, at most cap-1 bytes. */
static const char *escaped(char *out, size_t cap, const char *in, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 5 < cap; i++) {
        unsigned char ch = (unsigned char)in[i];
        if (ch >= 0x20 && ch < 0x7f && ch != '\\')
            out[o++] = (char)ch;
        else
            o += (size_t)snprintf(out + o, cap - o, "\\x%02x", ch);
    }
    out[o] = '\0';
    return out;
}

/* ---- HTTP ------------------------------------------------------------- */

typedef pinio__s3_fetch_resp http_resp;

/* One request through fetch.c with this source's CA settings; 0 with
 * r->status set, or the transport's failure: the CURLcode returned, its
 * text in `err`. */
static CURLcode http_do(const pinio__s3_creds *c, const char *method, const char *url,
                        struct curl_slist *hl, const char *body, long timeout_ms, http_resp *r,
                        char *err, size_t errn)
{
    pinio__s3_fetch_req q = {
        .url = url,
        .method = method,
        .body = body,
        .headers = hl,
        .connect_timeout_ms = timeout_ms,
        .timeout_ms = timeout_ms,
        .cainfo = c->cainfo,
        .capath = c->capath,
        .cap = BODY_MAX,
    };
    CURLcode cc = pinio__s3_fetch(&q, r, err, errn);
    if (cc != CURLE_OK && r->big)
        snprintf(err, errn, "an answer over 64 KiB");
    return cc;
}

/* ---- answers ---------------------------------------------------------- */

/* "2026-12-07T20:00:00Z", with fractional seconds or a +hh:mm offset;
 * "...UTC" too, as older AWS CLI v2 releases wrote an SSO token's expiry. */
static bool parse_time(const char *s, time_t *out)
{
    struct tm tm = {0};
    int n = 0;
    if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
               &tm.tm_min, &tm.tm_sec, &n) != 6)
        return false;
    const char *p = s + n;
    if (*p == '.')
        for (p++; isdigit((unsigned char)*p); p++)
            ;
    long off = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (strcmp(p, "UTC") == 0) {
        p += 3;
    } else if (*p == '+' || *p == '-') {
        int hh, mm;
        if (sscanf(p + 1, "%2d:%2d", &hh, &mm) != 2)
            return false;
        off = (hh * 3600L + mm * 60L) * (*p == '-' ? -1 : 1);
        p += 6;
    } else {
        return false;
    }
    if (*p || tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31)
        return false;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    *out = timegm(&tm) - off;
    return true;
}

/* The text of <TAG>...</TAG> in an XML answer, malloc'ed; NULL when absent. */
static char *xml_text(const char *body, const char *tag)
{
    char open[64], close[64];
    snprintf(open, sizeof(open), "<%s>", tag);
    snprintf(close, sizeof(close), "</%s>", tag);
    const char *a = strstr(body, open);
    const char *b = a ? strstr(a, close) : NULL;
    if (!a || !b)
        return NULL;
    a += strlen(open);
    return strndup(a, (size_t)(b - a));
}

/* The key id and the token go into header lines: refuse what would break
 * or inject one; any bytes do for the secret (it only keys the HMAC). */
static const char *bad_keys(const char *ak, const char *sk, const char *tok)
{
    if (!ak || !*ak || !sk || !*sk)
        return "no AccessKeyId or SecretAccessKey";
    for (const unsigned char *p = (const unsigned char *)ak; *p; p++)
        if (*p <= 0x20 || *p >= 0x7f || strchr("/,;=", *p))
            return "the access key id has a character no AWS key has (a blank, a control "
                   "character or one of / , ; =)";
    for (const unsigned char *p = (const unsigned char *)(tok ? tok : ""); *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return "the session token has a character no AWS key has (a control character)";
    return NULL;
}

/* Fetched keys in (*ak etc., taken over) of one fetch: validated and set. */
static int take_keys(pinio__s3_creds *c, char **ak, char **sk, char **tok, time_t expiry,
                     pinio_diag *diag)
{
    const char *bad = bad_keys(*ak, *sk, *tok);
    if (bad) {
        pinio_diag_set(diag, -EPROTO, "%s: a malformed answer (%s)", c->source, bad);
        wipe(ak);
        wipe(sk);
        wipe(tok);
        return -EPROTO;
    }
    wipe(&c->ak);
    wipe(&c->sk);
    wipe(&c->tok);
    c->ak = *ak;
    c->sk = *sk;
    c->tok = *tok && **tok ? *tok : NULL;
    if (!c->tok)
        wipe(tok);
    *ak = *sk = *tok = NULL;
    c->expiry = expiry;
    c->fetches++;
    return 0;
}

/* A JSON credentials answer: the container endpoint's and IMDS's
 * (AccessKeyId, SecretAccessKey, Token, Expiration), credential_process's
 * (Version 1, SessionToken). Nested values are allowed beside the keys
 * (an endpoint may add members), and a secret may hold any character. */
static int json_keys(pinio__s3_creds *c, const char *body, size_t len, bool process,
                     pinio_diag *diag)
{
    pinio__s3_jfield f[] = {{"AccessKeyId"}, {"SecretAccessKey"}, {"Token"}, {"Expiration"},
                            {"Code"},        {"SessionToken"},    {"Version"}};
    const size_t nf = process ? 7 : 5;
    const char *why = pinio__s3_jflat(body, len, f, nf, PINIO__S3_JFLAT_NESTED);
    if (why) {
        if (strcmp(why, "out of memory") == 0)
            return -ENOMEM;
        pinio_diag_set(diag, -EPROTO, "%s: a malformed answer (%s)", c->source, why);
        return -EPROTO;
    }
    /* Only a string is a key, a time or a code; Version is the number 1. */
    for (size_t i = 0; i < 6; i++)
        if (f[i].val && !f[i].str) {
            explicit_bzero(f[i].val, strlen(f[i].val));
            free(f[i].val);
            f[i].val = NULL;
        }
    bool v1 = f[6].val && !f[6].str && strcmp(f[6].val, "1") == 0;
    free(f[6].val);
    char *v[5] = {f[0].val, f[1].val, f[5].val ? f[5].val : f[2].val, f[3].val, f[4].val};
    if (f[5].val)
        wipe(&f[2].val);
    time_t exp = 0;
    if (!why && v[4] && strcmp(v[4], "Success") != 0)
        why = "Code is not Success";
    if (!why && process && !v1)
        why = "Version is not 1";
    if (!why && v[3] && !parse_time(v[3], &exp))
        why = "Expiration is not an ISO 8601 time";
    if (!why && !v[3] && !process)
        why = "no Expiration";
    free(v[3]);
    free(v[4]);
    if (why) {
        wipe(&v[0]);
        wipe(&v[1]);
        wipe(&v[2]);
        pinio_diag_set(diag, -EPROTO, "%s: a malformed answer (%s)", c->source, why);
        return -EPROTO;
    }
    return take_keys(c, &v[0], &v[1], &v[2], exp, diag);
}

/* An error answer's words, escaped, for the message: S3/STS XML's
 * <Code>, else the body's first line. */
static void answer_words(const http_resp *r, char *out, size_t cap)
{
    out[0] = '\0';
    if (!r->body)
        return;
    char *code = xml_text(r->body, "Code");
    if (code) {
        escaped(out, cap, code, strlen(code));
        free(code);
        return;
    }
    size_t n = strcspn(r->body, "\r\n");
    escaped(out, cap, r->body, n > 120 ? 120 : n);
}

static int http_fail(const pinio__s3_creds *c, const char *what, const http_resp *r,
                     pinio_diag *diag)
{
    char words[160];
    answer_words(r, words, sizeof(words));
    int rc = r->status == 401 || r->status == 403 ? -EACCES : r->status == 404 ? -ENOENT : -EIO;
    pinio_diag_set(diag, rc, "%s: %s answered HTTP %ld%s%s", c->source, what, r->status,
                   words[0] ? " " : "", words);
    return rc;
}

/* ---- STS -------------------------------------------------------------- */

static int form_add(char **body, const char *name, const char *value)
{
    char *enc = pinio__s3_uri_encode(value, strlen(value), false);
    char *nb = NULL;
    int rc = enc && asprintf(&nb, "%s%s%s=%s", *body ? *body : "", *body ? "&" : "", name, enc) >= 0
                 ? 0
                 : -ENOMEM;
    if (enc) {
        explicit_bzero(enc, strlen(enc));
        free(enc);
    }
    if (*body) {
        explicit_bzero(*body, strlen(*body));
        free(*body);
    }
    *body = rc == 0 ? nb : NULL;
    return rc;
}

/* The file's token, trimmed, at most 16 KiB (a Kubernetes token is ~1 KiB). */
static int read_token(const pinio__s3_creds *c, const char *path, char **out, pinio_diag *diag)
{
    *out = NULL;
    FILE *f = fopen(path, "re");
    if (!f) {
        int e = -errno;
        pinio_diag_set(diag, e, "%s: cannot read the token file %s: %s", c->source, path,
                       pinio_strerror(e));
        return e;
    }
    char *buf = calloc(1, 16385);
    size_t n = buf ? fread(buf, 1, 16384, f) : 0;
    bool more = buf && fgetc(f) != EOF;
    fclose(f);
    if (!buf)
        return -ENOMEM;
    while (n && isspace((unsigned char)buf[n - 1]))
        buf[--n] = '\0';
    const char *why = more ? "over 16 KiB" : n == 0 ? "empty" : NULL;
    for (size_t i = 0; !why && i < n; i++)
        if ((unsigned char)buf[i] < 0x20 || buf[i] == 0x7f)
            why = "holds a control character";
    if (why) {
        explicit_bzero(buf, 16385);
        free(buf);
        pinio_diag_set(diag, -EINVAL, "%s: the token file %s is %s", c->source, path, why);
        return -EINVAL;
    }
    *out = buf;
    return 0;
}

static int sts_answer(pinio__s3_creds *c, const char *action, const http_resp *r,
                      pinio_diag *diag)
{
    char what[64];
    snprintf(what, sizeof(what), "STS %s", action);
    if (r->status != 200)
        return http_fail(c, what, r, diag);
    char *ak = xml_text(r->body ? r->body : "", "AccessKeyId");
    char *sk = xml_text(r->body ? r->body : "", "SecretAccessKey");
    char *tok = xml_text(r->body ? r->body : "", "SessionToken");
    char *exp = xml_text(r->body ? r->body : "", "Expiration");
    time_t t = 0;
    bool ok = ak && sk && tok && exp && parse_time(exp, &t);
    free(exp);
    if (!ok) {
        wipe(&ak);
        wipe(&sk);
        wipe(&tok);
        pinio_diag_set(diag, -EPROTO, "%s: a malformed answer from %s (no Credentials with "
                       "AccessKeyId, SecretAccessKey, SessionToken and Expiration)", c->source,
                       what);
        return -EPROTO;
    }
    return take_keys(c, &ak, &sk, &tok, t, diag);
}

static int sts_post(pinio__s3_creds *c, const char *action, const char *body,
                    struct curl_slist *hl, pinio_diag *diag)
{
    char url[1100], err[CURL_ERROR_SIZE + 64];
    snprintf(url, sizeof(url), "%s/", c->sts_url);
    http_resp r;
    CURLcode cc = http_do(c, "POST", url, hl, body, 10000, &r, err, sizeof(err));
    int rc;
    if (cc != CURLE_OK) {
        pinio_diag_set(diag, -EIO, "%s: STS %s at %s failed: %s", c->source, action, c->sts_url,
                       err);
        rc = -EIO;
    } else {
        rc = sts_answer(c, action, &r, diag);
    }
    pinio__s3_fetch_resp_free(&r);
    return rc;
}

static int fetch_web_identity(pinio__s3_creds *c, pinio_diag *diag)
{
    char *token = NULL, *body = NULL, dur[16];
    int rc = read_token(c, c->token_file, &token, diag);
    if (rc < 0)
        return rc;
    snprintf(dur, sizeof(dur), "%u", c->duration_s);
    if (form_add(&body, "Action", "AssumeRoleWithWebIdentity") ||
        form_add(&body, "Version", "2011-06-15") || form_add(&body, "RoleArn", c->role_arn) ||
        form_add(&body, "RoleSessionName", c->session_name) ||
        (c->duration_s && form_add(&body, "DurationSeconds", dur)) ||
        form_add(&body, "WebIdentityToken", token)) {
        rc = -ENOMEM;
    }
    explicit_bzero(token, strlen(token));
    free(token);
    struct curl_slist *hl = NULL;
    if (rc == 0)
        hl = curl_slist_append(NULL, "Content-Type: application/x-www-form-urlencoded; "
                                     "charset=utf-8");
    if (rc == 0 && hl)
        rc = sts_post(c, "AssumeRoleWithWebIdentity", body, hl, diag);
    else if (rc == 0)
        rc = -ENOMEM;
    curl_slist_free_all(hl);
    if (body) {
        explicit_bzero(body, strlen(body));
        free(body);
    }
    return rc;
}

/* The digest of s in lower-case hex into out (2 * its size + 1 bytes). */
static void digest_hex(const char *s, const EVP_MD *type, char *out)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned mdlen = 0;
    EVP_Digest(s, strlen(s), md, &mdlen, type, NULL);
    for (unsigned i = 0; i < mdlen; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
}

/* AssumeRole, signed (SigV4, service "sts") with the source profile's keys. */
static int fetch_assume_role(pinio__s3_creds *c, time_t now, pinio_diag *diag)
{
    pinio__s3_keys k = {0};
    int rc = pinio__s3_creds_get(c->base, now, &k, diag);
    if (rc < 0)
        return rc;
    char *body = NULL, dur[16], hash[65], amz_date[32], *host = NULL;
    snprintf(dur, sizeof(dur), "%u", c->duration_s);
    if (form_add(&body, "Action", "AssumeRole") || form_add(&body, "Version", "2011-06-15") ||
        form_add(&body, "RoleArn", c->role_arn) ||
        form_add(&body, "RoleSessionName", c->session_name) ||
        (c->duration_s && form_add(&body, "DurationSeconds", dur)) ||
        (c->external_id && form_add(&body, "ExternalId", c->external_id)))
        rc = -ENOMEM;
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(amz_date, sizeof(amz_date), "%Y%m%dT%H%M%SZ", &tm);
    const char *h = strstr(c->sts_url, "://");
    if (rc == 0 && !(host = strdup(h ? h + 3 : c->sts_url)))
        rc = -ENOMEM;
    struct curl_slist *hl = NULL;
    char *lines[5] = {0};
    if (rc == 0) {
        digest_hex(body, EVP_sha256(), hash);
        const char *ctype = "application/x-www-form-urlencoded; charset=utf-8";
        pinio__sigv4_header sh[4] = {
            {"content-type", ctype}, {"host", host}, {"x-amz-date", amz_date},
            {"x-amz-security-token", k.session_token}};
        pinio__sigv4_in in = {
            .method = "POST", .path = "/", .headers = sh, .nheaders = k.session_token ? 4 : 3,
            .payload_hash = hash, .amz_date = amz_date, .region = c->sts_region,
            .service = "sts", .access_key = k.access_key, .secret_key = k.secret_key,
        };
        pinio__sigv4_out sig;
        rc = pinio__sigv4(&in, &sig, NULL);
        if (rc == 0) {
            if (asprintf(&lines[0], "Content-Type: %s", ctype) < 0 ||
                asprintf(&lines[1], "X-Amz-Date: %s", amz_date) < 0 ||
                asprintf(&lines[2], "Authorization: %s", sig.authorization) < 0 ||
                (k.session_token && asprintf(&lines[3], "X-Amz-Security-Token: %s",
                                             k.session_token) < 0))
                rc = -ENOMEM;
            pinio__sigv4_out_free(&sig);
        } else {
            pinio_diag_set(diag, rc, "%s: the source profile's keys cannot sign a request",
                           c->source);
        }
    }
    for (int i = 0; rc == 0 && i < 4 && lines[i]; i++) {
        struct curl_slist *l = curl_slist_append(hl, lines[i]);
        if (!l)
            rc = -ENOMEM;
        else
            hl = l;
    }
    if (rc == 0)
        rc = sts_post(c, "AssumeRole", body, hl, diag);
    curl_slist_free_all(hl);
    for (int i = 0; i < 4; i++)
        wipe(&lines[i]);
    wipe(&body);
    free(host);
    pinio__s3_keys_clear(&k);
    return rc;
}

/* ---- the container endpoint and IMDS ----------------------------------- */

static int fetch_container(pinio__s3_creds *c, pinio_diag *diag)
{
    char *token = NULL, *line = NULL, err[CURL_ERROR_SIZE + 64];
    int rc = 0;
    if (c->auth_token_file)
        rc = read_token(c, c->auth_token_file, &token, diag);
    else if (c->auth_token && !(token = strdup(c->auth_token)))
        rc = -ENOMEM;
    if (rc < 0)
        return rc;
    if (token && strpbrk(token, "\r\n")) {
        pinio_diag_set(diag, -EINVAL, "%s: the authorization token has a line break", c->source);
        rc = -EINVAL;
    }
    struct curl_slist *hl = NULL, *l;
    if (rc == 0 && !(hl = curl_slist_append(NULL, "Accept: application/json")))
        rc = -ENOMEM;
    if (rc == 0 && token) {
        if (asprintf(&line, "Authorization: %s", token) < 0 || !(l = curl_slist_append(hl, line)))
            rc = -ENOMEM;
        else
            hl = l;
    }
    http_resp r = {0};
    /* botocore: 2 s per try, 3 tries a second apart, for what may pass
     * (the agent starting up); an answer it gave is final. */
    for (int attempt = 0; rc == 0 && attempt < 3; attempt++) {
        if (attempt)
            sleep(1);
        pinio__s3_fetch_resp_free(&r);
        CURLcode cc = http_do(c, "GET", c->url, hl, NULL, 2000, &r, err, sizeof(err));
        if (cc != CURLE_OK) {
            pinio_diag_set(diag, -EIO, "%s: %s", c->source, err);
            rc = -EIO;
        } else if (r.status >= 500) {
            rc = http_fail(c, "the endpoint", &r, diag);
        } else if (r.status != 200) {
            rc = http_fail(c, "the endpoint", &r, diag);
            break;
        } else {
            rc = json_keys(c, r.body ? r.body : "", r.len, false, diag);
            break;
        }
        if (attempt < 2)
            rc = 0;
    }
    pinio__s3_fetch_resp_free(&r);
    curl_slist_free_all(hl);
    wipe(&line);
    wipe(&token);
    return rc;
}

/* 1: no instance metadata service answered (not on EC2). */
static int fetch_imds(pinio__s3_creds *c, pinio_diag *diag)
{
    char url[1200], err[CURL_ERROR_SIZE + 64], *tline = NULL, *role = NULL;
    http_resp r;
    snprintf(url, sizeof(url), "%s/latest/api/token", c->url);
    struct curl_slist *hl = curl_slist_append(NULL, "x-aws-ec2-metadata-token-ttl-seconds: 21600");
    if (!hl)
        return -ENOMEM;
    CURLcode cc = http_do(c, "PUT", url, hl, NULL, 1000, &r, err, sizeof(err));
    curl_slist_free_all(hl);
    hl = NULL;
    int rc = 0;
    if (cc != CURLE_OK) {
        pinio__s3_fetch_resp_free(&r);
        return 1;
    }
    if (r.status == 200 && r.body && r.len && !strpbrk(r.body, "\r\n")) {
        if (asprintf(&tline, "x-aws-ec2-metadata-token: %s", r.body) < 0 ||
            !(hl = curl_slist_append(NULL, tline)))
            rc = -ENOMEM;
    } else if (r.status != 403 && r.status != 404 && r.status != 405) {
        rc = http_fail(c, "the token request", &r, diag);
    } /* else IMDSv1: no token */
    pinio__s3_fetch_resp_free(&r);
    snprintf(url, sizeof(url), "%s/latest/meta-data/iam/security-credentials/", c->url);
    if (rc == 0 && http_do(c, "GET", url, hl, NULL, 1000, &r, err, sizeof(err)) == CURLE_OK) {
        size_t n = r.body ? strcspn(r.body, "\r\n") : 0;
        /* No role attached (404) or nothing: no credentials, as botocore. */
        if (r.status != 200 || !n)
            rc = 1;
        else if (!(role = pinio__s3_uri_encode(r.body, n, false)))
            rc = -ENOMEM;
        pinio__s3_fetch_resp_free(&r);
    } else if (rc == 0) {
        rc = 1;
    }
    if (rc == 0) {
        snprintf(url, sizeof(url), "%s/latest/meta-data/iam/security-credentials/%s", c->url,
                 role);
        cc = http_do(c, "GET", url, hl, NULL, 1000, &r, err, sizeof(err));
        if (cc != CURLE_OK) {
            pinio_diag_set(diag, -EIO, "%s: the role's credentials: %s", c->source, err);
            rc = -EIO;
        } else if (r.status != 200) {
            rc = http_fail(c, "the role's credentials", &r, diag);
        } else {
            rc = json_keys(c, r.body ? r.body : "", r.len, false, diag);
        }
        pinio__s3_fetch_resp_free(&r);
    }
    curl_slist_free_all(hl);
    wipe(&tline);
    free(role);
    return rc;
}

/* ---- IAM Identity Center (SSO) ---------------------------------------- */

/* The members of the AWS CLI's cached token that pinio reads; the last
 * four are what a refresh needs (botocore's SSOTokenProvider refreshes only
 * when all four are there and the registration has not expired). */
enum { T_ACCESS, T_EXPIRES, T_REFRESH, T_CLIENT, T_SECRET, T_REGEXP, T_N };

/* s as a JSON string into out (6 * strlen(s) + 3 bytes), escaped as
 * Python's json.dumps escapes ASCII (botocore writes the cache with it);
 * other bytes are UTF-8 that JSON takes as they are. */
static size_t json_quote(char *out, const char *s)
{
    size_t o = 0;
    out[o++] = '"';
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        const char *e = *p == '"' ? "\\\"" : *p == '\\' ? "\\\\" : *p == '\n' ? "\\n"
                      : *p == '\r' ? "\\r" : *p == '\t' ? "\\t" : *p == '\b' ? "\\b"
                      : *p == '\f' ? "\\f" : NULL;
        if (e) {
            memcpy(out + o, e, 2);
            o += 2;
        } else if (*p < 0x20) {
            o += (size_t)sprintf(out + o, "\\u%04x", *p);
        } else {
            out[o++] = (char)*p;
        }
    }
    out[o++] = '"';
    out[o] = '\0';
    return o;
}

/* {"k0": v0, "k1": v1, ...} of n string members, as json.dumps writes a
 * dict (", " and ": "), malloc'ed; NULL when out of memory. */
static char *json_object(const char *const *k, const char *const *v, size_t n)
{
    size_t cap = 3;
    for (size_t i = 0; i < n; i++)
        cap += 6 * (strlen(k[i]) + strlen(v[i])) + 10;
    char *out = malloc(cap), *o = out;
    if (!out)
        return NULL;
    *o++ = '{';
    for (size_t i = 0; i < n; i++) {
        if (i) {
            memcpy(o, ", ", 2);
            o += 2;
        }
        o += json_quote(o, k[i]);
        memcpy(o, ": ", 2);
        o += 2;
        o += json_quote(o, v[i]);
    }
    *o++ = '}';
    *o = '\0';
    return out;
}

/* text as the whole of path, replaced at once: a temporary file of mode
 * 0600 beside it (the mode botocore creates the cache with), renamed over
 * it, so that another process reading the cache (a second rank, the AWS
 * CLI) never sees half a token. 0 or -errno. */
static int replace_file(const char *path, const char *text)
{
    char *tmp = NULL;
    if (asprintf(&tmp, "%s.XXXXXX", path) < 0)
        return -ENOMEM;
    int fd = mkostemp(tmp, O_CLOEXEC), rc = 0;
    if (fd < 0) {
        rc = -errno;
        free(tmp);
        return rc;
    }
    for (size_t n = strlen(text), off = 0; rc == 0 && off < n;) {
        ssize_t w = write(fd, text + off, n - off);
        if (w < 0 && errno != EINTR)
            rc = -errno;
        else if (w > 0)
            off += (size_t)w;
    }
    if (rc == 0 && fsync(fd) != 0)
        rc = -errno;
    if (close(fd) != 0 && rc == 0)
        rc = -errno;
    if (rc == 0 && rename(tmp, path) != 0)
        rc = -errno;
    if (rc < 0)
        unlink(tmp);
    free(tmp);
    return rc;
}

/* CreateToken's error answer in a few words: its JSON "error" member
 * (invalid_grant, ...), else the body's first line, escaped. */
static void oidc_words(const http_resp *r, char *out, size_t cap)
{
    pinio__s3_jfield e[] = {{"error"}};
    if (r->body && !pinio__s3_jflat(r->body, r->len, e, 1, PINIO__S3_JFLAT_NESTED) && e[0].val &&
        e[0].str)
        escaped(out, cap, e[0].val, strlen(e[0].val));
    else
        answer_words(r, out, cap);
    pinio__s3_jflat_clear(e, 1);
}

/* CreateToken's answer (accessToken, expiresIn in seconds, refreshToken
 * when it hands out a new one) written back to the cache file as botocore's
 * _attempt_create_token writes it; f[T_ACCESS] and *exp then the new
 * token's. 0; 1 with why[] when the answer is not a token; < 0 with diag
 * when the cache cannot be rewritten (botocore fails the same way). */
static int sso_take_refresh(pinio__s3_creds *c, const char *path, const http_resp *r,
                            pinio__s3_jfield *f, time_t now, time_t *exp, char *why, size_t wn,
                            pinio_diag *diag)
{
    pinio__s3_jfield a[] = {{"accessToken"}, {"expiresIn"}, {"refreshToken"}};
    const char *bad = pinio__s3_jflat(r->body ? r->body : "", r->len, a, 3,
                                      PINIO__S3_JFLAT_NESTED);
    if (bad && strcmp(bad, "out of memory") == 0)
        return -ENOMEM;
    char *end = NULL;
    long long in = !bad && a[1].val && !a[1].str ? strtoll(a[1].val, &end, 10) : 0;
    if (!bad && (!a[0].val || !a[0].str || !*a[0].val || strpbrk(a[0].val, "\r\n")))
        bad = "no accessToken string of one line";
    else if (!bad && (!end || *end || in <= 0 || in > 10LL * 366 * 86400))
        bad = "no expiresIn in whole seconds";
    else if (!bad && a[2].val && !a[2].str)
        bad = "a refreshToken that is not a string";
    if (bad) {
        pinio__s3_jflat_clear(a, 3);
        snprintf(why, wn, "a malformed answer from SSO OIDC CreateToken (%s)", bad);
        return 1;
    }
    char when[32];
    time_t t = now + (time_t)in;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
    const char *k[] = {"startUrl", "region", "accessToken", "expiresAt", "clientId",
                       "clientSecret", "registrationExpiresAt", "refreshToken"};
    const char *v[] = {c->sso_start_url, c->sso_region, a[0].val, when, f[T_CLIENT].val,
                       f[T_SECRET].val, f[T_REGEXP].val, a[2].val};
    /* Without a new refreshToken botocore writes none: the next refresh
     * then needs a login, as it would after botocore's. */
    char *text = json_object(k, v, a[2].val ? 8 : 7);
    int rc = text ? replace_file(path, text) : -ENOMEM;
    if (text) {
        explicit_bzero(text, strlen(text));
        free(text);
    }
    if (rc == 0) {
        wipe(&f[T_ACCESS].val);
        f[T_ACCESS].val = a[0].val;
        a[0].val = NULL;
        *exp = t;
    } else if (rc != -ENOMEM) {
        pinio_diag_set(diag, rc, "%s: the SSO token was refreshed but cannot be written back to "
                       "%s: %s", c->source, path, pinio_strerror(rc));
    }
    pinio__s3_jflat_clear(a, 3);
    return rc;
}

/* botocore's SSOTokenProvider._refresh_access_token: the cached token
 * exchanged at SSO OIDC's CreateToken (grant refresh_token) for a new one.
 * 0: refreshed; 1: not, why[] says why (for the caller's message: the old
 * token is used while it lasts); < 0 a failure of the whole fetch. */
static int sso_refresh(pinio__s3_creds *c, const char *path, pinio__s3_jfield *f, time_t now,
                       time_t *exp, char *why, size_t wn, pinio_diag *diag)
{
    char missing[96] = "";
    for (int i = T_REFRESH; i < T_N; i++)
        if (!f[i].val || !f[i].str)
            snprintf(missing + strlen(missing), sizeof(missing) - strlen(missing), "%s%s",
                     missing[0] ? ", " : "", f[i].name);
    time_t reg = 0;
    if (missing[0]) {
        snprintf(why, wn, "the cached token has no %s to refresh it with", missing);
        return 1;
    }
    if (!parse_time(f[T_REGEXP].val, &reg)) {
        snprintf(why, wn, "its registrationExpiresAt is not an ISO 8601 time");
        return 1;
    }
    if (reg <= now) {
        char e[64];
        snprintf(why, wn, "its client registration expired at %s",
                 escaped(e, sizeof(e), f[T_REGEXP].val, strlen(f[T_REGEXP].val)));
        return 1;
    }
    const char *k[] = {"grantType", "clientId", "clientSecret", "refreshToken"};
    const char *v[] = {"refresh_token", f[T_CLIENT].val, f[T_SECRET].val, f[T_REFRESH].val};
    char *body = json_object(k, v, 4), *url = NULL, err[CURL_ERROR_SIZE + 64];
    struct curl_slist *hl = NULL;
    int rc = 0;
    if (!body || asprintf(&url, "%s/token", c->sso_oidc_url) < 0 ||
        !(hl = curl_slist_append(NULL, "Content-Type: application/json")))
        rc = -ENOMEM;
    http_resp r = {0};
    if (rc == 0) {
        CURLcode cc = http_do(c, "POST", url, hl, body, 10000, &r, err, sizeof(err));
        char words[160];
        if (cc != CURLE_OK) {
            snprintf(why, wn, "SSO OIDC CreateToken at %s failed: %s", c->sso_oidc_url, err);
            rc = 1;
        } else if (r.status != 200) {
            oidc_words(&r, words, sizeof(words));
            snprintf(why, wn, "SSO OIDC CreateToken at %s answered HTTP %ld%s%s",
                     c->sso_oidc_url, r.status, words[0] ? " " : "", words);
            rc = 1;
        } else {
            rc = sso_take_refresh(c, path, &r, f, now, exp, why, wn, diag);
        }
    }
    pinio__s3_fetch_resp_free(&r);
    curl_slist_free_all(hl);
    free(url);
    if (body) {
        explicit_bzero(body, strlen(body));
        free(body);
    }
    return rc;
}

/* The AWS CLI's cached token (`aws sso login` writes it): accessToken
 * while expiresAt is ahead, else why not, for the message. Read afresh at
 * each fetch, so a login while a long load runs is taken. An sso_session's
 * token within botocore's refresh window (15 minutes) is refreshed first;
 * a failed refresh keeps a token that has not expired yet, as botocore
 * does (it catches the failure and goes on with the cached token). */
static int sso_token(pinio__s3_creds *c, const char *path, time_t now, char **out,
                     pinio_diag *diag)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = -errno;
        pinio_diag_set(diag, e, "%s: %s %s: run `aws sso login` with "
                       "this profile", c->source, e == -ENOENT ? "no cached SSO token"
                       : "cannot read the cached SSO token", path);
        return e;
    }
    char *buf = malloc(BODY_MAX + 1);
    size_t n = 0;
    ssize_t got = 1;
    while (buf && n < BODY_MAX && (got = read(fd, buf + n, BODY_MAX - n)) > 0)
        n += (size_t)got;
    char extra;
    bool big = buf && n == BODY_MAX && read(fd, &extra, 1) > 0;
    close(fd);
    if (!buf)
        return -ENOMEM;
    buf[n] = '\0';
    pinio__s3_jfield f[T_N] = {{"accessToken"}, {"expiresAt"},    {"refreshToken"},
                               {"clientId"},    {"clientSecret"}, {"registrationExpiresAt"}};
    const char *why = big ? "over 64 KiB" : got < 0 ? "a read error"
                                              : pinio__s3_jflat(buf, n, f, T_N, PINIO__S3_JFLAT_NESTED);
    explicit_bzero(buf, n);
    free(buf);
    if (why && strcmp(why, "out of memory") == 0)
        return -ENOMEM;
    time_t exp = 0;
    if (!why && (!f[0].val || !f[0].str || !*f[0].val))
        why = "no accessToken";
    else if (!why && (!f[1].val || !f[1].str || !parse_time(f[1].val, &exp)))
        why = "no expiresAt as an ISO 8601 time";
    else if (!why && strpbrk(f[0].val, "\r\n"))
        why = "an accessToken with a line break";
    if (why) {
        pinio__s3_jflat_clear(f, T_N);
        pinio_diag_set(diag, -EPROTO, "%s: the cached SSO token %s is not valid (%s): run "
                       "`aws sso login` with this profile", c->source, path, why);
        return -EPROTO;
    }
    char nowhy[PINIO_DIAG_PATH_MAX + 400] = "";
    if (c->sso_oidc_url && exp - now < SSO_REFRESH_S) {
        int rc = sso_refresh(c, path, f, now, &exp, nowhy, sizeof(nowhy), diag);
        if (rc < 0) {
            pinio__s3_jflat_clear(f, T_N);
            return rc;
        }
    }
    if (exp <= now) {
        if (nowhy[0])
            pinio_diag_set(diag, -EKEYEXPIRED, "%s: the SSO token cached in %s expired at %s and "
                           "was not refreshed (%s): run `aws sso login` with this profile",
                           c->source, path, f[1].val, nowhy);
        else
            pinio_diag_set(diag, -EKEYEXPIRED, "%s: the SSO token cached in %s expired at %s: "
                           "run `aws sso login` with this profile", c->source, path, f[1].val);
        pinio__s3_jflat_clear(f, T_N);
        return -EKEYEXPIRED;
    }
    *out = f[0].val;
    f[0].val = NULL;
    pinio__s3_jflat_clear(f, T_N);
    return 0;
}

/* GetRoleCredentials's answer: {"roleCredentials": {accessKeyId,
 * secretAccessKey, sessionToken, expiration (ms since the epoch)}}. */
static int sso_keys(pinio__s3_creds *c, const http_resp *r, pinio_diag *diag)
{
    pinio__s3_jfield outer[] = {{"roleCredentials"}};
    pinio__s3_jfield f[] = {{"accessKeyId"}, {"secretAccessKey"}, {"sessionToken"},
                            {"expiration"}};
    const char *why = pinio__s3_jflat(r->body ? r->body : "", r->len, outer, 1,
                                      PINIO__S3_JFLAT_NESTED);
    if (!why && (!outer[0].val || outer[0].str || outer[0].val[0] != '{'))
        why = "no roleCredentials object";
    if (!why)
        why = pinio__s3_jflat(outer[0].val, strlen(outer[0].val), f, 4, 0);
    pinio__s3_jflat_clear(outer, 1);
    if (why && strcmp(why, "out of memory") == 0)
        return -ENOMEM;
    char *end = NULL;
    long long ms = !why && f[3].val && !f[3].str ? strtoll(f[3].val, &end, 10) : 0;
    if (!why && (!f[0].str || !f[1].str || !f[2].str))
        why = "no accessKeyId, secretAccessKey and sessionToken strings";
    else if (!why && (!end || *end || ms <= 0))
        why = "no expiration in milliseconds";
    if (why) {
        pinio__s3_jflat_clear(f, 4);
        pinio_diag_set(diag, -EPROTO, "%s: a malformed answer from GetRoleCredentials (%s)",
                       c->source, why);
        return -EPROTO;
    }
    free(f[3].val);
    return take_keys(c, &f[0].val, &f[1].val, &f[2].val, (time_t)(ms / 1000), diag);
}

/* GET /federation/credentials, unsigned: the cached token in
 * x-amz-sso_bearer_token is the authority (botocore's sso client). */
static int fetch_sso(pinio__s3_creds *c, time_t now, pinio_diag *diag)
{
    char key[41], *path = NULL, *token = NULL, *line = NULL, *url = NULL;
    char err[CURL_ERROR_SIZE + 64];
    digest_hex(c->sso_key, EVP_sha1(), key);
    if (asprintf(&path, "%s/%s.json", c->sso_cache_dir, key) < 0)
        return -ENOMEM;
    int rc = sso_token(c, path, now, &token, diag);
    free(path);
    if (rc < 0)
        return rc;
    char *role = pinio__s3_uri_encode(c->sso_role, strlen(c->sso_role), false);
    char *acct = pinio__s3_uri_encode(c->sso_account, strlen(c->sso_account), false);
    struct curl_slist *hl = NULL;
    if (!role || !acct ||
        asprintf(&url, "%s/federation/credentials?role_name=%s&account_id=%s", c->url, role,
                 acct) < 0 ||
        asprintf(&line, "x-amz-sso_bearer_token: %s", token) < 0 ||
        !(hl = curl_slist_append(NULL, line)))
        rc = -ENOMEM;
    free(role);
    free(acct);
    http_resp r = {0};
    if (rc == 0) {
        CURLcode cc = http_do(c, "GET", url, hl, NULL, 10000, &r, err, sizeof(err));
        if (cc != CURLE_OK) {
            pinio_diag_set(diag, -EIO, "%s: GetRoleCredentials at %s failed: %s", c->source,
                           c->url, err);
            rc = -EIO;
        } else if (r.status == 401) {
            /* botocore's UnauthorizedSSOTokenError: the portal no longer
             * takes the login, whatever the cached expiry says. */
            pinio_diag_set(diag, -EACCES, "%s: GetRoleCredentials answered HTTP 401: the SSO "
                           "session has expired or is not valid: run `aws sso login` with "
                           "this profile", c->source);
            rc = -EACCES;
        } else if (r.status != 200) {
            rc = http_fail(c, "GetRoleCredentials", &r, diag);
        } else {
            rc = sso_keys(c, &r, diag);
        }
    }
    pinio__s3_fetch_resp_free(&r);
    curl_slist_free_all(hl);
    free(url);
    wipe(&line);
    wipe(&token);
    return rc;
}

/* ---- credential_process ----------------------------------------------- */

int pinio__s3_split_command(const char *cmd, char ***argv)
{
    *argv = NULL;
    size_t n = 0, cap = 4, len = strlen(cmd);
    char **v = calloc(cap + 1, sizeof(*v));
    char *w = malloc(len + 1);
    if (!v || !w) {
        free(v);
        free(w);
        return -ENOMEM;
    }
    const char *p = cmd;
    int rc = 0;
    while (rc == 0) {
        while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
            p++;
        if (!*p)
            break;
        size_t k = 0;
        while (*p && !(*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) {
            if (*p == '\'') {
                const char *e = strchr(p + 1, '\'');
                if (!e) {
                    rc = -EINVAL;
                    break;
                }
                memcpy(w + k, p + 1, (size_t)(e - p - 1));
                k += (size_t)(e - p - 1);
                p = e + 1;
            } else if (*p == '"') {
                for (p++; *p && *p != '"'; p++) {
                    if (*p == '\\' && p[1] && strchr("\"\\$`\n", p[1]))
                        p++;
                    w[k++] = *p;
                }
                if (*p != '"') {
                    rc = -EINVAL;
                    break;
                }
                p++;
            } else if (*p == '\\') {
                if (!p[1]) {
                    rc = -EINVAL;
                    break;
                }
                w[k++] = p[1];
                p += 2;
            } else {
                w[k++] = *p++;
            }
        }
        if (rc < 0)
            break;
        if (n == cap) {
            char **nv = realloc(v, (cap * 2 + 1) * sizeof(*nv));
            if (!nv) {
                rc = -ENOMEM;
                break;
            }
            v = nv;
            cap *= 2;
        }
        if (!(v[n] = strndup(w, k))) {
            rc = -ENOMEM;
            break;
        }
        v[++n] = NULL;
    }
    free(w);
    if (rc == 0 && n == 0)
        rc = -EINVAL;
    if (rc < 0) {
        for (size_t i = 0; i < n; i++)
            free(v[i]);
        free(v);
        return rc;
    }
    *argv = v;
    return (int)n;
}

/* Runs the command without a shell (botocore: shlex.split, then Popen),
 * its stdout the answer, its stderr kept for the message. */
static int fetch_process(pinio__s3_creds *c, pinio_diag *diag)
{
    char **argv = NULL;
    int n = pinio__s3_split_command(c->command, &argv);
    if (n < 0) {
        pinio_diag_set(diag, n, "%s: credential_process is %s", c->source,
                       n == -EINVAL ? "empty or has an unclosed quote" : "too large");
        return n;
    }
    int out[2] = {-1, -1}, err[2] = {-1, -1}, rc = 0;
    posix_spawn_file_actions_t fa;
    pid_t pid = -1;
    bool fa_ok = false;
    if (pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC)) {
        rc = -errno;
    } else if ((rc = -posix_spawn_file_actions_init(&fa)) == 0) {
        fa_ok = true;
        posix_spawn_file_actions_adddup2(&fa, out[1], 1);
        posix_spawn_file_actions_adddup2(&fa, err[1], 2);
        rc = -posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    }
    if (fa_ok)
        posix_spawn_file_actions_destroy(&fa);
    if (out[1] >= 0)
        close(out[1]);
    if (err[1] >= 0)
        close(err[1]);
    char *body = NULL, ebuf[512];
    size_t len = 0, elen = 0;
    bool big = false;
    if (rc == 0 && !(body = malloc(BODY_MAX + 1)))
        rc = -ENOMEM;
    /* Both pipes read to their ends, so neither fills and blocks the child. */
    struct pollfd pf[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
    while (rc == 0 && (pf[0].fd >= 0 || pf[1].fd >= 0)) {
        if (poll(pf, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            rc = -errno;
            break;
        }
        for (int i = 0; i < 2; i++) {
            if (pf[i].fd < 0 || !pf[i].revents)
                continue;
            char tmp[4096];
            ssize_t got = read(pf[i].fd, tmp, sizeof(tmp));
            if (got < 0 && errno == EINTR)
                continue;
            if (got <= 0) {
                pf[i].fd = -1;
                continue;
            }
            size_t g = (size_t)got;
            if (i == 0) {
                size_t k = len + g > BODY_MAX ? BODY_MAX - len : g;
                big = big || k < g;
                memcpy(body + len, tmp, k);
                len += k;
            } else {
                size_t k = elen + g > sizeof(ebuf) - 1 ? sizeof(ebuf) - 1 - elen : g;
                memcpy(ebuf + elen, tmp, k);
                elen += k;
            }
        }
    }
    if (out[0] >= 0)
        close(out[0]);
    if (err[0] >= 0)
        close(err[0]);
    int status = 0;
    if (pid > 0)
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
    ebuf[elen] = '\0';
    char eline[200];
    size_t el = strcspn(ebuf, "\r\n");
    escaped(eline, sizeof(eline), ebuf, el);
    if (rc < 0) {
        pinio_diag_set(diag, rc, "%s: cannot run credential_process's %s: %s", c->source,
                       argv[0], pinio_strerror(rc));
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        rc = -EIO;
        if (WIFEXITED(status))
            pinio_diag_set(diag, rc, "%s: credential_process exited with status %d%s%s",
                           c->source, WEXITSTATUS(status), eline[0] ? ": " : "", eline);
        else
            pinio_diag_set(diag, rc, "%s: credential_process was killed by signal %d",
                           c->source, WTERMSIG(status));
    } else if (big) {
        rc = -EPROTO;
        pinio_diag_set(diag, rc, "%s: credential_process wrote over 64 KiB", c->source);
    } else {
        body[len] = '\0';
        rc = json_keys(c, body, len, true, diag);
    }
    if (body) {
        explicit_bzero(body, len);
        free(body);
    }
    for (int i = 0; i < n; i++)
        free(argv[i]);
    free(argv);
    return rc;
}

/* ---- the source ------------------------------------------------------- */

static int fetch(pinio__s3_creds *c, time_t now, pinio_diag *diag)
{
    switch (c->kind) {
    case PINIO__S3_CREDS_PROCESS:
        return fetch_process(c, diag);
    case PINIO__S3_CREDS_WEB_IDENTITY:
        return fetch_web_identity(c, diag);
    case PINIO__S3_CREDS_ASSUME_ROLE:
        return fetch_assume_role(c, now, diag);
    case PINIO__S3_CREDS_CONTAINER:
        return fetch_container(c, diag);
    case PINIO__S3_CREDS_IMDS:
        return fetch_imds(c, diag);
    case PINIO__S3_CREDS_SSO:
        return fetch_sso(c, now, diag);
    case PINIO__S3_CREDS_STATIC:
        break;
    }
    return 0;
}

static int dup_opt(char **dst, const char *src)
{
    if (!src)
        return 0;
    return (*dst = strdup(src)) ? 0 : -ENOMEM;
}

int pinio__s3_creds_open(pinio__s3_creds **out, const pinio__s3_creds_spec *s, pinio_diag *diag)
{
    *out = NULL;
    pinio__s3_creds *c = calloc(1, sizeof(*c));
    if (!c) {
        pinio__s3_creds_free(s->base);
        pinio_diag_set(diag, -ENOMEM, "%s: out of memory", s->source);
        return -ENOMEM;
    }
    pthread_mutex_init(&c->mu, NULL);
    c->kind = s->kind;
    c->base = s->base;
    c->duration_s = s->duration_s;
    int rc = 0;
    const char *const src[] = {s->source, s->command, s->role_arn, s->session_name,
                               s->external_id, s->token_file, s->sts_url, s->sts_region,
                               s->url, s->auth_token, s->auth_token_file, s->cainfo, s->capath,
                               s->sso_role, s->sso_account, s->sso_cache_dir, s->sso_key,
                               s->sso_oidc_url, s->sso_start_url, s->sso_region};
    char **dst[] = {&c->source, &c->command, &c->role_arn, &c->session_name, &c->external_id,
                    &c->token_file, &c->sts_url, &c->sts_region, &c->url, &c->auth_token,
                    &c->auth_token_file, &c->cainfo, &c->capath, &c->sso_role,
                    &c->sso_account, &c->sso_cache_dir, &c->sso_key, &c->sso_oidc_url,
                    &c->sso_start_url, &c->sso_region};
    for (size_t i = 0; rc == 0 && i < sizeof(dst) / sizeof(*dst); i++)
        rc = dup_opt(dst[i], src[i]);
    if (rc == 0 && !c->source)
        rc = -EINVAL;
    if (rc == 0 && s->kind == PINIO__S3_CREDS_STATIC) {
        char *ak = s->access_key ? strdup(s->access_key) : NULL;
        char *sk = s->secret_key ? strdup(s->secret_key) : NULL;
        char *tok = s->session_token ? strdup(s->session_token) : NULL;
        if ((s->access_key && !ak) || (s->secret_key && !sk) || (s->session_token && !tok)) {
            wipe(&ak);
            wipe(&sk);
            wipe(&tok);
            rc = -ENOMEM;
        } else {
            const char *bad = bad_keys(ak, sk, tok);
            if (bad) {
                pinio_diag_set(diag, -EINVAL, "%s: %s", c->source, bad);
                wipe(&ak);
                wipe(&sk);
                wipe(&tok);
                rc = -EINVAL;
            } else {
                c->ak = ak;
                c->sk = sk;
                c->tok = tok && *tok ? tok : NULL;
                if (!c->tok)
                    wipe(&tok);
            }
        }
    } else if (rc == 0) {
        rc = fetch(c, time(NULL), diag);
    }
    if (rc == -ENOMEM)
        pinio_diag_set(diag, rc, "%s: out of memory", s->source ? s->source : "credentials");
    if (rc != 0) {
        pinio__s3_creds_free(c);
        return rc;
    }
    *out = c;
    return 0;
}

void pinio__s3_creds_free(pinio__s3_creds *c)
{
    if (!c)
        return;
    pinio__s3_creds_free(c->base);
    char **s[] = {&c->source, &c->command, &c->role_arn, &c->session_name, &c->external_id,
                  &c->token_file, &c->sts_url, &c->sts_region, &c->url, &c->auth_token,
                  &c->auth_token_file, &c->cainfo, &c->capath, &c->sso_role, &c->sso_account,
                  &c->sso_cache_dir, &c->sso_key, &c->sso_oidc_url, &c->sso_start_url,
                  &c->sso_region, &c->ak, &c->sk, &c->tok};
    for (size_t i = 0; i < sizeof(s) / sizeof(*s); i++)
        wipe(s[i]);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

int pinio__s3_creds_get(pinio__s3_creds *c, time_t now, pinio__s3_keys *out, pinio_diag *diag)
{
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&c->mu);
    int rc = 0;
    if (c->expiry && now > c->expiry - ADVISORY_S) {
        pinio_diag tmp = {0};
        rc = fetch(c, now, &tmp);
        if (rc > 0) { /* IMDS gone since: a failure now, the keys are still in use */
            pinio_diag_set(&tmp, -EIO, "%s: no longer answers", c->source);
            rc = -EIO;
        }
        /* In the advisory window the keys still work: a failed refresh
         * keeps them (botocore logs it and goes on); past the mandatory
         * one it is the error. */
        if (rc < 0 && now <= c->expiry - MANDATORY_S)
            rc = 0;
        else if (rc < 0 && diag)
            *diag = tmp;
        if (rc == 0 && now >= c->expiry) {
            pinio_diag_set(diag, -EKEYEXPIRED, "%s: the credentials fetched are already expired",
                           c->source);
            rc = -EKEYEXPIRED;
        }
    }
    if (rc == 0) {
        out->access_key = strdup(c->ak);
        out->secret_key = strdup(c->sk);
        out->session_token = c->tok ? strdup(c->tok) : NULL;
        if (!out->access_key || !out->secret_key || (c->tok && !out->session_token)) {
            pinio__s3_keys_clear(out);
            pinio_diag_set(diag, -ENOMEM, "%s: out of memory", c->source);
            rc = -ENOMEM;
        }
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

const char *pinio__s3_creds_source(const pinio__s3_creds *c) { return c->source; }

unsigned pinio__s3_creds_fetches(pinio__s3_creds *c)
{
    pthread_mutex_lock(&c->mu);
    unsigned n = c->fetches;
    pthread_mutex_unlock(&c->mu);
    return n;
}

time_t pinio__s3_creds_expiry(pinio__s3_creds *c)
{
    pthread_mutex_lock(&c->mu);
    time_t t = c->expiry;
    pthread_mutex_unlock(&c->mu);
    return t;
}
