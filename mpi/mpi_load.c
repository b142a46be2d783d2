/*
 * pinio_mpi_load: one plan per job, each byte read once, shared over MPI.
 *
 *   all:    the job-shaping arguments against rank 0's  -> agree
 *   all:    resolve own inputs, read own headers + index -> agree
 *   all:    plan from them, rank 0's alignment     -> agree
 *   all:    identity of each file and the plan against rank 0's -> agree
 *   all:    cut stripes (pure function of the plan), map memory -> agree
 *   all:    execute own stripe (engine, O_DIRECT)  -> agree
 *   verify: SHA-256 chain over the bytes as read, verdict -> agree
 *   all:    exchange stripes in place (replicate)  -> agree
 *   tp:     each rank also its plan with the split rules; the stripes
 *           read into a staging area laid out as the whole plan, then
 *           each rank's slices sent to it (mpi_tp.c)  -> agree
 *   node:   the same, with one stripe per node cut into one per local rank,
 *           read into the node's shared copy; the exchange runs between
 *           the node leaders only, on that copy
 *
 * Why an agreement after every phase: a collective entered by some ranks
 * only is a hang, not an error. Every phase ends in one Allreduce(MINLOC) of
 * the local code, so all ranks leave it knowing whether to go on, and the
 * failing rank's diagnostic is broadcast so that every rank reports the same
 * failure (which rank, which file, which offset).
 *
 * Why the stripes are cut from the plan's reads and not from file offsets:
 * the reads are aligned and laid out back to back in the destination, so a
 * run of reads is one contiguous, aligned range of memory on every rank; the
 * exchange then moves ranges of the destination in place, with counts in
 * units of the alignment (no count limit below 8 TiB at 4 KiB, on an MPI-3.1
 * library without the large-count calls).
 *
 * This file uses the public pinio API only (scripts/check-layers).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "pinio/mpi.h"
#include "pinio/safetensors.h"
#include "pinio/sys.h"
#include "mpi_internal.h"

/* Default piece of the BCAST exchange, and how many are in flight at once. */
#define PIECE_DEFAULT ((uint64_t)16 << 20)
#define PIECES_IN_FLIGHT 4

struct pinio_mpi_checkpoint {
    pinio_plan *plan;
    pinio_plan *rplan;       /* tp, during the call: the whole plan, whose reads run */
    pinio_plan_tensor *tp;   /* tp: this rank's slices, placed in `mem` */
    pinio_view mem;          /* the destination (a view: tensor views keep it alive) */
    size_t *held;            /* plan tensor indices this rank holds */
    size_t nheld;
    uint64_t *rank_read;     /* storage bytes per rank */
    int nranks;
    char (*hex)[2 * PINIO_MPI_SHA_LEN + 1]; /* verify: each file's digest */
    size_t nhex;
};


static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void pinio_mpi_opts_init(pinio_mpi_opts *opts, size_t size)
{
    pinio_mpi_opts d;
    memset(&d, 0, sizeof(d));
    d.policy = PINIO_MPI_REPLICATE;
    d.exchange = PINIO_MPI_EXCHANGE_AUTO;
    d.cache = PINIO_CACHE_AUTO;
    d.direct = PINIO_DIRECT_AUTO;
    d.backend = PINIO_BACKEND_AUTO;
    if (!opts || size < sizeof(size_t))
        return;
    memset(opts, 0, size);
    memcpy(opts, &d, size < sizeof(d) ? size : sizeof(d));
    opts->struct_size = size;
}

const char *pinio_mpi_policy_name(pinio_mpi_policy p)
{
    switch (p) {
    case PINIO_MPI_REPLICATE: return "replicate";
    case PINIO_MPI_SHARD: return "shard";
    case PINIO_MPI_NODE: return "node";
    case PINIO_MPI_TP: return "tp";
    }
    return NULL;
}

const char *pinio_mpi_exchange_name(pinio_mpi_exchange x)
{
    switch (x) {
    case PINIO_MPI_EXCHANGE_AUTO: return "auto";
    case PINIO_MPI_EXCHANGE_ALLGATHERV: return "allgatherv";
    case PINIO_MPI_EXCHANGE_BCAST: return "bcast";
    case PINIO_MPI_EXCHANGE_ALLTOALLV: return "alltoallv";
    case PINIO_MPI_EXCHANGE_SHARED: return "shared";
    }
    return NULL;
}

/* The destination: anonymous memory, page-aligned (so O_DIRECT reads land
 * in it straight), untouched pages costing nothing (a shard maps the whole
 * layout and faults in only its own range). */
static void unmap(void *cookie, void *ptr, size_t len)
{
    (void)cookie;
    munmap(ptr, len);
}

static int map_dest(job *j, uint64_t bytes, bool huge, pinio_view *out)
{
    if (bytes == 0) {
        *out = pinio_view_static(NULL, 0);
        return 0;
    }
    void *m = mmap(NULL, (size_t)bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        int rc = -errno;
        pinio_diag_set(&j->local, rc, "mapping %llu bytes for the checkpoint: %s",
                       (unsigned long long)bytes, pinio_strerror(rc));
        return rc;
    }
    /* tp: memory the exchange writes first (mpi_tp.c says why huge pages);
     * a hint the kernel may refuse. */
    if (huge)
        madvise(m, (size_t)bytes, MADV_HUGEPAGE);
    int rc = pinio_view_wrap(out, m, (size_t)bytes, unmap, NULL, 0);
    if (rc < 0)
        munmap(m, (size_t)bytes);
    return rc;
}

/* #PINIO_MPI_NODE: the node's ranks, and the leaders (local rank 0 of
 * each node). Outside that policy: every rank its own node. */
typedef struct node {
    MPI_Comm local, leaders; /* MPI_COMM_NULL when not split / not a leader */
    int lrank, lsize;        /* this rank within its node */
    int index, count;        /* this node among the nodes (its leader's rank among leaders) */
} node;

