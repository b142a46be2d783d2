/* The streaming mode (pinio/stream.h) and its sinks (pinio/sink.h).
 *
 * One body runs on every sink (host, file, and a test sink that copies
 * "asynchronously" like a GPU sink): a checkpoint generated with known
 * content is streamed through rings of several shapes (down to 2 slots of
 * 64 KiB, so that slots are reused many times), and every byte is checked
 * where the sink put it. Around it: the fragment walk, filters, the
 * async contract (a slot is never read into while its sink still copies
 * from it), failures (callback, options, target exists) and what they
 * leave behind. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fake_cuda.h"
#include "pinio/gen.h"
#include "pinio/stream.h"
#include "tests/common/helpers.h"

#define SEED 41

static char dir[64];
static char src[160], dst[160];

static void gen(const char *out, unsigned shards, uint64_t size, size_t tensors)
{
    pinio_gen_opts g;
    pinio_gen_opts_default(&g);
    g.size = size;
    g.tensors = tensors;
    g.shards = shards;
    g.seed = SEED;
    static const pinio_dtype dt[] = { PINIO_DTYPE_BF16, PINIO_DTYPE_F32, PINIO_DTYPE_U8 };
    g.dtypes = dt;
    g.ndtypes = 3;
    cr_assert_eq(pinio_gen_write(out, &g, NULL, NULL), 0);
}

static void setup(void)
{
    cr_assert_eq(t_tmpdir("/var/tmp", "stream", dir, sizeof dir), 0);
    snprintf(dst, sizeof(dst), "%s/out", dir);
    cr_assert_eq(mkdir(dst, 0755), 0);
}

static void teardown(void)
{
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

/* ---- what the host sink received ---------------------------------- */

typedef struct got {
    uint64_t *bytes;     /* per tensor index: bytes received, in order */
    size_t ntensors;
    size_t fragments;
    bool bad;            /* wrong content or out of order */
    int fail_at;         /* fail the n-th fragment (1-based), 0: never */
} got;

static int on_fragment(void *ctx, const pinio_sink_fragment *f)
{
    got *g = ctx;
    g->fragments++;
    if (g->fail_at && (int)g->fragments == g->fail_at)
        return -EPIPE;
    if (f->tensor >= g->ntensors || f->offset != g->bytes[f->tensor] ||
        f->offset + f->len > f->t->nbytes) {
        g->bad = true;
        return 0;
    }
    uint64_t bad = 0;
    if (!pinio_gen_verify(SEED, f->t->name, f->offset, f->data, f->len, &bad)) {
        fprintf(stderr, "tensor %s: wrong byte at %llu\n", f->t->name, (unsigned long long)bad);
        g->bad = true;
    }
    g->bytes[f->tensor] += f->len;
    return 0;
}

/* Tensor count and sizes of `path` under the filters, from a plan. */
static size_t tensor_sizes(const char *path, const char *const *filters, size_t nf,
                           uint64_t **sizes)
{
    pinio_plan_opts po;
    pinio_plan_opts_default(&po);
    po.filters = filters;
    po.nfilters = nf;
    pinio_plan *p = NULL;
    cr_assert_eq(pinio_plan_create(&p, &path, 1, &po, NULL), 0);
    pinio_plan_info pi;
    pinio_plan_get_info(p, &pi);
    *sizes = calloc(pi.tensors + 1, sizeof(**sizes));
    for (size_t i = 0; i < pi.tensors; i++)
        (*sizes)[i] = pinio_plan_tensor_at(p, i)->nbytes;
    pinio_plan_free(p);
    return pi.tensors;
}

/* ---- a test sink that copies "asynchronously", as a GPU sink does ---- */

/* chunk keeps a copy of the bytes and the slot they sit in, as if a DMA
 * were still reading them; slot_wait "completes" the copies from that
 * slot, checking first that the slot still holds the very bytes (a stream
 * that read into a slot with a copy pending would change them). */
typedef struct pend {
    unsigned slot;
    const uint8_t *at;
    uint8_t *copy;
    size_t len;
    size_t read;
} pend;

typedef struct async_sink {
    const pinio_plan *plan;
    pend *p;
    size_t n, cap;
    size_t overwritten, waits, completed;
    got *g;
} async_sink;

static async_sink *the_async; /* for the test to inspect after the stream */

