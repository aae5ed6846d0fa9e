"""Subvolumes and snapshots against a live cowkvd: create, list, show, rename,
delete, snapshot (read-only and writable), and each documented error."""

from __future__ import annotations

from typing import Callable, List

import pytest

import cowkv


def test_create_list_show_rename_delete(client: cowkv.Client) -> None:
    info = client.create_subvolume("sv-crud")
    assert info.name == "sv-crud" and info.id > 5 and not info.read_only
    names = [s.name for s in client.list_subvolumes()]
    assert names[0] == "default" and "sv-crud" in names
    assert client.show_subvolume("sv-crud") == info
    client.rename_subvolume("sv-crud", "sv-crud2")
    shown = client.show_subvolume("sv-crud2")
    assert shown.id == info.id
    with pytest.raises(cowkv.NotFound):
        client.show_subvolume("sv-crud")
    client.delete_subvolume("sv-crud2")
    assert "sv-crud2" not in [s.name for s in client.list_subvolumes()]


def test_errors(client: cowkv.Client) -> None:
    client.create_subvolume("sv-taken")
    with pytest.raises(cowkv.AlreadyExists):
        client.create_subvolume("sv-taken")
    for bad in ["", "a/b", "x" * 256]:
        with pytest.raises(cowkv.InvalidArgument):
            client.create_subvolume(bad)
    with pytest.raises(cowkv.NotFound):
        client.delete_subvolume("sv-absent")
    with pytest.raises(cowkv.NotFound):
        client.rename_subvolume("sv-absent", "x")
    with pytest.raises(cowkv.AlreadyExists):
        client.rename_subvolume("sv-taken", "default")
    with pytest.raises(cowkv.FailedPrecondition) as e:
        client.delete_subvolume("default")
    assert not isinstance(e.value, cowkv.ReadOnly)
    with pytest.raises(cowkv.NotFound):
        client.snapshot("sv-absent", "snap")
    with pytest.raises(cowkv.NotFound):
        client.subvolume("sv-absent").get("k")


def test_read_only_snapshot_refuses_writes(client: cowkv.Client, sv: cowkv.Subvolume) -> None:
    sv.put("k", "before")
    sv.files.write_bytes("/f", b"data")
    name = f"{sv.name}@2026-11-22"
    info = client.snapshot(sv.name, name, read_only=True)
    assert info.read_only and info.name == name
    assert client.show_subvolume(name).parent_id == client.show_subvolume(sv.name).id
    snap = client.subvolume(name)
    assert snap.get("k") == b"before"
    assert snap.files.read_bytes("/f") == b"data"
    sv.put("k", "after")
    assert snap.get("k") == b"before"
    writes: List[Callable[[], object]] = [
        lambda: snap.put("k", "x"),
        lambda: snap.delete("k"),
        lambda: snap.delete_range(prefix="k"),
        lambda: snap.txn(success=[cowkv.Put("k", "x")]),
        lambda: snap.files.create("/g"),
        lambda: snap.files.mkdir("/d"),
        lambda: snap.files.unlink("/f"),
        lambda: snap.files.write_bytes("/f", b"x"),
    ]
    for write in writes:
        with pytest.raises(cowkv.ReadOnly) as e:
            write()
        assert e.value.code is not None and e.value.code.name == "FAILED_PRECONDITION"
        # The class comes from the server's ErrorInfo (live: both reasons set).
        assert e.value.reason == "READ_ONLY_SNAPSHOT"
    assert snap.files.stat("/f").size == 4


def test_error_info_reason_and_errno_live(sv: cowkv.Subvolume) -> None:
    sv.files.mkdir("/d")
    sv.files.create("/d/f")
    with pytest.raises(cowkv.FailedPrecondition) as e:
        sv.files.rmdir("/d")
    assert (e.value.reason, e.value.errno_name) == ("ENOTEMPTY", "ENOTEMPTY")
    assert e.value.metadata["errno"] == "ENOTEMPTY"
    with pytest.raises(cowkv.NotFound) as nf:
        sv.files.stat("/nothing")
    assert nf.value.reason == "ENOENT" and nf.value.errno_name == "ENOENT"


def test_read_only_snapshot_refuses_transaction_commit(client: cowkv.Client,
                                                       sv: cowkv.Subvolume) -> None:
    name = f"{sv.name}@ro"
    client.snapshot(sv.name, name)
    with pytest.raises(cowkv.ReadOnly):
        with client.subvolume(name).begin() as tx:
            tx.put("k", "v")


