"""cowkv.aio's client: a grpc.aio connection to cowkvd and its subvolumes.

    async with cowkv.aio.connect("127.0.0.1:7420") as db:
        await db.create_subvolume("data")
        sv = db.subvolume("data")
        await sv.put("k", "v", timeout=2.0)
"""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import IO, Any, List, Optional, Sequence, Tuple, Type, Union

import grpc
import grpc.aio

from cowkv import errors
from cowkv._rpc import make_channel
from cowkv.aio._rpc import AioRpc
from cowkv.aio.kv import Subvolume
from cowkv.client import DEFAULT_ADDRESS, DEFAULT_TIMEOUT, SubvolumeInfo, VersionInfo
from cowkv.aio.send import AioReceiveSource, AioSendStream, receive_stream
from cowkv.client import DEFAULT_STREAM_TIMEOUT
from cowkv.send import (PartialReceive, ReceiveResult, SendStats, send_request)
from cowkv._validate import check_name
from cowkv.v1 import admin_pb2, subvolumes_pb2

from cowkv.retry import UnavailableRetry

__all__ = ["connect", "Client"]


def connect(addr: str = DEFAULT_ADDRESS, token: Optional[str] = None,
            timeout: Optional[float] = DEFAULT_TIMEOUT, *, tls: bool = False,
            root_certificates: Optional[bytes] = None,
            options: Sequence[Tuple[str, Any]] = (),
            wait_ready: Optional[float] = None,
            retry: Optional[UnavailableRetry] = None) -> "Client":
    """A client on a grpc.aio channel to cowkvd at ``addr``; arguments as
    cowkv.connect's. Use it with ``async with`` (which waits ``wait_ready``
    seconds for the channel when given, and closes it on exit), or await
    :meth:`Client.wait_ready` and :meth:`Client.close` yourself. Call it
    with an event loop running (inside a coroutine)."""
    if retry is not None:
        options = list(options) + list(retry.channel_options())
    channel = make_channel(addr, tls, root_certificates, options, module=grpc.aio)
    return Client(AioRpc(channel, token, timeout), addr, wait_ready)


