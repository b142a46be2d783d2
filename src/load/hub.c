/*
 * The Hugging Face hub cache as an input: a repo id (ORG/NAME[@REV], or
 * NAME[@REV] for the hub's canonical models without an org, such as gpt2)
 * resolved offline to its snapshot folder, and the folder a hub snapshot's
 * shard links may reach.
 *
 * Why in the library and not in each caller: the CLI (load, info, stage),
 * Python's pinio.load() and anything else that builds a plan then take the
 * same rule, with the same messages.
 *
 * The layout huggingface_hub writes (file_download.py) and reads back
 * (try_to_load_from_cache), which this follows:
 *   CACHE/models--ORG--NAME/refs/REV          a commit hash (a file);
 *                                             models--NAME for a bare NAME
 *   CACHE/models--ORG--NAME/snapshots/COMMIT/F -> ../../blobs/SHA
 *   CACHE/models--ORG--NAME/blobs/SHA          the bytes
 * CACHE is HF_HUB_CACHE, else HUGGINGFACE_HUB_CACHE (its older name), else
 * HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
 * ~/.cache/huggingface/hub. REV (default main) is a name in refs/ or, when
 * refs/ lacks it, the snapshot folder's own name (a commit hash).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/load/plan_internal.h"

/* A repo id as the hub allows it (huggingface_hub's validate_repo_id):
 * ORG/NAME or NAME, each of [A-Za-z0-9._-], not starting or ending with
 * '.' or '-', no "--" or "..", at most 96 characters in all. */
static bool repo_part_ok(const char *s, size_t n)
{
    if (n == 0 || s[0] == '.' || s[0] == '-' || s[n - 1] == '.' || s[n - 1] == '-')
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == '-';
        if (!ok || (i && (c == '.' || c == '-') && s[i - 1] == c))
            return false;
    }
    return true;
}

/* A revision: a name in refs/ (branches and tags may hold '/', e.g.
 * refs/pr/1) or a commit hash; never absolute, never a ".." or "." step. */
static bool rev_ok(const char *r)
{
    if (!*r || *r == '/' || strlen(r) > 255)
        return false;
    for (const char *p = r; *p;) {
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
            return false;
        for (size_t i = 0; i < n; i++)
            if ((unsigned char)p[i] < 0x20)
                return false;
        p += n + (e != NULL);
    }
    return true;
}

bool pinio__hub_is_repo_id(const char *spec)
{
    const char *at = strchr(spec, '@');
    size_t n = at ? (size_t)(at - spec) : strlen(spec);
    const char *slash = memchr(spec, '/', n);
    if (n > 96)
        return false;
    if (!slash)
        return repo_part_ok(spec, n) && (!at || rev_ok(at + 1));
    if (memchr(slash + 1, '/', n - (size_t)(slash - spec) - 1))
        return false;
    return repo_part_ok(spec, (size_t)(slash - spec)) &&
           repo_part_ok(slash + 1, n - (size_t)(slash - spec) - 1) && (!at || rev_ok(at + 1));
}

/* "~/x" as Python's os.path.expanduser does for the variables below. */
static int cache_path(char *out, size_t n, const char *v, const char *tail)
{
    const char *home = getenv("HOME");
    int k;
    if (v[0] == '~' && (v[1] == '/' || !v[1]) && home && *home)
        k = snprintf(out, n, "%s%s%s", home, v + 1, tail);
    else
        k = snprintf(out, n, "%s%s", v, tail);
    return k < 0 || (size_t)k >= n ? -ENAMETOOLONG : 0;
}

static int hub_cache_dir(char *out, size_t n, const char **from)
{
    static const struct { const char *var, *tail; } order[] = {
        { "HF_HUB_CACHE", "" },
        { "HUGGINGFACE_HUB_CACHE", "" },
        { "HF_HOME", "/hub" },
        { "XDG_CACHE_HOME", "/huggingface/hub" },
    };
    for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
        const char *v = getenv(order[i].var);
        if (v && *v) {
            *from = order[i].var;
            return cache_path(out, n, v, order[i].tail);
        }
    }
    *from = "HOME";
    return cache_path(out, n, "~", "/.cache/huggingface/hub");
}

static bool is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* refs/REV's commit hash into out; 0, or -ENOENT when refs/ lacks REV. */
static int read_ref(const char *model, const char *rev, char *out, size_t n, pinio_diag *diag)
{
    char ref[PATH_MAX];
    if (snprintf(ref, sizeof(ref), "%s/refs/%s", model, rev) >= (int)sizeof(ref))
        return -ENAMETOOLONG;
    struct stat st;
    if (stat(ref, &st) != 0 || !S_ISREG(st.st_mode))
        return -ENOENT;
    FILE *f = fopen(ref, "re");
    if (!f) {
        int e = -errno;
        pinio_diag_set_at(diag, e, ref, PINIO_DIAG_NO_OFFSET, "%s", pinio_strerror(e));
        return e;
    }
    size_t k = fread(out, 1, n - 1, f);
    fclose(f);
    while (k && (out[k - 1] == '\n' || out[k - 1] == '\r' || out[k - 1] == ' '))
        k--;
    out[k] = '\0';
    /* A ref holds one commit hash: a name with a '/' or a ".." in it would
     * lead the snapshot path out of snapshots/. */
    bool ok = k > 0;
    for (size_t i = 0; i < k; i++)
        ok = ok && ((out[i] >= '0' && out[i] <= '9') || (out[i] >= 'a' && out[i] <= 'f'));
    if (!ok) {
        pinio_diag_set_at(diag, PINIO_EFORMAT, ref, PINIO_DIAG_NO_OFFSET,
                          "a hub ref must hold a commit hash (hex digits), not '%.64s'", out);
        return PINIO_EFORMAT;
    }
    return 0;
}

