#!/bin/bash
# Goal: README.md's "A 2-minute tour" says every output is real; keep it so.
# Method: a fresh cowkvd on a temp device and a free loopback port; every
# "$ " command of the section's fenced blocks (parsed, not copied: the
# README stays the single source) runs in order in one bash session at the
# repository root, and its stdout+stderr must equal the README's lines but
# for the masks in tools/readme_tour.py (timestamps, subvolume GEN, fiemap
# physical offsets). The alias points at the CLI under test, the default
# address becomes the test server's ($COWKV_SERVER), the pip/venv line uses
# clients/python/venv.sh, and /tmp scratch files go to a temp directory.
#
#   bash tools/readme_tour_test.sh [COWKV [COWKVD]]
#
# Defaults: bazel-bin/clients/cli/cowkv and bazel-bin/server/cowkvd (or
# $COWKVD); $COWKV_README checks another copy of the README. Prints
# "readme tour: N commands matched", or the first mismatch and exits 1.
# tools/test.sh runs it after the CLI's e2e test.
set -u
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
COWKV_BIN="${1:-$ROOT/bazel-bin/clients/cli/cowkv}"
COWKVD="${2:-${COWKVD:-$ROOT/bazel-bin/server/cowkvd}}"
README="${COWKV_README:-$ROOT/README.md}"
[[ "$COWKV_BIN" == /* ]] || COWKV_BIN="$PWD/$COWKV_BIN"
[[ "$COWKVD" == /* ]] || COWKVD="$PWD/$COWKVD"
fail() { echo "readme tour: FAIL: $*"; exit 1; }
[[ -x "$COWKV_BIN" ]] || fail "cowkv binary not found at $COWKV_BIN"
[[ -x "$COWKVD" ]] || fail "cowkvd not found at $COWKVD"
[[ -f "$README" ]] || fail "no README at $README"

WORK="$(mktemp -d "${TEST_TMPDIR:-/tmp}/cowkv_readme.XXXXXX")"
PID=""
trap '[[ -n "$PID" ]] && kill -9 "$PID" 2>/dev/null; rm -rf "$WORK"' EXIT

# A cowkvd as clients/cli/e2e_test.sh starts one: port 0, read back the
# port it logs.
"$COWKVD" --device "$WORK/tour.img" --create-size 256M \
  --listen 127.0.0.1:0 --metrics-listen "" 2>"$WORK/cowkvd.log" &
PID=$!
port=""
for _ in $(seq 300); do
  port="$(grep -o '(port [0-9]*)' "$WORK/cowkvd.log" | grep -o '[0-9]*')"
  [[ -n "$port" ]] && break
  kill -0 "$PID" 2>/dev/null || break
  sleep 0.1
done
[[ -n "$port" ]] || fail "cowkvd did not start: $(cat "$WORK/cowkvd.log")"

mkdir "$WORK/tour"
python3 "$ROOT/tools/readme_tour.py" --readme "$README" --cli "$COWKV_BIN" \
  --addr "127.0.0.1:$port" --work "$WORK/tour"
rc=$?

# SIGINT must drain, commit and exit 0, as in the e2e test.
kill -INT "$PID"
wait "$PID"
srv=$?
PID=""
[[ "$srv" -eq 0 ]] || fail "cowkvd exited $srv on SIGINT: $(tail -n 5 "$WORK/cowkvd.log")"
exit "$rc"
