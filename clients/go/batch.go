package worq

import (
	"context"
	"time"

	worqv1 "github.com/worq-dev/worq/gen/go/worq/v1"
	"google.golang.org/protobuf/types/known/durationpb"
)

// BatchState is where a batch is.
type BatchState int32

// Batch states.
const (
	// BatchOpen takes jobs from anyone, until SealBatch.
	BatchOpen BatchState = BatchState(worqv1.BatchState_BATCH_STATE_OPEN)
	// BatchSealed takes jobs only from its own running jobs; unfinished jobs remain.
	BatchSealed BatchState = BatchState(worqv1.BatchState_BATCH_STATE_SEALED)
	// BatchSucceeded: every job COMPLETED (OnSuccess and OnComplete ran).
	BatchSucceeded BatchState = BatchState(worqv1.BatchState_BATCH_STATE_SUCCEEDED)
	// BatchFinishedWithFailures: every job finished, some not COMPLETED (OnComplete ran).
	BatchFinishedWithFailures BatchState = BatchState(worqv1.BatchState_BATCH_STATE_FINISHED_WITH_FAILURES)
)

// String is the state's name, e.g. "SUCCEEDED".
func (s BatchState) String() string {
	name := worqv1.BatchState(s).String()
	const prefix = "BATCH_STATE_"
	if len(name) > len(prefix) && name[:len(prefix)] == prefix {
		return name[len(prefix):]
	}
	return name
}

// Done reports whether every job and child batch finished (and the callbacks ran).
func (s BatchState) Done() bool { return s == BatchSucceeded || s == BatchFinishedWithFailures }

// BatchSpec describes a batch to create.
type BatchSpec struct {
	Description   string // free text, at most 1,024 chars
	ParentBatchID string // nests the batch in another: the parent is not done until this one is
	// OnSuccess is enqueued once when every job COMPLETED (and every child batch succeeded);
	// OnComplete once every job and child batch finished, whatever the outcome. Their custom
	// gets "batch_id". Nil: none.
	OnSuccess  *JobSpec
	OnComplete *JobSpec
	// OnSuccessWebhook and OnCompleteWebhook are URLs POSTed the batch at the same moments
	// (their origin must be in the server's --callback-allow). Empty: none.
	OnSuccessWebhook  string
	OnCompleteWebhook string
}

// Batch is a batch with its counts.
type Batch struct {
	ID                  string
	Description         string
	ParentBatchID       string
	State               BatchState
	Total               uint64 // jobs added so far
	Pending             uint64
	Completed           uint64
	Failed              uint64 // FAILED, DEAD_LETTER or CANCELLED
	ChildBatches        uint64
	PendingChildBatches uint64
	OnSuccessJID        string // the callback jobs, once enqueued
	OnCompleteJID       string
	CreatedAt           time.Time
	SealedAt            time.Time
	FinishedAt          time.Time
	// Proto is the batch as received.
	Proto *worqv1.Batch
}

func batchFromProto(p *worqv1.Batch) *Batch {
	if p == nil {
		return nil
	}
	return &Batch{
		ID:                  p.GetId(),
		Description:         p.GetDescription(),
		ParentBatchID:       p.GetParentBatchId(),
		State:               BatchState(p.GetState()),
		Total:               p.GetTotal(),
		Pending:             p.GetPending(),
		Completed:           p.GetCompleted(),
		Failed:              p.GetFailed(),
		ChildBatches:        p.GetChildBatches(),
		PendingChildBatches: p.GetPendingChildBatches(),
		OnSuccessJID:        p.GetOnSuccessJid(),
		OnCompleteJID:       p.GetOnCompleteJid(),
		CreatedAt:           timeOf(p.GetCreatedAt()),
		SealedAt:            timeOf(p.GetSealedAt()),
		FinishedAt:          timeOf(p.GetFinishedAt()),
		Proto:               p,
	}
}

