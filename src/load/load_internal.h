/* The resident loader's stages (src/load/), each in its own file filling its
 * own part of the report:
 *
 *   load.c        pinio_load(): plan -> arena -> execute -> verify -> checkpoint
 *   arena.c       the destination: one NUMA-placed arena, faulted ahead of the
 *                 reads, placement checked and locked after them  (report.memory)
 *   verify.c      SHA-256 of each file while its bytes land      (report.verified)
 *   checkpoint.c  tensors as views of the arena, headers, accessors (report.misaligned)
 *   report.c      the plan's part of the report and its texts    (report.cache)
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

/* ---- arena.c ---------------------------------------------------------- */

typedef struct pinio__faulter {
    uint8_t *base;
    size_t len;
    _Atomic bool stop;
    bool running;
    pthread_t thread;
} pinio__faulter;

typedef struct pinio__arena {
    pinio_pool *pool;
    pinio_view view;        /* the arena; the checkpoint takes it over */
    uint8_t *base;
    pinio__faulter faulter;
    struct pinio__verify *verify; /* fed as reads land; NULL without --verify */
} pinio__arena;

/* Maps the arena for `plan` on the node `opts` asks for (AUTO: the first
 * file's device) and starts faulting it in ahead of the reads. Fills
 * rep->arena_bytes and rep->node. */
int pinio__arena_create(pinio__arena *a, const pinio_plan *plan, const pinio_load_opts *opts,
                        pinio_load_report *rep, pinio_diag *diag);

/* The destination: a read lands at base + dest_offset. */
extern const pinio_dest_ops pinio__arena_dest;

/* After the reads: stops the faulter, checks placement, locks the arena
 * (when RLIMIT_MEMLOCK allows). Fills rep->node_verified, locked, memory. */
void pinio__arena_settle(pinio__arena *a, pinio_load_report *rep);

/* Releases the engine-side state (the pool); the view is kept, or released
 * too when `keep_view` is false. */
void pinio__arena_close(pinio__arena *a, bool keep_view);

/* ---- verify.c --------------------------------------------------------- */

typedef struct pinio__verify pinio__verify;

/* Starts hashing every file of `plan` as its bytes land in `arena`. */
int pinio__verify_start(pinio__verify **out, const pinio_plan *plan, const uint8_t *arena);

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
 * shapes and metadata point into the headers; the plan is freed next) and
 * the arena's view (zeroed in `*arena`); `sha_hex` (NULL without --verify)
 * is copied. Counts misaligned tensors into `rep`, then keeps a copy of it.
 * On failure (-ENOMEM) nothing is taken. */
int pinio__checkpoint_build(pinio_checkpoint **out, pinio_plan *plan, pinio_view *arena,
                            char (*sha_hex)[65], pinio_load_report *rep);

/* ---- report.c --------------------------------------------------------- */

/* Appends to a NUL-terminated buffer, truncating silently: report lines. */
void pinio__appendf(char *buf, size_t size, const char *fmt, ...) PINIO_PRINTF(3, 4);

/* The report's plan and cache parts. */
void pinio__report_plan(const pinio_plan *plan, pinio_load_report *rep);

#endif
