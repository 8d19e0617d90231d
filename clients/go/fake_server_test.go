package worq

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	worqv1 "github.com/worq-dev/worq/gen/go/worq/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// fakeWorkerService scripts the server side of the worker protocol, for behaviour the real
// server cannot be made to show on demand (control messages, refused reports).
type fakeWorkerService struct {
	worqv1.UnimplementedWorkerServiceServer
	// lease is called for each Lease stream; it sends what it wants and returns the
	// stream's end (nil: OK).
	lease func(n int, req *worqv1.LeaseRequest, send func(*worqv1.LeaseResponse) error, ctx context.Context) error
	// ack, fail and renew answer each call (n counts the calls of that RPC, from 1).
	ack   func(n int, req *worqv1.AckRequest) error
	fail  func(n int, req *worqv1.FailRequest) error
	renew func(n int, ref *worqv1.LeaseRef) (int32, string)

	// holdReport, when set, runs at the start of each Report call (to hold one back).
	holdReport func(ctx context.Context)

	mu          sync.Mutex
	leases      []*worqv1.LeaseRequest
	acks        []*worqv1.AckRequest
	fails       []*worqv1.FailRequest
	renews      int
	reportCalls []int // acks per Report call
}

func (f *fakeWorkerService) Lease(req *worqv1.LeaseRequest, stream grpc.ServerStreamingServer[worqv1.LeaseResponse]) error {
	f.mu.Lock()
	f.leases = append(f.leases, req)
	n := len(f.leases)
	f.mu.Unlock()
	if f.lease == nil {
		<-stream.Context().Done()
		return nil
	}
	return f.lease(n, req, stream.Send, stream.Context())
}

func (f *fakeWorkerService) Ack(_ context.Context, req *worqv1.AckRequest) (*worqv1.AckResponse, error) {
	f.mu.Lock()
	f.acks = append(f.acks, req)
	n := len(f.acks)
	f.mu.Unlock()
	if f.ack != nil {
		if err := f.ack(n, req); err != nil {
			return nil, err
		}
	}
	return &worqv1.AckResponse{}, nil
}

// Report answers each ack as Ack would (through the ack hook), as that item's outcome;
// reportCalls records the acks of each call. (The Go worker reports fails with Fail.)
func (f *fakeWorkerService) Report(ctx context.Context, req *worqv1.ReportRequest) (*worqv1.ReportResponse, error) {
	f.mu.Lock()
	f.reportCalls = append(f.reportCalls, len(req.GetAcks()))
	hold := f.holdReport
	f.mu.Unlock()
	if hold != nil {
		hold(ctx)
	}
	resp := &worqv1.ReportResponse{}
	for _, ack := range req.GetAcks() {
		item := &worqv1.ItemResult{Jid: ack.GetJid()}
		if _, err := f.Ack(ctx, ack); err != nil {
			st := status.Convert(err)
			item.Code, item.Message = int32(st.Code()), st.Message()
		}
		resp.Acks = append(resp.Acks, item)
	}
	return resp, nil
}

func (f *fakeWorkerService) Fail(_ context.Context, req *worqv1.FailRequest) (*worqv1.FailResponse, error) {
	f.mu.Lock()
	f.fails = append(f.fails, req)
	n := len(f.fails)
	f.mu.Unlock()
	if f.fail != nil {
		if err := f.fail(n, req); err != nil {
			return nil, err
		}
	}
	return &worqv1.FailResponse{State: worqv1.JobState_JOB_STATE_RETRYING}, nil
}

func (f *fakeWorkerService) Renew(_ context.Context, req *worqv1.RenewRequest) (*worqv1.RenewResponse, error) {
	resp := &worqv1.RenewResponse{}
	for _, ref := range req.GetLeases() {
		f.mu.Lock()
		f.renews++
		n := f.renews
		f.mu.Unlock()
		code, msg := int32(0), ""
		if f.renew != nil {
			code, msg = f.renew(n, ref)
		}
		resp.Results = append(resp.Results, &worqv1.RenewResult{Jid: ref.GetJid(), Code: code, Message: msg,
			LeaseExpiresAt: timestamppb.New(time.Now().Add(time.Second))})
	}
	return resp, nil
}

func (f *fakeWorkerService) counts() (leases, acks, fails, renews int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.leases), len(f.acks), len(f.fails), f.renews
}

