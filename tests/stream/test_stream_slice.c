/* Slices streamed (stream.h pinio_stream_opts::split, ::slices): every
 * rank's slice of random tensors (shapes, dtypes, world sizes 1-8, split
 * along dimension 0, another dimension, or kept whole) lands at the sink
 * contiguous and equal, byte for byte, to the chunk computed here from the
 * tensor's bytes element by element, through:
 *   - the host sink, whose callback checks that every byte of a slice is
 *     handed over exactly once, inside the slice, and nothing else is
 *     (no byte of the holes read through between a slice's runs);
 *   - the CUDA and HIP sinks through the test drivers (device memory
 *     poisoned, so a byte never copied shows; copies checked in bounds
 *     and from registered slots never overwritten while pending);
 * on rings down to 2 slots of 64 KiB, so that a run longer than a slot
 * spans several reads and runs start and end anywhere in a slot; with the
 * holes between runs read through or not (max_overread); checkpoints of
 * one file and of two. Around it: the
 * report's over-read adds up, --verify still hashes the whole file, the
 * file sink refuses a sliced plan, and bad rules fail naming the tensor. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fake_cuda.h"
#include "pinio/save.h"
#include "pinio/stream.h"
#include "tests/common/helpers.h"

#define MAXT 10

static char dir[128];
static char path[192], path2[192]; /* a checkpoint of one file, or of both */

static void setup(void)
{
    cr_assert_eq(t_tmpdir("/var/tmp", "sslice", dir, sizeof(dir)), 0);
    snprintf(path, sizeof(path), "%s/m.safetensors", dir);
    snprintf(path2, sizeof(path2), "%s/m2.safetensors", dir);
    /* The test drivers' copies complete on their thread a little later,
     * as a GPU's would; short, as strided slices make many copies. */
    setenv("FAKE_CUDA_DELAY_US", "20", 1);
}

static void teardown(void)
{
    t_rm_rf(dir);
}

/* One tensor of a test checkpoint: its bytes as saved. */
typedef struct tensor {
    char name[32];
    pinio_dtype dtype;
    unsigned rank;
    uint64_t shape[4];
    uint8_t *data;
    uint64_t nbytes;
    int dim; /* its split rule's dimension, or PINIO_SPLIT_WHOLE (no rule, or 'whole') */
} tensor;

typedef struct ckpt {
    tensor t[MAXT];
    size_t n;
    pinio_split_rule rules[MAXT];
    size_t nrules;
    size_t nfiles; /* 1: `path`; 2: the first half of the tensors in `path`, the rest in `path2` */
} ckpt;

static const pinio_dtype dtypes[] = { PINIO_DTYPE_BOOL, PINIO_DTYPE_U8,  PINIO_DTYPE_F8_E4M3,
                                      PINIO_DTYPE_I16,  PINIO_DTYPE_BF16, PINIO_DTYPE_F32,
                                      PINIO_DTYPE_I64,  PINIO_DTYPE_C64 };

static uint64_t esize(pinio_dtype dt)
{
    return pinio_dtype_bits(dt) / 8;
}

/* Random tensors of ranks 1-4, small dimensions, and, one time in three,
 * rows long enough (tens to hundreds of KiB) that a run of a slice along
 * another dimension is longer than a 64 KiB slot. Saved to `path`, or
 * shared between `path` and `path2` (nfiles 2). */
static void make(ckpt *c, uint64_t *rng, size_t nfiles)
{
    memset(c, 0, sizeof(*c));
    c->nfiles = nfiles;
    c->n = 3 + t_rand(rng) % (MAXT - 3);
    for (size_t i = 0; i < c->n; i++) {
        tensor *t = &c->t[i];
        snprintf(t->name, sizeof(t->name), "layers.%zu.w", i);
        t->dtype = dtypes[t_rand(rng) % (sizeof(dtypes) / sizeof(dtypes[0]))];
        t->rank = 1 + (unsigned)(t_rand(rng) % 4);
        uint64_t n;
        do { /* at most 2 MB a tensor, so that the test stays quick */
            for (unsigned d = 0; d < t->rank; d++)
                t->shape[d] = 1 + t_rand(rng) % 12;
            if (t_rand(rng) % 3 == 0) /* long rows: runs across slots */
                t->shape[t->rank - 1] = 5000 + t_rand(rng) % 40000;
            else if (t_rand(rng) % 3 == 0)
                t->shape[t_rand(rng) % t->rank] = 200 + t_rand(rng) % 2000;
            if (t_rand(rng) % 12 == 0)
                t->shape[t_rand(rng) % t->rank] = 0;
            n = esize(t->dtype);
            for (unsigned d = 0; d < t->rank; d++)
                n *= t->shape[d];
        } while (n > (2u << 20));
        t->nbytes = n;
        t->data = malloc(n ? n : 1);
        cr_assert_not_null(t->data);
        for (uint64_t b = 0; b < n; b++)
            t->data[b] = (uint8_t)t_rand(rng);
        /* The rule: a dimension (negative half the time), 'whole', or none. */
        unsigned pick = (unsigned)(t_rand(rng) % 8);
        t->dim = PINIO_SPLIT_WHOLE;
        if (pick == 0)
            continue; /* no rule: whole */
        int d = pick < 4 ? 0 : (int)(t_rand(rng) % t->rank);
        if (pick == 7)
            d = PINIO_SPLIT_WHOLE;
        else if (t_rand(rng) % 2)
            d -= (int)t->rank;
        c->rules[c->nrules++] = (pinio_split_rule){ .pattern = t->name, .dim = d };
        t->dim = d;
    }
    pinio_save_tensor st[MAXT];
    for (size_t i = 0; i < c->n; i++)
        st[i] = (pinio_save_tensor){ .name = c->t[i].name, .dtype = c->t[i].dtype,
                                     .rank = c->t[i].rank, .shape = c->t[i].shape,
                                     .data = c->t[i].data, .nbytes = c->t[i].nbytes };
    pinio_save_opts so;
    pinio_save_opts_default(&so);
    so.no_sync = true;
    pinio_diag d = { 0 };
    size_t first = nfiles == 2 ? c->n / 2 : c->n;
    cr_assert_eq(pinio_save(path, st, first, &so, NULL, &d), 0, "save: %s", d.msg);
    if (nfiles == 2)
        cr_assert_eq(pinio_save(path2, st + first, c->n - first, &so, NULL, &d), 0, "save: %s",
                     d.msg);
}

