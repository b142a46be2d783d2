/* How long model.safetensors.index.json parsing takes (pinio_st_index_parse,
 * in memory: no file is opened), at the sizes that matter for quadratic
 * behaviour: 100k entries / 10k shards, 1M entries / 100k shards.
 *
 * usage: build/bench/index_parse [RUNS]   (default 5)
 *
 * Sizes alternate within each round so drift falls on both; prints each
 * size's median CPU seconds with min..max, the ratio 1M / 100k of the
 * medians, and what n log n predicts for it (about 12) against n^2 (100). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "pinio/safetensors.h"

static char *make_index(size_t n, size_t shards, size_t *len)
{
    size_t cap = 64 + n * 96; /* an entry below is at most 86 bytes */
    char *b = malloc(cap);
    if (!b)
        return NULL;
    size_t k = (size_t)snprintf(b, cap, "{\"metadata\":{\"total_size\":0},\"weight_map\":{");
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        /* a scrambled order of names, shards in no order: sorting has work */
        k += (size_t)snprintf(b + k, cap - k,
                              "%s\"model.layers.%zu.w%llu.weight\":\"model-%06zu-of-%06zu.safetensors\"",
                              i ? "," : "", i, (unsigned long long)(s % 1000),
                              (size_t)(s % shards), shards);
    }
    k += (size_t)snprintf(b + k, cap - k, "}}");
    *len = k;
    return b;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 5;
    if (runs < 1 || runs > 1000) {
        fprintf(stderr, "usage: index_parse [RUNS 1..1000]\n");
        return 2;
    }
    static const size_t n[2] = { 100000, 1000000 }, shards[2] = { 10000, 100000 };
    char *img[2];
    size_t len[2];
    for (int s = 0; s < 2; s++)
        if (!(img[s] = make_index(n[s], shards[s], &len[s]))) {
            fprintf(stderr, "index_parse: out of memory\n");
            return 1;
        }
    double *t[2] = { calloc((size_t)runs, sizeof(double)), calloc((size_t)runs, sizeof(double)) };
    for (int r = 0; r < runs; r++)
        for (int q = 0; q < 2; q++) {
            int s = (r + q) % 2; /* ABBA... order */
            double c0 = bench_cpu_s();
            pinio_st_index *ix = NULL;
            pinio_diag d = { 0 };
            if (pinio_st_index_parse(&ix, img[s], len[s], "m/model.safetensors.index.json", &d)) {
                fprintf(stderr, "index_parse: %s\n", d.msg);
                return 1;
            }
            t[s][r] = bench_cpu_s() - c0;
            if (pinio_st_index_count(ix) != n[s] || pinio_st_index_shard_count(ix) > shards[s]) {
                fprintf(stderr, "index_parse: wrong counts\n");
                return 1;
            }
            pinio_st_index_free(ix);
        }
    double med[2];
    for (int s = 0; s < 2; s++) {
        qsort(t[s], (size_t)runs, sizeof(double), cmp_d);
        med[s] = t[s][runs / 2];
        printf("%7zu entries, %6zu shards, %5.1f MB: median %.3f s CPU (min %.3f, max %.3f), "
               "%.0f ns/entry\n",
               n[s], shards[s], (double)len[s] / 1e6, med[s], t[s][0], t[s][runs - 1],
               med[s] / (double)n[s] * 1e9);
    }
    double nlogn = (double)n[1] * log((double)n[1]) / ((double)n[0] * log((double)n[0]));
    printf("ratio 1M / 100k: %.1f (n log n predicts %.1f, n^2 %.0f)\n", med[1] / med[0], nlogn,
           ((double)n[1] / (double)n[0]) * ((double)n[1] / (double)n[0]));
    for (int s = 0; s < 2; s++) {
        free(img[s]);
        free(t[s]);
    }
    return 0;
}
