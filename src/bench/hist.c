/* The latency histogram of pinio_bench (layout in bench_internal.h) and the
 * verify pattern. Recording is a count-leading-zeros, a shift and an add:
 * cheap enough to time every request at millions of IOPS. */
#include <math.h>
#include <string.h>

#include "bench_internal.h"
#include "pinio/bench.h"

void pinio__hist_reset(pinio__hist *h)
{
    memset(h, 0, sizeof *h);
    h->min = UINT64_MAX;
}

unsigned pinio__hist_index(uint64_t v)
{
    if (v < 2 * PINIO__HIST_SUB)
        return (unsigned)v;
    unsigned m = 63u - (unsigned)__builtin_clzll(v); /* v in [2^m, 2^(m+1)), m > SUB_BITS */
    unsigned shift = m - PINIO__HIST_SUB_BITS;
    /* v >> shift is in [SUB, 2*SUB): the sub-bucket within octave m. */
    return (shift + 1) * PINIO__HIST_SUB + (unsigned)(v >> shift) - PINIO__HIST_SUB;
}

uint64_t pinio__hist_high(unsigned index)
{
    if (index < 2 * PINIO__HIST_SUB)
        return index;
    unsigned shift = index / PINIO__HIST_SUB - 1;
    uint64_t sub = (uint64_t)(index % PINIO__HIST_SUB) + PINIO__HIST_SUB;
    uint64_t lo = sub << shift;
    return lo + ((1ull << shift) - 1); /* does not wrap: the top bucket ends at 2^64-1 */
}

void pinio__hist_record(pinio__hist *h, uint64_t v)
{
    h->counts[pinio__hist_index(v)]++;
    h->total++;
    h->sum += (double)v;
    h->sumsq += (double)v * (double)v;
    if (v < h->min)
        h->min = v;
    if (v > h->max)
        h->max = v;
}

void pinio__hist_merge(pinio__hist *dst, const pinio__hist *src)
{
    for (unsigned i = 0; i < PINIO__HIST_BUCKETS; i++)
        dst->counts[i] += src->counts[i];
    dst->total += src->total;
    dst->sum += src->sum;
    dst->sumsq += src->sumsq;
    if (src->min < dst->min)
        dst->min = src->min;
    if (src->max > dst->max)
        dst->max = src->max;
}

uint64_t pinio__hist_percentile(const pinio__hist *h, double p)
{
    if (!h->total)
        return 0;
    /* rank = ceil(p% of total), without libm. */
    double x = p / 100.0 * (double)h->total;
    uint64_t rank = x <= 1.0 ? 1 : x >= (double)h->total ? h->total : (uint64_t)x;
    if ((double)rank < x && rank < h->total)
        rank++;
    uint64_t seen = 0;
    for (unsigned i = 0; i < PINIO__HIST_BUCKETS; i++) {
        seen += h->counts[i];
        if (seen >= rank) {
            uint64_t hi = pinio__hist_high(i);
            return hi < h->max ? hi : h->max;
        }
    }
    return h->max;
}

static inline uint64_t mix64(uint64_t x)
{
    /* splitmix64's finalizer: every input bit affects every output bit. */
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

void pinio__bench_pattern_fill(void *buf, size_t len, uint64_t off, uint64_t seed)
{
    uint64_t *w = buf;
    uint64_t k = seed * 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < len / 8; i++)
        w[i] = mix64((off + 8 * i) ^ k);
}

long pinio__bench_pattern_check(const void *buf, size_t len, uint64_t off, uint64_t seed)
{
    const uint64_t *w = buf;
    uint64_t k = seed * 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < len / 8; i++)
        if (w[i] != mix64((off + 8 * i) ^ k))
            return (long)(8 * i);
    return -1;
}

