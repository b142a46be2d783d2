#!/usr/bin/python3
"""json_validate.py SCHEMA_DIR CMD FILE: FILE (one --json output of `pinio CMD`)
is one line of valid UTF-8 JSON and matches doc/json/CMD.schema.json, or
doc/json/error.schema.json when it is a failure ("error" member).
Exit 0 when it matches, 1 with the reason otherwise."""
import json
import os
import sys

import jsonschema

sdir, cmd, path = sys.argv[1:4]
raw = open(path, "rb").read()
try:
    text = raw.decode("utf-8")  # strict: a stray byte is invalid JSON text
except UnicodeDecodeError as e:
    sys.exit(f"{path}: not UTF-8: {e}")
lines = text.split("\n")
if len(lines) != 2 or lines[1] != "":
    sys.exit(f"{path}: want one JSON object on one line, got {len(lines) - 1} lines")
doc = json.loads(lines[0])
name = "error" if isinstance(doc, dict) and "error" in doc else cmd
with open(os.path.join(sdir, name + ".schema.json")) as f:
    schema = json.load(f)
v = jsonschema.Draft202012Validator(schema)
errs = sorted(v.iter_errors(doc), key=lambda e: list(e.path))
if errs:
    for e in errs[:5]:
        print(f"{path}: {list(e.absolute_path)}: {e.message[:300]}")
    sys.exit(1)
if doc["command"] != cmd:
    sys.exit(f"{path}: command is {doc['command']!r}, want {cmd!r}")
