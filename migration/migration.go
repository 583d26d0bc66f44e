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

// Package migration rewrites every object of a custom resource through the
// API server so that etcd holds it in the CRD's current storage version, and
// prunes status.storedVersions once that is done.
//
// Each object gets a JSON merge patch that carries only its resourceVersion
// and uid. Such a patch changes nothing, yet the API server re-encodes the
// object in the storage version and writes it when the bytes differ, which is
// exactly the migration. The preconditions make a concurrent write or delete
// win: the object is never overwritten. The patch goes to Options.Resource's
// version, or, for an object whose every managedFields entry was recorded at
// one of Options.WriteVersions, to that version, where it costs the API
// server fewer conversions; it is stored in the storage version either way.
//
// What counts as done is the package's invariant: an object is migrated only
// when the API server acknowledged a write of it (2xx), a GET proves it gone
// or replaced (new uid), or its resourceVersion is newer than the checkpoint
// taken after the storage switch settled. A refused write is never taken at
// its word: a 404 from a status subresource the version does not have looks
// exactly like a deleted object, so the object is read back.
//
// After the main pass a catch-up sweep rewrites the objects that others
// wrote between the checkpoint and the end of the main pass: possibly an API
// server of an HA control plane that learned the new storage version late
// wrote them in the old one. A watch from the checkpoint collects them while
// the run goes on (it keeps the names and revisions of others' writes; the
// run's own revisions are known), so the sweep reads nothing again. When
// the watch cannot be trusted to have seen every write (it could not start
// or resume at its revision, it was refused, others wrote more than
// Options.SweepWatchLimit objects), the sweep lists every object again and
// rewrites those whose resourceVersion lies between the checkpoint and its
// own listing and that the run did not write itself; Progress.SweepMode
// says which way it went, and why. Its writes are the churn of the run, not
// N.
//
// The bytes the run adds to etcd between two of the API server's
// compactions are budgeted (docs/design.md, "The budgets"): when the
// budget is spent the run waits for the next compaction, so that etcd never
// reaches its space quota because of it. Every writer of a graduation (the
// main pass, the sweep, CleanupManagedFields) writes under such a budget, and a
// writer that follows another (Options.Previous, a SpaceLedger) counts the
// pages the earlier writes freed as free. An answer that etcd is full
// (NOSPACE) stops the run at once.
//
// Writers run under an adaptive limit (see Options.Priority) and flow across page
// boundaries; the continue token a caller saves advances only past pages
// whose every object is done, so a resumed run loses nothing and repeats
// little.
//
// The package is used by the Graduator operator and CLI, and works in your
// own envtest suites: give it a dynamic client and the resource.
package migration

import (
	"context"
	"sync"
	"sync/atomic"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2"

	"github.com/graduator/graduator/internal/enginehook"
	"github.com/graduator/graduator/internal/failpoint"
	"github.com/graduator/graduator/internal/limit"
	"github.com/graduator/graduator/internal/space"
)

