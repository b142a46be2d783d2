/* Internal interface of pinio_file: the single read path of file windows. */
#ifndef PINIO_SRC_FILE_INTERNAL_H
#define PINIO_SRC_FILE_INTERNAL_H

#include <stdbool.h>
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

/** 0 when [off, off + len) lies within the size seen at open, else -ERANGE
 *  with `diag` naming the path, offset and size. */
int pinio__file_check_range(const pinio_file *f, uint64_t off, size_t len, pinio_diag *diag);

/** Returns PINIO_ECHANGED with `diag` saying the file ended at offset `at`,
 *  before the size seen at open (it shrank). */
int pinio__file_changed(const pinio_file *f, uint64_t at, pinio_diag *diag);

/** Read statistics of `f` (white-box tests): reads of windows of `f`
 *  (pinio__file_read() calls and file-I/O context requests) and bytes read. */
void pinio__file_stats(const pinio_file *f, uint64_t *calls, uint64_t *bytes);

/** Counts one read of `bytes` bytes of `f` done outside pinio__file_read(). */
void pinio__file_account(pinio_file *f, uint64_t bytes);

/** True when the caller holds the only reference to `f` (no one else can
 *  take one then: taking a reference needs one). */
bool pinio__file_sole_ref(const pinio_file *f);

/**
 * When `c` is a file controller whose window has not been materialized,
 * stores its file (not retained: `c` holds a reference) and the window's
 * file offset and returns true; otherwise returns false. A window that
 * becomes materialized concurrently still reads the file's bytes, which is
 * what copy_into would have read a moment earlier.
 */
bool pinio__file_ctrl_window(pinio_controller *c, pinio_file **file, uint64_t *offset);

/** The open descriptor (owned by `f`). */
int pinio__file_fd(const pinio_file *f);


#endif
