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

double pinio__hist_stdev(const pinio__hist *h)
{
    if (h->total < 2)
        return 0;
    double n = (double)h->total, mean = h->sum / n;
    double var = (h->sumsq - n * mean * mean) / (n - 1);
    return var > 0 ? sqrt(var) : 0; /* rounding can make a constant series slightly negative */
}
