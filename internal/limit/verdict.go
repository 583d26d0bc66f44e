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
	"math"
	"time"
)

// While others write, Background judges the windows measured at one limit
// two ways, and the stricter wins:
//
//   - The others' rate against their rate alone (a closed-loop client slows
//     down beside the engine), read through the model's k fitted over the
//     last fitFor (othersFit): below KeptMin the limit comes down to where
//     they would keep keptTarget.
//   - The engine's own write latency against its latency alone, the base
//     (a client that writes at its own pace keeps its rate, but waits behind
//     the engine's writes in the same queue). The base is the pauses' write,
//     sent with no other write of the engine's in flight. Queueing delay
//     above it, as LEDBAT (RFC 6817) and Netflix's Gradient2 read it, is
//     every client's: requests in flight share the server, so a paced
//     client's latency grows by about the factor the engine's does. Above
//     LatencyMax times the base the limit comes down to where the latency
//     would be latencyTarget times it.
//
// Neither judges one window: the API server's speed swings for every client
// at once, and one window compared with a pause reads that swing as harm or
// as room. The latency judges the mean of the windows at the limit (the
// last judgedWindows weighted alike); the rate, the fit over fitFor, which
// takes in the windows at every limit it held.
const (
	// LatencyMax, latencyTarget: the engine's mean write latency over its
	// base above which the limit comes down (Queueing), and where it comes
	// down to and climbs to; LatencyMax is Background's promise to a paced
	// client (migration.BackgroundLatencyMax states it to library users). Below the 2x a paced client is promised for its p99,
	// a margin for the windows the limit probes above its target.
	LatencyMax, latencyTarget = 1.7, 1.4
	// judgedWindows is how many windows at one limit the mean runs over;
	// the limit moves once minJudged of them are in (one window at a new
	// limit is the swing's as much as the engine's).
	judgedWindows = 4
	minJudged     = 2
	// fitFor is the time constant of the fit of k: the windows' weight in
	// it halves every 0.7 fitFor. Several swings of a server's speed (1 to
	// 5 s on the envtest control plane), and short enough to follow a
	// client that comes or goes within a few pauses.
	fitFor = 10 * time.Second
	// basePauses is how many pauses the base is the mean of; stallSpread
	// how much longer than the least of them a pause's write may take and
	// still count in it (baseOf): past the spread of one write's latency
	// (a fifth either way) and the server's swings.
	basePauses  = 4
	stallSpread = 2
)

// AtLimit is the mean of what the windows at the current limit measured,
// since it last changed: the last judgedWindows weigh alike, older ones less.
type AtLimit struct {
	// Windows is how many windows were measured at the limit.
	Windows int
	// Others is the others' writes per second (-1: unknown), Latency the
	// engine's mean write latency, Writers its mean writes in flight.
	Others  float64
	Latency time.Duration
	Writers float64
}

// add takes in one window's measure.
func (a AtLimit) add(w Window, limit int) AtLimit {
	writers := writersOf(w, limit)
	a.Windows++
	if a.Windows == 1 || w.Others() < 0 || a.Others < 0 {
		return AtLimit{Windows: a.Windows, Others: w.Others(), Latency: w.Latency, Writers: writers}
	}
	weight := 1 / float64(min(a.Windows, judgedWindows))
	a.Others += weight * (w.Others() - a.Others)
	a.Latency += time.Duration(weight * float64(w.Latency-a.Latency))
	a.Writers += weight * (writers - a.Writers)
	return a
}

// othersFit fits k, the others' slowdown per writer of the engine's in the
// model of requests sharing a server (beside L writers they keep
// 1/(1 + kL) of their rate alone), through the windows the engine wrote
// in, at whatever limit, each weighted by its length and by
// exp(-age/fitFor). The fit is a ratio of sums of the others' writes, not a
// mean of the windows' ratios: windows in a swing's low would dominate
// those.
type othersFit struct {
	// seconds is the windows' weighted length, writes the others' writes
	// in them, and writerWrites those times the engine's writers then.
	seconds, writes, writerWrites float64
	at                            time.Time
}

// add takes in a window at limit (or its mean writers in flight, when the
// engine did not fill its slots).
func (f othersFit) add(w Window, limit int) othersFit {
	others := w.Others()
	if others < 0 {
		return f
	}
	decay := 0.0
	if !f.at.IsZero() {
		decay = math.Exp(-w.End.Sub(f.at).Seconds() / fitFor.Seconds())
	}
	d := w.End.Sub(w.Start).Seconds()
	f.seconds = decay*f.seconds + d
	f.writes = decay*f.writes + others*d
	f.writerWrites = decay*f.writerWrites + writersOf(w, limit)*others*d
	f.at = w.End
	return f
}

