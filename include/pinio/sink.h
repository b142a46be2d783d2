/**
 * @file sink.h
 * @brief Where a stream's bytes go: sinks as a table of const structs.
 *
 * A stream (stream.h) reads a plan into a small ring of staging slots and
 * hands each read, once it has landed in its slot, to a sink as a
 * #pinio_sink_chunk. The sink consumes the chunk (calls back, writes it,
 * starts a copy) and tells the stream when the slot may be overwritten:
 * synchronously by returning from `chunk`, or later through `slot_wait`
 * (a sink that copies asynchronously, e.g. to a GPU).
 *
 * Built-in sinks:
 *   - #pinio_sink_host: a callback per tensor fragment (tensor, offset in
 *     the tensor, bytes), for callers that place tensors themselves;
 *   - #pinio_sink_file: writes every input file, whole, under a target
 *     directory (what `pinio stage` does); a sliced plan is refused;
 *   - #pinio_sink_cuda, #pinio_sink_hip: every tensor to a GPU, at its own
 *     256-byte aligned address, the driver loaded at run time.
 * A caller may write its own sink against this header: the table is the
 * whole contract.
 *
 * Threads: every sink entry runs on the thread that called pinio_stream(),
 * in this order: open, then chunk/slot_wait interleaved, then finish (only
 * when every chunk was accepted), then close (always, once open succeeded).
 */
#ifndef PINIO_SINK_H
#define PINIO_SINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinio/bytes.h"
#include "pinio/common.h"
#include "pinio/plan.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The staging ring as a sink sees it when it is opened. */
typedef struct pinio_sink_setup {
    const pinio_plan *plan;    /**< the plan being streamed (reads cut at `slot_size`) */
    uint8_t *const *slots;     /**< `nslots` slot bases, each `slot_size` bytes, 2 MiB aligned */
    unsigned nslots;
    size_t slot_size;
    int node;                  /**< NUMA node of the slots, or -1 */
} pinio_sink_setup;

/** One landed read: file bytes [file_offset, file_offset + len) at `data`. */
typedef struct pinio_sink_chunk {
    size_t read;               /**< the plan read (pinio_plan_read_at()) */
    const pinio_plan_read *r;
    uint32_t file;             /**< plan file index */
    uint64_t file_offset;      /**< == r->offset, a multiple of the plan's alignment */
    const uint8_t *data;       /**< inside slot `slot`, aligned like `file_offset` */
    size_t len;                /**< bytes that hold file data (`r->need`) */
    unsigned slot;
} pinio_sink_chunk;

/** The part of one tensor that a chunk holds. For a sliced tensor (plan.h,
 *  pinio_plan_opts::split), a part of its slice: `offset` counts in the
 *  slice packed contiguous, shaped like the slice (t->shape), so a sink
 *  that puts each fragment at its tensor's place + `offset` lands the slice
 *  as pinio_plan_gather() would pack it. */
typedef struct pinio_sink_fragment {
    size_t tensor;             /**< plan tensor index (pinio_plan_tensor_at()) */
    const pinio_plan_tensor *t;
    uint64_t offset;           /**< offset of `data[0]` in the tensor (its slice, packed) */
    const uint8_t *data;
    size_t len;
} pinio_sink_fragment;

/**
 * Walks the selected tensors' fragments in chunk `c`, in file order.
 * Start with `*cursor` = 0; each call fills `*f` and returns true, or
 * returns false when the chunk holds no further fragment. Bytes of a chunk
 * that belong to no selected tensor (alignment, merged holes, headers) are
 * not visited; nor are the bytes of a sliced tensor outside its slice (the
 * holes between a strided slice's runs that the plan read through, within
 * pinio_plan_opts::max_overread). A strided slice gives one fragment per
 * run, or per part of a run when a run spans several reads (a slot's end
 * cuts it): every byte of the slice is visited once over the chunks.
 */
PINIO_API bool pinio_sink_next_fragment(const pinio_plan *p, const pinio_sink_chunk *c,
                                        size_t *cursor, pinio_sink_fragment *f);

