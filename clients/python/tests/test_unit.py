"""Client logic that needs no server: error classes from status codes and
messages, compare and op builders, range paging, the retry loop, modes, and
the packaging (typed, stubs generated)."""

from __future__ import annotations

import asyncio
import importlib.resources
import json
import pathlib
import random
from typing import Any, Dict, List, Optional, Tuple

import grpc
import pytest

import cowkv
from cowkv import errors
from cowkv.file import _parse_mode
from cowkv.range import RangeIterator
from cowkv.txn import run_in_transaction
from cowkv.v1 import kv_pb2


class FakeRpcError(grpc.RpcError):  # type: ignore[misc]  # grpc is untyped
    def __init__(self, code: grpc.StatusCode, details: str,
                 trailers: Tuple[Tuple[str, Any], ...] = ()) -> None:
        self._code, self._details, self._trailers = code, details, trailers

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details

    def trailing_metadata(self) -> Tuple[Tuple[str, Any], ...]:
        return self._trailers


def _len_field(num: int, payload: bytes) -> bytes:
    """One length-delimited protobuf field (payloads under 128 bytes)."""
    assert len(payload) < 128
    return bytes([num << 3 | 2, len(payload)]) + payload


def status_details(code: grpc.StatusCode, message: str, reason: str,
                   metadata: Optional[Dict[str, str]] = None) -> Tuple[Tuple[str, Any], ...]:
    """The grpc-status-details-bin trailer cowkvd sends: google.rpc.Status
    {code, message, details: [Any(google.rpc.ErrorInfo{reason, domain,
    metadata})]}, encoded by hand (google.rpc is not a dependency)."""
    info = _len_field(1, reason.encode()) + _len_field(2, b"cowkv.dev")
    for k, v in (metadata or {}).items():
        info += _len_field(3, _len_field(1, k.encode()) + _len_field(2, v.encode()))
    any_ = _len_field(1, b"type.googleapis.com/google.rpc.ErrorInfo") + _len_field(2, info)
    status = bytes([0x08, code.value[0]]) + _len_field(2, message.encode()) + _len_field(3, any_)
    return (("grpc-status-details-bin", status),)


