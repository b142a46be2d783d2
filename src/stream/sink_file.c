/*
 * The file sink: every input file of the plan copied, whole, under a
 * directory: what `pinio stage` does before a job, at storage speed.
 *
 *   open:   per file, a temporary name in the target directory, opened
 *           O_DIRECT where the file system takes it (else buffered)
 *   chunk:  the bytes the plan did not read before this chunk (header,
 *           holes) copied from the source, then the chunk written from
 *           its slot, both folded into the file's checksum
 *   finish: the tail, truncate to size, fsync, rename into place, fsync
 *           the directory; then, with verify, every file read back
 *   close:  after a failure the temporary files are removed
 *
 * Why the chunk is written rounded up to 4 KiB: O_DIRECT wants whole
 * blocks, and the slot holds the read's full aligned length (the plan's
 * reads are multiples of its alignment, at least 4 KiB). Bytes past the
 * chunk's `len` are overwritten by what follows, or cut by the final
 * truncate.
 *
 * The checksum is a position-keyed sum over 64-bit words: the sum of
 * key(word index) x word, with odd keys. It is linear in each word, so a
 * word split between a chunk and a hole-fill adds up the same, and the
 * read back can cut the file anywhere. It catches lost, shifted and
 * corrupted words; it is no defence against an adversary (SHA-256 is
 * pinio_load --verify's job).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pinio/sink.h"
#include "uring/faults.h"

#define BLOCK 4096u
#define COPY_BUF ((size_t)8 << 20)

typedef struct out_file {
    char *dst, *tmp;
    int fd;                /* O_DIRECT when `direct` */
    int bfd;               /* buffered, for unaligned hole fills */
    int src;               /* the source, for the bytes the plan did not read */
    bool direct;
    uint64_t size;         /* source size: the copy's size */
    uint64_t written;      /* bytes [0, written) are in place */
    uint64_t sum;
} out_file;

typedef struct filesink {
    pinio_sink_file_cfg cfg;
    char *dir;
    const pinio_plan *plan;
    out_file *f;
    size_t n;
    uint8_t *buf;          /* COPY_BUF, 4 KiB aligned */
    bool published;
    pinio__faults *faults; /* PINIO_FAULTS (uring/faults.h): stagecorrupt, stagerename */
    uint64_t renames;      /* renames so far, for stagerename@N */
} filesink;

static inline uint64_t key(uint64_t w)
{
    w = (w + 1) * 0x9E3779B97F4A7C15ull;
    w ^= w >> 29;
    return w | 1;
}

/* Adds bytes [off, off + len) of a file, held at `p`, to `*sum`. */
static void sum_add(uint64_t *sum, uint64_t off, const uint8_t *p, size_t len)
{
    uint64_t s = *sum;
    while (len && (off & 7)) { /* leading bytes in their lanes */
        s += key(off >> 3) * ((uint64_t)*p << (8 * (off & 7)));
        off++, p++, len--;
    }
    for (; len >= 8; off += 8, p += 8, len -= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        s += key(off >> 3) * w;
    }
    for (; len; off++, p++, len--)
        s += key(off >> 3) * ((uint64_t)*p << (8 * (off & 7)));
    *sum = s;
}

static int fail(pinio_diag *diag, int rc, const char *path, uint64_t off, const char *what)
{
    pinio_diag_set_at(diag, rc, path, off, "file sink: %s: %s", what, pinio_strerror(rc));
    return rc;
}

