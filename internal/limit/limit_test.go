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
	"container/heap"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// simServer is a simulated API server that shares its work among the
// requests in flight. Work is counted in foreground writes: the server does
// capacity of them a second once knee of them are in flight (less below the
// knee, and by beyond more over each doubling past it), each request in
// flight getting an even share, so one write takes n / throughput(n) with n
// writes' worth in flight. An engine write costs cost foreground writes (it
// is also listed, read and converted): it weighs cost in n, and takes cost
// times as long. Beside the engine, closed foreground writers keep a write
// in flight each all the time, and a paced client sends paced writes a
// second whatever their latency. With seats > 0, an engine write sent while
// more than seats are in flight is refused at once with a 429, as API
// Priority and Fairness would.
type simServer struct {
	capacity float64
	knee     float64
	beyond   float64
	cost     float64
	closed   int
	paced    float64
	seats    int
	// overhead, when set, replaces the knee: the server shares its capacity
	// among the writes in flight and overhead writers' worth of its own work
	// (and its clients', on the same cores), so that the rate bends from
	// the first writer, as a 2-core envtest control plane's does.
	overhead float64
	// swings, when set, are the moments the whole server's speed changes
	// between full and swingLow: a swing that every client sees at once,
	// as the envtest control plane's rates do (every client's rate falls
	// together to about 40% and back, every 1.3 to 2 seconds).
	swings   []time.Duration
	swingLow float64
	// setup, when set, is how long the server runs at setupSpeed of its
	// capacity from the run's start: busy with the run's own setup (the
	// first page, /metrics, the sweep's watch starting), so that the first
	// pause's write takes longer than the engine's writes alone do and a
	// closed-loop client's rate alone reads low. The clients' figures
	// alone are taken without it: without the run there is no setup.
	setup      time.Duration
	setupSpeed float64
	// runLoad, when set, is work of the run's own beyond its writes (its
	// pages' reads, its watch's events), in foreground writes in flight,
	// whenever the engine has a write in flight; busy multiplies the
	// latency of its writes but the pauses' (its own process, decoding
	// pages and events, holds them too). Neither weighs on a pause's
	// write, so that the engine's single writer beside others takes
	// longer than the pause's write did, as on the envtest control plane
	// (twice as long beside 8 writers, which kept three quarters of their
	// rate).
	runLoad, busy float64
}

// swinging returns s with its speed falling to low for half of every
// period, each period 0.7 to 1.3 times the given one (seeded, so every run
// of a spec sees the same swings), for d.
func (s simServer) swinging(period time.Duration, low float64, d time.Duration) simServer {
	random := rand.New(rand.NewPCG(13, 20))
	s.swings, s.swingLow = nil, low
	for at := time.Duration(0); at < d; {
		at += time.Duration((0.35 + 0.3*random.Float64()) * float64(period))
		s.swings = append(s.swings, at)
	}
	return s
}

// speed is the share of its capacity the server has at elapsed.
func (s simServer) speed(elapsed time.Duration) float64 {
	if elapsed < s.setup {
		return s.setupSpeed
	}
	if i, _ := slices.BinarySearch(s.swings, elapsed); i%2 == 1 {
		return s.swingLow
	}
	return 1
}

// afterSetup returns s with the run's setup slowing it for the first d.
func (s simServer) afterSetup(d time.Duration, speed float64) simServer {
	s.setup, s.setupSpeed = d, speed
	return s
}

// engineCost is what one engine write costs, in foreground writes.
func (s simServer) engineCost() float64 {
	if s.cost > 0 {
		return s.cost
	}
	return 1
}

// unit is how long one foreground write takes at elapsed with n foreground
// writes' worth in flight, its own included, in seconds.
func (s simServer) unit(elapsed time.Duration, n float64) float64 {
	var d float64
	if s.overhead > 0 {
		d = (n + s.overhead) / s.capacity
	} else {
		d = max(n, s.knee) / s.capacity
		for k := 2 * s.knee; k <= n; k *= 2 {
			d /= 1 + s.beyond
		}
	}
	return d / s.speed(elapsed)
}

// foreground is the foreground's writes per second at elapsed beside
// engine writes of the engine's in flight, and their latency.
func (s simServer) foreground(elapsed time.Duration, engine int) (rate, latency float64) {
	work := s.engineCost() * float64(engine)
	if engine > 0 {
		work += s.runLoad
	}
	if s.paced == 0 {
		latency = s.unit(elapsed, float64(s.closed)+work)
	} else {
		// The paced client's writes in flight are its rate times their
		// latency (Little's law): the latency is the fixed point.
		lo, hi := 0.0, 10.0
		for range 60 {
			mid := (lo + hi) / 2
			if s.unit(elapsed, float64(s.closed)+s.paced*mid+work) > mid {
				lo = mid
			} else {
				hi = mid
			}
		}
		latency = hi
	}
	return float64(s.closed)/latency + s.paced, latency
}

// engineLatency is how long an engine write sent at elapsed takes with
// engine writes of the engine's in flight, its own included, give or take a
// fifth (jitter in [0, 1)).
func (s simServer) engineLatency(elapsed time.Duration, engine int, jitter float64) time.Duration {
	_, fg := s.foreground(elapsed, engine)
	work := float64(s.closed) + s.paced*fg + s.engineCost()*float64(engine)
	if engine > 0 {
		work += s.runLoad
	}
	return time.Duration(s.engineCost() * s.unit(elapsed, work) * (0.8 + 0.4*jitter) * float64(time.Second))
}

type completion struct {
	at, started time.Time
	throttled   bool
}

type completions []completion

func (c completions) Len() int           { return len(c) }
func (c completions) Less(i, j int) bool { return c[i].at.Before(c[j].at) }
func (c completions) Swap(i, j int)      { c[i], c[j] = c[j], c[i] }
func (c *completions) Push(x any)        { *c = append(*c, x.(completion)) }
func (c *completions) Pop() any {
	old := *c
	x := old[len(old)-1]
	*c = old[:len(old)-1]
	return x
}

// sample is the simulation at one moment: the limiter's state, the writes
// so far of the engine, of the foreground, and of the foreground as it
// would have written alone, and the paced client's writes sent since the
// last sample.
type sample struct {
	at                 time.Duration
	limit              int
	reason             Reason
	own, others, alone float64
	paced              []pacedWrite
}

// pacedWrite is the latency of one write of the paced client beside the
// engine, and what it would have been alone.
type pacedWrite struct{ during, alone time.Duration }

// simRun is a simulation's samples, one at each event.
type simRun []sample

// simulate runs the real limiter against the server on a fake clock for d:
// the engine always has objects to write, so it keeps as many writes in
// flight as the limiter allows; each completes after the server's latency
// at the moment it was sent. The foreground's writes are counted as a
// fluid at the rate the writes in flight at each moment allow. A paced
// client's writes are sampled too, one every 1/paced s: each takes the
// latency of the server's queue at the moment it is sent (the fixed point
// of Little's law, the queue shared by every request in flight), give or
// take a fifth, beside the engine and as it would alone, so that their p99
// over a run follows where the limit went, the probes above it included.
func simulate(ctx context.Context, server simServer, priority Priority, d time.Duration, from ...State) simRun {
	GinkgoHelper()
	l := New(64, false, priority)
	for _, s := range from {
		l.state = s
		l.lastPause = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC) // as if a pause had just ended
	}
	return simulateLimiter(ctx, server, l, d)
}

