"""The client: a connection to cowkvd, subvolumes and snapshots, Admin.

    import cowkv
    with cowkv.connect("127.0.0.1:7420") as client:
        client.create_subvolume("data")
        sv = client.subvolume("data")
        sv.put("k", "v")
        client.snapshot("data", "data@2026-11-22", read_only=True)
"""

from __future__ import annotations

import dataclasses
from types import TracebackType
from typing import IO, Any, Dict, List, Optional, Sequence, Tuple, Type, Union

import grpc

from cowkv import errors
from cowkv._rpc import Rpc, make_channel
from cowkv._validate import check_name
from cowkv.kv import Subvolume
from cowkv.retry import UnavailableRetry
from cowkv.send import (PartialReceive, ReceiveResult, ReceiveSource, SendStats, SendStream,
                        receive_requests, send_request, source_chunks)
from cowkv.v1 import admin_pb2, subvolumes_pb2

__all__ = ["connect", "Client", "SubvolumeInfo", "CheckResult", "VersionInfo",
           "DEFAULT_ADDRESS", "DEFAULT_TIMEOUT"]

DEFAULT_ADDRESS = "127.0.0.1:7420"
#: Seconds a unary call may take (gRPC sets no deadline by itself).
DEFAULT_TIMEOUT = 30.0
#: Seconds a streaming file Read or Write may take.
DEFAULT_STREAM_TIMEOUT = 600.0


@dataclasses.dataclass(frozen=True)
class SubvolumeInfo:
    """What the store knows about one subvolume (cowkv.v1.SubvolumeInfo)."""

    id: int
    name: str
    parent_id: int  # the subvolume this is a snapshot of; 0 for a plain one
    generation: int  # engine generation of its root (when it last changed)
    last_snapshot: int  # generation of the last snapshot taken of it (0 = none)
    created_unix_ms: int
    read_only: bool
    creation_generation: int = 0  # generation that created it (btrfs's ogen)
    # show_subvolume only: names of its live snapshots, in id order.
    snapshots: Tuple[str, ...] = ()
    uuid: str = ""  # 32 hex digits: the subvolume's identity
    parent_uuid: str = ""  # a snapshot: its source's uuid; else ""
    received_uuid: str = ""  # a received subvolume: the sender's identity
    received_generation: int = 0  # ... and its generation there

    @classmethod
    def from_proto(cls, m: subvolumes_pb2.SubvolumeInfo) -> "SubvolumeInfo":
        return cls(m.id, m.name, m.parent_id, m.generation, m.last_snapshot,
                   m.created_unix_ms, m.read_only, m.creation_generation,
                   tuple(m.snapshots), m.uuid, m.parent_uuid, m.received_uuid,
                   m.received_generation)


@dataclasses.dataclass(frozen=True)
class CheckResult:
    """The result of an online check (cowkv.v1.CheckResponse)."""

    ok: bool
    problems: List[str]
    generation: int
    fsid: str
    nodesize: int
    total_bytes: int
    trees: int
    nodes: int
    items: int
    extents: int
    used_bytes: int
    rechecked: bool


@dataclasses.dataclass(frozen=True)
class VersionInfo:
    """Versions of the server (cowkv.v1.VersionResponse)."""

    version: str
    api: str
    grpc_version: str
    protobuf_version: str
    nodesize: int