static int node_split(job *j, node *nd)
{
    MPI_Comm shared = MPI_COMM_NULL;
    int e = MPI_Comm_split_type(j->comm, MPI_COMM_TYPE_SHARED, j->rank, MPI_INFO_NULL, &shared);
    if (e != MPI_SUCCESS)
        return pinio__mpi_fail(j, e, "MPI_Comm_split_type (node)");
    nd->local = shared;
    if (j->o.node_ranks > 0) {
        /* The simulated split: runs of node_ranks local ranks. It stays
         * inside a real node, so the memory can still be shared. */
        int lr = 0;
        MPI_Comm_rank(shared, &lr);
        e = MPI_Comm_split(shared, lr / j->o.node_ranks, lr, &nd->local);
        MPI_Comm_free(&shared);
        if (e != MPI_SUCCESS) {
            nd->local = MPI_COMM_NULL;
            return pinio__mpi_fail(j, e, "MPI_Comm_split (simulated node)");
        }
    }
    MPI_Comm_set_errhandler(nd->local, MPI_ERRORS_RETURN);
    MPI_Comm_rank(nd->local, &nd->lrank);
    MPI_Comm_size(nd->local, &nd->lsize);
    /* Leaders keyed by job rank: node order follows the job's rank order. */
    e = MPI_Comm_split(j->comm, nd->lrank == 0 ? 0 : MPI_UNDEFINED, j->rank, &nd->leaders);
    if (e != MPI_SUCCESS)
        return pinio__mpi_fail(j, e, "MPI_Comm_split (node leaders)");
    int v[2] = { 0, 0 };
    if (nd->lrank == 0) {
        MPI_Comm_set_errhandler(nd->leaders, MPI_ERRORS_RETURN);
        MPI_Comm_rank(nd->leaders, &v[0]);
        MPI_Comm_size(nd->leaders, &v[1]);
    }
    e = MPI_Bcast(v, 2, MPI_INT, 0, nd->local);
    if (e != MPI_SUCCESS)
        return pinio__mpi_fail(j, e, "MPI_Bcast (node index)");
    nd->index = v[0];
    nd->count = v[1];
    return 0;
}

static void node_free(node *nd)
{
    if (nd->local != MPI_COMM_NULL)
        MPI_Comm_free(&nd->local);
    if (nd->leaders != MPI_COMM_NULL)
        MPI_Comm_free(&nd->leaders);
}

/* #PINIO_MPI_EXCHANGE_SHARED: `len` bytes of this rank's own, the node's
 * copy (`fd`, `bytes`) mapped privately at their start: its pages are the
 * node's until this rank writes one (then its own copy), the rest
 * anonymous, for the slices copied (mpi_tp.c). */
static int priv_map(job *j, int fd, uint64_t bytes, uint64_t len, pinio_view *out)
{
    int rc = map_dest(j, len, true, out);
    if (rc < 0)
        return rc;
    if (mmap(pinio_view_data_mut(out), (size_t)bytes, PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_FIXED, fd, 0) == MAP_FAILED) {
        rc = -errno;
        pinio_diag_set(&j->local, rc, "mapping the node's %llu-byte staging area privately: %s",
                       (unsigned long long)bytes, pinio_strerror(rc));
        pinio_view_release(out);
    }
    return rc;
}

/*
 * The node's copy: the leader creates a memfd of `bytes` and maps it; the
 * other local ranks map the same file through the leader's descriptor in
 * /proc (same user: the ptrace read check passes). Why a memfd and not
 * MPI_Win_allocate_shared: the memory must outlive the call and the
 * communicator (tensor views are handed out, released whenever), be
 * O_DIRECT- and io_uring-registrable, and be pinio's to lock; and unlike a
 * named shm object it has no name a crash could leave behind. The leader
 * keeps its descriptor open until every local rank has mapped (the caller's
 * agreement after this), the mappings keep the memory afterwards.
 * Sized with ftruncate, not reserved with fallocate as the Python group's
 * /dev/shm file is (_dist.py): a memfd lives on the kernel's own tmpfs
 * mount, which has no size limit, so a store through the mapping never
 * finds the file system full (the SIGBUS of a small /dev/shm); a node short
 * of memory meets the OOM killer either way, and a reservation would move
 * the zeroing of every page from the ranks' parallel reads to the leader
 * alone, before any read starts (about 1 s per GiB on the test machine).
 */
