"""cowkv.aio's interactive transactions (KV.Begin .. Commit/Abort), as
cowkv.Transaction, awaited:

    async with sv.begin() as tx:                   # Begin
        n = int(await tx.get("counter", b"0"))     # recorded read
        await tx.put("counter", str(n + 1))        # buffered write
    # leaving the block commits; an exception inside it aborts.

    await sv.run_in_transaction(body)              # retries Conflict/TooOld
"""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Generator, Optional, Type, TypeVar

import grpc

from cowkv import errors
from cowkv.aio._rpc import AioRpc
from cowkv.range import range_request
from cowkv.txn import (DEFAULT_BACKOFF_S, DEFAULT_MAX_ATTEMPTS, DEFAULT_MAX_BACKOFF_S,
                       TransactionState, retry_delay)
from cowkv.values import Durability, Key, KeyValue, durability_proto, opt_bytes, to_bytes
from cowkv.v1 import kv_pb2

if TYPE_CHECKING:  # aio.kv imports this module
    from cowkv.aio.kv import RangeIterator

__all__ = ["Transaction", "run_in_transaction"]

T = TypeVar("T")
_RAISE = object()


class Transaction:
    """An interactive transaction on one subvolume; semantics as
    cowkv.Transaction. Begun by ``async with`` or ``await``. Every call
    takes ``timeout``. Not for several tasks at once."""

    def __init__(self, rpc: AioRpc, subvolume: str, lease_ms: int = 0,
                 durability: Durability = Durability.DEFAULT,
                 timeout: Optional[float] = None) -> None:
        self._rpc = rpc
        self.subvolume = subvolume
        self.durability = durability
        self._lease_ms = lease_ms
        self._timeout = timeout  # of Begin, and of the commit or abort ending a block
        self.handle = 0
        self.read_revision = 0
        self.lease_ms = 0
        self.revision: Optional[int] = None  # set by commit()
        self.state: Optional[TransactionState] = None  # None until begun

    async def begin(self) -> "Transaction":
        """KV.Begin (``async with`` and ``await`` call it); returns self."""
        if self.state is not None:
            raise errors.FailedPrecondition("transaction already begun", None, "begin")
        req = kv_pb2.BeginRequest(subvolume=self.subvolume, lease_ms=self._lease_ms)
        resp = await self._rpc.unary(self._rpc.kv.Begin, req, "begin", self._timeout)
        self.handle, self.read_revision = int(resp.handle), int(resp.read_revision)
        self.lease_ms = int(resp.lease_ms)
        self.state = TransactionState.OPEN
        return self

    def __await__(self) -> Generator[Any, None, "Transaction"]:
        return self.begin().__await__()

    def _check_open(self) -> None:
        if self.state is not TransactionState.OPEN:
            state = "not begun" if self.state is None else self.state.value
            raise errors.NotFound(f"transaction {self.handle} is {state}",
                                  grpc.StatusCode.NOT_FOUND, "transaction")

    async def _call(self, method: Any, req: Any, op: str, timeout: Optional[float]) -> Any:
        self._check_open()
        return await self._rpc.unary(method, req, op, timeout)

    async def get_kv(self, key: Key, *, timeout: Optional[float] = None) -> KeyValue:
        """The key with its revisions; NotFound if absent."""
        req = kv_pb2.TxnGetRequest(handle=self.handle, key=to_bytes(key))
        return KeyValue.from_proto((await self._call(self._rpc.kv.TxnGet, req, "get",
                                                     timeout)).kv)

    async def get(self, key: Key, default: object = _RAISE, *,
                  timeout: Optional[float] = None) -> bytes:
        """The key's value; NotFound if absent, unless ``default`` is given."""
        try:
            return (await self.get_kv(key, timeout=timeout)).value
        except errors.NotFound:
            if default is _RAISE:
                raise
            return default  # type: ignore[return-value]

    def range(self, start: Optional[Key] = None, end: Optional[Key] = None, *,
              prefix: Optional[Key] = None, limit: int = 0, page_size: int = 0,
              reverse: bool = False, keys_only: bool = False,
              timeout: Optional[float] = None) -> "RangeIterator":
        """``async for kv in tx.range(...)``: reads with own writes, paged."""
        from cowkv.aio.kv import RangeIterator
        self._check_open()
        req = range_request("", start, end, prefix, reverse, keys_only, False, "")

        async def fetch(r: kv_pb2.RangeRequest) -> kv_pb2.RangeResponse:
            resp: kv_pb2.RangeResponse = await self._call(
                self._rpc.kv.TxnRange, kv_pb2.TxnRangeRequest(handle=self.handle, range=r),
                "range", timeout)
            return resp
        return RangeIterator(fetch, req, limit, page_size)

    async def count(self, start: Optional[Key] = None, end: Optional[Key] = None, *,
                    prefix: Optional[Key] = None, timeout: Optional[float] = None) -> int:
        """Number of keys in the range (own writes included)."""
        req = range_request("", start, end, prefix, False, False, True, "")
        resp = await self._call(self._rpc.kv.TxnRange,
                                kv_pb2.TxnRangeRequest(handle=self.handle, range=req), "count",
                                timeout)
        return int(resp.count)

    async def put(self, key: Key, value: Key, *, timeout: Optional[float] = None) -> None:
        """Buffers a write."""
        req = kv_pb2.TxnPutRequest(handle=self.handle, key=to_bytes(key), value=to_bytes(value))
        await self._call(self._rpc.kv.TxnPut, req, "put", timeout)

    async def delete(self, key: Key, *, timeout: Optional[float] = None) -> None:
        """Buffers the delete of one key."""
        req = kv_pb2.TxnDeleteRequest(handle=self.handle, key=to_bytes(key))
        await self._call(self._rpc.kv.TxnDelete, req, "delete", timeout)

    async def delete_range(self, start: Key, end: Optional[Key] = None, *,
                           timeout: Optional[float] = None) -> None:
        """Buffers the delete of [start, end) (end None = through the last key)."""
        req = kv_pb2.TxnDeleteRequest(handle=self.handle, key=to_bytes(start), range=True,
                                      end=opt_bytes(end))
        await self._call(self._rpc.kv.TxnDelete, req, "delete-range", timeout)

    async def commit(self, durability: Optional[Durability] = None, *,
                     timeout: Optional[float] = None) -> int:
        """Validates and applies the transaction; returns its revision. The
        handle is finished whatever the outcome."""
        d = self.durability if durability is None else durability
        req = kv_pb2.CommitRequest(handle=self.handle, durability=durability_proto(d))
        try:
            self.revision = int((await self._call(self._rpc.kv.Commit, req, "commit",
                                                  timeout)).revision)
        except BaseException:
            if self.state is TransactionState.OPEN:
                self.state = TransactionState.ABORTED
            raise
        self.state = TransactionState.COMMITTED
        return self.revision

    async def abort(self, *, timeout: Optional[float] = None) -> None:
        """Drops the transaction and its buffered writes (idempotent)."""
        if self.state is not TransactionState.OPEN:
            return
        self.state = TransactionState.ABORTED
        await self._rpc.unary(self._rpc.kv.Abort, kv_pb2.AbortRequest(handle=self.handle),
                              "abort", timeout)

    async def __aenter__(self) -> "Transaction":
        if self.state is None:
            await self.begin()
        return self

    async def __aexit__(self, exc_type: Optional[Type[BaseException]],
                        exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        if exc_type is None:
            if self.state is TransactionState.OPEN:
                await self.commit(timeout=self._timeout)
            return
        try:
            await self.abort(timeout=self._timeout)
        except errors.CowkvError:
            pass  # the handle may have expired; the original exception matters


async def run_in_transaction(begin: Callable[[], Transaction],
                             fn: Callable[[Transaction], Awaitable[T]],
                             max_attempts: int = DEFAULT_MAX_ATTEMPTS,
                             backoff_s: float = DEFAULT_BACKOFF_S,
                             max_backoff_s: float = DEFAULT_MAX_BACKOFF_S, *,
                             sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> T:
    """As cowkv.txn.run_in_transaction with an async ``fn``: commits, and
    runs it at most ``max_attempts`` times in all while it fails with
    Conflict or TooOld, after the same jittered backoff
    (cowkv.txn.retry_delay, awaited with ``sleep``)."""
    attempt = 0
    while True:
        try:
            async with begin() as tx:
                result = await fn(tx)
            return result
        except (errors.Conflict, errors.TooOld):
            if attempt + 1 >= max_attempts:
                raise
        await sleep(retry_delay(attempt, backoff_s, max_backoff_s))
        attempt += 1
