/* pinio gen: write a deterministic synthetic checkpoint (public API only). */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "pinio/pinio.h"
#include "cli.h"
#include "jw.h"
#include "stop.h"
#include "progress.h"
#include "util.h"

static void gen_usage(FILE *out)
{
    fprintf(out,
            "usage: pinio gen OUT --size BYTES [--hidden H] [--layers L] [--intermediate I]\n"
            "                 [--vocab V] [--dtypes LIST] [--shards K] [--seed S] [--force] [--json]\n"
            "       pinio gen OUT --size BYTES --tensors N [--dtypes LIST] [--shards K] ...\n"
            "\n"
            "Writes a synthetic safetensors checkpoint whose every byte is derived from the\n"
            "seed, the tensor name and the byte's offset, so a reader can verify all of it\n"
            "without a reference copy (the seed is stored in __metadata__ as pinio_gen_seed).\n"
            "It holds a Llama-style decoder: model.embed_tokens.weight [vocab, hidden], per\n"
            "layer model.layers.N.{input_layernorm, self_attn.{q,k,v,o}_proj,\n"
            "post_attention_layernorm, mlp.{gate,up,down}_proj}.weight, model.norm.weight and\n"
            "lm_head.weight, each file laid out as safetensors' own writer does (dtype\n"
            "descending, then name: every tensor naturally aligned). --tensors N writes N\n"
            "tensors of equal size named as the layers' tensors instead.\n"
            "\n"
            "  OUT            the .safetensors file to write; with --shards K >= 2, a directory\n"
            "                 (created if needed) that receives model-0000i-of-0000K.safetensors\n"
            "                 and model.safetensors.index.json\n"
            "  --size BYTES   tensor bytes in total, e.g. 512M, 2G (K/M/G/T are powers of 1024);\n"
            "                 each tensor is rounded down to whole elements (a size too small\n"
            "                 for one element per --tensors tensor is refused)\n"
            "  --hidden H     hidden size, a multiple of 8 (default: the widest model that\n"
            "                 fits BYTES with a layer per 128 hidden units: 1G -> 1536 x 17)\n"
            "  --layers L     decoder layers (default: as many as fit BYTES); with --hidden,\n"
            "                 --size may be left out\n"
            "  --intermediate I  MLP width (default 8/3 of hidden, rounded up to 256)\n"
            "  --vocab V      vocabulary (default 32000; 32 x hidden below hidden 1024)\n"
            "  --tensors N    N tensors of equal size instead of a model (1 to 10000000)\n"
            "  --dtypes LIST  comma-separated dtypes used in turn, e.g. BF16,F32,F8_E4M3,F4\n"
            "                 (default BF16)\n"
            "  --shards K     split the tensors over K files (default 1)\n"
            "  --seed S       generator seed (default 0)\n"
            "  --force        replace files at OUT that gen did not write\n"
            "  --json         the summary as one JSON object (doc/json/gen.schema.json)\n"
            "  -q, --quiet    no progress and no summary\n"
            "  -h, --help     this help\n"
            "\n"
            "Each file is written under a temporary name (OUT.tmpPID), fsync'ed and renamed\n"
            "when complete. A file already at an output name is replaced only when gen\n"
            "wrote it (its pinio_gen_seed; an index beside gen's first shard), else with\n"
            "--force; a symlink there is never followed. Ctrl-C or SIGTERM removes the file being written, then ends pinio\n"
            "by that signal.\n"
            "Exit status: 0 written, 1 I/O error (the message names the file), 2 usage error.\n");
}

/* Whether gen may replace what is at `path` without --force: nothing, or a
 * regular file (never a symlink: rename would replace the link, not what it
 * names) that gen wrote, known by its header's seed. A synthetic file
 * written over a real checkpoint by a mistyped OUT is a checkpoint lost. */
static bool gen_output_or_absent(const char *path)
{
    struct stat sb;
    if (lstat(path, &sb) < 0)
        return errno == ENOENT;
    if (!S_ISREG(sb.st_mode))
        return false;
    pinio_st *st = NULL;
    pinio_diag d;
    bool ours = pinio_st_open(&st, path, 0, &d) == 0 &&
                pinio_st_metadata_get(st, PINIO_GEN_SEED_KEY) != NULL;
    pinio_st_free(st);
    return ours;
}

