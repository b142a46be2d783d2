/* Small helpers shared by the pinio subcommands: the one grammar of their
 * option values, usage and failure reporting. */
#ifndef PINIO_CLI_UTIL_H
#define PINIO_CLI_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "pinio/plan.h"
#include "jw.h"

/**
 * Remembers whether the command line `argv[0..argc)` (argv[0] the command's
 * name) asks for JSON (`--json`, or bench's `--output-format json`), looked
 * for as a whole word before any "--", so that cli_usage() can answer in JSON
 * before the command's own parser has run or after it stopped.
 */
void cli_usage_json_scan(int argc, char *const *argv);

/**
 * Reports a usage error of `pinio CMD` as one line on stderr, the message
 * followed by a pointer to the help: "pinio CMD: <msg>; see 'pinio CMD --help'";
 * when cli_usage_json_scan() found JSON asked for, also the jw_error() object
 * (code -EINVAL, the message without the pointer) on stdout.
 * @return 2, the usage exit status, so that callers can `return cli_usage(...)`.
 */
int cli_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/**
 * Reports what getopt_long rejected (it returned '?' or ':'; the caller set
 * opterr = 0 and started its optstring with ':') with cli_usage().
 * @return 2.
 */
int cli_getopt_error(const char *cmd, int c, char *const *argv);

/**
 * Parses a byte count: decimal digits with an optional binary suffix
 * K, M, G, T (also KiB/MiB/GiB/TiB, lower case accepted, a trailing "B" alone too).
 * "1G" is 2^30. @return 0 and `*out`, or -EINVAL (malformed) / -ERANGE (over 2^64).
 */
int cli_parse_size(const char *s, uint64_t *out);

/** Parses a plain unsigned decimal (or 0x hex) integer. Same returns. */
int cli_parse_u64(const char *s, uint64_t *out);

/** Parses auto|cold|hot. @return 0, or -EINVAL (`*out` untouched). */
int cli_parse_cache(const char *s, pinio_cache_policy *out);

/** Parses auto|on|off. @return 0, or -EINVAL (`*out` untouched). */
int cli_parse_direct(const char *s, pinio_direct_policy *out);

/*
 * Option values, one grammar for every command. Each cli_opt_X() parses the
 * value `arg` of option `opt` (its name as the user types it, "--qd") of
 * `pinio CMD`; on a bad value it prints the one usage line
 * "pinio CMD: OPT wants ..., not 'ARG'; see 'pinio CMD --help'".
 * @return 0 with `*out` set, or 2 (the usage exit status; `*out` untouched).
 */
/** auto|cold|hot */
int cli_opt_cache(const char *cmd, const char *opt, const char *arg, pinio_cache_policy *out);
/** auto|on|off */
int cli_opt_direct(const char *cmd, const char *opt, const char *arg, pinio_direct_policy *out);
/** N (a NUMA node, 0..4095), auto (PINIO_NODE_AUTO) or any (PINIO_NODE_ANY) */
int cli_opt_node(const char *cmd, const char *opt, const char *arg, int *out);
/** reads in flight: 1..4096 */
int cli_opt_qd(const char *cmd, const char *opt, const char *arg, unsigned *out);
/** bytes per read request: a size (cli_parse_size), a power of two from 4K to 1G */
int cli_opt_bs(const char *cmd, const char *opt, const char *arg, size_t *out);
/** a size (cli_parse_size) from `min` to `max` bytes */
int cli_opt_size(const char *cmd, const char *opt, const char *arg, uint64_t min, uint64_t max,
                 uint64_t *out);

/**
 * Reports a failure of `pinio CMD`: one line "pinio CMD: MSG" on stderr
 * (MSG: the diagnostic's message, else pinio_strerror(code)) and, with
 * `json`, the jw_error() object on stdout carrying the diagnostic's file
 * and offset. `d` may be NULL.
 * @return 1, the failure exit status; 2 for PINIO_EDIGESTS (a --sha256 count
 *         that does not match the files: the command line's mistake, reported
 *         as cli_usage() does).
 */
int cli_fail(const char *cmd, bool json, int code, const pinio_diag *d);

/** As cli_fail() for a failure the command found itself (no diagnostic):
 *  `file` may be NULL. @return 1. */
int cli_failf(const char *cmd, bool json, int code, const char *file, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/** Writes `key` with a resource limit: the number, or the string
 *  "unlimited" for RLIM_INFINITY (the documented spelling, doc/json). */
void cli_jw_limit(jw *w, const char *key, unsigned long long v);

/** Formats a byte count as "1.50 GiB" into `buf`; returns `buf`. */
const char *cli_human_bytes(char *buf, unsigned long cap, uint64_t bytes);

/** Seconds on the monotonic clock (for durations). Inline: progress.c is
 *  also built alone into its test. */
static inline double cli_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}


/* Raises the soft open-file limit to the hard one (a load holds one
 * descriptor per shard); `*from` and `*to` receive the soft limit before and
 * after (equal when nothing changed). The command's own process only: the
 * library never changes limits. main() calls it first; later calls change
 * nothing and say what that first call did. */
void cli_raise_nofile(unsigned long long *from, unsigned long long *to);

#endif
