/* pinio._pinio's types: the Buffer exporter (the buffer protocol over one
 * pinio reference), the Checkpoint and the kept Arena, and the error they
 * raise. See _pinio.c for the extension's rules. */
#include "_pinio.h"

PyObject *Error; /* pinio._pinio.Error, an OSError */

/* The library's diagnostics suggest the CLI's options where one helps; a
 * Python caller reads the keyword that does the same. */
static const char *const py_words[][2] = {
    {"(--filter)", "(filter=)"},
    {"(--device)", "(device='cuda')"},
    {"--memory mapped", "memory='mapped'"},
    {"--memory pinned", "memory='pinned'"},
    {"--cache hot", "cache='hot'"},
};

static PyObject *python_words(const char *msg)
{
    PyObject *s = PyUnicode_DecodeUTF8(msg, (Py_ssize_t)strlen(msg), "replace");
    for (size_t i = 0; s && i < sizeof(py_words) / sizeof(py_words[0]); i++) {
        PyObject *from = PyUnicode_FromString(py_words[i][0]);
        PyObject *to = PyUnicode_FromString(py_words[i][1]);
        PyObject *t = from && to ? PyUnicode_Replace(s, from, to, -1) : NULL;
        Py_XDECREF(from);
        Py_XDECREF(to);
        Py_SETREF(s, t);
    }
    return s;
}

PyObject *raise_pinio(int code, const pinio_diag *d, const char *fallback)
{
    const char *msg = d && d->msg[0] ? d->msg : fallback;
    int e = code < 0 && code > -4000 ? -code : EIO;
    PyObject *text = python_words(msg);
    PyObject *args = text ? Py_BuildValue("(iN)", e, text) : NULL;
    if (args) {
        PyObject *exc = PyObject_Call(Error, args, NULL);
        if (exc) {
            PyObject *pc = PyLong_FromLong(code);
            if (pc) {
                PyObject_SetAttrString(exc, "pinio_code", pc);
                Py_DECREF(pc);
            }
            PyObject *name = PyUnicode_FromString(pinio_err_name(code));
            if (name) {
                PyObject_SetAttrString(exc, "pinio_error", name);
                Py_DECREF(name);
            }
            PyErr_SetObject(Error, exc);
            Py_DECREF(exc);
        }
        Py_DECREF(args);
    }
    return NULL;
}

/* ------------------------------------------------------------- Buffer */

