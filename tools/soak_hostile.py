#!/usr/bin/env python3
"""Hostile-client soak of cowkvd: does one well-behaved client keep being
served, and do the server's memory and threads stay bounded, while other
clients misbehave?

It starts its own cowkvd (on a temporary device file, with a small
--max-inflight-bytes) and, for --seconds, runs at once:

  (a) begin flood: --txn-conns connections opening interactive
      transactions (KV.Begin, 10-minute leases) past the per-client limit
      and never closing them; they come from other loopback addresses
      (127.0.0.2, ...) than the good client, since the limit is per client
      address;
  (b) unread streams: --unread-conns connections that each start
      --unread-per-conn Files.Read of a large file and KV.Range over a
      large key space (3 MiB pages) and never read a byte of the answers
      (a raw HTTP/2 socket with a 4 KiB receive buffer that is never read);
      each is closed and replaced after --unread-lifetime seconds;
  (c) large KV.Txn requests of --txn-range-ops Range ops over the key
      space, some past the Txn response budget (RESOURCE_EXHAUSTED), from
      --txn-range-clients threads;
  (d) parallel Gets of multi-MiB values from --get-clients threads;
  (e) one well-behaved client that every --good-interval seconds does a
      Put, a Get and a Begin/TxnPut/Commit, recording latency and errors.

(a) and (b) speak HTTP/2 on raw sockets, so that they can choose their
source address and truly never read; (c), (d) and (e) use the cowkv client
package (grpcio) of clients/python. The hostile load runs in child
processes, so that it does not hold the GIL the good client needs.

Every second it samples the server's VmRSS and Threads (/proc/PID/status)
and Admin.Stats' server_inflight_bytes, server_open_handles and admission
counters. At the end it checks:

  - the good client had no failure and its p99 latency is under --good-p99;
  - peak RSS <= --max-rss, peak threads <= --max-threads + --thread-margin;
  - the hostile load really ran (Begins were refused past the limit, some
    client held exactly --max-txns-per-client at once and none more, by the
    server's own high-water mark; the unread streams and the big calls
    reached the server);
  - after the hostile clients are gone and --grace seconds: RSS <=
    --settle-rss, no interactive transaction left open, the server healthy
    (grpc.health SERVING, a good round trip, Admin.Check ok) and it stops
    cleanly on SIGTERM (exit 0).

It prints one line, "soak: PASS seconds=.. good_ops=.. good_p99_ms=..
peak_rss_mb=.. peak_threads=.." or "soak: FAIL <reasons> | <figures>", and
exits 0 on PASS, 1 on FAIL, 2 when it could not set up. Past --abort-rss it
stops the hostile load at once (FAIL) to protect the machine.

Run it with the Python client's venv (bash clients/python/venv.sh builds
it). clients/python/tests/test_soak.py runs a 15-second sample in the
default pytest run. The manual 10-minute run, from the repository root:

    bazel build //server:cowkvd && bash clients/python/venv.sh
    clients/python/.venv/bin/python tools/soak_hostile.py \\
        --cowkvd bazel-bin/server/cowkvd --seconds 600 -v --samples /tmp/soak.csv
"""

from __future__ import annotations

import argparse
import csv
import math
import multiprocessing
import os
import pathlib
import queue
import random
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import grpc

import cowkv
from cowkv.v1 import files_pb2, kv_pb2

REPO = pathlib.Path(__file__).resolve().parents[1]
MiB = 1 << 20
GiB = 1 << 30
KEY_PREFIX = b"ks/"
KEY_END = b"ks0"  # just past every key of the key space
BIG_FILE = "/soak-big.bin"
_PORTS = re.compile(r"\(port (\d+)\), metrics on \S+ \(port (\d+)\)")

Counts = Dict[str, int]  # outcome ("OK", "RESOURCE_EXHAUSTED", ...) -> calls


def parse_size(text: str) -> int:
    m = re.fullmatch(r"(\d+)([KMGT]?)i?B?", text.strip(), re.I)
    if m is None:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 256M, 2G)")
    return int(m.group(1)) << (10 * " KMGT".index(m.group(2).upper() or " "))


def _bump(counts: Counts, key: str, n: int = 1) -> None:
    counts[key] = counts.get(key, 0) + n


def _code(e: BaseException) -> str:
    code = getattr(e, "code", None)
    if callable(code):  # a grpc.RpcError
        code = code()
    name = getattr(code, "name", None)
    return str(name) if name else type(e).__name__


# Raw HTTP/2: a gRPC client that never reads.

_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_DATA, _HEADERS, _SETTINGS = 0x0, 0x1, 0x4
_END_STREAM, _END_HEADERS, _ACK = 0x1, 0x4, 0x1


def _frame(ftype: int, flags: int, stream: int, payload: bytes) -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", stream) + payload


