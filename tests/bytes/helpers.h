/* Shared helpers of the bytes-layer tests: counted frees, temp files, patterns. */
#ifndef PINIO_TESTS_BYTES_HELPERS_H
#define PINIO_TESTS_BYTES_HELPERS_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pinio/view.h"
#include "tests/common/helpers.h"

/* A pinio_free_fn that counts its calls in an atomic_int cookie, then frees. */
static inline void counting_free(void *cookie, void *ptr, size_t len)
{
    (void)len;
    atomic_fetch_add((atomic_int *)cookie, 1);
    free(ptr);
}

static inline void fill_pattern(uint8_t *buf, size_t len, unsigned seed)
{
    for (size_t i = 0; i < len; i++)
        buf[i] = (uint8_t)(i * 131u + seed);
}

static inline int check_pattern(const uint8_t *buf, size_t off, size_t len, unsigned seed)
{
    for (size_t i = 0; i < len; i++)
        if (buf[i] != (uint8_t)((off + i) * 131u + seed))
            return 0;
    return 1;
}

/* A view adopting `len` malloc'd pattern bytes (seed) whose free is counted. */
static inline pinio_view counted_view(size_t len, unsigned seed, atomic_int *frees)
{
    uint8_t *p = malloc(len);
    pinio_view v;
    if (!p || pinio_view_wrap(&v, p, len, counting_free, frees, 0) != 0)
        abort();
    fill_pattern(p, len, seed);
    return v;
}

/* Like counted_view(), with the bytes at an address aligned to `align` (a
 * power of two, at least sizeof(void *)). */
static inline pinio_view counted_view_aligned(size_t len, unsigned seed, atomic_int *frees,
                                              size_t align)
{
    void *p = NULL;
    pinio_view v;
    if (posix_memalign(&p, align, len) != 0 ||
        pinio_view_wrap(&v, p, len, counting_free, frees, 0) != 0)
        abort();
    fill_pattern(p, len, seed);
    return v;
}

/* The largest power of two dividing the address `p`, at most `most`: what
 * adopted memory's alloc_align reports. */
static inline size_t addr_align_upto(const void *p, size_t most)
{
    uintptr_t a = (uintptr_t)p;
    size_t al = (size_t)(a & (~a + 1));
    return al && al < most ? al : most;
}

/* Frees what counted_view_misaligned() handed out (its start is 16 bytes
 * into the allocation), counting the call. */
static inline void counting_free_shifted(void *cookie, void *ptr, size_t len)
{
    counting_free(cookie, (uint8_t *)ptr - 16, len);
}

/* Like counted_view(), with the bytes 16-aligned but never 32-aligned: what
 * malloc may return, less than PINIO_DEFAULT_ALIGN promises. */
static inline pinio_view counted_view_misaligned(size_t len, unsigned seed, atomic_int *frees)
{
    void *p = NULL;
    pinio_view v;
    if (posix_memalign(&p, 64, len + 16) != 0 ||
        pinio_view_wrap(&v, (uint8_t *)p + 16, len, counting_free_shifted, frees, 0) != 0)
        abort();
    fill_pattern((uint8_t *)p + 16, len, seed);
    return v;
}

/* Writes `len` pattern bytes to a new temp file under `dir`; returns a
 * malloc'd path (unlink and free it), or NULL when `dir` is unusable. */
static inline char *make_temp_file(const char *dir, size_t len, unsigned seed)
{
    size_t cap = strlen(dir) + 80;
    char *path = malloc(cap);
    if (!path)
        return NULL;
    int fd = t_tmpname(dir, "bytes", path, cap) ? -1 : mkstemp(path);
    if (fd < 0) {
        free(path);
        return NULL;
    }
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf)
        abort();
    fill_pattern(buf, len, seed);
    size_t done = 0;
    while (done < len) {
        ssize_t n = write(fd, buf + done, len - done);
        if (n <= 0)
            break;
        done += (size_t)n;
    }
    free(buf);
    close(fd);
    if (done != len) {
        unlink(path);
        free(path);
        return NULL;
    }
    return path;
}

static inline void remove_temp_file(char *path)
{
    if (path)
        unlink(path);
    free(path);
}

#endif
