/*
 * #PINIO_MPI_TP: every rank's slices out of one read of the checkpoint.
 *
 * The ranks read the plan of the selected tensors whole, cut into one
 * contiguous stripe per rank (mpi_load.c, as replicate), into a staging
 * area laid out as that plan. Each byte a rank holds in the end lies in
 * exactly one stripe; this file moves it from there.
 *
 * Geometry: a chunk along dimension d of a row-major tensor is `runs`
 * equal runs, one per index of the dimensions before d, each the chunk's
 * rows of the dimensions from d on; run o starts at o * stride + off of
 * the tensor's bytes. A tensor held whole is one run of all its bytes, an
 * empty chunk no run. Each rank derives its own from its plan with the
 * split rules (the library matched the rules and cut the chunks: nothing
 * here re-implements either) and the ranks share them, four numbers per
 * tensor and rank, so that every rank knows what every other one needs.
 *
 * Why rounds of the layout and not one MPI_Alltoallv: counts and
 * displacements are ints (a pair's bytes past 2 GiB do not fit) and the
 * send buffer holds a byte once per rank that needs it (a tensor held
 * whole goes to n - 1 ranks). A round covers `piece` bytes of the layout:
 * no pair moves more than that in it, and the buffers stay that size
 * whatever the checkpoint's. Round k + 1 is packed while round k travels
 * (MPI_Ialltoallv), then k is unpacked.
 *
 * Why huge pages (MADV_HUGEPAGE on the buffers, and on the staging area
 * and the slices by mpi_load.c): the exchange writes memory nobody has
 * touched, and where a page fault is dear (a VM) faulting 4 KiB pages cost
 * bench/tp_load several times the copies themselves; 2 MiB pages fault
 * 512 times less often. Where the kernel has none to give, 4 KiB pages.
 *
 * Why not MPI datatypes straight from the staging area into the slices
 * (MPI_Ialltoallw of hindexed types, no buffers): Open MPI moved them
 * slower than these copies on bench/tp_load's machine.
 *
 * Why both sides can walk the same list without telling each other: for a
 * pair (r, q), the bytes r sends q in a round are q's runs, tensor by
 * tensor and run by run, cut to the round and to r's stripe. The sender
 * walks them per receiver, the receiver per tensor and run, cutting each
 * piece by the stripes; for a given pair both orders are (tensor, run).
 *
 * This file uses the public pinio API only (scripts/check-layers).
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pinio/mpi.h"
#include "mpi_internal.h"

/* Where each of a rank's slices starts in its memory: a cache line, which
 * is every dtype's alignment and more. */
#define SLICE_ALIGN 64
/* 16 MiB: the two rounds' buffers are touched once and reused; a round's
 * collective costs little against moving its bytes. */
#define ROUND_DEFAULT ((uint64_t)16 << 20)
/* With more ranks a round's send buffer (up to n - 1 times the round, for
 * tensors held whole) is kept near this by smaller rounds. */
#define SEND_BUDGET ((uint64_t)256 << 20)
#define ROUND_MIN ((uint64_t)1 << 20)

void pinio__mpi_tp_free(tp_plan *tp)
{
    free(tp->g);
    free(tp->held);
    memset(tp, 0, sizeof(*tp));
}

