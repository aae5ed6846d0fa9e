#!/bin/bash
# `cowkv mount`: POSIX behaviour through the kernel, tools nobody here wrote
# (fs_mark, dbench, stress-ng, postmark), the seed commits' own scripts,
# the fsx-style exerciser against its model, and `check` clean after each
# unmount. Short by default; MOUNT_TEST_SCALE=full (the :mount_test_full
# target, manual) runs them at the sizes the seeds use.
#
# Needs /dev/fuse and fusermount3 (tools/setup.sh installs fuse3 and the
# tools); it unmounts with fusermount3 -u on every exit path.
source "$(dirname "$0")/test_lib.sh" "$1"
HERE="$(cd "$(dirname "$0")" && pwd)"
SCALE="${MOUNT_TEST_SCALE:-short}"

[[ -c /dev/fuse ]] || { echo "FAIL: /dev/fuse is missing"; exit 1; }
for tool in fusermount3 fs_mark dbench stress-ng postmark xfs_io setfattr getfattr python3; do
  command -v "$tool" >/dev/null || { echo "FAIL: $tool is missing (bash tools/setup.sh)"; exit 1; }
done

# fs_mark takes directory paths under 40 bytes: a short mount point.
MNT="$(mktemp -d /tmp/cowkv-mnt.XXXXXX)"
IMG="$WORK/img"
MOUNT_PID=""

unmount() {
  cd "$WORK" || return 1  # a shell inside the mount keeps it busy
  if mountpoint -q "$MNT"; then fusermount3 -u "$MNT" || fusermount3 -uz "$MNT"; fi
  if [[ -n "$MOUNT_PID" ]]; then
    # The daemon commits and exits once unmounted; a stuck one is killed.
    local i
    for i in $(seq 1 600); do
      kill -0 "$MOUNT_PID" 2>/dev/null || break
      sleep 0.1
    done
    kill -9 "$MOUNT_PID" 2>/dev/null
    wait "$MOUNT_PID"
    local rc=$?
    MOUNT_PID=""
    return $rc
  fi
}
trap 'unmount >/dev/null 2>&1; rmdir "$MNT"' EXIT

# Mounts in the foreground as a child of this script, so that unmount can
# wait for the daemon to commit and let go of the device.
mount_fg() {
  "$COWKV" mount -f --device "$IMG" "$@" "$MNT" 2>"$WORK/mount.err" &
  MOUNT_PID=$!
  for _ in $(seq 1 100); do
    mountpoint -q "$MNT" && return 0
    kill -0 "$MOUNT_PID" 2>/dev/null || break
    sleep 0.05
  done
  cat "$WORK/mount.err"
  fail "the mount did not come up"
}

check_clean() {
  unmount || fail "the mount daemon exited with $?: $(cat "$WORK/mount.err")"
  run check "$IMG"
  expect_rc 0
  expect_out "no problems found"
}

case_ "mkfs and mount errors"
run mkfs --size 2G "$IMG"
expect_rc 0
run mount --device "$IMG" "$WORK/no-such-dir"
expect_rc 1
expect_one_err_line
expect_err "cannot mount"
run mount --device "$WORK/nothing" "$MNT"
[[ $RC -ne 0 ]] || fail "mounting a missing device succeeded"
run mount --device "$IMG" nosuchsubvol "$MNT"
expect_rc 1
expect_err "nosuchsubvol"

case_ "a mounted device is locked against every other tool"
mount_fg
run mount --device "$IMG" "$WORK"
expect_rc 6
run check "$IMG"
expect_rc 6
run mkfs --force --size 2G "$IMG"
expect_rc 6
mountpoint -q "$MNT" || fail "the mount went away"

case_ "POSIX namespace and data through the kernel"
cd "$MNT" || fail "cd"
mkdir -p a/b || fail "mkdir"
echo hello >a/b/f || fail "create+write"
[[ "$(cat a/b/f)" == hello ]] || fail "read back"
mv a/b/f a/g || fail "rename"
ln a/g h || fail "link"
[[ "$(stat -c %h a/g)" == 2 ]] || fail "nlink after link"
[[ "$(stat -c %i a/g)" == "$(stat -c %i h)" ]] || fail "hard link inode numbers"
ln -s a/g s || fail "symlink"
[[ "$(readlink s)" == a/g && "$(cat s)" == hello ]] || fail "readlink"
rm h || fail "unlink"
[[ "$(stat -c %h a/g)" == 1 ]] || fail "nlink after unlink"
# Past one INODE_REF item's worth of names in one directory (extended refs).
mkdir many && : >many/f || fail "setup links"
python3 - many <<'EOF' || fail "2000 links in one directory"
import os, sys
d = sys.argv[1]
for i in range(2000):
    os.link(f"{d}/f", f"{d}/link-with-a-longish-name-{i:05d}")
