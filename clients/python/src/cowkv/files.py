"""A subvolume's file tree (service Files): path operations and file objects.

    fs = client.subvolume("data").files
    fs.mkdir("/logs", parents=True)
    with fs.open("/logs/a.txt", "w") as f:     # always binary: bytes in, bytes out
        f.write(b"hello\\n")
        f.fsync()
    fs.clone("/logs/a.txt", "/logs/b.txt")     # reflink: the extents are shared
    [e.shared for e in fs.fiemap("/logs/b.txt")]

Paths are '/'-separated from the subvolume root ("a/b" = "/a/b"); symlinks
are stored, never followed. File errors carry the POSIX name:
``err.errno_name == "ENOTEMPTY"``.
"""

from __future__ import annotations

import dataclasses
import enum
import os
from typing import TYPE_CHECKING, BinaryIO, Iterator, List, Optional, Tuple, Union

from cowkv import errors
from cowkv._validate import check_request
from cowkv.v1 import files_pb2

if TYPE_CHECKING:
    from cowkv._rpc import Rpc
    from cowkv.watch import Watch
    from cowkv.file import RemoteFile
    from cowkv.handle import FileHandle

__all__ = ["Files", "FileStat", "FileKind", "DirEntry", "Extent", "RENAME_NOREPLACE",
           "RENAME_EXCHANGE", "FIEMAP_EXTENT_LAST", "FIEMAP_EXTENT_NOT_ALIGNED",
           "FIEMAP_EXTENT_DATA_INLINE", "FIEMAP_EXTENT_SHARED", "Path",
           "FIEMAP_EXTENT_UNWRITTEN", "FALLOC_FL_KEEP_SIZE", "FALLOC_FL_PUNCH_HOLE",
           "FALLOC_FL_ZERO_RANGE", "UTIME_NOW", "XATTR_CREATE", "XATTR_REPLACE"]

Path = Union[str, "os.PathLike[str]"]

#: rename() flags (renameat2's): fail with AlreadyExists if the target exists,
RENAME_NOREPLACE = files_pb2.RENAME_FLAG_NOREPLACE
#: or swap the two names, which must both exist.
RENAME_EXCHANGE = files_pb2.RENAME_FLAG_EXCHANGE

#: Extent flags (Linux's FIEMAP_EXTENT_* values).
FIEMAP_EXTENT_LAST = files_pb2.FIEMAP_FLAG_LAST
FIEMAP_EXTENT_NOT_ALIGNED = files_pb2.FIEMAP_FLAG_NOT_ALIGNED
FIEMAP_EXTENT_DATA_INLINE = files_pb2.FIEMAP_FLAG_INLINE
FIEMAP_EXTENT_SHARED = files_pb2.FIEMAP_FLAG_SHARED
#: Preallocated by fallocate and not written yet: reads as zeros.
FIEMAP_EXTENT_UNWRITTEN = files_pb2.FIEMAP_FLAG_UNWRITTEN

#: fallocate modes (Linux's FALLOC_FL_* values), as Files.fallocate sends them.
FALLOC_FL_KEEP_SIZE = files_pb2.FALLOCATE_FLAG_KEEP_SIZE
FALLOC_FL_PUNCH_HOLE = files_pb2.FALLOCATE_FLAG_PUNCH_HOLE
FALLOC_FL_ZERO_RANGE = files_pb2.FALLOCATE_FLAG_ZERO_RANGE

#: set_xattr() flags (setxattr(2)'s): fail with AlreadyExists (EEXIST) if set,
XATTR_CREATE = files_pb2.XATTR_FLAG_CREATE
#: or with NotFound (ENODATA) if not set.
XATTR_REPLACE = files_pb2.XATTR_FLAG_REPLACE

#: Bytes per Write message (the server takes at most 4 MiB).
WRITE_CHUNK = 1 << 20


class FileKind(enum.IntEnum):
    REGULAR = files_pb2.FILE_KIND_REGULAR
    DIRECTORY = files_pb2.FILE_KIND_DIRECTORY
    SYMLINK = files_pb2.FILE_KIND_SYMLINK


