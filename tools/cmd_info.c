/* pinio info: print and validate a safetensors header, or an index and
 * its shards' headers (public API only). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "pinio/pinio.h"
#include "cli.h"
#include "jw.h"
#include "util.h"

static void info_usage(FILE *out)
{
    fprintf(out,
            "usage: pinio info PATH [--json]\n"
            "\n"
            "Reads the header of the safetensors file PATH and validates it as strictly as\n"
            "the reference implementation (header length, UTF-8, JSON shape, dtypes, exact\n"
            "tiling of the data section, dtype x shape sizes, exact file length) and also\n"
            "rejects duplicate names. Prints the header size, the metadata, and each tensor\n"
            "in file order: name, dtype, shape, data offsets, absolute file offset and the\n"
            "alignment of that offset (safetensors guarantees none). Only the header is read.\n"
            "PATH may also be anything pinio load takes, and then names the files a load\n"
            "would read: an index (model.safetensors.index.json), whose shards are shown\n"
            "the same way and each tensor of whose weight_map must be in the shard it\n"
            "names; a folder (its index when present, else every *.safetensors in it);\n"
            "or a Hugging Face repo id ORG/NAME[@REV] or NAME[@REV] in the hub cache\n"
            "(when no local path of that name exists; see pinio-load(1)); or an s3:// URL\n"
            "(an object, a prefix, an index), whose headers are fetched by range GETs.\n"
            "\n"
            "  --json       machine-readable output on stdout (doc/json/SCHEMA.md); an\n"
            "               invalid file prints an error object naming file and offset\n"
            "  -h, --help   this help\n"
            "\n"
            "Exit status: 0 valid, 1 invalid or unreadable (one-line reason on stderr),\n"
            "2 usage error.\n");
}

/* Text output: printable characters as they are, control characters
 * escaped, so that a name cannot drive the terminal: C0 and DEL as \xNN,
 * C1 (U+0080..U+009F, UTF-8 C2 80..C2 9F; 0x9B alone is a CSI on some
 * terminals) as \uNNNN. Names are valid UTF-8 (the parser checked). */
static void text_str(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f)
            printf("\\x%02x", c);
        else if (c == 0xc2 && i + 1 < n && (unsigned char)s[i + 1] >= 0x80 &&
                 (unsigned char)s[i + 1] <= 0x9f)
            printf("\\u%04x", (unsigned char)s[++i]);
        else
            putchar(c);
    }
}

static void json_file(jw *w, const char *path, const pinio_st *st)
{
    size_t misaligned = 0;
    jw_obj(w);
    jw_kstr(w, "path", path);
    jw_ku64(w, "file_size_bytes", pinio_st_file_size(st));
    jw_ku64(w, "header_size_bytes", pinio_st_header_size(st));
    jw_ku64(w, "data_offset", pinio_st_data_offset(st));
    jw_ku64(w, "data_size_bytes", pinio_st_data_size(st));
    jw_key(w, "metadata");
    jw_obj(w);
    for (size_t i = 0; i < pinio_st_metadata_count(st); i++) {
        const pinio_st_kv *kv = pinio_st_metadata_at(st, i);
        /* keys are unique and valid UTF-8: the parser checked both */
        char key[512];
        snprintf(key, sizeof(key), "%.*s", (int)kv->key_len, kv->key);
        jw_key(w, key);
        jw_strn(w, kv->value, kv->value_len);
    }
    jw_obj_end(w);
    jw_ku64(w, "tensor_count", pinio_st_count(st));
    jw_key(w, "tensors");
    jw_arr(w);
    for (size_t i = 0; i < pinio_st_count(st); i++) {
        const pinio_st_tensor *t = pinio_st_at(st, i);
        misaligned += t->nbytes && t->align < (pinio_dtype_bits(t->dtype) + 7) / 8;
        jw_obj(w);
        jw_key(w, "name");
        jw_strn(w, t->name, t->name_len);
        jw_kstr(w, "dtype", pinio_dtype_name(t->dtype));
        jw_ku64(w, "bits", pinio_dtype_bits(t->dtype));
        jw_key(w, "shape");
        jw_arr(w);
        for (unsigned d = 0; d < t->rank; d++)
            jw_u64(w, t->shape[d]);
        jw_arr_end(w);
        jw_key(w, "data_offsets");
        jw_arr(w);
        jw_u64(w, t->begin);
        jw_u64(w, t->end);
        jw_arr_end(w);
        jw_ku64(w, "file_offset", t->file_offset);
        jw_ku64(w, "size_bytes", t->nbytes);
        jw_ku64(w, "alignment_bytes", t->align);
        jw_obj_end(w);
    }
    jw_arr_end(w);
    jw_ku64(w, "misaligned_tensor_count", misaligned);
    jw_obj_end(w);
}

