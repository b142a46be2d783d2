/* relia_load: one real load, checked byte by byte. The fault matrix and the
 * limits runs drive it; build it with ASan so every run is also a leak check.
 *
 *   relia_load [--seed S] [--backend B] [--direct on|off|auto] [--cache C]
 *              [--rs BYTES] [--filter P]... [--change truncate|append] PATH...
 *
 * --engine-error-ok accepts, for verdict 1, a diagnostic that names no input:
 * a forced backend the machine (or the fault) refuses fails in the engine
 * before any file is opened ("io_uring_setup failed: ...").
 *
 * --change changes the first file after its header was validated and before
 * any data I/O, as a writer replacing a checkpoint underneath a running load
 * would: the load is then done as its two halves, pinio_plan_create(), the
 * change, pinio_plan_execute() into heap memory. The changes:
 *   truncate  cut to 4 KiB;            append   bytes added at the end;
 *   rewrite   every data byte inverted in place, same size (after one
 *             timestamp tick: a rewrite within the tick that stamped the
 *             validated file is undetectable, as plan.h says);
 *   rename    a file of the same size with inverted data renamed over the path;
 *   replace   the path unlinked, then that file created at the path.
 * After rename or replace the validated file must load correctly, and the
 * line says whether the path now names another file.
 *
 * Checkpoints must come from `pinio gen --seed S`. Prints one line and exits:
 *   0  "correct": loaded, every byte of every tensor (through the raw
 *      pointer and through a pinio_bytes view) equals the generator's;
 *   1  "error": the load failed cleanly: no checkpoint handed out, and a
 *      one-line diagnostic that names one of the input paths;
 *   3  anything else: a wrong byte, a checkpoint from a failed load, a
 *      diagnostic that is empty, multi-line or names no file;
 *   2  usage. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pinio/pinio.h"

/* The file's bytes with every data byte (past 8 + N) inverted: the same size
 * and header, other tensors. NULL on failure (reported). */
static uint8_t *inverted_copy(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf = NULL;
    long n = -1;
    if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 8 && fseek(f, 0, SEEK_SET) == 0 &&
        (buf = malloc((size_t)n)) && fread(buf, 1, (size_t)n, f) == (size_t)n) {
        uint64_t hlen;
        memcpy(&hlen, buf, 8);
        for (uint64_t i = 8 + hlen; i < (uint64_t)n; i++)
            buf[i] = (uint8_t)~buf[i];
        *len = (size_t)n;
    } else {
        perror("relia_load: reading the file to change");
        free(buf);
        buf = NULL;
    }
    if (f)
        fclose(f);
    return buf;
}

static int write_file(const char *path, int flags, const uint8_t *buf, size_t len)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC | flags, 0644);
    ssize_t w = fd >= 0 ? pwrite(fd, buf, len, 0) : -1;
    if (w != (ssize_t)len || (fd >= 0 && close(fd) != 0)) {
        perror("relia_load: writing the changed file");
        return -1;
    }
    return 0;
}

static void change_file(const char *how, const char *path)
{
    if (strcmp(how, "truncate") == 0) {
        if (truncate(path, 4096) != 0)
            perror("relia_load: truncate");
        return;
    }
    if (strcmp(how, "append") == 0) {
        FILE *f = fopen(path, "a");
        if (!f || fputs("appended after the header was read", f) < 0)
            perror("relia_load: append");
        if (f)
            fclose(f);
        return;
    }
    size_t len = 0;
    uint8_t *buf = inverted_copy(path, &len);
    if (!buf)
        return;
    char tmp[4096];
    snprintf(tmp, sizeof(tmp), "%s.relia-new", path);
    if (strcmp(how, "rewrite") == 0) {
        /* Timestamps move in ticks of the kernel's coarse clock (a jiffy):
         * wait one out, so the rewrite is stamped later than the file that
         * was validated, as a rewrite during a real load is. */
        nanosleep(&(struct timespec){ .tv_nsec = 30 * 1000 * 1000 }, NULL);
        write_file(path, 0, buf, len);
    } else if (strcmp(how, "rename") == 0) {
        if (write_file(tmp, O_CREAT | O_EXCL, buf, len) == 0 && rename(tmp, path) != 0)
            perror("relia_load: rename");
    } else if (strcmp(how, "replace") == 0) {
        if (unlink(path) != 0)
            perror("relia_load: unlink");
        write_file(path, O_CREAT | O_EXCL, buf, len);
    }
    free(buf);
}

