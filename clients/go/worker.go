package worq

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	worqv1 "github.com/worq-dev/worq/gen/go/worq/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Handler runs one job. Its return value becomes the job's result (see EncodeResult); an
// error fails the attempt (TEMPORARY, or PERMANENT when wrapped with Permanent; see also
// RetryAfter). ctx is cancelled at the job's execution deadline, when the lease is lost,
// when the server revokes the job (cancelled, deleted, expired), and when the worker's
// shutdown timeout runs out; context.Cause(ctx) says which (ErrExecutionDeadline,
// ErrLeaseLost, a *RevokedError matching ErrRevoked, ErrShutdown).
type Handler func(ctx context.Context, job *Job) (any, error)

// Middleware wraps every handler of a worker, outermost first (see Worker.Use).
type Middleware func(next Handler) Handler

// Outcome is how a job's report ended.
type Outcome string

// Outcomes passed to Hooks.OnDone.
const (
	// OutcomeAck: the job was acknowledged (COMPLETED).
	OutcomeAck Outcome = "ack"
	// OutcomeFail: the failure was recorded (the job retries, FAILED or DEAD_LETTER).
	OutcomeFail Outcome = "fail"
	// OutcomeLeaseLost: the server refused the report (FAILED_PRECONDITION or NOT_FOUND):
	// the lease lapsed, so the job may run elsewhere. The report was dropped.
	OutcomeLeaseLost Outcome = "lease_lost"
	// OutcomeDropped: the report was refused for another reason, or still unanswered when
	// the shutdown deadline passed. It was logged and dropped; the lease will lapse.
	OutcomeDropped Outcome = "dropped"
)

// Hooks are optional callbacks for following a worker (tests, metrics). They are called
// from the worker's goroutines, possibly at the same time, and must not block for long.
type Hooks struct {
	// OnReady is called each time a Lease stream is opened.
	OnReady func(workerID string)
	// OnStart is called when a handler starts.
	OnStart func(job *Job)
	// OnDone is called once the server answered the job's report (or it was dropped).
	// err is the handler's error, nil when it succeeded.
	OnDone func(job *Job, outcome Outcome, err error)
	// OnReconnecting is called when the Lease stream ended and the worker will reopen it
	// after delay.
	OnReconnecting func(delay time.Duration, reason error)
}

// WorkerOptions configures a Worker. Zero fields take the defaults named on them.
type WorkerOptions struct {
	// Queues to take jobs from, served strictly in this order. Default ["default"].
	Queues []string
	// RandomQueueOrder picks each job from one of Queues chosen uniformly at random among
	// those with a ready job, instead of strictly in order.
	RandomQueueOrder bool
	// Concurrency is how many handlers run at once (the Lease credits). Default 10. Shared
	// by the streams to several partitions (WithPartitionRouting): each keeps at least one,
	// and the rest moves to the streams whose partitions have jobs waiting for credit.
	Concurrency int
	// WorkerID identifies this process to the server. Default "hostname-pid-random".
	WorkerID string
	// ShutdownTimeout is how long a graceful shutdown lets running handlers finish before
	// cancelling them and failing their jobs back for an immediate retry. Default 25 s.
	ShutdownTimeout time.Duration
	// Logger receives the worker's logs. Default: the client's logger.
	Logger *slog.Logger
	// Labels are shown in admin views; lang, hostname and pid are added.
	Labels map[string]string
	// Hooks follow the worker's events.
	Hooks Hooks
}

// Default worker settings.
const (
	DefaultConcurrency     = 10
	DefaultShutdownTimeout = 25 * time.Second
	// reportGrace is how long shutdown waits for the last reports after ShutdownTimeout.
	reportGrace = 10 * time.Second
	// callTimeout bounds one Ack, Fail or Renew call.
	callTimeout = 30 * time.Second
	// maxRenewBatch is the server's limit of leases per Renew.
	maxRenewBatch = 10_000
	// failMessageMaxBytes and errtypeMaxBytes are the server's limits on Fail.
	failMessageMaxBytes = 64 * 1024
	errtypeMaxBytes     = 256
	failCodeMaxBytes    = 256
)

// Worker leases jobs from a Worq server and runs them with registered handlers, much like
// a Faktory manager. Create it with NewWorker, register handlers with Handle, then Run.
type Worker struct {
	client   *Client
	opts     WorkerOptions
	log      *slog.Logger
	quietCh  chan struct{}
	stopCh   chan struct{}
	quiet    sync.Once
	stop     sync.Once
	kick     chan struct{}
	slots    chan struct{}  // a running handler holds one; made by leaseAll, sized to the streams' credits
	pending  sync.WaitGroup // jobs received and not yet reported
	baseCtx  context.Context
	reportCx context.Context

	mu         sync.Mutex
	handlers   map[string]Handler
	middleware []Middleware
	started    bool
	tasks      map[string]*task // by lease id
	opened     chan struct{}    // closed (and replaced) whenever a Lease stream opens

	acks map[int]*ackBatcher // by partition (see partitionOfJob): acks go out together in Report calls
}