static void unmake(ckpt *c)
{
    for (size_t i = 0; i < c->n; i++)
        free(c->t[i].data);
}

/* The expectation: torch.chunk(t, world, dim)[rank] of the tensor's bytes,
 * gathered element by element through its multi-index (not by runs, as
 * the library does), into a malloc'd buffer; its byte count in `*nbytes`. */
static uint8_t *expect(const tensor *t, uint32_t rank, uint32_t world, uint64_t *nbytes)
{
    uint64_t start[4] = { 0 }, len[4];
    for (unsigned d = 0; d < t->rank; d++)
        len[d] = t->shape[d];
    if (t->dim != PINIO_SPLIT_WHOLE) {
        unsigned d = (unsigned)(t->dim < 0 ? t->dim + (int)t->rank : t->dim);
        uint64_t size = t->shape[d], c = (size + world - 1) / world;
        start[d] = (uint64_t)rank * c < size ? (uint64_t)rank * c : size;
        len[d] = size - start[d] < c ? size - start[d] : c;
    }
    uint64_t e = esize(t->dtype), elems = 1;
    for (unsigned d = 0; d < t->rank; d++)
        elems *= len[d];
    *nbytes = elems * e;
    uint8_t *out = malloc(*nbytes ? *nbytes : 1);
    cr_assert_not_null(out);
    uint64_t idx[4] = { 0 };
    for (uint64_t k = 0; k < elems; k++) {
        uint64_t src = 0;
        for (unsigned d = 0; d < t->rank; d++)
            src = src * t->shape[d] + start[d] + idx[d];
        memcpy(out + k * e, t->data + src * e, e);
        for (unsigned d = t->rank; d-- > 0;) { /* the next index, row-major */
            if (++idx[d] < len[d])
                break;
            idx[d] = 0;
        }
    }
    return out;
}

static size_t find(const ckpt *c, const char *name)
{
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->t[i].name, name) == 0)
            return i;
    cr_assert_fail("tensor '%s' is not the checkpoint's", name);
    return 0;
}

/* ---- the host sink: every byte of every slice, once ----------------- */

typedef struct host_got {
    const ckpt *c;
    uint8_t *buf[MAXT];  /* per checkpoint tensor: the slice as handed over */
    uint8_t *seen[MAXT]; /* per byte: times handed over */
    uint64_t len[MAXT];  /* the plan's slice bytes */
    uint64_t bytes, fragments, outside;
} host_got;

static int on_fragment(void *ctx, const pinio_sink_fragment *f)
{
    host_got *h = ctx;
    size_t i = find(h->c, f->t->name);
    if (!h->buf[i]) {
        h->len[i] = f->t->nbytes;
        h->buf[i] = calloc(1, f->t->nbytes + 1);
        h->seen[i] = calloc(1, f->t->nbytes + 1);
    }
    h->fragments++;
    h->bytes += f->len;
    if (f->len == 0 || f->offset + f->len > h->len[i]) {
        h->outside++;
        return 0;
    }
    memcpy(h->buf[i] + f->offset, f->data, f->len);
    for (size_t b = 0; b < f->len; b++)
        h->seen[i][f->offset + b]++;
    return 0;
}

static void host_free(host_got *h)
{
    for (size_t i = 0; i < MAXT; i++) {
        free(h->buf[i]);
        free(h->seen[i]);
    }
}

static void stream_opts(pinio_stream_opts *o, const ckpt *c, uint32_t rank, uint32_t world,
                        size_t slot, unsigned slots, double overread)
{
    pinio_stream_opts_default(o);
    o->slot_size = slot;
    o->slots = slots;
    o->split = c->rules;
    o->nsplit = c->nrules;
    o->rank = rank;
    o->world = world;
    o->max_overread = overread;
}

