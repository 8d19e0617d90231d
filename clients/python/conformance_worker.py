#!/usr/bin/env python3
"""Conformance worker of the Python library (clients/CONFORMANCE.md), built only on the
public API of `worq`.

    .tools/venv/bin/python clients/python/conformance_worker.py --addr 127.0.0.1:PORT --queue Q[,Q2...] --lang py

Prints one JSON line per event on stdout (ready, start, done, reconnecting, stopped), flushed
at once; logs go to stderr. SIGTERM or SIGINT shuts it down gracefully (exit 0).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from typing import Any, Dict

import worq


def emit(record: Dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(record, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def js_number(value: Any) -> str:
    """Formats a number as JavaScript would (42, not 42.0), so every language agrees."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def build_worker(opts: argparse.Namespace) -> worq.Worker:
    lang = opts.lang

    def on_event(event: worq.WorkerEvent) -> None:
        if event.name == "ready":
            emit({"event": "ready", "lang": lang, "worker_id": worker.worker_id})
        elif event.name == "start":
            emit({"event": "start", "jid": event.jid, "attempt": event.attempt, "type": event.type})
        elif event.name == "done":
            emit({"event": "done", "jid": event.jid, "outcome": event.outcome})
        elif event.name == "reconnecting":
            emit({"event": "reconnecting", "delay_ms": round((event.delay or 0) * 1000), "reason": event.reason})

    worker = worq.Worker(
        opts.addr,
        queues=opts.queue.split(","),
        concurrency=opts.concurrency,
        worker_id=opts.worker_id,
        shutdown_timeout=opts.shutdown_timeout_ms / 1000,
        on_event=on_event,
    )

    # Jobs this process answered rate-limited (the attempt is not spent, so job.attempt cannot tell).
    rate_limited_once: set[str] = set()

    @worker.handler("scenario")
    async def scenario(job: worq.Job, ctx: worq.JobContext) -> Any:
        kw = job.kwargs
        action = kw.get("action")
        if action == "succeed":
            return str(kw["result"])
        if action == "fail_times":
            if job.attempt <= int(kw["times"]):
                raise RuntimeError(f"planned failure {job.attempt}")
            return str(kw["result"])
        if action == "permanent":
            raise worq.PermanentError(str(kw["message"]))
        if action == "sleep":
            try:
                await asyncio.wait_for(ctx.cancelled.wait(), timeout=float(kw["ms"]) / 1000)
            except asyncio.TimeoutError:
                return str(kw["result"])
            raise RuntimeError(f"cancelled ({ctx.cancel_reason})")
        if action == "checkpoint_resume":
            if not job.checkpoint:
                await ctx.checkpoint(str(kw["checkpoint"]).encode())
                raise RuntimeError("planned failure after a checkpoint")
            return "resumed from " + job.checkpoint.decode()
        if action == "progress":
            await ctx.progress(int(kw["percent"]), str(kw["message"]))
            try:
                await asyncio.wait_for(ctx.cancelled.wait(), timeout=float(kw["ms"]) / 1000)
            except asyncio.TimeoutError:
                return str(kw["result"])
            raise RuntimeError(f"cancelled ({ctx.cancel_reason})")
        if action == "retry_after":
            if job.attempt == 1:
                raise worq.RetryLater(float(kw["ms"]) / 1000, "retry later, as planned")
            return "retried"
        if action == "permanent_code":
            try:
                raise RuntimeError(str(kw["cause"]))
            except RuntimeError as err:
                raise worq.PermanentError(str(kw["message"]), code=str(kw["code"])) from err
        if action == "temporary_cause":
            if job.attempt == 1:
                raise worq.TemporaryError(
                    str(kw["message"]), retry_after=float(kw["ms"]) / 1000, cause=RuntimeError(str(kw["cause"]))
                )
            return "retried"
        if action == "rate_limited":
            if job.jid not in rate_limited_once:
                rate_limited_once.add(job.jid)
                raise worq.RateLimited("turned away", retry_after=float(kw["ms"]) / 1000)
            return "after the limit"
        raise worq.PermanentError(f"unknown scenario action {action!r}")

    @worker.handler(f"{lang}.double")
    async def double(job: worq.Job) -> str:
        return f"{lang}:{js_number(job.args[0] * 2)}"

    return worker


def main() -> int:
    parser = argparse.ArgumentParser(description="Worq conformance worker (Python library)")
    parser.add_argument("--addr", required=True, help="server address, host:port")
    parser.add_argument("--queue", required=True, help="the queues to lease from, comma-separated (one worker, all of them)")
    parser.add_argument("--lang", required=True, help="language tag used in results (py)")
    parser.add_argument("--worker-id", default=None, help="default: the library's generated id")
    parser.add_argument("--concurrency", type=int, default=5)
    parser.add_argument("--shutdown-timeout-ms", type=int, default=5000)
    parser.add_argument("--log-level", default="INFO")
    opts = parser.parse_args()

    logging.basicConfig(
        stream=sys.stderr,
        level=opts.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    worker = build_worker(opts)
    try:
        worker.run_sync(install_signal_handlers=True)
    except worq.WorqError as err:
        print(f"conformance worker: {err}", file=sys.stderr)
        return 1
    emit({"event": "stopped", "code": 0})
    return 0


if __name__ == "__main__":
    sys.exit(main())
