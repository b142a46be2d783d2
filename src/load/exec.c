/*
 * Executing a plan: its reads (or a sub-range) go through the engine into
 * the memory a destination claims, and the destination hears when each has
 * landed.
 *
 *   cold files first, on the O_DIRECT ring; then hot files, on a buffered
 *   ring: each read is claimed and cut into pieces of at most 16 MiB; the
 *   pieces queue up to a batch, which is one bulk engine call; each piece
 *   is checked to have delivered its bytes, each read whose last piece was
 *   in the batch has landed (in order), then progress.
 *   At the end: no file changed since its header was validated.
 *
 * Why batches: the engine keeps its queue full within one bulk call and
 * drains it at the end, so one batch is fastest; a progress callback or a
 * destination that consumes as it goes (a hasher, a staging ring) needs the
 * drain points, and gets them at 1/16 of the load (16 MiB to 1 GiB) or what
 * it asks for (bytes, or reads in flight).
 *
 * Files are read through the descriptors the plan validated: the engine
 * opens /proc/self/fd/N, the same inode whatever happened to the path.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/base/fs.h"
#include "src/base/opts.h"
#include "src/load/plan_internal.h"

/* Largest request handed to the engine in one piece (it cuts it further
 * into request_size pieces): a bulk call can stop between pieces. */
#define PIECE ((uint64_t)16 << 20)

/* Files open on the engine at once, at most: a batch is flushed before a
 * read of one more file is queued, and the files whose reads are done are
 * closed. 600 shards needed 3 descriptors each and failed under the usual
 * `ulimit -n 1024`; now a plan needs one per file plus these. It is also
 * the engine's default registered-file table (max_files). */
#define FILES_OPEN_MAX 64

/* The pass that reads file `f`: 0 the O_DIRECT ring, 1 the buffered ring,
 * 2 the object source (object.c). */
static int pass_of(const pinio_plan *p, uint32_t f)
{
    return p->files[f].pub.object ? 2 : p->files[f].pub.hot ? 1 : 0;
}

typedef struct exec_state {
    pinio_plan *p;
    const pinio_exec_opts *o;
    pinio_ring *ring[2];      /* [0] O_DIRECT, [1] buffered */
    pinio_ring_file **rf;     /* per plan file, on its ring while it has reads left */
    bool *used;               /* per plan file: read by this execution */
    int *slots;               /* registered region slots, -1 when refused */
    char why[2][256];         /* per ring: the first file's reason (file system, alignment) */
    /* Files of the O_DIRECT ring, counted as they close: read O_DIRECT to
     * the end, or refused it (at open or at the first read) and read
     * buffered, with the first refusal's reason. The report says what ran. */
    size_t cold_direct, cold_refused;
    char refused_why[256];
    size_t nopen;             /* files open on the rings now */
    unsigned regions_base;    /* regions the cold ring had registered before ours */
    unsigned hot_threads;     /* hot files on this many pread threads by choice (ring_for) */
    /* Staggered order: reader `stagger` of `ranks` (0: a process number). */
    bool staggered;
    uint64_t stagger;
    uint32_t ranks;
    uint64_t rotated;         /* reads of more than one piece, issued rotated */
    char fs_why[96];          /* cold ring: request size and depth chosen for its file system */
    uint64_t cold_bytes;      /* bytes this execution reads on the O_DIRECT ring */
} exec_state;

void pinio_exec_opts_init(pinio_exec_opts *opts, size_t size)
{
    pinio_exec_opts d;
    memset(&d, 0, sizeof(d));
    d.direct = PINIO_DIRECT_AUTO;
    d.backend = PINIO_BACKEND_AUTO;
    pinio__opts_init(opts, size, &d, sizeof(d));
}

