/*
 * pinio_file: one open descriptor shared by every window of a file.
 *
 * Windows, their splits and duplicates retain the same object instead of
 * reopening the path (upstream cubecl reopens per child): one descriptor, one
 * path string for messages, and a size taken once at open so a window's
 * bounds are checked without I/O.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/bytes/file_internal.h"

struct pinio_file {
    atomic_size_t refs;
    int fd;
    uint64_t size;
    char *path;
    /* Statistics for tests: relaxed counters, they order nothing. */
    atomic_uint_fast64_t read_calls;
    atomic_uint_fast64_t read_bytes;
};

int pinio_file_open(pinio_file **out, const char *path, pinio_diag *diag)
{
    if (!out || !path) {
        pinio_diag_set(diag, -EINVAL, "pinio_file_open: NULL argument");
        return -EINVAL;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int err = -errno;
        pinio_diag_set(diag, err, "%s: open: %s", path, pinio_strerror(err));
        return err;
    }
    struct stat st;
    int err = 0;
    if (fstat(fd, &st) != 0) {
        err = -errno;
    } else if (S_ISDIR(st.st_mode)) {
        err = -EISDIR;
    } else if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
        err = -EINVAL; /* pipes and sockets have no positional reads */
    }
    /* st_size is 0 for block devices; the end offset is their size. */
    off_t end = err ? 0 : lseek(fd, 0, SEEK_END);
    if (!err && end < 0)
        err = -errno;
    pinio_file *f = err ? NULL : calloc(1, sizeof(*f));
    char *p = f ? strdup(path) : NULL;
    if (!err && (!f || !p))
        err = -ENOMEM;
    if (err) {
        pinio_diag_set(diag, err, "%s: %s", path, pinio_strerror(err));
        free(p);
        free(f);
        close(fd);
        return err;
    }
    atomic_init(&f->refs, 1);
    f->fd = fd;
    f->size = (uint64_t)end;
    f->path = p;
    atomic_init(&f->read_calls, 0);
    atomic_init(&f->read_bytes, 0);
    *out = f;
    return 0;
}

pinio_file *pinio_file_retain(pinio_file *f)
{
    /* Relaxed: the caller already holds a reference (see view.c). */
    atomic_fetch_add_explicit(&f->refs, 1, memory_order_relaxed);
    return f;
}

void pinio_file_release(pinio_file *f)
{
    if (!f)
        return;
    /* Release decrement, acquire load before closing: see ref_release in view.c. */
    if (atomic_fetch_sub_explicit(&f->refs, 1, memory_order_release) != 1)
        return;
    (void)atomic_load_explicit(&f->refs, memory_order_acquire);
    close(f->fd);
    free(f->path);
    free(f);
}

uint64_t pinio_file_size(const pinio_file *f)
{
    return f->size;
}

const char *pinio_file_path(const pinio_file *f)
{
    return f->path;
}

int pinio__file_fd(const pinio_file *f)
{
    return f->fd;
}

int pinio__file_check_range(const pinio_file *f, uint64_t off, size_t len, pinio_diag *diag)
{
    if (off <= f->size && len <= f->size - off)
        return 0;
    pinio_diag_set(diag, -ERANGE, "%s: read of %zu bytes at offset %llu passes the size %llu",
                    f->path, len, (unsigned long long)off, (unsigned long long)f->size);
    return -ERANGE;
}

int pinio__file_changed(const pinio_file *f, uint64_t at, pinio_diag *diag)
{
    pinio_diag_set(diag, PINIO_ECHANGED,
                    "%s: unexpected end of file at offset %llu (size was %llu at open)", f->path,
                    (unsigned long long)at, (unsigned long long)f->size);
    return PINIO_ECHANGED;
}

int pinio__file_read(pinio_file *f, uint64_t off, void *dst, size_t len, pinio_diag *diag)
{
    int rc = pinio__file_check_range(f, off, len, diag);
    if (rc)
        return rc;
    atomic_fetch_add_explicit(&f->read_calls, 1, memory_order_relaxed);
    uint8_t *d = dst;
    size_t done = 0;
    while (done < len) {
        /* pread may return less than asked (signals, >2 GiB requests are
         * capped at 0x7ffff000 bytes by Linux): loop until all is read. */
        ssize_t n = pread(f->fd, d + done, len - done, (off_t)(off + done));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            int err = -errno;
            pinio_diag_set(diag, err, "%s: read at offset %llu: %s", f->path,
                            (unsigned long long)(off + done), pinio_strerror(err));
            return err;
        }
        if (n == 0)
            return pinio__file_changed(f, off + done, diag);
        done += (size_t)n;
        atomic_fetch_add_explicit(&f->read_bytes, (uint64_t)n, memory_order_relaxed);
    }
    return 0;
}

void pinio__file_stats(const pinio_file *f, uint64_t *calls, uint64_t *bytes)
{
    if (calls)
        *calls = atomic_load_explicit(&f->read_calls, memory_order_relaxed);
    if (bytes)
        *bytes = atomic_load_explicit(&f->read_bytes, memory_order_relaxed);
}

void pinio__file_account(pinio_file *f, uint64_t bytes)
{
    atomic_fetch_add_explicit(&f->read_calls, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&f->read_bytes, bytes, memory_order_relaxed);
}

bool pinio__file_sole_ref(const pinio_file *f)
{
    /* Acquire pairs with the release decrement of the other holders, so that
     * their last uses happen before the caller frees the file. */
    return atomic_load_explicit(&f->refs, memory_order_acquire) == 1;
}
