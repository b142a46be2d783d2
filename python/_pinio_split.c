/* pinio._pinio's slice arguments and plan(): what the Python side of a
 * tensor-parallel load (issue 26) needs from the library.
 *
 * split= and slices= of load() and plan() become the plan's split rules and
 * box slices (plan.h). plan() builds a plan without reading any tensor data
 * and returns what it would read: the torch.distributed exchange
 * (pinio/_dist.py) builds one per rank to learn every rank's slice of every
 * tensor exactly as the library cuts it, so the Python side never
 * re-implements the rule matching or torch.chunk's sizes.
 */
#include "_pinio.h"

void slice_args_free(slice_args *a)
{
    free(a->split);
    free(a->slices);
    free(a->bounds);
    Py_XDECREF(a->keep);
    memset(a, 0, sizeof(*a));
}

/* split: [(pattern, dim or None)], None meaning whole (replicated). */
static int parse_split(slice_args *a, PyObject *split)
{
    PyObject *fast = PySequence_Fast(split, "split: a sequence of (pattern, dim) pairs");
    if (!fast)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    a->split = calloc((size_t)n + 1, sizeof(*a->split));
    if (!a->split) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(fast, i), *pat, *dim;
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) {
            PyErr_Format(PyExc_TypeError, "split[%zd]: a (pattern, dim) pair", i);
            goto fail;
        }
        pat = PyTuple_GET_ITEM(item, 0);
        dim = PyTuple_GET_ITEM(item, 1);
        const char *s = PyUnicode_Check(pat) ? c_str(pat, "split pattern") : NULL;
        if (!s) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "split[%zd]: the pattern is a str", i);
            goto fail;
        }
        int d = PINIO_SPLIT_WHOLE;
        if (dim != Py_None) {
            long v = PyLong_Check(dim) && !PyBool_Check(dim) ? PyLong_AsLong(dim) : LONG_MIN;
            if (v == -1 && PyErr_Occurred())
                goto fail;
            if (v < -64 || v > 64) {
                PyErr_Format(PyExc_ValueError, "split rule '%s': the dimension is an int "
                             "(negative counts from the end) or None for whole", s);
                goto fail;
            }
            d = (int)v;
        }
        if (PyList_Append(a->keep, item)) /* keeps `s` alive */
            goto fail;
        a->split[i].pattern = s;
        a->split[i].dim = d;
    }
    a->nsplit = (size_t)n;
    Py_DECREF(fast);
    return 0;
fail:
    Py_DECREF(fast);
    return -1;
}

/* One sequence of ints into `out[0, n)`; -1 with an exception otherwise. */
static int uint_list(PyObject *seq, uint64_t *out, Py_ssize_t n, const char *what, Py_ssize_t i)
{
    for (Py_ssize_t d = 0; d < n; d++) {
        PyObject *v = PySequence_Fast_GET_ITEM(seq, d);
        unsigned long long x = PyLong_Check(v) ? PyLong_AsUnsignedLongLong(v) : (unsigned long long)-1;
        if (PyErr_Occurred() || !PyLong_Check(v)) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "slices[%zd]: %s are ints >= 0", i, what);
            return -1;
        }
        out[d] = x;
    }
    return 0;
}