/* Request size and depth for cold reads from a network or FUSE file
 * system: each request there pays a round trip (and a FUSE daemon's
 * thread), so small ones leave the link idle: 64 KiB reads took 5 minutes
 * where 64 MiB reads took 47 s (xinfer #392).
 *
 * Why this rule (pinio__netfs_sizes), from what the file system states
 * and the load's size, with no timing: the file system moves its own unit
 * per wire request (NFS rsize, a CephFS object, a Lustre stripe, FUSE's
 * max_read, 1 MiB at the kernel's default 256 pages), and cuts larger
 * reads into those units, sent in parallel. So a request of whole units
 * costs one round trip per unit in parallel, never a partial unit, and the
 * depth times the size is what is outstanding: 16 MiB x 32 = 512 MiB, a 10
 * GB/s link at 50 ms. A load too small to give 32 such requests gets
 * smaller ones (halved, never below the unit) and a deeper queue for the
 * same bytes outstanding, so that the depth is used and the tail, where
 * fewer requests than the depth are left, is short: 256 MiB is 32 requests
 * of 8 MiB, not 16 of 16 MiB. The unit is st_blksize where the file
 * system states one of 64 KiB or more (NFS sets it from wsize, CephFS and
 * Lustre from the file's object or stripe layout), else 1 MiB; the
 * engine's requests are powers of two, so it is rounded down to one. A
 * request or depth the caller set is kept. */
#define NETFS_REQUEST ((size_t)16 << 20)
#define NETFS_DEPTH 32u
#define NETFS_DEPTH_MAX 128u
#define NETFS_UNIT_MIN ((uint64_t)64 << 10)
#define NETFS_UNIT_DEFAULT ((size_t)1 << 20)

size_t pinio__netfs_sizes(uint64_t blksize, uint64_t bytes, unsigned *depth)
{
    size_t unit = NETFS_UNIT_DEFAULT;
    if (blksize >= NETFS_UNIT_MIN) {
        unit = NETFS_REQUEST; /* a unit past 16 MiB: one request still takes part of it */
        while ((uint64_t)unit > blksize)
            unit >>= 1;
    }
    size_t req = NETFS_REQUEST;
    while (req > unit && bytes < (uint64_t)req * NETFS_DEPTH)
        req >>= 1;
    uint64_t d = ((uint64_t)NETFS_REQUEST * NETFS_DEPTH) / req;
    *depth = d > NETFS_DEPTH_MAX ? NETFS_DEPTH_MAX : (unsigned)d;
    return req;
}

static void netfs_sizes(exec_state *s, int fd, pinio_ring_opts *ro)
{
    pinio_fs fs;
    struct stat st;
    if (pinio__fs_probe_fd(fd, &fs) != 0 || !fs.network || fstat(fd, &st) != 0)
        return;
    unsigned depth;
    size_t req = pinio__netfs_sizes((uint64_t)st.st_blksize, s->cold_bytes, &depth);
    if (!s->o->request_size)
        ro->request_size = req;
    if (!s->o->queue_depth)
        ro->queue_depth = depth;
    bool rs = s->o->request_size != 0, qd = s->o->queue_depth != 0;
    snprintf(s->fs_why, sizeof(s->fs_why), "%s: %zu %s requests, %u in flight (%s)", fs.name,
             ro->request_size >> (ro->request_size < ((size_t)1 << 20) ? 10 : 20),
             ro->request_size < ((size_t)1 << 20) ? "KiB" : "MiB", ro->queue_depth,
             rs && qd ? "as asked" : rs ? "size as asked" : qd ? "depth as asked"
                                                             : "network file system");
}

static int ring_for(exec_state *s, bool hot, const pinio__pfile *f, pinio_diag *diag)
{
    const char *path = f->path;
    pinio_ring **rp = &s->ring[hot];
    if (*rp)
        return 0;
    pinio_ring_opts ro;
    pinio_ring_opts_default(&ro);
    if (s->o->queue_depth)
        ro.queue_depth = s->o->queue_depth;
    if (s->o->request_size)
        ro.request_size = s->o->request_size;
    if (!hot) /* hot files come from the page cache: no round trips */
        netfs_sizes(s, f->fd, &ro);
    ro.backend = s->o->backend;
    ro.direct = hot ? PINIO_DIRECT_OFF : s->o->direct;
    /* Hot files are copies out of the page cache, done by whichever thread
     * issues the read: io_uring's buffered reads complete inline on the
     * submitting thread (or punt to its workers when the destination
     * faults), while pread threads copy on every CPU at once. A hot
     * 512 MiB file into a fresh arena, then every byte read: 0.36 s
     * (0.23-0.47) on 4 pread threads against 0.83 s (0.37-3.0) through
     * io_uring; into a kept arena 0.20 s (0.16-0.26) against 0.25 s
     * (0.15-0.39); medians of 7 alternating runs, shared 2-CPU VM, 6.18.
     * A forced backend is left alone (a test of that rung). */
    if (hot && ro.backend == PINIO_BACKEND_AUTO) {
        ro.backend = PINIO_BACKEND_PREAD;
        s->hot_threads = ro.pread_threads;
    }
    pinio_diag rd = { 0 };
    int rc = pinio_ring_create(rp, &ro, &rd);
    if (rc < 0) /* the engine cannot know which checkpoint it was for */
        pinio_diag_set_at(diag, rc, path, PINIO_DIAG_NO_OFFSET,
                          "cannot set up the I/O engine: %s", rd.msg[0] ? rd.msg : pinio_strerror(rc));
    return rc;
}

