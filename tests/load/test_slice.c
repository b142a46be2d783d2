/* Slices and split rules (plan.h #pinio_slice, #pinio_split_rule): every
 * rank's slice of random tensors (shapes, dtypes, dimensions, world sizes
 * 1-8) equals the chunk of the whole tensor computed here, byte for byte,
 * through the resident loader (pinned, mapped, cold, hot, disk and tmpfs)
 * and through pinio_plan_execute() + pinio_plan_gather() into a plain
 * buffer; chunk sizes match torch.chunk; a dimension-0 split reads its
 * slices and not much more; the over-read cap holds; bad rules say which
 * tensor. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/common/helpers.h"
#include "pinio/load.h"
#include "pinio/plan.h"
#include "pinio/save.h"

static char dir[256];

static void setup_disk(void)
{
    cr_assert_eq(t_tmpdir("/var/tmp", "slice", dir, sizeof(dir)), 0);
}

static void setup_shm(void)
{
    cr_assert_eq(t_tmpdir("/dev/shm", "slice", dir, sizeof(dir)), 0);
}

static void teardown(void)
{
    if (dir[0])
        t_rm_rf(dir);
    dir[0] = '\0';
}

/* A tensor of the test's checkpoints, with its bytes. */
typedef struct tt {
    char name[32];
    pinio_dtype dtype;
    unsigned rank;
    uint64_t shape[4];
    uint8_t *data;
    uint64_t nbytes;
} tt;

/* Copies `nbits` bits from bit `sbit` of `src` to bit `dbit` of `dst`, bit
 * by bit (least significant first): the reference for packed dtypes (F4,
 * F6), computed without the loader's byte arithmetic. */
static void copy_bits(uint8_t *dst, uint64_t dbit, const uint8_t *src, uint64_t sbit,
                      uint64_t nbits)
{
    if (dbit % 8 == 0 && sbit % 8 == 0 && nbits % 8 == 0) {
        memcpy(dst + dbit / 8, src + sbit / 8, nbits / 8);
        return;
    }
    for (uint64_t i = 0; i < nbits; i++) {
        uint64_t s = sbit + i, d = dbit + i;
        uint8_t bit = (uint8_t)((src[s / 8] >> (s % 8)) & 1);
        dst[d / 8] = (uint8_t)((dst[d / 8] & ~(1u << (d % 8))) | (unsigned)(bit << (d % 8)));
    }
}

static void fill(tt *t, uint64_t *rng)
{
    uint64_t n = pinio_dtype_bits(t->dtype);
    for (unsigned d = 0; d < t->rank; d++)
        n *= t->shape[d];
    n /= 8;
    t->nbytes = n;
    t->data = malloc(n ? n : 1);
    cr_assert_not_null(t->data);
    for (uint64_t i = 0; i < n; i++)
        t->data[i] = (uint8_t)t_rand(rng);
}

static void save(const char *path, const tt *ts, size_t n)
{
    pinio_save_tensor *st = calloc(n ? n : 1, sizeof(*st));
    for (size_t i = 0; i < n; i++)
        st[i] = (pinio_save_tensor){ .name = ts[i].name, .dtype = ts[i].dtype,
                                     .rank = ts[i].rank, .shape = ts[i].shape,
                                     .data = ts[i].data, .nbytes = ts[i].nbytes };
    pinio_save_opts so;
    pinio_save_opts_default(&so);
    so.no_sync = true;
    pinio_diag d = { 0 };
    cr_assert_eq(pinio_save(path, st, n, &so, NULL, &d), 0, "save: %s", d.msg);
    free(st);
}

/* Fills `ts` from `seed` and saves them as `file` in the test's folder (its path into `path`). */
static void save_filled(tt *ts, size_t n, uint64_t seed, const char *file, char *path, size_t cap)
{
    uint64_t rng = seed;
    for (size_t i = 0; i < n; i++)
        fill(&ts[i], &rng);
    snprintf(path, cap, "%s/%s", dir, file);
    save(path, ts, n);
}

/* The reference: torch.chunk(t, world, dim)[rank] computed from the whole
 * tensor, its shape into shape[] and its bytes into a malloc'd buffer. */
static uint8_t *ref_chunk(const tt *t, int dim, uint32_t rank, uint32_t world, uint64_t *shape,
                          uint64_t *nbytes)
{
    unsigned d = (unsigned)(dim < 0 ? dim + (int)t->rank : dim);
    uint64_t size = t->shape[d];
    uint64_t c = (size + world - 1) / world; /* torch: ceil(size / chunks) */
    uint64_t start = (uint64_t)rank * c < size ? (uint64_t)rank * c : size;
    uint64_t len = size - start < c ? size - start : c;
    uint64_t outer = 1, inner = pinio_dtype_bits(t->dtype); /* bits */
    for (unsigned k = 0; k < t->rank; k++) {
        shape[k] = k == d ? len : t->shape[k];
        if (k < d)
            outer *= t->shape[k];
        if (k > d)
            inner *= t->shape[k];
    }
    *nbytes = outer * len * inner / 8;
    uint8_t *out = calloc(*nbytes ? *nbytes : 1, 1);
    for (uint64_t o = 0; o < outer; o++)
        copy_bits(out, o * len * inner, t->data, (o * size + start) * inner, len * inner);
    return out;
}

