/* A test driver: a small libcuda.so.1, built only for the tests and loaded
 * through PINIO_CUDA_LIB, that implements the subset the CUDA sink uses
 * with host memory, and checks what a real driver (or a real GPU) would
 * punish:
 *   - a copy from host memory that is not registered (cuMemHostRegister):
 *     CUDA_ERROR_INVALID_VALUE, counted;
 *   - a slot overwritten while its copy is pending: each copy snapshots its
 *     source when issued, and the stream's worker thread, which performs
 *     it later (FAKE_CUDA_DELAY_US, default 300 us, apart), compares the
 *     source with the snapshot first; a difference is counted (and the
 *     changed bytes are what lands, as with a real DMA);
 *   - a copy to or from outside a device allocation (cuMemAlloc results
 *     are 256-byte aligned; the test checks each tensor's address);
 *   - a call that needs a context on a thread without a current one:
 *     CUDA_ERROR_INVALID_CONTEXT, counted.
 * Failures are injected by FAKE_CUDA_FAIL, read at cuInit: "nodevice",
 * "stub", "alloc", "register", "copy:N" (the N-th cuMemcpyHtoDAsync, from 1),
 * "flip:N" (the N-th cuMemcpyHtoDAsync on each stream, from 1, succeeds but
 * lands with one byte, the middle one, changed: a transfer that corrupts,
 * for tests that check what reached the device), "event" (cuEventSynchronize); FAKE_CUDA_DEVICES sets the device count
 * (default 1, 0 to 8). FAKE_CUDA_DROP_PENDING_AT_DESTROY=1 (read at cuInit)
 * drops the copies still pending on a stream when it is destroyed, counted
 * (`dropped`), instead of completing them first: a real cuStreamDestroy
 * returns at once and lets the device finish the work later, so a sink that
 * destroyed its stream without synchronizing would hand out tensors whose
 * bytes land some time after; dropping them is that race at its worst,
 * every time, where completing them at destroy would hide it.
 * FAKE_CUDA_DUMP=PATH (read at cuInit) writes each device allocation's
 * bytes to PATH when it is freed (the last one freed wins), so a test of a
 * program that frees its arena before it exits (pinio load --device) can
 * read what landed. Built with -DFAKE_HIP it is libamdhip64.so
 * instead: the same driver under HIP's names (the subset mirrors CUDA's
 * name for name), except the context: HIP selects a thread's device with
 * hipSetDevice (its context calls are deprecated, gpu-python-peers.md
 * §2.4), so this build has hipSetDevice/hipGetDevice and lacks
 * hipDevicePrimaryCtx* and hipCtxPush/PopCurrent (a sink resolving them
 * fails to load). A real HIP thread that never called hipSetDevice uses
 * device 0; here it has no device, so a call on a thread that forgot to
 * select one is counted (on a machine of several GPUs it would silently
 * go to device 0). fake_cuda_stats() (dlsym'ed by the test)
 * reports the counters. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fake_cuda.h" /* fake_stats: the counters, one definition for both sides */

#define API __attribute__((visibility("default")))

#ifdef FAKE_HIP /* HIP's name for each entry point (gpu-python-peers.md §2.4) */
#define cuInit hipInit
#define cuDriverGetVersion hipDriverGetVersion
#define cuDeviceGetCount hipGetDeviceCount
#define cuDeviceGet hipDeviceGet
#define cuDeviceGetPCIBusId hipDeviceGetPCIBusId
#define cuDeviceGetName hipDeviceGetName
#define cuDeviceTotalMem_v2 hipDeviceTotalMem
#define cuDeviceGetByPCIBusId hipDeviceGetByPCIBusId
#define cuDevicePrimaryCtxRetain hipDevicePrimaryCtxRetain
#define cuDevicePrimaryCtxRelease_v2 hipDevicePrimaryCtxRelease
#define cuCtxPushCurrent_v2 hipCtxPushCurrent
#define cuCtxPopCurrent_v2 hipCtxPopCurrent
#define cuMemHostRegister_v2 hipHostRegister
#define cuMemHostUnregister hipHostUnregister
#define cuMemAlloc_v2 hipMalloc
#define cuMemFree_v2 hipFree
#define cuMemcpyHtoDAsync_v2 hipMemcpyHtoDAsync
#define cuMemcpyHtoD_v2 hipMemcpyHtoD
#define cuMemcpyDtoH_v2 hipMemcpyDtoH
#define cuStreamCreate hipStreamCreateWithFlags
#define cuStreamDestroy_v2 hipStreamDestroy
#define cuStreamSynchronize hipStreamSynchronize
#define cuEventCreate hipEventCreateWithFlags
#define cuEventDestroy_v2 hipEventDestroy
#define cuEventRecord hipEventRecord
#define cuEventSynchronize hipEventSynchronize
#define cuEventQuery hipEventQuery
#define cuGetErrorName hipDrvGetErrorName
#define cuGetErrorString hipDrvGetErrorString
#endif

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;