/**
 * A sink. Entries marked optional may be NULL. Every entry returning int
 * returns 0 or a negative code that stops the stream with that code;
 * a failing entry names what failed in `diag`.
 */
typedef struct pinio_sink {
    const char *name;          /**< "host", "file", ... */
    const char *description;   /**< one line, for --help */
    size_t priv_size;          /**< bytes of private state the stream allocates (zeroed) */
    /** Prepares for the stream: `cfg` is the sink's own config struct (see
     *  each sink), read during the call only unless the sink says so. On
     *  failure the sink has released everything; close is not called. */
    int (*open)(void *priv, const void *cfg, const pinio_sink_setup *s, pinio_diag *diag);
    /** A read has landed in `c->slot`. Unless the sink has `slot_wait`, the
     *  slot may be overwritten as soon as this returns. */
    int (*chunk)(void *priv, const pinio_sink_chunk *c, pinio_diag *diag);
    /** Optional: blocks until the sink no longer reads slot `slot` (every
     *  copy started from it has completed). Called before the stream reads
     *  into a slot again, and for every slot before finish. */
    int (*slot_wait)(void *priv, unsigned slot, pinio_diag *diag);
    /** Optional: every chunk was delivered; flush, sync, verify, publish. */
    int (*finish)(void *priv, pinio_diag *diag);
    /** Optional: releases everything; after a failure it undoes what is
     *  half done (removes temporary files, ...). Cannot fail. */
    void (*close)(void *priv, bool ok);
    /** Optional: the NUMA node the staging should be on for this config
     *  (a GPU's node), or -1 for no preference. Called before the ring is
     *  placed, when the stream's node is #PINIO_NODE_AUTO (load.h). */
    int (*prefer_node)(const void *cfg);
} pinio_sink;

/**
 * Host sink: `fn` is called for every tensor fragment, in file order
 * within each file; `bytes` is valid during the call only. Return 0 to go
 * on, or a negative code to stop the stream with it.
 */
typedef int (*pinio_sink_host_fn)(void *ctx, const pinio_sink_fragment *f);

/** Config of #pinio_sink_host. */
typedef struct pinio_sink_host_cfg {
    pinio_sink_host_fn fn;     /**< required */
    void *ctx;
} pinio_sink_host_cfg;

/** Config of #pinio_sink_file. The copy is published as one step: every
 *  file is written under a temporary name (created O_EXCL|O_NOFOLLOW) next
 *  to its target, and only once all are complete, durable and (with
 *  `verify`) read back are they renamed into place, the index last. A
 *  rename that fails puts every replaced file back. On failure nothing is
 *  left: no temporary, no folder the sink made, no target replaced. The
 *  sink copies files, not tensors: a plan that slices a tensor
 *  (pinio_stream_opts::split, pinio_stream_opts::slices) is refused at
 *  open with -EINVAL naming it, since a rank's slices are no copy of the
 *  checkpoint. The chunks are written by a thread of the sink's own (it
 *  has `slot_wait`), so the stream reads on while they are written; a
 *  failed write fails the stream at the next chunk, slot wait or finish,
 *  naming the temporary file and offset. */
typedef struct pinio_sink_file_cfg {
    /** Existing directory receiving each input file under its base name
     *  (the real name for a /proc/self/fd/N path), a shard under its path
     *  relative to the index's folder (subfolders are made), and the index
     *  file too, when the plan has one. Required; an s3:// URL is refused
     *  at open with -ENOTSUP (objects are read, never written). */
    const char *dir;
    /** Replace files that already exist there, the index included (else
     *  -EEXIST before anything is written). */
    bool overwrite;
    /** Before anything is published, read every copy back (past the page
     *  cache where O_DIRECT is allowed) and compare a position-keyed 64-bit
     *  checksum with the one computed as the bytes streamed. */
    bool verify;
    /** O_DIRECT policy for the writes; AUTO: where the target allows it. */
    pinio_direct_policy direct;
} pinio_sink_file_cfg;

/** Tensors placed on a GPU by #pinio_sink_cuda or #pinio_sink_hip. Opaque
 *  and refcounted: the caller's handle and every pinio_bytes cut from it
 *  (pinio_gpu_arena_bytes()) hold one reference each. */
