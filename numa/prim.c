/* The OS memory primitives (contract in numa/prim.h). The NUMA policy
 * calls are libnuma's numaif.h wrappers (mbind, move_pages): thin system
 * calls that keep no state and print nothing. numa.h's numa_* layer stays
 * out: it prints to stderr (numa_error, numa_warn) and can exit(), and a
 * library must do neither. */
#include <errno.h>
#include <limits.h>
#include <numaif.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "numa/numa_internal.h"
#include "numa/prim.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

/* 1024 bits: the kernel's largest MAX_NUMNODES (NODES_SHIFT 10). */
#define MAX_NODES 1024

void *pinio__prim_map(size_t size, size_t align, bool reserve)
{
    /* Over-map by `align`, then trim both ends: mmap only promises pages. */
    size_t len = size + align;
    uint8_t *m = mmap(NULL, len, reserve ? PROT_NONE : PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    uint8_t *base = (uint8_t *)(((uintptr_t)m + align - 1) & ~(uintptr_t)(align - 1));
    if (base > m)
        munmap(m, (size_t)(base - m));
    size_t tail = (size_t)((m + len) - (base + size));
    if (tail)
        munmap(base + size, tail);
    return base;
}

int pinio__prim_map_fixed(void *at, size_t size)
{
    void *m = mmap(at, size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    return m == MAP_FAILED ? -ENOMEM : 0;
}

void pinio__prim_unmap(void *base, size_t size)
{
    if (base && size)
        munmap(base, size);
}

int pinio__prim_bind(void *base, size_t size, int node, bool strict)
{
    const size_t bits = sizeof(unsigned long) * CHAR_BIT;
    unsigned long mask[MAX_NODES / (sizeof(unsigned long) * CHAR_BIT)];
    if (node < 0 || (size_t)node >= MAX_NODES)
        return -EINVAL;
    memset(mask, 0, sizeof(mask));
    mask[(size_t)node / bits] |= 1UL << ((size_t)node % bits);
    /* The kernel reads maxnode - 1 bits (get_nodes() decrements it), hence +1. */
    unsigned long maxnode = (unsigned long)MAX_NODES + 1;
    if (mbind(base, size, strict ? MPOL_BIND : MPOL_PREFERRED, mask, maxnode, 0) != 0)
        return -errno;
    return 0;
}

int pinio__prim_huge(void *base, size_t size)
{
    return madvise(base, size, MADV_HUGEPAGE) == 0 ? 0 : -errno;
}

int pinio__prim_populate(void *base, size_t size)
{
    /* MADV_POPULATE_WRITE (5.14) faults every page in one call, under the
     * VMA policy, and reports -ENOMEM instead of a SIGBUS. */
    if (madvise(base, size, MADV_POPULATE_WRITE) == 0)
        return 0;
    if (errno != EINVAL)
        return -errno;
    long page = sysconf(_SC_PAGESIZE);
    for (size_t off = 0; off < size; off += (size_t)page)
        ((volatile uint8_t *)base)[off] = 0;
    return 0;
}

int pinio__prim_where(void **pages, size_t n, int *status)
{
    /* nodes == NULL: move_pages only reports where each page is (or
     * -ENOENT when it is not present). It moves nothing. */
    if (move_pages(0, (unsigned long)n, pages, NULL, status, 0) != 0)
        return -errno;
    return 0;
}

bool pinio__prim_node_exists(int node)
{
    if (node < 0)
        return false;
    char path[64];
    snprintf(path, sizeof(path), "/sys/devices/system/node/node%d", node);
    struct stat st;
    if (stat(path, &st) == 0)
        return true;
    /* CONFIG_NUMA=n: no node directories, node 0 only. */
    return node == 0 && stat("/sys/devices/system/node", &st) != 0;
}

int pinio__prim_run_on_node(int node)
{
    if (!pinio__prim_node_exists(node))
        return -EINVAL;
    char path[64], list[4096];
    snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/cpulist", node);
    FILE *f = fopen(path, "re");
    if (!f) /* CONFIG_NUMA=n node 0: every CPU */
        return node == 0 ? 0 : -EIO;
    size_t got = fread(list, 1, sizeof(list) - 1, f);
    int rerr = ferror(f);
    fclose(f);
    if (rerr)
        return -EIO;
    list[got] = 0;
    uint64_t mask[CPU_SETSIZE / 64];
    int n = pinio__cpulist_parse(list, mask, sizeof(mask) / sizeof(mask[0]));
    if (n < 0)
        return n == -ERANGE ? -ERANGE : -EIO;
    if (n == 0)
        return -EINVAL; /* a memory-only node */
    cpu_set_t set;
    CPU_ZERO(&set);
    for (unsigned c = 0; c < CPU_SETSIZE; c++)
        if (mask[c / 64] >> (c % 64) & 1)
            CPU_SET(c, &set);
    return sched_setaffinity(0, sizeof(set), &set) ? -errno : 0;
}