/* The engine's error about a file it opened as /proc/self/fd/N, told
 * about the user's path instead: the engine's own "NAME: " prefix goes. */
static void name_user_path(pinio_diag *diag, int fd, const char *path)
{
    char as[48];
    int k = snprintf(as, sizeof(as), "/proc/self/fd/%d: ", fd);
    if (k > 0 && strncmp(diag->msg, as, (size_t)k) == 0)
        memmove(diag->msg, diag->msg + k, strlen(diag->msg + k) + 1);
    pinio_diag_relabel(diag, path);
}

/* Opens plan file `i` on its ring, through the plan's descriptor. */
static int open_file(exec_state *s, size_t i, pinio_diag *diag)
{
    if (s->rf[i])
        return 0;
    pinio__pfile *f = &s->p->files[i];
    int rc = ring_for(s, f->pub.hot, f, diag);
    if (rc < 0)
        return rc;
    pinio_ring *ring = s->ring[f->pub.hot];
    char name[64];
    snprintf(name, sizeof(name), "/proc/self/fd/%d", f->fd);
    pinio_diag d = { 0 };
    rc = pinio_ring_file_open(ring, name, &s->rf[i], &d);
    if (rc == -ENOENT) {
        /* Our descriptor is open, so ENOENT means /proc is not mounted. The
         * path is the only name left: use it if it still names our inode
         * (a rename in the window between this check and the open goes
         * unnoticed until the end-of-load check). */
        struct stat a, b;
        if (fstat(f->fd, &a) != 0 || stat(f->path, &b) != 0 || a.st_dev != b.st_dev ||
            a.st_ino != b.st_ino) {
            pinio_diag_set_at(diag, PINIO_ECHANGED, f->path, PINIO_DIAG_NO_OFFSET,
                              "replaced or removed since its header was validated, and /proc "
                              "is not mounted to reopen the validated file");
            return PINIO_ECHANGED;
        }
        rc = pinio_ring_file_open(ring, f->path, &s->rf[i], &d);
    }
    if (rc < 0) {
        *diag = d;
        name_user_path(diag, f->fd, f->path);
        return rc;
    }
    s->used[i] = true;
    s->nopen++;
    if (!s->why[f->pub.hot][0]) {
        pinio_ring_file_info fi;
        pinio_ring_file_get_info(s->rf[i], &fi);
        snprintf(s->why[f->pub.hot], sizeof(s->why[0]), "%s", fi.reason);
    }
    return 0;
}

/* Lazy regions are counted at the end (describe()): the engine registers
 * them as the reads reach them. */
static void register_regions(exec_state *s, pinio_exec_report *rep)
{
    if (s->ring[0]) {
        pinio_ring_info info;
        pinio_ring_get_info(s->ring[0], &info);
        s->regions_base = info.regions;
    }
    for (size_t i = 0; i < s->o->nregions; i++) {
        s->slots[i] = -1;
        if (!s->ring[0])
            continue;
        const pinio_mem_region *m = &s->o->regions[i];
        int rc = s->o->regions_lazy
                     ? pinio_ring_register_region_lazy(s->ring[0], m->addr, m->len, NULL, NULL,
                                                       &s->slots[i])
                     : pinio_ring_register_region(s->ring[0], m->addr, m->len, &s->slots[i]);
        if (rc < 0)
            s->slots[i] = -1;
        else if (!s->o->regions_lazy)
            rep->regions_registered++;
    }
}

