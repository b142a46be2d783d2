/* `pinio load`: load a checkpoint into pinned memory and report how it went. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "pinio/pinio.h"
#include "cli.h"
#include "stream_cli.h"
#include "util.h"
#if PINIO_HAVE_MPI
#include "load_mpi.h"
#endif

static void load_usage(FILE *out)
{
    fprintf(out,
            "usage: pinio load PATH... [options]\n"
            "\n"
            "Loads a safetensors checkpoint into pinned, NUMA-local memory with O_DIRECT\n"
            "io_uring reads (or, for files already in the page cache, maps them: see\n"
            "--memory), checks every byte arrived, and reports speed and the I/O path.\n"
            "PATH is a .safetensors file, a directory of shards (its\n"
            "model.safetensors.index.json when present), or an index file.\n"
            "\n"
            "options:\n"
            "  --filter PATTERN   load only matching tensors (repeatable): an exact name, a\n"
            "                     dotted prefix (model.layers.0), or a glob (*.weight)\n"
            "  --node N|auto|any  NUMA node of the memory (auto: the files' device node)\n"
            "  --direct auto|on|off  O_DIRECT policy (auto: where the file system allows)\n"
            "  --cache auto|cold|hot  auto: buffered for files already in the page cache;\n"
            "                     cold: drop the files' cached pages first; hot: buffered\n"
            "  --backend auto|fixed|direct|buffered|pread  force a rung of the I/O ladder\n"
            "  --qd N             reads in flight (default: the engine's, 16)\n"
            "  --bs SIZE          bytes per read request, e.g. 1M (default: the engine's)\n"
            "  --memory auto|pinned|mapped  where tensors live (default auto, per file):\n"
            "                     pinned: read into one NUMA-placed arena locked in RAM\n"
            "                     (O_DIRECT for cold files; what a GPU can DMA from);\n"
            "                     mapped: the file's page cache mapped read-only, no copy\n"
            "                     (cold files are read into the page cache first);\n"
            "                     auto: mapped for files already in the page cache, pinned\n"
            "                     for the others; the summary says which ran and why\n"
            "  --align N          every tensor at an address that is a multiple of N (a power\n"
            "                     of two up to 4096, e.g. 64): tensors the file does not align\n"
            "                     are moved once in the arena (such files are read pinned)\n"
            "  --verify           compute each file's SHA-256 (the hub's LFS object id)\n"
            "  --sha256 HEX       expected SHA-256 (implies --verify), repeated once per\n"
            "                     file: the N-th value is the N-th file as the inputs resolve\n"
            "                     (a folder or index: its shards in order); any other count\n"
            "                     is an error\n"
            "  --device DEV       stream instead of loading resident: the tensors go through a\n"
            "                     small ring of pinned, registered staging slots to DEV, and\n"
            "                     host memory stays the ring whatever the checkpoint's size.\n"
            "                     cuda:N or cuda:BUSID (e.g. cuda:0000:65:00.0): each tensor to\n"
            "                     its own 256-byte aligned address on that GPU, the driver\n"
            "                     loaded at run time (libcuda.so.1, or the path in\n"
            "                     PINIO_CUDA_LIB); reports storage and H2D GB/s apart.\n"
            "                     hip:N or hip:BUSID: the same on an AMD GPU through HIP\n"
            "                     (libamdhip64.so, or the path in PINIO_HIP_LIB).\n"
            "                     host: every byte handed to a callback and dropped (what the\n"
            "                     streaming path costs without a GPU)\n"
            "  --staging SIZE[xK] with --device: K slots of SIZE bytes (default 32Mx4)\n"
            "  --json             print the summary as one JSON object\n"
            "  --quiet            no progress bar and no summary (exit status only)\n"
            "  --mpi replicate|shard  one load per MPI job, under mpiexec (see\n"
            "                     pinio load --mpi replicate --help; needs a pinio built with MPI)\n"
            "  -h, --help         this help\n"
            "\n"
            "A load holds one open file per shard: the soft open-file limit is raised to\n"
            "the hard one (ulimit -Hn) for the command's own process.\n"
            "exit status: 0 loaded; 1 load failed (the message names file and offset); 2 usage\n");
}

struct progress {
    bool tty;
    double t0;
    double last;
};

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int on_progress(void *ctx, const pinio_progress *pg)
{
    struct progress *p = ctx;
    uint64_t done = pg->done_bytes, total = pg->total_bytes;
    double t = mono();
    if (!p->tty || (t - p->last < 0.1 && done < total))
        return 0;
    p->last = t;
    double el = t - p->t0, gbs = el > 0 ? (double)done / el / 1e9 : 0;
    double eta = gbs > 0 ? (double)(total - done) / (gbs * 1e9) : 0;
    int width = 30, fill = total ? (int)((double)width * (double)done / (double)total) : width;
    fprintf(stderr, "\r[%.*s%*s] %6.2f / %.2f GB  %5.2f GB/s  ETA %4.1fs ", fill,
            "==============================", width - fill, "", (double)done / 1e9,
            (double)total / 1e9, gbs, eta);
    if (done >= total)
        fprintf(stderr, "\r%*s\r", 80, "");
    return 0;
}

static int run_load(int argc, char **argv)
{
    /* --mpi is a different program shape (collective, rank 0 reports):
     * the MPI build hands the whole command line to cmd_load_mpi.c. */
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--mpi") || !strncmp(argv[i], "--mpi=", 6)) {
#if PINIO_HAVE_MPI
            return pinio_cli_load_mpi(argc, argv);
