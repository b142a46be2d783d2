/*
 * --verify for a stream: the SHA-256 of each input file, whatever the sink.
 *
 * Why not the resident load's hasher threads (src/load/hash.c): they hash
 * from memory that stays put until the load ends, while a stream's slot is
 * overwritten as soon as the sink is done with it. Here the landed reads
 * are queued, in landing order, to one hashing thread, and the stream
 * waits for that thread to be past a slot's last read before it reads
 * into the slot again (pinio__sverify_wait()), as it waits for the sink.
 * The bytes a read brought are hashed where they landed, so a byte flipped
 * on the way in changes the digest; what no read brought (the header,
 * unselected tensors, alignment tails) is read again from the file, as the
 * resident --verify does (src/load/verify.c). The digest is OpenSSL's
 * SHA-256, the same as the hasher's.
 *
 * Why one thread: one SHA-256 stream cannot be split, and a stream reads
 * its files one after the other, so a second thread would only wait. It
 * takes the hashing (about 1 GB/s per core) off the thread that issues the
 * reads and feeds the sink. With one CPU there is no thread: the landed
 * callback hashes in place, which the slot bound makes safe as well.
 */
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "src/stream/verify_internal.h"

/* Buffer of the re-reads (gaps and tails). */
#define REREAD_CHUNK ((size_t)1 << 20)

typedef struct vfile {
    EVP_MD_CTX *md;
    uint64_t pos;  /* bytes [0, pos) hashed */
} vfile;

/* A landed read waiting to be hashed. */
typedef struct vitem {
    const pinio_plan_read *r;
    const uint8_t *mem;
} vitem;

struct pinio__sverify {
    const pinio_plan *plan;
    vfile *f;
    size_t n;
    uint8_t *buf;  /* REREAD_CHUNK bytes, allocated at the first re-read */
    uint64_t landed, reread;
    /* The queue: items [done, queued) wait; one per plan read at most. */
    vitem *q;
    size_t cap, queued, done;   /* under mu */
    bool thread, stop;          /* stop: under mu */
    int rc;                     /* the thread's first error, under mu */
    pinio_diag diag;            /* its message, under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t worker;
};

static int hash_read(pinio__sverify *v, const pinio_plan_read *r, const uint8_t *mem,
                     pinio_diag *diag);

static void *hash_worker(void *arg)
{
    pinio__sverify *v = arg;
    pthread_mutex_lock(&v->mu);
    for (;;) {
        while (!v->stop && v->done == v->queued)
            pthread_cond_wait(&v->cv, &v->mu);
        if (v->stop && v->done == v->queued)
            break;
        vitem it = v->q[v->done];
        pthread_mutex_unlock(&v->mu);
        pinio_diag d = { 0 };
        int rc = hash_read(v, it.r, it.mem, &d);
        pthread_mutex_lock(&v->mu);
        if (rc < 0 && !v->rc) {
            v->rc = rc;
            v->diag = d;
        }
        v->done++;
        pthread_cond_broadcast(&v->cv);
        if (v->rc)
            break; /* waiters see rc; nothing more is hashed */
    }
    pthread_mutex_unlock(&v->mu);
    return NULL;
}

int pinio__sverify_start(pinio__sverify **out, const pinio_plan *plan)
{
    pinio_plan_info pi;
    pinio_plan_get_info(plan, &pi);
    pinio__sverify *v = calloc(1, sizeof(*v));
    if (!v || !(v->f = calloc(pi.files ? pi.files : 1, sizeof(*v->f)))) {
        free(v);
        return -ENOMEM;
    }
    v->plan = plan;
    v->n = pi.files;
    v->cap = pi.reads;
    pthread_mutex_init(&v->mu, NULL);
    pthread_cond_init(&v->cv, NULL);
    for (size_t i = 0; i < v->n; i++) {
        v->f[i].md = EVP_MD_CTX_new();
        if (!v->f[i].md || EVP_DigestInit_ex(v->f[i].md, EVP_sha256(), NULL) != 1) {
            pinio__sverify_free(v);
            return -ENOMEM;
        }
    }
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus >= 2 && v->cap) {
        v->q = calloc(v->cap, sizeof(*v->q));
        v->thread = v->q && pthread_create(&v->worker, NULL, hash_worker, v) == 0;
        if (!v->thread) { /* hash in place instead */
            free(v->q);
            v->q = NULL;
        }
    }
    *out = v;
    return 0;
}

/* Stops the thread once it has hashed what is queued (all of it unless it
 * failed). */
static void join(pinio__sverify *v)
{
    if (!v->thread)
        return;
    pthread_mutex_lock(&v->mu);
    v->stop = true;
    pthread_cond_broadcast(&v->cv);
    pthread_mutex_unlock(&v->mu);
    pthread_join(v->worker, NULL);
    v->thread = false;
}

void pinio__sverify_free(pinio__sverify *v)
{
    if (!v)
        return;
    join(v);
    pthread_cond_destroy(&v->cv);
    pthread_mutex_destroy(&v->mu);
    free(v->q);
    for (size_t i = 0; i < v->n; i++) {
        EVP_MD_CTX_free(v->f[i].md);
    }
    free(v->f);
    free(v->buf);
    free(v);
}

