/* pinio_mpi_load under #PINIO_MPI_TP, under mpiexec (plain main, like
 * test_mpi_load.c): rank 0 prints one line per case and 'N passed, N
 * failed' after an Allreduce of the failures; exit 0 only when every case
 * passed on every rank. Cases:
 *   random checkpoints (shapes of rank 1-4, dims 1-9 so that some are
 *     shorter than the world, dtypes of 1, 2, 4 and 8 bytes, rules that
 *     chunk along dim 0, 1, the last, keep whole or match nothing), loaded
 *     through the node's shared memory (auto), and with rounds of the
 *     default size and of 4 KiB (a round cuts runs):
 *     every rank's tensors are its chunks, computed here from the tensors'
 *     bytes as torch.chunk cuts them (ceil chunks, the last smaller, empty
 *     past the end), byte for byte, with their shapes and starts;
 *   F4, F6 and F8 tensors (E8M0 scales) split by rows and columns where
 *     every chunk is whole bytes, through shared memory and rounds;
 *   a larger checkpoint split on dim 0 and on dim 1: the group's storage
 *     reads (the report's and /proc/self/io's, cold, O_DIRECT) add up to
 *     one copy of the selected tensors, at most 1.1 times their bytes;
 *   the shared exchange: a rank's writes to its slices (views of the
 *     node's staging area where they are one run of it) stay its own;
 *   a selection (--filter): only the selected tensors, their chunks;
 *   verify: each file's digest is OpenSSL's over the file;
 *   the last rank with other split rules, or another world: one agreed
 *     -EINVAL on every rank naming it, never a hang; a world that is not
 *     the communicator's on every rank; split rules under another policy;
 *   a rule's dimension out of range for a tensor: the same -EINVAL and
 *     message on every rank, naming the tensor.
 */
#include <errno.h>
#include <inttypes.h>
#include <mpi.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pinio/mpi.h"
#include "pinio/save.h"
#include "tests/common/helpers.h"

static int rank, nranks;
static int failed_local;

#define CHECK(cond, ...)                                                                  \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "rank %d: %s:%d: check failed: %s: ", rank, __FILE__, __LINE__, \
                    #cond);                                                               \
            fprintf(stderr, __VA_ARGS__);                                                 \
            fprintf(stderr, "\n");                                                        \
            failed_local++;                                                               \
        }                                                                                 \
    } while (0)

static int passed, failed;

/* Ends a case: every rank's failures counted, rank 0 says how it went. */
static void done(const char *what)
{
    int any = 0;
    MPI_Allreduce(&failed_local, &any, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("%s: %s (n=%d)\n", any ? "FAIL" : "ok", what, nranks);
    any ? failed++ : passed++;
    failed_local = 0;
}

static uint64_t io_read_bytes(void)
{
    FILE *f = fopen("/proc/self/io", "r");
    if (!f)
        return 0;
    char line[128];
    uint64_t v = 0;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "read_bytes: %" SCNu64, &v) == 1)
            break;
    fclose(f);
    return v;
}

