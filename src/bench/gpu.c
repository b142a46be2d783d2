/* GPU destinations of pinio_bench (pinio_bench_opts::mem, contract in
 * include/pinio/bench.h): storage -> host -> GPU, pipelined.
 *
 *   open:    the driver, the device, and the copy alone for reference,
 *            before any file is made (a machine without the GPU costs no
 *            fill)
 *   job:     per job, on its own thread: a stream, one event and one
 *            device buffer per staging buffer, the staging registered
 *   landed:  a read is in its buffer: its copy issued, the slot flipped to
 *            its other buffer, which is waited for (and, verifying, read
 *            back from the device and checked) before it is read into
 *   drain:   the pass's last copies waited for
 *
 * Why the driver table of the sinks (src/stream/gpu_dl.h) and not a sink:
 * a sink consumes a plan's tensors, and bench reads blocks of any file;
 * what they share is the part that matters for the measurement, the
 * driver loaded the same way (libcuda.so.1 or PINIO_CUDA_LIB, HIP's
 * libraries or PINIO_HIP_LIB), the same calls (cuMemHostRegister on
 * io_uring's registered buffers, cuMemcpyHtoDAsync on a non-blocking
 * stream, an event per buffer) and the same messages.
 *
 * Why two buffers per slot: with one, a slot's next read could start only
 * after its copy ended, and at qd 1 reads and copies would take turns;
 * with two, the read of block k+1 runs while block k is copied, which is
 * the overlap the figures report. The buffer about to be read into is
 * waited for first: the fake driver counts a buffer overwritten under a
 * pending copy, a real one would copy the new bytes.
 *
 * Why the device buffers are per staging buffer (2 x qd x bs per job, as
 * gdsio gives each thread its own), not a mirror of the file: a benchmark
 * may read a file larger than the GPU's memory. Verification therefore
 * happens per block, when its copy is known complete. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/bench/job_internal.h"
#include "src/stream/gpu_dl.h"

struct pinio__bench_gpu {
    pinio__gpu drv;
    bool drv_open;
    CUdevice dev;
    CUcontext ctx;             /* CUDA: the primary context, retained */
    bool ctx_retained;
    char mem[16];              /* "cuda:0", for messages and the result */
    char name[96];
    double copy_alone_bps;
};

struct pinio__bench_gpu_job {
    bool bound;
    int prev_dev;              /* HIP: the thread's device before */
    CUstream stream;
    CUevent *ev;               /* per staging buffer */
    CUdeviceptr dbuf;          /* nbuf x maxbs */
    bool registered;
    bool *pending;             /* a copy from the buffer may still run */
    bool *check;               /* its block is to be checked on the device */
    slot *blk;                 /* the block each buffer last held */
    uint8_t *scratch;          /* verify: a block read back from the device */
    uint64_t bytes, verified, wait_ns, t_first, t_last;
};

/* The device current on this thread until gpu_unbind(): CUDA's primary
 * context pushed, HIP's device selected (as the sinks bind it). */
static CUresult gpu_bind(pinio__bench_gpu *g, int *prev)
{
    if (!g->drv.api->hip)
        return g->drv.CtxPushCurrent(g->ctx);
    CUresult r = g->drv.GetDevice(prev);
    return r == CUDA_SUCCESS ? g->drv.SetDevice(g->dev) : r;
}

static void gpu_unbind(pinio__bench_gpu *g, int prev)
{
    CUcontext popped;
    if (g->drv.api->hip)
        g->drv.SetDevice(prev);
    else
        g->drv.CtxPopCurrent(&popped);
}

static const char *bind_sym(const pinio__bench_gpu *g)
{
    return g->drv.api->hip ? g->drv.sym.SetDevice : g->drv.sym.CtxPushCurrent;
}

/* A driver failure as "bench: --mem cuda:0: WHAT: the driver's words". */
static int gpu_fail(const pinio__bench_gpu *g, CUresult r, const char *sym, const char *what,
                    pinio_diag *diag)
{
    pinio_diag why = {0};
    int rc = pinio__gpu_fail(&g->drv, r, sym, &why);
    pinio_diag_set(diag, rc, "bench: --mem %s: %s: %s", g->mem, what, why.msg);
    return rc;
}

