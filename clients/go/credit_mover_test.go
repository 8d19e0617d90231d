package worq

import (
	"context"
	"fmt"
	"math/rand"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	worqv1 "github.com/worq-dev/worq/gen/go/worq/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// creditEngine keeps the streams of one worker as their engines do: a limit each, and the
// jobs each holds, pushed only while under the limit (with jobs ready, at once up to it, even
// before a raised limit's answer is read). It checks at every change that the streams never
// hold more than bound.
type creditEngine struct {
	t     *testing.T
	bound int

	mu      sync.Mutex
	streams []*engineStream
	broken  string
}

type engineStream struct {
	limit, held int
	ready       bool
	reachable   string // "": yes; "closed": no stream open (not ok); "failing": the call fails (not ok)
	limits      []int  // every limit it was given
}

func newCreditEngine(t *testing.T, bound int, limits []int) *creditEngine {
	e := &creditEngine{t: t, bound: bound}
	for _, limit := range limits {
		e.streams = append(e.streams, &engineStream{limit: limit})
	}
	return e
}

// change applies f to the streams, pushes, and checks the sum; e.mu is not held.
func (e *creditEngine) change(f func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	f()
	e.pushLocked()
}

func (e *creditEngine) pushLocked() {
	sum := 0
	for _, s := range e.streams {
		if s.ready {
			s.held = max(s.held, s.limit)
		}
		sum += s.held
	}
	if sum > e.bound && e.broken == "" {
		e.broken = fmt.Sprintf("the streams hold %d jobs, more than %d", sum, e.bound)
	}
}

func (e *creditEngine) setLimit(i int) setLimitFunc {
	return func(limit int) (int, bool) {
		time.Sleep(time.Duration(rand.Intn(50)) * time.Microsecond) // an answer comes later, as over the wire
		e.mu.Lock()
		defer e.mu.Unlock()
		s := e.streams[i]
		if s.reachable != "" {
			return 0, false
		}
		s.limit = limit
		s.limits = append(s.limits, limit)
		held := s.held
		e.pushLocked()
		return held, true
	}
}

// creditStreams is the mover's view of the streams; counted: their holder counts what each
// holds (a library), or cannot (a node's merged lease).
func (e *creditEngine) creditStreams(counted bool) []creditStream {
	var streams []creditStream
	for i := range e.streams {
		stream := creditStream{setLimit: e.setLimit(i)}
		if counted {
			stream.held = func() int {
				e.mu.Lock()
				defer e.mu.Unlock()
				return e.streams[i].held
			}
		}
		streams = append(streams, stream)
	}
	return streams
}

func (e *creditEngine) limits() []int {
	e.mu.Lock()
	defer e.mu.Unlock()
	var limits []int
	for _, s := range e.streams {
		limits = append(limits, s.limit)
	}
	return limits
}

func (m *creditMover) budgetSum() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	sum := 0
	for _, b := range m.budgets {
		sum += b
	}
	return sum
}

// An engine that pushes every credit at once, random reports, queues filling and draining,
// streams closed or failing (500 runs, half with held counts): the streams never hold more
// than the worker's credit (or one each, with fewer credits than streams).
func TestCreditMoverNeverLetsTheStreamsHoldMoreThanTheCredit(t *testing.T) {
	t.Parallel()
	kinds := []string{"fill", "drain", "report", "report", "tick", "tick", "closed", "failing", "reachable", "sleep"}
	for seed := range 500 {
		rng := rand.New(rand.NewSource(int64(seed)))
		credit, count := 1+rng.Intn(20), 1+rng.Intn(6)
		bound := max(credit, count)
		initial := evenShares(credit, count)
		e := newCreditEngine(t, bound, initial)
		m := newCreditMover(credit, e.creditStreams(seed%2 == 0))
		if got := m.initialLimits(); !slices.Equal(got, initial) {
			t.Fatalf("initial limits %v, want %v", got, initial)
		}
		for range rng.Intn(121) {
			kind, i := kinds[rng.Intn(len(kinds))], rng.Intn(count)
			switch kind {
			case "tick":
				m.settled()
			case "sleep":
				time.Sleep(time.Duration(rng.Intn(3)) * time.Millisecond)
			default:
				e.change(func() {
					s := e.streams[i]
					switch kind {
					case "fill":
						s.ready = true
					case "drain":
						s.ready = false
					case "report":
						s.held = max(s.held-1, 0)
					case "closed", "failing":
						s.reachable = kind
					case "reachable":
						s.reachable = ""
					}
				})
			}
			e.mu.Lock()
			waiting := make([]bool, count)
			for k, s := range e.streams {
				waiting[k] = s.ready && s.held >= s.limit
			}
			e.mu.Unlock()
			for k, w := range waiting {
				m.setWaiting(k, w)
			}
			if sum := m.budgetSum(); sum > bound {
				t.Fatalf("seed %d: budgets sum to %d, more than %d", seed, sum, bound)
			}
		}
		m.close()
		m.settled()
		e.mu.Lock()
		broken := e.broken
		e.mu.Unlock()
		if broken != "" {
			t.Fatalf("seed %d (credit %d, %d streams): %s", seed, credit, count, broken)
		}
	}
}

