"""Worker behaviour against a real server (clients/CONFORMANCE.md)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Callable, Dict, List

import pytest

import worq
from conftest import Running, ServerProcess, make_worker, run, running


def test_returned_values_are_acked_as_results(server: ServerProcess) -> None:
    async def scenario() -> None:
        handle = make_worker(server.address, "q", concurrency=4)
        worker = handle.worker
        seen: Dict[str, Any] = {}

        @worker.handler("greet")
        async def greet(job: worq.Job, ctx: worq.JobContext) -> str:
            seen["ctx"] = (ctx.jid == job.jid, ctx.deadline is not None, ctx.worker_id)
            return f"hello, {job.args[0]}"

        @worker.handler("json")
        async def as_json(job: worq.Job) -> Dict[str, Any]:
            return {"sum": sum(job.args), "k": job.kwargs["k"]}

        @worker.handler("bytes")
        def sync_bytes(job: worq.Job) -> bytes:  # sync: runs in the executor
            assert threading.current_thread() is not threading.main_thread()
            return job.payload[::-1]

        @worker.handler("nothing")
        async def nothing(job: worq.Job) -> None:
            return None

        async with running(handle), worq.Client(server.address) as client:
            jids = [
                await client.submit("greet", args=["ada"], queue="q"),
                await client.submit("json", args=[1, 2, 3], kwargs={"k": "v"}, queue="q"),
                await client.submit("bytes", payload=b"abc", queue="q"),
                await client.submit("nothing", queue="q"),
            ]
            jobs = [await client.wait_result(jid, 10) for jid in jids]
        assert [j.state for j in jobs] == [worq.JobState.COMPLETED] * 4
        assert jobs[0].result_text == "hello, ada"
        assert jobs[1].result_json() == {"sum": 6, "k": "v"}
        assert jobs[2].result == b"cba"
        assert jobs[3].result == b""
        assert all(j.attempt == 1 for j in jobs)
        assert seen["ctx"] == (True, True, worker.worker_id)
        outcomes = {e.jid: e.outcome for e in handle.events if e.name == "done"}
        assert [outcomes[j] for j in jids] == ["ack"] * 4

    run(scenario())


def test_failures_are_retried_until_they_succeed(server: ServerProcess) -> None:
    async def scenario() -> None:
        handle = make_worker(server.address, "q")

        @handle.worker.handler("flaky")
        async def flaky(job: worq.Job, ctx: worq.JobContext) -> str:
            if job.attempt <= 2:
                raise ConnectionError(f"planned failure {job.attempt}")
            return "third time"

        async with running(handle), worq.Client(server.address) as client:
            jid = await client.submit(
                "flaky", queue="q", backtrace=5, retry={"max_attempts": 5, "initial_delay": 0.05, "backoff": "constant"}
            )
            job = await client.wait_result(jid, 10)
        assert job.state is worq.JobState.COMPLETED and job.attempt == 3 and job.result_text == "third time"
        failure = job.failure
        assert failure is not None
        assert failure.retry_count == 2 and failure.message == "planned failure 2"
        assert failure.errtype == "ConnectionError" and failure.category is worq.FailureCategory.TEMPORARY
        assert 1 <= len(failure.backtrace) <= 5 and "in flaky" in failure.backtrace[0]
        assert [e.outcome for e in handle.events if e.name == "done"] == ["fail", "fail", "ack"]

    run(scenario())


def test_permanent_error_fails_at_once_and_retry_later_sets_the_retry_time(server: ServerProcess) -> None:
    async def scenario() -> None:
        handle = make_worker(server.address, "q")
        starts: List[float] = []

        @handle.worker.handler("bad")
        async def bad(job: worq.Job) -> None:
            raise worq.PermanentError("no such account")

        @handle.worker.handler("later")
        async def later(job: worq.Job) -> str:
            starts.append(time.monotonic())
            if job.attempt == 1:
                raise worq.RetryLater(0.4)
            return "retried"

        async with running(handle), worq.Client(server.address) as client:
            bad_jid = await client.submit("bad", queue="q")
            later_jid = await client.submit("later", queue="q")
            bad_job = await client.wait_result(bad_jid, 10)
            later_job = await client.wait_result(later_jid, 10)
        assert bad_job.state is worq.JobState.FAILED and bad_job.attempt == 1
        assert bad_job.failure is not None and bad_job.failure.category is worq.FailureCategory.PERMANENT
        assert bad_job.failure.message == "no such account" and bad_job.failure.errtype == "PermanentError"
        assert later_job.state is worq.JobState.COMPLETED and later_job.attempt == 2
        assert starts[1] - starts[0] >= 0.38

    run(scenario())


def test_lease_is_renewed_while_a_job_runs_3x_its_reserve_for(server: ServerProcess) -> None:
    async def scenario() -> None:
        handle = make_worker(server.address, "q")

        @handle.worker.handler("long")
        async def long(job: worq.Job) -> str:
            await asyncio.sleep(3)
            return "long"

        async with running(handle), worq.Client(server.address) as client:
            jid = await client.submit("long", queue="q", reserve_for=1)
            job = await client.wait_result(jid, 15)
        assert job.state is worq.JobState.COMPLETED and job.attempt == 1
        assert len([e for e in handle.events if e.name == "start"]) == 1

    run(scenario())


def test_handler_is_cancelled_at_the_execution_deadline(server: ServerProcess) -> None:
    async def scenario() -> None:
        handle = make_worker(server.address, "q")
        seen: Dict[str, Any] = {}

        @handle.worker.handler("slow")
        async def slow(job: worq.Job, ctx: worq.JobContext) -> str:
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                seen["reason"] = ctx.cancel_reason
                seen["event"] = ctx.cancelled.is_set()
                raise
            return "never"

        async with running(handle), worq.Client(server.address) as client:
            started = time.monotonic()
            jid = await client.submit("slow", queue="q", execution_timeout=1, retry={"max_attempts": 1})
            job = await client.wait_result(jid, 10)
        assert time.monotonic() - started < 5
        assert seen == {"reason": "deadline", "event": True}
        assert job.state is worq.JobState.DEAD_LETTER
        assert job.failure is not None and job.failure.category is worq.FailureCategory.TIMEOUT

    run(scenario())


def test_concurrency_bounds_running_handlers(server: ServerProcess) -> None:
    async def scenario() -> None:
        handle = make_worker(server.address, "q", concurrency=2)
        running_now = 0
        most = 0

        @handle.worker.handler("nap")
        async def nap(job: worq.Job) -> None:
            nonlocal running_now, most
            running_now += 1
            most = max(most, running_now)
            await asyncio.sleep(0.2)
            running_now -= 1

        async with running(handle), worq.Client(server.address) as client:
            jids = await client.submit_batch([{"type": "nap", "queue": "q"}] * 6)
            for jid in jids:
                assert (await client.wait_result(jid, 10)).state is worq.JobState.COMPLETED
        assert most == 2

    run(scenario())


def test_graceful_stop_finishes_running_jobs(server: ServerProcess) -> None:
    async def scenario() -> None:
        handle = make_worker(server.address, "q", shutdown_timeout=5)

        @handle.worker.handler("work")
        async def work(job: worq.Job) -> str:
            await asyncio.sleep(1)
            return "finished"

        async with worq.Client(server.address) as client:
            async with running(handle):
                jid = await client.submit("work", queue="q")
                await handle.wait_for(lambda e: e.name == "start" and e.jid == jid)
                await handle.stop()
            job = await client.get_job(jid)
        assert job.state is worq.JobState.COMPLETED and job.result_text == "finished"
        assert handle.events[-1].name == "stopped"

    run(scenario())


def test_graceful_stop_past_its_timeout_fails_jobs_back_for_an_immediate_retry(server: ServerProcess) -> None:
    async def scenario() -> None:
        first = make_worker(server.address, "q", shutdown_timeout=0.3)
        cancelled: Dict[str, Any] = {}

        @first.worker.handler("stuck")
        async def stuck(job: worq.Job, ctx: worq.JobContext) -> None:
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                cancelled["reason"] = ctx.cancel_reason
                raise

        async with worq.Client(server.address) as client:
            async with running(first):
                jid = await client.submit("stuck", queue="q", retry={"initial_delay": 60})
                await first.wait_for(lambda e: e.name == "start" and e.jid == jid)
                stopped_at = time.monotonic()
                await first.stop()
            assert time.monotonic() - stopped_at < 3
            assert cancelled == {"reason": "shutdown"}
            job = await client.get_job(jid)
            # retry_after = 0 overrides the 60 s backoff: ready again at once.
            assert job.state in (worq.JobState.SCHEDULED, worq.JobState.RETRYING)
            assert job.failure is not None and job.failure.category is worq.FailureCategory.TEMPORARY

            second = make_worker(server.address, "q")

            @second.worker.handler("stuck")
            async def quick(job: worq.Job) -> str:
                return f"attempt {job.attempt}"

            async with running(second):
                done = await client.wait_result(jid, 5)
        assert done.state is worq.JobState.COMPLETED and done.result_text == "attempt 2"

    run(scenario())


def test_reconnects_after_a_server_restart_and_reports_the_running_job(server_factory: Callable[..., ServerProcess]) -> None:
    # An orphan grace longer than the worker's report backoff (which grows while the server is
    # down): the lease held across the restart must still be live when the Ack gets through.
    server = server_factory(orphan_grace="10s")

    async def scenario() -> None:
        handle = make_worker(server.address, "q")
        release = asyncio.Event()

        @handle.worker.handler("survivor")
        async def survivor(job: worq.Job) -> str:
            await release.wait()
            return "survived"

        @handle.worker.handler("after")
        async def after(job: worq.Job) -> str:
            return "after restart"

        async with running(handle):
            async with worq.Client(server.address) as client:
                jid = await client.submit("survivor", queue="q")
            await handle.wait_for(lambda e: e.name == "start" and e.jid == jid)
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, server.stop)
            release.set()  # finishes while the server is down: the Ack must be retried
            await asyncio.sleep(0.3)
            await loop.run_in_executor(None, server.start, server.port)
            await handle.wait_for(lambda e: e.name == "reconnecting")
            async with worq.Client(server.address) as client:
                job = await client.wait_result(jid, 15)
                assert job.state is worq.JobState.COMPLETED and job.attempt == 1
                assert job.result_text == "survived"
                second = await client.submit("after", queue="q")
                assert (await client.wait_result(second, 10)).result_text == "after restart"
        assert len([e for e in handle.events if e.name == "connected"]) >= 2

    run(scenario(), timeout=45)


def test_run_raises_when_the_server_refuses_the_lease(server: ServerProcess) -> None:
    async def scenario() -> None:
        worker = worq.Worker(server.address, queues=["not a queue!"])
        worker.register("x", lambda job: None)
        try:
            await worker.run()
        except worq.InvalidArgument as err:
            assert "queue" in err.message
        else:
            raise AssertionError("run() returned for an invalid queue name")

    run(scenario())


def test_cancel_revokes_a_running_job(server: ServerProcess) -> None:
    async def scenario() -> None:
        handle = make_worker(server.address, "q")
        seen: Dict[str, Any] = {}

        @handle.worker.handler("cancel-me")
        async def cancel_me(job: worq.Job, ctx: worq.JobContext) -> str:
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                seen["reason"] = ctx.cancel_reason
                raise
            return "never"

        async with running(handle), worq.Client(server.address) as client:
            jid = await client.submit("cancel-me", queue="q")
            await handle.wait_for(lambda e: e.name == "start" and e.jid == jid)
            cancelled = await client.cancel(jid)
            assert cancelled.state is worq.JobState.CANCELLED
            done = await handle.wait_for(lambda e: e.name == "done" and e.jid == jid, timeout=5)
            with pytest.raises(worq.LeaseLost):
                await client.cancel(jid)  # already finished
        assert seen == {"reason": "revoked"}
        assert done.outcome == "lease_lost"

    run(scenario())


def test_dependencies_and_idempotency_keys(server: ServerProcess) -> None:
    async def scenario() -> None:
        handle = make_worker(server.address, "q")
        order: List[str] = []

        @handle.worker.handler("step")
        async def step(job: worq.Job) -> str:
            order.append(job.args[0])
            return job.args[0]

        async with worq.Client(server.address) as client:
            first = await client.submit("step", args=["first"], queue="q", idempotency_key="k1")
            again = await client.submit("step", args=["first"], queue="q", idempotency_key="k1")
            assert again == first
            second = await client.submit("step", args=["second"], queue="q", depends_on=[first])
            assert (await client.get_job(second)).state is worq.JobState.PENDING
            async with running(handle):
                assert (await client.wait_result(second, 10)).state is worq.JobState.COMPLETED
        assert order == ["first", "second"]

    run(scenario())


def test_queue_order_random_takes_from_every_queue_with_ready_jobs(server: ServerProcess) -> None:
    async def first_queues(order: str, prefix: str) -> List[str]:
        seen: List[str] = []
        events: List[worq.WorkerEvent] = []
        worker = worq.Worker(
            server.address,
            queues=[f"{prefix}-a", f"{prefix}-b"],
            concurrency=1,
            shutdown_timeout=5.0,
            on_event=events.append,
            queue_order=order,
        )

        @worker.handler("pick")
        async def pick(job: worq.Job) -> None:
            seen.append(job.queue)

        async with worq.Client(server.address) as client:
            jobs = [{"type": "pick", "queue": f"{prefix}-{q}"} for q in "ab" for _ in range(30)]
            await client.submit_batch(jobs)
            async with running(Running(worker, events)):
                while len(seen) < 20:
                    await asyncio.sleep(0.02)
        return seen[:20]

    async def scenario() -> None:
        listed = await first_queues("listed", "order-listed")
        assert listed == ["order-listed-a"] * 20
        # Twenty fair coins all landing on one queue: about one run in 500,000.
        random_order = await first_queues("random", "order-random")
        assert set(random_order) == {"order-random-a", "order-random-b"}
        with pytest.raises(ValueError, match="queue_order"):
            worq.Worker(server.address, queues=["q"], queue_order="sideways")

    run(scenario())


def test_fan_out_collects_children_and_a_children_of_join_runs_last(server: ServerProcess) -> None:
    async def scenario() -> None:
        handle = make_worker(server.address, "py-fan", concurrency=4)
        worker = handle.worker
        order: List[str] = []

        async with worq.Client(server.address) as client:

            @worker.handler("parent")
            async def parent(job: worq.Job) -> Dict[str, Any]:
                await client.submit("gather", queue="py-fan", depends_on={"children_of": job.jid})
                for n in (1, 2, 3):
                    await client.submit("square", args=[n], queue="py-fan", parent_jid=job.jid)
                children, finished = await client.collect_children(job.jid, 10)
                order.append("parent")
                return {"finished": finished, "sum": sum(child.result_json() for child in children)}

            @worker.handler("square")
            async def square(job: worq.Job) -> int:
                order.append("child")
                return int(job.args[0]) ** 2

            @worker.handler("gather")
            async def gather(job: worq.Job) -> None:
                order.append("gather")

            async with running(handle):
                done = await client.wait_result(await client.submit("parent", queue="py-fan"), 10)
                assert done.result_json() == {"finished": True, "sum": 14}
                while len(order) < 5:
                    await asyncio.sleep(0.02)
        assert order == ["child", "child", "child", "parent", "gather"]
def test_checkpoints_reach_the_retry_progress_is_shown_and_watched(server: ServerProcess) -> None:
    async def scenario() -> None:
        handle = make_worker(server.address, "q", concurrency=2)
        released = threading.Event()

        @handle.worker.handler("resume")
        async def resume(job: worq.Job, ctx: worq.JobContext) -> str:
            if not job.checkpoint:
                await ctx.checkpoint(b"row=7")
                with pytest.raises(worq.InvalidArgument):
                    await ctx.checkpoint(b"x" * (1024 * 1024 + 1))
                raise RuntimeError("crashed after row 7")
            return "resumed at " + job.checkpoint.decode()

        @handle.worker.handler("sync-progress")
        def sync_progress(job: worq.Job, ctx: worq.JobContext) -> str:  # sync: runs in a thread
            ctx.progress_sync(60, "sixty")
            ctx.checkpoint_sync(b"sync")
            released.wait(10)
            return "done"

        async with running(handle), worq.Client(server.address) as client:
            jid = await client.submit("resume", queue="q", retry={"max_attempts": 3, "initial_delay": 0.05})
            job = await client.wait_result(jid, 10)
            assert job.state is worq.JobState.COMPLETED
            assert job.attempt == 2
            assert job.result_text == "resumed at row=7"
            assert job.checkpoint == b"row=7"

            jid = await client.submit("sync-progress", queue="q")
            watched: List[worq.Job] = []
            async for seen_job in client.watch(jid):
                watched.append(seen_job)
                if seen_job.checkpoint == b"sync":
                    released.set()
            assert watched[-1].state is worq.JobState.COMPLETED
            assert watched[-1].result_text == "done"
            running_views = [j for j in watched if j.state is worq.JobState.RUNNING and j.progress is not None]
            assert running_views and running_views[0].progress is not None
            assert (running_views[0].progress.percent, running_views[0].progress.message) == (60, "sixty")
            assert watched[-1].checkpoint == b"sync"
            with pytest.raises(worq.NotFound):
                async for _ in client.watch("0b7e4c52-9f3a-4d6e-8a1b-2c3d4e5f6a7b"):
                    pass

    run(scenario())