static int write_all(int fd, const uint8_t *p, size_t len, uint64_t off, const char *path,
                     pinio_diag *diag)
{
    while (len) {
        ssize_t n = pwrite(fd, p, len, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return fail(diag, n < 0 ? -errno : -EIO, path, off, "write");
        p += n, off += (uint64_t)n, len -= (size_t)n;
    }
    return 0;
}

/* Copies source bytes [f->written, upto) that the plan did not read. */
static int fill_to(filesink *s, out_file *f, uint64_t upto, const char *src_path,
                   pinio_diag *diag)
{
    while (f->written < upto) {
        size_t want = upto - f->written < COPY_BUF ? (size_t)(upto - f->written) : COPY_BUF;
        ssize_t n = pread(f->src, s->buf, want, (off_t)f->written);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return fail(diag, n < 0 ? -errno : PINIO_ECHANGED, src_path, f->written,
                        n < 0 ? "read" : "source shorter than when it was planned");
        int rc = write_all(f->bfd, s->buf, (size_t)n, f->written, f->tmp, diag);
        if (rc < 0)
            return rc;
        sum_add(&f->sum, f->written, s->buf, (size_t)n);
        f->written += (uint64_t)n;
    }
    return 0;
}

static char *join(const char *dir, const char *name, const char *prefix)
{
    size_t n = strlen(dir) + strlen(name) + strlen(prefix) + 32;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s%s", dir, prefix, name);
    return p;
}

static const char *base_name(const char *path)
{
    const char *b = strrchr(path, '/');
    return b ? b + 1 : path;
}

static int open_out(filesink *s, out_file *f, const pinio_plan_file *pf, pinio_diag *diag)
{
    f->fd = f->bfd = f->src = -1;
    f->size = pf->size;
    f->dst = join(s->dir, base_name(pf->path), "");
    char pre[48];
    snprintf(pre, sizeof(pre), ".pinio-stage-%ld-", (long)getpid());
    f->tmp = join(s->dir, base_name(pf->path), pre);
    if (!f->dst || !f->tmp)
        return -ENOMEM;
    struct stat st;
    if (!s->cfg.overwrite && lstat(f->dst, &st) == 0)
        return fail(diag, -EEXIST, f->dst, PINIO_DIAG_NO_OFFSET,
                    "target exists (overwrite it with --force)");
    f->src = open(pf->path, O_RDONLY | O_CLOEXEC);
    if (f->src < 0)
        return fail(diag, -errno, pf->path, PINIO_DIAG_NO_OFFSET, "open source");
    int flags = O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC;
    if (s->cfg.direct != PINIO_DIRECT_OFF) {
        f->fd = open(f->tmp, flags | O_DIRECT, 0644);
        f->direct = f->fd >= 0;
        if (f->fd < 0 && (errno != EINVAL || s->cfg.direct == PINIO_DIRECT_ON))
            return fail(diag, -errno, f->tmp, PINIO_DIAG_NO_OFFSET,
                        errno == EINVAL ? "the target's file system refuses O_DIRECT"
                                        : "create");
    }
    if (f->fd < 0) { /* tmpfs and friends: EINVAL for O_DIRECT */
        f->fd = open(f->tmp, flags, 0644);
        if (f->fd < 0)
            return fail(diag, -errno, f->tmp, PINIO_DIAG_NO_OFFSET, "create");
    }
    f->bfd = open(f->tmp, O_WRONLY | O_CLOEXEC);
    if (f->bfd < 0)
        return fail(diag, -errno, f->tmp, PINIO_DIAG_NO_OFFSET, "open");
    return 0;
}

/* rename(2), or the -EIO of a stagerename@N fault. */
static int rename_counted(filesink *s, const char *from, const char *to)
{
    s->renames++;
    if (s->faults && s->faults->stagerename == s->renames) {
        errno = EIO;
        return -1;
    }
    return rename(from, to);
}

/* stagecorrupt@N: one byte of the N-th copy inverted on disk, after its
 * checksum was taken (what a bad disk or a bad write path would do). */
static int fault_corrupt(filesink *s, size_t i, const char *path, uint64_t size)
{
    if (!s->faults || s->faults->stagecorrupt != i + 1 || !size)
        return 0;
    int fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    uint8_t b;
    off_t at = (off_t)(size / 2);
    bool ok = fd >= 0 && pread(fd, &b, 1, at) == 1 && (b ^= 0xff, pwrite(fd, &b, 1, at) == 1) &&
              fsync(fd) == 0;
    if (fd >= 0)
        close(fd);
    return ok ? 0 : -EIO;
}

static void close_out(out_file *f, bool remove_tmp)
{
    if (f->fd >= 0)
        close(f->fd);
    if (f->bfd >= 0)
        close(f->bfd);
    if (f->src >= 0)
        close(f->src);
    f->fd = f->bfd = f->src = -1;
    if (remove_tmp && f->tmp)
        unlink(f->tmp);
}

static void file_close(void *priv, bool ok)
{
    filesink *s = priv;
    for (size_t i = 0; i < s->n; i++) {
        close_out(&s->f[i], !ok && !s->published);
        free(s->f[i].dst);
        free(s->f[i].tmp);
    }
    free(s->f);
    free(s->buf);
    free(s->dir);
    free(s->faults);
}

static int file_open(void *priv, const void *cfg, const pinio_sink_setup *su, pinio_diag *diag)
{
    filesink *s = priv;
    const pinio_sink_file_cfg *c = cfg;
    if (!c || !c->dir) {
        pinio_diag_set(diag, -EINVAL, "file sink: no target directory (pinio_sink_file_cfg.dir)");
        return -EINVAL;
    }
    struct stat st;
    if (stat(c->dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        int rc = stat(c->dir, &st) != 0 ? -errno : -ENOTDIR;
        return fail(diag, rc, c->dir, PINIO_DIAG_NO_OFFSET, "target directory");
    }
    s->cfg = *c;
    s->plan = su->plan;
    int frc = pinio__faults_parse(getenv("PINIO_FAULTS"), &s->faults, diag);
    if (frc < 0)
        return frc;
    pinio_plan_info pi;
    pinio_plan_get_info(su->plan, &pi);
    s->dir = strdup(c->dir);
    s->f = calloc(pi.files ? pi.files : 1, sizeof(*s->f));
    int rc = s->dir && s->f && posix_memalign((void **)&s->buf, BLOCK, COPY_BUF) == 0 ? 0 : -ENOMEM;
    for (size_t i = 0; rc == 0 && i < pi.files; i++) {
        s->n = i + 1;
        rc = open_out(s, &s->f[i], pinio_plan_file_at(su->plan, i), diag);
    }
    if (rc < 0)
        file_close(s, false);
    return rc;
}

static int file_chunk(void *priv, const pinio_sink_chunk *c, pinio_diag *diag)
{
    filesink *s = priv;
    out_file *f = &s->f[c->file];
    const char *src = pinio_plan_file_at(s->plan, c->file)->path;
    int rc = fill_to(s, f, c->file_offset, src, diag);
    if (rc < 0)
        return rc;
    size_t len = c->len;
    if (f->direct) /* whole blocks; the slot holds them (see the banner) */
        len = (len + BLOCK - 1) / BLOCK * BLOCK;
    rc = write_all(f->fd, c->data, len, c->file_offset, f->tmp, diag);
    if (rc < 0)
        return rc;
    sum_add(&f->sum, c->file_offset, c->data, c->len);
    f->written = c->file_offset + c->len;
    return 0;
}

/* Reads `path` back whole and compares its checksum with `want`. */
static int verify_one(filesink *s, const char *path, uint64_t size, uint64_t want,
                      pinio_diag *diag)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_DIRECT);
    if (fd < 0 && errno == EINVAL) {
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) /* the copy's own pages would answer from the cache */
            posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    }
    if (fd < 0)
        return fail(diag, -errno, path, PINIO_DIAG_NO_OFFSET, "open for verification");
    uint64_t sum = 0, off = 0;
    int rc = 0;
    while (off < size) {
        ssize_t n = pread(fd, s->buf, COPY_BUF, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            rc = fail(diag, n < 0 ? -errno : -EIO, path, off, "read back");
            break;
        }
        sum_add(&sum, off, s->buf, (size_t)n);
        off += (uint64_t)n;
    }
    close(fd);
    if (rc == 0 && sum != want) {
        rc = -EIO;
        pinio_diag_set_at(diag, rc, path, PINIO_DIAG_NO_OFFSET,
                          "file sink: verification failed: the copy's checksum %016llx differs "
                          "from the source's %016llx",
                          (unsigned long long)sum, (unsigned long long)want);
    }
    return rc;
}

