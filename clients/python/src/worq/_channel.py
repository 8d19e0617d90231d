"""The grpc.aio channel every client and worker uses (internal)."""

from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

import grpc
import grpc.aio

ChannelOptions = Sequence[Tuple[str, Any]]

# gRPC's own reconnect backoff grows to 120 s by default: after a long outage a channel could
# sit in TRANSIENT_FAILURE well after the server is back. Cap it near the worker's 5 s.
DEFAULT_OPTIONS: List[Tuple[str, Any]] = [
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 5000),
    # Up to 1 MiB of job data plus a 1 MiB result in one message, with room to spare.
    ("grpc.max_receive_message_length", 16 * 1024 * 1024),
    ("grpc.max_send_message_length", 16 * 1024 * 1024),
]


def open_channel(address: str, options: Optional[ChannelOptions] = None) -> grpc.aio.Channel:
    merged = dict(DEFAULT_OPTIONS)
    merged.update(dict(options or ()))
    return grpc.aio.insecure_channel(address, options=list(merged.items()))