func TestCreditMoverGivesTheIdleStreamsCreditToTheWaitingOnes(t *testing.T) {
	t.Parallel()
	e := newCreditEngine(t, 8, []int{3, 3, 2})
	m := newCreditMover(8, e.creditStreams(false))
	if got := m.initialLimits(); !slices.Equal(got, []int{3, 3, 2}) {
		t.Fatalf("initial limits %v", got)
	}
	m.setWaiting(0, true)
	m.settled()
	if got := e.limits(); !slices.Equal(got, []int{6, 1, 1}) {
		t.Fatalf("one waiting: limits %v, want [6 1 1]", got)
	}
	// Lowered before any was raised, each once.
	for i, want := range [][]int{{6}, {1}, {1}} {
		if got := e.streams[i].limits; !slices.Equal(got, want) {
			t.Errorf("stream %d was given %v, want %v", i, got, want)
		}
	}
	m.setWaiting(2, true)
	m.settled()
	if got := e.limits(); !slices.Equal(got, []int{4, 1, 3}) {
		t.Fatalf("two waiting: limits %v, want [4 1 3]", got)
	}
	// Nothing waits: nothing moves.
	m.setWaiting(0, false)
	m.setWaiting(2, false)
	m.settled()
	if got := e.limits(); !slices.Equal(got, []int{4, 1, 3}) {
		t.Fatalf("none waiting: limits %v, want [4 1 3]", got)
	}
	m.close()
}

// loweredWhileHolding is two streams of two; stream 1, holding its two, is lowered as stream 0
// waits: limits [2 1], stream 1 still counted for two.
func loweredWhileHolding(t *testing.T) (*creditEngine, *creditMover) {
	e := newCreditEngine(t, 4, []int{2, 2})
	e.streams[1].held = 2
	m := newCreditMover(4, e.creditStreams(false))
	m.setWaiting(0, true)
	m.settled()
	// Only what stream 1 does not hold moved: nothing.
	if got := e.limits(); !slices.Equal(got, []int{2, 1}) {
		t.Fatalf("limits %v, want [2 1]", got)
	}
	return e, m
}

// reportedThenMoved reports stream 1's jobs and checks that, asked again while stream 0
// waits, what stream 1 freed moved to stream 0: limits [3 1].
func reportedThenMoved(t *testing.T, e *creditEngine, m *creditMover) {
	t.Helper()
	e.change(func() { e.streams[1].held = 0 })
	time.Sleep(creditRetry + 50*time.Millisecond)
	m.settled()
	if got := e.limits(); !slices.Equal(got, []int{3, 1}) {
		t.Fatalf("limits %v, want [3 1]", got)
	}
}

func TestCreditMoverGivesCreditALoweredStreamHeldOnceItsJobsAreReported(t *testing.T) {
	t.Parallel()
	e, m := loweredWhileHolding(t)
	reportedThenMoved(t, e, m)
	m.close()
}

// A stream lowered while it held more is raised again once it waits, within the credit it was
// counted for (a mover that kept only the count left it at its lowered limit, the credit idle,
// for good).
func TestCreditMoverRaisesALoweredStreamThatWaitsAgain(t *testing.T) {
	t.Parallel()
	e, m := loweredWhileHolding(t)
	e.change(func() { e.streams[1].held = 0 })
	m.setWaiting(1, true)
	m.settled()
	if got := e.limits(); !slices.Equal(got, []int{2, 2}) {
		t.Fatalf("both waiting: limits %v, want [2 2]", got)
	}
	m.close()
	m.settled()
}

