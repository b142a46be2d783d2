/* SHA-256 of checkpoint files while their bytes arrive (contract in
 * src/hash_internal.h). One thread hashes the files in order; the loader
 * publishes, per file, how far its bytes have arrived. */
#include <errno.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "src/hash_internal.h"

/* Bytes hashed between checks for an abort, and the pread buffer size. */
#define HASH_CHUNK ((size_t)8 << 20)

struct pinio__hasher {
    pinio__hash_file *files;
    size_t n;
    uint64_t *upto; /* per file, under mu */
    bool all_done, aborted; /* under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    bool threaded;
    int rc; /* the hashing side's first error; read after the join */
    pinio_diag diag;
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

static int hash_one(pinio__hasher *h, size_t i, EVP_MD_CTX *md, uint8_t *buf)
{
    pinio__hash_file *f = &h->files[i];
    if (EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1)
        return -ENOMEM;
    for (uint64_t off = 0; off < f->mem_from;) {
        if (aborted(h))
            return -ECANCELED;
        size_t want = f->mem_from - off < HASH_CHUNK ? (size_t)(f->mem_from - off) : HASH_CHUNK;
        ssize_t r = pread(f->fd, buf, want, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            int rc = r < 0 ? -errno : PINIO_ECHANGED;
            pinio_diag_set(&h->diag, rc, "%s: sha256: read failed at offset %llu: %s", f->path,
                           (unsigned long long)off, pinio_strerror(rc));
            return rc;
        }
        EVP_DigestUpdate(md, buf, (size_t)r);
        off += (uint64_t)r;
    }
    for (uint64_t pos = f->mem_from; pos < f->size;) {
        uint64_t avail = wait_for(h, i, pos);
        if (!avail)
            return -ECANCELED;
        if (avail > f->size)
            avail = f->size;
        while (pos < avail) {
            size_t n = avail - pos < HASH_CHUNK ? (size_t)(avail - pos) : HASH_CHUNK;
            EVP_DigestUpdate(md, f->mem + (pos - f->mem_from), n);
            pos += n;
            if (pos < avail && aborted(h))
                return -ECANCELED;
        }
    }
    unsigned int len = 0;
    return EVP_DigestFinal_ex(md, f->sha, &len) == 1 ? 0 : -ENOMEM;
}

static void *hash_all(void *arg)
{
    pinio__hasher *h = arg;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    uint8_t *buf = malloc(HASH_CHUNK);
    int rc = md && buf ? 0 : -ENOMEM;
    for (size_t i = 0; rc == 0 && i < h->n; i++)
        rc = hash_one(h, i, md, buf);
    if (rc == -ENOMEM && !h->diag.code)
        pinio_diag_set(&h->diag, rc, "sha256: out of memory");
    h->rc = rc;
    free(buf);
    EVP_MD_CTX_free(md);
    return NULL;
}

int pinio__hasher_start(pinio__hasher **out, pinio__hash_file *files, size_t n, bool threaded)
{
    pinio__hasher *h = calloc(1, sizeof(*h));
    if (!h || !(h->upto = calloc(n ? n : 1, sizeof(*h->upto)))) {
        free(h);
        return -ENOMEM;
    }
    h->files = files;
    h->n = n;
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    /* Without a thread (one CPU, or none to be had) the work happens in
     * pinio__hasher_finish(), after the reads, as it always did. */
    h->threaded = threaded && pthread_create(&h->thread, NULL, hash_all, h) == 0;
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
        pthread_cond_signal(&h->cv);
    }
    pthread_mutex_unlock(&h->mu);
}

static int end(pinio__hasher *h, bool abort, pinio_diag *diag)
{
    pthread_mutex_lock(&h->mu);
    h->all_done = true;
    h->aborted = abort;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    if (h->threaded)
        pthread_join(h->thread, NULL);
    else if (!abort)
        hash_all(h);
    int rc = abort ? -ECANCELED : h->rc;
    if (rc && !abort && diag)
        *diag = h->diag;
    pthread_cond_destroy(&h->cv);
    pthread_mutex_destroy(&h->mu);
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
