"""The `venv` fixture of the engine tests: pinio installed as a user installs
it, `pip install --no-build-isolation .` of a copy of these sources into a
venv of Debian's python (with its site packages: numpy, torch), once per
pytest session, so that an engine's stand-in finds pinio's entry points
in the installed distribution's metadata, as the engine would."""
import json
import os
import shutil
import subprocess
import tempfile

import pytest

from conftest import ROOT, run_tag

PY = "/usr/bin/python3"


@pytest.fixture(scope="session")
def venv():
    """The python of a venv with pinio pip-installed from these sources."""
    for mod, pkg in (("venv", "python3-venv"), ("ensurepip", "python3-venv"),
                     ("mesonpy", "python3-mesonpy"), ("pip", "python3-pip")):
        if subprocess.run([PY, "-c", f"import {mod}"], capture_output=True).returncode:
            pytest.skip(f"{PY} has no {mod} (Debian: {pkg}; scripts/bootstrap installs it)")
    d = tempfile.mkdtemp(prefix="pinio-%s-py-venv-" % run_tag(), dir="/var/tmp")
    try:
        src = os.path.join(d, "src")
        # a copy: meson-python writes beside pyproject.toml, and a test must
        # not write into the source tree
        shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
            "build*", ".git", ".mesonpy*", "__pycache__"))
        subprocess.run([PY, "-m", "venv", "--system-site-packages", os.path.join(d, "venv")],
                       check=True)
        env = {"PATH": f"{d}/venv/bin:/usr/bin:/bin", "HOME": d}
        cache = subprocess.run(["ccache", "-k", "cache_dir"], capture_output=True, text=True)
        if cache.returncode == 0 and cache.stdout.strip():
            env["CCACHE_DIR"] = cache.stdout.strip()
        r = subprocess.run(["pip", "install", "--no-build-isolation", "--no-index",
                            "--no-cache-dir", "."], cwd=src, env=env, capture_output=True,
                           text=True, timeout=1200)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        yield os.path.join(d, "venv", "bin", "python")
    finally:
        shutil.rmtree(d, ignore_errors=True)


STANDINS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "standins")


def run_driver(venv, driver, spec, ref, env=None):
    """The json line `driver` (in engines/) prints, run with the venv's
    python, the stand-ins on PYTHONPATH and nothing of the build tree;
    AWS_* passed on (the s3 fixture's server)."""
    e = {"PATH": "/usr/bin:/bin", "HOME": os.path.dirname(ref), "PYTHONPATH": STANDINS,
         "PYTHONDONTWRITEBYTECODE": "1"}
    e.update({k: v for k, v in os.environ.items() if k.startswith("AWS_")})
    e.update(env or {})
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), driver)
    r = subprocess.run([venv, path, json.dumps(spec), ref], env=e, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    # found through the installed distribution, not a build tree or the sources
    assert out["pinio_file"].startswith(os.path.dirname(os.path.dirname(venv))), out
    return out


def run_group(venv, driver, world, tmp, spec, ref):
    """Each rank's json line of `driver` (in engines/) run as `world`
    processes of a gloo job (spec's group: {rank, world, init}), with the
    venv's python and the stand-ins on PYTHONPATH."""
    init = os.path.join(tmp, "tp.init")
    if os.path.exists(init):
        os.unlink(init)
    env = {"PATH": "/usr/bin:/bin", "HOME": tmp, "PYTHONPATH": STANDINS,
           "PYTHONDONTWRITEBYTECODE": "1", "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"}
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), driver)
    procs = [subprocess.Popen(
        [venv, path, json.dumps(dict(spec, group={"rank": r, "world": world, "init": init})),
         ref], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for r in range(world)]
    try:
        logs = [p.communicate(timeout=240) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
    assert all(p.returncode == 0 for p in procs), [e[-3000:] for _, e in logs]
    outs = [json.loads(o.strip().splitlines()[-1]) for o, _ in logs]
    for out in outs:
        assert out["pinio_file"].startswith(os.path.dirname(os.path.dirname(venv))), out
    return outs
