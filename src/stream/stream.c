/*
 * The streaming mode: a plan executed into a ring of staging slots, each
 * landed read handed to a sink.
 *
 *   plan (segment = slot size: no read crosses a slot)
 *   -> ring: k slots from the pinned pool on the files' node, registered
 *      with io_uring by the execution (READ_FIXED into them)
 *   -> sink open (an accelerator sink registers the slots with its driver
 *      here, after io_uring: never driver memory handed to io_uring)
 *   -> execute: claim = the read's window in a slot; landed = sink chunk
 *   -> sink finish -> close
 *
 * Slots follow the plan's destination layout: the destination is cut into
 * windows of slot_size bytes, and a read lands at its offset within its
 * window, in the slot that holds that window. Reads sharing a window share
 * a slot (small tensors do not each take a slot), and every read keeps the
 * alignment the plan gave it, so O_DIRECT lands straight in the slot. A
 * new window takes the next slot round the ring, once the sink is done
 * with it (slot_wait).
 *
 * Why batches of at most k reads (k/2 for a sink that copies
 * asynchronously, and with --verify, whose hashing thread reads the slots
 * after they landed): the executor claims every read of a batch before it
 * reads any, and lands them only after the batch. A batch of n reads opens
 * at most n new windows, so with n <= k the slot a claim reopens never
 * holds a read of the same batch (which could not land before the claim
 * returns: a deadlock). With k/2, half the ring is read while the sink
 * still copies from the other half. Objects, streamed rather than batched
 * (src/load/object.c), land each read as soon as it is in: at most k - 1
 * reads claimed and not landed (exec_opts_of).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pinio/pool.h"
#include "pinio/stream.h"
#include "src/base/clock.h"
#include "src/base/opts.h"
#include "src/stream/ring_internal.h"
#include "src/stream/verify_internal.h"

#define NO_WINDOW UINT64_MAX

typedef struct slot {
    uint8_t *base;
    uint64_t window;          /* window it holds, NO_WINDOW before first use */
    size_t claimed, landed;   /* reads of the current window */
    uint64_t vticket;         /* --verify: its last read's ticket (verify_internal.h) */
} slot;

typedef struct stream {
    const pinio_sink *sink;
    const void *cfg;
    void *priv;
    const pinio_plan *plan;
    slot *slots;
    unsigned k;
    size_t slot_size;
    int cur;                  /* slot being filled, -1 before the first read */
    pinio_stream_report *rep;
    pinio__sverify *verify;   /* NULL without --verify */
    pinio_diag *diag;
} stream;

void pinio_stream_opts_init(pinio_stream_opts *opts, size_t size)
{
    pinio_stream_opts d;
    memset(&d, 0, sizeof(d));
    d.slot_size = PINIO_STREAM_SLOT_DEFAULT;
    d.slots = PINIO_STREAM_SLOTS_DEFAULT;
    d.node = PINIO_NODE_AUTO;
    d.cache = PINIO_CACHE_AUTO;
    d.direct = PINIO_DIRECT_AUTO;
    d.backend = PINIO_BACKEND_AUTO;
    pinio__opts_init(opts, size, &d, sizeof(d));
}

/* Until neither the sink nor the hashing reads slot `i` any more. */
static int sink_wait(stream *s, unsigned i, bool count)
{
    slot *sl = &s->slots[i];
    if (sl->window == NO_WINDOW)
        return 0;
    int rc = 0;
    if (s->sink->slot_wait) {
        double t0 = pinio__now_s();
        rc = s->sink->slot_wait(s->priv, i, s->diag);
        s->rep->sink_seconds += pinio__now_s() - t0;
        s->rep->slot_waits += count;
    }
    /* Whatever the sink answered: the ring may be freed next. */
    if (s->verify && sl->vticket) {
        double t0 = pinio__now_s();
        int w = pinio__sverify_wait(s->verify, sl->vticket, rc == 0 ? s->diag : NULL);
        rc = rc ? rc : w;
        s->rep->verify_seconds += pinio__now_s() - t0;
        sl->vticket = 0;
    }
    return rc;
}

