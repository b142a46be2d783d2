/* pinio_view: refcounts, slicing edges, ownership on failure, frees counted. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "pinio/view.h"
#include "src/base/view_internal.h"
#include "helpers.h"

Test(view, static_has_no_ref_and_is_never_writable)
{
    static const uint8_t data[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
    pinio_view v = pinio_view_static(data, sizeof(data));
    cr_assert_eq(v.ptr, data);
    cr_assert_eq(v.len, 8);
    cr_assert_null(v.ref);
    cr_assert_not(pinio_view_is_unique(&v));
    cr_assert_null(pinio_view_data_mut(&v));
    pinio_view c = pinio_view_clone(&v);
    cr_assert_null(c.ref);
    cr_assert_eq(c.ptr, data);
    pinio_view_release(&c);
    pinio_view_release(&v);
    cr_assert_eq(v.len, 0);
}

Test(view, wrap_frees_exactly_once_after_last_release)
{
    atomic_int frees = 0;
    pinio_view v = counted_view(100, 7, &frees);
    cr_assert(pinio_view_is_unique(&v));
    pinio_view c1 = pinio_view_clone(&v);
    pinio_view c2;
    cr_assert_eq(pinio_view_slice(&v, 10, 20, &c2), 0);
    cr_assert_eq(pinio__view_refcount(&v), 3);
    cr_assert_not(pinio_view_is_unique(&v));
    pinio_view_release(&v);
    pinio_view_release(&c1);
    cr_assert_eq(atomic_load(&frees), 0);
    cr_assert(check_pattern(c2.ptr, 10, 10, 7));
    pinio_view_release(&c2);
    cr_assert_eq(atomic_load(&frees), 1);
    pinio_view_release(&c2); /* harmless after release */
    cr_assert_eq(atomic_load(&frees), 1);
}

Test(view, wrap_empty_frees_now_and_failure_adopts_nothing)
{
    atomic_int frees = 0;
    pinio_view v;
    cr_assert_eq(pinio_view_wrap(&v, malloc(1), 0, counting_free, &frees, 0), 0);
    cr_assert_eq(atomic_load(&frees), 1);
    cr_assert_null(v.ref);
    pinio_view keep = { .ptr = (const uint8_t *)"x", .len = 1, .ref = NULL };
    cr_assert_eq(pinio_view_wrap(&keep, NULL, 5, counting_free, &frees, 0), -EINVAL);
    cr_assert_eq(atomic_load(&frees), 1);
    cr_assert_eq(keep.len, 1);
}

Test(view, readonly_wrap_is_never_writable)
{
    atomic_int frees = 0;
    pinio_view v;
    cr_assert_eq(pinio_view_wrap(&v, malloc(4), 4, counting_free, &frees, PINIO_VIEW_READONLY), 0);
    cr_assert(pinio_view_is_unique(&v));
    cr_assert_null(pinio_view_data_mut(&v));
    pinio_view_release(&v);
    cr_assert_eq(atomic_load(&frees), 1);
}

Test(view, copy_and_alloc)
{
    uint8_t src[33];
    fill_pattern(src, sizeof(src), 3);
    pinio_view v;
    cr_assert_eq(pinio_view_copy(&v, src, sizeof(src)), 0);
    cr_assert_neq(v.ptr, src);
    cr_assert_eq((uintptr_t)v.ptr % 16, 0);
    cr_assert(check_pattern(v.ptr, 0, 33, 3));
    cr_assert_not_null(pinio_view_data_mut(&v));
    pinio_view_release(&v);

    cr_assert_eq(pinio_view_alloc(&v, 100, 4096), 0);
    cr_assert_eq((uintptr_t)v.ptr % 4096, 0);
    pinio_view_release(&v);
    pinio_view untouched = pinio_view_static("abc", 3);
    cr_assert_eq(pinio_view_alloc(&untouched, 10, 24), -EINVAL);
    cr_assert_eq(untouched.len, 3);
    cr_assert_eq(pinio_view_alloc(&v, 0, 256), 0);
    cr_assert_null(v.ref);
    cr_assert_not_null(v.ptr);
    cr_assert_eq((uintptr_t)v.ptr % 256, 0);
}

