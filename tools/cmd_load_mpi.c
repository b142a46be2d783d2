/* `pinio load --mpi POLICY`: one load per MPI job (libpinio_mpi), run under
 * mpiexec; rank 0 prints one report with every rank's storage reads.
 * Compiled only into a pinio built with MPI (-Dmpi); cmd_load.c hands
 * argv here when it sees --mpi. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pinio/mpi.h"
#include "pinio/pinio.h"
#include "jw.h"
#include "load_mpi.h"
#include "load_mpi_device.h"
#include "progress.h"
#include "util.h"

/* The rank the launcher gave this process, read from its environment
 * (before MPI_Init: usage errors come first): Open MPI, MPICH's Hydra
 * (PMI), PMIx. -1 outside a launcher. */
static int launcher_rank(void)
{
    static const char *const vars[] = { "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK" };
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        const char *v = getenv(vars[i]);
        char *end;
        long r = v && *v ? strtol(v, &end, 10) : -1;
        if (v && *v && *end == '\0' && r >= 0)
            return (int)r;
    }
    return -1;
}

static bool has_mpi_flag(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--mpi") || !strncmp(argv[i], "--mpi=", 6))
            return true;
    return false;
}

void pinio_cli_load_mpi_hush(int argc, char **argv, int saved[2])
{
    saved[0] = saved[1] = -1;
    if (!has_mpi_flag(argc, argv) || launcher_rank() <= 0)
        return;
    int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null < 0)
        return;
    fflush(stdout);
    fflush(stderr);
    for (int k = 0; k < 2; k++) {
        saved[k] = fcntl(k + 1, F_DUPFD_CLOEXEC, 3);
        if (saved[k] >= 0)
            dup2(null, k + 1);
    }
    close(null);
}

void pinio_cli_load_mpi_unhush(const int saved[2])
{
    fflush(stdout);
    fflush(stderr);
    for (int k = 0; k < 2; k++)
        if (saved[k] >= 0) {
            dup2(saved[k], k + 1);
            close(saved[k]);
        }
}

/*
 * Why every rank meets here before any of them exits: a launcher ends the
 * whole job as soon as one rank exits with an error, so a rank that
 * returned 2 at once could have rank 0 killed before its usage line was
 * written (seen on a busy machine: exit 2, no line). One collective that
 * every rank reaches, whatever its parse said, lets rank 0 speak first; and
 * a usage error on a rank other than 0 alone (its own arguments, through a
 * wrapper) is named by rank 0 instead of leaving rank 0 waiting in a load.
 */
