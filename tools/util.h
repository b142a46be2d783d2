/* Small helpers shared by the pinio subcommands (argument parsing). */
#ifndef PINIO_CLI_UTIL_H
#define PINIO_CLI_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "pinio/plan.h"

/**
 * Flushes stdout now (a row of output the user should see before the next
 * run). A failure is remembered for cli_output_errno(): stdio then drops the
 * buffer and keeps only the error flag, without the reason.
 * @return 0, or -errno.
 */
int cli_flush(void);

/** The errno of the first failed cli_flush(), or 0. */
int cli_output_errno(void);

/**
 * Reports a usage error of `pinio CMD` as one line on stderr, the message
 * followed by a pointer to the help: "pinio CMD: <msg>; see 'pinio CMD --help'".
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

/** Formats a byte count as "1.50 GiB" into `buf`; returns `buf`. */
const char *cli_human_bytes(char *buf, unsigned long cap, uint64_t bytes);

/**
 * Prints the `n` bytes at `s` to stdout as a JSON string literal: quotes,
 * backslashes and control bytes (NUL included) escaped, other bytes as they
 * are, so valid UTF-8 stays valid JSON.
 */
void cli_json_str(const char *s, size_t n);

/**
 * Checks, before a load or stream, that `--sha256` was given once per file as
 * `paths` resolve (a folder or index counts its shards): another count is the
 * command line's mistake, so it is a usage error here rather than the
 * library's -EINVAL after the fact. Resolves the inputs through
 * pinio_plan_create() (headers only; --sha256 reads every byte anyway).
 * @return 0 when `ndigests` is 0, when the counts agree, or when the inputs do
 *         not resolve (the command's own call then reports why); else 2, after
 *         cli_usage().
 */
int cli_check_digest_count(const char *cmd, const char *const *paths, size_t npaths,
                           size_t ndigests);

/* Raises the soft open-file limit to the hard one (a load holds one
 * descriptor per shard); `*from` and `*to` receive the soft limit before and
 * after (equal when nothing changed). The command's own process only: the
 * library never changes limits. */
void cli_raise_nofile(unsigned long long *from, unsigned long long *to);

#endif
