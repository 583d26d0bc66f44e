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

package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"gonum.org/v1/plot/plotter"

	"github.com/graduator/graduator/migration"
)

// bucket is the width of a rate sample in the pictures.
const bucket = 500 * time.Millisecond

// counter counts events in buckets of time from its start.
type counter struct {
	start   time.Time
	mu      sync.Mutex
	buckets []int
}

func newCounter(start time.Time) *counter { return &counter{start: start} }

func (c *counter) add() {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := int(time.Since(c.start) / bucket)
	for len(c.buckets) <= i {
		c.buckets = append(c.buckets, 0)
	}
	c.buckets[i]++
}

// rates are the events per second of each whole bucket, at its middle.
func (c *counter) rates() plotter.XYs {
	c.mu.Lock()
	defer c.mu.Unlock()
	var xy plotter.XYs
	for i, n := range c.buckets {
		if i == len(c.buckets)-1 {
			break // the last bucket is cut short by the end of the run
		}
		xy = append(xy, plotter.XY{X: (float64(i) + 0.5) * bucket.Seconds(), Y: float64(n) / bucket.Seconds()})
	}
	return xy
}

// limitAt is the adaptive limit from a moment on.
type limitAt struct {
	at     time.Duration
	limit  int
	reason migration.LimitReason
}

// trace records an engine run: its limit each time it changes, and its
// objects done in buckets of time.
type trace struct {
	start   time.Time
	end     time.Duration
	mu      sync.Mutex
	limits  []limitAt
	objects *counter
	last    migration.Progress
	// measures are what the engine's pauses measured, as it logged them
	// (at verbosity 1), each with when.
	measures []string
}

// newTrace starts a trace; options wires it into an engine run.
func newTrace(initial int) *trace {
	now := time.Now()
	return &trace{start: now, objects: newCounter(now), limits: []limitAt{{limit: initial}}}
}

func (t *trace) options(o migration.Options) migration.Options {
	o.OnObject = t.objects.add
	o.OnLimit = func(limit int, reason migration.LimitReason, _ float64) {
		t.mu.Lock()
		defer t.mu.Unlock()
		t.limits = append(t.limits, limitAt{at: time.Since(t.start), limit: limit, reason: reason})
	}
	o.OnProgress = func(p migration.Progress) {
		t.mu.Lock()
		defer t.mu.Unlock()
		t.last = p
	}
	return o
}

// pauseMessage is the engine's log line for a pause's measures.
const pauseMessage = "paused to measure the other clients' writes alone"

// context is ctx with a logger that keeps the engine's pause measures in
// the trace: pass it to the run.
func (t *trace) context(ctx context.Context) context.Context {
	log := funcr.New(func(_, args string) {
		if !strings.Contains(args, pauseMessage) {
			return
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		fields := strings.TrimSpace(args[strings.Index(args, pauseMessage)+len(pauseMessage)+1:])
		t.measures = append(t.measures, fmt.Sprintf("at %.2fs %s", time.Since(t.start).Seconds(), fields))
	}, funcr.Options{Verbosity: 1})
	return logr.NewContext(ctx, log)
}

// startLines are the run's first pauses' measures (the base the start
// took, the others' rate alone, where the limit went) and the limit over
// time, one line each, indented, for the bench's output.
func (t *trace) startLines() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var b strings.Builder
	for i, m := range t.measures[:min(len(t.measures), startPauses)] {
		fmt.Fprintf(&b, "  pause %d: %s\n", i+1, m)
	}
	if len(t.measures) == 0 {
		b.WriteString("  no pause measured the others\n")
	}
	b.WriteString("  limit over time:")
	for i, l := range t.limits {
		if i > 0 {
			b.WriteString(",")
		}
		if i > timelineChanges {
			fmt.Fprintf(&b, " ... (%d changes more), last %d (%s)", len(t.limits)-i, t.limits[len(t.limits)-1].limit, t.limits[len(t.limits)-1].reason)
			break
		}
		if i > 0 && l.reason == migration.LimitPausing {
			fmt.Fprintf(&b, " %.2fs pause", l.at.Seconds())
			continue
		}
		fmt.Fprintf(&b, " %.2fs %d", l.at.Seconds(), l.limit)
		if l.reason != "" && l.reason != migration.LimitProbing {
			fmt.Fprintf(&b, " (%s)", l.reason)
		}
	}
	fmt.Fprintf(&b, "; end %.2fs\n", t.end.Seconds())
	return b.String()
}

// startPauses is how many pauses' measures startLines prints, and
// timelineChanges how many changes of the limit.
const startPauses, timelineChanges = 3, 24

// done marks the end of the run.
func (t *trace) done() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.end = time.Since(t.start)
}

// settled is the limit the second half of the run spent most of its time
// at or below half of: the time-weighted median of the limit over it.
func (t *trace) settled() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	from := t.end / 2
	spent := map[int]time.Duration{}
	for i, l := range t.limits {
		until := t.end
		if i+1 < len(t.limits) {
			until = t.limits[i+1].at
		}
		if begin := max(l.at, from); until > begin {
			spent[l.limit] += until - begin
		}
	}
	limits := slices.Sorted(func(yield func(int) bool) {
		for l := range spent {
			if !yield(l) {
				return
			}
		}
	})
	var sum time.Duration
	for _, l := range limits {
		if sum += spent[l]; sum >= (t.end-from)/2 {
			return l
		}
	}
	return 0
}

// steps is the limit over time as a step line.
func (t *trace) steps() plotter.XYs {
	t.mu.Lock()
	defer t.mu.Unlock()
	var xy plotter.XYs
	for i, l := range t.limits {
		if i > 0 {
			xy = append(xy, plotter.XY{X: l.at.Seconds(), Y: float64(t.limits[i-1].limit)})
		}
		xy = append(xy, plotter.XY{X: l.at.Seconds(), Y: float64(l.limit)})
	}
	return append(xy, plotter.XY{X: t.end.Seconds(), Y: float64(t.limits[len(t.limits)-1].limit)})
}

func (t *trace) String() string {
	t.mu.Lock()
	changes, last := len(t.limits)-1, t.limits[len(t.limits)-1]
	rate := t.last.WriteRate
	down := map[migration.LimitReason]int{}
	for i := 1; i < len(t.limits); i++ {
		if t.limits[i].limit < t.limits[i-1].limit {
			down[t.limits[i].reason]++
		}
	}
	t.mu.Unlock()
	return fmt.Sprintf("settled at %d (time-weighted median of the second half), %d changes (down: %d Yielding, %d Queueing, %d BackingOff), last %d (%s, %.0f writes/s)",
		t.settled(), changes, down[migration.LimitYielding], down[migration.LimitQueueing], down[migration.LimitBackingOff], last.limit, last.reason, rate)
}

// paused is the share of the run the engine spent pausing to measure the
// others alone (its writes in flight finishing, the pause, the write that
// ends it), and how many pauses.
func (t *trace) paused() (float64, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var in time.Duration
	n := 0
	for i, l := range t.limits {
		if l.reason != migration.LimitPausing {
			continue
		}
		n++
		until := t.end
		if i+1 < len(t.limits) {
			until = t.limits[i+1].at
		}
		in += until - l.at
	}
	if t.end <= 0 {
		return 0, n
	}
	return in.Seconds() / t.end.Seconds(), n
}

// firstPause is when the engine first paused, or -1 if it never did.
func (t *trace) firstPause() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, l := range t.limits {
		if l.reason == migration.LimitPausing {
			return l.at
		}
	}
	return -1
}
