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
    free(self->chunks);
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
    pinio_view_release(&self->map); /* the Buffers handed out keep their own references */
    free(self->chunks); /* view() runs with the GIL, as this does: none is using it */
    self->chunks = NULL;
    if (!self->busy)
        source_free_plan(self);
    Py_RETURN_NONE;
}

static void unmap_cb(void *cookie, void *ptr, size_t len)
{
    (void)cookie;
    munmap(ptr, len);
}

/* A view's residency is learnt per SOURCE_CHUNK of the file, once: a chunk
 * found all resident (SOURCE_HOT) answers every later view inside it with
 * no mincore; one found partly resident (SOURCE_MIXED) is not asked again as
 * a whole, its views ask for their own pages. Hot at 20,000 tensors every
 * 2nd key, a mincore a key was half of the view's syscalls where the mmap
 * handle makes none; a 2 MiB chunk holds ~40 such keys. A chunk evicted
 * after it was found hot still reads as resident: `resident` says what the
 * handle found when it first asked, as its byte counts do. */
#define SOURCE_CHUNK ((uint64_t)2 << 20)
#define SOURCE_HOT 1
#define SOURCE_MIXED 2

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
    size_t nchunks = (size_t)((pf->size + SOURCE_CHUNK - 1) / SOURCE_CHUNK);
    unsigned char *chunks = calloc(nchunks, 1);
    if (!chunks) {
        pinio_diag_set_at(diag, -ENOMEM, pf->path, PINIO_DIAG_NO_OFFSET,
                          "cannot allocate the residency map of %zu chunks", nchunks);
        return -ENOMEM;
    }
    void *p = mmap(NULL, (size_t)pf->size, PROT_READ | PROT_WRITE, MAP_PRIVATE, pf->fd, 0);
    if (p == MAP_FAILED) {
        int e = -errno;
        free(chunks);
        pinio_diag_set_at(diag, e, pf->path, 0, "cannot map %llu bytes: %s",
                          (unsigned long long)pf->size, pinio_strerror(e));
        return e;
    }
    int rc = pinio_view_wrap(&self->map, p, (size_t)pf->size, unmap_cb, NULL, 0);
    if (rc < 0) {
        munmap(p, (size_t)pf->size);
        free(chunks);
        pinio_diag_set(diag, rc, "%s: %s", pf->path, pinio_strerror(rc));
        return rc;
    }
    free(self->chunks);
    self->chunks = chunks;
    return 0;
}

/* mincore of the mapping's pages [lo, hi) (page-aligned, lo < hi): the
 * vector in `small` when it fits, else allocated (a result other than
 * `small`: the caller frees it); NULL when it failed (read as not
 * resident). */
static unsigned char *source_mincore(SourceObject *self, uint64_t lo, uint64_t hi, uint64_t page,
                                     unsigned char *small, size_t nsmall)
{
    size_t npages = (size_t)((hi - lo) / page);
    unsigned char *vec = npages <= nsmall ? small : malloc(npages);
    self->nmincore++;
    if (vec && mincore((uint8_t *)self->map.ptr + lo, (size_t)(hi - lo), vec) == 0)
        return vec;
    if (vec != small)
        free(vec);
    return NULL;
}

static int all_resident(const unsigned char *vec, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!(vec[i] & 1))
            return 0;
    return 1;
}

/* Whether [off, off + len) (len > 0, inside the file) is all in the page
 * cache, per the chunks' rule above. Nothing is brought in and no byte is
 * read: the caller's first touch faults the pages in, as upstream's does.
 * MADV_POPULATE_READ here was tried first: hot, at 20,000 tensors, it cost
 * 40-50 us a key more than the touch alone (one fault per page, where a
 * touch's fault maps the cached pages around it too). With the GIL: mincore
 * only looks the pages up, it never waits for the disk. */
