/* `pinio load`: load a checkpoint into pinned memory and report how it went. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "pinio/pinio.h"
#include "cli.h"
#include "jw.h"
#include "load_args.h"
#include "progress.h"
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
            "model.safetensors.index.json when present), an index file, or a Hugging Face\n"
            "repo id ORG/NAME[@REV] (or NAME[@REV], e.g. gpt2) already in the hub cache\n"
            "($HF_HUB_CACHE, $HF_HOME/hub or ~/.cache/huggingface/hub; REV a branch or\n"
            "tag in refs/, or a commit; no download), when no local path of that name\n"
            "exists; or an object store URL s3://BUCKET/KEY.safetensors, s3://BUCKET/PREFIX/\n"
            "(its index, else its *.safetensors) or s3://BUCKET/.../INDEX.json, read by\n"
            "HTTP range GETs (AWS_* variables as the AWS CLI reads them; see pinio-load(1)).\n"
            "A file pinio finds must resolve beneath its folder (an index's shards: the\n"
            "index's folder; in a hub snapshot: the model's models--ORG--NAME folder); a\n"
            "link out of it is refused (a file named here is followed, outside the hub\n"
            "cache). PINIO_LINK_ROOTS=DIR[:DIR...] lets links reach DIR too, e.g. a\n"
            "--local-dir download by huggingface_hub 0.17-0.22 linked into the hub cache.\n"
            "\n"
            "options:\n"
            "  --filter PATTERN   load only matching tensors (repeatable): an exact name, a\n"
            "                     dotted prefix (model.layers.0), or a glob (*.weight); a\n"
            "                     pattern equal to a name matches it, even one holding *?[\n"
            "  --node N|auto|any  NUMA node of the memory (auto: the files' device node)\n"
            "  --direct auto|on|off  O_DIRECT policy (auto: where the file system allows)\n"
            "  --cache auto|cold|hot  auto: buffered for files already in the page cache;\n"
            "                     cold: drop the files' cached pages first; hot: buffered\n"
            "  --backend auto|fixed|direct|buffered|pread  force a rung of the I/O ladder\n"
            "  --qd N             reads in flight (default: the engine's, 16); for s3://\n"
            "                     inputs, HTTP range requests in flight (default 16)\n"
            "  --bs SIZE          bytes per read request, e.g. 1M (default: the engine's)\n"
            "  --memory auto|pinned|mapped  where tensors live (default auto, per file):\n"
            "                     pinned: read into one NUMA-placed arena locked in RAM\n"
            "                     (O_DIRECT for cold files; what a GPU can DMA from);\n"
            "                     mapped: the file's page cache mapped read-only, no copy\n"
            "                     (cold files are read into the page cache first);\n"
            "                     auto: mapped for files already in the page cache, and\n"
            "                     for cold ones where the kernel's first touch of fresh\n"
            "                     memory (measured; PINIO_FIRST_TOUCH_GBPS gives it) is\n"
            "                     slower than the storage, pinned for the others; the\n"
            "                     summary says which ran and why\n"
            "  --align N          every tensor at an address that is a multiple of N (a power\n"
            "                     of two up to 4096, e.g. 64): tensors the file does not align\n"
            "                     are moved once in the arena (such files are read pinned)\n"
            "  --consumer host|dma  who uses the tensors (default host); dma (a GPU upload):\n"
            "                     --memory auto reads every file pinned, memory a device\n"
            "                     can DMA from without staging\n"
            "  --fill auto|ahead|fault  how a cold mapped file reaches the page cache: ahead\n"
            "                     reads it ahead at depth (readahead per window) before the\n"
            "                     mapping is populated; fault leaves it to the populate's\n"
            "                     own readahead; auto (default): ahead on network and FUSE\n"
            "                     file systems, where each request waits, fault elsewhere\n"
            "  --share auto|off   node-local sharing of pinned files (default auto): loads\n"
            "                     of the same file at once on this machine read it once,\n"
            "                     the others mapping the reader's memory (/dev/shm); off\n"
            "                     (or --no-share, or PINIO_SHARE=0) reads privately; the\n"
            "                     summary's share line says which ran and why\n"
            "  --register         pinned files: register the arena with io_uring slab by slab\n"
            "                     as the reads reach it (reads by READ_FIXED); off by default,\n"
            "                     see the summary's memory line for which ran and why\n"
            "  --verify           compute each file's SHA-256 (the hub's LFS object id)\n"
            "  --sha256 HEX       expected SHA-256 (implies --verify), repeated once per\n"
            "                     file: the N-th value is the N-th file as the inputs resolve\n"
            "                     (a folder or index: its shards in order); any other count\n"
            "                     is an error\n"
            "  --sha256-file SUMS expected SHA-256s as sha256sum prints them (implies\n"
            "                     --verify), matched to the files by name, not position: a\n"
            "                     line naming the file's path, else the one line naming its\n"
            "                     file name; a file no line names is an error, lines for\n"
            "                     other files are ignored\n"
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
            "                     streaming path costs without a GPU). Under mpiexec with\n"
            "                     --mpi tp: each rank's slices to its GPU once the job has\n"
            "                     read them (pinio load --mpi tp --help)\n"
            "  --staging SIZE[xK] with --device: K slots of SIZE bytes (default 32Mx4)\n"
            "  --json             print the summary as one JSON object (doc/json/SCHEMA.md);\n"
            "                     a failure prints an error object and exits 1\n"
            "  -q, --quiet        no progress bar and no summary (exit status only)\n"
            "  --progress         draw the progress bar even when stderr is not a terminal\n"
            "                     (a pipe; under mpiexec, rank 0's line)\n"
            "  --split PATTERN=DIM  tensor parallelism in one process (repeatable; the first\n"
            "                     matching rule wins, tensors no rule matches are loaded\n"
            "                     whole): each matching tensor is loaded as\n"
            "                     torch.chunk(tensor, WORLD, DIM)[RANK], contiguous and shaped\n"
            "                     like the slice. PATTERN as --filter; DIM negative counts\n"
            "                     from the end; DIM 'whole' loads the matches whole (norms\n"
            "                     before a catch-all '*=0'). A rank past torch.chunk's last\n"
            "                     chunk gets an empty slice. Dimension 0 (or leading\n"
            "                     dimensions of extent 1) reads one range per tensor; other\n"
            "                     dimensions read rows apart and pack them in the arena\n"
            "                     (such files are loaded pinned). With --device each slice\n"
            "                     streams to the device, packed by its offsets as it lands;\n"
            "                     --verify still hashes whole files (the rest read again)\n"
            "  --rank R           with --split: this process's rank (default 0)\n"
            "  --world N          with --split: the number of ranks (default 1)\n"
            "  --max-overread F   with --split: holes between the wanted ranges are read\n"
            "                     through, smallest first, only within F of the slices' bytes\n"
            "                     (a fraction or a percentage: 0.05, 5%%; default 1/32; 0: none)\n"
            "  --mpi replicate|shard|node|tp  one load per MPI job, under mpiexec (see\n"
            "                     pinio load --mpi replicate --help; needs a pinio built with MPI)\n"
            "  -h, --help         this help\n"
            "\n"
            "A load holds one open file per shard: the soft open-file limit is raised to\n"
            "the hard one (ulimit -Hn) for the command's own process.\n"
            "exit status: 0 loaded; 1 load failed (the message names file and offset); 2 usage\n");
}

static void jw_dims(jw *w, const char *key, const uint64_t *a, const uint64_t *b, unsigned n)
{
    jw_key(w, key);
    jw_arr(w);
    for (unsigned d = 0; d < n; d++)
        jw_u64(w, a[d] + (b ? b[d] : 0));
    jw_arr_end(w);
}

/* "split": null without --split; else the rules, the counts and each
 * sliced tensor's box. */