// NewWorker creates a worker on client.
func NewWorker(client *Client, opts WorkerOptions) *Worker {
	if len(opts.Queues) == 0 {
		opts.Queues = []string{"default"}
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = DefaultConcurrency
	}
	if opts.WorkerID == "" {
		opts.WorkerID = defaultWorkerID()
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = DefaultShutdownTimeout
	}
	logger := opts.Logger
	if logger == nil {
		logger = client.logger
	}
	return &Worker{
		client:   client,
		opts:     opts,
		log:      logger.With("worker_id", opts.WorkerID),
		quietCh:  make(chan struct{}),
		stopCh:   make(chan struct{}),
		kick:     make(chan struct{}, 1),
		handlers: map[string]Handler{},
		tasks:    map[string]*task{},
		opened:   make(chan struct{}),
		acks:     map[int]*ackBatcher{},
	}
}

// streamOpened wakes the reports waiting to retry: the server is reachable again.
func (w *Worker) streamOpened() {
	w.mu.Lock()
	close(w.opened)
	w.opened = make(chan struct{})
	w.mu.Unlock()
}

// nextStreamOpen returns a channel closed when the next Lease stream opens.
func (w *Worker) nextStreamOpen() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.opened
}

// ID returns the worker id sent to the server.
func (w *Worker) ID() string { return w.opts.WorkerID }

// Handle registers the handler of a job type, replacing any earlier one. A job whose type
// has no handler fails (TEMPORARY) with "no handler registered".
func (w *Worker) Handle(jobType string, h Handler) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.handlers[jobType] = h
}

// Use adds middleware around every handler; the first added is the outermost.
func (w *Worker) Use(mw ...Middleware) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.middleware = append(w.middleware, mw...)
}

// Quiet stops taking new work: the Lease stream is closed and not reopened. Running jobs
// finish and are reported as usual; Run returns only when its context is cancelled (or on
// TERMINATE or Stop). The server's QUIET control does the same.
func (w *Worker) Quiet() {
	w.quiet.Do(func() {
		w.log.Info("quiet: taking no more jobs")
		close(w.quietCh)
	})
}

// Stop starts a graceful shutdown, as cancelling Run's context or the server's TERMINATE
// control do. It returns at once; Run returns when the shutdown is done.
func (w *Worker) Stop() {
	w.stop.Do(func() { close(w.stopCh) })
}

// Run leases and runs jobs until ctx is cancelled, Stop is called or the server sends
// TERMINATE, then shuts down gracefully: it closes the Lease stream, lets running handlers
// finish within ShutdownTimeout, then cancels the rest and fails them back as TEMPORARY
// with retry_after 0 (so they are retried at once), and returns nil once every job is
// reported. It returns an error at once only for a Lease request the server refuses as
// INVALID_ARGUMENT (a bad queue name, for example), after the same graceful shutdown.
// Run may be called once.
func (w *Worker) Run(ctx context.Context) error {
	w.mu.Lock()
	if w.started {
		w.mu.Unlock()
		return errors.New("worq: Worker.Run called twice")
	}
	w.started = true
	w.mu.Unlock()

	base := context.WithoutCancel(ctx)
	reportCtx, cancelReports := context.WithCancel(base)
	defer cancelReports()
	w.baseCtx, w.reportCx = base, reportCtx

	renewCtx, stopRenewer := context.WithCancel(base)
	renewerDone := make(chan struct{})
	go func() {
		defer close(renewerDone)
		w.renewLoop(renewCtx)
	}()

	leaseCtx, stopLease := context.WithCancel(base)
	defer stopLease()
	leaseDone := make(chan error, 1)
	go func() { leaseDone <- w.leaseAll(leaseCtx) }()
	w.log.Info("worker started", "queues", w.opts.Queues, "concurrency", w.opts.Concurrency)

	var runErr error
	quietCh, leaseRunning := w.quietCh, true
wait:
	for {
		select {
		case <-ctx.Done():
			w.log.Info("shutting down", "reason", context.Cause(ctx))
			break wait
		case <-w.stopCh:
			w.log.Info("shutting down", "reason", "stop requested")
			break wait
		case <-quietCh:
			quietCh = nil
			stopLease()
		case err := <-leaseDone:
			leaseRunning = false
			if err != nil {
				w.log.Error("the server refused the Lease request; shutting down", "error", err)
				runErr = err
				break wait
			}
		}
	}

	stopLease()
	if leaseRunning {
		<-leaseDone
	}
	w.shutdown(cancelReports)
	stopRenewer()
	<-renewerDone
	w.log.Info("worker stopped")
	return runErr
}