assert os.stat(f"{d}/f").st_nlink == 2001
for i in range(0, 2000, 2):
    os.unlink(f"{d}/link-with-a-longish-name-{i:05d}")
assert os.stat(f"{d}/f").st_nlink == 1001 and len(os.listdir(d)) == 1001
EOF
rm -r many || fail "rm -r of the links"
! rmdir a 2>/dev/null || fail "rmdir of a non-empty directory"
! mkfifo fifo 2>/dev/null || fail "a fifo was created"
mkdir x y && : >x/1 && : >y/2 || fail "setup exchange"
python3 - <<'EOF' || fail "renameat2"
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
AT = -100
def r2(a, b, flags):
    if libc.renameat2(AT, a.encode(), AT, b.encode(), flags) != 0:
        return ctypes.get_errno()
    return 0
assert r2("x", "y", 1) == 17, "RENAME_NOREPLACE over an existing name"
assert r2("x", "y", 2) == 0, "RENAME_EXCHANGE"
assert os.listdir("x") == ["2"] and os.listdir("y") == ["1"], "exchanged"
EOF
dd if=/dev/urandom of=big bs=1M count=8 status=none || fail "dd"
SUM="$(md5sum <big)"
truncate -s 32M big || fail "truncate"
[[ "$(xfs_io -c 'seek -h 0' big | tail -1 | awk '{print $2}')" == 8388608 ]] || fail "SEEK_HOLE"
[[ "$(xfs_io -c 'seek -d 9M' big | tail -1 | awk '{print $2}')" == EOF ]] || fail "SEEK_DATA past data"
xfs_io -c fsync big >/dev/null || fail "fsync"
xfs_io -c fsync a >/dev/null || fail "fsync of a directory"
xfs_io -f -c "copy_range -s 0 -d 0 -l 4194304 big" copy >/dev/null || fail "copy_range"
[[ "$(head -c 4194304 big | md5sum)" == "$(md5sum <copy)" ]] || fail "copy_range contents"
setfattr -n user.k -v v1 a/g || fail "setfattr"
[[ "$(getfattr --only-values -n user.k a/g)" == v1 ]] || fail "getfattr"
setfattr -x user.k a/g || fail "removexattr"
! getfattr -n user.k a/g 2>/dev/null || fail "xattr still there"
chmod 0640 a/g && [[ "$(stat -c %a a/g)" == 640 ]] || fail "chmod"
chown 1234:5678 a/g && [[ "$(stat -c %u:%g a/g)" == 1234:5678 ]] || fail "chown"
touch -m -d @1000000000 a/g && [[ "$(stat -c %Y a/g)" == 1000000000 ]] || fail "utimes"
touch -a a/g || fail "touch -a (UTIME_NOW)"
python3 - a/g <<'EOF2' || fail "setxattr flags, O_TMPFILE refusal, unlinked open file"
import errno, os, sys
p = sys.argv[1]
os.setxattr(p, "user.c", b"1", os.XATTR_CREATE)
try:
    os.setxattr(p, "user.c", b"2", os.XATTR_CREATE)
    raise SystemExit("XATTR_CREATE over an existing name")
except OSError as e:
    assert e.errno == errno.EEXIST, e
try:
    os.setxattr(p, "user.none", b"2", os.XATTR_REPLACE)
    raise SystemExit("XATTR_REPLACE of an absent name")
except OSError as e:
    assert e.errno == errno.ENODATA, e
# An open file whose last name goes lives on (an orphan) until closed.
fd = os.open("orphan", os.O_CREAT | os.O_RDWR, 0o644)
os.write(fd, b"still here")
os.unlink("orphan")
os.fsync(fd)
assert os.pread(fd, 10, 0) == b"still here"
os.close(fd)
EOF2
df -B1 . | tail -1 | awk '{exit !($2 > 1900000000)}' || fail "statfs size"
INO_G="$(stat -c %i a/g)"
cd "$WORK" || fail "cd"
check_clean

