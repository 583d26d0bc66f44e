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
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/graduator/graduator/internal/errclass"
	"github.com/graduator/graduator/internal/limit"
	"github.com/graduator/graduator/internal/paging"
	"github.com/graduator/graduator/internal/space"
)

// passKind tells the main pass from the catch-up sweep.
type passKind int

const (
	mainPass passKind = iota
	catchUpPass
)

// page is one LIST response, or the error that ended the listing.
type page struct {
	items           []objectRef
	resourceVersion string
	continueToken   string
	remaining       int64
	err             error
}

// pageRun is a page whose objects are being handled: its counts join the
// run's progress when it and every page before it are done.
type pageRun struct {
	page
	pending int
	counts  Progress
	// unfinished is set when the run stopped before one of its objects was
	// handled: the page is then never counted, and neither is any after it.
	unfinished bool
}

// writer is the pass's writer, for the etcd space budget.
func (k passKind) writer() space.Writer {
	if k == catchUpPass {
		return space.WriterSweep
	}
	return space.WriterPass
}

// pass lists every object and hands each to a writer. Writers flow from
// one page into the next; pages are marked done in listing order.
func (r *runner) pass(ctx context.Context, kind passKind, source func(context.Context, chan<- page)) (bool, error) {
	// A writer that meets an error which is not the object's own aborts the
	// pass through this context; pages not done are then not counted.
	workCtx, abort := context.WithCancelCause(ctx)
	defer abort(nil)
	listCtx, stopListing := context.WithCancel(workCtx)
	defer stopListing()
	// Unbuffered: the source reads one page ahead of the writers, not
	// more. A page's LIST is a stall of the API server that every other
	// client's request waits behind; pages read ahead in a burst (at the
	// start, three of 500) cost them far more than one at a time.
	pages := make(chan page)
	go source(listCtx, pages)

	ps := &passState{runner: r, kind: kind, ctx: workCtx, abort: abort, slots: make(chan struct{}, pagesInFlight),
		goroutines: newSpareGoroutines()}
	var listErr error
	for p := range pages {
		if p.err != nil {
			listErr = p.err
			break
		}
		if !ps.dispatch(p) {
			break // the pass was aborted or cancelled
		}
	}
	ps.running.Wait()
	ps.goroutines.stop()
	// Drain the lister, which stops once its context is cancelled.
	stopListing()
	for range pages {
	}

	switch {
	case listErr != nil:
		return false, listErr
	case ctx.Err() != nil:
		return false, ctx.Err()
	case workCtx.Err() != nil:
		return false, context.Cause(workCtx)
	}
	return true, nil
}

// passState is one pass in flight: the pages handed out and not yet done,
// in listing order, and the writers working on them.
type passState struct {
	*runner
	kind  passKind
	ctx   context.Context // cancelled when the pass aborts
	abort context.CancelCauseFunc
	// slots bounds the pages in flight (pagesInFlight).
	slots chan struct{}
	// running counts the writers at work on this pass's objects;
	// goroutines runs them.
	running    sync.WaitGroup
	goroutines *spareGoroutines

	pagesMu  sync.Mutex // guards inFlight
	inFlight []*pageRun
}

// dispatch hands every object of p to a writer, or settles it without a
// write. It returns false when the pass stopped before p could start.
func (ps *passState) dispatch(p page) bool {
	select {
	case ps.slots <- struct{}{}:
	case <-ps.ctx.Done():
		return false
	}
	progress := ps.takeCheckpoint(p)
	ps.sampleSize(p)
	pr := &pageRun{page: p, pending: len(p.items) + 1} // +1: held until dispatched
	ps.pagesMu.Lock()
	ps.inFlight = append(ps.inFlight, pr)
	ps.pagesMu.Unlock()
	for _, obj := range p.items {
		ps.start(pr, obj, progress)
	}
	ps.finish(pr, dispatched, nil, objectRef{})
	return true
}

// sampleSize reads the first and the last object of a main pass page
// whole, to charge the page's writes to the etcd space budget at the right
// size (two GETs per page; space.Budget.SampledPage says why both).
func (ps *passState) sampleSize(p page) {
	if ps.space.Off() || ps.kind != mainPass || len(p.items) == 0 {
		return
	}
	ends := []objectRef{p.items[0]}
	if len(p.items) > 1 {
		ends = append(ends, p.items[len(p.items)-1])
	}
	sizes := make([]int64, 0, len(ends))
	for _, obj := range ends {
		if size, err := ps.objects.size(ps.ctx, obj.Namespace, obj.Name); err == nil {
			sizes = append(sizes, size)
		}
	}
	ps.space.SampledPage(sizes...)
}