static void Buffer_dealloc(BufferObject *self)
{
    /* Last reference gone: no exported view can remain (every view holds one). */
    pinio_bytes_free(self->bytes);
    free(self->heap);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Pinned bytes are writable, as upstream's tensors are (a private mapping
 * there): a write stays within this tensor's own bytes of the arena, which
 * only tensors of the same name from the same checkpoint object share (as
 * upstream's share one mapping). Mapped bytes are the page cache itself,
 * mapped read-only and shared: exported read-only, so that a consumer
 * asking for a writable buffer is refused instead of crashing the process
 * with SIGSEGV at its first write; a load with map_private (the default
 * here) maps them copy-on-write instead, writable as pinned bytes are. */
static int Buffer_getbuffer(BufferObject *self, Py_buffer *view, int flags)
{
    return PyBuffer_FillInfo(view, (PyObject *)self, self->ptr, self->len, self->readonly,
                             flags);
}

static PyBufferProcs Buffer_as_buffer = {
    .bf_getbuffer = (getbufferproc)Buffer_getbuffer,
};

static Py_ssize_t Buffer_len(BufferObject *self)
{
    return self->len;
}

static PySequenceMethods Buffer_as_sequence = {
    .sq_length = (lenfunc)Buffer_len,
};

static PyObject *Buffer_get_address(BufferObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromVoidPtr(self->ptr);
}

static PyObject *Buffer_get_pinned(BufferObject *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(self->bytes && pinio_bytes_property(self->bytes) == PINIO_PROP_PINNED);
}

static PyObject *Buffer_get_readonly(BufferObject *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(self->readonly);
}

static PyGetSetDef Buffer_getset[] = {
    {"address", (getter)Buffer_get_address, NULL, "address of the first byte", NULL},
    {"pinned", (getter)Buffer_get_pinned, NULL, "the bytes are page-locked (pinned)", NULL},
    {"readonly", (getter)Buffer_get_readonly, NULL,
     "the bytes are a shared read-only mapping of the file (exported read-only)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject BufferType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pinio._pinio.Buffer",
    .tp_doc = "Bytes of one tensor, exported through the buffer protocol; holds a pinio "
              "reference on them until the last view is gone.",
    .tp_basicsize = sizeof(BufferObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_dealloc = (destructor)Buffer_dealloc,
    .tp_as_buffer = &Buffer_as_buffer,
    .tp_as_sequence = &Buffer_as_sequence,
    .tp_getset = Buffer_getset,
};

/* `maps_writable`: the checkpoint's mappings are private (map_private). */
PyObject *buffer_from_bytes(pinio_bytes *b, int maps_writable)
{
    const uint8_t *p = NULL;
    int r = pinio_bytes_data(b, PINIO_ACCESS_ZERO_COPY, &p, NULL);
    if (r) {
        pinio_bytes_free(b);
        return raise_pinio(r, NULL, pinio_strerror(r));
    }
    BufferObject *o = PyObject_New(BufferObject, &BufferType);
    if (!o) {
        pinio_bytes_free(b);
        return NULL;
    }
    o->bytes = b;
    o->heap = NULL;
    o->ptr = (uint8_t *)p;
    o->len = (Py_ssize_t)pinio_bytes_len(b);
    o->readonly = !maps_writable && pinio_bytes_property(b) == PINIO_PROP_FILE;
    return (PyObject *)o;
}

/* --------------------------------------------------------- Checkpoint */

static void Checkpoint_dealloc(CheckpointObject *self)
{
    pinio_checkpoint_release(self->cp); /* tensors' Buffers keep the arena */
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int check_open(CheckpointObject *self)
{
    if (self->cp)
        return 0;
    PyErr_SetString(PyExc_ValueError, "the checkpoint is closed");
    return -1;
}

/* The index argument `arg` of a method of an open checkpoint: 0 and `*i`,
 * or -1 with an exception set (closed, not an int, negative). */
static int index_arg(CheckpointObject *self, PyObject *arg, size_t *i)
{
    if (check_open(self))
        return -1;
    Py_ssize_t v = PyLong_AsSsize_t(arg);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (v < 0) {
        PyErr_SetString(PyExc_IndexError, "index out of range");
        return -1;
    }
    *i = (size_t)v;
    return 0;
}

static int nul_refused(PyObject *o, const char *what)
{
    PyErr_Format(PyExc_ValueError, "%s %R holds a NUL character, where the library would end "
                 "it: refused rather than cut", what, o);
    return -1;
}

const char *c_str(PyObject *o, const char *what)
{
    Py_ssize_t len;
    const char *s = PyUnicode_AsUTF8AndSize(o, &len);
    if (s && strlen(s) != (size_t)len) {
        nul_refused(o, what);
        return NULL;
    }
    return s;
}

/* A list of str/PathLike -> NULL-terminated array of encoded C strings;
 * `*keep` holds the bytes objects they point into. */
const char **str_array(PyObject *seq, size_t *n, PyObject **keep, int fs)
{
    PyObject *fast = PySequence_Fast(seq, "expected a sequence of strings");
    if (!fast)
        return NULL;
    Py_ssize_t k = PySequence_Fast_GET_SIZE(fast);
    const char **arr = calloc((size_t)k + 1, sizeof(*arr));
    PyObject *list = PyList_New(k);
    if (!arr || !list) {
        free(arr);
        Py_XDECREF(list);
        Py_DECREF(fast);
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(fast, i), *enc = NULL;
        if (fs) {
            if (!PyUnicode_FSConverter(item, &enc))
                enc = NULL;
        } else if (PyUnicode_Check(item)) {
            enc = PyUnicode_AsUTF8String(item);
            if (enc && strlen(PyBytes_AS_STRING(enc)) != (size_t)PyBytes_GET_SIZE(enc)) {
                nul_refused(item, "filter");
                Py_CLEAR(enc);
            }
        } else {
            PyErr_SetString(PyExc_TypeError, "expected a string");
        }
        if (!enc) {
            free(arr);
            Py_DECREF(list);
            Py_DECREF(fast);
            return NULL;
        }
        PyList_SET_ITEM(list, i, enc);
        arr[i] = PyBytes_AS_STRING(enc);
    }
    Py_DECREF(fast);
    *n = (size_t)k;
    *keep = list;
    return arr;
}

PyObject *shape_tuple(const uint64_t *shape, unsigned rank)
{
    PyObject *t = PyTuple_New(rank);
    for (unsigned d = 0; t && d < rank; d++) {
        PyObject *v = PyLong_FromUnsignedLongLong(shape[d]);
        if (!v) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, d, v);
    }
    return t;
}

/* Each dtype's name, made once: a row per tensor would otherwise decode
 * the same few strings again for each of thousands of tensors. */
static PyObject *dtype_names[PINIO_DTYPE_COUNT];

static PyObject *dtype_str(pinio_dtype dt)
{
    if ((unsigned)dt >= PINIO_DTYPE_COUNT)
        return PyUnicode_FromString(pinio_dtype_name(dt));
    if (!dtype_names[dt])
        dtype_names[dt] = PyUnicode_InternFromString(pinio_dtype_name(dt));
    return Py_XNewRef(dtype_names[dt]);
}

/* A shape seen among the last few rows is that row's tuple again (tuples
 * are immutable): a checkpoint repeats a few shapes thousands of times, and
 * a new tuple and its ints were a third of a row's cost (callgrind). */
static PyObject *cached_shape(shape_cache *sc, const uint64_t *shape, unsigned rank)
{
    if (!sc || rank > SHAPE_CACHE_RANK)
        return shape_tuple(shape, rank);
    for (unsigned k = 0; k < SHAPE_CACHE; k++) {
        const struct shape_entry *e = &sc->e[k];
        if (e->tuple && e->rank == rank && !memcmp(e->dims, shape, rank * sizeof(*shape)))
            return Py_NewRef(e->tuple);
    }
    PyObject *t = shape_tuple(shape, rank);
    if (t) {
        struct shape_entry *e = &sc->e[sc->next++ % SHAPE_CACHE];
        Py_XSETREF(e->tuple, Py_NewRef(t));
        e->rank = rank;
        memcpy(e->dims, shape, rank * sizeof(*shape));
    }
    return t;
}

void shape_cache_clear(shape_cache *sc)
{
    for (unsigned k = 0; k < SHAPE_CACHE; k++)
        Py_CLEAR(sc->e[k].tuple);
}

/* Built item by item: Py_BuildValue parses its format string for every
 * row, which at 20,000 tensors cost as much as the rows themselves
 * (callgrind, issue 27). */
PyObject *tensor_row(const char *name, size_t name_len, pinio_dtype dt, const uint64_t *shape,
                     unsigned rank, const unsigned long long *ints, size_t n, shape_cache *sc)
{
    PyObject *row = PyTuple_New((Py_ssize_t)(3 + n));
    if (!row)
        return NULL;
    PyObject *items[3] = {PyUnicode_DecodeUTF8(name, (Py_ssize_t)name_len, "strict"),
                          dtype_str(dt), cached_shape(sc, shape, rank)};
    int bad = 0;
    for (size_t k = 0; k < 3; k++) {
        bad |= items[k] == NULL;
        PyTuple_SET_ITEM(row, (Py_ssize_t)k, items[k]); /* NULL items are skipped by dealloc */
    }
    for (size_t k = 0; !bad && k < n; k++) {
        PyObject *v = PyLong_FromUnsignedLongLong(ints[k]);
        bad |= v == NULL;
        PyTuple_SET_ITEM(row, (Py_ssize_t)(3 + k), v);
    }
    if (bad) {
        Py_DECREF(row);
        return NULL;
    }
    return row;
}

/* info(i)'s row of tensor `t`. */
static PyObject *info_row(const pinio_tensor *t, shape_cache *sc)
{
    const unsigned long long ints[3] = {t->nbytes, t->file, t->file_offset};
    return tensor_row(t->name, strlen(t->name), t->dtype, t->shape, t->rank, ints, 3, sc);
}

static PyObject *Checkpoint_info(CheckpointObject *self, PyObject *arg)
{
    size_t i;
    if (index_arg(self, arg, &i))
        return NULL;
    const pinio_tensor *t = pinio_checkpoint_tensor(self->cp, i);
    if (!t) {
        PyErr_SetString(PyExc_IndexError, "tensor index out of range");
        return NULL;
    }
    return info_row(t, NULL);
}

/* rows(): [info(i) for every i], made in one call (a Python call per row
 * cost about as much as the row). */
static PyObject *Checkpoint_rows(CheckpointObject *self, PyObject *unused)
{
    (void)unused;
    if (check_open(self))
        return NULL;
    size_t n = pinio_checkpoint_count(self->cp);
    PyObject *list = PyList_New((Py_ssize_t)n);
    shape_cache sc = {0};
    for (size_t i = 0; list && i < n; i++) {
        PyObject *row = info_row(pinio_checkpoint_tensor(self->cp, i), &sc);
        if (!row)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, (Py_ssize_t)i, row);
    }
    shape_cache_clear(&sc);
    return list;
}

/* index(): {name: i} of every tensor, what a reader that knows the shapes
 * already (safe_open's header) needs to find one. */
static PyObject *Checkpoint_index(CheckpointObject *self, PyObject *unused)
{
    (void)unused;
    if (check_open(self))
        return NULL;
    size_t n = pinio_checkpoint_count(self->cp);
    PyObject *d = PyDict_New();
    for (size_t i = 0; d && i < n; i++) {
        const char *name = pinio_checkpoint_tensor(self->cp, i)->name;
        PyObject *k = PyUnicode_DecodeUTF8(name, (Py_ssize_t)strlen(name), "strict");
        PyObject *v = k ? PyLong_FromSize_t(i) : NULL;
        if (!v || PyDict_SetItem(d, k, v))
            Py_CLEAR(d);
        Py_XDECREF(k);
        Py_XDECREF(v);
    }
    return d;
}

static PyObject *Checkpoint_buffer(CheckpointObject *self, PyObject *arg)
{
    size_t i;
    if (index_arg(self, arg, &i))
        return NULL;
    pinio_bytes *b;
    int r = pinio_checkpoint_tensor_bytes(self->cp, i, &b);
    if (r == -ERANGE) {
        PyErr_SetString(PyExc_IndexError, "tensor index out of range");
        return NULL;
    }
    if (r)
        return raise_pinio(r, NULL, pinio_strerror(r));
    return buffer_from_bytes(b, self->maps_writable);
}

PyObject *metadata_dict(const pinio_st *st)
{
    if (!st || !pinio_st_metadata_count(st))
        Py_RETURN_NONE;
    PyObject *d = PyDict_New();
    for (size_t i = 0; d && i < pinio_st_metadata_count(st); i++) {
        const pinio_st_kv *kv = pinio_st_metadata_at(st, i);
        PyObject *k = PyUnicode_DecodeUTF8(kv->key, (Py_ssize_t)kv->key_len, "strict");
        PyObject *v = PyUnicode_DecodeUTF8(kv->value, (Py_ssize_t)kv->value_len, "strict");
        if (!k || !v || PyDict_SetItem(d, k, v)) {
            Py_XDECREF(k);
            Py_XDECREF(v);
            Py_DECREF(d);
            return NULL;
        }
        Py_DECREF(k);
        Py_DECREF(v);
    }
    return d;
}

/* (tensors in file order [(name, dtype, shape, begin, end)], metadata or
 * None, data_offset, file_size) of a parsed header, which stays the caller's. */
PyObject *header_rows(const pinio_st *st)
{
    size_t n = pinio_st_count(st);
    PyObject *list = PyList_New((Py_ssize_t)n), *res = NULL;
    shape_cache sc = {0};
    for (size_t i = 0; list && i < n; i++) {
        const pinio_st_tensor *t = pinio_st_at(st, i);
        const unsigned long long ints[2] = {t->begin, t->end};
        PyObject *item =
            tensor_row(t->name, t->name_len, t->dtype, t->shape, t->rank, ints, 2, &sc);
        if (!item) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, item);
    }
    shape_cache_clear(&sc);
    PyObject *md = list ? metadata_dict(st) : NULL;
    if (md)
        res = Py_BuildValue("(NNKK)", list, md, (unsigned long long)pinio_st_data_offset(st),
                            (unsigned long long)pinio_st_file_size(st));
    else
        Py_XDECREF(list);
    return res;
}

static PyObject *Checkpoint_metadata(CheckpointObject *self, PyObject *arg)
{
    size_t i;
    if (index_arg(self, arg, &i))
        return NULL;
    const pinio_st *st = pinio_checkpoint_header(self->cp, i);
    if (!st) {
        PyErr_SetString(PyExc_IndexError, "file index out of range");
        return NULL;
    }
    return metadata_dict(st);
}

static PyObject *Checkpoint_files(CheckpointObject *self, PyObject *unused)
{
    (void)unused;
    if (check_open(self))
        return NULL;
    size_t n = pinio_checkpoint_file_count(self->cp);
    PyObject *l = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; l && i < n; i++) {
        PyObject *s = PyUnicode_DecodeFSDefault(pinio_checkpoint_file(self->cp, i));
        if (!s) {
            Py_DECREF(l);
            return NULL;
        }
        PyList_SET_ITEM(l, (Py_ssize_t)i, s);
    }
    return l;
}

