/* pinio._pinio: the CPython face of the library, through its public API only.
 *
 * Zero copy, alive by refcount: a tensor's bytes are exported by a small
 * Buffer object (the buffer protocol) that owns one pinio reference on the
 * loaded arena (a pinio_bytes from pinio_checkpoint_tensor_bytes()).
 * numpy.frombuffer keeps the exporter as the array's base and
 * torch.frombuffer takes a reference on it, so the arena lives exactly as
 * long as the last tensor or checkpoint using it, in whatever order they
 * die; nothing here ever reuses memory a tensor may still see (the
 * use-after-free that InstantTensor #8/#9 and fastsafetensors #94 shipped).
 *
 * The GIL is released around every call that does I/O or copies data
 * (load, header reads, range reads, save, serialize), so other Python
 * threads run and two threads may load at once; the objects a released
 * section touches are owned by the calling frame.
 *
 * Errors: a pinio failure raises pinio._pinio.Error (an OSError: errno,
 * strerror, and the library's one-line diagnostic naming the file, offset
 * or tensor); pinio.safetensors maps it to upstream's exception types.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pinio/load.h"
#include "pinio/save.h"
#include "pinio/stream.h"

static PyObject *Error; /* pinio._pinio.Error, an OSError */

static PyObject *raise_pinio(int code, const pinio_diag *d, const char *fallback)
{
    const char *msg = d && d->msg[0] ? d->msg : fallback;
    int e = code < 0 && code > -4000 ? -code : EIO;
    PyObject *args = Py_BuildValue("(is)", e, msg);
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

typedef struct {
    PyObject_HEAD
    pinio_bytes *bytes; /* a reference on a checkpoint's arena, or NULL */
    void *heap;         /* or memory of our own (range reads), freed with us */
    uint8_t *ptr;
    Py_ssize_t len;
    int readonly;       /* a shared read-only mapping of the file (map_private off) */
} BufferObject;

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

static PyTypeObject BufferType = {
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
static PyObject *buffer_from_bytes(pinio_bytes *b, int maps_writable)
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

typedef struct {
    PyObject_HEAD
    pinio_checkpoint *cp;
    int maps_writable;  /* loaded with map_private: mapped bytes are writable too */
} CheckpointObject;

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

static PyObject *shape_tuple(const uint64_t *shape, unsigned rank)
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
    PyObject *shape = shape_tuple(t->shape, t->rank);
    if (!shape)
        return NULL;
    return Py_BuildValue("(ssNKIK)", t->name, pinio_dtype_name(t->dtype), shape,
                         (unsigned long long)t->nbytes, t->file,
                         (unsigned long long)t->file_offset);
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

static PyObject *metadata_dict(const pinio_st *st)
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
    /* Each file's SHA-256 (None unless verified), and whether a kept arena
     * served the load (and had to grow for it). */
    PyObject *sha = d ? sha_list(self->cp, r.files) : NULL;
    if (!sha || PyDict_SetItemString(d, "sha256", sha) ||
        PyDict_SetItemString(d, "arena_kept", r.arena_kept ? Py_True : Py_False) ||
        PyDict_SetItemString(d, "arena_grown", r.arena_grown ? Py_True : Py_False))
        Py_CLEAR(d);
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

static PyTypeObject CheckpointType = {
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
typedef struct {
    PyObject_HEAD
    pinio_arena *a;
    int busy;
} ArenaObject;

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

static PyTypeObject ArenaType = {
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
static int arena_arg(PyObject *o, ArenaObject **out)
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

/* ------------------------------------------------------------ helpers */

/* A list of str/PathLike -> NULL-terminated array of encoded C strings;
 * `*keep` holds the bytes objects they point into. */
static const char **str_array(PyObject *seq, size_t *n, PyObject **keep, int fs)
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

static int parse_backend(const char *s, pinio_backend *out)
{
    static const struct { const char *name; pinio_backend b; } t[] = {
        {"auto", PINIO_BACKEND_AUTO}, {"fixed_direct", PINIO_BACKEND_FIXED_DIRECT},
        {"direct", PINIO_BACKEND_DIRECT}, {"buffered", PINIO_BACKEND_BUFFERED},
        {"pread", PINIO_BACKEND_PREAD},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
        if (!strcmp(s, t[i].name)) {
            *out = t[i].b;
            return 0;
        }
    PyErr_Format(PyExc_ValueError, "backend %s is invalid (auto, fixed_direct, direct, "
                 "buffered, pread)", s);
    return -1;
}

static int parse_policy(const char *what, const char *s, const char *const names[3], int *out)
{
    for (int i = 0; i < 3; i++)
        if (!strcmp(s, names[i])) {
            *out = i;
            return 0;
        }
    PyErr_Format(PyExc_ValueError, "%s %s is invalid (%s, %s, %s)", what, s, names[0], names[1],
                 names[2]);
    return -1;
}

/* expected_sha256: None, or a sequence of 64-hex-digit str or None (that
 * file unchecked) -> an array the library reads; `*keep` holds the strings. */
static int sha_array(PyObject *seq, const char ***out, size_t *n, PyObject **keep)
{
    *out = NULL;
    *n = 0;
    *keep = NULL;
    if (seq == Py_None)
        return 0;
    PyObject *fast = PySequence_Fast(seq, "expected_sha256: a sequence of hex digests or None");
    if (!fast)
        return -1;
    Py_ssize_t k = PySequence_Fast_GET_SIZE(fast);
    const char **arr = calloc((size_t)k + 1, sizeof(*arr));
    if (!arr) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(fast, i);
        if (item == Py_None)
            continue;
        const char *hex = PyUnicode_Check(item) ? PyUnicode_AsUTF8(item) : NULL;
        if (!hex) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "expected_sha256[%zd]: a str or None", i);
            free(arr);
            Py_DECREF(fast);
            return -1;
        }
        arr[i] = hex; /* valid while `fast` (which holds `item`) lives */
    }
    *out = arr;
    *n = (size_t)k;
    *keep = fast;
    return 0;
}

/* What load and stream_gpu both take: the inputs, the selection and the
 * I/O policies, parsed; `keep` holds the encoded strings they point into. */
typedef struct io_args {
    const char **paths, **filters;
    size_t npaths, nfilters;
    PyObject *keep_p, *keep_f;
    const char **sha;            /* expected_sha256 (NULL entries: unchecked), or NULL */
    size_t nsha;
    PyObject *keep_sha;
    pinio_backend backend;
    pinio_cache_policy cache;
    pinio_direct_policy direct;
} io_args;

static void io_args_free(io_args *a)
{
    free(a->paths);
    free(a->filters);
    free(a->sha);
    Py_XDECREF(a->keep_p);
    Py_XDECREF(a->keep_f);
    Py_XDECREF(a->keep_sha);
    memset(a, 0, sizeof(*a));
}

/* 0, or -1 with an exception set and nothing held. */
static int io_args_parse(io_args *a, PyObject *paths, PyObject *filters, PyObject *expected,
                         const char *backend, const char *cache, const char *direct)
{
    static const char *const caches[3] = {"auto", "cold", "hot"};
    static const char *const directs[3] = {"auto", "on", "off"};
    memset(a, 0, sizeof(*a));
    int c, d;
    if (parse_backend(backend, &a->backend) || parse_policy("cache", cache, caches, &c) ||
        parse_policy("direct", direct, directs, &d))
        return -1;
    a->cache = (pinio_cache_policy)c;
    a->direct = (pinio_direct_policy)d;
    a->paths = str_array(paths, &a->npaths, &a->keep_p, 1);
    if (!a->paths)
        return -1;
    if (sha_array(expected, &a->sha, &a->nsha, &a->keep_sha)) {
        io_args_free(a);
        return -1;
    }
    if (filters != Py_None) {
        a->filters = str_array(filters, &a->nfilters, &a->keep_f, 0);
        if (!a->filters) {
            io_args_free(a);
            return -1;
        }
    }
    return 0;
}

/* --------------------------------------------------------------- load */

static PyObject *py_load(PyObject *mod, PyObject *args, PyObject *kw)
{
    (void)mod;
    static char *kwlist[] = {(char *)"paths", (char *)"filters", (char *)"backend",
                             (char *)"cache", (char *)"direct", (char *)"verify",
                             (char *)"memory", (char *)"map_private", (char *)"arena",
                             (char *)"expected_sha256", (char *)"fill", NULL};
    PyObject *paths, *filters = Py_None, *arena_o = Py_None, *expected = Py_None;
    const char *backend = "auto", *cache = "auto", *direct = "auto", *memory = "auto";
    const char *fill = "auto";
    int verify = 0, map_private = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|Osssp$spOOs", kwlist, &paths, &filters,
                                     &backend, &cache, &direct, &verify, &memory, &map_private,
                                     &arena_o, &expected, &fill))
        return NULL;
    static const char *const memories[3] = {"auto", "pinned", "mapped"};
    /* the order of pinio_mapped_fill */
    static const char *const fills[3] = {"auto", "ahead", "fault"};
    int m, f;
    ArenaObject *arena;
    if (parse_policy("memory", memory, memories, &m) || parse_policy("fill", fill, fills, &f) ||
        arena_arg(arena_o, &arena))
        return NULL;
    io_args a;
    if (io_args_parse(&a, paths, filters, expected, backend, cache, direct))
        return NULL;
    pinio_load_opts o;
    pinio_load_opts_default(&o);
    o.backend = a.backend;
    o.cache = a.cache;
    o.direct = a.direct;
    o.filters = a.filters;
    o.nfilters = a.nfilters;
    o.memory = (pinio_memory_mode)m;
    o.map_private = map_private;
    o.mapped_fill = (uint8_t)f;
    o.verify = verify || a.sha;
    o.expected_sha256 = a.sha;
    o.nexpected = a.nsha;
    o.arena = arena ? arena->a : NULL;
    pinio_checkpoint *cp = NULL;
    pinio_diag diag;
    int r;
    if (arena)
        arena->busy = 1; /* the Python object is ours for the call: the argument holds it */
    Py_BEGIN_ALLOW_THREADS
    r = pinio_load(a.paths, a.npaths, &o, &cp, &diag);
    Py_END_ALLOW_THREADS
    if (arena)
        arena->busy = 0;
    if (r == -EBUSY && arena)
        pinio_diag_set(&diag, r,
                       "loading %s%s through a pinio.Arena: tensors (or the open checkpoint) "
                       "of the previous load through this arena are still alive, and this "
                       "load would overwrite their memory: drop every one of them (del, "
                       "close()) first, or load into another arena",
                       a.npaths ? a.paths[0] : "", a.npaths > 1 ? " (and more)" : "");
    io_args_free(&a);
    if (r)
        return raise_pinio(r, &diag, "load failed");
    CheckpointObject *co = PyObject_New(CheckpointObject, &CheckpointType);
    if (!co) {
        pinio_checkpoint_release(cp);
        return NULL;
    }
    co->cp = cp;
    co->maps_writable = map_private;
    return (PyObject *)co;
}