static int heap_claim(void *ctx, size_t i, const pinio_plan_read *r, void **mem)
{
    (void)i;
    *mem = (uint8_t *)ctx + r->dest_offset;
    return 0;
}

static const pinio_dest_ops heap_dest = { .size = sizeof(pinio_dest_ops), .claim = heap_claim };

/* The load as plan -> change -> execute; every tensor checked on success. */
static int plan_change_execute(const char *const *paths, size_t np, const pinio_load_opts *o,
                               const char *how, uint64_t seed, pinio_diag *d)
{
    pinio_plan_opts po;
    pinio_plan_opts_default(&po);
    po.filters = o->filters;
    po.nfilters = o->nfilters;
    po.cache = o->cache;
    po.direct = o->direct;
    pinio_plan *p = NULL;
    int rc = pinio_plan_create(&p, paths, np, &po, d);
    if (rc < 0)
        return rc;
    change_file(how, pinio_plan_file_at(p, 0)->path);
    if (o->cache == PINIO_CACHE_COLD)
        rc = pinio_plan_drop_cache(p, NULL, d);
    pinio_plan_info pi;
    pinio_plan_get_info(p, &pi);
    uint8_t *mem = aligned_alloc(4096, pi.dest_bytes ? pi.dest_bytes : 4096);
    if (rc == 0 && !mem)
        rc = -ENOMEM;
    pinio_exec_opts eo;
    pinio_exec_opts_default(&eo);
    eo.backend = o->backend;
    eo.direct = o->direct;
    eo.request_size = o->request_size;
    if (rc == 0)
        rc = pinio_plan_execute(p, &heap_dest, mem, &eo, NULL, d);
    for (size_t i = 0; rc == 0 && i < pi.tensors; i++) {
        const pinio_plan_tensor *t = pinio_plan_tensor_at(p, i);
        if (!pinio_gen_verify(seed, t->name, 0, mem + t->dest_offset, t->nbytes, NULL)) {
            printf("WRONG: tensor %s after the file changed underneath\n", t->name);
            rc = 3;
        }
    }
    if (rc == 0) {
        /* What a caller of the seam can tell: the plan's descriptor is the
         * validated file, whatever the path names now. */
        const pinio_plan_file *f = pinio_plan_file_at(p, 0);
        struct stat a, b;
        bool moved = fstat(f->fd, &a) != 0 || stat(f->path, &b) != 0 || a.st_dev != b.st_dev ||
                     a.st_ino != b.st_ino;
        printf("correct: %zu tensors of the validated file%s\n", pi.tensors,
               moved ? "; the path now names another file" : "");
    }
    free(mem);
    pinio_plan_free(p);
    return rc;
}

