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

// The adaptive limit on writes in flight. A migration is background work:
// it yields to other clients and takes the server's full speed when nobody
// else needs it. Two measures decide, each from windows of the engine's own
// writes (enough of them, and long enough, to measure a rate):
//
//   - Its share of the writes the server stored. Every write to an etcd
//     advances its revision by one, and each of the engine's writes is given
//     the revision it was stored at, so the revisions between them count the
//     other clients' writes. While others write at least a tenth of what the
//     server stores (busyShare), the engine takes at most half (maxShare):
//     past it the limit comes down a step each window (reason Yielding),
//     and a step up that would pass it is not kept. Unlike a rate, the share
//     does not move when the whole server slows down or speeds up: on the
//     envtest control plane every client's rate swings together between
//     about 40% and 100% every one to two seconds, far more than a step's
//     gain, and a rule that compared the engine's rates read that swing as
//     its own gain.
//   - The throughput elasticity, (relative gain) / (relative gain in writers
//     in flight), for a step up. Measured on the engine's rate while the
//     server is otherwise idle, where it is about 1 below the knee of the
//     rate/writers curve and about 0 past it (more writers only queue): a
//     step is kept at 0.55 or more. Measured on the share while others
//     write, where a step has only to show that it still buys something
//     (busyElasticity): maxShare bounds it.
//
// Each window the rule either holds or probes: it tries a step (a quarter
// more writers, or a fifth fewer) and judges it against the window just
// before. After a refused step up it tries a step down, kept when the engine loses
// less than 0.65 of the step, so that a limit reached on an idle server comes
// down once another client needs it. A throttled or failed request (429,
// 5xx, a timeout) halves the limit at once, and a Retry-After holds every
// writer back for that long: API Priority and Fairness says so when the
// server is busy with more important work. PriorityFull keeps a step up
// while the rate rises at all, never steps down and never yields.
//
// On an idle server Background never probes below floorLimit writers: only a
// throttle takes it lower, and below it a step up is kept without asking
// for a gain. The engine's rate cannot tell the server's own work on the
// cores it shares with the writes (encoding, etcd, admission, the client
// itself on a small control plane) from another client's: on an idle 2-core
// API server the curve of rate against writers bends from the first writer,
// as if about two writers of someone else's were always in flight, and the
// elasticity alone settles at 3 to 6 writers and two thirds of the server
// (docs/benchmarks.md). Eight writers reach the knee of such a server. While
// others write, the share decides, down to busyFloorLimit writers.
const (
	// floorLimit is the fewest writers Background probes down to, and the
	// first limit.
	floorLimit = InitialLimit
	// busyFloorLimit is the fewest writers Background yields down to while
	// other clients write. Many of those do not compete for the server as
	// the engine does (leases, events, a controller that writes at the pace
	// of what it watches): their rate does not grow when the engine yields,
	// and the engine's share of the writes cannot tell them from a client
	// that waits for each write. Four writers keep a migration moving beside
	// them, and beside a client that does compete, the share settles above
	// four writers anyway (docs/benchmarks.md).
	busyFloorLimit = 4
	initialLimit   = InitialLimit
	// upStep and downStep are the probes' sizes, in quarters and fifths
	// (at least one writer).
	upStep, downStep = 1.25, 0.8
	// minElasticity is the share of a step's relative size the engine's rate
	// must follow for a Background probe to be kept. At 1/2 the limit
	// settles at a fair share, L = F beside F writers, where the foreground
	// keeps half of its rate: the edge of what a background client may
	// take, crossed by every noisy window. At 0.55 it settles near 0.8F and
	// the foreground keeps about 55%; at 0.6 the limit beside 32 or 64
	// writers sat at the simulator's 0.6F bound half of the time.
	minElasticity = 0.55
	// busyElasticity is minElasticity while other clients write, where
	// the gain is measured in the engine's share of the server's writes,
	// and maxShare bounds the limit: the share of a client beside F
	// writers that share the server by requests in flight is L/(F+L), its
	// elasticity 1 - L/(F+L), at least 1/2 up to maxShare. Below that, a
	// step is kept unless the share barely moved (the server was past its
	// knee, or the others do not compete): the bar is low enough that the
	// noise of a window does not refuse steps the share would allow.
	busyElasticity = 0.25
	// downElasticity: a step down is kept when the engine's rate falls by
	// less than this share of it. Above minElasticity on purpose: near the
	// settling point both probes measure about minElasticity, a limit one
	// step past it is kept by noise as often as one step below it, and only
	// a step down at the same threshold would hold there; a higher one
	// brings it back.
	downElasticity = 0.65
	// maxShare is the most of the API server's writes a Background run
	// takes above the floor while other clients write: more writers are
	// not tried, and fewer are taken, past it. It is measured with etcd's
	// revision (see Window.Share), which a swing of the whole server's
	// speed does not move; with requests in flight sharing the server, it
	// is reached at L = F beside F writers, the fair share.
	// maxShare is the most of the API server's writes a Background run
	// takes while other clients write: a step up past it is not kept, and
	// past it the limit comes down a step a window. It is measured with
	// etcd's revision (see Window.Share), which a swing of the whole
	// server's speed does not move. Beside F writers that share the server
	// by requests in flight it is reached at L = F when the engine's writes
	// cost what theirs do; the engine's cost more (each object is also
	// listed, decoded and converted), so it stops short of F.
	maxShare = 0.5
	// busyShare: while the engine's share of the server's writes is above
	// it, other clients write too little to be measured against (leases,
	// events), and the rule treats the server as idle: its own rate tells
	// where the knee is, and it takes no account of the share.
	busyShare = 0.9
	// holdWindows is how many windows the limit holds after a refused probe
	// or a throttle before it probes again.
	holdWindows = 3
	// minWritersStep: a probe whose writers in flight moved by less than
	// this share of the step measured nothing (the engine could not fill its
	// slots).
	minWritersStep = 0.5
	// minWindowWrites, windowWritesPerWriter and minWindowTime make a
	// window: at least 64 writes, four per writer, over at least 100 ms. The
	// rate is the mean of every write's latency (Little's law), whose noise
	// falls as the square root of the writes: with latencies spread by a
	// third, 64 writes put it near 4%, well below the gain a step is judged
	// by (an eighth).
	minWindowWrites       = 64
	windowWritesPerWriter = 4
	minWindowTime         = 100 * time.Millisecond
	// maxWindowGap bounds how far apart a probe's window and the window it
	// is compared with may lie: further apart, the population of clients
	// may have changed in between, and a change in it would read as a gain.
	maxWindowGap = 2 * time.Second
)