static uint64_t sum(uint64_t v)
{
    uint64_t s = 0;
    MPI_Allreduce(&v, &s, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    return s;
}

/* A tensor of the test's checkpoints: every rank generates the same ones
 * from the same seed; rank 0 writes them. */
typedef struct tt {
    char name[32];
    pinio_dtype dtype;
    unsigned rank;
    uint64_t shape[4];
    uint8_t *data;
    uint64_t nbytes;
    int dim; /* the rule that matches it: a dimension, or PINIO_SPLIT_WHOLE */
} tt;

static char dir[64], path[128];

static void make_dir(void)
{
    int rc = rank == 0 ? t_tmpdir("/var/tmp", "mpitp", dir, sizeof(dir)) : 0;
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rc < 0) {
        if (rank == 0)
            fprintf(stderr, "cannot make a test folder: %s\n", pinio_strerror(rc));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Bcast(dir, sizeof(dir), MPI_CHAR, 0, MPI_COMM_WORLD);
}

static void fill(tt *t, uint64_t *rng)
{
    uint64_t n = pinio_dtype_bits(t->dtype);
    for (unsigned d = 0; d < t->rank; d++)
        n *= t->shape[d];
    n /= 8;
    t->nbytes = n;
    t->data = malloc(n ? n : 1);
    if (!t->data)
        MPI_Abort(MPI_COMM_WORLD, 1);
    for (uint64_t i = 0; i < n; i++)
        t->data[i] = (uint8_t)t_rand(rng);
}

/* Rank 0 writes `ts` to `path` (named `name` in the test folder). */
static void save(const char *name, const tt *ts, size_t n)
{
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    int rc = 0;
    if (rank == 0) {
        pinio_save_tensor *st = calloc(n, sizeof(*st));
        for (size_t i = 0; st && i < n; i++)
            st[i] = (pinio_save_tensor){ .name = ts[i].name, .dtype = ts[i].dtype,
                                         .rank = ts[i].rank, .shape = ts[i].shape,
                                         .data = ts[i].data, .nbytes = ts[i].nbytes };
        pinio_save_opts so;
        pinio_save_opts_default(&so);
        so.no_sync = true;
        pinio_diag d = { 0 };
        rc = st ? pinio_save(path, st, n, &so, NULL, &d) : -ENOMEM;
        if (rc < 0)
            fprintf(stderr, "pinio_save: %s\n", d.msg);
        free(st);
    }
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rc < 0)
        MPI_Abort(MPI_COMM_WORLD, 1);
}

static void free_tensors(tt *ts, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(ts[i].data);
}

/* torch.chunk(t, world, dim)[r]'s rows: [*a, *b) along the dimension. */
static void chunk_rows(uint64_t size, uint32_t world, uint32_t r, uint64_t *a, uint64_t *b)
{
    uint64_t c = (size + world - 1) / world;
    *a = (uint64_t)r * c < size ? (uint64_t)r * c : size;
    *b = *a + c < size ? *a + c : size;
}

/* The held tensor `h` against rank `r`'s chunk of `t`, computed from t's
 * bytes (outer x rows x inner), not from anything pinio says. */
static void check_chunk(const pinio_mpi_checkpoint *cp, size_t i, const tt *t, uint32_t world,
                        uint32_t r)
{
    const pinio_plan_tensor *h = pinio_mpi_tensor(cp, i);
    CHECK(h && !strcmp(h->name, t->name), "tensor %zu is %s, want %s", i, h ? h->name : "-",
          t->name);
    if (!h)
        return;
    /* inner: bits, so that F4 and F6 chunks (whole bytes each) come out right */
    uint64_t esz = (pinio_dtype_bits(t->dtype) + 7) / 8;
    uint64_t shape[4], start[4] = { 0 }, outer = 1, inner = pinio_dtype_bits(t->dtype), a = 0,
             b = 1, rows = 1;
    memcpy(shape, t->shape, sizeof(shape));
    int d = t->dim;
    if (d != PINIO_SPLIT_WHOLE) {
        d = d < 0 ? d + (int)t->rank : d;
        rows = t->shape[d];
        chunk_rows(rows, world, r, &a, &b);
        shape[d] = b - a;
        start[d] = a;
        for (int k = 0; k < d; k++)
            outer *= t->shape[k];
        for (unsigned k = (unsigned)d + 1; k < t->rank; k++)
            inner *= t->shape[k];
    } else {
        inner = t->nbytes * 8;
    }
    /* the test's packed (F4, F6) chunks start and end on bytes: runs of
     * `run` bytes, `stride` apart in the tensor, from byte `first` */
    uint64_t run = (b - a) * inner / 8, stride = rows * inner / 8, first = a * inner / 8;
    CHECK((b - a) * inner % 8 == 0 && a * inner % 8 == 0, "%s: a cut inside a byte", t->name);
    uint64_t want = outer * run;
    CHECK(h->nbytes == want, "%s: %" PRIu64 " bytes, want %" PRIu64, t->name, h->nbytes, want);
    CHECK(h->rank == t->rank, "%s: rank %u", t->name, h->rank);
    for (unsigned k = 0; k < t->rank && k < h->rank; k++) {
        CHECK(h->shape[k] == shape[k], "%s: dim %u is %" PRIu64 ", want %" PRIu64, t->name, k,
              h->shape[k], shape[k]);
        if (h->sliced)
            CHECK(h->start[k] == start[k], "%s: start %u is %" PRIu64 ", want %" PRIu64,
                  t->name, k, h->start[k], start[k]);
    }
    pinio_view v;
    int rc = pinio_mpi_tensor_view(cp, i, &v);
    CHECK(rc == 0 && v.len == want, "%s: view %d of %zu bytes", t->name, rc, rc ? 0 : v.len);
    if (rc < 0 || v.len != want)
        return;
    CHECK(((uintptr_t)v.ptr % esz) == 0, "%s: at %p, not aligned to its %" PRIu64 "-byte elements",
          t->name, v.ptr, esz);
    const uint8_t *got = v.ptr;
    uint64_t bad = UINT64_MAX;
    for (uint64_t o = 0; o < outer && bad == UINT64_MAX; o++) {
        const uint8_t *src = t->data + o * stride + first, *dst = got + o * run;
        if (memcmp(src, dst, (size_t)run) != 0)
            for (uint64_t k = 0; k < run; k++)
                if (src[k] != dst[k]) {
                    bad = o * run + k;
                    break;
                }
    }
    CHECK(bad == UINT64_MAX, "%s (rank %u of %u, dim %d): wrong byte at %" PRIu64, t->name, r,
          world, t->dim, bad);
    pinio_view_release(&v);
}

