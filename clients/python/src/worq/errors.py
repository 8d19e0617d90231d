"""Errors of the Worq client library.

Two families:

* :class:`WorqError` and its subclasses are raised by client calls (:class:`worq.Client`,
  :meth:`worq.JobContext.renew`). Each carries the gRPC status ``code`` the server answered,
  so callers can branch on the kind (``except worq.errors.NotFound``), see docs/errors.md.
* :class:`PermanentError` and :class:`TemporaryError` (and the older :class:`RetryLater`) are
  raised *by handlers* to steer how a failed job is retried. Any other exception a handler
  raises fails the job as TEMPORARY (retried per the job's retry policy). The text of the
  exception a handler's error wraps (``raise PermanentError(...) from err``, or ``cause=err``)
  is stored in the job's ``failure.cause``. :class:`RateLimited`, raised by a handler that a
  limit outside Worq turned away, is no failure: the job waits and runs again without spending
  an attempt.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any, Dict, Optional, Tuple, Type, Union

import grpc

__all__ = [
    "WorqError",
    "InvalidArgument",
    "NotFound",
    "LeaseLost",
    "Unavailable",
    "DeadlineExceeded",
    "ResourceExhausted",
    "Unimplemented",
    "Cancelled",
    "Internal",
    "Unauthenticated",
    "PermissionDenied",
    "PermanentError",
    "TemporaryError",
    "RetryLater",
    "RateLimited",
    "from_rpc_error",
]


class WorqError(Exception):
    """A call to the Worq server failed. ``code`` is the gRPC status code."""

    #: The status code this class stands for (the base class accepts any).
    default_code: grpc.StatusCode = grpc.StatusCode.UNKNOWN

    def __init__(
        self,
        code: Optional[grpc.StatusCode] = None,
        message: str = "",
        *,
        metadata: Optional[Tuple[Tuple[str, Union[str, bytes]], ...]] = None,
    ) -> None:
        self.code: grpc.StatusCode = code if code is not None else self.default_code
        self.message: str = message
        #: Trailing metadata of the failed call (e.g. ``worq-jid`` when Run's wait ran out).
        self.metadata: Tuple[Tuple[str, Union[str, bytes]], ...] = tuple(metadata or ())
        super().__init__(f"{self.code.name}: {message}" if message else self.code.name)

    @property
    def jid(self) -> Optional[str]:
        """The job id the server attached to the error (``worq-jid``), if any."""
        for key, value in self.metadata:
            if key == "worq-jid":
                return value.decode() if isinstance(value, bytes) else value
        return None


class InvalidArgument(WorqError):
    """INVALID_ARGUMENT: the request is malformed; the message names the field. Do not retry."""

    default_code = grpc.StatusCode.INVALID_ARGUMENT


class NotFound(WorqError):
    """NOT_FOUND: unknown jid. Do not retry."""

    default_code = grpc.StatusCode.NOT_FOUND


class LeaseLost(WorqError):
    """FAILED_PRECONDITION: the quoted lease is not the job's live lease (it lapsed or was settled)."""

    default_code = grpc.StatusCode.FAILED_PRECONDITION


class Unavailable(WorqError):
    """UNAVAILABLE: the server cannot be reached or is stopping. Retry with backoff."""

    default_code = grpc.StatusCode.UNAVAILABLE


class DeadlineExceeded(WorqError):
    """DEADLINE_EXCEEDED: a wait ran out (GetResult, Run) or the call's own deadline passed."""

    default_code = grpc.StatusCode.DEADLINE_EXCEEDED


class ResourceExhausted(WorqError):
    """RESOURCE_EXHAUSTED: the job or result is over the server's size limit, or the token is
    over its submit rate (then :attr:`retry_after` says when to try again)."""

    default_code = grpc.StatusCode.RESOURCE_EXHAUSTED

    @property
    def retry_after(self) -> Optional[float]:
        """Seconds to wait before submitting again (the ``retry-after-ms`` trailer), if given."""
        for key, value in self.metadata:
            if key == "retry-after-ms":
                return int(value.decode() if isinstance(value, bytes) else value) / 1000
        return None


class Unauthenticated(WorqError):
    """UNAUTHENTICATED: the server checks tokens and none, or an unknown one, was sent."""

    default_code = grpc.StatusCode.UNAUTHENTICATED


class PermissionDenied(WorqError):
    """PERMISSION_DENIED: the token's role may not make this call."""

    default_code = grpc.StatusCode.PERMISSION_DENIED


class Unimplemented(WorqError):
    """UNIMPLEMENTED: a field or RPC this server does not build yet. Leave it unset."""

    default_code = grpc.StatusCode.UNIMPLEMENTED


class Cancelled(WorqError):
    """CANCELLED: the call was cancelled on the client side."""

    default_code = grpc.StatusCode.CANCELLED


