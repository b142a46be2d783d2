/*
 * The GPU sinks' body (CUDA and HIP, each described in its sink_*.c): each
 * tensor to its own 256-byte aligned device address, copied from the
 * staging slots while the next slots are being read. Names below are the
 * CUDA driver's; HIP's are their mirror (gpu_dl.h).
 *
 *   prefer_node: the GPU's NUMA node (sysfs of its PCI bus id), so that
 *           the stream places the staging ring where the GPU's DMA reads it
 *   open:   driver (gpu_dl.c), device by ordinal or PCI bus id made
 *           current on this thread (bind() below: CUDA's primary context,
 *           the one torch uses, pushed; HIP's device selected),
 *           the tensors' device addresses (one arena, or the caller's),
 *           a non-blocking stream and one event per slot
 *   chunk:  on a slot's first chunk, cuMemHostRegister of the slot; then
 *           one cuMemcpyHtoDAsync per tensor fragment, to the tensor's
 *           address + the fragment's offset; the slot's event recorded
 *   slot_wait: cuEventSynchronize of the slot's event
 *   finish: the stream synchronized; the arena handed to the caller
 *   close:  events, stream, the slots' registrations, the device unbound
 *
 * Why realign during the copy: a tensor's file offset is whatever the
 * checkpoint says (8-byte aligned at best), and a kernel wants 256; one
 * copy per fragment to the tensor's own address costs nothing more than
 * one copy per slot, and nothing is moved on the device afterwards.
 *
 * Why slots are registered at their first chunk, not at open: the
 * execution registers them with io_uring when it starts, and the order
 * that keeps both working is io_uring first, then the driver (never
 * driver-allocated memory handed to io_uring: io-uring-numa.md §3.4). A
 * slot someone else already registered (CUDA_ERROR_HOST_MEMORY_ALREADY_
 * REGISTERED) is used as it is and left registered.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pinio/numa.h"
#include "pinio/sink.h"
#include "src/base/clock.h"
#include "src/stream/gpu_internal.h"

#define DEV_ALIGN 256u

struct pinio_gpu_arena {
    /* The caller's handle and every DEVICE pinio_bytes cut from the arena
     * (gpu_bytes.c) each hold one: the bytes may outlive the handle. */
    atomic_uint refs;
    pinio__gpu drv;
    CUdevice dev;
    CUcontext ctx;             /* CUDA: primary context, retained */
    bool ctx_retained;         /* CUDA: retained; HIP: the device was opened */
    CUdeviceptr base;          /* pinio's allocation, 0 with caller pointers */
    size_t n;
    char **names;
    uint64_t *dptr, *nbytes;
    pinio_gpu_info info;
};

pinio_gpu_arena *pinio_gpu_arena_retain(pinio_gpu_arena *a)
{
    atomic_fetch_add_explicit(&a->refs, 1, memory_order_relaxed);
    return a;
}

/*
 * Makes the arena's device current on the calling thread, until unbind().
 * CUDA: the device's primary context (shared with torch) pushed, popped
 * after, so the caller's own current context is untouched. HIP: its
 * context calls are deprecated (one context per device; gpu-python-
 * peers.md §2.4), so the device is selected with hipSetDevice and the
 * thread's previous device restored after.
 */
static CUresult bind(pinio_gpu_arena *a, int *prev)
{
    if (!a->drv.api->hip)
        return a->drv.CtxPushCurrent(a->ctx);
    CUresult r = a->drv.GetDevice(prev);
    return r == CUDA_SUCCESS ? a->drv.SetDevice(a->dev) : r;
}

static void unbind(pinio_gpu_arena *a, int prev)
{
    CUcontext popped;
    if (a->drv.api->hip)
        a->drv.SetDevice(prev);
    else
        a->drv.CtxPopCurrent(&popped);
}

/* The failed call of bind(), for messages. */
static const char *bind_sym(const pinio_gpu_arena *a)
{
    return a->drv.api->hip ? a->drv.sym.SetDevice : a->drv.sym.CtxPushCurrent;
}