// simulateLimiter is simulate with the limiter given.
func simulateLimiter(ctx context.Context, server simServer, l *Gate, d time.Duration) simRun {
	GinkgoHelper()
	start := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	now := start
	l.now = func() time.Time { return now }
	withoutRun := server
	withoutRun.setup = 0
	var pending completions
	var run simRun
	// own and others count the writes stored, the engine's and the
	// foreground's: the revision a write is given is their sum.
	var own, others, alone float64
	random := rand.New(rand.NewPCG(20, 26))
	pacedRandom, nextPaced := rand.New(rand.NewPCG(26, 20)), start
	for now.Sub(start) < d {
		Expect(ctx.Err()).NotTo(HaveOccurred())
		var wakeAt time.Time
		for {
			ok, wait := l.tryAcquire()
			if !ok {
				if wait > 0 {
					wakeAt = now.Add(wait)
				}
				break
			}
			if server.seats > 0 && l.inFlight+server.closed > server.seats {
				heap.Push(&pending, completion{at: now.Add(time.Millisecond), started: now, throttled: true})
				continue
			}
			latency := server.engineLatency(now.Sub(start), l.inFlight, random.Float64())
			if server.busy > 0 && l.phase != resuming {
				latency = time.Duration(server.busy * float64(latency))
			}
			heap.Push(&pending, completion{at: now.Add(latency), started: now})
		}
		next := wakeAt
		if len(pending) > 0 && (next.IsZero() || pending[0].at.Before(next)) {
			next = pending[0].at
		}
		Expect(next.IsZero()).To(BeFalse(), "the limiter waits for nothing")
		elapsed, dt := now.Sub(start), next.Sub(now).Seconds()
		rate, latency := server.foreground(elapsed, l.inFlight)
		rateAlone, latencyAlone := withoutRun.foreground(elapsed, 0)
		others += rate * dt
		alone += rateAlone * dt
		var paced []pacedWrite
		for ; server.paced > 0 && nextPaced.Before(next); nextPaced = nextPaced.Add(time.Duration(float64(time.Second) / server.paced)) {
			jitter := 0.8 + 0.4*pacedRandom.Float64()
			paced = append(paced, pacedWrite{
				during: time.Duration(jitter * latency * float64(time.Second)),
				alone:  time.Duration(jitter * latencyAlone * float64(time.Second)),
			})
		}
		now = next
		if len(pending) > 0 && !pending[0].at.After(now) {
			c := heap.Pop(&pending).(completion)
			signal := Signal{Latency: now.Sub(c.started), Throttled: c.throttled}
			if !c.throttled {
				own++
				signal.Revision = uint64(own + others)
			}
			l.Release(signal)
		}
		limit, reason, _ := l.Status()
		Expect(limit).To(BeNumerically(">=", 1), "never below one writer")
		Expect(limit).To(BeNumerically("<=", 64), "never above the bound")
		run = append(run, sample{at: now.Sub(start), limit: limit, reason: reason, own: own, others: others, alone: alone, paced: paced})
	}
	return run
}

// until is the run up to the sample at which the engine had written n
// objects, and false when it never did.
func (r simRun) until(n float64) (simRun, bool) {
	i := slices.IndexFunc(r, func(s sample) bool { return s.own >= n })
	if i < 0 {
		return r, false
	}
	return r[:i+1], true
}

// from is the run from elapsed on.
func (r simRun) from(elapsed time.Duration) simRun {
	i, _ := slices.BinarySearchFunc(r, elapsed, func(s sample, at time.Duration) int { return int(s.at - at) })
	return r[i:]
}

// maxLimit is the most writers the run allowed.
func (r simRun) maxLimit() int {
	return slices.MaxFunc(r, func(a, b sample) int { return a.limit - b.limit }).limit
}

// pacedBound is what the paced client's p99 during a migration may be
// against its p99 alone: twice it, or 20 ms more, whichever is more (20 ms
// is a fiftieth of Kubernetes' SLO for mutating calls, and a ratio alone on
// a few milliseconds reads a few of queueing as harm).
func pacedBound(alone time.Duration) time.Duration {
	return max(2*alone, alone+20*time.Millisecond)
}

// secondHalf is the second half of a run.
func (r simRun) secondHalf() simRun {
	last := r[len(r)-1].at
	i, _ := slices.BinarySearchFunc(r, last/2, func(s sample, at time.Duration) int { return int(s.at - at) })
	return r[i:]
}

// kept is the foreground's writes over the run against what it would have
// written alone.
func (r simRun) kept() float64 {
	first, last := r[0], r[len(r)-1]
	return (last.others - first.others) / (last.alone - first.alone)
}

// rate is the engine's writes per second over the run.
func (r simRun) rate() float64 {
	first, last := r[0], r[len(r)-1]
	return (last.own - first.own) / (last.at - first.at).Seconds()
}

// pacedP99 is the paced client's p99 write latency over the run, beside
// the engine and alone.
func (r simRun) pacedP99() (during, alone time.Duration) {
	var d, a []time.Duration
	for _, s := range r {
		for _, p := range s.paced {
			d, a = append(d, p.during), append(a, p.alone)
		}
	}
	p99 := func(l []time.Duration) time.Duration {
		slices.Sort(l)
		return l[len(l)*99/100]
	}
	return p99(d), p99(a)
}

// limits is the median of the limits the run's writes were sent under
// (where the limit settled), the least and the most, and the share of its
// writes sent under a limit outside [median/band, median*band].
func (r simRun) limits(band float64) (median, least, most int, outside float64) {
	var limits []int
	for i := 1; i < len(r); i++ {
		if r[i].own > r[i-1].own {
			limits = append(limits, r[i].limit)
		}
	}
	sorted := slices.Sorted(slices.Values(limits))
	median = sorted[len(sorted)/2]
	out := 0
	for _, l := range limits {
		if float64(l) < float64(median)/band || float64(l) > float64(median)*band {
			out++
		}
	}
	return median, sorted[0], sorted[len(sorted)-1], float64(out) / float64(len(limits))
}

func (r simRun) String() string {
	median, least, most, outside := r.limits(oscillation)
	s := fmt.Sprintf("limit %d (median), range [%d, %d], %.0f%% of writes outside [/%.1f, x%.1f]; engine %.0f writes/s",
		median, least, most, 100*outside, oscillation, oscillation, r.rate())
	if r[len(r)-1].alone > r[0].alone {
		s += fmt.Sprintf("; foreground kept %.0f%%", 100*r.kept())
	}
	return s
}

// oscillation is the band the limit stays in once settled: at least 90%
// of the writes of a run's second half are sent under a limit within this
// factor of its median (the pauses' single writes and the probes included).
const oscillation = 1.6

