#!/bin/bash
# Goal: `cowkv dump-tree` prints the superblock and every tree of a fresh
# filesystem, --tree selects one, and errors are one stderr line.
source "$(dirname "$0")/test_lib.sh" "$1"

"$COWKV" mkfs --size 64M img >/dev/null || fail "mkfs"

case_ "every tree"
run dump-tree img
expect_rc 0
expect_no_err
expect_out '^superblock bytenr 65536 generation 1 root [0-9]+ '
expect_out '^  fsid [0-9a-f]{32} nodesize 16384 sectorsize 4096 total_bytes 67108864 '
expect_out '^tree 1$'
expect_out '^tree 2$'
expect_out '^tree 5$'
expect_out '^  leaf [0-9]+ level 0 .* owner 1$'
expect_out 'item [0-9]+ \(5 ROOT_ITEM 0\) root [0-9]+'
expect_out 'EXTENT_ITEM .* flags TREE_BLOCK'

case_ "--tree 5 only"
run dump-tree --tree 5 img
expect_rc 0
expect_out '^superblock '
expect_out '^tree 5$'
expect_no_out '^tree [12]$'

case_ "-t 2 only"
run dump-tree -t 2 img
expect_rc 0
expect_out '^tree 2$'
expect_no_out '^tree [15]$'

case_ "an unknown tree id"
run dump-tree --tree 99 img
expect_rc 1
expect_one_err_line
expect_err '^cowkv: dump-tree: img: no tree with id 99$'

case_ "a file of zeros"
truncate -s 64M zeros
run dump-tree zeros
expect_rc 1
expect_one_err_line
expect_err '^cowkv: dump-tree: zeros: no valid cowkv superblock'

pass
