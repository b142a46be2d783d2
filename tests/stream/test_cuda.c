/* The CUDA sink against what a driver can answer: no driver at all, the
 * toolkit's stub, no device, a device index or PCI id that does not exist,
 * allocation, registration, copy and event failures injected in the test
 * driver (fake_cuda.c, FAKE_CUDA_FAIL), caller device pointers (aligned or
 * not). Each failure must be one clear message, a negative code, and
 * nothing left on the driver (allocations, registrations, streams,
 * retained contexts). The test driver's own checks are shown to fire. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake_cuda.h"
#include "pinio/gen.h"
#include "pinio/stream.h"
#include "tests/common/helpers.h"

#define SEED 5

static char dir[64];
static char path[128];
static void *fake;
static fake_stats_fn stats;

static void setup(void)
{
    /* The driver first: a failed assertion here skips teardown, and must
     * not leave the folder behind. */
    stats = fake_gpu_load("PINIO_CUDA_LIB", &fake);
    cr_assert_not_null(stats, "PINIO_CUDA_LIB names the test driver");
    cr_assert_eq(t_tmpdir("/var/tmp", "cuda", dir, sizeof dir), 0);
    snprintf(path, sizeof(path), "%s/m.safetensors", dir);
    pinio_gen_opts g;
    pinio_gen_opts_default(&g);
    g.size = 1u << 20;
    g.tensors = 10;
    g.seed = SEED;
    cr_assert_eq(pinio_gen_write(path, &g, NULL, NULL), 0);
}

