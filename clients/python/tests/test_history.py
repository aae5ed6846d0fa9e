"""Reads at a past revision, compaction and transactions at their read
revision (issue 18) against a live cowkvd: get/range with ``revision``,
``compact``, :class:`cowkv.Compacted` carrying the compact revision from the
server's ErrorInfo, and read-only transactions that commit under writes."""

from __future__ import annotations

import pytest

import cowkv


def test_get_and_range_at_a_revision(sv: cowkv.Subvolume) -> None:
    r1 = sv.put("a", "1")
    r2 = sv.put("a", "2")
    r3 = sv.put("b", "x")
    r4 = sv.delete("a")
    assert r4 is not None
    assert sv.get("a", revision=r1) == b"1"
    assert sv.get_kv("a", revision=r3).mod_revision == r2
    assert sv.get("a", default=None, revision=r4) is None
    assert sv.get("a", default=None) is None
    assert [kv.key for kv in sv.range(revision=r3)] == [b"a", b"b"]
    # Every page at the same revision, even with writes in between.
    it = sv.range(revision=r3, page_size=1)
    first = next(it)
    sv.put("c", "later")
    assert [first.key] + [kv.key for kv in it] == [b"a", b"b"]
    page = sv.range_page(revision=r2, limit=10)
    assert page.revision == r2 and [kv.value for kv in page.kvs] == [b"2"]


def test_compact_and_compacted_error(sv: cowkv.Subvolume) -> None:
    r1 = sv.put("k", "1")
    r2 = sv.put("k", "2")
    assert sv.compact(r2) == r2
    assert sv.get("k", revision=r2) == b"2"
    with pytest.raises(cowkv.Compacted) as e:
        sv.get("k", revision=r1)
    assert e.value.compact_revision == r2
    assert e.value.reason == "COMPACTED"
    assert isinstance(e.value, cowkv.TooOld)
    with pytest.raises(cowkv.Compacted):
        list(sv.range(revision=r1))
    with pytest.raises(cowkv.Compacted):
        sv.compact(r1)
    with pytest.raises(cowkv.FutureRevision):
        sv.get("k", revision=r2 + 1_000_000)


def test_read_only_transaction_commits_under_writes(sv: cowkv.Subvolume) -> None:
    sv.put("acct/a", "50")
    sv.put("acct/b", "50")
    with sv.begin() as tx:
        a = tx.get("acct/a")
        sv.put("acct/a", "40")  # a transfer commits meanwhile
        sv.put("acct/b", "60")
        b = tx.get("acct/b")
        total = sum(int(kv.value) for kv in tx.range(prefix="acct/"))
        assert (a, b, total) == (b"50", b"50", 100)
    # A read-write transaction still conflicts at commit.
    tx2 = sv.begin()
    tx2.get("acct/a")
    sv.put("acct/a", "30")
    tx2.put("acct/c", "x")
    with pytest.raises(cowkv.Conflict):
        tx2.commit()