func TestCreditMoverLeavesAQuietStreamStillWorkingWhatItHolds(t *testing.T) {
	t.Parallel()
	e := newCreditEngine(t, 4, []int{2, 2})
	e.streams[1].held = 2
	m := newCreditMover(4, e.creditStreams(true))
	m.setWaiting(0, true)
	m.settled()
	if got := e.limits(); !slices.Equal(got, []int{2, 2}) {
		t.Fatalf("limits %v, want [2 2]: stream 1 holds its two", got)
	}
	reportedThenMoved(t, e, m)
	m.close()
}

// Every stream busy, each waiting by turns with a slot or three just emptied: no credit moves,
// and a hot stream still takes the credit of streams that have gone quiet.
func TestCreditMoverMovesNoCreditUnderAnEvenLoad(t *testing.T) {
	t.Parallel()
	e := newCreditEngine(t, 200, []int{50, 50, 50, 50})
	for _, s := range e.streams {
		s.held = s.limit
	}
	var calls atomic.Int32
	streams := e.creditStreams(true)
	for i, stream := range streams {
		streams[i].setLimit = func(limit int) (int, bool) {
			calls.Add(1)
			return stream.setLimit(limit)
		}
	}
	m := newCreditMover(200, streams)
	rng := rand.New(rand.NewSource(1))
	for step := range 400 {
		i, waiting := rng.Intn(4), rng.Intn(2) == 0
		e.change(func() {
			// Waiting, it holds its whole limit; keeping up, a report has just emptied a few slots.
			s := e.streams[i]
			s.held = s.limit
			if !waiting {
				s.held -= rng.Intn(4)
			}
		})
		m.setWaiting(i, waiting)
		if step%10 == 0 {
			m.settled()
		}
	}
	m.settled()
	if n := calls.Load(); n != 0 {
		t.Fatalf("%d SetLeaseCredits calls under an even load, want none", n)
	}
	if got := e.limits(); !slices.Equal(got, []int{50, 50, 50, 50}) {
		t.Fatalf("limits %v, want [50 50 50 50]", got)
	}
	for i := range e.streams {
		e.change(func() {
			e.streams[i].held = 0
			if i == 0 {
				e.streams[i].held = 50
			}
		})
		m.setWaiting(i, i == 0)
	}
	// Within a retry or two: the streams have just stopped waiting, and the reports that
	// emptied them are not signalled, only counted.
	eventually(t, "the hot stream takes the quiet ones' credit", func() bool {
		return slices.Equal(e.limits(), []int{197, 1, 1, 1})
	})
	m.close()
	m.settled()
}

func TestCreditMoverKeepsTheBudgetOfAStreamItCouldNotReach(t *testing.T) {
	t.Parallel()
	e := newCreditEngine(t, 6, []int{2, 2, 2})
	e.streams[1].reachable, e.streams[2].reachable = "failing", "closed"
	m := newCreditMover(6, e.creditStreams(false))
	m.setWaiting(0, true)
	m.settled()
	if got := e.limits(); !slices.Equal(got, []int{2, 2, 2}) {
		t.Fatalf("limits %v, want [2 2 2]: nothing is known to be free", got)
	}
	e.change(func() { e.streams[1].reachable, e.streams[2].reachable = "", "" })
	time.Sleep(creditRetry + 50*time.Millisecond)
	m.settled()
	if got := e.limits(); !slices.Equal(got, []int{4, 1, 1}) {
		t.Fatalf("limits %v, want [4 1 1]", got)
	}
	m.close()
}

func TestCreditMoverStopsWhenClosed(t *testing.T) {
	t.Parallel()
	e := newCreditEngine(t, 6, []int{2, 2, 2})
	m := newCreditMover(6, e.creditStreams(false))
	m.close()
	m.setWaiting(0, true)
	m.settled()
	if got := e.limits(); !slices.Equal(got, []int{2, 2, 2}) {
		t.Fatalf("limits %v after close", got)
	}
}

