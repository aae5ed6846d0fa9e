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
  - trailing whitespace;
  - a comment citing a section of docs/*.md by name (`docs/design.md "The
    store"`, `(docs/api.md, "Errors")`) that the document does not have
    (a heading, or a paragraph's bold lead, starting with that name).
Also prints, without failing, an assertion-density report: for each Bazel
package under engine/, its functions, its assertions (uses of the macros that
engine/base/check.h defines) and assertions per function (STYLE.md point 5
aims at about two per non-trivial function). Functions are the column-0
definitions the length check sees, in the package's non-test .cc and .h files;
assertions are counted in the same files, inline class members included.
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


def functions(lines):
    """Top-level function definitions as (name, first line index, length):
    from the column-0 line that starts the signature to the next line that is
    exactly "}" at column 0."""
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
        yield signature.split("(")[0].split()[-1], head, j - head + 1
        i = j + 1


def long_functions(path, lines):
    out = []
    for name, head, length in functions(lines):
        if length > MAX_FUNCTION_LINES and name not in LONG_FUNCTION_EXEMPT:
            out.append("%s:%d: function %s is %d lines (max %d)" % (path, head + 1, name, length, MAX_FUNCTION_LINES))
    return out


CHECK_HEADER = "engine/base/check.h"


def assertion_pattern():
    """Every function-like COWKV_ macro check.h defines (COWKV_CHECK,
    COWKV_CHECK_MSG, COWKV_DCHECK, ...), so a new one is counted without
    editing this file."""
    with open(CHECK_HEADER, encoding="utf-8") as f:
        names = set(re.findall(r"^#\s*define\s+(COWKV_\w+)\(", f.read(), re.M))
    return re.compile(r"\b(%s)\s*\(" % "|".join(sorted(names, key=len, reverse=True)))


def engine_package(path):
    """The Bazel package under engine/ that owns path (the nearest BUILD)."""
    d = os.path.dirname(path)
    while d != "engine" and not os.path.exists(os.path.join(d, "BUILD")):
        d = os.path.dirname(d)
    return d


def assertion_report(counts):
    print("assertions per function (not a finding; STYLE.md point 5):")
    print("  %-20s %9s %10s %8s" % ("package", "functions", "assertions", "per fn"))
    total_f = total_a = 0
    for pkg in sorted(counts):
        f, a = counts[pkg]
        total_f += f
        total_a += a
        print("  %-20s %9d %10d %8.2f" % (pkg, f, a, a / f if f else 0.0))
    print("  %-20s %9d %10d %8.2f" % ("engine (all)", total_f, total_a, total_a / total_f if total_f else 0.0))


DOC_REF = re.compile(r'\b(design|format|testing|api|operations|benchmarks|cli)\.md\b[^"\n]{0,4}((?:"[^"\n]+"(?:, |\))?)+)')
DOC_TITLE = re.compile(r'"([^"\n]+)"')
_doc_sections = {}


def doc_sections(doc):
    """The headings and bold paragraph leads of docs/<doc>.md."""
    if doc not in _doc_sections:
        titles = []
        path = os.path.join("docs", doc + ".md")
        if os.path.exists(path):
            for line in open(path, encoding="utf-8"):
                m = re.match(r"#+\s+(.*)", line) or re.match(r"\*\*(.+?)\*\*", line)
                if m:
                    titles.append(m.group(1).strip())
        _doc_sections[doc] = titles
    return _doc_sections[doc]


def doc_references(path, lines):
    """Findings for cited doc sections that do not exist."""
    out = []
    for n, line in enumerate(lines, 1):
        for m in DOC_REF.finditer(line):
            for title in DOC_TITLE.findall(m.group(2)):
                title = title.rstrip("\\").replace("`", "").lower()
                sections = [t.replace("`", "").lower() for t in doc_sections(m.group(1))]
                if not any(t.startswith(title) for t in sections):
                    out.append('%s:%d: cites docs/%s.md "%s", which has no such section'
                               % (path, n, m.group(1), title))
    return out


def main():
    problems = []
    assertion = assertion_pattern()
    counts = {}  # engine package -> [functions, assertions]
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
            # NOLINT(mount-io): a syscall on a FUSE mount (a file, not the device);
            # NOLINT(file-io): on a user's file (a backup stream), not the device.
            if (re.search(r"\b(pread|pwrite|fsync|fdatasync)\s*\(", code)
                    and not path.startswith(("engine/io/", "bench/"))
                    and "NOLINT(mount-io)" not in line and "NOLINT(file-io)" not in line):
                problems.append("%s:%d: raw device I/O outside engine/io" % (path, n))
            if "reinterpret_cast" in code and path.startswith("engine/format/"):
                problems.append("%s:%d: reinterpret_cast in engine/format" % (path, n))
            if re.search(r"\bTODO\b(?!\(#\d+\))", line):
                problems.append("%s:%d: TODO without an issue number" % (path, n))
            if line != line.rstrip():
                problems.append("%s:%d: trailing whitespace" % (path, n))
        if path.startswith(("engine/", "server/")) and path.endswith(".cc") and not path.endswith("_test.cc"):
            problems.extend(long_functions(path, lines))
        problems.extend(doc_references(path, lines))
        if path.startswith("engine/") and not path.endswith("_test.cc") and path != CHECK_HEADER:
            c = counts.setdefault(engine_package(path), [0, 0])
            c[0] += sum(1 for _ in functions(lines))
            c[1] += sum(len(assertion.findall(line.split("//")[0])) for line in lines)
    assertion_report(counts)
    for p in problems:
        print(p)
    print("tidy: %d finding(s)" % len(problems))
    return 1 if problems else 0

if __name__ == "__main__":
    sys.exit(main())
