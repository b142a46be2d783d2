/* Internal pieces of the loader, reachable by white-box tests. */
#ifndef PINIO_SRC_LOAD_INTERNAL_H
#define PINIO_SRC_LOAD_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "pinio/common.h"

/** True when `name` is selected by the filters (see pinio_load_opts::filters); n 0 = all. */
bool pinio__filter_match(const char *const *filters, size_t n, const char *name);

/**
 * Parses the index file image `data[0, len)` as if read from `path` (shard
 * paths resolve next to it; nothing is opened). For fuzzing and tests.
 * @return 0 with the number of weight_map entries and of distinct shards;
 *         PINIO_EFORMAT (diag names `path` and the byte) or -ENOMEM.
 *         Nothing stays allocated either way.
 */
int pinio__index_parse_buffer(const char *path, const char *data, size_t len, size_t *ntensors,
                              size_t *nshards, pinio_diag *diag);

/**
 * Test hook: when set, called once per load after every header was read and
 * validated and before any data I/O, with the resolved file paths (at most
 * 64). Lets a test change a file underneath a load. NULL in normal use.
 */
extern void (*pinio__load_hook_after_headers)(void *ctx, const char *const *files, size_t n);
extern void *pinio__load_hook_ctx;

#endif