int pinio__hub_resolve(const char *spec, char **out, pinio_diag *diag)
{
    *out = NULL;
    const char *at = strchr(spec, '@');
    const char *rev = at ? at + 1 : "main";
    size_t idlen = at ? (size_t)(at - spec) : strlen(spec);
    char cache[PATH_MAX], model[PATH_MAX], commit[256], snap[PATH_MAX];
    const char *from;
    int rc = hub_cache_dir(cache, sizeof(cache), &from);
    if (rc < 0) {
        pinio_diag_set_at(diag, rc, spec, PINIO_DIAG_NO_OFFSET, "hub cache path too long");
        return rc;
    }
    /* models--ORG--NAME: the repo id with '/' as "--" (repo_folder_name);
     * models--NAME for a bare name. */
    const char *slash = memchr(spec, '/', idlen);
    int k = slash ? snprintf(model, sizeof(model), "%s/models--%.*s--%.*s", cache,
                             (int)(slash - spec), spec,
                             (int)(idlen - (size_t)(slash - spec) - 1), slash + 1)
                  : snprintf(model, sizeof(model), "%s/models--%.*s", cache, (int)idlen, spec);
    if (k < 0 || (size_t)k >= sizeof(model)) {
        pinio_diag_set_at(diag, -ENAMETOOLONG, spec, PINIO_DIAG_NO_OFFSET,
                          "hub cache path too long");
        return -ENAMETOOLONG;
    }
    if (!is_dir(model)) {
        /* A bare NAME is most often a file name with a typo in it
         * ("model.safetensor"): without a cached model of that name, the
         * error is the file's own. */
        if (!slash) {
            pinio_diag_set_at(diag, -ENOENT, spec, PINIO_DIAG_NO_OFFSET, "%s",
                              pinio_strerror(-ENOENT));
            return -ENOENT;
        }
        pinio_diag_set_at(diag, -ENOENT, spec, PINIO_DIAG_NO_OFFSET,
                          "No such file or directory, nor a model in the Hugging Face hub cache "
                          "(%s, from %s; pinio does not download)",
                          model, from);
        return -ENOENT;
    }
    rc = read_ref(model, rev, commit, sizeof(commit), diag);
    if (rc < 0 && rc != -ENOENT)
        return rc;
    const char *name = rc == 0 ? commit : rev;
    if (snprintf(snap, sizeof(snap), "%s/snapshots/%s", model, name) >= (int)sizeof(snap)) {
        pinio_diag_set_at(diag, -ENAMETOOLONG, spec, PINIO_DIAG_NO_OFFSET,
                          "hub cache path too long");
        return -ENAMETOOLONG;
    }
    if (!is_dir(snap)) {
        if (rc == 0)
            pinio_diag_set_at(diag, -ENOENT, spec, PINIO_DIAG_NO_OFFSET,
                              "refs/%s names commit %s, whose snapshot %s is not in the cache",
                              rev, commit, snap);
        else
            pinio_diag_set_at(diag, -ENOENT, spec, PINIO_DIAG_NO_OFFSET,
                              "revision '%s' is neither a ref in %s/refs nor a snapshot in "
                              "%s/snapshots",
                              rev, model, model);
        return -ENOENT;
    }
    if (!(*out = strdup(snap)))
        return -ENOMEM;
    return 0;
}

/* A hub snapshot folder is CACHE/models--ORG--NAME/snapshots/REV, and its
 * files are links into ../../blobs: for a folder at or beneath a snapshot
 * (diffusers keeps a model per subfolder, snapshots/REV/unet/, linked to
 * ../../../blobs), the model folder is the root its links may reach, and
 * `prefix` is the folder's path beneath that root ("snapshots/REV/unet").
 * The folder is taken as it really is (realpath), so a cache reached
 * through a link or a relative path is recognised too. The last
 * "snapshots" step under a models-- folder counts: a tree that nests one
 * model-shaped folder in another gets the narrower root. */
bool pinio__hub_model_root(const char *dir, char *root, size_t n, char *prefix, size_t pn)
{
    char real[PATH_MAX];
    if (!realpath(dir, real))
        return false;
    for (char *s = real + strlen(real); s > real; s--) {
        if (*s != '/' || strncmp(s, "/snapshots/", 11) != 0 || !s[11] || s[11] == '/')
            continue;
        char *model = s - 1;
        while (model > real && *model != '/')
            model--;
        if (*model != '/' || strncmp(model + 1, "models--", 8) != 0 || model + 9 >= s)
            continue;
        if (snprintf(prefix, pn, "%s", s + 1) >= (int)pn)
            return false;
        *s = '\0';
        return snprintf(root, n, "%s", real) < (int)n;
    }
    return false;
}
