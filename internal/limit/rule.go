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

// Package limit is the migration engine's adaptive limit on writes in
// flight: its rule, Next, a pure function from the measures of one window
// to the next limit (rule.go, verdict.go), and its gate, Gate, which admits
// writers under that limit and measures the windows (gate.go).
//
// The engine's public surface (migration.Options.Priority,
// Progress.Writers and WritersReason) is what a library user sees of it;
// the rule's state and measures stay here, free to change with the rule.
package limit

import (
	"slices"
	"time"
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
//     alone (a Paused Window). A pause is due by the clock, not at a
//     window's end: windows close by their writes, so more of them close
//     where the server runs fast, and pauses started there would measure
//     the others at the server's best more often than not. Their rate alone
//     is the mean of the last alonePauses pauses: a pause is a fraction of
//     a second and a server's speed swings over seconds, for every client at
//     once, so one pause reads the others where the swing is, and the mean
//     of many reads them across it.
//   - While the engine writes, the windows compare the others' rate with
//     their rate alone. The comparison is sized by the model of requests
//     sharing a server: beside the engine's L writers the others keep
//     1/(1 + kL) of their rate, whatever k is (their number, the cost of the
//     engine's writes against theirs). Every window, at whatever limit,
//     tells k, and k is fitted over the windows of the last fitFor
//     (othersFit), longer than the server's swings: a window or two read
//     the swing as much as the engine. Where the fit puts the others under
//     KeptMin of their rate alone the limit comes down (reason Yielding) to
//     where they would keep keptTarget; while they keep more than that, it
//     steps up. A harm past twice its bound in the windows at one limit is
//     acted on at once.
//   - A client that writes at its own pace keeps its rate, but its writes
//     wait in the same queue as the engine's: while the others would keep
//     90% of their rate or more beside twice the engine's writers (by the
//     fit: beside one or two, 8 closed-loop writers keep about 90%), the
//     engine's own write latency against its
//     latency alone (the pauses' writes) judges that too (reason Queueing;
//     verdict.go), and the stricter of the two wins. Clients whose rate
//     falls with the engine's writes are closed-loop: their rate is the
//     judge, the latency only when severe.
//   - A limit that harmed the others twice within ceilingFor, each time
//     just climbed to, bounds the climbs just under it for ceilingFor.
//   - When the others write under a tenth of the engine's rate alone
//     (leases, events), the server is idle and Background is Full.
//   - Background starts at one writer and pauses as soon as a write of its
//     own has told it etcd's revision: until a pause measured the others it
//     knows nothing of them, and its first writes are every client's queue.
//     A first pause that finds the server idle takes it to Initial
//     writers (then as Full); one that finds others writing starts it
//     slowly: from one writer, the limit doubles from one window to the
//     next while the judge sees room for twice (TCP's slow start), and
//     moves by the rule from the first window that does not. Without
//     numeric resourceVersions (etcd's revisions) it never measures them
//     and holds Initial writers from its first window on.
//   - The start never takes more than Initial writers on the first
//     pause's word alone. That pause follows the run's own setup (the
//     /metrics read, the first page and its reads, the sweep's watch
//     starting), which the server may still be busy with: its write can
//     take longer than the engine's writes alone do and the others' rate
//     can read low, and a base taken high or a rate alone taken low lets
//     the judge see room that is not there. Past Initial the limit
//     climbs only on a measure taken once the setup is over: on an idle
//     server, each window at the limit (the others' writes are counted
//     beside the engine's: a window that finds them writing stops the
//     climb and pauses at once); beside others, a second pause, a second
//     after the first and at once when the slow start would pass Initial
//     or the rule would climb at all, whose measure of the others replaces
//     the first's when the two disagree by more than one pause's noise
//     (else they average; the base drops a write a stall slowed). The
//     first pause itself stays: the run's reads before its first write
//     span tens of milliseconds, too few to count the others' writes by,
//     and it is short (pauseLength): 150 ms and one write, about 2% of a
//     run of 6,000 objects.
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
	// upStep is a step up once the server pushed back, or while others
	// write (a quarter more writers, at least one).
	upStep = 1.25
	// KeptPromised is the share of their write rate alone that Background
	// promises the other clients: the one place the promise's number is
	// written (migration.BackgroundKept states it to library users).
	KeptPromised = 0.55
	// KeptMin is the least of their rate alone the other clients keep: below
	// it the limit comes down (Yielding). It is above KeptPromised, a
	// margin for a window's noise. keptTarget is where the limit comes down
	// to and steps up to, above KeptMin so that a window's noise near the
	// bound does not move the limit each window.
	KeptMin, keptTarget = 0.57, 0.62
	// idleOthers: other clients writing under this share of the engine's
	// rate leave the server idle.
	idleOthers = 0.1
	// pauseLength is how long the engine stops sending to measure the
	// others alone, after its writes in flight finished: long enough to
	// tell an idle server (others under a tenth of one writer's rate: a few
	// writes over it), short enough that the only pause of a short run on an
	// idle server costs it little (at 250 ms it was over 5% of a run of
	// 3,000 small objects). pauseEvery is how often while others write: a
	// pause costs about pauseLength plus two writes' latency, about 6% of
	// the engine's time beside others, and alonePauses of them span
	// alonePauses*pauseEvery, many swings of a server's speed.
	// idlePauseEvery is the interval after a pause that found the server
	// idle, and maxPauseEvery the most it grows to: each pause that finds it
	// idle again doubles it. A client that arrives is seen sooner than that
	// when it writes a tenth of the engine's rate beside it (the next window
	// asks for a pause); a client the engine starves below that waits for
	// the next pause, at most maxPauseEvery.
	pauseLength    = 150 * time.Millisecond
	pauseEvery     = 3 * time.Second
	idlePauseEvery = 20 * time.Second
	maxPauseEvery  = 40 * time.Second
	// alonePauses is how many pauses the others' rate alone is the mean of.
	alonePauses = 10
	// secondPauseAfter is how soon the second pause follows a first one
	// that found others writing (State.pauses).
	secondPauseAfter = time.Second
	// collapse: a server whose throughput falls below 1/collapse of its
	// best is failing, not busy.
	collapse = 4
	// holdWindows is how many windows the limit holds after a throttle
	// before it climbs again.
	holdWindows = 3
	// ceilingFor is how long a ceiling bounds the climbs, and how close
	// two failed probes must come to set one (State.Ceiling), so that the
	// others pay for a probe above what they bear every 30 s rather than
	// every second.
	ceilingFor = 30 * time.Second
	// minWindowWrites, windowWritesPerWriter and minWindowTime make a
	// window: at least 64 writes, four per writer, over at least 100 ms. The
	// engine's rate is the mean of every write's latency (Little's law),
	// whose noise falls as the square root of the writes: with latencies
	// spread by a third, 64 writes put it near 4%.
	minWindowWrites       = 64
	windowWritesPerWriter = 4
	minWindowTime         = 100 * time.Millisecond
	// minCutWrites is the fewest writes a window a pause cut short needs
	// to count: beside busy clients the engine's windows at one writer
	// take seconds, and a pause every few seconds would cut every one.
	minCutWrites = 8
)