/* -------------------------------------------------------- stream_gpu */

/* The Python allocator behind pinio_sink_gpu_cfg.place, and the exception
 * it raised (kept for the caller: the stream runs without the GIL). */
typedef struct place_call {
    PyObject *fn;
    PyObject *type, *value, *tb;
    PyObject *files;     /* [(path, metadata or None)] of the plan, taken at placement */
    char (*sha)[65];     /* with verify: each file's digest ("" until given) */
    size_t nsha;
} place_call;

/* A list of `n` items, item `i` made by `make(ctx, i)` (a new reference,
 * or NULL with an exception set); NULL when any fails. */
static PyObject *list_of(size_t n, PyObject *(*make)(const void *ctx, size_t i), const void *ctx)
{
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list && i < n; i++) {
        PyObject *item = make(ctx, i);
        if (!item) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, item);
    }
    return list;
}

/* (name, dtype, shape, nbytes, file, file_offset) of tensor `i` of a plan. */
static PyObject *plan_tensor_item(const void *plan, size_t i)
{
    const pinio_plan_tensor *t = pinio_plan_tensor_at(plan, i);
    PyObject *shape = shape_tuple(t->shape, t->rank);
    return shape ? Py_BuildValue("(s#sNKIK)", t->name, (Py_ssize_t)t->name_len,
                                 pinio_dtype_name(t->dtype), shape,
                                 (unsigned long long)t->nbytes, t->file,
                                 (unsigned long long)t->file_offset)
                 : NULL;
}

