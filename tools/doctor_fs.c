/* pinio doctor: which shared or network file system holds a path and what
 * to do about it. statfs(2) only names the kind (pinio_fs); the mount's
 * own options, which decide how fast it reads (NFS rsize and nconnect,
 * CephFS rasize), and a FUSE mount's daemon are only in mountinfo. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor_fs.h"

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static void unescape(char *s)
{
    char *w = s;
    for (char *r = s; *r;) {
        if (r[0] == '\\' && r[1] >= '0' && r[1] <= '7' && r[2] >= '0' && r[2] <= '7' &&
            r[3] >= '0' && r[3] <= '7') {
            *w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
            r += 4;
        } else {
            *w++ = *r++;
        }
    }
    *w = '\0';
}

/* Whether mount point `mp` is `path` or a folder above it. */
static size_t covers(const char *mp, const char *path)
{
    size_t l = strlen(mp);
    if (strcmp(mp, "/") == 0)
        return 1;
    return strncmp(mp, path, l) == 0 && (path[l] == '/' || path[l] == '\0') ? l : 0;
}

void doctor_fs_mount(const char *path, const char *root, struct doctor_mount *m)
{
    memset(m, 0, sizeof(*m));
    char real[PATH_MAX], file[PATH_MAX];
    if (!realpath(path, real))
        snprintf(real, sizeof(real), "%s", path);
    snprintf(file, sizeof(file), "%s/proc/self/mountinfo", root ? root : "");
    FILE *f = fopen(file, "re");
    if (!f)
        return;
    char *line = NULL;
    size_t cap = 0, best = 0;
    while (getline(&line, &cap, f) > 0) {
        /* ID PARENT MAJ:MIN ROOT POINT OPTS [OPTIONAL...] - TYPE SOURCE SUPER */
        char *save = NULL, *tok[6], *t;
        for (int i = 0; i < 6; i++)
            tok[i] = strtok_r(i ? NULL : line, " \n", &save);
        if (!tok[5])
            continue;
        char *type = NULL, *src = NULL, *super = NULL;
        while ((t = strtok_r(NULL, " \n", &save)))
            if (strcmp(t, "-") == 0) {
                type = strtok_r(NULL, " \n", &save);
                src = type ? strtok_r(NULL, " \n", &save) : NULL;
                super = src ? strtok_r(NULL, " \n", &save) : NULL;
                break;
            }
        if (!type)
            continue;
        unescape(tok[4]);
        size_t l = covers(tok[4], real);
        if (!l || l < best)
            continue;
        best = l;
        m->found = true;
        snprintf(m->point, sizeof(m->point), "%s", tok[4]);
        snprintf(m->fstype, sizeof(m->fstype), "%s", type);
        snprintf(m->source, sizeof(m->source), "%s", src ? src : "");
        if (src)
            unescape(m->source);
        snprintf(m->opts, sizeof(m->opts), "%s%s%s", tok[5], super ? "," : "", super ? super : "");
    }
    free(line);
    fclose(f);
}

/* The value of option `key` (key=value) among the mount's options, cut to
 * `n` bytes, or NULL. */
static const char *opt(const struct doctor_mount *m, const char *key, char *buf, size_t n)
{
    size_t kl = strlen(key);
    for (const char *p = m->opts; *p;) {
        const char *e = strchr(p, ',');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l > kl && strncmp(p, key, kl) == 0 && p[kl] == '=') {
            size_t vl = l - kl - 1 < n - 1 ? l - kl - 1 : n - 1;
            memcpy(buf, p + kl + 1, vl);
            buf[vl] = '\0';
            return buf;
        }
        p += l + (e != NULL);
    }
    return NULL;
}

static bool is(const struct doctor_mount *m, const char *prefix)
{
    return strncmp(m->fstype, prefix, strlen(prefix)) == 0;
}

void doctor_fs_describe(const struct doctor_mount *m, char *buf, size_t n)
{
    if (!m->found) {
        snprintf(buf, n, "unknown (no mountinfo entry)");
        return;
    }
    int k = snprintf(buf, n, "%s from %s on %s", m->fstype, m->source, m->point);
    static const char *const keys[] = { "rsize", "nconnect", "actimeo", "acregmax", "proto",
                                        "vers", "rasize", "max_read", "stripe_count" };
    const char *sep = " (";
    char v[64];
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]) && k > 0 && (size_t)k < n; i++)
        if (opt(m, keys[i], v, sizeof(v))) {
            k += snprintf(buf + k, n - (size_t)k, "%s%s %s", sep, keys[i], v);
            sep = ", ";
        }
    if (k > 0 && (size_t)k < n && sep[0] == ',')
        snprintf(buf + k, n - (size_t)k, ")");
}

