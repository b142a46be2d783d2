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

/* $VAR, else ~/REL; a leading "~/" expanded as botocore's expanduser does. */
static char *file_path(const char *var, const char *rel)
{
    const char *v = env(var);
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

static int set_endpoint_from(loader *L)
{
    char what[PINIO_DIAG_PATH_MAX + 96], nested[2048];
    const char *from = "AWS_ENDPOINT_URL_S3", *url = env(from);
    if (!url)
        url = env(from = "AWS_ENDPOINT_URL");
    const char *services = url ? NULL : ini_get(&L->conf, L->psect, "services");
    const char *ssect = services ? ini_section2(&L->conf, "services", services) : NULL;
    if (!url && ssect && ini_get_nested(&L->conf, ssect, "s3", "endpoint_url", nested,
                                        sizeof(nested)) && *nested) {
        url = nested;
        snprintf(what, sizeof(what), "%s [%s] s3.endpoint_url", L->conf.path, ssect);
        from = what;
    }
    if (!url && (url = ini_get(&L->conf, L->psect, "endpoint_url")) && *url) {
        snprintf(what, sizeof(what), "%s [%s] endpoint_url", L->conf.path, L->psect);
        from = what;
    }
    char def[128];
    if (!url || !*url) {
        bool cn = strncmp(L->c->region, "cn-", 3) == 0;
        snprintf(def, sizeof(def), "https://s3.%s.amazonaws.com%s", L->c->region, cn ? ".cn" : "");
        url = def;
        from = "the default endpoint";
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

/* The key id and the token go into header lines: refuse what would break
 * or inject one (the key id is also the Credential's first field: no '/' or
 * ','), naming where they came from but never echoing them. The secret only
 * keys the HMAC: any bytes do. */
static int set_keys(pinio__s3_cfg *c, const char *ak, const char *sk, const char *tok,
                    const char *from, pinio_diag *diag)
{
    const char *bad = !printable(ak, false) || strpbrk(ak, "/,;=") ? "access key id"
                      : tok && !printable(tok, false)              ? "session token"
                                                                    : NULL;
    if (bad) {
        pinio_diag_set(diag, -EINVAL, "%s: the %s has a character no AWS key has (a blank, a "
                       "control character%s)", from, bad, bad[0] == 'a' ? " or one of / , ; =" : "");
        return -EINVAL;
    }
    c->access_key = strdup(ak);
    c->secret_key = strdup(sk);
    c->session_token = tok && *tok ? strdup(tok) : NULL;
    if (!c->access_key || !c->secret_key || (tok && *tok && !c->session_token)) {
        pinio_diag_set(diag, -ENOMEM, "reading the S3 configuration: out of memory");
        return -ENOMEM;
    }
    return 0;
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
    int rc = set_keys(L->c, ak, sk, tok, from, L->diag);
    if (rc < 0)
        return rc;
    if (asprintf(&L->c->source, "%s [%s]", f->path, sect) < 0) {
        L->c->source = NULL;
        return -ENOMEM;
    }
    return 0;
}

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
    const char *ak = env("AWS_ACCESS_KEY_ID"), *sk = env("AWS_SECRET_ACCESS_KEY");
    if (ak) {
        if (!sk) {
            pinio_diag_set(L->diag, -EINVAL, "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not");
            return -EINVAL;
        }
        const char *tok = env("AWS_SESSION_TOKEN");
        if (!tok)
            tok = env("AWS_SECURITY_TOKEN");
        int rc = set_keys(c, ak, sk, tok, "the AWS_* environment variables", L->diag);
        if (rc < 0)
            return rc;
        return (c->source = strdup("environment")) ? 0 : -ENOMEM;
    }
    int rc = L->csect ? keys_from(L, &L->cred, L->csect) : 1;
    if (rc == 1 && L->psect)
        rc = keys_from(L, &L->conf, L->psect);
    if (rc <= 0)
        return rc;
    /* Credentials botocore would fetch (an assumed role, a process, SSO):
     * failing beats sending the requests unsigned and reading 403s. */
    const char *other[] = {"role_arn", "credential_process", "sso_start_url", "sso_session",
                           "web_identity_token_file"};
    const ini *files[] = {&L->cred, &L->conf};
    const char *sects[] = {L->csect, L->psect};
    for (size_t k = 0; k < 2; k++) {
        for (size_t i = 0; i < sizeof(other) / sizeof(*other); i++) {
            if (!ini_get(files[k], sects[k], other[i]))
                continue;
            pinio_diag_set_at(L->diag, -ENOTSUP, files[k]->path, PINIO_DIAG_NO_OFFSET,
                              "[%s] gets credentials through %s, which pinio does not support: "
                              "export AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN",
                              sects[k], other[i]);
            return -ENOTSUP;
        }
    }
    c->anonymous = true;
    return (c->source = strdup("none")) ? 0 : -ENOMEM;
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
    if ((rc = set_region(L)) < 0 || (rc = set_endpoint_from(L)) < 0 ||
        (rc = set_addressing(L)) < 0 || (rc = set_credentials(L)) < 0)
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
    wipe_free(c->access_key);
    wipe_free(c->secret_key);
    wipe_free(c->session_token);
    free(c->source);
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