// takeCheckpoint takes the first page's resourceVersion as the pass's
// checkpoint when it has none yet, and returns the progress to judge the
// page's objects by.
func (ps *passState) takeCheckpoint(p page) Progress {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	switch {
	case ps.kind == mainPass && ps.progress.Checkpoint == "":
		ps.progress.Checkpoint = p.resourceVersion
		ps.watchFrom(p.resourceVersion)
	case ps.kind == catchUpPass && ps.progress.CatchUpCheckpoint == "":
		ps.progress.CatchUpCheckpoint = p.resourceVersion
	}
	return ps.progress
}

// start settles obj at once when it needs no write, else hands it to a
// writer once the limit allows one more.
func (ps *passState) start(pr *pageRun, obj objectRef, progress Progress) {
	checkpoint, needed := ps.needsWrite(ps.kind, obj, progress)
	switch {
	case !needed && ps.kind == mainPass:
		ps.finish(pr, skipped, nil, obj) // newer than the checkpoint: done
		return
	case !needed:
		ps.finish(pr, passedOver, nil, obj) // not written during the run
		return
	}
	if ps.kind == catchUpPass {
		// Others wrote these objects during the run, at any version, and
		// a watch keeps no managedFields of them: Resource's version.
		obj.WriteAt = ""
	}
	chunk, err := ps.reserveSpace(ps.ctx, ps.kind.writer())
	if err != nil {
		ps.finish(pr, notCounted, nil, obj)
		return
	}
	if err := ps.writers.Acquire(ps.ctx); err != nil || ps.etcdFull.Load() {
		if err == nil {
			ps.writers.Release(limit.Signal{})
		}
		ps.space.Done(chunk, "")
		ps.finish(pr, notCounted, nil, obj)
		return
	}
	ps.running.Add(1)
	ps.goroutines.run(func() {
		defer ps.running.Done()
		outcome, rv, err := ps.handle(ps.ctx, obj, checkpoint)
		ps.space.Done(chunk, rv)
		if err != nil && stopsRun(err) && ps.ctx.Err() == nil {
			if errclass.IsNoSpace(err) {
				err = &EtcdFullError{Err: err}
			}
			ps.abort(fmt.Errorf("rewrite %s %s: %w", ps.opts.Resource.Resource, klog.KRef(obj.Namespace, obj.Name), err))
		}
		if ps.ctx.Err() != nil {
			outcome = notCounted
		}
		ps.finish(pr, outcome, err, obj)
	})
}

// finish records one object's outcome and marks done the pages at the head
// that have nothing pending.
func (ps *passState) finish(pr *pageRun, outcome fate, err error, obj objectRef) {
	if ps.opts.OnObject != nil && ps.kind == mainPass && outcome <= failed {
		ps.opts.OnObject()
	}
	ps.pagesMu.Lock()
	ps.tally(&pr.counts, ps.kind, outcome, err, obj)
	pr.unfinished = pr.unfinished || outcome == notCounted
	pr.pending--
	var done []*pageRun
	for len(ps.inFlight) > 0 && ps.inFlight[0].pending == 0 && !ps.inFlight[0].unfinished {
		done = append(done, ps.inFlight[0])
		ps.inFlight = ps.inFlight[1:]
	}
	if len(done) > 0 {
		ps.commit(ps.kind, done)
	}
	ps.pagesMu.Unlock()
	for range done {
		<-ps.slots
	}
}

// needsWrite decides, without a request, whether an object must be
// written, and against which checkpoint a refused write is judged. Objects
// newer than the checkpoint are done, and so are objects whose
// resourceVersion is one of this run's (or the run it follows) own
// acknowledged writes: an object already stored in the new version keeps
// its resourceVersion through a no-op write (the API server writes nothing
// when the bytes are the same), so without that a retried run would write
// every object created since the switch again, and a run retried after
// each of several denials would multiply its writes. The sweep only looks
// at objects written during
// the main pass by someone other than this run.
func (r *runner) needsWrite(kind passKind, obj objectRef, p Progress) (string, bool) {
	checkpoint := p.Checkpoint
	if kind == catchUpPass {
		if !isNewerOrUnknown(obj.ResourceVersion, p.Checkpoint) {
			return "", false
		}
		checkpoint = p.CatchUpCheckpoint
	}
	if newer, _ := isNewer(obj.ResourceVersion, checkpoint); newer || r.wroteVersion(obj.ResourceVersion) {
		return "", false
	}
	return checkpoint, true
}

