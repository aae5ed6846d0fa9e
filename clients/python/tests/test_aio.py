"""cowkv.aio against a live cowkvd: every KV call, the one-shot and
interactive transactions (run_in_transaction under contention), leases
with the keep-alive task, the same error classes as the synchronous client,
per-call timeouts (a short one raises DeadlineExceeded against a stopped
server, in both clients; every call takes one),
watch events equal to a model over a random walk, and a watch ending
cleanly on break, cancel() and task cancellation (checked on a server that
allows 3 calls per client, which a leaked stream would exhaust). Plain
tests around asyncio.run: no pytest plugin."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import io
import inspect
import pathlib
import random
import signal
import time
from typing import Any, Awaitable, Callable, Dict, Iterator, List, Optional, Tuple, TypeVar

import pytest

import cowkv
import cowkv.aio
from conftest import Server

T = TypeVar("T")
Body = Callable[[cowkv.aio.Client], Awaitable[T]]


def run(address: str, body: Body[T], timeout: float = 60.0) -> T:
    """Runs ``body(db)`` on a fresh event loop and aio client."""
    async def main() -> T:
        async with cowkv.aio.connect(address, timeout=timeout, wait_ready=30.0) as db:
            return await body(db)
    return asyncio.run(main())


# KV.


def test_kv_calls(server: Server, sv: cowkv.Subvolume) -> None:
    async def body(db: cowkv.aio.Client) -> None:
        a = db.subvolume(sv.name)
        r1 = await a.put("k1", b"v1")
        r2 = await a.put(b"k2", "v2", durability=cowkv.Durability.DURABLE)
        assert r2 > r1
        assert await a.get("k1") == b"v1"
        kv, rev = await a.get_with_revision("k2")
        assert (kv.key, kv.value, kv.version, kv.mod_revision) == (b"k2", b"v2", 1, r2)
        assert rev >= r2
        await a.put("k1", b"v1b")
        assert (await a.get("k1", revision=r1)) == b"v1"  # from the history
        assert (await a.get_kv("k1")).version == 2
        with pytest.raises(cowkv.NotFound):
            await a.get("missing")
        assert await a.get("missing", default=None) is None
        assert await a.delete("missing", missing_ok=True) is None
        with pytest.raises(cowkv.NotFound):
            await a.delete("missing")
        assert await a.delete("k2") is not None
        assert sv.get("k2", default=None) is None  # the sync client sees it
    run(server.address, body)


def test_range_pages_and_deletes(server: Server, sv: cowkv.Subvolume) -> None:
    keys = [f"r/{i:03d}".encode() for i in range(25)]
    for k in keys:
        sv.put(k, k)
    sv.put("s", "outside")

    async def body(db: cowkv.aio.Client) -> None:
        a = db.subvolume(sv.name)
        it = a.range(prefix="r/", page_size=4)
        got = [kv.key async for kv in it]
        assert got == keys and it.pages == 7 and it.revision is not None
        assert [kv.key async for kv in a.range("r/005", "r/009")] == keys[5:9]
        rev = [kv.key async for kv in a.range(prefix="r/", reverse=True, limit=5, page_size=2)]
        assert rev == keys[::-1][:5]
        assert all(kv.value == b"" for kv in await a.range(prefix="r/", keys_only=True).to_list())
        page = await a.range_page(prefix="r/", limit=10)
        assert [kv.key for kv in page.kvs] == keys[:10] and page.more
        page2 = await a.range_page(prefix="r/", limit=10, page_token=page.next_page_token)
        assert [kv.key for kv in page2.kvs] == keys[10:20]
        assert await a.count(prefix="r/") == 25
        assert await a.delete_range("r/000", "r/010") == 10
        n, drev = await a.delete_range_with_revision(prefix="r/")
        assert n == 15 and drev > 0
        with pytest.raises(cowkv.InvalidArgument):
            await a.delete_range()  # no bound: refused before a call
        assert await a.count(prefix="r/") == 0
        assert await a.get("s") == b"outside"
    run(server.address, body)


def test_txn_and_compact(server: Server, sv: cowkv.Subvolume) -> None:
    async def body(db: cowkv.aio.Client) -> None:
        a = db.subvolume(sv.name)
        r = await a.txn([cowkv.Missing("lock")], [cowkv.Put("lock", "me"), cowkv.Get("x")],
                        [cowkv.Get("lock")])
        assert r.succeeded and isinstance(r.responses[0], cowkv.PutResult)
        r2 = await a.txn([cowkv.Missing("lock")], [cowkv.Put("lock", "you")],
                         [cowkv.Get("lock")])
        assert not r2.succeeded
        got = r2.responses[0]
        assert isinstance(got, cowkv.RangeResult) and got.value == b"me"
        r3 = await a.txn([cowkv.Value("lock") == b"me"], [cowkv.Delete("lock")])
        assert r3.succeeded and r3.responses == [cowkv.DeleteResult(1)]
        old = await a.put("h", "1")
        new = await a.put("h", "2")
        assert await a.compact(new) == new
        with pytest.raises(cowkv.Compacted) as e:
            await a.get("h", revision=old)
        assert e.value.compact_revision == new
        with pytest.raises(cowkv.FutureRevision):
            await a.get("h", revision=new + 1000)
    run(server.address, body)


def test_errors_are_the_sync_clients(server: Server, client: cowkv.Client,
                                     sv: cowkv.Subvolume) -> None:
    import cowkv.aio._rpc as aio_rpc
    import cowkv._rpc as sync_rpc
    for shared in ("from_rpc_error", "check_request"):  # one mapping, one validation
        assert getattr(aio_rpc, shared) is getattr(sync_rpc, shared)
    sv.put("k", "v")
    client.snapshot(sv.name, sv.name + "@ro", read_only=True)
    ro = client.subvolume(sv.name + "@ro")
    cases: List[Tuple[Callable[[], Any], Callable[[cowkv.aio.Client], Awaitable[Any]]]] = [
        (lambda: client.subvolume("no-such").get("k"),
         lambda db: db.subvolume("no-such").get("k")),
        (lambda: client.create_subvolume(sv.name), lambda db: db.create_subvolume(sv.name)),
        (lambda: ro.put("k", "w"), lambda db: db.subvolume(ro.name).put("k", "w")),
        (lambda: sv.get(b""), lambda db: db.subvolume(sv.name).get(b"")),
        (lambda: sv.put("k", b"x" * (17 << 20)),
         lambda db: db.subvolume(sv.name).put("k", b"x" * (17 << 20))),
        (lambda: sv.leases.revoke(987654),
         lambda db: db.subvolume(sv.name).leases.revoke(987654)),
    ]
    for sync_call, aio_call in cases:
        with pytest.raises(cowkv.CowkvError) as se:
            sync_call()

        async def body(db: cowkv.aio.Client) -> cowkv.CowkvError:
            with pytest.raises(cowkv.CowkvError) as ae:
                await aio_call(db)
            return ae.value
        ae = run(server.address, body)
        assert type(ae) is type(se.value), (se.value, ae)
        assert (ae.code, ae.reason, ae.errno_name) == (se.value.code, se.value.reason,
                                                       se.value.errno_name)
    assert isinstance(ae, cowkv.NotFound)


# Timeouts.


@pytest.fixture(scope="module")
def stalled_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A cowkvd of its own that the timeout tests stop (SIGSTOP) meanwhile:
    a call to it cannot finish, so any timeout passes (against a running
    server on loopback a call of a few microseconds often beats even a
    1 µs deadline: gRPC fails a call only when its timer fires first)."""
    srv = Server(tmp_path_factory.mktemp("cowkvd-stalled") / "cowkv.img").start()
    yield srv
    assert srv.stop() == 0, "".join(srv.log)


