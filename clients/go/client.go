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
//
// On a partitioned cluster it also holds a connection to each partition's own server, and
// sends each call straight there (see WithPartitionRouting).
type Client struct {
	node   *route           // the server at the address given to Dial
	routes *partitionRoutes // nil without partition routing
	logger *slog.Logger
}

// DialOption configures Dial.
type DialOption func(*dialConfig)

type dialConfig struct {
	creds    credentials.TransportCredentials
	block    bool
	logger   *slog.Logger
	grpcOpts []grpc.DialOption
	// noRouting turns partition routing off (WithPartitionRouting(false)).
	noRouting bool
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

// WithPartitionRouting turns partition routing on or off; it is on by default. On a
// partitioned cluster (worq serve --cluster --partitions) the client reads the partition
// map once (GetServerInfo) before its first call, then sends submits to the server of
// their queue's partition, calls naming a job to the server of the job's partition, and a
// Worker's Lease streams, acks, fails and renewals to the server of its queues' partitions,
// instead of through the node at the address given (one hop fewer). A queue spread over
// several partitions (worq serve --spread-queues) is leased in the stream to each of them,
// and a job of it goes to the one its key names: the first set of its unique key, debounce
// key, group key and idempotency key, so that jobs sharing a key meet in one partition; a
// job with none of them goes to the next of the queue's partitions in turn. It reads the map
// again when a call answers UNAVAILABLE or that the job lives in another partition, and when
// a Lease stream reconnects. On a server that is not partitioned, or one that does not let
// the client read the map, everything goes to the address given, as with routing off.
func WithPartitionRouting(on bool) DialOption { return func(c *dialConfig) { c.noRouting = !on } }

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
	c := &Client{node: newRoute(conn), logger: cfg.logger}
	if !cfg.noRouting {
		// A partition's server takes the same credentials, token and options as the node.
		dial := func(address string) (*grpc.ClientConn, error) { return grpc.NewClient(address, grpcOpts...) }
		c.routes = newPartitionRoutes(c.node, dial, cfg.logger)
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

// fail converts the error of a call made on r (see wrapErr). After UNAVAILABLE it also ends
// r's reconnect backoff, so that the next call tries the server at once; and when the error
// says a partition may have moved, it reads the partition map again for the next calls.
func (c *Client) fail(ctx context.Context, r *route, err error) error {
	err = wrapErr(ctx, err)
	if IsUnavailable(err) {
		r.conn.ResetConnectBackoff()
	}
	c.mayHaveMoved(err)
	return err
}

// onRoute runs call on r. A call to a partition's server that never reached it (its
// connection was refused: the server died, or its partition moved) runs again on the node,
// which waits for the partition's next server; one that may have reached it is not sent
// again (a submit might then be made twice).
func onRoute[T any](ctx context.Context, c *Client, r *route, call func(*route) (T, error)) (T, error) {
	answer, err := call(r)
	if err == nil {
		return answer, nil
	}
	if r == c.node || !neverSent(err) {
		return answer, c.fail(ctx, r, err)
	}
	c.mayHaveMoved(err)
	answer, err = call(c.node)
	if err != nil {
		return answer, c.fail(ctx, c.node, err)
	}
	return answer, nil
}

// mayHaveMoved reads the partition map again (in the background) when err may mean that it
// is stale. On a server that is not partitioned there is nothing to read again.
func (c *Client) mayHaveMoved(err error) {
	if c.routes != nil && partitionMayHaveMoved(err) && c.routes.partitionCount() > 1 {
		c.routes.refresh()
	}
}

// resetConnectBackoff makes every connection waiting to reconnect (the node's and the
// partitions' servers') try at once.
func (c *Client) resetConnectBackoff() {
	c.node.conn.ResetConnectBackoff()
	if c.routes != nil {
		c.routes.resetConnectBackoff()
	}
}

// routeOfNewJob is where a new job is submitted: the server of its queue's partition (for a
// spread queue, the one of its partitions the job is placed in) when routing knows it, else
// the node, which places it by the same rule. The first routed call reads the partition map.
func (c *Client) routeOfNewJob(ctx context.Context, job *worqv1.JobSpec) *route {
	if c.routes == nil || !c.routes.load(ctx) {
		return c.node
	}
	return c.routes.routeOf(c.routes.ofNewJob(job))
}

// routeOfID is where a call naming a job id (or batch id) goes: the server of the partition
// the id names when routing knows it, else the node.
func (c *Client) routeOfID(ctx context.Context, id string) *route {
	if c.routes == nil || !c.routes.load(ctx) {
		return c.node
	}
	return c.routes.routeOf(c.routes.ofID(id))
}

// routeOfPartition is partition's own server as the map says now, the node when it names
// none (or for noPartition).
func (c *Client) routeOfPartition(partition int) *route {
	if c.routes == nil {
		return c.node
	}
	return c.routes.routeOf(partition)
}

// Close closes the connections. Stop workers first.
func (c *Client) Close() error {
	if c.routes != nil {
		c.routes.close()
	}
	return c.node.conn.Close()
}

// Conn returns the gRPC connection to the address given to Dial, for the generated stubs of
// RPCs this library does not wrap (the AdminService, for example). A call on it takes no
// partition routing: on a partitioned cluster that node routes it.
func (c *Client) Conn() *grpc.ClientConn { return c.node.conn }

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
	req := &worqv1.SubmitRequest{Job: spec}
	resp, err := onRoute(ctx, c, c.routeOfNewJob(ctx, spec), func(r *route) (*worqv1.SubmitResponse, error) {
		return r.producer.Submit(ctx, req)
	})
	if err != nil {
		return SubmitResult{}, err
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
// On a partitioned cluster the batch goes to the partition its first job would go to alone,
// which stores it all or none and leaves each other partition its part (a job of another
// partition may then not carry an idempotency, unique or debounce key, a batch id or a
// parent: INVALID_ARGUMENT naming the field). For a spread queue that is the one its key names, or for a job without a
// key the next in turn: the whole batch then takes that one turn, so a batch of one spread
// queue's jobs without keys stays in one partition.
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
	var first *worqv1.JobSpec // nil for an empty batch: the server refuses it wherever it goes
	if len(req.Jobs) > 0 {
		first = req.Jobs[0]
	}
	resp, err := onRoute(ctx, c, c.routeOfNewJob(ctx, first), func(r *route) (*worqv1.SubmitBatchResponse, error) {
		return r.producer.SubmitBatch(ctx, req)
	})
	if err != nil {
		return nil, err
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
	resp, err := onRoute(ctx, c, c.routeOfID(ctx, jid), func(r *route) (*worqv1.GetJobResponse, error) {
		return r.admin.GetJob(ctx, &worqv1.GetJobRequest{Jid: jid})
	})
	if err != nil {
		return nil, err
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
	// The stream's first message shows whether it reached a server: until then it is a call like any other.
	var stream worqv1.ProducerService_WatchJobClient
	var answered *route
	resp, err := onRoute(ctx, c, c.routeOfID(ctx, jid), func(r *route) (*worqv1.WatchJobResponse, error) {
		var err error
		if stream, err = r.producer.WatchJob(ctx, &worqv1.WatchJobRequest{Jid: jid}); err != nil {
			return nil, err
		}
		answered = r
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil, nil // ended before its first message: nothing to watch
		}
		return resp, err
	})
	if err != nil {
		return err
	}
	for resp != nil {
		if err := fn(jobFromProto(resp.GetJob())); err != nil {
			return err
		}
		if resp, err = stream.Recv(); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return c.fail(ctx, answered, err)
		}
	}
	return nil
}

// Cancel moves a job that has not finished to CANCELLED and returns it; a running job's
// worker is told to stop (its handler's context is cancelled with a *RevokedError).
// FAILED_PRECONDITION when the job already finished, NOT_FOUND for an unknown jid.
func (c *Client) Cancel(ctx context.Context, jid string) (*Job, error) {
	resp, err := onRoute(ctx, c, c.routeOfID(ctx, jid), func(r *route) (*worqv1.CancelResponse, error) {
		return r.producer.Cancel(ctx, &worqv1.CancelRequest{Jid: jid})
	})
	if err != nil {
		return nil, err
	}
	return jobFromProto(resp.GetJob()), nil
}

// DeleteJob removes a job, its result and its indexes, whatever its state (an admin call);
// a running job's worker is told to stop. NOT_FOUND for an unknown jid.
func (c *Client) DeleteJob(ctx context.Context, jid string) error {
	_, err := onRoute(ctx, c, c.routeOfID(ctx, jid), func(r *route) (*worqv1.DeleteJobResponse, error) {
		return r.admin.DeleteJob(ctx, &worqv1.DeleteJobRequest{Jid: jid})
	})
	return err
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
		resp, err := onRoute(ctx, c, c.routeOfID(ctx, jid), func(r *route) (*worqv1.GetResultResponse, error) {
			return r.producer.GetResult(ctx, &worqv1.GetResultRequest{Jid: jid, WaitTimeout: durationpb.New(wait)})
		})
		if err == nil {
			return jobFromProto(resp.GetJob()), nil
		}
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
	resp, err := onRoute(ctx, c, c.routeOfNewJob(ctx, spec), func(r *route) (*worqv1.RunResponse, error) {
		trailer = nil
		return r.producer.Run(ctx, &worqv1.RunRequest{Job: spec, WaitTimeout: durationpb.New(max(min(wait, maxWait), 0))}, grpc.Trailer(&trailer))
	})
	if err == nil {
		return jobFromProto(resp.GetJob()), nil
	}
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
	collect := func(req *worqv1.CollectChildrenRequest) (*worqv1.CollectChildrenResponse, error) {
		return onRoute(ctx, c, c.routeOfID(ctx, parent), func(r *route) (*worqv1.CollectChildrenResponse, error) {
			return r.producer.CollectChildren(ctx, req)
		})
	}
	resp, err := collect(&worqv1.CollectChildrenRequest{ParentJid: parent, WaitTimeout: durationpb.New(timeout)})
	if err != nil {
		return nil, false, err
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
		if resp, err = collect(&worqv1.CollectChildrenRequest{ParentJid: parent, PageToken: token}); err != nil {
			return nil, false, err
		}
	}
}
