/*
 * LD_PRELOAD helper for callgrind runs of Python programs that import torch
 * (bench/py_load WHAT=callgrind).
 *
 * Debian's torch pulls in libhwy, whose hwy::platform timer functions run
 * RDTSCP at load time: valgrind 3.19 does not decode it and kills the
 * process with SIGILL. The preloaded definitions below take their place
 * (nothing measured depends on them).
 *
 * pinio_cg_start()/pinio_cg_stop(label), called through ctypes, zero the
 * counters and dump them: the dump holds exactly the instructions between
 * the two calls, so imports and setup are not counted.
 */
#include <stdint.h>
#include <time.h>
#include <valgrind/callgrind.h>

/* hwy::platform::TimerResolution(): ticks of the timer's resolution. */
uint64_t _ZN3hwy8platform15TimerResolutionEv(void);
uint64_t _ZN3hwy8platform15TimerResolutionEv(void)
{
    return 1;
}

/* hwy::platform::Now(): seconds, from the monotonic clock. */
double _ZN3hwy8platform3NowEv(void);
double _ZN3hwy8platform3NowEv(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void pinio_cg_start(void);
void pinio_cg_start(void)
{
    CALLGRIND_ZERO_STATS;
}

void pinio_cg_stop(const char *label);
void pinio_cg_stop(const char *label)
{
    CALLGRIND_DUMP_STATS_AT(label);
}
