/* The device check behind scripts/gpu-check (public API only; the driver
 * itself is dlopen'ed for the pinned-copy reference).
 *
 * usage: gpucheck CHECKPOINT SEED [DEVICE] [SLOT_MiB] [SLOTS]
 *
 *   1. CHECKPOINT (made by `pinio gen --seed SEED`) streamed cold to
 *      cuda:DEVICE: end-to-end, storage and H2D GB/s;
 *   2. every tensor read back from the device and checked against the
 *      generator: the bytes are verified on the device;
 *   3. H2D GB/s from staging on the GPU's node and on another node (hot
 *      file, so the copy is what differs), when there are two nodes;
 *   4. the driver's own pinned cuMemcpyHtoD bandwidth on a buffer of the
 *      ring's size, the reference: end to end should reach 0.9x
 *      min(storage, pinned H2D) (issue 11);
 *   5. the copy from host memory (pinio_stream_from_memory(): what a
 *      tensor-parallel rank does with the slices it received, `pinio load
 *      --mpi tp --device`) of the first tensors up to 1 GiB, the
 *      generator's bytes in, every byte read back and checked.
 * One line per result; exit 0 when every byte verified, else 1. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "bench_util.h"
#include "pinio/gen.h"
#include "pinio/numa.h"
#include "pinio/stream.h"

static int stream_once(const char *path, int dev, int node, pinio_cache_policy cache,
                       const pinio_stream_opts *base, pinio_gpu_arena **a,
                       pinio_stream_report *r)
{
    pinio_stream_opts o = *base;
    o.node = node;
    o.cache = cache;
    pinio_sink_gpu_cfg cc = { .device = dev, .out = a };
    pinio_diag d = { 0 };
    int rc = pinio_stream(&path, 1, &o, &pinio_sink_cuda, &cc, r, &d);
    if (rc < 0)
        fprintf(stderr, "gpucheck: %s\n", d.msg);
    return rc;
}

static double h2d_gbs(const pinio_gpu_arena *a)
{
    pinio_gpu_info ci;
    pinio_gpu_arena_get_info(a, &ci);
    return ci.h2d_seconds > 0 ? (double)ci.bytes / ci.h2d_seconds / 1e9 : 0;
}

/* Every tensor back from the device, checked. */
static int verify(pinio_gpu_arena *a, uint64_t seed)
{
    size_t cap = (size_t)64 << 20;
    uint8_t *buf = malloc(cap);
    uint64_t ok = 0, total = 0;
    int bad = 0;
    for (size_t i = 0; buf && i < pinio_gpu_arena_tensors(a); i++) {
        pinio_gpu_tensor t;
        pinio_gpu_arena_tensor(a, i, &t);
        total += t.nbytes;
        for (uint64_t off = 0; off < t.nbytes;) {
            size_t n = t.nbytes - off < cap ? (size_t)(t.nbytes - off) : cap;
            pinio_diag d = { 0 };
            uint64_t at = 0;
            if (pinio_gpu_arena_read(a, i, off, buf, n, &d) < 0) {
                fprintf(stderr, "gpucheck: %s\n", d.msg);
                bad++;
                break;
            }
            if (!pinio_gen_verify(seed, t.name, off, buf, n, &at)) {
                fprintf(stderr, "gpucheck: tensor %s: wrong byte at %llu on the device\n", t.name,
                        (unsigned long long)(off + at));
                bad++;
                break;
            }
            ok += n;
            off += n;
        }
    }
    free(buf);
    printf("verified on device: %llu of %llu bytes, %s\n", (unsigned long long)ok,
           (unsigned long long)total, bad || !buf ? "FAILED" : "ok");
    return bad || !buf ? -1 : 0;
}

/* The driver's pinned synchronous cuMemcpyHtoD of `len` bytes, best of 5. */
typedef int (*f_init)(unsigned);
typedef int (*f_get)(int *, int);
typedef int (*f_retain)(void **, int);
typedef int (*f_release)(int);
typedef int (*f_push)(void *);
typedef int (*f_pop)(void **);
typedef int (*f_reg)(void *, size_t, unsigned);
typedef int (*f_unreg)(void *);
typedef int (*f_alloc)(unsigned long long *, size_t);
typedef int (*f_free)(unsigned long long);
typedef int (*f_h2d)(unsigned long long, const void *, size_t);
#define SYM(t, n) ((t)(uintptr_t)dlsym(lib, n))

