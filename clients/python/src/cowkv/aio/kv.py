"""cowkv.aio's Subvolume: the KV calls of cowkv.Subvolume, awaited.

Requests are built, checked and answers converted by the synchronous
client's code (cowkv.range, cowkv.txn, cowkv.watch, cowkv.values); only the
awaiting is here. Every call takes ``timeout`` (seconds; None = the
client's default)."""

from __future__ import annotations

import warnings
from typing import Awaitable, Callable, Iterable, List, Optional, Tuple, TypeVar, Union

from cowkv import errors
from cowkv.aio._rpc import AioRpc
from cowkv.aio.lease import Leases
from cowkv.aio.txn import Transaction, run_in_transaction
from cowkv.aio.watch import Watch
from cowkv.kv import delete_range_request
from cowkv.range import RangePage, RangePager, range_request
from cowkv.txn import (DEFAULT_BACKOFF_S, DEFAULT_MAX_BACKOFF_S, Compare, Op, TxnResult,
                       attempts_of, txn_request, txn_result)
from cowkv.values import Durability, Key, KeyValue, durability_proto, to_bytes
from cowkv.watch import watch_create
from cowkv.v1 import kv_pb2

__all__ = ["Subvolume", "RangeIterator"]

T = TypeVar("T")
_RAISE = object()
Fetch = Callable[[kv_pb2.RangeRequest], Awaitable[kv_pb2.RangeResponse]]


class RangeIterator(RangePager):
    """An async iterator over the keys of a range, fetching one page per
    call as it goes (``limit``, ``page_size``, ``revision``, ``pages``: as
    cowkv.RangeIterator, whose paging code it shares)."""

    def __init__(self, fetch: Fetch, request: kv_pb2.RangeRequest, limit: int = 0,
                 page_size: int = 0) -> None:
        super().__init__(request, limit, page_size)
        self._fetch = fetch

    def __aiter__(self) -> "RangeIterator":
        return self

    async def __anext__(self) -> KeyValue:
        while True:
            kv = self.pop()
            if kv is not None:
                return kv
            req = self.next_request()
            if req is None:
                raise StopAsyncIteration
            self.absorb(await self._fetch(req))

    async def to_list(self) -> List[KeyValue]:
        """The remaining keys as a list."""
        return [kv async for kv in self]


