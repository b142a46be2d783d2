/* pinio._pinio's writer: save() and serialize() over pinio_save. */
#include "_pinio.h"

/* --------------------------------------------------------------- save */

/* specs: [(name, dtype, shape, data_ptr, data_len)]; the caller keeps the
 * memory alive and unchanged for the call. */
struct specs {
    pinio_save_tensor *t;
    uint64_t *shapes;
    size_t n;
    pinio_st_kv *md;
    size_t nmd;
    PyObject *keep; /* the encoded names and metadata */
};

static void specs_free(struct specs *s)
{
    free(s->t);
    free(s->shapes);
    free(s->md);
    Py_XDECREF(s->keep);
}

static int utf8_of(PyObject *o, PyObject *keep, const char **p, size_t *len)
{
    if (!PyUnicode_Check(o)) {
        PyErr_SetString(PyExc_TypeError, "expected a str");
        return -1;
    }
    PyObject *b = PyUnicode_AsUTF8String(o);
    if (!b || PyList_Append(keep, b)) {
        Py_XDECREF(b);
        return -1;
    }
    Py_DECREF(b);
    *p = PyBytes_AS_STRING(b);
    *len = (size_t)PyBytes_GET_SIZE(b);
    return 0;
}

/* Each shape is taken once as a tuple, and that tuple both sizes the shape
 * array and fills it: a sequence whose len() differs from what it yields
 * (a lying __len__, or one that changes while iterated) can neither
 * overflow the array nor be half read. A len() that disagrees with the
 * items is refused, naming the tensor. */
static int specs_parse(PyObject *seq, PyObject *metadata, struct specs *s)
{
    memset(s, 0, sizeof(*s));
    s->keep = PyList_New(0);
    PyObject *fast = s->keep ? PySequence_Fast(seq, "expected a sequence of specs") : NULL;
    if (!fast)
        return -1;
    s->n = (size_t)PySequence_Fast_GET_SIZE(fast);
    PyObject *shapes = PyList_New((Py_ssize_t)s->n);
    if (!shapes)
        goto fail;
    size_t dims = 0;
    for (size_t i = 0; i < s->n; i++) {
        PyObject *it = PySequence_Fast_GET_ITEM(fast, (Py_ssize_t)i);
        if (!PyTuple_Check(it) || PyTuple_GET_SIZE(it) != 5) {
            PyErr_SetString(PyExc_TypeError, "a spec is (name, dtype, shape, data_ptr, data_len)");
            goto fail;
        }
        PyObject *shape = PyTuple_GET_ITEM(it, 2);
        Py_ssize_t claimed = PySequence_Size(shape);
        PyObject *tup = claimed < 0 ? NULL : PySequence_Tuple(shape);
        if (!tup)
            goto fail;
        PyList_SET_ITEM(shapes, (Py_ssize_t)i, tup);
        if (PyTuple_GET_SIZE(tup) != claimed) {
            PyErr_Format(PyExc_ValueError,
                         "tensor %R: its shape's len() is %zd but it yields %zd dimensions",
                         PyTuple_GET_ITEM(it, 0), claimed, PyTuple_GET_SIZE(tup));
            goto fail;
        }
        dims += (size_t)claimed;
    }
    s->t = calloc(s->n ? s->n : 1, sizeof(*s->t));
    s->shapes = calloc(dims ? dims : 1, sizeof(*s->shapes));
    if (!s->t || !s->shapes) {
        PyErr_NoMemory();
        goto fail;
    }
    size_t at = 0;
    for (size_t i = 0; i < s->n; i++) {
        PyObject *it = PySequence_Fast_GET_ITEM(fast, (Py_ssize_t)i);
        pinio_save_tensor *t = &s->t[i];
        const char *dt;
        size_t dtl;
        if (utf8_of(PyTuple_GET_ITEM(it, 0), s->keep, &t->name, &t->name_len) ||
            utf8_of(PyTuple_GET_ITEM(it, 1), s->keep, &dt, &dtl))
            goto fail;
        if (pinio_dtype_from_name(dt, dtl, &t->dtype)) {
            PyErr_Format(PyExc_ValueError, "unknown dtype %s", dt);
            goto fail;
        }
        PyObject *shape = PyList_GET_ITEM(shapes, (Py_ssize_t)i);
        t->rank = (unsigned)PyTuple_GET_SIZE(shape);
        t->shape = s->shapes + at;
        for (unsigned d = 0; d < t->rank; d++) {
            s->shapes[at + d] = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(shape, d));
            if (PyErr_Occurred())
                goto fail;
        }
        at += t->rank;
        t->data = PyLong_AsVoidPtr(PyTuple_GET_ITEM(it, 3));
        t->nbytes = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(it, 4));
        if (PyErr_Occurred())
            goto fail;
    }
    Py_DECREF(shapes);
    Py_DECREF(fast);
    if (metadata != Py_None) {
        if (!PyDict_Check(metadata)) {
            PyErr_SetString(PyExc_TypeError, "metadata must be a dict of str to str");
            return -1;
        }
        s->nmd = (size_t)PyDict_Size(metadata);
        s->md = calloc(s->nmd ? s->nmd : 1, sizeof(*s->md));
        if (!s->md) {
            PyErr_NoMemory();
            return -1;
        }
        Py_ssize_t pos = 0;
        PyObject *k, *v;
        for (size_t i = 0; PyDict_Next(metadata, &pos, &k, &v); i++)
            if (utf8_of(k, s->keep, &s->md[i].key, &s->md[i].key_len) ||
                utf8_of(v, s->keep, &s->md[i].value, &s->md[i].value_len))
                return -1;
    }
    return 0;
