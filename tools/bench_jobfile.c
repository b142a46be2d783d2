/* fio INI job files for pinio bench (bench_jobfile.h).
 *
 * Two steps, so that an error names the line the user wrote: reading keeps
 * each key with its value and line (aliases folded to one name, so a job's
 * "readwrite" overrides a global "rw"); translating then turns one job's
 * keys, [global]'s inherited, into pinio bench's argument vector. Unknown
 * keys fail at reading, bad values at translating, both as FILE:LINE. */
#include "bench_jobfile.h"
#include "fio_values.h"
#include "textfile.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* A fio job file is a few kilobytes; anything this large is not one. */
#define JOBFILE_MAX (16u << 20)
#define JOBFILE_MAX_TEXT "16 MiB"

/* ---- small containers ---------------------------------------------------- */

typedef struct strvec {
    char **v;
    size_t n, cap;
} strvec;

static int sv_push(strvec *s, const char *str)
{
    if (s->n + 2 > s->cap) { /* + 2: room for a NULL terminator */
        size_t cap = s->cap ? s->cap * 2 : 16;
        char **v = realloc(s->v, cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        s->v = v;
        s->cap = cap;
    }
    if (!(s->v[s->n] = strdup(str)))
        return -ENOMEM;
    s->v[++s->n] = NULL;
    return 0;
}

/* A formatted string; longer than a file list may be is an error, not a cut. */
static int sv_vpushf(strvec *s, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
static int sv_vpushf(strvec *s, const char *fmt, va_list ap)
{
    char buf[4096 + 64];
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    if (n < 0 || (size_t)n >= sizeof buf)
        return -EINVAL;
    return sv_push(s, buf);
}

static int sv_pushf(strvec *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int sv_pushf(strvec *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = sv_vpushf(s, fmt, ap);
    va_end(ap);
    return rc;
}

/* An option and, unless `fmt` is NULL, its value: "--qd", "32". */
static int push_opt(strvec *s, const char *opt, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int push_opt(strvec *s, const char *opt, const char *fmt, ...)
{
    int rc = sv_push(s, opt);
    if (rc || !fmt)
        return rc;
    va_list ap;
    va_start(ap, fmt);
    rc = sv_vpushf(s, fmt, ap);
    va_end(ap);
    return rc;
}

static void sv_free(strvec *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
    memset(s, 0, sizeof *s);
}

/* One key as written: its value (NULL for a bare flag) and line. */
typedef struct kv {
    const char *key; /* canonical name, static */
    char *val;
    unsigned line;
} kv;

typedef struct kvset {
    kv *v;
    size_t n, cap;
} kvset;

static kv *kv_get(const kvset *s, const char *key)
{
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->v[i].key, key))
            return &s->v[i];
    return NULL;
}

/* Sets `key`: a later line replaces an earlier one (a job's own key its global's). */
static int kv_set(kvset *s, const char *key, const char *val, unsigned line)
{
    char *dup = NULL;
    if (val && !(dup = strdup(val)))
        return -ENOMEM;
    kv *e = kv_get(s, key);
    if (!e) {
        if (s->n == s->cap) {
            size_t cap = s->cap ? s->cap * 2 : 16;
            kv *v = realloc(s->v, cap * sizeof *v);
            if (!v) {
                free(dup);
                return -ENOMEM;
            }
            s->v = v;
            s->cap = cap;
        }
        e = &s->v[s->n++];
        e->key = key;
    } else {
        free(e->val);
    }
    e->val = dup;
    e->line = line;
    return 0;
}

static int kv_copy(kvset *dst, const kvset *src)
{
    for (size_t i = 0; i < src->n; i++) {
        int rc = kv_set(dst, src->v[i].key, src->v[i].val, src->v[i].line);
        if (rc)
            return rc;
    }
    return 0;
}

static void kv_free(kvset *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i].val);
    free(s->v);
    memset(s, 0, sizeof *s);
}

/* ---- the keys ------------------------------------------------------------ */

/* Every key pinio bench reads; anything else is refused by name. */
static const char *const keys[] = {
    "name", "description", "thread", "randrepeat", "new_group", "kb_base",
    "clat_percentiles", "lat_percentiles", "ioengine", "iodepth", "rw", "rwmixread",
    "rwmixwrite", "bs", "bsrange", "bssplit", "blockalign", "norandommap",
    "random_distribution", "filename", "directory", "nrfiles", "direct", "buffered",
    "invalidate", "size", "offset", "io_size", "loops", "numjobs", "runtime", "time_based",
    "ramp_time", "startdelay", "rate", "rate_iops", "thinktime", "verify", "verify_only",
    "randseed", "group_reporting", "percentile_list", "log_avg_msec", "write_bw_log",
    "write_iops_log", "write_lat_log", "fixedbufs", "registerfiles", "sqthread_poll",
    "hipri", "stonewall", "file_service_type", "filesize", "mem",
};

/* fio's other spellings of the same options. */
static const char *const aliases[][2] = {
    {"readwrite", "rw"},          {"blocksize", "bs"},    {"blocksize_range", "bsrange"},
    {"ba", "blockalign"},         {"blocksize_align", "blockalign"},
    {"io_limit", "io_size"},      {"timeout", "runtime"}, {"wait_for_previous", "stonewall"},
    {"iomem", "mem"},
};

/* A file name's "$rank" and "$host" (or "${rank}", "${host}") are pinio
 * bench --mpi's: each rank's own file. Any other $ is fio's variable. */
