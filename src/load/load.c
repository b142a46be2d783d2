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
 *   -> the shared files (coop.c): another process's segment mapped, or read
 *      into one of their own for the node's other loads, file by file
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

#include "src/base/fs.h"
#include "src/base/opts.h"
#include "src/load/arena_internal.h"
#include "src/load/coop_internal.h"
#include "src/load/touch_internal.h"

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

/* One load between its steps: what each step leaves for the next. */
typedef struct load_run {
    pinio_load_opts o;
    pinio_load_report rep;
    double t0;
    pinio_plan *plan;
    pinio__fmem *fm;            /* per plan file: pinned or mapped, where it lands */
    const uint8_t **data;       /* per tensor: where its bytes are */
    const uint8_t **first_mem;  /* per file: its first read in the arena (verify) */
    pinio__arena arena;
    bool have_arena;
    char (*hex)[65];            /* --verify: each file's digest */
    pinio_checkpoint *cp;
} load_run;

static int check_opts(load_run *L, bool have_paths, size_t ninputs, const pinio_load_opts *opts,
                      pinio_checkpoint **out, pinio_diag *diag);
static int make_plan(load_run *L, const char *const *paths, size_t npaths,
                     const pinio_plan *base, pinio_diag *diag);
static int run_stages(load_run *L, pinio_diag *diag);
static int alloc_tables(load_run *L);
static int decide_memory(load_run *L, pinio_diag *diag);
static int make_arena(load_run *L, uint64_t arena_bytes, pinio_diag *diag);
static int execute_pinned(pinio_plan *plan, pinio__arena *arena, const pinio_load_opts *o,
                          pinio_load_report *rep, bool *first, pinio_diag *diag);
static int execute_shared(load_run *L, bool *first, pinio_diag *diag);
static int finish_verify(load_run *L, pinio_diag *diag);
static int place_tensors(load_run *L);
static int build_checkpoint(load_run *L);
static void release(load_run *L);
static void plan_opts_of(const pinio_load_opts *o, pinio_plan_opts *po);
static void tensor_addresses(const pinio_plan *plan, const pinio__arena *arena,
                             const pinio__fmem *fm, const uint8_t **data);

/* Both entry points: from paths, or over the files of a `base` plan. */
static int load(const char *const *paths, size_t npaths, const pinio_plan *base,
                const pinio_load_opts *opts, pinio_checkpoint **out, pinio_diag *diag)
{
    double t_call = pinio__now_s();
    if (out)
        *out = NULL;
    load_run L = { 0 };
    int rc = check_opts(&L, base || paths, base ? 1 : npaths, opts, out, diag);
    if (rc < 0)
        return rc;
    L.t0 = pinio__now_s();
    if ((rc = make_plan(&L, paths, npaths, base, diag)) < 0)
        return rc;
    rc = run_stages(&L, diag);
    release(&L);
    if (rc < 0) {
        if (diag && diag->code == 0)
            pinio_diag_set(diag, rc, "load failed: %s", pinio_strerror(rc));
        return rc;
    }
    pinio__checkpoint_ready(L.cp, pinio__now_s() - t_call - L.rep.drop_seconds);
    pinio__storage_note(&L.rep);
    *out = L.cp;
    return 0;
}

int pinio_load(const char *const *paths, size_t npaths, const pinio_load_opts *opts,
               pinio_checkpoint **out, pinio_diag *diag)
{
    return load(paths, npaths, NULL, opts, out, diag);
}

int pinio_load_derived(const pinio_plan *base, const pinio_load_opts *opts,
                       pinio_checkpoint **out, pinio_diag *diag)
{
    return load(NULL, 0, base, opts, out, diag);
}

