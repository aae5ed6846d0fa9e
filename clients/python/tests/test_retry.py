"""The opt-in retry of UNAVAILABLE (docs/api.md "Retrying UNAVAILABLE"):
the policy's methods and defaults equal clients/conformance/
unavailable_retry.json; against a server that is down for the first
attempt(s) and comes back on its port, a read succeeds with the option and
fails fast with Unavailable without it; a write is never retried."""

from __future__ import annotations

import json
import pathlib
import threading
import time

import pytest

import cowkv
from cowkv.retry import RETRIED_METHODS
from conftest import Server

SPEC = json.loads((pathlib.Path(__file__).resolve().parents[2] / "conformance"
                   / "unavailable_retry.json").read_text())


def test_policy_matches_the_spec() -> None:
    assert list(RETRIED_METHODS) == SPEC["methods"]
    d = SPEC["defaults"]
    r = cowkv.UnavailableRetry()
    assert (r.max_attempts, r.initial_backoff * 1000, r.max_backoff * 1000,
            r.backoff_multiplier) == (d["max_attempts"], d["initial_backoff_ms"],
                                      d["max_backoff_ms"], d["backoff_multiplier"])
    cfg = json.loads(r.service_config())["methodConfig"][0]
    assert [f"{n['service']}/{n['method']}" for n in cfg["name"]] == SPEC["methods"]
    assert cfg["retryPolicy"]["retryableStatusCodes"] == ["UNAVAILABLE"]
    with pytest.raises(cowkv.InvalidArgument):
        cowkv.UnavailableRetry(max_attempts=6)
    with pytest.raises(cowkv.InvalidArgument):
        cowkv.UnavailableRetry(initial_backoff=2.0, max_backoff=1.0)


def test_a_read_outlives_a_restart_only_with_the_option(tmp_path: pathlib.Path) -> None:
    srv = Server(tmp_path / "cowkv.img").start()
    with cowkv.connect(srv.address, timeout=30.0, wait_ready=30.0) as c:
        c.subvolume("").put("k", b"v")
    assert srv.stop() == 0
    # Down: without the option a read fails fast; a write fails even with it.
    with cowkv.connect(srv.address, timeout=30.0) as plain:
        t0 = time.monotonic()
        with pytest.raises(cowkv.Unavailable):
            plain.subvolume("").get("k")
        assert time.monotonic() - t0 < 5
    # Backoffs of seconds: a retry comes after the channel reconnected (its
    # own reconnect backoff starts at 1 s).
    retry = cowkv.UnavailableRetry(initial_backoff=2.0, max_backoff=5.0)
    with cowkv.connect(srv.address, timeout=30.0, retry=retry) as patient:
        with pytest.raises(cowkv.Unavailable):
            patient.subvolume("").put("k", b"w")
        srv.fixed_port = srv.port
        starter = threading.Timer(0.3, srv.start)
        t0 = time.monotonic()
        starter.start()
        try:
            assert patient.subvolume("").get("k") == b"v"
            assert time.monotonic() - t0 >= 0.3
        finally:
            starter.join()
            assert srv.stop() == 0  # also when the read failed: the timer started it
