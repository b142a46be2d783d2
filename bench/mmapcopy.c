/* mmapcopy: the safetensors reference loading path, for bench/load_vs_peers.
 *
 * What `safetensors.safe_open(...).get_tensor()` does for every tensor of a
 * file, minus Python: mmap the file, then copy each tensor's bytes out of the
 * mapping into its own malloc'ed buffer (the tensor's storage). Cold, every
 * page of the mapping is a page fault served by readahead. The header is
 * parsed and validated with the public pinio_st_* API, so both loaders read
 * exactly the same byte ranges.
 *
 * Prints one JSON line: tensors, bytes, seconds, GB/s, CPU (user+sys) s/GB,
 * peak RSS. The clock covers open + header + mmap + copies + munmap; the
 * tensor buffers stay allocated until after it stops, as a load would keep
 * them. Cache state is the caller's business (the script drops pages first). */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "pinio/safetensors.h"

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: mmapcopy FILE.safetensors\n");
        return 2;
    }
    const char *path = argv[1];
    double c0 = bench_cpu_s(), t0 = bench_now();
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "mmapcopy: %s: %s\n", path, strerror(errno));
        return 1;
    }
    pinio_diag d = {0};
    pinio_st *st;
    if (pinio_st_read_fd(&st, fd, path, 0, &d)) {
        fprintf(stderr, "mmapcopy: %s\n", d.msg);
        return 1;
    }
    size_t fsize = (size_t)pinio_st_file_size(st);
    const uint8_t *map = mmap(NULL, fsize, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
        fprintf(stderr, "mmapcopy: mmap %s: %s\n", path, strerror(errno));
        return 1;
    }
    size_t n = pinio_st_count(st);
    void **bufs = calloc(n ? n : 1, sizeof *bufs);
    if (!bufs)
        return 1;
    uint64_t bytes = 0;
    for (size_t i = 0; i < n; i++) {
        const pinio_st_tensor *t = pinio_st_at(st, i);
        bufs[i] = malloc(t->nbytes ? (size_t)t->nbytes : 1);
        if (!bufs[i]) {
            fprintf(stderr, "mmapcopy: out of memory at tensor %s\n", t->name);
            return 1;
        }
        memcpy(bufs[i], map + t->file_offset, (size_t)t->nbytes);
        bytes += t->nbytes;
    }
    munmap((void *)map, fsize);
    close(fd);
    double t1 = bench_now(), c1 = bench_cpu_s();
    /* A checksum over what was copied keeps the copies observable. */
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++) {
        const pinio_st_tensor *t = pinio_st_at(st, i);
        if (t->nbytes)
            sum += ((const uint8_t *)bufs[i])[t->nbytes - 1];
        free(bufs[i]);
    }
    free(bufs);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double sec = t1 - t0, gb = (double)bytes / 1e9;
    printf("{\"tool\":\"mmap+copy\",\"tensors\":%zu,\"bytes\":%llu,\"seconds\":%.4f,"
           "\"gbps\":%.3f,\"cpu_s_per_gb\":%.4f,\"peak_rss_kib\":%ld,\"sum\":%llu}\n",
           n, (unsigned long long)bytes, sec, gb / sec, (c1 - c0) / gb, ru.ru_maxrss,
           (unsigned long long)sum);
    pinio_st_free(st);
    return 0;
}
