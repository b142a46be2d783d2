/* The progress line (progress.h). */
#include "progress.h"
#include "util.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

void cli_progress_start(cli_progress *p, const char *label, unsigned flags, bool off)
{
    memset(p, 0, sizeof(*p));
    p->label = label;
    p->flags = flags;
    /* A pipe or a log file would collect every redraw, carriage returns
     * and all: only a person at a terminal is shown the line. */
    p->on = !off && (isatty(STDERR_FILENO) || (flags & CLI_PROGRESS_FORCE));
    p->t0 = cli_now_s();
}

bool cli_progress_active(const cli_progress *p)
{
    return p->on;
}

/* Decimal units, as every rate pinio prints (GB/s); the unit is chosen
 * once from the larger of the two numbers so "0.48 / 1.07 GB" reads as one
 * scale. */
static const char *unit_for(uint64_t v, double *div)
{
    static const struct { double d; const char *n; } u[] = {
        { 1e12, "TB" }, { 1e9, "GB" }, { 1e6, "MB" }, { 1e3, "kB" },
    };
    for (size_t i = 0; i < sizeof(u) / sizeof(u[0]); i++)
        if ((double)v >= u[i].d) {
            *div = u[i].d;
            return u[i].n;
        }
    *div = 1;
    return "B";
}

static void clock_str(char *b, size_t n, double s)
{
    if (!(s >= 0) || s > 359999) {
        snprintf(b, n, "--:--");
        return;
    }
    unsigned t = (unsigned)(s + 0.5);
    if (t >= 3600)
        snprintf(b, n, "%u:%02u:%02u", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(b, n, "%u:%02u", t / 60, t % 60);
}

size_t cli_progress_format(char *buf, size_t cap, const char *label, unsigned flags,
                           const pinio_progress *pg)
{
    char tail[96], amount[48], rate[24] = "", iops[24] = "", eta[24] = "";
    double el = pg->elapsed_s;
    /* fraction done: of the bytes, or of the time for a time-bound run */
    double frac = -1;
    if (pg->total_bytes)
        frac = (double)pg->done_bytes / (double)pg->total_bytes;
    else if (pg->total_s > 0)
        frac = el / pg->total_s;
    if (frac > 1)
        frac = 1;

    double div;
    const char *u = unit_for(pg->total_bytes > pg->done_bytes ? pg->total_bytes : pg->done_bytes,
                             &div);
    if (pg->total_bytes)
        snprintf(amount, sizeof(amount), "%.2f / %.2f %s", (double)pg->done_bytes / div,
                 (double)pg->total_bytes / div, u);
    else
        snprintf(amount, sizeof(amount), "%.2f %s", (double)pg->done_bytes / div, u);
    double bps = el > 0 ? (double)pg->done_bytes / el : 0;
    if (el > 0)
        snprintf(rate, sizeof(rate), "  %.2f GB/s", bps / 1e9);
    if ((flags & CLI_PROGRESS_IOPS) && el > 0) {
        double r = (double)pg->done_ops / el;
        if (r >= 1e6)
            snprintf(iops, sizeof(iops), "  %.2fM IOPS", r / 1e6);
        else if (r >= 1e3)
            snprintf(iops, sizeof(iops), "  %.1fk IOPS", r / 1e3);
        else
            snprintf(iops, sizeof(iops), "  %.0f IOPS", r);
    }
    if (frac >= 0) {
        char c[16];
        uint64_t done = pg->done_bytes < pg->total_bytes ? pg->done_bytes : pg->total_bytes;
        double left = -1; /* unknown until a rate is measured */
        if (!pg->total_bytes)
            left = pg->total_s - el;
        else if (bps > 0)
            left = (double)(pg->total_bytes - done) / bps;
        clock_str(c, sizeof(c), left);
        snprintf(eta, sizeof(eta), "  ETA %s", c);
    }
    char pct[8] = "";
    if (frac >= 0)
        snprintf(pct, sizeof(pct), "%3.0f%%  ", frac * 100);
    snprintf(tail, sizeof(tail), "%s%s%s%s%s", pct, amount, rate, iops, eta);

    /* The bar gets what is left of the 79 columns, up to 24; under 6 it
     * would say nothing the percentage does not. */
    size_t lab = strlen(label), tl = strlen(tail);
    size_t room = CLI_PROGRESS_COLUMNS > lab + tl + 4 ? CLI_PROGRESS_COLUMNS - lab - tl - 4 : 0;
    size_t bar = frac >= 0 ? (room > 24 ? 24 : room) : 0;
    if (bar < 6)
        bar = 0;
    char line[CLI_PROGRESS_COLUMNS * 2 + 8];
    size_t n = (size_t)snprintf(line, sizeof(line), "%s ", label);
    if (bar) {
        size_t fill = (size_t)(frac * (double)bar);
        line[n++] = '[';
        for (size_t i = 0; i < bar; i++)
            line[n++] = i < fill ? '=' : i == fill ? '>' : ' ';
        line[n++] = ']';
        line[n++] = ' ';
    }
    snprintf(line + n, sizeof(line) - n, "%s", tail);
    n = strlen(line);
    if (n > CLI_PROGRESS_COLUMNS) /* a very long label: cut, never wrap */
        n = CLI_PROGRESS_COLUMNS;
    line[n] = '\0';
    snprintf(buf, cap, "%s", line);
    return n < cap ? n : (cap ? cap - 1 : 0);
}

void cli_progress_update(cli_progress *p, const pinio_progress *pg)
{
    if (!p->on)
        return;
    double t = cli_now_s();
    bool last = pg->total_bytes && pg->done_bytes >= pg->total_bytes;
    if (p->drawn && !last && t - p->last < 0.1)
        return;
    p->last = t;
    pinio_progress q = *pg;
    if (q.elapsed_s <= 0)
        q.elapsed_s = t - p->t0;
    char line[CLI_PROGRESS_COLUMNS + 1];
    size_t n = cli_progress_format(line, sizeof(line), p->label, p->flags, &q);
    /* Pad over what a longer previous line left, instead of a terminal
     * escape: works on any terminal, and the width is known. */
    fprintf(stderr, "\r%s%*s", line, p->drawn > n ? (int)(p->drawn - n) : 0, "");
    fflush(stderr);
    p->drawn = n > p->drawn ? n : p->drawn;
}

int cli_progress_cb(void *ctx, const pinio_progress *pg)
{
    cli_progress_update(ctx, pg);
    return 0;
}

void cli_progress_end(cli_progress *p)
{
    if (p->on && p->drawn) {
        fprintf(stderr, "\r%*s\r", (int)p->drawn, "");
        fflush(stderr);
    }
    p->drawn = 0;
    p->on = false;
}