func TestCreditMoverResizeSharesEvenlyAgainLoweringFirst(t *testing.T) {
	t.Parallel()
	e := newCreditEngine(t, 9, []int{3, 3, 2})
	var sums []int
	limits := e.creditStreams(false)
	for i, stream := range limits {
		limits[i].setLimit = func(limit int) (int, bool) {
			held, ok := stream.setLimit(limit)
			limits := e.limits()
			sums = append(sums, limits[0]+limits[1]+limits[2])
			return held, ok
		}
	}
	m := newCreditMover(8, limits)
	m.resize(4)
	if got := e.limits(); !slices.Equal(got, []int{2, 1, 1}) {
		t.Fatalf("limits %v, want [2 1 1]", got)
	}
	for _, sum := range sums {
		if sum > 8 {
			t.Fatalf("the limits summed to %d on the way down", sum)
		}
	}
	m.resize(9)
	if got := e.limits(); !slices.Equal(got, []int{3, 3, 3}) {
		t.Fatalf("limits %v, want [3 3 3]", got)
	}
	m.close()
}

// creditPartition is a partition's own server for the credit tests: each Lease stream gets an
// id and takes the messages the test puts in outbox (nil ends the stream); SetLeaseCredits
// is recorded and answers what the stream holds (jobs pushed and not yet reported).
type creditPartition struct {
	worqv1.UnimplementedWorkerServiceServer
	name      string
	partition int
	addr      string
	outbox    chan *worqv1.LeaseResponse

	mu       sync.Mutex
	leases   []*worqv1.LeaseRequest
	streamID string
	held     map[string]bool
	pushed   int
	credits  []string // "stream-id=N" per SetLeaseCredits
}

func startCreditPartition(t *testing.T, name string, partition int) *creditPartition {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &creditPartition{name: name, partition: partition, addr: lis.Addr().String(),
		outbox: make(chan *worqv1.LeaseResponse, 16), held: map[string]bool{}}
	srv := grpc.NewServer()
	worqv1.RegisterWorkerServiceServer(srv, p)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return p
}

func (p *creditPartition) Lease(req *worqv1.LeaseRequest, stream grpc.ServerStreamingServer[worqv1.LeaseResponse]) error {
	p.mu.Lock()
	p.leases = append(p.leases, req)
	id := fmt.Sprintf("%s-stream-%d", p.name, len(p.leases))
	p.streamID = id
	p.mu.Unlock()
	if err := stream.Send(&worqv1.LeaseResponse{Kind: &worqv1.LeaseResponse_Keepalive{Keepalive: &worqv1.Keepalive{StreamId: id}}}); err != nil {
		return err
	}
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case m := <-p.outbox:
			if m == nil {
				return nil
			}
			if err := stream.Send(m); err != nil {
				return err
			}
		}
	}
}

func (p *creditPartition) SetLeaseCredits(_ context.Context, req *worqv1.SetLeaseCreditsRequest) (*worqv1.SetLeaseCreditsResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.credits = append(p.credits, fmt.Sprintf("%s=%d", req.GetStreamId(), req.GetCredits()))
	if req.GetStreamId() != p.streamID {
		return nil, status.Error(codes.NotFound, "no such stream")
	}
	return &worqv1.SetLeaseCreditsResponse{Held: uint32(len(p.held))}, nil
}

func (p *creditPartition) Report(_ context.Context, req *worqv1.ReportRequest) (*worqv1.ReportResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	resp := &worqv1.ReportResponse{}
	for _, ack := range req.GetAcks() {
		delete(p.held, ack.GetJid())
		resp.Acks = append(resp.Acks, &worqv1.ItemResult{Jid: ack.GetJid()})
	}
	return resp, nil
}

func (p *creditPartition) Renew(_ context.Context, req *worqv1.RenewRequest) (*worqv1.RenewResponse, error) {
	resp := &worqv1.RenewResponse{}
	for _, ref := range req.GetLeases() {
		resp.Results = append(resp.Results, &worqv1.RenewResult{Jid: ref.GetJid()})
	}
	return resp, nil
}

// push sends n jobs on the open stream, with jids naming the partition (so that their
// reports come back here).
func (p *creditPartition) push(n int) {
	for range n {
		p.mu.Lock()
		p.pushed++
		jid := fmt.Sprintf("7c9e6679-7425-40de-944b-%09x%03x", p.pushed, 0xc00|p.partition)
		p.held[jid] = true
		p.mu.Unlock()
		p.outbox <- fakeJob(jid, time.Minute)
	}
}

