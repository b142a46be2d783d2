/* The one check before a large buffer is faulted in, for the layers above
 * base: the arena of a resident load and the ring of a stream ask it the
 * same way, so both refuse with the same reason instead of meeting the
 * OOM killer. */
#ifndef PINIO_SRC_BASE_MEM_H
#define PINIO_SRC_BASE_MEM_H

#include <stdint.h>

#include "pinio/common.h"

/** Whether `need` bytes fit in what pinio_mem_available() says may still
 *  be faulted in. Returns 0 (it fits, or nothing is known), or -ENOMEM with
 *  `diag` "WHAT needs N bytes but only M are available (SOURCE): ADVICE". */
int pinio__mem_check(uint64_t need, const char *what, const char *advice, pinio_diag *diag);

#endif
