/*
 * S3 configuration from the environment and the AWS CLI's files.
 *
 * The files are parsed the way botocore parses them (Python's
 * RawConfigParser plus botocore's one level of nesting): full-line comments
 * with '#' or ';', "name = value" or "name: value" with the name lower-cased,
 * no inline comments, indented lines continuing the setting above, a
 * setting with an empty first line holding "sub = value" lines. What
 * RawConfigParser rejects (a setting before any section, a line that is no
 * setting, a repeated section or name) botocore rejects for the whole
 * file, so pinio does too, naming file and line but never echoing the
 * line: it may hold a secret key.
 */
#include <ctype.h>
#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "src/s3/config_internal.h"

typedef struct ini_entry {
    char *section, *key, *value; /* section points into ini.sections */
} ini_entry;

typedef struct ini {
    const char *path;
    char **sections;
    size_t nsections;
    ini_entry *e;
    size_t n;
} ini;

static void wipe_free(char *s)
{
    if (s) {
        explicit_bzero(s, strlen(s));
        free(s);
    }
}

static void ini_free(ini *f)
{
    for (size_t i = 0; i < f->n; i++) {
        free(f->e[i].key);
        wipe_free(f->e[i].value);
    }
    for (size_t i = 0; i < f->nsections; i++)
        free(f->sections[i]);
    free(f->e);
    free(f->sections);
    memset(f, 0, sizeof(*f));
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t' || *s == '\f' || *s == '\v')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\f' || s[n - 1] == '\v'))
        s[--n] = '\0';
    return s;
}

static int bad_line(const ini *f, unsigned line, const char *what, pinio_diag *diag)
{
    pinio_diag_set_at(diag, PINIO_EFORMAT, f->path, PINIO_DIAG_NO_OFFSET, "line %u: %s", line, what);
    return PINIO_EFORMAT;
}

static int append_value(char **value, const char *more)
{
    size_t a = strlen(*value), b = strlen(more);
    char *v = malloc(a + b + 2);
    if (!v)
        return -ENOMEM;
    memcpy(v, *value, a);
    v[a] = '\n';
    memcpy(v + a + 1, more, b + 1);
    wipe_free(*value);
    *value = v;
    return 0;
}

/* One line of the file (no line break); cur and indent track the setting a
 * deeper-indented line continues. */
static int ini_line(ini *f, char *line, unsigned lineno, ini_entry **cur, size_t *indent,
                    pinio_diag *diag)
{
    size_t ind = strspn(line, " \t");
    char *s = trim(line);
    if (!*s || *s == '#' || *s == ';')
        return 0;
    if (*cur && ind > *indent) {
        /* botocore parses a setting whose first line is empty as nested
         * "sub = value" lines and rejects one without '='. */
        if ((*cur)->value[0] == '\0' || (*cur)->value[0] == '\n') {
            if (!strchr(s, '='))
                return bad_line(f, lineno, "a nested setting without '='", diag);
        }
        return append_value(&(*cur)->value, s);
    }
    *cur = NULL;
    if (*s == '[') {
        char *end = strrchr(s, ']');
        if (!end || end == s + 1)
            return bad_line(f, lineno, "a section header must be [NAME]", diag);
        *end = '\0';
        for (size_t i = 0; i < f->nsections; i++)
            if (strcmp(f->sections[i], s + 1) == 0)
                return bad_line(f, lineno, "this section was already defined", diag);
        char **ns = realloc(f->sections, (f->nsections + 1) * sizeof(*ns));
        if (!ns)
            return -ENOMEM;
        f->sections = ns;
        if (!(ns[f->nsections] = strdup(s + 1)))
            return -ENOMEM;
        f->nsections++;
        return 0;
    }
    if (!f->nsections)
        return bad_line(f, lineno, "a setting before any [section]", diag);
    char *delim = s + strcspn(s, "=:");
    if (!*delim)
        return bad_line(f, lineno, "expected [SECTION], NAME = VALUE or a comment", diag);
    *delim = '\0';
    char *name = trim(s), *value = trim(delim + 1);
    if (!*name)
        return bad_line(f, lineno, "a setting without a name", diag);
    for (char *p = name; *p; p++)
        *p = (char)tolower((unsigned char)*p);
    char *section = f->sections[f->nsections - 1];
    for (size_t i = 0; i < f->n; i++)
        if (f->e[i].section == section && strcmp(f->e[i].key, name) == 0)
            return bad_line(f, lineno, "this setting was already given in its section", diag);
    ini_entry *ne = realloc(f->e, (f->n + 1) * sizeof(*ne));
    if (!ne)
        return -ENOMEM;
    f->e = ne;
    ini_entry *e = &ne[f->n];
    e->section = section;
    e->key = strdup(name);
    e->value = strdup(value);
    if (!e->key || !e->value) {
        free(e->key);
        wipe_free(e->value);
        return -ENOMEM;
    }
    f->n++;
    *cur = e;
    *indent = ind;
    return 0;
}

/* A file that does not exist reads as an empty one, as botocore's does. */
static int ini_parse(ini *f, const char *path, pinio_diag *diag)
{
    f->path = path;
    if (!path)
        return 0;
    FILE *fp = fopen(path, "re");
    if (!fp) {
        if (errno == ENOENT || errno == ENOTDIR)
            return 0;
        int err = -errno;
        pinio_diag_set_at(diag, err, path, PINIO_DIAG_NO_OFFSET, "cannot open: %s",
                          pinio_strerror(err));
        return err;
    }
    char *line = NULL;
    size_t cap = 0, indent = 0;
    ssize_t len;
    unsigned lineno = 0;
    ini_entry *cur = NULL;
    int rc = 0;
    errno = 0;
    while (rc == 0 && (len = getline(&line, &cap, fp)) >= 0) {
        lineno++;
        if (memchr(line, '\0', (size_t)len)) {
            rc = bad_line(f, lineno, "a NUL byte (not a text file)", diag);
            break;
        }
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        rc = ini_line(f, line, lineno, &cur, &indent, diag);
        if (rc == -ENOMEM)
            pinio_diag_set_at(diag, rc, path, PINIO_DIAG_NO_OFFSET, "out of memory");
    }
    if (rc == 0 && ferror(fp)) {
        rc = errno ? -errno : -EIO;
        pinio_diag_set_at(diag, rc, path, PINIO_DIAG_NO_OFFSET, "cannot read: %s",
                          pinio_strerror(rc));
    }
    if (line) {
        explicit_bzero(line, cap);
        free(line);
    }
    fclose(fp);
    return rc;
}

