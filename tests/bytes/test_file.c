/* pinio_file and file-window controllers: laziness proven by read counters,
 * on a disk filesystem (/tmp) and on tmpfs (/dev/shm). */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "pinio/bytes.h"
#include "pinio/controller.h"
#include "src/bytes/file_internal.h"
#include "helpers.h"

enum { FSIZE = 1 << 16 };

static const char *const dirs[] = { "/tmp", "/dev/shm" };

static pinio_file *open_temp(const char *dir, char **path)
{
    *path = make_temp_file(dir, FSIZE, 11);
    if (!*path)
        return NULL;
    pinio_file *f;
    pinio_diag d;
    cr_assert_eq(pinio_file_open(&f, *path, &d), 0, "%s", d.msg);
    return f;
}

static void stats(pinio_file *f, uint64_t *calls, uint64_t *bytes)
{
    pinio__file_stats(f, calls, bytes);
}

Test(file, open_errors_name_the_path)
{
    pinio_file *f = (pinio_file *)0x1;
    pinio_diag d;
    cr_assert_eq(pinio_file_open(&f, "/nonexistent/pinio-x", &d), -ENOENT);
    cr_assert_eq(d.code, -ENOENT);
    cr_assert(strstr(d.msg, "/nonexistent/pinio-x") != NULL, "%s", d.msg);
    cr_assert_eq(pinio_file_open(&f, "/tmp", &d), -EISDIR);
    cr_assert_eq(f, (pinio_file *)0x1);
    cr_assert_eq(pinio_file_open(&f, "/tmp", NULL), -EISDIR, "diag may be NULL");
}

Test(file, window_bounds_checked_at_creation)
{
    char *path;
    pinio_file *f = open_temp("/tmp", &path);
    cr_assert_not_null(f);
    cr_assert_eq(pinio_file_size(f), FSIZE);
    cr_assert_str_eq(pinio_file_path(f), path);
    pinio_controller *c = NULL;
    pinio_diag d;
    cr_assert_eq(pinio_controller_file_new(&c, f, FSIZE - 10, 11, &d), -ERANGE);
    cr_assert(strstr(d.msg, path) != NULL, "%s", d.msg);
    cr_assert_eq(pinio_controller_file_new(&c, f, (uint64_t)FSIZE + 1, 0, NULL), -ERANGE);
    cr_assert_null(c);
    cr_assert_eq(pinio_controller_file_new(&c, f, FSIZE, 0, NULL), 0, "empty window at EOF");
    cr_assert_eq(pinio_controller_capacity(c), 0);
    const uint8_t *p;
    size_t size;
    cr_assert_eq(pinio_controller_memory(c, PINIO_ACCESS_ZERO_COPY, &p, &size, NULL), 0,
                 "an empty window needs no read");
    pinio_controller_destroy(c);
    uint64_t calls;
    stats(f, &calls, NULL);
    cr_assert_eq(calls, 0);
    pinio_file_release(f);
    remove_temp_file(path);
}

