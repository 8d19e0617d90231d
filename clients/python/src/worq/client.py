"""The producer side: :class:`Client` submits jobs and follows them."""

from __future__ import annotations

import datetime as _dt
import time
from types import TracebackType
from typing import Any, AsyncIterator, Awaitable, Callable, List, Mapping, Optional, Sequence, Type, TypeVar, Union

import grpc
import grpc.aio

from worq.v1 import admin_service_pb2, batch_pb2, job_pb2
from worq.v1 import producer_service_pb2

from . import _convert
from ._channel import TLS, ChannelOptions, open_channel
from ._convert import Seconds
from ._partition import may_have_moved, never_sent
from ._routes import Link, PartitionRoutes
from .errors import DeadlineExceeded, from_rpc_error
from .types import Batch, Dependencies, Job, JobSpec, JobState, Priority, RetryPolicy, SubmitResult

__all__ = ["Client"]

T = TypeVar("T")

# The longest wait the server takes in one GetResult or Run call; longer waits are chained.
_MAX_SERVER_WAIT = 3600.0

# Extra time the gRPC deadline of a waiting call gets beyond the server-side wait, so that the
# server's DEADLINE_EXCEEDED (with its metadata) arrives before our own deadline cuts the call.
_WAIT_MARGIN = 5.0


