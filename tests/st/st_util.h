/* Helpers shared by the safetensors tests: build tiny files in temp dirs. */
#ifndef PINIO_TEST_ST_UTIL_H
#define PINIO_TEST_ST_UTIL_H

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "tests/common/helpers.h"

/* A file image: 8-byte LE length `n` (the JSON's own length unless
 * `claimed` is not UINT64_MAX), the JSON, then `data_len` bytes of 0xAB. */
static inline uint8_t *st_image(const char *json, size_t jlen, uint64_t claimed, size_t data_len,
                                size_t *out_len)
{
    uint64_t n = claimed == UINT64_MAX ? jlen : claimed;
    size_t len = 8 + jlen + data_len;
    uint8_t *b = malloc(len ? len : 1);
    cr_assert_not_null(b);
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(n >> (8 * i));
    memcpy(b + 8, json, jlen);
    memset(b + 8 + jlen, 0xAB, data_len);
    *out_len = len;
    return b;
}

/* Writes `len` bytes to a new temp file under `dir`; returns its malloc'd path. */
static inline char *st_write_tmp(const char *dir, const void *data, size_t len)
{
    char *path = malloc(256);
    cr_assert_not_null(path);
    cr_assert_eq(t_tmpfile(dir, "st", data ? data : "", len, 0, path, 256), 0, "temp file in %s", dir);
    return path;
}

/* The whole file at `path`, malloc'd (one spare byte); its size in `*len`. */
static inline uint8_t *st_read_all(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY);
    cr_assert(fd >= 0, "open %s", path);
    struct stat sb;
    cr_assert_eq(fstat(fd, &sb), 0);
    uint8_t *b = malloc((size_t)sb.st_size + 1);
    size_t got = 0;
    while (got < (size_t)sb.st_size) {
        ssize_t k = read(fd, b + got, (size_t)sb.st_size - got);
        cr_assert(k > 0);
        got += (size_t)k;
    }
    close(fd);
    *len = got;
    return b;
}

#endif
