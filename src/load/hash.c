/* SHA-256 of checkpoint files while their bytes arrive (contract in
 * src/hash_internal.h). Worker threads take the files in order, one file
 * each at a time (one SHA-256 stream cannot be split); the loader
 * publishes, per file, how far its bytes have arrived. */
#include <errno.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "src/load/hash_internal.h"
#include "src/load/plan_internal.h"

/* Bytes hashed between checks for an abort, and the pread buffer size. */
#define HASH_CHUNK ((size_t)8 << 20)

/* An object's bytes are read again in pieces of this: 8 ranges of 8 MiB in
 * flight at once, on the load's connections (pinio__obj_pread). */
#define HASH_OBJ_CHUNK ((size_t)64 << 20)

struct pinio__hasher {
    pinio__hash_file *files;
    size_t n;
    atomic_size_t next;     /* the next file a worker takes */
    uint64_t *upto;         /* per file, under mu */
    bool all_done, aborted; /* under mu; aborted also on a worker's error */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t *threads;
    unsigned nthreads;      /* started; 0: all the work in finish() */
    int rc;                 /* the first error, under mu */
    pinio_diag diag;        /* its message, under mu */
};

/* Waits until file i has bytes beyond `pos`; returns how far they go, or 0
 * when the hasher was aborted. */
static uint64_t wait_for(pinio__hasher *h, size_t i, uint64_t pos)
{
    uint64_t avail;
    pthread_mutex_lock(&h->mu);
    while (!h->aborted && !h->all_done && h->upto[i] <= pos)
        pthread_cond_wait(&h->cv, &h->mu);
    avail = h->aborted ? 0 : h->all_done ? h->files[i].size : h->upto[i];
    pthread_mutex_unlock(&h->mu);
    return avail;
}

static bool aborted(pinio__hasher *h)
{
    pthread_mutex_lock(&h->mu);
    bool a = h->aborted;
    pthread_mutex_unlock(&h->mu);
    return a;
}

/* Records a worker's error (the first one wins) and stops the others. */
static void fail(pinio__hasher *h, int rc, const pinio_diag *d)
{
    pthread_mutex_lock(&h->mu);
    if (!h->rc) {
        h->rc = rc;
        h->diag = *d;
    }
    h->aborted = true;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

static int hash_pread(pinio__hasher *h, const pinio__hash_file *f, EVP_MD_CTX *md,
                      uint8_t *buf, uint64_t off, uint64_t end, pinio_diag *d)
{
    size_t chunk = HASH_CHUNK;
    uint8_t *own = NULL;
    if (f->obj && end - off > HASH_CHUNK) {
        chunk = end - off < HASH_OBJ_CHUNK ? (size_t)(end - off) : HASH_OBJ_CHUNK;
        if (!(buf = own = malloc(chunk))) {
            pinio_diag_set(d, -ENOMEM, "%s: sha256: no memory for %zu bytes", f->path, chunk);
            return -ENOMEM;
        }
    }
    int rc = 0;
    while (off < end && rc == 0) {
        if (aborted(h)) {
            rc = -ECANCELED;
            break;
        }
        size_t want = end - off < chunk ? (size_t)(end - off) : chunk;
        ssize_t r = f->obj ? (ssize_t)pinio__obj_pread(f->obj, buf, want, off, d)
                           : pread(f->fd, buf, want, (off_t)off);
        if (r < 0 && f->obj) {
            rc = (int)r; /* the diag names the object and the range */
            break;
        }
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            rc = r < 0 ? -errno : PINIO_ECHANGED;
            pinio_diag_set(d, rc, "%s: sha256: read failed at offset %llu: %s", f->path,
                           (unsigned long long)off, pinio_strerror(rc));
            break;
        }
        EVP_DigestUpdate(md, buf, (size_t)r);
        off += (uint64_t)r;
    }
    free(own);
    return rc;
}

/* Bytes [off, end) of file i from memory (file byte `off` at mem[0]), each
 * once the reads have brought it. */
static int hash_mem(pinio__hasher *h, size_t i, EVP_MD_CTX *md, const uint8_t *mem,
                    uint64_t off, uint64_t end)
{
    for (uint64_t pos = off; pos < end;) {
        uint64_t avail = wait_for(h, i, pos);
        if (!avail)
            return -ECANCELED;
        if (avail > end)
            avail = end;
        while (pos < avail) {
            size_t n = avail - pos < HASH_CHUNK ? (size_t)(avail - pos) : HASH_CHUNK;
            EVP_DigestUpdate(md, mem + (pos - off), n);
            pos += n;
            if (pos < avail && aborted(h))
                return -ECANCELED;
        }
    }
    return 0;
}

