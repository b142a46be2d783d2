/* pinio info: print and validate a safetensors header (public API only). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "pinio/pinio.h"
#include "cli.h"
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
            "\n"
            "  --json       machine-readable output on stdout (also for an invalid file:\n"
            "               {\"valid\": false, \"error\": ...})\n"
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

static void print_json(const char *path, const pinio_st *st)
{
    printf("{\"path\": ");
    cli_json_str(path, strlen(path));
    printf(", \"valid\": true, \"file_size\": %llu, \"header_size\": %llu, "
           "\"data_offset\": %llu, \"data_size\": %llu,\n \"metadata\": {",
           (unsigned long long)pinio_st_file_size(st), (unsigned long long)pinio_st_header_size(st),
           (unsigned long long)pinio_st_data_offset(st), (unsigned long long)pinio_st_data_size(st));
    for (size_t i = 0; i < pinio_st_metadata_count(st); i++) {
        const pinio_st_kv *kv = pinio_st_metadata_at(st, i);
        printf("%s", i ? ", " : "");
        cli_json_str(kv->key, kv->key_len);
        printf(": ");
        cli_json_str(kv->value, kv->value_len);
    }
    printf("},\n \"tensors\": [");
    for (size_t i = 0; i < pinio_st_count(st); i++) {
        const pinio_st_tensor *t = pinio_st_at(st, i);
        printf("%s\n  {\"name\": ", i ? "," : "");
        cli_json_str(t->name, t->name_len);
        printf(", \"dtype\": \"%s\", \"bits\": %u, \"shape\": [", pinio_dtype_name(t->dtype),
               pinio_dtype_bits(t->dtype));
        for (unsigned d = 0; d < t->rank; d++)
            printf("%s%llu", d ? ", " : "", (unsigned long long)t->shape[d]);
        printf("], \"data_offsets\": [%llu, %llu], \"file_offset\": %llu, \"nbytes\": %llu, "
               "\"alignment\": %llu}",
               (unsigned long long)t->begin, (unsigned long long)t->end,
               (unsigned long long)t->file_offset, (unsigned long long)t->nbytes,
               (unsigned long long)t->align);
    }
    printf("%s]}\n", pinio_st_count(st) ? "\n " : "");
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
    if (optind + 1 != argc) {
        return cli_usage("info", "one PATH is required");
    }
    const char *path = argv[optind];
    pinio_st *st;
    pinio_diag d;
    int r = pinio_st_open(&st, path, 0, &d);
    if (r < 0) {
        fprintf(stderr, "pinio info: %s\n", d.msg);
        if (json) {
            printf("{\"path\": ");
            cli_json_str(path, strlen(path));
            printf(", \"valid\": false, \"code\": \"%s\", \"error\": ", pinio_err_name(r));
            cli_json_str(d.msg, strlen(d.msg));
            printf("}\n");
        }
        return 1;
    }
    if (json)
        print_json(path, st);
    else
        print_text(path, st);
    pinio_st_free(st);
    return 0; /* a failed write of the output is main.c's to report */
}

const struct pinio_cmd pinio_cmd_info = {
    .name = "info",
    .summary = "show and validate a safetensors file's header",
    .run = run_info,
};