static const char *ini_get(const ini *f, const char *section, const char *key)
{
    if (!section)
        return NULL;
    for (size_t i = 0; i < f->n; i++)
        if (strcmp(f->e[i].section, section) == 0 && strcmp(f->e[i].key, key) == 0)
            return f->e[i].value;
    return NULL;
}

/* "sub = value" inside a nested setting (key's value starts with a line
 * break), into out[n] trimmed; false when absent. */
static bool ini_get_nested(const ini *f, const char *section, const char *key, const char *sub,
                           char *out, size_t n)
{
    const char *v = ini_get(f, section, key);
    if (!v || v[0] != '\n')
        return false;
    for (const char *p = v + 1; *p;) {
        size_t len = strcspn(p, "\n");
        const char *eq = memchr(p, '=', len);
        if (eq) {
            const char *k = p, *ke = eq;
            while (ke > k && (ke[-1] == ' ' || ke[-1] == '\t'))
                ke--;
            if ((size_t)(ke - k) == strlen(sub) && strncmp(k, sub, strlen(sub)) == 0) {
                const char *vs = eq + 1, *ve = p + len;
                while (vs < ve && (*vs == ' ' || *vs == '\t'))
                    vs++;
                while (ve > vs && (ve[-1] == ' ' || ve[-1] == '\t'))
                    ve--;
                snprintf(out, n, "%.*s", (int)(ve - vs), vs);
                return true;
            }
        }
        p += len;
        if (*p)
            p++;
    }
    return false;
}

/* The config file's section for PREFIX NAME ("profile dev", "services s3x"):
 * botocore accepts any blanks between the two words. */
static const char *ini_section2(const ini *f, const char *prefix, const char *name)
{
    size_t k = strlen(prefix);
    for (size_t i = 0; i < f->nsections; i++) {
        const char *s = f->sections[i];
        if (strncmp(s, prefix, k) || (s[k] != ' ' && s[k] != '\t'))
            continue;
        s += k + strspn(s + k, " \t");
        size_t m = strlen(s);
        while (m && (s[m - 1] == ' ' || s[m - 1] == '\t'))
            m--;
        if (m == strlen(name) && strncmp(s, name, m) == 0)
            return f->sections[i];
    }
    return NULL;
}

static const char *ini_section(const ini *f, const char *name)
{
    for (size_t i = 0; i < f->nsections; i++)
        if (strcmp(f->sections[i], name) == 0)
            return f->sections[i];
    return NULL;
}

static const char *env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* $VAR (when var is not NULL), else ~/REL; a leading "~/" expanded as
 * botocore's expanduser does. */
static char *file_path(const char *var, const char *rel)
{
    const char *v = var ? env(var) : NULL;
    const char *home = env("HOME");
    char *out = NULL;
    struct passwd pw, *res = NULL;
    char buf[1024];
    if (!home && getpwuid_r(getuid(), &pw, buf, sizeof(buf), &res) == 0 && res)
        home = res->pw_dir;
    if (v && strncmp(v, "~/", 2) != 0)
        return strdup(v);
    if (!home)
        return v ? strdup(v) : NULL;
    if (asprintf(&out, "%s/%s", home, v ? v + 2 : rel) < 0)
        return NULL;
    return out;
}

static bool valid_region(const char *r)
{
    size_t n = strlen(r);
    if (n < 1 || n > 63 || r[0] == '-' || r[n - 1] == '-')
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)r[i]) && r[i] != '-')
            return false;
    return true;
}

/* Whether a value can go into an HTTP header or URL as is: no control
 * character (a line break would inject a header), and no blank unless allowed. */
static bool printable(const char *s, bool blanks)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f || (*p == ' ' && !blanks))
            return false;
    return true;
}

/* scheme://host[:port][/path] into the cfg; `what` names the source in a
 * message that never echoes the value (an endpoint may carry user:password). */
static int set_endpoint(pinio__s3_cfg *c, const char *url, const char *what, pinio_diag *diag)
{
    const char *rest;
    if (strncasecmp(url, "https://", 8) == 0) {
        c->scheme = strdup("https");
        rest = url + 8;
    } else if (strncasecmp(url, "http://", 7) == 0) {
        c->scheme = strdup("http");
        rest = url + 7;
    } else {
        pinio_diag_set(diag, -EINVAL, "%s: the S3 endpoint is not an http:// or https:// URL", what);
        return -EINVAL;
    }
    if (!c->scheme)
        return -ENOMEM;
    size_t alen = strcspn(rest, "/?#");
    const char *path = rest + alen;
    if (memchr(rest, '@', alen)) {
        pinio_diag_set(diag, -EINVAL, "%s: the S3 endpoint has user info; give credentials "
                       "as AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or in a profile", what);
        return -EINVAL;
    }
    if (strpbrk(path, "?#") || !printable(url, false)) {
        pinio_diag_set(diag, -EINVAL, "%s: the S3 endpoint has a query, a fragment, a blank or a "
                       "control character", what);
        return -EINVAL;
    }
    /* host, [v6] or host:port; the port, when present, all digits and <= 65535. */
    const char *hend = rest + alen, *colon = NULL;
    if (alen && rest[0] == '[') {
        const char *rb = memchr(rest, ']', alen);
        if (rb && rb + 1 < hend && rb[1] == ':')
            colon = rb + 1;
        else if (!rb || rb + 1 != hend)
            colon = rest; /* makes it fail below */
    } else {
        colon = memchr(rest, ':', alen);
    }
    size_t hlen = colon ? (size_t)(colon - rest) : alen;
    long port = -1;
    if (colon && colon != rest) {
        char *e;
        if (!isdigit((unsigned char)colon[1]))
            hlen = 0;
        port = strtol(colon + 1, &e, 10);
        if (e != hend || port < 1 || port > 65535)
            hlen = 0;
    }
    if (hlen == 0) {
        pinio_diag_set(diag, -EINVAL, "%s: the S3 endpoint has no valid host[:port]", what);
        return -EINVAL;
    }
    bool https = c->scheme[0] == 'h' && c->scheme[4] == 's';
    if (port == (https ? 443 : 80))
        port = -1; /* botocore signs the Host without the default port */
    char *host = NULL;
    if ((port < 0 ? asprintf(&host, "%.*s", (int)hlen, rest)
                  : asprintf(&host, "%.*s:%ld", (int)hlen, rest, port)) < 0)
        return -ENOMEM;
    for (char *p = host; *p; p++)
        *p = (char)tolower((unsigned char)*p);
    c->host = host;
    size_t plen = strlen(path);
    while (plen && path[plen - 1] == '/')
        plen--;
    if (!(c->base_path = strndup(path, plen)))
        return -ENOMEM;
    if (asprintf(&c->endpoint, "%s://%s", c->scheme, c->host) < 0) {
        c->endpoint = NULL;
        return -ENOMEM;
    }
    const char *suffixes[] = {".amazonaws.com", ".amazonaws.com.cn"};
    for (size_t i = 0; i < 2; i++) {
        size_t k = strlen(suffixes[i]);
        if (hlen > k && strncmp(host + hlen - k, suffixes[i], k) == 0)
            c->aws_host = true;
    }
    return 0;
}

