/* pinio_bytes: every function and edge of the contract. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "pinio/bytes.h"
#include "src/bytes/file_internal.h"
#include "helpers.h"

/* A static page made read-only: any write through pinio would crash. */
static uint8_t rodata_page[4096] __attribute__((aligned(4096)));

static void protect_page(void)
{
    fill_pattern(rodata_page, sizeof(rodata_page), 21);
    cr_assert_eq(mprotect(rodata_page, sizeof(rodata_page), PROT_READ), 0);
}

static void unprotect_page(void)
{
    mprotect(rodata_page, sizeof(rodata_page), PROT_READ | PROT_WRITE);
}

static pinio_bytes *bytes_over_counted(size_t len, atomic_int *frees, pinio_property prop)
{
    /* Aligned as a shared controller promises (alloc_align), so that a
     * unique one may hand its memory over in place. */
    pinio_view v = counted_view_aligned(len, 3, frees, PINIO_DEFAULT_ALIGN);
    pinio_bytes *b;
    cr_assert_eq(pinio_bytes_from_view(&b, &v, prop), 0);
    cr_assert_null(v.ref);
    return b;
}

static const uint8_t *rd(pinio_bytes *b)
{
    const uint8_t *p = NULL;
    cr_assert_eq(pinio_bytes_data(b, PINIO_ACCESS_COPY, &p, NULL), 0);
    return p;
}

static uint8_t *wr(pinio_bytes *b)
{
    uint8_t *p = NULL;
    cr_assert_eq(pinio_bytes_data_mut(b, PINIO_ACCESS_COPY, &p, NULL), 0);
    return p;
}

Test(bytes, from_data_queries_and_equal)
{
    pinio_bytes *a, *b, *z;
    cr_assert_eq(pinio_bytes_from_data(&a, "hello world", 11, 128), 0);
    cr_assert_eq(pinio_bytes_len(a), 11);
    cr_assert_eq(pinio_bytes_capacity(a), 11);
    cr_assert_eq(pinio_bytes_align(a), 128);
    cr_assert_eq((uintptr_t)rd(a) % 128, 0);
    cr_assert_eq(pinio_bytes_property(a), PINIO_PROP_NATIVE);
    cr_assert_eq(pinio_bytes_alloc(&z, 11, 0), 0);
    cr_assert_eq(pinio_bytes_align(z), PINIO_DEFAULT_ALIGN);
    for (int i = 0; i < 11; i++)
        cr_assert_eq(rd(z)[i], 0);
    cr_assert_eq(pinio_bytes_equal(a, z, NULL), 0);
    cr_assert_eq(pinio_bytes_copy_into(a, z, PINIO_ACCESS_ZERO_COPY, NULL), 0);
    cr_assert_eq(pinio_bytes_equal(a, z, NULL), 1);
    cr_assert_eq(pinio_bytes_from_data(&b, "hello", 5, 16), 0);
    cr_assert_eq(pinio_bytes_equal(a, b, NULL), 0, "different lengths");
    cr_assert_eq(pinio_bytes_copy_into(b, a, PINIO_ACCESS_COPY, NULL), -ERANGE);
    cr_assert_eq(pinio_bytes_copy_into(a, a, PINIO_ACCESS_COPY, NULL), -EINVAL);
    pinio_bytes *keep = (pinio_bytes *)0x1;
    cr_assert_eq(pinio_bytes_from_data(&keep, NULL, 3, 16), -EINVAL);
    cr_assert_eq(pinio_bytes_from_data(&keep, "x", 1, 48), -EINVAL);
    cr_assert_eq(keep, (pinio_bytes *)0x1);
    pinio_bytes_free(a);
    pinio_bytes_free(b);
    pinio_bytes_free(z);
    pinio_bytes_free(NULL);
}

Test(bytes, static_page_is_never_written)
{
    protect_page();
    pinio_view v = pinio_view_static(rodata_page, sizeof(rodata_page));
    pinio_bytes *b, *c, *r;
    cr_assert_eq(pinio_bytes_from_view(&b, &v, PINIO_PROP_OTHER), 0);
    cr_assert_eq(rd(b), rodata_page, "reads are zero-copy");
    uint8_t *w;
    cr_assert_eq(pinio_bytes_data_mut(b, PINIO_ACCESS_ZERO_COPY, &w, NULL), PINIO_EWOULD_COPY);
    cr_assert_eq(pinio_bytes_clone(b, PINIO_ACCESS_ZERO_COPY, &c, NULL), 0);
    cr_assert_eq(rd(c), rodata_page, "clone shares");
    cr_assert_eq(pinio_bytes_split(c, 100, PINIO_ACCESS_ZERO_COPY, &r, NULL), 0);
    cr_assert_eq(rd(r), rodata_page + 100, "split is zero-copy");
    wr(r)[0] ^= 1;     /* copy-on-write: would crash if it wrote the page */
    wr(c)[99] ^= 1;
    wr(b)[4095] ^= 1;
    cr_assert_eq(pinio_bytes_extend(b, "x", 1, PINIO_ACCESS_COPY, NULL), 0);
    cr_assert_eq(rd(r)[0], (uint8_t)(rodata_page[100] ^ 1));
    cr_assert(check_pattern(rodata_page, 0, 4096, 21), "the page kept its bytes");
    pinio_detached d;
    pinio_bytes *s;
    pinio_view v2 = pinio_view_static(rodata_page, 64);
    cr_assert_eq(pinio_bytes_from_view(&s, &v2, PINIO_PROP_OTHER), 0);
    cr_assert_eq(pinio_bytes_try_detach(s, PINIO_ACCESS_ZERO_COPY, &d, NULL), PINIO_EWOULD_COPY);
    cr_assert_eq(pinio_bytes_try_detach(s, PINIO_ACCESS_COPY, &d, NULL), 0);
    cr_assert_neq(d.ptr, rodata_page, "static memory is never handed over");
    pinio_detached_free(&d);
    pinio_bytes_free(b);
    pinio_bytes_free(c);
    pinio_bytes_free(r);
    unprotect_page();
}