/* Every held tensor against its chunk, found by name (the plan lists them
 * in file order, pinio_save's); `n` of them held. */
static void check_all(const pinio_mpi_checkpoint *cp, const tt *ts, size_t n)
{
    CHECK(pinio_mpi_count(cp) == n, "holds %zu of %zu", pinio_mpi_count(cp), n);
    for (size_t i = 0; i < pinio_mpi_count(cp); i++) {
        const char *name = pinio_mpi_tensor(cp, i)->name;
        size_t k = 0;
        while (k < n && strcmp(ts[k].name, name))
            k++;
        CHECK(k < n, "holds %s, which it should not", name);
        if (k < n)
            check_chunk(cp, i, &ts[k], (uint32_t)nranks, (uint32_t)rank);
    }
}

static int tp_load(pinio_mpi_opts *o, const pinio_split_rule *rules, size_t nrules,
                   pinio_mpi_checkpoint **cp, pinio_mpi_report *rep, pinio_diag *d)
{
    const char *paths[] = { path };
    o->policy = PINIO_MPI_TP;
    o->split = rules;
    o->nsplit = nrules;
    memset(d, 0, sizeof(*d));
    return pinio_mpi_load(MPI_COMM_WORLD, paths, 1, o, cp, rep, d);
}

static const pinio_dtype dtypes[] = { PINIO_DTYPE_U8, PINIO_DTYPE_I8, PINIO_DTYPE_F16,
                                      PINIO_DTYPE_BF16, PINIO_DTYPE_I32, PINIO_DTYPE_F32,
                                      PINIO_DTYPE_F64, PINIO_DTYPE_I64 };

/* Random tensors t0..t{n-1} and one rule per tensor, by exact name: a
 * dimension (0, 1 or the last, written negative), whole, or none (then
 * no rule matches it and a catch-all keeping whole is not given). */
