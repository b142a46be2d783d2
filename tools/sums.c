/* --sha256-file: sha256sum's output matched to the files a load reads. */
#include "sums.h"

#include "load_args.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "textfile.h"
#include "util.h"

/* One line of sha256sum's output: "HEX  NAME", "HEX *NAME" (binary
 * mode), "SHA256 (NAME) = HEX" (--tag), and a leading '\' when NAME was
 * escaped (a newline or a backslash in it). The line is cut in place;
 * false for a line of another shape. */
static bool sums_line(char *l, const char **hex, const char **name)
{
    bool esc = *l == '\\';
    l += esc;
    size_t n = strlen(l);
    if (!strncmp(l, "SHA256 (", 8) && n > 8 + 4 + 64 && !strncmp(l + n - 64 - 4, ") = ", 4)) {
        l[n - 64 - 4] = '\0';
        *name = l + 8;
        *hex = l + n - 64;
    } else if (n > 66 && l[64] == ' ' && (l[65] == ' ' || l[65] == '*')) {
        l[64] = '\0';
        *hex = l;
        *name = l + 66;
    } else {
        return false;
    }
    if (!cli_is_sha256(*hex))
        return false;
    if (esc) { /* sha256sum's escapes: \n for a newline, \\ for a backslash */
        char *w = (char *)*name;
        for (const char *r = *name; *r; r++) {
            if (*r == '\\' && (r[1] == 'n' || r[1] == '\\'))
                *w++ = *++r == 'n' ? '\n' : '\\';
            else
                *w++ = *r;
        }
        *w = '\0';
    }
    return true;
}

static const char *last_part(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/* The one SUMS line for `path`, by path, else by last component; NULL after
 * an error line. */
static const char *sums_find(const cli_sums *s, const char *const *hex,
                             const char *const *name, size_t n, const char *path)
{
    /* Every line naming the path must agree: two digests for one file
     * (lists concatenated, one stale) would otherwise pass on the first. */
    const char *exact = NULL;
    size_t differ = 0;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(name[i], path) || (!strncmp(name[i], "./", 2) && !strcmp(name[i] + 2, path))) {
            if (!exact)
                exact = hex[i], differ = 1;
            else if (strcasecmp(exact, hex[i]))
                differ++;
        }
    if (differ > 1) {
        cli_failf(s->cmd, s->json, -EINVAL, path,
                  "%s: --sha256-file %s gives it %zu different digests", path, s->path, differ);
        return NULL;
    }
    if (exact)
        return exact;
    const char *found = NULL;
    size_t hits = 0;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(last_part(name[i]), last_part(path))) {
            found = hex[i];
            hits++;
        }
    if (hits == 1)
        return found;
    if (hits == 0)
        cli_failf(s->cmd, s->json, -ENOENT, path, "%s: --sha256-file %s has no line for it",
                  path, s->path);
    else
        cli_failf(s->cmd, s->json, -EINVAL, path,
                  "%s: --sha256-file %s has %zu lines named %s: name it by its path there", path,
                  s->path, hits, last_part(path));
    return NULL;
}

int cli_sums_read(cli_sums *s, const char *const *inputs, size_t ninputs)
{
    size_t len = 0;
    free(s->buf);
    int e = cli_text_read(s->path, 64u << 20, &s->buf, &len);
    if (e < 0)
        return cli_failf(s->cmd, s->json, e, s->path, "--sha256-file %s: %s", s->path,
                         e == -EFBIG    ? "too large for a list of digests"
                         : e == -EINVAL ? "not a regular file or a pipe"
                                        : strerror(-e));
    if (!len)
        return cli_failf(s->cmd, s->json, -ENOENT, s->path, "--sha256-file %s: empty", s->path);
    if (memchr(s->buf, '\0', len)) /* the lines after it would go unseen */
        return cli_failf(s->cmd, s->json, PINIO_EFORMAT, s->path,
                         "--sha256-file %s: a NUL byte at offset %zu: not a list of digests",
                         s->path, (size_t)((char *)memchr(s->buf, '\0', len) - s->buf));
    size_t lines = 1;
    for (size_t i = 0; i < len; i++)
        lines += s->buf[i] == '\n';
    const char **hex = calloc(lines, sizeof(*hex)), **name = calloc(lines, sizeof(*name));
    size_t n = 0, lineno = 0;
    int rc = hex && name ? 0 : cli_failf(s->cmd, s->json, -ENOMEM, NULL, "out of memory");
    for (char *l = s->buf, *next; rc == 0 && l; l = next) {
        lineno++;
        next = strchr(l, '\n');
        if (next)
            *next++ = '\0';
        size_t ll = strlen(l);
        if (ll && l[ll - 1] == '\r')
            l[--ll] = '\0';
        if (!ll)
            continue;
        if (!sums_line(l, &hex[n], &name[n]))
            rc = cli_failf(s->cmd, s->json, PINIO_EFORMAT, s->path,
                           "--sha256-file %s: line %zu is not sha256sum's \"HEX  NAME\"",
                           s->path, lineno);
        else
            n++;
    }
    /* The files as the load resolves them: a plan reads their headers only. */
    pinio_plan *p = NULL;
    pinio_diag d = { .offset = PINIO_DIAG_NO_OFFSET };
    if (rc == 0 && (rc = pinio_plan_create(&p, inputs, ninputs, NULL, &d)) < 0)
        rc = cli_fail(s->cmd, s->json, rc, &d);
    pinio_plan_info pi = { 0 };
    if (rc == 0) {
        pinio_plan_get_info(p, &pi);
        free(s->shas);
        if (!(s->shas = calloc(pi.files, sizeof(*s->shas))))
            rc = cli_failf(s->cmd, s->json, -ENOMEM, NULL, "out of memory");
    }
    for (size_t i = 0; rc == 0 && i < pi.files; i++)
        if (!(s->shas[i] = sums_find(s, hex, name, n, pinio_plan_file_at(p, i)->path)))
            rc = 1;
    s->nshas = rc == 0 ? pi.files : 0;
    pinio_plan_free(p);
    free(hex);
    free(name);
    return rc;
}

void cli_sums_free(cli_sums *s)
{
    free(s->shas);
    free(s->buf);
    s->shas = NULL;
    s->buf = NULL;
    s->nshas = 0;
}

int cli_load_sums(cli_load_args *a, const char *const *inputs, size_t ninputs)
{
    if (!a->sums)
        return 0;
    cli_sums s = { .cmd = "load", .json = a->json, .path = a->sums };
    int rc = cli_sums_read(&s, inputs, ninputs);
    free(a->shas);
    free(a->sums_buf);
    a->shas = s.shas; /* freed with the arguments */
    a->nshas = s.nshas;
    a->sums_buf = s.buf;
    return rc;
}