Test(bytes, split_edges_leave_bytes_unchanged_on_error)
{
    atomic_int frees = 0;
    pinio_bytes *b = bytes_over_counted(32, &frees, PINIO_PROP_PINNED);
    const uint8_t *base = rd(b);
    pinio_bytes *r = (pinio_bytes *)0x1;
    cr_assert_eq(pinio_bytes_split(b, 33, PINIO_ACCESS_COPY, &r, NULL), -ERANGE);
    cr_assert_eq(pinio_bytes_split(b, SIZE_MAX, PINIO_ACCESS_COPY, &r, NULL), -ERANGE);
    cr_assert_eq(r, (pinio_bytes *)0x1);
    cr_assert_eq(pinio_bytes_len(b), 32);
    cr_assert_eq(rd(b), base);

    cr_assert_eq(pinio_bytes_split(b, 32, PINIO_ACCESS_ZERO_COPY, &r, NULL), 0);
    cr_assert_eq(pinio_bytes_len(r), 0);
    cr_assert_eq(rd(r), base + 32, "empty right part keeps its address");
    cr_assert_eq(pinio_bytes_property(r), PINIO_PROP_PINNED);
    pinio_bytes_free(r);
    cr_assert_eq(pinio_bytes_split(b, 0, PINIO_ACCESS_ZERO_COPY, &r, NULL), 0);
    cr_assert_eq(pinio_bytes_len(b), 0);
    cr_assert_eq(rd(b), base);
    cr_assert_eq(pinio_bytes_len(r), 32);
    cr_assert_eq(rd(r), base);
    pinio_bytes_free(b);
    cr_assert_eq(atomic_load(&frees), 0, "the empty part held no reference");
    pinio_bytes_free(r);
    cr_assert_eq(atomic_load(&frees), 1);
}

Test(bytes, nested_splits_to_single_bytes_free_once)
{
    enum { N = 48 };
    atomic_int frees = 0;
    pinio_bytes *parts[N];
    parts[0] = bytes_over_counted(N, &frees, PINIO_PROP_FILE);
    const uint8_t *base = rd(parts[0]);
    /* Split the tail off one byte at a time, alternating with mid splits. */
    size_t n = 1;
    while (n < N) {
        for (size_t i = 0, cur = n; i < cur && n < N; i++) {
            size_t len = pinio_bytes_len(parts[i]);
            if (len < 2)
                continue;
            cr_assert_eq(pinio_bytes_split(parts[i], len / 2, PINIO_ACCESS_ZERO_COPY,
                                           &parts[n], NULL), 0);
            n++;
        }
    }
    size_t seen[N] = { 0 };
    for (size_t i = 0; i < N; i++) {
        cr_assert_eq(pinio_bytes_len(parts[i]), 1);
        cr_assert_eq(pinio_bytes_property(parts[i]), PINIO_PROP_FILE);
        size_t off = (size_t)(rd(parts[i]) - base);
        cr_assert_lt(off, N, "zero-copy: inside the original buffer");
        cr_assert(check_pattern(rd(parts[i]), off, 1, 3));
        seen[off]++;
        pinio_bytes *e;
        cr_assert_eq(pinio_bytes_split(parts[i], 2, PINIO_ACCESS_COPY, &e, NULL), -ERANGE);
    }
    for (size_t i = 0; i < N; i++)
        cr_assert_eq(seen[i], 1, "every byte exactly once");
    for (size_t i = 0; i < N; i++) {
        cr_assert_eq(atomic_load(&frees), 0);
        pinio_bytes_free(parts[i]);
    }
    cr_assert_eq(atomic_load(&frees), 1);
}

