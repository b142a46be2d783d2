"""SGLang-style loads through the stand-in (not a test itself; run by
test_engine_sglang.py with an installed pinio's python, PYTHONPATH=standins).

usage: sglang_driver.py SPEC_JSON REFERENCE_NPZ
SPEC: {files, plugin_loads, break_registry, cache, group, stagger, env}

Imports the loader first (its `from weight_utils import ...` bindings are
then stale unless the hook registry rewrites them), loads the plugins as
SGLang does (sglang.srt.plugins.load_plugins, from the installed
distributions' entry points; plugin_loads times, as in several
processes), then takes the weights through the loader's bound iterators
(buffered by default, safetensors_weights_iterator with prefetch, and with
a decryption key) and compares them byte for byte with the numpy
reference. group: {rank, world, init}: this process is that rank of a gloo
job of `world` processes set up as SGLang's workers set it up (the
stand-in's sglang.srt.distributed init_distributed_environment,
initialize_model_parallel(world)), and takes the buffered and prefetch
iterators only; stagger: rank r names the files rotated by r (SGLang's
per-rank file order, sglang #26937). env: set in this process first. cache: passed to every pinio.weights_iterator ("cold": a
file just written is in the page cache, where pinio would map it and
count nothing read). Each run's read_bytes and yielded_bytes: what the
pinio.weights_iterators it made read and handed out (their report()).
Prints one json line: {pinio_file, records, runs, original_calls,
group_ranks}; records: [logger, level, message, {pinio_* attributes}]."""
import json
import logging
import os
import sys

import numpy as np


def ref_dtype(a):
    """The torch dtype a whole tensor of numpy array `a` has."""
    import torch

    return torch.from_numpy(a[:0]).dtype


def main():
    spec = json.loads(sys.argv[1])
    os.environ.update(spec.get("env", {}))
    ref = dict(np.load(sys.argv[2]))
    records = []

    class Catch(logging.Handler):
        def emit(self, record):
            records.append([record.name, record.levelname, record.getMessage(),
                            {k: v for k, v in vars(record).items() if k.startswith("pinio_")}])

    logging.getLogger().addHandler(Catch())
    logging.getLogger().setLevel(logging.INFO)
    import pinio
    import sglang.srt.model_loader.loader as loader
    import sglang.srt.model_loader.weight_utils as wu
    import sglang.srt.plugins as plugins
    from sglang.srt.plugins.hook_registry import HookRegistry

    iterators, plain = [], pinio.weights_iterator

    def counted(*a, **kw):
        if spec.get("cache"):
            kw["cache"] = spec["cache"]
        it = plain(*a, **kw)
        iterators.append(it)
        return it

    pinio.weights_iterator = counted
    g = spec.get("group")
    files = spec["files"]
    if g and spec.get("stagger"):
        files = files[g["rank"] % len(files):] + files[:g["rank"] % len(files)]
    if g:
        from sglang.srt.distributed import parallel_state as ps

        ps.init_distributed_environment(g["world"], g["rank"], "file://" + g["init"],
                                        backend="gloo", timeout=90)
        ps.initialize_model_parallel(g["world"])
    if spec.get("break_registry"):
        def broken(*a, **kw):
            raise RuntimeError("registry gone")
        HookRegistry.register = broken
    for _ in range(spec.get("plugin_loads", 1)):
        plugins._plugins_loaded = False  # as a new process would start
        plugins.load_plugins()
    out = {"pinio_file": pinio.__file__, "records": records, "runs": {}}
    modes = (("buffered", {}), ("prefetch", {"prefetch": True}),
             ("decryption_key", {"decryption_key": "k"}))
    for mode, kw in modes[:2] if g else modes:
        del iterators[:]
        try:
            got = dict(loader.get_weights_iterator(files, **kw))
            bad = sorted(k for k in ref if k not in got or got[k].dtype != ref_dtype(ref[k])
                         or tuple(got[k].shape) != ref[k].shape
                         or got[k].numpy().tobytes() != ref[k].tobytes())
            out["runs"][mode] = {"names": sorted(got), "mismatches": bad}
        except Exception as e:
            out["runs"][mode] = {"error": f"{type(e).__name__}: {e}"}
        out["runs"][mode].update(
            read_bytes=sum(it.report()["read_bytes"] for it in iterators),
            yielded_bytes=sum(it.report()["yielded_bytes"] for it in iterators))
    out["original_calls"] = [c[0] for c in wu.CALLS]
    if g:
        out["group_ranks"] = ps.get_tp_group().ranks
        ps.destroy_model_parallel()
        ps.destroy_distributed_environment()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