static const pinio_dtype dtypes[] = { PINIO_DTYPE_BOOL,        PINIO_DTYPE_U8,
                                      PINIO_DTYPE_F8_E4M3,     PINIO_DTYPE_F8_E5M2,
                                      PINIO_DTYPE_F8_E8M0,     PINIO_DTYPE_F8_E4M3FNUZ,
                                      PINIO_DTYPE_F8_E5M2FNUZ, PINIO_DTYPE_I16,
                                      PINIO_DTYPE_BF16,        PINIO_DTYPE_F32,
                                      PINIO_DTYPE_F64,         PINIO_DTYPE_C64 };

/* Random tensors: ranks 0-4, dimensions 0-9 and now and then one long
 * enough that a slice's runs lie pages apart (separate reads to pack). */
static size_t random_tensors(tt *ts, size_t max, uint64_t *rng)
{
    size_t n = 3 + t_rand(rng) % (max - 3);
    for (size_t i = 0; i < n; i++) {
        tt *t = &ts[i];
        snprintf(t->name, sizeof(t->name), "layers.%zu.w", i);
        t->dtype = dtypes[t_rand(rng) % (sizeof(dtypes) / sizeof(dtypes[0]))];
        t->rank = (unsigned)(t_rand(rng) % 5);
        for (unsigned d = 0; d < t->rank; d++)
            t->shape[d] = t_rand(rng) % 10;
        if (t->rank && t->rank <= 2 && t_rand(rng) % 3 == 0)
            t->shape[t_rand(rng) % t->rank] = 100 + t_rand(rng) % 1500;
        if (t->rank && t_rand(rng) % 8 == 0)
            t->shape[t_rand(rng) % t->rank] = 0;
        fill(t, rng);
    }
    return n;
}

static void free_tensors(tt *ts, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(ts[i].data);
}

/* Split rules for `ts`: an exact-name rule per tensor of rank >= 1 (a
 * random dimension, negative half the time), a few left whole by a
 * "whole" rule or by no rule, then a catch-all that must not match those. */
static size_t random_rules(const tt *ts, size_t n, uint64_t *rng, pinio_split_rule *rules,
                           int *dims)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        dims[i] = PINIO_SPLIT_WHOLE;
        if (!ts[i].rank || t_rand(rng) % 6 == 0)
            continue;
        int d = (int)(t_rand(rng) % ts[i].rank);
        if (t_rand(rng) % 2)
            d -= (int)ts[i].rank;
        if (t_rand(rng) % 7 == 0)
            d = PINIO_SPLIT_WHOLE;
        rules[m++] = (pinio_split_rule){ .pattern = ts[i].name, .dim = d };
        dims[i] = d;
    }
    return m;
}

static void check_rank(const tt *ts, size_t n, const int *dims, const pinio_checkpoint *cp,
                       uint32_t rank, uint32_t world, const char *what)
{
    cr_assert_eq(pinio_checkpoint_count(cp), n, "%s", what);
    for (size_t i = 0; i < n; i++) {
        const pinio_tensor *t = pinio_checkpoint_find(cp, ts[i].name);
        cr_assert_not_null(t, "%s: %s missing", what, ts[i].name);
        uint64_t shape[4], nb;
        uint8_t *want;
        if (dims[i] == PINIO_SPLIT_WHOLE) {
            memcpy(shape, ts[i].shape, sizeof(shape));
            nb = ts[i].nbytes;
            want = malloc(nb ? nb : 1);
            memcpy(want, ts[i].data, nb);
        } else {
            want = ref_chunk(&ts[i], dims[i], rank, world, shape, &nb);
        }
        cr_assert_eq(t->rank, ts[i].rank);
        for (unsigned d = 0; d < t->rank; d++) {
            cr_assert_eq(t->shape[d], shape[d], "%s: %s rank %u/%u dim %d: shape[%u] %llu != %llu",
                         what, ts[i].name, rank, world, dims[i], d,
                         (unsigned long long)t->shape[d], (unsigned long long)shape[d]);
            cr_assert_eq(t->full_shape[d], ts[i].shape[d]);
        }
        cr_assert_eq(t->nbytes, nb, "%s: %s bytes", what, ts[i].name);
        cr_assert(nb == 0 || memcmp(t->data, want, nb) == 0,
                  "%s: %s (%s, rank %u of %u, dim %d) differs from the chunk", what, ts[i].name,
                  pinio_dtype_name(ts[i].dtype), rank, world, dims[i]);
        free(want);
    }
}

