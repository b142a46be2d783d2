/* The OS memory primitives of pinio (mimalloc's include/mimalloc/prim.h is
 * the model): anonymous mappings, NUMA policy, transparent huge pages,
 * populating, page-location queries and CPU binding to a node.
 *
 * A library-internal interface of the numa layer, for it and the layers below
 * it (the pool, the loader, the benchmark); not installed. Every memory
 * operation of pinio that talks NUMA goes through here, so that:
 *
 *  - of libnuma, only numaif.h's system call wrappers (mbind, move_pages)
 *    are used: numa.h's numa_* layer may print to stderr (numa_error,
 *    numa_warn) or exit, and a library must not.
 *  - every function is thread-safe, keeps no state, never prints, never
 *    aborts, and reports failure as a negative errno (or NULL where it
 *    returns a pointer); errno itself is unspecified afterwards.
 *  - ownership is explicit: a mapping returned here belongs to the caller
 *    and goes back through pinio__prim_unmap() with the same size.
 *
 * Order matters for placement (see numa/pool.c): pinned pages cannot
 * migrate, so map -> bind -> huge -> populate -> (register) -> where. */
#ifndef PINIO_SRC_NUMA_PRIM_H
#define PINIO_SRC_NUMA_PRIM_H

#include <stdbool.h>
#include <stddef.h>

/** The transparent huge page size pinio aligns to (x86-64 and arm64 4K). */
#define PINIO__PRIM_HUGE_SIZE ((size_t)2 << 20)

/**
 * Maps `size` bytes (a multiple of the page size) of private anonymous memory,
 * read-write (or PROT_NONE when `reserve` is true: an address range to fill
 * later with pinio__prim_map_fixed()), MAP_NORESERVE, starting at a multiple
 * of `align` (a power of two >= the page size). Nothing is faulted in.
 * @return the base (owned by the caller: pinio__prim_unmap(base, size)), or
 *         NULL when the kernel refused (ENOMEM); nothing stays mapped then.
 */
void *pinio__prim_map(size_t size, size_t align, bool reserve);

/**
 * Replaces [at, at+size) of a range the caller owns (from pinio__prim_map(),
 * typically reserved) with fresh read-write anonymous memory (MAP_FIXED).
 * @return 0, or -ENOMEM (the old mapping is then unspecified but still the
 *         caller's to unmap).
 */
int pinio__prim_map_fixed(void *at, size_t size);

/** Unmaps [base, base+size). NULL or size 0 is a no-op. Never fails. */
void pinio__prim_unmap(void *base, size_t size);

/**
 * Sets the NUMA policy of [base, base+size) (page-aligned, not yet faulted
 * in) to `node`: MPOL_BIND when `strict` (allocation fails rather than go
 * elsewhere), else MPOL_PREFERRED (falls back when the node is full).
 * @return 0; -EINVAL (node < 0 or >= 1024, bad range); -EPERM (seccomp, no
 *         CAP_SYS_NICE in some containers); -ENOSYS (CONFIG_NUMA=n); other
 *         mbind(2) errors. Callers that can live without placement treat
 *         -EPERM and -ENOSYS as "no policy" and check with pinio__prim_where().
 */
int pinio__prim_bind(void *base, size_t size, int node, bool strict);

/**
 * Asks for transparent huge pages on [base, base+size) (MADV_HUGEPAGE).
 * @return 0, or -EINVAL when THP is not available (kernel or range).
 */
int pinio__prim_huge(void *base, size_t size);

/**
 * Faults every page of [base, base+size) in for writing, under the range's
 * NUMA policy: MADV_POPULATE_WRITE (5.14), else one write per page.
 * @return 0, or -ENOMEM (and other madvise errors) without a SIGBUS.
 */
int pinio__prim_populate(void *base, size_t size);

/**
 * Where the pages at `pages[0..n)` are: `status[i]` receives the node of
 * page i, or a negative errno (-ENOENT: not present). Moves nothing
 * (move_pages(2) with nodes == NULL).
 * @return 0, or a negative errno when the query itself is unavailable
 *         (-ENOSYS, -EPERM); `status` is then unspecified.
 */
int pinio__prim_where(void **pages, size_t n, int *status);

/**
 * Whether the running kernel has NUMA node `node` (/sys/devices/system/node;
 * on CONFIG_NUMA=n kernels only node 0 exists). Reads the real /sys, never a
 * test-redirected one: mbind talks to the real kernel.
 */
bool pinio__prim_node_exists(int node);

/**
 * Restricts the calling thread to the CPUs of `node`
 * (/sys/devices/system/node/nodeN/cpulist, sched_setaffinity(2)).
 * @return 0; -EINVAL (no such node, or it has no CPUs); -EIO (unreadable
 *         cpulist); sched_setaffinity's error.
 */
int pinio__prim_run_on_node(int node);

#endif
