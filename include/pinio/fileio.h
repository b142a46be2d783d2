/**
 * @file fileio.h
 * @brief File-I/O contexts: lazy FILE windows (controller.h, bytes.h) read
 *        through the io_uring engine (ring.h) into caller-chosen memory.
 *
 * This is the io layer: it sits below the engine it drives and above the
 * controllers and bytes it reads for, so that controller.h and bytes.h do not
 * drag the engine and the pool into every user of a byte view.
 */
#ifndef PINIO_FILEIO_H
#define PINIO_FILEIO_H

#include <stddef.h>
#include <stdint.h>

#include "pinio/bytes.h"
#include "pinio/common.h"
#include "pinio/controller.h"
#include "pinio/ring.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * A file-I/O context: reads lazy file windows through one #pinio_ring, so
 * that their bytes land straight in the caller's destination by io_uring
 * (READ_FIXED when the destination lies in memory registered with that ring,
 * e.g. a region of a pinned pool whose registrar is pinio_ring_registrar()),
 * O_DIRECT where the file system allows it, with the ring's fallback ladder.
 * Without a context (NULL) file windows are read with pread(2), as
 * pinio_controller_copy_into() does.
 *
 * **Why a context and not a ring inside pinio_file.** A pinio_file is shared
 * by every window cut from it and may be read from any thread, whereas a
 * ring is used by one thread at a time (by its creating thread when the
 * kernel accepted IORING_SETUP_SINGLE_ISSUER). The context belongs to the
 * ring's thread: it keeps, per #pinio_file it has read, the #pinio_ring_file
 * it opened on its ring. The ring file is opened through `/proc/self/fd/N`
 * of the pinio_file's own descriptor, so it is the same inode even when the
 * path has since been renamed over or unlinked (without /proc the path is
 * opened and its device and inode compared with the open file).
 *
 * **Lifetimes.** The context borrows the ring: destroy the context before
 * the ring. Each cached entry holds a reference on its pinio_file, so a
 * file cannot be closed and its address reused while cached; an entry whose
 * file nobody else references any more is closed the next time the context
 * opens a file, and every entry is closed by pinio_fileio_destroy().
 *
 * **Threads.** A context is used by one thread at a time, the same thread
 * that may use its ring: on a SINGLE_ISSUER ring any other thread gets
 * -EPERM with a diagnostic (nothing is submitted). Nothing is process-global.
 */
typedef struct pinio_fileio pinio_fileio;

/**
 * Creates a context reading through `ring`.
 *
 * @param out  on success receives the context, owned by the caller
 *             (pinio_fileio_destroy(), before pinio_ring_destroy()); untouched
 *             on failure.
 * @param ring borrowed; must outlive the context.
 * @return 0, -EINVAL (NULL argument), -ENOMEM.
 */
PINIO_API int pinio_fileio_create(pinio_fileio **out, pinio_ring *ring);

/**
 * Closes every ring file the context opened and releases its references on
 * the pinio_files. Must run before the ring is destroyed, on a thread that
 * may use the ring (closing a ring file updates the ring's file table).
 * NULL-safe.
 */
PINIO_API void pinio_fileio_destroy(pinio_fileio *io);

/** The ring `io` reads through (still owned by whoever created it). */
PINIO_API pinio_ring *pinio_fileio_ring(const pinio_fileio *io);

/** Number of pinio_files with a ring file open in `io` (tests, diagnostics). */
PINIO_API size_t pinio_fileio_open_files(const pinio_fileio *io);

/**
 * pinio_controller_copy_into() through a file-I/O context: when `c` is a file
 * window that has not been materialized, [offset, offset + len) is read by
 * `io`'s ring straight into `dst` (see #pinio_fileio); any other controller,
 * or `io` NULL, gives exactly pinio_controller_copy_into().
 *
 * @return 0; -ERANGE (nothing written) when the range passes the capacity or
 *         the file size seen at open; #PINIO_ECHANGED when the file ends
 *         early (it shrank since it was opened); -EPERM when called off the
 *         thread of a SINGLE_ISSUER ring; or the read's negative errno.
 *         `diag` names the file's path and the offset. After a read error
 *         `dst` may hold part of the range. `c`, `io` and `dst` stay the
 *         caller's either way.
 */
PINIO_API int pinio_controller_copy_into_io(pinio_controller *c, pinio_fileio *io, size_t offset,
                                            void *dst, size_t len, pinio_diag *diag);

/**
 * pinio_bytes_read() through a file-I/O context (#pinio_fileio): a file
 * window is read by `io`'s ring straight into `dst`, READ_FIXED when `dst`
 * lies in memory registered with that ring. `io` NULL, or bytes that are not
 * a lazy file window, behave exactly as pinio_bytes_read().
 *
 * @return 0; -ERANGE (nothing written) when the range passes len;
 *         #PINIO_ECHANGED when the file shrank since it was opened; -EPERM
 *         off the thread of a SINGLE_ISSUER ring; or the read's errno, with
 *         `diag` naming the path and offset. After a read error `dst` may
 *         hold part of the range. `b`, `io` and `dst` stay the caller's.
 */
PINIO_API int pinio_bytes_read_io(pinio_bytes *b, pinio_fileio *io, size_t offset, void *dst,
                                  size_t len, pinio_diag *diag);

/** One request of pinio_bytes_read_bulk(). */
typedef struct pinio_bytes_req {
    pinio_bytes *bytes; /**< in: source; read only, ownership unchanged */
    size_t offset;      /**< in: logical offset in `bytes` */
    size_t len;         /**< in: bytes to copy (0: nothing to do) */
    void *dst;          /**< in: `len` writable bytes, the caller's */
    int result;         /**< out: 0 or this request's negative error code */
} pinio_bytes_req;

/**
 * Copies many ranges at once. Every request whose bytes are a lazy file
 * window goes to `io`'s ring, all of them in **one** engine pass
 * (pinio_ring_read_bulk(): batched submission, up to the ring's queue depth
 * in flight across files); the others are copied as pinio_bytes_read() does.
 * With `io` NULL every request is a pinio_bytes_read().
 *
 * Requests are independent: a failing one does not stop the others, and
 * each gets its own `result` (-EINVAL for a NULL `bytes` or `dst`, -ERANGE
 * for a range past len — nothing written —, #PINIO_ECHANGED for a file that
 * shrank, -EPERM off the thread of a SINGLE_ISSUER ring, or the read's
 * errno). A failed request's destination content is unspecified.
 *
 * @return 0 when every request succeeded, else the `result` of the
 *         lowest-index failing request, with `diag` describing that request
 *         (its path and offset); -EINVAL when `reqs` is NULL with `n` > 0,
 *         -ENOMEM (every result set to it, nothing read). The handles and
 *         destinations stay the caller's.
 */
PINIO_API int pinio_bytes_read_bulk(pinio_fileio *io, pinio_bytes_req *reqs, size_t n,
                                    pinio_diag *diag);

#ifdef __cplusplus
}
#endif

#endif /* PINIO_FILEIO_H */
