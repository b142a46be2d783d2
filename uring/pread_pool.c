/* The last rung of the ladder: a small pool of threads calling pread(2), for
 * when io_uring_setup is refused (seccomp profiles such as Docker's default,
 * kernel.io_uring_disabled, old kernels). It mimics a ring: ops are queued,
 * workers complete them, and the engine reaps (user, res) pairs from a
 * completion queue on its own thread, so the read loop and the fault hook are
 * the same for every backend.
 *
 * A mutex + two condition variables are enough: each op is a large read
 * (request_size, 1 MiB by default), so queue overhead is negligible. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "ring_internal.h"

typedef struct pool_done {
    uint64_t user;
    int res;
} pool_done;

struct pinio_pread_pool {
    pthread_mutex_t mu;
    pthread_cond_t work_cv, done_cv;
    pinio__op *work;    /* FIFO of capacity `cap` */
    pool_done *done;    /* FIFO of capacity `cap` */
    unsigned cap;
    unsigned work_head, work_n;
    unsigned done_head, done_n;
    bool stop;
    unsigned nthreads;
    pthread_t *threads;
};

static void *worker(void *arg)
{
    struct pinio_pread_pool *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->work_n && !p->stop)
            pthread_cond_wait(&p->work_cv, &p->mu);
        if (p->stop)
            break;
        pinio__op op = p->work[p->work_head];
        p->work_head = (p->work_head + 1) % p->cap;
        p->work_n--;
        pthread_mutex_unlock(&p->mu);

        ssize_t r;
        do
            r = pread(op.fd, op.buf, op.len, (off_t)op.off);
        while (r < 0 && errno == EINTR);
        int res = r < 0 ? -errno : (int)r;

        pthread_mutex_lock(&p->mu);
        /* Cannot overflow: the engine keeps at most cap ops submitted+unreaped. */
        p->done[(p->done_head + p->done_n) % p->cap] = (pool_done){op.user, res};
        p->done_n++;
        pthread_cond_signal(&p->done_cv);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

void pinio__pread_pool_destroy(struct pinio_pread_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->work_cv);
    pthread_mutex_unlock(&p->mu);
    for (unsigned i = 0; i < p->nthreads; i++)
        pthread_join(p->threads[i], NULL);
    pthread_cond_destroy(&p->work_cv);
    pthread_cond_destroy(&p->done_cv);
    pthread_mutex_destroy(&p->mu);
    free(p->threads);
    free(p->work);
    free(p->done);
    free(p);
}

int pinio__pread_pool_create(struct pinio_pread_pool **out, unsigned threads, unsigned depth)
{
    struct pinio_pread_pool *p = calloc(1, sizeof *p);
    if (!p)
        return -ENOMEM;
    p->cap = depth;
    p->work = calloc(depth, sizeof *p->work);
    p->done = calloc(depth, sizeof *p->done);
    p->threads = calloc(threads, sizeof *p->threads);
    if (!p->work || !p->done || !p->threads) {
        free(p->work);
        free(p->done);
        free(p->threads);
        free(p);
        return -ENOMEM;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work_cv, NULL);
    pthread_cond_init(&p->done_cv, NULL);
    for (unsigned i = 0; i < threads; i++) {
        int e = pthread_create(&p->threads[i], NULL, worker, p);
        if (e) {
            pinio__pread_pool_destroy(p); /* joins the i threads started */
            return -e;
        }
        p->nthreads++;
    }
    *out = p;
    return 0;
}

void pinio__pread_pool_submit(struct pinio_pread_pool *p, const pinio__op *op)
{
    pthread_mutex_lock(&p->mu);
    p->work[(p->work_head + p->work_n) % p->cap] = *op;
    p->work_n++;
    pthread_cond_signal(&p->work_cv);
    pthread_mutex_unlock(&p->mu);
}

unsigned pinio__pread_pool_reap(struct pinio_pread_pool *p, unsigned min, unsigned max,
                                uint64_t *user, int *res)
{
    unsigned got = 0;
    pthread_mutex_lock(&p->mu);
    while (p->done_n < min)
        pthread_cond_wait(&p->done_cv, &p->mu);
    while (p->done_n && got < max) {
        user[got] = p->done[p->done_head].user;
        res[got] = p->done[p->done_head].res;
        p->done_head = (p->done_head + 1) % p->cap;
        p->done_n--;
        got++;
    }
    pthread_mutex_unlock(&p->mu);
    return got;
}
