/**
 * @file version.h
 * @brief The single source of pinio's version.
 *
 * meson reads these three defines to set the project version and the shared
 * library's soname, so a release bumps them here and nowhere else.
 */
#ifndef PINIO_VERSION_H
#define PINIO_VERSION_H

#define PINIO_VERSION_MAJOR 0 /**< incompatible API/ABI changes */
#define PINIO_VERSION_MINOR 1 /**< compatible additions */
#define PINIO_VERSION_PATCH 0 /**< fixes only */

/** The version as one integer, e.g. 0x000100 for 0.1.0, for compile-time tests. */
#define PINIO_VERSION_NUMBER \
    ((PINIO_VERSION_MAJOR << 16) | (PINIO_VERSION_MINOR << 8) | PINIO_VERSION_PATCH)

#endif /* PINIO_VERSION_H */
