/* Helpers shared by the loader's end-to-end tests (test_load.c,
 * test_memory.c): a temporary directory per test on disk or tmpfs,
 * generated checkpoints, and the every-byte check against the generator. */
#ifndef PINIO_TESTS_LOAD_HELPERS_H
#define PINIO_TESTS_LOAD_HELPERS_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pinio/gen.h"
#include "pinio/load.h"
#include "tests/common/helpers.h"

#define SEED 11

static char tmpdir[256];

static inline void make_dir(const char *base)
{
    cr_assert_eq(t_tmpdir(base, "load", tmpdir, sizeof(tmpdir)), 0, "mkdtemp in %s", base);
}

static inline void rm_rf(const char *dir)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

static inline void disk_setup(void)
{
    make_dir("/var/tmp");
}

static inline void shm_setup(void)
{
    make_dir("/dev/shm");
}

static inline void teardown(void)
{
    if (tmpdir[0])
        rm_rf(tmpdir);
}

static inline void gen(const char *out, uint64_t size, size_t tensors, unsigned shards)
{
    static const pinio_dtype dts[] = { PINIO_DTYPE_BF16, PINIO_DTYPE_F32, PINIO_DTYPE_U8,
                                       PINIO_DTYPE_F8_E4M3, PINIO_DTYPE_F64 };
    pinio_gen_opts o;
    pinio_gen_opts_default(&o);
    o.size = size;
    o.tensors = tensors;
    o.dtypes = dts;
    o.ndtypes = 5;
    o.shards = shards;
    o.seed = SEED;
    pinio_diag d = { 0 };
    cr_assert_eq(pinio_gen_write(out, &o, NULL, &d), 0, "gen: %s", d.msg);
}

static inline char *path_in(const char *name)
{
    static char bufs[4][512];
    static int next;
    char *b = bufs[next++ % 4];
    snprintf(b, sizeof(bufs[0]), "%s/%s", tmpdir, name);
    return b;
}

/* Every loaded tensor is verified byte for byte against the generator. */
static inline void check_all(pinio_checkpoint *cp, size_t want)
{
    cr_assert_eq(pinio_checkpoint_count(cp), want);
    uint64_t sum = 0;
    for (size_t i = 0; i < want; i++) {
        const pinio_tensor *t = pinio_checkpoint_tensor(cp, i);
        cr_assert_not_null(t);
        cr_assert(pinio_gen_verify(SEED, t->name, 0, t->data, t->nbytes, NULL), "tensor %s differs",
                  t->name);
        cr_assert_eq(pinio_checkpoint_find(cp, t->name), t);
        sum += t->nbytes;
    }
    cr_assert_null(pinio_checkpoint_tensor(cp, want));
    pinio_load_report r;
    pinio_checkpoint_report(cp, &r);
    cr_assert_eq(r.bytes, sum);
    cr_assert_eq(r.tensors, want);
    if (!r.files_mapped)
        cr_assert_geq(r.read_bytes, r.bytes);
}

static inline int load1(const char *path, const pinio_load_opts *o, pinio_checkpoint **cp, pinio_diag *d)
{
    const char *paths[] = { path };
    return pinio_load(paths, 1, o, cp, d);
}

/* Loads `path` with `o`, asserting success, and fills `r` (optional) with
 * the report. Returns the checkpoint, owned by the caller. */
static inline pinio_checkpoint *load_ok(const char *path, const pinio_load_opts *o,
                                        pinio_load_report *r)
{
    pinio_checkpoint *cp = NULL;
    pinio_diag d = { 0 };
    cr_assert_eq(load1(path, o, &cp, &d), 0, "%s: %s", path, d.msg);
    if (r)
        pinio_checkpoint_report(cp, r);
    return cp;
}

#endif
