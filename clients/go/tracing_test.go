package worq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// One in-memory recorder for the package's tests: the global TracerProvider is process-wide.
var (
	spanRecorderOnce sync.Once
	spanExporter     *tracetest.InMemoryExporter
)

func recordSpans() *tracetest.InMemoryExporter {
	spanRecorderOnce.Do(func() {
		spanExporter = tracetest.NewInMemoryExporter()
		otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSyncer(spanExporter)))
	})
	return spanExporter
}

func spansOf(exporter *tracetest.InMemoryExporter, name, jid string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range exporter.GetSpans() {
		if s.Name != name {
			continue
		}
		for _, a := range s.Attributes {
			if string(a.Key) == "worq.jid" && a.Value.AsString() == jid {
				out = append(out, s)
			}
		}
	}
	return out
}

// The producer's span travels with the job (JobSpec.trace) and each attempt's
// "worq.process <type>" span, a retry's too, is its child in one trace; a job the handler
// submits joins the trace under the attempt's span (docs/tracing.md).
func TestTraceContextProducerToWorker(t *testing.T) {
	exporter := recordSpans()
	srv := startServer(t)
	c := dial(t, srv)
	w := NewWorker(c, WorkerOptions{Queues: []string{"t-trace"}, WorkerID: "go-tracer", Logger: testLogger(t)})
	childJID := make(chan string, 1)
	var seen []string
	var mu sync.Mutex
	w.Handle("traced", func(ctx context.Context, job *Job) (any, error) {
		mu.Lock()
		seen = append(seen, job.Traceparent)
		mu.Unlock()
		if job.Attempt == 1 {
			return nil, errors.New("first attempt fails")
		}
		jid, err := c.Submit(ctx, "child", Queue("t-trace"))
		childJID <- jid
		return nil, err
	})
	w.Handle("child", func(ctx context.Context, job *Job) (any, error) { return nil, nil })
	runWorker(t, w)

	ctx, producer := otel.Tracer("test").Start(context.Background(), "produce")
	jid, err := c.Submit(ctx, "traced", Queue("t-trace"), Retry(fastRetry))
	producer.End()
	if err != nil {
		t.Fatal(err)
	}
	psc := producer.SpanContext()
	want := fmt.Sprintf("00-%s-%s-01", psc.TraceID(), psc.SpanID())
	if got, err := c.GetJob(context.Background(), jid); err != nil || got.Traceparent != want {
		t.Fatalf("GetJob traceparent %q (err %v), want %q", got.Traceparent, err, want)
	}
	if job := waitResult(t, c, jid, 20*time.Second); job.State != StateCompleted || job.Attempt != 2 {
		t.Fatalf("got %s attempt %d", job.State, job.Attempt)
	}
	var child string
	select {
	case child = <-childJID:
	case <-time.After(10 * time.Second):
		t.Fatal("no child job submitted")
	}
	waitResult(t, c, child, 20*time.Second)

	var spans []tracetest.SpanStub
	deadline := time.Now().Add(5 * time.Second)
	for len(spans) < 2 && time.Now().Before(deadline) {
		spans = spansOf(exporter, "worq.process traced", jid)
		time.Sleep(20 * time.Millisecond)
	}
	if len(spans) != 2 {
		t.Fatalf("%d worq.process spans of %s, want 2", len(spans), jid)
	}
	var okSpan tracetest.SpanStub
	for _, s := range spans {
		if s.SpanContext.TraceID() != psc.TraceID() || s.Parent.SpanID() != psc.SpanID() || !s.Parent.IsRemote() {
			t.Errorf("span %s: trace %s parent %s, want trace %s parent %s", s.Name, s.SpanContext.TraceID(), s.Parent.SpanID(), psc.TraceID(), psc.SpanID())
		}
		if s.SpanKind != trace.SpanKindConsumer {
			t.Errorf("kind %v", s.SpanKind)
		}
		switch s.Status.Code {
		case codes.Error:
			if s.Status.Description != "first attempt fails" || len(s.Events) == 0 || s.Events[0].Name != "exception" {
				t.Errorf("failed attempt's span: status %+v events %v", s.Status, s.Events)
			}
		case codes.Ok:
			okSpan = s
		}
	}
	if !okSpan.SpanContext.IsValid() {
		t.Fatal("no span ended OK")
	}
	children := spansOf(exporter, "worq.process child", child)
	if len(children) != 1 || children[0].SpanContext.TraceID() != psc.TraceID() || children[0].Parent.SpanID() != okSpan.SpanContext.SpanID() {
		t.Fatalf("child job's span %+v, want a child of %s", children, okSpan.SpanContext.SpanID())
	}
}

// No span in the context: no trace; WithoutTrace drops it; WithTrace sends it as given;
// a bad traceparent is refused naming the field.
func TestTraceContextOptions(t *testing.T) {
	recordSpans()
	srv := startServer(t)
	c := dial(t, srv)
	bg := context.Background()
	bare := submit(t, c, "t", Queue("t-trace-opt"))
	if job, _ := c.GetJob(bg, bare); job.Traceparent != "" {
		t.Errorf("bare job carries %q", job.Traceparent)
	}
	ctx, span := otel.Tracer("test").Start(bg, "produce")
	defer span.End()
	off, err := c.Submit(ctx, "t", Queue("t-trace-opt"), WithoutTrace())
	if err != nil {
		t.Fatal(err)
	}
	if job, _ := c.GetJob(bg, off); job.Traceparent != "" {
		t.Errorf("WithoutTrace job carries %q", job.Traceparent)
	}
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	given, err := c.Submit(bg, "t", Queue("t-trace-opt"), WithTrace(tp, "k=v"))
	if err != nil {
		t.Fatal(err)
	}
	if job, _ := c.GetJob(bg, given); job.Traceparent != tp || job.Tracestate != "k=v" {
		t.Errorf("WithTrace job carries %q %q", job.Traceparent, job.Tracestate)
	}
	_, err = c.Submit(bg, "t", Queue("t-trace-opt"), WithTrace("bogus", ""))
	if !IsInvalidArgument(err) || !strings.Contains(err.Error(), "job.trace.traceparent") {
		t.Fatalf("bad traceparent: %v", err)
	}
}
