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

package cli

import (
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/graduation"
	"github.com/graduator/graduator/migration"
	"github.com/graduator/graduator/snapshot"
)

func TestTheBarShowsTotalPercentRateETAWritersAndFailures(t *testing.T) {
	const name = "widgets.example.com"
	for _, tc := range []struct {
		name  string
		p     migration.Progress
		live  int64
		rate  float64
		width int
		final bool
		want  string
	}{
		{"before the first page: no total yet", migration.Progress{Remaining: -1}, 0, 0, 120, false,
			"migrating widgets.example.com 0 done, counting the total  0/s  writers starting  failed 0"},
		{"objects count as they are written, before their page is done", migration.Progress{Remaining: -1, Writers: 4}, 120, 60, 120, false,
			"migrating widgets.example.com 120 done, counting the total  60/s  writers 4  failed 0"},
		{"total from remainingItemCount", migration.Progress{Listed: 1000, Rewritten: 990, Failed: 10, Remaining: 2000, Writers: 12},
			0, 250, 100, false,
			"migrating widgets.example.com [====>          ]  33% 1000/3000  250/s  ETA 8s  writers 12  failed 10"},
		{"the live count runs ahead of the pages", migration.Progress{Listed: 1000, Rewritten: 1000, Remaining: 2000, Writers: 12},
			1500, 250, 100, false,
			"migrating widgets.example.com [=======>        ]  50% 1500/3000  250/s  ETA 6s  writers 12  failed 0"},
		{"objects created during the run raise the total", migration.Progress{Listed: 2000, Rewritten: 2000, Remaining: 2000, Writers: 12},
			0, 500, 100, false,
			"migrating widgets.example.com [=======>        ]  50% 2000/4000  500/s  ETA 4s  writers 12  failed 0"},
		{"done, catching up", migration.Progress{Listed: 3000, Rewritten: 3000, Remaining: 0, CatchUp: true, CaughtUp: 7, Writers: 64},
			3000, 300, 110, false,
			"migrating widgets.example.com [===========] 100% 3000/3000  300/s  ETA 0s  writers 64  failed 0  catching up 7"},
		{"the final bar names the objects caught up", migration.Progress{Listed: 3000, Rewritten: 3000, CatchUp: true, CaughtUp: 7, Writers: 64},
			3000, 300, 110, true,
			"migrating widgets.example.com [=============] 100% 3000/3000  300/s  ETA 0s  writers 64  failed 0  caught up 7"},
		{"the final bar says nothing of a sweep that had nothing to do", migration.Progress{Listed: 3000, Rewritten: 3000, CatchUp: true, Writers: 64},
			3000, 300, 100, true,
			"migrating widgets.example.com [================] 100% 3000/3000  300/s  ETA 0s  writers 64  failed 0"},
		{"a narrow terminal drops the name first", migration.Progress{Listed: 500, Rewritten: 500, Remaining: 500, Writers: 2},
			0, 500, 70, false,
			"[========>         ]  50% 500/1000  500/s  ETA 1s  writers 2  failed 0"},
		{"a very narrow one keeps the figures", migration.Progress{Listed: 500, Rewritten: 500, Remaining: 500, Writers: 2},
			0, 500, 40, false, " 50% 500/1000  500/s  ETA 1s  writers 2 "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := renderBar(name, tc.p, figuresOf(tc.p, tc.live, tc.rate), tc.width, tc.final)
			if got != tc.want {
				t.Errorf("renderBar:\n got %q\nwant %q", got, tc.want)
			}
			if len(got) > tc.width || (strings.Contains(got, "[") && len(got) != tc.width) {
				t.Errorf("%d columns on a terminal of %d: a bar fills the line, nothing overflows it", len(got), tc.width)
			}
		})
	}
}

// A run of 3,000 objects at 100 objects a second in pages of 500: the ETA
// a person reads every redraw never climbs, and is within a few seconds
// of the time really left once the rate has settled. Counted by pages, it
// climbed between two pages (the rate sagged while the count stood still).
func TestTheETANeverClimbsWhileTheRunMoves(t *testing.T) {
	clock := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	r := newProgressReporter(io.Discard, "w", progressQuiet)
	r.start, r.now = clock, func() time.Time { return clock }
	const total, perSecond, pageSize = 3000, 100, 500
	lastETA := time.Duration(-1)
	for tick := 1; tick <= total/perSecond*4; tick++ {
		clock = clock.Add(redrawEvery)
		for range perSecond / 4 {
			r.object()
		}
		done := r.live.Load()
		if done%pageSize == 0 {
			r.update(migration.Progress{Listed: done, Rewritten: done, Remaining: total - done, Continue: "more"})
		}
		r.mu.Lock()
		r.sample()
		f := r.figures()
		r.mu.Unlock()
		if f.ETA < 0 {
			if f.Total >= 0 {
				t.Fatalf("at %d the total is %d before the first page is done", f.Done, f.Total)
			}
			continue // until the first page gives the total
		}
		if lastETA >= 0 && f.ETA > lastETA {
			t.Fatalf("at %d/%d the ETA climbed from %s to %s", f.Done, f.Total, lastETA, f.ETA)
		}
		left := time.Duration(total-done) * time.Second / perSecond
		if diff := f.ETA - left; diff > 2*time.Second || diff < -2*time.Second {
			t.Errorf("at %d/%d the ETA is %s, %s are left", f.Done, f.Total, f.ETA, left)
		}
		lastETA = f.ETA
	}
	if lastETA != 0 {
		t.Errorf("the last ETA is %s, want 0s", lastETA)
	}
}