@dataclasses.dataclass(frozen=True)
class FileStat:
    """Attributes of one inode (cowkv.v1.FileStat); times in ns since the epoch."""

    ino: int
    kind: FileKind
    mode: int
    nlink: int
    size: int
    bytes: int  # data the file references (holes excluded)
    uid: int
    gid: int
    atime_ns: int
    mtime_ns: int
    ctime_ns: int
    btime_ns: int
    generation: int  # engine generation that created the inode
    transid: int  # engine generation that last changed it

    @classmethod
    def from_proto(cls, m: files_pb2.FileStat) -> "FileStat":
        return cls(m.ino, FileKind(m.kind), m.mode, m.nlink, m.size, m.bytes, m.uid, m.gid,
                   m.atime_ns, m.mtime_ns, m.ctime_ns, m.btime_ns, m.generation, m.transid)

    @property
    def is_dir(self) -> bool:
        return self.kind == FileKind.DIRECTORY

    @property
    def is_file(self) -> bool:
        return self.kind == FileKind.REGULAR

    @property
    def is_symlink(self) -> bool:
        return self.kind == FileKind.SYMLINK


@dataclasses.dataclass(frozen=True)
class DirEntry:
    """One directory entry."""

    name: str
    ino: int
    kind: FileKind
    cookie: int  # its position; a listing from cookie + 1 continues after it


@dataclasses.dataclass(frozen=True)
class Extent:
    """One extent of a file, as Linux's FIEMAP reports it."""

    logical: int  # file offset
    physical: int  # device byte address (0 for inline data)
    length: int
    flags: int  # bit mask of FIEMAP_EXTENT_*

    @property
    def shared(self) -> bool:
        """Shared with another file or snapshot (reflink, snapshot)."""
        return bool(self.flags & FIEMAP_EXTENT_SHARED)

    @property
    def inline(self) -> bool:
        """Stored inline in a metadata node."""
        return bool(self.flags & FIEMAP_EXTENT_DATA_INLINE)

    @property
    def last(self) -> bool:
        """The file's last extent."""
        return bool(self.flags & FIEMAP_EXTENT_LAST)

    @property
    def unwritten(self) -> bool:
        """Preallocated (fallocate) and not written yet: reads as zeros."""
        return bool(self.flags & FIEMAP_EXTENT_UNWRITTEN)


def _p(path: Path) -> str:
    return os.fspath(path)


