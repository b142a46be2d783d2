#!/usr/bin/env python3
"""Every C and Python example of README.md, built against the installed
library and run.

  check_readme.py MESON BUILD_DIR LIBDIR PINIO README CC...

Each ```python block runs as printed, with this interpreter, in a folder
holding the files it names (model.safetensors and a sharded model/, both
`pinio gen` checkpoints with lm_head.weight and model.norm.weight), the
package imported from BUILD_DIR/python; on a machine without CUDA too.
A ```py block is shown, not run (it needs what the test cannot start:
an object store at the README's endpoint).
Skipped, said so, when the build has no Python package.

Installs the library, headers and pinio.pc (meson install --tags
devel,runtime) into a temporary DESTDIR, finds pinio through pkg-config there
(PKG_CONFIG_SYSROOT_DIR, as a cross build would), compiles each ```c block of
README.md as a program of its own with -std=c11 -Wall -Wextra -Werror
-pedantic, and runs it on a checkpoint `pinio gen` wrote, its path as argv[1].
Fails on any compile error or warning, a non-zero exit or a crash, and when
README.md has no C example at all (the extraction itself must not rot).
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile


def main(argv):
    meson, build, libdir, pinio, readme, cc = argv[1], argv[2], argv[3], argv[4], argv[5], argv[6:]
    blocks = re.findall(r"^```c\n(.*?)^```", open(readme, encoding="utf-8").read(), re.M | re.S)
    if not blocks:
        print("FAIL: no ```c block in " + readme)
        return 1
    run = os.environ.get("PINIO_TEST_RUN") or "p%d" % os.getpid()  # tests/common/helpers.h
    work = tempfile.mkdtemp(prefix="pinio-%s-readme-" % run, dir="/var/tmp")
    failed = 0
    try:
        dest = os.path.join(work, "destdir")
        r = subprocess.run([meson, "install", "-C", build, "--no-rebuild", "--quiet", "--destdir",
                            dest, "--tags", "devel,runtime"], capture_output=True, text=True)
        if r.returncode != 0:
            print("FAIL: meson install: " + r.stdout + r.stderr)
            return 1
        lib = os.path.join(dest, libdir.lstrip("/"))
        env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(lib, "pkgconfig"),
                   PKG_CONFIG_SYSROOT_DIR=dest)
        pc = subprocess.run(["pkg-config", "--cflags", "--libs", "pinio"], env=env,
                            capture_output=True, text=True)
        if pc.returncode != 0 or "-lpinio" not in pc.stdout:
            print("FAIL: pkg-config pinio in %s: %s%s" % (lib, pc.stdout, pc.stderr))
            return 1
        flags = pc.stdout.split()
        model = os.path.join(work, "model.safetensors")
        subprocess.run([pinio, "gen", model, "--size", "8M", "--tensors", "6", "-q"], check=True)
        # The installed library, not the build tree's: meson test points
        # LD_LIBRARY_PATH at the build tree.
        run_env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
        for i, code in enumerate(blocks, 1):
            first = code.strip().split("\n")[0]
            src = os.path.join(work, "example%d.c" % i)
            exe = src[:-2]
            with open(src, "w") as f:
                f.write(code)
            c = subprocess.run(cc + ["-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic", "-o",
                                     exe, src] + flags + ["-Wl,-rpath," + lib],
                               capture_output=True, text=True)
            if c.returncode != 0:
                print("FAIL: README example %d (%s) does not compile:\n%s" % (i, first, c.stderr))
                failed += 1
                continue
            x = subprocess.run([exe, model], capture_output=True, text=True, env=run_env,
                               timeout=60)
            print("--- example %d: exit %d\n%s%s" % (i, x.returncode, x.stdout, x.stderr))
            if x.returncode != 0:
                print("FAIL: README example %d (%s) exits %d" % (i, first, x.returncode))
                failed += 1
        print("%d of %d README examples built and ran" % (len(blocks) - failed, len(blocks)))
        failed += run_python(readme, build, pinio, work)
    finally:
        shutil.rmtree(work)
    return 1 if failed else 0


def run_python(readme, build, pinio, work):
    """Runs each ```python block of README.md in a folder of its own; the number that failed."""
    blocks = re.findall(r"^```python\n(.*?)^```", open(readme, encoding="utf-8").read(),
                        re.M | re.S)
    pkg = os.path.join(build, "python")
    if not os.path.isdir(os.path.join(pkg, "pinio")):
        print("SKIP: the Python examples (this build has no Python package: -Dpython)")
        return 0
    if not blocks:
        print("FAIL: no ```python block in " + readme)
        return 1
    here = os.path.join(work, "py")
    os.mkdir(here)
    gen = [pinio, "gen", "--hidden", "256", "--layers", "2", "-q"]
    subprocess.run(gen[:2] + [os.path.join(here, "model.safetensors")] + gen[2:], check=True)
    subprocess.run(gen[:2] + [os.path.join(here, "model")] + gen[2:] + ["--shards", "2"],
                   check=True)
    env = dict(os.environ, PYTHONPATH=pkg)
    failed = 0
    for i, code in enumerate(blocks, 1):
        x = subprocess.run([sys.executable, "-c", code], cwd=here, env=env, capture_output=True,
                           text=True, timeout=120)
        print("--- python example %d: exit %d\n%s%s" % (i, x.returncode, x.stdout, x.stderr))
        if x.returncode != 0:
            print("FAIL: README python example %d exits %d" % (i, x.returncode))
            failed += 1
    print("%d of %d README python examples ran" % (len(blocks) - failed, len(blocks)))
    return failed


if __name__ == "__main__":
    sys.exit(main(sys.argv))
