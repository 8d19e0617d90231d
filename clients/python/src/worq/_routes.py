"""Which server takes each partition's calls on a partitioned cluster (internal).

The cluster publishes its partition map in GetServerInfo (``partition_count``, ``partitions``
and ``spread_queues``). :class:`PartitionRoutes` reads it once before the first routed call,
and again when a call finds a partition gone; a partition with no owner known, and everything
on a server that is not partitioned, goes to the address the library was given, whose node
routes it.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from typing import Callable, Dict, List, Optional, Sequence, Set

import grpc
import grpc.aio

from worq.v1 import admin_service_pb2, admin_service_pb2_grpc, job_pb2, producer_service_pb2_grpc, worker_service_pb2_grpc

from ._partition import DEFAULT_QUEUE, partition_of_id, placement_key, queue_partitions, spread_partition

log = logging.getLogger("worq.routes")

# A channel to a partition's former server is closed this long after the partition moved away,
# so calls still out on it (a report, a renewal) end on their own rather than being cut.
_RETIRE_AFTER = 60.0
# How long the map read may take: it runs before the first routed call.
_MAP_READ_TIMEOUT = 10.0
# While the map could not be read for a passing reason (the node down), it is read again at
# most this often, from a call that goes on to the node meanwhile.
_REREAD_EVERY = 1.0
# Answers to the map read that will not change by asking again: the server is not
# partitioned as far as this library can tell.
_FINAL_CODES = (grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED)


class Link:
    """A channel and the service stubs on it."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self.channel = channel
        # The generated *_pb2_grpc.py have no type hints (grpcio-tools writes no .pyi for them).
        self.producer = producer_service_pb2_grpc.ProducerServiceStub(channel)  # type: ignore[no-untyped-call]
        self.admin = admin_service_pb2_grpc.AdminServiceStub(channel)  # type: ignore[no-untyped-call]
        self.worker = worker_service_pb2_grpc.WorkerServiceStub(channel)  # type: ignore[no-untyped-call]


