/* readbench: reads a whole file with the pinio engine at a given request
 * size and queue depth and prints one JSON line: bytes, seconds, GB/s, CPU
 * (user+sys) seconds per GB, and which path ran. Not a test: see
 * bench/engine_vs_fio for the side-by-side comparison with fio.
 *
 * Like fio, it reads into a window of registered memory that is reused
 * (2 x qd x bs), so memory placement/faulting is not measured here; the
 * window is prefaulted before the clock starts. Before the run the file's
 * pages are dropped with posix_fadvise(DONTNEED) unless --hot is given.
 *
 * The window is 2 MiB-aligned and madvise(MADV_HUGEPAGE)'d, as the pinned
 * pool (numa/pool.c) does for the loader's arena: registration then maps each
 * huge page as one bvec, and a 4 MiB O_DIRECT read needs 2 segments instead
 * of 1024 (virtio-blk here has max_segments 254, i.e. ~1 MiB per request on
 * 4 KiB pages). --no-huge keeps 4 KiB pages, like fio's malloc'ed buffers. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "pinio/ring.h"

static size_t parse_size(const char *s)
{
    char *e;
    unsigned long long v = strtoull(s, &e, 10);
    if (*e == 'k' || *e == 'K')
        v <<= 10;
    else if (*e == 'm' || *e == 'M')
        v <<= 20;
    return (size_t)v;
}

int main(int argc, char **argv)
{
    size_t bs = 1u << 20;
    unsigned qd = 16;
    int hot = 0, huge = 1;
    const char *path = NULL;
    pinio_ring_opts o;
    pinio_ring_opts_default(&o);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--bs") && i + 1 < argc)
            bs = parse_size(argv[++i]);
        else if (!strcmp(argv[i], "--qd") && i + 1 < argc)
            qd = (unsigned)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--hot"))
            hot = 1;
        else if (!strcmp(argv[i], "--no-huge"))
            huge = 0;
        else if (!strcmp(argv[i], "--backend") && i + 1 < argc) {
            const char *b = argv[++i];
            o.backend = !strcmp(b, "direct")     ? PINIO_BACKEND_DIRECT
                        : !strcmp(b, "buffered") ? PINIO_BACKEND_BUFFERED
                        : !strcmp(b, "pread")    ? PINIO_BACKEND_PREAD
                                                 : PINIO_BACKEND_AUTO;
        } else if (argv[i][0] != '-' && !path)
            path = argv[i];
        else {
            fprintf(stderr, "usage: readbench FILE [--bs N[k|m]] [--qd N] [--hot] "
                            "[--no-huge] [--backend auto|direct|buffered|pread]\n");
            return 2;
        }
    }
    if (!path) {
        fprintf(stderr, "readbench: no file\n");
        return 2;
    }
    o.queue_depth = qd;
    o.request_size = bs;
    pinio_ring *r;
    pinio_diag d = {0};
    int ret = pinio_ring_create(&r, &o, &d);
    if (ret) {
        fprintf(stderr, "readbench: %s\n", d.msg);
        return 1;
    }
    pinio_ring_file *f;
    if ((ret = pinio_ring_file_open(r, path, &f, &d))) {
        fprintf(stderr, "readbench: %s\n", d.msg);
        return 1;
    }
    pinio_ring_file_info fi;
    pinio_ring_file_get_info(f, &fi);
    uint64_t size = fi.size;
    size_t nslots = 2 * (size_t)qd, win = nslots * bs;
    const size_t hp = (size_t)2 << 20;
    uint8_t *m = mmap(NULL, win + hp, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return 1;
    uint8_t *w = (uint8_t *)(((uintptr_t)m + hp - 1) & ~(uintptr_t)(hp - 1));
    if (huge)
        madvise(w, win, MADV_HUGEPAGE); /* best effort: THP "never" just keeps 4 KiB */
    memset(w, 0, win);
    int slot = -1;
    for (size_t off = 0; off < win; off += (size_t)1 << 30) /* <= 1 GiB per region */
        pinio_ring_register_region(r, w + off, win - off < (1u << 30) ? win - off : 1u << 30,
                                   &slot);
    size_t n = (size_t)((size + bs - 1) / bs);
    pinio_read_req *q = calloc(n, sizeof *q);
    for (size_t i = 0; i < n; i++)
        q[i] = (pinio_read_req){.file = f, .offset = (uint64_t)i * bs, .len = bs,
                                .dst = w + (i % nslots) * bs};
    if (!hot) {
        int fd = open(path, O_RDONLY);
        if (fd >= 0) {
            fdatasync(fd);
            posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
            close(fd);
        }
    }
    double c0 = bench_cpu_s(), t0 = bench_now();
    ret = pinio_ring_read_bulk(r, q, n, &d);
    double t1 = bench_now(), c1 = bench_cpu_s();
    if (ret) {
        fprintf(stderr, "readbench: %s\n", d.msg);
        return 1;
    }
    uint64_t bytes = 0;
    for (size_t i = 0; i < n; i++)
        bytes += q[i].done;
    pinio_ring_info ri;
    pinio_ring_get_info(r, &ri);
    pinio_ring_file_get_info(f, &fi);
    double sec = t1 - t0, gb = (double)bytes / 1e9;
    printf("{\"tool\":\"pinio\",\"bytes\":%llu,\"seconds\":%.4f,\"gbps\":%.3f,"
           "\"cpu_s_per_gb\":%.4f,\"bs\":%zu,\"qd\":%u,\"cache\":\"%s\",\"backend\":\"%s\","
           "\"file_path\":\"%s\",\"fixed_ops\":%llu,\"plain_ops\":%llu,\"setup_flags\":%u,"
           "\"huge\":%s}\n",
           (unsigned long long)bytes, sec, gb / sec, (c1 - c0) / gb, bs, qd,
           hot ? "hot" : "cold(fadvise DONTNEED)", pinio_backend_name(ri.backend),
           pinio_backend_name(fi.backend), (unsigned long long)ri.fixed_ops,
           (unsigned long long)ri.plain_ops, ri.setup_flags, huge ? "true" : "false");
    free(q);
    pinio_ring_file_close(f);
    pinio_ring_destroy(r);
    munmap(m, win + hp);
    return 0;
}
