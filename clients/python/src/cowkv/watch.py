"""Watch (KV.Watch, etcd's watch): a key's or a range's changes as they
become durable, in revision order.

    with sv.watch("config/", prefix=True, prev_kv=True) as w:
        for ev in w:                      # blocks for the next event
            print(ev.type, ev.kv.key, ev.kv.value, ev.revision)
            if done:
                w.cancel()                # the iteration then ends

    # Resume after a restart from the revision after the last one seen:
    for ev in sv.watch("config/", prefix=True, start_revision=last + 1): ...

Every event of one revision arrives together (a fragmented revision is
joined first). The server ends a watcher by itself only with a reason: the
iteration then raises :class:`cowkv.Compacted` (the start is older than
the history; ``compact_revision`` is the oldest revision still served —
restart there), :class:`WatchCanceled` (``code``: the subvolume was
deleted, the client read too slowly, the server stops) or the error of a
refused create (NotFound for an unknown subvolume, InvalidArgument, ...).
"""

from __future__ import annotations

import dataclasses
import enum
import queue
import threading
from types import TracebackType
from typing import Any, Iterator, List, Optional, Type

import grpc

from cowkv import errors
from cowkv._rpc import Rpc
from cowkv.values import Key, KeyValue, to_bytes
from cowkv.v1 import kv_pb2

__all__ = ["EventType", "WatchEvent", "FileEvent", "Watch", "WatchCanceled", "EventAssembler",
           "check_created", "prefix_end", "watch_create"]


class EventType(enum.Enum):
    PUT = "PUT"
    DELETE = "DELETE"


@dataclasses.dataclass(frozen=True)
class WatchEvent:
    """One change of one key (etcd's mvccpb.Event). ``kv``: the key as the
    change left it; for a DELETE only the key and ``mod_revision`` (the
    delete's revision). ``prev_kv``: the key before (``prev_kv=True``
    watchers; None when the change created it)."""

    type: EventType
    kv: KeyValue
    prev_kv: Optional[KeyValue]

    @property
    def revision(self) -> int:
        return self.kv.mod_revision


@dataclasses.dataclass(frozen=True)
class FileEvent:
    """One change of the file tree (a file watcher's event, ``Files.watch``;
    docs/design.md "File watch"). ``type``: "CREATE", "MKDIR", "SYMLINK",
    "LINK", "UNLINK", "RMDIR", "RENAME", "EXCHANGE", "MODIFY", "ATTRIB" or
    "XATTR". ``path`` is relative to the subvolume root (no leading "/");
    ``new_path`` the other path of a RENAME or EXCHANGE ("" otherwise). A
    data or attribute change names one of the inode's names. ``paths_lost``:
    the paths were too long to record (both empty): rescan."""

    type: str
    revision: int
    ino: int
    path: str
    new_path: str
    paths_lost: bool


class WatchCanceled(errors.CowkvError):
    """The server ended the watcher: ``code`` is the WatchCancelCode name
    ("WATCH_CANCEL_SUBVOLUME_DELETED", "WATCH_CANCEL_SLOW_READER",
    "WATCH_CANCEL_SERVER", ...)."""

    def __init__(self, message: str, code_name: str, grpc_code: Optional[grpc.StatusCode]) -> None:
        super().__init__(message, grpc_code, "watch")
        self.cancel_code = code_name


def prefix_end(prefix: bytes) -> bytes:
    """The range_end of every key starting with ``prefix`` (etcd's
    GetPrefixRangeEnd); b"\\0" (every key) for a prefix of 0xff bytes."""
    end = bytearray(prefix)
    while end and end[-1] == 0xFF:
        end.pop()
    if not end:
        return b"\0"
    end[-1] += 1
    return bytes(end)


_END = object()


def _status_code(value: int) -> Optional[grpc.StatusCode]:
    for c in grpc.StatusCode:
        if c.value[0] == value:
            return c
    return None


def _cancel_error(r: kv_pb2.WatchResponse) -> errors.CowkvError:
    code_name = kv_pb2.WatchCancelCode.Name(r.cancel_code)
    grpc_code = _status_code(r.error_code) if r.error_code else None
    if r.cancel_code == kv_pb2.WATCH_CANCEL_COMPACTED:
        err: errors.CowkvError = errors.Compacted(r.cancel_reason, grpc_code, "watch")
        err.metadata = {"compact_revision": str(r.compact_revision)}
    elif r.cancel_code == kv_pb2.WATCH_CANCEL_REFUSED and grpc_code is not None:
        err = errors.error_class(grpc_code, r.cancel_reason)(r.cancel_reason, grpc_code, "watch")
    else:
        err = WatchCanceled(r.cancel_reason, code_name, grpc_code)
    err.reason = r.error_reason
    return err


def check_created(first: Optional[kv_pb2.WatchResponse]) -> None:
    """Raises unless ``first`` (the stream's first answer, None = the stream
    ended) says the watcher was created."""
    if first is None:
        raise errors.Unavailable("the stream ended before the watcher was created",
                                 grpc.StatusCode.UNAVAILABLE, "watch")
    if first.canceled:
        raise _cancel_error(first)


