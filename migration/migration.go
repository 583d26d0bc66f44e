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
// win: the object is never overwritten.
//
// What counts as done is the package's invariant: an object is migrated only
// when the API server acknowledged a write of it (2xx), a GET proves it gone
// or replaced (new uid), or its resourceVersion is newer than the checkpoint
// taken after the storage switch settled. A refused write is never taken at
// its word: a 404 from a status subresource the version does not have looks
// exactly like a deleted object, so the object is read back (Judge).
//
// After the main pass a catch-up sweep lists once more and rewrites the
// objects whose resourceVersion lies between the checkpoint and the sweep's
// own listing and that the run did not write itself: objects written during
// the run, possibly by an API server of an HA control plane that learned the
// new storage version late. Its writes are the churn of the run, not N.
//
// Writers run under an adaptive limit (see NextLimit) and flow across page
// boundaries; the continue token a caller saves advances only past pages
// whose every object is done, so a resumed run loses nothing and repeats
// little.
//
// The package is used by the Graduator operator and CLI, and works in your
// own envtest suites: give it a dynamic client and the resource.
package migration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2"
)

// WriteTarget says where the no-op writes go.
type WriteTarget string

const (
	// WriteToObject patches the object itself.
	WriteToObject WriteTarget = "Object"
	// WriteToStatus patches the /status subresource, for CRDs whose
	// admission webhooks reject no-op writes to the object.
	WriteToStatus WriteTarget = "Status"
)

// Defaults for zero Options fields.
const (
	// DefaultConcurrency is the upper bound of the adaptive writer limit.
	DefaultConcurrency = 64
	DefaultPageSize    = 500
	DefaultMaxFailures = 20
	// maxListRestarts bounds how often an expired continue token restarts
	// the listing in one run.
	maxListRestarts = 5
	// pagesInFlight bounds the pages listed but not yet done: memory holds
	// at most this many pages of metadata.
	pagesInFlight = 3
)

// Options configure a Run.
type Options struct {
	// Resource is the group, version and plural to migrate. The version is
	// the one objects are read and written at; any served version works, the
	// storage version avoids conversions.
	Resource schema.GroupVersionResource
	// Config, when set, is what the engine builds its own client from: a
	// metadata client (only namespace, name, uid and resourceVersion travel,
	// whatever the size of the objects) whose transport tells the adaptive
	// limit at once when the API server throttles. Preferred.
	Config *rest.Config
	// Metadata, when set and Config is not, lists, reads and writes through
	// this metadata client. The dynamic client given to Run is used when
	// neither is set.
	Metadata metadata.Interface
	// Concurrency is the upper bound on writers in flight; the limit adapts
	// below it (DefaultConcurrency when 0).
	Concurrency int
	// FixedConcurrency keeps Concurrency writers in flight instead of
	// adapting, for measurements.
	FixedConcurrency bool
	// Priority is how much of the API server the adaptive limit takes:
	// PriorityBackground (when empty) yields to other clients,
	// PriorityFull takes the server's full speed (see NextLimit).
	Priority Priority
	// PageSize is the LIST limit.
	PageSize int64
	// QPS, when above 0, caps writes per second. None by default: API
	// Priority and Fairness protects the API server, and the adaptive limit
	// backs off when it says so.
	QPS float32
	// WriteTo is where the no-op writes go; WriteToObject when empty.
	WriteTo WriteTarget
	// Checkpoint is a resourceVersion taken after the storage version
	// switched and settled: objects with a newer resourceVersion were
	// written since and are skipped without a write. Empty: the first
	// LIST's resourceVersion is taken (and reported in Progress).
	Checkpoint string
	// Resume is the progress of an earlier run to continue: its counts and
	// its continue token. The zero value starts from the beginning.
	Resume Progress
	// MaxFailures bounds Progress.Failures.
	MaxFailures int
	// OnProgress is called, never concurrently, each time the oldest pages
	// in flight are done, so persisting Progress.Continue and
	// Progress.Checkpoint is safe; and once more at the end.
	OnProgress func(Progress)
}