// commit adds done pages, in listing order, to the run's progress and
// reports it. A page is never counted twice: a resumed run starts after it.
func (r *runner) commit(kind passKind, done []*pageRun) {
	r.mu.Lock()
	for _, pr := range done {
		c := pr.counts
		if kind == mainPass {
			r.progress.Listed += int64(len(pr.items))
		}
		r.progress.Rewritten += c.Rewritten
		r.progress.Skipped += c.Skipped
		r.progress.Failed += c.Failed
		r.progress.CaughtUp += c.CaughtUp
		for _, f := range c.Failures {
			if len(r.progress.Failures) < r.opts.MaxFailures {
				r.progress.Failures = append(r.progress.Failures, f)
			}
		}
		r.progress.Continue = pr.continueToken
		if kind == mainPass {
			r.progress.Remaining = pr.remaining
		}
	}
	r.mu.Unlock()
	r.notify()
}

// listing lists the objects from where the progress stands.
func (r *runner) listing(ctx context.Context, out chan<- page) {
	r.list(ctx, r.snapshot().Continue, out)
}

// pageSize is the next page's LIST limit: PageSize, or fewer objects
// while the limit allows few writers, pageObjectsPerWriter a writer and
// at least minPageSize. A LIST stalls the API server for as long as the
// page is large, and every other client's request waits behind it; beside
// clients the limit keeps at a few writers, a page of 500 costs them more
// than the writes it feeds, and writers at such a limit need no more.
//
// Where the watch cache cannot serve a page, etcd counts every key left in
// the range for each one (design.md, "Reads"): a page also holds at least
// 1/pageOfRemaining of the objects left (remaining, -1 when unknown), so
// that a pass in small pages walks no more index entries than pageOfRemaining
// times the objects; from 100,000 objects left, that is PageSize.
func (r *runner) pageSize(remaining int64) int64 {
	byWriters := max(minPageSize, int64(r.writers.Limit())*pageObjectsPerWriter)
	return min(r.opts.PageSize, max(byWriters, remaining/pageOfRemaining))
}

