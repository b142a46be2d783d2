/*
 * The monotonic clock in seconds, for reports and progress: one definition
 * for every layer (a library-internal header of base, usable above it).
 */
#ifndef PINIO_SRC_BASE_CLOCK_H
#define PINIO_SRC_BASE_CLOCK_H

#include <time.h>

static inline double pinio__now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif
