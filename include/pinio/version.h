/**
 * @file version.h
 * @brief The single source of pinio's version.
 *
 * meson checks these three defines against its project version (meson.build
 * refuses to configure when they differ) and derives the shared library's
 * soname from them, so a release bumps both together and the headers, the
 * library, `pinio --version` and pinio.pc can never disagree.
 */
#ifndef PINIO_VERSION_H
#define PINIO_VERSION_H

#define PINIO_VERSION_MAJOR 0 /**< incompatible API/ABI changes */
#define PINIO_VERSION_MINOR 1 /**< compatible additions */
#define PINIO_VERSION_PATCH 0 /**< fixes only */

/** The version as one integer, e.g. 0x000100 for 0.1.0, for compile-time tests. */
#define PINIO_VERSION_NUMBER \
    ((PINIO_VERSION_MAJOR << 16) | (PINIO_VERSION_MINOR << 8) | PINIO_VERSION_PATCH)

/** @cond */
#define PINIO_VERSION_STR2_(x) #x
#define PINIO_VERSION_STR_(x) PINIO_VERSION_STR2_(x)
/** @endcond */

/** The headers' version as a string literal, e.g. "0.1.0" (pinio_version() is the library's). */
#define PINIO_VERSION_STRING                                                                   \
    PINIO_VERSION_STR_(PINIO_VERSION_MAJOR) "." PINIO_VERSION_STR_(PINIO_VERSION_MINOR) "." \
        PINIO_VERSION_STR_(PINIO_VERSION_PATCH)

#endif /* PINIO_VERSION_H */