def _wait_all_threads_stopped(pid: int, timeout: float = 10.0) -> None:
    """SIGSTOP takes effect when each thread is next scheduled: on a busy
    machine a call made at once can still be answered. Waits until every
    thread of `pid` is in state T."""
    deadline = time.monotonic() + timeout
    while True:
        states = []
        for task in pathlib.Path(f"/proc/{pid}/task").iterdir():
            try:
                stat = (task / "stat").read_text()
            except FileNotFoundError:
                continue  # a thread that just ended
            states.append(stat[stat.rindex(")") + 2])
        if states and all(st in "Tt" for st in states):
            return
        assert time.monotonic() < deadline, f"cowkvd {pid} did not stop: {states}"
        time.sleep(0.005)


@contextlib.contextmanager
def stopped(srv: Server) -> Iterator[None]:
    assert srv.proc is not None
    srv.proc.send_signal(signal.SIGSTOP)
    _wait_all_threads_stopped(srv.proc.pid)
    try:
        yield
    finally:
        srv.proc.send_signal(signal.SIGCONT)


TINY = 0.05  # seconds: the calls below must fail after about this long


def _fails_fast(call: Callable[[], Any]) -> None:
    t0 = time.monotonic()
    with pytest.raises(cowkv.DeadlineExceeded):
        call()
    assert time.monotonic() - t0 < 10  # the call's timeout, not the client's 60 s


