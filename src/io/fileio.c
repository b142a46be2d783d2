/*
 * pinio_fileio: file windows read through one pinio_ring.
 *
 * The engine opens files by path (pinio_ring_file_open), but a pinio_file is
 * an open descriptor whose path may since have been renamed over, unlinked or
 * truncated. Reopening "/proc/self/fd/N" follows the descriptor's magic link
 * to the very inode we hold, with new open flags (O_DIRECT included), so the
 * ring reads the same file the window was cut from. Only where /proc is not
 * mounted do we reopen the path, after checking its device and inode.
 *
 * The cache maps pinio_file -> pinio_ring_file for this context's ring. Each
 * entry holds a reference on its file: the key address cannot be freed and
 * reused by another pinio_file while cached (which would read the wrong file).
 * An entry whose file only the cache still references can never be asked for
 * again; it is closed when the next file is opened, so a long-lived context
 * does not pile up descriptors and file-table slots. *
 * pinio_bytes_read_io() and pinio_bytes_read_bulk() live here rather than in
 * bytes/: the bytes layer sits above the engine and must not call into it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "pinio/fileio.h"
#include "src/bytes/file.h"

/* One range of a pinio_file for read_files(). */
typedef struct file_req {
    pinio_file *file; /* in: borrowed */
    uint64_t offset;  /* in: file offset */
    void *dst;        /* in */
    size_t len;       /* in */
    int result;       /* out: 0 or a negative code */
} file_req;

typedef struct entry {
    pinio_file *file; /* one reference, the cache's */
    pinio_ring_file *rf;
    char opened_as[32]; /* "/proc/self/fd/N", or "" when opened by the file's path */
} entry;

struct pinio_fileio {
    pinio_ring *ring; /* borrowed */
    entry *v;
    size_t n, cap;
    size_t hit; /* index of the last lookup's entry: windows of one file come in runs */
};

int pinio_fileio_create(pinio_fileio **out, pinio_ring *ring)
{
    if (!out || !ring)
        return -EINVAL;
    pinio_fileio *io = calloc(1, sizeof *io);
    if (!io)
        return -ENOMEM;
    io->ring = ring;
    *out = io;
    return 0;
}

static void close_entry(entry *e)
{
    pinio_ring_file_close(e->rf);
    pinio_file_release(e->file);
}

void pinio_fileio_destroy(pinio_fileio *io)
{
    if (!io)
        return;
    for (size_t i = 0; i < io->n; i++)
        close_entry(&io->v[i]);
    free(io->v);
    free(io);
}

pinio_ring *pinio_fileio_ring(const pinio_fileio *io)
{
    return io->ring;
}

size_t pinio_fileio_open_files(const pinio_fileio *io)
{
    return io->n;
}

/* Engine messages start with the path the ring file was opened by; callers
 * know the file by the path they gave pinio_file_open(). */
static void rename_diag(pinio_diag *out, const pinio_diag *in, const char *opened_as,
                        const char *path)
{
    if (!out)
        return;
    size_t k = strlen(opened_as);
    if (k && strncmp(in->msg, opened_as, k) == 0)
        pinio_diag_set(out, in->code, "%s%s", path, in->msg + k);
    else if (strncmp(in->msg, path, strlen(path)) == 0)
        *out = *in;
    else /* a message without a path (e.g. the thread check of a bulk call) */
        pinio_diag_set(out, in->code, "%s: %s", path, in->msg);
}

static int open_ring_file(pinio_fileio *io, pinio_file *f, entry *e, pinio_diag *diag)
{
    pinio_diag d = {0};
    snprintf(e->opened_as, sizeof e->opened_as, "/proc/self/fd/%d", pinio__file_fd(f));
    int rc = pinio_ring_file_open(io->ring, e->opened_as, &e->rf, &d);
    if (rc == -ENOENT) {
        /* Our descriptor is open, so ENOENT means /proc is not mounted. The
         * path is the only name left: use it if it still names our inode.
         * (A rename in the window between stat and open goes unnoticed.) */
        struct stat a, b;
        e->opened_as[0] = '\0';
        if (fstat(pinio__file_fd(f), &a) != 0 || stat(pinio_file_path(f), &b) != 0 ||
            a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
            pinio_diag_set(diag, PINIO_ECHANGED,
                            "%s: replaced or removed since it was opened, and /proc is not "
                            "mounted to reopen the open file",
                            pinio_file_path(f));
            return PINIO_ECHANGED;
        }
        rc = pinio_ring_file_open(io->ring, pinio_file_path(f), &e->rf, &d);
    }
    if (rc)
        rename_diag(diag, &d, e->opened_as, pinio_file_path(f));
    return rc;
}

