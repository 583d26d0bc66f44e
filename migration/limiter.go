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

	"github.com/go-logr/logr"
)

// The adaptive limit on writes in flight. A migration is background work,
// and the judge is what the other clients of the API server feel: their
// own write rate, not the engine's share of the writes (an engine write
// costs the server more than a typical client's, and a client that writes
// at a fixed pace looks busy without needing any room).
//
//   - Others' writes are counted with etcd's revision: every write to an
//     etcd advances it by one, and each of the engine's writes is given the
//     revision it was stored at, so the revisions the engine's writes did
//     not take are other clients' writes (Window.Others).
//   - Their rate alone is measured the way BBR's ProbeRTT measures a path:
//     every pauseEvery the engine stops sending, lets its writes in flight
//     finish, waits pauseLength, and sends one write; the revisions between
//     its last write before the pause and that one are the others' writes
//     alone (a Paused Window).
//   - While the engine writes, the windows at one limit compare the others'
//     rate with their rate alone. Below keptMin of it the limit comes down
//     (reason Yielding) to where the others would keep keptTarget; while
//     they keep more than that, it steps up. The step is sized by the model
//     of requests sharing a server: beside the engine's L writers the others
//     keep 1/(1 + kL) of their rate, whatever k is (their number, the cost
//     of the engine's writes against theirs), so the windows tell where the
//     target lies.
//   - A client that writes at its own pace keeps its rate, but its writes
//     wait in the same queue as the engine's: the engine's own write
//     latency against its latency alone (the pause's write) judges that
//     (reason Queueing; verdict.go). The stricter of the two wins.
//   - When the others write under a tenth of the engine's rate alone
//     (leases, events), the server is idle and Background is Full.
//   - Background starts at one writer and pauses as soon as a write of its
//     own has told it etcd's revision: until a pause measured the others it
//     knows nothing of them, and its first writes are every client's queue.
//     A first pause that finds the server idle takes it to InitialLimit
//     writers (then as Full); one that finds others writing starts it
//     slowly: from one writer, the limit doubles from one window to the
//     next while the judge sees room for twice (TCP's slow start), and
//     moves by the rule from the first window that does not. Without
//     numeric resourceVersions (etcd's revisions) it never measures them
//     and holds InitialLimit writers from its first window on.
//   - The start never takes more than InitialLimit writers on the first
//     pause's word alone. That pause follows the run's own setup (the
//     /metrics read, the first page and its reads, the sweep's watch
//     starting), which the server may still be busy with: its write can
//     take longer than the engine's writes alone do and the others' rate
//     can read low, and a base taken high or a rate alone taken low lets
//     the judge see room that is not there. Past InitialLimit the limit
//     climbs only on a measure taken once the setup is over: on an idle
//     server, each window at the limit (the others' writes are counted
//     beside the engine's: a window that finds them writing stops the
//     climb and pauses at once); beside others, a second pause, due at
//     once when the slow start would pass InitialLimit or the rule would
//     climb at all, whose measures replace the first's when the two
//     disagree by more than one pause's noise (else they average). The
//     first pause itself stays: the run's reads before its first write
//     span tens of milliseconds, too few to count the others' writes by,
//     and the pause costs a quarter of a second and one write, about 3% of
//     a run of 6,000 objects.
//
// Full climbs to the most writers its limits allow, doubling each window
// (by quarters once the server has pushed back), and comes down only on
// what the server signals: a throttled or failed request (429, 5xx, a
// timeout) halves the limit, a Retry-After holds every writer back for that
// long (API Priority and Fairness says so when the server is busy with more
// important work), and a collapse halves it too: the server's throughput
// (all clients' writes stored a second, by the revision) below a quarter of
// the best seen in the run while the engine's writes take four times as
// long as then. A window's noise moves neither.
const (
	initialLimit = InitialLimit
	// upStep is a step up once the server pushed back, or while others
	// write (a quarter more writers, at least one).
	upStep = 1.25
	// keptMin is the least of their rate alone the other clients keep: below
	// it the limit comes down. It is above the 55% they are promised, a
	// margin for a window's noise. keptTarget is where the limit comes down
	// to and steps up to, above keptMin so that a window's noise near the
	// bound does not move the limit each window.
	keptMin, keptTarget = 0.57, 0.62
	// idleOthers: other clients writing under this share of the engine's
	// rate leave the server idle.
	idleOthers = 0.1
	// pauseLength is how long the engine stops sending to measure the
	// others alone, after its writes in flight finished. pauseEvery is how
	// often while others write (a pause costs about pauseLength plus a
	// write's latency: under 4% of a run), and maxPauseEvery while they do
	// not: each pause that finds the server idle doubles the interval up to
	// it. A client that arrives is seen sooner than that when it writes a
	// tenth of the engine's rate beside it (the next window asks for a
	// pause); a client the engine starves below that waits for the next
	// pause, at most maxPauseEvery.
	pauseLength   = 250 * time.Millisecond
	pauseEvery    = 10 * time.Second
	maxPauseEvery = 40 * time.Second
	// collapse: a server whose throughput falls below 1/collapse of its
	// best is failing, not busy.
	collapse = 4
	// holdWindows is how many windows the limit holds after a throttle
	// before it climbs again.
	holdWindows = 3
	// minWindowWrites, windowWritesPerWriter and minWindowTime make a
	// window: at least 64 writes, four per writer, over at least 100 ms. The
	// engine's rate is the mean of every write's latency (Little's law),
	// whose noise falls as the square root of the writes: with latencies
	// spread by a third, 64 writes put it near 4%.
	minWindowWrites       = 64
	windowWritesPerWriter = 4
	minWindowTime         = 100 * time.Millisecond
)

