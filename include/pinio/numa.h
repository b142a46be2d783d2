/**
 * @file numa.h
 * @brief NUMA topology from sysfs: node count, node of a CPU, of a file's
 *        block device, of a PCI device.
 *
 * Everything is read from sysfs on demand, so answers follow hot-plug and
 * tests can describe any machine by pointing the sysfs root at a fake tree
 * (#pinio_topo_opts.sysfs_root or the environment variable
 * `PINIO_SYSFS_ROOT`).
 *
 * Node numbers: a node is >= 0. #PINIO_NODE_UNKNOWN (-1) means "sysfs does not
 * say" (no block device behind the file, firmware gave no proximity, stacked
 * devices spread over several nodes). The lookups report it through an out
 * parameter, never as a return code, so that it cannot be mistaken for -EPERM.
 *
 * Threads: a #pinio_topo is immutable after pinio_topo_open(); every lookup
 * may run concurrently on the same handle.
 */
#ifndef PINIO_NUMA_H
#define PINIO_NUMA_H

#include <stddef.h>
#include <stdint.h>

#include "pinio/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/** "Node not known" (sysfs `numa_node` of -1, no block device, mixed slaves). */
#define PINIO_NODE_UNKNOWN (-1)

/** Environment variable that redirects the sysfs root when no option sets it. */
#define PINIO_SYSFS_ROOT_ENV "PINIO_SYSFS_ROOT"

/** Opaque topology handle: where sysfs lives. */
typedef struct pinio_topo pinio_topo;

/** Options for pinio_topo_open(); fill with pinio_topo_opts_default() first. */
typedef struct pinio_topo_opts {
    size_t struct_size; /**< sizeof(pinio_topo_opts), set by pinio_topo_opts_default() */
    /**
     * Directory that plays the role of `/sys`. NULL: `$PINIO_SYSFS_ROOT` if set
     * and non-empty, else "/sys". The string is copied.
     */
    const char *sysfs_root;
} pinio_topo_opts;

/** Sets every field of `opts` to its default (sysfs_root NULL), struct_size included. */
static inline void pinio_topo_opts_default(pinio_topo_opts *opts);

/**
 * What pinio_topo_opts_default() calls: fills the first `size` bytes of `*opts`
 * with the defaults (struct_size = `size`; fields past this library's
 * struct stay zero). Inline callers pass their header's sizeof, so a
 * program built against an older, smaller struct is never written past.
 */
PINIO_API void pinio_topo_opts_init(pinio_topo_opts *opts, size_t size);

static inline void pinio_topo_opts_default(pinio_topo_opts *opts)
{
    pinio_topo_opts_init(opts, sizeof(*opts));
}

/**
 * Opens a topology handle.
 *
 * @param opts NULL for the defaults.
 * @return 0 with `*out` owning a new handle (free it with pinio_topo_close());
 *         -EINVAL (NULL out, struct_size not from pinio_topo_opts_default(), empty or relative root),
 *         -ENAMETOOLONG, -ENOMEM; on failure `*out` is untouched.
 *         The root need not exist: lookups then answer "unknown".
 */
PINIO_API int pinio_topo_open(pinio_topo **out, const pinio_topo_opts *opts);

/** Frees a handle from pinio_topo_open(). NULL is allowed. */
PINIO_API void pinio_topo_close(pinio_topo *topo);

/**
 * The sysfs root in use ("/sys" or the redirected path).
 * @param topo NULL means the default root: the value of `$PINIO_SYSFS_ROOT`
 *        (valid until the environment changes) or the static string "/sys".
 */
PINIO_API const char *pinio_topo_sysfs_root(const pinio_topo *topo);

/**
 * Number of NUMA nodes: one more than the highest `nodeN` directory under
 * `devices/system/node/` (node ids may have holes). A kernel without NUMA
 * support has no such directory: the answer is then 1.
 * @param topo NULL for the default root (every function below accepts NULL too).
 * @return the count (>= 1); never fails.
 */
PINIO_API int pinio_topo_node_count(const pinio_topo *topo);