/* Closes the entries nobody but the cache references (see the top comment). */
static void sweep(pinio_fileio *io)
{
    size_t k = 0;
    for (size_t i = 0; i < io->n; i++) {
        if (pinio__file_sole_ref(io->v[i].file))
            close_entry(&io->v[i]);
        else
            io->v[k++] = io->v[i];
    }
    io->n = k;
    io->hit = 0;
}

/* The entry of `f`, opening its ring file on first use. The returned
 * pointer is valid until the next lookup (the array may move). */
static int lookup(pinio_fileio *io, pinio_file *f, entry **out, pinio_diag *diag)
{
    if (io->hit < io->n && io->v[io->hit].file == f) {
        *out = &io->v[io->hit];
        return 0;
    }
    for (size_t i = 0; i < io->n; i++)
        if (io->v[i].file == f) {
            io->hit = i;
            *out = &io->v[i];
            return 0;
        }
    sweep(io);
    if (io->n == io->cap) {
        size_t cap = io->cap ? io->cap * 2 : 8;
        entry *v = realloc(io->v, cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        io->v = v;
        io->cap = cap;
    }
    entry *e = &io->v[io->n];
    int rc = open_ring_file(io, f, e, diag);
    if (rc)
        return rc;
    e->file = pinio_file_retain(f);
    io->hit = io->n++;
    *out = e;
    return 0;
}

/* The cached file whose opened_as starts the engine message `msg`, or NULL.
 * ("/proc/self/fd/1" must not match a message about "/proc/self/fd/12".) */
static const entry *named_in(const pinio_fileio *io, const char *msg)
{
    for (size_t i = 0; i < io->n; i++) {
        const char *as = io->v[i].opened_as;
        size_t k = strlen(as);
        if (k && strncmp(msg, as, k) == 0 && !(msg[k] >= '0' && msg[k] <= '9'))
            return &io->v[i];
    }
    return NULL;
}

/*
 * Reads every request through `io`'s ring in one engine pass (the file-I/O
 * counterpart of pinio__file_read(), same errors: -ERANGE, PINIO_ECHANGED,
 * the read's errno; plus -EPERM off the ring's thread). Returns 0 or the
 * result of the lowest-index failing request, whose index goes to `*failed`
 * (may be NULL) and which `diag` describes (path and offset).
 */
static int read_files(pinio_fileio *io, file_req *reqs, size_t n, size_t *failed,
                      pinio_diag *diag)
{
    if (!io || (n && !reqs))
        return -EINVAL;
    pinio_read_req *rq = n ? calloc(n, sizeof *rq) : NULL;
    size_t *idx = n ? calloc(n, sizeof *idx) : NULL;
    if (n && (!rq || !idx)) {
        free(rq);
        free(idx);
        for (size_t i = 0; i < n; i++)
            reqs[i].result = -ENOMEM;
        return -ENOMEM;
    }
    /* Requests are visited in index order, so the first failure recorded is
     * the lowest-index one, except for engine failures, which are known only
     * after the one pass over every request; `d0` holds the diagnostic of the
     * lowest failure found before it. */
    size_t first = SIZE_MAX;
    pinio_diag d = {0}, d0 = {0};
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        file_req *q = &reqs[i];
        entry *e = NULL;
        q->result = pinio__file_check_range(q->file, q->offset, q->len, &d);
        if (!q->result && q->len)
            q->result = lookup(io, q->file, &e, &d);
        if (q->result && first == SIZE_MAX) {
            first = i;
            d0 = d;
        }
        if (q->result || !q->len)
            continue;
        rq[m] = (pinio_read_req){.file = e->rf, .offset = q->offset, .len = q->len, .dst = q->dst};
        idx[m++] = i;
    }

    pinio_diag ed = {0};
    int eret = m ? pinio_ring_read_bulk(io->ring, rq, m, &ed) : 0;
    /* The engine refuses a whole call (bad request, wrong thread, no memory)
     * without reading anything and without failing any one request. */
    bool whole = eret < 0;
    unsigned engine_failures = 0;
    for (size_t j = 0; j < m; j++)
        if (rq[j].result < 0) {
            whole = false;
            engine_failures++;
        }
    for (size_t j = 0; j < m; j++) {
        size_t i = idx[j];
        file_req *q = &reqs[i];
        if (whole || rq[j].result < 0) {
            q->result = whole ? eret : rq[j].result;
            if (i >= first)
                continue;
            first = i;
            const entry *e = named_in(io, ed.msg);
            if (whole || (engine_failures == 1 && e && e->file == q->file)) {
                /* The engine's message is about this request and names the
                 * offset of the piece that failed: keep it, with our path. */
                rename_diag(&d0, &ed, e ? e->opened_as : "", pinio_file_path(q->file));
            } else {
                pinio_diag_set(&d0, q->result, "%s: read of %zu bytes at offset %llu failed: %s",
                                pinio_file_path(q->file), q->len, (unsigned long long)q->offset,
                                pinio_strerror(q->result));
            }
        } else if (rq[j].done < q->len) {
            /* The engine stops at end of file; the window lay inside the size
             * seen at pinio_file_open(), so the file shrank under us. */
            q->result = pinio__file_changed(q->file, q->offset + rq[j].done, &d);
            if (i < first) {
                first = i;
                d0 = d;
            }
        } else {
            pinio__file_account(q->file, q->len);
        }
    }
    free(rq);
    free(idx);
    if (first == SIZE_MAX)
        return 0;
    if (failed)
        *failed = first;
    if (diag)
        *diag = d0;
    return reqs[first].result;
}

