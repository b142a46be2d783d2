/* Private interface of pinio_file inside bytes/: the single pread path of
 * file windows, and the read statistics white-box tests look at. What the
 * layers above may use is src/bytes/file.h (included here). */
#ifndef PINIO_SRC_FILE_INTERNAL_H
#define PINIO_SRC_FILE_INTERNAL_H

#include <stdint.h>

#include "pinio/controller.h"
#include "src/bytes/file.h"

/**
 * Reads exactly `len` bytes at `off` of `f` into `dst` with pread(2).
 *
 * Every byte a file window, a split of it or pinio_bytes_read() takes from
 * storage goes through here; the io layer's ring reads (fileio.h) are the
 * only other path, and they keep the same errors and statistics.
 * Thread-safe (positional reads, no shared offset).
 *
 * @return 0; -ERANGE when [off, off + len) passes the size seen at open;
 *         PINIO_ECHANGED when the file ends early (it shrank since open);
 *         or the negative errno of the read. `diag` (may be NULL) names the
 *         path and the offset that failed.
 */
int pinio__file_read(pinio_file *f, uint64_t off, void *dst, size_t len, pinio_diag *diag);

/** Read statistics of `f` (white-box tests): reads of windows of `f`
 *  (pinio__file_read() calls and file-I/O context requests) and bytes read. */
void pinio__file_stats(const pinio_file *f, uint64_t *calls, uint64_t *bytes);

#endif
