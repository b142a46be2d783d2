/* memcpybench: the memory-bandwidth limit for a hot load, for
 * bench/load_vs_peers. Copies BYTES between two warm buffers (both faulted
 * in and copied once before the clock starts, so neither page faults nor
 * first-touch zeroing are measured) and prints one JSON line with the
 * median of RUNS timed copies. A hot `pinio load` moves the same bytes from
 * the page cache into its arena: one copy, so this is its ceiling. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "bench_util.h"

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: memcpybench BYTES [RUNS]\n");
        return 2;
    }
    size_t n = (size_t)strtoull(argv[1], NULL, 10);
    int runs = argc > 2 ? atoi(argv[2]) : 3;
    if (!n || runs < 1 || runs > 64)
        return 2;
    uint8_t *a = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uint8_t *b = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (a == MAP_FAILED || b == MAP_FAILED) {
        fprintf(stderr, "memcpybench: cannot map 2 x %zu bytes\n", n);
        return 1;
    }
    memset(a, 0x5a, n);
    memset(b, 0, n);
    memcpy(b, a, n); /* warm both */
    double t[64];
    for (int i = 0; i < runs; i++) {
        a[(size_t)i % n] = (uint8_t)i; /* a store the copy must carry */
        double t0 = bench_now();
        memcpy(b, a, n);
        t[i] = bench_now() - t0;
        if (b[(size_t)i % n] != (uint8_t)i)
            return 1;
    }
    qsort(t, (size_t)runs, sizeof t[0], cmp);
    double med = t[runs / 2];
    printf("{\"tool\":\"memcpy\",\"bytes\":%zu,\"seconds\":%.4f,\"gbps\":%.3f,\"runs\":%d}\n", n,
           med, (double)n / 1e9 / med, runs);
    munmap(a, n);
    munmap(b, n);
    return 0;
}