// shutdown waits for the jobs still held, cancelling and failing back what is left after
// ShutdownTimeout. The Lease stream is closed already, so no job arrives any more.
func (w *Worker) shutdown(cancelReports context.CancelFunc) {
	w.mu.Lock()
	var unstarted []*task
	for _, t := range w.tasks {
		if !t.started && t.settled.CompareAndSwap(false, true) {
			unstarted = append(unstarted, t)
		}
	}
	held := len(w.tasks)
	w.mu.Unlock()
	for _, t := range unstarted {
		t.cancel(ErrShutdown)
		go w.failBack(t)
	}
	// The closed stream capped every lease at now + orphan grace; a renewal lifts that.
	w.renewSoon()

	drained := make(chan struct{})
	go func() {
		w.pending.Wait()
		close(drained)
	}()
	if held > 0 {
		w.log.Info("waiting for running jobs", "jobs", held, "timeout", w.opts.ShutdownTimeout)
	}
	timeout := time.NewTimer(w.opts.ShutdownTimeout)
	defer timeout.Stop()
	select {
	case <-drained:
		return
	case <-timeout.C:
	}

	w.mu.Lock()
	var running []*task
	for _, t := range w.tasks {
		if t.settled.CompareAndSwap(false, true) {
			running = append(running, t)
		}
	}
	w.mu.Unlock()
	if len(running) > 0 {
		w.log.Warn("shutdown timeout: cancelling running jobs and failing them back", "jobs", len(running))
	}
	for _, t := range running {
		t.cancel(ErrShutdown)
		go w.failBack(t)
	}
	grace := time.NewTimer(reportGrace)
	defer grace.Stop()
	select {
	case <-drained:
	case <-grace.C:
		w.log.Error("reports still unanswered after the shutdown deadline; dropping them")
		cancelReports()
		<-drained
	}
}

// leaseLoop holds one group's Lease stream, reopening it with backoff, until ctx ends or the
// worker goes quiet. It returns an error only for a request the server will never accept.
func (w *Worker) leaseLoop(ctx context.Context, g leaseGroup) error {
	labels := map[string]string{"lang": "go", "pid": strconv.Itoa(os.Getpid())}
	if host, err := os.Hostname(); err == nil {
		labels["hostname"] = host
	}
	for k, v := range w.opts.Labels {
		labels[k] = v
	}
	req := &worqv1.LeaseRequest{
		Queues:   g.queues,
		WorkerId: w.opts.WorkerID,
		Credits:  uint32(g.credits),
		Labels:   labels,
	}
	if w.opts.RandomQueueOrder {
		req.Order = worqv1.QueueOrder_QUEUE_ORDER_RANDOM
	}
	r := retrier{b: reconnectBackoff()}
	for {
		if w.stopped(ctx) {
			return nil
		}
		if g.credit != nil {
			// Opened with the limit the credit mover last gave the stream, asking to be told
			// when jobs wait for its credit.
			req.Credits, req.ReportWaiting = g.credit.opening(), true
		}
		server := w.client.routeOfPartition(g.partition)
		streamCtx, endStream := ctx, context.CancelFunc(func() {})
		if g.partition != noPartition && server == w.client.node {
			streamCtx, endStream = w.untilOwnServer(ctx, g.partition)
		}
		received, err := w.leaseOnce(streamCtx, server, req, g.credit)
		if errors.Is(context.Cause(streamCtx), errOwnServerKnown) {
			err = errOwnServerKnown
		}
		endStream()
		// Whatever ended the stream, the server capped our leases at now + orphan grace:
		// renew them once it has seen the stream end.
		w.renewSoon()
		if w.stopped(ctx) {
			return nil
		}
		if !received && Code(err) == codes.InvalidArgument {
			return err
		}
		if received {
			r.reset()
		}
		delay := r.next()
		var rr *reconnectRequest
		if errors.As(err, &rr) {
			w.log.Info("the server asked to reconnect", "reason", rr.reason, "delay", delay)
		} else if errors.Is(err, errOwnServerKnown) {
			w.log.Info("moving the Lease stream to its partition's own server", "partition", g.partition)
		} else {
			w.log.Warn("lease stream ended; reconnecting", "error", err, "delay", delay)
		}
		if h := w.opts.Hooks.OnReconnecting; h != nil {
			h(delay, err)
		}
		if !w.awaitReconnect(ctx, g.partition, server, delay) {
			return nil
		}
		w.client.resetConnectBackoff()
	}
}