Test(file, lazy_split_and_copy_read_only_what_is_asked)
{
    for (size_t k = 0; k < 2; k++) {
        char *path;
        pinio_file *f = open_temp(dirs[k], &path);
        if (!f)
            continue; /* no /dev/shm in this container: /tmp still ran */
        pinio_controller *c, *l, *r, *rl, *rr;
        cr_assert_eq(pinio_controller_file_new(&c, f, 1000, 50000, NULL), 0);
        cr_assert_eq(pinio_controller_property(c), PINIO_PROP_FILE);
        cr_assert_eq(pinio_controller_capacity(c), 50000);
        const uint8_t *p = (const uint8_t *)0x1;
        size_t size;
        cr_assert_eq(pinio_controller_memory(c, PINIO_ACCESS_ZERO_COPY, &p, &size, NULL),
                     PINIO_EWOULD_COPY);
        cr_assert_eq(p, (const uint8_t *)0x1);
        cr_assert_eq(pinio_controller_split(c, 20000, &l, &r), 0);
        pinio_controller_destroy(c);
        cr_assert_eq(pinio_controller_split(r, 100, &rl, &rr), 0);
        pinio_controller_destroy(r);
        cr_assert_eq(pinio_controller_property(rl), PINIO_PROP_FILE);
        cr_assert_eq(pinio_controller_capacity(rl), 100);
        cr_assert_eq(pinio_controller_capacity(rr), 29900);
        uint64_t calls, bytes;
        stats(f, &calls, &bytes);
        cr_assert_eq(calls, 0, "splitting reads nothing");

        uint8_t buf[64];
        cr_assert_eq(pinio_controller_copy_into(rl, 36, buf, 64, NULL), 0);
        cr_assert(check_pattern(buf, 1000 + 20000 + 36, 64, 11));
        cr_assert_eq(pinio_controller_copy_into(rl, 37, buf, 64, NULL), -ERANGE,
                     "bounded by the window, not the file");
        stats(f, &calls, &bytes);
        cr_assert_eq(calls, 1);
        cr_assert_eq(bytes, 64, "copy_into read exactly the range");

        pinio_controller *dup;
        cr_assert_eq(pinio_controller_duplicate(rr, &dup), 0);
        cr_assert_eq(pinio_controller_memory(dup, PINIO_ACCESS_COPY, &p, &size, NULL), 0);
        cr_assert_eq(size, 29900);
        cr_assert(check_pattern(p, 21100, 29900, 11));
        cr_assert_eq(pinio_controller_memory(dup, PINIO_ACCESS_ZERO_COPY, &p, &size, NULL), 0);
        stats(f, &calls, &bytes);
        cr_assert_eq(calls, 2, "materialized once");
        cr_assert_eq(bytes, 64 + 29900);
        cr_assert_eq(pinio_controller_memory(rr, PINIO_ACCESS_ZERO_COPY, &p, &size, NULL),
                     PINIO_EWOULD_COPY, "the duplicate has its own window");
        pinio_controller_destroy(l);
        pinio_controller_destroy(rl);
        pinio_controller_destroy(rr);
        pinio_controller_destroy(dup);
        pinio_file_release(f);
        remove_temp_file(path);
    }
}

Test(file, mutations_survive_split_and_duplicate)
{
    char *path;
    pinio_file *f = open_temp("/tmp", &path);
    cr_assert_not_null(f);
    pinio_controller *c, *d, *l, *r;
    cr_assert_eq(pinio_controller_file_new(&c, f, 0, 100, NULL), 0);
    uint8_t *w;
    size_t size;
    cr_assert_eq(pinio_controller_memory_mut(c, PINIO_ACCESS_ZERO_COPY, &w, &size, NULL),
                 PINIO_EWOULD_COPY);
    cr_assert_eq(pinio_controller_memory_mut(c, PINIO_ACCESS_COPY, &w, &size, NULL), 0);
    w[50] = 0xAA;
    uint8_t *w2;
    cr_assert_eq(pinio_controller_memory_mut(c, PINIO_ACCESS_ZERO_COPY, &w2, &size, NULL), 0);
    cr_assert_eq(w2, w, "the read buffer is private: written in place");
    cr_assert_eq(pinio_controller_property(c), PINIO_PROP_FILE);
    uint8_t one;
    cr_assert_eq(pinio_controller_copy_into(c, 50, &one, 1, NULL), 0);
    cr_assert_eq(one, 0xAA, "copy_into after materialization sees the mutation");

    cr_assert_eq(pinio_controller_duplicate(c, &d), 0);
    cr_assert_eq(pinio_controller_property(d), PINIO_PROP_FILE);
    cr_assert_eq(pinio_controller_memory_mut(d, PINIO_ACCESS_COPY, &w2, &size, NULL), 0);
    cr_assert_eq(w2[50], 0xAA);
    w2[51] = 0xBB;
    cr_assert_neq(w2, w, "writing a duplicate copies");
    cr_assert_eq(pinio_controller_property(d), PINIO_PROP_NATIVE);

    cr_assert_eq(pinio_controller_split(c, 50, &l, &r), 0);
    pinio_controller_destroy(c);
    const uint8_t *p;
    cr_assert_eq(pinio_controller_memory(r, PINIO_ACCESS_ZERO_COPY, &p, &size, NULL), 0);
    cr_assert_eq(p[0], 0xAA, "split after a write keeps it");
    cr_assert(check_pattern(p + 1, 51, 49, 11), "the duplicate's write stayed there");
    cr_assert_eq(pinio_controller_property(r), PINIO_PROP_FILE);
    uint64_t calls;
    stats(f, &calls, NULL);
    cr_assert_eq(calls, 1, "no re-read anywhere");
    pinio_controller_destroy(l);
    pinio_controller_destroy(r);
    pinio_controller_destroy(d);
    pinio_file_release(f);
    remove_temp_file(path);
}