def _hpack_int(value: int, prefix_bits: int, first: int) -> bytes:
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first | value])
    out = bytearray([first | limit])
    value -= limit
    while value >= 128:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _hpack_literal(name: bytes, value: bytes) -> bytes:
    """Literal header field without indexing, new name, no Huffman (RFC 7541 6.2.2)."""
    return (b"\x00" + _hpack_int(len(name), 7, 0) + name + _hpack_int(len(value), 7, 0) + value)


class RawGrpc:
    """One HTTP/2 connection that sends gRPC requests and never reads the
    answers: a 4 KiB receive buffer that nobody empties, and no
    WINDOW_UPDATE, so the server can send at most one 64 KiB window.
    `source` is the local address to connect from (any of 127.0.0.0/8)."""

    def __init__(self, port: int, source: str, timeout: float = 10.0) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            self.sock.bind((source, 0))
            self.sock.settimeout(timeout)
            self.sock.connect(("127.0.0.1", port))
            self.authority = f"127.0.0.1:{port}".encode()
            self.next_stream = 1
            # SETTINGS: ENABLE_PUSH 0, INITIAL_WINDOW_SIZE 65535 (the default).
            self.sock.sendall(_PREFACE + _frame(_SETTINGS, 0, 0, struct.pack(">HIHI", 2, 0, 4, 65535)))
            self._await_server_settings()
            self.sock.sendall(_frame(_SETTINGS, _ACK, 0, b""))  # from here on: never read
        except BaseException:
            self.sock.close()
            raise

    def _await_server_settings(self) -> None:
        buf = b""
        while True:
            while len(buf) < 9:
                buf += self._recv()
            length, ftype, flags = int.from_bytes(buf[:3], "big"), buf[3], buf[4]
            while len(buf) < 9 + length:
                buf += self._recv()
            buf = buf[9 + length:]
            if ftype == _SETTINGS and not flags & _ACK:
                return

    def _recv(self) -> bytes:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection during the preface")
        return chunk

    def call(self, method: str, request: Any) -> None:
        """Starts a call (`method`: "/cowkv.v1.KV/Range") without a deadline."""
        stream = self.next_stream
        self.next_stream += 2
        body = request.SerializeToString()
        headers = b"".join(_hpack_literal(k, v) for k, v in [
            (b":method", b"POST"), (b":scheme", b"http"), (b":path", method.encode()),
            (b":authority", self.authority), (b"content-type", b"application/grpc"),
            (b"te", b"trailers")])
        self.sock.sendall(_frame(_HEADERS, _END_HEADERS, stream, headers) +
                          _frame(_DATA, _END_STREAM, stream,
                                 b"\x00" + struct.pack(">I", len(body)) + body))

    def alive(self) -> bool:
        """Still ESTABLISHED (the server did not close it)?"""
        try:
            info = self.sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)
        except OSError:
            return False
        return info[0] == 1  # TCP_ESTABLISHED

    def close(self) -> None:
        self.sock.close()


# The hostile load: each function runs in its own child process.

class HostileConfig:
    """What the hostile children need (picklable)."""

    def __init__(self, args: argparse.Namespace, port: int) -> None:
        self.port = port
        self.address = f"127.0.0.1:{port}"
        self.txn_conns: int = args.txn_conns
        self.txn_per_conn: int = args.txn_per_conn
        self.txn_sources: int = args.txn_sources
        self.unread_conns: int = args.unread_conns
        self.unread_per_conn: int = args.unread_per_conn
        self.unread_lifetime: float = args.unread_lifetime
        self.unread_kinds: List[str] = args.unread_kinds.split(",")
        self.txn_range_clients: int = args.txn_range_clients
        self.txn_range_ops: int = args.txn_range_ops
        self.get_clients: int = args.get_clients
        self.keys: int = args.keys
        self.value_bytes: int = args.value_bytes
        self.big_values: int = args.big_values
        self.file_bytes: int = args.file_mib * MiB


def _key(i: int) -> bytes:
    return KEY_PREFIX + b"%08d" % i


def _unread_source(i: int) -> str:
    return f"127.0.1.{1 + i % 250}"