static void load_opts_split(pinio_load_opts *o, const pinio_split_rule *rules, size_t n,
                            uint32_t rank, uint32_t world)
{
    pinio_load_opts_default(o);
    o->split = rules;
    o->nsplit = n;
    o->rank = rank;
    o->world = world;
}

static void plan_opts_split(pinio_plan_opts *o, const pinio_split_rule *rules, size_t n,
                            uint32_t rank, uint32_t world)
{
    pinio_plan_opts_default(o);
    o->split = rules;
    o->nsplit = n;
    o->rank = rank;
    o->world = world;
}

static pinio_checkpoint *load_path(const char *path, const pinio_load_opts *o)
{
    const char *paths[] = { path };
    pinio_checkpoint *cp = NULL;
    pinio_diag d = { 0 };
    cr_assert_eq(pinio_load(paths, 1, o, &cp, &d), 0, "%s: %s", path, d.msg);
    return cp;
}

/* `path` loaded with the one explicit slice `sl`. */
static pinio_checkpoint *load_slice(const char *path, const pinio_slice *sl,
                                    pinio_memory_mode memory)
{
    pinio_load_opts o;
    pinio_load_opts_default(&o);
    o.slices = sl;
    o.nslices = 1;
    o.memory = memory;
    return load_path(path, &o);
}

static pinio_plan *plan_path(const char *path, const pinio_plan_opts *o)
{
    const char *paths[] = { path };
    pinio_plan *p = NULL;
    pinio_diag d = { 0 };
    cr_assert_eq(pinio_plan_create(&p, paths, 1, o, &d), 0, "%s: %s", path, d.msg);
    return p;
}

typedef struct variant {
    pinio_memory_mode memory;
    pinio_cache_policy cache;
    uint64_t align;
    const char *name;
} variant;

static const variant variants[] = {
    { PINIO_MEMORY_AUTO, PINIO_CACHE_AUTO, 0, "auto" },
    { PINIO_MEMORY_PINNED, PINIO_CACHE_COLD, 0, "pinned cold" },
    { PINIO_MEMORY_MAPPED, PINIO_CACHE_AUTO, 0, "mapped" },
    { PINIO_MEMORY_PINNED, PINIO_CACHE_HOT, 64, "pinned hot align 64" },
};

static void random_rounds(unsigned rounds, uint64_t seed)
{
    uint64_t rng = seed;
    char path[512];
    snprintf(path, sizeof(path), "%s/m.safetensors", dir);
    for (unsigned round = 0; round < rounds; round++) {
        tt ts[12];
        size_t n = random_tensors(ts, 12, &rng);
        save(path, ts, n);
        pinio_split_rule rules[12];
        int dims[12];
        size_t m = random_rules(ts, n, &rng, rules, dims);
        uint32_t world = 1 + (uint32_t)(t_rand(&rng) % 8);
        const variant *v = &variants[round % (sizeof(variants) / sizeof(variants[0]))];
        for (uint32_t r = 0; r < world; r++) {
            pinio_load_opts o;
            load_opts_split(&o, rules, m, r, world);
            o.memory = v->memory;
            o.cache = v->cache;
            o.tensor_align = v->align;
            pinio_checkpoint *cp = load_path(path, &o);
            char what[96];
            snprintf(what, sizeof(what), "round %u (%s, seed %llu)", round, v->name,
                     (unsigned long long)seed);
            check_rank(ts, n, dims, cp, r, world, what);
            if (v->align > 1)
                for (size_t i = 0; i < n; i++) {
                    const pinio_tensor *t = pinio_checkpoint_tensor(cp, i);
                    cr_assert(!t->nbytes || (uintptr_t)t->data % v->align == 0);
                }
            pinio_load_report rep;
            pinio_checkpoint_report(cp, &rep);
            uint64_t sum = 0;
            for (size_t i = 0; i < n; i++)
                sum += pinio_checkpoint_tensor(cp, i)->nbytes;
            cr_assert_eq(rep.bytes, sum);
            pinio_checkpoint_release(cp);
        }
        free_tensors(ts, n);
    }
}

Test(slice, random_disk, .init = setup_disk, .fini = teardown, .timeout = 120)
{
    random_rounds(40, 0x5eed1);
}

Test(slice, random_tmpfs, .init = setup_shm, .fini = teardown, .timeout = 120)
{
    random_rounds(24, 0x5eed2);
}

/* torch.chunk's sizes, as torch 1.13 returns them (len of each chunk), for
 * sizes and chunk counts where they are not all equal or fewer than asked. */
