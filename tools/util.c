/* Argument parsing shared by the subcommands. strtoull is avoided on its own
 * because it accepts "-1" (wrapping to 2^64-1) and leading spaces. */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "pinio/pinio.h"
#include "util.h"

static int digits(const char **p, unsigned base, uint64_t *out)
{
    const char *s = *p;
    uint64_t v = 0;
    size_t n = 0;
    for (;; s++, n++) {
        unsigned d;
        if (*s >= '0' && *s <= '9')
            d = (unsigned)(*s - '0');
        else if (base == 16 && isxdigit((unsigned char)*s))
            d = (unsigned)(tolower((unsigned char)*s) - 'a' + 10);
        else
            break;
        if (v > (UINT64_MAX - d) / base)
            return -ERANGE;
        v = v * base + d;
    }
    if (!n)
        return -EINVAL;
    *p = s;
    *out = v;
    return 0;
}

int cli_parse_u64(const char *s, uint64_t *out)
{
    unsigned base = 10;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        base = 16;
        s += 2;
    }
    uint64_t v;
    int r = digits(&s, base, &v);
    if (r)
        return r;
    if (*s)
        return -EINVAL;
    *out = v;
    return 0;
}

int cli_parse_size(const char *s, uint64_t *out)
{
    uint64_t v;
    int r = digits(&s, 10, &v);
    if (r)
        return r;
    unsigned shift = 0;
    switch (*s) {
    case 'k': case 'K': shift = 10; break;
    case 'm': case 'M': shift = 20; break;
    case 'g': case 'G': shift = 30; break;
    case 't': case 'T': shift = 40; break;
    default: break;
    }
    if (shift && *++s == 'i' && *++s != 'B' && *s != 'b')
        return -EINVAL; /* "Ki" without the B */
    if (*s == 'B' || *s == 'b')
        s++;
    if (*s)
        return -EINVAL;
    if (shift && v > (UINT64_MAX >> shift))
        return -ERANGE;
    *out = v << shift;
    return 0;
}

const char *cli_human_bytes(char *buf, unsigned long cap, uint64_t bytes)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = (double)bytes;
    unsigned u = 0;
    while (v >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, cap, "%llu B", (unsigned long long)bytes);
    else
        snprintf(buf, cap, "%.2f %s", v, units[u]);
    return buf;
}

void cli_raise_nofile(unsigned long long *from, unsigned long long *to)
{
    /* The first call raises; later ones say what it did, so that main()
     * can raise for every command and load still reports the change. */
    static bool done;
    static unsigned long long was, now;
    struct rlimit rl;
    if (!done && getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        was = now = (unsigned long long)rl.rlim_cur;
        if (rl.rlim_cur < rl.rlim_max) {
            rl.rlim_cur = rl.rlim_max;
            if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
                now = (unsigned long long)rl.rlim_cur;
        }
    }
    done = true;
    *from = was;
    *to = now;
}

int cli_parse_cache(const char *s, pinio_cache_policy *out)
{
    static const char *const names[] = { "auto", "cold", "hot" };
    static const pinio_cache_policy values[] = { PINIO_CACHE_AUTO, PINIO_CACHE_COLD,
                                                 PINIO_CACHE_HOT };
    for (size_t i = 0; i < 3; i++)
        if (strcmp(s, names[i]) == 0) {
            *out = values[i];
            return 0;
        }
    return -EINVAL;
}

int cli_parse_direct(const char *s, pinio_direct_policy *out)
{
    static const char *const names[] = { "auto", "on", "off" };
    static const pinio_direct_policy values[] = { PINIO_DIRECT_AUTO, PINIO_DIRECT_ON,
                                                  PINIO_DIRECT_OFF };
    for (size_t i = 0; i < 3; i++)
        if (strcmp(s, names[i]) == 0) {
            *out = values[i];
            return 0;
        }
    return -EINVAL;
}

static bool usage_json;

/* jw_error() on stdout; a failed write's errno is kept for the exit line. */
static void json_error(const char *cmd, int code, const char *msg, const char *file,
                       int64_t offset)
{
    int r = jw_error(cmd, code, msg, file, offset);
    if (r < 0 && r != -EPROTO)
        cli_output_failed(-r);
}

void cli_usage_json_scan(int argc, char *const *argv)
{
    usage_json = false;
    for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
        if (!strcmp(argv[i], "--json") || !strcmp(argv[i], "--output-format=json") ||
            (!strcmp(argv[i], "--output-format") && i + 1 < argc && !strcmp(argv[i + 1], "json")))
            usage_json = true;
}

int cli_usage(const char *cmd, const char *fmt, ...)
{
    char msg[PINIO_DIAG_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "pinio %s: %s; see 'pinio %s --help'\n", cmd, msg, cmd);
    /* A script that asked for JSON parses stdout: it gets the error there
     * too, whatever the usage error was. */
    if (usage_json)
        json_error(cmd, -EINVAL, msg, NULL, -1);
    return 2;
}