// stopped reports whether the lease loop must end.
func (w *Worker) stopped(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return true
	case <-w.quietCh:
		return true
	case <-w.stopCh:
		return true
	default:
		return false
	}
}

// errStreamEnded is the reconnect reason of a stream the server ended without a word.
var errStreamEnded = errors.New("worq: the server ended the Lease stream")

// reconnectRequest is the reconnect reason of a RECONNECT control message.
type reconnectRequest struct{ reason string }

func (r *reconnectRequest) Error() string {
	return "worq: the server asked to reconnect: " + r.reason
}

// leaseOnce opens one Lease stream on r and consumes it until it ends. received tells
// whether any message arrived (the stream was really up). credit, when the worker moves its
// concurrency between streams, is told the stream's id and whether jobs wait for it.
func (w *Worker) leaseOnce(ctx context.Context, r *route, req *worqv1.LeaseRequest, credit *streamCredit) (received bool, err error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if credit != nil {
		defer credit.ended()
	}
	stream, err := r.worker.Lease(sctx, req)
	if err != nil {
		return false, wrapErr(sctx, err)
	}
	for {
		msg, err := stream.Recv()
		if err == io.EOF {
			return received, errStreamEnded
		}
		if err != nil {
			return received, wrapErr(sctx, err)
		}
		if !received {
			// The first message (a keepalive) confirms the server registered this worker and
			// adopted its unreported leases: renew them at once, and retry waiting reports
			// now rather than after their backoff.
			received = true
			w.renewNow()
			w.streamOpened()
			w.log.Debug("lease stream open")
			if h := w.opts.Hooks.OnReady; h != nil {
				h(w.opts.WorkerID)
			}
		}
		switch kind := msg.GetKind().(type) {
		case *worqv1.LeaseResponse_Jobs:
			for _, lj := range kind.Jobs.GetJobs() {
				w.accept(lj, credit)
			}
		case *worqv1.LeaseResponse_Keepalive:
			if id := kind.Keepalive.GetStreamId(); id != "" && credit != nil {
				credit.opened(id, r)
			}
		case *worqv1.LeaseResponse_Waiting:
			if credit != nil {
				credit.mover.setWaiting(credit.index, kind.Waiting.GetWaiting())
			}
		case *worqv1.LeaseResponse_Revoked:
			w.revoke(kind.Revoked)
		case *worqv1.LeaseResponse_Control:
			reason := kind.Control.GetReason()
			switch kind.Control.GetAction() {
			case worqv1.ControlAction_CONTROL_ACTION_RECONNECT:
				return true, &reconnectRequest{reason: reason}
			case worqv1.ControlAction_CONTROL_ACTION_QUIET:
				w.log.Info("the server asked to quiet", "reason", reason)
				w.Quiet()
				return true, nil
			case worqv1.ControlAction_CONTROL_ACTION_TERMINATE:
				w.log.Info("the server asked to terminate", "reason", reason)
				w.Stop()
				return true, nil
			default:
				w.log.Debug("ignoring an unknown control action", "action", kind.Control.GetAction())
			}
		}
	}
}

// task is one leased job, from its arrival to its report.
type task struct {
	w            *Worker
	job          *Job
	ctx          context.Context
	cancel       context.CancelCauseFunc
	stopDeadline context.CancelFunc
	interval     time.Duration // between automatic renewals
	credit       *streamCredit // its stream's share of the credit; nil with one stream
	// settled is set by whoever reports the job: the handler's goroutine when it returns,
	// or the shutdown when it fails the job back. Only one of them reports.
	settled atomic.Bool

	// Guarded by w.mu.
	started    bool
	lost       bool
	nextRenew  time.Time
	renewFails int
}

type taskKey struct{}

// accept registers a leased job (held by credit's stream, when the worker holds several) and
// starts its goroutine.
func (w *Worker) accept(lj *worqv1.LeasedJob, credit *streamCredit) {
	job := jobFromProto(lj.GetJob())
	if job == nil || lj.GetLeaseId() == "" {
		w.log.Error("ignoring a malformed leased job", "jid", lj.GetJob().GetJid())
		return
	}
	job.LeaseID = lj.GetLeaseId()
	job.ExecutionDeadline = timeOf(lj.GetExecutionDeadline())

	t := &task{w: w, job: job, credit: credit}
	ctx := w.baseCtx
	t.stopDeadline = func() {}
	if !job.ExecutionDeadline.IsZero() {
		ctx, t.stopDeadline = context.WithDeadlineCause(ctx, job.ExecutionDeadline, ErrExecutionDeadline)
	}
	ctx, t.cancel = context.WithCancelCause(ctx)
	t.ctx = context.WithValue(ctx, taskKey{}, t)

	reserve := job.ReserveFor
	if reserve <= 0 {
		reserve = time.Until(timeOf(lj.GetLeaseExpiresAt()))
	}
	t.interval = max(reserve/3, 100*time.Millisecond)
	t.nextRenew = time.Now().Add(t.interval)

	w.mu.Lock()
	if _, dup := w.tasks[job.LeaseID]; dup {
		w.mu.Unlock()
		return
	}
	w.tasks[job.LeaseID] = t
	w.pending.Add(1)
	w.mu.Unlock()
	if credit != nil {
		credit.held.Add(1)
	}
	w.kickRenewer()
	go w.runTask(t)
}

