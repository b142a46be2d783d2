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
#include "_pinio.h"

/* ------------------------------------------------------------ helpers */

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

int uint_arg(PyObject *o, const char *what, unsigned bits, uint64_t *out)
{
    if (PyBool_Check(o) || !PyIndex_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s=%R: an int", what, o);
        return -1;
    }
    PyObject *i = PyNumber_Index(o);
    if (!i)
        return -1;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(i, &overflow);
    unsigned long long u = 0;
    if (overflow > 0) { /* past a long long: an unsigned 64-bit value, or not */
        u = PyLong_AsUnsignedLongLong(i);
        if (PyErr_Occurred()) {
            PyErr_Clear();
            overflow = -1;
        }
    } else if (!overflow && v >= 0) {
        u = (unsigned long long)v;
    } else if (!PyErr_Occurred()) {
        overflow = -1; /* negative */
    }
    if (PyErr_Occurred()) {
        Py_DECREF(i);
        return -1;
    }
    unsigned long long max = bits >= 64 ? ~0ULL : (1ULL << bits) - 1;
    if (overflow < 0 || u > max) {
        PyErr_Format(PyExc_ValueError, "%s=%R is out of range: an int from 0 to %llu", what, i,
                     max);
        Py_DECREF(i);
        return -1;
    }
    Py_DECREF(i);
    *out = u;
    return 0;
}

CONV_UINT(rank, 32, uint32_t)
CONV_UINT(world, 32, uint32_t)
CONV_UINT(slots, 32, uint32_t)
CONV_UINT(offset, 63, uint64_t) /* an off_t */
CONV_UINT(length, 64, uint64_t)

/* consumer: who uses the tensors (pinio_consumer: "dma", a GPU upload,
 * makes memory "auto" choose pinned memory). */
static int parse_consumer(const char *s, int *out)
{
    if (!strcmp(s, "host") || !strcmp(s, "dma")) {
        *out = !strcmp(s, "dma") ? PINIO_CONSUMER_DMA : PINIO_CONSUMER_HOST;
        return 0;
    }
    PyErr_Format(PyExc_ValueError, "consumer %s is invalid (host, dma)", s);
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
        const char *hex = PyUnicode_Check(item) ? c_str(item, "expected_sha256 digest") : NULL;
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

static const char *const memories[3] = {"auto", "pinned", "mapped"};
/* the order of pinio_mapped_fill */
static const char *const fills[3] = {"auto", "ahead", "fault"};
static const char *const caches[3] = {"auto", "cold", "hot"};
static const char *const directs[3] = {"auto", "on", "off"};

/* check_io: the I/O policy strings judged by the parsers a load uses, with
 * no load. Why: a process group's ranks must refuse one rank's bad string
 * before their agreement, where every rank raises the same error; found
 * only when that rank reads (never, when it owns no tensor), the others
 * would be left with a load the group did not agree to. */
static PyObject *py_check_io(PyObject *mod, PyObject *args, PyObject *kw)
{
    (void)mod;
    static char *kwlist[] = {(char *)"backend", (char *)"cache", (char *)"direct",
                             (char *)"memory", (char *)"fill", (char *)"consumer", NULL};
    const char *backend = "auto", *cache = "auto", *direct = "auto", *memory = "auto";
    const char *fill = "auto", *consumer = "host";
    pinio_backend b;
    int v;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$ssssss", kwlist, &backend, &cache, &direct,
                                     &memory, &fill, &consumer) ||
        parse_backend(backend, &b) || parse_policy("cache", cache, caches, &v) ||
        parse_policy("direct", direct, directs, &v) ||
        parse_policy("memory", memory, memories, &v) || parse_policy("fill", fill, fills, &v) ||
        parse_consumer(consumer, &v))
        return NULL;
    Py_RETURN_NONE;
}

/* What load, stream_gpu and copy_gpu take: the inputs, the selection and the
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

/* PINIO_FIRST_TOUCH_GBPS: the first-touch figure of pinio_load's cold rule
 * (pinio_load_opts::first_touch_gbps), given instead of measured (tests, a
 * machine whose figure is known); 0 when unset (the library measures).
 * Read here, not in the library, as the CLI reads it. */
