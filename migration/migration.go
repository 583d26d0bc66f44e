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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
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
	DefaultConcurrency = 16
	DefaultPageSize    = 500
	DefaultQPS         = 200
	DefaultMaxFailures = 20
	// maxListRestarts bounds how often an expired continue token restarts
	// the listing in one run.
	maxListRestarts = 5
)

// Options configure a Run.
type Options struct {
	// Resource is the group, version and plural to migrate. The version is
	// the one objects are read and written at; any served version works, the
	// storage version avoids conversions.
	Resource schema.GroupVersionResource
	// Concurrency is the number of parallel writers.
	Concurrency int
	// PageSize is the LIST limit.
	PageSize int64
	// QPS caps writes per second.
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
	// OnProgress is called after every page, once every object of the page
	// was handled, so persisting Progress.Continue and Progress.Checkpoint is
	// safe; and once more at the end.
	OnProgress func(Progress)
}

// Progress counts what a run did. Counts are cumulative, including those of
// the Options.Resume it started from.
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
	// CaughtUp counts the objects the catch-up sweep found written during
	// the run and rewrote (or proved done).
	CaughtUp int64
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
// progress of the last complete page, from which a later run can resume), or
// on an error that stops the run as a whole: a failed LIST, or a write
// refused for a reason that is not the object's own (a conversion webhook
// down, the API server unavailable, no permission). Errors of single objects
// do not stop it: they are counted in Failed and named in Failures.
//
// An object counts as done only when the API server acknowledged a write of
// it (2xx), a GET proved it deleted or replaced (new uid), or its
// resourceVersion is newer than the checkpoint. Anything else is Failed.
func Run(ctx context.Context, client dynamic.Interface, opts Options) (Result, error) {
	opts = withDefaults(opts)
	r := &runner{
		client:   client,
		opts:     opts,
		limiter:  flowcontrol.NewTokenBucketRateLimiter(opts.QPS, max(1, opts.Concurrency)),
		progress: opts.Resume,
	}
	r.progress.Failures = append([]Failure(nil), opts.Resume.Failures...)
	if opts.Checkpoint != "" {
		r.progress.Checkpoint = opts.Checkpoint
	}
	defer r.limiter.Stop()
	if !r.progress.CatchUp {
		complete, err := r.pass(ctx, mainPass)
		if !complete || err != nil {
			return r.result(false), err
		}
		r.count(func(p *Progress) { p.CatchUp, p.Continue = true, "" })
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
	if o.QPS <= 0 {
		o.QPS = DefaultQPS
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
	client  dynamic.Interface
	opts    Options
	limiter flowcontrol.RateLimiter

	mu       sync.Mutex
	progress Progress
	// written holds the resourceVersions the API server gave this run's own
	// writes, so that the catch-up sweep does not rewrite what the main pass
	// just wrote (8 bytes an object; lost on a restart, when the sweep then
	// rewrites those objects again, which is safe and cheap).
	written []uint64
}

// passKind tells the main pass from the catch-up sweep.
type passKind int

const (
	mainPass passKind = iota
	catchUpPass
)

// page is one LIST response, or the error that ended the listing.
type page struct {
	items           []unstructured.Unstructured
	resourceVersion string
	continueToken   string
	err             error
}

// pass lists every object and hands each to a writer, a page at a time. It
// reports whether the listing reached its end.
func (r *runner) pass(ctx context.Context, kind passKind) (bool, error) {
	// A writer that meets an error which is not the object's own aborts the
	// pass through this context; the page is then not counted as done.
	workCtx, abort := context.WithCancelCause(ctx)
	defer abort(nil)
	listCtx, stopListing := context.WithCancel(workCtx)
	defer stopListing()
	// One page is fetched ahead while the workers write the current one;
	// memory holds at most two pages.
	pages := make(chan page, 1)
	go r.list(listCtx, r.snapshot().Continue, pages)

	if kind == catchUpPass {
		slices.Sort(r.written)
	}
	work := make(chan *unstructured.Unstructured)
	var workers sync.WaitGroup
	var pageDone sync.WaitGroup
	for range r.opts.Concurrency {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for obj := range work {
				if err := r.handle(workCtx, kind, obj); err != nil {
					abort(err)
				}
				pageDone.Done()
			}
		}()
	}
	defer func() {
		close(work)
		workers.Wait()
	}()

	for p := range pages {
		if p.err != nil {
			return false, p.err
		}
		saved := r.snapshot()
		r.mu.Lock()
		switch {
		case kind == mainPass && r.progress.Checkpoint == "":
			r.progress.Checkpoint = p.resourceVersion
		case kind == catchUpPass && r.progress.CatchUpCheckpoint == "":
			r.progress.CatchUpCheckpoint = p.resourceVersion
		}
		if kind == mainPass {
			r.progress.Listed += int64(len(p.items))
		}
		r.mu.Unlock()

		for i := range p.items {
			pageDone.Add(1)
			select {
			case work <- &p.items[i]:
			case <-workCtx.Done():
				pageDone.Done()
			}
		}
		pageDone.Wait()
		if workCtx.Err() != nil {
			// The page may be half done: report the last complete page, so
			// that a resumed run lists this page again.
			r.mu.Lock()
			r.progress = saved
			r.mu.Unlock()
			if cause := context.Cause(workCtx); ctx.Err() == nil && cause != nil {
				return false, cause
			}
			return false, ctx.Err()
		}
		r.mu.Lock()
		r.progress.Continue = p.continueToken
		r.mu.Unlock()
		r.report()
	}
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	return true, nil
}

// list sends pages until the listing ends, restarting it from the beginning
// when the continue token expired: objects rewritten meanwhile are newer than
// the checkpoint and cost nothing the second time.
func (r *runner) list(ctx context.Context, continueToken string, pages chan<- page) {
	defer close(pages)
	restarts := 0
	for {
		var list *unstructured.UnstructuredList
		err := retry(ctx, func() error {
			var err error
			list, err = r.client.Resource(r.opts.Resource).List(ctx, metav1.ListOptions{
				Limit: r.opts.PageSize, Continue: continueToken,
			})
			return err
		})
		if apierrors.IsResourceExpired(err) && continueToken != "" && restarts < maxListRestarts {
			restarts++
			continueToken = ""
			continue
		}
		p := page{err: err}
		if err != nil {
			p.err = fmt.Errorf("list %s: %w", r.opts.Resource, err)
		} else {
			p = page{items: list.Items, resourceVersion: list.GetResourceVersion(), continueToken: list.GetContinue()}
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

// handle brings one object to a verdict and counts it. It returns an error
// only for one that is not the object's own and stops the pass.
func (r *runner) handle(ctx context.Context, kind passKind, obj *unstructured.Unstructured) error {
	if ctx.Err() != nil {
		return nil
	}
	progress := r.snapshot()
	checkpoint := progress.Checkpoint
	if kind == catchUpPass {
		// The sweep is only about objects written during the main pass, by
		// someone other than this run.
		if !isNewerOrUnknown(obj.GetResourceVersion(), progress.Checkpoint) || r.wroteVersion(obj.GetResourceVersion()) {
			return nil
		}
		checkpoint = progress.CatchUpCheckpoint
	}
	if newer, _ := isNewer(obj.GetResourceVersion(), checkpoint); newer {
		r.tally(kind, Skipped, nil, obj)
		return nil
	}
	if err := r.limiter.Wait(ctx); err != nil {
		return nil
	}
	outcome, err := r.rewrite(ctx, obj, checkpoint)
	switch {
	case ctx.Err() != nil:
		return nil // not counted: the page is listed again on resume
	case err != nil && StopsRun(err):
		return fmt.Errorf("rewrite %s %s: %w", r.opts.Resource.Resource, klog.KObj(obj), err)
	}
	r.tally(kind, outcome, err, obj)
	return nil
}

// rewrite sends the no-op write, and when the API server refuses it with a
// conflict or not-found, reads the object back to prove what happened
// (Judge). The returned error explains a Failed outcome or stops the run.
func (r *runner) rewrite(ctx context.Context, obj *unstructured.Unstructured, checkpoint string) (Outcome, error) {
	target := ObjectVersion{UID: string(obj.GetUID()), ResourceVersion: obj.GetResourceVersion()}
	for attempt := 1; ; attempt++ {
		var written *unstructured.Unstructured
		err := retry(ctx, func() error {
			var err error
			written, err = r.write(ctx, obj.GetNamespace(), obj.GetName(), target)
			return err
		})
		if err == nil {
			r.recordWrite(written.GetResourceVersion())
			return Rewritten, nil
		}
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return Failed, err
		}
		var current *ObjectVersion
		var getErr error
		getErr = retry(ctx, func() error {
			got, err := r.client.Resource(r.opts.Resource).Namespace(obj.GetNamespace()).Get(ctx, obj.GetName(), metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				current = nil
				return nil
			case err != nil:
				return err
			}
			current = &ObjectVersion{UID: string(got.GetUID()), ResourceVersion: got.GetResourceVersion()}
			return nil
		})
		if getErr != nil {
			return Failed, fmt.Errorf("%w; reading it back to check failed: %w", err, getErr)
		}
		verdict := Judge(target, current, checkpoint)
		switch {
		case verdict == Retry && attempt < maxWriteAttempts:
			target = *current
			continue
		case verdict == Retry:
			return Failed, fmt.Errorf("%w; it kept changing over %d attempts", err, attempt)
		case verdict == Failed:
			return Failed, fmt.Errorf("%w; the object still exists unchanged, so it was not rewritten", err)
		}
		return verdict, nil
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

// write sends the no-op merge patch with the object's resourceVersion and
// uid as preconditions, to the object or its status subresource.
func (r *runner) write(ctx context.Context, namespace, name string, target ObjectVersion) (*unstructured.Unstructured, error) {
	return r.client.Resource(r.opts.Resource).Namespace(namespace).
		Patch(ctx, name, types.MergePatchType, NoOpPatch(target), metav1.PatchOptions{}, r.opts.WriteTo.subresources()...)
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

func (r *runner) tally(kind passKind, outcome Outcome, err error, obj *unstructured.Unstructured) {
	r.count(func(p *Progress) {
		switch {
		case outcome == Failed:
			p.Failed++
			if len(p.Failures) < r.opts.MaxFailures {
				p.Failures = append(p.Failures, Failure{Namespace: obj.GetNamespace(), Name: obj.GetName(), Reason: errorText(err)})
			}
		case kind == catchUpPass:
			p.CaughtUp++
		case outcome == Rewritten:
			p.Rewritten++
		default:
			p.Skipped++
		}
	})
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

func (r *runner) count(f func(*Progress)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(&r.progress)
}

func (r *runner) snapshot() Progress {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.progress
	p.Failures = append([]Failure(nil), r.progress.Failures...)
	return p
}

func (r *runner) report() {
	if r.opts.OnProgress != nil {
		r.opts.OnProgress(r.snapshot())
	}
}

func (r *runner) result(complete bool) Result {
	res := Result{Progress: r.snapshot(), Complete: complete}
	if complete {
		res.Continue = ""
		r.report()
	}
	return res
}
