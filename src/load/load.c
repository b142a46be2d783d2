/*
 * pinio_load: the resident mode, a plan executed into one arena.
 *
 *   plan (plan.c: inputs, headers, selection, cache policy, layout)
 *   -> [--cache cold: drop the files' pages]
 *   -> memory mode per file (modes.c: pinned or mapped, and why)
 *   -> mapped files mapped and checked (mapped.c)
 *   -> arena for the pinned files (arena.c: placed, faulted ahead of the
 *      reads; or a kept arena, reused)
 *   -> execute the pinned files' reads into the arena (exec.c), hashing as
 *      reads land (verify.c)
 *   -> digests compared -> tensors realigned (--align) -> settle the arena
 *      (placement checked, locked) -> checkpoint (checkpoint.c)
 *
 * Each stage fills its own part of the report. Nothing is handed out from a
 * failed load: the checkpoint is built only once every check has passed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/opts.h"
#include "src/load/load_internal.h"

void pinio_load_opts_init(pinio_load_opts *opts, size_t size)
{
    pinio_load_opts d;
    memset(&d, 0, sizeof(d));
    d.node = PINIO_NODE_AUTO;
    d.direct = PINIO_DIRECT_AUTO;
    d.backend = PINIO_BACKEND_AUTO;
    d.cache = PINIO_CACHE_AUTO;
    pinio__opts_init(opts, size, &d, sizeof(d));
}

static void plan_opts_of(const pinio_load_opts *o, pinio_plan_opts *po)
{
    pinio_plan_opts_default(po);
    po->filters = o->filters;
    po->nfilters = o->nfilters;
    po->cache = o->cache;
    po->direct = o->direct;
    po->slices = o->slices;
    po->nslices = o->nslices;
    po->split = o->split;
    po->nsplit = o->nsplit;
    po->rank = o->rank;
    po->world = o->world;
    po->max_overread = o->max_overread;
}

static void exec_opts_of(const pinio_load_opts *o, bool hashing, uint64_t bytes,
                         pinio_exec_opts *eo)
{
    pinio_exec_opts_default(eo);
    eo->queue_depth = o->queue_depth;
    eo->request_size = o->request_size;
    eo->direct = o->direct;
    eo->backend = o->backend;
    eo->progress = o->progress;
    eo->progress_ctx = o->progress_ctx;
    /* Without a progress callback or a hasher to feed, the whole selection
     * is one bulk call, so the engine's queue never drains early; a hasher
     * needs drain points as a progress callback does: 1/16 of the load
     * (16 MiB to 1 GiB) per batch. */
    if (hashing && !o->progress)
        eo->batch_bytes = pinio__batch_bytes_default(bytes);
}

static void report_exec(const pinio_exec_report *er, pinio_load_report *rep)
{
    rep->read_bytes = er->read_bytes;
    rep->io_seconds = er->io_seconds;
    rep->backend = er->backend;
    rep->setup_flags = er->setup_flags;
    rep->fixed_ops = er->fixed_ops;
    rep->plain_ops = er->plain_ops;
    rep->registered = er->backend == PINIO_BACKEND_FIXED_DIRECT;
    memcpy(rep->io_path, er->io_path, sizeof(rep->io_path));
}

/* The pinned files' reads form runs of consecutive reads (a file's reads
 * are consecutive): each run is one execution into the arena. Most loads
 * have one run; mixed modes may have more. */