/* Hashes file `i` from its position up to `end`, read again from the file. */
static int reread(pinio__sverify *v, size_t i, uint64_t end, pinio_diag *diag)
{
    vfile *f = &v->f[i];
    const char *path = pinio_plan_file_at(v->plan, i)->path;
    if (f->pos >= end)
        return 0;
    /* The plan's descriptor, the file the header was validated from (the
     * path may name another file by now), read with pread as the plan
     * allows: no descriptor of our own, so a checkpoint of many shards
     * needs none more for --verify. */
    if (!v->buf && !(v->buf = malloc(REREAD_CHUNK)))
        return -ENOMEM;
    while (f->pos < end) {
        size_t want = end - f->pos < REREAD_CHUNK ? (size_t)(end - f->pos) : REREAD_CHUNK;
        /* An object's bytes come by a ranged GET of the validated version. */
        int64_t got = pinio_plan_file_read(v->plan, i, v->buf, want, f->pos, diag);
        if (got < 0)
            return (int)got;
        if (got == 0) {
            pinio_diag_set_at(diag, -EIO, path, f->pos, "verify: the file got shorter");
            return -EIO;
        }
        EVP_DigestUpdate(f->md, v->buf, (size_t)got);
        f->pos += (uint64_t)got;
        v->reread += (uint64_t)got;
    }
    return 0;
}

static int hash_read(pinio__sverify *v, const pinio_plan_read *r, const uint8_t *mem,
                     pinio_diag *diag)
{
    vfile *f = &v->f[r->file];
    uint64_t size = pinio_plan_file_at(v->plan, r->file)->size;
    uint64_t end = r->offset + r->need < size ? r->offset + r->need : size;
    int rc = reread(v, r->file, r->offset < end ? r->offset : end, diag);
    if (rc == 0 && end > f->pos) {
        EVP_DigestUpdate(f->md, mem + (f->pos - r->offset), (size_t)(end - f->pos));
        v->landed += end - f->pos;
        f->pos = end;
    }
    return rc;
}

/* The thread's error, if any, into `diag` (mu held). */
static int thread_rc(pinio__sverify *v, pinio_diag *diag)
{
    if (v->rc && diag)
        *diag = v->diag;
    return v->rc;
}

int pinio__sverify_landed(pinio__sverify *v, const pinio_plan_read *r, const uint8_t *mem,
                          uint64_t *ticket, pinio_diag *diag)
{
    if (!v->thread) {
        *ticket = 0;
        return hash_read(v, r, mem, diag);
    }
    pthread_mutex_lock(&v->mu);
    int rc = thread_rc(v, diag);
    if (rc == 0 && v->queued == v->cap) { /* more landings than reads: a broken caller */
        rc = -EOVERFLOW;
        pinio_diag_set(diag, rc, "verify: more reads landed than the plan has");
    }
    if (rc == 0) {
        v->q[v->queued++] = (vitem){ r, mem };
        *ticket = v->queued;
        pthread_cond_broadcast(&v->cv);
    }
    pthread_mutex_unlock(&v->mu);
    return rc;
}

int pinio__sverify_wait(pinio__sverify *v, uint64_t ticket, pinio_diag *diag)
{
    if (!v->thread)
        return 0;
    pthread_mutex_lock(&v->mu);
    while (!v->rc && v->done < ticket)
        pthread_cond_wait(&v->cv, &v->mu);
    int rc = thread_rc(v, diag);
    pthread_mutex_unlock(&v->mu);
    return rc;
}

int pinio__sverify_finish(pinio__sverify *v, const pinio_stream_opts *o, pinio_stream_report *rep,
                          pinio_diag *diag)
{
    join(v);
    int rc = thread_rc(v, diag); /* joined: no lock needed */
    for (size_t i = 0; rc == 0 && i < v->n; i++) {
        const pinio_plan_file *pf = pinio_plan_file_at(v->plan, i);
        rc = reread(v, i, pf->size, diag);
        uint8_t sha[EVP_MAX_MD_SIZE];
        unsigned len = 0;
        if (rc == 0 && EVP_DigestFinal_ex(v->f[i].md, sha, &len) != 1)
            rc = -ENOMEM;
        char hex[65] = "";
        for (unsigned b = 0; rc == 0 && b < 32 && b < len; b++)
            snprintf(hex + 2 * b, 3, "%02x", sha[b]);
        const char *want = rc == 0 && o->expected_sha256 && i < o->nexpected
                               ? o->expected_sha256[i]
                               : NULL;
        if (want && strcasecmp(want, hex) != 0) {
            rc = PINIO_EFORMAT;
            pinio_diag_set_at(diag, rc, pf->path, PINIO_DIAG_NO_OFFSET,
                              "sha256 mismatch: expected %s, got %s", want, hex);
            pinio_diag_set_index(diag, i);
        }
        if (rc == 0 && o->sha256_fn)
            o->sha256_fn(o->sha256_ctx, i, pf->path, hex);
    }
    if (rc == 0) {
        rep->verified = true;
        rep->verify_landed_bytes = v->landed;
        rep->verify_reread_bytes = v->reread;
    }
    return rc;
}
