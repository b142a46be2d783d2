"""pinio as an SGLang plugin (issue 39), against a contract stand-in of
SGLang (engines/standins/sglang: the plugin loader, the hook registry, both
safetensors iterators and a loader that bound them by `from ... import`,
recorded from sgl-project/sglang's files, file@commit in each module), not
against SGLang itself, which is not installable here.

Found the way SGLang finds it: the stand-in's load_plugins reads the
sglang.srt.plugins entry points of pinio installed with pip into a venv
(engines/pipvenv.py); the driver (engines/sglang_driver.py) runs there.
Both iterators, reached through the loader's stale bindings, are pinio's
and give every tensor byte for byte; a decryption key goes to SGLang's own
iterator; loading the plugins again registers nothing twice;
SGLANG_PLUGINS naming another plugin leaves SGLang's iterators; a registry
that refuses the hooks gets pinio's own ERROR line."""
import os

import numpy as np
import pytest

from engines.pipvenv import run_driver, venv  # noqa: F401 (venv: a fixture)
from pinio.safetensors.numpy import save_file



@pytest.fixture
def model(tmp):
    rng = np.random.default_rng(9)
    t = {f"model.layers.{i}.mlp.down_proj.weight": rng.standard_normal((48, 40 + i))
         .astype(np.float32) for i in range(4)}
    t["model.norm.weight"] = np.arange(40, dtype=np.float16)
    files = []
    for s, names in enumerate((sorted(t)[:2], sorted(t)[2:])):
        f = os.path.join(tmp, f"model-{s + 1:05d}-of-00002.safetensors")
        save_file({k: t[k] for k in names}, f)
        files.append(f)
    ref = os.path.join(tmp, "ref.npz")
    np.savez(ref, **t)
    return files, ref, sorted(t)


def drive(venv, ref, env=None, **spec):
    return run_driver(venv, "sglang_driver.py", spec, ref, env)


def test_both_iterators_are_pinio_s_through_stale_bindings(venv, model):
    files, ref, names = model
    out = drive(venv, ref, files=files, plugin_loads=2, env={"SGLANG_PLUGINS": "pinio"})
    for mode in ("buffered", "prefetch"):
        assert out["runs"][mode] == {"names": names, "mismatches": []}, out["runs"][mode]
    # encrypted checkpoints: SGLang's own iterator, the only call it got
    assert out["runs"]["decryption_key"]["names"] == ["__sglang_original__"]
    assert out["original_calls"] == ["safetensors_weights_iterator"]
    warned = [r for r in out["records"] if r[1] in ("WARNING", "ERROR")]
    assert warned == [], warned  # the second load registered nothing twice


def test_another_plugin_named_leaves_sglang_s_iterators(venv, model):
    files, ref, _ = model
    out = drive(venv, ref, files=files, env={"SGLANG_PLUGINS": "someone_else"})
    assert out["runs"]["buffered"]["names"] == ["__sglang_original__"]
    assert out["original_calls"][:2] == ["buffered_multi_thread_safetensors_weights_iterator",
                                         "safetensors_weights_iterator"]


def test_a_failed_registration_is_loud_in_pinio_s_own_line(venv, model):
    files, ref, _ = model
    out = drive(venv, ref, files=files, break_registry=True)
    mine = [r for r in out["records"] if r[0] == "pinio.integrations.sglang"]
    assert len(mine) == 1 and mine[0][1] == "ERROR", out["records"]
    assert "could not replace SGLang's safetensors iterators" in mine[0][2]
    assert "registry gone" in mine[0][2]
    assert out["runs"]["buffered"]["names"] == ["__sglang_original__"]


def test_a_missing_shard_is_named(venv, model):
    files, ref, _ = model
    gone = files[1] + ".gone"
    out = drive(venv, ref, files=[files[0], gone])
    assert "error" in out["runs"]["buffered"] and ".gone" in out["runs"]["buffered"]["error"]
