"""The file tree against a live cowkvd: file objects in every mode, streaming
of files larger than one message, names (mkdir, rename with flags, link,
symlink, unlink, rmdir), clone and fiemap, fallocate, and POSIX names on
errors."""

from __future__ import annotations

import io
import os

import pytest

import cowkv


def test_open_write_read_seek(sv: cowkv.Subvolume) -> None:
    fs = sv.files
    with fs.open("/f", "w") as f:
        assert f.write(b"hello ") == 6
        f.write(b"world")
        assert f.tell() == 11
        f.seek(0)
        f.write(b"J")
        f.fsync()
        assert f.stat().size == 11
    with fs.open("/f") as f:
        assert f.read(5) == b"Jello"
        assert f.tell() == 5
        assert f.seek(-5, io.SEEK_END) == 6
        assert f.read() == b"world"
        assert f.read() == b""
        f.seek(1)
        buf = bytearray(4)
        assert f.readinto(buf) == 4 and bytes(buf) == b"ello"
        with pytest.raises(io.UnsupportedOperation):
            f.write(b"x")
    assert f.closed
    with pytest.raises(ValueError):
        f.read()


def test_modes(sv: cowkv.Subvolume) -> None:
    fs = sv.files
    with fs.open("/m", "xb") as f:
        f.write(b"abc")
    with pytest.raises(cowkv.AlreadyExists):
        fs.open("/m", "x")
    with fs.open("/m", "a") as f:
        f.write(b"def")
        assert f.tell() == 6
    with fs.open("/m", "r+b") as f:
        f.seek(2)
        f.write(b"ZZ")
        f.seek(0)
        assert f.read() == b"abZZef"
    with fs.open("/m", "w+") as f:
        assert f.read() == b""
        f.write(b"new")
        f.seek(0)
        assert f.read() == b"new"
    with pytest.raises(cowkv.NotFound) as e:
        fs.open("/absent")
    assert e.value.errno_name == "ENOENT"
    for bad in ["rt", "rw", "q", "r++"]:
        with pytest.raises(ValueError):
            fs.open("/m", bad)


def test_truncate_and_holes(sv: cowkv.Subvolume) -> None:
    fs = sv.files
    with fs.open("/t", "w+") as f:
        f.write(b"0123456789")
        assert f.truncate(4) == 4
        f.seek(0, io.SEEK_END)
        assert f.tell() == 4
    st = fs.truncate("/t", 1 << 20)
    assert st.size == 1 << 20
    data = fs.read_bytes("/t")
    assert data[:4] == b"0123" and data[4:] == bytes((1 << 20) - 4)


def test_large_streams(sv: cowkv.Subvolume) -> None:
    fs = sv.files
    blob = os.urandom(5 * 1024 * 1024 + 123)  # more than one 1 MiB chunk each way
    assert fs.upload("/big", io.BytesIO(blob)) == len(blob)
    sink = io.BytesIO()
    assert fs.download("/big", sink) == len(blob)
    assert sink.getvalue() == blob
    assert fs.read_bytes("/big") == blob
    with fs.open("/big", "r+") as f:
        f.seek(1 << 20)
        f.write(b"x" * (5 << 20))  # past the 4 MiB write buffer: streamed early
        f.seek((1 << 20) - 1)
        assert f.read(3) == blob[(1 << 20) - 1:1 << 20] + b"xx"
    expected = blob[:1 << 20] + b"x" * (5 << 20)
    assert fs.stat("/big").size == len(expected)
    sink = io.BytesIO()
    fs.download("/big", sink, offset=(1 << 20) - 2, length=4)
    assert sink.getvalue() == expected[(1 << 20) - 2:(1 << 20) + 2]
    assert fs.read_bytes("/big") == expected


def test_file_object_follows_the_inode(sv: cowkv.Subvolume) -> None:
    fs = sv.files
    with fs.open("/before", "w") as f:
        f.write(b"one")
        f.flush()
        fs.rename("/before", "/after")
        f.write(b"two")
    assert fs.read_bytes("/after") == b"onetwo"
    assert fs.stat("/after").ino == f.ino


