/* Ring lifetime: options, the sparse file and buffer tables, the staging
 * area, teardown (closing the files still open: the ring owns their list and
 * slots), the thread check. The setup-flag ladder lives in setup.c, memory
 * registration in register.c, reads in read.c, opening files in rfile.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "src/base/opts.h"
#include "ring_internal.h"

/* Defaults, measured with bench/readbench on the development VM (2 vCPU
 * shared with other jobs, virtio ext4, kernel 6.18, max_sectors_kb 4096),
 * cold 2 GiB file, one run per cell (GB/s, CPU s/GB):
 *   bs 256 KiB: qd 4 1.18/0.051  qd 16 0.96/0.066  qd 32 1.06/0.055
 *   bs   1 MiB: qd 4 0.92/0.041  qd 16 1.02/0.036  qd 32 1.08/0.041
 *   bs   4 MiB: qd 4 0.97/0.016  qd 16 1.17/0.012  qd 32 1.27/0.010
 * GB/s is within this disk's noise (+-50% between runs) everywhere; CPU per
 * GB is not: 4 MiB requests cost a third of 1 MiB ones. 4 MiB = max_sectors_kb
 * (a larger request is split by the block layer anyway), and 16 in flight
 * bounds the destination window at 64 MiB.
 *
 * Those figures were taken into 4 KiB pages. What decides speed against fio
 * here is the page size of the destination, not the submission loop:
 * strace -c shows ~1 io_uring_enter per request (506 for 512 x 4 MiB; fio
 * 3.33 makes 978), no iou-wrk threads appear, the CQ is reaped in bulk and a
 * slot is refilled in the same enter. On 4 KiB pages every read is split at
 * max_segments (254 x 4 KiB ~ 1 MiB): 2 GiB as 2048 x 1 MiB reaches the disk
 * as 4096 reads for pinio and ~4300 for fio (/sys/block/vda/stat). On
 * transparent huge pages (the pool's arena, MADV_HUGEPAGE) registration maps
 * each 2 MiB page as one bvec and the block layer merges requests up to
 * max_sectors_kb: 575 device reads for the same 2048 requests, and cold
 * 4 MiB x qd 16 rises from 1.2-1.4 to 2.5 GB/s at a tenth of the CPU per GB
 * (bench/engine_vs_fio, HUGE=1 vs HUGE=0, alternating runs). Callers that
 * bring their own memory should put it on huge pages too. */
#define DEFAULT_QD 16u
#define DEFAULT_RS (4u << 20)
/* Staging slots carry the unaligned head/tail blocks of O_DIRECT requests and
 * whole pieces only when the destination is misaligned. They are registered,
 * so they are charged to RLIMIT_MEMLOCK (8 MiB by default for a user):
 * 8 x 256 KiB = 2 MiB leaves room for the ring itself and a small pool. */
#define STAGE_SLOT_MAX (256u << 10)
#define STAGE_SLOTS_MAX 8u

void pinio_ring_opts_init(pinio_ring_opts *o, size_t size)
{
    pinio_ring_opts d;
    memset(&d, 0, sizeof(d));
    d.queue_depth = DEFAULT_QD;
    d.request_size = DEFAULT_RS;
    d.backend = PINIO_BACKEND_AUTO;
    d.direct = PINIO_DIRECT_AUTO;
    d.pread_threads = 4;
    d.max_files = 64;
    pinio__opts_init(o, size, &d, sizeof(d));
}

const char *pinio_backend_name(pinio_backend b)
{
    switch (b) {
    case PINIO_BACKEND_AUTO:
        return "auto";
    case PINIO_BACKEND_FIXED_DIRECT:
        return "fixed+direct";
    case PINIO_BACKEND_DIRECT:
        return "direct";
    case PINIO_BACKEND_BUFFERED:
        return "buffered";
    case PINIO_BACKEND_PREAD:
        return "pread";
    }
    return "unknown";
}

