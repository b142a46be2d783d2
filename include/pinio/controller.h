/**
 * @file controller.h
 * @brief Allocation controllers (cubecl's `AllocationController`) and the
 *        refcounted file object behind lazy file windows.
 *
 * A controller owns (or shares) one allocation and says how to reach it:
 * read it, write it, split it, duplicate it, copy a range out of it, grow it,
 * hand it over (detach). pinio_bytes (bytes.h) owns one controller plus a
 * logical length; most callers only need bytes.h. Controllers matter to code
 * that brings its own memory (a pinned pool, a device staging buffer): it
 * fills a #pinio_controller_ops table and embeds #pinio_controller as the
 * first member of its state.
 *
 * Delivered controllers:
 * - **native**: aligned heap memory, grows in place when it can, detaches
 *   with the exact free function and alignment. No view (views copy).
 * - **shared**: over a pinio_view (zero-copy reads). The first mutable access
 *   copies into a private aligned buffer only when the view is shared or not
 *   writable; a unique, writable view is mutated in place. view and
 *   duplicate share the memory.
 * - **file**: a lazy window (file, offset, length) of a #pinio_file.
 *   copy_into reads straight from the file into the caller's buffer;
 *   memory() materializes once. view gives a lazy window of the same file
 *   until then, a shared view of the read buffer after.
 *
 * **Property after a copy-on-write.** The property describes the memory the
 * bytes live in. A copy-on-write moves them into a private heap buffer, so a
 * controller that has copied reports #PINIO_PROP_NATIVE from then on (as do
 * controllers split or duplicated from it): a stale PINNED would make a
 * consumer DMA from pageable memory as if it were page-locked. Until then the
 * property is kept through split and duplicate. Materializing a file window
 * is not a copy-on-write: the window keeps reporting FILE.
 *
 * **Threads.** One owner at a time, except that memory(), memory_mut(),
 * copy_into(), capacity(), property() and alloc_align() of the delivered
 * controllers may be called concurrently on the same controller: first
 * materialization and copy-on-write happen exactly once, under a guard.
 * Every other operation needs exclusive use. Pointers returned by memory()
 * and memory_mut() stay valid until the next exclusive operation.
 */
#ifndef PINIO_CONTROLLER_H
#define PINIO_CONTROLLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinio/common.h"
#include "pinio/view.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Alignment of buffers pinio allocates when none is requested (a cache line). */
#define PINIO_DEFAULT_ALIGN 64
/** Largest alignment a native controller accepts (a page: enough for O_DIRECT). */
#define PINIO_MAX_ALIGN 4096

/**
 * What backs an allocation (cubecl's `AllocationProperty`): it tells a
 * consumer what a DMA to a GPU needs.
 *
 * - #PINIO_PROP_FILE and #PINIO_PROP_PINNED are the two a backend must tell
 *   apart. FILE is file-backed memory (a lazy window, a page-cache mapping):
 *   touching it may fault or read, so a GPU backend stages it through pinned
 *   memory first (copy_into straight into the staging buffer). PINNED is
 *   page-locked memory (locked and NUMA-placed, registered with a ring or
 *   ready to be): a GPU can DMA from it directly, and it is never re-staged.
 * - #PINIO_PROP_DEVICE is memory that still lives on a GPU and is read back
 *   on the first host access; a backend uses it in place on its device.
 *
 * Which controller reports what: native: NATIVE. shared: the property given
 * to pinio_controller_shared_new() (NATIVE, FILE, PINNED or OTHER), NATIVE
 * after a copy-on-write. file: FILE, before and after the window is read,
 * NATIVE once a copy-on-write moved the read bytes. A controller of its own
 * (a device staging buffer, a GPU allocation) reports what its memory is.
 *
 * Values are ABI: new ones are appended, never renumbered.
 */
typedef enum pinio_property {
    PINIO_PROP_NATIVE = 0, /**< pageable heap memory */
    PINIO_PROP_FILE = 1,   /**< file-backed, lazily read or mapped: stage it through pinned memory */
    PINIO_PROP_PINNED = 2, /**< page-locked (registered) host memory: DMA from it directly */
    PINIO_PROP_OTHER = 3,  /**< unknown backing (static data, foreign buffers) */
    PINIO_PROP_DEVICE = 4, /**< GPU memory, read back to the host lazily */
} pinio_property;