static int execute_pinned(pinio_plan *plan, pinio__arena *arena, const pinio_load_opts *o,
                          pinio_load_report *rep, pinio_diag *diag)
{
    size_t n = plan->layout.nreads;
    int rc = 0;
    bool first = true;
    for (size_t i = 0; i < n && rc == 0;) {
        if (arena->files[plan->layout.reads[i].file].mode != PINIO_MEMORY_PINNED) {
            i++;
            continue;
        }
        size_t j = i;
        while (j < n && arena->files[plan->layout.reads[j].file].mode == PINIO_MEMORY_PINNED)
            j++;
        pinio_exec_opts eo;
        exec_opts_of(o, arena->verify != NULL, rep->arena_bytes, &eo);
        eo.first_read = i;
        eo.nreads = j - i;
        eo.regions = arena->regions;
        eo.nregions = arena->nregions;
        eo.regions_lazy = true;
        pinio_exec_report er;
        rc = pinio_plan_execute(plan, &pinio__arena_dest, arena, &eo, &er, diag);
        if (rc == 0 && er.regions_registered > arena->nregistered)
            arena->nregistered = er.regions_registered;
        if (rc == 0 && first)
            report_exec(&er, rep);
        else if (rc == 0) {
            rep->read_bytes += er.read_bytes;
            rep->io_seconds += er.io_seconds;
            rep->fixed_ops += er.fixed_ops;
            rep->plain_ops += er.plain_ops;
            rep->registered = rep->registered && er.backend == PINIO_BACKEND_FIXED_DIRECT;
        }
        first = false;
        i = j;
    }
    if (first)
        snprintf(rep->io_path, sizeof(rep->io_path), "no reads: %s",
                 rep->files_mapped ? "every selected file mapped" : "no data to read");
    return rc;
}

/* Where each tensor's bytes are: in the arena for pinned files, in the
 * file's mapping for mapped ones. */
static void tensor_addresses(const pinio_plan *plan, const pinio__arena *arena,
                             const pinio__fmem *fm, const uint8_t **data)
{
    for (size_t i = 0; i < plan->ntensors; i++) {
        const pinio_plan_tensor *t = &plan->tensors[i];
        const pinio__fmem *m = &fm[t->file];
        if (m->mode == PINIO_MEMORY_MAPPED)
            data[i] = m->map.len ? (const uint8_t *)m->map.ptr +
                                       (t->nbytes ? t->file_offset - m->map_off : 0)
                                 : NULL;
        else if (!t->nbytes || !m->has_reads) /* empty: the layout may place it anywhere */
            data[i] = arena->base;
        else
            data[i] = arena->base + m->arena_off + (t->dest_offset - m->dest_lo);
    }
}

