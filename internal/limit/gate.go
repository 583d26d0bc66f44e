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

package limit

import (
	"context"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

// Signal is what one completed write tells the gate (Release).
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

// pausePhase is where the gate is in a pause.
type pausePhase int

const (
	running  pausePhase = iota
	draining            // no write starts; the writes in flight finish
	paused              // none in flight: the others write alone
	resuming            // one write in flight, whose revision ends the pause
)

// Gate admits writers under the adaptive limit: Acquire waits for a free
// slot under the current limit (and past any Retry-After or pause), Release
// reports how the write went and measures the windows the rule (Next)
// decides on.
type Gate struct {
	mu       sync.Mutex
	state    State
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
	// onChange is told each change of the limit or its reason (Observe).
	onChange func(int, Reason, float64)
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

// New returns a gate that lets at most maxLimit writers in flight, Start
// (Background, the default) or Initial (Full) of them at first; fixed
// keeps maxLimit in flight and never adapts, for measurements.
func New(maxLimit int, fixed bool, priority Priority) *Gate {
	if priority == "" {
		priority = Background
	}
	start := Start
	if priority == Full {
		start = Initial
	}
	l := &Gate{
		state:    State{Limit: min(start, maxLimit), Reason: Probing},
		maxLimit: maxLimit, priority: priority, fixed: fixed,
		wake: make(chan struct{}), now: time.Now,
	}
	if priority == Full {
		l.state.PauseEvery = -1
	}
	if fixed {
		l.state = State{Limit: maxLimit, Reason: Fixed, PauseEvery: -1}
	}
	return l
}

// Observe tells onChange each change of the limit or its reason, with the
// engine's write rate over the window that decided it (called under the
// gate's lock: it must return at once), and log, at verbosity 1, what each
// pause measured. Call it before the first Acquire.
func (l *Gate) Observe(onChange func(limit int, reason Reason, rate float64), log logr.Logger) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.onChange, l.log = onChange, log
}

// Limit is the current number of writers allowed in flight.
func (l *Gate) Limit() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state.Limit
}

// Status is the limit, why it is what it is, and the engine's write rate
// over the last window measured (0 before the first).
func (l *Gate) Status() (int, Reason, float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state.Limit, l.state.Reason, l.rate
}

