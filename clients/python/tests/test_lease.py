"""Leases and the Lock helper against a live cowkvd: grant, put with a
lease (also in a Txn), time-to-live with keys, keep-alive (one call and the
helper thread), list, revoke deleting every key in one revision, expiry,
unknown leases as NotFound, and a Lock that two threads never hold at once."""

from __future__ import annotations

import threading
import time
from typing import List

import pytest

import cowkv


def test_grant_put_revoke(sv: cowkv.Subvolume) -> None:
    lease = sv.leases.grant(60, id=4242)
    assert lease == 4242
    with pytest.raises(cowkv.AlreadyExists):
        sv.leases.grant(60, id=4242)
    sv.put("a", b"1", lease=lease)
    sv.txn(success=[cowkv.Put("b", b"2", lease=lease)])
    sv.put("c", b"3", lease=lease)
    sv.put("c", b"3")  # a put without the lease detaches it
    info = sv.leases.time_to_live(lease, keys=True)
    assert info.granted_ttl == 60 and 0 < info.ttl <= 60
    assert info.keys == [b"a", b"b"]
    assert sv.leases.keep_alive(lease) == 60
    assert sv.leases.list() == [lease]
    before = sv.get_with_revision("c")[1]
    rev = sv.leases.revoke(lease)
    assert rev == before + 1  # both keys in one revision
    assert sv.get("a", default=None) is None
    assert sv.get("b", default=None) is None
    assert sv.get("c") == b"3"
    assert sv.leases.list() == []


def test_unknown_lease(sv: cowkv.Subvolume) -> None:
    with pytest.raises(cowkv.NotFound, match="lease 77 not found"):
        sv.put("k", b"v", lease=77)
    with pytest.raises(cowkv.NotFound):
        sv.leases.revoke(77)
    with pytest.raises(cowkv.NotFound):
        sv.leases.keep_alive(77)
    with pytest.raises(cowkv.NotFound):
        sv.leases.time_to_live(77)
    with pytest.raises(cowkv.InvalidArgument):
        sv.leases.grant(0)
    assert sv.get("k", default=None) is None


def test_expiry_and_keep_alive_thread(sv: cowkv.Subvolume) -> None:
    kept = sv.leases.grant(1)
    gone = sv.leases.grant(1)
    sv.put("kept", b"1", lease=kept)
    sv.put("gone", b"1", lease=gone)
    with sv.leases.keep_alive_thread(kept) as keeper:
        deadline = time.monotonic() + 10
        while sv.get("gone", default=None) is not None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert sv.get("gone", default=None) is None
        time.sleep(1.5)
        assert sv.get("kept") == b"1"
        assert not keeper.lost
    with pytest.raises(cowkv.NotFound):
        sv.leases.time_to_live(gone)


def test_lock_excludes(sv: cowkv.Subvolume) -> None:
    trace: List[str] = []
    mu = threading.Lock()

    def worker(n: int) -> None:
        with sv.lock("jobs", ttl=10):
            with mu:
                trace.append(f"in{n}")
            time.sleep(0.3)
            with mu:
                trace.append(f"out{n}")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(trace) == 6
    for i in range(0, 6, 2):
        assert trace[i].startswith("in") and trace[i + 1] == "out" + trace[i][2:], trace
    assert list(sv.range(prefix="jobs/")) == []
    assert sv.leases.list() == []


def test_lock_timeout(sv: cowkv.Subvolume) -> None:
    with sv.lock("one"):
        other = sv.lock("one")
        assert other.acquire(timeout=0.3) is False
    assert sv.leases.list() == []
