"""The cross-client conformance scenarios (clients/conformance/scenarios.json)
run through this client's public API against a live cowkvd.

The runner follows clients/conformance/README.md: one shared server for the
scenarios without a `server` field (a fresh 256 MiB device), a dedicated one
for those with it; variables and `${run}`/`${sv}`; bytes as strings,
`{"base64"}` or `{"fill", "size"}`; results turned into the canonical shapes
of the README and matched with its matchers; errors turned into the most
specific class name. `client_side` scenarios run a second time with a client
dialed to an address where nothing listens. One pytest test per scenario;
the first step whose outcome differs fails it, naming the step.
"""

from __future__ import annotations

import base64
import concurrent.futures
import json
import operator
import os
import pathlib
import re
import secrets
import signal
import socket
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, Union

import pytest

import cowkv
from cowkv.v1 import files_pb2
from conftest import REPO, Server

SCENARIOS_FILE = REPO / "clients" / "conformance" / "scenarios.json"
RUN = secrets.token_hex(4)
_VAR = re.compile(r"\$\{([A-Za-z0-9_]+)\}")


def _load() -> List[Dict[str, Any]]:
    if not SCENARIOS_FILE.exists():
        return []
    data: Dict[str, Any] = json.loads(SCENARIOS_FILE.read_text())
    assert data.get("format") == 1, "unknown scenarios.json format"
    scenarios: List[Dict[str, Any]] = data["scenarios"]
    return scenarios


SCENARIOS = _load()

# --- values ----------------------------------------------------------------