static const char *backend_name(pinio_backend b)
{
    switch (b) {
    case PINIO_BACKEND_FIXED_DIRECT: return "fixed_direct";
    case PINIO_BACKEND_DIRECT: return "direct";
    case PINIO_BACKEND_BUFFERED: return "buffered";
    case PINIO_BACKEND_PREAD: return "pread";
    default: return "auto";
    }
}

/* The list of each file's digest (str, or None where not computed). */
static PyObject *sha_list(const pinio_checkpoint *cp, size_t n)
{
    PyObject *l = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; l && i < n; i++) {
        const char *h = pinio_checkpoint_sha256(cp, i);
        PyObject *v = h ? PyUnicode_FromString(h) : Py_NewRef(Py_None);
        if (!v) {
            Py_CLEAR(l);
            break;
        }
        PyList_SET_ITEM(l, (Py_ssize_t)i, v);
    }
    return l;
}

static PyObject *Checkpoint_report(CheckpointObject *self, PyObject *unused)
{
    (void)unused;
    if (check_open(self))
        return NULL;
    pinio_load_report r;
    pinio_checkpoint_report(self->cp, &r);
    PyObject *d = Py_BuildValue(
        "{s:n,s:n,s:n,s:n,s:K,s:K,s:K,s:d,s:d,s:n,s:n,s:s,s:O,s:O,s:i,s:O,s:s,s:s,s:s,s:K,s:K,"
        "s:s,s:n,s:n}",
        "files", (Py_ssize_t)r.files, "tensors", (Py_ssize_t)r.tensors, "skipped",
        (Py_ssize_t)r.skipped, "unindexed", (Py_ssize_t)r.unindexed, "bytes",
        (unsigned long long)r.bytes, "read_bytes", (unsigned long long)r.read_bytes,
        "arena_bytes", (unsigned long long)r.arena_bytes, "seconds", r.seconds, "io_seconds",
        r.io_seconds, "files_direct", (Py_ssize_t)r.files_direct, "files_buffered",
        (Py_ssize_t)r.files_buffered, "backend", backend_name(r.backend), "locked",
        r.locked ? Py_True : Py_False, "registered", r.registered ? Py_True : Py_False, "node",
        r.node, "verified", r.verified ? Py_True : Py_False, "io_path", r.io_path, "cache",
        r.cache, "memory", r.memory, "fixed_ops", (unsigned long long)r.fixed_ops, "plain_ops",
        (unsigned long long)r.plain_ops, "modes", r.modes, "files_pinned",
        (Py_ssize_t)r.files_pinned, "files_mapped", (Py_ssize_t)r.files_mapped);
    /* Each file's SHA-256 (None unless verified), whether a kept arena
     * served the load (and had to grow for it), and the time to ready. */
    PyObject *sha = d ? sha_list(self->cp, r.files) : NULL;
    PyObject *ready = sha ? PyFloat_FromDouble(r.ready_seconds) : NULL;
    if (!ready || PyDict_SetItemString(d, "ready_seconds", ready) ||
        PyDict_SetItemString(d, "sha256", sha) ||
        PyDict_SetItemString(d, "arena_kept", r.arena_kept ? Py_True : Py_False) ||
        PyDict_SetItemString(d, "arena_grown", r.arena_grown ? Py_True : Py_False))
        Py_CLEAR(d);
    /* Node-local sharing: whether this process read or mapped another's read. */
    PyObject *share = d ? Py_BuildValue("{s:s,s:n,s:n,s:K}", "line", r.share, "files_shared",
                                        (Py_ssize_t)r.files_shared, "files_read_here",
                                        (Py_ssize_t)r.files_share_read, "bytes",
                                        (unsigned long long)r.share_bytes)
                          : NULL;
    if (d && (!share || PyDict_SetItemString(d, "share", share)))
        Py_CLEAR(d);
    Py_XDECREF(share);
    Py_XDECREF(ready);
    Py_XDECREF(sha);
    return d;
}