class Files:
    """The file tree of one subvolume. Thread-safe; file objects are not."""

    def __init__(self, rpc: "Rpc", subvolume: str) -> None:
        self._rpc = rpc
        self.subvolume = subvolume

    # Watch (issue 18, docs/design.md "File watch").

    def watch(self, prefix: Path = "", *, start_revision: int = 0,
              progress_notify: bool = False, timeout: Optional[float] = None) -> "Watch":
        """Watches the file tree at ``prefix`` and below (every path when
        empty) on a stream of its own, like inotify; iterate the returned
        :class:`cowkv.Watch` for :class:`cowkv.FileEvent`, ``cancel()`` it to
        stop. Returns once the server created the watcher. Changes are shown
        once an engine commit sealed them (the server commits for its file
        watchers). ``start_revision`` 0 = the next change; an older one
        replays the recorded events (:class:`cowkv.Compacted`, with the
        oldest revision served, when it is before what was recorded: the
        file tree changed while nobody watched it). ``timeout``: the stream's
        deadline (none by default), as for a KV watch."""
        from cowkv.watch import Watch, file_watch_create
        return Watch(self._rpc, file_watch_create(self.subvolume, _p(prefix), start_revision,
                                                  progress_notify), timeout=timeout)

    # Files as objects.

    def open(self, path: Path, mode: str = "rb", *, create_mode: int = 0o644) -> "RemoteFile":
        """Opens a file like the builtin open() in binary mode ("r", "r+",
        "w", "w+", "a", "a+", "x", "x+"; "b" optional). The object has
        read/write/seek/tell/truncate/flush/fsync/stat/close, is a context
        manager, and names the inode it opened (renames do not disturb it).
        Writes are buffered (up to 4 MiB) and streamed by flush, seek,
        read, fsync and close."""
        from cowkv.file import RemoteFile
        return RemoteFile(self, _p(path), mode, create_mode)

    def read_bytes(self, path: Path) -> bytes:
        """The whole file."""
        with self.open(path, "rb") as f:
            return f.read()

    def write_bytes(self, path: Path, data: bytes, create_mode: int = 0o644, *,
                    timeout: Optional[float] = None) -> int:
        """Creates or replaces the file's contents; returns bytes written."""
        return self.upload(path, iter([data]), create_mode=create_mode, timeout=timeout)

    def upload(self, path: Path, source: Union[BinaryIO, Iterator[bytes]], *,
               offset: int = 0, create: bool = True, truncate: bool = True,
               create_mode: int = 0o644, timeout: Optional[float] = None) -> int:
        """Streams a local binary file object (or an iterator of byte chunks)
        into ``path`` from ``offset`` in one Write RPC; returns bytes written.
        ``timeout``: the stream's deadline (default: the client's stream_timeout)."""
        chunks = _chunks(source)
        head = files_pb2.WriteRequest(subvolume=self.subvolume, path=_p(path), offset=offset,
                                      create=create, truncate=truncate, mode=create_mode)
        return self.write_stream(head, chunks, timeout=timeout).bytes_written

    def download(self, path: Path, sink: BinaryIO, offset: int = 0, length: int = 0, *,
                 timeout: Optional[float] = None) -> int:
        """Streams ``path`` (from ``offset``, ``length`` bytes or to EOF) into
        a local binary file object; returns bytes copied."""
        n = 0
        for chunk in self.read_stream(path=_p(path), offset=offset, length=length,
                                      timeout=timeout):
            sink.write(chunk)
            n += len(chunk)
        return n

    # The streaming RPCs, as the file object uses them.

    def read_stream(self, *, path: str = "", ino: int = 0, offset: int = 0,
                    length: int = 0, handle: int = 0,
                    timeout: Optional[float] = None) -> Iterator[bytes]:
        """The bytes of a range as the server streams them (chunks ≤ 1 MiB)."""
        req = files_pb2.ReadRequest(subvolume=self.subvolume, path=path, ino=ino, offset=offset,
                                    length=length, handle=handle)
        for m in self._rpc.server_stream(self._rpc.files.Read, req, "read", timeout):
            if m.data:
                yield m.data

    def write_stream(self, head: files_pb2.WriteRequest,
                     chunks: Iterator[bytes], *,
                     timeout: Optional[float] = None) -> files_pb2.WriteResponse:
        """One Write RPC: ``head`` names the file, then one message per chunk."""
        check_request(head)

        def messages() -> Iterator[files_pb2.WriteRequest]:
            yield head
            for c in chunks:
                for i in range(0, len(c), WRITE_CHUNK):
                    yield files_pb2.WriteRequest(data=c[i:i + WRITE_CHUNK])
        resp: files_pb2.WriteResponse = self._rpc.client_stream(self._rpc.files.Write, messages(),
                                                                 "write", timeout)
        return resp

    # Names and attributes.

    def stat(self, path: Path = "", *, ino: int = 0, handle: int = 0,
             timeout: Optional[float] = None) -> FileStat:
        """Attributes of a file, directory or symlink (by path, inode or open handle)."""
        req = files_pb2.StatRequest(subvolume=self.subvolume, path=_p(path), ino=ino,
                                    handle=handle)
        return FileStat.from_proto(self._rpc.unary(self._rpc.files.Stat, req, "stat",
                                                   timeout=timeout))

    def exists(self, path: Path, *, timeout: Optional[float] = None) -> bool:
        try:
            self.stat(path, timeout=timeout)
            return True
        except errors.NotFound:
            return False

    def mkdir(self, path: Path, mode: int = 0o755, *, parents: bool = False,
              exist_ok: bool = False, timeout: Optional[float] = None) -> FileStat:
        """Creates a directory; with ``parents`` the missing ones above too."""
        p = _p(path)
        if parents:
            parts = [c for c in p.split("/") if c]
            for i in range(1, len(parts)):
                self.mkdir("/".join(parts[:i]), mode, exist_ok=True)
        req = files_pb2.MkdirRequest(subvolume=self.subvolume, path=p, mode=mode)
        try:
            return FileStat.from_proto(self._rpc.unary(self._rpc.files.Mkdir, req, "mkdir",
                                                       timeout=timeout))
        except errors.AlreadyExists:
            st = self.stat(p) if exist_ok else None
            if st is None or not st.is_dir:
                raise
            return st

    def create(self, path: Path, mode: int = 0o644, *, timeout: Optional[float] = None) -> FileStat:
        """Creates an empty regular file; AlreadyExists if the name is taken."""
        req = files_pb2.CreateFileRequest(subvolume=self.subvolume, path=_p(path), mode=mode)
        return FileStat.from_proto(self._rpc.unary(self._rpc.files.Create, req, "create",
                                                   timeout=timeout))

    def scandir(self, path: Path = "/", page_size: int = 0,
                *, timeout: Optional[float] = None) -> Iterator[DirEntry]:
        """The entries of a directory in creation order, a page per call."""
        cookie, more = 0, True
        while more:
            req = files_pb2.ReadDirRequest(subvolume=self.subvolume, path=_p(path),
                                           cookie=cookie, limit=page_size)
            resp = self._rpc.unary(self._rpc.files.ReadDir, req, "readdir", timeout=timeout)
            for e in resp.entries:
                yield DirEntry(e.name, e.ino, FileKind(e.kind), e.cookie)
            cookie, more = resp.next_cookie, resp.more

    def listdir(self, path: Path = "/", *, timeout: Optional[float] = None) -> List[str]:
        """The names in a directory, in creation order (``timeout`` per page)."""
        return [e.name for e in self.scandir(path, timeout=timeout)]

    def rename(self, src: Path, dst: Path, flags: int = 0,
               *, timeout: Optional[float] = None) -> None:
        """Renames (moves) a name; ``flags``: RENAME_NOREPLACE, RENAME_EXCHANGE."""
        req = files_pb2.RenameRequest(subvolume=self.subvolume, to=_p(dst), flags=flags,
                                      **{"from": _p(src)})
        self._rpc.unary(self._rpc.files.Rename, req, "rename", timeout=timeout)

    def link(self, existing: Union[Path, "FileHandle"], new_path: Path, *,
             ino: int = 0, timeout: Optional[float] = None) -> FileStat:
        """Adds a hard link to a file (not a directory: EPERM). ``existing``
        may be an open FileHandle, or ``ino`` name the file (linkat with
        AT_EMPTY_PATH): that names an O_TMPFILE (create_tmpfile); a file
        whose names are all gone otherwise raises NotFound (ENOENT)."""
        from cowkv.handle import FileHandle
        if isinstance(existing, FileHandle):
            req = files_pb2.LinkRequest(subvolume=self.subvolume, handle=existing.handle,
                                        new_path=_p(new_path))
        else:
            req = files_pb2.LinkRequest(subvolume=self.subvolume, existing=_p(existing), ino=ino,
                                        new_path=_p(new_path))
        return FileStat.from_proto(self._rpc.unary(self._rpc.files.Link, req, "link",
                                                   timeout=timeout))

    def symlink(self, target: str, path: Path, *, timeout: Optional[float] = None) -> FileStat:
        """Creates a symlink at ``path`` holding ``target`` (never resolved)."""
        req = files_pb2.SymlinkRequest(subvolume=self.subvolume, target=target, path=_p(path))
        return FileStat.from_proto(self._rpc.unary(self._rpc.files.Symlink, req, "symlink",
                                                   timeout=timeout))

    def readlink(self, path: Path, *, timeout: Optional[float] = None) -> str:
        req = files_pb2.ReadLinkRequest(subvolume=self.subvolume, path=_p(path))
        return str(self._rpc.unary(self._rpc.files.ReadLink, req, "readlink",
                                   timeout=timeout).target)

    def unlink(self, path: Path, *, timeout: Optional[float] = None) -> None:
        """Removes a name of a file or symlink (a directory: EISDIR)."""
        req = files_pb2.UnlinkRequest(subvolume=self.subvolume, path=_p(path))
        self._rpc.unary(self._rpc.files.Unlink, req, "unlink", timeout=timeout)

    def rmdir(self, path: Path, *, timeout: Optional[float] = None) -> None:
        """Removes an empty directory (ENOTEMPTY otherwise)."""
        req = files_pb2.RmdirRequest(subvolume=self.subvolume, path=_p(path))
        self._rpc.unary(self._rpc.files.Rmdir, req, "rmdir", timeout=timeout)

    def truncate(self, path: Path = "", size: int = 0, *, ino: int = 0,
                 handle: int = 0, timeout: Optional[float] = None) -> FileStat:
        """Sets a regular file's size (cuts, or extends with a hole)."""
        req = files_pb2.TruncateRequest(subvolume=self.subvolume, path=_p(path), ino=ino,
                                        size=size, handle=handle)
        return FileStat.from_proto(self._rpc.unary(self._rpc.files.Truncate, req, "truncate",
                                                   timeout=timeout))

    # Data sharing and durability.

    def clone(self, src: Path, dst: Path, src_offset: int = 0, dst_offset: int = 0,
              length: int = 0, *, timeout: Optional[float] = None) -> None:
        """Reflink: ``dst`` shares the extents of ``src``'s range (0 = to EOF);
        no data is copied. ``dst`` must exist."""
        req = files_pb2.CloneRequest(subvolume=self.subvolume, src_path=_p(src),
                                     src_offset=src_offset, dst_path=_p(dst),
                                     dst_offset=dst_offset, length=length)
        self._rpc.unary(self._rpc.files.Clone, req, "clone", timeout=timeout)

    def fsync(self, path: Path = "", *, ino: int = 0, datasync: bool = False,
              handle: int = 0, offset: int = 0, length: int = 0,
              timeout: Optional[float] = None) -> None:
        """Makes a file (a directory: and its entries) survive a crash. With
        ``offset``/``length`` (sync_file_range), at least that byte range's data
        (length 0 = to EOF); the whole file is synced today."""
        req = files_pb2.FsyncRequest(subvolume=self.subvolume, path=_p(path), ino=ino,
                                     datasync=datasync, handle=handle, offset=offset,
                                     length=length)
        self._rpc.unary(self._rpc.files.Fsync, req, "fsync", timeout=timeout)

    def fiemap(self, path: Path = "", offset: int = 0, length: int = 0, *,
               ino: int = 0, handle: int = 0, timeout: Optional[float] = None) -> List[Extent]:
        """The extents holding a byte range (0 = to EOF), in file order."""
        out: List[Extent] = []
        stop = offset + length if length else 0  # 0 = EOF
        while True:
            req = files_pb2.FiemapRequest(subvolume=self.subvolume, path=_p(path), ino=ino,
                                          offset=offset, length=stop - offset if stop else 0,
                                          handle=handle)
            resp = self._rpc.unary(self._rpc.files.Fiemap, req, "fiemap", timeout=timeout)
            out += [Extent(e.logical, e.physical, e.length, e.flags) for e in resp.extents]
            if not resp.more or not resp.extents:
                return out
            offset = resp.extents[-1].logical + resp.extents[-1].length
            if stop and offset >= stop:
                return out

    # fallocate.

    def fallocate(self, path_or_ino: Union[Path, int], offset: int, length: int, *,
                  keep_size: bool = False, punch_hole: bool = False,
                  zero_range: bool = False, timeout: Optional[float] = None) -> FileStat:
        """fallocate(2) on a regular file (a path, or an inode number).

        By default the range's holes get preallocated extents, which read as
        zeros and show ``unwritten`` in :meth:`fiemap`, and the file grows to
        ``offset + length``; ``keep_size`` keeps the size (the range may lie
        past EOF). ``punch_hole`` makes the range a hole and implies
        ``keep_size`` (as fallocate(1)); ``zero_range`` makes it read as zeros
        (preallocated extents). ``punch_hole`` with ``zero_range`` raises
        InvalidArgument (EINVAL), as does ``length`` 0; a full device
        NoSpace, with nothing changed. Returns the file's attributes."""
        mode = 0
        if keep_size or punch_hole:
            mode |= FALLOC_FL_KEEP_SIZE
        if punch_hole:
            mode |= FALLOC_FL_PUNCH_HOLE
        if zero_range:
            mode |= FALLOC_FL_ZERO_RANGE
        if isinstance(path_or_ino, int):
            path, ino = "", path_or_ino
        else:
            path, ino = _p(path_or_ino), 0
        req = files_pb2.FallocateRequest(subvolume=self.subvolume, path=path, ino=ino, mode=mode,
                                         offset=offset, length=length)
        return FileStat.from_proto(self._rpc.unary(self._rpc.files.Fallocate, req, "fallocate",
                                                   timeout=timeout))

    # Open handles (server-side, with a lease): a file unlinked while open
    # lives on until its last close; O_TMPFILE.

    def open_handle(self, path: Path = "", *, ino: int = 0,
                    lease_ms: int = 0, timeout: Optional[float] = None) -> "FileHandle":
        """Opens a file on the server (Files.Open): a FileHandle, a context
        manager with read/write/truncate/fsync/stat/fiemap/close by handle.
        While it is open, removing the file's last name does not delete it."""
        from cowkv.handle import FileHandle
        req = files_pb2.OpenRequest(subvolume=self.subvolume, path=_p(path), ino=ino,
                                    lease_ms=lease_ms)
        return FileHandle(self, self._rpc.unary(self._rpc.files.Open, req, "open", timeout=timeout))

    def create_tmpfile(self, dir: Path = "/", mode: int = 0o644, *, dir_ino: int = 0,
                       lease_ms: int = 0, timeout: Optional[float] = None) -> "FileHandle":
        """O_TMPFILE: a new regular file without a name in directory ``dir``,
        opened; link(handle, path) names it, closing it unnamed deletes it."""
        from cowkv.handle import FileHandle
        req = files_pb2.CreateTmpfileRequest(subvolume=self.subvolume, dir_path=_p(dir),
                                             dir_ino=dir_ino, mode=mode, lease_ms=lease_ms)
        return FileHandle(self, self._rpc.unary(self._rpc.files.CreateTmpfile, req, "tmpfile",
                                                timeout=timeout))

    def close_handle(self, handle: int, *, timeout: Optional[float] = None) -> None:
        """Closes an open handle (FileHandle.close calls this)."""
        req = files_pb2.CloseRequest(handle=handle)
        self._rpc.unary(self._rpc.files.CloseHandle, req, "close", timeout=timeout)

    # Attributes (issue 17).

    def set_attr(self, path: Path = "", *, ino: int = 0, mode: Optional[int] = None,
                 uid: Optional[int] = None, gid: Optional[int] = None,
                 size: Optional[int] = None, atime_ns: Union[int, "_Now", None] = None,
                 mtime_ns: Union[int, "_Now", None] = None,
                 timeout: Optional[float] = None) -> FileStat:
        """setattr: changes the attributes given (None = keep) and returns them
        afterwards; a time may be :data:`UTIME_NOW` (the server's clock). ctime
        becomes now when anything changes; ``size`` is a truncate."""
        req = files_pb2.SetAttrRequest(subvolume=self.subvolume, path=_p(path), ino=ino)
        fields = 0
        if mode is not None:
            fields |= files_pb2.SET_ATTR_MODE
            req.mode = mode
        if uid is not None:
            fields |= files_pb2.SET_ATTR_UID
            req.uid = uid
        if gid is not None:
            fields |= files_pb2.SET_ATTR_GID
            req.gid = gid
        if size is not None:
            fields |= files_pb2.SET_ATTR_SIZE
            req.size = size
        if isinstance(atime_ns, _Now):
            fields |= files_pb2.SET_ATTR_ATIME_NOW
        elif atime_ns is not None:
            fields |= files_pb2.SET_ATTR_ATIME
            req.atime_ns = atime_ns
        if isinstance(mtime_ns, _Now):
            fields |= files_pb2.SET_ATTR_MTIME_NOW
        elif mtime_ns is not None:
            fields |= files_pb2.SET_ATTR_MTIME
            req.mtime_ns = mtime_ns
        req.fields = fields
        return FileStat.from_proto(self._rpc.unary(self._rpc.files.SetAttr, req, "setattr",
                                                   timeout=timeout))

    def chmod(self, path: Path, mode: int, *, timeout: Optional[float] = None) -> FileStat:
        """Sets the permission bits (at most 0o7777), as os.chmod."""
        return self.set_attr(path, mode=mode, timeout=timeout)

    def chown(self, path: Path, uid: int, gid: int, *,
              timeout: Optional[float] = None) -> FileStat:
        """Sets the owner, as os.chown: -1 keeps that id."""
        return self.set_attr(path, uid=None if uid == -1 else uid,
                             gid=None if gid == -1 else gid, timeout=timeout)

    def utime(self, path: Path, ns: Optional[Tuple[int, int]] = None, *,
              timeout: Optional[float] = None) -> FileStat:
        """Sets (atime, mtime) in ns since the epoch, or both to now, as os.utime."""
        if ns is None:
            return self.set_attr(path, atime_ns=UTIME_NOW, mtime_ns=UTIME_NOW, timeout=timeout)
        return self.set_attr(path, atime_ns=ns[0], mtime_ns=ns[1], timeout=timeout)

    # Extended attributes (issue 17): names 1..255 bytes (ENAMETOOLONG past),
    # values at most 4096 bytes and what fits one item (ERANGE past).

    def set_xattr(self, path: Path, name: str, value: bytes, flags: int = 0, *,
                  ino: int = 0, timeout: Optional[float] = None) -> None:
        """Sets an extended attribute; ``flags``: XATTR_CREATE or XATTR_REPLACE."""
        req = files_pb2.SetXattrRequest(subvolume=self.subvolume, path=_p(path), ino=ino,
                                        name=name, value=value, flags=flags)
        self._rpc.unary(self._rpc.files.SetXattr, req, "setxattr", timeout=timeout)

    def get_xattr(self, path: Path, name: str, *, ino: int = 0,
                  timeout: Optional[float] = None) -> bytes:
        """An extended attribute's value; NotFound (ENODATA) if it is not set."""
        req = files_pb2.GetXattrRequest(subvolume=self.subvolume, path=_p(path), ino=ino,
                                        name=name)
        return bytes(self._rpc.unary(self._rpc.files.GetXattr, req, "getxattr",
                                     timeout=timeout).value)

    def list_xattrs(self, path: Path = "", *, ino: int = 0,
                    timeout: Optional[float] = None) -> List[str]:
        """The names of a file's extended attributes, sorted."""
        req = files_pb2.ListXattrsRequest(subvolume=self.subvolume, path=_p(path), ino=ino)
        return list(self._rpc.unary(self._rpc.files.ListXattrs, req, "listxattr",
                                    timeout=timeout).names)

    def remove_xattr(self, path: Path, name: str, *, ino: int = 0,
                     timeout: Optional[float] = None) -> None:
        """Removes an extended attribute; NotFound (ENODATA) if it is not set."""
        req = files_pb2.RemoveXattrRequest(subvolume=self.subvolume, path=_p(path), ino=ino,
                                           name=name)
        self._rpc.unary(self._rpc.files.RemoveXattr, req, "removexattr", timeout=timeout)


class _Now(enum.Enum):
    NOW = "now"


#: A time for :meth:`Files.set_attr`: the server's clock (utimensat's UTIME_NOW).
UTIME_NOW = _Now.NOW


def _chunks(source: Union[BinaryIO, Iterator[bytes]]) -> Iterator[bytes]:
    if hasattr(source, "read"):
        reader: BinaryIO = source  # type: ignore[assignment]
        while True:
            chunk = reader.read(WRITE_CHUNK)
            if not chunk:
                return
            yield chunk
    else:
        yield from source