Test(slice, chunk_sizes_match_torch, .init = setup_disk, .fini = teardown)
{
    static const struct {
        uint64_t size;
        uint32_t world;
        uint64_t lens[8];
        unsigned nlens; /* torch.chunk's count; later ranks get empty slices */
    } cases[] = {
        { 0, 3, { 0, 0, 0 }, 3 },        { 1, 4, { 1 }, 1 },
        { 3, 2, { 2, 1 }, 2 },            { 5, 4, { 2, 2, 1 }, 3 },
        { 7, 3, { 3, 3, 1 }, 3 },         { 7, 4, { 2, 2, 2, 1 }, 4 },
        { 10, 4, { 3, 3, 3, 1 }, 4 },     { 10, 6, { 2, 2, 2, 2, 2 }, 5 },
        { 13, 8, { 2, 2, 2, 2, 2, 2, 1 }, 7 }, { 6, 4, { 2, 2, 2 }, 3 },
    };
    char path[512];
    snprintf(path, sizeof(path), "%s/c.safetensors", dir);
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        uint64_t rng = c + 1;
        tt t = { .name = "v", .dtype = PINIO_DTYPE_U8, .rank = 1, .shape = { cases[c].size } };
        fill(&t, &rng);
        save(path, &t, 1);
        uint64_t at = 0;
        for (uint32_t r = 0; r < cases[c].world; r++) {
            pinio_split_rule rule = { "v", 0 };
            pinio_plan_opts po;
            plan_opts_split(&po, &rule, 1, r, cases[c].world);
            pinio_plan *p = plan_path(path, &po);
            const pinio_plan_tensor *pt = pinio_plan_tensor_at(p, 0);
            uint64_t want = r < cases[c].nlens ? cases[c].lens[r] : 0;
            cr_assert_eq(pt->shape[0], want, "size %llu in %u, rank %u: %llu, torch %llu",
                         (unsigned long long)cases[c].size, cases[c].world, r,
                         (unsigned long long)pt->shape[0], (unsigned long long)want);
            bool whole = cases[c].world == 1 || want == cases[c].size;
            if (!whole) {
                cr_assert(pt->sliced);
                cr_assert_eq(pt->start[0], r < cases[c].nlens ? at : cases[c].size);
            }
            at += want;
            pinio_plan_free(p);
        }
        free(t.data);
    }
}

/* A destination for pinio_plan_execute(): one buffer laid out as the plan. */
static int buf_claim(void *ctx, size_t i, const pinio_plan_read *r, void **mem)
{
    (void)i;
    *mem = (uint8_t *)ctx + r->dest_offset;
    return 0;
}

/* Execute + gather into a plain buffer, the way a stream or MPI rank would:
 * 2-D and 3-D boxes and chunks along every dimension. */
Test(slice, execute_and_gather, .init = setup_disk, .fini = teardown)
{
    uint64_t rng = 99;
    tt ts[3] = { { .name = "a", .dtype = PINIO_DTYPE_F32, .rank = 2, .shape = { 64, 3000 } },
                 { .name = "b", .dtype = PINIO_DTYPE_BF16, .rank = 3, .shape = { 5, 70, 33 } },
                 { .name = "c", .dtype = PINIO_DTYPE_I16, .rank = 1, .shape = { 999 } } };
    for (int i = 0; i < 3; i++)
        fill(&ts[i], &rng);
    char path[512];
    snprintf(path, sizeof(path), "%s/g.safetensors", dir);
    save(path, ts, 3);
    for (int dim = 0; dim < 3; dim++)
        for (uint32_t world = 1; world <= 5; world += 2)
            for (uint32_t r = 0; r < world; r++) {
                pinio_split_rule rules[] = { { "a", dim < 2 ? dim : -1 }, { "b", dim } };
                pinio_plan_opts po;
                plan_opts_split(&po, rules, 2, r, world);
                po.max_overread = (r % 2) ? -1 : 0;
                pinio_plan *p = plan_path(path, &po);
                pinio_diag d = { 0 };
                pinio_plan_info info;
                pinio_plan_get_info(p, &info);
                void *buf = aligned_alloc(4096, info.dest_bytes ? info.dest_bytes : 4096);
                pinio_dest_ops ops = { .size = sizeof(ops), .claim = buf_claim };
                cr_assert_eq(pinio_plan_execute(p, &ops, buf, NULL, NULL, &d), 0, "%s", d.msg);
                int dims[3] = { dim < 2 ? dim : -1, dim, PINIO_SPLIT_WHOLE };
                for (size_t i = 0; i < 3; i++) {
                    const pinio_plan_tensor *t = pinio_plan_tensor_at(p, i);
                    uint8_t *at = (uint8_t *)buf + t->dest_offset;
                    cr_assert_eq(pinio_plan_gather(p, i, at), 0);
                    uint64_t shape[4], nb;
                    uint8_t *want = dims[i] == PINIO_SPLIT_WHOLE
                                        ? NULL
                                        : ref_chunk(&ts[i], dims[i], r, world, shape, &nb);
                    if (!want) {
                        nb = ts[i].nbytes;
                        want = malloc(nb);
                        memcpy(want, ts[i].data, nb);
                    }
                    cr_assert_eq(t->nbytes, nb);
                    cr_assert_eq(t->runs * t->run_bytes, nb);
                    cr_assert(memcmp(at, want, nb) == 0, "%s dim %d rank %u/%u", t->name,
                              dims[i], r, world);
                    free(want);
                }
                cr_assert_eq(pinio_plan_gather(p, 3, buf), -ERANGE);
                free(buf);
                pinio_plan_free(p);
            }
    free_tensors(ts, 3);
}

