package worq

import (
	"context"
	"sync"
	"time"

	worqv1 "github.com/worq-dev/worq/gen/go/worq/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const (
	// ackCoalesce is how long an ack waits for others to share its Report call.
	ackCoalesce = time.Millisecond
	// maxAckCalls bounds the Report calls out at once. Acks never wait behind one slow
	// call (the server frees a job's credit only when its report arrives,
	// clients/CONFORMANCE.md §5): they go out in another, up to this many.
	maxAckCalls = 4
	// maxAcksPerCall bounds one Report call's acks.
	maxAcksPerCall = 1000
)

type pendingAck struct {
	req  *worqv1.AckRequest
	done chan error // buffered: the answer is never waited for by the sender
}

// ackBatcher sends the acks of jobs that finish within a millisecond of each other in one
// Report call instead of one Ack call each: a unary call costs the server far more than an
// ack does. Each ack gets its own outcome, as an Ack call's error would be.
type ackBatcher struct {
	report func(ctx context.Context, req *worqv1.ReportRequest) (*worqv1.ReportResponse, error)

	mu      sync.Mutex
	pending []*pendingAck
	calls   int  // Report calls out
	armed   bool // a flush is scheduled
}

// ack sends req in a Report call and returns its outcome: nil, or an error with the gRPC
// status the server gave this ack (or the whole call). ctx bounds the wait.
func (b *ackBatcher) ack(ctx context.Context, req *worqv1.AckRequest) error {
	p := &pendingAck{req: req, done: make(chan error, 1)}
	b.mu.Lock()
	b.pending = append(b.pending, p)
	if !b.armed {
		b.armed = true
		time.AfterFunc(ackCoalesce, b.flush)
	}
	b.mu.Unlock()
	select {
	case err := <-p.done:
		return err
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
}

// flush sends what waits, in calls of up to maxAcksPerCall, while fewer than maxAckCalls
// are out; what is left goes when a call returns.
func (b *ackBatcher) flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.armed = false
	for len(b.pending) > 0 && b.calls < maxAckCalls {
		n := min(len(b.pending), maxAcksPerCall)
		batch := b.pending[:n:n]
		b.pending = b.pending[n:]
		b.calls++
		go b.send(batch)
	}
}

func (b *ackBatcher) send(batch []*pendingAck) {
	req := &worqv1.ReportRequest{Acks: make([]*worqv1.AckRequest, len(batch))}
	for i, p := range batch {
		req.Acks[i] = p.req
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	resp, err := b.report(ctx, req)
	cancel()
	for i, p := range batch {
		switch {
		case err != nil:
			p.done <- err
		case i >= len(resp.GetAcks()):
			p.done <- status.Error(codes.Internal, "the Report answer has fewer outcomes than acks")
		default:
			item := resp.GetAcks()[i]
			if item.GetCode() == 0 {
				p.done <- nil
			} else {
				p.done <- status.Error(codes.Code(item.GetCode()), item.GetMessage())
			}
		}
	}
	b.mu.Lock()
	b.calls--
	b.mu.Unlock()
	b.flush()
}
