/* Node-local sharing (coop.c): the pinned files that processes of one node
 * read once between them, each file's bytes in a segment of /dev/shm that
 * the others map (load.h, #pinio_share_policy, has the contract). */
#ifndef PINIO_SRC_LOAD_COOP_INTERNAL_H
#define PINIO_SRC_LOAD_COOP_INTERNAL_H

#include "src/load/load_internal.h"

/* Called by pinio__modes_decide() once each file's mode is decided, before
 * the arena is laid out: sets fm[f].coop for each pinned file the sharing
 * rule admits (those leave the arena), and fm[f].share_why for the pinned
 * files it does not. */
void pinio__coop_select(const pinio_plan *plan, const pinio_load_opts *o, pinio__fmem *fm);

/* Adds one execution's report to the load's (`*first`: none added yet). */
typedef void (*pinio__exec_tally_fn)(const pinio_exec_report *er, pinio_load_report *rep,
                                     bool *first);

/* Each coop file of `plan`, in the staggered order of `eo` (exec.c's
 * pinio__file_at; plan order when sequential): another process's complete
 * segment mapped (waiting while one is read), else read through the engine
 * (`eo`, its reads alone) into a segment of its own that others may map
 * (or, where the segment does not fit, into private memory, said in the
 * report). fm[f].map then holds the memory, map_off the file offset of its
 * first byte. Fills rep->files_shared, files_share_read, share_bytes and
 * the share line (every file's, coop or not), and tallies the reads.
 * On failure the views made stay in `fm` (pinio__fmem_release()), and a
 * segment this process was reading is removed. */
int pinio__coop_run(pinio_plan *plan, const pinio_load_opts *o, const pinio_exec_opts *eo,
                    pinio__fmem *fm, pinio__exec_tally_fn tally, bool *first,
                    pinio_load_report *rep, pinio_diag *diag);

/* After the arena settled: the memory line says where the shared files'
 * memory is, whether it is locked and why not. */
void pinio__coop_memory_line(const pinio_plan *plan, const pinio__fmem *fm,
                             pinio_load_report *rep);

#endif
