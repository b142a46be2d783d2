/* Concurrency: NTHREADS threads each take zero-copy views of every tensor of
 * one loaded checkpoint, then, while the main thread releases the
 * checkpoint, keep cloning, splitting, reading and freeing those views. The
 * last view freed, on whichever thread, frees the arena. Run under
 * ThreadSanitizer (meson suite 'concurrency'): any race on the checkpoint's
 * or the arena's reference counts, or a use after free of the arena, is a
 * report (halt_on_error) or a wrong byte here.
 * Plain executable (Criterion's runtime is not TSan-instrumented): prints one
 * line, exits 0 (pass) or 1. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pinio/pinio.h"
#include "relia_util.h"

#define NTHREADS 4
#define ROUNDS 30

static pinio_checkpoint *cp;
static size_t ntensors;
static char **names; /* copies: the checkpoint's names die with it */
static pthread_barrier_t got_views;
static atomic_int failures;

static bool check_view(pinio_bytes *b, const char *name, size_t off)
{
    const uint8_t *p = NULL;
    if (pinio_bytes_data(b, PINIO_ACCESS_ZERO_COPY, &p, NULL))
        return false;
    return pinio_gen_verify(RELIA_SEED, name, off, p, pinio_bytes_len(b), NULL);
}

static void *worker(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    pinio_bytes **v = calloc(ntensors, sizeof(*v));
    int bad = v == NULL;
    for (size_t i = 0; !bad && i < ntensors; i++)
        bad = pinio_checkpoint_tensor_bytes(cp, i, &v[i]) != 0;
    /* From here on the checkpoint may be gone: only the views hold the arena. */
    pthread_barrier_wait(&got_views);
    for (unsigned r = 0; !bad && r < ROUNDS; r++) {
        size_t i = (id * 7 + r) % ntensors;
        pinio_bytes *c = NULL, *right = NULL;
        if (pinio_bytes_clone(v[i], PINIO_ACCESS_ZERO_COPY, &c, NULL)) {
            bad = 1;
            break;
        }
        size_t half = pinio_bytes_len(c) / 2;
        bad = pinio_bytes_split(c, half, PINIO_ACCESS_ZERO_COPY, &right, NULL) != 0 ||
              !check_view(c, names[i], 0) || !check_view(right, names[i], half);
        pinio_bytes_free(c);
        pinio_bytes_free(right);
    }
    /* Threads free their views in different orders, so the last reference
     * drops on a different thread from run to run. */
    for (size_t k = 0; v && k < ntensors; k++) {
        size_t i = id & 1 ? k : ntensors - 1 - k;
        if (v[i] && !bad && !check_view(v[i], names[i], 0))
            bad = 1;
        pinio_bytes_free(v[i]);
    }
    free(v);
    if (bad)
        atomic_fetch_add(&failures, 1);
    return NULL;
}

int main(void)
{
    char tmpl[256], path[300];
    if (relia_gen("conc", tmpl, path, sizeof path, 2u << 20, 12, 2)) {
        printf("concurrent: cannot generate the checkpoint\n");
        return 1;
    }
    int rc = 1;
    for (int round = 0; round < 4; round++) {
        const char *p = path;
        pinio_diag d;
        if (pinio_load(&p, 1, NULL, &cp, &d)) {
            printf("concurrent: load: %s\n", d.msg);
            goto out;
        }
        ntensors = pinio_checkpoint_count(cp);
        names = calloc(ntensors, sizeof(*names));
        for (size_t i = 0; names && i < ntensors; i++)
            names[i] = strdup(pinio_checkpoint_tensor(cp, i)->name);
        pthread_barrier_init(&got_views, NULL, NTHREADS + 1);
        pthread_t th[NTHREADS];
        for (unsigned t = 0; t < NTHREADS; t++)
            pthread_create(&th[t], NULL, worker, (void *)(uintptr_t)t);
        pthread_barrier_wait(&got_views);
        pinio_checkpoint_release(cp); /* races with the workers' view traffic */
        cp = NULL;
        for (unsigned t = 0; t < NTHREADS; t++)
            pthread_join(th[t], NULL);
        pthread_barrier_destroy(&got_views);
        for (size_t i = 0; names && i < ntensors; i++)
            free(names[i]);
        free(names);
        names = NULL;
    }
    int f = atomic_load(&failures);
    printf("concurrent: %d threads x 4 loads, %d failures\n", NTHREADS, f);
    rc = f != 0;
out:
    relia_rm(tmpl);
    return rc;
}