static bool rank_names(const char *key, const char *val)
{
    if (strcmp(key, "filename") && strcmp(key, "directory"))
        return false;
    for (const char *p = strchr(val, '$'); p; p = strchr(p + 1, '$'))
        if (strncmp(p, "$rank", 5) && strncmp(p, "$host", 5) && strncmp(p, "${rank}", 7) &&
            strncmp(p, "${host}", 7))
            return false;
    return true;
}

static const char *canon(const char *key)
{
    for (size_t i = 0; i < sizeof aliases / sizeof *aliases; i++)
        if (!strcmp(key, aliases[i][0]))
            return aliases[i][1];
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        if (!strcmp(key, keys[i]))
            return keys[i];
    return NULL;
}

/* ---- the parse state ----------------------------------------------------- */

typedef struct ctx {
    const char *path;
    char *err;
    size_t errlen;
    bench_jobfile *out;
    size_t jobs_cap;
    strvec notes;
    kvset global;   /* as of the current line */
    kvset job;      /* the open job section: global's keys at its start + its own */
    char *job_name; /* NULL: no job section open */
    unsigned job_line;
    bool in_global;
    bool any_section;
} ctx;

static int fail(ctx *c, int rc, unsigned line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(ctx *c, int rc, unsigned line, const char *fmt, ...)
{
    if (c->errlen) {
        int n = line ? snprintf(c->err, c->errlen, "%s:%u: ", c->path, line)
                     : snprintf(c->err, c->errlen, "%s: ", c->path);
        if (n >= 0 && (size_t)n < c->errlen) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
            va_end(ap);
        }
    }
    return rc;
}