static int node_map(job *j, const node *nd, uint64_t bytes, pinio_view *out, int *leader_fd,
                    uint64_t priv_len, pinio_view *priv, int *priv_fd)
{
    *leader_fd = -1;
    if (priv_fd)
        *priv_fd = -1;
    if (bytes == 0) {
        *out = pinio_view_static(NULL, 0);
        return priv ? map_dest(j, priv_len, true, priv) : 0;
    }
    int who[3] = { 0, -1, 0 }; /* the leader's pid, fd, and code */
    if (nd->lrank == 0) {
        int fd = memfd_create("pinio-node", MFD_CLOEXEC);
        if (fd < 0 || ftruncate(fd, (off_t)bytes) < 0) {
            who[2] = -errno;
            pinio_diag_set(&j->local, who[2], "creating the node's %llu-byte shared copy (memfd): %s",
                           (unsigned long long)bytes, pinio_strerror(who[2]));
            if (fd >= 0)
                close(fd);
        } else {
            who[0] = (int)getpid();
            who[1] = *leader_fd = fd;
        }
    }
    int e = MPI_Bcast(who, 3, MPI_INT, 0, nd->local);
    if (e != MPI_SUCCESS)
        return pinio__mpi_fail(j, e, "MPI_Bcast (node memory)");
    if (who[2] < 0)
        return nd->lrank == 0 ? who[2] : 0; /* the leader's failure, agreed by the caller */
    int fd = *leader_fd;
    char proc[64];
    snprintf(proc, sizeof(proc), "/proc/%d/fd/%d", who[0], who[1]);
    if (nd->lrank != 0 && (fd = open(proc, O_RDWR | O_CLOEXEC)) < 0) {
        int rc = -errno;
        pinio_diag_set_at(&j->local, rc, proc, PINIO_DIAG_NO_OFFSET,
                          "cannot open the node leader's shared copy: %s", pinio_strerror(rc));
        return rc;
    }
    void *m = mmap(NULL, (size_t)bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int rc = m == MAP_FAILED ? -errno : 0;
    if (rc == 0 && priv)
        rc = priv_map(j, fd, bytes, priv_len, priv);
    /* priv: the caller copies out of the memfd (mpi_tp.c says why); without
     * a descriptor of its own it copies from the mapping. */
    if (rc == 0 && priv_fd)
        *priv_fd = nd->lrank != 0 ? fd : fcntl(fd, F_DUPFD_CLOEXEC, 0);
    else if (nd->lrank != 0)
        close(fd);
    if (rc < 0) {
        if (m != MAP_FAILED)
            munmap(m, (size_t)bytes);
        else
            pinio_diag_set(&j->local, rc, "mapping the node's %llu-byte shared copy: %s",
                           (unsigned long long)bytes, pinio_strerror(rc));
        return rc;
    }
    rc = pinio_view_wrap(out, m, (size_t)bytes, unmap, NULL, 0);
    if (rc < 0) {
        munmap(m, (size_t)bytes);
        if (priv)
            pinio_view_release(priv);
        if (priv_fd && *priv_fd >= 0) {
            close(*priv_fd);
            *priv_fd = -1;
        }
    }
    return rc;
}

/* The leader locks the node's copy once its pages exist (one lock per
 * node: the pages are shared), when RLIMIT_MEMLOCK allows, as the arena
 * does; not being able to is not an error. Every local rank learns it. */
static bool node_lock(const node *nd, const pinio_view *mem)
{
    int locked = 0;
    if (nd->lrank == 0 && mem->len) {
        pinio_sysinfo si;
        pinio_sys_probe(&si);
        locked = (si.registrable == PINIO_UNLIMITED || si.registrable >= mem->len) &&
                 mlock(mem->ptr, mem->len) == 0;
    }
    MPI_Bcast(&locked, 1, MPI_INT, 0, nd->local);
    return locked != 0;
}

/* Reads [f0, f1) cut into n stripes: stripe r starts at first[r], the
 * first read of a run whose bytes add up to about r/n of the range's (the
 * cut nearest to it); first[n] = f1. Pure: every rank computes the same. */
static void cut_stripes(const pinio_plan *p, size_t f0, size_t f1, int n, size_t *first)
{
    uint64_t total = 0, done = 0;
    for (size_t i = f0; i < f1; i++)
        total += pinio_plan_read_at(p, i)->len;
    size_t i = f0;
    first[0] = f0;
    for (int r = 1; r <= n; r++) {
        uint64_t target = (total / (uint64_t)n) * (uint64_t)r +
                          (total % (uint64_t)n) * (uint64_t)r / (uint64_t)n;
        while (i < f1 && done + pinio_plan_read_at(p, i)->len / 2 < target) {
            done += pinio_plan_read_at(p, i)->len;
            i++;
        }
        first[r] = r == n ? f1 : i;
    }
}

/*
 * A shard by split: rank r takes a contiguous run of whole tensors, about
 * 1/n of the bytes, and the reads that cover them. Tensors rarely start at
 * an aligned offset, so the read at a boundary between two ranks usually
 * holds the end of one rank's tensor and the start of the next: both ranks
 * read it (at most one segment per boundary, the price of whole tensors).
 */
static void shard_split(const pinio_plan *p, int n, int rank, size_t *t0, size_t *t1,
                        size_t *first, size_t *nreads)
{
    pinio_plan_info pi;
    pinio_plan_get_info(p, &pi);
    size_t cut[2];
    for (int k = 0; k < 2; k++) {
        int r = rank + k;
        uint64_t target = (pi.bytes / (uint64_t)n) * (uint64_t)r +
                          (pi.bytes % (uint64_t)n) * (uint64_t)r / (uint64_t)n;
        uint64_t done = 0;
        size_t t = 0;
        while (r < n && t < pi.tensors) {
            uint64_t len = pinio_plan_tensor_at(p, t)->nbytes;
            if (done + len / 2 >= target && !(len == 0 && done < target))
                break;
            done += len;
            t++;
        }
        cut[k] = r >= n ? pi.tensors : t;
    }
    *t0 = cut[0];
    *t1 = cut[1];
    *first = *nreads = 0;
    if (*t0 >= *t1)
        return;
    const pinio_plan_tensor *a = pinio_plan_tensor_at(p, *t0), *z = pinio_plan_tensor_at(p, *t1 - 1);
    uint64_t lo = a->dest_offset, hi = z->dest_offset + z->nbytes;
    size_t i = 0;
    while (i < pi.reads && pinio_plan_read_at(p, i)->dest_offset + pinio_plan_read_at(p, i)->len <= lo)
        i++;
    *first = i;
    while (i < pi.reads && pinio_plan_read_at(p, i)->dest_offset < hi)
        i++;
    *nreads = i - *first;
}

/* dest offset where reads [first, ...) start; the layout's end past the last. */
static uint64_t dest_at(const pinio_plan *p, size_t first, uint64_t end)
{
    const pinio_plan_read *r = pinio_plan_read_at(p, first);
    return r ? r->dest_offset : end;
}

static int dest_claim(void *ctx, size_t i, const pinio_plan_read *r, void **mem)
{
    (void)i;
    *mem = (uint8_t *)ctx + r->dest_offset;
    return 0;
}

static const pinio_dest_ops dest_ops = { .size = sizeof(pinio_dest_ops), .claim = dest_claim };

/*
 * The job's progress on rank 0 (when its caller follows progress): every
 * other rank reports its reads done to rank 0 from its engine's progress
 * calls, at most one report in flight (a report still travelling makes the
 * rank skip one), and a last one when its reads end, whatever their
 * outcome. Rank 0 takes the reports in during its own reads and, after
 * them, waits for every last report, drawing as each arrives; so the line
 * covers the whole job, and no report is left unreceived when the
 * communicator is freed. Messages from one rank arrive in order: its last
 * report is the last message it sends.
 */
#define TAG_PROGRESS 27

typedef struct jprog {
    job *j;
    uint64_t total;    /* rank 0: the job's reads, in bytes */
    uint64_t mine;     /* this rank's reads, in bytes */
    uint64_t *done;    /* rank 0: each rank's reads done */
    int finals;        /* rank 0: last reports received */
    uint64_t msg[2];   /* another rank: its report (done, last) */
    MPI_Request req;
    double t0;
    bool stop;         /* rank 0's callback asked to stop */
} jprog;

/* Rank 0: one report in (blocking, or any that arrived). */
static bool jprog_take(jprog *g, bool wait)
{
    MPI_Status st;
    int flag = 1;
    if (!wait && MPI_Iprobe(MPI_ANY_SOURCE, TAG_PROGRESS, g->j->comm, &flag, &st) != MPI_SUCCESS)
        return false;
    uint64_t m[2];
    if (!flag || MPI_Recv(m, 2, MPI_UINT64_T, wait ? MPI_ANY_SOURCE : st.MPI_SOURCE, TAG_PROGRESS,
                          g->j->comm, &st) != MPI_SUCCESS)
        return false;
    if (st.MPI_SOURCE > 0 && st.MPI_SOURCE < g->j->n)
        g->done[st.MPI_SOURCE] = m[0];
    g->finals += m[1] != 0;
    return true;
}

static void jprog_draw(jprog *g)
{
    pinio_progress p = { .total_bytes = g->total, .elapsed_s = now_s() - g->t0 };
    for (int r = 0; r < g->j->n; r++)
        p.done_bytes += g->done[r];
    if (p.done_bytes > p.total_bytes)
        p.done_bytes = p.total_bytes;
    if (g->j->o.progress(g->j->o.progress_ctx, &p))
        g->stop = true;
}

static int jprog_engine(void *ctx, const pinio_progress *p)
{
    jprog *g = ctx;
    job *j = g->j;
    if (j->rank == 0) {
        g->done[0] = p->done_bytes;
        while (jprog_take(g, false))
            ;
        jprog_draw(g);
        return g->stop;
    }
    MPI_Status st;
    int sent = 1;
    if (g->req != MPI_REQUEST_NULL)
        MPI_Test(&g->req, &sent, &st);
    if (sent) {
        g->msg[0] = p->done_bytes;
        g->msg[1] = 0;
        if (MPI_Isend(g->msg, 2, MPI_UINT64_T, 0, TAG_PROGRESS, j->comm, &g->req) != MPI_SUCCESS)
            g->req = MPI_REQUEST_NULL;
    }
    return j->o.progress ? j->o.progress(j->o.progress_ctx, p) : 0;
}

/* Before the reads: the job's total on rank 0 (a collective: every rank
 * calls it when job_progress). */
static int jprog_start(jprog *g, job *j, const pinio_plan *p, size_t first, size_t nreads)
{
    memset(g, 0, sizeof(*g));
    g->j = j;
    g->req = MPI_REQUEST_NULL;
    g->t0 = now_s();
    for (size_t i = first; i < first + nreads; i++)
        g->mine += pinio_plan_read_at(p, i)->len;
    if (j->rank == 0 && !(g->done = calloc((size_t)j->n, sizeof(*g->done))))
        pinio_diag_set(&j->local, -ENOMEM, "no memory to follow the job's progress");
    int e = MPI_Reduce(&g->mine, &g->total, 1, MPI_UINT64_T, MPI_SUM, 0, j->comm);
    int rc = e == MPI_SUCCESS ? 0 : pinio__mpi_fail(j, e, "MPI_Reduce (progress total)");
    rc = pinio__mpi_agree(j, rc < 0 ? rc : j->rank == 0 && !g->done ? -ENOMEM : 0);
    if (rc < 0)
        free(g->done);
    return rc;
}

/* After this rank's reads: its last report, or (rank 0) every rank's. */
static int jprog_end(jprog *g, int rc)
{
    job *j = g->j;
    MPI_Status st;
    if (j->rank != 0) {
        if (g->req != MPI_REQUEST_NULL)
            MPI_Wait(&g->req, &st);
        uint64_t m[2] = { rc == 0 ? g->mine : 0, 1 }; /* done: its whole share */
        MPI_Send(m, 2, MPI_UINT64_T, 0, TAG_PROGRESS, j->comm);
        return rc;
    }
    if (rc == 0)
        g->done[0] = g->mine;
    while (g->finals < j->n - 1 && jprog_take(g, true))
        jprog_draw(g);
    if (rc == 0 && !g->stop)
        jprog_draw(g); /* the end, done == total (also when nothing arrived) */
    if (rc == 0 && g->stop) {
        pinio_diag_set(&j->local, -ECANCELED, "the progress callback stopped the load");
        rc = -ECANCELED;
    }
    free(g->done);
    return rc;
}

/* This rank's reads into the destination, its memory registered in slabs. */
static int read_stripe(job *j, pinio_plan *p, uint8_t *base, size_t first, size_t nreads,
                       uint64_t lo, uint64_t hi, pinio_mpi_report *rep, jprog *g)
{
    if (nreads == 0)
        return 0; /* an empty stripe (more ranks than reads): nothing to read */
    if (j->o.cache == PINIO_CACHE_COLD) {
        int rc = pinio_plan_drop_cache(p, NULL, &j->local);
        if (rc < 0)
            return rc;
    }
    pinio_mem_region regions[64];
    size_t nreg = 0;
    for (uint64_t off = lo; off < hi && nreg < 64; off += REGION_MAX)
        regions[nreg++] = (pinio_mem_region){ .addr = base + off,
                                              .len = (size_t)(hi - off < REGION_MAX ? hi - off
                                                                                    : REGION_MAX) };
    pinio_exec_opts eo;
    pinio_exec_opts_default(&eo);
    eo.first_read = first;
    eo.nreads = nreads;
    eo.queue_depth = j->o.queue_depth;
    eo.request_size = j->o.request_size;
    eo.direct = j->o.direct;
    eo.backend = j->o.backend;
    /* Ranks on one shared file system start their stripes' reads at
     * different pieces. */
    eo.stagger_rank = (uint32_t)j->rank;
    eo.stagger_ranks = (uint32_t)j->n;
    eo.progress = g ? jprog_engine : j->o.progress;
    eo.progress_ctx = g ? (void *)g : j->o.progress_ctx;
    eo.regions = nreg < 64 ? regions : NULL; /* past 64 GiB: plain reads */
    eo.nregions = nreg < 64 ? nreg : 0;
    pinio_exec_report er;
    int rc = pinio_plan_execute(p, &dest_ops, base, &eo, &er, &j->local);
    if (rc == 0) {
        rep->read_bytes = er.read_bytes;
        memcpy(rep->io_path, er.io_path, sizeof(rep->io_path));
    }
    return rc;
}

/* Replicate: every stripe to every rank, in place. `start[r]` is where
 * stripe r begins in the destination, start[n] its end; all multiples of
 * `unit`. */
static int exchange(job *j, MPI_Comm comm, int rank, int n, uint8_t *base,
                    const uint64_t *start, uint64_t unit, pinio_mpi_exchange how,
                    uint64_t *received)
{
    MPI_Datatype t;
    int e = MPI_Type_contiguous((int)unit, MPI_BYTE, &t);
    if (e == MPI_SUCCESS)
        e = MPI_Type_commit(&t);
    if (e != MPI_SUCCESS)
        return pinio__mpi_fail(j, e, "MPI_Type_contiguous");
    int rc = 0;
    *received = (start[n] - start[0]) - (start[rank + 1] - start[rank]);
    if (how == PINIO_MPI_EXCHANGE_ALLGATHERV) {
        int *counts = malloc(2 * (size_t)n * sizeof(int));
        if (!counts) {
            rc = -ENOMEM;
        } else {
            for (int r = 0; r < n; r++) {
                counts[r] = (int)((start[r + 1] - start[r]) / unit);
                counts[n + r] = (int)(start[r] / unit);
            }
            e = MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, base, counts, counts + n, t,
                               comm);
            if (e != MPI_SUCCESS)
                rc = pinio__mpi_fail(j, e, "MPI_Allgatherv (stripes)");
            free(counts);
        }
    } else {
        /* Pieces broadcast by their reader, a few in flight, so that one
         * stripe's pieces travel the broadcast tree in a pipeline. */
        uint64_t piece = j->o.bcast_piece ? j->o.bcast_piece : PIECE_DEFAULT;
        piece = piece < unit ? unit : piece / unit * unit;
        MPI_Request req[PIECES_IN_FLIGHT];
        /* Statuses, not MPI_STATUSES_IGNORE: MPICH declares that as a
         * pointer constant that gcc 12 takes for a zero-sized array. */
        MPI_Status st[PIECES_IN_FLIGHT];
        int inflight = 0;
        for (int r = 0; r < n && rc == 0; r++)
            for (uint64_t off = start[r]; off < start[r + 1] && rc == 0; off += piece) {
                uint64_t len = start[r + 1] - off < piece ? start[r + 1] - off : piece;
                if (inflight == PIECES_IN_FLIGHT) {
                    e = MPI_Waitall(inflight, req, st);
                    inflight = 0;
                    if (e != MPI_SUCCESS) {
                        rc = pinio__mpi_fail(j, e, "MPI_Ibcast (stripes)");
                        break;
                    }
                }
                e = MPI_Ibcast(base + off, (int)(len / unit), t, r, comm, &req[inflight]);
                if (e != MPI_SUCCESS)
                    rc = pinio__mpi_fail(j, e, "MPI_Ibcast (stripes)");
                else
                    inflight++;
            }
        if (inflight && MPI_Waitall(inflight, req, st) != MPI_SUCCESS && !rc)
            rc = pinio__mpi_fail(j, MPI_ERR_OTHER, "MPI_Ibcast (stripes)");
    }
    MPI_Type_free(&t);
    return rc;
}