class PartitionRoutes:
    """The partition map and a link to each partition's server, made on first use with
    ``open_channel`` (the given address's TLS, token and options). Lives on one event loop."""

    def __init__(self, node: Link, open_channel: Callable[[str], grpc.aio.Channel]) -> None:
        self.node = node
        self._open_channel = open_channel
        self._count = 0
        self._addresses: Dict[int, str] = {}
        self._spread: Dict[str, int] = {}  # the spread queues: how many partitions each is over
        # A spread queue's next turn, for its jobs without a placement key: one counter per
        # queue, so that submits alternating between spread queues still cycle through each.
        self._turns: Dict[str, int] = {}
        self._links: Dict[str, Link] = {}
        self._retiring: Dict[str, asyncio.TimerHandle] = {}
        self._loaded = False
        self._settled = False  # a read got the map, or an answer that asking again will not change
        self._last_read = 0.0
        self._loading: Optional["asyncio.Task[None]"] = None
        self._closing: Set["asyncio.Task[None]"] = set()

    @property
    def loaded(self) -> bool:
        return self._loaded

    @property
    def partitioned(self) -> bool:
        """Whether the map names more than one partition (else everything goes to the node)."""
        return self._count > 1

    @property
    def worth_rereading(self) -> bool:
        """Whether a partition may have moved, or the map is still unknown: what a lost
        stream or an UNAVAILABLE answer reads the map again for."""
        return self.partitioned or not self._settled

    async def ready(self) -> None:
        """Returns once the map has been read (at once after the first read)."""
        if not self._loaded:
            await self.refresh()
        elif not self._settled and time.monotonic() - self._last_read >= _REREAD_EVERY:
            self.refresh_soon()

    async def refresh(self) -> None:
        """Reads the map again; callers at once share one read."""
        if self._loading is None:
            self._loading = asyncio.ensure_future(self._load())
        await asyncio.shield(self._loading)

    def refresh_soon(self) -> None:
        """Starts reading the map again without waiting for it (after a call found a
        partition gone: the next calls go where the new map says)."""
        if self._loading is None:
            self._loading = asyncio.ensure_future(self._load())

    def partitions_of_queue(self, queue: str) -> List[int]:
        """The partitions the jobs of ``queue`` live in (several for a spread queue, its home
        first); empty when the server is not partitioned."""
        if not self.partitioned:
            return []
        name = queue or DEFAULT_QUEUE
        return queue_partitions(name, self._count, self._spread.get(name, 1))

    def partition_of_job(self, job: job_pb2.JobSpec) -> Optional[int]:
        """The partition a new job goes to: its queue's; of a spread queue's, the one its
        placement key hashes to, or without a key the queue's next in turn. None when the
        server is not partitioned."""
        partitions = self.partitions_of_queue(job.queue)
        if len(partitions) <= 1:
            return partitions[0] if partitions else None
        key = placement_key(job)
        return spread_partition(partitions, key, 0 if key else self._next_turn(job.queue))

    def partition_of_batch(self, jobs: Sequence[job_pb2.JobSpec]) -> Optional[int]:
        """The partition a SubmitBatch goes to, which commits it there as one: one that every
        job may go to (a job without a placement key may go to any of its spread queue's),
        taking turns when several may; when there is none, the first job's, whose partition
        stores the batch and leaves each other partition its part. None when the server is
        not partitioned, or the batch is empty."""
        if not jobs or not self.partitioned:
            return None
        common = self._allowed(jobs[0])
        for job in jobs[1:]:
            allowed = self._allowed(job)
            common = [p for p in common if p in allowed]
            if not common:
                return self.partition_of_job(jobs[0])
        # Several left only when every job is keyless in a spread queue: the first one's turn.
        return common[self._next_turn(jobs[0].queue) % len(common)] if len(common) > 1 else common[0]

    def _allowed(self, job: job_pb2.JobSpec) -> List[int]:
        """The partitions a new job may go to: its queue's one, its key's of a spread queue's,
        or any of them without a key."""
        partitions = self.partitions_of_queue(job.queue)
        key = placement_key(job) if len(partitions) > 1 else ""
        return [spread_partition(partitions, key, 0)] if key else partitions

    def _next_turn(self, queue: str) -> int:
        name = queue or DEFAULT_QUEUE
        turn = self._turns.get(name)
        if turn is None:
            # A queue's first turn is random: short-lived clients that submit a job or two
            # each would otherwise all put their first job in the queue's home partition.
            turn = random.getrandbits(32)
        self._turns[name] = turn + 1
        return turn

    def partition_of_jid(self, jid: str) -> Optional[int]:
        """The partition ``jid`` (or a batch id) names; None when the server is not
        partitioned or the id names no partition."""
        return partition_of_id(jid, self._count) if self.partitioned else None

    def link_of(self, partition: Optional[int]) -> Link:
        """The link to ``partition``'s own server, or to the node when none is known."""
        address = self._addresses.get(partition) if partition is not None else None
        if address is None:
            return self.node
        link = self._links.get(address)
        if link is None:
            link = self._links[address] = Link(self._open_channel(address))
        return link

    async def close(self) -> None:
        """Closes the partitions' channels (not the node's, which the caller owns)."""
        if self._loading is not None:
            self._loading.cancel()
            self._loading = None
        for timer in self._retiring.values():
            timer.cancel()
        self._retiring.clear()
        links, self._links = list(self._links.values()), {}
        for link in links:
            await link.channel.close()
        if self._closing:
            await asyncio.wait(self._closing)

    async def _load(self) -> None:
        self._last_read = time.monotonic()
        try:
            info: admin_service_pb2.GetServerInfoResponse = await self.node.admin.GetServerInfo(
                admin_service_pb2.GetServerInfoRequest(), timeout=_MAP_READ_TIMEOUT
            )
        except grpc.RpcError as err:
            # A server too old to publish a map, a token without the right to read it, or a
            # node that is down: the address given routes everything (the map read before, if
            # any, stays: its servers may well be up).
            code = err.code() if isinstance(err, grpc.aio.AioRpcError) else None
            self._settled = self._settled or code in _FINAL_CODES
            log.debug("partition map not read (%s); calls go to the address given", code.name if code else err)
        else:
            self._settled = True
            self._apply(info)
        finally:
            self._loaded = True
            self._loading = None

    def _apply(self, info: admin_service_pb2.GetServerInfoResponse) -> None:
        addresses = {owner.index: owner.grpc_address for owner in info.partitions if owner.grpc_address}
        # Spread over 1 is not spread; over more than there are partitions, over all of them.
        spread = {s.queue: s.partitions for s in info.spread_queues if s.queue and s.partitions > 1}
        if addresses != self._addresses or spread != self._spread:
            log.debug("partition map: %d partitions, %s, spread queues %s", info.partition_count, addresses, spread)
        self._count, self._addresses, self._spread = info.partition_count, addresses, spread
        live = set(addresses.values())
        for address in live:
            timer = self._retiring.pop(address, None)
            if timer is not None:
                timer.cancel()
        stale: List[str] = [a for a in self._links if a not in live and a not in self._retiring]
        loop = asyncio.get_running_loop()
        for address in stale:
            self._retiring[address] = loop.call_later(_RETIRE_AFTER, self._retire, address)

    def _retire(self, address: str) -> None:
        self._retiring.pop(address, None)
        link = self._links.pop(address, None)
        if link is not None:
            task = asyncio.ensure_future(link.channel.close())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)
