#!/bin/sh
# Both install routes as a newcomer takes them, offline, into a temporary
# folder, then used with no environment but PATH (no PYTHONPATH, no
# LD_LIBRARY_PATH):
#   pip: `pip install --no-build-isolation .` into a venv of Debian's python
#        (meson-python, pyproject.toml), then `pip wheel` and that wheel into
#        a fresh venv; `import pinio.safetensors.torch`, `pinio --version`, a
#        load through each, and the engines' entry points (vllm.general_plugins,
#        sglang.srt.plugins) in the installed distribution's metadata.
#   meson: `meson setup --prefix P && meson install` to a prefix outside the
#        linker's path: the command runs by its RPATH; and configured for
#        /usr/local, the package goes where Debian's python looks.
# The builds are release builds like meson-python's, in a folder at the same
# depth below the sources, with the user's ccache: ccache serves the second
# and third from the first (and all three from an earlier run).
# Usage: pip_install_test.sh SOURCE_ROOT PATH_TO_PINIO (the build's, to make a checkpoint)
set -u
SRC=$1
PINIO=$2
PY=/usr/bin/python3
if ! $PY -c 'import venv, ensurepip' 2>/dev/null; then
    echo "SKIP: $PY has no venv/ensurepip (Debian: python3-venv; scripts/bootstrap installs it)"; exit 77
fi
if ! $PY -c 'import mesonpy' 2>/dev/null; then
    echo "SKIP: $PY has no meson-python (Debian: python3-mesonpy; scripts/bootstrap installs it)"; exit 77
fi
if ! $PY -m pip --version >/dev/null 2>&1; then
    echo "SKIP: $PY has no pip (Debian: python3-pip; scripts/bootstrap installs it)"; exit 77
fi
T=$(mktemp -d /var/tmp/pinio-${PINIO_TEST_RUN:-p$$}-install-XXXXXX) || exit 1
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# A copy of the sources: meson-python writes its native file beside
# pyproject.toml, and a test must not write into the source tree.
mkdir "$T/src"
(cd "$SRC" && tar cf - --exclude='./build*' --exclude=./.git --exclude='./.mesonpy*' .) |
    (cd "$T/src" && tar xf -) || { echo "FAIL: copying the sources"; exit 1; }
# What a user has, and no more: PATH, and HOME for pip's own files.
runs() { # runs DESCRIPTION BIN_FOLDER CMD...: CMD with PATH=BIN_FOLDER:/usr/bin:/bin only
    what=$1; bin=$2; shift 2
    if ! env -i PATH="$bin:/usr/bin:/bin" HOME="$T/home" "$@" >"$T/out" 2>&1; then
        fail "$what"; cat "$T/out"
    fi
}
mkdir "$T/home"
# The builds (not the checks) keep the user's compiler cache: with HOME
# replaced, ccache would start an empty one in it every run.
cache=$(ccache -k cache_dir 2>/dev/null || true)
build_env() { # build_env CMD...: in the sources' copy, PATH with the venv, CCACHE_DIR
    (cd "$T/src" && env -i PATH="$T/venv/bin:/usr/bin:/bin" HOME="$T/home" \
        ${cache:+CCACHE_DIR="$cache"} "$@")
}
"$PINIO" gen "$T/m.safetensors" --size 1M --tensors 4 --dtypes f32 --quiet || fail "pinio gen"
pyload='import sys, pinio, pinio.safetensors.torch as st
t = pinio.load(sys.argv[1])
assert len(t) == 4, t
assert st.load_file(sys.argv[1]).keys() == t.keys()'
# vLLM and SGLang find pinio's plugins in the installed distribution's
# metadata (pyproject.toml's entry points), by group and name
eps='from importlib.metadata import entry_points
want = {("vllm.general_plugins", "pinio.integrations.vllm:register"),
        ("sglang.srt.plugins", "pinio.integrations.sglang:register")}
got = {(g, e.value) for g, _ in want for e in entry_points(group=g) if e.name == "pinio"}
assert got == want, got
from pinio.integrations import sglang, vllm'

