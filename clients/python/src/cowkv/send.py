"""Send and receive of read-only snapshots (docs/api.md "Subvolumes";
docs/operations.md "Backup and restore"), for :class:`cowkv.Client` and
:class:`cowkv.aio.Client`.

    with open("snap.stream", "wb") as f:
        client_a.send_to(f, "snap")                 # or: for chunk in client_a.send("snap")
    result = client_b.receive(client_a.send("snap"), name="copy")
    assert client_b.digest("copy") == client_a.digest("snap")

A send stream is bytes in order: :meth:`Client.send` iterates its chunks
(as they arrive: never the whole stream in memory) and
:meth:`Client.receive` takes any iterable of bytes or a binary file, sent on
in pieces of at most 1 MiB."""

from __future__ import annotations

import dataclasses
from typing import IO, Any, Iterable, Iterator, List, Optional, Union

from cowkv import errors
from cowkv.v1 import subvolumes_pb2

__all__ = ["SendStats", "SendStream", "ReceiveResult", "PartialReceive", "ReceiveSource",
           "RECEIVE_CHUNK_BYTES"]

#: Bytes per ReceiveRequest (the server takes at most 4 MiB per message).
RECEIVE_CHUNK_BYTES = 1 << 20

#: What :meth:`Client.receive` reads: an iterable of bytes (e.g. another
#: server's :meth:`Client.send`) or a binary file opened for reading.
ReceiveSource = Union[Iterable[bytes], IO[bytes]]


@dataclasses.dataclass(frozen=True)
class SendStats:
    """What one send did (its last message)."""
    records: int
    bytes: int
    items: int
    deletes: int
    clones: int
    data_bytes: int
    nodes_read: int
    subtrees_skipped: int

    @classmethod
    def from_proto(cls, m: subvolumes_pb2.SendStats) -> "SendStats":
        return cls(m.records, m.bytes, m.items, m.deletes, m.clones, m.data_bytes,
                   m.nodes_read, m.subtrees_skipped)


@dataclasses.dataclass(frozen=True)
class ReceiveResult:
    """What one receive made: the subvolume's name and id (a dry run: the
    name it would have had, id 0), whether the stream was incremental and
    the local parent it applied to, and its counts."""
    name: str
    id: int
    incremental: bool
    parent: str
    records: int
    bytes: int
    items: int
    deletes: int
    clones: int
    data_bytes: int

    @classmethod
    def from_proto(cls, m: subvolumes_pb2.ReceiveResponse) -> "ReceiveResult":
        return cls(m.name, m.id, m.incremental, m.parent, m.records, m.bytes, m.items,
                   m.deletes, m.clones, m.data_bytes)


@dataclasses.dataclass(frozen=True)
class PartialReceive:
    """A resumable receive that stopped before its end: ``token`` goes to
    the sender's :meth:`Client.send` (``resume_token=``)."""
    name: str
    token: str
    records: int
    bytes: int
    uuid: str
    generation: int
    parent_uuid: str
    in_use: bool

    @classmethod
    def from_proto(cls, m: subvolumes_pb2.PartialReceive) -> "PartialReceive":
        return cls(m.name, m.token, m.records, m.bytes, m.uuid, m.generation, m.parent_uuid,
                   m.in_use)


def send_request(snapshot: str, parent: Optional[str],
                 resume_token: Optional[str]) -> subvolumes_pb2.SendRequest:
    """The SendRequest; InvalidArgument without a call for an empty
    snapshot without a token."""
    if not snapshot and not resume_token:
        raise errors.InvalidArgument("send: snapshot: empty (give a snapshot or a resume token)",
                                     None, "send")
    return subvolumes_pb2.SendRequest(snapshot=snapshot, parent=parent or "",
                                      resume_token=resume_token or "")


class SendStream:
    """The chunks of one send stream, in order, as they arrive. Iterate it
    to the end (then :attr:`stats` is set) or :meth:`close` it, which
    cancels the call; usable as a context manager."""

    def __init__(self, messages: Iterator[Any]) -> None:
        self._messages = messages
        #: What the send did, once the stream was read to its end.
        self.stats: Optional[SendStats] = None

    def __iter__(self) -> Iterator[bytes]:
        for m in self._messages:
            if m.HasField("stats"):
                self.stats = SendStats.from_proto(m.stats)
            if m.chunk:
                yield m.chunk
        if self.stats is None:
            raise errors.Internal("send: the stream ended without its stats message", None, "send")

    def close(self) -> None:
        """Cancels the call if the stream was not read to its end."""
        close = getattr(self._messages, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> "SendStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def source_chunks(source: ReceiveSource) -> Iterator[bytes]:
    """``source``'s bytes in pieces of at most RECEIVE_CHUNK_BYTES."""
    read = getattr(source, "read", None)
    if read is not None:
        while True:
            b = read(RECEIVE_CHUNK_BYTES)
            if not b:
                return
            yield bytes(b)
    for b in source:
        for off in range(0, len(b), RECEIVE_CHUNK_BYTES):
            yield bytes(b[off:off + RECEIVE_CHUNK_BYTES])


def receive_requests(chunks: Iterator[bytes], name: str, dry_run: bool, resumable: bool,
                     failure: List[BaseException]) -> Iterator[subvolumes_pb2.ReceiveRequest]:
    """The ReceiveRequests for ``chunks``, the options in the first. An
    error reading the source is kept in ``failure`` (the caller raises it
    as it is) and cancels the call."""
    first: Optional[subvolumes_pb2.ReceiveRequest] = subvolumes_pb2.ReceiveRequest(
        name=name, dry_run=dry_run, resumable=resumable)
    try:
        for chunk in chunks:
            if first is not None:
                first.chunk = chunk
                yield first
                first = None
            else:
                yield subvolumes_pb2.ReceiveRequest(chunk=chunk)
    except Exception as e:  # noqa: BLE001 - re-raised by the caller
        failure.append(e)
        raise
    if first is not None:
        yield first
