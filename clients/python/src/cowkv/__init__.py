"""cowkv: the Python client of cowkvd (gRPC API cowkv.v1).

    import cowkv

    with cowkv.connect("127.0.0.1:7420") as client:
        client.create_subvolume("data")
        sv = client.subvolume("data")
        sv.put("greeting", "hello")
        sv.get("greeting")                                  # b"hello"

        with sv.begin() as tx:                              # interactive
            tx.put("n", str(int(tx.get("n", b"0")) + 1))

        sv.run_in_transaction(lambda tx: tx.put("k", "v"))  # retries Conflict

        client.snapshot("data", "data@2026-11-22", read_only=True)
        with sv.files.open("/notes.txt", "w") as f:
            f.write(b"hello\\n")

Modules: client (connect, Client, subvolumes, Admin), kv (Subvolume), range
(RangeIterator), values (KeyValue, Durability), txn
(transactions, compare and op builders), files and file (the file tree),
errors (the exception per status code), v1 (the generated stubs).
"""

from cowkv.client import (DEFAULT_ADDRESS, DEFAULT_TIMEOUT, CheckResult, Client, SubvolumeInfo,
                          VersionInfo, connect)
from cowkv.errors import (AlreadyExists, Cancelled, Conflict, CowkvError, DataLoss,
                          DeadlineExceeded, FailedPrecondition, Internal, InvalidArgument,
                          NoSpace, NotFound, PermissionDenied, ReadOnly, ResourceExhausted,
                          TooOld, Unauthenticated, Unavailable, Unimplemented, Compacted,
                          FutureRevision)
from cowkv.file import RemoteFile
from cowkv.handle import FileHandle
from cowkv.files import (FIEMAP_EXTENT_DATA_INLINE, FIEMAP_EXTENT_LAST, FIEMAP_EXTENT_NOT_ALIGNED,
                         FIEMAP_EXTENT_SHARED, RENAME_EXCHANGE, RENAME_NOREPLACE, DirEntry,
                         Extent, FileKind, Files, FileStat)
from cowkv.files import UTIME_NOW, XATTR_CREATE, XATTR_REPLACE
from cowkv.kv import Subvolume
from cowkv.lease import KeepAliveThread, LeaseInfo, Leases, Lock
from cowkv.range import RangeIterator, RangePage
from cowkv.txn import (Compare, CreateRevision, Delete, DeleteRange, DeleteResult, Exists, Get,
                       Missing, ModRevision, Op, Put, PutResult, Range, RangeResult, Transaction,
                       TransactionState, TxnResult, Value, Version)
from cowkv.values import Durability, KeyValue
from cowkv.retry import UnavailableRetry
from cowkv.send import PartialReceive, ReceiveResult, SendStats, SendStream
from cowkv.watch import EventType, FileEvent, Watch, WatchCanceled, WatchEvent

from cowkv import aio  # noqa: E402 - cowkv.aio.connect after `import cowkv`

__version__ = "0.1.0"

__all__ = [
    "PartialReceive", "ReceiveResult", "SendStats", "SendStream",
    "connect", "Client", "SubvolumeInfo", "CheckResult", "VersionInfo", "DEFAULT_ADDRESS",
    "DEFAULT_TIMEOUT",
    "Subvolume", "KeyValue", "Durability", "RangeIterator", "RangePage",
    "Leases", "LeaseInfo", "KeepAliveThread", "Lock",
    "Transaction", "TransactionState", "TxnResult", "PutResult", "DeleteResult", "RangeResult",
    "Compare", "Value", "Version", "ModRevision", "CreateRevision", "Exists", "Missing",
    "Op", "Put", "Delete", "DeleteRange", "Range", "Get",
    "Files", "RemoteFile", "FileHandle", "FileStat", "FileKind", "DirEntry", "Extent",
    "RENAME_NOREPLACE", "RENAME_EXCHANGE", "FIEMAP_EXTENT_LAST", "FIEMAP_EXTENT_NOT_ALIGNED",
    "FIEMAP_EXTENT_DATA_INLINE", "FIEMAP_EXTENT_SHARED",
    "UTIME_NOW", "XATTR_CREATE", "XATTR_REPLACE",
    "CowkvError", "InvalidArgument", "NotFound", "AlreadyExists", "FailedPrecondition",
    "ReadOnly", "Conflict", "TooOld", "Compacted", "FutureRevision", "ResourceExhausted", "NoSpace", "DataLoss", "Unavailable",
    "Unauthenticated", "PermissionDenied", "DeadlineExceeded", "Cancelled", "Unimplemented",
    "Internal",
    "Watch", "WatchEvent", "FileEvent", "UnavailableRetry", "EventType", "WatchCanceled",
]