def test_directories(sv: cowkv.Subvolume) -> None:
    fs = sv.files
    st = fs.mkdir("/a/b/c", parents=True)
    assert st.is_dir and fs.stat("/a/b").is_dir
    assert fs.mkdir("/a/b/c", exist_ok=True).ino == st.ino
    with pytest.raises(cowkv.AlreadyExists) as e:
        fs.mkdir("/a")
    assert e.value.errno_name == "EEXIST"
    with pytest.raises(cowkv.NotFound):
        fs.mkdir("/x/y")
    for name in ["e1", "e2", "e3", "e4", "e5"]:
        fs.create(f"/a/{name}")
    assert fs.listdir("/a") == ["b", "e1", "e2", "e3", "e4", "e5"]
    entries = list(fs.scandir("/a", page_size=2))
    assert [e.name for e in entries][:2] == ["b", "e1"]
    assert entries[0].kind is cowkv.FileKind.DIRECTORY
    assert entries[1].kind is cowkv.FileKind.REGULAR
    with pytest.raises(cowkv.FailedPrecondition) as e2:
        fs.rmdir("/a")
    assert e2.value.errno_name == "ENOTEMPTY"
    with pytest.raises(cowkv.FailedPrecondition) as e3:
        fs.unlink("/a/b")
    assert e3.value.errno_name == "EISDIR"
    with pytest.raises(cowkv.FailedPrecondition) as e4:
        fs.open("/a")
    assert e4.value.errno_name == "EISDIR"
    fs.rmdir("/a/b/c")
    assert fs.listdir("/a/b") == []
    assert not fs.exists("/a/b/c") and fs.exists("/a/b")


def test_rename_flags(sv: cowkv.Subvolume) -> None:
    fs = sv.files
    fs.write_bytes("/x", b"X")
    fs.write_bytes("/y", b"Y")
    with pytest.raises(cowkv.AlreadyExists):
        fs.rename("/x", "/y", flags=cowkv.RENAME_NOREPLACE)
    fs.rename("/x", "/y", flags=cowkv.RENAME_EXCHANGE)
    assert fs.read_bytes("/x") == b"Y" and fs.read_bytes("/y") == b"X"
    fs.rename("/x", "/y")  # replaces
    assert fs.read_bytes("/y") == b"Y" and not fs.exists("/x")
    with pytest.raises(cowkv.InvalidArgument):
        fs.rename("/y", "/z", flags=cowkv.RENAME_NOREPLACE | cowkv.RENAME_EXCHANGE)


def test_link_symlink_unlink(sv: cowkv.Subvolume) -> None:
    fs = sv.files
    fs.write_bytes("/orig", b"data")
    st = fs.link("/orig", "/hard")
    assert st.nlink == 2 and fs.stat("/hard").ino == fs.stat("/orig").ino
    fs.unlink("/orig")
    assert fs.read_bytes("/hard") == b"data" and fs.stat("/hard").nlink == 1
    fs.mkdir("/dir")
    with pytest.raises(cowkv.FailedPrecondition) as e:
        fs.link("/dir", "/dirlink")
    assert e.value.errno_name == "EPERM"
    sl = fs.symlink("../somewhere/else", "/sym")
    assert sl.is_symlink and fs.readlink("/sym") == "../somewhere/else"
    fs.unlink("/sym")
    with pytest.raises(cowkv.NotFound):
        fs.unlink("/sym")


def test_bad_paths(sv: cowkv.Subvolume) -> None:
    fs = sv.files
    for bad in ["/a/../b", "/.", "/" + "n" * 256]:
        with pytest.raises(cowkv.InvalidArgument) as e:
            fs.create(bad)
        assert e.value.errno_name in ("EINVAL", "ENAMETOOLONG")


def test_clone_shares_extents(sv: cowkv.Subvolume) -> None:
    fs = sv.files
    fs.write_bytes("/src", os.urandom(512 * 1024))
    before = fs.fiemap("/src")
    assert before and not any(e.shared for e in before) and before[-1].last
    assert sum(e.length for e in before) == 512 * 1024
    fs.create("/dst")
    fs.clone("/src", "/dst")
    assert fs.read_bytes("/dst") == fs.read_bytes("/src")
    src, dst = fs.fiemap("/src"), fs.fiemap("/dst")
    assert all(e.shared for e in src) and all(e.shared for e in dst)
    assert [e.physical for e in src] == [e.physical for e in dst]
    part = fs.fiemap("/dst", offset=128 * 1024, length=128 * 1024)
    assert part and all(e.shared for e in part) and len(part) < len(dst)
    with pytest.raises(cowkv.NotFound):
        fs.clone("/src", "/absent")


def test_fiemap_inline_and_snapshot(client: cowkv.Client, sv: cowkv.Subvolume) -> None:
    fs = sv.files
    fs.write_bytes("/small", b"tiny")
    (ext,) = fs.fiemap("/small")
    assert ext.inline and ext.last and ext.physical == 0 and ext.length >= 4
    fs.write_bytes("/data", os.urandom(256 * 1024))
    assert not any(e.shared for e in fs.fiemap("/data"))
    client.snapshot(sv.name, f"{sv.name}@snap")
    assert all(e.shared for e in fs.fiemap("/data"))


