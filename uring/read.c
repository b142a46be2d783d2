/* The read executor: cuts requests into aligned pieces, keeps up to
 * queue_depth of them in flight on the ring (or the pread pool), and consumes
 * completions in one place, where the fault hook sits.
 *
 * Geometry of one O_DIRECT request [off, end) with offset alignment A:
 *
 *     a        h                              t        b
 *     |--head--|------------ middle ----------|--tail--|
 *        off^                                    ^end
 *
 * a = off rounded down, b = end rounded up, h = off rounded up, t = end
 * rounded down. The head and tail blocks are read into a staging slot and
 * only the wanted bytes copied out; the middle goes straight into the
 * destination (READ_FIXED when it is registered memory) when the destination
 * address there is DIO-aligned, else through staging too. When off and end
 * lie in one block (h > t) a single staged block covers everything. Buffered
 * files use A = 1: no head, no tail, no staging. */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#if PINIO_HAVE_VALGRIND
#include <valgrind/memcheck.h> /* client requests: a few instructions, no-ops outside valgrind */
#endif
#include "ring_internal.h"

#define MAX_RETRIES 64 /* EAGAIN/EINTR/EBUSY per piece */
#define MAX_STALLS 16  /* short reads without progress per piece */

typedef struct piece {
    size_t req;
    int stage;        /* staging slot, -1 when reading into the destination */
    uint64_t p0, cur, p1;
    uint8_t *buf;     /* where file offset p0 lands */
    unsigned retries, stalls;
    bool was_direct;  /* submitted on the O_DIRECT descriptor */
} piece;

typedef struct rstate {
    uint64_t off, end;
    uint64_t a, h, t, b;
    uint64_t next;    /* cutting cursor in [a, b) */
    uint64_t eof;     /* lowest end of file seen, UINT64_MAX when none */
    uint64_t chunk;   /* middle piece size */
    unsigned A;
    bool mid_direct;
    int err;
} rstate;

typedef struct bulk {
    pinio_ring *r;
    pinio_read_req *reqs;
    rstate *rs;
    size_t n, next_req;
    piece *pieces;
    unsigned *free_pieces, nfree;
    unsigned *pending, npending; /* allocated pieces waiting for (re)submission */
    unsigned inflight;           /* handed to the backend, not yet completed */
    int first_err;
    pinio_diag *diag;
} bulk;

static uint64_t align_down(uint64_t v, uint64_t a)
{
    return v & ~(a - 1);
}

static void fail_req(bulk *b, size_t ri, int err, uint64_t at, uint64_t len)
{
    rstate *s = &b->rs[ri];
    if (s->err)
        return;
    s->err = err;
    if (!b->first_err) {
        b->first_err = err;
        pinio_diag_set(b->diag, err, "%s: read of %llu bytes at offset %llu failed: %s",
                          b->reqs[ri].file->path, (unsigned long long)len,
                          (unsigned long long)at, pinio_strerror(err));
    }
}

static void release_piece(bulk *b, unsigned i)
{
    piece *p = &b->pieces[i];
    if (p->stage >= 0)
        b->r->stage_free[b->r->nstage_free++] = (unsigned)p->stage;
    b->free_pieces[b->nfree++] = i;
}

/* Cuts the next piece of request ri into *p: 1 cut, 0 nothing left, -1 a
 * staging slot is needed and none is free (retry after completions). */
static int cut(bulk *b, size_t ri, piece *p)
{
    rstate *s = &b->rs[ri];
    pinio_ring *r = b->r;
    if (s->err || s->next >= s->b || s->next >= s->eof)
        return 0;
    uint64_t p0 = s->next, p1;
    bool staged = true;
    if (p0 < s->h) {
        p1 = s->h > s->t ? s->b : s->h; /* head block (or the only block) */
    } else if (p0 < s->t) {
        p1 = p0 + (s->t - p0 < s->chunk ? s->t - p0 : s->chunk);
        staged = !s->mid_direct;
        /* An O_DIRECT read of the block holding end of file DMAs the whole
         * block into memory and only then reports the short count: the bytes
         * past EOF would land in the caller's memory. Read that block (and
         * anything beyond it) through staging. `size` is the size seen at
         * open; a file truncated since then may still see this. */
        uint64_t eofblk = align_down(b->reqs[ri].file->size, s->A);
        if (!staged && s->A > 1 && p1 > eofblk) {
            if (p0 < eofblk) {
                p1 = eofblk;
            } else {
                staged = true;
                uint64_t c = align_down(r->stage_size, s->A);
                if (p1 - p0 > c)
                    p1 = p0 + c;
            }
        }
    } else {
        p1 = s->b; /* tail block */
    }
    p->req = ri;
    p->p0 = p->cur = p0;
    p->p1 = p1;
    p->retries = p->stalls = 0;
    if (staged) {
        if (!r->nstage_free)
            return -1;
        p->stage = (int)r->stage_free[--r->nstage_free];
        p->buf = r->stage + (size_t)p->stage * r->stage_size;
    } else {
        p->stage = -1;
        p->buf = (uint8_t *)b->reqs[ri].dst + (p0 - s->off);
    }
    s->next = p1;
    return 1;
}

