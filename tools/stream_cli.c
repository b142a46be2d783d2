/* `pinio load --device`: a checkpoint streamed through the staging ring to
 * the host sink or a CUDA device, with storage and H2D speeds reported
 * apart (public API only). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "progress.h"
#include "stream_cli.h"
#include "util.h"

int cli_parse_staging(const char *s, pinio_stream_opts *o)
{
    char buf[64];
    if (strlen(s) >= sizeof(buf))
        return -EINVAL;
    strcpy(buf, s);
    char *x = strchr(buf, 'x');
    uint64_t size, k = o->slots;
    if (x)
        *x = '\0';
    if (cli_parse_size(buf, &size) < 0 || (x && cli_parse_u64(x + 1, &k) < 0))
        return -EINVAL;
    if (size < (64u << 10) || size > (1u << 30) || (size & (size - 1)) || k < 2 || k > 1024)
        return -ERANGE;
    o->slot_size = (size_t)size;
    o->slots = (unsigned)k;
    return 0;
}

int cli_parse_device(const char *s, cli_device *d)
{
    memset(d, 0, sizeof(*d));
    d->set = true;
    if (strcmp(s, "host") == 0) {
        d->host = true;
        return 0;
    }
    size_t k = strncmp(s, "cuda:", 5) == 0 ? 5 : strncmp(s, "hip:", 4) == 0 ? 4 : 0;
    if (!k || !s[k])
        return -EINVAL;
    d->hip = k == 4;
    if (strcmp(s + k, "local") == 0) {
        d->local = true;
        return 0;
    }
    if (strchr(s + k, ':')) { /* a PCI bus id: 0000:65:00.0 */
        d->pci = s + k;
        return 0;
    }
    uint64_t n;
    if (cli_parse_u64(s + k, &n) < 0 || n > 1024)
        return -EINVAL;
    d->index = (int)n;
    return 0;
}

/* The host sink's callback: the tensors' bytes, counted and touched (one
 * read per 4 KiB), as a caller that places them itself would. */
typedef struct host_count {
    uint64_t bytes;
    uint64_t fragments;
    unsigned char x;
} host_count;

static int count_fragment(void *ctx, const pinio_sink_fragment *f)
{
    host_count *h = ctx;
    h->bytes += f->len;
    h->fragments++;
    for (size_t i = 0; i < f->len; i += 4096)
        h->x ^= f->data[i];
    return 0;
}

static void keep_sha(void *ctx, size_t file, const char *path, const char *hex)
{
    cli_shas *s = ctx;
    (void)file;
    char (*h)[65] = realloc(s->hex, (s->n + 1) * sizeof(*h));
    if (h)
        s->hex = h;
    char **p = realloc(s->path, (s->n + 1) * sizeof(*p));
    if (p)
        s->path = p;
    char *dup = h && p ? strdup(path) : NULL;
    if (!dup) {
        s->lost = true;
        return;
    }
    memcpy(s->hex[s->n], hex, 65);
    s->path[s->n++] = dup;
}

void cli_shas_hook(pinio_stream_opts *o, cli_shas *s)
{
    if (o->verify) {
        o->sha256_fn = keep_sha;
        o->sha256_ctx = s;
    }
}

void cli_shas_json(jw *w, const cli_shas *s, const pinio_stream_report *r)
{
    jw_kbool(w, "verified", r->verified);
    jw_kf64(w, "verify_s", r->verify_seconds);
    jw_ku64(w, "verify_landed_bytes", r->verify_landed_bytes);
    jw_ku64(w, "verify_reread_bytes", r->verify_reread_bytes);
    jw_kbool(w, "digests_complete", !s->lost);
    jw_key(w, "digests");
    jw_arr(w);
    for (size_t i = 0; i < s->n; i++) {
        jw_obj(w);
        jw_kstr(w, "path", s->path[i]);
        jw_kstr(w, "sha256", s->hex[i]);
        jw_obj_end(w);
    }
    jw_arr_end(w);
}

void cli_split_json(jw *w, const pinio_split_rule *rules, size_t n, uint32_t rank, uint32_t world,
                    size_t sliced, size_t strided, uint64_t full_bytes, uint64_t hole_bytes)
{
    jw_ku64(w, "rank", rank);
    jw_ku64(w, "world", world);
    cli_split_rules_json(w, rules, n);
    jw_ku64(w, "sliced_tensor_count", sliced);
    jw_ku64(w, "strided_tensor_count", strided);
    jw_ku64(w, "full_bytes", full_bytes);
    jw_ku64(w, "hole_bytes", hole_bytes);
}

