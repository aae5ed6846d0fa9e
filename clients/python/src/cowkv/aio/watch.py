"""cowkv.aio's watch: a watcher on its own KV.Watch stream as an async
iterator of cowkv.WatchEvent.

    async with sv.watch("cfg/", prefix=True) as w:   # created on entry
        async for ev in w:
            ...                                      # break ends the watcher
    async for ev in sv.watch("cfg/", prefix=True, start_revision=r): ...

Answers are turned into events by the synchronous client's code
(cowkv.watch.EventAssembler): whole revisions, and the same errors —
cowkv.Compacted, cowkv.WatchCanceled (subvolume deleted, slow reader,
server stopping), the refused create's class. ``break`` out of a bare
``async for``, leaving the ``async with`` block, :meth:`Watch.cancel` or
cancelling the iterating task ends the stream and the server's watcher.
"""

from __future__ import annotations

import asyncio
import collections
from types import TracebackType
from typing import Any, Deque, Generator, Optional, Type

import grpc
import grpc.aio

from cowkv import errors
from cowkv.aio._rpc import AioRpc
from cowkv.watch import EventAssembler, WatchEvent, check_created
from cowkv.v1 import kv_pb2

__all__ = ["Watch"]


class Watch:
    """One watcher; see the module. Not for several iterating tasks."""

    def __init__(self, rpc: AioRpc, create: kv_pb2.WatchCreateRequest,
                 timeout: Optional[float] = None) -> None:
        self._rpc = rpc
        self._create = create
        self._timeout = timeout
        self._call: Any = None
        self._assembler: Optional[EventAssembler] = None
        self._pending: Deque[WatchEvent] = collections.deque()
        self._canceled = False
        self.watch_id = 0

    @property
    def header_revision(self) -> int:
        """The newest store revision the server reported (0 before creation)."""
        return self._assembler.header_revision if self._assembler else 0

    async def start(self) -> "Watch":
        """Opens the stream and waits until the server created the watcher
        (a refused create raises here). ``async with`` and ``await`` call it."""
        if self._call is not None:
            return self
        self._call = self._rpc.stream(self._rpc.kv.Watch, self._timeout)
        try:
            await self._call.write(kv_pb2.WatchRequest(create_request=self._create))
            first = await self._read()
            check_created(first)
        except BaseException:
            self.cancel()
            raise
        assert first is not None
        self.watch_id = first.watch_id
        self._assembler = EventAssembler(first.revision)
        return self

    def __await__(self) -> Generator[Any, None, "Watch"]:
        return self.start().__await__()

    async def _read(self) -> Optional[kv_pb2.WatchResponse]:
        try:
            r = await self._call.read()
        except grpc.aio.AioRpcError as e:
            if self._canceled and e.code() == grpc.StatusCode.CANCELLED:
                return None
            raise errors.from_rpc_error(e, "watch") from None
        except asyncio.CancelledError:
            if self._canceled and not _task_cancelling():
                return None  # our own cancel() while reading
            self.cancel()  # the iterating task was cancelled: end the stream too
            raise
        if r is grpc.aio.EOF:
            return None
        resp: kv_pb2.WatchResponse = r
        return resp

    def __aiter__(self) -> "Watch":
        return self

    async def __anext__(self) -> WatchEvent:
        if self._call is None:
            await self.start()
        assert self._assembler is not None
        while not self._pending:
            if self._canceled:
                raise StopAsyncIteration
            r = await self._read()
            if r is None:
                self.cancel()
                raise StopAsyncIteration
            if r.canceled:
                self.cancel()
            events = self._assembler.feed(r)
            if events is None:
                raise StopAsyncIteration
            self._pending.extend(events)
        return self._pending.popleft()

    def cancel(self) -> None:
        """Ends the watcher and its stream: the iteration stops; events not
        yet read are dropped. Idempotent."""
        self._canceled = True
        self._pending.clear()
        if self._call is not None:
            self._call.cancel()

    async def __aenter__(self) -> "Watch":
        return await self.start()

    async def __aexit__(self, exc_type: Optional[Type[BaseException]],
                        exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        self.cancel()

    def __del__(self) -> None:
        # A bare `async for ... break` drops the watch: end the stream then.
        call = getattr(self, "_call", None)
        if call is not None and not call.done():
            try:
                call.cancel()
            except RuntimeError:  # pragma: no cover - the loop is closed
                pass


def _task_cancelling() -> bool:
    """True when the current task itself is being cancelled."""
    task = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)  # Python 3.11+
    return bool(cancelling()) if cancelling is not None else False