def hostile_begins(cfg: HostileConfig, stop: Any, out: Any) -> None:
    """(a) Connections from 127.0.0.2.. that Begin and never finish, past the
    per-client limit, topping up every 5 s; reconnects what the server closed."""
    counts: Counts = {}
    conns: List[Optional[RawGrpc]] = [None] * cfg.txn_conns
    begin = kv_pb2.BeginRequest(lease_ms=600_000)

    def source(i: int) -> str:
        return f"127.0.0.{2 + i % cfg.txn_sources}"

    try:
        while not stop.is_set():
            for i in range(cfg.txn_conns):
                c = conns[i]
                try:
                    if c is None or not c.alive():
                        if c is not None:
                            c.close()
                            _bump(counts, "reconnects")
                        c = conns[i] = RawGrpc(cfg.port, source(i))
                        for _ in range(cfg.txn_per_conn):
                            c.call("/cowkv.v1.KV/Begin", begin)
                        _bump(counts, "begins sent", cfg.txn_per_conn)
                    else:
                        c.call("/cowkv.v1.KV/Begin", begin)  # one more, past the limit
                        _bump(counts, "begins sent")
                except OSError as e:
                    _bump(counts, f"socket error {type(e).__name__}")
                    if c is not None:
                        c.close()
                    conns[i] = None
            stop.wait(5.0)
    finally:
        for c in conns:
            if c is not None:
                c.close()
        out.put(("begin flood", counts))


def hostile_unread(cfg: HostileConfig, stop: Any, out: Any) -> None:
    """(b) Connections whose Files.Read and KV.Range answers are never read.
    Each is replaced by a fresh one after --unread-lifetime seconds
    (staggered), since the server may drop a connection whose window stays
    shut (gRPC sets TCP_USER_TIMEOUT, 20 s): a connection that sits dead on
    the server's side, which a client that never reads cannot tell, would
    stop loading it."""
    counts: Counts = {}
    conns: List[Tuple[float, RawGrpc]] = []  # (replace at, connection)
    rng = random.Random(2)
    serial = 0

    def open_one(replace_at: float) -> None:
        nonlocal serial
        c = RawGrpc(cfg.port, _unread_source(serial))
        serial += 1
        for j in range(cfg.unread_per_conn):
            kind = cfg.unread_kinds[(serial + j) % len(cfg.unread_kinds)]
            if kind == "read":
                off = rng.randrange(0, max(1, cfg.file_bytes - 8 * MiB)) & ~0xFFFF
                c.call("/cowkv.v1.Files/Read", files_pb2.ReadRequest(path=BIG_FILE, offset=off))
            elif kind == "range":
                start = _key(rng.randrange(cfg.keys))
                c.call("/cowkv.v1.KV/Range", kv_pb2.RangeRequest(start=start, end=KEY_END))
            elif kind == "get":
                key = b"big/%d" % rng.randrange(cfg.big_values)
                c.call("/cowkv.v1.KV/Get", kv_pb2.GetRequest(key=key))
            else:
                raise ValueError(f"unknown --unread-kinds entry {kind!r}")
            _bump(counts, f"{kind} started")
        conns.append((replace_at, c))

    try:
        t0 = time.monotonic()
        for i in range(cfg.unread_conns):
            if stop.is_set():
                break
            try:
                open_one(t0 + cfg.unread_lifetime * (i + 1) / cfg.unread_conns)
            except OSError as e:
                _bump(counts, f"socket error {type(e).__name__}")
        while not stop.wait(0.2):
            now = time.monotonic()
            for item in [x for x in conns if x[0] <= now]:
                conns.remove(item)
                item[1].close()
                _bump(counts, "replaced")
            try:
                while len(conns) < cfg.unread_conns and not stop.is_set():
                    open_one(now + cfg.unread_lifetime)
            except OSError as e:
                _bump(counts, f"socket error {type(e).__name__}")
    finally:
        for _, c in conns:
            c.close()
        out.put(("unread streams", counts))


def _client_threads(n: int, cfg: HostileConfig, stop: Any,
                    body: Callable[[cowkv.Client, random.Random], Tuple[str, Callable[[], object]]]
                    ) -> Counts:
    """Makes and runs calls in a loop in n threads, each with its own
    channel, until `stop`; closing the channels then cancels what is still
    in flight. `body` returns (label, call); counts "<label> <outcome>"."""
    counts: Counts = {}
    lock = threading.Lock()
    clients = [cowkv.connect(cfg.address, timeout=30.0) for _ in range(n)]
    first_error: Dict[str, str] = {}  # outcome -> its first message

    def run(i: int) -> None:
        mine: Counts = {}
        rng = random.Random(i)
        while not stop.is_set():
            label, call = body(clients[i], rng)
            try:
                call()
                _bump(mine, f"{label} OK")
            except Exception as e:  # noqa: BLE001 - a hostile thread must not die
                outcome = f"{label} {_code(e)}"
                _bump(mine, outcome)
                first_error.setdefault(outcome, str(e)[:200])
                if not isinstance(e, cowkv.CowkvError):
                    time.sleep(0.1)
        with lock:
            for k, v in mine.items():
                _bump(counts, k, v)

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    stop.wait()
    for c in clients:
        c.close()
    for t in threads:
        t.join(60)
    for outcome, message in sorted(first_error.items()):
        counts[f"{outcome} (first: {message})"] = 0
    return counts


