"""The worker side: :class:`Worker` leases jobs and runs handlers on one asyncio event loop.

How it behaves is fixed by clients/CONFORMANCE.md; the protocol is docs/protocol.md.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import concurrent.futures.thread
import contextvars
import dataclasses
import datetime as _dt
import functools
import inspect
import json
import logging
import os
import random
import secrets
import signal
import socket
import threading
import time
import traceback
from typing import (
    Any,
    Awaitable,
    Callable,
    Dict,
    Iterable,
    List,
    Mapping,
    Optional,
    Sequence,
    Set,
    Tuple,
    TypeVar,
    Union,
)

import grpc
import grpc.aio
from google.protobuf import duration_pb2

from worq.v1 import job_pb2, worker_service_pb2

from . import _convert, _tracing
from ._channel import TLS, ChannelOptions, open_channel
from ._credit import CreditMover
from ._routes import Link, PartitionRoutes
from .errors import LeaseLost, PermanentError, RateLimited, WorqError, error_for_code, from_rpc_error
from .types import Job

__all__ = ["Worker", "JobContext", "WorkerEvent", "Handler"]

log = logging.getLogger("worq.worker")

Handler = Callable[..., Any]
"""``async def handler(job, ctx)`` (or ``(job)``), or a plain ``def`` run in a thread."""

H = TypeVar("H", bound=Handler)

_VERSION = "0.1.0"
_STATUS_OK = 0
_LOST_CODES = (grpc.StatusCode.FAILED_PRECONDITION.value[0], grpc.StatusCode.NOT_FOUND.value[0])
_UNAVAILABLE = grpc.StatusCode.UNAVAILABLE.value[0]
# Call failures worth retrying: the server is away, restarting, or did not answer in time.
_RETRYABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)

_MAX_MESSAGE_BYTES = 64 * 1024
_MAX_ERRTYPE_CHARS = 256
_MAX_CODE_CHARS = 256
_MAX_BATCH = 1000
# Report calls out at once, and how long finished jobs wait for the call in flight before
# going out beside it (see Worker._report_loop).
_MAX_REPORT_CALLS = 4
_OVERTAKE_AFTER = 0.005

# Reconnect backoff (CONFORMANCE.md §6): ~100 ms doubling to ~5 s, equal jitter; reset after
# a stream that delivered jobs or stayed up this long.
_BACKOFF_INITIAL = 0.1
_BACKOFF_MAX = 5.0
_STREAM_STABLE_AFTER = 5.0
# The server sends a keepalive at least every 30 s on an idle stream: silence this long means
# the stream is dead even if TCP has not noticed.
_STREAM_SILENCE_LIMIT = 65.0
_CALL_TIMEOUT = 10.0
# While the stream is down (not closed by us), held leases are renewed this often: after a
# server restart they are capped at restart + orphan grace, and the stream's reconnect backoff
# may come too late to renew them in time.
_EAGER_RENEW = 0.25
# After closing its own stream the worker renews its leases this much later, once the server
# has seen the stream end and capped them at the orphan grace.
_RENEW_AFTER_CLOSE = 0.05
# A task being stopped that has not ended this long after its cancellation is cancelled again
# (see Worker._cancel_task).
_CANCEL_AGAIN_AFTER = 0.1


class _Backoff:
    """Exponential delays with equal jitter (half fixed, half random)."""

    def __init__(self, initial: float = _BACKOFF_INITIAL, maximum: float = _BACKOFF_MAX) -> None:
        self.initial = initial
        self.maximum = maximum
        self.attempt = 0

    def next(self) -> float:
        base = min(self.maximum, self.initial * (2**self.attempt))
        self.attempt = min(self.attempt + 1, 30)
        return float(base / 2 + random.random() * base / 2)

    def reset(self) -> None:
        self.attempt = 0


@dataclasses.dataclass(frozen=True)
class WorkerEvent:
    """What ``Worker(on_event=...)`` is called with.

    ``name`` is one of:

    * ``"ready"``: the first Lease stream is open (once); ``"connected"``: any stream opened;
    * ``"start"``: a handler starts (``jid``, ``attempt``, ``type``);
    * ``"done"``: the server answered the job's report; ``outcome`` is ``"ack"``, ``"fail"``,
      ``"lease_lost"`` (refused as stale, dropped) or ``"error"`` (refused otherwise, dropped);
    * ``"reconnecting"``: the stream dropped; the next try is in ``delay`` seconds (``reason``);
    * ``"quiet"``: the server said QUIET, no more work is taken;
    * ``"stopped"``: the worker is about to return from :meth:`Worker.run`.
    """

    name: str
    jid: Optional[str] = None
    attempt: Optional[int] = None
    type: Optional[str] = None
    outcome: Optional[str] = None
    delay: Optional[float] = None
    reason: Optional[str] = None


class JobContext:
    """Per-attempt context handed to a handler with the job.

    * ``cancelled``: an :class:`asyncio.Event` set when the attempt must stop (execution
      deadline, worker shutdown past its timeout, or the lease was lost); ``cancel_reason``
      says which (``"deadline"``, ``"shutdown"``, ``"lease_lost"``, ``"revoked"``). An ``async`` handler is
      also cancelled (:class:`asyncio.CancelledError`) at that moment; a sync handler, running
      in a thread, cannot be interrupted and should poll ``cancelled.is_set()``.
    * ``deadline``: when this attempt must end (aware UTC datetime); ``time_left()`` in seconds.
    * ``renew()``: renews the lease now. Not needed: the worker renews every ``reserve_for / 3``.
    * ``await checkpoint(data)``: saves how far the job got (bytes, at most 1 MiB; empty clears
      it), returning once the server has it on disk. A later attempt (a retry after a failure,
      a lapsed lease or an operator's retry) gets it as ``job.checkpoint``.
    * ``await progress(percent, message="")``: reports how far the job is (0 to 100, a message
      of at most 1024 chars), shown by GetJob, WatchJob and the dashboard.
    * ``checkpoint_sync`` / ``progress_sync``: the same for a sync handler running in a thread.
    """

    def __init__(self, worker: "Worker", leased: worker_service_pb2.LeasedJob, loop: asyncio.AbstractEventLoop) -> None:
        self._worker = worker
        self._loop = loop
        self.worker_id: str = worker.worker_id
        self.jid: str = leased.job.jid
        self.lease_id: str = leased.lease_id
        self.deadline: Optional[_dt.datetime] = _convert.optional_timestamp(leased, "execution_deadline")
        self.lease_expires_at: Optional[_dt.datetime] = _convert.optional_timestamp(leased, "lease_expires_at")
        self.cancelled: asyncio.Event = asyncio.Event()
        self.cancel_reason: Optional[str] = None
        self.logger: "logging.LoggerAdapter[logging.Logger]" = logging.LoggerAdapter(
            logging.getLogger("worq.job"), {"jid": self.jid, "job_type": leased.job.type}
        )

    def time_left(self) -> float:
        """Seconds until the execution deadline (``inf`` when there is none)."""
        if self.deadline is None:
            return float("inf")
        return self.deadline.timestamp() - time.time()

    async def renew(self) -> _dt.datetime:
        """Renews the lease now and returns the new expiry. Raises :class:`worq.errors.LeaseLost`
        when the lease is no longer held. Must be awaited on the worker's event loop."""
        return await self._worker._renew_one(self)

    async def checkpoint(self, data: bytes) -> None:
        """Saves the job's checkpoint (replacing the previous one) and returns once it is durable.
        Raises :class:`worq.errors.LeaseLost` when the lease is no longer held,
        :class:`worq.errors.InvalidArgument` for data over 1 MiB."""
        request = worker_service_pb2.CheckpointRequest(jid=self.jid, lease_id=self.lease_id, data=bytes(data))
        await self._worker._call_worker_rpc("Checkpoint", request)

    async def progress(self, percent: int, message: str = "") -> None:
        """Reports how far the job is: ``percent`` 0 to 100 and a ``message`` (at most 1024 chars)."""
        request = worker_service_pb2.ReportProgressRequest(
            jid=self.jid, lease_id=self.lease_id, percent=int(percent), message=message
        )
        await self._worker._call_worker_rpc("ReportProgress", request)

    def checkpoint_sync(self, data: bytes) -> None:
        """``checkpoint`` for a sync handler (it runs in a thread, not on the event loop)."""
        asyncio.run_coroutine_threadsafe(self.checkpoint(data), self._loop).result()

    def progress_sync(self, percent: int, message: str = "") -> None:
        """``progress`` for a sync handler (it runs in a thread, not on the event loop)."""
        asyncio.run_coroutine_threadsafe(self.progress(percent, message), self._loop).result()

    def _cancel(self, reason: str) -> None:
        if self.cancel_reason is None:
            self.cancel_reason = reason
        self.cancelled.set()


@dataclasses.dataclass(eq=False)
class _Held:
    """One leased job, from delivery until the server answered its report."""

    leased: worker_service_pb2.LeasedJob
    job: Job
    ctx: JobContext
    renew_every: float
    next_renew: float
    task: Optional["asyncio.Task[None]"] = None
    deadline_timer: Optional[asyncio.TimerHandle] = None
    started: bool = False
    has_slot: bool = False
    finished: bool = False
    lost: bool = False

    @property
    def jid(self) -> str:
        return self.leased.job.jid

    @property
    def lease_id(self) -> str:
        return self.leased.lease_id


@dataclasses.dataclass(eq=False)
class _Report:
    held: _Held
    ack: Optional[worker_service_pb2.AckRequest] = None
    fail: Optional[worker_service_pb2.FailRequest] = None
    retried_invalid: bool = False


def _default_worker_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


def _is_async(fn: Callable[..., Any]) -> bool:
    while isinstance(fn, functools.partial):
        fn = fn.func
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))


