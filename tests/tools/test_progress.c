/* The progress line's text (tools/progress.h): one style, at most 79
 * columns whatever the numbers, percentage, rate, ETA, IOPS. */
#include <criterion/criterion.h>
#include <string.h>

#include "progress.h"

static size_t fmt(char *b, const char *label, unsigned flags, pinio_progress pg)
{
    size_t n = cli_progress_format(b, 256, label, flags, &pg);
    cr_assert_eq(n, strlen(b));
    cr_assert_leq(n, CLI_PROGRESS_COLUMNS, "%zu columns: '%s'", n, b);
    return n;
}

Test(progress, bytes_rate_eta_percentage)
{
    char b[256];
    fmt(b, "load", 0, (pinio_progress){ .done_bytes = 500000000, .total_bytes = 1000000000,
                                        .elapsed_s = 2 });
    cr_assert(strstr(b, "load [") == b, "%s", b);
    cr_assert(strstr(b, " 50%"), "%s", b);
    cr_assert(strstr(b, "0.50 / 1.00 GB"), "%s", b);
    cr_assert(strstr(b, "0.25 GB/s"), "%s", b);
    cr_assert(strstr(b, "ETA 0:02"), "%s", b);
    cr_assert_null(strstr(b, "IOPS"), "%s", b);
}

Test(progress, iops_and_time_bound)
{
    char b[256];
    fmt(b, "bench", CLI_PROGRESS_IOPS,
        (pinio_progress){ .done_bytes = 3200000000ull, .done_ops = 104200, .elapsed_s = 5,
                          .total_s = 20 });
    cr_assert(strstr(b, " 25%"), "%s", b);
    cr_assert(strstr(b, "20.8k IOPS"), "%s", b);
    cr_assert(strstr(b, "ETA 0:15"), "%s", b);
}

Test(progress, never_wider_than_79_columns)
{
    char b[256];
    fmt(b, "stage", CLI_PROGRESS_IOPS,
        (pinio_progress){ .done_bytes = UINT64_MAX / 3, .total_bytes = UINT64_MAX,
                          .done_ops = UINT64_MAX, .elapsed_s = 1e-9 });
    fmt(b, "a-label-much-longer-than-any-command-name-would-ever-be-but-still-cut", 0,
        (pinio_progress){ .done_bytes = 1, .total_bytes = 2, .elapsed_s = 1 });
    /* no rate yet: the ETA is unknown, not a division by zero */
    fmt(b, "load", 0, (pinio_progress){ .total_bytes = 100 });
    cr_assert(strstr(b, "ETA --:--"), "%s", b);
    /* unknown total: no percentage, no bar */
    fmt(b, "load", 0, (pinio_progress){ .done_bytes = 2048, .elapsed_s = 1 });
    cr_assert_null(strchr(b, '%'), "%s", b);
    cr_assert_null(strchr(b, '['), "%s", b);
}

Test(progress, off_when_asked_or_not_a_terminal)
{
    cli_progress p;
    cli_progress_start(&p, "load", 0, true);
    cr_assert_not(cli_progress_active(&p));
    cli_progress_update(&p, &(pinio_progress){ .done_bytes = 1, .total_bytes = 2 });
    cli_progress_end(&p); /* nothing drawn, nothing to erase */
    cr_assert_eq(p.drawn, 0);
}
