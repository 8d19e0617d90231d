#!/usr/bin/env python3
"""Example Worq worker: handles `example.greet` jobs (args [name] -> "hello, {name}").

    python examples/python/worker.py --addr 127.0.0.1:7419 --queue examples-py

Runs until SIGTERM or Ctrl-C, then shuts down gracefully and exits 0.
"""

import argparse
import logging
import sys

import _path  # noqa: F401  (finds worq in a checkout without installing it)
import worq


def main() -> int:
    parser = argparse.ArgumentParser(description="Worq example worker")
    parser.add_argument("--addr", default="127.0.0.1:7419", help="server address, host:port")
    parser.add_argument("--queue", default="examples-py", help="queue to work on")
    opts = parser.parse_args()
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    worker = worq.Worker(opts.addr, queues=[opts.queue], concurrency=10)

    @worker.handler("example.greet")
    async def greet(job: worq.Job) -> str:
        (name,) = job.args
        return f"hello, {name}"

    worker.run_sync(install_signal_handlers=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
