/* pinio stage: copy a checkpoint to node-local storage through the
 * streaming ring and the file sink (public API only). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pinio/stream.h"
#include "cli.h"
#include "jw.h"
#include "progress.h"
#include "stop.h"
#include "stream_cli.h"
#include "sums.h"
#include "util.h"

/* SRC is in an object store: s3://, gs://, az:// or an Azure account's
 * https:// URL. */
static bool object_src(const char *src)
{
    return !strncmp(src, "s3://", 5) || !strncmp(src, "gs://", 5) || !strncmp(src, "az://", 5) ||
           (!strncmp(src, "https://", 8) && strstr(src, ".blob.core.windows.net/"));
}

static void stage_usage(FILE *out)
{
    fprintf(out,
            "usage: pinio stage SRC DST [--verify] [--sha256 HEX... | --sha256-file SUMS]\n"
            "                   [--force] [--staging SIZE[xK]] [--cache auto|cold|hot]\n"
            "                   [--direct auto|on|off] [--json] [-q]\n"
            "\n"
            "Copies a checkpoint to another directory, typically node-local storage before a\n"
            "job, at storage speed: the files are read with O_DIRECT into a small ring of\n"
            "pinned, io_uring-registered staging slots on the files' NUMA node and written\n"
            "from there (O_DIRECT where the target allows it), so neither copy goes through\n"
            "the page cache and memory use is the ring whatever the checkpoint's size.\n"
            "Publication is one step: each file (the index too) is written under a\n"
            "temporary name next to its target (.pinio-stage-PID-NAME), fsync'ed and, with\n"
            "--verify, read back; only once every file is complete and verified are they\n"
            "renamed into place, the index last, and the directory fsync'ed. A target\n"
            "that --force replaces is first set aside (.pinio-stage-old-PID-NAME, the\n"
            "index first) and removed once the new checkpoint is in place; a rename that\n"
            "fails puts every old file back. DST never holds a half-written file, nor old\n"
            "and new files mixed, under its final names. (Only if stage dies within those\n"
            "renames, or an undo fails, may old files stay under their .pinio-stage-old-\n"
            "names, which pinio never removes: move them back, or stage again with --force.)\n"
            "SIGINT or SIGTERM stops stage before it publishes: its temporaries go and it\n"
            "dies of the signal. Temporaries a killed stage left (SIGKILL, a crash) are\n"
            "removed by the next stage into DST once provably abandoned (this boot, a dead\n"
            "pid, a minute old).\n"
            "\n"
            "  SRC               a .safetensors file, a directory of shards (its\n"
            "                    model.safetensors.index.json when present), or an index\n"
            "                    file; the index is copied too. Or the same in an object\n"
            "                    store: s3://BUCKET/KEY.safetensors, s3://BUCKET/PREFIX/,\n"
            "                    s3://BUCKET/.../INDEX.json (the HPC pre-job copy)\n"
            "  DST               the target directory (created if missing; its parent must\n"
            "                    exist); files keep their names, and shards their folder\n"
            "                    relative to the index (so the copied index names them);\n"
            "                    local only (an s3:// DST is a usage error)\n"
            "  --verify          two checks. The SHA-256 of each source file (the hub's LFS\n"
            "                    object id, printed as pinio load --verify prints it), hashed\n"
            "                    in the staging slots as the bytes arrive, so a byte changed on\n"
            "                    the way in shows (what no read brought, e.g. the header, is\n"
            "                    read again). And every copy read back (past the page cache\n"
            "                    where possible) and compared, by a position-keyed 64-bit\n"
            "                    checksum, with the bytes that streamed. Nothing is renamed\n"
            "                    into place unless both pass\n"
            "  --sha256 HEX      expected SHA-256 of the next source file, in order (a\n"
            "                    directory's shards in their index order; repeatable; implies\n"
            "                    --verify). A mismatch fails the copy and names the file\n"
            "  --sha256-file SUMS expected SHA-256s as sha256sum prints them (implies\n"
            "                    --verify), matched to each source file by its path, else\n"
            "                    by its file name; a file no line names fails the stage\n"
            "                    before a byte is copied\n"
            "  --force           replace files that already exist in DST (the index\n"
            "                    included); without it an existing target fails the copy\n"
            "  --staging SIZE[xK] the ring: K slots of SIZE bytes (default 32Mx4, and 8Mx16\n"
            "                    for an s3://, gs:// or az:// SRC: a range of 8 MiB per\n"
            "                    slot, 15 in flight while the 16th is written); SIZE a\n"
            "                    power of two from 64K to 1G, K from 2 to 1024; a ring\n"
            "                    larger than the memory available is refused\n"
            "  --cache POLICY    auto: buffered reads for files already in the page cache,\n"
            "                    O_DIRECT for the rest (default); cold: drop the source's\n"
            "                    cached pages first and read O_DIRECT; hot: buffered\n"
            "  --direct POLICY   O_DIRECT for the reads and the writes: auto (where the\n"
            "                    file system takes it; default), on (fail otherwise), off\n"
            "  --json            print the summary as one JSON object (doc/json/SCHEMA.md);\n"
            "                    a failure prints an error object\n"
            "  -q, --quiet       no summary\n"
            "  -h, --help        this help\n"
            "\n"
            "The soft limit on open files is raised to the hard one (stage holds two\n"
            "descriptors per shard while it copies).\n"
            "\n"
            "Exit status: 0 copied (and verified), 1 failure (the message names the file and\n"
            "offset; no temporary file is left and no target replaced), 2 usage error.\n");
}

