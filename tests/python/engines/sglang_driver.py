"""SGLang-style loads through the stand-in (not a test itself; run by
test_engine_sglang.py with an installed pinio's python, PYTHONPATH=standins).

usage: sglang_driver.py SPEC_JSON REFERENCE_NPZ
SPEC: {files, plugin_loads, break_registry}

Imports the loader first (its `from weight_utils import ...` bindings are
then stale unless the hook registry rewrites them), loads the plugins as
SGLang does (sglang.srt.plugins.load_plugins, from the installed
distributions' entry points; plugin_loads times, as in several
processes), then takes the weights through the loader's bound iterators
(buffered by default, safetensors_weights_iterator with prefetch, and with
a decryption key) and compares them byte for byte with the numpy
reference. Prints one json line: {pinio_file, records, runs, original_calls}."""
import json
import logging
import sys

import numpy as np


def main():
    spec = json.loads(sys.argv[1])
    ref = dict(np.load(sys.argv[2]))
    records = []

    class Catch(logging.Handler):
        def emit(self, record):
            records.append([record.name, record.levelname, record.getMessage()])

    logging.getLogger().addHandler(Catch())
    logging.getLogger().setLevel(logging.INFO)
    import pinio
    import sglang.srt.model_loader.loader as loader
    import sglang.srt.model_loader.weight_utils as wu
    import sglang.srt.plugins as plugins
    from sglang.srt.plugins.hook_registry import HookRegistry

    if spec.get("break_registry"):
        def broken(*a, **kw):
            raise RuntimeError("registry gone")
        HookRegistry.register = broken
    for _ in range(spec.get("plugin_loads", 1)):
        plugins._plugins_loaded = False  # as a new process would start
        plugins.load_plugins()
    out = {"pinio_file": pinio.__file__, "records": records, "runs": {}}
    for mode, kw in (("buffered", {}), ("prefetch", {"prefetch": True}),
                     ("decryption_key", {"decryption_key": "k"})):
        try:
            got = dict(loader.get_weights_iterator(spec["files"], **kw))
            bad = sorted(k for k in ref if k not in got or got[k].numpy().tobytes()
                         != ref[k].tobytes())
            out["runs"][mode] = {"names": sorted(got), "mismatches": bad}
        except Exception as e:
            out["runs"][mode] = {"error": f"{type(e).__name__}: {e}"}
    out["original_calls"] = [c[0] for c in wu.CALLS]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
