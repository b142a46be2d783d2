/* pinio_bench's target: an existing file or device checked (the overwrite
 * guard), a missing one made under a temporary name and renamed into
 * place, the O_DIRECT alignment, and how a trim workload deallocates. */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "pinio/ring.h"
#include "pinio/sys.h"
#include "src/base/stale.h"
#include "src/bench/job_internal.h"


/* ---- the target --------------------------------------------------------- */

/* Marks a file bench made, so that a later write run may reuse it without
 * --allow-file-overwrite (and a later run may remove it as a stale
 * temporary): best effort, file systems without user xattrs lose only that. */
#define BENCH_XATTR "user.pinio.bench"

/* The mark alone proves only that bench once made the file: the inode and
 * its xattrs survive a program that later writes real data into it (or a
 * copy that preserves xattrs). So once the file is in place, the mark's value
 * becomes the file's state after bench last wrote it, its inode, size and
 * modification time, and bench reuses the file only while they still match:
 * any other writer moves mtime or size, a copy has another inode. One xattr,
 * short: ext4 keeps it in the inode, where a second one would take a block
 * (which a trimmed file must not have). The temporary keeps the stale mark's
 * value (src/base/stale.h) until it is renamed into place. */
static int state_format(const struct stat *st, char *v, size_t cap)
{
    return snprintf(v, cap, "bench1 %llx %llx %llx.%lx", (unsigned long long)st->st_ino,
                    (unsigned long long)st->st_size, (unsigned long long)st->st_mtim.tv_sec,
                    (unsigned long)st->st_mtim.tv_nsec);
}

/* Whether the regular file `path` (stat `st`) is one bench made and nobody
 * else wrote since bench last did. */
static bool made_by_bench(const char *path, const struct stat *st)
{
    char want[64], got[64];
    int n = state_format(st, want, sizeof want);
    ssize_t g = getxattr(path, BENCH_XATTR, got, sizeof got);
    return g == n && !memcmp(got, want, (size_t)n);
}

/* Records the state of the file open at `fd` as bench's (best effort, like
 * the mark). */
static void record_state(int fd)
{
    struct stat st;
    char v[64];
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
        (void)fsetxattr(fd, BENCH_XATTR, v, (size_t)state_format(&st, v, sizeof v), 0);
}