static size_t random_case(uint64_t *rng, tt *ts, size_t max, pinio_split_rule *rules,
                          size_t *nrules)
{
    size_t n = 3 + (size_t)(t_rand(rng) % (max - 2));
    *nrules = 0;
    for (size_t i = 0; i < n; i++) {
        tt *t = &ts[i];
        memset(t, 0, sizeof(*t));
        snprintf(t->name, sizeof(t->name), "layer.%zu.w", i);
        t->dtype = dtypes[t_rand(rng) % (sizeof(dtypes) / sizeof(dtypes[0]))];
        t->rank = 1 + (unsigned)(t_rand(rng) % 4);
        for (unsigned k = 0; k < t->rank; k++)
            t->shape[k] = 1 + t_rand(rng) % (k == 0 ? 40 : 9);
        fill(t, rng);
        unsigned pick = (unsigned)(t_rand(rng) % 5);
        t->dim = pick == 0 ? 0 : pick == 1 && t->rank > 1 ? 1 : pick == 2 ? -1
                 : pick == 3 ? PINIO_SPLIT_WHOLE : PINIO_SPLIT_WHOLE;
        if (pick != 4)
            rules[(*nrules)++] = (pinio_split_rule){ .pattern = t->name,
                                                     .dim = t->dim };
    }
    return n;
}

static void case_random(void)
{
    uint64_t rng = 0x7e1a + 0;
    tt ts[16];
    pinio_split_rule rules[16];
    for (int iter = 0; iter < 8; iter++) {
        size_t nrules = 0, n = random_case(&rng, ts, 16, rules, &nrules);
        char name[32];
        snprintf(name, sizeof(name), "r%d.safetensors", iter);
        save(name, ts, n);
        /* the node's shared memory (auto, every rank here is on one
         * node), then the rounds at the default size and at 4 KiB */
        for (int way = 0; way < 3; way++) {
            int small = way == 2;
            pinio_mpi_opts o;
            pinio_mpi_opts_default(&o);
            o.exchange = way ? PINIO_MPI_EXCHANGE_ALLTOALLV : PINIO_MPI_EXCHANGE_AUTO;
            o.bcast_piece = small ? 4096 : 0;
            o.cache = iter % 2 ? PINIO_CACHE_COLD : PINIO_CACHE_HOT;
            pinio_mpi_checkpoint *cp = NULL;
            pinio_mpi_report rep;
            pinio_diag d;
            int rc = tp_load(&o, rules, nrules, &cp, &rep, &d);
            CHECK(rc == 0, "iteration %d: %s", iter, d.msg);
            if (rc == 0) {
                check_all(cp, ts, n);
                CHECK(rep.policy == PINIO_MPI_TP &&
                          rep.exchange == (way ? PINIO_MPI_EXCHANGE_ALLTOALLV
                                               : PINIO_MPI_EXCHANGE_SHARED) &&
                          rep.world == (uint32_t)nranks,
                      "report: policy %d exchange %d world %u", rep.policy, rep.exchange,
                      rep.world);
                CHECK(rep.job_read_bytes == rep.plan_read_bytes,
                      "the ranks read %" PRIu64 ", one copy is %" PRIu64, rep.job_read_bytes,
                      rep.plan_read_bytes);
                CHECK(!small || rep.rounds > 1 || rep.plan_read_bytes <= 4096,
                      "%zu rounds of 4 KiB", rep.rounds);
                CHECK(way || rep.rounds == 0, "shared memory: %zu rounds", rep.rounds);
            }
            pinio_mpi_release(cp);
        }
        free_tensors(ts, n);
    }
    done("random shapes, dtypes and rules, shared memory and rounds: every rank's chunks byte "
         "for byte");
}

/* An MXFP4/FP8-style checkpoint: F4 and F6 weights with F8_E8M0 scales and
 * an FP8 matrix, split by rows and by columns (every chunk at worlds 1-4
 * whole bytes: 64 F4 columns cut 22/22/20 at world 3), and a 3-dimensional
 * F4 tensor whose chunks are strided runs. */
