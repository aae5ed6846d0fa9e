"""The tour with cowkv.aio (asyncio) against a running cowkvd.

    clients/python/.venv/bin/python clients/python/samples/aio_tour.py [ADDR]

Watches the subvolume "aio-tour" while a transaction that retries on
conflicts moves money between two accounts, with a per-call timeout, and
keeps a lease alive from a task while a key lives on it.
"""

from __future__ import annotations

import asyncio
import sys

import cowkv
import cowkv.aio


async def transfer(sv: cowkv.aio.Subvolume, src: str, dst: str, amount: int) -> int:
    async def body(tx: cowkv.aio.Transaction) -> int:
        a, b = int(await tx.get(src, b"0")), int(await tx.get(dst, b"0"))
        if a < amount:
            raise ValueError(f"{src} has only {a}")
        await tx.put(src, str(a - amount))
        await tx.put(dst, str(b + amount))
        return a - amount
    return await sv.run_in_transaction(body, timeout=5.0)


async def main(addr: str) -> None:
    async with cowkv.aio.connect(addr, wait_ready=5) as db:
        try:
            await db.create_subvolume("aio-tour")
        except cowkv.AlreadyExists:
            pass
        sv = db.subvolume("aio-tour")
        async with sv.watch("acct/", prefix=True) as w:  # created here: sees what follows
            await sv.put("acct/alice", "100", timeout=2.0)
            print("alice has", await transfer(sv, "acct/alice", "acct/bob", 30), "left")
            seen = []
            async for ev in w:
                seen.append(f"{ev.type.value} {ev.kv.key.decode()}={ev.kv.value.decode()}")
                if len(seen) == 3:  # the put, then the transfer's two keys
                    break
        print("watched:", "; ".join(seen))
        print({kv.key.decode(): kv.value.decode() async for kv in sv.range(prefix="acct/")})

        lease = await sv.leases.grant(2)
        await sv.put("svc/tour", "up", lease=lease)
        async with sv.leases.keep_alive_task(lease) as ka:
            await asyncio.sleep(3)  # past the TTL: the task renewed it
            print("svc/tour is", (await sv.get("svc/tour")).decode(), "lost:", ka.lost)
        await sv.leases.revoke(lease)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else cowkv.DEFAULT_ADDRESS))
