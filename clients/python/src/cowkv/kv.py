"""A subvolume: its key space (service KV) and its files (``sv.files``).

    sv = client.subvolume("data")
    rev = sv.put("user/1", b"alice")
    sv.get("user/1")                      # b"alice"; NotFound if absent
    sv.get("user/2", default=None)        # None
    for kv in sv.range(prefix="user/"):   # pages through with the page token
        print(kv.key, kv.value, kv.mod_revision)
"""

from __future__ import annotations

import warnings
from typing import Callable, Iterable, Optional, Tuple, TypeVar, Union

from cowkv import errors
from cowkv._rpc import Rpc
from cowkv.files import Files
from cowkv.lease import Leases, Lock
from cowkv.range import RangeIterator, RangePage, range_request
from cowkv.txn import (DEFAULT_BACKOFF_S, DEFAULT_MAX_BACKOFF_S, Compare, Op, Transaction, TxnResult,
                       attempts_of, run_in_transaction, txn_request, txn_result)
from cowkv.values import Durability, Key, KeyValue, durability_proto, opt_bytes, to_bytes
from cowkv.watch import Watch, watch_create
from cowkv.v1 import kv_pb2

__all__ = ["Subvolume"]

T = TypeVar("T")
_RAISE = object()


def delete_range_request(subvolume: str, start: Optional[Key], end: Optional[Key],
                         prefix: Optional[Key],
                         durability: Durability) -> kv_pb2.DeleteRangeRequest:
    """A DeleteRangeRequest; InvalidArgument without any bound, so that a
    call without arguments never empties the subvolume."""
    if start is None and end is None and prefix is None:
        raise errors.InvalidArgument("give start, end or prefix", None, "delete-range")
    return kv_pb2.DeleteRangeRequest(subvolume=subvolume, start=opt_bytes(start),
                                     end=opt_bytes(end), prefix=opt_bytes(prefix),
                                     durability=durability_proto(durability))


