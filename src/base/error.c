/* Error names and messages. strerror() is avoided because it may use a shared
 * buffer and its wording varies by libc; pinio's messages must be stable so
 * the CLI and tests can rely on them. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "pinio/common.h"

#define PINIO_ERRNO_TABLE(X)                                                  \
    X(EPERM, "operation not permitted")                                       \
    X(ENOENT, "no such file or directory")                                    \
    X(EINTR, "interrupted system call")                                       \
    X(EIO, "input/output error")                                              \
    X(EBADF, "bad file descriptor")                                           \
    X(EAGAIN, "resource temporarily unavailable")                             \
    X(ENOMEM, "out of memory")                                                \
    X(EACCES, "permission denied")                                            \
    X(EFAULT, "bad address")                                                  \
    X(EBUSY, "device or resource busy")                                       \
    X(EEXIST, "file exists")                                                  \
    X(ENODEV, "no such device")                                               \
    X(ENOTDIR, "not a directory")                                             \
    X(EISDIR, "is a directory")                                               \
    X(EINVAL, "invalid argument")                                             \
    X(ENFILE, "too many open files in system")                                \
    X(EMFILE, "too many open files")                                          \
    X(EFBIG, "file too large")                                                \
    X(ENOSPC, "no space left on device")                                      \
    X(ESPIPE, "illegal seek")                                                 \
    X(EROFS, "read-only file system")                                         \
    X(EPIPE, "broken pipe")                                                   \
    X(ERANGE, "offset or range out of bounds")                                \
    X(ENAMETOOLONG, "file name too long")                                     \
    X(ENOSYS, "function not implemented by this kernel")                      \
    X(EOVERFLOW, "value too large (arithmetic overflow)")                     \
    X(ENOTSUP, "operation not supported")                                     \
    X(ECANCELED, "operation canceled")                                        \
    X(ETIMEDOUT, "timed out")                                                 \
    X(ENXIO, "no such device or address")                                     \
    X(E2BIG, "argument list too long")                                        \
    X(EILSEQ, "invalid or incomplete byte sequence")

const char *pinio_strerror(int err)
{
    if (err > 0)
        err = -err;
    switch (err) {
    case 0:
        return "success";
#define PINIO_MSG_(name, val, msg) \
    case (val):                    \
        return msg;
        PINIO_ERRNO_MAP(PINIO_MSG_)
#undef PINIO_MSG_
#define PINIO_ERRNO_MSG_(name, msg) \
    case -(name):                   \
        return msg;
        PINIO_ERRNO_TABLE(PINIO_ERRNO_MSG_)
#undef PINIO_ERRNO_MSG_
    default:
        return "unknown error";
    }
}

const char *pinio_err_name(int err)
{
    if (err > 0)
        err = -err;
    switch (err) {
    case 0:
        return "OK";
#define PINIO_NAME_(name, val, msg) \
    case (val):                     \
        return "PINIO_E" #name;
        PINIO_ERRNO_MAP(PINIO_NAME_)
#undef PINIO_NAME_
#define PINIO_ERRNO_NAME_(name, msg) \
    case -(name):                    \
        return #name;
        PINIO_ERRNO_TABLE(PINIO_ERRNO_NAME_)
#undef PINIO_ERRNO_NAME_
    default:
        return "unknown";
    }
}

void pinio_diag_set(pinio_diag *diag, int code, const char *fmt, ...)
{
    if (!diag)
        return;
    diag->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(diag->msg, sizeof(diag->msg), fmt, ap);
    va_end(ap);
    /* Messages quote names taken from files (tensor and shard names may hold
     * any character after JSON unescaping); keep the one-line promise. */
    for (char *p = diag->msg; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
}
