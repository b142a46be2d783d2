/* pinio_mpi_load under mpiexec (Criterion cannot host MPI: plain main).
 *
 * Every case is collective; each rank checks its own result, and rank 0
 * prints one line per case and, last, 'N passed, N failed' after an
 * Allreduce of the failures. Exit 0 only when every case passed on every
 * rank. Cases:
 *   replicate (Allgatherv, then pipelined broadcasts): every byte on every
 *     rank checked against the generator; the ranks' storage reads
 *     (/proc/self/io read_bytes, O_DIRECT) add up to one copy of the data;
 *   shard (byte-balanced split): every tensor held by exactly one rank and
 *     right there, storage reads again one copy;
 *   shard by each rank's own filters;
 *   node (one node: the machine; then a split into 2 simulated nodes,
 *     exchanged by pipelined broadcasts between the leaders): every byte on
 *     every rank, storage reads one copy per job, and one copy of memory
 *     per node: the ranks' proportional shares (Pss) of the mapping add up
 *     to the node's copy once, not once per rank, and it is the memfd;
 *   an injected read error on the last rank (PINIO_FAULTS=eio@1x1000000),
 *     under replicate and under node: every rank returns the same code and
 *     message, naming that rank and the file;
 *   a missing input: rank 0's error on every rank;
 *   more ranks than tensors (every policy) and a selection of nothing:
 *     empty stripes;
 *   a rank given its own path (every policy): an exact copy loads right
 *     from it; a copy of the same size with another header, the same
 *     header with other data (a stale copy), another size, or no file, is
 *     one agreed error on every rank naming that rank and its file, before
 *     any data byte moves;
 *   arguments that differ on one rank (the job's filters, a selection of
 *     nothing there under every policy, shard filters on some ranks only,
 *     the node split) and filters with shard filters: one agreed error,
 *     never a hang or wrong bytes; shard filters that select nothing on one
 *     rank: that rank holds nothing, the others their tensors;
 *   verify under replicate, shard (split and own filters) and node, on a
 *     3-shard checkpoint: each digest the file's (OpenSSL over the file,
 *     not pinio), every file byte hashed exactly once by the job; a wrong
 *     expected digest and a byte flipped in one rank's read (PINIO_FAULTS
 *     corrupt@1 on the last rank) are one "sha256 mismatch" on every rank;
 *     a digest count that does not match the files is PINIO_EDIGESTS.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <mpi.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pinio/gen.h"
#include "pinio/mpi.h"
#include "tests/common/helpers.h"

#define SEED 77

static int rank, nranks;
static int failed_local; /* failures of the current case on this rank */

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

/* Storage bytes this process has read so far (/proc/self/io read_bytes). */
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

/* The mapping holding `p` in /proc/self/smaps: its Pss in KiB, and
 * whether its name holds `name`. -1 when not found. */
static long mapping_pss_kb(const void *p, const char *name, int *named)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f)
        return -1;
    char line[512];
    long pss = -1;
    bool in = false;
    uintptr_t a = (uintptr_t)p;
    while (fgets(line, sizeof(line), f)) {
        unsigned long lo, hi;
        long kb;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, ' ') > strchr(line, '-')) {
            if (in)
                break;
            in = a >= lo && a < hi;
            if (in)
                *named = strstr(line, name) != NULL;
        } else if (in && sscanf(line, "Pss: %ld kB", &kb) == 1) {
            pss = kb;
        }
    }
    fclose(f);
    return pss;
}

/* A checkpoint written by rank 0, its path known to every rank. */
static char dir[64], ck[128];

static void make_checkpoint(uint64_t size, size_t tensors, unsigned shards)
{
    int rc = 0;
    if (rank == 0) {
        rc = t_tmpdir("/var/tmp", "mpi", dir, sizeof(dir));
        if (rc == 0) {
            snprintf(ck, sizeof(ck), shards > 1 ? "%s/ck" : "%s/m.safetensors", dir);
            pinio_gen_opts g;
            pinio_gen_opts_default(&g);
            g.size = size;
            g.tensors = tensors;
            g.shards = shards;
            g.seed = SEED;
            rc = pinio_gen_write(ck, &g, NULL, NULL);
        }
    }
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rc < 0) {
        if (rank == 0)
            fprintf(stderr, "cannot write the test checkpoint: %s\n", pinio_strerror(rc));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Bcast(dir, sizeof(dir), MPI_CHAR, 0, MPI_COMM_WORLD);
    MPI_Bcast(ck, sizeof(ck), MPI_CHAR, 0, MPI_COMM_WORLD);
}

static void remove_checkpoint(void)
{
    MPI_Barrier(MPI_COMM_WORLD);
    int rc = rank == 0 ? t_rm_rf(dir) : 0;
    if (rc < 0)
        fprintf(stderr, "cannot remove %s: %s\n", dir, pinio_strerror(rc));
}