def test_sync_calls_take_a_timeout(stalled_server: Server) -> None:
    client = cowkv.connect(stalled_server.address, timeout=60.0, wait_ready=30.0)
    client.create_subvolume("sync")
    sv = client.subvolume("sync")
    sv.put("k", "v")
    lease = sv.leases.grant(60)
    with stopped(stalled_server):
        _fails_fast(lambda: sv.get("k", timeout=TINY))
        _fails_fast(lambda: sv.put("k", "w", timeout=TINY))
        _fails_fast(lambda: list(sv.range(prefix="k", timeout=TINY)))
        _fails_fast(lambda: sv.txn(success=[cowkv.Put("k", "w")], timeout=TINY))
        _fails_fast(lambda: sv.begin(timeout=TINY))
        _fails_fast(lambda: sv.leases.grant(10, timeout=TINY))
        _fails_fast(lambda: sv.leases.keep_alive(lease, timeout=TINY))
        _fails_fast(lambda: client.show_subvolume("sync", timeout=TINY))
        _fails_fast(lambda: sv.files.stat("/", timeout=TINY))
        _fails_fast(lambda: sv.files.listdir("/", timeout=TINY))
        _fails_fast(lambda: sv.files.write_bytes("/f", b"x", timeout=TINY))  # a stream
        _fails_fast(lambda: sv.files.download("/f", io.BytesIO(), timeout=TINY))
        _fails_fast(lambda: next(iter(sv.watch("k", timeout=TINY))))
    assert sv.get("k", timeout=30.0) in (b"v", b"w")  # the server serves again
    client.close()


def test_aio_calls_take_a_timeout(stalled_server: Server) -> None:
    async def body(db: cowkv.aio.Client) -> None:
        await db.create_subvolume("aio")
        a = db.subvolume("aio")
        await a.put("k", "v")
        lease = await a.leases.grant(60)
        calls: List[Callable[[], Awaitable[Any]]] = [
            lambda: a.get("k", timeout=TINY), lambda: a.put("k", "w", timeout=TINY),
            lambda: a.delete("k", timeout=TINY), lambda: a.count(prefix="k", timeout=TINY),
            lambda: a.range(prefix="k", timeout=TINY).to_list(),
            lambda: a.range_page(prefix="k", timeout=TINY),
            lambda: a.delete_range(prefix="k", timeout=TINY),
            lambda: a.txn(success=[cowkv.Put("k", "w")], timeout=TINY),
            lambda: a.compact(1, timeout=TINY),
            lambda: a.begin(timeout=TINY).begin(),
            lambda: a.leases.grant(10, timeout=TINY), lambda: a.leases.list(timeout=TINY),
            lambda: a.leases.time_to_live(lease, timeout=TINY),
            lambda: a.leases.keep_alive(lease, timeout=TINY),
            lambda: a.watch("k", timeout=TINY).start(),
            lambda: db.show_subvolume("aio", timeout=TINY), lambda: db.version(timeout=TINY),
        ]
        with stopped(stalled_server):
            for call in calls:
                t0 = time.monotonic()
                with pytest.raises(cowkv.DeadlineExceeded):
                    await call()
                assert time.monotonic() - t0 < 10
        assert await a.get("k", timeout=30.0) in (b"v", b"w")
        async with a.watch("quiet", timeout=0.3) as w:  # the stream's deadline
            t0 = time.monotonic()
            with pytest.raises(cowkv.DeadlineExceeded):
                await w.__anext__()
            assert time.monotonic() - t0 < 10
    run(stalled_server.address, body)


