/* Internal probes of src/sys.c, reachable by white-box tests. */
#ifndef PINIO_SRC_SYS_INTERNAL_H
#define PINIO_SRC_SYS_INTERNAL_H

#include <stdint.h>

/** The mincore fallback of pinio_file_residency(), forced (range must lie inside the file). */
int pinio__residency_mincore(int fd, uint64_t off, uint64_t len, uint64_t *cached);

#endif
