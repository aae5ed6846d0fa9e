"""Interactive transactions against a live cowkvd: commit on leaving the
block, abort on an exception, own-write visibility, a forced conflict that
surfaces as Conflict and succeeds under run_in_transaction, concurrent
increments, lease expiry and the per-client handle limit."""

from __future__ import annotations

import threading
import time
from typing import List

import pytest

import cowkv


def test_commit_on_exit(sv: cowkv.Subvolume) -> None:
    sv.put("n", "1")
    with sv.begin() as tx:
        assert tx.read_revision > 0 and tx.lease_ms > 0
        n = int(tx.get("n"))
        tx.put("n", str(n + 1))
        tx.put("m", "x")
        assert sv.get("n") == b"1"  # buffered until commit
    assert tx.state is cowkv.TransactionState.COMMITTED and tx.revision is not None
    assert sv.get("n") == b"2"
    assert sv.get_kv("m").mod_revision == tx.revision


def test_abort_on_exception(sv: cowkv.Subvolume) -> None:
    with pytest.raises(RuntimeError):
        with sv.begin() as tx:
            tx.put("k", "v")
            raise RuntimeError("boom")
    assert tx.state is cowkv.TransactionState.ABORTED
    assert sv.get("k", default=None) is None


def test_explicit_abort_and_finished_handle(sv: cowkv.Subvolume) -> None:
    tx = sv.begin()
    tx.put("k", "v")
    tx.abort()
    tx.abort()  # idempotent
    assert sv.get("k", default=None) is None
    with pytest.raises(cowkv.NotFound):  # a finished handle, as the server says
        tx.put("k", "v")


def test_transaction_is_a_deprecated_alias_of_begin(sv: cowkv.Subvolume) -> None:
    with pytest.warns(DeprecationWarning, match="use begin"):
        with sv.transaction() as tx:
            tx.put("k", "v")
    assert sv.get("k") == b"v"


def test_reads_see_own_writes(sv: cowkv.Subvolume) -> None:
    sv.put("a/1", "x")
    sv.put("a/2", "x")
    with sv.begin() as tx:
        tx.put("a/3", "y")
        tx.delete("a/1")
        assert [kv.key for kv in tx.range(prefix="a/")] == [b"a/2", b"a/3"]
        assert tx.count(prefix="a/") == 2
        assert tx.get("a/3") == b"y"
        assert tx.get("a/1", default=None) is None
        with pytest.raises(cowkv.NotFound):
            tx.get_kv("a/1")
        tx.delete_range("a/", "a/3")
    assert [kv.key for kv in sv.range(prefix="a/")] == [b"a/3"]


def test_range_in_transaction_pages(sv: cowkv.Subvolume) -> None:
    sv.txn(success=[cowkv.Put(f"k{i:03}", "v") for i in range(25)])
    with sv.begin() as tx:
        it = tx.range(prefix="k", page_size=10)
        assert len(list(it)) == 25 and it.pages == 3


def test_forced_conflict_raises_conflict(sv: cowkv.Subvolume) -> None:
    sv.put("balance", "10")
    with pytest.raises(cowkv.Conflict) as e:
        with sv.begin() as tx:
            b = int(tx.get("balance"))
            sv.put("balance", "100")  # another writer changes what tx read
            tx.put("balance", str(b - 1))
    assert e.value.retry_transaction and e.value.code is not None
    assert e.value.code.name == "ABORTED"
    assert tx.state is cowkv.TransactionState.ABORTED
    assert sv.get("balance") == b"100"


def test_run_in_transaction_retries_a_conflict(sv: cowkv.Subvolume) -> None:
    sv.put("balance", "10")
    attempts: List[int] = []

    def withdraw(tx: cowkv.Transaction) -> int:
        b = int(tx.get("balance"))
        attempts.append(b)
        if len(attempts) == 1:
            sv.put("balance", "100")  # conflict on the first attempt only
        tx.put("balance", str(b - 1))
        return b - 1

    assert sv.run_in_transaction(withdraw) == 99
    assert attempts == [10, 100]
    assert sv.get("balance") == b"99"


def test_run_in_transaction_gives_up(sv: cowkv.Subvolume) -> None:
    sv.put("k", "0")

    def always_conflicts(tx: cowkv.Transaction) -> None:
        tx.get("k")
        sv.put("k", "changed")
        tx.put("k", "mine")

    with pytest.raises(cowkv.Conflict):
        sv.run_in_transaction(always_conflicts, max_attempts=3, backoff_s=0.001)
    assert sv.get("k") == b"changed"


def test_concurrent_increments(client: cowkv.Client, sv: cowkv.Subvolume) -> None:
    sv.put("counter", "0")
    threads, per_thread = 4, 15

    def worker() -> None:
        for _ in range(per_thread):
            sv.run_in_transaction(lambda tx: tx.put("counter", str(int(tx.get("counter")) + 1)),
                                  max_attempts=101)

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert int(sv.get("counter")) == threads * per_thread


def test_lease_expiry(sv: cowkv.Subvolume) -> None:
    tx = sv.begin(lease_ms=200)
    assert tx.lease_ms == 200
    tx.put("k", "v")
    time.sleep(0.6)
    with pytest.raises(cowkv.Conflict) as e:
        tx.commit()
    assert "expired" in e.value.message
    assert sv.get("k", default=None) is None


def test_bad_lease(sv: cowkv.Subvolume) -> None:
    with pytest.raises(cowkv.InvalidArgument):
        sv.begin(lease_ms=600_001)


def test_open_transaction_limit_is_resource_exhausted(client: cowkv.Client) -> None:
    # 256 per client address, whatever its connections: a second connection
    # of this process shares them.
    c = cowkv.connect(client.address, wait_ready=10)
    other = cowkv.connect(client.address, wait_ready=10)
    sv = c.subvolume("default")
    open_txns = []
    try:
        with pytest.raises(cowkv.ResourceExhausted) as e:
            for _ in range(257):
                open_txns.append(sv.begin())
        assert not isinstance(e.value, cowkv.NoSpace)
        assert len(open_txns) == 256
        with pytest.raises(cowkv.ResourceExhausted):
            other.subvolume("default").begin()
    finally:
        for tx in open_txns:
            tx.abort()
        c.close()
        other.close()
