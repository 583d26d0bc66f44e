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
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
)

func TestSweepWayTrustsTheWatchOnlyOnceItCaughtUp(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    fence
		mode SweepMode
		done bool
		says string
	}{
		{"a gap lists, whatever else", fence{gap: "the watch could not resume", seen: 90, target: 50}, SweepList, true, "could not resume"},
		{"an event or bookmark at the sweep's revision", fence{seen: 100, target: 100}, SweepWatch, true, "up to revision 100"},
		{"one past it", fence{seen: 130, target: 100, connected: time.Millisecond}, SweepWatch, true, "up to revision 100"},
		{"behind, just connected: wait", fence{seen: 90, target: 100, connected: 100 * time.Millisecond, waited: time.Second}, "", false, ""},
		{"behind, connected the quiet time since the revision was read", fence{seen: 90, target: 100, connected: watchQuiet}, SweepWatch, true,
			"up to revision 90, then stayed connected 500ms"},
		{"behind and not connected: wait", fence{seen: 90, target: 100, waited: fenceTimeout - time.Second}, "", false, ""},
		{"behind and not connected for too long: list", fence{seen: 90, target: 100, waited: fenceTimeout}, SweepList, true,
			"did not catch up with revision 100 within 30s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mode, reason, done := sweepWay(tc.f)
			if mode != tc.mode || done != tc.done || !strings.Contains(reason, tc.says) {
				t.Errorf("sweepWay(%+v) = %q, %q, %v; want %q, %v, a reason with %q", tc.f, mode, reason, done, tc.mode, tc.done, tc.says)
			}
		})
	}
}

func TestWatchGapOnlyWhereResumingCannotHelp(t *testing.T) {
	gr := schema.GroupResource{Group: "example.com", Resource: "widgets"}
	for _, tc := range []struct {
		name string
		err  error
		says string // empty: no gap, reconnect
	}{
		{"410 Expired: compacted past the revision", apierrors.NewResourceExpired("too old resource version: 5 (90)"), "could not resume from revision 5 (410 Gone"},
		{"410 Gone", apierrors.NewResourceExpired("gone"), "410 Gone"},
		{"forbidden", apierrors.NewForbidden(gr, "", errors.New("no")), "grant watch"},
		{"the resource is gone", apierrors.NewNotFound(gr, ""), "could not start"},
		{"the API server restarts", apierrors.NewServiceUnavailable("restarting"), ""},
		{"throttled", apierrors.NewTooManyRequests("slow down", 1), ""},
		{"a timeout", apierrors.NewTimeoutError("timeout", 1), ""},
		{"the connection broke", errors.New("connection refused"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := watchGap(tc.err, "5")
			if (tc.says == "") != (got == "") || !strings.Contains(got, tc.says) {
				t.Errorf("watchGap(%v) = %q, want a gap with %q", tc.err, got, tc.says)
			}
		})
	}
}

func TestKeepsMore(t *testing.T) {
	for _, tc := range []struct {
		kept, limit int
		want        bool
	}{{0, 1, true}, {9999, 10000, true}, {10000, 10000, false}, {0, 0, false}} {
		if got := keepsMore(tc.kept, tc.limit); got != tc.want {
			t.Errorf("keepsMore(%d, %d) = %v, want %v", tc.kept, tc.limit, got, tc.want)
		}
	}
}