static int stage_init(pinio_ring *r)
{
    size_t sz = r->opts.request_size < STAGE_SLOT_MAX ? r->opts.request_size : STAGE_SLOT_MAX;
    unsigned n = r->opts.queue_depth < STAGE_SLOTS_MAX ? r->opts.queue_depth : STAGE_SLOTS_MAX;
    void *p = mmap(NULL, sz * n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return -ENOMEM;
    r->stage_free = calloc(n, sizeof *r->stage_free);
    if (!r->stage_free) {
        munmap(p, sz * n);
        return -ENOMEM;
    }
    r->stage = p;
    r->stage_size = sz;
    r->nstage = n;
    for (unsigned i = 0; i < n; i++)
        r->stage_free[i] = n - 1 - i;
    r->nstage_free = n;
    return 0;
}

int pinio_ring_create(pinio_ring **out, const pinio_ring_opts *opts, pinio_diag *diag)
{
    pinio_ring_opts o;
    pinio_ring_opts_default(&o);
    int crc = pinio__opts_copy(&o, sizeof o, opts, "pinio_ring options", diag);
    if (crc < 0)
        return crc;
    size_t rs = o.request_size;
    if (!o.queue_depth || o.queue_depth > 4096 || rs < 4096 || rs > (1u << 30) ||
        (rs & (rs - 1)) || o.backend > PINIO_BACKEND_PREAD || o.direct > PINIO_DIRECT_OFF ||
        !o.max_files || o.max_files > 32768 || o.pread_threads > 256) {
        pinio_diag_set(diag, -EINVAL,
                          "pinio_ring_create: invalid options (queue depth %u, request size %zu)",
                          o.queue_depth, rs);
        return -EINVAL;
    }
    if (!o.pread_threads)
        o.pread_threads = 4;

    pinio_ring *r = calloc(1, sizeof *r);
    if (!r)
        return -ENOMEM;
    r->opts = o;
    r->opts.faults = NULL; /* the string is only borrowed for the call */
    r->stage_slot = -1;
    pthread_mutex_init(&r->mu, NULL);
    r->owner = pthread_self();
    const char *spec = o.faults ? o.faults : getenv("PINIO_FAULTS");
    int ret = pinio__faults_parse(spec, &r->faults, diag);
    if (ret)
        goto fail;
    ret = -ENOMEM;
    r->slot_used = calloc(PINIO__BUF_TABLE, 1);
    r->deferred = calloc(PINIO__BUF_TABLE, sizeof *r->deferred);
    r->regions = calloc(PINIO__BUF_TABLE, sizeof *r->regions);
    r->file_slot_used = calloc((size_t)o.max_files * 2, 1);
    if (!r->slot_used || !r->regions || !r->file_slot_used || !r->deferred)
        goto fail;
    ret = stage_init(r);
    if (ret)
        goto fail;

    if (o.backend != PINIO_BACKEND_PREAD) {
        ret = pinio__ring_setup_ladder(r);
        if (ret == 0) {
            r->have_ring = true;
        } else if (o.backend == PINIO_BACKEND_AUTO &&
                   (ret == -ENOSYS || ret == -EPERM || ret == -ENOMEM)) {
            /* seccomp (Docker's default profile says EPERM), io_uring_disabled=2
             * (EPERM), 1 without the io_uring group (EPERM), pre-5.1 (ENOSYS), or
             * RLIMIT_MEMLOCK too small for the rings on 6.x (ENOMEM). */
            r->setup_error = ret;
            snprintf(r->reason, sizeof r->reason,
                     "io_uring_setup failed (%s): using the pread thread pool",
                     pinio_err_name(ret));
        } else {
            pinio_diag_set(diag, ret, "io_uring_setup failed: %s", pinio_strerror(ret));
            goto fail;
        }
    } else {
        snprintf(r->reason, sizeof r->reason, "pread thread pool forced by option");
    }

    if (!r->have_ring) {
        r->backend = PINIO_BACKEND_PREAD;
        ret = pinio__pread_pool_create(&r->pool, o.pread_threads, o.queue_depth);
        if (ret)
            goto fail;
        *out = r;
        return 0;
    }

    /* Saves an fd lookup per io_uring_enter (5.18); harmless if refused. */
    (void)io_uring_register_ring_fd(&r->ring);

    int fr = io_uring_register_files_sparse(&r->ring, o.max_files * 2);
    if (fr < 0)
        r->files_error = fr;
    else
        r->files_registered = true;

    r->backend = o.backend == PINIO_BACKEND_AUTO ? PINIO_BACKEND_FIXED_DIRECT : o.backend;
    if (r->backend == PINIO_BACKEND_FIXED_DIRECT) {
        /* A sparse table (5.19) lets pool slabs come and go one slot at a time
         * (register_buffers_update_tag) without a global unregister, which
         * before 5.13 also waited for the ring to go idle. */
        /* Without the table (a kernel before 5.19 answers EINVAL to
         * IORING_RSRC_REGISTER_SPARSE) registration would be all at once
         * (IORING_REGISTER_BUFFERS): every page of every region pinned and
         * faulted before the first read, and no region added later without
         * unregistering the rest. Measured slower than plain O_DIRECT into
         * huge pages for a fresh arena (load.h), so the fallback is that:
         * reads into unregistered memory, the reason in `reason`. */
        int br = r->faults && r->faults->sparseinval
                     ? -EINVAL
                     : io_uring_register_buffers_sparse(&r->ring, PINIO__BUF_TABLE);
        if (br == 0) {
            r->bufs_registered = true;
            br = pinio_ring_register_region(r, r->stage, r->stage_size * r->nstage,
                                            &r->stage_slot);
        }
        if (br < 0) {
            r->reg_error = br;
            if (o.backend == PINIO_BACKEND_FIXED_DIRECT) {
                ret = br;
                pinio_diag_set(diag, ret, "registered buffers refused: %s%s",
                                  pinio_strerror(ret),
                                  br == -ENOMEM ? " (RLIMIT_MEMLOCK too small without "
                                                  "CAP_IPC_LOCK; raise it with prlimit --memlock)"
                                                : "");
                goto fail;
            }
            r->backend = PINIO_BACKEND_DIRECT;
            size_t l = strlen(r->reason);
            snprintf(r->reason + l, sizeof r->reason - l,
                     "; %s refused (%s): unregistered reads",
                     r->bufs_registered ? "buffer registration" : "sparse buffer table",
                     pinio_err_name(br));
        }
    }
    *out = r;
    return 0;

fail:
    pinio_ring_destroy(r);
    return ret;
}

static void slot_put(pinio_ring *r, int slot)
{
    if (slot < 0)
        return;
    int none = -1;
    io_uring_register_files_update(&r->ring, (unsigned)slot, &none, 1);
    r->file_slot_used[slot] = 0;
}

void pinio_ring_file_close(pinio_ring_file *f)
{
    if (!f)
        return;
    pinio_ring *r = f->ring;
    for (pinio_ring_file **pp = &r->files; *pp; pp = &(*pp)->next)
        if (*pp == f) {
            *pp = f->next;
            break;
        }
    slot_put(r, f->fix_direct);
    slot_put(r, f->fix_buf);
    if (f->fd_direct >= 0)
        close(f->fd_direct);
    if (f->fd_buf >= 0)
        close(f->fd_buf);
    free(f->path);
    free(f);
}

void pinio_ring_destroy(pinio_ring *r)
{
    if (!r)
        return;
    while (r->files)
        pinio_ring_file_close(r->files);
    if (r->have_ring) {
        /* Explicit unregistration: the memlock charge is dropped now, not by the
         * ring's asynchronous exit work, so the next ring of this user does not
         * get a spurious -ENOMEM (verified on 6.18: 3 of 5 back-to-back 6 MiB
         * registrations failed without it). */
        if (r->bufs_registered)
            io_uring_unregister_buffers(&r->ring);
        if (r->files_registered)
            io_uring_unregister_files(&r->ring);
        io_uring_queue_exit(&r->ring);
    }
    pinio__pread_pool_destroy(r->pool);
    if (r->stage)
        munmap(r->stage, r->stage_size * r->nstage);
    free(r->stage_free);
    free(r->slot_used);
    free(r->deferred);
    pthread_mutex_destroy(&r->mu);
    free(r->regions);
    free(r->file_slot_used);
    free(r->faults);
    free(r);
}

void pinio_ring_get_info(const pinio_ring *r, pinio_ring_info *info)
{
    memset(info, 0, sizeof *info);
    info->backend = r->backend;
    info->setup_flags = r->setup_flags;
    info->sq_entries = r->have_ring ? r->ring.sq.ring_entries : r->opts.queue_depth;
    info->cq_entries = r->have_ring ? r->cq_entries : r->opts.queue_depth;
    info->request_size = r->opts.request_size;
    info->setup_error = r->setup_error;
    info->reg_error = r->reg_error;
    info->files_error = r->files_error;
    info->regions = r->nkernel;
    info->faults_active = r->faults != NULL;
    info->fixed_ops = r->stats.fixed_ops;
    info->plain_ops = r->stats.plain_ops;
    info->staged_ops = r->stats.staged_ops;
    info->retries = r->stats.retries;
    snprintf(info->reason, sizeof info->reason, "%s", r->reason);
}

int pinio__ring_check_thread(const pinio_ring *r, const char *what, pinio_diag *diag)
{
    /* SINGLE_ISSUER binds the ring to the task that called io_uring_setup
     * (io_uring_create, 6.0+); without it one-thread-at-a-time use is fine. */
    if (!r->have_ring || !(r->setup_flags & IORING_SETUP_SINGLE_ISSUER) ||
        pthread_equal(pthread_self(), r->owner))
        return 0;
    pinio_diag_set(diag, -EPERM,
                      "%s: this ring belongs to the thread that created it "
                      "(IORING_SETUP_SINGLE_ISSUER; the kernel refuses other threads with "
                      "EEXIST): use one ring per I/O thread",
                      what);
    return -EPERM;
}