typedef struct loader {
    pinio__s3_cfg *c;
    ini cred, conf;
    const char *profile;   /* the profile's name */
    bool named;            /* from AWS_DEFAULT_PROFILE / AWS_PROFILE, not the default */
    const char *csect;     /* its section in the credentials file, or NULL */
    const char *psect;     /* its section in the config file, or NULL */
    pinio_diag *diag;
} loader;

/* A true/false setting from the environment, else the profile (botocore
 * reads these from the config file; the credentials file's section first
 * as its full_config merges them). */
static int flag(loader *L, const char *var, const char *key, bool *out)
{
    const char *v = env(var), *from = var;
    char what[PINIO_DIAG_PATH_MAX + 96];
    const ini *f = &L->cred;
    const char *sect = L->csect;
    if (!v && !((v = ini_get(f, sect, key)) && *v)) {
        f = &L->conf;
        sect = L->psect;
        v = ini_get(f, sect, key);
    }
    if (v && from == var && !env(var)) {
        snprintf(what, sizeof(what), "%s [%s] %s", f->path, sect, key);
        from = what;
    }
    *out = false;
    if (!v || !*v || strcasecmp(v, "false") == 0)
        return 0;
    if (strcasecmp(v, "true") == 0) {
        *out = true;
        return 0;
    }
    pinio_diag_set(L->diag, -EINVAL, "%s: expected true or false", from);
    return -EINVAL;
}

static int set_region(loader *L)
{
    const char *from = "AWS_REGION", *r = env(from);
    char what[PINIO_DIAG_PATH_MAX + 64];
    if (!r)
        r = env(from = "AWS_DEFAULT_REGION");
    if (!r && (r = ini_get(&L->conf, L->psect, "region")) && *r) {
        snprintf(what, sizeof(what), "%s [%s] region", L->conf.path, L->psect);
        from = what;
    } else if (!r || !*r) {
        r = "us-east-1";
    }
    if (!valid_region(r)) {
        pinio_diag_set(L->diag, -EINVAL, "%s: not a region name (letters, digits and '-', "
                       "as in us-east-1)", from);
        return -EINVAL;
    }
    return (L->c->region = strdup(r)) ? 0 : -ENOMEM;
}

/* A service's endpoint as the SDKs find it: AWS_ENDPOINT_URL_<VAR>,
 * AWS_ENDPOINT_URL, the `[services NAME]` section the profile's `services`
 * names (its nested `<svc> = endpoint_url = ...`), the profile's
 * endpoint_url; NULL when none. `from` names where, for a message. */
static const char *service_endpoint(loader *L, const char *svc, const char *var, char *nested,
                                    size_t nn, char *what, size_t wn, const char **from)
{
    const char *url = env(*from = var);
    if (!url)
        url = env(*from = "AWS_ENDPOINT_URL");
    const char *services = url ? NULL : ini_get(&L->conf, L->psect, "services");
    const char *ssect = services ? ini_section2(&L->conf, "services", services) : NULL;
    if (!url && ssect && ini_get_nested(&L->conf, ssect, svc, "endpoint_url", nested, nn) &&
        *nested) {
        url = nested;
        snprintf(what, wn, "%s [%s] %s.endpoint_url", L->conf.path, ssect, svc);
        *from = what;
    }
    if (!url && (url = ini_get(&L->conf, L->psect, "endpoint_url")) && *url) {
        snprintf(what, wn, "%s [%s] endpoint_url", L->conf.path, L->psect);
        *from = what;
    }
    return url && *url ? url : NULL;
}

/* https://s3[-fips][.dualstack].REGION.amazonaws.com[.cn], botocore's
 * endpoint rules for S3. */
static void default_host(const pinio__s3_cfg *c, const char *region, char *out, size_t n)
{
    bool cn = strncmp(region, "cn-", 3) == 0;
    snprintf(out, n, "https://s3%s%s.%s.amazonaws.com%s", c->fips ? "-fips" : "",
             c->dualstack ? ".dualstack" : "", region, cn ? ".cn" : "");
}

int pinio__s3_cfg_region_view(const pinio__s3_cfg *cfg, const char *region, pinio__s3_cfg *view,
                              char region_buf[64], char host_buf[160])
{
    if (strlen(region) >= 64 || !valid_region(region))
        return -EINVAL;
    *view = *cfg;
    snprintf(region_buf, 64, "%s", region);
    view->region = region_buf;
    if (cfg->default_endpoint) {
        default_host(cfg, region, host_buf, 160);
        memmove(host_buf, host_buf + 8, strlen(host_buf + 8) + 1); /* "https://" off */
        view->host = host_buf;
    }
    return 0;
}

static int set_endpoint_from(loader *L)
{
    char what[PINIO_DIAG_PATH_MAX + 96], nested[2048];
    const char *from;
    const char *url = service_endpoint(L, "s3", "AWS_ENDPOINT_URL_S3", nested, sizeof(nested),
                                       what, sizeof(what), &from);
    char def[128];
    if (!url || !*url) {
        default_host(L->c, L->c->region, def, sizeof(def));
        url = def;
        from = "the default endpoint";
        L->c->default_endpoint = true;
    }
    int rc = set_endpoint(L->c, url, from, L->diag);
    if (rc == -ENOMEM)
        pinio_diag_set(L->diag, rc, "out of memory");
    return rc;
}

static int set_addressing(loader *L)
{
    char style[64], what[PINIO_DIAG_PATH_MAX + 96];
    const char *from = "PINIO_S3_ADDRESSING", *v = env(from);
    if (!v && ini_get_nested(&L->conf, L->psect, "s3", "addressing_style", style, sizeof(style))) {
        v = style;
        snprintf(what, sizeof(what), "%s [%s] s3.addressing_style", L->conf.path, L->psect);
        from = what;
    }
    if (!v || strcmp(v, "auto") == 0)
        L->c->addressing = PINIO__S3_ADDR_AUTO;
    else if (strcmp(v, "path") == 0)
        L->c->addressing = PINIO__S3_ADDR_PATH;
    else if (strcmp(v, "virtual") == 0)
        L->c->addressing = PINIO__S3_ADDR_VIRTUAL;
    else {
        pinio_diag_set(L->diag, -EINVAL, "%s: the addressing style is auto, path or virtual", from);
        return -EINVAL;
    }
    return 0;
}