case_ "remount: names, data and inode numbers as they were"
mount_fg
[[ "$(stat -c %i "$MNT/a/g")" == "$INO_G" ]] || fail "inode number changed across a remount"
[[ "$(head -c 8388608 "$MNT/big" | md5sum)" == "$SUM" ]] || fail "data changed across a remount"
[[ "$(stat -c %s "$MNT/big")" == 33554432 ]] || fail "size changed across a remount"

if [[ "$SCALE" == full ]]; then
  FSX_STEPS=20000; FSM_N=20000; DBENCH_S=60; SNG_S=30; PM_N=5000; PM_T=20000
  S000=100000; S003=100000; S004=10000
else
  FSX_STEPS=600; FSM_N=300; DBENCH_S=3; SNG_S=2; PM_N=200; PM_T=500
  S000=500; S003=500; S004=200
fi

case_ "fsx-style exerciser against its model (and a planted bug it must catch)"
python3 "$HERE/mount_fsx.py" --dir "$MNT/fsx" --steps "$FSX_STEPS" --seed 11 || fail "mount_fsx"
! python3 "$HERE/mount_fsx.py" --dir "$MNT/fsx-bug" --steps 300 --seed 11 --planted-bug \
  2>/dev/null || fail "mount_fsx missed its planted bug"

case_ "fs_mark -S 0 and -S 1"
fs_mark -S 0 -n "$FSM_N" -s 4096 -t 2 -d "$MNT/fsm0a" -d "$MNT/fsm0b" >"$WORK/fsm0" 2>&1 ||
  { cat "$WORK/fsm0"; fail "fs_mark -S 0"; }
fs_mark -S 1 -n $((FSM_N / 10 + 10)) -s 4096 -d "$MNT/fsm1" >"$WORK/fsm1" 2>&1 ||
  { cat "$WORK/fsm1"; fail "fs_mark -S 1"; }

case_ "dbench (its default client load)"
dbench -D "$MNT" -t "$DBENCH_S" 2 >"$WORK/dbench" 2>&1 || { tail -30 "$WORK/dbench"; fail "dbench"; }
grep -q "Throughput" "$WORK/dbench" || fail "dbench reported no throughput"

case_ "stress-ng filesystem stressors"
mkdir -p "$MNT/sng"
stress-ng --temp-path "$MNT/sng" --dir 1 --link 1 --rename 1 --fallocate 1 --xattr 1 \
  --seek 1 --dentry 1 -t "$SNG_S" >"$WORK/sng" 2>&1 || { tail -30 "$WORK/sng"; fail "stress-ng"; }

case_ "postmark"
mkdir -p "$MNT/pm"
printf "set location %s\nset number %d\nset transactions %d\nset size 500 20000\nrun\nquit\n" \
  "$MNT/pm" "$PM_N" "$PM_T" >"$WORK/pm.cfg"
postmark "$WORK/pm.cfg" >"$WORK/pm" 2>&1 || { tail -20 "$WORK/pm"; fail "postmark"; }

case_ "the seed commits' scripts, unchanged"
mkdir -p "$MNT/s000"
bash "$HERE/mount_workloads/seed000_dir_fsync.sh" "$MNT/s000" "$S000" 100 >"$WORK/s000" 2>&1 ||
  { tail "$WORK/s000"; fail "seed 000"; }
[[ "$(ls "$MNT/s000/testdir" | wc -l)" == "$S000" ]] || fail "seed 000 file count"
mkdir -p "$MNT/s003"
bash "$HERE/mount_workloads/seed003_fs_mark.sh" "$MNT/s003" "$S003" 2 1 >"$WORK/s003" 2>&1 ||
  { tail "$WORK/s003"; fail "seed 003"; }
mkdir -p "$MNT/s004"
bash "$HERE/mount_workloads/seed004_renames.sh" "$MNT/s004" "$S004" >"$WORK/s004" 2>&1 ||
  { tail "$WORK/s004"; fail "seed 004"; }
[[ "$(ls "$MNT/s004/testdir" | grep -c RPMDELETE)" == "$S004" ]] || fail "seed 004 renames"
check_clean

echo "PASS"
