#!/usr/bin/env python3
"""Runs README.md's "A 2-minute tour" and compares every output with the
README's (called by tools/readme_tour_test.sh, which starts the server).

Every fenced block of the section is parsed: a line "$ CMD" is a command
(with its heredoc body when CMD has `<<'WORD'`), the lines up to the next
"$ " line are its expected stdout+stderr. All commands run in order in one
bash session at the repository root, each one's output captured on its own.

  readme_tour.py --readme FILE --cli COWKV --addr HOST:PORT --work DIR

Stdlib only. Exit 0 and "readme tour: N commands matched", or the first
mismatch (command, expected, actual) and exit 1.
"""
import argparse
import os
import re
import shlex
import subprocess
import sys

SECTION = "## A 2-minute tour"
DEFAULT_ADDR = "127.0.0.1:7420"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class TourError(Exception):
    pass


def parse_tour(text):
    """[(command, [expected lines])] of every fenced block in the section."""
    lines = text.splitlines()
    try:
        start = lines.index(SECTION)
    except ValueError:
        raise TourError(f"no '{SECTION}' section")
    end = next((i for i in range(start + 1, len(lines))
                if lines[i].startswith("## ")), len(lines))
    section = lines[start + 1:end]
    commands, blocks, i = [], 0, 0
    while i < len(section):
        if not section[i].startswith("```"):
            i += 1
            continue
        blocks += 1
        i += 1
        before = len(commands)
        while i < len(section) and not section[i].startswith("```"):
            line = section[i]
            if not line.startswith("$ "):
                if len(commands) == before:
                    raise TourError(f"block {blocks} does not start with a '$ ' line: {line!r}")
                commands[-1][1].append(line)
                i += 1
                continue
            cmd = [line[2:]]
            i += 1
            heredoc = re.search(r"<<-?\s*(['\"]?)(\w+)\1", cmd[0])
            if heredoc:
                word = heredoc.group(2)
                while i < len(section) and section[i] != word:
                    if section[i].startswith("```"):
                        raise TourError(f"heredoc {word} of {cmd[0]!r} never ends")
                    cmd.append(section[i])
                    i += 1
                cmd.append(word)
                i += 1
            commands.append(("\n".join(cmd), []))
        if len(commands) == before:
            raise TourError(f"block {blocks} has no '$ ' command")
        i += 1  # closing fence
    if not commands:
        raise TourError("the tour section has no fenced blocks")
    return commands


def rewrite(commands, cli, addr, work, venv):
    """The commands as this test runs them. Each rewrite is about where
    things are (binary, server, venv, scratch files), never what runs."""
    out, venv_dir = [], None
    for cmd, expected in commands:
        # Scratch files in /tmp (echo > /tmp/notes.txt, fs put /tmp/...):
        # the test's own directory, so runs never share or clobber them.
        # First, before the paths below (which may be under /tmp) go in.
        run = re.sub(r"(?<![\w/.-])/tmp/", work.rstrip("/") + "/", cmd)
        # `alias cowkv=bazel-bin/...`: the CLI under test.
        if re.match(r"alias cowkv=", run):
            if not re.fullmatch(r"alias cowkv=\S+", run):
                raise TourError(f"cannot rewrite alias line: {run!r}")
            run = "alias cowkv=" + shlex.quote(cli)
        # `python3 -m venv V && V/bin/pip install -q ./clients/python`: the
        # repo's venv (clients/python/venv.sh installs the client into it);
        # quiet like `pip -q`, its log printed only if it fails. Later
        # commands' V/bin/ become the venv's bin/.
        m = re.fullmatch(r"python3 -m venv (\S+) && \1/bin/pip install -q \./clients/python", run)
        if m:
            venv_dir = m.group(1)
            log = shlex.quote(os.path.join(work, "venv.log"))
            run = f"bash clients/python/venv.sh >{log} 2>&1 || cat {log}"
        elif "pip install" in run or "-m venv" in run:
            raise TourError(f"cannot rewrite venv line: {run!r}")
        if venv_dir:
            run = run.replace(venv_dir + "/bin/", venv + "/bin/")
        # The default address, in --server or connect("..."): the test
        # server's (bare `cowkv` commands get it from $COWKV_SERVER).
        run = run.replace(DEFAULT_ADDR, addr)
        out.append((cmd, run, expected))
    return out


