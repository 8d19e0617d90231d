"""Pure-Python tests: conversions, results, failures, errors. No server needed."""

from __future__ import annotations

import asyncio
import datetime as dt

import grpc
import pytest

import worq
from worq import _convert, errors
from worq.types import JobSpec
from worq.v1 import job_pb2
from worq.worker import Worker, fail_request_of, result_bytes


def test_namespace_shares_worq_with_generated_stubs() -> None:
    import worq.v1.job_pb2

    assert worq.v1.job_pb2.Job is job_pb2.Job
    assert len(worq.__path__) >= 2


def test_values_round_trip_with_json_numbers() -> None:
    value = {"n": 21, "f": 1.5, "s": "x", "b": True, "none": None, "l": [1, "2", {"k": [3]}]}
    back = _convert.from_struct(_convert.to_struct(value, "kwargs"))
    assert back == value
    assert isinstance(back["n"], int)
    with pytest.raises(ValueError):
        _convert.to_list([2**60], "args")
    with pytest.raises(TypeError):
        _convert.to_list([object()], "args")


def test_job_spec_to_proto() -> None:
    at = dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc)
    spec = JobSpec.coerce(
        {
            "type": "t",
            "args": [1],
            "payload": "héllo",
            "priority": "high",
            "at": at,
            "retry": {"max_attempts": 5, "backoff": "linear", "initial_delay": dt.timedelta(milliseconds=250)},
            "reserve_for": 2.5,
            "tags": {"a": "b"},
        }
    ).to_proto()
    assert spec.priority == job_pb2.PRIORITY_HIGH
    assert spec.payload == "héllo".encode()
    assert spec.at.seconds == int(at.timestamp())
    assert spec.retry.max_attempts == 5 and spec.retry.backoff == job_pb2.BACKOFF_STRATEGY_LINEAR
    assert spec.retry.initial_delay.nanos == 250_000_000
    assert spec.reserve_for.seconds == 2 and spec.reserve_for.nanos == 500_000_000
    with pytest.raises(ValueError):
        JobSpec("t", at=at, delay=1).to_proto()
    with pytest.raises(TypeError):
        JobSpec.coerce({"type": "t", "bogus": 1})


def test_result_bytes() -> None:
    assert result_bytes(None) == b""
    assert result_bytes(b"\x00raw") == b"\x00raw"
    assert result_bytes("héllo") == "héllo".encode()
    assert result_bytes({"a": [1, 2]}) == b'{"a":[1,2]}'
    assert result_bytes(42) == b"42"


def _raise(exc: BaseException) -> BaseException:
    try:
        raise exc
    except BaseException as caught:  # noqa: BLE001
        return caught


def test_fail_request_of_ordinary_permanent_retry_later() -> None:
    ordinary = fail_request_of(_raise(ValueError("bad value")), "j", "l", 3, None)
    assert (ordinary.message, ordinary.errtype, ordinary.category) == ("bad value", "ValueError", job_pb2.FAILURE_CATEGORY_TEMPORARY)
    assert 1 <= len(ordinary.backtrace) <= 3 and "_raise" in ordinary.backtrace[0]
    assert not ordinary.HasField("retry_after")

    assert fail_request_of(_raise(ValueError("x")), "j", "l", 0, None).backtrace == []

    permanent = fail_request_of(_raise(worq.PermanentError("nope")), "j", "l", 0, None)
    assert permanent.category == job_pb2.FAILURE_CATEGORY_PERMANENT and permanent.errtype == "PermanentError"

    later = fail_request_of(_raise(worq.RetryLater(1.5)), "j", "l", 0, None)
    assert later.retry_after.seconds == 1 and later.retry_after.nanos == 500_000_000

    class Throttled(Exception):
        retry_after = dt.timedelta(seconds=7)

    custom = fail_request_of(_raise(Throttled("slow down")), "j", "l", 0, None)
    assert custom.retry_after.seconds == 7 and custom.errtype == "Throttled"

    shutdown = fail_request_of(_raise(asyncio.CancelledError()), "j", "l", 0, "shutdown")
    assert shutdown.category == job_pb2.FAILURE_CATEGORY_TEMPORARY
    assert shutdown.HasField("retry_after") and shutdown.retry_after.ToNanoseconds() == 0

    timeout = fail_request_of(_raise(asyncio.CancelledError()), "j", "l", 0, "deadline")
    assert timeout.category == job_pb2.FAILURE_CATEGORY_TIMEOUT and "deadline" in timeout.message

    huge = fail_request_of(_raise(RuntimeError("é" * 100_000)), "j", "l", 0, None)
    assert len(huge.message.encode()) <= 64 * 1024


