/* Soak: load and release the same sharded checkpoint many times in one
 * process, every other time with a random filter, and check that nothing
 * accumulates: open descriptors, pinned (VmPin) and locked (VmLck) memory
 * must return to their baseline exactly, RSS may not grow by more than a
 * small allocator slack. Every load's bytes are checked.
 *
 * Iterations: PINIO_SOAK_ITERS (default 100; the long form is 1000). The
 * baseline is taken after a few warm-up loads: the first loads create
 * one-off state (the NUMA topology cache, libc arenas) that is not a leak.
 * Under AddressSanitizer RSS is not compared (its quarantine holds freed
 * memory on purpose); LeakSanitizer checks the heap instead.
 * Plain executable: prints the figures, exits 0 (pass) or 1. */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "pinio/pinio.h"
#include "relia_util.h"

#if defined(__SANITIZE_ADDRESS__)
#define RELIA_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RELIA_ASAN 1
#endif
#endif
#ifndef RELIA_ASAN
#define RELIA_ASAN 0
#endif

#define WARMUP 5
#define RSS_SLACK_KB 4096

/* Names are model.layers.L.PART: prefixes, globs, exact names, no match. */
static const char *const filter_pool[] = { "model.layers.0", "model.layers.1", "*.weight",
                                           "model.layers.[23].*", "*proj*", "model",
                                           "model.layers.2.mlp.up_proj.weight" };

static int load_once(const char *path, unsigned *rng, size_t *loaded)
{
    pinio_load_opts o;
    pinio_load_opts_default(&o);
    const char *filters[2];
    *rng = *rng * 1103515245u + 12345u;
    if ((*rng >> 16) & 1) {
        filters[0] = filter_pool[(*rng >> 17) % (sizeof filter_pool / sizeof filter_pool[0])];
        filters[1] = filter_pool[(*rng >> 21) % (sizeof filter_pool / sizeof filter_pool[0])];
        o.filters = filters;
        o.nfilters = 2;
    }
    pinio_checkpoint *cp = NULL;
    pinio_diag d;
    int rc = pinio_load(&path, 1, &o, &cp, &d);
    if (rc) {
        fprintf(stderr, "load: %s\n", d.msg);
        return -1;
    }
    for (size_t i = 0; i < pinio_checkpoint_count(cp); i++) {
        const pinio_tensor *t = pinio_checkpoint_tensor(cp, i);
        if (!pinio_gen_verify(RELIA_SEED, t->name, 0, t->data, t->nbytes, NULL)) {
            fprintf(stderr, "wrong bytes in %s\n", t->name);
            pinio_checkpoint_release(cp);
            return -1;
        }
    }
    *loaded += pinio_checkpoint_count(cp);
    pinio_checkpoint_release(cp);
    return 0;
}

int main(void)
{
    const char *e = getenv("PINIO_SOAK_ITERS");
    long iters = e ? strtol(e, NULL, 10) : 100;
    if (iters < WARMUP + 1)
        iters = WARMUP + 1;
    char tmpl[256], path[300];
    if (relia_gen("soak", tmpl, path, sizeof path, 6u << 20, 24, 3)) {
        printf("soak: cannot generate the checkpoint\n");
        return 1;
    }
    unsigned rng = 7;
    size_t loaded = 0;
    int fail = 0;
    relia_proc before = { 0 };
    for (long i = 0; i < iters && !fail; i++) {
        if (i == WARMUP)
            before = relia_proc_now();
        fail = load_once(path, &rng, &loaded) != 0;
    }
    relia_proc after = relia_proc_now();
    relia_rm(tmpl);
    printf("soak: %ld loads (%zu tensors checked); before/after: RSS %ld/%ld kB, VmPin %ld/%ld kB, "
           "VmLck %ld/%ld kB, fds %ld/%ld%s\n",
           iters, loaded, before.rss_kb, after.rss_kb, before.pin_kb, after.pin_kb, before.lck_kb,
           after.lck_kb, before.fds, after.fds, RELIA_ASAN ? " (ASan: RSS not compared)" : "");
    if (fail) {
        printf("soak: FAIL: a load failed\n");
        return 1;
    }
    if (after.fds != before.fds || after.pin_kb != before.pin_kb || after.lck_kb != before.lck_kb) {
        printf("soak: FAIL: descriptors or pinned/locked memory grew\n");
        return 1;
    }
    if (!RELIA_ASAN && after.rss_kb > before.rss_kb + RSS_SLACK_KB) {
        printf("soak: FAIL: RSS grew by %ld kB (slack %d kB)\n", after.rss_kb - before.rss_kb,
               RSS_SLACK_KB);
        return 1;
    }
    printf("soak: pass\n");
    return 0;
}
