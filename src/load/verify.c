/*
 * --verify: the SHA-256 of each input file (the hub's LFS object id),
 * computed by hasher threads (hash.c) that follow the reads as they land in
 * the arena.
 *
 * What is hashed from where: the bytes each read brought (up to its
 * `need`, the last byte the plan wanted from it) are hashed where they
 * landed in the arena, so a corruption on the way in changes the digest;
 * what no read brought (the header, the ranges of unselected tensors, the
 * alignment tails) is read again through the plan's descriptor, the file
 * the header was validated from. The report says how many bytes came each
 * way.
 * A mapped file is always hashed through the descriptor: reading its
 * mapping could take a SIGBUS if the file were truncated meanwhile.
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
    pinio__hash_seg *segs;   /* all files' segments; files[i].segs points in */
    size_t n;
    uint64_t landed, reread; /* bytes hashed from the arena, and read again */
};

/* File `fidx` as segments: each read's wanted bytes from memory (file byte
 * at the file's first read lands at `mem`; NULL: a mapped file, all of it
 * read through the descriptor), the gaps between them from the file. `out`
 * has room for 2 * reads + 1. */
static size_t segments(const pinio_plan *plan, uint32_t fidx, const uint8_t *mem,
                       pinio__hash_seg *out, uint64_t *landed, uint64_t *reread)
{
    uint64_t size = plan->files[fidx].pub.size, pos = 0, lo = UINT64_MAX;
    size_t n = 0;
    for (size_t i = 0; mem && i < plan->layout.nreads; i++) {
        const pinio_plan_read *r = &plan->layout.reads[i];
        if (r->file != fidx)
            continue;
        if (lo == UINT64_MAX)
            lo = r->dest_offset; /* reads of a file are in order: its lowest */
        uint64_t end = r->offset + r->need < size ? r->offset + r->need : size;
        if (end <= pos)
            continue;
        uint64_t from = r->offset > pos ? r->offset : pos;
        if (from > pos)
            out[n++] = (pinio__hash_seg){ pos, from - pos, NULL };
        out[n++] = (pinio__hash_seg){ from, end - from,
                                      mem + (r->dest_offset - lo) + (from - r->offset) };
        *reread += from - pos;
        *landed += end - from;
        pos = end;
    }
    if (pos < size || n == 0) {
        out[n++] = (pinio__hash_seg){ pos, size - pos, NULL };
        *reread += size - pos;
    }
    return n;
}

int pinio__verify_start(pinio__verify **out, const pinio_plan *plan,
                        const uint8_t *const *first_mem)
{
    *out = NULL;
    pinio__verify *v = calloc(1, sizeof(*v));
    size_t nseg = 2 * plan->layout.nreads + plan->nfiles;
    if (!v || !(v->files = calloc(plan->nfiles ? plan->nfiles : 1, sizeof(*v->files))) ||
        !(v->segs = calloc(nseg ? nseg : 1, sizeof(*v->segs)))) {
        if (v)
            free(v->files);
        free(v);
        return -ENOMEM;
    }
    v->n = plan->nfiles;
    pinio__hash_seg *seg = v->segs;
    for (size_t i = 0; i < v->n; i++) {
        const pinio__pfile *f = &plan->files[i];
        size_t k = segments(plan, (uint32_t)i, first_mem[i], seg, &v->landed, &v->reread);
        v->files[i] = (pinio__hash_file){ .path = f->path, .fd = f->fd,
                                          .obj = f->pub.object ? f : NULL, .size = f->pub.size,
                                          .segs = seg, .nsegs = k };
        seg += k;
    }
    /* One hasher thread per CPU (at most 8: the reads need little CPU, and on
     * 2 CPUs 2 threads beat 1, 0.40 vs 0.49 s for 4 shards of 256 MiB); with
     * one CPU they would only take turns with the reads, so the hashing runs
     * after them. */
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned threads = cpus < 2 ? 0 : cpus > 8 ? 8 : (unsigned)cpus;
    int rc = pinio__hasher_start(&v->hasher, v->files, v->n, threads);
    if (rc < 0) {
        free(v->segs);
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
        rep->verify_landed_bytes = v->landed;
        rep->verify_reread_bytes = v->reread;
    }
    free(v->segs);
    free(v->files);
    free(v);
    return rc;
}

void pinio__verify_abort(pinio__verify *v)
{
    if (!v)
        return;
    pinio__hasher_abort(v->hasher);
    free(v->segs);
    free(v->files);
    free(v);
}
