"""Spread queues on a partitioned cluster (GetServerInfo.spread_queues): the placement rule
every Worq library and the server share (its test vectors, computed with the server's
queuePartitions and jobPartition, src/model/partition.ts and src/cluster/call-routes.ts), and
the library against the fake partitioned cluster of test_partition: submits of a spread
queue go to each of its partitions' servers in turn, a keyed one always to the same, and a
worker leasing it holds a stream to every one of its partitions."""

from __future__ import annotations

import asyncio
from typing import Any, Dict, List, Optional, Set

import pytest

import worq
from conftest import run
from test_partition import FakeCluster, fake_worker, until
from test_partition_credit import Cluster
from worq._partition import placement_key, queue_home, queue_partitions, spread_partition
from worq._routes import PartitionRoutes
from worq.v1 import admin_service_pb2, job_pb2

# Of 4 partitions (the fake cluster: P serves 0 and 1, Q serves 2, 3 has no owner):
# "bulk" is at home in 1, so spread over 2 it lives in 1 (P) and 2 (Q); "hot-2" is at home in
# 3, so spread over 2 it wraps: 3 (no owner: the node) and 0 (P).
SPREAD = {"bulk": 2, "hot-2": 2}


def spec(queue: str = "", **fields: Any) -> job_pb2.JobSpec:
    return job_pb2.JobSpec(type="t", queue=queue, **fields)


# --- the placement rule ---------------------------------------------------------------------

# (queue, partition_count, spread, partitions): its home first, then the ones after it, wrapping.
PARTITIONS = [
    ("bulk", 4, 2, [1, 2]),
    ("hot-2", 4, 2, [3, 0]),  # wraps
    ("emails", 4, 3, [0, 1, 2]),
    ("pf-0", 4, 2, [2, 3]),
    ("default", 16, 4, [14, 15, 0, 1]),  # wraps
    ("täsk.😀", 16, 3, [9, 10, 11]),
    ("hot", 4, 4, [0, 1, 2, 3]),
    ("hot", 4, 9, [0, 1, 2, 3]),  # more than there are: all of them, once each
    ("emails", 4, 1, [0]),  # not spread: its home only
    ("emails", 4, 0, [0]),
]


@pytest.mark.parametrize("queue,count,spread,partitions", PARTITIONS)
def test_a_spread_queue_lives_in_its_home_and_the_partitions_after_it(
    queue: str, count: int, spread: int, partitions: List[int]
) -> None:
    assert queue_partitions(queue, count, spread) == partitions
    assert partitions[0] == queue_home(queue, count)


# (job fields, the key that places it): the first set of unique.key, debounce.key, group_key
# and idempotency_key.
KEYS = [
    ({}, ""),
    ({"idempotency_key": "i-1"}, "i-1"),
    ({"group_key": "g-1", "idempotency_key": "i-1"}, "g-1"),
    ({"debounce": {"key": "d-1"}, "group_key": "g-1", "idempotency_key": "i-1"}, "d-1"),
    ({"unique": {"key": "u-1"}, "debounce": {"key": "d-1"}, "group_key": "g-1", "idempotency_key": "i-1"}, "u-1"),
    # An empty one is not set: the next one places the job.
    ({"unique": {"key": ""}, "debounce": {"key": ""}, "group_key": "", "idempotency_key": "i-1"}, "i-1"),
    ({"unique": {}, "group_key": "g-1"}, "g-1"),
]


@pytest.mark.parametrize("fields,key", KEYS)
def test_the_placement_key_is_the_first_set_of_unique_debounce_group_and_idempotency_key(
    fields: Dict[str, Any], key: str
) -> None:
    assert placement_key(spec("bulk", **fields)) == key


