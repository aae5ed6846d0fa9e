"""RemoteFile: a binary file object over Files.Read/Write/Truncate/Fsync."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any, Optional

from cowkv import errors
from cowkv.v1 import files_pb2

if TYPE_CHECKING:
    from cowkv.files import FileStat, Files

__all__ = ["RemoteFile"]

#: Buffered writes are streamed once this many bytes are pending.
WRITE_BUFFER = 4 << 20


def _parse_mode(mode: str) -> "tuple[str, bool]":
    """("r"|"w"|"a"|"x", plus) for a binary open() mode; ValueError otherwise."""
    kinds = [c for c in mode if c in "rwax"]
    if len(kinds) != 1 or any(c not in "rwax+b" for c in mode) or mode.count("+") > 1:
        raise ValueError(f"invalid mode {mode!r} (binary modes: r w a x, optional + and b)")
    return kinds[0], "+" in mode


class RemoteFile(io.RawIOBase):
    """A file in a subvolume, opened by :meth:`cowkv.Files.open`.

    The object holds the inode number it opened, so a rename of the path
    does not change which file it reads and writes. Reads stream from the
    server at the current position; writes are buffered up to 4 MiB and
    streamed (one Write RPC) by flush(), seek(), read(), truncate(),
    fsync() and close(). In "a" mode every write goes to the end of the
    file as it is when the buffered data is sent. Not thread-safe.
    """

    def __init__(self, files: "Files", path: str, mode: str, create_mode: int) -> None:
        super().__init__()
        kind, plus = _parse_mode(mode)
        self._files = files
        self.name = path
        self.mode = mode
        self._readable = kind == "r" or plus
        self._writable = kind != "r" or plus
        self._append = kind == "a"
        self._pos = 0
        self._pending = bytearray()
        self._pending_offset = 0
        self._ino = self._open(kind, path, create_mode)

    def _open(self, kind: str, path: str, create_mode: int) -> int:
        if kind == "x":
            return self._files.create(path, create_mode).ino
        if kind == "r":
            st = self._files.stat(path)
            _require_regular(st, path)
            return st.ino
        # "w" and "a": create if absent, and for "w" cut to 0, in one Write RPC.
        head = files_pb2.WriteRequest(subvolume=self._files.subvolume, path=path, create=True,
                                      mode=create_mode, truncate=kind == "w")
        return int(self._files.write_stream(head, iter(())).stat.ino)

    # io.RawIOBase.

    def readable(self) -> bool:
        return self._readable

    def writable(self) -> bool:
        return self._writable

    def seekable(self) -> bool:
        return True

    @property
    def ino(self) -> int:
        """The inode number this object reads and writes."""
        return self._ino

    def read(self, size: Optional[int] = -1) -> bytes:
        """Up to ``size`` bytes from the position (all to EOF if negative/None)."""
        self._check_op(self._readable, "read")
        self.flush()
        if size is not None and size == 0:
            return b""
        length = 0 if size is None or size < 0 else size
        data = b"".join(self._files.read_stream(ino=self._ino, offset=self._pos, length=length))
        self._pos += len(data)
        return data

    def readall(self) -> bytes:
        return self.read(-1)

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        data = self.read(len(view))
        view[:len(data)] = data
        return len(data)

    def write(self, data: Any) -> int:
        """Buffers ``data`` at the position (the end in "a" mode); returns its length."""
        self._check_op(self._writable, "write")
        b = bytes(data)
        if self._append and not self._pending:
            self._pos = self._size()
        if self._pending and self._pending_offset + len(self._pending) != self._pos:
            self.flush()
        if not self._pending:
            self._pending_offset = self._pos
        self._pending += b
        self._pos += len(b)
        if len(self._pending) >= WRITE_BUFFER:
            self.flush()
        return len(b)

    def flush(self) -> None:
        """Streams the buffered writes to the server (not fsync)."""
        if self.closed or not self._pending:
            return
        data, self._pending = bytes(self._pending), bytearray()
        offset = self._size() if self._append else self._pending_offset
        head = files_pb2.WriteRequest(subvolume=self._files.subvolume, ino=self._ino,
                                      offset=offset)
        self._files.write_stream(head, iter([data]))
        if self._append:
            self._pos = offset + len(data)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._check_op(True, "seek")
        self.flush()
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos}.get(whence)
        if base is None:
            if whence != io.SEEK_END:
                raise ValueError(f"invalid whence {whence}")
            base = self._size()
        if base + offset < 0:
            raise ValueError("negative seek position")
        self._pos = base + offset
        return self._pos

    def tell(self) -> int:
        self._check_op(True, "tell")
        return self._pos

    def truncate(self, size: Optional[int] = None) -> int:
        """Sets the file's size (default: the position); the position stays."""
        self._check_op(self._writable, "truncate")
        self.flush()
        new_size = self._pos if size is None else size
        self._files.truncate(ino=self._ino, size=new_size)
        return new_size

    def fsync(self, datasync: bool = False) -> None:
        """Flushes, then makes the file's data and size (and, unless
        ``datasync``, its names) survive a crash."""
        self.flush()
        self._files.fsync(ino=self._ino, datasync=datasync)

    def stat(self) -> "FileStat":
        """The file's attributes (after flushing)."""
        self.flush()
        return self._files.stat(ino=self._ino)

    def close(self) -> None:
        if self.closed:
            return
        try:
            self.flush()
        finally:
            super().close()

    def __repr__(self) -> str:
        return f"<cowkv.RemoteFile {self._files.subvolume}:{self.name} mode={self.mode!r}>"

    # Helpers.

    def _size(self) -> int:
        return self._files.stat(ino=self._ino).size

    def _check_op(self, allowed: bool, op: str) -> None:
        if self.closed:
            raise ValueError(f"{op} on a closed file")
        if not allowed:
            raise io.UnsupportedOperation(f"file not open for {op} (mode {self.mode!r})")


def _require_regular(st: "FileStat", path: str) -> None:
    if st.is_dir:
        raise errors.FailedPrecondition(f"EISDIR: is a directory: {path}", None, "open")
    if not st.is_file:
        raise errors.InvalidArgument(f"EINVAL: not a regular file: {path}", None, "open")
