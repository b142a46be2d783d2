/* pinio._pinio.Source: one file opened and its header validated once, for
 * a reader that loads it in parts (a safe_open handle: its read-ahead
 * windows). It holds a plan of the file (pinio_plan_create()); each load
 * through it, _pinio.load(None, source=...), is pinio_load_derived() from
 * that plan: the same open file, its header copied rather than read and
 * parsed again (at 20,000 tensors a parse cost as much as the plain Python
 * loader's per-tensor work for a tenth of the file).
 *
 * The plan is freed by close() or with the object; a load running without
 * the GIL holds it (`busy`), and a close() meanwhile defers the free to the
 * end of that load. */
#include "_pinio.h"

static void source_free_plan(SourceObject *self)
{
    pinio_plan_free(self->plan);
    self->plan = NULL;
}

static PyObject *Source_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {(char *)"path", NULL};
    PyObject *enc;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&:Source", kwlist, PyUnicode_FSConverter, &enc))
        return NULL;
    SourceObject *self = (SourceObject *)type->tp_alloc(type, 0);
    if (!self) {
        Py_DECREF(enc);
        return NULL;
    }
    /* Every tensor selected, read buffered: this plan is never executed
     * (each load derives its own, measuring the page cache then), so the
     * residency is not measured here. */
    pinio_plan_opts o;
    pinio_plan_opts_default(&o);
    o.cache = PINIO_CACHE_HOT;
    py_stop stop;
    py_stop_init(&stop);
    o.stop = py_stop_poll;
    o.stop_ctx = &stop;
    const char *path = PyBytes_AS_STRING(enc);
    pinio_diag diag;
    int r;
    Py_BEGIN_ALLOW_THREADS
    r = pinio_plan_create(&self->plan, &path, 1, &o, &diag);
    Py_END_ALLOW_THREADS
    Py_DECREF(enc);
    if (py_stop_raised(&stop)) {
        Py_DECREF(self); /* its dealloc frees a plan made all the same */
        return NULL;
    }
    if (r) {
        Py_DECREF(self);
        return raise_pinio(r, &diag, "header read failed");
    }
    return (PyObject *)self;
}

static void Source_dealloc(SourceObject *self)
{
    source_free_plan(self); /* no load can hold it: each holds a reference on us */
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int source_open(SourceObject *self)
{
    if (self->plan && !self->closed)
        return 0;
    PyErr_SetString(PyExc_ValueError, "pinio._pinio.Source: closed");
    return -1;
}

static PyObject *Source_header(SourceObject *self, PyObject *unused)
{
    (void)unused;
    if (source_open(self))
        return NULL;
    return header_rows(pinio_plan_file_at(self->plan, 0)->header);
}

static PyObject *Source_close(SourceObject *self, PyObject *unused)
{
    (void)unused;
    self->closed = 1;
    if (!self->busy)
        source_free_plan(self);
    Py_RETURN_NONE;
}

static PyMethodDef Source_methods[] = {
    {"header", (PyCFunction)Source_header, METH_NOARGS,
     "header() -> as _pinio.header(): the header validated when the file was opened"},
    {"close", (PyCFunction)Source_close, METH_NOARGS,
     "closes the file (at the end of a load through it that is running)"},
    {NULL, NULL, 0, NULL},
};

PyTypeObject SourceType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pinio._pinio.Source",
    .tp_doc = "Source(path): the file opened and its header validated once; "
              "_pinio.load(None, source=s) loads parts of it without reading the header again.",
    .tp_basicsize = sizeof(SourceObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = Source_new,
    .tp_dealloc = (destructor)Source_dealloc,
    .tp_methods = Source_methods,
};

int source_arg(PyObject *o, SourceObject **out)
{
    *out = NULL;
    if (o == Py_None)
        return 0;
    if (!PyObject_TypeCheck(o, &SourceType)) {
        PyErr_Format(PyExc_TypeError, "source must be a pinio._pinio.Source, not %.100s",
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    if (source_open((SourceObject *)o))
        return -1;
    *out = (SourceObject *)o;
    return 0;
}

void source_hold(SourceObject *s)
{
    Py_INCREF(s);
    s->busy++;
}

void source_release(SourceObject *s)
{
    if (--s->busy == 0 && s->closed)
        source_free_plan(s);
    Py_DECREF(s);
}
