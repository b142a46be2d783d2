/**
 * @file view.h
 * @brief pinio_view: a small value type over refcounted bytes (tokio's `Bytes`).
 *
 * A view is {ptr, len, ref}. Copying the struct does not add a reference:
 * use pinio_view_clone(). Every view that holds a reference must be given to
 * pinio_view_release() exactly once.
 *
 * Kinds of memory behind a view:
 * - static  (pinio_view_static): no reference object (`ref == NULL`); never
 *   freed, never written, never unique. Clone/release cost nothing.
 * - adopted (pinio_view_wrap): foreign memory plus a free callback and cookie;
 *   the callback runs exactly once, when the last reference is released.
 * - copied / allocated (pinio_view_copy, pinio_view_alloc): heap memory owned
 *   by pinio.
 *
 * Empty views (len == 0) never hold a reference: slicing or splitting down to
 * nothing keeps the correct address in `ptr` but takes no reference, so an
 * empty view can be dropped without a release (releasing it is harmless).
 *
 * Threads: reference counts are atomic. Any view may be cloned or released
 * from any thread, concurrently with other clones/releases of the same
 * memory. A single pinio_view struct is a value: two threads must not modify
 * the same struct at the same time (as with any C value).
 *
 * Errors: negative codes from common.h. A function that fails leaves every
 * view it was given exactly as it was.
 */
#ifndef PINIO_VIEW_H
#define PINIO_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinio/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Opaque shared reference count plus how to free the memory. */
typedef struct pinio_ref pinio_ref;

/**
 * Frees adopted memory. Called once, from whichever thread releases the last
 * reference, with the pointer and length given to pinio_view_wrap().
 */
typedef void (*pinio_free_fn)(void *cookie, void *ptr, size_t len);

/** A view of `len` bytes at `ptr`; `ref` is NULL for static and empty views. */
typedef struct pinio_view {
    const uint8_t *ptr;
    size_t len;
    pinio_ref *ref;
} pinio_view;

/** Flags for pinio_view_wrap(). */
enum pinio_view_flags {
    /** The adopted memory must never be written (e.g. a PROT_READ mapping). */
    PINIO_VIEW_READONLY = 1u << 0,
};

/**
 * A view of static memory: no reference, never freed, never written.
 * `ptr` may be NULL only when `len` is 0.
 */
PINIO_API pinio_view pinio_view_static(const void *ptr, size_t len);

/**
 * Adopts foreign memory.
 *
 * On success `*out` owns the only reference and `free_cb(cookie, ptr, len)`
 * will run exactly once, when the last reference is released (free_cb may be
 * NULL for memory that needs no freeing). When `len` is 0 no reference is
 * created and free_cb runs before pinio_view_wrap() returns.
 * On failure (-ENOMEM, -EINVAL for NULL ptr with len > 0) nothing is adopted:
 * the caller still owns `ptr`, free_cb is not called, `*out` is untouched.
 *
 * @param flags a combination of #pinio_view_flags.
 */
PINIO_API int pinio_view_wrap(pinio_view *out, void *ptr, size_t len, pinio_free_fn free_cb,
                              void *cookie, unsigned flags);

/**
 * Copies `len` bytes from `src` into new heap memory (aligned to at least 16).
 * On success `*out` owns the only reference; on failure (-ENOMEM) `*out` is untouched.
 */
PINIO_API int pinio_view_copy(pinio_view *out, const void *src, size_t len);

/**
 * Allocates `len` writable bytes aligned to `align` (a power of two; 0 means 16).
 * The contents are uninitialized; write them through pinio_view_data_mut()
 * while the view is unique. On failure (-EINVAL, -ENOMEM) `*out` is untouched.
 */
PINIO_API int pinio_view_alloc(pinio_view *out, size_t len, size_t align);

/** A new view of the same bytes, holding one more reference (none for static/empty views). */
PINIO_API pinio_view pinio_view_clone(const pinio_view *v);

/**
 * A new view of `v[start, end)` holding one more reference (none when empty).
 * @return 0, or -ERANGE when `start > end` or `end > v->len` (`*out` untouched).
 */
PINIO_API int pinio_view_slice(const pinio_view *v, size_t start, size_t end, pinio_view *out);

/**
 * Splits off the first `at` bytes: `*head` receives `v[0, at)` and `v` keeps
 * `v[at, len)`. The reference is shared, never copied; counts change only to
 * give each non-empty part exactly one reference.
 * @return 0, or -ERANGE when `at > v->len` (both views untouched).
 */
PINIO_API int pinio_view_split_to(pinio_view *v, size_t at, pinio_view *head);

/**
 * Splits off the tail: `*tail` receives `v[at, len)` and `v` keeps `v[0, at)`.
 * @return 0, or -ERANGE when `at > v->len` (both views untouched).
 */
PINIO_API int pinio_view_split_off(pinio_view *v, size_t at, pinio_view *tail);

/**
 * Drops the view's reference (freeing the memory if it was the last one) and
 * resets `*v` to an empty view. Safe on static, empty and already released views.
 */
PINIO_API void pinio_view_release(pinio_view *v);

/** True when `v` holds the only reference to its memory (false for static and empty views). */
PINIO_API bool pinio_view_is_unique(const pinio_view *v);

/**
 * Writable access without copying: the bytes of `v` when it is the unique
 * owner of writable memory, else NULL. The pointer is valid until `v` is
 * released, cloned (it would then no longer be unique) or modified.
 */
PINIO_API uint8_t *pinio_view_data_mut(pinio_view *v);

/** True when `a` and `b` hold the same bytes (content, not address). */
PINIO_API bool pinio_view_equal(const pinio_view *a, const pinio_view *b);

/**
 * A buffer handed over by a controller's try_detach (controller.h) or by
 * pinio_bytes_try_detach() (bytes.h): the receiver owns it and must call
 * `free_fn(cookie, ptr, size)` exactly once (pinio_detached_free() does).
 * `ptr` is aligned to `align`; bytes [0, len) are initialized, [len, size)
 * may not be. For size 0, `ptr` is a non-NULL dangling address and free_fn
 * does nothing. (Declared with the views, the lowest layer: a unique view's
 * allocation is what a shared controller hands over in place.)
 */
typedef struct pinio_detached {
    void *ptr;             /**< start of the buffer */
    size_t len;            /**< initialized (logical) bytes; set by pinio_bytes_try_detach() */
    size_t size;           /**< allocated bytes (capacity) */
    size_t align;          /**< alignment of `ptr` (a power of two) */
    pinio_free_fn free_fn; /**< how to free it; never NULL */
    void *cookie;          /**< first argument of free_fn */
} pinio_detached;

/** Frees a detached buffer with its own free function and resets `*d`. NULL-safe. */
PINIO_API void pinio_detached_free(pinio_detached *d);

#ifdef __cplusplus
}
#endif

#endif /* PINIO_VIEW_H */