/* Always installed: it is also how SIGINT/SIGTERM stop stage, whose sink
 * then removes its temporaries (stop.h). ctx: the progress line, or NULL. */
static int stage_progress(void *ctx, const pinio_progress *p)
{
    if (cli_stop_requested())
        return 1;
    return ctx ? cli_progress_cb(ctx, p) : 0;
}

/* The same flag, polled where no progress report comes (an object store's
 * retries and their backoff): a stop ends them at once. */
static int stage_stop(void *ctx)
{
    (void)ctx;
    return cli_stop_requested();
}

enum { O_VERIFY = 256, O_SHA, O_SUMS, O_FORCE, O_STAGING, O_CACHE, O_DIRECT_W, O_JSON };

/* `shas` has room for one --sha256 per argument; `sums` holds the
 * --sha256-file list, freed by the caller. */
static int stage(int argc, char **argv, const char **shas, cli_sums *sums)
{
    static const struct option longopts[] = {
        { "verify", no_argument, NULL, O_VERIFY },
        { "sha256", required_argument, NULL, O_SHA },
        { "sha256-file", required_argument, NULL, O_SUMS },
        { "force", no_argument, NULL, O_FORCE },
        { "staging", required_argument, NULL, O_STAGING },
        { "cache", required_argument, NULL, O_CACHE },
        { "direct", required_argument, NULL, O_DIRECT_W },
        { "json", no_argument, NULL, O_JSON },
        { "quiet", no_argument, NULL, 'q' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    pinio_stream_opts o;
    pinio_stream_opts_default(&o);
    pinio_sink_file_cfg fc = { 0 };
    bool json = false, quiet = false, staging = false;
    size_t nshas = 0;
    const char *sums_path = NULL;
    int c;

    opterr = 0;
    while ((c = getopt_long(argc, argv, ":qh", longopts, NULL)) != -1) {
        switch (c) {
        case O_SHA:
            if (!cli_is_sha256(optarg)) {
                cli_usage("stage", "--sha256 wants 64 hex digits, not '%s'", optarg);
                return 2;
            }
            shas[nshas++] = optarg;
            /* an expected digest is checked by --verify */
            __attribute__((fallthrough));
        case O_VERIFY:
            fc.verify = true;
            o.verify = true;
            break;
        case O_SUMS:
            if (sums_path) {
                cli_usage("stage", "--sha256-file is given once (one file may list every shard)");
                return 2;
            }
            sums_path = optarg;
            fc.verify = true;
            o.verify = true;
            break;
        case O_FORCE:
            fc.overwrite = true;
            break;
        case O_STAGING:
            staging = true;
            if (cli_parse_staging(optarg, &o) < 0) {
                cli_usage("stage", "--staging wants SIZE[xK], SIZE a power of two "
                                "from 64K to 1G and K from 2 to 1024, not '%s'", optarg);
                return 2;
            }
            break;
        case O_CACHE:
            if (cli_opt_cache("stage", "--cache", optarg, &o.cache))
                return 2;
            break;
        case O_DIRECT_W:
            /* as everywhere: the O_DIRECT policy of the command's file I/O,
             * here the reads and the writes */
            if (cli_opt_direct("stage", "--direct", optarg, &fc.direct))
                return 2;
            o.direct = fc.direct;
            break;
        case O_JSON:
            json = true;
            break;
        case 'q':
            quiet = true;
            break;
        case 'h':
            stage_usage(stdout);
            return 0;
        default:
            return cli_getopt_error("stage", c, argv);
        }
    }
    if (optind + 2 != argc) {
        return cli_usage("stage", "SRC and DST are required");
    }
    if (sums_path && nshas)
        return cli_usage("stage", "--sha256 and --sha256-file do not go together: one list of "
                                  "expected digests");
    const char *src = argv[optind];
    fc.dir = argv[optind + 1];
    /* From an object store the stream keeps k - 1 reads out while the
     * oldest slot is written, each read a range of 8 MiB when the slot is
     * 8 MiB: 16 slots keep 15 ranges in flight (4 x 32 MiB: 12). Every
     * slot is a fresh page for each byte that lands in it until the ring
     * is used once round, and zeroing those pages was most of stage's CPU
     * (doc/measurements.md, "Issue 38: stage's CPU through slow answers"):
     * 128 MiB instead of 256 halves it for objects past the ring. The
     * same for every store: the fetch does not differ. */
    if (!staging && object_src(src)) {
        o.slot_size = (size_t)8 << 20;
        o.slots = 16;
    }
    if (strncmp(fc.dir, "s3://", 5) == 0) /* else mkdir makes a local "s3:" folder */
        return cli_usage("stage", "%s: writing to s3:// is not supported: stage copies from "
                                  "s3:// (SRC) to a local directory (DST)", fc.dir);
    /* The list matched to the files before the target is touched: a file
     * it lacks stops the stage with nothing made. */
    if (sums_path) {
        *sums = (cli_sums){ .cmd = "stage", .json = json, .path = sums_path };
        if (cli_sums_read(sums, &src, 1) != 0)
            return 1;
        shas = sums->shas;
        nshas = sums->nshas;
    }
    /* A descriptor per shard in the plan and one per copy: as load does. */
    unsigned long long nofile_from, nofile_to;
    cli_raise_nofile(&nofile_from, &nofile_to);
    bool made_dir = mkdir(fc.dir, 0755) == 0;
    if (!made_dir && errno != EEXIST)
        return cli_failf("stage", json, -errno, fc.dir, "%s: cannot create the target directory: %s",
                         fc.dir, strerror(errno));
    o.expected_sha256 = shas;
    o.nexpected = nshas;
    cli_shas digests = { 0 };
    cli_shas_hook(&o, &digests);
    cli_progress pg;
    cli_progress_start(&pg, "stage", 0, quiet || json);
    o.progress = stage_progress;
    o.progress_ctx = cli_progress_active(&pg) ? &pg : NULL;
    o.stop = stage_stop;
    cli_stop_install();
    pinio_stream_report r;
    pinio_diag d = { .offset = PINIO_DIAG_NO_OFFSET };
    double t_call = cli_now_s(); /* ready_s: until every copy is in place */
    int rc = pinio_stream(&src, 1, &o, &pinio_sink_file, &fc, &r, &d);
    double ready_s = cli_now_s() - t_call;
    cli_progress_end(&pg);
    if (rc < 0) {
        cli_shas_free(&digests);
        /* A failed stage publishes nothing (the sink removes its temporary
         * files); the directory made for it goes too, when still empty. */
        if (made_dir)
            (void)rmdir(fc.dir);
        cli_stop_reraise(); /* stopped by a signal: die of it, temporaries gone */
        return cli_fail("stage", json, rc, &d);
    }
    double gbs = r.seconds > 0 ? (double)r.read_bytes / r.seconds / 1e9 : 0;
    if (json) {
        jw w;
        jw_init(&w, stdout);
        jw_begin(&w, "stage");
        jw_kstr(&w, "src", src);
        jw_kstr(&w, "dst", fc.dir);
        cli_stream_json(&w, &r, ready_s);
        jw_kf64(&w, "gb_per_s", gbs);
        jw_kbool(&w, "copies_verified", fc.verify);
        cli_shas_json(&w, &digests, &r);
        jw_obj_end(&w);
        jw_finish(&w);
    } else if (!quiet) {
        char a[32], b[32];
        printf("staged %s -> %s: %zu file%s, %s in %.3f s (%.2f GB/s)%s\n", src, fc.dir,
               r.files, r.files == 1 ? "" : "s", cli_human_bytes(a, sizeof(a), r.read_bytes),
               r.seconds, gbs, fc.verify ? ", verified" : "");
        printf("ring      %u x %s on node %d, %s\n", r.slots,
               cli_human_bytes(b, sizeof(b), r.slot_size), r.node,
               r.registered ? "registered (READ_FIXED)" : "not registered");
        printf("io path   %s\n", r.io_path);
        cli_shas_text(&digests, &r);
    }
    cli_shas_free(&digests);
    return 0;
}

static int run_stage(int argc, char **argv)
{
    const char **shas = calloc((size_t)argc + 1, sizeof(*shas));
    if (!shas)
        return cli_failf("stage", false, -ENOMEM, NULL, "out of memory");
    cli_sums sums = { 0 };
    int rc = stage(argc, argv, shas, &sums);
    cli_sums_free(&sums);
    free(shas);
    return rc;
}

const struct pinio_cmd pinio_cmd_stage = {
    .name = "stage",
    .summary = "copy a checkpoint to node-local storage through the staging ring",
    .run = run_stage,
};
