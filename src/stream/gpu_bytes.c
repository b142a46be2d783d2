/*
 * Tensors on the GPU as pinio_bytes of property DEVICE (contract in
 * sink.h, pinio_gpu_arena_bytes()): a controller over a device range
 * [dptr, dptr + length) of one arena tensor, written against the public
 * controller API only (controller.h), like the file controller it mirrors.
 *
 * Why lazy: a tensor on the device is read back to the host for a check, a
 * hash or a slice far more often than whole, and a D2H copy of gigabytes
 * to look at a few bytes is what cubecl's Device property exists to avoid.
 * copy_into therefore copies exactly the range asked for, straight into the
 * caller's buffer, until something needs the whole tensor in host memory
 * (memory()): then it is read back once, and every later read is served
 * from that buffer.
 *
 * Why view/split/duplicate are always new device windows, even after the
 * read-back: the host side is read-only (no memory_mut), so a window can
 * never lose a mutation, and a window of the device range keeps reporting
 * DEVICE and stays lazy for its own sub-ranges. No host buffer is shared
 * between controllers, so none needs a reference count.
 *
 * Why each controller holds an arena reference: bytes handed to a caller
 * (a Python tensor, a cache) must not dangle when the arena handle that
 * made them is released first; the last holder frees the device memory.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "pinio/bytes.h"
#include "pinio/controller.h"
#include "pinio/sink.h"

typedef struct dev_ctrl {
    pinio_controller base;
    pinio_gpu_arena *arena;    /* one reference */
    size_t tensor;
    uint64_t offset;           /* in the tensor */
    size_t length;
    pthread_mutex_t lock;      /* the whole read-back happens once */
    _Atomic(uint8_t *) host;   /* the read-back, published with release */
} dev_ctrl;

static dev_ctrl *dc(const pinio_controller *c)
{
    return (dev_ctrl *)c;
}

static uint8_t *host_of(const dev_ctrl *d)
{
    return atomic_load_explicit(&((dev_ctrl *)d)->host, memory_order_acquire);
}

static int dev_window(pinio_controller **out, pinio_gpu_arena *a, size_t tensor, uint64_t offset,
                      size_t length);

static size_t dev_alloc_align(const pinio_controller *c)
{
    (void)c;
    return PINIO_DEFAULT_ALIGN;
}

static pinio_property dev_property(const pinio_controller *c)
{
    (void)c;
    return PINIO_PROP_DEVICE;
}

static size_t dev_capacity(const pinio_controller *c)
{
    return dc(c)->length;
}

/* Reads the whole range back once (a failed read publishes nothing, so it
 * can be retried). */
static int dev_memory(pinio_controller *c, pinio_access mode, const uint8_t **ptr, size_t *size,
                      pinio_diag *diag)
{
    dev_ctrl *d = dc(c);
    uint8_t *h = host_of(d);
    if (!h && d->length) {
        if (mode == PINIO_ACCESS_ZERO_COPY)
            return PINIO_EWOULD_COPY;
        int rc = 0;
        pthread_mutex_lock(&d->lock);
        h = atomic_load_explicit(&d->host, memory_order_relaxed);
        if (!h) {
            size_t cap = (d->length + PINIO_DEFAULT_ALIGN - 1) / PINIO_DEFAULT_ALIGN *
                         PINIO_DEFAULT_ALIGN;
            h = aligned_alloc(PINIO_DEFAULT_ALIGN, cap);
            rc = h ? pinio_gpu_arena_read(d->arena, d->tensor, d->offset, h, d->length, diag)
                   : -ENOMEM;
            if (rc == 0) {
                atomic_store_explicit(&d->host, h, memory_order_release);
            } else {
                free(h);
                h = NULL;
            }
        }
        pthread_mutex_unlock(&d->lock);
        if (rc < 0)
            return rc;
    }
    /* A zero-length window has no buffer: any aligned non-NULL pointer. */
    static const uint8_t empty[1];
    *ptr = h ? h : empty;
    *size = d->length;
    return 0;
}

static int dev_copy_into(pinio_controller *c, size_t offset, void *dst, size_t len,
                         pinio_diag *diag)
{
    dev_ctrl *d = dc(c);
    const uint8_t *h = host_of(d);
    if (h) {
        memcpy(dst, h + offset, len);
        return 0;
    }
    return pinio_gpu_arena_read(d->arena, d->tensor, d->offset + offset, dst, len, diag);
}

static int dev_view(pinio_controller *c, size_t start, size_t end, pinio_controller **out)
{
    dev_ctrl *d = dc(c);
    return dev_window(out, d->arena, d->tensor, d->offset + start, end - start);
}

static int dev_split(pinio_controller *c, size_t offset, pinio_controller **left,
                     pinio_controller **right)
{
    pinio_controller *l, *r;
    int rc = dev_view(c, 0, offset, &l);
    if (rc)
        return rc;
    rc = dev_view(c, offset, dc(c)->length, &r);
    if (rc) {
        pinio_controller_destroy(l);
        return rc;
    }
    *left = l;
    *right = r;
    return 0;
}

static int dev_duplicate(pinio_controller *c, pinio_controller **out)
{
    return dev_view(c, 0, dc(c)->length, out);
}

static void dev_destroy(pinio_controller *c)
{
    dev_ctrl *d = dc(c);
    free(host_of(d));
    pinio_gpu_arena_free(d->arena);
    pthread_mutex_destroy(&d->lock);
    free(d);
}

static const pinio_controller_ops dev_ops = {
    .size = sizeof(pinio_controller_ops),
    .alloc_align = dev_alloc_align,
    .property = dev_property,
    .capacity = dev_capacity,
    .memory = dev_memory,
    .split = dev_split,
    .duplicate = dev_duplicate,
    .copy_into = dev_copy_into,
    .destroy = dev_destroy,
    .view = dev_view,
};

static int dev_window(pinio_controller **out, pinio_gpu_arena *a, size_t tensor, uint64_t offset,
                      size_t length)
{
    dev_ctrl *d = malloc(sizeof(*d));
    if (!d)
        return -ENOMEM;
    d->base.ops = &dev_ops;
    d->arena = pinio_gpu_arena_retain(a);
    d->tensor = tensor;
    d->offset = offset;
    d->length = length;
    pthread_mutex_init(&d->lock, NULL);
    atomic_init(&d->host, NULL);
    *out = &d->base;
    return 0;
}

int pinio_gpu_arena_bytes(pinio_gpu_arena *a, size_t i, pinio_bytes **out, pinio_diag *diag)
{
    pinio_gpu_tensor t;
    if (!a || !out)
        return -EINVAL;
    if (pinio_gpu_arena_tensor(a, i, &t) < 0) {
        pinio_diag_set(diag, -ERANGE, "gpu arena: no tensor %zu (%zu tensors)", i,
                       pinio_gpu_arena_tensors(a));
        return -ERANGE;
    }
    if (t.nbytes > SIZE_MAX)
        return -ERANGE;
    pinio_controller *c;
    int rc = dev_window(&c, a, i, 0, (size_t)t.nbytes);
    if (rc)
        return rc;
    rc = pinio_bytes_from_controller(out, c, (size_t)t.nbytes);
    if (rc)
        pinio_controller_destroy(c);
    return rc;
}