int cli_getopt_error(const char *cmd, int c, char *const *argv)
{
    /* getopt's own messages are off (opterr = 0): they carry argv[0], which is
     * the command's name alone here, and would make the error two lines. The
     * element it stopped at is argv[optind - 1], a long option with any
     * "=value" attached. */
    const char *arg = optind > 0 ? argv[optind - 1] : "";
    bool is_long = !strncmp(arg, "--", 2);
    if (c == ':')
        return is_long ? cli_usage(cmd, "option '%s' wants a value", arg)
                       : cli_usage(cmd, "option '-%c' wants a value", optopt);
    if (is_long && optopt && strchr(arg, '='))
        return cli_usage(cmd, "option '%.*s' takes no value", (int)(strchr(arg, '=') - arg), arg);
    if (is_long)
        return cli_usage(cmd, "unknown or ambiguous option '%s'", arg);
    return cli_usage(cmd, "unknown option '-%c'", optopt);
}

/* ---- option values: one grammar for every command ---------------------- */

static int bad_value(const char *cmd, const char *opt, const char *want, const char *arg)
{
    return cli_usage(cmd, "%s wants %s, not '%s'", opt, want, arg);
}

int cli_opt_cache(const char *cmd, const char *opt, const char *arg, pinio_cache_policy *out)
{
    return cli_parse_cache(arg, out) == 0 ? 0 : bad_value(cmd, opt, "auto, cold or hot", arg);
}

int cli_opt_direct(const char *cmd, const char *opt, const char *arg, pinio_direct_policy *out)
{
    return cli_parse_direct(arg, out) == 0 ? 0 : bad_value(cmd, opt, "auto, on or off", arg);
}

int cli_opt_node(const char *cmd, const char *opt, const char *arg, int *out)
{
    uint64_t n;
    if (!strcmp(arg, "auto"))
        *out = PINIO_NODE_AUTO;
    else if (!strcmp(arg, "any"))
        *out = PINIO_NODE_ANY;
    else if (cli_parse_u64(arg, &n) == 0 && n <= 4095)
        *out = (int)n; /* Linux's MAX_NUMNODES is at most 1 << 10; 4095 leaves room */
    else
        return bad_value(cmd, opt, "a node number, auto or any", arg);
    return 0;
}

int cli_opt_qd(const char *cmd, const char *opt, const char *arg, unsigned *out)
{
    uint64_t n;
    if (cli_parse_u64(arg, &n) < 0 || n < 1 || n > 4096)
        return bad_value(cmd, opt, "1..4096", arg);
    *out = (unsigned)n;
    return 0;
}

int cli_opt_bs(const char *cmd, const char *opt, const char *arg, size_t *out)
{
    /* O_DIRECT wants block multiples and the engine splits at powers of
     * two; 1 GiB is the largest registered buffer (one iovec). */
    uint64_t bs;
    if (cli_parse_size(arg, &bs) < 0 || bs < 4096 || bs > (1u << 30) || (bs & (bs - 1)))
        return bad_value(cmd, opt, "a power of two from 4K to 1G (e.g. 1M)", arg);
    *out = (size_t)bs;
    return 0;
}

int cli_opt_size(const char *cmd, const char *opt, const char *arg, uint64_t min, uint64_t max,
                 uint64_t *out)
{
    uint64_t v;
    if (cli_parse_size(arg, &v) < 0 || v < min || v > max) {
        char lo[32], hi[32], want[96];
        snprintf(want, sizeof(want), "a size from %s to %s (e.g. 16M)",
                 cli_human_bytes(lo, sizeof(lo), min), cli_human_bytes(hi, sizeof(hi), max));
        return bad_value(cmd, opt, want, arg);
    }
    *out = v;
    return 0;
}

/* ---- failures ------------------------------------------------------------ */

int cli_fail(const char *cmd, bool json, int code, const pinio_diag *d)
{
    const char *msg = d && d->msg[0] ? d->msg : pinio_strerror(code);
    /* The library counts the files (an index or a folder resolves to its
     * shards) and refuses another number of digests before reading a byte:
     * a usage error of --sha256. */
    if (code == PINIO_EDIGESTS)
        return cli_usage(cmd, "%s (--sha256)", msg);
    fprintf(stderr, "pinio %s: %s\n", cmd, msg);
    if (json)
        json_error(cmd, code, msg, d && d->path[0] ? d->path : NULL,
                   d && d->offset != PINIO_DIAG_NO_OFFSET ? (int64_t)d->offset : -1);
    return 1;
}

int cli_failf(const char *cmd, bool json, int code, const char *file, const char *fmt, ...)
{
    pinio_diag d = { .code = code, .offset = PINIO_DIAG_NO_OFFSET };
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d.msg, sizeof(d.msg), fmt, ap);
    va_end(ap);
    if (file)
        snprintf(d.path, sizeof(d.path), "%s", file);
    return cli_fail(cmd, json, code, &d);
}

void cli_jw_limit(jw *w, const char *key, unsigned long long v)
{
    if (v == (unsigned long long)RLIM_INFINITY)
        jw_kstr(w, key, "unlimited");
    else
        jw_ku64(w, key, v);
}