void pinio__bench_record_files(const char *const *paths, unsigned n,
                               const pinio__bench_own *own)
{
    for (unsigned i = 0; i < n; i++) {
        if (!own[i].owned)
            continue;
        /* O_NOFOLLOW and the inode: only the file that was checked (or
         * made) before the run, never one put at its name since. */
        int fd = open(paths[i], O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        struct stat st;
        if (fd < 0)
            continue;
        if (fstat(fd, &st) == 0 && (uint64_t)st.st_dev == own[i].dev &&
            (uint64_t)st.st_ino == own[i].ino)
            record_state(fd);
        close(fd);
    }
}

/* Asks the progress callback whether to go on while the target is made,
 * about once a second as during the run: the CLI's Ctrl-C reaches the
 * library this way (the library installs no signal handlers), and the
 * partial file is removed. */
static int setup_cancelled(const pinio_bench_opts *o, uint64_t total, uint64_t t0,
                           const char *path, pinio_diag *diag)
{
    if (!o->progress)
        return 0;
    /* Setup, not the workload: the workload's bytes are still 0. */
    pinio_progress pg = { .done_bytes = 0, .total_bytes = total,
                          .elapsed_s = (double)(now_ns() - t0) / 1e9 };
    if (o->progress(o->progress_ctx, &pg) == 0)
        return 0;
    pinio_diag_set(diag, -ECANCELED, "bench: %s: stopped by the progress callback while it was "
                   "being created", path);
    return -ECANCELED;
}

static int fill_new_file(const pinio_bench_opts *o, int fd, uint64_t size, const char *path,
                         pinio_diag *diag)
{
    uint64_t seed = o->seed, t0 = now_ns(), next = t0 + 1000000000ull;
    /* Real data, not a sparse file: reading holes costs no I/O and would
     * flatter every figure. The verify pattern is as good as random here. */
    size_t chunk = 4u << 20;
    void *buf = malloc(chunk);
    if (!buf)
        return pinio_diag_set(diag, -ENOMEM, "bench: %s: no memory to fill it", path), -ENOMEM;
    for (uint64_t off = 0; off < size;) {
        size_t n = size - off < chunk ? (size_t)(size - off) : chunk;
        pinio__bench_pattern_fill(buf, n & ~(size_t)7, off, seed);
        ssize_t w = pwrite(fd, buf, n, (off_t)off);
        if (w <= 0) {
            int e = w < 0 ? -errno : -EIO;
            free(buf);
            return pinio_diag_set(diag, e, "bench: %s: filling at offset %llu: %s", path,
                                  (unsigned long long)off, pinio_strerror(e)),
                   e;
        }
        off += (uint64_t)w;
        int c = 0;
        if (o->progress && now_ns() >= next) {
            next += 1000000000ull;
            c = setup_cancelled(o, size, t0, path, diag);
        }
        if (c) {
            free(buf);
            return c;
        }
    }
    free(buf);
    if (fsync(fd))
        return pinio_diag_set(diag, -errno, "bench: %s: fsync: %s", path, pinio_strerror(-errno)),
               -errno;
    return 0;
}

/* Opens (creating when allowed) the target `p` and settles the size: `osize`
 * bytes of it (0: what it has). On success `*size` is the bytes the run
 * uses and `res->file_size` the target's size. */
static int prepare_target(const pinio_bench_opts *o, const char *p, uint64_t osize,
                          uint64_t *size, pinio_bench_file *res, int *hold,
                          pinio__bench_own *own, pinio_diag *diag)
{
    bool wr = is_write(o->rw) || is_trim(o->rw); /* destroys what is there */
    struct stat st;
    *size = osize;
    res->created = false;
    if (stat(p, &st)) {
        int e = -errno;
        if (e != -ENOENT || o->verify_only)
            return pinio_diag_set(diag, e, "bench: %s: %s", p, pinio_strerror(e)), e;
        uint64_t want = osize ? osize : (1ull << 30);
        want -= want % (unit_bs(o) * o->jobs);
        if (!want)
            return pinio_diag_set(diag, -EINVAL, "bench: %s: --size too small", p), -EINVAL;
        /* Made under a temporary name and renamed into place, so that an
         * interrupted run never leaves a partial file at the target's name
         * (which the next run would refuse, or worse, benchmark). */
        char *tmp = malloc(strlen(p) + 48);
        if (!tmp)
            return pinio_diag_set(diag, -ENOMEM, "bench: no memory"), -ENOMEM;
        sprintf(tmp, "%s.pinio-bench-%ld.tmp", p, (long)getpid());
        /* What an earlier run killed while filling left (src/base/stale.h). */
        pinio__remove_stale(p, ".pinio-bench-", ".tmp", BENCH_XATTR);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0) {
            e = -errno;
            pinio_diag_set(diag, e, "bench: %s: cannot create: %s", tmp, pinio_strerror(e));
            free(tmp);
            return e;
        }
        (void)pinio__stale_mark(fd, BENCH_XATTR);
        /* A write run writes every block itself; reserving the space keeps
         * the first pass from measuring block allocation in the kernel. */
        /* A mixed workload reads too: it needs real data like a read. */
        int rc = wr && !is_mixed(o->rw) && !is_trim(o->rw)
                     ? (posix_fallocate(fd, 0, (off_t)(o->offset + want)) ? -ENOSPC : 0)
                     : fill_new_file(o, fd, o->offset + want, p, diag);
        if (!rc && fsync(fd))
            rc = -errno;
        /* RENAME_NOREPLACE: a file that appeared at the name meanwhile is
         * someone's, not ours to replace; link() does the same where the
         * file system lacks the flag. */
        if (!rc && renameat2(AT_FDCWD, tmp, AT_FDCWD, p, RENAME_NOREPLACE) != 0) {
            rc = -errno;
            if (rc == -EINVAL && link(tmp, p) == 0)
                rc = 0;
            else if (rc == -EINVAL)
                rc = -errno;
            if (rc)
                pinio_diag_set(diag, rc, "bench: %s: moving the new file into place: %s", p,
                               pinio_strerror(rc));
        }
        /* In place: the mark becomes the state bench left it in. */
        struct stat made;
        if (!rc && fstat(fd, &made) == 0) {
            record_state(fd);
            *own = (pinio__bench_own){true, (uint64_t)made.st_dev, (uint64_t)made.st_ino};
        }
        close(fd);
        unlink(tmp); /* after a rename there is nothing left to remove */
        free(tmp);
        if (rc) {
            if (rc == -ENOSPC)
                pinio_diag_set(diag, rc, "bench: %s: no space for %llu bytes", p,
                               (unsigned long long)want);
            return rc;
        }
        res->created = true;
        res->size = o->offset + want;
        *size = want;
        return 0;
    }
    uint64_t fsize;
    if (S_ISREG(st.st_mode)) {
        fsize = (uint64_t)st.st_size;
        /* A write run destroys what the file holds: only an empty file, one
         * bench made, or an explicit yes. */
        bool mine = made_by_bench(p, &st);
        if (wr && fsize && !o->allow_file_overwrite && !mine)
            return pinio_diag_set(diag, -EEXIST,
                                  "bench: %s holds %llu bytes that bench did not write%s: a %s "
                                  "run would destroy them; use a new path, or add "
                                  "--allow-file-overwrite to mean it",
                                  p, (unsigned long long)fsize,
                                  getxattr(p, BENCH_XATTR, NULL, 0) >= 0
                                      ? " (bench made it, but it changed since bench last "
                                        "wrote it)"
                                      : "",
                                  is_trim(o->rw) ? "trim" : "write"),
                   -EEXIST;
        *own = (pinio__bench_own){mine, (uint64_t)st.st_dev, (uint64_t)st.st_ino};
    } else if (S_ISBLK(st.st_mode)) {
        if (wr && !o->allow_device_overwrite)
            return pinio_diag_set(diag, -EPERM,
                                  "bench: %s is a block device: %s destroys its data; "
                                  "add --allow-device-overwrite to mean it",
                                  p, is_trim(o->rw) ? "trimming" : "writing"),
                   -EPERM;
        /* O_EXCL on a block device claims it: it fails with EBUSY while a
         * file system is mounted on it (or another program claimed it), and
         * while held, nobody can mount it under the run. Writes keep it. */
        int fd = open(p, O_RDONLY | O_CLOEXEC | (wr ? O_EXCL : 0));
        if (fd < 0) {
            int e = -errno;
            if (e == -EBUSY)
                return pinio_diag_set(diag, e,
                                      "bench: %s is in use (a mounted file system, or another "
                                      "program holds it exclusively): refusing to %s it",
                                      p, is_trim(o->rw) ? "trim" : "write to"),
                       e;
            return pinio_diag_set(diag, e, "bench: %s: %s", p, pinio_strerror(e)), e;
        }
        int rc = ioctl(fd, BLKGETSIZE64, &fsize) ? -errno : 0;
        if (wr && !rc)
            *hold = fd;
        else
            close(fd);
        if (rc)
            return pinio_diag_set(diag, rc, "bench: %s: BLKGETSIZE64: %s", p, pinio_strerror(rc)),
                   rc;
    } else {
        return pinio_diag_set(diag, -EPERM, "bench: %s is neither a regular file nor a block device",
                              p),
               -EPERM;
    }
    if (!*size) {
        uint64_t avail = fsize > o->offset ? fsize - o->offset : 0;
        *size = avail - avail % (unit_bs(o) * o->jobs);
        if (!*size)
            return pinio_diag_set(diag, -EINVAL,
                                  "bench: %s: %llu bytes is less than one block per job", p,
                                  (unsigned long long)fsize),
                   -EINVAL;
    } else if (o->offset + *size > fsize && !(is_write(o->rw) && S_ISREG(st.st_mode))) {
        return pinio_diag_set(diag, -EINVAL, "bench: %s has %llu bytes, --offset + --size ask "
                              "for %llu", p, (unsigned long long)fsize,
                              (unsigned long long)(o->offset + *size)),
               -EINVAL;
    }
    res->size = fsize > o->offset + *size ? fsize : o->offset + *size;
    return 0;
}

