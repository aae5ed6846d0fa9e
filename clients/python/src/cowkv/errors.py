"""Errors: one exception class per gRPC status code the server returns.

Every call of the client raises a subclass of :class:`CowkvError` (never a
bare ``grpc.RpcError``). The class says what kind of failure it was and what
to do about it (docs/api.md, "Errors"); ``code`` is the gRPC status code,
``message`` the server's reason, and ``errno_name`` the POSIX name that
Files errors start with (``"ENOTEMPTY"`` for ``"ENOTEMPTY: directory not
empty: /d"``), or None.

    CowkvError
    ├── InvalidArgument       INVALID_ARGUMENT     fix the request
    ├── NotFound              NOT_FOUND            key, subvolume, file or handle absent
    ├── AlreadyExists         ALREADY_EXISTS       name taken
    ├── FailedPrecondition    FAILED_PRECONDITION  do not retry until something changes
    │   └── ReadOnly                               write to a read-only snapshot or store (EROFS)
    ├── Conflict              ABORTED              retry the whole transaction
    ├── TooOld                OUT_OF_RANGE         retry the whole transaction
    │   └── Compacted                              a revision the history no longer keeps
    ├── FutureRevision        OUT_OF_RANGE         a revision not reached yet
    ├── ResourceExhausted     RESOURCE_EXHAUSTED   a server limit (open transactions, size)
    │   └── NoSpace                                the device is full (ENOSPC)
    ├── DataLoss              DATA_LOSS            a checksum failed: run Admin.Check
    ├── Unavailable           UNAVAILABLE          server stopping or unreachable: retry the call
    ├── Unauthenticated       UNAUTHENTICATED      token missing or wrong
    ├── PermissionDenied      PERMISSION_DENIED
    ├── DeadlineExceeded      DEADLINE_EXCEEDED    the call's timeout passed
    ├── Cancelled             CANCELLED
    ├── Unimplemented         UNIMPLEMENTED        server too old for this call
    └── Internal              INTERNAL, UNKNOWN    device I/O error, unparsable response

The class is chosen by the google.rpc.ErrorInfo reason in the answer's
grpc-status-details-bin trailer (``_BY_REASON``; any other reason keeps the
code's class); the message text is read only for a server that sends no
ErrorInfo (``_refine``). The tables (classes, code -> class, reason ->
class, retry rule, text fallbacks) come from clients/spec/errors.json
through the generated ``cowkv._spec``.
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Tuple, Type

import grpc

from cowkv import _spec

__all__ = [
    "CowkvError", "InvalidArgument", "NotFound", "AlreadyExists", "FailedPrecondition",
    "ReadOnly", "Conflict", "TooOld", "ResourceExhausted", "NoSpace", "DataLoss",
    "Unavailable", "Unauthenticated", "PermissionDenied", "DeadlineExceeded", "Cancelled",
    "Unimplemented", "Internal", "Compacted", "FutureRevision", "from_rpc_error",
]

_ERRNO_PREFIX = re.compile(r"^(E[A-Z0-9]+): ")


class CowkvError(Exception):
    """Base of every error the client raises."""

    #: True when the right reaction is to run the whole transaction again.
    retry_transaction: bool = False

    def __init__(self, message: str, code: Optional[grpc.StatusCode] = None,
                 operation: str = "") -> None:
        super().__init__(f"{operation}: {message}" if operation else message)
        self.message = message
        self.code = code
        self.operation = operation
        match = _ERRNO_PREFIX.match(message)
        self.errno_name: Optional[str] = match.group(1) if match else None
        #: google.rpc.ErrorInfo of the answer: its reason ("COMPACTED", ...)
        #: and metadata, or "" / {} when the server sent none.
        self.reason: str = ""
        self.metadata: Dict[str, str] = {}


class InvalidArgument(CowkvError):
    """A bad key, value, name, path, range, page token, flag or lease, or a
    request over a size limit (EINVAL, ENAMETOOLONG, EFBIG, ERANGE)."""


class NotFound(CowkvError):
    """An absent key, subvolume, snapshot or file (ENOENT), or an unknown or
    finished transaction handle."""


class AlreadyExists(CowkvError):
    """A subvolume or file name is taken (EEXIST)."""


class FailedPrecondition(CowkvError):
    """A condition on the store's state does not hold: not a directory, is a
    directory, directory not empty, link to a directory (ENOTDIR, EISDIR,
    ENOTEMPTY, EPERM, EMLINK), deleting "default". Retrying does not help
    until something changes."""


class ReadOnly(FailedPrecondition):
    """A write to a read-only snapshot, or to a store that is read-only
    (opened so, or after an I/O error) (EROFS)."""


class Conflict(CowkvError):
    """A transaction conflicted at commit (something it read changed), or its
    handle expired. Run the whole transaction again
    (:meth:`cowkv.Subvolume.run_in_transaction` does)."""


class TooOld(CowkvError):
    """A transaction outlived the engine's conflict window. Run it again."""


class Compacted(TooOld):
    """A read at a revision the subvolume's history no longer keeps (etcd's
    ErrCompacted): ``compact_revision`` is the oldest one still readable."""

    @property
    def compact_revision(self) -> int:
        return int(self.metadata.get("compact_revision", "0"))


class FutureRevision(CowkvError):
    """A read at a revision the store has not reached yet."""


class ResourceExhausted(CowkvError):
    """A server limit: too many open transactions for this client or the
    server, or a message over the size limit."""


class NoSpace(ResourceExhausted):
    """The device is full (ENOSPC); nothing was changed."""


class DataLoss(CowkvError):
    """A checksum or structure check failed on a read (EIO)."""


class Unavailable(CowkvError):
    """The server is stopping or cannot be reached. Retry the call."""


