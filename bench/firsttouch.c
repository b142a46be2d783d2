/* firsttouch: what a first touch of fresh anonymous memory costs here, the
 * floor under any load into new memory (a fresh pinned arena, a memcpy into
 * numpy.empty). Maps MIB of new memory, with or without MADV_HUGEPAGE (the
 * arena asks for huge pages), writes one byte per 4 KiB page from one
 * thread, and prints one JSON line. On a VM whose host takes freed guest
 * memory back (free page reporting) each touch may also wait for the host:
 * run it several times, spaced, and read the spread (doc/measurements.md,
 * issue 27's cold rows). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    if (argc != 3 || (strcmp(argv[2], "huge") && strcmp(argv[2], "nohuge"))) {
        fprintf(stderr, "usage: firsttouch MIB huge|nohuge\n"
                        "  one byte written per 4 KiB page of MIB MiB of fresh anonymous\n"
                        "  memory (huge: MADV_HUGEPAGE, as pinio's arena asks); prints\n"
                        "  {\"mib\", \"huge\", \"seconds\", \"gb_per_s\"}\n");
        return 2;
    }
    char *end;
    unsigned long long mib = strtoull(argv[1], &end, 10);
    if (*end || mib == 0 || mib > (1ull << 20)) {
        fprintf(stderr, "firsttouch: MIB must be 1 to 1048576, not '%s'\n", argv[1]);
        return 2;
    }
    size_t n = (size_t)mib << 20;
    int huge = !strcmp(argv[2], "huge");
    char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("firsttouch: mmap");
        return 1;
    }
    /* advice only: a kernel without THP maps small pages either way */
    (void)madvise(p, n, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    double t0 = now_s();
    for (size_t i = 0; i < n; i += 4096)
        ((volatile char *)p)[i] = 1;
    double s = now_s() - t0;
    printf("{\"mib\": %llu, \"huge\": %s, \"seconds\": %.3f, \"gb_per_s\": %.3f}\n", mib,
           huge ? "true" : "false", s, (double)n / s / 1e9);
    munmap(p, n);
    return 0;
}
