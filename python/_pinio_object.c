/* pinio._pinio.ObjectFile: one s3:// object held open for
 * pinio.safetensors.safe_open (pinio/safetensors/_object.py).
 *
 * Why a plan kept open: safe_open reads lazily, a window at a time, and
 * every byte one handle serves must come from the object version whose
 * header it validated. A plan pins that version (its ETag, sent with
 * If-Match on every request, and compared in every answer), so each
 * window is a sub-range of the one plan's reads (pinio_plan_execute's
 * first_read/nreads) rather than a load of its own, which would pin
 * whatever version the store holds by then.
 *
 * Why an image of the whole object: the reads land at their own file
 * offsets in one private anonymous mapping (MAP_NORESERVE: only what was
 * read is ever backed), so a tensor is contiguous whichever windows
 * brought its bytes, and no read is needed twice. The object exports that
 * mapping through the buffer protocol; tensors are zero-copy views that
 * keep it alive, and it is unmapped with the last of them. */
#include "_pinio.h"

#include <sys/mman.h>

/* The plan's reads never cross a multiple of this in the destination: the
 * granule of a lazy window. 8 MiB is the object source's own range size
 * (src/load/object.c): one request per read, which costs a round trip and
 * on S3 a request's charge, so smaller reads would cost more than the
 * bytes they save. */
#define OBJECT_SEGMENT ((uint64_t)8 << 20)

typedef struct {
    PyObject_HEAD
    pinio_plan *plan;   /* NULL once closed */
    uint8_t *image;     /* the object's bytes at their offsets, as far as read */
    size_t image_len;
    int busy;           /* executions and reads running (the GIL released): close waits */
} ObjectFileObject;

static PyObject *ObjectFile_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {(char *)"url", NULL};
    const char *url;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s:ObjectFile", kwlist, &url))
        return NULL;
    pinio_plan_opts o;
    pinio_plan_opts_default(&o);
    o.segment = OBJECT_SEGMENT;
    py_stop stop;
    py_stop_init(&stop);
    o.stop = py_stop_poll;
    o.stop_ctx = &stop;
    pinio_plan *plan = NULL;
    pinio_diag diag;
    int r;
    Py_BEGIN_ALLOW_THREADS
    r = pinio_plan_create(&plan, &url, 1, &o, &diag);
    Py_END_ALLOW_THREADS
    if (py_stop_raised(&stop)) {
        if (!r)
            pinio_plan_free(plan);
        return NULL;
    }
    if (r)
        return raise_pinio(r, &diag, "opening the object failed");
    pinio_plan_info pi;
    pinio_plan_get_info(plan, &pi);
    const pinio_plan_file *f = pinio_plan_file_at(plan, 0);
    if (pi.files != 1 || pi.index_path || !f->object) {
        pinio_plan_free(plan);
        PyErr_Format(PyExc_ValueError, "ObjectFile: %s is not one s3:// object", url);
        return NULL;
    }
    /* Reads run past the end of the object up to the alignment. */
    uint64_t len = f->size;
    for (size_t i = 0; i < pi.reads; i++) {
        const pinio_plan_read *rd = pinio_plan_read_at(plan, i);
        if (rd->offset + rd->len > len)
            len = rd->offset + rd->len;
    }
    if (len > (uint64_t)PY_SSIZE_T_MAX) {
        pinio_plan_free(plan);
        return PyErr_NoMemory();
    }
    size_t n = len ? (size_t)len : 1;
    void *image = mmap(NULL, n, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (image == MAP_FAILED) {
        pinio_plan_free(plan);
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    ObjectFileObject *self = (ObjectFileObject *)type->tp_alloc(type, 0);
    if (!self) {
        munmap(image, n);
        pinio_plan_free(plan);
        return NULL;
    }
    self->plan = plan;
    self->image = image;
    self->image_len = n;
    return (PyObject *)self;
}

static void ObjectFile_dealloc(ObjectFileObject *self)
{
    /* No exported view remains: each one holds a reference on us. */
    pinio_plan_free(self->plan);
    if (self->image)
        munmap(self->image, self->image_len);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int ObjectFile_getbuffer(ObjectFileObject *self, Py_buffer *view, int flags)
{
    return PyBuffer_FillInfo(view, (PyObject *)self, self->image, (Py_ssize_t)self->image_len,
                             0, flags);
}

static PyBufferProcs ObjectFile_as_buffer = {
    .bf_getbuffer = (getbufferproc)ObjectFile_getbuffer,
};

static const pinio_plan *open_plan(ObjectFileObject *self)
{
    if (!self->plan)
        PyErr_SetString(PyExc_ValueError, "ObjectFile: closed");
    return self->plan;
}

/* header() -> as _pinio.header(): the header validated at open. */
static PyObject *ObjectFile_header(ObjectFileObject *self, PyObject *unused)
{
    (void)unused;
    const pinio_plan *p = open_plan(self);
    return p ? header_rows(pinio_plan_file_at(p, 0)->header) : NULL;
}

/* reads() -> [(offset, len)]: the plan's reads, in offset order. */
static PyObject *ObjectFile_reads(ObjectFileObject *self, PyObject *unused)
{
    (void)unused;
    const pinio_plan *p = open_plan(self);
    if (!p)
        return NULL;
    pinio_plan_info pi;
    pinio_plan_get_info(p, &pi);
    PyObject *list = PyList_New((Py_ssize_t)pi.reads);
    for (size_t i = 0; list && i < pi.reads; i++) {
        const pinio_plan_read *rd = pinio_plan_read_at(p, i);
        PyObject *item = Py_BuildValue("(KK)", (unsigned long long)rd->offset,
                                       (unsigned long long)rd->len);
        if (!item) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, item);
    }
    return list;
}

CONV_UINT(offset, 63, uint64_t) /* an off_t */
CONV_UINT(length, 64, uint64_t)

/* read(offset, length) -> bytes of the version validated at open (the
 * header's bytes without a request). */
static PyObject *ObjectFile_read(ObjectFileObject *self, PyObject *args)
{
    uint64_t off, len;
    if (!PyArg_ParseTuple(args, "O&O&", conv_offset, &off, conv_length, &len))
        return NULL;
    const pinio_plan *p = open_plan(self);
    if (!p)
        return NULL;
    if (len > (unsigned long long)PY_SSIZE_T_MAX)
        return PyErr_NoMemory();
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)len);
    if (!out)
        return NULL;
    pinio_diag diag;
    int64_t got;
    /* Held like an execution's: a close() from another thread while the
     * GIL is released would free the plan this reads from. */
    self->busy++;
    Py_BEGIN_ALLOW_THREADS
    got = pinio_plan_file_read(p, 0, PyBytes_AS_STRING(out), (size_t)len, off, &diag);
    Py_END_ALLOW_THREADS
    self->busy--;
    if (got < 0) {
        Py_DECREF(out);
        return raise_pinio((int)got, &diag, "read failed");
    }
    if ((unsigned long long)got < len)
        _PyBytes_Resize(&out, (Py_ssize_t)got);
    return out;
}