@pytest.mark.parametrize("code,message,cls,errno_name", [
    (grpc.StatusCode.INVALID_ARGUMENT, "EINVAL: bad path", cowkv.InvalidArgument, "EINVAL"),
    (grpc.StatusCode.NOT_FOUND, "key not found: \"k\"", cowkv.NotFound, None),
    (grpc.StatusCode.NOT_FOUND, "ENOENT: no such file: /a", cowkv.NotFound, "ENOENT"),
    (grpc.StatusCode.ALREADY_EXISTS, "EEXIST: /a", cowkv.AlreadyExists, "EEXIST"),
    (grpc.StatusCode.FAILED_PRECONDITION, "ENOTEMPTY: /d is not empty",
     cowkv.FailedPrecondition, "ENOTEMPTY"),
    (grpc.StatusCode.FAILED_PRECONDITION, "subvolume 's' is a read-only snapshot",
     cowkv.ReadOnly, None),
    (grpc.StatusCode.FAILED_PRECONDITION, "EROFS: store is opened read-only", cowkv.ReadOnly,
     "EROFS"),
    (grpc.StatusCode.ABORTED, "conflict", cowkv.Conflict, None),
    (grpc.StatusCode.OUT_OF_RANGE, "too old", cowkv.TooOld, None),
    (grpc.StatusCode.RESOURCE_EXHAUSTED, "no space left on device: x", cowkv.NoSpace, None),
    (grpc.StatusCode.RESOURCE_EXHAUSTED, "ENOSPC: write", cowkv.NoSpace, "ENOSPC"),
    (grpc.StatusCode.RESOURCE_EXHAUSTED, "too many open transactions", cowkv.ResourceExhausted,
     None),
    (grpc.StatusCode.DATA_LOSS, "EIO: corrupt node", cowkv.DataLoss, "EIO"),
    (grpc.StatusCode.UNAVAILABLE, "cowkvd is stopping", cowkv.Unavailable, None),
    (grpc.StatusCode.UNAUTHENTICATED, "wrong bearer token", cowkv.Unauthenticated, None),
    (grpc.StatusCode.PERMISSION_DENIED, "no", cowkv.PermissionDenied, None),
    (grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded", cowkv.DeadlineExceeded, None),
    (grpc.StatusCode.CANCELLED, "Cancelled", cowkv.Cancelled, None),
    (grpc.StatusCode.UNIMPLEMENTED, "", cowkv.Unimplemented, None),
    (grpc.StatusCode.INTERNAL, "device unavailable: EIO", cowkv.Internal, None),
    (grpc.StatusCode.UNKNOWN, "?", cowkv.Internal, None),
])
def test_error_classes(code: grpc.StatusCode, message: str, cls: type,
                       errno_name: Optional[str]) -> None:
    e = errors.from_rpc_error(FakeRpcError(code, message), "op")
    assert type(e) is cls and isinstance(e, cowkv.CowkvError)
    assert e.code == code and e.errno_name == errno_name and e.operation == "op"
    assert str(e) == f"op: {message}" if message else True
    assert e.retry_transaction == (cls in (cowkv.Conflict, cowkv.TooOld))


# The same statuses with the ErrorInfo a current server sends: the class
# comes from the reason, whatever the text says (the messages here are
# chosen so that the text heuristics would pick another class).
@pytest.mark.parametrize("code,reason,message,cls", [
    (grpc.StatusCode.FAILED_PRECONDITION, "READ_ONLY_SNAPSHOT", "write refused", cowkv.ReadOnly),
    (grpc.StatusCode.FAILED_PRECONDITION, "EROFS", "EROFS: store", cowkv.ReadOnly),
    (grpc.StatusCode.FAILED_PRECONDITION, "ENOTEMPTY", "read-only thing is not empty",
     cowkv.FailedPrecondition),
    (grpc.StatusCode.RESOURCE_EXHAUSTED, "ENOSPC", "device full", cowkv.NoSpace),
    (grpc.StatusCode.RESOURCE_EXHAUSTED, "SERVER_BUSY", "no space in the queue",
     cowkv.ResourceExhausted),
    (grpc.StatusCode.RESOURCE_EXHAUSTED, "LIMIT", "no space for the response",
     cowkv.ResourceExhausted),
    (grpc.StatusCode.ABORTED, "CONFLICT", "x", cowkv.Conflict),
    (grpc.StatusCode.OUT_OF_RANGE, "TOO_OLD", "x", cowkv.TooOld),
    (grpc.StatusCode.OUT_OF_RANGE, "COMPACTED", "too old", cowkv.Compacted),
    (grpc.StatusCode.OUT_OF_RANGE, "FUTURE_REVISION", "too old", cowkv.FutureRevision),
    (grpc.StatusCode.NOT_FOUND, "LEASE_NOT_FOUND", "x", cowkv.NotFound),
    (grpc.StatusCode.INTERNAL, "DEVICE_UNAVAILABLE", "x", cowkv.Internal),
    (grpc.StatusCode.UNAVAILABLE, "STOPPING", "x", cowkv.Unavailable),
])
def test_error_classes_from_error_info(code: grpc.StatusCode, reason: str, message: str,
                                       cls: type) -> None:
    trailers = status_details(code, message, reason, {"compact_revision": "42"})
    e = errors.from_rpc_error(FakeRpcError(code, message, trailers), "op")
    assert type(e) is cls and e.reason == reason and e.code == code
    assert e.metadata["compact_revision"] == "42"
    assert e.retry_transaction == issubclass(cls, (cowkv.Conflict, cowkv.TooOld))


def test_error_info_errno_and_compact_revision() -> None:
    code = grpc.StatusCode.FAILED_PRECONDITION
    trailers = status_details(code, "no prefix here", "READ_ONLY_SNAPSHOT", {"errno": "EROFS"})
    e = errors.from_rpc_error(FakeRpcError(code, "no prefix here", trailers))
    assert e.errno_name == "EROFS"  # from metadata, not the text
    code = grpc.StatusCode.OUT_OF_RANGE
    trailers = status_details(code, "compacted", "COMPACTED", {"compact_revision": "17"})
    c = errors.from_rpc_error(FakeRpcError(code, "compacted", trailers))
    assert isinstance(c, cowkv.Compacted) and c.compact_revision == 17
    # A damaged trailer is treated as none: the fallback decides.
    bad = (("grpc-status-details-bin", b"\x1a\x7f"),)
    e = errors.from_rpc_error(FakeRpcError(grpc.StatusCode.FAILED_PRECONDITION, "EROFS: x", bad))
    assert type(e) is cowkv.ReadOnly and e.reason == ""


def test_compare_builders() -> None:
    c = cowkv.Version("k") > 3
    assert isinstance(c, cowkv.Compare)
    assert c.proto == kv_pb2.Compare(key=b"k", target=kv_pb2.Compare.TARGET_VERSION,
                                     op=kv_pb2.Compare.OP_GREATER, number=3)
    assert (cowkv.Value("k") != "x").proto.value == b"x"
    assert (cowkv.ModRevision(b"k") < 5).proto.op == kv_pb2.Compare.OP_LESS
    assert cowkv.Missing("k").proto.exists is False
    assert cowkv.Exists("k").proto.target == kv_pb2.Compare.TARGET_EXISTS
    get = cowkv.Get("k").proto.range
    assert (get.start, get.end, get.limit) == (b"k", b"k\x00", 1)
    with pytest.raises(TypeError):
        hash(cowkv.Value("k"))


class FakePages:
    """Serves `total` keys in pages of at most `page` keys, like Range."""

    def __init__(self, total: int, page: int) -> None:
        self.total, self.page, self.calls = total, page, 0
        self.limits: List[int] = []

    def __call__(self, req: kv_pb2.RangeRequest) -> kv_pb2.RangeResponse:
        self.calls += 1
        self.limits.append(req.limit)
        start = int(req.page_token or b"0")
        n = min(self.page, req.limit or self.page, self.total - start)
        kvs = [kv_pb2.KeyValue(key=b"%04d" % i) for i in range(start, start + n)]
        more = start + n < self.total
        return kv_pb2.RangeResponse(kvs=kvs, more=more, revision=7,
                                    next_page_token=str(start + n).encode() if more else b"")


def test_range_iterator_pages() -> None:
    fake = FakePages(25, 10)
    it = RangeIterator(fake, kv_pb2.RangeRequest())
    assert [kv.key for kv in it] == [b"%04d" % i for i in range(25)]
    assert fake.calls == 3 and it.pages == 3 and it.revision == 7
    fake = FakePages(25, 10)
    assert len(list(RangeIterator(fake, kv_pb2.RangeRequest(), limit=12, page_size=5))) == 12
    assert fake.limits == [5, 5, 2]
    assert list(RangeIterator(FakePages(0, 10), kv_pb2.RangeRequest())) == []


class FakeTx:
    def __init__(self, log: List[str], fail: Optional[Exception]) -> None:
        self.log, self.fail = log, fail

    def __enter__(self) -> "FakeTx":
        self.log.append("begin")
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None:
            self.log.append("abort")
            return
        if self.fail is not None:
            self.log.append("conflict")
            raise self.fail
        self.log.append("commit")


def _conflict() -> cowkv.Conflict:
    return cowkv.Conflict("conflict", grpc.StatusCode.ABORTED)


def test_run_in_transaction_retries_then_succeeds() -> None:
    log: List[str] = []
    fails: List[Optional[Exception]] = [_conflict(), cowkv.TooOld("old"), None]
    result = run_in_transaction(lambda: FakeTx(log, fails.pop(0)),  # type: ignore
                                lambda tx: 42, max_attempts=5, backoff_s=0.0001)
    assert result == 42
    assert log == ["begin", "conflict", "begin", "conflict", "begin", "commit"]


def test_run_in_transaction_limits_and_other_errors() -> None:
    log: List[str] = []
    with pytest.raises(cowkv.Conflict):
        run_in_transaction(lambda: FakeTx(log, _conflict()), lambda tx: None,  # type: ignore
                           max_attempts=3, backoff_s=0.0001)
    assert log.count("begin") == 3
    log.clear()

    def bad(tx: Any) -> None:
        raise cowkv.NotFound("nope")
    with pytest.raises(cowkv.NotFound):
        run_in_transaction(lambda: FakeTx(log, None), bad, max_attempts=5)  # type: ignore
    assert log == ["begin", "abort"]


RETRY_RULE = json.loads((pathlib.Path(__file__).resolve().parents[2] / "conformance" /
                         "retry_rule.json").read_text())


@pytest.mark.parametrize("seed", range(5))
def test_retry_rule_defaults(seed: int) -> None:
    """The one rule (docs/api.md, "Retrying transactions"): with the
    defaults, a transaction that always conflicts runs max_attempts times
    and each wait lies in the rule's bounds."""
    random.seed(seed)
    log: List[str] = []
    sleeps: List[float] = []
    with pytest.raises(cowkv.Conflict):
        run_in_transaction(lambda: FakeTx(log, _conflict()), lambda tx: None,  # type: ignore
                           sleep=sleeps.append)
    assert log.count("begin") == RETRY_RULE["max_attempts"]
    assert len(sleeps) == len(RETRY_RULE["waits_ms"]) == RETRY_RULE["max_attempts"] - 1
    for got, (low, high) in zip(sleeps, RETRY_RULE["waits_ms"]):
        assert low / 1000 <= got <= high / 1000, (got, low, high)
    assert cowkv.txn.DEFAULT_BACKOFF_S * 1000 == RETRY_RULE["first_wait_ms"]
    assert cowkv.txn.DEFAULT_MAX_BACKOFF_S * 1000 == RETRY_RULE["max_wait_ms"]


def test_retry_rule_defaults_aio() -> None:
    from cowkv.aio import txn as aio_txn
    sleeps: List[float] = []
    runs = 0

    async def sleep(d: float) -> None:
        sleeps.append(d)

    class AsyncFakeTx:
        async def __aenter__(self) -> "AsyncFakeTx":
            nonlocal runs
            runs += 1
            return self

        async def __aexit__(self, *exc: Any) -> None:
            raise _conflict()

    async def body(tx: Any) -> None:
        return None

    with pytest.raises(cowkv.Conflict):
        asyncio.run(aio_txn.run_in_transaction(AsyncFakeTx, body, sleep=sleep))  # type: ignore
    assert runs == RETRY_RULE["max_attempts"]
    for got, (low, high) in zip(sleeps, RETRY_RULE["waits_ms"], strict=True):
        assert low / 1000 <= got <= high / 1000, (got, low, high)


def test_deprecated_names_warn() -> None:
    assert cowkv.txn.attempts_of(None, None) == RETRY_RULE["max_attempts"]
    with pytest.warns(DeprecationWarning):
        assert cowkv.txn.attempts_of(None, 4) == 5
    with pytest.raises(TypeError):
        cowkv.txn.attempts_of(3, 4)


def test_modes() -> None:
    assert _parse_mode("rb") == ("r", False)
    assert _parse_mode("r+b") == ("r", True)
    assert _parse_mode("a+") == ("a", True)
    for bad in ["", "rw", "rt", "r++", "z"]:
        with pytest.raises(ValueError):
            _parse_mode(bad)


def test_package_is_typed_with_generated_stubs() -> None:
    root = importlib.resources.files("cowkv")
    assert root.joinpath("py.typed").is_file()
    assert root.joinpath("v1").joinpath("kv_pb2.pyi").is_file()
    assert "Generated" in root.joinpath("v1").joinpath("kv_pb2.py").read_text()
    assert set(cowkv.__all__) <= set(dir(cowkv))