static int async_open(void *priv, const void *cfg, const pinio_sink_setup *s, pinio_diag *d)
{
    (void)d;
    async_sink *a = priv;
    a->plan = s->plan;
    a->g = (got *)cfg;
    the_async = NULL;
    return 0;
}

static int async_chunk(void *priv, const pinio_sink_chunk *c, pinio_diag *d)
{
    (void)d;
    async_sink *a = priv;
    if (a->n == a->cap) {
        a->cap = a->cap ? 2 * a->cap : 16;
        a->p = realloc(a->p, a->cap * sizeof(*a->p));
        cr_assert_not_null(a->p);
    }
    pend *p = &a->p[a->n++];
    *p = (pend){ .slot = c->slot, .at = c->data, .len = c->len, .read = c->read,
                 .copy = malloc(c->len ? c->len : 1) };
    memcpy(p->copy, c->data, c->len);
    return 0;
}

/* "The copies complete": what they read is delivered to the host check. */
static int async_wait(void *priv, unsigned slot, pinio_diag *d)
{
    (void)d;
    async_sink *a = priv;
    a->waits++;
    size_t keep = 0;
    for (size_t i = 0; i < a->n; i++) {
        pend *p = &a->p[i];
        if (p->slot != slot) {
            a->p[keep++] = *p;
            continue;
        }
        if (memcmp(p->at, p->copy, p->len) != 0)
            a->overwritten++;
        pinio_sink_chunk c = { .read = p->read, .r = pinio_plan_read_at(a->plan, p->read),
                               .data = p->copy, .len = p->len, .slot = slot };
        c.file = c.r->file;
        c.file_offset = c.r->offset;
        size_t cur = 0;
        pinio_sink_fragment f;
        while (pinio_sink_next_fragment(a->plan, &c, &cur, &f))
            on_fragment(a->g, &f);
        free(p->copy);
        a->completed++;
    }
    a->n = keep;
    return 0;
}

static void async_close(void *priv, bool ok)
{
    async_sink *a = priv;
    cr_expect(!ok || a->n == 0, "every pending copy completed before close");
    for (size_t i = 0; i < a->n; i++)
        free(a->p[i].copy);
    free(a->p);
    static async_sink last;
    last = *a;
    last.p = NULL;
    the_async = &last;
}

static const pinio_sink async_test_sink = {
    .name = "async-test",
    .priv_size = sizeof(async_sink),
    .open = async_open,
    .chunk = async_chunk,
    .slot_wait = async_wait,
    .close = async_close,
};

/* ---- the body every sink runs -------------------------------------- */

static bool same_file(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    bool same = fa && fb;
    while (same) {
        int ca = fgetc(fa), cb = fgetc(fb);
        if (ca != cb)
            same = false;
        if (ca == EOF || cb == EOF)
            break;
    }
    if (fa)
        fclose(fa);
    if (fb)
        fclose(fb);
    return same;
}

static void check_copies(const char *from, unsigned shards)
{
    if (shards < 2) {
        char out[256];
        snprintf(out, sizeof(out), "%s/m.safetensors", dst);
        cr_assert(same_file(from, out), "%s is a byte-exact copy of %s", out, from);
        return;
    }
    for (unsigned i = 1; i <= shards; i++) {
        char name[64], a[256], b[256];
        pinio_gen_shard_name(name, sizeof(name), i, shards);
        snprintf(a, sizeof(a), "%s/%s", from, name);
        snprintf(b, sizeof(b), "%s/%s", dst, name);
        cr_assert(same_file(a, b), "%s is a byte-exact copy", b);
    }
    char a[256], b[256];
    snprintf(a, sizeof(a), "%s/%s", from, PINIO_GEN_INDEX_NAME);
    snprintf(b, sizeof(b), "%s/%s", dst, PINIO_GEN_INDEX_NAME);
    cr_assert(same_file(a, b), "the index was copied");
}

/* Every tensor on the "device": its own 256-byte aligned address, every
 * byte read back and checked (whole, and a sub-range alone), and the
 * driver saw no copy from unregistered memory, none outside an
 * allocation, no slot overwritten while its copy was pending, no call
 * without a context. The arena is freed here. */