#else
            cli_usage("load", "--mpi: this pinio was built without MPI "
                            "(meson -Dmpi=enabled, with libopenmpi-dev)");
            return 2;
#endif
        }
    enum { O_FILTER = 256, O_NODE, O_DIRECT, O_CACHE, O_BACKEND, O_QD, O_BS, O_VERIFY, O_SHA,
           O_JSON, O_QUIET, O_DEVICE, O_STAGING, O_MEMORY, O_ALIGN };
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
        { "json", no_argument, NULL, O_JSON },
        { "memory", required_argument, NULL, O_MEMORY },
        { "align", required_argument, NULL, O_ALIGN },
        { "quiet", no_argument, NULL, O_QUIET },
        { "device", required_argument, NULL, O_DEVICE },
        { "staging", required_argument, NULL, O_STAGING },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    pinio_load_opts opts;
    pinio_load_opts_default(&opts);
    const char **filters = calloc((size_t)argc, sizeof(*filters));
    const char **shas = calloc((size_t)argc, sizeof(*shas));
    size_t nfilters = 0, nshas = 0;
    bool json = false, quiet = false;
    cli_device dev = { 0 };
    pinio_stream_opts so;
    pinio_stream_opts_default(&so);
    const char *staging = NULL;
    int rc = 2, c;
    if (!filters || !shas) {
        fprintf(stderr, "pinio load: out of memory\n");
        goto out;
    }
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case O_FILTER:
            filters[nfilters++] = optarg;
            break;
        case O_NODE:
            if (!strcmp(optarg, "auto"))
                opts.node = PINIO_NODE_AUTO;
            else if (!strcmp(optarg, "any"))
                opts.node = PINIO_NODE_ANY;
            else {
                char *end;
                long n = strtol(optarg, &end, 10);
                if (*end || n < 0 || n > 4095) {
                    cli_usage("load", "--node wants a node number, auto or any, not '%s'", optarg);
                    goto out;
                }
                opts.node = (int)n;
            }
            break;
        case O_DIRECT:
            if (cli_parse_direct(optarg, &opts.direct) < 0) {
                cli_usage("load", "--direct wants auto, on or off, not '%s'", optarg);
                goto out;
            }
            break;
        case O_CACHE:
            if (cli_parse_cache(optarg, &opts.cache) < 0) {
                cli_usage("load", "--cache wants auto, cold or hot, not '%s'", optarg);
                goto out;
            }
            break;
        case O_BACKEND: {
            static const struct { const char *n; pinio_backend b; } names[] = {
                { "auto", PINIO_BACKEND_AUTO }, { "fixed", PINIO_BACKEND_FIXED_DIRECT },
                { "direct", PINIO_BACKEND_DIRECT }, { "buffered", PINIO_BACKEND_BUFFERED },
                { "pread", PINIO_BACKEND_PREAD },
            };
            size_t k = 0;
            while (k < sizeof(names) / sizeof(names[0]) && strcmp(names[k].n, optarg))
                k++;
            if (k == sizeof(names) / sizeof(names[0])) {
                cli_usage("load", "--backend wants auto, fixed, direct, buffered or pread, not '%s'", optarg);
                goto out;
            }
            opts.backend = names[k].b;
            break;
        }
        case O_QD: {
            char *end;
            long n = strtol(optarg, &end, 10);
            if (*end || n < 1 || n > 4096) {
                cli_usage("load", "--qd wants 1..4096, not '%s'", optarg);
                goto out;
            }
            opts.queue_depth = (unsigned)n;
            break;
        }
        case O_BS: {
            uint64_t bs = 0;
            if (cli_parse_size(optarg, &bs) < 0 || bs < 4096 || bs > (1u << 30) ||
                (bs & (bs - 1))) {
                cli_usage("load", "--bs wants a power of two from 4K to 1G (e.g. 1M), not '%s'", optarg);
                goto out;
            }
            opts.request_size = (size_t)bs;
            break;
        }
        case O_MEMORY:
            if (!strcmp(optarg, "auto"))
                opts.memory = PINIO_MEMORY_AUTO;
            else if (!strcmp(optarg, "pinned"))
                opts.memory = PINIO_MEMORY_PINNED;
            else if (!strcmp(optarg, "mapped"))
                opts.memory = PINIO_MEMORY_MAPPED;
            else {
                cli_usage("load", "--memory wants auto, pinned or mapped, not '%s'", optarg);
                goto out;
            }
            break;
        case O_ALIGN: {
            uint64_t al = 0;
            if (cli_parse_size(optarg, &al) < 0 || al < 1 || al > 4096 || (al & (al - 1))) {
                cli_usage("load", "--align wants a power of two from 1 to 4096, not '%s'", optarg);
                goto out;
            }
            opts.tensor_align = al;
            break;
        }
        case O_VERIFY:
            opts.verify = true;
            break;
        case O_SHA:
            if (strlen(optarg) != 64 || strspn(optarg, "0123456789abcdefABCDEF") != 64) {
                cli_usage("load", "--sha256 wants 64 hex digits, not '%s'", optarg);
                goto out;
            }
            shas[nshas++] = optarg;
            opts.verify = true;
            break;
        case O_JSON:
            json = true;
            break;
        case O_QUIET:
            quiet = true;
            break;
        case O_DEVICE:
            if (cli_parse_device(optarg, &dev) < 0) {
                cli_usage("load", "--device wants host, cuda:N, cuda:BUSID, hip:N or hip:BUSID, not '%s'", optarg);
                goto out;
            }
            break;
        case O_STAGING:
            if (cli_parse_staging(optarg, &so) < 0) {
                cli_usage("load", "--staging wants SIZE[xK], SIZE a power of two from "
                                "64K to 1G and K from 2 to 1024, not '%s'", optarg);
                goto out;
            }
            staging = optarg;
            break;
        case 'h':
            load_usage(stdout);
            rc = 0;
            goto out;
        default:
            cli_getopt_error("load", c, argv);
            goto out;
        }
    }
    if (optind >= argc) {
        cli_usage("load", "no checkpoint given");
        goto out;
    }
    if (staging && !dev.set) {
        cli_usage("load", "--staging goes with --device");
        goto out;
    }
    if (dev.set && opts.request_size) {
        cli_usage("load", "--bs is not supported with --device yet");
        goto out;
    }
    /* before the digest count is checked: that opens every shard too */
    unsigned long long nofile_from, nofile_to;
    cli_raise_nofile(&nofile_from, &nofile_to);
    if ((rc = cli_check_digest_count("load", (const char *const *)argv + optind,
                                     (size_t)(argc - optind), nshas)) != 0)
        goto out;
    if (dev.set) {
        so.filters = filters;
        so.nfilters = nfilters;
        so.node = opts.node;
        so.cache = opts.cache;
        so.direct = opts.direct;
        so.queue_depth = opts.queue_depth;
        so.backend = opts.backend;
        so.verify = opts.verify;
        so.expected_sha256 = shas;
        so.nexpected = nshas;
        rc = cli_stream_load((const char *const *)argv + optind, (size_t)(argc - optind), &so,
                             &dev, json, quiet);
        goto out;
    }
    opts.filters = filters;
    opts.nfilters = nfilters;
    opts.expected_sha256 = shas;
    opts.nexpected = nshas;
    struct progress prog = { .tty = !quiet && !json && isatty(STDERR_FILENO), .t0 = mono() };
    if (prog.tty) { /* a callback costs a queue drain per batch: only when shown */
        opts.progress = on_progress;
        opts.progress_ctx = &prog;
    }

    pinio_checkpoint *cp = NULL;
    pinio_diag diag = { 0 };
    int err = pinio_load((const char *const *)argv + optind, (size_t)(argc - optind), &opts, &cp,
                         &diag);
    if (err < 0) {
        fprintf(stderr, "pinio load: %s\n", diag.msg[0] ? diag.msg : pinio_strerror(err));
        rc = 1;
        goto out;
    }
    pinio_load_report r;
    pinio_checkpoint_report(cp, &r);
    /* The library loads what the filters select, nothing included; for the
     * command, "loaded 0 tensors" and success is a typo in a pattern that a
     * script would not notice. */
    if (nfilters && !r.tensors) {
        fprintf(stderr, "pinio load: no tensor matches --filter");
        for (size_t i = 0; i < nfilters; i++)
            fprintf(stderr, "%s '%s'", i ? "," : "", filters[i]);
        fprintf(stderr, " (%zu tensors in %zu file%s)\n", r.skipped + r.unindexed, r.files,
                r.files == 1 ? "" : "s");
        pinio_checkpoint_release(cp);
        rc = 1;
        goto out;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double gbs = r.seconds > 0 ? (double)r.bytes / r.seconds / 1e9 : 0;
    double io_gbs = r.io_seconds > 0 ? (double)r.read_bytes / r.io_seconds / 1e9 : 0;
    if (json) {
        printf("{\"files\":%zu,\"tensors\":%zu,\"skipped\":%zu,\"unindexed\":%zu,"
               "\"misaligned\":%zu,\"bytes\":%llu,\"read_bytes\":%llu,\"arena_bytes\":%llu,"
               "\"seconds\":%.6f,\"io_seconds\":%.6f,\"verify_seconds\":%.6f,\"drop_seconds\":%.6f,\"gb_per_s\":%.3f,\"io_gb_per_s\":%.3f,"
               "\"files_direct\":%zu,\"files_buffered\":%zu,\"backend\":\"%s\","
               "\"locked\":%s,\"registered\":%s,\"fixed_ops\":%llu,\"plain_ops\":%llu,"
               "\"node\":%d,\"node_verified\":%s,\"verified\":%s,"
               "\"verify_landed_bytes\":%llu,\"verify_reread_bytes\":%llu,"
               "\"peak_rss_bytes\":%lld,\"io_path\":",
               r.files, r.tensors, r.skipped, r.unindexed, r.misaligned,
               (unsigned long long)r.bytes, (unsigned long long)r.read_bytes,
               (unsigned long long)r.arena_bytes, r.seconds, r.io_seconds, r.verify_seconds,
               r.drop_seconds, gbs, io_gbs,
               r.files_direct, r.files_buffered, pinio_backend_name(r.backend),
               r.locked ? "true" : "false", r.registered ? "true" : "false",
               (unsigned long long)r.fixed_ops, (unsigned long long)r.plain_ops, r.node,
               r.node_verified ? "true" : "false", r.verified ? "true" : "false", (unsigned long long)r.verify_landed_bytes,
               (unsigned long long)r.verify_reread_bytes, (long long)ru.ru_maxrss * 1024);
        cli_json_str(r.io_path, strlen(r.io_path));
        printf(",\"cache\":");
        cli_json_str(r.cache, strlen(r.cache));
        printf(",\"files_pinned\":%zu,\"files_mapped\":%zu,\"mapped_bytes\":%llu,"
               "\"fill_seconds\":%.6f,\"align\":%llu,\"realigned\":%zu,"
               "\"realigned_bytes\":%llu,\"realign_seconds\":%.6f,\"modes\":",
               r.files_pinned, r.files_mapped, (unsigned long long)r.mapped_bytes,
               r.fill_seconds, (unsigned long long)opts.tensor_align, r.realigned,
               (unsigned long long)r.realigned_bytes, r.realign_seconds);
        cli_json_str(r.modes, strlen(r.modes));
        printf(",\"memory\":");
        cli_json_str(r.memory, strlen(r.memory));
        printf(",\"file_memory\":[");
        for (size_t i = 0; i < pinio_checkpoint_file_count(cp); i++) {
            const char *why = "";
            pinio_memory_mode m = pinio_checkpoint_file_memory(cp, i, &why);
            printf("%s{\"path\":", i ? "," : "");
            cli_json_str(pinio_checkpoint_file(cp, i), strlen(pinio_checkpoint_file(cp, i)));
            printf(",\"mode\":\"%s\",\"why\":", m == PINIO_MEMORY_MAPPED ? "mapped" : "pinned");
            cli_json_str(why, strlen(why));
            printf("}");
        }
        printf("]");
        printf(",\"sha256\":{");
        for (size_t i = 0; i < pinio_checkpoint_file_count(cp); i++) {
            const char *h = pinio_checkpoint_sha256(cp, i);
            if (!h)
                continue;
            printf("%s", i ? "," : "");
            cli_json_str(pinio_checkpoint_file(cp, i), strlen(pinio_checkpoint_file(cp, i)));
            printf(":\"%s\"", h);
        }
        printf("}}\n");
    } else if (!quiet) {
        printf("loaded    %zu tensors, %.3f GB from %zu file%s in %.3f s: %.2f GB/s",
               r.tensors, (double)r.bytes / 1e9, r.files, r.files == 1 ? "" : "s", r.seconds, gbs);
        if (r.read_bytes)
            printf(" (reads %.2f GB/s)\n", io_gbs);
        else
            printf(" (%s)\n", r.files_mapped ? "mapped, no reads" : "no reads");
        if (r.skipped || r.unindexed)
            printf("skipped   %zu by filter, %zu not in the index\n", r.skipped, r.unindexed);
        printf("I/O path  %s\n", r.io_path);
        printf("cache     %s\n", r.cache);
        printf("modes     %s\n", r.modes);
        if (r.files_mapped)
            printf("mapped    %.3f GB: the page cache of %zu file%s, no copy%s\n",
                   (double)r.mapped_bytes / 1e9, r.files_mapped, r.files_mapped == 1 ? "" : "s",
                   r.fill_seconds > 0 ? " (cold pages read in by the populate)" : "");
        if (!r.arena_bytes)
            printf("memory    %s\n", r.memory);
        else if (r.node >= 0)
            printf("memory    %.3f GB arena on NUMA node %d (%s), %s\n", (double)r.arena_bytes / 1e9,
                   r.node, r.node_verified ? "placement verified" : "placement not verified",
                   r.memory);
        else
            printf("memory    %.3f GB arena, no NUMA placement, %s\n",
                   (double)r.arena_bytes / 1e9, r.memory);
        if (opts.tensor_align > 1)
            printf("alignment every tensor %llu-aligned: %zu tensors (%.3f GB) moved in %.3f s\n",
                   (unsigned long long)opts.tensor_align, r.realigned,
                   (double)r.realigned_bytes / 1e9, r.realign_seconds);
        if (r.misaligned)
            printf("alignment %zu tensors are not aligned to their element size (safetensors "
                   "does not guarantee it)\n", r.misaligned);
        for (size_t i = 0; i < pinio_checkpoint_file_count(cp); i++) {
            const char *h = pinio_checkpoint_sha256(cp, i);
            if (h)
                printf("sha256    %s  %s\n", h, pinio_checkpoint_file(cp, i));
        }
        if (r.verified)
            printf("verify    SHA-256 of %.3f GB as it landed and %.3f GB read again from the "
                   "files (not loaded: headers, unselected tensors); added %.3f s after the "
                   "last read\n",
                   (double)r.verify_landed_bytes / 1e9, (double)r.verify_reread_bytes / 1e9,
                   r.verify_seconds);
        if (r.drop_seconds > 0.05)
            printf("cold      dropping the cached pages took %.3f s (not counted: it wrote back "
                   "dirty pages first)\n", r.drop_seconds);
        printf("peak RSS  %.3f GB\n", (double)ru.ru_maxrss * 1024 / 1e9);
        if (nofile_to > nofile_from && r.files + 16 > nofile_from)
            printf("limits    open-file limit raised from %llu to %llu for %zu files\n",
                   nofile_from, nofile_to, r.files);
    }
    pinio_checkpoint_release(cp);
    rc = 0;
out:
    free(filters);
    free(shas);
    return rc;
}

const struct pinio_cmd pinio_cmd_load = {
    .name = "load",
    .summary = "load a safetensors checkpoint into pinned memory or page-cache mappings",
    .run = run_load,
};