Test(bytes, cow_isolation_between_clones_and_clone_after_mutation)
{
    atomic_int frees = 0;
    pinio_bytes *a = bytes_over_counted(16, &frees, PINIO_PROP_PINNED);
    const uint8_t *src = rd(a);
    wr(a)[0] = 'A'; /* unique: in place, no copy */
    cr_assert_eq(rd(a), src);
    cr_assert_eq(pinio_bytes_property(a), PINIO_PROP_PINNED);
    pinio_bytes *b, *c;
    cr_assert_eq(pinio_bytes_clone(a, PINIO_ACCESS_ZERO_COPY, &b, NULL), 0);
    cr_assert_eq(pinio_bytes_property(b), PINIO_PROP_PINNED, "clone keeps the property");
    cr_assert_eq(rd(b)[0], 'A', "clone after mutation sees it");
    uint8_t *w;
    cr_assert_eq(pinio_bytes_data_mut(b, PINIO_ACCESS_ZERO_COPY, &w, NULL), PINIO_EWOULD_COPY);
    wr(b)[1] = 'B';
    cr_assert_neq(rd(b), src);
    cr_assert_eq(rd(a)[1], src[1]);
    cr_assert_eq(rd(a), src);
    cr_assert_eq(pinio_bytes_property(b), PINIO_PROP_NATIVE, "after its copy b is native");
    cr_assert_eq(pinio_bytes_property(a), PINIO_PROP_PINNED);
    /* b keeps its reference on the source until its next exclusive call (a
     * concurrent reader of b may still use it); cloning b releases it. */
    cr_assert_eq(pinio_bytes_clone(b, PINIO_ACCESS_COPY, &c, NULL), 0);
    cr_assert_eq(memcmp(rd(c), "AB", 2), 0, "clone of the copy keeps b's mutation");
    wr(a)[2] = 'C'; /* a is unique again: in place */
    cr_assert_eq(rd(a), src);
    cr_assert_neq(rd(b)[2], 'C');
    wr(c)[0] = 'Z';
    cr_assert_eq(rd(b)[0], 'A');
    pinio_bytes_free(a);
    cr_assert_eq(atomic_load(&frees), 1, "b and c no longer use the source");
    pinio_bytes_free(b);
    pinio_bytes_free(c);
}

Test(bytes, native_clone_deep_copies_with_same_alignment)
{
    pinio_bytes *a, *b;
    cr_assert_eq(pinio_bytes_from_data(&a, "abcdef", 6, 512), 0);
    cr_assert_eq(pinio_bytes_clone(a, PINIO_ACCESS_ZERO_COPY, &b, NULL), PINIO_EWOULD_COPY);
    cr_assert_eq(pinio_bytes_clone(a, PINIO_ACCESS_COPY, &b, NULL), 0);
    cr_assert_neq(rd(a), rd(b));
    cr_assert_eq(pinio_bytes_align(b), 512);
    cr_assert_eq((uintptr_t)rd(b) % 512, 0);
    cr_assert_eq(pinio_bytes_equal(a, b, NULL), 1);
    pinio_bytes_free(a);
    pinio_bytes_free(b);
}

Test(bytes, extend_grows_in_place_moves_or_refuses)
{
    pinio_bytes *a;
    cr_assert_eq(pinio_bytes_from_data(&a, "abc", 3, 16), 0);
    cr_assert_eq(pinio_bytes_extend(a, "defg", 4, PINIO_ACCESS_ZERO_COPY, NULL), 0,
                 "native grows without a refused copy");
    cr_assert_eq(pinio_bytes_len(a), 7);
    cr_assert_geq(pinio_bytes_capacity(a), 16);
    cr_assert_eq(pinio_bytes_capacity(a) % 16, 0, "capacity rounded to the alignment");
    cr_assert_eq(memcmp(rd(a), "abcdefg", 7), 0);
    const uint8_t *before = rd(a);
    cr_assert_eq(pinio_bytes_extend(a, "h", 1, PINIO_ACCESS_ZERO_COPY, NULL), 0);
    cr_assert_eq(rd(a), before, "room left: written in place");
    cr_assert_eq(pinio_bytes_extend(a, NULL, 0, PINIO_ACCESS_ZERO_COPY, NULL), 0);
    cr_assert_eq(pinio_bytes_extend(a, NULL, 1, PINIO_ACCESS_COPY, NULL), -EINVAL);
    cr_assert_eq(pinio_bytes_extend(a, "x", SIZE_MAX, PINIO_ACCESS_COPY, NULL), -EOVERFLOW);
    cr_assert_eq(pinio_bytes_len(a), 8);
    pinio_bytes_free(a);

    atomic_int frees = 0;
    pinio_bytes *s = bytes_over_counted(9, &frees, PINIO_PROP_FILE);
    pinio_bytes *keep;
    cr_assert_eq(pinio_bytes_clone(s, PINIO_ACCESS_COPY, &keep, NULL), 0);
    const uint8_t *src = rd(s);
    cr_assert_eq(pinio_bytes_extend(s, "", 0, PINIO_ACCESS_COPY, NULL), 0);
    cr_assert_eq(rd(s), src, "extending by nothing copies nothing");
    cr_assert_eq(pinio_bytes_property(s), PINIO_PROP_FILE);
    cr_assert_eq(pinio_bytes_extend(s, "x", 1, PINIO_ACCESS_ZERO_COPY, NULL), PINIO_EWOULD_COPY);
    cr_assert_eq(pinio_bytes_len(s), 9);
    cr_assert_eq(rd(s), src);
    cr_assert_eq(pinio_bytes_extend(s, "x", 1, PINIO_ACCESS_COPY, NULL), 0);
    cr_assert_eq(pinio_bytes_len(s), 10);
    cr_assert_eq(pinio_bytes_property(s), PINIO_PROP_NATIVE);
    cr_assert_eq(pinio_bytes_capacity(s) % pinio_bytes_align(s), 0);
    cr_assert(check_pattern(rd(s), 0, 9, 3));
    cr_assert_eq(rd(s)[9], 'x');
    cr_assert(check_pattern(rd(keep), 0, 9, 3), "the shared source is untouched");
    pinio_bytes_free(s);
    pinio_bytes_free(keep);
    cr_assert_eq(atomic_load(&frees), 1);
}