enum {
    OK = 0, INVALID_VALUE = 1, OUT_OF_MEMORY = 2, NOT_INITIALIZED = 3, STUB = 34,
    NO_DEVICE = 100, INVALID_DEVICE = 101, INVALID_CONTEXT = 201, NOT_READY = 600,
    ALREADY_REGISTERED = 712, NOT_REGISTERED = 713, UNKNOWN = 999,
};


typedef struct op {
    uint8_t *dst;
    const uint8_t *src;
    uint8_t *snap;
    size_t n;
    int flip;          /* FAKE_CUDA_FAIL=flip:N: this copy lands with a byte changed */
    struct op *next;
} op;

typedef struct CUstream_st {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    op *head, *tail;
    unsigned long enq, done;
    int stop;
    int drop;          /* destroyed with FAKE_CUDA_DROP_PENDING_AT_DESTROY: skip what is left */
    pthread_t worker;
} stream;

typedef struct CUevent_st {
    stream *s;
    unsigned long target;
} event;

typedef struct CUctx_st {
    int dev;
} ctx;

typedef struct range {
    uintptr_t lo, hi;
    struct range *next;
} range;

/* The driver's entry points (what cuda.h declares), for -Wmissing-prototypes. */
API void fake_cuda_stats(fake_stats *out);
API CUresult cuInit(unsigned flags);
API CUresult cuDriverGetVersion(int *v);
API CUresult cuDeviceGetCount(int *n);
API CUresult cuDeviceGet(CUdevice *d, int ordinal);
API CUresult cuDeviceGetPCIBusId(char *buf, int len, CUdevice d);
API CUresult cuDeviceGetName(char *buf, int len, CUdevice d);
API CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d);
API CUresult cuDeviceGetByPCIBusId(CUdevice *d, const char *id);
#ifdef FAKE_HIP
API CUresult hipSetDevice(int d);
API CUresult hipGetDevice(int *d);
#else
API CUresult cuDevicePrimaryCtxRetain(ctx **c, CUdevice d);
API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d);
API CUresult cuCtxPushCurrent_v2(ctx *c);
API CUresult cuCtxPopCurrent_v2(ctx **c);
#endif
API CUresult cuMemHostRegister_v2(void *p, size_t n, unsigned flags);
API CUresult cuMemHostUnregister(void *p);
API CUresult cuMemAlloc_v2(CUdeviceptr *d, size_t n);
API CUresult cuMemFree_v2(CUdeviceptr d);
API CUresult cuStreamCreate(stream **out, unsigned flags);
API CUresult cuStreamSynchronize(stream *s);
API CUresult cuStreamDestroy_v2(stream *s);
API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, stream *s);
API CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n);
API CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n);
API CUresult cuEventCreate(event **e, unsigned flags);
API CUresult cuEventDestroy_v2(event *e);
API CUresult cuEventRecord(event *e, stream *s);
API CUresult cuEventSynchronize(event *e);
API CUresult cuEventQuery(event *e);
API CUresult cuGetErrorName(CUresult r, const char **s);
API CUresult cuGetErrorString(CUresult r, const char **s);

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static fake_stats st;
static range *host_regs, *dev_allocs;
static int inited, ndev = 1, fail_alloc, fail_register, fail_event, drop_at_destroy;
static long fail_copy_at, flip_copy_at;
static long delay_us = 300;
static const char *dump_path;
static ctx ctxs[8];
static __thread ctx *cur_stack[16];
static __thread int cur_depth;