int pinio_load(const char *const *paths, size_t npaths, const pinio_load_opts *opts,
               pinio_checkpoint **out, pinio_diag *diag)
{
    if (out)
        *out = NULL;
    pinio_load_opts o;
    pinio_load_opts_default(&o);
    int rc = pinio__opts_copy(&o, sizeof(o), opts, "pinio_load options", diag);
    if (rc < 0)
        return rc;
    if (!out || !paths || npaths == 0 || (o.nfilters && !o.filters) ||
        o.memory > PINIO_MEMORY_MAPPED || (unsigned)o.consumer > PINIO_CONSUMER_DMA ||
        o.mapped_fill > PINIO_FILL_FAULT || o.tensor_align > 4096 ||
        (o.tensor_align & (o.tensor_align - 1))) {
        pinio_diag_set(diag, -EINVAL, "pinio_load: %s",
                       !npaths                        ? "no input paths"
                       : o.memory > PINIO_MEMORY_MAPPED ? "invalid memory mode"
                       : (unsigned)o.consumer > PINIO_CONSUMER_DMA ? "consumer must be HOST or DMA"
                       : o.mapped_fill > PINIO_FILL_FAULT ? "mapped_fill must be AUTO, AHEAD or FAULT"
                       : o.tensor_align > 4096 || (o.tensor_align & (o.tensor_align - 1))
                           ? "tensor_align must be a power of two, at most 4096"
                           : "invalid arguments");
        return -EINVAL;
    }
    double t0 = pinio__now_s();
    pinio_load_report rep = { 0 };
    pinio_plan_opts po;
    plan_opts_of(&o, &po);
    pinio_plan *plan = NULL;
    rc = pinio_plan_create(&plan, paths, npaths, &po, diag);
    if (rc < 0)
        return rc;
    pinio__report_plan(plan, &rep);
    if ((rc = pinio__digests_check(o.nexpected, rep.files, pinio_plan_file_at(plan, 0)->path,
                                   diag)) < 0) {
        pinio_plan_free(plan);
        return rc;
    }
    /* Preparing a measurement, not loading: a freshly written file spends
     * seconds in writeback here. Kept out of `seconds`. */
    if (o.cache == PINIO_CACHE_COLD)
        rc = pinio_plan_drop_cache(plan, &rep.drop_seconds, diag);

    size_t nf = plan->nfiles ? plan->nfiles : 1, nt = plan->ntensors ? plan->ntensors : 1;
    pinio__fmem *fm = calloc(nf, sizeof(*fm));
    const uint8_t **data = calloc(nt, sizeof(*data));
    const uint8_t **first_mem = calloc(nf, sizeof(*first_mem));
    if (rc == 0 && (!fm || !data || !first_mem))
        rc = -ENOMEM;
    uint64_t arena_bytes = 0;
    if (rc == 0) {
        arena_bytes = pinio__modes_decide(plan, &o, fm);
        pinio__modes_report(plan, fm, &rep);
        pinio__report_cache(plan, fm, &rep);
        rc = pinio__map_files(plan, fm, o.lock_mapped, o.map_private, &rep, diag);
    }
    pinio__arena arena;
    bool have_arena = false;
    if (rc == 0) {
        rc = pinio__arena_create(&arena, plan, fm, arena_bytes, &o, &rep, diag);
        have_arena = rc == 0;
    }
    if (rc == 0 && o.verify) {
        for (size_t f = 0; f < plan->nfiles; f++)
            if (fm[f].mode == PINIO_MEMORY_PINNED && fm[f].has_reads)
                first_mem[f] = arena.base + fm[f].arena_off;
        rc = pinio__verify_start(&arena.verify, plan, first_mem);
    }
    if (rc == 0)
        rc = execute_pinned(plan, &arena, &o, &rep, diag);

    char (*hex)[65] = NULL;
    if (rc == 0 && arena.verify) {
        hex = calloc(rep.files ? rep.files : 1, sizeof(*hex));
        rc = hex ? pinio__verify_finish(arena.verify, plan, &o, hex, &rep, diag) : -ENOMEM;
        if (hex)
            arena.verify = NULL; /* finish freed it, whatever it returned */
    }
    if (rc == 0) {
        tensor_addresses(plan, &arena, fm, data);
        /* Strided slices are in pinned files only (modes.c): packed in place. */
        for (size_t i = 0; i < plan->ntensors; i++)
            pinio_plan_gather(plan, i, (void *)data[i]);
        rc = pinio__arena_realign(&arena, plan, o.tensor_align, data, &rep);
    }
    if (have_arena)
        pinio__arena_settle(&arena, &rep);
    pinio_checkpoint *cp = NULL;
    if (rc == 0) {
        /* Files read, that is: a mapped file is neither. */
        for (size_t f = 0; f < plan->nfiles; f++)
            if (fm[f].mode == PINIO_MEMORY_PINNED) {
                rep.files_buffered += plan->files[f].pub.hot;
                rep.files_direct += !plan->files[f].pub.hot;
            }
        rep.seconds = pinio__now_s() - t0 - rep.drop_seconds;
        rc = pinio__checkpoint_build(&cp, plan, &arena.view, fm, data, hex, &rep);
    }
    if (have_arena) {
        pinio__verify_abort(arena.verify); /* still there only when the load failed */
        pinio__arena_close(&arena);
    }
    pinio__fmem_release(fm, plan->nfiles);
    free(fm);
    free(data);
    free(first_mem);
    free(hex);
    pinio_plan_free(plan);
    if (rc < 0) {
        if (diag && diag->code == 0)
            pinio_diag_set(diag, rc, "load failed: %s", pinio_strerror(rc));
        return rc;
    }
    *out = cp;
    return 0;
}
