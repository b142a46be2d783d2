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
#include <sys/mman.h>
#include <sys/stat.h>

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
    /* The modification time view() holds the file to (the plan keeps its
     * own, private): taken now, right after the validation, and a size
     * other than the validated one is caught by view()'s own check. */
    struct stat sb;
    if (fstat(pinio_plan_file_at(self->plan, 0)->fd, &sb) == 0) {
        self->mtime_s = (int64_t)sb.st_mtim.tv_sec;
        self->mtime_ns = sb.st_mtim.tv_nsec;
    }
    return (PyObject *)self;
}

static void Source_dealloc(SourceObject *self)
{
    pinio_view_release(&self->map); /* the Buffers handed out keep their own references */
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
    pinio_view_release(&self->map); /* a view() running holds its own slice of it */
    if (!self->busy)
        source_free_plan(self);
    Py_RETURN_NONE;
}

static void unmap_cb(void *cookie, void *ptr, size_t len)
{
    (void)cookie;
    munmap(ptr, len);
}

/* The whole file mapped private and writable, as upstream's safe_open maps
 * it (a write is the writer's copy of the page), kept for the Source's
 * life and each Buffer's. Charged as upstream's is (no MAP_NORESERVE): where
 * the kernel would not back a write to every page, the map fails with
 * ENOMEM and safe_open reads by engine runs instead. */
static int source_map(SourceObject *self, pinio_diag *diag)
{
    const pinio_plan_file *pf = pinio_plan_file_at(self->plan, 0);
    if (self->map.len || !pf->size)
        return 0;
    void *p = mmap(NULL, (size_t)pf->size, PROT_READ | PROT_WRITE, MAP_PRIVATE, pf->fd, 0);
    if (p == MAP_FAILED) {
        int e = -errno;
        pinio_diag_set_at(diag, e, pf->path, 0, "cannot map %llu bytes: %s",
                          (unsigned long long)pf->size, pinio_strerror(e));
        return e;
    }
    int rc = pinio_view_wrap(&self->map, p, (size_t)pf->size, unmap_cb, NULL, 0);
    if (rc < 0) {
        munmap(p, (size_t)pf->size);
        pinio_diag_set(diag, rc, "%s: %s", pf->path, pinio_strerror(rc));
    }
    return rc;
}

/* Says whether [off, off + len) of the mapping is all in the page cache,
 * and checks the file is still the validated one. Nothing is brought in
 * and no byte is read here: the caller's first touch faults the pages in,
 * as upstream's does. MADV_POPULATE_READ here was tried first: hot, at
 * 20,000 tensors, it cost 40-50 us a key more than the touch alone (one
 * fault per page, where a touch's fault maps the cached pages around it
 * too; busy 2-CPU VM, 2 runs each). A
 * file that shrank after this check faults its tensors' lost pages as
 * the engine's mapped tensors do; one that shrank before it is an error
 * here, never SIGBUS. Runs without the GIL. */
static int check_range(const pinio_plan_file *pf, int64_t mtime_s, long mtime_ns,
                       uint8_t *base, uint64_t off, uint64_t len, int *resident,
                       pinio_diag *diag)
{
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t lo = off & ~(page - 1), hi = (off + len + page - 1) & ~(page - 1);
    if (hi > pf->size)
        hi = (pf->size + page - 1) & ~(page - 1);
    size_t npages = (size_t)((hi - lo) / page);
    *resident = 1;
    unsigned char small[256], *vec = npages <= sizeof small ? small : malloc(npages);
    if (vec && mincore(base + lo, (size_t)(hi - lo), vec) == 0) {
        for (size_t i = 0; i < npages && *resident; i++)
            *resident = vec[i] & 1;
    } else {
        *resident = 0;
    }
    if (vec != small)
        free(vec);
    struct stat sb;
    if (fstat(pf->fd, &sb) != 0) {
        int e = -errno;
        pinio_diag_set_at(diag, e, pf->path, PINIO_DIAG_NO_OFFSET, "fstat: %s", pinio_strerror(e));
        return e;
    }
    if ((uint64_t)sb.st_size != pf->size) {
        pinio_diag_set_at(diag, PINIO_ECHANGED, pf->path, PINIO_DIAG_NO_OFFSET,
                          "file changed since its header was validated: size was %llu, now %llu",
                          (unsigned long long)pf->size, (unsigned long long)sb.st_size);
        return PINIO_ECHANGED;
    }
    if ((int64_t)sb.st_mtim.tv_sec != mtime_s || sb.st_mtim.tv_nsec != mtime_ns) {
        pinio_diag_set_at(diag, PINIO_ECHANGED, pf->path, PINIO_DIAG_NO_OFFSET,
                          "file changed since its header was validated: its modification time "
                          "moved (rewritten in place?)");
        return PINIO_ECHANGED;
    }
    return 0;
}

/* view(offset, length) -> (Buffer, resident): bytes [offset, offset +
 * length) of the file, zero-copy over the Source's kept mapping (made at
 * the first call), the file checked unchanged; resident: they all are in
 * the page cache. safe_open's random accesses: an engine run per tensor
 * cost 4.5 ms at 20,000 tensors, a view costs two syscalls. */
static PyObject *Source_view(SourceObject *self, PyObject *args)
{
    unsigned long long off, len;
    if (!PyArg_ParseTuple(args, "KK:view", &off, &len) || source_open(self))
        return NULL;
    const pinio_plan_file *pf = pinio_plan_file_at(self->plan, 0);
    pinio_diag diag;
    if (off > pf->size || len > pf->size - off) {
        pinio_diag_set_at(&diag, -ERANGE, pf->path, off,
                          "bytes [%llu, %llu) lie past the end of the file (%llu bytes)", off,
                          off + len, (unsigned long long)pf->size);
        return raise_pinio(-ERANGE, &diag, "view failed");
    }
    int rc = source_map(self, &diag);
    if (rc)
        return raise_pinio(rc, &diag, "map failed");
    pinio_view v = {0};
    if (len && (rc = pinio_view_slice(&self->map, (size_t)off, (size_t)(off + len), &v)) != 0)
        return raise_pinio(rc, NULL, "view failed");
    int resident = 1;
    source_hold(self); /* the plan's descriptor, while the GIL is released */
    uint8_t *base = (uint8_t *)self->map.ptr;
    int64_t ms = self->mtime_s;
    long mns = self->mtime_ns;
    Py_BEGIN_ALLOW_THREADS
    if (len)
        rc = check_range(pf, ms, mns, base, off, len, &resident, &diag);
    Py_END_ALLOW_THREADS
    source_release(self);
    if (rc) {
        pinio_view_release(&v);
        return raise_pinio(rc, &diag, "view failed");
    }
    pinio_bytes *b = NULL;
    if (!len)
        rc = pinio_bytes_alloc(&b, 0, 64);
    else if ((rc = pinio_bytes_from_view(&b, &v, PINIO_PROP_FILE)) != 0)
        pinio_view_release(&v);
    if (rc)
        return raise_pinio(rc, NULL, pinio_strerror(rc));
    PyObject *buf = buffer_from_bytes(b, 1);
    return buf ? Py_BuildValue("(NO)", buf, resident ? Py_True : Py_False) : NULL;
}

static PyMethodDef Source_methods[] = {
    {"view", (PyCFunction)Source_view, METH_VARARGS,
     "view(offset, length) -> (Buffer, resident): those bytes of the file, zero-copy over a "
     "private mapping of it kept by the Source, the file checked against the validated size "
     "and modification time; resident: all in the page cache"},
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