void cli_split_rules_json(jw *w, const pinio_split_rule *rules, size_t n)
{
    jw_key(w, "rules");
    jw_arr(w);
    for (size_t i = 0; i < n; i++) {
        jw_obj(w);
        jw_kstr(w, "pattern", rules[i].pattern);
        jw_key(w, "dim");
        if (rules[i].dim == PINIO_SPLIT_WHOLE)
            jw_null(w);
        else
            jw_i64(w, rules[i].dim);
        jw_obj_end(w);
    }
    jw_arr_end(w);
}

void cli_load_json_begin(jw *w, const char *kind, const char *const *paths, size_t n)
{
    jw_init(w, stdout);
    jw_begin(w, "load");
    jw_kstr(w, "kind", kind);
    jw_key(w, "inputs");
    jw_arr(w);
    for (size_t i = 0; i < n; i++)
        jw_str(w, paths[i]);
    jw_arr_end(w);
}

void cli_stream_json(jw *w, const pinio_stream_report *r, double ready_s)
{
    jw_ku64(w, "file_count", r->files);
    jw_ku64(w, "tensor_count", r->tensors);
    jw_ku64(w, "bytes", r->bytes);
    jw_ku64(w, "read_bytes", r->read_bytes);
    jw_kf64(w, "elapsed_s", r->seconds);
    jw_kf64(w, "ready_s", ready_s);
    jw_kf64(w, "io_s", r->io_seconds);
    jw_kf64(w, "sink_s", r->sink_seconds);
    jw_ku64(w, "slot_count", r->slots);
    jw_ku64(w, "slot_size_bytes", r->slot_size);
    jw_ku64(w, "ring_bytes", r->ring_bytes);
    jw_kbool(w, "registered", r->registered);
    jw_key(w, "node");
    if (r->node >= 0)
        jw_i64(w, r->node);
    else
        jw_null(w);
    jw_ku64(w, "slot_wait_count", r->slot_waits);
    jw_kstr(w, "io_path", r->io_path);
}

void cli_shas_text(const cli_shas *s, const pinio_stream_report *r)
{
    for (size_t i = 0; i < s->n; i++)
        printf("sha256    %s  %s\n", s->hex[i], s->path[i]);
    if (r->verified)
        printf("verify    SHA-256 of %.3f GB in the staging slots as it landed and %.3f GB "
               "read again from the files (not streamed: headers, unselected tensors); "
               "%.3f s of hashing%s\n",
               (double)r->verify_landed_bytes / 1e9, (double)r->verify_reread_bytes / 1e9,
               r->verify_seconds, s->lost ? " (out of memory: some digests not shown)" : "");
}

void cli_shas_free(cli_shas *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->path[i]);
    free(s->path);
    free(s->hex);
    memset(s, 0, sizeof(*s));
}

bool cli_is_sha256(const char *s)
{
    return strlen(s) == 64 && strspn(s, "0123456789abcdefABCDEF") == 64;
}

