/*
 * The file layer's interface for the layers above bytes/ (not installed):
 * what a reader that bypasses pinio__file_read() (the io layer's ring reads)
 * needs to find a lazy window's file, check a range, report a short file and
 * keep the read statistics. The pread path itself stays in file_internal.h,
 * private to bytes/.
 */
#ifndef PINIO_SRC_BYTES_FILE_H
#define PINIO_SRC_BYTES_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinio/common.h"
#include "pinio/controller.h"

/** The open descriptor (owned by `f`). */
int pinio__file_fd(const pinio_file *f);

/** 0 when [off, off + len) lies within the size seen at open, else -ERANGE
 *  with `diag` naming the path, offset and size. */
int pinio__file_check_range(const pinio_file *f, uint64_t off, size_t len, pinio_diag *diag);

/** Returns PINIO_ECHANGED with `diag` saying the file ended at offset `at`,
 *  before the size seen at open (it shrank). */
int pinio__file_changed(const pinio_file *f, uint64_t at, pinio_diag *diag);

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

#endif