void pinio_gpu_arena_free(pinio_gpu_arena *a)
{
    /* acq_rel: the last holder sees every other holder's reads done. */
    if (!a || atomic_fetch_sub_explicit(&a->refs, 1, memory_order_acq_rel) != 1)
        return;
    int prev = 0;
    if (a->ctx_retained) {
        if (a->base && bind(a, &prev) == CUDA_SUCCESS) {
            a->drv.MemFree(a->base);
            unbind(a, prev);
        }
        if (!a->drv.api->hip)
            a->drv.DevicePrimaryCtxRelease(a->dev);
    }
    for (size_t i = 0; a->names && i < a->n; i++)
        free(a->names[i]);
    free(a->names);
    free(a->dptr);
    free(a->nbytes);
    pinio__gpu_close(&a->drv);
    free(a);
}

size_t pinio_gpu_arena_tensors(const pinio_gpu_arena *a)
{
    return a ? a->n : 0;
}

int pinio_gpu_arena_tensor(const pinio_gpu_arena *a, size_t i, pinio_gpu_tensor *out)
{
    if (!a || !out || i >= a->n)
        return -ERANGE;
    *out = (pinio_gpu_tensor){ .name = a->names[i], .dptr = a->dptr[i], .nbytes = a->nbytes[i] };
    return 0;
}

void pinio_gpu_arena_get_info(const pinio_gpu_arena *a, pinio_gpu_info *out)
{
    *out = a->info;
}

int pinio_gpu_arena_read(pinio_gpu_arena *a, size_t i, uint64_t offset, void *dst, size_t len,
                          pinio_diag *diag)
{
    if (!a || i >= a->n || offset > a->nbytes[i] || len > a->nbytes[i] - offset) {
        pinio_diag_set(diag, -ERANGE, "gpu arena: bytes [%llu, +%zu) outside tensor %zu",
                       (unsigned long long)offset, len, i);
        return -ERANGE;
    }
    if (!len)
        return 0;
    int prev = 0;
    CUresult r = bind(a, &prev);
    if (r != CUDA_SUCCESS)
        return pinio__gpu_fail(&a->drv, r, bind_sym(a), diag);
    r = a->drv.MemcpyDtoH(dst, a->dptr[i] + offset, len);
    unbind(a, prev);
    return r == CUDA_SUCCESS ? 0 : pinio__gpu_fail(&a->drv, r, a->drv.sym.MemcpyDtoH, diag);
}

/* The tensors' device addresses: the caller's, or one allocation with
 * each tensor at the next multiple of 256. */
static int place_tensors(pinio_gpu_arena *a, const pinio_plan *plan, const pinio_sink_gpu_cfg *c,
                         pinio_diag *diag)
{
    pinio_plan_info pi;
    pinio_plan_get_info(plan, &pi);
    a->n = pi.tensors;
    a->names = calloc(a->n + 1, sizeof(*a->names));
    a->dptr = calloc(a->n + 1, sizeof(*a->dptr));
    a->nbytes = calloc(a->n + 1, sizeof(*a->nbytes));
    if (!a->names || !a->dptr || !a->nbytes)
        return -ENOMEM;
    if (c->dptrs && c->ndptrs != a->n) {
        pinio_diag_set(diag, -EINVAL, "%s sink: %zu device pointers for %zu selected tensors",
                       a->drv.api->tag, c->ndptrs, a->n);
        return -EINVAL;
    }
    /* The caller's allocator sees the plan's own tensors, so its pointers
     * match the tensors the stream copies whatever changed since it last
     * looked; they are then checked as given ones. */
    const uint64_t *given = c->dptrs;
    if (!given && c->place) {
        int rc = c->place(c->place_ctx, plan, a->dptr, a->n, diag);
        if (rc < 0) {
            if (diag && diag->code == 0)
                pinio_diag_set(diag, rc, "%s sink: placing %zu tensors failed: %s",
                               a->drv.api->tag, a->n, pinio_strerror(rc));
            return rc;
        }
        given = a->dptr;
    }
    uint64_t off = 0;
    for (size_t i = 0; i < a->n; i++) {
        const pinio_plan_tensor *t = pinio_plan_tensor_at(plan, i);
        a->names[i] = strdup(t->name);
        if (!a->names[i])
            return -ENOMEM;
        a->nbytes[i] = t->nbytes;
        a->info.bytes += t->nbytes;
        if (given && given[i] % DEV_ALIGN) {
            pinio_diag_set(diag, -EINVAL,
                           "%s sink: device pointer 0x%llx for tensor '%s' is not aligned to "
                           "%u bytes", a->drv.api->tag, (unsigned long long)given[i], t->name,
                           DEV_ALIGN);
            return -EINVAL;
        }
        if (given && !given[i] && t->nbytes) {
            pinio_diag_set(diag, -EINVAL, "%s sink: no device pointer for tensor '%s' (%llu bytes)",
                           a->drv.api->tag, t->name, (unsigned long long)t->nbytes);
            return -EINVAL;
        }
        off = (off + DEV_ALIGN - 1) / DEV_ALIGN * DEV_ALIGN;
        a->dptr[i] = given ? given[i] : off;
        off += t->nbytes;
    }
    if (given || off == 0)
        return 0;
    CUresult r = a->drv.MemAlloc(&a->base, (size_t)off);
    if (r != CUDA_SUCCESS)
        return pinio__gpu_fail(&a->drv, r, a->drv.sym.MemAlloc, diag);
    a->info.arena_bytes = off;
    for (size_t i = 0; i < a->n; i++)
        a->dptr[i] += a->base;
    return 0;
}