/* (path, metadata or None) of file `i` of a plan: what a device checkpoint
 * reports (the plan resolved directories and indexes). */
static PyObject *plan_file_item(const void *plan, size_t i)
{
    const pinio_plan_file *f = pinio_plan_file_at(plan, i);
    PyObject *md = metadata_dict(f->header);
    return md ? Py_BuildValue("(NN)", PyUnicode_DecodeFSDefault(f->path), md) : NULL;
}

static PyObject *plan_file_list(const pinio_plan *plan)
{
    pinio_plan_info pi;
    pinio_plan_get_info(plan, &pi);
    return list_of(pi.files, plan_file_item, plan);
}

/* pinio_stream_opts.sha256_fn: on the stream's thread, without the GIL
 * (plain memory only). A failed allocation leaves the digest out ("",
 * reported None): the stream itself checked it. */
static void sha_from_stream(void *ctx, size_t file, const char *path, const char *hex)
{
    (void)path;
    place_call *pc = ctx;
    if (file >= pc->nsha) {
        char (*more)[65] = realloc(pc->sha, (file + 1) * sizeof(*more));
        if (!more)
            return;
        memset(more + pc->nsha, 0, (file + 1 - pc->nsha) * sizeof(*more));
        pc->sha = more;
        pc->nsha = file + 1;
    }
    snprintf(pc->sha[file], sizeof(pc->sha[file]), "%s", hex);
}