static void print_text(const char *path, const pinio_st *st)
{
    char a[32];
    printf("file:     %s\n", path);
    printf("size:     %llu bytes\n", (unsigned long long)pinio_st_file_size(st));
    printf("header:   %llu bytes (data section at file offset %llu, %llu bytes, %s)\n",
           (unsigned long long)pinio_st_header_size(st),
           (unsigned long long)pinio_st_data_offset(st),
           (unsigned long long)pinio_st_data_size(st),
           cli_human_bytes(a, sizeof(a), pinio_st_data_size(st)));
    printf("metadata: %zu entr%s\n", pinio_st_metadata_count(st),
           pinio_st_metadata_count(st) == 1 ? "y" : "ies");
    for (size_t i = 0; i < pinio_st_metadata_count(st); i++) {
        const pinio_st_kv *kv = pinio_st_metadata_at(st, i);
        printf("  ");
        text_str(kv->key, kv->key_len);
        printf(" = ");
        text_str(kv->value, kv->value_len);
        printf("\n");
    }
    size_t n = pinio_st_count(st), misaligned = 0;
    printf("tensors:  %zu (file order)\n", n);
    for (size_t i = 0; i < n; i++) {
        const pinio_st_tensor *t = pinio_st_at(st, i);
        char shape[256];
        size_t k = (size_t)snprintf(shape, sizeof(shape), "[");
        for (unsigned d = 0; d < t->rank && k < sizeof(shape); d++)
            k += (size_t)snprintf(shape + k, sizeof(shape) - k, "%s%llu", d ? ", " : "",
                                  (unsigned long long)t->shape[d]);
        if (k < sizeof(shape))
            snprintf(shape + k, sizeof(shape) - k, "]");
        unsigned elem = (pinio_dtype_bits(t->dtype) + 7) / 8;
        if (t->nbytes && t->align < elem)
            misaligned++;
        printf("  ");
        text_str(t->name, t->name_len);
        printf("  %s %s  [%llu, %llu)  file offset %llu  align %llu%s\n",
               pinio_dtype_name(t->dtype), shape, (unsigned long long)t->begin,
               (unsigned long long)t->end, (unsigned long long)t->file_offset,
               (unsigned long long)t->align, t->nbytes && t->align < elem ? "  (misaligned)" : "");
    }
    printf("valid:    yes (%zu of %zu tensors not aligned to their element size in the file)\n",
           misaligned, n);
}

/* What info shows: one file, or the files a load of PATH would read (a
 * folder's shards, an index and the shards it names, a hub repo id). */
typedef struct info_set {
    pinio_plan *plan;     /* everything but one file: the plan resolved it */
    const pinio_st_index *index; /* the plan's index (its counts), owned by the plan */
    pinio_st *one;        /* one .safetensors file */
    size_t n;
    const char **paths;
    const pinio_st **st;
    size_t unindexed;     /* tensors of the shards the weight_map does not name */
} info_set;

static void info_free(info_set *s)
{
    free(s->st);
    free(s->paths);
    pinio_st_free(s->one);
    pinio_plan_free(s->plan);
}

/* A file is read as it is; anything else goes through a plan, so that a
 * folder, an index or a hub repo id resolves exactly as pinio load resolves
 * it: the same files, the same confinement of an index's shards (links stay
 * in the index's folder, or in a hub snapshot's model folder), the same
 * check that the weight_map agrees with the shards. */
