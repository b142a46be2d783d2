/* The one helper module of the tests (liburing's test/helpers.h habit):
 * temporary files and directories named with the run's tag (the names
 * scripts/test checks for leftovers), a deterministic byte pattern any window of which can be
 * checked, and a recursive remove that needs no shell.
 *
 * Every function returns 0 or a negative errno and prints nothing: the
 * caller's framework (Criterion or CHECK) reports. Link: test_common_dep. */
#ifndef PINIO_TESTS_COMMON_HELPERS_H
#define PINIO_TESTS_COMMON_HELPERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Exit status meson reads as "skipped". */
#define T_EXIT_SKIP 77

/* splitmix64: a deterministic PRNG, so that failures reproduce. */
uint64_t t_rand(uint64_t *state);

/* The pattern: byte `off` of stream `seed` is a function of (seed, off)
 * alone, so a buffer that should hold bytes [off, off + n) of the stream can
 * be checked without the rest. */
void t_pattern_fill(void *buf, size_t n, uint64_t seed, uint64_t off);

/* true when buf holds bytes [off, off + n) of stream `seed`; else false,
 * with the index of the first wrong byte in `*bad` (optional). */
bool t_pattern_check(const void *buf, size_t n, uint64_t seed, uint64_t off, size_t *bad);

/* The test run's tag, into out[n]: $PINIO_TEST_RUN when it is set and made
 * of 1-16 letters and digits (scripts/test sets one per run, and its
 * leftover check counts only names that carry it), else "p<pid>" (a plain
 * `meson test`: a tag no other run uses). Every temporary name a test makes
 * starts "pinio-<run>-", so runs beside each other (another checkout's, a
 * user's pinio) never count or remove each other's files. */
int t_run(char *out, size_t n); /* n = 17 always suffices */

/* The template "<base>/pinio-<run>-<tag>-XXXXXX" into out[n], for mkdtemp or
 * mkstemp (t_tmpdir and t_tmpfile use it; a test that needs another call,
 * mkfifo or a name it builds on, starts from it). */
int t_tmpname(const char *base, const char *tag, char *out, size_t n);

/* mkdtemp of "<base>/pinio-<run>-<tag>-XXXXXX" into out[n]. base: /var/tmp (a
 * disk file system), /dev/shm (tmpfs) or /tmp. */
int t_tmpdir(const char *base, const char *tag, char *out, size_t n);

/* A new file "<dir>/pinio-<run>-<tag>-XXXXXX" (path into out[n]) holding
 * `len` bytes of `data`, or, with data NULL, bytes [0, len) of pattern `seed`. */
int t_tmpfile(const char *dir, const char *tag, const void *data, uint64_t len, uint64_t seed,
              char *out, size_t n);

/* Removes `path` and, for a directory, everything under it (no symlink is
 * followed). A path that does not exist is not an error. */
int t_rm_rf(const char *path);

#endif