API void fake_cuda_stats(fake_stats *out)
{
    pthread_mutex_lock(&mu);
    *out = st;
    pthread_mutex_unlock(&mu);
}

static ctx *current(void)
{
    return cur_depth ? cur_stack[cur_depth - 1] : NULL;
}

static CUresult need_ctx(void)
{
    if (!inited)
        return NOT_INITIALIZED;
    if (current())
        return OK;
    pthread_mutex_lock(&mu);
    st.no_context++;
    pthread_mutex_unlock(&mu);
    return INVALID_CONTEXT;
}

/* The range [p, p + n) lies inside one range of `list` (mu held). */
static range *inside(range *list, uintptr_t p, size_t n)
{
    for (range *r = list; r; r = r->next)
        if (p >= r->lo && p + n <= r->hi)
            return r;
    return NULL;
}

static range *overlapping(range *list, uintptr_t p, size_t n)
{
    for (range *r = list; r; r = r->next)
        if (p < r->hi && p + n > r->lo)
            return r;
    return NULL;
}

static void unlink_range(range **list, range *x)
{
    for (range **pp = list; *pp; pp = &(*pp)->next)
        if (*pp == x) {
            *pp = x->next;
            free(x);
            return;
        }
}

API CUresult cuInit(unsigned flags)
{
    if (flags)
        return INVALID_VALUE;
    const char *f = getenv("FAKE_CUDA_FAIL");
    const char *d = getenv("FAKE_CUDA_DELAY_US");
    if (d)
        delay_us = atol(d);
    const char *dp = getenv("FAKE_CUDA_DROP_PENDING_AT_DESTROY");
    drop_at_destroy = dp && strcmp(dp, "1") == 0;
    dump_path = getenv("FAKE_CUDA_DUMP");
    if (f && strcmp(f, "stub") == 0)
        return STUB;
    if (f && strcmp(f, "nodevice") == 0)
        return NO_DEVICE;
    const char *nd = getenv("FAKE_CUDA_DEVICES");
    ndev = nd ? atoi(nd) : 1;
    ndev = ndev < 0 ? 0 : ndev > 8 ? 8 : ndev;
    fail_alloc = f && strcmp(f, "alloc") == 0;
    fail_register = f && strcmp(f, "register") == 0;
    fail_event = f && strcmp(f, "event") == 0;
    fail_copy_at = f && strncmp(f, "copy:", 5) == 0 ? atol(f + 5) : 0;
    flip_copy_at = f && strncmp(f, "flip:", 5) == 0 ? atol(f + 5) : 0;
    for (int i = 0; i < 8; i++)
        ctxs[i].dev = i;
    inited = 1;
    return OK;
}

API CUresult cuDriverGetVersion(int *v)
{
    *v = 12080;
    return OK;
}

API CUresult cuDeviceGetCount(int *n)
{
    *n = inited ? ndev : 0;
    return inited ? OK : NOT_INITIALIZED;
}

API CUresult cuDeviceGet(CUdevice *d, int ordinal)
{
    if (!inited)
        return NOT_INITIALIZED;
    if (ordinal < 0 || ordinal >= ndev)
        return INVALID_DEVICE;
    *d = ordinal;
    return OK;
}

API CUresult cuDeviceGetPCIBusId(char *buf, int len, CUdevice d)
{
    if (d < 0 || d >= ndev || len < 13)
        return INVALID_VALUE;
    snprintf(buf, (size_t)len, "0000:%02x:00.0", 0x65 + d);
    return OK;
}

API CUresult cuDeviceGetName(char *buf, int len, CUdevice d)
{
    if (d < 0 || d >= ndev || len < 1)
        return INVALID_VALUE;
    snprintf(buf, (size_t)len, "pinio test driver device %d", d);
    return OK;
}

API CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d)
{
    if (d < 0 || d >= ndev)
        return INVALID_DEVICE;
    *bytes = (size_t)80 << 30;
    return OK;
}

API CUresult cuDeviceGetByPCIBusId(CUdevice *d, const char *id)
{
    for (int i = 0; i < ndev; i++) {
        char b[32];
        cuDeviceGetPCIBusId(b, sizeof(b), i);
        if (strcasecmp(b, id) == 0) {
            *d = i;
            return OK;
        }
    }
    return INVALID_DEVICE;
}

#ifdef FAKE_HIP
/* The thread's device: the bottom of its context stack, one deep. */
API CUresult hipSetDevice(int d)
{
    if (!inited)
        return NOT_INITIALIZED;
    if (d < 0 || d >= ndev)
        return INVALID_DEVICE;
    cur_stack[0] = &ctxs[d];
    cur_depth = 1;
    return OK;
}

API CUresult hipGetDevice(int *d)
{
    if (!inited)
        return NOT_INITIALIZED;
    *d = cur_depth ? cur_stack[0]->dev : 0; /* HIP's default device */
    return OK;
}
#else
API CUresult cuDevicePrimaryCtxRetain(ctx **c, CUdevice d)
{
    if (!inited)
        return NOT_INITIALIZED;
    if (d < 0 || d >= ndev)
        return INVALID_DEVICE;
    *c = &ctxs[d];
    pthread_mutex_lock(&mu);
    st.ctx_retained++;
    pthread_mutex_unlock(&mu);
    return OK;
}

API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d)
{
    if (d < 0 || d >= ndev)
        return INVALID_DEVICE;
    pthread_mutex_lock(&mu);
    st.ctx_retained--;
    pthread_mutex_unlock(&mu);
    return OK;
}

API CUresult cuCtxPushCurrent_v2(ctx *c)
{
    if (!c || cur_depth == 16)
        return INVALID_VALUE;
    cur_stack[cur_depth++] = c;
    return OK;
}

API CUresult cuCtxPopCurrent_v2(ctx **c)
{
    if (!cur_depth)
        return INVALID_CONTEXT;
    ctx *x = cur_stack[--cur_depth];
    if (c)
        *c = x;
    return OK;
}
#endif

API CUresult cuMemHostRegister_v2(void *p, size_t n, unsigned flags)
{
    (void)flags;
    CUresult r = need_ctx();
    if (r)
        return r;
    if (fail_register)
        return OUT_OF_MEMORY;
    pthread_mutex_lock(&mu);
    if (overlapping(host_regs, (uintptr_t)p, n)) {
        pthread_mutex_unlock(&mu);
        return ALREADY_REGISTERED;
    }
    range *x = malloc(sizeof(*x));
    *x = (range){ (uintptr_t)p, (uintptr_t)p + n, host_regs };
    host_regs = x;
    st.registered_live++;
    pthread_mutex_unlock(&mu);
    return OK;
}

API CUresult cuMemHostUnregister(void *p)
{
    pthread_mutex_lock(&mu);
    for (range *x = host_regs; x; x = x->next)
        if (x->lo == (uintptr_t)p) {
            unlink_range(&host_regs, x);
            st.registered_live--;
            pthread_mutex_unlock(&mu);
            return OK;
        }
    pthread_mutex_unlock(&mu);
    return NOT_REGISTERED;
}

API CUresult cuMemAlloc_v2(CUdeviceptr *d, size_t n)
{
    CUresult r = need_ctx();
    if (r)
        return r;
    if (fail_alloc || n == 0)
        return fail_alloc ? OUT_OF_MEMORY : INVALID_VALUE;
    void *p = aligned_alloc(256, (n + 255) / 256 * 256);
    if (!p)
        return OUT_OF_MEMORY;
    memset(p, 0xA5, n); /* poison: bytes never copied show */
    pthread_mutex_lock(&mu);
    range *x = malloc(sizeof(*x));
    *x = (range){ (uintptr_t)p, (uintptr_t)p + n, dev_allocs };
    dev_allocs = x;
    st.allocs_live++;
    pthread_mutex_unlock(&mu);
    *d = (CUdeviceptr)(uintptr_t)p;
    return OK;
}