static void case_packed(void)
{
    static const struct { const char *name; pinio_dtype dt; unsigned rank; uint64_t s[3]; int dim; }
        spec[] = {
            { "l.fp4.rows", PINIO_DTYPE_F4, 2, { 8, 64 }, 0 },
            { "l.fp4.cols", PINIO_DTYPE_F4, 2, { 8, 64 }, 1 },
            { "l.fp4.3d", PINIO_DTYPE_F4, 3, { 2, 12, 4 }, 1 },
            { "l.fp6a", PINIO_DTYPE_F6_E2M3, 2, { 4, 48 }, 1 },
            { "l.fp6b", PINIO_DTYPE_F6_E3M2, 2, { 12, 8 }, 0 },
            { "l.scales", PINIO_DTYPE_F8_E8M0, 2, { 8, 2 }, 0 },
            { "l.fp8", PINIO_DTYPE_F8_E4M3, 2, { 8, 24 }, -1 },
            { "l.fp8fnuz", PINIO_DTYPE_F8_E5M2FNUZ, 1, { 24 }, PINIO_SPLIT_WHOLE },
        };
    enum { N = sizeof(spec) / sizeof(spec[0]) };
    tt ts[N];
    pinio_split_rule rules[N];
    uint64_t rng = 0xf4;
    for (size_t i = 0; i < N; i++) {
        memset(&ts[i], 0, sizeof(ts[i]));
        snprintf(ts[i].name, sizeof(ts[i].name), "%s", spec[i].name);
        ts[i].dtype = spec[i].dt;
        ts[i].rank = spec[i].rank;
        memcpy(ts[i].shape, spec[i].s, sizeof(spec[i].s));
        ts[i].dim = spec[i].dim;
        fill(&ts[i], &rng);
        rules[i] = (pinio_split_rule){ .pattern = ts[i].name, .dim = ts[i].dim };
    }
    save("packed.safetensors", ts, N);
    for (int way = 0; way < 2; way++) {
        pinio_mpi_opts o;
        pinio_mpi_opts_default(&o);
        o.exchange = way ? PINIO_MPI_EXCHANGE_ALLTOALLV : PINIO_MPI_EXCHANGE_AUTO;
        pinio_mpi_checkpoint *cp = NULL;
        pinio_mpi_report rep;
        pinio_diag d;
        int rc = tp_load(&o, rules, N, &cp, &rep, &d);
        CHECK(rc == 0, "packed dtypes: %s", d.msg);
        if (rc == 0)
            check_all(cp, ts, N);
        pinio_mpi_release(cp);
    }
    free_tensors(ts, N);
    done("F4, F6 and F8 tensors (E8M0 scales): every rank's chunks byte for byte");
}

/* A larger checkpoint: 2-D matrices of 256 KiB to 1 MiB and norms. */
static size_t big_case(tt *ts)
{
    uint64_t rng = 99;
    size_t n = 0;
    for (int l = 0; l < 4; l++) {
        tt *w = &ts[n++], *nrm = &ts[n++];
        memset(w, 0, sizeof(*w));
        memset(nrm, 0, sizeof(*nrm));
        snprintf(w->name, sizeof(w->name), "l%d.proj.weight", l);
        w->dtype = l % 2 ? PINIO_DTYPE_BF16 : PINIO_DTYPE_F32;
        w->rank = 2;
        w->shape[0] = 256 + 64 * (uint64_t)l;
        w->shape[1] = 1027;
        fill(w, &rng);
        snprintf(nrm->name, sizeof(nrm->name), "l%d.norm.weight", l);
        nrm->dtype = PINIO_DTYPE_F32;
        nrm->rank = 1;
        nrm->shape[0] = 1027;
        nrm->dim = PINIO_SPLIT_WHOLE;
        fill(nrm, &rng);
    }
    return n;
}