void doctor_fs_advise(const struct doctor_mount *m, const pinio_fs *fs, doctor_note_fn note,
                      void *ctx)
{
    char msg[512], v[64];
    bool network = fs && fs->network;
    if (!m->found && !network)
        return;
    const char *name = m->found ? m->fstype : fs->name;
    if (is(m, "nfs") || (!m->found && strcmp(name, "nfs") == 0)) {
        long rsize = opt(m, "rsize", v, sizeof(v)) ? strtol(v, NULL, 10) : 0;
        long nconn = opt(m, "nconnect", v, sizeof(v)) ? strtol(v, NULL, 10) : 1;
        if (rsize && rsize < (1L << 20)) {
            snprintf(msg, sizeof(msg), "NFS reads of at most %ld KiB (rsize=%ld): every request "
                     "is a round trip", rsize >> 10, rsize);
            note(ctx, "nfs_rsize_small", "mount with rsize=1048576 (the server's limit may be "
                 "lower)", msg);
        }
        if (nconn <= 1) {
            snprintf(msg, sizeof(msg), "NFS over %s TCP connection: one connection carries "
                     "every read", nconn == 1 ? "one" : "?");
            note(ctx, "nfs_nconnect", "mount with nconnect=8 (Linux 5.3+) to spread the reads "
                 "over 8 connections", msg);
        }
        if (!opt(m, "actimeo", v, sizeof(v)))
            note(ctx, "nfs_actimeo", "a checkpoint that does not change can be mounted with "
                 "actimeo=600 (fewer attribute round trips); pinio still checks size and mtime",
                 "NFS attribute cache at its default timeouts");
    } else if (is(m, "lustre") || (!m->found && strcmp(name, "lustre") == 0)) {
        note(ctx, "lustre_stripes", "`lfs getstripe -c FILE` shows its stripe count; a "
             "checkpoint on one OST reads at one server's speed: `lfs setstripe -c -1 DIR` "
             "before writing it stripes new files across every OST",
             "Lustre: a file's bandwidth is its stripe count times one OST's");
    } else if (is(m, "ceph") || (!m->found && strcmp(name, "ceph") == 0)) {
        if (!opt(m, "rasize", v, sizeof(v)) || strtol(v, NULL, 10) < (64L << 20))
            note(ctx, "ceph_rasize", "mount with rasize=67108864 for buffered and mapped reads "
                 "(pinio's cold reads ask for up to 16 MiB at a time themselves)",
                 "CephFS readahead below 64 MiB");
    } else if (is(m, "fuse") || (!m->found && strcmp(name, "fuse") == 0)) {
        const char *daemon = strncmp(m->fstype, "fuse.", 5) == 0 ? m->fstype + 5 : m->source;
        snprintf(msg, sizeof(msg), "FUSE file system served by '%s': every read goes through "
                 "that daemon", daemon[0] ? daemon : "?");
        note(ctx, "fuse_daemon", "O_DIRECT may be refused or bypass the daemon's cache (pinio "
             "then reads buffered); a checkpoint loaded again is faster from the page cache "
             "(pinio load --cache hot, or mapped memory). The kernel cuts reads into requests "
             "of at most max_pages (256 pages, 1 MiB, by fs.fuse.max_pages_limit; 128 KiB "
             "where the daemon does not ask for more) and sends a mount's asynchronous ones "
             "max_background at a time (12 unless the daemon raises it): 12 x 1 MiB at 50 ms "
             "is 250 MB/s whatever the readers ask, so a daemon in front of a network needs "
             "a larger max_background (libfuse: conn->max_background) and as many threads",
             msg);
    } else if (is(m, "cifs") || is(m, "smb")) {
        note(ctx, "smb_rsize", "mount with rsize=4194304 and multichannel,max_channels=4 "
             "(Linux 5.17+) where the server allows", "SMB/CIFS: reads bounded by rsize and "
             "one channel");
    } else if (is(m, "gpfs") || is(m, "beegfs")) {
        snprintf(msg, sizeof(msg), "%s: a parallel file system; its block or chunk size sets "
                 "how many servers one request reaches", name);
        note(ctx, "parallel_fs", "pinio reads cold files there with requests of whole "
             "blocks (st_blksize), 16 MiB for large loads, 32 to 128 in flight; a checkpoint striped over more targets (BeeGFS: beegfs-ctl "
             "--setpattern --numtargets) reads faster", msg);
        return;
    } else if (!network) {
        return;
    }
    snprintf(msg, sizeof(msg), "%s is a network or FUSE file system: pinio reads cold files "
             "with requests of whole units of it (st_blksize, else 1 MiB), 16 MiB for large "
             "loads, 32 to 128 in flight, each rank or process starting at its own place in "
             "each file (PINIO_READ_ORDER=staggered)", name);
    note(ctx, "network_file_system", NULL, msg);
}