def connect(addr: str = DEFAULT_ADDRESS, token: Optional[str] = None,
            timeout: Optional[float] = DEFAULT_TIMEOUT, *,
            stream_timeout: Optional[float] = DEFAULT_STREAM_TIMEOUT,
            tls: bool = False, root_certificates: Optional[bytes] = None,
            options: Sequence[Tuple[str, Any]] = (),
            wait_ready: Optional[float] = None,
            retry: Optional[UnavailableRetry] = None) -> "Client":
    """Opens a channel to cowkvd at ``addr`` ("host:port").

    ``token`` is sent as ``authorization: Bearer <token>`` (cowkvd
    ``--auth-token-file``). ``timeout`` is the deadline of each unary call in
    seconds (None = none), ``stream_timeout`` that of a streaming file read or
    write. ``tls``/``root_certificates`` select a TLS channel. The channel
    connects lazily; ``wait_ready`` (seconds) waits for it and raises
    :class:`cowkv.Unavailable` if the server is not reachable by then.
    ``retry``: retry the idempotent reads that fail UNAVAILABLE with this
    policy (off by default; docs/api.md "Retrying UNAVAILABLE").
    """
    if retry is not None:
        options = list(options) + list(retry.channel_options())
    channel = make_channel(addr, tls, root_certificates, options)
    client = Client(Rpc(channel, token, timeout, stream_timeout), addr)
    if wait_ready is not None:
        client.wait_ready(wait_ready)
    return client


