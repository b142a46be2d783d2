/**
 * @file sys.h
 * @brief What the running system allows: kernel, memory-locking limits,
 *        transparent huge pages, and page-cache residency of files.
 *
 * These are the facts `pinio doctor` reports and the loader uses to choose
 * between O_DIRECT and buffered reads. Every probe reads /proc, /sys or asks
 * the kernel directly; nothing is cached between calls.
 */
#ifndef PINIO_SYS_H
#define PINIO_SYS_H

#include <stdbool.h>
#include <stdint.h>

#include "pinio/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/** "No limit" for the byte counts in #pinio_sysinfo. */
#define PINIO_UNLIMITED UINT64_MAX

/** A snapshot of the system facts pinio depends on. */
typedef struct pinio_sysinfo {
    char kernel_release[65];   /**< uname -r */
    int kernel_major;          /**< e.g. 6 */
    int kernel_minor;          /**< e.g. 18 */
    int io_uring_disabled;     /**< kernel.io_uring_disabled: 0, 1, 2; -1 when the sysctl is absent */
    uint64_t memlock_soft;     /**< RLIMIT_MEMLOCK soft limit in bytes, or PINIO_UNLIMITED */
    uint64_t memlock_hard;     /**< RLIMIT_MEMLOCK hard limit in bytes, or PINIO_UNLIMITED */
    bool cap_ipc_lock;         /**< CAP_IPC_LOCK is effective: registration is not charged to memlock */
    uint64_t vm_locked;        /**< this process's VmLck, bytes */
    uint64_t vm_pinned;        /**< this process's VmPin, bytes (io_uring registered buffers) */
    uint64_t registrable;      /**< bytes this process may still pin: PINIO_UNLIMITED with
                                    CAP_IPC_LOCK or an unlimited limit, else soft limit minus
                                    VmPin+VmLck (the kernel charges the limit per user, so other
                                    processes of the same user may have taken some already) */
    char thp_enabled[16];      /**< "always", "madvise", "never", or "" when unknown */
    bool has_cachestat;        /**< cachestat(2) exists (Linux 6.5+) */
    long page_size;            /**< bytes */
    int cpus_online;           /**< online CPUs */
    uint8_t reserved[64];      /**< zero; room to grow without breaking the ABI */
} pinio_sysinfo;

/**
 * Fills `*out` with the current facts. Fields that cannot be read keep their
 * "unknown" value (empty string, -1, false, 0) rather than failing the call.
 * @return 0, or -EINVAL for a NULL `out`.
 */
PINIO_API int pinio_sys_probe(pinio_sysinfo *out);

/** Memory a process may still fill before the OOM killer acts. */
typedef struct pinio_memavail {
    uint64_t bytes;            /**< the smaller of the two below: what to compare with */
    uint64_t meminfo;          /**< /proc/meminfo MemAvailable (bytes); PINIO_UNLIMITED if unknown */
    uint64_t cgroup;           /**< the memory cgroup's limit minus its usage, counting its
                                    inactive page cache as free; PINIO_UNLIMITED without a limit */
    uint64_t cgroup_limit;     /**< the limit itself (the tightest up the hierarchy), or
                                    PINIO_UNLIMITED */
    const char *source;        /**< which one bounds `bytes`: "MemAvailable", "cgroup v2
                                    memory.max" or "cgroup v1 memory.limit_in_bytes"
                                    (static strings) */
} pinio_memavail;

/**
 * How much memory may still be faulted in: /proc/meminfo's MemAvailable and
 * the limit of the caller's memory cgroup (v2 memory.max and memory.current
 * up the hierarchy, or v1 memory.limit_in_bytes and memory.usage_in_bytes),
 * the page cache the cgroup could reclaim counted as free. Compare before
 * faulting a large buffer in, so that a checkpoint larger than the memory
 * is an error and not the OOM killer.
 * @param root  NULL or "/" for the real files; else a folder holding
 *              proc/ and sys/fs/cgroup/ laid out as the real ones (tests).
 * @return 0; -EINVAL for a NULL `out`. Files that cannot be read count as
 *         no limit.
 */
PINIO_API int pinio_mem_available(const char *root, pinio_memavail *out);

/** How a residency figure was obtained. */
typedef enum pinio_residency_method {
    PINIO_RESIDENCY_CACHESTAT = 1, /**< cachestat(2): exact, no mapping */
    PINIO_RESIDENCY_MINCORE = 2,   /**< mmap + mincore(2): exact for the mapped range */
} pinio_residency_method;

/** Page-cache residency of a byte range of a file. */
typedef struct pinio_residency {
    uint64_t range_bytes;          /**< bytes of the range that lie inside the file */
    uint64_t cached_bytes;         /**< of those, bytes whose pages are in the page cache */
    pinio_residency_method method; /**< which probe answered */
} pinio_residency;

/**
 * Measures how much of `[offset, offset + len)` of the open file `fd` is in
 * the page cache (`len` 0 = to the end of the file). Uses cachestat(2) when
 * the kernel has it, else mmap + mincore in bounded windows (nothing is
 * faulted in either way).
 * @return 0; -EBADF, -EINVAL (not a regular file), or an mmap error. `*out`
 *         is written only on success.
 */
PINIO_API int pinio_file_residency(int fd, uint64_t offset, uint64_t len, pinio_residency *out);

/**
 * Asks the kernel to drop the file's clean cached pages
 * (posix_fadvise(POSIX_FADV_DONTNEED)), so that the next read is cold.
 * Needs no privilege; dirty pages are written back first (fdatasync).
 * @return 0 or a negative errno.
 */
PINIO_API int pinio_file_drop_cache(int fd);

#ifdef __cplusplus
}
#endif

#endif /* PINIO_SYS_H */