/*
 * --verify: every file's SHA-256 over the bytes as read (mpi_verify.c),
 * then one verdict for the job: rank 0 compares the digests (the same on
 * every rank) with the expected ones (agreed in step 0) and its diagnostic
 * is every rank's, without a rank prefix: the mismatch is the file's, not
 * a rank's.
 */
static int verify_agreed(job *j, pinio_mpi_checkpoint *cp, const pinio_plan *plan,
                         const uint8_t *base, size_t first, size_t nreads, size_t t0, size_t t1,
                         pinio_mpi_report *rep)
{
    pinio_plan_info pi;
    pinio_plan_get_info(plan, &pi);
    uint8_t *dg = calloc(pi.files, PINIO_MPI_SHA_LEN);
    cp->hex = calloc(pi.files, sizeof(*cp->hex));
    int rc = pinio__mpi_agree(j, dg && cp->hex ? 0 : -ENOMEM);
    if (rc == 0)
        rc = pinio__mpi_agree(j, pinio__mpi_hash_files(j->comm, j->rank, j->n, plan, base,
                                                       first, nreads, t0, t1, dg,
                                                       &rep->verify_landed_bytes,
                                                       &rep->verify_reread_bytes, &j->local));
    if (rc < 0) {
        free(dg);
        return rc;
    }
    cp->nhex = pi.files;
    for (size_t i = 0; i < pi.files; i++)
        pinio__mpi_hex(dg + i * PINIO_MPI_SHA_LEN, cp->hex[i]);
    free(dg);
    struct {
        int rc;
        pinio_diag d;
    } v;
    memset(&v, 0, sizeof(v));
    for (size_t i = 0; j->rank == 0 && v.rc == 0 && i < j->o.nexpected && i < pi.files; i++) {
        const char *want = j->o.expected_sha256[i];
        if (!want || strcasecmp(want, cp->hex[i]) == 0)
            continue;
        pinio_diag_set_at(&v.d, v.rc = PINIO_EFORMAT, pinio_plan_file_at(plan, i)->path,
                          PINIO_DIAG_NO_OFFSET, "sha256 mismatch: expected %s, got %s", want,
                          cp->hex[i]);
        pinio_diag_set_index(&v.d, i);
    }
    int e = MPI_Bcast(&v, (int)sizeof(v), MPI_BYTE, 0, j->comm);
    if (e != MPI_SUCCESS)
        return pinio__mpi_agree(j, pinio__mpi_fail(j, e, "MPI_Bcast (verdict)"));
    if (v.rc < 0 && j->diag) {
        v.d.msg[sizeof(v.d.msg) - 1] = v.d.path[sizeof(v.d.path) - 1] = '\0';
        *j->diag = v.d;
    }
    return v.rc;
}