def _wants_ctx(fn: Callable[..., Any]) -> bool:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return True
    positional = [
        p for p in params if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]
    if any(p.kind == inspect.Parameter.VAR_POSITIONAL for p in params):
        return True
    return len(positional) >= 2


def result_bytes(value: Any) -> bytes:
    """The Ack result of a handler's return value: bytes as-is, str as UTF-8, None as empty,
    anything else as JSON."""
    if value is None:
        return b""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _truncate_utf8(text: str, limit: int) -> str:
    raw = text.encode("utf-8")
    if len(raw) <= limit:
        return text
    return raw[:limit].decode("utf-8", "ignore")


_OWN_FILES = frozenset({__file__, concurrent.futures.thread.__file__})

_CANCEL_MESSAGES = {
    "deadline": "cancelled at the job's execution deadline",
    "shutdown": "cancelled: the worker is shutting down",
    "lease_lost": "cancelled: the lease was lost",
    "revoked": "cancelled: the server revoked the lease (job cancelled or deleted)",
}


def cause_text_of(exc: BaseException) -> str:
    """The text of what caused ``exc``: ``str()`` of its ``__cause__`` (``raise ... from err``),
    then of that one's cause and so on, joined by ": "; "" without a cause."""
    texts: List[str] = []
    seen = {id(exc)}
    cause = exc.__cause__
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        texts.append(str(cause) or type(cause).__name__)
        cause = cause.__cause__
    return ": ".join(texts)


def fail_request_of(
    exc: BaseException, held_jid: str, lease_id: str, frames: int, cancel_reason: Optional[str]
) -> worker_service_pb2.FailRequest:
    """The Fail for what a handler raised (CONFORMANCE.md §2 and §8)."""
    message = str(exc)
    if isinstance(exc, asyncio.CancelledError) and cancel_reason is not None:
        message = _CANCEL_MESSAGES.get(cancel_reason, "cancelled")
    if not message:
        message = type(exc).__name__
    backtrace: List[str] = []
    tb = exc.__traceback__
    # Skip the library's own outer frames (and the executor's, for sync handlers).
    while tb is not None and tb.tb_frame.f_code.co_filename in _OWN_FILES:
        tb = tb.tb_next
    if frames > 0 and tb is not None:
        summary = traceback.extract_tb(tb)
        # Innermost first, as the server keeps the first `frames` of them.
        for fs in reversed(summary):
            backtrace.append(f'File "{fs.filename}", line {fs.lineno}, in {fs.name}')
            if len(backtrace) >= frames:
                break
    if isinstance(exc, PermanentError):
        category = job_pb2.FAILURE_CATEGORY_PERMANENT
    elif isinstance(exc, RateLimited):
        # Not a failure: the server gives the job back for retry_after, the attempt not spent.
        category = job_pb2.FAILURE_CATEGORY_RATE_LIMITED
    elif cancel_reason == "deadline":
        category = job_pb2.FAILURE_CATEGORY_TIMEOUT
    else:
        category = job_pb2.FAILURE_CATEGORY_TEMPORARY
    request = worker_service_pb2.FailRequest(
        jid=held_jid,
        lease_id=lease_id,
        message=_truncate_utf8(message, _MAX_MESSAGE_BYTES),
        errtype=type(exc).__name__[:_MAX_ERRTYPE_CHARS],
        backtrace=backtrace,
        category=category,
        # The server counts UTF-16 units; a UTF-8 byte limit never passes it.
        code=_truncate_utf8(exc.code or "", _MAX_CODE_CHARS) if isinstance(exc, PermanentError) else "",
        cause=_truncate_utf8(cause_text_of(exc), _MAX_MESSAGE_BYTES),
    )
    if cancel_reason == "shutdown" and category == job_pb2.FAILURE_CATEGORY_TEMPORARY:
        # Failed back at shutdown: retry at once, on another worker.
        request.retry_after.CopyFrom(duration_pb2.Duration())
    else:
        after = getattr(exc, "retry_after", None)
        if after is not None:
            try:
                request.retry_after.CopyFrom(_convert.to_duration(after, "retry_after"))
            except (TypeError, ValueError) as err:
                log.warning("ignoring retry_after of %s: %s", type(exc).__name__, err)
    return request


