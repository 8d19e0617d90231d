package worq

// A worker on a partitioned cluster (see WithPartitionRouting): one Lease stream per
// partition its queues live in (a spread queue lives in several, and is in the stream to
// each), each to that partition's own server, and each job's reports and renewals to the
// server of the partition its jid names (the stream's). Without routing, or on a server
// that is not partitioned, one stream to the node (noPartition).

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	worqv1 "github.com/worq-dev/worq/gen/go/worq/v1"
)

// partitionOfJob is the partition whose server takes the reports and renewals of job jid:
// the one its jid names, which is the one whose stream leased it (noPartition: the node,
// when the server is not partitioned or routing is off).
func (w *Worker) partitionOfJob(jid string) int {
	if w.client.routes == nil {
		return noPartition
	}
	return w.client.routes.ofID(jid)
}

// routeOfJob is the server that takes the calls about job jid, as the partition map says now.
func (w *Worker) routeOfJob(jid string) *route {
	return w.client.routeOfPartition(w.partitionOfJob(jid))
}

// ackerOf is the ack batcher of partition's server: a Report call is answered by one
// partition, so acks of different partitions never share one.
func (w *Worker) ackerOf(partition int) *ackBatcher {
	w.mu.Lock()
	defer w.mu.Unlock()
	b := w.acks[partition]
	if b == nil {
		b = &ackBatcher{report: func(ctx context.Context, req *worqv1.ReportRequest) (*worqv1.ReportResponse, error) {
			return w.client.routeOfPartition(partition).worker.Report(ctx, req)
		}}
		w.acks[partition] = b
	}
	return b
}

// leaseAll holds one Lease stream per group of the worker's queues (see leaseGroups) until
// ctx ends or the worker goes quiet. It returns an error only for a request the server will
// never accept, after ending the other streams.
func (w *Worker) leaseAll(ctx context.Context) error {
	groups := w.leaseGroups(ctx)
	if len(groups) == 0 {
		return nil // stopped while reading the partition map
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if len(groups) > 1 {
		// The streams share Concurrency, moved to those whose jobs wait for credit.
		mover := w.shareCredit(ctx, groups)
		defer mover.close()
	}
	// Every stream may hold its credits at once: the streams' limits sum to at most
	// Concurrency (the credit mover keeps them so), or to one per stream when the queues
	// live in more partitions than that. The handlers of all the streams take slots of this
	// one pool, wherever the credit is. No handler runs before the streams open, so the
	// slots can still be replaced.
	credits := 0
	for _, g := range groups {
		credits += g.credits
	}
	w.slots = make(chan struct{}, credits)
	if len(groups) > 1 {
		w.log.Info("leasing from several partitions, one stream each", "streams", len(groups), "concurrency", w.opts.Concurrency)
	}
	ended := make(chan error, len(groups))
	for _, g := range groups {
		go func() { ended <- w.leaseLoop(ctx, g) }()
	}
	var refused error
	for range groups {
		if err := <-ended; err != nil && refused == nil {
			refused = err
			cancel()
		}
	}
	return refused
}

// leaseGroup is the queues one Lease stream takes jobs from, and where it is opened.
type leaseGroup struct {
	partition int // whose server serves the stream; noPartition: the node
	queues    []string
	credits   int
	// credit is the stream's share of Concurrency as the credit mover moves it; nil when the
	// worker holds one stream (it then has all of Concurrency).
	credit *streamCredit
}

// shareCredit makes the credit mover of the groups' streams: each group's credits become its
// first limit, and its stream reports to the mover whether jobs wait for its credit.
func (w *Worker) shareCredit(ctx context.Context, groups []leaseGroup) *creditMover {
	streams := make([]creditStream, len(groups))
	for i := range groups {
		s := &streamCredit{ctx: ctx, log: w.log, index: i}
		groups[i].credit = s
		streams[i] = creditStream{setLimit: s.setLimit, held: s.heldNow}
	}
	mover := newCreditMover(w.opts.Concurrency, streams)
	for i, limit := range mover.initialLimits() {
		groups[i].credits = limit
		groups[i].credit.limit = limit
		groups[i].credit.mover = mover
	}
	return mover
}

// streamCredit is one group's stream as the credit mover sees it: its limit, and while a
// stream is open, its id and the server it is on.
type streamCredit struct {
	ctx   context.Context // the lease loops': calls end with them
	log   *slog.Logger
	mover *creditMover
	index int
	// held counts the group's jobs received whose reports are not yet answered.
	held atomic.Int64

	mu       sync.Mutex
	limit    int    // the stream's limit, and what its next stream opens with
	streamID string // from the open stream's keepalives; "" while none is open
	server   *route // the open stream's server
}

// opening is the limit a new stream opens with: the one it was last given.
func (s *streamCredit) opening() uint32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return uint32(s.limit)
}

// opened records the open stream's id (its keepalives carry it) and server.
func (s *streamCredit) opened(streamID string, server *route) {
	s.mu.Lock()
	s.streamID, s.server = streamID, server
	s.mu.Unlock()
}

// ended forgets the stream: nothing waits for a stream that is gone, and the next says again.
func (s *streamCredit) ended() {
	s.mu.Lock()
	s.streamID, s.server = "", nil
	s.mu.Unlock()
	s.mover.setWaiting(s.index, false)
}

// heldNow is how many of the group's jobs are received and not yet reported.
func (s *streamCredit) heldNow() int { return int(s.held.Load()) }