var _ = Describe("The adaptive limit, on a simulated API server (fake clock)", func() {
	const capacity = 1000 // foreground writes per second at the knee
	idle := simServer{capacity: capacity, knee: 8}
	const d = 60 * time.Second

	for _, cost := range costs {
		Context(fmt.Sprintf("an engine write costing %.1f foreground writes", cost), func() {
			server := idle
			server.cost = cost

			It("idle, Background is Full: it reaches the bound and stays there, and its pauses cost under 5%", func(ctx SpecContext) {
				background := simulate(ctx, server, Background, d)
				full := simulate(ctx, server, Full, d)
				GinkgoWriter.Printf("idle: Background %s; Full %s; over the whole run, Background writes %.1f%% of Full's\n",
					background.secondHalf(), full.secondHalf(), 100*background.rate()/full.rate())
				recordCost(cost, "idle: Background's writes over Full's, whole run", "%.1f%%", 100*background.rate()/full.rate())
				median, _, _, outside := background.secondHalf().limits(oscillation)
				Expect(median).To(Equal(64))
				Expect(outside).To(BeNumerically("<", 0.1))
				Expect(background.rate()).To(BeNumerically(">=", 0.95*full.rate()), "the pauses' cost, the first included")
			})

			// idleRate is the engine's rate on this server with nobody else
			// writing, over the second half of a run.
			idleRate := func(ctx SpecContext) float64 {
				return simulate(ctx, server, Background, d).secondHalf().rate()
			}

			DescribeTable("beside closed-loop foreground writers, they keep 55% of their rate alone or more, and the limit holds within the band",
				func(ctx SpecContext, closed int, engineShare float64) {
					server := server
					server.closed = closed
					// Twice as long: beside 32 writers of an engine write's
					// cost 3, a window of 64 writes takes seconds, and the
					// climb to where they keep 62% takes most of a minute.
					run := simulate(ctx, server, Background, 2*d).secondHalf()
					idle := idleRate(ctx)
					GinkgoWriter.Printf("%d foreground writers: %s; %.2f of its idle rate\n", closed, run, run.rate()/idle)
					recordCost(cost, fmt.Sprintf("%d-writer client kept", closed), "%.0f%%", 100*run.kept())
					recordCost(cost, fmt.Sprintf("the engine beside the %d-writer client, of its idle rate", closed), "%.2f", run.rate()/idle)
					Expect(run.kept()).To(BeNumerically(">=", KeptPromised))
					_, _, _, outside := run.limits(oscillation)
					Expect(outside).To(BeNumerically("<", 0.1), "oscillation")
					Expect(run.rate()).To(BeNumerically(">=", engineShare*idle), "the engine's rate beside them, of its idle rate")
				},
				Entry("1 writer", 1, 0.0),
				Entry("8 writers: the engine at 0.3 of its idle rate or more", 8, 0.3),
				Entry("32 writers", 32, 0.0),
			)

			It("beside a client paced at 100 writes/s: the client keeps its rate and its p99 within 2x of alone, the engine half its idle rate or more", func(ctx SpecContext) {
				server := server
				server.paced = 100
				beside := simulate(ctx, server, Background, d).secondHalf()
				idle := idleRate(ctx)
				during, alone := beside.pacedP99()
				GinkgoWriter.Printf("beside 100 writes/s: %s; %.2f of its idle rate; the paced client's p99 %s, alone %s (%.2fx)\n",
					beside, beside.rate()/idle, during.Round(time.Millisecond/10), alone.Round(time.Millisecond/10), float64(during)/float64(alone))
				recordCost(cost, "paced client's p99 beside the engine / alone, settled", "%.2fx", float64(during)/float64(alone))
				recordCost(cost, "the engine beside the paced client, of its idle rate", "%.2f", beside.rate()/idle)
				Expect(beside.kept()).To(BeNumerically(">=", 0.99), "the paced client keeps its rate")
				Expect(float64(during)).To(BeNumerically("<=", 2*float64(alone)), "the paced client's p99")
				Expect(beside.rate()).To(BeNumerically(">=", 0.5*idle), "the engine's rate beside it, of its idle rate")
			})

			It("from the start, beside a client paced at 100 writes/s: its p99 over the first 10 s within 2x of alone", func(ctx SpecContext) {
				server := server
				server.paced = 100
				run := simulate(ctx, server, Background, 10*time.Second)
				during, alone := run.pacedP99()
				GinkgoWriter.Printf("from the start beside 100 writes/s, over 10 s: %s; the paced client's p99 %s, alone %s (%.2fx)\n",
					run, during.Round(time.Millisecond/10), alone.Round(time.Millisecond/10), float64(during)/float64(alone))
				recordCost(cost, "the same over the first 10 s (the start)", "%.2fx", float64(during)/float64(alone))
				Expect(float64(during)).To(BeNumerically("<=", 2*float64(alone)), "the paced client's p99 over the first 10 s")
			})
		})
	}

	// The start: until its first pause the engine knows nothing of the
	// others, and whatever it writes then they wait behind. Over the first
	// 10 s (a thousand of the paced client's writes, so that the p99 is
	// its ten slowest), on the server whose latency grows from the first
	// writer (a 2-core control plane; on the knee-shaped server a few
	// writers cost nothing), the start must cost the paced client no more
	// than the settled run does.
	It("from the start, beside a client paced at 100 writes/s on a server whose own work shares its cores: one writer until the first pause, and its p99 over the first 10 s within 3x",
		func(ctx SpecContext) {
			shared := simServer{capacity: capacity, overhead: 2, cost: 1.7, paced: 100}
			run := simulate(ctx, shared, Background, 10*time.Second)
			first := slices.IndexFunc(run, func(s sample) bool { return s.reason == Pausing })
			Expect(first).To(BeNumerically(">=", 0), "a first pause")
			before := slices.MaxFunc(run[:first+1], func(a, b sample) int { return a.limit - b.limit })
			during, alone := run.pacedP99()
			GinkgoWriter.Printf("from the start beside 100 writes/s, overhead 2: the first pause at %s (the limit at most %d before it); over 10 s %s; the paced client's p99 %s, alone %s (%.2fx)\n",
				run[first].at, before.limit, run, during.Round(time.Millisecond/10), alone.Round(time.Millisecond/10), float64(during)/float64(alone))
			Expect(before.limit).To(Equal(Start), "the limit before the first pause")
			Expect(run[first].at).To(BeNumerically("<", 100*time.Millisecond), "the first pause after the first write")
			Expect(float64(during)).To(BeNumerically("<=", 3*float64(alone)), "the paced client's p99 over the first 10 s")
		})

	// The start right after the run's own setup, which leaves the server at
	// 0.4 of its speed for the first half second: the first pause's write
	// takes 2.5 times as long as the engine's writes alone, and a
	// closed-loop client's rate alone reads at 0.4 of what it is. Taken at
	// their word, those measures show room for twice at every window.
	const setup, setupSpeed = 500 * time.Millisecond, 0.4
	startServers := []TableEntry{
		Entry("with a knee at 8 writers", simServer{capacity: capacity, knee: 8, cost: 1.7}, 2.0),
		// Its paced client alone takes 2.7 ms, where the target's 20 ms
		// floor dominates; no ratio is held beside it.
		Entry("whose own work shares its cores", simServer{capacity: capacity, overhead: 2, cost: 1.7}, 0.0),
	}
	// beforeSecondPause is the run up to its second pause, or all of it.
	beforeSecondPause := func(r simRun) simRun {
		pauses := 0
		for i := 1; i < len(r); i++ {
			if r[i].reason == Pausing && r[i-1].reason != Pausing {
				if pauses++; pauses == 2 {
					return r[:i]
				}
			}
		}
		return r
	}

	DescribeTable("the start right after the run's setup, beside a client paced at 100 writes/s: no more than Initial writers before a second pause, and the client's p99 over the 10 s after the setup within its bound",
		func(ctx SpecContext, server simServer, ratio float64) {
			server = server.afterSetup(setup, setupSpeed)
			server.paced = 100
			run := simulate(ctx, server, Background, setup+10*time.Second)
			during, alone := run.from(setup).pacedP99()
			GinkgoWriter.Printf("from the start after the setup, beside 100 writes/s, over 10 s: %s; at most %d writers before the second pause, %d in all; the paced client's p99 %s, alone %s (%.2fx)\n",
				run, beforeSecondPause(run).maxLimit(), run.maxLimit(), during.Round(time.Millisecond/10), alone.Round(time.Millisecond/10), float64(during)/float64(alone))
			Expect(beforeSecondPause(run).maxLimit()).To(BeNumerically("<=", Initial), "the limit before the second pause")
			Expect(during).To(BeNumerically("<=", pacedBound(alone)), "the paced client's p99 over the first 10 s: the target")
			if ratio > 0 {
				Expect(float64(during)).To(BeNumerically("<=", ratio*float64(alone)), "the paced client's p99 over the first 10 s, against alone")
			}
		},
		startServers,
	)

	DescribeTable("the start right after the run's setup, beside a 1-writer closed-loop client (its rate is 1/its latency): it keeps 50% of its rate alone or more over the 10 s after the setup, and no more than Initial writers before a second pause",
		func(ctx SpecContext, server simServer, _ float64) {
			server = server.afterSetup(setup, setupSpeed)
			server.closed = 1
			run := simulate(ctx, server, Background, setup+10*time.Second)
			GinkgoWriter.Printf("from the start after the setup, beside a 1-writer client, over 10 s: %s; at most %d writers before the second pause, %d in all\n",
				run.from(setup), beforeSecondPause(run).maxLimit(), run.maxLimit())
			Expect(beforeSecondPause(run).maxLimit()).To(BeNumerically("<=", Initial), "the limit before the second pause")
			Expect(run.from(setup).kept()).To(BeNumerically(">=", 0.5), "the 1-writer client's rate over the first 10 s, of its rate alone")
		},
		startServers,
	)

	DescribeTable("idle, the start costs nothing: the first 6,000 writes, the setup included, at 0.90 or more of the rate of 64 fixed writers (the ceiling)",
		func(ctx SpecContext, server simServer, _ float64) {
			server = server.afterSetup(setup, setupSpeed)
			background, ok := simulate(ctx, server, Background, d).until(6000)
			Expect(ok).To(BeTrue(), "6,000 writes within %s", d)
			ceiling, ok := simulateLimiter(ctx, server, New(64, true, Background), d).until(6000)
			Expect(ok).To(BeTrue(), "6,000 writes within %s", d)
			took, ceilingTook := background[len(background)-1].at, ceiling[len(ceiling)-1].at
			GinkgoWriter.Printf("idle, 6,000 writes: Background in %s, 64 fixed writers in %s: %.3f of the ceiling\n",
				took.Round(time.Millisecond), ceilingTook.Round(time.Millisecond), ceilingTook.Seconds()/took.Seconds())
			Expect(ceilingTook.Seconds() / took.Seconds()).To(BeNumerically(">=", 0.90))
		},
		startServers,
	)

	It("on a server whose own work shares its cores (a 2-core control plane), reaches the bound idle and leaves an 8-writer foreground 55% or more",
		func(ctx SpecContext) {
			shared := simServer{capacity: capacity, overhead: 2, cost: 1.7}
			run := simulate(ctx, shared, Background, d).secondHalf()
			GinkgoWriter.Printf("idle, overhead 2: %s\n", run)
			median, _, _, _ := run.limits(oscillation)
			Expect(median).To(Equal(64))
			shared.closed = 8
			run = simulate(ctx, shared, Background, d).secondHalf()
			GinkgoWriter.Printf("beside 8 foreground writers, overhead 2: %s\n", run)
			Expect(run.kept()).To(BeNumerically(">=", KeptPromised))
		})

	// The engine's single writer beside 8 closed-loop writers took twice
	// as long as its pause's write on the envtest control plane: the run's
	// own reads and watch keep the server busier than the pause left it.
	// The latency judge alone, against that base, held one writer while
	// the 8 writers kept three quarters of their rate, and the engine took
	// 0.14-0.29 of its idle rate.
	It("on a server where the run's own reads add to its writes, beside 8 writers: they keep 55% or more, the engine 0.3 of its idle rate or more",
		func(ctx SpecContext) {
			loaded := simServer{capacity: capacity, overhead: 2, cost: 1.7, runLoad: 1, busy: 1.7}
			idle := simulate(ctx, loaded, Background, d).secondHalf().rate()
			loaded.closed = 8
			run := simulate(ctx, loaded, Background, 2*d).secondHalf()
			GinkgoWriter.Printf("beside 8 foreground writers, overhead 2, the run's own load 1 and its writes 1.7x as long but the pauses': %s; %.2f of its idle rate\n", run, run.rate()/idle)
			recordShape("`overhead`, c = 1.7, with the run's own load: 8-writer client kept; the engine beside it, of its idle rate",
				"%.0f%%; %.2f", 100*run.kept(), run.rate()/idle)
			Expect(run.kept()).To(BeNumerically(">=", KeptPromised))
			Expect(run.rate()).To(BeNumerically(">=", 0.3*idle), "the engine's rate beside them, of its idle rate")
		})

	It("on a server whose own work shares its cores, beside a client paced at 100 writes/s: its p99 within 3x, not 2x, the engine half its idle rate or more",
		func(ctx SpecContext) {
			// Here one engine write is a large part of what the server
			// does for a paced client (overhead 2, the client 0.3 writers'
			// worth, an engine write 1.7), so the engine's latency over its
			// base (one write of its own included) grows slower than the
			// client's over its latency alone: at 2 writers, 1.4x against
			// 2.5x. Keeping the client within 2x would take the engine
			// under 1.4 writers, about 0.45 of its idle rate.
			shared := simServer{capacity: capacity, overhead: 2, cost: 1.7}
			idle := simulate(ctx, shared, Background, d).secondHalf().rate()
			shared.paced = 100
			run := simulate(ctx, shared, Background, d).secondHalf()
			during, alone := run.pacedP99()
			GinkgoWriter.Printf("beside 100 writes/s, overhead 2: %s; %.2f of its idle rate; the paced client's p99 %s, alone %s (%.2fx)\n",
				run, run.rate()/idle, during.Round(time.Millisecond/10), alone.Round(time.Millisecond/10), float64(during)/float64(alone))
			recordShape("`overhead`, c = 1.7: paced client's p99 beside the engine / alone, settled (the spec states 3x)", "%.2fx",
				float64(during)/float64(alone))
			Expect(float64(during)).To(BeNumerically("<=", 3*float64(alone)))
			Expect(run.rate()).To(BeNumerically(">=", 0.5*idle))
		})

	DescribeTable("on a server whose speed swings for every client at once, stays at the bound idle, leaves a 1-, 8- and 32-writer foreground half of its rate, and takes 0.3 of its idle rate beside 8",
		func(ctx SpecContext, period time.Duration, low float64) {
			swinging := idle.swinging(period, low, 2*d)
			swinging.cost = 1.7
			run := simulate(ctx, swinging, Background, 2*d).secondHalf()
			GinkgoWriter.Printf("idle, swinging every %s: %s\n", period, run)
			median, _, _, _ := run.limits(oscillation)
			Expect(median).To(Equal(64))
			idleRate := run.rate()
			for _, closed := range []int{1, 8, 32} {
				swinging.closed = closed
				run = simulate(ctx, swinging, Background, 2*d).secondHalf()
				GinkgoWriter.Printf("%d foreground writers, swinging every %s: %s; %.2f of its idle rate\n", closed, period, run, run.rate()/idleRate)
				recordShape(fmt.Sprintf("swinging to %.0f%% every %s, c = 1.7: %d-writer client kept; the engine beside it, of its idle rate", 100*low, period, closed),
					"%.0f%%; %.2f", 100*run.kept(), run.rate()/idleRate)
				Expect(run.kept()).To(BeNumerically(">=", 0.5), "%d foreground writers", closed)
				if closed == 8 {
					// One pause reads the others where the swing is, and
					// one window or two the swing as much as the engine:
					// a judge of those yields in every low and holds one
					// or two writers where three leave the others 61%.
					Expect(run.rate()).To(BeNumerically(">=", 0.3*idleRate), "the engine beside 8 foreground writers")
				}
			}
		},
		Entry("every 1.3 s", 1300*time.Millisecond, 0.4),
		Entry("every 2 s", 2*time.Second, 0.4),
		Entry("every 5 s", 5*time.Second, 0.4),
		// A deeper swing: the windows at one limit, a few seconds, read
		// it as harm; the fit over the windows of the last fitFor does not.
		Entry("every 5 s, to a quarter of its speed", 5*time.Second, 0.25),
	)

	It("comes down when a foreground client arrives after it took the idle server", func(ctx SpecContext) {
		// A limit of 64 on a server found idle, and now 16 foreground
		// writers beside it: they write more than a tenth of the engine's
		// rate, so the next window asks for a pause.
		server := simServer{capacity: capacity, knee: 8, cost: 1.7, closed: 16}
		from := State{Limit: 64, Reason: Holding, Measured: true, Idle: true, PauseEvery: maxPauseEvery, pauses: 2}
		run := simulate(ctx, server, Background, d, from)
		GinkgoWriter.Printf("from 64 beside 16 foreground writers: %s\n", run.secondHalf())
		Expect(run.secondHalf().kept()).To(BeNumerically(">=", KeptPromised))
		i := slices.IndexFunc(run, func(s sample) bool { return s.reason == Yielding || s.reason == Queueing })
		Expect(i).To(BeNumerically(">=", 0))
		Expect(run[i].at).To(BeNumerically("<", 3*time.Second), "yielding within 3 s, not at the next pause due")
	})

	It("sees a client it starves below a tenth of its rate at the next pause due, at most maxPauseEvery later", func(ctx SpecContext) {
		// One writer beside 64 engine writes costing 3 each gets about
		// 1/190 of the server: 5 writes/s beside the engine's 330.
		server := simServer{capacity: capacity, knee: 8, cost: 3, closed: 1}
		from := State{Limit: 64, Reason: Holding, Measured: true, Idle: true, PauseEvery: maxPauseEvery, pauses: 2}
		run := simulate(ctx, server, Background, 3*maxPauseEvery, from)
		i := slices.IndexFunc(run, func(s sample) bool { return s.reason == Yielding || s.reason == Queueing })
		Expect(i).To(BeNumerically(">=", 0))
		GinkgoWriter.Printf("a starved 1-writer client: yielding from %s; %s\n", run[i].at, run.secondHalf())
		Expect(run[i].at).To(BeNumerically(">", maxPauseEvery), "not seen before the pause: the engine cannot tell")
		// The pause comes with the first window closed after it is due, and
		// the first window after it takes a few seconds at 64 writes of
		// 0.6 s each (four writes a writer, and the writes in flight back).
		Expect(run[i].at).To(BeNumerically("<", maxPauseEvery+8*time.Second))
		Expect(run.secondHalf().kept()).To(BeNumerically(">=", KeptPromised))
	})

	It("with priority Full, takes the server: the bound beside a foreground", func(ctx SpecContext) {
		server := idle
		server.closed = 8
		server.cost = 1.7
		median, _, _, _ := simulate(ctx, server, Full, d).secondHalf().limits(oscillation)
		Expect(median).To(Equal(64), "beside 8 foreground writers")
	})

	It("halves on a throttle, once per burst, never below one writer", NodeTimeout(time.Minute), func(ctx SpecContext) {
		// APF seats: more than 12 writes in flight are refused with a 429.
		server := simServer{capacity: capacity, knee: 8, closed: 8, seats: 12}
		run := simulate(ctx, server, Full, 30*time.Second)
		halvings := 0
		for i := 1; i < len(run); i++ {
			if run[i].reason == BackingOff && run[i-1].reason != BackingOff {
				halvings++
				Expect(run[i].limit).To(Equal(max(1, run[i-1].limit/2)), "halved at %s", run[i].at)
			}
		}
		GinkgoWriter.Printf("Full beside 8 foreground writers with 12 seats: %d halvings\n", halvings)
		Expect(halvings).To(BeNumerically(">", 0))

		now := time.Now()
		l := New(64, false, Background)
		l.now = func() time.Time { return now }
		l.state = State{Limit: 16, Reason: Holding}
		for range 16 {
			Expect(l.Acquire(ctx)).To(Succeed())
		}
		now = now.Add(10 * time.Millisecond)
		for range 16 { // a burst of 429s of the writes in flight
			l.Release(Signal{Latency: 10 * time.Millisecond, Throttled: true})
		}
		Expect(l.Limit()).To(Equal(8), "one burst, one halving")
		for range 10 { // every write refused, each sent after the last halving
			Expect(l.Acquire(ctx)).To(Succeed())
			now = now.Add(time.Millisecond)
			l.Release(Signal{Latency: time.Millisecond, Throttled: true})
		}
		_, reason, _ := l.Status()
		Expect(l.Limit()).To(Equal(1), "never below one writer")
		Expect(reason).To(Equal(BackingOff))
	})
})

