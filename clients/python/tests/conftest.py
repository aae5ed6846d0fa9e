"""Fixtures: a real cowkvd on a temporary device and a free port.

The server binary is $COWKVD, else the repository's bazel-bin/server/cowkvd
(`bazel build //server:cowkvd`). One server serves the whole session; each
test gets its own subvolume (fixture `sv`), so tests do not see each other's
keys and files. At the end of the session the online check must be clean and
the server must stop with exit code 0 (drain, commit).
"""

from __future__ import annotations

import os
import pathlib
import re
import signal
import subprocess
import threading
from typing import Iterator, List, Optional

import pytest

import cowkv

REPO = pathlib.Path(__file__).resolve().parents[3]
_PORT_LINE = re.compile(r"\(port (\d+)\)")


def cowkvd_path() -> str:
    path = os.environ.get("COWKVD") or str(REPO / "bazel-bin" / "server" / "cowkvd")
    if not os.access(path, os.X_OK):
        pytest.exit(f"cowkvd not found at {path}: run `bazel build //server:cowkvd` or set COWKVD",
                    returncode=2)
    return path


class Server:
    """One cowkvd process on `device`, listening on a free loopback port."""

    def __init__(self, device: pathlib.Path, *extra: str, create_size: str = "128M") -> None:
        self.device = device
        self.create_size = create_size
        self.extra = list(extra)
        self.log: List[str] = []
        self.proc: Optional[subprocess.Popen[str]] = None
        self.port = 0
        self.fixed_port = 0

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> "Server":
        """Starts cowkvd on a free port, or on ``fixed_port`` when set."""
        port = self.fixed_port
        cmd = [cowkvd_path(), "--device", str(self.device), "--create-size", self.create_size,
               "--listen", f"127.0.0.1:{port}", "--metrics-listen", "", *self.extra]
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                     text=True)
        ready = threading.Event()
        threading.Thread(target=self._drain, args=(ready,), daemon=True).start()
        if not ready.wait(timeout) or not self.port:
            self.proc.kill()
            raise RuntimeError("cowkvd did not start:\n" + "".join(self.log))
        return self

    def _drain(self, ready: threading.Event) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        for line in self.proc.stderr:
            self.log.append(line)
            m = _PORT_LINE.search(line)
            if m and not ready.is_set():
                self.port = int(m.group(1))
                ready.set()
        ready.set()  # exited before serving

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM: drain, commit, exit. Returns the exit code."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(30)


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = Server(tmp_path_factory.mktemp("cowkvd") / "cowkv.img").start()
    yield srv
    code = srv.stop()
    assert code == 0, "cowkvd did not stop cleanly:\n" + "".join(srv.log)


@pytest.fixture(scope="session")
def client(server: Server) -> Iterator[cowkv.Client]:
    c = cowkv.connect(server.address, timeout=60.0, wait_ready=30.0)
    yield c
    report = c.check()
    c.close()
    assert report.ok, report.problems


@pytest.fixture
def sv(client: cowkv.Client, request: pytest.FixtureRequest) -> cowkv.Subvolume:
    """A fresh subvolume named after the test."""
    name = re.sub(r"[^A-Za-z0-9_.@-]", "_", request.node.name)[:200]
    client.create_subvolume(name)
    return client.subvolume(name)