/* Static keys as the source `from` ("environment", "FILE [SECTION]"); the
 * key id and token are checked there for what would break a header line. */
static int set_keys(loader *L, const char *ak, const char *sk, const char *tok, const char *from)
{
    pinio__s3_creds_spec s = {.kind = PINIO__S3_CREDS_STATIC, .source = from, .access_key = ak,
                              .secret_key = sk, .session_token = tok};
    int rc = pinio__s3_creds_open(&L->c->creds, &s, L->diag);
    if (rc == 0 && !(L->c->source = strdup(from)))
        rc = -ENOMEM;
    return rc;
}

/* A profile setting as botocore's full_config has it: the credentials
 * file's section over the config file's. `file` gets the file it is in. */
static const char *prof(loader *L, const char *key, const char **file)
{
    const char *v = ini_get(&L->cred, L->csect, key);
    if (v && *v) {
        *file = L->cred.path;
        return v;
    }
    v = ini_get(&L->conf, L->psect, key);
    *file = L->conf.path;
    return v && *v ? v : NULL;
}

/* The static keys of one profile section, as botocore's shared-credentials
 * and config providers read them; 1 when the section has none. */
static int keys_from(loader *L, const ini *f, const char *sect)
{
    const char *ak = ini_get(f, sect, "aws_access_key_id");
    const char *sk = ini_get(f, sect, "aws_secret_access_key");
    if (!ak || !*ak)
        return 1;
    if (!sk || !*sk) {
        pinio_diag_set_at(L->diag, -EINVAL, f->path, PINIO_DIAG_NO_OFFSET,
                          "[%s] has aws_access_key_id but no aws_secret_access_key", sect);
        return -EINVAL;
    }
    const char *tok = ini_get(f, sect, "aws_session_token");
    if (!tok || !*tok)
        tok = ini_get(f, sect, "aws_security_token");
    char from[PINIO_DIAG_PATH_MAX + 64];
    snprintf(from, sizeof(from), "%s [%s]", f->path, sect);
    return set_keys(L, ak, sk, tok, from);
}

static bool legacy_sts_region(const char *r)
{
    static const char *const legacy[] = {
        "ap-northeast-1", "ap-south-1", "ap-southeast-1", "ap-southeast-2", "aws-global",
        "ca-central-1", "eu-central-1", "eu-north-1", "eu-west-1", "eu-west-2", "eu-west-3",
        "sa-east-1", "us-east-1", "us-east-2", "us-west-1", "us-west-2"};
    for (size_t i = 0; i < sizeof(legacy) / sizeof(*legacy); i++)
        if (strcmp(r, legacy[i]) == 0)
            return true;
    return false;
}

/* An http(s) URL for a credentials endpoint, without its trailing '/':
 * into out, or -EINVAL naming `what`. */
static int endpoint_url(loader *L, const char *url, const char *what, char *out, size_t n)
{
    /* No '@' anywhere: user info has no place in these URLs, and one the
     * parser would not see as such must not reach a message either. */
    const char *auth = strstr(url, "://");
    bool ok = (strncasecmp(url, "http://", 7) == 0 || strncasecmp(url, "https://", 8) == 0) &&
              printable(url, false) && strlen(url) < n && auth && strcspn(auth + 3, "/?#") &&
              !strchr(url, '@');
    if (!ok) {
        pinio_diag_set(L->diag, -EINVAL, "%s: not an http:// or https:// URL (without blanks, "
                       "control characters or user info)", what);
        return -EINVAL;
    }
    snprintf(out, n, "%s", url);
    size_t k = strlen(out);
    while (k && out[k - 1] == '/')
        out[--k] = '\0';
    return 0;
}

/* STS's endpoint the way the SDKs choose it: AWS_ENDPOINT_URL_STS,
 * AWS_ENDPOINT_URL, the profile's services/endpoint_url, else
 * sts[-fips].REGION.amazonaws.com, or sts.amazonaws.com for the legacy
 * regions when AWS_STS_REGIONAL_ENDPOINTS (or sts_regional_endpoints)
 * says "legacy". The signing region goes with it. */
static int sts_endpoint(loader *L, char *url, size_t n, char *region, size_t rn)
{
    const char *from, *file;
    char nested[1024], what[PINIO_DIAG_PATH_MAX + 96];
    snprintf(region, rn, "%s", L->c->region);
    const char *v = service_endpoint(L, "sts", "AWS_ENDPOINT_URL_STS", nested, sizeof(nested),
                                     what, sizeof(what), &from);
    if (v)
        return endpoint_url(L, v, from, url, n);
    const char *mode = env("AWS_STS_REGIONAL_ENDPOINTS");
    if (!mode)
        mode = prof(L, "sts_regional_endpoints", &file);
    bool cn = strncmp(region, "cn-", 3) == 0;
    if (mode && strcasecmp(mode, "legacy") == 0 && legacy_sts_region(region) && !L->c->fips) {
        snprintf(region, rn, "us-east-1");
        snprintf(url, n, "https://sts.amazonaws.com");
    } else {
        snprintf(url, n, "https://sts%s.%s.amazonaws.com%s", L->c->fips ? "-fips" : "", region,
                 cn ? ".cn" : "");
    }
    return 0;
}

/* The container endpoint a full URI may name, botocore's list: https to
 * any host; http only to the ECS and EKS Pod Identity agents and loopback. */
static bool container_host_ok(const char *url)
{
    if (strncasecmp(url, "https://", 8) == 0)
        return true;
    if (strncasecmp(url, "http://", 7) != 0)
        return false;
    const char *h = url + 7;
    size_t n;
    if (*h == '[') {
        n = strcspn(h, "]");
        if (h[n] != ']')
            return false;
        n++;
    } else {
        n = strcspn(h, ":/?#");
    }
    static const char *const ok[] = {"169.254.170.2", "169.254.170.23", "[fd00:ec2::23]",
                                     "localhost", "[::1]"};
    for (size_t i = 0; i < sizeof(ok) / sizeof(*ok); i++)
        if (n == strlen(ok[i]) && strncasecmp(h, ok[i], n) == 0)
            return true;
    unsigned a, b, c, d;
    char tail;
    char host[64];
    snprintf(host, sizeof(host), "%.*s", (int)(n < 63 ? n : 63), h);
    return sscanf(host, "%u.%u.%u.%u%c", &a, &b, &c, &d, &tail) == 4 && a == 127 && b < 256 &&
           c < 256 && d < 256;
}

/* A fetched source into *out (the chain's or an assumed role's base),
 * with the configuration's CA settings. */
static int open_into(loader *L, pinio__s3_creds_spec *s, pinio__s3_creds **out)
{
    s->cainfo = L->c->cainfo;
    s->capath = L->c->capath;
    return pinio__s3_creds_open(out, s, L->diag);
}