static void case_read_once(int dim)
{
    tt ts[8];
    size_t n = big_case(ts);
    uint64_t data = 0;
    for (size_t i = 0; i < n; i++) {
        if (ts[i].rank == 2)
            ts[i].dim = dim;
        data += ts[i].nbytes;
    }
    save("big.safetensors", ts, n);
    pinio_split_rule rules[] = { { "*.norm.weight", PINIO_SPLIT_WHOLE }, { "*.weight", dim } };
    pinio_mpi_opts o;
    pinio_mpi_opts_default(&o);
    o.cache = PINIO_CACHE_COLD;
    pinio_mpi_checkpoint *cp = NULL;
    pinio_mpi_report rep;
    pinio_diag d;
    uint64_t before = io_read_bytes();
    int rc = tp_load(&o, rules, 2, &cp, &rep, &d);
    uint64_t io = io_read_bytes() - before, all = sum(io);
    CHECK(rc == 0, "%s", d.msg);
    if (rc == 0) {
        check_all(cp, ts, n);
        uint64_t job = 0;
        for (int r = 0; r < nranks; r++)
            job += pinio_mpi_rank_read_bytes(cp, r);
        CHECK(job == rep.job_read_bytes && job == sum(rep.read_bytes),
              "the ranks' read bytes add up to %" PRIu64 ", not %" PRIu64, job,
              rep.job_read_bytes);
        if (rank == 0)
            printf("  dim %d: %d ranks read %" PRIu64 " bytes (kernel: %" PRIu64 ") of %" PRIu64
                   " selected\n", dim, nranks, rep.job_read_bytes, all, data);
        CHECK(rep.full_bytes == data, "full bytes %" PRIu64 " of %" PRIu64, rep.full_bytes, data);
        CHECK(rep.job_read_bytes * 10 <= data * 11,
              "the ranks read %" PRIu64 " bytes, more than 1.1 x the %" PRIu64 " selected",
              rep.job_read_bytes, data);
        /* the kernel's count: the stripes, and the few pages each rank
         * reads before them (its headers, the identity's sampled blocks,
         * read buffered: the first rank's readahead) */
        CHECK(all * 10 <= data * 11 + (uint64_t)nranks * (64u << 10) + (256u << 10),
              "the ranks read %" PRIu64 " bytes from storage (/proc/self/io), one copy is %"
              PRIu64, all, data);
        CHECK(all + (64u << 10) >= data, "the ranks read %" PRIu64 " bytes from storage, less "
              "than the %" PRIu64 " they hold together", all, data);
    }
    pinio_mpi_release(cp);
    free_tensors(ts, n);
    char what[96];
    snprintf(what, sizeof(what), "a checkpoint split on dim %d: read once by the group, chunks "
             "right", dim);
    done(what);
}

/* The shared exchange: slices that are views of the node's staging area
 * (the norms, held whole by every rank; the dim-0 chunks) are each rank's
 * own. Rank 0 overwrites every tensor it holds; the others still hold the
 * file's bytes, and so do rank 0's views after a second load. */
