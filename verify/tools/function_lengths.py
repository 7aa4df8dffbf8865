#!/usr/bin/env python3
"""List C/C++/CUDA functions longer than N lines (default 120).

Scans the git-tracked *.c, *.h, *.cc and *.cu files (or the files given),
prints "length file:line name" for each function over the limit, longest
first, and exits 1 if there is any, 0 otherwise.

A function's length counts its lines from the signature's first line to
the closing brace. The parse is a heuristic for this tree's style
(clang-format, 4-space indent): a function body opens with a `{` that
ends a top-level signature (a line starting in column 0, through the line
whose `)` closes the parameter list, `{` on it or alone on the next line)
and closes at the first `}` in column 0 after it. Comments, string
contents and preprocessor lines are ignored; struct, enum, union and
initializer braces (`= {`) are skipped to their matching brace; extern "C"
and namespace blocks are scanned inside. The name is the identifier
before the parameter list, a macro-named one kept whole: RS(blk_block),
FW(falcon_blocked); qualifiers such as FC_DEV or VINLINE before the type
need no list. Member functions inside a C++ class body are not seen.
"""
import argparse
import os
import re
import subprocess
import sys

EXTS = (".c", ".h", ".cc", ".cu")
NOT_FUNCTION = re.compile(r"^\s*(typedef\s+)?(static\s+)?(const\s+)?(struct|enum|union|class)\b[^(]*$|=\s*$")
OPEN_SCOPE = re.compile(r"^\s*(extern\s+\"\"|namespace(\s+\w+)?)\s*$")  # string contents are blanked
SIG_END = re.compile(r"\)\s*(const|noexcept|override|final|\s)*$")
NAME = re.compile(r"([A-Za-z_]\w*\s*\(\s*[A-Za-z_]\w*\s*\)|[A-Za-z_]\w*)\s*\($")


def strip_comments(lines):
    """The lines with comments and string contents blanked, same count."""
    out, in_block = [], False
    for line in lines:
        res, i = [], 0
        while i < len(line):
            if in_block:
                end = line.find("*/", i)
                if end < 0:
                    i = len(line)
                else:
                    in_block, i = False, end + 2
                continue
            ch = line[i]
            if line.startswith("/*", i):
                in_block, i = True, i + 2
            elif line.startswith("//", i):
                break
            elif ch in "\"'":
                j = i + 1
                while j < len(line) and line[j] != ch:
                    j += 2 if line[j] == "\\" else 1
                res.append(ch + ch)
                i = j + 1
            else:
                res.append(ch)
                i += 1
        out.append("".join(res))
    return out


def function_name(sig):
    """The name before the parameter list in a signature's text."""
    depth = 0
    # the parameter list's '(' is the one whose ')' is the last at depth 0
    for k in range(len(sig) - 1, -1, -1):
        c = sig[k]
        if c == ")":
            depth += 1
        elif c == "(":
            depth -= 1
            if depth == 0:
                m = NAME.search(sig[: k + 1])
                return re.sub(r"\s+", "", m.group(1)) if m else None
    return None


def matching_brace(lines, i):
    """The line that closes the last brace opened on line i."""
    depth = 0
    for k in range(i, len(lines)):
        depth += lines[k].count("{") - lines[k].count("}")
        if depth <= 0:
            return k
    return len(lines) - 1


def functions(path):
    """(first line, last line, name) of each function in one file."""
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = strip_comments(f.read().split("\n"))
    found, sig_start, cont = [], None, False
    i = 0
    while i < len(lines):
        text = lines[i].rstrip()
        was_cont, cont = cont, text.endswith("\\")
        if was_cont or text.lstrip().startswith("#") or not text.strip():
            sig_start = None  # a macro definition or a blank line ends a signature
            i += 1
            continue
        if sig_start is None and not text[0].isspace() and text[0] not in "{}":
            sig_start = i
        if text == "{" or (text.endswith("{") and sig_start is not None):
            first = sig_start if sig_start is not None else i
            sig = " ".join(lines[first : i + 1]).rstrip("{ ").strip()
            sig_start = None
            if OPEN_SCOPE.search(sig):  # extern "C", namespace: scan inside
                i += 1
                continue
            name = None if NOT_FUNCTION.search(sig) else function_name(sig)
            if name and SIG_END.search(sig):
                end = i + 1
                while end < len(lines) and not lines[end].startswith("}"):
                    end += 1
                found.append((first + 1, end + 1, name))
            else:  # a struct or an initializer: its braces may close anywhere
                end = matching_brace(lines, i)
            i = end + 1
            continue
        if text.endswith(";") or text.endswith("}"):
            sig_start = None
        i += 1
    return found


def tracked_sources(root):
    out = subprocess.run(["git", "-C", root, "ls-files", "-z"], check=True, capture_output=True).stdout
    return [os.path.join(root, p) for p in out.decode().split("\0") if p.endswith(EXTS)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-n", "--max-lines", type=int, default=120, help="longest allowed function (lines)")
    ap.add_argument("--all", action="store_true", help="print every function, not only the long ones")
    ap.add_argument("files", nargs="*", help="files to scan (default: git-tracked sources)")
    a = ap.parse_args()
    root = subprocess.run(["git", "rev-parse", "--show-toplevel"], check=True, capture_output=True, text=True).stdout.strip()
    files = a.files or tracked_sources(root)
    rows = []
    for path in files:
        if not os.path.isfile(path):
            continue
        rel = os.path.relpath(path, root) if not a.files else path
        for first, last, name in functions(path):
            length = last - first + 1
            if a.all or length > a.max_lines:
                rows.append((length, rel, first, name))
    rows.sort(key=lambda r: (-r[0], r[1], r[2]))
    for length, rel, first, name in rows:
        print(f"{length:5d} {rel}:{first} {name}")
    return 1 if any(r[0] > a.max_lines for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