def test_fail_request_carries_code_cause_and_retry_after() -> None:
    try:
        try:
            raise OSError("disk full")
        except OSError as err:
            raise worq.PermanentError("cannot store", code="E_DISK") from err
    except worq.PermanentError as caught:
        permanent = fail_request_of(caught, "j", "l", 0, None)
    assert (permanent.category, permanent.code, permanent.cause) == (job_pb2.FAILURE_CATEGORY_PERMANENT, "E_DISK", "disk full")

    temporary = fail_request_of(
        _raise(worq.TemporaryError("busy", retry_after=dt.timedelta(seconds=2), cause=TimeoutError("upstream 503"))), "j", "l", 0, None
    )
    assert (temporary.category, temporary.code, temporary.cause) == (job_pb2.FAILURE_CATEGORY_TEMPORARY, "", "upstream 503")
    assert temporary.retry_after.seconds == 2 and temporary.message == "busy"

    # A chain of causes reads outermost first; a plain TemporaryError has no retry_after.
    inner = ValueError("inner")
    middle = RuntimeError("middle")
    middle.__cause__ = inner
    chained = fail_request_of(_raise(worq.TemporaryError("t", cause=middle)), "j", "l", 0, None)
    assert chained.cause == "middle: inner" and not chained.HasField("retry_after")
    assert fail_request_of(_raise(ValueError("x")), "j", "l", 0, None).cause == ""

    # The older names keep working: RetryLater is a TemporaryError, PermanentError("m") has no code.
    assert isinstance(worq.RetryLater(1), worq.TemporaryError) and worq.RetryLater(1).retry_after == 1.0
    assert worq.PermanentError("m").code == ""


def test_fail_request_of_rate_limited() -> None:
    limited = fail_request_of(_raise(worq.RateLimited("API said 429", retry_after=30)), "j", "l", 0, None)
    assert (limited.category, limited.message, limited.errtype, limited.code) == (
        job_pb2.FAILURE_CATEGORY_RATE_LIMITED,
        "API said 429",
        "RateLimited",
        "",
    )
    assert limited.retry_after.seconds == 30
    # Unset: the server's 1 s.
    bare = fail_request_of(_raise(worq.RateLimited()), "j", "l", 0, None)
    assert bare.category == job_pb2.FAILURE_CATEGORY_RATE_LIMITED and not bare.HasField("retry_after")
    assert bare.message == "rate limited"
    assert worq.RateLimited(retry_after=dt.timedelta(milliseconds=250)).retry_after == 0.25
    # Raised while the worker shuts down, it keeps its own retry_after (not the shutdown's 0).
    at_shutdown = fail_request_of(_raise(worq.RateLimited(retry_after=5)), "j", "l", 0, "shutdown")
    assert at_shutdown.category == job_pb2.FAILURE_CATEGORY_RATE_LIMITED and at_shutdown.retry_after.seconds == 5
    try:
        worq.RateLimited(retry_after=-1)
    except ValueError as err:
        assert "retry_after" in str(err)
    else:
        raise AssertionError("a negative retry_after was taken")


def test_errors_map_status_codes() -> None:
    cases = {
        grpc.StatusCode.INVALID_ARGUMENT: errors.InvalidArgument,
        grpc.StatusCode.NOT_FOUND: errors.NotFound,
        grpc.StatusCode.FAILED_PRECONDITION: errors.LeaseLost,
        grpc.StatusCode.UNAVAILABLE: errors.Unavailable,
        grpc.StatusCode.DEADLINE_EXCEEDED: errors.DeadlineExceeded,
        grpc.StatusCode.RESOURCE_EXHAUSTED: errors.ResourceExhausted,
        grpc.StatusCode.UNIMPLEMENTED: errors.Unimplemented,
    }
    for code, cls in cases.items():
        err = errors.error_for_code(code, "why", (("worq-jid", "abc"),))
        assert type(err) is cls and isinstance(err, worq.WorqError)
        assert err.code is code and err.message == "why" and err.jid == "abc"
    assert type(errors.error_for_code(grpc.StatusCode.DATA_LOSS, "x")) is worq.WorqError


def test_worker_validates_its_options() -> None:
    with pytest.raises(ValueError):
        worq.Worker("x:1", queues=[], concurrency=1)
    with pytest.raises(ValueError):
        worq.Worker("x:1", queues=["q"], concurrency=0)
    worker = worq.Worker("x:1", queues="q")
    assert worker.queues == ["q"]
    assert worker.worker_id.count("-") >= 2

    @worker.handler("a")
    async def a(job: worq.Job) -> None: ...

    with pytest.raises(ValueError):
        worker.register("a", a)
    with pytest.raises(RuntimeError):
        asyncio.run(worq.Worker("x:1").run())  # no handlers


def test_stopping_a_task_cancels_it_again_when_a_cancellation_was_swallowed() -> None:
    # As asyncio.wait_for does before Python 3.12 when its result and the cancellation arrive
    # together (CPython gh-86296): the lease stream's read loop then ran on, and a graceful
    # stop waited for it forever.
    swallowed = 0

    async def stubborn() -> None:
        nonlocal swallowed
        while True:
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                if swallowed == 0:
                    swallowed += 1
                    continue
                raise

    async def main() -> "asyncio.Task[None]":
        task = asyncio.create_task(stubborn())
        await asyncio.sleep(0)
        await asyncio.wait_for(Worker._cancel_task(task), timeout=5)
        return task

    task = asyncio.run(main())
    assert task.cancelled()
    assert swallowed == 1
