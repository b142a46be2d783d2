/* Random offsets for pinio_bench besides the default permutation: uniform
 * draws (norandommap), zipf, pareto, normal and zoned (contract in
 * bench_internal.h and include/pinio/bench.h).
 *
 * Why a sampler per request and no table: a region of 2^30 4 KiB blocks
 * would need a 2 GiB CDF table per job; zipf by rejection-inversion
 * (Hormann & Derflinger, "Rejection-inversion to generate variates from
 * monotone discrete distributions", 1996; the form of Apache Commons RNG's
 * RejectionInversionZipfSampler) costs a few exp/log per draw and no
 * memory, which keeps a zipf run within reach of a uniform one. */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "pinio/bench.h"
#include "src/bench/bench_internal.h"

uint64_t pinio__rng_next(uint64_t *state)
{
    /* splitmix64: one add and three multiplies, no bad seeds */
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t pinio__rng_below(uint64_t *state, uint64_t n)
{
    /* Lemire's multiply-shift: no division, bias below 2^-64 x n */
    return (uint64_t)(((unsigned __int128)pinio__rng_next(state) * n) >> 64);
}

/* (0, 1): never 0, so that log() is finite. */
static double unit(uint64_t *state)
{
    return ((double)(pinio__rng_next(state) >> 11) + 0.5) * 0x1.0p-53;
}

/* zipf helpers: (e^x - 1)/x and log(1 + x)/x, continuous at 0 */
static double expm1_x(double x) { return fabs(x) > 1e-8 ? expm1(x) / x : 1 + x / 2; }
static double log1p_x(double x) { return fabs(x) > 1e-8 ? log1p(x) / x : 1 - x / 2; }
static double zh(double th, double x) { return exp(-th * log(x)); }
static double zH(double th, double x)
{
    double lx = log(x);
    return expm1_x((1 - th) * lx) * lx;
}
static double zHinv(double th, double x)
{
    double t = x * (1 - th);
    if (t < -1)
        t = -1; /* rounding at the far end */
    return exp(log1p_x(t) * x);
}

int pinio__dist_init(pinio__dist *d, const pinio_bench_opts *o, uint64_t n, uint64_t seed,
                     const char **why)
{
    memset(d, 0, sizeof *d);
    d->kind = (int)o->dist;
    d->n = n;
    d->rng = seed;
    double p = o->dist_param;
    switch (o->dist) {
    case PINIO_BENCH_DIST_UNIFORM:
        return 0;
    case PINIO_BENCH_DIST_ZIPF:
        if (!(p > 0 && p <= 100))
            return *why = "zipf's theta must be above 0 (and at most 100)", -EINVAL;
        d->p = p;
        d->hx0 = zH(p, 1.5) - 1;
        d->hn = zH(p, (double)n + 0.5);
        d->s = 2 - zHinv(p, zH(p, 2.5) - zh(p, 2));
        return 0;
    case PINIO_BENCH_DIST_PARETO:
        if (!(p > 0 && p < 1))
            return *why = "pareto's h must be between 0 and 1", -EINVAL;
        d->p = log(p) / log(1 - p);
        return 0;
    case PINIO_BENCH_DIST_NORMAL:
        if (!(p > 0 && p <= 100))
            return *why = "normal's sigma must be above 0 and at most 100 (per cent)", -EINVAL;
        d->p = p / 100 * (double)n;
        return 0;
    case PINIO_BENCH_DIST_ZONED: {
        if (!o->zones || o->nzones < 1 || o->nzones > 16)
            return *why = "zoned needs 1 to 16 zones", -EINVAL;
        double acc = 0, size = 0;
        for (unsigned i = 0; i < o->nzones; i++) {
            const pinio_bench_zone *z = &o->zones[i];
            if (!(z->access_pct >= 0 && z->size_pct > 0))
                return *why = "a zone needs an access share >= 0 and a size share > 0", -EINVAL;
            uint64_t lo = (uint64_t)(size / 100 * (double)n);
            acc += z->access_pct;
            size += z->size_pct;
            uint64_t hi = (uint64_t)(size / 100 * (double)n + 0.5);
            if (hi > n)
                hi = n;
            if (hi <= lo) /* a zone smaller than a block still has one */
                hi = lo + 1 <= n ? lo + 1 : n, lo = hi - 1;
            d->zacc[i] = acc;
            d->zlo[i] = lo;
            d->zhi[i] = hi;
        }
        if (fabs(acc - 100) > 0.01 || fabs(size - 100) > 0.01)
            return *why = "zoned: the access shares and the size shares must each sum to 100",
                   -EINVAL;
        d->nz = o->nzones;
        return 0;
    }
    }
    return *why = "unknown random distribution", -EINVAL;
}

uint64_t pinio__dist_next(pinio__dist *d)
{
    uint64_t n = d->n;
    switch (d->kind) {
    case PINIO_BENCH_DIST_ZIPF:
        for (;;) {
            double u = d->hn + unit(&d->rng) * (d->hx0 - d->hn);
            double x = zHinv(d->p, u);
            double k = floor(x + 0.5);
            if (k < 1)
                k = 1;
            else if (k > (double)n)
                k = (double)n;
            if (k - x <= d->s || u >= zH(d->p, k + 0.5) - zh(d->p, k))
                return (uint64_t)k - 1;
        }
    case PINIO_BENCH_DIST_PARETO: {
        uint64_t k = (uint64_t)((double)(n - 1) * pow(unit(&d->rng), d->p));
        return k < n ? k : n - 1;
    }
    case PINIO_BENCH_DIST_NORMAL:
        for (;;) {
            /* Box-Muller; draws outside the region are drawn again */
            double z = sqrt(-2 * log(unit(&d->rng))) * cos(2 * M_PI * unit(&d->rng));
            double x = (double)n / 2 + z * d->p;
            if (x >= 0 && x < (double)n)
                return (uint64_t)x;
        }
    case PINIO_BENCH_DIST_ZONED: {
        double u = unit(&d->rng) * 100;
        unsigned i = 0;
        while (i + 1 < d->nz && u >= d->zacc[i])
            i++;
        return d->zlo[i] + pinio__rng_below(&d->rng, d->zhi[i] - d->zlo[i]);
    }
    default:
        return pinio__rng_below(&d->rng, n);
    }
}
