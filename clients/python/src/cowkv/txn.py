"""Transactions: one-shot conditional ones (etcd-style compare/then/else) and
interactive ones (Begin, reads and buffered writes, Commit or Abort).

One-shot::

    from cowkv import Value, Version, Missing, Put, Get
    r = sv.txn(compare=[Value("owner") == b"alice", Missing("lock")],
               success=[Put("lock", "alice")], failure=[Get("lock")])
    r.succeeded, r.revision, r.responses

Interactive::

    with sv.begin() as tx:                # Begin
        n = int(tx.get("counter", b"0"))  # recorded read
        tx.put("counter", str(n + 1))     # buffered write
    # leaving the block commits (Conflict if something tx read changed);
    # an exception inside it aborts instead.

    sv.run_in_transaction(lambda tx: ..., max_attempts=10)  # retries Conflict/TooOld
"""

from __future__ import annotations

import dataclasses
import enum
import random
import time
import warnings
from types import TracebackType
from typing import Callable, Iterable, List, Optional, Type, TypeVar, Union

import grpc

from cowkv import errors
from cowkv._rpc import Rpc
from cowkv.range import RangeIterator, range_request
from cowkv.values import Durability, Key, KeyValue, durability_proto, opt_bytes, to_bytes
from cowkv.v1 import kv_pb2

__all__ = [
    "Compare", "Value", "Version", "ModRevision", "CreateRevision", "Exists", "Missing",
    "Op", "Put", "Delete", "DeleteRange", "Range", "Get",
    "TxnResult", "PutResult", "DeleteResult", "RangeResult", "OpResult",
    "Transaction", "TransactionState", "run_in_transaction", "retry_delay",
    "DEFAULT_MAX_ATTEMPTS", "DEFAULT_BACKOFF_S", "DEFAULT_MAX_BACKOFF_S",
]

T = TypeVar("T")
_RAISE = object()

# Compares.


@dataclasses.dataclass(frozen=True)
class Compare:
    """One condition of a one-shot Txn, built with Value(k) == v and friends."""

    proto: kv_pb2.Compare


class _Target:
    """The left side of a compare: ``Value(key) == b"v"``, ``Version(key) > 2``."""

    _target: "kv_pb2.Compare.Target" = kv_pb2.Compare.TARGET_VALUE
    __hash__ = None  # type: ignore[assignment]  # == builds a Compare

    def __init__(self, key: Key) -> None:
        self.key = to_bytes(key)

    def _operand(self, m: kv_pb2.Compare, other: object) -> None:
        if not isinstance(other, int) or isinstance(other, bool):
            raise TypeError(f"{type(self).__name__}() compares with an int, not {other!r}")
        m.number = other

    def _make(self, op: "kv_pb2.Compare.Op", other: object) -> Compare:
        m = kv_pb2.Compare(key=self.key, target=self._target, op=op)
        self._operand(m, other)
        return Compare(m)

    def __eq__(self, other: object) -> Compare:  # type: ignore[override]
        return self._make(kv_pb2.Compare.OP_EQUAL, other)

    def __ne__(self, other: object) -> Compare:  # type: ignore[override]
        return self._make(kv_pb2.Compare.OP_NOT_EQUAL, other)

    def __lt__(self, other: object) -> Compare:
        return self._make(kv_pb2.Compare.OP_LESS, other)

    def __gt__(self, other: object) -> Compare:
        return self._make(kv_pb2.Compare.OP_GREATER, other)


class Value(_Target):
    """The key's value (memcmp order); an absent key never matches."""

    def _operand(self, m: kv_pb2.Compare, other: object) -> None:
        if not isinstance(other, (bytes, bytearray, memoryview, str)):
            raise TypeError(f"Value() compares with bytes or str, not {other!r}")
        m.value = to_bytes(other)


class Version(_Target):
    """Writes since the key was created (0 when absent)."""

    _target = kv_pb2.Compare.TARGET_VERSION


class ModRevision(_Target):
    """Revision of the key's last write (0 when absent)."""

    _target = kv_pb2.Compare.TARGET_MOD_REVISION


class CreateRevision(_Target):
    """Revision that created the key (0 when absent)."""

    _target = kv_pb2.Compare.TARGET_CREATE_REVISION


def Exists(key: Key) -> Compare:  # noqa: N802 - reads like the other builders
    """Holds when the key exists."""
    return Compare(kv_pb2.Compare(key=to_bytes(key), target=kv_pb2.Compare.TARGET_EXISTS,
                                  op=kv_pb2.Compare.OP_EQUAL, exists=True))


