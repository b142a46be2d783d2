/* Internal pieces of pinio_bench (src/bench/): the latency histogram
 * (hist.c), the verify pattern and blocks (verify.c), the checksums (csum.c)
 * and the offset distributions (dist.c), exposed for tests. Not installed. */
#ifndef PINIO_SRC_BENCH_INTERNAL_H
#define PINIO_SRC_BENCH_INTERNAL_H

#include <stdbool.h>
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
    double sumsq;      /* for the standard deviation */
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
/* Sample standard deviation of the recorded values (exact, from the sums); 0
 * below two samples. */
double pinio__hist_stdev(const pinio__hist *h);

/* The verify pattern: the 8-byte word at file offset `off` (a multiple of 8)
 * is a hash of (off, seed), so a block written at the wrong offset, a stale
 * block and a flipped bit all differ. `len` and `off` multiples of 8. */
void pinio__bench_pattern_fill(void *buf, size_t len, uint64_t off, uint64_t seed);
/* Offset within buf of the first word that differs, or -1. */
long pinio__bench_pattern_check(const void *buf, size_t len, uint64_t off, uint64_t seed);

/* Verify blocks: the pattern above with a header in front (magic, offset,
 * seed, generation), so that a block found at the wrong place names the
 * offset it was written for. `mode` is a pinio_bench_verify_mode: PATTERN's
 * header is 32 bytes and the payload is checked word by word; CRC32C adds
 * the payload's CRC-32C (40 bytes), SHA256 its digest (64 bytes), and the
 * payload is checked by its sum alone (a mismatch is then located in the
 * pattern, which bench always writes, to name the byte). Each mode has its
 * own magic, so a block written in another mode is named as such. Blocks
 * shorter than the header are pattern only. */
#define PINIO__BLOCK_HDR 32
/* The header's length in mode `mode`. */
size_t pinio__bench_block_hdr(int mode);
typedef struct pinio__block_found {
    bool has_header; /* the block starts with a bench header (of any mode) */
    int mode;        /* the header's mode (has_header) */
    uint64_t off, seed, gen; /* what the header says (has_header) */
    bool sum_bad;    /* the stored checksum does not match the payload */
    long bad_at;     /* offset within the block of the first byte that differs, or -1 */
} pinio__block_found;
void pinio__bench_block_fill(void *buf, size_t len, uint64_t off, uint64_t seed, uint64_t gen,
                             int mode);
/* 0 when the block is the one written for (off, seed) in `mode`, any
 * generation; -1 otherwise, with `found` saying what is there. */
int pinio__bench_block_check(const void *buf, size_t len, uint64_t off, uint64_t seed, int mode,
                             pinio__block_found *found);

/* CRC-32C (Castagnoli) of buf, continuing from `crc` (0 to start):
 * pinio__crc32c(0, "123456789", 9) == 0xE3069283. */
uint32_t pinio__crc32c(uint32_t crc, const void *buf, size_t len);
/* SHA-256 of buf. Returns 0, or -ENOMEM. */
int pinio__sha256(const void *buf, size_t len, uint8_t out[32]);

/* Random offsets other than the default permutation (src/bench/dist.c): a
 * sampler of block indices in [0, n) with the distribution of the options,
 * deterministic for a seed. Hot blocks are not scattered (fio hashes them
 * over the region): block 0 is the most likely for zipf, the middle for
 * normal, so that an offset histogram shows the distribution as named. */
typedef struct pinio__dist {
    int kind;        /* pinio_bench_dist */
    uint64_t n;      /* blocks */
    uint64_t rng;    /* splitmix64 state */
    double p;        /* zipf: theta; pareto: exponent; normal: sigma in blocks */
    /* zipf (rejection-inversion, Hormann & Derflinger 1996) */
    double hx0, hn, s;
    /* zoned: cumulative access per cent and block ranges */
    unsigned nz;
    double zacc[16];
    uint64_t zlo[16], zhi[16];
} pinio__dist;

struct pinio_bench_opts;
/* 0, or -EINVAL for parameters out of range (the message in `why`). */
int pinio__dist_init(pinio__dist *d, const struct pinio_bench_opts *o, uint64_t n, uint64_t seed,
                     const char **why);
uint64_t pinio__dist_next(pinio__dist *d);
uint64_t pinio__rng_next(uint64_t *state);
/* Uniform in [0, n), n > 0. */
uint64_t pinio__rng_below(uint64_t *state, uint64_t n);

#endif
