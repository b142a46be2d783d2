#!/usr/bin/env python3
"""The manual pages as `meson install` puts them, held to what exists.

  check_man.py MESON BUILD_DIR MANDIR PINIO MAIN_C LIB [LIB...]

Installs only the pages (meson install --tags man) into a temporary
DESTDIR, then fails when
- a command of tools/main.c's commands[] has no pinio-CMD(1) page;
- an option a command's --help lists is missing from its page, or the page
  describes an option that --help does not know (pages describe what exists);
- an exported pinio_* symbol of LIB has no section-3 page or link, or its
  page does not name it (`man 3 NAME` must land on its contract);
- a page renders with any groff or man warning.
Exit 77 when this build made no pages (scdoc not installed).
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg)


def options_of(text):
    return set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", text))


def page_options(page_src):
    """Options the page defines: the bold terms that open an item (a line
    followed by a tab-indented description), the scdoc way options are listed."""
    lines = page_src.split("\n")
    opts = set()
    for i, ln in enumerate(lines[:-1]):
        if lines[i + 1].startswith("\t") and ln and not ln.startswith("\t"):
            opts |= options_of(ln)
    return opts, options_of(page_src)


def main(argv):
    meson, build, mandir, pinio, main_c, libs = argv[1], argv[2], argv[3], argv[4], argv[5], argv[6:]
    if not glob.glob(os.path.join(build, "doc", "man", "*.1")):
        print("no manual pages in this build (scdoc not found): skipped")
        return 77
    run = os.environ.get("PINIO_TEST_RUN") or "p%d" % os.getpid()  # tests/common/helpers.h
    dest = tempfile.mkdtemp(prefix="pinio-%s-man-" % run, dir="/var/tmp")
    try:
        r = subprocess.run([meson, "install", "-C", build, "--no-rebuild", "--quiet",
                            "--destdir", dest, "--tags", "man"], capture_output=True, text=True)
        if r.returncode != 0:
            fail("meson install --tags man: " + r.stdout + r.stderr)
            return 1
        root = os.path.join(dest, mandir.lstrip("/"))
        check(root, pinio, main_c, libs)
    finally:
        shutil.rmtree(dest)
    print("%d failure(s)" % len(failures))
    return 1 if failures else 0


def check(root, pinio, main_c, libs):
    src_dir = os.path.join(os.path.dirname(main_c), "..", "doc", "man")

    # 1. every command has a page, and the page has every option --help lists
    table = re.search(r"commands\[\]\s*=\s*\{(.*?)\};", open(main_c).read(), re.S).group(1)
    commands = re.findall(r"&pinio_cmd_(\w+)", table)
    if not commands:
        fail("no command found in " + main_c)
    for cmd in commands:
        page = os.path.join(root, "man1", "pinio-%s.1" % cmd)
        if not os.path.isfile(page):
            fail("pinio %s has no installed page pinio-%s(1)" % (cmd, cmd))
            continue
        helps = [subprocess.run([pinio, cmd, "--help"], capture_output=True, text=True)]
        if cmd == "load":  # the MPI form has its own --help, when built with MPI
            helps.append(subprocess.run([pinio, cmd, "--mpi", "replicate", "--help"],
                                        capture_output=True, text=True))
        if helps[0].returncode != 0:
            fail("pinio %s --help exits %d" % (cmd, helps[0].returncode))
        known = set()
        for h in helps:
            if h.returncode == 0:
                known |= options_of(h.stdout)
        src = open(os.path.join(src_dir, "pinio-%s.1.scd" % cmd)).read()
        defined, mentioned = page_options(src)
        for o in sorted(options_of(helps[0].stdout) - mentioned):
            fail("pinio-%s(1) does not describe %s (pinio %s --help lists it)" % (cmd, o, cmd))
        # An MPI-only option is not in a build without MPI: only then excused.
        mpi_built = len(helps) > 1 and helps[1].returncode == 0
        for o in sorted(defined - known - {"--help"}):  # every command takes --help
            if cmd == "load" and not mpi_built:
                continue
            fail("pinio-%s(1) describes %s, which pinio %s --help does not know" % (cmd, o, cmd))
    if not os.path.isfile(os.path.join(root, "man1", "pinio.1")):
        fail("no pinio(1)")

    # 2. every exported function (and object) has a section-3 page naming it
    names = set()
    for lib in libs:
        nm = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True,
                            check=True).stdout
        names |= set(re.findall(r"^\S+ [TD] (pinio_\w+)$", nm, re.M))
    if len(names) < 100:
        fail("only %d exported pinio_* symbols found in %s" % (len(names), libs))
    for n in sorted(names):
        path = os.path.join(root, "man3", n + ".3")
        if not os.path.exists(path):  # a missing file or a dangling link
            fail("%s is exported but `man 3 %s` finds no page" % (n, n))
            continue
        text = open(path, encoding="utf-8").read()
        if not re.search(r"(?<!\w)%s(?!\w)" % re.escape(n), text):
            fail("%s: its page %s does not mention it" % (n, os.path.realpath(path)))
    r = subprocess.run(["man", "-M", root, "-w", "3"] + sorted(names)[:3], capture_output=True,
                       text=True)
    if r.returncode != 0:
        fail("man -M %s -w 3 ... fails: %s" % (root, r.stderr))

    # 3. every page renders without a warning, through groff and through man
    pages = sorted(p for p in glob.glob(os.path.join(root, "man*", "*")) if not os.path.islink(p))
    env = dict(os.environ, MANWIDTH="80", LC_ALL="C.UTF-8")
    for p in pages:
        g = subprocess.run(["groff", "-k", "-Tutf8", "-man", "-ww", "-z", p], capture_output=True,
                           text=True, env=env)
        if g.returncode != 0 or g.stderr:
            fail("groff -ww %s: %s" % (os.path.basename(p), g.stderr.strip()))
        m = subprocess.run(["man", "--warnings", "-E", "UTF-8", "-l", p], capture_output=True,
                           text=True, env=env)
        if m.returncode != 0 or m.stderr or not m.stdout:
            fail("man --warnings -l %s: %s" % (os.path.basename(p), m.stderr.strip()))
    print("%d commands, %d exported symbols, %d pages checked" % (len(commands), len(names),
                                                                  len(pages)))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