/* Runs on the stream's thread, inside the released section of
 * py_stream_gpu(): the GIL is taken back for the allocator's call only. */
static int place_with_python(void *ctx, const pinio_plan *plan, uint64_t *dptrs, size_t n,
                             pinio_diag *diag)
{
    place_call *pc = ctx;
    PyGILState_STATE g = PyGILState_Ensure();
    Py_XDECREF(pc->files);
    pc->files = plan_file_list(plan);
    PyObject *list = pc->files ? list_of(n, plan_tensor_item, plan) : NULL;
    PyObject *res = list ? PyObject_CallOneArg(pc->fn, list) : NULL;
    PyObject *fast = res ? PySequence_Fast(res, "the allocator returns a sequence of ints") : NULL;
    if (fast && (size_t)PySequence_Fast_GET_SIZE(fast) != n)
        PyErr_Format(PyExc_ValueError, "the allocator returned %zd pointers for %zu tensors",
                     PySequence_Fast_GET_SIZE(fast), n);
    for (size_t i = 0; fast && !PyErr_Occurred() && i < n; i++)
        dptrs[i] = PyLong_AsUnsignedLongLong(PySequence_Fast_GET_ITEM(fast, (Py_ssize_t)i));
    int rc = 0;
    if (PyErr_Occurred()) {
        PyErr_Fetch(&pc->type, &pc->value, &pc->tb);
        PyObject *str = pc->value ? PyObject_Str(pc->value) : NULL;
        const char *msg = str ? PyUnicode_AsUTF8(str) : NULL;
        PyErr_Clear();
        rc = -ECANCELED;
        pinio_diag_set(diag, rc, "placing %zu tensors: the allocator failed: %s", n,
                       msg ? msg : "an exception");
        Py_XDECREF(str);
    }
    Py_XDECREF(fast);
    Py_XDECREF(res);
    Py_XDECREF(list);
    PyGILState_Release(g);
    return rc;
}

