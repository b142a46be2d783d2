/* The resident loader's stages (src/load/), each in its own file filling its
 * own part of the report:
 *
 *   load.c        pinio_load(): plan -> modes -> map / arena -> execute -> verify
 *                 -> realign -> checkpoint
 *   modes.c       pinned or mapped, per file, and why             (report.modes)
 *   mapped.c      mapped files: page cache filled, mapped, checked (report.mapped_bytes)
 *   fill.c        cold mapped files: read ahead at depth first, or not
 *   touch.c       first touch of fresh memory against the storage's rate:
 *                 the figures modes.c's cold rule compares (touch_internal.h)
 *   arena.c       the destination: one NUMA-placed arena (or a kept one), faulted
 *                 ahead of the reads, placement checked and locked after them
 *                 (its own header, arena_internal.h: load.c uses it, never the
 *                 other way)                                     (report.memory)
 *   coop.c        node-local sharing: a pinned file read once per node, into a
 *                 /dev/shm segment the node's other loads map     (report.share)
 *                 (its own header, coop_internal.h)
 *   verify.c      SHA-256 of each file while its bytes land      (report.verified)
 *   checkpoint.c  tensors as views of the arena, headers, accessors (report.misaligned)
 *   report.c      the plan's part of the report, the cache line    (report.cache)
 */
#ifndef PINIO_SRC_LOAD_LOAD_INTERNAL_H
#define PINIO_SRC_LOAD_LOAD_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinio/load.h"
#include "pinio/pool.h"
#include "src/load/hash_internal.h"
#include "src/load/plan_internal.h"

/* ---- fill.c ----------------------------------------------------------- */

/* How a cold mapped file's page cache is filled before its populate. */
typedef struct pinio__fill {
    bool ahead;                /* readahead(2) at depth first; else the populate alone */
    uint64_t window;           /* ahead: bytes per readahead(2) call (the file's window) */
    char why[64];              /* e.g. "fuse, 128 KiB windows", "a local file system" */
} pinio__fill;

/* Decides how file `fd`'s page cache is filled (pinio_mapped_fill's rule). */
void pinio__fill_decide(int fd, pinio_mapped_fill policy, pinio__fill *out);

/* Reads [lo, hi) of `fd` ahead into the page cache when `f->ahead`; a
 * hint: errors leave the rest to the populate. */
void pinio__fill_run(int fd, uint64_t lo, uint64_t hi, const pinio__fill *f);

/* ---- faulter.c -------------------------------------------------------- */

/* Fresh memory faulted in on a thread of its own ahead of the reads
 * (faulter.c): with MADV_POPULATE_WRITE, safe while reads land in the same
 * pages; the reads then find the pages there instead of each faulting and
 * zeroing its own on the engine's thread. Used by the arena and by a
 * node-local share's private memory (coop.c). */
typedef struct pinio__faulter {
    uint8_t *base;
    size_t len;
    _Atomic bool stop;
    bool running;
    pthread_t thread;
} pinio__faulter;

/* Starts faulting [base, base + len) in (nothing where it is too small to
 * gain or there is one CPU); pinio__faulter_stop() joins it. */
void pinio__faulter_start(pinio__faulter *f, uint8_t *base, size_t len);
void pinio__faulter_stop(pinio__faulter *f);

/* ---- modes.c ---------------------------------------------------------- */

/* Where one file's tensors live, decided before any data I/O. */
typedef struct pinio__fmem {
    pinio_memory_mode mode;    /* PINNED or MAPPED */
    char why[112];
    bool has_reads;            /* the plan reads something of this file */
    uint64_t dest_lo, dest_hi; /* pinned: the plan's destination range of its reads */
    uint64_t arena_off;        /* pinned: where dest_lo lands in the arena */
    uint64_t map_off;          /* mapped: file offset of the mapping (page aligned) */
    pinio__fill fill;          /* mapped and cold: how its page cache is filled */
    pinio_view map;            /* mapped: the mapping; empty when nothing is selected;
                                  shared (coop): the segment's data, file offset map_off */
    bool coop;                 /* pinned, read or mapped through coop.c, not the arena */
    bool map_pinned;           /* coop: the memory is locked (PINIO_PROP_PINNED) */
    bool shared_in;            /* coop: another process read it (nothing read here) */
    bool alone;                /* coop: read here into private memory, nobody asked for it */
    char share_why[96];        /* pinned and not coop: why not shared ("" when no reads) */
} pinio__fmem;