// runTask waits for a slot, runs the handler and reports the outcome.
func (w *Worker) runTask(t *task) {
	select {
	case w.slots <- struct{}{}:
	case <-t.ctx.Done():
		// Cancelled before it could start: shutdown (already failing it back), or its
		// deadline or lease went before a slot freed up.
		if t.settled.CompareAndSwap(false, true) {
			w.settle(t, nil, fmt.Errorf("worq: the job could not start: %w", context.Cause(t.ctx)))
		}
		return
	}
	defer func() { <-w.slots }()
	w.mu.Lock()
	if t.settled.Load() {
		w.mu.Unlock()
		return
	}
	t.started = true
	w.mu.Unlock()

	if h := w.opts.Hooks.OnStart; h != nil {
		h(t.job)
	}
	spanCtx, span := startJobSpan(t.ctx, t.job, w.opts.WorkerID)
	result, err := w.invoke(spanCtx, t)
	endJobSpan(span, err)
	if !t.settled.CompareAndSwap(false, true) {
		return // the shutdown failed it back already
	}
	w.settle(t, result, err)
}

// invoke runs the job's handler (through the middleware), recovering a panic.
func (w *Worker) invoke(ctx context.Context, t *task) (result any, err error) {
	w.mu.Lock()
	h := w.handlers[t.job.Type]
	mws := w.middleware
	w.mu.Unlock()
	if h == nil {
		return nil, fmt.Errorf("worq: no handler registered for job type %q", t.job.Type)
	}
	for i := len(mws) - 1; i >= 0; i-- {
		h = mws[i](h)
	}
	defer func() {
		if r := recover(); r != nil {
			result, err = nil, &PanicError{Value: r, Frames: formatFrames(callers(1), true)}
		}
	}()
	return h(ctx, t.job)
}

// settle reports a finished handler: Ack with the encoded result, or Fail with the error.
func (w *Worker) settle(t *task, result any, herr error) {
	var data []byte
	if herr == nil {
		var err error
		switch data, err = EncodeResult(result); {
		case err != nil:
			herr = Permanent(err)
		case len(data) > maxResultBytes:
			herr = Permanent(fmt.Errorf("worq: the result is %d bytes, the limit is %d", len(data), maxResultBytes))
		}
	}
	var outcome Outcome
	if herr == nil {
		req := &worqv1.AckRequest{Jid: t.job.JID, LeaseId: t.job.LeaseID, Result: data}
		outcome = w.report(t, "Ack", OutcomeAck, func(ctx context.Context) error {
			return w.ackerOf(w.partitionOfJob(req.Jid)).ack(ctx, req)
		})
	} else {
		req := failRequest(t.job, herr, callers(2))
		outcome = w.report(t, "Fail", OutcomeFail, func(ctx context.Context) error {
			_, err := w.routeOfJob(req.Jid).worker.Fail(ctx, req)
			return err
		})
	}
	w.finish(t, outcome, herr)
}

// failBack fails a job back for an immediate retry: the worker shuts down.
func (w *Worker) failBack(t *task) {
	req := &worqv1.FailRequest{
		Jid:        t.job.JID,
		LeaseId:    t.job.LeaseID,
		Message:    ErrShutdown.Error(),
		Errtype:    errTypeOf(ErrShutdown),
		Category:   worqv1.FailureCategory_FAILURE_CATEGORY_TEMPORARY,
		RetryAfter: durationpb.New(0),
	}
	outcome := w.report(t, "Fail", OutcomeFail, func(ctx context.Context) error {
		_, err := w.routeOfJob(req.Jid).worker.Fail(ctx, req)
		return err
	})
	w.finish(t, outcome, ErrShutdown)
}

