"""The samples run against a live cowkvd (so the README's tour keeps working)."""

from __future__ import annotations

import pathlib
import sys

import pytest

import cowkv
from conftest import Server

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "samples"))
import tour  # noqa: E402


def test_tour(server: Server, client: cowkv.Client, capsys: pytest.CaptureFixture[str]) -> None:
    tour.main(server.address)
    tour.main(server.address)  # idempotent
    out = capsys.readouterr().out
    assert out.count("alice has 70 left") == 2
    assert "shared=True" in out and "shared=False" not in out
    assert client.subvolume("tour").get("acct/bob") == b"60"


def test_aio_tour(server: Server, client: cowkv.Client,
                  capsys: pytest.CaptureFixture[str]) -> None:
    import asyncio

    import aio_tour
    asyncio.run(aio_tour.main(server.address))
    out = capsys.readouterr().out
    assert "alice has 70 left" in out and "svc/tour is up lost: False" in out
    assert "watched: PUT acct/alice=100; PUT acct/" in out
    assert client.subvolume("aio-tour").get("acct/bob") == b"30"
    assert client.subvolume("aio-tour").get("svc/tour", default=None) is None