def hostile_txn_ranges(cfg: HostileConfig, stop: Any, out: Any) -> None:
    """(c) Txns of many Range ops over the key space: half ask for more than
    the Txn response budget (refused: RESOURCE_EXHAUSTED), half ~10 MiB."""
    per_op_fit = max(1, (10 * MiB) // (cfg.txn_range_ops * (cfg.value_bytes + 100)))

    def body(c: cowkv.Client, rng: random.Random) -> Tuple[str, Callable[[], object]]:
        huge = rng.random() < 0.5
        ops = [cowkv.Range(_key(rng.randrange(cfg.keys)), KEY_END, limit=0 if huge else per_op_fit)
               for _ in range(cfg.txn_range_ops)]
        return ("huge" if huge else "fitting"), lambda: c.subvolume().txn(success=ops)

    out.put(("txn ranges", _client_threads(cfg.txn_range_clients, cfg, stop, body)))


def hostile_big_gets(cfg: HostileConfig, stop: Any, out: Any) -> None:
    """(d) Parallel Gets of the multi-MiB values."""
    def body(c: cowkv.Client, rng: random.Random) -> Tuple[str, Callable[[], object]]:
        key = b"big/%d" % rng.randrange(cfg.big_values)
        return "get", lambda: c.subvolume().get(key)

    out.put(("big gets", _client_threads(cfg.get_clients, cfg, stop, body)))


# The server under test.

class Server:
    def __init__(self, binary: str, workdir: pathlib.Path, args: argparse.Namespace) -> None:
        self.log: List[str] = []
        cmd = [binary, "--device", str(workdir / "soak.img"), "--create-size", args.device_size,
               "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
               "--max-inflight-bytes", str(args.max_inflight_bytes),
               "--max-threads", str(args.max_threads),
               "--max-txns-per-client", str(args.max_txns_per_client), *args.server_arg]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True)
        self.port = self.metrics_port = 0
        ready = threading.Event()
        threading.Thread(target=self._drain, args=(ready,), daemon=True).start()
        if not ready.wait(120) or not self.port:
            self.proc.kill()
            raise RuntimeError("cowkvd did not start:\n" + "".join(self.log))

    def _drain(self, ready: threading.Event) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.log.append(line)
            del self.log[:-200]
            m = _PORTS.search(line)
            if m and not ready.is_set():
                self.port, self.metrics_port = int(m.group(1)), int(m.group(2))
                ready.set()
        ready.set()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def status(self) -> Tuple[int, int]:
        """(VmRSS bytes, threads) from /proc."""
        rss = threads = 0
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1]) * 1024
                elif line.startswith("Threads:"):
                    threads = int(line.split()[1])
        return rss, threads

    def metrics(self) -> str:
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=30) as r:
            text: str = r.read().decode()
        return text

    def stop(self, timeout: float = 60.0) -> Optional[int]:
        if self.proc.poll() is not None:
            return self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None


def handled(metrics: str, method: str) -> Counts:
    """grpc_server_handled_total of one method ("KV/Begin"), by code."""
    service, name = method.split("/")
    out: Counts = {}
    pat = re.compile(r'^grpc_server_handled_total\{[^}]*grpc_service="cowkv\.v1\.' + service +
                     r'",grpc_method="' + name + r'",grpc_code="(\w+)"\} (\d+)$', re.M)
    for code, n in pat.findall(metrics):
        out[code] = int(n)
    return out


def started(metrics: str, method: str) -> int:
    service, name = method.split("/")
    m = re.search(r'^grpc_server_started_total\{[^}]*grpc_service="cowkv\.v1\.' + service +
                  r'",grpc_method="' + name + r'"\} (\d+)$', metrics, re.M)
    return int(m.group(1)) if m else 0


def health_serving(address: str) -> bool:
    """grpc.health.v1.Health/Check of the whole server: SERVING?"""
    with grpc.insecure_channel(address) as ch:
        call = ch.unary_unary("/grpc.health.v1.Health/Check")
        resp: bytes = call(b"", timeout=10)  # an empty HealthCheckRequest
    return resp == b"\x08\x01"  # status: SERVING (1)