/* Pieces handed to the engine and not yet flushed. A read is claimed when
 * its first piece is queued and has landed when its last piece is flushed. */
typedef struct pending {
    pinio_read_req *reqs;
    uint64_t *need;         /* bytes each piece must deliver */
    size_t *read;           /* the plan read each piece belongs to */
    void **mem;             /* per piece: its read's memory */
    bool *fin;              /* per piece: its read's last one queued (it lands with it) */
    size_t n, cap;
    uint64_t bytes;
    size_t reads;           /* reads with a piece queued */
} pending;

static int pending_push(pending *q, const pinio_read_req *req, uint64_t need, size_t read,
                        void *mem, bool fin)
{
    if (q->n == q->cap) {
        size_t c = q->cap ? q->cap * 2 : 64;
        pinio_read_req *nr = realloc(q->reqs, c * sizeof(*nr));
        if (nr)
            q->reqs = nr;
        uint64_t *nn = nr ? realloc(q->need, c * sizeof(*nn)) : NULL;
        if (nn)
            q->need = nn;
        size_t *nd = nn ? realloc(q->read, c * sizeof(*nd)) : NULL;
        if (nd)
            q->read = nd;
        void **nm = nd ? realloc(q->mem, c * sizeof(*nm)) : NULL;
        if (nm)
            q->mem = nm;
        bool *nf = nm ? realloc(q->fin, c * sizeof(*nf)) : NULL;
        if (!nf)
            return -ENOMEM;
        q->fin = nf;
        q->cap = c;
    }
    q->reqs[q->n] = *req;
    q->need[q->n] = need;
    q->read[q->n] = read;
    q->mem[q->n] = mem;
    q->fin[q->n] = fin;
    q->n++;
    q->bytes += req->len;
    return 0;
}

static void pending_free(pending *q)
{
    free(q->reqs);
    free(q->need);
    free(q->read);
    free(q->mem);
    free(q->fin);
}

/* One bulk engine call over the queued pieces; then every piece is checked
 * to have delivered its bytes, and each read whose last piece this was has
 * landed. */
static int flush(exec_state *s, pending *q, bool hot, const pinio_dest_ops *ops, void *ctx,
                 pinio_diag *diag)
{
    pinio_plan *p = s->p;
    const pinio_plan_read *reads = p->layout.reads;
    pinio_diag d = { 0 };
    int rc = q->n ? pinio_ring_read_bulk(s->ring[hot], q->reqs, q->n, &d) : 0;
    if (rc < 0 && diag) {
        *diag = d; /* the engine names the file by /proc/self/fd/N */
        size_t r = q->read[d.index < q->n ? d.index : 0];
        name_user_path(diag, p->files[reads[r].file].fd, p->files[reads[r].file].path);
        pinio_diag_set_index(diag, r);
    }
    for (size_t k = 0; rc == 0 && k < q->n; k++) {
        const pinio_plan_read *r = &reads[q->read[k]];
        if (q->reqs[k].done < q->need[k]) {
            rc = PINIO_ECHANGED;
            pinio_diag_set_at(diag, rc, p->files[r->file].path, q->reqs[k].offset,
                              "file changed while loading: expected %llu bytes at offset %llu, "
                              "got %zu (truncated after its header was read?)",
                              (unsigned long long)q->need[k],
                              (unsigned long long)q->reqs[k].offset, q->reqs[k].done);
            pinio_diag_set_index(diag, q->read[k]);
        }
        if (rc == 0 && q->fin[k] && ops->landed) {
            rc = ops->landed(ctx, q->read[k], r, q->mem[k]);
            if (rc < 0 && diag && diag->code == 0)
                pinio_diag_set(diag, rc, "the destination failed read %zu: %s", q->read[k],
                               pinio_strerror(rc));
        }
    }
    /* A read cut by this flush keeps its remaining pieces for the next one. */
    q->n = 0;
    q->bytes = 0;
    return rc;
}