static int parse_backend(const char *s, pinio_backend *out)
{
    static const struct { const char *n; pinio_backend b; } t[] = {
        { "auto", PINIO_BACKEND_AUTO }, { "fixed", PINIO_BACKEND_FIXED_DIRECT },
        { "direct", PINIO_BACKEND_DIRECT }, { "buffered", PINIO_BACKEND_BUFFERED },
        { "pread", PINIO_BACKEND_PREAD },
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (strcmp(s, t[i].n) == 0) {
            *out = t[i].b;
            return 0;
        }
    return -1;
}

/* Every byte through the raw pointer, and the first tensor again through a
 * zero-copy pinio_bytes view that outlives the checkpoint. */
static int check(pinio_checkpoint *cp, uint64_t seed)
{
    size_t n = pinio_checkpoint_count(cp);
    uint64_t bytes = 0;
    for (size_t i = 0; i < n; i++) {
        const pinio_tensor *t = pinio_checkpoint_tensor(cp, i);
        uint64_t bad = 0;
        if (!pinio_gen_verify(seed, t->name, 0, t->data, t->nbytes, &bad)) {
            printf("WRONG: tensor %s byte %" PRIu64 " of %" PRIu64 "\n", t->name, bad, t->nbytes);
            return 3;
        }
        bytes += t->nbytes;
    }
    pinio_bytes *b = NULL;
    if (n > 0) {
        int rc = pinio_checkpoint_tensor_bytes(cp, 0, &b);
        if (rc) {
            printf("WRONG: tensor_bytes: %s\n", pinio_strerror(rc));
            return 3;
        }
    }
    pinio_load_report rep;
    pinio_checkpoint_report(cp, &rep);
    const char *name0 = n ? pinio_checkpoint_tensor(cp, 0)->name : NULL;
    char *name = name0 ? strdup(name0) : NULL;
    pinio_checkpoint_release(cp); /* the view keeps the arena alive */
    if (b) {
        const uint8_t *p = NULL;
        size_t len = pinio_bytes_len(b);
        int rc = pinio_bytes_data(b, PINIO_ACCESS_ZERO_COPY, &p, NULL);
        bool ok = rc == 0 && name && pinio_gen_verify(seed, name, 0, p, len, NULL);
        pinio_bytes_free(b);
        if (!ok) {
            printf("WRONG: tensor %s through its view after release (%d)\n", name ? name : "?", rc);
            free(name);
            return 3;
        }
    }
    free(name);
    printf("correct: %zu tensors, %" PRIu64 " bytes, backend %s, %zu direct + %zu buffered files\n",
           n, bytes, pinio_backend_name(rep.backend), rep.files_direct, rep.files_buffered);
    return 0;
}

int main(int argc, char **argv)
{
    enum { O_SEED = 256, O_BACKEND, O_DIRECTP, O_CACHE, O_RS, O_FILTER, O_CHANGE,
           O_ENGINE_OK };
    static const struct option lo[] = {
        { "seed", required_argument, NULL, O_SEED },
        { "backend", required_argument, NULL, O_BACKEND },
        { "direct", required_argument, NULL, O_DIRECTP },
        { "cache", required_argument, NULL, O_CACHE },
        { "rs", required_argument, NULL, O_RS },
        { "filter", required_argument, NULL, O_FILTER },
        { "change", required_argument, NULL, O_CHANGE },
        { "engine-error-ok", no_argument, NULL, O_ENGINE_OK },
        { NULL, 0, NULL, 0 },
    };
    pinio_load_opts o;
    pinio_load_opts_default(&o);
    /* The matrix counts a fault's completions in one engine run per load;
     * a shared load runs one per file (tests/load/share_test.sh puts
     * faults on that path). */
    o.share = PINIO_SHARE_OFF;
    uint64_t seed = 0;
    const char *filters[64];
    size_t nf = 0;
    bool engine_ok = false;
    const char *change = NULL;
    int c;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (c) {
        case O_SEED: seed = strtoull(optarg, NULL, 0); break;
        case O_BACKEND:
            if (parse_backend(optarg, &o.backend))
                return 2;
            break;
        case O_DIRECTP:
            o.direct = strcmp(optarg, "on") == 0    ? PINIO_DIRECT_ON
                       : strcmp(optarg, "off") == 0 ? PINIO_DIRECT_OFF
                                                    : PINIO_DIRECT_AUTO;
            break;
        case O_CACHE:
            o.cache = strcmp(optarg, "cold") == 0  ? PINIO_CACHE_COLD
                      : strcmp(optarg, "hot") == 0 ? PINIO_CACHE_HOT
                                                   : PINIO_CACHE_AUTO;
            break;
        case O_RS: o.request_size = (size_t)strtoull(optarg, NULL, 0); break;
        case O_FILTER:
            if (nf == 64)
                return 2;
            filters[nf++] = optarg;
            break;
        case O_CHANGE: change = optarg; break;
        case O_ENGINE_OK: engine_ok = true; break;
        default: return 2;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "usage: relia_load [options] PATH...\n");
        return 2;
    }
    o.filters = filters;
    o.nfilters = nf;
    const char *const *paths = (const char *const *)argv + optind;
    size_t np = (size_t)(argc - optind);
    pinio_checkpoint *cp = (pinio_checkpoint *)&o; /* poison: a failed load must NULL it */
    pinio_diag d = { 0 };
    int rc;
    if (change) {
        rc = plan_change_execute(paths, np, &o, change, seed, &d);
        if (rc == 0)
            return 0;
        if (rc == 3)
            return 3;
        cp = NULL;
    } else {
        rc = pinio_load(paths, np, &o, &cp, &d);
        if (rc == 0)
            return check(cp, seed);
    }
    if (cp != NULL) {
        printf("UNCLEAN: load failed (%s) but handed out a checkpoint\n", pinio_strerror(rc));
        return 3;
    }
    bool names = false;
    for (size_t i = 0; i < np; i++)
        names |= strstr(d.msg, paths[i]) != NULL;
    if (d.msg[0] == '\0' || strchr(d.msg, '\n') || !(names || engine_ok)) {
        printf("UNCLEAN: rc %d, diagnostic '%s' does not name the input\n", rc, d.msg);
        return 3;
    }
    printf("error: %s (rc %d)\n", d.msg, rc);
    return 1;
}
