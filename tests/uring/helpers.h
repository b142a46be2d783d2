/* Shared helpers of the engine tests: temp files with known content, a
 * reference reader (plain pread), checks that compare byte for byte. */
#ifndef PINIO_TESTS_URING_HELPERS_H
#define PINIO_TESTS_URING_HELPERS_H

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pinio/ring.h"
#include "tests/common/helpers.h"

/* Creates a file of `size` pattern bytes (tests/common) in `dir`; returns 0
 * and the path in `path` (PATH_MAX), or -errno. */
static inline int t_make_file(const char *dir, uint64_t size, uint64_t seed, char *path, size_t n)
{
    return t_tmpfile(dir, "uring", NULL, size, seed, path, n);
}

/* A sparse file of `size` bytes with `nblk` 4 KiB data blocks written at the
 * offsets in `at` (the holes read as zeros): costs nothing on disk. */
static inline int t_make_sparse(const char *dir, uint64_t size, const uint64_t *at, size_t nblk,
                                char *path, size_t n)
{
    int fd = t_tmpname(dir, "sparse", path, n) ? -1 : mkstemp(path);
    if (fd < 0)
        return -errno;
    int ret = 0;
    if (ftruncate(fd, (off_t)size))
        ret = -errno;
    uint8_t blk[4096];
    for (size_t b = 0; !ret && b < nblk; b++) {
        uint64_t s = at[b];
        for (size_t i = 0; i < sizeof blk; i += 8) {
            uint64_t v = t_rand(&s);
            memcpy(blk + i, &v, 8);
        }
        if (pwrite(fd, blk, sizeof blk, (off_t)at[b]) != (ssize_t)sizeof blk)
            ret = -EIO;
    }
    close(fd);
    if (ret)
        unlink(path);
    return ret;
}

/* Reference: what plain pread returns for [off, off+len). */
static inline ssize_t t_pread_all(const char *path, uint64_t off, void *buf, size_t len)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -errno;
    size_t got = 0;
    while (got < len) {
        ssize_t r = pread(fd, (uint8_t *)buf + got, len - got, (off_t)(off + got));
        if (r < 0) {
            close(fd);
            return -errno;
        }
        if (!r)
            break;
        got += (size_t)r;
    }
    close(fd);
    return (ssize_t)got;
}

#define T_POISON 0xA5

/* Checks one finished request against pread: done == what pread returned,
 * bytes equal, and every byte of dst past `done` still poisoned (nothing
 * written past end of file). Returns NULL or a static message. */
static inline const char *t_check_req(const char *path, const pinio_read_req *q)
{
    static char msg[256];
    uint8_t *ref = malloc(q->len ? q->len : 1);
    if (!ref)
        return "malloc";
    ssize_t want = t_pread_all(path, q->offset, ref, q->len);
    const uint8_t *d = q->dst;
    const char *bad = NULL;
    if (q->result != 0) {
        snprintf(msg, sizeof msg, "result %d at off %llu len %zu", q->result,
                 (unsigned long long)q->offset, q->len);
        bad = msg;
    } else if ((ssize_t)q->done != want) {
        snprintf(msg, sizeof msg, "done %zu, pread says %zd (off %llu len %zu)", q->done, want,
                 (unsigned long long)q->offset, q->len);
        bad = msg;
    } else if (q->done && memcmp(d, ref, q->done)) {
        size_t i = 0;
        while (d[i] == ref[i])
            i++;
        snprintf(msg, sizeof msg, "byte %zu differs (off %llu len %zu)", i,
                 (unsigned long long)q->offset, q->len);
        bad = msg;
    } else {
        for (size_t i = q->done; i < q->len; i++)
            if (d[i] != T_POISON) {
                snprintf(msg, sizeof msg, "byte %zu past EOF written (off %llu len %zu)", i,
                         (unsigned long long)q->offset, q->len);
                bad = msg;
                break;
            }
    }
    free(ref);
    return bad;
}

/* Anonymous, page-aligned memory (what a pinned pool hands out). */
static inline void *t_map(size_t len)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

#endif
