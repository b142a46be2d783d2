/*
 * A plan's inputs: what the caller named (files, directories of shards,
 * index files) resolved into the list of files to read, and each file
 * opened once and validated through that descriptor.
 *
 * Why one descriptor per file for the whole plan: the header is validated
 * through it and the data is read through it (the engine reopens it by
 * /proc/self/fd/N, the same inode), so a file renamed over the path in
 * between cannot be read with another file's header.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "src/load/plan_internal.h"

static int push_path(pinio__inputs *in, char *p, bool named)
{
    if (!p)
        return -ENOMEM;
    if (in->n == in->cap) {
        size_t cap = in->cap ? in->cap * 2 : 8;
        char **np = realloc(in->paths, cap * sizeof(*np));
        if (np)
            in->paths = np;
        bool *nn = np ? realloc(in->named, cap * sizeof(*nn)) : NULL;
        if (!nn) {
            free(p);
            return -ENOMEM;
        }
        in->named = nn;
        in->cap = cap;
    }
    in->named[in->n] = named;
    in->paths[in->n++] = p;
    return 0;
}

static char *join(const char *dir, const char *name)
{
    size_t dl = strlen(dir), nl = strlen(name);
    char *p = malloc(dl + nl + 2);
    if (!p)
        return NULL;
    memcpy(p, dir, dl);
    p[dl] = '/';
    memcpy(p + dl + 1, name, nl + 1);
    return p;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t sl = strlen(s), xl = strlen(suffix);
    return sl >= xl && strcmp(s + sl - xl, suffix) == 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int open_local(const char *shard_of, bool named, const char *path, int flags,
                      pinio_diag *diag);

static int use_index(pinio__inputs *in, const char *path, bool named, pinio_diag *diag)
{
    if (in->index) {
        pinio_diag_set_at(diag, -EINVAL, path, PINIO_DIAG_NO_OFFSET,
                          "only one index file per load (already %s)",
                          pinio_st_index_path(in->index));
        return -EINVAL;
    }
    /* The index is held to the rule its shards are (open_local): a folder
     * or a cache entry whose index links out must not have another file
     * parsed, and quoted in errors, as JSON. It is then read by its path:
     * a link put in its place between the two opens is a writer of the
     * folder racing its reader, which this check does not claim to stop. */
    int fd = open_local(NULL, named, path, O_PATH | O_CLOEXEC, diag);
    if (fd < 0) {
        if (fd != -EXDEV)
            pinio_diag_set_at(diag, fd, path, PINIO_DIAG_NO_OFFSET, "cannot open: %s",
                              pinio_strerror(fd));
        return fd;
    }
    close(fd);
    return pinio_st_index_open(&in->index, path, diag);
}

static int scan_dir(pinio__inputs *in, const char *path, pinio_diag *diag)
{
    DIR *d = opendir(path);
    if (!d) {
        int e = -errno;
        pinio_diag_set_at(diag, e, path, PINIO_DIAG_NO_OFFSET, "%s", pinio_strerror(e));
        return e;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!ends_with(de->d_name, ".safetensors"))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            char **nn = realloc(names, cap * sizeof(*nn));
            if (!nn) {
                rc = -ENOMEM;
                break;
            }
            names = nn;
        }
        if (!(names[n] = join(path, de->d_name))) {
            rc = -ENOMEM;
            break;
        }
        n++;
    }
    closedir(d);
    if (rc == 0 && n == 0) {
        pinio_diag_set_at(diag, -ENOENT, path, PINIO_DIAG_NO_OFFSET,
                          "no *.safetensors files and no model.safetensors.index.json");
        rc = -ENOENT;
    }
    if (rc == 0)
        qsort(names, n, sizeof(*names), cmp_str);
    size_t i = 0;
    for (; rc == 0 && i < n; i++)
        rc = push_path(in, names[i], false);
    for (; i < n; i++)
        free(names[i]);
    free(names);
    return rc;
}

/* A folder's index: model.safetensors.index.json, else the one file named
 * *.safetensors.index.json (diffusers names it after the model:
 * unet/diffusion_pytorch_model.safetensors.index.json), hidden names
 * (a stage's temporaries) aside. Several, or none: "" (the folder is
 * scanned, as before). NULL when out of memory. */
