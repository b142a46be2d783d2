/* One MPI load of FILE by one method, timed barrier to barrier, for
 * bench/mpi_load (which alternates the methods and takes medians).
 *
 * usage: mpiexec -n N mpi_load_bench METHOD FILE [--hint KEY=VALUE]...
 *                [--exchange allgatherv|bcast] [--node-ranks K] [--verify]
 *   each       every rank loads the whole file with pinio_load (no MPI)
 *   mpiio      every rank reads the whole file with MPI_File_read_at_all
 *              (the io component comes from mpiexec: --mca io romio321|ompio;
 *              --hint: MPI_Info hints, e.g. romio_cb_read=enable)
 *   replicate  pinio_mpi_load(PINIO_MPI_REPLICATE)
 *   node       pinio_mpi_load(PINIO_MPI_NODE)
 *   shard      pinio_mpi_load(PINIO_MPI_SHARD), the byte-balanced split
 * --verify: pinio_mpi_load computes the file's SHA-256 as read (its time on
 * the slowest rank is verify_s in the JSON line).
 *
 * Rank 0 prints one JSON line: the slowest rank's seconds, the ranks' CPU
 * seconds together (cpu_s: MPI's polling included), GB/s of file
 * bytes delivered to every rank, each rank's storage reads (/proc/self/io
 * read_bytes) and the memory the ranks hold once the data is in: the sum of
 * their Pss growth (shared pages counted once per node), per node.
 * The page cache is dropped for FILE before the run (posix_fadvise on rank
 * 0: clean pages go), so every method starts cold. Public headers only. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench_util.h"
#include "pinio/load.h"
#include "pinio/mpi.h"

/* One /proc/self field, e.g. ("io", "read_bytes: ") or ("smaps_rollup", "Pss: "). */
static uint64_t proc_field(const char *file, const char *key)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/self/%s", file);
    FILE *f = fopen(path, "r");
    uint64_t v = 0;
    size_t kl = strlen(key);
    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, key, kl) == 0) {
            v = strtoull(line + kl, NULL, 10);
            break;
        }
    if (f)
        fclose(f);
    return v;
}

static int die(int rank, const char *what, const char *msg)
{
    if (rank == 0)
        fprintf(stderr, "mpi_load_bench: %s: %s\n", what, msg);
    MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
}

/* This process's CPU seconds (user and system) so far: on a busy machine
 * the wall time says more of the load than of the method. */
static double cpu_now(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

/* Every rank reads the whole file collectively, 1 GiB per call at most. */
static int mpiio(const char *path, uint64_t size, MPI_Info info, void **keep)
{
    MPI_File fh;
    int e = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY, info, &fh);
    if (e != MPI_SUCCESS)
        return e;
    char *buf = malloc(size ? size : 1);
    if (!buf)
        return MPI_ERR_NO_MEM;
    const uint64_t piece = (uint64_t)1 << 30;
    for (uint64_t off = 0; off < size && e == MPI_SUCCESS; off += piece) {
        int n = (int)(size - off < piece ? size - off : piece);
        MPI_Status st;
        e = MPI_File_read_at_all(fh, (MPI_Offset)off, buf + off, n, MPI_BYTE, &st);
        int got = 0;
        MPI_Get_count(&st, MPI_BYTE, &got);
        if (e == MPI_SUCCESS && got != n)
            e = MPI_ERR_TRUNCATE;
    }
    MPI_File_close(&fh);
    *keep = buf;
    return e;
}