def test_fsync_paths(sv: cowkv.Subvolume) -> None:
    fs = sv.files
    fs.mkdir("/d")
    fs.write_bytes("/d/f", b"x")
    fs.fsync("/d/f")
    fs.fsync("/d/f", datasync=True)
    fs.fsync("/d")
    with pytest.raises(cowkv.NotFound):
        fs.fsync("/d/absent")


def test_fallocate_modes_and_unwritten_extents(sv: cowkv.Subvolume) -> None:
    fs = sv.files
    data = os.urandom(10000)
    fs.write_bytes("/p", data)
    st = fs.fallocate("/p", 0, 100000)
    assert st.size == 100000 and st.bytes == 100000
    assert fs.read_bytes("/p") == data + bytes(90000)
    exts = fs.fiemap("/p")
    assert not exts[0].unwritten and all(e.unwritten for e in exts[1:]) and exts[-1].last
    # KEEP_SIZE past EOF; by inode number.
    st = fs.fallocate(st.ino, 100000, 50000, keep_size=True)
    assert st.size == 100000 and st.bytes == 150000
    last = fs.fiemap("/p")[-1]
    assert last.unwritten and last.logical + last.length == 150000
    # A write converts only what it covers.
    with fs.open("/p", "r+") as f:
        f.seek(50000)
        f.write(b"middle")
    exts = fs.fiemap("/p", offset=40000, length=20000)
    assert [e.unwritten for e in exts] == [True, False, True]
    # Punch hole (keeps the size), zero range (grows the file).
    st = fs.fallocate("/p", 1000, 2000, punch_hole=True)
    assert st.size == 100000 and st.bytes == 148000
    st = fs.fallocate("/p", 90000, 20000, zero_range=True)
    assert st.size == 110000
    want = bytearray(data + bytes(100000))
    want[1000:3000] = bytes(2000)
    want[50000:50006] = b"middle"
    assert fs.read_bytes("/p") == bytes(want[:110000])
    # Refused.
    with pytest.raises(cowkv.InvalidArgument) as e:
        fs.fallocate("/p", 0, 10, punch_hole=True, zero_range=True)
    assert e.value.errno_name == "EINVAL"
    with pytest.raises(cowkv.InvalidArgument):
        fs.fallocate("/p", 0, 0)
    with pytest.raises(cowkv.NotFound):
        fs.fallocate("/absent", 0, 10)
    fs.mkdir("/dir")
    with pytest.raises(cowkv.FailedPrecondition) as isdir:
        fs.fallocate("/dir", 0, 10)
    assert isdir.value.errno_name == "EISDIR"


# Open handles, orphans and O_TMPFILE (Files.Open / CreateTmpfile / Close).


def test_unlinked_open_handle_lives_until_close(sv: cowkv.Subvolume) -> None:
    fs = sv.files
    fs.write_bytes("/f", b"hello world")
    with fs.open_handle("/f") as h:
        assert h.opened_stat.size == 11 and h.lease_ms == 30000
        fs.unlink("/f")
        assert not fs.exists("/f")
        assert h.stat().nlink == 0
        assert h.write(b"WORLD", offset=6) == 5
        assert h.read() == b"hello WORLD"
        assert h.read(offset=6, length=3) == b"WOR"
        assert h.truncate(5).size == 5
        h.fsync()
        h.fsync(datasync=True)
        assert h.fiemap()
        with pytest.raises(cowkv.NotFound) as e:
            fs.link(h, "/back")  # not an O_TMPFILE: ENOENT, as linkat on Linux
        assert e.value.errno_name == "ENOENT"
        ino = h.ino
    assert h.closed
    with pytest.raises(cowkv.NotFound):
        fs.stat(ino=ino)
    with pytest.raises(ValueError):
        h.read()
    h.close()  # idempotent
    with pytest.raises(cowkv.NotFound) as e:
        fs.close_handle(h.handle)
    assert e.value.errno_name == "EBADF"


def test_tmpfile_linked_by_handle(sv: cowkv.Subvolume) -> None:
    fs = sv.files
    fs.mkdir("/d")
    with fs.create_tmpfile("/d", 0o600) as t:
        assert t.opened_stat.nlink == 0 and t.opened_stat.mode == 0o600
        t.write(b"all or nothing")
        t.fsync()
        assert fs.listdir("/d") == []
        st = fs.link(t, "/d/final")
        assert st.nlink == 1 and st.ino == t.ino
        assert fs.link("", "/d/again", ino=t.ino).nlink == 2
    assert fs.read_bytes("/d/final") == b"all or nothing"
    with fs.create_tmpfile("/d") as gone:
        gone.write(b"never named")
    with pytest.raises(cowkv.NotFound):
        fs.stat(ino=gone.ino)
    assert fs.listdir("/d") == ["final", "again"]