Test(bytes, try_detach_native_and_shared)
{
    pinio_bytes *a;
    cr_assert_eq(pinio_bytes_from_data(&a, "0123456789", 10, 1024), 0);
    cr_assert_eq(pinio_bytes_extend(a, "A", 1, PINIO_ACCESS_COPY, NULL), 0);
    pinio_detached d;
    cr_assert_eq(pinio_bytes_try_detach(a, PINIO_ACCESS_ZERO_COPY, &d, NULL), 0);
    cr_assert_eq(d.len, 11);
    cr_assert_geq(d.size, 11);
    cr_assert_eq(d.align, 1024);
    cr_assert_eq((uintptr_t)d.ptr % 1024, 0);
    cr_assert_eq(memcmp(d.ptr, "0123456789A", 11), 0);
    pinio_detached_free(&d); /* ASan/valgrind check the function matches the allocation */

    atomic_int frees = 0;
    pinio_bytes *s = bytes_over_counted(20, &frees, PINIO_PROP_OTHER);
    const uint8_t *p = rd(s);
    cr_assert_eq(pinio_bytes_try_detach(s, PINIO_ACCESS_ZERO_COPY, &d, NULL), 0);
    cr_assert_eq(d.ptr, p, "unique adopted memory handed over without a copy");
    cr_assert_eq(d.len, 20);
    cr_assert_eq(atomic_load(&frees), 0);
    pinio_detached_free(&d);
    cr_assert_eq(atomic_load(&frees), 1, "freed by the adopter's own function");
}

/* try_detach hands over what alloc_align promised: pinio_view_copy memory
 * is created 16-aligned, so it reports 16 and comes back at least that
 * aligned; a view held twice (so never handed over) is copied into memory
 * of the same alignment, which zero-copy refuses. */
Test(bytes, try_detach_keeps_the_alignment_promise)
{
    uint8_t src[100];
    fill_pattern(src, sizeof src, 9);
    pinio_view v;
    cr_assert_eq(pinio_view_copy(&v, src, sizeof src), 0);
    pinio_bytes *b;
    cr_assert_eq(pinio_bytes_from_view(&b, &v, PINIO_PROP_OTHER), 0);
    size_t promised = pinio_bytes_align(b);
    cr_assert_eq(promised, 16, "pinio_view_copy allocates 16-aligned");
    pinio_detached d;
    cr_assert_eq(pinio_bytes_try_detach(b, PINIO_ACCESS_COPY, &d, NULL), 0);
    cr_assert_geq(d.align, promised, "detached at %zu, promised %zu", d.align, promised);
    cr_assert_eq((uintptr_t)d.ptr % promised, 0);
    cr_assert_eq(d.len, sizeof src);
    cr_assert(check_pattern(d.ptr, 0, sizeof src, 9));
    pinio_detached_free(&d);

    atomic_int frees = 0;
    v = counted_view_misaligned(100, 9, &frees);
    const uint8_t *mis = v.ptr;
    pinio_view keep = pinio_view_clone(&v);
    cr_assert_eq(pinio_bytes_from_view(&b, &v, PINIO_PROP_OTHER), 0);
    cr_assert_eq(pinio_bytes_align(b), 16);
    cr_assert_eq(pinio_bytes_try_detach(b, PINIO_ACCESS_ZERO_COPY, &d, NULL), PINIO_EWOULD_COPY,
                 "held twice: only a copy could be handed over, and zero-copy forbids it");
    cr_assert_eq(rd(b), mis, "the refused detach left b as it was");
    cr_assert_eq(pinio_bytes_try_detach(b, PINIO_ACCESS_COPY, &d, NULL), 0);
    cr_assert_neq(d.ptr, mis, "copied, not handed over");
    cr_assert_eq(d.align, 16);
    cr_assert_eq((uintptr_t)d.ptr % 16, 0);
    cr_assert(check_pattern(d.ptr, 0, 100, 9));
    cr_assert_eq(atomic_load(&frees), 0, "the other holder keeps the source");
    pinio_view_release(&keep);
    cr_assert_eq(atomic_load(&frees), 1);
    pinio_detached_free(&d);
}