int pinio_cli_load_mpi_agree(int argc, char **argv, int rc, bool *own)
{
    *own = false;
    if (!has_mpi_flag(argc, argv) || launcher_rank() < 0)
        return rc;
    int inited = 0, provided = 0, rank = 0, n = 1;
    MPI_Initialized(&inited);
    if (!inited) {
        MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
        *own = true;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    int mine = rc != 0 ? rank : n, first = n;
    MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (first == n)
        return 0;
    if (rank == 0 && rc == 0)
        cli_usage("load", "rank %d of %d: its command line is a usage error (rank 0's is "
                  "not): every rank takes the same options", first, n);
    if (*own)
        MPI_Finalize();
    *own = false;
    return 2;
}

void pinio_cli_load_mpi_usage(FILE *out)
{
    if (launcher_rank() > 0)
        return; /* one help under mpiexec: rank 0's */
    fprintf(out,
            "usage: mpiexec -n N pinio load --mpi replicate|shard|node PATH... [options]\n"
            "       mpiexec -n N pinio load --mpi tp --split PATTERN=DIM... PATH... [options]\n"
            "\n"
            "Loads a safetensors checkpoint once per MPI job. Every rank reads the headers\n"
            "of its own PATHs (which may name a node-local copy) and builds the plan; each\n"
            "rank's files (size, SHA-256 of the header, SHA-256 of 16 sampled data blocks),\n"
            "the options that shape the job and the plan are compared with rank 0's before\n"
            "any data is read: a rank with another, stale or missing file, or other\n"
            "--filter, --mpi, --verify options fails the job. Each rank then reads its own\n"
            "stripe with O_DIRECT io_uring reads, so each byte comes from storage once.\n"
            "  replicate  every rank ends with every byte: the stripes are exchanged in place\n"
            "  shard      each rank keeps only its part (a byte-balanced split that never\n"
            "             cuts a tensor, or its own --shard-filter); nothing is exchanged\n"
            "  node       every rank ends with every byte, one copy per node: the node's\n"
            "             ranks read disjoint stripes into one shared-memory copy (memfd,\n"
            "             locked when RLIMIT_MEMLOCK allows) whose views they all hold; only\n"
            "             the node leaders exchange, over the network\n"
            "  tp         tensor parallelism: each rank ends with its chunk of every tensor a\n"
            "             --split rule matches (torch.chunk(t, N, DIM)[rank]) and every other\n"
            "             tensor whole; the stripes are read into a staging area, then each\n"
            "             rank takes its bytes: on one node the area is the node's shared\n"
            "             memory, a slice that is one run of it a view (copy on write),\n"
            "             the others copied; across nodes the bytes are sent to the ranks\n"
            "             that hold them (MPI_Ialltoallv rounds). The job reads the\n"
            "             selected tensors once\n"
            "Rank 0 prints one report: per-rank bytes read from storage and times.\n"
            "\n"
            "options:\n"
            "  --filter PATTERN        the job's selection (repeatable; same on every rank)\n"
            "  --shard-filter PATTERN  shard: this rank's tensors instead of the split; the\n"
            "                          pattern may hold %%r, replaced by the rank; not with\n"
            "                          --filter (a rank's tensors are its patterns alone)\n"
            "  --exchange auto|allgatherv|bcast  replicate: how stripes are shared (auto:\n"
            "                          allgatherv)\n"
            "  --exchange auto|shared|alltoallv  tp: the node's shared memory or MPI\n"
            "                          rounds (auto: shared when every rank is on one node)\n"
            "  --piece SIZE            bcast: bytes per broadcast piece (default 16M); tp:\n"
            "                          bytes of the layout per exchange round (default 16M)\n"
            "  --split PATTERN=DIM     tp: the first rule matching a tensor (exact name,\n"
            "                          even one holding *?[, dotted prefix or glob) chunks\n"
            "                          it along DIM (negative from the end; DIM 'whole'\n"
            "                          keeps it whole); unmatched\n"
            "                          tensors are held whole by every rank (repeatable;\n"
            "                          same on every rank)\n"
            "  --world N               tp: the chunk count, which must be the job's rank\n"
            "                          count (a check; default: the rank count)\n"
            "  --device DEV            tp: then each rank copies what it holds to its GPU,\n"
            "                          from its memory through registered staging slots\n"
            "                          (the job still reads each byte once): cuda:N or\n"
            "                          hip:N (the same device on every rank), cuda:BUSID,\n"
            "                          or cuda:local / hip:local (the rank's index among\n"
            "                          its machine's ranks, modulo its devices); the\n"
            "                          device memory is freed when the copy is measured\n"
            "  --staging SIZE[xK]      with --device: K slots of SIZE bytes (default 32Mx4)\n"
            "  --node-ranks K          node: count each K consecutive ranks of a machine as\n"
            "                          a node of its own (a multi-node job simulated on one\n"
            "                          machine); default: the machine's ranks are one node\n"
            "  --cache auto|cold|hot   as pinio load (cold: O_DIRECT after dropping the cache)\n"
            "  --direct auto|on|off    O_DIRECT policy\n"
            "  --backend auto|fixed|direct|buffered|pread  as pinio load\n"
            "  --qd N, --bs SIZE       reads in flight (1..4096), bytes per read request (a\n"
            "                          power of two from 4K to 1G)\n"
            "  --verify                each file's SHA-256 (the hub's LFS object id) over the\n"
            "                          bytes as the ranks read them: hashed in file order by\n"
            "                          the ranks that read them, the hash state handed on\n"
            "  --sha256 HEX            expected SHA-256 (implies --verify), once per file in\n"
            "                          resolution order; a mismatch fails every rank\n"
            "  --sha256-file SUMS      expected SHA-256s as sha256sum prints them, matched by\n"
            "                          file name (read by rank 0, agreed by every rank)\n"
            "  --json                  print the report as one JSON object (rank 0;\n"
            "                          doc/json/SCHEMA.md); a failure prints an error object\n"
            "  -q, --quiet             no progress line and no report (exit status only)\n"
            "  --progress              rank 0 draws the job's progress (every rank's reads)\n"
            "                          although mpiexec hands it a pipe, not a terminal\n"
            "  -h, --help              this help\n"
            "\n"
            "pinio load's options that place a resident copy (--node, --memory, --align)\n"
            "are refused with --mpi, and --device, --staging but with --mpi tp.\n"
            "exit status, the same on every rank: 0 loaded on every rank; 1 failed (the\n"
            "same message on every rank, naming the failing rank, file and offset, or the\n"
            "file whose SHA-256 differs; rank 0 prints it); 2 usage (rank 0 prints it)\n");
}

/* "%r" in a shard filter becomes the rank: one command line for all ranks. */
static char *with_rank(const char *pat, int rank)
{
    const char *p = strstr(pat, "%r");
    size_t len = strlen(pat) + 16;
    char *s = malloc(len);
    if (s && p)
        snprintf(s, len, "%.*s%d%s", (int)(p - pat), pat, rank, p + 2);
    else if (s)
        snprintf(s, len, "%s", pat);
    return s;
}

/* The verify figures of the job: the slowest rank's time, the ranks'
 * bytes hashed as they landed and read again. */
static void verify_totals(const pinio_mpi_report *all, int n, double *s, uint64_t *landed,
                          uint64_t *reread)
{
    *s = 0;
    *landed = *reread = 0;
    for (int r = 0; r < n; r++) {
        *s = all[r].verify_seconds > *s ? all[r].verify_seconds : *s;
        *landed += all[r].verify_landed_bytes;
        *reread += all[r].verify_reread_bytes;
    }
}

/* "split": tp's world, rules and what the job read once; null elsewhere. */
static void print_json_split(jw *w, const pinio_mpi_report *r0, const cli_load_args *a)
{
    jw_key(w, "split");
    if (r0->policy != PINIO_MPI_TP) {
        jw_null(w);
        return;
    }
    jw_obj(w);
    jw_ku64(w, "world", r0->world);
    cli_split_rules_json(w, a->split, a->nsplit);
    jw_ku64(w, "full_bytes", r0->full_bytes);
    jw_ku64(w, "round_count", r0->rounds);
    jw_obj_end(w);
}

/* A rank's device copy in the JSON report; null without --device. */
static void print_json_gpu(jw *w, const cli_mpi_gpu *g)
{
    jw_key(w, "device");
    if (!g) {
        jw_null(w);
        return;
    }
    jw_obj(w);
    jw_ki64(w, "index", g->device);
    jw_kstr(w, "pci_bus_id", g->pci_bus_id);
    jw_ki64(w, "driver_version", g->driver_version);
    jw_ku64(w, "tensor_count", g->tensors);
    jw_ku64(w, "bytes", g->bytes);
    jw_ku64(w, "h2d_copy_count", g->copies);
    jw_kf64(w, "h2d_s", g->h2d_seconds);
    jw_kf64(w, "h2d_gb_per_s", g->h2d_seconds > 0 ? (double)g->bytes / g->h2d_seconds / 1e9 : 0);
    jw_kf64(w, "elapsed_s", g->seconds);
    jw_obj_end(w);
}

/* `ready[r]`: rank r's time to ready (see pinio_cli_load_mpi()); the job's
 * is its last rank's. */
static void print_json(const pinio_mpi_report *all, const double *ready, int n,
                       const pinio_mpi_checkpoint *cp, const cli_load_args *a,
                       const cli_mpi_gpu *gpus)
{
    const pinio_mpi_report *r0 = &all[0];
    double last_ready = 0;
    for (int r = 0; r < n; r++)
        last_ready = ready[r] > last_ready ? ready[r] : last_ready;
    double vs;
    uint64_t landed, reread;
    verify_totals(all, n, &vs, &landed, &reread);
    jw w;
    jw_init(&w, stdout);
    jw_begin(&w, "load");
    jw_kstr(&w, "kind", "mpi");
    jw_kstr(&w, "policy", pinio_mpi_policy_name(r0->policy));
    jw_kstr(&w, "exchange", pinio_mpi_exchange_name(r0->exchange));
    jw_ku64(&w, "rank_count", (uint64_t)n);
    jw_ku64(&w, "node_count", (uint64_t)r0->nodes);
    jw_ku64(&w, "plan_read_bytes", r0->plan_read_bytes);
    jw_ku64(&w, "job_read_bytes", r0->job_read_bytes);
    jw_ku64(&w, "header_bytes", r0->header_bytes);
    jw_ku64(&w, "node_bytes", r0->node_bytes);
    jw_kbool(&w, "node_locked", r0->locked);
    jw_kf64(&w, "elapsed_s", r0->max_seconds);
    jw_kf64(&w, "ready_s", last_ready);
    jw_kf64(&w, "gb_per_s",
            r0->max_seconds > 0 ? (double)r0->plan_read_bytes / r0->max_seconds / 1e9 : 0);
    jw_kbool(&w, "verified", r0->verified);
    jw_kf64(&w, "verify_s", vs);
    jw_ku64(&w, "verify_landed_bytes", landed);
    jw_ku64(&w, "verify_reread_bytes", reread);
    print_json_split(&w, r0, a);
    jw_kstr(&w, "device", gpus ? (a->dev.hip ? "hip" : "cuda") : NULL);
    const pinio_plan *plan = pinio_mpi_plan(cp);
    jw_key(&w, "files");
    jw_arr(&w);
    for (size_t i = 0; pinio_plan_file_at(plan, i); i++) {
        jw_obj(&w);
        jw_kstr(&w, "path", pinio_plan_file_at(plan, i)->path);
        jw_kstr(&w, "sha256", pinio_mpi_sha256(cp, i));
        jw_obj_end(&w);
    }
    jw_arr_end(&w);
    jw_key(&w, "ranks");
    jw_arr(&w);
    for (int r = 0; r < n; r++) {
        jw_obj(&w);
        jw_ki64(&w, "rank", r);
        jw_ki64(&w, "node", all[r].node);
        jw_ki64(&w, "local_rank", all[r].local_rank);
        jw_ku64(&w, "tensor_count", all[r].tensors);
        jw_ku64(&w, "bytes", all[r].bytes);
        jw_ku64(&w, "read_bytes", all[r].read_bytes);
        jw_ku64(&w, "received_bytes", all[r].received_bytes);
        jw_ku64(&w, "sent_bytes", all[r].sent_bytes);
        jw_ku64(&w, "sliced_tensor_count", all[r].sliced);
        jw_kf64(&w, "plan_s", all[r].plan_seconds);
        jw_kf64(&w, "io_s", all[r].io_seconds);
        jw_kf64(&w, "exchange_s", all[r].exchange_seconds);
        jw_kf64(&w, "verify_s", all[r].verify_seconds);
        jw_ku64(&w, "verify_landed_bytes", all[r].verify_landed_bytes);
        jw_ku64(&w, "verify_reread_bytes", all[r].verify_reread_bytes);
        jw_kf64(&w, "elapsed_s", all[r].seconds);
        jw_kf64(&w, "ready_s", ready[r]);
        print_json_gpu(&w, gpus ? &gpus[r] : NULL);
        jw_obj_end(&w);
    }
    jw_arr_end(&w);
    jw_obj_end(&w);
    jw_finish(&w); /* a failed write is main.c's to report */
}

/* One line per rank's device copy. */
static void print_gpus(const cli_mpi_gpu *g, int n, const cli_load_args *a)
{
    const char *api = a->dev.hip ? "hip" : "cuda";
    char b[32];
    printf("  device: each rank's tensors from its memory to its GPU through %u x %s "
           "registered slots\n",
           a->so.slots ? a->so.slots : PINIO_STREAM_SLOTS_DEFAULT,
           cli_human_bytes(b, sizeof(b),
                           a->so.slot_size ? a->so.slot_size : PINIO_STREAM_SLOT_DEFAULT));
    for (int r = 0; r < n; r++)
        printf("  %4d  %s:%d (%s, driver %d.%d): %s in %.3f s, H2D %.2f GB/s, %llu copies\n", r,
               api, g[r].device, g[r].pci_bus_id, g[r].driver_version / 1000,
               g[r].driver_version % 1000 / 10, cli_human_bytes(b, sizeof(b), g[r].bytes),
               g[r].seconds,
               g[r].h2d_seconds > 0 ? (double)g[r].bytes / g[r].h2d_seconds / 1e9 : 0,
               (unsigned long long)g[r].copies);
}

static void print_report(const pinio_mpi_report *all, const double *ready, int n, bool json,
                         const pinio_mpi_checkpoint *cp, const cli_load_args *a,
                         const cli_mpi_gpu *gpus)
{
    const pinio_mpi_report *r0 = &all[0];
    uint64_t job = r0->job_read_bytes;
    if (json) {
        print_json(all, ready, n, cp, a, gpus);
        return;
    }
    char b1[32], b2[32];
    printf("pinio load --mpi %s: %d ranks, %s in %.3f s (slowest rank), %.2f GB/s\n",
           pinio_mpi_policy_name(r0->policy), n, cli_human_bytes(b1, sizeof(b1), r0->plan_read_bytes),
           r0->max_seconds,
           r0->max_seconds > 0 ? (double)r0->plan_read_bytes / r0->max_seconds / 1e9 : 0);
    printf("  read from storage: %s by all ranks (one copy: %s)\n",
           cli_human_bytes(b1, sizeof(b1), job), cli_human_bytes(b2, sizeof(b2), r0->plan_read_bytes));
    if (r0->policy == PINIO_MPI_NODE)
        printf("  memory: %d node(s), one %s copy each in shared memory (%s)\n", r0->nodes,
               cli_human_bytes(b1, sizeof(b1), r0->node_bytes),
               r0->locked ? "locked" : "not locked: RLIMIT_MEMLOCK or mlock refused");
    if (r0->policy == PINIO_MPI_TP) {
        uint64_t sent = 0;
        for (int r = 0; r < n; r++)
            sent += all[r].sent_bytes;
        if (r0->exchange == PINIO_MPI_EXCHANGE_SHARED)
            printf("  split: %zu rule(s), world %u; each rank holds its slices of %s whole; %s "
                   "taken from the node's shared memory\n",
                   a->nsplit, r0->world, cli_human_bytes(b1, sizeof(b1), r0->full_bytes),
                   cli_human_bytes(b2, sizeof(b2), sent));
        else
            printf("  split: %zu rule(s), world %u; each rank holds its slices of %s whole; %s "
                   "exchanged by %s in %zu round(s)\n",
                   a->nsplit, r0->world, cli_human_bytes(b1, sizeof(b1), r0->full_bytes),
                   cli_human_bytes(b2, sizeof(b2), sent), pinio_mpi_exchange_name(r0->exchange),
                   r0->rounds);
    } else if (r0->policy != PINIO_MPI_SHARD && r0->nodes > 1) {
        printf("  exchange: %s%s\n", pinio_mpi_exchange_name(r0->exchange),
               r0->policy == PINIO_MPI_NODE ? " between node leaders" : "");
    }
    printf("  rank  tensors        held   read (storage)   received   plan s    io s  xchg s\n");
    for (int r = 0; r < n; r++) {
        char h[32], rd[32], rc[32];
        printf("  %4d  %7zu  %10s  %15s  %9s  %6.3f  %6.3f  %6.3f\n", r, all[r].tensors,
               cli_human_bytes(h, sizeof(h), all[r].bytes),
               cli_human_bytes(rd, sizeof(rd), all[r].read_bytes),
               cli_human_bytes(rc, sizeof(rc), all[r].received_bytes), all[r].plan_seconds,
               all[r].io_seconds, all[r].exchange_seconds);
    }
    const pinio_plan *plan = pinio_mpi_plan(cp);
    for (size_t i = 0; r0->verified && pinio_plan_file_at(plan, i); i++)
        printf("sha256    %s  %s\n", pinio_mpi_sha256(cp, i), pinio_plan_file_at(plan, i)->path);
    if (r0->verified) {
        double vs;
        uint64_t landed, reread;
        verify_totals(all, n, &vs, &landed, &reread);
        printf("verify    SHA-256 of %.3f GB as the ranks read it and %.3f GB read again (header, "
               "gaps), %.3f s on the slowest rank, before the exchange\n",
               (double)landed / 1e9, (double)reread / 1e9, vs);
    }
    if (gpus)
        print_gpus(gpus, n, a);
}

/* --sha256-file under mpiexec: rank 0 reads the list and matches it to the
 * files its inputs resolve to; every rank gets the same digests, so the
 * library's agreement on them holds, and a list that does not fit is one
 * error (rank 0's) with the same status on every rank, never a rank that
 * leaves the others waiting in a collective. */
static int sums_agreed(cli_load_args *a, char **argv, int argc, int rank)
{
    if (!a->sums)
        return 0;
    int rc = 0;
    unsigned long long n = 0;
    if (rank == 0) {
        rc = cli_load_sums(a, (const char *const *)argv + a->first_path,
                           (size_t)(argc - a->first_path));
        n = rc == 0 ? a->nshas : 0;
    }
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rc != 0)
        return rc;
    MPI_Bcast(&n, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
    char *hex = malloc(n * 65 + 1);
    const char **shas = calloc(n + 1, sizeof(*shas));
    int ok = hex && shas;
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!ok) {
        free(hex);
        free(shas);
        return rank == 0 ? cli_failf("load", a->json, -ENOMEM, NULL, "out of memory") : 1;
    }
    if (rank == 0)
        for (unsigned long long i = 0; i < n; i++)
            memcpy(hex + i * 65, a->shas[i], 65); /* 64 digits and the NUL */
    MPI_Bcast(hex, (int)(n * 65), MPI_CHAR, 0, MPI_COMM_WORLD);
    for (unsigned long long i = 0; i < n; i++)
        shas[i] = hex + i * 65;
    free(a->shas);
    free(a->sums_buf);
    a->shas = shas;
    a->sums_buf = hex; /* freed with the arguments */
    a->nshas = n;
    return 0;
}