int pinio_controller_copy_into_io(pinio_controller *c, pinio_fileio *io, size_t offset, void *dst,
                                  size_t len, pinio_diag *diag)
{
    pinio_file *f;
    uint64_t at;
    if (!c)
        return -EINVAL;
    size_t cap = pinio_controller_capacity(c);
    if (!io || !len || offset > cap || len > cap - offset || !pinio__file_ctrl_window(c, &f, &at))
        return pinio_controller_copy_into(c, offset, dst, len, diag);
    file_req q = {.file = f, .offset = at + offset, .dst = dst, .len = len};
    return read_files(io, &q, 1, NULL, diag);
}

int pinio_bytes_read_io(pinio_bytes *b, pinio_fileio *io, size_t offset, void *dst, size_t len,
                        pinio_diag *diag)
{
    if (!b)
        return -EINVAL;
    if (offset > pinio_bytes_len(b) || len > pinio_bytes_len(b) - offset)
        return -ERANGE;
    return pinio_controller_copy_into_io(pinio_bytes_controller(b), io, offset, dst, len, diag);
}

/* Checks request i and, unless it goes to the ring, does it. Returns 1 when
 * it is a file window for the ring (stored in *fr), else 0 with its result. */
static int bulk_one(pinio_fileio *io, pinio_bytes_req *q, size_t i, file_req *fr,
                    pinio_diag *d)
{
    pinio_file *f;
    uint64_t at;
    q->result = 0;
    if (!q->bytes || (q->len && !q->dst)) {
        q->result = -EINVAL;
        pinio_diag_set(d, -EINVAL, "request %zu: NULL bytes or destination", i);
    } else if (q->offset > pinio_bytes_len(q->bytes) || q->len > pinio_bytes_len(q->bytes) - q->offset) {
        q->result = -ERANGE;
        pinio_diag_set(d, -ERANGE, "request %zu: %zu bytes at offset %zu pass the length %zu", i,
                        q->len, q->offset, pinio_bytes_len(q->bytes));
    } else if (q->len && io && pinio__file_ctrl_window(pinio_bytes_controller(q->bytes), &f, &at)) {
        *fr = (file_req){.file = f, .offset = at + q->offset, .dst = q->dst, .len = q->len};
        return 1;
    } else if (q->len) {
        q->result = pinio_controller_copy_into(pinio_bytes_controller(q->bytes), q->offset, q->dst, q->len, d);
    }
    return 0;
}

int pinio_bytes_read_bulk(pinio_fileio *io, pinio_bytes_req *reqs, size_t n, pinio_diag *diag)
{
    if (n && !reqs)
        return -EINVAL;
    file_req *fr = io && n ? calloc(n, sizeof *fr) : NULL;
    size_t *idx = io && n ? calloc(n, sizeof *idx) : NULL;
    if (io && n && (!fr || !idx)) {
        free(fr);
        free(idx);
        for (size_t i = 0; i < n; i++)
            reqs[i].result = -ENOMEM;
        return -ENOMEM;
    }
    size_t first = SIZE_MAX, m = 0;
    pinio_diag d = {0}, d0 = {0};
    for (size_t i = 0; i < n; i++) {
        if (bulk_one(io, &reqs[i], i, fr ? &fr[m] : NULL, &d)) {
            idx[m++] = i;
        } else if (reqs[i].result && first == SIZE_MAX) {
            first = i;
            d0 = d;
        }
    }
    size_t fail = 0;
    if (m && read_files(io, fr, m, &fail, &d) && idx[fail] < first) {
        first = idx[fail];
        d0 = d;
    }
    for (size_t j = 0; j < m; j++)
        reqs[idx[j]].result = fr[j].result;
    free(fr);
    free(idx);
    if (first == SIZE_MAX)
        return 0;
    if (diag)
        *diag = d0;
    return reqs[first].result;
}
