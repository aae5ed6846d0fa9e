#!/bin/bash
# Shared helpers for the cowkv CLI tests. Source it with the binary's
# runfiles-relative path as $1 (the sh_test passes $(location :cowkv)).
#
#   run ARGS...          runs cowkv; sets RC, OUT and ERR (file contents)
#   expect_rc N          RC must be N
#   expect_out RE        stdout must match the extended regex RE
#   expect_no_out RE     stdout must not match RE
#   expect_err RE        stderr must match RE
#   expect_one_err_line  stderr is exactly one line "cowkv: <op>: <reason>"
#   expect_no_err        stderr is empty
#   flip_byte FILE OFF   inverts one byte of FILE in place
set -u

if [[ "$1" == /* ]]; then COWKV="$1"; else COWKV="$PWD/$1"; fi
[[ -x "$COWKV" ]] || { echo "FAIL: cowkv binary not found at $COWKV"; exit 1; }
WORK="$(mktemp -d "${TEST_TMPDIR:-/tmp}/cowkv_cli.XXXXXX")"
cd "$WORK" || exit 1
CASE="(setup)"

RC=0
OUT=""
ERR=""

case_() { CASE="$*"; echo "--- $CASE"; }

fail() {
  echo "FAIL [$CASE]: $*"
  echo "  command: cowkv ${LAST_ARGS[*]:-}"
  echo "  exit:    $RC"
  echo "  stdout:"; sed 's/^/    | /' <<<"$OUT"
  echo "  stderr:"; sed 's/^/    | /' <<<"$ERR"
  exit 1
}

run() {
  LAST_ARGS=("$@")
  "$COWKV" "$@" >"$WORK/.out" 2>"$WORK/.err"
  RC=$?
  OUT="$(cat "$WORK/.out")"
  ERR="$(cat "$WORK/.err")"
}

expect_rc() { [[ "$RC" -eq "$1" ]] || fail "want exit $1, got $RC"; }
expect_out() { grep -Eq -- "$1" <<<"$OUT" || fail "stdout lacks /$1/"; }
expect_no_out() { ! grep -Eq -- "$1" <<<"$OUT" || fail "stdout has /$1/"; }
expect_err() { grep -Eq -- "$1" <<<"$ERR" || fail "stderr lacks /$1/"; }
expect_no_err() { [[ -z "$ERR" ]] || fail "stderr not empty"; }

expect_one_err_line() {
  local lines
  lines="$(wc -l <"$WORK/.err")"
  [[ "$lines" -eq 1 ]] || fail "want exactly one stderr line, got $lines"
  grep -Eq '^cowkv: [a-z-]+( [a-z-]+)?: .+' <<<"$ERR" || fail "stderr is not 'cowkv: <op>: <reason>'"
}

flip_byte() {
  local file="$1" off="$2" old
  old="$(od -An -tu1 -j "$off" -N1 "$file" | tr -d ' ')"
  printf "\\$(printf '%03o' $((255 - old)))" |
    dd of="$file" bs=1 seek="$off" conv=notrunc status=none
}

# The size in bytes of a file, and the bytes it really occupies on disk.
file_size() { stat -c %s "$1"; }
allocated_bytes() { echo $(($(stat -c %b "$1") * $(stat -c %B "$1"))); }

pass() { echo "PASS"; rm -rf "$WORK"; exit 0; }