// InitialLimit is the adaptive limit's first value with priority Full, and
// Background's once its first pause found the server idle (or its first
// window, without etcd's revisions to pause by).
const InitialLimit = 8

// StartLimit is Background's limit until its first pause: one writer, so
// that the writes it sends knowing nothing of the others queue no one.
const StartLimit = 1

// Priority says how much of the API server a migration takes.
type Priority string

const (
	// PriorityBackground keeps other clients' write rate at 55% or more of
	// their rate without the migration, measured by pausing it briefly now
	// and then, and its own write latency within 1.7 times its latency
	// alone (every client's writes wait in that queue). It starts at one
	// writer and pauses after its first write, so that it measured the
	// others before it takes more; beside others it takes no more than
	// InitialLimit writers until a second pause measured them again, clear
	// of the run's own setup. On a server others barely write to, it is
	// PriorityFull from its first pause on. The default.
	PriorityBackground Priority = "Background"
	// PriorityFull takes the server's full speed, for maintenance windows:
	// the limit climbs to Concurrency and comes down only when the server
	// throttles, fails or collapses, whatever that costs other clients.
	PriorityFull Priority = "Full"
)

// LimitReason says what the adaptive limit is doing.
type LimitReason string

const (
	// LimitProbing: the limit is stepping up towards Concurrency.
	LimitProbing LimitReason = "Probing"
	// LimitHolding: the limit is at Concurrency, where other clients keep
	// about keptTarget of their rate, or waits after a throttle.
	LimitHolding LimitReason = "Holding"
	// LimitBackingOff: the API server throttled or failed a write (429,
	// 5xx, timeout), or its throughput collapsed, and the limit was halved.
	LimitBackingOff LimitReason = "BackingOff"
	// LimitYielding: other clients wrote less than 57% of their rate alone,
	// and the limit came down.
	LimitYielding LimitReason = "Yielding"
	// LimitQueueing: while other clients wrote, the engine's own writes took
	// more than 1.7 times as long as one write of its alone (every client's
	// writes wait in that queue), and the limit came down.
	LimitQueueing LimitReason = "Queueing"
	// LimitPausing: the engine paused its writes for a moment to measure the
	// other clients' write rate alone.
	LimitPausing LimitReason = "Pausing"
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

// Window is what the engine measured over a stretch of time at one limit,
// or while it paused.
type Window struct {
	Start, End time.Time
	// Paused: the engine sent no write over the window but the last, which
	// ends it: the others wrote alone.
	Paused bool
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

// Others is the other clients' writes per second over the window, counted
// by the revisions the engine's writes did not take, or -1 when unknown.
func (w Window) Others() float64 {
	d := w.End.Sub(w.Start).Seconds()
	if w.Stored <= 0 || d <= 0 {
		return -1
	}
	return float64(max(0, w.Stored-w.OwnStored)) / d
}

// Rate is the engine's writes per second over the window: by Little's law,
// the writes in flight over their mean latency when the latency is known,
// else the writes counted over the window's length. Counting is the
// noisier of the two: in a window of a few dozen writes, writes that
// complete together fall on one side of its edge or the other; the mean of
// every write's latency does not jump so.
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

// throughput is every client's writes stored per second over the window,
// or the engine's own when the revisions are unknown.
func (w Window) throughput() float64 {
	if others := w.Others(); others >= 0 {
		return others + w.Rate()
	}
	return w.Rate()
}

// LimitState is the rule's state from one window to the next.
type LimitState struct {
	// Limit is the number of writers allowed in flight.
	Limit  int
	Reason LimitReason
	// Hold counts the windows left before the limit climbs again after a
	// throttle.
	Hold int
	// Gentle: the server pushed back once; the limit climbs by quarters,
	// not by doubling.
	Gentle bool
	// Measured: a pause measured the others alone. Alone is their write
	// rate then, the mean of the last two pauses (a pause is a quarter of a
	// second, and a server's speed swings); Last is the last pause's. Idle: the last
	// pause found them under a tenth of the engine's rate.
	Measured    bool
	Alone, Last float64
	Idle        bool
	// Base is the engine's write latency alone: the pauses' write, sent
	// with no other write of its own in flight, the mean of the last
	// basePauses (one write is noisier than a window of them); 0 until a
	// pause measured it. BasePauses counts the pauses it is the mean of.
	Base       time.Duration
	BasePauses int
	// SlowStart: the first pause found others writing; the limit doubles
	// from each window to the next while the judge sees room for twice.
	SlowStart bool
	// pauses counts the pauses that measured the others, up to two: the
	// first one's measures follow the run's setup (climbMeasured).
	pauses int
	// AtLimit is what the windows at the current limit measured.
	AtLimit AtLimit
	// PauseEvery is how long after the last pause the next one is due: 0
	// at once, below 0 never.
	PauseEvery time.Duration
	// Rate is the engine's rate over the last window, Best the most writes
	// the server stored a second (every client's) over any window, and
	// BestLatency the engine's mean latency then.
	Rate, Best  float64
	BestLatency time.Duration
	// bestWriters is the engine's writes in flight then.
	bestWriters float64
}

// collapsed reports whether the server's throughput fell below 1/collapse
// of its best while the engine's writes took collapse times longer than
// then for as many writes in flight: a server failing, not one busy with
// other clients (its throughput holds) nor an engine short of objects to
// write (its latency holds). Past the server's knee a write's latency grows
// with the writes in flight, so the latency of a best window at 8 writers
// says nothing of a failure at 64: it is scaled by the writers first, or a
// swing of the server's at 64 writers would read as a collapse and halve
// the limit.
func (s LimitState) collapsed(w Window) bool {
	t := w.throughput()
	if s.Best <= 0 || t <= 0 || t >= s.Best/collapse || s.BestLatency <= 0 {
		return false
	}
	expected := float64(s.BestLatency)
	if s.bestWriters > 0 && w.Writers > s.bestWriters {
		expected *= w.Writers / s.bestWriters
	}
	return float64(w.Latency) > collapse*expected
}

// NextLimit is the limiter's rule, a pure function: the state after a
// window measured at s.Limit (or while paused), bounded by [1, maxLimit].
func NextLimit(s LimitState, w Window, priority Priority, maxLimit int) LimitState {
	next := nextLimit(s, w, priority, maxLimit)
	if next.Limit != s.Limit {
		next.AtLimit = AtLimit{} // the windows measured the old limit
	}
	return next
}

func nextLimit(s LimitState, w Window, priority Priority, maxLimit int) LimitState {
	switch {
	case w.Throttled:
		return s.backOff(maxLimit)
	case w.Paused:
		return s.paused(w, priority, maxLimit)
	}
	s.Rate = w.Rate()
	full := priority == PriorityFull || (s.Measured && s.Idle)
	if full && s.collapsed(w) {
		return s.backOff(maxLimit)
	}
	if t := w.throughput(); t > s.Best {
		s.Best, s.BestLatency, s.bestWriters = t, w.Latency, w.Writers
	}
	if priority == PriorityFull {
		s.PauseEvery = -1
	}
	if s.Hold > 0 {
		s.Hold--
		return s
	}
	switch {
	case full:
		if s.Idle && w.Others() >= idleOthers*w.Rate() {
			// Someone else writes now: measure them before taking more.
			s.PauseEvery, s.Reason = 0, LimitHolding
			return s
		}
		return s.climb(maxLimit, maxLimit, !s.Gentle)
	case !s.Measured && s.Limit < initialLimit:
		// A window closed before any pause: no revision to pause by.
		s.Limit, s.Reason = min(initialLimit, maxLimit), LimitProbing
		return s
	case !s.Measured || w.Others() < 0:
		s.Reason = LimitHolding // nothing to judge by yet
		return s
	}
	s.AtLimit = s.AtLimit.add(w, s.Limit)
	v := judge(s.AtLimit, s.Alone, s.Base)
	if s.SlowStart {
		if !v.harmed() && v.writers >= 2*float64(s.Limit) {
			return s.climbMeasured(maxLimit, maxLimit, true)
		}
		s.SlowStart = false // from here, by the rule
	}
	if s.AtLimit.Windows < minJudged && !v.severe {
		return s // one window at a limit is the server's swing as much as the engine's
	}
	if v.harmed() {
		s.Limit = max(1, min(s.Limit-1, int(max(v.writers, s.AtLimit.Writers/2))))
		s.Reason = v.reason
		return s
	}
	return s.climbMeasured(int(v.writers+0.5), maxLimit, false)
}

// climbMeasured is climb on measures taken after the run's setup: until a
// second pause, the slow start doubles up to InitialLimit, and any other
// climb holds the limit and makes a pause due at once.
func (s LimitState) climbMeasured(upTo, maxLimit int, double bool) LimitState {
	if s.pauses < 2 {
		if upTo > s.Limit && (!s.SlowStart || s.Limit >= initialLimit) {
			s.PauseEvery, s.Reason = 0, LimitHolding
			return s
		}
		upTo = min(upTo, initialLimit)
	}
	return s.climb(upTo, maxLimit, double)
}

// targetWriters is where the others would keep keptTarget of their rate
// alone, given that they kept kept of it beside writers of the engine's.
// Requests in flight share a server: beside L writers of the engine's the
// others keep 1 / (1 + kL) of their rate, for a k of their own (how many
// they are, what the engine's writes cost against theirs), so 1/kept - 1
// grows in proportion to L.
func targetWriters(writers, kept float64) float64 {
	slowdown := 1/kept - 1
	if slowdown <= 0 {
		return 2 * writers // unhurt: no bound from here
	}
	return writers * (1/keptTarget - 1) / slowdown
}

// climb steps the limit up towards upTo, doubling it or by a quarter, or
// holds it there.
func (s LimitState) climb(upTo, maxLimit int, double bool) LimitState {
	factor := upStep
	if double {
		factor = 2
	}
	next := min(upTo, maxLimit, max(s.Limit+1, int(float64(s.Limit)*factor+0.5)))
	if next <= s.Limit {
		s.Reason = LimitHolding
		return s
	}
	s.Limit, s.Reason = next, LimitProbing
	return s
}

// backOff halves the limit and holds it there for a few windows.
func (s LimitState) backOff(maxLimit int) LimitState {
	s.Limit = min(max(s.Limit/2, 1), maxLimit)
	s.Reason, s.Hold, s.Gentle, s.SlowStart = LimitBackingOff, holdWindows, true, false
	return s
}

// paused takes in a pause's measure of the others' rate alone, and sets
// when the next pause is due: sooner while they write, later while the
// server is idle. The first pause sets where the limit starts from.
func (s LimitState) paused(w Window, priority Priority, maxLimit int) LimitState {
	alone := w.Others()
	if alone < 0 || priority == PriorityFull {
		return s
	}
	first := !s.Measured
	if s.pauses == 1 && (setupMarked(float64(s.Base), float64(w.Latency)) || setupMarked(alone, s.Last)) {
		// The first pause's measures followed the run's setup, and the
		// second's disagree: they replace them rather than average.
		s.Measured, s.Base, s.BasePauses, s.AtLimit = false, 0, 0, AtLimit{}
	}
	s.pauses = min(s.pauses+1, 2)
	s.Alone = alone
	if s.Measured {
		s.Alone = (alone + s.Last) / 2
	}
	s.Measured, s.Last = true, alone
	if w.Latency > 0 {
		s.BasePauses = min(s.BasePauses+1, basePauses)
		s.Base += (w.Latency - s.Base) / time.Duration(s.BasePauses)
	}
	rate := s.Rate
	if rate == 0 && w.Latency > 0 {
		// No window yet (the first pause comes after the first write):
		// one writer's rate, the pause's write. Under the engine's rate
		// at more writers, so a server may be taken for busy at first;
		// the next pause, from a window's rate, corrects it.
		rate = 1 / w.Latency.Seconds()
	}
	wasIdle := s.Idle
	s.Idle = alone < idleOthers*rate
	if first {
		s.SlowStart = !s.Idle
		if s.Idle && s.Limit < initialLimit {
			s.Limit, s.Reason = min(initialLimit, maxLimit), LimitProbing
		}
	}
	if s.Idle {
		s.SlowStart = false
	}
	switch {
	case !s.Idle:
		s.PauseEvery = pauseEvery
	case wasIdle:
		s.PauseEvery = min(maxPauseEvery, 2*max(s.PauseEvery, pauseEvery))
	default:
		s.PauseEvery = 2 * pauseEvery
	}
	if s.Reason == LimitPausing {
		s.Reason = LimitHolding
	}
	return s
}

// setupMarked reports whether two pauses' measures of one thing disagree by
// more than setupSpread either way: more than the noise of one write or of
// a quarter-second's count, the mark of a server still busy with the run's
// setup at the first. Unknown measures (0, -1) never disagree.
func setupMarked(first, second float64) bool {
	if first <= 0 || second <= 0 {
		return false
	}
	return first > setupSpread*second || second > setupSpread*first
}

// setupSpread is how far apart two pauses' measures may lie and still be
// averaged.
const setupSpread = 1.5

// pausePhase is where the limiter is in a pause.
type pausePhase int

const (
	running  pausePhase = iota
	draining            // no write starts; the writes in flight finish
	paused              // none in flight: the others write alone
	resuming            // one write in flight, whose revision ends the pause
)

// limiter gates writers: Acquire waits for a free slot under the current
// limit (and past any Retry-After or pause), Release reports how the write
// went and measures the windows the rule decides on.
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
	// revision is the highest etcd revision a write was given, revisionAt
	// when; storedFrom was it when the window opened, and ownStored counts
	// the engine's writes stored since (Window.Stored, Window.OwnStored).
	revision, storedFrom uint64
	revisionAt           time.Time
	ownStored            int64
	// closing is the last window closed, waiting for the writes that were
	// in flight when it closed.
	closing *closingWindow
	// phase is where a pause is; pauseFrom and pauseStart the revision and
	// time it measures from, pauseUntil when its write may start, lastPause
	// when the last one ended.
	phase                             pausePhase
	pauseFrom                         uint64
	pauseStart, pauseUntil, lastPause time.Time
	// rate is the last closed window's.
	rate float64
	// lastWindow is the last window the rule decided on.
	lastWindow Window
	// onChange is Options.OnLimit.
	onChange func(int, LimitReason, float64)
	// log tells what the pauses measured (logPause); the zero Logger
	// discards.
	log logr.Logger
}

// closingWindow is a window closed at revision to while writes were in
// flight: those stored at or before to, which the engine hears of only
// later, are its own, not other clients'. It is decided once as many
// writes as were in flight have come back (a write sent after it closed is
// stored after to).
type closingWindow struct {
	w        Window
	from, to uint64
	own      int64
	left     int
}

func newLimiter(maxLimit int, fixed bool, priority Priority) *limiter {
	if priority == "" {
		priority = PriorityBackground
	}
	start := StartLimit
	if priority == PriorityFull {
		start = initialLimit
	}
	l := &limiter{
		state:    LimitState{Limit: min(start, maxLimit), Reason: LimitProbing},
		maxLimit: maxLimit, priority: priority, fixed: fixed,
		wake: make(chan struct{}), now: time.Now,
	}
	if priority == PriorityFull {
		l.state.PauseEvery = -1
	}
	if fixed {
		l.state = LimitState{Limit: maxLimit, Reason: LimitFixed, PauseEvery: -1}
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
		ok, hold := l.tryAcquire()
		if ok {
			return nil
		}
		l.mu.Lock()
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

// tryAcquire takes a slot if a writer may start now; if not, wait is how
// long until one may (a Retry-After, a pause), or 0 until a write in flight
// comes back.
func (l *limiter) tryAcquire() (ok bool, wait time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if hold := l.holdTill.Sub(now); hold > 0 {
		return false, hold
	}
	switch l.phase {
	case draining, resuming:
		return false, 0
	case paused:
		if wait := l.pauseUntil.Sub(now); wait > 0 {
			return false, wait
		}
		l.phase = resuming // this write ends the pause
	default:
		if l.inFlight >= l.state.Limit {
			return false, 0
		}
	}
	l.integrate(now)
	l.inFlight++
	return true, 0
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
	l.count(now, s)
	switch {
	case l.fixed:
	case l.phase == resuming:
		l.endPause(now, s)
	case s.Throttled:
		// A write started before the limit last changed tells about the
		// old limit: a burst of 429s halves once, not once per write in
		// flight.
		if !now.Add(-s.Latency).Before(l.changed) {
			l.closing = nil
			l.decide(now, Window{Start: now, End: now, Throttled: true})
		}
	case l.phase == running:
		l.measure(now, s)
	}
	if l.phase == draining && l.inFlight == 0 {
		// Every write of the engine's is back: from the last one stored,
		// the revisions are the others' alone.
		l.phase, l.pauseFrom, l.pauseStart, l.pauseUntil = paused, l.revision, l.revisionAt, now.Add(pauseLength)
	}
	close(l.wake)
	l.wake = make(chan struct{})
}

// count takes in the revision a write was stored at: the highest so far,
// and whose window it counts in as the engine's own. A write of an object
// already stored as it would be gives back the object's older revision:
// the server stored nothing.
func (l *limiter) count(now time.Time, s Signal) {
	if c := l.closing; c != nil {
		c.left--
		if s.Revision > c.from && s.Revision <= c.to {
			c.own++
		}
	}
	if s.Revision == 0 {
		return
	}
	if s.Revision > l.revision {
		l.revision, l.revisionAt = s.Revision, now
	}
	if !l.win.Start.IsZero() && s.Revision > l.storedFrom {
		l.ownStored++
	}
}

// measure adds a write to the window, closes the window when it has
// enough, and decides the window closed before once its writes are back.
func (l *limiter) measure(now time.Time, s Signal) {
	if l.firstPauseDue() {
		// The first pause waits for no window: until it measured the
		// others, every write the engine sends is theirs to wait behind.
		l.startPause()
		return
	}
	if c := l.closing; c != nil && (c.left <= 0 || l.inFlight == 0) {
		l.settle(now)
	}
	// A write started before the limit last changed tells about the old
	// limit and counts in no window.
	if now.Add(-s.Latency).Before(l.changed) || l.phase != running {
		return
	}
	if l.win.Start.IsZero() {
		// The first write of the new limit opens the window: from here on
		// the writes in flight are the new limit's.
		l.openWindow(now)
		return
	}
	l.win.Writes++
	l.latencies += s.Latency
	if l.win.Writes < max(minWindowWrites, windowWritesPerWriter*l.state.Limit) || now.Sub(l.win.Start) < minWindowTime {
		return
	}
	if l.closing != nil {
		l.settle(now)
		if l.win.Start.IsZero() || l.phase != running {
			return // the limit changed, or a pause began
		}
	}
	w := l.win
	w.End = now
	w.Writers = l.writerTime / now.Sub(w.Start).Seconds()
	w.Latency = l.latencies / time.Duration(w.Writes)
	l.closing = &closingWindow{w: w, from: l.storedFrom, to: l.revision, own: l.ownStored, left: l.inFlight}
	l.openWindow(now)
	if l.inFlight == 0 {
		l.settle(now)
	}
}

// settle decides the window closed last. The first window has no revision
// to start from.
func (l *limiter) settle(now time.Time) {
	c := l.closing
	l.closing = nil
	w := c.w
	if c.from > 0 {
		w.Stored, w.OwnStored = int64(c.to-c.from), min(int64(c.to-c.from), c.own)
	}
	l.rate = w.Rate()
	l.decide(now, w)
}

// decide applies the rule to a window, and starts a pause when one is due.
// When the limit changed, the window being measured is dropped: the next
// opens with the first write of the new limit.
func (l *limiter) decide(now time.Time, w Window) {
	l.lastWindow = w
	next := NextLimit(l.state, w, l.priority, l.maxLimit)
	if next.Limit != l.state.Limit {
		l.changed = now
		l.win = Window{}
	}
	l.setState(next)
	if next.PauseEvery >= 0 && l.phase == running && l.revision > 0 && !w.Throttled &&
		(l.lastPause.IsZero() || now.Sub(l.lastPause) >= next.PauseEvery) {
		l.startPause()
	}
}

// firstPauseDue reports whether Background's first pause may start: a
// write told etcd's revision, and no pause measured the others yet. Full
// and a fixed concurrency never pause, whatever the state says.
func (l *limiter) firstPauseDue() bool {
	return l.priority == PriorityBackground && !l.fixed && l.phase == running && l.revision > 0 &&
		l.lastPause.IsZero() && !l.state.Measured && l.state.PauseEvery == 0
}

// startPause stops writers from starting: the writes in flight finish,
// then the others write alone (Release moves on once none is in flight).
func (l *limiter) startPause() {
	l.phase, l.win, l.closing = draining, Window{}, nil
	next := l.state
	next.Reason = LimitPausing
	l.setState(next)
}

// endPause takes in the write that ended a pause: the revisions between
// the engine's last write before it and this one were the others', alone.
func (l *limiter) endPause(now time.Time, s Signal) {
	l.phase, l.lastPause, l.changed, l.win = running, now, now, Window{}
	switch {
	case s.Throttled:
		l.decide(now, Window{Start: now, End: now, Throttled: true})
	case s.Revision > l.pauseFrom && l.pauseFrom > 0:
		w := Window{Start: l.pauseStart, End: now, Paused: true, Writes: 1, Latency: s.Latency,
			Stored: int64(s.Revision - l.pauseFrom), OwnStored: 1}
		l.decide(now, w)
		l.logPause(w)
	default:
		// Nothing stored: no measure this time; the next pause is due
		// as if it had found others writing.
		next := l.state
		next.Reason = LimitHolding
		if next.PauseEvery == 0 {
			next.PauseEvery = pauseEvery
		}
		l.setState(next)
	}
}

// logPause tells, at verbosity 1, what a pause measured and where the
// limit goes from it: what a person needs to see why a run started where it
// did (the first pauses follow the run's own setup).
func (l *limiter) logPause(w Window) {
	s := l.state
	l.log.V(1).Info("paused to measure the other clients' writes alone", "pause", s.pauses,
		"othersAlone", int(w.Others()+0.5), "pauseWrite", w.Latency, "alone", int(s.Alone+0.5), "base", s.Base,
		"idle", s.Idle, "slowStart", s.SlowStart, "limit", s.Limit)
}

// setState moves to the rule's next state, and tells Options.OnLimit.
func (l *limiter) setState(next LimitState) {
	if l.onChange != nil && (next.Limit != l.state.Limit || next.Reason != l.state.Reason) {
		l.onChange(next.Limit, next.Reason, l.rate)
	}
	l.state = next
}

// restartWindow drops the window being measured, after the run paused (a
// wait for etcd's compaction): writes in flight before it measure nothing.
func (l *limiter) restartWindow() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.changed = l.now()
	l.win, l.closing = Window{}, nil
}

// openWindow starts measuring a window at now.
func (l *limiter) openWindow(now time.Time) {
	l.win = Window{Start: now}
	l.writerTime, l.latencies, l.last = 0, 0, now
	l.storedFrom, l.ownStored = l.revision, 0
}
