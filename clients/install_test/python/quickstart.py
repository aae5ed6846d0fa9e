"""The Python quickstart of clients/install_test.sh, run in an empty venv
that has only the cowkv wheel, grpcio and protobuf. Usage: quickstart.py
HOST:PORT SUBVOLUME."""
import sys

import cowkv


def main(addr: str, name: str) -> None:
    with cowkv.connect(addr) as client:
        client.create_subvolume(name)
        sv = client.subvolume(name)
        sv.put("user/1", "alice")
        sv.put("user/2", "bob")
        v = sv.get("user/1").decode()
        users = sum(1 for _ in sv.range(prefix="user/"))

        def bump(tx: cowkv.Transaction) -> int:  # retried on conflict
            n = int(tx.get("n", b"0")) + 1
            tx.put("n", str(n))
            return n

        n = sv.run_in_transaction(bump)
        try:
            sv.delete("missing")
            missing = "present"
        except cowkv.NotFound:
            missing = "not-found"
        print(f"quickstart: user/1={v} users={users} n={n} missing={missing}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