API CUresult cuMemFree_v2(CUdeviceptr d)
{
    CUresult r = need_ctx();
    if (r)
        return r;
    pthread_mutex_lock(&mu);
    for (range *x = dev_allocs; x; x = x->next)
        if (x->lo == (uintptr_t)d) {
            if (dump_path) { /* what a program left on the device, for a test to read */
                FILE *f = fopen(dump_path, "wb");
                size_t n = x->hi - x->lo;
                int ok = f && fwrite((void *)x->lo, 1, n, f) == n;
                if (f && fclose(f) != 0)
                    ok = 0;
                if (!ok)
                    fprintf(stderr, "fake cuda: cannot write FAKE_CUDA_DUMP %s\n", dump_path);
            }
            unlink_range(&dev_allocs, x);
            st.allocs_live--;
            pthread_mutex_unlock(&mu);
            free((void *)(uintptr_t)d);
            return OK;
        }
    pthread_mutex_unlock(&mu);
    return INVALID_VALUE;
}

static void *worker(void *arg)
{
    stream *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->head && !s->stop)
            pthread_cond_wait(&s->cv, &s->mu);
        if (!s->head)
            break;
        op *o = s->head;
        int drop = s->drop;
        pthread_mutex_unlock(&s->mu);
        if (delay_us > 0 && !drop) /* the DMA engine is busy: the window for a careless overwrite */
            usleep((useconds_t)delay_us);
        pthread_mutex_lock(&s->mu);
        drop = s->drop; /* destroyed while this copy was "in flight": it never lands */
        pthread_mutex_unlock(&s->mu);
        if (drop) {
            pthread_mutex_lock(&mu);
            st.dropped++;
            pthread_mutex_unlock(&mu);
        } else {
            if (memcmp(o->src, o->snap, o->n) != 0) {
                pthread_mutex_lock(&mu);
                st.overwritten++;
                pthread_mutex_unlock(&mu);
            }
            memcpy(o->dst, o->src, o->n);
            if (o->flip && o->n)
                o->dst[o->n / 2] ^= 0x01;
        }
        free(o->snap);
        pthread_mutex_lock(&s->mu);
        s->head = o->next;
        if (!s->head)
            s->tail = NULL;
        free(o);
        s->done++;
        pthread_cond_broadcast(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

API CUresult cuStreamCreate(stream **out, unsigned flags)
{
    (void)flags;
    CUresult r = need_ctx();
    if (r)
        return r;
    stream *s = calloc(1, sizeof(*s));
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    if (pthread_create(&s->worker, NULL, worker, s) != 0) {
        free(s);
        return OUT_OF_MEMORY;
    }
    pthread_mutex_lock(&mu);
    st.streams_live++;
    pthread_mutex_unlock(&mu);
    *out = s;
    return OK;
}

static void wait_done(stream *s, unsigned long target)
{
    pthread_mutex_lock(&s->mu);
    while (s->done < target)
        pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
}

API CUresult cuStreamSynchronize(stream *s)
{
    CUresult r = need_ctx();
    if (r)
        return r;
    pthread_mutex_lock(&s->mu);
    unsigned long t = s->enq;
    pthread_mutex_unlock(&s->mu);
    wait_done(s, t);
    return OK;
}

API CUresult cuStreamDestroy_v2(stream *s)
{
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    s->drop = drop_at_destroy;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->worker, NULL);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
    pthread_mutex_lock(&mu);
    st.streams_live--;
    pthread_mutex_unlock(&mu);
    return OK;
}

/* A host-to-device copy's checks: from registered host memory, into one
 * device allocation; counted. Returns its number (from 1) in `*nth`. */
static CUresult check_h2d(CUdeviceptr dst, const void *src, size_t n, unsigned long *nth)
{
    CUresult r = need_ctx();
    if (r)
        return r;
    pthread_mutex_lock(&mu);
    *nth = ++st.copies;
    int reg = inside(host_regs, (uintptr_t)src, n) != NULL;
    int dev = inside(dev_allocs, (uintptr_t)dst, n) != NULL;
    st.unregistered += !reg;
    st.out_of_bounds += !dev;
    pthread_mutex_unlock(&mu);
    return reg && dev ? OK : INVALID_VALUE;
}

