/* The rates behind #PINIO_MEMORY_AUTO's rule for a cold file (touch.c):
 * how fast fresh memory takes its first touch here, and how fast the
 * storage is expected to read. Used by modes.c; load.c notes each load's
 * measured read rate. */
#ifndef PINIO_SRC_LOAD_TOUCH_INTERNAL_H
#define PINIO_SRC_LOAD_TOUCH_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "pinio/load.h"

/* A load's selected bytes from which the first touch is measured when
 * this process has not measured it yet (the probe's 40 ms at most is a
 * few percent of such a load). */
#define PINIO__TOUCH_MIN_BYTES ((uint64_t)256 << 20)

/* The two figures compared, and where each came from. */
typedef struct pinio__rates {
    double touch_gbps;       /* first touch of fresh huge-page-advised memory */
    const char *touch_from;  /* "given" (pinio_load_opts::first_touch_gbps) or "measured" */
    double storage_gbps;     /* expected read rate of the storage */
    const char *storage_from; /* "given", "last read" or "assumed" */
} pinio__rates;

/* Fills `*r` for a cold file of a load of `bytes` selected bytes under `o`.
 * Returns false (no figures) when the first touch is neither given nor
 * measured yet and `bytes` is below PINIO__TOUCH_MIN_BYTES, or when the
 * probe could not map memory. The probe runs once per process. */
bool pinio__rates_get(const pinio_load_opts *o, uint64_t bytes, pinio__rates *r);

/* A finished load's cold read rate, remembered for the next decision of
 * this process: a mapped fill's (mapped bytes over fill seconds) or an
 * O_DIRECT read's (read bytes over I/O seconds), from 64 MiB up. */
void pinio__storage_note(const pinio_load_report *rep);

#endif
