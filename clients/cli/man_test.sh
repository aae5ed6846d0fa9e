#!/bin/bash
# Goal: `cowkv man` pages cover the whole command tree and render cleanly.
# Every command and subcommand (as the completion script, generated from
# the same CLI11 tree, lists them) appears in its page, every long option
# in the page of its command, every cowkvd flag in cowkvd(8); groff (and
# man -l, when man-db is installed) renders each page without a warning.
if [[ "$2" == /* ]]; then COWKVD="$2"; else COWKVD="$PWD/$2"; fi
source "$(dirname "$0")/test_lib.sh" "$1"
# The page text with roff's minus signs as plain hyphens.
plain() { sed 's/\\-/-/g' "$1"; }

case_ "man --dir writes cowkv(1), one page per command and cowkvd(8)"
run man --dir "$WORK/new/man" --cowkvd "$COWKVD"  # creates missing parents
expect_rc 0
[[ -s "$WORK/new/man/man1/cowkv.1" ]] || fail "man --dir did not create DIR's parents"
run man --dir "$WORK/man" --cowkvd "$COWKVD"
expect_rc 0
expect_no_err
expect_out "^$WORK/man/man1/cowkv.1$"
expect_out "^$WORK/man/man8/cowkvd.8$"
run --help
commands=$(sed -nE '/^Subcommands:/,$ s/^  ([a-z-]+) .*/\1/p' <<<"$OUT")
[[ -n "$commands" ]] || fail "no commands in --help"
for c in $commands; do
  [[ -s "$WORK/man/man1/cowkv-$c.1" ]] || fail "no page cowkv-$c.1"
  plain "$WORK/man/man1/cowkv.1" | grep -qF "\\fBcowkv-$c\\fR(1)" || fail "cowkv(1) does not name cowkv-$c(1)"
done

case_ "every command path and every long option appears in its page"
run completion bash
script="$OUT"
# "kv:get" for every command under a group (from the completion's case lines).
paths=$(sed -nE 's/^ +"([a-z -]*):([a-z-]+)"\) ;&$/\1:\2/p' <<<"$script")
[[ $(wc -l <<<"$paths") -gt 40 ]] || fail "too few command paths: $paths"
while IFS=: read -r parent cmd; do
  full="${parent:+$parent }$cmd"
  top="${full%% *}"
  page="$WORK/man/man1/cowkv-$top.1"
  [[ -z "$parent" ]] && continue  # a top-level command: its page, checked above
  plain "$page" | grep -q "cowkv $full" || fail "'cowkv $full' not in cowkv-$top.1"
done <<<"$paths"
# Options: the completion's "path") opts="..." lines.
while IFS=$'\t' read -r path opts; do
  top="${path%% *}"
  page="$WORK/man/man1/cowkv${top:+-$top}.1"
  for o in $opts; do
    [[ "$o" == --* ]] || continue
    [[ "$o" == --help ]] && continue
    # Its entry (names in bold), not only the synopsis.
    plain "$page" | grep -qF -- "\\fB$o\\fR" || fail "option $o of '$path' has no entry in $(basename "$page")"
  done
done < <(sed -nE 's/^ +"([a-z -]*)"\) opts="([^"]*)" ;;$/\1\t\2/p' <<<"$script")

case_ "every cowkvd flag appears in cowkvd(8)"
flags=$("$COWKVD" --help | grep -oE '^  (-[a-z],)?--[a-z-]+' | sed -E 's/^ +(-[a-z],)?//')
[[ $(wc -l <<<"$flags") -gt 20 ]] || fail "too few cowkvd flags: $flags"
for f in $flags; do
  [[ "$f" == --help ]] && continue
  plain "$WORK/man/man8/cowkvd.8" | grep -q -- "^\\\\fB$f\\\\fR" || fail "cowkvd flag $f not in cowkvd(8)"
done

case_ "groff and man -l render every page without a warning"
for page in "$WORK"/man/man1/*.1 "$WORK"/man/man8/*.8; do
  warnings=$(LC_ALL=C.UTF-8 groff -man -Tutf8 -ww -z "$page" 2>&1)
  [[ -z "$warnings" ]] || fail "groff warns on $(basename "$page"): $warnings"
  if command -v man >/dev/null; then
    warnings=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null)
    [[ -z "$warnings" ]] || fail "man -l warns on $(basename "$page"): $warnings"
  fi
done

case_ "man PAGE prints one page on stdout; an unknown page is a usage error"
run man kv
expect_rc 0
[[ "$OUT" == "$(cat "$WORK/man/man1/cowkv-kv.1")" ]] || fail "man kv differs from cowkv-kv.1"
run man --cowkvd "$COWKVD" cowkvd
expect_rc 0
expect_out '^\.TH COWKVD 8 '
run man nope
expect_rc 2
expect_one_err_line
expect_err "^cowkv: man: no page 'nope'"

pass
