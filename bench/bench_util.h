/* Clocks shared by the bench/ programs (header-only, not installed). */
#ifndef PINIO_BENCH_UTIL_H
#define PINIO_BENCH_UTIL_H

#include <sys/resource.h>
#include <time.h>

/* Wall clock, seconds (CLOCK_MONOTONIC). */
static inline double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CPU time (user + sys) of this process so far, seconds. */
static inline double bench_cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

#endif