static void print_json_split(jw *w, const pinio_load_opts *opts, pinio_checkpoint *cp,
                             const pinio_load_report *r)
{
    jw_key(w, "split");
    if (!opts->nsplit) {
        jw_null(w);
        return;
    }
    jw_obj(w);
    cli_split_json(w, opts->split, opts->nsplit, opts->rank, opts->world, r->sliced, r->strided,
                   r->full_bytes, r->hole_bytes);
    jw_key(w, "tensors");
    jw_arr(w);
    for (size_t i = 0; i < pinio_checkpoint_count(cp); i++) {
        const pinio_tensor *t = pinio_checkpoint_tensor(cp, i);
        if (!t->sliced)
            continue;
        jw_obj(w);
        jw_kstr(w, "name", t->name);
        jw_dims(w, "start", t->start, NULL, t->rank);
        jw_dims(w, "stop", t->start, t->shape, t->rank);
        jw_dims(w, "full_shape", t->full_shape, NULL, t->rank);
        jw_ku64(w, "bytes", t->nbytes);
        jw_obj_end(w);
    }
    jw_arr_end(w);
    jw_obj_end(w);
}

/* The summary as one JSON object (doc/json/load.schema.json, "resident"). */
static void print_json(char *const *inputs, size_t ninputs, const pinio_load_opts *opts,
                       pinio_checkpoint *cp, const pinio_load_report *r, long long rss,
                       unsigned long long nofile_from, unsigned long long nofile_to)
{
    jw w;
    cli_load_json_begin(&w, "resident", (const char *const *)inputs, ninputs);
    jw_ku64(&w, "file_count", r->files);
    jw_ku64(&w, "tensor_count", r->tensors);
    jw_ku64(&w, "skipped_tensor_count", r->skipped);
    jw_ku64(&w, "unindexed_tensor_count", r->unindexed);
    jw_ku64(&w, "misaligned_tensor_count", r->misaligned);
    jw_ku64(&w, "bytes", r->bytes);
    jw_ku64(&w, "read_bytes", r->read_bytes);
    jw_ku64(&w, "arena_bytes", r->arena_bytes);
    jw_ku64(&w, "mapped_bytes", r->mapped_bytes);
    jw_kf64(&w, "elapsed_s", r->seconds);
    jw_kf64(&w, "ready_s", r->ready_seconds);
    jw_kf64(&w, "io_s", r->io_seconds);
    jw_kf64(&w, "verify_s", r->verify_seconds);
    jw_kf64(&w, "drop_s", r->drop_seconds);
    jw_kf64(&w, "fill_s", r->fill_seconds);
    jw_kf64(&w, "gb_per_s", r->seconds > 0 ? (double)r->bytes / r->seconds / 1e9 : 0);
    jw_kf64(&w, "io_gb_per_s", r->io_seconds > 0 ? (double)r->read_bytes / r->io_seconds / 1e9 : 0);
    jw_ku64(&w, "direct_file_count", r->files_direct);
    jw_ku64(&w, "buffered_file_count", r->files_buffered);
    jw_ku64(&w, "pinned_file_count", r->files_pinned);
    jw_ku64(&w, "mapped_file_count", r->files_mapped);
    jw_ku64(&w, "filled_file_count", r->files_filled);
    jw_ku64(&w, "filled_ahead_file_count", r->files_filled_ahead);
    jw_kstr(&w, "backend", pinio_backend_name(r->backend));
    jw_kbool(&w, "locked", r->locked);
    jw_kbool(&w, "registered", r->registered);
    jw_kbool(&w, "arena_kept", r->arena_kept);
    jw_kbool(&w, "arena_grown", r->arena_grown);
    jw_ku64(&w, "fixed_read_count", r->fixed_ops);
    jw_ku64(&w, "plain_read_count", r->plain_ops);
    jw_key(&w, "node");
    if (r->node >= 0)
        jw_i64(&w, r->node);
    else
        jw_null(&w);
    jw_kbool(&w, "node_verified", r->node_verified);
    jw_kbool(&w, "verified", r->verified);
    jw_ku64(&w, "verify_landed_bytes", r->verify_landed_bytes);
    jw_ku64(&w, "verify_reread_bytes", r->verify_reread_bytes);
    jw_ku64(&w, "align_bytes", opts->tensor_align > 1 ? opts->tensor_align : 1);
    jw_ku64(&w, "realigned_tensor_count", r->realigned);
    jw_ku64(&w, "realigned_bytes", r->realigned_bytes);
    jw_kf64(&w, "realign_s", r->realign_seconds);
    jw_ku64(&w, "peak_rss_bytes", rss > 0 ? (uint64_t)rss : 0);
    jw_key(&w, "open_file_limit");
    jw_obj(&w);
    cli_jw_limit(&w, "before", nofile_from);
    cli_jw_limit(&w, "after", nofile_to);
    jw_obj_end(&w);
    jw_ku64(&w, "overread_bytes", r->overread_bytes);
    jw_ku64(&w, "object_file_count", r->files_object);
    jw_ku64(&w, "object_request_count", r->object_requests);
    jw_ku64(&w, "object_retry_count", r->object_retries);
    jw_kstr(&w, "object_pinned_by", r->object_pinned_by);
    print_json_split(&w, opts, cp, r);
    jw_kstr(&w, "io_path", r->io_path);
    jw_kstr(&w, "cache", r->cache);
    jw_kstr(&w, "memory", r->memory);
    jw_kstr(&w, "share", r->share);
    jw_ku64(&w, "shared_file_count", r->files_shared);
    jw_ku64(&w, "share_read_file_count", r->files_share_read);
    jw_ku64(&w, "share_bytes", r->share_bytes);
    jw_key(&w, "files");
    jw_arr(&w);
    for (size_t i = 0; i < pinio_checkpoint_file_count(cp); i++) {
        const char *why = "";
        pinio_memory_mode m = pinio_checkpoint_file_memory(cp, i, &why);
        jw_obj(&w);
        jw_kstr(&w, "path", pinio_checkpoint_file(cp, i));
        jw_kstr(&w, "memory", m == PINIO_MEMORY_MAPPED ? "mapped" : "pinned");
        jw_kstr(&w, "memory_why", why);
        jw_kstr(&w, "sha256", pinio_checkpoint_sha256(cp, i));
        jw_obj_end(&w);
    }
    jw_arr_end(&w);
    jw_obj_end(&w);
    jw_finish(&w); /* a failed write is main.c's to report */
}

static void print_text(const pinio_load_opts *opts, pinio_checkpoint *cp,
                       const pinio_load_report *r, long long rss,
                       unsigned long long nofile_from, unsigned long long nofile_to)
{
    double gbs = r->seconds > 0 ? (double)r->bytes / r->seconds / 1e9 : 0;
    double io_gbs = r->io_seconds > 0 ? (double)r->read_bytes / r->io_seconds / 1e9 : 0;
    printf("loaded    %zu tensors, %.3f GB from %zu file%s in %.3f s", r->tensors,
           (double)r->bytes / 1e9, r->files, r->files == 1 ? "" : "s", r->seconds);
    /* Bytes over seconds is a speed only when something moved them: a map
     * of pages already cached reads nothing, and "300 GB/s" would read as
     * a storage figure. A cold mapped file's populate does read them. */
    if (r->read_bytes)
        printf(": %.2f GB/s (reads %.2f GB/s)\n", gbs, io_gbs);
    else if (r->files_mapped && !r->files_filled)
        printf(" (mapped, no reads: no bytes read, the page cache mapped in place)\n");
    else
        printf(": %.2f GB/s (%s)\n", gbs, r->files_mapped ? "mapped, no reads" : "no reads");
    if (r->skipped || r->unindexed)
        printf("skipped   %zu by filter, %zu not in the index\n", r->skipped, r->unindexed);
    if (opts->nsplit)
        printf("split     rank %u of %u: %zu tensors sliced (%zu packed from rows apart), "
               "%.3f of %.3f GB; reads cover %.3f GB more (%.3f GB of holes read through)\n",
               opts->rank, opts->world, r->sliced, r->strided, (double)r->bytes / 1e9,
               (double)r->full_bytes / 1e9, (double)r->overread_bytes / 1e9,
               (double)r->hole_bytes / 1e9);
    printf("I/O path  %s\n", r->io_path);
    printf("cache     %s\n", r->cache);
    printf("modes     %s\n", r->modes);
    printf("share     %s\n", r->share);
    if (r->files_mapped)
        printf("mapped    %.3f GB: the page cache of %zu file%s, no copy%s\n",
               (double)r->mapped_bytes / 1e9, r->files_mapped, r->files_mapped == 1 ? "" : "s",
               r->files_filled_ahead ? " (cold pages read ahead at depth, then populated)"
               : r->files_filled     ? " (cold pages read in by the populate)"
                                     : "");
    if (!r->arena_bytes)
        printf("memory    %s\n", r->memory);
    else if (r->node >= 0)
        printf("memory    %.3f GB arena on NUMA node %d (%s), %s\n", (double)r->arena_bytes / 1e9,
               r->node, r->node_verified ? "placement verified" : "placement not verified",
               r->memory);
    else
        printf("memory    %.3f GB arena, no NUMA placement, %s\n", (double)r->arena_bytes / 1e9,
               r->memory);
    if (opts->tensor_align > 1)
        printf("alignment every tensor %llu-aligned: %zu tensors (%.3f GB) moved in %.3f s\n",
               (unsigned long long)opts->tensor_align, r->realigned,
               (double)r->realigned_bytes / 1e9, r->realign_seconds);
    if (r->misaligned)
        printf("alignment %zu tensors are not aligned to their element size (safetensors "
               "does not guarantee it)\n", r->misaligned);
    for (size_t i = 0; i < pinio_checkpoint_file_count(cp); i++) {
        const char *h = pinio_checkpoint_sha256(cp, i);
        if (h)
            printf("sha256    %s  %s\n", h, pinio_checkpoint_file(cp, i));
    }
    if (r->verified)
        printf("verify    SHA-256 of %.3f GB as it landed and %.3f GB read again from the "
               "files (not loaded: headers, unselected tensors); added %.3f s after the "
               "last read\n",
               (double)r->verify_landed_bytes / 1e9, (double)r->verify_reread_bytes / 1e9,
               r->verify_seconds);
    if (r->drop_seconds > 0.05)
        printf("cold      dropping the cached pages took %.3f s (not counted: it wrote back "
               "dirty pages first)\n", r->drop_seconds);
    printf("peak RSS  %.3f GB\n", (double)rss / 1e9);
    if (nofile_to > nofile_from && r->files + 16 > nofile_from)
        printf("limits    open-file limit raised from %llu to %llu for %zu files\n",
               nofile_from, nofile_to, r->files);
}