class Client:
    """Submits jobs to a Worq server and reads them back. Every method is a coroutine.

    ::

        async with worq.Client("127.0.0.1:7419") as client:
            jid = await client.submit("email.send", args=["a@example.com"], queue="mail")
            job = await client.wait_result(jid, timeout=30)
            print(job.state.name, job.result_text)

    Errors are :mod:`worq.errors` exceptions carrying the gRPC status code. The channel is
    opened on first use, inside the running event loop; ``close()`` (or leaving the ``async
    with`` block) closes it.

    On a partitioned cluster (``worq serve --cluster --partitions``) each call goes straight
    to the server of its job's partition (see ``partition_routing``).
    """

    def __init__(
        self,
        address: str = "127.0.0.1:7419",
        *,
        timeout: Optional[float] = 30.0,
        channel_options: Optional[ChannelOptions] = None,
        token: Optional[str] = None,
        tls: Optional[Union[TLS, bool]] = None,
        channel: Optional[grpc.aio.Channel] = None,
        partition_routing: bool = True,
    ) -> None:
        """``timeout`` is the deadline of each call in seconds (None: no deadline). Pass
        ``channel`` to share a grpc.aio channel you manage (then ``close()`` leaves it open).
        ``token`` is sent as ``authorization: Bearer <token>`` (servers with --auth-tokens);
        ``tls`` connects over TLS (a :class:`worq.TLS`, or True for the system's roots).

        ``partition_routing``: on a partitioned cluster, send each call straight to the server
        of the partition its job lives in (by the job's queue, or by the partition its jid
        names; a new job of a queue spread over several partitions by its unique, debounce,
        group or idempotency key, the first set, else to each of them in turn) rather than
        through the node at ``address``, which would forward it. The partition map is read
        with one GetServerInfo before the first call, and again when a call finds a partition
        moved; on a server that is not partitioned (or one that refuses GetServerInfo) every
        call goes to ``address``. Off with a ``channel`` of your own, since channels to the
        partitions' servers could not be made like it."""
        self.address = address
        self.timeout = timeout
        self._channel_options = channel_options
        self._token = token
        self._tls = tls
        self._channel: Optional[grpc.aio.Channel] = channel
        self._owns_channel = channel is None
        self._partition_routing = partition_routing and channel is None
        self._node: Optional[Link] = None
        self._routes: Optional[PartitionRoutes] = None

    # --- lifecycle ------------------------------------------------------------------------

    async def __aenter__(self) -> "Client":
        self._stubs()
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Closes the channel (if this client opened it), and those to partitions' servers."""
        channel, self._channel = self._channel, None
        routes, self._routes = self._routes, None
        self._node = None
        if routes is not None:
            await routes.close()
        if channel is not None and self._owns_channel:
            await channel.close()

    def _stubs(self) -> Link:
        """The link to ``address``, opening the channel on first use."""
        if self._channel is None:
            self._channel = open_channel(self.address, self._channel_options, token=self._token, tls=self._tls)
            self._owns_channel = True
        if self._node is None:
            self._node = Link(self._channel)
            if self._partition_routing:
                self._routes = PartitionRoutes(self._node, self._open_partition_channel)
        return self._node

    def _open_partition_channel(self, address: str) -> grpc.aio.Channel:
        return open_channel(address, self._channel_options, token=self._token, tls=self._tls)

    async def _link(
        self,
        *,
        job: Optional[job_pb2.JobSpec] = None,
        batch: Optional[Sequence[job_pb2.JobSpec]] = None,
        jid: Optional[str] = None,
    ) -> Link:
        """Where a call creating ``job`` (or the jobs of ``batch``), or about ``jid``, goes: its
        partition's server when routing and the map names one, else ``address``."""
        node = self._stubs()
        routes = self._routes
        if routes is None:
            return node
        await routes.ready()
        if job is not None:
            return routes.link_of(routes.partition_of_job(job))
        if batch is not None:
            return routes.link_of(routes.partition_of_batch(batch))
        if jid is not None:
            return routes.link_of(routes.partition_of_jid(jid))
        return node

    async def _call(self, link: Link, fn: Callable[[Link], Awaitable[T]]) -> T:
        """Runs ``fn`` on ``link``. A call to a partition's server that never reached it (its
        connection was refused: the server died, or its partition moved) is sent through
        ``address`` instead, which waits for the partition's next server; one that may have
        reached it is not sent again (a submit might then be made twice)."""
        try:
            return await fn(link)
        except grpc.RpcError as err:
            self._after_error(err)
            node = self._node
            unsent = isinstance(err, grpc.aio.AioRpcError) and never_sent(err.code(), err.details())
            if node is None or link is node or not unsent:
                raise from_rpc_error(err) from None
        try:
            return await fn(node)
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None

    def _after_error(self, err: grpc.RpcError) -> None:
        """Reads the partition map again when an answer says a partition may have moved: the
        call is not retried (a submit might then be made twice), but the next ones go where
        the partition is now."""
        routes = self._routes
        if routes is None or not routes.worth_rereading or not isinstance(err, grpc.aio.AioRpcError):
            return
        if may_have_moved(err.code(), err.details()):
            routes.refresh_soon()

    # --- producing ------------------------------------------------------------------------

    async def submit(
        self,
        type: str,
        *,
        args: Optional[Sequence[Any]] = None,
        kwargs: Optional[Mapping[str, Any]] = None,
        payload: Union[bytes, str, None] = None,
        queue: str = "default",
        priority: Union[Priority, str, int, None] = None,
        at: Optional[_dt.datetime] = None,
        delay: Optional[Seconds] = None,
        retry: Union[RetryPolicy, Mapping[str, Any], None] = None,
        custom: Optional[Mapping[str, Any]] = None,
        reserve_for: Optional[Seconds] = None,
        execution_timeout: Optional[Seconds] = None,
        backtrace: Optional[int] = None,
        tags: Optional[Mapping[str, str]] = None,
        correlation_id: Optional[str] = None,
        ttl: Optional[Seconds] = None,
        idempotency_key: Optional[str] = None,
        depends_on: Union[Dependencies, Mapping[str, Any], Sequence[str], None] = None,
        parent_jid: Optional[str] = None,
        callback_url: Optional[str] = None,
        group: Optional[str] = None,
        unique: Optional[Mapping[str, Any]] = None,
        debounce: Optional[Mapping[str, Any]] = None,
        trace: Union[Mapping[str, str], bool, None] = None,
        batch_id: Optional[str] = None,
    ) -> str:
        """Creates one job and returns its jid once it is on disk.

        ``args`` (list) and ``kwargs``/``custom`` (dicts) must be JSON-compatible; ``payload``
        is opaque bytes (a str is sent as UTF-8). ``at`` (datetime; naive means local time) or
        ``delay`` (seconds or timedelta) schedule it; ``reserve_for`` and ``execution_timeout``
        are seconds or timedeltas; ``priority`` is a :class:`Priority` or its name
        (``"high"``); ``retry`` a :class:`RetryPolicy` or a dict of its fields. ``depends_on``
        is a list of jids or a :class:`Dependencies`. With an ``idempotency_key`` already used
        for this type within the server's window, the earlier job's jid is returned.
        ``unique`` (``{"key", "until", "window"}``) returns the job holding the key instead of
        creating one; ``debounce`` (``{"key", "delay"}``) updates a job of the key that has not
        started yet and returns its jid. :meth:`submit_detailed` tells which happened. ``group``
        puts the job in a group of its queue (limits per group, turns between groups).
        ``trace`` (``{"traceparent", "tracestate"}``) is the W3C trace context the job carries;
        by default the active OpenTelemetry span's, when opentelemetry-api is installed; False: none.
        ``batch_id`` adds it to a batch (:meth:`create_batch`).
        """
        spec = JobSpec(
            type=type,
            args=args,
            kwargs=kwargs,
            payload=payload,
            queue=queue,
            priority=priority,
            at=at,
            delay=delay,
            retry=retry,
            custom=custom,
            reserve_for=reserve_for,
            execution_timeout=execution_timeout,
            backtrace=backtrace,
            tags=tags,
            correlation_id=correlation_id,
            ttl=ttl,
            idempotency_key=idempotency_key,
            depends_on=depends_on,
            parent_jid=parent_jid,
            callback_url=callback_url,
            group=group,
            unique=unique,
            debounce=debounce,
            trace=trace,
            batch_id=batch_id,
        )
        return (await self._submit(spec)).jid

    async def submit_detailed(self, type: str, **spec: Any) -> SubmitResult:
        """As :meth:`submit` (same keyword arguments), returning a :class:`SubmitResult`: the
        jid, and whether the submit was a ``duplicate`` (idempotency or unique key held) or
        ``debounced`` into a waiting job."""
        return await self._submit(JobSpec.coerce({"type": type, **spec}, "job"))

    async def _submit(self, spec: JobSpec) -> SubmitResult:
        request = producer_service_pb2.SubmitRequest(job=spec.to_proto("job"))
        link = await self._link(job=request.job)
        response: producer_service_pb2.SubmitResponse = await self._call(
            link, lambda at: at.producer.Submit(request, timeout=self.timeout)
        )
        return SubmitResult(
            jid=response.jid, duplicate=response.duplicate, debounced=response.debounced, state=JobState(response.state)
        )

    async def submit_batch(self, jobs: Sequence[Union[JobSpec, Mapping[str, Any]]]) -> List[str]:
        """Creates up to 10,000 jobs atomically (all or none). Each item is a :class:`JobSpec`
        or a dict with :meth:`submit`'s keyword arguments plus ``type``. Returns the jids in order.
        On a partitioned cluster the batch goes to the partition they all may go to (the jobs
        of a spread queue without a placement key go with the others), else to its first
        job's, which stores it all or none and leaves each other partition its part; a job of
        another partition than the first job's may then not carry an idempotency, unique or
        debounce key, a batch id or a parent (INVALID_ARGUMENT naming the field)."""
        specs = [JobSpec.coerce(job, f"jobs[{i}]").to_proto(f"jobs[{i}]") for i, job in enumerate(jobs)]
        request = producer_service_pb2.SubmitBatchRequest(jobs=specs)
        link = await self._link(batch=specs)
        response: producer_service_pb2.SubmitBatchResponse = await self._call(
            link, lambda at: at.producer.SubmitBatch(request, timeout=self.timeout)
        )
        return [item.jid for item in response.jobs]

    async def run(self, type: str, *, wait_timeout: Seconds = 60.0, **spec: Any) -> Job:
        """Submits a job and waits up to ``wait_timeout`` for it to reach a terminal state
        (submit-and-wait). Takes :meth:`submit`'s keyword arguments. Raises
        :class:`worq.errors.DeadlineExceeded` when the wait runs out; its ``jid`` names the job,
        which is left as it is."""
        job = JobSpec.coerce({"type": type, **spec}, "job")
        wait = _convert.seconds_of(wait_timeout, "wait_timeout")
        first = min(wait, _MAX_SERVER_WAIT)
        request = producer_service_pb2.RunRequest(
            job=job.to_proto("job"), wait_timeout=_convert.to_duration(first, "wait_timeout")
        )
        link = await self._link(job=request.job)
        started = time.monotonic()
        try:
            response: producer_service_pb2.RunResponse = await self._call(
                link, lambda at: at.producer.Run(request, timeout=first + _WAIT_MARGIN)
            )
        except DeadlineExceeded as err:
            left = wait - (time.monotonic() - started)
            if err.jid is None or left <= 0:
                raise
            return await self.wait_result(err.jid, left)  # waits over an hour: keep waiting
        return Job(response.job)

    # --- batches --------------------------------------------------------------------------

    async def create_batch(
        self,
        *,
        description: str = "",
        parent_batch_id: Optional[str] = None,
        on_success: Union[JobSpec, Mapping[str, Any], None] = None,
        on_complete: Union[JobSpec, Mapping[str, Any], None] = None,
        on_success_webhook: Optional[str] = None,
        on_complete_webhook: Optional[str] = None,
    ) -> Batch:
        """Creates an open batch; jobs join it with ``submit(..., batch_id=batch.id)``. Once
        sealed (:meth:`seal_batch`) and every job and child batch finished, it is done and its
        callback jobs are enqueued once: ``on_complete`` always, ``on_success`` only when every
        job COMPLETED. Each callback is a :class:`JobSpec` or a dict of :meth:`submit`'s keyword
        arguments plus ``type``; its ``custom`` gets ``"batch_id"``. ``on_success_webhook`` and
        ``on_complete_webhook`` are URLs POSTed the batch at the same moments (their origin must
        be in the server's ``--callback-allow``)."""
        spec = batch_pb2.BatchSpec(description=description, parent_batch_id=parent_batch_id or "")
        if on_success is not None:
            spec.on_success.job.CopyFrom(JobSpec.coerce(on_success, "batch.on_success.job").to_proto("batch.on_success.job"))
        if on_complete is not None:
            spec.on_complete.job.CopyFrom(JobSpec.coerce(on_complete, "batch.on_complete.job").to_proto("batch.on_complete.job"))
        if on_success_webhook:
            spec.on_success.webhook_url = on_success_webhook
        if on_complete_webhook:
            spec.on_complete.webhook_url = on_complete_webhook
        request = producer_service_pb2.CreateBatchRequest(batch=spec)
        # A child batch lives with its parent; a batch without one with its callback job,
        # which its engine stores. Two callback jobs of different queues, or none, go through
        # the node, which picks a partition that may hold both (or any).
        callbacks = [c.job for c in (spec.on_success, spec.on_complete) if c.HasField("job")]
        if parent_batch_id:
            link = await self._link(jid=parent_batch_id)
        elif callbacks and all(c.queue == callbacks[0].queue for c in callbacks):
            link = await self._link(job=callbacks[0])
        else:
            link = self._stubs()
        response: producer_service_pb2.CreateBatchResponse = await self._call(
            link, lambda at: at.producer.CreateBatch(request, timeout=self.timeout)
        )
        return Batch(response.batch)

    async def seal_batch(self, batch_id: str) -> Batch:
        """Seals a batch: only its own running jobs add jobs to it from now on (with
        ``parent_jid`` naming themselves). :class:`worq.errors.LeaseLost` (FAILED_PRECONDITION)
        when it is already sealed."""
        request = producer_service_pb2.SealBatchRequest(id=batch_id)
        link = await self._link(jid=batch_id)
        response: producer_service_pb2.SealBatchResponse = await self._call(
            link, lambda at: at.producer.SealBatch(request, timeout=self.timeout)
        )
        return Batch(response.batch)

    async def get_batch(self, batch_id: str) -> Batch:
        """The batch now, with its counts."""
        request = producer_service_pb2.GetBatchRequest(id=batch_id)
        link = await self._link(jid=batch_id)
        response: producer_service_pb2.GetBatchResponse = await self._call(
            link, lambda at: at.producer.GetBatch(request, timeout=self.timeout)
        )
        return Batch(response.batch)

    async def wait_batch(self, batch_id: str, timeout: Seconds = 60.0) -> Batch:
        """Waits up to ``timeout`` (seconds or timedelta) for the batch to be done and returns
        it; :class:`worq.errors.DeadlineExceeded` if it is not by then."""
        wait = _convert.seconds_of(timeout, "timeout")
        if wait < 0:
            raise ValueError("timeout: must be >= 0")
        deadline = time.monotonic() + wait
        while True:
            link = await self._link(jid=batch_id)
            chunk = min(max(deadline - time.monotonic(), 0.0), _MAX_SERVER_WAIT)
            request = producer_service_pb2.GetBatchRequest(id=batch_id, wait=_convert.to_duration(chunk, "timeout"))
            try:
                response: producer_service_pb2.GetBatchResponse = await self._call(
                    link, lambda at: at.producer.GetBatch(request, timeout=chunk + _WAIT_MARGIN)
                )
            except DeadlineExceeded:
                if deadline - time.monotonic() > 0:
                    continue
                raise
            batch = Batch(response.batch)
            if batch.done or chunk == 0:
                return batch
            if deadline - time.monotonic() <= 0:
                return batch

    # --- following ------------------------------------------------------------------------

    async def get_job(self, jid: str) -> Job:
        """The job now, with its state, failure and result. :class:`worq.errors.NotFound` for an unknown jid."""
        request = admin_service_pb2.GetJobRequest(jid=jid)
        link = await self._link(jid=jid)
        response: admin_service_pb2.GetJobResponse = await self._call(
            link, lambda at: at.admin.GetJob(request, timeout=self.timeout)
        )
        return Job(response.job)

    async def watch(self, jid: str) -> AsyncIterator[Job]:
        """Follows a job (WatchJob): yields it as it is now, then after each state change,
        checkpoint and progress report, and ends after it finishes (the last one carries the
        result). :class:`worq.errors.NotFound` for an unknown jid or one deleted meanwhile.
        Leaving the ``async for`` loop stops watching."""
        request = producer_service_pb2.WatchJobRequest(jid=jid)
        link = await self._link(jid=jid)
        call = link.producer.WatchJob(request)
        try:
            async for message in call:
                yield Job(message.job)
        except grpc.RpcError as err:
            self._after_error(err)
            raise from_rpc_error(err) from None
        finally:
            call.cancel()

    async def cancel(self, jid: str) -> Job:
        """Moves a job that has not finished to CANCELLED and returns it. A running job's
        worker is told to stop. :class:`worq.errors.LeaseLost` (FAILED_PRECONDITION) when it
        already finished, :class:`worq.errors.NotFound` for an unknown jid."""
        request = producer_service_pb2.CancelRequest(jid=jid)
        link = await self._link(jid=jid)
        response: producer_service_pb2.CancelResponse = await self._call(
            link, lambda at: at.producer.Cancel(request, timeout=self.timeout)
        )
        return Job(response.job)

    async def delete_job(self, jid: str) -> None:
        """Deletes a job, its result and its indexes, whatever its state (admin)."""
        request = admin_service_pb2.DeleteJobRequest(jid=jid)
        link = await self._link(jid=jid)
        await self._call(link, lambda at: at.admin.DeleteJob(request, timeout=self.timeout))

    async def wait_result(self, jid: str, timeout: Seconds = 60.0) -> Job:
        """Waits up to ``timeout`` (seconds or timedelta, at most 1 h) for the job to reach a
        terminal state (COMPLETED, FAILED, DEAD_LETTER, CANCELLED) and returns it. Raises
        :class:`worq.errors.DeadlineExceeded` if it has not finished by then. Check
        ``job.state``: a job that failed for good is returned, not raised. Waits longer than
        the server's one-hour cap are chained over several calls."""
        wait = _convert.seconds_of(timeout, "timeout")
        if wait < 0:
            raise ValueError("timeout: must be >= 0")
        deadline = time.monotonic() + wait
        while True:
            link = await self._link(jid=jid)
            # The server waits at most an hour per call: chain calls for longer waits.
            chunk = min(max(deadline - time.monotonic(), 0.0), _MAX_SERVER_WAIT)
            request = producer_service_pb2.GetResultRequest(
                jid=jid, wait_timeout=_convert.to_duration(chunk, "timeout")
            )
            try:
                response: producer_service_pb2.GetResultResponse = await self._call(
                    link, lambda at: at.producer.GetResult(request, timeout=chunk + _WAIT_MARGIN)
                )
            except DeadlineExceeded:
                if deadline - time.monotonic() > 0:
                    continue
                raise
            return Job(response.job)

    async def collect_children(self, parent_jid: str, timeout: Seconds = 60.0) -> "tuple[List[Job], bool]":
        """FAN_OUT: waits up to ``timeout`` (at most 1 h) until every job spawned by
        ``parent_jid`` (submitted with it as ``parent_jid``) is finished, those spawned
        meanwhile included, and returns ``(children, finished)``: the children with their
        results, oldest first, and whether all were finished (False when the wait ran out)."""
        wait = _convert.seconds_of(timeout, "timeout")
        if not 0 <= wait <= _MAX_SERVER_WAIT:
            raise ValueError("timeout: must be between 0 and 3600 seconds")
        link = await self._link(jid=parent_jid)
        request = producer_service_pb2.CollectChildrenRequest(
            parent_jid=parent_jid, wait_timeout=_convert.to_duration(wait, "timeout")
        )
        first: producer_service_pb2.CollectChildrenResponse = await self._call(
            link, lambda at: at.producer.CollectChildren(request, timeout=wait + _WAIT_MARGIN)
        )
        children = [Job(job) for job in first.children]
        token = first.next_page_token
        while token:
            page_request = producer_service_pb2.CollectChildrenRequest(parent_jid=parent_jid, page_token=token)
            page: producer_service_pb2.CollectChildrenResponse = await self._call(
                link, lambda at: at.producer.CollectChildren(page_request)
            )
            children.extend(Job(job) for job in page.children)
            token = page.next_page_token
        return children, first.finished