/** The property's name ("native", "file", "pinned", "other", "device";
 *  "unknown" otherwise). */
PINIO_API const char *pinio_property_name(pinio_property p);

/** Whether an access may copy or materialize. */
typedef enum pinio_access {
    /** Copy or materialize when needed (the default). */
    PINIO_ACCESS_COPY = 0,
    /** Never copy nor materialize: return #PINIO_EWOULD_COPY instead. */
    PINIO_ACCESS_ZERO_COPY = 1,
} pinio_access;

typedef struct pinio_controller pinio_controller;

/**
 * The controller vtable. `size` must be set to the `sizeof` the implementer
 * compiled against: entries past it are treated as NULL, so the table can
 * grow without breaking old controllers. A NULL entry means the default
 * given with it. Functions return 0 or a negative error code.
 */
typedef struct pinio_controller_ops {
    /** sizeof(pinio_controller_ops) as seen by the implementer. */
    size_t size;
    /**
     * The alignment the allocation was created with (what try_detach hands
     * back), not necessarily the alignment of the current pointer.
     * Default: 1.
     */
    size_t (*alloc_align)(const pinio_controller *c);
    /** Default: #PINIO_PROP_OTHER. */
    pinio_property (*property)(const pinio_controller *c);
    /**
     * Capacity in bytes, **without** materializing or doing I/O.
     * Default: the size memory() reports in zero-copy mode, or 0 when that
     * fails (so a lazy controller must provide it).
     */
    size_t (*capacity)(const pinio_controller *c);
    /**
     * Read access to the whole allocation: `*ptr`, `*size` (= capacity).
     * May materialize (mode permitting). **Required.** On failure the
     * outputs are untouched; `diag` (may be NULL) names what failed.
     */
    int (*memory)(pinio_controller *c, pinio_access mode, const uint8_t **ptr, size_t *size,
                  pinio_diag *diag);
    /**
     * Write access to the whole allocation; may copy-on-write (mode
     * permitting). The caller writes only bytes it knows to be initialized or
     * that it initializes. Default: -ENOTSUP (read-only memory).
     */
    int (*memory_mut)(pinio_controller *c, pinio_access mode, uint8_t **ptr, size_t *size,
                      pinio_diag *diag);
    /**
     * Two new controllers over [0, offset) and [offset, capacity). The caller
     * then destroys `c` (the halves own what they need). Must work at 0 and
     * at capacity; -ERANGE past it. On failure no controller is created and
     * `c` is unchanged. Default: -ENOTSUP.
     */
    int (*split)(pinio_controller *c, size_t offset, pinio_controller **left,
                 pinio_controller **right);
    /**
     * A new controller over the same bytes without copying them (sharing,
     * copy-on-write later). On failure no controller is created, `*out` is
     * untouched and `c` unchanged. Default: -ENOTSUP (pinio_bytes_clone then
     * deep-copies).
     */
    int (*duplicate)(pinio_controller *c, pinio_controller **out);
    /**
     * Copies bytes [offset, offset + len) into `dst` without materializing
     * and without copy-on-write. -ERANGE when the range passes the capacity.
     * Default: memory() (copy allowed) then memcpy.
     */
    int (*copy_into)(pinio_controller *c, size_t offset, void *dst, size_t len, pinio_diag *diag);
    /**
     * Grows the capacity to at least `size` with alignment at least `align`,
     * keeping the contents (in place or by moving). Default: -ENOTSUP.
     */
    int (*grow)(pinio_controller *c, size_t size, size_t align);
    /**
     * Hands the buffer over (`out->len` is left 0: the controller does not
     * know the logical length), aligned to at least alloc_align (`out->align`
     * says how much): memory that falls short is copied or refused, never
     * handed over as is. On success the controller no longer owns it and is
     * left empty (destroy it as usual); on failure the controller keeps its
     * memory and contents and `*out` is untouched. Default: -ENOTSUP.
     */
    int (*try_detach)(pinio_controller *c, pinio_access mode, pinio_detached *out,
                      pinio_diag *diag);
    /** Releases everything, including `c` itself. Default: nothing. */
    void (*destroy)(pinio_controller *c);
    /*
     * Entries from here on were appended after destroy: a table compiled
     * before one existed has a `size` that stops short of it, so it reads
     * as NULL (its default). New entries go at the end, never in between.
     */
    /**
     * A new controller over [start, end) of this one's capacity without
     * copying the bytes: it shares them (copy-on-write later, as after
     * duplicate) or, for a lazy controller, is a lazy window of the same
     * source. `c` is unchanged. Default: -ENOTSUP (pinio_bytes_view() then
     * copies).
     */
    int (*view)(pinio_controller *c, size_t start, size_t end, pinio_controller **out);
} pinio_controller_ops;

