/* pinio._pinio: a Python caller's Ctrl-C as the library's stop request
 * (py_stop, _pinio.h), in a file of its own: every call of the binding
 * that may wait on a store uses it, and it uses nothing of theirs. */
#include <time.h>

#include "_pinio.h"

/* Why a stop request and not only the signal: the call runs without the
 * GIL, so Python's handler runs only when it returns, and an s3:// load
 * that is retrying a 503 returns after its retry budget (minutes). Polled
 * by the library, the handler runs within 50 ms; only the thread that
 * released the GIL asks (Python runs handlers on the main thread alone, so
 * other threads would only take the GIL for nothing). */
void py_stop_init(py_stop *s)
{
    memset(s, 0, sizeof(*s));
    s->thread = PyThread_get_thread_ident();
}

int py_stop_poll(void *ctx)
{
    py_stop *s = ctx;
    if (__atomic_load_n(&s->hit, __ATOMIC_ACQUIRE))
        return 1;
    if (PyThread_get_thread_ident() != s->thread)
        return 0;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    double now = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
    if (now < s->next)
        return 0;
    s->next = now + 0.05;
    PyGILState_STATE g = PyGILState_Ensure();
    if (PyErr_CheckSignals() < 0) {
        PyErr_Fetch(&s->type, &s->value, &s->tb);
        __atomic_store_n(&s->hit, 1, __ATOMIC_RELEASE);
    }
    PyGILState_Release(g);
    return __atomic_load_n(&s->hit, __ATOMIC_ACQUIRE);
}

int py_stop_raised(py_stop *s)
{
    if (!s->hit)
        return 0;
    /* The handler's exception, not the library's -ECANCELED: what Ctrl-C
     * raises anywhere else in Python. */
    PyErr_Restore(s->type, s->value, s->tb);
    s->type = s->value = s->tb = NULL;
    return 1;
}