// InitialLimit is the adaptive limit's first value, and the fewest writers
// a Background run probes down to (a throttle takes it lower).
const InitialLimit = 8

// Priority says how much of the API server a migration takes.
type Priority string

const (
	// PriorityBackground yields to other clients: the limit grows only while
	// a step up buys at least 0.55 of its size in the engine's own rate. The
	// default.
	PriorityBackground Priority = "Background"
	// PriorityFull takes the server's full speed, for maintenance windows: the
	// limit grows while the engine's rate rises at all, up to Concurrency,
	// whatever that costs other clients.
	PriorityFull Priority = "Full"
)

// LimitReason says what the adaptive limit is doing.
type LimitReason string

const (
	// LimitProbing: the limit is a step away from the last one kept, and the
	// window being measured decides whether it stays.
	LimitProbing LimitReason = "Probing"
	// LimitHolding: the last probe was refused (or the limit is at a bound);
	// the limit waits a few windows before probing again.
	LimitHolding LimitReason = "Holding"
	// LimitBackingOff: the API server throttled or failed a write (429,
	// 5xx, timeout) and the limit was halved.
	LimitBackingOff LimitReason = "BackingOff"
	// LimitYielding: other clients write too, and the engine's writes were
	// more than maxShare of all the server stored: the limit came down a
	// step (not below the floor).
	LimitYielding LimitReason = "Yielding"
	// LimitFixed: Options.FixedConcurrency, no adaptation.
	LimitFixed LimitReason = "Fixed"
)

// Signal is what one completed write tells the limiter.
type Signal struct {
	Latency time.Duration
	// Throttled is a 429, a 5xx or a timeout: the server asks for less.
	Throttled bool
	// RetryAfter is the server's Retry-After, if any.
	RetryAfter time.Duration
	// Revision is the resourceVersion the server gave the write, when it
	// stored one and it is a number: etcd's revision, which every write to
	// that etcd, of any client, advances by one.
	Revision uint64
}

