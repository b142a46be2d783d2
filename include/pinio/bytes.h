/**
 * @file bytes.h
 * @brief pinio_bytes: one allocation controller plus a logical length
 *        (cubecl's `Bytes`).
 *
 * Bytes [0, len) of the controller's memory are initialized; the capacity may
 * be larger. len() and capacity() never touch the memory (no I/O, no copy).
 *
 * **Zero-copy mode.** Every function that might copy or materialize takes a
 * #pinio_access: with #PINIO_ACCESS_ZERO_COPY it returns #PINIO_EWOULD_COPY
 * (and changes nothing) instead of copying, so a caller can demand zero-copy.
 *
 * **Property.** See controller.h: kept through split, clone (when it shares)
 * and duplicate; NATIVE after a copy-on-write, after a clone that had to
 * deep-copy, and after extend or split had to move the bytes to new memory.
 *
 * **Threads.** A pinio_bytes has one owner at a time, but these may be
 * called from several threads at once on the same handle: len, capacity,
 * align, property, data, data_mut, read, pinio_bytes_copy_into (as source)
 * and pinio_bytes_equal. First materialization and copy-on-write then happen
 * exactly once (no double initialization, no data race). Writing through
 * data_mut while another thread reads is still the caller's race. All other
 * functions need exclusive use. Pointers from data()/data_mut() stay valid
 * until the next call that needs exclusive use (or free).
 *
 * **Errors.** 0 or a negative code; a failing function leaves every handle
 * it was given as it was, unless stated otherwise. Functions that may do I/O
 * take an optional `pinio_diag *` (NULL allowed) naming the file and offset.
 */
#ifndef PINIO_BYTES_H
#define PINIO_BYTES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinio/common.h"
#include "pinio/controller.h"
#include "pinio/view.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Opaque handle: one controller + a logical length. */
typedef struct pinio_bytes pinio_bytes;

/**
 * Adopts a controller. `len` must not exceed its capacity (checked without
 * materializing); bytes [0, len) must be initialized.
 * @return 0, -ERANGE, -EINVAL (NULL or no memory entry), -ENOMEM. On success
 *         `*out` owns `ctrl`; on failure the caller still owns `ctrl` and
 *         `*out` is untouched.
 */
PINIO_API int pinio_bytes_from_controller(pinio_bytes **out, pinio_controller *ctrl, size_t len);

/**
 * Bytes over a view (shared controller, see controller.h), len = view len.
 * `property` as pinio_controller_shared_new() takes it (-EINVAL for DEVICE).
 * On success `*out` owns the reference `*view` held and `*view` is reset to
 * an empty view; on failure the caller still owns `*view`, `*out` untouched.
 */
PINIO_API int pinio_bytes_from_view(pinio_bytes **out, pinio_view *view, pinio_property property);

/**
 * Lazy bytes over the file window [offset, offset + len): nothing is read.
 * On success `*out` holds its own reference to `file` (the caller keeps its
 * own); on failure (-ERANGE past the end of file, -ENOMEM) `*out` untouched.
 */
PINIO_API int pinio_bytes_from_file(pinio_bytes **out, pinio_file *file, uint64_t offset,
                                    size_t len, pinio_diag *diag);

/**
 * Copies `len` bytes of `data` into new native memory aligned to `align`
 * (power of two up to #PINIO_MAX_ALIGN, 0 = #PINIO_DEFAULT_ALIGN).
 * On success the caller owns `*out`; on failure `*out` is untouched.
 */
PINIO_API int pinio_bytes_from_data(pinio_bytes **out, const void *data, size_t len, size_t align);

/** Like pinio_bytes_from_data() with `len` zero bytes: the same errors, and
 *  `*out` untouched on failure. */
PINIO_API int pinio_bytes_alloc(pinio_bytes **out, size_t len, size_t align);

/** Destroys the handle and its controller. NULL-safe. */
PINIO_API void pinio_bytes_free(pinio_bytes *b);

/** Logical length. Never touches the memory. */
PINIO_API size_t pinio_bytes_len(const pinio_bytes *b);
/** Capacity of the controller (>= len). Never materializes. */
PINIO_API size_t pinio_bytes_capacity(const pinio_bytes *b);
/** The controller's alloc_align (not necessarily the pointer's alignment). */
PINIO_API size_t pinio_bytes_align(const pinio_bytes *b);
/** The controller's current property. */
PINIO_API pinio_property pinio_bytes_property(const pinio_bytes *b);
/** The controller (still owned by `b`), for code that knows its type. */
PINIO_API pinio_controller *pinio_bytes_controller(pinio_bytes *b);

/**
 * Read access to the `len` logical bytes. May materialize a file window
 * (zero-copy mode: #PINIO_EWOULD_COPY). `*out` is untouched on failure.
 * The pointer is owned by `b`.
 */
PINIO_API int pinio_bytes_data(pinio_bytes *b, pinio_access mode, const uint8_t **out,
                               pinio_diag *diag);

/**
 * Write access to the `len` logical bytes: in place when `b` alone owns
 * writable memory, else after a copy-on-write (zero-copy mode:
 * #PINIO_EWOULD_COPY). -ENOTSUP when the controller has no write access.
 * The pointer is owned by `b`; `*out` is untouched on failure.
 */