// Initial is the adaptive limit's first value with priority Full, and
// Background's once its first pause found the server idle (or its first
// window, without etcd's revisions to pause by).
const Initial = 8

// Start is Background's limit until its first pause: one writer, so
// that the writes it sends knowing nothing of the others queue no one.
const Start = 1

// Priority says how much of the API server a migration takes.
type Priority string

const (
	// Background keeps other clients' write rate at KeptPromised or more
	// of their rate without the migration, measured by pausing it briefly
	// now and then, and, while they keep 90% of it or more, its own write
	// latency within LatencyMax times its latency alone (every client's
	// writes wait in that queue). It starts at one
	// writer and pauses after its first write, so that it measured the
	// others before it takes more; beside others it takes no more than
	// Initial writers until a second pause measured them again, clear
	// of the run's own setup. On a server others barely write to, it is
	// Full from its first pause on. The default.
	Background Priority = "Background"
	// Full takes the server's full speed, for maintenance windows:
	// the limit climbs to the most writers allowed and comes down only when the server
	// throttles, fails or collapses, whatever that costs other clients.
	Full Priority = "Full"
)

// Reason says what the adaptive limit is doing.
type Reason string

const (
	// Probing: the limit is stepping up towards the most writers allowed.
	Probing Reason = "Probing"
	// Holding: the limit holds, at the most writers allowed, where other
	// clients keep about keptTarget of their rate, or after a throttle.
	Holding Reason = "Holding"
	// BackingOff: the API server throttled or failed a write (429,
	// 5xx, timeout), or its throughput collapsed, and the limit was halved.
	BackingOff Reason = "BackingOff"
	// Yielding: other clients wrote less than KeptMin of their rate alone,
	// and the limit came down.
	Yielding Reason = "Yielding"
	// Queueing: while other clients wrote, the engine's own writes took
	// more than LatencyMax times as long as one write of its alone (every client's
	// writes wait in that queue), and the limit came down.
	Queueing Reason = "Queueing"
	// Pausing: the engine paused its writes for a moment to measure the
	// other clients' write rate alone.
	Pausing Reason = "Pausing"
	// Fixed: a fixed limit (New with fixed), no adaptation.
	Fixed Reason = "Fixed"
)

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

