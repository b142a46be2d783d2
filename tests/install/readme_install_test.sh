#!/bin/sh
# The README's install steps are not a silent no-op after scripts/demo or
# scripts/test: `meson setup DIR` on a folder that is already configured
# prints "Directory already configured", exits 0 and keeps the old options
# (the --prefix given is dropped). So every `meson setup` of the README's
# install section must name a folder neither script configures, or carry
# --reconfigure/--wipe; and the demo must not configure build/, the folder
# of the README's "Building by hand" and of scripts/test.
# Usage: readme_install_test.sh SOURCE_ROOT
set -u
exec python3 - "$1" <<'PY'
import re, sys
root = sys.argv[1]
readme = open(root + "/README.md").read()
demo = open(root + "/scripts/demo").read()
test = open(root + "/scripts/test").read()
fails = 0
def fail(msg):
    global fails
    print("FAIL: " + msg)
    fails += 1

# Folders the scripts configure: `meson setup DIR` in the demo, `stage LABEL DIR` in test.
used = set(re.findall(r"^\s*meson setup (\S+)", demo, re.M))
used |= set(re.findall(r"^\s*(?:CC=\S+ )?stage \S+ (\S+)", test, re.M))
if not used:
    fail("found no build folder in scripts/demo or scripts/test (has their shape changed?)")
if "build" in set(re.findall(r"^\s*meson setup (\S+)", demo, re.M)):
    fail("scripts/demo configures build/, the folder scripts/test and the README's build use")

m = re.search(r"^## Install and uninstall\n(.*?)^## ", readme, re.M | re.S)
if not m:
    fail("README.md has no '## Install and uninstall' section")
    sys.exit(1)
blocks = re.findall(r"^```sh\n(.*?)^```", m.group(1), re.M | re.S)
setups = [l for b in blocks for l in b.splitlines() if re.match(r"\s*meson setup ", l)]
if not setups:
    fail("the install section has no `meson setup` step")
for line in setups:
    words = line.split("#")[0].split()
    dirs = [w for w in words[2:] if not w.startswith("-")]
    if not dirs:
        fail("no build folder in: " + line)
    elif dirs[0] in used and not {"--reconfigure", "--wipe"} & set(words):
        fail("'%s' configures %s/, which %s; there it would change nothing"
             % (line.strip(), dirs[0], "scripts/demo or scripts/test configures"))
if fails == 0:
    print("the README's install steps configure their own build folder (%s)" %
          ", ".join(sorted(set(l.split()[2] for l in setups))))
sys.exit(1 if fails else 0)
PY