int main(int argc, char **argv)
{
    int provided = 0, rank = 0, n = 1;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    if (argc < 3)
        return die(rank, "usage", "mpi_load_bench each|mpiio|replicate|node FILE [options]");
    const char *method = argv[1], *path = argv[2];
    MPI_Info info;
    MPI_Info_create(&info);
    pinio_mpi_opts mo;
    pinio_mpi_opts_default(&mo);
    mo.cache = PINIO_CACHE_COLD;
    char hints[512] = "";
    for (int i = 3; i < argc; i += 2) {
        if (!strcmp(argv[i], "--verify")) {
            mo.verify = true;
            i--; /* no value */
            continue;
        }
        if (i + 1 >= argc)
            return die(rank, argv[i], "wants a value");
        if (!strcmp(argv[i], "--hint")) {
            char *eq = strchr(argv[i + 1], '=');
            if (!eq)
                return die(rank, "--hint", "KEY=VALUE");
            *eq = '\0';
            MPI_Info_set(info, argv[i + 1], eq + 1);
            size_t l = strlen(hints);
            snprintf(hints + l, sizeof(hints) - l, "%s%s=%s", l ? "," : "", argv[i + 1], eq + 1);
        } else if (!strcmp(argv[i], "--exchange")) {
            mo.exchange = !strcmp(argv[i + 1], "bcast") ? PINIO_MPI_EXCHANGE_BCAST
                                                         : PINIO_MPI_EXCHANGE_ALLGATHERV;
        } else if (!strcmp(argv[i], "--node-ranks")) {
            mo.node_ranks = atoi(argv[i + 1]);
        } else {
            return die(rank, argv[i], "unknown option");
        }
    }
    struct stat sb;
    if (stat(path, &sb) != 0)
        return die(rank, path, strerror(errno));
    uint64_t size = (uint64_t)sb.st_size;
    if (rank == 0) {
        int fd = open(path, O_RDONLY);
        if (fd >= 0) {
            fdatasync(fd);
            posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
            close(fd);
        }
    }

    uint64_t io0 = proc_field("io", "read_bytes: ");
    uint64_t pss0 = proc_field("smaps_rollup", "Pss: ");
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = bench_now(), c0 = cpu_now();
    int rc = 0, nodes = 1;
    double verify_s = 0, max_verify_s = 0;
    const char *sub = "";
    void *keep = NULL;
    pinio_checkpoint *lcp = NULL;
    pinio_mpi_checkpoint *mcp = NULL;
    pinio_diag d;
    d.msg[0] = '\0';
    if (!strcmp(method, "each")) {
        pinio_load_opts lo;
        pinio_load_opts_default(&lo);
        lo.cache = PINIO_CACHE_COLD;
        rc = pinio_load(&path, 1, &lo, &lcp, &d);
    } else if (!strcmp(method, "mpiio")) {
        int e = mpiio(path, size, info, &keep);
        if (e != MPI_SUCCESS) {
            int len = 0;
            MPI_Error_string(e, d.msg, &len);
            rc = -EIO;
        }
        sub = hints;
    } else if (!strcmp(method, "replicate") || !strcmp(method, "node") ||
               !strcmp(method, "shard")) {
        mo.policy = method[0] == 'n'   ? PINIO_MPI_NODE
                    : method[0] == 's' ? PINIO_MPI_SHARD
                                       : PINIO_MPI_REPLICATE;
        pinio_mpi_report rep;
        rc = pinio_mpi_load(MPI_COMM_WORLD, &path, 1, &mo, &mcp, &rep, &d);
        verify_s = rc == 0 ? rep.verify_seconds : 0;
        if (rc == 0) {
            nodes = mo.policy == PINIO_MPI_NODE ? rep.nodes : 1;
            sub = mo.policy == PINIO_MPI_NODE && rep.nodes == 1 ? "" : pinio_mpi_exchange_name(rep.exchange);
        }
    } else {
        return die(rank, method, "not each, mpiio, replicate, node or shard");
    }
    double cpu = cpu_now() - c0, all_cpu = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    double secs = bench_now() - t0;
    int bad = rc < 0, anybad = 0;
    MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (anybad) {
        if (bad)
            fprintf(stderr, "mpi_load_bench: rank %d: %s: %s\n", rank, method, d.msg);
        MPI_Finalize();
        return 1;
    }
    uint64_t io = proc_field("io", "read_bytes: ") - io0;
    uint64_t pss = proc_field("smaps_rollup", "Pss: ");
    int64_t grew = (int64_t)pss - (int64_t)pss0, all_grew = 0;
    uint64_t *ios = rank == 0 ? calloc((size_t)n, sizeof(*ios)) : NULL;
    MPI_Gather(&io, 1, MPI_UINT64_T, ios, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    MPI_Reduce(&grew, &all_grew, 1, MPI_INT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&verify_s, &max_verify_s, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&cpu, &all_cpu, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("{\"method\":\"%s\",\"variant\":\"%s\",\"ranks\":%d,\"nodes\":%d,\"bytes\":%" PRIu64
               ",\"seconds\":%.6f,\"gbps\":%.3f,\"verify\":%s,\"verify_s\":%.6f"
               ",\"cpu_s\":%.6f,\"mem_per_node\":%" PRId64 ",\"read_bytes\":[",
               method, sub, n, nodes, size, secs, (double)size / secs / 1e9,
               mo.verify ? "true" : "false", max_verify_s, all_cpu, all_grew * 1024 / nodes);
        for (int r = 0; r < n; r++)
            printf("%s%" PRIu64, r ? "," : "", ios[r]);
        printf("]}\n");
    }
    free(ios);
    free(keep);
    pinio_checkpoint_release(lcp);
    pinio_mpi_release(mcp);
    MPI_Info_free(&info);
    MPI_Finalize();
    return 0;
}