static char *folder_index(const char *path)
{
    char *idx = join(path, "model.safetensors.index.json");
    if (!idx || faccessat(AT_FDCWD, idx, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
        return idx;
    free(idx);
    DIR *d = opendir(path);
    char *one = NULL;
    int found = 0;
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (de->d_name[0] != '.' && ends_with(de->d_name, ".safetensors.index.json") &&
            found++ == 0)
            one = join(path, de->d_name);
    if (d)
        closedir(d);
    if (found == 1)
        return one;
    free(one);
    return found && !one ? NULL : strdup("");
}

/* `named`: the caller gave `path` itself (not a repo id's snapshot). */
static int resolve_one(pinio__inputs *in, const char *path, bool named, pinio_diag *diag)
{
    if (pinio__s3_is_url(path)) {
        char **urls;
        size_t k;
        int rc = pinio__obj_resolve(in, path, &urls, &k, diag);
        for (size_t i = 0; i < k; i++) {
            if (rc == 0)
                rc = push_path(in, urls[i], false);
            else
                free(urls[i]);
        }
        free(urls);
        return rc;
    }
    struct stat st;
    if (stat(path, &st) != 0) {
        int e = -errno;
        /* A local path always wins; only a name that is not one, and has a
         * repo id's shape, is looked up in the hub cache. */
        if ((e == -ENOENT || e == -ENOTDIR) && pinio__hub_is_repo_id(path)) {
            char *snap;
            int rc = pinio__hub_resolve(path, &snap, diag);
            if (rc == 0) {
                rc = resolve_one(in, snap, false, diag);
                free(snap);
            }
            return rc;
        }
        pinio_diag_set_at(diag, e, path, PINIO_DIAG_NO_OFFSET, "%s", pinio_strerror(e));
        return e;
    }
    if (S_ISDIR(st.st_mode)) {
        char *idx = folder_index(path);
        if (!idx)
            return -ENOMEM;
        int rc = *idx ? use_index(in, idx, false, diag) : scan_dir(in, path, diag);
        free(idx);
        return rc;
    }
    if (!S_ISREG(st.st_mode)) {
        pinio_diag_set_at(diag, -EINVAL, path, PINIO_DIAG_NO_OFFSET,
                          "not a regular file or directory");
        return -EINVAL;
    }
    if (ends_with(path, ".json"))
        return use_index(in, path, named, diag);
    return push_path(in, strdup(path), named);
}

int pinio__inputs_resolve(pinio__inputs *in, const char *const *paths, size_t n,
                          pinio_stop_fn stop, void *stop_ctx, pinio_diag *diag)
{
    memset(in, 0, sizeof(*in));
    in->stop = stop;
    in->stop_ctx = stop_ctx;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = resolve_one(in, paths[i], true, diag);
    if (rc == 0 && in->index && in->n) {
        /* The index's weight_map governs its shards only: a file given beside
         * it would have every tensor "unindexed", i.e. silently dropped. */
        pinio_diag_set_at(diag, -EINVAL, in->paths[0], PINIO_DIAG_NO_OFFSET,
                          "given together with the index %s, which does not govern it: load "
                          "them separately",
                          pinio_st_index_path(in->index));
        rc = -EINVAL;
    }
    for (size_t i = 0; rc == 0 && in->index && i < pinio_st_index_shard_count(in->index); i++)
        rc = push_path(in, strdup(pinio_st_index_shard(in->index, i)), false);
    if (rc < 0)
        pinio__inputs_free(in);
    return rc;
}

void pinio__inputs_free(pinio__inputs *in)
{
    for (size_t i = 0; i < in->n; i++)
        free(in->paths[i]);
    free(in->paths);
    free(in->named);
    pinio_st_index_free(in->index);
    pinio__s3_close(in->s3);
    free(in->index_image);
    memset(in, 0, sizeof(*in));
}

static int file_id_statx(int dirfd, const char *path, int flags, pinio__file_id *id)
{
    struct statx sx;
    if (statx(dirfd, path, flags, STATX_BASIC_STATS, &sx) != 0)
        return -errno;
    *id = (pinio__file_id){ .dev = ((uint64_t)sx.stx_dev_major << 32) | sx.stx_dev_minor,
                            .ino = sx.stx_ino, .size = sx.stx_size,
                            .mtime_s = sx.stx_mtime.tv_sec, .mtime_ns = sx.stx_mtime.tv_nsec,
                            .ctime_s = sx.stx_ctime.tv_sec, .ctime_ns = sx.stx_ctime.tv_nsec };
    return 0;
}

int pinio__file_id_get(int fd, pinio__file_id *id)
{
    return file_id_statx(fd, "", AT_EMPTY_PATH, id);
}

int pinio__file_id_at(const char *path, pinio__file_id *id)
{
    return file_id_statx(AT_FDCWD, path, 0, id);
}

#ifndef STATX_DIOALIGN
#define STATX_DIOALIGN 0x00002000U /* Linux 6.1 */
#endif

/* O_DIRECT alignment as statx reports it (Linux 6.1+); 0 when unknown, and
 * the engine then probes the block device itself. */
static uint64_t dio_align(int fd)
{
    struct statx sx;
    if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) != 0 || !(sx.stx_mask & STATX_DIOALIGN))
        return 0;
    uint64_t a = sx.stx_dio_offset_align > sx.stx_dio_mem_align ? sx.stx_dio_offset_align
                                                                : sx.stx_dio_mem_align;
    return a && !(a & (a - 1)) ? a : 0;
}

