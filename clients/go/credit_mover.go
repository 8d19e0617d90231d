package worq

import (
	"sync"
	"time"
)

// creditRetry is how long a waiting stream below its share waits before credit still held
// elsewhere is asked for again.
var creditRetry = 100 * time.Millisecond

// setLimitFunc changes one stream's limit on its server and answers how many jobs the stream
// held at that instant; ok is false when the change is not known to have reached the server
// (no stream open, or the call failed). A stream opens again with the limit it was last given.
type setLimitFunc func(limit int) (held int, ok bool)

// creditMover shares a worker's credit (its Concurrency) among its streams to several
// partitions so that the worker never holds more than that many jobs, and no credit sits
// idle on a stream with nothing ready while another has jobs waiting for credit (each stream
// reports that as it changes). The TypeScript library's CreditMover rules, without its
// two that leave a busy or just-caught-up stream its credit (not ported yet).
//
// Every stream keeps one credit, so the first job of a quiet partition starts at once; the
// rest goes to the streams with jobs waiting, evenly. Credit moves in two steps: the giver is
// lowered first and answers what it holds (nothing more can be pushed to it past its new
// limit, so only the unheld part is free), then the taker is raised by what was freed. The
// sum of what the streams may hold never exceeds the credit in between. Credit a lowered
// stream still holds comes free as its jobs are reported, and is asked for again while a
// stream waits. One move at a time; a request during a move runs after it.
type creditMover struct {
	streams []setLimitFunc
	moving  sync.Mutex // held by a move or a resize: one at a time

	mu      sync.Mutex
	total   int
	budgets []int // what each stream may hold at most, as far as the sum goes: max(its limit, what it held when lowered)
	waiting []bool
	running bool // a move goroutine runs
	again   bool // a move was asked for during one
	retry   *time.Timer
	closed  bool
	idle    chan struct{} // closed when the running move goroutine ends (tests wait on it)
}

func newCreditMover(total int, streams []setLimitFunc) *creditMover {
	return &creditMover{
		streams: streams,
		total:   total,
		budgets: evenShares(total, len(streams)),
		waiting: make([]bool, len(streams)),
	}
}

// initialLimits is each stream's first limit: an even share (the first ones get the
// remainder), at least one.
func (m *creditMover) initialLimits() []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]int(nil), m.budgets...)
}

// setWaiting records whether a ready job waits for stream i's credit, and moves credit to it
// when one does.
func (m *creditMover) setWaiting(i int, waiting bool) {
	m.mu.Lock()
	changed := m.waiting[i] != waiting
	m.waiting[i] = waiting
	m.mu.Unlock()
	if changed && waiting {
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
			held, ok := m.streams[i](share)
			m.mu.Lock()
			if !ok {
				// Not lowered (no stream open, or the call failed): it may still hold its old budget.
				held = m.budgets[i]
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
	targets := m.targets()
	m.mu.Unlock()
	if targets == nil {
		return
	}
	for i, target := range targets {
		m.mu.Lock()
		above := m.budgets[i] > target
		m.mu.Unlock()
		if !above {
			continue
		}
		held, ok := m.streams[i](target)
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
	short := false
	for i, target := range targets {
		m.mu.Lock()
		want := target - m.budgets[i]
		given := min(free, want)
		if want > 0 && given < want {
			short = true
		}
		if want <= 0 || given <= 0 {
			m.mu.Unlock()
			continue
		}
		free -= given
		// Counted before the call: whether or not it reaches the server, the stream may hold this many.
		m.budgets[i] += given
		limit := m.budgets[i]
		m.mu.Unlock()
		m.streams[i](limit)
	}
	// Credit still held by a lowered stream comes free as its jobs finish: ask again soon.
	m.mu.Lock()
	defer m.mu.Unlock()
	if short && !m.closed {
		if m.retry != nil {
			m.retry.Stop()
		}
		m.retry = time.AfterFunc(creditRetry, m.rebalance)
	}
}

// targets is where the credit should be: one for each stream with nothing waiting, the rest
// evenly over the waiting ones; nil when none waits. m.mu is held.
func (m *creditMover) targets() []int {
	waitingCount := 0
	for _, w := range m.waiting {
		if w {
			waitingCount++
		}
	}
	if waitingCount == 0 {
		return nil
	}
	idle := len(m.streams) - waitingCount
	shares := evenShares(max(waitingCount, m.total-idle), waitingCount)
	targets := make([]int, len(m.waiting))
	next := 0
	for i, w := range m.waiting {
		if w {
			targets[i] = shares[next]
			next++
		} else {
			targets[i] = 1
		}
	}
	return targets
}