// State is the rule's state from one window to the next.
type State struct {
	// Limit is the number of writers allowed in flight.
	Limit  int
	Reason Reason
	// Hold counts the windows left before the limit climbs again after a
	// throttle.
	Hold int
	// Gentle: the server pushed back once; the limit climbs by quarters,
	// not by doubling.
	Gentle bool
	// Measured: a pause measured the others alone. Alone is their write
	// rate then, the mean of the last alonePauses pauses since the server
	// last turned idle or busy (alones, AlonePauses counts them); Last is
	// the last pause's. Idle: the last pause found them under a tenth of
	// the engine's rate.
	Measured    bool
	Alone, Last float64
	AlonePauses int
	alones      [alonePauses]float64
	Idle        bool
	// fit is k of the model, fitted over the windows of the last fitFor
	// (othersFit).
	fit othersFit
	// Base is the engine's write latency alone: the pauses' write, sent
	// with no other write of its own in flight, the mean of the last
	// basePauses without those a stall slowed (baseOf); 0 until a pause
	// measured it. BasePauses counts the pauses that measured it, bases
	// holds the last basePauses of their writes.
	Base       time.Duration
	BasePauses int
	bases      [basePauses]time.Duration
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
	// Ceiling is a limit that climbs reached twice and the judge found
	// harmful both times (failed probes): until CeilingUntil the limit
	// climbs no further than just under it. Each probe above what the
	// others bear is a spike in their latency, and a closed-loop client at
	// a knee of the server loses most of its rate there; probing it again
	// every few windows costs them more than the room it might find.
	Ceiling      int
	CeilingUntil time.Time
	// failed is the limit of the last failed probe, failedAt when.
	failed   int
	failedAt time.Time
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
func (s State) collapsed(w Window) bool {
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

// Next is the limiter's rule, a pure function: the state after a
// window measured at s.Limit (or while paused), bounded by [1, maxLimit].
func Next(s State, w Window, priority Priority, maxLimit int) State {
	next := nextLimit(s, w, priority, maxLimit)
	if next.Limit != s.Limit {
		next.AtLimit = AtLimit{} // the windows measured the old limit
	}
	return next
}

func nextLimit(s State, w Window, priority Priority, maxLimit int) State {
	switch {
	case w.Throttled:
		return s.backOff(maxLimit)
	case w.Paused:
		return s.paused(w, priority, maxLimit)
	}
	s.Rate = w.Rate()
	full := priority == Full || (s.Measured && s.Idle)
	if full && s.collapsed(w) {
		return s.backOff(maxLimit)
	}
	if t := w.throughput(); t > s.Best {
		s.Best, s.BestLatency, s.bestWriters = t, w.Latency, w.Writers
	}
	if priority == Full {
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
			s.PauseEvery, s.Reason = 0, Holding
			return s
		}
		return s.climb(maxLimit, maxLimit, !s.Gentle)
	case !s.Measured && s.Limit < Initial:
		// A window closed before any pause: no revision to pause by.
		s.Limit, s.Reason = min(Initial, maxLimit), Probing
		return s
	case !s.Measured || w.Others() < 0:
		s.Reason = Holding // nothing to judge by yet
		return s
	}
	s.AtLimit = s.AtLimit.add(w, s.Limit)
	s.fit = s.fit.add(w, s.Limit)
	v := judge(s.AtLimit, s.fit, s.Alone, s.Base)
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
		if s.Reason == Probing && s.AtLimit.Windows >= minJudged {
			// A limit just climbed to that harms the others over the
			// windows judged: not a swing of the server's at a limit that
			// held, nor one window's stall (a page's LIST, a pause of the
			// server's own). The second such probe at it or above within
			// ceilingFor (one could be the noise of a single pause's
			// base) stops the climbs under it for a while.
			if s.failed > 0 && s.failed <= s.Limit && w.End.Before(s.failedAt.Add(ceilingFor)) {
				s.Ceiling, s.CeilingUntil = s.Limit, w.End.Add(ceilingFor)
			}
			s.failed, s.failedAt = s.Limit, w.End
		}
		s.Limit = max(1, min(s.Limit-1, int(max(v.writers, s.AtLimit.Writers/2))))
		s.Reason = v.reason
		return s
	}
	upTo := int(v.writers + 0.5)
	if s.Ceiling > 0 && w.End.Before(s.CeilingUntil) {
		upTo = min(upTo, s.Ceiling-1)
	}
	return s.climbMeasured(upTo, maxLimit, false)
}