def test_writable_snapshot_diverges(client: cowkv.Client, sv: cowkv.Subvolume) -> None:
    sv.put("k", "v1")
    client.snapshot(sv.name, f"{sv.name}@rw", read_only=False)
    snap = client.subvolume(f"{sv.name}@rw")
    snap.put("k", "snap")
    assert sv.get("k") == b"v1" and snap.get("k") == b"snap"
    assert not client.show_subvolume(f"{sv.name}@rw").read_only


def test_range_at_snapshot(client: cowkv.Client, sv: cowkv.Subvolume) -> None:
    for i in range(30):
        sv.put(f"k{i:02}", str(i))
    client.snapshot(sv.name, f"{sv.name}@view")
    sv.delete_range(prefix="k")
    keys = [kv.key for kv in sv.range(snapshot=f"{sv.name}@view", page_size=7)]
    assert len(keys) == 30
    assert sv.count(prefix="k", snapshot=f"{sv.name}@view") == 30
    assert sv.count(prefix="k") == 0
    # A writable subvolume cannot serve as `snapshot`.
    with pytest.raises(cowkv.FailedPrecondition):
        list(client.subvolume("default").range(snapshot=sv.name))


# ---- list filters and sort, show's snapshots, sync (issue 17) ----------------


def test_list_filters_and_sort(client: cowkv.Client, sv: cowkv.Subvolume) -> None:
    client.snapshot(sv.name, f"{sv.name}@ro", read_only=True)
    client.snapshot(sv.name, f"{sv.name}@rw", read_only=False)
    mine = {sv.name, f"{sv.name}@ro", f"{sv.name}@rw"}

    def names(**kw: object) -> List[str]:
        return [s.name for s in client.list_subvolumes(**kw)  # type: ignore[arg-type]
                if s.name in mine]

    assert names(snapshots_only=True) == [f"{sv.name}@ro", f"{sv.name}@rw"]
    assert names(read_only=True) == [f"{sv.name}@ro"]
    assert names(read_only=True, snapshots_only=True) == [f"{sv.name}@ro"]
    assert names(sort="-rootid") == [f"{sv.name}@rw", f"{sv.name}@ro", sv.name]
    assert names(sort=["-path"]) == sorted(mine, reverse=True)
    # ogen grows with creation; ties (none here) go by id.
    listed = client.list_subvolumes(sort="-ogen,path")
    ogens = [s.creation_generation for s in listed]
    assert ogens == sorted(ogens, reverse=True) and all(g > 0 for g in ogens)
    for s in client.list_subvolumes(read_only=True):
        assert s.read_only
    # Identities: a snapshot's parent_uuid is its source's uuid.
    by_name = {s.name: s for s in client.list_subvolumes()}
    src, ro = by_name[sv.name], by_name[f"{sv.name}@ro"]
    assert len(src.uuid) == 32 and src.parent_uuid == ""
    assert ro.parent_uuid == src.uuid and ro.uuid != src.uuid
    with pytest.raises(cowkv.InvalidArgument) as e:
        client.list_subvolumes(sort="gen,size")
    assert "'size'" in str(e.value)


def test_show_names_snapshots(client: cowkv.Client, sv: cowkv.Subvolume) -> None:
    client.snapshot(sv.name, f"{sv.name}@1")
    client.snapshot(sv.name, f"{sv.name}@2", read_only=False)
    client.snapshot(f"{sv.name}@1", f"{sv.name}@1@1")
    shown = client.show_subvolume(sv.name)
    assert shown.snapshots == (f"{sv.name}@1", f"{sv.name}@2")
    assert client.show_subvolume(f"{sv.name}@1").snapshots == (f"{sv.name}@1@1",)
    client.delete_subvolume(f"{sv.name}@2")
    assert client.show_subvolume(sv.name).snapshots == (f"{sv.name}@1",)
    assert all(s.snapshots == () for s in client.list_subvolumes())


def test_sync_subvolumes(client: cowkv.Client, sv: cowkv.Subvolume) -> None:
    for i in range(200):
        sv.put(f"k{i}", "v" * 1000)
    sv_id = client.show_subvolume(sv.name).id
    client.delete_subvolume(sv.name)
    synced = client.sync_subvolumes([sv_id], timeout=30)
    assert synced in ([], [sv_id])  # the background cleaner may have been first
    assert client.sync_subvolumes([sv_id]) == []
    client.sync_subvolumes()  # whatever other tests deleted
    assert client.sync_subvolumes() == []
    assert client.stats()["deleted_subvolumes_pending"] == 0
    with pytest.raises(cowkv.NotFound) as e:
        client.sync_subvolumes([1 << 40])
    assert "ENOENT" in str(e.value)
    with pytest.raises(cowkv.FailedPrecondition):
        client.sync_subvolumes([5])
