#!/usr/bin/env python3
"""Section-3 manual pages from the public headers.

The contract of each function lives once, in its header's doc comment (the
Doxygen reference reads the same text); this script turns one header into
one scdoc page, so `man 3 pinio_view_clone` can never say something the
header does not. Every function of the header is named in NAME (so apropos
finds it) and gets its prototype and its comment under FUNCTIONS; meson
installs a link page per function name (see doc/man/meson.build).

  mkman3.py names HEADER...            page and function names, one "page name" a line
  mkman3.py page HEADER SCDOC OUT      HEADER's page, rendered by scdoc into OUT
"""
import os
import re
import subprocess
import sys

SKIP = {"pinio.h", "version.h"}  # the umbrella header (pinio(3)); macros only


def page_name(header):
    return "pinio_" + os.path.basename(header)[:-2]


def declarations(text):
    """(names, prototype, comment) for every PINIO_API declaration, in order.

    A comment is the /** ... */ block that ends right before the declaration
    (blank lines allowed), as Doxygen attaches it."""
    out = []
    # Exported functions, and the static inline ones the header declares
    # before defining them (pinio_X_opts_default): public API all the same.
    pat = r"PINIO_API\b[^;{]*;|^static inline [^;{=]*\bpinio_\w+\([^;{]*\);"
    for m in re.finditer(pat, text, re.M):
        decl = re.sub(r"\s+", " ", m.group(0)).strip()
        decl = re.sub(r"\s*PINIO_PRINTF\([^)]*\)", "", decl)
        fn = re.search(r"(pinio_\w+)\s*\(", decl)
        if fn:
            name = fn.group(1)
        else:  # an exported object: PINIO_API extern const T name;
            name = re.search(r"(pinio_\w+)\s*;$", decl).group(1)
        before = text[: m.start()].rstrip()
        comment = ""
        if before.endswith("*/"):
            start = before.rfind("/**")
            if start >= 0 and "*/" not in before[start:-2]:
                comment = before[start:]
        if decl.startswith("PINIO_API "):
            decl = decl[len("PINIO_API "):]
        out.append((name, decl, comment))
    return out


def file_comment(text):
    m = re.search(r"/\*\*\s*\n\s*\*\s*@file.*?\*/", text, re.S)
    return m.group(0) if m else ""


def comment_lines(comment):
    body = comment[3:-2] if comment.startswith("/**") else comment
    lines = []
    for ln in body.split("\n"):
        ln = re.sub(r"^\s*\* ?", "", ln) if re.match(r"^\s*\*", ln) else ln.strip()
        lines.append(ln.rstrip())
    return lines


def inline(s):
    """Doxygen markup to scdoc, with scdoc's own markup characters escaped."""
    s = s.replace("\\", "\\\\")
    code = []

    def keep(m):  # `code` -> bold, after escaping its inside
        code.append("*" + esc(m.group(1)) + "*")
        return "\x00%d\x00" % (len(code) - 1)

    def esc(t):
        return t.replace("*", "\\*").replace("_", "\\_")

    s = re.sub(r"`([^`]+)`", keep, s)
    s = re.sub(r"[@\\](?:p|a|c|ref)\s+(\S+)", lambda m: m.group(1), s)
    s = re.sub(r"(?<![\w&])#(?=[A-Za-z_])", "", s)  # #pinio_x: a Doxygen link
    s = esc(s)
    s = re.sub(r"\x00(\d+)\x00", lambda m: code[int(m.group(1))], s)
    # a line starting with one of these would open a scdoc table or list
    return "\\" + s if s[:1] and s[0] in "[]|-" else s