class Worker:
    """Leases jobs from ``queues`` and runs the registered handlers, at most ``concurrency``
    at once, on one asyncio event loop.

    ::

        worker = worq.Worker("127.0.0.1:7419", queues=["mail"], concurrency=10)

        @worker.handler("email.send")
        async def send(job, ctx):
            await mailer.send(job.args[0])
            return "sent"

        asyncio.run(worker.run(install_signal_handlers=True))

    A handler returns a result (bytes as-is, str as UTF-8, None as empty, else JSON) to Ack
    the job, or raises to Fail it: :class:`worq.PermanentError` fails it for good, an
    exception with a ``retry_after`` attribute (e.g. :class:`worq.RetryLater`) sets the retry
    time, anything else is retried per the job's retry policy. Leases are renewed
    automatically, the stream reconnects on its own, and ``stop()`` (or SIGTERM/SIGINT with
    ``install_signal_handlers=True``) shuts down gracefully.

    On a partitioned cluster (``worq serve --cluster --partitions``) the worker leases from
    each partition's own server: one Lease stream per partition its queues live in, sharing
    ``concurrency`` between them (moved to the streams whose partitions have jobs waiting),
    its reports and renewals going to that server too (see ``partition_routing``).
    """

    def __init__(
        self,
        address: str = "127.0.0.1:7419",
        queues: Sequence[str] = ("default",),
        concurrency: int = 10,
        worker_id: Optional[str] = None,
        shutdown_timeout: float = 30.0,
        *,
        labels: Optional[Mapping[str, str]] = None,
        on_event: Optional[Callable[[WorkerEvent], None]] = None,
        executor: Optional[concurrent.futures.Executor] = None,
        channel_options: Optional[ChannelOptions] = None,
        token: Optional[str] = None,
        tls: Optional[Union[TLS, bool]] = None,
        flush_timeout: float = 10.0,
        queue_order: str = "listed",
        partition_routing: bool = True,
    ) -> None:
        """
        ``queues`` are served in order (strictly), or with ``queue_order="random"`` each job
        comes from one of them chosen uniformly at random among those with a ready job. ``concurrency`` is the Lease credits and the
        most handlers run at once (1–10,000). ``shutdown_timeout`` (seconds) is how long
        running handlers get to finish after ``stop()``. ``on_event`` is called with a
        :class:`WorkerEvent` on the event loop (keep it quick). Sync handlers run in
        ``executor`` (default: a thread pool of ``concurrency`` threads). ``flush_timeout``
        bounds how long shutdown waits for the server to answer the last reports. ``token``
        and ``tls`` are as for :class:`worq.Client`.

        ``partition_routing``: on a partitioned cluster, lease straight from the servers of
        the partitions the queues live in, rather than through the node at ``address`` (which
        would forward every call). ``run()`` first reads the partition map (one GetServerInfo);
        queues in several partitions get one stream per partition (the queues of each in the
        order given; a queue spread over several partitions is in the stream of each), and the
        map is read again whenever a stream reconnects, since its partition may have moved.
        The streams share ``concurrency``: each starts with an even share (at least 1);
        whenever jobs of some partitions wait for credit, each stream with nothing waiting
        keeps 1 and the rest moves to the waiting ones (SetLeaseCredits to each stream's
        server), never more than ``concurrency`` held in all. On a server that is not
        partitioned (or refuses GetServerInfo) the worker holds one stream to ``address``.
        """
        if isinstance(queues, str):
            queues = [queues]
        if not queues:
            raise ValueError("queues: give at least one queue")
        if not isinstance(concurrency, int) or not 1 <= concurrency <= 10_000:
            raise ValueError("concurrency: must be an int between 1 and 10000")
        if queue_order not in ("listed", "random"):
            raise ValueError('queue_order: must be "listed" or "random"')
        self.queue_order = queue_order
        self.address = address
        self.queues: List[str] = list(queues)
        self.concurrency = concurrency
        self.worker_id: str = worker_id or _default_worker_id()
        self.shutdown_timeout = float(shutdown_timeout)
        self.flush_timeout = float(flush_timeout)
        self.labels: Dict[str, str] = {
            "lang": "python",
            "library": f"worq-python/{_VERSION}",
            "hostname": socket.gethostname(),
            "pid": str(os.getpid()),
            **dict(labels or {}),
        }
        self._on_event = on_event
        self._executor = executor
        self._owns_executor = executor is None
        self._channel_options = channel_options
        self._token = token
        self._tls = tls
        self._partition_routing = partition_routing
        self._handlers: Dict[str, Tuple[Handler, bool, bool]] = {}
        # Set on the workers a worker over several partitions runs, one per partition: the
        # map they share and the partition whose server takes their calls.
        self._pinned: Optional[Tuple[PartitionRoutes, int]] = None

        # Run state, (re)made by run() on its event loop.
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._running = False
        self._stop_requested = False
        self._force_requested = False
        self._stopping: Optional[asyncio.Event] = None
        self._force: Optional[asyncio.Event] = None
        self._quiet = False
        self._fatal: Optional[BaseException] = None
        self._held: Dict[str, _Held] = {}  # by lease_id
        self._sem: Optional[asyncio.Semaphore] = None
        self._renew_now: Optional[asyncio.Event] = None  # wakes the renewer
        self._renew_all = False  # its next round renews every held lease
        self._reports: List[_Report] = []
        self._reports_wakeup: Optional[asyncio.Event] = None
        self._reports_idle: Optional[asyncio.Event] = None
        self._reports_kick: Optional[asyncio.Event] = None
        self._reports_pausing = 0
        self._stream_opens = 0  # Lease streams opened so far: a report pause ends when one opens
        self._node: Optional[Link] = None  # the link to `address`, while running
        self._routes: Optional[PartitionRoutes] = None  # with partition routing, while running
        self._partition: Optional[int] = None  # whose server takes this worker's calls (None: the node's)
        self._parts: List["Worker"] = []  # one per partition, when the queues live in several
        self._ready_sent = False
        self._stream_lost = False  # the stream dropped and is not open again yet
        # A worker over several partitions: moves its concurrency between its parts' streams.
        self._credits: Optional[CreditMover] = None
        # A part's: told whenever its stream says whether a ready job waits for its credit.
        self._waiting_listener: Optional[Callable[[bool], None]] = None
        # A part's: the handler slots of the worker it belongs to, shared by all its parts.
        self._shared_slots: Optional[asyncio.Semaphore] = None
        # The open stream's id (from its keepalives) and the link it is on, for SetLeaseCredits.
        self._stream_id: Optional[str] = None
        self._stream_link: Optional[Link] = None

    # --- registration ---------------------------------------------------------------------

    def handler(self, type: str) -> Callable[[H], H]:
        """Decorator: ``@worker.handler("email.send")`` registers the function for that job type."""

        def decorate(fn: H) -> H:
            self.register(type, fn)
            return fn

        return decorate

    def register(self, type: str, fn: Handler) -> None:
        """Registers ``fn`` for jobs of ``type``: ``async def fn(job, ctx)`` or ``fn(job)``;
        a plain ``def`` runs in the executor."""
        if not isinstance(type, str) or not type:
            raise ValueError("type: must be a non-empty string")
        if not callable(fn):
            raise TypeError(f"handler for {type!r} is not callable")
        if type in self._handlers:
            raise ValueError(f"a handler for {type!r} is already registered")
        self._handlers[type] = (fn, _is_async(fn), _wants_ctx(fn))

    @property
    def job_types(self) -> List[str]:
        return sorted(self._handlers)

    # --- running --------------------------------------------------------------------------

    def run_sync(self, *, install_signal_handlers: bool = True) -> None:
        """``asyncio.run(worker.run(...))``: blocks until the worker has stopped."""
        asyncio.run(self.run(install_signal_handlers=install_signal_handlers))

    def stop(self, *, force: bool = False) -> None:
        """Asks the worker to shut down gracefully: close the Lease stream, give running
        handlers ``shutdown_timeout`` seconds, then cancel them and fail them back for an
        immediate retry. ``force=True`` skips the wait. Safe to call from any thread, and
        before ``run()`` (which then returns at once)."""
        loop = self._loop
        if loop is None or not self._running:
            self._stop_requested = True
            self._force_requested = self._force_requested or force
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self._request_stop(force)
        else:
            loop.call_soon_threadsafe(self._request_stop, force)

    @property
    def stopping(self) -> bool:
        return bool(self._stopping is not None and self._stopping.is_set())

    def _request_stop(self, force: bool = False) -> None:
        assert self._stopping is not None and self._force is not None
        if force:
            self._force.set()
        if not self._stopping.is_set():
            if self._pinned is None:
                log.info("worker %s stopping", self.worker_id)
            self._stopping.set()
        if self._credits is not None:
            self._credits.close()
        for part in self._parts:
            part.stop(force=force)

    def _on_signal(self, signum: int) -> None:
        if self._stopping is not None and self._stopping.is_set():
            log.warning("second %s: cancelling running handlers now", signal.Signals(signum).name)
            self._request_stop(force=True)
        else:
            log.info("%s received: shutting down gracefully", signal.Signals(signum).name)
            self._request_stop()

    async def run(self, *, install_signal_handlers: bool = False) -> None:
        """Runs until ``stop()``, a TERMINATE from the server, or (with
        ``install_signal_handlers``) SIGTERM/SIGINT; then shuts down gracefully and returns.
        Raises :class:`worq.errors.WorqError` if the server refuses the Lease itself (e.g.
        INVALID_ARGUMENT for a bad queue name), after the same shutdown."""
        if self._running:
            raise RuntimeError("this Worker is already running")
        if not self._handlers:
            raise RuntimeError("no handlers registered: use @worker.handler(type) or worker.register(type, fn)")
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._running = True
        self._stopping = asyncio.Event()
        self._force = asyncio.Event()
        self._renew_now = asyncio.Event()
        self._reports_wakeup = asyncio.Event()
        self._reports_idle = asyncio.Event()
        self._reports_idle.set()
        self._reports_kick = asyncio.Event()
        self._sem = self._shared_slots if self._shared_slots is not None else asyncio.Semaphore(self.concurrency)
        self._held = {}
        self._reports = []
        self._quiet = False
        self._fatal = None
        self._ready_sent = False
        self._stream_lost = False
        if self._stop_requested:
            self._stopping.set()
        if self._force_requested:
            self._force.set()
        self._stop_requested = self._force_requested = False
        if self._owns_executor:
            self._executor = concurrent.futures.ThreadPoolExecutor(
                max_workers=self.concurrency, thread_name_prefix="worq-handler"
            )
        channel: Optional[grpc.aio.Channel] = None
        routes: Optional[PartitionRoutes] = None
        if self._pinned is not None:
            routes, self._partition = self._pinned
            self._node = routes.node
        else:
            channel = open_channel(self.address, self._channel_options, token=self._token, tls=self._tls)
            self._node = Link(channel)
            self._partition = None
            if self._partition_routing:
                routes = PartitionRoutes(self._node, self._open_partition_channel)
        self._routes = routes
        signals_installed: List[int] = []
        if install_signal_handlers:
            signals_installed = self._install_signals(loop)
        try:
            groups = await self._partition_groups() if routes is not None and self._pinned is None else []
            if routes is not None and len(groups) > 1:
                await self._run_parts(routes, groups)
            else:
                await self._serve()
        finally:
            for signum in signals_installed:
                try:
                    loop.remove_signal_handler(signum)
                except (NotImplementedError, RuntimeError):
                    signal.signal(signum, signal.SIG_DFL)
            if self._pinned is None:
                # The parts' channels are the map's: closed once, here, after every part ended.
                if routes is not None:
                    await routes.close()
                if channel is not None:
                    await channel.close()
            if self._owns_executor and self._executor is not None:
                self._executor.shutdown(wait=False)
                self._executor = None
            self._node = self._routes = None
            self._parts = []
            self._running = False
            self._emit(WorkerEvent("stopped"))
            if self._pinned is None:
                log.info("worker %s stopped", self.worker_id)
        if self._fatal is not None:
            raise self._fatal

    async def _serve(self) -> None:
        """Holds the Lease stream and runs what it delivers until stopped, then drains."""
        assert self._stopping is not None
        renewer = asyncio.create_task(self._renew_loop(), name="worq-renew")
        reporter = asyncio.create_task(self._report_loop(), name="worq-report")
        leaser = asyncio.create_task(self._lease_loop(), name="worq-lease")
        log.info(
            "worker %s: queues %s, concurrency %d, handlers %s, server %s%s",
            self.worker_id, self.queues, self.concurrency, self.job_types, self.address,
            f" (streams to partition {self._partition}'s own server)" if self._pinned is not None else "",
        )
        try:
            stop_wait = asyncio.create_task(self._stopping.wait())
            try:
                await asyncio.wait({leaser, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                stop_wait.cancel()
            if leaser.done() and not leaser.cancelled() and leaser.exception() is not None:
                log.error("lease loop crashed", exc_info=leaser.exception())
            await self._cancel_task(leaser)
            self._schedule_renew_all(_RENEW_AFTER_CLOSE)
            await self._drain()
        except asyncio.CancelledError:
            # run() itself was cancelled (e.g. Ctrl-C under asyncio.run without signal handlers):
            # fail back what is running, briefly, then let the cancellation through.
            self._request_stop(force=True)
            await self._cancel_task(leaser)
            try:
                await asyncio.shield(asyncio.wait_for(self._drain(), timeout=min(self.flush_timeout, 5.0)))
            except BaseException:  # noqa: BLE001 - best effort on the way out
                pass
            raise
        finally:
            for task in (renewer, reporter):
                task.cancel()
            for task in (renewer, reporter):
                await self._cancel_task(task)

    # --- partitions -----------------------------------------------------------------------

    def _open_partition_channel(self, address: str) -> grpc.aio.Channel:
        return open_channel(address, self._channel_options, token=self._token, tls=self._tls)

    async def _partition_groups(self) -> List[Tuple[int, List[str]]]:
        """Reads the partition map, then: the queues by partition, each in the order given, the
        partitions in the order of their first queue; a spread queue is in the group of each
        of its partitions, since its jobs wait in all of them. Empty when the server is not
        partitioned (or the map could not be read)."""
        assert self._routes is not None and self._stopping is not None
        reading = asyncio.ensure_future(self._routes.ready())
        stop_wait = asyncio.ensure_future(self._stopping.wait())
        try:
            await asyncio.wait({reading, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop_wait.cancel()
            reading.cancel()
        groups: Dict[int, List[str]] = {}
        for queue in self.queues:
            partitions = self._routes.partitions_of_queue(queue)
            if not partitions:
                return []
            for partition in partitions:
                groups.setdefault(partition, []).append(queue)
        return list(groups.items())

    def _single_partition(self) -> Optional[int]:
        """The partition all the queues live in, if one (its server then takes the stream);
        None when the map names none, or several (the node merges them)."""
        if self._pinned is not None:
            return self._pinned[1]
        routes = self._routes
        if routes is None:
            return None
        partitions = {p for queue in self.queues for p in routes.partitions_of_queue(queue)}
        return partitions.pop() if len(partitions) == 1 else None

    def _link(self) -> Link:
        """Where this worker's calls go: its partition's server, else the node at ``address``."""
        if self._node is None:
            raise RuntimeError("the worker is not running")
        if self._routes is None:
            return self._node
        return self._routes.link_of(self._partition)

    def _reread_map(self) -> None:
        """The stream's server may be gone because its partition moved: read the map again, so
        that the next try goes to the partition's new server."""
        if self._routes is not None and self._routes.worth_rereading:
            self._routes.refresh_soon()

    async def _run_parts(self, routes: PartitionRoutes, groups: List[Tuple[int, List[str]]]) -> None:
        """Runs one worker per partition, each with its queues there and its calls to that
        partition's server; until stopped, or until one ends on its own (TERMINATE, a refused
        Lease), which ends them all, as a node ends a Lease it merges when one of its streams
        ends. The concurrency is shared among their streams and moved to those with jobs
        waiting for credit (CreditMover); their handlers take slots of one pool, so that no
        more than the concurrency run at once, wherever the credit is."""
        assert self._stopping is not None and self._force is not None
        parts: List[Worker] = []
        credits = self._credits = CreditMover(
            self.concurrency,
            [functools.partial(self._set_part_limit, parts, i) for i in range(len(groups))],
            # Each stream's jobs received whose reports are not yet answered.
            held=[functools.partial(self._part_held, parts, i) for i in range(len(groups))],
        )
        shares = credits.initial_limits
        # As many as the streams may hold at once: the concurrency, or one per stream when
        # the queues live in more partitions than that.
        slots = asyncio.Semaphore(sum(shares))
        told: Set[str] = set()

        def on_part_event(event: WorkerEvent) -> None:
            if event.name == "stopped":
                return  # this worker tells its own, once every part stopped
            if event.name in ("ready", "quiet"):
                if event.name in told:
                    return
                told.add(event.name)
            self._emit(event)

        for i, ((partition, queues), share) in enumerate(zip(groups, shares)):
            part = self._part(routes, partition, queues, share, on_part_event)
            part._shared_slots = slots
            part._waiting_listener = functools.partial(credits.set_waiting, i)
            parts.append(part)
        self._parts = parts
        log.info(
            "worker %s: queues in %d partitions, a stream to each one's server, concurrency %d shared between them: %s",
            self.worker_id, len(groups), self.concurrency,
            "; ".join(f"partition {p}: {queues}, starting with {share}" for (p, queues), share in zip(groups, shares)),
        )
        if self._stopping.is_set():
            for part in self._parts:
                part.stop(force=self._force.is_set())
        tasks = [asyncio.create_task(part.run(), name=f"worq-partition-{p}") for part, (p, _) in zip(self._parts, groups)]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            self._request_stop()
            await asyncio.wait(tasks)
        except asyncio.CancelledError:
            for task in tasks:
                task.cancel()
            await asyncio.wait(tasks)
            raise
        finally:
            credits.close()
            self._credits = None
        for task in tasks:
            error = None if task.cancelled() else task.exception()
            if isinstance(error, WorqError):
                self._fatal = self._fatal or error
            elif error is not None:
                raise error

    @staticmethod
    def _part_held(parts: List["Worker"], index: int) -> int:
        return len(parts[index]._held) if index < len(parts) else 0

    @staticmethod
    async def _set_part_limit(parts: List["Worker"], index: int, limit: int) -> Optional[int]:
        return await parts[index]._set_lease_limit(limit) if index < len(parts) else None

    async def _set_lease_limit(self, limit: int) -> Optional[int]:
        """Sets this stream's limit (and the concurrency its next stream opens with); answers
        what the stream held then, or None when no stream is open or the call failed."""
        self.concurrency = limit
        stream_id, link = self._stream_id, self._stream_link
        if stream_id is None or link is None:
            return None  # not connected: the next stream opens with it
        request = worker_service_pb2.SetLeaseCreditsRequest(stream_id=stream_id, credits=limit)
        try:
            # Over the link of the stream: its partition's own server.
            response: worker_service_pb2.SetLeaseCreditsResponse = await link.worker.SetLeaseCredits(
                request, timeout=_CALL_TIMEOUT
            )
        except grpc.aio.AioRpcError as err:
            # NOT_FOUND: the stream ended meanwhile; the next one opens with the new limit.
            level = logging.DEBUG if err.code() == grpc.StatusCode.NOT_FOUND else logging.WARNING
            log.log(level, "setting the stream's credits to %d failed (%s: %s)", limit, err.code().name, err.details())
            return None
        return response.held

    def _part(
        self,
        routes: PartitionRoutes,
        partition: int,
        queues: List[str],
        share: int,
        on_event: Callable[[WorkerEvent], None],
    ) -> "Worker":
        part = Worker(
            self.address,
            queues=queues,
            concurrency=share,
            worker_id=self.worker_id,
            shutdown_timeout=self.shutdown_timeout,
            labels=self.labels,
            on_event=on_event,
            executor=self._executor,
            channel_options=self._channel_options,
            token=self._token,
            tls=self._tls,
            flush_timeout=self.flush_timeout,
            queue_order=self.queue_order,
            partition_routing=False,
        )
        part._handlers = self._handlers
        part._pinned = (routes, partition)
        return part

    def _install_signals(self, loop: asyncio.AbstractEventLoop) -> List[int]:
        installed: List[int] = []
        for signum in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(signum, self._on_signal, signum)
            except NotImplementedError:  # Windows: no loop signal handlers
                signal.signal(signum, lambda s, _f: loop.call_soon_threadsafe(self._on_signal, s))
            installed.append(signum)
        return installed

    @staticmethod
    async def _cancel_task(task: "asyncio.Task[object]") -> None:
        # Cancelled again until it ends: before Python 3.12, asyncio.wait_for returns the inner
        # result instead of raising when the cancellation and the result arrive together
        # (CPython gh-86296), and a loop around it (the lease stream's reads) then runs on,
        # leaving a graceful stop waiting forever.
        while not task.done():
            task.cancel()
            await asyncio.wait({task}, timeout=_CANCEL_AGAIN_AFTER)
        try:
            task.result()
        except asyncio.CancelledError:
            pass
        except Exception:  # noqa: BLE001 - already logged where it matters
            pass

    def _emit(self, event: WorkerEvent) -> None:
        if self._on_event is None:
            return
        try:
            self._on_event(event)
        except Exception:  # noqa: BLE001 - a listener must not break the worker
            log.exception("on_event listener raised for %s", event.name)

    # --- the Lease stream -----------------------------------------------------------------

    async def _lease_loop(self) -> None:
        assert self._stopping is not None and self._renew_now is not None
        backoff = _Backoff()
        while not self._stopping.is_set():
            opened_at = time.monotonic()
            delivered = False
            reason = "the server ended the stream"
            # The map may have changed since the last stream (read again when it dropped).
            self._partition = self._single_partition()
            link = self._link()
            # Opened with the stream's current limit, which the credit mover may have changed.
            request = worker_service_pb2.LeaseRequest(
                queues=self.queues,
                worker_id=self.worker_id,
                credits=self.concurrency,
                labels=self.labels,
                order=worker_service_pb2.QUEUE_ORDER_RANDOM if self.queue_order == "random" else worker_service_pb2.QUEUE_ORDER_LISTED,
                report_waiting=self._waiting_listener is not None,
            )
            call = link.worker.Lease(request)
            opened = False
            try:
                await call.wait_for_connection()
                while True:
                    try:
                        message = await asyncio.wait_for(call.read(), timeout=_STREAM_SILENCE_LIMIT)
                    except asyncio.TimeoutError:
                        reason = f"no message from the server for {_STREAM_SILENCE_LIMIT:g} s"
                        break
                    if message is grpc.aio.EOF:
                        break
                    if not opened:
                        # The server's first message (a keepalive) confirms the stream is open.
                        opened = True
                        self._on_stream_open()
                    kind = message.WhichOneof("kind")
                    if kind == "jobs":
                        delivered = True
                        for leased in message.jobs.jobs:
                            self._accept(leased)
                    elif kind == "keepalive":
                        if message.keepalive.stream_id:
                            self._stream_id, self._stream_link = message.keepalive.stream_id, link
                    elif kind == "waiting":
                        if self._waiting_listener is not None:
                            self._waiting_listener(message.waiting.waiting)
                    elif kind == "revoked":
                        self._revoke(message.revoked.jid, message.revoked.lease_id, message.revoked.reason)
                    elif kind == "control":
                        action = message.control.action
                        why = message.control.reason
                        if action == worker_service_pb2.CONTROL_ACTION_RECONNECT:
                            reason = f"server asked to reconnect{': ' + why if why else ''}"
                            break
                        if action == worker_service_pb2.CONTROL_ACTION_QUIET:
                            log.info("QUIET from the server%s: taking no more work", f" ({why})" if why else "")
                            self._quiet = True
                            break
                        if action == worker_service_pb2.CONTROL_ACTION_TERMINATE:
                            log.info("TERMINATE from the server%s: shutting down", f" ({why})" if why else "")
                            self._request_stop()
                            break
                        log.debug("ignoring control action %d", action)
            except grpc.aio.AioRpcError as err:
                code = err.code()
                if code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.UNIMPLEMENTED):
                    # Retrying the same request cannot help: stop and report it from run().
                    self._fatal = from_rpc_error(err)
                    log.error("the server refused the Lease: %s", self._fatal)
                    self._request_stop()
                    return
                reason = f"{code.name}: {err.details()}"
            finally:
                call.cancel()
                self._stream_id = self._stream_link = None
                if self._waiting_listener is not None:
                    # Nothing waits for a stream that is gone; the next one says again.
                    self._waiting_listener(False)
            if not self._quiet and not self._stopping.is_set():
                self._on_stream_lost()
            if self._quiet or self._stopping.is_set():
                # We closed the stream ourselves: the server now caps our leases at its orphan
                # grace. Renew them once it has seen the stream end (CONFORMANCE.md §7).
                self._schedule_renew_all(_RENEW_AFTER_CLOSE)
            if self._quiet:
                self._emit(WorkerEvent("quiet"))
                await self._stopping.wait()
                return
            if self._stopping.is_set():
                return
            if delivered or time.monotonic() - opened_at >= _STREAM_STABLE_AFTER:
                backoff.reset()
            delay = backoff.next()
            # Loud once when an open stream drops, quieter for each failed reconnect after it.
            log.log(
                logging.WARNING if opened else logging.INFO,
                "lease stream %s (%s); reconnecting in %.0f ms",
                "dropped" if opened else "could not open", reason, delay * 1000,
            )
            self._emit(WorkerEvent("reconnecting", delay=delay, reason=reason))
            try:
                await asyncio.wait_for(self._stopping.wait(), timeout=delay)
            except asyncio.TimeoutError:
                pass

    def _on_stream_lost(self) -> None:
        """Renew held leases now and every _EAGER_RENEW until a stream is open again."""
        self._stream_lost = True
        self._reread_map()
        if self._held and self._loop is not None and self._renew_now is not None:
            now = self._loop.time()
            for held in self._held.values():
                held.next_renew = min(held.next_renew, now)
            self._renew_now.set()

    def _on_stream_open(self) -> None:
        self._stream_lost = False
        self._stream_opens += 1
        if self._reports_kick is not None:
            self._reports_kick.set()  # reports waiting out a backoff can go now
        log.info("lease stream open (worker %s, %d in flight)", self.worker_id, len(self._held))
        if not self._ready_sent:
            self._ready_sent = True
            self._emit(WorkerEvent("ready"))
        self._emit(WorkerEvent("connected"))
        if self._held and self._renew_now is not None:
            # The server capped our leases at now + orphan grace when the old stream ended:
            # renew them at once (CONFORMANCE.md §6).
            self._renew_all = True
            self._renew_now.set()

    def _accept(self, leased: worker_service_pb2.LeasedJob) -> None:
        loop = self._loop
        assert loop is not None
        job = Job(leased.job)
        ctx = JobContext(self, leased, loop)
        reserve_for = max(job.reserve_for.total_seconds(), 0.3)
        held = _Held(
            leased=leased,
            job=job,
            ctx=ctx,
            renew_every=reserve_for / 3,
            next_renew=loop.time() + reserve_for / 3,
        )
        self._held[held.lease_id] = held
        if ctx.deadline is not None:
            delay = ctx.deadline.timestamp() - time.time()
            held.deadline_timer = loop.call_later(max(delay, 0.0), self._on_deadline, held)
        held.task = loop.create_task(self._execute(held), name=f"worq-job-{held.jid}")
        if self._renew_now is not None:
            self._renew_now.set()  # wake the renewer to take this job's schedule into account

    def _revoke(self, jid: str, lease_id: str, reason: str) -> None:
        held = self._held.get(lease_id)
        if held is None or held.lost:
            return
        held.lost = True
        log.info("job %s revoked by the server (%s)", jid, reason or "no reason given")
        if not held.finished and held.task is not None and not held.task.done():
            # Its report will be refused, but sending it frees the slot on the server.
            held.ctx._cancel("revoked")
            held.task.cancel()

    def _schedule_renew_all(self, delay: float) -> None:
        """Renews every held lease ``delay`` seconds from now."""
        def fire() -> None:
            if self._renew_now is not None and self._held:
                self._renew_all = True
                self._renew_now.set()

        if self._loop is not None:
            self._loop.call_later(delay, fire)

    def _on_deadline(self, held: _Held) -> None:
        if held.finished or held.task is None or held.task.done():
            return
        log.warning("job %s passed its execution deadline: cancelling the handler", held.jid)
        held.ctx._cancel("deadline")
        held.task.cancel()

    # --- running a handler ----------------------------------------------------------------

    async def _execute(self, held: _Held) -> None:
        assert self._sem is not None
        report: _Report
        try:
            await self._sem.acquire()
        except asyncio.CancelledError as exc:
            # Cancelled before it could start (shutdown, deadline or lost lease while waiting).
            reason = held.ctx.cancel_reason or "shutdown"
            report = _Report(held, fail=fail_request_of(exc, held.jid, held.lease_id, 0, reason))
        else:
            # The slot stays taken until the server answered the report, as on the server
            # (docs/protocol.md): the next job cannot start before this one's `done`.
            held.has_slot = True
            report = await self._run_handler(held)
        held.finished = True
        if held.deadline_timer is not None:
            held.deadline_timer.cancel()
        self._enqueue_report(report)

    async def _run_handler(self, held: _Held) -> _Report:
        span = _tracing.start_job_span(held.job, self.worker_id)
        if span is None:
            return await self._call_handler(held)
        with span:
            report = await self._call_handler(held)
        if report.fail is not None:
            span.end(report.fail.errtype or "Error", report.fail.message)
        else:
            span.end()
        return report

    async def _call_handler(self, held: _Held) -> _Report:
        job, ctx = held.job, held.ctx
        if self._stopping is not None and self._stopping.is_set() and self._force is not None and self._force.is_set():
            ctx._cancel("shutdown")
        held.started = True
        self._emit(WorkerEvent("start", jid=held.jid, attempt=job.attempt, type=job.type))
        entry = self._handlers.get(job.type)
        if entry is None:
            log.error("no handler for job type %r (job %s): failing it back", job.type, held.jid)
            return _Report(
                held,
                fail=worker_service_pb2.FailRequest(
                    jid=held.jid,
                    lease_id=held.lease_id,
                    message=f"no handler registered for job type {job.type!r} on worker {self.worker_id}",
                    errtype="UnknownJobType",
                    category=job_pb2.FAILURE_CATEGORY_TEMPORARY,
                ),
            )
        fn, is_async, wants_ctx = entry
        call_args = (job, ctx) if wants_ctx else (job,)
        try:
            if ctx.cancelled.is_set():
                raise asyncio.CancelledError()
            if is_async:
                value = await fn(*call_args)
            else:
                context = contextvars.copy_context()
                value = await asyncio.get_running_loop().run_in_executor(
                    self._executor, functools.partial(context.run, fn, *call_args)
                )
                if inspect.isawaitable(value):
                    value = await value
            result = result_bytes(value)
        except asyncio.CancelledError as exc:
            reason = ctx.cancel_reason
            if reason is None:
                # Not cancelled by us: the handler (or something it awaited) was cancelled.
                reason = "shutdown" if self.stopping else None
            log.info("job %s cancelled (%s)", held.jid, reason or "by the handler")
            return _Report(held, fail=fail_request_of(exc, held.jid, held.lease_id, job.backtrace, reason))
        except Exception as exc:  # noqa: BLE001 - every handler error becomes a Fail
            level = logging.INFO if isinstance(exc, PermanentError) else logging.WARNING
            log.log(level, "job %s (%s, attempt %d) failed: %s: %s", held.jid, job.type, job.attempt, type(exc).__name__, exc)
            return _Report(held, fail=fail_request_of(exc, held.jid, held.lease_id, job.backtrace, ctx.cancel_reason))
        return _Report(held, ack=worker_service_pb2.AckRequest(jid=held.jid, lease_id=held.lease_id, result=result))

    # --- renewal --------------------------------------------------------------------------

    async def _renew_loop(self) -> None:
        assert self._renew_now is not None and self._loop is not None
        loop = self._loop
        while True:
            now_all, self._renew_all = self._renew_all, False
            self._renew_now.clear()
            now = loop.time()
            live = [h for h in self._held.values() if not h.lost]
            due = [h for h in live if now_all or h.next_renew <= now]
            for i in range(0, len(due), _MAX_BATCH):
                await self._renew(due[i : i + _MAX_BATCH])
            live = [h for h in self._held.values() if not h.lost]
            wait = min((h.next_renew for h in live), default=now + 5.0) - loop.time()
            try:
                await asyncio.wait_for(self._renew_now.wait(), timeout=max(wait, 0.02))
            except asyncio.TimeoutError:
                pass

    async def _renew(self, due: List[_Held]) -> None:
        assert self._loop is not None
        request = worker_service_pb2.RenewRequest(
            leases=[worker_service_pb2.LeaseRef(jid=h.jid, lease_id=h.lease_id) for h in due]
        )
        timeout = max(0.5, min(_CALL_TIMEOUT, min(h.renew_every for h in due) * 2))
        try:
            response: worker_service_pb2.RenewResponse = await self._link().worker.Renew(request, timeout=timeout)
        except grpc.aio.AioRpcError as err:
            if err.code() in _RETRYABLE:
                self._reread_map()
            level = logging.DEBUG if self._stream_lost else logging.WARNING
            log.log(level, "renewing %d lease(s) failed (%s: %s); retrying", len(due), err.code().name, err.details())
            now = self._loop.time()
            for h in due:
                h.next_renew = now + min(h.renew_every, _EAGER_RENEW)
            return
        now = self._loop.time()
        for held, result in zip(due, response.results):
            self._apply_renew(held, result.code, result.message, result, now)

    def _apply_renew(
        self, held: _Held, code: int, message: str, result: Optional[worker_service_pb2.RenewResult], now: float
    ) -> None:
        if code == _STATUS_OK:
            held.next_renew = now + (min(held.renew_every, _EAGER_RENEW) if self._stream_lost else held.renew_every)
            if result is not None and result.HasField("lease_expires_at"):
                held.ctx.lease_expires_at = _convert.from_timestamp(result.lease_expires_at)
            return
        if code in _LOST_CODES:
            if held.lost:
                return
            held.lost = True
            if held.finished:
                # Usually a renewal that crossed the job's own Ack or Fail; the report says more.
                log.debug("renewing job %s after it finished: %s", held.jid, message)
                return
            log.warning("lease of job %s lost (%s); the server may run it elsewhere", held.jid, message)
            if not held.finished and held.task is not None and not held.task.done():
                held.ctx._cancel("lease_lost")
                held.task.cancel()
            return
        log.warning("renewing job %s: code %d: %s", held.jid, code, message)
        held.next_renew = now + min(held.renew_every, 1.0)

    async def _call_worker_rpc(self, method: str, request: Any) -> None:
        """Calls a unary WorkerService RPC on the worker's channel (Checkpoint, ReportProgress)."""
        link = self._link()
        try:
            await getattr(link.worker, method)(request, timeout=_CALL_TIMEOUT)
        except grpc.aio.AioRpcError as err:
            raise from_rpc_error(err) from None

    async def _renew_one(self, ctx: JobContext) -> _dt.datetime:
        assert self._loop is not None
        link = self._link()
        held = self._held.get(ctx.lease_id)
        request = worker_service_pb2.RenewRequest(leases=[worker_service_pb2.LeaseRef(jid=ctx.jid, lease_id=ctx.lease_id)])
        try:
            response: worker_service_pb2.RenewResponse = await link.worker.Renew(request, timeout=_CALL_TIMEOUT)
        except grpc.aio.AioRpcError as err:
            raise from_rpc_error(err) from None
        result = response.results[0]
        if held is not None:
            self._apply_renew(held, result.code, result.message, result, self._loop.time())
        if result.code != _STATUS_OK:
            raise error_for_code(_status_code(result.code), result.message)
        return _convert.from_timestamp(result.lease_expires_at)

    # --- reporting ------------------------------------------------------------------------

    def _enqueue_report(self, report: _Report) -> None:
        assert self._reports_wakeup is not None and self._reports_idle is not None
        self._reports.append(report)
        self._reports_idle.clear()
        self._reports_wakeup.set()

    async def _report_loop(self) -> None:
        """Sends what finished in Report calls. What finishes while a call is out goes in the
        next one, once that one is answered; but not behind a slow call: the server frees a
        job's slot (this worker's credit) only when its report arrives, so reports held behind
        a call waiting on a stalled disk would leave the worker with nothing to run. After
        _OVERTAKE_AFTER they go out beside it, up to _MAX_REPORT_CALLS calls at once."""
        assert self._reports_wakeup is not None and self._reports_idle is not None
        backoff = _Backoff()
        calls: Set["asyncio.Task[None]"] = set()
        try:
            while True:
                if not self._reports or self._reports_pausing:
                    if not self._reports and not calls:
                        self._reports_idle.set()
                    self._reports_wakeup.clear()
                    wakeup = asyncio.ensure_future(self._reports_wakeup.wait())
                    try:
                        await asyncio.wait({wakeup, *calls}, return_when=asyncio.FIRST_COMPLETED)
                    finally:
                        wakeup.cancel()
                    continue
                if calls:
                    await asyncio.wait(calls, timeout=_OVERTAKE_AFTER, return_when=asyncio.FIRST_COMPLETED)
                if len(calls) >= _MAX_REPORT_CALLS:
                    await asyncio.wait(calls, return_when=asyncio.FIRST_COMPLETED)
                if not self._reports or self._reports_pausing:
                    continue
                batch, self._reports = self._reports[:_MAX_BATCH], self._reports[_MAX_BATCH:]
                call = asyncio.create_task(self._report_call(batch, backoff))
                calls.add(call)
                call.add_done_callback(calls.discard)
        finally:
            for call in list(calls):
                call.cancel()

    async def _report_call(self, batch: List[_Report], backoff: _Backoff) -> None:
        """One Report call; what is to be retried goes back to the front of the queue, and
        no other call goes out until its backoff has passed."""
        acks = [r for r in batch if r.ack is not None]
        fails = [r for r in batch if r.fail is not None]
        request = worker_service_pb2.ReportRequest(
            acks=[r.ack for r in acks if r.ack is not None], fails=[r.fail for r in fails if r.fail is not None]
        )
        opens_before = self._stream_opens
        try:
            response: worker_service_pb2.ReportResponse = await self._link().worker.Report(request, timeout=_CALL_TIMEOUT)
        except grpc.aio.AioRpcError as err:
            if err.code() in _RETRYABLE:
                self._reread_map()
                delay = backoff.next()
                log.warning(
                    "reporting %d job(s) failed (%s: %s); retrying in %.0f ms",
                    len(batch), err.code().name, err.details(), delay * 1000,
                )
                await self._requeue_reports(batch, delay, opens_before)
                return
            log.error("the server refused a Report of %d job(s): %s: %s", len(batch), err.code().name, err.details())
            for report in batch:
                self._settle(report, "error")
            return
        backoff.reset()
        retry: List[_Report] = []
        for report, item in zip(acks, response.acks):
            self._handle_item(report, item.code, item.message, retry)
        for report, item in zip(fails, response.fails):
            self._handle_item(report, item.code, item.message, retry)
        if retry:
            await self._requeue_reports(retry, backoff.next(), opens_before)

    async def _requeue_reports(self, reports: List[_Report], delay: float, opens_before: int) -> None:
        assert self._reports_wakeup is not None
        self._reports[:0] = reports
        self._reports_pausing += 1
        try:
            await self._report_pause(delay, opens_before)
        finally:
            self._reports_pausing -= 1
            self._reports_wakeup.set()

    async def _report_pause(self, delay: float, opens_before: int) -> None:
        """Sleeps before retrying reports; cut short when a stream opens (the server is back),
        or skipped when one opened since the failed call went out."""
        assert self._reports_kick is not None
        if self._stream_opens != opens_before:
            return
        self._reports_kick.clear()
        try:
            await asyncio.wait_for(self._reports_kick.wait(), timeout=delay)
        except asyncio.TimeoutError:
            pass

    def _handle_item(self, report: _Report, code: int, message: str, retry: List[_Report]) -> None:
        kind = "ack" if report.ack is not None else "fail"
        if code == _STATUS_OK:
            self._settle(report, kind)
        elif code in _LOST_CODES:
            log.warning("%s of job %s refused, lease lost (%s): dropped", kind.capitalize(), report.held.jid, message)
            self._settle(report, "lease_lost")
        elif code == _UNAVAILABLE:
            retry.append(report)
        elif kind == "ack" and code in (
            grpc.StatusCode.RESOURCE_EXHAUSTED.value[0],
            grpc.StatusCode.INVALID_ARGUMENT.value[0],
        ):
            # The result itself was refused (too large): fail the job for good instead.
            log.error("result of job %s refused (%s): failing the job", report.held.jid, message)
            retry.append(
                _Report(
                    report.held,
                    fail=worker_service_pb2.FailRequest(
                        jid=report.held.jid,
                        lease_id=report.held.lease_id,
                        message=_truncate_utf8(f"result refused by the server: {message}", _MAX_MESSAGE_BYTES),
                        errtype="ResultRefused",
                        category=job_pb2.FAILURE_CATEGORY_PERMANENT,
                    ),
                )
            )
        elif kind == "fail" and code == grpc.StatusCode.INVALID_ARGUMENT.value[0] and not report.retried_invalid:
            assert report.fail is not None
            log.error("Fail of job %s refused (%s): resending it without details", report.held.jid, message)
            bare = worker_service_pb2.FailRequest(
                jid=report.fail.jid,
                lease_id=report.fail.lease_id,
                message=report.fail.message[:1024],
                errtype="Error",
                category=report.fail.category,
            )
            retry.append(_Report(report.held, fail=bare, retried_invalid=True))
        else:
            log.error("%s of job %s refused: code %d: %s: dropped", kind.capitalize(), report.held.jid, code, message)
            self._settle(report, "error")

    def _settle(self, report: _Report, outcome: str) -> None:
        held = report.held
        self._held.pop(held.lease_id, None)
        if held.has_slot and self._sem is not None:
            held.has_slot = False
            self._sem.release()
        if held.deadline_timer is not None:
            held.deadline_timer.cancel()
        self._emit(WorkerEvent("done", jid=held.jid, attempt=held.job.attempt, type=held.job.type, outcome=outcome))

    # --- graceful shutdown ----------------------------------------------------------------

    async def _wait_all_or_force(self, tasks: Set["asyncio.Task[None]"], timeout: float) -> None:
        """Waits until every task is done, ``timeout`` passes, or a forced stop is requested."""
        assert self._force is not None and self._loop is not None
        deadline = self._loop.time() + timeout
        pending = set(tasks)
        force_wait = asyncio.create_task(self._force.wait())
        try:
            while pending and not self._force.is_set():
                remaining = deadline - self._loop.time()
                if remaining <= 0:
                    break
                done, _ = await asyncio.wait(pending | {force_wait}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
                pending -= done
        finally:
            force_wait.cancel()

    async def _drain(self) -> None:
        """After the stream is closed: let handlers finish within shutdown_timeout, cancel
        the rest (failed back with retry_after 0), then wait for the last reports."""
        assert self._force is not None and self._reports_idle is not None
        tasks = {h.task for h in self._held.values() if h.task is not None and not h.task.done()}
        # Jobs that never got a slot are failed back at once rather than started now.
        for held in self._held.values():
            if not held.started and held.task is not None and not held.task.done():
                held.ctx._cancel("shutdown")
                held.task.cancel()
        if tasks:
            log.info("waiting up to %.1f s for %d running job(s)", self.shutdown_timeout, len(tasks))
            await self._wait_all_or_force(tasks, self.shutdown_timeout)
            still = [(h, h.task) for h in self._held.values() if h.task is not None and not h.task.done()]
            for held, task in still:
                log.warning("job %s still running at shutdown: cancelling it and failing it back", held.jid)
                held.ctx._cancel("shutdown")
                task.cancel()
            if still:
                await asyncio.wait([task for _, task in still])
        if self._reports or not self._reports_idle.is_set():
            try:
                await asyncio.wait_for(self._reports_idle.wait(), timeout=self.flush_timeout)
            except asyncio.TimeoutError:
                log.error(
                    "gave up on %d report(s) after %.1f s: the server did not answer; their leases will lapse",
                    len(self._reports), self.flush_timeout,
                )


def _status_code(code: int) -> grpc.StatusCode:
    for status in grpc.StatusCode:
        if status.value[0] == code:
            return status
    return grpc.StatusCode.UNKNOWN
