package worq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	worqv1 "github.com/worq-dev/worq/gen/go/worq/v1"
)

// fastRetry retries quickly, so that tests of retries stay short.
var fastRetry = RetryPolicy{MaxAttempts: 5, InitialDelay: 100 * time.Millisecond, Backoff: BackoffConstant}

type testError struct{ reason string }

func (e *testError) Error() string { return "test error: " + e.reason }

func TestSubmitAndAckWithResult(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	c := dial(t, srv)
	var seen atomic.Pointer[Job]
	w := NewWorker(c, WorkerOptions{Queues: []string{"t-ack"}, Concurrency: 4, Logger: testLogger(t)})
	w.Handle("greet", func(ctx context.Context, job *Job) (any, error) {
		seen.Store(job)
		return "hello, " + job.Args[0].(string), nil
	})
	w.Handle("json", func(ctx context.Context, job *Job) (any, error) {
		return map[string]any{"sum": job.Args[0].(float64) + job.Args[1].(float64)}, nil
	})
	w.Handle("bytes", func(ctx context.Context, job *Job) (any, error) { return []byte{0, 1, 2}, nil })
	w.Handle("nothing", func(ctx context.Context, job *Job) (any, error) { return nil, nil })
	stop := runWorker(t, w)

	type point struct{ X, Y int }
	jid := submit(t, c, "greet", Args("ada", point{1, 2}), Queue("t-ack"), Kwargs(map[string]any{"k": []string{"a"}}),
		Payload([]byte("raw")), Custom(map[string]any{"trace": "x"}), Tags(map[string]string{"team": "go"}),
		Priority(PriorityHigh), ReserveFor(10*time.Second), ExecutionTimeout(time.Minute), Backtrace(5))
	job := waitResult(t, c, jid, 10*time.Second)
	if job.State != StateCompleted || string(job.Result) != "hello, ada" || job.Attempt != 1 {
		t.Fatalf("got %s attempt %d result %q, want COMPLETED attempt 1 \"hello, ada\"", job.State, job.Attempt, job.Result)
	}
	got := seen.Load()
	switch {
	case got.JID != jid || got.Type != "greet" || got.Queue != "t-ack" || got.Attempt != 1:
		t.Errorf("handler saw %+v", got)
	case fmt.Sprint(got.Args) != "[ada map[X:1 Y:2]]":
		t.Errorf("args %v", got.Args)
	case fmt.Sprint(got.Kwargs) != "map[k:[a]]" || fmt.Sprint(got.Custom) != "map[trace:x]":
		t.Errorf("kwargs %v custom %v", got.Kwargs, got.Custom)
	case string(got.Payload) != "raw" || got.Tags["team"] != "go" || got.Priority != PriorityHigh:
		t.Errorf("payload %q tags %v priority %s", got.Payload, got.Tags, got.Priority)
	case got.ReserveFor != 10*time.Second || got.Backtrace != 5 || got.LeaseID == "" || got.ExecutionDeadline.IsZero():
		t.Errorf("reserve_for %s backtrace %d lease %q deadline %s", got.ReserveFor, got.Backtrace, got.LeaseID, got.ExecutionDeadline)
	}

	jids, err := c.SubmitBatch(context.Background(), []JobSpec{
		NewJobSpec("json", Args(20, 22), Queue("t-ack")),
		NewJobSpec("bytes", Queue("t-ack")),
		NewJobSpec("nothing", Queue("t-ack")),
	})
	if err != nil || len(jids) != 3 {
		t.Fatalf("SubmitBatch: %v %v", jids, err)
	}
	var sum struct{ Sum float64 }
	if err := waitResult(t, c, jids[0], 10*time.Second).DecodeResult(&sum); err != nil || sum.Sum != 42 {
		t.Errorf("json result %+v %v", sum, err)
	}
	if r := waitResult(t, c, jids[1], 10*time.Second).Result; string(r) != "\x00\x01\x02" {
		t.Errorf("bytes result %q", r)
	}
	if j := waitResult(t, c, jids[2], 10*time.Second); j.State != StateCompleted || len(j.Result) != 0 {
		t.Errorf("nil result: %s %q", j.State, j.Result)
	}

	ran, err := c.Run(context.Background(), "greet", 10*time.Second, Args("grace"), Queue("t-ack"))
	if err != nil || string(ran.Result) != "hello, grace" {
		t.Errorf("Run: %v %v", ran, err)
	}
	fetched, err := c.GetJob(context.Background(), jid)
	if err != nil || fetched.State != StateCompleted || string(fetched.Result) != "hello, ada" {
		t.Errorf("GetJob: %+v %v", fetched, err)
	}
	if err := stop(); err != nil {
		t.Fatalf("Run returned %v", err)
	}
}