static int stream_claim(void *ctx, size_t i, const pinio_plan_read *r, void **mem)
{
    stream *s = ctx;
    uint64_t win = r->dest_offset / s->slot_size;
    size_t off = (size_t)(r->dest_offset % s->slot_size);
    if (s->cur < 0 || s->slots[s->cur].window != win) {
        unsigned next = s->cur < 0 ? 0 : ((unsigned)s->cur + 1) % s->k;
        slot *n = &s->slots[next];
        if (n->claimed != n->landed) {
            /* The batch bound above makes this unreachable; refuse rather
             * than overwrite bytes still on their way to the sink. */
            pinio_diag_set(s->diag, -EDEADLK,
                           "stream: read %zu needs slot %u, which holds reads not yet landed", i,
                           next);
            return -EDEADLK;
        }
        int rc = sink_wait(s, next, true);
        if (rc < 0)
            return rc;
        n->window = win;
        n->claimed = n->landed = 0;
        s->cur = (int)next;
    }
    slot *c = &s->slots[s->cur];
    c->claimed++;
    *mem = c->base + off;
    return 0;
}

static int stream_landed(void *ctx, size_t i, const pinio_plan_read *r, void *mem)
{
    stream *s = ctx;
    uint64_t win = r->dest_offset / s->slot_size;
    unsigned at = 0;
    /* The read's slot: the one holding its window, searched from the
     * current one backwards (a batch spans at most k slots). */
    for (unsigned d = 0; d < s->k; d++) {
        at = ((unsigned)s->cur + s->k - d) % s->k;
        if (s->slots[at].window == win)
            break;
    }
    s->slots[at].landed++;
    pinio_sink_chunk c = { .read = i, .r = r, .file = r->file, .file_offset = r->offset,
                           .data = mem, .len = (size_t)r->need, .slot = at };
    double t0 = pinio__now_s();
    int rc = s->sink->chunk(s->priv, &c, s->diag);
    s->rep->sink_seconds += pinio__now_s() - t0;
    /* After chunk, so that an asynchronous copy starts first; the slot is
     * not reused before its hashing is done (sink_wait). */
    if (rc == 0 && s->verify) {
        t0 = pinio__now_s();
        uint64_t ticket = 0;
        rc = pinio__sverify_landed(s->verify, r, mem, &ticket, s->diag);
        if (ticket)
            s->slots[at].vticket = ticket;
        s->rep->verify_seconds += pinio__now_s() - t0;
    }
    return rc;
}

static const pinio_dest_ops stream_dest = {
    .size = sizeof(pinio_dest_ops),
    .claim = stream_claim,
    .landed = stream_landed,
};

static int check_opts(const pinio_stream_opts *o, const pinio_sink *sink, pinio_diag *diag)
{
    int rc = pinio__ring_check(o->slot_size, o->slots, "stream", diag);
    if (rc < 0)
        return rc;
    if (!sink || !sink->open || !sink->chunk || !sink->name) {
        pinio_diag_set(diag, -EINVAL, "stream: a sink needs a name, open and chunk");
        return -EINVAL;
    }
    return 0;
}

/* Every file of the plan is an object (s3://, gs://, az://). */
static bool all_objects(const pinio_plan *plan)
{
    pinio_plan_info pi;
    pinio_plan_get_info(plan, &pi);
    bool objects = pi.files > 0;
    for (size_t i = 0; i < pi.files && objects; i++)
        objects = pinio_plan_file_at(plan, i)->object;
    return objects;
}

/* The ring: one pool on the files' node (or the sink's device's), a
 * region per slot (ring.c). Registration with io_uring is left to the
 * execution (its `regions`), which owns the ring the reads go through. */
static int ring_create(stream *s, pinio_pool **pool, pinio_view *views, const pinio_plan *plan,
                       const pinio_stream_opts *o, pinio_diag *diag)
{
    pinio_pool_opts po;
    pinio_pool_opts_default(&po);
    /* A sink that feeds a device wants the staging on the device's node
     * (its DMA reads the slots), before the storage's. */
    int want = o->node == PINIO_NODE_AUTO && s->sink->prefer_node ? s->sink->prefer_node(s->cfg)
                                                                  : -1;
    if (o->node >= 0 || want >= 0) {
        po.placement = PINIO_POOL_NODE;
        po.node = o->node >= 0 ? o->node : want;
    } else if (o->node == PINIO_NODE_AUTO && pinio_plan_file_at(plan, 0) &&
               !pinio_plan_file_at(plan, 0)->object) { /* an object comes by the NIC */
        po.placement = PINIO_POOL_FILE_NODE;
        po.file = pinio_plan_file_at(plan, 0)->path;
    }
    /* Objects: the ring's pages are faulted by the bytes that land in
     * them, not all before the first request. No read reaches them by
     * O_DIRECT or READ_FIXED (the client copies each answer in), so none
     * needs them present; faulting the 256 MiB ring of an s3:// stage
     * ahead took 0.03 to 2.1 s on the shared VM with every ranged GET
     * waiting behind it, and faulted a ring larger than the object whole
     * (doc/measurements.md, "Issue 38: S3 stage and load against boto3
     * (after)"). */
    if (all_objects(plan))
        po.prefault = false;
    uint8_t **bases = calloc(o->slots, sizeof(*bases));
    if (!bases)
        return -ENOMEM;
    int rc = pinio__ring_create(pool, views, bases, o->slot_size, o->slots, 0, &po, "stream",
                                "choose fewer or smaller slots (--staging SIZExK)",
                                &s->rep->node, diag);
    for (unsigned i = 0; rc == 0 && i < o->slots; i++) {
        s->slots[i].base = bases[i];
        s->slots[i].window = NO_WINDOW;
    }
    free(bases);
    return rc;
}