// kept is the share of their rate alone the fit says the others keep beside
// writers: from alone = others (1 + k writers), summed over the windows,
// k = (alone seconds - writes) / writerWrites.
func (f othersFit) kept(alone, writers float64) float64 {
	if f.writerWrites <= 0 || alone <= 0 {
		return -1
	}
	k := max(0, alone*f.seconds-f.writes) / f.writerWrites
	return 1 / (1 + k*writers)
}

// writersOf is the engine's writers in a window at limit: the limit, or the
// mean in flight when the engine did not fill its slots.
func writersOf(w Window, limit int) float64 {
	if w.Writers > 0 {
		return min(float64(limit), w.Writers)
	}
	return float64(limit)
}

// verdict is what the judge makes of the windows at one limit: the most
// writers the others bear, and why.
type verdict struct {
	writers float64
	// reason is Yielding (the others' rate fell), Queueing (the
	// engine's writes queued) or Probing (no harm: room up to writers).
	reason Reason
	// severe: the harm is past twice its bound (the others keep under half
	// of KeptMin, or the latency is twice LatencyMax), which no swing of
	// the server's explains: acted on from one window.
	severe bool
}

// harmed reports whether the limit must come down.
func (v verdict) harmed() bool { return v.reason != Probing }

// stricter is the verdict of the two that allows fewer writers, a harm
// before room.
func (v verdict) stricter(o verdict) verdict {
	switch {
	case v.severe != o.severe:
		if o.severe {
			return o
		}
		return v
	case v.harmed() != o.harmed():
		if o.harmed() {
			return o
		}
		return v
	case o.writers < v.writers:
		return o
	}
	return v
}

// judge reads the others' rate against their rate alone through the fit,
// or the windows at the limit when the harm there is severe, and the
// engine's latency at the limit against its base when a pause measured it. When the others' rate answers the engine's writes (they
// keep under responsive of it), they are closed-loop clients, whose rate is
// their writers over their latency: their rate measures the harm, and the
// latency judge only speaks when severe. The engine's own latency says
// less there: beside closed-loop clients its single writer already waits
// longer than the pause's write did (its reads, its watch and its writes
// keep the server busier than the pause left it), so the latency judge
// alone would hold one writer where the others keep three quarters of
// their rate.
func judge(a AtLimit, f othersFit, alone float64, base time.Duration) verdict {
	atLimit := byRate(a.Others/alone, a.Writers)
	kept := f.kept(alone, a.Writers)
	if kept < 0 {
		kept = a.Others / alone
	}
	v := byRate(kept, a.Writers)
	if atLimit.severe {
		v = v.stricter(atLimit)
	}
	// Whether their rate answers the engine's writes shows where it
	// answers: beside one or two writers 8 closed-loop writers keep 90%
	// of their rate, and the latency judge would hold the engine there.
	// The fit says what they would keep beside twice the writers.
	paced := kept >= responsive
	if k := f.kept(alone, 2*a.Writers); k >= 0 {
		paced = k >= responsive
	}
	if base > 0 && a.Latency > 0 {
		if l := byLatency(a.Latency, base, a.Writers); paced || l.severe {
			v = v.stricter(l)
		}
	}
	return v
}

// responsive is the share of their rate alone under which the others'
// rate is taken to answer the engine's writes: a client paced at its own
// rate keeps all of it, give or take a window's noise.
const responsive = 0.9

// byRate judges the others' rate: they kept kept of their rate alone
// beside writers of the engine's.
func byRate(kept, writers float64) verdict {
	kept = min(1, kept)
	v := verdict{writers: targetWriters(writers, kept), reason: Probing}
	if kept < KeptMin {
		v.reason, v.severe = Yielding, kept < KeptMin/2
	}
	return v
}

// byLatency judges the engine's mean write latency at writers in flight
// against its base, the latency of one write of its own alone. The delay
// above the base is the queue the engine's other writes make, which grows
// in proportion to them (requests in flight share the server), so from
// one writer and writers it lies where the latency is latencyTarget times
// the base.
func byLatency(latency, base time.Duration, writers float64) verdict {
	ratio := float64(latency) / float64(base)
	v := verdict{writers: 2 * writers, reason: Probing} // no queue: no bound from here
	if ratio > 1 && writers > 1 {
		v.writers = 1 + (writers-1)*(latencyTarget-1)/(ratio-1)
	}
	if ratio > LatencyMax {
		v.reason, v.severe = Queueing, ratio > 2*LatencyMax
		v.writers = min(v.writers, writers)
	}
	return v
}