Test(bytes, from_controller_ownership)
{
    pinio_controller *c;
    cr_assert_eq(pinio_controller_native_new(&c, 8, 8), 0);
    pinio_bytes *b = (pinio_bytes *)0x1;
    cr_assert_eq(pinio_bytes_from_controller(&b, c, 9), -ERANGE);
    cr_assert_eq(b, (pinio_bytes *)0x1);
    cr_assert_eq(pinio_bytes_from_controller(&b, c, 8), 0, "the caller still owned c");
    cr_assert_eq(pinio_bytes_controller(b), c);
    pinio_bytes_free(b);
}

static pinio_file *temp_file(char **path, size_t len)
{
    *path = make_temp_file("/tmp", len, 17);
    cr_assert_not_null(*path);
    pinio_file *f;
    cr_assert_eq(pinio_file_open(&f, *path, NULL), 0);
    return f;
}

Test(bytes, file_bytes_split_read_and_copy_without_reading_whole)
{
    enum { LEN = 1 << 20 };
    char *path;
    pinio_file *f = temp_file(&path, LEN);
    pinio_bytes *b, *r, *c;
    cr_assert_eq(pinio_bytes_from_file(&b, f, 0, LEN + 1, NULL), -ERANGE);
    cr_assert_eq(pinio_bytes_from_file(&b, f, 0, LEN, NULL), 0);
    cr_assert_eq(pinio_bytes_property(b), PINIO_PROP_FILE);
    cr_assert_eq(pinio_bytes_capacity(b), LEN);
    const uint8_t *p;
    cr_assert_eq(pinio_bytes_data(b, PINIO_ACCESS_ZERO_COPY, &p, NULL), PINIO_EWOULD_COPY);
    cr_assert_eq(pinio_bytes_split(b, 4096, PINIO_ACCESS_ZERO_COPY, &r, NULL), 0);
    cr_assert_eq(pinio_bytes_clone(r, PINIO_ACCESS_ZERO_COPY, &c, NULL), 0);
    cr_assert_eq(pinio_bytes_property(c), PINIO_PROP_FILE);
    uint64_t calls, bytes;
    pinio__file_stats(f, &calls, &bytes);
    cr_assert_eq(calls, 0);

    pinio_bytes *dst;
    cr_assert_eq(pinio_bytes_alloc(&dst, 4096, 4096), 0);
    cr_assert_eq(pinio_bytes_copy_into(b, dst, PINIO_ACCESS_ZERO_COPY, NULL), 0);
    cr_assert(check_pattern(rd(dst), 0, 4096, 17));
    uint8_t small[100];
    cr_assert_eq(pinio_bytes_read(c, 1000, small, 100, NULL), 0);
    cr_assert(check_pattern(small, 4096 + 1000, 100, 17));
    cr_assert_eq(pinio_bytes_read(c, LEN - 4096 - 50, small, 100, NULL), -ERANGE);
    cr_assert_eq(pinio_bytes_read(c, SIZE_MAX, small, 2, NULL), -ERANGE);
    pinio__file_stats(f, &calls, &bytes);
    cr_assert_eq(calls, 2);
    cr_assert_eq(bytes, 4096 + 100, "only the copied ranges were read");
    cr_assert_eq(pinio_bytes_data(b, PINIO_ACCESS_ZERO_COPY, &p, NULL), PINIO_EWOULD_COPY,
                 "copying did not materialize");

    pinio_bytes *e;
    cr_assert_eq(pinio_bytes_clone(c, PINIO_ACCESS_COPY, &e, NULL), 0);
    cr_assert_eq(pinio_bytes_extend(e, "x", 1, PINIO_ACCESS_COPY, NULL), 0);
    pinio__file_stats(f, &calls, &bytes);
    cr_assert_eq(bytes, 4096 + 100 + (LEN - 4096), "extend moved the window by one read");
    cr_assert_eq(pinio_bytes_property(e), PINIO_PROP_NATIVE);

    pinio_detached d;
    cr_assert_eq(pinio_bytes_try_detach(r, PINIO_ACCESS_ZERO_COPY, &d, NULL), PINIO_EWOULD_COPY);
    cr_assert_eq(pinio_bytes_len(r), LEN - 4096, "refused detach left r as it was");
    cr_assert_eq(pinio_bytes_try_detach(r, PINIO_ACCESS_COPY, &d, NULL), 0);
    cr_assert_eq(d.len, LEN - 4096);
    cr_assert_eq((uintptr_t)d.ptr % d.align, 0);
    cr_assert(check_pattern(d.ptr, 4096, 1000, 17));
    pinio_detached_free(&d);
    cr_assert_eq(pinio_bytes_equal(c, e, NULL), 0);
    pinio_bytes_free(b);
    pinio_bytes_free(c);
    pinio_bytes_free(e);
    pinio_bytes_free(dst);
    pinio_file_release(f);
    remove_temp_file(path);
}

