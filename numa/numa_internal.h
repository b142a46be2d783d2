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

#endif