func TestFailRetryComplete(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	c := dial(t, srv)
	w := NewWorker(c, WorkerOptions{Queues: []string{"t-retry"}, Logger: testLogger(t)})
	w.Handle("flaky", func(ctx context.Context, job *Job) (any, error) {
		if job.Attempt <= 2 {
			return nil, fmt.Errorf("planned failure %d", job.Attempt)
		}
		return "third time lucky", nil
	})
	runWorker(t, w)
	jid := submit(t, c, "flaky", Queue("t-retry"), Retry(fastRetry), Backtrace(3))
	job := waitResult(t, c, jid, 20*time.Second)
	if job.State != StateCompleted || job.Attempt != 3 || string(job.Result) != "third time lucky" {
		t.Fatalf("got %s attempt %d result %q", job.State, job.Attempt, job.Result)
	}
	f := job.Failure
	switch {
	case f == nil:
		t.Fatal("no failure recorded")
	case f.Message != "planned failure 2" || f.ErrType != "*fmt.wrapError" && f.ErrType != "*errors.errorString":
		t.Errorf("failure %q %q", f.Message, f.ErrType)
	case f.RetryCount != 2 || f.Category != CategoryTemporary:
		t.Errorf("retry count %d category %s", f.RetryCount, f.Category)
	case len(f.Backtrace) == 0 || len(f.Backtrace) > 3:
		t.Errorf("backtrace %q, want 1-3 frames", f.Backtrace)
	}
}

func TestPermanentAndPanic(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	c := dial(t, srv)
	w := NewWorker(c, WorkerOptions{Queues: []string{"t-perm"}, Logger: testLogger(t)})
	var attempts atomic.Int32
	w.Handle("permanent", func(ctx context.Context, job *Job) (any, error) {
		attempts.Add(1)
		return nil, Permanent(&testError{"bad input"})
	})
	w.Handle("panics", func(ctx context.Context, job *Job) (any, error) {
		var m map[string]int
		m["boom"] = 1 // panics: assignment to entry in nil map
		return nil, nil
	})
	runWorker(t, w)

	job := waitResult(t, c, submit(t, c, "permanent", Queue("t-perm"), Retry(fastRetry), Backtrace(50)), 10*time.Second)
	if job.State != StateFailed || job.Attempt != 1 || attempts.Load() != 1 {
		t.Fatalf("permanent: %s attempt %d (handler ran %d times)", job.State, job.Attempt, attempts.Load())
	}
	if f := job.Failure; f.Category != CategoryPermanent || f.ErrType != "*worq.testError" || f.Message != "test error: bad input" ||
		!strings.Contains(strings.Join(f.Backtrace, "\n"), "TestPermanentAndPanic") {
		t.Errorf("permanent failure %+v", f)
	}

	job = waitResult(t, c, submit(t, c, "panics", Queue("t-perm"), Retry(RetryPolicy{MaxAttempts: 1}), Backtrace(50)), 10*time.Second)
	if job.State != StateDeadLetter {
		t.Fatalf("panic: %s, want DEAD_LETTER", job.State)
	}
	if f := job.Failure; f.Category != CategoryTemporary || f.ErrType != "runtime.plainError" && f.ErrType != "panic" ||
		!strings.Contains(f.Message, "assignment to entry in nil map") ||
		len(f.Backtrace) == 0 || !strings.Contains(f.Backtrace[0], "TestPermanentAndPanic") {
		t.Errorf("panic failure %+v", f)
	}

	job = waitResult(t, c, submit(t, c, "no.such.handler", Queue("t-perm"), Retry(RetryPolicy{MaxAttempts: 1})), 10*time.Second)
	if job.State != StateDeadLetter || !strings.Contains(job.Failure.Message, "no handler") {
		t.Errorf("unknown type: %s %+v", job.State, job.Failure)
	}
}

func TestRetryAfterOverridesBackoff(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	c := dial(t, srv)
	w := NewWorker(c, WorkerOptions{Queues: []string{"t-after"}, Logger: testLogger(t)})
	w.Handle("later", func(ctx context.Context, job *Job) (any, error) {
		if job.Attempt == 1 {
			return nil, RetryAfter(errors.New("rate limited"), 300*time.Millisecond)
		}
		return "retried", nil
	})
	runWorker(t, w)
	start := time.Now()
	// Without retry_after the retry would wait an hour.
	jid := submit(t, c, "later", Queue("t-after"), Retry(RetryPolicy{InitialDelay: time.Hour}))
	job := waitResult(t, c, jid, 10*time.Second)
	if job.State != StateCompleted || job.Attempt != 2 || string(job.Result) != "retried" {
		t.Fatalf("got %s attempt %d %q", job.State, job.Attempt, job.Result)
	}
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Errorf("retried after %s, before retry_after", took)
	}
}