#ifndef RESOLVE_BENEATH
#define RESOLVE_NO_MAGICLINKS 0x02
#define RESOLVE_BENEATH 0x08
#endif

/* The folder of `path` (".": none) into out[n]; the rest of `path` after it
 * (the name relative to the folder) is returned, or NULL when `path` is not
 * under it. */
static const char *split_dir(const char *index, const char *path, char *out, size_t n)
{
    const char *slash = strrchr(index, '/');
    size_t dl = slash ? (size_t)(slash - index) : 0;
    if (!slash) {
        snprintf(out, n, ".");
        return path;
    }
    if (dl + 1 > n || strncmp(path, index, dl) != 0 || path[dl] != '/')
        return NULL;
    size_t keep = dl ? dl : 1; /* "/model.safetensors.index.json": the root */
    memcpy(out, index, keep);
    out[keep] = '\0';
    return path + dl + 1;
}

/* The path of the open `fd` as the kernel has it ("" when unknown). */
static void fd_path(int fd, char *out, size_t n)
{
    char proc[64];
    snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
    ssize_t k = readlink(proc, out, n - 1);
    out[k > 0 ? k : 0] = '\0';
}

/* Whether `p` is the folder `dir` or lies beneath it: a whole step, so
 * "/a/hub2" is not beneath "/a/hub". */
static bool path_beneath(const char *p, const char *dir)
{
    size_t dl = strlen(dir);
    while (dl > 1 && dir[dl - 1] == '/')
        dl--;
    return dl && strncmp(p, dir, dl) == 0 && (p[dl] == '/' || !p[dl] || (dl == 1 && *dir == '/'));
}

/* Whether the open file `fd` lies beneath the folder `dirfd` names: the
 * fallback check where openat2() is missing (Linux < 5.6). */
static bool beneath(int dirfd, int fd)
{
    char pa[4096], pb[4096];
    fd_path(dirfd, pa, sizeof(pa));
    fd_path(fd, pb, sizeof(pb));
    return *pa && *pb && path_beneath(pb, pa);
}

/* PINIO_LINK_ROOTS (folders, ':' between them): where links may lead
 * besides a file's own root. Why an explicit list and not "any hub
 * cache's blobs/": huggingface_hub 0.17-0.22 wrote --local-dir downloads
 * as links into the cache, and nothing in such a folder says which model's
 * blobs are its own, so only the user can vouch for the target. */
static bool in_link_roots(int fd)
{
    const char *env = getenv("PINIO_LINK_ROOTS");
    char target[4096], one[4096], real[4096];
    if (!env || !*env)
        return false;
    fd_path(fd, target, sizeof(target));
    for (const char *p = env; *target && *p;) {
        const char *e = strchr(p, ':');
        size_t k = e ? (size_t)(e - p) : strlen(p);
        if (k && k < sizeof(one)) {
            memcpy(one, p, k);
            one[k] = '\0';
            if (realpath(one, real) && path_beneath(target, real))
                return true;
        }
        p += k + (e != NULL);
    }
    return false;
}