// Progress counts what a run did. Counts are cumulative, including those of
// the Options.Resume it started from, and cover done pages only.
type Progress struct {
	// Checkpoint is the checkpoint resourceVersion in use.
	Checkpoint string
	// Continue is where the next LIST starts; empty at the start and when
	// the listing is complete. During the catch-up sweep it is the sweep's.
	Continue string
	// CatchUp is true once the main pass is complete and the catch-up sweep
	// runs.
	CatchUp bool
	// CatchUpCheckpoint is the resourceVersion of the sweep's listing: the
	// sweep rewrites objects written between Checkpoint and it.
	CatchUpCheckpoint string
	// Listed objects, Rewritten ones, Skipped ones (proven done without a
	// write of ours: deleted or replaced meanwhile, or written after the
	// checkpoint) and Failed ones, in the main pass.
	Listed, Rewritten, Skipped, Failed int64
	// Remaining is the API server's estimate of the objects not listed yet
	// (remainingItemCount; 0 after the last page), -1 when unknown.
	Remaining int64
	// CaughtUp counts the objects the catch-up sweep found written during
	// the run and rewrote (or proved done).
	CaughtUp int64
	// Writers is the adaptive limit on writes in flight when reported.
	Writers int
	// WritersReason says what the limit is doing: probing a step, holding,
	// backing off after a throttle (or fixed).
	WritersReason LimitReason
	// WriteRate is the engine's writes per second over the last window the
	// limit was measured on (0 before the first).
	WriteRate float64
	// Failures names some of the failed objects, at most Options.MaxFailures.
	Failures []Failure
}

// Failure is an object the run could not rewrite.
type Failure struct {
	Namespace, Name string
	// Reason is the API server's error.
	Reason string
}

func (f Failure) String() string {
	return klog.KRef(f.Namespace, f.Name).String() + ": " + f.Reason
}

// Result is the outcome of a Run.
type Result struct {
	Progress
	// Complete is true when the main pass and the catch-up sweep reached the
	// end of their listings: every object was handled, and each one is
	// either done or counted in Failed.
	Complete bool
}

// Run rewrites every object of opts.Resource, then sweeps once more over the
// objects written while it ran (see the package documentation). It returns
// when both listings are complete, when the context is cancelled (with the
// progress of the last done page, from which a later run can resume), or on
// an error that stops the run as a whole: a failed LIST, or a write refused
// for a reason that is not the object's own (a conversion webhook down, the
// API server unavailable, no permission). Errors of single objects do not
// stop it: they are counted in Failed and named in Failures.
//
// An object counts as done only when the API server acknowledged a write of
// it (2xx), a GET proved it deleted or replaced (new uid), or its
// resourceVersion is newer than the checkpoint. Anything else is Failed.
func Run(ctx context.Context, client dynamic.Interface, opts Options) (Result, error) {
	opts = withDefaults(opts)
	r := &runner{
		opts:     opts,
		writers:  newLimiter(opts.Concurrency, opts.FixedConcurrency, opts.Priority),
		progress: opts.Resume,
	}
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
	if opts.Checkpoint != "" {
		r.progress.Checkpoint = opts.Checkpoint
	}
	if !r.progress.CatchUp {
		complete, err := r.pass(ctx, mainPass)
		if !complete || err != nil {
			return r.result(false), err
		}
		r.mu.Lock()
		r.progress.CatchUp, r.progress.Continue = true, ""
		r.mu.Unlock()
	}
	complete, err := r.pass(ctx, catchUpPass)
	return r.result(complete && err == nil), err
}

func withDefaults(o Options) Options {
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.PageSize <= 0 {
		o.PageSize = DefaultPageSize
	}
	if o.WriteTo == "" {
		o.WriteTo = WriteToObject
	}
	if o.MaxFailures <= 0 {
		o.MaxFailures = DefaultMaxFailures
	}
	return o
}