static PyObject *Checkpoint_close(CheckpointObject *self, PyObject *unused)
{
    (void)unused;
    pinio_checkpoint_release(self->cp);
    self->cp = NULL;
    Py_RETURN_NONE;
}

static Py_ssize_t Checkpoint_len(CheckpointObject *self)
{
    return self->cp ? (Py_ssize_t)pinio_checkpoint_count(self->cp) : 0;
}

static PySequenceMethods Checkpoint_as_sequence = {
    .sq_length = (lenfunc)Checkpoint_len,
};

static PyMethodDef Checkpoint_methods[] = {
    {"info", (PyCFunction)Checkpoint_info, METH_O,
     "info(i) -> (name, dtype, shape, nbytes, file, file_offset)"},
    {"rows", (PyCFunction)Checkpoint_rows, METH_NOARGS, "rows() -> [info(i) for every i]"},
    {"index", (PyCFunction)Checkpoint_index, METH_NOARGS, "index() -> {name: i}"},
    {"buffer", (PyCFunction)Checkpoint_buffer, METH_O,
     "buffer(i) -> Buffer holding its own reference on tensor i's bytes"},
    {"metadata", (PyCFunction)Checkpoint_metadata, METH_O,
     "metadata(file) -> dict of file's __metadata__, or None"},
    {"files", (PyCFunction)Checkpoint_files, METH_NOARGS, "the input files, resolved"},
    {"report", (PyCFunction)Checkpoint_report, METH_NOARGS, "what the load did"},
    {"close", (PyCFunction)Checkpoint_close, METH_NOARGS,
     "drops the checkpoint's reference (Buffers keep theirs)"},
    {NULL, NULL, 0, NULL},
};