Test(bytes, copy_into_refuses_to_cow_a_shared_destination)
{
    pinio_bytes *src, *dst, *dst2;
    cr_assert_eq(pinio_bytes_from_data(&src, "new!", 4, 16), 0);
    pinio_view v;
    cr_assert_eq(pinio_view_copy(&v, "old.", 4), 0);
    cr_assert_eq(pinio_bytes_from_view(&dst, &v, PINIO_PROP_OTHER), 0);
    cr_assert_eq(pinio_bytes_clone(dst, PINIO_ACCESS_COPY, &dst2, NULL), 0);
    cr_assert_eq(pinio_bytes_copy_into(src, dst, PINIO_ACCESS_ZERO_COPY, NULL), PINIO_EWOULD_COPY);
    cr_assert_eq(memcmp(rd(dst), "old.", 4), 0);
    cr_assert_eq(pinio_bytes_copy_into(src, dst, PINIO_ACCESS_COPY, NULL), 0);
    cr_assert_eq(memcmp(rd(dst), "new!", 4), 0);
    cr_assert_eq(memcmp(rd(dst2), "old.", 4), 0, "the clone is isolated");
    pinio_bytes_free(src);
    pinio_bytes_free(dst);
    pinio_bytes_free(dst2);
}

/* pinio_bytes_view over a shared controller: no copy, one more reference on
 * the source's memory (the source stops being unique while the view lives),
 * the property kept, and copy-on-write keeps writes of either side apart. */
Test(bytes, view_of_shared_bytes_shares_and_copies_on_write)
{
    atomic_int frees = 0;
    pinio_bytes *b = bytes_over_counted(64, &frees, PINIO_PROP_PINNED);
    const uint8_t *base = rd(b);
    uint8_t *p;
    cr_assert_eq(pinio_bytes_data_mut(b, PINIO_ACCESS_ZERO_COPY, &p, NULL), 0,
                 "unique before the view: writable in place");

    pinio_bytes *v;
    cr_assert_eq(pinio_bytes_view(b, 8, 40, PINIO_ACCESS_ZERO_COPY, &v, NULL), 0);
    cr_assert_eq(pinio_bytes_len(v), 32);
    cr_assert_eq(rd(v), base + 8, "zero-copy: the view points into the source");
    cr_assert_eq(pinio_bytes_property(v), PINIO_PROP_PINNED);
    cr_assert_eq(pinio_bytes_align(v), pinio_bytes_align(b));
    cr_assert(check_pattern(rd(v), 8, 32, 3));
    cr_assert_eq(pinio_bytes_data_mut(b, PINIO_ACCESS_ZERO_COPY, &p, NULL), PINIO_EWOULD_COPY,
                 "the view holds a reference: the source is shared now");

    /* Writing the source copies it; the view still sees the old bytes. */
    uint8_t *w = wr(b);
    cr_assert_neq(w, base);
    w[8] ^= 0xff;
    cr_assert_eq(pinio_bytes_property(b), PINIO_PROP_NATIVE, "a copy is pageable memory");
    cr_assert_eq(rd(v), base + 8);
    cr_assert(check_pattern(rd(v), 8, 32, 3), "the view did not see the source's write");
    cr_assert_eq(pinio_bytes_property(v), PINIO_PROP_PINNED);

    /* Writing the view does not reach the source's copy either. */
    wr(v)[0] = 0x5a;
    cr_assert_eq(rd(v)[0], 0x5a);
    cr_assert_eq(rd(b)[8], (uint8_t)(((8 * 131u + 3) & 0xff) ^ 0xff), "b kept its own write");
    cr_assert(check_pattern(rd(b) + 9, 9, 55, 3));
    pinio_bytes_free(b);
    pinio_bytes_free(v);
    cr_assert_eq(atomic_load(&frees), 1, "the source memory was freed once");
}

/* A view outliving its source keeps the memory alive; a view taken after a
 * copy-on-write shares the private copy, mutation included. */
Test(bytes, view_outlives_source_and_sees_its_copy)
{
    atomic_int frees = 0;
    pinio_bytes *b = bytes_over_counted(64, &frees, PINIO_PROP_OTHER);
    pinio_bytes *keep;
    cr_assert_eq(pinio_bytes_clone(b, PINIO_ACCESS_ZERO_COPY, &keep, NULL), 0);
    wr(b)[20] = 0xab; /* shared with keep: b copies */
    pinio_bytes *v;
    cr_assert_eq(pinio_bytes_view(b, 16, 24, PINIO_ACCESS_ZERO_COPY, &v, NULL), 0);
    cr_assert_eq(rd(v), rd(b) + 16, "a view of the private copy");
    cr_assert_eq(rd(v)[4], 0xab, "with the mutation");
    cr_assert_eq(pinio_bytes_property(v), PINIO_PROP_NATIVE, "the copy's property");
    pinio_bytes_free(b);
    cr_assert_eq(rd(v)[4], 0xab, "the copy lives as long as the view");
    pinio_bytes_free(keep);
    cr_assert_eq(atomic_load(&frees), 1, "the original went with its last holder");
    pinio_bytes_free(v);
}