/* The caller's options, copied (size-prefixed) and checked. */
/* `have_paths`: an array of inputs (or a base plan), `ninputs` of them. */
static int check_opts(load_run *L, bool have_paths, size_t ninputs, const pinio_load_opts *opts,
                      pinio_checkpoint **out, pinio_diag *diag)
{
    pinio_load_opts_default(&L->o);
    int rc = pinio__opts_copy(&L->o, sizeof(L->o), opts, "pinio_load options", diag);
    if (rc < 0)
        return rc;
    const pinio_load_opts o = L->o;
    if (!out || !have_paths || ninputs == 0 || (o.nfilters && !o.filters) ||
        o.memory > PINIO_MEMORY_MAPPED || (unsigned)o.consumer > PINIO_CONSUMER_DMA ||
        o.mapped_fill > PINIO_FILL_FAULT || o.share > PINIO_SHARE_OFF || o.tensor_align > 4096 ||
        (o.tensor_align & (o.tensor_align - 1))) {
        pinio_diag_set(diag, -EINVAL, "pinio_load: %s",
                       !ninputs                       ? "no input paths"
                       : o.memory > PINIO_MEMORY_MAPPED ? "invalid memory mode"
                       : (unsigned)o.consumer > PINIO_CONSUMER_DMA ? "consumer must be HOST or DMA"
                       : o.mapped_fill > PINIO_FILL_FAULT ? "mapped_fill must be AUTO, AHEAD or FAULT"
                       : o.share > PINIO_SHARE_OFF ? "share must be AUTO or OFF"
                       : o.tensor_align > 4096 || (o.tensor_align & (o.tensor_align - 1))
                           ? "tensor_align must be a power of two, at most 4096"
                           : "invalid arguments");
        return -EINVAL;
    }
    /* Written so that a NaN fails too. */
    if (!(o.first_touch_gbps >= 0 && o.first_touch_gbps < 1e9) ||
        !(o.storage_gbps >= 0 && o.storage_gbps < 1e9)) {
        pinio_diag_set(diag, -EINVAL, "pinio_load: %s must be 0 (measure) or a rate in GB/s",
                       !(o.first_touch_gbps >= 0 && o.first_touch_gbps < 1e9)
                           ? "first_touch_gbps" : "storage_gbps");
        return -EINVAL;
    }
    return 0;
}

/* --verify vouches for one version of each file: an object that nothing
 * but its size pins (a store that sends neither ETag nor Last-Modified)
 * could be replaced by another of the same size between two ranges, and
 * its digest would describe neither. */
static int verify_pinnable(const pinio_plan *plan, pinio_diag *diag)
{
    for (size_t i = 0; i < plan->nfiles; i++) {
        const pinio__pfile *f = &plan->files[i];
        if (f->pub.object && strcmp(pinio__s3_pinned_by(&f->ver), "size") == 0) {
            pinio_diag_set_at(diag, -EPROTO, f->path, PINIO_DIAG_NO_OFFSET,
                              "--verify refused: the store sent neither an ETag nor a "
                              "Last-Modified, so nothing pins the object's version and the "
                              "digest could cover two of them");
            return -EPROTO;
        }
    }
    return 0;
}

/* The plan (inputs, headers, selection, layout) and its part of the
 * report; the expected digests' count checked against its files. On
 * failure nothing is left to release. */
static int make_plan(load_run *L, const char *const *paths, size_t npaths,
                     const pinio_plan *base, pinio_diag *diag)
{
    pinio_plan_opts po;
    plan_opts_of(&L->o, &po);
    int rc = base ? pinio_plan_derive(&L->plan, base, &po, diag)
                  : pinio_plan_create(&L->plan, paths, npaths, &po, diag);
    if (rc < 0)
        return rc;
    pinio__report_plan(L->plan, &L->rep);
    if ((rc = pinio__digests_check(L->o.nexpected, L->rep.files,
                                   pinio_plan_file_at(L->plan, 0)->path, diag)) < 0 ||
        (L->o.verify && (rc = verify_pinnable(L->plan, diag)) < 0)) {
        pinio_plan_free(L->plan);
        L->plan = NULL;
        return rc;
    }
    return 0;
}

/* The stages after the plan, in order; each runs only when the ones before
 * it succeeded, except settling an arena that was made. */