// failureTexts is the message and cause of a handler error: past the markers of Permanent
// and RetryAfter, a *PermanentError, *TemporaryError or *RateLimitedError gives its Message and its Cause's
// text; any other error its own text and the text of the error it wraps (errors.Unwrap),
// "" when it wraps none.
func failureTexts(err error) (message, cause string) {
	core := err
	for {
		switch e := core.(type) {
		case *permanentError:
			core = e.err
			continue
		case *retryAfterError:
			core = e.err
			continue
		}
		break
	}
	switch e := core.(type) {
	case *PermanentError:
		if e.Message != "" {
			message = e.Message
		} else {
			message = err.Error()
		}
		if e.Cause != nil {
			cause = e.Cause.Error()
		}
		return message, cause
	case *TemporaryError:
		if e.Message != "" {
			message = e.Message
		} else {
			message = err.Error()
		}
		if e.Cause != nil {
			cause = e.Cause.Error()
		}
		return message, cause
	case *RateLimitedError:
		if e.Cause != nil {
			cause = e.Cause.Error()
		}
		return e.message(), cause
	}
	if inner := errors.Unwrap(core); inner != nil {
		cause = inner.Error()
	}
	return err.Error(), cause
}

// failRequest builds the Fail of a handler error. fallback is the stack to report when
// the error carries none.
func failRequest(job *Job, err error, fallback []uintptr) *worqv1.FailRequest {
	message, cause := failureTexts(err)
	req := &worqv1.FailRequest{
		Jid:      job.JID,
		LeaseId:  job.LeaseID,
		Message:  truncateUTF8(message, failMessageMaxBytes),
		Errtype:  truncateUTF8(errTypeOf(err), errtypeMaxBytes),
		Category: worqv1.FailureCategory_FAILURE_CATEGORY_TEMPORARY,
		Cause:    truncateUTF8(cause, failMessageMaxBytes),
	}
	var rl *RateLimitedError
	if IsPermanent(err) {
		req.Category = worqv1.FailureCategory_FAILURE_CATEGORY_PERMANENT
	} else if errors.As(err, &rl) {
		// Not a failure: the server gives the job back for RetryAfter, the attempt not spent.
		req.Category = worqv1.FailureCategory_FAILURE_CATEGORY_RATE_LIMITED
	}
	var pe *PermanentError
	if errors.As(err, &pe) {
		req.Code = truncateUTF8(pe.Code, failCodeMaxBytes)
	}
	var ra *retryAfterError
	var te *TemporaryError
	if errors.As(err, &ra) {
		req.RetryAfter = durationpb.New(ra.after)
	} else if errors.As(err, &te) && te.RetryAfter > 0 {
		req.RetryAfter = durationpb.New(te.RetryAfter)
	} else if rl != nil && rl.RetryAfter > 0 {
		req.RetryAfter = durationpb.New(rl.RetryAfter)
	}
	if n := job.Backtrace; n > 0 {
		bt := backtraceOf(err, fallback)
		if len(bt) > n {
			bt = bt[:n]
		}
		req.Backtrace = bt
	}
	return req
}

// report sends an Ack or Fail until the server answers: UNAVAILABLE (and other transient
// codes) are retried with backoff, and at once when a Lease stream opens; FAILED_PRECONDITION and NOT_FOUND mean the lease was
// lost, and the report is dropped.
func (w *Worker) report(t *task, kind string, success Outcome, call func(context.Context) error) Outcome {
	log := w.log.With("jid", t.job.JID, "lease_id", t.job.LeaseID, "report", kind)
	r := retrier{b: reconnectBackoff()}
	for {
		opened := w.nextStreamOpen()
		ctx, cancel := context.WithTimeout(w.reportCx, callTimeout)
		err := call(ctx)
		cancel()
		if err == nil {
			return success
		}
		// Each try finds the job's server in the map anew: after a move, the next goes to its new owner.
		w.client.mayHaveMoved(err)
		code := status.Code(err)
		switch {
		case code == codes.FailedPrecondition || code == codes.NotFound:
			log.Warn("lease lost: report dropped", "code", code, "error", status.Convert(err).Message())
			return OutcomeLeaseLost
		case w.reportCx.Err() != nil:
			log.Error("report dropped: the shutdown deadline passed", "error", err)
			return OutcomeDropped
		case code == codes.Unavailable || code == codes.DeadlineExceeded || code == codes.Aborted || code == codes.Canceled:
			delay := r.next()
			log.Warn("report failed; retrying", "code", code, "error", status.Convert(err).Message(), "delay", delay)
			timer := time.NewTimer(delay)
			select {
			case <-w.reportCx.Done():
			case <-opened:
			case <-timer.C:
			}
			timer.Stop()
			if code == codes.Unavailable {
				w.client.resetConnectBackoff()
			}
		default:
			log.Error("report refused: dropped", "code", code, "error", status.Convert(err).Message())
			return OutcomeDropped
		}
	}
}

// finish forgets a reported job.
func (w *Worker) finish(t *task, outcome Outcome, herr error) {
	t.cancel(context.Canceled)
	t.stopDeadline()
	w.mu.Lock()
	delete(w.tasks, t.job.LeaseID)
	w.mu.Unlock()
	if t.credit != nil {
		t.credit.held.Add(-1)
	}
	if h := w.opts.Hooks.OnDone; h != nil {
		h(t.job, outcome, herr)
	}
	w.pending.Done()
}