Test(view, slice_bounds_and_empty_results)
{
    atomic_int frees = 0;
    pinio_view v = counted_view(10, 7, &frees);
    pinio_view out = pinio_view_static("zz", 2);
    cr_assert_eq(pinio_view_slice(&v, 3, 11, &out), -ERANGE);
    cr_assert_eq(pinio_view_slice(&v, 4, 3, &out), -ERANGE);
    cr_assert_eq(pinio_view_slice(&v, 11, 11, &out), -ERANGE);
    cr_assert_eq(out.len, 2, "out untouched on failure");
    cr_assert_eq(pinio__view_refcount(&v), 1, "no reference taken on failure");

    cr_assert_eq(pinio_view_slice(&v, 10, 10, &out), 0);
    cr_assert_eq(out.ptr, v.ptr + 10, "empty slice keeps its address");
    cr_assert_null(out.ref, "empty slice holds no reference");
    cr_assert_eq(pinio_view_slice(&v, 4, 4, &out), 0);
    cr_assert_eq(out.ptr, v.ptr + 4);
    cr_assert_null(out.ref);
    cr_assert_eq(pinio__view_refcount(&v), 1);

    cr_assert_eq(pinio_view_slice(&v, 2, 10, &out), 0);
    cr_assert_eq(out.len, 8);
    cr_assert(check_pattern(out.ptr, 2, 8, 7));
    cr_assert_eq(pinio__view_refcount(&v), 2);
    pinio_view_release(&v);
    pinio_view_release(&out);
    cr_assert_eq(atomic_load(&frees), 1);
}

Test(view, split_at_zero_len_and_past_len)
{
    atomic_int frees = 0;
    pinio_view v = counted_view(16, 7, &frees);
    const uint8_t *base = v.ptr;
    pinio_view head = pinio_view_static("q", 1);
    cr_assert_eq(pinio_view_split_to(&v, 17, &head), -ERANGE);
    cr_assert_eq(pinio_view_split_off(&v, 17, &head), -ERANGE);
    cr_assert_eq(head.len, 1);
    cr_assert_eq(v.len, 16);
    cr_assert_eq(v.ptr, base);
    cr_assert_eq(pinio__view_refcount(&v), 1);

    cr_assert_eq(pinio_view_split_to(&v, 0, &head), 0);
    cr_assert_eq(head.len, 0);
    cr_assert_eq(head.ptr, base);
    cr_assert_null(head.ref);
    cr_assert_eq(v.len, 16);
    cr_assert_eq(pinio__view_refcount(&v), 1, "split at 0 touches no counter");

    pinio_view tail;
    cr_assert_eq(pinio_view_split_off(&v, 16, &tail), 0);
    cr_assert_eq(tail.len, 0);
    cr_assert_eq(tail.ptr, base + 16);
    cr_assert_null(tail.ref);
    cr_assert_eq(pinio__view_refcount(&v), 1);

    cr_assert_eq(pinio_view_split_to(&v, 16, &head), 0);
    cr_assert_eq(v.len, 0);
    cr_assert_null(v.ref, "the emptied view gave its reference to head");
    cr_assert_eq(v.ptr, base + 16);
    cr_assert_eq(pinio__view_refcount(&head), 1);
    pinio_view_release(&head);
    cr_assert_eq(atomic_load(&frees), 1);
}

Test(view, nested_splits_down_to_single_bytes)
{
    enum { N = 64 };
    atomic_int frees = 0;
    pinio_view v = counted_view(N, 7, &frees);
    pinio_view parts[N];
    /* Halve recursively with split_off/split_to alternately, breadth-first. */
    pinio_view queue[2 * N];
    size_t qh = 0, qt = 0, nparts = 0;
    size_t offs[2 * N];
    queue[qt] = v;
    offs[qt++] = 0;
    size_t poffs[N];
    while (qh < qt) {
        pinio_view cur = queue[qh];
        size_t off = offs[qh++];
        if (cur.len == 1) {
            poffs[nparts] = off;
            parts[nparts++] = cur;
            continue;
        }
        size_t at = cur.len / 2;
        pinio_view other;
        if (qh % 2) {
            cr_assert_eq(pinio_view_split_off(&cur, at, &other), 0);
            queue[qt] = cur;
            offs[qt++] = off;
            queue[qt] = other;
            offs[qt++] = off + at;
        } else {
            cr_assert_eq(pinio_view_split_to(&cur, at, &other), 0);
            queue[qt] = other;
            offs[qt++] = off;
            queue[qt] = cur;
            offs[qt++] = off + at;
        }
    }
    cr_assert_eq(nparts, N);
    cr_assert_eq(pinio__view_refcount(&parts[0]), N);
    for (size_t i = 0; i < N; i++) {
        cr_assert(check_pattern(parts[i].ptr, poffs[i], 1, 7));
        pinio_view s;
        cr_assert_eq(pinio_view_slice(&parts[i], 1, 1, &s), 0);
        cr_assert_null(s.ref);
        cr_assert_eq(pinio_view_slice(&parts[i], 0, 2, &s), -ERANGE);
    }
    for (size_t i = 0; i < N; i++) {
        cr_assert_eq(atomic_load(&frees), 0);
        pinio_view_release(&parts[i]);
    }
    cr_assert_eq(atomic_load(&frees), 1);
}

