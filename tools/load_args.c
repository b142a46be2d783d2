/* `pinio load`'s one option table (load_args.h). */
#include "load_args.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

enum {
    O_FILTER = 256, O_NODE, O_DIRECT, O_CACHE, O_BACKEND, O_QD, O_BS, O_VERIFY, O_SHA, O_JSON,
    O_QUIET, O_DEVICE, O_STAGING, O_MEMORY, O_ALIGN, O_REGISTER, O_CONSUMER,
    O_MPI, O_SHARD, O_XCHG, O_PIECE, O_NODE_RANKS, O_PROGRESS, O_FILL, O_SUMS,
    O_SPLIT, O_RANK, O_WORLD, O_OVERREAD, O_SHARE, O_NO_SHARE,
    O_END
};

static const struct option longopts[] = {
    { "filter", required_argument, NULL, O_FILTER },
    { "node", required_argument, NULL, O_NODE },
    { "direct", required_argument, NULL, O_DIRECT },
    { "cache", required_argument, NULL, O_CACHE },
    { "backend", required_argument, NULL, O_BACKEND },
    { "qd", required_argument, NULL, O_QD },
    { "bs", required_argument, NULL, O_BS },
    { "verify", no_argument, NULL, O_VERIFY },
    { "sha256", required_argument, NULL, O_SHA },
    { "sha256-file", required_argument, NULL, O_SUMS },
    { "json", no_argument, NULL, O_JSON },
    { "memory", required_argument, NULL, O_MEMORY },
    { "align", required_argument, NULL, O_ALIGN },
    { "register", no_argument, NULL, O_REGISTER },
    { "consumer", required_argument, NULL, O_CONSUMER },
    { "fill", required_argument, NULL, O_FILL },
    { "quiet", no_argument, NULL, O_QUIET },
    { "progress", no_argument, NULL, O_PROGRESS },
    { "device", required_argument, NULL, O_DEVICE },
    { "staging", required_argument, NULL, O_STAGING },
    { "mpi", required_argument, NULL, O_MPI },
    { "shard-filter", required_argument, NULL, O_SHARD },
    { "exchange", required_argument, NULL, O_XCHG },
    { "piece", required_argument, NULL, O_PIECE },
    { "node-ranks", required_argument, NULL, O_NODE_RANKS },
    { "split", required_argument, NULL, O_SPLIT },
    { "rank", required_argument, NULL, O_RANK },
    { "world", required_argument, NULL, O_WORLD },
    { "max-overread", required_argument, NULL, O_OVERREAD },
    { "share", required_argument, NULL, O_SHARE },
    { "no-share", no_argument, NULL, O_NO_SHARE },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
};

/* Which options each shape of the load takes; the rest are refused by name
 * rather than ignored. */
#define BIT(o) (1ull << ((o) - O_FILTER))
static const unsigned long long mpi_only =
    BIT(O_SHARD) | BIT(O_XCHG) | BIT(O_PIECE) | BIT(O_NODE_RANKS);
static const unsigned long long not_mpi = BIT(O_NODE) |
                                          BIT(O_MEMORY) | BIT(O_ALIGN) | BIT(O_DEVICE) |
                                          BIT(O_STAGING) | BIT(O_REGISTER) |
                                          BIT(O_CONSUMER) | BIT(O_FILL) | BIT(O_SPLIT) |
                                          BIT(O_RANK) | BIT(O_WORLD) | BIT(O_OVERREAD) |
                                          BIT(O_SHARE) | BIT(O_NO_SHARE);
/* The split options without --split: refused rather than ignored. */
static const unsigned long long split_only = BIT(O_RANK) | BIT(O_WORLD) | BIT(O_OVERREAD);

static const char *opt_name(int o)
{
    for (const struct option *l = longopts; l->name; l++)
        if (l->val == o)
            return l->name;
    return "?";
}

static int pick(const char *opt, const char *arg, const char *const *names, size_t n,
                const char *want)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(arg, names[i]))
            return (int)i;
    return -cli_usage("load", "%s wants %s, not '%s'", opt, want, arg);
}

/* --split PATTERN=DIM: cut at the last '=' (a pattern may hold one), DIM
 * an integer (negative from the end) or "whole". */
static int split_rule(cli_load_args *a, char *arg)
{
    char *eq = strrchr(arg, '=');
    const char *d = eq ? eq + 1 : "";
    char *end = NULL;
    long v = 0;
    bool whole = !strcmp(d, "whole");
    if (!whole && *d) {
        errno = 0;
        v = strtol(d, &end, 10);
    }
    if (!eq || eq == arg || (!whole && (!*d || *end || errno || v < -64 || v > 64)))
        return cli_usage("load", "--split wants PATTERN=DIM (DIM a dimension, negative from "
                                 "the end, or 'whole'), not '%s'", arg);
    *eq = '\0';
    a->split[a->nsplit++] = (pinio_split_rule){ .pattern = arg,
                                                .dim = whole ? PINIO_SPLIT_WHOLE : (int)v };
    return 0;
}