/* slices: [(name, starts, stops)], one box per tensor. */
static int parse_slices(slice_args *a, PyObject *slices)
{
    PyObject *fast = PySequence_Fast(slices, "slices: a sequence of (name, starts, stops)");
    if (!fast)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast), total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(fast, i);
        PyObject *st = PyTuple_Check(item) && PyTuple_GET_SIZE(item) == 3
                           ? PyTuple_GET_ITEM(item, 1) : NULL;
        Py_ssize_t k = st ? PySequence_Size(st) : -1;
        if (k < 0 || k > 64) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "slices[%zd]: a (name, starts, stops) triple of at "
                         "most 64 dimensions", i);
            Py_DECREF(fast);
            return -1;
        }
        total += k;
    }
    a->slices = calloc((size_t)n + 1, sizeof(*a->slices));
    a->bounds = calloc(2 * (size_t)total + 1, sizeof(*a->bounds));
    if (!a->slices || !a->bounds) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        return -1;
    }
    uint64_t *b = a->bounds;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(fast, i);
        PyObject *name = PyTuple_GET_ITEM(item, 0);
        const char *s = PyUnicode_Check(name) ? c_str(name, "slice of tensor") : NULL;
        PyObject *st = s ? PySequence_Fast(PyTuple_GET_ITEM(item, 1), "slices: starts") : NULL;
        PyObject *sp = st ? PySequence_Fast(PyTuple_GET_ITEM(item, 2), "slices: stops") : NULL;
        Py_ssize_t k = st ? PySequence_Fast_GET_SIZE(st) : 0;
        int bad = !s || !sp || PySequence_Fast_GET_SIZE(sp) != k ||
                  uint_list(st, b, k, "starts", i) || uint_list(sp, b + k, k, "stops", i) ||
                  PyList_Append(a->keep, item);
        Py_XDECREF(st);
        Py_XDECREF(sp);
        if (bad) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "slices[%zd]: a str name and as many stops as "
                             "starts", i);
            Py_DECREF(fast);
            return -1;
        }
        a->slices[i] = (pinio_slice){.name = s, .kind = PINIO_SLICE_BOX, .ndim = (unsigned)k,
                                     .start = b, .stop = b + k};
        b += 2 * k;
    }
    a->nslices = (size_t)n;
    Py_DECREF(fast);
    return 0;
}

int slice_args_parse(slice_args *a, PyObject *split, PyObject *slices)
{
    memset(a, 0, sizeof(*a));
    if (split == Py_None && slices == Py_None)
        return 0;
    a->keep = PyList_New(0);
    if (!a->keep || (split != Py_None && parse_split(a, split)) ||
        (slices != Py_None && parse_slices(a, slices))) {
        slice_args_free(a);
        return -1;
    }
    return 0;
}

/* (name, dtype, shape, nbytes, file, file_offset, full_shape, full_offset,
 * full_nbytes, start or None, runs) of tensor `i` of a plan. */
static PyObject *sliced_tensor_item(const pinio_plan *plan, size_t i)
{
    const pinio_plan_tensor *t = pinio_plan_tensor_at(plan, i);
    PyObject *shape = shape_tuple(t->shape, t->rank);
    PyObject *full = shape ? shape_tuple(t->full_shape, t->rank) : NULL;
    PyObject *start = !full ? NULL : t->start ? shape_tuple(t->start, t->rank)
                                              : Py_NewRef(Py_None);
    if (!start) {
        Py_XDECREF(shape);
        Py_XDECREF(full);
        return NULL;
    }
    return Py_BuildValue("(s#sNKIKNKKNK)", t->name, (Py_ssize_t)t->name_len,
                         pinio_dtype_name(t->dtype), shape, (unsigned long long)t->nbytes,
                         t->file, (unsigned long long)t->file_offset, full,
                         (unsigned long long)t->full_offset, (unsigned long long)t->full_nbytes,
                         start, (unsigned long long)t->runs);
}

CONV_UINT(rank, 32, uint32_t)
CONV_UINT(world, 32, uint32_t)

/* pinio_plan_create() with the GIL released: it reads the headers (of
 * objects too, a Ctrl-C ending their retries). 0; or -1 with an exception
 * set and no plan. */
static int plan_nogil(pinio_plan **plan, const char *const *p, size_t np,
                      const pinio_plan_opts *o, pinio_diag *diag)
{
    pinio_plan_opts oc = *o;
    py_stop stop;
    py_stop_init(&stop);
    oc.stop = py_stop_poll;
    oc.stop_ctx = &stop;
    int r;
    Py_BEGIN_ALLOW_THREADS
    r = pinio_plan_create(plan, p, np, &oc, diag);
    Py_END_ALLOW_THREADS
    if (py_stop_raised(&stop)) {
        if (!r)
            pinio_plan_free(*plan);
        *plan = NULL;
        return -1;
    }
    if (r)
        raise_pinio(r, diag, "plan failed");
    return r ? -1 : 0;
}