def Missing(key: Key) -> Compare:  # noqa: N802
    """Holds when the key does not exist."""
    return Compare(kv_pb2.Compare(key=to_bytes(key), target=kv_pb2.Compare.TARGET_EXISTS,
                                  op=kv_pb2.Compare.OP_EQUAL, exists=False))

# Ops.


@dataclasses.dataclass(frozen=True)
class Op:
    """One operation of a Txn branch."""

    proto: kv_pb2.RequestOp


def Put(key: Key, value: Key, lease: int = 0) -> Op:  # noqa: N802
    """Writes a key (attached to ``lease`` if nonzero; else detached from any)."""
    return Op(kv_pb2.RequestOp(put=kv_pb2.PutOp(key=to_bytes(key), value=to_bytes(value),
                                                lease=lease)))


def Delete(key: Key) -> Op:  # noqa: N802
    """Deletes a key (an absent key is fine: ``deleted`` is 0)."""
    return Op(kv_pb2.RequestOp(delete=kv_pb2.DeleteOp(key=to_bytes(key))))


def DeleteRange(start: Optional[Key] = None, end: Optional[Key] = None) -> Op:  # noqa: N802
    """Deletes the keys in [start, end) (None = open-ended)."""
    op = kv_pb2.DeleteRangeOp(start=opt_bytes(start), end=opt_bytes(end))
    return Op(kv_pb2.RequestOp(delete_range=op))


def Range(start: Optional[Key] = None, end: Optional[Key] = None, *,  # noqa: N802
          prefix: Optional[Key] = None, limit: int = 0, reverse: bool = False,
          keys_only: bool = False, count_only: bool = False) -> Op:
    """Reads a range; it sees the state before the Txn's writes."""
    op = kv_pb2.RangeOp(start=opt_bytes(start), end=opt_bytes(end), prefix=opt_bytes(prefix),
                        limit=limit, reverse=reverse, keys_only=keys_only, count_only=count_only)
    return Op(kv_pb2.RequestOp(range=op))


def Get(key: Key) -> Op:  # noqa: N802
    """Reads one key (a Range of exactly that key)."""
    k = to_bytes(key)
    return Range(k, k + b"\x00", limit=1)

# Results.


@dataclasses.dataclass(frozen=True)
class PutResult:
    """Result of a Put op (the Txn's revision applies)."""


@dataclasses.dataclass(frozen=True)
class DeleteResult:
    """Result of a Delete or DeleteRange op."""

    deleted: int


@dataclasses.dataclass(frozen=True)
class RangeResult:
    """Result of a Range or Get op."""

    kvs: List[KeyValue]
    count: int
    more: bool

    @property
    def value(self) -> Optional[bytes]:
        """The first key's value (a Get's value), or None when nothing matched."""
        return self.kvs[0].value if self.kvs else None


OpResult = Union[PutResult, DeleteResult, RangeResult]


@dataclasses.dataclass(frozen=True)
class TxnResult:
    """What a one-shot Txn did."""

    succeeded: bool  # every compare held and `success` ran
    revision: int  # of the writes, or the revision read at
    responses: List[OpResult]  # one per op of the branch that ran


def _op_result(m: kv_pb2.ResponseOp) -> OpResult:
    which = m.WhichOneof("result")
    if which == "delete":
        return DeleteResult(m.delete.deleted)
    if which == "range":
        return RangeResult([KeyValue.from_proto(kv) for kv in m.range.kvs], m.range.count,
                           m.range.more)
    return PutResult()


def txn_request(subvolume: str, compare: Iterable[Union[Compare, kv_pb2.Compare]],
                success: Iterable[Union[Op, kv_pb2.RequestOp]],
                failure: Iterable[Union[Op, kv_pb2.RequestOp]],
                durability: Durability) -> kv_pb2.TxnRequest:
    """Builds a TxnRequest; raw proto messages are accepted too."""
    def unwrap_ops(ops: Iterable[Union[Op, kv_pb2.RequestOp]]) -> List[kv_pb2.RequestOp]:
        return [o.proto if isinstance(o, Op) else o for o in ops]
    cmps = [c.proto if isinstance(c, Compare) else c for c in compare]
    return kv_pb2.TxnRequest(subvolume=subvolume, compare=cmps, success=unwrap_ops(success),
                             failure=unwrap_ops(failure), durability=durability_proto(durability))


def txn_result(m: kv_pb2.TxnResponse) -> TxnResult:
    return TxnResult(m.succeeded, m.revision, [_op_result(r) for r in m.responses])

# Interactive transactions.