/* The first output name (in `bad`, PATH_MAX) gen must not replace, or 0
 * when there is none. With K >= 2 shards the index carries no seed: it is
 * gen's when it sits beside gen's first shard. */
static int gen_refused_name(const char *out, unsigned shards, char *bad, size_t cap)
{
    if (shards < 2) {
        snprintf(bad, cap, "%s", out);
        return !gen_output_or_absent(out);
    }
    char name[64];
    for (unsigned i = 1; i <= shards; i++) {
        pinio_gen_shard_name(name, sizeof name, i, shards);
        snprintf(bad, cap, "%s/%s", out, name);
        if (!gen_output_or_absent(bad))
            return 1;
    }
    snprintf(bad, cap, "%s/%s", out, PINIO_GEN_INDEX_NAME);
    struct stat sb;
    if (lstat(bad, &sb) < 0)
        return errno != ENOENT;
    if (!S_ISREG(sb.st_mode))
        return 1;
    pinio_gen_shard_name(name, sizeof name, 1, shards);
    char first[PATH_MAX];
    snprintf(first, sizeof first, "%s/%s", out, name);
    return lstat(first, &sb) < 0 || !gen_output_or_absent(first);
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
 * removes the file it was writing (stop.h). ctx: the progress line. */
static int progress(void *ctx, const pinio_progress *p)
{
    if (cli_stop_requested())
        return 1;
    cli_progress_update(ctx, p);
    return 0;
}

/* The summary as JSON: what was written, and the model's shape. */
static void gen_json(const char *out, const pinio_gen_opts *o, const pinio_gen_result *res,
                     const pinio_gen_model *model)
{
    jw w;
    jw_init(&w, stdout);
    jw_begin(&w, "gen");
    jw_kstr(&w, "path", out);
    jw_key(&w, "files");
    jw_arr(&w);
    if (res->files == 1) {
        jw_str(&w, out);
    } else {
        for (unsigned i = 1; i <= res->files; i++) {
            char name[64];
            pinio_gen_shard_name(name, sizeof name, i, res->files);
            jw_str(&w, name);
        }
    }
    jw_arr_end(&w);
    jw_kstr(&w, "index", res->files > 1 ? PINIO_GEN_INDEX_NAME : NULL);
    jw_ku64(&w, "tensors", res->tensors);
    jw_ku64(&w, "data_bytes", res->data_bytes);
    jw_ku64(&w, "file_bytes", res->file_bytes);
    jw_ku64(&w, "seed", o->seed);
    jw_key(&w, "dtypes");
    jw_arr(&w);
    for (size_t i = 0; i < (o->ndtypes ? o->ndtypes : 1); i++)
        jw_str(&w, pinio_dtype_name(o->ndtypes ? o->dtypes[i] : PINIO_DTYPE_BF16));
    jw_arr_end(&w);
    jw_kstr(&w, "layout", model ? "transformer" : "equal_tensors");
    jw_key(&w, "model");
    if (model) {
        jw_obj(&w);
        jw_ku64(&w, "hidden", model->hidden);
        jw_ku64(&w, "layers", model->layers);
        jw_ku64(&w, "intermediate", model->intermediate);
        jw_ku64(&w, "vocab", model->vocab);
        jw_ku64(&w, "kv_dim", model->kv_dim);
        jw_obj_end(&w);
    } else {
        jw_null(&w);
    }
    jw_obj_end(&w);
    jw_finish(&w); /* a failed write is main.c's to report */
}

static int run_gen(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"size", required_argument, NULL, 's'},   {"tensors", required_argument, NULL, 't'},
        {"dtypes", required_argument, NULL, 'd'}, {"shards", required_argument, NULL, 'k'},
        {"seed", required_argument, NULL, 'S'},   {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},         {"json", no_argument, NULL, 'j'},
        {"hidden", required_argument, NULL, 'H'}, {"layers", required_argument, NULL, 'L'},
        {"intermediate", required_argument, NULL, 'I'},
        {"vocab", required_argument, NULL, 'V'},  {"force", no_argument, NULL, 'f'},
        {NULL, 0, NULL, 0},
    };
    pinio_gen_opts o;
    pinio_gen_opts_default(&o);
    pinio_dtype dts[64];
    bool have_size = false, quiet = false, json = false, have_dims = false, force = false;
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
        case 'j':
            json = true;
            break;
        case 'f':
            force = true;
            break;
        case 'H':
        case 'L':
        case 'I':
        case 'V': {
            /* The bounds of pinio_gen_model_of(), said up front. */
            unsigned *dst = c == 'H' ? &o.hidden : c == 'L' ? &o.layers :
                            c == 'I' ? &o.intermediate : &o.vocab;
            uint64_t max = c == 'L' ? 100000 : c == 'V' ? 1u << 24 : 1u << 20;
            const char *name = c == 'H' ? "--hidden" : c == 'L' ? "--layers" :
                               c == 'I' ? "--intermediate" : "--vocab";
            if (cli_parse_u64(optarg, &v) < 0 || v == 0 || v > max || (c == 'H' && v % 8))
                return cli_usage("gen", "%s wants 1 to %llu%s, not '%s'", name,
                                 (unsigned long long)max, c == 'H' ? " (a multiple of 8)" : "",
                                 optarg);
            *dst = (unsigned)v;
            have_dims = true;
            break;
        }
        case 'h':
            gen_usage(stdout);
            return 0;
        default:
            return cli_getopt_error("gen", c, argv);
        }
    }
    if (have_dims && o.tensors)
        return cli_usage("gen", "--tensors writes tensors of equal size: it excludes --hidden, "
                                "--layers, --intermediate and --vocab");
    if (!have_size && !(o.hidden && o.layers))
        return cli_usage("gen", "--size is required (or --hidden and --layers)");
    if (optind + 1 != argc)
        return cli_usage("gen", "one OUT path is required");
    const char *out = argv[optind];
    /* The model is resolved first so that a shape that cannot be is a usage
     * error before anything is written, and so that --json can show it. */
    pinio_gen_model model;
    pinio_diag d;
    if (!o.tensors && pinio_gen_model_of(&o, &model, &d) < 0)
        return cli_usage("gen", "%s", d.msg);
    char bad[PATH_MAX];
    if (!force && gen_refused_name(out, o.shards, bad, sizeof bad)) {
        char msg[PATH_MAX + 128];
        snprintf(msg, sizeof msg, "%s: exists and gen did not write it: refused (--force replaces it)",
                 bad);
        if (json)
            jw_error("gen", -EEXIST, msg, bad, -1);
        fprintf(stderr, "pinio gen: %s\n", msg);
        return 1;
    }
    cli_progress pg;
    cli_progress_start(&pg, "gen", 0, quiet || json);
    o.progress = progress;
    o.progress_ctx = &pg;
    cli_stop_install();
    pinio_gen_result res;
    int r = pinio_gen_write(out, &o, &res, &d);
    cli_progress_end(&pg);
    if (r == -ECANCELED)
        cli_stop_reraise(); /* the library removed the file it was writing */
    if (r < 0) {
        if (json)
            jw_error("gen", r, d.msg, out, -1);
        fprintf(stderr, "pinio gen: %s\n", d.msg);
        return r == -EINVAL ? 2 : 1;
    }
    if (json) {
        gen_json(out, &o, &res, o.tensors ? NULL : &model);
    } else if (!quiet) {
        char a[32];
        printf("wrote %s: %zu tensors, %llu data bytes (%s) in %u file%s, seed %llu\n", out,
               res.tensors, (unsigned long long)res.data_bytes,
               cli_human_bytes(a, sizeof(a), res.data_bytes), res.files, res.files == 1 ? "" : "s",
               (unsigned long long)o.seed);
        if (!o.tensors)
            printf("model: hidden %u, %u layers, intermediate %u, vocab %u, k/v %u\n",
                   model.hidden, model.layers, model.intermediate, model.vocab, model.kv_dim);
    }
    return 0;
}

const struct pinio_cmd pinio_cmd_gen = {
    .name = "gen",
    .summary = "write a deterministic synthetic safetensors checkpoint",
    .run = run_gen,
};