static int run_stages(load_run *L, pinio_diag *diag)
{
    int rc = 0;
    /* Preparing a measurement, not loading: a freshly written file spends
     * seconds in writeback here. Kept out of `seconds`. */
    if (L->o.cache == PINIO_CACHE_COLD)
        rc = pinio_plan_drop_cache(L->plan, &L->rep.drop_seconds, diag);
    int arc = alloc_tables(L);
    if (rc == 0)
        rc = arc;
    if (rc == 0)
        rc = decide_memory(L, diag);
    bool first = true;
    if (rc == 0)
        rc = execute_pinned(L->plan, &L->arena, &L->o, &L->rep, &first, diag);
    if (rc == 0)
        rc = execute_shared(L, &first, diag);
    if (rc == 0 && L->arena.verify)
        rc = finish_verify(L, diag);
    if (rc == 0)
        rc = place_tensors(L);
    if (L->have_arena)
        pinio__arena_settle(&L->arena, &L->rep);
    pinio__coop_memory_line(L->plan, L->fm, &L->rep);
    if (rc == 0)
        rc = build_checkpoint(L);
    return rc;
}

/* The per-file and per-tensor tables; -ENOMEM when one is missing (the
 * others are still released by release()). */
static int alloc_tables(load_run *L)
{
    size_t nf = L->plan->nfiles ? L->plan->nfiles : 1;
    size_t nt = L->plan->ntensors ? L->plan->ntensors : 1;
    L->fm = calloc(nf, sizeof(*L->fm));
    L->data = calloc(nt, sizeof(*L->data));
    L->first_mem = calloc(nf, sizeof(*L->first_mem));
    return L->fm && L->data && L->first_mem ? 0 : -ENOMEM;
}

/* Each file's memory mode (and the report's lines about it), the mapped
 * files mapped, then the arena for the pinned ones. */
static int decide_memory(load_run *L, pinio_diag *diag)
{
    uint64_t arena_bytes = pinio__modes_decide(L->plan, &L->o, L->fm);
    pinio__modes_report(L->plan, L->fm, &L->rep);
    pinio__report_cache(L->plan, L->fm, &L->rep);
    int rc = pinio__map_files(L->plan, L->fm, L->o.lock_mapped, L->o.map_private, &L->rep, diag);
    return rc == 0 ? make_arena(L, arena_bytes, diag) : rc;
}

/* The arena, and with --verify the hasher fed as reads land in it. */
static int make_arena(load_run *L, uint64_t arena_bytes, pinio_diag *diag)
{
    int rc = pinio__arena_create(&L->arena, L->plan, L->fm, arena_bytes, &L->o, &L->rep, diag);
    L->have_arena = rc == 0;
    if (rc == 0 && L->o.verify) {
        for (size_t f = 0; f < L->plan->nfiles; f++)
            if (L->fm[f].mode == PINIO_MEMORY_PINNED && L->fm[f].has_reads)
                L->first_mem[f] = L->arena.base + L->fm[f].arena_off;
        rc = pinio__verify_start(&L->arena.verify, L->plan, L->first_mem);
    }
    return rc;
}

static void plan_opts_of(const pinio_load_opts *o, pinio_plan_opts *po)
{
    pinio_plan_opts_default(po);
    po->filters = o->filters;
    po->nfilters = o->nfilters;
    po->filters_exact = o->filters_exact;
    po->cache = o->cache;
    po->direct = o->direct;
    po->slices = o->slices;
    po->nslices = o->nslices;
    po->split = o->split;
    po->nsplit = o->nsplit;
    po->rank = o->rank;
    po->world = o->world;
    po->max_overread = o->max_overread;
    po->stop = o->stop;
    po->stop_ctx = o->stop_ctx;
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
    /* --qd is "reads in flight" for objects too: HTTP requests at once. */
    eo->object_concurrency = o->object_concurrency ? o->object_concurrency : o->queue_depth;
    eo->stop = o->stop;
    eo->stop_ctx = o->stop_ctx;
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
    rep->files_direct = er->files_direct;
    rep->files_buffered = er->files_buffered;
    rep->registered = er->backend == PINIO_BACKEND_FIXED_DIRECT;
    rep->files_object = er->files_object;
    memcpy(rep->io_path, er->io_path, sizeof(rep->io_path));
}

/* The pinned files' reads form runs of consecutive reads (a file's reads
 * are consecutive): each run is one execution into the arena. Most loads
 * have one run; mixed modes may have more. */