typedef struct pinio_gpu_arena pinio_gpu_arena;

/** Config of #pinio_sink_cuda and #pinio_sink_hip. */
typedef struct pinio_sink_gpu_cfg {
    /** Device ordinal (as cuDeviceGet counts); ignored when `pci_bus_id` is set. */
    int device;
    /** Optional: the device by PCI bus id ("0000:65:00.0"). */
    const char *pci_bus_id;
    /** Optional: where each selected tensor goes (index = plan tensor index),
     *  device addresses aligned to 256 bytes with room for the tensor (e.g.
     *  torch's). NULL: pinio allocates one device arena for the load, each
     *  tensor at a 256-byte aligned offset. */
    const uint64_t *dptrs;
    size_t ndptrs;
    /** Optional, instead of `dptrs`: called once when the sink opens, on
     *  the stream's thread with the device current, when the selected
     *  tensors are known, to fill `dptrs[i]` for each of the `n` tensors of
     *  `plan` (pinio_plan_tensor_at(), plan order) under the rules of
     *  `dptrs` (a zero-byte tensor may get 0). For callers whose allocator
     *  needs each tensor's shape and dtype (torch.empty), which only the
     *  plan the stream builds knows for sure. Return 0, or a negative code
     *  that stops the stream with it (set `diag`). Ignored when `dptrs` is
     *  set. */
    int (*place)(void *ctx, const pinio_plan *plan, uint64_t *dptrs, size_t n, pinio_diag *diag);
    void *place_ctx;
    /** Required: receives the arena on success (pinio_gpu_arena_free());
     *  untouched on failure. */
    pinio_gpu_arena **out;
} pinio_sink_gpu_cfg;

/** One tensor on the device; `name` valid while the arena lives. */
typedef struct pinio_gpu_tensor {
    const char *name;
    uint64_t dptr;             /**< device address, a multiple of 256 */
    uint64_t nbytes;
} pinio_gpu_tensor;

/** What a GPU sink did. */
typedef struct pinio_gpu_info {
    int device;                /**< ordinal */
    char pci_bus_id[32];
    int driver_version;        /**< cuDriverGetVersion (12080 = 12.8) */
    size_t tensors;
    uint64_t bytes;            /**< tensor bytes on the device */
    uint64_t arena_bytes;      /**< device memory pinio allocated (0 with caller pointers) */
    uint64_t copies;           /**< cuMemcpyHtoDAsync calls (one per tensor fragment) */
    double h2d_seconds;        /**< first copy issued to last copy completed */
    unsigned slots_registered; /**< slots this sink registered (cuMemHostRegister) */
    unsigned slots_preregistered; /**< slots already registered by someone else */
} pinio_gpu_info;

/** Tensor count of an arena. */
PINIO_API size_t pinio_gpu_arena_tensors(const pinio_gpu_arena *a);
/** Tensor `i` (plan order); -ERANGE past the end. */
PINIO_API int pinio_gpu_arena_tensor(const pinio_gpu_arena *a, size_t i, pinio_gpu_tensor *out);
/** Fills `*out`. */
PINIO_API void pinio_gpu_arena_get_info(const pinio_gpu_arena *a, pinio_gpu_info *out);
/**
 * Reads bytes [offset, offset + len) of tensor `i` back to host memory
 * `dst` (cuMemcpyDtoH_v2 of that range only: reading a sub-range reads
 * only that range). Callable from any thread: the device is made current
 * around the copy and the thread's own state restored after (CUDA: the
 * primary context pushed and popped; HIP: hipSetDevice, then the thread's
 * previous device again).
 * @return 0, -ERANGE (outside the tensor), or the driver's failure as
 *         -EIO/-ENOMEM with `diag` naming the call.
 */
PINIO_API int pinio_gpu_arena_read(pinio_gpu_arena *a, size_t i, uint64_t offset, void *dst,
                                    size_t len, pinio_diag *diag);
