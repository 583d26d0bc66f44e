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

// Package paging lists every object of a resource a page at a time with a
// client-go ListPager, going on (or restarting) when its continue token
// expires. The migration's cleanup and the snapshots share it; the
// migration's own listing and the round-trip proof's share CarriedContinue.
package paging

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/pager"
)

// DefaultPageSize is the page size of every streaming read of whole objects:
// the round-trip proof's, snapshots' and verify's, the cleanup's. Chosen by
// measurement (docs/benchmarks.md, "Reads as N grows"): up to etcd 3.6, and
// on 3.7 whenever a page stops before the end of the range, etcd counts the
// keys left after every page it serves, so a pass in pages of P walks about
// N*N/(2P) index entries. At 300,000 small objects pages of 2,000 read 1.24x
// faster than pages of 500 (whole objects; the proof 1.29x) and within 2% of
// 5,000 and 10,000, for about 10 MiB more in the CLI; 5,000 cost 40 MiB.
// The engine's own pass keeps its page size (migration.DefaultPageSize).
const DefaultPageSize = 2000

// MaxRestarts bounds how often an expired continue token restarts one
// listing.
const MaxRestarts = 5

// errExpiredContinue marks a LIST that failed because its continue token
// expired (410 Gone, reason Expired): only such a failure restarts a listing.
type errExpiredContinue struct{ err error }

func (e *errExpiredContinue) Error() string { return e.err.Error() }
func (e *errExpiredContinue) Unwrap() error { return e.err }

// EachObject calls fn on every object of resource, listing pageSize objects
// at a time with a client-go ListPager. When a continue token expires (the
// API server compacted past the listing's snapshot and answers 410 Gone),
// onRestart is called (if not nil) and the listing goes on from the
// continue token the 410 carries: the API server's "inconsistent" continue,
// from the next key at its latest snapshot, so fn sees each object once
// (objects changed meanwhile as they are now). A 410 without such a token
// restarts the listing from the first page, and fn then sees some objects
// twice and must not mind. At most MaxRestarts expiries in a row that did
// not get further. fn's errors are returned as they are; LIST errors
// are wrapped.
//
// Why EachListItem and a restart of our own rather than the pager's
// FullListIfExpired (k8s.io/client-go/tools/pager): FullListIfExpired is only
// honoured by ListPager.List, which accumulates every page into one list in
// memory anyway, and on an expired token it falls back to a single LIST
// without a limit: the whole resource in one response, which is exactly what
// paging is here to avoid. EachListItem never falls back: it returns the
// Expired error, and we go on (or start again) ourselves, which keeps memory
// at a few pages. A listing longer than the API server's compaction interval
// (5 minutes; 1,000,000 objects are read in about 4) meets an expiry every 5
// minutes: restarting from the beginning each time could never finish.
// PageBufferSize bounds how many pages the pager's background goroutine
// fetches ahead of fn (its default is 10).
func EachObject(ctx context.Context, c dynamic.Interface, resource schema.GroupVersionResource, pageSize int64,
	onRestart func(), fn func(*unstructured.Unstructured) error) error {
	p := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		list, err := c.Resource(resource).List(ctx, opts)
		if err != nil {
			err = fmt.Errorf("list %s: %w", resource, err)
			if opts.Continue != "" && apierrors.IsResourceExpired(err) {
				return nil, &errExpiredContinue{err: err}
			}
			return nil, err
		}
		return list, nil
	})
	p.PageSize = pageSize
	p.PageBufferSize = 1
	p.FullListIfExpired = false // not used by EachListItem; stated for the reader
	opts := metav1.ListOptions{}
	for restarts := 0; ; restarts++ {
		seen := false
		err := p.EachListItem(ctx, opts, func(o runtime.Object) error {
			seen = true
			obj, ok := o.(*unstructured.Unstructured)
			if !ok {
				return fmt.Errorf("list %s: unexpected item type %T", resource, o)
			}
			return fn(obj)
		})
		var expired *errExpiredContinue
		if !errors.As(err, &expired) {
			return err
		}
		if seen && opts.Continue != "" {
			restarts = 0 // went on from a carried token, and got further
		}
		if restarts >= MaxRestarts {
			return fmt.Errorf("%w (the listing expired %d times in a row)", expired.err, restarts+1)
		}
		if onRestart != nil {
			onRestart()
		}
		opts = metav1.ListOptions{Continue: CarriedContinue(expired.err)}
	}
}

// CarriedContinue is the continue token a LIST's 410 Gone (reason Expired)
// carries, or "". The API server answers a continue token older than its
// compaction with a token of its own (an "inconsistent" continue): it goes
// on from the next key at the latest snapshot, so a listing that follows it
// sees every object once, those after the key as they are now.
func CarriedContinue(err error) string {
	var status apierrors.APIStatus
	if !apierrors.IsResourceExpired(err) || !errors.As(err, &status) {
		return ""
	}
	return status.Status().Continue
}