static int open_device(pinio_gpu_arena *a, const pinio_sink_gpu_cfg *c, pinio_diag *diag)
{
    CUresult r = c->pci_bus_id ? a->drv.DeviceGetByPCIBusId(&a->dev, c->pci_bus_id)
                               : a->drv.DeviceGet(&a->dev, c->device);
    if (r != CUDA_SUCCESS) {
        int count = 0;
        a->drv.DeviceGetCount(&count);
        int rc = pinio__gpu_fail(&a->drv, r,
                                 c->pci_bus_id ? a->drv.sym.DeviceGetByPCIBusId : a->drv.sym.DeviceGet,
                                 diag);
        if (c->pci_bus_id)
            pinio_diag_set(diag, rc, "%s: no device at PCI bus id %s (%d device%s)",
                           a->drv.api->tag, c->pci_bus_id, count, count == 1 ? "" : "s");
        else
            pinio_diag_set(diag, rc, "%s: no device %s:%d (%d device%s)", a->drv.api->tag,
                           a->drv.api->tag, c->device, count,
                           count == 1 ? "" : "s");
        return rc;
    }
    a->info.device = a->dev;
    a->drv.DriverGetVersion(&a->info.driver_version);
    a->drv.DeviceGetPCIBusId(a->info.pci_bus_id, (int)sizeof(a->info.pci_bus_id), a->dev);
    if (!a->drv.api->hip) {
        r = a->drv.DevicePrimaryCtxRetain(&a->ctx, a->dev);
        if (r != CUDA_SUCCESS)
            return pinio__gpu_fail(&a->drv, r, a->drv.sym.DevicePrimaryCtxRetain, diag);
    }
    a->ctx_retained = true;
    return 0;
}

void pinio__gpu_sink_close(void *priv, bool ok)
{
    pinio__gpusink *s = priv;
    pinio_gpu_arena *a = s->a;
    if (a && s->pushed) {
        if (s->stream)
            a->drv.StreamSynchronize(s->stream); /* nothing may read a slot past here */
        for (unsigned i = 0; s->ev && i < s->nslots; i++)
            if (s->ev[i])
                a->drv.EventDestroy(s->ev[i]);
        if (s->stream)
            a->drv.StreamDestroy(s->stream);
        for (unsigned i = 0; s->reg && i < s->nslots; i++)
            if (s->reg[i] == 1)
                a->drv.MemHostUnregister(s->slots[i]);
        unbind(a, s->prev_dev);
    }
    if (ok && s->out && a)
        *s->out = a;
    else
        pinio_gpu_arena_free(a);
    free(s->ev);
    free(s->reg);
    free(s->slots);
}