# Masks, applied to expected and actual lines alike; only what differs
# from run to run with the same binaries:
TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")  # wall clock
SUBVOL_HEADER = re.compile(r"^ *ID +GEN +PARENT +CREATED +FLAGS +NAME$")
SUBVOL_ROW_GEN = re.compile(r"^( *\d+ +)(\d+)(?= )")
FIEMAP_ROW = re.compile(r"^( *\d+: +\d+\.\. +\d+:)( +\d+)(\.\.)( +\d+)(:)")


def blank(field):
    """A right-aligned number field as '#' at the same width."""
    return " " * (len(field) - len(field.lstrip())) + "#" * len(field.strip())


def mask(lines, addr):
    masked, in_subvols = [], False
    for line in lines:
        # The test server's address where the README has the default one.
        line = line.replace(addr, DEFAULT_ADDR)
        # CREATED (subvolume list) and MODIFIED (fs ls -l): wall clock.
        line = TIMESTAMP.sub("YYYY-MM-DD HH:MM:SS", line)
        # subvolume list GEN: the generation of the subvolume's last
        # change, which moves with engine commits (time-triggered too).
        if SUBVOL_HEADER.match(line):
            in_subvols = True
        elif in_subvols and SUBVOL_ROW_GEN.match(line):
            line = SUBVOL_ROW_GEN.sub(lambda m: m.group(1) + "G" * len(m.group(2)), line)
        else:
            in_subvols = False
        # fs fiemap physical_offset start..end: where the allocator put the
        # blocks (logical offsets, lengths, flags and counts stay checked).
        line = FIEMAP_ROW.sub(
            lambda m: m.group(1) + blank(m.group(2)) + m.group(3) + blank(m.group(4)) + m.group(5),
            line)
        masked.append(line)
    return masked


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--readme", required=True)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--addr", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--venv", default=os.path.join(
        ROOT, "clients/python", os.environ.get("COWKV_PY_VENV", ".venv")))
    ap.add_argument("--timeout", type=float, default=600)
    a = ap.parse_args()
    try:
        with open(a.readme, encoding="utf-8") as f:
            tour = rewrite(parse_tour(f.read()), a.cli, a.addr, a.work, a.venv)
    except (OSError, TourError) as e:
        print(f"readme tour: FAIL: {a.readme}: {e}")
        return 1

    # One bash session: `{ CMD\n} >out.N 2>&1` per command, in order.
    outs = [os.path.join(a.work, f"out.{n}") for n in range(len(tour))]
    script = ["shopt -s expand_aliases"]
    for (_, run, _), out in zip(tour, outs):
        script.append("{ " + run + "\n} >" + shlex.quote(out) + " 2>&1")
    script_path = os.path.join(a.work, "tour.sh")
    with open(script_path, "w", encoding="utf-8") as f:
        f.write("\n".join(script) + "\n")
    env = dict(os.environ, COWKV_SERVER=a.addr)
    try:
        subprocess.run(["bash", script_path], cwd=ROOT, env=env, timeout=a.timeout,
                       stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        print(f"readme tour: FAIL: the tour took over {a.timeout:.0f} s")
        return 1

    # Compared line by line: a missing final newline is not a difference
    # (`kv get` adds one only when stdout is a terminal, docs/cli.md).
    for n, ((cmd, run, expected), out) in enumerate(zip(tour, outs), 1):
        try:
            with open(out, encoding="utf-8", errors="replace") as f:
                actual = f.read().splitlines()
        except OSError:
            actual = ["(the command did not run)"]
        if mask(actual, a.addr) != mask(expected, a.addr):
            print(f"readme tour: FAIL at command {n} of {len(tour)}:")
            print("  $ " + cmd.replace("\n", "\n    "))
            if run != cmd:
                print("  ran as:\n    " + run.replace("\n", "\n    "))
            print("  expected (README):")
            print("".join(f"    | {l}\n" for l in expected), end="")
            print("  actual:")
            print("".join(f"    | {l}\n" for l in actual), end="")
            return 1
    print(f"readme tour: {len(tour)} commands matched")
    return 0


if __name__ == "__main__":
    sys.exit(main())
