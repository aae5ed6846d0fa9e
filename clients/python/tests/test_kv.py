"""The key space against a live cowkvd: get/put/delete with revisions,
durability, paged ranges, delete_range, one-shot Txn, and their errors."""

from __future__ import annotations

import pytest

import cowkv
from cowkv.v1 import kv_pb2


def test_put_get_delete_revisions(sv: cowkv.Subvolume) -> None:
    r1 = sv.put("k", "v1")
    r2 = sv.put(b"k", b"v2")
    assert r2 > r1
    kv = sv.get_kv("k")
    assert (kv.value, kv.create_revision, kv.mod_revision, kv.version) == (b"v2", r1, r2, 2)
    assert sv.get("k") == b"v2"
    r3 = sv.delete("k")
    assert r3 is not None and r3 > r2
    with pytest.raises(cowkv.NotFound):
        sv.get("k")
    assert sv.get("k", default=None) is None
    with pytest.raises(cowkv.NotFound):
        sv.delete("k")
    assert sv.delete("k", missing_ok=True) is None


def test_binary_keys_and_empty_values(sv: cowkv.Subvolume) -> None:
    sv.put(b"\xff\x00\x01", b"")
    assert sv.get(b"\xff\x00\x01") == b""
    sv.put("ключ", "значение")
    assert sv.get("ключ").decode() == "значение"


def test_durability_modes(client: cowkv.Client, sv: cowkv.Subvolume) -> None:
    before = client.stats()["durable_commits"]
    sv.put("d", "1", durability=cowkv.Durability.DURABLE)
    sv.put("a", "1", durability=cowkv.Durability.ASYNC)
    assert client.stats()["durable_commits"] >= before + 1
    assert sv.get("a") == b"1"


def test_bad_keys(sv: cowkv.Subvolume) -> None:
    with pytest.raises(cowkv.InvalidArgument):
        sv.put(b"", b"v")
    with pytest.raises(cowkv.InvalidArgument):
        sv.put(b"k" * 1025, b"v")
    with pytest.raises(cowkv.InvalidArgument):
        sv.get(b"")


def test_range_pages_through(sv: cowkv.Subvolume) -> None:
    sv.txn(success=[cowkv.Put(f"p/{i:04}", str(i)) for i in range(250)])
    sv.put("q", "outside")
    it = sv.range(prefix="p/", page_size=40)
    keys = [kv.key for kv in it]
    assert keys == [f"p/{i:04}".encode() for i in range(250)]
    assert it.pages == 7 and it.revision is not None
    assert [kv.key for kv in sv.range(prefix="p/", reverse=True, limit=3)] == [
        b"p/0249", b"p/0248", b"p/0247"]
    assert [kv.key for kv in sv.range("p/0010", "p/0013")] == [b"p/0010", b"p/0011", b"p/0012"]
    assert all(kv.value == b"" for kv in sv.range(prefix="p/", keys_only=True, limit=5))
    limited = sv.range(prefix="p/", limit=95, page_size=40)
    assert len(limited.to_list()) == 95 and limited.pages == 3
    assert sv.count(prefix="p/") == 250
    assert sv.count() == 251
    assert sv.count(start="p/0100", end="p/0200") == 100
    assert len(list(sv.range())) == 251  # the whole subvolume, paged at 10,000


def test_range_errors(sv: cowkv.Subvolume) -> None:
    with pytest.raises(cowkv.InvalidArgument):
        list(sv.range("a", "b", prefix="p"))
    with pytest.raises(ValueError):
        sv.range(limit=-1)


def test_delete_range(sv: cowkv.Subvolume) -> None:
    for k in ["a1", "a2", "b1", "b2", "c1"]:
        sv.put(k, "v")
    assert sv.delete_range(prefix="a") == 2
    assert sv.delete_range("b1", "c1") == 2
    assert [kv.key for kv in sv.range()] == [b"c1"]
    with pytest.raises(cowkv.InvalidArgument):
        sv.delete_range()


def test_txn_compare_success_failure(sv: cowkv.Subvolume) -> None:
    rev = sv.put("owner", "alice")
    r = sv.txn(compare=[cowkv.Value("owner") == "alice", cowkv.Missing("lock")],
               success=[cowkv.Put("lock", "alice"), cowkv.Get("owner")],
               failure=[cowkv.Get("lock")])
    assert r.succeeded and r.revision > rev
    assert isinstance(r.responses[0], cowkv.PutResult)
    got = r.responses[1]
    assert isinstance(got, cowkv.RangeResult) and got.value == b"alice"
    r = sv.txn(compare=[cowkv.Missing("lock")], success=[cowkv.Put("x", "y")],
               failure=[cowkv.Get("lock"), cowkv.Delete("nothing")])
    assert not r.succeeded
    assert isinstance(r.responses[0], cowkv.RangeResult) and r.responses[0].value == b"alice"
    assert isinstance(r.responses[1], cowkv.DeleteResult) and r.responses[1].deleted == 0
    assert sv.get("x", default=None) is None


def test_txn_compare_targets(sv: cowkv.Subvolume) -> None:
    r1 = sv.put("k", "b")
    r2 = sv.put("k", "c")
    holds = [cowkv.Version("k") == 2, cowkv.Version("k") > 1, cowkv.Version("k") < 3,
             cowkv.Version("k") != 7, cowkv.CreateRevision("k") == r1,
             cowkv.ModRevision("k") == r2, cowkv.Value("k") > b"b", cowkv.Value("k") < "d",
             cowkv.Exists("k"), cowkv.Version("absent") == 0]
    for c in holds:
        assert sv.txn(compare=[c]).succeeded, c
    fails = [cowkv.Value("absent") == b"", cowkv.Exists("absent"), cowkv.Missing("k"),
             cowkv.ModRevision("k") < r2]
    for c in fails:
        assert not sv.txn(compare=[c]).succeeded, c
    with pytest.raises(TypeError):
        cowkv.Version("k") == "2"
    with pytest.raises(TypeError):
        cowkv.Value("k") == 2


def test_txn_ops_and_raw_protos(sv: cowkv.Subvolume) -> None:
    for k in ["r1", "r2", "r3"]:
        sv.put(k, "v")
    raw = kv_pb2.RequestOp(put=kv_pb2.PutOp(key=b"raw", value=b"1"))
    r = sv.txn(success=[cowkv.DeleteRange("r1", "r3"), raw, cowkv.Range(prefix="r", count_only=True)])
    assert isinstance(r.responses[0], cowkv.DeleteResult) and r.responses[0].deleted == 2
    rng = r.responses[2]
    assert isinstance(rng, cowkv.RangeResult) and rng.count == 3  # reads see the state before
    assert sv.get("raw") == b"1" and sv.count(prefix="r") == 2
    with pytest.raises(cowkv.InvalidArgument):
        sv.txn(success=[cowkv.Put("", "v")])
