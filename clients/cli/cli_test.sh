#!/bin/bash
# Goal: the global conventions of `cowkv` (STYLE.md point 22): --help and
# --version exit 0 on stdout; every usage error is exit 2 with exactly one
# stderr line "cowkv: <operation>: <reason>".
source "$(dirname "$0")/test_lib.sh" "$1"

case_ "--version"
run --version
expect_rc 0
[[ "$OUT" == "cowkv 0.1.0" ]] || fail "want 'cowkv 0.1.0'"
expect_no_err

case_ "--help lists the offline commands"
run --help
expect_rc 0
expect_out '^ +mkfs '
expect_out '^ +check '
expect_out '^ +dump-tree '
expect_no_err

case_ "subcommand --help"
run mkfs --help
expect_rc 0
expect_out '--nodesize'
expect_out '--force'
expect_no_err

case_ "no command"
run
expect_rc 2
expect_one_err_line
expect_err '^cowkv: usage: no command given'
[[ -z "$OUT" ]] || fail "stdout not empty"

case_ "unknown command"
run frobnicate /tmp/x
expect_rc 2
expect_one_err_line
expect_err "^cowkv: usage: unknown command 'frobnicate'"

case_ "unknown command that is not yet implemented (online commands)"
run subvolume list
expect_rc 2
expect_one_err_line

case_ "unknown global option"
run --bogus
expect_rc 2
expect_one_err_line
expect_err "unknown option '--bogus'"

case_ "unknown subcommand option (CLI11's extras error, 109)"
run check --bogus img
expect_rc 2
expect_one_err_line
expect_err '^cowkv: check: .*--bogus'

case_ "missing positional (CLI11's required error, 106)"
run dump-tree
expect_rc 2
expect_one_err_line
expect_err '^cowkv: dump-tree: PATH is required'

case_ "unconvertible option value (CLI11's conversion error)"
run dump-tree --tree abc img
expect_rc 2
expect_one_err_line
expect_err '^cowkv: dump-tree: .*--tree'

case_ "failed validator (CLI11's validation error, 105)"
run mkfs --size 1G --nodesize 3000 img
expect_rc 2
expect_one_err_line
expect_err '^cowkv: mkfs: --nodesize'

pass
