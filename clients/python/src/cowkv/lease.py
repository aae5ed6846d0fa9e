"""Leases (service Lease, etcd's lease API) and a lock built on them.

    leases = sv.leases
    lease = leases.grant(10)                    # id; TTL 10 s
    sv.put("svc/a", b"1", lease=lease)          # deleted when the lease goes
    with leases.keep_alive_thread(lease):       # keeps it alive meanwhile
        ...
    leases.revoke(lease)                        # deletes svc/a in one revision

    with sv.lock("jobs"):                       # etcd's concurrency.Mutex
        ...                                     # one holder at a time

Leases persist across server restarts; after a restart every lease's
remaining TTL restarts at its full TTL. An unknown lease raises
:class:`cowkv.NotFound` (ErrorInfo reason LEASE_NOT_FOUND).
"""

from __future__ import annotations

import dataclasses
import queue
import threading
import time
from types import TracebackType
from typing import Any, Iterator, List, Optional, Type

import grpc

from cowkv import errors
from cowkv._rpc import Rpc
from cowkv.txn import RangeResult
from cowkv.values import Durability, Key, durability_proto, to_bytes
from cowkv.v1 import kv_pb2, lease_pb2, lease_pb2_grpc

__all__ = ["LeaseInfo", "Leases", "KeepAliveThread", "Lock"]


@dataclasses.dataclass(frozen=True)
class LeaseInfo:
    """A lease's TTLs and keys (cowkv.v1.LeaseTimeToLiveResponse)."""

    id: int
    ttl: int  # seconds left, rounded up
    granted_ttl: int
    keys: List[bytes]

    @classmethod
    def from_proto(cls, r: lease_pb2.LeaseTimeToLiveResponse) -> "LeaseInfo":
        return cls(int(r.id), int(r.ttl), int(r.granted_ttl), list(r.keys))


class Leases:
    """The leases of one subvolume (``sv.leases``). Thread-safe."""

    def __init__(self, rpc: Rpc, subvolume: str) -> None:
        self._rpc = rpc
        self._stub = lease_pb2_grpc.LeaseStub(rpc.channel)
        self.subvolume = subvolume

    def grant(self, ttl: int, id: int = 0,  # noqa: A002 - etcd's name
              durability: Durability = Durability.DEFAULT,
              *, timeout: Optional[float] = None) -> int:
        """A new lease of ``ttl`` seconds; returns its id (``id`` 0 = the
        server picks). AlreadyExists for an id in use."""
        req = lease_pb2.LeaseGrantRequest(subvolume=self.subvolume, ttl=ttl, id=id,
                                          durability=durability_proto(durability))
        return int(self._rpc.unary(self._stub.Grant, req, "lease grant", timeout=timeout).id)

    def revoke(self, id: int,  # noqa: A002
               durability: Durability = Durability.DEFAULT,
               *, timeout: Optional[float] = None) -> int:
        """Deletes the lease and every key attached to it in one revision
        (returned). NotFound if there is no such lease."""
        req = lease_pb2.LeaseRevokeRequest(subvolume=self.subvolume, id=id,
                                           durability=durability_proto(durability))
        return int(self._rpc.unary(self._stub.Revoke, req, "lease revoke",
                                   timeout=timeout).revision)

    def keep_alive(self, id: int, *, timeout: Optional[float] = None) -> int:  # noqa: A002
        """One keep-alive: restarts the lease's TTL and returns it (seconds).
        NotFound if the lease is gone."""
        ttl = next(self.keep_alive_stream(iter([id]), timeout=timeout))
        if ttl <= 0:
            raise errors.NotFound(f"lease {id} not found", grpc.StatusCode.NOT_FOUND,
                                  "lease keep-alive")
        return ttl

    def keep_alive_stream(self, ids: Iterator[int], *,
                          timeout: Optional[float] = None) -> Iterator[int]:
        """The KeepAlive stream: one TTL per id sent (0 = that lease is gone)."""
        reqs = (lease_pb2.LeaseKeepAliveRequest(subvolume=self.subvolume, id=i) for i in ids)
        call: Any = self._stub.KeepAlive(reqs, metadata=self._rpc.metadata, timeout=timeout)
        try:
            for resp in call:
                yield int(resp.ttl)
        except grpc.RpcError as e:
            raise errors.from_rpc_error(e, "lease keep-alive") from None
        finally:
            call.cancel()

    def keep_alive_thread(self, id: int) -> "KeepAliveThread":  # noqa: A002
        """A thread that keeps the lease alive every TTL/3 until stopped (use
        it with ``with``); ``lost`` tells whether the lease went meanwhile."""
        return KeepAliveThread(self, id)

    def time_to_live(self, id: int, keys: bool = False,  # noqa: A002
                     *, timeout: Optional[float] = None) -> LeaseInfo:
        """The lease's granted and remaining TTL, and its keys if asked."""
        req = lease_pb2.LeaseTimeToLiveRequest(subvolume=self.subvolume, id=id, keys=keys)
        r = self._rpc.unary(self._stub.TimeToLive, req, "lease timetolive", timeout=timeout)
        return LeaseInfo.from_proto(r)

    def list(self, *, timeout: Optional[float] = None) -> List[int]:
        """The ids of the subvolume's leases, in increasing order."""
        req = lease_pb2.LeaseLeasesRequest(subvolume=self.subvolume)
        return [int(i) for i in self._rpc.unary(self._stub.Leases, req, "lease list",
                                                timeout=timeout).ids]


