"""The Python client's conformance adapter: executes one JSON op per line
from stdin through the client's public API and answers on stdout
(clients/conformance/README.md, "Adapter protocol"). The driver,
clients/conformance/driver.py, owns servers, variables and matching:

    python3 clients/conformance/driver.py \
        --adapter '.venv/bin/python tests/conformance_adapter.py'

Bytes arrive and leave as base64; results are the README's canonical shapes;
a client error is answered with its most specific class name.
"""

from __future__ import annotations

import base64
import concurrent.futures
import json
import operator
import sys
import traceback
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import cowkv
from cowkv.v1 import files_pb2

# --- values ----------------------------------------------------------------


def as_bytes(v: Any) -> bytes:
    """A bytes argument: base64 on the wire; omitted = empty."""
    return base64.b64decode(v) if v else b""


def as_str(v: Any) -> str:
    return "" if v is None else str(v)


def opt(v: Any) -> Optional[bytes]:
    """A bytes bound: omitted or empty = None (the proto default)."""
    b = as_bytes(v)
    return b if b else None


class AdapterFailure(Exception):
    """Not a client error: the adapter could not carry out the op."""


# --- error classes ---------------------------------------------------------

_CLASSES: List[Tuple[type, str]] = [  # most specific first
    (cowkv.ReadOnly, "read_only"), (cowkv.NoSpace, "no_space"),
    (cowkv.FutureRevision, "future_revision"),
    (cowkv.InvalidArgument, "invalid_argument"), (cowkv.NotFound, "not_found"),
    (cowkv.AlreadyExists, "already_exists"), (cowkv.FailedPrecondition, "failed_precondition"),
    (cowkv.Conflict, "conflict"), (cowkv.TooOld, "too_old"),
    (cowkv.ResourceExhausted, "resource_exhausted"), (cowkv.DataLoss, "data_loss"),
    (cowkv.Unavailable, "unavailable"), (cowkv.Unauthenticated, "unauthenticated"),
    (cowkv.DeadlineExceeded, "deadline_exceeded"), (cowkv.Cancelled, "cancelled"),
    (cowkv.PermissionDenied, "permission_denied"), (cowkv.Unimplemented, "unimplemented"),
    (cowkv.Internal, "internal"),
]


_WATCH_ENDS = {"WATCH_CANCEL_SUBVOLUME_DELETED": "subvolume_deleted",
               "WATCH_CANCEL_SLOW_READER": "slow_reader"}


def error_class(e: cowkv.CowkvError) -> str:
    if isinstance(e, cowkv.Compacted):
        return "compacted"
    if isinstance(e, cowkv.WatchCanceled) and e.cancel_code in _WATCH_ENDS:
        return _WATCH_ENDS[e.cancel_code]
    for cls, name in _CLASSES:
        if isinstance(e, cls):
            return name
    return "unknown"


# --- canonical results -----------------------------------------------------


def info(s: cowkv.SubvolumeInfo) -> Dict[str, Any]:
    return {"id": s.id, "name": s.name, "parent_id": s.parent_id, "read_only": s.read_only}


def kv_result(kv: cowkv.KeyValue, revision: int) -> Dict[str, Any]:
    return {"key": kv.key, "value": kv.value, "create_revision": kv.create_revision,
            "mod_revision": kv.mod_revision, "version": kv.version, "revision": revision}


def keys_values(kvs: List[cowkv.KeyValue]) -> Dict[str, Any]:
    return {"keys": [kv.key for kv in kvs], "values": [kv.value for kv in kvs]}


def stat(st: cowkv.FileStat) -> Dict[str, Any]:
    kind = {cowkv.FileKind.REGULAR: "regular", cowkv.FileKind.DIRECTORY: "directory",
            cowkv.FileKind.SYMLINK: "symlink"}[st.kind]
    return {"ino": st.ino, "kind": kind, "mode": st.mode, "nlink": st.nlink, "size": st.size,
            "uid": st.uid, "gid": st.gid, "atime_ns": st.atime_ns, "mtime_ns": st.mtime_ns,
            "ctime_ns": st.ctime_ns}


