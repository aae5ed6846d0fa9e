#!/bin/bash
# Goal: `cowkv check` exits 0 with a summary on a fresh filesystem, and 1
# with the problem listed (and one stderr line) on a damaged one or on a
# device that holds no cowkv filesystem; --json follows btrfs-progs' shape.
source "$(dirname "$0")/test_lib.sh" "$1"

"$COWKV" mkfs --size 64M img >/dev/null || fail "mkfs"

case_ "clean filesystem"
run check img
expect_rc 0
expect_no_err
expect_out '^Checking filesystem on img$'
expect_out '^generation: +1$'
expect_out '^trees: +3$'
expect_out '^nodes: +[1-9][0-9]*$'
expect_out '^items: +[0-9]+$'
expect_out '^extents: +[1-9][0-9]*$'
expect_out '^used bytes: +[1-9][0-9]*$'
expect_out '^no problems found$'
expect_no_out 'ERROR'

case_ "clean filesystem, --json"
run check --json img
expect_rc 0
expect_no_err
expect_out '"__header": \{"version": "1"\}'
expect_out '"generation": 1,'
expect_out '"problems": \[\]'
expect_out '"ok": true'
if command -v python3 >/dev/null; then
  python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["problems"]==[] and d["trees"]==3' <<<"$OUT" ||
    fail "not valid JSON of the expected shape"
fi

case_ "a file of zeros"
truncate -s 64M zeros
run check zeros
expect_rc 1
expect_one_err_line
expect_err '^cowkv: check: zeros: no cowkv filesystem found'
[[ -z "$OUT" ]] || fail "stdout not empty"

case_ "a missing path"
run check absent
expect_rc 1
expect_one_err_line
expect_err '^cowkv: check: .*absent.*No such file'

case_ "a corrupted byte in the default tree's leaf"
cp img bad5
leaf="$("$COWKV" dump-tree --tree 5 bad5 | sed -nE 's/^  (leaf|node) ([0-9]+) .*/\2/p' | head -1)"
[[ -n "$leaf" ]] || fail "no node of tree 5 in dump-tree"
flip_byte bad5 $((leaf + 100))
run check bad5
expect_rc 1
expect_one_err_line
expect_err '^cowkv: check: bad5: found [1-9][0-9]* problems?$'
expect_out "^ERROR: .*$leaf.*checksum"
expect_out '^found [1-9][0-9]* problems?$'
expect_out '^generation: +1$'

case_ "the same, --json"
run check --json bad5
expect_rc 1
expect_one_err_line
expect_out '"ok": false'
expect_out "checksum"
if command -v python3 >/dev/null; then
  python3 -c 'import json,sys; d=json.load(sys.stdin); assert len(d["problems"])>0' <<<"$OUT" ||
    fail "not valid JSON with problems"
fi

case_ "a corrupted byte in the root tree's root (every superblock points at it)"
cp img bad1
root="$("$COWKV" dump-tree bad1 | sed -nE 's/^superblock .* root ([0-9]+) root_level.*/\1/p')"
[[ -n "$root" ]] || fail "no root in dump-tree's superblock line"
flip_byte bad1 $((root + 100))
run check bad1
expect_rc 1
expect_one_err_line
expect_err '^cowkv: check: bad1: found [1-9][0-9]* problems?$'
expect_out "^ERROR: .*root node.*$root"

case_ "the original is still clean"
run check img
expect_rc 0

pass
