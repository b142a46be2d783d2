/* The CLI's JSON writer (jw.h). */
#include "jw.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "pinio/pinio.h"

void jw_init(jw *w, FILE *out)
{
    memset(w, 0, sizeof *w);
    w->out = out;
    w->first[0] = true;
}

/* Separator before a value or key at the current level. */
static void sep(jw *w)
{
    if (w->after_key) {
        w->after_key = false;
        return;
    }
    if (!w->first[w->depth])
        fputc(',', w->out);
    w->first[w->depth] = false;
}

static void open_(jw *w, char c)
{
    sep(w);
    fputc(c, w->out);
    if (w->depth + 1 >= JW_MAX_DEPTH) {
        w->bad = true;
        return;
    }
    w->depth++;
    w->first[w->depth] = true;
}

static void close_(jw *w, char c)
{
    if (w->depth == 0 || w->after_key)
        w->bad = true;
    else
        w->depth--;
    fputc(c, w->out);
}

void jw_obj(jw *w) { open_(w, '{'); }
void jw_obj_end(jw *w) { close_(w, '}'); }
void jw_arr(jw *w) { open_(w, '['); }
void jw_arr_end(jw *w) { close_(w, ']'); }

void jw_begin(jw *w, const char *command)
{
    jw_obj(w);
    jw_kstr(w, "pinio_version", pinio_version());
    jw_ku64(w, "schema", JW_SCHEMA);
    jw_kstr(w, "command", command);
}

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if the bytes there
 * are not one (overlongs, surrogates and code points past U+10FFFF are not:
 * RFC 3629). */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t len;
    unsigned min, cp;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2; min = 0x80; cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3; min = 0x800; cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4; min = 0x10000; cp = c & 0x07;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

void jw_strn(jw *w, const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    sep(w);
    fputc('"', w->out);
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        size_t len = utf8_len(s + i, n - i);
        if (len == 0) {
            fputs("\\ufffd", w->out);
            i++;
            continue;
        }
        if (len > 1) {
            /* C1 controls (U+0080..U+009F) are escaped too: a terminal
             * showing the JSON would act on them. */
            unsigned cp = ((c & 0x1f) << 6) | (s[i + 1] & 0x3f);
            if (len == 2 && cp < 0xa0)
                fprintf(w->out, "\\u%04x", cp);
            else
                fwrite(s + i, 1, len, w->out);
            i += len;
            continue;
        }
        switch (c) {
        case '"': fputs("\\\"", w->out); break;
        case '\\': fputs("\\\\", w->out); break;
        case '\n': fputs("\\n", w->out); break;
        case '\t': fputs("\\t", w->out); break;
        case '\r': fputs("\\r", w->out); break;
        default:
            if (c < 0x20 || c == 0x7f)
                fprintf(w->out, "\\u%04x", c);
            else
                fputc((int)c, w->out);
        }
        i++;
    }
    fputc('"', w->out);
}

void jw_str(jw *w, const char *s)
{
    if (!s)
        jw_null(w);
    else
        jw_strn(w, s, strlen(s));
}

void jw_key(jw *w, const char *key)
{
    if (w->after_key)
        w->bad = true;
    jw_str(w, key);
    fputc(':', w->out);
    w->after_key = true;
}

void jw_u64(jw *w, uint64_t v)
{
    sep(w);
    fprintf(w->out, "%llu", (unsigned long long)v);
}

void jw_i64(jw *w, int64_t v)
{
    sep(w);
    fprintf(w->out, "%lld", (long long)v);
}

void jw_num(jw *w, double v, int digits)
{
    if (!isfinite(v)) {
        jw_null(w);
        return;
    }
    sep(w);
    /* %g never gives a form JSON rejects for finite values except a bare
     * exponent like "1e+20", which JSON accepts. */
    fprintf(w->out, "%.*g", digits, v);
}

void jw_f64(jw *w, double v) { jw_num(w, v, 9); }

void jw_bool(jw *w, bool v)
{
    sep(w);
    fputs(v ? "true" : "false", w->out);
}

void jw_null(jw *w)
{
    sep(w);
    fputs("null", w->out);
}

void jw_kstr(jw *w, const char *key, const char *s) { jw_key(w, key); jw_str(w, s); }
void jw_ku64(jw *w, const char *key, uint64_t v) { jw_key(w, key); jw_u64(w, v); }
void jw_ki64(jw *w, const char *key, int64_t v) { jw_key(w, key); jw_i64(w, v); }
void jw_kf64(jw *w, const char *key, double v) { jw_key(w, key); jw_f64(w, v); }
void jw_kbool(jw *w, const char *key, bool v) { jw_key(w, key); jw_bool(w, v); }

/* The command line's own state (not the library's): one process, one stdout. */

static int first_flush_errno;

int cli_flush(void)
{
    if (fflush(stdout) == 0)
        return 0;
    if (!first_flush_errno)
        first_flush_errno = errno ? errno : EIO;
    return -errno;
}


int cli_output_errno(void)
{
    return first_flush_errno;
}

void cli_output_failed(int err)
{
    if (!first_flush_errno)
        first_flush_errno = err;
}

int jw_finish(jw *w)
{
    bool bad = w->bad || w->after_key || w->depth != 0;
    fputc('\n', w->out);
    /* stdout goes through cli_flush(), which keeps the errno of the first
     * failed write for main's one-line report; a later stdio call would
     * have overwritten it. */
    if (w->out == stdout) {
        int rc = cli_flush();
        if (rc || ferror(stdout))
            return rc ? rc : -EIO;
    } else if (fflush(w->out) != 0 || ferror(w->out)) {
        return errno ? -errno : -EIO;
    }
    return bad ? -EPROTO : 0;
}

int jw_error(const char *command, int code, const char *message, const char *file,
             int64_t offset)
{
    jw w;
    jw_init(&w, stdout);
    jw_begin(&w, command);
    jw_key(&w, "error");
    jw_obj(&w);
    jw_ki64(&w, "code", code);
    const char *name = code ? pinio_err_name(code) : NULL;
    jw_kstr(&w, "name", name && strcmp(name, "unknown") ? name : NULL);
    jw_kstr(&w, "message", message ? message : (code ? pinio_strerror(code) : ""));
    jw_kstr(&w, "file", file);
    jw_key(&w, "offset");
    if (offset >= 0)
        jw_i64(&w, offset);
    else
        jw_null(&w);
    jw_obj_end(&w);
    jw_obj_end(&w);
    return jw_finish(&w);
}