class TransactionState(enum.Enum):
    OPEN = "open"
    COMMITTED = "committed"
    ABORTED = "aborted"  # by abort(), an exception, or a failed commit


class Transaction:
    """An interactive transaction on one subvolume (KV.Begin .. Commit/Abort).

    Reads (get, range) see the state at the transaction's read revision
    (from the subvolume's history, whatever was written since) plus its own
    writes, and are recorded; writes (put, delete, delete_range) are buffered
    until commit. A read-only transaction always commits; one that writes is
    validated (:class:`cowkv.Conflict` if something it read changed,
    :class:`cowkv.TooOld` past the conflict window, :class:`cowkv.Compacted`
    when a read's revision left the history). The server aborts a handle
    unused for longer than its lease. Not thread-safe.
    """

    def __init__(self, rpc: Rpc, subvolume: str, lease_ms: int = 0,
                 durability: Durability = Durability.DEFAULT,
                 timeout: Optional[float] = None) -> None:
        self._rpc = rpc
        self.subvolume = subvolume
        self.durability = durability
        req = kv_pb2.BeginRequest(subvolume=subvolume, lease_ms=lease_ms)
        resp = rpc.unary(rpc.kv.Begin, req, "begin", timeout=timeout)
        self._timeout = timeout  # of the commit or abort that ends a with block
        self.handle: int = resp.handle
        self.read_revision: int = resp.read_revision
        self.lease_ms: int = resp.lease_ms
        self.revision: Optional[int] = None  # set by commit()
        self.state = TransactionState.OPEN

    def _check_open(self) -> None:
        # NotFound, as the server answers for a handle that is finished.
        if self.state is not TransactionState.OPEN:
            raise errors.NotFound(f"transaction {self.handle} is {self.state.value}",
                                  grpc.StatusCode.NOT_FOUND, "transaction")

    def get_kv(self, key: Key, *, timeout: Optional[float] = None) -> KeyValue:
        """The key with its revisions; NotFound if absent."""
        self._check_open()
        req = kv_pb2.TxnGetRequest(handle=self.handle, key=to_bytes(key))
        return KeyValue.from_proto(self._rpc.unary(self._rpc.kv.TxnGet, req, "get",
                                                   timeout=timeout).kv)

    def get(self, key: Key, default: object = _RAISE, *,
            timeout: Optional[float] = None) -> bytes:
        """The key's value; NotFound if absent, unless ``default`` is given
        (then it is returned; the absence is still recorded)."""
        try:
            return self.get_kv(key, timeout=timeout).value
        except errors.NotFound:
            if default is _RAISE:
                raise
            return default  # type: ignore[return-value]

    def range(self, start: Optional[Key] = None, end: Optional[Key] = None, *,
              prefix: Optional[Key] = None, limit: int = 0, page_size: int = 0,
              reverse: bool = False, keys_only: bool = False,
              timeout: Optional[float] = None) -> RangeIterator:
        """Keys in [start, end) or with ``prefix``, paged (see Subvolume.range)."""
        self._check_open()
        req = range_request("", start, end, prefix, reverse, keys_only, False, "")

        def fetch(r: kv_pb2.RangeRequest) -> kv_pb2.RangeResponse:
            resp: kv_pb2.RangeResponse = self._rpc.unary(
                self._rpc.kv.TxnRange, kv_pb2.TxnRangeRequest(handle=self.handle, range=r), "range",
                timeout=timeout)
            return resp
        return RangeIterator(fetch, req, limit, page_size)

    def count(self, start: Optional[Key] = None, end: Optional[Key] = None, *,
              prefix: Optional[Key] = None, timeout: Optional[float] = None) -> int:
        """Number of keys in the range (own writes included)."""
        self._check_open()
        req = range_request("", start, end, prefix, False, False, True, "")
        resp = self._rpc.unary(self._rpc.kv.TxnRange,
                               kv_pb2.TxnRangeRequest(handle=self.handle, range=req), "count",
                               timeout=timeout)
        return int(resp.count)

    def put(self, key: Key, value: Key, *, timeout: Optional[float] = None) -> None:
        """Buffers a write."""
        self._check_open()
        req = kv_pb2.TxnPutRequest(handle=self.handle, key=to_bytes(key), value=to_bytes(value))
        self._rpc.unary(self._rpc.kv.TxnPut, req, "put", timeout=timeout)

    def delete(self, key: Key, *, timeout: Optional[float] = None) -> None:
        """Buffers the delete of one key."""
        self._check_open()
        req = kv_pb2.TxnDeleteRequest(handle=self.handle, key=to_bytes(key))
        self._rpc.unary(self._rpc.kv.TxnDelete, req, "delete", timeout=timeout)

    def delete_range(self, start: Key, end: Optional[Key] = None,
                     *, timeout: Optional[float] = None) -> None:
        """Buffers the delete of [start, end) (end None = through the last key)."""
        self._check_open()
        req = kv_pb2.TxnDeleteRequest(handle=self.handle, key=to_bytes(start), range=True,
                                      end=opt_bytes(end))
        self._rpc.unary(self._rpc.kv.TxnDelete, req, "delete-range", timeout=timeout)

    def commit(self, durability: Optional[Durability] = None,
               *, timeout: Optional[float] = None) -> int:
        """Validates and applies the transaction; returns its revision. The
        handle is finished whatever the outcome."""
        self._check_open()
        d = self.durability if durability is None else durability
        req = kv_pb2.CommitRequest(handle=self.handle, durability=durability_proto(d))
        try:
            self.revision = int(self._rpc.unary(self._rpc.kv.Commit, req, "commit",
                                                timeout=timeout).revision)
        except BaseException:
            self.state = TransactionState.ABORTED
            raise
        self.state = TransactionState.COMMITTED
        return self.revision

    def abort(self, *, timeout: Optional[float] = None) -> None:
        """Drops the transaction and its buffered writes (idempotent)."""
        if self.state is not TransactionState.OPEN:
            return
        self.state = TransactionState.ABORTED
        self._rpc.unary(self._rpc.kv.Abort, kv_pb2.AbortRequest(handle=self.handle), "abort",
                        timeout=timeout)

    def __enter__(self) -> "Transaction":
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        if exc_type is None:
            if self.state is TransactionState.OPEN:
                self.commit(timeout=self._timeout)
            return
        try:
            self.abort(timeout=self._timeout)
        except errors.CowkvError:
            pass  # the handle may have expired; the original exception matters


