"""The grpc.aio channel every client and worker uses (internal)."""

from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

import grpc
import grpc.aio

ChannelOptions = Sequence[Tuple[str, Any]]

# gRPC's own reconnect backoff grows to 120 s by default, and while it waits every call fails
# at once with UNAVAILABLE: a channel could sit in TRANSIENT_FAILURE long after the server is
# back. After a server restart a worker must renew its leases within the server's orphan grace
# (10 s by default, much less in tests), so the channel retries connecting every 250 ms at
# most: a few refused TCP connects per second per process while the server is down. (Not
# grpc.min_reconnect_backoff_ms: gRPC also uses it as the connect timeout, 20 s by default.)
DEFAULT_OPTIONS: List[Tuple[str, Any]] = [
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 250),
    # gRPC shares subchannels between channels to the same address: a Client opened after an
    # outage would inherit the worker's backoff state and fail at once. Keep them apart.
    ("grpc.use_local_subchannel_pool", 1),
    # Up to 1 MiB of job data plus a 1 MiB result in one message, with room to spare.
    ("grpc.max_receive_message_length", 16 * 1024 * 1024),
    ("grpc.max_send_message_length", 16 * 1024 * 1024),
]


def open_channel(address: str, options: Optional[ChannelOptions] = None) -> grpc.aio.Channel:
    merged = dict(DEFAULT_OPTIONS)
    merged.update(dict(options or ()))
    return grpc.aio.insecure_channel(address, options=list(merged.items()))
