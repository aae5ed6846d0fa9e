#!/usr/bin/env python3
"""House-style checks that a compiler does not make (STYLE.md point 24).

Fails (exit 1, one line per finding) on:
  - a header that does not open with a comment;
  - `assert(` (use COWKV_CHECK / COWKV_DCHECK);
  - `std::mutex` (use absl::Mutex, which carries thread-safety annotations);
  - pread/pwrite/fsync/fdatasync outside engine/io/;
  - reinterpret_cast in engine/format/;
  - TODO without an issue number (`TODO(#N)`);
  - a function longer than 70 lines in engine/ or server/ (unless listed below);
  - trailing whitespace.
Run from the repository root: python3 tools/tidy.py
"""
import os
import re
import sys

ROOTS = ["engine", "clients/cli", "bench", "docs", "server", "proto"]
MAX_FUNCTION_LINES = 70
# Functions allowed to be longer, with the reason.
LONG_FUNCTION_EXEMPT = {
}

def sources():
    for root in ROOTS:
        for dirpath, _, files in os.walk(root):
            for f in files:
                if f.endswith((".h", ".cc")):
                    yield os.path.join(dirpath, f)

SKIP_HEADS = ("namespace", "class ", "struct ", "enum", "extern", "#", "//", "}", "template", "TEST")


def long_functions(path, lines):
    """Top-level function bodies: from the column-0 line that starts the
    signature to the next line that is exactly "}" at column 0."""
    out = []
    i = 0
    while i < len(lines):
        if not lines[i].rstrip().endswith("{"):
            i += 1
            continue
        head = i
        while head > 0 and lines[head][:1] == " ":
            head -= 1
        first = lines[head]
        signature = " ".join(lines[head:i + 1])
        if not first[:1].isalpha() or first.startswith(SKIP_HEADS) or "(" not in signature:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not lines[j].startswith("}"):
            j += 1
        length = j - head + 1
        name = signature.split("(")[0].split()[-1]
        if length > MAX_FUNCTION_LINES and name not in LONG_FUNCTION_EXEMPT:
            out.append("%s:%d: function %s is %d lines (max %d)" % (path, head + 1, name, length, MAX_FUNCTION_LINES))
        i = j + 1
    return out


def main():
    problems = []
    for path in sources():
        with open(path, encoding="utf-8") as f:
            text = f.read()
        lines = text.split("\n")
        if path.endswith(".h") and not lines[0].startswith("//"):
            problems.append("%s:1: header does not open with a comment" % path)
        for n, line in enumerate(lines, 1):
            code = line.split("//")[0]
            if re.search(r"\bassert\(", code) and "static_assert" not in code:
                problems.append("%s:%d: assert( — use COWKV_CHECK/COWKV_DCHECK" % (path, n))
            if "std::mutex" in code:
                problems.append("%s:%d: std::mutex — use absl::Mutex" % (path, n))
            if re.search(r"\b(pread|pwrite|fsync|fdatasync)\s*\(", code) and not path.startswith(("engine/io/", "bench/")):
                problems.append("%s:%d: raw device I/O outside engine/io" % (path, n))
            if "reinterpret_cast" in code and path.startswith("engine/format/"):
                problems.append("%s:%d: reinterpret_cast in engine/format" % (path, n))
            if re.search(r"\bTODO\b(?!\(#\d+\))", line):
                problems.append("%s:%d: TODO without an issue number" % (path, n))
            if line != line.rstrip():
                problems.append("%s:%d: trailing whitespace" % (path, n))
        if path.startswith(("engine/", "server/")) and path.endswith(".cc") and not path.endswith("_test.cc"):
            problems.extend(long_functions(path, lines))
    for p in problems:
        print(p)
    print("tidy: %d finding(s)" % len(problems))
    return 1 if problems else 0

if __name__ == "__main__":
    sys.exit(main())