/* Native memory cannot be shared without a refcount: a view copies, with
 * the source's alignment; zero-copy mode refuses and changes nothing. */
Test(bytes, view_of_native_bytes_copies)
{
    uint8_t src[300];
    fill_pattern(src, sizeof src, 4);
    pinio_bytes *b;
    cr_assert_eq(pinio_bytes_from_data(&b, src, sizeof src, 1024), 0);
    pinio_bytes *v = (pinio_bytes *)0x1;
    cr_assert_eq(pinio_bytes_view(b, 100, 200, PINIO_ACCESS_ZERO_COPY, &v, NULL),
                 PINIO_EWOULD_COPY);
    cr_assert_eq(v, (pinio_bytes *)0x1, "*out untouched");
    cr_assert_eq(pinio_bytes_view(b, 100, 200, PINIO_ACCESS_COPY, &v, NULL), 0);
    cr_assert_eq(pinio_bytes_len(v), 100);
    cr_assert_neq(rd(v), rd(b) + 100, "copied");
    cr_assert(check_pattern(rd(v), 100, 100, 4));
    cr_assert_eq(pinio_bytes_align(v), 1024);
    cr_assert_eq((uintptr_t)rd(v) % 1024, 0);
    cr_assert_eq(pinio_bytes_property(v), PINIO_PROP_NATIVE);
    wr(v)[0] = 0;
    cr_assert(check_pattern(rd(b), 0, sizeof src, 4), "the source is independent");
    pinio_bytes_free(v);
    pinio_bytes_free(b);
}

/* Bounds are checked against the logical length (not the capacity), with
 * clean errors that leave everything as it was; empty views are fine. */
Test(bytes, view_bounds)
{
    atomic_int frees = 0;
    pinio_view src = counted_view_aligned(64, 3, &frees, PINIO_DEFAULT_ALIGN);
    pinio_controller *c;
    cr_assert_eq(pinio_controller_shared_new(&c, &src, PINIO_PROP_OTHER), 0);
    pinio_bytes *b;
    cr_assert_eq(pinio_bytes_from_controller(&b, c, 48), 0, "len 48 of capacity 64");
    pinio_bytes *v = (pinio_bytes *)0x1;
    cr_assert_eq(pinio_bytes_view(b, 10, 9, PINIO_ACCESS_COPY, &v, NULL), -ERANGE);
    cr_assert_eq(pinio_bytes_view(b, 0, 49, PINIO_ACCESS_COPY, &v, NULL), -ERANGE,
                 "past len, though within the capacity");
    cr_assert_eq(pinio_bytes_view(b, 49, 49, PINIO_ACCESS_COPY, &v, NULL), -ERANGE);
    cr_assert_eq(pinio_bytes_view(b, SIZE_MAX, SIZE_MAX, PINIO_ACCESS_COPY, &v, NULL), -ERANGE);
    cr_assert_eq(pinio_bytes_view(b, 0, SIZE_MAX, PINIO_ACCESS_COPY, &v, NULL), -ERANGE);
    cr_assert_eq(pinio_bytes_view(NULL, 0, 0, PINIO_ACCESS_COPY, &v, NULL), -EINVAL);
    cr_assert_eq(pinio_bytes_view(b, 0, 0, PINIO_ACCESS_COPY, NULL, NULL), -EINVAL);
    cr_assert_eq(v, (pinio_bytes *)0x1, "*out untouched");
    uint8_t *p;
    cr_assert_eq(pinio_bytes_data_mut(b, PINIO_ACCESS_ZERO_COPY, &p, NULL), 0,
                 "no failed view kept a reference");

    cr_assert_eq(pinio_bytes_view(b, 48, 48, PINIO_ACCESS_ZERO_COPY, &v, NULL), 0);
    cr_assert_eq(pinio_bytes_len(v), 0);
    pinio_bytes_free(v);
    cr_assert_eq(pinio_bytes_view(b, 0, 48, PINIO_ACCESS_ZERO_COPY, &v, NULL), 0);
    cr_assert_eq(pinio_bytes_equal(b, v, NULL), 1);
    pinio_bytes_free(v);
    pinio_bytes_free(b);
    cr_assert_eq(atomic_load(&frees), 1);
}

/* A view of file bytes that have not been read is a lazy window of the same
 * file: property FILE, nothing read until asked, and then only its range.
 * After the source is read, a view shares the read buffer instead. */