PINIO_API int pinio_bytes_data_mut(pinio_bytes *b, pinio_access mode, uint8_t **out,
                                   pinio_diag *diag);

/**
 * Copies logical bytes [offset, offset + len) into `dst` without
 * materializing (a file window is read straight into `dst`) and without
 * copy-on-write. -ERANGE (nothing copied) when the range passes len; after
 * a read error `dst` may hold part of the range. `dst` stays the caller's.
 */
PINIO_API int pinio_bytes_read(pinio_bytes *b, size_t offset, void *dst, size_t len,
                               pinio_diag *diag);

/**
 * Splits at `offset`: `b` keeps [0, offset) and `*right` receives
 * [offset, len). Zero-copy when the controller can split; otherwise `b`
 * keeps its controller (shortened) and the right part is copied into native
 * memory with the same alignment (zero-copy mode: #PINIO_EWOULD_COPY). Works
 * at 0 and at len. On success the caller owns `*right`; on failure (-ERANGE
 * for offset > len, -ENOMEM, read errors) `b` is unchanged and `*right` is
 * untouched.
 */
PINIO_API int pinio_bytes_split(pinio_bytes *b, size_t offset, pinio_access mode,
                                pinio_bytes **right, pinio_diag *diag);

/**
 * A new handle over the same logical bytes: shared (controller duplicate,
 * same property) when the controller can, else a deep copy into native
 * memory with the same alignment (zero-copy mode: #PINIO_EWOULD_COPY).
 * On success the caller owns `*out` (and still `b`); on failure `*out` is
 * untouched.
 */
PINIO_API int pinio_bytes_clone(pinio_bytes *b, pinio_access mode, pinio_bytes **out,
                                pinio_diag *diag);

/**
 * A new handle over logical bytes [start, end) of `b` (cubecl's
 * `Bytes::view`): zero-copy when the controller has a view entry — a
 * shared controller shares the memory (one more reference, same property;
 * writing either handle then copies-on-write, so neither sees the other's
 * later writes), a file window that has not been read stays a lazy window
 * of the same file — else a copy into native memory with the same alignment
 * (zero-copy mode: #PINIO_EWOULD_COPY). `start == end` gives an empty handle.
 * Needs exclusive use of `b`, as pinio_bytes_clone() does.
 *
 * @return 0; -EINVAL for a NULL `b` or `out`; -ERANGE when `start` > `end`
 *         or `end` > pinio_bytes_len(b); #PINIO_EWOULD_COPY; -ENOMEM; or a
 *         read error of the copy (`diag` names the file and offset). On
 *         success the caller owns `*out` and still owns `b` (unchanged); on
 *         failure `*out` is untouched and nothing is allocated.
 */
PINIO_API int pinio_bytes_view(pinio_bytes *b, size_t start, size_t end, pinio_access mode,
                               pinio_bytes **out, pinio_diag *diag);

/**
 * Copies the first pinio_bytes_len(dst) bytes of `src` into `dst`: `src` is
 * read without materializing, `dst` is written through data_mut (which may
 * copy-on-write `dst`; zero-copy mode: #PINIO_EWOULD_COPY). -ERANGE when
 * `src` is shorter than `dst`; -EINVAL when they are the same handle.
 * Ownership of both is unchanged. After a read error `dst` may already have
 * been copied-on-write and partly overwritten (its length is unchanged).
 */
PINIO_API int pinio_bytes_copy_into(pinio_bytes *src, pinio_bytes *dst, pinio_access mode,
                                    pinio_diag *diag);

/**
 * Appends `n` bytes of `data`. Grows the controller when it can (its grow may
 * relocate its own memory, as realloc does); otherwise moves the bytes to new
 * native memory (capacity at least doubled, rounded up to the alignment;
 * property becomes NATIVE) — zero-copy mode returns #PINIO_EWOULD_COPY
 * instead of moving to another controller or copying-on-write.
 * `n == 0` returns 0 at once and copies nothing. On failure len is unchanged
 * (a grown capacity may remain). `data` stays the caller's.
 */
PINIO_API int pinio_bytes_extend(pinio_bytes *b, const void *data, size_t n, pinio_access mode,
                                 pinio_diag *diag);

/**
 * Hands the buffer over: `*out` receives the pointer, `len` (the logical
 * length), size, alignment (at least pinio_bytes_align(b)) and the function
 * that must free it. When the
 * controller cannot detach, the logical bytes are copied into a new aligned
 * buffer (zero-copy mode: #PINIO_EWOULD_COPY, or -ENOTSUP for controllers
 * that never detach). On success `b` is freed and the caller owns the buffer
 * (free it with pinio_detached_free()); on failure `b` is unchanged and
 * `*out` untouched.
 */
PINIO_API int pinio_bytes_try_detach(pinio_bytes *b, pinio_access mode, pinio_detached *out,
                                     pinio_diag *diag);

/**
 * Compares logical bytes (not alignment, not property). May materialize
 * either side (a materialization that succeeded stays, even when the other
 * one fails). Ownership of both is unchanged.
 * @return 1 when equal, 0 when not, or a negative error (read failure).
 */
PINIO_API int pinio_bytes_equal(pinio_bytes *a, pinio_bytes *b, pinio_diag *diag);

#ifdef __cplusplus
}
#endif

#endif /* PINIO_BYTES_H */