static PyObject *gpu_report(const pinio_stream_report *r, const pinio_gpu_info *gi,
                            const place_call *pc)
{
    PyObject *d = Py_BuildValue(
        "{s:n,s:n,s:K,s:K,s:d,s:d,s:s,s:O,s:i,s:s,s:i,s:K,s:d,s:I,s:I,s:O,s:d,s:K,s:K}", "files",
        (Py_ssize_t)r->files, "tensors", (Py_ssize_t)r->tensors, "bytes",
        (unsigned long long)r->bytes, "read_bytes", (unsigned long long)r->read_bytes, "seconds",
        r->seconds, "io_seconds", r->io_seconds, "io_path", r->io_path, "registered",
        r->registered ? Py_True : Py_False, "device", gi->device, "pci_bus_id", gi->pci_bus_id,
        "driver_version", gi->driver_version, "copies", (unsigned long long)gi->copies,
        "h2d_seconds", gi->h2d_seconds, "slots_registered", gi->slots_registered,
        "slots_preregistered", gi->slots_preregistered, "verified",
        r->verified ? Py_True : Py_False, "verify_seconds", r->verify_seconds,
        "verify_landed_bytes", (unsigned long long)r->verify_landed_bytes,
        "verify_reread_bytes", (unsigned long long)r->verify_reread_bytes);
    /* The plan's files and their metadata (what a checkpoint object shows),
     * and each file's digest when verified (None where not). */
    size_t nf = pc->files ? (size_t)PyList_GET_SIZE(pc->files) : 0;
    PyObject *paths = PyList_New((Py_ssize_t)nf), *mds = PyList_New((Py_ssize_t)nf);
    PyObject *sha = PyList_New((Py_ssize_t)nf);
    for (size_t i = 0; paths && mds && sha && i < nf; i++) {
        PyObject *item = PyList_GET_ITEM(pc->files, (Py_ssize_t)i);
        PyList_SET_ITEM(paths, (Py_ssize_t)i, Py_NewRef(PyTuple_GET_ITEM(item, 0)));
        PyList_SET_ITEM(mds, (Py_ssize_t)i, Py_NewRef(PyTuple_GET_ITEM(item, 1)));
        PyObject *h = r->verified && i < pc->nsha && pc->sha[i][0]
                          ? PyUnicode_FromString(pc->sha[i])
                          : Py_NewRef(Py_None);
        if (!h) {
            Py_CLEAR(sha);
            break;
        }
        PyList_SET_ITEM(sha, (Py_ssize_t)i, h);
    }
    if (!d || !paths || !mds || !sha || PyDict_SetItemString(d, "paths", paths) ||
        PyDict_SetItemString(d, "metadata", mds) || PyDict_SetItemString(d, "sha256", sha))
        Py_CLEAR(d);
    Py_XDECREF(paths);
    Py_XDECREF(mds);
    Py_XDECREF(sha);
    return d;
}

/* stream_gpu(paths, place, api, device, filters, ...) -> report: the
 * selected tensors through the CUDA (or HIP) sink to device addresses the
 * Python `place` chooses, every copy complete when this returns. With
 * verify, each file's SHA-256 is computed from the bytes as they land in
 * the staging slots (stream.h), before they are copied. */
