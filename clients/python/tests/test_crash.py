"""Kill -9 of cowkvd during a concurrent durable workload, then restart:
every acknowledged durable write (KV puts, interactive commits, fsynced
files) is there, and the online check is clean.

Method: four writer threads put durable keys, commit durable transactions
and fsync files, recording each acknowledgement only after the call
returned. After about a second the server gets SIGKILL (no drain, no final
commit); writers stop on the first error. A new cowkvd on the same device
replays the log; the test then reads back everything acknowledged.
"""

from __future__ import annotations

import pathlib
import threading
import time
from typing import Dict, List

import cowkv
from conftest import Server

DURABLE = cowkv.Durability.DURABLE


def _writer(addr: str, wid: int, stop: threading.Event, acked: Dict[str, bytes],
            files: List[str]) -> None:
    client = cowkv.connect(addr, timeout=10)
    sv = client.subvolume("default")
    i = 0
    try:
        while not stop.is_set():
            key, value = f"w{wid}/{i:06}", f"v{i}".encode()
            if i % 3 == 0:
                with sv.begin(durability=DURABLE) as tx:
                    tx.put(key, value)
            else:
                sv.put(key, value, durability=DURABLE)
            acked[key] = value
            if i % 25 == 0:
                path = f"/w{wid}-{i}"
                with sv.files.open(path, "w") as f:
                    f.write(value * 100)
                    f.fsync()
                files.append(path)
            i += 1
    except cowkv.CowkvError:
        pass  # the server died under the call: not acknowledged
    finally:
        client.close()


def test_kill9_keeps_acknowledged_writes(tmp_path: pathlib.Path) -> None:
    device = tmp_path / "crash.img"
    srv = Server(device).start()
    stop = threading.Event()
    acked: List[Dict[str, bytes]] = [{} for _ in range(4)]
    files: List[List[str]] = [[] for _ in range(4)]
    threads = [threading.Thread(target=_writer, args=(srv.address, w, stop, acked[w], files[w]))
               for w in range(4)]
    for t in threads:
        t.start()
    time.sleep(1.0)
    srv.kill9()
    stop.set()
    for t in threads:
        t.join(30)
    total = sum(len(a) for a in acked)
    assert total > 20, "the workload wrote too little to test anything"

    srv = Server(device).start()
    try:
        with cowkv.connect(srv.address, timeout=60, wait_ready=30) as c:
            sv = c.subvolume("default")
            got = {kv.key.decode(): kv.value for kv in sv.range()}
            for a in acked:
                for k, v in a.items():
                    assert got.get(k) == v, f"acknowledged {k} lost after kill -9"
            for w, paths in enumerate(files):
                for p in paths:
                    i = int(p.split("-")[1])
                    assert sv.files.read_bytes(p) == f"v{i}".encode() * 100
            assert c.check().ok
    finally:
        assert srv.stop() == 0