/* Copies a small file (the index) through the buffer; temporary + rename. */
static int copy_small(filesink *s, const char *src, pinio_diag *diag)
{
    char *dst = join(s->dir, base_name(src), "");
    char *tmp = join(s->dir, base_name(src), ".pinio-stage-");
    int in = open(src, O_RDONLY | O_CLOEXEC), out = -1, rc = 0;
    if (!dst || !tmp)
        rc = -ENOMEM;
    else if (in < 0)
        rc = fail(diag, -errno, src, PINIO_DIAG_NO_OFFSET, "open index");
    else if ((out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0)
        rc = fail(diag, -errno, tmp, PINIO_DIAG_NO_OFFSET, "create");
    for (uint64_t off = 0; rc == 0;) {
        ssize_t n = read(in, s->buf, COPY_BUF);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            rc = fail(diag, -errno, src, off, "read");
        if (n <= 0)
            break;
        rc = write_all(out, s->buf, (size_t)n, off, tmp, diag);
        off += (uint64_t)n;
    }
    if (rc == 0 && fsync(out) != 0)
        rc = fail(diag, -errno, tmp, PINIO_DIAG_NO_OFFSET, "fsync");
    if (rc == 0 && rename_counted(s, tmp, dst) != 0)
        rc = fail(diag, -errno, dst, PINIO_DIAG_NO_OFFSET, "rename into place");
    if (out >= 0)
        close(out);
    if (in >= 0)
        close(in);
    if (rc < 0 && tmp)
        unlink(tmp);
    free(dst);
    free(tmp);
    return rc;
}

static int file_finish(void *priv, pinio_diag *diag)
{
    filesink *s = priv;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < s->n; i++) {
        out_file *f = &s->f[i];
        rc = fill_to(s, f, f->size, pinio_plan_file_at(s->plan, i)->path, diag);
        if (rc == 0 && ftruncate(f->bfd, (off_t)f->size) != 0)
            rc = fail(diag, -errno, f->tmp, PINIO_DIAG_NO_OFFSET, "truncate");
        if (rc == 0 && fsync(f->bfd) != 0)
            rc = fail(diag, -errno, f->tmp, PINIO_DIAG_NO_OFFSET, "fsync");
        if (rc == 0)
            rc = fault_corrupt(s, i, f->tmp, f->size);
    }
    /* Renamed only once every file is complete and durable, so a failed
     * stage leaves no target half-replaced. */
    for (size_t i = 0; rc == 0 && i < s->n; i++)
        if (rename_counted(s, s->f[i].tmp, s->f[i].dst) != 0)
            rc = fail(diag, -errno, s->f[i].dst, PINIO_DIAG_NO_OFFSET, "rename into place");
    if (rc == 0)
        s->published = true;
    pinio_plan_info pi;
    pinio_plan_get_info(s->plan, &pi);
    if (rc == 0 && pi.index_path)
        rc = copy_small(s, pi.index_path, diag);
    if (rc == 0) {
        int d = open(s->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (d < 0 || fsync(d) != 0)
            rc = fail(diag, -errno, s->dir, PINIO_DIAG_NO_OFFSET, "fsync directory");
        if (d >= 0)
            close(d);
    }
    for (size_t i = 0; rc == 0 && s->cfg.verify && i < s->n; i++)
        rc = verify_one(s, s->f[i].dst, s->f[i].size, s->f[i].sum, diag);
    return rc;
}

const pinio_sink pinio_sink_file = {
    .name = "file",
    .description = "copies every input file under a directory (temporary name, fsync, rename)",
    .priv_size = sizeof(filesink),
    .open = file_open,
    .chunk = file_chunk,
    .finish = file_finish,
    .close = file_close,
};