static void exec_opts_of(const pinio_stream_opts *o, const stream *s,
                         const pinio_mem_region *regions, pinio_exec_opts *eo)
{
    pinio_exec_opts_default(eo);
    eo->queue_depth = o->queue_depth;
    eo->direct = o->direct;
    eo->backend = o->backend;
    eo->progress = o->progress;
    eo->progress_ctx = o->progress_ctx;
    eo->stop = o->stop;
    eo->stop_ctx = o->stop_ctx;
    eo->batch_bytes = UINT64_MAX; /* a batch is bounded by reads (see the banner) */
    /* Hashing on its thread (--verify) reads the slots after landed too. */
    bool async = s->sink->slot_wait || s->verify;
    eo->batch_reads = async ? (o->slots / 2 ? o->slots / 2 : 1) : o->slots;
    /* Objects are streamed (src/load/object.c): each read lands as soon as
     * it and those before it are in, so the reads claimed and not landed
     * hold at most k - 1 slots and a claim never reopens one of theirs;
     * the sink's slot that a claim waits for is the oldest, not half the
     * ring. --verify's thread rereads objects' gaps and the stream waits
     * for it, so with it the objects go in batches (object_batches). */
    eo->object_batches = s->verify != NULL;
    if (all_objects(s->plan) && !s->verify)
        eo->batch_reads = o->slots - 1;
    eo->regions = regions;
    eo->nregions = o->slots;
}

/* The sink from open to close, around the execution. */
static int run_sink(stream *s, pinio_plan *plan, const void *cfg, const pinio_stream_opts *o,
                    pinio_diag *diag)
{
    uint8_t **bases = calloc(o->slots, sizeof(*bases));
    pinio_mem_region *regions = calloc(o->slots, sizeof(*regions));
    int rc = bases && regions ? 0 : -ENOMEM;
    for (unsigned i = 0; rc == 0 && i < o->slots; i++) {
        bases[i] = s->slots[i].base;
        regions[i] = (pinio_mem_region){ .addr = bases[i], .len = o->slot_size };
    }
    pinio_sink_setup su = { .plan = plan, .slots = bases, .nslots = o->slots,
                            .slot_size = o->slot_size, .node = s->rep->node };
    if (rc == 0) {
        rc = s->sink->open(s->priv, cfg, &su, diag);
        if (rc < 0 && diag && diag->code == 0)
            pinio_diag_set(diag, rc, "the %s sink failed to open: %s", s->sink->name,
                           pinio_strerror(rc));
        if (rc < 0) {
            free(bases);
            free(regions);
            return rc;
        }
    }
    if (rc == 0) {
        pinio_exec_opts eo;
        exec_opts_of(o, s, regions, &eo);
        pinio_exec_report er;
        rc = pinio_plan_execute(plan, &stream_dest, s, &eo, &er, diag);
        if (rc == 0) {
            s->rep->read_bytes = er.read_bytes;
            s->rep->io_seconds = er.io_seconds;
            s->rep->registered = er.backend == PINIO_BACKEND_FIXED_DIRECT;
            memcpy(s->rep->io_path, er.io_path, sizeof(s->rep->io_path));
        }
    }
    /* Every slot drained before finish, and before the ring goes away
     * whatever happened: a copy may still read from it. (cur is -1 when
     * nothing was read: the loop then starts at slot 0.) */
    for (unsigned d = 1; d <= o->slots; d++) { /* oldest first, as they were filled */
        int w = sink_wait(s, (unsigned)(s->cur + (int)d) % o->slots, false);
        if (rc == 0)
            rc = w;
    }
    /* Before finish: a file that does not match is never published. */
    if (rc == 0 && s->verify) {
        double t0 = pinio__now_s();
        rc = pinio__sverify_finish(s->verify, o, s->rep, diag);
        s->rep->verify_seconds += pinio__now_s() - t0;
    }
    if (rc == 0 && s->sink->finish) {
        double t0 = pinio__now_s();
        rc = s->sink->finish(s->priv, diag);
        s->rep->sink_seconds += pinio__now_s() - t0;
    }
    if (rc < 0 && diag && diag->code == 0)
        pinio_diag_set(diag, rc, "the %s sink failed: %s", s->sink->name, pinio_strerror(rc));
    if (s->sink->close)
        s->sink->close(s->priv, rc == 0);
    free(bases);
    free(regions);
    return rc;
}

