/* The options convention: see opts.h. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "pinio/common.h"
#include "src/base/opts.h"

void pinio__opts_init(void *dst, size_t size, const void *defaults, size_t dsize)
{
    if (!dst || size < sizeof(size_t))
        return;
    memset(dst, 0, size);
    memcpy(dst, defaults, size < dsize ? size : dsize);
    memcpy(dst, &size, sizeof(size));
}

int pinio__opts_copy(void *dst, size_t size, const void *user, const char *what,
                     pinio_diag *diag)
{
    if (!user)
        return 0;
    size_t usize;
    memcpy(&usize, user, sizeof(usize));
    if (usize < sizeof(size_t)) {
        pinio_diag_set(diag, -EINVAL,
                       "%s: struct_size %zu (start from the _opts_default() function)", what,
                       usize);
        return -EINVAL;
    }
    const uint8_t *u = user;
    for (size_t i = size; i < usize; i++)
        if (u[i]) {
            pinio_diag_set(diag, -E2BIG,
                           "%s: the caller sets a field this library (%s) does not know, at "
                           "byte %zu of %zu",
                           what, pinio_version(), i, usize);
            return -E2BIG;
        }
    memcpy(dst, user, usize < size ? usize : size);
    memcpy(dst, &size, sizeof(size));
    return 0;
}

int pinio__digests_check(size_t nexpected, size_t nfiles, const char *first, pinio_diag *diag)
{
    if (!nexpected || nexpected == nfiles)
        return 0;
    pinio_diag_set(diag, PINIO_EDIGESTS,
                   "%zu expected SHA-256 digest%s for %zu file%s: give one per file, in the "
                   "order the files resolve (%s first)",
                   nexpected, nexpected == 1 ? "" : "s", nfiles, nfiles == 1 ? "" : "s", first);
    return PINIO_EDIGESTS;
}
