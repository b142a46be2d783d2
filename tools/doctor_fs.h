/* pinio doctor's shared and network file system part (issue 40): the
 * mount that holds a path, from /proc/self/mountinfo, and the advice that
 * applies to NFS, Lustre, CephFS, SMB, GPFS, BeeGFS and FUSE mounts. */
#ifndef PINIO_TOOLS_DOCTOR_FS_H
#define PINIO_TOOLS_DOCTOR_FS_H

#include <stdbool.h>
#include <stddef.h>

#include "pinio/sys.h"

struct doctor_mount {
    bool found;
    char point[512];       /* mount point, unescaped */
    char fstype[64];       /* "nfs4", "lustre", "ceph", "fuse.sshfs", ... */
    char source[256];      /* "server:/export", "mgs@tcp:/fs", the FUSE daemon's name */
    char opts[1024];       /* the mount's options, then the super block's */
};

/* Fills `m` with the mount that holds `path` (the longest mount point
 * above its real path, the last mounted of equals), read from
 * ROOT/proc/self/mountinfo (`root` NULL: the live one). `m->found` false
 * when it cannot be read or nothing matches. */
void doctor_fs_mount(const char *path, const char *root, struct doctor_mount *m);

/* One line for the text output: type, source, mount point and the options
 * that matter for reads (rsize, nconnect, actimeo, ...). */
void doctor_fs_describe(const struct doctor_mount *m, char *buf, size_t n);

/* Calls `note` once per piece of advice for the mount's file system (none
 * for a local one); `fs` is statfs's view of the same path (NULL:
 * unknown). */
typedef void (*doctor_note_fn)(void *ctx, const char *code, const char *advice, const char *msg);
void doctor_fs_advise(const struct doctor_mount *m, const pinio_fs *fs, doctor_note_fn note,
                      void *ctx);

#endif