# pip install . into a venv.
$PY -m venv --system-site-packages "$T/venv" || { echo "FAIL: venv"; exit 1; }
if ! build_env pip install --no-build-isolation --no-index --no-cache-dir . >"$T/pip.log" 2>&1; then
    fail "pip install ."; tail -n 40 "$T/pip.log"
fi
runs "pip: import pinio.safetensors.torch" "$T/venv/bin" python -c 'import pinio.safetensors.torch'
runs "pip: pinio --version" "$T/venv/bin" pinio --version
grep -q "^pinio [0-9]" "$T/out" || { fail "pip: pinio --version printed"; cat "$T/out"; }
runs "pip: pinio load" "$T/venv/bin" pinio load "$T/m.safetensors"
runs "pip: pinio.load()" "$T/venv/bin" python -c "$pyload" "$T/m.safetensors"
runs "pip: the engines' entry points" "$T/venv/bin" python -c "$eps"
case $(env -i PATH="$T/venv/bin:/usr/bin:/bin" sh -c 'command -v pinio') in
    "$T/venv/bin/pinio") ;;
    *) fail "pip: the pinio on PATH is not the venv's" ;;
esac

# pip wheel, and the wheel into a fresh venv.
if ! build_env pip wheel --no-build-isolation --no-index --no-cache-dir --no-deps -w "$T/wheels" . \
        >"$T/wheel.log" 2>&1; then
    fail "pip wheel ."; tail -n 40 "$T/wheel.log"
fi
$PY -m venv --system-site-packages "$T/venv2" || { echo "FAIL: venv2"; exit 1; }
runs "wheel: pip install the wheel" "$T/venv2/bin" sh -c 'pip install --no-index --no-deps "$1"/pinio-*.whl' - "$T/wheels"
runs "wheel: import pinio.safetensors.torch" "$T/venv2/bin" python -c 'import pinio.safetensors.torch'
runs "wheel: pinio --version" "$T/venv2/bin" pinio --version
runs "wheel: pinio.load()" "$T/venv2/bin" python -c "$pyload" "$T/m.safetensors"
runs "wheel: the engines' entry points" "$T/venv2/bin" python -c "$eps"

# meson install to a prefix of its own: the command by its RPATH, the
# package through PYTHONPATH (a prefix python does not search). Only what
# runs is built and installed (tags runtime and python-runtime), in a build
# folder as deep below the sources as meson-python's (.mesonpy-*/build), so
# the compile lines, and ccache's keys, are the same.
b=.mesonpy-meson/build
if ! { build_env meson setup "$b" --prefix "$T/pfx" -Dbuildtype=release -Db_ndebug=if-release \
           -Dtests=disabled -Dmpi=disabled &&
       build_env ninja -C "$b" tools/pinio "python/pinio/_pinio$($PY -c \
           'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')" &&
       build_env meson install -C "$b" --no-rebuild --tags runtime,python-runtime; } \
        >"$T/meson.log" 2>&1; then
    fail "meson setup/install --prefix"; tail -n 40 "$T/meson.log"
fi
runs "meson: pinio --version" "$T/pfx/bin" pinio --version
site=$(cd "$T/pfx" && ls -d lib/python3*/*-packages 2>/dev/null | head -n 1)
runs "meson: pinio.load()" "$T/pfx/bin" env PYTHONPATH="$T/pfx/$site" $PY -c "$pyload" "$T/m.safetensors"
# Configured for /usr/local (nothing installed): the package goes to a
# folder /usr/bin/python3 searches.
if (cd "$T/src" && meson setup "$T/b2" --prefix /usr/local -Dtests=disabled -Dmpi=disabled \
        >"$T/meson2.log" 2>&1); then
    dest=$(meson introspect "$T/b2" --installed | $PY -c 'import json, sys
print(next(v for v in json.load(sys.stdin).values() if v.endswith("/pinio/__init__.py")))')
    $PY -c 'import os, site, sys
d = os.path.dirname(os.path.dirname(sys.argv[1]))
assert d in site.getsitepackages(), (d, site.getsitepackages())' "$dest" ||
        fail "meson --prefix /usr/local: the package goes to $dest, which $PY does not search"
else
    fail "meson setup --prefix /usr/local"; tail -n 20 "$T/meson2.log"
fi

[ "$fails" -eq 0 ] && echo "all install checks passed"
exit $((fails > 0))
