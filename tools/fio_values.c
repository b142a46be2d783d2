/* fio's values as fio reads them: sizes, times, booleans, integers (the
 * job file reader's, tools/bench_jobfile.c). */
#include "fio_values.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* A decimal or 0x integer at *s; advances *s. */
static int read_u64(const char **s, uint64_t *out)
{
    const char *p = *s;
    if (!isdigit((unsigned char)*p))
        return -EINVAL;
    errno = 0;
    char *e;
    unsigned long long x = strtoull(p, &e, 0);
    if (errno)
        return -ERANGE;
    *out = x;
    *s = e;
    return 0;
}

/* fio's size: N with k, m, g, t, p (optionally "b", e.g. "kb") in kb_base
 * units, and "ki"/"kib" in the other base (fio's compatibility mode with the
 * default kb_base=1024 reads 4KiB as 4000). */
int fio_size(const char *s, unsigned kb_base, uint64_t *out)
{
    uint64_t x;
    int rc = read_u64(&s, &x);
    if (rc)
        return rc;
    if (!*s || !strcasecmp(s, "b")) {
        *out = x;
        return 0;
    }
    const char *pos = strchr("kmgtp", tolower((unsigned char)*s));
    if (!pos)
        return -EINVAL;
    const char *rest = s + 1;
    bool iec = false;
    if (tolower((unsigned char)*rest) == 'i') {
        iec = true;
        rest++;
    }
    if (*rest && strcasecmp(rest, "b"))
        return -EINVAL;
    uint64_t base = (kb_base == 1024) != iec ? 1024 : 1000;
    for (int i = 0; i <= pos - "kmgtp"; i++) {
        if (x > UINT64_MAX / base)
            return -ERANGE;
        x *= base;
    }
    *out = x;
    return 0;
}

/* fio's time: N with us, ms, s, m, h, d (or the long forms usec, msec, sec,
 * min); without a unit, `unit_us` microseconds each. */
int fio_time_us(const char *s, uint64_t unit_us, uint64_t *out)
{
    static const struct { const char *sfx; uint64_t us; } units[] = {
        {"us", 1},          {"usec", 1},         {"ms", 1000},      {"msec", 1000},
        {"s", 1000000},     {"sec", 1000000},    {"m", 60000000},   {"min", 60000000},
        {"h", 3600000000u}, {"d", 86400000000u},
    };
    uint64_t x;
    int rc = read_u64(&s, &x);
    if (rc)
        return rc;
    uint64_t mult = unit_us;
    if (*s) {
        mult = 0;
        for (size_t i = 0; i < sizeof units / sizeof *units; i++)
            if (!strcasecmp(s, units[i].sfx))
                mult = units[i].us;
        if (!mult)
            return -EINVAL;
    }
    if (x > UINT64_MAX / mult)
        return -ERANGE;
    *out = x * mult;
    return 0;
}

int fio_bool(const char *v, bool *out)
{
    if (!v || !strcmp(v, "1"))
        *out = true;
    else if (!strcmp(v, "0"))
        *out = false;
    else
        return -EINVAL;
    return 0;
}

int fio_uint(const char *v, uint64_t *out)
{
    if (!v)
        return -EINVAL;
    int rc = read_u64(&v, out);
    return rc ? rc : *v ? -EINVAL : 0;
}

/* Seconds from microseconds, as short as exact: "30", "0.5". */
void secs(char *buf, size_t len, uint64_t us)
{
    if (us % 1000000 == 0)
        snprintf(buf, len, "%llu", (unsigned long long)(us / 1000000));
    else
        snprintf(buf, len, "%llu.%06llu", (unsigned long long)(us / 1000000),
                 (unsigned long long)(us % 1000000));
    char *dot = strchr(buf, '.');
    if (dot) {
        char *e = buf + strlen(buf);
        while (e[-1] == '0')
            *--e = 0;
    }
}