static int open_source(loader *L, pinio__s3_creds_spec *s)
{
    int rc = open_into(L, s, &L->c->creds);
    if (rc == 0 && !(L->c->source = strdup(s->source)))
        rc = -ENOMEM;
    return rc;
}

static int container(loader *L, pinio__s3_creds **out, char *name, size_t nn);
static int imds(loader *L, pinio__s3_creds **out, char *name, size_t nn);

/* credential_source's keys for an assumed role, botocore's
 * CanonicalNameCredentialSourcer: Environment, EcsContainer or
 * Ec2InstanceMetadata, case and all (botocore validates the name exactly
 * though it looks it up in any case). A source with no keys is the error, as
 * botocore's "No credentials found in credential_source". */
static int credential_source(loader *L, const char *csrc, const char *file, pinio__s3_creds **out)
{
    char name[2300];
    int rc = 1;
    if (strcmp(csrc, "Environment") == 0) {
        const char *ak = env("AWS_ACCESS_KEY_ID"), *sk = env("AWS_SECRET_ACCESS_KEY");
        const char *tok = env("AWS_SESSION_TOKEN");
        if (ak && sk) {
            pinio__s3_creds_spec s = {.kind = PINIO__S3_CREDS_STATIC, .source = "environment",
                                      .access_key = ak, .secret_key = sk,
                                      .session_token = tok ? tok : env("AWS_SECURITY_TOKEN")};
            rc = pinio__s3_creds_open(out, &s, L->diag);
        }
    } else if (strcmp(csrc, "EcsContainer") == 0) {
        rc = container(L, out, name, sizeof(name));
    } else if (strcmp(csrc, "Ec2InstanceMetadata") == 0) {
        rc = imds(L, out, name, sizeof(name));
    } else {
        pinio_diag_set_at(L->diag, -EINVAL, file, PINIO_DIAG_NO_OFFSET,
                          "[%s] credential_source is not Environment, EcsContainer or "
                          "Ec2InstanceMetadata", L->profile);
        return -EINVAL;
    }
    if (rc == 1) {
        pinio_diag_set_at(L->diag, -ENOENT, file, PINIO_DIAG_NO_OFFSET,
                          "[%s] credential_source %s: no credentials found there", L->profile,
                          csrc);
        rc = -ENOENT;
    }
    return rc;
}

/* STS AssumeRole of the profile's role_arn, signed with `base`'s keys
 * (taken over whatever this returns); `from` names the source. */
static int assume_role_with(loader *L, const char *arn, const char *from, pinio__s3_creds *base)
{
    const char *f2;
    char sts[1024], region[64], name[128];
    int rc = sts_endpoint(L, sts, sizeof(sts), region, sizeof(region));
    if (rc < 0) {
        pinio__s3_creds_free(base);
        return rc;
    }
    const char *sn = prof(L, "role_session_name", &f2);
    if (!sn) {
        snprintf(name, sizeof(name), "pinio-session-%lld", (long long)time(NULL));
        sn = name;
    }
    const char *dur = prof(L, "duration_seconds", &f2);
    pinio__s3_creds_spec s = {.kind = PINIO__S3_CREDS_ASSUME_ROLE, .source = from,
                              .role_arn = arn, .session_name = sn,
                              .external_id = prof(L, "external_id", &f2), .sts_url = sts,
                              .sts_region = region, .duration_s = dur ? (unsigned)atoi(dur) : 0,
                              .base = base};
    return open_source(L, &s);
}

/* role_arn + source_profile (static keys there) or credential_source:
 * STS AssumeRole signed with those keys (botocore's AssumeRoleProvider). */
static int assume_role(loader *L, const char *arn, const char *file)
{
    const char *f1, *f2;
    const char *sp = prof(L, "source_profile", &f1);
    const char *csrc = prof(L, "credential_source", &f2);
    char from[PINIO_DIAG_PATH_MAX + 600];
    if (!sp == !csrc) {
        pinio_diag_set_at(L->diag, -EINVAL, file, PINIO_DIAG_NO_OFFSET,
                          "[%s] has role_arn but %s", L->profile,
                          sp ? "both source_profile and credential_source (give one)"
                             : "neither source_profile, credential_source nor "
                               "web_identity_token_file");
        return -EINVAL;
    }
    pinio__s3_creds *base = NULL;
    int rc;
    if (csrc) {
        if ((rc = credential_source(L, csrc, f2, &base)) < 0)
            return rc;
        snprintf(from, sizeof(from), "assume role (%s [%s] role_arn=%s, credential_source %s)",
                 file, L->profile, arn, csrc);
        return assume_role_with(L, arn, from, base);
    }
    const char *cs = ini_section(&L->cred, sp), *ps = ini_section2(&L->conf, "profile", sp);
    if (!ps && strcmp(sp, "default") == 0)
        ps = ini_section(&L->conf, "default");
    const ini *kf = cs && ini_get(&L->cred, cs, "aws_access_key_id") ? &L->cred : &L->conf;
    const char *ks = kf == &L->cred ? cs : ps;
    const char *ak = ini_get(kf, ks, "aws_access_key_id");
    const char *sk = ini_get(kf, ks, "aws_secret_access_key");
    if (!ak || !*ak || !sk || !*sk) {
        pinio_diag_set_at(L->diag, -EINVAL, file, PINIO_DIAG_NO_OFFSET,
                          "[%s] source_profile %s has no aws_access_key_id and "
                          "aws_secret_access_key (pinio takes static keys there)", L->profile, sp);
        return -EINVAL;
    }
    const char *tok = ini_get(kf, ks, "aws_session_token");
    snprintf(from, sizeof(from), "%s [%s]", kf->path, ks);
    pinio__s3_creds_spec bs = {.kind = PINIO__S3_CREDS_STATIC, .source = from, .access_key = ak,
                               .secret_key = sk, .session_token = tok};
    if ((rc = pinio__s3_creds_open(&base, &bs, L->diag)) < 0)
        return rc;
    snprintf(from, sizeof(from), "assume role (%s [%s] role_arn=%s, source_profile %s)", file,
             L->profile, arn, sp);
    return assume_role_with(L, arn, from, base);
}

/* AssumeRoleWithWebIdentity: each setting from the environment, else the
 * profile (botocore's AssumeRoleWithWebIdentityProvider). 1: not configured. */