static void check_device(pinio_gpu_arena *a, got *g, fake_stats_fn stats, unsigned slots)
{
    cr_assert_not_null(a, "the sink handed the arena over");
    cr_assert_eq(pinio_gpu_arena_tensors(a), g->ntensors);
    pinio_gpu_info ci;
    pinio_gpu_arena_get_info(a, &ci);
    cr_expect_eq(ci.slots_registered + ci.slots_preregistered <= slots, true);
    cr_expect(ci.slots_registered > 0, "the slots were registered with the driver");
    cr_expect(ci.copies >= g->ntensors, "one copy per tensor fragment at least");
    for (size_t i = 0; i < g->ntensors; i++) {
        pinio_gpu_tensor t;
        cr_assert_eq(pinio_gpu_arena_tensor(a, i, &t), 0);
        cr_expect_eq(t.dptr % 256, 0, "tensor %s at 0x%llx", t.name, (unsigned long long)t.dptr);
        uint8_t *buf = malloc(t.nbytes + 1);
        cr_assert_eq(pinio_gpu_arena_read(a, i, 0, buf, (size_t)t.nbytes, NULL), 0);
        uint64_t bad = 0;
        cr_expect(pinio_gen_verify(SEED, t.name, 0, buf, (size_t)t.nbytes, &bad),
                  "tensor %s: wrong byte at %llu on the device", t.name, (unsigned long long)bad);
        if (t.nbytes > 64) {
            uint8_t part[32];
            cr_expect_eq(pinio_gpu_arena_read(a, i, t.nbytes / 2, part, 32, NULL), 0);
            cr_expect(pinio_gen_verify(SEED, t.name, t.nbytes / 2, part, 32, NULL));
        }
        cr_expect_eq(pinio_gpu_arena_read(a, i, t.nbytes, buf, 1, NULL), -ERANGE);
        g->bytes[i] = t.nbytes; /* the host checks below then hold */
        free(buf);
    }
    fake_stats fs;
    stats(&fs);
    cr_expect_eq(fs.overwritten, 0, "no slot overwritten while its copy was pending");
    cr_expect_eq(fs.unregistered, 0, "no copy from unregistered host memory");
    cr_expect_eq(fs.out_of_bounds, 0, "no copy outside a device allocation");
    cr_expect_eq(fs.no_context, 0, "no call without a current context");
    pinio_gpu_arena_free(a);
}

static void body(const char *sink_name, unsigned shards, size_t slot_size, unsigned slots)
{
    if (shards < 2)
        snprintf(src, sizeof(src), "%s/m.safetensors", dir);
    else
        snprintf(src, sizeof(src), "%s/ck", dir);
    gen(src, shards, 3u << 20, 24);

    uint64_t *sizes = NULL;
    got g = { 0 };
    g.ntensors = tensor_sizes(src, NULL, 0, &sizes);
    g.bytes = calloc(g.ntensors + 1, sizeof(*g.bytes));

    pinio_stream_opts o;
    pinio_stream_opts_default(&o);
    o.slot_size = slot_size;
    o.slots = slots;
    pinio_sink_host_cfg hc = { .fn = on_fragment, .ctx = &g };
    pinio_sink_file_cfg fc = { .dir = dst, .verify = true };
    pinio_gpu_arena *arena = NULL;
    pinio_sink_gpu_cfg cc = { .device = 0, .out = &arena };
    void *fake = NULL;
    fake_stats_fn stats = NULL;
    bool gpu = strcmp(sink_name, "cuda") == 0 || strcmp(sink_name, "hip") == 0;
    if (gpu) {
        const char *env = sink_name[0] == 'c' ? "PINIO_CUDA_LIB" : "PINIO_HIP_LIB";
        stats = fake_gpu_load(env, &fake);
        cr_assert_not_null(stats, "the test driver (%s) loads", env);
    }
    const pinio_sink *sink = strcmp(sink_name, "async") == 0 ? &async_test_sink
                                                              : pinio_sink_find(sink_name);
    cr_assert_not_null(sink);
    const void *cfg = sink == &pinio_sink_host   ? (const void *)&hc
                      : sink == &pinio_sink_file ? (const void *)&fc
                      : gpu                      ? (const void *)&cc
                                                 : (const void *)&g;
    pinio_stream_report rep;
    pinio_diag d = { 0 };
    const char *in = src;
    int rc = pinio_stream(&in, 1, &o, sink, cfg, &rep, &d);
    cr_assert_eq(rc, 0, "%s sink: %s", sink_name, d.msg);
    cr_expect_eq(rep.slots, slots);
    cr_expect_eq(rep.ring_bytes, (uint64_t)slots * slot_size);
    cr_expect_eq(rep.files, shards < 2 ? 1u : shards);
    cr_expect(rep.read_bytes >= rep.bytes);
    if (gpu)
        check_device(arena, &g, stats, slots);
    if (sink == &pinio_sink_file) {
        check_copies(src, shards);
    } else {
        cr_expect_not(g.bad, "every fragment in order with the right bytes");
        for (size_t i = 0; i < g.ntensors; i++)
            cr_expect_eq(g.bytes[i], sizes[i], "tensor %zu: %llu of %llu bytes arrived", i,
                         (unsigned long long)g.bytes[i], (unsigned long long)sizes[i]);
    }
    if (sink == &async_test_sink) {
        cr_assert_not_null(the_async);
        cr_expect_eq(the_async->overwritten, 0, "no slot was read into while a copy was pending");
        cr_expect(the_async->completed > 0);
        if (rep.reads > slots)
            cr_expect(rep.slot_waits > 0, "slots were reused, each after the sink's wait");
    }
    if (fake) {
        fake_stats fs;
        stats(&fs);
        cr_expect(fs.allocs_live == 0 && fs.registered_live == 0 && fs.ctx_retained == 0 &&
                      fs.streams_live == 0,
                  "nothing left on the driver: %lu allocations, %lu registrations, %lu "
                  "contexts, %lu streams", fs.allocs_live, fs.registered_live, fs.ctx_retained,
                  fs.streams_live);
        dlclose(fake);
    }
    free(sizes);
    free(g.bytes);
}