/* Which plan tensors this rank holds: [t0, t1) of the plan's. */
static int hold(pinio_mpi_checkpoint *cp, size_t t0, size_t t1)
{
    cp->held = malloc((t1 > t0 ? t1 - t0 : 1) * sizeof(*cp->held));
    if (!cp->held)
        return -ENOMEM;
    for (size_t i = t0; i < t1; i++)
        cp->held[cp->nheld++] = i;
    return 0;
}

static int load(job *j, const char *const *paths, size_t npaths, pinio_mpi_checkpoint *cp,
                pinio_mpi_report *rep)
{
    double t0 = now_s();
    /* tp: the whole plan's reads run (rp), the rank's own plan describes
     * what it holds (cp->plan); elsewhere they are one plan. */
    bool tp = j->o.policy == PINIO_MPI_TP;
    int rc = pinio__mpi_plan_phase(j, paths, npaths, tp ? &cp->rplan : &cp->plan,
                                   tp ? &cp->plan : NULL, &rep->header_bytes);
    rep->plan_seconds = now_s() - t0;
    if (rc < 0)
        return rc;
    pinio_plan *rp = tp ? cp->rplan : cp->plan;
    pinio_plan_info pi;
    pinio_plan_get_info(rp, &pi);
    uint64_t unit = pi.align ? pi.align : 4096;
    uint64_t end = (pi.dest_bytes + unit - 1) / unit * unit;
    rep->plan_read_bytes = pi.read_bytes;
    bool own_filters = j->own_filters;
    bool by_node = j->o.policy == PINIO_MPI_NODE;
    node nd = { MPI_COMM_NULL, MPI_COMM_NULL, 0, 1, j->rank, j->n };
    if (by_node) {
        rc = pinio__mpi_agree(j, node_split(j, &nd));
        if (rc < 0) {
            node_free(&nd);
            return rc;
        }
    }

    /* Stripes: the same cut on every rank (replicate: one per rank; node:
     * one per node, each cut again into one per local rank); a run of
     * whole tensors (shard by split); the rank's whole plan (shard by its
     * own filters). start[]: where each exchanged stripe begins; lo/hi: the
     * destination range this rank's reads fill. */
    size_t *first = calloc((size_t)j->n + 1, sizeof(*first));
    size_t *lfirst = calloc((size_t)nd.lsize + 1, sizeof(*lfirst));
    uint64_t *start = calloc((size_t)j->n + 1, sizeof(*start));
    size_t my_first = 0, my_n = pi.reads, tfirst = 0, tend = pi.tensors;
    uint64_t lo = 0, hi = end;
    rc = first && lfirst && start ? 0 : -ENOMEM;
    if (rc == 0 && j->o.policy != PINIO_MPI_SHARD) {
        cut_stripes(rp, 0, pi.reads, nd.count, first);
        for (int r = 0; r <= nd.count; r++)
            start[r] = r == 0 ? 0 : dest_at(rp, first[r], end);
        start[nd.count] = end;
        cut_stripes(rp, first[nd.index], first[nd.index + 1], nd.lsize, lfirst);
        my_first = lfirst[nd.lrank];
        my_n = lfirst[nd.lrank + 1] - lfirst[nd.lrank];
        lo = nd.lrank == 0 ? start[nd.index] : dest_at(rp, my_first, end);
        hi = nd.lrank + 1 == nd.lsize ? start[nd.index + 1] : dest_at(rp, my_first + my_n, end);
        if (end / unit > INT_MAX) {
            pinio_diag_set(&j->local, -EOVERFLOW,
                           "a %llu-byte plan is past what MPI-3.1 counts of %llu-byte units reach",
                           (unsigned long long)end, (unsigned long long)unit);
            rc = -EOVERFLOW;
        }
    } else if (rc == 0 && !own_filters) {
        shard_split(cp->plan, j->n, j->rank, &tfirst, &tend, &my_first, &my_n);
        const pinio_plan_read *a = pinio_plan_read_at(cp->plan, my_first),
                              *z = pinio_plan_read_at(cp->plan, my_first + my_n - 1);
        lo = my_n ? a->dest_offset : 0;
        hi = my_n ? z->dest_offset + z->len : 0;
    }
    rep->first_read = my_first;
    rep->nreads = my_n;
    /* tp: the reads land in a staging area laid out as the whole plan (only
     * this rank's stripe of it is touched), the slices in their own. */
    tp_plan tpl;
    memset(&tpl, 0, sizeof(tpl));
    pinio_view stage = pinio_view_static(NULL, 0);
    if (tp && (rc = pinio__mpi_agree(j, rc)) == 0)
        rc = pinio__mpi_tp_layout(j, rp, cp->plan, &tpl);
    /* tp on one node (auto or shared): the staging area is the node's
     * (mpi_tp.c says why); a job over several nodes exchanges in rounds. */
    node tn = { MPI_COMM_NULL, MPI_COMM_NULL, 0, 1, j->rank, j->n };
    bool shared = false;
    uint64_t tail = 0;
    if (tp && rc == 0 && j->o.exchange != PINIO_MPI_EXCHANGE_ALLTOALLV) {
        rc = pinio__mpi_agree(j, node_split(j, &tn));
        shared = rc == 0 && tn.count == 1;
        if (rc == 0 && !shared && j->o.exchange == PINIO_MPI_EXCHANGE_SHARED) {
            pinio_diag_set(&j->local, -EINVAL, "pinio_mpi_load: the shared exchange needs every "
                           "rank on one node (%d nodes)", tn.count);
            rc = -EINVAL;
        }
        rep->exchange = shared ? PINIO_MPI_EXCHANGE_SHARED : PINIO_MPI_EXCHANGE_ALLTOALLV;
        long pg = sysconf(_SC_PAGESIZE);
        tail = (end + (uint64_t)pg - 1) / (uint64_t)pg * (uint64_t)pg;
        if (shared)
            pinio__mpi_tp_place(rp, &tpl, j->rank, j->n, tail);
    }
    int leader_fd = -1, stage_fd = -1;
    if (rc == 0)
        rc = by_node  ? node_map(j, &nd, end, &cp->mem, &leader_fd, 0, NULL, NULL)
             : shared ? node_map(j, &tn, end, &stage, &leader_fd, tpl.dest_bytes, &cp->mem,
                                 &stage_fd)
                      : map_dest(j, end, tp, tp ? &stage : &cp->mem);
    if (rc == 0 && tp && !shared)
        rc = map_dest(j, tpl.dest_bytes, true, &cp->mem);
    rc = pinio__mpi_agree(j, rc);
    uint8_t *base = tp ? pinio_view_data_mut(&stage) : pinio_view_data_mut(&cp->mem);
    if (leader_fd >= 0) /* every local rank has mapped the node's copy (or failed) */
        close(leader_fd);

    if (rc == 0) {
        double t = now_s();
        jprog g;
        bool follow = j->job_progress;
        rc = follow ? jprog_start(&g, j, rp, my_first, my_n) : 0; /* agreed */
        if (rc == 0) {
            rc = read_stripe(j, rp, base, my_first, my_n, lo, hi, rep, follow ? &g : NULL);
            if (follow)
                rc = jprog_end(&g, rc);
            rc = pinio__mpi_agree(j, rc);
        }
        rep->io_seconds = now_s() - t;
    }
    /* Before the exchange: each rank hashes the bytes it read itself. */
    if (rc == 0 && j->o.verify) {
        double t = now_s();
        rc = verify_agreed(j, cp, rp, base, my_first, my_n, tfirst, tend, rep);
        rep->verify_seconds = now_s() - t;
        rep->verified = rc == 0;
    }
    /* The exchange: between all ranks (replicate) or the node leaders
     * (node: the others' copy is the leader's). */
    if (rc == 0 && tp) {
        double t = now_s();
        if (shared) /* the reads' agreement: every stripe is in the node's copy */
            pinio__mpi_tp_shared(j, rp, &tpl, base, stage_fd, start,
                                 pinio_view_data_mut(&cp->mem), tail, rep);
        else
            rc = pinio__mpi_tp_exchange(j, rp, &tpl, base, start, pinio_view_data_mut(&cp->mem),
                                        rep);
        rep->exchange_seconds = now_s() - t;
        rc = pinio__mpi_agree(j, rc);
    } else if (rc == 0 && j->o.policy != PINIO_MPI_SHARD && nd.count > 1 && end > 0) {
        double t = now_s();
        if (nd.lrank == 0)
            rc = exchange(j, by_node ? nd.leaders : j->comm, nd.index, nd.count,
                          pinio_view_data_mut(&cp->mem), start, unit, rep->exchange,
                          &rep->received_bytes);
        rep->exchange_seconds = now_s() - t;
        rc = pinio__mpi_agree(j, rc);
    }
    pinio_view_release(&stage);
    if (stage_fd >= 0)
        close(stage_fd);
    if (rc == 0 && by_node)
        rep->locked = node_lock(&nd, &cp->mem);
    if (rc == 0) {
        cp->rank_read = calloc((size_t)j->n, sizeof(*cp->rank_read));
        rc = cp->rank_read ? 0 : -ENOMEM;
        rc = pinio__mpi_agree(j, rc);
    }
    if (rc == 0) {
        int e = MPI_Allgather(&rep->read_bytes, 1, MPI_UINT64_T, cp->rank_read, 1, MPI_UINT64_T,
                              j->comm);
        rc = pinio__mpi_agree(
            j, e == MPI_SUCCESS ? 0 : pinio__mpi_fail(j, e, "MPI_Allgather (bytes read)"));
    }
    if (rc == 0)
        rc = pinio__mpi_agree(j, hold(cp, tfirst, tend));
    if (rc == 0 && tp) {
        cp->tp = tpl.held; /* the rank's slices, placed in its memory */
        tpl.held = NULL;
        rep->world = (uint32_t)j->n;
        rep->sliced = tpl.sliced;
        rep->full_bytes = tpl.full_bytes;
        pinio_plan_free(cp->rplan);
        cp->rplan = NULL;
    }
    pinio__mpi_tp_free(&tpl);
    rep->node = nd.index;
    rep->nodes = nd.count;
    rep->local_rank = nd.lrank;
    rep->local_ranks = nd.lsize;
    rep->node_bytes = by_node ? cp->mem.len : 0;
    node_free(&nd);
    node_free(&tn);
    free(first);
    free(lfirst);
    free(start);
    if (rc < 0)
        return rc;
    for (int r = 0; r < j->n; r++)
        rep->job_read_bytes += cp->rank_read[r];
    rep->tensors = cp->nheld;
    for (size_t i = 0; i < cp->nheld; i++)
        rep->bytes += pinio_mpi_tensor(cp, i)->nbytes;
    rep->seconds = now_s() - t0;
    MPI_Allreduce(&rep->seconds, &rep->max_seconds, 1, MPI_DOUBLE, MPI_MAX, j->comm);
    return 0;
}