Test(bytes, view_of_file_bytes_stays_lazy)
{
    enum { LEN = 1 << 16 };
    char *path;
    pinio_file *f = temp_file(&path, LEN);
    pinio_bytes *b, *v, *w;
    cr_assert_eq(pinio_bytes_from_file(&b, f, 4096, LEN - 4096, NULL), 0);
    cr_assert_eq(pinio_bytes_view(b, 1000, 3000, PINIO_ACCESS_ZERO_COPY, &v, NULL), 0);
    cr_assert_eq(pinio_bytes_property(v), PINIO_PROP_FILE);
    cr_assert_eq(pinio_bytes_len(v), 2000);
    uint64_t calls, bytes;
    pinio__file_stats(f, &calls, &bytes);
    cr_assert_eq(calls, 0, "a view reads nothing");
    const uint8_t *p;
    cr_assert_eq(pinio_bytes_data(v, PINIO_ACCESS_COPY, &p, NULL), 0);
    cr_assert(check_pattern(p, 4096 + 1000, 2000, 17));
    pinio__file_stats(f, &calls, &bytes);
    cr_assert_eq(bytes, 2000, "reading the view read only its window");
    cr_assert_eq(pinio_bytes_data(b, PINIO_ACCESS_ZERO_COPY, &p, NULL), PINIO_EWOULD_COPY,
                 "the source is still lazy");

    cr_assert_eq(pinio_bytes_data(b, PINIO_ACCESS_COPY, &p, NULL), 0);
    cr_assert_eq(pinio_bytes_view(b, 10, 20, PINIO_ACCESS_ZERO_COPY, &w, NULL), 0);
    const uint8_t *q;
    cr_assert_eq(pinio_bytes_data(w, PINIO_ACCESS_ZERO_COPY, &q, NULL), 0,
                 "a view of read bytes needs no read");
    cr_assert_eq(q, p + 10, "it shares the read buffer");
    cr_assert_eq(pinio_bytes_property(w), PINIO_PROP_FILE);
    pinio__file_stats(f, &calls, &bytes);
    cr_assert_eq(bytes, 2000 + (LEN - 4096));
    pinio_bytes_free(b);
    pinio_bytes_free(v);
    pinio_bytes_free(w);
    pinio_file_release(f);
    remove_temp_file(path);
}

/* alloc_align is the alignment the memory was created with (issue 23 item
 * 21): adopted memory that malloc made 16-aligned reports 16, not a
 * promise of PINIO_DEFAULT_ALIGN it never kept, and a unique adopted
 * buffer is handed back in place, zero-copy, with the adopter's free
 * function. pinio_view_alloc memory reports the alignment it was asked. */
Test(bytes, adopted_memory_reports_its_alignment_and_detaches_in_place)
{
    atomic_int frees = 0;
    pinio_view v = counted_view_misaligned(100, 4, &frees); /* 16-aligned, never 32 */
    const uint8_t *p = v.ptr;
    pinio_bytes *b;
    cr_assert_eq(pinio_bytes_from_view(&b, &v, PINIO_PROP_OTHER), 0);
    cr_assert_eq(pinio_bytes_align(b), 16, "reported %zu", pinio_bytes_align(b));
    pinio_detached d;
    cr_assert_eq(pinio_bytes_try_detach(b, PINIO_ACCESS_ZERO_COPY, &d, NULL), 0,
                 "unique, whole, as aligned as it says: handed back in place");
    cr_assert_eq(d.ptr, p);
    cr_assert_eq(d.align, 16);
    cr_assert_eq(d.len, 100);
    cr_assert(check_pattern(d.ptr, 0, 100, 4));
    cr_assert_eq(atomic_load(&frees), 0);
    pinio_detached_free(&d);
    cr_assert_eq(atomic_load(&frees), 1, "freed by the adopter's own function");

    /* Plain malloc memory: whatever its address has, up to the default. */
    v = counted_view(40, 5, &frees);
    p = v.ptr;
    size_t has = (size_t)((uintptr_t)p & (~(uintptr_t)p + 1));
    size_t want = has < PINIO_DEFAULT_ALIGN ? has : PINIO_DEFAULT_ALIGN;
    cr_assert_eq(pinio_bytes_from_view(&b, &v, PINIO_PROP_OTHER), 0);
    cr_assert_eq(pinio_bytes_align(b), want);
    cr_assert_eq(pinio_bytes_try_detach(b, PINIO_ACCESS_ZERO_COPY, &d, NULL), 0);
    cr_assert_eq(d.ptr, p);
    pinio_detached_free(&d);
    cr_assert_eq(atomic_load(&frees), 2);

    /* pinio's own allocation: the alignment it was created with. */
    cr_assert_eq(pinio_view_alloc(&v, 64, 1024), 0);
    cr_assert_eq(pinio_bytes_from_view(&b, &v, PINIO_PROP_OTHER), 0);
    cr_assert_eq(pinio_bytes_align(b), 1024);
    pinio_bytes_free(b);
}
