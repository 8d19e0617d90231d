"""Where a job lives on a partitioned cluster (internal).

The server places jobs with these same rules (docs/scale-out.md), so the library can send a
call straight to the partition's own server instead of through a node, which would forward
it (one hop more). Identical in every Worq library; the test vectors are shared.
"""

from __future__ import annotations

from typing import List, Optional, Sequence

import grpc

from worq.v1 import job_pb2

#: Ten bits of a job or batch id name its partition, so there are at most 1024.
MAX_PARTITIONS = 1024
_PARTITION_BITS = MAX_PARTITIONS - 1

#: The queue of a job submitted without one (the server's default).
DEFAULT_QUEUE = "default"

_FNV_OFFSET = 0x811C9DC5
_FNV_PRIME = 0x01000193


def fnv1a32(text: str) -> int:
    """FNV-1a, 32 bits, over the UTF-8 bytes of ``text``: the hash that places queues."""
    h = _FNV_OFFSET
    for byte in text.encode("utf-8"):
        h ^= byte
        h = (h * _FNV_PRIME) & 0xFFFFFFFF
    return h


def queue_home(queue: str, count: int) -> int:
    """The partition of the jobs of ``queue`` (empty: the default queue) out of ``count``."""
    return fnv1a32(queue or DEFAULT_QUEUE) % count


def queue_partitions(queue: str, count: int, spread: int = 1) -> List[int]:
    """The partitions the jobs of ``queue`` live in, out of ``count``: its home, and for a
    queue spread over ``spread`` partitions the ones after it too, wrapping (so queues spread
    by the same amount do not all pile onto the same partitions); at most all ``count``."""
    home = queue_home(queue, count)
    return [(home + i) % count for i in range(min(max(1, spread), count))]


def placement_key(job: job_pb2.JobSpec) -> str:
    """What places a new job of a spread queue: the first set of its unique key, debounce
    key, group key and idempotency key, so that the jobs sharing one meet in one partition
    (where the server finds the job holding the key); empty when it has none."""
    for key in (job.unique.key, job.debounce.key, job.group_key, job.idempotency_key):
        if key:
            return key
    return ""


def spread_partition(partitions: Sequence[int], key: str, turn: int) -> int:
    """Of a spread queue's ``partitions`` (in :func:`queue_partitions`' order), the one a new
    job goes to: by the hash of its placement ``key``, or without one the ``turn``-th (a
    counter the caller moves on at each such job), wrapping."""
    return partitions[(fnv1a32(key) if key else turn) % len(partitions)]


def partition_of_id(jid: str, count: int) -> Optional[int]:
    """The partition a job (or batch) id names out of ``count``; None when its bits name
    none of them: no such job exists, and the server at the given address says so."""
    if count == 1:
        # Ids made before the cluster was partitioned carry random bits there.
        return 0
    try:
        partition = int(jid[33:], 16) & _PARTITION_BITS
    except ValueError:
        return None
    return partition if partition < count else None


def even_shares(total: int, parts: int) -> List[int]:
    """``total`` over ``parts`` as evenly as it goes, the first ones taking the remainder, at
    least 1 each: a worker's concurrency split over its streams to several partitions (the
    same split a node makes of a Lease it merges, so both hold the worker to the same sum)."""
    return [max(1, total // parts + (1 if i < total % parts else 0)) for i in range(parts)]


def never_sent(code: Optional[grpc.StatusCode], details: Optional[str]) -> bool:
    """Whether a failed call never reached a server: its channel could not connect (the
    server died, or its partition moved), so sending it again elsewhere does nothing twice."""
    if code != grpc.StatusCode.UNAVAILABLE:
        return False
    text = (details or "").lower()
    return "failed to connect to all addresses" in text or "connection refused" in text


def may_have_moved(code: Optional[grpc.StatusCode], details: Optional[str]) -> bool:
    """Whether an answer may mean the partition map is stale: the partition's server is gone
    (UNAVAILABLE), or the call reached a partition that does not hold the job's queue."""
    if code == grpc.StatusCode.UNAVAILABLE:
        return True
    return code == grpc.StatusCode.FAILED_PRECONDITION and "lives in partition" in (details or "")
