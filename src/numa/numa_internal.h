/* Internal helpers of numa/ shared by topology.c and pool.c and reachable by
 * the white-box tests in tests/numa/. Not installed. */
#ifndef PINIO_NUMA_INTERNAL_H
#define PINIO_NUMA_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "pinio/common.h"
#include "pinio/pool.h"

/**
 * Parses a sysfs cpulist ("0-3,8-11", "5", "" and a trailing newline are
 * valid). With `mask` non-NULL, sets bit c of the `nwords`-word mask for every
 * listed CPU (the mask is cleared first).
 * @return the number of CPUs listed (a CPU listed twice counts once when a
 *         mask is given, otherwise every range is summed); -EINVAL on syntax
 *         errors (empty element, reversed range, junk); -ERANGE when a CPU
 *         does not fit in the mask.
 */
int pinio__cpulist_parse(const char *s, uint64_t *mask, size_t nwords);

/** True when the cpulist `s` is well formed and lists `cpu`. */
int pinio__cpulist_contains(const char *s, unsigned cpu);


/**
 * Like pinio_pool_alloc() (4096-aligned), but `len` may exceed 1 GiB: the
 * region is one contiguous virtual range made of adjacent slabs of at most
 * PINIO_POOL_SLAB_MAX bytes, the first starting at the region (so a read
 * that does not cross a multiple of PINIO_POOL_SLAB_MAX from the region's
 * start lies in one registered buffer). `info` describes the first slab;
 * its `reg` is PINIO_POOL_REG_OK only when every slab is registered.
 * The view holds a reference on every slab; releasing it frees them all.
 */
int pinio__pool_alloc_contig(pinio_pool *p, size_t len, pinio_view *out,
                             pinio_pool_region_info *info);

/**
 * Re-runs the placement check on every live slab overlapping [addr, addr+len)
 * (for memory that was not faulted in when its slab was created) and fills
 * `info` for the slab holding `addr`; `info->verify` is OK only when every
 * slab of the range is.
 * @return 0, -ENOENT (no live slab holds `addr`), -EINVAL.
 */
int pinio__pool_verify_range(pinio_pool *p, const void *addr, size_t len,
                             pinio_pool_region_info *info);

#endif
