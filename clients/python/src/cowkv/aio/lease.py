"""cowkv.aio's leases (service Lease), as cowkv.Leases, awaited, with the
keep-alive as an asyncio task:

    lease = await sv.leases.grant(10)
    await sv.put("svc/a", b"1", lease=lease)
    async with sv.leases.keep_alive_task(lease) as ka:   # renews every TTL/3
        ...                                              # ka.lost, ka.error
    await sv.leases.revoke(lease)
"""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Any, List, Optional, Type

import grpc
import grpc.aio

from cowkv import errors
from cowkv.aio._rpc import AioRpc
from cowkv.lease import LeaseInfo
from cowkv.values import Durability, durability_proto
from cowkv.v1 import lease_pb2

__all__ = ["Leases", "KeepAliveTask"]


class Leases:
    """The leases of one subvolume (``sv.leases``)."""

    def __init__(self, rpc: AioRpc, subvolume: str) -> None:
        self._rpc = rpc
        self.subvolume = subvolume

    async def grant(self, ttl: int, id: int = 0,  # noqa: A002 - etcd's name
                    durability: Durability = Durability.DEFAULT, *,
                    timeout: Optional[float] = None) -> int:
        """A new lease of ``ttl`` seconds; returns its id (``id`` 0 = the
        server picks). AlreadyExists for an id in use."""
        req = lease_pb2.LeaseGrantRequest(subvolume=self.subvolume, ttl=ttl, id=id,
                                          durability=durability_proto(durability))
        return int((await self._rpc.unary(self._rpc.lease.Grant, req, "lease grant",
                                          timeout)).id)

    async def revoke(self, id: int,  # noqa: A002
                     durability: Durability = Durability.DEFAULT, *,
                     timeout: Optional[float] = None) -> int:
        """Deletes the lease and its keys in one revision (returned);
        NotFound if there is no such lease."""
        req = lease_pb2.LeaseRevokeRequest(subvolume=self.subvolume, id=id,
                                           durability=durability_proto(durability))
        return int((await self._rpc.unary(self._rpc.lease.Revoke, req, "lease revoke",
                                          timeout)).revision)

    async def time_to_live(self, id: int, keys: bool = False,  # noqa: A002
                           *, timeout: Optional[float] = None) -> LeaseInfo:
        """The lease's granted and remaining TTL, and its keys if asked."""
        req = lease_pb2.LeaseTimeToLiveRequest(subvolume=self.subvolume, id=id, keys=keys)
        return LeaseInfo.from_proto(await self._rpc.unary(self._rpc.lease.TimeToLive, req,
                                                          "lease timetolive", timeout))

    async def list(self, *, timeout: Optional[float] = None) -> List[int]:
        """The ids of the subvolume's leases, in increasing order."""
        req = lease_pb2.LeaseLeasesRequest(subvolume=self.subvolume)
        resp = await self._rpc.unary(self._rpc.lease.Leases, req, "lease list", timeout)
        return [int(i) for i in resp.ids]

    async def keep_alive(self, id: int, *,  # noqa: A002
                         timeout: Optional[float] = None) -> int:
        """One keep-alive: restarts the lease's TTL and returns it (seconds).
        NotFound if the lease is gone."""
        call = self._rpc.stream(self._rpc.lease.KeepAlive, self._rpc.deadline(timeout))
        try:
            ttl = await _renew(call, self.subvolume, id)
        finally:
            call.cancel()
        if ttl <= 0:
            raise errors.NotFound(f"lease {id} not found", grpc.StatusCode.NOT_FOUND,
                                  "lease keep-alive")
        return ttl

    def keep_alive_task(self, id: int) -> "KeepAliveTask":  # noqa: A002
        """A task that keeps the lease alive every TTL/3 on one KeepAlive
        stream until stopped; ``async with`` starts and stops it."""
        return KeepAliveTask(self, id)


async def _renew(call: Any, subvolume: str, lease_id: int) -> int:
    """Sends one keep-alive on ``call`` and returns the TTL (0 = gone)."""
    try:
        await call.write(lease_pb2.LeaseKeepAliveRequest(subvolume=subvolume, id=lease_id))
        resp = await call.read()
    except grpc.aio.AioRpcError as e:
        raise errors.from_rpc_error(e, "lease keep-alive") from None
    if resp is grpc.aio.EOF:
        raise errors.Unavailable("the keep-alive stream ended", grpc.StatusCode.UNAVAILABLE,
                                 "lease keep-alive")
    return int(resp.ttl)


class KeepAliveTask:
    """Keeps one lease alive (cowkv.KeepAliveThread as an asyncio task).
    ``lost``: the lease was found gone; ``error``: the CowkvError that ended
    the task early, else None. ``ttl``: the last TTL the server gave."""

    def __init__(self, leases: Leases, lease_id: int) -> None:
        self.lease_id = lease_id
        self.lost = False
        self.error: Optional[errors.CowkvError] = None
        self.ttl = 0
        self.renewals = 0
        self._leases = leases
        self._task: Optional["asyncio.Task[None]"] = None

    def start(self) -> "KeepAliveTask":
        """Starts the task (idempotent); the first renewal is immediate."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(),
                                             name=f"cowkv-keepalive-{self.lease_id}")
        return self

    async def _run(self) -> None:
        rpc = self._leases._rpc
        call = rpc.stream(rpc.lease.KeepAlive, None)
        try:
            while True:
                ttl = await _renew(call, self._leases.subvolume, self.lease_id)
                if ttl <= 0:
                    self.lost = True
                    return
                self.ttl, self.renewals = ttl, self.renewals + 1
                await asyncio.sleep(max(ttl / 3.0, 0.1))
        except errors.CowkvError as e:
            self.error = e
        finally:
            call.cancel()

    @property
    def done(self) -> bool:
        """True once the task ended (lost, error or stopped)."""
        return self._task is not None and self._task.done()

    async def stop(self) -> None:
        """Stops the task and closes its stream (idempotent)."""
        if self._task is None:
            return
        self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            if not self._task.cancelled():
                raise  # the caller itself was cancelled

    async def __aenter__(self) -> "KeepAliveTask":
        return self.start()

    async def __aexit__(self, exc_type: Optional[Type[BaseException]],
                        exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        await self.stop()