// Run rewrites every object of opts.Resource, then sweeps once more over the
// objects others wrote while it ran (see the package documentation). It
// returns when the main pass and the sweep are complete, when the context is cancelled (with the
// progress of the last done page, from which a later run can resume), or on
// an error that stops the run as a whole: a failed LIST, or a write refused
// for a reason that is not the object's own (a conversion webhook down, the
// API server unavailable, no permission). Errors of single objects do not
// stop it: they are counted in Failed and named in Failures.
//
// An object counts as done only when the API server acknowledged a write of
// it (2xx), a GET proved it deleted or replaced (new uid), or its
// resourceVersion is newer than the checkpoint. Anything else is Failed.
//
// The context's logger (klog.FromContext) tells, at verbosity 1, what each
// pause of the adaptive limit measured and where the limit went from it.
func Run(ctx context.Context, client dynamic.Interface, opts Options) (Result, error) {
	opts = withDefaults(opts)
	hook := enginehook.From(ctx)
	r := &runner{
		opts:     opts,
		hook:     hook,
		writers:  limit.New(opts.Concurrency, hook.FixedConcurrency, limitPriority(opts.Priority)),
		progress: opts.Resume,
		resumed:  parseWritten(opts.Resume.Written),
	}
	var onLimit func(int, limit.Reason, float64)
	if opts.OnLimit != nil {
		onLimit = func(n int, reason limit.Reason, rate float64) { opts.OnLimit(n, limitReason(reason), rate) }
	}
	r.writers.Observe(onLimit, klog.FromContext(ctx))
	var err error
	if r.objects, err = newObjectClient(client, opts, r.writers); err != nil {
		return Result{Progress: opts.Resume}, err
	}
	if opts.QPS > 0 {
		r.qps = flowcontrol.NewTokenBucketRateLimiter(opts.QPS, max(1, int(opts.QPS)))
		defer r.qps.Stop()
	}
	r.progress.Failures = append([]Failure(nil), opts.Resume.Failures...)
	r.progress.Remaining = -1
	r.metrics = metricsReader(opts.Config)
	if opts.Previous == (SpaceLedger{}) {
		// A resumed run follows its own predecessor.
		r.opts.Previous = opts.Resume.Space
	}
	r.newSpaceBudget(ctx)
	// Left after the result is taken (Ledger): what is not compacted yet
	// stays charged to the writers that follow.
	defer r.space.Leave(ctx)
	r.watchFrom = func(checkpoint string) {
		if opts.SweepWatchLimit > 0 {
			r.others = watchOthers(ctx, r.objects, checkpoint, opts.SweepWatchLimit, r.wroteVersion)
		}
	}
	defer r.stopWatching()
	if r.progress.Checkpoint != "" {
		r.watchFrom(r.progress.Checkpoint)
	}
	if !r.progress.CatchUp {
		complete, err := r.pass(ctx, mainPass, r.listing)
		if !complete || err != nil {
			return r.result(false), err
		}
		r.mu.Lock()
		r.progress.CatchUp, r.progress.Continue = true, ""
		r.progress.Written = r.writtenLocked()
		r.mu.Unlock()
		// Saved now, a restart before the sweep's first page resumes the
		// sweep rather than listing every object again.
		r.notify()
		failpoint.Pause(ctx, failpoint.Sweep)
	}
	complete, err := r.sweep(ctx)
	r.space.Settle(ctx)
	return r.result(complete && err == nil), err
}

type runner struct {
	objects objectClient
	opts    Options
	// hook is what a caller in this module told besides opts.
	hook    enginehook.Hook
	writers *limit.Gate
	qps     flowcontrol.RateLimiter // nil: no cap
	// space is the etcd space budget; metrics reads the API server's
	// /metrics for it (nil without a rest.Config).
	space   *space.Budget
	metrics func(context.Context) ([]byte, error)
	// etcdFull is set at etcd's first NOSPACE answer: no write starts after.
	etcdFull atomic.Bool

	// mu guards progress, the done pages' counts, and written.
	mu       sync.Mutex
	progress Progress
	// written holds the resourceVersions the API server gave this run's own
	// writes, so that the catch-up sweep does not rewrite what the main pass
	// just wrote (the first maxWrittenRanges ranges of it are checkpointed;
	// the rest is lost on a restart, when the sweep then rewrites those
	// objects again, which is safe and cheap).
	written revisionSet
	// resumed holds the writes of the runs this one resumed
	// (Options.Resume.Written), for the sweep.
	resumed []revisionRange
	// others collects the objects others write during the run, for the
	// sweep, from the moment the checkpoint is known (watchFrom starts
	// it); nil when the watch is off.
	others    *othersWrites
	watchFrom func(checkpoint string)
	// report serializes OnProgress calls.
	report sync.Mutex
}

func (r *runner) snapshot() Progress {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.progress
	p.Failures = append([]Failure(nil), r.progress.Failures...)
	if !p.CatchUp {
		p.Written = r.writtenLocked()
	}
	var reason limit.Reason
	p.Writers, reason, p.WriteRate = r.writers.Status()
	p.WritersReason = limitReason(reason)
	p.Space = SpaceLedger(r.space.Ledger())
	return p
}

// writtenLocked encodes the run's own writes so far (Progress.Written);
// r.mu must be held.
func (r *runner) writtenLocked() string {
	return writtenRanges(r.resumed, r.written.ranges(maxWrittenRanges))
}

func (r *runner) notify() {
	if r.opts.OnProgress == nil {
		return
	}
	r.report.Lock()
	defer r.report.Unlock()
	r.opts.OnProgress(r.snapshot())
}

func (r *runner) result(complete bool) Result {
	res := Result{Progress: r.snapshot(), Complete: complete}
	if !r.space.Off() && r.hook.OnCharged != nil {
		r.hook.OnCharged(r.space.Charges())
	}
	if complete {
		res.Continue = ""
		res.Remaining = 0
		r.notify()
	}
	return res
}
