/* `pinio load --mpi POLICY`: one load per MPI job (libpinio_mpi), run under
 * mpiexec; rank 0 prints one report with every rank's storage reads.
 * Compiled only into a pinio built with MPI (-Dmpi); cmd_load.c hands
 * argv here when it sees --mpi. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pinio/mpi.h"
#include "pinio/pinio.h"
#include "load_mpi.h"
#include "util.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: mpiexec -n N pinio load --mpi replicate|shard|node PATH... [options]\n"
            "\n"
            "Loads a safetensors checkpoint once per MPI job. Rank 0 reads the headers and\n"
            "broadcasts them; every rank builds the same plan and reads its own stripe with\n"
            "O_DIRECT io_uring reads, so each byte comes from storage once per job.\n"
            "  replicate  every rank ends with every byte: the stripes are exchanged in place\n"
            "  shard      each rank keeps only its part (a byte-balanced split that never\n"
            "             cuts a tensor, or its own --shard-filter); nothing is exchanged\n"
            "  node       every rank ends with every byte, one copy per node: the node's\n"
            "             ranks read disjoint stripes into one shared-memory copy (memfd,\n"
            "             locked when RLIMIT_MEMLOCK allows) whose views they all hold; only\n"
            "             the node leaders exchange, over the network\n"
            "Rank 0 prints one report: per-rank bytes read from storage and times.\n"
            "\n"
            "options:\n"
            "  --filter PATTERN        the job's selection (repeatable; same on every rank)\n"
            "  --shard-filter PATTERN  shard: this rank's tensors instead of the split; the\n"
            "                          pattern may hold %%r, replaced by the rank\n"
            "  --exchange auto|allgatherv|bcast  replicate: how stripes are shared (auto:\n"
            "                          allgatherv)\n"
            "  --piece SIZE            bcast: bytes per broadcast piece (default 16M)\n"
            "  --node-ranks K          node: count each K consecutive ranks of a machine as\n"
            "                          a node of its own (a multi-node job simulated on one\n"
            "                          machine); default: the machine's ranks are one node\n"
            "  --cache auto|cold|hot   as pinio load (cold: O_DIRECT after dropping the cache)\n"
            "  --direct auto|on|off    O_DIRECT policy\n"
            "  --qd N, --bs SIZE       reads in flight, bytes per read request\n"
            "  --json                  print the report as one JSON object (rank 0)\n"
            "  --quiet                 no report (exit status only)\n"
            "  -h, --help              this help\n"
            "\n"
            "exit status: 0 loaded on every rank; 1 failed (the same message on every rank,\n"
            "naming the failing rank, file and offset; rank 0 prints it); 2 usage\n");
}

static int parse_enum(const char *s, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (names[i] && !strcmp(s, names[i]))
            return i;
    return -1;
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

static void print_report(const pinio_mpi_report *all, int n, bool json)
{
    const pinio_mpi_report *r0 = &all[0];
    uint64_t job = r0->job_read_bytes;
    if (json) {
        printf("{\"policy\":\"%s\",\"exchange\":\"%s\",\"ranks\":%d,\"plan_read_bytes\":%" PRIu64
               ",\"job_read_bytes\":%" PRIu64 ",\"header_bytes\":%" PRIu64
               ",\"nodes\":%d,\"node_bytes\":%" PRIu64 ",\"node_locked\":%s"
               ",\"seconds\":%.6f,\"gbps\":%.3f,\"per_rank\":[",
               pinio_mpi_policy_name(r0->policy), pinio_mpi_exchange_name(r0->exchange), n,
               r0->plan_read_bytes, job, r0->header_bytes, r0->nodes, r0->node_bytes,
               r0->locked ? "true" : "false", r0->max_seconds,
               r0->max_seconds > 0 ? (double)r0->plan_read_bytes / r0->max_seconds / 1e9 : 0);
        for (int r = 0; r < n; r++)
            printf("%s{\"rank\":%d,\"node\":%d,\"local_rank\":%d,\"tensors\":%zu,\"bytes\":%" PRIu64 ",\"read_bytes\":%" PRIu64
                   ",\"received_bytes\":%" PRIu64 ",\"plan_s\":%.6f,\"io_s\":%.6f,"
                   "\"exchange_s\":%.6f,\"seconds\":%.6f}",
                   r ? "," : "", r, all[r].node, all[r].local_rank, all[r].tensors, all[r].bytes, all[r].read_bytes,
                   all[r].received_bytes, all[r].plan_seconds, all[r].io_seconds,
                   all[r].exchange_seconds, all[r].seconds);
        printf("]}\n");
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
    if (r0->policy != PINIO_MPI_SHARD && r0->nodes > 1)
        printf("  exchange: %s%s\n", pinio_mpi_exchange_name(r0->exchange),
               r0->policy == PINIO_MPI_NODE ? " between node leaders" : "");
    printf("  rank  tensors        held   read (storage)   received   plan s    io s  xchg s\n");
    for (int r = 0; r < n; r++) {
        char h[32], rd[32], rc[32];
        printf("  %4d  %7zu  %10s  %15s  %9s  %6.3f  %6.3f  %6.3f\n", r, all[r].tensors,
               cli_human_bytes(h, sizeof(h), all[r].bytes),
               cli_human_bytes(rd, sizeof(rd), all[r].read_bytes),
               cli_human_bytes(rc, sizeof(rc), all[r].received_bytes), all[r].plan_seconds,
               all[r].io_seconds, all[r].exchange_seconds);
    }
}

int pinio_cli_load_mpi(int argc, char **argv)
{
    enum { O_MPI = 256, O_FILTER, O_SHARD, O_XCHG, O_PIECE, O_CACHE, O_DIRECT, O_QD, O_BS, O_JSON,
           O_QUIET, O_NODE_RANKS };
    static const struct option longopts[] = {
        { "mpi", required_argument, NULL, O_MPI },
        { "filter", required_argument, NULL, O_FILTER },
        { "shard-filter", required_argument, NULL, O_SHARD },
        { "exchange", required_argument, NULL, O_XCHG },
        { "piece", required_argument, NULL, O_PIECE },
        { "node-ranks", required_argument, NULL, O_NODE_RANKS },
        { "cache", required_argument, NULL, O_CACHE },
        { "direct", required_argument, NULL, O_DIRECT },
        { "qd", required_argument, NULL, O_QD },
        { "bs", required_argument, NULL, O_BS },
        { "json", no_argument, NULL, O_JSON },
        { "quiet", no_argument, NULL, O_QUIET },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    static const char *const policies[] = { "replicate", "shard", "node" };
    static const char *const exchanges[] = { "auto", "allgatherv", "bcast" };
    static const char *const caches[] = { "auto", "cold", "hot" };
    static const char *const directs[] = { "auto", "on", "off" };
    pinio_mpi_opts o;
    pinio_mpi_opts_default(&o);
    const char **filters = calloc((size_t)argc, sizeof(*filters));
    const char **shard = calloc((size_t)argc, sizeof(*shard));
    size_t nfilters = 0, nshard = 0;
    bool json = false, quiet = false;
    int rc = 2, c, v;
    uint64_t u;
    if (!filters || !shard) {
        fprintf(stderr, "pinio load: out of memory\n");
        goto out;
    }
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case O_MPI:
            if ((v = parse_enum(optarg, policies, 3)) < 0) {
                cli_usage("load", "--mpi: replicate, shard or node, not '%s'", optarg);
                goto out;
            }
            o.policy = (pinio_mpi_policy)v;
            break;
        case O_FILTER: filters[nfilters++] = optarg; break;
        case O_SHARD: shard[nshard++] = optarg; break;
        case O_XCHG:
            if ((v = parse_enum(optarg, exchanges, 3)) < 0) {
                cli_usage("load", "--exchange: auto, allgatherv or bcast");
                goto out;
            }
            o.exchange = (pinio_mpi_exchange)v;
            break;
        case O_PIECE:
            if (cli_parse_size(optarg, &u) < 0 || u == 0) {
                cli_usage("load", "--piece: a size such as 16M");
                goto out;
            }
            o.bcast_piece = u;
            break;
        case O_NODE_RANKS:
            if (cli_parse_u64(optarg, &u) < 0 || u == 0 || u > 1u << 20) {
                cli_usage("load", "--node-ranks: a rank count, 1 or more");
                goto out;
            }
            o.node_ranks = (int)u;
            break;
        case O_CACHE:
            if ((v = parse_enum(optarg, caches, 3)) < 0) {
                cli_usage("load", "--cache: auto, cold or hot");
                goto out;
            }
            o.cache = (pinio_cache_policy)v;
            break;
        case O_DIRECT:
            if ((v = parse_enum(optarg, directs, 3)) < 0) {
                cli_usage("load", "--direct: auto, on or off");
                goto out;
            }
            o.direct = v == 0 ? PINIO_DIRECT_AUTO : v == 1 ? PINIO_DIRECT_ON : PINIO_DIRECT_OFF;
            break;
        case O_QD:
            if (cli_parse_u64(optarg, &u) < 0 || u == 0 || u > 4096) {
                cli_usage("load", "--qd: 1 to 4096");
                goto out;
            }
            o.queue_depth = (unsigned)u;
            break;
        case O_BS:
            if (cli_parse_size(optarg, &u) < 0 || u == 0) {
                cli_usage("load", "--bs: a size such as 1M");
                goto out;
            }
            o.request_size = (size_t)u;
            break;
        case O_JSON: json = true; break;
        case O_QUIET: quiet = true; break;
        case 'h':
            usage(stdout);
            rc = 0;
            goto out;
        default:
            cli_getopt_error("load", c, argv);
            goto out;
        }
    }
    if (optind >= argc) {
        cli_usage("load", "no PATH given");
        goto out;
    }
    if (o.node_ranks && o.policy != PINIO_MPI_NODE) {
        cli_usage("load", "--node-ranks needs --mpi node");
        goto out;
    }
    if (nshard && o.policy != PINIO_MPI_SHARD) {
        cli_usage("load", "--shard-filter needs --mpi shard");
        goto out;
    }

    int inited = 0, provided = 0, rank = 0, n = 1;
    MPI_Initialized(&inited);
    if (!inited)
        MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    for (size_t i = 0; i < nshard; i++)
        shard[i] = with_rank(shard[i], rank); /* freed below */
    o.filters = filters;
    o.nfilters = nfilters;
    o.shard_filters = shard;
    o.nshard_filters = nshard;
    pinio_mpi_checkpoint *cp = NULL;
    pinio_mpi_report rep;
    pinio_diag d;
    int lrc = pinio_mpi_load(MPI_COMM_WORLD, (const char *const *)argv + optind,
                             (size_t)(argc - optind), &o, &cp, &rep, &d);
    rc = lrc < 0 ? 1 : 0;
    if (lrc < 0) {
        if (rank == 0)
            fprintf(stderr, "pinio load: %s\n", d.msg);
    } else {
        pinio_mpi_report *all = rank == 0 ? calloc((size_t)n, sizeof(*all)) : NULL;
        MPI_Gather(&rep, (int)sizeof(rep), MPI_BYTE, all, (int)sizeof(rep), MPI_BYTE, 0,
                   MPI_COMM_WORLD);
        if (rank == 0 && all && !quiet)
            print_report(all, n, json);
        free(all);
    }
    pinio_mpi_release(cp);
    for (size_t i = 0; i < nshard; i++)
        free((char *)shard[i]);
    if (!inited)
        MPI_Finalize();
out:
    free(filters);
    free(shard);
    return rc;
}