/* Progress across both passes. */
typedef struct progress_state {
    uint64_t total, done;
    size_t ops;
    double t0;
} progress_state;

/* A batch: flush, then tell the progress callback. */
static int batch(exec_state *s, pending *q, bool hot, const pinio_dest_ops *ops, void *ctx,
                 progress_state *pr, pinio_diag *diag)
{
    uint64_t bytes = q->bytes;
    pr->ops += q->n;
    int rc = flush(s, q, hot, ops, ctx, diag);
    pr->done += bytes;
    if (rc == 0 && s->o->progress) {
        pinio_progress pg = { .done_bytes = pr->done, .total_bytes = pr->total,
                              .done_ops = pr->ops, .elapsed_s = pinio__now_s() - pr->t0 };
        if (s->o->progress(s->o->progress_ctx, &pg)) {
            rc = -ECANCELED;
            pinio_diag_set(diag, rc, "load canceled by the progress callback");
        }
    }
    return rc;
}

/* Closes the engine's handle of every file whose last read of this pass
 * lies before read `i`: a checkpoint of many shards then holds one engine
 * descriptor at a time beside the plan's own, not one per shard (600
 * shards failed under `ulimit -n 1024`). */
/* Counts how file `f` of the O_DIRECT ring was read, before it closes. */
static void tally(exec_state *s, size_t f)
{
    if (!s->rf[f] || s->p->files[f].pub.hot)
        return;
    pinio_ring_file_info fi;
    pinio_ring_file_get_info(s->rf[f], &fi);
    if (fi.direct) {
        s->cold_direct++;
        return;
    }
    if (!s->cold_refused++)
        snprintf(s->refused_why, sizeof(s->refused_why), "%s", fi.reason);
}

static void close_done(exec_state *s, const size_t *last, size_t i)
{
    for (size_t f = 0; f < s->p->nfiles; f++)
        if (s->rf[f] && last[f] < i) {
            tally(s, f);
            pinio_ring_file_close(s->rf[f]);
            s->rf[f] = NULL;
            s->nopen--;
        }
}

/* Reads [a, b) of the plan's reads, those of hot or cold files. */
static int run_pass(exec_state *s, size_t a, size_t b, bool hot, const pinio_dest_ops *ops,
                    void *ctx, uint64_t batch_max, progress_state *pr, pinio_diag *diag)
{
    pinio_plan *p = s->p;
    const pinio_plan_read *reads = p->layout.reads;
    pending q = { 0 };
    size_t *last = calloc(p->nfiles ? p->nfiles : 1, sizeof(*last));
    if (!last)
        return -ENOMEM;
    for (size_t i = a; i < b; i++)
        if (pass_of(p, reads[i].file) == (int)hot)
            last[reads[i].file] = i;
    int rc = 0;
    for (size_t i = a; i < b && rc == 0; i++) {
        const pinio_plan_read *r = &reads[i];
        if (pass_of(p, r->file) != (int)hot)
            continue;
        void *mem = NULL;
        if (!s->rf[r->file] && s->nopen >= FILES_OPEN_MAX) {
            if (q.n)
                rc = batch(s, &q, hot, ops, ctx, pr, diag);
            q.reads = 0;
            close_done(s, last, i);
        }
        if (rc == 0)
            rc = open_file(s, r->file, diag);
        if (rc == 0) {
            rc = ops->claim(ctx, i, r, &mem);
            if (rc < 0 && diag && diag->code == 0)
                pinio_diag_set(diag, rc, "the destination refused read %zu: %s", i,
                               pinio_strerror(rc));
        }
        q.reads++;
        /* Staggered: the pieces from `first` on, then those before it. A
         * read lands with its last piece queued (fin), whatever its offset. */
        uint64_t np = (r->len + PIECE - 1) / PIECE;
        uint64_t first = s->staggered ? pinio__stagger_first(np, s->stagger, s->ranks) : 0;
        if (s->staggered && np > 1)
            s->rotated++;
        for (uint64_t k = 0; rc == 0 && k < np; k++) {
            uint64_t off = ((first + k) % np) * PIECE;
            uint64_t len = r->len - off < PIECE ? r->len - off : PIECE;
            bool done = k + 1 == np;
            pinio_read_req req = { .file = s->rf[r->file], .offset = r->offset + off,
                                   .len = (size_t)len, .dst = (uint8_t *)mem + off };
            uint64_t need = r->need <= off ? 0 : (r->need - off < len ? r->need - off : len);
            rc = pending_push(&q, &req, need, i, mem, done);
            if (rc == 0 && (q.bytes >= batch_max ||
                            (done && s->o->batch_reads && q.reads >= s->o->batch_reads))) {
                rc = batch(s, &q, hot, ops, ctx, pr, diag);
                q.reads = done ? 0 : 1; /* a read cut here goes on in the next batch */
                close_done(s, last, done ? i + 1 : i);
            }
        }
    }
    if (rc == 0 && q.n)
        rc = batch(s, &q, hot, ops, ctx, pr, diag);
    pending_free(&q);
    free(last);
    return rc;
}