class Subvolume:
    """A handle on one subvolume or snapshot, by name. Making one calls
    nothing; a missing subvolume shows as NotFound on the first call.
    Thread-safe (each call is independent)."""

    def __init__(self, rpc: Rpc, name: str) -> None:
        self._rpc = rpc
        self.name = name
        #: The subvolume's file tree.
        self.files = Files(rpc, name)
        #: The subvolume's leases (cowkv.lease).
        self.leases = Leases(rpc, name)

    def __repr__(self) -> str:
        return f"Subvolume({self.name!r})"

    # Single-key operations.

    def get_kv(self, key: Key, *, revision: int = 0, timeout: Optional[float] = None) -> KeyValue:
        """The key with its revisions; NotFound if absent. ``revision``: as it
        was at that revision, from the subvolume's history (0 = the latest);
        :class:`cowkv.Compacted` (with ``compact_revision``) once the history
        no longer keeps it, :class:`cowkv.FutureRevision` past the current."""
        req = kv_pb2.GetRequest(subvolume=self.name, key=to_bytes(key), revision=revision)
        return KeyValue.from_proto(self._rpc.unary(self._rpc.kv.Get, req, "get",
                                                   timeout=timeout).kv)

    def get_with_revision(self, key: Key, *, revision: int = 0,
                          timeout: Optional[float] = None) -> Tuple[KeyValue, int]:
        """The key with its revisions, and the store revision the read saw;
        NotFound if absent. ``revision`` as in :meth:`get_kv`."""
        req = kv_pb2.GetRequest(subvolume=self.name, key=to_bytes(key), revision=revision)
        resp = self._rpc.unary(self._rpc.kv.Get, req, "get", timeout=timeout)
        return KeyValue.from_proto(resp.kv), int(resp.revision)

    def get(self, key: Key, default: object = _RAISE, *, revision: int = 0,
            timeout: Optional[float] = None) -> bytes:
        """The key's value; NotFound if absent unless ``default`` is given.
        ``revision`` as in :meth:`get_kv`."""
        try:
            return self.get_kv(key, revision=revision, timeout=timeout).value
        except errors.NotFound:
            if default is _RAISE:
                raise
            return default  # type: ignore[return-value]

    def put(self, key: Key, value: Key, durability: Durability = Durability.DEFAULT,
            lease: int = 0, *, timeout: Optional[float] = None) -> int:
        """Writes a key; returns the write's revision. ReadOnly on a read-only snapshot.
        ``lease``: attach the key to that lease (``sv.leases``); without one
        the put detaches the key from any lease, as etcd's. NotFound for an
        unknown lease."""
        req = kv_pb2.PutRequest(subvolume=self.name, key=to_bytes(key), value=to_bytes(value),
                                durability=durability_proto(durability), lease=lease)
        return int(self._rpc.unary(self._rpc.kv.Put, req, "put", timeout=timeout).revision)

    def delete(self, key: Key, durability: Durability = Durability.DEFAULT,
               missing_ok: bool = False, *, timeout: Optional[float] = None) -> Optional[int]:
        """Deletes a key; returns the revision. NotFound if absent, unless
        ``missing_ok`` (then None is returned)."""
        req = kv_pb2.DeleteRequest(subvolume=self.name, key=to_bytes(key),
                                   durability=durability_proto(durability))
        try:
            return int(self._rpc.unary(self._rpc.kv.Delete, req, "delete",
                                       timeout=timeout).revision)
        except errors.NotFound:
            if missing_ok:
                return None
            raise

    # Ranges.

    def range(self, start: Optional[Key] = None, end: Optional[Key] = None, *,
              prefix: Optional[Key] = None, limit: int = 0, page_size: int = 0,
              reverse: bool = False, keys_only: bool = False,
              snapshot: Optional[str] = None, revision: int = 0,
              timeout: Optional[float] = None) -> RangeIterator:
        """Keys in [start, end) (None = open) or with ``prefix``, in key order
        (``reverse``: largest first), fetched a page at a time as the
        iterator advances. ``limit`` caps the keys in all, ``page_size`` per
        call. ``snapshot`` names a read-only snapshot of this subvolume to
        read instead (one consistent view across pages; INVALID_ARGUMENT unless
        it was taken of this subvolume). ``revision``: the range as it was at
        that revision, every page at it (errors as :meth:`get_kv`)."""
        req = range_request(self.name, start, end, prefix, reverse, keys_only,
                            False, snapshot or "")
        req.revision = revision

        def fetch(r: kv_pb2.RangeRequest) -> kv_pb2.RangeResponse:
            resp: kv_pb2.RangeResponse = self._rpc.unary(self._rpc.kv.Range, r, "range",
                                                         timeout=timeout)
            return resp
        return RangeIterator(fetch, req, limit, page_size)

    def range_page(self, start: Optional[Key] = None, end: Optional[Key] = None, *,
                   prefix: Optional[Key] = None, limit: int = 0, reverse: bool = False,
                   keys_only: bool = False, count_only: bool = False,
                   snapshot: Optional[str] = None, page_token: bytes = b"",
                   revision: int = 0, timeout: Optional[float] = None) -> RangePage:
        """One Range call: a page of at most ``limit`` keys (0 = the server's
        page limit). Pass the page's ``next_page_token`` with the same
        arguments to read the next one (:meth:`range` does this for you)."""
        req = range_request(self.name, start, end, prefix, reverse, keys_only, count_only,
                            snapshot or "")
        req.limit = limit
        req.page_token = page_token
        req.revision = revision
        return RangePage.from_proto(self._rpc.unary(self._rpc.kv.Range, req, "range",
                                                    timeout=timeout))

    def count(self, start: Optional[Key] = None, end: Optional[Key] = None, *,
              prefix: Optional[Key] = None, snapshot: Optional[str] = None,
              timeout: Optional[float] = None) -> int:
        """The exact number of keys in the range."""
        req = range_request(self.name, start, end, prefix, False, False, True,
                            snapshot or "")
        return int(self._rpc.unary(self._rpc.kv.Range, req, "count", timeout=timeout).count)

    def delete_range(self, start: Optional[Key] = None, end: Optional[Key] = None, *,
                     prefix: Optional[Key] = None,
                     durability: Durability = Durability.DEFAULT,
                     timeout: Optional[float] = None) -> int:
        """Deletes every key in [start, end) or with ``prefix`` atomically (at
        most 10,000 per call); returns how many. One bound at least is
        required, so that a call without arguments never empties the subvolume."""
        return self.delete_range_with_revision(start, end, prefix=prefix,
                                               durability=durability, timeout=timeout)[0]

    def delete_range_with_revision(self, start: Optional[Key] = None, end: Optional[Key] = None,
                                   *, prefix: Optional[Key] = None,
                                   durability: Durability = Durability.DEFAULT
                                   , timeout: Optional[float] = None) -> Tuple[int, int]:
        """As :meth:`delete_range`; returns (keys deleted, revision of the delete)."""
        req = delete_range_request(self.name, start, end, prefix, durability)
        resp = self._rpc.unary(self._rpc.kv.DeleteRange, req, "delete-range", timeout=timeout)
        return int(resp.deleted), int(resp.revision)

    # History (issue 18).

    def compact(self, revision: int, durability: Durability = Durability.DEFAULT,
                *, timeout: Optional[float] = None) -> int:
        """Drops the history of revisions below ``revision`` (etcd's Compact):
        it stays readable, older ones raise :class:`cowkv.Compacted`. Returns
        the compact revision. Compacted if the history was compacted past it
        already, FutureRevision past the current revision."""
        req = kv_pb2.CompactRequest(subvolume=self.name, revision=revision,
                                    durability=durability_proto(durability))
        return int(self._rpc.unary(self._rpc.kv.Compact, req, "compact",
                                   timeout=timeout).compact_revision)

    # Watch (issue 18).

    def watch(self, key: Key, *, prefix: bool = False, range_end: Optional[Key] = None,
              start_revision: int = 0, prev_kv: bool = False, no_put: bool = False,
              no_delete: bool = False, progress_notify: bool = False,
              timeout: Optional[float] = None) -> Watch:
        """Watches ``key`` (every key starting with it with ``prefix``, or
        [key, range_end) as etcd's; ``range_end`` b"\\0" = every key from
        ``key`` on) on a stream of its own; iterate the returned
        :class:`cowkv.Watch` for events, ``cancel()`` it to stop. Returns once
        the server created the watcher (a refused create raises here).
        ``start_revision`` 0 = the next change; an older one replays from
        the history (:class:`cowkv.Compacted` if it is gone). Only durable
        changes are shown (an async write at the next sync)."""
        return Watch(self._rpc, watch_create(self.name, key, range_end, prefix, start_revision,
                                             prev_kv, no_put, no_delete, progress_notify),
                     timeout)

    # Transactions.

    def txn(self, compare: Iterable[Union[Compare, kv_pb2.Compare]] = (),
            success: Iterable[Union[Op, kv_pb2.RequestOp]] = (),
            failure: Iterable[Union[Op, kv_pb2.RequestOp]] = (),
            durability: Durability = Durability.DEFAULT,
            *, timeout: Optional[float] = None) -> TxnResult:
        """One-shot conditional transaction: if every compare holds run
        ``success``, else ``failure``, atomically. A failed compare is not an
        error: ``succeeded`` is False."""
        req = txn_request(self.name, compare, success, failure, durability)
        return txn_result(self._rpc.unary(self._rpc.kv.Txn, req, "txn", timeout=timeout))

    def lock(self, name: str, ttl: int = 60) -> Lock:
        """A lock on this subvolume (cowkv.lease.Lock): ``with sv.lock("jobs"): ...``."""
        return Lock(self, name, ttl)

    def begin(self, lease_ms: int = 0,
              durability: Durability = Durability.DEFAULT, *,
              timeout: Optional[float] = None) -> Transaction:
        """An interactive transaction, begun on entering ``with`` (commit on
        success, abort on an exception) or by ``tx.begin()``. ``lease_ms``
        0 = server default (30 s). No retries: :meth:`run_in_transaction`
        retries."""
        return Transaction(self._rpc, self.name, lease_ms, durability, timeout)

    def transaction(self, lease_ms: int = 0,
                    durability: Durability = Durability.DEFAULT, *,
                    timeout: Optional[float] = None) -> Transaction:
        """Deprecated alias of :meth:`begin` (every cowkv client calls it
        ``begin``); kept for one release."""
        warnings.warn("Subvolume.transaction() is deprecated: use begin()",
                      DeprecationWarning, stacklevel=2)
        return self.begin(lease_ms, durability, timeout=timeout)

    def run_in_transaction(self, fn: Callable[[Transaction], T],
                           retries: Optional[int] = None,
                           durability: Durability = Durability.DEFAULT, lease_ms: int = 0,
                           backoff_s: float = DEFAULT_BACKOFF_S,
                           max_backoff_s: float = DEFAULT_MAX_BACKOFF_S, *,
                           max_attempts: Optional[int] = None,
                           timeout: Optional[float] = None) -> T:
        """Runs ``fn(tx)`` and commits, running it at most ``max_attempts``
        times in all (default 10) while it fails with Conflict or TooOld,
        with jittered exponential backoff (docs/api.md, "Retrying
        transactions"); returns what ``fn`` returned. ``fn`` may run more
        than once. ``retries`` (deprecated) = ``max_attempts - 1``.
        ``timeout``: of each Begin, Commit and Abort (the calls inside
        ``fn`` take their own)."""
        return run_in_transaction(lambda: self.begin(lease_ms, durability, timeout=timeout),
                                  fn, attempts_of(max_attempts, retries),
                                  backoff_s, max_backoff_s)
