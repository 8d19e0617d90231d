package worq

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	worqv1 "github.com/worq-dev/worq/gen/go/worq/v1"
	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Client is a connection to a Worq server: a producer (Submit, WaitResult, Run, GetJob)
// and the transport of the Workers built on it. It is safe for concurrent use.
type Client struct {
	conn     *grpc.ClientConn
	producer worqv1.ProducerServiceClient
	worker   worqv1.WorkerServiceClient
	admin    worqv1.AdminServiceClient
	logger   *slog.Logger
}

// DialOption configures Dial.
type DialOption func(*dialConfig)

type dialConfig struct {
	creds    credentials.TransportCredentials
	block    bool
	logger   *slog.Logger
	grpcOpts []grpc.DialOption
	// err is a failed option (an unreadable TLS file): Dial returns it.
	err error
}

// WithTransportCredentials sets TLS (or other) credentials; the default is plaintext.
func WithTransportCredentials(creds credentials.TransportCredentials) DialOption {
	return func(c *dialConfig) { c.creds = creds }
}

// WithBlock makes Dial wait until the connection is up (or its context ends). By default
// Dial returns at once and connects in the background.
func WithBlock() DialOption { return func(c *dialConfig) { c.block = true } }

// WithLogger sets the logger of the client and of its workers that set none (default slog.Default()).
func WithLogger(logger *slog.Logger) DialOption { return func(c *dialConfig) { c.logger = logger } }

// WithGRPCDialOptions appends raw grpc-go dial options (interceptors, keepalive …).
func WithGRPCDialOptions(opts ...grpc.DialOption) DialOption {
	return func(c *dialConfig) { c.grpcOpts = append(c.grpcOpts, opts...) }
}

// Dial creates a client of the server at addr ("host:port"). It does not wait for the
// connection unless WithBlock is given; calls made before the server is reachable fail
// with UNAVAILABLE (a Worker retries them).
func Dial(ctx context.Context, addr string, opts ...DialOption) (*Client, error) {
	cfg := dialConfig{creds: insecure.NewCredentials()}
	for _, opt := range opts {
		opt(&cfg)
	}
	if cfg.err != nil {
		return nil, cfg.err
	}
	if cfg.logger == nil {
		cfg.logger = slog.Default()
	}
	grpcOpts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(cfg.creds),
		// Reconnect quickly: the worker paces itself; grpc-go's default backoff reaches 120 s.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           grpcbackoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 5 * time.Second},
			MinConnectTimeout: 5 * time.Second,
		}),
		// A LeaseResponse may carry several jobs of up to 1 MiB (or more) each.
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256 << 20)),
	}, cfg.grpcOpts...)
	conn, err := grpc.NewClient(addr, grpcOpts...)
	if err != nil {
		return nil, fmt.Errorf("worq: dial %s: %w", addr, err)
	}
	c := &Client{
		conn:     conn,
		producer: worqv1.NewProducerServiceClient(conn),
		worker:   worqv1.NewWorkerServiceClient(conn),
		admin:    worqv1.NewAdminServiceClient(conn),
		logger:   cfg.logger,
	}
	if cfg.block {
		conn.Connect()
		for state := conn.GetState(); state != connectivity.Ready; state = conn.GetState() {
			if !conn.WaitForStateChange(ctx, state) {
				conn.Close()
				return nil, wrapErr(ctx, ctx.Err())
			}
		}
	}
	return c, nil
}

// fail converts a stub's error (see wrapErr). After UNAVAILABLE it also ends the
// connection's reconnect backoff, so that the next call tries the server at once.
func (c *Client) fail(ctx context.Context, err error) error {
	err = wrapErr(ctx, err)
	if IsUnavailable(err) {
		c.conn.ResetConnectBackoff()
	}
	return err
}

// Close closes the connection. Stop workers first.
func (c *Client) Close() error { return c.conn.Close() }

// Conn returns the underlying gRPC connection, for the generated stubs of RPCs this
// library does not wrap (the AdminService, for example).
func (c *Client) Conn() *grpc.ClientConn { return c.conn }

// Submit creates one job of type jobType and returns its jid once it is on disk.
func (c *Client) Submit(ctx context.Context, jobType string, opts ...SubmitOption) (string, error) {
	result, err := c.SubmitDetailed(ctx, jobType, opts...)
	return result.JID, err
}

// SubmitResult is what the server made of one submit.
type SubmitResult struct {
	JID       string   // the job's id: an earlier job's when Duplicate, a waiting job's when Debounced
	Duplicate bool     // an idempotency or unique key answered an earlier job
	Debounced bool     // a waiting job with the same debounce key took this submit's data
	State     JobState // the job's state
}