def test_the_connect_timeout_is_the_default(stalled_server: Server) -> None:
    async def main() -> None:
        async with cowkv.aio.connect(stalled_server.address, timeout=TINY,
                                     wait_ready=30.0) as db:
            a = db.subvolume("default")
            with pytest.raises(cowkv.NotFound):
                await a.get("none", timeout=30.0)
            with stopped(stalled_server):
                with pytest.raises(cowkv.DeadlineExceeded):
                    await a.get("none")
            with pytest.raises(cowkv.NotFound):  # a call's own timeout wins
                await a.get("none", timeout=30.0)
    asyncio.run(main())


_NO_TIMEOUT = {"subvolume", "lock", "keep_alive_thread", "keep_alive_task", "close", "begin",
               "wait_ready"}


@pytest.mark.parametrize("cls", [cowkv.Client, cowkv.Subvolume, cowkv.Transaction,
                                 cowkv.Leases, cowkv.Files, cowkv.aio.Client,
                                 cowkv.aio.Subvolume, cowkv.aio.Transaction, cowkv.aio.Leases])
def test_every_call_takes_a_timeout(cls: type) -> None:
    """Every public method that makes a call takes ``timeout`` (Files: all
    but the two that hand out or use a file object)."""
    composite = {"open", "read_bytes"}
    missing = []
    for name, fn in inspect.getmembers(cls, inspect.isfunction):
        if name.startswith("_") or name in _NO_TIMEOUT or (cls is cowkv.Files and
                                                           name in composite):
            continue
        if "timeout" not in inspect.signature(fn).parameters:
            missing.append(name)
    assert missing == []


# Watch.


def _apply(sv: cowkv.Subvolume, rng: random.Random, model: Dict[bytes, bytes],
           keys: List[bytes]) -> List[Tuple[int, List[Tuple[str, bytes, bytes, Optional[bytes]]]]]:
    """One random change through the sync client; returns the events the
    watcher of prefix p/ must see: (revision, sorted [(type, key, value, prev)])."""
    kind = rng.choice(["put", "put", "delete", "txn", "delete_range", "outside"])
    if kind == "outside":
        sv.put("q/" + str(rng.random()), "x")
        return []
    if kind == "put":
        k, v = rng.choice(keys), str(rng.random()).encode()
        rev, evs = sv.put(k, v), [("PUT", k, v, model.get(k))]
        model[k] = v
    elif kind == "delete":
        k = rng.choice(keys)
        got = sv.delete(k, missing_ok=True)
        if got is None:
            return []
        rev, evs = got, [("DELETE", k, b"", model.pop(k))]
    elif kind == "txn":
        ks = rng.sample(keys, 3)
        ops, evs = [], []
        for k in ks:
            if k in model and rng.random() < 0.4:
                ops.append(cowkv.Delete(k))
                evs.append(("DELETE", k, b"", model.pop(k)))
            else:
                v = str(rng.random()).encode()
                ops.append(cowkv.Put(k, v))
                evs.append(("PUT", k, v, model.get(k)))
                model[k] = v
        rev = sv.txn(success=ops).revision
    else:
        lo, hi = sorted(rng.sample(keys, 2))
        gone = sorted(k for k in model if lo <= k < hi)
        n, rev = sv.delete_range_with_revision(lo, hi)
        assert n == len(gone)
        if not gone:
            return []
        evs = [("DELETE", k, b"", model.pop(k)) for k in gone]
    return [(rev, sorted(evs, key=lambda e: e[1]))]


