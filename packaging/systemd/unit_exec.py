#!/usr/bin/env python3
"""Prints a systemd unit's ExecStart as the argv systemd would run, NUL-separated.

  unit_exec.py UNIT [VAR=VALUE ...]

Reads [Service]'s Environment= lines (several assignments per line, each
optionally double-quoted, as systemd.exec(5)), applies the VAR=VALUE
overrides after them (as a `systemctl edit` drop-in would), and expands
ExecStart= as systemd.service(5) says: `${VAR}` becomes exactly one word
(even when empty or holding spaces), `$VAR` alone as a word is split at
whitespace into zero or more words; a leading '-', '@', ':', '+' or '!'
prefix is refused (the shipped unit uses none). Fails on a unit without
exactly one ExecStart= or with an undefined variable.
"""
import re
import shlex
import sys


def service_lines(path):
    section = None
    with open(path, encoding="utf-8") as f:
        for raw in f:
            line = raw.strip()
            if not line or line.startswith(("#", ";")):
                continue
            if line.startswith("["):
                section = line
                continue
            if section == "[Service]":
                key, _, value = line.partition("=")
                yield key.strip(), value.strip()


def expand(exec_start, env):
    if exec_start[:1] in "-@:+!":
        raise SystemExit("ExecStart prefix %r is not handled" % exec_start[0])
    argv = []
    for word in shlex.split(exec_start):
        whole = re.fullmatch(r"\$([A-Za-z_][A-Za-z0-9_]*)", word)
        if whole:
            argv.extend(lookup(env, whole.group(1)).split())
            continue
        argv.append(re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", lambda m: lookup(env, m.group(1)), word))
    return argv


def lookup(env, name):
    if name not in env:
        raise SystemExit("ExecStart uses undefined variable %s" % name)
    return env[name]


def main():
    env, starts = {}, []
    for key, value in service_lines(sys.argv[1]):
        if key == "Environment":
            for assignment in shlex.split(value):
                k, _, v = assignment.partition("=")
                env[k] = v
        elif key == "ExecStart":
            starts.append(value)
    for override in sys.argv[2:]:
        k, _, v = override.partition("=")
        env[k] = v
    if len(starts) != 1:
        raise SystemExit("want exactly one ExecStart=, found %d" % len(starts))
    sys.stdout.write("\0".join(expand(starts[0], env)))


if __name__ == "__main__":
    main()
