"""A worker over several partitions moves its concurrency between its streams, against a fake
partitioned cluster: its streams report whether jobs wait, SetLeaseCredits goes to each
stream's own server, a part runs as many handlers as its stream's limit, and a stream that
reconnects opens with the limit it was last given."""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator, Dict, List, Set, Tuple

import grpc
import grpc.aio

import worq
from conftest import run
from test_partition import FakeAdmin, leased, queue_in, until
from worq.v1 import admin_service_pb2_grpc, worker_service_pb2, worker_service_pb2_grpc


class CreditWorkers(worker_service_pb2_grpc.WorkerServiceServicer):
    """One partition's server: each Lease stream gets an id and an outbox the test writes to
    (Waiting, jobs, or None to end the stream); SetLeaseCredits is recorded and answers what
    the stream holds (jobs pushed and not yet reported)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.leases: List[Tuple[List[str], int, bool]] = []
        self.set_credits: List[Tuple[str, int]] = []
        self.outbox: "asyncio.Queue[Any]" = asyncio.Queue()
        self.held: Set[str] = set()
        self.stream_id = ""
        self.pushed = 0

    async def Lease(self, request: Any, context: Any) -> AsyncIterator[worker_service_pb2.LeaseResponse]:
        self.leases.append((list(request.queues), request.credits, request.report_waiting))
        self.stream_id = f"{self.name}-stream-{len(self.leases)}"
        yield worker_service_pb2.LeaseResponse(keepalive=worker_service_pb2.Keepalive(stream_id=self.stream_id))
        while True:
            message = await self.outbox.get()
            if message is None:
                return
            if message.WhichOneof("kind") == "jobs":
                self.held.update(job.job.jid for job in message.jobs.jobs)
            yield message

    async def SetLeaseCredits(self, request: Any, context: Any) -> worker_service_pb2.SetLeaseCreditsResponse:
        self.set_credits.append((request.stream_id, request.credits))
        if request.stream_id != self.stream_id:
            await context.abort(grpc.StatusCode.NOT_FOUND, "no such stream")
        return worker_service_pb2.SetLeaseCreditsResponse(held=len(self.held))

    async def Renew(self, request: Any, context: Any) -> worker_service_pb2.RenewResponse:
        return worker_service_pb2.RenewResponse(
            results=[worker_service_pb2.RenewResult(jid=ref.jid, code=0) for ref in request.leases]
        )

    async def Report(self, request: Any, context: Any) -> worker_service_pb2.ReportResponse:
        self.held.difference_update(ack.jid for ack in request.acks)
        return worker_service_pb2.ReportResponse(acks=[worker_service_pb2.ItemResult(jid=a.jid, code=0) for a in request.acks])

    def waiting(self, waiting: bool) -> None:
        self.outbox.put_nowait(worker_service_pb2.LeaseResponse(waiting=worker_service_pb2.Waiting(waiting=waiting)))

    def push(self, queue: str, count: int) -> None:
        jobs = [leased(f"{self.name}-job-{self.pushed + n}", queue) for n in range(count)]
        self.pushed += count
        self.outbox.put_nowait(worker_service_pb2.LeaseResponse(jobs=worker_service_pb2.LeasedJobs(jobs=jobs)))


class Server:
    def __init__(self, name: str) -> None:
        self.workers = CreditWorkers(name)
        self.server = grpc.aio.server()
        worker_service_pb2_grpc.add_WorkerServiceServicer_to_server(self.workers, self.server)
        self.address = f"127.0.0.1:{self.server.add_insecure_port('127.0.0.1:0')}"


class Cluster:
    """A node (the map, and a worker service to catch calls it should not get) and the own
    servers of partitions 0 (P) and 2 (Q), of 4; 1 and 3 have no owner."""

    def __init__(self) -> None:
        self.node = Server("node")
        self.p = Server("P")
        self.q = Server("Q")
        self.admin = FakeAdmin(4, {0: self.p.address, 2: self.q.address})
        admin_service_pb2_grpc.add_AdminServiceServicer_to_server(self.admin, self.node.server)

    async def __aenter__(self) -> "Cluster":
        for server in (self.node, self.p, self.q):
            await server.server.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        for server in (self.node, self.p, self.q):
            await server.server.stop(None)


def test_credit_moves_to_the_stream_whose_jobs_wait_and_its_handlers_may_use_it() -> None:
    async def scenario() -> None:
        async with Cluster() as cluster:
            p, q = cluster.p.workers, cluster.q.workers
            queue_p, queue_q = queue_in(0), queue_in(2)
            events: List[worq.WorkerEvent] = []
            worker = worq.Worker(cluster.node.address, queues=[queue_p, queue_q], concurrency=6, on_event=events.append, shutdown_timeout=2)
            release = asyncio.Event()
            running: Dict[str, int] = {"now": 0, "most": 0}

            @worker.handler("t")
            async def t(job: worq.Job) -> str:
                running["now"] += 1
                running["most"] = max(running["most"], running["now"])
                try:
                    await release.wait()
                finally:
                    running["now"] -= 1
                return "ok"

            task = asyncio.create_task(worker.run())
            try:
                await until(lambda: p.stream_id != "" and q.stream_id != "" and any(e.name == "ready" for e in events))
                # Each stream opens with an even share, asking to be told when jobs wait.
                assert p.leases == [([queue_p], 3, True)] and q.leases == [([queue_q], 3, True)]
                # P's queue has more ready than its 3: Q (nothing waiting) keeps 1, P gets 5.
                p.push(queue_p, 3)
                p.waiting(True)
                await until(lambda: p.set_credits == [(p.stream_id, 5)])
                assert q.set_credits == [(q.stream_id, 1)]
                assert cluster.node.workers.set_credits == []
                # The part runs as many handlers as its stream's new limit.
                p.push(queue_p, 2)
                await until(lambda: running["now"] == 5)
                q.push(queue_q, 1)
                await until(lambda: running["now"] == 6)
                assert running["most"] == 6
                release.set()
                await until(lambda: not p.held and not q.held)
                # P's stream drops: the next one opens with the limit it was last given.
                p.outbox.put_nowait(None)
                await until(lambda: len(p.leases) == 2)
                assert p.leases[1] == ([queue_p], 5, True)
                # Q's jobs wait now: P has nothing waiting any more, so keeps 1; Q gets 5.
                q.waiting(True)
                await until(lambda: q.set_credits[-1:] == [(q.stream_id, 5)])
                assert p.set_credits[-1] == (p.stream_id, 1)
            finally:
                release.set()
                worker.stop()
                await task

    run(scenario())


def test_a_busy_stream_keeps_its_credit_and_gives_it_once_its_jobs_are_reported() -> None:
    async def scenario() -> None:
        async with Cluster() as cluster:
            p, q = cluster.p.workers, cluster.q.workers
            queue_p, queue_q = queue_in(0), queue_in(2)
            worker = worq.Worker(cluster.node.address, queues=[queue_p, queue_q], concurrency=4, shutdown_timeout=2)
            release = asyncio.Event()
            running = [0]

            @worker.handler("t")
            async def t(job: worq.Job) -> str:
                running[0] += 1
                await release.wait()
                return "ok"

            task = asyncio.create_task(worker.run())
            try:
                await until(lambda: p.stream_id != "" and q.stream_id != "")
                q.push(queue_q, 2)  # Q holds its 2
                await until(lambda: running[0] == 2)
                p.push(queue_p, 2)
                p.waiting(True)
                # Q has nothing waiting but is still working its 2: it keeps them, nothing is free for P.
                await asyncio.sleep(0.3)
                assert q.set_credits == [] and p.set_credits == []
                release.set()  # Q's jobs are reported: on a retry Q is lowered to 1 and P gets the credit
                await until(lambda: p.set_credits == [(p.stream_id, 3)])
                assert q.set_credits == [(q.stream_id, 1)]
            finally:
                release.set()
                worker.stop()
                await task

    run(scenario())
