/* loadtouch: one load of FILE by one method, then a pass over every byte it
 * loaded, timed together, for bench/load_vs_peers: a lazy mapping is only
 * as fast as its first touch, so every peer pays the touch.
 *
 *   loadtouch METHOD FILE
 *
 * METHOD:
 *   pinio-mapped   pinio_load, --memory mapped
 *   pinio-mapped-ahead, pinio-mapped-fault   the same with mapped_fill AHEAD
 *                  (readahead at depth before the populate) or FAULT (the
 *                  populate alone) instead of AUTO's choice by file system
 *   pinio-pinned   pinio_load, --memory pinned, a fresh arena
 *   pinio-kept     pinio_load, --memory pinned, a kept arena: one load untimed,
 *                  the second timed (what a server swapping weights sees)
 *   pinio-pinned-reg, pinio-kept-reg   the same with register_arena (READ_FIXED)
 *   mmap-populate  mmap(MAP_POPULATE) of the file
 *   mmap-fault     mmap of the file, pages faulted by the touch
 *   read-thp       read() loop (8 MiB) into a fresh transparent-huge-page buffer
 *   memcpy         memcpy of the file's size between two warm buffers
 *
 * Prints one JSON line: method, bytes, seconds (load + touch), load_seconds,
 * gbps (bytes / seconds), registered (pinio: reads landed by READ_FIXED),
 * filled_ahead (pinio: files read ahead at depth before the populate). The
 * cache state is the caller's business. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench_util.h"
#include "pinio/load.h"

static volatile uint64_t sink;
static bool registered; /* pinio methods: reads landed by READ_FIXED */
static size_t filled_ahead; /* pinio methods: files read ahead at depth before the populate */

/* Reads every byte (8 at a time; the tail byte by byte). */
static void touch(const uint8_t *p, size_t n)
{
    uint64_t s = 0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        s += w;
    }
    for (; i < n; i++)
        s += p[i];
    sink += s;
}

static int die(const char *what)
{
    fprintf(stderr, "loadtouch: %s: %s\n", what, strerror(errno));
    return 1;
}

static int pinio_method(const char *path, pinio_memory_mode mode, pinio_mapped_fill fill,
                        bool kept, bool reg, double *load_s, double *total_s, uint64_t *bytes)
{
    pinio_arena *a = NULL;
    pinio_load_opts o;
    pinio_load_opts_default(&o);
    o.memory = mode;
    o.mapped_fill = (uint8_t)fill;
    o.register_arena = reg;
    if (kept) {
        if (pinio_arena_create(&a) < 0)
            return 1;
        o.arena = a;
    }
    pinio_checkpoint *cp = NULL;
    pinio_diag d = { 0 };
    for (int round = 0; round < (kept ? 2 : 1); round++) {
        pinio_checkpoint_release(cp);
        cp = NULL;
        double t0 = bench_now();
        if (pinio_load(&path, 1, &o, &cp, &d) < 0) {
            fprintf(stderr, "loadtouch: %s\n", d.msg);
            pinio_arena_release(a);
            return 1;
        }
        double t1 = bench_now();
        *bytes = 0;
        for (size_t i = 0; i < pinio_checkpoint_count(cp); i++) {
            const pinio_tensor *t = pinio_checkpoint_tensor(cp, i);
            touch(t->data, (size_t)t->nbytes);
            *bytes += t->nbytes;
        }
        *load_s = t1 - t0;
        *total_s = bench_now() - t0;
        pinio_load_report r;
        pinio_checkpoint_report(cp, &r);
        registered = r.registered;
        filled_ahead = r.files_filled_ahead;
    }
    pinio_checkpoint_release(cp);
    pinio_arena_release(a);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: loadtouch METHOD FILE (see the source)\n");
        return 2;
    }
    const char *m = argv[1], *path = argv[2];
    double load_s = 0, total_s = 0;
    uint64_t bytes = 0;
    int rc = 0;
    if (!strncmp(m, "pinio-", 6)) {
        bool mapped = !strncmp(m, "pinio-mapped", 12);
        pinio_memory_mode mode = mapped ? PINIO_MEMORY_MAPPED : PINIO_MEMORY_PINNED;
        pinio_mapped_fill fill = !strcmp(m, "pinio-mapped-ahead")   ? PINIO_FILL_AHEAD
                                 : !strcmp(m, "pinio-mapped-fault") ? PINIO_FILL_FAULT
                                                                    : PINIO_FILL_AUTO;
        bool kept = !strncmp(m, "pinio-kept", 10), reg = strstr(m, "-reg") != NULL;
        if (strcmp(m, "pinio-mapped") && strcmp(m, "pinio-mapped-ahead") &&
            strcmp(m, "pinio-mapped-fault") && strncmp(m, "pinio-pinned", 12) && !kept)
            return 2;
        rc = pinio_method(path, mode, fill, kept, reg, &load_s, &total_s, &bytes);
    } else {
        int fd = open(path, O_RDONLY);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0)
            return die(path);
        size_t n = (size_t)st.st_size;
        bytes = n;
        double t0 = bench_now();
        if (!strcmp(m, "mmap-populate") || !strcmp(m, "mmap-fault")) {
            int fl = MAP_SHARED | (!strcmp(m, "mmap-populate") ? MAP_POPULATE : 0);
            uint8_t *p = mmap(NULL, n, PROT_READ, fl, fd, 0);
            if (p == MAP_FAILED)
                return die("mmap");
            load_s = bench_now() - t0;
            touch(p, n);
            total_s = bench_now() - t0;
            munmap(p, n);
        } else if (!strcmp(m, "read-thp")) {
            uint8_t *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (p == MAP_FAILED)
                return die("mmap");
            madvise(p, n, MADV_HUGEPAGE);
            for (size_t off = 0; off < n;) {
                ssize_t r = read(fd, p + off, n - off < (8u << 20) ? n - off : (8u << 20));
                if (r <= 0)
                    return die("read");
                off += (size_t)r;
            }
            load_s = bench_now() - t0;
            touch(p, n);
            total_s = bench_now() - t0;
            munmap(p, n);
        } else if (!strcmp(m, "memcpy")) {
            uint8_t *a = malloc(n), *b = malloc(n);
            if (!a || !b)
                return die("malloc");
            memset(a, 0x5a, n);
            memcpy(b, a, n); /* warm both */
            t0 = bench_now();
            memcpy(b, a, n);
            load_s = bench_now() - t0;
            touch(b, n);
            total_s = bench_now() - t0;
            free(a);
            free(b);
        } else {
            return 2;
        }
        close(fd);
    }
    if (rc)
        return rc;
    printf("{\"method\":\"%s\",\"bytes\":%llu,\"seconds\":%.6f,\"load_seconds\":%.6f,"
           "\"gbps\":%.3f,\"registered\":%s,\"filled_ahead\":%zu}\n",
           m, (unsigned long long)bytes, total_s, load_s,
           total_s > 0 ? (double)bytes / total_s / 1e9 : 0.0, registered ? "true" : "false",
           filled_ahead);
    return 0;
}