// The watch's bookkeeping: what it keeps of the events it is given.
func TestOthersWritesKeepsTheLatestWriteOfOthersWithinTheBound(t *testing.T) {
	// 11 and 14 are the run's own; 11's event came before its answer.
	ours := map[string]bool{"14": true}
	w := &othersWrites{ours: func(rv string) bool { return ours[rv] }, limit: 2, kept: map[string]objectRef{}, seen: "10"}
	ref := func(name, rv string) objectRef {
		return objectRef{Namespace: "ns", Name: name, ObjectVersion: ObjectVersion{UID: "u-" + name, ResourceVersion: rv}}
	}
	steps := []struct {
		kind watch.EventType
		ref  objectRef
		ok   bool
	}{
		{watch.Modified, ref("a", "11"), true}, // kept until known as ours
		{watch.Modified, ref("b", "12"), true},
		{watch.Modified, ref("b", "13"), true}, // the latest write of b
		{watch.Added, ref("c", "14"), true},    // ours, known: not kept
		{watch.Bookmark, objectRef{ObjectVersion: ObjectVersion{ResourceVersion: "15"}}, true},
		{watch.Modified, ref("d", "16"), true}, // room: a turned out ours
		{watch.Deleted, ref("d", "17"), true},  // gone: nothing to migrate
		{watch.Modified, ref("e", "18"), true},
	}
	for i, s := range steps {
		if i == 1 {
			ours["11"] = true // the answer to the write of a arrives
		}
		if got := w.take(s.kind, s.ref); got != s.ok {
			t.Fatalf("take(%s %s@%s) = %v, want %v", s.kind, s.ref.Name, s.ref.ResourceVersion, got, s.ok)
		}
	}
	if w.seen != "18" {
		t.Errorf("seen = %s, want 18", w.seen)
	}
	got := w.others()
	if len(got) != 2 || got[0] != ref("b", "13") || got[1] != ref("e", "18") {
		t.Errorf("others() = %+v, want b@13 and e@18", got)
	}
	if w.take(watch.Modified, ref("f", "19")) {
		t.Fatal("a third object of others fits a bound of 2")
	}
	if w.gap == "" || !strings.Contains(w.gap, "more than 2 objects") || w.kept != nil {
		t.Errorf("past the bound: gap %q, kept %v; want the bound named and nothing kept", w.gap, w.kept)
	}
}

// streams is an objectClient whose watches are scripted: each call gets the
// next stream, or the next error.
type streams struct {
	objectClient
	from    chan string // the resourceVersion each watch asked for
	streams []*watch.FakeWatcher
	errs    []error
}

func (s *streams) watch(_ context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	s.from <- opts.ResourceVersion
	if len(s.streams) > 0 {
		w := s.streams[0]
		s.streams = s.streams[1:]
		return w, nil
	}
	err := s.errs[0]
	s.errs = s.errs[1:]
	return nil, err
}

func TestTheWatchResumesFromTheLastRevisionItSawAndStopsAtA410(t *testing.T) {
	first := watch.NewFakeWithChanSize(4, false)
	s := &streams{from: make(chan string, 4), streams: []*watch.FakeWatcher{first},
		errs: []error{apierrors.NewResourceExpired("too old resource version: 12 (20)")}}
	w := watchOthers(context.Background(), s, "10", 100, func(string) bool { return false })
	defer w.stop()
	meta := func(name, rv string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv}}
	}
	first.Modify(meta("a", "11"))
	first.Action(watch.Bookmark, meta("", "12"))
	first.Stop() // the connection drops

	if from := <-s.from; from != "10" {
		t.Errorf("the watch started from %s, want the checkpoint 10", from)
	}
	if from := <-s.from; from != "12" {
		t.Errorf("the watch resumed from %s, want the last bookmark's 12", from)
	}
	<-w.done
	mode, _, _ := sweepWay(w.fenceAt(12, time.Now()))
	others := w.others()
	if mode != SweepList || !strings.Contains(w.gap, "could not resume from revision 12 (410 Gone") || len(others) != 0 {
		t.Errorf("after a 410: mode %q, gap %q, kept %v; want list, the 410 named, nothing kept", mode, w.gap, others)
	}
}

func TestTheWatchResumesAtOnceFromAStreamTheServerEndedAfterItDeliveredEvents(t *testing.T) {
	// The watch cache ends a watcher that falls behind its events: the
	// stream closes, without an error, after it delivered some. With a
	// backoff of an hour, only a watch that resumes at once from such a
	// stream reaches the third.
	defer func(b wait.Backoff) { watchBackoff = b }(watchBackoff)
	watchBackoff = wait.Backoff{Duration: time.Hour, Factor: 2, Steps: 1 << 30, Cap: time.Hour}
	first, second, third := watch.NewFakeWithChanSize(1, false), watch.NewFakeWithChanSize(1, false), watch.NewFake()
	s := &streams{from: make(chan string, 3), streams: []*watch.FakeWatcher{first, second, third}}
	w := watchOthers(context.Background(), s, "10", 100, func(string) bool { return false })
	defer w.stop()
	meta := func(name, rv string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv}}
	}
	first.Modify(meta("a", "11"))
	first.Stop()
	second.Modify(meta("b", "12"))
	second.Stop()
	for _, want := range []string{"10", "11", "12"} {
		select {
		case from := <-s.from:
			if from != want {
				t.Fatalf("the watch connected from %s, want %s", from, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no watch from %s: the watch backed off from a stream that delivered events", want)
		}
	}
}