def prose(lines):
    """Comment lines to scdoc paragraphs, lists and literal blocks."""
    out, item, in_code = [], None, False

    def flush():
        nonlocal item
        if item is not None:
            out.append(item)
            item = None

    for ln in lines:
        raw = ln.strip()
        if re.match(r"[@\\](code|verbatim)\b", raw):
            flush()
            out += ["", "```"]
            in_code = True
            continue
        if re.match(r"[@\\](endcode|endverbatim)\b", raw):
            out += ["```", ""]
            in_code = False
            continue
        if in_code:
            out.append(ln.replace("\\", "\\\\"))
            continue
        if raw.startswith("|"):  # a Markdown table: shown as it is written
            flush()
            if out and out[-1] == "```":
                out.insert(len(out) - 1, raw)
            else:
                out += ["", "```", raw, "```"]
            continue
        if re.match(r"[@\\](file|cond|endcond|\{|\})", raw):
            continue
        raw = re.sub(r"^[@\\]brief\s*", "", raw)
        m = re.match(r"^[@\\]param(?:\[\w+\])?\s+(\w+)\s*(.*)", raw)
        if m:
            flush()
            item = "- _%s_: %s" % (m.group(1).replace("_", "\\_"), inline(m.group(2)))
            continue
        m = re.match(r"^[@\\](returns?|retval|note|warning|see)\b\s*(.*)", raw)
        if m:
            flush()
            label = {"return": "Returns", "returns": "Returns", "retval": "Returns",
                     "note": "Note:", "warning": "Warning:", "see": "See also"}[m.group(1)]
            out += ["", label + " " + inline(m.group(2))]
            continue
        m = re.match(r"^([-+]|\d+\.)\s+(.*)", raw)
        if m:
            flush()
            item = ("- " if m.group(1) in "-+" else m.group(1) + " ") + inline(m.group(2))
            continue
        if not raw:
            flush()
            out.append("")
            continue
        if item is not None and ln.startswith(" "):  # a list item's next line
            item += " " + inline(raw)
            continue
        flush()
        out.append(inline(raw))
    flush()
    # scdoc wants a blank line between a list and the paragraph after it
    fixed = []
    for i, ln in enumerate(out):
        if (i and ln and not ln.startswith("- ") and fixed and fixed[-1].startswith("- ")
                and not re.match(r"^\d+\. ", ln)):
            fixed.append("")
        fixed.append(ln)
    return "\n".join(fixed)


def wrap_prototype(decl, width=76):
    """A long prototype broken after commas, continuation lines under the '('."""
    if len(decl) <= width:
        return decl
    open_at = decl.index("(") + 1 if "(" in decl else 0
    parts = re.split(r"(?<=,) ", decl)
    lines, cur = [], parts[0]
    for p in parts[1:]:
        if len(cur) + 1 + len(p) > width:
            lines.append(cur)
            cur = " " * open_at + p
        else:
            cur += " " + p
    lines.append(cur)
    return "\n".join(lines)


def render(header):
    text = open(header, encoding="utf-8").read()
    base = os.path.basename(header)
    decls = declarations(text)
    fc = comment_lines(file_comment(text))
    brief = ""
    for i, ln in enumerate(fc):
        if ln.startswith("@brief"):
            brief = ln[len("@brief"):].strip()
            for nxt in fc[i + 1:]:
                if not nxt.strip() or nxt.strip().startswith("@"):
                    break
                brief += " " + nxt.strip()
    brief = re.sub(r"^[\w.]+:\s*", "", brief).rstrip(".")
    page = page_name(header)
    names = [page] + [n for n, _, _ in decls if n != page]
    s = ["%s(3)" % page, "", "# NAME", "",
         "%s - %s" % (", ".join(n.replace("_", "\\_") for n in names), inline(brief)),
         "", "# SYNOPSIS", "", "```", "#include <pinio/%s>" % base, "",
         "cc ... $(pkg-config --cflags --libs pinio%s)" % ("-mpi" if base == "mpi.h" else ""),
         "```", "", "# DESCRIPTION", "",
         prose([ln for ln in fc if not ln.startswith("@brief")]).strip(), "",
         "# FUNCTIONS", ""]
    for name, decl, comment in decls:
        s += ["## %s" % name.replace("_", "\\_"), "", "```", wrap_prototype(decl), "```", ""]
        body = prose(comment_lines(comment)).strip() if comment else ""
        s += [body or "See the DESCRIPTION above.", ""]
    s += ["# RETURN VALUE", "",
          "Unless a function above says otherwise, 0 (or a count) on success and a "
          "negative errno value or *PINIO_E\\** code on failure; *pinio_strerror*(3) "
          "names each. errno is not set.", "",
          "# SEE ALSO", "", "*pinio*(3), *pinio*(1), the header _<pinio/%s>_" % base, ""]
    return "\n".join(s)


def main(argv):
    if len(argv) >= 2 and argv[1] == "names":
        for h in argv[2:]:
            if os.path.basename(h) in SKIP:
                continue
            page = page_name(h)
            for n, _, _ in declarations(open(h, encoding="utf-8").read()):
                print(page, n)
        return 0
    if len(argv) == 5 and argv[1] == "page":
        src = render(argv[2])
        r = subprocess.run([argv[3]], input=src.encode(), capture_output=True)
        if r.returncode != 0:
            sys.stderr.write("scdoc on the page of %s: %s" % (argv[2], r.stderr.decode()))
            return 1
        with open(argv[4], "wb") as f:
            f.write(r.stdout)
        return 0
    if len(argv) == 3 and argv[1] == "scd":  # the scdoc source, to debug a page
        sys.stdout.write(render(argv[2]))
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