/* plan(paths, filters=None, split=None, rank=0, world=1, slices=None,
 *      max_overread=0.0) -> ([(path, size, metadata)], [tensor], {numbers}) */
PyObject *py_plan(PyObject *mod, PyObject *args, PyObject *kw)
{
    (void)mod;
    static char *kwlist[] = {(char *)"paths", (char *)"filters", (char *)"split",
                             (char *)"rank", (char *)"world", (char *)"slices",
                             (char *)"max_overread", NULL};
    PyObject *paths, *filters = Py_None, *split = Py_None, *slices = Py_None;
    uint32_t rank = 0, world = 1;
    double max_overread = 0.0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OOO&O&Od", kwlist, &paths, &filters, &split,
                                     conv_rank, &rank, conv_world, &world, &slices,
                                     &max_overread))
        return NULL;
    const char **p = NULL, **f = NULL;
    size_t np = 0, nf = 0;
    PyObject *keep_p = NULL, *keep_f = NULL;
    slice_args sa;
    if (slice_args_parse(&sa, split, slices))
        return NULL;
    p = str_array(paths, &np, &keep_p, 1);
    if (p && filters != Py_None)
        f = str_array(filters, &nf, &keep_f, 0);
    PyObject *res = NULL;
    if (p && (filters == Py_None || f)) {
        pinio_plan_opts o;
        pinio_plan_opts_default(&o);
        o.filters = f;
        o.nfilters = nf;
        o.split = sa.split;
        o.nsplit = sa.nsplit;
        o.slices = sa.slices;
        o.nslices = sa.nslices;
        o.rank = rank;
        o.world = world;
        o.max_overread = max_overread;
        pinio_plan *plan = NULL;
        pinio_diag diag;
        int r = plan_nogil(&plan, p, np, &o, &diag);
        if (!r) {
            pinio_plan_info pi;
            pinio_plan_get_info(plan, &pi);
            PyObject *files = PyList_New((Py_ssize_t)pi.files);
            for (size_t i = 0; files && i < pi.files; i++) {
                const pinio_plan_file *pf = pinio_plan_file_at(plan, i);
                PyObject *item = Py_BuildValue("(NKN)", PyUnicode_DecodeFSDefault(pf->path),
                                               (unsigned long long)pf->size,
                                               metadata_dict(pf->header));
                if (!item) {
                    Py_CLEAR(files);
                    break;
                }
                PyList_SET_ITEM(files, (Py_ssize_t)i, item);
            }
            PyObject *tensors = files ? PyList_New((Py_ssize_t)pi.tensors) : NULL;
            for (size_t i = 0; tensors && i < pi.tensors; i++) {
                PyObject *item = sliced_tensor_item(plan, i);
                if (!item) {
                    Py_CLEAR(tensors);
                    break;
                }
                PyList_SET_ITEM(tensors, (Py_ssize_t)i, item);
            }
            if (tensors)
                res = Py_BuildValue("(NN{s:K,s:K,s:n,s:n})", files, tensors, "bytes",
                                    (unsigned long long)pi.bytes, "read_bytes",
                                    (unsigned long long)pi.read_bytes, "reads",
                                    (Py_ssize_t)pi.reads, "skipped", (Py_ssize_t)pi.skipped);
            else
                Py_XDECREF(files);
            pinio_plan_free(plan);
        }
    }
    free(p);
    free(f);
    Py_XDECREF(keep_p);
    Py_XDECREF(keep_f);
    slice_args_free(&sa);
    return res;
}

/* What names a file for a process group's agreement, as the MPI paths name
 * it (mpi/mpi_verify.c): SAMPLE_BLOCKS blocks of SAMPLE_LEN bytes evenly
 * spaced over the data section, the last one ending at the end of the file
 * (a torn copy loses its tail first). A stale copy that kept its header (a
 * fine-tune of the same shapes) differs in every block. */
#define SAMPLE_BLOCKS 16
#define SAMPLE_LEN 4096

