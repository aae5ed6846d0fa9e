"""Send and receive against two live cowkvd servers, through the
synchronous client and cowkv.aio: full streams into the same server under a
new name and piped into the other, an incremental stream, a resumable
receive truncated mid-stream and one cancelled by the client, resumed from
the listed token or aborted, and refused tokens and names with their
classes and reasons. Every copy has its source's digest."""

from __future__ import annotations

import asyncio
import io
import os
import pathlib
import random
import time
from typing import Iterator

import pytest

import cowkv
import cowkv.aio
from conftest import Server


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[cowkv.Client, cowkv.Client]]:
    """Two servers with snapshots s1 and s2 (read-only) of a random "src"
    on the first."""
    servers = [Server(tmp_path_factory.mktemp(n) / "cowkv.img", create_size="256M").start()
               for n in ("send_a", "send_b")]
    a, b = (cowkv.connect(s.address, timeout=60.0, wait_ready=30.0) for s in servers)
    seed = int(os.environ.get("COWKV_SEND_SEED", time.time_ns()))
    print(f"seed {seed}")
    rng = random.Random(seed)
    a.create_subvolume("src")
    for rnd in (1, 2):
        _fill(rng, a.subvolume("src"), rnd)
        a.snapshot("src", f"s{rnd}", read_only=True)
    yield a, b
    for c in (a, b):
        assert c.check().ok
        c.close()
    for s in servers:
        assert s.stop() == 0


def _fill(rng: random.Random, sv: cowkv.Subvolume, rnd: int) -> None:
    for _ in range(40):
        k = f"k{rng.randrange(60):03d}"
        if rng.randrange(4) == 0:
            try:
                sv.delete(k)
            except cowkv.NotFound:
                pass
        else:
            sv.put(k, f"v{rnd}-{rng.random()}")
    sv.files.write_bytes(f"/big{rnd}", rng.randbytes((1 << 20) + rng.randrange(2 << 20)))
    sv.files.write_bytes("/small", f"round {rnd}".encode())


def _wait_partial(c: cowkv.Client, name: str) -> cowkv.PartialReceive:
    end = time.monotonic() + 20
    while time.monotonic() < end:
        for p in c.partial_receives():
            if p.name == name and not p.in_use:
                return p
        time.sleep(0.02)
    raise AssertionError(f"partial receive {name!r} not listed")


def test_full_and_incremental(pair: tuple[cowkv.Client, cowkv.Client]) -> None:
    a, b = pair
    buf = io.BytesIO()
    stats = a.send_to(buf, "s1")
    assert stats.bytes == len(buf.getvalue()) and stats.records > 0
    got = a.receive(io.BytesIO(buf.getvalue()), "s1copy")  # same server, new name
    assert (got.name, got.incremental, got.bytes) == ("s1copy", False, stats.bytes)
    assert a.digest("s1copy") == a.digest("s1")
    stream = a.send("s1")
    got = b.receive(stream)  # piped; the sender's name kept
    assert got.name == "s1" and stream.stats is not None
    assert b.digest("s1") == a.digest("s1")
    got = b.receive(a.send("s2", parent="s1"))
    assert got.incremental and got.parent == "s1"
    assert b.digest("s2") == a.digest("s2")
    with pytest.raises(cowkv.NotFound):
        list(a.send("nosuch"))
    with pytest.raises(cowkv.InvalidArgument):
        a.send("")


class _Dropped(Exception):
    pass


def test_resume_and_abort(pair: tuple[cowkv.Client, cowkv.Client]) -> None:
    a, b = pair
    full = io.BytesIO()
    a.send_to(full, "s2")
    data = full.getvalue()
    rng = random.Random(len(data))
    half = data[:len(data) // 4 + rng.randrange(len(data) // 2)]
    with pytest.raises(cowkv.DataLoss) as ei1:  # truncated: kept as a partial receive
        b.receive(io.BytesIO(half), "cut", resumable=True)
    assert ei1.value.reason == "STREAM_CORRUPT"
    p = _wait_partial(b, "cut")
    assert p.token and p.uuid
    bad = bytearray(p.token.encode())
    bad[len(bad) // 2] ^= 1
    with pytest.raises(cowkv.InvalidArgument) as ei2:
        list(a.send("", resume_token=bad.decode()))
    assert ei2.value.reason == "RESUME_TOKEN"
    with pytest.raises(cowkv.AlreadyExists) as ei3:
        b.receive(io.BytesIO(data), "cut")
    assert ei3.value.reason == "PARTIAL_RECEIVE"
    got = b.receive(a.send("", resume_token=p.token))
    assert got.name == "cut" and b.digest("cut") == a.digest("s2")
    with pytest.raises(cowkv.NotFound) as ei4:  # the token is stale now
        b.receive(a.send("", resume_token=p.token))
    assert ei4.value.reason == "RESUME_MISMATCH"

    def dropped() -> Iterator[bytes]:  # a client that dies mid-upload
        yield data[:len(data) // 2]
        time.sleep(0.3)
        raise _Dropped()
    with pytest.raises(_Dropped):
        b.receive(dropped(), "drop", resumable=True)
    _wait_partial(b, "drop")
    b.abort_receive("drop")
    with pytest.raises(cowkv.NotFound) as ei5:
        b.abort_receive("drop")
    assert ei5.value.reason == "RESUME_MISMATCH"
    assert b.partial_receives() == []


def test_aio(pair: tuple[cowkv.Client, cowkv.Client]) -> None:
    a, b = pair

    async def body() -> None:
        async with cowkv.aio.connect(a.address) as da, cowkv.aio.connect(b.address) as db:
            got = await db.receive(da.send("s1"), "aio-s1")  # async iterable, piped
            assert got.name == "aio-s1"
            assert await db.digest("aio-s1") == await da.digest("s1")
            data = io.BytesIO()
            await da.send_to(data, "s2")
            with pytest.raises(cowkv.DataLoss):
                await db.receive(io.BytesIO(data.getvalue()[:len(data.getvalue()) // 2]),
                                 "aio-cut", resumable=True)
            p = next(p for p in await db.partial_receives() if p.name == "aio-cut")
            with pytest.raises(cowkv.InvalidArgument) as ei:
                async for _ in da.send("", resume_token=p.token[:-4] + "AAAA"):
                    pass
            assert ei.value.reason == "RESUME_TOKEN"
            got = await db.receive(da.send("", resume_token=p.token))
            assert got.name == "aio-cut" and await db.digest("aio-cut") == await da.digest("s2")
            with pytest.raises(cowkv.NotFound):
                await db.abort_receive("aio-cut")
    asyncio.run(body())