class Internal(WorqError):
    """INTERNAL: a server bug; the cause is in the server log."""

    default_code = grpc.StatusCode.INTERNAL


_BY_CODE: Dict[grpc.StatusCode, Type[WorqError]] = {
    cls.default_code: cls
    for cls in (
        InvalidArgument,
        NotFound,
        LeaseLost,
        Unavailable,
        DeadlineExceeded,
        ResourceExhausted,
        Unauthenticated,
        PermissionDenied,
        Unimplemented,
        Cancelled,
        Internal,
    )
}


def error_for_code(
    code: grpc.StatusCode,
    message: str = "",
    metadata: Optional[Tuple[Tuple[str, Union[str, bytes]], ...]] = None,
) -> WorqError:
    """The :class:`WorqError` subclass instance for a status code."""
    cls = _BY_CODE.get(code, WorqError)
    return cls(code, message, metadata=metadata)


def from_rpc_error(err: grpc.RpcError) -> WorqError:
    """Converts a grpc error (sync or asyncio) to the matching :class:`WorqError`."""
    call: Any = err
    code = call.code() if hasattr(call, "code") else grpc.StatusCode.UNKNOWN
    details = call.details() if hasattr(call, "details") else str(err)
    metadata = None
    try:
        metadata = tuple(call.trailing_metadata() or ())
    except Exception:  # noqa: BLE001 - metadata is best effort
        metadata = None
    return error_for_code(code if code is not None else grpc.StatusCode.UNKNOWN, details or "", metadata)


# --- raised by handlers -----------------------------------------------------------------


class PermanentError(Exception):
    """Raise from a handler to fail the job for good (category PERMANENT: state FAILED, no retry).

    ``code`` (at most 256 chars) is stored in the job's ``failure.code``; ``cause`` (or the
    exception of ``raise PermanentError(...) from err``) is the error it wraps, whose text is
    stored in ``failure.cause``.
    """

    def __init__(self, message: str = "", *args: Any, code: str = "", cause: Optional[BaseException] = None) -> None:
        super().__init__(message, *args)
        self.message: str = message
        self.code: str = code
        if cause is not None:
            self.__cause__ = cause


def _seconds(after: Union[float, _dt.timedelta], who: str) -> float:
    seconds = after.total_seconds() if isinstance(after, _dt.timedelta) else float(after)
    if seconds < 0:
        raise ValueError(f"{who}: retry_after must be >= 0")
    return seconds


class TemporaryError(Exception):
    """Raise from a handler to fail this attempt and have the job retried per its retry policy
    (category TEMPORARY), no earlier than ``retry_after`` from now when given (seconds or a
    :class:`datetime.timedelta`). ``cause`` (or the exception of ``raise ... from err``) is the
    error it wraps, whose text is stored in the job's ``failure.cause``.
    """

    def __init__(
        self,
        message: str = "",
        *,
        retry_after: Union[float, _dt.timedelta, None] = None,
        cause: Optional[BaseException] = None,
    ) -> None:
        super().__init__(message)
        self.message: str = message
        self.retry_after: Optional[float] = None if retry_after is None else _seconds(retry_after, "TemporaryError")
        if cause is not None:
            self.__cause__ = cause


class RetryLater(TemporaryError):
    """Raise from a handler to fail this attempt and retry no earlier than ``after`` from now.

    ``after`` is seconds (int or float) or a :class:`datetime.timedelta`. Any exception with a
    ``retry_after`` attribute works the same way.

    .. deprecated:: use ``TemporaryError(message, retry_after=after)``; kept for earlier code.
    """

    def __init__(self, after: Union[float, _dt.timedelta], message: str = "") -> None:
        seconds = _seconds(after, "RetryLater")
        super().__init__(message or f"retry in {seconds:g}s", retry_after=seconds)


class RateLimited(Exception):
    """Raise from a handler that a limit outside Worq turned away (an API answering 429, a quota).

    The job goes back DELAYED for ``retry_after`` (seconds or a :class:`datetime.timedelta`;
    1 s when ``None``) and then runs again **without spending an attempt**. It is not a failure:
    the job's ``attempt``, ``fails`` and last ``failure`` stay as they were, and its retry policy
    is not consulted (category RATE_LIMITED)::

        if response.status == 429:
            raise worq.RateLimited(retry_after=float(response.headers.get("Retry-After", 30)))
    """

    def __init__(
        self,
        message: str = "rate limited",
        *,
        retry_after: Union[float, _dt.timedelta, None] = None,
        cause: Optional[BaseException] = None,
    ) -> None:
        super().__init__(message)
        self.message: str = message
        self.retry_after: Optional[float] = None if retry_after is None else _seconds(retry_after, "RateLimited")
        if cause is not None:
            self.__cause__ = cause
