"""Client-side input checks: requests the server would refuse with
INVALID_ARGUMENT are refused before they are sent, with the same class and
POSIX name (so a bad key or path fails the same way whether or not the
server is reachable). The limits are the server's (docs/api.md, "Limits");
anything subtler is left to the server.

Every RPC of the client goes through :func:`check_request` (in _rpc.py and
the streaming write's first message).
"""

from __future__ import annotations

from typing import Any

import grpc

from cowkv import _spec, errors

__all__ = ["check_request", "MAX_KEY_BYTES", "MAX_VALUE_BYTES", "MAX_NAME_BYTES",
           "MAX_PATH_BYTES", "MAX_PATH_DEPTH"]

# The server's limits (clients/spec/limits.json, through cowkv._spec).
MAX_KEY_BYTES = _spec.MAX_KEY_BYTES
MAX_VALUE_BYTES = _spec.MAX_VALUE_BYTES
MAX_NAME_BYTES = _spec.MAX_NAME_BYTES
MAX_PATH_BYTES = _spec.MAX_PATH_BYTES
MAX_PATH_DEPTH = _spec.MAX_PATH_DEPTH

# Request messages whose `key` is one key (1..1024 bytes) and whose `value`
# (if any) is a value.
_KEYED = {"GetRequest", "PutRequest", "DeleteRequest", "TxnGetRequest", "TxnPutRequest"}
# Subvolumes requests: every name field must be a valid name (never empty).
_NAME_FIELDS = {
    "CreateSubvolumeRequest": ("name",), "ShowSubvolumeRequest": ("name",),
    "DeleteSubvolumeRequest": ("name",), "RenameSubvolumeRequest": ("name", "new_name"),
    "SnapshotRequest": ("source", "name"),
}
# Files request fields that hold a path.
_PATH_FIELDS = ("path", "from", "to", "existing", "new_path", "src_path", "dst_path")


def _invalid(message: str) -> errors.InvalidArgument:
    return errors.InvalidArgument(message, grpc.StatusCode.INVALID_ARGUMENT, "validate")


def check_name(field: str, name: str) -> None:
    """A subvolume name: 1..255 bytes, no '/' or NUL."""
    n = len(name.encode("utf-8"))
    if n == 0 or n > MAX_NAME_BYTES:
        raise _invalid(f"{field}: a subvolume name is 1..{MAX_NAME_BYTES} bytes, not {n}")
    if "/" in name or "\0" in name:
        raise _invalid(f"{field}: a subvolume name may not contain '/' or NUL: {name!r}")


def check_key(field: str, key: bytes) -> None:
    """A key: 1..1024 bytes."""
    if not 1 <= len(key) <= MAX_KEY_BYTES:
        raise _invalid(f"{field}: a key is 1..{MAX_KEY_BYTES} bytes, not {len(key)}")


def check_value(value: bytes) -> None:
    """A value: at most 16 MiB."""
    if len(value) > MAX_VALUE_BYTES:
        raise _invalid(f"value: at most {MAX_VALUE_BYTES} bytes, not {len(value)}")


def check_path(field: str, path: str) -> None:
    """A path: at most 4096 bytes and 256 components of 1..255 bytes, no NUL,
    no "." or ".." component (EINVAL / ENAMETOOLONG, as the server)."""
    size = len(path.encode("utf-8"))
    if size > MAX_PATH_BYTES:
        raise _invalid(f"ENAMETOOLONG: {field}: a path is at most {MAX_PATH_BYTES} bytes, "
                       f"not {size}")
    if "\0" in path:
        raise _invalid(f"EINVAL: {field}: a path may not contain NUL")
    parts = [p for p in path.split("/") if p]
    for part in parts:
        n = len(part.encode("utf-8"))
        if n > MAX_NAME_BYTES:
            raise _invalid(f"ENAMETOOLONG: {field}: a name is at most {MAX_NAME_BYTES} bytes, "
                           f"not {n}")
        if part in (".", ".."):
            raise _invalid(f"EINVAL: {field}: '{part}' is not allowed in a path: {path!r}")
    if len(parts) > MAX_PATH_DEPTH:
        raise _invalid(f"EINVAL: {field}: a path has at most {MAX_PATH_DEPTH} components")


def _check_txn(req: Any) -> None:
    for c in req.compare:
        check_key("compare.key", c.key)
    for op in list(req.success) + list(req.failure):
        which = op.WhichOneof("op")
        if which == "put":
            check_key("put.key", op.put.key)
            check_value(op.put.value)
        elif which == "delete":
            check_key("delete.key", op.delete.key)


def check_request(req: Any) -> None:
    """Raises InvalidArgument if the server would refuse the request's
    subvolume name, key, value or path for its form alone."""
    kind = req.DESCRIPTOR.name
    fields = req.DESCRIPTOR.fields_by_name
    if "subvolume" in fields and req.subvolume:
        check_name("subvolume", req.subvolume)
    if kind == "RangeRequest" and req.snapshot:
        check_name("snapshot", req.snapshot)
    for field in _NAME_FIELDS.get(kind, ()):
        check_name(field, getattr(req, field))
    if kind in _KEYED:
        check_key("key", req.key)
        if "value" in fields:
            check_value(req.value)
    elif kind == "TxnRequest":
        _check_txn(req)
    if req.DESCRIPTOR.file.name == "cowkv/v1/files.proto":
        for field in _PATH_FIELDS:
            if field in fields:
                check_path(field, getattr(req, field))
