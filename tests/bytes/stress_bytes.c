/*
 * Concurrency stress for the bytes layer (plain executable, run under TSan):
 * 1. threads clone, slice, split and release views of one buffer, a million
 *    operations in total; afterwards the buffer was freed exactly once;
 * 2. two threads race the first materialization of one file-backed
 *    pinio_bytes: one read, both see the same buffer;
 * 3. two threads race the copy-on-write of one shared pinio_bytes while a
 *    third reads it: one copy, both writers get the same buffer.
 * Prints one line per part; exit 0 on success, 1 on failure.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pinio/bytes.h"
#include "src/bytes/file_internal.h"
#include "helpers.h"
#include "tests/common/check.h"

enum { THREADS = 4, TOTAL_OPS = 1000000, BUF = 4096, RACES = 200 };

struct view_job {
    pinio_view root; /* a clone owned by the thread */
    unsigned seed;
    long bad;
};

static void *view_worker(void *arg)
{
    struct view_job *j = arg;
    unsigned s = j->seed;
    pinio_view held[8] = { 0 };
    for (long i = 0; i < TOTAL_OPS / THREADS; i++) {
        s = s * 1103515245u + 12345u;
        size_t k = (s >> 8) % 8;
        size_t a = (s >> 12) % BUF, b = (s >> 20) % BUF;
        size_t lo = a < b ? a : b, hi = a < b ? b : a;
        switch ((s >> 4) % 4) {
        case 0:
            pinio_view_release(&held[k]);
            held[k] = pinio_view_clone(&j->root);
            break;
        case 1:
            pinio_view_release(&held[k]);
            if (pinio_view_slice(&j->root, lo, hi, &held[k]) != 0)
                j->bad++;
            break;
        case 2: {
            pinio_view head;
            if (pinio_view_split_to(&held[k], held[k].len / 2, &head) != 0)
                j->bad++;
            if (head.len && head.ptr[0] != (uint8_t)((head.ptr - j->root.ptr) * 131u + 5))
                j->bad++;
            pinio_view_release(&head);
            break;
        }
        default:
            pinio_view_release(&held[k]);
            break;
        }
    }
    for (size_t k = 0; k < 8; k++)
        pinio_view_release(&held[k]);
    pinio_view_release(&j->root);
    return NULL;
}

static void part_views(void)
{
    atomic_int frees = 0;
    pinio_view root = counted_view(BUF, 5, &frees);
    pthread_t t[THREADS];
    struct view_job jobs[THREADS];
    for (int i = 0; i < THREADS; i++) {
        jobs[i] = (struct view_job){ .root = pinio_view_clone(&root), .seed = 77u + (unsigned)i };
        pthread_create(&t[i], NULL, view_worker, &jobs[i]);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        CHECK(jobs[i].bad == 0, "thread %d saw %ld bad results", i, jobs[i].bad);
    }
    CHECK(pinio_view_is_unique(&root), "root is not the only reference after the threads");
    CHECK(atomic_load(&frees) == 0, "freed while referenced");
    pinio_view_release(&root);
    CHECK(atomic_load(&frees) == 1, "freed %d times", atomic_load(&frees));
    printf("views: %d threads, %d operations, frees=%d\n", THREADS, TOTAL_OPS, atomic_load(&frees));
}

struct race {
    pthread_barrier_t *bar;
    pinio_bytes *b;
    int write;
    const uint8_t *got;
    int rc;
};

static void *racer(void *arg)
{
    struct race *r = arg;
    pthread_barrier_wait(r->bar);
    if (r->write) {
        uint8_t *p = NULL;
        r->rc = pinio_bytes_data_mut(r->b, PINIO_ACCESS_COPY, &p, NULL);
        r->got = p;
    } else {
        r->rc = pinio_bytes_data(r->b, PINIO_ACCESS_COPY, &r->got, NULL);
    }
    return NULL;
}

/* Runs n racers on b; returns 1 when all succeeded and writers agree. */
static void race(pinio_bytes *b, const int *writes, int n, const uint8_t **got)
{
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, (unsigned)n);
    pthread_t t[3];
    struct race r[3];
    for (int i = 0; i < n; i++) {
        r[i] = (struct race){ .bar = &bar, .b = b, .write = writes[i] };
        pthread_create(&t[i], NULL, racer, &r[i]);
    }
    for (int i = 0; i < n; i++) {
        pthread_join(t[i], NULL);
        CHECK(r[i].rc == 0, "racer %d: %d", i, r[i].rc);
        got[i] = r[i].got;
    }
    pthread_barrier_destroy(&bar);
}

static void part_materialize(void)
{
    char *path = make_temp_file("/tmp", 1 << 16, 9);
    CHECK(path != NULL, "temp file");
    if (!path)
        return;
    pinio_file *f;
    CHECK(pinio_file_open(&f, path, NULL) == 0, "open");
    for (int i = 0; i < RACES; i++) {
        pinio_bytes *b;
        CHECK(pinio_bytes_from_file(&b, f, 100, 30000, NULL) == 0, "window");
        const int writes[2] = { 0, 0 };
        const uint8_t *got[2];
        race(b, writes, 2, got);
        CHECK(got[0] == got[1], "two readers got two buffers");
        CHECK(check_pattern(got[0], 100, 30000, 9), "contents");
        pinio_bytes_free(b);
    }
    uint64_t calls;
    pinio__file_stats(f, &calls, NULL);
    CHECK(calls == RACES, "%llu reads for %d windows", (unsigned long long)calls, RACES);
    printf("materialize: %d races, %llu reads\n", RACES, (unsigned long long)calls);
    pinio_file_release(f);
    remove_temp_file(path);
}

static void part_cow(void)
{
    int copies = 0;
    for (int i = 0; i < RACES; i++) {
        atomic_int frees = 0;
        pinio_view v = counted_view(BUF, 1, &frees);
        const uint8_t *buf = v.ptr;
        pinio_view keep = pinio_view_clone(&v); /* makes the memory shared: writes must copy */
        pinio_bytes *b;
        CHECK(pinio_bytes_from_view(&b, &v, PINIO_PROP_FILE) == 0, "from_view");
        const int writes[3] = { 1, 1, 0 };
        const uint8_t *got[3];
        race(b, writes, 3, got);
        CHECK(got[0] == got[1], "two writers got two copies");
        CHECK(got[0] != buf, "a shared buffer was written in place");
        CHECK(got[2] == buf || got[2] == got[0], "reader saw a third buffer");
        copies += got[0] != buf;
        const uint8_t *now;
        CHECK(pinio_bytes_data(b, PINIO_ACCESS_ZERO_COPY, &now, NULL) == 0 && now == got[0],
              "reads after the copy see it");
        CHECK(check_pattern(now, 0, BUF, 1), "copy contents");
        pinio_bytes_free(b);
        pinio_view_release(&keep);
        CHECK(atomic_load(&frees) == 1, "source freed %d times", atomic_load(&frees));
    }
    printf("cow: %d races, %d copies\n", RACES, copies);
}

int main(void)
{
    part_views();
    part_materialize();
    part_cow();
    printf("%s\n", t_failures ? "FAILED" : "ok");
    return t_failures ? 1 : 0;
}