static int env_first_touch(double *touch)
{
    const char *v = getenv("PINIO_FIRST_TOUCH_GBPS");
    *touch = 0;
    if (!v || !*v)
        return 0;
    char *end;
    errno = 0;
    double g = strtod(v, &end);
    if (*end || errno || !(g > 0 && g < 1e9)) {
        PyErr_Format(PyExc_ValueError,
                     "PINIO_FIRST_TOUCH_GBPS wants a rate in GB/s above 0, not '%s'", v);
        return -1;
    }
    *touch = g;
    return 0;
}

static PyObject *py_load(PyObject *mod, PyObject *args, PyObject *kw)
{
    (void)mod;
    static char *kwlist[] = {(char *)"paths", (char *)"filters", (char *)"backend",
                             (char *)"cache", (char *)"direct", (char *)"verify",
                             (char *)"memory", (char *)"map_private", (char *)"arena",
                              (char *)"expected_sha256", (char *)"fill", (char *)"split",
                              (char *)"rank", (char *)"world", (char *)"slices",
                              (char *)"max_overread", (char *)"consumer", (char *)"source",
                              (char *)"exact", (char *)"share", NULL};
    PyObject *paths, *filters = Py_None, *arena_o = Py_None, *expected = Py_None;
    PyObject *split = Py_None, *slices = Py_None, *source_o = Py_None;
    const char *backend = "auto", *cache = "auto", *direct = "auto", *memory = "auto";
    const char *fill = "auto", *consumer = "host", *share = "auto";
    int verify = 0, map_private = 1, exact = 0;
    uint32_t rank = 0, world = 1;
    double max_overread = 0.0, touch = 0.0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|Osssp$spOOsOO&O&OdsOps", kwlist, &paths,
                                     &filters, &backend, &cache, &direct, &verify, &memory,
                                     &map_private, &arena_o, &expected, &fill, &split,
                                     conv_rank, &rank, conv_world, &world, &slices,
                                     &max_overread, &consumer, &source_o, &exact, &share))
        return NULL;
    if (env_first_touch(&touch))
        return NULL;
    if (strcmp(share, "auto") && strcmp(share, "off")) {
        PyErr_Format(PyExc_ValueError, "share %s is invalid (auto, off)", share);
        return NULL;
    }
    int m, f, c;
    ArenaObject *arena;
    SourceObject *src;
    if (parse_policy("memory", memory, memories, &m) || parse_policy("fill", fill, fills, &f) ||
        parse_consumer(consumer, &c) || arena_arg(arena_o, &arena) || source_arg(source_o, &src))
        return NULL;
    if (src && paths != Py_None) {
        PyErr_SetString(PyExc_TypeError, "load: paths or source, not both (paths=None)");
        return NULL;
    }
    io_args a;
    slice_args sa;
    if (slice_args_parse(&sa, split, slices))
        return NULL;
    /* source: the file it validated, no paths (an empty list of them) */
    PyObject *no_paths = src ? PyTuple_New(0) : NULL;
    int bad = src && !no_paths;
    if (!bad)
        bad = io_args_parse(&a, src ? no_paths : paths, filters, expected, backend, cache, direct);
    Py_XDECREF(no_paths);
    if (bad) {
        slice_args_free(&sa);
        return NULL;
    }
    pinio_load_opts o;
    pinio_load_opts_default(&o);
    o.backend = a.backend;
    o.cache = a.cache;
    o.direct = a.direct;
    o.filters = a.filters;
    o.nfilters = a.nfilters;
    o.filters_exact = exact;
    o.memory = (pinio_memory_mode)m;
    o.map_private = map_private;
    o.mapped_fill = (uint8_t)f;
    o.consumer = (pinio_consumer)c;
    o.share = (uint8_t)(strcmp(share, "off") ? PINIO_SHARE_AUTO : PINIO_SHARE_OFF);
    o.first_touch_gbps = touch;
    o.verify = verify || a.sha;
    o.expected_sha256 = a.sha;
    o.nexpected = a.nsha;
    o.arena = arena ? arena->a : NULL;
    o.split = sa.split;
    o.nsplit = sa.nsplit;
    o.slices = sa.slices;
    o.nslices = sa.nslices;
    o.rank = rank;
    o.world = world;
    o.max_overread = max_overread;
    py_stop stop;
    py_stop_init(&stop);
    o.stop = py_stop_poll;
    o.stop_ctx = &stop;
    pinio_checkpoint *cp = NULL;
    pinio_diag diag;
    int r;
    if (arena)
        arena->busy = 1; /* the Python object is ours for the call: the argument holds it */
    if (src)
        source_hold(src);
    Py_BEGIN_ALLOW_THREADS
    r = src ? pinio_load_derived(src->plan, &o, &cp, &diag)
            : pinio_load(a.paths, a.npaths, &o, &cp, &diag);
    Py_END_ALLOW_THREADS
    const char *first = src ? pinio_plan_file_at(src->plan, 0)->path
                            : a.npaths ? a.paths[0] : "";
    if (arena)
        arena->busy = 0;
    if (r == -EBUSY && arena)
        pinio_diag_set(&diag, r,
                       "loading %s%s through a pinio.Arena: tensors (or the open checkpoint) "
                       "of the previous load through this arena are still alive, and this "
                       "load would overwrite their memory: drop every one of them (del, "
                       "close()) first, or load into another arena",
                       first, a.npaths > 1 ? " (and more)" : "");
    if (src)
        source_release(src);
    io_args_free(&a);
    slice_args_free(&sa);
    if (py_stop_raised(&stop)) {
        if (!r)
            pinio_checkpoint_release(cp);
        return NULL;
    }
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
    const unsigned long long ints[3] = {t->nbytes, t->file, t->file_offset};
    return tensor_row(t->name, t->name_len, t->dtype, t->shape, t->rank, ints, 3, NULL);
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
    /* What a split cost: slices, over-read (read, never copied to the device). */
    const pinio_plan_slice_info *si = &r->slices;
    PyObject *sl = Py_BuildValue("{s:n,s:n,s:K,s:K,s:K}", "sliced", (Py_ssize_t)si->sliced,
                                 "strided", (Py_ssize_t)si->strided, "full_bytes",
                                 (unsigned long long)si->full_bytes, "overread_bytes",
                                 (unsigned long long)si->overread_bytes, "hole_bytes",
                                 (unsigned long long)si->hole_bytes);
    if (!d || !paths || !mds || !sha || !sl || PyDict_SetItemString(d, "paths", paths) ||
        PyDict_SetItemString(d, "metadata", mds) || PyDict_SetItemString(d, "sha256", sha) ||
        PyDict_SetItemString(d, "split", sl))
        Py_CLEAR(d);
    Py_XDECREF(sl);
    Py_XDECREF(paths);
    Py_XDECREF(mds);
    Py_XDECREF(sha);
    return d;
}