int cli_stream_load(const char *const *paths, size_t n, const pinio_stream_opts *opts,
                    const cli_device *d, bool json, bool quiet, unsigned progress_flags)
{
    pinio_stream_opts so = *opts;
    const pinio_stream_opts *o = &so;
    cli_shas shas = { 0 };
    cli_shas_hook(&so, &shas);
    host_count hc = { 0 };
    pinio_sink_host_cfg host = { .fn = count_fragment, .ctx = &hc };
    pinio_gpu_arena *arena = NULL;
    pinio_sink_gpu_cfg gpu = { .device = d->index, .pci_bus_id = d->pci, .out = &arena };
    const pinio_sink *sink = d->host ? &pinio_sink_host : d->hip ? &pinio_sink_hip : &pinio_sink_cuda;
    cli_progress pg;
    cli_progress_start(&pg, "load", progress_flags, quiet || json);
    if (cli_progress_active(&pg)) {
        so.progress = cli_progress_cb;
        so.progress_ctx = &pg;
    }
    pinio_stream_report r;
    pinio_diag diag = { .offset = PINIO_DIAG_NO_OFFSET };
    /* Time to ready as pinio_load() counts it: the call until it returned,
     * when the sink holds every tensor (a GPU's copies synchronised). */
    double t_call = cli_now_s();
    int err = pinio_stream(paths, n, o, sink, d->host ? (const void *)&host : (const void *)&gpu,
                           &r, &diag);
    double ready_s = cli_now_s() - t_call;
    cli_progress_end(&pg);
    if (err < 0) {
        cli_shas_free(&shas);
        return cli_fail("load", json, err, &diag);
    }
    pinio_gpu_info ci = { 0 };
    if (arena)
        pinio_gpu_arena_get_info(arena, &ci);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double gbs = r.seconds > 0 ? (double)r.bytes / r.seconds / 1e9 : 0;
    double io_gbs = r.io_seconds > 0 ? (double)r.read_bytes / r.io_seconds / 1e9 : 0;
    double h2d_gbs = ci.h2d_seconds > 0 ? (double)ci.bytes / ci.h2d_seconds / 1e9 : 0;
    if (json) {
        jw w;
        cli_load_json_begin(&w, "stream", paths, n);
        jw_kstr(&w, "device", sink->name);
        jw_kstr(&w, "pci_bus_id", arena ? ci.pci_bus_id : NULL);
        cli_stream_json(&w, &r, ready_s);
        jw_kf64(&w, "gb_per_s", gbs);
        jw_kf64(&w, "io_gb_per_s", io_gbs);
        jw_kf64(&w, "h2d_gb_per_s", h2d_gbs);
        jw_kf64(&w, "h2d_s", ci.h2d_seconds);
        jw_ku64(&w, "h2d_copy_count", ci.copies);
        jw_ku64(&w, "peak_rss_bytes", (uint64_t)ru.ru_maxrss * 1024);
        jw_ku64(&w, "overread_bytes", r.slices.overread_bytes);
        jw_key(&w, "split");
        if (o->nsplit) {
            jw_obj(&w);
            cli_split_json(&w, o->split, o->nsplit, o->rank, o->world, r.slices.sliced,
                           r.slices.strided, r.slices.full_bytes, r.slices.hole_bytes);
            jw_obj_end(&w);
        } else {
            jw_null(&w);
        }
        cli_shas_json(&w, &shas, &r);
        jw_obj_end(&w);
        jw_finish(&w);
    } else if (!quiet) {
        char a[32];
        printf("streamed  %zu tensors, %.3f GB from %zu file%s in %.3f s: %.2f GB/s\n",
               r.tensors, (double)r.bytes / 1e9, r.files, r.files == 1 ? "" : "s", r.seconds,
               gbs);
        if (o->nsplit)
            printf("split     rank %u of %u: %zu tensors sliced (%zu handed over run by run, "
                   "packed by their offsets), %.3f of %.3f GB; reads cover %.3f GB more "
                   "(%.3f GB of holes read through), never handed to the sink\n",
                   o->rank, o->world, r.slices.sliced, r.slices.strided, (double)r.bytes / 1e9,
                   (double)r.slices.full_bytes / 1e9, (double)r.slices.overread_bytes / 1e9,
                   (double)r.slices.hole_bytes / 1e9);
        printf("storage   %.2f GB/s (reads, sink waits included)\n", io_gbs);
        if (arena)
            printf("device    %s:%d (%s, driver %d.%d): H2D %.2f GB/s, %llu copies\n",
                   sink->name, ci.device, ci.pci_bus_id, ci.driver_version / 1000,
                   ci.driver_version % 1000 / 10, h2d_gbs, (unsigned long long)ci.copies);
        else
            printf("host      %llu bytes in %llu fragments handed to the host sink\n",
                   (unsigned long long)hc.bytes, (unsigned long long)hc.fragments);
        printf("staging   %u x %s on node %d, %s\n", r.slots,
               cli_human_bytes(a, sizeof(a), r.slot_size), r.node,
               r.registered ? "registered (READ_FIXED)" : "not registered");
        printf("I/O path  %s\n", r.io_path);
        cli_shas_text(&shas, &r);
        printf("peak RSS  %.3f GB\n", (double)ru.ru_maxrss * 1024 / 1e9);
    }
    cli_shas_free(&shas);
    pinio_gpu_arena_free(arena);
    return 0;
}