static int web_identity(loader *L)
{
    const char *file, *f2;
    const char *tf = env("AWS_WEB_IDENTITY_TOKEN_FILE"), *tfrom = "AWS_WEB_IDENTITY_TOKEN_FILE";
    char from[PINIO_DIAG_PATH_MAX * 2 + 200], tfile[PINIO_DIAG_PATH_MAX + 64];
    if (!tf && (tf = prof(L, "web_identity_token_file", &file))) {
        snprintf(tfile, sizeof(tfile), "%s [%s] web_identity_token_file", file, L->profile);
        tfrom = tfile;
    }
    if (!tf)
        return 1;
    snprintf(from, sizeof(from), "web identity (%s=%s)", tfrom, tf);
    const char *arn = env("AWS_ROLE_ARN");
    if (!arn)
        arn = prof(L, "role_arn", &f2);
    if (!arn) {
        pinio_diag_set(L->diag, -EINVAL, "%s: no role to assume: set AWS_ROLE_ARN or the "
                       "profile's role_arn", from);
        return -EINVAL;
    }
    char sts[1024], region[64], name[128];
    int rc = sts_endpoint(L, sts, sizeof(sts), region, sizeof(region));
    if (rc < 0)
        return rc;
    const char *sn = env("AWS_ROLE_SESSION_NAME");
    if (!sn)
        sn = prof(L, "role_session_name", &f2);
    if (!sn) {
        snprintf(name, sizeof(name), "pinio-session-%lld", (long long)time(NULL));
        sn = name;
    }
    pinio__s3_creds_spec s = {.kind = PINIO__S3_CREDS_WEB_IDENTITY, .source = from,
                              .role_arn = arn, .session_name = sn, .token_file = tf,
                              .sts_url = sts, .sts_region = region};
    return open_source(L, &s);
}

/* AWS_CONTAINER_CREDENTIALS_RELATIVE_URI / _FULL_URI into *out, its name
 * in from[fn]; 1: not configured. */