# (queue, count, spread, key, partition): where the server's jobPartition puts a job with that
# key (the hash of the key modulo the spread picks one of the queue's partitions).
KEYED = [
    ("bulk", 4, 2, "i-1", 1),
    ("bulk", 4, 2, "d-1", 2),
    ("bulk", 4, 2, "order-42", 1),
    ("hot-2", 4, 2, "d-1", 0),  # the second of [3, 0]
    ("default", 16, 4, "u-1", 0),
    ("default", 16, 4, "g-1", 14),
    ("default", 16, 4, "😀", 14),
    ("täsk.😀", 16, 3, "order-42", 11),
    ("hot", 4, 9, "d-1", 1),  # the spread capped at 4: modulo 4, not 9
    ("hot", 4, 9, "i-1", 2),
]


@pytest.mark.parametrize("queue,count,spread,key,partition", KEYED)
def test_a_keyed_job_goes_to_the_partition_its_key_hashes_to_whatever_the_turn(
    queue: str, count: int, spread: int, key: str, partition: int
) -> None:
    partitions = queue_partitions(queue, count, spread)
    assert {spread_partition(partitions, key, turn) for turn in range(8)} == {partition}


def test_a_job_without_a_key_goes_to_each_partition_in_turn_wrapping() -> None:
    assert [spread_partition([3, 0], "", turn) for turn in range(5)] == [3, 0, 3, 0, 3]
    assert [spread_partition([14, 15, 0, 1], "", turn) for turn in range(6)] == [14, 15, 0, 1, 14, 15]
    assert [spread_partition(queue_partitions("hot", 4, 9), "", turn) for turn in range(5)] == [0, 1, 2, 3, 0]


def alternating(placed: List[Optional[int]], partitions: Set[int]) -> bool:
    """Whether ``placed`` took each of two ``partitions`` in turn (from either one)."""
    return set(placed) == partitions and all(a != b for a, b in zip(placed, placed[1:]))


def routes_with(count: int, spread: Dict[str, int]) -> PartitionRoutes:
    """Routes that read a map of ``count`` partitions (no owner known) spreading ``spread``."""
    routes = PartitionRoutes(None, lambda address: None)  # type: ignore[arg-type,return-value]
    routes._apply(
        admin_service_pb2.GetServerInfoResponse(
            partition_count=count,
            spread_queues=[admin_service_pb2.SpreadQueue(queue=q, partitions=k) for q, k in spread.items()],
        )
    )
    return routes


def test_routes_place_jobs_by_key_else_in_turn_per_queue() -> None:
    async def scenario() -> None:
        routes = routes_with(4, {"bulk": 2, "hot-2": 2, "hot": 9, "one": 1})
        assert routes.partitions_of_queue("bulk") == [1, 2]
        assert routes.partitions_of_queue("hot") == [0, 1, 2, 3]  # capped
        assert routes.partitions_of_queue("one") == [queue_home("one", 4)]  # spread over 1: not spread
        assert routes.partitions_of_queue("emails") == [0]
        # Keyless: in turn, each queue with its own turns, so that alternating between two
        # spread queues still cycles through the partitions of each.
        placed = [(routes.partition_of_job(spec("bulk")), routes.partition_of_job(spec("hot-2"))) for _ in range(4)]
        assert alternating([bulk for bulk, _ in placed], {1, 2})
        assert alternating([hot for _, hot in placed], {3, 0})
        # Keyed: by the key, and a keyed job takes no turn.
        assert {routes.partition_of_job(spec("bulk", idempotency_key="d-1")) for _ in range(3)} == {2}
        assert routes.partition_of_job(spec("bulk", debounce={"key": "i-1"}, idempotency_key="d-1")) == 1
        assert routes.partition_of_job(spec("bulk")) == placed[-2][0]
        # Not spread: its home, key or not; no queue: the default queue's.
        assert routes.partition_of_job(spec("emails", idempotency_key="d-1")) == 0
        assert routes.partition_of_job(spec("")) == queue_home("default", 4)
        # Not partitioned: no partition, spread or not.
        flat = routes_with(1, {"bulk": 2})
        assert flat.partitions_of_queue("bulk") == [] and flat.partition_of_job(spec("bulk")) is None

    run(scenario())