static double pinned_h2d(int dev, size_t len)
{
    const char *p = getenv("PINIO_CUDA_LIB");
    void *lib = dlopen(p && *p ? p : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return 0;
    double best = 0;
    void *ctx = NULL, *host = MAP_FAILED;
    unsigned long long d = 0;
    int cu_dev = 0;
    if (!SYM(f_h2d, "cuMemcpyHtoD_v2") || SYM(f_init, "cuInit")(0) ||
        SYM(f_get, "cuDeviceGet")(&cu_dev, dev) ||
        SYM(f_retain, "cuDevicePrimaryCtxRetain")(&ctx, cu_dev))
        goto out;
    SYM(f_push, "cuCtxPushCurrent_v2")(ctx);
    host = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (host != MAP_FAILED && SYM(f_reg, "cuMemHostRegister_v2")(host, len, 1) == 0) {
        memset(host, 1, len);
        if (SYM(f_alloc, "cuMemAlloc_v2")(&d, len) == 0) {
            for (int i = 0; i < 5; i++) {
                double t0 = bench_now();
                if (SYM(f_h2d, "cuMemcpyHtoD_v2")(d, host, len))
                    break;
                double g = (double)len / (bench_now() - t0) / 1e9;
                best = g > best ? g : best;
            }
            SYM(f_free, "cuMemFree_v2")(d);
        }
        SYM(f_unreg, "cuMemHostUnregister")(host);
    }
    if (host != MAP_FAILED)
        munmap(host, len);
    SYM(f_pop, "cuCtxPopCurrent_v2")(&ctx);
    SYM(f_release, "cuDevicePrimaryCtxRelease_v2")(cu_dev);
out:
    dlclose(lib);
    return best;
}

/* Step 5: the generator's bytes of the first tensors (up to 1 GiB) from
 * host memory to the device through the sink, then verified there. */
static int from_memory(const char *path, uint64_t seed, int dev, const pinio_stream_opts *o)
{
    size_t slot = o->slot_size ? o->slot_size : PINIO_STREAM_SLOT_DEFAULT;
    unsigned slots = o->slots ? o->slots : PINIO_STREAM_SLOTS_DEFAULT;
    pinio_plan_opts po;
    pinio_plan_opts_default(&po);
    po.cache = PINIO_CACHE_HOT; /* never executed: the headers are all it needs */
    po.segment = slot;
    pinio_plan *all = NULL, *p = NULL;
    pinio_diag d = { 0 };
    if (pinio_plan_create(&all, &path, 1, &po, &d) < 0) {
        fprintf(stderr, "gpucheck: %s\n", d.msg);
        return -1;
    }
    pinio_plan_info ai;
    pinio_plan_get_info(all, &ai);
    const char **names = calloc(ai.tensors ? ai.tensors : 1, sizeof(*names));
    size_t k = 0;
    uint64_t bytes = 0;
    for (; names && k < ai.tensors && bytes < ((uint64_t)1 << 30); k++) {
        names[k] = pinio_plan_tensor_at(all, k)->name;
        bytes += pinio_plan_tensor_at(all, k)->nbytes;
    }
    po.filters = names;
    po.nfilters = k;
    int rc = names ? pinio_plan_create(&p, &path, 1, &po, &d) : -1;
    size_t n = 0;
    void **src = NULL;
    if (rc == 0) {
        pinio_plan_info pi;
        pinio_plan_get_info(p, &pi);
        n = pi.tensors;
        src = calloc(n ? n : 1, sizeof(*src));
        bytes = pi.bytes;
        rc = src ? 0 : -1;
        for (size_t i = 0; rc == 0 && i < n; i++) {
            const pinio_plan_tensor *t = pinio_plan_tensor_at(p, i);
            if (!(src[i] = malloc(t->nbytes ? t->nbytes : 1)))
                rc = -1;
            else
                pinio_gen_fill(seed, t->name, 0, src[i], t->nbytes);
        }
    }
    pinio_gpu_arena *a = NULL;
    pinio_sink_gpu_cfg cc = { .device = dev, .out = &a };
    double t0 = bench_now();
    if (rc == 0 && (rc = pinio_stream_from_memory(p, (const void *const *)src, n, slot, slots,
                                                  &pinio_sink_cuda, &cc, &d)) < 0)
        fprintf(stderr, "gpucheck: from memory: %s\n", d.msg);
    double s = bench_now() - t0;
    if (rc == 0) {
        printf("from host memory: %.3f GB of %zu tensors in %.3f s; H2D %.2f GB/s\n",
               (double)bytes / 1e9, n, s, h2d_gbs(a));
        rc = verify(a, seed);
    } else if (!d.msg[0]) {
        fprintf(stderr, "gpucheck: from memory: %s\n", names ? "out of memory" : "no plan");
    }
    pinio_gpu_arena_free(a);
    for (size_t i = 0; src && i < n; i++)
        free(src[i]);
    free(src);
    free(names);
    pinio_plan_free(p);
    pinio_plan_free(all);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: gpucheck CHECKPOINT SEED [DEVICE] [SLOT_MiB] [SLOTS]\n");
        return 2;
    }
    const char *path = argv[1];
    uint64_t seed = strtoull(argv[2], NULL, 10);
    int dev = argc > 3 ? atoi(argv[3]) : 0;
    pinio_stream_opts o;
    pinio_stream_opts_default(&o);
    if (argc > 4)
        o.slot_size = (size_t)strtoull(argv[4], NULL, 10) << 20;
    if (argc > 5)
        o.slots = (unsigned)atoi(argv[5]);

    pinio_gpu_arena *a = NULL;
    pinio_stream_report r;
    if (stream_once(path, dev, PINIO_NODE_AUTO, PINIO_CACHE_COLD, &o, &a, &r) < 0)
        return 1;
    pinio_gpu_info ci;
    pinio_gpu_arena_get_info(a, &ci);
    double e2e = (double)r.bytes / r.seconds / 1e9, io = (double)r.read_bytes / r.io_seconds / 1e9;
    double h2d = h2d_gbs(a);
    printf("device: cuda:%d %s driver %d, staging %u x %zu MiB on node %d (%s)\n", ci.device,
           ci.pci_bus_id, ci.driver_version, r.slots, r.slot_size >> 20, r.node,
           r.registered ? "READ_FIXED" : "not registered");
    printf("end to end (cold): %.3f GB in %.3f s = %.2f GB/s; storage %.2f GB/s; H2D %.2f GB/s; "
           "%llu copies\n", (double)r.bytes / 1e9, r.seconds, e2e, io, h2d,
           (unsigned long long)ci.copies);
    int bad = verify(a, seed);
    pinio_gpu_arena_free(a);

    int nodes = pinio_topo_node_count(NULL);
    if (nodes >= 2 && r.node >= 0) {
        int other = (r.node + 1) % nodes;
        for (int k = 0; k < 2; k++) {
            int node = k ? other : r.node;
            pinio_stream_report rr;
            a = NULL;
            if (stream_once(path, dev, node, PINIO_CACHE_HOT, &o, &a, &rr) == 0)
                printf("H2D from staging on node %d (%s): %.2f GB/s\n", node,
                       k ? "remote" : "GPU-local", h2d_gbs(a));
            pinio_gpu_arena_free(a);
        }
    } else {
        printf("H2D local vs remote staging: one NUMA node only, not measured\n");
    }
    size_t len = r.ring_bytes < ((size_t)256 << 20) ? (size_t)r.ring_bytes : ((size_t)256 << 20);
    double pin = pinned_h2d(dev, len);
    printf("pinned cuMemcpyHtoD of %zu MiB: %.2f GB/s (best of 5)\n", len >> 20, pin);
    double limit = io < pin || pin <= 0 ? io : pin;
    if (limit > 0)
        printf("end to end / min(storage, pinned H2D) = %.2f / %.2f = %.3f (target >= 0.9)\n", e2e,
               limit, e2e / limit);
    bad |= from_memory(path, seed, dev, &o) < 0;
    return bad ? 1 : 0;
}