class KeepAliveThread:
    """Keeps one lease alive on a KeepAlive stream, every TTL/3, on a daemon
    thread, until :meth:`stop` (or the end of a ``with`` block)."""

    def __init__(self, leases: Leases, lease_id: int) -> None:
        self.lease_id = lease_id
        self.lost = False  # the lease was found gone
        self.error: Optional[BaseException] = None
        self._leases = leases
        self._ids: "queue.Queue[Optional[int]]" = queue.Queue()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"cowkv-keepalive-{lease_id}")
        self._thread.start()

    def _requests(self) -> Iterator[int]:
        while True:
            item = self._ids.get()
            if item is None:
                return
            yield item

    def _run(self) -> None:
        try:
            self._ids.put(self.lease_id)
            for ttl in self._leases.keep_alive_stream(self._requests()):
                if ttl <= 0:
                    self.lost = True
                    break
                if self._stop.wait(max(ttl / 3.0, 0.1)):
                    break
                self._ids.put(self.lease_id)
        except errors.CowkvError as e:
            if not self._stop.is_set():
                self.error = e
        finally:
            self._ids.put(None)

    def stop(self) -> None:
        self._stop.set()
        self._ids.put(None)
        self._thread.join()

    def __enter__(self) -> "KeepAliveThread":
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        self.stop()


class Lock:
    """A lock named ``name`` in a subvolume, as etcd's concurrency.Mutex: a
    lease (``ttl`` seconds, kept alive while held) and the key
    ``name/<lease id>`` created with it in a Txn; the holder is the oldest
    key (lowest create revision) under ``name/``. Without watch, a waiter
    polls with backoff (50 ms doubling to 1 s). Releasing revokes the lease,
    which deletes the key; if the process dies the lease expires and the
    lock goes with it. Use it with ``with``."""

    def __init__(self, sv: Any, name: str, ttl: int = 60) -> None:
        self._sv = sv
        self.name = name
        self.ttl = ttl
        self.lease_id = 0
        self.key = b""
        self._keeper: Optional[KeepAliveThread] = None

    def acquire(self, timeout: Optional[float] = None) -> bool:
        """Waits for the lock (at most ``timeout`` seconds; None = forever);
        False if it timed out (nothing is left behind)."""
        leases: Leases = self._sv.leases
        self.lease_id = leases.grant(self.ttl)
        keeper = self._keeper = leases.keep_alive_thread(self.lease_id)
        prefix = to_bytes(self.name) + b"/"
        self.key = prefix + str(self.lease_id).encode()
        try:
            put = kv_pb2.RequestOp(put=kv_pb2.PutOp(key=self.key, lease=self.lease_id))
            get = kv_pb2.RequestOp(range=kv_pb2.RangeOp(start=self.key, end=self.key + b"\0"))
            cmp = kv_pb2.Compare(key=self.key, target=kv_pb2.Compare.TARGET_CREATE_REVISION,
                                 op=kv_pb2.Compare.OP_EQUAL, number=0)
            r = self._sv.txn([cmp], [put], [get])
            mine = r.revision
            if not r.succeeded and r.responses:
                got = r.responses[0]
                if isinstance(got, RangeResult) and got.kvs:
                    mine = got.kvs[0].create_revision
            deadline = None if timeout is None else time.monotonic() + timeout
            backoff = 0.05
            while True:
                older = any(kv.create_revision < mine
                            for kv in self._sv.range(prefix=prefix, keys_only=True))
                if not older:
                    return True
                if keeper.lost:
                    raise errors.Conflict(f"lock {self.name}: lease {self.lease_id} lost",
                                          grpc.StatusCode.ABORTED, "lock")
                if deadline is not None and time.monotonic() + backoff > deadline:
                    self.release()
                    return False
                time.sleep(backoff)
                backoff = min(backoff * 2, 1.0)
        except BaseException:
            self.release()
            raise

    def release(self) -> None:
        """Releases the lock (revokes its lease); a no-op if not held."""
        if self._keeper is not None:
            self._keeper.stop()
            self._keeper = None
        if self.lease_id:
            try:
                self._sv.leases.revoke(self.lease_id)
            except errors.NotFound:
                pass  # expired meanwhile: the key went with it
            self.lease_id = 0

    def __enter__(self) -> "Lock":
        self.acquire()
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        self.release()