static PyObject *py_stream_gpu(PyObject *mod, PyObject *args, PyObject *kw)
{
    (void)mod;
    static char *kwlist[] = {(char *)"paths", (char *)"place", (char *)"api", (char *)"device",
                             (char *)"filters", (char *)"backend", (char *)"cache",
                             (char *)"direct", (char *)"slot_size", (char *)"slots",
                             (char *)"verify", (char *)"expected_sha256", NULL};
    PyObject *paths, *place, *filters = Py_None, *expected = Py_None;
    const char *api = "cuda", *backend = "auto", *cache = "auto", *direct = "auto";
    int device = 0, verify = 0;
    Py_ssize_t slot_size = 0;
    unsigned int slots = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|siOsssnIpO", kwlist, &paths, &place, &api,
                                     &device, &filters, &backend, &cache, &direct, &slot_size,
                                     &slots, &verify, &expected))
        return NULL;
    const pinio_sink *sink = pinio_sink_find(api);
    if (!PyCallable_Check(place) || !sink || (strcmp(api, "cuda") && strcmp(api, "hip"))) {
        PyErr_SetString(PyExc_ValueError, "stream_gpu: place must be callable, api cuda or hip");
        return NULL;
    }
    io_args a;
    if (io_args_parse(&a, paths, filters, expected, backend, cache, direct))
        return NULL;
    place_call pc = {.fn = place};
    pinio_stream_opts o;
    pinio_stream_opts_default(&o);
    o.backend = a.backend;
    o.cache = a.cache;
    o.direct = a.direct;
    o.filters = a.filters;
    o.nfilters = a.nfilters;
    if (slot_size)
        o.slot_size = (size_t)slot_size;
    if (slots)
        o.slots = slots;
    o.verify = verify || a.sha;
    o.expected_sha256 = a.sha;
    o.nexpected = a.nsha;
    o.sha256_fn = sha_from_stream;
    o.sha256_ctx = &pc;
    pinio_gpu_arena *arena = NULL;
    pinio_sink_gpu_cfg cfg = {.device = device, .place = place_with_python, .place_ctx = &pc,
                              .out = &arena};
    pinio_stream_report rep;
    pinio_diag diag;
    int r;
    Py_BEGIN_ALLOW_THREADS
    r = pinio_stream(a.paths, a.npaths, &o, sink, &cfg, &rep, &diag);
    Py_END_ALLOW_THREADS
    io_args_free(&a);
    PyObject *res = NULL;
    if (r && pc.type) { /* the allocator's own exception, as it raised it */
        PyErr_Restore(pc.type, pc.value, pc.tb);
    } else if (r) {
        raise_pinio(r, &diag, "stream to the GPU failed");
    } else {
        /* The memory is the caller's; the arena held only the context. */
        pinio_gpu_info gi;
        pinio_gpu_arena_get_info(arena, &gi);
        pinio_gpu_arena_free(arena);
        res = gpu_report(&rep, &gi, &pc);
    }
    Py_XDECREF(pc.files);
    free(pc.sha);
    return res;
}

/* ------------------------------------------------------ header, read */

/* (tensors in file order [(name, dtype, shape, begin, end)], metadata or
 * None, data_offset, file_size) of a parsed header; frees `st`. */
static PyObject *header_tuple(pinio_st *st)
{
    size_t n = pinio_st_count(st);
    PyObject *list = PyList_New((Py_ssize_t)n), *res = NULL;
    for (size_t i = 0; list && i < n; i++) {
        const pinio_st_tensor *t = pinio_st_at(st, i);
        PyObject *shape = shape_tuple(t->shape, t->rank);
        PyObject *item = shape ? Py_BuildValue("(s#sNKK)", t->name, (Py_ssize_t)t->name_len,
                                               pinio_dtype_name(t->dtype), shape,
                                               (unsigned long long)t->begin,
                                               (unsigned long long)t->end)
                               : NULL;
        if (!item) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, item);
    }
    PyObject *md = list ? metadata_dict(st) : NULL;
    if (md)
        res = Py_BuildValue("(NNKK)", list, md, (unsigned long long)pinio_st_data_offset(st),
                            (unsigned long long)pinio_st_file_size(st));
    else
        Py_XDECREF(list);
    pinio_st_free(st);
    return res;
}