class EventAssembler:
    """Turns a watcher's answers into whole revisions of events, without I/O
    (shared by :class:`Watch` and cowkv.aio). ``feed`` returns the events of
    a completed revision, [] while more answers are needed, None once the
    client's cancel ended the watcher; it raises the error of a server
    cancel."""

    def __init__(self, header_revision: int) -> None:
        self.header_revision = header_revision
        self._events: List[Any] = []  # WatchEvent, or FileEvent for a file watcher

    def feed(self, r: kv_pb2.WatchResponse) -> Optional[List[Any]]:
        self.header_revision = max(self.header_revision, r.revision)
        if r.canceled:
            if r.cancel_code == kv_pb2.WATCH_CANCEL_CLIENT:
                return None
            raise _cancel_error(r)
        for f in r.file_events:
            self._events.append(FileEvent(kv_pb2.FileWatchEvent.Type.Name(f.type), f.revision,
                                          f.ino, f.path, f.new_path, f.paths_lost))
        for e in r.events:
            self._events.append(WatchEvent(
                EventType.PUT if e.type == kv_pb2.WatchEvent.PUT else EventType.DELETE,
                KeyValue.from_proto(e.kv),
                KeyValue.from_proto(e.prev_kv) if e.HasField("prev_kv") else None))
        if not self._events or r.fragment:
            return []
        events, self._events = self._events, []
        return events


class Watch:
    """One watcher on its own stream, created when the constructor returns
    (a refused create raises there); iterate it for :class:`WatchEvent`.
    ``cancel()`` (from any thread) ends the iteration; use it with ``with``
    to cancel on exit. Not for several iterating threads."""

    def __init__(self, rpc: Rpc, create: kv_pb2.WatchCreateRequest,
                 timeout: Optional[float] = None) -> None:
        self._requests: "queue.Queue[object]" = queue.Queue()
        self._requests.put(kv_pb2.WatchRequest(create_request=create))
        self._lock = threading.Lock()
        self._canceled = False
        self._pending: List[Any] = []  # WatchEvent, or FileEvent for a file watcher
        self.watch_id = 0
        self._call: Any = rpc.kv.Watch(self._request_iter(), metadata=rpc.metadata,
                                       timeout=timeout)
        self._responses = iter(self._call)
        # Wait for the create's answer, so that every change made after
        # watch() returns is seen (a start of 0 is resolved by the server).
        first = self._next_response()
        try:
            check_created(first)
        except errors.CowkvError:
            self._close()
            raise
        assert first is not None
        self.watch_id = first.watch_id
        self._assembler = EventAssembler(first.revision)

    @property
    def header_revision(self) -> int:
        """The newest store revision the server reported on this stream."""
        return self._assembler.header_revision

    def _request_iter(self) -> Iterator[kv_pb2.WatchRequest]:
        while True:
            r = self._requests.get()
            if r is _END:
                return
            yield r  # type: ignore[misc]

    def _next_response(self) -> Optional[kv_pb2.WatchResponse]:
        try:
            r: kv_pb2.WatchResponse = next(self._responses)
            return r
        except StopIteration:
            return None
        except grpc.RpcError as e:
            if self._canceled and e.code() == grpc.StatusCode.CANCELLED:
                return None
            raise errors.from_rpc_error(e, "watch") from None

    def _fill(self) -> bool:
        """Reads responses until events (a whole revision) or the end."""
        while True:
            r = self._next_response()
            if r is None:
                return False
            if r.canceled:
                self._close()
            events = self._assembler.feed(r)
            if events is None:
                return False
            if events:
                self._pending = events
                return True

    def __iter__(self) -> "Watch":
        return self

    def __next__(self) -> Any:  # WatchEvent (FileEvent for Files.watch)
        if not self._pending and not self._fill():
            raise StopIteration
        return self._pending.pop(0)

    def cancel(self) -> None:
        """Cancels the watcher (from any thread): the iteration ends; events
        not yet read are dropped. Idempotent."""
        with self._lock:
            if self._canceled:
                return
            self._canceled = True
        self._requests.put(_END)
        self._call.cancel()  # ends the stream, and the server's watcher with it

    def _close(self) -> None:
        with self._lock:
            self._canceled = True
        self._requests.put(_END)

    def __enter__(self) -> "Watch":
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        self.cancel()


def watch_create(subvolume: str, key: Key, range_end: Optional[Key], prefix: bool,
                 start_revision: int, prev_kv: bool, no_put: bool, no_delete: bool,
                 progress_notify: bool) -> kv_pb2.WatchCreateRequest:
    k = to_bytes(key)
    if prefix and range_end is not None:
        raise errors.InvalidArgument("give prefix or range_end, not both", None, "watch")
    end = prefix_end(k) if prefix else (b"" if range_end is None else to_bytes(range_end))
    filters = []
    if no_put:
        filters.append(kv_pb2.WatchCreateRequest.NOPUT)
    if no_delete:
        filters.append(kv_pb2.WatchCreateRequest.NODELETE)
    return kv_pb2.WatchCreateRequest(subvolume=subvolume, key=k, range_end=end,
                                     start_revision=start_revision, prev_kv=prev_kv,
                                     filters=filters, progress_notify=progress_notify)


def file_watch_create(subvolume: str, prefix: str, start_revision: int,
                      progress_notify: bool) -> kv_pb2.WatchCreateRequest:
    return kv_pb2.WatchCreateRequest(subvolume=subvolume,
                                     files=kv_pb2.FileWatchCreate(prefix=prefix),
                                     start_revision=start_revision,
                                     progress_notify=progress_notify)