/* Every held tensor's bytes against the generator; returns the bytes checked. */
static uint64_t verify_held(const pinio_mpi_checkpoint *cp)
{
    uint64_t bytes = 0;
    for (size_t i = 0; i < pinio_mpi_count(cp); i++) {
        const pinio_plan_tensor *t = pinio_mpi_tensor(cp, i);
        pinio_view v;
        int rc = pinio_mpi_tensor_view(cp, i, &v);
        CHECK(rc == 0, "view of %s: %d", t->name, rc);
        if (rc < 0)
            continue;
        uint64_t bad = 0;
        CHECK(v.len == t->nbytes, "%s: view of %zu bytes", t->name, v.len);
        CHECK(pinio_gen_verify(SEED, t->name, 0, v.ptr, t->nbytes, &bad),
              "tensor %s wrong at byte %" PRIu64, t->name, bad);
        bytes += t->nbytes;
        pinio_view_release(&v);
    }
    return bytes;
}

/* The cases' options: cold (O_DIRECT: the storage reads show in
 * /proc/self/io), small broadcast pieces (many in flight). */
static pinio_mpi_opts cold_opts(pinio_mpi_policy policy, pinio_mpi_exchange how)
{
    pinio_mpi_opts o;
    pinio_mpi_opts_default(&o);
    o.policy = policy;
    o.exchange = how;
    o.cache = PINIO_CACHE_COLD;
    o.bcast_piece = 64u << 10;
    return o;
}

static pinio_mpi_checkpoint *load(const pinio_mpi_opts *o, pinio_mpi_report *rep, uint64_t *io)
{
    const char *paths[] = { ck };
    pinio_mpi_checkpoint *cp = NULL;
    pinio_diag d;
    uint64_t before = io_read_bytes();
    int rc = pinio_mpi_load(MPI_COMM_WORLD, paths, 1, o, &cp, rep, &d);
    *io = io_read_bytes() - before;
    CHECK(rc == 0, "pinio_mpi_load: %s", d.msg);
    return cp;
}

