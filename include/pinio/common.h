/**
 * @file common.h
 * @brief Conventions shared by every pinio header: export macro, error codes,
 *        diagnostics, runtime version.
 *
 * Errors: every function that can fail returns 0 (or a non-negative count) on
 * success and a negative error code on failure. The codes are negated errno
 * values (-ENOMEM, -EINVAL, ...) plus the few pinio-specific codes below, which
 * lie outside the errno range. pinio never relies on errno to report an error
 * and never prints, exits or installs signal handlers: the caller decides.
 */
#ifndef PINIO_COMMON_H
#define PINIO_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "pinio/version.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(PINIO_BUILDING_LIBRARY) && defined(__GNUC__)
#define PINIO_API __attribute__((visibility("default")))
#else
#define PINIO_API
#endif

/**
 * pinio-specific error codes (negative, below every errno value).
 * X-macro: NAME, value, message.
 */
#define PINIO_ERRNO_MAP(X)                                                                 \
    X(WOULD_COPY, -4001, "operation would copy or materialize, and zero-copy was demanded") \
    X(FORMAT, -4002, "invalid file format")                                                 \
    X(CHANGED, -4003, "file changed while it was being read")                               \
    X(UNALIGNED, -4004, "memory or offset not aligned as required")                         \
    X(DIGESTS, -4005, "expected SHA-256 digests do not match the files in number")

/** The pinio-specific codes as constants: #PINIO_EWOULD_COPY, #PINIO_EFORMAT,
 *  #PINIO_ECHANGED, #PINIO_EUNALIGNED, #PINIO_EDIGESTS (see PINIO_ERRNO_MAP for
 *  their messages). */
enum pinio_error {
#define PINIO_ERR_ENUM_(name, val, msg) PINIO_E##name = (val),
    PINIO_ERRNO_MAP(PINIO_ERR_ENUM_)
#undef PINIO_ERR_ENUM_
};

/**
 * A one-line description of an error code returned by pinio.
 *
 * @param err a negative pinio or errno code (a positive errno is accepted too).
 * @return a static, NUL-terminated string; never NULL, also for unknown codes.
 *         Thread-safe (does not use strerror's shared buffer).
 */
PINIO_API const char *pinio_strerror(int err);

/**
 * The symbolic name of an error code ("ENOMEM", "PINIO_EFORMAT", ...).
 * @return a static string; "unknown" for codes pinio does not know.
 */
PINIO_API const char *pinio_err_name(int err);

/** Size of the message buffer in a #pinio_diag. */
#define PINIO_DIAG_MSG_MAX 512
/** Size of the path buffer in a #pinio_diag. */
#define PINIO_DIAG_PATH_MAX 256
/** pinio_diag::offset when the error is not about one file offset. */
#define PINIO_DIAG_NO_OFFSET UINT64_MAX
/** pinio_diag::index when the error is not about one element of the call's input. */
#define PINIO_DIAG_NO_INDEX SIZE_MAX

/**
 * An optional diagnostic filled by functions that can fail for a reason the
 * caller should be told: the same code as returned, one line of text, and
 * the facts as fields, so that a caller never parses the text to learn
 * which file, offset or request failed. Functions that take a
 * `pinio_diag *` accept NULL. Its content is defined only after the call
 * failed (`code` < 0).
 *
 * When `path` is not empty, `msg` starts with it followed by ": " (the
 * formatter keeps that invariant, and pinio_diag_relabel() relies on it).
 */
typedef struct pinio_diag {
    int code;                       /**< same value the function returned; 0 when ok */
    char msg[PINIO_DIAG_MSG_MAX];   /**< NUL-terminated, one line, no trailing newline */
    char path[PINIO_DIAG_PATH_MAX]; /**< the file the error is about; "" when none */
    uint64_t offset;                /**< file offset that failed; PINIO_DIAG_NO_OFFSET when none */
    /** Which element of the call's input failed (a request of a bulk read, an
     *  input file of a plan, ...), as the function documents;
     *  PINIO_DIAG_NO_INDEX when none. */
    size_t index;
} pinio_diag;

#if defined(__GNUC__)
#define PINIO_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define PINIO_PRINTF(fmt, args)
#endif

/**
 * Fills an optional diagnostic that is about no particular file:
 * `code`, a printf-formatted line (truncated to #PINIO_DIAG_MSG_MAX; line
 * breaks become spaces), `path` empty, `offset` and `index` none. Does
 * nothing when `diag` is NULL. pinio reports through it; callers may too.
 */
PINIO_API void pinio_diag_set(pinio_diag *diag, int code, const char *fmt, ...) PINIO_PRINTF(3, 4);

/**
 * Fills an optional diagnostic about file `path` (NULL: none) at `offset`
 * (#PINIO_DIAG_NO_OFFSET: none): `msg` is "PATH: " followed by the
 * formatted text; `index` none. The one formatter every layer uses.
 */
PINIO_API void pinio_diag_set_at(pinio_diag *diag, int code, const char *path, uint64_t offset,
                                 const char *fmt, ...) PINIO_PRINTF(5, 6);

/** Records which element of the call's input failed. NULL-safe. */
PINIO_API void pinio_diag_set_index(pinio_diag *diag, size_t index);

/**
 * Names the file differently: replaces `path` and the "PATH: " prefix of
 * `msg` (or adds one when there was no path), keeping the rest. For a layer
 * that knows a file by another name than the layer below it (a descriptor
 * reopened through /proc). NULL-safe.
 */
PINIO_API void pinio_diag_relabel(pinio_diag *diag, const char *path);

/**
 * Progress of a long operation (a load, a benchmark run, a generated
 * checkpoint), the one shape every pinio function with a progress callback
 * reports. Passed by pointer and only read during the call: later versions
 * may add fields at the end.
 */
typedef struct pinio_progress {
    uint64_t done_bytes;  /**< bytes moved so far (never decreases) */
    uint64_t total_bytes; /**< bytes to move in all; 0 when the operation is time-bound */
    uint64_t done_ops;    /**< I/O requests completed so far; 0 where the operation does not count them */
    double elapsed_s;     /**< seconds since the operation started */
    double total_s;       /**< planned duration of a time-bound operation, else 0 */
} pinio_progress;

/**
 * A progress callback: called on the thread that called the operation,
 * about as often as its documentation says, and once more at the end of a
 * successful operation with done_bytes == total_bytes. Return nonzero to
 * stop: the operation fails with -ECANCELED and undoes what it made (a
 * created file is removed).
 */
typedef int (*pinio_progress_fn)(void *ctx, const pinio_progress *p);

/**
 * A stop request, for the waits of an operation that no progress report
 * interrupts: an object store's retries and the backoff between them
 * (minutes, at worst), the listings and header reads of a plan. Polled on
 * the thread that called the operation, at least every 100 ms while it
 * waits. Return nonzero to stop: the operation fails with -ECANCELED, at
 * once, and undoes what it made, as after a progress callback's stop. For a
 * program's signal handler: it sets a flag, and this reads it (the library
 * installs no handler of its own). Must be cheap; must not call into pinio.
 */
typedef int (*pinio_stop_fn)(void *ctx);

/** The runtime library version as "MAJOR.MINOR.PATCH" (may differ from the headers'). */
PINIO_API const char *pinio_version(void);

/** The runtime library version as PINIO_VERSION_NUMBER computes it. */
PINIO_API unsigned pinio_version_number(void);

#ifdef __cplusplus
}
#endif

#endif /* PINIO_COMMON_H */
