/* Error names and messages. strerror() is avoided because it may use a shared
 * buffer and its wording varies by libc; pinio's messages must be stable so
 * the CLI and tests can rely on them. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "pinio/common.h"

/* The first block has pinio's own wording; the rest follows glibc's
 * strerrordesc_np() (lower-cased) for every other errno Linux defines (1 ..
 * 133 but 41 and 58, which are unused), so that no code the kernel returns
 * prints as "unknown error". A table rather than a call to libc: the text
 * stays the same under musl and across glibc releases. */
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
    X(EILSEQ, "invalid or incomplete byte sequence")                          \
    X(ESRCH, "no such process")                                               \
    X(ENOEXEC, "exec format error")                                           \
    X(ECHILD, "no child processes")                                           \
    X(ENOTBLK, "block device required")                                       \
    X(EXDEV, "invalid cross-device link")                                     \
    X(ENOTTY, "inappropriate ioctl for device")                               \
    X(ETXTBSY, "text file busy")                                              \
    X(EMLINK, "too many links")                                               \
    X(EDOM, "numerical argument out of domain")                               \
    X(EDEADLK, "resource deadlock avoided")                                   \
    X(ENOLCK, "no locks available")                                           \
    X(ENOTEMPTY, "directory not empty")                                       \
    X(ELOOP, "too many levels of symbolic links")                             \
    X(ENOMSG, "no message of desired type")                                   \
    X(EIDRM, "identifier removed")                                            \
    X(ECHRNG, "channel number out of range")                                  \
    X(EL2NSYNC, "level 2 not synchronized")                                   \
    X(EL3HLT, "level 3 halted")                                               \
    X(EL3RST, "level 3 reset")                                                \
    X(ELNRNG, "link number out of range")                                     \
    X(EUNATCH, "protocol driver not attached")                                \
    X(ENOCSI, "no CSI structure available")                                   \
    X(EL2HLT, "level 2 halted")                                               \
    X(EBADE, "invalid exchange")                                              \
    X(EBADR, "invalid request descriptor")                                    \
    X(EXFULL, "exchange full")                                                \
    X(ENOANO, "no anode")                                                     \
    X(EBADRQC, "invalid request code")                                        \
    X(EBADSLT, "invalid slot")                                                \
    X(EBFONT, "bad font file format")                                         \
    X(ENOSTR, "device not a stream")                                          \
    X(ENODATA, "no data available")                                           \
    X(ETIME, "timer expired")                                                 \
    X(ENOSR, "out of streams resources")                                      \
    X(ENONET, "machine is not on the network")                                \
    X(ENOPKG, "package not installed")                                        \
    X(EREMOTE, "object is remote")                                            \
    X(ENOLINK, "link has been severed")                                       \
    X(EADV, "advertise error")                                                \
    X(ESRMNT, "srmount error")                                                \
    X(ECOMM, "communication error on send")                                   \
    X(EPROTO, "protocol error")                                               \
    X(EMULTIHOP, "multihop attempted")                                        \
    X(EDOTDOT, "RFS specific error")                                          \
    X(EBADMSG, "bad message")                                                 \
    X(ENOTUNIQ, "name not unique on network")                                 \
    X(EBADFD, "file descriptor in bad state")                                 \
    X(EREMCHG, "remote address changed")                                      \
    X(ELIBACC, "can not access a needed shared library")                      \
    X(ELIBBAD, "accessing a corrupted shared library")                        \
    X(ELIBSCN, ".lib section in a.out corrupted")                             \
    X(ELIBMAX, "attempting to link in too many shared libraries")             \
    X(ELIBEXEC, "cannot exec a shared library directly")                      \
    X(ERESTART, "interrupted system call should be restarted")                \
    X(ESTRPIPE, "streams pipe error")                                         \
    X(EUSERS, "too many users")                                               \
    X(ENOTSOCK, "socket operation on non-socket")                             \
    X(EDESTADDRREQ, "destination address required")                           \
    X(EMSGSIZE, "message too long")                                           \
    X(EPROTOTYPE, "protocol wrong type for socket")                           \
    X(ENOPROTOOPT, "protocol not available")                                  \
    X(EPROTONOSUPPORT, "protocol not supported")                              \
    X(ESOCKTNOSUPPORT, "socket type not supported")                           \
    X(EPFNOSUPPORT, "protocol family not supported")                          \
    X(EAFNOSUPPORT, "address family not supported by protocol")               \
    X(EADDRINUSE, "address already in use")                                   \
    X(EADDRNOTAVAIL, "cannot assign requested address")                       \
    X(ENETDOWN, "network is down")                                            \
    X(ENETUNREACH, "network is unreachable")                                  \
    X(ENETRESET, "network dropped connection on reset")                       \
    X(ECONNABORTED, "software caused connection abort")                       \
    X(ECONNRESET, "connection reset by peer")                                 \
    X(ENOBUFS, "no buffer space available")                                   \
    X(EISCONN, "transport endpoint is already connected")                     \
    X(ENOTCONN, "transport endpoint is not connected")                        \
    X(ESHUTDOWN, "cannot send after transport endpoint shutdown")             \
    X(ETOOMANYREFS, "too many references: cannot splice")                     \
    X(ECONNREFUSED, "connection refused")                                     \
    X(EHOSTDOWN, "host is down")                                              \
    X(EHOSTUNREACH, "no route to host")                                       \
    X(EALREADY, "operation already in progress")                              \
    X(EINPROGRESS, "operation now in progress")                               \
    X(ESTALE, "stale file handle")                                            \
    X(EUCLEAN, "structure needs cleaning")                                    \
    X(ENOTNAM, "not a XENIX named type file")                                 \
    X(ENAVAIL, "no XENIX semaphores available")                               \
    X(EISNAM, "is a named type file")                                         \
    X(EREMOTEIO, "remote I/O error")                                          \
    X(EDQUOT, "disk quota exceeded")                                          \
    X(ENOMEDIUM, "no medium found")                                           \
    X(EMEDIUMTYPE, "wrong medium type")                                       \
    X(ENOKEY, "required key not available")                                   \
    X(EKEYEXPIRED, "key has expired")                                         \
    X(EKEYREVOKED, "key has been revoked")                                    \
    X(EKEYREJECTED, "key was rejected by service")                            \
    X(EOWNERDEAD, "owner died")                                               \
    X(ENOTRECOVERABLE, "state not recoverable")                               \
    X(ERFKILL, "operation not possible due to RF-kill")                       \
    X(EHWPOISON, "memory page has hardware error")

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