def test_watch_events_equal_a_model(server: Server, sv: cowkv.Subvolume) -> None:
    rng = random.Random(20)
    keys = [f"p/{i}".encode() for i in range(8)]
    model: Dict[bytes, bytes] = {}

    async def body(db: cowkv.aio.Client) -> None:
        async with db.subvolume(sv.name).watch(b"p/", prefix=True, prev_kv=True) as w:
            want = []
            for _ in range(150):  # the sync client writes, the aio one watches
                want += await asyncio.to_thread(_apply, sv, rng, model, keys)
            n = sum(len(evs) for _, evs in want)
            got: List[cowkv.WatchEvent] = []
            while len(got) < n:
                got.append(await asyncio.wait_for(w.__anext__(), 10))
        revisions = sorted({ev.revision for ev in got})
        assert revisions == [rev for rev, _ in want]  # in revision order, none extra
        assert [ev.revision for ev in got] == sorted(ev.revision for ev in got)
        by_rev: Dict[int, List[Tuple[str, bytes, bytes, Optional[bytes]]]] = {}
        for ev in got:
            by_rev.setdefault(ev.revision, []).append(
                (ev.type.value, ev.kv.key, ev.kv.value,
                 ev.prev_kv.value if ev.prev_kv else None))
        assert [(r, sorted(evs, key=lambda e: e[1])) for r, evs in by_rev.items()] == want
    run(server.address, body)


async def _first(w: cowkv.aio.Watch) -> cowkv.WatchEvent:
    async for ev in w:
        return ev
    raise AssertionError("the watch ended without an event")


def test_watch_replay_compacted_deleted_refused(server: Server, client: cowkv.Client,
                                                sv: cowkv.Subvolume) -> None:
    r1 = sv.put("h", "1")
    sv.put("h", "2")
    r3 = sv.put("h", "3")

    async def body(db: cowkv.aio.Client) -> None:
        a = db.subvolume(sv.name)
        vals = []
        async for ev in a.watch("h", start_revision=r1):  # bare: created at the first step
            vals.append(ev.kv.value)
            if len(vals) == 3:
                break
        assert vals == [b"1", b"2", b"3"]
        await a.compact(r3)
        with pytest.raises(cowkv.Compacted) as e:
            await _first(a.watch("h", start_revision=r1))
        assert e.value.compact_revision == r3 + 1 and e.value.reason == "COMPACTED"
        with pytest.raises(cowkv.NotFound):
            await _first(db.subvolume("no-such-subvolume").watch("k"))
        with pytest.raises(cowkv.InvalidArgument):
            await _first(a.watch("b", range_end="a"))
        with pytest.raises(cowkv.InvalidArgument):
            a.watch("a", prefix=True, range_end="b")
        await db.create_subvolume(sv.name + "-doomed")
        doomed = db.subvolume(sv.name + "-doomed")
        w = await doomed.watch("k")
        await doomed.put("k", "v")
        assert (await w.__anext__()).kv.value == b"v"
        await db.delete_subvolume(doomed.name)
        with pytest.raises(cowkv.WatchCanceled) as c:
            await w.__anext__()
        assert c.value.cancel_code == "WATCH_CANCEL_SUBVOLUME_DELETED"
    run(server.address, body)