/* Sum of a u64 over ranks. */
static uint64_t sum(uint64_t v)
{
    uint64_t s = 0;
    MPI_Allreduce(&v, &s, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    return s;
}

/* The storage bytes the ranks read, from the kernel, add up to one copy:
 * at least the tensor bytes, at most the plan's reads (aligned, merged
 * holes) and a few header pages. A rank reading a stripe twice, or every
 * rank reading everything, exceeds it. */
static void check_read_once(const pinio_mpi_report *rep, uint64_t io, uint64_t slack)
{
    uint64_t all = sum(io);
    CHECK(rep->job_read_bytes >= rep->plan_read_bytes &&
              rep->job_read_bytes <= rep->plan_read_bytes + slack,
          "engine reads %" PRIu64 " != plan %" PRIu64, rep->job_read_bytes,
          rep->plan_read_bytes);
    CHECK(io <= rep->read_bytes + (64u << 10), "this rank read %" PRIu64 " from storage, its stripe is %" PRIu64,
          io, rep->read_bytes);
    CHECK(all <= rep->plan_read_bytes + slack + (256u << 10) && all + (64u << 10) >= rep->plan_read_bytes,
          "ranks read %" PRIu64 " bytes from storage, one copy is %" PRIu64, all,
          rep->plan_read_bytes);
}

/* A replicated result: all `tensors` of the plan on this rank, every byte right. */
static pinio_plan_info holds_all(const pinio_mpi_checkpoint *cp, size_t tensors)
{
    pinio_plan_info pi;
    pinio_plan_get_info(pinio_mpi_plan(cp), &pi);
    CHECK(pinio_mpi_count(cp) == pi.tensors && pi.tensors == tensors, "holds %zu of %zu",
          pinio_mpi_count(cp), pi.tensors);
    CHECK(verify_held(cp) == pi.bytes, "every byte on every rank");
    return pi;
}

static void case_replicate(pinio_mpi_exchange how)
{
    make_checkpoint(6u << 20, 27, 3);
    pinio_mpi_opts o = cold_opts(PINIO_MPI_REPLICATE, how);
    pinio_mpi_report rep;
    uint64_t io = 0;
    pinio_mpi_checkpoint *cp = load(&o, &rep, &io);
    if (cp) {
        pinio_plan_info pi = holds_all(cp, 27);
        CHECK(rep.exchange == (how ? how : PINIO_MPI_EXCHANGE_ALLGATHERV), "exchange %d",
              rep.exchange);
        check_read_once(&rep, io, 0);
        for (int r = 0; r < nranks; r++)
            CHECK(pinio_mpi_rank_read_bytes(cp, r) > 0 || nranks > (int)pi.reads,
                  "rank %d read nothing", r);
    }
    pinio_mpi_release(cp);
    remove_checkpoint();
}

static void case_replicate_allgatherv(void)
{
    case_replicate(PINIO_MPI_EXCHANGE_ALLGATHERV);
}

static void case_replicate_bcast(void)
{
    case_replicate(PINIO_MPI_EXCHANGE_BCAST);
}

/* Node-local: `node_ranks` 0 (the machine is one node) or a simulated
 * split. Every rank holds every byte; the pages are the node's memfd. */
static void case_node(int node_ranks, pinio_mpi_exchange how, int want_nodes)
{
    make_checkpoint(6u << 20, 27, 3);
    pinio_mpi_opts o = cold_opts(PINIO_MPI_NODE, how);
    o.node_ranks = node_ranks;
    pinio_mpi_report rep;
    uint64_t io = 0;
    pinio_mpi_checkpoint *cp = load(&o, &rep, &io);
    long pss = 0;
    int named = 0;
    if (cp) {
        pinio_plan_info pi = holds_all(cp, 27);
        CHECK(rep.nodes == want_nodes, "%d nodes, want %d", rep.nodes, want_nodes);
        CHECK(rep.node_bytes >= pi.dest_bytes, "node copy %" PRIu64, rep.node_bytes);
        CHECK(rep.local_rank != 0 ? rep.received_bytes == 0
                                  : rep.received_bytes > 0 || rep.nodes == 1,
              "local rank %d received %" PRIu64, rep.local_rank, rep.received_bytes);
        check_read_once(&rep, io, 0);
        /* verify_held touched every page on every rank: each maps all of it */
        pinio_view v;
        if (pinio_mpi_tensor_view(cp, 0, &v) == 0) {
            pss = mapping_pss_kb(v.ptr, "memfd:pinio-node", &named);
            pinio_view_release(&v);
        }
        CHECK(named, "the tensors are views of the node's memfd");
    }
    /* One copy per node: the Pss of all ranks add up to nodes x copy
     * (each rank's share is truncated to a KiB: a few KiB short at most);
     * a private copy per rank would give ranks x copy. */
    uint64_t all_pss = sum(pss > 0 ? (uint64_t)pss : 0);
    uint64_t copy_kb = cp ? rep.node_bytes >> 10 : 0;
    CHECK(!cp || (all_pss <= copy_kb * (uint64_t)rep.nodes &&
                  all_pss + 4 * (uint64_t)nranks >= copy_kb * (uint64_t)rep.nodes),
          "ranks' Pss add up to %" PRIu64 " KiB, %d node copies are %" PRIu64 " KiB", all_pss,
          rep.nodes, copy_kb * (uint64_t)rep.nodes);
    pinio_mpi_release(cp);
    remove_checkpoint();
}

static void case_node_shared(void)
{
    case_node(0, PINIO_MPI_EXCHANGE_AUTO, 1);
}

/* Two simulated nodes (one when there is one rank): ranks 0..k-1 and k.. */
static void case_node_split2(void)
{
    case_node((nranks + 1) / 2, PINIO_MPI_EXCHANGE_BCAST, nranks > 1 ? 2 : 1);
}

static void case_shard_split(void)
{
    make_checkpoint(6u << 20, 27, 1);
    pinio_mpi_opts o = cold_opts(PINIO_MPI_SHARD, PINIO_MPI_EXCHANGE_AUTO);
    pinio_mpi_report rep;
    uint64_t io = 0;
    pinio_mpi_checkpoint *cp = load(&o, &rep, &io);
    if (cp) {
        pinio_plan_info pi;
        pinio_plan_get_info(pinio_mpi_plan(cp), &pi);
        uint64_t mine = verify_held(cp);
        CHECK(sum(mine) == pi.bytes, "the shards add up to the checkpoint");
        CHECK(sum(pinio_mpi_count(cp)) == pi.tensors, "each tensor on exactly one rank");
        CHECK(rep.received_bytes == 0, "a shard exchanges nothing");
        /* whole tensors: the read at each boundary between ranks is read
         * by both neighbours, nothing else twice */
        uint64_t maxlen = 0;
        for (size_t i = 0; i < pi.reads; i++)
            if (pinio_plan_read_at(pinio_mpi_plan(cp), i)->len > maxlen)
                maxlen = pinio_plan_read_at(pinio_mpi_plan(cp), i)->len;
        check_read_once(&rep, io, (uint64_t)(nranks - 1) * maxlen);
        CHECK(sum(rep.read_bytes > 0) == (uint64_t)(nranks < 27 ? nranks : 27),
              "every rank with tensors read some");
    } else {
        sum(0), sum(0), sum(0), sum(0);
    }
    pinio_mpi_release(cp);
    remove_checkpoint();
}

static void case_shard_filters(void)
{
    make_checkpoint(3u << 20, 18, 1); /* layers 0 and 1 */
    char mine[32];
    snprintf(mine, sizeof(mine), "model.layers.%d", rank % 2);
    const char *f[] = { mine };
    pinio_mpi_opts o;
    pinio_mpi_opts_default(&o);
    o.policy = PINIO_MPI_SHARD;
    o.shard_filters = f;
    o.nshard_filters = 1;
    pinio_mpi_report rep;
    uint64_t io = 0;
    pinio_mpi_checkpoint *cp = load(&o, &rep, &io);
    if (cp) {
        CHECK(pinio_mpi_count(cp) == 9, "rank holds %zu tensors of its layer", pinio_mpi_count(cp));
        for (size_t i = 0; i < pinio_mpi_count(cp); i++)
            CHECK(strncmp(pinio_mpi_tensor(cp, i)->name, mine, strlen(mine)) == 0, "%s",
                  pinio_mpi_tensor(cp, i)->name);
        verify_held(cp);
    }
    pinio_mpi_release(cp);
    remove_checkpoint();
}

/* The last rank's first read completion fails: everyone hears of it. */
static void fault_on_one_rank(pinio_mpi_policy policy)
{
    make_checkpoint(3u << 20, 9, 1);
    int victim = nranks - 1;
    if (rank == victim)
        setenv("PINIO_FAULTS", "eio@1x1000000", 1); /* every completion: the engine retries a lone one */
    pinio_mpi_opts o = cold_opts(policy, PINIO_MPI_EXCHANGE_AUTO);
    o.node_ranks = (nranks + 1) / 2; /* node: the victim is not the only leader */
    const char *paths[] = { ck };
    pinio_mpi_checkpoint *cp = (pinio_mpi_checkpoint *)&o;
    pinio_diag d;
    int rc = pinio_mpi_load(MPI_COMM_WORLD, paths, 1, &o, &cp, NULL, &d);
    unsetenv("PINIO_FAULTS");
    CHECK(rc == -EIO, "rc %d (%s)", rc, rc ? d.msg : "");
    CHECK(cp == NULL, "nothing handed out");
    char who[32];
    snprintf(who, sizeof(who), "rank %d of %d", victim, nranks);
    /* the offset: in the text (the engine's bulk-read diagnostic leaves the
     * field unset today), or in the field */
    CHECK(strstr(d.msg, who) && strcmp(d.path + strlen(d.path) - 13, "m.safetensors") == 0 &&
              (d.offset != PINIO_DIAG_NO_OFFSET || strstr(d.msg, "at offset ")),
          "message names rank, file and offset: %s (offset %llu)", d.msg,
          (unsigned long long)d.offset);
    char first[PINIO_DIAG_MSG_MAX];
    memcpy(first, d.msg, sizeof(first));
    MPI_Bcast(first, sizeof(first), MPI_CHAR, 0, MPI_COMM_WORLD);
    CHECK(strcmp(first, d.msg) == 0, "same message as rank 0: '%s' vs '%s'", d.msg, first);
    remove_checkpoint();
}

static void case_fault_on_one_rank(void)
{
    fault_on_one_rank(PINIO_MPI_REPLICATE);
}

static void case_fault_on_one_rank_node(void)
{
    fault_on_one_rank(PINIO_MPI_NODE);
}

/* Progress: rank 0 follows the job's reads (every rank's) to their end,
 * never backwards; a callback that stops on the last rank stops the job,
 * every rank hearing who stopped. */
struct seen {
    unsigned calls;
    uint64_t last, total;
    bool backwards;
};

static int on_progress(void *ctx, const pinio_progress *p)
{
    struct seen *s = ctx;
    s->backwards |= p->done_bytes < s->last;
    s->calls++;
    s->last = p->done_bytes;
    s->total = p->total_bytes;
    return 0;
}

static int stop_progress(void *ctx, const pinio_progress *p)
{
    (void)ctx;
    (void)p;
    return 1;
}

static void case_progress(void)
{
    make_checkpoint(4u << 20, 16, 1);
    pinio_mpi_opts o = cold_opts(PINIO_MPI_REPLICATE, PINIO_MPI_EXCHANGE_AUTO);
    struct seen s = { 0 };
    if (rank == 0) {
        o.progress = on_progress;
        o.progress_ctx = &s;
    }
    pinio_mpi_report rep;
    uint64_t io = 0;
    pinio_mpi_checkpoint *cp = load(&o, &rep, &io);
    if (cp && rank == 0)
        CHECK(s.calls >= 1 && !s.backwards && s.last == rep.job_read_bytes &&
                  s.total == rep.job_read_bytes && rep.job_read_bytes == rep.plan_read_bytes,
              "rank 0: %u calls, last %" PRIu64 " of %" PRIu64 ", the job read %" PRIu64, s.calls,
              s.last, s.total, rep.job_read_bytes);
    if (cp)
        holds_all(cp, 16);
    pinio_mpi_release(cp);

    o = cold_opts(PINIO_MPI_REPLICATE, PINIO_MPI_EXCHANGE_AUTO);
    int stopper = nranks - 1;
    if (rank == stopper)
        o.progress = stop_progress;
    const char *paths[] = { ck };
    pinio_diag d;
    cp = NULL;
    int rc = pinio_mpi_load(MPI_COMM_WORLD, paths, 1, &o, &cp, NULL, &d);
    char who[32];
    snprintf(who, sizeof(who), "rank %d of %d", stopper, nranks);
    CHECK(rc == -ECANCELED && cp == NULL && strstr(d.msg, who), "rc %d: %s", rc, d.msg);
    pinio_mpi_release(cp);
    remove_checkpoint();
}

static void case_missing_input(void)
{
    const char *paths[] = { "/var/tmp/pinio-mpi-does-not-exist.safetensors" };
    pinio_mpi_checkpoint *cp = NULL;
    pinio_diag d;
    int rc = pinio_mpi_load(MPI_COMM_WORLD, paths, 1, NULL, &cp, NULL, &d);
    CHECK(rc == -ENOENT && cp == NULL, "rc %d", rc);
    CHECK(strstr(d.msg, "rank 0 of") && strcmp(d.path, paths[0]) == 0, "%s", d.msg);
}

/* Two tensors over up to four ranks, and a selection of nothing: ranks
 * with no reads take part in every collective and hold nothing. */
static void case_empty_stripes(void)
{
    make_checkpoint(1u << 20, 2, 1);
    static const pinio_mpi_policy pols[] = { PINIO_MPI_REPLICATE, PINIO_MPI_SHARD, PINIO_MPI_NODE };
    for (int k = 0; k < 3; k++) {
        int pol = pols[k] == PINIO_MPI_SHARD;
        pinio_mpi_opts o;
        pinio_mpi_opts_default(&o);
        o.policy = pols[k];
        pinio_mpi_report rep;
        uint64_t io = 0;
        pinio_mpi_checkpoint *cp = load(&o, &rep, &io);
        if (cp) {
            pinio_plan_info pi;
            pinio_plan_get_info(pinio_mpi_plan(cp), &pi);
            uint64_t b = verify_held(cp);
            uint64_t all = pol ? sum(b) : b; /* shard: the ranks together; replicate: each */
            CHECK(pi.tensors == 2 && all == pi.bytes, "bytes held %" PRIu64 " of %" PRIu64, all,
                  pi.bytes);
            CHECK(rep.job_read_bytes >= rep.plan_read_bytes, "at least one copy read");
        } else if (pol) {
            sum(0);
        }
        pinio_mpi_release(cp);
    }
    const char *nothing[] = { "no.such.tensor" };
    pinio_mpi_opts o;
    pinio_mpi_opts_default(&o);
    o.filters = nothing;
    o.nfilters = 1;
    pinio_mpi_report rep;
    uint64_t io = 0;
    pinio_mpi_checkpoint *cp = load(&o, &rep, &io);
    if (cp)
        CHECK(pinio_mpi_count(cp) == 0 && rep.job_read_bytes == 0, "an empty selection reads nothing");
    pinio_mpi_release(cp);
    remove_checkpoint();
}

/* Every rank got `want` with the same message, naming rank `who` and
 * holding `needle` (and `path`, when given, as the diagnostic's file). */
static void agreed_error(int rc, const pinio_diag *d, int want, int who, const char *needle,
                         const char *path)
{
    char tag[32];
    snprintf(tag, sizeof(tag), "rank %d of %d", who, nranks);
    CHECK(rc == want, "rc %d, want %d (%s)", rc, want, rc ? d->msg : "");
    CHECK(rc == 0 || ((who < 0 || strstr(d->msg, tag)) && strstr(d->msg, needle)),
          "message names %s and '%s': %s", tag, needle, d->msg);
    CHECK(rc == 0 || !path || strcmp(d->path, path) == 0, "file %s, want %s", d->path, path);
    char first[PINIO_DIAG_MSG_MAX];
    memcpy(first, d->msg, sizeof(first));
    MPI_Bcast(first, sizeof(first), MPI_CHAR, 0, MPI_COMM_WORLD);
    CHECK(strcmp(first, d->msg) == 0, "same message as rank 0: '%s' vs '%s'", d->msg, first);
}

/* `dst` as a copy of `src`; flip: every byte past the header inverted (the
 * header kept: a stale copy of the same shapes); cut: the last byte gone. */
enum { COPY_EXACT, COPY_FLIP_DATA, COPY_CUT };

static int copy_file(const char *src, const char *dst, int how)
{
    FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
    int rc = in && out ? 0 : -errno;
    uint8_t buf[1 << 16];
    uint64_t head = UINT64_MAX, pos = 0;
    size_t got;
    while (rc == 0 && (got = fread(buf, 1, sizeof(buf), in)) > 0) {
        if (pos == 0 && got >= 8) {
            memcpy(&head, buf, 8);
            head += 8;
        }
        for (size_t i = 0; how == COPY_FLIP_DATA && i < got; i++)
            if (pos + i >= head)
                buf[i] ^= 0xff;
        if (fwrite(buf, 1, got, out) != got)
            rc = -EIO;
        pos += got;
    }
    if (in)
        fclose(in);
    if (out && fclose(out) != 0 && rc == 0)
        rc = -EIO;
    if (rc == 0 && how == COPY_CUT)
        rc = truncate(dst, (off_t)pos - 1) == 0 ? 0 : -errno;
    return rc;
}

/* The last rank loads from its own path `mine` (the others from ck). */
static int load_own(const char *mine, const pinio_mpi_opts *o, pinio_mpi_checkpoint **cp,
                    pinio_diag *d)
{
    const char *paths[] = { rank == nranks - 1 && nranks > 1 ? mine : ck };
    *cp = NULL;
    return pinio_mpi_load(MPI_COMM_WORLD, paths, 1, o, cp, NULL, d);
}

static void case_own_file(void)
{
    make_checkpoint(3u << 20, 9, 1);
    int victim = nranks - 1;
    char vdir[64] = "", mine[128] = "";
    int rc = 0;
    if (rank == victim && nranks > 1) {
        rc = t_tmpdir("/var/tmp", "mpiown", vdir, sizeof(vdir));
        snprintf(mine, sizeof(mine), "%s/m.safetensors", vdir);
    }
    static const pinio_mpi_policy pols[] = { PINIO_MPI_REPLICATE, PINIO_MPI_SHARD, PINIO_MPI_NODE };
    for (int k = 0; k < 3 && nranks > 1; k++) {
        pinio_mpi_opts o = cold_opts(pols[k], PINIO_MPI_EXCHANGE_AUTO);
        o.node_ranks = 1; /* node: the victim its own node, reading its own copy */
        pinio_mpi_checkpoint *cp = NULL;
        pinio_diag d;
        /* an exact copy at another path: loads, every byte right */
        rc = rank == victim ? copy_file(ck, mine, COPY_EXACT) : 0;
        CHECK(rc == 0, "copy: %s", pinio_strerror(rc));
        rc = load_own(mine, &o, &cp, &d);
        CHECK(rc == 0, "an exact copy at another path: %s", d.msg);
        if (cp) {
            uint64_t b = verify_held(cp);
            CHECK(pols[k] == PINIO_MPI_SHARD || b == 3u << 20, "every byte: %" PRIu64, b);
        }
        pinio_mpi_release(cp);
        /* the same header, other data: a stale copy */
        if (rank == victim)
            rc = copy_file(ck, mine, COPY_FLIP_DATA);
        rc = load_own(mine, &o, &cp, &d);
        agreed_error(rc, &d, PINIO_ECHANGED, victim, "data differs", rank == victim ? mine : NULL);
        CHECK(cp == NULL, "nothing handed out");
    }
    if (nranks > 1) {
        pinio_mpi_opts o = cold_opts(PINIO_MPI_REPLICATE, PINIO_MPI_EXCHANGE_AUTO);
        pinio_mpi_checkpoint *cp = NULL;
        pinio_diag d;
        /* the same size, another header (another seed in its metadata) */
        if (rank == victim) {
            pinio_gen_opts g;
            pinio_gen_opts_default(&g);
            g.size = 3u << 20;
            g.tensors = 9;
            g.seed = SEED + 1;
            unlink(mine);
            rc = pinio_gen_write(mine, &g, NULL, NULL);
        }
        rc = load_own(mine, &o, &cp, &d);
        agreed_error(rc, &d, PINIO_ECHANGED, victim, "header differs", rank == victim ? mine : NULL);
        /* another size */
        if (rank == victim)
            rc = copy_file(ck, mine, COPY_CUT);
        rc = load_own(mine, &o, &cp, &d);
        CHECK(rc != 0, "a shorter copy loaded");
        if (rc)
            agreed_error(rc, &d, rc, victim, "", rank == victim ? mine : NULL);
        /* no file */
        if (rank == victim)
            unlink(mine);
        rc = load_own(mine, &o, &cp, &d);
        agreed_error(rc, &d, -ENOENT, victim, "", rank == victim ? mine : NULL);
        CHECK(cp == NULL, "nothing handed out");
    }
    if (vdir[0])
        t_rm_rf(vdir);
    remove_checkpoint();
}

/* The last rank's arguments differ from the others': one agreed error. */
static void differ(pinio_mpi_opts *o, const char *needle)
{
    const char *paths[] = { ck };
    pinio_mpi_checkpoint *cp = NULL;
    pinio_diag d;
    int rc = pinio_mpi_load(MPI_COMM_WORLD, paths, 1, o, &cp, NULL, &d);
    if (nranks > 1)
        agreed_error(rc, &d, -EINVAL, nranks - 1, needle, NULL);
    pinio_mpi_release(cp);
}

static void case_differing_args(void)
{
    make_checkpoint(3u << 20, 18, 1); /* layers 0 and 1 */
    bool victim = rank == nranks - 1;
    const char *layer1[] = { "model.layers.1" }, *nothing[] = { "no.such.tensor" };
    static const pinio_mpi_policy pols[] = { PINIO_MPI_REPLICATE, PINIO_MPI_SHARD, PINIO_MPI_NODE };
    for (int k = 0; k < 3; k++) {
        pinio_mpi_opts o = cold_opts(pols[k], PINIO_MPI_EXCHANGE_AUTO);
        if (victim) {
            o.filters = layer1;
            o.nfilters = 1;
        }
        differ(&o, "filters");
        /* a selection of nothing on one rank: never a hang */
        if (victim)
            o.filters = nothing;
        differ(&o, "filters");
    }
    /* shard filters on some ranks only */
    pinio_mpi_opts o = cold_opts(PINIO_MPI_SHARD, PINIO_MPI_EXCHANGE_AUTO);
    if (victim) {
        o.shard_filters = layer1;
        o.nshard_filters = 1;
    }
    differ(&o, "shard filters");
    /* the node split */
    o = cold_opts(PINIO_MPI_NODE, PINIO_MPI_EXCHANGE_AUTO);
    o.node_ranks = victim ? 1 : 0;
    differ(&o, "policy");
    /* the job's filters with shard filters: refused on every rank */
    o = cold_opts(PINIO_MPI_SHARD, PINIO_MPI_EXCHANGE_AUTO);
    o.filters = layer1;
    o.nfilters = 1;
    o.shard_filters = layer1;
    o.nshard_filters = 1;
    const char *paths[] = { ck };
    pinio_mpi_checkpoint *cp = NULL;
    pinio_diag d;
    int rc = pinio_mpi_load(MPI_COMM_WORLD, paths, 1, &o, &cp, NULL, &d);
    CHECK(rc == -EINVAL && cp == NULL && strstr(d.msg, "shard_filters"), "rc %d: %s", rc, d.msg);
    /* shard filters that select nothing on one rank: it holds nothing */
    o = cold_opts(PINIO_MPI_SHARD, PINIO_MPI_EXCHANGE_AUTO);
    o.shard_filters = victim && nranks > 1 ? nothing : layer1;
    o.nshard_filters = 1;
    cp = NULL;
    rc = pinio_mpi_load(MPI_COMM_WORLD, paths, 1, &o, &cp, NULL, &d);
    CHECK(rc == 0, "rc %d: %s", rc, d.msg);
    if (cp) {
        CHECK(pinio_mpi_count(cp) == (victim && nranks > 1 ? 0u : 9u), "holds %zu",
              pinio_mpi_count(cp));
        verify_held(cp);
    }
    pinio_mpi_release(cp);
    remove_checkpoint();
}

/* SHA-256 of a file as 64 hex digits, computed here (not by pinio). */
static void file_sha(const char *path, char out[65])
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    FILE *f = fopen(path, "rb");
    uint8_t buf[1 << 16], sha[32];
    unsigned len = 0;
    size_t got;
    out[0] = '\0';
    if (!md || !f || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1)
        goto done;
    while ((got = fread(buf, 1, sizeof(buf), f)) > 0)
        EVP_DigestUpdate(md, buf, got);
    if (EVP_DigestFinal_ex(md, sha, &len) == 1)
        for (unsigned i = 0; i < len; i++)
            snprintf(out + 2 * i, 3, "%02x", sha[i]);
done:
    if (f)
        fclose(f);
    EVP_MD_CTX_free(md);
}