// CreateBatch creates an open batch; jobs join it with InBatch(batch.ID). Once sealed
// (SealBatch) and every job and child batch finished, it is done and its callbacks run once.
func (c *Client) CreateBatch(ctx context.Context, spec BatchSpec) (*Batch, error) {
	req := &worqv1.BatchSpec{Description: spec.Description, ParentBatchId: spec.ParentBatchID}
	if spec.OnSuccess != nil {
		job, err := spec.OnSuccess.toProto("batch.on_success.job")
		if err != nil {
			return nil, err
		}
		req.OnSuccess = &worqv1.BatchCallback{Job: job}
	}
	if spec.OnComplete != nil {
		job, err := spec.OnComplete.toProto("batch.on_complete.job")
		if err != nil {
			return nil, err
		}
		req.OnComplete = &worqv1.BatchCallback{Job: job}
	}
	if spec.OnSuccessWebhook != "" {
		if req.OnSuccess == nil {
			req.OnSuccess = &worqv1.BatchCallback{}
		}
		req.OnSuccess.WebhookUrl = spec.OnSuccessWebhook
	}
	if spec.OnCompleteWebhook != "" {
		if req.OnComplete == nil {
			req.OnComplete = &worqv1.BatchCallback{}
		}
		req.OnComplete.WebhookUrl = spec.OnCompleteWebhook
	}
	// A child batch lives with its parent; a batch without one with its callback job, which
	// its engine stores. Two callback jobs of different queues, or none, go through the
	// node, which picks a partition that may hold both (or any).
	r := c.node
	if spec.ParentBatchID != "" {
		r = c.routeOfID(ctx, spec.ParentBatchID)
	} else if callback := soleCallbackJob(req); callback != nil {
		r = c.routeOfNewJob(ctx, callback)
	}
	resp, err := onRoute(ctx, c, r, func(r *route) (*worqv1.CreateBatchResponse, error) {
		return r.producer.CreateBatch(ctx, &worqv1.CreateBatchRequest{Batch: req})
	})
	if err != nil {
		return nil, err
	}
	return batchFromProto(resp.GetBatch()), nil
}

// soleCallbackJob is the batch's callback job when it has one, or two of one queue.
func soleCallbackJob(spec *worqv1.BatchSpec) *worqv1.JobSpec {
	first, second := spec.GetOnSuccess().GetJob(), spec.GetOnComplete().GetJob()
	if first == nil {
		return second
	}
	if second == nil || second.GetQueue() == first.GetQueue() {
		return first
	}
	return nil
}

// SealBatch closes a batch to jobs from outside it. FAILED_PRECONDITION if already sealed.
func (c *Client) SealBatch(ctx context.Context, id string) (*Batch, error) {
	resp, err := onRoute(ctx, c, c.routeOfID(ctx, id), func(r *route) (*worqv1.SealBatchResponse, error) {
		return r.producer.SealBatch(ctx, &worqv1.SealBatchRequest{Id: id})
	})
	if err != nil {
		return nil, err
	}
	return batchFromProto(resp.GetBatch()), nil
}

// GetBatch returns a batch as it is now. NOT_FOUND for an unknown id.
func (c *Client) GetBatch(ctx context.Context, id string) (*Batch, error) {
	resp, err := onRoute(ctx, c, c.routeOfID(ctx, id), func(r *route) (*worqv1.GetBatchResponse, error) {
		return r.producer.GetBatch(ctx, &worqv1.GetBatchRequest{Id: id})
	})
	if err != nil {
		return nil, err
	}
	return batchFromProto(resp.GetBatch()), nil
}

// WaitBatch waits up to timeout for the batch to be done and returns it; DEADLINE_EXCEEDED
// (IsDeadlineExceeded) when it is not done in time.
func (c *Client) WaitBatch(ctx context.Context, id string, timeout time.Duration) (*Batch, error) {
	deadline := time.Now().Add(timeout)
	for {
		wait := max(min(time.Until(deadline), maxWait), 0)
		resp, err := onRoute(ctx, c, c.routeOfID(ctx, id), func(r *route) (*worqv1.GetBatchResponse, error) {
			return r.producer.GetBatch(ctx, &worqv1.GetBatchRequest{Id: id, Wait: durationpb.New(wait)})
		})
		if err == nil {
			batch := batchFromProto(resp.GetBatch())
			if batch.State.Done() || time.Until(deadline) <= 0 {
				return batch, nil
			}
			continue
		}
		if IsDeadlineExceeded(err) && ctx.Err() == nil && time.Until(deadline) > 0 {
			continue
		}
		return nil, err
	}
}