uint64_t pinio__stagger_first(uint64_t n, uint64_t rank, uint32_t ranks)
{
    if (n <= 1)
        return 0;
    /* A group spreads its ranks evenly over the read; independent
     * processes only know themselves: consecutive pids start a piece
     * apart, which already keeps them off each other's requests. */
    return ranks ? (rank % ranks) * n / ranks : rank % n;
}

size_t pinio__file_at(size_t k, size_t nfiles, uint64_t rank, uint32_t ranks)
{
    /* Files are rotated as a read's pieces are, and for the same reason at
     * a coarser grain: N readers of a checkpoint of many files on shared
     * storage each start on another file (another server, OST or object
     * set) instead of all queueing on the first; with node-local sharing,
     * each reads one while the others read theirs, then maps the others'. */
    return nfiles ? (size_t)((pinio__stagger_first(nfiles, rank, ranks) + k) % nfiles) : 0;
}

/* The read order asked for (option, else PINIO_READ_ORDER). */
static int read_order_of(const pinio_exec_opts *o, pinio_read_order *out, pinio_diag *diag)
{
    *out = o->read_order;
    if (*out == PINIO_READ_ORDER_SEQUENTIAL || *out == PINIO_READ_ORDER_STAGGERED)
        return 0;
    if (*out != PINIO_READ_ORDER_AUTO) {
        pinio_diag_set(diag, -EINVAL, "pinio_plan_execute: read_order %d is not a pinio_read_order",
                       (int)*out);
        return -EINVAL;
    }
    const char *e = getenv("PINIO_READ_ORDER");
    *out = PINIO_READ_ORDER_STAGGERED;
    if (!e || !*e || strcmp(e, "staggered") == 0)
        return 0;
    if (strcmp(e, "sequential") == 0) {
        *out = PINIO_READ_ORDER_SEQUENTIAL;
        return 0;
    }
    pinio_diag_set(diag, -EINVAL,
                   "PINIO_READ_ORDER=%.64s: expected \"staggered\" or \"sequential\"", e);
    return -EINVAL;
}

bool pinio__files_rotated(const pinio_exec_opts *o, uint64_t *rank, uint32_t *ranks)
{
    pinio_read_order order;
    pinio_diag d = { 0 }; /* a bad PINIO_READ_ORDER is the execution's error to give */
    if (read_order_of(o, &order, &d) < 0 || order != PINIO_READ_ORDER_STAGGERED)
        return false;
    *rank = o->stagger_ranks ? o->stagger_rank : (uint64_t)getpid();
    *ranks = o->stagger_ranks;
    return true;
}

uint64_t pinio__batch_bytes_default(uint64_t total)
{
    uint64_t b = total / 16, hi = (uint64_t)1 << 30;
    return b < PIECE ? PIECE : b > hi ? hi : b;
}

static bool ops_entry(const pinio_dest_ops *ops, size_t end)
{
    return ops->size >= end;
}

/* One line: the I/O path that ran and why. Never claims a path that did
 * not run: "registered" only when reads went to registered memory, io_uring
 * only when the engine is not the pread fallback. */