// Window is what the engine measured of its own writes over a stretch of
// time at one limit.
type Window struct {
	Start, End time.Time
	// Writes is the number of writes completed in the window.
	Writes int
	// Writers is the mean number of writes in flight over it.
	Writers float64
	// Latency is the mean latency of the writes completed in it.
	Latency time.Duration
	// Throttled: a write the window covers was throttled or failed.
	Throttled bool
	// Stored is how far etcd's revision moved over the window: the writes
	// the server stored, the engine's and every other client's (0 when the
	// revisions are unknown). OwnStored is the engine's among them.
	Stored, OwnStored int64
}

// busy reports whether other clients wrote at least 1 - busyShare of what
// the server stored over the window.
func (w Window) busy() bool {
	share := w.Share()
	return share >= 0 && share <= busyShare
}

// Share is the engine's share of the writes the server stored over the
// window, in [0, 1], or -1 when unknown. Unlike a rate, it does not move
// when the whole server slows down or speeds up: every client's writes move
// with it alike.
//
// The engine's own rate is Rate's (Little's law): counting its own writes
// in a window moves by a writer's worth at each edge. The other clients'
// are counted: their writes are the revisions the engine's did not take.
func (w Window) Share() float64 {
	d := w.End.Sub(w.Start).Seconds()
	own := w.Rate()
	if w.Stored <= 0 || d <= 0 || own <= 0 {
		return -1
	}
	others := float64(max(0, w.Stored-w.OwnStored)) / d
	return own / (own + others)
}

// Rate is the window's writes per second: by Little's law, the writes in
// flight over their mean latency when the latency is known, else the writes
// counted over the window's length. Counting is the noisier of the two: in
// a window of a few dozen writes, writes that complete together fall on one
// side of its edge or the other and move the count by a step's gain; the
// mean of every write's latency does not jump so.
func (w Window) Rate() float64 {
	if w.Latency > 0 && w.Writers > 0 {
		return w.Writers / w.Latency.Seconds()
	}
	d := w.End.Sub(w.Start).Seconds()
	if d <= 0 {
		return 0
	}
	return float64(w.Writes) / d
}

// LimitState is the rule's state from one window to the next.
type LimitState struct {
	// Limit is the number of writers allowed in flight.
	Limit  int
	Reason LimitReason
	// From is the limit before the probe when Reason is LimitProbing: the
	// probe is kept or the limit goes back to From. 0 otherwise.
	From int
	// Base is the window measured at From just before the probe.
	Base Window
	// Hold counts the windows left before the next probe.
	Hold int
	// Down: the next probe tries a step down.
	Down bool
}

// NextLimit is the limiter's rule, a pure function: the state after a window
// of writes measured at s.Limit, bounded by [1, maxLimit].
func NextLimit(s LimitState, w Window, priority Priority, maxLimit int) LimitState {
	clamp := func(n int) int { return min(max(n, 1), maxLimit) }
	floor := min(floorLimit, maxLimit)
	if w.busy() && priority != PriorityFull {
		floor = min(busyFloorLimit, maxLimit)
	}
	if w.Throttled {
		return LimitState{Limit: clamp(s.Limit / 2), Reason: LimitBackingOff, Hold: holdWindows}
	}
	switch {
	case s.Reason == LimitProbing && s.From > 0:
		if !kept(s, w, priority) {
			return LimitState{Limit: clamp(s.From), Reason: LimitHolding, Hold: holdWindows,
				Down: s.Limit > s.From && priority != PriorityFull}
		}
		// Kept: probe on in the same direction, against this window.
		s = LimitState{Limit: s.Limit, Down: s.Limit < s.From}
	case priority != PriorityFull && w.busy() && w.Share() > maxShare && s.Limit > floor:
		// More than its share of the server's writes: a fifth fewer
		// writers, down to the floor, before anything else.
		return LimitState{Limit: max(floor, probe(s.Limit, true, maxLimit)), Reason: LimitYielding, Hold: holdWindows, Down: true}
	case s.Hold > 0:
		s.Hold--
		if s.Reason != LimitBackingOff && s.Reason != LimitYielding {
			s.Reason = LimitHolding
		}
		return s
	}
	down := s.Down && priority != PriorityFull
	next := probe(s.Limit, down, maxLimit)
	if down {
		next = max(next, min(floor, s.Limit))
	}
	if next == s.Limit {
		// At a bound (the floor going down, maxLimit going up): hold, then
		// look the other way (Full never looks down).
		return LimitState{Limit: s.Limit, Reason: LimitHolding, Hold: holdWindows, Down: !down && priority != PriorityFull}
	}
	return LimitState{Limit: next, Reason: LimitProbing, From: s.Limit, Base: w, Down: down}
}

