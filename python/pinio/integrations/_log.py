"""The one line each engine plugin logs at the end of a load, through the
`logging` module, logger "pinio.<engine>" (pinio.vllm, pinio.sglang,
pinio.transformers, pinio.diffusers), level INFO:

    pinio: 2 files: 1234567 bytes ready in 0.512 s (2.41 GB/s), read

Time to ready as every pinio report counts it (doc/json/SCHEMA.md): from
the plugin's call until every tensor is usable by the engine (vLLM: its
model's load_weights returned; SGLang: the iterator handed over its last
tensor; transformers: the safe_open handle closed, its slices made;
diffusers: the state dict returned). How the bytes came: "read" (this
process read them from storage), "shared" (another process's read or a
process group's exchange), "mapped" (the page cache mapped in place),
joined by "+". The record also carries them as attributes for a handler:
pinio_bytes, pinio_ready_s, pinio_io_s, pinio_gb_per_s, pinio_how."""
import logging
import time


def ready(engine, what, nbytes, t_call, how, io_s=0.0):
    """Logs the line for `nbytes` handed to `engine` since `t_call`
    (time.perf_counter() at the plugin's call)."""
    log = logging.getLogger("pinio." + engine)
    if not log.isEnabledFor(logging.INFO):
        return
    s = time.perf_counter() - t_call
    gbs = nbytes / s / 1e9 if s > 0 else 0.0
    log.info("pinio: %s: %d bytes ready in %.3f s (%.2f GB/s), %s", what, nbytes, s, gbs,
             how or "nothing read", extra={"pinio_bytes": nbytes, "pinio_ready_s": s,
                                           "pinio_io_s": io_s, "pinio_gb_per_s": gbs,
                                           "pinio_how": how})


def nbytes(t):
    """A torch tensor's (or numpy array's) bytes; torch before 2.1 has no
    Tensor.nbytes."""
    numel = getattr(t, "numel", None)
    return numel() * t.element_size() if callable(numel) else t.nbytes


def files(n):
    return f"{n} file{'' if n == 1 else 's'}"