// renewLoop renews every held lease every reserve_for / 3, at once when asked (renewNow),
// and soon again after a renewal that could not reach the server.
func (w *Worker) renewLoop(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		due, next := w.dueRenewals(time.Now())
		if len(due) > 0 {
			// A Renew call is answered by one partition's server: one call (or more) per partition.
			byPartition := map[int][]*task{}
			for _, t := range due {
				p := w.partitionOfJob(t.job.JID)
				byPartition[p] = append(byPartition[p], t)
			}
			for p, tasks := range byPartition {
				for start := 0; start < len(tasks); start += maxRenewBatch {
					w.renewBatch(ctx, p, tasks[start:min(start+maxRenewBatch, len(tasks))])
				}
			}
			continue
		}
		wait := time.Hour
		if !next.IsZero() {
			wait = max(time.Until(next), time.Millisecond)
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-w.kick:
		case <-timer.C:
		}
	}
}

// dueRenewals returns the leases to renew now and the earliest later renewal.
func (w *Worker) dueRenewals(now time.Time) (due []*task, next time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, t := range w.tasks {
		deadline := t.job.ExecutionDeadline
		if t.lost || (!deadline.IsZero() && !now.Before(deadline)) {
			continue // nothing to renew: lost, or renewals cannot pass the deadline
		}
		if !t.nextRenew.After(now) {
			due = append(due, t)
			t.nextRenew = now.Add(t.interval) // provisional; renewBatch sets it
		} else if next.IsZero() || t.nextRenew.Before(next) {
			next = t.nextRenew
		}
	}
	return due, next
}

// renewBatch renews up to maxRenewBatch leases of one partition in one call to its server.
func (w *Worker) renewBatch(ctx context.Context, partition int, batch []*task) {
	req := &worqv1.RenewRequest{Leases: make([]*worqv1.LeaseRef, len(batch))}
	for i, t := range batch {
		req.Leases[i] = &worqv1.LeaseRef{Jid: t.job.JID, LeaseId: t.job.LeaseID}
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	r := w.client.routeOfPartition(partition)
	resp, err := r.worker.Renew(cctx, req)
	cancel()
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		code := status.Code(err)
		w.mu.Lock()
		first := false
		for _, t := range batch {
			first = first || t.renewFails == 0
			w.retryRenewal(t)
		}
		w.mu.Unlock()
		if first {
			w.log.Warn("renew failed; retrying", "code", code, "error", status.Convert(err).Message(), "leases", len(batch))
		}
		if code == codes.Unavailable {
			r.conn.ResetConnectBackoff()
		}
		w.client.mayHaveMoved(err)
		return
	}
	byJID := make(map[string]*worqv1.RenewResult, len(resp.GetResults()))
	for _, res := range resp.GetResults() {
		byJID[res.GetJid()] = res
	}
	var lost []*task
	w.mu.Lock()
	for _, t := range batch {
		res := byJID[t.job.JID]
		switch code := codes.Code(res.GetCode()); {
		case res == nil:
			w.retryRenewal(t)
		case code == codes.OK:
			t.renewFails = 0
			t.nextRenew = time.Now().Add(t.interval)
		case code == codes.FailedPrecondition || code == codes.NotFound:
			t.lost = true
			lost = append(lost, t)
		default:
			w.retryRenewal(t)
		}
	}
	w.mu.Unlock()
	for _, t := range lost {
		w.leaseLost(t, byJID[t.job.JID].GetMessage())
	}
}

// retryRenewal schedules a failed renewal again soon. Called with w.mu held.
func (w *Worker) retryRenewal(t *task) {
	d := min(renewRetryBackoff().delay(t.renewFails, randFloat()), t.interval)
	t.renewFails++
	t.nextRenew = time.Now().Add(d)
}

// leaseLost cancels a running handler whose lease the server refused to renew.
func (w *Worker) leaseLost(t *task, message string) {
	if t.settled.Load() {
		return // its report is on its way and will tell
	}
	w.log.Warn("lease lost while the job runs; cancelling its handler", "jid", t.job.JID, "lease_id", t.job.LeaseID, "error", message)
	t.cancel(ErrLeaseLost)
}

// renewNow makes every held lease due for renewal.
func (w *Worker) renewNow() {
	now := time.Now()
	w.mu.Lock()
	for _, t := range w.tasks {
		t.nextRenew = now
	}
	w.mu.Unlock()
	w.kickRenewer()
}