static void describe(exec_state *s, pinio_exec_report *rep)
{
    char *b = rep->io_path;
    size_t cap = sizeof(rep->io_path), n = 0;
#define ADD(...) (n += (size_t)snprintf(b + n, n < cap ? cap - n : 0, __VA_ARGS__))
    b[0] = '\0';
    for (int hot = 0; hot < 2; hot++) {
        pinio_ring *r = s->ring[hot];
        if (!r)
            continue;
        pinio_ring_info info;
        pinio_ring_get_info(r, &info);
        rep->fixed_ops += info.fixed_ops;
        rep->plain_ops += info.plain_ops;
        if (!hot && s->o->regions_lazy && info.regions > s->regions_base)
            rep->regions_registered = info.regions - s->regions_base;
        if (!hot || !s->ring[0])
            rep->setup_flags = info.setup_flags;
        bool pread = info.backend == PINIO_BACKEND_PREAD;
        /* The engine also reads into its own registered bounce buffer (an
         * unaligned edge): READ_FIXED ops alone do not mean that the
         * destination was registered. */
        bool fixed = !hot && rep->regions_registered && info.fixed_ops;
        /* The O_DIRECT ring with every file refused O_DIRECT read buffered. */
        bool refused = !hot && s->cold_refused && !s->cold_direct;
        if (n)
            ADD("; then ");
        if (hot || refused)
            ADD("buffered %s (page cache)", pread ? "reads by pread threads" : "io_uring reads");
        else
            ADD("O_DIRECT %s into %s", pread ? "reads by pread threads" : "io_uring reads",
                fixed ? "registered memory (READ_FIXED)" : "unregistered memory");
        if (refused)
            ADD(": %s", s->refused_why);
        else if (!hot && s->cold_refused)
            ADD("; %zu of %zu files buffered: %s", s->cold_refused,
                s->cold_refused + s->cold_direct, s->refused_why);
        if (hot && s->hot_threads)
            ADD("; page-cache copies on %u threads, measured faster than io_uring's buffered "
                "reads", s->hot_threads);
        else if (info.reason[0])
            ADD("; %s", info.reason);
        if (s->why[hot][0] && !refused) /* one file's reason: they share the file system */
            ADD("; %s", s->why[hot]);
        if (!hot && s->fs_why[0])
            ADD("; %s", s->fs_why);
        if (!hot)
            rep->backend = pread ? PINIO_BACKEND_PREAD
                           : refused ? PINIO_BACKEND_BUFFERED
                           : fixed ? PINIO_BACKEND_FIXED_DIRECT
                                   : PINIO_BACKEND_DIRECT;
        else if (!s->ring[0])
            rep->backend = pread ? PINIO_BACKEND_PREAD : PINIO_BACKEND_BUFFERED;
    }
    if (s->rotated) {
        if (s->ranks)
            ADD("; staggered order, rank %u of %u", (unsigned)s->stagger, s->ranks);
        else
            ADD("; staggered order (process %llu)", (unsigned long long)s->stagger);
    }
    if (!n)
        ADD("no data to read");
#undef ADD
}