/* One execution's report added to the load's. */
static void tally_exec(const pinio_exec_report *er, pinio_load_report *rep, bool *first)
{
    if (*first) {
        report_exec(er, rep);
    } else {
        rep->read_bytes += er->read_bytes;
        rep->io_seconds += er->io_seconds;
        rep->fixed_ops += er->fixed_ops;
        rep->plain_ops += er->plain_ops;
        rep->files_direct += er->files_direct;
        rep->files_buffered += er->files_buffered;
        rep->files_object += er->files_object;
        rep->registered = rep->registered && er->backend == PINIO_BACKEND_FIXED_DIRECT;
    }
    *first = false;
}

/* The pinned files' reads form runs of consecutive reads (a file's reads
 * are consecutive): each run is one execution into the arena, or two when
 * the staggered order starts it at a later file. Most loads have one run;
 * mixed modes may have more. Shared files (coop) are not in
 * the arena: execute_shared() reads or maps them. */
/* Reads [a, b) of the plan into the arena: one execution. */
static int execute_into_arena(pinio_plan *plan, pinio__arena *arena, const pinio_load_opts *o,
                              size_t a, size_t b, pinio_load_report *rep, bool *first,
                              pinio_diag *diag)
{
    pinio_exec_opts eo;
    exec_opts_of(o, arena->verify != NULL, rep->arena_bytes, &eo);
    eo.first_read = a;
    eo.nreads = b - a;
    eo.regions = arena->regions;
    eo.nregions = arena->nregions;
    eo.regions_lazy = true;
    pinio_exec_report er;
    int rc = pinio_plan_execute(plan, &pinio__arena_dest, arena, &eo, &er, diag);
    if (rc == 0 && er.regions_registered > arena->nregistered)
        arena->nregistered = er.regions_registered;
    if (rc == 0)
        tally_exec(&er, rep, first);
    return rc;
}

/* Where a run [i, j) of several files starts in the staggered order: the
 * first read of its file pinio__file_at(0, ...) (a file's reads are
 * consecutive), so that the run is read as [s, j) then [i, s).
 * Only where its first file is on a network or FUSE file system: there
 * readers queue on one file's server or stripe; a local device serves
 * every file alike, and the split would make two executions of one run
 * (two rings, a fault plan's read count restarting at the second) for
 * nothing. */
static size_t run_start(const pinio_plan *plan, const pinio_load_opts *o, size_t i, size_t j)
{
    const pinio_plan_read *r = plan->layout.reads;
    pinio_fs fs;
    if (i >= j || pinio__fs_probe_fd(plan->files[r[i].file].fd, &fs) != 0 || !fs.network)
        return i;
    size_t nf = 1;
    for (size_t k = i + 1; k < j; k++)
        nf += r[k].file != r[k - 1].file;
    pinio_exec_opts eo;
    exec_opts_of(o, false, 0, &eo);
    uint64_t rank;
    uint32_t ranks;
    if (nf < 2 || !pinio__files_rotated(&eo, &rank, &ranks))
        return i;
    size_t want = pinio__file_at(0, nf, rank, ranks), s = i;
    for (size_t f = 0; f < want; f++) {
        uint32_t cur = r[s].file;
        while (s < j && r[s].file == cur)
            s++;
    }
    return s;
}

static int execute_pinned(pinio_plan *plan, pinio__arena *arena, const pinio_load_opts *o,
                          pinio_load_report *rep, bool *first, pinio_diag *diag)
{
    size_t n = plan->layout.nreads;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0;) {
        const pinio__fmem *m = &arena->files[plan->layout.reads[i].file];
        if (m->mode != PINIO_MEMORY_PINNED || m->coop) {
            i++;
            continue;
        }
        size_t j = i;
        while (j < n && arena->files[plan->layout.reads[j].file].mode == PINIO_MEMORY_PINNED &&
               !arena->files[plan->layout.reads[j].file].coop)
            j++;
        /* Its files in the staggered order (exec.c, pinio__file_at): two
         * executions when it does not start at its first file. */
        size_t s = run_start(plan, o, i, j);
        rc = execute_into_arena(plan, arena, o, s, j, rep, first, diag);
        if (rc == 0 && s > i)
            rc = execute_into_arena(plan, arena, o, i, s, rep, first, diag);
        i = j;
    }
    return rc;
}

/* The shared files (coop.c): another process's segment mapped, or read
 * into one, each file on its own after the arena's reads. */