static int container(loader *L, pinio__s3_creds **out, char *from, size_t fn)
{
    const char *rel = env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
    const char *full = env("AWS_CONTAINER_CREDENTIALS_FULL_URI");
    char url[2048];
    if (!rel && !full)
        return 1;
    /* Checked before the URL goes into the source's name (and messages). */
    if (!rel && endpoint_url(L, full, "container credentials: AWS_CONTAINER_CREDENTIALS_FULL_URI",
                             url, sizeof(url)) < 0)
        return -EINVAL;
    if (rel)
        snprintf(from, fn, "container credentials "
                 "(AWS_CONTAINER_CREDENTIALS_RELATIVE_URI=%s)", rel);
    else
        snprintf(from, fn, "container credentials "
                 "(AWS_CONTAINER_CREDENTIALS_FULL_URI=%s)", full);
    if (!printable(from, true) || (rel && rel[0] != '/')) {
        pinio_diag_set(L->diag, -EINVAL, "container credentials: the URI is not a URL path or "
                       "has a control character");
        return -EINVAL;
    }
    if (rel && snprintf(url, sizeof(url), "http://169.254.170.2%s", rel) >= (int)sizeof(url)) {
        pinio_diag_set(L->diag, -EINVAL, "container credentials: "
                       "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI is over %zu bytes", sizeof(url) - 32);
        return -EINVAL;
    }
    if (!rel) {
        snprintf(url, sizeof(url), "%s", full);
        if (!container_host_ok(url)) {
            pinio_diag_set(L->diag, -EINVAL, "%s: an http:// URI must name 169.254.170.2, "
                           "169.254.170.23, fd00:ec2::23 or a loopback address (or use "
                           "https://)", from);
            return -EINVAL;
        }
    }
    pinio__s3_creds_spec s = {.kind = PINIO__S3_CREDS_CONTAINER, .source = from, .url = url,
                              .auth_token = env("AWS_CONTAINER_AUTHORIZATION_TOKEN"),
                              .auth_token_file = env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE")};
    return open_into(L, &s, out);
}

/* EC2 instance metadata unless AWS_EC2_METADATA_DISABLED, into *out, its
 * name in src[sn]; 1: none answered. */
static int imds(loader *L, pinio__s3_creds **out, char *src, size_t sn)
{
    const char *off = env("AWS_EC2_METADATA_DISABLED"), *file;
    if (off && strcasecmp(off, "true") == 0)
        return 1;
    const char *from = "AWS_EC2_METADATA_SERVICE_ENDPOINT", *v = env(from);
    char url[1024], what[PINIO_DIAG_PATH_MAX + 96];
    if (!v && (v = prof(L, "ec2_metadata_service_endpoint", &file))) {
        snprintf(what, sizeof(what), "%s [%s] ec2_metadata_service_endpoint", file, L->profile);
        from = what;
    }
    const char *mode = env("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE");
    if (!mode)
        mode = prof(L, "ec2_metadata_service_endpoint_mode", &file);
    if (!v)
        v = mode && strcasecmp(mode, "ipv6") == 0 ? "http://[fd00:ec2::254]"
                                                   : "http://169.254.169.254";
    int rc = endpoint_url(L, v, from, url, sizeof(url));
    if (rc < 0)
        return rc;
    snprintf(src, sn, "EC2 instance metadata (%s)", url);
    pinio__s3_creds_spec s = {.kind = PINIO__S3_CREDS_IMDS, .source = src, .url = url};
    return open_into(L, &s, out);
}

/* One SSO setting: the profile's, else its sso-session section's (botocore
 * merges the two and refuses a setting they give differently). NULL when
 * neither has it; *bad set when they differ. */
static const char *sso_get(loader *L, const char *ssect, const char *key, const char **bad)
{
    const char *file, *v = prof(L, key, &file);
    const char *sv = ssect ? ini_get(&L->conf, ssect, key) : NULL;
    if (sv && !*sv)
        sv = NULL;
    if (v && sv && strcmp(v, sv) != 0 && !*bad)
        *bad = key;
    return v ? v : sv;
}

/* An SSO service's URL into out[1024]: its endpoint setting (as for STS),
 * else https://HOST.REGION.amazonaws.com[.cn]. */
static int sso_service_url(loader *L, const char *svc, const char *var, const char *host,
                           const char *region, char *out)
{
    char what[PINIO_DIAG_PATH_MAX + 96], nested[1024];
    const char *from;
    const char *ep = service_endpoint(L, svc, var, nested, sizeof(nested), what, sizeof(what),
                                      &from);
    if (ep)
        return endpoint_url(L, ep, from, out, 1024);
    snprintf(out, 1024, "https://%s.%s.amazonaws.com%s", host, region,
             strncmp(region, "cn-", 3) == 0 ? ".cn" : "");
    return 0;
}

/* IAM Identity Center: a profile with sso_role_name or sso_account_id
 * (botocore's SSOProvider), its start URL and region there or in the
 * [sso-session NAME] it names; the token `aws sso login` cached in
 * ~/.aws/sso/cache/SHA1(NAME or the start URL).json; GetRoleCredentials
 * at AWS_ENDPOINT_URL_SSO (or the other endpoint settings, as for STS),
 * else portal.sso.REGION.amazonaws.com; an sso_session's token refreshed at
 * AWS_ENDPOINT_URL_SSO_OIDC (the same way), else oidc.REGION.amazonaws.com.
 * 1: not an SSO profile. */
static int sso(loader *L)
{
    const char *file, *f2;
    if (!prof(L, "sso_role_name", &file) && !prof(L, "sso_account_id", &file))
        return 1;
    const char *sname = prof(L, "sso_session", &f2), *ssect = NULL, *bad = NULL;
    if (sname && !(ssect = ini_section2(&L->conf, "sso-session", sname))) {
        pinio_diag_set_at(L->diag, -EINVAL, L->conf.path, PINIO_DIAG_NO_OFFSET,
                          "[%s] sso_session %s: there is no [sso-session %s]", L->profile, sname,
                          sname);
        return -EINVAL;
    }
    static const char *const keys[] = {"sso_role_name", "sso_account_id", "sso_start_url",
                                       "sso_region"};
    const char *v[4];
    char missing[96] = "";
    for (size_t i = 0; i < 4; i++) {
        v[i] = sso_get(L, ssect, keys[i], &bad);
        if (!v[i])
            snprintf(missing + strlen(missing), sizeof(missing) - strlen(missing), "%s%s",
                     missing[0] ? ", " : "", keys[i]);
    }
    if (bad || missing[0]) {
        if (bad)
            pinio_diag_set_at(L->diag, -EINVAL, file, PINIO_DIAG_NO_OFFSET,
                              "[%s] %s differs from [sso-session %s]'s", L->profile, bad, sname);
        else
            pinio_diag_set_at(L->diag, -EINVAL, file, PINIO_DIAG_NO_OFFSET,
                              "[%s] is configured for SSO but has no %s", L->profile, missing);
        return -EINVAL;
    }
    if (!valid_region(v[3]) || !printable(v[0], true) || !printable(v[1], true)) {
        pinio_diag_set_at(L->diag, -EINVAL, file, PINIO_DIAG_NO_OFFSET,
                          "[%s] sso_region is not a region name, or sso_role_name or "
                          "sso_account_id has a control character", L->profile);
        return -EINVAL;
    }
    char url[1024], oidc[1024];
    int rc = sso_service_url(L, "sso", "AWS_ENDPOINT_URL_SSO", "portal.sso", v[3], url);
    /* SSO OIDC, where an sso_session's token is refreshed: botocore's
     * token provider reads only the sso_session form. */
    if (rc == 0 && sname)
        rc = sso_service_url(L, "sso_oidc", "AWS_ENDPOINT_URL_SSO_OIDC", "oidc", v[3], oidc);
    if (rc < 0)
        return rc;
    char *dir = file_path(NULL, ".aws/sso/cache"), src[PINIO_DIAG_PATH_MAX + 1200];
    if (!dir) {
        pinio_diag_set(L->diag, -ENOENT, "SSO: no home folder for ~/.aws/sso/cache");
        return -ENOENT;
    }
    if (sname)
        snprintf(src, sizeof(src), "SSO (%s [%s] sso_session %s, role %s in account %s)", file,
                 L->profile, sname, v[0], v[1]);
    else
        snprintf(src, sizeof(src), "SSO (%s [%s] sso_start_url %s, role %s in account %s)", file,
                 L->profile, v[2], v[0], v[1]);
    pinio__s3_creds_spec s = {.kind = PINIO__S3_CREDS_SSO, .source = src, .url = url,
                              .sso_role = v[0], .sso_account = v[1], .sso_cache_dir = dir,
                              .sso_key = sname ? sname : v[2],
                              .sso_oidc_url = sname ? oidc : NULL, .sso_start_url = v[2],
                              .sso_region = v[3]};
    rc = open_source(L, &s);
    free(dir);
    return rc;
}

/* The chain in botocore 1.29's order (credentials.py,
 * create_credential_resolver): environment keys; the profile's assumed
 * role (role_arn + source_profile); web identity (environment, then the
 * profile); SSO; the credentials file's keys; credential_process;
 * the config file's keys; container credentials; EC2 instance metadata.
 * A source that is configured and fails is the error: never a silent
 * fall to unsigned requests. Nothing configured: anonymous. */
static int set_credentials(loader *L)
{
    pinio__s3_cfg *c = L->c;
    const char *nosign = env("AWS_NO_SIGN_REQUEST");
    if (nosign && (strcasecmp(nosign, "true") == 0 || strcmp(nosign, "1") == 0)) {
        c->anonymous = true;
        return (c->source = strdup("AWS_NO_SIGN_REQUEST")) ? 0 : -ENOMEM;
    }
    if (nosign && strcasecmp(nosign, "false") != 0 && strcmp(nosign, "0") != 0) {
        pinio_diag_set(L->diag, -EINVAL, "AWS_NO_SIGN_REQUEST: expected true or false");
        return -EINVAL;
    }
    const char *ak = env("AWS_ACCESS_KEY_ID"), *sk = env("AWS_SECRET_ACCESS_KEY"), *file;
    if (ak) {
        if (!sk) {
            pinio_diag_set(L->diag, -EINVAL, "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not");
            return -EINVAL;
        }
        const char *tok = env("AWS_SESSION_TOKEN");
        if (!tok)
            tok = env("AWS_SECURITY_TOKEN");
        return set_keys(L, ak, sk, tok, "environment");
    }
    const char *arn = prof(L, "role_arn", &file), *f2;
    if (arn && !prof(L, "web_identity_token_file", &f2))
        return assume_role(L, arn, file);
    int rc = web_identity(L);
    if (rc <= 0)
        return rc;
    if ((rc = sso(L)) <= 0)
        return rc;
    rc = L->csect ? keys_from(L, &L->cred, L->csect) : 1;
    if (rc <= 0)
        return rc;
    const char *cmd = prof(L, "credential_process", &file);
    if (cmd) {
        char from[PINIO_DIAG_PATH_MAX + 64];
        snprintf(from, sizeof(from), "credential_process (%s [%s])", file, L->profile);
        pinio__s3_creds_spec s = {.kind = PINIO__S3_CREDS_PROCESS, .source = from, .command = cmd};
        return open_source(L, &s);
    }
    rc = L->psect ? keys_from(L, &L->conf, L->psect) : 1;
    char name[2300];
    if (rc == 1)
        rc = container(L, &c->creds, name, sizeof(name));
    if (rc == 1)
        rc = imds(L, &c->creds, name, sizeof(name));
    if (rc == 0 && c->creds && !c->source && !(c->source = strdup(name)))
        return -ENOMEM;
    if (rc <= 0)
        return rc;
    c->anonymous = true;
    return (c->source = strdup("none")) ? 0 : -ENOMEM;
}

/* AWS_CA_BUNDLE, else the profile's ca_bundle, else SSL_CERT_FILE, and
 * SSL_CERT_DIR: libcurl reads neither variable itself (its CA file is
 * compiled in), the SDKs and OpenSSL's tools do. A named file or folder
 * that is not there is the error here, not a TLS failure later. */
static int set_ca(loader *L)
{
    const char *file, *from = "AWS_CA_BUNDLE", *v = env(from);
    char what[PINIO_DIAG_PATH_MAX + 64];
    if (!v && (v = prof(L, "ca_bundle", &file))) {
        snprintf(what, sizeof(what), "%s [%s] ca_bundle", file, L->profile);
        from = what;
    }
    if (!v)
        v = env(from = "SSL_CERT_FILE");
    const char *dir = env("SSL_CERT_DIR");
    struct stat st;
    if (v && (stat(v, &st) != 0 || !S_ISREG(st.st_mode))) {
        pinio_diag_set_at(L->diag, -ENOENT, v, PINIO_DIAG_NO_OFFSET,
                          "%s: no such certificate file", from);
        return -ENOENT;
    }
    if (dir && (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))) {
        pinio_diag_set_at(L->diag, -ENOENT, dir, PINIO_DIAG_NO_OFFSET,
                          "SSL_CERT_DIR: no such certificate folder");
        return -ENOENT;
    }
    if ((v && !(L->c->cainfo = strdup(v))) || (dir && !(L->c->capath = strdup(dir))))
        return -ENOMEM;
    return 0;
}