/* What every stream of a sliced plan reports: the slices' bytes, and
 * reads that cover them plus what is counted as over-read. */
static void check_report(const pinio_stream_report *r, const ckpt *c, uint32_t rank,
                         uint32_t world, const char *what)
{
    uint64_t want = 0, full = 0;
    size_t sliced = 0;
    for (size_t i = 0; i < c->n; i++) {
        uint64_t nb;
        free(expect(&c->t[i], rank, world, &nb));
        want += nb;
        full += c->t[i].nbytes;
        const tensor *t = &c->t[i];
        if (t->dim != PINIO_SPLIT_WHOLE) { /* sliced unless the chunk is the whole dimension */
            uint64_t size = t->shape[t->dim < 0 ? t->dim + (int)t->rank : t->dim];
            sliced += size && (rank || (size + world - 1) / world < size);
        }
    }
    cr_expect_eq(r->bytes, want, "%s: %llu bytes reported, the slices hold %llu", what,
                 (unsigned long long)r->bytes, (unsigned long long)want);
    cr_expect_eq(r->slices.full_bytes, full, "%s", what);
    cr_expect_eq(r->read_bytes, r->bytes + r->slices.overread_bytes,
                 "%s: read %llu = %llu of slices + %llu over-read", what,
                 (unsigned long long)r->read_bytes, (unsigned long long)r->bytes,
                 (unsigned long long)r->slices.overread_bytes);
    cr_expect(r->slices.hole_bytes <= r->slices.overread_bytes, "%s", what);
    cr_expect_eq(r->slices.sliced, sliced, "%s: %zu tensors sliced, want %zu", what,
                 r->slices.sliced, sliced);
    cr_expect(r->slices.strided <= r->slices.sliced, "%s", what);
}

/* Streams the checkpoint as rank/world to the host sink and checks each
 * slice. */
static void host_rank(const ckpt *c, uint32_t rank, uint32_t world, size_t slot, unsigned slots,
                      double overread)
{
    char what[128];
    snprintf(what, sizeof(what), "host, rank %u of %u, %zu KiB x %u, overread %g", rank, world,
             slot >> 10, slots, overread);
    pinio_stream_opts o;
    stream_opts(&o, c, rank, world, slot, slots, overread);
    host_got h = { .c = c };
    pinio_sink_host_cfg cfg = { .fn = on_fragment, .ctx = &h };
    pinio_stream_report r;
    pinio_diag d = { 0 };
    const char *in[] = { path, path2 };
    cr_assert_eq(pinio_stream(in, c->nfiles, &o, &pinio_sink_host, &cfg, &r, &d), 0, "%s: %s",
                 what, d.msg);
    cr_expect_eq(h.outside, 0, "%s: %llu fragments outside their slice", what,
                 (unsigned long long)h.outside);
    cr_expect_eq(h.bytes, r.bytes, "%s: %llu bytes handed over, the slices hold %llu", what,
                 (unsigned long long)h.bytes, (unsigned long long)r.bytes);
    for (size_t i = 0; i < c->n; i++) {
        uint64_t nb;
        uint8_t *want = expect(&c->t[i], rank, world, &nb);
        if (nb) {
            cr_assert_not_null(h.buf[i], "%s: %s never handed over", what, c->t[i].name);
            cr_assert_eq(h.len[i], nb, "%s: %s", what, c->t[i].name);
            for (uint64_t b = 0; b < nb; b++)
                cr_assert_eq(h.seen[i][b], 1, "%s: %s byte %llu handed over %u times", what,
                             c->t[i].name, (unsigned long long)b, h.seen[i][b]);
            cr_assert(memcmp(h.buf[i], want, nb) == 0,
                      "%s: %s (%s, dim %d, shape[0] %llu) differs from its chunk", what,
                      c->t[i].name, pinio_dtype_name(c->t[i].dtype), c->t[i].dim,
                      (unsigned long long)c->t[i].shape[0]);
        }
        free(want);
    }
    check_report(&r, c, rank, world, what);
    host_free(&h);
}

static const struct {
    size_t slot;
    unsigned slots;
} rings[] = { { 64u << 10, 2 }, { 64u << 10, 3 }, { 128u << 10, 4 }, { 1u << 20, 4 } };

/* Random checkpoints, every world size 1-8, a random rank and the last,
 * a random ring, holes read through within the default cap, all of them
 * (a cap that reads every hole) or none. */
Test(stream_slice, host_sink_every_slice_every_byte_once, .init = setup, .fini = teardown,
     .timeout = 300)
{
    uint64_t rng = 2026;
    static const double caps[] = { 0, 1e6, -1 };
    for (int round = 0; round < 6; round++) {
        ckpt c;
        make(&c, &rng, 1 + (size_t)(round % 2)); /* one file, then two */
        for (uint32_t world = 1; world <= 8; world++) {
            uint32_t ranks[2] = { (uint32_t)(t_rand(&rng) % world), world - 1 };
            for (int k = 0; k < 2; k++) {
                size_t ri = t_rand(&rng) % (sizeof(rings) / sizeof(rings[0]));
                host_rank(&c, ranks[k], world, rings[ri].slot, rings[ri].slots,
                          caps[t_rand(&rng) % 3]);
            }
        }
        unmake(&c);
    }
}