static int execute_shared(load_run *L, bool *first, pinio_diag *diag)
{
    pinio_exec_opts eo;
    exec_opts_of(&L->o, false, L->rep.bytes, &eo);
    int rc = pinio__coop_run(L->plan, &L->o, &eo, L->fm, tally_exec, first, &L->rep, diag);
    /* The cache line was written from the plan, before any read: a file
     * whose file system refused O_DIRECT when it was opened was read
     * through the page cache after all (the executions counted it). A
     * file another process read was read by none of them. */
    size_t planned_direct = 0;
    for (size_t f = 0; f < L->plan->nfiles; f++)
        planned_direct += L->fm[f].mode == PINIO_MEMORY_PINNED && L->fm[f].has_reads &&
                          !L->fm[f].shared_in && !L->plan->files[f].pub.hot &&
                          !L->plan->files[f].pub.object;
    if (rc == 0 && L->rep.files_direct < planned_direct)
        pinio__appendf(L->rep.cache, sizeof(L->rep.cache),
                       "; then %zu of the O_DIRECT files read buffered: their file system "
                       "refused O_DIRECT (see the I/O path)",
                       planned_direct - L->rep.files_direct);
    if (*first)
        snprintf(L->rep.io_path, sizeof(L->rep.io_path), "no reads: %s",
                 L->rep.files_shared ? "every file read was shared (another process read it)"
                 : L->rep.files_mapped ? "every selected file mapped"
                                       : "no data to read");
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
        if (m->mode == PINIO_MEMORY_MAPPED || m->coop)
            data[i] = m->map.len ? (const uint8_t *)m->map.ptr +
                                       (t->nbytes ? t->file_offset - m->map_off : 0)
                                 : NULL;
        else if (!t->nbytes || !m->has_reads) /* empty: the layout may place it anywhere */
            data[i] = arena->base;
        else
            data[i] = arena->base + m->arena_off + (t->dest_offset - m->dest_lo);
    }
}

/* Every read landed: the digests finished and compared. */
static int finish_verify(load_run *L, pinio_diag *diag)
{
    L->hex = calloc(L->rep.files ? L->rep.files : 1, sizeof(*L->hex));
    int rc = L->hex ? pinio__verify_finish(L->arena.verify, L->plan, &L->o, L->hex, &L->rep, diag)
                    : -ENOMEM;
    if (L->hex)
        L->arena.verify = NULL; /* finish freed it, whatever it returned */
    return rc;
}

/* Where each tensor's bytes are, realigned to --align where they miss it. */
static int place_tensors(load_run *L)
{
    tensor_addresses(L->plan, &L->arena, L->fm, L->data);
    /* Strided slices are in pinned files only (modes.c): packed in place. */
    for (size_t i = 0; i < L->plan->ntensors; i++)
        pinio_plan_gather(L->plan, i, (void *)L->data[i]);
    return pinio__arena_realign(&L->arena, L->plan, L->o.tensor_align, L->data, &L->rep);
}

/* The checkpoint, once every check passed: the report's last counts, then
 * the views over the arena and the mappings. */
static int build_checkpoint(load_run *L)
{
    /* files_direct and files_buffered are what the executions read (a
     * mapped file is neither, a refused O_DIRECT is buffered). */
    L->rep.seconds = pinio__now_s() - L->t0 - L->rep.drop_seconds;
    if (L->plan->s3) { /* every request of the load: headers, listings, data */
        pinio__s3_stats st;
        pinio__s3_get_stats(L->plan->s3, &st);
        L->rep.object_requests = st.requests;
        L->rep.object_retries = st.retries;
        snprintf(L->rep.object_pinned_by, sizeof(L->rep.object_pinned_by), "%s",
                 pinio__obj_pinned_by(L->plan));
    }
    return pinio__checkpoint_build(&L->cp, L->plan, &L->arena.view, L->fm, L->data, L->hex,
                                   &L->rep);
}

/* Everything but the checkpoint, which holds its own references. */
static void release(load_run *L)
{
    if (L->have_arena) {
        pinio__verify_abort(L->arena.verify); /* still there only when the load failed */
        pinio__arena_close(&L->arena);
    }
    pinio__fmem_release(L->fm, L->plan->nfiles);
    free(L->fm);
    free(L->data);
    free(L->first_mem);
    free(L->hex);
    pinio_plan_free(L->plan);
}
