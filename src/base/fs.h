/* The file system an open file lives on, for the layers above base (the
 * public pinio_fs_probe() takes a path). */
#ifndef PINIO_SRC_BASE_FS_H
#define PINIO_SRC_BASE_FS_H

#include "pinio/sys.h"

/** pinio_fs_probe() of the file system holding open file `fd`.
 *  @return 0, or -errno of fstatfs(2). */
int pinio__fs_probe_fd(int fd, pinio_fs *out);

#endif
