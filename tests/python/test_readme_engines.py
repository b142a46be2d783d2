"""README.md's engine sections run as printed (issue 39): every ```python
stand-in block of "Use pinio with vLLM / SGLang / transformers and
diffusers" (each section must have its own) runs with the python of a venv
where pinio is pip-installed (engines/pipvenv.py: the engines find the
plugins in the installed distribution's entry points), the stand-ins of
the engines on PYTHONPATH (engines/standins), in a folder holding model/,
a toy checkpoint of two shards. Each block prints "N tensors"; N must be
the toy's count, which a load that did not go through pinio cannot print
(the stand-ins' own loaders refuse or answer a marker), so the README
cannot drift from the plugins. The blocks of the real engines (```sh,
```py) are shown, not run."""
import os
import re
import subprocess

import numpy as np
import pytest

from conftest import ROOT
from engines.pipvenv import STANDINS, venv  # noqa: F401 (venv: a fixture)
from pinio.safetensors.numpy import save_file

# the sections and how many stand-in blocks each must have
SECTIONS = {"vLLM": 1, "SGLang": 1, "transformers and diffusers": 2}


def blocks():
    """{section title: [code of each ```python stand-in block]}."""
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    out = {}
    for part in text.split("\n### Use pinio with ")[1:]:
        title, body = part.split("\n", 1)
        body = re.split(r"^#{1,3} ", body, flags=re.M)[0]
        out[title.strip()] = re.findall(r"^```python stand-in\n(.*?)^```", body, re.M | re.S)
    return out


def test_each_engine_section_has_its_stand_in_snippets():
    got = blocks()
    assert {k: len(v) for k, v in got.items()} == SECTIONS, got


@pytest.fixture
def folder(tmp):
    rng = np.random.default_rng(3)
    t = {f"model.layers.{i}.mlp.down_proj.weight": rng.standard_normal((16, 24))
         .astype(np.float32) for i in range(5)}
    t["model.norm.weight"] = np.ones(16, dtype=np.float16)
    names = sorted(t)
    os.mkdir(os.path.join(tmp, "model"))
    for s, part in enumerate((names[:3], names[3:])):
        save_file({k: t[k] for k in part},
                  os.path.join(tmp, "model", f"model-{s + 1:05d}-of-00002.safetensors"))
    return tmp, len(t)


@pytest.mark.parametrize("where", [(title, i) for title, n in SECTIONS.items()
                                   for i in range(n)], ids=lambda w: f"{w[0]}-{w[1]}")
def test_the_snippet_runs_as_printed(venv, folder, where):
    here, n = folder
    code = blocks()[where[0]][where[1]]
    env = {"PATH": "/usr/bin:/bin", "HOME": here, "PYTHONPATH": STANDINS,
           "PYTHONDONTWRITEBYTECODE": "1"}
    r = subprocess.run([venv, "-c", code], cwd=here, env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip().splitlines()[-1] == f"{n} tensors", r.stdout + r.stderr
