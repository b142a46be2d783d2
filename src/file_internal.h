/* Internal interface of pinio_file: the single read path of file windows. */
#ifndef PINIO_SRC_FILE_INTERNAL_H
#define PINIO_SRC_FILE_INTERNAL_H

#include <stdint.h>

#include "pinio/controller.h"

/**
 * Reads exactly `len` bytes at `off` of `f` into `dst`.
 *
 * Every byte a file window, a split of it or pinio_bytes_read() takes from
 * storage goes through here, so that the io_uring engine (uring/) can replace
 * this one function. Thread-safe (positional reads, no shared offset).
 *
 * @return 0; -ERANGE when [off, off + len) passes the size seen at open;
 *         PINIO_ECHANGED when the file ends early (it shrank since open);
 *         or the negative errno of the read. `diag` (may be NULL) names the
 *         path and the offset that failed.
 */
int pinio__file_read(pinio_file *f, uint64_t off, void *dst, size_t len, pinio_diag *diag);

/** Read statistics of `f` (white-box tests): calls of pinio__file_read() and bytes read. */
void pinio__file_stats(const pinio_file *f, uint64_t *calls, uint64_t *bytes);

/** The open descriptor (owned by `f`). */
int pinio__file_fd(const pinio_file *f);

/** Fills `diag` (when not NULL) with `code` and a printf-style message. */
void pinio__diag_set(pinio_diag *diag, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