// startFake serves f on a free port and returns a client of it.
func startFake(t *testing.T, f *fakeWorkerService) *Client {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	worqv1.RegisterWorkerServiceServer(srv, f)
	go func() { _ = srv.Serve(lis) }()
	c, err := Dial(context.Background(), lis.Addr().String(), WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Stop()
		_ = c.Close()
	})
	return c
}

// fakeJob is a leased job as the fake server pushes it.
func fakeJob(jid string, reserveFor time.Duration) *worqv1.LeaseResponse {
	now := time.Now()
	return &worqv1.LeaseResponse{Kind: &worqv1.LeaseResponse_Jobs{Jobs: &worqv1.LeasedJobs{Jobs: []*worqv1.LeasedJob{{
		Job: &worqv1.Job{Jid: jid, Type: "fake", Queue: "q", Attempt: 1, State: worqv1.JobState_JOB_STATE_RUNNING,
			ReserveFor: durationpb.New(reserveFor), Backtrace: 3},
		LeaseId:           "lease-" + jid,
		LeaseExpiresAt:    timestamppb.New(now.Add(reserveFor)),
		ExecutionDeadline: timestamppb.New(now.Add(time.Minute)),
	}}}}}
}

func control(action worqv1.ControlAction) *worqv1.LeaseResponse {
	return &worqv1.LeaseResponse{Kind: &worqv1.LeaseResponse_Control{Control: &worqv1.Control{Action: action, Reason: "test"}}}
}

// doneEvents collects OnDone outcomes by jid.
type doneEvents struct {
	mu       sync.Mutex
	outcomes map[string]Outcome
	ch       chan string
}

func newDoneEvents() *doneEvents {
	return &doneEvents{outcomes: map[string]Outcome{}, ch: make(chan string, 16)}
}

func (d *doneEvents) hook(job *Job, o Outcome, _ error) {
	d.mu.Lock()
	d.outcomes[job.JID] = o
	d.mu.Unlock()
	d.ch <- job.JID
}

func (d *doneEvents) wait(t *testing.T, jid string) Outcome {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		d.mu.Lock()
		o, ok := d.outcomes[jid]
		d.mu.Unlock()
		if ok {
			return o
		}
		select {
		case <-d.ch:
		case <-timeout:
			t.Fatalf("no done event for %s", jid)
		}
	}
}

