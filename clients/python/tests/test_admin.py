"""Admin calls and connection-level errors: sync, stats, check, version; a
token-protected server (Unauthenticated), an unreachable one (Unavailable),
a deadline that passes (DeadlineExceeded), the stopping server."""

from __future__ import annotations

import pathlib
import socket

import pytest

import cowkv
from conftest import Server


def test_sync_stats_check_version(client: cowkv.Client) -> None:
    g1 = client.sync()
    client.subvolume().put("admin", "x")
    assert client.sync() > g1
    stats = client.stats()
    assert stats["commits"] >= 1 and stats["server_rpcs"] > 0
    assert {"used_bytes", "free_bytes", "log_syncs", "cache_hits"} <= stats.keys()
    report = client.check()
    assert report.ok and report.problems == [] and report.nodes > 0 and report.fsid
    v = client.version()
    assert v.api == "cowkv.v1" and v.nodesize == stats["nodesize"]


def test_deadline_exceeded(client: cowkv.Client, sv: cowkv.Subvolume) -> None:
    # gRPC checks deadlines on a coarse timer, so a call that finishes in
    # about a millisecond may beat a tiny timeout; streaming 16 MiB never does.
    sv.files.write_bytes("/big", bytes(16 << 20))
    with cowkv.connect(client.address, stream_timeout=0.002) as hurried:
        with pytest.raises(cowkv.DeadlineExceeded) as e:
            hurried.subvolume(sv.name).files.read_bytes("/big")
    assert e.value.code is not None and e.value.code.name == "DEADLINE_EXCEEDED"


def test_unreachable_server() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # free once closed: nothing listens there
    with pytest.raises(cowkv.Unavailable):
        cowkv.connect(f"127.0.0.1:{port}", wait_ready=0.5)
    c = cowkv.connect(f"127.0.0.1:{port}", timeout=2)
    with pytest.raises(cowkv.Unavailable):
        c.subvolume().get("k")
    c.close()


def test_token_and_stop(tmp_path: pathlib.Path) -> None:
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    srv = Server(tmp_path / "auth.img", "--auth-token-file", str(token)).start()
    try:
        anonymous = cowkv.connect(srv.address, wait_ready=10)
        with pytest.raises(cowkv.Unauthenticated):
            anonymous.list_subvolumes()
        wrong = cowkv.connect(srv.address, token="nope")
        with pytest.raises(cowkv.Unauthenticated):
            wrong.subvolume().put("k", "v")
        with cowkv.connect(srv.address, token="s3cret") as c:
            c.subvolume().put("k", "v")
            assert c.subvolume().get("k") == b"v"
        anonymous.close()
        wrong.close()
    finally:
        assert srv.stop() == 0
    # Stopped: the address answers no more.
    with cowkv.connect(srv.address, timeout=2) as c:
        with pytest.raises(cowkv.Unavailable):
            c.version()


def test_full_device_is_no_space(tmp_path: pathlib.Path) -> None:
    # A 16 MiB device fills after a few 1 MiB files: writes then fail with
    # NoSpace (RESOURCE_EXHAUSTED, ENOSPC), change nothing, and what was
    # written before stays readable and checks clean.
    srv = Server(tmp_path / "small.img", create_size="16M").start()
    try:
        with cowkv.connect(srv.address, wait_ready=10) as c:
            fs = c.subvolume().files
            written = []
            with pytest.raises(cowkv.NoSpace) as e:
                for i in range(64):
                    fs.write_bytes(f"/f{i}", bytes([i]) * (1 << 20))
                    written.append(i)
            assert e.value.errno_name == "ENOSPC" and isinstance(e.value, cowkv.ResourceExhausted)
            assert written and e.value.code is not None
            with pytest.raises(cowkv.NoSpace):
                for j in range(10_000):
                    c.subvolume().put(f"k{j}", "v" * 1000)
            for i in written:
                assert fs.read_bytes(f"/f{i}") == bytes([i]) * (1 << 20)
            assert c.check().ok
    finally:
        assert srv.stop() == 0
