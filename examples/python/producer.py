#!/usr/bin/env python3
"""Example Worq producer: submits three `example.greet` jobs and prints their results.

    python examples/python/producer.py --addr 127.0.0.1:7419 --queue examples-py

Exits 0 when all three completed, 1 otherwise. Start examples/python/worker.py first (or
after: the jobs wait in the queue).
"""

import argparse
import asyncio
import sys

import _path  # noqa: F401  (finds worq in a checkout without installing it)
import worq

NAMES = ["ada", "grace", "linus"]


async def produce(addr: str, queue: str) -> int:
    async with worq.Client(addr) as client:
        jids = [await client.submit("example.greet", args=[name], queue=queue) for name in NAMES]
        failed = 0
        for name, jid in zip(NAMES, jids):
            job = await client.wait_result(jid, timeout=30)
            if job.state is worq.JobState.COMPLETED:
                print(job.result_text, flush=True)
            else:
                failed += 1
                reason = job.failure.message if job.failure else ""
                print(f"job {jid} ({name}) ended {job.state.name}: {reason}", file=sys.stderr)
        return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description="Worq example producer")
    parser.add_argument("--addr", default="127.0.0.1:7419", help="server address, host:port")
    parser.add_argument("--queue", default="examples-py", help="queue to submit to")
    opts = parser.parse_args()
    try:
        return asyncio.run(produce(opts.addr, opts.queue))
    except worq.WorqError as err:
        print(f"producer: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