static void teardown(void)
{
    if (fake)
        dlclose(fake);
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

/* Streams `path` to `sink`; returns the code, `d` the message. */
static int run_to(const pinio_sink *sink, pinio_sink_gpu_cfg *cc, pinio_diag *d)
{
    pinio_stream_opts o;
    pinio_stream_opts_default(&o);
    o.slot_size = 64u << 10;
    o.slots = 2;
    const char *in = path;
    memset(d, 0, sizeof(*d));
    return pinio_stream(&in, 1, &o, sink, cc, NULL, d);
}

static int run(pinio_sink_gpu_cfg *cc, pinio_diag *d)
{
    return run_to(&pinio_sink_cuda, cc, d);
}

static void expect_clean(void)
{
    fake_stats fs;
    stats(&fs);
    cr_expect(fs.allocs_live == 0 && fs.registered_live == 0 && fs.ctx_retained == 0 &&
                  fs.streams_live == 0,
              "left on the driver: %lu allocations, %lu registrations, %lu contexts, %lu streams",
              fs.allocs_live, fs.registered_live, fs.ctx_retained, fs.streams_live);
    cr_expect_eq(fs.no_context, 0, "every call had a current context");
}

static void expect_failure(const char *inject, int code, const char *words)
{
    if (inject)
        setenv("FAKE_CUDA_FAIL", inject, 1);
    pinio_gpu_arena *a = NULL;
    pinio_sink_gpu_cfg cc = { .out = &a };
    pinio_diag d;
    cr_expect_eq(run(&cc, &d), code, "%s: %s", inject ? inject : "", d.msg);
    cr_expect_null(a, "no arena after a failure");
    cr_expect(strstr(d.msg, words) != NULL, "'%s' in: %s", words, d.msg);
    cr_expect(strchr(d.msg, '\n') == NULL, "one line: %s", d.msg);
    expect_clean();
    unsetenv("FAKE_CUDA_FAIL");
}

Test(cuda, no_driver_is_one_clear_line)
{
    setenv("PINIO_CUDA_LIB", "/var/tmp/pinio-no-such-dir/libcuda.so.1", 1);
    char d2[64];
    cr_assert_eq(t_tmpdir("/var/tmp", "cuda-nodrv", d2, sizeof d2), 0);
    snprintf(path, sizeof(path), "%s/m.safetensors", d2);
    pinio_gen_opts g;
    pinio_gen_opts_default(&g);
    g.size = 64u << 10;
    cr_assert_eq(pinio_gen_write(path, &g, NULL, NULL), 0);
    pinio_gpu_arena *a = NULL;
    pinio_sink_gpu_cfg cc = { .out = &a };
    pinio_diag d;
    int rc = run(&cc, &d);
    unlink(path);
    rmdir(d2);
    cr_expect_eq(rc, -ENODEV);
    cr_expect(strncmp(d.msg, "no CUDA driver: ", 16) == 0, "%s", d.msg);
    cr_expect(strstr(d.msg, "PINIO_CUDA_LIB") != NULL, "%s", d.msg);
}

Test(cuda, stub_library, .init = setup, .fini = teardown)
{
    expect_failure("stub", -ENODEV, "no CUDA driver installed: ");
    expect_failure("stub", -ENODEV, "is the CUDA toolkit's stub library (cuInit: "
                                    "CUDA_ERROR_STUB_LIBRARY), not a driver");
}

Test(cuda, no_device, .init = setup, .fini = teardown)
{
    expect_failure("nodevice", -ENODEV,
                   "no CUDA device: cuInit answered CUDA_ERROR_NO_DEVICE (100)");
}

Test(cuda, allocation_failure, .init = setup, .fini = teardown)
{
    expect_failure("alloc", -ENOMEM, "cuMemAlloc_v2");
}

Test(cuda, registration_failure, .init = setup, .fini = teardown)
{
    expect_failure("register", -ENOMEM, "cuMemHostRegister_v2");
}

Test(cuda, copy_failure_names_the_tensor, .init = setup, .fini = teardown)
{
    expect_failure("copy:4", -EIO, "copying tensor 'model.layers.");
}

Test(cuda, event_failure, .init = setup, .fini = teardown)
{
    expect_failure("event", -EIO, "cuEventSynchronize");
}

Test(cuda, device_that_does_not_exist, .init = setup, .fini = teardown)
{
    pinio_gpu_arena *a = NULL;
    pinio_sink_gpu_cfg cc = { .device = 3, .out = &a };
    pinio_diag d;
    cr_expect_eq(run(&cc, &d), -ENODEV);
    cr_expect(strstr(d.msg, "no device cuda:3 (1 device)") != NULL, "%s", d.msg);
    cc = (pinio_sink_gpu_cfg){ .pci_bus_id = "0000:01:00.0", .out = &a };
    cr_expect_eq(run(&cc, &d), -ENODEV);
    cr_expect(strstr(d.msg, "PCI bus id 0000:01:00.0") != NULL, "%s", d.msg);
    expect_clean();
}

Test(cuda, by_pci_bus_id, .init = setup, .fini = teardown)
{
    pinio_gpu_arena *a = NULL;
    pinio_sink_gpu_cfg cc = { .pci_bus_id = "0000:65:00.0", .out = &a };
    pinio_diag d;
    cr_assert_eq(run(&cc, &d), 0, "%s", d.msg);
    pinio_gpu_info ci;
    pinio_gpu_arena_get_info(a, &ci);
    cr_expect_str_eq(ci.pci_bus_id, "0000:65:00.0");
    cr_expect_eq(ci.driver_version, 12080);
    cr_expect(ci.arena_bytes >= ci.bytes);
    pinio_gpu_arena_free(a);
    expect_clean();
}

/* Caller device pointers (torch's, in the binding): filled in place, and
 * refused with the tensor's name when one is not 256-byte aligned. */
Test(cuda, caller_device_pointers, .init = setup, .fini = teardown)
{
    /* A first load tells the sizes; its arena serves as "the caller's". */
    pinio_gpu_arena *a = NULL, *b = NULL;
    pinio_sink_gpu_cfg cc = { .out = &a };
    pinio_diag d;
    cr_assert_eq(run(&cc, &d), 0, "%s", d.msg);
    size_t n = pinio_gpu_arena_tensors(a);
    uint64_t *ptrs = calloc(n, sizeof(*ptrs));
    for (size_t i = 0; i < n; i++) {
        pinio_gpu_tensor t;
        pinio_gpu_arena_tensor(a, i, &t);
        ptrs[n - 1 - i] = t.dptr; /* reversed: nothing coincides with the sink's own layout */
    }
    /* Reversed pointers give each tensor another's room: only safe when
     * all are the same size, which the generator's equal split makes
     * likely but not certain; use the ones that fit, else skip that case. */
    bool fits = true;
    for (size_t i = 0; i < n; i++) {
        pinio_gpu_tensor t, u;
        pinio_gpu_arena_tensor(a, i, &t);
        pinio_gpu_arena_tensor(a, n - 1 - i, &u);
        fits = fits && u.nbytes >= t.nbytes;
    }
    if (fits) {
        cc = (pinio_sink_gpu_cfg){ .dptrs = ptrs, .ndptrs = n, .out = &b };
        cr_assert_eq(run(&cc, &d), 0, "%s", d.msg);
        pinio_gpu_info ci;
        pinio_gpu_arena_get_info(b, &ci);
        cr_expect_eq(ci.arena_bytes, 0, "nothing allocated with caller pointers");
        for (size_t i = 0; i < n; i++) {
            pinio_gpu_tensor t;
            pinio_gpu_arena_tensor(b, i, &t);
            cr_expect_eq(t.dptr, ptrs[i]);
            uint8_t *buf = malloc(t.nbytes + 1);
            cr_assert_eq(pinio_gpu_arena_read(b, i, 0, buf, (size_t)t.nbytes, NULL), 0);
            cr_expect(pinio_gen_verify(SEED, t.name, 0, buf, (size_t)t.nbytes, NULL), "%s",
                      t.name);
            free(buf);
        }
        pinio_gpu_arena_free(b);
    }
    ptrs[1] += 8;
    cc = (pinio_sink_gpu_cfg){ .dptrs = ptrs, .ndptrs = n, .out = &b };
    cr_expect_eq(run(&cc, &d), -EINVAL);
    cr_expect(strstr(d.msg, "not aligned to 256") != NULL, "%s", d.msg);
    cc.ndptrs = n - 1;
    cr_expect_eq(run(&cc, &d), -EINVAL);
    free(ptrs);
    pinio_gpu_arena_free(a);
    expect_clean();
}

/* cfg.place: the caller's allocator called once at open with the plan's
 * own tensors (what Python's torch.empty needs), its pointers used as
 * given ones; a failing allocator stops the stream with its code. */
typedef struct place_ctx {
    pinio_gpu_arena *from; /* a first load's arena: "the caller's memory" */
    unsigned calls;
    int fail;
} place_ctx;

static int place_from(void *ctx, const pinio_plan *plan, uint64_t *dptrs, size_t n,
                      pinio_diag *diag)
{
    place_ctx *pc = ctx;
    pc->calls++;
    if (pc->fail) {
        pinio_diag_set(diag, pc->fail, "test allocator: refused");
        return pc->fail;
    }
    cr_expect_eq(n, pinio_gpu_arena_tensors(pc->from));
    for (size_t i = 0; i < n; i++) {
        pinio_gpu_tensor t;
        pinio_gpu_arena_tensor(pc->from, i, &t);
        cr_expect_str_eq(pinio_plan_tensor_at(plan, i)->name, t.name);
        dptrs[i] = t.dptr;
    }
    return 0;
}

Test(cuda, caller_allocator_places_the_tensors, .init = setup, .fini = teardown)
{
    pinio_gpu_arena *a = NULL, *b = NULL;
    pinio_sink_gpu_cfg cc = { .out = &a };
    pinio_diag d;
    cr_assert_eq(run(&cc, &d), 0, "%s", d.msg);
    place_ctx pc = { .from = a };
    cc = (pinio_sink_gpu_cfg){ .place = place_from, .place_ctx = &pc, .out = &b };
    cr_assert_eq(run(&cc, &d), 0, "%s", d.msg);
    cr_expect_eq(pc.calls, 1);
    pinio_gpu_info ci;
    pinio_gpu_arena_get_info(b, &ci);
    cr_expect_eq(ci.arena_bytes, 0, "nothing allocated by the sink");
    for (size_t i = 0; i < pinio_gpu_arena_tensors(b); i++) {
        pinio_gpu_tensor t, u;
        pinio_gpu_arena_tensor(b, i, &t);
        pinio_gpu_arena_tensor(a, i, &u);
        cr_expect_eq(t.dptr, u.dptr, "%s", t.name);
    }
    pinio_gpu_arena_free(b);
    b = NULL;
    pc.fail = -ENOMEM;
    cr_expect_eq(run(&cc, &d), -ENOMEM);
    cr_expect(strstr(d.msg, "test allocator: refused") != NULL, "%s", d.msg);
    cr_expect_null(b);
    pinio_gpu_arena_free(a);
    expect_clean();
}

/* The test driver's checks fire: a copy from unregistered memory is
 * refused, a source overwritten while its copy is pending is counted, a
 * call without a context is refused. (Otherwise the sink tests above
 * could pass against a driver that checks nothing.) */
typedef int (*fn_init)(unsigned);
typedef int (*fn_getdev)(int *, int);
typedef int (*fn_retain)(void **, int);
typedef int (*fn_release)(int);
typedef int (*fn_push)(void *);
typedef int (*fn_pop)(void **);
typedef int (*fn_reg)(void *, size_t, unsigned);
typedef int (*fn_unreg)(void *);
typedef int (*fn_alloc)(unsigned long long *, size_t);
typedef int (*fn_free)(unsigned long long);
typedef int (*fn_h2d)(unsigned long long, const void *, size_t, void *);
typedef int (*fn_screate)(void **, unsigned);
typedef int (*fn_ssync)(void *);
typedef int (*fn_sdestroy)(void *);

#define SYM(t, name) ((t)(uintptr_t)dlsym(fake, name))

Test(cuda, the_test_driver_checks_fire, .init = setup, .fini = teardown)
{
    setenv("FAKE_CUDA_DELAY_US", "20000", 1);
    cr_assert_eq(SYM(fn_init, "cuInit")(0), 0);
    void *ctx = NULL, *s = NULL;
    unsigned long long dptr = 0;
    cr_expect_eq(SYM(fn_alloc, "cuMemAlloc_v2")(&dptr, 4096), 201, "no context: refused");
    cr_assert_eq(SYM(fn_retain, "cuDevicePrimaryCtxRetain")(&ctx, 0), 0);
    cr_assert_eq(SYM(fn_push, "cuCtxPushCurrent_v2")(ctx), 0);
    cr_assert_eq(SYM(fn_alloc, "cuMemAlloc_v2")(&dptr, 4096), 0);
    cr_expect_eq(dptr % 256, 0);
    cr_assert_eq(SYM(fn_screate, "cuStreamCreate")(&s, 1), 0);
    static uint8_t host[4096];
    cr_expect_eq(SYM(fn_h2d, "cuMemcpyHtoDAsync_v2")(dptr, host, sizeof(host), s), 1,
                 "unregistered source: refused");
    cr_assert_eq(SYM(fn_reg, "cuMemHostRegister_v2")(host, sizeof(host), 1), 0);
    cr_expect_eq(SYM(fn_reg, "cuMemHostRegister_v2")(host, sizeof(host), 1), 712);
    cr_expect_eq(SYM(fn_h2d, "cuMemcpyHtoDAsync_v2")(dptr + 256, host, sizeof(host), s), 1,
                 "past the allocation: refused");
    cr_assert_eq(SYM(fn_h2d, "cuMemcpyHtoDAsync_v2")(dptr, host, sizeof(host), s), 0);
    memset(host, 0x5a, sizeof(host)); /* while the copy is pending */
    cr_assert_eq(SYM(fn_ssync, "cuStreamSynchronize")(s), 0);
    fake_stats fs;
    stats(&fs);
    cr_expect_eq(fs.overwritten, 1, "the overwrite was seen");
    cr_expect_eq(fs.unregistered, 1);
    cr_expect_eq(fs.out_of_bounds, 1);
    cr_expect_eq(fs.no_context, 1);
    SYM(fn_sdestroy, "cuStreamDestroy_v2")(s);
    SYM(fn_unreg, "cuMemHostUnregister")(host);
    SYM(fn_free, "cuMemFree_v2")(dptr);
    SYM(fn_pop, "cuCtxPopCurrent_v2")(&ctx);
    SYM(fn_release, "cuDevicePrimaryCtxRelease_v2")(0);
    unsetenv("FAKE_CUDA_DELAY_US");
}

/* With FAKE_CUDA_DROP_PENDING_AT_DESTROY=1 the test driver drops the
 * copies still pending when a stream is destroyed (as if a real driver's
 * cuStreamDestroy had returned before they landed) instead of completing
 * them. The driver's drop is shown to fire first, then a whole load is
 * checked byte by byte under it: every copy must have been waited for
 * (slot events, the stream synchronized) before the sink destroyed its
 * stream. Checked to fail: with the stream's final drain of every slot
 * (run_sink() in src/stream/stream.c) and both cuStreamSynchronize calls
 * of gpu.c (finish, close) removed, this test fails (copies dropped,
 * tensors unverified) while every other test here still passes. */
Test(cuda, every_copy_waited_for_before_the_stream_is_destroyed, .init = setup,
     .fini = teardown)
{
    setenv("FAKE_CUDA_DELAY_US", "2000", 1); /* each copy pending 2 ms */
    setenv("FAKE_CUDA_DROP_PENDING_AT_DESTROY", "1", 1);
    /* The drop fires: a copy destroyed while pending never lands. */
    cr_assert_eq(SYM(fn_init, "cuInit")(0), 0);
    void *ctx = NULL, *s = NULL;
    unsigned long long dptr = 0;
    static uint8_t host[4096];
    cr_assert_eq(SYM(fn_retain, "cuDevicePrimaryCtxRetain")(&ctx, 0), 0);
    cr_assert_eq(SYM(fn_push, "cuCtxPushCurrent_v2")(ctx), 0);
    cr_assert_eq(SYM(fn_alloc, "cuMemAlloc_v2")(&dptr, sizeof(host)), 0);
    cr_assert_eq(SYM(fn_reg, "cuMemHostRegister_v2")(host, sizeof(host), 1), 0);
    cr_assert_eq(SYM(fn_screate, "cuStreamCreate")(&s, 1), 0);
    memset(host, 0x11, sizeof(host));
    fake_stats fs;
    stats(&fs);
    unsigned long dropped0 = fs.dropped;
    cr_assert_eq(SYM(fn_h2d, "cuMemcpyHtoDAsync_v2")(dptr, host, sizeof(host), s), 0);
    SYM(fn_sdestroy, "cuStreamDestroy_v2")(s); /* no cuStreamSynchronize */
    stats(&fs);
    cr_expect_eq(fs.dropped, dropped0 + 1, "the pending copy was dropped");
    cr_expect_eq(((uint8_t *)(uintptr_t)dptr)[0], 0xA5, "its bytes never landed");
    SYM(fn_unreg, "cuMemHostUnregister")(host);
    SYM(fn_free, "cuMemFree_v2")(dptr);
    SYM(fn_pop, "cuCtxPopCurrent_v2")(&ctx);
    SYM(fn_release, "cuDevicePrimaryCtxRelease_v2")(0);

    /* A load under it: every byte there, nothing dropped. */
    pinio_gpu_arena *a = NULL;
    pinio_sink_gpu_cfg cc = { .out = &a };
    pinio_diag d;
    cr_assert_eq(run(&cc, &d), 0, "%s", d.msg);
    stats(&fs);
    cr_expect_eq(fs.dropped, dropped0 + 1, "no copy of the load was pending at destroy");
    size_t n = pinio_gpu_arena_tensors(a);
    cr_expect_gt(n, 1);
    for (size_t i = 0; i < n; i++) {
        pinio_gpu_tensor t;
        pinio_gpu_arena_tensor(a, i, &t);
        /* the test driver's device memory is host memory: read in place,
         * not through cuMemcpyDtoH, which would wait for nothing anyway */
        const uint8_t *p = (const uint8_t *)(uintptr_t)t.dptr;
        cr_expect(pinio_gen_verify(SEED, t.name, 0, p, (size_t)t.nbytes, NULL),
                  "tensor '%s' complete when the load returned", t.name);
    }
    pinio_gpu_arena_free(a);
    expect_clean();
    unsetenv("FAKE_CUDA_DROP_PENDING_AT_DESTROY");
    unsetenv("FAKE_CUDA_DELAY_US");
}

/* HIP: the same sink body through HIP's names (the test driver built as
 * libamdhip64.so); its absence is one clear line too. */
Test(hip, no_runtime_is_one_clear_line, .init = setup, .fini = teardown)
{
    setenv("PINIO_HIP_LIB", "/var/tmp/pinio-no-such-dir/libamdhip64.so", 1);
    pinio_gpu_arena *a = NULL;
    pinio_sink_gpu_cfg cc = { .out = &a };
    pinio_stream_opts o;
    pinio_stream_opts_default(&o);
    pinio_diag d = { 0 };
    const char *in = path;
    cr_expect_eq(pinio_stream(&in, 1, &o, &pinio_sink_hip, &cc, NULL, &d), -ENODEV);
    cr_expect(strncmp(d.msg, "no HIP driver: ", 15) == 0, "%s", d.msg);
    cr_expect(strstr(d.msg, "PINIO_HIP_LIB") != NULL, "%s", d.msg);
}

Test(hip, failures_name_hip_calls, .init = setup, .fini = teardown)
{
    void *hip = NULL;
    fake_stats_fn hstats = fake_gpu_load("PINIO_HIP_LIB", &hip);
    cr_assert_not_null(hstats, "PINIO_HIP_LIB names the HIP test driver");
    static const struct { const char *inject; int code; const char *words; } cases[] = {
        { "alloc", -ENOMEM, "hip: hipMalloc failed" },
        { "register", -ENOMEM, "hipHostRegister" },
        { "event", -EIO, "hipEventSynchronize" },
        { "nodevice", -ENODEV, "no HIP device: hipInit answered " },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        setenv("FAKE_CUDA_FAIL", cases[i].inject, 1);
        pinio_gpu_arena *a = NULL;
        pinio_sink_gpu_cfg cc = { .device = 0, .out = &a };
        pinio_diag d;
        cr_expect_eq(run_to(&pinio_sink_hip, &cc, &d), cases[i].code,
                     "%s: %s", cases[i].inject, d.msg);
        cr_expect(strstr(d.msg, cases[i].words) != NULL, "'%s' in: %s", cases[i].words, d.msg);
        fake_stats fs;
        hstats(&fs);
        cr_expect(fs.allocs_live == 0 && fs.registered_live == 0 && fs.ctx_retained == 0 &&
                      fs.streams_live == 0, "%s: something left on the HIP driver", cases[i].inject);
    }
    unsetenv("FAKE_CUDA_FAIL");
    dlclose(hip);
}

/* DEVICE pinio_bytes (pinio_gpu_arena_bytes): counting the test driver's
 * cuMemcpyDtoH_v2 calls and bytes shows which reads reach the device. */
static void d2h(unsigned long *copies, unsigned long *bytes)
{
    fake_stats fs;
    stats(&fs);
    *copies = fs.d2h_copies;
    *bytes = fs.d2h_bytes;
}

/* Expects exactly `copies` D2H copies of `bytes` bytes since the last call. */
static void expect_d2h(unsigned long copies, unsigned long bytes, const char *what)
{
    static unsigned long c0, b0;
    unsigned long c, b;
    d2h(&c, &b);
    cr_expect(c - c0 == copies && b - b0 == bytes, "%s: %lu D2H copies of %lu bytes, not %lu of %lu",
              what, c - c0, b - b0, copies, bytes);
    c0 = c;
    b0 = b;
}

/* Streams `path` to the cuda sink; returns the arena (3 tensors at least). */
static pinio_gpu_arena *load_arena(void)
{
    pinio_gpu_arena *a = NULL;
    pinio_sink_gpu_cfg cc = { .out = &a };
    pinio_diag d;
    cr_assert_eq(run(&cc, &d), 0, "%s", d.msg);
    cr_assert_gt(pinio_gpu_arena_tensors(a), 2);
    return a;
}

static void expect_bytes_of(pinio_bytes *b, const pinio_gpu_tensor *t, uint64_t at, size_t off,
                            size_t len)
{
    uint8_t *buf = malloc(len + 1);
    pinio_diag d = { 0 };
    cr_assert_eq(pinio_bytes_read(b, off, buf, len, &d), 0, "%s", d.msg);
    cr_expect(pinio_gen_verify(SEED, t->name, at + off, buf, len, NULL), "%s bytes [%llu, +%zu)",
              t->name, (unsigned long long)(at + off), len);
    free(buf);
}

Test(cuda, device_bytes_read_back_lazily, .init = setup, .fini = teardown)
{
    pinio_gpu_arena *a = load_arena();
    pinio_gpu_tensor t;
    cr_assert_eq(pinio_gpu_arena_tensor(a, 1, &t), 0);
    cr_assert_gt(t.nbytes, 4096);
    pinio_bytes *b = NULL;
    pinio_diag d = { 0 };
    cr_assert_eq(pinio_gpu_arena_bytes(a, 1, &b, &d), 0, "%s", d.msg);
    cr_expect_eq(pinio_bytes_property(b), PINIO_PROP_DEVICE);
    cr_expect_eq(pinio_bytes_len(b), t.nbytes);
    expect_d2h(0, 0, "before any read");

    /* A sub-range reads that range only, every time (nothing cached). */
    expect_bytes_of(b, &t, 0, 1000, 100);
    expect_d2h(1, 100, "a 100-byte read");
    expect_bytes_of(b, &t, 0, (size_t)t.nbytes - 7, 7);
    expect_d2h(1, 7, "the last 7 bytes");

    /* Zero-copy host access would need the read-back: refused, nothing read. */
    const uint8_t *p;
    cr_expect_eq(pinio_bytes_data(b, PINIO_ACCESS_ZERO_COPY, &p, NULL), PINIO_EWOULD_COPY);
    expect_d2h(0, 0, "a refused zero-copy access");
    /* The whole tensor once; later reads and data() come from the host copy. */
    cr_assert_eq(pinio_bytes_data(b, PINIO_ACCESS_COPY, &p, &d), 0, "%s", d.msg);
    cr_expect(pinio_gen_verify(SEED, t.name, 0, p, (size_t)t.nbytes, NULL));
    cr_expect_eq((uintptr_t)p % PINIO_DEFAULT_ALIGN, 0);
    expect_d2h(1, t.nbytes, "the whole read-back");
    cr_assert_eq(pinio_bytes_data(b, PINIO_ACCESS_ZERO_COPY, &p, NULL), 0);
    expect_bytes_of(b, &t, 0, 5, 64);
    expect_d2h(0, 0, "reads after the read-back");
    cr_expect_eq(pinio_bytes_property(b), PINIO_PROP_DEVICE, "still on the device");

    /* Read-only host side; out-of-range reads and tensors are refused. */
    uint8_t *w;
    cr_expect_eq(pinio_bytes_data_mut(b, PINIO_ACCESS_COPY, &w, NULL), -ENOTSUP);
    uint8_t one;
    cr_expect_eq(pinio_bytes_read(b, (size_t)t.nbytes, &one, 1, NULL), -ERANGE);
    pinio_bytes *none = NULL;
    cr_expect_eq(pinio_gpu_arena_bytes(a, pinio_gpu_arena_tensors(a), &none, &d), -ERANGE);
    cr_expect_null(none);
    cr_expect(strstr(d.msg, "no tensor") != NULL, "%s", d.msg);
    expect_d2h(0, 0, "refused reads");
    pinio_bytes_free(b);
    pinio_gpu_arena_free(a);
    expect_clean();
}

/* view, split and clone are lazy windows of the same device range (also
 * after the parent was read back): property DEVICE, and each reads only
 * its own bytes. */
Test(cuda, device_bytes_views_and_splits, .init = setup, .fini = teardown)
{
    pinio_gpu_arena *a = load_arena();
    pinio_gpu_tensor t;
    cr_assert_eq(pinio_gpu_arena_tensor(a, 2, &t), 0);
    pinio_bytes *b, *v, *right, *c;
    cr_assert_eq(pinio_gpu_arena_bytes(a, 2, &b, NULL), 0);
    expect_d2h(0, 0, "start");
    cr_assert_eq(pinio_bytes_view(b, 256, 1024, PINIO_ACCESS_ZERO_COPY, &v, NULL), 0);
    cr_expect_eq(pinio_bytes_property(v), PINIO_PROP_DEVICE);
    cr_expect_eq(pinio_bytes_len(v), 768);
    expect_d2h(0, 0, "a view reads nothing");
    expect_bytes_of(v, &t, 256, 8, 16);
    expect_d2h(1, 16, "16 bytes of the view");
    const uint8_t *p;
    cr_assert_eq(pinio_bytes_data(v, PINIO_ACCESS_COPY, &p, NULL), 0);
    cr_expect(pinio_gen_verify(SEED, t.name, 256, p, 768, NULL));
    expect_d2h(1, 768, "the view's read-back is the view only");

    /* The parent read back, then split: both halves still lazy and DEVICE. */
    cr_assert_eq(pinio_bytes_data(b, PINIO_ACCESS_COPY, &p, NULL), 0);
    expect_d2h(1, t.nbytes, "the parent's read-back");
    cr_assert_eq(pinio_bytes_split(b, 300, PINIO_ACCESS_ZERO_COPY, &right, NULL), 0);
    cr_expect_eq(pinio_bytes_len(b), 300);
    cr_expect_eq(pinio_bytes_len(right), t.nbytes - 300);
    cr_expect_eq(pinio_bytes_property(b), PINIO_PROP_DEVICE);
    cr_expect_eq(pinio_bytes_property(right), PINIO_PROP_DEVICE);
    expect_d2h(0, 0, "a split reads nothing");
    expect_bytes_of(right, &t, 300, 0, 32);
    expect_bytes_of(b, &t, 0, 268, 32);
    expect_d2h(2, 64, "each half reads its own range");

    cr_assert_eq(pinio_bytes_clone(right, PINIO_ACCESS_ZERO_COPY, &c, NULL), 0);
    cr_expect_eq(pinio_bytes_property(c), PINIO_PROP_DEVICE);
    expect_bytes_of(c, &t, 300, (size_t)t.nbytes - 300 - 4, 4);
    expect_d2h(1, 4, "a clone reads its range lazily");
    /* An empty view: nothing to read, no buffer needed. */
    pinio_bytes *e;
    cr_assert_eq(pinio_bytes_view(c, 10, 10, PINIO_ACCESS_ZERO_COPY, &e, NULL), 0);
    cr_expect_eq(pinio_bytes_data(e, PINIO_ACCESS_ZERO_COPY, &p, NULL), 0);
    expect_d2h(0, 0, "an empty view");
    pinio_bytes_free(e);
    pinio_bytes_free(c);
    pinio_bytes_free(right);
    pinio_bytes_free(v);
    pinio_bytes_free(b);
    pinio_gpu_arena_free(a);
    expect_clean();
}

/* The bytes hold the arena: the device memory stays until the last of the
 * handle, the bytes and their view is released, in any of the 6 orders. */
Test(cuda, device_bytes_outlive_the_arena_handle, .init = setup, .fini = teardown)
{
    static const int orders[6][3] = { { 0, 1, 2 }, { 0, 2, 1 }, { 1, 0, 2 },
                                      { 1, 2, 0 }, { 2, 0, 1 }, { 2, 1, 0 } };
    for (int o = 0; o < 6; o++) {
        pinio_gpu_arena *a = load_arena();
        pinio_gpu_tensor t;
        cr_assert_eq(pinio_gpu_arena_tensor(a, 0, &t), 0);
        pinio_bytes *b, *v;
        cr_assert_eq(pinio_gpu_arena_bytes(a, 0, &b, NULL), 0);
        cr_assert_eq(pinio_bytes_view(b, 64, 128, PINIO_ACCESS_ZERO_COPY, &v, NULL), 0);
        bool gone[3] = { false, false, false };
        for (int k = 0; k < 3; k++) {
            int x = orders[o][k];
            if (x == 0)
                pinio_gpu_arena_free(a);
            else if (x == 1)
                pinio_bytes_free(b);
            else
                pinio_bytes_free(v);
            gone[x] = true;
            fake_stats fs;
            stats(&fs);
            if (k < 2)
                cr_expect_eq(fs.allocs_live, 1, "order %d step %d: the device memory stays", o,
                             k);
            /* What is left still reads the right bytes. */
            if (!gone[1])
                expect_bytes_of(b, &t, 0, 0, 64);
            if (!gone[2])
                expect_bytes_of(v, &t, 64, 0, 64);
        }
        expect_clean();
    }
}

/* HIP: the device is selected with hipSetDevice (HIP's context calls are
 * deprecated; the test HIP library does not even have them), the thread's
 * own device is restored after the stream and after each read back, and
 * a call on a thread that selected no device is what the library counts. */
typedef int (*fn_setdev)(int);
typedef int (*fn_hipgetdev)(int *);

Test(cuda, hip_selects_the_device_with_hipSetDevice, .init = setup, .fini = teardown)
{
    void *hip = NULL;
    fake_stats_fn hstats = fake_gpu_load("PINIO_HIP_LIB", &hip);
    cr_assert_not_null(hstats, "PINIO_HIP_LIB names the test HIP library");
    cr_expect_null(dlsym(hip, "hipCtxPushCurrent"));
    cr_expect_null(dlsym(hip, "hipDevicePrimaryCtxRetain"));
    fn_setdev setdev = (fn_setdev)(uintptr_t)dlsym(hip, "hipSetDevice");
    fn_hipgetdev getdev = (fn_hipgetdev)(uintptr_t)dlsym(hip, "hipGetDevice");
    cr_assert(setdev && getdev);
    setenv("FAKE_CUDA_DEVICES", "2", 1);
    cr_assert_eq(((fn_init)(uintptr_t)dlsym(hip, "hipInit"))(0), 0);
    unsigned long long dptr = 0;
    cr_expect_eq(((fn_alloc)(uintptr_t)dlsym(hip, "hipMalloc"))(&dptr, 4096), 201,
                 "no device selected on this thread: refused");
    fake_stats fs;
    hstats(&fs);
    cr_expect_eq(fs.no_context, 1);

    cr_assert_eq(setdev(0), 0); /* the caller's own choice, which pinio must keep */
    pinio_gpu_arena *a = NULL;
    pinio_sink_gpu_cfg cc = { .device = 1, .out = &a };
    pinio_diag d;
    cr_assert_eq(run_to(&pinio_sink_hip, &cc, &d), 0, "%s", d.msg);
    int dev = -1;
    cr_expect(getdev(&dev) == 0 && dev == 0, "the thread's device restored (got %d)", dev);
    pinio_gpu_info gi;
    pinio_gpu_arena_get_info(a, &gi);
    cr_expect_eq(gi.device, 1);
    pinio_gpu_tensor t;
    cr_assert_eq(pinio_gpu_arena_tensor(a, 0, &t), 0);
    uint8_t *buf = malloc(t.nbytes + 1);
    cr_assert_eq(pinio_gpu_arena_read(a, 0, 0, buf, (size_t)t.nbytes, &d), 0, "%s", d.msg);
    cr_expect(pinio_gen_verify(SEED, t.name, 0, buf, (size_t)t.nbytes, NULL));
    free(buf);
    cr_expect(getdev(&dev) == 0 && dev == 0, "the thread's device restored after a read back");
    pinio_gpu_arena_free(a);
    hstats(&fs);
    cr_expect_eq(fs.no_context, 1, "pinio made no call without a device selected");
    cr_expect(fs.allocs_live == 0 && fs.registered_live == 0 && fs.streams_live == 0,
              "left on the device: %lu allocations, %lu registrations, %lu streams",
              fs.allocs_live, fs.registered_live, fs.streams_live);
    unsetenv("FAKE_CUDA_DEVICES");
    dlclose(hip);
}

/* DEVICE bytes read from several threads at once (the controller.h
 * contract for memory() and copy_into()): every thread gets the right
 * bytes, each from a thread that has no context of its own, and racing
 * first host accesses read the tensor back exactly once. Also run under
 * ThreadSanitizer (suite concurrency, meson.build). */
#define READERS 4

typedef struct reader {
    pinio_bytes *b;
    const pinio_gpu_tensor *t;
    pthread_barrier_t *go;
    bool whole;                /* data(), else sub-range reads */
    int bad;
} reader;

static void *read_device(void *arg)
{
    reader *r = arg;
    size_t n = (size_t)r->t->nbytes;
    uint8_t buf[512];
    pthread_barrier_wait(r->go);
    if (r->whole) {
        const uint8_t *p;
        r->bad += pinio_bytes_data(r->b, PINIO_ACCESS_COPY, &p, NULL) != 0 ||
                  !pinio_gen_verify(SEED, r->t->name, 0, p, n, NULL);
    }
    for (size_t off = (size_t)(uintptr_t)r % 97; off + sizeof(buf) <= n; off += n / 16 + 1)
        r->bad += pinio_bytes_read(r->b, off, buf, sizeof(buf), NULL) != 0 ||
                  !pinio_gen_verify(SEED, r->t->name, off, buf, sizeof(buf), NULL);
    return NULL;
}

static void read_concurrently(pinio_bytes *b, const pinio_gpu_tensor *t, bool whole)
{
    pthread_t th[READERS];
    reader rd[READERS];
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, READERS);
    for (int i = 0; i < READERS; i++) {
        rd[i] = (reader){ .b = b, .t = t, .go = &go, .whole = whole };
        cr_assert_eq(pthread_create(&th[i], NULL, read_device, &rd[i]), 0);
    }
    for (int i = 0; i < READERS; i++) {
        pthread_join(th[i], NULL);
        cr_expect_eq(rd[i].bad, 0, "reader %d: wrong bytes or a failed read", i);
    }
    pthread_barrier_destroy(&go);
}