// SubmitDetailed is Submit, returning the whole answer (see SubmitResult).
func (c *Client) SubmitDetailed(ctx context.Context, jobType string, opts ...SubmitOption) (SubmitResult, error) {
	js := NewJobSpec(jobType, opts...)
	spec, err := js.toProto("job")
	if err != nil {
		return SubmitResult{}, err
	}
	spec.Trace = traceOf(ctx, js.Trace)
	resp, err := c.producer.Submit(ctx, &worqv1.SubmitRequest{Job: spec})
	if err != nil {
		return SubmitResult{}, c.fail(ctx, err)
	}
	return SubmitResult{JID: resp.GetJid(), Duplicate: resp.GetDuplicate(), Debounced: resp.GetDebounced(), State: JobState(resp.GetState())}, nil
}

// BatchShape is a dependency pattern over the jobs of one SubmitBatch.
type BatchShape int32

// Batch shapes.
const (
	// ShapeNone: each job's own DependsOn only.
	ShapeNone BatchShape = BatchShape(worqv1.BatchShape_BATCH_SHAPE_UNSPECIFIED)
	// ShapeChain: each job runs after the one before it; a failure stops the rest.
	ShapeChain BatchShape = BatchShape(worqv1.BatchShape_BATCH_SHAPE_CHAIN)
	// ShapeFanIn: the last job runs after all the others.
	ShapeFanIn BatchShape = BatchShape(worqv1.BatchShape_BATCH_SHAPE_FAN_IN)
)

// BatchOption configures SubmitBatch.
type BatchOption func(*worqv1.SubmitBatchRequest)

// Shape applies a dependency pattern over the batch's jobs.
func Shape(shape BatchShape) BatchOption {
	return func(r *worqv1.SubmitBatchRequest) { r.Shape = worqv1.BatchShape(shape) }
}

// SubmitBatch creates up to 10,000 jobs atomically (all or none) and returns their jids
// in order. An invalid job fails the batch with INVALID_ARGUMENT naming `jobs[i].field`.
func (c *Client) SubmitBatch(ctx context.Context, specs []JobSpec, opts ...BatchOption) ([]string, error) {
	req := &worqv1.SubmitBatchRequest{Jobs: make([]*worqv1.JobSpec, len(specs))}
	for _, opt := range opts {
		opt(req)
	}
	for i, s := range specs {
		p, err := s.toProto(fmt.Sprintf("jobs[%d]", i))
		if err != nil {
			return nil, err
		}
		p.Trace = traceOf(ctx, s.Trace)
		req.Jobs[i] = p
	}
	resp, err := c.producer.SubmitBatch(ctx, req)
	if err != nil {
		return nil, c.fail(ctx, err)
	}
	jids := make([]string, len(resp.GetJobs()))
	for i, r := range resp.GetJobs() {
		jids[i] = r.GetJid()
	}
	return jids, nil
}

// GetJob returns a job with its state, failure and result. NOT_FOUND for an unknown jid,
// INVALID_ARGUMENT for a jid that is not a UUID.
func (c *Client) GetJob(ctx context.Context, jid string) (*Job, error) {
	resp, err := c.admin.GetJob(ctx, &worqv1.GetJobRequest{Jid: jid})
	if err != nil {
		return nil, c.fail(ctx, err)
	}
	return jobFromProto(resp.GetJob()), nil
}

// WatchJob follows a job: fn gets it as it is now, then after each state change, checkpoint
// and progress report, until it finishes (the last call carries the result); WatchJob then
// returns nil. An error from fn stops watching and is returned; so does cancelling ctx.
// NOT_FOUND for an unknown jid or one deleted meanwhile.
func (c *Client) WatchJob(ctx context.Context, jid string, fn func(*Job) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.producer.WatchJob(ctx, &worqv1.WatchJobRequest{Jid: jid})
	if err != nil {
		return c.fail(ctx, err)
	}
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return c.fail(ctx, err)
		}
		if err := fn(jobFromProto(resp.GetJob())); err != nil {
			return err
		}
	}
}

// Cancel moves a job that has not finished to CANCELLED and returns it; a running job's
// worker is told to stop (its handler's context is cancelled with a *RevokedError).
// FAILED_PRECONDITION when the job already finished, NOT_FOUND for an unknown jid.
func (c *Client) Cancel(ctx context.Context, jid string) (*Job, error) {
	resp, err := c.producer.Cancel(ctx, &worqv1.CancelRequest{Jid: jid})
	if err != nil {
		return nil, c.fail(ctx, err)
	}
	return jobFromProto(resp.GetJob()), nil
}

// DeleteJob removes a job, its result and its indexes, whatever its state (an admin call);
// a running job's worker is told to stop. NOT_FOUND for an unknown jid.
func (c *Client) DeleteJob(ctx context.Context, jid string) error {
	if _, err := c.admin.DeleteJob(ctx, &worqv1.DeleteJobRequest{Jid: jid}); err != nil {
		return c.fail(ctx, err)
	}
	return nil
}

// maxWait is the server's limit on one GetResult or Run wait.
const maxWait = time.Hour

