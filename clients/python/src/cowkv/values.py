"""Values shared by the KV and transaction modules: keys, KeyValue, Durability."""

from __future__ import annotations

import dataclasses
import enum
from typing import Optional, Union, cast

from cowkv.v1 import kv_pb2

__all__ = ["Durability", "KeyValue", "Key", "to_bytes", "opt_bytes", "durability_proto"]

#: Keys and values are bytes; a str is encoded as UTF-8.
Key = Union[bytes, bytearray, memoryview, str]


class Durability(enum.IntEnum):
    """When a write is acknowledged (cowkv.v1.Durability)."""

    #: The server's default: durable unless cowkvd runs with --async-default.
    DEFAULT = kv_pb2.DURABILITY_DEFAULT
    #: After the log sync that covers it: survives any crash.
    DURABLE = kv_pb2.DURABILITY_DURABLE
    #: After it is visible; durable by the next sync, in commit order.
    ASYNC = kv_pb2.DURABILITY_ASYNC


@dataclasses.dataclass(frozen=True)
class KeyValue:
    """One key with its value and revisions (cowkv.v1.KeyValue)."""

    key: bytes
    value: bytes  # empty for keys_only reads
    create_revision: int  # revision that created the key
    mod_revision: int  # revision of its last write
    version: int  # writes since it was created; 1 = just created

    @classmethod
    def from_proto(cls, m: kv_pb2.KeyValue) -> "KeyValue":
        return cls(m.key, m.value, m.create_revision, m.mod_revision, m.version)


def to_bytes(value: Key) -> bytes:
    """bytes as they are, str as UTF-8."""
    if isinstance(value, str):
        return value.encode("utf-8")
    return bytes(value)


def opt_bytes(value: Optional[Key]) -> bytes:
    """None as empty bytes (the proto's "not set"), else :func:`to_bytes`."""
    return b"" if value is None else to_bytes(value)


def durability_proto(d: Durability) -> "kv_pb2.Durability":
    """The proto enum value of a Durability."""
    return cast("kv_pb2.Durability", int(d))