def test_each_client_starts_a_spread_queue_at_a_random_turn() -> None:
    async def scenario() -> None:
        # Else short-lived clients that submit a job each would all fill the home partition.
        firsts = {routes_with(16, {"default": 4}).partition_of_job(spec()) for _ in range(100)}
        assert firsts == {14, 15, 0, 1}

    run(scenario())


def test_a_batch_goes_to_a_partition_every_job_of_it_may_go_to() -> None:
    async def scenario() -> None:
        routes = routes_with(4, SPREAD)
        # Keyless jobs of a spread queue stay together, one turn per batch.
        assert alternating([routes.partition_of_batch([spec("bulk")] * 3) for _ in range(4)], {1, 2})
        # A keyed job pins the batch to its key's partition, the keyless ones go with it.
        assert routes.partition_of_batch([spec("bulk"), spec("bulk", idempotency_key="d-1"), spec("bulk")]) == 2
        # A queue not spread pins it to its home, where a spread queue's keyless job may go.
        assert routes.partition_of_batch([spec("hot-2"), spec("emails")]) == 0
        # No partition all may go to: the first job's, as for queues of several partitions
        # (the server refuses the batch).
        assert routes.partition_of_batch([spec("pf-0"), spec("hot-2")]) == 2
        assert routes.partition_of_batch([spec("bulk", idempotency_key="i-1"), spec("bulk", idempotency_key="d-1")]) == 1
        assert routes.partition_of_batch([]) is None

    run(scenario())


# --- against a fake partitioned cluster -----------------------------------------------------


def test_client_spreads_keyless_submits_over_the_partitions_of_a_spread_queue() -> None:
    async def scenario() -> None:
        async with FakeCluster(SPREAD) as cluster, worq.Client(cluster.node.address) as client:
            for _ in range(4):
                await client.submit("t", queue="bulk")  # partitions 1 (P) and 2 (Q), in turn
            assert cluster.p.producer.calls == [("Submit", "bulk")] * 2
            assert cluster.q.producer.calls == [("Submit", "bulk")] * 2
            for _ in range(4):
                await client.submit("t", queue="hot-2")  # 3 (no owner: the node) and 0 (P), wrapping
            assert cluster.node.producer.calls == [("Submit", "hot-2")] * 2
            assert cluster.p.producer.calls[2:] == [("Submit", "hot-2")] * 2
            # A queue not spread: its home only, as before.
            await client.submit("t", queue="pf-0")
            assert cluster.q.producer.calls[2:] == [("Submit", "pf-0")] and cluster.admin.reads == 1

    run(scenario())


def test_client_sends_the_jobs_of_a_key_to_one_partition_of_a_spread_queue() -> None:
    async def scenario() -> None:
        async with FakeCluster(SPREAD) as cluster, worq.Client(cluster.node.address) as client:
            for _ in range(3):
                await client.submit("t", queue="bulk", idempotency_key="d-1")  # partition 2: Q
            assert cluster.q.producer.calls == [("Submit", "bulk")] * 3 and cluster.p.producer.calls == []
            # The debounce key comes before the idempotency key, the unique key before both.
            await client.submit("t", queue="bulk", debounce={"key": "i-1", "delay": 1}, idempotency_key="d-1")
            await client.submit("t", queue="bulk", unique={"key": "order-42"}, group="d-1")
            assert cluster.p.producer.calls == [("Submit", "bulk")] * 2  # both partition 1: P
            await client.submit("t", queue="bulk", group="d-1")
            assert len(cluster.q.producer.calls) == 4

    run(scenario())