func TestAutomaticRenewal(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	c := dial(t, srv)
	w := NewWorker(c, WorkerOptions{Queues: []string{"t-renew"}, Logger: testLogger(t)})
	var runs atomic.Int32
	w.Handle("slow", func(ctx context.Context, job *Job) (any, error) {
		runs.Add(1)
		select {
		case <-time.After(3 * time.Second):
			return "slept", nil
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	})
	runWorker(t, w)
	jid := submit(t, c, "slow", Queue("t-renew"), ReserveFor(time.Second))
	job := waitResult(t, c, jid, 15*time.Second)
	if job.State != StateCompleted || job.Attempt != 1 || runs.Load() != 1 {
		t.Fatalf("got %s attempt %d, handler ran %d times; want COMPLETED on attempt 1", job.State, job.Attempt, runs.Load())
	}
}

func TestManualRenew(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	c := dial(t, srv)
	if err := Renew(context.Background()); err == nil {
		t.Error("Renew outside a handler succeeded")
	}
	w := NewWorker(c, WorkerOptions{Queues: []string{"t-manual"}, Logger: testLogger(t)})
	w.Handle("renews", func(ctx context.Context, job *Job) (any, error) {
		return nil, Renew(ctx)
	})
	runWorker(t, w)
	if job := waitResult(t, c, submit(t, c, "renews", Queue("t-manual")), 10*time.Second); job.State != StateCompleted {
		t.Fatalf("got %s %+v", job.State, job.Failure)
	}
}

func TestExecutionDeadlineCancelsHandler(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	c := dial(t, srv)
	w := NewWorker(c, WorkerOptions{Queues: []string{"t-deadline"}, Logger: testLogger(t)})
	causes := make(chan error, 1)
	w.Handle("stuck", func(ctx context.Context, job *Job) (any, error) {
		start := time.Now()
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
		}
		causes <- fmt.Errorf("after %s: %w", time.Since(start).Round(100*time.Millisecond), context.Cause(ctx))
		return nil, context.Cause(ctx)
	})
	runWorker(t, w)
	jid := submit(t, c, "stuck", Queue("t-deadline"), ExecutionTimeout(time.Second), Retry(RetryPolicy{MaxAttempts: 1}))
	select {
	case cause := <-causes:
		if !errors.Is(cause, ErrExecutionDeadline) {
			t.Fatalf("handler ctx ended %v, want ErrExecutionDeadline", cause)
		}
	case <-time.After(8 * time.Second):
		t.Fatal("the handler's context was not cancelled at the execution deadline")
	}
	if job := waitResult(t, c, jid, 10*time.Second); job.State == StateCompleted {
		t.Fatalf("job completed; want it failed")
	}
}

func TestConcurrencyLimit(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	c := dial(t, srv)
	w := NewWorker(c, WorkerOptions{Queues: []string{"t-conc"}, Concurrency: 2, Logger: testLogger(t)})
	var running, peak atomic.Int32
	w.Handle("busy", func(ctx context.Context, job *Job) (any, error) {
		n := running.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(200 * time.Millisecond)
		running.Add(-1)
		return nil, nil
	})
	runWorker(t, w)
	specs := make([]JobSpec, 6)
	for i := range specs {
		specs[i] = NewJobSpec("busy", Queue("t-conc"))
	}
	jids, err := c.SubmitBatch(context.Background(), specs)
	if err != nil {
		t.Fatal(err)
	}
	for _, jid := range jids {
		if job := waitResult(t, c, jid, 10*time.Second); job.State != StateCompleted {
			t.Fatalf("%s: %s", jid, job.State)
		}
	}
	if p := peak.Load(); p != 2 {
		t.Errorf("at most %d handlers ran at once, want 2", p)
	}
}

func TestGracefulShutdownLetsJobsFinish(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	c := dial(t, srv)
	started := make(chan struct{}, 1)
	var outcomes sync.Map
	w := NewWorker(c, WorkerOptions{
		Queues: []string{"t-drain"}, ShutdownTimeout: 10 * time.Second, Logger: testLogger(t),
		Hooks: Hooks{OnDone: func(job *Job, o Outcome, _ error) { outcomes.Store(job.JID, o) }},
	})
	w.Handle("work", func(ctx context.Context, job *Job) (any, error) {
		started <- struct{}{}
		time.Sleep(1500 * time.Millisecond) // longer than the orphan grace (1 s)
		return "finished", ctx.Err()
	})
	stop := runWorker(t, w)
	jid := submit(t, c, "work", Queue("t-drain"))
	<-started
	begin := time.Now()
	if err := stop(); err != nil {
		t.Fatalf("Run returned %v", err)
	}
	if took := time.Since(begin); took < time.Second {
		t.Errorf("Run returned after %s, before the job finished", took)
	}
	if o, _ := outcomes.Load(jid); o != OutcomeAck {
		t.Errorf("outcome %v, want ack", o)
	}
	job, err := c.GetJob(context.Background(), jid)
	if err != nil || job.State != StateCompleted || job.Attempt != 1 {
		t.Fatalf("after shutdown: %+v %v", job, err)
	}
}