static int info_open(info_set *s, const char *path, pinio_diag *d)
{
    size_t len = strlen(path);
    struct stat st;
    bool is_file = stat(path, &st) == 0 && !S_ISDIR(st.st_mode) &&
                   !(len >= 5 && !strcmp(path + len - 5, ".json"));
    int r = is_file ? pinio_st_open(&s->one, path, 0, d)
                    : pinio_plan_create(&s->plan, &path, 1, NULL, d);
    if (r < 0)
        return r;
    pinio_plan_info pi = { 0 };
    if (s->plan)
        pinio_plan_get_info(s->plan, &pi);
    s->n = s->plan ? pi.files : 1;
    s->paths = calloc(s->n, sizeof(*s->paths));
    s->st = calloc(s->n, sizeof(*s->st));
    if (!s->paths || !s->st)
        return -ENOMEM;
    for (size_t i = 0; i < s->n; i++) {
        const pinio_plan_file *f = s->plan ? pinio_plan_file_at(s->plan, i) : NULL;
        s->paths[i] = f ? f->path : path;
        s->st[i] = f ? f->header : s->one;
    }
    s->unindexed = pi.unindexed;
    s->index = s->plan ? pinio_plan_get_index(s->plan) : NULL;
    return 0;
}

static void info_json(const char *path, const info_set *s)
{
    jw w;
    jw_init(&w, stdout);
    jw_begin(&w, "info");
    jw_kstr(&w, "path", path);
    jw_kstr(&w, "kind", s->index ? "index" : "safetensors");
    jw_kbool(&w, "valid", true);
    size_t tensors = 0;
    for (size_t i = 0; i < s->n; i++)
        tensors += pinio_st_count(s->st[i]);
    jw_ku64(&w, "file_count", s->n);
    jw_ku64(&w, "tensor_count", tensors);
    jw_key(&w, "index");
    if (s->index) {
        jw_obj(&w);
        jw_kstr(&w, "path", pinio_st_index_path(s->index));
        jw_ku64(&w, "entry_count", pinio_st_index_count(s->index));
        jw_ku64(&w, "shard_count", pinio_st_index_shard_count(s->index));
        jw_ku64(&w, "unindexed_tensor_count", s->unindexed);
        jw_obj_end(&w);
    } else {
        jw_null(&w);
    }
    jw_key(&w, "files");
    jw_arr(&w);
    for (size_t i = 0; i < s->n; i++)
        json_file(&w, s->paths[i], s->st[i]);
    jw_arr_end(&w);
    jw_obj_end(&w);
    jw_finish(&w); /* a failed write is main.c's to report */
}

static int run_info(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    bool json = false;
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case 'j':
            json = true;
            break;
        case 'h':
            info_usage(stdout);
            return 0;
        default:
            return cli_getopt_error("info", c, argv);
        }
    }
    if (optind + 1 != argc)
        return cli_usage("info", "one PATH is required");
    const char *path = argv[optind];
    info_set s = { 0 };
    pinio_diag d = { .offset = PINIO_DIAG_NO_OFFSET };
    int r = info_open(&s, path, &d);
    if (r < 0) {
        info_free(&s);
        return cli_fail("info", json, r, &d);
    }
    if (json) {
        info_json(path, &s);
    } else {
        if (s.index)
            printf("index:    %s: %zu tensors in %zu shards (%zu tensors of the shards not in "
                   "its weight_map)\n\n", pinio_st_index_path(s.index),
                   pinio_st_index_count(s.index), s.n, s.unindexed);
        for (size_t i = 0; i < s.n; i++) {
            if (i)
                printf("\n");
            print_text(s.paths[i], s.st[i]);
        }
    }
    info_free(&s);
    return 0;
}

const struct pinio_cmd pinio_cmd_info = {
    .name = "info",
    .summary = "show and validate a safetensors file's header",
    .run = run_info,
};