var _ = Describe("Next: the rule", func() {
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	// window returns a window of writers writers at rate writes/s, starting
	// at offset from t0 and lasting a second.
	window := func(writers, rate float64) Window {
		return Window{Start: t0, End: t0.Add(time.Second), Writes: int(rate), Writers: writers}
	}
	// beside makes w a window during which other clients' writes were
	// stored at others a second.
	beside := func(w Window, others float64) Window {
		w.OwnStored = int64(w.Writes)
		w.Stored = w.OwnStored + int64(others)
		return w
	}
	// slow gives w a mean latency, which makes its rate Writers / latency.
	slow := func(w Window, latency time.Duration) Window {
		w.Latency = latency
		return w
	}
	// measured is a Background state at limit whose last pauses (more than
	// the first) measured the others alone at alone writes/s.
	measured := func(limit int, alone float64) State {
		return State{Limit: limit, Reason: Holding, Measured: true, Alone: alone, Last: alone, PauseEvery: pauseEvery, pauses: 2}
	}
	idleAt := func(limit int) State {
		s := measured(limit, 0)
		s.Idle = true
		return s
	}
	// based is s with its pauses' writes measured at base.
	based := func(s State, base time.Duration) State {
		s.Base, s.BasePauses = base, basePauses
		s.bases = [basePauses]time.Duration{base, base, base, base}
		return s
	}
	// pausedFor is a pause's window, the others writing others a second
	// alone, ended by one write of the engine's taking latency.
	pausedFor := func(others float64, latency time.Duration) Window {
		return Window{Start: t0, End: t0.Add(time.Second / 4), Paused: true, Writes: 1, Latency: latency,
			OwnStored: 1, Stored: 1 + int64(others/4)}
	}
	// slowStart is s in its slow start.
	slowStart := func(s State) State {
		s.SlowStart = true
		return s
	}
	// after is s once it measured w at its limit: the rule moves the limit
	// from the second window at it on, and fits the others' slowdown
	// through both.
	after := func(s State, w Window) State {
		s.AtLimit = s.AtLimit.add(w, s.Limit)
		s.fit = s.fit.add(w, s.Limit)
		return s
	}
	// again is the state after w at s's limit, with w next: two alike.
	again := func(s State, w Window) (State, Window) { return after(s, w), w }
	entry := func(name string, s State, w Window, priority Priority, want State) TableEntry {
		return Entry(name, s, w, priority, want)
	}
	twice := func(name string, s State, w Window, priority Priority, want State) TableEntry {
		s, w = again(s, w)
		return entry(name+" (two windows alike)", s, w, priority, want)
	}

	DescribeTable("Full and an idle Background climb to the bound; beside others, the mean over the windows at a limit of the others' rate against their rate alone, and of the engine's latency against its base, moves the limit",
		func(s State, w Window, priority Priority, want State) {
			got := Next(s, w, priority, 64)
			Expect(got.Limit).To(Equal(want.Limit))
			Expect(got.Reason).To(Equal(want.Reason))
			Expect(got.Hold).To(Equal(want.Hold))
			Expect(got.SlowStart).To(Equal(want.SlowStart))
		},
		Entry("Full, the first window: double", State{Limit: 8, Reason: Probing}, window(8, 400), Full,
			State{Limit: 16, Reason: Probing}),
		Entry("Full, once the server pushed back: a quarter more", State{Limit: 8, Reason: BackingOff, Gentle: true}, window(8, 400), Full,
			State{Limit: 10, Reason: Probing}),
		Entry("Full, one writer: a step is at least one writer", State{Limit: 1, Reason: BackingOff, Gentle: true}, window(1, 50), Full,
			State{Limit: 2, Reason: Probing}),
		Entry("Full at the bound: hold", State{Limit: 64, Reason: Probing}, window(64, 400), Full,
			State{Limit: 64, Reason: Holding}),
		Entry("Full never yields: the others keep a tenth of their rate", measured(16, 1000), beside(window(16, 400), 100), Full,
			State{Limit: 32, Reason: Probing}),
		Entry("Full, the rate fell (a swing, the others): not a collapse, climb on", State{Limit: 32, Best: 1000, BestLatency: 32 * time.Millisecond},
			slow(beside(window(32, 300), 200), 100*time.Millisecond), Full, State{Limit: 64, Reason: Probing}),
		Entry("Full, the server stores under a quarter of its best, its writes 5x slower: halve", State{Limit: 64, Best: 1000, BestLatency: 64 * time.Millisecond},
			slow(window(64, 200), 320*time.Millisecond), Full, State{Limit: 32, Reason: BackingOff, Hold: holdWindows}),
		Entry("Full at 64 writers, under a quarter of the best the server stored beside 8 (others wrote then), its writes 20x as long as then at 8x the writers (a swing): not a collapse",
			State{Limit: 64, Best: 2000, BestLatency: 8 * time.Millisecond, bestWriters: 8}, slow(window(64, 400), 160*time.Millisecond), Full,
			State{Limit: 64, Reason: Holding}),
		Entry("Full at 64 writers, under a quarter of that best, its writes 40x as long as then at 8x the writers: halve",
			State{Limit: 64, Best: 2000, BestLatency: 8 * time.Millisecond, bestWriters: 8}, slow(window(64, 200), 320*time.Millisecond), Full,
			State{Limit: 32, Reason: BackingOff, Hold: holdWindows}),
		Entry("Full, under a quarter of its best but as fast as then (the engine short of objects): not a collapse",
			State{Limit: 64, Best: 1000, BestLatency: 64 * time.Millisecond}, slow(window(12, 190), 64*time.Millisecond), Full,
			State{Limit: 64, Reason: Holding}),
		Entry("Background, before the first pause: hold", State{Limit: 8, Reason: Probing}, beside(window(8, 400), 100), Background,
			State{Limit: 8, Reason: Holding}),
		Entry("Background, a window before any pause (no revision to pause by): up to Initial", State{Limit: Start, Reason: Probing},
			window(1, 100), Background, State{Limit: Initial, Reason: Probing}),
		Entry("Background's first pause, after its first write, finds others writing: a slow start from one writer",
			State{Limit: Start, Reason: Pausing}, pausedFor(400, 10*time.Millisecond), Background,
			State{Limit: 1, Reason: Holding, SlowStart: true}),
		Entry("Background's first pause finds others under a tenth of one writer's rate (the pause's write, 10 ms: 100/s): idle, up to Initial",
			State{Limit: Start, Reason: Pausing}, pausedFor(8, 10*time.Millisecond), Background,
			State{Limit: Initial, Reason: Probing}),
		Entry("a later pause finds others writing: no slow start", State{Limit: 16, Reason: Pausing, Measured: true, Idle: true, Rate: 400},
			pausedFor(400, 10*time.Millisecond), Background, State{Limit: 16, Reason: Holding}),
		entry("slow start, the others keep their rate and its writes take their base (room for twice): double, from the first window",
			slowStart(based(measured(2, 100), 10*time.Millisecond)), slow(beside(window(2, 200), 100), 10*time.Millisecond), Background,
			State{Limit: 4, Reason: Probing, SlowStart: true}),
		entry("slow start, own writes 1.2x their base at 4 writers (1.4x lies at 7, under twice): over; the first window at a limit holds",
			slowStart(based(measured(4, 100), 10*time.Millisecond)), slow(beside(window(4, 400), 100), 12*time.Millisecond), Background,
			State{Limit: 4, Reason: Holding}),
		entry("slow start, the others keep 20%: over, down by half at once", slowStart(measured(16, 1000)), beside(window(16, 400), 200), Background,
			State{Limit: 8, Reason: Yielding}),
		Entry("slow start, a 429: over, halve", slowStart(measured(8, 1000)), Window{Throttled: true}, Background,
			State{Limit: 4, Reason: BackingOff, Hold: holdWindows}),
		Entry("Background on an idle server: as Full, double", idleAt(16), beside(window(16, 400), 10), Background,
			State{Limit: 32, Reason: Probing}),
		Entry("Background on an idle server, collapsed: halve", func() State { s := idleAt(64); s.Best, s.BestLatency = 1000, 64*time.Millisecond; return s }(),
			slow(window(64, 200), 320*time.Millisecond), Background, State{Limit: 32, Reason: BackingOff, Hold: holdWindows}),
		twice("others keep all of their rate (a paced client): a quarter more", measured(32, 100), beside(window(32, 400), 100), Background,
			State{Limit: 40, Reason: Probing}),
		twice("others keep 80%: a quarter more", measured(10, 1000), beside(window(10, 400), 800), Background,
			State{Limit: 13, Reason: Probing}),
		twice("others keep 60% (where 62% lies at 9 writers): hold", measured(10, 1000), beside(window(10, 400), 600), Background,
			State{Limit: 10, Reason: Holding}),
		twice("others keep 56%: a writer fewer at least", measured(10, 1000), beside(window(10, 400), 560), Background,
			State{Limit: 7, Reason: Yielding}),
		twice("others keep 50%: down to where they would keep 62%", measured(10, 1000), beside(window(10, 400), 500), Background,
			State{Limit: 6, Reason: Yielding}),
		twice("others keep 20%: down by half at most", measured(16, 1000), beside(window(16, 400), 200), Background,
			State{Limit: 8, Reason: Yielding}),
		twice("the engine did not fill its slots: judged at the writers it used", measured(32, 1000), beside(window(10, 400), 500), Background,
			State{Limit: 6, Reason: Yielding}),
		twice("one writer: never below it", measured(1, 1000), beside(window(1, 50), 300), Background,
			State{Limit: 1, Reason: Yielding}),
		entry("the first window at a limit, others keep 50% (the server's swing as much as the engine's): hold", measured(10, 1000),
			beside(window(10, 400), 500), Background, State{Limit: 10, Reason: Holding}),
		entry("the first window at a limit, others keep 10%, under half the bound: down by half at once", measured(16, 1000),
			beside(window(16, 400), 100), Background, State{Limit: 8, Reason: Yielding}),
		entry("others keep 40%, then 80%: the mean of the windows at one limit, 60%, holds", after(measured(10, 1000), beside(window(10, 400), 400)),
			beside(window(10, 400), 800), Background, State{Limit: 10, Reason: Holding}),
		twice("own writes 1.2x their base, the others keep their rate: a quarter more", based(measured(10, 100), 10*time.Millisecond),
			slow(beside(window(10, 400), 100), 12*time.Millisecond), Background, State{Limit: 13, Reason: Probing}),
		twice("own writes 1.6x their base (where 1.4x lies at 7 writers): hold", based(measured(10, 100), 10*time.Millisecond),
			slow(beside(window(10, 400), 100), 16*time.Millisecond), Background, State{Limit: 10, Reason: Holding}),
		twice("own writes 2.2x their base, the others keep their rate (a paced client): down to where they would take 1.4x", based(measured(16, 100), 10*time.Millisecond),
			slow(beside(window(16, 400), 100), 22*time.Millisecond), Background, State{Limit: 8, Reason: Queueing}),
		twice("own writes 1.75x their base: a writer fewer at least", based(measured(3, 100), 10*time.Millisecond),
			slow(beside(window(3, 400), 100), 17500*time.Microsecond), Background, State{Limit: 2, Reason: Queueing}),
		entry("the first window at a limit, own writes 4x their base, twice the bound: down at once", based(measured(16, 100), 10*time.Millisecond),
			slow(beside(window(16, 400), 100), 40*time.Millisecond), Background, State{Limit: 8, Reason: Queueing}),
		twice("others keep 50%, own writes 1.2x: the stricter, the others' rate", based(measured(10, 1000), 10*time.Millisecond),
			slow(beside(window(10, 400), 500), 12*time.Millisecond), Background, State{Limit: 6, Reason: Yielding}),
		twice("others keep 95% (paced, or barely touched), own writes 2x: the stricter, the latency", based(measured(10, 1000), 10*time.Millisecond),
			slow(beside(window(10, 400), 950), 20*time.Millisecond), Background, State{Limit: 5, Reason: Queueing}),
		twice("others keep 80% (their rate answers the engine's writes: closed-loop), own writes 2x: their rate judges, a quarter more", based(measured(10, 1000), 10*time.Millisecond),
			slow(beside(window(10, 400), 800), 20*time.Millisecond), Background, State{Limit: 13, Reason: Probing}),
		twice("one writer, others keep 92% (8 closed-loop writers beside one: the fit says 85% beside two), own writes 2x: their rate judges, a writer more", based(measured(1, 1000), 10*time.Millisecond),
			slow(beside(window(1, 100), 920), 20*time.Millisecond), Background, State{Limit: 2, Reason: Probing}),
		twice("others keep 80%, own writes 4x, twice the latency bound: the latency, severe, still judges", based(measured(10, 1000), 10*time.Millisecond),
			slow(beside(window(10, 400), 800), 40*time.Millisecond), Background, State{Limit: 5, Reason: Queueing}),
		twice("one writer, own writes 3x: never below it", based(measured(1, 100), 10*time.Millisecond),
			slow(beside(window(1, 50), 100), 30*time.Millisecond), Background, State{Limit: 1, Reason: Queueing}),
		twice("before a pause measured its base: the latency judges nothing", measured(10, 100),
			slow(beside(window(10, 400), 100), 50*time.Millisecond), Background, State{Limit: 13, Reason: Probing}),
		twice("idle, own writes 5x their base: Full, double", based(idleAt(16), 10*time.Millisecond),
			slow(beside(window(16, 400), 10), 50*time.Millisecond), Background, State{Limit: 32, Reason: Probing}),
		Entry("a 429, 5xx or timeout: halve, hold", measured(10, 1000), Window{Throttled: true}, Background,
			State{Limit: 5, Reason: BackingOff, Hold: holdWindows}),
		Entry("never below one writer", State{Limit: 1, Reason: BackingOff}, Window{Throttled: true}, Full,
			State{Limit: 1, Reason: BackingOff, Hold: holdWindows}),
		Entry("after a throttle: one window fewer to wait", State{Limit: 8, Reason: BackingOff, Hold: 2}, window(8, 400), Full,
			State{Limit: 8, Reason: BackingOff, Hold: 1}),
	)

	// firstPaused is Background at limit after its first pause found
	// others writing alone writes/s and its write took base: in its slow
	// start, on measures taken right after the run's setup.
	firstPaused := func(limit int, alone float64, base time.Duration) State {
		return State{Limit: limit, Reason: Holding, Measured: true, Alone: alone, Last: alone, PauseEvery: pauseEvery,
			Base: base, BasePauses: 1, SlowStart: true, pauses: 1}
	}
	DescribeTable("the start: beside others, no more than Initial writers until a second pause measured them, which is then due at once",
		func(s State, w Window, want State) {
			got := Next(s, w, Background, 64)
			Expect(got.Limit).To(Equal(want.Limit))
			Expect(got.Reason).To(Equal(want.Reason))
			Expect(got.PauseEvery).To(Equal(want.PauseEvery))
			Expect(got.SlowStart).To(Equal(want.SlowStart))
		},
		Entry("slow start at 4, room for twice: double to Initial", firstPaused(4, 100, 10*time.Millisecond),
			slow(beside(window(4, 400), 100), 10*time.Millisecond), State{Limit: 8, Reason: Probing, PauseEvery: pauseEvery, SlowStart: true}),
		Entry("slow start at 5, room for twice: up to Initial, not 10", firstPaused(5, 100, 10*time.Millisecond),
			slow(beside(window(5, 400), 100), 10*time.Millisecond), State{Limit: 8, Reason: Probing, PauseEvery: pauseEvery, SlowStart: true}),
		Entry("slow start at Initial, room for twice on the first pause's word: hold, pause at once", firstPaused(8, 100, 10*time.Millisecond),
			slow(beside(window(8, 400), 100), 10*time.Millisecond), State{Limit: 8, Reason: Holding, PauseEvery: 0, SlowStart: true}),
		Entry("slow start at Initial after the second pause: double past it", func() State { s := firstPaused(8, 100, 10*time.Millisecond); s.pauses = 2; return s }(),
			slow(beside(window(8, 400), 100), 10*time.Millisecond), State{Limit: 16, Reason: Probing, PauseEvery: pauseEvery, SlowStart: true}),
		Entry("slow start at Initial, queueing: over, by the rule (the first window at a limit holds), no pause", firstPaused(8, 100, 10*time.Millisecond),
			slow(beside(window(8, 400), 100), 16*time.Millisecond), State{Limit: 8, Reason: Holding, PauseEvery: pauseEvery}),
		Entry("the rule with room above, one pause so far: hold, pause at once",
			func() State {
				s := firstPaused(8, 100, 10*time.Millisecond)
				s.SlowStart = false
				return after(s, slow(beside(window(8, 400), 100), 11*time.Millisecond))
			}(),
			slow(beside(window(8, 400), 100), 11*time.Millisecond), State{Limit: 8, Reason: Holding, PauseEvery: 0}),
		Entry("idle at Initial, a window finds others writing a tenth of the engine's rate: no climb, pause at once",
			idleAt(8), beside(window(8, 400), 40), State{Limit: 8, Reason: Holding, PauseEvery: 0}),
		Entry("idle at Initial, a window finds others under a tenth: double", idleAt(8), beside(window(8, 400), 30),
			State{Limit: 16, Reason: Probing, PauseEvery: pauseEvery}),
	)

	It("stops its climbs under a limit climbs reached twice that harmed the others over the windows judged, for ceilingFor; a harm at a limit that held, or in one window, sets no ceiling", func() {
		// A climb to 10 finds the others at half their rate: down, no
		// ceiling yet (one failed probe may be a noisy base's).
		s := measured(10, 1000)
		s.Reason = Probing
		harm := beside(window(10, 400), 500)
		s = Next(after(s, harm), harm, Background, 64)
		Expect(s.Limit).To(Equal(6))
		Expect(s.Reason).To(Equal(Yielding))
		Expect(s.Ceiling).To(BeZero())
		// A second climb to 10 within ceilingFor, the same harm: a
		// ceiling at 10.
		s.Limit, s.Reason, s.AtLimit = 10, Probing, AtLimit{}
		s = Next(after(s, harm), harm, Background, 64)
		Expect(s.Limit).To(Equal(6))
		Expect(s.Ceiling).To(Equal(10))
		Expect(s.CeilingUntil).To(Equal(harm.End.Add(ceilingFor)))
		// Room for many more: the climbs stop at 9.
		room := beside(window(6, 400), 1000)
		for range 10 {
			s = Next(after(s, room), room, Background, 64)
		}
		Expect(s.Limit).To(Equal(9))
		Expect(s.Reason).To(Equal(Holding))
		// Past ceilingFor, the climbs go on.
		later := room
		later.Start, later.End = harm.End.Add(ceilingFor), harm.End.Add(ceilingFor+time.Second)
		s = Next(after(s, later), later, Background, 64)
		Expect(s.Limit).To(BeNumerically(">", 9))
		// A harm at a limit that held (a swing of the server's) sets none.
		held := measured(10, 1000)
		held = Next(after(held, harm), harm, Background, 64)
		Expect(held.Limit).To(Equal(6))
		Expect(held.Ceiling).To(BeZero())
		Expect(held.failed).To(BeZero())
		// Nor one severe window at a limit just climbed to (a stall).
		stalled := measured(10, 1000)
		stalled.Reason = Probing
		stalled = Next(stalled, beside(window(10, 400), 100), Background, 64)
		Expect(stalled.Limit).To(Equal(5))
		Expect(stalled.failed).To(BeZero())
	})

	It("takes the second pause's measures in place of the first's, which followed the run's setup", func() {
		s := Next(State{Limit: Start, Reason: Pausing}, pausedFor(400, 30*time.Millisecond), Background, 64)
		Expect(s).To(And(HaveField("SlowStart", true), HaveField("Base", 30*time.Millisecond), HaveField("Alone", BeNumerically("~", 400, 10))))
		s.Reason = Pausing
		s = Next(s, pausedFor(800, 10*time.Millisecond), Background, 64)
		Expect(s).To(And(HaveField("Base", 10*time.Millisecond), HaveField("Alone", BeNumerically("~", 800, 10))),
			"the second pause's, not the mean with the first's")
		Expect(s.pauses).To(Equal(2))
		s.Reason = Pausing
		s = Next(s, pausedFor(400, 20*time.Millisecond), Background, 64)
		Expect(s).To(And(HaveField("Base", 15*time.Millisecond), HaveField("Alone", BeNumerically("~", 600, 10))),
			"from the third, the means: of the last two alone, and of the writes but the first's 30 ms (three times the least)")
	})

	It("takes as its base the mean of its last pauses' writes without those a stall slowed, more than twice the least", func() {
		s := Next(State{Limit: Start, Reason: Pausing}, pausedFor(100, 4500*time.Microsecond), Background, 64)
		s.Reason = Pausing
		s = Next(s, pausedFor(100, 16500*time.Microsecond), Background, 64)
		Expect(s.Base).To(Equal(4500*time.Microsecond), "16.5 ms met a stall")
		s.Reason = Pausing
		s = Next(s, pausedFor(100, 5500*time.Microsecond), Background, 64)
		Expect(s.Base).To(Equal(5*time.Millisecond), "the mean of 4.5 and 5.5 ms")
	})

	It("takes in a pause: the others' rate alone, the second pause's (a second after the first) in place of the first's, then the mean of the last alonePauses since the others came, and the next pause sooner while they write", func() {
		pause := func(others float64) Window {
			return beside(Window{Start: t0, End: t0.Add(time.Second / 4), Paused: true, Writes: 1}, others/4)
		}
		s := Next(State{Limit: 8, Reason: Pausing}, window(8, 400), Background, 64)
		s = Next(s, pause(800), Background, 64)
		Expect(s).To(And(HaveField("Measured", true), HaveField("Alone", BeNumerically("~", 800, 10)), HaveField("Idle", false),
			HaveField("PauseEvery", secondPauseAfter), HaveField("Limit", 8)), "the second pause soon after the first")
		s = Next(s, pause(400), Background, 64)
		Expect(s.Alone).To(BeNumerically("~", 400, 10), "the second pause's, in place of the first's (which followed the run's setup)")
		Expect(s.PauseEvery).To(Equal(pauseEvery), "from the second on, every pauseEvery")
		s = Next(s, pause(800), Background, 64)
		Expect(s.Alone).To(BeNumerically("~", 600, 10), "the mean of the pauses")
		s = Next(s, pause(400), Background, 64)
		s = Next(s, pause(400), Background, 64)
		Expect(s.Alone).To(BeNumerically("~", 500, 10))
		for range alonePauses {
			s = Next(s, pause(700), Background, 64)
		}
		Expect(s.Alone).To(BeNumerically("~", 700, 10), "the mean of the last alonePauses")

		s = Next(s, pause(20), Background, 64)
		Expect(s).To(And(HaveField("Idle", true), HaveField("PauseEvery", idlePauseEvery)), "under a tenth of the engine's 400/s")
		Expect(s.Base).To(BeZero(), "no pause's write measured a latency")
		s = Next(s, pause(20), Background, 64)
		s = Next(s, pause(20), Background, 64)
		Expect(s.PauseEvery).To(Equal(maxPauseEvery))
		s = Next(s, beside(window(64, 400), 100), Background, 64)
		Expect(s).To(And(HaveField("PauseEvery", BeZero()), HaveField("Limit", 8), HaveField("Reason", Holding)),
			"others write a tenth of the engine's rate: no climb, measure them at once")

		// The pauses' writes took 10, 12, 14, 16 and 18 ms: a server
		// slowing down, followed as the mean of the last four.
		for i, want := range []time.Duration{10000, 11000, 12000, 13000, 15000} {
			p := pause(400)
			p.Latency = time.Duration(10+2*i) * time.Millisecond
			s = Next(s, p, Background, 64)
			Expect(s.Base).To(Equal(want*time.Microsecond), "the base: the mean of the pauses' writes, over the last basePauses")
			Expect(s.Alone).To(BeNumerically("~", 400, 10), "the others came: the idle server's pauses measured no one")
		}
	})
})