func TestTerminateShutsDownGracefully(t *testing.T) {
	t.Parallel()
	f := &fakeWorkerService{lease: func(n int, _ *worqv1.LeaseRequest, send func(*worqv1.LeaseResponse) error, ctx context.Context) error {
		_ = send(fakeJob("j1", time.Minute))
		time.Sleep(50 * time.Millisecond)
		_ = send(control(worqv1.ControlAction_CONTROL_ACTION_TERMINATE))
		return nil
	}}
	c := startFake(t, f)
	w := NewWorker(c, WorkerOptions{Queues: []string{"q"}, Logger: testLogger(t)})
	w.Handle("fake", func(ctx context.Context, job *Job) (any, error) {
		time.Sleep(300 * time.Millisecond)
		return "done", nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.Run(ctx); err != nil || ctx.Err() != nil {
		t.Fatalf("Run: %v (context: %v)", err, ctx.Err())
	}
	if leases, acks, _, _ := f.counts(); leases != 1 || acks != 1 || string(f.acks[0].GetResult()) != "done" {
		t.Fatalf("%d Lease streams, %d acks; want 1 and 1", leases, acks)
	}
}

func TestQuietClosesTheStreamAndFinishes(t *testing.T) {
	t.Parallel()
	closed := make(chan struct{})
	f := &fakeWorkerService{lease: func(n int, _ *worqv1.LeaseRequest, send func(*worqv1.LeaseResponse) error, ctx context.Context) error {
		_ = send(fakeJob("j1", time.Minute))
		_ = send(control(worqv1.ControlAction_CONTROL_ACTION_QUIET))
		<-ctx.Done() // QUIET keeps the stream: the worker must close it
		close(closed)
		return nil
	}}
	c := startFake(t, f)
	done := newDoneEvents()
	w := NewWorker(c, WorkerOptions{Queues: []string{"q"}, Logger: testLogger(t), Hooks: Hooks{OnDone: done.hook}})
	w.Handle("fake", func(ctx context.Context, job *Job) (any, error) {
		time.Sleep(200 * time.Millisecond)
		return nil, nil
	})
	stop := runWorker(t, w)
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("the worker did not close its Lease stream on QUIET")
	}
	if o := done.wait(t, "j1"); o != OutcomeAck {
		t.Fatalf("outcome %s", o)
	}
	time.Sleep(300 * time.Millisecond) // no reconnect while quiet
	if leases, _, _, _ := f.counts(); leases != 1 {
		t.Errorf("%d Lease streams after QUIET, want 1", leases)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

func TestReconnectKeepsWorkerIDAndCredits(t *testing.T) {
	t.Parallel()
	f := &fakeWorkerService{lease: func(n int, _ *worqv1.LeaseRequest, send func(*worqv1.LeaseResponse) error, ctx context.Context) error {
		switch n {
		case 1:
			_ = send(fakeJob("j1", time.Minute))
			return status.Error(codes.Unavailable, "network blip")
		case 2:
			return status.Error(codes.Internal, "something else")
		case 3:
			_ = send(control(worqv1.ControlAction_CONTROL_ACTION_RECONNECT))
			return nil
		}
		<-ctx.Done()
		return nil
	}}
	c := startFake(t, f)
	done := newDoneEvents()
	var mu sync.Mutex
	var delays []time.Duration
	w := NewWorker(c, WorkerOptions{Queues: []string{"q", "r"}, Concurrency: 7, WorkerID: "w-1", Logger: testLogger(t),
		Hooks: Hooks{OnDone: done.hook, OnReconnecting: func(d time.Duration, _ error) {
			mu.Lock()
			delays = append(delays, d)
			mu.Unlock()
		}}})
	w.Handle("fake", func(ctx context.Context, job *Job) (any, error) {
		time.Sleep(500 * time.Millisecond) // runs across the reconnects
		return "ok", nil
	})
	runWorker(t, w)
	if o := done.wait(t, "j1"); o != OutcomeAck {
		t.Fatalf("outcome %s", o)
	}
	deadline := time.Now().Add(5 * time.Second)
	for leases, _, _, _ := f.counts(); leases < 4; leases, _, _, _ = f.counts() {
		if time.Now().After(deadline) {
			t.Fatalf("%d Lease streams, want 4", leases)
		}
		time.Sleep(20 * time.Millisecond)
	}
	f.mu.Lock()
	for i, req := range f.leases {
		if req.GetWorkerId() != "w-1" || req.GetCredits() != 7 || len(req.GetQueues()) != 2 || req.GetLabels()["lang"] != "go" {
			t.Errorf("Lease %d: %v", i+1, req)
		}
	}
	f.mu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	// 1 delivered (reset) → ~100 ms; 2 delivered nothing → ~200 ms; 3 delivered → ~100 ms.
	if len(delays) < 3 || delays[0] > 120*time.Millisecond || delays[1] < 160*time.Millisecond || delays[2] > 120*time.Millisecond {
		t.Errorf("reconnect delays %v", delays)
	}
	if _, _, _, renews := f.counts(); renews == 0 {
		t.Error("in-flight lease not renewed on reconnect")
	}
}

func TestReportsRetryUnavailableAndDropLostLeases(t *testing.T) {
	t.Parallel()
	f := &fakeWorkerService{
		lease: func(n int, _ *worqv1.LeaseRequest, send func(*worqv1.LeaseResponse) error, ctx context.Context) error {
			if n == 1 {
				_ = send(fakeJob("retried", time.Minute))
				_ = send(fakeJob("stale", time.Minute))
				_ = send(fakeJob("failing", time.Minute))
			}
			<-ctx.Done()
			return nil
		},
		ack: func(n int, req *worqv1.AckRequest) error {
			switch {
			case req.GetJid() == "stale":
				return status.Error(codes.FailedPrecondition, "lease_id: not the job's live lease")
			case req.GetJid() == "retried" && n <= 3:
				return status.Error(codes.Unavailable, "storage hiccup")
			}
			return nil
		},
		fail: func(n int, req *worqv1.FailRequest) error {
			return status.Error(codes.NotFound, "job not found")
		},
	}
	c := startFake(t, f)
	done := newDoneEvents()
	w := NewWorker(c, WorkerOptions{Queues: []string{"q"}, Logger: testLogger(t), Hooks: Hooks{OnDone: done.hook}})
	w.Handle("fake", func(ctx context.Context, job *Job) (any, error) {
		if job.JID == "failing" {
			return nil, errors.New("nope")
		}
		return nil, nil
	})
	runWorker(t, w)
	for jid, want := range map[string]Outcome{"retried": OutcomeAck, "stale": OutcomeLeaseLost, "failing": OutcomeLeaseLost} {
		if got := done.wait(t, jid); got != want {
			t.Errorf("%s: outcome %s, want %s", jid, got, want)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	perJID := map[string]int{}
	for _, a := range f.acks {
		perJID[a.GetJid()]++
	}
	if perJID["retried"] < 2 || perJID["stale"] != 1 || len(f.fails) != 1 {
		t.Errorf("acks per jid %v, fails %d; want the UNAVAILABLE ack retried and the lost ones sent once", perJID, len(f.fails))
	}
	if fr := f.fails[0]; fr.GetMessage() != "nope" || fr.GetErrtype() != "*errors.errorString" || len(fr.GetBacktrace()) == 0 {
		t.Errorf("fail request %v", fr)
	}
}

func TestAcksShareReportCallsAndOvertakeAHeldOne(t *testing.T) {
	t.Parallel()
	const jobs = 40
	release := make(chan struct{})
	var held sync.Once
	f := &fakeWorkerService{
		lease: func(n int, _ *worqv1.LeaseRequest, send func(*worqv1.LeaseResponse) error, ctx context.Context) error {
			for i := 0; i < jobs; i++ {
				_ = send(fakeJob(fmt.Sprintf("j%d", i), time.Minute))
			}
			<-ctx.Done()
			return nil
		},
	}
	// The first Report call does not return until the test ends: the other acks must not wait for it.
	f.holdReport = func(ctx context.Context) {
		first := false
		held.Do(func() { first = true })
		if first {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
	}
	defer close(release) // before the worker's cleanup, which waits for its reports
	c := startFake(t, f)
	done := newDoneEvents()
	done.ch = make(chan string, jobs)
	w := NewWorker(c, WorkerOptions{Queues: []string{"q"}, Concurrency: jobs, Logger: testLogger(t), Hooks: Hooks{OnDone: done.hook}})
	w.Handle("fake", func(ctx context.Context, job *Job) (any, error) { return nil, nil })
	runWorker(t, w)
	// Every ack but those in the held call is answered.
	deadline := time.After(10 * time.Second)
	for {
		f.mu.Lock()
		calls := append([]int(nil), f.reportCalls...)
		f.mu.Unlock()
		done.mu.Lock()
		finished := len(done.outcomes)
		done.mu.Unlock()
		if len(calls) > 0 && finished == jobs-calls[0] {
			if len(calls) >= jobs {
				t.Fatalf("%d Report calls for %d acks: acks were not batched (%v)", len(calls), jobs, calls)
			}
			return
		}
		select {
		case <-deadline:
			t.Fatalf("%d of %d jobs reported with the first Report call held; calls %v", finished, jobs, calls)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func TestLostRenewalCancelsHandler(t *testing.T) {
	t.Parallel()
	f := &fakeWorkerService{
		lease: func(n int, _ *worqv1.LeaseRequest, send func(*worqv1.LeaseResponse) error, ctx context.Context) error {
			if n == 1 {
				_ = send(fakeJob("j1", 300*time.Millisecond)) // renewed every 100 ms
			}
			<-ctx.Done()
			return nil
		},
		renew: func(n int, ref *worqv1.LeaseRef) (int32, string) {
			if n >= 2 {
				return int32(codes.FailedPrecondition), "lease lapsed"
			}
			return 0, ""
		},
		fail: func(int, *worqv1.FailRequest) error { return status.Error(codes.FailedPrecondition, "lease lapsed") },
	}
	c := startFake(t, f)
	done := newDoneEvents()
	causes := make(chan error, 1)
	w := NewWorker(c, WorkerOptions{Queues: []string{"q"}, Logger: testLogger(t), Hooks: Hooks{OnDone: done.hook}})
	w.Handle("fake", func(ctx context.Context, job *Job) (any, error) {
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
		}
		causes <- context.Cause(ctx)
		return nil, ctx.Err()
	})
	runWorker(t, w)
	if cause := <-causes; !errors.Is(cause, ErrLeaseLost) {
		t.Errorf("handler ctx ended with %v, want ErrLeaseLost", cause)
	}
	if o := done.wait(t, "j1"); o != OutcomeLeaseLost {
		t.Errorf("outcome %s", o)
	}
}
