/*
 * The options convention, one rule for every pinio_X_opts (dav1d's
 * Dav1dSettings, grown the way the kernel grows its extensible structs,
 * e.g. openat2's struct open_how):
 *
 *   - the struct starts with `size_t struct_size`, which
 *     pinio_X_opts_default() sets to sizeof(pinio_X_opts) as the caller's
 *     header saw it: it is a static inline function of the header that
 *     calls the exported pinio_X_opts_init(opts, sizeof(*opts)), so the
 *     library never writes past an older caller's smaller struct, and
 *     zeroes its padding (which an older struct's tail padding would
 *     otherwise carry, uninitialised, into a newer field);
 *   - a function taking options starts from its own defaults and copies the
 *     caller's first struct_size bytes over them. A program built against an
 *     older, smaller header keeps working: the fields it does not know keep
 *     their defaults. A program built against a newer, larger header works
 *     as long as the fields this library does not know are zero;
 *   - so a field added later must mean "default" when zero, and is added at
 *     the end.
 *
 * Library-internal (not installed): used by every layer above base/.
 */
#ifndef PINIO_SRC_BASE_OPTS_H
#define PINIO_SRC_BASE_OPTS_H

#include <stddef.h>

#include "pinio/common.h"

/**
 * Copies caller options over defaults. `dst` holds the library's defaults
 * (`size` bytes, struct_size first); `user` (NULL: keep the defaults) is the
 * caller's struct. `what` names the options in the diagnostic
 * ("pinio_load options").
 * @return 0 with dst->struct_size == size; -EINVAL when user->struct_size
 *         does not even cover the struct_size field; -E2BIG when it is
 *         larger than `size` and a byte past `size` is not zero (a field
 *         this library does not know is in use). `dst` keeps its defaults
 *         on failure.
 */
/**
 * The body of every pinio_X_opts_init(): `dst` (the caller's struct of
 * `size` bytes) receives the library's `defaults` (`dsize` bytes) up to
 * `size`, zeroes past them, and struct_size = `size`.
 */
void pinio__opts_init(void *dst, size_t size, const void *defaults, size_t dsize);

int pinio__opts_copy(void *dst, size_t size, const void *user, const char *what,
                     pinio_diag *diag);

/**
 * The rule of every `expected_sha256`/`nexpected` pair (load, stream): one
 * digest per input file in resolution order, or none. `first` names the
 * first file in the diagnostic.
 * @return 0 when `nexpected` is 0 or `nfiles`; else -EINVAL naming both
 *         counts (a surplus or missing digest would check a file against
 *         another file's digest).
 */
int pinio__digests_check(size_t nexpected, size_t nfiles, const char *first, pinio_diag *diag);

#endif