// Acquire waits until a writer may start.
func (l *Gate) Acquire(ctx context.Context) error {
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
func (l *Gate) tryAcquire() (ok bool, wait time.Duration) {
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
func (l *Gate) Hold(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if until := l.now().Add(d); until.After(l.holdTill) {
		l.holdTill = until
	}
}

// integrate adds the writes in flight since the last event to the window.
func (l *Gate) integrate(now time.Time) {
	if !l.win.Start.IsZero() {
		l.writerTime += float64(l.inFlight) * now.Sub(l.last).Seconds()
	}
	l.last = now
}

// Release frees the writer's slot and feeds its outcome to the rule.
func (l *Gate) Release(s Signal) {
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
		// the revisions are the others' alone, and the window the pause cut
		// short has all its writes.
		if l.closing != nil {
			l.settle(now)
			next := l.state
			next.Reason = Pausing
			l.setState(next)
		}
		l.phase, l.pauseFrom, l.pauseStart, l.pauseUntil = paused, l.revision, l.revisionAt, now.Add(pauseLength)
	}
	close(l.wake)
	l.wake = make(chan struct{})
}

// count takes in the revision a write was stored at: the highest so far,
// and whose window it counts in as the engine's own. A write of an object
// already stored as it would be gives back the object's older revision:
// the server stored nothing.
func (l *Gate) count(now time.Time, s Signal) {
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
func (l *Gate) measure(now time.Time, s Signal) {
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
	counts := !now.Add(-s.Latency).Before(l.changed) && l.phase == running
	if counts && !l.win.Start.IsZero() {
		l.win.Writes++
		l.latencies += s.Latency
	}
	if l.pauseDue(now) {
		// Due by the clock, not at a window's end: windows close by their
		// writes, so more of them close where the server runs fast, and a
		// pause started at one would measure the others where the server
		// runs fast more often than not. The window it cuts short counts
		// when it has writes enough, once they are back (Release).
		if l.closing != nil {
			l.settle(now)
		}
		if l.phase == running {
			cut := l.closeWindow(now, minCutWrites)
			l.startPause()
			l.closing = cut
		}
		return
	}
	if !counts {
		return
	}
	if l.win.Start.IsZero() {
		// The first write of the new limit opens the window: from here on
		// the writes in flight are the new limit's.
		l.openWindow(now)
		return
	}
	if l.win.Writes < max(minWindowWrites, windowWritesPerWriter*l.state.Limit) || now.Sub(l.win.Start) < minWindowTime {
		return
	}
	if l.closing != nil {
		l.settle(now)
		if l.win.Start.IsZero() || l.phase != running {
			return // the limit changed, or a pause began
		}
	}
	l.closing = l.closeWindow(now, 0)
	l.openWindow(now)
	if l.inFlight == 0 {
		l.settle(now)
	}
}

// closeWindow closes the window being measured at now, to be decided once
// the writes in flight are back, or returns nil when it has fewer than
// minWrites writes or lasted under minWindowTime.
func (l *Gate) closeWindow(now time.Time, minWrites int) *closingWindow {
	if l.win.Start.IsZero() || l.win.Writes == 0 || l.win.Writes < minWrites || now.Sub(l.win.Start) < minWindowTime {
		return nil
	}
	w := l.win
	w.End = now
	w.Writers = l.writerTime / now.Sub(w.Start).Seconds()
	w.Latency = l.latencies / time.Duration(w.Writes)
	return &closingWindow{w: w, from: l.storedFrom, to: l.revision, own: l.ownStored, left: l.inFlight}
}

// pauseDue reports whether a pause is due by the clock: PauseEvery since
// the last one (the first is firstPauseDue's, and 0, at once, the rule's
// when it decides a window).
func (l *Gate) pauseDue(now time.Time) bool {
	return l.priority == Background && !l.fixed && l.phase == running && l.revision > 0 &&
		!l.lastPause.IsZero() && l.state.PauseEvery > 0 && now.Sub(l.lastPause) >= l.state.PauseEvery
}

// settle decides the window closed last. The first window has no revision
// to start from.
func (l *Gate) settle(now time.Time) {
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
func (l *Gate) decide(now time.Time, w Window) {
	l.lastWindow = w
	next := Next(l.state, w, l.priority, l.maxLimit)
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
func (l *Gate) firstPauseDue() bool {
	return l.priority == Background && !l.fixed && l.phase == running && l.revision > 0 &&
		l.lastPause.IsZero() && !l.state.Measured && l.state.PauseEvery == 0
}

// startPause stops writers from starting: the writes in flight finish,
// then the others write alone (Release moves on once none is in flight).
func (l *Gate) startPause() {
	l.phase, l.win, l.closing = draining, Window{}, nil
	next := l.state
	next.Reason = Pausing
	l.setState(next)
}

// endPause takes in the write that ended a pause: the revisions between
// the engine's last write before it and this one were the others', alone.
func (l *Gate) endPause(now time.Time, s Signal) {
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
		next.Reason = Holding
		if next.PauseEvery == 0 {
			next.PauseEvery = pauseEvery
		}
		l.setState(next)
	}
}

// logPause tells, at verbosity 1, what a pause measured and where the
// limit goes from it: what a person needs to see why a run started where it
// did (the first pauses follow the run's own setup).
func (l *Gate) logPause(w Window) {
	s := l.state
	l.log.V(1).Info("paused to measure the other clients' writes alone", "pause", s.pauses,
		"othersAlone", int(w.Others()+0.5), "pauseWrite", w.Latency, "alone", int(s.Alone+0.5), "base", s.Base,
		"idle", s.Idle, "slowStart", s.SlowStart, "limit", s.Limit)
}

// setState moves to the rule's next state, and tells onChange.
func (l *Gate) setState(next State) {
	if l.onChange != nil && (next.Limit != l.state.Limit || next.Reason != l.state.Reason) {
		l.onChange(next.Limit, next.Reason, l.rate)
	}
	l.state = next
}

// RestartWindow drops the window being measured, after the run paused (a
// wait for etcd's compaction): writes in flight before it measure nothing.
func (l *Gate) RestartWindow() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.changed = l.now()
	l.win, l.closing = Window{}, nil
}

// openWindow starts measuring a window at now.
func (l *Gate) openWindow(now time.Time) {
	l.win = Window{Start: now}
	l.writerTime, l.latencies, l.last = 0, 0, now
	l.storedFrom, l.ownStored = l.revision, 0
}