/* --rank / --world: a count below 2^31. */
static int split_count(const char *opt, const char *arg, uint32_t *out)
{
    uint64_t u;
    if (cli_parse_u64(arg, &u) < 0 || u > INT32_MAX)
        return cli_usage("load", "%s wants a whole number from 0 to %d, not '%s'", opt,
                         INT32_MAX, arg);
    *out = (uint32_t)u;
    return 0;
}

static int one(cli_load_args *a, int c, const char *arg)
{
    pinio_load_opts *o = &a->load;
    switch (c) {
    case O_FILTER: a->filters[a->nfilters++] = arg; return 0;
    case O_NODE: return cli_opt_node("load", "--node", arg, &o->node);
    case O_DIRECT: return cli_opt_direct("load", "--direct", arg, &o->direct);
    case O_CACHE: return cli_opt_cache("load", "--cache", arg, &o->cache);
    case O_QD: return cli_opt_qd("load", "--qd", arg, &o->queue_depth);
    case O_BS: return cli_opt_bs("load", "--bs", arg, &o->request_size);
    case O_BACKEND: {
        static const char *const names[] = { "auto", "fixed", "direct", "buffered", "pread" };
        static const pinio_backend values[] = { PINIO_BACKEND_AUTO, PINIO_BACKEND_FIXED_DIRECT,
                                                PINIO_BACKEND_DIRECT, PINIO_BACKEND_BUFFERED,
                                                PINIO_BACKEND_PREAD };
        int k = pick("--backend", arg, names, 5, "auto, fixed, direct, buffered or pread");
        if (k < 0)
            return -k;
        o->backend = values[k];
        return 0;
    }
    case O_MEMORY: {
        static const char *const names[] = { "auto", "pinned", "mapped" };
        static const pinio_memory_mode values[] = { PINIO_MEMORY_AUTO, PINIO_MEMORY_PINNED,
                                                    PINIO_MEMORY_MAPPED };
        int k = pick("--memory", arg, names, 3, "auto, pinned or mapped");
        if (k < 0)
            return -k;
        o->memory = values[k];
        return 0;
    }
    case O_ALIGN: {
        uint64_t al;
        if (cli_parse_size(arg, &al) < 0 || al < 1 || al > 4096 || (al & (al - 1)))
            return cli_usage("load", "--align wants a power of two from 1 to 4096, not '%s'", arg);
        o->tensor_align = al;
        return 0;
    }
    case O_REGISTER: o->register_arena = true; return 0;
    case O_CONSUMER: {
        static const char *const names[] = { "host", "dma" };
        static const pinio_consumer values[] = { PINIO_CONSUMER_HOST, PINIO_CONSUMER_DMA };
        int k = pick("--consumer", arg, names, 2, "host or dma");
        if (k < 0)
            return -k;
        o->consumer = values[k];
        return 0;
    }
    case O_FILL: {
        static const char *const names[] = { "auto", "ahead", "fault" };
        static const pinio_mapped_fill values[] = { PINIO_FILL_AUTO, PINIO_FILL_AHEAD,
                                                    PINIO_FILL_FAULT };
        int k = pick("--fill", arg, names, 3, "auto, ahead or fault");
        if (k < 0)
            return -k;
        o->mapped_fill = (uint8_t)values[k];
        return 0;
    }
    case O_SHARE: {
        static const char *const names[] = { "auto", "off" };
        int k = pick("--share", arg, names, 2, "auto or off");
        if (k < 0)
            return -k;
        o->share = (uint8_t)(k ? PINIO_SHARE_OFF : PINIO_SHARE_AUTO);
        return 0;
    }
    case O_NO_SHARE: o->share = PINIO_SHARE_OFF; return 0;
    case O_SHA:
        if (!cli_is_sha256(arg))
            return cli_usage("load", "--sha256 wants 64 hex digits, not '%s'", arg);
        a->shas[a->nshas++] = arg;
        o->verify = true;
        return 0;
    case O_SUMS:
        if (a->sums)
            return cli_usage("load", "--sha256-file is given once (one file may list every shard)");
        a->sums = arg;
        o->verify = true;
        return 0;
    case O_VERIFY: o->verify = true; return 0;
    case O_JSON: a->json = true; return 0;
    case O_QUIET: a->quiet = true; return 0;
    case O_PROGRESS: a->progress = true; return 0;
    case O_DEVICE:
        if (cli_parse_device(arg, &a->dev) < 0)
            return cli_usage("load", "--device wants host, cuda:N, cuda:BUSID, hip:N or hip:BUSID "
                                     "(with --mpi tp also cuda:local, hip:local), not '%s'", arg);
        return 0;
    case O_STAGING:
        if (cli_parse_staging(arg, &a->so) < 0)
            return cli_usage("load", "--staging wants SIZE[xK], SIZE a power of two from 64K to "
                                     "1G and K from 2 to 1024, not '%s'", arg);
        a->staging = true;
        return 0;
    case O_MPI: {
        static const char *const names[] = { "replicate", "shard", "node", "tp" };
        int k = pick("--mpi", arg, names, 4, "replicate, shard, node or tp");
        if (k < 0)
            return -k;
        a->mpi = true;
        a->policy = arg;
        return 0;
    }
    case O_SHARD: a->shard[a->nshard++] = arg; return 0;
    case O_SPLIT: return split_rule(a, (char *)arg);
    case O_RANK: a->rank_set = true; return split_count("--rank", arg, &o->rank);
    case O_WORLD: a->world_set = true; return split_count("--world", arg, &o->world);
    case O_OVERREAD: {
        /* A fraction or a percentage; 0 reads no hole through (the library's
         * 0 means its default, so it becomes a negative value). */
        char *end = NULL;
        errno = 0;
        double f = strtod(arg, &end);
        bool pct = end && *end == '%';
        if (end == arg || errno || (*end && !(pct && !end[1])) || !(f >= 0) || f > 1e6)
            return cli_usage("load", "--max-overread wants a fraction (0.05) or a percentage "
                                     "(5%%) of the slices' bytes, not '%s'", arg);
        f = pct ? f / 100 : f;
        o->max_overread = f == 0 ? -1 : f;
        return 0;
    }
    case O_XCHG: {
        static const char *const names[] = { "auto", "allgatherv", "bcast", "alltoallv",
                                             "shared" };
        int k = pick("--exchange", arg, names, 5, "auto, allgatherv, bcast, alltoallv or shared");
        if (k < 0)
            return -k;
        a->exchange = arg;
        return 0;
    }
    case O_PIECE:
        return cli_opt_size("load", "--piece", arg, 4096, (uint64_t)1 << 30, &a->piece);
    case O_NODE_RANKS: {
        uint64_t u;
        if (cli_parse_u64(arg, &u) < 0 || u == 0 || u > 1u << 20)
            return cli_usage("load", "--node-ranks wants a rank count from 1, not '%s'", arg);
        a->node_ranks = (int)u;
        return 0;
    }
    }
    return 2;
}