/* An explicit box (several dimensions cut at once) beside a chunk. */
Test(slice, box, .init = setup_disk, .fini = teardown)
{
    uint64_t rng = 5;
    tt t = { .name = "w", .dtype = PINIO_DTYPE_F32, .rank = 3, .shape = { 6, 40, 50 } };
    fill(&t, &rng);
    char path[512];
    snprintf(path, sizeof(path), "%s/b.safetensors", dir);
    save(path, &t, 1);
    uint64_t start[] = { 1, 10, 5 }, stop[] = { 4, 30, 45 };
    pinio_slice sl = { .name = "w", .kind = PINIO_SLICE_BOX, .ndim = 3, .start = start,
                       .stop = stop };
    /* strided: read pinned anyway, and said so */
    pinio_checkpoint *cp = load_slice(path, &sl, PINIO_MEMORY_MAPPED);
    const pinio_tensor *lt = pinio_checkpoint_tensor(cp, 0);
    cr_assert(lt->sliced);
    cr_assert_eq(lt->shape[0], 3);
    cr_assert_eq(lt->shape[1], 20);
    cr_assert_eq(lt->shape[2], 40);
    const float *full = (const float *)t.data, *got = (const float *)lt->data;
    size_t k = 0;
    for (uint64_t a = 1; a < 4; a++)
        for (uint64_t b = 10; b < 30; b++)
            for (uint64_t c = 5; c < 45; c++, k++)
                cr_assert(memcmp(&got[k], &full[(a * 40 + b) * 50 + c], 4) == 0,
                          "element [%llu,%llu,%llu]", (unsigned long long)a,
                          (unsigned long long)b, (unsigned long long)c);
    cr_assert_eq(pinio_checkpoint_file_memory(cp, 0, NULL), PINIO_MEMORY_PINNED);
    pinio_load_report rep;
    pinio_checkpoint_report(cp, &rep);
    cr_assert(strstr(rep.modes, "packed in the arena"), "%s", rep.modes);
    cr_assert_eq(rep.sliced, 1);
    cr_assert_eq(rep.strided, 1);
    pinio_checkpoint_release(cp);
    free(t.data);
}

/* A contiguous (dimension-0) slice of a mapped file is a view of the
 * mapping: no copy, no read. */
Test(slice, dim0_mapped, .init = setup_disk, .fini = teardown)
{
    uint64_t rng = 6;
    tt t = { .name = "w", .dtype = PINIO_DTYPE_F32, .rank = 2, .shape = { 100, 300 } };
    fill(&t, &rng);
    char path[512];
    snprintf(path, sizeof(path), "%s/m.safetensors", dir);
    save(path, &t, 1);
    pinio_split_rule rule = { "*", 0 };
    pinio_load_opts o;
    load_opts_split(&o, &rule, 1, 2, 3);
    o.memory = PINIO_MEMORY_MAPPED;
    o.cache = PINIO_CACHE_HOT;
    pinio_checkpoint *cp = load_path(path, &o);
    cr_assert_eq(pinio_checkpoint_file_memory(cp, 0, NULL), PINIO_MEMORY_MAPPED);
    const pinio_tensor *lt = pinio_checkpoint_tensor(cp, 0);
    cr_assert_eq(lt->shape[0], 32); /* ceil(100 / 3) = 34: 34, 34, 32 */
    cr_assert_eq(lt->start[0], 68);
    cr_assert(memcmp(lt->data, t.data + 68 * 300 * 4, 32 * 300 * 4) == 0);
    pinio_checkpoint_release(cp);
    /* Cold: mapping would read the other ranks' rows; read pinned instead. */
    o.cache = PINIO_CACHE_COLD;
    cp = load_path(path, &o);
    const char *why = NULL;
    cr_assert_eq(pinio_checkpoint_file_memory(cp, 0, &why), PINIO_MEMORY_PINNED);
    cr_assert(strstr(why, "slices of a cold file"), "%s", why);
    lt = pinio_checkpoint_tensor(cp, 0);
    cr_assert(memcmp(lt->data, t.data + 68 * 300 * 4, 32 * 300 * 4) == 0);
    pinio_load_report rep;
    pinio_checkpoint_report(cp, &rep);
    cr_assert_leq(rep.read_bytes, 32 * 300 * 4 + 8192);
    pinio_checkpoint_release(cp);
    free(t.data);
}

/* Dimension-0 splits of large tensors read their slices and within a few
 * percent more (alignment only), whatever the rank; counted by the report
 * (the plan's reads), not timed. */