/* Decides each file's mode (pinio_memory_mode's AUTO rule, or what `o`
 * forces) into `fm[plan->nfiles]` and lays the pinned files out back to
 * back in the arena. Returns the arena bytes the pinned files need
 * (tensor_align slack included). */
uint64_t pinio__modes_decide(const pinio_plan *plan, const pinio_load_opts *o, pinio__fmem *fm);

/* The report's mode line and counts. */
void pinio__modes_report(const pinio_plan *plan, const pinio__fmem *fm, pinio_load_report *rep);

/* ---- mapped.c --------------------------------------------------------- */

/* Maps every MAPPED file of `plan` (cold ones read into the page cache
 * first; `priv`: private and writable, copy-on-write), then checks each is still the file that was validated
 * (PINIO_ECHANGED otherwise: no mapped byte is touched before that).
 * Fills rep->mapped_bytes, fill_seconds. On failure the mappings made are
 * released by pinio__fmem_release(). */
int pinio__map_files(pinio_plan *plan, pinio__fmem *fm, bool lock, bool priv, pinio_load_report *rep,
                     pinio_diag *diag);

/* Releases the mappings still held in `fm`. */
void pinio__fmem_release(pinio__fmem *fm, size_t n);

/* ---- verify.c --------------------------------------------------------- */

typedef struct pinio__verify pinio__verify;

/* Starts hashing every file of `plan` as its bytes land: file f's first
 * read at `first_mem[f]` (NULL: file f is not read into memory, its bytes
 * are read again through the plan's descriptor). */
int pinio__verify_start(pinio__verify **out, const pinio_plan *plan,
                        const uint8_t *const *first_mem);

/* Read `r` of the plan has landed. */
void pinio__verify_landed(pinio__verify *v, const pinio_plan_read *r);

/* Every read landed: finishes the digests, compares them with the
 * expected ones, writes them as hex to `hex[i]` (65 bytes each) and frees
 * `v`. Fills rep->verified and verify_seconds. */
int pinio__verify_finish(pinio__verify *v, const pinio_plan *plan, const pinio_load_opts *opts,
                         char (*hex)[65], pinio_load_report *rep, pinio_diag *diag);

/* The load failed: stops the hasher and frees `v`. NULL is a no-op. */
void pinio__verify_abort(pinio__verify *v);

/* ---- checkpoint.c ----------------------------------------------------- */

/* Builds the checkpoint: takes the plan's headers and paths (tensor names,
 * shapes and metadata point into the headers; the plan is freed next),
 * a reference on the arena (cloned when any file is pinned) and each mapped
 * file's mapping (moved out of `fm`); tensor i's bytes are at
 * `tensor_data[i]`. `sha_hex` (NULL without --verify) is copied. Counts
 * misaligned tensors into `rep`, then keeps a copy of it. On failure
 * (-ENOMEM) nothing is taken. */
int pinio__checkpoint_build(pinio_checkpoint **out, pinio_plan *plan, const pinio_view *arena,
                            pinio__fmem *fm, const uint8_t *const *tensor_data,
                            char (*sha_hex)[65], pinio_load_report *rep);
/* Records the load's time to ready (pinio_load_report::ready_seconds) in
 * the checkpoint's report: known only once pinio_load() has released what
 * the checkpoint does not keep, after the checkpoint is built. */
void pinio__checkpoint_ready(pinio_checkpoint *cp, double seconds);

/* ---- report.c --------------------------------------------------------- */

/* Appends to a NUL-terminated buffer, truncating silently: report lines. */
void pinio__appendf(char *buf, size_t size, const char *fmt, ...) PINIO_PRINTF(3, 4);

/* The report's plan part: counts and sizes. */
void pinio__report_plan(const pinio_plan *plan, pinio_load_report *rep);

/* The report's cache line and files_filled, once each file's mode is
 * decided: what happened to each file's pages (read with O_DIRECT, read
 * buffered, mapped from the page cache, or mapped with the page cache
 * filled by readahead) and why. */
void pinio__report_cache(const pinio_plan *plan, const pinio__fmem *fm, pinio_load_report *rep);

#endif