/* PINIO_FIRST_TOUCH_GBPS: the first-touch rate the library's cold rule
 * compares with the storage (pinio_load_opts::first_touch_gbps), given
 * instead of measured: tests, and machines whose figure is known. The
 * library reads no environment for it; the CLI passes it as an option. */
static int env_first_touch(pinio_load_opts *o)
{
    const char *v = getenv("PINIO_FIRST_TOUCH_GBPS");
    if (!v || !*v)
        return 0;
    char *end;
    errno = 0;
    double g = strtod(v, &end);
    if (*end || errno || !(g > 0 && g < 1e9))
        return cli_usage("load", "PINIO_FIRST_TOUCH_GBPS wants a rate in GB/s above 0, not '%s'",
                         v);
    o->first_touch_gbps = g;
    return 0;
}

int cli_load_parse(int argc, char **argv, cli_load_args *a)
{
    memset(a, 0, sizeof(*a));
    pinio_load_opts_default(&a->load);
    pinio_stream_opts_default(&a->so);
    a->filters = calloc((size_t)argc, sizeof(*a->filters));
    a->shas = calloc((size_t)argc, sizeof(*a->shas));
    a->shard = calloc((size_t)argc, sizeof(*a->shard));
    a->split = calloc((size_t)argc, sizeof(*a->split));
    if (!a->filters || !a->shas || !a->shard || !a->split) {
        fprintf(stderr, "pinio load: out of memory\n");
        return 2;
    }
    unsigned long long seen = 0;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":hq", longopts, NULL)) != -1) {
        if (c == 'q') /* -q as gen and stage take it */
            c = O_QUIET;
        if (c == 'h') {
            a->help = true;
            continue; /* --mpi may come later: it picks which help */
        }
        if (c < O_FILTER || c >= O_END)
            return cli_getopt_error("load", c, argv);
        int rc = one(a, c, optarg);
        if (rc)
            return rc;
        seen |= BIT(c);
    }
    if (a->help)
        return 0;
    int erc = env_first_touch(&a->load);
    if (erc)
        return erc;
    a->first_path = optind;
    if (optind >= argc)
        return cli_usage("load", "no checkpoint given");
    /* --mpi tp takes --split and --world (the rank is the MPI rank). */
    bool tp = a->mpi && !strcmp(a->policy, "tp");
    unsigned long long tp_takes =
        tp ? BIT(O_SPLIT) | BIT(O_WORLD) | BIT(O_DEVICE) | BIT(O_STAGING) : 0;
    if (a->mpi && !tp && (seen & BIT(O_DEVICE)))
        return cli_usage("load", "--device with --mpi goes with --mpi tp (each rank's slices "
                                 "to its GPU)");
    if (tp && a->dev.host)
        return cli_usage("load", "--device host with --mpi tp: the slices are in host memory "
                                 "already; a GPU is cuda:N, cuda:local, hip:N or hip:local");
    if (!a->mpi && a->dev.local)
        return cli_usage("load", "--device %s goes with --mpi tp (a rank's index on its "
                                 "machine); one process names its device, %s",
                         a->dev.hip ? "hip:local" : "cuda:local", a->dev.hip ? "hip:N" : "cuda:N");
    for (int o = O_FILTER; o < O_END; o++) {
        if (a->mpi && (seen & BIT(o) & not_mpi & ~tp_takes))
            return cli_usage("load", "--%s is not supported with --mpi", opt_name(o));
        if (!a->mpi && (seen & BIT(o) & mpi_only))
            return cli_usage("load", "--%s goes with --mpi", opt_name(o));
    }
    if (a->sums && a->nshas)
        return cli_usage("load", "--sha256 and --sha256-file do not go together: one list of "
                                 "digests per load");
    if (!(seen & BIT(O_SPLIT)) && (seen & split_only))
        return cli_usage("load", "--%s goes with --split",
                         opt_name(seen & BIT(O_RANK)    ? O_RANK
                                  : seen & BIT(O_WORLD) ? O_WORLD
                                                        : O_OVERREAD));
    if (a->nsplit) {
        if (!a->world_set)
            a->load.world = 1;
        if (a->load.world < 1)
            return cli_usage("load", "--world wants at least 1 rank, not %u", a->load.world);
        if (a->load.rank >= a->load.world)
            return cli_usage("load", "--rank %u is not below --world %u", a->load.rank,
                             a->load.world);
    }
    if (a->staging && !a->dev.set)
        return cli_usage("load", "--staging goes with --device");
    if (a->dev.set && a->load.request_size && !a->mpi) /* --mpi: --bs shapes the reads */
        return cli_usage("load", "--bs is not supported with --device yet");
    if (a->dev.set && (seen & (BIT(O_MEMORY) | BIT(O_ALIGN) | BIT(O_SHARE) | BIT(O_NO_SHARE))))
        return cli_usage("load", "--%s is not supported with --device",
                         seen & BIT(O_MEMORY)  ? "memory"
                         : seen & BIT(O_ALIGN) ? "align"
                         : seen & BIT(O_SHARE) ? "share"
                                               : "no-share");
    if (a->node_ranks && strcmp(a->policy, "node"))
        return cli_usage("load", "--node-ranks goes with --mpi node");
    if (a->nshard && strcmp(a->policy, "shard"))
        return cli_usage("load", "--shard-filter goes with --mpi shard");
    if (a->nshard && a->nfilters)
        return cli_usage("load", "--filter with --shard-filter: under --mpi shard a rank's "
                                 "tensors are its --shard-filter patterns alone");
    if (tp && !a->nsplit)
        return cli_usage("load", "--mpi tp wants at least one --split PATTERN=DIM");
    bool tp_x = a->exchange && (!strcmp(a->exchange, "alltoallv") ||
                                !strcmp(a->exchange, "shared"));
    if (a->exchange && !strcmp(a->policy, "shard"))
        return cli_usage("load", "--exchange goes with --mpi replicate, node or tp");
    if (a->exchange && tp && strcmp(a->exchange, "auto") && !tp_x)
        return cli_usage("load", "--exchange with --mpi tp is auto, shared or alltoallv");
    if (tp_x && !tp)
        return cli_usage("load", "--exchange %s goes with --mpi tp", a->exchange);
    return 0;
}

void cli_load_nothing(char *msg, size_t size, const char *flag, const char *const *pats,
                      size_t npats, size_t tensors, size_t files)
{
    size_t n = (size_t)snprintf(msg, size, "no tensor matches %s", flag);
    for (size_t i = 0; i < npats && n < size; i++)
        n += (size_t)snprintf(msg + n, size - n, "%s '%s'", i ? "," : "", pats[i]);
    if (n < size)
        snprintf(msg + n, size - n, " (%zu tensors in %zu file%s)", tensors, files,
                 files == 1 ? "" : "s");
}

void cli_load_args_free(cli_load_args *a)
{
    free(a->sums_buf);
    free(a->filters);
    free(a->shas);
    free(a->shard);
    free(a->split);
    memset(a, 0, sizeof(*a));
}

