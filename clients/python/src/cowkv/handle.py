"""FileHandle: an open file on the server (Files.Open, Files.CreateTmpfile).

    with fs.open_handle("/logs/a.txt") as h:
        fs.unlink("/logs/a.txt")        # the file lives on while h is open
        h.write(b"more", offset=h.stat().size)
        h.fsync()                       # works on an unlinked file too
    # closed: the unlinked file is gone now

    with fs.create_tmpfile("/logs") as t:    # O_TMPFILE: no name yet
        t.write(b"all or nothing")
        fs.link(t, "/logs/b.txt")            # linkat: now it has one
        t.fsync()

A handle has a lease (30 s by default, at most 600 s) that every call on it
renews; one left unused longer is closed by the server, and calls on it
then raise NotFound with ``errno_name == "EBADF"``. Not thread-safe.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, List

from cowkv.v1 import files_pb2

if TYPE_CHECKING:
    from cowkv.files import Extent, Files, FileStat

__all__ = ["FileHandle"]


class FileHandle:
    """An open file: its handle, inode and lease, and the data calls on it."""

    def __init__(self, files: "Files", resp: files_pb2.OpenResponse) -> None:
        from cowkv.files import FileStat
        self._files = files
        self.handle: int = resp.handle
        self.ino: int = resp.ino
        self.lease_ms: int = resp.lease_ms
        self.opened_stat: "FileStat" = FileStat.from_proto(resp.stat)
        self.closed = False

    def _check(self) -> None:
        if self.closed:
            raise ValueError("I/O operation on a closed file handle")

    def stat(self) -> "FileStat":
        """The file's attributes now (nlink 0 once its last name went)."""
        self._check()
        return self._files.stat(handle=self.handle)

    def read(self, offset: int = 0, length: int = 0) -> bytes:
        """Bytes from ``offset``, ``length`` of them (0 = to EOF)."""
        self._check()
        return b"".join(self._files.read_stream(handle=self.handle, offset=offset, length=length))

    def write(self, data: bytes, offset: int = 0) -> int:
        """Writes ``data`` at ``offset`` in one Write RPC; returns bytes written."""
        self._check()
        head = files_pb2.WriteRequest(handle=self.handle, offset=offset)
        return self._files.write_stream(head, iter([bytes(data)])).bytes_written

    def truncate(self, size: int) -> "FileStat":
        self._check()
        return self._files.truncate(size=size, handle=self.handle)

    def fsync(self, datasync: bool = False) -> None:
        self._check()
        self._files.fsync(handle=self.handle, datasync=datasync)

    def fiemap(self, offset: int = 0, length: int = 0) -> "List[Extent]":
        self._check()
        return self._files.fiemap(offset=offset, length=length, handle=self.handle)

    def close(self) -> None:
        """Closes the handle (idempotent); the last one of a file without a
        name deletes it."""
        if self.closed:
            return
        self.closed = True
        self._files.close_handle(self.handle)

    def __enter__(self) -> "FileHandle":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"lease {self.lease_ms} ms"
        return f"<FileHandle {self.handle} ino {self.ino} ({state})>"
