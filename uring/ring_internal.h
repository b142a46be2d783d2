/* Internal structures of the io_uring engine, shared by the uring/ modules.
 * Not installed. */
#ifndef PINIO_URING_RING_INTERNAL_H
#define PINIO_URING_RING_INTERNAL_H

#include <liburing.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinio/ring.h"
#include "uring/faults.h"

/* Newer than the bookworm liburing 2.3 headers: define what we probe for. */
#ifndef IORING_SETUP_SUBMIT_ALL
#define IORING_SETUP_SUBMIT_ALL (1U << 7)
#endif
#ifndef IORING_SETUP_COOP_TASKRUN
#define IORING_SETUP_COOP_TASKRUN (1U << 8)
#endif
#ifndef IORING_SETUP_TASKRUN_FLAG
#define IORING_SETUP_TASKRUN_FLAG (1U << 9)
#endif
#ifndef IORING_SETUP_SINGLE_ISSUER
#define IORING_SETUP_SINGLE_ISSUER (1U << 12)
#endif
#ifndef IORING_SETUP_DEFER_TASKRUN
#define IORING_SETUP_DEFER_TASKRUN (1U << 13)
#endif

#define PINIO__REG_MAX_LEN (1ull << 30) /* kernel: one iovec <= 1 GiB (rsrc.c) */
#define PINIO__BUF_TABLE 1024u          /* sparse buffer slots; kernel max is 16384 */

/* ---- the ring ----------------------------------------------------------- */

/* A region's kernel state: registered, or reserved (in the lookup with a
 * slot of its own, the kernel slot still empty) until its pages are ready
 * (pinio_ring_register_region_lazy), or refused by the kernel when its
 * turn came (reads into it stay plain). */
enum { PINIO__REG_KERNEL, PINIO__REG_PENDING, PINIO__REG_REFUSED };

typedef struct pinio__region {
    uintptr_t addr;
    size_t len;
    int slot;
    int state;                   /* PINIO__REG_* */
    pinio_region_ready_fn ready; /* pending: may it be registered now? NULL: yes */
    void *ready_ctx;
} pinio__region;

struct pinio_pread_pool; /* pread_pool.c */

struct pinio_ring {
    pinio_ring_opts opts;
    pinio_backend backend;   /* best rung available (see pinio_ring_info) */
    bool have_ring;
    struct io_uring ring;
    unsigned setup_flags;
    unsigned cq_entries;
    int setup_error, reg_error, files_error;
    bool files_registered;   /* sparse file table in place */
    bool bufs_registered;    /* sparse buffer table in place */
    char reason[256];

    /* Registered memory, sorted by addr, for dst -> slot lookup. `mu` guards
     * regions/nregions/slot_used/deferred: unregistration may come from any
     * thread (a pool frees a slab where its last view is released). */
    pthread_mutex_t mu;
    pthread_t owner;         /* creating thread: the only one the kernel lets
                                call io_uring_register under SINGLE_ISSUER */
    int *deferred;           /* slots to clear in the kernel, owner thread only */
    unsigned ndeferred;
    pinio__region *regions;
    unsigned nregions;
    unsigned nkernel;        /* of them, registered with the kernel now */
    uint8_t *slot_used;      /* PINIO__BUF_TABLE entries */

    /* Staging: nstage slots of stage_size bytes, page-aligned, registered
     * (stage_slot >= 0) when the kernel allowed it. */
    uint8_t *stage;
    size_t stage_size;
    unsigned nstage;
    int stage_slot;
    unsigned *stage_free;    /* free-list stack of staging slot indices */
    unsigned nstage_free;

    /* File table: 2 slots per file (direct, buffered). */
    uint8_t *file_slot_used;

    pinio_ring_file *files;  /* open files (linked list) */

    struct pinio_pread_pool *pool; /* PREAD backend */

    pinio__faults *faults;   /* NULL unless PINIO_FAULTS/opts.faults */

    struct {
        uint64_t fixed_ops, plain_ops, staged_ops, retries;
    } stats;
};

struct pinio_ring_file {
    pinio_ring *ring;
    pinio_ring_file *next;
    char *path;
    int fd_direct;           /* -1 when O_DIRECT is not used */
    int fd_buf;
    int fix_direct, fix_buf; /* file-table slots or -1 */
    uint64_t size;
    unsigned mem_align, off_align;
    const char *align_source;
    bool direct;             /* O_DIRECT in use now */
    bool direct_verified;    /* a direct read succeeded: EINVAL is now a real error */
    int direct_error;
    char reason[256];
};

/* 0 when the calling thread may submit on `r`. -EPERM, with `diag` saying
 * why, when the ring was set up with SINGLE_ISSUER by another thread: the
 * kernel would answer io_uring_enter/register with -EEXIST, and by then the
 * SQEs are already in the SQ ring, where the owner's next submit would issue
 * them into memory the caller may have freed. `what` names the caller. */
int pinio__ring_check_thread(const pinio_ring *r, const char *what, pinio_diag *diag);

/* Runs the setup ladder (setup.c) for r->opts: sets r->ring, r->setup_flags,
 * r->cq_entries and r->reason. 0 or the last io_uring_setup error. */
int pinio__ring_setup_ladder(pinio_ring *r);

/* Clears the kernel slots of regions unregistered off the owner thread. */
void pinio__ring_drain_deferred(pinio_ring *r);

/* Registered slot of the region containing [p, p+n), or -1. Called by the
 * read loop only (on the owner thread, with reads in flight): a reserved
 * region whose pages are ready is registered here, at its first read. */
int pinio__ring_slot_of(pinio_ring *r, const void *p, size_t n);

/* One I/O operation, as submitted to a backend. */
typedef struct pinio__op {
    int fd;          /* plain fd, or a file-table index when fixed_file */
    bool fixed_file;
    int buf_slot;    /* >= 0: READ_FIXED */
    void *buf;
    size_t len;
    uint64_t off;
    uint64_t user;   /* opaque to the backend */
} pinio__op;

/* ---- pread backend (pread_pool.c) --------------------------------------- */

int pinio__pread_pool_create(struct pinio_pread_pool **out, unsigned threads, unsigned depth);
void pinio__pread_pool_destroy(struct pinio_pread_pool *p);
/* Queues one op. Never blocks; the caller keeps at most `depth` in flight. */
void pinio__pread_pool_submit(struct pinio_pread_pool *p, const pinio__op *op);
/* Waits for at least `min` completions (min <= in flight), stores up to `max`
 * (user, res) pairs; returns how many were stored. */
unsigned pinio__pread_pool_reap(struct pinio_pread_pool *p, unsigned min, unsigned max,
                                uint64_t *user, int *res);

#endif
