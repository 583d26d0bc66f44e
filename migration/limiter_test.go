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
	"container/heap"
	"context"
	"math/rand/v2"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// simServer is a simulated API server: its throughput grows in proportion
// to the requests in flight up to the knee and stays flat past it (or
// grows by beyond over each doubling past it), and requests in flight share
// it evenly, so each takes n / throughput(n) to answer. Besides the engine,
// foreground closed-loop writers keep writes in flight all the time. With
// seats > 0, a write sent while more than seats are in flight is refused at
// once with a 429, as API Priority and Fairness would.
type simServer struct {
	capacity   float64 // writes per second at the knee
	knee       int
	beyond     float64
	foreground int
	seats      int
	// overhead, when set, replaces the knee: the server shares its capacity
	// among the writes in flight and overhead writers' worth of its own work
	// (and its clients', on the same cores), so that the rate bends from
	// the first writer, as a 2-core envtest control plane's does.
	overhead float64
	// swings, when set, are the moments the whole server's speed changes
	// between full and swingLow: a swing that every client sees at once,
	// as the envtest control plane's rates do (both clients' rates fall
	// together to about 40% and back, every 1.3 to 2 seconds).
	swings   []time.Duration
	swingLow float64
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
	if i, _ := slices.BinarySearch(s.swings, elapsed); i%2 == 1 {
		return s.swingLow
	}
	return 1
}

func (s simServer) throughput(n int) float64 {
	if s.overhead > 0 {
		return s.capacity * float64(n) / (float64(n) + s.overhead)
	}
	x := s.capacity * float64(min(n, s.knee)) / float64(s.knee)
	for k := 2 * s.knee; k <= n; k *= 2 {
		x *= 1 + s.beyond
	}
	return x
}