int pinio__gpu_sink_open(void *priv, const pinio__gpu_api *api, const void *cfg,
                         const pinio_sink_setup *su, pinio_diag *diag)
{
    pinio__gpusink *s = priv;
    const pinio_sink_gpu_cfg *c = cfg;
    if (!c || !c->out) {
        pinio_diag_set(diag, -EINVAL, "%s sink: no place for the result (pinio_sink_gpu_cfg.out)",
                       api->tag);
        return -EINVAL;
    }
    s->out = c->out;
    s->plan = su->plan;
    s->nslots = su->nslots;
    s->slot_size = su->slot_size;
    s->a = calloc(1, sizeof(*s->a));
    if (s->a)
        atomic_init(&s->a->refs, 1);
    s->ev = calloc(su->nslots, sizeof(*s->ev));
    s->reg = calloc(su->nslots, sizeof(*s->reg));
    s->slots = calloc(su->nslots, sizeof(*s->slots));
    int rc = s->a && s->ev && s->reg && s->slots ? 0 : -ENOMEM;
    for (unsigned i = 0; rc == 0 && i < su->nslots; i++)
        s->slots[i] = su->slots[i];
    if (rc == 0)
        rc = pinio__gpu_open(&s->a->drv, api, diag);
    if (rc < 0) {
        free(s->a); /* nothing open in it */
        s->a = NULL;
    }
    if (rc == 0)
        rc = open_device(s->a, c, diag);
    pinio__gpu *drv = s->a ? &s->a->drv : NULL;
    if (rc == 0) {
        CUresult r = bind(s->a, &s->prev_dev);
        rc = r == CUDA_SUCCESS ? 0 : pinio__gpu_fail(drv, r, bind_sym(s->a), diag);
        s->pushed = rc == 0;
    }
    if (rc == 0)
        rc = place_tensors(s->a, s->plan, c, diag);
    if (rc == 0) {
        CUresult r = drv->StreamCreate(&s->stream, CU_STREAM_NON_BLOCKING);
        rc = r == CUDA_SUCCESS ? 0 : pinio__gpu_fail(drv, r, drv->sym.StreamCreate, diag);
    }
    for (unsigned i = 0; rc == 0 && i < s->nslots; i++) {
        CUresult r = drv->EventCreate(&s->ev[i], CU_EVENT_DISABLE_TIMING);
        rc = r == CUDA_SUCCESS ? 0 : pinio__gpu_fail(drv, r, drv->sym.EventCreate, diag);
    }
    if (s->a)
        s->a->info.tensors = s->a->n;
    if (rc < 0)
        pinio__gpu_sink_close(s, false);
    return rc;
}

static int register_slot(pinio__gpusink *s, unsigned slot, pinio_diag *diag)
{
    pinio_gpu_arena *a = s->a;
    CUresult r = a->drv.MemHostRegister(s->slots[slot], s->slot_size, CU_MEMHOSTREGISTER_PORTABLE);
    if (r == CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED) {
        s->reg[slot] = -1;
        a->info.slots_preregistered++;
        return 0;
    }
    if (r != CUDA_SUCCESS)
        return pinio__gpu_fail(&a->drv, r, a->drv.sym.MemHostRegister, diag);
    s->reg[slot] = 1;
    a->info.slots_registered++;
    return 0;
}

int pinio__gpu_sink_chunk(void *priv, const pinio_sink_chunk *c, pinio_diag *diag)
{
    pinio__gpusink *s = priv;
    pinio_gpu_arena *a = s->a;
    int rc = s->reg[c->slot] ? 0 : register_slot(s, c->slot, diag);
    if (rc < 0)
        return rc;
    if (!s->t_first)
        s->t_first = pinio__now_s();
    size_t cur = 0;
    pinio_sink_fragment f;
    while (pinio_sink_next_fragment(s->plan, c, &cur, &f)) {
        CUresult r = a->drv.MemcpyHtoDAsync(a->dptr[f.tensor] + f.offset, f.data, f.len, s->stream);
        if (r != CUDA_SUCCESS) {
            pinio_diag why = { 0 };
            rc = pinio__gpu_fail(&a->drv, r, a->drv.sym.MemcpyHtoDAsync, &why);
            pinio_diag_set(diag, rc, "%s: copying tensor '%s' bytes [%llu, +%zu): %s", a->drv.api->tag, f.t->name,
                           (unsigned long long)f.offset, f.len, why.msg);
            return rc;
        }
        a->info.copies++;
    }
    CUresult r = a->drv.EventRecord(s->ev[c->slot], s->stream);
    return r == CUDA_SUCCESS ? 0 : pinio__gpu_fail(&a->drv, r, a->drv.sym.EventRecord, diag);
}

