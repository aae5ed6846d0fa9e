"""The asyncio channel and the one place where cowkv.aio turns grpc.aio
errors into CowkvError: the same check_request and from_rpc_error as the
synchronous client (cowkv._rpc), awaited."""

from __future__ import annotations

from typing import Any, Optional

import grpc
import grpc.aio

from cowkv._rpc import Metadata
from cowkv._validate import check_request
from cowkv.errors import from_rpc_error
from cowkv.v1 import admin_pb2_grpc, kv_pb2_grpc, lease_pb2_grpc, subvolumes_pb2_grpc

__all__ = ["AioRpc"]


class AioRpc:
    """A grpc.aio channel to cowkvd with its stubs, the default deadline and
    the bearer token. Shared by the Client and every object it hands out."""

    def __init__(self, channel: grpc.aio.Channel, token: Optional[str],
                 timeout: Optional[float]) -> None:
        self.channel = channel
        self.timeout = timeout
        self.metadata: Optional[Metadata] = (
            (("authorization", f"Bearer {token}"),) if token else None)
        self.subvolumes = subvolumes_pb2_grpc.SubvolumesStub(channel)
        self.kv = kv_pb2_grpc.KVStub(channel)
        self.admin = admin_pb2_grpc.AdminStub(channel)
        self.lease = lease_pb2_grpc.LeaseStub(channel)

    def deadline(self, timeout: Optional[float]) -> Optional[float]:
        """A call's timeout: its own, else the client's default."""
        return timeout if timeout is not None else self.timeout

    async def unary(self, method: Any, request: Any, op: str,
                    timeout: Optional[float] = None) -> Any:
        """Awaits a unary RPC with the call's or the default deadline; raises
        CowkvError (InvalidArgument without a call for input the server
        would refuse). Cancelling the awaiting task cancels the call."""
        check_request(request)
        try:
            return await method(request, timeout=self.deadline(timeout), metadata=self.metadata)
        except grpc.aio.AioRpcError as e:
            raise from_rpc_error(e, op) from None

    def stream(self, method: Any, timeout: Optional[float]) -> Any:
        """Opens a bidirectional stream (write/read), ``timeout`` its deadline."""
        return method(metadata=self.metadata, timeout=timeout)
