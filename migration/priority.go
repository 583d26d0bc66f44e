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

import "github.com/graduator/graduator/internal/limit"

// Priority says how much of the API server a migration takes.
type Priority string

const (
	// PriorityBackground keeps other clients' write rate at BackgroundKept
	// or more of their rate without the migration, measured by pausing it
	// briefly now and then, and, while they keep their rate (clients
	// writing at their own pace), its own write latency within
	// BackgroundLatencyMax times its latency alone (every client's writes
	// wait in that queue). It starts at one
	// writer and pauses after its first write, so that it measured the
	// others before it takes more; beside others it takes no more than
	// eight writers until a second pause measured them again, clear of the
	// run's own setup. On a server others barely write to, it is
	// PriorityFull from its first pause on. The default.
	PriorityBackground Priority = "Background"
	// PriorityFull takes the server's full speed, for maintenance windows:
	// the limit climbs to Concurrency and comes down only when the server
	// throttles, fails or collapses, whatever that costs other clients.
	PriorityFull Priority = "Full"
)

// The numbers of PriorityBackground's promise, defined once (the limit's
// rule keeps them).
const (
	// BackgroundKept is the least share of their write rate without the
	// migration that PriorityBackground leaves other clients.
	BackgroundKept = limit.KeptPromised
	// BackgroundYieldBelow is the share of their rate alone under which
	// the limit comes down (LimitYielding): above BackgroundKept, a margin
	// for the noise of one measurement.
	BackgroundYieldBelow = limit.KeptMin
	// BackgroundLatencyMax bounds the engine's own write latency beside
	// clients that keep their rate, as a multiple of its latency alone
	// (LimitQueueing).
	BackgroundLatencyMax = limit.LatencyMax
)

// LimitReason says what the adaptive limit on writes in flight is doing
// (Progress.WritersReason, Options.OnLimit).
type LimitReason string

const (
	// LimitProbing: the limit is stepping up towards Concurrency.
	LimitProbing LimitReason = "Probing"
	// LimitHolding: the limit holds, at Concurrency, where other clients
	// keep their share of the server, or for a few windows after a
	// throttle.
	LimitHolding LimitReason = "Holding"
	// LimitBackingOff: the API server throttled or failed a write (429,
	// 5xx, timeout), or its throughput collapsed, and the limit was halved.
	LimitBackingOff LimitReason = "BackingOff"
	// LimitYielding: other clients wrote less than BackgroundYieldBelow of
	// their rate alone, and the limit came down.
	LimitYielding LimitReason = "Yielding"
	// LimitQueueing: while other clients wrote, the engine's own writes took
	// more than BackgroundLatencyMax times as long as one write of its alone (every client's
	// writes wait in that queue), and the limit came down.
	LimitQueueing LimitReason = "Queueing"
	// LimitPausing: the engine paused its writes for a moment to measure the
	// other clients' write rate alone.
	LimitPausing LimitReason = "Pausing"
	// LimitFixed: a fixed number of writers, no adaptation (measurements).
	LimitFixed LimitReason = "Fixed"
)

// limitPriority is p as the limit's rule takes it; empty is Background.
func limitPriority(p Priority) limit.Priority {
	if p == PriorityFull {
		return limit.Full
	}
	return limit.Background
}

// limitReason is the rule's reason as the public one: the same words
// (a table test holds each pair together).
func limitReason(r limit.Reason) LimitReason { return LimitReason(r) }