// climbMeasured is climb on measures taken after the run's setup: until a
// second pause, the slow start doubles up to Initial, and any other
// climb holds the limit and makes a pause due at once.
func (s State) climbMeasured(upTo, maxLimit int, double bool) State {
	if s.pauses < 2 {
		if upTo > s.Limit && (!s.SlowStart || s.Limit >= Initial) {
			s.PauseEvery, s.Reason = 0, Holding
			return s
		}
		upTo = min(upTo, Initial)
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
func (s State) climb(upTo, maxLimit int, double bool) State {
	factor := upStep
	if double {
		factor = 2
	}
	next := min(upTo, maxLimit, max(s.Limit+1, int(float64(s.Limit)*factor+0.5)))
	if next <= s.Limit {
		s.Reason = Holding
		return s
	}
	s.Limit, s.Reason = next, Probing
	return s
}

// backOff halves the limit and holds it there for a few windows.
func (s State) backOff(maxLimit int) State {
	s.Limit = min(max(s.Limit/2, 1), maxLimit)
	s.Reason, s.Hold, s.Gentle, s.SlowStart = BackingOff, holdWindows, true, false
	return s
}

// paused takes in a pause's measure of the others' rate alone, and sets
// when the next pause is due: sooner while they write, later while the
// server is idle. The first pause sets where the limit starts from.
func (s State) paused(w Window, priority Priority, maxLimit int) State {
	alone := w.Others()
	if alone < 0 || priority == Full {
		return s
	}
	first := !s.Measured
	if s.pauses == 1 && setupMarked(alone, s.Last) {
		// The first pause's measure followed the run's setup, and the
		// second's disagrees: it replaces it rather than average.
		s.Measured, s.AtLimit, s.fit, s.AlonePauses = false, AtLimit{}, othersFit{}, 0
	}
	s.pauses = min(s.pauses+1, 2)
	s.Measured, s.Last = true, alone
	if w.Latency > 0 {
		s.bases[s.BasePauses%basePauses] = w.Latency
		s.BasePauses++
		s.Base = baseOf(s.bases[:min(s.BasePauses, basePauses)])
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
	if s.Idle != wasIdle {
		// The others came or went: the pauses before measured someone else.
		s.AlonePauses, s.fit = 0, othersFit{}
	}
	s.alones[s.AlonePauses%alonePauses] = alone
	s.AlonePauses++
	s.Alone = mean(s.alones[:min(s.AlonePauses, alonePauses)])
	if first {
		s.SlowStart = !s.Idle
		if s.Idle && s.Limit < Initial {
			s.Limit, s.Reason = min(Initial, maxLimit), Probing
		}
	}
	if s.Idle {
		s.SlowStart = false
	}
	switch {
	case !s.Idle && s.pauses == 1:
		// The first pause's measures follow the run's setup, whichever
		// way they err: a rate alone read low holds the engine on its
		// latency, one read high on the others' rate. The second pause
		// comes soon, whatever the windows between make of them.
		s.PauseEvery = secondPauseAfter
	case !s.Idle:
		s.PauseEvery = pauseEvery
	case wasIdle:
		s.PauseEvery = min(maxPauseEvery, 2*max(s.PauseEvery, idlePauseEvery/2))
	default:
		s.PauseEvery = idlePauseEvery
	}
	if s.Reason == Pausing {
		s.Reason = Holding
	}
	return s
}

// baseOf is the base the last pauses' writes give: their mean, without
// those that took more than stallSpread times the least. Queueing only ever
// adds to a write's latency, and one pause's write that met a stall (a
// page's LIST, the server's own pause) is not the engine's latency alone:
// taken in, it lets the engine queue every client until it is forgotten.
func baseOf(writes []time.Duration) time.Duration {
	least := slices.Min(writes)
	var sum time.Duration
	n := 0
	for _, d := range writes {
		if d <= stallSpread*least {
			sum += d
			n++
		}
	}
	return sum / time.Duration(n)
}

// mean is the mean of xs.
func mean(xs []float64) float64 {
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
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