/* Prepares every file of the run (prepare_target() each): first those that
 * exist, which creates and writes nothing, so that a refused one (data
 * bench did not write, a block device) stops the run before any other file
 * is made; then the missing ones, with the size the others settled. On
 * success `*size` is the bytes used in each file; on failure `out[i].created`
 * says which files it made (the caller removes them). `out` and `hold` have
 * `n` entries. */
int pinio__bench_prepare_files(const pinio_bench_opts *o, const char *const *paths,
                               unsigned n, uint64_t *size, pinio_bench_file *out,
                               int *hold, pinio__bench_own *own, pinio_diag *diag)
{
    /* The part of each file: fio's size / files, or filesize. */
    uint64_t want = o->filesize ? o->filesize : o->size / n, got;
    int rc = 0;
    bool *exists = calloc(n, sizeof *exists);
    if (!exists)
        return pinio_diag_set(diag, -ENOMEM, "bench: no memory"), -ENOMEM;
    for (unsigned i = 0; i < n; i++) {
        struct stat st;
        exists[i] = stat(paths[i], &st) == 0 || errno != ENOENT;
    }
    /* Size 0: the smallest of the existing files, so that every file has
     * the same share (the order within a file is one permutation). */
    uint64_t least = 0;
    for (unsigned i = 0; i < n && !rc; i++) {
        if (!exists[i])
            continue;
        rc = prepare_target(o, paths[i], want, &got, &out[i], &hold[i], &own[i], diag);
        if (!rc && !want)
            least = least && least < got ? least : got;
    }
    if (!want && least)
        want = least;
    else if (!want) /* nothing exists: 1 GiB in all, as for one new file */
        want = (1ull << 30) / n;
    for (unsigned i = 0; i < n && !rc; i++)
        if (!exists[i])
            rc = prepare_target(o, paths[i], want, &got, &out[i], &hold[i], &own[i], diag);
    free(exists);
    if (rc)
        return rc;
    for (unsigned i = 0; i < n; i++)
        out[i].used = want;
    *size = want;
    return 0;
}

