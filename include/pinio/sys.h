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

/** The file system a path lives on (statfs(2)). */
typedef struct pinio_fs {
    char name[16];     /**< "ext4", "xfs", "btrfs", "tmpfs", "nfs", "fuse", ...; "unknown" */
    uint64_t magic;    /**< statfs f_type */
    bool memory;       /**< tmpfs, ramfs, hugetlbfs: the page cache is the storage (nothing to
                            drop, no device to read from) */
    /** NFS, CIFS/SMB, 9p, Ceph, Lustre, GPFS, BeeGFS, OrangeFS, AFS, FUSE: no
     *  local block queue (pinio_load's mapped fill reads these ahead) */
    bool network;
} pinio_fs;

/**
 * Names the file system of `path`.
 * @return 0; -EINVAL (NULL argument) or statfs's negative errno; `*out` is
 *         written only on success.
 */
PINIO_API int pinio_fs_probe(const char *path, pinio_fs *out);

/** The request queue of a block device, as sysfs `block/DISK/queue/` states it. */
typedef struct pinio_block_queue {
    char device[32];             /**< the device named by MAJ:MIN ("nvme0n1p2", "dm-0") */
    char disk[32];               /**< whose queue this is: a partition's disk; for a stacked
                                      device (dm, md) its first member's disk, recursively */
    unsigned members;            /**< members of the stacked device `device` (0: not stacked) */
    char scheduler[32];          /**< the active I/O scheduler ("none", "mq-deadline"); "" unknown */
    int64_t nr_requests;         /**< -1 when unknown (so for every number below) */
    int64_t max_sectors_kb;      /**< the largest request the block layer sends */
    int64_t max_hw_sectors_kb;   /**< the device's own limit */
    int64_t logical_block_size;  /**< bytes: O_DIRECT offset/length granularity */
    int64_t physical_block_size; /**< bytes */
    int64_t read_ahead_kb;
    int rotational;              /**< 1 spinning disk, 0 not, -1 unknown */
    int io_poll;                 /**< 1 poll queues (IORING_SETUP_IOPOLL works), 0 not, -1 unknown */
    char model[64];              /**< `device/model`, trimmed; "" unknown */
} pinio_block_queue;

/**
 * Reads the queue facts of block device `major:minor` under `sysfs_root`
 * (NULL: "/sys"): `dev/block/MAJ:MIN` resolved to its device directory, a
 * partition replaced by its disk, a dm/md device by its first member
 * (`slaves/`, sorted by name), recursively.
 * @return 0; -ENODEV when sysfs has no such block device (tmpfs, overlayfs,
 *         NFS: major 0); -ELOOP for members stacked deeper than 16 levels;
 *         -EINVAL for a NULL `out`. Attributes that cannot be read stay
 *         unknown.
 */
PINIO_API int pinio_block_queue_probe(const char *sysfs_root, unsigned major, unsigned minor,
                                      pinio_block_queue *out);

/** The huge page pool of the default size and transparent huge pages. */
typedef struct pinio_hugepages {
    int64_t total;          /**< HugePages_Total of /proc/meminfo; -1 unknown */
    int64_t free;           /**< HugePages_Free; -1 unknown */
    uint64_t page_bytes;    /**< Hugepagesize; 0 unknown */
    char thp_enabled[16];   /**< "always", "madvise", "never"; "" unknown */
    char thp_defrag[16];    /**< "always", "defer", "defer+madvise", "madvise", "never"; "" */
} pinio_hugepages;

/**
 * Reads the huge page pool and the THP modes.
 * @param root NULL or "/" for the real files; else a folder holding proc/
 *             and sys/ laid out as the real ones (tests).
 * @return 0; -EINVAL for a NULL `out`. What cannot be read stays unknown.
 */
PINIO_API int pinio_hugepages_probe(const char *root, pinio_hugepages *out);

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

/** What `pinio doctor s3://BUCKET/KEY` (or gs://BUCKET/OBJECT,
 *  az://CONTAINER/BLOB) reports: the store as pinio reaches it. No field
 *  ever holds a secret key, a session token, an HMAC secret, an OAuth or
 *  SAS token, or more than the last 4 characters of an access key id. */
typedef struct pinio_s3_probe {
    /** 0, or the configuration's failure (a credential source that is
     *  configured and failed, a malformed file): `config_msg` says which. */
    int config_rc;
    char config_msg[PINIO_DIAG_MSG_MAX];
    /** Which credential source answered. s3://: "environment", "FILE
     *  [SECTION]", "web identity (...)", "assume role (...)",
     *  "credential_process (...)", "container credentials (...)", "EC2
     *  instance metadata (URL)", "AWS_NO_SIGN_REQUEST" or "none" (anonymous).
     *  gs://: "an HMAC key (GOOGLE_HMAC_ACCESS_ID ...LAST4)", "service
     *  account EMAIL's token (GOOGLE_APPLICATION_CREDENTIALS)", "the GCE
     *  metadata server's token" or "no credentials (anonymous)". az://:
     *  "SharedKey of account A (VARIABLE)", "a SAS token (VARIABLE)", "a
     *  workload identity bearer token (...)" or "no credentials (anonymous)".
     *  "" when config_rc is not 0. */
    char source[512];
    char key_hint[8];    /**< s3://: the access key id's last 4 characters; "" when anonymous,
                              and for gs:// and az:// (`source` names the key) */
    int64_t expires;     /**< s3://: when the credentials expire, Unix seconds; 0: never
                              (and for gs:// and az://) */
    char region[64];     /**< s3://'s region; "auto" for gs://, "" for az:// */
    char endpoint[256];  /**< scheme://host[:port]; Azurite's with the account's path */
    char addressing[16]; /**< "auto", "path" or "virtual"; "path" for gs:// and az:// */
    char cainfo[256];    /**< the CA file used ("" libcurl's own) */
    char capath[256];    /**< the CA folder used ("" none) */
    /** 0 when the HEAD of the object succeeded, else its failure (`head_msg`). */
    int head_rc;
    char head_msg[PINIO_DIAG_MSG_MAX];
    uint64_t size;       /**< the object's bytes (head_rc 0) */
    char etag[128];      /**< its ETag as sent, "" when none */
} pinio_s3_probe;

/**
 * Reads the store's configuration the way a load does (the credential chain
 * included: a configured source is asked for its keys) and HEADs the object.
 * @param url "s3://BUCKET/KEY", "gs://BUCKET/OBJECT", "az://CONTAINER/BLOB"
 *        or "https://ACCOUNT.blob.core.windows.net/CONTAINER/BLOB".
 * @param out filled in every case but -EINVAL: config_rc and head_rc say
 *        what failed, each with its message (the HEAD is not tried after
 *        a configuration failure: head_rc is then -ECANCELED).
 * @return 0 when the object is reachable; the first failure's code
 *         otherwise; -EINVAL for a NULL argument or a URL that names no
 *         object of one of those forms (then config_msg says why).
 */
PINIO_API int pinio_s3_probe_object(const char *url, pinio_s3_probe *out);

#ifdef __cplusplus
}
#endif

#endif /* PINIO_SYS_H */