// setLimit sets the stream's limit (and the one its next stream opens with) with
// SetLeaseCredits on the stream's own server, and answers what the stream held then; ok is
// false when no stream is open or the call failed.
func (s *streamCredit) setLimit(limit int) (held int, ok bool) {
	s.mu.Lock()
	s.limit = limit
	streamID, server := s.streamID, s.server
	s.mu.Unlock()
	if streamID == "" {
		return 0, false // not connected: the next stream opens with it
	}
	ctx, cancel := context.WithTimeout(s.ctx, callTimeout)
	defer cancel()
	resp, err := server.worker.SetLeaseCredits(ctx, &worqv1.SetLeaseCreditsRequest{StreamId: streamID, Credits: uint32(limit)})
	if err != nil {
		// NOT_FOUND: the stream ended meanwhile; the next one opens with the new limit.
		s.log.Debug("setting a Lease stream's credits failed", "credits", limit, "error", err)
		return 0, false
	}
	return int(resp.GetHeld()), true
}

// leaseGroups splits the worker's queues by partition when routing finds the server
// partitioned: one stream per partition, to that partition's own server, with its queues
// in the order given (a spread queue in the stream of each of its partitions) and (at
// first) an even share of the concurrency. Otherwise one stream to the node. It waits for
// the partition map (nil when the worker stops meanwhile).
func (w *Worker) leaseGroups(ctx context.Context) []leaseGroup {
	all := []leaseGroup{{partition: noPartition, queues: w.opts.Queues, credits: w.opts.Concurrency}}
	routes := w.client.routes
	if routes == nil {
		return all
	}
	r := retrier{b: reconnectBackoff()}
	for !routes.load(ctx) {
		delay := r.next()
		w.log.Debug("partition map not read yet; retrying", "delay", delay)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
		case <-w.quietCh:
		case <-t.C:
		}
		t.Stop()
		if w.stopped(ctx) {
			return nil
		}
		w.client.resetConnectBackoff()
	}
	if routes.partitionCount() <= 1 {
		return all
	}
	groups := groupByPartition(w.opts.Queues, routes.partitionsOf)
	for i, share := range evenShares(w.opts.Concurrency, len(groups)) {
		groups[i].credits = share
	}
	return groups
}

// groupByPartition groups queues by the partitions they live in (partitionsOf), in the
// order the partitions first appear, each group's queues in the order given. A spread queue
// is in the group of every one of its partitions: each partition's engine holds only its own
// share of the queue's jobs, and serves them only to a stream opened on it.
func groupByPartition(queues []string, partitionsOf func(queue string) []int) []leaseGroup {
	var groups []leaseGroup
	for _, queue := range queues {
		for _, p := range partitionsOf(queue) {
			i := slices.IndexFunc(groups, func(g leaseGroup) bool { return g.partition == p })
			if i < 0 {
				i = len(groups)
				groups = append(groups, leaseGroup{partition: p})
			}
			groups[i].queues = append(groups[i].queues, queue)
		}
	}
	return groups
}

// mapPollEvery is how often a worker whose stream to a partition is down reads the
// partition map again, to find the partition's new server as soon as it serves.
const mapPollEvery = time.Second

// awaitReconnect waits delay before a stream to partition's server (it was on server)
// reopens, and reports false when the worker stops meanwhile. The partition may have moved
// to another node, at a new address: meanwhile the map is read again (at once, then every
// mapPollEvery), and when it names another server the stream reopens there without waiting
// out the rest of the delay, which grows up to 5 s while the old server stays unreachable.
func (w *Worker) awaitReconnect(ctx context.Context, partition int, server *route, delay time.Duration) bool {
	timer := time.NewTimer(delay)
	defer timer.Stop()
	if partition == noPartition {
		select {
		case <-ctx.Done():
			return false
		case <-w.quietCh:
			return false
		case <-timer.C:
			return true
		}
	}
	for {
		mapRead := w.client.routes.refresh()
		select {
		case <-ctx.Done():
			return false
		case <-w.quietCh:
			return false
		case <-timer.C:
			// Reopen once the map is read, towards the partition's server as it says now.
			select {
			case <-ctx.Done():
				return false
			case <-w.quietCh:
				return false
			case <-mapRead:
				return true
			}
		case <-mapRead:
		}
		if w.client.routeOfPartition(partition) != server {
			return true
		}
		poll := time.NewTimer(mapPollEvery)
		select {
		case <-ctx.Done():
			poll.Stop()
			return false
		case <-w.quietCh:
			poll.Stop()
			return false
		case <-timer.C:
			poll.Stop()
			return true
		case <-poll.C:
		}
	}
}

// errOwnServerKnown ends a stream that went through the node once the partition's own
// server is known: it reopens there.
var errOwnServerKnown = errors.New("worq: the partition's own server is known again; moving the Lease stream there")

// untilOwnServer is the context of a stream to partition that goes through the node, the
// partition having no known server when it opened (a takeover under way): the node routes
// it to the new owner, one hop more, for as long as the stream lasts. The map is read again
// every mapPollEvery × 5, and the stream ended once it names the partition's own server.
func (w *Worker) untilOwnServer(ctx context.Context, partition int) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	go func() {
		tick := time.NewTicker(5 * mapPollEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			select {
			case <-ctx.Done():
				return
			case <-w.client.routes.refresh():
			}
			if w.client.routeOfPartition(partition) != w.client.node {
				cancel(errOwnServerKnown)
				return
			}
		}
	}()
	return ctx, func() { cancel(context.Canceled) }
}