/* A run several slots long, cut by every slot's end, and runs of a few
 * bytes with holes read through between them: a [3, 70000] f32 tensor
 * split along its last dimension (rows of 280 KB, runs of 140 KB over
 * 64 KiB slots), a [40, 3, 5] u8 tensor along dimension 1 (runs of 5 bytes
 * 10 apart), and a [1, 9, 4] tensor along dimension 1 (one range: the
 * leading dimension has extent 1). */
Test(stream_slice, runs_across_slots_and_tiny_runs, .init = setup, .fini = teardown)
{
    ckpt c;
    memset(&c, 0, sizeof(c));
    const struct {
        pinio_dtype dt;
        unsigned rank;
        uint64_t shape[3];
        int dim;
    } spec[] = { { PINIO_DTYPE_F32, 2, { 3, 70000 }, -1 },
                 { PINIO_DTYPE_U8, 3, { 40, 3, 5 }, 1 },
                 { PINIO_DTYPE_BF16, 3, { 1, 9, 4 }, 1 } };
    uint64_t rng = 7;
    c.n = 3;
    c.nfiles = 1;
    for (size_t i = 0; i < c.n; i++) {
        tensor *t = &c.t[i];
        snprintf(t->name, sizeof(t->name), "t%zu", i);
        t->dtype = spec[i].dt;
        t->rank = spec[i].rank;
        memcpy(t->shape, spec[i].shape, sizeof(spec[i].shape));
        t->dim = spec[i].dim;
        t->nbytes = esize(t->dtype);
        for (unsigned d = 0; d < t->rank; d++)
            t->nbytes *= t->shape[d];
        t->data = malloc(t->nbytes);
        for (uint64_t b = 0; b < t->nbytes; b++)
            t->data[b] = (uint8_t)t_rand(&rng);
        c.rules[c.nrules++] = (pinio_split_rule){ .pattern = t->name, .dim = t->dim };
    }
    pinio_save_tensor st[3];
    for (size_t i = 0; i < c.n; i++)
        st[i] = (pinio_save_tensor){ .name = c.t[i].name, .dtype = c.t[i].dtype,
                                     .rank = c.t[i].rank, .shape = c.t[i].shape,
                                     .data = c.t[i].data, .nbytes = c.t[i].nbytes };
    pinio_save_opts so;
    pinio_save_opts_default(&so);
    so.no_sync = true;
    cr_assert_eq(pinio_save(path, st, c.n, &so, NULL, NULL), 0);
    for (uint32_t world = 1; world <= 4; world++)
        for (uint32_t rank = 0; rank < world; rank++) {
            host_rank(&c, rank, world, 64u << 10, 2, 1e6);
            host_rank(&c, rank, world, 64u << 10, 3, -1);
        }
    /* The report: the f32 and u8 slices are strided, the [1, 9, 4] one not. */
    pinio_stream_opts o;
    stream_opts(&o, &c, 1, 2, 64u << 10, 2, 1e6);
    host_got h = { .c = &c };
    pinio_sink_host_cfg cfg = { .fn = on_fragment, .ctx = &h };
    pinio_stream_report r;
    const char *in = path;
    cr_assert_eq(pinio_stream(&in, 1, &o, &pinio_sink_host, &cfg, &r, NULL), 0);
    cr_expect_eq(r.slices.sliced, 3);
    cr_expect_eq(r.slices.strided, 2);
    cr_expect(r.slices.hole_bytes > 0, "the holes between the u8 runs are read through");
    cr_expect(h.fragments >= 3 + 40 + 1, "one fragment per run at least: %llu",
              (unsigned long long)h.fragments);
    host_free(&h);
    unmake(&c);
}

/* ---- the GPU sinks through the test drivers ------------------------- */

/* What the test driver saw since `before`: no copy out of bounds, none
 * from unregistered memory, no slot overwritten in flight, no device memory
 * left. */
static void driver_clean(fake_stats_fn stats, const fake_stats *before, const char *what)
{
    fake_stats after;
    stats(&after);
    cr_expect_eq(after.out_of_bounds, before->out_of_bounds, "%s: copies out of bounds", what);
    cr_expect_eq(after.unregistered, before->unregistered, "%s: copies from unregistered memory",
                 what);
    cr_expect_eq(after.overwritten, before->overwritten, "%s: slots overwritten in flight", what);
    cr_expect_eq(after.allocs_live, 0, "%s: device memory left", what);
}

