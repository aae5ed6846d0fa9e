"""/metrics in the Prometheus text format (0.0.4), read with the reference
parser (prometheus_client): the whole page parses, the documented families
are there with their types and labels (docs/api.md, "Metrics"), the RPC
counters move by exactly the calls made, and numbers of 1e9 and more are
printed exactly (a %.9g rendering would round them).

The session server runs without /metrics, so this module starts its own,
with /metrics on a free port and a 2 GiB device (so the total space is past
1e9 bytes).
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import threading
import time
import urllib.request
from typing import Dict, Iterator, List, Tuple

import pytest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

import cowkv
from conftest import Server, cowkvd_path

_METRICS_PORT = re.compile(r"metrics on \S+ \(port (\d+)\)")

Labels = Tuple[Tuple[str, str], ...]
Samples = Dict[Tuple[str, Labels], float]


class MetricsServer(Server):
    """A Server with /metrics on a free loopback port (Server turns it off)."""

    metrics_port = 0

    def start(self, timeout: float = 60.0) -> "MetricsServer":
        cmd = [cowkvd_path(), "--device", str(self.device), "--create-size", self.create_size,
               "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", *self.extra]
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                     text=True)
        ready = threading.Event()
        threading.Thread(target=self._drain, args=(ready,), daemon=True).start()
        if not ready.wait(timeout) or not self.port:
            self.proc.kill()
            raise RuntimeError("cowkvd did not start:\n" + "".join(self.log))
        m = _METRICS_PORT.search("".join(self.log))
        if m is None:
            self.proc.kill()
            raise RuntimeError("cowkvd did not say its metrics port:\n" + "".join(self.log))
        self.metrics_port = int(m.group(1))
        return self

    def scrape(self) -> str:
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=30) as r:
            assert r.status == 200
            ctype = r.headers.get("Content-Type", "")
            assert ctype.startswith("text/plain") and "version=0.0.4" in ctype, ctype
            body: bytes = r.read()
        return body.decode("utf-8")


@pytest.fixture(scope="module")
def msrv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MetricsServer]:
    # No interval commits: counters read twice must not move in between.
    srv = MetricsServer(tmp_path_factory.mktemp("metrics") / "m.img", "--commit-interval-ms", "0",
                        create_size="2G").start()
    yield srv
    assert srv.stop() == 0, "cowkvd did not stop cleanly:\n" + "".join(srv.log)


@pytest.fixture(scope="module")
def mclient(msrv: MetricsServer) -> Iterator[cowkv.Client]:
    c = cowkv.connect(msrv.address, timeout=60.0, wait_ready=30.0)
    yield c
    c.close()


def parse(text: str) -> List[Metric]:
    """Every family of the page; fails unless every sample line was parsed."""
    families = list(text_string_to_metric_families(text))
    sample_lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
    assert sum(len(f.samples) for f in families) == len(sample_lines)
    return families


def samples(families: List[Metric]) -> Samples:
    out: Samples = {}
    for f in families:
        for s in f.samples:
            key = (s.name, tuple(sorted(s.labels.items())))
            assert key not in out, f"sample {key} appears twice"
            out[key] = s.value
    return out


def rpc(method: str, **extra: str) -> Labels:
    """The labels of one method: rpc("KV/Get", grpc_code="OK")."""
    service, name = method.split("/")
    kind = {"Files/Read": "server_stream", "Files/Write": "client_stream"}.get(method, "unary")
    labels = {"grpc_type": kind, "grpc_service": f"cowkv.v1.{service}", "grpc_method": name,
              **extra}
    return tuple(sorted(labels.items()))


def value(s: Samples, name: str, labels: Labels = ()) -> float:
    assert (name, labels) in s, f"no sample {name}{dict(labels)}"
    return s[(name, labels)]


def test_whole_page_parses_and_documented_families(mclient: cowkv.Client,
                                                     msrv: MetricsServer) -> None:
    sv = mclient.subvolume()
    sv.put("m/a", "1")
    assert sv.get("m/a") == b"1"
    with pytest.raises(cowkv.NotFound):
        sv.get("m/absent")
    sv.files.write_bytes("/m.bin", b"x" * 1000)
    text = msrv.scrape()
    families = {f.name: f for f in parse(text)}

    # Family name (the parser drops a counter's _total) -> type.
    want = {
        "grpc_server_handled": "counter", "grpc_server_started": "counter",
        "grpc_server_msg_received": "counter", "grpc_server_msg_sent": "counter",
        "grpc_server_handling_seconds": "histogram",
        "process_cpu_seconds": "counter", "process_resident_memory_bytes": "gauge",
        "process_virtual_memory_bytes": "gauge", "process_threads": "gauge",
        "process_open_fds": "gauge", "process_max_fds": "gauge",
        "process_start_time_seconds": "gauge",
        "cowkv_build_info": "gauge", "cowkv_space_bytes": "gauge",
        "cowkv_server_inflight_bytes": "gauge", "cowkv_server_admission_waits": "counter",
        "cowkv_server_admission_refusals": "counter",
        "cowkv_server_open_transaction_handles": "gauge",
        "cowkv_server_expired_transaction_handles": "counter", "cowkv_server_stopping": "gauge",
        "cowkv_sync_commit_duration_seconds": "histogram",
        "cowkv_durable_write_duration_seconds": "histogram",
        "cowkv_commit_duration_seconds": "histogram",
        "cowkv_log_sync_duration_seconds": "histogram",
        "cowkv_engine_commits": "counter", "cowkv_log_syncs": "counter",
    }
    missing = sorted(set(want) - set(families))
    assert not missing, f"families missing from /metrics: {missing}"
    wrong = {n: families[n].type for n, t in want.items() if families[n].type != t}
    assert not wrong, f"families with another type than documented: {wrong}"
    # Every family has HELP and TYPE (untyped samples would parse as "unknown").
    untyped = sorted(n for n, f in families.items() if f.type == "unknown" or not f.documentation)
    assert not untyped, f"families without TYPE or HELP: {untyped}"

    handled = families["grpc_server_handled"].samples
    assert handled and all(
        set(s.labels) == {"grpc_type", "grpc_service", "grpc_method", "grpc_code"}
        for s in handled)
    types = {(s.labels["grpc_service"], s.labels["grpc_method"]): s.labels["grpc_type"]
             for s in handled}
    assert set(types.values()) == {"unary", "server_stream", "client_stream"}
    assert types[("cowkv.v1.Files", "Read")] == "server_stream"
    assert types[("cowkv.v1.Files", "Write")] == "client_stream"
    assert types[("cowkv.v1.KV", "Get")] == "unary"
    codes = {(s.labels["grpc_method"], s.labels["grpc_code"]) for s in handled if s.value > 0}
    assert {("Put", "OK"), ("Get", "OK"), ("Get", "NOT_FOUND"), ("Write", "OK")} <= codes

    build = families["cowkv_build_info"].samples
    assert len(build) == 1 and build[0].value == 1
    assert set(build[0].labels) == {"version", "api", "commit", "build_type"}
    v = mclient.version()
    assert build[0].labels["version"] == v.version and build[0].labels["api"] == v.api

    kinds = {s.labels.get("kind"): s.value for s in families["cowkv_space_bytes"].samples}
    assert set(kinds) == {"total", "used", "free", "pinned"}
    assert 0 < kinds["used"] <= kinds["total"] and kinds["free"] <= kinds["total"]


def test_rpc_counters_count_each_call(mclient: cowkv.Client, msrv: MetricsServer) -> None:
    sv = mclient.subvolume()
    fs = sv.files
    data = os.urandom(5 << 19)  # 2.5 MiB: four Write messages, three Read chunks
    before = samples(parse(msrv.scrape()))
    for i in range(3):
        sv.put(f"c/{i}", str(i))
    assert sv.get("c/0") == b"0" and sv.get("c/2") == b"2"
    with pytest.raises(cowkv.NotFound):
        sv.get("c/absent")
    assert fs.write_bytes("/c.bin", data) == len(data)
    assert b"".join(fs.read_stream(path="/c.bin")) == data
    after = samples(parse(msrv.scrape()))

    def delta(name: str, method: str, **extra: str) -> float:
        return value(after, name, rpc(method, **extra)) - before.get((name, rpc(method, **extra)),
                                                                      0.0)

    got = {
        "put ok": delta("grpc_server_handled_total", "KV/Put", grpc_code="OK"),
        "put started": delta("grpc_server_started_total", "KV/Put"),
        "put received": delta("grpc_server_msg_received_total", "KV/Put"),
        "put sent": delta("grpc_server_msg_sent_total", "KV/Put"),
        "get ok": delta("grpc_server_handled_total", "KV/Get", grpc_code="OK"),
        "get not found": delta("grpc_server_handled_total", "KV/Get", grpc_code="NOT_FOUND"),
        "get started": delta("grpc_server_started_total", "KV/Get"),
        "get sent": delta("grpc_server_msg_sent_total", "KV/Get"),
        "get latency count": delta("grpc_server_handling_seconds_count", "KV/Get"),
        "write ok": delta("grpc_server_handled_total", "Files/Write", grpc_code="OK"),
        "write received": delta("grpc_server_msg_received_total", "Files/Write"),
        "write sent": delta("grpc_server_msg_sent_total", "Files/Write"),
        "read ok": delta("grpc_server_handled_total", "Files/Read", grpc_code="OK"),
        "read received": delta("grpc_server_msg_received_total", "Files/Read"),
        "read sent": delta("grpc_server_msg_sent_total", "Files/Read"),
    }
    assert got == {
        "put ok": 3, "put started": 3, "put received": 3, "put sent": 3,
        # The failing Get is started and handled (NOT_FOUND) but sends no message.
        "get ok": 2, "get not found": 1, "get started": 3, "get sent": 2, "get latency count": 3,
        # The Write stream: its head message and three 1 MiB-or-less chunks.
        "write ok": 1, "write received": 4, "write sent": 1,
        "read ok": 1, "read received": 1, "read sent": 3,
    }
    # A code that never happened for a method stays off the page.
    assert ("grpc_server_handled_total", rpc("KV/Put", grpc_code="NOT_FOUND")) not in after


def _proc_start_seconds(pid: int) -> float:
    """The process's start time (since the epoch) from /proc, as Prometheus
    client libraries compute it: boot time + start time in clock ticks."""
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    fields = stat[stat.rindex(")") + 2:].split()
    start_ticks = int(fields[19])  # field 22
    with open("/proc/stat") as f:
        btime = next(int(ln.split()[1]) for ln in f if ln.startswith("btime "))
    return btime + start_ticks / os.sysconf("SC_CLK_TCK")


def test_large_values_are_exact(mclient: cowkv.Client, msrv: MetricsServer) -> None:
    assert msrv.proc is not None
    total = mclient.stats()["total_bytes"]
    assert total >= 1_000_000_000  # the 2 GiB device: past what %.9g prints exactly
    text = msrv.scrape()
    s = samples(parse(text))
    assert value(s, "cowkv_space_bytes", (("kind", "total"),)) == total
    # The text itself is the integer, not a rounded float (1.07363533e+09).
    assert re.search(rf'^cowkv_space_bytes{{kind="total"}} {total}$', text, re.M), \
        [ln for ln in text.splitlines() if ln.startswith("cowkv_space_bytes")]
    # Byte figures (virtual memory: about 1e9) print as integers too.
    vm = [ln for ln in text.splitlines() if ln.startswith("process_virtual_memory_bytes ")]
    assert len(vm) == 1 and re.fullmatch(r"process_virtual_memory_bytes \d+", vm[0]), vm
    # The start time (~1.7e9 s) is a double: printed to the 1/100 s the
    # ticks give, where %.9g would round it to 10 s.
    start = value(s, "process_start_time_seconds")
    assert start >= 1e9
    assert abs(start - _proc_start_seconds(msrv.proc.pid)) < 0.02
    assert 0 <= time.time() - start < 600


def test_process_metrics_match_proc(mclient: cowkv.Client, msrv: MetricsServer) -> None:
    assert msrv.proc is not None
    pid = msrv.proc.pid
    s = samples(parse(msrv.scrape()))
    with open(f"/proc/{pid}/status") as f:
        status = dict(ln.split(":", 1) for ln in f)
    rss = int(status["VmRSS"].split()[0]) * 1024
    threads = int(status["Threads"])
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    # Read moments apart, on an idle server: equal up to small drift.
    assert math.isclose(value(s, "process_resident_memory_bytes"), rss, rel_tol=0.25)
    assert abs(value(s, "process_threads") - threads) <= 4
    assert abs(value(s, "process_open_fds") - fds) <= 4
    assert value(s, "process_max_fds") >= value(s, "process_open_fds") > 0
    assert value(s, "process_cpu_seconds_total") > 0
    assert value(s, "cowkv_server_stopping") == 0


def test_admin_stats_match_metrics(mclient: cowkv.Client, msrv: MetricsServer) -> None:
    # Counters that nothing moves on an idle server read the same both ways.
    stats = mclient.stats()
    s = samples(parse(msrv.scrape()))
    assert value(s, "cowkv_server_open_transaction_handles") == stats["server_open_handles"]
    assert value(s, "cowkv_server_inflight_bytes") == stats["server_inflight_bytes"] == 0
    assert value(s, "cowkv_server_admission_waits_total") == stats["server_admission_waits"]
    assert value(s, "cowkv_server_admission_refusals_total") == stats["server_admission_refusals"]
    assert value(s, "cowkv_engine_commits_total") == stats["commits"]
    assert value(s, "cowkv_log_syncs_total") == stats["log_syncs"]
