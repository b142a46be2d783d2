/* See helpers.h. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/common/helpers.h"

uint64_t t_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Word w of the stream is splitmix64 of (seed, w): random access by offset. */
static uint64_t word(uint64_t seed, uint64_t w)
{
    uint64_t s = seed ^ (w * 0xd1342543de82ef95ull);
    return t_rand(&s);
}

static uint8_t byte_at(uint64_t seed, uint64_t off)
{
    return (uint8_t)(word(seed, off / 8) >> (8 * (off % 8)));
}

void t_pattern_fill(void *buf, size_t n, uint64_t seed, uint64_t off)
{
    uint8_t *b = buf;
    size_t i = 0;
    for (; i < n && (off + i) % 8; i++)
        b[i] = byte_at(seed, off + i);
    for (; i + 8 <= n; i += 8) {
        uint64_t v = word(seed, (off + i) / 8);
        memcpy(b + i, &v, 8); /* little endian, as byte_at */
    }
    for (; i < n; i++)
        b[i] = byte_at(seed, off + i);
}

bool t_pattern_check(const void *buf, size_t n, uint64_t seed, uint64_t off, size_t *bad)
{
    const uint8_t *b = buf;
    for (size_t i = 0; i < n; i++)
        if (b[i] != byte_at(seed, off + i)) {
            if (bad)
                *bad = i;
            return false;
        }
    return true;
}

int t_run(char *out, size_t n)
{
    const char *r = getenv("PINIO_TEST_RUN");
    size_t len = r ? strlen(r) : 0;
    bool ok = len >= 1 && len <= 16;
    for (size_t i = 0; ok && i < len; i++)
        ok = (r[i] >= '0' && r[i] <= '9') || (r[i] >= 'a' && r[i] <= 'z') ||
             (r[i] >= 'A' && r[i] <= 'Z');
    /* No tag from scripts/test: the pid's, which no scripts/test tag ("r"
     * and hex) can equal. */
    int k = ok ? snprintf(out, n, "%s", r) : snprintf(out, n, "p%ld", (long)getpid());
    return k < 0 || (size_t)k >= n ? -ENAMETOOLONG : 0;
}

int t_tmpname(const char *base, const char *tag, char *out, size_t n)
{
    char run[17];
    int rc = t_run(run, sizeof(run));
    if (rc)
        return rc;
    int k = snprintf(out, n, "%s/pinio-%s-%s-XXXXXX", base, run, tag);
    return k < 0 || (size_t)k >= n ? -ENAMETOOLONG : 0;
}

int t_tmpdir(const char *base, const char *tag, char *out, size_t n)
{
    int rc = t_tmpname(base, tag, out, n);
    if (rc)
        return rc;
    return mkdtemp(out) ? 0 : -errno;
}

int t_tmpfile(const char *dir, const char *tag, const void *data, uint64_t len, uint64_t seed,
              char *out, size_t n)
{
    int rc = t_tmpname(dir, tag, out, n);
    if (rc)
        return rc;
    int fd = mkstemp(out);
    if (fd < 0)
        return -errno;
    uint8_t chunk[1 << 16];
    for (uint64_t done = 0; rc == 0 && done < len;) {
        size_t m = len - done < sizeof(chunk) ? (size_t)(len - done) : sizeof(chunk);
        const void *src = data ? (const uint8_t *)data + done : chunk;
        if (!data)
            t_pattern_fill(chunk, m, seed, done);
        ssize_t w = write(fd, src, m);
        if (w <= 0)
            rc = w < 0 ? -errno : -EIO;
        else
            done += (uint64_t)w;
    }
    if (close(fd) != 0 && rc == 0)
        rc = -errno;
    if (rc < 0)
        unlink(out);
    return rc;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    return (flag == FTW_DP ? rmdir(path) : unlink(path)) == 0 || errno == ENOENT ? 0 : -errno;
}

int t_rm_rf(const char *path)
{
    if (access(path, F_OK) != 0 && errno == ENOENT)
        return 0;
    int rc = nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return rc < 0 ? -errno : rc;
}
