"""OpenTelemetry against a real server: the producer's span travels with the job (JobSpec trace)
and the worker's ``worq.process <type>`` span of every attempt is its child, in one trace
(docs/tracing.md). Spans are read from the SDK's in-memory exporter."""

from __future__ import annotations

import os
from typing import List

import pytest

import worq
from conftest import ServerProcess, make_worker, run, running

if os.environ.get("WORQ_REQUIRE_ALL") != "1":
    # Without WORQ_REQUIRE_ALL (CI sets it), a venv without the SDK skips; with it, a missing SDK fails.
    pytest.importorskip("opentelemetry.sdk.trace")
from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk import trace as sdk_trace  # noqa: E402
from opentelemetry.sdk.trace import export as sdk_export  # noqa: E402
from opentelemetry.sdk.trace.export import in_memory_span_exporter as in_memory  # noqa: E402

EXPORTER = in_memory.InMemorySpanExporter()
_provider = sdk_trace.TracerProvider()
_provider.add_span_processor(sdk_export.SimpleSpanProcessor(EXPORTER))
trace.set_tracer_provider(_provider)


def test_worker_spans_of_every_attempt_are_children_of_the_producer_span(server: ServerProcess) -> None:
    async def scenario() -> None:
        handle = make_worker(server.address, "py-trace", worker_id="py-tracer")
        child_jids: List[str] = []

        async with worq.Client(server.address) as client:

            @handle.worker.handler("traced")
            async def traced(job: worq.Job) -> None:
                assert job.traceparent == expected
                if job.attempt == 1:
                    raise ValueError("first attempt fails")
                child_jids.append(await client.submit("child", queue="py-trace"))

            @handle.worker.handler("child")
            async def child(job: worq.Job) -> None:
                return None

            tracer = trace.get_tracer("test")
            with tracer.start_as_current_span("produce") as producer:
                ctx = producer.get_span_context()
                expected = f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"
                jid = await client.submit("traced", queue="py-trace", retry={"max_attempts": 3, "initial_delay": 0.01, "backoff": "constant"})
            stored = await client.get_job(jid)
            assert stored.traceparent == expected
            async with running(handle):
                job = await client.wait_result(jid, 10)
                assert job.state is worq.JobState.COMPLETED and job.attempt == 2
                assert child_jids
                await client.wait_result(child_jids[0], 10)
                await handle.wait_for(lambda e: e.name == "done" and e.jid == child_jids[0])

        spans = EXPORTER.get_finished_spans()
        process = sorted((s for s in spans if s.name == "worq.process traced"), key=lambda s: s.attributes["worq.attempt"])
        assert len(process) == 2
        for span in process:
            assert span.context.trace_id == ctx.trace_id
            assert span.parent is not None and span.parent.span_id == ctx.span_id
            assert span.kind is trace.SpanKind.CONSUMER
            assert span.attributes["worq.jid"] == jid and span.attributes["worq.queue"] == "py-trace"
            assert span.attributes["worq.worker_id"] == "py-tracer"
        assert process[0].status.status_code is trace.StatusCode.ERROR
        assert process[0].status.description == "first attempt fails"
        assert [e.name for e in process[0].events] == ["exception"]
        assert process[1].status.status_code is trace.StatusCode.OK
        child_span = next(s for s in spans if s.name == "worq.process child")
        assert child_span.context.trace_id == ctx.trace_id
        assert child_span.parent is not None and child_span.parent.span_id == process[1].context.span_id

    run(scenario())


def test_no_active_span_no_trace_false_none_explicit_as_given(server: ServerProcess) -> None:
    async def scenario() -> None:
        async with worq.Client(server.address) as client:
            bare = await client.submit("t", queue="py-trace-none")
            assert (await client.get_job(bare)).traceparent == ""
            with trace.get_tracer("test").start_as_current_span("produce"):
                off = await client.submit("t", queue="py-trace-none", trace=False)
            assert (await client.get_job(off)).traceparent == ""
            given = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "tracestate": "k=v"}
            explicit = await client.submit("t", queue="py-trace-none", trace=given)
            job = await client.get_job(explicit)
            assert (job.traceparent, job.tracestate) == (given["traceparent"], given["tracestate"])
            with pytest.raises(worq.errors.InvalidArgument, match=r"job\.trace\.traceparent"):
                await client.submit("t", queue="py-trace-none", trace={"traceparent": "bogus"})

    run(scenario())
