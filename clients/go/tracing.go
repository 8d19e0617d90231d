package worq

import (
	"context"
	"fmt"
	"regexp"
	"strconv"

	worqv1 "github.com/worq-dev/worq/gen/go/worq/v1"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// TraceContext is a W3C trace context a job carries (docs/tracing.md): the producer's span,
// which every attempt's execution span is a child of.
type TraceContext struct {
	Traceparent string // e.g. "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	Tracestate  string // may be empty
}

// WithTrace sets the trace context the job carries. Without it, Submit and SubmitBatch take
// the span in their context (trace.SpanContextFromContext), if any.
func WithTrace(traceparent, tracestate string) SubmitOption {
	return func(s *JobSpec) { s.Trace = &TraceContext{Traceparent: traceparent, Tracestate: tracestate} }
}

// WithoutTrace sends the job with no trace context, whatever span the submit's context holds.
func WithoutTrace() SubmitOption {
	return func(s *JobSpec) { s.Trace = &TraceContext{} }
}

// traceOf is the JobSpec trace of a spec: its own, else the span in ctx; nil for none.
func traceOf(ctx context.Context, s *TraceContext) *worqv1.TraceContext {
	if s != nil {
		if s.Traceparent == "" && s.Tracestate == "" {
			return nil
		}
		return &worqv1.TraceContext{Traceparent: s.Traceparent, Tracestate: s.Tracestate}
	}
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return nil
	}
	return &worqv1.TraceContext{
		Traceparent: fmt.Sprintf("00-%s-%s-%02x", sc.TraceID(), sc.SpanID(), byte(sc.TraceFlags())),
		Tracestate:  sc.TraceState().String(),
	}
}

var traceparentRE = regexp.MustCompile(`^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$`)

// remoteParent is ctx with the job's trace context as the remote parent span; ctx when the
// job carries none (or an unreadable one).
func remoteParent(ctx context.Context, job *Job) context.Context {
	m := traceparentRE.FindStringSubmatch(job.Traceparent)
	if m == nil {
		return ctx
	}
	traceID, err1 := trace.TraceIDFromHex(m[1])
	spanID, err2 := trace.SpanIDFromHex(m[2])
	flags, err3 := strconv.ParseUint(m[3], 16, 8)
	if err1 != nil || err2 != nil || err3 != nil {
		return ctx
	}
	cfg := trace.SpanContextConfig{TraceID: traceID, SpanID: spanID, TraceFlags: trace.TraceFlags(flags), Remote: true}
	if job.Tracestate != "" {
		if state, err := trace.ParseTraceState(job.Tracestate); err == nil {
			cfg.TraceState = state
		}
	}
	sc := trace.NewSpanContext(cfg)
	if !sc.IsValid() {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

// startJobSpan starts "worq.process <type>" (kind CONSUMER) for an attempt, a child of the
// producer's span the job carries (retries too); a no-op span unless the application set a
// TracerProvider (otel.SetTracerProvider).
func startJobSpan(ctx context.Context, job *Job, workerID string) (context.Context, trace.Span) {
	// The handler's context keeps its deadline and cancellation; only the span's parent changes:
	// the job's trace context, else none (a root span).
	parent := remoteParent(trace.ContextWithSpanContext(ctx, trace.SpanContext{}), job)
	return otel.Tracer("worq").Start(parent, "worq.process "+job.Type,
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			attribute.String("messaging.system", "worq"),
			attribute.String("messaging.operation.type", "process"),
			attribute.String("messaging.destination.name", job.Queue),
			attribute.String("messaging.message.id", job.JID),
			attribute.String("worq.jid", job.JID),
			attribute.String("worq.job.type", job.Type),
			attribute.String("worq.queue", job.Queue),
			attribute.Int("worq.attempt", job.Attempt),
			attribute.String("worq.worker_id", workerID),
		))
}

// endJobSpan ends an attempt's span with the handler's outcome.
func endJobSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	} else {
		span.SetStatus(codes.Ok, "")
	}
	span.End()
}
