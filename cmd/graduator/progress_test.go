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

package main

import (
	"strings"
	"testing"
	"time"

	"github.com/graduator/graduator/migration"
	"github.com/graduator/graduator/snapshot"
)

func TestTheBarShowsTotalPercentRateETAWritersAndFailures(t *testing.T) {
	const name = "widgets.example.com"
	for _, tc := range []struct {
		name    string
		p       migration.Progress
		width   int
		elapsed time.Duration
		want    string
	}{
		{"before the first page: no total yet", migration.Progress{Remaining: -1, Writers: 4}, 80, time.Second,
			"migrating widgets.example.com 0/?  0/s  writers 4  failed 0"},
		{"total from remainingItemCount", migration.Progress{Listed: 1000, Rewritten: 990, Failed: 10, Remaining: 2000, Writers: 12},
			100, 4 * time.Second,
			"migrating widgets.example.com [====>          ]  33% 1000/3000  250/s  ETA 8s  writers 12  failed 10"},
		{"objects created during the run raise the total", migration.Progress{Listed: 2000, Rewritten: 2000, Remaining: 2000, Writers: 12},
			100, 4 * time.Second,
			"migrating widgets.example.com [=======>        ]  50% 2000/4000  500/s  ETA 4s  writers 12  failed 0"},
		{"done, catching up", migration.Progress{Listed: 3000, Rewritten: 3000, Remaining: 0, CatchUp: true, CaughtUp: 7, Writers: 64},
			110, 10 * time.Second,
			"migrating widgets.example.com [===========] 100% 3000/3000  300/s  ETA 0s  writers 64  failed 0  catching up 7"},
		{"a narrow terminal drops the name first", migration.Progress{Listed: 500, Rewritten: 500, Remaining: 500, Writers: 2},
			70, time.Second,
			"[========>         ]  50% 500/1000  500/s  ETA 1s  writers 2  failed 0"},
		{"a very narrow one keeps the figures", migration.Progress{Listed: 500, Rewritten: 500, Remaining: 500, Writers: 2},
			40, time.Second, " 50% 500/1000  500/s  ETA 1s  writers 2 "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := renderBar(name, tc.p, tc.width, tc.elapsed)
			if got != tc.want {
				t.Errorf("renderBar:\n got %q\nwant %q", got, tc.want)
			}
			if len(got) > tc.width || (strings.Contains(got, "[") && len(got) != tc.width) {
				t.Errorf("%d columns on a terminal of %d: a bar fills the line, nothing overflows it", len(got), tc.width)
			}
		})
	}
}

func TestAPlainLineAPage(t *testing.T) {
	got := renderLine("widgets.example.com", migration.Progress{Listed: 1500, Rewritten: 1490, Skipped: 5, Failed: 5, Remaining: 1500, Writers: 8},
		5*time.Second)
	want := "widgets.example.com: 1500/3000 (50%), 1490 rewritten, 5 skipped, 5 failed, 8 writers, 300 objects/s, ETA 5s"
	if got != want {
		t.Errorf("\n got %q\nwant %q", got, want)
	}
	rec := progressRecordOf("w", migration.Progress{Listed: 10, Rewritten: 10, Remaining: 30}, 2*time.Second)
	if rec.Total != 40 || rec.Percent != 25 || rec.ETASeconds != 6 || rec.ObjectsPerSecond != 5 {
		t.Errorf("JSON record %+v", rec)
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