static int image_claim(void *ctx, size_t i, const pinio_plan_read *r, void **mem)
{
    (void)i;
    const ObjectFileObject *self = ctx;
    if (r->offset > self->image_len || r->len > self->image_len - r->offset)
        return -ERANGE; /* cannot happen: the image covers every read */
    *mem = self->image + r->offset;
    return 0;
}

/* execute(first, count) -> {read_bytes, requests, retries}: reads
 * [first, first + count) of the plan into the image (GIL released). */
static PyObject *ObjectFile_execute(ObjectFileObject *self, PyObject *args)
{
    Py_ssize_t first, count;
    if (!PyArg_ParseTuple(args, "nn", &first, &count))
        return NULL;
    pinio_plan *p = self->plan;
    if (!open_plan(self))
        return NULL;
    if (first < 0 || count < 1) {
        PyErr_SetString(PyExc_ValueError, "ObjectFile.execute: first >= 0, count >= 1");
        return NULL;
    }
    if (self->busy) { /* a plan runs one execution at a time */
        PyErr_SetString(PyExc_RuntimeError, "ObjectFile: another read of it is running");
        return NULL;
    }
    static const pinio_dest_ops ops = {.size = sizeof(ops), .claim = image_claim};
    pinio_exec_opts o;
    pinio_exec_opts_default(&o);
    o.first_read = (size_t)first;
    o.nreads = (size_t)count;
    py_stop stop;
    py_stop_init(&stop);
    o.stop = py_stop_poll;
    o.stop_ctx = &stop;
    pinio_exec_report rep;
    pinio_diag diag;
    int r;
    self->busy++;
    Py_BEGIN_ALLOW_THREADS
    r = pinio_plan_execute(p, &ops, self, &o, &rep, &diag);
    Py_END_ALLOW_THREADS
    self->busy--;
    if (py_stop_raised(&stop))
        return NULL;
    if (r)
        return raise_pinio(r, &diag, "reading the object failed");
    return Py_BuildValue("{s:K,s:K,s:K}", "read_bytes", (unsigned long long)rep.read_bytes,
                         "requests", (unsigned long long)rep.object_requests, "retries",
                         (unsigned long long)rep.object_retries);
}

/* close(): frees the plan (its connections); the image stays while a view
 * of it lives. */
static PyObject *ObjectFile_close(ObjectFileObject *self, PyObject *unused)
{
    (void)unused;
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "ObjectFile: a read of it is running");
        return NULL;
    }
    pinio_plan_free(self->plan);
    self->plan = NULL;
    Py_RETURN_NONE;
}

static PyMethodDef ObjectFile_methods[] = {
    {"header", (PyCFunction)ObjectFile_header, METH_NOARGS,
     "header() -> ([(name, dtype, shape, begin, end)], metadata|None, data_offset, size)"},
    {"reads", (PyCFunction)ObjectFile_reads, METH_NOARGS,
     "reads() -> [(offset, len)]: the plan's reads of every tensor, in offset order"},
    {"read", (PyCFunction)ObjectFile_read, METH_VARARGS,
     "read(offset, length) -> bytes of the version validated at open"},
    {"execute", (PyCFunction)ObjectFile_execute, METH_VARARGS,
     "execute(first, count) -> {read_bytes, requests, retries}: reads [first, first + count) "
     "into the image (this object's buffer), at their offsets"},
    {"close", (PyCFunction)ObjectFile_close, METH_NOARGS,
     "frees the plan; the image lives while a view of it does"},
    {NULL, NULL, 0, NULL},
};

PyTypeObject ObjectFileType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pinio._pinio.ObjectFile",
    .tp_doc = "ObjectFile(url): one s3:// object, its header validated and its version "
              "pinned at open; its bytes, read by execute(), are this object's buffer.",
    .tp_basicsize = sizeof(ObjectFileObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = ObjectFile_new,
    .tp_dealloc = (destructor)ObjectFile_dealloc,
    .tp_as_buffer = &ObjectFile_as_buffer,
    .tp_methods = ObjectFile_methods,
};
