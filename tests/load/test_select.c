/* The prepared filter set (src/load/select.c) against the one-name matcher
 * it replaces in selection: the same answer for every name and filter list,
 * literal prefixes, a trailing '.', globs and names holding a NUL included;
 * a pattern matches the name it equals, glob characters or not; exact sets
 * match only the names they hold.
 * The set exists for speed (safe_open's windows pass thousands of exact
 * names); only its answers are tested here, never its time. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "src/load/plan_internal.h"
#include "tests/common/helpers.h"

static void same(const char *const *f, size_t nf, const char *name, size_t len)
{
    pinio__filters fs;
    cr_assert_eq(pinio__filters_prepare(&fs, f, nf, false), 0);
    bool want = pinio__filter_match(f, nf, name, len);
    bool got = pinio__filters_match(&fs, name, len);
    cr_assert_eq(got, want, "name '%.*s' against %zu filters (first '%s'): set says %d, match %d",
                 (int)len, name, nf, nf ? f[0] : "", got, want);
    pinio__filters_free(&fs);
}

Test(select, the_rules_by_hand)
{
    const char *f[] = { "model.layers", "lm_head.", "a.b.c", "emb*", "x?" };
    const char *yes[] = { "model.layers", "model.layers.0.w", "lm_head.weight", "a.b.c",
                          "a.b.c.d", "embed", "xy" };
    const char *no[] = { "model.layersX", "model", "lm_head", "a.b", "a.b.cd", "xyz", "" };
    pinio__filters fs;
    cr_assert_eq(pinio__filters_prepare(&fs, f, 5, false), 0);
    for (size_t i = 0; i < sizeof(yes) / sizeof(*yes); i++)
        cr_assert(pinio__filters_match(&fs, yes[i], strlen(yes[i])), "%s", yes[i]);
    for (size_t i = 0; i < sizeof(no) / sizeof(*no); i++)
        cr_assert(!pinio__filters_match(&fs, no[i], strlen(no[i])), "%s", no[i]);
    /* a name with a NUL matches no pattern, as a C string cannot hold it */
    cr_assert(!pinio__filters_match(&fs, "a.b.c\0x", 7));
    pinio__filters_free(&fs);
    pinio__filters empty;
    cr_assert_eq(pinio__filters_prepare(&empty, NULL, 0, false), 0);
    cr_assert(pinio__filters_match(&empty, "anything", 8), "no filters select everything");
    pinio__filters_free(&empty);
}

/* Random dotted names from a small alphabet, so that prefixes, equal names
 * and near misses are common; filters cut from them or made up. */
static void rand_name(uint64_t *st, char *out, size_t cap)
{
    static const char *parts[] = { "a", "b", "ab", "w", "", "0", "10", "x*", "l?" };
    size_t n = 1 + t_rand(st) % 4, k = 0;
    for (size_t i = 0; i < n && k + 4 < cap; i++) {
        const char *p = parts[t_rand(st) % 9];
        if (i && t_rand(st) % 8)
            out[k++] = '.';
        while (*p && k + 1 < cap)
            out[k++] = *p++;
    }
    if (t_rand(st) % 6 == 0 && k + 1 < cap)
        out[k++] = '.';
    out[k] = '\0';
}

/* Each of `names` matched (`want`) or not by the set and, unless it is
 * exact, by the one-name matcher too. */
#define EXPECT(fs, f, nf, names, want)                                                        \
    for (size_t i_ = 0; i_ < sizeof(names) / sizeof(*(names)); i_++) {                        \
        const char *n_ = (names)[i_];                                                         \
        cr_assert_eq(pinio__filters_match(fs, n_, strlen(n_)), want, "%s", n_);               \
        if (!(fs)->exact)                                                                     \
            cr_assert_eq(pinio__filter_match(f, nf, n_, strlen(n_)), want, "%s", n_);         \
    }

/* Issue 37 item 3: names holding glob characters (bitsandbytes' and
 * converted checkpoints have them) are selected, and split, by themselves:
 * fnmatch alone reads "e[0].w" as "e0.w". */
Test(select, a_pattern_matches_the_name_it_equals)
{
    const char *f[] = { "e[0].w", "g*.w", "q?.b", "h[1]" };
    const char *yes[] = { "e[0].w", "e[0].w.x", "e0.w", "g*.w", "gx.w", "q?.b", "qz.b", "h[1]",
                          "h[1].w", "h1" };
    const char *no[] = { "e1.w", "e[0].wx", "q??.b", "h[1]x", "h11" };
    pinio__filters fs;
    cr_assert_eq(pinio__filters_prepare(&fs, f, 4, false), 0);
    EXPECT(&fs, f, 4, yes, true);
    EXPECT(&fs, f, 4, no, false);
    pinio__filters_free(&fs);
    /* each alone, as a split rule is matched */
    for (size_t i = 0; i < 4; i++)
        cr_assert(pinio__filter_match(&f[i], 1, f[i], strlen(f[i])), "%s", f[i]);
}

/* Exact sets (pinio_plan_opts::filters_exact): "x.weight" selects itself,
 * never "x.weight.absmax" nor what it would match as a glob. */
Test(select, exact_names_match_only_themselves)
{
    const char *f[] = { "x.weight", "e[0].w", "g*", "lm_head." };
    const char *no[] = { "x.weight.absmax", "x", "e0.w", "gx", "g", "lm_head.weight", "" };
    pinio__filters fs;
    cr_assert_eq(pinio__filters_prepare(&fs, f, 4, true), 0);
    EXPECT(&fs, f, 4, f, true);
    EXPECT(&fs, f, 4, no, false);
    cr_assert(!pinio__filters_match(&fs, "x.weight\0", 9), "a name with a NUL");
    pinio__filters_free(&fs);
}

Test(select, the_same_answer_as_one_by_one)
{
    uint64_t st = 20261203;
    char names[64][32], filt[16][32];
    const char *f[16];
    for (int round = 0; round < 400; round++) {
        size_t nf = t_rand(&st) % 16;
        for (size_t i = 0; i < nf; i++) {
            rand_name(&st, filt[i], sizeof(filt[i]));
            f[i] = filt[i];
        }
        for (size_t i = 0; i < 64; i++) {
            rand_name(&st, names[i], sizeof(names[i]));
            same(f, nf, names[i], strlen(names[i]));
        }
        /* the filters themselves, and each cut at every length */
        for (size_t i = 0; i < nf; i++)
            for (size_t l = 0; l <= strlen(f[i]); l++)
                same(f, nf, f[i], l);
    }
}
