/* fio's values as fio reads them: sizes, times, booleans, integers (the
 * job file reader's, tools/bench_jobfile.c). */
#ifndef PINIO_TOOLS_FIO_VALUES_H
#define PINIO_TOOLS_FIO_VALUES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* fio's size: N with k, m, g, t, p (optionally "b", e.g. "kb") in kb_base
 * units, and "ki"/"kib" in the other base. 0, -EINVAL or -ERANGE. */
int fio_size(const char *s, unsigned kb_base, uint64_t *out);
/* fio's time: N with us, ms, s, m, h, d (or usec, msec, sec, min); without
 * a unit, `unit_us` microseconds each. */
int fio_time_us(const char *s, uint64_t unit_us, uint64_t *out);
/* fio's boolean: no value or "1" is true, "0" false. */
int fio_bool(const char *v, bool *out);
/* A whole decimal or 0x integer. */
int fio_uint(const char *v, uint64_t *out);
/* Seconds from microseconds, as short as exact: "30", "0.5". */
void secs(char *buf, size_t len, uint64_t us);

#endif