API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, stream *s)
{
    unsigned long nth = 0;
    CUresult r = check_h2d(dst, src, n, &nth);
    if (nth && fail_copy_at && (long)nth == fail_copy_at)
        return UNKNOWN;
    if (r || !s)
        return r ? r : INVALID_VALUE;
    op *o = malloc(sizeof(*o));
    *o = (op){ .dst = (uint8_t *)(uintptr_t)dst, .src = src, .snap = malloc(n ? n : 1), .n = n };
    memcpy(o->snap, src, n);
    pthread_mutex_lock(&s->mu);
    o->flip = flip_copy_at && (long)s->enq + 1 == flip_copy_at;
    if (s->tail)
        s->tail->next = o;
    else
        s->head = o;
    s->tail = o;
    s->enq++;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return OK;
}

/* Synchronous, from registered memory only (as the async copy). */
API CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
    unsigned long nth = 0;
    CUresult r = check_h2d(dst, src, n, &nth);
    if (r)
        return r;
    memcpy((void *)(uintptr_t)dst, src, n);
    return OK;
}

API CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
    CUresult r = need_ctx();
    if (r)
        return r;
    pthread_mutex_lock(&mu);
    int dev = inside(dev_allocs, (uintptr_t)src, n) != NULL;
    st.out_of_bounds += !dev;
    st.d2h_copies += dev;
    st.d2h_bytes += dev ? n : 0;
    pthread_mutex_unlock(&mu);
    if (!dev)
        return INVALID_VALUE;
    memcpy(dst, (const void *)(uintptr_t)src, n);
    return OK;
}

API CUresult cuEventCreate(event **e, unsigned flags)
{
    (void)flags;
    CUresult r = need_ctx();
    if (r)
        return r;
    *e = calloc(1, sizeof(**e));
    return *e ? OK : OUT_OF_MEMORY;
}

API CUresult cuEventDestroy_v2(event *e)
{
    free(e);
    return OK;
}

API CUresult cuEventRecord(event *e, stream *s)
{
    CUresult r = need_ctx();
    if (r)
        return r;
    pthread_mutex_lock(&s->mu);
    e->s = s;
    e->target = s->enq;
    pthread_mutex_unlock(&s->mu);
    return OK;
}

API CUresult cuEventSynchronize(event *e)
{
    if (fail_event)
        return UNKNOWN;
    if (e->s)
        wait_done(e->s, e->target);
    return OK;
}

API CUresult cuEventQuery(event *e)
{
    if (!e->s)
        return OK;
    pthread_mutex_lock(&e->s->mu);
    int done = e->s->done >= e->target;
    pthread_mutex_unlock(&e->s->mu);
    return done ? OK : NOT_READY;
}

API CUresult cuGetErrorName(CUresult r, const char **s)
{
    switch (r) {
    case OK: *s = "CUDA_SUCCESS"; break;
    case INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; break;
    case OUT_OF_MEMORY: *s = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    case STUB: *s = "CUDA_ERROR_STUB_LIBRARY"; break;
    case NO_DEVICE: *s = "CUDA_ERROR_NO_DEVICE"; break;
    case INVALID_DEVICE: *s = "CUDA_ERROR_INVALID_DEVICE"; break;
    case INVALID_CONTEXT: *s = "CUDA_ERROR_INVALID_CONTEXT"; break;
    case ALREADY_REGISTERED: *s = "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED"; break;
    default: *s = "CUDA_ERROR_UNKNOWN"; return OK;
    }
    return OK;
}

API CUresult cuGetErrorString(CUresult r, const char **s)
{
    switch (r) {
    case OUT_OF_MEMORY: *s = "out of memory"; break;
    case NO_DEVICE: *s = "no CUDA-capable device is detected"; break;
    case INVALID_CONTEXT: *s = "invalid device context"; break;
    default: *s = "fake driver error"; break;
    }
    return OK;
}
