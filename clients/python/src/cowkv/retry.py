"""The opt-in retry of UNAVAILABLE on idempotent reads (docs/api.md
"Retrying UNAVAILABLE"): a gRPC service config with a ``retryPolicy`` for
the methods below, passed as the channel's ``grpc.service_config``.

    client = cowkv.connect(addr, retry=cowkv.UnavailableRetry())

Off by default. Writes are never retried: an UNAVAILABLE write may have
been applied."""

from __future__ import annotations

import dataclasses
import json
from typing import Any, List, Sequence, Tuple

__all__ = ["UnavailableRetry", "RETRIED_METHODS"]

# The idempotent methods retried; clients/conformance/unavailable_retry.json.
RETRIED_METHODS: Tuple[str, ...] = (
    "cowkv.v1.KV/Get", "cowkv.v1.KV/Range",
    "cowkv.v1.Files/Stat", "cowkv.v1.Files/ReadDir", "cowkv.v1.Files/Read",
    "cowkv.v1.Files/ReadLink", "cowkv.v1.Files/Fiemap", "cowkv.v1.Files/GetXattr",
    "cowkv.v1.Files/ListXattrs",
    "cowkv.v1.Subvolumes/List", "cowkv.v1.Subvolumes/Show",
    "cowkv.v1.Lease/TimeToLive", "cowkv.v1.Lease/Leases",
    "cowkv.v1.Admin/Stats", "cowkv.v1.Admin/Version",
)


@dataclasses.dataclass(frozen=True)
class UnavailableRetry:
    """gRPC's retryPolicy for UNAVAILABLE: at most ``max_attempts`` calls
    (2..5), the wait before retry n random in [0, b], b = min(max_backoff,
    initial_backoff * backoff_multiplier^(n-1)) seconds."""

    max_attempts: int = 5
    initial_backoff: float = 0.1
    max_backoff: float = 1.0
    backoff_multiplier: float = 2.0

    def __post_init__(self) -> None:
        from cowkv.errors import InvalidArgument
        if not 2 <= self.max_attempts <= 5:
            raise InvalidArgument(f"retry: max_attempts {self.max_attempts} not in [2, 5]",
                                  None, "connect")
        if not 0 < self.initial_backoff <= self.max_backoff or self.backoff_multiplier <= 0:
            raise InvalidArgument("retry: want 0 < initial_backoff <= max_backoff and "
                                  "backoff_multiplier > 0", None, "connect")

    def service_config(self) -> str:
        """The service config JSON (methodConfig with this retryPolicy)."""
        names: List[Any] = []
        for m in RETRIED_METHODS:
            service, method = m.split("/")
            names.append({"service": service, "method": method})
        return json.dumps({"methodConfig": [{"name": names, "retryPolicy": {
            "maxAttempts": self.max_attempts,
            "initialBackoff": f"{self.initial_backoff:.3f}s",
            "maxBackoff": f"{self.max_backoff:.3f}s",
            "backoffMultiplier": self.backoff_multiplier,
            "retryableStatusCodes": ["UNAVAILABLE"]}}]})

    def channel_options(self) -> Sequence[Tuple[str, Any]]:
        return [("grpc.enable_retries", 1), ("grpc.service_config", self.service_config())]