Test(cuda, device_bytes_concurrent_reads, .init = setup, .fini = teardown)
{
    pinio_gpu_arena *a = load_arena();
    pinio_gpu_tensor t;
    cr_assert_eq(pinio_gpu_arena_tensor(a, 3, &t), 0);
    pinio_bytes *b;
    cr_assert_eq(pinio_gpu_arena_bytes(a, 3, &b, NULL), 0);
    pinio_gpu_arena_free(a); /* the bytes hold the arena */
    unsigned long c0, b0, c1, b1;
    d2h(&c0, &b0);
    read_concurrently(b, &t, false);
    d2h(&c1, &b1);
    cr_expect_gt(c1 - c0, 0, "sub-range reads went to the device");
    cr_expect_lt(b1 - b0, (unsigned long)t.nbytes * READERS, "never the whole tensor");
    d2h(&c0, &b0);
    read_concurrently(b, &t, true);
    d2h(&c1, &b1);
    cr_expect_eq(c1 - c0, 1, "racing first host accesses: one read-back, not %lu", c1 - c0);
    cr_expect_eq(b1 - b0, t.nbytes);
    fake_stats fs;
    stats(&fs);
    cr_expect_eq(fs.no_context, 0, "each reader thread bound the device");
    pinio_bytes_free(b);
    expect_clean();
}