/**
 * The node whose `cpulist` contains `cpu`.
 * @param[out] node the node, or #PINIO_NODE_UNKNOWN when no node lists it.
 * @return 0, or -EINVAL (cpu < 0, NULL node); `*node` is set only on success.
 */
PINIO_API int pinio_topo_node_of_cpu(const pinio_topo *topo, int cpu, int *node);

/**
 * The CPUs of `node`, from `devices/system/node/nodeN/cpulist`, as a bitmask:
 * bit (c % 64) of `mask[c / 64]` is set for CPU c.
 * @return the number of CPUs (0 for a memory-only node); -ENOENT when the
 *         node does not exist; -ERANGE when a CPU does not fit in `nwords`
 *         words; -EINVAL for a malformed cpulist or bad arguments. `mask` is
 *         fully written on success and unspecified on failure.
 */
PINIO_API int pinio_topo_node_cpus(const pinio_topo *topo, int node, uint64_t *mask,
                                   size_t nwords);

/**
 * The node of the calling thread (the CPU it runs on now, per getcpu(2),
 * mapped through the cpulists of this topology). The answer may be stale as
 * soon as it returns unless the thread is pinned.
 * @param[out] node the node, or #PINIO_NODE_UNKNOWN.
 * @return 0, or a negative errno from getcpu(2).
 */
PINIO_API int pinio_topo_current_node(const pinio_topo *topo, int *node);

/**
 * The node of the block device `major:minor`: `dev/block/MAJ:MIN` resolved to
 * its device directory; a partition is replaced by its disk; a stacked device
 * (dm, md: `slaves/`; NVMe multipath: `multipath/`) is the common node of all
 * its members, or unknown when they differ or any is unknown; otherwise the
 * first `numa_node` file found in the device directory, its `device/` link or
 * any parent directory (the PCI function), as sysfs states it (-1 on
 * firmware without proximity information, e.g. most VMs).
 *
 * @param[out] node the node or #PINIO_NODE_UNKNOWN (also when the device is
 *        not in sysfs, e.g. major 0: tmpfs, btrfs subvolumes, overlayfs).
 * @param diag optional; names the sysfs path on failure.
 * @return 0; -EINVAL for bad arguments; -EIO/-ENOMEM on read or allocation
 *         failures; -ELOOP when devices stack deeper than 16 levels.
 */
PINIO_API int pinio_topo_node_of_dev(const pinio_topo *topo, unsigned major, unsigned minor,
                                     int *node, pinio_diag *diag);

/**
 * The node of the device holding the file `path` (stat(2)'s st_dev; for a
 * block special file, the device itself, st_rdev). See pinio_topo_node_of_dev().
 * @return 0 with `*node` set; a negative errno from stat(2) (diag names the path);
 *         the errors of pinio_topo_node_of_dev().
 */
PINIO_API int pinio_topo_node_of_file(const pinio_topo *topo, const char *path, int *node,
                                      pinio_diag *diag);

/** As pinio_topo_node_of_file() for an open descriptor (fstat(2)): the same
 *  errors, with fstat's errno instead of stat's. */
PINIO_API int pinio_topo_node_of_fd(const pinio_topo *topo, int fd, int *node,
                                    pinio_diag *diag);

/**
 * The node of a PCI device from `bus/pci/devices/<id>/numa_node`.
 * Accepted spellings: "0000:3b:00.0", "3b:00.0" (domain 0), the CUDA/NVML
 * "00000000:3B:00.0" (8-digit domain) in any letter case.
 * @param[out] node the node, or #PINIO_NODE_UNKNOWN when sysfs says -1.
 * @return 0; -EINVAL for a malformed id; -ENODEV when no such device is in
 *         sysfs (diag names the path); -EIO for an unreadable `numa_node`.
 */
PINIO_API int pinio_topo_node_of_pci(const pinio_topo *topo, const char *bus_id, int *node,
                                     pinio_diag *diag);

#ifdef __cplusplus
}
#endif

#endif /* PINIO_NUMA_H */
