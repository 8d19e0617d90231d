"""Worker behaviour the real server cannot trigger yet (QUIET and TERMINATE come from the
ControlWorker RPC, not built) or only with bad luck (UNAVAILABLE on a report), against a small
in-process fake of WorkerService."""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator, List, Optional

import grpc
import grpc.aio

import worq
from conftest import Running, make_worker, run
from worq.v1 import job_pb2, worker_service_pb2, worker_service_pb2_grpc


def leased(jid: str) -> worker_service_pb2.LeasedJob:
    job = job_pb2.Job(jid=jid, type="t", queue="q", attempt=1, state=job_pb2.JOB_STATE_RUNNING)
    job.reserve_for.FromSeconds(1)
    out = worker_service_pb2.LeasedJob(job=job, lease_id=f"lease-{jid}")
    out.execution_deadline.GetCurrentTime()
    out.execution_deadline.seconds += 60
    out.lease_expires_at.GetCurrentTime()
    return out


class FakeWorkerService(worker_service_pb2_grpc.WorkerServiceServicer):
    def __init__(self, control: Optional[int] = None, report_codes: Optional[List[Any]] = None) -> None:
        self.control = control
        self.report_codes = list(report_codes or [])  # per Report call: a StatusCode to abort with, or an item code
        self.leases = 0
        self.stream_closed = asyncio.Event()
        self.reports: List[worker_service_pb2.ReportRequest] = []
        self.renewals = 0

    async def Lease(self, request: Any, context: Any) -> AsyncIterator[worker_service_pb2.LeaseResponse]:
        self.leases += 1
        try:
            yield worker_service_pb2.LeaseResponse(keepalive=worker_service_pb2.Keepalive())
            if self.leases == 1:
                yield worker_service_pb2.LeaseResponse(jobs=worker_service_pb2.LeasedJobs(jobs=[leased("j1")]))
                if self.control is not None:
                    await asyncio.sleep(0.05)
                    yield worker_service_pb2.LeaseResponse(control=worker_service_pb2.Control(action=self.control, reason="test"))
            await asyncio.sleep(60)
        finally:
            self.stream_closed.set()

    async def Renew(self, request: Any, context: Any) -> worker_service_pb2.RenewResponse:
        self.renewals += 1
        return worker_service_pb2.RenewResponse(
            results=[worker_service_pb2.RenewResult(jid=ref.jid, code=0) for ref in request.leases]
        )

    async def Report(self, request: Any, context: Any) -> worker_service_pb2.ReportResponse:
        self.reports.append(request)
        code = self.report_codes.pop(0) if self.report_codes else 0
        if isinstance(code, grpc.StatusCode):
            await context.abort(code, "fake outage")
        item = lambda r: worker_service_pb2.ItemResult(jid=r.jid, code=code, message="fake")  # noqa: E731
        return worker_service_pb2.ReportResponse(acks=[item(a) for a in request.acks], fails=[item(f) for f in request.fails])