Test(slice, dim0_reads_its_slices, .init = setup_disk, .fini = teardown, .timeout = 120)
{
    uint64_t rng = 7;
    tt ts[6];
    for (int i = 0; i < 6; i++) {
        ts[i] = (tt){ .dtype = i % 2 ? PINIO_DTYPE_BF16 : PINIO_DTYPE_F32, .rank = 2,
                      .shape = { 1024 + (uint64_t)i * 7, 1024 } };
        snprintf(ts[i].name, sizeof(ts[i].name), "model.layers.%d.weight", i);
        fill(&ts[i], &rng);
    }
    tt norm = { .name = "model.norm", .dtype = PINIO_DTYPE_F32, .rank = 1, .shape = { 1024 } };
    fill(&norm, &rng);
    char path[512];
    snprintf(path, sizeof(path), "%s/d.safetensors", dir);
    tt all[7];
    memcpy(all, ts, sizeof(ts));
    all[6] = norm;
    save(path, all, 7);
    for (uint32_t world = 2; world <= 4; world += 2)
        for (uint32_t r = 0; r < world; r++) {
            pinio_split_rule rules[] = { { "*.norm", PINIO_SPLIT_WHOLE }, { "model.layers", 0 } };
            pinio_load_opts o;
            load_opts_split(&o, rules, 2, r, world);
            o.memory = PINIO_MEMORY_PINNED;
            o.cache = PINIO_CACHE_COLD;
            pinio_checkpoint *cp = load_path(path, &o);
            int dims[7] = { 0, 0, 0, 0, 0, 0, PINIO_SPLIT_WHOLE };
            check_rank(all, 7, dims, cp, r, world, "dim0");
            pinio_load_report rep;
            pinio_checkpoint_report(cp, &rep);
            cr_assert_eq(rep.sliced, 6);
            cr_assert_eq(rep.strided, 0);
            cr_assert_geq(rep.read_bytes, rep.bytes);
            cr_assert_leq(rep.read_bytes, rep.bytes + rep.bytes / 50,
                          "world %u rank %u: read %llu for %llu bytes of slices", world, r,
                          (unsigned long long)rep.read_bytes, (unsigned long long)rep.bytes);
            cr_assert_eq(rep.overread_bytes, rep.read_bytes - rep.bytes);
            cr_assert_lt(rep.full_bytes, rep.bytes * world + rep.bytes / 4 * world);
            pinio_checkpoint_release(cp);
        }
    free_tensors(all, 7);
}

/* Small slices a few KiB apart: with no cap every hole would be read (the
 * whole file); the cap keeps the holes read within its share, smallest
 * first; none with a negative cap. */
Test(slice, overread_cap, .init = setup_disk, .fini = teardown)
{
    uint64_t rng = 8;
    tt ts[32];
    for (int i = 0; i < 32; i++) {
        ts[i] = (tt){ .dtype = PINIO_DTYPE_U8, .rank = 2,
                      .shape = { 64, 1024 + (uint64_t)(i % 5) * 512 } };
        snprintf(ts[i].name, sizeof(ts[i].name), "t%02d", i);
        fill(&ts[i], &rng);
    }
    char path[512];
    snprintf(path, sizeof(path), "%s/o.safetensors", dir);
    save(path, ts, 32);
    const double caps[] = { -1, 0, 0.25, 1e9 };
    uint64_t holes[4];
    for (int c = 0; c < 4; c++) {
        pinio_split_rule rule = { "*", 0 };
        pinio_plan_opts po;
        plan_opts_split(&po, &rule, 1, 1, 4);
        po.max_overread = caps[c];
        pinio_plan *p = plan_path(path, &po);
        pinio_plan_slice_info si;
        pinio_plan_get_slice_info(p, &si);
        cr_assert_eq(si.struct_size, sizeof(si));
        cr_assert_eq(si.sliced, 32);
        cr_assert_leq(si.hole_bytes, si.hole_budget);
        cr_assert_eq(si.overread_bytes, si.read_bytes - si.bytes);
        holes[c] = si.hole_bytes;
        pinio_plan_free(p);
    }
    cr_assert_eq(holes[0], 0);
    cr_assert_leq(holes[1], 32 * 16 * 1024 / 32 + 4096);
    cr_assert_gt(holes[2], holes[1]);
    cr_assert_gt(holes[3], holes[2]);
    free_tensors(ts, 32);
}

static int plan_err(const char *path, const pinio_plan_opts *po, pinio_diag *d)
{
    pinio_plan *p = NULL;
    const char *paths[] = { path };
    int rc = pinio_plan_create(&p, paths, 1, po, d);
    cr_assert_null(p);
    return rc;
}