void pinio__bench_gpu_close(pinio__bench_gpu *g)
{
    if (!g)
        return;
    if (g->ctx_retained)
        g->drv.DevicePrimaryCtxRelease(g->dev);
    if (g->drv_open)
        pinio__gpu_close(&g->drv);
    free(g);
}

/* The copy alone: one staging buffer's bytes, pinned, copied to the
 * device over and over (up to 256 MiB, at most 64 copies), best of 3. */
static int copy_alone(pinio__bench_gpu *g, uint64_t len, pinio_diag *diag)
{
    pinio__gpu *d = &g->drv;
    size_t maplen = (len + HUGE_ALIGN - 1) & ~(uint64_t)(HUGE_ALIGN - 1);
    uint8_t *host = pinio__prim_map(maplen, HUGE_ALIGN, false);
    if (!host)
        return pinio_diag_set(diag, -ENOMEM, "bench: --mem %s: no memory for the reference "
                              "copy's %llu bytes", g->mem, (unsigned long long)len), -ENOMEM;
    memset(host, 0x5a, maplen); /* faulted in off the clock */
    int prev = 0, rc = 0;
    bool reg = false;
    CUdeviceptr dbuf = 0;
    CUstream st = NULL;
    CUresult r = gpu_bind(g, &prev);
    if (r != CUDA_SUCCESS) {
        pinio__prim_unmap(host, maplen);
        return gpu_fail(g, r, bind_sym(g), "binding the device", diag);
    }
    if ((r = d->MemHostRegister(host, maplen, CU_MEMHOSTREGISTER_PORTABLE)) != CUDA_SUCCESS)
        rc = gpu_fail(g, r, d->sym.MemHostRegister, "the reference copy's host buffer", diag);
    reg = rc == 0;
    if (!rc && (r = d->MemAlloc(&dbuf, len)) != CUDA_SUCCESS)
        rc = gpu_fail(g, r, d->sym.MemAlloc, "the reference copy's device buffer", diag);
    if (!rc && (r = d->StreamCreate(&st, CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS)
        rc = gpu_fail(g, r, d->sym.StreamCreate, "the reference copy's stream", diag);
    uint64_t reps = (256ull << 20) / len;
    reps = reps < 1 ? 1 : reps > 64 ? 64 : reps;
    double best = 0;
    for (int k = 0; !rc && k < 3; k++) {
        uint64_t t0 = now_ns();
        for (uint64_t i = 0; !rc && i < reps; i++)
            if ((r = d->MemcpyHtoDAsync(dbuf, host, len, st)) != CUDA_SUCCESS)
                rc = gpu_fail(g, r, d->sym.MemcpyHtoDAsync, "the reference copy", diag);
        if (!rc && (r = d->StreamSynchronize(st)) != CUDA_SUCCESS)
            rc = gpu_fail(g, r, d->sym.StreamSynchronize, "the reference copy", diag);
        double s = (double)(now_ns() - t0) * 1e-9;
        if (!rc && s > 0 && (double)(reps * len) / s > best)
            best = (double)(reps * len) / s;
    }
    g->copy_alone_bps = best;
    if (st) {
        d->StreamSynchronize(st); /* nothing may read the buffer past here */
        d->StreamDestroy(st);
    }
    if (dbuf)
        d->MemFree(dbuf);
    if (reg)
        d->MemHostUnregister(host);
    gpu_unbind(g, prev);
    pinio__prim_unmap(host, maplen);
    return rc;
}

int pinio__bench_gpu_open(const pinio_bench_opts *o, pinio__bench_gpu **out, pinio_diag *diag)
{
    bool hip = false;
    int n = 0;
    *out = NULL;
    if (pinio__bench_mem_parse(o->mem, &hip, &n) != 1)
        return 0; /* host memory (pinio_bench_check() refused anything else) */
    const pinio__gpu_api *api = hip ? &pinio__hip_api : &pinio__cuda_api;
    pinio__bench_gpu *g = calloc(1, sizeof *g);
    if (!g)
        return pinio_diag_set(diag, -ENOMEM, "bench: no memory for --mem %s", o->mem), -ENOMEM;
    snprintf(g->mem, sizeof g->mem, "%s", o->mem);
    pinio_diag why = {0};
    int rc = pinio__gpu_open(&g->drv, api, &why);
    if (rc < 0) {
        pinio_diag_set(diag, rc, "bench: --mem %s: %s", g->mem, why.msg);
        free(g);
        return rc;
    }
    g->drv_open = true;
    int count = 0;
    CUresult r = g->drv.DeviceGetCount(&count);
    if (r != CUDA_SUCCESS) {
        rc = gpu_fail(g, r, g->drv.sym.DeviceGetCount, "counting the devices", diag);
    } else if (n >= count) {
        rc = -ENODEV;
        if (count)
            pinio_diag_set(diag, rc, "bench: --mem %s: no such device: the %s driver has %d "
                           "device%s (%s:0 to %s:%d), no %s:%d", g->mem, api->name, count,
                           count == 1 ? "" : "s", api->tag, api->tag, count - 1, api->tag, n);
        else
            pinio_diag_set(diag, rc, "bench: --mem %s: no such device: the %s driver has none",
                           g->mem, api->name);
    } else if ((r = g->drv.DeviceGet(&g->dev, n)) != CUDA_SUCCESS) {
        rc = gpu_fail(g, r, g->drv.sym.DeviceGet, "the device", diag);
    }
    if (!rc) {
        if (g->drv.DeviceGetName(g->name, (int)sizeof g->name, g->dev) != CUDA_SUCCESS)
            g->name[0] = 0;
        g->name[sizeof g->name - 1] = 0;
        if (!api->hip) {
            r = g->drv.DevicePrimaryCtxRetain(&g->ctx, g->dev);
            if (r != CUDA_SUCCESS)
                rc = gpu_fail(g, r, g->drv.sym.DevicePrimaryCtxRetain, "the device's context",
                              diag);
            g->ctx_retained = rc == 0;
        }
    }
    if (!rc)
        rc = copy_alone(g, unit_bs(o), diag);
    if (rc) {
        pinio__bench_gpu_close(g);
        return rc;
    }
    *out = g;
    return 0;
}

/* A job's failure, first one wins (as job.c's job_fail()). */
static int job_gpu_fail(job *j, CUresult r, const char *sym, const char *what)
{
    pinio_diag why = {0};
    int rc = pinio__gpu_fail(&j->gpu_run->drv, r, sym, &why);
    if (!j->err) {
        j->err = rc;
        pinio_diag_set(&j->diag, rc, "bench: %s: --mem %s: job %u: %s: %s", j->o->path,
                       j->gpu_run->mem, j->idx, what, why.msg);
    }
    return rc;
}

int pinio__bench_gpu_job_setup(job *j)
{
    pinio__bench_gpu *g = j->gpu_run;
    pinio__gpu *d = &g->drv;
    unsigned nb = 2 * j->o->qd;
    pinio__bench_gpu_job *G = calloc(1, sizeof *G);
    j->gpu = G;
    if (G) {
        G->ev = calloc(nb, sizeof *G->ev);
        G->pending = calloc(nb, sizeof *G->pending);
        G->check = calloc(nb, sizeof *G->check);
        G->blk = calloc(nb, sizeof *G->blk);
        if (j->o->verify_only)
            G->scratch = malloc(j->maxbs);
    }
    if (!G || !G->ev || !G->pending || !G->check || !G->blk ||
        (j->o->verify_only && !G->scratch)) {
        if (!j->err) {
            j->err = -ENOMEM;
            pinio_diag_set(&j->diag, -ENOMEM, "bench: %s: no memory for --mem %s", j->o->path,
                           g->mem);
        }
        return -ENOMEM;
    }
    CUresult r = gpu_bind(g, &G->prev_dev);
    if (r != CUDA_SUCCESS)
        return job_gpu_fail(j, r, bind_sym(g), "binding the device");
    G->bound = true;
    if ((r = d->StreamCreate(&G->stream, CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS)
        return job_gpu_fail(j, r, d->sym.StreamCreate, "the job's stream");
    for (unsigned i = 0; i < nb; i++)
        if ((r = d->EventCreate(&G->ev[i], CU_EVENT_DISABLE_TIMING)) != CUDA_SUCCESS)
            return job_gpu_fail(j, r, d->sym.EventCreate, "the staging buffers' events");
    if ((r = d->MemAlloc(&G->dbuf, (size_t)nb * j->maxbs)) != CUDA_SUCCESS)
        return job_gpu_fail(j, r, d->sym.MemAlloc, "the device buffers (2 x qd x bs)");
    /* After io_uring registered the same buffers: the order that keeps
     * both working (src/stream/gpu.c). */
    if ((r = d->MemHostRegister(j->area, j->area_len, CU_MEMHOSTREGISTER_PORTABLE)) !=
        CUDA_SUCCESS)
        return job_gpu_fail(j, r, d->sym.MemHostRegister, "registering the staging buffers");
    G->registered = true;
    return 0;
}

void pinio__bench_gpu_job_end(job *j)
{
    pinio__bench_gpu_job *G = j->gpu;
    if (!G)
        return;
    pinio__bench_gpu *g = j->gpu_run;
    pinio__gpu *d = &g->drv;
    if (G->bound) {
        if (G->stream)
            d->StreamSynchronize(G->stream); /* nothing may read the staging past here */
        for (unsigned i = 0; G->ev && i < 2 * j->o->qd; i++)
            if (G->ev[i])
                d->EventDestroy(G->ev[i]);
        if (G->stream)
            d->StreamDestroy(G->stream);
        if (G->registered)
            d->MemHostUnregister(j->area);
        if (G->dbuf)
            d->MemFree(G->dbuf);
        gpu_unbind(g, G->prev_dev);
    }
    free(G->ev);
    free(G->pending);
    free(G->check);
    free(G->blk);
    free(G->scratch);
    /* The figures stay for the summary: only the counters are kept. */
    memset(G, 0, offsetof(pinio__bench_gpu_job, bytes));
}

void pinio__bench_gpu_job_free(job *j)
{
    free(j->gpu);
    j->gpu = NULL;
}

/* Buffer b may be read into again: its copy waited for (the time counts as
 * copy time not hidden) and, verifying, its block checked on the device. */
static int settle(job *j, unsigned b)
{
    pinio__bench_gpu_job *G = j->gpu;
    pinio__bench_gpu *g = j->gpu_run;
    if (!G->pending[b])
        return 0;
    G->pending[b] = false;
    uint64_t t0 = now_ns();
    CUresult r = g->drv.EventSynchronize(G->ev[b]);
    uint64_t t1 = now_ns();
    G->wait_ns += t1 - t0;
    G->t_last = t1;
    if (r != CUDA_SUCCESS)
        return job_gpu_fail(j, r, g->drv.sym.EventSynchronize, "waiting for a copy");
    if (!G->check[b])
        return 0;
    const slot *sl = &G->blk[b];
    r = g->drv.MemcpyDtoH(G->scratch, G->dbuf + (uint64_t)b * j->maxbs, sl->len);
    if (r != CUDA_SUCCESS)
        return job_gpu_fail(j, r, g->drv.sym.MemcpyDtoH, "reading a block back to verify it");
    pinio__block_found f;
    if (pinio__bench_block_check(G->scratch, sl->len, tagged_off(sl), j->o->seed,
                                 (int)j->o->verify_mode, &f) != 0) {
        if (!j->err) {
            char at[64] = "";
            if (f.bad_at >= 0)
                snprintf(at, sizeof at, " at file offset %llu",
                         (unsigned long long)(sl->off + (uint64_t)f.bad_at));
            j->err = -EBADMSG;
            pinio_diag_set(&j->diag, -EBADMSG, "bench: %s: verify on %s: the block at offset "
                           "%llu (%u bytes) differs in device memory%s after its copy (it "
                           "matched in host memory)", j->paths[sl->file], g->mem,
                           (unsigned long long)sl->off, sl->len, at);
        }
        return -EBADMSG;
    }
    G->verified += sl->len;
    return 0;
}

int pinio__bench_gpu_landed(job *j, unsigned s, bool check, bool rec)
{
    pinio__bench_gpu_job *G = j->gpu;
    pinio__bench_gpu *g = j->gpu_run;
    slot *sl = &j->slots[s];
    unsigned b = pinio__bench_buf(j, s);
    uint64_t t = now_ns();
    if (!G->t_first)
        G->t_first = t;
    CUresult r = g->drv.MemcpyHtoDAsync(G->dbuf + (uint64_t)b * j->maxbs,
                                        j->area + (size_t)b * j->maxbs, sl->len, G->stream);
    if (r != CUDA_SUCCESS) {
        char what[96];
        snprintf(what, sizeof what, "copying the block at offset %llu to the device",
                 (unsigned long long)sl->off);
        return job_gpu_fail(j, r, g->drv.sym.MemcpyHtoDAsync, what);
    }
    if ((r = g->drv.EventRecord(G->ev[b], G->stream)) != CUDA_SUCCESS)
        return job_gpu_fail(j, r, g->drv.sym.EventRecord, "recording a copy's event");
    G->pending[b] = true;
    G->check[b] = check && G->scratch;
    G->blk[b] = *sl;
    if (rec)
        G->bytes += sl->len;
    sl->half ^= 1;
    return settle(j, pinio__bench_buf(j, s));
}

int pinio__bench_gpu_drain(job *j)
{
    int rc = 0;
    for (unsigned b = 0; j->gpu && b < 2 * j->o->qd; b++) {
        int e = settle(j, b);
        rc = rc ? rc : e;
    }
    return rc;
}

void pinio__bench_gpu_ramp(job *j)
{
    if (j->gpu)
        j->gpu->bytes = j->gpu->wait_ns = j->gpu->t_first = 0;
}

void pinio__bench_gpu_summarize(const job *jobs, unsigned n, pinio_bench_result *res)
{
    const pinio__bench_gpu *g = jobs[0].gpu_run;
    if (!g)
        return;
    snprintf(res->gpu_mem, sizeof res->gpu_mem, "%s", g->mem);
    snprintf(res->gpu_name, sizeof res->gpu_name, "%s", g->name);
    res->gpu_copy_alone_bytes_per_s = g->copy_alone_bps;
    uint64_t first = 0, last = 0;
    double wait = 0, read_s = 0;
    for (unsigned i = 0; i < n; i++) {
        const pinio__bench_gpu_job *G = jobs[i].gpu;
        if (!G)
            continue;
        res->gpu_bytes += G->bytes;
        res->gpu_verified_bytes += G->verified;
        double w = (double)G->wait_ns * 1e-9, rs = jobs[i].t_end - jobs[i].t_start - w;
        wait += w;
        read_s = rs > read_s ? rs : read_s;
        if (G->t_first && (!first || G->t_first < first))
            first = G->t_first;
        last = G->t_last > last ? G->t_last : last;
    }
    res->gpu_wait_s = wait / n;
    res->gpu_read_s = read_s;
    res->gpu_h2d_s = first && last > first ? (double)(last - first) * 1e-9 : 0;
    double copy_s = g->copy_alone_bps > 0 ? (double)res->gpu_bytes / g->copy_alone_bps : 0;
    double ov = copy_s > 0 ? 1 - res->gpu_wait_s / copy_s : 0;
    res->gpu_overlap = ov < 0 ? 0 : ov > 1 ? 1 : ov;
}
