#!/usr/bin/env python3
"""The bench's raw-stub peer in Python: the generated grpcio stubs (grpc.aio), no library.

One Submit RPC per job (50 in flight), one Lease stream with credits = concurrency, one Ack
RPC per job. Speaks the harness's child protocol (bench/lib/child.mjs): config as JSON in
the last argument, JSON lines on stdout, one-word commands ("go", "stop", "exit") on stdin;
stdin closing counts as "exit".

    .tools/venv/bin/python bench/peers/worq-raw-python/peer.py producer|worker CONFIG_JSON
"""

import asyncio
import json
import os
import re
import sys
import threading
import time

import grpc
from google.protobuf import struct_pb2

try:
    from worq.v1 import admin_service_pb2, admin_service_pb2_grpc
    from worq.v1 import producer_service_pb2, producer_service_pb2_grpc
    from worq.v1 import job_pb2, worker_service_pb2, worker_service_pb2_grpc
except ImportError:  # not installed: the checked-in copy
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "gen", "python", "src"))
    from worq.v1 import admin_service_pb2, admin_service_pb2_grpc
    from worq.v1 import producer_service_pb2, producer_service_pb2_grpc
    from worq.v1 import job_pb2, worker_service_pb2, worker_service_pb2_grpc

JOB_TYPE = "bench.noop"  # bench/peers/payload.mjs


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def now_ms():
    return time.time() * 1000


def self_stats():
    """CPU seconds of this process (all threads) and its peak RSS in MiB."""
    times = os.times()
    hwm = float("nan")
    try:
        with open("/proc/self/status") as status:
            match = re.search(r"^VmHWM:\s+(\d+) kB", status.read(), re.M)
            if match:
                hwm = int(match.group(1)) / 1024
    except OSError:
        pass
    return times.user + times.system, hwm


def job_args(seq):
    ident = f"{seq % 1_000_000:06d}"
    args = struct_pb2.ListValue()
    args.append({"seq": seq, "user": f"user-{ident}", "email": f"user{ident}@example.com", "plan": "pro", "ts": 1_763_780_000_000 + seq})
    return args


def summary(values):
    if not values:
        return None
    values = sorted(values)
    at = lambda p: values[min(len(values) - 1, int(p * len(values)))]  # noqa: E731
    return {"n": len(values), "p50": at(0.5), "p99": at(0.99), "max": values[-1]}


class Commands:
    """Commands from stdin as asyncio events; "exit" or EOF ends the process."""

    def __init__(self, loop):
        self.events = {"go": asyncio.Event(), "stop": asyncio.Event()}
        threading.Thread(target=self._read, args=(loop,), daemon=True).start()

    def _read(self, loop):
        for line in sys.stdin:
            name = line.strip()
            if name == "exit":
                os._exit(0)
            if name in self.events:
                loop.call_soon_threadsafe(self.events[name].set)
        os._exit(0)

    async def wait(self, name):
        await self.events[name].wait()


async def connect(config):
    channel = grpc.aio.insecure_channel(config["address"])
    await admin_service_pb2_grpc.AdminServiceStub(channel).GetServerInfo(admin_service_pb2.GetServerInfoRequest())
    return channel


async def run_producer(config, commands):
    if config.get("mode") != "single":
        raise SystemExit(f"the Python raw-stub peer runs the single-submit scenario only, not {config.get('mode')!r}")
    n, first = config["n"], config.get("firstSeq", 0)
    producer = producer_service_pb2_grpc.ProducerServiceStub(await connect(config))
    send({"type": "ready", "pid": os.getpid()})
    await commands.wait("go")
    cpu0, _ = self_stats()
    started_at = now_ms()
    call_ms = []
    next_seq = 0

    async def submitter():
        nonlocal next_seq
        while next_seq < n:
            seq = first + next_seq
            next_seq += 1
            t0 = time.perf_counter()
            await producer.Submit(producer_service_pb2.SubmitRequest(job=job_pb2.JobSpec(type=JOB_TYPE, queue=config["queue"], args=job_args(seq))))
            call_ms.append((time.perf_counter() - t0) * 1000)

    await asyncio.gather(*(submitter() for _ in range(min(config.get("concurrency", 50), n))))
    ended_at = now_ms()
    cpu1, hwm = self_stats()
    send({"type": "result", "n": n, "startedAt": started_at, "endedAt": ended_at, "callMs": summary(call_ms), "cpuSec": cpu1 - cpu0, "hwmMiB": hwm})
    await asyncio.Event().wait()  # until "exit"


async def run_worker(config, commands):
    worker = worker_service_pb2_grpc.WorkerServiceStub(await connect(config))
    send({"type": "ready", "pid": os.getpid()})
    await commands.wait("go")
    cpu0, _ = self_stats()
    go_at = now_ms()
    state = {"count": 0, "first_at": None}
    expect = config["expect"]
    tasks = set()

    async def ack(leased):
        await worker.Ack(worker_service_pb2.AckRequest(jid=leased.job.jid, lease_id=leased.lease_id))
        state["count"] += 1
        if state["count"] == 1:
            state["first_at"] = now_ms()
        if state["count"] == expect:
            last_at = now_ms()
            cpu1, hwm = self_stats()
            send({"type": "done", "count": expect, "goAt": go_at, "firstAt": state["first_at"], "lastAt": last_at, "cpuSec": cpu1 - cpu0, "hwmMiB": hwm})

    request = worker_service_pb2.LeaseRequest(queues=[config["queue"]], worker_id=f"bench-raw-py-{os.getpid()}", credits=config.get("concurrency", 50))
    call = worker.Lease(request)

    async def read():
        async for response in call:
            if response.WhichOneof("kind") == "jobs":
                for leased in response.jobs.jobs:
                    task = asyncio.create_task(ack(leased))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)

    reading = asyncio.create_task(read())
    stop = asyncio.create_task(commands.wait("stop"))
    finished, _ = await asyncio.wait({reading, stop}, return_when=asyncio.FIRST_COMPLETED)
    if reading in finished:
        reading.result()  # raises what ended the stream
        raise SystemExit("the Lease stream ended before stop")
    call.cancel()
    try:
        await reading
    except asyncio.CancelledError:
        pass
    if tasks:
        await asyncio.gather(*tasks)
    send({"type": "stopped", "count": state["count"], "hwmMiB": self_stats()[1]})
    await asyncio.Event().wait()


async def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("producer", "worker"):
        raise SystemExit("usage: peer.py producer|worker CONFIG_JSON")
    config = json.loads(sys.argv[2])
    commands = Commands(asyncio.get_running_loop())
    await (run_producer if sys.argv[1] == "producer" else run_worker)(config, commands)


if __name__ == "__main__":
    asyncio.run(main())