/* A note, once however many jobs inherit the key that caused it. */
static int note(ctx *c, unsigned line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int note(ctx *c, unsigned line, const char *fmt, ...)
{
    char buf[512];
    int n = snprintf(buf, sizeof buf, "%s:%u: ", c->path, line);
    if (n < 0 || (size_t)n >= sizeof buf)
        return 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
    va_end(ap);
    for (size_t i = 0; i < c->notes.n; i++)
        if (!strcmp(c->notes.v[i], buf))
            return 0;
    return sv_push(&c->notes, buf);
}

/* ---- translating one job ------------------------------------------------- */

typedef struct job_tr {
    ctx *c;
    const kvset *k;
    strvec *argv;
    unsigned kb_base;
    bool s3; /* ioengine=s3|http or an s3:// filename: HTTP range GETs */
} job_tr;

static int bad(job_tr *t, const kv *e, const char *why)
{
    return fail(t->c, -EINVAL, e->line, "%s=%s: %s", e->key, e->val ? e->val : "", why);
}

/* The value of a key fio lets differ per direction ("4k,8k" = reads, writes):
 * pinio bench has one, so the parts must agree. `one` gets the value. */
static int one_for_all(job_tr *t, const kv *e, char *one, size_t len)
{
    const char *v = e->val;
    size_t n = strcspn(v, ",");
    if (n >= len)
        return bad(t, e, "value too long");
    memcpy(one, v, n);
    one[n] = 0;
    for (const char *p = v + n; *p == ','; p += 1 + n) {
        n = strcspn(p + 1, ",");
        if (n != strlen(one) || strncmp(p + 1, one, n))
            return fail(t->c, -ENOTSUP, e->line,
                        "%s=%s: separate read,write values are not supported by pinio bench",
                        e->key, v);
    }
    return 0;
}

static int need_val(job_tr *t, const kv *e)
{
    if (!e->val || !*e->val)
        return fail(t->c, -EINVAL, e->line, "option '%s' needs a value", e->key);
    return 0;
}

static int get_bool(job_tr *t, const char *key, bool dflt, bool *out, const kv **where)
{
    const kv *e = kv_get(t->k, key);
    *out = dflt;
    if (where)
        *where = e;
    if (e && fio_bool(e->val, out))
        return bad(t, e, "wants 0 or 1");
    return 0;
}

static int opt_size(job_tr *t, const char *key, const char *opt)
{
    const kv *e = kv_get(t->k, key);
    if (!e)
        return 0;
    uint64_t x;
    int rc = need_val(t, e);
    if (rc)
        return rc;
    if (fio_size(e->val, t->kb_base, &x))
        return bad(t, e, "not a size (fio suffixes k, m, g, t, p; percentages are not supported)");
    return push_opt(t->argv, opt, "%llu", (unsigned long long)x);
}

static int opt_uint(job_tr *t, const char *key, const char *opt, uint64_t min, uint64_t max)
{
    const kv *e = kv_get(t->k, key);
    uint64_t x;
    if (!e)
        return 0;
    int rc = need_val(t, e);
    if (rc)
        return rc;
    if (fio_uint(e->val, &x) || x < min || x > max)
        return bad(t, e, "not a whole number in range");
    return push_opt(t->argv, opt, "%llu", (unsigned long long)x);
}

static int opt_secs(job_tr *t, const char *key, const char *opt)
{
    const kv *e = kv_get(t->k, key);
    uint64_t us;
    char buf[64];
    if (!e)
        return 0;
    int rc = need_val(t, e);
    if (rc)
        return rc;
    if (fio_time_us(e->val, 1000000, &us))
        return bad(t, e, "not a time (seconds, or a unit: us, ms, s, m, h, d)");
    secs(buf, sizeof buf, us);
    return push_opt(t->argv, opt, "%s", buf);
}

static int opt_flag(job_tr *t, const char *key, const char *opt)
{
    bool on;
    int rc = get_bool(t, key, false, &on, NULL);
    return rc ? rc : on ? sv_push(t->argv, opt) : 0;
}

static int tr_engine(job_tr *t, bool *sync)
{
    static const char *const synchronous[] = {"sync", "psync", "vsync", "pvsync", "pvsync2"};
    const kv *e = kv_get(t->k, "ioengine");
    *sync = false;
    if (!e || (e->val && !strcmp(e->val, "io_uring")))
        return 0;
    int rc = need_val(t, e);
    if (rc)
        return rc;
    /* fio's http engine fetches whole objects; pinio's reads ranges */
    if (!strcmp(e->val, "s3") || !strcmp(e->val, "http"))
        return (t->s3 = true), push_opt(t->argv, "--engine", "%s", "s3");
    for (size_t i = 0; i < sizeof synchronous / sizeof *synchronous; i++)
        if (!strcmp(e->val, synchronous[i])) {
            *sync = true;
            return note(t->c, e->line, "ioengine=%s: runs with io_uring, one I/O at a time "
                        "as %s would", e->val, e->val);
        }
    if (!strcmp(e->val, "libaio") || !strcmp(e->val, "posixaio"))
        return note(t->c, e->line, "ioengine=%s: runs with io_uring", e->val);
    return fail(t->c, -ENOTSUP, e->line,
                "ioengine=%s is not supported by pinio bench (it runs io_uring)", e->val);
}

static int tr_rw(job_tr *t)
{
    static const char *const ok[] = {"read", "write", "randread", "randwrite", "rw",
                                     "randrw", "trim", "randtrim"};
    const kv *e = kv_get(t->k, "rw");
    const char *rw = "read"; /* fio's default */
    if (e) {
        int rc = need_val(t, e);
        if (rc)
            return rc;
        rw = !strcmp(e->val, "readwrite") ? "rw" : e->val;
        bool found = false;
        for (size_t i = 0; i < sizeof ok / sizeof *ok; i++)
            found |= !strcmp(rw, ok[i]);
        if (!found)
            return fail(t->c, -ENOTSUP, e->line,
                        "rw=%s is not supported by pinio bench (read, write, randread, "
                        "randwrite, rw, randrw, trim, randtrim)", e->val);
    }
    bool verify_only;
    const kv *vo;
    int rc = get_bool(t, "verify_only", false, &verify_only, &vo);
    if (rc)
        return rc;
    /* fio's verify_only keeps the write job and checks what it would have
     * written; pinio's --verify-only is a read run. */
    if (verify_only && (!strcmp(rw, "write") || !strcmp(rw, "randwrite"))) {
        rc = note(t->c, vo->line, "verify_only: rw=%s runs as %s --verify-only", rw,
                  rw[0] == 'r' ? "randread" : "read");
        rw = rw[0] == 'r' ? "randread" : "read";
    }
    if (rc || (rc = push_opt(t->argv, "--rw", "%s", rw)))
        return rc;

    const kv *mr = kv_get(t->k, "rwmixread"), *mw = kv_get(t->k, "rwmixwrite");
    const kv *m = mr && mw ? (mr->line >= mw->line ? mr : mw) : mr ? mr : mw;
    if (m) {
        uint64_t x;
        if ((rc = need_val(t, m)))
            return rc;
        if (fio_uint(m->val, &x) || x > 100)
            return bad(t, m, "wants a percentage 0..100");
        if (m == mw)
            x = 100 - x;
        return push_opt(t->argv, "--rwmixread", "%llu", (unsigned long long)x);
    }
    return 0;
}

/* bssplit=4k/50:1k/:32k/ -> "4096/50:1024/25:32768/25", as fio fills blanks. */
static int tr_bssplit(job_tr *t, const kv *e)
{
    char one[512], out[1024];
    int rc;
    if ((rc = need_val(t, e)) || (rc = one_for_all(t, e, one, sizeof one)))
        return rc;
    uint64_t bs[64], pct[64];
    bool blank[64];
    unsigned n = 0, nblank = 0;
    uint64_t sum = 0;
    for (char *save = NULL, *tok = strtok_r(one, ":", &save); tok;
         tok = strtok_r(NULL, ":", &save)) {
        char *slash = strchr(tok, '/');
        if (n == 64 || !slash)
            return bad(t, e, "wants SIZE/PERCENT:SIZE/PERCENT...");
        *slash = 0;
        if (fio_size(tok, t->kb_base, &bs[n]) || !bs[n])
            return bad(t, e, "not a block size");
        blank[n] = !slash[1];
        if (blank[n]) {
            nblank++;
            pct[n] = 0;
        } else if (fio_uint(slash + 1, &pct[n]) || pct[n] > 100) {
            return bad(t, e, "not a percentage");
        }
        sum += pct[n++];
    }
    if (!n || sum > 100 || (!nblank && sum != 100))
        return bad(t, e, "the percentages must add up to 100");
    /* fio fills blank shares evenly with what the others leave; the last takes the rest */
    uint64_t each = nblank ? (100 - sum) / nblank : 0, left = 100 - sum;
    size_t len = 0;
    for (unsigned i = 0; i < n; i++) {
        uint64_t p = pct[i];
        if (blank[i]) {
            p = --nblank ? each : left;
            left -= p;
        }
        int w = snprintf(out + len, sizeof out - len, "%s%llu/%llu", i ? ":" : "",
                         (unsigned long long)bs[i], (unsigned long long)p);
        if (w < 0 || (size_t)w >= sizeof out - len)
            return bad(t, e, "value too long");
        len += (size_t)w;
    }
    return push_opt(t->argv, "--bssplit", "%s", out);
}

static int tr_bs(job_tr *t)
{
    const kv *split = kv_get(t->k, "bssplit"), *range = kv_get(t->k, "bsrange");
    const kv *bs = kv_get(t->k, "bs");
    char one[256];
    uint64_t a, b;
    int rc;
    if (split) /* fio: bssplit wins over bsrange and bs */
        return tr_bssplit(t, split);
    if (range) {
        if ((rc = need_val(t, range)) || (rc = one_for_all(t, range, one, sizeof one)))
            return rc;
        char *dash = strchr(one, '-');
        if (!dash)
            return bad(t, range, "wants MIN-MAX");
        *dash = 0;
        if (fio_size(one, t->kb_base, &a) || fio_size(dash + 1, t->kb_base, &b) || !a || a > b)
            return bad(t, range, "wants MIN-MAX, two sizes, MIN <= MAX");
        return push_opt(t->argv, "--bsrange", "%llu-%llu", (unsigned long long)a,
                        (unsigned long long)b);
    }
    a = 4096; /* fio's default */
    if (bs) {
        if ((rc = need_val(t, bs)) || (rc = one_for_all(t, bs, one, sizeof one)))
            return rc;
        if (fio_size(one, t->kb_base, &a) || !a)
            return bad(t, bs, "not a block size");
    }
    return push_opt(t->argv, "--bs", "%llu", (unsigned long long)a);
}

/* filename=a:b (fio escapes a ':' in a name as "\:"), directory=D, nrfiles=N. */
static int tr_files(job_tr *t, const char *name)
{
    const kv *fn = kv_get(t->k, "filename"), *dir = kv_get(t->k, "directory");
    const kv *nf = kv_get(t->k, "nrfiles");
    uint64_t nrfiles = 1;
    strvec names = {0};
    char list[4096];
    size_t len = 0;
    int rc = 0;
    if (dir) {
        if ((rc = need_val(t, dir)))
            return rc;
        if (strchr(dir->val, ':'))
            return fail(t->c, -ENOTSUP, dir->line,
                        "directory=%s: several directories are not supported by pinio bench",
                        dir->val);
    }
    if (nf) {
        if ((rc = need_val(t, nf)))
            return rc;
        if (fio_uint(nf->val, &nrfiles) || !nrfiles || nrfiles > 4096)
            return bad(t, nf, "not a file count 1..4096");
    }
    if (fn) {
        if ((rc = need_val(t, fn)))
            return rc;
        if (nf)
            rc = note(t->c, nf->line, "nrfiles: ignored with filename=, as fio does");
        char cur[1024];
        size_t cl = 0;
        for (const char *p = fn->val;; p++) {
            if (!cl && !strncmp(p, "s3://", 5)) { /* an object's URL: its ':' is no list's */
                memcpy(cur, "s3:", 3), cl = 3, p += 2, t->s3 = true;
                continue;
            }
            if (*p == '\\' && p[1] == ':')
                p++;
            else if (*p == ':' || !*p) {
                cur[cl] = 0;
                if (cl && !rc)
                    rc = sv_push(&names, cur);
                cl = 0;
                if (!*p)
                    break;
                continue;
            }
            if (cl + 1 >= sizeof cur) {
                sv_free(&names);
                return bad(t, fn, "name too long");
            }
            cur[cl++] = *p;
        }
    } else {
        /* fio's own names: jobname.jobnum.filenum (filename_format's default) */
        for (uint64_t i = 0; i < nrfiles && !rc; i++)
            rc = sv_pushf(&names, "%s.0.%llu", name, (unsigned long long)i);
        if (!rc)
            rc = note(t->c, t->c->job_line,
                      "job '%s' has no filename: uses %s.0.0%s%s as fio would, one set "
                      "shared by its numjobs clones", name, name, nrfiles > 1 ? " .. " : "",
                      nrfiles > 1 ? names.v[names.n - 1] : "");
    }
    for (size_t i = 0; i < names.n && !rc; i++) {
        const kv *where = fn ? fn : dir ? dir : NULL;
        if (strchr(names.v[i], ','))
            rc = fail(t->c, -ENOTSUP, where ? where->line : t->c->job_line,
                      "file name '%s': a ',' in a name is not supported by pinio bench",
                      names.v[i]);
        int w = rc ? 0 : snprintf(list + len, sizeof list - len, "%s%s%s%s", i ? "," : "",
                                  dir ? dir->val : "", dir ? "/" : "", names.v[i]);
        if (!rc && (w < 0 || (size_t)w >= sizeof list - len))
            rc = fail(t->c, -EINVAL, where ? where->line : t->c->job_line,
                      "the list of files is too long");
        len += rc ? 0 : (size_t)w;
    }
    if (!rc && !names.n)
        rc = bad(t, fn, "no file name");
    sv_free(&names);
    return rc ? rc : push_opt(t->argv, "--file", "%s", list);
}

/* file_service_type=roundrobin|sequential|random[:N]; fio's distributions
 * over files (zipf, pareto, normal, gauss) are not in pinio bench. */
static int tr_fservice(job_tr *t)
{
    const kv *e = kv_get(t->k, "file_service_type");
    if (!e)
        return 0;
    int rc = need_val(t, e);
    if (rc)
        return rc;
    size_t n = strcspn(e->val, ":");
    const char *arg = e->val[n] ? e->val + n + 1 : NULL;
    bool rr = n == 10 && !strncmp(e->val, "roundrobin", 10);
    bool rnd = n == 6 && !strncmp(e->val, "random", 6);
    bool seq = n == 10 && !strncmp(e->val, "sequential", 10);
    uint64_t nr;
    if (!rr && !rnd && !seq)
        return fail(t->c, -ENOTSUP, e->line, "file_service_type=%s is not supported by pinio "
                    "bench (roundrobin, sequential, random, each with :N but sequential)",
                    e->val);
    if (arg && seq)
        return fail(t->c, -ENOTSUP, e->line, "file_service_type=%s: pinio bench's sequential "
                    "finishes each file's share, with no :N", e->val);
    if (arg && (fio_uint(arg, &nr) || !nr || nr > (1u << 31)))
        return bad(t, e, "wants a count of requests 1..2^31 after ':'");
    return push_opt(t->argv, "--file-service-type", "%s", e->val);
}

static int tr_time(job_tr *t)
{
    const kv *rt = kv_get(t->k, "runtime"), *tbk;
    bool tb;
    uint64_t us = 0;
    char buf[64];
    int rc = get_bool(t, "time_based", false, &tb, &tbk);
    if (rc)
        return rc;
    if (rt) {
        if ((rc = need_val(t, rt)))
            return rc;
        if (fio_time_us(rt->val, 1000000, &us))
            return bad(t, rt, "not a time (seconds, or a unit: us, ms, s, m, h, d)");
    }
    if (tb && !us)
        return fail(t->c, -EINVAL, tbk->line, "time_based needs runtime");
    if (!us)
        return 0;
    if (!tb && (rc = note(t->c, rt->line,
                          "runtime without time_based: pinio bench runs the whole runtime, "
                          "looping over the region (fio stops early when size is done)")))
        return rc;
    secs(buf, sizeof buf, us);
    return push_opt(t->argv, "--time", "%s", buf);
}

static int tr_rate(job_tr *t)
{
    const kv *r = kv_get(t->k, "rate"), *ri = kv_get(t->k, "rate_iops");
    char one[128];
    uint64_t x;
    int rc;
    if (r) {
        if ((rc = need_val(t, r)) || (rc = one_for_all(t, r, one, sizeof one)))
            return rc;
        if (fio_size(one, t->kb_base, &x) || !x)
            return bad(t, r, "not a rate (bytes per second, fio suffixes k, m, g)");
        if ((rc = push_opt(t->argv, "--rate", "%llu", (unsigned long long)x)))
            return rc;
    }
    if (ri) {
        if ((rc = need_val(t, ri)) || (rc = one_for_all(t, ri, one, sizeof one)))
            return rc;
        if (fio_uint(one, &x) || !x)
            return bad(t, ri, "not a request rate");
        if ((rc = push_opt(t->argv, "--rate-iops", "%llu", (unsigned long long)x)))
            return rc;
    }
    const kv *tt = kv_get(t->k, "thinktime");
    if (tt) {
        if ((rc = need_val(t, tt)))
            return rc;
        if (fio_time_us(tt->val, 1, &x))
            return bad(t, tt, "not a time (microseconds, or a unit: us, ms, s)");
        if (x && (rc = push_opt(t->argv, "--thinktime", "%llu", (unsigned long long)x)))
            return rc;
    }
    return 0;
}

static int tr_dist(job_tr *t)
{
    const kv *e = kv_get(t->k, "random_distribution");
    if (!e)
        return 0;
    int rc = need_val(t, e);
    if (rc)
        return rc;
    char v[512];
    if (strchr(e->val, ',') || strlen(e->val) + 1 >= sizeof v - 8)
        return fail(t->c, -ENOTSUP, e->line, "random_distribution=%s: separate read,write "
                    "distributions are not supported by pinio bench", e->val);
    /* gauss is fio's other name for normal */
    snprintf(v, sizeof v, "%s", strncmp(e->val, "gauss", 5) ? e->val : "normal");
    if (!strncmp(e->val, "gauss", 5))
        strncat(v, e->val + 5, sizeof v - strlen(v) - 1);
    size_t n = strcspn(v, ":");
    const char *arg = v[n] ? v + n + 1 : NULL;
    char *end;
    if (n == 6 && !strncmp(v, "random", 6)) {
        if (arg)
            return bad(t, e, "random takes no value");
    } else if ((n == 4 && !strncmp(v, "zipf", 4)) || (n == 6 && !strncmp(v, "pareto", 6)) ||
               (n == 6 && !strncmp(v, "normal", 6))) {
        if (!arg || (strtod(arg, &end), end == arg))
            return bad(t, e, "wants a number after the distribution's name");
        if (*end == ':')
            return fail(t->c, -ENOTSUP, e->line, "random_distribution=%s: a centre "
                        "(second value) is not supported by pinio bench", e->val);
        if (*end)
            return bad(t, e, "wants a number after the distribution's name");
    } else if (n == 5 && !strncmp(v, "zoned", 5)) {
        if (!arg)
            return bad(t, e, "wants zoned:ACCESS/SIZE:...");
    } else {
        return fail(t->c, -ENOTSUP, e->line, "random_distribution=%s is not supported by "
                    "pinio bench (random, zipf, pareto, normal, zoned)", e->val);
    }
    return push_opt(t->argv, "--random-distribution", "%s", v);
}

static int tr_verify(job_tr *t)
{
    const kv *e = kv_get(t->k, "verify");
    int rc;
    if (e) {
        if ((rc = need_val(t, e)))
            return rc;
        const char *m = e->val;
        if (!strcmp(m, "crc32c-intel"))
            m = "crc32c";
        if (!strcmp(m, "pattern"))
            rc = note(t->c, e->line, "verify=pattern: pinio's own pattern after a header per "
                      "block (offset, seed)");
        else if (strcmp(m, "crc32c") && strcmp(m, "sha256") && strcmp(m, "0") &&
                 strcmp(m, "null"))
            return fail(t->c, -ENOTSUP, e->line, "verify=%s is not supported by pinio bench "
                        "(pattern, crc32c, sha256)", e->val);
        /* one element: bench's --verify takes an optional value, which
         * getopt only sees attached */
        if (!rc && strcmp(m, "0") && strcmp(m, "null"))
            rc = sv_pushf(t->argv, "--verify=%s", m);
        if (rc)
            return rc;
    }
    return opt_flag(t, "verify_only", "--verify-only");
}

static int tr_log(job_tr *t, const char *name, size_t index)
{
    static const char *const logs[] = {"write_bw_log", "write_iops_log", "write_lat_log"};
    const kv *avg = kv_get(t->k, "log_avg_msec"), *first = NULL;
    uint64_t ms = 0;
    int rc;
    for (size_t i = 0; i < 3; i++) {
        const kv *e = kv_get(t->k, logs[i]);
        if (!e)
            continue;
        if (!first)
            first = e;
        else if (strcmp(e->val ? e->val : "", first->val ? first->val : "") &&
                 (rc = note(t->c, e->line, "%s: one log holds bandwidth, IOPS and latency: "
                            "written under %s's name", e->key, first->key)))
            return rc;
    }
    if (avg) {
        if ((rc = need_val(t, avg)))
            return rc;
        if (fio_uint(avg->val, &ms) || ms > 3600000)
            return bad(t, avg, "not a number of milliseconds");
    }
    if (!first)
        return avg ? note(t->c, avg->line, "log_avg_msec without write_bw_log, write_iops_log "
                          "or write_lat_log: nothing is logged") : 0;
    if (!ms) {
        ms = 1000;
        if ((rc = note(t->c, first->line, "%s: fio logs every I/O without log_avg_msec; "
                       "pinio bench logs per interval, 1000 ms", first->key)))
            return rc;
    }
    const char *prefix = first->val && *first->val ? first->val : name;
    if ((rc = push_opt(t->argv, "--log-interval", "%llu", (unsigned long long)ms)))
        return rc;
    return push_opt(t->argv, "--log-file", "%s.%zu.csv", prefix, index);
}

static int tr_notes(job_tr *t)
{
    static const char *const harmless[][2] = {
        {"description", "shown by fio only"},
        {"thread", "pinio bench's jobs are always threads"},
        {"randrepeat", "pinio bench's random order always repeats for a --seed (default 1)"},
        {"new_group", "reporting groups follow stonewall in pinio bench"},
        {"clat_percentiles", "pinio bench always reports latency percentiles"},
        {"lat_percentiles", "pinio bench always reports latency percentiles"},
    };
    for (size_t i = 0; i < sizeof harmless / sizeof *harmless; i++) {
        const kv *e = kv_get(t->k, harmless[i][0]);
        int rc = e ? note(t->c, e->line, "%s: no effect (%s)", e->key, harmless[i][1]) : 0;
        if (rc)
            return rc;
    }
    return 0;
}

/* Stops translating a job at the first failure (finish_job() frees). */
#define TRY(expr)                                                                                  \
    do {                                                                                           \
        if ((rc = (expr)))                                                                         \
            goto out;                                                                              \
    } while (0)

/* fio's iodepth defaults to 1, and a synchronous engine runs one I/O at a
 * time whatever iodepth says. */
static int tr_qd(job_tr *t, bool sync)
{
    const kv *e = kv_get(t->k, "iodepth");
    uint64_t x = 1;
    int rc;
    if (e && (!e->val || fio_uint(e->val, &x) || !x || x > 65536))
        return bad(t, e, "not a queue depth");
    if (sync && x > 1) {
        if ((rc = note(t->c, e->line, "iodepth=%llu: synchronous engines run one I/O at a "
                       "time: --qd 1", (unsigned long long)x)))
            return rc;
        x = 1;
    }
    if ((rc = push_opt(t->argv, "--qd", "%llu", (unsigned long long)x)))
        return rc;
    if (!(e = kv_get(t->k, "numjobs")))
        return 0;
    if (!e->val || fio_uint(e->val, &x) || !x || x > 4096)
        return bad(t, e, "not a job count");
    /* fio's clones each cover the whole region */
    if ((rc = push_opt(t->argv, "--jobs", "%llu", (unsigned long long)x)))
        return rc;
    return push_opt(t->argv, "--jobs-share", "%s", "whole");
}

/* direct=1 and buffered=0 say the same (the later line wins); fio's default
 * is buffered. fio's invalidate=1 default drops the file's cached pages. */
static int tr_direct(job_tr *t)
{
    const kv *d = kv_get(t->k, "direct"), *b = kv_get(t->k, "buffered");
    bool direct = false, buffered, inval;
    int rc;
    if (d && b && b->line > d->line)
        d = NULL;
    if (d)
        rc = get_bool(t, "direct", false, &direct, NULL);
    else if ((rc = get_bool(t, "buffered", true, &buffered, NULL)) == 0)
        direct = !buffered;
    if (rc || (rc = push_opt(t->argv, "--direct", "%s", direct ? "on" : "off")) ||
        (rc = get_bool(t, "invalidate", true, &inval, NULL)))
        return rc;
    return inval && !t->s3 ? push_opt(t->argv, "--cache", "%s", "cold") : 0; /* no pages */
}

static int tr_engine_flags(job_tr *t)
{
    bool on;
    const kv *e;
    int rc = get_bool(t, "fixedbufs", false, &on, &e);
    if (!rc && e)
        rc = sv_push(t->argv, on ? "--fixed=1" : "--fixed=0");
    if (rc || (rc = opt_flag(t, "registerfiles", "--regfiles")) ||
        (rc = opt_flag(t, "sqthread_poll", "--sqpoll")))
        return rc;
    return opt_flag(t, "hipri", "--iopoll");
}

/* mem=: fio's buffer kinds are all host memory (malloc the default); a
 * GPU is named as pinio names it, cuda:N or hip:N (fio's cudamalloc needs
 * its cuda engine, which bench is not). */
static int tr_mem(job_tr *t)
{
    const kv *e = kv_get(t->k, "mem");
    int rc;
    if (!e)
        return 0;
    if ((rc = need_val(t, e)))
        return rc;
    if (!strcmp(e->val, "malloc") || !strcmp(e->val, "host"))
        return 0;
    if (strncmp(e->val, "cuda:", 5) && strncmp(e->val, "hip:", 4))
        return fail(t->c, -ENOTSUP, e->line, "mem=%s is not supported by pinio bench (malloc, "
                    "cuda:N, hip:N)", e->val);
    return push_opt(t->argv, "--mem", "%s", e->val);
}

static int tr_pcts(job_tr *t)
{
    const kv *e = kv_get(t->k, "percentile_list");
    int rc;
    if (!e)
        return 0;
    if ((rc = need_val(t, e)))
        return rc;
    if (strspn(e->val, "0123456789.:") != strlen(e->val))
        return bad(t, e, "wants percentiles separated by ':'");
    return push_opt(t->argv, "--percentile-list", "%s", e->val);
}

/* The open job section becomes a bench_job. */
static int finish_job(ctx *c)
{
    bench_jobfile *jf = c->out;
    strvec argv = {0};
    job_tr t = {.c = c, .k = &c->job, .argv = &argv, .kb_base = 1024};
    const kv *e;
    bool sync, stonewall;
    uint64_t x;
    int rc = 0;

    if (!c->job_name)
        return 0;
    if ((e = kv_get(&c->job, "kb_base"))) {
        if (!e->val || fio_uint(e->val, &x) || (x != 1000 && x != 1024))
            TRY(bad(&t, e, "wants 1000 or 1024"));
        t.kb_base = (unsigned)x;
    }
    const char *name = c->job_name;
    if ((e = kv_get(&c->job, "name")) && e->val && *e->val)
        name = e->val;

    /* the order of the options is fixed, whatever the file's order */
    TRY(sv_push(&argv, "bench"));
    TRY(tr_notes(&t));
    TRY(tr_engine(&t, &sync));
    TRY(tr_files(&t, name));
    TRY(tr_fservice(&t));
    TRY(opt_size(&t, "filesize", "--filesize"));
    TRY(tr_rw(&t));
    TRY(tr_bs(&t));
    TRY(opt_size(&t, "blockalign", "--blockalign"));
    TRY(tr_qd(&t, sync));
    TRY(opt_size(&t, "size", "--size"));
    TRY(opt_size(&t, "offset", "--offset"));
    TRY(opt_size(&t, "io_size", "--io-size"));
    TRY(opt_uint(&t, "loops", "--loops", 1, UINT32_MAX));
    TRY(tr_direct(&t));
    TRY(tr_time(&t));
    TRY(opt_secs(&t, "ramp_time", "--ramp-time"));
    TRY(opt_secs(&t, "startdelay", "--startdelay"));
    TRY(tr_rate(&t));
    TRY(tr_dist(&t));
    TRY(opt_flag(&t, "norandommap", "--norandommap"));
    TRY(tr_verify(&t));
    TRY(opt_uint(&t, "randseed", "--seed", 0, UINT64_MAX));
    TRY(opt_flag(&t, "group_reporting", "--group-reporting"));
    TRY(tr_pcts(&t));
    TRY(tr_log(&t, name, jf->njobs + 1));
    TRY(tr_engine_flags(&t));
    TRY(tr_mem(&t));
    /* stonewall (its own or inherited) makes a job wait for all before it */
    TRY(get_bool(&t, "stonewall", false, &stonewall, NULL));

    if (jf->njobs == c->jobs_cap) {
        size_t cap = c->jobs_cap ? c->jobs_cap * 2 : 8;
        bench_job *j = realloc(jf->jobs, cap * sizeof *j);
        if (!j)
            TRY(-ENOMEM);
        jf->jobs = j;
        c->jobs_cap = cap;
    }
    bench_job *j = &jf->jobs[jf->njobs];
    if (!(j->name = strdup(name)))
        TRY(-ENOMEM);
    j->group = jf->njobs == 0 ? 0 : jf->ngroups - 1 + stonewall;
    j->argc = (int)argv.n;
    j->argv = argv.v;
    memset(&argv, 0, sizeof argv);
    jf->ngroups = j->group + 1;
    jf->njobs++;
out:
    sv_free(&argv);
    free(c->job_name);
    c->job_name = NULL;
    kv_free(&c->job);
    if (rc == -ENOMEM)
        return fail(c, rc, 0, "out of memory");
    return rc;
}

/* ---- reading ------------------------------------------------------------- */

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = 0;
    return s;
}