func TestLogsGetALineAPageOfProgressAndTwoForTheSweep(t *testing.T) {
	var out strings.Builder
	r := newProgressReporter(&out, "w", progressLines)
	pages := []migration.Progress{
		{Listed: 500, Rewritten: 500, Remaining: 500, Continue: "a"},
		{Listed: 1000, Rewritten: 1000, Remaining: 0},
		// The sweep's pages: nothing new for the main pass.
		{Listed: 1000, Rewritten: 1000, Remaining: 0, CatchUp: true, Continue: "b"},
		{Listed: 1000, Rewritten: 1000, Remaining: 0, CatchUp: true, CaughtUp: 3},
	}
	for _, p := range pages {
		r.update(p)
	}
	r.done(migration.Result{Progress: pages[len(pages)-1], Complete: true})
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{
		`^w: 500/1000 \(50%\), 500 rewritten, 0 skipped, 0 failed, 0 writers, \d+ objects/s, ETA \d+s$`,
		`^w: 1000/1000 \(100%\), 1000 rewritten, 0 skipped, 0 failed, 0 writers, \d+ objects/s, ETA 0s$`,
		`^w: every listed object done; catch-up sweep of the objects written during the run started$`,
		`^w: catch-up sweep done: 3 objects written during the run caught up$`,
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), out.String())
	}
	for i, re := range want {
		if !regexp.MustCompile(re).MatchString(lines[i]) {
			t.Errorf("line %d: %q does not match %s", i+1, lines[i], re)
		}
	}
}

func TestAPlainLineAPage(t *testing.T) {
	p := migration.Progress{Listed: 1500, Rewritten: 1490, Skipped: 5, Failed: 5, Remaining: 1500, Writers: 8}
	got := renderLine("widgets.example.com", p, figuresOf(p, 0, 300))
	want := "widgets.example.com: 1500/3000 (50%), 1490 rewritten, 5 skipped, 5 failed, 8 writers, 300 objects/s, ETA 5s"
	if got != want {
		t.Errorf("\n got %q\nwant %q", got, want)
	}
	p = migration.Progress{Listed: 10, Rewritten: 10, Remaining: 30}
	rec := progressRecordOf("w", p, figuresOf(p, 0, 5), 2*time.Second)
	if rec.Total != 40 || rec.Percent != 25 || rec.ETASeconds != 6 || rec.ObjectsPerSecond != 5 {
		t.Errorf("JSON record %+v", rec)
	}
}

func TestTheRateLooksBackAWindow(t *testing.T) {
	var m rateMeter
	if got := m.add(2*time.Second, 200); got != 100 {
		t.Errorf("over the run while it is shorter than the window: %g/s, want 100", got)
	}
	m.add(10*time.Second, 1000)
	// Then 50 objects a second for 10 s.
	if got := m.add(20*time.Second, 1500); got != 50 {
		t.Errorf("the last window: %g/s, want 50", got)
	}
}

func TestDifferencesReadAsAPersonNeedsThem(t *testing.T) {
	changes, err := snapshot.Diff([]byte(`{"spec":{"color":"blue"}}`), []byte(`{"spec":{"color":"red"}}`))
	if err != nil {
		t.Fatal(err)
	}
	got := formatDifference(snapshot.Difference{Object: "default/w-3", What: snapshot.Changed, Changes: changes}) +
		formatDifference(snapshot.Difference{Object: "default/w-5", What: snapshot.Missing}) +
		formatDifference(snapshot.Difference{Object: "default/new", What: snapshot.Added}) +
		formatSummary(snapshot.Summary{Identical: 97, Changed: 1, Missing: 1, Added: 1})
	want := `default/w-3: changed
  /spec/color: "blue" -> "red"
default/w-5: only in the snapshot (deleted since)
default/new: only in the cluster (created since)
3 objects differ (1 changed, 1 only in the snapshot, 1 only in the cluster), 97 identical`
	if got != want {
		t.Errorf("\n got:\n%s\nwant:\n%s", got, want)
	}
	if got := formatSummary(snapshot.Summary{Identical: 120}); got != "120 objects identical" {
		t.Errorf("identical: %q", got)
	}
}