func TestGracefulShutdownFailsBackAfterTimeout(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	c := dial(t, srv)
	started := make(chan struct{}, 1)
	causes := make(chan error, 1)
	w := NewWorker(c, WorkerOptions{Queues: []string{"t-timeout"}, ShutdownTimeout: 300 * time.Millisecond, Logger: testLogger(t)})
	w.Handle("forever", func(ctx context.Context, job *Job) (any, error) {
		started <- struct{}{}
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return nil, ctx.Err()
	})
	stop := runWorker(t, w)
	// Retried only an hour later, unless the fail-back's retry_after = 0 overrides that.
	jid := submit(t, c, "forever", Queue("t-timeout"), Retry(RetryPolicy{InitialDelay: time.Hour}))
	<-started
	if err := stop(); err != nil {
		t.Fatalf("Run returned %v", err)
	}
	if cause := <-causes; !errors.Is(cause, ErrShutdown) {
		t.Errorf("handler ctx ended with %v, want ErrShutdown", cause)
	}
	job, err := c.GetJob(context.Background(), jid)
	if err != nil || job.Failure == nil || job.Failure.Category != CategoryTemporary || job.Failure.Message != ErrShutdown.Error() {
		t.Fatalf("after shutdown: %+v %v", job, err)
	}

	w2 := NewWorker(c, WorkerOptions{Queues: []string{"t-timeout"}, Logger: testLogger(t)})
	w2.Handle("forever", func(ctx context.Context, job *Job) (any, error) { return "second try", nil })
	runWorker(t, w2)
	if job := waitResult(t, c, jid, 10*time.Second); job.State != StateCompleted || job.Attempt != 2 {
		t.Fatalf("retry: %s attempt %d", job.State, job.Attempt)
	}
}

func TestReconnectAfterServerRestart(t *testing.T) {
	t.Parallel()
	// An orphan grace longer than the worker's reconnect backoff (which grows while the server
	// is down): the lease held across the restart must still be live when the Ack gets through.
	srv := startServer(t, "--orphan-grace", "10s")
	c := dial(t, srv)
	started := make(chan struct{}, 1)
	var reconnects atomic.Int32
	var outcomes sync.Map
	w := NewWorker(c, WorkerOptions{
		Queues: []string{"t-reconnect"}, Logger: testLogger(t),
		Hooks: Hooks{
			OnReconnecting: func(time.Duration, error) { reconnects.Add(1) },
			OnDone:         func(job *Job, o Outcome, _ error) { outcomes.Store(job.JID, o) },
		},
	})
	w.Handle("slow", func(ctx context.Context, job *Job) (any, error) {
		started <- struct{}{}
		select {
		case <-time.After(3 * time.Second):
			return "survived", nil
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	})
	w.Handle("quick", func(ctx context.Context, job *Job) (any, error) { return "quick", nil })
	runWorker(t, w)

	slow := submit(t, c, "slow", Queue("t-reconnect"), ReserveFor(time.Minute))
	<-started
	srv.restart()
	// The client's connection may still be in its reconnect backoff: retry UNAVAILABLE.
	var quick string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var err error
		if quick, err = c.Submit(context.Background(), "quick", Queue("t-reconnect")); err == nil {
			break
		} else if !IsUnavailable(err) || time.Now().After(deadline) {
			t.Fatalf("Submit after the restart: %v", err)
		}
	}
	if job := waitResult(t, c, quick, 15*time.Second); job.State != StateCompleted {
		t.Fatalf("job submitted after the restart: %s", job.State)
	}
	job := waitResult(t, c, slow, 15*time.Second)
	if job.State != StateCompleted || job.Attempt != 1 || string(job.Result) != "survived" {
		t.Fatalf("job running across the restart: %s attempt %d %q %+v", job.State, job.Attempt, job.Result, job.Failure)
	}
	// OnDone runs once the worker has read the Ack's reply, which can come after the server
	// already shows the job COMPLETED to waitResult.
	deadline := time.Now().Add(5 * time.Second)
	o, _ := outcomes.Load(slow)
	for ; o != OutcomeAck && time.Now().Before(deadline); o, _ = outcomes.Load(slow) {
		time.Sleep(20 * time.Millisecond)
	}
	if o != OutcomeAck {
		t.Errorf("outcome %v, want ack", o)
	}
	if reconnects.Load() == 0 {
		t.Error("OnReconnecting was never called")
	}
}