/* Every local file is opened beneath a root, one rule for every input
 * kind: the folder of `base` (an index for its shards, else the file
 * itself, whether a folder scan found it, a repo id led to it or the
 * caller named it). A link that stays inside is followed; one that leaves
 * is refused, so a folder, an index or a cache entry cannot make pinio
 * read /etc/shadow's first bytes as a header length. The folder's own
 * path is taken as given (a link on the way is the caller's), only what
 * lies beneath it is held. One wider root: in a Hugging Face hub snapshot
 * (models--ORG--NAME/snapshots/REV, or a subfolder of it) every file is a
 * link to ../../blobs/SHA, so there the root is the model's folder
 * models--ORG--NAME, which holds only what was downloaded for that model,
 * never the cache above it nor another model's blobs. The folders of
 * PINIO_LINK_ROOTS are accepted besides. -EXDEV on escape; `root` gets the
 * folder the file had to stay in, `hub` whether it is a hub model's. */
static int open_beneath(const char *base, const char *path, int flags, char *root, size_t rn,
                        bool *hub)
{
    char dir[4096], hub_rel[4096], prefix[1024];
    const char *rel = split_dir(base, path, dir, sizeof(dir));
    if (!rel)
        return -EXDEV;
    *hub = pinio__hub_model_root(dir, root, rn, prefix, sizeof(prefix));
    if (*hub) {
        if (snprintf(hub_rel, sizeof(hub_rel), "%s/%s", prefix, rel) >= (int)sizeof(hub_rel))
            return -ENAMETOOLONG;
        snprintf(dir, sizeof(dir), "%s", root);
        rel = hub_rel;
    } else {
        snprintf(root, rn, "%s", dir);
    }
    int dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dirfd < 0)
        return -errno;
    struct { uint64_t flags, mode, resolve; } how = {
        .flags = (uint64_t)flags, .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS };
    /* EAGAIN: a rename or mount anywhere on the system raced the walk of a
     * "..", so the kernel could not prove it stayed beneath (every hub link
     * is ../../blobs/SHA; a busy machine renames all the time). openat2(2)
     * says to retry; past a few tries the check below stands in. */
    int rc = -EAGAIN;
    for (int tries = 0; rc == -EAGAIN && tries < 16; tries++) {
        int fd = (int)syscall(SYS_openat2, dirfd, rel, &how, sizeof(how));
        rc = fd >= 0 ? fd : -errno;
    }
    /* A name in /proc (/proc/self/fd/N, /dev/fd/N: bash's <(...)) is a
     * descriptor the caller holds and named itself, not a link found in a
     * tree: it is opened as named. Never so for an index's shards. */
    struct statfs sf;
    if (rc < 0 && base == path && fstatfs(dirfd, &sf) == 0 && sf.f_type == PROC_SUPER_MAGIC) {
        int fd = openat(dirfd, rel, flags);
        rc = fd < 0 ? -errno : fd;
    }
    bool fallback = rc == -ENOSYS || rc == -EPERM || rc == -EAGAIN;
    if (fallback || rc == -EXDEV) {
        /* no openat2, a seccomp filter refusing it, renames without end; or
         * an escape that PINIO_LINK_ROOTS may allow. O_NONBLOCK in `flags`
         * keeps a FIFO from blocking this open. */
        int fd = openat(dirfd, rel, flags);
        rc = fd < 0 ? (fallback ? -errno : -EXDEV)
             : (fallback && beneath(dirfd, fd)) || in_link_roots(fd) ? fd : -EXDEV;
        if (rc == -EXDEV && fd >= 0)
            close(fd);
    }
    close(dirfd);
    return rc;
}

static int open_local(const char *shard_of, bool named, const char *path, int flags,
                      pinio_diag *diag)
{
    char root[4096] = "";
    bool hub = false;
    int fd = open_beneath(shard_of ? shard_of : path, path, flags, root, sizeof(root), &hub);
    /* A file the caller named is theirs to point anywhere (ln -s of a model
     * on another disk is common, and every loader follows it): only names
     * pinio found itself are held beneath their folder. A hub snapshot's
     * file stays held even when named: its links are the cache's, and one
     * out of its model's folder is a cache gone wrong. */
    if (fd == -EXDEV && named && !shard_of && !hub) {
        fd = open(path, flags);
        return fd < 0 ? -errno : fd;
    }
    if (fd != -EXDEV)
        return fd;
    const char *where = hub ? "the hub model's folder" : shard_of ? "the index's folder"
                                                                   : "its folder";
    pinio_diag_set_at(diag, -EXDEV, path, PINIO_DIAG_NO_OFFSET,
                      "%s%s%sresolves outside %s %s (a symlink?): refused; "
                      "PINIO_LINK_ROOTS=DIR[:DIR...] lets links reach DIR",
                      shard_of ? "shard named by " : "", shard_of ? shard_of : "",
                      shard_of ? " " : "", where, root);
    return -EXDEV;
}