static void gpu_rank(const ckpt *c, const pinio_sink *sink, fake_stats_fn stats, uint32_t rank,
                     uint32_t world, size_t slot, unsigned slots)
{
    char what[128];
    snprintf(what, sizeof(what), "%s, rank %u of %u, %zu KiB x %u", sink->name, rank, world,
             slot >> 10, slots);
    fake_stats before;
    stats(&before);
    pinio_stream_opts o;
    stream_opts(&o, c, rank, world, slot, slots, 1e6);
    pinio_gpu_arena *a = NULL;
    pinio_sink_gpu_cfg cfg = { .device = 0, .out = &a };
    pinio_stream_report r;
    pinio_diag d = { 0 };
    const char *in[] = { path, path2 };
    cr_assert_eq(pinio_stream(in, c->nfiles, &o, sink, &cfg, &r, &d), 0, "%s: %s", what, d.msg);
    cr_assert_eq(pinio_gpu_arena_tensors(a), c->n, "%s", what);
    for (size_t k = 0; k < c->n; k++) {
        pinio_gpu_tensor gt;
        cr_assert_eq(pinio_gpu_arena_tensor(a, k, &gt), 0);
        size_t i = find(c, gt.name);
        uint64_t nb;
        uint8_t *want = expect(&c->t[i], rank, world, &nb);
        cr_assert_eq(gt.nbytes, nb, "%s: %s holds %llu bytes, its slice %llu", what, gt.name,
                     (unsigned long long)gt.nbytes, (unsigned long long)nb);
        uint8_t *got = malloc(nb ? nb : 1);
        cr_assert_eq(pinio_gpu_arena_read(a, k, 0, got, (size_t)nb, &d), 0, "%s", d.msg);
        cr_assert(memcmp(got, want, nb) == 0,
                  "%s: %s (dim %d) on the device differs from its chunk", what, gt.name,
                  c->t[i].dim);
        free(got);
        free(want);
    }
    check_report(&r, c, rank, world, what);
    pinio_gpu_arena_free(a);
    driver_clean(stats, &before, what);
}

static void gpu_rounds(const pinio_sink *sink, const char *env)
{
    void *h = NULL;
    fake_stats_fn stats = fake_gpu_load(env, &h);
    cr_assert_not_null(stats, "%s names the test driver", env);
    uint64_t rng = 99;
    for (int round = 0; round < 3; round++) {
        ckpt c;
        make(&c, &rng, round == 1 ? 2 : 1);
        for (uint32_t world = 1; world <= 8; world += 1 + (uint32_t)(t_rand(&rng) % 2)) {
            size_t ri = t_rand(&rng) % (sizeof(rings) / sizeof(rings[0]));
            gpu_rank(&c, sink, stats, (uint32_t)(t_rand(&rng) % world), world, rings[ri].slot,
                     rings[ri].slots);
        }
        unmake(&c);
    }
    dlclose(h);
}

Test(stream_slice, cuda_sink_lands_each_slice_contiguous, .init = setup, .fini = teardown,
     .timeout = 300)
{
    gpu_rounds(&pinio_sink_cuda, "PINIO_CUDA_LIB");
}

Test(stream_slice, hip_sink_lands_each_slice_contiguous, .init = setup, .fini = teardown,
     .timeout = 300)
{
    gpu_rounds(&pinio_sink_hip, "PINIO_HIP_LIB");
}

/* ---- a sink fed from memory (pinio_stream_from_memory) -------------- */

/* The rank's plan, reads cut at the slot as a stream's; holes read through
 * or not, so that slots hold holes between a slice's runs or not. */
static pinio_plan *rank_plan(const ckpt *c, uint32_t rank, uint32_t world, size_t slot,
                             double overread)
{
    pinio_plan_opts po;
    pinio_plan_opts_default(&po);
    po.segment = slot;
    po.split = c->rules;
    po.nsplit = c->nrules;
    po.rank = rank;
    po.world = world;
    po.max_overread = overread;
    pinio_plan *p = NULL;
    pinio_diag d = { 0 };
    const char *in[] = { path, path2 };
    cr_assert_eq(pinio_plan_create(&p, in, c->nfiles, &po, &d), 0, "%s", d.msg);
    return p;
}

/* Each plan tensor's slice, its bytes changed (xor with a value of the
 * tensor) so that bytes read from the file instead would show; one
 * tensor given none (NULL: zeros). */
static uint8_t **memory_sources(const ckpt *c, const pinio_plan *p, uint32_t rank,
                                uint32_t world, size_t *n, size_t *none)
{
    pinio_plan_info pi;
    pinio_plan_get_info(p, &pi);
    *n = pi.tensors;
    *none = pi.tensors > 2 ? 1 : SIZE_MAX;
    uint8_t **src = calloc(pi.tensors, sizeof(*src));
    cr_assert_not_null(src);
    for (size_t i = 0; i < pi.tensors; i++) {
        const pinio_plan_tensor *t = pinio_plan_tensor_at(p, i);
        uint64_t nb;
        src[i] = expect(&c->t[find(c, t->name)], rank, world, &nb);
        cr_assert_eq(nb, t->nbytes, "%s", t->name);
        for (uint64_t b = 0; b < nb; b++)
            src[i][b] ^= (uint8_t)(0xA5 + i);
        if (i == *none) {
            free(src[i]);
            src[i] = NULL;
        }
    }
    return src;
}