/** Embed as the first member of a controller's state. */
struct pinio_controller {
    const pinio_controller_ops *ops;
};

/*
 * Dispatchers: call the entry, or apply its documented default. None of them
 * take ownership of `c`, except pinio_controller_destroy().
 */

/** ops->alloc_align or 1. */
PINIO_API size_t pinio_controller_alloc_align(const pinio_controller *c);
/** ops->property or #PINIO_PROP_OTHER. */
PINIO_API pinio_property pinio_controller_property(const pinio_controller *c);
/** ops->capacity or its default; never materializes. */
PINIO_API size_t pinio_controller_capacity(const pinio_controller *c);
/** ops->memory; -ENOTSUP when missing. Outputs untouched on failure. */
PINIO_API int pinio_controller_memory(pinio_controller *c, pinio_access mode, const uint8_t **ptr,
                                      size_t *size, pinio_diag *diag);
/** ops->memory_mut or -ENOTSUP. Outputs untouched on failure. */
PINIO_API int pinio_controller_memory_mut(pinio_controller *c, pinio_access mode, uint8_t **ptr,
                                          size_t *size, pinio_diag *diag);
/**
 * ops->split or -ENOTSUP; -ERANGE when `offset` > capacity (checked here).
 * On success the caller owns both halves and still owns `c` (destroy it);
 * on failure `*left`/`*right` are untouched.
 */
PINIO_API int pinio_controller_split(pinio_controller *c, size_t offset, pinio_controller **left,
                                     pinio_controller **right);
/**
 * ops->duplicate or -ENOTSUP; -EINVAL for a NULL `out`. On success the caller
 * owns `*out` as well as `c`; on failure `*out` is untouched and `c` is
 * unchanged (still the caller's).
 */
PINIO_API int pinio_controller_duplicate(pinio_controller *c, pinio_controller **out);
/**
 * ops->view or -ENOTSUP; -EINVAL for a NULL `out`; -ERANGE when
 * `start` > `end` or `end` > capacity (checked here, without materializing).
 * On success the caller owns `*out` as well as `c`; on failure `*out` is
 * untouched and `c` is unchanged.
 */
PINIO_API int pinio_controller_view(pinio_controller *c, size_t start, size_t end,
                                    pinio_controller **out);
/**
 * Copies [offset, offset + len) into `dst`: ops->copy_into or the default.
 * -ERANGE (checked here, overflow-safe) when the range passes the capacity;
 * then nothing is written. After a read error `dst` may hold part of the
 * range. `dst` stays the caller's either way.
 */
PINIO_API int pinio_controller_copy_into(pinio_controller *c, size_t offset, void *dst, size_t len,
                                         pinio_diag *diag);
/**
 * ops->grow or -ENOTSUP; -EINVAL when `align` is not a power of two.
 * On failure the controller (memory, capacity, alignment) is unchanged.
 */
PINIO_API int pinio_controller_grow(pinio_controller *c, size_t size, size_t align);
/**
 * ops->try_detach or -ENOTSUP; -EINVAL for a NULL `out`; the op's errors
 * (e.g. #PINIO_EWOULD_COPY in zero-copy mode when only a copy could hand
 * the memory over). On success
 * the caller owns `out`'s buffer (pinio_detached_free()) and `c` is empty but
 * still the caller's to destroy; on failure `c` keeps its memory and `*out`
 * is untouched.
 */
PINIO_API int pinio_controller_try_detach(pinio_controller *c, pinio_access mode,
                                          pinio_detached *out, pinio_diag *diag);
/** ops->destroy (if any). NULL-safe. `c` must not be used afterwards. */
PINIO_API void pinio_controller_destroy(pinio_controller *c);