// latency of a write sent at elapsed with n writes in flight, its own
// included, give or take a fifth (jitter in [0, 1)).
func (s simServer) latency(elapsed time.Duration, n int, jitter float64) time.Duration {
	return time.Duration(float64(n) / (s.throughput(n) * s.speed(elapsed)) * (0.8 + 0.4*jitter) * float64(time.Second))
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

// sample is the limiter's state at one moment of a simulation.
type sample struct {
	at     time.Duration
	limit  int
	reason LimitReason
}

// simulate runs the real limiter against the server on a fake clock for d:
// the engine always has objects to write, so it keeps as many writes in
// flight as the limit allows; each completes after the server's latency at
// the moment it was sent. It returns the limit after every write.
func simulate(ctx context.Context, server simServer, priority Priority, d time.Duration, from ...LimitState) []sample {
	GinkgoHelper()
	start := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	now := start
	l := newLimiter(DefaultConcurrency, false, priority)
	l.now = func() time.Time { return now }
	for _, s := range from {
		l.state = s
	}
	var pending completions
	var samples []sample
	// own and others count the writes stored, the engine's and the
	// foreground's: the revision a write is given is their sum.
	var own uint64
	var others float64
	random := rand.New(rand.NewPCG(20, 26))
	for now.Sub(start) < d {
		for l.inFlight < l.Limit() {
			Expect(l.Acquire(ctx)).To(Succeed())
			n := l.inFlight + server.foreground
			if server.seats > 0 && n > server.seats {
				heap.Push(&pending, completion{at: now.Add(time.Millisecond), started: now, throttled: true})
				continue
			}
			heap.Push(&pending, completion{at: now.Add(server.latency(now.Sub(start), n, random.Float64())), started: now})
		}
		c := heap.Pop(&pending).(completion)
		// The foreground's writes stored meanwhile, each taking the
		// latency of a write sent with as many in flight.
		if n := l.inFlight + server.foreground; server.foreground > 0 {
			others += float64(server.foreground) / server.latency(now.Sub(start), n, 0.5).Seconds() * c.at.Sub(now).Seconds()
		}
		now = c.at
		signal := Signal{Latency: now.Sub(c.started), Throttled: c.throttled}
		if !c.throttled {
			own++
			signal.Revision = own + uint64(others)
		}
		l.Release(signal)
		limit, reason, _ := l.Status()
		Expect(limit).To(BeNumerically(">=", 1), "never below one writer")
		Expect(limit).To(BeNumerically("<=", DefaultConcurrency), "never above the bound")
		samples = append(samples, sample{at: now.Sub(start), limit: limit, reason: reason})
	}
	return samples
}

// settled summarizes the second half of a simulation: the median of the
// limits its writes were sent under (where the limit settled), the least
// and the most (probes included), and the share of its writes sent under a
// limit outside [lo, hi].
func settled(samples []sample, lo, hi float64) (median, least, most int, outside float64) {
	last := samples[len(samples)-1].at
	var limits []int
	out := 0
	for _, s := range samples {
		if s.at < last/2 {
			continue
		}
		limits = append(limits, s.limit)
		if float64(s.limit) < lo || float64(s.limit) > hi {
			out++
		}
	}
	slices.Sort(limits)
	return limits[len(limits)/2], limits[0], limits[len(limits)-1], float64(out) / float64(len(limits))
}

var _ = Describe("The adaptive limit, on a simulated API server (fake clock)", func() {
	const capacity = 1000 // writes per second at the knee
	idle := simServer{capacity: capacity, knee: 8}

	It("settles at the knee of an idle server, within [6, 12]", func(ctx SpecContext) {
		held, least, most, outside := settled(simulate(ctx, idle, PriorityBackground, 60*time.Second), 6, 12)
		GinkgoWriter.Printf("idle, knee 8: settled at %d (median), range [%d, %d], %.0f%% of writes outside [6, 12]\n", held, least, most, 100*outside)
		Expect(held).To(BeNumerically(">=", 6))
		Expect(held).To(BeNumerically("<=", 12))
		Expect(outside).To(BeNumerically("<", 0.1), "probes and noise included")
	})

	DescribeTable("settles near a fair share beside F closed-loop foreground writers: within 0.6x-1.5x of F",
		func(ctx SpecContext, foreground int) {
			server := idle
			server.foreground = foreground
			lo, hi := 0.6*float64(foreground), 1.5*float64(foreground)
			held, least, most, outside := settled(simulate(ctx, server, PriorityBackground, 60*time.Second), lo, hi)
			kept := server.throughput(foreground+held) / server.throughput(foreground) * float64(foreground) / float64(foreground+held)
			GinkgoWriter.Printf("%d foreground writers: settled at %d (median, %.2fx), range [%d, %d], %.0f%% of writes outside [%.1f, %.1f]; the foreground keeps %.0f%% of its rate alone\n",
				foreground, held, float64(held)/float64(foreground), least, most, 100*outside, lo, hi, 100*kept)
			Expect(float64(held)).To(BeNumerically(">=", lo))
			Expect(float64(held)).To(BeNumerically("<=", hi))
			Expect(outside).To(BeNumerically("<", 0.25), "probes and noise included: the limit wanders around F, and comes back")
		},
		Entry("8 foreground writers", 8),
		Entry("32 foreground writers", 32),
		Entry("64 foreground writers", 64),
	)

	It("on a server whose own work shares its cores (a 2-core control plane), reaches 80% of its rate at 64 writers idle and leaves an 8-writer foreground half of its own",
		func(ctx SpecContext) {
			// The curve measured on this project's 2-core envtest control
			// plane bends as if about two writers of the server's own were
			// always in flight: rate = C * n / (n + 2). The benchmark's
			// ceiling is a plain 64-writer client, about a tenth slower than
			// the engine at 64, so 80% here is about 88% of that ceiling.
			shared := simServer{capacity: capacity, overhead: 2}
			held, least, most, _ := settled(simulate(ctx, shared, PriorityBackground, 60*time.Second), 0, 0)
			share := shared.throughput(held) / shared.throughput(64)
			GinkgoWriter.Printf("idle, overhead 2: settled at %d (median), range [%d, %d], %.0f%% of the rate at 64 writers\n", held, least, most, 100*share)
			Expect(share).To(BeNumerically(">=", 0.8))

			shared.foreground = 8
			held, least, most, _ = settled(simulate(ctx, shared, PriorityBackground, 60*time.Second), 0, 0)
			kept := shared.throughput(8+held) / shared.throughput(8) * 8 / float64(8+held)
			GinkgoWriter.Printf("beside 8 foreground writers, overhead 2: settled at %d (median), range [%d, %d]; the foreground keeps %.0f%%\n", held, least, most, 100*kept)
			Expect(kept).To(BeNumerically(">=", 0.5))
		})

	DescribeTable("on a server whose speed swings for every client at once, still settles at the knee idle and near a fair share beside a foreground",
		func(ctx SpecContext, period time.Duration) {
			swinging := idle.swinging(period, 0.4, 120*time.Second)
			held, least, most, outside := settled(simulate(ctx, swinging, PriorityBackground, 120*time.Second), 6, 12)
			GinkgoWriter.Printf("idle, knee 8, swinging every %s: settled at %d (median), range [%d, %d], %.0f%% of writes outside [6, 12]\n", period, held, least, most, 100*outside)
			Expect(held).To(BeNumerically(">=", 6))
			Expect(held).To(BeNumerically("<=", 12))
			for _, foreground := range []int{8, 32} {
				swinging.foreground = foreground
				// The swing's noise is left to err on the polite side: the
				// bound below is half of F, not 0.6x as without a swing.
				lo, hi := 0.5*float64(foreground), 1.5*float64(foreground)
				held, least, most, outside = settled(simulate(ctx, swinging, PriorityBackground, 120*time.Second), lo, hi)
				GinkgoWriter.Printf("%d foreground writers, swinging every %s: settled at %d (median), range [%d, %d], %.0f%% of writes outside [%.1f, %.1f]\n",
					foreground, period, held, least, most, 100*outside, lo, hi)
				Expect(float64(held)).To(BeNumerically(">=", lo), "%d foreground writers", foreground)
				Expect(float64(held)).To(BeNumerically("<=", hi), "%d foreground writers", foreground)
				Expect(most).To(BeNumerically("<=", 2*foreground), "%d foreground writers: probes included, never twice F", foreground)
			}
		},
		Entry("every 1.3 s", 1300*time.Millisecond),
		Entry("every 2 s", 2*time.Second),
		Entry("every 5 s", 5*time.Second),
	)

	It("comes down to a fair share when a foreground client arrives after it settled", func(ctx SpecContext) {
		// A limit of 64 (taken with Full, or when the server was idle), and
		// now 16 foreground writers beside it.
		server := simServer{capacity: capacity, knee: 8, foreground: 16}
		median, least, most, _ := settled(simulate(ctx, server, PriorityBackground, 60*time.Second,
			LimitState{Limit: DefaultConcurrency, Reason: LimitHolding}), 0, 0)
		GinkgoWriter.Printf("from 64 beside 16 foreground writers: settled at %d (median of the second half), range [%d, %d]\n", median, least, most)
		Expect(float64(median)).To(BeNumerically(">=", 0.6*16))
		Expect(float64(median)).To(BeNumerically("<=", 1.5*16))
	})

	It("with priority Full, takes the server: the bound beside a foreground, and past the knee while the rate still rises", func(ctx SpecContext) {
		server := idle
		server.foreground = 8
		held, _, _, _ := settled(simulate(ctx, server, PriorityFull, 60*time.Second), 0, 0)
		Expect(held).To(Equal(DefaultConcurrency), "beside 8 foreground writers")
		rising := simServer{capacity: capacity, knee: 8, beyond: 0.05} // 5% more a doubling past the knee
		background, _, _, _ := settled(simulate(ctx, rising, PriorityBackground, 60*time.Second), 0, 0)
		full, _, _, _ := settled(simulate(ctx, rising, PriorityFull, 60*time.Second), 0, 0)
		GinkgoWriter.Printf("5%% a doubling past the knee: Background holds %d, Full %d\n", background, full)
		Expect(background).To(BeNumerically("<=", 12), "Background stops at the knee: the gain is below half the step")
		Expect(full).To(Equal(DefaultConcurrency), "Full takes every gain")
	})

	It("halves on a throttle, once per burst, never below one writer", func(ctx SpecContext) {
		// APF seats: more than 12 writes in flight are refused with a 429.
		server := simServer{capacity: capacity, knee: 8, foreground: 8, seats: 12}
		samples := simulate(ctx, server, PriorityBackground, 30*time.Second)
		halvings := 0
		for i := 1; i < len(samples); i++ {
			if samples[i].reason == LimitBackingOff && samples[i-1].reason != LimitBackingOff {
				halvings++
				Expect(samples[i].limit).To(Equal(max(1, samples[i-1].limit/2)), "halved at %s", samples[i].at)
			}
		}
		GinkgoWriter.Printf("beside 8 foreground writers with 12 seats: %d halvings\n", halvings)
		Expect(halvings).To(BeNumerically(">", 0))

		now := time.Now()
		l := newLimiter(64, false, PriorityBackground)
		l.now = func() time.Time { return now }
		l.state = LimitState{Limit: 16, Reason: LimitHolding}
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
		Expect(reason).To(Equal(LimitBackingOff))
	})
})

var _ = Describe("NextLimit: the rule", func() {
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	// window returns a window of writers writers at rate writes/s, starting
	// at offset from t0 and lasting a second.
	window := func(offset time.Duration, writers, rate float64) Window {
		start := t0.Add(offset)
		return Window{Start: start, End: start.Add(time.Second), Writes: int(rate), Writers: writers}
	}
	probing := func(from, to int) LimitState {
		return LimitState{Limit: to, From: from, Reason: LimitProbing, Base: window(0, float64(from), 400)}
	}
	// beside makes w a window during which other clients' writes were
	// stored at others a second: the engine's share is rate/(rate+others).
	beside := func(w Window, others float64) Window {
		w.OwnStored = int64(w.Writes)
		w.Stored = w.OwnStored + int64(others)
		return w
	}
	// probingBeside is probing(from, to) with others writing at others a
	// second during the window before the step.
	probingBeside := func(from, to int, others float64) LimitState {
		s := probing(from, to)
		s.Base = beside(s.Base, others)
		return s
	}

	DescribeTable("keeps a step while the engine's rate (its share, while others write) follows enough of it",
		func(s LimitState, w Window, priority Priority, want LimitState) {
			got := NextLimit(s, w, priority, 64)
			Expect(got.Limit).To(Equal(want.Limit))
			Expect(got.Reason).To(Equal(want.Reason))
			Expect(got.Hold).To(Equal(want.Hold))
		},
		Entry("the first window: probe a quarter up", LimitState{Limit: 4, Reason: LimitProbing}, window(0, 4, 400), PriorityBackground,
			LimitState{Limit: 5, Reason: LimitProbing}),
		Entry("one writer: a step is at least one writer", LimitState{Limit: 1, Reason: LimitHolding}, window(0, 1, 50), PriorityBackground,
			LimitState{Limit: 2, Reason: LimitProbing}),
		Entry("25% more writers, 17% more rate (elasticity 0.68): kept, probe on", probing(8, 10), window(time.Second, 10, 468), PriorityBackground,
			LimitState{Limit: 13, Reason: LimitProbing}),
		Entry("25% more writers, 12% more rate (elasticity 0.48): back, hold", probing(8, 10), window(time.Second, 10, 448), PriorityBackground,
			LimitState{Limit: 8, Reason: LimitHolding, Hold: holdWindows}),
		Entry("the same with priority Full: any gain is kept", probing(8, 10), window(time.Second, 10, 404), PriorityFull,
			LimitState{Limit: 13, Reason: LimitProbing}),
		Entry("Full, no gain at all: back, hold", probing(8, 10), window(time.Second, 10, 400), PriorityFull,
			LimitState{Limit: 8, Reason: LimitHolding, Hold: holdWindows}),
		Entry("the engine did not use the slots (writers in flight unchanged): back", probing(8, 10), window(time.Second, 8, 500), PriorityBackground,
			LimitState{Limit: 8, Reason: LimitHolding, Hold: holdWindows}),
		Entry("windows far apart in time: no comparison, back", probing(8, 10), window(time.Minute, 10, 500), PriorityBackground,
			LimitState{Limit: 8, Reason: LimitHolding, Hold: holdWindows}),
		Entry("a fifth fewer writers, 5% less rate: kept lower, probe on down", probing(20, 16), window(time.Second, 16, 380), PriorityBackground,
			LimitState{Limit: 13, Reason: LimitProbing}),
		Entry("a fifth fewer writers, 11% less rate (elasticity 0.55, below 0.65): kept lower", probing(20, 16), window(time.Second, 16, 356), PriorityBackground,
			LimitState{Limit: 13, Reason: LimitProbing}),
		Entry("a fifth fewer writers, 15% less rate (elasticity 0.75): back up, hold", probing(20, 16), window(time.Second, 16, 340), PriorityBackground,
			LimitState{Limit: 20, Reason: LimitHolding, Hold: holdWindows}),
		Entry("a step down stops at the floor: hold there, then look up", probing(10, 8), window(time.Second, 8, 380), PriorityBackground,
			LimitState{Limit: 8, Reason: LimitHolding, Hold: holdWindows}),
		Entry("below the floor (after a throttle), a step up is kept without a gain", probing(4, 5), window(time.Second, 5, 400), PriorityBackground,
			LimitState{Limit: 6, Reason: LimitProbing}),
		Entry("others write: more than half of the server's writes, a fifth fewer writers, below the idle floor too", LimitState{Limit: 8, Reason: LimitHolding},
			beside(window(0, 8, 400), 300), PriorityBackground, LimitState{Limit: 6, Reason: LimitYielding, Hold: holdWindows}),
		Entry("others write: yielding stops at the busy floor", LimitState{Limit: 5, Reason: LimitHolding},
			beside(window(0, 5, 400), 100), PriorityBackground, LimitState{Limit: 4, Reason: LimitYielding, Hold: holdWindows}),
		Entry("others write: at the busy floor, no yield", LimitState{Limit: 4, Reason: LimitHolding},
			beside(window(0, 4, 400), 100), PriorityBackground, LimitState{Limit: 5, Reason: LimitProbing}),
		Entry("others write: half or less, no yield", LimitState{Limit: 8, Reason: LimitHolding},
			beside(window(0, 8, 400), 400), PriorityBackground, LimitState{Limit: 10, Reason: LimitProbing}),
		Entry("a tenth of the writes or less are others' (leases, events): the server counts as idle, no yield", LimitState{Limit: 16, Reason: LimitHolding},
			beside(window(0, 16, 400), 40), PriorityBackground, LimitState{Limit: 20, Reason: LimitProbing}),
		Entry("priority Full never yields", LimitState{Limit: 16, Reason: LimitHolding},
			beside(window(0, 16, 400), 100), PriorityFull, LimitState{Limit: 20, Reason: LimitProbing}),
		Entry("others write: the server slowed for everyone during the step (10% less rate), but the share rose by a fifth: kept",
			probingBeside(8, 10, 800), beside(window(time.Second, 10, 360), 540), PriorityBackground, LimitState{Limit: 13, Reason: LimitProbing}),
		Entry("others write: the server sped up for everyone (17% more rate), but the share barely moved: back, hold",
			probingBeside(8, 10, 800), beside(window(time.Second, 10, 468), 920), PriorityBackground, LimitState{Limit: 8, Reason: LimitHolding, Hold: holdWindows}),
		Entry("others write: a step that takes the share past half is not kept",
			probingBeside(8, 10, 450), beside(window(time.Second, 10, 500), 450), PriorityBackground, LimitState{Limit: 8, Reason: LimitHolding, Hold: holdWindows}),
		Entry("holding: one window fewer to wait", LimitState{Limit: 8, Reason: LimitHolding, Hold: 2}, window(0, 8, 400), PriorityBackground,
			LimitState{Limit: 8, Reason: LimitHolding, Hold: 1}),
		Entry("a 429, 5xx or timeout: halve, hold", LimitState{Limit: 10, Reason: LimitHolding}, Window{Throttled: true}, PriorityBackground,
			LimitState{Limit: 5, Reason: LimitBackingOff, Hold: holdWindows}),
		Entry("never below one writer", LimitState{Limit: 1, Reason: LimitBackingOff}, Window{Throttled: true}, PriorityFull,
			LimitState{Limit: 1, Reason: LimitBackingOff, Hold: holdWindows}),
		Entry("never above the bound (concurrency)", probing(50, 60), window(time.Second, 60, 480), PriorityFull,
			LimitState{Limit: 64, Reason: LimitProbing}),
		Entry("at the bound: hold", probing(60, 64), window(time.Second, 64, 427), PriorityFull,
			LimitState{Limit: 64, Reason: LimitHolding, Hold: holdWindows}),
	)

	It("after a refused step up, tries a step down (Background only)", func() {
		back := NextLimit(probing(16, 20), window(time.Second, 20, 400), PriorityBackground, 64)
		for range holdWindows {
			back = NextLimit(back, window(2*time.Second, 16, 400), PriorityBackground, 64)
		}
		Expect(NextLimit(back, window(3*time.Second, 16, 400), PriorityBackground, 64)).To(And(
			HaveField("Limit", 13), HaveField("Reason", LimitProbing)))
		full := NextLimit(probing(16, 20), window(time.Second, 20, 400), PriorityFull, 64)
		for range holdWindows {
			full = NextLimit(full, window(2*time.Second, 16, 400), PriorityFull, 64)
		}
		Expect(NextLimit(full, window(3*time.Second, 16, 400), PriorityFull, 64)).To(HaveField("Limit", 20))
	})

	It("measures windows of the writes made under the current limit only", func(ctx SpecContext) {
		now := t0
		l := newLimiter(64, false, PriorityBackground)
		l.now = func() time.Time { return now }
		// 8 writers (the first limit), 10 ms each, for a second: 800
		// writes/s.
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
		Expect(limit).To(Equal(10), "probing a quarter up")
		Expect(reason).To(Equal(LimitProbing))
		Expect(rate).To(BeNumerically("~", 800, 40))
		Expect(l.state.Base.Writers).To(BeNumerically("~", 8, 0.1))
		// The writes in flight from before the change do not open the new
		// window: only writes sent under 10 do.
		Expect(l.inFlight).To(Equal(0))
		Expect(l.win.Start.IsZero()).To(BeTrue())
	})

	It("counts the writes the server stored by etcd's revision: its own, and others' in between", func(ctx SpecContext) {
		l := newLimiter(64, false, "")
		now := time.Now()
		l.now = func() time.Time { return now }
		l.state = LimitState{Limit: 8, Reason: LimitProbing}
		revision := uint64(1000)
		for first := true; l.state.From == 0; first = false {
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
					revision -= 1
					revisions[i] = 7
				}
			}
			now = now.Add(10 * time.Millisecond)
			for i := 7; i >= 0; i-- {
				l.Release(Signal{Latency: 10 * time.Millisecond, Revision: revisions[i]})
			}
		}
		w := l.state.Base
		Expect(w.OwnStored).To(BeNumerically(">", 0))
		// 8 writers, 10 ms each: 800 writes/s of its own. Others: two
		// writes before each of the engine's, 1600/s. Share 1/3.
		Expect(w.Share()).To(BeNumerically("~", 1.0/3, 0.02), "stored %d, of which the engine's %d", w.Stored, w.OwnStored)
		Expect(w.busy()).To(BeTrue())
	})

	It("counts its own writes stored but not yet answered when a window closes as its own: alone, the server is idle", func(ctx SpecContext) {
		l := newLimiter(64, false, "")
		now := time.Now()
		l.now = func() time.Time { return now }
		l.state = LimitState{Limit: 32, Reason: LimitHolding, Hold: 100}
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
			Expect(w.busy()).To(BeFalse(), "share %.2f: stored %d, of which the engine's %d", w.Share(), w.Stored, w.OwnStored)
		}
	})

	It("holds every writer back for a Retry-After, and frees a slot on release", func(ctx SpecContext) {
		l := newLimiter(64, false, "")
		l.state = LimitState{Limit: 4, Reason: LimitHolding}
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

	It("reports Fixed and never adapts with FixedConcurrency", func() {
		l := newLimiter(16, true, PriorityBackground)
		l.Release(Signal{Throttled: true})
		limit, reason, _ := l.Status()
		Expect(limit).To(Equal(16))
		Expect(reason).To(Equal(LimitFixed))
	})
})
