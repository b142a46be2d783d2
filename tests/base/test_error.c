/* pinio_strerror() and pinio_err_name() cover every errno Linux defines:
 * checked against glibc's own tables (strerrorname_np, glibc >= 2.32) over
 * 1 .. 133, so that a kernel error never prints as "unknown error". */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "pinio/common.h"

/* Names pinio spells differently from glibc for the same number. */
static int same_name(const char *ours, const char *libc)
{
    if (strcmp(ours, libc) == 0)
        return 1;
    return strcmp(ours, "ENOTSUP") == 0 && strcmp(libc, "EOPNOTSUPP") == 0;
}

Test(error, every_errno_has_its_name_and_text)
{
    unsigned named = 0;
    for (int e = 1; e <= 133; e++) {
        const char *libc = strerrorname_np(e);
        if (!libc)
            continue; /* 41 and 58: unused numbers on Linux */
        named++;
        const char *name = pinio_err_name(-e), *text = pinio_strerror(-e);
        cr_assert(same_name(name, libc), "errno %d: name %s, glibc says %s", e, name, libc);
        cr_assert_str_eq(pinio_err_name(e), name, "errno %d: positive and negative differ", e);
        cr_assert(strcmp(text, "unknown error") != 0 && text[0], "errno %d (%s): no text", e, libc);
    }
    cr_assert_eq(named, 131);
    cr_assert_str_eq(pinio_strerror(-ELOOP), "too many levels of symbolic links");
    cr_assert_str_eq(pinio_strerror(-EUCLEAN), "structure needs cleaning");
}

Test(error, unknown_and_pinio_codes)
{
    cr_assert_str_eq(pinio_err_name(-41), "unknown");
    cr_assert_str_eq(pinio_strerror(-134), "unknown error");
    cr_assert_str_eq(pinio_err_name(PINIO_ECHANGED), "PINIO_ECHANGED");
    cr_assert_str_eq(pinio_err_name(PINIO_EDIGESTS), "PINIO_EDIGESTS");
    cr_assert_str_eq(pinio_strerror(0), "success");
}
