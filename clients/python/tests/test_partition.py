"""Partition routing: the placement rules every Worq library shares (their test vectors), the
library against a fake partitioned cluster (in-process gRPC servers standing for a node and
two partition servers), and against a real server that is not partitioned."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from typing import Any, AsyncIterator, Callable, Dict, List, Optional, Tuple

import grpc
import grpc.aio
import pytest

import worq
from conftest import Running, ServerProcess, run, running
from worq._partition import even_shares, fnv1a32, may_have_moved, never_sent, partition_of_id, queue_home
from worq.v1 import admin_service_pb2, admin_service_pb2_grpc, batch_pb2, job_pb2
from worq.v1 import producer_service_pb2, producer_service_pb2_grpc, worker_service_pb2, worker_service_pb2_grpc

# (queue, fnv1a32, home of 4, home of 16): the same vectors as the TS and Go libraries'.
VECTORS = [
    ("default", 2470140894, 2, 14),
    ("emails", 3339240540, 0, 12),
    ("pf-0", 2324338534, 2, 6),
    ("täsk.😀", 3583069561, 1, 9),
    ("a", 3826002220, 0, 12),
]


def jid_in(partition: int, high_bits: int = 0x800) -> str:
    """A jid whose last ten bits name ``partition`` (the two above them random, as the server's)."""
    return f"0f8fad5b-d9cb-469f-a165-708677281{high_bits | partition:03x}"


def queue_in(partition: int, count: int = 4) -> str:
    return next(f"q-{i}" for i in range(1000) if queue_home(f"q-{i}", count) == partition)


# --- the placement rules --------------------------------------------------------------------


def test_fnv1a32_and_queue_homes_match_the_shared_vectors() -> None:
    for queue, hashed, home4, home16 in VECTORS:
        assert fnv1a32(queue) == hashed, queue
        assert queue_home(queue, 4) == home4, queue
        assert queue_home(queue, 16) == home16, queue
    assert fnv1a32("") == 2166136261
    # A job without a queue goes to the default queue, and so to its partition.
    assert queue_home("", 16) == queue_home("default", 16) == 14


def test_a_jid_names_its_partition_in_its_last_ten_bits() -> None:
    assert partition_of_id(jid_in(5), 16) == 5
    assert partition_of_id(jid_in(5, high_bits=0xC00), 16) == 5
    assert partition_of_id(jid_in(1023), 1024) == 1023
    assert partition_of_id(jid_in(0x3A).upper(), 64) == 0x3A
    # Bits naming no partition: no such job (the server at the given address says so).
    assert partition_of_id(jid_in(5), 4) is None
    assert partition_of_id("not a jid", 4) is None
    # One partition: every id is in it, those made before partitioning included.
    assert partition_of_id(jid_in(5), 1) == 0
    assert partition_of_id("not a jid", 1) == 0


def test_concurrency_is_split_evenly_over_partitions_at_least_one_each() -> None:
    assert even_shares(10, 3) == [4, 3, 3]
    assert even_shares(2, 4) == [1, 1, 1, 1]
    assert even_shares(5, 3) == [2, 2, 1]
    assert even_shares(7, 1) == [7]


def test_answers_that_mean_the_map_may_be_stale() -> None:
    assert may_have_moved(grpc.StatusCode.UNAVAILABLE, "partition moved")
    assert may_have_moved(
        grpc.StatusCode.FAILED_PRECONDITION, 'job.queue: queue "x" lives in partition 3; this is partition 1'
    )
    assert not may_have_moved(grpc.StatusCode.FAILED_PRECONDITION, "job already finished")
    assert not may_have_moved(grpc.StatusCode.NOT_FOUND, "lives in partition")
    assert not may_have_moved(None, None)


def test_answers_that_say_a_call_never_reached_a_server() -> None:
    refused = "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:1: Failed to connect to remote host: Connection refused"
    assert never_sent(grpc.StatusCode.UNAVAILABLE, refused)
    assert not never_sent(grpc.StatusCode.UNAVAILABLE, "Socket closed")
    assert not never_sent(grpc.StatusCode.DEADLINE_EXCEEDED, refused)
    assert not never_sent(None, None)


# --- a fake partitioned cluster -------------------------------------------------------------


def leased(jid: str, queue: str) -> worker_service_pb2.LeasedJob:
    job = job_pb2.Job(jid=jid, type="t", queue=queue, attempt=1, state=job_pb2.JOB_STATE_RUNNING)
    job.reserve_for.FromSeconds(30)
    return worker_service_pb2.LeasedJob(job=job, lease_id=f"lease-{jid}")


class FakeWorkers(worker_service_pb2_grpc.WorkerServiceServicer):
    """Records what reaches this server; each Lease gets one job of its first queue (``jobs``)."""

    def __init__(self, jobs: bool = True) -> None:
        self.jobs = jobs
        self.leases: List[Tuple[List[str], int]] = []
        self.acked: List[str] = []

    async def Lease(self, request: Any, context: Any) -> AsyncIterator[worker_service_pb2.LeaseResponse]:
        self.leases.append((list(request.queues), request.credits))
        yield worker_service_pb2.LeaseResponse(keepalive=worker_service_pb2.Keepalive())
        if self.jobs:
            queue = request.queues[0]
            job = leased(f"job-of-{queue}", queue)
            yield worker_service_pb2.LeaseResponse(jobs=worker_service_pb2.LeasedJobs(jobs=[job]))
        await asyncio.sleep(60)

    async def Renew(self, request: Any, context: Any) -> worker_service_pb2.RenewResponse:
        return worker_service_pb2.RenewResponse(
            results=[worker_service_pb2.RenewResult(jid=ref.jid, code=0) for ref in request.leases]
        )

    async def Report(self, request: Any, context: Any) -> worker_service_pb2.ReportResponse:
        self.acked.extend(ack.jid for ack in request.acks)
        return worker_service_pb2.ReportResponse(acks=[worker_service_pb2.ItemResult(jid=a.jid, code=0) for a in request.acks])


class FakeProducer(producer_service_pb2_grpc.ProducerServiceServicer):
    """Submits make a jid naming the queue's partition (of 4); the calls are recorded."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.calls: List[Tuple[str, str]] = []
        self.fail_next: Optional[grpc.StatusCode] = None

    async def Submit(self, request: Any, context: Any) -> producer_service_pb2.SubmitResponse:
        self.calls.append(("Submit", request.job.queue))
        if self.fail_next is not None:
            code, self.fail_next = self.fail_next, None
            await context.abort(code, "partition moved")
        return producer_service_pb2.SubmitResponse(jid=jid_in(queue_home(request.job.queue, 4)))

    async def SubmitBatch(self, request: Any, context: Any) -> producer_service_pb2.SubmitBatchResponse:
        self.calls.append(("SubmitBatch", ",".join(job.queue for job in request.jobs)))
        return producer_service_pb2.SubmitBatchResponse(
            jobs=[producer_service_pb2.SubmitResponse(jid=jid_in(queue_home(job.queue, 4))) for job in request.jobs]
        )

    async def CreateBatch(self, request: Any, context: Any) -> producer_service_pb2.CreateBatchResponse:
        callbacks = [c.job.queue for c in (request.batch.on_success, request.batch.on_complete) if c.HasField("job")]
        self.calls.append(("CreateBatch", ",".join(callbacks)))
        return producer_service_pb2.CreateBatchResponse(batch=batch_pb2.Batch(id=jid_in(0)))

    async def GetResult(self, request: Any, context: Any) -> producer_service_pb2.GetResultResponse:
        self.calls.append(("GetResult", request.jid))
        return producer_service_pb2.GetResultResponse(job=job_pb2.Job(jid=request.jid, state=job_pb2.JOB_STATE_COMPLETED))


class FakeAdmin(admin_service_pb2_grpc.AdminServiceServicer):
    """The node's map: ``owners`` maps a partition to its server's address (absent: no owner);
    ``spread`` the spread queues to how many partitions each is over."""

    def __init__(self, count: int, owners: Dict[int, str], spread: Optional[Dict[str, int]] = None) -> None:
        self.count = count
        self.owners = owners
        self.spread = spread or {}
        self.reads = 0

    async def GetServerInfo(self, request: Any, context: Any) -> admin_service_pb2.GetServerInfoResponse:
        self.reads += 1
        return admin_service_pb2.GetServerInfoResponse(
            partition_count=self.count,
            partitions=[
                admin_service_pb2.PartitionOwner(index=i, node_id="n", grpc_address=address, epoch=1)
                for i, address in sorted(self.owners.items())
            ],
            spread_queues=[admin_service_pb2.SpreadQueue(queue=q, partitions=k) for q, k in self.spread.items()],
        )


class FakeServer:
    def __init__(self, name: str, jobs: bool = True) -> None:
        self.workers = FakeWorkers(jobs)
        self.producer = FakeProducer(name)
        self.server = grpc.aio.server()
        worker_service_pb2_grpc.add_WorkerServiceServicer_to_server(self.workers, self.server)
        producer_service_pb2_grpc.add_ProducerServiceServicer_to_server(self.producer, self.server)
        self.address = f"127.0.0.1:{self.server.add_insecure_port('127.0.0.1:0')}"


class FakeCluster:
    """A node (its map, and every service, to catch calls it should not get) and two
    partition servers: P serves partitions 0 and 1, Q serves 2; partition 3 has no owner."""

    def __init__(self, spread: Optional[Dict[str, int]] = None) -> None:
        self.node = FakeServer("node", jobs=False)
        self.p = FakeServer("P")
        self.q = FakeServer("Q")
        self.admin = FakeAdmin(4, {0: self.p.address, 1: self.p.address, 2: self.q.address}, spread)
        admin_service_pb2_grpc.add_AdminServiceServicer_to_server(self.admin, self.node.server)

    async def __aenter__(self) -> "FakeCluster":
        for fake in (self.node, self.p, self.q):
            await fake.server.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        for fake in (self.node, self.p, self.q):
            await fake.server.stop(None)


def test_client_calls_go_to_the_partition_of_the_queue_or_the_jid() -> None:
    async def scenario() -> None:
        async with FakeCluster() as cluster, worq.Client(cluster.node.address) as client:
            jid = await client.submit("t", queue="emails")  # partition 0: P
            assert cluster.p.producer.calls == [("Submit", "emails")]
            await client.wait_result(jid, 1)
            assert cluster.p.producer.calls[-1] == ("GetResult", jid)
            await client.submit("t")  # "default": partition 2, Q
            assert cluster.q.producer.calls == [("Submit", "default")]
            await client.submit("t", queue="täsk.😀")  # partition 1: P too
            await client.submit("t", queue=queue_in(3))  # no owner known: the node routes it
            await client.wait_result(jid_in(3), 1)
            await client.wait_result(jid_in(9), 1)  # names no partition: the node answers
            assert cluster.p.producer.calls[-1] == ("Submit", "täsk.😀")
            assert cluster.node.producer.calls == [("Submit", queue_in(3)), ("GetResult", jid_in(3)), ("GetResult", jid_in(9))]
            assert cluster.admin.reads == 1

    run(scenario())


def test_a_batch_goes_to_its_callback_jobs_partition_or_through_the_node() -> None:
    async def scenario() -> None:
        async with FakeCluster() as cluster, worq.Client(cluster.node.address) as client:
            await client.create_batch(on_success={"type": "cb", "queue": "emails"})  # partition 0: P
            await client.create_batch(on_complete={"type": "cb"}, on_success={"type": "cb"})  # "default": Q
            assert cluster.p.producer.calls == [("CreateBatch", "emails")]
            assert cluster.q.producer.calls == [("CreateBatch", "default,default")]
            # None, or two of different queues: the node places it.
            await client.create_batch()
            await client.create_batch(on_success={"type": "cb", "queue": "emails"}, on_complete={"type": "cb"})
            assert cluster.node.producer.calls == [("CreateBatch", ""), ("CreateBatch", "emails,default")]

    run(scenario())


def test_client_reads_the_map_again_when_a_partition_moved() -> None:
    async def scenario() -> None:
        async with FakeCluster() as cluster, worq.Client(cluster.node.address) as client:
            await client.submit("t", queue="emails")
            cluster.p.producer.fail_next = grpc.StatusCode.UNAVAILABLE
            cluster.admin.owners[0] = cluster.q.address  # partition 0 moved to Q's node
            with pytest.raises(worq.Unavailable):
                await client.submit("t", queue="emails")
            for _ in range(100):
                if cluster.admin.reads == 2:
                    break
                await asyncio.sleep(0.01)
            assert cluster.admin.reads == 2
            await client.submit("t", queue="emails")
            assert cluster.q.producer.calls == [("Submit", "emails")]
            # Any other refusal leaves the map as it is.
            cluster.q.producer.fail_next = grpc.StatusCode.INVALID_ARGUMENT
            with pytest.raises(worq.InvalidArgument):
                await client.submit("t", queue="emails")
            await asyncio.sleep(0.1)
            assert cluster.admin.reads == 2

    run(scenario())


def test_client_without_partition_routing_sends_everything_to_the_address_given() -> None:
    async def scenario() -> None:
        async with FakeCluster() as cluster, worq.Client(cluster.node.address, partition_routing=False) as client:
            jid = await client.submit("t", queue="emails")
            await client.wait_result(jid, 1)
            assert [call for call, _ in cluster.node.producer.calls] == ["Submit", "GetResult"]
            assert cluster.admin.reads == 0 and cluster.p.producer.calls == []

    run(scenario())


def fake_worker(address: str, queues: List[str], **options: Any) -> "Tuple[worq.Worker, List[worq.WorkerEvent]]":
    events: List[worq.WorkerEvent] = []
    worker = worq.Worker(address, queues=queues, on_event=events.append, shutdown_timeout=2, **options)

    @worker.handler("t")
    async def t(job: worq.Job) -> str:
        return "ok"

    return worker, events


@contextlib.asynccontextmanager
async def _run(worker: worq.Worker, events: List[worq.WorkerEvent]) -> AsyncIterator[None]:
    task = asyncio.create_task(worker.run())
    try:
        await until(lambda: any(e.name == "ready" for e in events))
        yield
    finally:
        worker.stop()
        await task


async def until(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("timed out")
        await asyncio.sleep(0.01)


def test_worker_holds_a_stream_to_each_partition_server_with_an_even_share() -> None:
    async def scenario() -> None:
        async with FakeCluster() as cluster:
            # Partitions 0 and 1 on P, 2 on Q: three streams, concurrency 5 split 2/2/1.
            worker, events = fake_worker(cluster.node.address, ["emails", "default", "pf-0", "täsk.😀"], concurrency=5)
            task = asyncio.create_task(worker.run())
            try:
                await until(lambda: len(cluster.p.workers.acked) == 2 and len(cluster.q.workers.acked) == 1)
                assert sorted(cluster.p.workers.leases) == [(["emails"], 2), (["täsk.😀"], 1)]
                assert cluster.q.workers.leases == [(["default", "pf-0"], 2)]
                assert sorted(cluster.p.workers.acked) == ["job-of-emails", "job-of-täsk.😀"]
                assert cluster.q.workers.acked == ["job-of-default"]
                assert cluster.node.workers.leases == [] and cluster.node.workers.acked == []
                assert [e.name for e in events].count("ready") == 1
            finally:
                worker.stop()
                await task
            assert [e.name for e in events].count("stopped") == 1 and events[-1].name == "stopped"

    run(scenario())


def test_worker_with_its_queues_in_one_partition_holds_one_stream_there() -> None:
    async def scenario() -> None:
        async with FakeCluster() as cluster:
            worker, events = fake_worker(cluster.node.address, ["default", "pf-0"], concurrency=3)
            async with _run(worker, events):
                await until(lambda: cluster.q.workers.acked == ["job-of-default"])
                assert cluster.q.workers.leases == [(["default", "pf-0"], 3)]
                assert cluster.node.workers.leases == [] and cluster.p.workers.leases == []
            # A partition without an owner right now: the node takes the stream and routes it.
            worker, events = fake_worker(cluster.node.address, [queue_in(3)])
            async with _run(worker, events):
                await until(lambda: len(cluster.node.workers.leases) == 1)
            # Routing off: the node, whatever the map says.
            worker, events = fake_worker(cluster.node.address, ["emails", "default"], partition_routing=False)
            async with _run(worker, events):
                await until(lambda: len(cluster.node.workers.leases) == 2)
            assert cluster.node.workers.leases[1] == (["emails", "default"], 10)

    run(scenario())


def test_worker_follows_a_partition_that_moved_to_another_server() -> None:
    async def scenario() -> None:
        async with FakeCluster() as cluster:
            worker, events = fake_worker(cluster.node.address, ["emails", "default"], concurrency=4)
            async with _run(worker, events):
                await until(lambda: cluster.p.workers.leases == [(["emails"], 2)])
                reads = cluster.admin.reads
                cluster.admin.owners[0] = cluster.q.address
                await cluster.p.server.stop(None)  # P's node is gone; Q's took partition 0 over
                await until(lambda: (["emails"], 2) in cluster.q.workers.leases)
                assert cluster.admin.reads > reads
                assert cluster.node.workers.leases == []
                assert any(e.name == "reconnecting" for e in events)

    run(scenario())


# --- a real server that is not partitioned --------------------------------------------------


def test_a_server_that_is_not_partitioned_takes_every_call_as_before(server: ServerProcess) -> None:
    async def scenario() -> None:
        events: List[worq.WorkerEvent] = []
        handle = Running(worq.Worker(server.address, queues=["np-a", "np-b"], concurrency=3, on_event=events.append), events)

        @handle.worker.handler("t")
        async def t(job: worq.Job) -> str:
            return f"{job.queue}:{job.args[0]}"

        async with running(handle), worq.Client(server.address) as client:
            jids = [await client.submit("t", args=[n], queue=("np-a", "np-b")[n % 2]) for n in range(6)]
            for n, jid in enumerate(jids):
                job = await client.wait_result(jid, 10)
                assert job.state == worq.JobState.COMPLETED and job.result_text == f"{('np-a', 'np-b')[n % 2]}:{n}"
            routes = client._routes
            assert routes is not None and routes.loaded and not routes.partitioned
            # One stream to the address given, over both queues, with the whole concurrency.
            assert handle.worker._parts == [] and handle.worker._partition is None
        assert [e.name for e in handle.events].count("ready") == 1

    run(scenario())


# --- engines on one machine ------------------------------------------------------------------


def test_a_call_to_an_engine_just_killed_goes_through_the_node_which_waits_for_it(
    server_factory: Callable[..., ServerProcess],
) -> None:
    """`worq serve --engines 2`: the client routes to each engine itself; SIGKILL the engine
    of a queue and the next calls, whose connection is refused, go through the parent, which
    waits for the engine started again, instead of failing UNAVAILABLE."""
    server = server_factory(args=["--engines", "2"])
    assert server.proc is not None
    parent = server.proc.pid
    queue = next(f"kq-{i}" for i in range(1000) if queue_home(f"kq-{i}", 2) == 1)

    def kill_engine() -> None:
        listed = subprocess.run(["pgrep", "-P", str(parent)], capture_output=True, text=True, check=True)
        engines = sorted(int(pid) for pid in listed.stdout.split())
        os.kill(engines[-1], signal.SIGKILL)
        time.sleep(0.3)

    async def scenario() -> None:
        async with worq.Client(server.address) as client:
            first = await client.submit("t", queue=queue)
            routes = client._routes
            assert routes is not None and routes.partitioned
            kill_engine()
            second = await client.submit("t", queue=queue)
            assert (await client.get_job(second)).queue == queue
            await asyncio.sleep(2)
            kill_engine()
            assert (await client.get_job(first)).jid == first

    run(scenario(), timeout=60)



def test_a_batch_over_both_engines_is_stored_whole_each_job_in_its_queues_engine(
    server_factory: Callable[..., ServerProcess],
) -> None:
    """`worq serve --engines 2`: a batch whose jobs' queues live in both engines goes to its
    first job's engine, which stores it and leaves the other engine its part; a job of the
    other engine may not carry an idempotency key (refused by name, nothing stored)."""
    server = server_factory(args=["--engines", "2"])
    q0 = next(f"bq-{i}" for i in range(1000) if queue_home(f"bq-{i}", 2) == 0)
    q1 = next(f"bq-{i}" for i in range(1000) if queue_home(f"bq-{i}", 2) == 1)

    async def scenario() -> None:
        async with worq.Client(server.address) as client:
            jids = await client.submit_batch([{"type": "t", "queue": q1}, {"type": "t", "queue": q0}, {"type": "t", "queue": q1}])
            assert [partition_of_id(jid, 2) for jid in jids] == [1, 0, 1]
            for jid, queue in zip(jids, [q1, q0, q1]):
                job = await client.get_job(jid)
                assert (job.queue, job.state) == (queue, worq.JobState.SCHEDULED)
            with pytest.raises(worq.WorqError) as refused:
                await client.submit_batch([{"type": "t", "queue": q0}, {"type": "t", "queue": q1, "idempotency_key": "k"}])
            assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT
            assert "jobs[1].idempotency_key" in str(refused.value)

    run(scenario(), timeout=60)
