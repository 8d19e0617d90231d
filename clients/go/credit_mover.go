package worq

import (
	"slices"
	"sync"
	"time"
)

// creditRetry is how long a waiting stream below its share waits before credit still held
// elsewhere is asked for again.
var creditRetry = 100 * time.Millisecond

// creditQuiet is how long a stream must have had nothing waiting before it gives up credit
// it does not hold.
var creditQuiet = 100 * time.Millisecond

// setLimitFunc changes one stream's limit on its server and answers how many jobs the stream
// held at that instant; ok is false when the change is not known to have reached the server
// (no stream open, or the call failed). A stream opens again with the limit it was last given.
type setLimitFunc func(limit int) (held int, ok bool)

// creditStream is one of the streams the credit is shared among: its limit is changed with
// setLimit; held, when not nil, counts the jobs the stream holds now as its holder sees them
// (received, report not yet answered). A stream without it, with nothing waiting, is lowered
// to one credit.
type creditStream struct {
	setLimit setLimitFunc
	held     func() int
}

// creditMover shares a worker's credit (its Concurrency) among its streams to several
// partitions so that the worker never holds more than that many jobs, and no credit sits
// idle on a stream with nothing ready while another has jobs waiting for credit (each stream
// reports that as it changes). The same rules as the TypeScript library's CreditMover.
//
// A stream with nothing waiting keeps what it holds (at least one credit, so the first job of
// a quiet partition starts at once); the rest goes to the streams with jobs waiting, evenly.
// A stream gives credit only once it has had nothing waiting for creditQuiet (one that never
// waited, at once), and only when that frees a good part of an even share (minimumMove):
// under an even load every stream waits by turns, and one lowered the moment it caught up
// would soon wait itself and take the credit back, two calls per move and no job the faster.
// Credit moves in two steps: the giver is lowered first and answers what it holds (nothing
// more can be pushed to it past its new limit, so only the unheld part is free), then the
// taker is raised by what was freed. The sum of what the streams may hold never exceeds the
// credit in between. Credit a lowered stream still holds comes free as its jobs are
// reported, and is asked for again while a stream waits. One move at a time; a request
// during a move runs after it.
type creditMover struct {
	streams []creditStream
	moving  sync.Mutex // held by a move or a resize: one at a time

	mu      sync.Mutex
	total   int
	budgets []int // what each stream may hold at most, as far as the sum goes: max(its limit, what it held when lowered)
	// limits is the limit each stream was last given (a lower bound when a call's fate is
	// unknown). It can be below the budget: a stream lowered while it held more keeps that in
	// its budget until a later lowering answers what it holds now.
	limits  []int
	waiting []bool
	// quietSince is when each stream last stopped waiting (zero: it never waited).
	quietSince []time.Time
	running    bool // a move goroutine runs
	again      bool // a move was asked for during one
	retry      *time.Timer
	closed     bool
	idle       chan struct{} // closed when the running move goroutine ends (tests wait on it)
}

func newCreditMover(total int, streams []creditStream) *creditMover {
	shares := evenShares(total, len(streams))
	return &creditMover{
		streams:    streams,
		total:      total,
		budgets:    shares,
		limits:     slices.Clone(shares),
		waiting:    make([]bool, len(streams)),
		quietSince: make([]time.Time, len(streams)),
	}
}

// initialLimits is each stream's first limit: an even share (the first ones get the
// remainder), at least one.
func (m *creditMover) initialLimits() []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]int(nil), m.budgets...)
}

// setWaiting records whether a ready job waits for stream i's credit, and moves credit when
// one does, or when a stream goes quiet while another waits.
func (m *creditMover) setWaiting(i int, waiting bool) {
	m.mu.Lock()
	if m.waiting[i] == waiting {
		m.mu.Unlock()
		return
	}
	m.waiting[i] = waiting
	if !waiting {
		m.quietSince[i] = time.Now()
	}
	// A stream going quiet may free credit for one still waiting (once its jobs are reported).
	due := waiting || slices.Contains(m.waiting, true)
	m.mu.Unlock()
	if due {
		m.rebalance()
	}
}

// resize gives every stream an even share of a new total, lowering before raising (so the
// sum never exceeds the smaller of the old and new totals); then credit moves again as the
// streams wait.
func (m *creditMover) resize(total int) {
	m.moving.Lock()
	m.mu.Lock()
	m.total = total
	shares := evenShares(total, len(m.streams))
	budgets := append([]int(nil), m.budgets...)
	m.mu.Unlock()
	// Those that go down first, then the others.
	for _, lowering := range []bool{true, false} {
		for i, share := range shares {
			if (share < budgets[i]) != lowering {
				continue
			}
			m.mu.Lock()
			m.limits[i] = min(m.limits[i], share)
			m.mu.Unlock()
			held, ok := m.streams[i].setLimit(share)
			m.mu.Lock()
			if !ok {
				// Not lowered (no stream open, or the call failed): it may still hold its old budget.
				held = m.budgets[i]
			} else {
				m.limits[i] = share
			}
			m.budgets[i] = max(held, share)
			m.mu.Unlock()
		}
	}
	m.moving.Unlock()
	m.rebalance()
}