/* Rank-local: where this rank's slice `s` lies in the whole tensor `w`. */
static int geometry(const pinio_plan_tensor *w, const pinio_plan_tensor *s, tp_geom *g,
                    pinio_diag *d)
{
    uint64_t n = w->nbytes;
    *g = (tp_geom){ 1, n, 0, n };
    if (!s->sliced || s->nbytes == n)
        return 0;
    if (s->nbytes == 0) {
        *g = (tp_geom){ 0, 0, 0, 0 };
        return 0;
    }
    /* A chunk differs from its tensor along one dimension only. */
    int dim = -1;
    uint64_t numel = 1;
    for (unsigned k = 0; k < s->rank; k++) {
        numel *= s->full_shape[k];
        if (s->start[k] != 0 || s->shape[k] != s->full_shape[k])
            dim = dim < 0 ? (int)k : INT_MAX;
    }
    if (dim < 0 || dim == INT_MAX || numel == 0 || numel * pinio_dtype_bits(s->dtype) != n * 8) {
        pinio_diag_set(d, -EINVAL, "tensor %s: its slice is not a chunk along one dimension",
                       s->name);
        return -EINVAL;
    }
    /* In bits: an F4 or F6 element is less than a byte. The plan only
     * cuts such a tensor where every run starts and ends on a byte. */
    uint64_t inner = pinio_dtype_bits(s->dtype), runs = 1;
    for (unsigned k = (unsigned)dim + 1; k < s->rank; k++)
        inner *= s->full_shape[k];
    for (int k = 0; k < dim; k++)
        runs *= s->full_shape[k];
    *g = (tp_geom){ runs, s->full_shape[dim] * inner / 8, s->start[dim] * inner / 8,
                    s->shape[dim] * inner / 8 };
    if (g->runs * g->len != s->nbytes || g->off + g->len > g->stride) {
        pinio_diag_set(d, -EINVAL, "tensor %s: its slice does not fit its tensor", s->name);
        return -EINVAL;
    }
    return 0;
}

int pinio__mpi_tp_layout(job *j, const pinio_plan *full, const pinio_plan *mine, tp_plan *tp)
{
    memset(tp, 0, sizeof(*tp));
    pinio_plan_info fi, mi;
    pinio_plan_get_info(full, &fi);
    pinio_plan_get_info(mine, &mi);
    size_t nt = fi.tensors, n = (size_t)j->n;
    int rc = 0;
    if (mi.tensors != nt) {
        pinio_diag_set(&j->local, rc = -EINVAL,
                       "its plan with the split rules has %zu tensors, without %zu", mi.tensors,
                       nt);
    } else if (nt > (size_t)INT_MAX / 4 / (n ? n : 1)) {
        pinio_diag_set(&j->local, rc = -EOVERFLOW, "%zu tensors are past what one MPI count "
                       "of their slices reaches", nt);
    } else {
        tp->g = calloc(nt * n + 1, sizeof(*tp->g));
        tp->held = calloc(nt + 1, sizeof(*tp->held));
        if (!tp->g || !tp->held)
            pinio_diag_set(&j->local, rc = -ENOMEM, "no memory for the slices of %zu tensors",
                           nt);
    }
    /* This rank's own column, then everyone's. */
    tp_geom *own = rc == 0 ? tp->g + (size_t)j->rank * nt : NULL;
    uint64_t at = 0;
    for (size_t t = 0; rc == 0 && t < nt; t++) {
        const pinio_plan_tensor *w = pinio_plan_tensor_at(full, t), *s = pinio_plan_tensor_at(mine, t);
        if (w->name_len != s->name_len || memcmp(w->name, s->name, w->name_len) ||
            w->nbytes != s->full_nbytes) {
            pinio_diag_set(&j->local, rc = -EINVAL,
                           "tensor %s: its plan with the split rules does not list it where "
                           "the plan without does", w->name);
            break;
        }
        /* The walks stop at the first tensor past a round: the layout's
         * tensor order must be its byte order. */
        const pinio_plan_tensor *prev = t ? pinio_plan_tensor_at(full, t - 1) : NULL;
        if (prev && prev->dest_offset + prev->nbytes > w->dest_offset) {
            pinio_diag_set(&j->local, rc = -EINVAL, "tensor %s: the plan's tensors are not in "
                           "layout order", w->name);
            break;
        }
        rc = geometry(w, s, &own[t], &j->local);
        tp->held[t] = *s;
        at = (at + SLICE_ALIGN - 1) / SLICE_ALIGN * SLICE_ALIGN;
        tp->held[t].dest_offset = at;
        at += s->nbytes;
        tp->sliced += s->sliced && s->nbytes != w->nbytes;
        tp->full_bytes += w->nbytes;
    }
    tp->dest_bytes = at;
    tp->tensors = nt;
    rc = pinio__mpi_agree(j, rc);
    if (rc == 0) {
        /* Rank-major in the gather, tensor-major after: a rank's walk
         * reads one tensor's column of ranks together. */
        tp_geom *all = malloc((nt * n + 1) * sizeof(*all));
        if (!all)
            pinio_diag_set(&j->local, -ENOMEM, "no memory for the ranks' slices");
        rc = pinio__mpi_agree(j, all ? 0 : -ENOMEM);
        if (rc == 0) {
            int cnt = (int)(nt * 4);
            int e = MPI_Allgather(own, cnt, MPI_UINT64_T, all, cnt, MPI_UINT64_T, j->comm);
            rc = e == MPI_SUCCESS ? 0 : pinio__mpi_fail(j, e, "MPI_Allgather (slices)");
            for (size_t q = 0; rc == 0 && q < n; q++)
                for (size_t t = 0; t < nt; t++)
                    tp->g[t * n + q] = all[q * nt + t];
            rc = pinio__mpi_agree(j, rc);
        }
        free(all);
    }
    if (rc < 0)
        pinio__mpi_tp_free(tp);
    return rc;
}