/* stream_gpu's split=[(pattern, dim or None)] as split rules (None: read
 * whole), into a malloc'd `*out`; `*keep` holds the sequence whose str
 * items the patterns point into. 0, or -1 with an exception set. */
static int split_rules(PyObject *split, pinio_split_rule **out, size_t *n, PyObject **keep)
{
    *out = NULL;
    *n = 0;
    *keep = NULL;
    if (split == Py_None)
        return 0;
    PyObject *fast = PySequence_Fast(split, "split: a sequence of (pattern, dim or None)");
    if (!fast)
        return -1;
    Py_ssize_t k = PySequence_Fast_GET_SIZE(fast);
    pinio_split_rule *r = calloc(k ? (size_t)k : 1, sizeof(*r));
    if (!r) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(fast, i), *pat, *dim;
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2 ||
            !PyUnicode_Check(pat = PyTuple_GET_ITEM(item, 0)) ||
            ((dim = PyTuple_GET_ITEM(item, 1)) != Py_None && !PyLong_Check(dim))) {
            PyErr_Format(PyExc_TypeError, "split rule %zd: not a (str, int or None) pair", i);
            break;
        }
        r[i].pattern = c_str(pat, "split pattern");
        long d = dim == Py_None ? 0 : PyLong_AsLong(dim);
        if (!r[i].pattern || PyErr_Occurred())
            break;
        if (dim != Py_None && (d < -1024 || d > 1024)) {
            PyErr_Format(PyExc_ValueError, "split rule '%s': dim %ld is out of range",
                         r[i].pattern, d);
            break;
        }
        r[i].dim = dim == Py_None ? PINIO_SPLIT_WHOLE : (int)d;
    }
    if (PyErr_Occurred()) {
        free(r);
        Py_DECREF(fast);
        return -1;
    }
    *out = r;
    *n = (size_t)k;
    *keep = fast;
    return 0;
}