/* header(path): the file's header, read and validated (GIL released). */
static PyObject *py_header(PyObject *mod, PyObject *arg)
{
    (void)mod;
    PyObject *enc;
    if (!PyUnicode_FSConverter(arg, &enc))
        return NULL;
    pinio_st *st = NULL;
    pinio_diag diag;
    int r;
    Py_BEGIN_ALLOW_THREADS
    r = pinio_st_open(&st, PyBytes_AS_STRING(enc), 0, &diag);
    Py_END_ALLOW_THREADS
    Py_DECREF(enc);
    if (r)
        return raise_pinio(r, &diag, "header read failed");
    return header_tuple(st);
}

/* parse(bytes): the header of a whole file image in memory (deserialize). */
static PyObject *py_parse(PyObject *mod, PyObject *arg)
{
    (void)mod;
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE))
        return NULL;
    pinio_st *st = NULL;
    pinio_diag diag;
    int r = pinio_st_parse(&st, view.buf, (size_t)view.len, (uint64_t)view.len, NULL, 0, &diag);
    PyBuffer_Release(&view);
    if (r)
        return raise_pinio(r, &diag, "invalid header");
    return header_tuple(st);
}

/* read(fd, offset, length) -> Buffer of exactly those bytes (pread, GIL
 * released): get_slice's row reads, and the "pread" backend's per-tensor reads. */
static PyObject *py_read(PyObject *mod, PyObject *args)
{
    (void)mod;
    int fd;
    unsigned long long off, len;
    if (!PyArg_ParseTuple(args, "iKK", &fd, &off, &len))
        return NULL;
    if (len > (unsigned long long)PY_SSIZE_T_MAX)
        return PyErr_NoMemory();
    /* 64-byte aligned, so every dtype's view of it is aligned too. */
    void *mem = NULL;
    if (posix_memalign(&mem, 64, len ? (size_t)len : 1))
        return PyErr_NoMemory();
    int err = 0;
    size_t got = 0;
    Py_BEGIN_ALLOW_THREADS
    while (got < len) {
        ssize_t k = pread(fd, (uint8_t *)mem + got, (size_t)len - got, (off_t)(off + got));
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            err = k < 0 ? errno : EIO;
            break;
        }
        got += (size_t)k;
    }
    Py_END_ALLOW_THREADS
    if (err) {
        free(mem);
        errno = err;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    BufferObject *o = PyObject_New(BufferObject, &BufferType);
    if (!o) {
        free(mem);
        return NULL;
    }
    o->bytes = NULL;
    o->heap = mem;
    o->ptr = mem;
    o->len = (Py_ssize_t)len;
    o->readonly = 0;
    return (PyObject *)o;
}

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

static int specs_parse(PyObject *seq, PyObject *metadata, struct specs *s)
{
    memset(s, 0, sizeof(*s));
    s->keep = PyList_New(0);
    PyObject *fast = s->keep ? PySequence_Fast(seq, "expected a sequence of specs") : NULL;
    if (!fast)
        return -1;
    s->n = (size_t)PySequence_Fast_GET_SIZE(fast);
    size_t dims = 0;
    for (size_t i = 0; i < s->n; i++) {
        PyObject *it = PySequence_Fast_GET_ITEM(fast, (Py_ssize_t)i);
        if (!PyTuple_Check(it) || PyTuple_GET_SIZE(it) != 5) {
            PyErr_SetString(PyExc_TypeError, "a spec is (name, dtype, shape, data_ptr, data_len)");
            goto fail;
        }
        Py_ssize_t r = PySequence_Size(PyTuple_GET_ITEM(it, 2));
        if (r < 0)
            goto fail;
        dims += (size_t)r;
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
        PyObject *shape = PySequence_Fast(PyTuple_GET_ITEM(it, 2), "shape: a sequence");
        if (!shape)
            goto fail;
        t->rank = (unsigned)PySequence_Fast_GET_SIZE(shape);
        t->shape = s->shapes + at;
        for (unsigned d = 0; d < t->rank; d++) {
            s->shapes[at + d] = PyLong_AsUnsignedLongLong(PySequence_Fast_GET_ITEM(shape, d));
            if (PyErr_Occurred()) {
                Py_DECREF(shape);
                goto fail;
            }
        }
        Py_DECREF(shape);
        at += t->rank;
        t->data = PyLong_AsVoidPtr(PyTuple_GET_ITEM(it, 3));
        t->nbytes = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(it, 4));
        if (PyErr_Occurred())
            goto fail;
    }
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
    Py_DECREF(fast);
    return -1;
}

