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
	"fmt"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// sweep rewrites what others wrote during the run: the objects the watch
// collected, or, when it cannot be trusted, the objects a LIST finds
// written since the checkpoint.
func (r *runner) sweep(ctx context.Context) (bool, error) {
	mode, reason, others := r.sweepSource(ctx)
	r.mu.Lock()
	r.progress.SweepMode, r.progress.SweepReason = mode, reason
	r.mu.Unlock()
	if mode == SweepList {
		return r.pass(ctx, catchUpPass, r.listing)
	}
	return r.pass(ctx, catchUpPass, func(ctx context.Context, out chan<- page) {
		r.pages(ctx, others, out)
	})
}

// sweepSource closes the watch at the current revision and says how the
// sweep goes on: by the objects the watch collected, or by a LIST.
func (r *runner) sweepSource(ctx context.Context) (SweepMode, string, []objectRef) {
	defer r.stopWatching()
	switch {
	case r.snapshot().Continue != "":
		return SweepList, "the run resumed a sweep that was listing", nil
	case r.others == nil:
		return SweepList, "the watch is off (SweepWatchLimit below 0)", nil
	}
	var rv string
	err := retry(ctx, func() error {
		var err error
		rv, err = r.objects.revision(ctx)
		return err
	})
	target, parseErr := strconv.ParseUint(rv, 10, 64)
	switch {
	case err != nil:
		return SweepList, fmt.Sprintf("could not read the current revision: %v", err), nil
	case parseErr != nil:
		return SweepList, fmt.Sprintf("the current revision %q is not a number", rv), nil
	}
	mode, reason, others := r.others.close(ctx, target, time.Now())
	r.mu.Lock()
	defer r.mu.Unlock()
	// The window the sweep covers ends at the revision the watch was seen
	// to reach, as a LIST's ends at its snapshot.
	r.progress.CatchUpCheckpoint = ""
	if mode == SweepWatch {
		r.progress.CatchUpCheckpoint = rv
	}
	return mode, reason, others
}

// pages sends the objects others wrote as pages of the run's page size.
func (r *runner) pages(ctx context.Context, refs []objectRef, out chan<- page) {
	defer close(out)
	rv := r.snapshot().CatchUpCheckpoint
	for len(refs) > 0 {
		n := min(len(refs), int(r.opts.PageSize))
		p := page{items: refs[:n:n], resourceVersion: rv, remaining: int64(len(refs) - n)}
		refs = refs[n:]
		select {
		case out <- p:
		case <-ctx.Done():
			return
		}
	}
}

// stopWatching ends the watch, if any, and forgets what it collected.
func (r *runner) stopWatching() {
	if r.others != nil {
		r.others.stop()
		<-r.others.done
		r.others = nil
	}
}

// SweepMode says how the catch-up sweep found the objects that others
// wrote while the run went on.
type SweepMode string

const (
	// SweepWatch: a watch from the checkpoint saw every write up to the
	// sweep's revision, and the sweep rewrote what others wrote without
	// reading the population again.
	SweepWatch SweepMode = "watch"
	// SweepList: the watch could not be trusted to have seen every write
	// (SweepReason says why), so the sweep listed every object again.
	SweepList SweepMode = "list"
)

// DefaultSweepWatchLimit bounds the objects written by others that the
// sweep's watch keeps (namespace, name, uid and resourceVersion, about
// 200 bytes each: 2 MB at the bound). Past it the sweep lists instead: so
// many writes by others make a LIST no dearer than the sweep's writes.
const DefaultSweepWatchLimit = 10000

// Waits of the sweep's fence (see sweepWay).
const (
	// watchQuiet is how long the watch must stay connected, once the
	// sweep's revision is read, when no event or bookmark reaches that
	// revision: a connected watch delivers a committed write within
	// milliseconds, and without the watch cache the API server sends no
	// bookmarks, so on a quiet resource nothing else can show the watch
	// caught up.
	watchQuiet = 500 * time.Millisecond
	// fenceTimeout is how long the sweep waits for the watch to catch up
	// before it lists instead.
	fenceTimeout = 30 * time.Second
)

// fence is what the sweep knows of its watch once it has read the sweep's
// revision (the current revision when the main pass ended).
type fence struct {
	// gap says why the watch may have missed a write; empty while it has
	// seen every write since the checkpoint.
	gap string
	// seen is the last revision the watch delivered (an event or a
	// bookmark), target the sweep's revision.
	seen, target uint64
	// connected is how long the watch has been connected without a break
	// since target was read; waited how long the sweep has waited.
	connected, waited time.Duration
}

// sweepWay decides how the sweep finds the objects others wrote: from the
// watch once it has seen every write up to the sweep's revision, by a
// LIST when it cannot have. done is false while it is too early to tell.
func sweepWay(f fence) (mode SweepMode, reason string, done bool) {
	switch {
	case f.gap != "":
		return SweepList, f.gap, true
	case f.seen >= f.target:
		return SweepWatch, fmt.Sprintf("the watch from the checkpoint saw every write up to revision %d", f.target), true
	case f.connected >= watchQuiet:
		return SweepWatch, fmt.Sprintf("the watch from the checkpoint saw every write up to revision %d, then stayed connected %s with nothing newer",
			f.seen, watchQuiet), true
	case f.waited >= fenceTimeout:
		return SweepList, fmt.Sprintf("the watch did not catch up with revision %d within %s (it saw up to %d)", f.target, fenceTimeout, f.seen), true
	}
	return "", "", false
}

// watchGap tells whether an error of the watch leaves a gap in what it
// saw, and why: a 410 means etcd compacted past the revision the watch
// must resume from, and a refusal will not change by retrying. Other
// errors (the API server restarting, a timeout) are retried from the last
// revision seen, which loses nothing.
func watchGap(err error, resourceVersion string) string {
	switch {
	case apierrors.IsResourceExpired(err), apierrors.IsGone(err):
		return fmt.Sprintf("the watch could not resume from revision %s (410 Gone: etcd compacted past it)", resourceVersion)
	case apierrors.IsForbidden(err):
		return fmt.Sprintf("no permission to watch the resource (grant watch beside get, list and patch): %v", err)
	case apierrors.IsNotFound(err), apierrors.IsMethodNotSupported(err), apierrors.IsBadRequest(err):
		return fmt.Sprintf("the watch could not start: %v", err)
	}
	return ""
}

// keepsMore reports whether the watch may keep one more object written by
// others, with kept already kept under limit.
func keepsMore(kept, limit int) bool {
	return kept < limit
}

// overLimit is the gap a watch that reached its bound leaves.
func overLimit(limit int) string {
	return fmt.Sprintf("others wrote more than %d objects during the run, the most the watch keeps (SweepWatchLimit)", limit)
}