Test(slice, errors_name_the_tensor, .init = setup_disk, .fini = teardown)
{
    uint64_t rng = 9;
    tt ts[3] = { { .name = "mat", .dtype = PINIO_DTYPE_F32, .rank = 2, .shape = { 4, 4 } },
                 { .name = "scalar", .dtype = PINIO_DTYPE_F32, .rank = 0 },
                 { .name = "fp4", .dtype = PINIO_DTYPE_F4, .rank = 1, .shape = { 6 } } };
    char path[512];
    save_filled(ts, 3, rng, "e.safetensors", path, sizeof(path));
    pinio_plan_opts po;
    pinio_diag d = { 0 };

    pinio_split_rule r2 = { "mat", 2 };
    plan_opts_split(&po, &r2, 1, 0, 2);
    cr_assert_eq(plan_err(path, &po, &d), -EINVAL);
    cr_assert(strstr(d.msg, "'mat'") && strstr(d.msg, "dimension 2"), "%s", d.msg);
    cr_assert(strstr(d.msg, "e.safetensors") || strstr(d.path, "e.safetensors"), "%s", d.msg);

    pinio_split_rule neg = { "mat", -3 };
    po.split = &neg;
    cr_assert_eq(plan_err(path, &po, &d), -EINVAL);
    cr_assert(strstr(d.msg, "'mat'"), "%s", d.msg);

    pinio_split_rule all = { "*", 0 };
    po.split = &all;
    cr_assert_eq(plan_err(path, &po, &d), -EINVAL);
    cr_assert(strstr(d.msg, "'scalar'"), "%s", d.msg);

    pinio_split_rule fp4 = { "fp4", 0 };
    po.split = &fp4;
    cr_assert_eq(plan_err(path, &po, &d), -EINVAL);
    /* 3 of 6 F4 elements are 12 bits: the cut lands inside a byte */
    cr_assert(strstr(d.msg, "'fp4'") && strstr(d.msg, "F4") && strstr(d.msg, "inside a byte") &&
              strstr(d.msg, "dimension 0 at index 3") && strstr(d.msg, "fp4=0"), "%s", d.msg);

    po.split = &r2;
    r2.dim = 0;
    po.rank = 2;
    cr_assert_eq(plan_err(path, &po, &d), -EINVAL);
    cr_assert(strstr(d.msg, "rank 2 of world 2"), "%s", d.msg);
    po.rank = 0;
    po.world = 0;
    cr_assert_eq(plan_err(path, &po, &d), -EINVAL);

    pinio_plan_opts_default(&po);
    pinio_slice sl = { .name = "nope", .kind = PINIO_SLICE_CHUNK, .world = 2 };
    po.slices = &sl;
    po.nslices = 1;
    cr_assert_eq(plan_err(path, &po, &d), -ENOENT);
    cr_assert(strstr(d.msg, "'nope'"), "%s", d.msg);

    uint64_t start[] = { 1, 0 }, stop[] = { 5, 4 };
    pinio_slice box = { .name = "mat", .kind = PINIO_SLICE_BOX, .ndim = 2, .start = start,
                        .stop = stop };
    po.slices = &box;
    cr_assert_eq(plan_err(path, &po, &d), -EINVAL);
    cr_assert(strstr(d.msg, "'mat'") && strstr(d.msg, "out of bounds"), "%s", d.msg);

    pinio_slice twice[2] = { { .name = "mat", .kind = PINIO_SLICE_WHOLE },
                             { .name = "mat", .kind = PINIO_SLICE_WHOLE } };
    po.slices = twice;
    po.nslices = 2;
    cr_assert_eq(plan_err(path, &po, &d), -EINVAL);
    free_tensors(ts, 3);
}

/* FP8 and the packed dtypes (F4, F6) split as an MXFP4/FP8 checkpoint is
 * split tensor-parallel: rows and columns at world 2 and 4, each rank's
 * slice byte-exact against the bits cut out of the whole tensor, loaded
 * pinned and mapped; a 3-dimensional F4 slice is strided (runs). */