static void memory_rank(const ckpt *c, const pinio_sink *sink, fake_stats_fn stats,
                        uint32_t rank, uint32_t world, size_t slot, unsigned slots,
                        double overread)
{
    char what[160];
    snprintf(what, sizeof(what), "%s from memory, rank %u of %u, %zu KiB x %u, overread %g",
             sink->name, rank, world, slot >> 10, slots, overread);
    fake_stats before;
    stats(&before);
    pinio_plan *p = rank_plan(c, rank, world, slot, overread);
    size_t n, none;
    uint8_t **src = memory_sources(c, p, rank, world, &n, &none);
    pinio_gpu_arena *a = NULL;
    pinio_sink_gpu_cfg cfg = { .device = 0, .out = &a };
    pinio_diag d = { 0 };
    cr_assert_eq(pinio_stream_from_memory(p, (const void *const *)src, n, slot, slots, sink,
                                          &cfg, &d),
                 0, "%s: %s", what, d.msg);
    cr_assert_eq(pinio_gpu_arena_tensors(a), n, "%s", what);
    for (size_t k = 0; k < n; k++) {
        pinio_gpu_tensor gt;
        cr_assert_eq(pinio_gpu_arena_tensor(a, k, &gt), 0);
        cr_assert_str_eq(gt.name, pinio_plan_tensor_at(p, k)->name, "%s", what);
        uint64_t nb = pinio_plan_tensor_at(p, k)->nbytes;
        cr_assert_eq(gt.nbytes, nb, "%s: %s", what, gt.name);
        uint8_t *got = malloc(nb ? nb : 1), *zero = calloc(1, nb ? nb : 1);
        cr_assert_eq(pinio_gpu_arena_read(a, k, 0, got, (size_t)nb, &d), 0, "%s", d.msg);
        cr_assert(memcmp(got, src[k] ? src[k] : zero, nb) == 0,
                  "%s: %s (dim %d) on the device is not the bytes given%s", what, gt.name,
                  c->t[find(c, gt.name)].dim, src[k] ? "" : " (none: zeros)");
        free(got);
        free(zero);
    }
    pinio_gpu_arena_free(a);
    for (size_t i = 0; i < n; i++)
        free(src[i]);
    free(src);
    pinio_plan_free(p);
    driver_clean(stats, &before, what);
}

/* What a tensor-parallel rank does with the slices it received: they reach
 * the device through the sink, each at its tensor's address, packed as a
 * stream from the file would land them, on every ring and world size. */
Test(stream_slice, from_memory_lands_the_bytes_given, .init = setup, .fini = teardown,
     .timeout = 300)
{
    void *h = NULL;
    fake_stats_fn stats = fake_gpu_load("PINIO_CUDA_LIB", &h);
    cr_assert_not_null(stats, "PINIO_CUDA_LIB names the test driver");
    uint64_t rng = 77;
    for (int round = 0; round < 3; round++) {
        ckpt c;
        make(&c, &rng, round == 1 ? 2 : 1);
        for (uint32_t world = 1; world <= 8; world += 1 + (uint32_t)(t_rand(&rng) % 2)) {
            size_t ri = t_rand(&rng) % (sizeof(rings) / sizeof(rings[0]));
            memory_rank(&c, &pinio_sink_cuda, stats, (uint32_t)(t_rand(&rng) % world), world,
                        rings[ri].slot, rings[ri].slots, round == 2 ? -1 : 1e6);
        }
        unmake(&c);
    }
    dlclose(h);
}

/* The host sink sees each slice's bytes once, at their offsets. */
Test(stream_slice, from_memory_hands_the_host_sink_every_byte_once, .init = setup,
     .fini = teardown)
{
    uint64_t rng = 78;
    ckpt c;
    make(&c, &rng, 2);
    for (uint32_t world = 1; world <= 4; world++) {
        uint32_t rank = world - 1;
        pinio_plan *p = rank_plan(&c, rank, world, 64u << 10, 1e6);
        size_t n, none;
        uint8_t **src = memory_sources(&c, p, rank, world, &n, &none);
        host_got g = { .c = &c };
        pinio_sink_host_cfg cfg = { .fn = on_fragment, .ctx = &g };
        pinio_diag d = { 0 };
        cr_assert_eq(pinio_stream_from_memory(p, (const void *const *)src, n, 64u << 10, 2,
                                              &pinio_sink_host, &cfg, &d),
                     0, "%s", d.msg);
        cr_expect_eq(g.outside, 0);
        for (size_t k = 0; k < n; k++) {
            const pinio_plan_tensor *t = pinio_plan_tensor_at(p, k);
            size_t i = find(&c, t->name);
            if (!t->nbytes)
                continue;
            cr_assert_not_null(g.buf[i], "%s never handed over", t->name);
            for (uint64_t b = 0; b < t->nbytes; b++)
                cr_assert_eq(g.seen[i][b], 1, "%s byte %llu handed over %u times", t->name,
                             (unsigned long long)b, g.seen[i][b]);
            for (uint64_t b = 0; b < t->nbytes; b++)
                cr_assert_eq(g.buf[i][b], src[k] ? src[k][b] : 0, "%s byte %llu", t->name,
                             (unsigned long long)b);
        }
        host_free(&g);
        for (size_t k = 0; k < n; k++)
            free(src[k]);
        free(src);
        pinio_plan_free(p);
    }
    unmake(&c);
}