type runner struct {
	objects objectClient
	opts    Options
	writers *limiter
	qps     flowcontrol.RateLimiter // nil: no cap

	// mu guards progress, the done pages' counts, and written.
	mu       sync.Mutex
	progress Progress
	// written holds the resourceVersions the API server gave this run's own
	// writes, so that the catch-up sweep does not rewrite what the main pass
	// just wrote (8 bytes an object; lost on a restart, when the sweep then
	// rewrites those objects again, which is safe and cheap).
	written []uint64
	// report serializes OnProgress calls.
	report sync.Mutex
}

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

// pass lists every object and hands each to a writer. Writers flow from
// one page into the next; pages are marked done in listing order.
func (r *runner) pass(ctx context.Context, kind passKind) (bool, error) {
	// A writer that meets an error which is not the object's own aborts the
	// pass through this context; pages not done are then not counted.
	workCtx, abort := context.WithCancelCause(ctx)
	defer abort(nil)
	listCtx, stopListing := context.WithCancel(workCtx)
	defer stopListing()
	pages := make(chan page, 1)
	go r.list(listCtx, r.snapshot().Continue, pages)

	if kind == catchUpPass {
		r.mu.Lock()
		slices.Sort(r.written)
		r.mu.Unlock()
	}
	var (
		writers  sync.WaitGroup
		mu       sync.Mutex // guards inFlight
		inFlight []*pageRun
		slots    = make(chan struct{}, pagesInFlight)
	)
	// finish records one object's outcome and marks done the pages at the
	// head that have nothing pending.
	finish := func(pr *pageRun, outcome Outcome, err error, obj objectRef) {
		mu.Lock()
		r.tally(&pr.counts, kind, outcome, err, obj)
		pr.unfinished = pr.unfinished || outcome == notCounted
		pr.pending--
		var done []*pageRun
		for len(inFlight) > 0 && inFlight[0].pending == 0 && !inFlight[0].unfinished {
			done = append(done, inFlight[0])
			inFlight = inFlight[1:]
		}
		if len(done) > 0 {
			r.commit(kind, done)
		}
		mu.Unlock()
		for range done {
			<-slots
		}
	}

	var listErr error
dispatch:
	for p := range pages {
		if p.err != nil {
			listErr = p.err
			break
		}
		select {
		case slots <- struct{}{}:
		case <-workCtx.Done():
			break dispatch
		}
		r.mu.Lock()
		switch {
		case kind == mainPass && r.progress.Checkpoint == "":
			r.progress.Checkpoint = p.resourceVersion
		case kind == catchUpPass && r.progress.CatchUpCheckpoint == "":
			r.progress.CatchUpCheckpoint = p.resourceVersion
		}
		progress := r.progress
		r.mu.Unlock()

		pr := &pageRun{page: p, pending: len(p.items) + 1} // +1: held until dispatched
		mu.Lock()
		inFlight = append(inFlight, pr)
		mu.Unlock()
		for _, obj := range p.items {
			checkpoint, needed := r.needsWrite(kind, obj, progress)
			switch {
			case !needed && kind == mainPass:
				finish(pr, Skipped, nil, obj) // newer than the checkpoint: done
				continue
			case !needed:
				finish(pr, passedOver, nil, obj) // not written during the run
				continue
			}
			if err := r.writers.Acquire(workCtx); err != nil {
				finish(pr, notCounted, nil, obj)
				continue
			}
			writers.Add(1)
			go func(obj objectRef) {
				defer writers.Done()
				outcome, err := r.handle(workCtx, obj, checkpoint)
				if err != nil && StopsRun(err) && workCtx.Err() == nil {
					abort(fmt.Errorf("rewrite %s %s: %w", r.opts.Resource.Resource, klog.KRef(obj.Namespace, obj.Name), err))
				}
				if workCtx.Err() != nil {
					outcome = notCounted
				}
				finish(pr, outcome, err, obj)
			}(obj)
		}
		finish(pr, dispatched, nil, objectRef{})
	}
	writers.Wait()
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

// needsWrite decides, without a request, whether an object must be
// written, and against which checkpoint a refused write is judged. Objects
// newer than the checkpoint are done; the sweep only looks at objects
// written during the main pass by someone other than this run.
func (r *runner) needsWrite(kind passKind, obj objectRef, p Progress) (string, bool) {
	checkpoint := p.Checkpoint
	if kind == catchUpPass {
		if !isNewerOrUnknown(obj.ResourceVersion, p.Checkpoint) || r.wroteVersion(obj.ResourceVersion) {
			return "", false
		}
		checkpoint = p.CatchUpCheckpoint
	}
	if newer, _ := isNewer(obj.ResourceVersion, checkpoint); newer {
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

// list sends pages until the listing ends, restarting it from the beginning
// when the continue token expired: objects rewritten meanwhile are newer than
// the checkpoint and cost nothing the second time.
func (r *runner) list(ctx context.Context, continueToken string, pages chan<- page) {
	defer close(pages)
	restarts := 0
	for {
		var p page
		err := retry(ctx, func() error {
			var err error
			p, err = r.objects.list(ctx, metav1.ListOptions{Limit: r.opts.PageSize, Continue: continueToken})
			return err
		})
		if apierrors.IsResourceExpired(err) && continueToken != "" && restarts < maxListRestarts {
			restarts++
			continueToken = ""
			continue
		}
		if err != nil {
			p = page{err: fmt.Errorf("list %s: %w", r.opts.Resource, err)}
		}
		select {
		case pages <- p:
		case <-ctx.Done():
			return
		}
		if err != nil || p.continueToken == "" {
			return
		}
		continueToken = p.continueToken
	}
}

// handle rewrites one object. It is called holding a writer slot; every
// write goes out under a slot of its own and gives it back with what it
// told about the API server's load, so retries of throttled writes wait
// for the limit and the Retry-After like any other write. The returned
// error explains a Failed outcome or stops the run (StopsRun).
func (r *runner) handle(ctx context.Context, obj objectRef, checkpoint string) (Outcome, error) {
	if r.qps != nil {
		if err := r.qps.Wait(ctx); err != nil {
			r.writers.Release(Signal{})
			return notCounted, err
		}
	}
	target := obj.ObjectVersion
	for attempt := 1; ; attempt++ {
		if attempt > 1 {
			if err := r.writers.Acquire(ctx); err != nil {
				return notCounted, err
			}
		}
		written, err := r.write(ctx, obj, target)
		if err == nil {
			r.recordWrite(written.ResourceVersion)
			return Rewritten, nil
		}
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return Failed, err
		}
		var current *ObjectVersion
		if getErr := retry(ctx, func() error {
			var err error
			current, err = r.objects.get(ctx, obj.Namespace, obj.Name)
			return err
		}); getErr != nil {
			return Failed, fmt.Errorf("%w; reading it back to check failed: %w", err, getErr)
		}
		switch Judge(target, current, checkpoint) {
		case Retry:
			if attempt < maxWriteAttempts {
				target = *current
				continue
			}
			return Failed, fmt.Errorf("%w; it kept changing over %d attempts", err, attempt)
		case Failed:
			return Failed, fmt.Errorf("%w; the object still exists unchanged, so it was not rewritten", err)
		}
		return Skipped, nil
	}
}

// write sends the no-op write, retrying throttled and failed requests
// (Retriable) with backoff. It is called holding a writer slot and returns
// it after each request, taking a new one for each retry.
func (r *runner) write(ctx context.Context, obj objectRef, target ObjectVersion) (ObjectVersion, error) {
	backoff := retryBackoff
	for {
		start := time.Now()
		written, err := r.objects.patch(ctx, obj.Namespace, obj.Name, NoOpPatch(target), r.opts.WriteTo.subresources())
		signal := Signal{Latency: time.Since(start), Throttled: Retriable(err) || IsTimeout(err)}
		if seconds, ok := apierrors.SuggestsClientDelay(err); ok {
			signal.RetryAfter = time.Duration(seconds) * time.Second
		}
		r.writers.Release(signal)
		if err == nil || !Retriable(err) || backoff.Steps <= 1 || ctx.Err() != nil {
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

// Outcome is what became of one object.
type Outcome int

const (
	// Rewritten: the API server acknowledged the write.
	Rewritten Outcome = iota
	// Skipped: proven done without a write of ours.
	Skipped
	// Failed: not proven done; blocks pruning.
	Failed
	// Retry: the object changed but is not proven done; write it again.
	Retry
	// notCounted: the run stopped before the object was handled; its page
	// is not done and is listed again on resume.
	notCounted
	// dispatched: every object of the page was handed out (not an object).
	dispatched
	// passedOver: the catch-up sweep has nothing to do with the object.
	passedOver
)

// ObjectVersion identifies one state of an object.
type ObjectVersion struct {
	UID, ResourceVersion string
}

// Judge decides, after the API server refused a no-op write with a conflict
// or not-found, what a fresh read of the object proves. current is nil when
// the read found no object. It is the invariant of the package: an object
// is done only when it is gone, was replaced (another uid), or was written
// after the checkpoint; an object that still exists as it was listed is not
// done, whatever the write said (a 404 from a missing status subresource
// looks exactly like a deleted object).
func Judge(written ObjectVersion, current *ObjectVersion, checkpoint string) Outcome {
	switch {
	case current == nil:
		return Skipped // deleted
	case current.UID != written.UID:
		return Skipped // deleted and created again: stored in the new version
	}
	if newer, _ := isNewer(current.ResourceVersion, checkpoint); newer {
		return Skipped
	}
	if current.ResourceVersion != written.ResourceVersion {
		return Retry
	}
	return Failed
}

// NoOpPatch is the JSON merge patch the migration sends: it changes nothing
// and fails unless the object still has this uid and resourceVersion.
func NoOpPatch(v ObjectVersion) []byte {
	return fmt.Appendf(nil, `{"metadata":{"resourceVersion":%q,"uid":%q}}`, v.ResourceVersion, v.UID)
}

// subresources returns the subresource path of the write target.
func (t WriteTarget) subresources() []string {
	if t == WriteToStatus {
		return []string{"status"}
	}
	return nil
}

// Subresources returns the subresource the writes go to, for callers that
// must take the same path (the operator's dry-run preflight).
func (t WriteTarget) Subresources() []string { return t.subresources() }

// tally counts one object's outcome in its page.
func (r *runner) tally(c *Progress, kind passKind, outcome Outcome, err error, obj objectRef) {
	switch {
	case outcome == notCounted, outcome == dispatched, outcome == passedOver:
	case outcome == Failed:
		c.Failed++
		if len(c.Failures) < r.opts.MaxFailures {
			c.Failures = append(c.Failures, Failure{Namespace: obj.Namespace, Name: obj.Name, Reason: errorText(err)})
		}
	case kind == catchUpPass:
		c.CaughtUp++
	case outcome == Rewritten:
		c.Rewritten++
	default:
		c.Skipped++
	}
}

func errorText(err error) string {
	if err == nil {
		return "unknown"
	}
	return err.Error()
}

// recordWrite remembers the resourceVersion of an acknowledged write.
func (r *runner) recordWrite(rv string) {
	v, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.progress.CatchUp { // the sweep searches the list: it stays as it is
		r.written = append(r.written, v)
	}
}

// wroteVersion reports whether rv is the resourceVersion of one of this
// run's own writes (r.written is sorted when the sweep starts).
func (r *runner) wroteVersion(rv string) bool {
	v, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	_, found := slices.BinarySearch(r.written, v)
	return found
}

// StopsRun reports whether a write error is not the object's own but the
// cluster's, so that going on would only fail every other object the same
// way: a conversion webhook that does not answer, an API server that stays
// unavailable after the retries, a request not authenticated or not allowed
// by RBAC. The run stops and a later run resumes from the last complete
// page. Rejections of the object itself (validation, an admission webhook
// or policy saying no) are counted as failures instead.
func StopsRun(err error) bool {
	switch {
	case err == nil:
		return false
	case IsConversionError(err), Retriable(err), apierrors.IsUnauthorized(err):
		return true
	case apierrors.IsForbidden(err):
		return IsRBACDenial(err)
	}
	return errors.Is(err, context.DeadlineExceeded)
}

// IsConversionError reports whether err comes from a CRD conversion webhook.
// The API server wraps those in a 500 whose message names the webhook; there
// is no structured cause.
func IsConversionError(err error) bool {
	return err != nil && strings.Contains(err.Error(), "conversion webhook")
}

// IsRBACDenial tells a Forbidden from the authorizer ("User ... cannot patch
// resource ...") from one returned by an admission webhook or policy, which
// rejects the object rather than the caller.
func IsRBACDenial(err error) bool {
	if !apierrors.IsForbidden(err) {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, " cannot ") && !strings.Contains(msg, "admission") && !strings.Contains(msg, "denied")
}

// isNewerOrUnknown reports whether rv may be newer than the checkpoint:
// true when it is, or when either cannot be compared.
func isNewerOrUnknown(rv, checkpoint string) bool {
	newer, err := isNewer(rv, checkpoint)
	return newer || err != nil || checkpoint == "" || rv == ""
}

// isNewer reports whether resourceVersion rv is newer than the checkpoint.
// Unparsable versions are never newer: the object is then rewritten, which is
// always safe.
func isNewer(rv, checkpoint string) (bool, error) {
	if checkpoint == "" || rv == "" {
		return false, nil
	}
	cmp, err := resourceversion.CompareResourceVersion(rv, checkpoint)
	if err != nil {
		return false, err
	}
	return cmp > 0, nil
}

// IsTimeout reports a client-side timeout anywhere in the chain: a context
// deadline or a net.Error that timed out both say Timeout().
func IsTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// retryBackoff spaces retries of throttled or failing requests: about 13 s in
// all, longer than a webhook's restart, shorter than a certificate rotation's
// worst case (a later run picks those up).
var retryBackoff = wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: 6, Cap: 5 * time.Second}

// retry calls fn until it succeeds, fails with an error that retrying cannot
// fix, or retryBackoff runs out. A Retry-After from the server is honoured.
func retry(ctx context.Context, fn func() error) error {
	backoff := retryBackoff
	for {
		err := fn()
		if err == nil || !Retriable(err) || backoff.Steps <= 1 {
			return err
		}
		delay := backoff.Step()
		if seconds, ok := apierrors.SuggestsClientDelay(err); ok && time.Duration(seconds)*time.Second > delay {
			delay = time.Duration(seconds) * time.Second
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(delay):
		}
	}
}

// Retriable reports whether an error is worth retrying: throttling, server
// errors and broken connections. Conflicts, missing objects and rejections
// are not.
func Retriable(err error) bool {
	switch {
	case apierrors.IsTooManyRequests(err), apierrors.IsServerTimeout(err), apierrors.IsTimeout(err),
		apierrors.IsInternalError(err), apierrors.IsServiceUnavailable(err), apierrors.IsUnexpectedServerError(err):
		return true
	case utilnet.IsConnectionReset(err), utilnet.IsConnectionRefused(err), utilnet.IsProbableEOF(err):
		return true
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Code >= 500 {
		return true
	}
	return false
}

func (r *runner) snapshot() Progress {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.progress
	p.Failures = append([]Failure(nil), r.progress.Failures...)
	p.Writers, p.WritersReason, p.WriteRate = r.writers.Status()
	return p
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
	if complete {
		res.Continue = ""
		res.Remaining = 0
		r.notify()
	}
	return res
}