func TestLogsSayWhenTheRunWaitsForEtcdToCompactAndWhenItGoesOn(t *testing.T) {
	var out strings.Builder
	r := newProgressReporter(&out, "w", progressLines)
	wait := "waiting for etcd's next compaction past resourceVersion 15117 since 2026-11-25T10:56:48Z: the run's writes not compacted yet reached its budget of 27Mi"
	for _, p := range []migration.Progress{
		{Listed: 500, Rewritten: 500, Remaining: 500, Continue: "a"},
		{Listed: 500, Rewritten: 500, Remaining: 500, Continue: "a", CompactionWait: wait, CompactionWaits: 1},
		{Listed: 500, Rewritten: 500, Remaining: 500, Continue: "a", CompactionWaits: 1},
	} {
		r.update(p)
	}
	r.done(migration.Result{Progress: migration.Progress{Listed: 500, Rewritten: 500, Remaining: 500, Continue: "a"}})
	if !strings.Contains(out.String(), "w: "+wait+"\n") || !strings.Contains(out.String(), "w: etcd compacted; writing again\n") {
		t.Errorf("no line about the wait:\n%s", out.String())
	}
	bar := renderBar("w", migration.Progress{Listed: 500, Remaining: 500, CompactionWait: wait}, figures{Done: 500, Total: 1000, Percent: 50}, 200, false)
	if !strings.Contains(bar, "waiting for etcd to compact") {
		t.Errorf("the bar does not say it waits: %q", bar)
	}
}

func TestTheBarPrintsWhyTheRunWaitsOnceAboveIt(t *testing.T) {
	var out strings.Builder
	r := newProgressReporter(&out, "w", progressBar)
	wait := "waiting for etcd's next compaction past resourceVersion 15117 since 2026-11-25T10:56:48Z: the run's writes not compacted yet " +
		"reached its budget of 16Mi; etcd's database size is unknown and its quota not told: tell the quota with --etcd-quota to raise the budget"
	for _, p := range []migration.Progress{
		{Listed: 500, Rewritten: 500, Remaining: 500, Continue: "a", CompactionWait: wait, CompactionWaits: 1},
		{Listed: 500, Rewritten: 500, Remaining: 500, Continue: "a", CompactionWait: wait, CompactionWaits: 1},
		{Listed: 500, Rewritten: 500, Remaining: 500, Continue: "a", CompactionWaits: 1},
	} {
		r.update(p)
	}
	r.done(migration.Result{Progress: migration.Progress{Listed: 500, Rewritten: 500, Remaining: 500, Continue: "a"}})
	if n := strings.Count(out.String(), "w: "+wait); n != 1 {
		t.Errorf("the wait is printed %d times, want once:\n%q", n, out.String())
	}
}

func TestAWaitBeforeTheFirstWriteIsNamedAndNotCountedInTheRate(t *testing.T) {
	clock := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	var out strings.Builder
	r := newProgressReporter(&out, "w", progressLines)
	r.start, r.now = clock, func() time.Time { return clock }
	settling := graduation.Step{Conditions: []metav1.Condition{{Type: graduatorv1alpha1.ConditionMigrated,
		Reason: graduation.ReasonSettling, Message: "waiting for every API server to store v2 before migrating: " +
			"API server 10.217.0.3:6443 still serves storage version hash old, not new"}}}
	r.planned(settling)
	clock = clock.Add(22 * time.Second)
	r.planned(settling)
	r.planned(graduation.Step{Action: graduation.ActionMigrate})
	const total, perSecond, pageSize = 3000, 200, 500
	var first, last float64
	for tick := 1; tick <= total/perSecond*4; tick++ {
		clock = clock.Add(redrawEvery)
		for range perSecond / 4 {
			r.object()
		}
		if done := r.live.Load(); done%pageSize == 0 {
			// A run going on is planned again between its pages.
			r.planned(graduation.Step{Action: graduation.ActionMigrate})
			r.update(migration.Progress{Listed: done, Rewritten: done, Remaining: total - done, Continue: "more"})
			if first == 0 {
				first = r.lastRate
			}
			last = r.lastRate
		}
	}
	if !strings.Contains(out.String(), "w: waiting for every API server to store v2 before migrating: API server 10.217.0.3:6443 still serves") {
		t.Errorf("the wait is not named:\n%s", out.String())
	}
	if first == 0 || first < last/2 || first > last*2 {
		t.Errorf("the first rate after a 22 s wait is %.0f/s, the last %.0f/s: not within 2x", first, last)
	}
}