// list sends pages until the listing ends, from continueToken. A listing
// that outlives the API server's compaction interval goes on from the
// token its 410 carries, or starts again (paging.Pager.EachPage): what is
// done then costs no write but a second read. Objects written meanwhile are
// newer than the checkpoint either way, and an object created meanwhile is
// stored at the storage version. A LIST error ends the listing with a page
// that carries it.
func (r *runner) list(ctx context.Context, continueToken string, out chan<- page) {
	defer close(out)
	remaining := int64(-1) // the objects the last page said were left
	pager := paging.Pager[page]{
		List: func(ctx context.Context, opts metav1.ListOptions) (page, error) {
			var p page
			err := retry(ctx, func() error {
				var err error
				p, err = r.objects.list(ctx, opts)
				return err
			})
			if err == nil {
				remaining = p.remaining
			}
			return p, err
		},
		Continue: func(p page) string { return p.continueToken },
		Size:     func() int64 { return r.pageSize(remaining) },
	}
	send := func(p page) error {
		select {
		case out <- p:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := pager.EachPage(ctx, continueToken, send); err != nil && ctx.Err() == nil {
		_ = send(page{err: fmt.Errorf("list %s: %w", r.opts.Resource, err)})
	}
}

// handle rewrites one object. It is called holding a writer slot; every
// write goes out under a slot of its own and gives it back with what it
// told about the API server's load, so retries of throttled writes wait
// for the limit and the Retry-After like any other write. It returns the
// resourceVersion of the write stored, if any. The returned error explains a
// Failed outcome or stops the run (stopsRun).
func (r *runner) handle(ctx context.Context, obj objectRef, checkpoint string) (fate, string, error) {
	outcome, written, err := r.rewrite(ctx, obj, checkpoint)
	if outcome == rewritten {
		r.recordWrite(written)
	}
	return outcome, written, err
}

// rewrite is handle's loop: write, and read back what a refused write means.
func (r *runner) rewrite(ctx context.Context, obj objectRef, checkpoint string) (fate, string, error) {
	if r.qps != nil {
		if err := r.qps.Wait(ctx); err != nil {
			r.writers.Release(limit.Signal{})
			return notCounted, "", err
		}
	}
	target := obj.ObjectVersion
	for attempt := 1; ; attempt++ {
		if attempt > 1 {
			if err := r.writers.Acquire(ctx); err != nil {
				return notCounted, "", err
			}
		}
		written, err := r.write(ctx, obj, target)
		if err == nil {
			return rewritten, written.ResourceVersion, nil
		}
		if obj.WriteAt != "" && (apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsNotFound(err)) &&
			!errclass.IsConversionError(err) {
			// Admission may refuse writes at an old version (a policy
			// against a deprecated one), or the version lack the /status
			// written to: write at Resource's instead, which a deleted
			// object refuses too.
			obj.WriteAt = ""
			continue
		}
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return failed, "", err
		}
		var current *ObjectVersion
		if getErr := retry(ctx, func() error {
			var err error
			current, err = r.objects.get(ctx, obj.Namespace, obj.Name)
			return err
		}); getErr != nil {
			return failed, "", fmt.Errorf("%w; reading it back to check failed: %w", err, getErr)
		}
		switch judge(target, current, checkpoint) {
		case writeAgain:
			if attempt < maxWriteAttempts {
				// Written meanwhile, perhaps at Resource's version: the
				// listed managedFields no longer tell where it is cheap.
				target, obj.WriteAt = *current, ""
				continue
			}
			return failed, "", fmt.Errorf("%w; it kept changing over %d attempts", err, attempt)
		case failed:
			return failed, "", fmt.Errorf("%w; the object still exists unchanged, so it was not rewritten", err)
		}
		return skipped, "", nil
	}
}

// write sends the no-op write, retrying throttled and failed requests
// (Retriable) with backoff. It is called holding a writer slot and returns
// it after each request, taking a new one for each retry.
func (r *runner) write(ctx context.Context, obj objectRef, target ObjectVersion) (ObjectVersion, error) {
	backoff := retryBackoff
	for {
		start := time.Now()
		written, err := r.objects.patch(ctx, obj.Namespace, obj.Name, obj.WriteAt, NoOpPatch(target), r.opts.WriteTo.Subresources())
		signal := limit.Signal{Latency: time.Since(start), Throttled: errclass.Retriable(err) || errclass.IsTimeout(err)}
		if err == nil {
			signal.Revision, _ = strconv.ParseUint(written.ResourceVersion, 10, 64)
		}
		if seconds, ok := apierrors.SuggestsClientDelay(err); ok {
			signal.RetryAfter = time.Duration(seconds) * time.Second
		}
		if errclass.IsNoSpace(err) {
			// Before the slot is free: no other write starts after it.
			r.etcdFull.Store(true)
		}
		r.writers.Release(signal)
		if err == nil || !errclass.Retriable(err) || backoff.Steps <= 1 || ctx.Err() != nil {
			return written, err
		}
		select {
		case <-ctx.Done():
			return written, errors.Join(err, ctx.Err())
		case <-time.After(backoff.Step()):
		}
		if err := r.writers.Acquire(ctx); err != nil {
			return written, errors.Join(err, ctx.Err())
		}
	}
}

// maxWriteAttempts bounds how often one object is written again after it
// changed under the run without becoming newer than the checkpoint.
const maxWriteAttempts = 3

// tally counts one object's outcome in its page.
func (r *runner) tally(c *Progress, kind passKind, outcome fate, err error, obj objectRef) {
	switch {
	case outcome == notCounted, outcome == dispatched, outcome == passedOver:
	case outcome == failed:
		c.Failed++
		if len(c.Failures) < r.opts.MaxFailures {
			c.Failures = append(c.Failures, Failure{Namespace: obj.Namespace, Name: obj.Name, Reason: errorText(err)})
		}
	case kind == catchUpPass:
		c.CaughtUp++
	case outcome == rewritten:
		c.Rewritten++
	default:
		c.Skipped++
	}
}

// recordWrite remembers the resourceVersion of an acknowledged write.
func (r *runner) recordWrite(rv string) {
	v, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.progress.CatchUp { // the sweep searches the set: it stays as it is
		r.written.add(v)
	}
}

// wroteVersion reports whether rv is the resourceVersion of one of this
// run's own writes.
func (r *runner) wroteVersion(rv string) bool {
	v, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.written.has(v) || inRanges(r.resumed, v)
}

// stopsRun reports whether a write error is not the object's own but the