Test(slice, packed_dtypes_on_byte_boundaries, .init = setup_disk, .fini = teardown)
{
    uint64_t rng = 11;
    tt ts[] = { { .name = "fp4.w", .dtype = PINIO_DTYPE_F4, .rank = 2, .shape = { 8, 64 } },
                { .name = "fp4.odd", .dtype = PINIO_DTYPE_F4, .rank = 2, .shape = { 4, 3 } },
                { .name = "fp4.3d", .dtype = PINIO_DTYPE_F4, .rank = 3, .shape = { 2, 4, 6 } },
                { .name = "fp6a.w", .dtype = PINIO_DTYPE_F6_E2M3, .rank = 2, .shape = { 8, 16 } },
                { .name = "fp6b.w", .dtype = PINIO_DTYPE_F6_E3M2, .rank = 2, .shape = { 4, 32 } },
                { .name = "scales", .dtype = PINIO_DTYPE_F8_E8M0, .rank = 2, .shape = { 8, 4 } },
                { .name = "fp8.w", .dtype = PINIO_DTYPE_F8_E4M3, .rank = 2, .shape = { 8, 12 } } };
    size_t n = sizeof(ts) / sizeof(ts[0]);
    char path[512];
    save_filled(ts, n, rng, "q.safetensors", path, sizeof(path));
    for (int dim = 0; dim < 2; dim++)
        for (uint32_t world = 2; world <= 4; world += 2)
            for (uint32_t r = 0; r < world; r++)
                for (int mapped = 0; mapped < 2; mapped++) {
                    /* fp4.odd's rows are 12 bits: whole rows by 2 only */
                    int dims[7];
                    pinio_split_rule rules[7];
                    for (size_t i = 0; i < n; i++) {
                        dims[i] = i == 1 && (dim == 1 || world == 4) ? PINIO_SPLIT_WHOLE :
                                  i == 2 ? 1 : dim;
                        rules[i] = (pinio_split_rule){ .pattern = ts[i].name, .dim = dims[i] };
                    }
                    pinio_load_opts o;
                    load_opts_split(&o, rules, n, r, world);
                    o.memory = mapped ? PINIO_MEMORY_MAPPED : PINIO_MEMORY_PINNED;
                    o.cache = mapped ? PINIO_CACHE_AUTO : PINIO_CACHE_COLD;
                    pinio_checkpoint *cp = load_path(path, &o);
                    char what[64];
                    snprintf(what, sizeof(what), "dim %d %s", dim, mapped ? "mapped" : "pinned");
                    check_rank(ts, n, dims, cp, r, world, what);
                    const pinio_tensor *t3 = pinio_checkpoint_find(cp, "fp4.3d");
                    cr_assert(t3->sliced && t3->shape[1] == 4 / world);
                    pinio_checkpoint_release(cp);
                }
    free_tensors(ts, n);
}

/* Where a cut lands inside a byte it is refused, naming the tensor, the
 * dtype, the dimension and the index; upstream's rule for the dimensions
 * outside the run: an index taken alone may sit on a byte boundary that
 * its neighbour misses (rows 12 bits apart: row 2 starts at bit 24). */
Test(slice, packed_cut_inside_a_byte, .init = setup_disk, .fini = teardown)
{
    uint64_t rng = 12;
    tt ts[] = { { .name = "fp4.odd", .dtype = PINIO_DTYPE_F4, .rank = 2, .shape = { 4, 3 } },
                { .name = "fp6", .dtype = PINIO_DTYPE_F6_E3M2, .rank = 2, .shape = { 4, 12 } } };
    char path[512];
    save_filled(ts, 2, rng, "m.safetensors", path, sizeof(path));
    pinio_plan_opts po;
    pinio_diag d = { 0 };

    pinio_split_rule rows = { "fp4.odd", 0 }; /* world 4: row 1 starts at bit 12 */
    plan_opts_split(&po, &rows, 1, 1, 4);
    cr_assert_eq(plan_err(path, &po, &d), -EINVAL);
    cr_assert(strstr(d.msg, "'fp4.odd'") && strstr(d.msg, "F4 (4 bits an element)") &&
              strstr(d.msg, "inside a byte") && strstr(d.msg, "dimension 0 at index 1") &&
              strstr(d.path, "m.safetensors"), "%s (%s)", d.msg, d.path);

    pinio_split_rule cols = { "fp6", 1 }; /* world 4: 3 F6 elements are 18 bits */
    plan_opts_split(&po, &cols, 1, 0, 4);
    cr_assert_eq(plan_err(path, &po, &d), -EINVAL);
    cr_assert(strstr(d.msg, "'fp6'") && strstr(d.msg, "F6_E3M2") &&
              strstr(d.msg, "dimension 1 at index 3"), "%s", d.msg);

    /* boxes: rows [2, 3) x cols [0, 2) starts at bit 24 and is 8 bits long */
    uint64_t start[] = { 2, 0 }, stop[] = { 3, 2 };
    pinio_slice box = { .name = "fp4.odd", .kind = PINIO_SLICE_BOX, .ndim = 2, .start = start,
                        .stop = stop };
    pinio_checkpoint *cp = load_slice(path, &box, PINIO_MEMORY_AUTO);
    const pinio_tensor *t = pinio_checkpoint_find(cp, "fp4.odd");
    cr_assert_eq(t->nbytes, 1);
    cr_assert_eq(t->data[0], ts[0].data[3]);
    pinio_checkpoint_release(cp);
    start[0] = 1; /* row 1 starts at bit 12 */
    stop[0] = 2;
    pinio_plan_opts_default(&po);
    po.slices = &box;
    po.nslices = 1;
    cr_assert_eq(plan_err(path, &po, &d), -EINVAL);
    cr_assert(strstr(d.msg, "its slice cuts F4") && strstr(d.msg, "dimension 0 at index 1"),
              "%s", d.msg);
    free_tensors(ts, 2);
}
