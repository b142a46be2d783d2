/* pinio gen: write a deterministic synthetic checkpoint (public API only). */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "pinio/pinio.h"
#include "cli.h"
#include "stop.h"
#include "util.h"

static void gen_usage(FILE *out)
{
    fprintf(out,
            "usage: pinio gen OUT --size BYTES [--tensors N] [--dtypes LIST] [--shards K]\n"
            "                 [--seed S]\n"
            "\n"
            "Writes a synthetic safetensors checkpoint whose every byte is derived from the\n"
            "seed, the tensor name and the byte's offset, so a reader can verify all of it\n"
            "without a reference copy (the seed is stored in __metadata__ as pinio_gen_seed).\n"
            "Tensors get Llama-style names (model.layers.3.mlp.up_proj.weight) and shapes\n"
            "whose byte size matches their dtype.\n"
            "\n"
            "  OUT            the .safetensors file to write; with --shards K >= 2, a directory\n"
            "                 (created if needed) that receives model-0000i-of-0000K.safetensors\n"
            "                 and model.safetensors.index.json\n"
            "  --size BYTES   tensor bytes in total, e.g. 512M, 2G (K/M/G/T are powers of 1024);\n"
            "                 each tensor is rounded down to whole elements\n"
            "  --tensors N    number of tensors (default: size / 8 MiB, between 1 and 4096)\n"
            "  --dtypes LIST  comma-separated dtypes used in turn, e.g. BF16,F32,F8_E4M3,F4\n"
            "                 (default BF16)\n"
            "  --shards K     split the tensors over K files (default 1)\n"
            "  --seed S       generator seed (default 0)\n"
            "  -q, --quiet    no progress and no summary\n"
            "  -h, --help     this help\n"
            "\n"
            "Each file is written under a temporary name (OUT.tmpPID) and renamed when\n"
            "complete; Ctrl-C or SIGTERM removes the file being written, then ends pinio\n"
            "by that signal.\n"
            "Exit status: 0 written, 1 I/O error (the message names the file), 2 usage error.\n");
}

static int parse_dtypes(char *list, pinio_dtype *out, size_t cap, size_t *n)
{
    *n = 0;
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        for (char *p = tok; *p; p++)
            *p = (char)toupper((unsigned char)*p);
        if (*n == cap || pinio_dtype_from_name(tok, strlen(tok), &out[*n]) < 0) {
            cli_usage("gen", "unknown dtype '%s'", tok);
            return -EINVAL;
        }
        (*n)++;
    }
    if (!*n)
        cli_usage("gen", "--dtypes wants a comma-separated list of dtypes (e.g. BF16,F32)");
    return *n ? 0 : -EINVAL;
}

/* Always installed: it is also how SIGINT/SIGTERM stop gen, which then
 * removes the file it was writing (stop.h). ctx: non-NULL to print. */
static int progress(void *ctx, const pinio_progress *p)
{
    if (cli_stop_requested())
        return 1;
    if (!ctx)
        return 0;
    uint64_t done = p->done_bytes, total = p->total_bytes;
    char a[32], b[32];
    fprintf(stderr, "\rpinio gen: %3u%%  %s of %s   ",
            total ? (unsigned)(done * 100 / total) : 100u, cli_human_bytes(a, sizeof(a), done),
            cli_human_bytes(b, sizeof(b), total));
    return 0;
}

static int run_gen(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"size", required_argument, NULL, 's'},   {"tensors", required_argument, NULL, 't'},
        {"dtypes", required_argument, NULL, 'd'}, {"shards", required_argument, NULL, 'k'},
        {"seed", required_argument, NULL, 'S'},   {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0},
    };
    pinio_gen_opts o;
    pinio_gen_opts_default(&o);
    pinio_dtype dts[64];
    bool have_size = false, quiet = false;
    uint64_t v;
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":qh", longopts, NULL)) != -1) {
        switch (c) {
        case 's':
            /* 0 would write a checkpoint of empty tensors: never what was meant */
            if (cli_parse_size(optarg, &o.size) < 0 || o.size == 0)
                return cli_usage("gen", "--size wants a byte count above 0 (e.g. 512M), not '%s'",
                                 optarg);
            have_size = true;
            break;
        case 't':
            if (cli_parse_u64(optarg, &v) < 0 || v == 0 || v > 10000000) {
                cli_usage("gen", "--tensors wants 1 to 10000000, not '%s'", optarg);
                return 2;
            }
            o.tensors = (size_t)v;
            break;
        case 'd':
            if (parse_dtypes(optarg, dts, sizeof(dts) / sizeof(dts[0]), &o.ndtypes) < 0)
                return 2;
            o.dtypes = dts;
            break;
        case 'k':
            if (cli_parse_u64(optarg, &v) < 0 || v == 0 || v > 99999) {
                cli_usage("gen", "--shards wants 1 to 99999, not '%s'", optarg);
                return 2;
            }
            o.shards = (unsigned)v;
            break;
        case 'S':
            if (cli_parse_u64(optarg, &o.seed) < 0) {
                cli_usage("gen", "invalid --seed '%s'", optarg);
                return 2;
            }
            break;
        case 'q':
            quiet = true;
            break;
        case 'h':
            gen_usage(stdout);
            return 0;
        default:
            return cli_getopt_error("gen", c, argv);
        }
    }
    if (optind + 1 != argc || !have_size) {
        return cli_usage("gen", "%s", !have_size ? "--size is required" : "one OUT path is required");
    }
    const char *out = argv[optind];
    bool show = !quiet && isatty(STDERR_FILENO);
    o.progress = progress;
    o.progress_ctx = show ? &o : NULL;
    cli_stop_install();
    pinio_gen_result res;
    pinio_diag d;
    int r = pinio_gen_write(out, &o, &res, &d);
    if (show)
        fputc('\n', stderr);
    if (r == -ECANCELED)
        cli_stop_reraise(); /* the library removed the file it was writing */
    if (r < 0) {
        fprintf(stderr, "pinio gen: %s\n", d.msg);
        return r == -EINVAL ? 2 : 1;
    }
    if (!quiet) {
        char a[32];
        printf("wrote %s: %zu tensors, %llu data bytes (%s) in %u file%s, seed %llu\n", out,
               res.tensors, (unsigned long long)res.data_bytes,
               cli_human_bytes(a, sizeof(a), res.data_bytes), res.files, res.files == 1 ? "" : "s",
               (unsigned long long)o.seed);
    }
    return 0;
}

const struct pinio_cmd pinio_cmd_gen = {
    .name = "gen",
    .summary = "write a deterministic synthetic safetensors checkpoint",
    .run = run_gen,
};