// renewAfterClose is how long after closing a stream the worker renews its leases: the
// server must have seen the stream end first, or it caps the leases after the renewal.
const renewAfterClose = 50 * time.Millisecond

// renewSoon makes every held lease due for renewal renewAfterClose from now.
func (w *Worker) renewSoon() {
	at := time.Now().Add(renewAfterClose)
	w.mu.Lock()
	for _, t := range w.tasks {
		if t.nextRenew.After(at) {
			t.nextRenew = at
		}
	}
	w.mu.Unlock()
	w.kickRenewer()
}

// revoke cancels the handler of a job the server took back (cancelled, deleted, expired).
// Its report still goes out: the server refuses it, and that frees the slot.
func (w *Worker) revoke(r *worqv1.Revoked) {
	w.mu.Lock()
	t := w.tasks[r.GetLeaseId()]
	if t != nil {
		t.lost = true
	}
	w.mu.Unlock()
	if t == nil {
		return
	}
	w.log.Info("job revoked by the server; cancelling its handler", "jid", r.GetJid(), "lease_id", r.GetLeaseId(), "reason", r.GetReason())
	t.cancel(&RevokedError{Reason: r.GetReason()})
}

func (w *Worker) kickRenewer() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// Checkpoint saves how far the job whose handler ctx is (or derives from) got, replacing its
// previous checkpoint (empty data clears it), at most 1 MiB; it returns once the server has it
// on disk. A later attempt of the job (a retry after a failure, a lapsed lease or an
// operator's retry) gets it in Job.Checkpoint. It returns a *Error: IsLeaseLost when the
// lease is gone, IsInvalidArgument for data over 1 MiB.
func Checkpoint(ctx context.Context, data []byte) error {
	t, ok := ctx.Value(taskKey{}).(*task)
	if !ok {
		return errors.New("worq: Checkpoint needs the context of a job handler")
	}
	_, err := t.w.routeOfJob(t.job.JID).worker.Checkpoint(ctx, &worqv1.CheckpointRequest{Jid: t.job.JID, LeaseId: t.job.LeaseID, Data: data})
	t.w.client.mayHaveMoved(err)
	return wrapErr(ctx, err)
}

// ReportProgress reports how far the job whose handler ctx is (or derives from) is: percent
// 0 to 100 and a message of at most 1024 chars, shown by GetJob, WatchJob and the dashboard.
func ReportProgress(ctx context.Context, percent int, message string) error {
	t, ok := ctx.Value(taskKey{}).(*task)
	if !ok {
		return errors.New("worq: ReportProgress needs the context of a job handler")
	}
	if percent < 0 || percent > 100 {
		return &Error{Code: codes.InvalidArgument, Message: fmt.Sprintf("percent: %d is not between 0 and 100", percent)}
	}
	_, err := t.w.routeOfJob(t.job.JID).worker.ReportProgress(ctx, &worqv1.ReportProgressRequest{
		Jid: t.job.JID, LeaseId: t.job.LeaseID, Percent: uint32(percent), Message: message,
	})
	t.w.client.mayHaveMoved(err)
	return wrapErr(ctx, err)
}

// Renew renews the lease of the job whose handler ctx is (or derives from) by hand, in
// addition to the automatic renewal. It returns a *Error: IsLeaseLost when the lease is
// gone (the handler's ctx is then cancelled with ErrLeaseLost).
func Renew(ctx context.Context) error {
	t, ok := ctx.Value(taskKey{}).(*task)
	if !ok {
		return errors.New("worq: Renew needs the context of a job handler")
	}
	w := t.w
	resp, err := w.routeOfJob(t.job.JID).worker.Renew(ctx, &worqv1.RenewRequest{Leases: []*worqv1.LeaseRef{{Jid: t.job.JID, LeaseId: t.job.LeaseID}}})
	if err != nil {
		w.client.mayHaveMoved(err)
		return wrapErr(ctx, err)
	}
	if len(resp.GetResults()) != 1 {
		return &Error{Code: codes.Internal, Message: fmt.Sprintf("Renew answered %d results for 1 lease", len(resp.GetResults()))}
	}
	res := resp.GetResults()[0]
	code := codes.Code(res.GetCode())
	w.mu.Lock()
	switch code {
	case codes.OK:
		t.renewFails = 0
		t.nextRenew = time.Now().Add(t.interval)
	case codes.FailedPrecondition, codes.NotFound:
		t.lost = true
	}
	w.mu.Unlock()
	if code == codes.OK {
		return nil
	}
	if code == codes.FailedPrecondition || code == codes.NotFound {
		w.leaseLost(t, res.GetMessage())
	}
	return &Error{Code: code, Message: res.GetMessage()}
}

// defaultWorkerID is "hostname-pid-random".
func defaultWorkerID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "worker"
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}