PyTypeObject CheckpointType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pinio._pinio.Checkpoint",
    .tp_doc = "A loaded checkpoint (pinio_checkpoint).",
    .tp_basicsize = sizeof(CheckpointObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_dealloc = (destructor)Checkpoint_dealloc,
    .tp_as_sequence = &Checkpoint_as_sequence,
    .tp_methods = Checkpoint_methods,
};

/* -------------------------------------------------------------- Arena */

/* A kept arena (pinio_arena, load.h): pinned memory one caller reuses
 * across its loads, passed to each explicitly (nothing process-global).
 * The library refuses a load through an arena that a checkpoint or tensor
 * bytes of the previous load still hold (-EBUSY): every Python tensor holds
 * such bytes through its Buffer, so a live tensor never sees its memory
 * reused; the refusal is turned into an error that says what to drop.
 * `busy` refuses a second load while one runs (the library's arena is not
 * for concurrent loads, and the GIL is released during a load). */
static PyObject *Arena_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, ":Arena", kwlist))
        return NULL;
    ArenaObject *self = (ArenaObject *)type->tp_alloc(type, 0);
    if (!self)
        return NULL;
    int r = pinio_arena_create(&self->a);
    if (r) {
        Py_DECREF(self);
        return raise_pinio(r, NULL, pinio_strerror(r));
    }
    return (PyObject *)self;
}

