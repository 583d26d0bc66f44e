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
// win: the object is then counted as skipped, never overwritten.
//
// The package is used by the Graduator operator and CLI, and works in your
// own envtest suites: give it a dynamic client and the resource.
package migration

import (
	"context"
	"errors"
	"fmt"
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
	// the listing is complete.
	Continue string
	// Listed objects, Rewritten ones, Skipped ones (deleted or written by
	// someone else meanwhile, or written after the checkpoint) and Failed
	// ones.
	Listed, Rewritten, Skipped, Failed int64
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
	if f.Namespace == "" {
		return f.Name + ": " + f.Reason
	}
	return f.Namespace + "/" + f.Name + ": " + f.Reason
}

// Result is the outcome of a Run.
type Result struct {
	Progress
	// Complete is true when the listing reached its end: every object was
	// handled (successfully or not).
	Complete bool
}

// Run rewrites every object of opts.Resource. It returns when the listing is
// complete, when the context is cancelled (with the progress of the last
// complete page, from which a later run can resume), or on an error that
// stops the listing itself. Errors writing single objects do not stop it:
// they are counted in Failed and named in Failures.
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
	return r.run(ctx)
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
}

// page is one LIST response, or the error that ended the listing.
type page struct {
	items           []unstructured.Unstructured
	resourceVersion string
	continueToken   string
	err             error
}

func (r *runner) run(ctx context.Context) (Result, error) {
	listCtx, stopListing := context.WithCancel(ctx)
	defer stopListing()
	// One page is fetched ahead while the workers write the current one;
	// memory holds at most two pages.
	pages := make(chan page, 1)
	go r.list(listCtx, r.progress.Continue, pages)

	work := make(chan *unstructured.Unstructured)
	var workers sync.WaitGroup
	var pageDone sync.WaitGroup
	for range r.opts.Concurrency {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for obj := range work {
				r.migrate(ctx, obj)
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
			return r.result(false), p.err
		}
		saved := r.snapshot()
		r.mu.Lock()
		if r.progress.Checkpoint == "" {
			r.progress.Checkpoint = p.resourceVersion
		}
		r.progress.Listed += int64(len(p.items))
		r.mu.Unlock()

		for i := range p.items {
			pageDone.Add(1)
			select {
			case work <- &p.items[i]:
			case <-ctx.Done():
				pageDone.Done()
			}
		}
		pageDone.Wait()
		if ctx.Err() != nil {
			// The page may be half done: report the last complete page, so
			// that a resumed run lists this page again.
			r.mu.Lock()
			r.progress = saved
			r.mu.Unlock()
			return r.result(false), ctx.Err()
		}
		r.mu.Lock()
		r.progress.Continue = p.continueToken
		r.mu.Unlock()
		r.report()
	}
	if ctx.Err() != nil {
		return r.result(false), ctx.Err()
	}
	return r.result(true), nil
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
		if err != nil {
			if ctx.Err() == nil {
				pages <- page{err: fmt.Errorf("list %s: %w", r.opts.Resource, err)}
			}
			return
		}
		p := page{items: list.Items, resourceVersion: list.GetResourceVersion(), continueToken: list.GetContinue()}
		select {
		case pages <- p:
		case <-ctx.Done():
			return
		}
		if p.continueToken == "" {
			return
		}
		continueToken = p.continueToken
	}
}

// migrate rewrites one object, or skips it when it is already newer than
// the checkpoint.
func (r *runner) migrate(ctx context.Context, obj *unstructured.Unstructured) {
	if ctx.Err() != nil {
		return
	}
	if newer, _ := isNewer(obj.GetResourceVersion(), r.checkpoint()); newer {
		r.count(func(p *Progress) { p.Skipped++ })
		return
	}
	if err := r.limiter.Wait(ctx); err != nil {
		return
	}
	err := retry(ctx, func() error { return r.write(ctx, obj) })
	switch {
	case err == nil:
		r.count(func(p *Progress) { p.Rewritten++ })
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		// Written or deleted by someone else since the LIST: nothing to do.
		r.count(func(p *Progress) { p.Skipped++ })
	case ctx.Err() != nil:
	default:
		r.count(func(p *Progress) {
			p.Failed++
			if len(p.Failures) < r.opts.MaxFailures {
				p.Failures = append(p.Failures, Failure{Namespace: obj.GetNamespace(), Name: obj.GetName(), Reason: err.Error()})
			}
		})
	}
}

// write sends the no-op merge patch with the object's resourceVersion and
// uid as preconditions.
func (r *runner) write(ctx context.Context, obj *unstructured.Unstructured) error {
	patch := fmt.Appendf(nil, `{"metadata":{"resourceVersion":%q,"uid":%q}}`, obj.GetResourceVersion(), obj.GetUID())
	var subresources []string
	if r.opts.WriteTo == WriteToStatus {
		subresources = []string{"status"}
	}
	_, err := r.client.Resource(r.opts.Resource).Namespace(obj.GetNamespace()).
		Patch(ctx, obj.GetName(), types.MergePatchType, patch, metav1.PatchOptions{}, subresources...)
	return err
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

func (r *runner) checkpoint() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.progress.Checkpoint
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
