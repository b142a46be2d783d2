/**
 * @file ring.h
 * @brief pinio_ring: the io_uring O_DIRECT read engine and its fallback ladder.
 *
 * A ring reads byte ranges of files into caller memory. It prefers, in this
 * order (the *fallback ladder*, probed once per ring and per file, the outcome
 * reported by pinio_ring_get_info() / pinio_ring_file_get_info()):
 *
 *  1. registered + O_DIRECT: READ_FIXED into memory registered with
 *     pinio_ring_register_region() (a pinned pool), O_DIRECT file descriptor;
 *  2. unregistered O_DIRECT: plain READ (registration refused: RLIMIT_MEMLOCK,
 *     CAP_IPC_LOCK, or the destination is simply not registered memory);
 *  3. buffered io_uring: the filesystem refused O_DIRECT (EINVAL at open or at
 *     the first read, e.g. some tmpfs/FUSE), or the policy said so;
 *  4. a pread thread pool: io_uring itself is unavailable (ENOSYS/EPERM from
 *     io_uring_setup: seccomp, `kernel.io_uring_disabled`, old kernel).
 *
 * Any (offset, length) works with O_DIRECT: the engine widens each request to
 * the file's DIO alignment, reads the unaligned head/tail blocks (or everything,
 * when the destination itself is misaligned) through an aligned staging area,
 * and places exactly the wanted bytes at the caller's address. When the
 * destination, offset and length are aligned the data lands straight in the
 * destination (no copy).
 *
 * Threads: a ring and its files are used by one thread at a time, and when the
 * ring was created with IORING_SETUP_SINGLE_ISSUER (the default when the kernel
 * accepts it) by the thread that created it. Create one ring per I/O thread.
 * pinio_ring_read_bulk(), pinio_ring_read() and pinio_ring_file_open() called
 * from another thread on such a ring fail with -EPERM and a diagnostic that
 * says so, before anything reaches the kernel (which would answer -EEXIST
 * with the reads already queued).
 * The one exception is pinio_ring_unregister_region() (and the registrar's
 * `unreg`), which any thread may call at any time: a pool drops a slab on the
 * thread that releases its last view. Off the ring's thread the kernel
 * refuses io_uring_register under SINGLE_ISSUER (-EEXIST, verified on 6.18),
 * so the region leaves the address lookup at once and the kernel slot is
 * cleared by the ring's thread at its next read, registration or destroy.
 *
 * Fault injection (tests): when the environment variable `PINIO_FAULTS` (or
 * pinio_ring_opts::faults) is set, the ring parses it once at creation and
 * rewrites results at the single place where completions are consumed. The
 * grammar is a comma-separated list of items:
 *
 *   - `eio@N`, `eio@NxK`     -EIO for the N-th completion (1-based, counted per
 *                            ring) and the K-1 following ones (K defaults to 1)
 *   - `short@N[xK]`          a short, non-zero byte count (seeded) instead of a
 *                            full read
 *   - `eagain@N[xK]`         -EAGAIN (the engine must retry)
 *   - `eintr@N[xK]`          -EINTR  (the engine must retry)
 *   - `corrupt@N[xK]`        one byte of the data read flipped, result kept:
 *                            silent corruption, which only a checksum catches
 *                            (what pinio_load's verify is tested against)
 *   - `dioinval`             -EINVAL for the first O_DIRECT read of every file
 *                            (as a filesystem that refuses O_DIRECT does)
 *   - `regnomem`             -ENOMEM from every buffer registration
 *   - `sparseinval`          -EINVAL when the sparse buffer table is set up (as
 *                            a kernel before 5.19): no buffer registration
 *   - `setupinval:F`         -EINVAL from io_uring_setup whenever the flags
 *                            contain F, one of `single`, `defer`, `coop`,
 *                            `taskrun`, `submitall`, `cqsize` (may repeat)
 *   - `setupnosys`           -ENOSYS from io_uring_setup (io_uring blocked)
 *   - `trimnotsup`           pinio_bench's trim probe fails with -EOPNOTSUPP (as
 *                            a file system that cannot punch holes, or a
 *                            device without discard)
 *   - `nodiscardcmd`         pinio_bench finds no io_uring block discard
 *                            command (as a kernel before 6.12): BLKDISCARD
 *   - `stagecorrupt@N`       the file sink (pinio stage) flips one byte of the
 *                            N-th file it copies on disk, after checksumming
 *                            it: what only its read back (--verify) catches
 *   - `stagerename@N`        the file sink's N-th rename while it publishes
 *                            fails with -EIO (a failure half way through)
 *   - `stagewritehold`       the file sink's first write from a reused slot is
 *                            held until a read lands that the stream fetched
 *                            meanwhile; a stream that waits for that write
 *                            instead fails (its reads and writes take turns)
 *   - `seed=S`, `rate=P`     with probability P (0..1) per completion, a random
 *                            recoverable fault (short or -EAGAIN), drawn from a
 *                            PRNG seeded with S (default 1): deterministic
 *
 * Unknown items make pinio_ring_create() fail with -EINVAL and a diagnostic.
 * When unset the hook costs one predictable branch per completion.
 *
 * Errors: negative errno codes (see common.h); functions taking a
 * `pinio_diag *` fill it (it may be NULL) with the path and file offset.
 */