double pinio__hist_stdev(const pinio__hist *h)
{
    if (h->total < 2)
        return 0;
    double n = (double)h->total, mean = h->sum / n;
    double var = (h->sumsq - n * mean * mean) / (n - 1);
    return var > 0 ? sqrt(var) : 0; /* rounding can make a constant series slightly negative */
}

/* The block header: the pattern's first bytes replaced by what names the
 * block, so that a block found at the wrong place says where it belongs
 * instead of only "differs". One magic per mode ("PINIIVB1", "PINIIVC1",
 * "PINIIVS1" little-endian): a verify-only run in the wrong mode says so
 * instead of reporting every block corrupt. */
static const uint64_t block_magic[3] = {
    0x31425649494e4950ull, 0x31435649494e4950ull, 0x31535649494e4950ull,
};

size_t pinio__bench_block_hdr(int mode)
{
    return mode == PINIO_BENCH_VERIFY_SHA256   ? 64
           : mode == PINIO_BENCH_VERIFY_CRC32C ? 40
                                               : PINIO__BLOCK_HDR;
}

/* The payload's sum in mode `mode` into sum[32] (zero-padded); false when
 * SHA-256 could not run. */
static bool payload_sum(const uint8_t *p, size_t n, int mode, uint8_t sum[32])
{
    memset(sum, 0, 32);
    if (mode == PINIO_BENCH_VERIFY_CRC32C) {
        uint32_t c = pinio__crc32c(0, p, n);
        memcpy(sum, &c, sizeof c);
        return true;
    }
    return pinio__sha256(p, n, sum) == 0;
}

void pinio__bench_block_fill(void *buf, size_t len, uint64_t off, uint64_t seed, uint64_t gen,
                             int mode)
{
    pinio__bench_pattern_fill(buf, len, off, seed);
    size_t h = pinio__bench_block_hdr(mode);
    if (len < h)
        return;
    uint64_t *w = buf;
    w[0] = block_magic[mode];
    w[1] = off;
    w[2] = seed;
    w[3] = gen;
    if (mode != PINIO_BENCH_VERIFY_PATTERN) {
        uint8_t sum[32];
        /* A failed SHA-256 (no memory) leaves a zero digest: the read-back
         * then reports the block, never a silent pass. */
        payload_sum((uint8_t *)buf + h, len - h, mode, sum);
        memcpy((uint8_t *)buf + 32, sum, h - 32);
    }
}

int pinio__bench_block_check(const void *buf, size_t len, uint64_t off, uint64_t seed, int mode,
                             pinio__block_found *found)
{
    const uint64_t *w = buf;
    size_t h = pinio__bench_block_hdr(mode);
    memset(found, 0, sizeof *found);
    found->bad_at = -1;
    found->mode = -1;
    if (len >= PINIO__BLOCK_HDR) {
        for (int m = 0; m < 3; m++)
            if (w[0] == block_magic[m])
                found->mode = m;
        if (found->mode < 0) {
            found->bad_at = 0;
            return -1;
        }
        found->has_header = true;
        found->off = w[1];
        found->seed = w[2];
        found->gen = w[3];
        if (w[1] != off || w[2] != seed) {
            found->bad_at = 8;
            return -1;
        }
        if (found->mode != mode) {
            found->bad_at = 0;
            return -1;
        }
    }
    if (len < h)
        h = 0; /* pattern only */
    else if (mode != PINIO_BENCH_VERIFY_PATTERN) {
        uint8_t sum[32];
        bool ok = payload_sum((const uint8_t *)buf + h, len - h, mode, sum) &&
                  !memcmp(sum, (const uint8_t *)buf + 32, h - 32);
        if (ok)
            return 0;
        found->sum_bad = true;
    }
    long bad = pinio__bench_pattern_check((const uint8_t *)buf + h, len - h, off + h, seed);
    if (bad < 0 && !found->sum_bad)
        return 0;
    /* sum_bad with an intact payload: the stored sum itself was hit. */
    found->bad_at = bad < 0 ? 32 : (long)h + bad;
    return -1;
}
