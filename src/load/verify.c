/*
 * --verify: the SHA-256 of each input file (the hub's LFS object id),
 * computed by hasher threads (hash.c) that follow the reads as they land in
 * the arena.
 *
 * What is hashed from where: when the plan reads a file's data section as
 * one contiguous run of the arena, the bytes from its first read on are
 * hashed from the arena (the bytes that landed) and only the bytes before
 * it (the header) are read again through the plan's descriptor; otherwise
 * (a filtered load) the whole file is read again through that descriptor.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <unistd.h>

#include "src/load/load_internal.h"

struct pinio__verify {
    pinio__hasher *hasher;
    pinio__hash_file *files;
    size_t n;
};

static pinio__hash_file hash_source(const pinio_plan *plan, uint32_t fidx, const uint8_t *arena)
{
    const pinio__pfile *f = &plan->files[fidx];
    pinio__hash_file h = { .path = f->path, .fd = f->fd, .size = f->pub.size,
                           .mem_from = f->pub.size };
    const pinio_plan_read *first = NULL;
    uint64_t run_end = 0, dest_next = 0;
    bool contiguous = true;
    for (size_t i = 0; i < plan->layout.nreads; i++) {
        const pinio_plan_read *r = &plan->layout.reads[i];
        if (r->file != fidx)
            continue;
        if (!first)
            first = r;
        else if (r->offset != run_end || r->dest_offset != dest_next)
            contiguous = false;
        run_end = r->offset + r->len;
        dest_next = r->dest_offset + r->len;
    }
    if (first && contiguous && run_end >= f->pub.size && first->offset < f->pub.size) {
        h.mem_from = first->offset;
        h.mem = arena + first->dest_offset;
    }
    return h;
}

int pinio__verify_start(pinio__verify **out, const pinio_plan *plan, const uint8_t *arena)
{
    *out = NULL;
    pinio__verify *v = calloc(1, sizeof(*v));
    if (!v || !(v->files = calloc(plan->nfiles ? plan->nfiles : 1, sizeof(*v->files)))) {
        free(v);
        return -ENOMEM;
    }
    v->n = plan->nfiles;
    for (size_t i = 0; i < v->n; i++)
        v->files[i] = hash_source(plan, (uint32_t)i, arena);
    /* One hasher thread per CPU (at most 8: the reads need little CPU, and on
     * 2 CPUs 2 threads beat 1, 0.40 vs 0.49 s for 4 shards of 256 MiB); with
     * one CPU they would only take turns with the reads, so the hashing runs
     * after them. */
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned threads = cpus < 2 ? 0 : cpus > 8 ? 8 : (unsigned)cpus;
    int rc = pinio__hasher_start(&v->hasher, v->files, v->n, threads);
    if (rc < 0) {
        free(v->files);
        free(v);
        return rc;
    }
    *out = v;
    return 0;
}

void pinio__verify_landed(pinio__verify *v, const pinio_plan_read *r)
{
    /* A file's reads are consecutive and land in order, and each file is
     * read in one pass: its bytes up to the end of this read have arrived. */
    pinio__hasher_advance(v->hasher, r->file, r->offset + r->len);
}

int pinio__verify_finish(pinio__verify *v, const pinio_plan *plan, const pinio_load_opts *opts,
                         char (*hex)[65], pinio_load_report *rep, pinio_diag *diag)
{
    double t0 = pinio__now_s();
    int rc = pinio__hasher_finish(v->hasher, diag);
    v->hasher = NULL;
    for (size_t i = 0; rc == 0 && i < v->n; i++) {
        for (int b = 0; b < 32; b++)
            snprintf(hex[i] + 2 * b, 3, "%02x", v->files[i].sha[b]);
        const char *want =
            opts->expected_sha256 && i < opts->nexpected ? opts->expected_sha256[i] : NULL;
        if (want && strcasecmp(want, hex[i]) != 0) {
            rc = PINIO_EFORMAT;
            pinio_diag_set_at(diag, rc, plan->files[i].path, PINIO_DIAG_NO_OFFSET,
                              "sha256 mismatch: expected %s, got %s", want, hex[i]);
            pinio_diag_set_index(diag, i);
        }
    }
    if (rc == 0) {
        rep->verified = true;
        rep->verify_seconds = pinio__now_s() - t0;
    }
    free(v->files);
    free(v);
    return rc;
}

void pinio__verify_abort(pinio__verify *v)
{
    if (!v)
        return;
    pinio__hasher_abort(v->hasher);
    free(v->files);
    free(v);
}