Test(file, shrunk_file_reports_change_and_can_retry)
{
    char *path;
    pinio_file *f = open_temp("/tmp", &path);
    cr_assert_not_null(f);
    pinio_controller *c;
    cr_assert_eq(pinio_controller_file_new(&c, f, 0, FSIZE, NULL), 0);
    cr_assert_eq(truncate(path, 100), 0);
    const uint8_t *p;
    size_t size;
    pinio_diag d = { 0 };
    cr_assert_eq(pinio_controller_memory(c, PINIO_ACCESS_COPY, &p, &size, &d), PINIO_ECHANGED);
    cr_assert(strstr(d.msg, path) != NULL && strstr(d.msg, "offset 100") != NULL, "%s", d.msg);
    cr_assert_eq(pinio_controller_memory(c, PINIO_ACCESS_ZERO_COPY, &p, &size, NULL),
                 PINIO_EWOULD_COPY, "a failed read publishes nothing");
    int fd = open(path, O_WRONLY);
    cr_assert_geq(fd, 0);
    cr_assert_eq(ftruncate(fd, FSIZE), 0);
    close(fd);
    cr_assert_eq(pinio_controller_memory(c, PINIO_ACCESS_COPY, &p, &size, NULL), 0,
                 "retry after the failure works");
    cr_assert(check_pattern(p, 0, 100, 11));
    pinio_controller_destroy(c);
    pinio_file_release(f);
    remove_temp_file(path);
}

Test(file, refcounted_file_outlives_caller_reference)
{
    char *path;
    pinio_file *f = open_temp("/tmp", &path);
    cr_assert_not_null(f);
    pinio_bytes *b;
    cr_assert_eq(pinio_file_retain(f), f);
    cr_assert_eq(pinio_bytes_from_file(&b, f, 10, 20, NULL), 0);
    pinio_file_release(f);
    pinio_file_release(f); /* the bytes keep the file open */
    uint8_t buf[20];
    cr_assert_eq(pinio_bytes_read(b, 0, buf, 20, NULL), 0);
    cr_assert(check_pattern(buf, 10, 20, 11));
    pinio_bytes_free(b);
    remove_temp_file(path);
}

Test(file, read_errors_reach_bytes_callers)
{
    char *path;
    pinio_file *f = open_temp("/dev/shm", &path);
    if (!f)
        f = open_temp("/tmp", &path);
    cr_assert_not_null(f);
    pinio_bytes *a, *b;
    cr_assert_eq(pinio_bytes_from_file(&a, f, 0, 1000, NULL), 0);
    cr_assert_eq(pinio_bytes_from_file(&b, f, 1000, 1000, NULL), 0);
    cr_assert_eq(truncate(path, 1500), 0);
    pinio_diag d = { 0 };
    cr_assert_eq(pinio_bytes_equal(a, b, &d), PINIO_ECHANGED, "b is cut short");
    cr_assert(strstr(d.msg, path) != NULL, "%s", d.msg);
    const uint8_t *p;
    cr_assert_eq(pinio_bytes_data(a, PINIO_ACCESS_ZERO_COPY, &p, NULL), 0, "a was read");
    uint8_t buf[600];
    cr_assert_eq(pinio_bytes_read(b, 400, buf, 600, &d), PINIO_ECHANGED);
    cr_assert_eq(pinio_bytes_read(b, 0, buf, 500, NULL), 0, "the part still there reads");
    cr_assert(check_pattern(buf, 1000, 500, 11));
    pinio_bytes_free(a);
    pinio_bytes_free(b);
    pinio_file_release(f);
    remove_temp_file(path);
}