class Client:
    """A connection to one cowkvd. Thread-safe; close it (or use ``with``)."""

    def __init__(self, rpc: Rpc, addr: str) -> None:
        self._rpc = rpc
        self.address = addr

    # Connection.

    def wait_ready(self, timeout: float) -> None:
        """Waits until the channel is connected; Unavailable after ``timeout`` s."""
        try:
            grpc.channel_ready_future(self._rpc.channel).result(timeout=timeout)
        except grpc.FutureTimeoutError:
            raise errors.Unavailable(f"cowkvd at {self.address} not reachable within {timeout} s",
                                     grpc.StatusCode.UNAVAILABLE, "connect") from None

    def close(self) -> None:
        """Closes the channel; calls in flight are cancelled."""
        self._rpc.channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        self.close()

    # Subvolumes and snapshots.

    def subvolume(self, name: str = "default") -> Subvolume:
        """A handle on a subvolume (or snapshot) by name; no call is made."""
        return Subvolume(self._rpc, name)

    def create_subvolume(self, name: str, *, timeout: Optional[float] = None) -> SubvolumeInfo:
        """Creates an empty subvolume; AlreadyExists if the name is taken."""
        req = subvolumes_pb2.CreateSubvolumeRequest(name=name)
        return SubvolumeInfo.from_proto(self._rpc.unary(self._rpc.subvolumes.Create, req, "create",
                                                        timeout=timeout))

    def list_subvolumes(self, read_only: bool = False, snapshots_only: bool = False,
                        sort: Union[str, Sequence[str], None] = None,
                        *, timeout: Optional[float] = None) -> List[SubvolumeInfo]:
        """Every live subvolume and snapshot, "default" included, in id order.

        As btrfs's ``subvolume list -r -s --sort=...``, filtered and sorted by
        the server: ``read_only`` keeps read-only ones, ``snapshots_only``
        snapshots (parent_id != 0); ``sort`` is ``"[+|-]FIELD[,...]"`` or a
        sequence of such keys, FIELD one of gen, ogen, rootid (id), path
        (name), '-' descending, ties by id. An unknown key is InvalidArgument
        naming it."""
        keys = [sort] if isinstance(sort, str) else list(sort or [])
        req = subvolumes_pb2.ListSubvolumesRequest(read_only=read_only,
                                                   snapshots_only=snapshots_only, sort=keys)
        resp = self._rpc.unary(self._rpc.subvolumes.List, req, "list", timeout=timeout)
        return [SubvolumeInfo.from_proto(m) for m in resp.subvolumes]

    def show_subvolume(self, name: str, *, timeout: Optional[float] = None) -> SubvolumeInfo:
        """One subvolume; NotFound if no subvolume has the name."""
        req = subvolumes_pb2.ShowSubvolumeRequest(name=name)
        return SubvolumeInfo.from_proto(self._rpc.unary(self._rpc.subvolumes.Show, req, "show",
                                                        timeout=timeout))

    def rename_subvolume(self, name: str, new_name: str,
                         *, timeout: Optional[float] = None) -> None:
        """Renames a subvolume; its id, contents and snapshots stay."""
        req = subvolumes_pb2.RenameSubvolumeRequest(name=name, new_name=new_name)
        self._rpc.unary(self._rpc.subvolumes.Rename, req, "rename", timeout=timeout)

    def delete_subvolume(self, name: str, *, timeout: Optional[float] = None) -> None:
        """Deletes a subvolume by exact name (not "default": FailedPrecondition)."""
        req = subvolumes_pb2.DeleteSubvolumeRequest(name=name)
        self._rpc.unary(self._rpc.subvolumes.Delete, req, "delete", timeout=timeout)

    def snapshot(self, source: str, name: str, read_only: bool = True,
                 *, timeout: Optional[float] = None) -> SubvolumeInfo:
        """Snapshots ``source`` as ``name`` (O(1)); a read-only snapshot
        refuses every write with :class:`cowkv.ReadOnly`."""
        req = subvolumes_pb2.SnapshotRequest(source=source, name=name, read_only=read_only)
        return SubvolumeInfo.from_proto(self._rpc.unary(self._rpc.subvolumes.Snapshot, req,
                                                        "snapshot", timeout=timeout))

    def sync_subvolumes(self, ids: Optional[Sequence[int]] = None,
                        timeout: Optional[float] = None) -> List[int]:
        """Waits until deleted subvolumes' trees are dropped and their space is
        free (btrfs ``subvolume sync``): the given ids, or every subvolume
        deleted before the call. Returns the ids it waited for. NotFound for an
        id that never was a subvolume, FailedPrecondition for a live one;
        DeadlineExceeded (naming the ids still pending) after ``timeout``
        seconds (default: the client's timeout)."""
        wait = timeout if timeout is not None else self._rpc.timeout
        req = subvolumes_pb2.SyncSubvolumesRequest(ids=list(ids or []))
        if wait is not None:
            # The server stops first, so its answer names what is pending.
            req.timeout_ms = max(1, int(wait * 1000 - min(500.0, wait * 100)))
        resp = self._rpc.unary(self._rpc.subvolumes.Sync, req, "sync_subvolumes",
                               timeout=wait)
        return list(resp.synced)

    # Send and receive (cowkv.send).

    def send(self, snapshot: str, parent: Optional[str] = None,
             resume_token: Optional[str] = None, *, timeout: Optional[float] = None) -> SendStream:
        """The send stream of the read-only ``snapshot``: the whole of it, or
        with ``parent`` (an older read-only snapshot of its lineage that the
        receiver holds) only the difference. With ``resume_token`` (a
        :class:`PartialReceive`'s at the receiver) the rest of the stream
        that receive stopped in; ``snapshot`` may then be "". Iterating
        yields the chunks; errors (NotFound for an unknown snapshot,
        FailedPrecondition for a writable one, InvalidArgument with reason
        RESUME_TOKEN for a damaged token, NotFound / RESUME_MISMATCH for one
        whose snapshots are not here) come from the iteration. ``timeout``
        bounds the whole stream (default: the client's stream timeout)."""
        req = send_request(snapshot, parent, resume_token)
        return SendStream(self._rpc.server_stream(self._rpc.subvolumes.Send, req, "send",
                                                  timeout=timeout))

    def send_to(self, file: IO[bytes], snapshot: str, parent: Optional[str] = None,
                resume_token: Optional[str] = None, *,
                timeout: Optional[float] = None) -> SendStats:
        """Writes the whole send stream (as :meth:`send`) to a binary file and
        returns the send's stats. On error the file holds a prefix."""
        with self.send(snapshot, parent, resume_token, timeout=timeout) as stream:
            for chunk in stream:
                file.write(chunk)
        assert stream.stats is not None
        return stream.stats

    def receive(self, source: ReceiveSource, name: str = "", *, resumable: bool = False,
                dry_run: bool = False, timeout: Optional[float] = None) -> ReceiveResult:
        """Receives a send stream, read from ``source`` (an iterable of bytes
        such as another server's :meth:`send`, or a binary file) 1 MiB at a
        time, into a new read-only subvolume ``name`` (default: the name the
        snapshot had at the sender). It appears only once the whole stream
        arrived and verified. ``dry_run`` checks and writes nothing;
        ``resumable`` keeps what arrived if the receive fails or is cut (a
        :class:`PartialReceive`; continuation streams always are). Errors:
        DataLoss (reason STREAM_CORRUPT) for a damaged or truncated stream,
        NotFound / FailedPrecondition (PARENT_MISMATCH) for an incremental
        stream whose parent is missing or differs, AlreadyExists for a taken
        name (PARTIAL_RECEIVE: a partial receive's), RESUME_MISMATCH for a
        continuation that does not fit. An exception reading ``source``
        cancels the call and is raised as it is."""
        if name:
            check_name("name", name)
        failure: List[BaseException] = []
        reqs = receive_requests(source_chunks(source), name, dry_run, resumable, failure)
        try:
            resp = self._rpc.client_stream(self._rpc.subvolumes.Receive, reqs, "receive",
                                           timeout=timeout)
        except errors.CowkvError:
            if failure:
                raise failure[0] from None
            raise
        return ReceiveResult.from_proto(resp)

    def partial_receives(self, *, timeout: Optional[float] = None) -> List[PartialReceive]:
        """The partial receives this server keeps, each with its resume token."""
        resp = self._rpc.unary(self._rpc.subvolumes.PartialReceives,
                               subvolumes_pb2.PartialReceivesRequest(), "partial_receives",
                               timeout=timeout)
        return [PartialReceive.from_proto(p) for p in resp.partial]

    def abort_receive(self, name: str, *, timeout: Optional[float] = None) -> None:
        """Drops the partial receive ``name``: NotFound (RESUME_MISMATCH) if
        there is none, FailedPrecondition (PARTIAL_RECEIVE) while a receive
        writes to it."""
        self._rpc.unary(self._rpc.subvolumes.AbortReceive,
                        subvolumes_pb2.AbortReceiveRequest(name=name), "abort_receive",
                        timeout=timeout)

    def digest(self, name: str, *, timeout: Optional[float] = None) -> str:
        """SHA-256 (64 hex digits) over a subvolume's items and file data:
        equal for a sent snapshot and its received copy."""
        return str(self._rpc.unary(self._rpc.subvolumes.Digest,
                                   subvolumes_pb2.DigestSubvolumeRequest(name=name), "digest",
                                   timeout=timeout).sha256)

    # Admin.

    def sync(self, *, timeout: Optional[float] = None) -> int:
        """Commits the engine transaction: everything written before survives
        a crash. Returns the commit's generation."""
        return int(self._rpc.unary(self._rpc.admin.Sync, admin_pb2.SyncRequest(), "sync",
                                   timeout=timeout).generation)

    def stats(self, *, timeout: Optional[float] = None) -> Dict[str, int]:
        """Every engine and server counter, by the field names of StatsResponse
        (its counters only: a read replica's status, `server_replicas`, is not
        a counter and is left out)."""
        resp = self._rpc.unary(self._rpc.admin.Stats, admin_pb2.StatsRequest(), "stats",
                               timeout=timeout)
        return {f.name: int(getattr(resp, f.name)) for f in resp.DESCRIPTOR.fields
                if f.type != f.TYPE_MESSAGE}

    def check(self, timeout: Optional[float] = None) -> CheckResult:
        """Online read-only verification of the committed state. Findings are
        data (``ok``, ``problems``), not an exception."""
        r = self._rpc.unary(self._rpc.admin.Check, admin_pb2.CheckRequest(), "check", timeout)
        return CheckResult(r.ok, list(r.problems), r.generation, r.fsid, r.nodesize,
                           r.total_bytes, r.trees, r.nodes, r.items, r.extents, r.used_bytes,
                           r.rechecked)

    def version(self, *, timeout: Optional[float] = None) -> VersionInfo:
        """Versions of the server, the API and its libraries."""
        r = self._rpc.unary(self._rpc.admin.Version, admin_pb2.VersionRequest(), "version",
                            timeout=timeout)
        return VersionInfo(r.version, r.api, r.grpc_version, r.protobuf_version, r.nodesize)