// close stops moving credit (the worker stops). A move under way ends after its current call.
func (m *creditMover) close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	if m.retry != nil {
		m.retry.Stop()
	}
}

// rebalance moves credit towards the waiting streams, in a goroutine of its own; asked for
// during a move, it runs again after it.
func (m *creditMover) rebalance() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	if m.running {
		m.again = true
		return
	}
	m.running = true
	m.idle = make(chan struct{})
	go m.run(m.idle)
}

func (m *creditMover) run(idle chan struct{}) {
	defer close(idle)
	for {
		m.move()
		m.mu.Lock()
		if !m.again || m.closed {
			m.running, m.again = false, false
			m.mu.Unlock()
			return
		}
		m.again = false
		m.mu.Unlock()
	}
}

// settled returns once no move goroutine runs (for tests).
func (m *creditMover) settled() {
	for {
		m.mu.Lock()
		running, idle := m.running, m.idle
		m.mu.Unlock()
		if !running {
			return
		}
		<-idle
	}
}

func (m *creditMover) move() {
	m.moving.Lock()
	defer m.moving.Unlock()
	m.mu.Lock()
	targets := m.targets(m.kept)
	m.mu.Unlock()
	if targets == nil {
		return
	}
	for i, target := range targets {
		m.mu.Lock()
		due := m.budgets[i]-target >= m.minimumMove()
		if due {
			// Whether or not the call gets through, the stream's limit is now at most this.
			m.limits[i] = min(m.limits[i], target)
		}
		m.mu.Unlock()
		if !due {
			continue
		}
		held, ok := m.streams[i].setLimit(target)
		// Not lowered (the stream is not open, or the call failed): its budget stays as it was.
		if ok {
			m.mu.Lock()
			m.budgets[i] = max(held, target)
			m.mu.Unlock()
		}
	}
	m.mu.Lock()
	free := m.total
	for _, budget := range m.budgets {
		free -= budget
	}
	m.mu.Unlock()
	for i, target := range targets {
		m.mu.Lock()
		if !m.waiting[i] || target <= m.limits[i] {
			m.mu.Unlock()
			continue
		}
		// A stream lowered while it held more keeps that in its budget: raised again, it needs
		// new credit only beyond it. Counted before the call: whether or not it reaches the
		// server, the stream may hold this many.
		given := max(0, min(free, target-m.budgets[i]))
		free -= given
		m.budgets[i] += given
		limit := min(target, m.budgets[i])
		if limit <= m.limits[i] {
			m.mu.Unlock()
			continue
		}
		m.mu.Unlock()
		// Counted once it reached the server: one that did not is sent again by the next move.
		if _, ok := m.streams[i].setLimit(limit); ok {
			m.mu.Lock()
			m.limits[i] = limit
			m.mu.Unlock()
		}
	}
	// Credit still held elsewhere comes free as its jobs finish: ask again soon while a
	// waiting stream has less than it would with every other stream down to one.
	m.mu.Lock()
	defer m.mu.Unlock()
	short := false
	for i, target := range m.targets(func(int) int { return 1 }) {
		short = short || (m.waiting[i] && m.limits[i] < target)
	}
	if short && !m.closed {
		if m.retry != nil {
			m.retry.Stop()
		}
		m.retry = time.AfterFunc(creditRetry, m.rebalance)
	}
}

// targets is where the credit should be: what each stream with nothing waiting keeps
// (keep), the rest evenly over the waiting ones (at least one each); nil when none waits.
// m.mu is held.
func (m *creditMover) targets(keep func(i int) int) []int {
	waitingCount := 0
	for _, w := range m.waiting {
		if w {
			waitingCount++
		}
	}
	if waitingCount == 0 {
		return nil
	}
	targets := make([]int, len(m.waiting))
	rest := m.total
	for i, w := range m.waiting {
		if !w {
			targets[i] = keep(i)
			rest -= targets[i]
		}
	}
	shares := evenShares(max(waitingCount, rest), waitingCount)
	next := 0
	for i, w := range m.waiting {
		if w {
			targets[i] = shares[next]
			next++
		}
	}
	return targets
}

// minimumMove is the least a lowering frees: a quarter of an even share, at least one.
func (m *creditMover) minimumMove() int {
	return max(1, m.total/len(m.streams)/4)
}

// kept is what a stream with nothing waiting keeps: all of it if it waited just now, else
// what it holds, at least one. m.mu is held.
func (m *creditMover) kept(i int) int {
	if since := m.quietSince[i]; !since.IsZero() && time.Since(since) < creditQuiet {
		return m.budgets[i]
	}
	held := 1
	if count := m.streams[i].held; count != nil {
		held = count()
	}
	return max(1, min(m.budgets[i], held))
}
