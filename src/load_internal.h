/* Internal pieces of the loader, reachable by white-box tests. */
#ifndef PINIO_SRC_LOAD_INTERNAL_H
#define PINIO_SRC_LOAD_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

/** True when `name` is selected by the filters (see pinio_load_opts::filters); n 0 = all. */
bool pinio__filter_match(const char *const *filters, size_t n, const char *name);

/**
 * Test hook: when set, called once per load after every header was read and
 * validated and before any data I/O, with the resolved file paths (at most
 * 64). Lets a test change a file underneath a load. NULL in normal use.
 */
extern void (*pinio__load_hook_after_headers)(void *ctx, const char *const *files, size_t n);
extern void *pinio__load_hook_ctx;

#endif
