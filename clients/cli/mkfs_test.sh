#!/bin/bash
# Goal: `cowkv mkfs` creates sparse images of the asked size, formats
# existing files, validates its options, and never destroys an existing
# filesystem (cowkv or foreign) or resizes a file without --force.
source "$(dirname "$0")/test_lib.sh" "$1"

fsid_of() {  # the fsid dump-tree reads back from an image
  "$COWKV" dump-tree --tree 1 "$1" | sed -nE 's/^ +fsid ([0-9a-f]+) .*/\1/p'
}

case_ "create a sparse 1G image"
run mkfs --size 1G img
expect_rc 0
expect_no_err
[[ "$(file_size img)" -eq 1073741824 ]] || fail "size $(file_size img)"
[[ "$(allocated_bytes img)" -lt $((4 << 20)) ]] || fail "not sparse: $(allocated_bytes img) bytes allocated"
expect_out '^Path: +img \(new sparse file\)$'
expect_out '^Filesystem size: +1\.00GiB \(1073741824 bytes\)$'
expect_out '^Node size: +16384$'
expect_out '^Sector size: +4096$'
expect_out '^Filesystem ID: +[0-9a-f]{32}$'
fsid="$(sed -nE 's/^Filesystem ID: +//p' <<<"$OUT")"
[[ "$(fsid_of img)" == "$fsid" ]] || fail "summary fsid $fsid is not on the device"

case_ "size suffixes and --nodesize with a suffix"
run mkfs --size 512M --nodesize 4K img512
expect_rc 0
[[ "$(file_size img512)" -eq $((512 << 20)) ]] || fail "size $(file_size img512)"
expect_out '^Node size: +4096$'
"$COWKV" dump-tree img512 | grep -q ' nodesize 4096 ' || fail "nodesize not on disk"
run mkfs --size 64mib img64
expect_rc 0
[[ "$(file_size img64)" -eq $((64 << 20)) ]] || fail "size $(file_size img64)"

case_ "refuse an existing cowkv filesystem without --force"
run mkfs img
expect_rc 1
expect_one_err_line
expect_err '^cowkv: mkfs: img: .*cowkv filesystem.*--force'
[[ -z "$OUT" ]] || fail "stdout not empty"
[[ "$(fsid_of img)" == "$fsid" ]] || fail "refused mkfs changed the image"

case_ "--force reformats it"
run mkfs --force img
expect_rc 0
expect_no_err
[[ "$(fsid_of img)" != "$fsid" ]] || fail "fsid unchanged after --force"
[[ "$(file_size img)" -eq 1073741824 ]] || fail "size changed"
"$COWKV" check img >/dev/null || fail "check after --force mkfs"

case_ "refuse an ext4 magic at byte 1080"
truncate -s 64M ext
printf '\x53\xef' | dd of=ext bs=1 seek=1080 conv=notrunc status=none
run mkfs ext
expect_rc 1
expect_one_err_line
expect_err '^cowkv: mkfs: ext: .*ext[234] filesystem \(signature at byte 1080\).*--force'
"$COWKV" check ext >/dev/null 2>&1 && fail "refused mkfs formatted the file"
run mkfs -f ext
expect_rc 0
"$COWKV" check ext >/dev/null || fail "check after forced mkfs over ext"

case_ "refuse an xfs magic at byte 0"
truncate -s 64M xfs
printf 'XFSB' | dd of=xfs bs=1 conv=notrunc status=none
run mkfs xfs
expect_rc 1
expect_one_err_line
expect_err 'xfs filesystem'

case_ "format an existing blank file (no --size)"
truncate -s 32M blank
run mkfs blank
expect_rc 0
expect_out '^Path: +blank$'
expect_out '\(33554432 bytes\)'

case_ "--size differing from an existing file needs --force, which resizes"
truncate -s 32M resize
run mkfs --size 48M resize
expect_rc 1
expect_one_err_line
expect_err 'resize.*--force|--force.*resize'
[[ "$(file_size resize)" -eq $((32 << 20)) ]] || fail "resized without --force"
run mkfs --size 48M --force resize
expect_rc 0
[[ "$(file_size resize)" -eq $((48 << 20)) ]] || fail "size $(file_size resize)"
"$COWKV" check resize >/dev/null || fail "check after resize"

case_ "bad nodesize: one line, nothing created"
for n in 5000 2048 131072 abc; do
  run mkfs --size 64M --nodesize "$n" bad
  expect_rc 2
  expect_one_err_line
  expect_err "^cowkv: mkfs: --nodesize: .*(power of two from 4096 to 65536|not a size)"
  [[ ! -e bad ]] || fail "--nodesize $n created the file"
done

case_ "bad --size"
for s in 12Q 1.5G -1 0 99999999999999999999; do
  run mkfs --size "$s" bad
  expect_rc 2
  expect_one_err_line
  expect_err '^cowkv: mkfs: --size'
  [[ ! -e bad ]] || fail "--size $s created the file"
done

case_ "absent path without --size"
run mkfs absent
expect_rc 1
expect_one_err_line
expect_err '^cowkv: mkfs: absent: does not exist; give --size'
[[ ! -e absent ]] || fail "created without --size"

case_ "below the engine's minimum size: error, no file left behind"
run mkfs --size 1M tiny
expect_rc 1
expect_one_err_line
expect_err '^cowkv: mkfs: tiny: .*minimum'
[[ ! -e tiny ]] || fail "failed mkfs left the file behind"

case_ "a directory"
mkdir dir
run mkfs dir
expect_rc 1
expect_one_err_line

pass
