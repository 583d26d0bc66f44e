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
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
)

// othersWrites watches the resource from the run's checkpoint while the
// run goes on, and keeps the objects that someone other than the run wrote
// since: the catch-up sweep rewrites just those. It keeps one entry an
// object (its latest write), at most limit of them, and forgets an object
// once it is deleted.
type othersWrites struct {
	objects objectClient
	// ours tells a resourceVersion of the run's own writes. A write's event
	// can arrive before the write's answer, so an entry is checked again
	// when the bound is reached and when the sweep starts.
	ours  func(rv string) bool
	limit int

	mu sync.Mutex
	// kept holds the objects others wrote, by namespace/name.
	kept map[string]objectRef
	// seen is the last resourceVersion the watch delivered, an event's or
	// a bookmark's: a reconnection resumes from it.
	seen string
	// gap says why the watch may have missed a write; once set the watch
	// stops and kept is dropped.
	gap string
	// connectedAt is when the watch last connected; zero while it is not.
	connectedAt time.Time

	stop context.CancelFunc
	done chan struct{}
}

// watchOthers starts watching from checkpoint.
func watchOthers(ctx context.Context, objects objectClient, checkpoint string, limit int, ours func(string) bool) *othersWrites {
	ctx, stop := context.WithCancel(ctx)
	w := &othersWrites{objects: objects, ours: ours, limit: limit, kept: map[string]objectRef{}, seen: checkpoint,
		stop: stop, done: make(chan struct{})}
	go w.run(ctx)
	return w
}

// watchBackoff spaces reconnections that fail; they go on until the run
// ends or the API server answers in a way that leaves a gap (watchGap).
var watchBackoff = wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: 1 << 30, Cap: 10 * time.Second}

// run connects, and reconnects from the last revision seen whenever the
// stream ends, until the context ends or a gap opens.
func (w *othersWrites) run(ctx context.Context) {
	defer close(w.done)
	backoff := watchBackoff
	for ctx.Err() == nil {
		from := w.lastSeen()
		start := time.Now()
		stream, err := w.objects.watch(ctx, metav1.ListOptions{ResourceVersion: from, AllowWatchBookmarks: true})
		if err == nil {
			w.setConnected(true)
			err = w.consume(ctx, stream)
			w.setConnected(false)
			stream.Stop()
		}
		if w.broken() {
			return
		}
		if gap := watchGap(err, from); gap != "" {
			w.fail(gap)
			return
		}
		if err == nil && (w.lastSeen() != from || time.Since(start) >= time.Second) {
			// The server ended a stream that worked: it delivered an event
			// or a bookmark, or lasted (its timeout). Resume at once. The
			// API server's watch cache ends a watcher that falls behind its
			// events, as the run's own is when its process is busy with
			// its writes (four times in a run of 6,000 on two shared
			// cores); backing off from each such end grew to seconds, which
			// the sweep's fence then waited out.
			backoff = watchBackoff
			continue
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff.Step()):
		}
	}
}

// consume takes the stream's events until it ends. It returns the error
// the stream ended with, nil when it simply closed.
func (w *othersWrites) consume(ctx context.Context, stream watch.Interface) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-stream.ResultChan():
			if !ok {
				return nil
			}
			if ev.Type == watch.Error {
				return apierrors.FromObject(ev.Object)
			}
			obj, err := meta.Accessor(ev.Object)
			if err != nil {
				continue
			}
			if !w.take(ev.Type, objectRef{Namespace: obj.GetNamespace(), Name: obj.GetName(),
				ObjectVersion: ObjectVersion{UID: string(obj.GetUID()), ResourceVersion: obj.GetResourceVersion()}}) {
				return nil // the bound was reached: the watch is over
			}
		}
	}
}

// take records one event; false once the watch has a gap.
func (w *othersWrites) take(kind watch.EventType, ref objectRef) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.gap != "" {
		return false
	}
	w.seen = ref.ResourceVersion
	key := ref.Namespace + "/" + ref.Name
	switch kind {
	case watch.Bookmark:
	case watch.Deleted:
		delete(w.kept, key) // nothing left to migrate
	default:
		_, known := w.kept[key]
		switch {
		case w.ours(ref.ResourceVersion):
			delete(w.kept, key) // its latest write is the run's own
		case !known && !w.roomLocked():
			w.failLocked(overLimit(w.limit))
			return false
		default:
			w.kept[key] = ref
		}
	}
	return true
}

// roomLocked reports whether one more object fits under the bound, first
// dropping the entries that turned out to be the run's own writes.
func (w *othersWrites) roomLocked() bool {
	if keepsMore(len(w.kept), w.limit) {
		return true
	}
	maps.DeleteFunc(w.kept, func(_ string, ref objectRef) bool { return w.ours(ref.ResourceVersion) })
	return keepsMore(len(w.kept), w.limit)
}

func (w *othersWrites) broken() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.gap != ""
}

func (w *othersWrites) lastSeen() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seen
}

func (w *othersWrites) setConnected(connected bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.connectedAt = time.Time{}
	if connected {
		w.connectedAt = time.Now()
	}
}

func (w *othersWrites) fail(gap string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.failLocked(gap)
}

func (w *othersWrites) failLocked(gap string) {
	if w.gap == "" {
		w.gap = gap
	}
	w.kept = nil
}

// fenceAt reads the watch's state against target, the sweep's revision,
// read at since.
func (w *othersWrites) fenceAt(target uint64, since time.Time) fence {
	w.mu.Lock()
	defer w.mu.Unlock()
	f := fence{gap: w.gap, target: target, waited: time.Since(since)}
	f.seen, _ = strconv.ParseUint(w.seen, 10, 64)
	if !w.connectedAt.IsZero() {
		f.connected = time.Since(latest(w.connectedAt, since))
	}
	return f
}

// close waits until the watch has seen every write up to target (the
// sweep's revision, read at since) or cannot have, stops it, and returns
// how the sweep goes on, why, and in watch mode the objects others wrote,
// in namespace/name order.
func (w *othersWrites) close(ctx context.Context, target uint64, since time.Time) (SweepMode, string, []objectRef) {
	defer func() {
		w.stop()
		<-w.done
	}()
	tick := time.NewTicker(watchQuiet / 10)
	defer tick.Stop()
	for {
		mode, reason, done := sweepWay(w.fenceAt(target, since))
		if done && mode == SweepList {
			return mode, reason, nil
		}
		if done {
			return mode, reason, w.others()
		}
		select {
		case <-ctx.Done():
			return SweepList, ctx.Err().Error(), nil
		case <-tick.C:
		}
	}
}

// others returns the objects others wrote, in namespace/name order.
func (w *othersWrites) others() []objectRef {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]objectRef, 0, len(w.kept))
	for _, key := range slices.Sorted(maps.Keys(w.kept)) {
		if ref := w.kept[key]; !w.ours(ref.ResourceVersion) {
			out = append(out, ref)
		}
	}
	return out
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
