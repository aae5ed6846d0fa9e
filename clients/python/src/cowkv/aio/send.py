"""cowkv.aio's send stream and receive: the asyncio twins of cowkv.send's,
on the same messages and error mapping."""

from __future__ import annotations

from typing import Any, AsyncIterable, AsyncIterator, List, Optional, Union

import grpc.aio

from cowkv import errors
from cowkv.aio._rpc import AioRpc
from cowkv.errors import from_rpc_error
from cowkv.send import RECEIVE_CHUNK_BYTES, ReceiveResult, ReceiveSource, SendStats, source_chunks
from cowkv.v1 import subvolumes_pb2

__all__ = ["AioSendStream", "AioReceiveSource", "receive_stream"]

#: What cowkv.aio.Client.receive reads: an async iterable of bytes (e.g.
#: another server's send), an iterable of bytes or a binary file.
AioReceiveSource = Union[AsyncIterable[bytes], ReceiveSource]


class AioSendStream:
    """The chunks of one send stream (``async for``); :attr:`stats` once
    read to the end. :meth:`cancel` (or leaving ``async with``) cancels the
    call."""

    def __init__(self, rpc: AioRpc, request: subvolumes_pb2.SendRequest,
                 timeout: Optional[float]) -> None:
        self._call: Any = rpc.subvolumes.Send(request, timeout=timeout, metadata=rpc.metadata)
        #: What the send did, once the stream was read to its end.
        self.stats: Optional[SendStats] = None

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._chunks()

    async def _chunks(self) -> AsyncIterator[bytes]:
        try:
            async for m in self._call:
                if m.HasField("stats"):
                    self.stats = SendStats.from_proto(m.stats)
                if m.chunk:
                    yield m.chunk
        except grpc.aio.AioRpcError as e:
            raise from_rpc_error(e, "send") from None
        finally:
            self._call.cancel()
        if self.stats is None:
            raise errors.Internal("send: the stream ended without its stats message", None, "send")

    def cancel(self) -> None:
        """Cancels the call if the stream was not read to its end."""
        self._call.cancel()

    async def __aenter__(self) -> "AioSendStream":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.cancel()


async def _source_chunks(source: AioReceiveSource) -> AsyncIterator[bytes]:
    if hasattr(source, "__aiter__"):
        async for b in source:
            for off in range(0, len(b), RECEIVE_CHUNK_BYTES):
                yield bytes(b[off:off + RECEIVE_CHUNK_BYTES])
        return
    for b in source_chunks(source):
        yield b


async def receive_stream(rpc: AioRpc, source: AioReceiveSource, name: str, resumable: bool,
                         dry_run: bool, timeout: Optional[float]) -> ReceiveResult:
    """Runs one Receive call: the source's chunks, the options in the first
    message. An exception reading the source cancels the call and is raised
    as it is."""
    call: Any = rpc.subvolumes.Receive(timeout=timeout, metadata=rpc.metadata)
    first: Optional[subvolumes_pb2.ReceiveRequest] = subvolumes_pb2.ReceiveRequest(
        name=name, dry_run=dry_run, resumable=resumable)
    try:
        try:
            async for chunk in _source_chunks(source):
                msg = first if first is not None else subvolumes_pb2.ReceiveRequest()
                first = None
                msg.chunk = chunk
                await call.write(msg)
            if first is not None:
                await call.write(first)
            await call.done_writing()
        except grpc.aio.AioRpcError:
            pass  # the server ended the call: awaiting it says why
        except BaseException:
            call.cancel()
            raise
        return ReceiveResult.from_proto(await call)
    except grpc.aio.AioRpcError as e:
        raise from_rpc_error(e, "receive") from None