static int load(loader *L, char *cred_path, char *conf_path)
{
    int rc;
    if ((rc = ini_parse(&L->cred, cred_path, L->diag)) < 0 ||
        (rc = ini_parse(&L->conf, conf_path, L->diag)) < 0)
        return rc;
    L->profile = env("AWS_DEFAULT_PROFILE");
    if (!L->profile)
        L->profile = env("AWS_PROFILE");
    L->named = L->profile != NULL;
    if (!L->profile)
        L->profile = "default";
    L->csect = ini_section(&L->cred, L->profile);
    L->psect = ini_section2(&L->conf, "profile", L->profile);
    if (!L->psect && strcmp(L->profile, "default") == 0)
        L->psect = ini_section(&L->conf, "default");
    /* Only a profile someone named must exist; botocore refuses a missing
     * one even with keys in the environment (its region lookup reads it). */
    if (L->named && !L->csect && !L->psect) {
        pinio_diag_set(L->diag, -ENOENT, "AWS profile '%s' is in neither %s nor %s", L->profile,
                       cred_path ? cred_path : "~/.aws/credentials",
                       conf_path ? conf_path : "~/.aws/config");
        return -ENOENT;
    }
    if ((rc = flag(L, "AWS_USE_FIPS_ENDPOINT", "use_fips_endpoint", &L->c->fips)) < 0 ||
        (rc = flag(L, "AWS_USE_DUALSTACK_ENDPOINT", "use_dualstack_endpoint", &L->c->dualstack)) < 0 ||
        (rc = set_region(L)) < 0 || (rc = set_endpoint_from(L)) < 0 ||
        (rc = set_addressing(L)) < 0 || (rc = set_ca(L)) < 0 || (rc = set_credentials(L)) < 0)
        return rc;
    return 0;
}

int pinio__s3_cfg_load(pinio__s3_cfg **out, pinio_diag *diag)
{
    *out = NULL;
    loader L = {.diag = diag};
    char *cred_path = file_path("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials");
    char *conf_path = file_path("AWS_CONFIG_FILE", ".aws/config");
    int rc = -ENOMEM;
    if ((cred_path || !env("AWS_SHARED_CREDENTIALS_FILE")) &&
        (conf_path || !env("AWS_CONFIG_FILE")) && (L.c = calloc(1, sizeof(*L.c))))
        rc = load(&L, cred_path, conf_path);
    if (rc == -ENOMEM)
        pinio_diag_set(diag, rc, "reading the S3 configuration: out of memory");
    ini_free(&L.cred);
    ini_free(&L.conf);
    free(cred_path);
    free(conf_path);
    if (rc < 0) {
        pinio__s3_cfg_free(L.c);
        return rc;
    }
    *out = L.c;
    return 0;
}

void pinio__s3_cfg_free(pinio__s3_cfg *c)
{
    if (!c)
        return;
    free(c->region);
    free(c->endpoint);
    free(c->scheme);
    free(c->host);
    free(c->base_path);
    pinio__s3_creds_free(c->creds);
    free(c->source);
    free(c->cainfo);
    free(c->capath);
    free(c);
}

const char *pinio__s3_cfg_region(const pinio__s3_cfg *c) { return c->region; }
const char *pinio__s3_cfg_endpoint(const pinio__s3_cfg *c) { return c->endpoint; }
bool pinio__s3_cfg_anonymous(const pinio__s3_cfg *c) { return c->anonymous; }
const char *pinio__s3_cfg_source(const pinio__s3_cfg *c) { return c->source; }

const char *pinio__s3_cfg_addressing(const pinio__s3_cfg *c)
{
    return c->addressing == PINIO__S3_ADDR_PATH      ? "path"
           : c->addressing == PINIO__S3_ADDR_VIRTUAL ? "virtual"
                                                     : "auto";
}

int pinio__s3_cfg_keys(const pinio__s3_cfg *c, time_t now, pinio__s3_keys *out, pinio_diag *diag)
{
    if (!c->creds) {
        memset(out, 0, sizeof(*out));
        return 0;
    }
    return pinio__s3_creds_get(c->creds, now, out, diag);
}

time_t pinio__s3_cfg_expiry(const pinio__s3_cfg *c)
{
    return c->creds ? pinio__s3_creds_expiry(c->creds) : 0;
}

const char *pinio__s3_cfg_cainfo(const pinio__s3_cfg *c) { return c->cainfo; }
const char *pinio__s3_cfg_capath(const pinio__s3_cfg *c) { return c->capath; }

void pinio__s3_cfg_key_hint(const pinio__s3_cfg *c, char out[8])
{
    out[0] = '\0';
    pinio__s3_keys k;
    /* now = 0: the keys held, whatever their age (no fetch for a status line). */
    if (!c->creds || pinio__s3_creds_get(c->creds, 0, &k, NULL) < 0)
        return;
    size_t n = strlen(k.access_key);
    snprintf(out, 8, "%s", k.access_key + (n > 4 ? n - 4 : 0));
    pinio__s3_keys_clear(&k);
}