class Unauthenticated(CowkvError):
    """The server wants a bearer token and got none or a wrong one."""


class PermissionDenied(CowkvError):
    """The caller may not do this."""


class DeadlineExceeded(CowkvError):
    """The call's timeout passed before the server answered (ETIMEDOUT)."""


class Cancelled(CowkvError):
    """The call was cancelled (ECANCELED)."""


class Unimplemented(CowkvError):
    """The server does not know this call."""


class Internal(CowkvError):
    """A device I/O error on the server, or a message that failed to parse."""


def _spec_classes() -> Dict[str, Type[CowkvError]]:
    """The spec's class names -> this module's classes (named alike:
    "read_only" -> ReadOnly). The watch-only classes (subvolume_deleted,
    slow_reader) are cowkv.watch.WatchCanceled with its cancel_code."""
    out: Dict[str, Type[CowkvError]] = {}
    for name in _spec.CLASSES:
        cls = globals().get("".join(p.capitalize() for p in name.split("_")))
        if isinstance(cls, type) and issubclass(cls, CowkvError):
            out[name] = cls
            cls.retry_transaction = _spec.CLASSES[name].retryable
    return out


#: class name (clients/spec/errors.json) -> exception class.
CLASSES: Dict[str, Type[CowkvError]] = _spec_classes()

_BY_CODE: Dict[grpc.StatusCode, Type[CowkvError]] = {
    grpc.StatusCode[code]: CLASSES[name] for code, name in _spec.BY_CODE.items()}

#: google.rpc.ErrorInfo reasons (docs/api.md, "Errors") that pick a class
#: finer than the status code's. Any other reason keeps the code's class.
_BY_REASON: Dict[str, Type[CowkvError]] = {
    reason: CLASSES[name] for reason, name in _spec.BY_REASON.items()}


def _matches(f: _spec.Fallback, message: str) -> bool:
    """A prefix of ``f``, or one of its substrings and none of its exceptions."""
    if message.startswith(f.prefixes):
        return True
    text = message.lower() if f.ignore_case else message
    return not any(u in text for u in f.unless) and any(c in text for c in f.contains)


def _refine(cls: Type[CowkvError], code: grpc.StatusCode, message: str) -> Type[CowkvError]:
    """For a server that sends no ErrorInfo (older than the reasons): picks
    the subclass the message text names (read-only, no space: the spec's
    fallbacks)."""
    for f in _spec.FALLBACKS:
        if f.code == code.name and _matches(f, message):
            return CLASSES[f.cls]
    return cls


def error_class(code: Optional[grpc.StatusCode], message: str,
                reason: str = "") -> Type[CowkvError]:
    """The exception class for a status: by the ErrorInfo ``reason`` when
    the server sent one, else by the code and the message text (fallback)."""
    if code is None:
        return CowkvError
    by_code = _BY_CODE.get(code, CowkvError)
    if not reason:
        return _refine(by_code, code, message)
    return _BY_REASON.get(reason, by_code)


def _fields(buf: bytes) -> List[Tuple[int, bytes]]:
    """The length-delimited fields of a protobuf message, as (number, bytes);
    varint fields are skipped. Raises ValueError when malformed."""
    out: List[Tuple[int, bytes]] = []
    i = 0

    def varint() -> int:
        nonlocal i
        shift = value = 0
        while True:
            if i >= len(buf) or shift > 63:
                raise ValueError("truncated varint")
            b = buf[i]
            i += 1
            value |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return value

    while i < len(buf):
        tag = varint()
        wire = tag & 7
        if wire == 0:
            varint()
        elif wire == 2:
            n = varint()
            if i + n > len(buf):
                raise ValueError("truncated field")
            out.append((tag >> 3, buf[i:i + n]))
            i += n
        elif wire == 5:
            i += 4
        elif wire == 1:
            i += 8
        else:
            raise ValueError(f"wire type {wire}")
    return out


def error_info(err: grpc.RpcError) -> Tuple[str, Dict[str, str]]:
    """The google.rpc.ErrorInfo {reason, metadata} in the answer's
    grpc-status-details-bin trailer (google.rpc.Status.details), decoded
    from the wire format; ("", {}) when there is none."""
    trailers = err.trailing_metadata() if hasattr(err, "trailing_metadata") else None
    for key, value in trailers or ():
        if key != "grpc-status-details-bin" or not isinstance(value, bytes):
            continue
        try:
            for num, any_bytes in _fields(value):
                if num != 3:  # Status.details: repeated Any
                    continue
                parts = dict(_fields(any_bytes))
                if not parts.get(1, b"").endswith(b"google.rpc.ErrorInfo"):
                    continue
                reason, metadata = "", {}
                for f, v in _fields(parts.get(2, b"")):
                    if f == 1:
                        reason = v.decode()
                    elif f == 3:  # map<string, string> entry {1: key, 2: value}
                        entry = dict(_fields(v))
                        metadata[entry.get(1, b"").decode()] = entry.get(2, b"").decode()
                return reason, metadata
        except (ValueError, UnicodeDecodeError):
            return "", {}
    return "", {}


def from_rpc_error(err: grpc.RpcError, operation: str = "") -> CowkvError:
    """Converts a grpc.RpcError (a grpc.Call) into the matching CowkvError."""
    code: Optional[grpc.StatusCode] = err.code() if hasattr(err, "code") else None
    message: str = (err.details() if hasattr(err, "details") else None) or str(err)
    reason, metadata = error_info(err)
    cls = error_class(code, message, reason)
    error = cls(message, code, operation)
    error.reason, error.metadata = reason, metadata
    if "errno" in metadata:  # Files errors: the POSIX name, without reading the text
        error.errno_name = metadata["errno"]
    error.__cause__ = err
    return error