@pytest.fixture(scope="module")
def narrow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A cowkvd that allows 3 calls in flight per client: a watch stream
    left open after its end would soon exhaust them."""
    srv = Server(tmp_path_factory.mktemp("cowkvd-narrow") / "cowkv.img",
                 "--max-calls-per-client", "3").start()
    yield srv
    assert srv.stop() == 0, "".join(srv.log)


async def _open(sv: cowkv.aio.Subvolume, key: str) -> cowkv.aio.Watch:
    """Creates a watcher, waiting (5 s at most) for the server to release
    the streams just ended; a leaked one never is."""
    deadline = time.monotonic() + 5
    while True:
        try:
            return await sv.watch(key)
        except cowkv.ResourceExhausted:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.02)


def test_watch_ends_cleanly_on_break_cancel_and_task_cancel(narrow_server: Server) -> None:
    async def body(db: cowkv.aio.Client) -> None:
        await db.create_subvolume("w")
        a = db.subvolume("w")
        for i in range(8):
            async with await _open(a, "k") as w:  # break out of an async with
                await a.put("k", str(i))
                async for ev in w:
                    assert ev.kv.value == str(i).encode()
                    break
            w = await _open(a, "k")  # break out of a bare loop, then drop it
            await a.put("k", "x")
            async for ev in w:
                break
            call = w._call
            del w
            gc.collect()
            assert call.done()
            w = await _open(a, "quiet")  # cancel() from another task
            asyncio.get_running_loop().call_later(0.05, w.cancel)
            assert [ev async for ev in w] == []
            w = await _open(a, "quiet")  # the iterating task is cancelled

            async def consume(w: cowkv.aio.Watch = w) -> None:
                async for _ in w:
                    pass
            task = asyncio.create_task(consume())
            await asyncio.sleep(0.05)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert w._call.done()
        await a.put("k", "still served")  # the client's calls are not exhausted
    run(narrow_server.address, body)


# Leases.


def test_leases_and_keep_alive_task(server: Server, sv: cowkv.Subvolume) -> None:
    async def body(db: cowkv.aio.Client) -> None:
        a = db.subvolume(sv.name)
        lease = await a.leases.grant(60, id=777)
        with pytest.raises(cowkv.AlreadyExists):
            await a.leases.grant(60, id=777)
        await a.put("a", "1", lease=lease)
        info = await a.leases.time_to_live(lease, keys=True)
        assert info.granted_ttl == 60 and info.keys == [b"a"]
        assert await a.leases.keep_alive(lease) == 60
        assert await a.leases.list() == [lease]
        short = await a.leases.grant(2)
        await a.put("b", "2", lease=short)
        async with a.leases.keep_alive_task(short) as ka:
            await asyncio.sleep(3.5)  # past the TTL: kept alive meanwhile
            assert ka.renewals >= 2 and not ka.lost and ka.error is None
        assert await a.get("b") == b"2"
        rev = await a.leases.revoke(lease)
        assert rev > 0 and await a.get("a", default=None) is None
        with pytest.raises(cowkv.NotFound):
            await a.leases.revoke(lease)
        with pytest.raises(cowkv.NotFound):
            await a.leases.keep_alive(lease)
        gone = a.leases.keep_alive_task(lease).start()
        for _ in range(100):
            if gone.done:
                break
            await asyncio.sleep(0.05)
        assert gone.lost and gone.done
        await gone.stop()
        await a.leases.revoke(short)
    run(server.address, body)


# Interactive transactions.


def test_interactive_transactions(server: Server, sv: cowkv.Subvolume) -> None:
    async def body(db: cowkv.aio.Client) -> None:
        a = db.subvolume(sv.name)
        await a.put("x", "1")
        async with a.begin() as tx:
            assert await tx.get("x") == b"1" and await tx.get("y", b"none") == b"none"
            await tx.put("y", "2")
            await tx.delete("x")
            assert [kv.key async for kv in tx.range(prefix="")] == [b"y"]  # own writes
            assert await tx.count(prefix="") == 1
        assert tx.state is cowkv.TransactionState.COMMITTED and tx.revision
        assert await a.get("y") == b"2" and await a.get("x", default=None) is None
        with pytest.raises(RuntimeError):
            async with a.begin() as t2:
                await t2.put("y", "never")
                raise RuntimeError("abort")
        assert t2.state is cowkv.TransactionState.ABORTED and await a.get("y") == b"2"
        with pytest.raises(cowkv.NotFound):
            await t2.put("y", "finished")
        t3 = await a.begin()  # begun without a block
        await t3.get("y")
        await a.put("y", "3")  # changes what t3 read
        await t3.put("z", "1")
        with pytest.raises(cowkv.Conflict):
            await t3.commit()
    run(server.address, body)


def test_run_in_transaction_under_contention(server: Server, sv: cowkv.Subvolume) -> None:
    tasks, rounds = 6, 5
    runs = [0]

    async def body(db: cowkv.aio.Client) -> None:
        a = db.subvolume(sv.name)

        async def incr(tx: cowkv.aio.Transaction) -> int:
            runs[0] += 1
            n = int(await tx.get("n", b"0")) + 1
            await asyncio.sleep(0)  # let the others read the same n
            await tx.put("n", str(n))
            return n

        async def worker() -> None:
            for _ in range(rounds):
                await a.run_in_transaction(incr, max_attempts=101)
        await asyncio.gather(*(worker() for _ in range(tasks)))
        assert await a.get("n") == str(tasks * rounds).encode()
    run(server.address, body)
    assert runs[0] > tasks * rounds  # some ran again after a Conflict
