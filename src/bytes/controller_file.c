/*
 * File controller: a lazy window (file, offset, length) of a pinio_file.
 *
 * Until the first memory()/memory_mut(), nothing is read: copy_into reads
 * straight from the file into the caller's (pinned) buffer, and split and
 * duplicate cut new windows of the same open file. The first memory() reads
 * the window once into an aligned buffer that becomes an inner shared
 * controller (property FILE); from then on every operation is delegated to
 * it, so split, duplicate and copy_into see the buffer, mutations included
 * (upstream re-reads the file and loses them).
 *
 * The inner controller is published with a release store after it is fully
 * built, under a mutex that makes the read happen once; readers take the fast
 * path with an acquire load. A failed read publishes nothing, so it can be
 * retried.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "pinio/controller.h"
#include "src/bytes/controller_internal.h"
#include "src/bytes/file_internal.h"

typedef struct file_ctrl {
    pinio_controller base;
    pinio_file *file;
    uint64_t offset;
    size_t length;
    pthread_mutex_t lock;
    _Atomic(pinio_controller *) inner;
} file_ctrl;

static file_ctrl *fc(const pinio_controller *c)
{
    return (file_ctrl *)c;
}

static pinio_controller *inner(const file_ctrl *f)
{
    return atomic_load_explicit(&((file_ctrl *)f)->inner, memory_order_acquire);
}

static int file_window(pinio_controller **out, pinio_file *file, uint64_t offset, size_t length);

/* Returns the inner controller, reading the window first if needed. */
static int materialize(file_ctrl *f, pinio_access mode, pinio_controller **out, pinio_diag *diag)
{
    pinio_controller *in = inner(f);
    if (in) {
        *out = in;
        return 0;
    }
    if (mode == PINIO_ACCESS_ZERO_COPY && f->length)
        return PINIO_EWOULD_COPY;
    int rc = 0;
    pthread_mutex_lock(&f->lock);
    in = atomic_load_explicit(&f->inner, memory_order_relaxed);
    if (!in) {
        pinio_view v = pinio_view_static(NULL, 0);
        in = pinio__shared_alloc();
        rc = in ? pinio_view_alloc(&v, f->length, PINIO_DEFAULT_ALIGN) : -ENOMEM;
        if (rc == 0 && f->length)
            rc = pinio__file_read(f->file, f->offset, (void *)v.ptr, f->length, diag);
        if (rc == 0) {
            pinio__shared_init(in, &v, PINIO_PROP_FILE, PINIO_DEFAULT_ALIGN);
            atomic_store_explicit(&f->inner, in, memory_order_release);
        } else {
            pinio_view_release(&v);
            pinio__shared_discard(in);
            in = NULL;
        }
    }
    pthread_mutex_unlock(&f->lock);
    if (rc == 0)
        *out = in;
    return rc;
}

static size_t file_alloc_align(const pinio_controller *c)
{
    (void)c;
    return PINIO_DEFAULT_ALIGN;
}

static pinio_property file_property(const pinio_controller *c)
{
    pinio_controller *in = inner(fc(c));
    return in ? pinio_controller_property(in) : PINIO_PROP_FILE;
}

static size_t file_capacity(const pinio_controller *c)
{
    return fc(c)->length;
}

static int file_memory(pinio_controller *c, pinio_access mode, const uint8_t **ptr, size_t *size,
                       pinio_diag *diag)
{
    pinio_controller *in;
    int rc = materialize(fc(c), mode, &in, diag);
    return rc ? rc : pinio_controller_memory(in, mode, ptr, size, diag);
}

static int file_memory_mut(pinio_controller *c, pinio_access mode, uint8_t **ptr, size_t *size,
                           pinio_diag *diag)
{
    pinio_controller *in;
    int rc = materialize(fc(c), mode, &in, diag);
    return rc ? rc : pinio_controller_memory_mut(in, mode, ptr, size, diag);
}

