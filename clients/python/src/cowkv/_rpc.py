"""The channel, the stubs and the one place that turns gRPC errors into
CowkvError (every RPC of the client goes through :class:`Rpc`)."""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, Optional, Sequence, Tuple, TypeVar

import grpc

from cowkv._validate import check_request
from cowkv.errors import from_rpc_error

try:
    from cowkv.v1 import admin_pb2_grpc, files_pb2_grpc, kv_pb2_grpc, subvolumes_pb2_grpc
except ImportError as e:  # pragma: no cover - only without a build
    raise ImportError(
        "cowkv: the generated gRPC stubs (cowkv.v1) are missing; install the package with "
        "`pip install clients/python`, which generates them from proto/") from e

T = TypeVar("T")
Metadata = Tuple[Tuple[str, str], ...]

# 20 MiB, the server's message limit (docs/api.md, "Limits").
MAX_MESSAGE_BYTES = 20 * 1024 * 1024


class Rpc:
    """A channel to cowkvd with its four service stubs, default deadlines and
    the bearer token. Shared by the Client and every object it hands out."""

    def __init__(self, channel: grpc.Channel, token: Optional[str], timeout: Optional[float],
                 stream_timeout: Optional[float]) -> None:
        self.channel = channel
        self.timeout = timeout
        self.stream_timeout = stream_timeout
        self.metadata: Optional[Metadata] = (
            (("authorization", f"Bearer {token}"),) if token else None)
        self.subvolumes = subvolumes_pb2_grpc.SubvolumesStub(channel)
        self.kv = kv_pb2_grpc.KVStub(channel)
        self.files = files_pb2_grpc.FilesStub(channel)
        self.admin = admin_pb2_grpc.AdminStub(channel)

    def unary(self, method: Callable[..., T], request: Any, op: str,
              timeout: Optional[float] = None) -> T:
        """Calls a unary RPC with the default deadline; raises CowkvError
        (InvalidArgument without a call for input the server would refuse)."""
        check_request(request)
        try:
            return method(request, timeout=timeout if timeout is not None else self.timeout,
                          metadata=self.metadata)
        except grpc.RpcError as e:
            raise from_rpc_error(e, op) from None

    def server_stream(self, method: Callable[..., Iterable[T]], request: Any, op: str,
                      timeout: Optional[float] = None) -> Iterator[T]:
        """Iterates a server-streaming RPC with the call's or the default
        stream deadline; errors surface as CowkvError."""
        check_request(request)
        call: Any = method(request, timeout=timeout if timeout is not None else self.stream_timeout,
                           metadata=self.metadata)
        try:
            for message in call:
                yield message
        except grpc.RpcError as e:
            raise from_rpc_error(e, op) from None
        finally:
            call.cancel()  # a no-op after the stream ended; stops it if abandoned

    def client_stream(self, method: Callable[..., T], requests: Iterator[Any], op: str,
                      timeout: Optional[float] = None) -> T:
        """Sends a client-streaming RPC with the call's or the default stream
        deadline; errors surface as CowkvError. (The caller checks the first
        message with check_request.)"""
        wait = timeout if timeout is not None else self.stream_timeout
        try:
            return method(requests, timeout=wait, metadata=self.metadata)
        except grpc.RpcError as e:
            raise from_rpc_error(e, op) from None


def make_channel(addr: str, tls: bool, root_certificates: Optional[bytes],
                 options: Sequence[Tuple[str, Any]], module: Any = grpc) -> Any:
    """An insecure or TLS channel with the server's message size limit;
    ``module`` grpc.aio makes an asyncio channel (cowkv.aio)."""
    opts = [("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES)] + list(options)
    if tls or root_certificates is not None:
        creds = grpc.ssl_channel_credentials(root_certificates=root_certificates)
        return module.secure_channel(addr, creds, options=opts)
    return module.insecure_channel(addr, options=opts)