/* [off, off + len) of plan file `i` into `buf`; 0, or the code. */
static int read_exact(const pinio_plan *plan, size_t i, uint8_t *buf, uint64_t len, uint64_t off,
                      pinio_diag *diag)
{
    while (len) {
        size_t want = len < ((size_t)1 << 30) ? (size_t)len : (size_t)1 << 30;
        int64_t got = pinio_plan_file_read(plan, i, buf, want, off, diag);
        if (got < 0)
            return (int)got;
        if (got == 0) {
            const pinio_plan_file *f = pinio_plan_file_at(plan, i);
            pinio_diag_set_at(diag, PINIO_ECHANGED, f->path, off, "the file is shorter than "
                              "its validated %llu bytes", (unsigned long long)f->size);
            return PINIO_ECHANGED;
        }
        buf += got;
        off += (uint64_t)got;
        len -= (uint64_t)got;
    }
    return 0;
}

/* File `i`'s (path, size, header bytes, sampled blocks); NULL with an
 * exception. Reads through the plan's validated descriptor (or the
 * object's pinned version). */
static PyObject *ident_item(const pinio_plan *plan, size_t i)
{
    const pinio_plan_file *f = pinio_plan_file_at(plan, i);
    uint64_t head = 8 + pinio_st_header_size(f->header);
    if (head > f->size)
        head = f->size;
    uint64_t data = f->size - head, len = data < SAMPLE_LEN ? data : SAMPLE_LEN;
    PyObject *hb = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)head);
    PyObject *sb = hb ? PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(data ? SAMPLE_BLOCKS * len
                                                                          : 0)) : NULL;
    if (!sb) {
        Py_XDECREF(hb);
        return NULL;
    }
    uint8_t *h = (uint8_t *)PyBytes_AS_STRING(hb), *s = (uint8_t *)PyBytes_AS_STRING(sb);
    pinio_diag diag;
    int r;
    Py_BEGIN_ALLOW_THREADS
    r = read_exact(plan, i, h, head, 0, &diag);
    for (int k = 0; r == 0 && data && k < SAMPLE_BLOCKS; k++) {
        uint64_t off = k == SAMPLE_BLOCKS - 1 ? f->size - len
                                              : head + (data - len) / (SAMPLE_BLOCKS - 1) * k;
        r = read_exact(plan, i, s + (size_t)k * len, len, off, &diag);
    }
    Py_END_ALLOW_THREADS
    if (r) {
        Py_DECREF(hb);
        Py_DECREF(sb);
        return raise_pinio(r, &diag, "reading a file's identity failed");
    }
    return Py_BuildValue("(NKNN)", PyUnicode_DecodeFSDefault(f->path),
                         (unsigned long long)f->size, hb, sb);
}

/* idents(paths) -> [(path, size, header bytes, sampled data bytes)] per
 * input file, as resolved: what a process group compares before any
 * tensor byte moves (pinio/_dist.py hashes them). */
PyObject *py_idents(PyObject *mod, PyObject *arg)
{
    (void)mod;
    size_t np = 0;
    PyObject *keep_p = NULL;
    const char **p = str_array(arg, &np, &keep_p, 1);
    if (!p)
        return NULL;
    pinio_plan_opts o;
    pinio_plan_opts_default(&o);
    o.cache = PINIO_CACHE_HOT; /* never executed: no residency to measure */
    pinio_plan *plan = NULL;
    pinio_diag diag;
    int r = plan_nogil(&plan, p, np, &o, &diag);
    free(p);
    Py_DECREF(keep_p);
    if (r)
        return NULL;
    pinio_plan_info pi;
    pinio_plan_get_info(plan, &pi);
    PyObject *out = PyList_New((Py_ssize_t)pi.files);
    for (size_t i = 0; out && i < pi.files; i++) {
        PyObject *item = ident_item(plan, i);
        if (!item)
            Py_CLEAR(out);
        else
            PyList_SET_ITEM(out, (Py_ssize_t)i, item);
    }
    pinio_plan_free(plan);
    return out;
}