static PyObject *py_save(PyObject *mod, PyObject *args, PyObject *kw)
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
static PyObject *py_serialize(PyObject *mod, PyObject *args)
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

/* ------------------------------------------------------------- module */

static PyMethodDef methods[] = {
    {"load", (PyCFunction)(void (*)(void))py_load, METH_VARARGS | METH_KEYWORDS,
     "load(paths, filters=None, backend='auto', cache='auto', direct='auto', verify=False, *, "
     "memory='auto', map_private=True, arena=None, expected_sha256=None, fill='auto')"
     " -> Checkpoint (GIL released during the load)"},
    {"stream_gpu", (PyCFunction)(void (*)(void))py_stream_gpu, METH_VARARGS | METH_KEYWORDS,
     "stream_gpu(paths, place, api='cuda', device=0, filters=None, backend='auto', "
     "cache='auto', direct='auto', slot_size=0, slots=0, verify=False, expected_sha256=None)"
     " -> report: place([(name, dtype, shape, nbytes, file, file_offset)]) returns each "
     "tensor's device address; synchronised on return"},
    {"header", py_header, METH_O,
     "header(path) -> ([(name, dtype, shape, begin, end)] in file order, metadata|None, "
     "data_offset, file_size)"},
    {"parse", py_parse, METH_O, "parse(bytes) -> as header(), for a file image in memory"},
    {"read", py_read, METH_VARARGS, "read(fd, offset, length) -> Buffer (pread)"},
    {"save", (PyCFunction)(void (*)(void))py_save, METH_VARARGS | METH_KEYWORDS,
     "save(path, specs, metadata=None, direct=True, sync=True) -> dict (pinio_save)"},
    {"serialize", py_serialize, METH_VARARGS, "serialize(specs, metadata=None) -> bytes"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moddef = {
    PyModuleDef_HEAD_INIT, "_pinio",
    "pinio's C library: zero-copy loads, header reads, range reads, the writer.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__pinio(void);

PyMODINIT_FUNC PyInit__pinio(void)
{
    if (PyType_Ready(&BufferType) < 0 || PyType_Ready(&CheckpointType) < 0 ||
        PyType_Ready(&ArenaType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&moddef);
    if (!m)
        return NULL;
    Error = PyErr_NewExceptionWithDoc("pinio._pinio.Error",
                                      "A pinio failure: errno, and the library's diagnostic "
                                      "(file, offset or tensor) as strerror.",
                                      PyExc_OSError, NULL);
    /* PyModule_AddObjectRef (3.10+) leaves our own references alone. */
    if (!Error || PyModule_AddObjectRef(m, "Error", Error) ||
        PyModule_AddObjectRef(m, "Buffer", (PyObject *)&BufferType) ||
        PyModule_AddObjectRef(m, "Checkpoint", (PyObject *)&CheckpointType) ||
        PyModule_AddObjectRef(m, "Arena", (PyObject *)&ArenaType) ||
        PyModule_AddStringConstant(m, "version", pinio_version())) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