Test(view, unique_data_mut_and_equal)
{
    pinio_view a, b;
    cr_assert_eq(pinio_view_copy(&a, "hello", 5), 0);
    uint8_t *w = pinio_view_data_mut(&a);
    cr_assert_not_null(w);
    w[0] = 'j';
    pinio_view c = pinio_view_clone(&a);
    cr_assert_null(pinio_view_data_mut(&a), "shared memory is not writable in place");
    cr_assert_null(pinio_view_data_mut(&c));
    pinio_view_release(&c);
    cr_assert_not_null(pinio_view_data_mut(&a));
    cr_assert_eq(pinio_view_copy(&b, "jello", 5), 0);
    cr_assert(pinio_view_equal(&a, &b));
    pinio_view s = pinio_view_static("jellO", 5);
    cr_assert_not(pinio_view_equal(&a, &s));
    pinio_view e1 = pinio_view_static(NULL, 0), e2 = pinio_view_static("x", 0);
    cr_assert(pinio_view_equal(&e1, &e2));
    pinio_view_release(&a);
    pinio_view_release(&b);
}

Test(view, detach_only_unique_whole_writable)
{
    atomic_int frees = 0;
    pinio_view v = counted_view(32, 7, &frees);
    pinio_view c = pinio_view_clone(&v);
    pinio_detached d = { 0 };
    cr_assert_eq(pinio__view_detach(&v, 1, &d), -EBUSY, "shared: not detachable");
    pinio_view_release(&c);
    pinio_view part;
    cr_assert_eq(pinio_view_slice(&v, 0, 16, &part), 0);
    pinio_view_release(&v);
    cr_assert_eq(pinio__view_detach(&part, 1, &d), -EBUSY, "a part is not the whole allocation");
    pinio_view_release(&part);
    cr_assert_eq(atomic_load(&frees), 1);

    v = counted_view(32, 7, &frees);
    const uint8_t *p = v.ptr;
    cr_assert_eq(pinio__view_detach(&v, 1, &d), 0);
    cr_assert_eq(d.ptr, p);
    cr_assert_eq(d.size, 32);
    cr_assert_null(v.ref);
    cr_assert_eq(atomic_load(&frees), 1, "detach frees nothing");
    pinio_detached_free(&d);
    cr_assert_eq(atomic_load(&frees), 2, "the returned function frees it");

    cr_assert_eq(pinio_view_alloc(&v, 64, 512), 0);
    cr_assert_eq(pinio__view_detach(&v, 64, &d), 0);
    cr_assert_eq(d.align, 512);
    cr_assert_eq((uintptr_t)d.ptr % 512, 0);
    pinio_detached_free(&d);
}

/* A whole unique allocation less aligned than the receiver was promised is
 * not handed over (the caller copies instead); an aligned one reports the
 * promised alignment even when nobody recorded one (adopted memory). */
Test(view, detach_keeps_the_alignment_promise)
{
    atomic_int frees = 0;
    pinio_view v = counted_view_misaligned(40, 3, &frees);
    pinio_view before = v;
    pinio_detached d = { 0 };
    cr_assert_eq(pinio__view_detach(&v, 64, &d), -EBUSY, "16-aligned memory promised as 64");
    cr_assert_eq(v.ptr, before.ptr);
    cr_assert_eq(v.ref, before.ref, "the refused view keeps its reference");
    cr_assert_null(d.ptr, "and *d is untouched");
    cr_assert_eq(pinio__view_detach(&v, 16, &d), 0, "what it does have is enough for 16");
    cr_assert_eq(d.align, 16);
    pinio_detached_free(&d);
    cr_assert_eq(atomic_load(&frees), 1);

    v = counted_view_aligned(40, 3, &frees, 128);
    cr_assert_eq(pinio__view_detach(&v, 64, &d), 0);
    cr_assert_eq(d.align, 64, "adopted memory: the alignment that was checked");
    cr_assert_eq((uintptr_t)d.ptr % 64, 0);
    pinio_detached_free(&d);
    cr_assert_eq(atomic_load(&frees), 2);
}