// probe returns the limit a step up (a quarter, at least one writer) or down
// (a fifth, at least one) from n, within [1, maxLimit].
func probe(n int, down bool, maxLimit int) int {
	if down {
		return max(1, min(n-1, int(float64(n)*downStep+0.5)))
	}
	return min(maxLimit, max(n+1, int(float64(n)*upStep+0.5)))
}

// kept decides a probe: w was measured at s.Limit, s.Base at s.From just
// before it.
func kept(s LimitState, w Window, priority Priority) bool {
	base := s.Base
	if base.Rate() <= 0 || base.Writers <= 0 || w.Start.Sub(base.End) > maxWindowGap {
		return false // nothing to compare with, or too long ago
	}
	writers := w.Writers/base.Writers - 1 // the step as the engine used it
	step := float64(s.Limit)/float64(s.From) - 1
	gain := w.Rate()/base.Rate() - 1
	busy := priority != PriorityFull && base.busy() && w.busy()
	if busy {
		// Other clients write: the engine's share of the server's writes
		// measures its gain, and a swing of the whole server's speed,
		// which moves every client's rate together, does not move it.
		gain = w.Share()/base.Share() - 1
	}
	if s.Limit > s.From {
		if writers < minWritersStep*step {
			return false // the engine did not use the extra slots
		}
		switch {
		case priority == PriorityFull:
			return gain > 0
		case busy:
			// The share bounds the step; the gain only has to show that
			// more writers still buy the engine something.
			return w.Share() <= maxShare && gain >= busyElasticity*writers
		case s.Limit <= floorLimit:
			return true // back up to the floor of an idle server after a throttle
		}
		return gain >= minElasticity*writers
	}
	if writers > minWritersStep*step {
		return false
	}
	// A step down (writers < 0): kept when the rate (or the share) fell by
	// less than downElasticity of the step.
	return gain > downElasticity*writers
}

// limiter gates writers: Acquire waits for a free slot under the current
// limit (and past any Retry-After), Release reports how the write went and
// measures the windows the rule decides on.
type limiter struct {
	mu       sync.Mutex
	state    LimitState
	maxLimit int
	priority Priority
	fixed    bool // never adapt (measurements)
	inFlight int
	holdTill time.Time
	wake     chan struct{} // closed and replaced whenever a slot may have freed
	now      func() time.Time

	// changed is when the limit last changed: writes started before it
	// were made under the old limit and count in no window.
	changed time.Time
	// win is the window being measured; its Start is zero until it opens.
	win Window
	// writerTime integrates writes in flight over the window since last;
	// latencies sums the latencies of the writes it counts.
	writerTime float64
	latencies  time.Duration
	last       time.Time
	// revision is the highest etcd revision a write was given; storedFrom
	// was it when the window opened, and ownStored counts the engine's
	// writes stored since (Window.Stored, Window.OwnStored).
	revision, storedFrom uint64
	ownStored            int64
	// rate is the last closed window's.
	rate float64
	// lastWindow is the last window the rule decided on.
	lastWindow Window
	// onChange is Options.OnLimit.
	onChange func(int, LimitReason, float64)
}

func newLimiter(maxLimit int, fixed bool, priority Priority) *limiter {
	if priority == "" {
		priority = PriorityBackground
	}
	l := &limiter{
		state:    LimitState{Limit: min(initialLimit, maxLimit), Reason: LimitProbing},
		maxLimit: maxLimit, priority: priority, fixed: fixed,
		wake: make(chan struct{}), now: time.Now,
	}
	if fixed {
		l.state = LimitState{Limit: maxLimit, Reason: LimitFixed}
	}
	return l
}