static const struct vpol {
    const char *name;
    pinio_mpi_policy policy;
    bool own; /* shard: each rank its own layer */
} vpols[] = {
    { "replicate", PINIO_MPI_REPLICATE, false },
    { "shard", PINIO_MPI_SHARD, false },
    { "shard (own filters)", PINIO_MPI_SHARD, true },
    { "node (2 simulated nodes)", PINIO_MPI_NODE, false },
};

static void case_verify(void)
{
    make_checkpoint(6u << 20, 27, 3); /* layers 0..2 over 3 shards and an index */
    enum { NF = 3 };
    char refs[NF][65], paths0[NF][256];
    uint64_t file_bytes = 0;
    if (rank == 0) {
        pinio_plan *p = NULL;
        const char *in[] = { ck };
        int rc = pinio_plan_create(&p, in, 1, NULL, NULL);
        CHECK(rc == 0 && pinio_plan_file_at(p, NF - 1) && !pinio_plan_file_at(p, NF), "3 shards");
        for (size_t i = 0; rc == 0 && i < NF; i++) {
            snprintf(paths0[i], sizeof(paths0[i]), "%s", pinio_plan_file_at(p, i)->path);
            file_sha(paths0[i], refs[i]);
            file_bytes += pinio_plan_file_at(p, i)->size;
        }
        pinio_plan_free(p);
    }
    MPI_Bcast(refs, sizeof(refs), MPI_CHAR, 0, MPI_COMM_WORLD);
    MPI_Bcast(paths0, sizeof(paths0), MPI_CHAR, 0, MPI_COMM_WORLD);
    MPI_Bcast(&file_bytes, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    const char *expect[NF] = { refs[0], refs[1], refs[2] };
    char wrong[65];
    memcpy(wrong, refs[1], sizeof(wrong));
    wrong[0] = wrong[0] == '0' ? '1' : '0';
    const char *bad[NF] = { refs[0], wrong, refs[2] };
    char layer[32];
    snprintf(layer, sizeof(layer), "model.layers.%d", rank % 3);
    const char *own[] = { layer };
    const char *paths[] = { ck };
    for (size_t v = 0; v < sizeof(vpols) / sizeof(vpols[0]); v++) {
        pinio_mpi_opts o = cold_opts(vpols[v].policy, PINIO_MPI_EXCHANGE_AUTO);
        o.verify = true;
        o.expected_sha256 = expect;
        o.nexpected = NF;
        o.node_ranks = (nranks + 1) / 2;
        if (vpols[v].own) {
            o.shard_filters = own;
            o.nshard_filters = 1;
        }
        /* clean: the files' digests, each byte hashed once by the job */
        pinio_mpi_report rep;
        uint64_t io = 0;
        pinio_mpi_checkpoint *cp = load(&o, &rep, &io);
        if (cp) {
            for (size_t i = 0; i < NF; i++) {
                const char *h = pinio_mpi_sha256(cp, i);
                CHECK(h && strcmp(h, refs[i]) == 0, "%s: file %zu: %s, want %s", vpols[v].name, i,
                      h ? h : "(null)", refs[i]);
            }
            CHECK(rep.verified && !pinio_mpi_sha256(cp, NF), "%s: verified", vpols[v].name);
            verify_held(cp);
        }
        uint64_t hashed = sum(cp ? rep.verify_landed_bytes + rep.verify_reread_bytes : 0);
        CHECK(!cp || hashed == file_bytes, "%s: the job hashed %" PRIu64 " bytes of %" PRIu64,
              vpols[v].name, hashed, file_bytes);
        CHECK(!cp || sum(rep.verify_landed_bytes) > 0, "%s: nothing hashed as landed",
              vpols[v].name);
        pinio_mpi_release(cp);
        /* a wrong expected digest: the file named, the same verdict everywhere */
        pinio_diag d;
        o.expected_sha256 = bad;
        cp = NULL;
        int rc = pinio_mpi_load(MPI_COMM_WORLD, paths, 1, &o, &cp, NULL, &d);
        char want[256];
        snprintf(want, sizeof(want), "sha256 mismatch: expected %s, got %s", wrong, refs[1]);
        CHECK(rc == PINIO_EFORMAT && cp == NULL && strstr(d.msg, want) &&
                  strcmp(d.path, paths0[1]) == 0 && d.index == 1,
              "%s: rc %d: %s", vpols[v].name, rc, d.msg);
        agreed_error(rc, &d, PINIO_EFORMAT, -1, "", NULL);
        /* a byte flipped in each read of the last rank (so one in bytes it
         * holds: a shard's boundary read also holds its neighbour's) */
        o.expected_sha256 = expect;
        if (rank == nranks - 1)
            setenv("PINIO_FAULTS", "corrupt@1x1000000", 1);
        rc = pinio_mpi_load(MPI_COMM_WORLD, paths, 1, &o, &cp, NULL, &d);
        unsetenv("PINIO_FAULTS");
        /* the chain's verdict, or (shard filters that overlap: the last
         * rank's copy of bytes another rank hashed) its own check */
        CHECK(rc == PINIO_EFORMAT && cp == NULL &&
                  (strstr(d.msg, "sha256 mismatch: expected ") ||
                   (vpols[v].own && strstr(d.msg, "differs from the file"))),
              "%s: a flipped byte: rc %d: %s", vpols[v].name, rc, d.msg);
        char first[PINIO_DIAG_MSG_MAX];
        memcpy(first, d.msg, sizeof(first));
        MPI_Bcast(first, sizeof(first), MPI_CHAR, 0, MPI_COMM_WORLD);
        CHECK(strcmp(first, d.msg) == 0, "same verdict as rank 0: '%s' vs '%s'", d.msg, first);
        pinio_mpi_release(cp);
    }
    /* two digests for three files: refused before any data is read */
    pinio_mpi_opts o = cold_opts(PINIO_MPI_REPLICATE, PINIO_MPI_EXCHANGE_AUTO);
    o.verify = true;
    o.expected_sha256 = expect;
    o.nexpected = 2;
    pinio_mpi_checkpoint *cp = NULL;
    pinio_diag d;
    int rc = pinio_mpi_load(MPI_COMM_WORLD, paths, 1, &o, &cp, NULL, &d);
    CHECK(rc == PINIO_EDIGESTS && cp == NULL, "rc %d: %s", rc, d.msg);
    /* verify on some ranks only */
    o.nexpected = 0;
    o.verify = rank != nranks - 1;
    differ(&o, "verify options");
    remove_checkpoint();
}

/* One load of each kind before the cases: the first use of an MPI code path
 * can fault its library's pages in from disk, which /proc/self/io counts as
 * storage reads of the case (seen with MPICH right after installing it). */
static void warm_up(void)
{
    make_checkpoint(1u << 20, 4, 1);
    for (int k = 0; k < 4; k++) {
        pinio_mpi_opts o =
            cold_opts(k < 2 ? PINIO_MPI_REPLICATE : k == 2 ? PINIO_MPI_SHARD : PINIO_MPI_NODE,
                      k == 1 ? PINIO_MPI_EXCHANGE_BCAST : PINIO_MPI_EXCHANGE_AUTO);
        o.node_ranks = 1;
        pinio_mpi_report rep;
        uint64_t io;
        pinio_mpi_release(load(&o, &rep, &io));
    }
    remove_checkpoint();
}

static const struct {
    const char *name;
    void (*run)(void);
} cases[] = {
    { "replicate_allgatherv", case_replicate_allgatherv },
    { "replicate_bcast", case_replicate_bcast },
    { "shard_split", case_shard_split },
    { "shard_filters", case_shard_filters },
    { "node_shared", case_node_shared },
    { "node_split2", case_node_split2 },
    { "fault_on_one_rank", case_fault_on_one_rank },
    { "fault_on_one_rank_node", case_fault_on_one_rank_node },
    { "missing_input", case_missing_input },
    { "progress", case_progress },
    { "empty_stripes", case_empty_stripes },
    { "own_file", case_own_file },
    { "differing_args", case_differing_args },
    { "verify", case_verify },
};

int main(int argc, char **argv)
{
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    int passed = 0, failed = 0;
    warm_up();
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (argc > 1 && strcmp(argv[1], cases[i].name) != 0)
            continue;
        failed_local = 0;
        cases[i].run();
        int any = 0;
        MPI_Allreduce(&failed_local, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (rank == 0)
            printf("[%s] mpi::%s (n=%d)\n", any ? "FAIL" : "PASS", cases[i].name, nranks);
        any ? failed++ : passed++;
    }
    if (rank == 0)
        printf("%d passed, %d failed\n", passed, failed);
    MPI_Finalize();
    return failed ? 1 : 0;
}
