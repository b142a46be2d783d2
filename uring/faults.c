/* PINIO_FAULTS: deterministic fault injection for the engine (grammar in
 * include/pinio/ring.h).
 *
 * Why in-process: the kernel's own fault injection needs CONFIG_FAULT_INJECTION
 * and root, and LD_PRELOAD cannot intercept liburing 2.3 (its syscalls are
 * inline). Rewriting results at the one place where the engine consumes
 * completions exercises exactly the code paths a real EIO/short/EAGAIN takes. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ring_internal.h"

static const struct {
    const char *name;
    unsigned flag;
} setup_names[] = {
    {"single", IORING_SETUP_SINGLE_ISSUER}, {"defer", IORING_SETUP_DEFER_TASKRUN},
    {"coop", IORING_SETUP_COOP_TASKRUN},    {"taskrun", IORING_SETUP_TASKRUN_FLAG},
    {"submitall", IORING_SETUP_SUBMIT_ALL}, {"cqsize", IORING_SETUP_CQSIZE},
};

static int parse_u64(const char *s, const char *end, uint64_t *v)
{
    if (s == end)
        return -1;
    uint64_t x = 0;
    for (; s < end; s++) {
        if (*s < '0' || *s > '9' || x > UINT64_MAX / 10 - 1)
            return -1;
        x = x * 10 + (uint64_t)(*s - '0');
    }
    *v = x;
    return 0;
}

/* "N" or "NxK" between s and end. */
static int parse_at(const char *s, const char *end, uint64_t *first, uint64_t *count)
{
    const char *x = memchr(s, 'x', (size_t)(end - s));
    *count = 1;
    if (x && parse_u64(x + 1, end, count))
        return -1;
    if (parse_u64(s, x ? x : end, first) || *first == 0 || *count == 0)
        return -1;
    return 0;
}

static int parse_item(pinio__faults *f, const char *s, const char *end)
{
    static const struct {
        const char *name;
        enum pinio__fault_kind kind;
    } kinds[] = {{"eio@", PINIO__F_EIO},
                 {"short@", PINIO__F_SHORT},
                 {"eagain@", PINIO__F_EAGAIN},
                 {"eintr@", PINIO__F_EINTR},
                 {"corrupt@", PINIO__F_CORRUPT}};
    size_t n = (size_t)(end - s);
#define IS(lit) (n == sizeof(lit) - 1 && !memcmp(s, lit, n))
#define PREFIX(lit) (n > sizeof(lit) - 1 && !memcmp(s, lit, sizeof(lit) - 1))
    if (IS("dioinval")) {
        f->dioinval = true;
        return 0;
    }
    if (IS("regnomem")) {
        f->regnomem = true;
        return 0;
    }
    if (IS("sparseinval")) {
        f->sparseinval = true;
        return 0;
    }
    if (IS("setupnosys")) {
        f->setupnosys = true;
        return 0;
    }
    if (IS("trimnotsup")) {
        f->trimnotsup = true;
        return 0;
    }
    if (IS("stagewritehold")) {
        f->stagewritehold = true;
        return 0;
    }
    if (IS("nodiscardcmd")) {
        f->nodiscardcmd = true;
        return 0;
    }
    if (PREFIX("setupinval:")) {
        const char *v = s + strlen("setupinval:");
        for (size_t i = 0; i < sizeof setup_names / sizeof setup_names[0]; i++)
            if ((size_t)(end - v) == strlen(setup_names[i].name) &&
                !memcmp(v, setup_names[i].name, (size_t)(end - v))) {
                f->setupinval |= setup_names[i].flag;
                return 0;
            }
        return -1;
    }
    if (PREFIX("stagecorrupt@"))
        return parse_u64(s + strlen("stagecorrupt@"), end, &f->stagecorrupt) || !f->stagecorrupt;
    if (PREFIX("stagerename@"))
        return parse_u64(s + strlen("stagerename@"), end, &f->stagerename) || !f->stagerename;
    if (PREFIX("seed=")) {
        uint64_t v;
        if (parse_u64(s + 5, end, &v))
            return -1;
        f->rng = v ? v : 0x9e3779b97f4a7c15ull; /* xorshift state must not be 0 */
        return 0;
    }
    if (PREFIX("rate=")) {
        char buf[32];
        size_t m = n - 5;
        if (m >= sizeof buf)
            return -1;
        memcpy(buf, s + 5, m);
        buf[m] = 0;
        char *e;
        double r = strtod(buf, &e);
        if (*e || !(r >= 0.0 && r <= 1.0))
            return -1;
        f->rate = r;
        return 0;
    }
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        size_t k = strlen(kinds[i].name);
        if (n > k && !memcmp(s, kinds[i].name, k)) {
            if (f->nrules == sizeof f->rules / sizeof f->rules[0])
                return -1;
            pinio__fault_rule *r = &f->rules[f->nrules];
            if (parse_at(s + k, end, &r->first, &r->count))
                return -1;
            r->kind = kinds[i].kind;
            f->nrules++;
            return 0;
        }
    }
    return -1;
