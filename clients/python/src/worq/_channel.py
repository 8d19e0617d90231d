"""The grpc.aio channel every client and worker uses (internal)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Awaitable, Callable, List, Optional, Sequence, Tuple, TypeVar, Union

import grpc
import grpc.aio

ChannelOptions = Sequence[Tuple[str, Any]]

_Request = TypeVar("_Request")
_Response = TypeVar("_Response")

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


@dataclass(frozen=True)
class TLS:
    """TLS towards the server, as PEM bytes. ``ca`` verifies the server (None: the system's
    roots); ``cert`` and ``key`` are a client certificate, for servers that require mutual TLS.

    ::

        worq.Client("worq.internal:7419", token=os.environ["WORQ_TOKEN"],
                    tls=worq.TLS.from_files(ca="ca.pem"))
    """

    ca: Optional[bytes] = None
    cert: Optional[bytes] = None
    key: Optional[bytes] = None

    @classmethod
    def from_files(
        cls,
        ca: Optional[Union[str, Path]] = None,
        cert: Optional[Union[str, Path]] = None,
        key: Optional[Union[str, Path]] = None,
    ) -> "TLS":
        def read(path: Optional[Union[str, Path]]) -> Optional[bytes]:
            return Path(path).read_bytes() if path is not None else None

        return cls(ca=read(ca), cert=read(cert), key=read(key))


def open_channel(
    address: str,
    options: Optional[ChannelOptions] = None,
    *,
    token: Optional[str] = None,
    tls: Optional[Union[TLS, bool]] = None,
) -> grpc.aio.Channel:
    """A channel to ``address``: TLS when ``tls`` is given (True: the system's roots), and
    ``authorization: Bearer <token>`` on every call when ``token`` is given."""
    merged = dict(DEFAULT_OPTIONS)
    merged.update(dict(options or ()))
    # grpc.aio files each interceptor under one kind only: one instance per kind of call.
    interceptors: Optional[List[grpc.aio.ClientInterceptor]] = (
        [_UnaryBearerToken(token), _StreamBearerToken(token)] if token is not None else None
    )
    if tls:
        settings = tls if isinstance(tls, TLS) else TLS()
        if (settings.cert is None) != (settings.key is None):
            raise ValueError("tls: give both cert and key, or neither")
        credentials = grpc.ssl_channel_credentials(
            root_certificates=settings.ca, private_key=settings.key, certificate_chain=settings.cert
        )
        return grpc.aio.secure_channel(address, credentials, options=list(merged.items()), interceptors=interceptors)
    return grpc.aio.insecure_channel(address, options=list(merged.items()), interceptors=interceptors)


class _BearerToken:
    """Adds the token to every call's metadata. An interceptor rather than call credentials,
    which gRPC sends only over TLS: a loopback server without TLS may check tokens too."""

    def __init__(self, token: str) -> None:
        self._header = ("authorization", f"Bearer {token}")

    def _with_token(self, details: grpc.aio.ClientCallDetails) -> grpc.aio.ClientCallDetails:
        metadata = grpc.aio.Metadata(*tuple(details.metadata or ()), self._header)
        return grpc.aio.ClientCallDetails(
            details.method, details.timeout, metadata, details.credentials, details.wait_for_ready
        )


class _UnaryBearerToken(_BearerToken, grpc.aio.UnaryUnaryClientInterceptor):
    async def intercept_unary_unary(
        self,
        continuation: Callable[
            [grpc.aio.ClientCallDetails, _Request], Awaitable[grpc.aio.UnaryUnaryCall[_Request, _Response]]
        ],
        details: grpc.aio.ClientCallDetails,
        request: _Request,
    ) -> grpc.aio.UnaryUnaryCall[_Request, _Response]:
        return await continuation(self._with_token(details), request)


class _StreamBearerToken(_BearerToken, grpc.aio.UnaryStreamClientInterceptor):
    async def intercept_unary_stream(
        self,
        continuation: Callable[
            [grpc.aio.ClientCallDetails, _Request], Awaitable[grpc.aio.UnaryStreamCall[_Request, _Response]]
        ],
        details: grpc.aio.ClientCallDetails,
        request: _Request,
    ) -> grpc.aio.UnaryStreamCall[_Request, _Response]:
        return await continuation(self._with_token(details), request)