#define SINK_TESTS(tag, name)                                                                  \
    Test(stream_##tag, file_tiny_ring, .init = setup, .fini = teardown)                       \
    {                                                                                          \
        body(name, 1, 64u << 10, 2);                                                           \
    }                                                                                          \
    Test(stream_##tag, shards_tiny_ring, .init = setup, .fini = teardown)                     \
    {                                                                                          \
        body(name, 3, 64u << 10, 3);                                                           \
    }                                                                                          \
    Test(stream_##tag, file_default_shape_small, .init = setup, .fini = teardown)             \
    {                                                                                          \
        body(name, 1, 1u << 20, 4);                                                            \
    }                                                                                          \
    Test(stream_##tag, ring_larger_than_checkpoint, .init = setup, .fini = teardown)          \
    {                                                                                          \
        body(name, 2, 4u << 20, 2);                                                            \
    }

SINK_TESTS(host, "host")
SINK_TESTS(file, "file")
SINK_TESTS(async, "async")
SINK_TESTS(cuda, "cuda")
SINK_TESTS(hip, "hip")

/* ---- around the body ------------------------------------------------ */

Test(stream, filters_select, .init = setup, .fini = teardown)
{
    snprintf(src, sizeof(src), "%s/m.safetensors", dir);
    gen(src, 1, 2u << 20, 16);
    const char *filters[] = { "model.layers.1", "model.layers.3.*" };
    uint64_t *all = NULL, *sel = NULL;
    size_t nall = tensor_sizes(src, NULL, 0, &all);
    size_t nsel = tensor_sizes(src, filters, 2, &sel);
    cr_assert(nsel > 0 && nsel < nall, "the filters select some tensors (%zu of %zu)", nsel, nall);
    got g = { .ntensors = nsel, .bytes = calloc(nsel, sizeof(uint64_t)) };
    pinio_stream_opts o;
    pinio_stream_opts_default(&o);
    o.slot_size = 64u << 10;
    o.slots = 2;
    o.filters = filters;
    o.nfilters = 2;
    pinio_sink_host_cfg hc = { .fn = on_fragment, .ctx = &g };
    pinio_stream_report rep;
    const char *in = src;
    cr_assert_eq(pinio_stream(&in, 1, &o, &pinio_sink_host, &hc, &rep, NULL), 0);
    cr_expect_eq(rep.tensors, nsel);
    cr_expect_not(g.bad);
    for (size_t i = 0; i < nsel; i++)
        cr_expect_eq(g.bytes[i], sel[i]);
    free(all);
    free(sel);
    free(g.bytes);
}

Test(stream, callback_failure_stops_and_names_tensor, .init = setup, .fini = teardown)
{
    snprintf(src, sizeof(src), "%s/m.safetensors", dir);
    gen(src, 1, 1u << 20, 8);
    got g = { .ntensors = 8, .bytes = calloc(8, sizeof(uint64_t)), .fail_at = 3 };
    pinio_stream_opts o;
    pinio_stream_opts_default(&o);
    o.slot_size = 64u << 10;
    o.slots = 2;
    pinio_sink_host_cfg hc = { .fn = on_fragment, .ctx = &g };
    pinio_diag d = { 0 };
    const char *in = src;
    cr_expect_eq(pinio_stream(&in, 1, &o, &pinio_sink_host, &hc, NULL, &d), -EPIPE);
    cr_expect_eq(g.fragments, 3, "nothing delivered after the failure");
    cr_expect(strstr(d.msg, "tensor '") != NULL, "the message names the tensor: %s", d.msg);
    free(g.bytes);
}

Test(stream, bad_options)
{
    const char *in = "/nonexistent.safetensors";
    pinio_sink_host_cfg hc = { .fn = on_fragment };
    pinio_stream_opts o;
    pinio_diag d = { 0 };
    pinio_stream_opts_default(&o);
    o.slot_size = 3u << 20;
    cr_expect_eq(pinio_stream(&in, 1, &o, &pinio_sink_host, &hc, NULL, &d), -EINVAL);
    cr_expect(strstr(d.msg, "power of two") != NULL, "%s", d.msg);
    pinio_stream_opts_default(&o);
    o.slots = 1;
    cr_expect_eq(pinio_stream(&in, 1, &o, &pinio_sink_host, &hc, NULL, NULL), -EINVAL);
    pinio_stream_opts_default(&o);
    cr_expect_eq(pinio_stream(&in, 1, &o, NULL, &hc, NULL, NULL), -EINVAL);
    cr_expect_eq(pinio_stream(NULL, 0, &o, &pinio_sink_host, &hc, NULL, NULL), -EINVAL);
    cr_expect_eq(pinio_stream(&in, 1, &o, &pinio_sink_host, &hc, NULL, NULL), -ENOENT);
}

Test(stream, host_sink_needs_callback, .init = setup, .fini = teardown)
{
    snprintf(src, sizeof(src), "%s/m.safetensors", dir);
    gen(src, 1, 256u << 10, 2);
    pinio_sink_host_cfg hc = { 0 };
    pinio_diag d = { 0 };
    const char *in = src;
    cr_expect_eq(pinio_stream(&in, 1, NULL, &pinio_sink_host, &hc, NULL, &d), -EINVAL);
    cr_expect(strstr(d.msg, "callback") != NULL, "%s", d.msg);
}

static size_t entries(const char *path)
{
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "ls -A '%s' | wc -l", path);
    FILE *p = popen(cmd, "r");
    size_t n = 0;
    cr_assert_eq(fscanf(p, "%zu", &n), 1);
    pclose(p);
    return n;
}

Test(stream, file_sink_refuses_existing_target_and_leaves_nothing, .init = setup,
     .fini = teardown)
{
    snprintf(src, sizeof(src), "%s/m.safetensors", dir);
    gen(src, 1, 512u << 10, 4);
    char out[256];
    snprintf(out, sizeof(out), "%s/m.safetensors", dst);
    FILE *f = fopen(out, "w");
    cr_assert_not_null(f);
    fputs("keep me", f);
    fclose(f);
    pinio_sink_file_cfg fc = { .dir = dst };
    pinio_diag d = { 0 };
    const char *in = src;
    cr_expect_eq(pinio_stream(&in, 1, NULL, &pinio_sink_file, &fc, NULL, &d), -EEXIST);
    cr_expect(strstr(d.msg, out) != NULL, "names the target: %s", d.msg);
    cr_expect_eq(entries(dst), 1, "no temporary file left");
    fc.overwrite = true;
    fc.verify = true;
    cr_expect_eq(pinio_stream(&in, 1, NULL, &pinio_sink_file, &fc, NULL, &d), 0, "%s", d.msg);
    cr_expect(same_file(src, out));
    cr_expect_eq(entries(dst), 1, "only the copy");
}

Test(stream, file_sink_missing_directory)
{
    pinio_sink_file_cfg fc = { .dir = "/var/tmp/pinio-stream-no-such-dir" };
    char p[64];
    cr_assert_eq(t_tmpdir("/var/tmp", "stream-src", p, sizeof p), 0);
    char path[128];
    snprintf(path, sizeof(path), "%s/m.safetensors", p);
    gen(path, 1, 256u << 10, 2);
    pinio_diag d = { 0 };
    const char *in = path;
    int rc = pinio_stream(&in, 1, NULL, &pinio_sink_file, &fc, NULL, &d);
    char cmd[200];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", p);
    cr_assert_eq(system(cmd), 0);
    cr_expect_eq(rc, -ENOENT);
    cr_expect(strstr(d.msg, "pinio-stream-no-such-dir") != NULL, "%s", d.msg);
}

Test(stream, sink_table)
{
    cr_expect_eq(pinio_sink_find("host"), &pinio_sink_host);
    cr_expect_eq(pinio_sink_find("file"), &pinio_sink_file);
    cr_expect_eq(pinio_sink_find("cuda"), &pinio_sink_cuda);
    cr_expect_eq(pinio_sink_find("hip"), &pinio_sink_hip);
    cr_expect_null(pinio_sink_find("nope"));
    size_t n = 0;
    while (pinio_sink_at(n))
        n++;
    cr_expect_eq(n, 4);
}

/* ---- --verify with every sink ---------------------------------------- */

/* The file's SHA-256 by another implementation (coreutils). */
static void sha256sum(const char *path, char hex[65])
{
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "sha256sum '%s'", path);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    cr_assert_eq(fscanf(p, "%64s", hex), 1);
    cr_assert_eq(pclose(p), 0);
}

static void on_sha(void *ctx, size_t file, const char *path, const char *hex)
{
    (void)path;
    cr_expect_eq(file, 0);
    snprintf(ctx, 65, "%s", hex);
}

/* Streams `src` to sink `name` verified against `want`, filtered or not,
 * with PINIO_FAULTS `faults` (NULL: none); returns the code. On success,
 * the digest must be `want` and the bytes hashed must add up to the file;
 * on failure, nothing may be left behind (file sink: no file; GPU: no
 * arena, nothing on the driver). */
static int verified_stream(const char *name, const char *want, bool filtered,
                           const char *faults, pinio_diag *d)
{
    void *fake = NULL;
    fake_stats_fn stats = NULL;
    bool gpu = strcmp(name, "cuda") == 0 || strcmp(name, "hip") == 0;
    if (gpu)
        stats = fake_gpu_load(name[0] == 'c' ? "PINIO_CUDA_LIB" : "PINIO_HIP_LIB", &fake);
    got g = { 0 };
    g.ntensors = 64;
    g.bytes = calloc(g.ntensors, sizeof(*g.bytes));
    pinio_sink_host_cfg hc = { .fn = on_fragment, .ctx = &g };
    pinio_sink_file_cfg fc = { .dir = dst, .overwrite = true };
    pinio_gpu_arena *arena = NULL;
    pinio_sink_gpu_cfg cc = { .out = &arena };
    const pinio_sink *sink = strcmp(name, "async") == 0 ? &async_test_sink : pinio_sink_find(name);
    cr_assert_not_null(sink);
    const void *cfg = sink == &pinio_sink_host   ? (const void *)&hc
                      : sink == &pinio_sink_file ? (const void *)&fc
                      : gpu                      ? (const void *)&cc
                                                 : (const void *)&g;
    /* One tensor: contiguous in the file whatever the order gen writes. */
    static const char *const filters[] = { "model.layers.1.input_layernorm.*" };
    char hex[65] = "";
    pinio_stream_opts o;
    pinio_stream_opts_default(&o);
    o.slot_size = 64u << 10;
    o.slots = 2;
    o.cache = PINIO_CACHE_COLD;
    o.verify = true;
    o.expected_sha256 = &want;
    o.nexpected = 1;
    o.sha256_fn = on_sha;
    o.sha256_ctx = hex;
    o.filters = filtered ? filters : NULL;
    o.nfilters = filtered ? 1 : 0;
    if (faults)
        setenv("PINIO_FAULTS", faults, 1);
    pinio_stream_report rep;
    const char *in = src;
    memset(d, 0, sizeof(*d));
    int rc = pinio_stream(&in, 1, &o, sink, cfg, &rep, d);
    unsetenv("PINIO_FAULTS");
    struct stat st;
    cr_assert_eq(stat(src, &st), 0);
    if (rc == 0) {
        cr_expect(rep.verified);
        cr_expect_str_eq(hex, want, "%s sink: the digest handed out", name);
        cr_expect_eq(rep.verify_landed_bytes + rep.verify_reread_bytes, (uint64_t)st.st_size,
                     "%s sink: every byte of the file hashed once", name);
        cr_expect_gt(rep.verify_landed_bytes, 0, "%s sink: bytes hashed in the slots", name);
        cr_expect(filtered ? rep.verify_reread_bytes > rep.verify_landed_bytes
                           : rep.verify_reread_bytes < 4096,
                  "%s sink: %llu bytes read again (filtered: %d)", name,
                  (unsigned long long)rep.verify_reread_bytes, filtered);
    } else {
        cr_expect_null(arena, "%s sink: no arena after a failure", name);
        char copy[200];
        snprintf(copy, sizeof(copy), "%s/m.safetensors", dst);
        if (sink == &pinio_sink_file)
            cr_expect(access(copy, F_OK) != 0 || same_file(src, copy),
                      "file sink: nothing published over the earlier good copy");
    }
    pinio_gpu_arena_free(arena);
    if (fake) {
        fake_stats fs;
        stats(&fs);
        cr_expect(fs.allocs_live == 0 && fs.registered_live == 0 && fs.ctx_retained == 0,
                  "%s: nothing left on the driver", name);
        dlclose(fake);
    }
    free(g.bytes);
    return rc;
}

/* Every sink: the right digest, filtered or not; a byte flipped in flight
 * (after the device said the read was fine) fails the digest, names the
 * file, and publishes nothing. */
Test(stream, verify_with_every_sink, .init = setup, .fini = teardown)
{
    snprintf(src, sizeof(src), "%s/m.safetensors", dir);
    gen(src, 1, 1u << 20, 12);
    char want[65];
    sha256sum(src, want);
    static const char *const sinks[] = { "host", "file", "async", "cuda", "hip" };
    pinio_diag d;
    for (size_t i = 0; i < sizeof(sinks) / sizeof(*sinks); i++) {
        for (int filtered = 0; filtered < 2; filtered++)
            cr_expect_eq(verified_stream(sinks[i], want, filtered, NULL, &d), 0, "%s: %s",
                         sinks[i], d.msg);
        for (int n = 1; n <= 3; n += 2) {
            char spec[32];
            snprintf(spec, sizeof(spec), "corrupt@%d", n);
            int rc = verified_stream(sinks[i], want, false, spec, &d);
            cr_expect_eq(rc, PINIO_EFORMAT, "%s sink, %s: %d %s", sinks[i], spec, rc, d.msg);
            cr_expect(strstr(d.msg, "sha256 mismatch") && strstr(d.msg, "m.safetensors"),
                      "%s: %s", sinks[i], d.msg);
        }
    }
    /* A wrong expectation fails too (the digest is compared, not just made). */
    char wrong[65];
    memcpy(wrong, want, sizeof(wrong));
    wrong[0] = wrong[0] == '0' ? '1' : '0';
    cr_expect_eq(verified_stream("host", wrong, true, NULL, &d), PINIO_EFORMAT, "%s", d.msg);
}

/* Digests are one per file as the inputs resolve: a surplus or missing one
 * would check a file against another's, so any other count is refused before
 * the sink sees a byte (it used to be ignored: surplus values dropped). */
Test(stream, expected_digests_must_be_one_per_file, .init = setup, .fini = teardown)
{
    snprintf(src, sizeof(src), "%s/ck", dir);
    gen(src, 2, 256u << 10, 4);
    static const char *const three[] = { NULL, NULL, NULL };
    got g = { 0 };
    pinio_sink_host_cfg hc = { .fn = on_fragment, .ctx = &g };
    const char *in = src;
    for (size_t n = 1; n <= 3; n += 2) {
        pinio_stream_opts o;
        pinio_stream_opts_default(&o);
        o.verify = true;
        o.expected_sha256 = three;
        o.nexpected = n;
        pinio_diag d = { 0 };
        cr_expect_eq(pinio_stream(&in, 1, &o, &pinio_sink_host, &hc, NULL, &d), PINIO_EDIGESTS,
                     "%zu digests for 2 files: %s", n, d.msg);
        char want[64];
        snprintf(want, sizeof(want), "%zu expected SHA-256 digest%s for 2 files", n,
                 n == 1 ? "" : "s");
        cr_expect_not_null(strstr(d.msg, want), "%s", d.msg);
        cr_expect_eq(g.fragments, 0, "nothing reached the sink");
    }
}