def fill(client: cowkv.Client, args: argparse.Namespace) -> None:
    """The key space, the big values and the big file the hostile load reads."""
    sv = client.subvolume()
    value = os.urandom(args.value_bytes)
    batch = max(1, min(1000, (4 * MiB) // (args.value_bytes + 64)))
    for i in range(0, args.keys, batch):
        ops = [cowkv.Put(_key(j), value) for j in range(i, min(args.keys, i + batch))]
        sv.txn(success=ops, durability=cowkv.Durability.ASYNC)
    big = os.urandom(args.big_value_mib * MiB)
    for i in range(args.big_values):
        sv.put(b"big/%d" % i, big, durability=cowkv.Durability.ASYNC)
    chunk = os.urandom(MiB)
    sv.files.upload(BIG_FILE, iter([chunk] * args.file_mib))
    client.sync()


class Good:
    """(e) The well-behaved client: its own channel from 127.0.0.1."""

    def __init__(self, address: str, interval: float, deadline: float) -> None:
        self.client = cowkv.connect(address, timeout=deadline)
        self.interval = interval
        self.latencies: List[float] = []
        self.failures: List[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        sv = self.client.subvolume()
        n = 0
        next_at = time.monotonic()
        while not self.stop.is_set():
            n += 1
            payload = b"good-%d" % n
            op = "put"
            t0 = time.monotonic()
            try:
                sv.put(b"good/%d" % (n % 1000), payload)
                op = "get"
                got = sv.get(b"good/%d" % (n % 1000))
                if got != payload:
                    raise AssertionError(f"get returned {got[:40]!r}, not {payload!r}")
                op = "begin/commit"
                with sv.transaction() as tx:
                    tx.put(b"good/tx", payload)
                self.latencies.append(time.monotonic() - t0)
            except (cowkv.CowkvError, AssertionError) as e:
                self.failures.append(f"t={time.monotonic() - t0:.1f}s {op}: {_code(e)} {e}"[:300])
            next_at = max(next_at + self.interval, time.monotonic())
            self.stop.wait(max(0.0, next_at - time.monotonic()))

    def quantile(self, q: float) -> float:
        if not self.latencies:
            return math.inf
        s = sorted(self.latencies)
        return s[max(0, math.ceil(q * len(s)) - 1)]


class Sampler:
    """Samples the server every second; stops the hostile load past abort_rss."""

    def __init__(self, server: Server, good: Good, abort_rss: int, on_abort: Callable[[str], None],
                 csv_path: Optional[str], verbose: bool) -> None:
        self.server = server
        self.good = good
        self.abort_rss = abort_rss
        self.on_abort = on_abort
        self.verbose = verbose
        self.stats_client = cowkv.connect(server.address, timeout=5.0)
        self.peak: Dict[str, int] = {"rss": 0, "threads": 0, "inflight": 0, "open_handles": 0}
        self.last: Dict[str, int] = {}
        self.stats_failures = 0
        self.rows: List[Dict[str, Any]] = []
        self.csv_path = csv_path
        self.t0 = time.monotonic()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def sample(self) -> Dict[str, Any]:
        row: Dict[str, Any] = {"t": round(time.monotonic() - self.t0, 1)}
        try:
            row["rss"], row["threads"] = self.server.status()
        except OSError:
            row["rss"] = row["threads"] = 0
        try:
            st = self.stats_client.stats()
            row["inflight"] = st.get("server_inflight_bytes", 0)
            row["inflight_peak"] = st.get("server_inflight_peak_bytes", 0)
            row["admission_waits"] = st.get("server_admission_waits", 0)
            row["admission_refusals"] = st.get("server_admission_refusals", 0)
            row["open_handles"] = st.get("server_open_handles", 0)
            # High-water marks kept by the server: a 1 Hz sample of
            # open_handles misses a limit that is held only briefly.
            row["open_handles_peak"] = st.get("server_open_handles_peak", 0)
            row["open_handles_peak_per_client"] = st.get("server_open_handles_peak_per_client", 0)
            row["node_cache"] = st.get("cache_bytes", 0)
        except cowkv.CowkvError:
            self.stats_failures += 1
        row["good_ops"] = len(self.good.latencies)
        row["good_failures"] = len(self.good.failures)
        for k in self.peak:
            self.peak[k] = max(self.peak[k], int(row.get(k, 0)))
        self.last = {k: int(v) for k, v in row.items() if k != "t"}
        self.rows.append(row)
        return row

    def _run(self) -> None:
        while not self.stop.wait(1.0):
            row = self.sample()
            if row["rss"] > self.abort_rss:
                self.on_abort(f"RSS {row['rss'] // MiB} MiB passed --abort-rss "
                              f"{self.abort_rss // MiB} MiB at t={row['t']}s")
            if self.server.proc.poll() is not None:
                self.on_abort(f"cowkvd exited ({self.server.proc.returncode}) at t={row['t']}s")
            if self.verbose and len(self.rows) % 10 == 0:
                print(f"soak: t={row['t']:.0f}s rss={row['rss'] // MiB}MiB threads={row['threads']} "
                      f"inflight={row.get('inflight', 0) // MiB}MiB "
                      f"node_cache={row.get('node_cache', 0) // MiB}MiB "
                      f"open_txns={row.get('open_handles', '?')} good_ops={row['good_ops']} "
                      f"good_failures={row['good_failures']}", file=sys.stderr, flush=True)

    def write_csv(self) -> None:
        if not self.csv_path or not self.rows:
            return
        keys = sorted({k for r in self.rows for k in r}, key=lambda k: (k != "t", k))
        with open(self.csv_path, "w", newline="") as f:
            w = csv.DictWriter(f, keys)
            w.writeheader()
            w.writerows(self.rows)


def run(args: argparse.Namespace) -> Tuple[bool, str, str]:
    """Returns (passed, reasons, figures)."""
    binary = args.cowkvd or os.environ.get("COWKVD") or str(REPO / "bazel-bin/server/cowkvd")
    if not os.access(binary, os.X_OK):
        raise RuntimeError(f"cowkvd not found at {binary} (--cowkvd or $COWKVD)")
    workdir = pathlib.Path(tempfile.mkdtemp(prefix="soak-hostile-", dir=args.workdir))
    reasons: List[str] = []
    ctx = multiprocessing.get_context("spawn")
    stop_hostile = ctx.Event()
    results: Any = ctx.Queue()
    procs: List[Any] = []
    server: Optional[Server] = None
    good: Optional[Good] = None
    sampler: Optional[Sampler] = None
    aborted: List[str] = []
    try:
        server = Server(binary, workdir, args)
        with cowkv.connect(server.address, timeout=120.0, wait_ready=30.0) as setup:
            t = time.monotonic()
            fill(setup, args)
            if args.verbose:
                print(f"soak: filled in {time.monotonic() - t:.1f}s", file=sys.stderr)
        baseline_rss, baseline_threads = server.status()
        base_metrics = server.metrics()

        def abort(why: str) -> None:
            if not aborted:
                aborted.append(why)
                stop_hostile.set()

        good = Good(server.address, args.good_interval, args.good_deadline)
        sampler = Sampler(server, good, args.abort_rss, abort, args.samples, args.verbose)
        cfg = HostileConfig(args, server.port)
        loads = [(hostile_begins, cfg.txn_conns), (hostile_unread, cfg.unread_conns),
                 (hostile_txn_ranges, cfg.txn_range_clients), (hostile_big_gets, cfg.get_clients)]
        for fn, n in loads:
            if n > 0:
                p = ctx.Process(target=fn, args=(cfg, stop_hostile, results), daemon=True)
                p.start()
                procs.append(p)
        sampler.thread.start()
        good.thread.start()
        stop_hostile.wait(args.seconds)
        try:
            metrics_loaded = server.metrics()  # before the hostile clients go
        except OSError as e:
            metrics_loaded = ""
            reasons.append(f"/metrics did not answer at the end of the load: {e}")
        stop_hostile.set()

        hostile: Dict[str, Counts] = {}
        deadline = time.monotonic() + 90
        while len(hostile) < len(procs) and time.monotonic() < deadline:
            try:
                name, counts = results.get(timeout=1.0)
                hostile[name] = counts
            except queue.Empty:
                if not any(p.is_alive() for p in procs):
                    break
        for p in procs:
            p.join(max(0.0, deadline - time.monotonic()))
            if p.is_alive():
                p.kill()
                reasons.append(f"hostile process {p.pid} did not stop")
        # The hostile connections are gone: memory and handles should be given back.
        time.sleep(args.grace)
        settled = sampler.sample()
        good.stop.set()
        good.thread.join(60)
        sampler.stop.set()
        sampler.thread.join(10)
        sampler.write_csv()

        # The verdict.
        if aborted:
            reasons.extend(aborted)
        n_ok, n_fail = len(good.latencies), len(good.failures)
        if n_fail:
            reasons.append(f"good client: {n_fail} failures (first: {good.failures[0]}; "
                           f"last: {good.failures[-1]})")
        want_ops = max(1, int(0.25 * args.seconds / args.good_interval))
        if n_ok < want_ops:
            reasons.append(f"good client: {n_ok} round trips, fewer than {want_ops}")
        p99 = good.quantile(0.99)
        if p99 > args.good_p99:
            reasons.append(f"good client: p99 {p99 * 1000:.0f} ms > {args.good_p99 * 1000:.0f} ms")
        if sampler.peak["rss"] > args.max_rss:
            reasons.append(f"peak RSS {sampler.peak['rss'] // MiB} MiB > --max-rss "
                           f"{args.max_rss // MiB} MiB")
        thread_bound = args.max_threads + args.thread_margin
        if sampler.peak["threads"] > thread_bound:
            reasons.append(f"peak threads {sampler.peak['threads']} > {thread_bound} "
                           f"(--max-threads {args.max_threads} + --thread-margin {args.thread_margin})")
        if settled["rss"] > args.settle_rss:
            reasons.append(f"RSS {settled['rss'] // MiB} MiB {args.grace:g}s after the hostile "
                           f"load stopped > --settle-rss {args.settle_rss // MiB} MiB")
        if settled.get("open_handles", 0):
            reasons.append(f"{settled['open_handles']} interactive transactions still open "
                           f"{args.grace:g}s after their connections closed")
        # The load was real.
        names = {hostile_begins: "begin flood", hostile_unread: "unread streams",
                 hostile_txn_ranges: "txn ranges", hostile_big_gets: "big gets"}
        for fn, n in loads:
            if n > 0 and names[fn] not in hostile:
                reasons.append(f"the {names[fn]} process reported nothing (it died?)")
        begins = handled(metrics_loaded, "KV/Begin")
        base_begins = handled(base_metrics, "KV/Begin")
        refused = begins.get("RESOURCE_EXHAUSTED", 0) - base_begins.get("RESOURCE_EXHAUSTED", 0)
        flood_limit = args.max_txns_per_client * cfg.txn_sources
        if metrics_loaded and cfg.txn_conns and cfg.txn_conns * cfg.txn_per_conn > flood_limit:
            if refused == 0:
                reasons.append("the begin flood was never refused past the per-client limit")
            # The per-client limit was reached by some client and passed by none
            # (the server's high-water mark, not a sample).
            per_client = settled.get("open_handles_peak_per_client", 0)
            if per_client > args.max_txns_per_client:
                reasons.append(f"a client held {per_client} transactions at once, past "
                               f"--max-txns-per-client {args.max_txns_per_client}")
            elif per_client < args.max_txns_per_client:
                reasons.append(f"the begin flood held at most {per_client} transactions for one "
                               f"client, short of the limit ({args.max_txns_per_client})")
        unread = hostile.get("unread streams", {})
        for kind, method in (("read", "Files/Read"), ("range", "KV/Range"), ("get", "KV/Get")):
            want = unread.get(f"{kind} started", 0)
            got = started(metrics_loaded, method) - started(base_metrics, method)
            if metrics_loaded and want and got < want // 2:
                reasons.append(f"unread {kind}: {want} sent, the server started only {got}")
        for name, threads in (("txn ranges", cfg.txn_range_clients),
                              ("big gets", cfg.get_clients)):
            if threads and not sum(hostile.get(name, {}).values()):
                reasons.append(f"{name}: no call finished")
        # Healthy afterwards.
        if server.proc.poll() is not None:
            reasons.append(f"cowkvd died (exit {server.proc.returncode})")
        else:
            try:
                if not health_serving(server.address):
                    reasons.append("grpc.health says NOT_SERVING afterwards")
                with cowkv.connect(server.address, timeout=30.0) as after:
                    after.subvolume().put("after", "ok")
                    if after.subvolume().get("after") != b"ok":
                        reasons.append("a round trip afterwards read something else")
                    report = after.check(timeout=600)
                    if not report.ok:
                        reasons.append(f"Admin.Check afterwards: {report.problems[:3]}")
            except (cowkv.CowkvError, grpc.RpcError) as e:
                reasons.append(f"unhealthy afterwards: {_code(e)} {e}"[:300])
        code = server.stop()
        if code != 0:
            reasons.append(f"cowkvd did not stop cleanly on SIGTERM (exit {code})")

        figures = (f"seconds={args.seconds:g} good_ops={n_ok} good_p99_ms={p99 * 1000:.0f} "
                   f"peak_rss_mb={sampler.peak['rss'] // MiB} peak_threads={sampler.peak['threads']} "
                   f"good_failures={n_fail} good_p50_ms={good.quantile(0.5) * 1000:.0f} good_max_ms={max(good.latencies, default=0) * 1000:.0f} "
                   f"baseline_rss_mb={baseline_rss // MiB} baseline_threads={baseline_threads} "
                   f"settled_rss_mb={settled['rss'] // MiB} settled_threads={settled['threads']} "
                   f"settled_node_cache_mb={settled.get('node_cache', 0) // MiB} "
                   f"peak_inflight_mb={sampler.peak['inflight'] // MiB} "
                   f"peak_open_txns={sampler.peak['open_handles']} begin_refused={refused}")
        details = [f"  {name}: {dict(sorted(c.items()))}" for name, c in sorted(hostile.items())]
        details.append(f"  admission: waits={sampler.last.get('admission_waits', '?')} "
                       f"refusals={sampler.last.get('admission_refusals', '?')} "
                       f"stats calls that failed={sampler.stats_failures}")
        details.extend(f"  good client failure: {f}" for f in good.failures[:10])
        print("soak: hostile outcomes\n" + "\n".join(details), file=sys.stderr)
        return not reasons, "; ".join(reasons), figures
    finally:
        stop_hostile.set()
        for p in procs:
            if p.is_alive():
                p.kill()
        if good is not None:
            good.stop.set()
            good.client.close()
        if sampler is not None:
            sampler.stop.set()
            sampler.stats_client.close()
        if server is not None and server.proc.poll() is None:
            server.proc.kill()
            server.proc.wait()
        if server is not None and server.proc.returncode not in (0, None) and args.verbose:
            print("soak: cowkvd log tail:\n" + "".join(server.log[-20:]), file=sys.stderr)
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cowkvd", help="the server binary (default $COWKVD, else bazel-bin/server/cowkvd)")
    p.add_argument("--seconds", type=float, default=600, help="hostile load duration (600)")
    p.add_argument("--workdir", help="where the temporary device goes (default $TMPDIR)")
    p.add_argument("--keep", action="store_true", help="keep the device and work directory")
    p.add_argument("--device-size", default="2G", help="cowkvd --create-size (2G)")
    p.add_argument("--max-inflight-bytes", type=parse_size, default=256 * MiB,
                   help="cowkvd --max-inflight-bytes (256M)")
    p.add_argument("--max-threads", type=int, default=512, help="cowkvd --max-threads (512)")
    p.add_argument("--max-txns-per-client", type=int, default=256,
                   help="cowkvd --max-txns-per-client (256)")
    p.add_argument("--server-arg", action="append", default=[], help="another cowkvd flag")
    # Bounds.
    p.add_argument("--max-rss", type=parse_size, default=2 * GiB, help="peak RSS bound (2G)")
    p.add_argument("--abort-rss", type=parse_size, default=0,
                   help="stop the hostile load at once past this RSS (default 2 x --max-rss)")
    p.add_argument("--settle-rss", type=parse_size, default=512 * MiB,
                   help="RSS bound --grace s after the hostile load stopped (512M)")
    p.add_argument("--thread-margin", type=int, default=64,
                   help="threads allowed past --max-threads (engine, gRPC core, /metrics) (64)")
    p.add_argument("--good-p99", type=float, default=2.0, help="good client p99 bound, s (2)")
    p.add_argument("--grace", type=float, default=15, help="seconds to settle after the load (15)")
    # The good client.
    p.add_argument("--good-interval", type=float, default=0.1, help="s between round trips (0.1)")
    p.add_argument("--good-deadline", type=float, default=10.0, help="its per-call deadline, s (10)")
    # The hostile load.
    p.add_argument("--txn-conns", type=int, default=64, help="(a) Begin-flood connections (64)")
    p.add_argument("--txn-per-conn", type=int, default=8,
                   help="(a) Begins each connection sends at once, then one more every 5 s (8)")
    p.add_argument("--txn-sources", type=int, default=1,
                   help="(a) loopback addresses the flood comes from, 127.0.0.2.. (1; each is one "
                        "client for --max-txns-per-client)")
    p.add_argument("--unread-conns", type=int, default=64, help="(b) unread connections (64)")
    p.add_argument("--unread-per-conn", type=int, default=4, help="(b) unread calls each (4)")
    p.add_argument("--unread-kinds", default="read,range,get",
                   help="(b) calls left unread, in turn: read, range, get (read,range,get)")
    p.add_argument("--unread-lifetime", type=float, default=15.0,
                   help="(b) s before an unread connection is closed and replaced (15)")
    p.add_argument("--txn-range-clients", type=int, default=8, help="(c) Txn-range threads (8)")
    p.add_argument("--txn-range-ops", type=int, default=200, help="(c) Range ops per Txn (200)")
    p.add_argument("--get-clients", type=int, default=16, help="(d) big-Get threads (16)")
    # The data.
    p.add_argument("--keys", type=int, default=100_000, help="keys in the key space (100000)")
    p.add_argument("--value-bytes", type=int, default=1024, help="their value size (1024)")
    p.add_argument("--big-values", type=int, default=8, help="multi-MiB values (8)")
    p.add_argument("--big-value-mib", type=int, default=8, help="their size, MiB (8)")
    p.add_argument("--file-mib", type=int, default=64, help="the big file, MiB (64)")
    p.add_argument("--samples", help="write the per-second samples to this CSV file")
    p.add_argument("-v", "--verbose", action="store_true", help="progress every 10 s on stderr")
    args = p.parse_args(argv)
    if not args.abort_rss:
        args.abort_rss = 2 * args.max_rss
    if args.txn_sources < 1 or args.txn_sources > 250:
        p.error("--txn-sources: 1..250")
    if not set(args.unread_kinds.split(",")) <= {"read", "range", "get"}:
        p.error("--unread-kinds: a comma-separated list of read, range, get")
    try:
        passed, reasons, figures = run(args)
    except Exception as e:  # noqa: BLE001 - a setup failure is exit 2, not a verdict
        print(f"soak: ERROR {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    if passed:
        print(f"soak: PASS {figures}", flush=True)
        return 0
    print(f"soak: FAIL {reasons} | {figures}", flush=True)
    return 1


if __name__ == "__main__":
    sys.exit(main())
