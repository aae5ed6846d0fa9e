"""A short tour of the Python client against a running cowkvd.

    bash tools/run.sh &                       # or bazel-bin/server/cowkvd --device ...
    clients/python/.venv/bin/python clients/python/samples/tour.py [ADDR]

Creates the subvolume "tour" (if absent), moves money between two accounts
in a transaction that retries on conflicts, writes a file and reflinks it,
and prints the extents of the clone (shared with the original).
"""

from __future__ import annotations

import sys

import cowkv


def transfer(sv: cowkv.Subvolume, src: str, dst: str, amount: int) -> int:
    def body(tx: cowkv.Transaction) -> int:
        a, b = int(tx.get(src, b"0")), int(tx.get(dst, b"0"))
        if a < amount:
            raise ValueError(f"{src} has only {a}")
        tx.put(src, str(a - amount))
        tx.put(dst, str(b + amount))
        return a - amount
    return sv.run_in_transaction(body)


def main(addr: str) -> None:
    with cowkv.connect(addr, wait_ready=5) as client:
        try:
            client.create_subvolume("tour")
        except cowkv.AlreadyExists:
            pass
        sv = client.subvolume("tour")
        sv.put("acct/alice", "100")
        print("alice has", transfer(sv, "acct/alice", "acct/bob", 30), "left")
        print({kv.key.decode(): kv.value.decode() for kv in sv.range(prefix="acct/")})

        fs = sv.files
        fs.mkdir("/docs", exist_ok=True)
        fs.write_bytes("/docs/report.bin", bytes(range(256)) * 2048)  # 512 KiB
        if not fs.exists("/docs/copy.bin"):
            fs.create("/docs/copy.bin")
        fs.clone("/docs/report.bin", "/docs/copy.bin")
        for e in fs.fiemap("/docs/copy.bin"):
            print(f"extent logical={e.logical} physical={e.physical} length={e.length} "
                  f"shared={e.shared} last={e.last}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else cowkv.DEFAULT_ADDRESS)
