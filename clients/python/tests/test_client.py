"""Client calls against a real server: submit, read back, wait, typed errors."""

from __future__ import annotations

import datetime as dt
import socket

import pytest

import worq
from conftest import ServerProcess, run


def test_submit_and_read_back(server: ServerProcess) -> None:
    async def scenario() -> None:
        async with worq.Client(server.address) as client:
            jid = await client.submit(
                "mail.send",
                args=["a@example.com", 2],
                kwargs={"subject": "hi", "n": 3},
                payload=b"\x00\x01",
                queue="mail",
                priority="high",
                custom={"trace": "t1"},
                tags={"team": "growth"},
                delay=dt.timedelta(hours=1),
                retry=worq.RetryPolicy(max_attempts=7),
                reserve_for=30,
                backtrace=4,
            )
            job = await client.get_job(jid)
            assert job.jid == jid and job.type == "mail.send" and job.queue == "mail"
            assert job.state is worq.JobState.DELAYED
            assert job.args == ["a@example.com", 2]
            assert job.kwargs == {"subject": "hi", "n": 3}
            assert job.payload == b"\x00\x01" and job.custom == {"trace": "t1"} and job.tags == {"team": "growth"}
            assert job.priority is worq.Priority.HIGH and job.retry.max_attempts == 7
            assert job.reserve_for == dt.timedelta(seconds=30) and job.backtrace == 4

            jids = await client.submit_batch(
                [{"type": "a", "queue": "batch"}, worq.JobSpec("b", queue="batch", args=[1])]
            )
            assert len(jids) == 2
            assert [(await client.get_job(j)).type for j in jids] == ["a", "b"]

    run(scenario())


def test_typed_errors(server: ServerProcess) -> None:
    async def scenario() -> None:
        async with worq.Client(server.address) as client:
            with pytest.raises(worq.NotFound) as not_found:
                await client.get_job("00000000-0000-4000-8000-000000000000")
            assert not_found.value.code.name == "NOT_FOUND"

            with pytest.raises(worq.InvalidArgument) as invalid:
                await client.submit("t", queue="not a queue!")
            assert "queue" in invalid.value.message

            with pytest.raises(worq.InvalidArgument):
                await client.submit_batch([{"type": "ok"}, {"type": ""}])

            with pytest.raises(worq.ResourceExhausted):
                await client.submit("big", payload=b"x" * (2 * 1024 * 1024))

            # Nobody leases this queue, so the wait runs out.
            jid = await client.submit("never", queue="nobody")
            with pytest.raises(worq.DeadlineExceeded):
                await client.wait_result(jid, timeout=0.3)
            with pytest.raises(worq.DeadlineExceeded) as run_timeout:
                await client.run("never", queue="nobody", wait_timeout=0.3)
            assert run_timeout.value.jid  # Run's error names the job it submitted

        # Nothing listens on this port.
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            free_port = sock.getsockname()[1]
        async with worq.Client(f"127.0.0.1:{free_port}", timeout=2) as offline:
            with pytest.raises(worq.Unavailable):
                await offline.get_job("00000000-0000-4000-8000-000000000000")

    run(scenario())


def test_unique_and_debounce(server: ServerProcess) -> None:
    async def scenario() -> None:
        async with worq.Client(server.address) as client:
            unique = {"key": "report:1", "until": "finished"}
            first = await client.submit_detailed("report", queue="uq", unique=unique)
            assert not first.duplicate and not first.debounced and first.state is worq.JobState.SCHEDULED
            again = await client.submit_detailed("report", queue="uq", unique=unique)
            assert again.jid == first.jid and again.duplicate
            job = await client.get_job(first.jid)
            assert job.unique_key == "report:1" and job.unique_until is worq.UniqueUntil.FINISHED

            grouped = await client.submit("report", queue="gq", group="customer:42")
            assert (await client.get_job(grouped)).group == "customer:42"

            debounce = {"key": "doc:1", "delay": dt.timedelta(minutes=5)}
            waiting = await client.submit("index", queue="dq", args=[1], debounce=debounce)
            second = await client.submit_detailed("index", queue="dq", args=[2], debounce=debounce)
            assert second.jid == waiting and second.debounced and not second.duplicate
            assert second.state is worq.JobState.DELAYED
            job = await client.get_job(waiting)
            assert job.args == [2] and job.debounce_key == "doc:1"

            with pytest.raises(worq.InvalidArgument) as info:
                await client.submit("t", unique={"until": "started", "window": 5})
            assert "job.unique.window" in info.value.message

    run(scenario())


def test_batches(server: ServerProcess) -> None:
    async def scenario() -> None:
        async with worq.Client(server.address) as client:
            batch = await client.create_batch(
                description="py", on_complete={"type": "report.done", "queue": "py-batch-cb"}
            )
            assert batch.state is worq.BatchState.OPEN and not batch.done
            jids = [await client.submit("t", queue="py-batch", batch_id=batch.id) for _ in range(2)]
            assert (await client.get_job(jids[0])).batch_id == batch.id
            sealed = await client.seal_batch(batch.id)
            assert sealed.state is worq.BatchState.SEALED and sealed.total == 2 and sealed.pending == 2
            with pytest.raises(worq.DeadlineExceeded):
                await client.wait_batch(batch.id, 0.3)
            for jid in jids:
                await client.cancel(jid)
            done = await client.wait_batch(batch.id, 10)
            assert done.state is worq.BatchState.FINISHED_WITH_FAILURES and done.failed == 2
            assert done.on_success_jid == "" and done.on_complete_jid
            callback = await client.get_job(done.on_complete_jid)
            assert callback.type == "report.done" and callback.custom == {"batch_id": batch.id}
            with pytest.raises(worq.InvalidArgument) as info:
                await client.create_batch(description="x" * 1025)
            assert "batch.description" in info.value.message

    run(scenario())