class Subvolume:
    """A handle on one subvolume or snapshot, by name (as cowkv.Subvolume).
    Making one calls nothing."""

    def __init__(self, rpc: AioRpc, name: str) -> None:
        self._rpc = rpc
        self.name = name
        #: The subvolume's leases (cowkv.aio.lease).
        self.leases = Leases(rpc, name)

    def __repr__(self) -> str:
        return f"aio.Subvolume({self.name!r})"

    async def get_with_revision(self, key: Key, *, revision: int = 0,
                                timeout: Optional[float] = None) -> Tuple[KeyValue, int]:
        """The key with its revisions and the store revision the read saw;
        NotFound if absent (``revision`` as cowkv.Subvolume.get_kv)."""
        req = kv_pb2.GetRequest(subvolume=self.name, key=to_bytes(key), revision=revision)
        resp = await self._rpc.unary(self._rpc.kv.Get, req, "get", timeout)
        return KeyValue.from_proto(resp.kv), int(resp.revision)

    async def get_kv(self, key: Key, *, revision: int = 0,
                     timeout: Optional[float] = None) -> KeyValue:
        """The key with its revisions; NotFound if absent."""
        return (await self.get_with_revision(key, revision=revision, timeout=timeout))[0]

    async def get(self, key: Key, default: object = _RAISE, *, revision: int = 0,
                  timeout: Optional[float] = None) -> bytes:
        """The key's value; NotFound if absent unless ``default`` is given."""
        try:
            return (await self.get_kv(key, revision=revision, timeout=timeout)).value
        except errors.NotFound:
            if default is _RAISE:
                raise
            return default  # type: ignore[return-value]

    async def put(self, key: Key, value: Key, durability: Durability = Durability.DEFAULT,
                  lease: int = 0, *, timeout: Optional[float] = None) -> int:
        """Writes a key; returns the write's revision (``lease`` as cowkv.Subvolume.put)."""
        req = kv_pb2.PutRequest(subvolume=self.name, key=to_bytes(key), value=to_bytes(value),
                                durability=durability_proto(durability), lease=lease)
        return int((await self._rpc.unary(self._rpc.kv.Put, req, "put", timeout)).revision)

    async def delete(self, key: Key, durability: Durability = Durability.DEFAULT,
                     missing_ok: bool = False, *,
                     timeout: Optional[float] = None) -> Optional[int]:
        """Deletes a key; returns the revision. NotFound if absent, unless
        ``missing_ok`` (then None)."""
        req = kv_pb2.DeleteRequest(subvolume=self.name, key=to_bytes(key),
                                   durability=durability_proto(durability))
        try:
            return int((await self._rpc.unary(self._rpc.kv.Delete, req, "delete",
                                              timeout)).revision)
        except errors.NotFound:
            if missing_ok:
                return None
            raise

    def range(self, start: Optional[Key] = None, end: Optional[Key] = None, *,
              prefix: Optional[Key] = None, limit: int = 0, page_size: int = 0,
              reverse: bool = False, keys_only: bool = False,
              snapshot: Optional[str] = None, revision: int = 0,
              timeout: Optional[float] = None) -> RangeIterator:
        """``async for kv in sv.range(...)``: the keys of the range, a page
        per call (arguments as cowkv.Subvolume.range; ``timeout`` per page)."""
        req = range_request(self.name, start, end, prefix, reverse, keys_only, False,
                            snapshot or "")
        req.revision = revision

        async def fetch(r: kv_pb2.RangeRequest) -> kv_pb2.RangeResponse:
            resp: kv_pb2.RangeResponse = await self._rpc.unary(self._rpc.kv.Range, r, "range",
                                                               timeout)
            return resp
        return RangeIterator(fetch, req, limit, page_size)

    async def range_page(self, start: Optional[Key] = None, end: Optional[Key] = None, *,
                         prefix: Optional[Key] = None, limit: int = 0, reverse: bool = False,
                         keys_only: bool = False, count_only: bool = False,
                         snapshot: Optional[str] = None, page_token: bytes = b"",
                         revision: int = 0, timeout: Optional[float] = None) -> RangePage:
        """One Range call (as cowkv.Subvolume.range_page)."""
        req = range_request(self.name, start, end, prefix, reverse, keys_only, count_only,
                            snapshot or "")
        req.limit = limit
        req.page_token = page_token
        req.revision = revision
        return RangePage.from_proto(await self._rpc.unary(self._rpc.kv.Range, req, "range",
                                                          timeout))

    async def count(self, start: Optional[Key] = None, end: Optional[Key] = None, *,
                    prefix: Optional[Key] = None, snapshot: Optional[str] = None,
                    timeout: Optional[float] = None) -> int:
        """The exact number of keys in the range."""
        req = range_request(self.name, start, end, prefix, False, False, True, snapshot or "")
        return int((await self._rpc.unary(self._rpc.kv.Range, req, "count", timeout)).count)

    async def delete_range_with_revision(
            self, start: Optional[Key] = None, end: Optional[Key] = None, *,
            prefix: Optional[Key] = None, durability: Durability = Durability.DEFAULT,
            timeout: Optional[float] = None) -> Tuple[int, int]:
        """As :meth:`delete_range`; returns (keys deleted, revision of the delete)."""
        req = delete_range_request(self.name, start, end, prefix, durability)
        resp = await self._rpc.unary(self._rpc.kv.DeleteRange, req, "delete-range", timeout)
        return int(resp.deleted), int(resp.revision)

    async def delete_range(self, start: Optional[Key] = None, end: Optional[Key] = None, *,
                           prefix: Optional[Key] = None,
                           durability: Durability = Durability.DEFAULT,
                           timeout: Optional[float] = None) -> int:
        """Deletes every key in [start, end) or with ``prefix`` atomically;
        returns how many. One bound at least is required."""
        return (await self.delete_range_with_revision(start, end, prefix=prefix,
                                                      durability=durability,
                                                      timeout=timeout))[0]

    async def compact(self, revision: int, durability: Durability = Durability.DEFAULT, *,
                      timeout: Optional[float] = None) -> int:
        """Drops the history below ``revision`` (as cowkv.Subvolume.compact)."""
        req = kv_pb2.CompactRequest(subvolume=self.name, revision=revision,
                                    durability=durability_proto(durability))
        resp = await self._rpc.unary(self._rpc.kv.Compact, req, "compact", timeout)
        return int(resp.compact_revision)

    def watch(self, key: Key, *, prefix: bool = False, range_end: Optional[Key] = None,
              start_revision: int = 0, prev_kv: bool = False, no_put: bool = False,
              no_delete: bool = False, progress_notify: bool = False,
              timeout: Optional[float] = None) -> Watch:
        """A watcher (arguments as cowkv.Subvolume.watch; ``timeout``: the
        stream's deadline, None = none): ``async with sv.watch(...) as w``
        or ``w = await sv.watch(...)`` returns once the server created it
        (changes made after that are seen), then ``async for ev in w``. A
        bare ``async for ev in sv.watch(...)`` creates it at the first step."""
        return Watch(self._rpc, watch_create(self.name, key, range_end, prefix, start_revision,
                                             prev_kv, no_put, no_delete, progress_notify),
                     timeout)

    async def txn(self, compare: Iterable[Union[Compare, kv_pb2.Compare]] = (),
                  success: Iterable[Union[Op, kv_pb2.RequestOp]] = (),
                  failure: Iterable[Union[Op, kv_pb2.RequestOp]] = (),
                  durability: Durability = Durability.DEFAULT, *,
                  timeout: Optional[float] = None) -> TxnResult:
        """One-shot conditional transaction (as cowkv.Subvolume.txn)."""
        req = txn_request(self.name, compare, success, failure, durability)
        return txn_result(await self._rpc.unary(self._rpc.kv.Txn, req, "txn", timeout))

    def begin(self, lease_ms: int = 0, durability: Durability = Durability.DEFAULT, *,
              timeout: Optional[float] = None) -> Transaction:
        """An interactive transaction: ``async with sv.begin() as tx``
        begins it, commits on success and aborts on an exception
        (``tx = await sv.begin()`` begins it without a block).
        ``timeout``: of the Begin and of the block's Commit or Abort."""
        return Transaction(self._rpc, self.name, lease_ms, durability, timeout)

    def transaction(self, lease_ms: int = 0, durability: Durability = Durability.DEFAULT, *,
                    timeout: Optional[float] = None) -> Transaction:
        """Deprecated alias of :meth:`begin`; kept for one release."""
        warnings.warn("Subvolume.transaction() is deprecated: use begin()",
                      DeprecationWarning, stacklevel=2)
        return self.begin(lease_ms, durability, timeout=timeout)

    async def run_in_transaction(self, fn: Callable[[Transaction], Awaitable[T]],
                                 retries: Optional[int] = None,
                                 durability: Durability = Durability.DEFAULT,
                                 lease_ms: int = 0, backoff_s: float = DEFAULT_BACKOFF_S,
                                 max_backoff_s: float = DEFAULT_MAX_BACKOFF_S, *,
                                 max_attempts: Optional[int] = None,
                                 timeout: Optional[float] = None) -> T:
        """Awaits ``fn(tx)`` and commits, retrying on Conflict and TooOld (as
        cowkv.Subvolume.run_in_transaction); ``fn`` may run more than once."""
        return await run_in_transaction(
            lambda: self.begin(lease_ms, durability, timeout=timeout), fn,
            attempts_of(max_attempts, retries), backoff_s, max_backoff_s)