int pinio_mpi_load(MPI_Comm comm, const char *const *paths, size_t npaths,
                   const pinio_mpi_opts *opts, pinio_mpi_checkpoint **out, pinio_mpi_report *rep,
                   pinio_diag *diag)
{
    if (out)
        *out = NULL;
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (!inited || finalized) {
        pinio_diag_set(diag, -EINVAL, "pinio_mpi_load: MPI is %s",
                       inited ? "finalized" : "not initialised (pinio never calls MPI_Init)");
        return -EINVAL;
    }
    job j = { .diag = diag };
    pinio_mpi_opts_default(&j.o);
    if (opts) {
        size_t n = opts->struct_size < sizeof(j.o) ? opts->struct_size : sizeof(j.o);
        if (n >= sizeof(size_t))
            memcpy(&j.o, opts, n);
        j.o.struct_size = sizeof(j.o);
    }
    /* Checked on every rank, but agreed after the duplicate: a rank that
     * returned here alone would leave the others in the collectives. */
    int bad = !out || !paths || npaths == 0 || (j.o.nfilters && !j.o.filters) ||
              (j.o.nshard_filters && !j.o.shard_filters) || j.o.node_ranks < 0 ||
              !pinio_mpi_policy_name(j.o.policy) || !pinio_mpi_exchange_name(j.o.exchange) ||
              (j.o.verify && j.o.nexpected && !j.o.expected_sha256);
    bool both = j.o.policy == PINIO_MPI_SHARD && j.o.nfilters && j.o.nshard_filters;
    bool tp = j.o.policy == PINIO_MPI_TP;
    bool tp_x = j.o.exchange == PINIO_MPI_EXCHANGE_ALLTOALLV ||
                j.o.exchange == PINIO_MPI_EXCHANGE_SHARED;
    bad = bad || (j.o.nsplit && !j.o.split) ||
          (tp ? j.o.exchange != PINIO_MPI_EXCHANGE_AUTO && !tp_x : tp_x);
    j.own_filters = j.o.policy == PINIO_MPI_SHARD && j.o.nshard_filters;
    int e = MPI_Comm_dup(comm, &j.comm);
    if (e != MPI_SUCCESS) {
        job tmp = { .diag = diag };
        int rc = pinio__mpi_fail(&tmp, e, "MPI_Comm_dup");
        if (diag)
            *diag = tmp.local;
        return rc;
    }
    MPI_Comm_set_errhandler(j.comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(j.comm, &j.rank);
    MPI_Comm_size(j.comm, &j.n);
    j.local.offset = PINIO_DIAG_NO_OFFSET;
    j.local.index = PINIO_DIAG_NO_INDEX;

    pinio_mpi_report r;
    memset(&r, 0, sizeof(r));
    r.rank = j.rank;
    r.nranks = j.n;
    r.policy = j.o.policy;
    r.exchange = j.o.exchange != PINIO_MPI_EXCHANGE_AUTO ? j.o.exchange
                 : tp                                    ? PINIO_MPI_EXCHANGE_ALLTOALLV
                                                         : PINIO_MPI_EXCHANGE_ALLGATHERV;
    /* A rank whose own world differs is named here; a rule that differs,
     * by the agreement on the arguments. */
    if (!bad && !tp && j.o.nsplit) {
        pinio_diag_set(&j.local, -EINVAL, "pinio_mpi_load: split rules go with the tp policy");
        bad = 1;
    } else if (!bad && tp && j.o.world && j.o.world != (uint32_t)j.n) {
        pinio_diag_set(&j.local, -EINVAL,
                       "pinio_mpi_load: world %u is not the communicator's %d ranks", j.o.world,
                       j.n);
        bad = 1;
    } else if (bad)
        pinio_diag_set(&j.local, -EINVAL, "pinio_mpi_load: invalid arguments");
    else if (both)
        pinio_diag_set(&j.local, -EINVAL,
                       "pinio_mpi_load: filters and shard_filters together: a rank's selection "
                       "under shard is its shard filters alone");
    pinio_mpi_checkpoint *cp = bad || both ? NULL : calloc(1, sizeof(*cp));
    int rc = pinio__mpi_agree(&j, bad || both ? -EINVAL : cp ? 0 : -ENOMEM);
    if (rc == 0) {
        cp->nranks = j.n;
        rc = load(&j, paths, npaths, cp, &r);
    }
    MPI_Comm_free(&j.comm);
    if (rc < 0) {
        pinio_mpi_release(cp);
        return rc;
    }
    if (rep)
        *rep = r;
    *out = cp;
    return 0;
}

void pinio_mpi_release(pinio_mpi_checkpoint *cp)
{
    if (!cp)
        return;
    pinio_view_release(&cp->mem);
    pinio_plan_free(cp->plan);
    pinio_plan_free(cp->rplan);
    free(cp->tp);
    free(cp->held);
    free(cp->rank_read);
    free(cp->hex);
    free(cp);
}

size_t pinio_mpi_count(const pinio_mpi_checkpoint *cp)
{
    return cp ? cp->nheld : 0;
}

const pinio_plan_tensor *pinio_mpi_tensor(const pinio_mpi_checkpoint *cp, size_t i)
{
    if (!cp || i >= cp->nheld)
        return NULL;
    return cp->tp ? &cp->tp[cp->held[i]] : pinio_plan_tensor_at(cp->plan, cp->held[i]);
}

int pinio_mpi_tensor_view(const pinio_mpi_checkpoint *cp, size_t i, pinio_view *out)
{
    const pinio_plan_tensor *t = pinio_mpi_tensor(cp, i);
    if (!t)
        return -ERANGE;
    return pinio_view_slice(&cp->mem, (size_t)t->dest_offset,
                            (size_t)(t->dest_offset + t->nbytes), out);
}

const pinio_plan *pinio_mpi_plan(const pinio_mpi_checkpoint *cp)
{
    return cp ? cp->plan : NULL;
}

const char *pinio_mpi_sha256(const pinio_mpi_checkpoint *cp, size_t i)
{
    return cp && i < cp->nhex ? cp->hex[i] : NULL;
}

uint64_t pinio_mpi_rank_read_bytes(const pinio_mpi_checkpoint *cp, int r)
{
    return cp && r >= 0 && r < cp->nranks ? cp->rank_read[r] : 0;
}