#ifndef PINIO_RING_H
#define PINIO_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinio/common.h"
#include "pinio/pool.h"

#ifdef __cplusplus
extern "C" {
#endif

/** An io_uring read engine (or its pread fallback). Opaque. */
typedef struct pinio_ring pinio_ring;

/** A file opened for a ring: O_DIRECT and buffered descriptors, alignment, size. Opaque. */
typedef struct pinio_ring_file pinio_ring_file;

/** The I/O path a ring (or a file of a ring) uses. */
typedef enum pinio_backend {
    PINIO_BACKEND_AUTO = 0,       /**< options only: take the best rung that works */
    PINIO_BACKEND_FIXED_DIRECT,   /**< READ_FIXED into registered memory, O_DIRECT */
    PINIO_BACKEND_DIRECT,         /**< io_uring READ, O_DIRECT, nothing registered */
    PINIO_BACKEND_BUFFERED,       /**< io_uring READ through the page cache */
    PINIO_BACKEND_PREAD,          /**< a pool of threads calling pread(2) */
} pinio_backend;

/** O_DIRECT policy. */
typedef enum pinio_direct_policy {
    PINIO_DIRECT_AUTO = 0, /**< O_DIRECT where the file system accepts it, else buffered */
    PINIO_DIRECT_ON,       /**< O_DIRECT or fail with -EINVAL at open */
    PINIO_DIRECT_OFF,      /**< always buffered */
} pinio_direct_policy;

/** Opt-in ring setup flags (pinio_ring_opts::flags). */
enum pinio_ring_flags {
    /** IORING_SETUP_SQPOLL: a kernel thread polls the SQ (burns a core; excludes COOP/DEFER). */
    PINIO_RING_SQPOLL = 1u << 0,
    /** IORING_SETUP_IOPOLL: busy-poll completions (needs O_DIRECT and NVMe poll queues). */
    PINIO_RING_IOPOLL = 1u << 1,
};

/** Options for pinio_ring_create(). Start from pinio_ring_opts_default(). */
typedef struct pinio_ring_opts {
    size_t struct_size;     /**< sizeof(pinio_ring_opts), set by the defaults function */
    unsigned queue_depth;   /**< requests in flight (SQ entries); 1..4096 */
    size_t request_size;    /**< bytes per read request; a power of two >= 4096 */
    pinio_backend backend;  /**< AUTO, or force one rung of the ladder */
    pinio_direct_policy direct; /**< O_DIRECT policy for files opened on this ring */
    unsigned flags;         /**< #pinio_ring_flags */
    unsigned pread_threads; /**< threads of the pread backend (0 = default 4) */
    unsigned max_files;     /**< size of the registered file table (2 slots per open file) */
    /** Fault specification (grammar above); NULL = use getenv("PINIO_FAULTS"). */
    const char *faults;
} pinio_ring_opts;

/**
 * Fills `*opts` with the defaults: queue depth 16, request size 4 MiB (chosen
 * by measurement), backend AUTO, O_DIRECT AUTO, no
 * SQPOLL/IOPOLL, 4 pread threads, 64 file slots, faults from the environment.
 */
static inline void pinio_ring_opts_default(pinio_ring_opts *opts);

/**
 * What pinio_ring_opts_default() calls: fills the first `size` bytes of `*opts`
 * with the defaults (struct_size = `size`; fields past this library's
 * struct stay zero). Inline callers pass their header's sizeof, so a
 * program built against an older, smaller struct is never written past.
 */
PINIO_API void pinio_ring_opts_init(pinio_ring_opts *opts, size_t size);

static inline void pinio_ring_opts_default(pinio_ring_opts *opts)
{
    pinio_ring_opts_init(opts, sizeof(*opts));
}

/** What a ring found and does (pinio_ring_get_info()). */
typedef struct pinio_ring_info {
    pinio_backend backend;    /**< best rung available: FIXED_DIRECT, DIRECT (registration
                                   refused), BUFFERED (forced) or PREAD */
    unsigned setup_flags;     /**< IORING_SETUP_* flags the kernel accepted (0 for PREAD) */
    unsigned sq_entries;      /**< SQ size (the queue depth) */
    unsigned cq_entries;      /**< CQ size, >= requests in flight */
    size_t request_size;      /**< bytes per read request */
    int setup_error;          /**< io_uring_setup error that led to PREAD, else 0 */
    int reg_error;            /**< last buffer registration error (-ENOMEM, -EPERM), else 0 */
    int files_error;          /**< file table registration error (plain fds used), else 0 */
    unsigned regions;         /**< memory regions registered with the kernel now (incl.
                                   staging; a lazy region once its first read registered it) */
    bool faults_active;       /**< a fault specification is in force */
    uint64_t fixed_ops;       /**< reads issued as READ_FIXED (registered memory) */
    uint64_t plain_ops;       /**< reads issued as plain READ / pread */
    uint64_t staged_ops;      /**< reads that went through the staging area (then copied) */
    uint64_t retries;         /**< resubmissions: EAGAIN/EINTR/EBUSY and short reads */
    char reason[256];         /**< one line: why this backend / which flags were dropped */
} pinio_ring_info;

/** What was found for one file (pinio_ring_file_get_info()). */
typedef struct pinio_ring_file_info {
    uint64_t size;            /**< size at open (statx); reads past it return short */
    bool direct;              /**< O_DIRECT in use now */
    unsigned mem_align;       /**< DIO memory alignment in use (1 when buffered) */
    unsigned offset_align;    /**< DIO offset/length alignment in use (1 when buffered) */
    const char *align_source; /**< "statx", "blkssz", "sysfs", "default" or "buffered" */
    int direct_error;         /**< why O_DIRECT was given up (-EINVAL, ...), else 0 */
    pinio_backend backend;    /**< the rung reads of this file use into unregistered memory */
    char reason[256];         /**< one line: why (e.g. "O_DIRECT refused at first read: EINVAL") */
} pinio_ring_file_info;

/**
 * Creates a ring. Runs the setup ladder (SINGLE_ISSUER|DEFER_TASKRUN, else
 * COOP_TASKRUN|TASKRUN_FLAG, else none; always CQSIZE >= in flight and
 * SUBMIT_ALL; each flag dropped on -EINVAL), registers a sparse file table and
 * a sparse buffer table, and registers its staging area (head/tail blocks of
 * unaligned O_DIRECT reads). A refused registration (-ENOMEM/-EPERM) is not
 * fatal: it is recorded and the ring uses unregistered reads. An io_uring_setup
 * that fails with -ENOSYS, -EPERM or -ENOMEM selects the pread backend.
 *
 * @param out   on success receives the ring, owned by the caller (pinio_ring_destroy()).
 *              On failure `*out` is untouched.
 * @param opts  options (NULL = defaults); read only during the call.
 * @param diag  optional; filled on failure.
 * @return 0, -EINVAL (bad option, bad PINIO_FAULTS), -ENOMEM, or the setup
 *         error when a backend was forced and cannot run.
 */
PINIO_API int pinio_ring_create(pinio_ring **out, const pinio_ring_opts *opts, pinio_diag *diag);

/**
 * Destroys a ring: unregisters buffers and files explicitly, then exits the
 * ring (lazy teardown would leave the memlock charge in place for a while and
 * make the next registration of the same user fail with -ENOMEM). Files still
 * open on the ring must be closed first (they are closed here otherwise).
 * Registered regions stay owned by whoever registered them. NULL is a no-op.
 */
PINIO_API void pinio_ring_destroy(pinio_ring *ring);

/** Fills `*info` with what the ring found. Never fails. */
PINIO_API void pinio_ring_get_info(const pinio_ring *ring, pinio_ring_info *info);

/** The io_uring opcodes pinio issues, as this kernel answers IORING_REGISTER_PROBE. */
typedef struct pinio_ring_ops {
    bool read;        /**< IORING_OP_READ: unregistered and buffered reads (Linux 5.6) */
    bool read_fixed;  /**< IORING_OP_READ_FIXED: reads into registered memory (5.1) */
    bool write;       /**< IORING_OP_WRITE: `pinio bench --write` */
    bool write_fixed; /**< IORING_OP_WRITE_FIXED: `pinio bench --write` into registered memory */
    unsigned last_op; /**< the highest opcode the kernel knows */
} pinio_ring_ops;

/**
 * Probes the opcodes of #pinio_ring_ops on a small ring of its own (no
 * PINIO_FAULTS, no setup flags).
 * @return 0 and `*out`; io_uring_setup's negative errno when io_uring is
 *         unavailable (-ENOSYS, -EPERM: seccomp, kernel.io_uring_disabled);
 *         -EOPNOTSUPP on kernels without the probe (before 5.6); -EINVAL for
 *         a NULL `out`. `*out` is zeroed on failure.
 */
PINIO_API int pinio_ring_probe_ops(pinio_ring_ops *out);

/** The liburing version pinio was built against ("2.3"; static string). */
PINIO_API const char *pinio_liburing_version(void);

/** liburing's ring (<liburing.h>); only pinio_ring_setup_uring() takes one. */
struct io_uring;

/**
 * Sets up a caller-owned liburing ring with the engine's setup ladder, for
 * callers that drive io_uring themselves (pinio_bench does): the same flags,
 * in the same order of preference, that pinio_ring_create() tries
 * (CQSIZE = 2 x entries and SUBMIT_ALL; SINGLE_ISSUER|DEFER_TASKRUN, else
 * COOP_TASKRUN|TASKRUN_FLAG, ...; each dropped on -EINVAL), with SQPOLL and
 * IOPOLL added when asked for and never dropped. Unlike pinio_ring_create()
 * there is no fallback: a ring that cannot be set up is an error. The
 * PINIO_FAULTS `setup*` items do not apply.
 *
 * @param uring  receives the ring; on success owned by the caller, who tears
 *               it down with io_uring_queue_exit(). Under SINGLE_ISSUER only the
 *               calling thread may submit on it. On failure nothing is held.
 * @param entries SQ entries (the queue depth), 1..4096.
 * @param flags  #pinio_ring_flags (PINIO_RING_SQPOLL, PINIO_RING_IOPOLL).
 * @param setup_flags optional: on success the IORING_SETUP_* flags in force
 *               (pinio_ring_flags_format() names them); untouched on failure.
 * @return 0; -EINVAL (NULL uring, entries out of range, unknown flags, or the
 *         kernel refused even the last rung); io_uring_setup's error otherwise
 *         (-ENOSYS/-EPERM: io_uring unavailable, -ENOMEM: RLIMIT_MEMLOCK).
 */
PINIO_API int pinio_ring_setup_uring(struct io_uring *uring, unsigned entries, unsigned flags,
                                     unsigned *setup_flags);

/**
 * Formats io_uring setup flags (the IORING_SETUP_* bits of
 * pinio_ring_info::setup_flags, kernel ABI values) as their names without the
 * prefix, in ascending bit order, joined by '|': e.g.
 * "CQSIZE|SUBMIT_ALL|SINGLE_ISSUER|DEFER_TASKRUN". Bits this library has no
 * name for come last as one hexadecimal number ("SQPOLL|0x80000000"); 0 is
 * "none". snprintf semantics: at most `n` bytes are written, the output is
 * always NUL-terminated when `n > 0` (truncated if need be), and `buf` may be
 * NULL when `n` is 0.
 *
 * @return the length the full text needs, excluding the NUL (>= n: truncated).
 *         Never fails.
 */
PINIO_API size_t pinio_ring_flags_format(unsigned flags, char *buf, size_t n);

/** The name of a backend ("fixed+direct", "direct", "buffered", "pread", "auto"). */
PINIO_API const char *pinio_backend_name(pinio_backend backend);

/**
 * Registers `[addr, addr+len)` as a fixed buffer, so that reads into it use
 * READ_FIXED. The memory must be anonymous (or shmem/hugetlb), page-aligned is
 * best, `len <= 1 GiB`, and must stay mapped until it is unregistered or the
 * ring is destroyed. Regions must not overlap.
 *
 * @param slot on success receives the buffer slot (>= 0); untouched on failure.
 * @return 0; -EINVAL (len 0 or > 1 GiB, overlap); -ENOSPC (table full);
 *         -EOPNOTSUPP (backend is not FIXED_DIRECT); -ENOMEM / -EPERM /
 *         -EFAULT from the kernel (RLIMIT_MEMLOCK without CAP_IPC_LOCK,
 *         file-backed memory). Failure is not fatal: reads into the memory
 *         still work, unregistered. The error is also kept in
 *         pinio_ring_info::reg_error. Nothing is registered on failure.
 */
PINIO_API int pinio_ring_register_region(pinio_ring *ring, void *addr, size_t len, int *slot);

/**
 * Says whether a lazily registered region may be registered now (its pages
 * are faulted in). Called on the ring's thread from inside its read loop,
 * under the ring's lock: it must be quick and must not call into the ring.
 */
typedef bool (*pinio_region_ready_fn)(void *ctx, const void *addr, size_t len);

/**
 * As pinio_ring_register_region(), but the kernel registration is deferred:
 * the region gets its slot now, and the read loop registers it at the first
 * read into it for which `ready(ctx, addr, len)` is true (NULL `ready`: the
 * first read into it), while other reads are in flight. Until then, and for
 * good when the kernel refuses it then, reads into it are plain reads
 * (pinio_ring_info::reg_error keeps the refusal).
 *
 * Why: registering pins every page and faults in those not present. A
 * fresh arena registered up front is faulted before the first read; lazily,
 * a helper faults region k+1 while region k is read, and registering
 * faulted pages only pins them.
 *
 * @param slot on success receives the reserved slot (>= 0), to be released
 *             with pinio_ring_unregister_region() whether or not the kernel
 *             registration happened; untouched on failure.
 * @return 0; -EINVAL, -ENOSPC, -EOPNOTSUPP as pinio_ring_register_region()
 *         (no sparse buffer table: see `sparseinval`). Nothing is reserved
 *         on failure.
 */
PINIO_API int pinio_ring_register_region_lazy(pinio_ring *ring, void *addr, size_t len,
                                              pinio_region_ready_fn ready, void *ctx, int *slot);

/**
 * Unregisters a slot returned by pinio_ring_register_region() or
 * pinio_ring_register_region_lazy(). The memory is
 * unpinned once no read uses it any more. May be called from any thread (see
 * Threads above); reads issued after it returns no longer use the slot.
 * @return 0, -ENOENT for a slot that is not registered, or the kernel's error.
 */
PINIO_API int pinio_ring_unregister_region(pinio_ring *ring, int slot);

/**
 * A registrar for pinio_pool_opts::registrar: `reg` is
 * pinio_ring_register_region() (call pinio_pool_alloc() on the ring's thread,
 * or registration fails with -EEXIST and the slab stays unregistered), `unreg`
 * is pinio_ring_unregister_region() (any thread).
 *
 * Lifetime: the ring must outlive every slab registered through it: call
 * pinio_pool_unregister() (or destroy the pool and release its regions)
 * before pinio_ring_destroy().
 */
PINIO_API pinio_pool_registrar pinio_ring_registrar(pinio_ring *ring);

/**
 * Opens `path` for reading on `ring`: an O_DIRECT descriptor when the policy
 * and the file system allow it, and a buffered one; both are registered in
 * the ring's file table when possible. DIO alignment comes from
 * statx(STATX_DIOALIGN), else the block device's logical block size
 * (BLKSSZGET, sysfs), else 4096.
 *
 * @param out on success receives the file, owned by the caller
 *            (pinio_ring_file_close() before pinio_ring_destroy()). Untouched on failure.
 * @return 0, -ENOENT/-EACCES/... from open, -EISDIR, -EINVAL (not a regular
 *         file or block device: a FIFO is refused without waiting for a
 *         writer; or PINIO_DIRECT_ON and O_DIRECT refused), #PINIO_ECHANGED
 *         (the path named another file when reopened for O_DIRECT), -ENOMEM,
 *         -EPERM (called off the thread of a SINGLE_ISSUER ring, see
 *         Threads). `diag` names the path.
 */
PINIO_API int pinio_ring_file_open(pinio_ring *ring, const char *path, pinio_ring_file **out,
                                   pinio_diag *diag);

/** Closes a file (its descriptors and file-table slots). NULL is a no-op. */
PINIO_API void pinio_ring_file_close(pinio_ring_file *file);

/** Fills `*info` for `file`. Never fails. */
PINIO_API void pinio_ring_file_get_info(const pinio_ring_file *file, pinio_ring_file_info *info);

/** One read of a bulk call: `len` bytes at `offset` of `file` into `dst`. */
typedef struct pinio_read_req {
    pinio_ring_file *file; /**< in: a file of the same ring */
    uint64_t offset;       /**< in: file offset, any value */
    size_t len;            /**< in: bytes wanted, any value (0 is a no-op) */
    void *dst;             /**< in: destination, any address with `len` writable bytes */
    size_t done;           /**< out: bytes placed; < len only at end of file; 0 on error */
    int result;            /**< out: 0, or the request's negative error code */
} pinio_read_req;

/**
 * Reads many requests in one pass: all requests are cut into pieces of at
 * most request_size, submitted in batches and reaped together, with at most
 * queue_depth pieces in flight. Short reads at end of file are normal;
 * remainders are resubmitted from an aligned offset; -EAGAIN, -EINTR and
 * -EBUSY are retried (a bounded number of times); any other error fails the
 * request it belongs to (the others continue) and the first such error is
 * returned with `diag` naming the path and offset.
 *
 * Ownership: the destinations belong to the caller; on return no read is in
 * flight into any of them. A request that failed may have had some of its
 * bytes written but reports done = 0 and result < 0: its destination content
 * is unspecified. Bytes beyond `done` are never written with file data
 * (never past end of file).
 *
 * @return 0 when every request succeeded, else the first failing request's
 *         code (-EIO, ...), -EINVAL for a request with a NULL dst/file or a
 *         file of another ring, or -EPERM (nothing read, `done`/`result` of
 *         every request reset to 0) when called off the thread of a
 *         SINGLE_ISSUER ring (see Threads).
 */
PINIO_API int pinio_ring_read_bulk(pinio_ring *ring, pinio_read_req *reqs, size_t n,
                                   pinio_diag *diag);

/**
 * Reads `len` bytes at `offset` of `file` into `dst` (a bulk call of one).
 * @return the number of bytes placed (< len only at end of file), or a
 *         negative error code; see pinio_ring_read_bulk().
 */
PINIO_API int64_t pinio_ring_read(pinio_ring *ring, pinio_ring_file *file, uint64_t offset,
                                  void *dst, size_t len, pinio_diag *diag);

#ifdef __cplusplus
}
#endif

#endif /* PINIO_RING_H */
