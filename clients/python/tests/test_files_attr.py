"""Attributes against a live cowkvd (issue 17): set_attr's fields, chmod,
chown and utime as their os.* namesakes, POSIX names on errors."""

from __future__ import annotations

import pytest

import cowkv
from cowkv.files import UTIME_NOW


def test_set_attr_fields(sv: cowkv.Subvolume) -> None:
    fs = sv.files
    made = fs.create("/a")
    same = fs.set_attr("/a")
    assert same.ctime_ns == made.ctime_ns and same.mode == 0o644
    st = fs.set_attr("/a", mode=0o600, uid=1000, gid=100, atime_ns=5, mtime_ns=-7)
    assert (st.mode, st.uid, st.gid, st.atime_ns, st.mtime_ns) == (0o600, 1000, 100, 5, -7)
    assert st.ctime_ns >= made.ctime_ns
    st = fs.set_attr(ino=made.ino, mtime_ns=UTIME_NOW)
    assert st.mtime_ns >= made.ctime_ns and st.atime_ns == 5
    st = fs.set_attr("/a", size=1000)
    assert st.size == 1000 and fs.read_bytes("/a") == bytes(1000)


def test_chmod_chown_utime(sv: cowkv.Subvolume) -> None:
    fs = sv.files
    fs.mkdir("/d")
    assert fs.chmod("/d", 0o700).mode == 0o700
    fs.create("/f", 0o6755)
    st = fs.chown("/f", 7, -1)
    assert (st.uid, st.gid) == (7, 0)
    assert st.mode == 0o755, "chown clears set-user-ID and set-group-ID"
    st = fs.chown("/f", -1, 9)
    assert (st.uid, st.gid) == (7, 9)
    st = fs.utime("/f", ns=(1, 2))
    assert (st.atime_ns, st.mtime_ns) == (1, 2)
    st = fs.utime("/f")
    assert st.atime_ns > 2 and st.mtime_ns > 2
    assert fs.stat("/f").mtime_ns == st.mtime_ns


def test_set_attr_errors(sv: cowkv.Subvolume) -> None:
    fs = sv.files
    fs.create("/e")
    with pytest.raises(cowkv.InvalidArgument) as e:
        fs.chmod("/e", 0o10000)
    assert e.value.errno_name == "EINVAL"
    with pytest.raises(cowkv.NotFound) as n:
        fs.chmod("/none", 0o600)
    assert n.value.errno_name == "ENOENT"
    with pytest.raises(cowkv.FailedPrecondition) as d:
        fs.set_attr("/", size=0)
    assert d.value.errno_name == "EISDIR"
    with pytest.raises(cowkv.InvalidArgument) as big:
        fs.set_attr("/e", size=1 << 60)
    assert big.value.errno_name == "EFBIG"


def test_xattrs(sv: cowkv.Subvolume) -> None:
    fs = sv.files
    fs.create("/x")
    assert fs.list_xattrs("/x") == []
    fs.set_xattr("/x", "user.b", b"\x00\xff")
    fs.set_xattr("/x", "user.a", b"", cowkv.XATTR_CREATE)
    assert fs.list_xattrs("/x") == ["user.a", "user.b"]
    assert fs.get_xattr("/x", "user.b") == b"\x00\xff"
    assert fs.get_xattr("/x", "user.a") == b""
    with pytest.raises(cowkv.AlreadyExists) as e:
        fs.set_xattr("/x", "user.a", b"1", cowkv.XATTR_CREATE)
    assert e.value.errno_name == "EEXIST"
    with pytest.raises(cowkv.NotFound) as n:
        fs.set_xattr("/x", "user.c", b"1", cowkv.XATTR_REPLACE)
    assert n.value.errno_name == "ENODATA"
    fs.set_xattr("/x", "user.a", b"2", cowkv.XATTR_REPLACE)
    assert fs.get_xattr(ino=fs.stat("/x").ino, path="", name="user.a") == b"2"
    fs.remove_xattr("/x", "user.b")
    with pytest.raises(cowkv.NotFound) as gone:
        fs.get_xattr("/x", "user.b")
    assert gone.value.errno_name == "ENODATA"
    with pytest.raises(cowkv.InvalidArgument) as long_name:
        fs.set_xattr("/x", "n" * 256, b"")
    assert long_name.value.errno_name == "ENAMETOOLONG"
    with pytest.raises(cowkv.InvalidArgument) as big:
        fs.set_xattr("/x", "user.big", b"v" * 4097)
    assert big.value.errno_name == "ERANGE"


def test_fsync_range(sv: cowkv.Subvolume) -> None:
    fs = sv.files
    fs.write_bytes("/r", b"x" * 10000)
    fs.fsync("/r", offset=4096, length=4096)
    fs.fsync("/r", datasync=True, offset=8192)
    with pytest.raises(cowkv.InvalidArgument) as e:
        fs.fsync("/r", offset=(1 << 63) - 1, length=2)
    assert e.value.errno_name == "EINVAL"