def test_client_sends_a_batch_where_all_its_jobs_may_go() -> None:
    async def scenario() -> None:
        async with FakeCluster(SPREAD) as cluster, worq.Client(cluster.node.address) as client:
            jobs: List[Dict[str, Any]] = [{"type": "t", "queue": "bulk"}] * 3
            await client.submit_batch(jobs)  # keyless: together, partition 1's turn (P)
            await client.submit_batch(jobs)  # then 2's (Q)
            assert cluster.p.producer.calls == [("SubmitBatch", "bulk,bulk,bulk")]
            assert cluster.q.producer.calls == [("SubmitBatch", "bulk,bulk,bulk")]
            # A keyed job takes the keyless ones to its partition (d-1: 2, Q).
            await client.submit_batch([{"type": "t", "queue": "bulk"}, {"type": "t", "queue": "bulk", "idempotency_key": "d-1"}])
            assert cluster.q.producer.calls[-1] == ("SubmitBatch", "bulk,bulk")
            # "emails" lives in 0, one of "hot-2"'s: P.
            await client.submit_batch([{"type": "t", "queue": "hot-2"}, {"type": "t", "queue": "emails"}])
            assert cluster.p.producer.calls[-1] == ("SubmitBatch", "hot-2,emails")
            assert cluster.node.producer.calls == []

    run(scenario())


def test_worker_holds_a_stream_to_every_partition_of_a_spread_queue() -> None:
    async def scenario() -> None:
        async with FakeCluster(SPREAD) as cluster:
            # "emails" in 0 (P), "bulk" in 1 (P) and 2 (Q): three streams, 6 split 2/2/2.
            worker, events = fake_worker(cluster.node.address, ["emails", "bulk"], concurrency=6)
            task = asyncio.create_task(worker.run())
            try:
                await until(lambda: len(cluster.p.workers.acked) == 2 and len(cluster.q.workers.acked) == 1)
                assert sorted(cluster.p.workers.leases) == [(["bulk"], 2), (["emails"], 2)]
                assert cluster.q.workers.leases == [(["bulk"], 2)]
                assert cluster.node.workers.leases == []
                assert [e.name for e in events].count("ready") == 1
            finally:
                worker.stop()
                await task
        # Wrapping: "hot-2" in 3 (no owner: the node takes the stream and routes it) and 0 (P),
        # where "emails" joins it, after it in the order given; 3 split 2/1 in that order.
        async with FakeCluster(SPREAD) as cluster:
            worker, events = fake_worker(cluster.node.address, ["hot-2", "emails"], concurrency=3)
            task = asyncio.create_task(worker.run())
            try:
                await until(lambda: len(cluster.node.workers.leases) == 1 and len(cluster.p.workers.leases) == 1)
                assert cluster.node.workers.leases == [(["hot-2"], 2)]
                assert cluster.p.workers.leases == [(["hot-2", "emails"], 1)]
            finally:
                worker.stop()
                await task

    run(scenario())


def test_credit_moves_between_the_streams_of_a_spread_queue() -> None:
    async def scenario() -> None:
        async with Cluster() as cluster:
            # "hot" is at home in 0; spread over 3 it lives in 0 (P), 1 (no owner: the node's
            # server takes that stream) and 2 (Q).
            cluster.admin.spread = {"hot": 3}
            p, node, q = cluster.p.workers, cluster.node.workers, cluster.q.workers
            worker = worq.Worker(cluster.node.address, queues=["hot"], concurrency=6, shutdown_timeout=2)
            release = asyncio.Event()

            @worker.handler("t")
            async def t(job: worq.Job) -> str:
                await release.wait()
                return "ok"

            task = asyncio.create_task(worker.run())
            try:
                await until(lambda: all(s.stream_id for s in (p, node, q)))
                assert p.leases == node.leases == q.leases == [(["hot"], 2, True)]
                # Jobs wait in P's partition: the two others keep 1 each, P gets the rest.
                p.push("hot", 2)
                p.waiting(True)
                await until(lambda: p.set_credits == [(p.stream_id, 4)])
                assert node.set_credits == [(node.stream_id, 1)] and q.set_credits == [(q.stream_id, 1)]
            finally:
                release.set()
                worker.stop()
                await task

    run(scenario())