/* The GPU sink of `api` for `fn`, which places through the callable
 * `place`; NULL with ValueError. */
static const pinio_sink *gpu_sink_arg(const char *fn, PyObject *place, const char *api)
{
    const pinio_sink *sink = pinio_sink_find(api);
    if (!PyCallable_Check(place) || !sink || (strcmp(api, "cuda") && strcmp(api, "hip"))) {
        PyErr_Format(PyExc_ValueError, "%s: place must be callable, api cuda or hip", fn);
        return NULL;
    }
    return sink;
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
                             (char *)"verify", (char *)"expected_sha256", (char *)"split",
                             (char *)"rank", (char *)"world", (char *)"max_overread",
                             (char *)"exact", NULL};
    PyObject *paths, *place, *filters = Py_None, *expected = Py_None, *split = Py_None;
    const char *api = "cuda", *backend = "auto", *cache = "auto", *direct = "auto";
    int device = 0, verify = 0, exact = 0;
    Py_ssize_t slot_size = 0;
    uint32_t slots = 0, rank = 0, world = 1;
    double max_overread = 0.0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|siOsssnO&pO$OO&O&dp", kwlist, &paths, &place,
                                     &api, &device, &filters, &backend, &cache, &direct,
                                     &slot_size, conv_slots, &slots, &verify, &expected,
                                     &split, conv_rank, &rank, conv_world, &world,
                                     &max_overread, &exact))
        return NULL;
    if (slot_size < 0) {
        PyErr_Format(PyExc_ValueError, "slot_size=%zd is out of range: bytes, 0 for the default",
                     slot_size);
        return NULL;
    }
    const pinio_sink *sink = gpu_sink_arg("stream_gpu", place, api);
    if (!sink)
        return NULL;
    pinio_split_rule *rules;
    size_t nrules;
    PyObject *keep_rules;
    if (split_rules(split, &rules, &nrules, &keep_rules))
        return NULL;
    io_args a;
    if (io_args_parse(&a, paths, filters, expected, backend, cache, direct)) {
        free(rules);
        Py_XDECREF(keep_rules);
        return NULL;
    }
    place_call pc = {.fn = place};
    pinio_stream_opts o;
    pinio_stream_opts_default(&o);
    o.backend = a.backend;
    o.cache = a.cache;
    o.direct = a.direct;
    o.filters = a.filters;
    o.nfilters = a.nfilters;
    o.filters_exact = exact;
    if (slot_size)
        o.slot_size = (size_t)slot_size;
    if (slots)
        o.slots = slots;
    o.verify = verify || a.sha;
    o.expected_sha256 = a.sha;
    o.nexpected = a.nsha;
    o.sha256_fn = sha_from_stream;
    o.sha256_ctx = &pc;
    o.split = rules;
    o.nsplit = nrules;
    o.rank = rank;
    o.world = world;
    o.max_overread = max_overread;
    pinio_gpu_arena *arena = NULL;
    pinio_sink_gpu_cfg cfg = {.device = device, .place = place_with_python, .place_ctx = &pc,
                              .out = &arena};
    pinio_stream_report rep;
    pinio_diag diag;
    int r;
    py_stop stop;
    py_stop_init(&stop);
    o.stop = py_stop_poll;
    o.stop_ctx = &stop;
    Py_BEGIN_ALLOW_THREADS
    r = pinio_stream(a.paths, a.npaths, &o, sink, &cfg, &rep, &diag);
    Py_END_ALLOW_THREADS
    io_args_free(&a);
    free(rules);
    Py_XDECREF(keep_rules);
    PyObject *res = NULL;
    if (py_stop_raised(&stop)) { /* Ctrl-C: the handler's exception, what was placed dropped */
        if (!r)
            pinio_gpu_arena_free(arena);
        Py_XDECREF(pc.type);
        Py_XDECREF(pc.value);
        Py_XDECREF(pc.tb);
    } else if (r && pc.type) { /* the allocator's own exception, as it raised it */
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

/* ------------------------------------------------------------ copy_gpu */

/* copy_gpu's host bytes: per plan tensor, the caller's buffer (buf NULL:
 * none given; a slice packed contiguous, as the sink lands it) and its
 * address for pinio_stream_from_memory(). */
typedef struct host_src {
    const pinio_plan *plan;
    Py_buffer *bufs;
    const void **ptrs;
    size_t n;
} host_src;

/* The caller's buffer of each plan tensor named in `sources`, which must
 * hold exactly its bytes; 0, or -1 with an exception set. */
static int host_src_take(host_src *h, PyObject *sources)
{
    h->bufs = calloc(h->n ? h->n : 1, sizeof(*h->bufs));
    h->ptrs = calloc(h->n ? h->n : 1, sizeof(*h->ptrs));
    if (!h->bufs || !h->ptrs) {
        PyErr_NoMemory();
        return -1;
    }
    for (size_t i = 0; i < h->n; i++) {
        const pinio_plan_tensor *t = pinio_plan_tensor_at(h->plan, i);
        PyObject *key = PyUnicode_DecodeUTF8(t->name, (Py_ssize_t)t->name_len, "strict");
        PyObject *obj = key ? PyDict_GetItemWithError(sources, key) : NULL;
        Py_XDECREF(key);
        if (!obj && PyErr_Occurred())
            return -1;
        if (!obj)
            continue;
        if (PyObject_GetBuffer(obj, &h->bufs[i], PyBUF_SIMPLE))
            return -1;
        if ((uint64_t)h->bufs[i].len != t->nbytes) {
            PyErr_Format(PyExc_ValueError, "copy_gpu: tensor '%s': %zd bytes given, it has %llu",
                         t->name, h->bufs[i].len, (unsigned long long)t->nbytes);
            return -1;
        }
        h->ptrs[i] = h->bufs[i].buf;
    }
    return 0;
}

static void host_src_free(host_src *h)
{
    for (size_t i = 0; h->bufs && i < h->n; i++)
        if (h->bufs[i].buf)
            PyBuffer_Release(&h->bufs[i]);
    free(h->bufs);
    free(h->ptrs);
}

/* copy_gpu(paths, place, sources, api, device, filters, slot_size, slots,
 * split, rank, world, exact) -> report: the tensors of `paths` that `filters`
 * selects (exact: names, no prefix or glob; each rank's slice under
 * `split`), placed on the device by
 * `place` as stream_gpu places them, filled from the host bytes `sources`
 * ({name: buffer} of each tensor, a slice packed contiguous; a selected
 * tensor it lacks is zeros) through the GPU sink, every copy complete when
 * this returns.
 * What a process group's rank does with tensors another rank read: the
 * files' headers are read, their data never. */
static PyObject *py_copy_gpu(PyObject *mod, PyObject *args, PyObject *kw)
{
    (void)mod;
    static char *kwlist[] = {(char *)"paths", (char *)"place", (char *)"sources", (char *)"api",
                             (char *)"device", (char *)"filters", (char *)"slot_size",
                             (char *)"slots", (char *)"split", (char *)"rank", (char *)"world",
                             (char *)"exact", NULL};
    PyObject *paths, *place, *sources, *filters = Py_None, *split = Py_None;
    const char *api = "cuda";
    int device = 0, exact = 0;
    Py_ssize_t slot_size = 0;
    uint32_t nslots = 0, rank = 0, world = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO!|siOnO&$OO&O&p", kwlist, &paths, &place,
                                     &PyDict_Type, &sources, &api, &device, &filters, &slot_size,
                                     conv_slots, &nslots, &split, conv_rank, &rank,
                                     conv_world, &world, &exact))
        return NULL;
    const pinio_sink *sink = gpu_sink_arg("copy_gpu", place, api);
    if (!sink)
        return NULL;
    if (!slot_size)
        slot_size = 8 << 20;
    if (!nslots)
        nslots = 4;
    if (slot_size < (64 << 10) || slot_size > (1 << 30) || (slot_size & (slot_size - 1)) ||
        nslots < 2 || nslots > 1024) {
        PyErr_Format(PyExc_ValueError, "copy_gpu: %u slots of %zd bytes (2 to 1024 slots, a "
                     "power of two from 64 KiB to 1 GiB)", nslots, slot_size);
        return NULL;
    }
    pinio_split_rule *rules;
    size_t nrules;
    PyObject *keep_rules;
    if (split_rules(split, &rules, &nrules, &keep_rules))
        return NULL;
    io_args a; /* the paths and the selection, as load and stream_gpu take them */
    if (io_args_parse(&a, paths, filters, Py_None, "auto", "auto", "auto")) {
        free(rules);
        Py_XDECREF(keep_rules);
        return NULL;
    }
    pinio_plan_opts po;
    pinio_plan_opts_default(&po);
    po.filters = a.filters;
    po.nfilters = a.nfilters;
    po.filters_exact = exact;
    po.cache = PINIO_CACHE_HOT; /* never executed: no residency to measure */
    po.segment = (uint64_t)slot_size;
    po.split = rules;
    po.nsplit = nrules;
    po.rank = rank;
    po.world = world;
    py_stop stop;
    py_stop_init(&stop);
    po.stop = py_stop_poll;
    po.stop_ctx = &stop;
    pinio_plan *plan = NULL;
    pinio_diag diag;
    int r;
    Py_BEGIN_ALLOW_THREADS
    r = pinio_plan_create(&plan, a.paths, a.npaths, &po, &diag);
    Py_END_ALLOW_THREADS
    io_args_free(&a);
    free(rules);
    Py_XDECREF(keep_rules);
    if (py_stop_raised(&stop)) {
        if (!r)
            pinio_plan_free(plan);
        return NULL;
    }
    if (r)
        return raise_pinio(r, &diag, "copy to the GPU: the plan failed");
    pinio_plan_info pi;
    pinio_plan_get_info(plan, &pi);
    host_src h = {.plan = plan, .n = pi.tensors};
    PyObject *res = NULL;
    if (host_src_take(&h, sources) == 0) {
        place_call pc = {.fn = place};
        pinio_gpu_arena *arena = NULL;
        pinio_sink_gpu_cfg cfg = {.device = device, .place = place_with_python, .place_ctx = &pc,
                                  .out = &arena};
        Py_BEGIN_ALLOW_THREADS
        r = pinio_stream_from_memory(plan, h.ptrs, h.n, (size_t)slot_size, nslots, sink, &cfg,
                                     &diag);
        Py_END_ALLOW_THREADS
        if (r && pc.type) {
            PyErr_Restore(pc.type, pc.value, pc.tb);
        } else if (r) {
            raise_pinio(r, &diag, "copy to the GPU failed");
        } else {
            pinio_gpu_info gi;
            pinio_gpu_arena_get_info(arena, &gi);
            pinio_gpu_arena_free(arena); /* the memory is place's; the arena held the context */
            res = Py_BuildValue("{s:n,s:K,s:K,s:d,s:i,s:s,s:i,s:I,s:I,s:n}", "tensors",
                                (Py_ssize_t)gi.tensors, "bytes", (unsigned long long)gi.bytes,
                                "copies", (unsigned long long)gi.copies, "h2d_seconds",
                                gi.h2d_seconds, "device", gi.device, "pci_bus_id", gi.pci_bus_id,
                                "driver_version", gi.driver_version, "slots_registered",
                                gi.slots_registered, "slots_preregistered",
                                gi.slots_preregistered, "reads", (Py_ssize_t)pi.reads);
        }
        Py_XDECREF(pc.files);
        free(pc.sha);
    }
    host_src_free(&h);
    pinio_plan_free(plan);
    return res;
}