static int read_line(ctx *c, char *s, unsigned line)
{
    s[strcspn(s, ";#")] = 0; /* fio: a comment also after a value */
    s = trim(s);
    if (!*s)
        return 0;
    if (*s == '[') {
        char *close = strchr(s, ']');
        if (!close || close[1] || close == s + 1)
            return fail(c, -EINVAL, line, "expected a section header '[name]'");
        *close = 0;
        int rc = finish_job(c);
        if (rc)
            return rc;
        c->any_section = true;
        c->in_global = !strcmp(s + 1, "global");
        if (!c->in_global) {
            if (!(c->job_name = strdup(trim(s + 1))))
                return fail(c, -ENOMEM, 0, "out of memory");
            c->job_line = line;
            if ((rc = kv_copy(&c->job, &c->global)))
                return fail(c, rc, 0, "out of memory");
        }
        return 0;
    }
    char *eq = strchr(s, '=');
    char *val = NULL;
    if (eq) {
        *eq = 0;
        val = trim(eq + 1);
    }
    char *key = trim(s);
    if (!*key)
        return fail(c, -EINVAL, line, "expected 'key=value', a flag or '[section]'");
    for (char *p = key; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '_' && *p != '-')
            return fail(c, -EINVAL, line, "expected 'key=value', a flag or '[section]'");
    if (!strcmp(key, "include") || !strncmp(key, "include ", 8))
        return fail(c, -ENOTSUP, line, "include is not supported by pinio bench");
    const char *k = canon(key);
    if (!k)
        return fail(c, -ENOTSUP, line, "option '%s' is not supported by pinio bench", key);
    if (val && strchr(val, '$') && !rank_names(k, val))
        return fail(c, -ENOTSUP, line, "%s=%s: $VARIABLES are not supported by pinio bench",
                    key, val);
    if (!c->any_section)
        return fail(c, -EINVAL, line, "option '%s' before the first [section]", key);
    int rc = kv_set(c->in_global ? &c->global : &c->job, k, val, line);
    return rc ? fail(c, rc, 0, "out of memory") : 0;
}