int pinio__gpu_sink_slot_wait(void *priv, unsigned slot, pinio_diag *diag)
{
    pinio__gpusink *s = priv;
    CUresult r = s->a->drv.EventSynchronize(s->ev[slot]);
    return r == CUDA_SUCCESS ? 0 : pinio__gpu_fail(&s->a->drv, r, s->a->drv.sym.EventSynchronize, diag);
}

int pinio__gpu_sink_finish(void *priv, pinio_diag *diag)
{
    pinio__gpusink *s = priv;
    CUresult r = s->a->drv.StreamSynchronize(s->stream);
    if (r != CUDA_SUCCESS)
        return pinio__gpu_fail(&s->a->drv, r, s->a->drv.sym.StreamSynchronize, diag);
    if (s->t_first)
        s->a->info.h2d_seconds = pinio__now_s() - s->t_first;
    return 0;
}

int pinio_gpu_devices(const char *api_name, pinio_gpu_device *out, size_t cap, size_t *n,
                      int *driver_version, pinio_diag *diag)
{
    *n = 0;
    const pinio__gpu_api *api = api_name && strcmp(api_name, "hip") == 0    ? &pinio__hip_api
                                : !api_name || strcmp(api_name, "cuda") == 0 ? &pinio__cuda_api
                                                                             : NULL;
    if (!api) {
        pinio_diag_set(diag, -EINVAL, "no GPU API called '%s' (cuda, hip)", api_name);
        return -EINVAL;
    }
    pinio__gpu drv;
    int rc = pinio__gpu_open(&drv, api, diag);
    if (rc < 0)
        return rc;
    int count = 0;
    CUresult r = drv.DeviceGetCount(&count);
    if (r != CUDA_SUCCESS)
        rc = pinio__gpu_fail(&drv, r, drv.sym.DeviceGetCount, diag);
    if (driver_version)
        drv.DriverGetVersion(driver_version);
    for (int i = 0; rc == 0 && i < count && (size_t)i < cap; i++) {
        pinio_gpu_device *d = &out[i];
        memset(d, 0, sizeof(*d));
        d->index = i;
        d->node = -1;
        CUdevice dev;
        size_t mem = 0;
        if (drv.DeviceGet(&dev, i) != CUDA_SUCCESS)
            continue;
        drv.DeviceGetName(d->name, (int)sizeof(d->name), dev);
        drv.DeviceGetPCIBusId(d->pci_bus_id, (int)sizeof(d->pci_bus_id), dev);
        if (drv.DeviceTotalMem(&mem, dev) == CUDA_SUCCESS)
            d->memory = mem;
        if (d->pci_bus_id[0] && pinio_topo_node_of_pci(NULL, d->pci_bus_id, &d->node, NULL) < 0)
            d->node = -1;
    }
    if (rc == 0)
        *n = (size_t)count;
    pinio__gpu_close(&drv);
    return rc;
}

/* The GPU's NUMA node, from sysfs of its PCI bus id: the driver is opened
 * for the id when the config names the device by ordinal. -1: unknown. */
int pinio__gpu_sink_prefer_node(const pinio__gpu_api *api, const void *cfg)
{
    const pinio_sink_gpu_cfg *c = cfg;
    char bus[32] = "";
    if (!c)
        return -1;
    if (c->pci_bus_id) {
        snprintf(bus, sizeof(bus), "%s", c->pci_bus_id);
    } else {
        pinio__gpu drv;
        CUdevice dev;
        if (pinio__gpu_open(&drv, api, NULL) < 0)
            return -1; /* open() says why, with the whole message */
        if (drv.DeviceGet(&dev, c->device) != CUDA_SUCCESS ||
            drv.DeviceGetPCIBusId(bus, (int)sizeof(bus), dev) != CUDA_SUCCESS)
            bus[0] = '\0';
        pinio__gpu_close(&drv);
    }
    int node = -1;
    if (!bus[0] || pinio_topo_node_of_pci(NULL, bus, &node, NULL) < 0)
        return -1;
    return node;
}