/* ------------------------------------------------------ header, read */

/* header_rows(st); frees `st`. */
static PyObject *header_tuple(pinio_st *st)
{
    PyObject *res = header_rows(st);
    pinio_st_free(st);
    return res;
}

/* header(path) or header(fd, name): the file's header, read and validated
 * (GIL released); with a descriptor, through it (the file the caller
 * opened, whatever the path names now), `name` naming it in errors. */
static PyObject *py_header(PyObject *mod, PyObject *args)
{
    (void)mod;
    PyObject *arg, *name = Py_None;
    if (!PyArg_ParseTuple(args, "O|O", &arg, &name))
        return NULL;
    int fd = -1;
    if (PyLong_Check(arg)) {
        long v = PyLong_AsLong(arg);
        if (v == -1 && PyErr_Occurred())
            return NULL;
        if (v < 0 || v > INT_MAX) {
            PyErr_SetString(PyExc_ValueError, "header: not a descriptor");
            return NULL;
        }
        fd = (int)v;
    }
    PyObject *enc;
    if (!PyUnicode_FSConverter(fd >= 0 ? (name == Py_None ? arg : name) : arg, &enc))
        return NULL;
    pinio_st *st = NULL;
    pinio_diag diag;
    int r;
    Py_BEGIN_ALLOW_THREADS
    if (fd >= 0)
        r = pinio_st_read_fd(&st, fd, PyBytes_AS_STRING(enc), 0, &diag);
    else
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
    uint64_t off, len;
    if (!PyArg_ParseTuple(args, "iO&O&", &fd, conv_offset, &off, conv_length, &len))
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

/* ------------------------------------------------------------- module */

static PyMethodDef methods[] = {
    {"check_io", (PyCFunction)(void (*)(void))py_check_io, METH_VARARGS | METH_KEYWORDS,
     "check_io(*, backend='auto', cache='auto', direct='auto', memory='auto', fill='auto', "
     "consumer='host') -> None; ValueError naming the first string a load would refuse"},
    {"load", (PyCFunction)(void (*)(void))py_load, METH_VARARGS | METH_KEYWORDS,
     "load(paths, filters=None, backend='auto', cache='auto', direct='auto', verify=False, *, "
     "memory='auto', map_private=True, arena=None, expected_sha256=None, fill='auto', "
     "split=None, rank=0, world=1, slices=None, max_overread=0.0, consumer='host', "
     "source=None, exact=False) -> Checkpoint (GIL released during the load); split: "
     "[(pattern, dim or None)], slices: [(name, starts, stops)]; source: a Source (paths "
     "None), whose file is loaded without reading its header again; exact: the filters are "
     "tensor names (no dotted prefix, no glob)"},
    {"plan", (PyCFunction)(void (*)(void))py_plan, METH_VARARGS | METH_KEYWORDS,
     "plan(paths, filters=None, split=None, rank=0, world=1, slices=None, max_overread=0.0)"
     " -> ([(path, size, metadata|None)], [(name, dtype, shape, nbytes, file, file_offset, full_shape, "
     "full_offset, full_nbytes, start|None, runs)], {bytes, read_bytes, reads, skipped}): "
     "what a load would read, no tensor data read"},
    {"idents", py_idents, METH_O,
     "idents(paths) -> [(path, size, header bytes, 16 sampled data blocks)] per file: what "
     "a process group's ranks compare before any tensor byte moves"},
    {"stream_gpu", (PyCFunction)(void (*)(void))py_stream_gpu, METH_VARARGS | METH_KEYWORDS,
     "stream_gpu(paths, place, api='cuda', device=0, filters=None, backend='auto', "
     "cache='auto', direct='auto', slot_size=0, slots=0, verify=False, expected_sha256=None, "
     "*, split=None, rank=0, world=1, max_overread=0.0, exact=False)"
     " -> report: place([(name, dtype, shape, nbytes, file, file_offset)]) returns each "
     "tensor's device address (a slice's shape and bytes under split=[(pattern, dim or "
     "None)]); synchronised on return"},
    {"copy_gpu", (PyCFunction)(void (*)(void))py_copy_gpu, METH_VARARGS | METH_KEYWORDS,
     "copy_gpu(paths, place, sources, api='cuda', device=0, filters=None, slot_size=0, "
     "slots=0, *, split=None, rank=0, world=1, exact=False) -> report: the selected tensors "
     "(slices under split) placed as stream_gpu places them and filled from sources ({name: buffer of the "
     "tensor, a slice packed}; zeros where it has none) through the GPU sink, nothing read "
     "but the headers; synchronised on return"},
    {"header", py_header, METH_VARARGS,
     "header(path) or header(fd, name) -> ([(name, dtype, shape, begin, end)] in file order, "
     "metadata|None, data_offset, file_size)"},
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
        PyType_Ready(&ArenaType) < 0 || PyType_Ready(&ObjectFileType) < 0 ||
        PyType_Ready(&SourceType) < 0)
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
        PyModule_AddObjectRef(m, "Source", (PyObject *)&SourceType) ||
        PyModule_AddObjectRef(m, "ObjectFile", (PyObject *)&ObjectFileType) ||
        PyModule_AddStringConstant(m, "version", pinio_version())) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
