/* Small text files a user names on the command line (a fio job file, a
 * --sha256-file list): read whole, bounded, never blocking on a FIFO. */
#ifndef PINIO_CLI_TEXTFILE_H
#define PINIO_CLI_TEXTFILE_H

#include <stddef.h>

/**
 * Reads `path`, a regular file or a pipe, into a NUL-terminated malloc'ed
 * `*out` of `*len` bytes (a NUL inside stays: the caller decides).
 * @return 0 (`*out` owned by the caller, also when `*len` is 0), or -errno
 *         with nothing to free: -EINVAL for a device or a socket (/dev/zero
 *         would be read without end), -EISDIR, -EFBIG above `max` bytes,
 *         -ENOMEM, or open's and read's own.
 */
int cli_text_read(const char *path, size_t max, char **out, size_t *len);

#endif
