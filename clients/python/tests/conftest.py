"""Fixtures: a real Worq server process (node dist/src/cli/worq.js serve) per test, each with
its own data dir. Skipped with a one-line reason when node or the build is missing, unless
WORQ_REQUIRE_ALL=1 (CI), which turns the skip into a failure."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable, Iterator, List, Optional, Sequence, TypeVar

import pytest

import worq

ROOT = Path(__file__).resolve().parents[3]
CLI = ROOT / "dist" / "src" / "cli" / "worq.js"
T = TypeVar("T")


def _missing_reason() -> Optional[str]:
    if shutil.which("node") is None:
        return "node is not on the PATH"
    if not CLI.exists():
        return f"{CLI.relative_to(ROOT)} is missing: run `npm run build` first"
    return None


class ServerProcess:
    """One `worq serve` process; restart() starts a new one on the same port and data dir."""

    def __init__(self, data_dir: Path, orphan_grace: str = "1s", args: Sequence[str] = ()) -> None:
        self.data_dir = data_dir
        self.orphan_grace = orphan_grace
        self.args = list(args)
        self.port = 0
        self.proc: Optional[subprocess.Popen[str]] = None
        self.stderr_lines: List[str] = []

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, port: int = 0, timeout: float = 15.0) -> None:
        cmd = [
            "node", str(CLI), "serve",
            "--host", "127.0.0.1",
            "--port", str(port),
            # A restart passes a fixed --port; the HTTP side would then take 7420, which a
            # parallel test (or another server on the machine) may hold.
            "--http-port", "0",
            "--data-dir", str(self.data_dir),
            "--orphan-grace", self.orphan_grace,
            "--log-level", "warn",
            *self.args,
        ]
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        threading.Thread(target=self._drain_stderr, args=(self.proc,), daemon=True).start()
        deadline = time.monotonic() + timeout
        assert self.proc.stdout is not None
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            with contextlib.suppress(ValueError):
                info = json.loads(line)
                if "grpcPort" in info:
                    self.port = int(info["grpcPort"])
                    threading.Thread(target=self.proc.stdout.read, daemon=True).start()
                    return
        self.stop()
        raise RuntimeError(f"worq serve did not start: {''.join(self.stderr_lines)[-2000:]}")

    def _drain_stderr(self, proc: "subprocess.Popen[str]") -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            self.stderr_lines.append(line)

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM (graceful), then SIGKILL if it does not exit in time."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def restart(self) -> None:
        port = self.port
        self.stop()
        self.start(port=port)


@pytest.fixture
def server_factory(tmp_path: Path) -> Iterator[Callable[..., ServerProcess]]:
    reason = _missing_reason()
    if reason is not None:
        if os.environ.get("WORQ_REQUIRE_ALL") == "1":
            pytest.fail(f"WORQ_REQUIRE_ALL=1 but the Worq server cannot run: {reason}")
        pytest.skip(f"skipping: {reason}")
    servers: List[ServerProcess] = []

    def make(orphan_grace: str = "1s", args: Sequence[str] = ()) -> ServerProcess:
        server = ServerProcess(tmp_path / f"data-{len(servers)}", orphan_grace, args)
        server.start()
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()


@pytest.fixture
def server(server_factory: Callable[..., ServerProcess]) -> ServerProcess:
    return server_factory()


def run(coro: Awaitable[T], timeout: float = 30.0) -> T:
    """Runs one test coroutine on a fresh event loop, with an overall time limit."""

    async def bounded() -> T:
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(bounded())


class Running:
    """A worker running in the background of a test, with the events it emitted."""

    def __init__(self, worker: worq.Worker, events: List[worq.WorkerEvent]) -> None:
        self.worker = worker
        self.events = events
        self.task: Optional["asyncio.Task[None]"] = None

    async def wait_for(self, predicate: Callable[[worq.WorkerEvent], bool], timeout: float = 10.0) -> worq.WorkerEvent:
        deadline = time.monotonic() + timeout
        seen = 0
        while time.monotonic() < deadline:
            for event in self.events[seen:]:
                if predicate(event):
                    return event
            seen = len(self.events)
            if self.task is not None and self.task.done():
                self.task.result()
                raise AssertionError("the worker stopped before the awaited event")
            await asyncio.sleep(0.01)
        raise AssertionError(f"no matching worker event within {timeout}s; saw {[e.name for e in self.events]}")

    async def stop(self) -> None:
        self.worker.stop()
        assert self.task is not None
        await self.task


def make_worker(address: str, queue: str, **options: Any) -> Running:
    events: List[worq.WorkerEvent] = []
    options.setdefault("shutdown_timeout", 5.0)
    worker = worq.Worker(address, queues=[queue], on_event=events.append, **options)
    return Running(worker, events)


@contextlib.asynccontextmanager
async def running(handle: Running) -> AsyncIterator[Running]:
    """Starts the worker, waits for its stream, and stops it gracefully on the way out."""
    handle.task = asyncio.create_task(handle.worker.run())
    try:
        await handle.wait_for(lambda e: e.name == "ready")
        yield handle
    finally:
        if not handle.task.done():
            handle.worker.stop()
        await handle.task
