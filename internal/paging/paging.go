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

// Package paging lists every object of a resource a page at a time, with
// one rule for a continue token that expired and one limit on restarts.
// Every streaming read of objects uses it: the engine's listing, the
// round-trip proof's, snapshots and the cleanup.
package paging

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
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

// MaxRestarts bounds how often a continue token may expire in a row without
// the listing getting further than it got before.
const MaxRestarts = 5

// Pager lists a resource a page at a time. P is what one LIST returns: a
// list of objects, of their metadata, or a door's own page.
type Pager[P any] struct {
	// List asks for one page.
	List func(ctx context.Context, opts metav1.ListOptions) (P, error)
	// Continue is a page's continue token, "" on the last page.
	Continue func(P) string
	// PageSize is the Limit of each LIST; DefaultPageSize when 0.
	PageSize int64
	// Size, when set, is asked for the Limit of each LIST before it is
	// sent, in place of PageSize: a reader whose pace changes sizes its
	// pages by it.
	Size func() int64
	// Restart is called before a listing starts again from the first page
	// (an expired token that carried none to go on from); its error stops
	// the listing. nil restarts without a word.
	Restart func(expired error) error
}

// EachPage calls fn with every page, in order, from the continue token from
// ("" for the first page). When a continue token expires (the API server
// compacted past the listing's snapshot and answers 410 Gone, reason
// Expired), the listing goes on from the continue token the 410 carries:
// the API server's "inconsistent" continue, from the next key at its latest
// snapshot, so fn sees each object once (objects changed meanwhile as they
// are now). A 410 without such a token starts the listing again from the
// first page (after Restart): fn then sees some objects twice and must not
// mind. A listing longer than the API server's compaction interval (5
// minutes; 1,000,000 objects are read in about 4) meets an expiry every 5
// minutes, which is why it goes on rather than always starting again. At
// most MaxRestarts expiries in a row that did not get further than the
// listing had got. fn's errors are returned as they are; LIST errors too
// (the caller names the resource).
//
// Why not client-go's pager (k8s.io/client-go/tools/pager): on an expired
// token its EachListItem returns the error, and its FullListIfExpired falls
// back to one LIST without a limit, the whole resource in one response,
// which is what paging is here to avoid.
func (p Pager[P]) EachPage(ctx context.Context, from string, fn func(P) error) error {
	pageSize := p.PageSize
	if pageSize <= 0 {
		pageSize = DefaultPageSize
	}
	// restarts counts the expiries in a row that did not get further than
	// the listing before them (pages: the pages served since the listing
	// last started from the first page; reached: how far it got before).
	restarts, pages, reached := 0, 0, 0
	for {
		limit := pageSize
		if p.Size != nil {
			limit = max(1, p.Size())
		}
		page, err := p.List(ctx, metav1.ListOptions{Limit: limit, Continue: from})
		if err != nil {
			if from == "" || !apierrors.IsResourceExpired(err) {
				return err
			}
			if restarts++; restarts > MaxRestarts {
				return fmt.Errorf("%w (the listing expired %d times in a row)", err, restarts)
			}
			if from = CarriedContinue(err); from != "" {
				continue
			}
			if p.Restart != nil {
				if err := p.Restart(err); err != nil {
					return err
				}
			}
			reached, pages = max(reached, pages), 0
			continue
		}
		if pages++; pages > reached {
			restarts = 0
		}
		if err := fn(page); err != nil {
			return err
		}
		if from = p.Continue(page); from == "" {
			return nil
		}
	}
}

// Objects is the Pager of whole objects of resource.
func Objects(c dynamic.Interface, resource schema.GroupVersionResource, pageSize int64) Pager[*unstructured.UnstructuredList] {
	return Pager[*unstructured.UnstructuredList]{
		List: func(ctx context.Context, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
			return c.Resource(resource).List(ctx, opts)
		},
		Continue: func(l *unstructured.UnstructuredList) string { return l.GetContinue() },
		PageSize: pageSize,
	}
}

// EachObject calls fn on every object of resource, listing pageSize objects
// at a time (see Pager.EachPage), with the next page read while fn works
// on this one. onRestart (if not nil) is called when the listing starts
// again from the first page. fn's errors are returned as they are; LIST
// errors are wrapped.
func EachObject(ctx context.Context, c dynamic.Interface, resource schema.GroupVersionResource, pageSize int64,
	onRestart func(), fn func(*unstructured.Unstructured) error) error {
	pager := Objects(c, resource, pageSize)
	if onRestart != nil {
		pager.Restart = func(error) error { onRestart(); return nil }
	}
	var fnErr error
	err := pager.EachPageAhead(ctx, func(list *unstructured.UnstructuredList) error {
		for i := range list.Items {
			if fnErr = fn(&list.Items[i]); fnErr != nil {
				return fnErr
			}
		}
		return nil
	})
	if err != nil && fnErr == nil {
		return fmt.Errorf("list %s: %w", resource, err)
	}
	return err
}

// EachPageAhead is EachPage from the first page with the next page read
// while fn works on this one, two pages in memory at most: a reader whose
// work on a page takes as long as the LIST hides one behind the other.
// fn's errors and the listing's are returned as they are.
func (p Pager[P]) EachPageAhead(ctx context.Context, fn func(P) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pages := make(chan P)
	listed := make(chan error, 1)
	go func() {
		defer close(pages)
		listed <- p.EachPage(ctx, "", func(page P) error {
			select {
			case pages <- page:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	for page := range pages {
		if err := fn(page); err != nil {
			cancel()
			for range pages {
				// drained, so that the lister ends
			}
			return err
		}
	}
	return <-listed
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