static int refuse_fragment(void *ctx, const pinio_sink_fragment *f)
{
    (void)f;
    ++*(int *)ctx;
    return -EIO;
}

/* Bad arguments are named before the sink opens; a read larger than a
 * slot is refused naming it; the sink's failure is the call's, and the
 * call frees what it took (ASan and valgrind run this). */
Test(stream_slice, from_memory_refuses_what_it_cannot_send, .init = setup, .fini = teardown)
{
    uint64_t rng = 79;
    ckpt c = { .n = 0 };
    bool big = false;
    while (!big) { /* a tensor over 64 KiB: its read does not fit a 64 KiB slot */
        unmake(&c);
        make(&c, &rng, 1);
        for (size_t i = 0; i < c.n; i++)
            big = big || c.t[i].nbytes > (64u << 10);
    }
    c.nrules = 0;
    for (size_t i = 0; i < c.n; i++)
        c.t[i].dim = PINIO_SPLIT_WHOLE;
    pinio_plan *p = rank_plan(&c, 0, 1, 1u << 20, 1e6);
    size_t n, none;
    uint8_t **src = memory_sources(&c, p, 0, 1, &n, &none);
    const void *const *s = (const void *const *)src;
    int calls = 0;
    pinio_sink_host_cfg cfg = { .fn = refuse_fragment, .ctx = &calls };
    pinio_diag d = { 0 };
    cr_expect_eq(pinio_stream_from_memory(p, s, n, 64u << 10, 2, &pinio_sink_host, &cfg, &d),
                 -EINVAL);
    cr_expect(strstr(d.msg, "more than a slot") != NULL, "%s", d.msg);
    cr_expect_eq(pinio_stream_from_memory(p, s, n - 1, 1u << 20, 2, &pinio_sink_host, &cfg, &d),
                 -EINVAL);
    cr_expect(strstr(d.msg, "sources for a plan of") != NULL, "%s", d.msg);
    cr_expect_eq(pinio_stream_from_memory(p, s, n, 1u << 20, 1, &pinio_sink_host, &cfg, &d),
                 -EINVAL);
    cr_expect_eq(pinio_stream_from_memory(p, s, n, 3u << 20, 2, &pinio_sink_host, &cfg, &d),
                 -EINVAL);
    /* 1 TiB of staging: refused as a stream's ring is, before any is faulted in. */
    cr_expect_eq(pinio_stream_from_memory(p, s, n, 1u << 30, 1024, &pinio_sink_host, &cfg, &d),
                 -ENOMEM);
    cr_expect(strstr(d.msg, "the staging ring (1024 slots of") != NULL, "%s", d.msg);
    cr_expect_eq(calls, 0, "nothing handed over before the arguments are checked");
    cr_expect_eq(pinio_stream_from_memory(p, s, n, 1u << 20, 2, &pinio_sink_host, &cfg, &d),
                 -EIO, "the sink's own code");
    cr_expect_eq(calls, 1, "the stream stops at the sink's first failure");
    for (size_t k = 0; k < n; k++)
        free(src[k]);
    free(src);
    pinio_plan_free(p);
    unmake(&c);
}

/* ---- verify, the file sink, bad input ------------------------------- */

static void keep_hex(void *ctx, size_t file, const char *p, const char *hex)
{
    (void)file;
    (void)p;
    memcpy(ctx, hex, 65);
}

/* The digest is the whole file's: what no read brought (the other ranks'
 * slices) is read again to hash it. */
Test(stream_slice, verify_hashes_the_whole_file, .init = setup, .fini = teardown)
{
    uint64_t rng = 5;
    ckpt c = { .n = 0 };
    bool big = false;
    while (!big) { /* a tensor whose other ranks' rows are pages long */
        unmake(&c);
        make(&c, &rng, 1);
        for (size_t i = 0; i < c.n; i++)
            big = big || (c.t[i].shape[0] >= 3 && c.t[i].nbytes >= (64u << 10));
    }
    c.rules[0] = (pinio_split_rule){ .pattern = "*", .dim = 0 };
    c.nrules = 1;
    for (size_t i = 0; i < c.n; i++)
        c.t[i].dim = 0;
    char cmd[256], want[80] = "";
    snprintf(cmd, sizeof(cmd), "sha256sum '%s'", path);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    cr_assert(fscanf(p, "%64s", want) == 1);
    pclose(p);
    pinio_stream_opts o;
    stream_opts(&o, &c, 1, 3, 64u << 10, 2, -1);
    char hex[65] = "";
    o.verify = true;
    o.sha256_fn = keep_hex;
    o.sha256_ctx = hex;
    host_got h = { .c = &c };
    pinio_sink_host_cfg cfg = { .fn = on_fragment, .ctx = &h };
    pinio_stream_report r;
    pinio_diag d = { 0 };
    const char *in = path;
    cr_assert_eq(pinio_stream(&in, 1, &o, &pinio_sink_host, &cfg, &r, &d), 0, "%s", d.msg);
    cr_expect(r.verified);
    cr_expect_str_eq(hex, want);
    cr_expect(r.verify_reread_bytes > 0, "the other ranks' slices are read again");
    host_free(&h);
    /* A wrong digest still fails the sliced stream. */
    const char *bad[] = { "0000000000000000000000000000000000000000000000000000000000000000" };
    o.expected_sha256 = bad;
    o.nexpected = 1;
    o.sha256_fn = NULL;
    h = (host_got){ .c = &c };
    cr_expect_eq(pinio_stream(&in, 1, &o, &pinio_sink_host, &cfg, NULL, &d), PINIO_EFORMAT);
    cr_expect(strstr(d.msg, "sha256 mismatch") != NULL, "%s", d.msg);
    host_free(&h);
    unmake(&c);
}