/* Messages quote names taken from files (tensor and shard names may hold
 * any character after JSON unescaping); keep the one-line promise. */
static void one_line(char *p)
{
    for (; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
}

static void diag_vset(pinio_diag *diag, int code, const char *path, uint64_t offset,
                      const char *fmt, va_list ap) PINIO_PRINTF(5, 0);

static void diag_vset(pinio_diag *diag, int code, const char *path, uint64_t offset,
                      const char *fmt, va_list ap)
{
    diag->code = code;
    diag->offset = offset;
    diag->index = PINIO_DIAG_NO_INDEX;
    size_t used = 0;
    if (path && *path) {
        snprintf(diag->path, sizeof(diag->path), "%s", path);
        int n = snprintf(diag->msg, sizeof(diag->msg), "%s: ", path);
        used = n < 0 ? 0 : (size_t)n < sizeof(diag->msg) ? (size_t)n : sizeof(diag->msg) - 1;
    } else {
        diag->path[0] = '\0';
    }
    vsnprintf(diag->msg + used, sizeof(diag->msg) - used, fmt, ap);
    one_line(diag->msg);
    one_line(diag->path);
}

void pinio_diag_set(pinio_diag *diag, int code, const char *fmt, ...)
{
    if (!diag)
        return;
    va_list ap;
    va_start(ap, fmt);
    diag_vset(diag, code, NULL, PINIO_DIAG_NO_OFFSET, fmt, ap);
    va_end(ap);
}

void pinio_diag_set_at(pinio_diag *diag, int code, const char *path, uint64_t offset,
                       const char *fmt, ...)
{
    if (!diag)
        return;
    va_list ap;
    va_start(ap, fmt);
    diag_vset(diag, code, path, offset, fmt, ap);
    va_end(ap);
}

void pinio_diag_set_index(pinio_diag *diag, size_t index)
{
    if (diag)
        diag->index = index;
}

void pinio_diag_relabel(pinio_diag *diag, const char *path)
{
    if (!diag)
        return;
    char rest[PINIO_DIAG_MSG_MAX];
    size_t k = strnlen(diag->path, sizeof(diag->path));
    /* The invariant of diag_vset: a non-empty path is the message's prefix. */
    const char *text = diag->msg;
    if (k && strncmp(diag->msg, diag->path, k) == 0 && diag->msg[k] == ':' && diag->msg[k + 1] == ' ')
        text = diag->msg + k + 2;
    snprintf(rest, sizeof(rest), "%s", text);
    int code = diag->code;
    uint64_t offset = diag->offset;
    size_t index = diag->index;
    pinio_diag_set_at(diag, code, path, offset, "%s", rest);
    diag->index = index;
}