static void submit_piece(bulk *b, unsigned i)
{
    pinio_ring *r = b->r;
    piece *p = &b->pieces[i];
    pinio_ring_file *f = b->reqs[p->req].file;
    p->was_direct = f->direct;
    pinio__op op = {
        .buf = p->buf + (p->cur - p->p0),
        .len = (size_t)(p->p1 - p->cur),
        .off = p->cur,
        .user = i,
        .buf_slot = -1,
    };
    if (p->stage >= 0) {
        op.buf_slot = r->stage_slot;
        r->stats.staged_ops++;
    } else {
        op.buf_slot = pinio__ring_slot_of(r, op.buf, op.len);
    }
    b->inflight++;
    if (!r->have_ring) {
        op.fd = p->was_direct ? f->fd_direct : f->fd_buf;
        r->stats.plain_ops++;
        pinio__pread_pool_submit(r->pool, &op);
        return;
    }
    int fix = p->was_direct ? f->fix_direct : f->fix_buf;
    op.fd = fix >= 0 ? fix : p->was_direct ? f->fd_direct : f->fd_buf;
    /* Never NULL: at most queue_depth pieces exist and the SQ has at least
     * that many entries; unsubmitted SQEs of a failed enter are still counted
     * in `inflight`. */
    struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);
    if (op.buf_slot >= 0) {
        io_uring_prep_read_fixed(sqe, op.fd, op.buf, (unsigned)op.len, op.off, op.buf_slot);
        r->stats.fixed_ops++;
    } else {
        io_uring_prep_read(sqe, op.fd, op.buf, (unsigned)op.len, op.off);
        r->stats.plain_ops++;
    }
    if (fix >= 0)
        sqe->flags |= IOSQE_FIXED_FILE;
    io_uring_sqe_set_data64(sqe, op.user);
}

/* The filesystem refused O_DIRECT at the first read (tmpfs before 6.6, some
 * FUSE and network file systems accept the open and fail the read): read
 * this file buffered from now on. */
static void fall_back_buffered(pinio_ring_file *f, int err)
{
    f->direct = false;
    f->direct_error = err;
    f->mem_align = f->off_align = 1;
    f->align_source = "buffered";
    snprintf(f->reason, sizeof f->reason, "O_DIRECT refused at first read (%s): buffered",
             pinio_err_name(err));
}

/* A short O_DIRECT read that ends inside the block it started in cannot be
 * resumed: the aligned resubmission would return the same count forever. That
 * happens when the file was truncated since it was opened (f->size is stale)
 * and now ends at x; fstat tells it from a device that merely returned less
 * (then the stall limit applies). Called only in that rare case. */