/* The resident load: the arena or the files' mappings. */
static int load_resident(int argc, char **argv, cli_load_args *a)
{
    pinio_load_opts opts = a->load;
    opts.filters = a->filters;
    opts.nfilters = a->nfilters;
    opts.expected_sha256 = a->shas;
    opts.nexpected = a->nshas;
    opts.split = a->split;
    opts.nsplit = a->nsplit;
    cli_progress pg;
    cli_progress_start(&pg, "load", a->progress ? CLI_PROGRESS_FORCE : 0, a->quiet || a->json);
    if (cli_progress_active(&pg)) { /* a callback costs a queue drain per batch: only when shown */
        opts.progress = cli_progress_cb;
        opts.progress_ctx = &pg;
    }
    unsigned long long nofile_from, nofile_to;
    cli_raise_nofile(&nofile_from, &nofile_to);
    char *const *inputs = argv + a->first_path;
    size_t ninputs = (size_t)(argc - a->first_path);
    pinio_checkpoint *cp = NULL;
    pinio_diag diag = { .offset = PINIO_DIAG_NO_OFFSET };
    int err = pinio_load((const char *const *)inputs, ninputs, &opts, &cp, &diag);
    cli_progress_end(&pg);
    if (err < 0)
        return cli_fail("load", a->json, err, &diag);
    pinio_load_report r;
    pinio_checkpoint_report(cp, &r);
    /* The library loads what the filters select, nothing included; for the
     * command, "loaded 0 tensors" and success is a typo in a pattern that a
     * script would not notice. */
    if (a->nfilters && !r.tensors) {
        char msg[PINIO_DIAG_MSG_MAX];
        cli_load_nothing(msg, sizeof(msg), "--filter", a->filters, a->nfilters,
                         r.skipped + r.unindexed, r.files);
        pinio_checkpoint_release(cp);
        return cli_failf("load", a->json, -ENOENT, NULL, "%s", msg);
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    long long rss = (long long)ru.ru_maxrss * 1024;
    if (a->json)
        print_json(inputs, ninputs, &opts, cp, &r, rss, nofile_from, nofile_to);
    else if (!a->quiet)
        print_text(&opts, cp, &r, rss, nofile_from, nofile_to);
    pinio_checkpoint_release(cp);
    return 0;
}

static int run_load(int argc, char **argv)
{
#if !PINIO_HAVE_MPI
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--mpi") || !strncmp(argv[i], "--mpi=", 6))
            return cli_usage("load", "--mpi: this pinio was built without MPI "
                                     "(meson -Dmpi=enabled, with libopenmpi-dev)");
#endif
    cli_load_args a;
#if PINIO_HAVE_MPI
    int hushed[2];
    pinio_cli_load_mpi_hush(argc, argv, hushed); /* under mpiexec rank 0 alone says a usage error */
#endif
    int rc = cli_load_parse(argc, argv, &a);
#if PINIO_HAVE_MPI
    pinio_cli_load_mpi_unhush(hushed);
    bool mpi_up = false;
    if (rc != 0 || (a.mpi && !a.help))
        rc = pinio_cli_load_mpi_agree(argc, argv, rc, &mpi_up);
#endif
    if (rc == 0 && a.help) {
#if PINIO_HAVE_MPI
        if (a.mpi)
            pinio_cli_load_mpi_usage(stdout);
        else
#endif
            load_usage(stdout);
    } else if (rc == 0 && a.mpi) {
#if PINIO_HAVE_MPI
        /* --mpi is a different program shape (collective, rank 0 reports) */
        rc = pinio_cli_load_mpi(argc, argv, &a, mpi_up);
#endif
    } else if (rc == 0 && (rc = cli_load_sums(&a, (const char *const *)argv + a.first_path,
                                              (size_t)(argc - a.first_path))) != 0) {
        /* cli_load_sums() said why */
    } else if (rc == 0 && a.dev.set) {
        unsigned long long nofile_from, nofile_to;
        cli_raise_nofile(&nofile_from, &nofile_to);
        pinio_stream_opts so = a.so;
        so.filters = a.filters;
        so.nfilters = a.nfilters;
        so.node = a.load.node;
        so.cache = a.load.cache;
        so.direct = a.load.direct;
        so.queue_depth = a.load.queue_depth;
        so.backend = a.load.backend;
        so.verify = a.load.verify;
        so.expected_sha256 = a.shas;
        so.nexpected = a.nshas;
        so.split = a.split;
        so.nsplit = a.nsplit;
        so.rank = a.load.rank;
        so.world = a.load.world;
        so.max_overread = a.load.max_overread;
        rc = cli_stream_load((const char *const *)argv + a.first_path,
                             (size_t)(argc - a.first_path), &so, &a.dev, a.json, a.quiet,
                             a.progress ? CLI_PROGRESS_FORCE : 0);
    } else if (rc == 0) {
        rc = load_resident(argc, argv, &a);
    }
    cli_load_args_free(&a);
    return rc;
}

const struct pinio_cmd pinio_cmd_load = {
    .name = "load",
    .summary = "load a safetensors checkpoint into pinned memory or page-cache mappings",
    .run = run_load,
};