static int range_resident(SourceObject *self, uint64_t size, uint64_t off, uint64_t len)
{
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t end = (size + page - 1) & ~(page - 1);
    size_t c0 = (size_t)(off / SOURCE_CHUNK), c1 = (size_t)((off + len - 1) / SOURCE_CHUNK);
    size_t c = c0;
    while (c <= c1 && self->chunks[c] == SOURCE_HOT)
        c++;
    if (c > c1)
        return 1;
    uint64_t lo = off & ~(page - 1), hi = (off + len + page - 1) & ~(page - 1);
    if (hi > end)
        hi = end;
    unsigned char small[512], *vec = source_mincore(self, lo, hi, page, small, sizeof small);
    int resident = vec && all_resident(vec, (size_t)((hi - lo) / page));
    if (vec && vec != small)
        free(vec);
    int ask = 0; /* a chunk never asked about as a whole */
    for (c = c0; c <= c1; c++)
        ask |= !self->chunks[c];
    if (!resident || !ask)
        return resident;
    /* Found resident: its chunks asked about once, whole, so the next keys
     * in them need no syscall. A cold file's chunks are rarely all there,
     * hence the widening only after a resident view, and once a chunk. */
    lo = (uint64_t)c0 * SOURCE_CHUNK;
    hi = (uint64_t)(c1 + 1) * SOURCE_CHUNK;
    if (hi > end)
        hi = end;
    vec = source_mincore(self, lo, hi, page, small, sizeof small);
    size_t per = (size_t)(SOURCE_CHUNK / page), total = (size_t)((hi - lo) / page);
    for (c = c0; c <= c1; c++) {
        size_t i = (c - c0) * per, n = total - i < per ? total - i : per;
        if (self->chunks[c] != SOURCE_HOT)
            self->chunks[c] = vec && all_resident(vec + i, n) ? SOURCE_HOT : SOURCE_MIXED;
    }
    if (vec && vec != small)
        free(vec);
    return resident;
}

/* The file still the validated one: its size and modification time, one
 * fstat a view. A file that shrank before this check is an error here,
 * never SIGBUS; one that shrinks after it faults its tensors' lost pages
 * as the engine's mapped tensors do. Once a key, not once a window or a
 * time quantum: a file changed between two keys fails the second
 * (tests/python/test_partial.py). With the GIL, as the mincore: releasing
 * it for the two syscalls handed it over at keys of an 8-thread pool (a
 * median 16 futex calls a key against the mmap handle's 9, and 9 with it
 * held; strace -c -f, 20,000 tensors hot, every 2nd key, 4 runs each). A
 * network file system revalidating its attributes (once a cache timeout)
 * holds the GIL for that round trip. */
static int file_unchanged(SourceObject *self, const pinio_plan_file *pf, pinio_diag *diag)
{
    struct stat sb;
    self->nfstat++;
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
    if ((int64_t)sb.st_mtim.tv_sec != self->mtime_s || sb.st_mtim.tv_nsec != self->mtime_ns) {
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
 * cost 4.5 ms at 20,000 tensors; a view costs one fstat, and a mincore
 * only where its chunk's residency is not known yet. */
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
    if (len && (rc = file_unchanged(self, pf, &diag)) != 0)
        return raise_pinio(rc, &diag, "view failed");
    pinio_view v = {0};
    if (len && (rc = pinio_view_slice(&self->map, (size_t)off, (size_t)(off + len), &v)) != 0)
        return raise_pinio(rc, NULL, "view failed");
    int resident = !len || range_resident(self, pf->size, off, len);
    self->nviews++;
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

static PyObject *Source_stats(SourceObject *self, PyObject *unused)
{
    (void)unused;
    return Py_BuildValue("{sKsKsK}", "views", self->nviews, "mincore", self->nmincore, "fstat",
                         self->nfstat);
}

static PyMethodDef Source_methods[] = {
    {"view", (PyCFunction)Source_view, METH_VARARGS,
     "view(offset, length) -> (Buffer, resident): those bytes of the file, zero-copy over a "
     "private mapping of it kept by the Source, the file checked against the validated size "
     "and modification time; resident: all in the page cache when the Source first asked"},
    {"stats", (PyCFunction)Source_stats, METH_NOARGS,
     "stats() -> {views, mincore, fstat}: the views made and the syscalls they cost (counted "
     "for tests)"},
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