static bool ends_at(const pinio_ring_file *f, uint64_t x)
{
    struct stat st;
    return fstat(f->fd_buf, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size <= x;
}

/* THE place where completions are consumed, for every backend. */
static void complete(bulk *b, unsigned i, int res)
{
    pinio_ring *r = b->r;
    piece *p = &b->pieces[i];
    rstate *s = &b->rs[p->req];
    pinio_ring_file *f = b->reqs[p->req].file;
    b->inflight--;
    if (__builtin_expect(r->faults != NULL, 0)) {
        res = pinio__faults_completion_buf(r->faults, res, p->buf + (p->cur - p->p0),
                                           (size_t)(p->p1 - p->cur));
        if (r->faults->dioinval && p->was_direct && !f->direct_verified)
            res = -EINVAL;
    }
    if (s->err) { /* the request already failed: just drain */
        release_piece(b, i);
        return;
    }
    if (res == -EAGAIN || res == -EINTR || res == -EBUSY) {
        if (++p->retries <= MAX_RETRIES) {
            r->stats.retries++;
            b->pending[b->npending++] = i;
            return;
        }
    } else if (res == -EINVAL && p->was_direct && !f->direct_verified &&
               r->opts.direct != PINIO_DIRECT_ON) {
        if (f->direct)
            fall_back_buffered(f, res);
        b->pending[b->npending++] = i;
        return;
    }
    if (res < 0 || (uint64_t)res > p->p1 - p->cur) {
        fail_req(b, p->req, res < 0 ? res : -EIO, p->cur, p->p1 - p->cur);
        release_piece(b, i);
        return;
    }
#if PINIO_HAVE_VALGRIND
    /* The kernel wrote these bytes where valgrind cannot see it (an io_uring
     * completion is no syscall return it models), so memcheck would call
     * them uninitialised; liburing's sanitize.c does the same for ASan. */
    if (res > 0)
        VALGRIND_MAKE_MEM_DEFINED(p->buf + (p->cur - p->p0), (size_t)res);
#endif
    if (res > 0 && p->was_direct)
        f->direct_verified = true;
    uint64_t x = p->cur + (uint64_t)res;
    if (x < p->p1) {
        /* With O_DIRECT the rest is resubmitted from the aligned offset below
         * x: a remainder at an unaligned offset would fail with EINVAL
         * (RocksDB PR #6853 learned this). */
        uint64_t nc = p->was_direct ? align_down(x, s->A) : x;
        if (res == 0 || x >= f->size || (nc == p->cur && ends_at(f, x))) {
            /* End of file (a real kernel returns short only there). */
            if (x < s->eof)
                s->eof = x;
        } else {
            /* Short but not at EOF: resubmit the rest. */
            if (nc == p->cur && ++p->stalls > MAX_STALLS) {
                fail_req(b, p->req, -EIO, p->cur, p->p1 - p->cur);
                release_piece(b, i);
                return;
            }
            p->cur = nc;
            r->stats.retries++;
            b->pending[b->npending++] = i;
            return;
        }
    }
    if (p->stage >= 0) {
        uint64_t lo = p->p0 > s->off ? p->p0 : s->off;
        uint64_t hi = x < s->end ? x : s->end;
        if (hi > lo)
            memcpy((uint8_t *)b->reqs[p->req].dst + (lo - s->off), p->buf + (lo - p->p0),
                   (size_t)(hi - lo));
    }
    release_piece(b, i);
}

/* Submits what is queued and waits for at least one completion. -EINTR means
 * a signal arrived while waiting: enter again. -EAGAIN/-EBUSY mean the kernel
 * is short of request memory or the CQ is full: reap what is there and retry
 * (t/io_uring and fio do the same). Returns 0 or a fatal enter error. */
static int ring_wait(bulk *b)
{
    pinio_ring *r = b->r;
    for (unsigned tries = 0;;) {
        int ret = io_uring_submit_and_wait(&r->ring, 1);
        if (ret >= 0 || ret == -EINTR)
            break;
        if ((ret == -EAGAIN || ret == -EBUSY) && ++tries < 1000) {
            if (io_uring_cq_ready(&r->ring))
                break;
            sched_yield();
            continue;
        }
        return ret;
    }
    unsigned head, cnt = 0;
    struct io_uring_cqe *cqe;
    io_uring_for_each_cqe(&r->ring, head, cqe)
    {
        complete(b, (unsigned)io_uring_cqe_get_data64(cqe), cqe->res);
        cnt++;
    }
    io_uring_cq_advance(&r->ring, cnt);
    return 0;
}

static void pool_wait(bulk *b)
{
    pinio_ring *r = b->r;
    uint64_t user[64];
    int res[64];
    unsigned got = pinio__pread_pool_reap(r->pool, 1, 64, user, res);
    for (unsigned k = 0; k < got; k++)
        complete(b, (unsigned)user[k], res[k]);
}

static void init_req(bulk *b, size_t ri)
{
    pinio_read_req *q = &b->reqs[ri];
    rstate *s = &b->rs[ri];
    pinio_ring_file *f = q->file;
    uint64_t A = f->direct ? f->off_align : 1;
    s->A = (unsigned)A;
    s->off = q->offset;
    s->end = q->offset + q->len;
    s->eof = UINT64_MAX;
    s->a = align_down(s->off, A);
    s->h = align_down(s->off + A - 1, A);
    s->t = align_down(s->end, A);
    s->b = align_down(s->end + A - 1, A);
    s->next = s->a;
    uintptr_t mid = (uintptr_t)q->dst + (uintptr_t)(s->h - s->off);
    s->mid_direct = !f->direct || (mid & (f->mem_align - 1)) == 0;
    uint64_t rs = b->r->opts.request_size;
    uint64_t chunk = s->mid_direct ? align_down(rs, A) : align_down(b->r->stage_size, A);
    s->chunk = chunk ? chunk : A;
    if (!q->len)
        s->next = s->b = s->a; /* nothing to read */
}

int pinio_ring_read_bulk(pinio_ring *r, pinio_read_req *reqs, size_t n, pinio_diag *diag)
{
    if (!r || (n && !reqs))
        return -EINVAL;
    for (size_t i = 0; i < n; i++) {
        pinio_read_req *q = &reqs[i];
        if (!q->file || q->file->ring != r || (q->len && !q->dst) ||
            q->offset + q->len < q->offset || q->len > (size_t)INT64_MAX) {
            pinio_diag_set(diag, -EINVAL, "read request %zu: invalid (file, dst or range)", i);
            return -EINVAL;
        }
        q->done = 0;
        q->result = 0;
    }
    int ret = pinio__ring_check_thread(r, "pinio_ring_read_bulk", diag);
    if (ret)
        return ret;
    if (r->have_ring)
        pinio__ring_drain_deferred(r);
    if (!n)
        return 0;
    unsigned qd = r->opts.queue_depth;
    bulk b = {.r = r, .reqs = reqs, .n = n, .diag = diag};
    b.rs = calloc(n, sizeof *b.rs);
    b.pieces = calloc(qd, sizeof *b.pieces);
    b.free_pieces = calloc(qd, sizeof *b.free_pieces);
    b.pending = calloc(qd, sizeof *b.pending);
    if (!b.rs || !b.pieces || !b.free_pieces || !b.pending) {
        free(b.rs);
        free(b.pieces);
        free(b.free_pieces);
        free(b.pending);
        return -ENOMEM;
    }
    for (unsigned i = 0; i < qd; i++)
        b.free_pieces[i] = qd - 1 - i;
    b.nfree = qd;
    for (size_t i = 0; i < n; i++)
        init_req(&b, i);

    int fatal = 0;
    for (;;) {
        while (b.npending)
            submit_piece(&b, b.pending[--b.npending]);
        while (b.nfree && b.next_req < n) {
            unsigned i = b.free_pieces[--b.nfree];
            int c = cut(&b, b.next_req, &b.pieces[i]);
            if (c == 1) {
                submit_piece(&b, i);
                continue;
            }
            b.free_pieces[b.nfree++] = i;
            if (c < 0)
                break; /* wait for a staging slot */
            b.next_req++;
        }
        if (!b.inflight)
            break;
        if (r->have_ring) {
            fatal = ring_wait(&b);
            if (fatal)
                break;
        } else {
            pool_wait(&b);
        }
    }
    if (fatal) {
        /* io_uring_enter itself failed with something other than EINTR/EAGAIN/
         * EBUSY (never seen in practice): the ring cannot be trusted to report
         * the reads still in flight, so every request is reported failed. */
        for (size_t i = 0; i < n; i++)
            fail_req(&b, i, fatal, reqs[i].offset, reqs[i].len);
    }
    for (size_t i = 0; i < n; i++) {
        rstate *s = &b.rs[i];
        reqs[i].result = s->err;
        if (!s->err) {
            uint64_t hi = s->eof < s->end ? s->eof : s->end;
            reqs[i].done = hi > s->off ? (size_t)(hi - s->off) : 0;
        }
    }
    free(b.rs);
    free(b.pieces);
    free(b.free_pieces);
    free(b.pending);
    return b.first_err;
}

int64_t pinio_ring_read(pinio_ring *r, pinio_ring_file *f, uint64_t offset, void *dst, size_t len,
                        pinio_diag *diag)
{
    pinio_read_req q = {.file = f, .offset = offset, .len = len, .dst = dst};
    int ret = pinio_ring_read_bulk(r, &q, 1, diag);
    return ret < 0 ? ret : (int64_t)q.done;
}