#undef IS
#undef PREFIX
}

int pinio__faults_parse(const char *spec, pinio__faults **out, pinio_diag *diag)
{
    *out = NULL;
    if (!spec || !*spec)
        return 0;
    pinio__faults *f = calloc(1, sizeof *f);
    if (!f)
        return -ENOMEM;
    f->rng = 1;
    const char *s = spec;
    while (*s) {
        const char *end = strchr(s, ',');
        if (!end)
            end = s + strlen(s);
        if (end > s && parse_item(f, s, end)) {
            pinio_diag_set(diag, -EINVAL, "PINIO_FAULTS: bad item '%.*s' in '%s'",
                              (int)(end - s), s, spec);
            free(f);
            return -EINVAL;
        }
        s = *end ? end + 1 : end;
    }
    *out = f;
    return 0;
}

static uint64_t next_rand(pinio__faults *f)
{
    /* xorshift64*: small, seedable, identical on every platform. */
    uint64_t x = f->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    f->rng = x;
    return x * 0x2545f4914f6cdd1dull;
}

/* A short count in [1, len-1]: the caller must see progress but not all of it
 * (a 0 would mean end of file, which a real kernel only says at EOF). */
static int short_of(pinio__faults *f, int res)
{
    if (res <= 1)
        return res;
    return 1 + (int)(next_rand(f) % (uint64_t)(res - 1));
}

int pinio__faults_completion(pinio__faults *f, int res, size_t len)
{
    return pinio__faults_completion_buf(f, res, NULL, len);
}

int pinio__faults_completion_buf(pinio__faults *f, int res, void *buf, size_t len)
{
    (void)len;
    uint64_t n = ++f->completions;
    for (unsigned i = 0; i < f->nrules; i++) {
        const pinio__fault_rule *r = &f->rules[i];
        if (n < r->first || n - r->first >= r->count)
            continue;
        switch (r->kind) {
        case PINIO__F_EIO:
            return -EIO;
        case PINIO__F_EAGAIN:
            return -EAGAIN;
        case PINIO__F_EINTR:
            return -EINTR;
        case PINIO__F_SHORT:
            return res > 0 ? short_of(f, res) : res;
        case PINIO__F_CORRUPT:
            /* A seeded byte of what was read, inverted: never a no-op. */
            if (buf && res > 0)
                ((unsigned char *)buf)[next_rand(f) % (uint64_t)res] ^= 0xff;
            return res;
        }
    }
    if (f->rate > 0.0 && res >= 0) {
        double u = (double)(next_rand(f) >> 11) / (double)(1ull << 53);
        if (u < f->rate)
            return (next_rand(f) & 1) && res > 1 ? short_of(f, res) : -EAGAIN;
    }
    return res;
}