_FLAG_NAMES = [(cowkv.FIEMAP_EXTENT_LAST, "LAST"), (cowkv.FIEMAP_EXTENT_NOT_ALIGNED, "NOT_ALIGNED"),
               (cowkv.FIEMAP_EXTENT_DATA_INLINE, "INLINE"), (cowkv.FIEMAP_EXTENT_SHARED, "SHARED")]

_DURABILITY = {"": cowkv.Durability.DEFAULT, "default": cowkv.Durability.DEFAULT,
               "durable": cowkv.Durability.DURABLE, "async": cowkv.Durability.ASYNC}


def durability(a: Dict[str, Any]) -> cowkv.Durability:
    return _DURABILITY[a.get("durability") or ""]



# --- the adapter -----------------------------------------------------------


class Adapter:
    """One client and the named handles of the current scenario."""

    def __init__(self) -> None:
        self.client: Optional[cowkv.Client] = None
        self.txs: Dict[str, cowkv.Transaction] = {}
        self.handles: Dict[str, Tuple[cowkv.Files, cowkv.FileHandle]] = {}
        self.watches: Dict[str, cowkv.Watch] = {}

    def op_connect(self, a: Dict[str, Any]) -> Any:
        self.close_client()
        deadline_ms = int(a.get("deadline_ms", 0))
        timeout = deadline_ms / 1000 if deadline_ms else cowkv.DEFAULT_TIMEOUT
        # A channel of its own (grpc-python shares connections between
        # channels with equal options, even after close), so that `connect`
        # really is a new gRPC peer.
        self.client = cowkv.connect(as_str(a.get("address")), token=as_str(a.get("token")) or None,
                                    timeout=timeout,
                                    options=[("grpc.use_local_subchannel_pool", 1)])
        return {}

    def close_client(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None

    def op_reset(self, a: Dict[str, Any]) -> Any:
        """End of a scenario: cancel watchers, forget handles, close the client."""
        for w in self.watches.values():
            w.cancel()
        self.watches.clear()
        self.txs.clear()
        self.handles.clear()
        self.close_client()
        return {}

    def cl(self) -> cowkv.Client:
        if self.client is None:
            raise AdapterFailure("no client: connect first")
        return self.client

    def sv(self, a: Dict[str, Any]) -> cowkv.Subvolume:
        return self.cl().subvolume(as_str(a.get("sv")))

    def op(self, name: str, a: Dict[str, Any]) -> Any:
        fn = getattr(self, "op_" + name, None)
        if fn is None:
            raise AdapterFailure(f"unknown op {name}")
        return fn(a)

    # Subvolumes.

    def op_create_subvolume(self, a: Dict[str, Any]) -> Any:
        return info(self.cl().create_subvolume(as_str(a.get("name"))))

    def op_show_subvolume(self, a: Dict[str, Any]) -> Any:
        return info(self.cl().show_subvolume(as_str(a.get("name"))))

    def op_list_subvolumes(self, a: Dict[str, Any]) -> Any:
        infos = self.cl().list_subvolumes(read_only=bool(a.get("read_only")),
                                            snapshots_only=bool(a.get("snapshots_only")),
                                            sort=[str(k) for k in a.get("sort", [])])
        return {"names": [s.name for s in infos]}

    def op_sync_subvolumes(self, a: Dict[str, Any]) -> Any:
        return {"synced": self.cl().sync_subvolumes([int(i) for i in a.get("ids", [])])}

    def op_snapshot(self, a: Dict[str, Any]) -> Any:
        return info(self.cl().snapshot(as_str(a.get("source")), as_str(a.get("name")),
                                         read_only=bool(a.get("read_only", False))))

    def op_rename_subvolume(self, a: Dict[str, Any]) -> Any:
        self.cl().rename_subvolume(as_str(a.get("name")), as_str(a.get("new_name")))
        return {}

    def op_delete_subvolume(self, a: Dict[str, Any]) -> Any:
        self.cl().delete_subvolume(as_str(a.get("name")))
        return {}

    # Send and receive: the whole stream in memory (scenarios keep it small).

    def op_send(self, a: Dict[str, Any]) -> Any:
        with self.cl().send(as_str(a.get("snapshot")), as_str(a.get("parent")) or None,
                            as_str(a.get("resume_token")) or None) as stream:
            data = b"".join(stream)
        assert stream.stats is not None
        return {"stream": data, "records": stream.stats.records, "bytes": stream.stats.bytes}

    def op_receive(self, a: Dict[str, Any]) -> Any:
        data, cut = as_bytes(a.get("stream")), int(a.get("cut_after_bytes", 0))
        r = self.cl().receive([data[:cut] if cut else data], as_str(a.get("name")),
                              resumable=bool(a.get("resumable")), dry_run=bool(a.get("dry_run")))
        return {"name": r.name, "incremental": r.incremental, "parent": r.parent,
                "records": r.records}

    def op_partial_receives(self, a: Dict[str, Any]) -> Any:
        return {"partials": [{"name": p.name, "token": p.token, "records": p.records}
                             for p in self.cl().partial_receives()]}

    def op_abort_receive(self, a: Dict[str, Any]) -> Any:
        self.cl().abort_receive(as_str(a.get("name")))
        return {}

    def op_digest(self, a: Dict[str, Any]) -> Any:
        return {"digest": self.cl().digest(as_str(a.get("subvolume")))}

    # KV.

    def op_get(self, a: Dict[str, Any]) -> Any:
        kv, revision = self.sv(a).get_with_revision(as_bytes(a.get("key")),
                                                    revision=int(a.get("revision", 0)))
        return kv_result(kv, revision)

    def op_put(self, a: Dict[str, Any]) -> Any:
        rev = self.sv(a).put(as_bytes(a.get("key")), as_bytes(a.get("value")), durability(a),
                             lease=int(a.get("lease", 0)))
        return {"revision": rev}

    def op_delete(self, a: Dict[str, Any]) -> Any:
        return {"revision": self.sv(a).delete(as_bytes(a.get("key")), durability(a))}

    def op_delete_range(self, a: Dict[str, Any]) -> Any:
        deleted, rev = self.sv(a).delete_range_with_revision(
            opt(a.get("start")), opt(a.get("end")), prefix=opt(a.get("prefix")),
            durability=durability(a))
        return {"deleted": deleted, "revision": rev}

    def op_range(self, a: Dict[str, Any]) -> Any:
        it = self.sv(a).range(opt(a.get("start")), opt(a.get("end")), prefix=opt(a.get("prefix")),
                              page_size=int(a.get("page_size", 0)),
                              reverse=bool(a.get("reverse")), keys_only=bool(a.get("keys_only")),
                              snapshot=as_str(a.get("snapshot")) or None,
                              revision=int(a.get("revision", 0)))
        return keys_values(list(it))

    def op_range_page(self, a: Dict[str, Any]) -> Any:
        page = self.sv(a).range_page(
            opt(a.get("start")), opt(a.get("end")), prefix=opt(a.get("prefix")),
            limit=int(a.get("limit", 0)), reverse=bool(a.get("reverse")),
            keys_only=bool(a.get("keys_only")), count_only=bool(a.get("count_only")),
            snapshot=as_str(a.get("snapshot")) or None, page_token=as_bytes(a.get("page_token")))
        return dict(keys_values(page.kvs), count=page.count, more=page.more,
                    next_page_token=page.next_page_token)

    def op_put_many(self, a: Dict[str, Any]) -> Any:
        sv, prefix, value = self.sv(a), as_str(a.get("prefix")), as_bytes(a.get("value"))
        count = int(a.get("count", 0))
        for _ in range(int(a.get("rounds", 1))):
            for first in range(0, count, 1000):
                ops = [cowkv.Put(f"{prefix}{i:06d}", value)
                       for i in range(first, min(first + 1000, count))]
                sv.txn(success=ops, durability=durability(a))
        return {}

    def op_txn(self, a: Dict[str, Any]) -> Any:
        r = self.sv(a).txn(compare=[compare(c) for c in a.get("compare", [])],
                           success=[request_op(o) for o in a.get("success", [])],
                           failure=[request_op(o) for o in a.get("failure", [])],
                           durability=durability(a))
        return {"succeeded": r.succeeded, "revision": r.revision,
                "responses": [response_op(x) for x in r.responses]}

    # Interactive transactions.

    def tx(self, a: Dict[str, Any]) -> cowkv.Transaction:
        return self.txs[as_str(a.get("tx"))]

    def op_begin(self, a: Dict[str, Any]) -> Any:
        tx = self.sv(a).begin(lease_ms=int(a.get("lease_ms", 0)))
        if a.get("as"):
            self.txs[as_str(a["as"])] = tx
        return {"read_revision": tx.read_revision, "lease_ms": tx.lease_ms}

    def op_tx_get(self, a: Dict[str, Any]) -> Any:
        tx = self.tx(a)
        return kv_result(tx.get_kv(as_bytes(a.get("key"))), tx.read_revision)

    def op_tx_range(self, a: Dict[str, Any]) -> Any:
        it = self.tx(a).range(opt(a.get("start")), opt(a.get("end")), prefix=opt(a.get("prefix")),
                              page_size=int(a.get("page_size", 0)), reverse=bool(a.get("reverse")),
                              keys_only=bool(a.get("keys_only")))
        return keys_values(list(it))

    def op_tx_put(self, a: Dict[str, Any]) -> Any:
        self.tx(a).put(as_bytes(a.get("key")), as_bytes(a.get("value")))
        return {}

    def op_tx_delete(self, a: Dict[str, Any]) -> Any:
        self.tx(a).delete(as_bytes(a.get("key")))
        return {}

    def op_tx_delete_range(self, a: Dict[str, Any]) -> Any:
        self.tx(a).delete_range(as_bytes(a.get("start")), opt(a.get("end")))
        return {}

    def op_commit(self, a: Dict[str, Any]) -> Any:
        return {"revision": self.tx(a).commit(durability(a))}

    def op_abort(self, a: Dict[str, Any]) -> Any:
        self.tx(a).abort()
        return {}

    def op_retry_txn_conflict_once(self, a: Dict[str, Any]) -> Any:
        sv, key, interfere = self.sv(a), as_bytes(a.get("key")), as_bytes(a.get("interfere"))
        attempts = 0

        def body(tx: cowkv.Transaction) -> None:
            nonlocal attempts
            attempts += 1
            n = int(tx.get(key, b"0"))
            if attempts == 1:
                sv.put(key, interfere)
            tx.put(key, str(n + 1))
        sv.run_in_transaction(body)
        return {"attempts": attempts}

    # Files.

    def fs(self, a: Dict[str, Any]) -> cowkv.Files:
        return self.sv(a).files

    def op_stat(self, a: Dict[str, Any]) -> Any:
        return stat(self.fs(a).stat(as_str(a.get("path"))))

    def op_mkdir(self, a: Dict[str, Any]) -> Any:
        return stat(self.fs(a).mkdir(as_str(a.get("path")), int(a.get("mode", 0))))

    def op_create_file(self, a: Dict[str, Any]) -> Any:
        return stat(self.fs(a).create(as_str(a.get("path")), int(a.get("mode", 0))))

    def op_write_file(self, a: Dict[str, Any]) -> Any:
        fs = self.fs(a)
        head = files_pb2.WriteRequest(subvolume=fs.subvolume, path=as_str(a.get("path")),
                                      offset=int(a.get("offset", 0)),
                                      create=bool(a.get("create")),
                                      truncate=bool(a.get("truncate")))
        resp = fs.write_stream(head, iter([as_bytes(a.get("data"))]))
        return {"bytes_written": resp.bytes_written, "size": resp.stat.size}

    def op_read_file(self, a: Dict[str, Any]) -> Any:
        data = b"".join(self.fs(a).read_stream(path=as_str(a.get("path")),
                                               offset=int(a.get("offset", 0)),
                                               length=int(a.get("length", 0))))
        return {"data": data, "size": len(data)}

    def op_readdir(self, a: Dict[str, Any]) -> Any:
        entries = self.fs(a).scandir(as_str(a.get("path")), int(a.get("page_size", 0)))
        return {"names": [e.name for e in entries]}

    def op_rename(self, a: Dict[str, Any]) -> Any:
        bits = {"noreplace": cowkv.RENAME_NOREPLACE, "exchange": cowkv.RENAME_EXCHANGE}
        flags = 0
        for f in a.get("flags", []):
            flags |= bits[f]
        self.fs(a).rename(as_str(a.get("from")), as_str(a.get("to")), flags)
        return {}

    def op_link(self, a: Dict[str, Any]) -> Any:
        return stat(self.fs(a).link(as_str(a.get("existing")), as_str(a.get("new_path"))))

    def op_symlink(self, a: Dict[str, Any]) -> Any:
        return stat(self.fs(a).symlink(as_str(a.get("target")), as_str(a.get("path"))))

    def op_readlink(self, a: Dict[str, Any]) -> Any:
        return {"target": self.fs(a).readlink(as_str(a.get("path")))}

    def op_unlink(self, a: Dict[str, Any]) -> Any:
        self.fs(a).unlink(as_str(a.get("path")))
        return {}

    def op_rmdir(self, a: Dict[str, Any]) -> Any:
        self.fs(a).rmdir(as_str(a.get("path")))
        return {}

    def op_truncate(self, a: Dict[str, Any]) -> Any:
        return stat(self.fs(a).truncate(as_str(a.get("path")), int(a.get("size", 0))))

    def op_fsync(self, a: Dict[str, Any]) -> Any:
        self.fs(a).fsync(as_str(a.get("path")), datasync=bool(a.get("datasync")),
                         offset=int(a.get("offset", 0)), length=int(a.get("length", 0)))
        return {}

    def op_set_attr(self, a: Dict[str, Any]) -> Any:
        def time_arg(k: str) -> Any:
            v = a.get(k)
            return cowkv.UTIME_NOW if v == "now" else (None if v is None else int(v))
        def opt(k: str) -> Optional[int]:
            return None if a.get(k) is None else int(a[k])
        return stat(self.fs(a).set_attr(as_str(a.get("path")), mode=opt("mode"), uid=opt("uid"),
                                        gid=opt("gid"), size=opt("size"),
                                        atime_ns=time_arg("atime_ns"),
                                        mtime_ns=time_arg("mtime_ns")))

    def op_set_xattr(self, a: Dict[str, Any]) -> Any:
        flags = {None: 0, "create": 1, "replace": 2}[a.get("flags")]
        self.fs(a).set_xattr(as_str(a.get("path")), as_str(a.get("name")),
                             as_bytes(a.get("value")), flags)
        return {}

    def op_get_xattr(self, a: Dict[str, Any]) -> Any:
        return {"value": self.fs(a).get_xattr(as_str(a.get("path")), as_str(a.get("name")))}

    def op_list_xattrs(self, a: Dict[str, Any]) -> Any:
        return {"names": self.fs(a).list_xattrs(as_str(a.get("path")))}

    def op_remove_xattr(self, a: Dict[str, Any]) -> Any:
        self.fs(a).remove_xattr(as_str(a.get("path")), as_str(a.get("name")))
        return {}

    def op_link_many(self, a: Dict[str, Any]) -> Any:
        fs, existing, prefix = self.fs(a), as_str(a.get("existing")), as_str(a.get("prefix"))
        for i in range(int(a.get("count", 0))):
            if i % LINKS_PER_DIR == 0:
                fs.mkdir(f"{prefix}{i // LINKS_PER_DIR:04d}")
            fs.link(existing, f"{prefix}{i // LINKS_PER_DIR:04d}/{i:06d}")
        return {}

    def op_clone(self, a: Dict[str, Any]) -> Any:
        self.fs(a).clone(as_str(a.get("src_path")), as_str(a.get("dst_path")),
                         int(a.get("src_offset", 0)), int(a.get("dst_offset", 0)),
                         int(a.get("length", 0)))
        return {}

    # Open handles (Files.Open, CreateTmpfile): kept by their "as" name.

    def _opened(self, a: Dict[str, Any], fs: cowkv.Files, h: cowkv.FileHandle) -> Any:
        self.handles[as_str(a.get("as"))] = (fs, h)
        return {"ino": h.ino, "lease_ms": h.lease_ms, "stat": stat(h.opened_stat)}

    def op_open_handle(self, a: Dict[str, Any]) -> Any:
        fs = self.fs(a)
        return self._opened(a, fs, fs.open_handle(as_str(a.get("path")),
                                                  lease_ms=int(a.get("lease_ms", 0))))

    def op_create_tmpfile(self, a: Dict[str, Any]) -> Any:
        fs = self.fs(a)
        return self._opened(a, fs, fs.create_tmpfile(as_str(a.get("dir")),
                                                     int(a.get("mode", 0o644))))

    def op_handle_stat(self, a: Dict[str, Any]) -> Any:
        return stat(self.handles[as_str(a.get("h"))][1].stat())

    def op_handle_read(self, a: Dict[str, Any]) -> Any:
        data = self.handles[as_str(a.get("h"))][1].read(int(a.get("offset", 0)),
                                                       int(a.get("length", 0)))
        return {"data": data, "size": len(data)}

    def op_handle_write(self, a: Dict[str, Any]) -> Any:
        n = self.handles[as_str(a.get("h"))][1].write(as_bytes(a.get("data")),
                                                     int(a.get("offset", 0)))
        return {"bytes_written": n}

    def op_handle_link(self, a: Dict[str, Any]) -> Any:
        fs, h = self.handles[as_str(a.get("h"))]
        return stat(fs.link(h, as_str(a.get("new_path"))))

    def op_close_handle(self, a: Dict[str, Any]) -> Any:
        self.handles.pop(as_str(a.get("h")))[1].close()
        return {}

    def op_fallocate(self, a: Dict[str, Any]) -> Any:
        mode = set(a.get("mode", []))
        return stat(self.fs(a).fallocate(as_str(a.get("path")), int(a.get("offset", 0)),
                                         int(a.get("length", 0)), keep_size="keep_size" in mode,
                                         punch_hole="punch_hole" in mode,
                                         zero_range="zero_range" in mode))

    def op_fiemap(self, a: Dict[str, Any]) -> Any:
        extents = self.fs(a).fiemap(as_str(a.get("path")), int(a.get("offset", 0)),
                                    int(a.get("length", 0)))
        return {"extents": [{"logical": e.logical, "physical": e.physical, "length": e.length,
                             "flags": [n for bit, n in _FLAG_NAMES if e.flags & bit]}
                            for e in extents]}

    # Admin.

    def op_sync(self, a: Dict[str, Any]) -> Any:
        return {"generation": self.cl().sync()}

    def op_check(self, a: Dict[str, Any]) -> Any:
        return {"ok": self.cl().check().ok}

    # Leases.

    def op_lease_grant(self, a: Dict[str, Any]) -> Any:
        leases = self.sv(a).leases
        ttl = int(a.get("ttl", 0))
        return {"id": leases.grant(ttl, id=int(a.get("id", 0))), "ttl": ttl}

    def op_lease_revoke(self, a: Dict[str, Any]) -> Any:
        return {"revision": self.sv(a).leases.revoke(int(a.get("id", 0)))}

    def op_lease_keep_alive_once(self, a: Dict[str, Any]) -> Any:
        return {"ttl": self.sv(a).leases.keep_alive(int(a.get("id", 0)))}

    def op_lease_time_to_live(self, a: Dict[str, Any]) -> Any:
        i = self.sv(a).leases.time_to_live(int(a.get("id", 0)), keys=bool(a.get("keys")))
        return {"id": i.id, "ttl": i.ttl, "granted_ttl": i.granted_ttl, "keys": i.keys}

    def op_lease_list(self, a: Dict[str, Any]) -> Any:
        return {"ids": self.sv(a).leases.list()}

    # Watch.

    def op_compact(self, a: Dict[str, Any]) -> Any:
        return {"compact_revision": self.sv(a).compact(int(a.get("revision", 0)))}

    def op_watch(self, a: Dict[str, Any]) -> Any:
        filters = a.get("filters", [])
        w = self.sv(a).watch(as_bytes(a.get("key")), prefix=bool(a.get("prefix")),
                             range_end=opt(a.get("end")),
                             start_revision=int(a.get("start_revision", 0)),
                             prev_kv=bool(a.get("prev_kv")), no_put="noput" in filters,
                             no_delete="nodelete" in filters)
        if a.get("as"):
            self.watches[as_str(a["as"])] = w
        else:
            w.cancel()
        return {}

    def op_file_watch(self, a: Dict[str, Any]) -> Any:
        w = self.sv(a).files.watch(as_str(a.get("prefix")),
                                   start_revision=int(a.get("start_revision", 0)))
        if a.get("as"):
            self.watches[as_str(a["as"])] = w
        else:
            w.cancel()
        return {}

    def op_watch_next(self, a: Dict[str, Any]) -> Any:
        w = self.watches[as_str(a.get("w"))]
        count = int(a.get("count", 0))
        return {"events": [watch_event(e) for e in within(10, lambda: take(w, count))]}

    def op_watch_cancel(self, a: Dict[str, Any]) -> Any:
        w = self.watches.pop(as_str(a.get("w")))
        w.cancel()
        return {"events": [watch_event(e) for e in within(10, lambda: list(w))]}

    # Runner control.

def take(w: cowkv.Watch, n: int) -> List[cowkv.WatchEvent]:
    out: List[cowkv.WatchEvent] = []
    while len(out) < n:
        out.append(next(w))  # StopIteration: the watcher ended without a reason
    return out


def within(seconds: float, fn: Callable[[], Any]) -> Any:
    """fn() on another thread; AdapterFailure if it takes longer (a watch read
    has no deadline of its own)."""
    pool = concurrent.futures.ThreadPoolExecutor(1)
    fut = pool.submit(fn)
    try:
        return fut.result(timeout=seconds)
    except concurrent.futures.TimeoutError:
        raise AdapterFailure(f"no answer within {seconds} s") from None
    except StopIteration:
        raise AdapterFailure("the watcher ended without a reason") from None
    finally:
        pool.shutdown(wait=False)  # a read still blocked ends with the watcher's cancel


def watch_event(e: Union[cowkv.WatchEvent, cowkv.FileEvent]) -> Dict[str, Any]:
    if isinstance(e, cowkv.FileEvent):
        return {"type": e.type.lower(), "path": e.path, "new_path": e.new_path,
                "revision": e.revision, "ino": e.ino, "paths_lost": e.paths_lost}
    prev = e.prev_kv
    return {"type": "put" if e.type == cowkv.EventType.PUT else "delete", "key": e.kv.key,
            "value": e.kv.value, "create_revision": e.kv.create_revision,
            "mod_revision": e.kv.mod_revision, "version": e.kv.version,
            "has_prev": prev is not None, "prev_value": prev.value if prev else b"",
            "prev_mod_revision": prev.mod_revision if prev else 0}


# link_many: names per directory. All names of one inode in one directory
# share one inode-ref item, which must fit in a node (about 440 six-digit
# names at 16 KiB nodes; one more is EMLINK).
LINKS_PER_DIR = 400


def compare(c: Dict[str, Any]) -> cowkv.Compare:
    key = as_bytes(c.get("key"))
    target = c.get("target", "value")
    ops = {"=": operator.eq, "!=": operator.ne, "<": operator.lt, ">": operator.gt}
    op = ops[c.get("op", "=")]
    if target == "exists":
        holds = bool(c.get("exists")) == (c.get("op", "=") == "=")
        return cowkv.Exists(key) if holds else cowkv.Missing(key)
    if target == "value":
        result: cowkv.Compare = op(cowkv.Value(key), as_bytes(c.get("value")))
        return result
    side = {"version": cowkv.Version, "create_revision": cowkv.CreateRevision,
            "mod_revision": cowkv.ModRevision}[target]
    result = op(side(key), int(c.get("number", 0)))
    return result


def request_op(o: Dict[str, Any]) -> cowkv.Op:
    (kind, b), = o.items()
    if kind == "put":
        return cowkv.Put(as_bytes(b.get("key")), as_bytes(b.get("value")), lease=int(b.get("lease", 0)))
    if kind == "delete":
        return cowkv.Delete(as_bytes(b.get("key")))
    if kind == "delete_range":
        return cowkv.DeleteRange(opt(b.get("start")), opt(b.get("end")))
    assert kind == "range", f"unknown txn op {kind}"
    return cowkv.Range(opt(b.get("start")), opt(b.get("end")), prefix=opt(b.get("prefix")),
                       limit=int(b.get("limit", 0)), reverse=bool(b.get("reverse")),
                       keys_only=bool(b.get("keys_only")), count_only=bool(b.get("count_only")))


def response_op(r: Any) -> Dict[str, Any]:
    if isinstance(r, cowkv.DeleteResult):
        return {"delete": {"deleted": r.deleted}}
    if isinstance(r, cowkv.RangeResult):
        return {"range": dict(keys_values(r.kvs), count=r.count, more=r.more)}
    return {"put": {}}



# --- the loop --------------------------------------------------------------


def error_answer(e: cowkv.CowkvError) -> Dict[str, Any]:
    parents = [name for cls, name in [(cowkv.FailedPrecondition, "failed_precondition"),
                                      (cowkv.ResourceExhausted, "resource_exhausted"),
                                      (cowkv.TooOld, "too_old")] if isinstance(e, cls)]
    err: Dict[str, Any] = {"class": error_class(e), "is": parents, "message": str(e)}
    if e.errno_name:
        err["errno"] = e.errno_name
    if isinstance(e, cowkv.Compacted):
        err["compact_revision"] = e.compact_revision
    return err


def wire(v: Any) -> Any:
    """json.dumps default: bytes results as base64."""
    if isinstance(v, bytes):
        return base64.b64encode(v).decode("ascii")
    raise TypeError(f"not JSON: {type(v).__name__}")


def main() -> int:
    adapter = Adapter()
    for line in sys.stdin:
        req = json.loads(line)
        answer: Dict[str, Any] = {"id": req.get("id")}
        try:
            answer["result"] = adapter.op(req["op"], req.get("args") or {})
        except cowkv.CowkvError as e:
            answer["error"] = error_answer(e)
        except Exception as e:  # an adapter bug or a protocol error: the step fails
            traceback.print_exc()
            answer["fail"] = f"{type(e).__name__}: {e}"
        sys.stdout.write(json.dumps(answer, default=wire) + "\n")
        sys.stdout.flush()
    adapter.op_reset({})
    return 0


if __name__ == "__main__":
    sys.exit(main())