func (p *creditPartition) waiting(waiting bool) {
	p.outbox <- &worqv1.LeaseResponse{Kind: &worqv1.LeaseResponse_Waiting{Waiting: &worqv1.Waiting{Waiting: waiting}}}
}

func (p *creditPartition) state() (leases []*worqv1.LeaseRequest, streamID string, credits []string, held int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.leases), p.streamID, slices.Clone(p.credits), len(p.held)
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A worker over two partitions: the stream whose jobs wait gets the credit the other does
// not use (SetLeaseCredits to each stream's own server), its handlers may use all of it, and
// a stream that reconnects opens with the limit it was last given.
func TestPartitionRoutingWorkerMovesCreditToTheStreamWhoseJobsWait(t *testing.T) {
	t.Parallel()
	p, q := startCreditPartition(t, "p", 0), startCreditPartition(t, "q", 1)
	node := startFakeServer(t, -1, nil)
	node.admin.setMap(p.addr, q.addr)
	c := dialFake(t, node)
	var mu sync.Mutex
	running, most := 0, 0
	release := make(chan struct{})
	w := NewWorker(c, WorkerOptions{Queues: []string{queueIn("a", 0, 2), queueIn("a", 1, 2)}, Concurrency: 6, Logger: testLogger(t)})
	w.Handle("fake", func(context.Context, *Job) (any, error) {
		mu.Lock()
		running++
		most = max(most, running)
		mu.Unlock()
		<-release
		mu.Lock()
		running--
		mu.Unlock()
		return "ok", nil
	})
	runningNow := func(n int) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			return running == n
		}
	}
	stop := runWorker(t, w)
	streamsOpen := func() bool {
		_, pid, _, _ := p.state()
		_, qid, _, _ := q.state()
		return pid != "" && qid != ""
	}
	eventually(t, "both streams are open", streamsOpen)
	for _, s := range []*creditPartition{p, q} {
		leases, _, _, _ := s.state()
		if len(leases) != 1 || leases[0].GetCredits() != 3 || !leases[0].GetReportWaiting() {
			t.Fatalf("%s: Lease %v, want one with 3 credits and report_waiting", s.name, leases)
		}
	}
	time.Sleep(50 * time.Millisecond) // the keepalives (with the stream ids) are read

	// P's queue has more ready than its 3: Q (nothing waiting) keeps 1, P gets 5.
	p.push(3)
	p.waiting(true)
	eventually(t, "P is raised to 5", func() bool {
		_, _, credits, _ := p.state()
		return slices.Equal(credits, []string{"p-stream-1=5"})
	})
	if _, _, credits, _ := q.state(); !slices.Equal(credits, []string{"q-stream-1=1"}) {
		t.Fatalf("Q got SetLeaseCredits %v, want q-stream-1=1", credits)
	}
	// P's handlers may use its new limit, and all of them run with Q's.
	p.push(2)
	eventually(t, "5 handlers run", runningNow(5))
	q.push(1)
	eventually(t, "6 handlers run", runningNow(6))
	close(release)
	eventually(t, "every job is reported", func() bool {
		_, _, _, ph := p.state()
		_, _, _, qh := q.state()
		return ph == 0 && qh == 0
	})
	// P's stream drops: the next one opens with the limit it was last given.
	p.outbox <- nil
	eventually(t, "P's stream reopens", func() bool {
		leases, _, _, _ := p.state()
		return len(leases) == 2
	})
	if leases, _, _, _ := p.state(); leases[1].GetCredits() != 5 || !leases[1].GetReportWaiting() {
		t.Fatalf("P's second Lease: %v, want 5 credits", leases[1])
	}
	time.Sleep(50 * time.Millisecond)
	// Now Q's jobs wait, and P's no longer: P keeps 1, Q gets 5.
	q.waiting(true)
	eventually(t, "Q is raised to 5", func() bool {
		_, _, credits, _ := q.state()
		return credits[len(credits)-1] == "q-stream-1=5"
	})
	if _, _, credits, _ := p.state(); credits[len(credits)-1] != "p-stream-2=1" {
		t.Fatalf("P got SetLeaseCredits %v, want p-stream-2=1 last", credits)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if most != 6 {
		t.Fatalf("at most %d handlers ran at once, want 6", most)
	}
}