def expand(value: Any, env: Dict[str, Any]) -> Any:
    """Variables, base64 and fill specs, recursively (README "Values")."""
    if isinstance(value, str):
        whole = _VAR.fullmatch(value)
        if whole:
            return env[whole.group(1)]
        return _VAR.sub(lambda m: _text(env[m.group(1)]), value)
    if isinstance(value, list):
        return [expand(v, env) for v in value]
    if isinstance(value, dict):
        if set(value) == {"base64"}:
            return base64.b64decode(expand(value["base64"], env))
        if set(value) == {"fill", "size"}:
            fill = as_bytes(expand(value["fill"], env))
            size = int(expand(value["size"], env))
            return (fill * (size // max(len(fill), 1) + 1))[:size]
        return {k: expand(v, env) for k, v in value.items()}
    return value


def _text(v: Any) -> str:
    if isinstance(v, bytes):
        return v.decode("utf-8", "surrogateescape")
    return str(v)


def as_bytes(v: Any) -> bytes:
    if v is None:
        return b""
    return v.encode("utf-8") if isinstance(v, str) else bytes(v)


def as_str(v: Any) -> str:
    return "" if v is None else _text(v)


def opt(v: Any) -> Optional[bytes]:
    """A bytes bound: omitted or empty = None (the proto default)."""
    b = as_bytes(v)
    return b if b else None


# --- matching --------------------------------------------------------------


class Mismatch(AssertionError):
    pass


def _scalar_eq(expected: Any, actual: Any) -> bool:
    if isinstance(expected, (str, bytes)) and isinstance(actual, (str, bytes)):
        return as_bytes(expected) == as_bytes(actual)
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual) and expected == actual
    return bool(expected == actual)


def _matches(expected: Any, actual: Any) -> bool:
    try:
        match(expected, actual, "")
        return True
    except Mismatch:
        return False


_COMPARE: Dict[str, Callable[[Any, Any], bool]] = {
    "$gt": operator.gt, "$ge": operator.ge, "$lt": operator.lt, "$le": operator.le}


def _match_operator(op: str, arg: Any, actual: Any, where: str) -> None:
    ok: bool
    if op in _COMPARE:
        ok = isinstance(actual, int) and _COMPARE[op](actual, arg)
    elif op == "$ne":
        ok = not _scalar_eq(arg, actual)
    elif op == "$len":
        ok = isinstance(actual, list) and len(actual) == arg
    elif op == "$min_len":
        ok = isinstance(actual, list) and len(actual) >= arg
    elif op == "$contains":
        ok = isinstance(actual, list) and any(_matches(arg, a) for a in actual)
    elif op == "$not_contains":
        ok = isinstance(actual, list) and not any(_matches(arg, a) for a in actual)
    elif op == "$all":
        ok = isinstance(actual, list) and all(_matches(arg, a) for a in actual)
    else:
        raise Mismatch(f"{where}: unknown matcher {op}")
    if not ok:
        raise Mismatch(f"{where}: {op} {arg!r} does not hold for {actual!r}")


def match(expected: Any, actual: Any, where: str = "result") -> None:
    """README "Matching"; raises Mismatch naming the first difference."""
    if isinstance(expected, dict) and expected and all(k.startswith("$") for k in expected):
        for op, arg in expected.items():
            _match_operator(op, arg, actual, where)
    elif isinstance(expected, dict):
        if not isinstance(actual, dict):
            raise Mismatch(f"{where}: want an object, got {actual!r}")
        for k, v in expected.items():
            if k not in actual:
                raise Mismatch(f"{where}.{k}: missing from {actual!r}")
            match(v, actual[k], f"{where}.{k}")
    elif isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            raise Mismatch(f"{where}: want {expected!r}, got {actual!r}")
        for i, (e, a) in enumerate(zip(expected, actual)):
            match(e, a, f"{where}.{i}")
    elif not _scalar_eq(expected, actual):
        raise Mismatch(f"{where}: want {expected!r}, got {actual!r}")


def lookup(result: Any, path: str) -> Any:
    for part in path.split("."):
        result = result[int(part)] if isinstance(result, list) else result[part]
    return result


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


# --- the runner ------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Runner:
    """Runs one scenario's steps with one client and its variables."""

    def __init__(self, name: str, server: Server, dedicated: bool, dead: bool) -> None:
        self.server = server
        self.dedicated = dedicated
        self.dead = dead  # dial a port where nothing listens (client_side)
        self.env: Dict[str, Any] = {"run": RUN, "sv": f"c-{RUN}-{name}"}
        self.txs: Dict[str, cowkv.Transaction] = {}
        self.handles: Dict[str, Tuple[cowkv.Files, cowkv.FileHandle]] = {}
        self.watches: Dict[str, cowkv.Watch] = {}
        self.token: Optional[str] = None
        self.deadline_ms = 0
        self.paused = False
        self.dead_addr = f"127.0.0.1:{free_port()}"
        self.client = self._connect()

    def _connect(self) -> cowkv.Client:
        timeout = self.deadline_ms / 1000 if self.deadline_ms else cowkv.DEFAULT_TIMEOUT
        addr = self.dead_addr if self.dead else self.server.address
        # A channel of its own (grpc-python shares connections between
        # channels with equal options, even after close), so that `connect`
        # really is a new gRPC peer.
        return cowkv.connect(addr, token=self.token, timeout=timeout,
                             options=[("grpc.use_local_subchannel_pool", 1)])

    def close(self) -> None:
        self.resume()
        for w in self.watches.values():
            w.cancel()
        self.client.close()

    def resume(self) -> None:
        """SIGCONT to a server left stopped by pause_server (a step failed before
        resume_server), so that it can be stopped."""
        if self.paused and self.server.proc is not None and self.server.proc.poll() is None:
            self.server.proc.send_signal(signal.SIGCONT)
        self.paused = False

    def sv(self, a: Dict[str, Any]) -> cowkv.Subvolume:
        return self.client.subvolume(as_str(a.get("sv")))

    # Steps.

    def run_step(self, index: int, step: Dict[str, Any]) -> None:
        where = f"step {index} ({step['op']})"
        args = expand(step.get("args", {}), self.env)
        expect = step.get("expect")
        try:
            result = self.op(step["op"], args)
        except cowkv.CowkvError as e:
            self._check_error(where, expect, e)
            return
        if expect is not None and "error" in expect:
            raise Mismatch(f"{where}: want error {expect['error']}, got result {result!r}")
        if expect is not None and "result" in expect:
            match(expand(expect["result"], self.env), result, f"{where}: result")
        for var, path in step.get("save", {}).items():
            self.env[var] = lookup(result, path)

    def _check_error(self, where: str, expect: Optional[Dict[str, Any]],
                     e: cowkv.CowkvError) -> None:
        got = error_class(e)
        if expect is None or "error" not in expect:
            raise Mismatch(f"{where}: want success, got {got}: {e}")
        if got != expect["error"]:
            raise Mismatch(f"{where}: want {expect['error']}, got {got}: {e}")
        parent = {"read_only": cowkv.FailedPrecondition, "no_space": cowkv.ResourceExhausted,
                  "compacted": cowkv.TooOld}
        if got in parent and not isinstance(e, parent[got]):
            raise Mismatch(f"{where}: {got} is not a {parent[got].__name__}")
        if "errno" in expect and e.errno_name != expect["errno"]:
            raise Mismatch(f"{where}: want errno {expect['errno']}, got {e.errno_name}: {e}")
        if "compact_revision" in expect:
            assert isinstance(e, cowkv.Compacted)
            match(expand(expect["compact_revision"], self.env), e.compact_revision,
                  f"{where}: compact_revision")

    def op(self, name: str, a: Dict[str, Any]) -> Any:
        fn = getattr(self, "op_" + name, None)
        if fn is None:
            raise Mismatch(f"unknown op {name}")
        return fn(a)

    # Subvolumes.

    def op_create_subvolume(self, a: Dict[str, Any]) -> Any:
        return info(self.client.create_subvolume(as_str(a.get("name"))))

    def op_show_subvolume(self, a: Dict[str, Any]) -> Any:
        return info(self.client.show_subvolume(as_str(a.get("name"))))

    def op_list_subvolumes(self, a: Dict[str, Any]) -> Any:
        infos = self.client.list_subvolumes(read_only=bool(a.get("read_only")),
                                            snapshots_only=bool(a.get("snapshots_only")),
                                            sort=[str(k) for k in a.get("sort", [])])
        return {"names": [s.name for s in infos]}

    def op_sync_subvolumes(self, a: Dict[str, Any]) -> Any:
        return {"synced": self.client.sync_subvolumes([int(i) for i in a.get("ids", [])])}

    def op_snapshot(self, a: Dict[str, Any]) -> Any:
        return info(self.client.snapshot(as_str(a.get("source")), as_str(a.get("name")),
                                         read_only=bool(a.get("read_only", False))))

    def op_rename_subvolume(self, a: Dict[str, Any]) -> Any:
        self.client.rename_subvolume(as_str(a.get("name")), as_str(a.get("new_name")))
        return {}

    def op_delete_subvolume(self, a: Dict[str, Any]) -> Any:
        self.client.delete_subvolume(as_str(a.get("name")))
        return {}

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
        return {"generation": self.client.sync()}

    def op_check(self, a: Dict[str, Any]) -> Any:
        return {"ok": self.client.check().ok}

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

    def op_connect(self, a: Dict[str, Any]) -> Any:
        self.client.close()
        self.token = as_str(a.get("token")) or None
        self.deadline_ms = int(a.get("deadline_ms", 0))
        self.client = self._connect()
        return {}

    def op_stop_server(self, a: Dict[str, Any]) -> Any:
        assert self.dedicated, "stop_server needs a dedicated server"
        assert self.server.stop() == 0, "".join(self.server.log)
        return {}

    def op_restart_server(self, a: Dict[str, Any]) -> Any:
        assert self.dedicated, "restart_server needs a dedicated server"
        self.client.close()
        assert self.server.stop() == 0, "".join(self.server.log)
        length = int(a.get("corrupt_length", 0))
        if length > 0:
            with open(self.server.device, "r+b") as f:
                f.seek(int(a.get("corrupt_offset", 0)))
                data = f.read(length)
                f.seek(int(a.get("corrupt_offset", 0)))
                f.write(bytes(b ^ 0xFF for b in data))
        self.server.start()
        self.client = self._connect()
        return {}

    def op_pause_server(self, a: Dict[str, Any]) -> Any:
        assert self.dedicated, "pause_server needs a dedicated server"
        assert self.server.proc is not None
        self.paused = True
        self.server.proc.send_signal(signal.SIGSTOP)
        wait_stopped(self.server.proc.pid)
        return {}

    def op_resume_server(self, a: Dict[str, Any]) -> Any:
        assert self.dedicated, "resume_server needs a dedicated server"
        assert self.server.proc is not None
        self.server.proc.send_signal(signal.SIGCONT)
        self.paused = False
        return {}

    def op_sleep(self, a: Dict[str, Any]) -> Any:
        time.sleep(int(a.get("ms", 0)) / 1000)
        return {}

    def op_repeat(self, a: Dict[str, Any]) -> Any:
        for i in range(int(a.get("times", 0))):
            self.run_step(i, a["step"])
        return {}


def take(w: cowkv.Watch, n: int) -> List[cowkv.WatchEvent]:
    out: List[cowkv.WatchEvent] = []
    while len(out) < n:
        out.append(next(w))  # StopIteration: the watcher ended without a reason
    return out


def within(seconds: float, fn: Callable[[], Any]) -> Any:
    """fn() on another thread; Mismatch if it takes longer (a watch read
    has no deadline of its own)."""
    pool = concurrent.futures.ThreadPoolExecutor(1)
    fut = pool.submit(fn)
    try:
        return fut.result(timeout=seconds)
    except concurrent.futures.TimeoutError:
        raise Mismatch(f"no answer within {seconds} s") from None
    except StopIteration:
        raise Mismatch("the watcher ended without a reason") from None
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


def wait_stopped(pid: int, timeout: float = 10.0) -> None:
    """Until every thread of `pid` is stopped (state T in /proc): SIGSTOP is
    asynchronous, and a thread still running could answer the next call."""
    end = time.monotonic() + timeout
    while True:
        states = []
        for task in pathlib.Path(f"/proc/{pid}/task").iterdir():
            try:
                states.append(task.joinpath("stat").read_text().rsplit(")", 1)[1].split()[0])
            except (OSError, IndexError):
                pass  # a thread that just ended
        if states and all(st in ("T", "t") for st in states):
            return
        assert time.monotonic() < end, f"cowkvd {pid} not stopped after {timeout} s: {states}"
        time.sleep(0.005)


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


# --- servers and the tests -------------------------------------------------


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = Server(tmp_path_factory.mktemp("conformance") / "shared.img",
                 create_size="256M").start()
    yield srv
    assert srv.stop() == 0, "".join(srv.log)


def dedicated_server(spec: Dict[str, Any], name: str, tmp: pathlib.Path) -> Server:
    env = {"run": RUN, "sv": f"c-{RUN}-{name}"}
    extra: List[str] = []
    if "auth_token" in spec:
        token_file = tmp / "token"
        token_file.write_text(as_str(expand(spec["auth_token"], env)))
        extra = ["--auth-token-file", str(token_file)]
    return Server(tmp / f"{name}.img", *extra,
                  create_size=spec.get("create_size", "32M")).start()


def run_scenario(s: Dict[str, Any], server: Server, dedicated: bool, dead: bool) -> None:
    runner = Runner(s["name"], server, dedicated, dead)
    try:
        for i, step in enumerate(s["steps"]):
            runner.run_step(i, step)
    finally:
        runner.close()


@pytest.mark.skipif(not SCENARIOS, reason=f"{SCENARIOS_FILE} is absent")
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s["name"] for s in SCENARIOS])
def test_scenario(scenario: Dict[str, Any], shared_server: Server,
                  tmp_path: pathlib.Path) -> None:
    started = time.monotonic()
    passes = [False, True] if scenario.get("client_side") else [False]
    for dead in passes:
        if "server" in scenario:
            server = dedicated_server(scenario["server"], scenario["name"], tmp_path)
            try:
                run_scenario(scenario, server, True, dead)
            finally:
                if server.proc is not None and server.proc.poll() is None:
                    assert server.stop() == 0, "".join(server.log)
        else:
            run_scenario(scenario, shared_server, False, dead)
    if os.environ.get("COWKV_CONFORMANCE_TIMES"):
        print(f"{scenario['name']}: {time.monotonic() - started:.1f} s")


def test_every_op_of_the_readme_is_implemented() -> None:
    readme = (REPO / "clients" / "conformance" / "README.md")
    if not readme.exists():
        pytest.skip("no conformance README")
    documented = set(re.findall(r"^\| `([a-z_]+)` \|", readme.read_text(), re.M))
    ops = {n for n in documented if n not in {
        # classes and durability names in the README's tables, not ops
        "invalid_argument", "not_found", "already_exists", "failed_precondition", "read_only",
        "conflict", "too_old", "resource_exhausted", "no_space", "data_loss", "unavailable",
        "unauthenticated", "deadline_exceeded", "compacted", "future_revision", "subvolume_deleted", "slow_reader", "name", "server", "client_side", "steps", "op", "args", "expect",
        "save", "note"}}
    missing = sorted(n for n in ops if not hasattr(Runner, "op_" + n))
    assert not missing, f"ops in the README without a runner: {missing}"