static int file_split(pinio_controller *c, size_t offset, pinio_controller **left,
                      pinio_controller **right)
{
    file_ctrl *f = fc(c);
    pinio_controller *in = inner(f);
    if (in)
        return pinio_controller_split(in, offset, left, right);
    pinio_controller *l, *r;
    int rc = file_window(&l, f->file, f->offset, offset);
    if (rc)
        return rc;
    rc = file_window(&r, f->file, f->offset + offset, f->length - offset);
    if (rc) {
        pinio_controller_destroy(l);
        return rc;
    }
    *left = l;
    *right = r;
    return 0;
}

static int file_duplicate(pinio_controller *c, pinio_controller **out)
{
    file_ctrl *f = fc(c);
    pinio_controller *in = inner(f);
    if (in)
        return pinio_controller_duplicate(in, out);
    return file_window(out, f->file, f->offset, f->length);
}

/* Before the first read a view is another lazy window of the same file
 * (burn's reader cuts each tensor this way and reads none of the others);
 * after it, a view of the read buffer, so mutations are not lost. */
static int file_view(pinio_controller *c, size_t start, size_t end, pinio_controller **out)
{
    file_ctrl *f = fc(c);
    pinio_controller *in = inner(f);
    if (in)
        return pinio_controller_view(in, start, end, out);
    return file_window(out, f->file, f->offset + start, end - start);
}

static int file_copy_into(pinio_controller *c, size_t offset, void *dst, size_t len,
                          pinio_diag *diag)
{
    file_ctrl *f = fc(c);
    pinio_controller *in = inner(f);
    if (in)
        return pinio_controller_copy_into(in, offset, dst, len, diag);
    /* Straight from the file into the caller's buffer: no intermediate copy. */
    return pinio__file_read(f->file, f->offset + offset, dst, len, diag);
}

static int file_try_detach(pinio_controller *c, pinio_access mode, pinio_detached *out,
                           pinio_diag *diag)
{
    pinio_controller *in;
    int rc = materialize(fc(c), mode, &in, diag);
    return rc ? rc : pinio_controller_try_detach(in, mode, out, diag);
}

static void file_destroy(pinio_controller *c)
{
    file_ctrl *f = fc(c);
    pinio_controller_destroy(inner(f));
    pinio_file_release(f->file);
    pthread_mutex_destroy(&f->lock);
    free(f);
}

static const pinio_controller_ops file_ops = {
    .size = sizeof(pinio_controller_ops),
    .alloc_align = file_alloc_align,
    .property = file_property,
    .capacity = file_capacity,
    .memory = file_memory,
    .memory_mut = file_memory_mut,
    .split = file_split,
    .duplicate = file_duplicate,
    .copy_into = file_copy_into,
    .grow = NULL,
    .try_detach = file_try_detach,
    .destroy = file_destroy,
    .view = file_view,
};

static int file_window(pinio_controller **out, pinio_file *file, uint64_t offset, size_t length)
{
    file_ctrl *f = malloc(sizeof(*f));
    if (!f)
        return -ENOMEM;
    f->base.ops = &file_ops;
    f->file = pinio_file_retain(file);
    f->offset = offset;
    f->length = length;
    pthread_mutex_init(&f->lock, NULL);
    atomic_init(&f->inner, NULL);
    *out = &f->base;
    return 0;
}

int pinio_controller_file_new(pinio_controller **out, pinio_file *file, uint64_t offset,
                              size_t length, pinio_diag *diag)
{
    if (!out || !file)
        return -EINVAL;
    uint64_t size = pinio_file_size(file);
    if (offset > size || length > size - offset) {
        pinio_diag_set(diag, -ERANGE,
                        "%s: window of %zu bytes at offset %llu passes the file size %llu",
                        pinio_file_path(file), length, (unsigned long long)offset,
                        (unsigned long long)size);
        return -ERANGE;
    }
    return file_window(out, file, offset, length);
}

bool pinio__file_ctrl_window(pinio_controller *c, pinio_file **file, uint64_t *offset)
{
    if (!c || c->ops != &file_ops || inner(fc(c)))
        return false;
    *file = fc(c)->file;
    *offset = fc(c)->offset;
    return true;
}
