"""cowkv.aio: the asyncio client of cowkvd, on grpc.aio, with the surface of
the synchronous client (cowkv) awaited:

    import cowkv.aio

    async with cowkv.aio.connect("127.0.0.1:7420") as db:
        sv = db.subvolume("data")
        await sv.put("k", "v", timeout=2.0)             # every call: timeout=
        await sv.get("k")                               # b"v"
        async for kv in sv.range(prefix="k"):           # a page per call
            ...
        await sv.txn([cowkv.Missing("lock")], [cowkv.Put("lock", "me")])
        async with sv.watch("cfg/", prefix=True) as w:  # created on entry
            async for ev in w:
                ...
        async with sv.begin() as tx:                    # interactive
            await tx.put("n", str(int(await tx.get("n", b"0")) + 1))
        lease = await sv.leases.grant(10)
        async with sv.leases.keep_alive_task(lease):
            ...

Errors are the synchronous client's classes (cowkv.errors), mapped by the
same code; a passed ``timeout`` raises cowkv.DeadlineExceeded; cancelling a
task cancels its call. Values, compares, ops and results are cowkv's
(cowkv.KeyValue, cowkv.Put, cowkv.TxnResult, cowkv.WatchEvent, ...).
Not here yet: the file tree (sv.files), Admin's check and stats, Lock.
"""

from cowkv.aio.client import Client, connect
from cowkv.aio.kv import RangeIterator, Subvolume
from cowkv.aio.lease import KeepAliveTask, Leases
from cowkv.aio.txn import Transaction, run_in_transaction
from cowkv.aio.watch import Watch

__all__ = ["connect", "Client", "Subvolume", "RangeIterator", "Watch", "Leases",
           "KeepAliveTask", "Transaction", "run_in_transaction"]
