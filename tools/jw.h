/* jw: the one JSON writer every `pinio CMD --json` uses.
 *
 * The contract of the CLI's JSON (doc/json/SCHEMA.md): one object per line on
 * stdout; every top-level object starts with "pinio_version", "schema" and
 * "command"; keys are snake_case with their unit in the name (_bytes, _s,
 * _ns, _gb_per_s, _mb_per_s); lists are arrays; a failure is an object with
 * an "error" member (jw_error()).
 *
 * Strings are always valid JSON whatever the bytes: quotes, backslashes and
 * control characters (C0, DEL and C1 included) are escaped, valid UTF-8 is
 * kept, and each byte that is not part of valid UTF-8 becomes U+FFFD (file
 * names on Linux are bytes; a JSON parser must never be handed invalid
 * text). Writers that need the exact bytes of a name get them from the
 * text output or the C API.
 *
 * Misuse (a value where a key is due, unbalanced ends) is a programming
 * error caught by jw_finish() in debug builds and tests, not at run time. */
#ifndef PINIO_TOOLS_JW_H
#define PINIO_TOOLS_JW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/** Bumped when a key changes meaning or disappears; adding keys does not. */
#define JW_SCHEMA 2

#define JW_MAX_DEPTH 32

typedef struct jw {
    FILE *out;
    unsigned depth;
    bool first[JW_MAX_DEPTH]; /* nothing written yet at this level */
    bool after_key;
    bool bad;                 /* unbalanced or too deep: jw_finish() says so */
} jw;

/** Starts a writer on `out` (stdout for every command). */
void jw_init(jw *w, FILE *out);

/** Opens the top-level object of `command` and writes its three fixed keys. */
void jw_begin(jw *w, const char *command);

void jw_obj(jw *w);     /**< { (a value: after a key or in an array) */
void jw_obj_end(jw *w); /**< } */
void jw_arr(jw *w);     /**< [ */
void jw_arr_end(jw *w); /**< ] */
void jw_key(jw *w, const char *key);

void jw_str(jw *w, const char *s);  /**< NULL writes null */
void jw_strn(jw *w, const char *s, size_t n);
void jw_u64(jw *w, uint64_t v);
void jw_i64(jw *w, int64_t v);
/** A number with up to `digits` significant digits; NaN and infinities are
 *  written as null (JSON has no spelling for them). */
void jw_num(jw *w, double v, int digits);
void jw_f64(jw *w, double v); /**< jw_num(w, v, 9) */
void jw_bool(jw *w, bool v);
void jw_null(jw *w);

/* key + value in one call: the common case. */
void jw_kstr(jw *w, const char *key, const char *s);
void jw_ku64(jw *w, const char *key, uint64_t v);
void jw_ki64(jw *w, const char *key, int64_t v);
void jw_kf64(jw *w, const char *key, double v);
void jw_kbool(jw *w, const char *key, bool v);

/**
 * Ends the line and flushes; closes nothing (an open object or array is
 * misuse, reported). @return 0, -EPROTO on
 * misuse (unbalanced, too deep), or the negative errno of a failed write.
 */
int jw_finish(jw *w);

/**
 * The failure object of `command`: {"pinio_version", "schema", "command",
 * "error": {"code": <negative errno or pinio error>, "name": "ENOENT"-like
 * or null, "message", "file" (or null), "offset" (or null)}}. `offset` < 0
 * means none. Written to stdout and flushed.
 */
int jw_error(const char *command, int code, const char *message, const char *file,
             int64_t offset);

/**
 * Flushes stdout now (a row of output the user should see before the next
 * run). A failure is remembered for cli_output_errno(): stdio then drops the
 * buffer and keeps only the error flag, without the reason.
 * @return 0, or -errno.
 */
int cli_flush(void);

/** The errno of the first failed cli_flush() (jw_finish() on stdout flushes
 *  through it), or 0. */
int cli_output_errno(void);

/** Records `err` as the output's failure for cli_output_errno(), unless
 *  one is recorded already (a write the caller saw fail). */
void cli_output_failed(int err);

#endif
