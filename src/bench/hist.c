/* The latency histogram of pinio_bench (layout in bench_internal.h); the
 * verify pattern is verify.c's. Recording is a count-leading-zeros, a shift and an add:
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

/* The counts-only walk, shared with the public entry below: a histogram
 * summed over MPI ranks has no pinio__hist around it. */
static uint64_t percentile_of(const uint64_t *counts, uint64_t total, uint64_t max, double p)
{
    if (!total)
        return 0;
    /* rank = ceil(p% of total), without libm. */
    double x = p / 100.0 * (double)total;
    uint64_t rank = x <= 1.0 ? 1 : x >= (double)total ? total : (uint64_t)x;
    if ((double)rank < x && rank < total)
        rank++;
    uint64_t seen = 0;
    for (unsigned i = 0; i < PINIO__HIST_BUCKETS; i++) {
        seen += counts[i];
        if (seen >= rank) {
            uint64_t hi = pinio__hist_high(i);
            return hi < max ? hi : max;
        }
    }
    return max;
}

uint64_t pinio__hist_percentile(const pinio__hist *h, double p)
{
    return percentile_of(h->counts, h->total, h->max, p);
}

_Static_assert(PINIO_BENCH_HIST_BUCKETS == PINIO__HIST_BUCKETS, "bench.h's bucket count");

uint64_t pinio_bench_hist_high(unsigned i)
{
    return i < PINIO__HIST_BUCKETS ? pinio__hist_high(i) : UINT64_MAX;
}

uint64_t pinio_bench_hist_percentile(const uint64_t *counts, uint64_t max, double p)
{
    uint64_t total = 0;
    for (unsigned i = 0; counts && i < PINIO__HIST_BUCKETS; i++)
        total += counts[i];
    return counts ? percentile_of(counts, total, max, p) : 0;
}

double pinio__hist_stdev(const pinio__hist *h)
{
    if (h->total < 2)
        return 0;
    double n = (double)h->total, mean = h->sum / n;
    double var = (h->sumsq - n * mean * mean) / (n - 1);
    return var > 0 ? sqrt(var) : 0; /* rounding can make a constant series slightly negative */
}