/* Runs o of `g` in [lo, hi) that overlap [x, y) of the tensor's bytes. */
static void run_range(const tp_geom *g, uint64_t x, uint64_t y, uint64_t *lo, uint64_t *hi)
{
    *lo = *hi = 0;
    if (!g->len || x >= y)
        return;
    uint64_t end = g->off + g->len;
    *lo = x < end ? 0 : (x - end) / g->stride + 1;
    *hi = y <= g->off ? 0 : (y - g->off + g->stride - 1) / g->stride;
    if (*hi > g->runs)
        *hi = g->runs;
}

/* The walk's state: one round [a, b) of the layout. */
typedef struct walk {
    const pinio_plan *full;
    const tp_plan *tp;
    const uint64_t *start; /* stripes, n + 1 */
    int n, me;
    uint64_t a, b;
    size_t t0;             /* first tensor ending past a */
} walk;

/* What a piece is handed to: the peer it goes to or comes from, its place
 * in the staging area and (receiving) in this rank's memory. */
typedef void (*piece_fn)(void *ctx, int peer, uint64_t stage, uint64_t dest, uint64_t len);

/* Sending: for each other rank q, q's runs in this rank's stripe and the
 * round, in (tensor, run) order. */
static void walk_send(const walk *w, piece_fn fn, void *ctx)
{
    uint64_t lo = w->a > w->start[w->me] ? w->a : w->start[w->me];
    uint64_t hi = w->b < w->start[w->me + 1] ? w->b : w->start[w->me + 1];
    if (lo >= hi)
        return;
    for (int q = 0; q < w->n; q++) {
        if (q == w->me)
            continue;
        for (size_t t = w->t0; t < w->tp->tensors; t++) {
            const pinio_plan_tensor *pt = pinio_plan_tensor_at(w->full, t);
            uint64_t D = pt->dest_offset, N = pt->nbytes;
            if (D >= hi)
                break;
            if (D + N <= lo)
                continue;
            const tp_geom *g = &w->tp->g[t * (size_t)w->n + (size_t)q];
            uint64_t x = lo > D ? lo - D : 0, y = hi - D < N ? hi - D : N, o0, o1;
            run_range(g, x, y, &o0, &o1);
            for (uint64_t o = o0; o < o1; o++) {
                uint64_t ps = o * g->stride + g->off, pe = ps + g->len;
                ps = ps > x ? ps : x;
                pe = pe < y ? pe : y;
                if (ps < pe)
                    fn(ctx, q, D + ps, 0, pe - ps);
            }
        }
    }
}