#: The retry helper's defaults, the same in every client (docs/api.md,
#: "Retrying transactions"; clients/conformance/retry_rule.json).
DEFAULT_MAX_ATTEMPTS = 10
DEFAULT_BACKOFF_S = 0.010
DEFAULT_MAX_BACKOFF_S = 1.0


def retry_delay(attempt: int, backoff_s: float = DEFAULT_BACKOFF_S,
                max_backoff_s: float = DEFAULT_MAX_BACKOFF_S) -> float:
    """Seconds to wait before retry ``attempt + 1`` (``attempt`` 0-based:
    0 = after the first run failed): uniform in [d/2, d] with
    d = min(max, base * 2^attempt), the rule of every cowkv client."""
    d = min(max_backoff_s, backoff_s * (2 ** min(attempt, 62)))
    return random.uniform(d / 2, d)


def attempts_of(max_attempts: Optional[int], retries: Optional[int]) -> int:
    """The number of runs from ``max_attempts`` or the deprecated
    ``retries`` (retries after the first run); the default when neither."""
    if max_attempts is not None and retries is not None:
        raise TypeError("give max_attempts or retries, not both")
    if retries is not None:
        warnings.warn("retries= is deprecated: use max_attempts= (= retries + 1)",
                      DeprecationWarning, stacklevel=3)
        max_attempts = retries + 1
    n = DEFAULT_MAX_ATTEMPTS if max_attempts is None else max_attempts
    if n < 1:
        raise ValueError(f"max_attempts must be at least 1, not {n}")
    return n


def run_in_transaction(begin: Callable[[], Transaction], fn: Callable[[Transaction], T],
                       max_attempts: int = DEFAULT_MAX_ATTEMPTS,
                       backoff_s: float = DEFAULT_BACKOFF_S,
                       max_backoff_s: float = DEFAULT_MAX_BACKOFF_S, *,
                       sleep: Callable[[float], None] = time.sleep) -> T:
    """Runs ``fn(tx)`` in a fresh transaction and commits, at most
    ``max_attempts`` times in all while the transaction conflicts (Conflict)
    or is too old (TooOld), sleeping :func:`retry_delay` between attempts so
    that contending clients spread out. Other exceptions abort and propagate
    at once. ``fn`` may run more than once: keep side effects outside it.
    ``sleep`` is a seam for tests."""
    attempt = 0
    while True:
        try:
            with begin() as tx:
                result = fn(tx)
            return result
        except (errors.Conflict, errors.TooOld):
            if attempt + 1 >= max_attempts:
                raise
        sleep(retry_delay(attempt, backoff_s, max_backoff_s))
        attempt += 1