// WaitResult waits up to timeout for the job to reach a terminal state (COMPLETED, FAILED,
// DEAD_LETTER, CANCELLED) and returns it; check job.State, then job.Result or job.Failure.
// DEADLINE_EXCEEDED (IsDeadlineExceeded) when it is not done in time; the job is left as it is.
//
// It calls ProducerService.GetResult; against a server that does not build GetResult yet
// (UNIMPLEMENTED), it polls GetJob instead.
func (c *Client) WaitResult(ctx context.Context, jid string, timeout time.Duration) (*Job, error) {
	deadline := time.Now().Add(timeout)
	for {
		// The server waits at most an hour per call; longer waits take several calls.
		wait := max(min(time.Until(deadline), maxWait), 0)
		resp, err := c.producer.GetResult(ctx, &worqv1.GetResultRequest{Jid: jid, WaitTimeout: durationpb.New(wait)})
		if err == nil {
			return jobFromProto(resp.GetJob()), nil
		}
		err = c.fail(ctx, err)
		switch {
		case Code(err) == codes.Unimplemented:
			return c.pollResult(ctx, jid, time.Until(deadline))
		case IsDeadlineExceeded(err) && ctx.Err() == nil && time.Until(deadline) > 0:
			continue
		default:
			return nil, err
		}
	}
}

// pollResult is WaitResult for servers without GetResult.
func (c *Client) pollResult(ctx context.Context, jid string, timeout time.Duration) (*Job, error) {
	deadline := time.Now().Add(timeout)
	delay := 20 * time.Millisecond
	for {
		job, err := c.GetJob(ctx, jid)
		if err != nil {
			return nil, err
		}
		if job.State.Terminal() {
			return job, nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, &Error{Code: codes.DeadlineExceeded, Message: fmt.Sprintf("job %s did not finish within %s", jid, timeout)}
		}
		t := time.NewTimer(min(delay, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, wrapErr(ctx, ctx.Err())
		case <-t.C:
		}
		delay = min(delay*2, 500*time.Millisecond)
	}
}

// Run submits a job and waits up to wait for it to finish, like Submit then WaitResult in
// one call. DEADLINE_EXCEEDED when it is not done in time; the job is left as it is.
// Against a server that does not build Run yet (UNIMPLEMENTED) it does exactly Submit +
// WaitResult.
func (c *Client) Run(ctx context.Context, jobType string, wait time.Duration, opts ...SubmitOption) (*Job, error) {
	js := NewJobSpec(jobType, opts...)
	spec, err := js.toProto("job")
	if err != nil {
		return nil, err
	}
	spec.Trace = traceOf(ctx, js.Trace)
	deadline := time.Now().Add(wait)
	var trailer metadata.MD
	resp, err := c.producer.Run(ctx, &worqv1.RunRequest{Job: spec, WaitTimeout: durationpb.New(max(min(wait, maxWait), 0))}, grpc.Trailer(&trailer))
	if err == nil {
		return jobFromProto(resp.GetJob()), nil
	}
	err = c.fail(ctx, err)
	if Code(err) != codes.Unimplemented {
		e, ok := err.(*Error)
		if !ok || len(trailer.Get("worq-jid")) == 0 {
			return nil, err
		}
		e.JID = trailer.Get("worq-jid")[0]
		if !IsDeadlineExceeded(err) || ctx.Err() != nil || time.Until(deadline) <= 0 {
			return nil, err
		}
		// A wait over the server's hour: go on waiting for the job Run created.
		job, err := c.WaitResult(ctx, e.JID, time.Until(deadline))
		if e2, ok := err.(*Error); ok {
			e2.JID = e.JID
		}
		return job, err
	}
	jid, err := c.Submit(ctx, jobType, opts...)
	if err != nil {
		return nil, err
	}
	job, err := c.WaitResult(ctx, jid, wait)
	if e, ok := err.(*Error); ok {
		e.JID = jid
	}
	return job, err
}

// CollectChildren waits up to timeout (at most 1 h) until every job spawned by parent
// (submitted with ParentJID(parent)) is finished, those spawned meanwhile included, and
// returns them with their results, oldest first; finished is false when the wait ran out.
func (c *Client) CollectChildren(ctx context.Context, parent string, timeout time.Duration) (children []*Job, finished bool, err error) {
	if timeout < 0 || timeout > maxWait {
		return nil, false, invalidArgument("timeout: must be between 0 and 1h")
	}
	resp, err := c.producer.CollectChildren(ctx, &worqv1.CollectChildrenRequest{ParentJid: parent, WaitTimeout: durationpb.New(timeout)})
	if err != nil {
		return nil, false, c.fail(ctx, err)
	}
	finished = resp.GetFinished()
	for {
		for _, p := range resp.GetChildren() {
			children = append(children, jobFromProto(p))
		}
		token := resp.GetNextPageToken()
		if token == "" {
			return children, finished, nil
		}
		if resp, err = c.producer.CollectChildren(ctx, &worqv1.CollectChildrenRequest{ParentJid: parent, PageToken: token}); err != nil {
			return nil, false, c.fail(ctx, err)
		}
	}
}