int pinio__pfile_open(pinio__pfile *f, const char *shard_of, bool named, const void *header,
                      size_t header_len, pinio_diag *diag)
{
    /* O_NONBLOCK: opening a FIFO must not wait for a writer. It does not
     * change reads of a regular file, and it is cleared below anyway. */
    int flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK;
    f->fd = open_local(shard_of, named, f->path, flags, diag);
    if (f->fd == -EXDEV) {
        f->fd = -1;
        return -EXDEV;
    }
    if (f->fd < 0) {
        int rc = f->fd;
        f->fd = -1;
        if (shard_of && rc == -ENOENT)
            pinio_diag_set_at(diag, rc, f->path, PINIO_DIAG_NO_OFFSET,
                              "shard named by %s is missing", shard_of);
        else /* EMFILE: the plan, which knows the count, says more */
            pinio_diag_set_at(diag, rc, f->path, PINIO_DIAG_NO_OFFSET, "cannot open: %s",
                              pinio_strerror(rc));
        return rc;
    }
    struct stat st;
    if (fstat(f->fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        pinio_diag_set_at(diag, -EINVAL, f->path, PINIO_DIAG_NO_OFFSET, "not a regular file");
        return -EINVAL;
    }
    int fl = fcntl(f->fd, F_GETFL);
    if (fl >= 0)
        (void)fcntl(f->fd, F_SETFL, fl & ~O_NONBLOCK);
    int rc = pinio__file_id_get(f->fd, &f->id);
    if (rc < 0) {
        pinio_diag_set_at(diag, rc, f->path, PINIO_DIAG_NO_OFFSET, "statx: %s",
                          pinio_strerror(rc));
        return rc;
    }
    f->dio_align = dio_align(f->fd);
    /* A header another process read (an MPI job's rank 0) is validated
     * against this descriptor's size, so a file that differs in length from
     * the one the header came from is refused here, before any data I/O. */
    rc = header ? pinio_st_parse(&f->st, header, header_len, f->id.size, f->path, 0, diag)
                : pinio_st_read_fd(&f->st, f->fd, f->path, 0, diag);
    if (rc < 0)
        return rc;
    pinio__pfile_publish(f);
    return 0;
}

void pinio__pfile_publish(pinio__pfile *f)
{
    f->pub.path = f->path;
    f->pub.fd = f->fd;
    f->pub.size = pinio_st_file_size(f->st);
    f->pub.header = f->st;
    f->pub.cache_why = f->why;
}

void pinio__diag_nofile(pinio_diag *diag, const char *path, size_t nfiles)
{
    /* A plan holds one descriptor per file until it is freed, and the
     * engine a bounded few more: a limit below the count is the cause, and
     * which limit must rise decides the advice. */
    struct rlimit rl = { 0, 0 };
    getrlimit(RLIMIT_NOFILE, &rl);
    unsigned long long need = (unsigned long long)nfiles + 64;
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need)
        pinio_diag_set_at(diag, -EMFILE, path, PINIO_DIAG_NO_OFFSET,
                          "cannot open: too many open files: a load holds one per file, %zu "
                          "files, and the limit is %llu (hard limit %llu): the hard limit is too "
                          "low; raise it to %llu or more (ulimit -Hn as root, systemd's "
                          "LimitNOFILE=, docker run --ulimit nofile=N:N), then ulimit -n",
                          nfiles, (unsigned long long)rl.rlim_cur,
                          (unsigned long long)rl.rlim_max, need);
    else
        pinio_diag_set_at(diag, -EMFILE, path, PINIO_DIAG_NO_OFFSET,
                          "cannot open: too many open files: a load holds one per file, %zu "
                          "files, and the limit is %llu (hard limit %llu): raise it with "
                          "ulimit -n %llu",
                          nfiles, (unsigned long long)rl.rlim_cur,
                          rl.rlim_max == RLIM_INFINITY ? ~0ull : (unsigned long long)rl.rlim_max,
                          need);
}
