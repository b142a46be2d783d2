/* What the files of pinio._pinio share: the exporter, checkpoint and arena
 * types (_pinio_objects.c), the error they raise, and the helpers the module's
 * functions (_pinio.c) and the writer's (_pinio_save.c) build results with.
 * Private to the extension; it uses the library's public headers only. */
#ifndef PINIO_PY_PINIO_H
#define PINIO_PY_PINIO_H

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

typedef struct {
    PyObject_HEAD
    pinio_bytes *bytes; /* a reference on a checkpoint's arena, or NULL */
    void *heap;         /* or memory of our own (range reads), freed with us */
    uint8_t *ptr;
    Py_ssize_t len;
    int readonly;       /* a shared read-only mapping of the file (map_private off) */
} BufferObject;

typedef struct {
    PyObject_HEAD
    pinio_checkpoint *cp;
    int maps_writable;  /* loaded with map_private: mapped bytes are writable too */
} CheckpointObject;

typedef struct {
    PyObject_HEAD
    pinio_arena *a;
    int busy;
} ArenaObject;

/* A file opened and validated once, loaded in parts (_pinio_source.c). */
typedef struct {
    PyObject_HEAD
    pinio_plan *plan;   /* every tensor selected; NULL once closed and idle */
    int busy;           /* loads through it running without the GIL */
    int closed;         /* close() was called: freed when the last load ends */
    pinio_view map;     /* the whole file mapped private, once view() asked (else empty) */
    int64_t mtime_s;    /* the file's modification time when the header was validated */
    long mtime_ns;
    unsigned char *chunks; /* per SOURCE_CHUNK of the mapping: SOURCE_HOT, SOURCE_MIXED or 0 */
    /* view()'s work, for stats(): views made, mincore and fstat calls */
    unsigned long long nviews, nmincore, nfstat;
} SourceObject;

extern PyObject *Error; /* pinio._pinio.Error, an OSError */
/* A Buffer over bytes `b` (consumed, on failure too); `maps_writable`: the
 * bytes of a private mapping, exported writable (_pinio_objects.c). */
PyObject *buffer_from_bytes(pinio_bytes *b, int maps_writable);
extern PyTypeObject BufferType, CheckpointType, ArenaType, SourceType;

/* A Ctrl-C while a call runs with the GIL released: the call's stop request
 * (pinio_stop_fn) runs Python's signal handlers (PyErr_CheckSignals), from
 * the calling thread only and at most every 50 ms; once a handler raised
 * (KeyboardInterrupt), every poll says stop. py_stop_init with the GIL, the
 * options' stop = py_stop_poll and stop_ctx = the py_stop, then, the GIL
 * taken again, py_stop_raised: 1 with the handler's exception set (the
 * caller drops what the call made and returns NULL), else 0. */
typedef struct py_stop {
    unsigned long thread;          /* the caller's */
    double next;                   /* monotonic seconds of the next look */
    PyObject *type, *value, *tb;   /* what a handler raised */
    int hit;                       /* read by any thread: atomic */
} py_stop;
void py_stop_init(py_stop *s);
int py_stop_poll(void *ctx);
int py_stop_raised(py_stop *s);

/* Raises pinio._pinio.Error for a library failure `code` (the diagnostic's
 * message, else `fallback`); returns NULL. */
PyObject *raise_pinio(int code, const pinio_diag *d, const char *fallback);
/* A tuple of `rank` ints. */
PyObject *shape_tuple(const uint64_t *shape, unsigned rank);
/* The shape tuples of the last few rows of a list, for the next rows of
 * the same shapes; zero it first, clear it (shape_cache_clear) after. */
#define SHAPE_CACHE 8
#define SHAPE_CACHE_RANK 8
typedef struct shape_cache {
    struct shape_entry {
        PyObject *tuple;
        unsigned rank;
        uint64_t dims[SHAPE_CACHE_RANK];
    } e[SHAPE_CACHE];
    unsigned next;
} shape_cache;
void shape_cache_clear(shape_cache *sc);
/* (name, dtype, shape, ints[0], ..., ints[n - 1]): a tensor's row, as
 * header(), Checkpoint.info() and the GPU placement list give it; `sc`
 * (optional) reuses the shape tuples of the rows before it. */
PyObject *tensor_row(const char *name, size_t name_len, pinio_dtype dt, const uint64_t *shape,
                     unsigned rank, const unsigned long long *ints, size_t n, shape_cache *sc);
/* An int argument that crosses into C as `bits` (32 or 64) unsigned bits:
 * 0 into `*out`, or -1 with TypeError (not an int: bool, float, str) or
 * ValueError naming `what` (negative, or past the type: PyArg's "I" and "K"
 * would wrap it silently, a world of 2**32 + 1 becoming 1). */
int uint_arg(PyObject *o, const char *what, unsigned bits, uint64_t *out);
/* A PyArg "O&" converter of the same for an argument named NAME, into a
 * TYPE of BITS bits: conv_NAME. */
#define CONV_UINT(name, bits, type)                                       \
    static int conv_##name(PyObject *o, void *out)                       \
    {                                                                     \
        uint64_t v;                                                       \
        if (uint_arg(o, #name, bits, &v))                                 \
            return 0;                                                     \
        *(type *)out = (type)v;                                           \
        return 1;                                                         \
    }
/* The __metadata__ of a header as a dict (None when it has none). */
PyObject *metadata_dict(const pinio_st *st);
/* The arena argument of a load: NULL for None; -1 with an exception. */
int arena_arg(PyObject *o, ArenaObject **out);
/* The source argument of a load: NULL for None; -1 with an exception (not
 * a Source, or closed). A load holds it (hold) while the GIL is released,
 * then lets it go (release, with the GIL). */
int source_arg(PyObject *o, SourceObject **out);
void source_hold(SourceObject *s);
void source_release(SourceObject *s);
/* A list of str/PathLike -> NULL-terminated array of encoded C strings;
 * `*keep` holds the bytes objects they point into (fs: file names; else
 * filters, and a str holding a NUL is refused as c_str refuses it). */
const char **str_array(PyObject *seq, size_t *n, PyObject **keep, int fs);
/* The UTF-8 of the str `o` (valid while `o` lives) for the library, which
 * reads a pattern or name up to its first NUL: NULL with ValueError naming
 * `what` and `o` when it holds one (never cut there), or with the
 * encoding's error. */
const char *c_str(PyObject *o, const char *what);
/* load()'s and plan()'s split= and slices= (_pinio_split.c): the plan's split
 * rules and box slices; `keep` holds what their strings point into. */
typedef struct slice_args {
    pinio_split_rule *split;
    size_t nsplit;
    pinio_slice *slices;
    size_t nslices;
    uint64_t *bounds;
    PyObject *keep;
} slice_args;
/* 0, or -1 with an exception set and nothing held. None: none. */
int slice_args_parse(slice_args *a, PyObject *split, PyObject *slices);
void slice_args_free(slice_args *a);
PyObject *py_plan(PyObject *mod, PyObject *args, PyObject *kw);
PyObject *py_idents(PyObject *mod, PyObject *arg);
/* header()'s tuple of a parsed header, which stays the caller's (_pinio_objects.c). */
PyObject *header_rows(const pinio_st *st);
/* One s3:// object held open by safe_open (_pinio_object.c). */
extern PyTypeObject ObjectFileType;
/* The writer's module functions (_pinio_save.c). */
PyObject *py_save(PyObject *mod, PyObject *args, PyObject *kw);
PyObject *py_serialize(PyObject *mod, PyObject *args);

#endif