// The limiter's specs run it on a fake clock that moves only when they move
// it: a writer waiting for a pause to end waits for ever. NodeTimeout makes
// that a failure with a stack, not a test binary killed after 10 minutes.
var _ = Describe("The limiter", func() {
	It("measures windows of the writes made under the current limit only", NodeTimeout(time.Minute), func(ctx SpecContext) {
		now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
		l := New(64, false, Full)
		l.now = func() time.Time { return now }
		// 8 writers (the first limit), 10 ms each: 800 writes/s.
		for range 100 {
			for l.inFlight < l.Limit() {
				Expect(l.Acquire(ctx)).To(Succeed())
			}
			now = now.Add(10 * time.Millisecond)
			for range 8 {
				l.Release(Signal{Latency: 10 * time.Millisecond})
			}
			if l.Limit() != 8 {
				break
			}
		}
		limit, reason, rate := l.Status()
		Expect(limit).To(Equal(16), "doubling")
		Expect(reason).To(Equal(Probing))
		Expect(rate).To(BeNumerically("~", 800, 40))
		Expect(l.lastWindow.Writers).To(BeNumerically("~", 8, 0.1))
		// The writes in flight from before the change do not open the new
		// window: only writes sent under 16 do.
		Expect(l.inFlight).To(Equal(0))
		Expect(l.win.Start.IsZero()).To(BeTrue())
	})

	It("counts the writes the server stored by etcd's revision: its own, and others' in between", NodeTimeout(time.Minute), func(ctx SpecContext) {
		l := New(64, false, Full)
		now := time.Now()
		l.now = func() time.Time { return now }
		l.state = State{Limit: 8, Reason: Holding, Hold: 100}
		revision := uint64(1000)
		var windows []Window
		for first := true; len(windows) < 3; first = false {
			// Eight writes sent and stored in turn, two writes of other
			// clients before each; the last stored is answered first, so
			// that a window can close while writes it covers are stored
			// but not yet answered.
			revisions := make([]uint64, 8)
			for i := range 8 {
				Expect(l.Acquire(ctx)).To(Succeed())
				revision += 3
				revisions[i] = revision
				if i == 0 && !first {
					// An object already stored as it would be: the server
					// stored nothing and gives back its old revision.
					revision--
					revisions[i] = 7
				}
			}
			now = now.Add(10 * time.Millisecond)
			for i := 7; i >= 0; i-- {
				before := l.lastWindow
				l.Release(Signal{Latency: 10 * time.Millisecond, Revision: revisions[i]})
				if l.lastWindow != before {
					windows = append(windows, l.lastWindow)
				}
			}
		}
		for _, w := range windows[1:] {
			// 8 writers, 10 ms each: 800 writes/s of its own (7 of 8
			// stored). Others: two writes before each of the engine's.
			Expect(w.Others()).To(BeNumerically("~", 1600, 80), "stored %d, of which the engine's %d", w.Stored, w.OwnStored)
		}
	})

	It("counts its own writes stored but not yet answered when a window closes as its own: alone, nobody else writes", NodeTimeout(time.Minute), func(ctx SpecContext) {
		l := New(64, false, Full)
		now := time.Now()
		l.now = func() time.Time { return now }
		l.state = State{Limit: 32, Reason: Holding, Hold: 100}
		revision := uint64(1000)
		var windows []Window
		for len(windows) < 5 {
			// 32 writes stored in turn, nobody else writing; the last
			// stored is answered first, 30 ms later.
			n := l.Limit()
			for range n {
				Expect(l.Acquire(ctx)).To(Succeed())
			}
			now = now.Add(30 * time.Millisecond)
			for i := range n {
				before := l.lastWindow
				l.Release(Signal{Latency: 30 * time.Millisecond, Revision: revision + uint64(n-i)})
				if l.lastWindow != before {
					windows = append(windows, l.lastWindow)
				}
			}
			revision += uint64(n)
		}
		for _, w := range windows[1:] {
			Expect(w.Others()).To(BeZero(), "stored %d, of which the engine's %d", w.Stored, w.OwnStored)
		}
	})

	It("pauses: lets its writes in flight finish, sends none for a moment, then one, whose revision gives the others' rate alone", NodeTimeout(time.Minute), func(ctx SpecContext) {
		now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
		l := New(64, false, Background)
		l.now = func() time.Time { return now }
		var reasons []Reason
		l.onChange = func(_ int, r Reason, _ float64) { reasons = append(reasons, r) }
		// Others write 5 each ms, whatever the engine does; the engine's
		// writes take 10 ms and are stored as they are answered.
		revision := uint64(1000)
		tick := func(d time.Duration) {
			now = now.Add(d)
			revision += uint64(5 * d / time.Millisecond)
		}
		for l.state.Reason != Pausing {
			n := 0
			for ok, _ := l.tryAcquire(); ok; ok, _ = l.tryAcquire() {
				n++
			}
			Expect(n).To(BeNumerically(">", 0))
			tick(10 * time.Millisecond)
			for range n {
				revision++
				l.Release(Signal{Latency: 10 * time.Millisecond, Revision: revision})
			}
		}
		Expect(l.inFlight).To(BeZero())
		ok, wait := l.tryAcquire()
		Expect(ok).To(BeFalse(), "paused")
		Expect(wait).To(Equal(pauseLength), "the first pause")
		tick(pauseLength)
		Expect(l.tryAcquire()).To(BeTrue(), "one write ends the pause")
		Expect(l.tryAcquire()).To(BeFalse(), "only one")
		tick(2 * time.Millisecond)
		revision++
		l.Release(Signal{Latency: 2 * time.Millisecond, Revision: revision})
		Expect(l.state.Measured).To(BeTrue())
		Expect(l.state.Alone).To(BeNumerically("~", 5000, 100), "5 writes a millisecond")
		Expect(l.state.Base).To(Equal(2*time.Millisecond), "the base: the pause's write alone")
		Expect(l.state.Idle).To(BeFalse())
		Expect(reasons).To(ContainElement(Pausing))
		Expect(l.tryAcquire()).To(BeTrue(), "writing again")
	})

	It("never pauses with priority Full, or with a fixed concurrency", NodeTimeout(time.Minute), func(ctx SpecContext) {
		for _, l := range []*Gate{New(64, false, Full), New(16, true, Background)} {
			now := time.Now()
			l.now = func() time.Time { return now }
			for i := range 2000 {
				Expect(l.Acquire(ctx)).To(Succeed())
				now = now.Add(time.Millisecond)
				l.Release(Signal{Latency: time.Millisecond, Revision: uint64(1000 + 3*i)})
				Expect(l.phase).To(Equal(running))
			}
		}
	})

	It("holds every writer back for a Retry-After, and frees a slot on release", NodeTimeout(time.Minute), func(ctx SpecContext) {
		l := New(64, false, "")
		l.state = State{Limit: 4, Reason: Holding}
		now := time.Now()
		l.now = func() time.Time { return now }
		Expect(l.Acquire(ctx)).To(Succeed())
		l.Release(Signal{Latency: 10 * time.Millisecond, Throttled: true, RetryAfter: time.Hour})
		Expect(l.Limit()).To(Equal(2), "halved from 4")
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		Expect(l.Acquire(short)).To(MatchError(context.DeadlineExceeded), "held back by Retry-After")
		now = now.Add(2 * time.Hour)
		Expect(l.Acquire(ctx)).To(Succeed())
		Expect(l.Acquire(ctx)).To(Succeed())
		blocked, cancel2 := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel2()
		Expect(l.Acquire(blocked)).To(HaveOccurred(), "both slots taken")
		l.Release(Signal{Latency: 10 * time.Millisecond})
		Expect(l.Acquire(ctx)).To(Succeed(), "a released slot is free again")
	})

	It("reports Fixed and never adapts when fixed", func() {
		l := New(16, true, Background)
		l.Release(Signal{Throttled: true})
		limit, reason, _ := l.Status()
		Expect(limit).To(Equal(16))
		Expect(reason).To(Equal(Fixed))
	})
})