/* Without CAP_IPC_LOCK the kernel charges registered buffers to
 * RLIMIT_MEMLOCK. Checked before the target is created or filled: a run
 * that cannot have its buffers must not first write gigabytes. The bound
 * is the least the registration can cost (qd x bs per job, 4 KiB pages);
 * with huge pages it costs up to the 2 MiB-rounded area, and a run in
 * between fails at registration instead (and removes what it created). */
int pinio__bench_check_memlock(const pinio_bench_opts *o, pinio_diag *diag)
{
    pinio_sysinfo si;
    if (!o->fixed || is_trim(o->rw) || pinio_sys_probe(&si) || si.registrable == PINIO_UNLIMITED)
        return 0;
    /* a GPU destination: two staging buffers per request (gpu.c) */
    bool hip;
    int dev;
    uint64_t need = (uint64_t)o->jobs * o->qd * o->bs *
                    (pinio__bench_mem_parse(o->mem, &hip, &dev) == 1 ? 2 : 1);
    if (need <= si.registrable)
        return 0;
    return pinio_diag_set(diag, -ENOMEM,
                          "bench: %s: --fixed registers %llu bytes of buffers (jobs x qd x bs) "
                          "but RLIMIT_MEMLOCK leaves %llu (raise ulimit -l, lower --qd or --bs, "
                          "or use --fixed=0)",
                          o->path, (unsigned long long)need, (unsigned long long)si.registrable),
           -ENOMEM;
}

/* The offset and length alignment O_DIRECT needs on `fd`: the logical block
 * size of a block device, statx's dio_offset_align for a file (Linux 6.1+);
 * 0 when unknown. */
static unsigned dio_align(int fd)
{
    struct stat st;
    if (fstat(fd, &st))
        return 0;
    if (S_ISBLK(st.st_mode)) {
        int ss = 0;
        return ioctl(fd, BLKSSZGET, &ss) == 0 && ss > 0 ? (unsigned)ss : 0;
    }
#if defined(STATX_DIOALIGN) && !defined(PINIO_NO_STATX_DIO_FIELDS)
    struct statx sx;
    if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 && (sx.stx_mask & STATX_DIOALIGN))
        return sx.stx_dio_offset_align;
#endif
    return 0;
}

/* ---- trim: how, probed before the run ----------------------------------- */

/* Whether the kernel has io_uring's block discard command (Linux 6.12),
 * asked with a zero-length discard, which deallocates nothing: a kernel
 * with it refuses the length (-EINVAL, after the command was found); one
 * without it has no uring_cmd for block devices (-EOPNOTSUPP) or no
 * IORING_OP_URING_CMD at all (5.19-, hence the opcode probe first, as its
 * -EINVAL would read like the answer of a kernel that has it). */