static void Arena_dealloc(ArenaObject *self)
{
    /* The memory stays with the last checkpoint or tensor still holding it. */
    pinio_arena_release(self->a);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Arena_get_size(ArenaObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromSize_t(pinio_arena_size(self->a));
}

static PyObject *Arena_get_closed(ArenaObject *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(self->a == NULL);
}

static PyObject *Arena_close(ArenaObject *self, PyObject *unused)
{
    (void)unused;
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "pinio.Arena: a load through it is running");
        return NULL;
    }
    pinio_arena_release(self->a);
    self->a = NULL;
    Py_RETURN_NONE;
}

static PyObject *Arena_enter(PyObject *self, PyObject *unused)
{
    (void)unused;
    return Py_NewRef(self);
}

static PyObject *Arena_exit(ArenaObject *self, PyObject *args)
{
    (void)args;
    return Arena_close(self, NULL);
}

static PyGetSetDef Arena_getset[] = {
    {"size", (getter)Arena_get_size, NULL,
     "bytes of memory the arena holds (0 before its first load or once closed)", NULL},
    {"closed", (getter)Arena_get_closed, NULL, "close() was called", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef Arena_methods[] = {
    {"close", (PyCFunction)Arena_close, METH_NOARGS,
     "releases the arena: its memory is freed now, or with the last tensor still using it"},
    {"__enter__", Arena_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)Arena_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

PyTypeObject ArenaType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pinio.Arena",
    .tp_doc = "Arena(): pinned memory kept across loads (pinio.load(..., arena=a)), so a "
              "later load pays no page faults. One load's tensors at a time: a load through "
              "an arena whose previous tensors are still alive raises pinio.Error (EBUSY).",
    .tp_basicsize = sizeof(ArenaObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = Arena_new,
    .tp_dealloc = (destructor)Arena_dealloc,
    .tp_getset = Arena_getset,
    .tp_methods = Arena_methods,
};

/* The arena argument of a load: NULL for None; -1 with an exception. */
int arena_arg(PyObject *o, ArenaObject **out)
{
    *out = NULL;
    if (o == Py_None)
        return 0;
    if (!PyObject_TypeCheck(o, &ArenaType)) {
        PyErr_Format(PyExc_TypeError, "arena must be a pinio.Arena, not %.100s",
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    ArenaObject *a = (ArenaObject *)o;
    if (!a->a) {
        PyErr_SetString(PyExc_ValueError, "pinio.Arena: the arena is closed");
        return -1;
    }
    if (a->busy) {
        PyErr_SetString(PyExc_RuntimeError,
                        "pinio.Arena: another load through this arena is running (an arena "
                        "serves one load at a time; give each thread its own)");
        return -1;
    }
    *out = a;
    return 0;
}

