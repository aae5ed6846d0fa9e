"""Watch (issue 18) against a live cowkvd: events of puts, deletes and
Txns in revision order with prev_kv, a replay from an older revision,
:class:`cowkv.Compacted` for a start the history no longer keeps (with the
oldest revision served), prefix and filters, cancel from another thread,
a deleted subvolume (WatchCanceled), and a refused create."""

from __future__ import annotations

import threading
import time
from typing import List

import pytest

import cowkv
from cowkv.watch import prefix_end


def take(w: cowkv.Watch, n: int) -> List[cowkv.WatchEvent]:
    out = []
    for ev in w:
        out.append(ev)
        if len(out) == n:
            break
    return out


def test_prefix_end() -> None:
    assert prefix_end(b"a/") == b"a0"
    assert prefix_end(b"a\xff") == b"b"
    assert prefix_end(b"\xff\xff") == b"\0"


def test_events_in_revision_order_with_prev_kv(sv: cowkv.Subvolume) -> None:
    with sv.watch("cfg/", prefix=True, prev_kv=True) as w:
        r1 = sv.put("cfg/a", "1")
        r2 = sv.put("cfg/a", "2")
        sv.put("other", "not watched")
        r3 = sv.delete("cfg/a")
        res = sv.txn(success=[cowkv.Put("cfg/b", "x"), cowkv.Put("cfg/c", "y")])
        evs = take(w, 5)
    assert [(e.type, e.kv.key, e.revision) for e in evs] == [
        (cowkv.EventType.PUT, b"cfg/a", r1), (cowkv.EventType.PUT, b"cfg/a", r2),
        (cowkv.EventType.DELETE, b"cfg/a", r3),
        (cowkv.EventType.PUT, b"cfg/b", res.revision),
        (cowkv.EventType.PUT, b"cfg/c", res.revision)]
    assert evs[0].prev_kv is None and evs[0].kv.value == b"1" and evs[0].kv.version == 1
    assert evs[1].prev_kv is not None and evs[1].prev_kv.value == b"1"
    assert evs[2].prev_kv is not None and evs[2].prev_kv.value == b"2"


def test_replay_from_an_older_revision_and_compacted(sv: cowkv.Subvolume) -> None:
    r1 = sv.put("h", "1")
    sv.put("h", "2")
    r3 = sv.put("h", "3")
    with sv.watch("h", start_revision=r1) as w:
        assert [e.kv.value for e in take(w, 3)] == [b"1", b"2", b"3"]
    sv.compact(r3)
    with pytest.raises(cowkv.Compacted) as e:
        next(iter(sv.watch("h", start_revision=r1)))
    assert e.value.compact_revision == r3 + 1  # the oldest revision still served
    assert e.value.reason == "COMPACTED"


def test_filters(sv: cowkv.Subvolume) -> None:
    with sv.watch("f", no_put=True) as w:
        sv.put("f", "x")
        d = sv.delete("f")
        ev = next(w)
    assert ev.type == cowkv.EventType.DELETE and ev.revision == d and ev.kv.key == b"f"


def test_cancel_from_another_thread_ends_the_iteration(sv: cowkv.Subvolume) -> None:
    w = sv.watch("quiet")
    threading.Timer(0.2, w.cancel).start()
    start = time.monotonic()
    assert list(w) == []
    assert time.monotonic() - start < 10


def test_deleted_subvolume_cancels(client: cowkv.Client) -> None:
    client.create_subvolume("watch-doomed")
    sv = client.subvolume("watch-doomed")
    w = sv.watch("k")
    sv.put("k", "v")
    assert next(w).kv.value == b"v"
    client.delete_subvolume("watch-doomed")
    with pytest.raises(cowkv.WatchCanceled) as e:
        next(w)
    assert e.value.cancel_code == "WATCH_CANCEL_SUBVOLUME_DELETED"


def test_refused_create(client: cowkv.Client, sv: cowkv.Subvolume) -> None:
    with pytest.raises(cowkv.NotFound):
        next(iter(client.subvolume("no-such-subvolume").watch("k")))
    with pytest.raises(cowkv.InvalidArgument):
        next(iter(sv.watch("b", range_end="a")))
    with pytest.raises(cowkv.InvalidArgument):
        sv.watch("a", prefix=True, range_end="b")


def test_file_watch_under_a_prefix(sv: cowkv.Subvolume) -> None:
    """Files.watch: the file tree's changes at and below a path, renames
    into and out of it with both paths, in revision order; a replay from
    the first revision; a start before what was recorded is Compacted."""
    fs = sv.files
    with fs.watch("/pw") as w:
        fs.mkdir("/pw")
        fs.write_bytes("/pw/f", b"data")
        fs.mkdir("/out")
        fs.rename("/pw/f", "/out/f")
        fs.write_bytes("/out/g", b"x")  # not under /pw
        fs.rename("/out/g", "/pw/g")
        fs.unlink("/pw/g")
        evs: List[cowkv.FileEvent] = []
        for ev in w:
            evs.append(ev)
            if (ev.type, ev.path) == ("UNLINK", "pw/g"):
                break
    got = [(e.type, e.path, e.new_path) for e in evs]
    # write_bytes is a create and writes (MODIFY events, as many as it made).
    want = [("MKDIR", "pw", ""), ("CREATE", "pw/f", ""), ("RENAME", "pw/f", "out/f"),
            ("RENAME", "out/g", "pw/g"), ("UNLINK", "pw/g", "")]
    assert [g for g in got if g[0] != "MODIFY"] == want, got
    assert all(g[1] == "pw/f" for g in got if g[0] == "MODIFY"), got
    assert all(a.revision < b.revision for a, b in zip(evs, evs[1:]))
    first = evs[0].revision
    with fs.watch("pw", start_revision=first) as w:
        again: List[cowkv.FileEvent] = []
        for ev in w:
            again.append(ev)
            if len(again) == len(evs):
                break
    assert again == evs
    fs.mkdir("/unwatched")  # nobody watches: the recorded span ends here
    with pytest.raises(cowkv.Compacted):
        next(iter(fs.watch("pw", start_revision=first)))