/**
 * Tensor `i` (plan order) as pinio_bytes of property #PINIO_PROP_DEVICE,
 * len = the tensor's size; nothing is copied here. Reading it back is lazy
 * (cubecl's Device property): pinio_bytes_read()/copy_into of a range
 * copies that range only, straight into the caller's buffer (one
 * cuMemcpyDtoH_v2); pinio_bytes_data() reads the whole tensor back once
 * into a private host buffer (zero-copy mode: #PINIO_EWOULD_COPY) and
 * serves every later read from it. view, split and duplicate are lazy
 * windows of the same device range (nothing read, property kept). The host
 * side is read-only: data_mut and grow are -ENOTSUP, try_detach copies
 * (pinio_bytes_clone() too: clones share the device range). The bytes
 * hold a reference on the arena: they may outlive the caller's handle, and
 * the device memory is freed when the last of them and the handle are gone.
 * Reads may run on any thread (as pinio_gpu_arena_read()), concurrently
 * on the same bytes; the first whole read-back happens once.
 *
 * @return 0, -ERANGE (no tensor `i`; `diag` says so), -EINVAL (NULL
 *         arguments), -ENOMEM. On success the caller owns `*out` (free it
 *         with pinio_bytes_free()) and keeps its arena handle; on failure
 *         `*out` is untouched.
 */
PINIO_API int pinio_gpu_arena_bytes(pinio_gpu_arena *a, size_t i, pinio_bytes **out,
                                    pinio_diag *diag);
/** Adds a reference to `a`; returns `a`. Thread-safe. */
PINIO_API pinio_gpu_arena *pinio_gpu_arena_retain(pinio_gpu_arena *a);
/** Drops a reference; the last one (the caller's handle and every bytes
 *  of pinio_gpu_arena_bytes(), in any order) frees the device memory pinio
 *  allocated, releases the primary context (CUDA) and the driver. NULL is a
 *  no-op. Thread-safe. */
PINIO_API void pinio_gpu_arena_free(pinio_gpu_arena *a);

/** One GPU, as its driver and sysfs describe it. */
typedef struct pinio_gpu_device {
    int index;                 /**< ordinal: cuda:N */
    char name[96];
    char pci_bus_id[32];
    uint64_t memory;           /**< bytes of device memory */
    int node;                  /**< NUMA node (sysfs of the PCI bus id), -1 unknown */
} pinio_gpu_device;

/**
 * Lists the GPUs of one API: the driver loaded as its sink loads it.
 * @param api   "cuda" (NULL too) or "hip"; another name is -EINVAL
 * @param out   room for `cap` devices (may be NULL with cap 0)
 * @param n     receives the number of devices (may exceed `cap`)
 * @param driver_version  optional: cuDriverGetVersion (12080 = 12.8)
 * @param diag  why there are none: "no CUDA driver: ..." (-ENODEV), or the
 *              driver's answer to cuInit (CUDA_ERROR_NO_DEVICE: -ENODEV)
 * @return 0, or a negative code with `*n` = 0.
 */
PINIO_API int pinio_gpu_devices(const char *api, pinio_gpu_device *out, size_t cap, size_t *n,
                                int *driver_version, pinio_diag *diag);

/** Calls a #pinio_sink_host_cfg's function per tensor fragment. */
PINIO_API extern const pinio_sink pinio_sink_host;
/** Copies the input files under a directory: temporary name, written,
 *  fsync'ed, renamed into place (directory fsync'ed), optionally verified. */
PINIO_API extern const pinio_sink pinio_sink_file;
/** Copies each tensor to its own 256-byte aligned device address with the
 *  CUDA driver (dlopen'ed: libcuda.so.1, or the path in PINIO_CUDA_LIB),
 *  from the registered slots on a non-blocking stream, one event per slot. */
PINIO_API extern const pinio_sink pinio_sink_cuda;
/** The same for AMD GPUs through HIP (libamdhip64.so, or PINIO_HIP_LIB). */
PINIO_API extern const pinio_sink pinio_sink_hip;

/** The built-in sink called `name`, or NULL. */
PINIO_API const pinio_sink *pinio_sink_find(const char *name);

/** Built-in sink `i` (0, 1, ...), or NULL past the last: for listings. */
PINIO_API const pinio_sink *pinio_sink_at(size_t i);

#ifdef __cplusplus
}
#endif

#endif /* PINIO_SINK_H */