Test(stream_slice, file_sink_refuses_a_sliced_plan, .init = setup, .fini = teardown)
{
    ckpt c = { .n = 0 };
    uint64_t rng = 11;
    bool cut = false;
    while (!cut) { /* a tensor of at least 2 rows: rank 0 of 2 slices it */
        unmake(&c);
        make(&c, &rng, 1);
        for (size_t i = 0; i < c.n; i++)
            cut = cut || c.t[i].shape[0] >= 2;
    }
    char out[192];
    snprintf(out, sizeof(out), "%s/out", dir);
    cr_assert_eq(mkdir(out, 0755), 0);
    pinio_split_rule all = { .pattern = "*", .dim = 0 };
    pinio_stream_opts o;
    pinio_stream_opts_default(&o);
    o.split = &all;
    o.nsplit = 1;
    o.rank = 0;
    o.world = 2;
    pinio_sink_file_cfg fc = { .dir = out };
    pinio_diag d = { 0 };
    const char *in = path;
    cr_expect_eq(pinio_stream(&in, 1, &o, &pinio_sink_file, &fc, NULL, &d), -EINVAL);
    cr_expect(strstr(d.msg, "file sink copies whole files") != NULL, "%s", d.msg);
    cr_expect(strstr(d.msg, "tensor 'layers.") != NULL, "names the tensor: %s", d.msg);
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "test -z \"$(ls -A '%s')\"", out);
    cr_expect_eq(system(cmd), 0, "nothing left in the target");
    /* Every tensor whole ('whole' rule): a plain copy. */
    all.dim = PINIO_SPLIT_WHOLE;
    cr_expect_eq(pinio_stream(&in, 1, &o, &pinio_sink_file, &fc, NULL, &d), 0, "%s", d.msg);
    unmake(&c);
}

Test(stream_slice, bad_rules_fail_clearly, .init = setup, .fini = teardown)
{
    ckpt c;
    uint64_t rng = 13;
    make(&c, &rng, 1);
    pinio_split_rule r = { .pattern = "layers.0.w", .dim = 4 };
    pinio_stream_opts o;
    pinio_stream_opts_default(&o);
    o.split = &r;
    o.nsplit = 1;
    o.world = 2;
    host_got h = { .c = &c };
    pinio_sink_host_cfg cfg = { .fn = on_fragment, .ctx = &h };
    pinio_diag d = { 0 };
    const char *in = path;
    cr_expect_eq(pinio_stream(&in, 1, &o, &pinio_sink_host, &cfg, NULL, &d), -EINVAL);
    cr_expect(strstr(d.msg, "tensor 'layers.0.w'") && strstr(d.msg, "dimension 4"), "%s", d.msg);
    r.dim = 0;
    o.rank = 2;
    cr_expect_eq(pinio_stream(&in, 1, &o, &pinio_sink_host, &cfg, NULL, &d), -EINVAL);
    cr_expect(strstr(d.msg, "rank 2 of world 2") != NULL, "%s", d.msg);
    o.rank = 0;
    o.world = 0;
    cr_expect_eq(pinio_stream(&in, 1, &o, &pinio_sink_host, &cfg, NULL, &d), -EINVAL);
    o.world = 2;
    o.split = NULL;
    cr_expect_eq(pinio_stream(&in, 1, &o, &pinio_sink_host, &cfg, NULL, &d), -EINVAL);
    pinio_slice sl = { .name = "no.such.tensor", .kind = PINIO_SLICE_CHUNK, .world = 2 };
    o.split = NULL;
    o.nsplit = 0;
    o.slices = &sl;
    o.nslices = 1;
    cr_expect_eq(pinio_stream(&in, 1, &o, &pinio_sink_host, &cfg, NULL, &d), -ENOENT);
    cr_expect(strstr(d.msg, "no.such.tensor") != NULL, "%s", d.msg);
    cr_expect_eq(h.fragments, 0, "nothing handed over");
    host_free(&h);
    unmake(&c);
}