int pinio_stream(const char *const *paths, size_t npaths, const pinio_stream_opts *opts,
                 const pinio_sink *sink, const void *cfg, pinio_stream_report *rep,
                 pinio_diag *diag)
{
    pinio_stream_opts o;
    pinio_stream_opts_default(&o);
    int rc = pinio__opts_copy(&o, sizeof(o), opts, "pinio_stream options", diag);
    if (rc < 0)
        return rc;
    if (!paths || !npaths || (o.nfilters && !o.filters) || (o.nslices && !o.slices) ||
        (o.nsplit && !o.split) || (o.verify && o.nexpected && !o.expected_sha256)) {
        pinio_diag_set(diag, -EINVAL, "pinio_stream: %s",
                       !npaths ? "no input paths" : "invalid arguments");
        return -EINVAL;
    }
    if ((rc = check_opts(&o, sink, diag)) < 0)
        return rc;
    double t0 = pinio__now_s();
    pinio_stream_report local;
    if (!rep)
        rep = &local;
    memset(rep, 0, sizeof(*rep));
    rep->slots = o.slots;
    rep->slot_size = o.slot_size;
    rep->ring_bytes = (uint64_t)o.slots * o.slot_size;
    rep->node = -1;

    pinio_plan_opts po;
    pinio_plan_opts_default(&po);
    po.filters = o.filters;
    po.nfilters = o.nfilters;
    po.filters_exact = o.filters_exact;
    po.cache = o.cache;
    po.direct = o.direct;
    po.segment = o.slot_size;
    po.slices = o.slices;
    po.nslices = o.nslices;
    po.split = o.split;
    po.nsplit = o.nsplit;
    po.rank = o.rank;
    po.world = o.world;
    po.max_overread = o.max_overread;
    po.stop = o.stop;
    po.stop_ctx = o.stop_ctx;
    pinio_plan *plan = NULL;
    rc = pinio_plan_create(&plan, paths, npaths, &po, diag);
    if (rc < 0)
        return rc;
    pinio_plan_info pi;
    pinio_plan_get_info(plan, &pi);
    /* Same rule as pinio_load(): a surplus or missing digest would check a
     * file against another file's digest, so any other count is refused
     * before a byte is read. */
    if (o.verify && (rc = pinio__digests_check(o.nexpected, pi.files,
                                                pinio_plan_file_at(plan, 0)->path, diag)) < 0) {
        pinio_plan_free(plan);
        return rc;
    }
    rep->files = pi.files;
    rep->tensors = pi.tensors;
    rep->bytes = pi.bytes;
    rep->reads = pi.reads;
    pinio_plan_get_slice_info(plan, &rep->slices);
    if (o.cache == PINIO_CACHE_COLD)
        rc = pinio_plan_drop_cache(plan, NULL, diag);

    stream s = { .sink = sink, .cfg = cfg, .plan = plan, .k = o.slots, .slot_size = o.slot_size,
                 .cur = -1, .rep = rep, .diag = diag };
    s.slots = calloc(o.slots, sizeof(*s.slots));
    pinio_view *views = calloc(o.slots, sizeof(*views));
    s.priv = calloc(1, sink->priv_size ? sink->priv_size : 1);
    pinio_pool *pool = NULL;
    if (rc == 0 && (!s.slots || !views || !s.priv))
        rc = -ENOMEM;
    if (rc == 0 && o.verify)
        rc = pinio__sverify_start(&s.verify, plan);
    if (rc == 0)
        rc = ring_create(&s, &pool, views, plan, &o, diag);
    if (rc == 0)
        rc = run_sink(&s, plan, cfg, &o, diag);
    pinio__sverify_free(s.verify); /* its thread is done with the slots */
    s.verify = NULL;
    pinio__ring_free(pool, views, views ? o.slots : 0);
    free(views);
    free(s.slots);
    free(s.priv);
    pinio_plan_free(plan);
    rep->seconds = pinio__now_s() - t0;
    if (rc < 0 && diag && diag->code == 0)
        pinio_diag_set(diag, rc, "stream failed: %s", pinio_strerror(rc));
    return rc;
}