// Limit is the current number of writers allowed in flight.
func (l *limiter) Limit() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state.Limit
}

// Status is the limit, why it is what it is, and the engine's write rate
// over the last window measured (0 before the first).
func (l *limiter) Status() (int, LimitReason, float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state.Limit, l.state.Reason, l.rate
}

// Acquire waits until a writer may start.
func (l *limiter) Acquire(ctx context.Context) error {
	for {
		l.mu.Lock()
		now := l.now()
		hold := l.holdTill.Sub(now)
		if hold <= 0 && l.inFlight < l.state.Limit {
			l.integrate(now)
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

// integrate adds the writes in flight since the last event to the window.
func (l *limiter) integrate(now time.Time) {
	if !l.win.Start.IsZero() {
		l.writerTime += float64(l.inFlight) * now.Sub(l.last).Seconds()
	}
	l.last = now
}

// Release frees the writer's slot and feeds its outcome to the rule.
func (l *limiter) Release(s Signal) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.integrate(now)
	l.inFlight--
	if s.RetryAfter > 0 {
		if until := now.Add(s.RetryAfter); until.After(l.holdTill) {
			l.holdTill = until
		}
	}
	if s.Revision > 0 {
		// Every write stored since the window opened counts in the share,
		// whatever the limit it was sent under. A write of an object
		// already stored as it would be gives back the object's older
		// revision: the server stored nothing.
		l.revision = max(l.revision, s.Revision)
		if !l.win.Start.IsZero() && s.Revision > l.storedFrom {
			l.ownStored++
		}
	}
	// A write started before the limit last changed tells about the old
	// limit: it neither counts in a window nor halves the new limit again
	// (a burst of 429s halves once, not once per write in flight).
	if current := !now.Add(-s.Latency).Before(l.changed); !l.fixed && current {
		switch {
		case s.Throttled:
			l.decide(now, Window{Start: now, End: now, Throttled: true})
		case l.win.Start.IsZero():
			// The first write of the new limit opens the window: from
			// here on the writes in flight are the new limit's.
			l.openWindow(now)
		default:
			l.win.Writes++
			l.latencies += s.Latency
			if l.win.Writes >= max(minWindowWrites, windowWritesPerWriter*l.state.Limit) && now.Sub(l.win.Start) >= minWindowTime {
				w := l.win
				w.End = now
				w.Writers = l.writerTime / now.Sub(w.Start).Seconds()
				w.Latency = l.latencies / time.Duration(w.Writes)
				if l.storedFrom > 0 {
					// The first window has no revision to start from. The
					// writes still in flight may be stored already, within
					// this window's revisions, though the engine hears of
					// them only later: they count as its own here, not as
					// other clients' (at most the limit's worth; a window
					// has four writes per writer or more).
					w.Stored = int64(l.revision - l.storedFrom)
					w.OwnStored = min(w.Stored, l.ownStored+int64(l.inFlight))
				}
				l.rate = w.Rate()
				l.decide(now, w)
			}
		}
	}
	close(l.wake)
	l.wake = make(chan struct{})
}

// decide applies the rule to a closed window and starts the next one: at
// once when the limit stayed, with the first write of the new limit when it
// changed.
func (l *limiter) decide(now time.Time, w Window) {
	l.lastWindow = w
	next := NextLimit(l.state, w, l.priority, l.maxLimit)
	if l.onChange != nil && (next.Limit != l.state.Limit || next.Reason != l.state.Reason) {
		l.onChange(next.Limit, next.Reason, l.rate)
	}
	l.win = Window{}
	if next.Limit != l.state.Limit {
		l.changed = now
	} else {
		l.openWindow(now)
	}
	l.state = next
}

// restartWindow drops the window being measured, after the run paused (a
// wait for etcd's compaction): writes in flight before it measure nothing.
func (l *limiter) restartWindow() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.changed = l.now()
	l.win = Window{}
}

// openWindow starts measuring a window at now.
func (l *limiter) openWindow(now time.Time) {
	l.win = Window{Start: now}
	l.writerTime, l.latencies, l.last = 0, 0, now
	l.storedFrom, l.ownStored = l.revision, 0
}