class Client:
    """An asyncio connection to one cowkvd (for one event loop)."""

    def __init__(self, rpc: AioRpc, addr: str, wait_ready: Optional[float] = None) -> None:
        self._rpc = rpc
        self.address = addr
        self._wait_ready = wait_ready

    async def wait_ready(self, timeout: float) -> None:
        """Waits until the channel is connected; Unavailable after ``timeout`` s."""
        try:
            await asyncio.wait_for(self._rpc.channel.channel_ready(), timeout)
        except asyncio.TimeoutError:
            raise errors.Unavailable(f"cowkvd at {self.address} not reachable within {timeout} s",
                                     grpc.StatusCode.UNAVAILABLE, "connect") from None

    async def close(self) -> None:
        """Closes the channel; calls in flight are cancelled."""
        await self._rpc.channel.close()

    async def __aenter__(self) -> "Client":
        if self._wait_ready is not None:
            try:
                await self.wait_ready(self._wait_ready)
            except BaseException:
                await self.close()
                raise
        return self

    async def __aexit__(self, exc_type: Optional[Type[BaseException]],
                        exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        await self.close()

    def subvolume(self, name: str = "default") -> Subvolume:
        """A handle on a subvolume (or snapshot) by name; no call is made."""
        return Subvolume(self._rpc, name)

    async def create_subvolume(self, name: str, *,
                               timeout: Optional[float] = None) -> SubvolumeInfo:
        """Creates an empty subvolume; AlreadyExists if the name is taken."""
        req = subvolumes_pb2.CreateSubvolumeRequest(name=name)
        return SubvolumeInfo.from_proto(
            await self._rpc.unary(self._rpc.subvolumes.Create, req, "create", timeout))

    async def list_subvolumes(self, read_only: bool = False, snapshots_only: bool = False,
                              sort: Union[str, Sequence[str], None] = None, *,
                              timeout: Optional[float] = None) -> List[SubvolumeInfo]:
        """As cowkv.Client.list_subvolumes."""
        keys = [sort] if isinstance(sort, str) else list(sort or [])
        req = subvolumes_pb2.ListSubvolumesRequest(read_only=read_only,
                                                   snapshots_only=snapshots_only, sort=keys)
        resp = await self._rpc.unary(self._rpc.subvolumes.List, req, "list", timeout)
        return [SubvolumeInfo.from_proto(m) for m in resp.subvolumes]

    async def show_subvolume(self, name: str, *,
                             timeout: Optional[float] = None) -> SubvolumeInfo:
        """One subvolume; NotFound if no subvolume has the name."""
        req = subvolumes_pb2.ShowSubvolumeRequest(name=name)
        return SubvolumeInfo.from_proto(
            await self._rpc.unary(self._rpc.subvolumes.Show, req, "show", timeout))

    async def rename_subvolume(self, name: str, new_name: str, *,
                               timeout: Optional[float] = None) -> None:
        req = subvolumes_pb2.RenameSubvolumeRequest(name=name, new_name=new_name)
        await self._rpc.unary(self._rpc.subvolumes.Rename, req, "rename", timeout)

    async def delete_subvolume(self, name: str, *, timeout: Optional[float] = None) -> None:
        """Deletes a subvolume by exact name (not "default")."""
        req = subvolumes_pb2.DeleteSubvolumeRequest(name=name)
        await self._rpc.unary(self._rpc.subvolumes.Delete, req, "delete", timeout)

    async def snapshot(self, source: str, name: str, read_only: bool = True, *,
                       timeout: Optional[float] = None) -> SubvolumeInfo:
        """Snapshots ``source`` as ``name`` (O(1))."""
        req = subvolumes_pb2.SnapshotRequest(source=source, name=name, read_only=read_only)
        return SubvolumeInfo.from_proto(
            await self._rpc.unary(self._rpc.subvolumes.Snapshot, req, "snapshot", timeout))

    # Send and receive (as cowkv.Client's; cowkv.send).

    def send(self, snapshot: str, parent: Optional[str] = None,
             resume_token: Optional[str] = None, *,
             timeout: Optional[float] = None) -> AioSendStream:
        """As cowkv.Client.send: ``async for chunk in db.send(...)``.
        ``timeout`` bounds the whole stream (default 600 s)."""
        req = send_request(snapshot, parent, resume_token)
        wait = timeout if timeout is not None else DEFAULT_STREAM_TIMEOUT
        return AioSendStream(self._rpc, req, wait)

    async def send_to(self, file: IO[bytes], snapshot: str, parent: Optional[str] = None,
                      resume_token: Optional[str] = None, *,
                      timeout: Optional[float] = None) -> SendStats:
        """As cowkv.Client.send_to (the file is written synchronously)."""
        async with self.send(snapshot, parent, resume_token, timeout=timeout) as stream:
            async for chunk in stream:
                file.write(chunk)
        assert stream.stats is not None
        return stream.stats

    async def receive(self, source: AioReceiveSource, name: str = "", *,
                      resumable: bool = False, dry_run: bool = False,
                      timeout: Optional[float] = None) -> ReceiveResult:
        """As cowkv.Client.receive; ``source`` may also be an async iterable
        of bytes (another server's :meth:`send`)."""
        if name:
            check_name("name", name)
        wait = timeout if timeout is not None else DEFAULT_STREAM_TIMEOUT
        return await receive_stream(self._rpc, source, name, resumable, dry_run, wait)

    async def partial_receives(self, *,
                               timeout: Optional[float] = None) -> List[PartialReceive]:
        """As cowkv.Client.partial_receives."""
        resp = await self._rpc.unary(self._rpc.subvolumes.PartialReceives,
                                     subvolumes_pb2.PartialReceivesRequest(),
                                     "partial_receives", timeout)
        return [PartialReceive.from_proto(p) for p in resp.partial]

    async def abort_receive(self, name: str, *, timeout: Optional[float] = None) -> None:
        """As cowkv.Client.abort_receive."""
        await self._rpc.unary(self._rpc.subvolumes.AbortReceive,
                              subvolumes_pb2.AbortReceiveRequest(name=name), "abort_receive",
                              timeout)

    async def digest(self, name: str, *, timeout: Optional[float] = None) -> str:
        """As cowkv.Client.digest."""
        resp = await self._rpc.unary(self._rpc.subvolumes.Digest,
                                     subvolumes_pb2.DigestSubvolumeRequest(name=name), "digest",
                                     timeout)
        return str(resp.sha256)

    async def sync(self, *, timeout: Optional[float] = None) -> int:
        """Commits the engine transaction; returns the commit's generation."""
        resp = await self._rpc.unary(self._rpc.admin.Sync, admin_pb2.SyncRequest(), "sync",
                                     timeout)
        return int(resp.generation)

    async def version(self, *, timeout: Optional[float] = None) -> VersionInfo:
        """Versions of the server, the API and its libraries."""
        r = await self._rpc.unary(self._rpc.admin.Version, admin_pb2.VersionRequest(),
                                  "version", timeout)
        return VersionInfo(r.version, r.api, r.grpc_version, r.protobuf_version, r.nodesize)