static bool discard_cmd_works(int fd)
{
    struct io_uring r;
    if (io_uring_queue_init(2, &r, 0))
        return false;
    bool ok = false;
    struct io_uring_probe *p = io_uring_get_probe_ring(&r);
    struct io_uring_sqe *sqe = io_uring_get_sqe(&r);
    if (p && sqe && io_uring_opcode_supported(p, IORING_OP_URING_CMD)) {
        io_uring_prep_rw(IORING_OP_URING_CMD, sqe, fd, NULL, 0, 0);
        sqe->cmd_op = BLOCK_URING_CMD_DISCARD;
        struct io_uring_cqe *cqe;
        if (io_uring_submit_and_wait(&r, 1) == 1 && !io_uring_peek_cqe(&r, &cqe)) {
            ok = cqe->res == -EINVAL || cqe->res == 0;
            io_uring_cqe_seen(&r, cqe);
        }
    }
    if (p)
        io_uring_free_probe(p);
    io_uring_queue_exit(&r);
    return ok;
}

/* Finds how a trim workload deallocates on `fd` (opened for writing), so
 * that a target that cannot is named once, before the run, instead of in
 * the first request's error. The probes destroy nothing: a hole punched
 * past the end of the file (KEEP_SIZE: the file does not grow), a
 * zero-length BLKDISCARD (which the kernel checks for discard support
 * before it refuses the length). */
int pinio__bench_trim_probe(const char *path, int fd, const pinio__faults *f,
                            enum trim_how *how, pinio_diag *diag)
{
    struct stat st;
    if (fstat(fd, &st))
        return pinio_diag_set(diag, -errno, "bench: %s: %s", path, pinio_strerror(-errno)),
               -errno;
    bool reg = S_ISREG(st.st_mode);
    int rc;
    if (f && f->trimnotsup)
        rc = -EOPNOTSUPP;
    else if (reg)
        rc = fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                       (st.st_size + 4095) & ~(off_t)4095, 4096) ? -errno : 0;
    else
        rc = ioctl(fd, BLKDISCARD, (uint64_t[2]){0, 0}) ? -errno : 0;
    if (!reg && rc == -EINVAL)
        rc = 0; /* discard is supported; the zero length was refused */
    if (rc == -EOPNOTSUPP)
        return pinio_diag_set(diag, rc,
                              reg ? "bench: %s: the file system does not support punching holes "
                                    "(fallocate PUNCH_HOLE), so trim cannot run"
                                  : "bench: %s: the device does not support discard, so trim "
                                    "cannot run",
                              path),
               rc;
    if (rc)
        return pinio_diag_set(diag, rc, "bench: %s: probing %s: %s", path,
                              reg ? "hole punching" : "discard", pinio_strerror(rc)),
               rc;
    *how = reg ? TRIM_PUNCH
               : !(f && f->nodiscardcmd) && discard_cmd_works(fd) ? TRIM_CMD : TRIM_IOCTL;
    return 0;
}

/* Opens one file of the run for a job, as the target is opened: `first`
 * (the first job's open) also checks the O_DIRECT alignment and drops the
 * cached pages. */
int pinio__bench_open_file(const pinio_bench_opts *o, const char *p, int flags, bool first,
                           int *fd, pinio_diag *diag)
{
    int rc = 0;
    *fd = open(p, flags);
    if (*fd < 0) {
        rc = -errno;
        pinio_diag_set(diag, rc, "bench: %s: open%s: %s%s", p, o->direct ? " with O_DIRECT" : "",
                       pinio_strerror(rc),
                       rc == -EINVAL && o->direct
                           ? " (the file system refuses O_DIRECT, e.g. tmpfs: use --direct=0)"
                           : "");
        return rc;
    }
    /* Said before any request, with the number: each request would fail
     * with a bare "invalid argument" instead. */
    unsigned align = first && o->direct ? dio_align(*fd) : 0;
    if (align > 1 && o->bs % align) {
        rc = -EINVAL;
        pinio_diag_set(diag, rc,
                       "bench: %s: --bs %llu is not a multiple of the %u-byte block that "
                       "O_DIRECT needs here (use --bs %u or a multiple, or --direct=0)",
                       p, (unsigned long long)o->bs, align, align);
        return rc;
    }
    if (first && o->cache_cold && (rc = pinio_file_drop_cache(*fd)))
        pinio_diag_set(diag, rc, "bench: %s: dropping its cached pages: %s", p,
                       pinio_strerror(rc));
    return rc;
}
