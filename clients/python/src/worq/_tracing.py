"""OpenTelemetry, when the application has it (``opentelemetry-api``, an optional dependency).

Without it, or without an SDK the application configured, nothing here records anything:
submits carry no trace context and workers make no spans (docs/tracing.md)."""

from __future__ import annotations

import re
from typing import Any, Optional, Tuple

try:  # pragma: no cover - depends on the environment
    from opentelemetry import context as _otel_context
    from opentelemetry import trace as _otel_trace

    _HAVE_OTEL = True
except ImportError:  # pragma: no cover
    _HAVE_OTEL = False

_TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")


def active_trace() -> Optional[Tuple[str, str]]:
    """(traceparent, tracestate) of the active span (the producer's), or None when there is none."""
    if not _HAVE_OTEL:
        return None
    span_context = _otel_trace.get_current_span().get_span_context()
    if not span_context.is_valid:
        return None
    traceparent = f"00-{span_context.trace_id:032x}-{span_context.span_id:016x}-{int(span_context.trace_flags) & 0xFF:02x}"
    tracestate = span_context.trace_state.to_header() if span_context.trace_state else ""
    return traceparent, tracestate


class JobSpan:
    """A job attempt's execution span, active while the handler runs (jobs it submits join the trace)."""

    def __init__(self, span: Any) -> None:
        self._span = span
        self._token: Any = None

    def __enter__(self) -> "JobSpan":
        self._token = _otel_context.attach(_otel_trace.set_span_in_context(self._span))
        return self

    def __exit__(self, *exc: Any) -> None:
        _otel_context.detach(self._token)

    def end(self, error_type: Optional[str] = None, message: str = "") -> None:
        """Ends the span: OK, or ERROR with the failure's type and message (the handler's exception)."""
        from opentelemetry.trace import Status, StatusCode

        if error_type is None:
            self._span.set_status(Status(StatusCode.OK))
        else:
            self._span.add_event("exception", {"exception.type": error_type, "exception.message": message})
            self._span.set_status(Status(StatusCode.ERROR, message))
        self._span.end()


def start_job_span(job: Any, worker_id: str) -> Optional[JobSpan]:
    """Starts ``worq.process <type>`` (kind CONSUMER) for a leased job: a child of the producer's
    span the job carries (every attempt, retries too), a root span when it carries none. None
    without opentelemetry-api."""
    if not _HAVE_OTEL:
        return None
    from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, TraceFlags, TraceState

    parent = None
    raw = job.raw
    match = _TRACEPARENT.match(raw.trace.traceparent) if raw.HasField("trace") else None
    if match:
        state = TraceState.from_header([raw.trace.tracestate]) if raw.trace.tracestate else TraceState()
        remote = SpanContext(
            trace_id=int(match.group(1), 16),
            span_id=int(match.group(2), 16),
            is_remote=True,
            trace_flags=TraceFlags(int(match.group(3), 16)),
            trace_state=state,
        )
        if remote.is_valid:
            parent = _otel_trace.set_span_in_context(NonRecordingSpan(remote), _otel_context.Context())
    if parent is None:
        parent = _otel_context.Context()  # a root span, whatever is active in the worker
    span = _otel_trace.get_tracer("worq").start_span(
        f"worq.process {job.type}",
        context=parent,
        kind=SpanKind.CONSUMER,
        attributes={
            "messaging.system": "worq",
            "messaging.operation.type": "process",
            "messaging.destination.name": job.queue,
            "messaging.message.id": job.jid,
            "worq.jid": job.jid,
            "worq.job.type": job.type,
            "worq.queue": job.queue,
            "worq.attempt": job.attempt,
            "worq.worker_id": worker_id,
        },
    )
    return JobSpan(span)