async def serve(service: FakeWorkerService) -> "tuple[grpc.aio.Server, str]":
    server = grpc.aio.server()
    worker_service_pb2_grpc.add_WorkerServiceServicer_to_server(service, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, f"127.0.0.1:{port}"


def fake_worker(address: str, hold: asyncio.Event) -> Running:
    """A running worker of queue "q" whose jobs of type "t" finish once `hold` is set."""
    handle = make_worker(address, "q", shutdown_timeout=5)

    @handle.worker.handler("t")
    async def t(job: worq.Job) -> str:
        await hold.wait()
        return "ok"

    handle.task = asyncio.create_task(handle.worker.run())
    return handle


def test_quiet_closes_the_stream_finishes_held_jobs_and_keeps_renewing() -> None:
    async def scenario() -> None:
        service = FakeWorkerService(control=worker_service_pb2.CONTROL_ACTION_QUIET)
        server, address = await serve(service)
        hold = asyncio.Event()
        handle = fake_worker(address, hold)
        try:
            await handle.wait_for(lambda e: e.name == "quiet")
            await asyncio.wait_for(service.stream_closed.wait(), 2)
            renewals = service.renewals
            await asyncio.sleep(0.8)  # reserve_for 1 s: renewed every ~0.33 s
            assert service.renewals > renewals
            hold.set()
            done = await handle.wait_for(lambda e: e.name == "done")
            assert done.outcome == "ack"
            await asyncio.sleep(0.3)
            assert service.leases == 1  # no new stream after QUIET
            assert not handle.task.done()  # still running until stop()
        finally:
            await handle.stop()
            await server.stop(None)

    run(scenario())


def test_terminate_stops_the_worker_gracefully() -> None:
    async def scenario() -> None:
        service = FakeWorkerService(control=worker_service_pb2.CONTROL_ACTION_TERMINATE)
        server, address = await serve(service)
        hold = asyncio.Event()
        handle = fake_worker(address, hold)
        try:
            await handle.wait_for(lambda e: e.name == "start")
            await asyncio.wait_for(service.stream_closed.wait(), 2)
            hold.set()
            await asyncio.wait_for(handle.task, 5)  # returns on its own
            assert [e.name for e in handle.events][-2:] == ["done", "stopped"]
            assert len(service.reports[0].acks) == 1
        finally:
            await server.stop(None)

    run(scenario())


def test_reports_are_retried_on_unavailable_and_dropped_when_the_lease_is_lost() -> None:
    async def scenario() -> None:
        unavailable = grpc.StatusCode.UNAVAILABLE
        lost = grpc.StatusCode.FAILED_PRECONDITION.value[0]
        service = FakeWorkerService(report_codes=[unavailable, unavailable, lost])
        server, address = await serve(service)
        hold = asyncio.Event()
        hold.set()
        handle = fake_worker(address, hold)
        try:
            done = await handle.wait_for(lambda e: e.name == "done", timeout=5)
            assert done.outcome == "lease_lost"
            await asyncio.sleep(0.5)
            assert len(service.reports) == 3  # two UNAVAILABLE, then refused once and never again
        finally:
            await handle.stop()
            await server.stop(None)

    run(scenario())


class CreditsFakeService(worker_service_pb2_grpc.WorkerServiceServicer):
    """Leases `total` jobs as the worker's credits allow, freeing a credit when a job's report
    arrives (as the real server does); the first Report call is held until `release` is set,
    as one waiting on a stalled disk would be."""

    def __init__(self, total: int) -> None:
        self.pending = [f"j{i}" for i in range(total)]
        self.acked: List[str] = []
        self.first_report_arrived = asyncio.Event()
        self.release = asyncio.Event()
        self.freed = asyncio.Event()
        self.freed_slots = 0
        self.report_calls = 0

    async def Lease(self, request: Any, context: Any) -> AsyncIterator[worker_service_pb2.LeaseResponse]:
        credits = request.credits
        yield worker_service_pb2.LeaseResponse(keepalive=worker_service_pb2.Keepalive())
        while True:
            while credits > 0 and self.pending:
                credits -= 1
                yield worker_service_pb2.LeaseResponse(jobs=worker_service_pb2.LeasedJobs(jobs=[leased(self.pending.pop(0))]))
            while self.freed_slots == 0:
                self.freed.clear()
                await self.freed.wait()
            credits += self.freed_slots
            self.freed_slots = 0

    async def Renew(self, request: Any, context: Any) -> worker_service_pb2.RenewResponse:
        return worker_service_pb2.RenewResponse(results=[worker_service_pb2.RenewResult(jid=ref.jid, code=0) for ref in request.leases])

    async def Report(self, request: Any, context: Any) -> worker_service_pb2.ReportResponse:
        self.report_calls += 1
        self.freed_slots += len(request.acks)  # a slot is free as soon as its report arrives
        self.freed.set()
        if self.report_calls == 1:
            self.first_report_arrived.set()
            await self.release.wait()
        self.acked.extend(a.jid for a in request.acks)
        return worker_service_pb2.ReportResponse(acks=[worker_service_pb2.ItemResult(jid=a.jid, code=0) for a in request.acks])


def test_a_report_call_that_does_not_return_does_not_stop_the_work() -> None:
    async def scenario() -> None:
        service = CreditsFakeService(total=12)
        server, address = await serve(service)
        handle = make_worker(address, "q", concurrency=2, shutdown_timeout=5)

        @handle.worker.handler("t")
        async def t(job: worq.Job) -> str:
            if job.jid != "j0":
                await service.first_report_arrived.wait()  # so the held call carries j0 alone
            return "ok"

        handle.task = asyncio.create_task(handle.worker.run())
        try:
            deadline = asyncio.get_running_loop().time() + 10
            while len(service.acked) < 11 and asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(0.01)
            assert sorted(service.acked) == sorted(f"j{i}" for i in range(1, 12))  # all but the held j0
            service.release.set()
            await handle.wait_for(lambda e: e.name == "done" and e.jid == "j0", timeout=5)
        finally:
            service.release.set()
            await handle.stop()
            await server.stop(None)

    run(scenario())


class OutageFakeService(worker_service_pb2_grpc.WorkerServiceServicer):
    """An outage as a worker sees it: the first `failures` Report calls fail UNAVAILABLE, so
    the worker's report backoff grows; the last of them is held until the Lease stream has
    dropped and a new one is open (the server is back), and only then fails."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.report_times: List[float] = []
        self.held_failed_at = 0.0
        self.leases = 0
        self.held_arrived = asyncio.Event()
        self.second_stream = asyncio.Event()

    async def Lease(self, request: Any, context: Any) -> AsyncIterator[worker_service_pb2.LeaseResponse]:
        self.leases += 1
        yield worker_service_pb2.LeaseResponse(keepalive=worker_service_pb2.Keepalive())
        if self.leases == 1:
            yield worker_service_pb2.LeaseResponse(jobs=worker_service_pb2.LeasedJobs(jobs=[leased("j1")]))
            await self.held_arrived.wait()
            await context.abort(grpc.StatusCode.UNAVAILABLE, "fake restart")
        self.second_stream.set()
        await asyncio.sleep(60)

    async def Renew(self, request: Any, context: Any) -> worker_service_pb2.RenewResponse:
        return worker_service_pb2.RenewResponse(results=[worker_service_pb2.RenewResult(jid=ref.jid, code=0) for ref in request.leases])

    async def Report(self, request: Any, context: Any) -> worker_service_pb2.ReportResponse:
        loop = asyncio.get_running_loop()
        self.report_times.append(loop.time())
        calls = len(self.report_times)
        if calls == self.failures:
            self.held_arrived.set()
            await self.second_stream.wait()
            await asyncio.sleep(0.1)  # the worker has seen the new stream open
            self.held_failed_at = loop.time()
        if calls <= self.failures:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "fake outage")
        return worker_service_pb2.ReportResponse(acks=[worker_service_pb2.ItemResult(jid=a.jid, code=0) for a in request.acks])


def test_a_report_failing_after_the_server_is_back_is_retried_at_once() -> None:
    async def scenario() -> None:
        # Four quick failures take the report backoff to 0.8-1.6 s for the fifth.
        service = OutageFakeService(failures=5)
        server, address = await serve(service)
        hold = asyncio.Event()
        hold.set()
        handle = fake_worker(address, hold)
        try:
            done = await handle.wait_for(lambda e: e.name == "done", timeout=10)
            assert done.outcome == "ack"
            assert len(service.report_times) == 6
            # The held call went out before the new stream opened and failed after: the server
            # is back, so its retry does not wait out the backoff.
            assert service.report_times[5] - service.held_failed_at < 0.5
        finally:
            await handle.stop()
            await server.stop(None)

    run(scenario())