func TestQuietTakesNoMoreWork(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	c := dial(t, srv)
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	w := NewWorker(c, WorkerOptions{Queues: []string{"t-quiet"}, Logger: testLogger(t)})
	w.Handle("held", func(ctx context.Context, job *Job) (any, error) {
		started <- struct{}{}
		<-release
		return "done", nil
	})
	stop := runWorker(t, w)
	held := submit(t, c, "held", Queue("t-quiet"))
	<-started
	w.Quiet()
	close(release)
	if job := waitResult(t, c, held, 10*time.Second); job.State != StateCompleted {
		t.Fatalf("held job: %s", job.State)
	}
	later := submit(t, c, "held", Queue("t-quiet"))
	time.Sleep(500 * time.Millisecond)
	if job, err := c.GetJob(context.Background(), later); err != nil || job.State != StateScheduled {
		t.Fatalf("job submitted after Quiet: %+v %v, want SCHEDULED", job, err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

func TestTypedErrors(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	c := dial(t, srv)
	ctx := context.Background()

	if _, err := c.GetJob(ctx, "6f1c1e2a-8d4b-4c3e-9a7f-0b1c2d3e4f50"); !IsNotFound(err) {
		t.Errorf("GetJob of an unknown jid: %v, want NotFound", err)
	}
	if _, err := c.GetJob(ctx, "not-a-uuid"); !IsInvalidArgument(err) {
		t.Errorf("GetJob of a malformed jid: %v, want InvalidArgument", err)
	}
	_, err := c.Submit(ctx, "x", Queue("bad queue!"))
	var e *Error
	if !errors.As(err, &e) || !IsInvalidArgument(err) || !strings.HasPrefix(e.Message, "job.queue") {
		t.Errorf("Submit to a bad queue: %#v", err)
	}
	if _, err := c.Submit(ctx, "x", Args(make(chan int))); !IsInvalidArgument(err) {
		t.Errorf("Submit with unencodable args: %v", err)
	}

	// A report quoting a lease that is not the job's live lease.
	jid := submit(t, c, "x", Queue("t-errors"))
	_, err = c.node.worker.Ack(ctx, &worqv1.AckRequest{Jid: jid, LeaseId: "0d9e8f7a-6b5c-4d3e-8f1a-2b3c4d5e6f70"})
	if err = wrapErr(ctx, err); !IsLeaseLost(err) {
		t.Errorf("Ack with a stale lease: %v, want FailedPrecondition", err)
	}

	if _, err := c.WaitResult(ctx, jid, 200*time.Millisecond); !IsDeadlineExceeded(err) {
		t.Errorf("WaitResult of a job nobody runs: %v, want DeadlineExceeded", err)
	}
	_, err = c.Run(ctx, "nobody.runs.this", 200*time.Millisecond, Queue("t-errors"))
	if !IsDeadlineExceeded(err) || !errors.As(err, &e) || e.JID == "" {
		t.Errorf("Run of a job nobody runs: %#v, want DeadlineExceeded with the jid", err)
	} else if job, err := c.GetJob(ctx, e.JID); err != nil || job.Type != "nobody.runs.this" {
		t.Errorf("the job Run left behind: %v %v", job, err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.GetJob(cancelled, jid); !errors.Is(err, context.Canceled) || Code(err).String() != "Canceled" {
		t.Errorf("call with a cancelled context: %v", err)
	}

	w := NewWorker(c, WorkerOptions{Queues: []string{"bad queue!"}, Logger: testLogger(t)})
	runCtx, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	if err := w.Run(runCtx); !IsInvalidArgument(err) {
		t.Errorf("Worker.Run on a bad queue: %v, want InvalidArgument", err)
	}

	srv.stop()
	down, cancelDown := context.WithTimeout(ctx, 3*time.Second)
	defer cancelDown()
	if _, err := c.Submit(down, "x"); !IsUnavailable(err) {
		t.Errorf("Submit to a stopped server: %v, want Unavailable", err)
	}
}

func TestCancelRevokesRunningJob(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	c := dial(t, srv)
	started := make(chan struct{}, 1)
	causes := make(chan error, 1)
	var outcomes sync.Map
	w := NewWorker(c, WorkerOptions{Queues: []string{"t-cancel"}, Logger: testLogger(t),
		Hooks: Hooks{OnDone: func(job *Job, o Outcome, _ error) { outcomes.Store(job.JID, o) }}})
	w.Handle("long", func(ctx context.Context, job *Job) (any, error) {
		started <- struct{}{}
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return nil, context.Cause(ctx)
	})
	runWorker(t, w)
	jid := submit(t, c, "long", Queue("t-cancel"))
	<-started
	job, err := c.Cancel(context.Background(), jid)
	if err != nil || job.State != StateCancelled {
		t.Fatalf("Cancel: %+v %v", job, err)
	}
	select {
	case cause := <-causes:
		var re *RevokedError
		if !errors.Is(cause, ErrRevoked) || !errors.As(cause, &re) || re.Reason == "" {
			t.Errorf("handler ctx ended with %v, want a *RevokedError", cause)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the handler was not told the job was cancelled")
	}
	if _, err := c.Cancel(context.Background(), jid); !IsLeaseLost(err) {
		t.Errorf("second Cancel: %v, want FailedPrecondition", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for o, _ := outcomes.Load(jid); o != OutcomeLeaseLost; o, _ = outcomes.Load(jid) {
		if time.Now().After(deadline) {
			t.Fatalf("outcome %v, want lease_lost", o)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := c.DeleteJob(context.Background(), jid); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetJob(context.Background(), jid); !IsNotFound(err) {
		t.Errorf("GetJob after DeleteJob: %v", err)
	}
}

func TestDependenciesIdempotencyAndTTL(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	c := dial(t, srv)
	var mu sync.Mutex
	var order []string
	w := NewWorker(c, WorkerOptions{Queues: []string{"t-deps"}, Logger: testLogger(t)})
	w.Handle("step", func(ctx context.Context, job *Job) (any, error) {
		mu.Lock()
		order = append(order, job.Args[0].(string))
		mu.Unlock()
		return nil, nil
	})
	runWorker(t, w)
	ctx := context.Background()

	jids, err := c.SubmitBatch(ctx, []JobSpec{
		NewJobSpec("step", Queue("t-deps"), Args("a")),
		NewJobSpec("step", Queue("t-deps"), Args("b")),
		NewJobSpec("step", Queue("t-deps"), Args("c")),
	}, Shape(ShapeChain))
	if err != nil {
		t.Fatal(err)
	}
	last := waitResult(t, c, jids[2], 10*time.Second)
	if last.State != StateCompleted || len(last.DependsOn) != 1 || last.DependsOn[0] != jids[1] {
		t.Fatalf("last of the chain: %s, depends on %v", last.State, last.DependsOn)
	}
	after := submit(t, c, "step", Queue("t-deps"), Args("d"), DependsOn(jids[2]), TTL(time.Hour), IdempotencyKey("k-1"))
	if job := waitResult(t, c, after, 10*time.Second); job.State != StateCompleted || job.IdempotencyKey != "k-1" ||
		job.ExpiresAt.Before(time.Now().Add(50*time.Minute)) {
		t.Fatalf("dependent job: %s key %q expires %s", job.State, job.IdempotencyKey, job.ExpiresAt)
	}
	if again := submit(t, c, "step", Queue("t-deps"), Args("e"), IdempotencyKey("k-1")); again != after {
		t.Errorf("repeat submit with the same idempotency key made %s, want %s", again, after)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(order, "") != "abcd" {
		t.Errorf("ran in order %v", order)
	}
}

func TestRandomQueueOrderTakesFromEveryQueue(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	c := dial(t, srv)
	firstQueues := func(prefix string, random bool) []string {
		var mu sync.Mutex
		var seen []string
		queues := []string{prefix + "-a", prefix + "-b"}
		w := NewWorker(c, WorkerOptions{Queues: queues, Concurrency: 1, RandomQueueOrder: random, Logger: testLogger(t)})
		w.Handle("pick", func(ctx context.Context, job *Job) (any, error) {
			mu.Lock()
			seen = append(seen, job.Queue)
			mu.Unlock()
			return nil, nil
		})
		var specs []JobSpec
		for _, q := range queues {
			for i := 0; i < 30; i++ {
				specs = append(specs, NewJobSpec("pick", Queue(q)))
			}
		}
		if _, err := c.SubmitBatch(context.Background(), specs); err != nil {
			t.Fatal(err)
		}
		stop := runWorker(t, w)
		defer stop()
		deadline := time.Now().Add(10 * time.Second)
		for {
			mu.Lock()
			n := len(seen)
			mu.Unlock()
			if n >= 20 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("only %d jobs handled", n)
			}
			time.Sleep(20 * time.Millisecond)
		}
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen[:20]...)
	}
	for _, q := range firstQueues("order-listed", false) {
		if q != "order-listed-a" {
			t.Fatalf("listed order took from %s before order-listed-a was empty", q)
		}
	}
	// Twenty fair coins all landing on one queue: about one run in 500,000.
	counts := map[string]int{}
	for _, q := range firstQueues("order-random", true) {
		counts[q]++
	}
	if counts["order-random-a"] == 0 || counts["order-random-b"] == 0 {
		t.Fatalf("random order took only from one queue: %v", counts)
	}
}

func TestFanOutCollectChildrenAndJoin(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	c := dial(t, srv)
	w := NewWorker(c, WorkerOptions{Queues: []string{"t-fan"}, Concurrency: 4, Logger: testLogger(t)})
	var mu sync.Mutex
	var order []string
	record := func(what string) {
		mu.Lock()
		order = append(order, what)
		mu.Unlock()
	}
	w.Handle("parent", func(ctx context.Context, job *Job) (any, error) {
		if _, err := c.Submit(ctx, "gather", Queue("t-fan"), JoinChildrenOf(job.JID)); err != nil {
			return nil, err
		}
		for n := 1; n <= 3; n++ {
			if _, err := c.Submit(ctx, "square", Queue("t-fan"), Args(n), ParentJID(job.JID)); err != nil {
				return nil, err
			}
		}
		children, finished, err := c.CollectChildren(ctx, job.JID, 10*time.Second)
		if err != nil {
			return nil, err
		}
		sum := 0
		for _, child := range children {
			var v int
			if err := child.DecodeResult(&v); err != nil {
				return nil, err
			}
			sum += v
		}
		record("parent")
		return map[string]any{"finished": finished, "sum": sum}, nil
	})
	w.Handle("square", func(ctx context.Context, job *Job) (any, error) {
		record("child")
		n := job.Args[0].(float64)
		return n * n, nil
	})
	w.Handle("gather", func(ctx context.Context, job *Job) (any, error) {
		record("gather")
		return nil, nil
	})
	runWorker(t, w)
	jid, err := c.Submit(context.Background(), "parent", Queue("t-fan"))
	if err != nil {
		t.Fatal(err)
	}
	job := waitResult(t, c, jid, 10*time.Second)
	var got struct {
		Finished bool
		Sum      int
	}
	if err := job.DecodeResult(&got); err != nil || !got.Finished || got.Sum != 14 {
		t.Fatalf("parent result %+v (%v), want finished with sum 14", got, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(order)
		mu.Unlock()
		if n == 5 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(order, ",") != "child,child,child,parent,gather" {
		t.Fatalf("ran in order %v, want the children, then the parent, then the join", order)
	}
}

func TestCheckpointProgressAndWatchJob(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	c := dial(t, srv)
	release := make(chan struct{})
	w := NewWorker(c, WorkerOptions{Queues: []string{"t-checkpoint"}, Concurrency: 2, Logger: testLogger(t)})
	w.Handle("resume", func(ctx context.Context, job *Job) (any, error) {
		if len(job.Checkpoint) == 0 {
			if err := Checkpoint(ctx, []byte("row=7")); err != nil {
				return nil, err
			}
			if err := Checkpoint(ctx, make([]byte, 1024*1024+1)); !IsInvalidArgument(err) {
				return nil, Permanent(fmt.Errorf("an oversized checkpoint answered %v", err))
			}
			return nil, errors.New("crashed after row 7")
		}
		return "resumed at " + string(job.Checkpoint), nil
	})
	w.Handle("progress", func(ctx context.Context, job *Job) (any, error) {
		if err := ReportProgress(ctx, 101, ""); !IsInvalidArgument(err) {
			return nil, Permanent(fmt.Errorf("percent 101 answered %v", err))
		}
		if err := ReportProgress(ctx, 60, "sixty"); err != nil {
			return nil, err
		}
		<-release
		return "done", nil
	})
	runWorker(t, w)
	if err := Checkpoint(context.Background(), nil); err == nil {
		t.Error("Checkpoint outside a handler succeeded")
	}

	jid := submit(t, c, "resume", Queue("t-checkpoint"), Retry(fastRetry))
	job := waitResult(t, c, jid, 20*time.Second)
	if job.State != StateCompleted || job.Attempt != 2 || string(job.Result) != "resumed at row=7" || string(job.Checkpoint) != "row=7" {
		t.Fatalf("got %s attempt %d result %q checkpoint %q", job.State, job.Attempt, job.Result, job.Checkpoint)
	}

	jid = submit(t, c, "progress", Queue("t-checkpoint"))
	var watched []*Job
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := c.WatchJob(ctx, jid, func(j *Job) error {
		watched = append(watched, j)
		if j.Progress != nil && len(watched) > 0 {
			select {
			case <-release:
			default:
				close(release)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("WatchJob: %v", err)
	}
	last := watched[len(watched)-1]
	if last.State != StateCompleted || string(last.Result) != "done" {
		t.Fatalf("last watched %s %q", last.State, last.Result)
	}
	var sawProgress bool
	for _, j := range watched {
		if j.State == StateRunning && j.Progress != nil && j.Progress.Percent == 60 && j.Progress.Message == "sixty" {
			sawProgress = true
		}
	}
	if !sawProgress {
		t.Errorf("no watched message of the running job with its progress: %d messages", len(watched))
	}
	if err := c.WatchJob(ctx, "0b7e4c52-9f3a-4d6e-8a1b-2c3d4e5f6a7b", func(*Job) error { return nil }); !IsNotFound(err) {
		t.Errorf("WatchJob of an unknown job: %v, want NOT_FOUND", err)
	}
}

func TestUniqueAndDebounce(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	c := dial(t, srv)
	ctx := context.Background()

	unique := Unique(Uniqueness{Key: "report:1", Until: UniqueFinished})
	first, err := c.SubmitDetailed(ctx, "report", Queue("t-unique"), unique)
	if err != nil || first.Duplicate || first.State != StateScheduled {
		t.Fatalf("first unique submit: %+v %v", first, err)
	}
	again, err := c.SubmitDetailed(ctx, "report", Queue("t-unique"), unique)
	if err != nil || !again.Duplicate || again.JID != first.JID {
		t.Fatalf("repeat unique submit: %+v %v, want a duplicate of %s", again, err, first.JID)
	}
	job, err := c.GetJob(ctx, first.JID)
	if err != nil || job.UniqueKey != "report:1" || job.UniqueUntil != UniqueFinished {
		t.Fatalf("unique job: %+v %v", job, err)
	}

	grouped := submit(t, c, "report", Queue("t-groups"), Group("customer:42"))
	if job, err := c.GetJob(ctx, grouped); err != nil || job.Group != "customer:42" {
		t.Fatalf("grouped job: %+v %v", job, err)
	}

	waiting := submit(t, c, "index", Queue("t-debounce"), Args(1), Debounce("doc:1", 5*time.Minute))
	second, err := c.SubmitDetailed(ctx, "index", Queue("t-debounce"), Args(2), Debounce("doc:1", 5*time.Minute))
	if err != nil || !second.Debounced || second.Duplicate || second.JID != waiting || second.State != StateDelayed {
		t.Fatalf("debounced submit: %+v %v, want %s debounced", second, err, waiting)
	}
	job, err = c.GetJob(ctx, waiting)
	if err != nil || len(job.Args) != 1 || job.Args[0] != float64(2) || job.DebounceKey != "doc:1" {
		t.Fatalf("debounced job: args %v key %q %v", job.Args, job.DebounceKey, err)
	}

	_, err = c.Submit(ctx, "t", Unique(Uniqueness{Until: UniqueStarted, Window: time.Second}))
	if !IsInvalidArgument(err) || !strings.Contains(err.Error(), "job.unique.window") {
		t.Fatalf("window with until STARTED: %v", err)
	}
}

func TestBatches(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	c := dial(t, srv)
	ctx := context.Background()

	batch, err := c.CreateBatch(ctx, BatchSpec{Description: "go", OnComplete: &JobSpec{Type: "report.done", Queue: "t-batch-cb"}})
	if err != nil || batch.State != BatchOpen {
		t.Fatalf("CreateBatch: %+v %v", batch, err)
	}
	jids := []string{submit(t, c, "t", Queue("t-batch"), InBatch(batch.ID)), submit(t, c, "t", Queue("t-batch"), InBatch(batch.ID))}
	if job, err := c.GetJob(ctx, jids[0]); err != nil || job.BatchID != batch.ID {
		t.Fatalf("job in batch: %+v %v", job, err)
	}
	sealed, err := c.SealBatch(ctx, batch.ID)
	if err != nil || sealed.State != BatchSealed || sealed.Total != 2 || sealed.Pending != 2 {
		t.Fatalf("SealBatch: %+v %v", sealed, err)
	}
	if _, err := c.WaitBatch(ctx, batch.ID, 300*time.Millisecond); !IsDeadlineExceeded(err) {
		t.Fatalf("WaitBatch on an unfinished batch: %v, want DEADLINE_EXCEEDED", err)
	}
	for _, jid := range jids {
		if _, err := c.Cancel(ctx, jid); err != nil {
			t.Fatal(err)
		}
	}
	done, err := c.WaitBatch(ctx, batch.ID, 10*time.Second)
	if err != nil || done.State != BatchFinishedWithFailures || done.Failed != 2 || done.OnCompleteJID == "" || done.OnSuccessJID != "" {
		t.Fatalf("WaitBatch: %+v %v", done, err)
	}
	if _, err := c.SealBatch(ctx, batch.ID); !IsLeaseLost(err) {
		t.Fatalf("second SealBatch: %v, want FAILED_PRECONDITION", err)
	}
	if _, err := c.Submit(ctx, "t", InBatch(batch.ID)); !IsLeaseLost(err) {
		t.Fatalf("submit into a done batch: %v, want FAILED_PRECONDITION", err)
	}
}