/* --device makes the end of the job collective (cli_mpi_to_device()), so
 * a rank given it where rank 0 is not (or the other way round) would wait
 * in another collective than the rest: it is found before anything is
 * read, and named, with the same status on every rank. The device itself
 * may differ per rank. */
static int device_agreed(const cli_load_args *a, int rank, int n)
{
    int zero = a->dev.set;
    MPI_Bcast(&zero, 1, MPI_INT, 0, MPI_COMM_WORLD);
    int mine = a->dev.set != zero ? rank : n, first = n;
    MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (first == n)
        return 0;
    if (rank == 0)
        cli_failf("load", a->json, -EINVAL, NULL,
                  "rank %d of %d: %s --device where rank 0 %s: every rank takes the same options",
                  first, n, zero ? "has no" : "has", zero ? "has one" : "has none");
    return 1;
}

/* The job selected no tensor: on no rank (a shard's filters may select
 * nothing on one rank alone; the job's selection is every rank's). The
 * same answer on every rank, as the status must be. */
static bool selected_nothing(const pinio_mpi_checkpoint *cp)
{
    unsigned long long held = pinio_mpi_count(cp);
    MPI_Allreduce(MPI_IN_PLACE, &held, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    return held == 0;
}

int pinio_cli_load_mpi(int argc, char **argv, cli_load_args *a, bool finalize)
{
    static const char *const policies[] = { "replicate", "shard", "node", "tp" };
    static const char *const exchanges[] = { "auto", "allgatherv", "bcast", "alltoallv",
                                             "shared" };
    pinio_mpi_opts o;
    pinio_mpi_opts_default(&o);
    for (int i = 0; i < 5; i++) { /* names checked by cli_load_parse() */
        if (i < 4 && !strcmp(a->policy, policies[i]))
            o.policy = (pinio_mpi_policy)i;
        if (a->exchange && !strcmp(a->exchange, exchanges[i]))
            o.exchange = (pinio_mpi_exchange)i;
    }
    o.cache = a->load.cache;
    o.direct = a->load.direct;
    o.backend = a->load.backend;
    o.queue_depth = a->load.queue_depth;
    o.request_size = a->load.request_size;
    o.bcast_piece = a->piece;
    o.node_ranks = a->node_ranks;
    o.verify = a->load.verify;
    o.split = a->split;
    o.nsplit = a->nsplit;
    o.world = a->world_set ? a->load.world : 0;
    const char **shard = calloc(a->nshard + 1, sizeof(*shard));
    if (!shard)
        return cli_failf("load", a->json, -ENOMEM, NULL, "out of memory");
    size_t nshard = a->nshard;
    bool json = a->json, quiet = a->quiet;
    int rc;

    int inited = 0, provided = 0, rank = 0, n = 1;
    MPI_Initialized(&inited);
    if (!inited)
        MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    for (size_t i = 0; i < nshard; i++)
        shard[i] = with_rank(a->shard[i], rank); /* freed below */
    if ((rc = device_agreed(a, rank, n)) != 0 || (rc = sums_agreed(a, argv, argc, rank)) != 0)
        goto out;
    o.expected_sha256 = a->shas;
    o.nexpected = a->nshas;
    o.filters = a->filters;
    o.nfilters = a->nfilters;
    o.shard_filters = shard;
    o.nshard_filters = nshard;
    /* Rank 0 draws the job's reads (the library gathers every rank's):
     * one line, as every rank's stderr reaches the same terminal. */
    cli_progress pg;
    cli_progress_start(&pg, "load --mpi", a->progress ? CLI_PROGRESS_FORCE : 0,
                       quiet || json || rank != 0);
    if (cli_progress_active(&pg)) {
        o.progress = cli_progress_cb;
        o.progress_ctx = &pg;
    }
    pinio_mpi_checkpoint *cp = NULL;
    pinio_mpi_report rep;
    pinio_diag d = { .offset = PINIO_DIAG_NO_OFFSET };
    /* Time to ready, each rank on its own clock: from its call until its
     * tensors are usable where it asked (with --device, on its GPU); the
     * job's is the last rank's. The load is collective, so a rank that
     * comes early counts its wait for the others, as its caller would. */
    double t_call = cli_now_s();
    int lrc = pinio_mpi_load(MPI_COMM_WORLD, (const char *const *)argv + a->first_path,
                             (size_t)(argc - a->first_path), &o, &cp, &rep, &d);
    cli_progress_end(&pg);
    bool nothing = false;
    if (lrc == 0 && (a->nfilters || nshard) && (nothing = selected_nothing(cp)) && rank == 0) {
        const pinio_plan *p = pinio_mpi_plan(cp);
        pinio_plan_info pi = { 0 };
        if (p)
            pinio_plan_get_info(p, &pi);
        char msg[PINIO_DIAG_MSG_MAX];
        cli_load_nothing(msg, sizeof(msg), a->nfilters ? "--filter" : "--shard-filter",
                         a->nfilters ? a->filters : a->shard, a->nfilters ? a->nfilters : nshard,
                         pi.skipped + pi.unindexed + pi.tensors, pi.files);
        cli_failf("load", json, -ENOENT, NULL, "%s", msg);
    }
    if (nothing) {
        rc = 1;
        pinio_mpi_release(cp);
        goto out;
    }
    /* --mpi tp --device: the slices to each rank's GPU (every rank agrees
     * on the outcome before anyone reports). */
    cli_mpi_gpu gpu;
    if (lrc == 0 && a->dev.set)
        lrc = cli_mpi_to_device(MPI_COMM_WORLD, a, (const char *const *)argv + a->first_path,
                                (size_t)(argc - a->first_path), cp, &gpu, &d);
    double ready = cli_now_s() - t_call;
    /* The same status on every rank (a digest count is a usage error). */
    rc = lrc == PINIO_EDIGESTS ? 2 : lrc < 0 ? 1 : 0;
    if (lrc < 0) {
        if (rank == 0) /* the same message on every rank: one report */
            cli_fail("load", json, lrc, &d);
    } else {
        pinio_mpi_report *all = rank == 0 ? calloc((size_t)n, sizeof(*all)) : NULL;
        cli_mpi_gpu *gpus = rank == 0 && a->dev.set ? calloc((size_t)n, sizeof(*gpus)) : NULL;
        double *readys = rank == 0 ? calloc((size_t)n, sizeof(*readys)) : NULL;
        MPI_Gather(&rep, (int)sizeof(rep), MPI_BYTE, all, (int)sizeof(rep), MPI_BYTE, 0,
                   MPI_COMM_WORLD);
        MPI_Gather(&ready, 1, MPI_DOUBLE, readys, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        if (a->dev.set)
            MPI_Gather(&gpu, (int)sizeof(gpu), MPI_BYTE, gpus, (int)sizeof(gpu), MPI_BYTE, 0,
                       MPI_COMM_WORLD);
        if (rank == 0 && all && readys && (gpus || !a->dev.set) && !quiet)
            print_report(all, readys, n, json, cp, a, gpus);
        free(readys);
        free(gpus);
        free(all);
    }
    pinio_mpi_release(cp);
out:
    for (size_t i = 0; i < nshard; i++)
        free((char *)shard[i]);
    if (!inited || finalize)
        MPI_Finalize();
    free(shard);
    return rc;
}