/**
 * A native controller: `capacity` uninitialized bytes of heap memory aligned
 * to `align` (a power of two up to #PINIO_MAX_ALIGN; 0 means
 * #PINIO_DEFAULT_ALIGN). Capacity 0 allocates nothing (a dangling aligned
 * pointer). Property NATIVE. split is zero-copy (the buffer becomes a shared
 * view owned by both halves); duplicate is unsupported (cloning copies);
 * grow reallocs when the alignment allows it, else allocates and copies;
 * try_detach hands back the buffer with `free()` as free function.
 *
 * @return 0, -EINVAL (bad align, NULL out), -ENOMEM. On success the caller
 *         owns `*out`; on failure `*out` is untouched.
 */
PINIO_API int pinio_controller_native_new(pinio_controller **out, size_t capacity, size_t align);

/**
 * A shared controller over `*src` with `property` (the seed's
 * SharedBytesAllocationController). Reads are zero-copy; the capacity is
 * `src->len`; alloc_align is the alignment the view's allocation was
 * created with: the `align` of pinio_view_alloc() memory, else (memory
 * adopted by pinio_view_wrap(), static views) the alignment its start
 * address has, at most #PINIO_DEFAULT_ALIGN; never less than 16, the
 * seed's MAX_ALIGN, even for a source less aligned. It is also the
 * alignment of the private copy and of what try_detach returns (the copy
 * of a source less aligned than 16 is 16-aligned); grow is unsupported.
 * copy_into never copies-on-write. try_detach hands the view's memory over
 * in place only when the view is the unique, writable owner of a whole
 * allocation whose address is aligned to alloc_align; otherwise it copies
 * into a buffer aligned to alloc_align (zero-copy mode: #PINIO_EWOULD_COPY).
 *
 * `property` is NATIVE, FILE, PINNED or OTHER: a view is host memory the
 * CPU reads directly, so DEVICE (read back lazily) is refused.
 *
 * @return 0 or -ENOMEM/-EINVAL. On success the controller owns the reference
 *         `*src` held and `*src` is reset to an empty view; on failure the
 *         caller still owns `*src` (unchanged) and `*out` is untouched.
 */
PINIO_API int pinio_controller_shared_new(pinio_controller **out, pinio_view *src,
                                          pinio_property property);

/** An open file shared (refcounted) by every window cut from it. */
typedef struct pinio_file pinio_file;

/**
 * Opens `path` read-only once; windows, splits and duplicates share it.
 *
 * @return 0 or a negative errno (-ENOENT, -EACCES, -EISDIR, -ENOMEM...);
 *         `diag` (may be NULL) names the path. On success the caller owns
 *         the only reference to `*out`; on failure `*out` is untouched.
 */
PINIO_API int pinio_file_open(pinio_file **out, const char *path, pinio_diag *diag);
/** Adds a reference; returns `f`. Thread-safe. */
PINIO_API pinio_file *pinio_file_retain(pinio_file *f);
/** Drops a reference; the last one closes the descriptor. NULL-safe, thread-safe. */
PINIO_API void pinio_file_release(pinio_file *f);
/** Size in bytes at open time. */
PINIO_API uint64_t pinio_file_size(const pinio_file *f);
/** The path given to pinio_file_open(), owned by `f`. */
PINIO_API const char *pinio_file_path(const pinio_file *f);

/**
 * A file controller: the lazy window [offset, offset + length) of `file`,
 * property FILE, alloc_align #PINIO_DEFAULT_ALIGN. Nothing is read here.
 * memory() reads the window once into an aligned private buffer (zero-copy
 * mode: #PINIO_EWOULD_COPY while not yet read); copy_into reads straight from
 * the file into the caller's buffer until then. split and duplicate give lazy
 * windows of the same file before the first read, and views of the read
 * buffer after it, so a mutation is never lost. No grow; try_detach
 * materializes (mode permitting) and hands the buffer over.
 *
 * @return 0, -ERANGE when the window passes the end of the file (diag names
 *         the path, offset and size), -ENOMEM. On success the controller
 *         holds its own reference to `file` (the caller keeps its own); on
 *         failure `*out` is untouched.
 */
PINIO_API int pinio_controller_file_new(pinio_controller **out, pinio_file *file, uint64_t offset,
                                        size_t length, pinio_diag *diag);

#ifdef __cplusplus
}
#endif

#endif /* PINIO_CONTROLLER_H */
