package worq

import (
	"math/rand/v2"
	"time"
)

// backoff is exponential backoff with jitter: delay n (0-based) is initial·factor^n, capped
// at max, then spread uniformly by ±jitter (a fraction) and capped at max again.
type backoff struct {
	initial time.Duration
	max     time.Duration
	factor  float64
	jitter  float64
}

// reconnectBackoff paces Lease reconnects and report retries: about 100 ms, doubling, at most 5 s.
func reconnectBackoff() backoff {
	return backoff{initial: 100 * time.Millisecond, max: 5 * time.Second, factor: 2, jitter: 0.2}
}

// renewRetryBackoff paces renewals that could not reach the server: short (at most
// 250 ms), because a restarted server caps every lease at restart + orphan grace, and the
// renewal that lifts the cap must land inside that grace.
func renewRetryBackoff() backoff {
	return backoff{initial: 50 * time.Millisecond, max: 250 * time.Millisecond, factor: 1.5, jitter: 0.2}
}

// delay returns the n-th delay (n ≥ 0); r is a uniform random number in [0, 1).
func (b backoff) delay(n int, r float64) time.Duration {
	d := float64(b.initial)
	for i := 0; i < n && d < float64(b.max); i++ {
		d *= b.factor
	}
	if d > float64(b.max) {
		d = float64(b.max)
	}
	d *= 1 + b.jitter*(2*r-1)
	if d > float64(b.max) {
		d = float64(b.max)
	}
	if d < 0 {
		d = 0
	}
	return time.Duration(d)
}

// retrier counts consecutive failures and hands out the matching delay.
type retrier struct {
	b backoff
	n int
}

func (r *retrier) next() time.Duration {
	d := r.b.delay(r.n, rand.Float64())
	r.n++
	return d
}

func (r *retrier) reset() { r.n = 0 }

func randFloat() float64 { return rand.Float64() }
