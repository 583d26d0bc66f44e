/*
Copyright 2026 The Graduator Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package migration

import (
	"context"
	"sync"
	"time"
)

// The adaptive limit on writes in flight. The rule is TCP Vegas's idea in
// its plainest form: the average latency of a window of writes when the API
// server keeps up (the lowest window average seen) is the base; while the latency of the last window of writes stays within
// twice the base, the server is not queueing, so more writers mean more
// throughput and the limit grows by a quarter; once latency inflates past
// twice the base, writers only queue, and the limit shrinks by a tenth. A
// throttled or failed request (429, 5xx, a timeout) halves it at once, and a
// Retry-After holds every writer back for that long: API Priority and
// Fairness says so when the server is busy with more important work.
const (
	initialLimit  = 4
	growFactor    = 1.25
	shrinkFactor  = 0.9
	backoffFactor = 0.5
	latencyTarget = 2.0 // times the base latency
	// minWindowWrite is the fewest writes a window averages over. The base is
	// the lowest window average ever seen, so a small window lets a few lucky
	// writes (the first ones, before the API server's queues fill) set a base
	// no later window can come near, and the limit then shrinks for the rest
	// of the run: on one 3,000-object benchmark population the limit settled
	// at 7 with windows of 8 writes, where another run of it settled at 52.
	minWindowWrite = 32
)

// Signal is what one completed write tells the limiter.
type Signal struct {
	Latency time.Duration
	// Throttled is a 429, a 5xx or a timeout: the server asks for less.
	Throttled bool
	// RetryAfter is the server's Retry-After, if any.
	RetryAfter time.Duration
}

// window summarizes the writes completed since the limit last changed.
type window struct {
	count     int
	total     time.Duration
	throttled bool
}

// NextLimit is the limiter's rule, a pure function: the new limit after a
// window of writes, given the base (lowest) latency seen, bounded by
// [1, maxLimit].
func NextLimit(limit float64, base time.Duration, w window, maxLimit float64) float64 {
	switch {
	case w.throttled:
		limit *= backoffFactor
	case w.count == 0 || base <= 0:
	case float64(w.total)/float64(w.count) > latencyTarget*float64(base):
		limit *= shrinkFactor
	default:
		limit *= growFactor
	}
	return min(max(limit, 1), maxLimit)
}

// limiter gates writers: Acquire waits for a free slot under the current
// limit (and past any Retry-After), Release reports how the write went.
type limiter struct {
	mu       sync.Mutex
	limit    float64
	maxLimit float64
	inFlight int
	base     time.Duration
	win      window
	holdTill time.Time
	fixed    bool          // never adapt (measurements)
	wake     chan struct{} // closed and replaced whenever a slot may have freed
	now      func() time.Time
}

func newLimiter(maxLimit int, fixed bool) *limiter {
	l := &limiter{
		limit: min(initialLimit, float64(maxLimit)), maxLimit: float64(maxLimit), fixed: fixed,
		wake: make(chan struct{}), now: time.Now,
	}
	if fixed {
		l.limit = l.maxLimit
	}
	return l
}

// Limit is the current number of writers allowed in flight.
func (l *limiter) Limit() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return int(l.limit)
}

// Acquire waits until a writer may start.
func (l *limiter) Acquire(ctx context.Context) error {
	for {
		l.mu.Lock()
		hold := l.holdTill.Sub(l.now())
		if hold <= 0 && l.inFlight < int(l.limit) {
			l.inFlight++
			l.mu.Unlock()
			return nil
		}
		wake := l.wake
		l.mu.Unlock()
		var timer *time.Timer
		var expired <-chan time.Time
		if hold > 0 {
			timer = time.NewTimer(hold)
			expired = timer.C
		}
		select {
		case <-ctx.Done():
		case <-wake:
		case <-expired:
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// Hold keeps every writer from starting for d (a Retry-After).
func (l *limiter) Hold(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if until := l.now().Add(d); until.After(l.holdTill) {
		l.holdTill = until
	}
}

// Release frees the writer's slot and feeds its outcome to the rule.
func (l *limiter) Release(s Signal) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inFlight--
	l.win.count++
	l.win.total += s.Latency
	l.win.throttled = l.win.throttled || s.Throttled
	if s.RetryAfter > 0 {
		if until := l.now().Add(s.RetryAfter); until.After(l.holdTill) {
			l.holdTill = until
		}
	}
	// Decide once per window of about one write per slot, at once on a
	// throttle.
	if !l.fixed && (s.Throttled || l.win.count >= max(minWindowWrite, int(l.limit))) {
		// The base is the lowest window average seen, not the fastest single
		// write: one lucky write would make every later window look slow.
		if mean := l.win.total / time.Duration(l.win.count); !l.win.throttled && mean > 0 && (l.base == 0 || mean < l.base) {
			l.base = mean
		}
		l.limit = NextLimit(l.limit, l.base, l.win, l.maxLimit)
		l.win = window{}
	}
	close(l.wake)
	l.wake = make(chan struct{})
}