static void case_shared_private(void)
{
    tt ts[8];
    size_t n = big_case(ts);
    for (size_t i = 0; i < n; i++)
        if (ts[i].rank == 2)
            ts[i].dim = 0;
    save("priv.safetensors", ts, n);
    pinio_split_rule rules[] = { { "*.norm.weight", PINIO_SPLIT_WHOLE }, { "*.weight", 0 } };
    pinio_mpi_opts o;
    pinio_mpi_opts_default(&o);
    o.exchange = PINIO_MPI_EXCHANGE_SHARED;
    pinio_mpi_checkpoint *cp = NULL, *again = NULL;
    pinio_mpi_report rep;
    pinio_diag d;
    int rc = tp_load(&o, rules, 2, &cp, &rep, &d);
    CHECK(rc == 0 && rep.exchange == PINIO_MPI_EXCHANGE_SHARED, "%d %s", rc, d.msg);
    if (rc == 0)
        check_all(cp, ts, n);
    /* a second job while the first one's memory is still mapped */
    int rc2 = tp_load(&o, rules, 2, &again, &rep, &d);
    CHECK(rc2 == 0, "second load: %s", d.msg);
    MPI_Barrier(MPI_COMM_WORLD);
    for (size_t i = 0; rc == 0 && rank == 0 && i < pinio_mpi_count(cp); i++) {
        pinio_view v;
        if (pinio_mpi_tensor_view(cp, i, &v) == 0) {
            /* as torch does with the buffer (views are not unique, so
             * pinio_view_data_mut() declines): through the pointer */
            memset((void *)(uintptr_t)v.ptr, 0xa5, v.len);
            pinio_view_release(&v);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rc == 0 && rank != 0)
        check_all(cp, ts, n);
    if (rc2 == 0)
        check_all(again, ts, n);
    for (size_t i = 0; rc == 0 && rank == 0 && i < pinio_mpi_count(cp); i++) {
        pinio_view v;
        if (pinio_mpi_tensor_view(cp, i, &v) == 0) {
            const uint8_t *b = v.ptr;
            size_t k = 0;
            while (k < v.len && b[k] == 0xa5)
                k++;
            CHECK(k == v.len, "tensor %zu: its own write is lost at byte %zu", i, k);
            pinio_view_release(&v);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    pinio_mpi_release(cp);
    pinio_mpi_release(again);
    free_tensors(ts, n);
    done("shared memory: a rank's writes to its slices and whole tensors stay its own");
}

static void case_filters(void)
{
    tt ts[8];
    size_t n = big_case(ts);
    save("big.safetensors", ts, n);
    pinio_split_rule rules[] = { { "*.proj.weight", 1 } };
    const char *filters[] = { "l1", "l3.norm.weight" };
    pinio_mpi_opts o;
    pinio_mpi_opts_default(&o);
    o.filters = filters;
    o.nfilters = 2;
    pinio_mpi_checkpoint *cp = NULL;
    pinio_mpi_report rep;
    pinio_diag d;
    int rc = tp_load(&o, rules, 1, &cp, &rep, &d);
    CHECK(rc == 0, "%s", d.msg);
    if (rc == 0) {
        /* the selection, first in the list: l1's two and l3's norm */
        tt sel[3];
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            if (!strncmp(ts[i].name, "l1.", 3) || !strcmp(ts[i].name, "l3.norm.weight")) {
                sel[k] = ts[i];
                sel[k++].dim = ts[i].rank == 2 ? 1 : PINIO_SPLIT_WHOLE;
            }
        check_all(cp, sel, k);
    }
    pinio_mpi_release(cp);
    free_tensors(ts, n);
    done("a selection: only its tensors, their chunks");
}

static void case_verify(void)
{
    tt ts[8];
    size_t n = big_case(ts);
    save("big.safetensors", ts, n);
    pinio_split_rule rules[] = { { "*", 0 } };
    pinio_mpi_opts o;
    pinio_mpi_opts_default(&o);
    o.verify = true;
    o.cache = PINIO_CACHE_COLD;
    pinio_mpi_checkpoint *cp = NULL;
    pinio_mpi_report rep;
    pinio_diag d;
    int rc = tp_load(&o, rules, 1, &cp, &rep, &d);
    CHECK(rc == 0, "%s", d.msg);
    /* OpenSSL over the file, read here */
    FILE *f = fopen(path, "rb");
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
    uint8_t buf[1 << 16], md[32];
    size_t got;
    while (f && (got = fread(buf, 1, sizeof(buf), f)) > 0)
        EVP_DigestUpdate(ctx, buf, got);
    unsigned mdlen = 0;
    EVP_DigestFinal_ex(ctx, md, &mdlen);
    EVP_MD_CTX_free(ctx);
    if (f)
        fclose(f);
    char hex[65];
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
    if (rc == 0) {
        CHECK(rep.verified, "not verified");
        const char *s = pinio_mpi_sha256(cp, 0);
        CHECK(s && !strcmp(s, hex), "digest %s, the file's is %s", s ? s : "(none)", hex);
        for (size_t i = 0; i < n; i++)
            ts[i].dim = 0;
        check_all(cp, ts, n);
    }
    pinio_mpi_release(cp);
    /* a wrong expected digest: one verdict on every rank */
    const char *wrong[] = { "0000000000000000000000000000000000000000000000000000000000000000" };
    o.expected_sha256 = wrong;
    o.nexpected = 1;
    cp = NULL;
    rc = tp_load(&o, rules, 1, &cp, &rep, &d);
    CHECK(rc == PINIO_EFORMAT && strstr(d.msg, "sha256 mismatch") && !cp, "%d: %s", rc, d.msg);
    free_tensors(ts, n);
    done("verify: the file's SHA-256, a wrong one refused on every rank");
}

/* The same code and message on every rank, and no result. */
static void check_agreed(int rc, int want, const pinio_diag *d, const char *needle,
                         pinio_mpi_checkpoint *cp)
{
    CHECK(rc == want, "%d, want %d: %s", rc, want, d->msg);
    CHECK(strstr(d->msg, needle) != NULL, "'%s' does not say '%s'", d->msg, needle);
    CHECK(cp == NULL, "a result after a failure");
    char msg[sizeof(d->msg)];
    memcpy(msg, d->msg, sizeof(msg));
    MPI_Bcast(msg, (int)sizeof(msg), MPI_CHAR, 0, MPI_COMM_WORLD);
    CHECK(!strcmp(msg, d->msg), "rank 0 says '%s', this rank '%s'", msg, d->msg);
}

static void case_disagree(void)
{
    tt ts[8];
    size_t n = big_case(ts);
    save("big.safetensors", ts, n);
    pinio_mpi_checkpoint *cp = NULL;
    pinio_mpi_report rep;
    pinio_diag d;
    char want[64];
    if (nranks > 1) {
        /* the last rank chunks along another dimension */
        pinio_split_rule mine[] = { { "*.proj.weight", rank == nranks - 1 ? 1 : 0 } };
        pinio_mpi_opts o;
        pinio_mpi_opts_default(&o);
        int rc = tp_load(&o, mine, 1, &cp, &rep, &d);
        snprintf(want, sizeof(want), "rank %d of %d: its split rules", nranks - 1, nranks);
        check_agreed(rc, -EINVAL, &d, want, cp);
        /* the last rank counts more ranks */
        pinio_split_rule same[] = { { "*.proj.weight", 0 } };
        pinio_mpi_opts_default(&o);
        o.world = rank == nranks - 1 ? (uint32_t)nranks + 1 : 0;
        cp = NULL;
        rc = tp_load(&o, same, 1, &cp, &rep, &d);
        snprintf(want, sizeof(want), "rank %d of %d: pinio_mpi_load: world %d", nranks - 1,
                 nranks, nranks + 1);
        check_agreed(rc, -EINVAL, &d, want, cp);
    }
    /* every rank's world not the communicator's */
    pinio_split_rule same[] = { { "*.proj.weight", 0 } };
    pinio_mpi_opts o;
    pinio_mpi_opts_default(&o);
    o.world = (uint32_t)nranks + 2;
    cp = NULL;
    int rc = tp_load(&o, same, 1, &cp, &rep, &d);
    check_agreed(rc, -EINVAL, &d, "is not the communicator's", cp);
    /* split rules under replicate */
    const char *paths[] = { path };
    pinio_mpi_opts_default(&o);
    o.split = same;
    o.nsplit = 1;
    cp = NULL;
    rc = pinio_mpi_load(MPI_COMM_WORLD, paths, 1, &o, &cp, &rep, &d);
    check_agreed(rc, -EINVAL, &d, "split rules go with the tp policy", cp);
    /* a dimension out of range: the plan's message, on every rank */
    pinio_split_rule far[] = { { "*.norm.weight", 1 } };
    pinio_mpi_opts_default(&o);
    cp = NULL;
    rc = tp_load(&o, far, 1, &cp, &rep, &d);
    check_agreed(rc, -EINVAL, &d, "norm.weight", cp);
    free_tensors(ts, n);
    done("other rules or world on one rank, a bad world, a dimension out of range: one agreed "
         "error");
}

int main(int argc, char **argv)
{
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    make_dir();
    case_random();
    case_packed();
    case_read_once(0);
    case_read_once(1);
    case_shared_private();
    case_filters();
    case_verify();
    case_disagree();
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        t_rm_rf(dir);
        printf("%d passed, %d failed\n", passed, failed);
    }
    MPI_Finalize();
    return failed ? 1 : 0;
}
