/* Internal pieces of pinio_bench (src/bench.c): the latency histogram and
 * the verify pattern, exposed for tests. Not installed. */
#ifndef PINIO_SRC_BENCH_INTERNAL_H
#define PINIO_SRC_BENCH_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

/* Log-linear histogram (HdrHistogram's layout, without its generality).
 * Values below 2^(SUB_BITS+1) have a bucket each; above, every power of two
 * [2^m, 2^(m+1)) is cut into 2^SUB_BITS equal buckets of width 2^(m-SUB_BITS).
 * A bucket's width is therefore at most value / 2^SUB_BITS: reporting the
 * bucket's highest value overstates a sample by less than 1/128 (0.79%) and
 * never understates it. 64-bit range in 7424 counters (58 KiB). */
#define PINIO__HIST_SUB_BITS 7
#define PINIO__HIST_SUB (1u << PINIO__HIST_SUB_BITS)
#define PINIO__HIST_BUCKETS ((64 - PINIO__HIST_SUB_BITS + 1) * PINIO__HIST_SUB)

typedef struct pinio__hist {
    uint64_t total;
    uint64_t min, max; /* exact */
    double sum;        /* for the mean */
    uint64_t counts[PINIO__HIST_BUCKETS];
} pinio__hist;

void pinio__hist_reset(pinio__hist *h);
void pinio__hist_record(pinio__hist *h, uint64_t v);
void pinio__hist_merge(pinio__hist *dst, const pinio__hist *src);
/* Bucket index of a value, and the highest value of a bucket. */
unsigned pinio__hist_index(uint64_t v);
uint64_t pinio__hist_high(unsigned index);
/* The value at percentile p (0 < p <= 100): the highest value of the bucket
 * holding the sample of rank ceil(p/100 * total), capped by the exact max;
 * 0 for an empty histogram. Monotone in p. */
uint64_t pinio__hist_percentile(const pinio__hist *h, double p);

/* The verify pattern: the 8-byte word at file offset `off` (a multiple of 8)
 * is a hash of (off, seed), so a block written at the wrong offset, a stale
 * block and a flipped bit all differ. `len` and `off` multiples of 8. */
void pinio__bench_pattern_fill(void *buf, size_t len, uint64_t off, uint64_t seed);
/* Offset within buf of the first word that differs, or -1. */
long pinio__bench_pattern_check(const void *buf, size_t len, uint64_t off, uint64_t seed);

#endif