void bench_jobfile_free(bench_jobfile *jf)
{
    if (!jf)
        return;
    for (size_t i = 0; i < jf->njobs; i++) {
        free(jf->jobs[i].name);
        for (int a = 0; a < jf->jobs[i].argc; a++)
            free(jf->jobs[i].argv[a]);
        free(jf->jobs[i].argv);
    }
    free(jf->jobs);
    for (size_t i = 0; i < jf->nnotes; i++)
        free(jf->notes[i]);
    free(jf->notes);
    memset(jf, 0, sizeof *jf);
}

int bench_jobfile_parse(const char *path, bench_jobfile *out, char *err, size_t errlen)
{
    ctx c = {.path = path, .err = err, .errlen = errlen, .out = out};
    memset(out, 0, sizeof *out);
    if (errlen)
        err[0] = 0;
    /* Read whole first: a job file is small, and getline() straight from
     * /dev/zero (or a FIFO nobody writes) would grow or wait forever. */
    char *text;
    size_t tlen;
    int e = cli_text_read(path, JOBFILE_MAX, &text, &tlen);
    if (e < 0)
        return fail(&c, e, 0, "%s",
                    e == -EFBIG    ? "over " JOBFILE_MAX_TEXT ": not a job file"
                    : e == -EINVAL ? "not a regular file or a pipe"
                                   : strerror(-e));
    FILE *f = tlen ? fmemopen(text, tlen, "r") : NULL;
    if (tlen && !f) {
        e = -errno;
        free(text);
        return fail(&c, e, 0, "%s", strerror(-e));
    }
    char *buf = NULL;
    size_t cap = 0;
    unsigned line = 0;
    int rc = 0;
    ssize_t n;
    while (!rc && f && (n = getline(&buf, &cap, f)) >= 0) {
        line++;
        if (memchr(buf, 0, (size_t)n))
            rc = fail(&c, -EINVAL, line, "a NUL byte: not a job file");
        else
            rc = read_line(&c, buf, line);
    }
    if (!rc && f && ferror(f))
        rc = fail(&c, -EIO, 0, "read error");
    free(buf);
    if (f)
        fclose(f);
    free(text);
    if (!rc)
        rc = finish_job(&c);
    if (!rc && !out->njobs)
        rc = fail(&c, -EINVAL, 0, "no job section (only [global] or nothing)");
    if (!rc) {
        out->notes = c.notes.v;
        out->nnotes = c.notes.n;
        c.notes.v = NULL;
        c.notes.n = 0;
    }
    free(c.job_name);
    kv_free(&c.job);
    kv_free(&c.global);
    sv_free(&c.notes);
    if (rc)
        bench_jobfile_free(out);
    return rc;
}