int pinio_plan_execute(pinio_plan *p, const pinio_dest_ops *ops, void *ctx,
                       const pinio_exec_opts *opts, pinio_exec_report *rep, pinio_diag *diag)
{
    pinio_exec_opts o;
    pinio_exec_opts_default(&o);
    int rc = pinio__opts_copy(&o, sizeof(o), opts, "pinio_exec options", diag);
    if (rc < 0)
        return rc;
    size_t nreads = p ? p->layout.nreads : 0;
    if (!p || !ops || !ops_entry(ops, offsetof(pinio_dest_ops, claim) + sizeof(ops->claim)) ||
        !ops->claim || o.first_read > nreads || o.nreads > nreads - o.first_read ||
        (o.nregions && !o.regions)) {
        pinio_diag_set(diag, -EINVAL, "pinio_plan_execute: invalid arguments");
        return -EINVAL;
    }
    pinio_read_order order;
    rc = read_order_of(&o, &order, diag);
    if (rc < 0)
        return rc;
    pinio_dest_ops d = { 0 };
    memcpy(&d, ops, ops->size < sizeof(d) ? ops->size : sizeof(d));
    pinio_exec_report local;
    if (!rep)
        rep = &local;
    memset(rep, 0, sizeof(*rep));
    size_t a = o.first_read, b = o.nreads ? a + o.nreads : nreads;

    exec_state s = { .p = p, .o = &o, .staggered = order == PINIO_READ_ORDER_STAGGERED,
                      .stagger = o.stagger_ranks ? o.stagger_rank : (uint64_t)getpid(),
                      .ranks = o.stagger_ranks };
    s.rf = calloc(p->nfiles ? p->nfiles : 1, sizeof(*s.rf));
    s.used = calloc(p->nfiles ? p->nfiles : 1, sizeof(*s.used));
    s.slots = calloc(o.nregions ? o.nregions : 1, sizeof(*s.slots));
    if (!s.rf || !s.used || !s.slots) {
        free(s.rf);
        free(s.used);
        free(s.slots);
        return -ENOMEM;
    }
    /* No region is registered until register_regions() says so: a ring
     * that failed to start leaves every slot at -1, and nothing to undo. */
    for (size_t i = 0; i < o.nregions; i++)
        s.slots[i] = -1;
    uint64_t total = 0;
    bool any[3] = { false, false, false };
    for (size_t i = a; i < b; i++) {
        total += p->layout.reads[i].len;
        any[pass_of(p, p->layout.reads[i].file)] = true;
        if (pass_of(p, p->layout.reads[i].file) == 0)
            s.cold_bytes += p->layout.reads[i].len;
    }
    /* The cold ring first: regions are registered with it before any read. */
    for (int hot = 0; hot < 2 && rc == 0; hot++)
        if (any[hot])
            for (size_t i = a; i < b && rc == 0; i++)
                if (pass_of(p, p->layout.reads[i].file) == hot) {
                    rc = ring_for(&s, hot, &p->files[p->layout.reads[i].file], diag);
                    break;
                }
    if (rc == 0)
        register_regions(&s, rep);
    uint64_t batch_max = o.batch_bytes       ? o.batch_bytes
                         : o.progress          ? pinio__batch_bytes_default(total)
                                               : UINT64_MAX;
    progress_state pr = { .total = total, .t0 = pinio__now_s() };
    for (int hot = 0; hot < 2 && rc == 0; hot++)
        if (any[hot])
            rc = run_pass(&s, a, b, hot == 1, &d, ctx, batch_max, &pr, diag);
    char obj_line[192] = "";
    if (any[2] && rc == 0)
        rc = pinio__obj_execute(p, a, b, &d, ctx, &o, batch_max, &pr.done, total, pr.t0, rep,
                                obj_line, sizeof(obj_line), diag);
    rep->io_seconds = pinio__now_s() - pr.t0;
    rep->read_bytes = pr.done; /* both passes counted into it */
    /* A file extended, truncated or rewritten after its header was read is
     * not the file the header described. */
    for (size_t i = 0; rc == 0 && i < p->nfiles; i++)
        if (s.used[i])
            rc = pinio__plan_check_unchanged(p, i, diag);
    for (size_t i = 0; i < p->nfiles; i++) {
        tally(&s, i); /* the files still open */
        if (s.used[i]) {
            if (p->files[i].pub.hot)
                rep->files_buffered++;
            else
                rep->files_direct++;
        }
    }
    /* A file that refused O_DIRECT was read through the page cache. */
    rep->files_direct -= s.cold_refused;
    rep->files_buffered += s.cold_refused;
    describe(&s, rep);
    if (obj_line[0]) { /* the object pass's line, after the rings' or instead of "no data" */
        size_t k = any[0] || any[1] ? strlen(rep->io_path) : 0;
        snprintf(rep->io_path + k, sizeof(rep->io_path) - k, "%s%s", k ? "; then " : "",
                 obj_line);
    }
    for (size_t i = 0; i < o.nregions; i++)
        if (s.slots[i] >= 0 && s.ring[0])
            pinio_ring_unregister_region(s.ring[0], s.slots[i]);
    for (size_t i = 0; i < p->nfiles; i++)
        pinio_ring_file_close(s.rf[i]);
    pinio_ring_destroy(s.ring[0]);
    pinio_ring_destroy(s.ring[1]);
    free(s.rf);
    free(s.used);
    free(s.slots);
    return rc;
}