fail:
    Py_XDECREF(shapes);
    Py_DECREF(fast);
    return -1;
}

PyObject *py_save(PyObject *mod, PyObject *args, PyObject *kw)
{
    (void)mod;
    static char *kwlist[] = {(char *)"path", (char *)"specs", (char *)"metadata",
                             (char *)"direct", (char *)"sync", NULL};
    PyObject *path, *seq, *metadata = Py_None;
    int direct = 1, sync = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|Opp", kwlist, &path, &seq, &metadata,
                                     &direct, &sync))
        return NULL;
    PyObject *enc;
    if (!PyUnicode_FSConverter(path, &enc))
        return NULL;
    struct specs s;
    if (specs_parse(seq, metadata, &s)) {
        specs_free(&s);
        Py_DECREF(enc);
        return NULL;
    }
    pinio_save_opts o;
    pinio_save_opts_default(&o);
    o.metadata = s.md;
    o.nmetadata = s.nmd;
    o.direct = direct ? PINIO_DIRECT_AUTO : PINIO_DIRECT_OFF;
    o.no_sync = !sync;
    pinio_save_result res;
    pinio_diag diag;
    int r;
    Py_BEGIN_ALLOW_THREADS
    r = pinio_save(PyBytes_AS_STRING(enc), s.t, s.n, &o, &res, &diag);
    Py_END_ALLOW_THREADS
    specs_free(&s);
    Py_DECREF(enc);
    if (r)
        return raise_pinio(r, &diag, "save failed");
    return Py_BuildValue("{s:K,s:K,s:O,s:d,s:s}", "file_bytes",
                         (unsigned long long)res.file_bytes, "data_bytes",
                         (unsigned long long)res.data_bytes, "direct",
                         res.direct ? Py_True : Py_False, "seconds", res.seconds, "io_path",
                         res.io_path);
}

/* serialize(specs, metadata) -> bytes: the file image in memory. */
PyObject *py_serialize(PyObject *mod, PyObject *args)
{
    (void)mod;
    PyObject *seq, *metadata = Py_None;
    if (!PyArg_ParseTuple(args, "O|O", &seq, &metadata))
        return NULL;
    struct specs s;
    if (specs_parse(seq, metadata, &s)) {
        specs_free(&s);
        return NULL;
    }
    pinio_save_opts o;
    pinio_save_opts_default(&o);
    o.metadata = s.md;
    o.nmetadata = s.nmd;
    size_t *order = calloc(s.n ? s.n : 1, sizeof(*order));
    uint8_t *hdr = NULL;
    size_t hlen = 0;
    pinio_diag diag;
    int r = order ? pinio_save_header(s.t, s.n, &o, order, &hdr, &hlen, &diag) : -ENOMEM;
    PyObject *out = NULL;
    if (r) {
        raise_pinio(r, &diag, "serialize failed");
    } else {
        size_t total = hlen;
        for (size_t i = 0; i < s.n; i++)
            total += s.t[i].nbytes;
        out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
        if (out) {
            uint8_t *d = (uint8_t *)PyBytes_AS_STRING(out);
            Py_BEGIN_ALLOW_THREADS
            memcpy(d, hdr, hlen);
            d += hlen;
            for (size_t i = 0; i < s.n; i++) {
                if (s.t[order[i]].nbytes)
                    memcpy(d, s.t[order[i]].data, s.t[order[i]].nbytes);
                d += s.t[order[i]].nbytes;
            }
            Py_END_ALLOW_THREADS
        }
    }
    free(hdr);
    free(order);
    specs_free(&s);
    return out;
}

