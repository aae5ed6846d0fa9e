#!/bin/bash
# Goal: the global conventions of `cowkv` (STYLE.md point 22): --help and
# --version exit 0 on stdout; every usage error is exit 2 with exactly one
# stderr line "cowkv: <operation>: <reason>"; an online command with no
# server to talk to is exit 10 (unavailable) with one line naming the
# address. (e2e_test.sh runs every online command against a live cowkvd.)
source "$(dirname "$0")/test_lib.sh" "$1"

case_ "--version"
run --version
expect_rc 0
[[ "$OUT" =~ ^cowkv\ 0\.1\.0\ \(cowkv\.v1,\ commit\ [0-9a-z-]+,\ (opt|checked)\)$ ]] || fail "want 'cowkv 0.1.0 (cowkv.v1, commit C, T)'"
expect_no_err

case_ "--help lists the offline and the online commands and global options"
run --help
expect_rc 0
for c in mkfs check dump-tree subvolume kv fs stats sync; do
  expect_out "^ +$c "
done
expect_out '--server'
expect_out '--token-file'
expect_out '--timeout'
expect_out '--json'
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

case_ "completion: bash completes commands, nested commands and options"
run completion bash
expect_rc 0
[[ "$OUT" == *"complete -F _cowkv cowkv"* ]] || fail "no complete line"
got=$(bash -c 'source <(printf "%s\n" "$1"); COMP_WORDS=(cowkv kv g); COMP_CWORD=2; _cowkv; echo "${COMPREPLY[*]}";
  COMP_WORDS=(cowkv --timeout 5 subvolume s); COMP_CWORD=4; _cowkv; echo "${COMPREPLY[*]}";
  COMP_WORDS=(cowkv kv get --re); COMP_CWORD=3; _cowkv; echo "${COMPREPLY[*]}"' _ "$OUT")
[[ "$got" == $'get\nshow snapshot sync\n--rev' ]] || fail "bash completion gave: $got"
run completion zsh
expect_rc 0
[[ "$OUT" == *"bashcompinit"* ]] || fail "zsh script without bashcompinit"
run completion fish
expect_rc 0
[[ "$OUT" == *"complete -c cowkv -n '__fish_seen_subcommand_from kv' -a get"* ]] || fail "fish script: $OUT"
run completion tcsh
expect_rc 2

case_ "online command with no server listening: unavailable (10)"
run --server 127.0.0.1:1 --timeout 5 subvolume list
expect_rc 10
expect_one_err_line
expect_err '^cowkv: subvolume list: cowkvd at 127.0.0.1:1 is unavailable'

case_ "online group without its subcommand"
run kv
expect_rc 2
expect_one_err_line
expect_err "^cowkv: kv: a command is required \(kv commands: get, put, del, range, txn, compact, watch; see 'cowkv kv --help'\)"

case_ "unknown command in a group names the group's commands"
run kv frob
expect_rc 2
expect_one_err_line
expect_err "^cowkv: kv: unknown command 'frob' \(kv commands: get, put, del, range"
run lease nope 5
expect_rc 2
expect_one_err_line
expect_err "^cowkv: lease: unknown command 'nope' \(lease commands: grant, revoke"
run subvolume --bogus
expect_rc 2
expect_one_err_line
expect_err "^cowkv: subvolume: unknown option '--bogus' \(subvolume commands: create, list"

case_ "online command with a missing argument"
run kv get --subvolume data
expect_rc 2
expect_one_err_line
expect_err '^cowkv: kv get: missing KEY \(usage: cowkv kv get \[-s SUBVOLUME\] \[--rev REV\] KEY\)$'

case_ "invalid subvolume name is refused before any call (3)"
run --server 127.0.0.1:1 subvolume create a/b
expect_rc 3
expect_one_err_line
expect_err "contains '/'"

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
expect_err '^cowkv: dump-tree: missing PATH \(usage: cowkv dump-tree \[-t ID\] PATH\)$'

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

case_ "flag errors say what was wrong and what the command takes (exit 2)"
# Each class of mistake: the sentence, then the command's usage line.
run kv put -s
expect_rc 2
expect_one_err_line
expect_err "^cowkv: kv put: -s needs a value \(SUBVOLUME\) \(usage: cowkv kv put \[-s SUBVOLUME\] .*KEY \[VALUE\]\)$"
run kv put
expect_rc 2
expect_one_err_line
expect_err "^cowkv: kv put: missing KEY \(usage: cowkv kv put "
run fs put local
expect_rc 2
expect_one_err_line
expect_err "^cowkv: fs put: missing REMOTE \(usage: cowkv fs put \[-s SUBVOLUME\] \[--mode OCTAL\] LOCAL REMOTE\)$"
run kv get k extra
expect_rc 2
expect_one_err_line
expect_err "^cowkv: kv get: unexpected argument 'extra' \(usage: cowkv kv get "
run stats now
expect_rc 2
expect_one_err_line
expect_err "^cowkv: stats: unexpected argument 'now' \(it takes no arguments\) \(usage: cowkv stats\)$"
run kv range --limt 5
expect_rc 2
expect_one_err_line
expect_err "^cowkv: kv range: unknown option '--limt'; did you mean '--limit'\? \(usage: cowkv kv range "
run kv get -x k
expect_rc 2
expect_one_err_line
expect_err "^cowkv: kv get: unknown option '-x' \(an argument starting with '-' goes after '--'\)"
run kv range --limit ten
expect_rc 2
expect_one_err_line
expect_err "^cowkv: kv range: --limit takes a whole number of 0 or more, not 'ten' \(usage: "
run --timeout soon stats
expect_rc 2
expect_one_err_line
expect_err "^cowkv: stats: --timeout takes a number of 0 or more, not 'soon' \(usage: cowkv stats\)$"
run bench --clients 0
expect_rc 2
expect_one_err_line
expect_err "^cowkv: bench: --clients takes a number in \[1 - [0-9]+\], not '0' \(usage: "
run fs setfattr --create /x
expect_rc 2
expect_one_err_line
expect_err "^cowkv: fs setfattr: --create requires --name \(usage: cowkv fs setfattr "
run mkfs --nodesize
expect_rc 2
expect_one_err_line
expect_err "^cowkv: mkfs: --nodesize needs a value \(SIZE\) \(usage: cowkv mkfs \[--size SIZE\] \[-n SIZE\] \[-f\] PATH\)$"

case_ "progress: never on a non-terminal (stderr of an offline check stays empty)"
COWKV_PROGRESS_DELAY=0 run mkfs --size 32M img
expect_rc 0
COWKV_PROGRESS_DELAY=0 run check img
expect_rc 0
expect_no_err
expect_out '^no problems found$'

case_ "progress on a terminal: drawn on stderr, erased at the end; none with --quiet or --json"
if command -v script >/dev/null; then
  tty_run() { COWKV_PROGRESS_DELAY=0 script -qec "$COWKV $* >/dev/null" /dev/null | tr -d '\r'; }
  got=$(tty_run check img)
  [[ "$got" =~ check:\ [0-9.]+\ (B|KiB|MiB)\ /\ [0-9.]+\ (KiB|MiB)\ \([0-9]+%\) ]] || fail "no progress frame on the tty: $got"
  [[ "$got" =~ \ +$ ]] || fail "the last frame is not erased: $got"
  got=$(tty_run --quiet check img)
  [[ -z "$got" ]] || fail "progress with --quiet: $got"
  got=$(tty_run check --json img)
  [[ -z "$got" ]] || fail "progress with --json: $got"
else
  echo "(script(1) not installed: terminal case skipped)"
fi

pass