/* The stripe holding layout byte p (stripes may be empty). */
static int stripe_of(const walk *w, uint64_t p)
{
    int lo = 0, hi = w->n - 1;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (w->start[mid + 1] > p)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* Receiving: this rank's runs in the round, in (tensor, run) order, each
 * cut by the stripes into the pieces of their readers. */
static void walk_recv(const walk *w, piece_fn fn, void *ctx)
{
    for (size_t t = w->t0; t < w->tp->tensors; t++) {
        const pinio_plan_tensor *pt = pinio_plan_tensor_at(w->full, t);
        uint64_t D = pt->dest_offset, N = pt->nbytes;
        if (D >= w->b)
            break;
        if (D + N <= w->a)
            continue;
        const tp_geom *g = &w->tp->g[t * (size_t)w->n + (size_t)w->me];
        uint64_t x = w->a > D ? w->a - D : 0, y = w->b - D < N ? w->b - D : N, o0, o1;
        run_range(g, x, y, &o0, &o1);
        for (uint64_t o = o0; o < o1; o++) {
            uint64_t rs = o * g->stride + g->off, ps = rs > x ? rs : x, pe = rs + g->len;
            pe = pe < y ? pe : y;
            uint64_t dst = w->tp->held[t].dest_offset + o * g->len;
            for (int r = ps < pe ? stripe_of(w, D + ps) : 0; ps < pe; r++) {
                uint64_t e = w->start[r + 1] - D < pe ? w->start[r + 1] - D : pe;
                if (e > ps)
                    fn(ctx, r, D + ps, dst + (ps - rs), e - ps);
                ps = e > ps ? e : ps;
            }
        }
    }
}

/* One round's buffers and counts (two of them: one travelling, one packed). */
typedef struct round {
    uint8_t *sbuf, *rbuf;
    int *scount, *sdispl, *rcount, *rdispl;
    uint64_t *pos;
    MPI_Request req;
    uint64_t a, b;
    size_t t0;
} round;

typedef struct pass {
    round *rd;
    const uint8_t *stage;
    uint8_t *dest;
    int me;
} pass;

static void count_send(void *ctx, int peer, uint64_t stage, uint64_t dest, uint64_t len)
{
    (void)stage, (void)dest;
    ((pass *)ctx)->rd->scount[peer] += (int)len;
}

static void count_recv(void *ctx, int peer, uint64_t stage, uint64_t dest, uint64_t len)
{
    pass *p = ctx;
    (void)stage, (void)dest;
    if (peer != p->me)
        p->rd->rcount[peer] += (int)len;
}

static void pack(void *ctx, int peer, uint64_t stage, uint64_t dest, uint64_t len)
{
    pass *p = ctx;
    (void)dest;
    memcpy(p->rd->sbuf + p->rd->pos[peer], p->stage + stage, (size_t)len);
    p->rd->pos[peer] += len;
}

static void unpack(void *ctx, int peer, uint64_t stage, uint64_t dest, uint64_t len)
{
    pass *p = ctx;
    if (peer == p->me) {
        memcpy(p->dest + dest, p->stage + stage, (size_t)len);
        return;
    }
    memcpy(p->dest + dest, p->rd->rbuf + p->rd->pos[peer], (size_t)len);
    p->rd->pos[peer] += len;
}

/* A buffer of `len` bytes (at least one), in huge pages where the kernel
 * gives them; NULL when mapping fails. */
static uint8_t *huge_alloc(uint64_t len)
{
    void *p = mmap(NULL, (size_t)len + 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    madvise(p, (size_t)len + 1, MADV_HUGEPAGE); /* a hint: refused, 4 KiB pages */
    return p;
}

static void huge_free(uint8_t *p, uint64_t len)
{
    if (p)
        munmap(p, (size_t)len + 1);
}

/* The round's counts, displacements and send buffer; then it is started. */
static int round_start(job *j, const walk *w, round *rd, const uint8_t *stage,
                       pinio_mpi_report *rep)
{
    int n = j->n;
    memset(rd->scount, 0, (size_t)n * sizeof(int));
    memset(rd->rcount, 0, (size_t)n * sizeof(int));
    pass p = { rd, stage, NULL, j->rank };
    walk_send(w, count_send, &p);
    walk_recv(w, count_recv, &p);
    for (int q = 0, s = 0, r = 0; q < n; q++) {
        rd->sdispl[q] = s;
        rd->rdispl[q] = r;
        rd->pos[q] = (uint64_t)s;
        s += rd->scount[q];
        r += rd->rcount[q];
        rep->sent_bytes += (uint64_t)rd->scount[q];
        rep->received_bytes += (uint64_t)rd->rcount[q];
    }
    walk_send(w, pack, &p);
    int e = MPI_Ialltoallv(rd->sbuf, rd->scount, rd->sdispl, MPI_BYTE, rd->rbuf, rd->rcount,
                           rd->rdispl, MPI_BYTE, j->comm, &rd->req);
    if (e != MPI_SUCCESS) {
        rd->req = MPI_REQUEST_NULL;
        return pinio__mpi_fail(j, e, "MPI_Ialltoallv (slices)");
    }
    return 0;
}

/* The round has arrived: its pieces into this rank's slices. */
static int round_finish(job *j, const walk *w, round *rd, const uint8_t *stage, uint8_t *dest)
{
    MPI_Status st;
    int e = MPI_Wait(&rd->req, &st);
    if (e != MPI_SUCCESS)
        return pinio__mpi_fail(j, e, "MPI_Ialltoallv (slices)");
    for (int q = 0; q < j->n; q++)
        rd->pos[q] = (uint64_t)rd->rdispl[q];
    pass p = { rd, stage, dest, j->rank };
    walk_recv(w, unpack, &p);
    return 0;
}

/* The first tensor whose bytes end past layout byte `a`, from `t` on. */
static size_t first_tensor(const pinio_plan *full, size_t nt, size_t t, uint64_t a)
{
    while (t < nt) {
        const pinio_plan_tensor *pt = pinio_plan_tensor_at(full, t);
        if (pt->dest_offset + pt->nbytes > a)
            break;
        t++;
    }
    return t;
}

int pinio__mpi_tp_exchange(job *j, const pinio_plan *full, const tp_plan *tp,
                           const uint8_t *stage, const uint64_t *start, uint8_t *dest,
                           pinio_mpi_report *rep)
{
    int n = j->n;
    uint64_t end = start[n];
    uint64_t piece = j->o.bcast_piece;
    if (!piece) {
        piece = ROUND_DEFAULT;
        if (n > 1 && piece * (uint64_t)(n - 1) > SEND_BUDGET)
            piece = SEND_BUDGET / (uint64_t)(n - 1) > ROUND_MIN ? SEND_BUDGET / (uint64_t)(n - 1)
                                                                 : ROUND_MIN;
    }
    if (piece > (uint64_t)INT_MAX / (uint64_t)n)
        piece = (uint64_t)INT_MAX / (uint64_t)n; /* a round's displacements are ints */
    /* Buffers for the largest round: this rank's stripe in it, to each
     * other rank at most once; its own slices' bytes in it, from others. */
    uint64_t stripe = start[j->rank + 1] - start[j->rank];
    uint64_t smax = (uint64_t)(n - 1) * (stripe < piece ? stripe : piece);
    uint64_t rmax = tp->dest_bytes < piece ? tp->dest_bytes : piece;
    round rds[2];
    memset(rds, 0, sizeof(rds));
    int ok = 1;
    for (int k = 0; k < 2; k++) {
        round *rd = &rds[k];
        rd->req = MPI_REQUEST_NULL;
        rd->sbuf = huge_alloc(smax);
        rd->rbuf = huge_alloc(rmax);
        rd->scount = calloc(4 * (size_t)n, sizeof(int));
        rd->pos = calloc((size_t)n, sizeof(uint64_t));
        ok &= rd->sbuf && rd->rbuf && rd->scount && rd->pos;
        if (rd->scount) {
            rd->sdispl = rd->scount + n;
            rd->rcount = rd->scount + 2 * n;
            rd->rdispl = rd->scount + 3 * n;
        }
    }
    int rc = 0;
    if (!ok)
        pinio_diag_set(&j->local, rc = -ENOMEM, "no memory for the exchange's buffers (%llu bytes)",
                       (unsigned long long)(2 * (smax + rmax)));
    rc = pinio__mpi_agree(j, rc);
    size_t rounds = rc == 0 ? (size_t)((end + piece - 1) / piece) : 0, t0 = 0;
    walk w = { full, tp, start, n, j->rank, 0, 0, 0 };
    /* Round k is started, then round k - 1 finished: one travels while the
     * next is packed. Every rank runs the same rounds; a failed MPI call
     * stops this rank's, and its agreement after the exchange tells the
     * others (which may then wait on it: MPI's failure, not pinio's). */
    for (size_t k = 0; rc == 0 && k <= rounds; k++) {
        if (k < rounds) {
            round *rd = &rds[k % 2];
            t0 = first_tensor(full, tp->tensors, t0, k * piece);
            rd->a = w.a = k * piece;
            rd->b = w.b = (k + 1) * piece < end ? (k + 1) * piece : end;
            rd->t0 = w.t0 = t0;
            rc = round_start(j, &w, rd, stage, rep);
        }
        if (rc == 0 && k > 0) {
            round *rd = &rds[(k - 1) % 2];
            walk wp = w;
            wp.a = rd->a;
            wp.b = rd->b;
            wp.t0 = rd->t0;
            rc = round_finish(j, &wp, rd, stage, dest);
        }
    }
    for (int k = 0; k < 2; k++) {
        if (rds[k].req != MPI_REQUEST_NULL) {
            MPI_Status st;
            MPI_Wait(&rds[k].req, &st);
        }
        huge_free(rds[k].sbuf, smax);
        huge_free(rds[k].rbuf, rmax);
        free(rds[k].scount);
        free(rds[k].pos);
    }
    rep->rounds = rounds;
    return rc;
}

/*
 * #PINIO_MPI_EXCHANGE_SHARED: every rank on one node. The staging area is
 * one memfd of the node (mpi_load.c's node_map), each rank reading its
 * stripe into it through a shared mapping; each rank also maps it
 * privately, with room after it for the slices that need a copy. Why:
 * on a machine where a first touch of memory costs more than the copy
 * (bench/tp_load's VM: 0.02 to 0.05 GB/s busy), every byte the rounds
 * touched fresh (the send and receive buffers, the slices) was slower
 * than reading the whole file on every rank. Here a rank's fresh memory is
 * its stripe and the slices it copies; a tensor held whole or a chunk
 * along its first dimension is one run of the staging area, and its view
 * is that run of the private mapping: the page cache's pages, mapped, not
 * copied, and copied on write (a rank's write never shows on another).
 *
 * Why the other slices are copied by pread() from the memfd and not by
 * memcpy() from the mapping: on that VM a process's first user-space
 * access to each page is what costs (perf: the time in memmove, not in
 * page faults; mapping the pages beforehand changed nothing), and the
 * kernel's copy out of the memfd's pages skips the source half of it:
 * bench/tp_load with row-parallel rules went from 0.70-1.08 s to 0.10-0.38
 * s in the exchange at world 2. Where pread fails, memcpy.
 */

/* The lowest set bit of x: the alignment of an offset (0: any). */
static uint64_t align_of(uint64_t x)
{
    return x ? x & (~x + 1) : UINT64_MAX;
}

uint64_t pinio__mpi_tp_place(const pinio_plan *full, tp_plan *tp, int me, int n, uint64_t tail)
{
    uint64_t at = tail;
    for (size_t t = 0; t < tp->tensors; t++) {
        const pinio_plan_tensor *w = pinio_plan_tensor_at(full, t);
        const tp_geom *g = &tp->g[t * (size_t)n + (size_t)me];
        uint64_t src = w->dest_offset + g->off, want = align_of(w->dest_offset);
        want = want < SLICE_ALIGN ? want : SLICE_ALIGN;
        /* In place when one run, aligned at least as its tensor is (up to
         * SLICE_ALIGN): a chunk no worse placed than a whole tensor. */
        if (g->runs <= 1 && align_of(src) >= want) {
            tp->held[t].dest_offset = src;
            continue;
        }
        at = (at + SLICE_ALIGN - 1) / SLICE_ALIGN * SLICE_ALIGN;
        tp->held[t].dest_offset = at;
        at += tp->held[t].nbytes;
    }
    tp->dest_bytes = at;
    return at;
}

static void count64_send(void *ctx, int peer, uint64_t stage, uint64_t dest, uint64_t len)
{
    (void)peer, (void)stage, (void)dest;
    ((uint64_t *)ctx)[0] += len;
}

static void count64_recv(void *ctx, int peer, uint64_t stage, uint64_t dest, uint64_t len)
{
    uint64_t *c = ctx;
    (void)stage, (void)dest;
    if (peer != (int)c[2])
        c[1] += len;
}

/* Map [lo, hi) of `m` now (page-aligned outward), not at first use: the
 * load's time holds every page its views need, as a resident load's. */
static void populate(uint8_t *m, uint64_t lo, uint64_t hi)
{
    uint64_t pg = 4096;
    lo = lo / pg * pg;
    hi = (hi + pg - 1) / pg * pg;
    if (lo >= hi)
        return;
#ifdef MADV_POPULATE_READ
    if (madvise(m + lo, (size_t)(hi - lo), MADV_POPULATE_READ) == 0)
        return;
#endif
    /* Older kernels: one read per page. */
    volatile const uint8_t *p = m + lo;
    uint8_t sink = 0;
    for (uint64_t o = 0; o < hi - lo; o += pg)
        sink ^= p[o];
    (void)sink;
}

void pinio__mpi_tp_shared(job *j, const pinio_plan *full, const tp_plan *tp, const uint8_t *stage,
                          int fd, const uint64_t *start, uint8_t *mem, uint64_t tail,
                          pinio_mpi_report *rep)
{
    int n = j->n;
    /* The pieces the rounds would have moved, for the report. */
    uint64_t c[3] = { 0, 0, (uint64_t)j->rank };
    walk w = { full, tp, start, n, j->rank, 0, start[n], 0 };
    walk_send(&w, count64_send, c);
    walk_recv(&w, count64_recv, c);
    rep->sent_bytes += c[0];
    rep->received_bytes += c[1];
    uint64_t lo = 0, hi = 0; /* a run of in-place slices not yet populated */
    for (size_t t = 0; t < tp->tensors; t++) {
        const pinio_plan_tensor *pt = pinio_plan_tensor_at(full, t);
        const pinio_plan_tensor *h = &tp->held[t];
        const tp_geom *g = &tp->g[t * (size_t)n + (size_t)j->rank];
        if (h->nbytes == 0)
            continue;
        if (h->dest_offset < tail) {
            if (h->dest_offset > hi + 4096) {
                populate(mem, lo, hi);
                lo = h->dest_offset;
            }
            hi = h->dest_offset + h->nbytes;
            continue;
        }
        for (uint64_t o = 0; o < g->runs; o++) {
            uint8_t *to = mem + h->dest_offset + o * g->len;
            uint64_t from = pt->dest_offset + o * g->stride + g->off;
            if (fd < 0 || pread(fd, to, (size_t)g->len, (off_t)from) != (ssize_t)g->len)
                memcpy(to, stage + from, (size_t)g->len);
        }
    }
    populate(mem, lo, hi);
}