static int hash_one(pinio__hasher *h, size_t i, EVP_MD_CTX *md, uint8_t *buf, pinio_diag *d)
{
    pinio__hash_file *f = &h->files[i];
    if (EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1)
        return -ENOMEM;
    pinio__hash_seg two[2] = { { 0, f->mem_from, NULL },
                               { f->mem_from, f->size - f->mem_from, f->mem } };
    const pinio__hash_seg *seg = f->nsegs ? f->segs : two;
    size_t nseg = f->nsegs ? f->nsegs : 2;
    int rc = 0;
    for (size_t k = 0; rc == 0 && k < nseg; k++) {
        uint64_t end = seg[k].off + seg[k].len;
        if (seg[k].mem)
            rc = hash_mem(h, i, md, seg[k].mem, seg[k].off, end);
        else
            rc = hash_pread(h, f, md, buf, seg[k].off, end, d);
    }
    if (rc < 0)
        return rc;
    unsigned int len = 0;
    return EVP_DigestFinal_ex(md, f->sha, &len) == 1 ? 0 : -ENOMEM;
}

static void *worker(void *arg)
{
    pinio__hasher *h = arg;
    pinio_diag d = {0};
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    uint8_t *buf = malloc(HASH_CHUNK);
    int rc = md && buf ? 0 : -ENOMEM;
    if (rc)
        pinio_diag_set(&d, rc, "sha256: out of memory");
    for (size_t i; rc == 0 && (i = atomic_fetch_add(&h->next, 1)) < h->n;)
        rc = hash_one(h, i, md, buf, &d);
    if (rc && rc != -ECANCELED)
        fail(h, rc, &d);
    free(buf);
    EVP_MD_CTX_free(md);
    return NULL;
}

int pinio__hasher_start(pinio__hasher **out, pinio__hash_file *files, size_t n, unsigned threads)
{
    pinio__hasher *h = calloc(1, sizeof(*h));
    if (!h || !(h->upto = calloc(n ? n : 1, sizeof(*h->upto))) ||
        !(h->threads = calloc(threads ? threads : 1, sizeof(*h->threads)))) {
        if (h)
            free(h->upto);
        free(h);
        return -ENOMEM;
    }
    h->files = files;
    h->n = n;
    atomic_init(&h->next, 0);
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    /* Fewer threads than asked (or none) is fine: whatever no worker took
     * is hashed in pinio__hasher_finish(), after the reads. */
    while (h->nthreads < threads && (size_t)h->nthreads < n &&
           pthread_create(&h->threads[h->nthreads], NULL, worker, h) == 0)
        h->nthreads++;
    *out = h;
    return 0;
}

void pinio__hasher_advance(pinio__hasher *h, size_t i, uint64_t upto)
{
    if (!h || i >= h->n)
        return;
    pthread_mutex_lock(&h->mu);
    if (upto > h->upto[i]) {
        h->upto[i] = upto;
        pthread_cond_broadcast(&h->cv); /* workers wait on different files */
    }
    pthread_mutex_unlock(&h->mu);
}

static int end(pinio__hasher *h, bool abort, pinio_diag *diag)
{
    pthread_mutex_lock(&h->mu);
    h->all_done = true;
    h->aborted = h->aborted || abort; /* a worker's error already stopped the rest */
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    if (!abort)
        worker(h); /* files no thread took (all of them without threads) */
    for (unsigned t = 0; t < h->nthreads; t++)
        pthread_join(h->threads[t], NULL);
    int rc = abort ? -ECANCELED : h->rc;
    if (rc && !abort && diag)
        *diag = h->diag;
    pthread_cond_destroy(&h->cv);
    pthread_mutex_destroy(&h->mu);
    free(h->threads);
    free(h->upto);
    free(h);
    return rc;
}

int pinio__hasher_finish(pinio__hasher *h, pinio_diag *diag)
{
    return end(h, false, diag);
}

void pinio__hasher_abort(pinio__hasher *h)
{
    if (h)
        end(h, true, NULL);
}
